#!/usr/bin/env bash
# Fails when program code reads an environment variable by name outside the knob registry
# (core/knobs.*): every knob is declared in a component's *_knobs.h and read through
# core/knobs.h's accessors. Also fails when a declared knob is missing from its component's
# table (then --help-env and docs/knobs.md would not list it). Run by ctest (knobs_env_reads).
# Usage: scripts/check_env_reads.sh [SOURCE_ROOT]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
dirs=(core comm zero runtime launcher bench)
status=0

# Direct reads: getenv/secure_getenv, the removed getEnv* helpers, and lookups of an upper-case
# literal in an environment map (env.find("HOME"), env.count("RANK"), ...).
pattern='(\bgetenv|secure_getenv|\bgetEnv(Int|Bool)?|\benv(String|Int|Bool))\s*\(|[Ee]nv\w*\s*(\.|->)\s*(find|count|at|contains)\s*\(\s*"[A-Z][A-Z0-9_]*"'
if hits=$(grep -rnE --include='*.cc' --include='*.h' --include='*.cu' "$pattern" "${dirs[@]}" |
          grep -vE '^core/knobs\.(h|cc):'); then
  echo "$hits"
  echo "error: the lines above read the environment directly; declare the variable in the"
  echo "component's *_knobs.h and read it with core/knobs.h's accessors (docs/knobs.md)"
  status=1
fi

# Every `inline constexpr Knob kName{` is listed as &kName in its file's table.
while IFS= read -r f; do
  for name in $(grep -oE 'inline constexpr Knob k[A-Za-z0-9]+' "$f" | awk '{print $4}'); do
    if ! grep -qE "&${name}\b" "$f"; then
      echo "error: $f declares knob $name but its table does not list &$name"
      status=1
    fi
  done
done < <(grep -rlE --include='*_knobs.h' 'inline constexpr Knob k' "${dirs[@]}")
exit $status
