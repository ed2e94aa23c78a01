#!/usr/bin/env bash
# 1-bit Adam against Adam across simulated hosts (issue 18 item 6): HOSTS network-namespace hosts x
# 1 rank (scripts/test_cluster.sh --netns; every host's link shaped by tc tbf to RATE), dsrun over
# ssh, dsrt train of GPT-2 124M shapes (12 layers, 768 wide, 12 heads, vocab 50257, T=64, one
# sequence per rank, fp32) at ZeRO stage 0: `adam` (AdamW, every gradient allreduced in fp32)
# and `onebit` (OneBitAdam with freeze_step FREEZE: exact Adam for FREEZE steps, then the momentum
# 1-bit averaged), sides alternating per repetition. The figure: the mean step time over the
# compressed steps (FREEZE+1 .. STEPS, from each rank-0 step line) on both sides and the ratio
# adam / onebit, next to the raw TCP bandwidth of one link measured in the same run; the losses
# of both sides at the last step. Each rank computes with its share of the machine's cores,
# train.threads = max(1, cores / HOSTS) (DS_BENCH_THREADS overrides), as in zeropp_multihost.sh.
# Usage: bench/onebit_multihost.sh [BUILD_DIR] [OUT_FILE]   (root: namespaces and tc)
#   env: DS_BENCH_HOSTS (2), DS_BENCH_RATE (1gbit), DS_BENCH_STEPS (10), DS_BENCH_FREEZE (4),
#        DS_BENCH_REPS (1), DS_BENCH_DELAY_US (0: one-way latency added between hosts),
#        DS_BENCH_THREADS (compute threads per rank; default cores / HOSTS, at least 1)
set -euo pipefail
cd "$(dirname "$0")/.."
B=$(realpath "${1:-build}")
OUT=${2:-bench/results/onebit_multihost.txt}
H=${DS_BENCH_HOSTS:-2}
RATE=${DS_BENCH_RATE:-1gbit}
STEPS=${DS_BENCH_STEPS:-10}
FREEZE=${DS_BENCH_FREEZE:-4}
REPS=${DS_BENCH_REPS:-1}
((FREEZE < STEPS)) || { echo "onebit_multihost: DS_BENCH_FREEZE ($FREEZE) must be below DS_BENCH_STEPS ($STEPS)" >&2; exit 2; }
SIDES=(adam onebit)
# shellcheck source=bench/netns_lib.sh
. bench/netns_lib.sh
port=30300
THREADS=$(rank_threads "$H" onebit_multihost)
MODEL=(--set model.gpt.n_layer=12 --set model.gpt.n_embd=768 --set model.gpt.n_head=12
       --set model.gpt.seq_len=64 --set model.gpt.vocab_size=50257
       --set data.synthetic.tokens=65536 --set data.synthetic.val_tokens=4096
       --set train.eval_every=0 --set train.log_every=1 --set train.steps="$STEPS"
       --set deepspeed.train_batch_size="$H"
       --set deepspeed.scheduler.params.warmup_num_steps=1
       --set deepspeed.zero_optimization.stage=0 --set train.threads="$THREADS")

{
  echo "# bench/onebit_multihost.sh $B $OUT   ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores," \
       "$(uname -r), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo "# GPT-2 124M shapes (12x768, 12 heads, vocab 50257, T=64), fp32, ZeRO stage 0, global batch" \
       "$H ($H simulated hosts x 1 rank: $LINK_DESC, $RATE);"
  echo "# $STEPS steps, OneBitAdam freeze_step $FREEZE; step times are the mean of steps" \
       "$((FREEZE + 1))..$STEPS on both sides; $REPS repetition(s), order alternating."
  echo "# Every host shares this machine's $(nproc) cores; $THREADS compute thread(s) per rank. load average (1/5/15 min) at start: $(loadavg)"
  netns_up "$RATE" "$H" 1
  echo "link $RATE: raw TCP one way $LINK_BW GB/s; UDP round trip min/median/max $LINK_RTT us"
  for rep in $(seq "$REPS"); do
    for i in 0 1; do
      side=${SIDES[$(( (rep - 1 + i) % 2 ))]}
      port=$((port + 1))
      opt=(--set deepspeed.optimizer.type=AdamW)
      [ "$side" = onebit ] && opt=(--set deepspeed.optimizer.type=OneBitAdam
                                   --set deepspeed.optimizer.params.freeze_step="$FREEZE")
      log="$TMP/$side-$rep.log"
      (set -a; . "$CL/env"; set +a
       cd "$TMP" && "$B/dsrun" --hostfile "$HOSTFILE" --launcher ssh \
         --master_addr "$MASTER" --master_port "$port" "$B/dsrt" train \
         "${MODEL[@]}" "${opt[@]}" --summary "$TMP/$side-$rep.json") > "$log" 2>&1 ||
        { echo "onebit_multihost: $side failed:"; tail -20 "$log"; exit 1; }
      # Rank 0's step lines: "step   N/STEPS | loss L | ... | T ms (fwd .. bwd .. comm C optim O)".
      sed 's/^\[[0-9]*\] //' "$log" | awk -v f="$FREEZE" -v side="$side" '
        /^step +[0-9]+\// {
          split($2, s, "/"); n = s[1]
          if (n > f) {
            for (i = 1; i <= NF; ++i) {
              if ($i == "ms" && $(i+1) ~ /^\(fwd/) ms += $(i-1)
              if ($i == "comm") comm += $(i+1)
              if ($i == "optim") { o = $(i+1); sub(/\)/, "", o); opt += o }
            }
            k++
          }
          loss = $5
        }
        END { printf "%s\t%.1f\t%.1f\t%.1f\t%s\n", side, ms / k, comm / k, opt / k, loss }' \
        >> "$TMP/rows"
    done
  done
  netns_down
  echo "# load average at end:   $(loadavg)"
  echo
  awk -F'\t' '{ n[$1]++; ms[$1] += $2; comm[$1] += $3; opt[$1] += $4; loss[$1] = $5 }
    END {
      for (s in n) printf "%-7s step %8.1f ms (comm %7.1f, optim %7.1f)  loss at the last step %s\n",
        s, ms[s] / n[s], comm[s] / n[s], opt[s] / n[s], loss[s]
      if (n["adam"] && n["onebit"])
        printf "adam / onebit step time: %.2fx (issue 18 target: 2x at 1 Gbit/s)\n",
          (ms["adam"] / n["adam"]) / (ms["onebit"] / n["onebit"])
    }' "$TMP/rows"
} | tee "$OUT"
