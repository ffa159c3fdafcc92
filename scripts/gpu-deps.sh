#!/usr/bin/env bash
# gpu-deps.sh — packs what building Kiln needs beyond a compiler, CMake and
# Python, for the GPU machine: it has the CUDA toolkit but no LLVM 14,
# protobuf-c or cmocka, and no network to fetch them.
#
#   bash scripts/gpu-deps.sh [OUT.tar.xz]     (default build-gpu-deps/deps.tar.xz)
#
# Run on the development machine after scripts/setup.sh. The archive holds a
# prefix (bin/ include/ lib/): LLVM 14's C API headers and shared library, an
# llvm-config-14 that points into the prefix, protoc-c, protobuf-c and cmocka
# with their headers, and every shared library these load except the C and
# C++ runtimes (the GPU machine's own are newer). scripts/gpu-check.sh unpacks
# it when it is there and builds with -DCMAKE_PREFIX_PATH and
# -DLLVM_CONFIG pointing into it, and LD_LIBRARY_PATH=PREFIX/lib for the
# steps that run Kiln. Carry its folder to the GPU machine (the device tool's
# `carry`: build-gpu-deps); the archive is about 40 MB.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/build-gpu-deps/deps.tar.xz}"
LLVM_CONFIG="${LLVM_CONFIG:-llvm-config-14}"
STAGE="$(mktemp -d /tmp/kiln-gpu-deps.XXXXXX)"
trap 'rm -rf "$STAGE"' EXIT
P="$STAGE/kiln-deps"
mkdir -p "$P/bin" "$P/lib" "$P/include/llvm"

# LLVM: the C API headers (and the config headers they include), the library.
inc="$("$LLVM_CONFIG" --includedir)"
cp -rL "$inc/llvm-c" "$P/include/"
cp -rL "$inc/llvm/Config" "$P/include/llvm/"
libllvm="$("$LLVM_CONFIG" --libdir)/lib$("$LLVM_CONFIG" --libs | sed 's/^-l//').so"
cp -L "$libllvm" "$P/lib/$(basename "$(readlink -f "$libllvm")")"
ln -s "$(basename "$(readlink -f "$libllvm")")" "$P/lib/$(basename "$libllvm")"
cat >"$P/bin/llvm-config-14" <<'EOF'
#!/bin/sh
# llvm-config for this prefix: answers what Kiln's CMakeLists.txt asks.
p="$(cd "$(dirname "$0")/.." && pwd)"
case "$1" in
  --includedir) echo "$p/include" ;;
  --libdir) echo "$p/lib" ;;
  --bindir) echo "$p/bin" ;;
  --libs) echo "-lLLVM-14" ;;
  --version) echo "14" ;;
  *) echo "llvm-config-14 (kiln-deps): unsupported option $1" >&2; exit 1 ;;
esac
EOF
chmod +x "$P/bin/llvm-config-14"

# protobuf-c (the ONNX decoder is generated at build time) and cmocka (tests).
cp "$(command -v protoc-c)" "$P/bin/"
mkdir -p "$P/include/protobuf-c"
cp /usr/include/protobuf-c/protobuf-c.h "$P/include/protobuf-c/"
cp /usr/include/cmocka.h /usr/include/cmocka_pbc.h "$P/include/"
for so in /usr/lib/x86_64-linux-gnu/libprotobuf-c.so.1 /usr/lib/x86_64-linux-gnu/libcmocka.so.0; do
  cp -L "$so" "$P/lib/"
  ln -s "$(basename "$so")" "$P/lib/$(basename "${so%.*}")"
done

# Every shared library those load, but the C/C++ runtimes and the loader.
for f in "$P/lib/"*.so.* "$P/bin/protoc-c"; do
  ldd "$f" | awk '/=> \// { print $3 }'
done | sort -u | grep -v -E '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s)\.so' |
  while read -r lib; do
    [ -e "$P/lib/$(basename "$lib")" ] || cp -L "$lib" "$P/lib/"
  done

mkdir -p "$(dirname "$OUT")"
echo "gpu-deps: $(du -sh "$P" | cut -f1) unpacked; compressing into $OUT (a few minutes)"
tar -C "$STAGE" -cf - kiln-deps | xz -T0 -6 >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
ls -la "$OUT"
