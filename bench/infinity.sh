#!/usr/bin/env bash
# ZeRO-Infinity under a fixed host-memory budget (issue 15 item 4): the largest GPT that trains
# STEPS steps with finite losses inside BUDGET_MIB of peak RSS per rank, at stage 0 (everything in
# memory) and at stage 3 with offload_param and offload_optimizer on nvme; the ratio of their
# parameter counts; the stage-3 nvme losses against an in-memory run of a model that fits the
# machine (not the budget); and the swap path's achieved read/write GB/s next to a plain
# sequential O_DIRECT read and write of the same disk (dd) measured in the same run.
# The budget is enforced by a memory cgroup (v1 memory.limit_in_bytes = BUDGET_MIB; anonymous
# memory and page cache together, as a container's limit counts them; no swap on this machine),
# so a run that needs more is killed by the kernel: "ok" means it trained inside the budget. Each
# row also gives the peak RSS (/usr/bin/time %M; it includes the resident pages of file-backed
# mappings, e.g. stage 3's gradient partition under nvme, which the kernel reclaims under the
# limit) and the cgroup's peak usage. train.memory_limit_mb is set to the budget too, so a plan
# whose table cannot fit is refused up front. Without a writable memory cgroup (not root, or
# cgroup v2 only) the budget is checked on the peak RSS alone, and the header says so.
# Stage-3 runs use the settings a ZeRO-Infinity user tunes: sub_group_size and reduce_bucket_size
# 4e6 elements (optimizer tiles and gradient buckets of 16 MB instead of the defaults' GBs).
# Usage: bench/infinity.sh [BUILD_DIR] [OUT_FILE]
#   BUDGET_MIB (default 2048), STEPS (default 3), SEQ (default 32), NVME_DIR (default: a folder
#   under /var/tmp, on the root disk), S0_SIZES / S3_SIZES (names from the table below, tried in
#   order; the bench stops at the first that fails), EQ_SIZE (default 354M: the in-memory
#   comparison), MODE=ci (tiny sizes only; a smoke run of the script itself).
# Writes OUT_FILE (default bench/results/nvme.txt).
set -euo pipefail

BUILD=${1:-build}
OUT=${2:-bench/results/nvme.txt}
BUDGET_MIB=${BUDGET_MIB:-2048}
STEPS=${STEPS:-3}
SEQ=${SEQ:-32}
DSRT=$(realpath "$BUILD/dsrt")
[[ -x $DSRT ]] || { echo "infinity: build dsrt in $BUILD first" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "infinity: needs /usr/bin/time (Debian package time)" >&2; exit 2; }
command -v jq >/dev/null || { echo "infinity: needs jq" >&2; exit 2; }
TMP=$(mktemp -d)
CGROOT=
if [[ -w /sys/fs/cgroup/memory && -f /sys/fs/cgroup/memory/memory.limit_in_bytes ]]; then
  CGROOT=/sys/fs/cgroup/memory
fi
NVME_DIR=${NVME_DIR:-$(mktemp -d /var/tmp/ds-infinity.XXXXXX)}
trap 'rm -rf "$TMP" "$NVME_DIR"' EXIT
mkdir -p "$(dirname "$OUT")"

# GPT shapes: layers embd heads (GPT-2's vocabulary 50257, tied head).
declare -A SHAPE=(
  [tiny]="1 64 2" [tiny2]="2 128 2"
  [20M]="6 320 5" [51M]="8 512 8" [85M]="12 640 10" [124M]="12 768 12" [131M]="13 768 12"
  [354M]="24 1024 16" [774M]="36 1280 20" [1.0B]="40 1408 22" [1.3B]="44 1536 24"
  [1.56B]="48 1600 25" [2.0B]="48 1856 29" [2.05B]="64 1600 25" [2.54B]="80 1600 25"
)
# Past 1.56B the shapes grow in depth at GPT-2 XL's width: stage 3 holds one gathered block, the
# next one prefetched and the tied embedding (and their gradients) at a time, so a wider block
# (2.0B at 1856) hits the budget where a deeper model of more parameters does not.
S0_SIZES=(${S0_SIZES:-20M 51M 85M 124M 131M})
S3_SIZES=(${S3_SIZES:-354M 774M 1.56B 2.05B 2.54B})
EQ_SIZE=${EQ_SIZE:-354M}
if [[ ${MODE:-} == ci ]]; then S0_SIZES=(tiny tiny2) S3_SIZES=(tiny tiny2) EQ_SIZE=tiny; fi

# run NAME SIZE KIND [LIMIT]: one training run (KIND s0 | s3nvme | s3mem); writes $TMP/NAME.{log,json,rss}.
run() {
  local name=$1 size=$2 kind=$3 limit=${4:-$BUDGET_MIB} layers embd heads
  read -r layers embd heads <<<"${SHAPE[$size]}"
  local args=(train --set model.gpt.n_layer="$layers" --set model.gpt.n_embd="$embd"
    --set model.gpt.n_head="$heads" --set model.gpt.vocab_size=50257
    --set model.gpt.seq_len="$SEQ" --set data.synthetic.tokens=65536
    --set data.synthetic.val_tokens=4096 --set train.eval_every=0 --set train.eval_steps=1
    --set train.steps="$STEPS" --set deepspeed.train_batch_size=1
    --set deepspeed.scheduler.params.warmup_num_steps=1 --set deepspeed.bf16.enabled=false
    --set train.memory_limit_mb="$limit" --summary "$TMP/$name.json")
  case $kind in
    s0) args+=(--set deepspeed.zero_optimization.stage=0) ;;
    s3mem) args+=(--set deepspeed.zero_optimization.stage=3) ;;
    s3nvme)
      args+=(--set deepspeed.zero_optimization.stage=3
        --set deepspeed.zero_optimization.offload_param.device=nvme
        --set deepspeed.zero_optimization.offload_param.nvme_path="$NVME_DIR"
        --set deepspeed.zero_optimization.offload_optimizer.device=nvme
        --set deepspeed.zero_optimization.offload_optimizer.nvme_path="$NVME_DIR"
        --set deepspeed.zero_optimization.sub_group_size=4000000
        --set deepspeed.zero_optimization.reduce_bucket_size=4000000) ;;
  esac
  local rc=0 cg=
  if [[ -n $CGROOT && $limit != 0 ]]; then
    cg=$CGROOT/ds-infinity-$$-$name
    mkdir "$cg"
    echo $((limit * 1048576)) >"$cg/memory.limit_in_bytes"
  fi
  /usr/bin/time -f %M -o "$TMP/$name.rss" sh -c '[ -z "$1" ] || echo $$ >"$1/cgroup.procs"; shift; exec "$@"' \
    sh "$cg" "$DSRT" "${args[@]}" >"$TMP/$name.log" 2>&1 || rc=$?
  echo 0 >"$TMP/$name.cgpeak"
  if [[ -n $cg ]]; then
    echo $(($(cat "$cg/memory.max_usage_in_bytes") / 1048576)) >"$TMP/$name.cgpeak"
    rmdir "$cg" 2>/dev/null || true
  fi
  if [[ $rc == 137 || $rc == 9 ]] || grep -q 'Killed' "$TMP/$name.log"; then
    echo "killed by the cgroup's memory limit ($limit MiB) (rc $rc)" >>"$TMP/$name.log"
  fi
  return $rc
}

# verdict NAME: "params peak_MiB cgroup_peak_MiB ok|why" for a finished run.
verdict() {
  local name=$1 peak params finite cgpeak
  peak=$(($(tail -1 "$TMP/$name.rss") / 1024))
  cgpeak=$(cat "$TMP/$name.cgpeak")
  params=$(jq -r .num_params "$TMP/$name.json")
  finite=$(jq -r '[.losses[] | select(. != null and . == . and . < 1e30)] | length' "$TMP/$name.json")
  local why=ok
  [[ -z $CGROOT ]] && ((peak > BUDGET_MIB)) && why="over budget"
  [[ $finite == "$STEPS" ]] || why="non-finite loss"
  echo "$params $peak $cgpeak $why"
}

# largest KIND SIZES...: tries each size in order, prints one row per size, and sets BEST.
BEST=0
largest() {
  local kind=$1
  shift
  BEST=0
  BEST_NAME=none
  for size in "$@"; do
    local name="$kind-$size" start end
    start=$(date +%s.%N)
    if run "$name" "$size" "$kind"; then
      end=$(date +%s.%N)
      read -r params peak cgpeak why <<<"$(verdict "$name")"
      printf '  %-7s %-6s params %11s  peak RSS %6s MiB  cgroup peak %6s MiB  %s  (%.0f s)\n' \
        "$kind" "$size" "$params" "$peak" "$cgpeak" "$why" "$(echo "$end - $start" | bc)"
      [[ $why == ok ]] || break
      BEST=$params BEST_NAME=$name
    else
      local why
      why=$(grep -m1 -o 'memory: the plan needs.*missing' "$TMP/$name.log" || tail -1 "$TMP/$name.log")
      [[ -s $TMP/$name.rss ]] && why="$why; peak RSS $(($(tail -1 "$TMP/$name.rss") / 1024)) MiB"
      printf '  %-7s %-6s refused or failed: %s\n' "$kind" "$size" "$why"
      break
    fi
  done
}

# Plain sequential O_DIRECT write then read of the swap folder's disk, 2 GiB, 8 MiB blocks.
disk_bw() {
  local file="$NVME_DIR/dd.probe" wr rd
  wr=$(dd if=/dev/zero of="$file" bs=8M count=256 oflag=direct conv=fsync 2>&1 | awk '/copied/ {print $(NF-1), $NF}')
  rd=$(dd if="$file" of=/dev/null bs=8M iflag=direct 2>&1 | awk '/copied/ {print $(NF-1), $NF}')
  rm -f "$file"
  echo "write $wr, read $rd"
}

{
  echo "# command: BUDGET_MIB=$BUDGET_MIB STEPS=$STEPS SEQ=$SEQ${MODE:+ MODE=$MODE} bench/infinity.sh $BUILD $OUT"
  echo "# commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ uncommitted changes)')"
  echo "# $(date -u +%Y-%m-%dT%H:%MZ); $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo); swap folder $NVME_DIR on $(df --output=source "$NVME_DIR" | tail -1); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  if [[ -n $CGROOT ]]; then budget="enforced by a memory cgroup ($CGROOT)"; else budget="checked on the peak RSS (no writable memory cgroup)"; fi
  echo "# 1 rank, fp32, batch 1 x $SEQ tokens, $STEPS steps, GPT-2 vocabulary; budget $BUDGET_MIB MiB per rank, $budget"
  echo
  echo "plain sequential disk (dd, O_DIRECT, 2 GiB): $(disk_bw)"
  echo
  echo "stage 0, everything in memory:"
  largest s0 "${S0_SIZES[@]}"
  S0_BEST=$BEST S0_NAME=$BEST_NAME
  echo "stage 3, offload_param + offload_optimizer on nvme:"
  largest s3nvme "${S3_SIZES[@]}"
  S3_BEST=$BEST S3_NAME=$BEST_NAME
  if ((S0_BEST > 0)); then
    printf 'largest: stage 0 %s params (%s), stage 3 nvme %s params (%s): ratio %.1f (goal >= 16)\n' \
      "$S0_BEST" "$S0_NAME" "$S3_BEST" "$S3_NAME" "$(echo "$S3_BEST / $S0_BEST" | bc -l)"
  fi
  if [[ $S3_NAME != none ]]; then
    # Traffic per step: the run's bytes (the initial swap-file writes included) over its steps,
    # divided by the mean timed step: the disk's average load while training, not its peak.
    jq -r --argjson steps "$STEPS" '(.timing.total_ms / .timing.steps_timed / 1000) as $step |
      (.nvme.bytes_read / $steps / 1e9) as $rd | (.nvme.bytes_written / $steps / 1e9) as $wr |
      "swap traffic (\(.num_params) params): per step read \($rd * 100 | round / 100) GB, " +
      "written \($wr * 100 | round / 100) GB; step \($step * 10 | round / 10) s; " +
      "average \(($rd / $step) * 100 | round / 100) GB/s read + " +
      "\(($wr / $step) * 100 | round / 100) GB/s write"' "$TMP/$S3_NAME.json"
  fi
  echo
  echo "same model, stage 3 nvme against in memory (stage 0, no budget): $EQ_SIZE"
  for kind in s3nvme s0; do
    run "eq-$kind" "$EQ_SIZE" "$kind" 0 || { echo "  $kind failed: $(tail -1 "$TMP/eq-$kind.log")"; exit 1; }
  done
  jq -r '.losses | map(tostring) | join(" ")' "$TMP/eq-s3nvme.json" | sed 's/^/  stage 3 nvme losses: /'
  jq -r '.losses | map(tostring) | join(" ")' "$TMP/eq-s0.json" | sed 's/^/  stage 0 mem losses:  /'
  if cmp -s <(jq -c .losses "$TMP/eq-s3nvme.json") <(jq -c .losses "$TMP/eq-s0.json"); then
    echo "  equal: yes (bitwise, as printed)"
  else
    echo "  equal: NO"
  fi
  echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT"
