#!/usr/bin/env bash
# Issue 19 item 6: decode and prefill speed of dsrt generate's decoder beside a PyTorch KV-cache
# decode of the same model (bench/torch_decode.py: same GPT-2 shapes, random weights, same threads,
# same prompt/steps/reps), in one run, with the machine's read bandwidth and sgemm peak measured by
# bench_inference_bench in the same run, then the same decode on TP tensor-parallel ranks (dsrun
# --num_gpus TP, THREADS/TP threads each, so the ranks share the same cores as the 1-rank run).
# Prints ours, torch's and the ratios, and the load average before and after. Usage:
#   bench/inference_bench.sh [BUILD_DIR] [OUT_FILE]
#   (env: THREADS=2, STEPS=16, REPS=3, PROMPT=64, PREFILL=512, STREAM_MB=1024, TP=2 (1: skip),
#    TP_PORT=29731)
set -euo pipefail

BUILD=${1:-build}
OUT=${2:-/dev/stdout}
THREADS=${THREADS:-2}
STEPS=${STEPS:-16}
REPS=${REPS:-3}
PROMPT=${PROMPT:-64}
PREFILL=${PREFILL:-512}
STREAM_MB=${STREAM_MB:-1024}
TP=${TP:-2}
TP_PORT=${TP_PORT:-29731}
PY=${DS_PYTHON:-/usr/bin/python3}
BENCH="$BUILD/bench/bench_inference_bench"
[[ -x "$BENCH" ]] || { echo "inference_bench: $BENCH not built" >&2; exit 2; }
"$PY" -c 'import torch' || { echo "inference_bench: $PY has no torch (scripts/install_deps.sh)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

{
  echo "# commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- runtime bench || echo '+dirty'); $(date -u '+%F %H:%M UTC')"
  echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) ($(nproc) cores)"
  echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# command: THREADS=$THREADS STEPS=$STEPS REPS=$REPS PROMPT=$PROMPT PREFILL=$PREFILL STREAM_MB=$STREAM_MB TP=$TP bench/inference_bench.sh $BUILD"
  "$BENCH" --threads "$THREADS" --steps "$STEPS" --reps "$REPS" --prompt "$PROMPT" \
    --prefill "$PREFILL" --stream_mb "$STREAM_MB" | tee "$TMP/ours.txt"
  "$PY" -u bench/torch_decode.py --threads "$THREADS" --steps "$STEPS" --reps "$REPS" \
    --prompt "$PROMPT" --prefill "$PREFILL" | tee "$TMP/torch.txt"
  if (( TP > 1 )); then
    TP_THREADS=$(( THREADS / TP > 0 ? THREADS / TP : 1 ))
    "$BUILD/dsrun" --num_gpus "$TP" --master_port "$TP_PORT" "$BENCH" --threads "$TP_THREADS" \
      --steps "$STEPS" --reps "$REPS" --prompt "$PROMPT" --prefill 0 --ab false \
      | sed -n 's/^\[0\] //p' | tee "$TMP/tp.txt"
  fi
  echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "ratios (ours / torch):"
  for dt in fp32 bf16; do
    for b in 1 16; do
      o=$(awk -v d="$dt" -v b="$b" '$1=="decode" && $2==d && $3=="batch" && $4==b":" {print $5}' "$TMP/ours.txt")
      t=$(awk -v d="$dt" -v b="$b" '$2=="decode" && $3==d && $5==b":" {print $6}' "$TMP/torch.txt")
      [[ -n $o && -n $t ]] && awk -v o="$o" -v t="$t" -v d="$dt" -v b="$b" \
        'BEGIN {printf "  decode %s batch %2d: %.2fx torch (%s vs %s tokens/s)\n", d, b, o / t, o, t}'
    done
    o=$(awk -v d="$dt" '$1=="prefill" && $2==d {print $5}' "$TMP/ours.txt")
    t=$(awk -v d="$dt" '$2=="prefill" && $3==d {print $6}' "$TMP/torch.txt")
    [[ -n $o && -n $t ]] && awk -v o="$o" -v t="$t" -v d="$dt" \
      'BEGIN {printf "  prefill %s: %.2fx torch (%s vs %s tokens/s)\n", d, o / t, o, t}'
  done
  if (( TP > 1 )); then
    echo "$TP tensor-parallel ranks against 1 rank (same run, same $THREADS cores in all):"
    for dt in fp32 bf16; do
      for b in 1 16; do
        o=$(awk -v d="$dt" -v b="$b" '$1=="decode" && $2==d && $3=="batch" && $4==b":" {print $5}' "$TMP/ours.txt")
        t=$(awk -v d="$dt" -v b="$b" '$1=="tp" && $2=="decode" && $3==d && $5==b":" {print $6}' "$TMP/tp.txt")
        [[ -n $o && -n $t ]] && awk -v o="$o" -v t="$t" -v d="$dt" -v b="$b" -v n="$TP" \
          'BEGIN {printf "  decode %s batch %2d: %.2fx 1 rank (%s vs %s tokens/s on %d ranks)\n", d, b, t / o, t, o, n}'
      done
    done
  fi
} > >(tee "$OUT") 2>&1
wait
