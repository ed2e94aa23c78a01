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
  python3-torch       # the e2e test of a user's torch.distributed program under dsrun and torchrun
  python3-matplotlib  # scripts/plot_run.py (dsrt plot)
  slurmd slurmctld slurm-client munge
  mpich  # hydra for the mpich launcher tests; its mpirun alternative ranks below Open MPI's
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install_deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
