#!/usr/bin/env bash
# Lint: clang-tidy (the root .clang-tidy; Debian clang-tidy 14) over the C++ sources of the given
# folders, then the clang-format check (scripts/format.sh --check) over the whole tree. Exit 0
# only when both are clean. Default folder: zero. The compile commands come from a configure-only
# tree, $DS_LINT_BUILD_DIR (default build-lint), created on first use.
# Usage: scripts/lint.sh [--no-format | --format-only] [FOLDER...]   e.g. scripts/lint.sh zero comm
set -euo pipefail
cd "$(dirname "$0")/.."
tidy=1 format=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-format) format=0; shift ;;
    --format-only) tidy=0; shift ;;
    -*) echo "lint.sh: unknown option '$1' (usage: lint.sh [--no-format|--format-only] [FOLDER...])" >&2
        exit 2 ;;
    *) break ;;
  esac
done
folders=("${@:-zero}")
for f in "${folders[@]}"; do
  if [ ! -d "$f" ]; then echo "lint.sh: no folder '$f'" >&2; exit 2; fi
done
rc=0
if [ "$tidy" = 1 ]; then
  runner=$(command -v run-clang-tidy-14 || command -v run-clang-tidy || true)
  binary=$(command -v clang-tidy-14 || command -v clang-tidy || true)
  if [ -z "$runner" ] || [ -z "$binary" ]; then
    echo "lint.sh: clang-tidy not found (Debian: apt-get install clang-tidy-14)" >&2
    exit 2
  fi
  dir=${DS_LINT_BUILD_DIR:-build-lint}
  if [ ! -f "$dir/compile_commands.json" ]; then
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  fi
  # Folder paths as regexes over absolute file names: sources to check, and headers to report.
  root=$(pwd)
  alt=$(printf '%s|' "${folders[@]%/}")
  alt=${alt%|}
  files_re="^${root}/(${alt})/.*\.cc$"
  echo "lint.sh: clang-tidy over ${folders[*]}"
  # -mavx512fp16: clang 14 knows _Float16 (core/dtype.h) on x86 only with that target feature;
  # clang-tidy only parses, so the flag changes no generated code.
  "$runner" -clang-tidy-binary "$binary" -p "$dir" -quiet -j "${DS_JOBS:-$(nproc)}" \
    -extra-arg=-mavx512fp16 -header-filter "^${root}/(${alt})/" "$files_re" || rc=1
fi
if [ "$format" = 1 ]; then
  bash scripts/format.sh --check || rc=1
fi
exit $rc
