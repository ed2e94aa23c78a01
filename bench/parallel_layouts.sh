#!/usr/bin/env bash
# Pipeline and tensor parallelism against pure data parallelism at the same world size (issue 17
# item 7): GPT-2 shapes (GPT-2 vocabulary padded to 50304, T=64), 2 local ranks over gloo, fp32,
# ZeRO 0, the same micro batch and gradient_accumulation_steps, for D=2 (data parallel), P=2
# (pipeline, 1F1B) and T=2 (tensor, Megatron split); each run's tokens/s from its run summary, the
# ratios P/D and T/D, and each layout's peak RSS per rank (the parameter + optimizer share a
# pipeline stage or a tensor shard holds is about half of a data rank's).
# WORLD=4: 4 local ranks, D=4 (data parallel) against P=2 x T=2 (each of 2 stages split over 2
# tensor ranks, one data rank), P=2 x D=2 and T=2 x D=2, each as a ratio to D=4; on a 2-core
# machine 4 ranks oversubscribe the cores (2 ranks per core), which the header says.
# Usage: bench/parallel_layouts.sh [BUILD_DIR] [OUT_FILE]
#   env: SIZES ("12x768 24x1024": layers x width), GAS (4), STEPS (12), MICRO (1), WORLD (2 or 4)
# Not a test: a figure with the machine's load printed beside it (2 cores: the two ranks and
# gloo's threads share them, so neither layout gets the speed it would with a core per rank).
set -euo pipefail
cd "$(dirname "$0")/.."
B=$(realpath "${1:-build}")
OUT=${2:-bench/results/parallel.txt}
SIZES=${SIZES:-"12x768 24x1024"}
GAS=${GAS:-4}
STEPS=${STEPS:-12}
MICRO=${MICRO:-1}
WORLD=${WORLD:-2}
[[ $WORLD == 2 || $WORLD == 4 ]] || { echo "parallel_layouts: WORLD is 2 or 4, not $WORLD" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "parallel_layouts: needs /usr/bin/time" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
port=$((29600 + RANDOM % 100))

# run NAME LAYERS WIDTH PIPELINE TENSOR: one WORLD-rank run; prints "tokens/s peak_MiB final_loss".
run() {
  local name=$1 layers=$2 width=$3 pipe=$4 tensor=$5
  local data=$((WORLD / (pipe * tensor)))
  port=$((port + 1))
  local heads=$((width / 64))
  cat >"$TMP/rank.sh" <<EOR
#!/bin/bash
exec /usr/bin/time -f %M -o "$TMP/$name.rss.\$RANK" "\$@"
EOR
  chmod +x "$TMP/rank.sh"
  "$B/dsrun" --num_gpus "$WORLD" --master_port "$port" "$TMP/rank.sh" "$B/dsrt" train \
    --set model.gpt.n_layer="$layers" --set model.gpt.n_embd="$width" \
    --set model.gpt.n_head="$heads" --set model.gpt.seq_len=64 --set model.gpt.vocab_size=50257 \
    --set model.gpt.padded_vocab_size=50304 \
    --set deepspeed.train_micro_batch_size_per_gpu="$MICRO" \
    --set deepspeed.gradient_accumulation_steps="$GAS" \
    --set deepspeed.train_batch_size=$((MICRO * GAS * data)) \
    --set parallel.pipeline="$pipe" --set parallel.tensor="$tensor" \
    --set deepspeed.zero_optimization.stage=0 \
    --set train.steps="$STEPS" --set train.eval_every=0 --set train.log_every=100 \
    --set data.synthetic.val_tokens=0 --summary "$TMP/$name.json" >"$TMP/$name.log" 2>&1 ||
    { echo "parallel_layouts: $name failed:" >&2; tail -5 "$TMP/$name.log" >&2; exit 1; }
  local peak=0 v
  for f in "$TMP/$name".rss.*; do v=$(tail -1 "$f"); ((v > peak)) && peak=$v; done
  jq -r --arg p "$((peak / 1024))" '"\(.timing.tokens_per_sec) \($p) \(.losses[-1])"' "$TMP/$name.json"
}

# WORLD=4: D=4 against P=2 x T=2, P=2 x D=2 and T=2 x D=2 at 4 ranks.
world4() {
  echo "# command: WORLD=4 bench/parallel_layouts.sh (SIZES=\"$SIZES\" GAS=$GAS STEPS=$STEPS MICRO=$MICRO)"
  echo "# commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (+ uncommitted changes)'); $(date -u +%Y-%m-%dT%H:%MZ); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# 4 ranks on $(nproc) cores (oversubscribed: $((4 / $(nproc))) ranks per core), fp32, ZeRO 0, T=64, GPT-2 vocabulary (padded 50304)"
  echo "# global batch = micro x gas x data ranks (D=4: $((MICRO * GAS * 4)) sequences per step; P=2xT=2: $((MICRO * GAS)), one data rank;"
  echo "# P=2xD=2 and T=2xD=2: $((MICRO * GAS * 2)))."
  echo "# tokens/s from the run summary (warm-up step left out); peak = max over ranks of /usr/bin/time %M."
  printf '%-9s %-7s %12s %9s %12s\n' size layout tokens/s peak_MiB final_loss
  for sz in $SIZES; do
    layers=${sz%x*} width=${sz#*x}
    read -r dt dp dl < <(run "d4_$sz" "$layers" "$width" 1 1)
    read -r gt gp gl < <(run "p2t2_$sz" "$layers" "$width" 2 2)
    read -r pt pp pl < <(run "p2d2_$sz" "$layers" "$width" 2 1)
    read -r tt tp tl < <(run "t2d2_$sz" "$layers" "$width" 1 2)
    printf '%-9s %-7s %12.0f %9s %12.4f\n' "$sz" D=4 "$dt" "$dp" "$dl"
    printf '%-9s %-7s %12.0f %9s %12.4f\n' "$sz" P2xT2 "$gt" "$gp" "$gl"
    printf '%-9s %-7s %12.0f %9s %12.4f\n' "$sz" P2xD2 "$pt" "$pp" "$pl"
    printf '%-9s %-7s %12.0f %9s %12.4f\n' "$sz" T2xD2 "$tt" "$tp" "$tl"
    awk -v a="$gt" -v b="$dt" -v c="$gp" -v d="$dp" -v s="$sz" \
      'BEGIN { printf "# %s: P=2xT=2 / D=4 tokens/s %.2f, peak per rank %.2f\n", s, a / b, c / d }'
    awk -v a="$pt" -v b="$dt" -v c="$pp" -v d="$dp" -v s="$sz" \
      'BEGIN { printf "# %s: P=2xD=2 / D=4 tokens/s %.2f, peak per rank %.2f\n", s, a / b, c / d }'
    awk -v a="$tt" -v b="$dt" -v c="$tp" -v d="$dp" -v s="$sz" \
      'BEGIN { printf "# %s: T=2xD=2 / D=4 tokens/s %.2f, peak per rank %.2f\n", s, a / b, c / d }'
  done
  echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
}
if [[ $WORLD == 4 ]]; then
  world4 | tee "$OUT"
  exit 0
fi

{
  echo "# command: bench/parallel_layouts.sh (SIZES=\"$SIZES\" GAS=$GAS STEPS=$STEPS MICRO=$MICRO)"
  echo "# commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (+ uncommitted changes)'); $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "# 2 ranks on $(nproc) cores, fp32, ZeRO 0, T=64, GPT-2 vocabulary (padded 50304); global batch = micro x gas x data ranks"
  echo "# (D=2: $((MICRO * GAS * 2)) sequences per step; P=2 and T=2: $((MICRO * GAS)), one data rank). tokens/s from the run summary"
  echo "# (warm-up step left out); peak = max over ranks of /usr/bin/time %M."
  printf '%-9s %-7s %12s %9s %12s\n' size layout tokens/s peak_MiB final_loss
  for sz in $SIZES; do
    layers=${sz%x*} width=${sz#*x}
    read -r dt dp dl < <(run "d2_$sz" "$layers" "$width" 1 1)
    read -r pt pp pl < <(run "p2_$sz" "$layers" "$width" 2 1)
    read -r tt tp tl < <(run "t2_$sz" "$layers" "$width" 1 2)
    printf '%-9s %-7s %12.0f %9s %12.4f\n' "$sz" D=2 "$dt" "$dp" "$dl"
    printf '%-9s %-7s %12.0f %9s %12.4f\n' "$sz" P=2 "$pt" "$pp" "$pl"
    printf '%-9s %-7s %12.0f %9s %12.4f\n' "$sz" T=2 "$tt" "$tp" "$tl"
    awk -v a="$pt" -v b="$dt" -v c="$pp" -v d="$dp" -v s="$sz" \
      'BEGIN { printf "# %s: P=2 / D=2 tokens/s %.2f, peak per rank %.2f\n", s, a / b, c / d }'
    awk -v a="$tt" -v b="$dt" -v c="$tp" -v d="$dp" -v s="$sz" \
      'BEGIN { printf "# %s: T=2 / D=2 tokens/s %.2f, peak per rank %.2f\n", s, a / b, c / d }'
  done
  echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT"
