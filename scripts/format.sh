#!/usr/bin/env bash
# Formats the C++/CUDA sources with clang-format (the root .clang-format), or with --check lists
# the files whose formatting differs and exits 1 (nothing is changed). Extra arguments narrow it
# to those files or folders; default: every tracked *.cc, *.h, *.cu, *.cuh.
# Usage: scripts/format.sh [--check] [PATH...]   (CLANG_FORMAT overrides the binary)
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
fmt=${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format || true)}
if [ -z "$fmt" ]; then
  echo "format.sh: clang-format not found (Debian: apt-get install clang-format-14)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files -- "${@:-.}" | grep -E '\.(cc|h|cu|cuh)$' || true)
if [ "${#files[@]}" -eq 0 ]; then
  echo "format.sh: no C++ sources under: ${*:-.}" >&2
  exit 2
fi
if [ "$check" = 0 ]; then
  "$fmt" -i --style=file "${files[@]}"
  exit 0
fi
# One clang-format run: --dry-run reports the first misformatted spot of each file.
rc=0
out=$("$fmt" --style=file --dry-run --Werror --ferror-limit=1 "${files[@]}" 2>&1) || rc=$?
mapfile -t bad < <(sed -n 's/^\([^ :]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' \
                   <<<"$out" | sort -u)
if [ "$rc" != 0 ] && [ "${#bad[@]}" = 0 ]; then
  echo "format.sh: clang-format failed (exit $rc):" >&2
  echo "$out" >&2
  exit 2
fi
for f in "${bad[@]}"; do
  echo "format.sh: $f is not formatted (run scripts/format.sh $f)"
done
echo "format.sh: ${#files[@]} files checked, ${#bad[@]} not formatted"
[ "${#bad[@]}" = 0 ]
