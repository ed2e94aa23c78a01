#!/usr/bin/env bash
# bench/zero_bench.sh: ZeRO step time per stage relative to stage 0 at 2 and 4 process ranks, and
# peak RSS per rank for every stage and offload mode on a 100M-parameter synthetic model next to
# the formula (bench_zero_bench does one configuration; see its header). Writes to stdout; the
# recorded run is bench/results/zero.txt.
# Each RSS line also carries the ZeRO paper's formula for its stage ("paper": fp16 params and
# grads, K = 12, nothing offloaded) next to the engine's own ("formula states").
# Usage: bench/zero_bench.sh BUILD_DIR [TIME_PARAMS] [RSS_PARAMS]
#        ZERO_BENCH_ONLY=time|rss runs one section (the RSS runs are one configuration at a time,
#        ~2 x 1.8 GB of RAM at 100M params).
set -euo pipefail
build=${1:?usage: bench/zero_bench.sh BUILD_DIR [TIME_PARAMS] [RSS_PARAMS]}
tparams=${2:-20e6}
rparams=${3:-100e6}
bin="$build/bench/bench_zero_bench"
nvme="$build/zero_bench_nvme"
mkdir -p "$nvme"
export DS_LOG_LEVEL=warn
echo "# loadavg at start: $(cat /proc/loadavg); cores: $(nproc)"
only=${ZERO_BENCH_ONLY:-}
if [ "$only" != rss ]; then
echo "## step time, $tparams params fp32, 12 blocks, reduce/allgather bucket 2e6, overlap_comm on, median of steps 2-4"
for world in 2 4; do
  for stage in 0 1 2 3; do
    "$bin" --world "$world" --stage "$stage" --params "$tparams" --steps 4 --bucket 2e6
  done
done
fi
if [ "$only" != time ]; then
echo "## peak RSS per rank, $rparams params, 12 blocks, world 2, bucket 1e7, overlap_comm on, 2 steps"
for dt in fp32 bf16; do
  flag=""; [ "$dt" = bf16 ] && flag="--bf16"
  for stage in 0 1 2 3; do
    for off in none cpu nvme; do
      [ "$stage" = 0 ] && [ "$off" != none ] && continue
      "$bin" --world 2 --stage "$stage" --params "$rparams" --steps 2 --bucket 1e7 --offload "$off" \
        --nvme "$nvme" $flag
    done
  done
  # stage-3 parameter offload (cpu: accounting only on a CPU machine; nvme: the swap file), with
  # the optimizer states in memory (none) and offloaded to cpu; and both on nvme
  for poff in cpu nvme; do
    for off in none cpu; do
      "$bin" --world 2 --stage 3 --params "$rparams" --steps 2 --bucket 1e7 --offload "$off" \
        --param-offload "$poff" --nvme "$nvme" $flag
    done
  done
  "$bin" --world 2 --stage 3 --params "$rparams" --steps 2 --bucket 1e7 --offload nvme \
    --param-offload nvme --nvme "$nvme" $flag
done
fi
echo "# loadavg at end: $(cat /proc/loadavg)"
