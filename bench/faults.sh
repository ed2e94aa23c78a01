#!/usr/bin/env bash
# The fault set's long form (tests/e2e/fault_test.cc, label fault): TRIALS trials (default 4) of
# every ZeRO stage x offload mode (stage 0; stages 1-3 with offload none, cpu, nvme) in each of
# its three cases: a rank SIGKILLed at a random step with --max_restarts 1, a rank SIGKILLed inside
# a checkpoint save with --max_restarts 1, and a rank SIGKILLed at a random step without restarts
# (then resumed with --resume latest). Writes one line per trial and the totals:
#   bench/faults.sh [BUILD_DIR] [TRIALS] [SEED]     # writes bench/results/faults.txt
# A trial is clean when the exit status is the expected one, no process of the job is left when
# dsrun exits, the resume starts at the newest checkpoint before the kill and its per-step losses
# equal the uninterrupted run's bit for bit. "s" is the wall clock from the rank's own stamp just
# before its SIGKILL to dsrun's restart line (restart, save) or to dsrun's exit (no-restart).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
trials=${2:-4}
seed=${3:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
bin="$(cd "$build" && pwd)"
for t in dsrun dsrt tests/test_e2e; do
  [ -x "$bin/$t" ] || { echo "faults: no $bin/$t (build dsrun, dsrt and test_e2e first)" >&2; exit 2; }
done
out=bench/results/faults.txt
rec=$(mktemp /tmp/dsfaults.XXXXXX)
log=$(mktemp /tmp/dsfaults-log.XXXXXX)
trap 'rm -f "$rec" "$log"' EXIT
load0=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s)
status=0
DS_FAULT_TRIALS=$trials DS_FAULT_SEED=$seed DS_FAULT_RECORD=$rec "$bin/tests/test_e2e" '[fault]' \
  >"$log" 2>&1 || status=$?
secs=$(( $(date +%s) - start ))
{
  echo "# command: bench/faults.sh $build $trials $seed"
  echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(hostname)  cpus: $(nproc)  load: $load0"
  echo "# dsrun: $bin/dsrun ($("$bin/dsrun" --version)), commit $(git rev-parse --short HEAD)"
  echo "# 2 local ranks, built-in plan, $(grep -o 'kSteps = [0-9]*' tests/e2e/restart_e2e.h | cut -d' ' -f3) steps, checkpoint every $(grep -o 'kCkptEvery = [0-9]*' tests/e2e/restart_e2e.h | cut -d' ' -f3); test_e2e '[fault]' exit status $status, ${secs} s"
  echo "# per trial: s = wall clock from the rank's own stamp just before its SIGKILL to dsrun's restart line (restart, save) or dsrun's exit (no-restart); orphans = processes of the job left when dsrun exited; trajectory = the resumed run's per-step losses vs the uninterrupted run's, bit for bit"
  awk -F'|' '
    { k = $1; gsub(/ /, "", k); n++; nk[k]++
      if ($10 ~ /clean/) { clean++; ck[k]++ }
      split($7, o, " "); orphans += o[2]
      t = $6 + 0; if (t > max) max = t; if (t >= 0 && t <= 5) fast++
      if ($9 ~ /equal/) same++ }
    END {
      printf "# trials %d: clean %d/%d, orphans %d, <= 5 s to restart/exit %d/%d (max %.2f s), trajectory equal %d/%d\n", n, clean, n, orphans, fast, n, max, same, n
      for (k in nk) printf "#   %-10s clean %d/%d\n", k, ck[k], nk[k] }' "$rec"
  cat "$rec"
} >"$out"
head -8 "$out"
if [ "$status" -ne 0 ]; then
  echo "faults: test_e2e '[fault]' failed (status $status); its output:" >&2
  tail -50 "$log" >&2
  exit "$status"
fi
