#!/usr/bin/env bash
# The largest GPT each layout trains within a fixed memory budget per rank (issue 17 item 7, second
# part): WORLD local ranks (2), fp32, ZeRO 0, T=64, GPT-2 vocabulary (padded to 50304, so it
# splits over tensor ranks), 2 steps, each layout over ascending sizes. A layout names its
# pipeline and tensor sizes, the data axis being the rest of the world: D (pure data parallel),
# P=2, T=2, P2xT2 (at WORLD=4: pipeline 2 x tensor 2, data 1); at WORLD=4, P=2 and T=2 run with
# data 2. A size "fits" when dsrt trains it with
# train.memory_limit_mb = BUDGET_MIB (the preflight memory check refuses a table that cannot fit,
# naming the numbers) and every rank's peak RSS (/usr/bin/time %M) stays within the budget.
# Usage: bench/parallel_budget.sh [BUILD_DIR] [OUT_FILE]
#   env: BUDGET_MIB (3072), SIZES ("12x768 16x1024 24x1024 20x1280 28x1280": layers x width),
#        WORLD (2), LAYOUTS ("D P=2 T=2"; at WORLD=4 add P2xT2)
# Not a test: one figure per layout, with the machine's load printed beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
B=$(realpath "${1:-build}")
OUT=${2:-bench/results/parallel.txt}
BUDGET_MIB=${BUDGET_MIB:-3072}
SIZES=${SIZES:-"12x768 16x1024 24x1024 20x1280 28x1280"}
WORLD=${WORLD:-2}
LAYOUTS=${LAYOUTS:-"D P=2 T=2"}
[[ -x /usr/bin/time ]] || { echo "parallel_budget: needs /usr/bin/time" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
port=$((29500 + RANDOM % 100))

# run NAME LAYERS WIDTH PIPELINE TENSOR: prints "params peak_MiB verdict".
run() {
  local name=$1 layers=$2 width=$3 pipe=$4 tensor=$5 rc=0
  port=$((port + 1))
  printf '#!/bin/bash\nexec /usr/bin/time -f %%M -o "%s.rss.$RANK" "$@"\n' "$TMP/$name" >"$TMP/rank.sh"
  chmod +x "$TMP/rank.sh"
  "$B/dsrun" --num_gpus "$WORLD" --master_port "$port" "$TMP/rank.sh" "$B/dsrt" train \
    --set model.gpt.n_layer="$layers" --set model.gpt.n_embd="$width" \
    --set model.gpt.n_head=$((width / 64)) --set model.gpt.seq_len=64 \
    --set model.gpt.vocab_size=50257 --set model.gpt.padded_vocab_size=50304 \
    --set deepspeed.train_micro_batch_size_per_gpu=1 \
    --set deepspeed.gradient_accumulation_steps=2 \
    --set deepspeed.train_batch_size=$((2 * WORLD / (pipe * tensor))) \
    --set parallel.pipeline="$pipe" --set parallel.tensor="$tensor" \
    --set deepspeed.zero_optimization.stage=0 --set train.steps=2 --set train.eval_every=0 \
    --set data.synthetic.val_tokens=0 --set train.memory_limit_mb="$BUDGET_MIB" \
    --summary "$TMP/$name.json" >"$TMP/$name.log" 2>&1 || rc=$?
  local peak=0 v
  for f in "$TMP/$name".rss.*; do
    [[ -f $f ]] || continue
    v=$(tail -1 "$f")
    [[ $v =~ ^[0-9]+$ ]] && ((v > peak)) && peak=$v
  done
  peak=$((peak / 1024))
  local params=-
  [[ -f $TMP/$name.json ]] && params=$(jq -r .num_params "$TMP/$name.json")
  if ((rc != 0)); then
    if grep -q "memory_limit_mb" "$TMP/$name.log"; then echo "$params $peak refused"
    else echo "$params $peak failed(rc=$rc)"; fi
  elif ((peak > BUDGET_MIB)); then echo "$params $peak over"
  else echo "$params $peak fits"; fi
}

{
  echo "# command: BUDGET_MIB=$BUDGET_MIB WORLD=$WORLD bench/parallel_budget.sh (SIZES=\"$SIZES\" LAYOUTS=\"$LAYOUTS\")"
  echo "# commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (+ uncommitted changes)'); $(date -u +%Y-%m-%dT%H:%MZ); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# $WORLD ranks, fp32, ZeRO 0, T=64, 2 steps; fits = trained with train.memory_limit_mb=$BUDGET_MIB and every"
  echo "# rank's peak RSS <= $BUDGET_MIB MiB; refused = the preflight memory check stopped it before training."
  printf '%-9s %-13s %12s %9s  %s\n' size layout params peak_MiB verdict
  declare -A best=()
  for layout in $LAYOUTS; do best[$layout]=-; done
  for sz in $SIZES; do
    layers=${sz%x*} width=${sz#*x}
    for layout in $LAYOUTS; do
      pipe=1 tensor=1
      case $layout in
        D) ;;
        P=2) pipe=2 ;;
        T=2) tensor=2 ;;
        P2xT2) pipe=2 tensor=2 ;;
        *) echo "parallel_budget: LAYOUTS: '$layout' is not D, P=2, T=2 or P2xT2" >&2; exit 2 ;;
      esac
      ((WORLD % (pipe * tensor) == 0)) || { echo "parallel_budget: $layout needs WORLD divisible by $((pipe * tensor))" >&2; exit 2; }
      read -r params peak verdict < <(run "${layout/=/}_$sz" "$layers" "$width" "$pipe" "$tensor")
      printf '%-9s %-13s %12s %9s  %s\n' "$sz" "$layout (D=$((WORLD / (pipe * tensor))))" "$params" "$peak" "$verdict"
      [[ $verdict == fits ]] && best[$layout]="$sz ($params params)"
    done
  done
  line="# largest within $BUDGET_MIB MiB per rank at $WORLD ranks:"
  for layout in $LAYOUTS; do line+=" $layout ${best[$layout]};"; done
  echo "$line"
  echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee -a "$OUT"
