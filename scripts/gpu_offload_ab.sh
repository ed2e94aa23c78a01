#!/usr/bin/env bash
# The offload optimizer overlap (DS_OFFLOAD_OVERLAP, docs/gpu.md) on one GPU, A/B in one short
# pass: (1) the [gpu] test that overlap on trains the same bits as off (s2+oo fp32/bf16,
# s3+oo+op), (2) bench_offload_hooks at stage 2 with the overlap off and on, (3) dsrt train on
# GPT-2 124M bf16 B16 T1024 (scripts/gpu_check.sh's model and batch) at stage 2 +
# offload_optimizer cpu and stage 3 + offload optimizer and param cpu, off then on, each step
# time against the other. Prints one line per figure and the ratio; not a CI test.
# Usage: scripts/gpu_offload_ab.sh [--bundle DIR] [--steps N]   (N timed steps, default 6)
#   --bundle DIR  binaries packed by scripts/gpu_bundle.sh (run through DIR/run); default: build-gpu
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUNDLE="" STEPS=6
while (($#)); do
  case $1 in
    --bundle) BUNDLE=${2:?--bundle needs a folder}; shift 2 ;;
    --steps) STEPS=${2:?--steps needs a number}; shift 2 ;;
    *) sed -n '/^# Usage:/,/^#   --bundle/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
RUN=() BIN=$ROOT/build-gpu TESTS=$ROOT/build-gpu/tests
if [[ -n $BUNDLE ]]; then
  BUNDLE=$(cd "$BUNDLE" && pwd)
  RUN=("$BUNDLE/run") BIN=$BUNDLE/bin TESTS=$BUNDLE/bin
fi
PY=${DS_PYTHON:-/usr/bin/python3}
[[ -x $PY ]] || PY=python3
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
find_bin() { [[ -x $1/$2 ]] && echo "$1/$2" || echo "$1/bench/$2"; }
echo "gpu_offload_ab: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), load $(cut -d' ' -f1-3 /proc/loadavg), $(nvidia-smi -L 2>/dev/null | head -1)"

# (1) same bits
rc=0
timeout 240 "${RUN[@]}" "$TESTS/test_runtime_engine" "*offload overlap*" >"$WORK/test.txt" 2>&1 || rc=$?
grep -E 'WARN|offload overlap|passed|failed|SKIP' "$WORK/test.txt" | grep -v '^Filters' | head -20
echo "test [gpu] offload overlap same bits: $([[ $rc == 0 ]] && echo OK || echo "FAIL rc=$rc (see above)")"

# (2) the hooks alone, stage 2
hb=$(find_bin "$BIN" bench_offload_hooks)
for ov in 0 1; do
  rc=0
  DS_OFFLOAD_OVERLAP=$ov timeout 180 "${RUN[@]}" "$hb" --device cuda --stage 2 --steps 4 \
    >"$WORK/hooks$ov.txt" 2>&1 || rc=$?
  awk -v ov="$ov" -v rc="$rc" '$1 == "4" {a = $9; sub(/\)/, "", a)
      printf "bench_offload_hooks stage 2 overlap=%s: fwd_hooks %s ms, bwd_hooks %s ms, step %s ms (adam %s; the step includes the overlapped upload packing), total %s ms\n", ov, $2, $4, $6, a, $7; found = 1}
    END {if (!found) print "bench_offload_hooks stage 2 overlap=" ov ": FAIL rc=" rc}' "$WORK/hooks$ov.txt"
  grep -E '^optimizer overlap' "$WORK/hooks$ov.txt" || true
done

# (3) dsrt train, GPT-2 124M bf16 B16 T1024
sets=(--set model.gpt.n_layer=12 --set model.gpt.n_head=12 --set model.gpt.n_embd=768
  --set model.gpt.seq_len=1024 --set model.gpt.vocab_size=50257 --set model.gpt.padded_vocab_size=50304
  --set deepspeed.train_batch_size=16 --set deepspeed.train_micro_batch_size_per_gpu=16
  --set deepspeed.gradient_accumulation_steps=1 --set deepspeed.bf16.enabled=true
  --set "train.steps=$((STEPS + 3))" --set train.eval_every=0 --set train.log_every=5
  --set data.synthetic.val_tokens=0 --set train.device=cuda
  --set deepspeed.zero_optimization.offload_optimizer.device=cpu)
declare -A CFG=([s2+oo]="--set deepspeed.zero_optimization.stage=2"
  [s3+oo+op]="--set deepspeed.zero_optimization.stage=3 --set deepspeed.zero_optimization.offload_param.device=cpu")
for cfg in s2+oo s3+oo+op; do
  for ov in 0 1; do
    sum=$WORK/${cfg//+/_}_$ov.json rc=0
    # shellcheck disable=SC2086
    (cd "$WORK" && DS_OFFLOAD_OVERLAP=$ov timeout 300 "${RUN[@]}" "$BIN/dsrt" train "${sets[@]}" \
      ${CFG[$cfg]} --summary "$sum" >"$WORK/train_${cfg//+/_}_$ov.txt" 2>&1) || rc=$?
    if ((rc != 0)) || [[ ! -f $sum ]]; then
      echo "dsrt gpt2-124M bf16 $cfg overlap=$ov: FAIL rc=$rc"; tail -5 "$WORK/train_${cfg//+/_}_$ov.txt"
      continue
    fi
    "$PY" - "$sum" "$cfg" "$ov" "$WORK/${cfg//+/_}_0.json" <<'EOF'
import json, os, sys
def ms(path):
    t = json.load(open(path))["timing"]; n = max(t["steps_timed"], 1)
    return t["total_ms"] / n, {k: t[k + "_ms"] / n for k in ("fwd", "bwd", "comm", "optim")}, n
step, split, n = ms(sys.argv[1])
vs = ""
if sys.argv[3] == "1" and os.path.exists(sys.argv[4]):
    off = ms(sys.argv[4])[0]
    vs = f"; {step / off:.2f}x overlap=0's {off:.1f} ms ({off - step:+.1f} ms saved)"
parts = ", ".join(f"{k} {v:.1f}" for k, v in split.items())
print(f"dsrt gpt2-124M bf16 {sys.argv[2]} overlap={sys.argv[3]}: step_ms={step:.1f} ({parts}; {n} timed steps){vs}")
EOF
  done
done
