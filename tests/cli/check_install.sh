#!/usr/bin/env bash
# check_install.sh BUILD_DIR MODEL.onnx CROSS — `cmake --install` and the
# installed kiln (README.md, "Install").
#
# Installs BUILD_DIR into a fresh prefix, checks the layout (kiln and its
# programs in bin, the ABI header, the docs), that `P/bin/kiln --version`
# names kiln, the LLVM it was built with, the NVRTC it finds (or "not
# found") and the kiln-run-aarch64 it would run (the installed one), then
# compiles and runs MODEL with the installed kiln from another folder. With
# CROSS = ON (kiln was built with the aarch64 cross compiler), qemu-aarch64
# and the sysroot present, the same model is cross-compiled for aarch64 and
# run through the installed kiln-run-aarch64, after moving the prefix (kiln
# finds its helpers from its own location); without them the test is
# skipped (exit 77) after the host checks.
#
# check_install.sh BUILD_DIR MODEL.onnx CROSS deb — the same checks on the
# Debian package: `cpack --config BUILD_DIR/CPackConfig.cmake` makes one
# kiln_VERSION_ARCH.deb whose fields name kiln, the version kiln prints, this
# machine's architecture and the LLVM packages kiln runs; it is unpacked with
# dpkg-deb -x (no root needed) and its usr/ is the prefix; the host checks
# run on it (the aarch64 ones are cli_install's). Without cpack or dpkg-deb,
# skipped (exit 77).
set -u
build=$1 model=$2 cross=$3 mode=${4:-install}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

if [ "$mode" = deb ]; then
  for tool in cpack dpkg-deb dpkg; do
    command -v $tool >/dev/null || { echo "SKIP: no $tool"; exit 77; }
  done
  (cd "$tmp" && cpack --config "$build/CPackConfig.cmake" -B "$tmp/deb") >"$tmp/cpack.log" 2>&1 ||
    fail "cpack: $(tail -3 "$tmp/cpack.log")"
  debs=("$tmp"/deb/kiln_*.deb)
  [ ${#debs[@]} = 1 ] && [ -f "${debs[0]}" ] || fail "cpack made no single kiln_*.deb: $(ls "$tmp/deb")"
  deb=${debs[0]}
  dpkg-deb -I "$deb" >"$tmp/fields" || fail "dpkg-deb -I $(basename "$deb")"
  cat "$tmp/fields"
  built=$("$build/kiln" --version | head -1 | cut -d' ' -f2)
  [ "$(dpkg-deb -f "$deb" Package)" = kiln ] || fail "Package is not kiln"
  [ "$(dpkg-deb -f "$deb" Version)" = "$built" ] || fail "Version is not $built (kiln --version)"
  [ "$(dpkg-deb -f "$deb" Architecture)" = "$(dpkg --print-architecture)" ] || fail "Architecture is not this machine's"
  llvm=$("$build/kiln" --version | sed -n 's/^LLVM: \([0-9]*\)\..*/\1/p')
  for dep in libllvm$llvm libprotobuf-c1 lld-$llvm llvm-$llvm; do
    dpkg-deb -f "$deb" Depends | tr ',' '\n' | grep -Eq "^ *$dep( |$)" || fail "Depends lacks $dep"
  done
  dpkg-deb -x "$deb" "$tmp/root" || fail "dpkg-deb -x $(basename "$deb")"
  mv "$tmp/root/usr" "$tmp/p" || fail "the package has no usr/"
else
  cmake --install "$build" --prefix "$tmp/p" >"$tmp/install.log" 2>&1 ||
    fail "cmake --install: $(tail -3 "$tmp/install.log")"
fi
for f in bin/kiln bin/kiln-runner bin/kiln-peak; do
  [ -x "$tmp/p/$f" ] || fail "$f not installed (or not executable)"
done
for f in include/kiln/artifact.h share/doc/kiln/README.md share/doc/kiln/docs/cli.md \
  share/doc/kiln/docs/abi.md share/doc/kiln/docs/cross.md; do
  [ -f "$tmp/p/$f" ] || fail "$f not installed"
done
echo "installed: $(cd "$tmp/p" && find . -type f | sort | tr '\n' ' ')"

kiln="$tmp/p/bin/kiln"
version=$("$kiln" --version) || fail "kiln --version: exit $?"
echo "$version"
echo "$version" | head -1 | grep -Eqx 'kiln [0-9]+\.[0-9]+\.[0-9]+' || fail "no 'kiln X.Y.Z' first line"
echo "$version" | grep -Eqx 'LLVM: [0-9]+\.[0-9]+\.[0-9]+ \(built with\)' || fail "no 'LLVM: X.Y.Z (built with)' line"
echo "$version" | grep -Eqx 'NVRTC: ([0-9]+\.[0-9]+ \(found at run time\)|not found)' || fail "no 'NVRTC: ...' line"

mkdir "$tmp/work" && cd "$tmp/work" || fail "cannot make a working folder"
cp "$model" m.onnx || fail "cannot copy $model"
"$kiln" compile m.onnx -o m.so >compile.log 2>&1 || fail "installed kiln compile: $(tail -3 compile.log)"
[ -f m.so ] && [ -f m.h ] || fail "installed kiln compile wrote no m.so / m.h"
"$kiln" run m.so --profile --peak 1 --bench 1 >run.log 2>&1 || fail "installed kiln run: $(tail -3 run.log)"
echo "host: compiled and ran $(basename "$model") with the installed kiln in $tmp/work"

if [ "$mode" = deb ]; then
  exit 0 # the helpers' relocation and the aarch64 run are cli_install's, on the same files
fi
if [ "$cross" != ON ]; then
  echo "SKIP aarch64: kiln was built without the aarch64 cross compiler"
  exit 77
fi
echo "$version" | grep -Fqx "kiln-run-aarch64: $tmp/p/libexec/kiln/kiln-run-aarch64" ||
  fail "kiln --version does not name the installed kiln-run-aarch64"
# the prefix moves as a whole: kiln looks for its helpers from where it is
mv "$tmp/p" "$tmp/q" && kiln="$tmp/q/bin/kiln"
"$kiln" --version | grep -Fqx "kiln-run-aarch64: $tmp/q/libexec/kiln/kiln-run-aarch64" ||
  fail "after moving the prefix, kiln --version does not name the moved kiln-run-aarch64"
"$kiln" compile m.onnx --target aarch64-linux-gnu -o a.so >cross.log 2>&1 ||
  fail "installed kiln compile --target aarch64-linux-gnu: $(tail -3 cross.log)"
if ! command -v "${KILN_QEMU_AARCH64:-qemu-aarch64}" >/dev/null; then
  echo "SKIP running the aarch64 artifact: no qemu-aarch64"
  exit 77
fi
"$kiln" run a.so --profile --peak 1 --bench 1 >arun.log 2>&1 ||
  fail "installed kiln run of the aarch64 artifact: $(tail -3 arun.log)"
echo "aarch64: cross-compiled and ran it under qemu with the installed kiln-run-aarch64"
