#!/usr/bin/env bash
# `cmake --install` of a built tree into a temporary prefix installs the programs, libraries,
# headers (include/dsrun/, "core/x.h" style), the CMake package, docs and man pages, with no path
# of the build or source tree in them; then a tiny consumer project (tests/build/consumer)
# configures with find_package(dsrun), builds and runs against that prefix.
#   install_test.sh BUILD_DIR SOURCE_DIR VERSION [CXX_FLAGS [EXE_LINKER_FLAGS]]
set -euo pipefail
build=$1 source=$2 version=$3 cxx_flags=${4:-} ld_flags=${5:-}
consumer=$source/tests/build/consumer
fail() { echo "install_test: FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d /tmp/ds-install-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "cmake --install $build --prefix $prefix failed"; }
libdir=$(dirname "$(find "$prefix" -name libds_core.a -print -quit)")
[ "$libdir" != . ] || fail "libds_core.a not installed"
for f in bin/dsrun bin/dsrt include/dsrun/core/dtype.h include/dsrun/comm/store/store.h \
         include/dsrun/zero/zero_engine.h include/dsrun/runtime/engine \
         include/dsrun/ds/config.h share/doc/dsrun/README.md share/man/man1/dsrun.1 \
         share/man/man1/dsrt.1; do
  [ -e "$prefix/$f" ] || fail "$f missing after cmake --install (see cmake/DsInstall.cmake)"
done
for lib in core comm_store comm_base comm_gloo comm zero rt_tensor rt_engine; do
  [ -f "$libdir/libds_$lib.a" ] || fail "libds_$lib.a missing in $libdir"
done
[ -f "$libdir/cmake/dsrun/dsrunConfig.cmake" ] || fail "no dsrunConfig.cmake in $libdir/cmake/dsrun"
for internal in launcher runtime/cmd; do
  [ ! -e "$prefix/include/dsrun/$internal" ] || fail "$internal/ headers are internal, not installed"
done
for tree in "$build" "$source"; do
  if grep -rlF "$(cd "$tree" && pwd -P)" "$prefix/include" "$libdir/cmake"; then
    fail "installed headers or CMake files above name $tree"
  fi
done
grep -qF -- '\-\-hostfile' "$prefix/share/man/man1/dsrun.1" || fail "dsrun.1 lacks --help's options"
if ! grep -qF '.SS "dsrt train"' "$prefix/share/man/man1/dsrt.1" ||
   ! grep -qF -- '--resume' "$prefix/share/man/man1/dsrt.1"; then
  fail "dsrt.1 lacks dsrt's commands and their options"
fi
[ "$("$prefix/bin/dsrun" --version)" = "dsrun $version" ] || fail "installed dsrun --version"
[ "$("$prefix/bin/dsrt" --version)" = "dsrt $version" ] || fail "installed dsrt --version"

cmake -S "$consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS="$cxx_flags" -DCMAKE_EXE_LINKER_FLAGS="$ld_flags" >"$tmp/consumer.log" 2>&1 ||
  { cat "$tmp/consumer.log"; fail "find_package(dsrun) configure of the consumer failed"; }
cmake --build "$tmp/consumer" >>"$tmp/consumer.log" 2>&1 ||
  { cat "$tmp/consumer.log"; fail "the consumer did not build against $prefix"; }
out=$("$tmp/consumer/consumer")
echo "$out"
[[ "$out" =~ ^"consumer: dsrun $version fp32 bf16(1.5)=1.5 store=ok backend="(gloo|nccl)$ ]] ||
  fail "unexpected consumer output: $out"
echo "install_test: installed into a temporary prefix, consumer built and ran: ok"
