#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz/*_fuzz.cc) with clang in their own build dir and
# runs each from a scratch copy of its committed corpus (tests/fuzz/corpus/<name>/):
#   scripts/fuzz.sh [NAME...]            each for DS_FUZZ_SECONDS (default 30) seconds
#   scripts/fuzz.sh --runs N [NAME...]   each for N executions (no time limit)
#   scripts/fuzz.sh --record [NAME...]   each for DS_FUZZ_RUNS (default 1000000) executions, then
#                                        writes bench/results/fuzz.txt (executions, rate, coverage,
#                                        corpus size, crashes) and merges new inputs that add
#                                        coverage into the committed corpus
# NAME is a harness name (store_message_fuzz) or a prefix of one (store). Skips (exit 0) when
# clang's libFuzzer does not work here; exits non-zero on a finding (the crashing input is left in
# $BUILD_DIR/fuzz-findings/<name>/, replay it with `$BUILD_DIR/<name> FILE`).
# Each harness names what it is built from in its first lines: `// fuzz-sources: GLOB...` (tree
# sources besides core/*.cc) and `// fuzz-libs: -lX...`; `// fuzz-deps:` is CMake's (replay build).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${DS_FUZZ_BUILD_DIR:-build-fuzz}
SECONDS_EACH=${DS_FUZZ_SECONDS:-30}
RUNS=""
RECORD=0
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS=$2; shift 2 ;;
    --record) RECORD=1; RUNS=${DS_FUZZ_RUNS:-1000000}; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
wanted=("$@")

probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <cstddef>\n#include <cstdint>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n' \
  >"$probe/p.cc"
if ! command -v clang++ >/dev/null ||
   ! clang++ -fsanitize=fuzzer,address,undefined "$probe/p.cc" -o "$probe/p" 2>/dev/null ||
   ! "$probe/p" -runs=1 >/dev/null 2>&1; then
  echo "fuzz.sh: clang's libFuzzer is not usable here; skipping the fuzz run"
  exit 0
fi

# Every source is compiled once to an object (through ccache when present), all instrumented,
# then each harness links its own. Not through CMake: the harnesses build with clang while the
# tree's build is GCC's, and each needs only a few folders' sources.
cxx=(clang++)
if command -v ccache >/dev/null; then cxx=(ccache clang++); fi
flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -I.)
[ -d build/generated ] && flags+=(-Ibuild/generated)
mkdir -p "$BUILD_DIR/obj"
object() {  # object SRC -> prints the object path, compiling it when needed
  local src=$1 obj="$BUILD_DIR/obj/${1//\//_}.o"
  "${cxx[@]}" "${flags[@]}" -c "$src" -o "$obj"
  echo "$obj"
}
directive() {  # directive FILE KEY -> the words after `// KEY:` in FILE's header comment
  sed -n "s|^// $2:[[:space:]]*||p" "$1" | head -n 1
}

selected() {
  [ ${#wanted[@]} -eq 0 ] && return 0
  local w
  for w in "${wanted[@]}"; do [[ $1 == "$w"* ]] && return 0; done
  return 1
}

status=0
record_rows=()
for src in tests/fuzz/*_fuzz.cc; do
  name=$(basename "$src" .cc)
  selected "$name" || continue
  bin="$BUILD_DIR/$name"
  echo "fuzz.sh: building $bin"
  objs=()
  for f in "$src" core/*.cc $(directive "$src" fuzz-sources); do
    obj=$(object "$f") || exit 1
    objs+=("$obj")
  done
  read -r -a libs <<<"$(directive "$src" fuzz-libs)"
  clang++ -fsanitize=fuzzer,address,undefined "${objs[@]}" "${libs[@]}" -lfmt -lpthread -o "$bin"
  work="$BUILD_DIR/fuzz-corpus/$name"
  findings="$BUILD_DIR/fuzz-findings/$name"
  mkdir -p "$work" "$findings" "tests/fuzz/corpus/$name"
  cp -n "tests/fuzz/corpus/$name"/* "$work"/ 2>/dev/null || true
  # Undefined behaviour (UBSan) stops the run like a crash; ASan's leak check stays on.
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
  limit=(-max_total_time="$SECONDS_EACH")
  [ -n "$RUNS" ] && limit=(-runs="$RUNS")
  echo "fuzz.sh: running $name (${limit[*]})"
  start=$(date +%s)
  crashes=0
  if ! "$bin" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$findings/" \
      -print_final_stats=1 "$work" 2>"$BUILD_DIR/$name.log"; then
    echo "fuzz.sh: $name found a failure; see $BUILD_DIR/$name.log and $findings/"
    tail -n 40 "$BUILD_DIR/$name.log"
    status=1
    crashes=1
  else
    grep -E '^stat::number_of_executed_units|^Done' "$BUILD_DIR/$name.log" || true
  fi
  secs=$(( $(date +%s) - start ))
  if [ "$RECORD" = 1 ]; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$BUILD_DIR/$name.log" | tail -n 1)
    cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$BUILD_DIR/$name.log" | tail -n 1)
    # Keep the inputs that add coverage: merge the scratch corpus into the committed one.
    "$bin" -merge=1 "tests/fuzz/corpus/$name" "$work" >"$BUILD_DIR/$name.merge.log" 2>&1 || true
    files=$(find "tests/fuzz/corpus/$name" -type f | wc -l)
    record_rows+=("$(printf '%-26s %12s %7s %9s  %-22s %7s %8s' "$name" "${execs:-0}" "$secs" \
      "$(( ${execs:-0} / (secs > 0 ? secs : 1) ))" "${cov:-?}" "$files" "$crashes")")
  fi
done

if [ "$RECORD" = 1 ]; then
  out=bench/results/fuzz.txt
  [ -f "$out" ] && cp "$out" "$out.old"
  {
    echo "# libFuzzer runs of every harness in tests/fuzz (written by scripts/fuzz.sh --record)."
    echo "# date: $(date -u +%Y-%m-%dT%H:%MZ)  commit: $(git rev-parse --short HEAD 2>/dev/null || echo ?)"
    echo "# $(clang++ --version | head -n 1); -fsanitize=fuzzer,address,undefined -O1;" \
      "$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
    echo "# runs per harness: $RUNS, one process each, from tests/fuzz/corpus/<name>;" \
      "corpus files = committed corpus after the merge"
    printf '%-26s %12s %7s %9s  %-22s %7s %8s\n' harness executions seconds exec/s \
      "coverage (edges, feat)" corpus crashes
    for src in tests/fuzz/*_fuzz.cc; do  # this run's rows; earlier rows of the others kept
      name=$(basename "$src" .cc)
      row=$(printf '%s\n' "${record_rows[@]}" | grep "^$name " || true)
      [ -n "$row" ] || row=$(grep "^$name " "$out.old" 2>/dev/null || true)
      [ -n "$row" ] && echo "$row"
    done
  } >"$out.new"
  mv "$out.new" "$out"
  rm -f "$out.old"
  echo "fuzz.sh: wrote $out"
  cat "$out"
fi
exit $status
