#!/usr/bin/env bash
# ZeRO-3 across simulated hosts with and without ZeRO++ (issue 18 item 6): HOSTS network-namespace
# hosts x RANKS ranks (scripts/test_cluster.sh --netns; every host's link shaped by tc tbf to each
# rate in turn), dsrun over ssh, dsrt train of GPT-2 124M shapes (12 layers, 768 wide, 12 heads,
# vocab 50257, T=64, one sequence per rank, fp32) at ZeRO stage 3: `exact`, `zeropp` =
# zero_quantized_weights + zero_quantized_gradients (qwZ + qgZ), and with 2+ ranks per host
# `hpz` = qwZ + qgZ + zero_hpz_partition_size RANKS (backward's gathers stay in the host) and
# `mics` = mics_shard_size RANKS (every gather stays in the host; gradients cross once); sides
# rotating per repetition. The figure: step time (the run summary's timed steps, the first step excluded)
# and the ratio exact / ZeRO++, next to the raw TCP bandwidth of one link measured in the same
# run (a 64 MiB socket transfer between two of the namespaces) and the final losses of both.
# Every simulated host shares this machine's cores, so each rank computes with its share of them,
# train.threads = max(1, cores / (HOSTS x RANKS)) (DS_BENCH_THREADS overrides): dsrt's default,
# cores / local ranks, is right on a real host but here would run HOSTS times as many compute
# threads as there are cores, and the oversubscribed OpenMP loops (ZeRO++'s quantization above
# all) then measure the scheduler rather than the link.
# Usage: bench/zeropp_multihost.sh [BUILD_DIR] [OUT_FILE]   (root: namespaces and tc)
#   env: DS_BENCH_HOSTS (2), DS_BENCH_RANKS (1 per host), DS_BENCH_RATES ("1gbit 10gbit"),
#        DS_BENCH_STEPS (4), DS_BENCH_REPS (2), DS_BENCH_SIDES ("exact zeropp" [+ " hpz"]),
#        DS_BENCH_DELAY_US (0: one-way latency added between hosts, bench/netns_lib.sh),
#        DS_BENCH_THREADS (compute threads per rank; default cores / (HOSTS x RANKS), at least 1)
set -euo pipefail
cd "$(dirname "$0")/.."
B=$(realpath "${1:-build}")
OUT=${2:-bench/results/zeropp_multihost.txt}
H=${DS_BENCH_HOSTS:-2}
R=${DS_BENCH_RANKS:-1}
RATES=${DS_BENCH_RATES:-"1gbit 10gbit"}
STEPS=${DS_BENCH_STEPS:-4}
REPS=${DS_BENCH_REPS:-2}
DEFAULT_SIDES="exact zeropp"
[ "$R" -gt 1 ] && DEFAULT_SIDES="exact zeropp hpz mics"
read -r -a SIDES <<< "${DS_BENCH_SIDES:-$DEFAULT_SIDES}"
# shellcheck source=bench/netns_lib.sh
. bench/netns_lib.sh
port=30100
THREADS=$(rank_threads $((H * R)) zeropp_multihost)
MODEL=(--set model.gpt.n_layer=12 --set model.gpt.n_embd=768 --set model.gpt.n_head=12
       --set model.gpt.seq_len=64 --set model.gpt.vocab_size=50257
       --set data.synthetic.tokens=65536 --set data.synthetic.val_tokens=4096
       --set train.eval_every=0 --set train.log_every=1 --set train.steps="$STEPS"
       --set deepspeed.train_batch_size=$((H * R))
       --set deepspeed.scheduler.params.warmup_num_steps=1
       --set deepspeed.zero_optimization.stage=3 --set train.threads="$THREADS")

{
  echo "# bench/zeropp_multihost.sh $B $OUT   ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores," \
       "$(uname -r), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo "# GPT-2 124M shapes (12x768, 12 heads, vocab 50257, T=64), fp32, ZeRO stage 3, global batch" \
       "$((H * R)) ($H simulated hosts x $R ranks: $LINK_DESC),"
  echo "# $STEPS steps (the first untimed); $REPS repetitions per side, order" \
       "alternating. Every host shares this machine's $(nproc) cores; $THREADS compute thread(s) per rank."
  echo "# load average (1/5/15 min) at start: $(loadavg)"
  for rate in $RATES; do
    netns_up "$rate" "$H" "$R"
    bw=$LINK_BW
    echo "link $rate: raw TCP one way $bw GB/s; UDP round trip min/median/max $LINK_RTT us"
    for rep in $(seq "$REPS"); do
      for i in $(seq 0 $((${#SIDES[@]} - 1))); do
        side=${SIDES[$(( (rep - 1 + i) % ${#SIDES[@]} ))]}
        port=$((port + 1))
        q=$([ "$side" = zeropp ] || [ "$side" = hpz ] && echo true || echo false)
        hpz=$([ "$side" = hpz ] && echo "$R" || echo 1)
        mics=$([ "$side" = mics ] && echo "$R" || echo -1)
        sum="$TMP/$rate-$side-$rep.json"
        (set -a; . "$CL/env"; set +a
         cd "$TMP" && "$B/dsrun" --hostfile "$HOSTFILE" --launcher ssh \
           --master_addr "$MASTER" --master_port "$port" "$B/dsrt" train \
           "${MODEL[@]}" --set deepspeed.zero_optimization.zero_quantized_weights=$q \
           --set deepspeed.zero_optimization.zero_quantized_gradients=$q \
           --set deepspeed.zero_optimization.zero_hpz_partition_size="$hpz" \
           --set deepspeed.zero_optimization.mics_shard_size="$mics" --summary "$sum") \
          > "$TMP/$rate-$side-$rep.log" 2>&1 ||
          { echo "zeropp_multihost: $rate $side failed:"; tail -20 "$TMP/$rate-$side-$rep.log"; exit 1; }
        jq -r --arg r "$rate" --arg s "$side" --arg bw "$bw" '.timing as $t |
          [$r, $s, $bw, (($t.total_ms / $t.steps_timed) | tostring),
           (($t.comm_ms / $t.steps_timed) | tostring), (.losses[-1] | tostring)] | @tsv' \
          "$sum" >> "$TMP/rows"
      done
    done
    netns_down
  done
  echo "# load average at end:   $(loadavg)"
  echo
  "$PY" - "$TMP/rows" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    rate, side, bw, ms, comm, loss = line.split("\t")
    rows.setdefault(rate, {"bw": float(bw)}).setdefault(side, []).append((float(ms), float(comm), float(loss)))
sides = [s for s in ("exact", "zeropp", "hpz", "mics") if any(s in r for r in rows.values())]
print("link, raw TCP GB/s, then per side: step ms (median), comm ms (median), final loss;"
      " then exact/side step-time ratios")
for rate, r in rows.items():
    med = lambda s, k: statistics.median(x[k] for x in r[s])
    cells = "  ".join(f"{s} {med(s, 0):.0f} ms (comm {med(s, 1):.0f}) loss {r[s][0][2]:.5f}"
                      for s in sides if s in r)
    ratios = "  ".join(f"exact/{s} {med('exact', 0) / med(s, 0):.2f}x" for s in sides
                       if s != "exact" and s in r and "exact" in r)
    print(f"{rate:>7} tcp {r['bw']:.4f}  {cells}  |  {ratios}")
PY
} | tee "$OUT"
