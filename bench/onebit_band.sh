#!/usr/bin/env bash
# The loss band of 1-bit Adam, 0/1 Adam and 1-bit LAMB on the default plan (issue 18 item 4): the
# built-in plan (`dsrt train` with no file: 2-layer GPT, synthetic chain, 300 steps,
# WarmupCosineLR) on 2 local ranks with AdamW, OneBitAdam and ZeroOneAdam, and with Lamb
# (bias_correction false: exactly OneBitLamb's warm-up) and OneBitLamb, each compressed optimizer
# at a warm-up of FREEZES steps (freeze_step / var_freeze_step); every other setting as the plan
# has it, but the Lamb runs' lr: LAMB_LR (0.02; at the plan's 0.005 LAMB's trust ratio,
# ||p|| / ||u|| ~ 0.02 on the embeddings, makes its steps too small: val loss 1.91 after 300 steps).
# Prints the val loss at the last eval and the final train loss of every run, and each run's
# relative difference in val loss from AdamW's and (the Lamb runs) from Lamb's: the bands.
# Usage: bench/onebit_band.sh [BUILD_DIR] [OUT_FILE]   env: FREEZES ("20 60"), RANKS (2),
#        LAMB_LR (0.02)
set -euo pipefail
cd "$(dirname "$0")/.."
B=$(realpath "${1:-build}")
OUT=${2:-bench/results/onebit_band.txt}
FREEZES=${FREEZES:-"20 60"}
RANKS=${RANKS:-2}
LAMB_LR=${LAMB_LR:-0.02}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
port=$((29800 + RANDOM % 100))

# run NAME OPTIMIZER [KEY=VALUE...]: one default-plan run; prints "NAME val_loss final_loss".
run() {
  local name=$1 type=$2 extra=() kv
  shift 2
  for kv in "$@"; do extra+=(--set "deepspeed.optimizer.params.$kv"); done
  port=$((port + 1))
  "$B/dsrun" --num_gpus "$RANKS" --master_port "$port" "$B/dsrt" train \
    --set deepspeed.optimizer.type="$type" "${extra[@]}" --summary "$TMP/$name.json" \
    >"$TMP/$name.log" 2>&1 || { echo "onebit_band: $name failed:" >&2; tail -5 "$TMP/$name.log" >&2; exit 1; }
  jq -r --arg n "$name" '"\($n) \(.evals[-1].val_loss) \(.losses[-1])"' "$TMP/$name.json"
}

{
  echo "# bench/onebit_band.sh $B $OUT   ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores," \
       "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo "# the built-in default plan (2-layer GPT, synthetic chain, entropy floor 1.2425, 300 steps," \
       "lr 0.005 WarmupCosineLR; the Lamb runs lr $LAMB_LR), $RANKS ranks, ZeRO stage 0, fp32; one run each"
  rows=$(
    run adamw AdamW
    for f in $FREEZES; do
      run "onebit_freeze$f" OneBitAdam "freeze_step=$f"
      run "zeroone_varfreeze$f" ZeroOneAdam "var_freeze_step=$f"
    done
    run lamb Lamb bias_correction=false "lr=$LAMB_LR"
    for f in $FREEZES; do
      run "onebitlamb_freeze$f" OneBitLamb "freeze_step=$f" "lr=$LAMB_LR"
    done
  )
  echo "$rows" | awk 'NR == 1 { base = $2 }
    $1 == "lamb" { lamb = $2 }
    { d = ($2 - base) / base
      printf "%-22s val loss %.5f  final train loss %.5f  val vs AdamW %+.3f%%", $1, $2, $3, 100 * d
      if ($1 ~ /^onebitlamb/) {
        l = ($2 - lamb) / lamb; printf "  vs Lamb %+.3f%%", 100 * l
        if (l < 0) l = -l; if (l > worstLamb) worstLamb = l
        if (d < 0) d = -d; if (d > worstLambAdam) worstLambAdam = d
      } else if (NR > 1 && $1 != "lamb") { if (d < 0) d = -d; if (d > worst) worst = d }
      printf "\n" }
    END { printf "band: OneBitAdam and ZeroOneAdam val loss within %.3f%% of AdamW\x27s\n", 100 * worst
          printf "band: OneBitLamb val loss within %.3f%% of Lamb\x27s (bias_correction false), %.3f%% of AdamW\x27s\n",
            100 * worstLamb, 100 * worstLambAdam }'
} | tee "$OUT"
