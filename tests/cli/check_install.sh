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
set -u
build=$1 model=$2 cross=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

cmake --install "$build" --prefix "$tmp/p" >"$tmp/install.log" 2>&1 ||
  fail "cmake --install: $(tail -3 "$tmp/install.log")"
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
