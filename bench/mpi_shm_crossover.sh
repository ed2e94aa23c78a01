#!/usr/bin/env bash
# Where the mpi backend should hand a one-host job's collectives to the shared-memory layer
# (comm/shm) instead of Open MPI's own shared memory: DS_MPI_SHM_MIN_BYTES, docs/comm.md "shm".
# Two sides, the same dsrt comm-bench under mpirun with --comm_backend mpi, in one run:
#   shm  = DS_MPI_SHM_MIN_BYTES=1   every collective (barrier aside) through comm/shm
#   ompi = DS_MPI_SHM_MIN_BYTES=0   every collective through Open MPI (vader BTL, CMA)
# REPS repetitions, the two sides alternating (which goes first alternates too); per op and size
# the medians of busbw (GB/s, nccl-tests convention) and of the time per call (us, which says
# more than busbw for the smallest sizes), shm/ompi ratios (busbw: > 1 means shm is faster),
# and every repetition's busbw. GLIBC_TUNABLES=glibc.malloc.hugetlb=1 and mpirun's flags as
# bench/comm_bench.sh.
# Usage: bench/mpi_shm_crossover.sh [BUILD_DIR] [OUT_FILE]
#   env: DS_BENCH_RANKS (2), DS_BENCH_REPS (5), DS_BENCH_TARGET_SECONDS (0.25),
#        DS_BENCH_SIZES ("4 256 4K 16K 64K 256K 1M 4M 16M 64M"),
#        DS_BENCH_OPS ("allreduce,reduce_scatter,allgather,broadcast")
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
OUT=${2:-/dev/null}
SIZE_LIST=${DS_BENCH_SIZES:-"4 256 4K 16K 64K 256K 1M 4M 16M 64M"}
for s in $SIZE_LIST; do
  [[ $s =~ ^[0-9]+[KM]?$ ]] || { echo "DS_BENCH_SIZES: '$s' is not a size like 256, 64K or 16M" >&2; exit 2; }
done
SIZES=$(echo $SIZE_LIST | tr ' ' ',')
N=${DS_BENCH_RANKS:-2}
REPS=${DS_BENCH_REPS:-5}
OPS=${DS_BENCH_OPS:-allreduce,reduce_scatter,allgather,broadcast}
export DS_BENCH_TARGET_SECONDS=${DS_BENCH_TARGET_SECONDS:-0.25}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GLIBC_TUNABLES=glibc.malloc.hugetlb=1
MPIRUN=(mpirun --oversubscribe --bind-to none --mca oob_tcp_if_include lo
        --mca btl_tcp_if_include lo --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES)
[ -x "$B/dsrt" ] || { echo "mpi_shm_crossover: no $B/dsrt (build first)" >&2; exit 2; }
command -v mpirun > /dev/null || { echo "mpi_shm_crossover: no mpirun (scripts/install_deps.sh)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
port=30400

# run SIDE REP: appends "side rep <comm-bench row>" lines to $TMP/rows
run() {
  local side=$1 rep=$2 min
  min=$([ "$side" = shm ] && echo 1 || echo 0)
  port=$((port + 3))
  DS_MPI_SHM_MIN_BYTES=$min "${MPIRUN[@]}" -x DS_MPI_SHM_MIN_BYTES -x DS_BENCH_TARGET_SECONDS \
    -np "$N" -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=$port \
    "$B/dsrt" comm-bench --comm_backend mpi --sizes "$SIZES" --ops "$OPS" \
    --target_seconds "$DS_BENCH_TARGET_SECONDS" 2>>"$TMP/stderr" \
    | sed -e 's/^\[[0-9]*\] //' | grep -E '^(allreduce|reduce_scatter|allgather|broadcast) ' \
    | sed "s/^/$side $rep /" >> "$TMP/rows" || true
}

{
  start=$(date +%s)
  echo "# bench/mpi_shm_crossover.sh $B $OUT   ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores," \
       "$(uname -r), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo "# mpi backend, $N ranks on this host, fp32; $REPS repetitions per side, alternating;" \
       "target ${DS_BENCH_TARGET_SECONDS} s per row"
  echo "# shm = DS_MPI_SHM_MIN_BYTES=1, ompi = DS_MPI_SHM_MIN_BYTES=0; sizes: $SIZES"
  echo "# load average (1/5/15 min) at start: $(loadavg)"
  for rep in $(seq "$REPS"); do
    if (( rep % 2 )); then run shm "$rep"; run ompi "$rep"; else run ompi "$rep"; run shm "$rep"; fi
  done
  echo "# load average at end:   $(loadavg); $(( $(date +%s) - start )) s"
  echo
  python3 - "$TMP/rows" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()  # side rep | op bytes count iters time_us algbw busbw [check]
    cell = rows.setdefault((f[2], int(f[3])), {}).setdefault(f[0], {"bw": [], "us": []})
    cell["bw"].append(float(f[8]))
    cell["us"].append(float(f[6]))
med = lambda v: statistics.median(v) if v else float("nan")
print(f"{'op':<15} {'bytes':>10}  {'shm_busbw':>10} {'ompi_busbw':>10} {'shm/ompi':>8}"
      f"  {'shm_us':>9} {'ompi_us':>9}   (medians)")
for (op, b) in sorted(rows):
    r = rows[(op, b)]
    s, o = r.get("shm", {"bw": [], "us": []}), r.get("ompi", {"bw": [], "us": []})
    sb, ob = med(s["bw"]), med(o["bw"])
    ratio = sb / ob if ob and ob == ob and ob > 0 else float("nan")
    print(f"{op:<15} {b:>10}  {sb:>10.3f} {ob:>10.3f} {ratio:>8.2f}  {med(s['us']):>9.1f} "
          f"{med(o['us']):>9.1f}")
print("\n# every repetition's busbw, in run order")
for (op, b) in sorted(rows):
    for side in ("shm", "ompi"):
        v = rows[(op, b)].get(side, {"bw": []})["bw"]
        print(f"{op:<15} {b:>10} {side:<4} " + " ".join(f"{x:.3f}" for x in v))
PY
  if [ -s "$TMP/stderr" ] && grep -qiE 'error|abort' "$TMP/stderr"; then
    echo; echo "# stderr of the runs (errors):"; grep -iE 'error|abort' "$TMP/stderr" | head -20
  fi
} | tee "$OUT"
