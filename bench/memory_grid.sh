#!/usr/bin/env bash
# Peak host memory of `dsrt train` per rank against the startup memory table, over GPT sizes, world
# sizes, ZeRO stages, optimizer offload (none/cpu/nvme) and dtype (issue 15 item 3). Each rank runs
# under /usr/bin/time (its maximum resident set, %M); the table's model states + buffers (host and
# device columns: the same memory on a CPU-only machine; nvme excluded) come from rank 0's
# "memory per rank at start" lines (the largest over ranks), activations from the run summary.
# The runtime floor (binary, libraries, gloo, threads, allocator) is measured in the same run as
# the peak of a tiny model minus its table, per world size, and the check is
#   measured <= 1.10 x (states + buffers + activations) + floor
# plus, when the grid has it, stage 3 / stage 0 <= 0.56 at 124M params, 2 ranks, fp32.
# Usage: bench/memory_grid.sh [BUILD_DIR] [OUT_FILE]
#   MODE=short (default, ~20 runs): 2 sizes (~20M, 124M) x 2 ranks x stages 0-3 x offload
#     none/nvme x fp32, plus bf16 stages 0/3 and cpu offload stage 2 at 124M; MODE=full: 4 sizes
#     (20M-354M) x worlds 1,2,4 x every stage x none/cpu/nvme x fp32/bf16 (hours on 2 cores; a
#     configuration the machine cannot hold is refused by the memory check and listed as such).
#     MODE=ci: the smallest size, 2 ranks, 4 stages, no offload.
#   NVME_DIR (default: a folder under $TMPDIR), STEPS (default 2), SEQ (default 32), GRID_SIZES
#   (a subset of the sizes: tiny 20M 51M 124M 354M), GRID_STAGES (e.g. "3"), GRID_WORLDS (e.g. "4").
# Writes OUT_FILE (default bench/results/memory.txt), OUT_FILE's .tsv and a PNG plot beside it.
set -euo pipefail

BUILD=${1:-build}
OUT=${2:-bench/results/memory.txt}
MODE=${MODE:-short}
STEPS=${STEPS:-2}
SEQ=${SEQ:-32}
PY=${DS_PYTHON:-/usr/bin/python3}
DSRT=$(realpath "$BUILD/dsrt")
DSRUN=$(realpath "$BUILD/dsrun")
[[ -x $DSRT && -x $DSRUN ]] || { echo "memory_grid: build dsrt and dsrun in $BUILD first" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "memory_grid: needs /usr/bin/time (Debian package time)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
NVME_DIR=${NVME_DIR:-$TMP/nvme}
mkdir -p "$(dirname "$OUT")" "$NVME_DIR"
TSV=${OUT%.txt}.tsv
PNG=${OUT%.txt}.png

# Wrapper each rank runs: dsrt under /usr/bin/time, its peak RSS (KiB) into $TMP/rss.<RANK>.
cat >"$TMP/rank.sh" <<EOF
#!/bin/sh
exec /usr/bin/time -f %M -o "$TMP/rss.\${RANK:-0}" "$DSRT" "\$@"
EOF
chmod +x "$TMP/rank.sh"

# GPT shapes: name layers embd heads vocab (parameters with GPT-2's vocabulary, tied head).
declare -A SHAPE=(
  [tiny]="1 32 2 64"
  [20M]="6 320 5 50257"
  [51M]="8 512 8 50257"
  [124M]="12 768 12 50257"
  [354M]="24 1024 16 50257"
)

# run SIZE WORLD STAGE OFFLOAD DTYPE: one training run; prints one TSV row.
run() {
  local size=$1 world=$2 stage=$3 off=$4 dt=$5
  local name="$size-w$world-s$stage-$off-$dt" layers embd heads vocab
  read -r layers embd heads vocab <<<"${SHAPE[$size]}"
  rm -f "$TMP"/rss.* "$TMP/sum.json"
  local args=(train --set model.gpt.n_layer="$layers" --set model.gpt.n_embd="$embd"
    --set model.gpt.n_head="$heads" --set model.gpt.vocab_size="$vocab"
    --set model.gpt.seq_len="$SEQ" --set data.synthetic.tokens=65536
    --set data.synthetic.val_tokens=4096 --set train.eval_every=0 --set train.eval_steps=1
    --set train.steps="$STEPS" --set deepspeed.train_batch_size="$world"
    --set deepspeed.scheduler.params.warmup_num_steps=1
    --set deepspeed.zero_optimization.stage="$stage"
    --set deepspeed.bf16.enabled=$([[ $dt == bf16 ]] && echo true || echo false)
    --summary "$TMP/sum.json")
  if [[ $off != none ]]; then
    args+=(--set deepspeed.zero_optimization.offload_optimizer.device="$off"
      --set deepspeed.zero_optimization.offload_optimizer.nvme_path="$NVME_DIR")
  fi
  local rc=0
  if [[ $world == 1 ]]; then
    "$TMP/rank.sh" "${args[@]}" >"$TMP/$name.log" 2>&1 || rc=$?
  else
    "$DSRUN" --num_gpus "$world" --master_port $((29700 + RANDOM % 1000)) "$TMP/rank.sh" \
      "${args[@]}" >"$TMP/$name.log" 2>&1 || rc=$?
  fi
  if [[ $rc != 0 ]]; then
    local why
    why=$(grep -m1 -o 'memory: the plan needs.*missing' "$TMP/$name.log" || tail -1 "$TMP/$name.log")
    printf '%s\t%s\t%s\t%s\t%s\tREFUSED_OR_FAILED\t%s\n' "$size" "$world" "$stage" "$off" "$dt" "$why"
    return 0
  fi
  local peak=0 k
  for k in "$TMP"/rss.*; do
    local v
    v=$(tail -1 "$k")
    ((v > peak)) && peak=$v
  done
  # Table (MiB): params grads optimizer buffers, host + device columns, plus the grads' nvme
  # column: the stage-3 gradient partition with offload_optimizer nvme is a shared file mapping
  # (zero/mapped_floats.h) whose page-cache pages count in the RSS while resident, and nothing
  # evicts them without memory pressure (bench/infinity.sh is where a limit does).
  local table
  table=$(sed 's/^\[[0-9]*\] //' "$TMP/$name.log" | awk '/memory per rank at start/ {on=1; next}
    on && $1 ~ /^(params|buffers)$/ {s += $2 + $3}
    on && $1 == "grads" {s += $2 + $3 + $4}
    on && $1 == "optimizer" {s += $3 + $4}
    on && $1 == "total" {print s; exit}')
  # Activations + the model's workspace (gradient scratch, bf16 widening: run summary).
  local params act
  params=$(jq -r .num_params "$TMP/sum.json")
  act=$(jq -r '(.activation_bytes + (.workspace_bytes // 0)) / 1048576' "$TMP/sum.json")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%.1f\t%.1f\n' "$size" "$world" "$stage" "$off" "$dt" \
    "$params" "$((peak / 1024))" "$table" "$act"
}

SIZES=(20M 124M)
WORLDS=(2)
STAGES=(0 1 2 3)
OFFS=(none nvme)
DTS=(fp32)
case $MODE in
  full) SIZES=(20M 51M 124M 354M) WORLDS=(1 2 4) OFFS=(none cpu nvme) DTS=(fp32 bf16) ;;
  ci) SIZES=(20M) WORLDS=(2) OFFS=(none) ;;
  short) ;;
  *) echo "memory_grid: MODE=$MODE (expected short, full or ci)" >&2; exit 2 ;;
esac
if [[ -n ${GRID_SIZES:-} ]]; then read -ra SIZES <<<"$GRID_SIZES"; fi  # e.g. GRID_SIZES="124M"
if [[ -n ${GRID_STAGES:-} ]]; then read -ra STAGES <<<"$GRID_STAGES"; fi  # e.g. GRID_STAGES="3"
if [[ -n ${GRID_WORLDS:-} ]]; then read -ra WORLDS <<<"$GRID_WORLDS"; fi  # e.g. GRID_WORLDS="2 4"

{
  printf 'size\tworld\tstage\toffload\tdtype\tparams\tpeak_MiB\ttable_MiB\tact_MiB\n'
  for w in "${WORLDS[@]}"; do run tiny "$w" 0 none fp32; done
  for size in "${SIZES[@]}"; do
    for w in "${WORLDS[@]}"; do
      for st in "${STAGES[@]}"; do
        for off in "${OFFS[@]}"; do
          [[ $st == 0 && $off != none ]] && continue
          for dt in "${DTS[@]}"; do run "$size" "$w" "$st" "$off" "$dt"; done
        done
      done
    done
  done
  if [[ $MODE == short ]]; then  # the other dtype and cpu offload at the issue's shape
    for st in 0 3; do run 124M 2 "$st" none bf16; done
    run 124M 2 2 cpu fp32
  fi
} | tee "$TSV" >&2

LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
{
  echo "# command: MODE=$MODE${GRID_SIZES:+ GRID_SIZES=\"$GRID_SIZES\"}${GRID_STAGES:+ GRID_STAGES=\"$GRID_STAGES\"}${GRID_WORLDS:+ GRID_WORLDS=\"$GRID_WORLDS\"} STEPS=$STEPS SEQ=$SEQ bench/memory_grid.sh $BUILD $OUT"
  echo "# commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ uncommitted changes)')"
  echo "# $(date -u +%Y-%m-%dT%H:%MZ); $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo); load average at end: $LOAD_END (the machine is shared: RSS is not timing-sensitive)"
  echo "# per rank: peak = max over ranks of /usr/bin/time %M; table = rank 0's startup table (largest over ranks),"
  echo "# params + grads + optimizer states + buffers in the host and device columns; act = activations + model workspace (run summary); grads include their nvme column (mapped, resident page cache)."
  "$PY" "$(dirname "$0")/memory_grid_report.py" "$TSV" "$PNG"
} >"$OUT"
cat "$OUT"
