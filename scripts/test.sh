#!/usr/bin/env bash
# Installs, builds and runs the test suite: everything but the [slow] label in full, then the
# slow suites in their short form (DS_TEST_SHORT=1). Exit status is ctest's. Where nvcc and
# nccl.h are installed, CUDA and NCCL are required (ON, not AUTO), so a detection regression
# fails the configure instead of silently skipping the nccl compile-check.
set -euo pipefail
cd "$(dirname "$0")/.."
cuda_flags=()
cuda_home=${CUDA_HOME:-/usr/local/cuda}
if { command -v nvcc >/dev/null || [ -x "$cuda_home/bin/nvcc" ]; } &&
   { [ -f "$cuda_home/include/nccl.h" ] || [ -f /usr/include/nccl.h ]; }; then
  cuda_flags=(-DDS_WITH_CUDA=ON -DDS_WITH_NCCL=ON)
  echo "test.sh: nvcc and nccl.h found: configuring with ${cuda_flags[*]}"
fi
bash scripts/setup.sh -DDS_WERROR=ON "${cuda_flags[@]}"
cd "${DS_BUILD_DIR:-build}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --output-on-failure -LE slow --timeout 900
DS_TEST_SHORT=1 ctest --output-on-failure -L slow --timeout 1800
bash "$OLDPWD/scripts/fuzz.sh"  # libFuzzer harnesses, bounded (DS_FUZZ_SECONDS, default 30 s each)
