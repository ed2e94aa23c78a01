#!/usr/bin/env bash
# Packs a build into a self-contained folder that runs on a GPU machine which has the NVIDIA driver
# and CUDA runtime/cuBLAS/NCCL (system or pip wheels) but none of our Debian libraries: dsrt,
# dsrun and every test binary with [gpu] cases, debug info stripped, plus the non-CUDA shared
# libraries they load (ldd), plus a `run` wrapper that sets LD_LIBRARY_PATH and execs its
# arguments. scripts/gpu_check.sh --bundle DIR uses it; docs/gpu_check.md shows the whole flow.
#
# Usage: scripts/gpu_bundle.sh [BUILD_DIR] [DEST]     (defaults: build, .gpu_bundle)
#
# DEST after a run (DEST is emptied first; it must be the bundle or a new folder):
#   bin/     dsrt, dsrun, test_* (copies stripped of debug info and symbols)
#   lib.tar.gz  lib/: the carried libraries (fmt, yaml-cpp, gloo, libssh, OpenBLAS (35 MiB
#            alone, hence gzip), MPI, gomp, ...) and lib/compat/: libstdc++.so.6 and
#            libgcc_s.so.1, used only when the machine's own are older. `run` unpacks it into
#            DEST/lib on first use (into $TMPDIR when DEST is read-only).
#   run      `DEST/run PROG ARGS...`; `DEST/run --ldd` lists what the loader cannot resolve
#   GPU_TESTS   the [gpu] test binaries, one a line;  COMMIT  the source commit of the build
#   REQUIRES    the newest GLIBC_/GLIBCXX_ symbol versions the bundle needs
# Never carried: glibc (libc, libm, libpthread, libdl, librt, ld-linux, ...: they must be the
# machine's), and the CUDA libraries (libcuda, libcudart, libcublas*, libnccl*, libnvidia*, ...):
# the run wrapper finds those on the machine. Fails when the bundle exceeds 60 MiB (a carried
# folder travels in 64 MiB; our binaries hold sm_80 and sm_90 code, so they are the bulk;
# GPU_BUNDLE_LIMIT_MIB raises the limit for a bundle carried compressed, e.g. tar | xz).
# Not a package (scripts/build.sh --deb makes the Debian package) and not a builder: it packs
# what BUILD_DIR already holds.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-build}
DEST=${2:-$ROOT/.gpu_bundle}
LIMIT_MIB=${GPU_BUNDLE_LIMIT_MIB:-60}  # raise it when the bundle travels compressed (tar | xz)

die() { echo "gpu_bundle.sh: $*" >&2; exit 1; }

[[ -d "$BUILD" ]] || die "no build folder '$BUILD' (usage: scripts/gpu_bundle.sh [BUILD_DIR] [DEST])"
BUILD=$(cd "$BUILD" && pwd)
for tool in ldd strip objdump; do
  command -v "$tool" >/dev/null || die "'$tool' not found (Debian: apt-get install binutils libc-bin)"
done

# The source the build came from (its tests/ decide which binaries have [gpu] cases).
SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)
[[ -n $SRC && -d $SRC/tests ]] || SRC=$ROOT

# The [gpu] test binaries: every tests/<dir> whose *_test.cc has a [gpu] case is the binary
# test_<dir with / as _> (tests/CMakeLists.txt names every ds_test_dir that way).
gpu_tests() {
  grep -rl --include='*_test.cc' '\[gpu\]' "$SRC/tests" | while IFS= read -r f; do
    local d=${f#"$SRC/tests/"}
    d=${d%/*}
    echo "test_${d//\//_}"
  done | sort -u
}

mapfile -t tests < <(gpu_tests)
bins=("$BUILD/dsrt" "$BUILD/dsrun")
# The per-op GPU benchmark (bench/gpu_ops.cc), when built.
[[ -x "$BUILD/bench/bench_gpu_ops" ]] && bins+=("$BUILD/bench/bench_gpu_ops")
# The offload hooks' own cost (bench/offload_hooks.cc), when built.
[[ -x "$BUILD/bench/bench_offload_hooks" ]] && bins+=("$BUILD/bench/bench_offload_hooks")
for t in "${tests[@]}"; do bins+=("$BUILD/tests/$t"); done
for b in "${bins[@]}"; do
  if [[ ! -x "$b" ]]; then
    case $b in
      */tests/*) die "missing test binary $b ([gpu] cases in tests/, see GPU_TESTS rule above);" \
        "build it (cmake --build $BUILD --target ${b##*/}); test_comm_nccl needs a build" \
        "configured with CUDA and NCCL" ;;
      *) die "missing binary $b; build it (cmake --build $BUILD --target ${b##*/})" ;;
    esac
  fi
done

# Refuse to wipe anything that is not a bundle we made.
if [[ -e "$DEST" ]]; then
  [[ -d "$DEST" ]] || die "DEST '$DEST' exists and is not a folder"
  if [[ -n "$(ls -A "$DEST")" && ! -f "$DEST/GPU_TESTS" ]]; then
    die "DEST '$DEST' is not empty and holds no GPU_TESTS file: not a bundle, not touching it"
  fi
  rm -rf "$DEST"
fi
mkdir -p "$DEST/bin" "$DEST/lib/compat"
DEST=$(cd "$DEST" && pwd)

for b in "${bins[@]}"; do
  cp -L "$b" "$DEST/bin/"
  strip --strip-all "$DEST/bin/${b##*/}"  # symbols too: the bundle only runs them
done
printf '%s\n' "${tests[@]}" >"$DEST/GPU_TESTS"

# Libraries the machine supplies: glibc's own parts and the NVIDIA/CUDA stack.
skip_lib() {
  case $1 in
    linux-vdso.so* | ld-linux* | libc.so* | libm.so* | libmvec.so* | libpthread.so* | libdl.so* | \
      librt.so* | libutil.so* | libresolv.so* | libnsl.so* | libanl.so* | libBrokenLocale.so* | \
      libnss_* | libthread_db.so* | libc_malloc_debug.so*) return 0 ;;
    libcuda.so* | libcudart.so* | libcublas*.so* | libnccl*.so* | libnvidia* | libnvrtc*.so* | \
      libnvJitLink*.so* | libcufft*.so* | libcurand*.so* | libcusparse*.so* | libcusolver*.so* | \
      libnvToolsExt*.so* | libcupti*.so*) return 0 ;;
  esac
  return 1
}

declare -A carried=()
for b in "${bins[@]}"; do
  out=$(ldd "$b" 2>&1) || die "ldd $b failed: $out"
  while IFS= read -r line; do
    # "libfoo.so.1 => /path/libfoo.so.1 (0x...)", "libfoo.so.1 => not found", "/lib64/ld-... (0x...)"
    [[ $line == *"=>"* ]] || continue
    name=$(awk '{print $1}' <<<"$line")
    path=$(awk '{print $3}' <<<"$line")
    skip_lib "$name" && continue
    [[ $path == not ]] && die "${b##*/} needs $name, which the loader here cannot find (ldd $b)"
    [[ -n ${carried[$name]:-} ]] && continue
    carried[$name]=$path
    case $name in
      libstdc++.so* | libgcc_s.so*) to=$DEST/lib/compat/$name ;;
      *) to=$DEST/lib/$name ;;
    esac
    cp -L "$path" "$to"
    chmod u+w "$to"
    strip --strip-debug "$to" 2>/dev/null || true
  done <<<"$out"
done

# The newest symbol versions the bundle needs: the machine's glibc must have GLIBC_x (lib/compat
# left out: it is loaded only where the machine's libstdc++ is older, and then so is its glibc
# anyway); the run wrapper picks lib/compat unless the machine's libstdc++ has GLIBCXX_y.
newest() {  # newest VERSION_PREFIX FILE...
  local p=$1
  shift
  objdump -T "$@" 2>/dev/null | grep -oE "\b${p}_[0-9]+(\.[0-9]+)+\b" | sort -uV | tail -1
}
mapfile -t own < <(find "$DEST/bin" "$DEST/lib" -path "$DEST/lib/compat" -prune -o -type f -print | sort)
glibc=$(newest GLIBC "${own[@]}")
{
  echo "GLIBC $glibc"
  echo "GLIBCXX $(newest GLIBCXX "${own[@]}")"
} >"$DEST/REQUIRES"
# Name what pins glibc above Ubuntu 22.04's 2.35 (Debian 12 has 2.36): the usual one is Open MPI's
# libevent (arc4random, GLIBC_2.36); a build configured with -DDS_WITH_MPI=OFF does not load it.
if [[ $(printf '%s\n' GLIBC_2.35 "$glibc" | sort -V | tail -1) != GLIBC_2.35 ]]; then
  pinned=()
  for f in "${own[@]}"; do
    [[ $(newest GLIBC "$f") == "$glibc" ]] && pinned+=("${f#"$DEST/"}")
  done
  echo "gpu_bundle.sh: warning: ${pinned[*]} need $glibc: the bundle will not load on a machine" \
    "with an older glibc (Ubuntu 22.04 has 2.35; check there with: run --ldd). Open MPI's" \
    "libevent is the usual one: configure the build with -DDS_WITH_MPI=OFF to leave it out." >&2
fi

# The commit the build came from: its CMake source folder's HEAD, "-dirty" with local changes.
src=$SRC
if commit=$(git -C "$src" rev-parse HEAD 2>/dev/null); then
  [[ -z "$(git -C "$src" status --porcelain --untracked-files=no 2>/dev/null)" ]] ||
    commit="$commit-dirty"
  echo "$commit $(git -C "$src" log -1 --format=%s 2>/dev/null) (source $src, built $(date -u +%Y-%m-%dT%H:%MZ))" >"$DEST/COMMIT"
else
  echo "unknown (source $src is not a git checkout, built $(date -u +%Y-%m-%dT%H:%MZ))" >"$DEST/COMMIT"
fi

cat >"$DEST/run" <<'EOF'
#!/usr/bin/env bash
# Bundle wrapper (written by scripts/gpu_bundle.sh): runs PROG with the bundle's bin/ first on
# PATH and LD_LIBRARY_PATH = the bundle's lib/ (+ lib/compat when the machine's libstdc++ lacks
# the GLIBCXX version REQUIRES names) + every CUDA library folder found on this machine:
# site-packages/nvidia/*/lib of the python3 on PATH, of /opt/torch/.venv and of $VIRTUAL_ENV,
# then /usr/local/cuda/lib64. Usage: run PROG [ARGS...] | run --ldd (what stays unresolved)
#  | run --env (print the LD_LIBRARY_PATH it uses).
set -euo pipefail
B=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# lib/ comes packed (lib.tar.gz); unpack it once, atomically (parallel first runs may race).
L=$B/lib
if [[ ! -d $L ]]; then
  [[ -w $B ]] || L=${TMPDIR:-/tmp}/gpu_bundle_lib.$(cksum <"$B/lib.tar.gz" | cut -d' ' -f1)
  if [[ ! -d $L ]]; then
    t=$(mktemp -d "$L.XXXXXX")
    tar -xzf "$B/lib.tar.gz" -C "$t" || { echo "run: cannot unpack $B/lib.tar.gz" >&2; exit 127; }
    mv -T "$t/lib" "$L" 2>/dev/null || true  # another run got there first: use its copy
    rm -rf "$t"
  fi
fi

need() { sed -n "s/^$1 //p" "$B/REQUIRES" 2>/dev/null; }
dirs=("$L")
want=$(need GLIBCXX)
have_cxx=""
for f in /usr/lib/x86_64-linux-gnu/libstdc++.so.6 /usr/lib64/libstdc++.so.6 /lib/x86_64-linux-gnu/libstdc++.so.6; do
  if [[ -e $f ]]; then have_cxx=$f; break; fi
done
if [[ -z $want || -z $have_cxx ]] || ! grep -qawF "$want" "$have_cxx"; then
  dirs+=("$L/compat")
fi
shopt -s nullglob
sites=()
if command -v python3 >/dev/null; then
  # The venv's site-packages without importing anything heavy (and without our LD_LIBRARY_PATH).
  if s=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null); then
    sites+=("$s")
  fi
fi
sites+=(/opt/torch/.venv/lib/python3*/site-packages)
[[ -n ${VIRTUAL_ENV:-} ]] && sites+=("$VIRTUAL_ENV"/lib/python3*/site-packages)
declare -A seen=()
for s in "${sites[@]}"; do
  for d in "$s"/nvidia/*/lib "$s"/nvidia/*/lib64; do
    d=$(cd "$d" && pwd -P)
    [[ -n ${seen[$d]:-} ]] && continue
    seen[$d]=1
    dirs+=("$d")
  done
done
[[ -d /usr/local/cuda/lib64 ]] && dirs+=(/usr/local/cuda/lib64)
ldp=$(IFS=:; echo "${dirs[*]}")
export LD_LIBRARY_PATH="$ldp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$B/bin:$PATH"

case ${1:-} in
  "") echo "usage: $0 PROG [ARGS...] | --ldd | --env" >&2; exit 2 ;;
  --env) echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; exit 0 ;;
  --ldd)
    rc=0
    glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
    want=$(need GLIBC); want=${want#GLIBC_}
    if [[ -n $glibc && -n $want && $(printf '%s\n%s\n' "$want" "$glibc" | sort -V | head -1) != "$want" ]]; then
      echo "glibc $glibc here, the bundle needs $want (built on a newer system)"; rc=1
    fi
    for f in "$B"/bin/*; do
      miss=$(ldd "$f" 2>&1 | grep -E 'not found|version .* not found' || true)
      if [[ -n $miss ]]; then echo "${f##*/}:"; echo "$miss"; rc=1; fi
    done
    # dlopen'ed on first use, so not in ldd's list (runtime/tensor/cuda/cublaslt_loader.cc).
    lt=""
    IFS=: read -r -a ldirs <<<"$LD_LIBRARY_PATH"
    for d in "${ldirs[@]}"; do
      for f in "$d"/libcublasLt.so.[0-9]*; do lt=$f; break 2; done
    done
    if [[ -z $lt ]] && ! ldconfig -p 2>/dev/null | grep -q 'libcublasLt\.so\.'; then
      echo "libcublasLt.so.* (loaded on first CUDA matmul): not found"; rc=1
    fi
    [[ $rc == 0 ]] && echo "all libraries resolved (LD_LIBRARY_PATH=$LD_LIBRARY_PATH)"
    exit $rc ;;
esac
exec "$@"
EOF
chmod +x "$DEST/run"

echo "gpu_bundle.sh: $DEST from $BUILD: ${#bins[@]} binaries (${tests[*]}), ${#carried[@]} libraries;" \
  "the largest files:"
(cd "$DEST" && find bin lib -type f -exec du -h {} + | sort -h | tail -6 | sed 's/^/  /')
lib_kib=$(du -sk "$DEST/lib" | awk '{print $1}')
tar -C "$DEST" -czf "$DEST/lib.tar.gz" lib
rm -rf "${DEST:?}/lib"
size_kib=$(du -sk "$DEST" | awk '{print $1}')
mib() { echo "$(($1 / 1024)).$((($1 % 1024) * 10 / 1024))"; }
echo "gpu_bundle.sh: total $(mib "$size_kib") MiB (limit $LIMIT_MIB MiB; lib/ $(mib "$lib_kib") MiB" \
  "packed into lib.tar.gz); needs $(tr '\n' ' ' <"$DEST/REQUIRES")"
if ((size_kib > LIMIT_MIB * 1024)); then
  die "the bundle is $((size_kib / 1024)) MiB, over the $LIMIT_MIB MiB limit (carried folders travel" \
    "in 64 MiB); strip harder (strip -s) or leave a test binary out"
fi
