#!/usr/bin/env bash
# CPack builds the Debian package from a built tree; it is checked (name, version, Depends, files)
# and installed with dpkg -i into a throwaway Debian root: an overlay whose lower layer is this
# machine's / (so the package's Depends are met by what is installed here, and nothing is
# downloaded), inside a private mount namespace, so the root and everything written to it vanish
# with the namespace. There `dsrun --version` and `dsrt --version` must run. Exit 77 (SKIPPED)
# where that cannot be done: not root, no unshare, or no overlayfs.
#   deb_test.sh BUILD_DIR VERSION
set -euo pipefail
build=$1 version=$2
fail() { echo "deb_test: FAIL: $*" >&2; exit 1; }
skip() { echo "deb_test: SKIPPED: $*"; exit 77; }
tmp=$(mktemp -d /tmp/ds-deb-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

start=$SECONDS
cpack --config "$build/CPackConfig.cmake" -G DEB -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log"; fail "cpack -G DEB failed"; }
grep -i 'warning' -A3 "$tmp/cpack.log" || true
debs=("$tmp"/pkg/*.deb)
if [ ${#debs[@]} -ne 1 ] || [ ! -f "${debs[0]}" ]; then
  fail "expected one .deb in $tmp/pkg: ${debs[*]}"
fi
deb=${debs[0]}
arch=$(dpkg --print-architecture)
[ "$(basename "$deb")" = "dsrun_${version}_${arch}.deb" ] ||
  fail "unexpected package name $(basename "$deb")"
echo "deb_test: built $(basename "$deb") ($(du -h "$deb" | cut -f1)) in $((SECONDS - start)) s"
[ "$(dpkg-deb -f "$deb" Package)" = dsrun ] || fail "Package is not dsrun"
[ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "Version is not $version"
depends=$(dpkg-deb -f "$deb" Depends)
echo "deb_test: Depends: $depends"
for dep in libc6 libstdc++6 libfmt9 libssh-4; do
  [[ ",$depends" == *", $dep "* || ",$depends" == *",$dep "* || ",$depends" == *", $dep,"* ||
     ",$depends" == *",$dep,"* ]] || fail "Depends lacks $dep (dpkg-shlibdeps on dsrun and dsrt)"
done
contents=$(dpkg-deb -c "$deb")
for f in ./usr/bin/dsrun ./usr/bin/dsrt ./usr/include/dsrun/core/dtype.h \
         ./usr/lib/cmake/dsrun/dsrunConfig.cmake ./usr/share/man/man1/dsrun.1 \
         ./usr/share/doc/dsrun/README.md; do
  grep -q " $f\$" <<<"$contents" || fail "$f is not in the package"
done

[ "$(id -u)" -eq 0 ] || skip "installing into a throwaway root needs root (mount namespaces)"
command -v unshare >/dev/null || skip "no unshare (util-linux)"
cat >"$tmp/in_namespace.sh" <<'INNER'
set -euo pipefail
tmp=$1 deb=$2 version=$3
mount -t tmpfs tmpfs "$tmp/layers"  # upper and work off the root filesystem (no overlap with /)
mkdir "$tmp/layers/upper" "$tmp/layers/work"
mount -t overlay overlay -o "lowerdir=/,upperdir=$tmp/layers/upper,workdir=$tmp/layers/work" \
  "$tmp/root" 2>"$tmp/mount.err" || { cat "$tmp/mount.err"; exit 77; }
root=$tmp/root
mount --rbind /dev "$root/dev"
mount -t proc proc "$root/proc"
cp "$deb" "$root/tmp/dsrun.deb"
echo "deb_test: throwaway root: Debian $(cat "$root/etc/debian_version")"
if chroot "$root" dpkg -s dsrun >/dev/null 2>&1; then
  echo "deb_test: FAIL: dsrun is installed on this machine; the test needs a root without it"
  exit 1
fi
chroot "$root" dpkg -i /tmp/dsrun.deb
chroot "$root" dpkg -s dsrun | grep -q '^Status: install ok installed$'
out=$(chroot "$root" dsrun --version)
echo "deb_test: in the throwaway root: $out; $(chroot "$root" dsrt --version)"
[ "$out" = "dsrun $version" ]
[ "$(chroot "$root" dsrt --version)" = "dsrt $version" ]
chroot "$root" man -w dsrun >/dev/null 2>&1 || [ -f "$root/usr/share/man/man1/dsrun.1" ]
INNER
mkdir "$tmp/layers" "$tmp/root"
set +e
unshare --mount --propagation private bash "$tmp/in_namespace.sh" "$tmp" "$deb" "$version"
rc=$?
set -e
[ $rc -ne 77 ] || skip "cannot mount an overlay root here"
[ $rc -eq 0 ] || fail "installing the package into a throwaway Debian root failed (status $rc)"
[ ! -e /usr/bin/dsrun ] || [ "$(dpkg -S /usr/bin/dsrun 2>/dev/null)" = "" ] ||
  fail "the install leaked into this machine's root"
echo "deb_test: package installs on a throwaway Debian root and runs: ok ($((SECONDS - start)) s)"
