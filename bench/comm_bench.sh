#!/usr/bin/env bash
# Collective bandwidth of dsrun's comm layer next to the raw libraries, measured in one run:
#   ours gloo  = DS_COMM_SHM=0 dsrun --num_gpus N dsrt comm-bench --comm_backend gloo (our gloo
#                over TCP: the shared-memory path, on by default on one host, is measured
#                against both in bench/comm_efficiency.sh)
#   raw gloo   = dsrun --num_gpus N bench_raw_gloo   (libgloo's own algorithms)
#   ours mpi   = mpirun -np N dsrt comm-bench --comm_backend mpi
#   raw mpi    = mpirun -np N bench_raw_mpi          (the same MPI calls our backend makes:
#                MPI_Allreduce in place, MPI_Reduce_scatter, MPI_Allgatherv)
# for allreduce, reduce_scatter and allgather at 1, 16 and 128 MiB, N = 2 and 4.
# Method: for each (backend, N) ours and raw run REPS times each, interleaved and alternating who
# goes first (ours,raw,raw,ours,ours,raw,...), so load drifting during the run hits both alike.
# Every run times each row the same way (bench/raw_timing.h = runtime/cmd/comm_bench.cc): 2 warm-up
# calls, a probe picks iters = clamp(TARGET / probe, 3, 5000), the slowest rank's mean per
# iteration over one reused buffer; ours checks each result after its timed loop.
# The table gives the median busbw over the repetitions of each side, ours/raw = the ratio of
# the medians, and the spread (min-max) of each side; every repetition's busbw follows it.
# Environment (every run, ours and raw alike): GLIBC_TUNABLES=glibc.malloc.hugetlb=1, so large
# malloc'd blocks get transparent huge pages (THP is "madvise" here). Open MPI allocates and frees
# full-size temporary buffers inside every large MPI_Allreduce/MPI_Reduce_scatter; on these VMs
# faulting 128 MiB of fresh 4 KiB pages per call made 128 MiB allreduce at 2 ranks 0.26 GB/s
# (522 ms) against 2.6 GB/s (52 ms) with huge pages, and reduce_scatter 1.37 s vs 0.115 s (raw MPI,
# same session). btl_vader_single_copy_mechanism none was tried and is slower (CMA stays on).
# Open MPI: loopback only; mpi_yield_when_idle 1 since 4 ranks share 2 cores (busy-polling
# ranks starve the one they wait for).
# raw mpi initializes MPI at MPI_THREAD_MULTIPLE, the level our mpi backend needs (docs/comm.md);
# DS_RAW_MPI_THREAD=single makes it plain MPI_Init (to measure that level's cost, not a record).
# Usage: bench/comm_bench.sh [BUILD_DIR] [OUT_FILE]
#   env: DS_BENCH_RANKS ("2 4"), DS_BENCH_REPS (5), DS_BENCH_TARGET_SECONDS (0.25),
#        DS_BENCH_BACKENDS ("gloo mpi"), DS_BENCH_SIZES ("1M 16M 128M"; K/M suffixes),
#        DS_RAW_MPI_THREAD (multiple)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
OUT=${2:-bench/results/comm.txt}
SIZE_LIST=${DS_BENCH_SIZES:-"1M 16M 128M"}
for s in $SIZE_LIST; do
  [[ $s =~ ^[0-9]+[KM]$ ]] || { echo "DS_BENCH_SIZES: '$s' is not a size like 64K or 16M" >&2; exit 2; }
done
SIZES=$(echo $SIZE_LIST | tr ' ' ',')
BYTES=$(for s in $SIZE_LIST; do numfmt --from=iec "$s"; done | tr '\n' ' ')
export DS_RAW_MPI_THREAD=${DS_RAW_MPI_THREAD:-multiple}
OPS="allreduce,reduce_scatter,allgather"
RANKS=${DS_BENCH_RANKS:-"2 4"}
REPS=${DS_BENCH_REPS:-5}
BACKENDS=${DS_BENCH_BACKENDS:-"gloo mpi"}
export DS_BENCH_TARGET_SECONDS=${DS_BENCH_TARGET_SECONDS:-0.25}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GLIBC_TUNABLES=glibc.malloc.hugetlb=1
MPIRUN=(mpirun --oversubscribe --bind-to none --mca oob_tcp_if_include lo
        --mca btl_tcp_if_include lo --mca mpi_yield_when_idle 1 -x GLIBC_TUNABLES)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
strip() { sed -e 's/^\[[0-9]*\] //' | grep -E '^(allreduce|reduce_scatter|allgather) ' || true; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# run BACKEND N WHO REP: appends "backend n who rep <comm-bench row>" lines to $TMP/rows
run() {
  local be=$1 n=$2 who=$3 rep=$4 port=$((29700 + $2))
  case "$be/$who" in
    gloo/ours) DS_COMM_SHM=0 "$B/dsrun" --num_gpus "$n" --master_port "$port" "$B/dsrt" comm-bench \
                 --comm_backend gloo --sizes "$SIZES" --ops "$OPS" \
                 --target_seconds "$DS_BENCH_TARGET_SECONDS" ;;
    gloo/raw)  rm -rf "$TMP/store"; mkdir -p "$TMP/store"
               "$B/dsrun" --num_gpus "$n" --master_port "$port" "$B/bench/bench_raw_gloo" \
                 "$TMP/store" $BYTES ;;
    mpi/ours)  "${MPIRUN[@]}" -np "$n" -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=$((port + 10)) \
                 "$B/dsrt" comm-bench --comm_backend mpi --sizes "$SIZES" --ops "$OPS" \
                 --target_seconds "$DS_BENCH_TARGET_SECONDS" ;;
    mpi/raw)   "${MPIRUN[@]}" -np "$n" -x DS_BENCH_TARGET_SECONDS -x DS_RAW_MPI_THREAD \
                 "$B/bench/bench_raw_mpi" \
                 $BYTES ;;
  esac 2>>"$TMP/stderr" | strip | sed "s/^/$be $n $who $rep /" >> "$TMP/rows"
}

{
  start=$(date +%s)
  echo "# bench/comm_bench.sh $B $OUT   ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores," \
       "$(uname -r), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo "# $REPS repetitions per side, interleaved; target ${DS_BENCH_TARGET_SECONDS} s per row;" \
       "busbw in GB/s (1e9 B/s), nccl-tests convention"
  echo "# backends: $BACKENDS; ranks: $RANKS; sizes: $SIZES; raw MPI thread level: $DS_RAW_MPI_THREAD"
  echo "# load average (1/5/15 min) at start: $(loadavg)"
  for be in $BACKENDS; do
    for n in $RANKS; do
      for rep in $(seq "$REPS"); do
        if ((rep % 2)); then run "$be" "$n" ours "$rep"; run "$be" "$n" raw "$rep"
        else run "$be" "$n" raw "$rep"; run "$be" "$n" ours "$rep"; fi
      done
    done
  done
  echo "# load average at end:   $(loadavg); $(( $(date +%s) - start )) s"
  echo
  python3 - "$TMP/rows" "$REPS" <<'EOF'
import statistics, sys
rows, order = {}, []
for line in open(sys.argv[1]):
    f = line.split()  # backend n who rep | op bytes count iters time_us algbw busbw check
    key, who = (f[0], int(f[1]), f[4], int(f[5])), f[2]
    if key not in rows:
        rows[key] = {"ours": [], "raw": [], "ours_us": [], "raw_us": [], "check": set()}
        order.append(key)
    r = rows[key]
    r[who].append(float(f[10])); r[who + "_us"].append(float(f[8]))
    if who == "ours": r["check"].add(f[11])
med = lambda v: statistics.median(v) if v else float("nan")
spread = lambda v: f"{min(v):.3f}-{max(v):.3f}" if v else "-"
print(f"{'backend':<7} {'ranks':<5} {'collective':<15} {'bytes':>10}  {'ours_busbw':>10} "
      f"{'raw_busbw':>9} {'ours/raw':>8}  {'ours_min-max':>13} {'raw_min-max':>13}  "
      f"{'ours_us':>10} {'raw_us':>10}  check  (medians over reps)")
for k in order:
    r = rows[k]
    ratio = med(r["ours"]) / med(r["raw"]) if r["raw"] and med(r["raw"]) > 0 else float("nan")
    check = "ok" if r["check"] == {"ok"} else ",".join(sorted(r["check"])) or "-"
    print(f"{k[0]:<7} {k[1]:<5} {k[2]:<15} {k[3]:>10}  {med(r['ours']):>10.3f} "
          f"{med(r['raw']):>9.3f} {ratio:>8.3f}  {spread(r['ours']):>13} {spread(r['raw']):>13}  "
          f"{med(r['ours_us']):>10.1f} {med(r['raw_us']):>10.1f}  {check} "
          f"({len(r['ours'])}/{len(r['raw'])} reps)")
print("\n# every repetition's busbw, in run order (ours | raw)")
for k in order:
    r = rows[k]
    print(f"{k[0]:<5} {k[1]} {k[2]:<15} {k[3]:>10}  " + " ".join(f"{x:.3f}" for x in r["ours"])
          + "  |  " + " ".join(f"{x:.3f}" for x in r["raw"]))
EOF
  if [ -s "$TMP/stderr" ] && grep -qiE 'error|abort' "$TMP/stderr"; then
    echo; echo "# stderr of the runs (errors):"; grep -iE 'error|abort' "$TMP/stderr" | head -20
  fi
} | tee "$OUT"
