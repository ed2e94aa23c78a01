#!/usr/bin/env bash
# Training throughput of `dsrt train`: tokens/s and the per-step time split (forward, backward,
# communication, optimizer) for the built-in default plan and GPT-2 small shapes (12 layers, 768
# wide, 12 heads, T=256, vocab 4096) at 1 and 2 ranks in fp32 and bf16, then each ZeRO stage's
# step time relative to stage 0 at 2 and 4 ranks. Figures come from the run summary JSON that
# rank 0 writes (timing excludes the first step). Usage:
#   OMP_NUM_THREADS=1 bench/train_bench.sh [BUILD_DIR] [OUT_FILE]   (env: STEPS, SMALL_STEPS, STAGE_STEPS, QUICK=1)
# With OMP_NUM_THREADS=1 every rank computes on one core, so the 1-thread sgemm printed in the same run
# is the per-rank ceiling (a 2-rank row's ceiling is twice it).
set -euo pipefail

BUILD=${1:-build}
OUT=${2:-bench/results/train.txt}
STEPS=${STEPS:-30}              # default plan steps per configuration
SMALL_STEPS=${SMALL_STEPS:-3}   # GPT-2 small steps per configuration
STAGE_STEPS=${STAGE_STEPS:-6}  # steps per ZeRO stage configuration
DSRT="$BUILD/dsrt"
DSRUN="$BUILD/dsrun"
[[ -x "$DSRT" ]] || { echo "train_bench: $DSRT not built" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$(dirname "$OUT")"

# run NAME RANKS [--set ...]: trains, then prints one result row from the summary.
run() {
  local name=$1 ranks=$2
  shift 2
  local sum="$TMP/$name.json"
  rm -f "$sum"
  if [[ $ranks == 1 ]]; then
    "$DSRT" train "$@" --summary "$sum" >"$TMP/$name.log" 2>&1
  else
    "$DSRUN" --num_gpus "$ranks" --master_port $((29600 + RANDOM % 1000)) \
      "$DSRT" train "$@" --summary "$sum" >"$TMP/$name.log" 2>&1
  fi || { echo "train_bench: $name failed:" >&2; tail -20 "$TMP/$name.log" >&2; exit 1; }
  jq -r --arg n "$name" --arg r "$ranks" '.timing as $t | ($t.steps_timed) as $s |
    [$n, $r, .dtype, (.zero_stage|tostring), (.num_params|tostring),
     ($t.tokens_per_sec|floor|tostring), ($t.gflops*10|floor/10|tostring),
     (($t.total_ms/$s)*10|floor/10|tostring), (($t.fwd_ms/$s)*10|floor/10|tostring),
     (($t.bwd_ms/$s)*10|floor/10|tostring), (($t.comm_ms/$s)*10|floor/10|tostring),
     (($t.optim_ms/$s)*10|floor/10|tostring), (.losses[-1]*1000|floor/1000|tostring)] |
    @tsv' "$sum"
}

header() {
  printf 'config\tranks\tdtype\tstage\tparams\ttok/s\tGFLOP/s\tstep_ms\tfwd\tbwd\tcomm\toptim\tloss\n'
}

SMALL=(--set model.gpt.n_layer=12 --set model.gpt.n_embd=768 --set model.gpt.n_head=12
       --set model.gpt.seq_len=256 --set model.gpt.vocab_size=4096
       --set data.synthetic.tokens=262144 --set data.synthetic.val_tokens=8192
       --set train.eval_every=0 --set train.eval_steps=1
       --set deepspeed.scheduler.params.warmup_num_steps=1)

{
  echo "# $0 $BUILD $OUT   (STEPS=$STEPS SMALL_STEPS=$SMALL_STEPS STAGE_STEPS=$STAGE_STEPS)"
  echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "# $(date -u +%Y-%m-%dT%H:%MZ); OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}; times are ms per step"
  echo "# (mean over steps 2..N); tok/s is global (all ranks); GFLOP/s uses the model's 6N+attention"
  echo
  echo "## default plan and GPT-2 small shapes, 1 and 2 ranks, fp32 and bf16"
  header
  for dt in fp32 bf16; do
    bf=false; [[ $dt == bf16 ]] && bf=true
    for r in 1 2; do
      run "default-$dt" $r --set train.steps=$STEPS --set train.eval_every=0 \
        --set deepspeed.bf16.enabled=$bf
    done
  done
  if [[ ${QUICK:-0} != 1 ]]; then
    for dt in fp32 bf16; do
      bf=false; [[ $dt == bf16 ]] && bf=true
      for r in 1 2; do
        run "gpt2small-$dt" $r "${SMALL[@]}" --set train.steps=$SMALL_STEPS \
          --set deepspeed.train_batch_size=$r --set deepspeed.bf16.enabled=$bf
      done
    done
  fi
  if [[ ${QUICK:-0} != 1 ]]; then
    [[ -x "$BUILD/bench/bench_model_flops" ]] || { echo "train_bench: $BUILD/bench/bench_model_flops not built" >&2; exit 2; }
    echo
    echo "## OpenBLAS sgemm at the GPT-2 small shape, same run (the ceiling for the GFLOP/s above)"
    "$BUILD/bench/bench_model_flops" --threads "${OMP_NUM_THREADS:-1}" --reps 2 --only GPT-2 2>&1 \
      | sed 's/^/# /'
  fi
  echo
  echo "## ZeRO stages vs stage 0 (GPT 4x256, T=64, vocab 512, fp32, global batch 8), 2 and 4 ranks"
  MED=(--set model.gpt.n_layer=4 --set model.gpt.n_embd=256 --set model.gpt.n_head=4
       --set model.gpt.seq_len=64 --set model.gpt.vocab_size=512 --set train.eval_every=0
       --set deepspeed.scheduler.params.warmup_num_steps=1
       --set train.steps=$STAGE_STEPS --set deepspeed.train_batch_size=8)
  header
  for r in 2 4; do
    base=""
    for st in 0 1 2 3; do
      row=$(run "stage$st" $r "${MED[@]}" --set deepspeed.zero_optimization.stage=$st)
      ms=$(cut -f8 <<<"$row")
      [[ $st == 0 ]] && base=$ms
      printf '%s\trel_to_stage0=%s\n' "$row" "$(awk -v a="$ms" -v b="$base" 'BEGIN{printf "%.2f", a/b}')"
    done
  done
} | tee "$OUT"
