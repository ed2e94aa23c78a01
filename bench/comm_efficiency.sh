#!/usr/bin/env bash
# Intra-host allreduce bus bandwidth of the shared-memory path (comm/shm) next to the TCP paths,
# in one run (issue 18, item 1 and 6):
#   shm      = dsrun --num_gpus N dsrt comm-bench --comm_backend gloo      (DS_COMM_SHM=1, default:
#              single copy from DS_COMM_SHM_CMA_MIN_BYTES up; comm-bench's buffers are registered,
#              as stage 0's gradients are, so the peers' buffers are used in place through a
#              mapping: docs/comm.md "Registered buffers")
#   shmcma   = the same with --host_buffers private                      (plain buffers: CMA copies)
#   shmcopy  = the same with DS_COMM_SHM_CMA=0                              (the two-copy slot path)
#   tcp      = the same with DS_COMM_SHM=0                                  (our gloo over loopback TCP)
#   libgloo  = dsrun --num_gpus N bench_raw_gloo                            (libgloo's own ring)
#   openmpi  = mpirun -np N bench_raw_mpi                                   (MPI_Allreduce, Open MPI's
#              shared-memory BTL (vader) with CMA single copy)
#   memcpy   = bench_mem_probe N: N processes each copying SIZE bytes at once, no collective:
#              two columns, memcpy (glibc) and cmaread (process_vm_readv from the next
#              process), in GB/s per process: the copy bandwidth a single-copy allreduce is
#              bound by (per rank it copies SIZE bytes through the kernel and reduces SIZE/2)
# Method as bench/comm_bench.sh: REPS repetitions per side, the sides' order rotated each
# repetition (shm,shmcopy,tcp,... / shmcopy,tcp,...,shm / ...), so drifting load hits all;
# every side times rows alike (bench/raw_timing.h = runtime/cmd/comm_bench.cc); busbw in GB/s,
# nccl-tests convention (allreduce: algbw * 2(n-1)/n); medians over repetitions, min-max spread,
# and ratios of the medians. GLIBC_TUNABLES=glibc.malloc.hugetlb=1 for every side (see
# bench/comm_bench.sh: Open MPI's temporary buffers).
# Usage: bench/comm_efficiency.sh [BUILD_DIR] [OUT_FILE]
#   env: DS_BENCH_RANKS (2), DS_BENCH_REPS (5), DS_BENCH_TARGET_SECONDS (0.25),
#        DS_BENCH_SIZES ("1M 4M 16M 64M 256M"),
#        DS_BENCH_SIDES ("shm shmcma shmcopy tcp libgloo openmpi memcpy")
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
OUT=${2:-bench/results/comm_efficiency.txt}
SIZE_LIST=${DS_BENCH_SIZES:-"1M 4M 16M 64M 256M"}
for s in $SIZE_LIST; do
  [[ $s =~ ^[0-9]+[KM]$ ]] || { echo "DS_BENCH_SIZES: '$s' is not a size like 64K or 16M" >&2; exit 2; }
done
SIZES=$(echo $SIZE_LIST | tr ' ' ',')
BYTES=$(for s in $SIZE_LIST; do numfmt --from=iec "$s"; done | tr '\n' ' ')
N=${DS_BENCH_RANKS:-2}
REPS=${DS_BENCH_REPS:-5}
SIDES=(${DS_BENCH_SIDES:-shm shmcma shmcopy tcp libgloo openmpi memcpy})
export DS_BENCH_TARGET_SECONDS=${DS_BENCH_TARGET_SECONDS:-0.25}
export DS_RAW_MPI_THREAD=${DS_RAW_MPI_THREAD:-multiple}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GLIBC_TUNABLES=glibc.malloc.hugetlb=1
MPIRUN=(mpirun --oversubscribe --bind-to none --mca oob_tcp_if_include lo
        --mca btl_tcp_if_include lo --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
strip() { sed -e 's/^\[[0-9]*\] //' | grep -E '^(allreduce|memcpy|cmaread) ' || true; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
port=29800

# run SIDE REP: appends "side rep <row>" lines to $TMP/rows
run() {
  local side=$1 rep=$2
  port=$((port + 1))
  case "$side" in
    shm|shmcma|shmcopy|tcp)
             DS_COMM_SHM=$([ "$side" = tcp ] && echo 0 || echo 1) \
             DS_COMM_SHM_CMA=$([ "$side" = shm ] || [ "$side" = shmcma ] && echo 1 || echo 0) \
               "$B/dsrun" --num_gpus "$N" --master_port "$port" "$B/dsrt" comm-bench \
                 --comm_backend gloo --sizes "$SIZES" --ops allreduce \
                 --host_buffers "$([ "$side" = shmcma ] && echo private || echo shared)" \
                 --target_seconds "$DS_BENCH_TARGET_SECONDS" ;;
    libgloo) rm -rf "$TMP/store"; mkdir -p "$TMP/store"
             "$B/dsrun" --num_gpus "$N" --master_port "$port" "$B/bench/bench_raw_gloo" \
               "$TMP/store" $BYTES ;;
    openmpi) "${MPIRUN[@]}" -np "$N" -x DS_BENCH_TARGET_SECONDS -x DS_RAW_MPI_THREAD \
               "$B/bench/bench_raw_mpi" $BYTES ;;
    memcpy)  "$B/bench/bench_mem_probe" "$N" $BYTES ;;
  esac 2>>"$TMP/stderr" | strip | if [ "$side" = memcpy ]; then sed -E "s/^(memcpy|cmaread) /\1 $rep \1 /"
  else sed "s/^/$side $rep /"; fi >> "$TMP/rows"
}

{
  start=$(date +%s)
  echo "# bench/comm_efficiency.sh $B $OUT   ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores," \
       "$(uname -r), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo "# allreduce fp32 sum, $N ranks on this host; $REPS repetitions per side, order rotated;" \
       "target ${DS_BENCH_TARGET_SECONDS} s per row; busbw GB/s (1e9 B/s)"
  echo "# sides: ${SIDES[*]}; sizes: $SIZES"
  echo "# load average (1/5/15 min) at start: $(loadavg)"
  for rep in $(seq "$REPS"); do
    k=$(( (rep - 1) % ${#SIDES[@]} ))
    for i in $(seq 0 $(( ${#SIDES[@]} - 1 ))); do
      run "${SIDES[$(( (k + i) % ${#SIDES[@]} ))]}" "$rep"
    done
  done
  echo "# load average at end:   $(loadavg); $(( $(date +%s) - start )) s"
  echo
  python3 - "$TMP/rows" "${SIDES[*]}" <<'PY'
import statistics, sys
sides = sys.argv[2].replace("memcpy", "memcpy cmaread").split()  # the probe's two columns
rows = {}
for line in open(sys.argv[1]):
    f = line.split()  # side rep | op bytes count iters time_us algbw busbw [check]
    rows.setdefault(int(f[3]), {}).setdefault(f[0], []).append(float(f[8]))
med = lambda v: statistics.median(v) if v else float("nan")
ratio = lambda a, b: a / b if b and b == b and b > 0 else float("nan")
others = [s for s in sides if s != "shm"]
hdr = f"{'bytes':>10}  " + " ".join(f"{s + '_busbw':>14}" for s in sides)
if "shm" in sides:
    hdr += "  " + " ".join(f"{'shm/' + s:>11}" for s in others)
print(hdr + "   (medians; then min-max per side)")
for b in sorted(rows):
    r = rows[b]
    line = f"{b:>10}  " + " ".join(f"{med(r.get(s, [])):>14.3f}" for s in sides)
    if "shm" in sides:
        line += "  " + " ".join(f"{ratio(med(r.get('shm', [])), med(r.get(s, []))):>11.2f}"
                                for s in others)
    spread = "  ".join(f"{s} {min(r[s]):.2f}-{max(r[s]):.2f}" for s in sides if r.get(s))
    print(line + "   " + spread)
print("\n# every repetition's busbw, in run order")
for b in sorted(rows):
    for s in sides:
        print(f"{b:>10} {s:<8} " + " ".join(f"{x:.3f}" for x in rows[b].get(s, [])))
PY
  if [ -s "$TMP/stderr" ] && grep -qiE 'error|abort' "$TMP/stderr"; then
    echo; echo "# stderr of the runs (errors):"; grep -iE 'error|abort' "$TMP/stderr" | head -20
  fi
} | tee "$OUT"
