#!/usr/bin/env bash
# CPU training speed of `dsrt train` side by side with Debian's PyTorch (python3-torch, through
# bench/torch_gpt2_train.py) in one run, on the same model, batch and thread count (issue 15,
# item 5): GPT-2 124M (12 x 768, 12 heads, vocab 50257) at global batch 4 x T=64 and 4 x T=256,
# 1 rank x 2 threads and 2 ranks x 1 thread, fp32 and bf16 (torch: fp32 weights, bf16 through
# torch.autocast; dsrt: deepspeed.bf16.enabled). Prints tokens/s (steps 2..S), the ratio dsrt /
# torch, and dsrt's model GFLOP/s (6N + attention per token, from the run summary) against the
# sgemm peak measured in the same run (bench_model_flops --sgemm: the best of our OpenMP-split
# sgemm and OpenBLAS's own pool at 1024 x 3072 x 768; a 2-rank row's peak is 2 x the 1-thread one).
# Usage: bench/cpu_train.sh [BUILD_DIR] [OUT_FILE]   (env: STEPS=4, SHAPES="64 256",
#        LAYOUTS="1x2 2x1", DTYPES="fp32 bf16", DS_PYTHON=/usr/bin/python3)
set -euo pipefail

BUILD=${1:-build}
OUT=${2:-bench/results/cpu_train.txt}
STEPS=${STEPS:-4}
SHAPES=${SHAPES:-"64 256"}
LAYOUTS=${LAYOUTS:-"1x2 2x1"}
DTYPES=${DTYPES:-"fp32 bf16"}
PY=${DS_PYTHON:-/usr/bin/python3}
DSRT="$BUILD/dsrt"
DSRUN="$BUILD/dsrun"
FLOPS="$BUILD/bench/bench_model_flops"
HERE=$(cd "$(dirname "$0")" && pwd)
for b in "$DSRT" "$DSRUN" "$FLOPS"; do
  [[ -x "$b" ]] || { echo "cpu_train: $b not built" >&2; exit 2; }
done
"$PY" -c 'import torch' 2>/dev/null || { echo "cpu_train: $PY cannot import torch (apt-get install python3-torch)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$(dirname "$OUT")"

# dsrt_row RANKS THREADS T DTYPE -> "tok/s gflops"
dsrt_row() {
  local r=$1 th=$2 t=$3 dt=$4 bf=false
  [[ $dt == bf16 ]] && bf=true
  local sum="$TMP/dsrt.json" log="$TMP/dsrt.log"
  local args=(train --set model.gpt.n_layer=12 --set model.gpt.n_embd=768 --set model.gpt.n_head=12
    --set model.gpt.seq_len="$t" --set model.gpt.vocab_size=50257
    --set data.synthetic.tokens=262144 --set data.synthetic.val_tokens=8192
    --set train.eval_every=0 --set train.eval_steps=1 --set train.steps="$STEPS"
    --set train.threads="$th" --set deepspeed.train_batch_size=4
    --set deepspeed.scheduler.params.warmup_num_steps=1 --set deepspeed.bf16.enabled=$bf
    --summary "$sum")
  rm -f "$sum"
  if [[ $r == 1 ]]; then
    "$DSRT" "${args[@]}" >"$log" 2>&1
  else
    "$DSRUN" --num_gpus "$r" --master_port $((29600 + RANDOM % 1000)) "$DSRT" "${args[@]}" >"$log" 2>&1
  fi || { echo "cpu_train: dsrt $r x $th T=$t $dt failed:" >&2; tail -20 "$log" >&2; exit 1; }
  jq -r '"\(.timing.tokens_per_sec) \(.timing.gflops) \(.threads.policy)"' "$sum"
}

# torch_row RANKS THREADS T DTYPE -> tok/s
torch_row() {
  local r=$1 th=$2 t=$3 dt=$4
  OMP_NUM_THREADS=$th OPENBLAS_CORETYPE=$TORCH_OPENBLAS_CORETYPE "$PY" "$HERE/torch_gpt2_train.py" --ranks "$r" --threads "$th" --batch 4 \
    --seq "$t" --steps "$STEPS" --dtype "$dt" --port $((29700 + RANDOM % 1000)) >"$TMP/torch.log" 2>&1 ||
    { echo "cpu_train: torch $r x $th T=$t $dt failed:" >&2; tail -20 "$TMP/torch.log" >&2; exit 1; }
  tail -1 "$TMP/torch.log" | jq -r '.tokens_per_sec'
}

{
  echo "# bench/cpu_train.sh $BUILD $OUT   (STEPS=$STEPS; tokens/s over steps 2..$STEPS, global batch 4)"
  echo "# commit $(git -C "$HERE/.." rev-parse --short HEAD)$(git -C "$HERE/.." diff --quiet HEAD -- runtime bench || echo ' (+ uncommitted changes)')"
  echo "# $(date -u +%Y-%m-%dT%H:%MZ); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "# BLAS: $(ldd "$DSRT" | grep -o 'libopenblas[^ ]* => [^ ]*' | head -1) ($(readlink -f /usr/lib/x86_64-linux-gnu/libopenblas.so.0 | sed 's|.*/\(openblas-[a-z]*\)/.*|\1|'))"
  echo "# peer: $("$PY" -c 'import torch; print("torch", torch.__version__)') ($PY)"
  echo
  echo "## sgemm peak, same run"
  S1=$("$FLOPS" --threads 1 --reps 3 --sgemm 1024)
  S2=$("$FLOPS" --threads 2 --reps 3 --sgemm 1024)
  printf '%s\n%s\n' "$S1" "$S2" | sed 's/^/# /'
  P1=$(grep '^sgemm' <<<"$S1" | sed 's/.*peak //')
  P2=$(grep '^sgemm' <<<"$S2" | sed 's/.*peak //')
  # torch loads the same libopenblas: give it the kernels dsrt runs (blas_core.h), for fairness.
  CORE=$(sed -n 's/.*OpenBLAS core \([A-Za-z0-9]*\).*/\1/p' <<<"$S1" | head -1)
  export TORCH_OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$CORE}
  echo "# peak 1 thread $P1 GFLOP/s, 2 threads $P2 GFLOP/s; OpenBLAS core $CORE (torch runs with OPENBLAS_CORETYPE=$TORCH_OPENBLAS_CORETYPE)"
  echo
  printf 'T\tlayout\tdtype\tdsrt_tok/s\ttorch_tok/s\tratio\tdsrt_GFLOP/s\tpeak\tof_peak\n'
  for t in $SHAPES; do
    for lay in $LAYOUTS; do
      r=${lay%x*} th=${lay#*x}
      peak=$(awk -v r="$r" -v a="$P1" -v b="$P2" -v th="$th" 'BEGIN{print (th == 1 ? r * a : b)}')
      for dt in $DTYPES; do
        read -r tok gf policy < <(dsrt_row "$r" "$th" "$t" "$dt")
        ttok=$(torch_row "$r" "$th" "$t" "$dt")
        awk -v t="$t" -v l="$lay" -v d="$dt" -v a="$tok" -v b="$ttok" -v g="$gf" -v p="$peak" \
          'BEGIN{printf "%s\t%s\t%s\t%.1f\t%.1f\t%.2f\t%.1f\t%.1f\t%.2f\n", t, l, d, a, b, a / b, g, p, g / p}'
        if [[ $t == "${SHAPES%% *}" && $dt == fp32 ]]; then echo "#   dsrt $lay: $policy"; fi
      done
    done
  done
} | tee "$OUT"
