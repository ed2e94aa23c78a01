#!/usr/bin/env bash
# The one command that proves dsrt's GPU path on a machine with an NVIDIA GPU, writing one plain
# text report:
#   device  nvidia-smi -L and the device summary (and, with --bundle, that every library resolves)
#   build   without --bundle: cmake for the local GPU (CUDA_ARCHITECTURES=native) into build-gpu
#   tests   every [gpu] Catch2 case, one process per case; a skipped [gpu] case is a FAIL here
#           unless it needs more GPUs than the machine has ("needs two CUDA devices")
#   train   the built-in default plan, --set train.steps=20, on cpu and on cuda, fp32 and bf16,
#           at ZeRO stages 0-3 and with offload_optimizer / offload_param cpu; cuda losses
#           against the cpu run of the same plan: fp32 within 1e-4 relative at every step; bf16
#           within 3x the largest cpu-bf16-vs-cpu-fp32 relative difference of that plan; fp16
#           at stages 0, 2 and 3 against the cpu fp16 run (emulated there), with the same skipped
#           steps and loss scales: emulated on the GPU too (DS_FP16_COMPUTE=emulated) within
#           1e-3, native (fp16n: the GPU default, docs/gpu.md "Precision") within 2e-3
#   bench   bench/gpu/torch_gpt2.py (PyTorch eager and torch.compile) and dsrt on the same GPT-2
#           124M (B=16, T=1024, bf16, synthetic data): tokens/s, step time, MFU against 989
#           TFLOP/s (H100/H200 SXM dense bf16) with nanoGPT's 6N + 12LCT flops per token;
#           then ZeRO-Offload on the same model (stage 2 + offload_optimizer cpu, stage 3 +
#           offload optimizer and param cpu): step time against stage 0, the phase split and
#           the device memory, and bench_offload_hooks (the hooks alone, no model compute)
#   comm    dsrt comm-bench over nccl at world size 1 on device buffers (busbw = algbw there)
#   multi   world 2 over nccl: the default plan at ZeRO stages 0-3 (+ offload, + activation
#           checkpointing), fp32 and bf16, two ranks on device buffers against the cpu gloo run of
#           the same world (same tolerances as train); then comm-bench over nccl at world 2. With
#           one GPU the two ranks are simulated hosts on it (NCCL_HOSTID; NCCL's socket transport)
# Every step is bounded by `timeout`; a failure is reported and the script goes on, exiting 1 at
# the end when anything failed (2: bad usage or an unusable --bundle).
#
# Usage: scripts/gpu_check.sh [--bundle DIR] [--out DIR] [--quick] [--only LIST] [--steps N]
#                             [--budget SECS]
#   --bundle DIR  use the binaries scripts/gpu_bundle.sh packed (through DIR/run); without it,
#                 build into build-gpu (needs every build dependency on this machine)
#   --out DIR     where gpu_report.txt and gpu_check_logs.tar.gz go (default: $OUT, else
#                 ./gpu_check_out)
#   --quick       10 training steps, stages 0, 2 + offload_optimizer and 3 (3 with both
#                 offloads), shorter benches
#   --only LIST   comma-separated subset of: tests,train,bench,comm,multi (device always runs)
#   --steps N     training steps per comparison run (default 20; --quick 10)
#   --budget SECS stop starting work SECS after the start: every later command gets only what is
#                 left, so the report and the logs are still written under an outer time limit
# Env: GPU_CHECK_PYTHON (python with torch for the bench; default /opt/torch/.venv/bin/python3
# when present, else python3), GPU_CHECK_PEAK_TFLOPS (default 989).
# Not a CI test (scripts/test.sh) and not a benchmark suite (bench/*.sh): one pass, one report.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUNDLE=""
OUTDIR=${OUT:-$PWD/gpu_check_out}
QUICK=0
ONLY="tests,train,bench,comm,multi"
STEPS=""
BUDGET=0
usage() { sed -n '/^# Usage:/,/^# Not a CI/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while (($#)); do
  case $1 in
    --bundle) BUNDLE=${2:?--bundle needs a folder}; shift 2 ;;
    --out) OUTDIR=${2:?--out needs a folder}; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --only) ONLY=${2:?--only needs a list}; shift 2 ;;
    --steps) STEPS=${2:?--steps needs a number}; shift 2 ;;
    --budget) BUDGET=${2:?--budget needs seconds}; shift 2 ;;
    -h | --help) usage ;;
    *) echo "gpu_check.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
for s in ${ONLY//,/ }; do
  case $s in tests | train | bench | comm | multi) ;; *) echo "gpu_check.sh: --only: unknown step '$s'" >&2; exit 2 ;; esac
done
want() { [[ ",$ONLY," == *",$1,"* ]]; }
[[ -z $STEPS ]] && STEPS=$((QUICK ? 10 : 20))
[[ $STEPS =~ ^[1-9][0-9]*$ ]] || { echo "gpu_check.sh: --steps '$STEPS' is not a positive number" >&2; exit 2; }
[[ $BUDGET =~ ^[0-9]+$ ]] || { echo "gpu_check.sh: --budget '$BUDGET' is not a number of seconds" >&2; exit 2; }
PEAK_TFLOPS=${GPU_CHECK_PEAK_TFLOPS:-989}
if [[ -n ${GPU_CHECK_PYTHON:-} ]]; then PY=$GPU_CHECK_PYTHON
elif [[ -x /opt/torch/.venv/bin/python3 ]]; then PY=/opt/torch/.venv/bin/python3
else PY=python3; fi
# Our runs are single processes: no launcher variables may leak in.
unset WORLD_SIZE RANK LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT

mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
REPORT=$OUTDIR/gpu_report.txt
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
LOGS=$WORK/logs
mkdir -p "$LOGS"
NOK=0 NFAIL=0 NSKIP=0
T_START=$(date +%s)

finish() {
  tar -C "$WORK" -czf "$OUTDIR/gpu_check_logs.tar.gz" logs 2>/dev/null || true
  rm -rf "$WORK"
}
trap finish EXIT

now_ms() { echo $(($(date +%s%N) / 1000000)); }
secs_since() { local t=$(($(now_ms) - $1)); printf '%d.%d' $((t / 1000)) $((t % 1000 / 100)); }

# result STEP CHECK STATUS DETAIL [LOG]: one table row in the report (and on stdout); a FAIL with
# a log adds that log's last lines, indented.
result() {
  local row
  row=$(printf '%-7s %-36s %-7s %s' "$1" "$2" "$3" "$4")
  echo "$row" | tee -a "$REPORT"
  case $3 in OK) NOK=$((NOK + 1)) ;; FAIL) NFAIL=$((NFAIL + 1)) ;; *) NSKIP=$((NSKIP + 1)) ;; esac
  if [[ $3 == FAIL && -n ${5:-} && -s ${5:-/nonexistent} ]]; then
    grep -v '^\s*$' "$5" | tail -6 | cut -c1-200 | sed 's/^/          | /' | tee -a "$REPORT"
  fi
}
note() { echo "$*" | tee -a "$REPORT"; }

# bounded SECS LOG CMD...: runs CMD with stdout+stderr into LOG, killed after SECS (or what is left
# of --budget); returns its status (124: timed out or no budget left, noted in the log).
# budget_secs SECS: SECS, or what is left of --budget when less; returns 1 once under 5 s are left.
budget_secs() {
  local secs=$1 left
  if ((BUDGET)); then
    left=$((BUDGET - ($(date +%s) - T_START)))
    ((left >= 5)) || return 1
    ((secs <= left)) || secs=$left
  fi
  echo "$secs"
}

bounded() {
  local secs=$1 log=$2 rc=0
  shift 2
  if ! secs=$(budget_secs "$secs"); then
    echo "gpu_check.sh: not run, the --budget of $BUDGET s is spent: $*" >"$log"
    return 124
  fi
  timeout -k 10 "$secs" "$@" >"$log" 2>&1 </dev/null || rc=$?
  ((rc == 124 || rc == 137)) && echo "gpu_check.sh: timed out after $secs s: $*" >>"$log"
  return $rc
}

# ---- binaries ------------------------------------------------------------------------------------
RUN=()
BIN_DIR="" TEST_DIR="" BUILD_NOTE=""
gpu_tests_from_source() {
  grep -rl --include='*_test.cc' '\[gpu\]' "$ROOT/tests" | while IFS= read -r f; do
    local d=${f#"$ROOT/tests/"}
    d=${d%/*}
    echo "test_${d//\//_}"
  done | sort -u
}
if [[ -n $BUNDLE ]]; then
  [[ -x $BUNDLE/run && -f $BUNDLE/GPU_TESTS ]] ||
    { echo "gpu_check.sh: --bundle $BUNDLE: no run wrapper or GPU_TESTS there (make it with scripts/gpu_bundle.sh)" >&2; exit 2; }
  BUNDLE=$(cd "$BUNDLE" && pwd)
  RUN=("$BUNDLE/run")
  BIN_DIR=$BUNDLE/bin TEST_DIR=$BUNDLE/bin
  mapfile -t GPU_TESTS <"$BUNDLE/GPU_TESTS"
  COMMIT=$(head -1 "$BUNDLE/COMMIT" 2>/dev/null || echo unknown)
  BUILD_NOTE="bundle $BUNDLE"
else
  BIN_DIR=$ROOT/build-gpu TEST_DIR=$ROOT/build-gpu/tests
  mapfile -t GPU_TESTS < <(gpu_tests_from_source)
  COMMIT=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
  [[ $COMMIT != unknown ]] && COMMIT="$COMMIT $(git -C "$ROOT" log -1 --format=%s)"
  BUILD_NOTE="built here into $BIN_DIR"
fi
DSRT=$BIN_DIR/dsrt

# ---- (a) device ------------------------------------------------------------------------------------
GPU_NAME="no GPU found" NGPU=0
smi_log=$LOGS/nvidia-smi.txt
smi_ok=0
if command -v nvidia-smi >/dev/null; then
  if bounded 30 "$smi_log" nvidia-smi -L && grep -q '^GPU ' "$smi_log"; then
    smi_ok=1
    NGPU=$(grep -c '^GPU ' "$smi_log")
    GPU_NAME=$(grep '^GPU 0' "$smi_log" | sed 's/^GPU 0: //; s/ (UUID.*//')
    q=$(timeout 30 nvidia-smi --query-gpu=driver_version,memory.total,compute_cap,clocks.max.sm,power.limit \
      --format=csv,noheader 2>/dev/null | head -1 || true)
    [[ -n $q ]] && GPU_NAME="$GPU_NAME (driver, memory, cc, max SM clock, power: $q)"
    timeout 30 nvidia-smi >>"$smi_log" 2>&1 || true
  fi
else
  echo "nvidia-smi not on PATH" >"$smi_log"
fi

{
  echo "commit: $COMMIT"
  echo "gpu: $GPU_NAME"
  echo "host: $(hostname), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), mode $([[ $QUICK == 1 ]] && echo quick || echo full)," \
    "steps $STEPS, only $ONLY; $BUILD_NOTE"
  echo
  printf '%-7s %-36s %-7s %s\n' step check result detail
  printf '%-7s %-36s %-7s %s\n' ------- ------------------------------------ ------- ------
} >"$REPORT"
cat "$REPORT"

if ((smi_ok)); then
  result device "nvidia-smi -L" OK "$NGPU GPU(s); GPU 0: ${GPU_NAME%% (*}"
else
  result device "nvidia-smi -L" FAIL "no GPU listed" "$smi_log"
fi

if [[ -n $BUNDLE ]]; then
  if bounded 60 "$LOGS/bundle_ldd.txt" "$BUNDLE/run" --ldd; then
    result device "bundle libraries (run --ldd)" OK "all resolved"
  else
    result device "bundle libraries (run --ldd)" FAIL "unresolved libraries" "$LOGS/bundle_ldd.txt"
  fi
fi

# ---- build (no bundle) -------------------------------------------------------------------------
if [[ -z $BUNDLE ]]; then
  t0=$(now_ms)
  targets=(dsrt dsrun "${GPU_TESTS[@]}")
  rc=0
  bounded 600 "$LOGS/configure.txt" cmake -S "$ROOT" -B "$BIN_DIR" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=native -DDS_WITH_CUDA=ON -DDS_WITH_NCCL=ON || rc=$?
  if ((rc == 0)); then
    bounded 2400 "$LOGS/build.txt" cmake --build "$BIN_DIR" -j "$(nproc)" --target "${targets[@]}" || rc=$?
    if ((rc == 0)); then
      result build "cmake native -> build-gpu" OK "${#targets[@]} targets in $(secs_since "$t0") s"
    else
      result build "cmake native -> build-gpu" FAIL "build rc=$rc" "$LOGS/build.txt"
    fi
  else
    result build "cmake native -> build-gpu" FAIL "configure rc=$rc" "$LOGS/configure.txt"
  fi
fi
if [[ ! -x $DSRT ]]; then
  result device "dsrt binary" FAIL "$DSRT missing: nothing else can run"
  note ""
  note "summary: $NOK OK, $NFAIL FAIL, $NSKIP SKIPPED in $(($(date +%s) - T_START)) s"
  exit 1
fi

# ---- (b) [gpu] tests -------------------------------------------------------------------------------
if want tests; then
  mkdir -p "$WORK/tests" "$LOGS/tests"
  for t in "${GPU_TESTS[@]}"; do
    bin=$TEST_DIR/$t
    if [[ ! -x $bin ]]; then
      result tests "$t [gpu]" FAIL "binary $bin missing"
      continue
    fi
    list=$LOGS/tests/$t.cases.txt
    if ! timeout -k 10 60 "${RUN[@]}" "$bin" --ds-list-cases "[gpu]" >"$list" 2>"$list.err" </dev/null; then
      result tests "$t [gpu]" FAIL "--ds-list-cases failed" "$list.err"
      continue
    fi
    pass=0 fail=0 skip=0 multi=0 t0=$(now_ms) details=()
    while IFS=$'\t' read -r name spec _tags; do
      [[ -n $name && -n $spec ]] || continue  # an empty spec would run every case
      n=$((pass + fail + skip + multi + 1))
      log=$LOGS/tests/$t.$n.txt
      rc=0
      (cd "$WORK/tests" && bounded 240 "$log" "${RUN[@]}" "$bin" "$spec" --durations yes) || rc=$?
      if ((rc == 0)); then
        pass=$((pass + 1))
      elif ((rc == 77)); then
        why=$(grep -m1 '^SKIPPED: ' "$log" || true)
        why=${why#"SKIPPED: $name: "}
        # A case for more GPUs than this machine has is not runnable here: SKIPPED, not FAIL.
        need=0
        [[ $why =~ needs\ (two|[0-9]+)\ CUDA\ devices ]] && need=${BASH_REMATCH[1]/two/2}
        if ((need > NGPU)); then
          multi=$((multi + 1))
          details+=("SKIPPED (needs more GPUs than the $NGPU here) $name: $why")
        else
          skip=$((skip + 1))
          details+=("SKIPPED (counts as FAIL on a GPU machine) $name: $why")
        fi
      else
        fail=$((fail + 1))
        why=$( ( ((rc == 124 || rc == 137)) && echo "timed out (240 s or --budget)") ||
          grep -E 'FAILED|REQUIRE|CHECK|error|what\(\)' "$log" | tail -2 | tr '\n' ' ' | cut -c1-160)
        details+=("FAILED $name: rc=$rc ${why:-see $log}")
      fi
    done <"$list"
    total=$((pass + fail + skip + multi))
    detail="$total cases: $pass passed, $fail failed, $skip skipped"
    ((multi)) && detail+=", $multi not runnable on $NGPU GPU(s)"
    detail+=", $(secs_since "$t0") s"
    if ((total == 0)); then
      result tests "$t [gpu]" FAIL "no [gpu] cases in the binary (source has some)"
    elif ((fail + skip > 0)); then
      result tests "$t [gpu]" FAIL "$detail"
    else
      result tests "$t [gpu]" OK "$detail"
    fi
    for d in "${details[@]:0:8}"; do note "          | $d"; done
    ((${#details[@]} <= 8)) || note "          | ... $((${#details[@]} - 8)) more in logs/tests/$t.*.txt"
  done
fi

# ---- (c) training: cpu against cuda ------------------------------------------------------------
# loss_tolerance DTYPE DIR CFG: compare_losses.py's tolerance arguments, into the array TOL, for
# the cuda run of (DTYPE, CFG) against DIR/cpu_DTYPE_CFG.json: fp32 1e-4; fp16 emulated 1e-3 and
# native 2e-3, with the same skipped steps and scales; bf16 3x the cpu bf16-vs-fp32 difference
# (returns 1 when DIR has no cpu fp32 run of CFG to size that band).
loss_tolerance() {
  local dtype=$1 dir=$2 cfg=${3//+/_}
  case $dtype in
    fp32) TOL=(--rtol 1e-4) ;;
    fp16) TOL=(--rtol 1e-3 --same-scaling) ;;
    fp16n) TOL=(--rtol 2e-3 --same-scaling) ;;
    *)
      [[ -f $dir/cpu_fp32_$cfg.json ]] || return 1
      TOL=(--band "$dir/cpu_${dtype}_$cfg.json" "$dir/cpu_fp32_$cfg.json")
      ;;
  esac
}
# compare_line CPU.json CUDA.json LOG: compare_losses.py with TOL (output in LOG); prints its
# verdict line without PASS/FAIL and returns its status.
compare_line() {
  local rc=0 line
  "$PY" "$ROOT/scripts/compare_losses.py" "$1" "$2" "${TOL[@]}" >"$3" 2>&1 || rc=$?
  line=$(tail -1 "$3")
  line=${line% PASS}
  echo "${line% FAIL}"
  return $rc
}

# Keys other engineers add while this script is in use: probe them, do not assume them.
has_key() { "${RUN[@]}" "$DSRT" train --check --set "$1" >"$LOGS/probe_${1%%=*}.txt" 2>&1; }
if want train || want bench || want multi; then
  HAVE_DEVICE=0 HAVE_TF32=0
  has_key train.device=cpu && HAVE_DEVICE=1
  has_key train.tf32=false && HAVE_TF32=1
fi

if want train; then
  mkdir -p "$WORK/train" "$LOGS/train"
  Z=deepspeed.zero_optimization
  declare -A CFG=(
    [s0]="$Z.stage=0"
    [s1]="$Z.stage=1"
    [s1+oo]="$Z.stage=1 $Z.offload_optimizer.device=cpu"
    [s2]="$Z.stage=2"
    [s2+oo]="$Z.stage=2 $Z.offload_optimizer.device=cpu"
    [s3]="$Z.stage=3"
    [s3+oo]="$Z.stage=3 $Z.offload_optimizer.device=cpu"
    [s3+oo+op]="$Z.stage=3 $Z.offload_optimizer.device=cpu $Z.offload_param.device=cpu"
    [s0+ckpt]="$Z.stage=0 deepspeed.activation_checkpointing.enabled=true"
    [s3+ckpt]="$Z.stage=3 deepspeed.activation_checkpointing.enabled=true"
  )
  if ((QUICK)); then CFGS=(s0 s2+oo s3 s3+oo+op s3+ckpt); else
    CFGS=(s0 s1 s1+oo s2 s2+oo s3 s3+oo s3+oo+op s0+ckpt s3+ckpt)
  fi
  DTYPES=(fp32 bf16)
  # The (dtype, cfg) pairs: every cfg in fp32 and bf16; fp16 (device engine only: no offload),
  # emulated on the GPU (DS_FP16_COMPUTE=emulated: the CPU's arithmetic) and native (fp16n: the
  # GPU's default, fp16 weights and activations); the CPU runs fp16 emulated for both.
  PAIRS=()
  for dtype in "${DTYPES[@]}"; do for cfg in "${CFGS[@]}"; do PAIRS+=("$dtype $cfg"); done; done
  PAIRS+=("fp16 s0" "fp16 s2" "fp16 s3" "fp16n s0" "fp16n s2" "fp16n s3")

  # train_run DEV DTYPE CFG: one dsrt train of the default plan; summary in $WORK/train.
  train_run() {
    local dev=$1 dtype=$2 cfg=$3 sets=() kv
    local tag=${dev}_${dtype}_${cfg//+/_}
    sets=(--set "train.steps=$STEPS" --set train.eval_every=0 --set train.log_every=5)
    for kv in ${CFG[$cfg]}; do sets+=(--set "$kv"); done
    [[ $dtype == bf16 ]] && sets+=(--set deepspeed.bf16.enabled=true)
    [[ $dtype == fp16* ]] && sets+=(--set deepspeed.fp16.enabled=true)
    local fp16mode=auto
    [[ $dev == cuda && $dtype == fp16 ]] && fp16mode=emulated
    [[ $dev == cuda && $dtype == fp16n ]] && fp16mode=native
    if [[ $dev == cuda ]] || ((HAVE_DEVICE)); then sets+=(--set "train.device=$dev"); fi
    if [[ $dev == cuda && $dtype != bf16 ]] && ((HAVE_TF32)); then sets+=(--set train.tf32=false); fi
    mkdir -p "$WORK/train/$tag"
    local t0 rc=0
    t0=$(now_ms)
    (cd "$WORK/train/$tag" && DS_FP16_COMPUTE=$fp16mode bounded 150 "$LOGS/train/$tag.txt" \
      "${RUN[@]}" "$DSRT" train "${sets[@]}" --summary "$WORK/train/$tag.json") || rc=$?
    echo "$rc $(secs_since "$t0")" >"$WORK/train/$tag.rc"
  }
  run_status() { cat "$WORK/train/$1.rc" 2>/dev/null || echo "99 0"; }  # 99: never finished

  # CPU references in parallel (2 threads each), then the cuda runs one at a time.
  jobs_max=$(($(nproc) / 2))
  ((jobs_max >= 1)) || jobs_max=1
  t0=$(now_ms)
  for pair in "${PAIRS[@]}"; do
    read -r dtype cfg <<<"$pair"
    while (($(jobs -rp | wc -l) >= jobs_max)); do wait -n || true; done
    OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 train_run cpu "$dtype" "$cfg" &
  done
  wait || true
  note "        (cpu reference runs: ${#PAIRS[@]} (dtype, plan) pairs in $(secs_since "$t0") s;" \
    "train.device key $([[ $HAVE_DEVICE == 1 ]] && echo present || echo ABSENT: cuda runs cannot select the GPU)," \
    "train.tf32 $([[ $HAVE_TF32 == 1 ]] && echo "set false for fp32" || echo absent))"
  for pair in "${PAIRS[@]}"; do
    read -r dtype cfg <<<"$pair"
    if [[ -n ${CUDA_HUNG:-} ]]; then  # one cuda run timed out: do not wait on each of the rest
      tag=cuda_${dtype}_${cfg//+/_}
      echo "gpu_check.sh: not run: $CUDA_HUNG timed out" >"$LOGS/train/$tag.txt"
      echo "97 0" >"$WORK/train/$tag.rc"
      continue
    fi
    train_run cuda "$dtype" "$cfg"
    read -r rc _ < <(run_status "cuda_${dtype}_${cfg//+/_}")
    ((rc != 124 && rc != 137)) || CUDA_HUNG="cuda $dtype $cfg"
  done

  for pair in "${PAIRS[@]}"; do
    read -r dtype cfg <<<"$pair"
    {
      tag=${dtype}_${cfg//+/_}
      name="$dtype $cfg (${STEPS} steps)"
      read -r crc csec < <(run_status "cpu_$tag")
      read -r grc gsec < <(run_status "cuda_$tag")
      if ((crc != 0)); then
        result train "$name" FAIL "cpu run rc=$crc" "$LOGS/train/cpu_$tag.txt"; continue
      fi
      if ((grc != 0)); then
        result train "$name" FAIL "cuda run rc=$grc (cpu ok, $csec s)" "$LOGS/train/cuda_$tag.txt"; continue
      fi
      if ! loss_tolerance "$dtype" "$WORK/train" "$cfg"; then
        result train "$name" FAIL "no cpu fp32 run to size the bf16 band"; continue
      fi
      rc=0
      line=$(compare_line "$WORK/train/cpu_$tag.json" "$WORK/train/cuda_$tag.json" \
        "$LOGS/train/compare_$tag.txt") || rc=$?
      if ((rc == 0)); then
        result train "$name" OK "$line; cuda $gsec s, cpu $csec s"
      else
        result train "$name" FAIL "$line; cuda $gsec s, cpu $csec s"
      fi
      cp "$WORK/train/cpu_$tag.json" "$WORK/train/cuda_$tag.json" "$LOGS/train/" 2>/dev/null || true
    }
  done
fi

# ---- (d) benchmarks: GPT-2 124M -------------------------------------------------------------------
# mfu_of SUMMARY.json: "tokens/s=..., step_ms=..., mfu=..." from dsrt's run summary, with nanoGPT's
# flops per token for GPT-2 124M at T=1024 (N excludes the position table).
# G_VP: the padded vocabulary dsrt computes the head over (llm.c's Vp, a multiple of 64: the
# padding rows stay zero, so it is the same model); PyTorch runs at G_V and, eager, at G_VP too.
G_L=12 G_H=12 G_C=768 G_V=50257 G_VP=50304 G_T=1024 G_B=16
mfu_of() {
  "$PY" - "$1" "$PEAK_TFLOPS" "$G_L" "$G_C" "$G_V" "$G_T" "$G_B" <<'EOF'
import json, sys
f, peak, L, C, V, T, B = sys.argv[1], float(sys.argv[2]), *map(int, sys.argv[3:])
j = json.load(open(f))
t = j["timing"]
n = V * C + L * (12 * C * C + 13 * C) + 2 * C
fpt = 6 * n + 12 * L * C * T
tok = t["tokens_per_sec"]
ms = t["total_ms"] / max(t["steps_timed"], 1)
own = t["gflops"] * 1e9 / tok if tok else 0
print(f"tokens/s={tok:.0f}, step_ms={ms:.2f}, mfu={tok * fpt / (peak * 1e12):.4f} "
      f"({t['steps_timed']} timed steps, final loss {j['losses'][-1]:.4f}, "
      f"flops/token {fpt / 1e6:.0f}M (dsrt's own count {own / 1e6:.0f}M))")
EOF
}

if want bench; then
  mkdir -p "$WORK/bench" "$LOGS/bench"
  if ((QUICK)); then BSTEPS=10 BWARM=3; else BSTEPS=20 BWARM=5; fi
  # PyTorch, outside the bundle's LD_LIBRARY_PATH (torch brings its own libraries).
  rc=0
  bounded 480 "$LOGS/bench/torch_gpt2.txt" "$PY" "$ROOT/bench/gpu/torch_gpt2.py" --steps "$BSTEPS" \
    --warmup "$BWARM" --batch $G_B --seq_len $G_T --n_layer $G_L --n_head $G_H --n_embd $G_C \
    --vocab $G_V --peak_tflops "$PEAK_TFLOPS" --json "$LOGS/bench/torch_gpt2.json" || rc=$?
  for mode in eager compile; do
    line=$(grep "^torch $mode: " "$LOGS/bench/torch_gpt2.txt" | tail -1 || true)
    if [[ $line == *tokens/s=* ]]; then
      result bench "torch $mode gpt2-124M bf16" OK "${line#torch "$mode": }"
    elif [[ $line == *SKIPPED* ]]; then
      result bench "torch $mode gpt2-124M bf16" SKIPPED "${line#torch "$mode": }"
    else
      result bench "torch $mode gpt2-124M bf16" FAIL "${line:-no result (rc=$rc)}" "$LOGS/bench/torch_gpt2.txt"
    fi
  done
  rc=0
  bounded 120 "$LOGS/bench/torch_gpt2_vp.txt" "$PY" "$ROOT/bench/gpu/torch_gpt2.py" --steps "$BSTEPS" \
    --warmup "$BWARM" --batch $G_B --seq_len $G_T --n_layer $G_L --n_head $G_H --n_embd $G_C \
    --vocab $G_VP --modes eager --peak_tflops "$PEAK_TFLOPS" || rc=$?
  line=$(grep "^torch eager: " "$LOGS/bench/torch_gpt2_vp.txt" | tail -1 || true)
  if [[ $line == *tokens/s=* ]]; then
    result bench "torch eager vocab $G_VP" OK "${line#torch eager: }"
  else
    result bench "torch eager vocab $G_VP" FAIL "${line:-no result (rc=$rc)}" "$LOGS/bench/torch_gpt2_vp.txt"
  fi

  # dsrt on the same model, stage 0, one process.
  s0_ms=""
  sum=$WORK/bench/dsrt_gpt2.json
  sets=(--set "model.gpt.n_layer=$G_L" --set "model.gpt.n_head=$G_H" --set "model.gpt.n_embd=$G_C"
    --set "model.gpt.seq_len=$G_T" --set "model.gpt.vocab_size=$G_V"
    --set "model.gpt.padded_vocab_size=$G_VP"
    --set "deepspeed.train_batch_size=$G_B" --set "deepspeed.train_micro_batch_size_per_gpu=$G_B"
    --set deepspeed.gradient_accumulation_steps=1 --set deepspeed.bf16.enabled=true
    --set deepspeed.zero_optimization.stage=0 --set "train.steps=$((BSTEPS + 1))"
    --set train.eval_every=0 --set train.log_every=5 --set data.synthetic.val_tokens=0
    --set train.device=cuda)
  rc=0
  (cd "$WORK/bench" && bounded 480 "$LOGS/bench/dsrt_gpt2.txt" "${RUN[@]}" "$DSRT" train "${sets[@]}" \
    --summary "$sum") || rc=$?
  if ((rc == 0)) && [[ -f $sum ]] && line=$(mfu_of "$sum" 2>>"$LOGS/bench/dsrt_gpt2.txt"); then
    cp "$sum" "$LOGS/bench/"
    ours=$(sed 's/^tokens\/s=\([0-9]*\).*/\1/' <<<"$line")
    ref=$(grep '^torch compile: tokens/s=' "$LOGS/bench/torch_gpt2.txt" | sed 's/^torch compile: tokens\/s=\([0-9]*\).*/\1/' || true)
    [[ -z $ref ]] && ref=$(grep '^torch eager: tokens/s=' "$LOGS/bench/torch_gpt2.txt" | sed 's/^torch eager: tokens\/s=\([0-9]*\).*/\1/' || true)
    vs=""
    [[ -n $ref && $ref -gt 0 ]] && vs="; $(awk -v a="$ours" -v b="$ref" 'BEGIN{printf "%.2f", a/b}')x torch"
    result bench "dsrt gpt2-124M bf16 s0" OK "$line$vs"
    s0_ms=$(sed -n 's/.*step_ms=\([0-9.]*\).*/\1/p' <<<"$line" | head -1)
  else
    result bench "dsrt gpt2-124M bf16 s0" FAIL "rc=$rc" "$LOGS/bench/dsrt_gpt2.txt"
  fi
  # fp16 on the same model: native (fp16 weights and activations, fp16 cuBLASLt products with
  # fp32 accumulation, SIMT attention; docs/gpu.md "Precision"); the ratio to bf16 says the cost.
  sum16=$WORK/bench/dsrt_gpt2_fp16.json
  sets16=("${sets[@]/deepspeed.bf16.enabled=true/deepspeed.fp16.enabled=true}")
  rc=0
  (cd "$WORK/bench" && bounded 300 "$LOGS/bench/dsrt_gpt2_fp16.txt" "${RUN[@]}" "$DSRT" train \
    "${sets16[@]}" --summary "$sum16") || rc=$?
  if ((rc == 0)) && [[ -f $sum16 ]] && line=$(mfu_of "$sum16" 2>>"$LOGS/bench/dsrt_gpt2_fp16.txt"); then
    cp "$sum16" "$LOGS/bench/"
    ms16=$(sed -n 's/.*step_ms=\([0-9.]*\).*/\1/p' <<<"$line" | head -1)
    vs=""
    [[ -n $s0_ms && -n $ms16 ]] && vs="; step time $(awk -v a="$ms16" -v b="$s0_ms" 'BEGIN{printf "%.2f", a/b}')x bf16 s0"
    result bench "dsrt gpt2-124M fp16 s0" OK "$line$vs"
  else
    result bench "dsrt gpt2-124M fp16 s0" FAIL "rc=$rc" "$LOGS/bench/dsrt_gpt2_fp16.txt"
  fi
  # ZeRO-Offload on the same model: the host engine + device mirror (runtime/engine/device_mirror.h)
  # at stage 2 + offload_optimizer cpu and stage 3 + offload_optimizer/offload_param cpu, with the
  # phase split (fwd / bwd / comm = the engine's hooks and reductions / optim = CPU Adam) and the
  # device bytes by kind, against the stage-0 step above.
  declare -A OFFLOAD=(
    [s2+oo]="deepspeed.zero_optimization.stage=2 deepspeed.zero_optimization.offload_optimizer.device=cpu"
    [s3+oo+op]="deepspeed.zero_optimization.stage=3 deepspeed.zero_optimization.offload_optimizer.device=cpu deepspeed.zero_optimization.offload_param.device=cpu"
  )
  for cfg in s2+oo s3+oo+op; do
    osum=$WORK/bench/dsrt_gpt2_${cfg//+/_}.json
    osets=("${sets[@]}" --set "train.steps=$((BWARM + 3))")
    for kv in ${OFFLOAD[$cfg]}; do osets+=(--set "$kv"); done
    rc=0
    (cd "$WORK/bench" && bounded 300 "$LOGS/bench/dsrt_gpt2_${cfg//+/_}.txt" "${RUN[@]}" "$DSRT" train \
      "${osets[@]}" --summary "$osum") || rc=$?
    if ((rc == 0)) && [[ -f $osum ]] && oline=$("$PY" - "$osum" "${s0_ms:-0}" <<'EOF2' 2>>"$LOGS/bench/dsrt_gpt2_${cfg//+/_}.txt"
import json, sys
j = json.load(open(sys.argv[1])); s0 = float(sys.argv[2])
t = j["timing"]; n = max(t["steps_timed"], 1); m = j["memory"]
ms = t["total_ms"] / n
mib = lambda k, p: m[k][p] / 1048576
vs = f", {ms / s0:.1f}x stage 0's {s0:.1f} ms" if s0 > 0 else ""
print(f"step_ms={ms:.1f} (fwd {t['fwd_ms'] / n:.1f}, bwd {t['bwd_ms'] / n:.1f}, "
      f"comm {t['comm_ms'] / n:.1f}, optim {t['optim_ms'] / n:.1f}; {n} timed steps){vs}; "
      f"device MiB: params {mib('params', 'device'):.0f}, grads {mib('grads', 'device'):.0f}, "
      f"optimizer {mib('optimizer_states', 'device'):.0f}; host optimizer "
      f"{mib('optimizer_states', 'host'):.0f} MiB")
EOF2
    ); then
      cp "$osum" "$LOGS/bench/"
      result bench "dsrt gpt2-124M bf16 $cfg" OK "$oline"
    else
      result bench "dsrt gpt2-124M bf16 $cfg" FAIL "rc=$rc" "$LOGS/bench/dsrt_gpt2_${cfg//+/_}.txt"
    fi
  done
  # The offload hooks alone on this GPU (no model compute): the floor under the rows above.
  hb=$BIN_DIR/bench_offload_hooks
  [[ -x $hb ]] || hb=$BIN_DIR/bench/bench_offload_hooks
  if [[ -x $hb ]]; then
    for st in 2 3; do
      rc=0
      bounded 180 "$LOGS/bench/offload_hooks_s$st.txt" "${RUN[@]}" "$hb" --device cuda --stage $st \
        --steps 4 || rc=$?
      hl=$(awk '$1 == "4" {print "fwd_hooks " $2 " ms (engine " $3 "), bwd_hooks " $4 " ms (engine " $5 "), step " $6 " ms " $8 " " $9}' \
        "$LOGS/bench/offload_hooks_s$st.txt" || true)
      if ((rc == 0)) && [[ -n $hl ]]; then
        result bench "bench_offload_hooks stage $st cuda" OK "$hl"
      else
        result bench "bench_offload_hooks stage $st cuda" FAIL "rc=$rc" "$LOGS/bench/offload_hooks_s$st.txt"
      fi
    done
  fi
  # Per-op split of the dsrt step (bench/gpu_ops.cc), when the bundle or build has it.
  if [[ -x $BIN_DIR/bench_gpu_ops || -x $BIN_DIR/bench/bench_gpu_ops ]]; then
    ob=$BIN_DIR/bench_gpu_ops
    [[ -x $ob ]] || ob=$BIN_DIR/bench/bench_gpu_ops
    rc=0
    bounded 120 "$LOGS/bench/gpu_ops.txt" "${RUN[@]}" "$ob" --B $G_B --T $G_T --C $G_C --NH $G_H \
      --V $G_V --Vp $G_VP --L $G_L || rc=$?
    line=$(grep '^step estimate' "$LOGS/bench/gpu_ops.txt" | sed 's/  */ /g' || true)
    if ((rc == 0)) && [[ -n $line ]]; then
      result bench "bench_gpu_ops per-op split" OK "${line#step estimate }"
      sed 's/^/          | /' "$LOGS/bench/gpu_ops.txt" | tee -a "$REPORT" >/dev/null
    else
      result bench "bench_gpu_ops per-op split" FAIL "rc=$rc" "$LOGS/bench/gpu_ops.txt"
    fi
  fi
fi

# ---- (f) world 2 over nccl: ZeRO on device buffers against the cpu gloo run of the same plan -------
# Two ranks started with the rank environment set here as a launcher would (dsrun cannot place two
# ranks on a machine with one GPU). Two or more GPUs: two local ranks, one GPU each. One GPU: two
# simulated hosts on it: each rank names its own host to NCCL (NCCL_HOSTID), so NCCL accepts both
# on the one device and carries their traffic over its socket transport on loopback; the device
# buffers, the communication stream, the overlap and the kernels are the real ones (see
# tests/comm/nccl/nccl_child.h). The cpu reference runs the same world of 2 over gloo.
if want multi; then
  mkdir -p "$WORK/multi" "$LOGS/multi"
  Z=deepspeed.zero_optimization
  declare -A MCFG=(
    [s0]="$Z.stage=0"
    [s1]="$Z.stage=1"
    [s2]="$Z.stage=2"
    [s2+oo]="$Z.stage=2 $Z.offload_optimizer.device=cpu"
    [s3]="$Z.stage=3"
    [s3+oo+op]="$Z.stage=3 $Z.offload_optimizer.device=cpu $Z.offload_param.device=cpu"
    [s3+ckpt]="$Z.stage=3 deepspeed.activation_checkpointing.enabled=true"
  )
  MPAIRS=("fp32 s0" "fp32 s1" "fp32 s2" "fp32 s2+oo" "fp32 s3" "fp32 s3+oo+op" "fp32 s3+ckpt"
    "bf16 s0" "bf16 s2" "bf16 s3")
  ((QUICK)) && MPAIRS=("fp32 s0" "fp32 s2" "fp32 s3" "bf16 s0" "bf16 s3")
  MSIM=1
  MPLACE="two simulated hosts on GPU 0 (NCCL_HOSTID per rank; NCCL socket transport on loopback)"
  if ((NGPU >= 2)); then MSIM=0 MPLACE="two local ranks, one GPU each"; fi

  # ranks2 LOG_PREFIX ARGS...: ARGS as ranks 0 and 1 of one job (MSIM decides the placement);
  # logs LOG_PREFIX.rank{0,1}.txt. The first rank to fail takes the other down; returns its status.
  ranks2() {
    local prefix=$1 secs port token r rc=0 st pids=() place=()
    shift
    if ! secs=$(budget_secs 150); then
      echo "gpu_check.sh: not run, the --budget of $BUDGET s is spent: $*" >"$prefix.rank0.txt"
      return 124
    fi
    port=$((31000 + RANDOM % 2000))
    token=gpu-check-$RANDOM$RANDOM
    for r in 0 1; do
      if ((MSIM)); then
        place=(LOCAL_RANK=0 LOCAL_SIZE=1 LOCAL_WORLD_SIZE=1 CROSS_RANK=$r CROSS_SIZE=2
          NCCL_HOSTID=gpu-check-simhost-$r NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo)
      else
        place=(LOCAL_RANK=$r LOCAL_SIZE=2 LOCAL_WORLD_SIZE=2 CROSS_RANK=0 CROSS_SIZE=1)
      fi
      env RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port DS_JOB_ID=gpu-check-$port \
        DS_JOB_TOKEN=$token DS_TIMEOUT=60 "${place[@]}" \
        timeout -k 10 "$secs" "${RUN[@]}" "$@" >"$prefix.rank$r.txt" 2>&1 </dev/null &
      pids+=($!)
    done
    for r in 0 1; do
      st=0
      wait -n || st=$?
      if ((st != 0)); then
        ((rc)) || rc=$st
        kill "${pids[@]}" 2>/dev/null || true
      fi
    done
    ((rc == 124 || rc == 137)) && echo "gpu_check.sh: timed out after $secs s: $*" >>"$prefix.rank0.txt"
    return $rc
  }

  # mrun DEV DTYPE CFG: one world-2 dsrt train; rank 0's summary and "rc seconds" in $WORK/multi.
  mrun() {
    local dev=$1 dtype=$2 cfg=$3 kv backend=gloo
    local tag=${dev}_${dtype}_${cfg//+/_}
    local sets=(--set "train.steps=$STEPS" --set train.eval_every=0 --set train.log_every=5
      --set "train.device=$dev")
    for kv in ${MCFG[$cfg]}; do sets+=(--set "$kv"); done
    [[ $dtype == bf16 ]] && sets+=(--set deepspeed.bf16.enabled=true)
    if [[ $dev == cuda ]]; then
      backend=nccl
      [[ $dtype == fp32 ]] && ((HAVE_TF32)) && sets+=(--set train.tf32=false)
    fi
    mkdir -p "$WORK/multi/$tag"
    local t0 rc=0
    t0=$(now_ms)
    (cd "$WORK/multi/$tag" && ranks2 "$LOGS/multi/$tag" "$DSRT" train --comm_backend "$backend" \
      "${sets[@]}" --summary "$WORK/multi/$tag.json") || rc=$?
    echo "$rc $(secs_since "$t0")" >"$WORK/multi/$tag.rc"
  }
  mstatus() { cat "$WORK/multi/$1.rc" 2>/dev/null || echo "99 0"; }

  if ((!HAVE_DEVICE)); then
    result multi "world 2 over nccl" FAIL "train.device key absent: the runs cannot pick the GPU"
  else
    note "        (world 2: $MPLACE; cpu references: the same world of 2 over gloo)"
    jobs_max=$(($(nproc) / 4))
    ((jobs_max >= 1)) || jobs_max=1
    for pair in "${MPAIRS[@]}"; do
      read -r dtype cfg <<<"$pair"
      while (($(jobs -rp | wc -l) >= jobs_max)); do wait -n || true; done
      OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 mrun cpu "$dtype" "$cfg" &
    done
    wait || true
    for pair in "${MPAIRS[@]}"; do
      read -r dtype cfg <<<"$pair"
      mrun cuda "$dtype" "$cfg"
    done
    for pair in "${MPAIRS[@]}"; do
      read -r dtype cfg <<<"$pair"
      tag=${dtype}_${cfg//+/_}
      name="nccl w2 $dtype $cfg (${STEPS} steps)"
      read -r crc csec < <(mstatus "cpu_$tag")
      read -r grc gsec < <(mstatus "cuda_$tag")
      if ((crc != 0)); then
        result multi "$name" FAIL "cpu gloo run rc=$crc" "$LOGS/multi/cpu_$tag.rank0.txt"; continue
      fi
      if ((grc != 0)); then
        result multi "$name" FAIL "cuda nccl run rc=$grc (cpu ok, $csec s)" "$LOGS/multi/cuda_$tag.rank0.txt"
        if [[ -s $LOGS/multi/cuda_$tag.rank1.txt ]]; then
          grep -v '^\s*$' "$LOGS/multi/cuda_$tag.rank1.txt" | tail -3 | cut -c1-200 |
            sed 's/^/          | rank 1: /' | tee -a "$REPORT" || true
        fi
        continue
      fi
      if ! loss_tolerance "$dtype" "$WORK/multi" "$cfg"; then
        result multi "$name" FAIL "no cpu fp32 run to size the bf16 band"; continue
      fi
      rc=0
      line=$(compare_line "$WORK/multi/cpu_$tag.json" "$WORK/multi/cuda_$tag.json" \
        "$LOGS/multi/compare_$tag.txt") || rc=$?
      # The cuda run must really be nccl: rank 0's startup log names the backend.
      if ! grep -q "comm backend 'nccl'" "$LOGS/multi/cuda_$tag.rank0.txt"; then
        result multi "$name" FAIL "$line (the log names no comm backend 'nccl'); cuda $gsec s, cpu $csec s"
      elif ((rc == 0)); then
        result multi "$name" OK "$line; cuda $gsec s, cpu $csec s"
      else
        result multi "$name" FAIL "$line; cuda $gsec s, cpu $csec s"
      fi
      cp "$WORK/multi/cpu_$tag.json" "$WORK/multi/cuda_$tag.json" "$LOGS/multi/" 2>/dev/null || true
    done
    # NCCL bus bandwidth at world 2 on device buffers (simulated hosts: socket transport on loopback).
    log=$LOGS/multi/comm_bench
    rc=0
    sizes=1M,16M,64M
    ranks2 "$log" "$DSRT" comm-bench --comm_backend nccl --sizes "$sizes" || rc=$?
    rows=$(awk '$1 ~ /^(allreduce|reduce_scatter|allgather|broadcast)$/' "$log.rank0.txt" || true)
    if [[ -z $rows ]]; then
      result multi "nccl comm-bench world 2" FAIL "rc=$rc, no table" "$log.rank0.txt"
    else
      while read -r op bytes _count _iters us algbw busbw check; do
        st=OK
        [[ $check == ok || $check == - ]] || st=FAIL
        ((rc == 0)) || st=FAIL
        result multi "nccl $op $((bytes / 1048576)) MiB world 2" "$st" \
          "busbw=$busbw GB/s, algbw=$algbw GB/s, $us us, check $check"
      done < <(awk '$1 ~ /^(allreduce|reduce_scatter|allgather|broadcast)$/ {if ($2 > max[$1]) {max[$1]=$2; row[$1]=$0}} END {for (o in row) print row[o]}' "$log.rank0.txt" | sort)
    fi
  fi
fi

if want comm; then
  log=$LOGS/comm_bench_nccl.txt
  rc=0
  sizes=1M,16M,256M
  ((QUICK)) && sizes=1M,64M
  MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29700 + RANDOM % 1000)) WORLD_SIZE=1 RANK=0 LOCAL_RANK=0 \
    bounded 180 "$log" "${RUN[@]}" "$DSRT" comm-bench --comm_backend nccl --sizes "$sizes" || rc=$?
  rows=$(awk '$1 ~ /^(allreduce|reduce_scatter|allgather|broadcast)$/' "$log" || true)
  if [[ -z $rows ]]; then
    result comm "nccl comm-bench world 1" FAIL "rc=$rc, no table" "$log"
  else
    while read -r op bytes _count _iters us _algbw busbw check; do
      st=OK
      [[ $check == ok || $check == - ]] || st=FAIL
      ((rc == 0)) || st=FAIL
      result comm "nccl $op $((bytes / 1048576)) MiB world 1" "$st" \
        "busbw=$busbw GB/s (= algbw at world 1), $us us, check $check"
    done < <(awk '$1 ~ /^(allreduce|reduce_scatter|allgather|broadcast)$/ {if ($2 > max[$1]) {max[$1]=$2; row[$1]=$0}} END {for (o in row) print row[o]}' "$log" | sort)
  fi
fi

note ""
note "summary: $NOK OK, $NFAIL FAIL, $NSKIP SKIPPED in $(($(date +%s) - T_START)) s" \
  "(logs: gpu_check_logs.tar.gz next to this report)"
((NFAIL == 0))
