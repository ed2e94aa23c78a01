#!/usr/bin/env bash
# scripts/check_layering.py finds what it must: a throwaway tree with one forbidden include per
# rule and a link graph with a forbidden link, a launcher link to CUDA and a cycle fails with each
# named (file:line or target -> target); the same tree without them passes.
#   layering_selftest.sh PYTHON CHECK_LAYERING_PY
set -euo pipefail
py=$1 check=$2
fail() { echo "layering_selftest: FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d /tmp/ds-layering-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
t=$tmp/src
mkdir -p "$t"/{core,comm/store,comm/gloo,zero,runtime/engine,launcher/agent,launcher/ssh}
touch "$t/core/CMakeLists.txt"
put() { printf '%s\n' "${@:2}" >"$t/$1"; }
# Allowed edges, one of each kind.
put core/dtype.h '#include <fmt/format.h>' '#include "core/error.h"' '#include "ds/config.h"'
put comm/registry.cc '#include "comm/gloo/gloo_backend.h"' '#include "comm/store/store.h"'
put comm/gloo/gloo_backend.cc '#include "comm/backend.h"'
put zero/partition.cc '#include "comm/process_group.h"'
put runtime/engine/trainer.cc '#include "zero/zero_engine.h"' '#include "comm/bootstrap.h"'
put launcher/main.cc '#include "launcher/agent/node_agent.h"' '#include "core/env.h"'
put launcher/ssh_alias.cc '#include "launcher/ssh/ssh_config.h"'
put launcher/ssh/ssh_runner.cc '#include "launcher/runners.h"'
cat >"$tmp/ok.dot" <<'DOT'
"n0" [ label = "ds_core" ];
"n1" [ label = "ds_comm" ];
"n2" [ label = "ds_launcher" ];
"n3" [ label = "fmt::fmt" ];
"n1" -> "n0"
"n2" -> "n0"
"n0" -> "n3"
DOT
out=$("$py" "$check" --source "$t" --dot "$tmp/ok.dot") || fail "clean tree rejected: $out"

# One violation per rule.
put core/bad.h '' '#include "zero/partition.h"'
put comm/store/bad.cc '#include "comm/process_group.h"'
put comm/work.cc '#include "comm/nccl/nccl_backend.h"'
put comm/gloo/bad.cc '#include "comm/registry.h"'
put zero/bad.cc '#include "runtime/engine/trainer.h"'
put launcher/cli.cc '#include "comm/store/tcp_store.h"' '#include "launcher/ssh/line_relay.h"'
put launcher/ssh/ssh_config.cc '#include "launcher/ssh/ssh_config.h"' '#include "launcher/cli.h"'
cat >"$tmp/bad.dot" <<'DOT'
"n0" [ label = "ds_core" ];
"n1" [ label = "ds_comm" ];
"n2" [ label = "ds_comm_gloo" ];
"n3" [ label = "ds_launcher" ];
"n4" [ label = "CUDA::cudart" ];
"n5" [ label = "ds_zero" ];
"n1" -> "n2"
"n2" -> "n1"
"n3" -> "n4"
"n0" -> "n5"
DOT
set +e
out=$("$py" "$check" --source "$t" --dot "$tmp/bad.dot")
rc=$?
set -e
echo "$out"
[ $rc -eq 1 ] || fail "violations not reported by exit status 1 (got $rc)"
for want in 'core/bad.h:2: forbidden include core -> zero' \
            'comm/store/bad.cc:1: forbidden include comm/store/bad.cc -> comm/process_group.h' \
            'comm/work.cc:1: forbidden include comm/work.cc -> comm/nccl/nccl_backend.h' \
            'comm/gloo/bad.cc:1: forbidden include comm/gloo/bad.cc -> comm/registry.h' \
            'zero/bad.cc:1: forbidden include zero -> runtime' \
            'launcher/cli.cc:1: forbidden include launcher -> comm' \
            'launcher/cli.cc:2: forbidden include launcher/cli.cc -> launcher/ssh/line_relay.h' \
            'ssh_config.cc:2: forbidden include launcher/ssh/ssh_config.cc -> launcher/cli.h' \
            'target ds_core -> ds_zero: forbidden link core -> zero' \
            'target ds_launcher -> CUDA::cudart: the launcher may not link' \
            'link cycle: ds_comm -> ds_comm_gloo -> ds_comm' \
            '11 violation(s)'; do
  grep -qF "$want" <<<"$out" || fail "not reported: $want"
done
echo "layering_selftest: every planted violation reported: ok"
