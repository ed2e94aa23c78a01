#!/usr/bin/env bash
# Launch latency: dsrun start to exit, median of N rounds (default 7), for 8 local ranks of
# /bin/true, 2 loopback hosts x 4 ranks over ssh (libssh) and over pdsh, and, in the same run,
# `mpirun -np 8 /bin/true` as the peer. Starts its own test cluster (scripts/test_cluster.sh).
# The floor rows time what every remote launch pays without dsrun: one OpenSSH session running
# `true`, pdsh to both hosts, and the remote user's shell start-up alone (sshd runs every command
# as `$SHELL -c ...`; bash then sources ~/.bashrc), so dsrun's own share is the difference.
#   bench/launch_bench.sh [BUILD_DIR] [RUNS]     # writes bench/results/launch.txt
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${2:-7}
dsrun="$(cd "$build" && pwd)/dsrun"
[ -x "$dsrun" ] || { echo "launch_bench: no $dsrun (build the dsrun target first)" >&2; exit 2; }
out=bench/results/launch.txt
tmp=$(mktemp -d /tmp/dslaunch.XXXXXX)
cleanup() { scripts/test_cluster.sh stop "$tmp/cluster" >/dev/null 2>&1 || true; rm -rf "$tmp"; }
trap cleanup EXIT
scripts/test_cluster.sh start "$tmp/cluster" --hosts 2 >/dev/null
set -a
. "$tmp/cluster/env"
set +a
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
printf '127.0.0.2 slots=4\n127.0.0.3 slots=4\n' > "$tmp/hostfile"

shell=$(getent passwd "$(id -un)" | cut -d: -f7)
# One case per row: its name and the command (a function, so quoting stays intact).
names=(
  "dsrun 8 local ranks /bin/true"
  "dsrun ssh 2 hosts x 4 ranks /bin/true"
  "dsrun pdsh 2 hosts x 4 ranks /bin/true"
  "mpirun -np 8 /bin/true (peer)"
  "floor: ssh 127.0.0.2 true (1 host)"
  "floor: pdsh -R ssh -tt 2 hosts true"
  "floor: $(basename "$shell") -c true as sshd runs it"
)
case_0() { "$dsrun" --num_gpus 8 --no_local_rank /bin/true; }
case_1() { "$dsrun" --hostfile "$tmp/hostfile" --launcher ssh --no_local_rank /bin/true; }
case_2() { "$dsrun" --hostfile "$tmp/hostfile" --launcher pdsh --no_local_rank /bin/true; }
case_3() { mpirun --allow-run-as-root --oversubscribe -np 8 /bin/true; }
case_4() { ssh -F "$DS_TEST_CLUSTER_DIR/ssh_config" 127.0.0.2 true; }
case_5() { PDSH_SSH_ARGS_APPEND="$PDSH_SSH_ARGS_APPEND -tt" pdsh -S -R ssh -w 127.0.0.2,127.0.0.3 true; }
# The login shell as sshd starts it: SSH_CLIENT set, no SHLVL (bash then sources ~/.bashrc).
case_6() { env -u SHLVL SSH_CLIENT='127.0.0.1 1 22' "$shell" -c true; }

# Rounds: every case once per round, in order, so that load changing during the run (a shared
# machine) hits every row alike; one warm-up round first. Prints median/min/max per case.
run_all() {
  local n=${#names[@]} i r t0 t1
  declare -A times
  for i in $(seq 0 $((n - 1))); do
    "case_$i" >/dev/null 2>&1 || { echo "launch_bench: '${names[$i]}' failed" >&2; "case_$i" 2>&1 | tail -5 >&2; exit 1; }
  done
  for r in $(seq 1 "$runs"); do
    for i in $(seq 0 $((n - 1))); do
      t0=$(date +%s.%N)
      "case_$i" >/dev/null 2>&1
      t1=$(date +%s.%N)
      times[$i]+="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }') "
    done
  done
  for i in $(seq 0 $((n - 1))); do
    local sorted med
    sorted=$(printf '%s\n' ${times[$i]} | sort -g)
    med=$(echo "$sorted" | sed -n "$(( (runs + 1) / 2 ))p")
    printf '%-44s median %6.3f s   min %6.3f   max %6.3f   (n=%d)\n' "${names[$i]}" "$med" \
      "$(echo "$sorted" | head -1)" "$(echo "$sorted" | tail -1)" "$runs"
  done
}

{
  echo "# command: bench/launch_bench.sh $build $runs"
  echo "# date: $(date -u +%FT%TZ)  host: $(hostname)  cpus: $(nproc)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# dsrun: $dsrun ($("$dsrun" --version 2>/dev/null | head -1))"
  echo "# one warm-up round, then $runs rounds of every case in turn; start-to-exit wall clock"
  run_all
  echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out"
