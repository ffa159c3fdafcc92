#!/usr/bin/env bash
# setup.sh — set up a fresh Debian 12 machine for Kiln, build it, and compile
# and run the bundled example model (resnet18): the first command of README.md.
#
#   bash scripts/setup.sh [--no-example] [--no-build] [--no-models]
#
# Steps (each skipped quickly when already done, so a re-run takes seconds):
#   1. Debian packages (apt): toolchain, LLVM 14, lld, protobuf-c, cmocka, the
#      aarch64 cross gcc + sysroot and qemu-user (cross-compiling, cross tests), and
#      Debian's PyTorch for /usr/bin/python3 (used only to export models).
#   2. PyPI packages (python3 -m pip): onnx (its onnx.proto is what the frontend
#      decoder is generated from), onnxruntime and numpy for the test oracles;
#      wheel (with setuptools) so that the python_install test can pip-install
#      python/ into a venv without the network.
#      python3 is the first one on PATH (a pyenv one here); when that is
#      Debian's externally-managed python, they go into a venv in build-venv/.
#   3. Build: cmake -S . -B build -DCMAKE_BUILD_TYPE=Release; the CLI lands at
#      build/kiln.
#   4. Export the model set with models/export.py (existing files are kept).
#   5. The example: kiln compile models/resnet18.onnx -o out/resnet18.so, a
#      random input, kiln run --bench 20: prints the outputs and the latency.
# Run as root (or with sudo available). CI=true: no prompts. Environment:
# JOBS (build parallelism, default 2), KILN_BUILD_DIR (default build),
# KILN_EXAMPLE_MODEL (default resnet18), KILN_PYTHON / KILN_TORCH_PYTHON.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

do_example=1 do_build=1 do_models=1
for arg in "$@"; do
  case "$arg" in
    --no-example) do_example=0 ;;
    --no-build) do_build=0 do_example=0 ;;
    --no-models) do_models=0 do_example=0 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "setup.sh: error: unknown option '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

JOBS="${JOBS:-2}"
BUILD="${KILN_BUILD_DIR:-build}"
TORCH_PY="${KILN_TORCH_PYTHON:-/usr/bin/python3}"
step() { printf '\n==> %s\n' "$*"; }
SUDO=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "setup.sh: error: run as root (no sudo found)" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive

# ---- 1. Debian packages ---------------------------------------------------------------
APT_PKGS=(
  cmake make gcc g++ binutils pkg-config           # build
  llvm-14-dev lld-14 lld clang-14                  # codegen (LLVM C API), linker
  libclang-rt-14-dev                               # libFuzzer + sanitizer runtimes (-DKILN_FUZZ=ON, fuzz/)
  protobuf-c-compiler libprotobuf-c-dev            # ONNX decoder, generated at build time
  libcmocka-dev                                    # unit tests
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross      # aarch64 cross-compilation (runtime, runner, .so links)
  qemu-user                                        # cross tests: aarch64 artifacts under qemu-aarch64
  python3-torch python3-torchvision python3-numpy  # /usr/bin/python3: model export only
  python3-venv                                     # fallback venv when python3 is Debian's
)
step "Debian packages"
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}"
  $SUDO apt-get update
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
else
  echo "all ${#APT_PKGS[@]} present"
fi

# ---- 2. PyPI packages -----------------------------------------------------------------
PIP_PKGS=(onnx==1.22.0 onnxruntime numpy setuptools wheel)
PY_CHECK='import onnx, onnxruntime, numpy, setuptools, wheel; assert onnx.__version__ == "1.22.0", onnx.__version__'
step "Python packages (onnx, onnxruntime, numpy, setuptools, wheel)"
PY="${KILN_PYTHON:-python3}"
if [ -x build-venv/bin/python3 ] && [ -z "${KILN_PYTHON:-}" ]; then
  PY="$ROOT/build-venv/bin/python3"
fi
if ! "$PY" -c "$PY_CHECK" 2>/dev/null; then
  stdlib="$("$PY" -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')"
  if [ -e "$stdlib/EXTERNALLY-MANAGED" ]; then
    # Debian's own python3: keep its numpy (torch needs it) and use a venv.
    echo "$PY is externally managed: using a venv in build-venv/"
    [ -x build-venv/bin/python3 ] || "$PY" -m venv build-venv
    PY="$ROOT/build-venv/bin/python3"
  fi
  "$PY" -m pip install --quiet --disable-pip-version-check "${PIP_PKGS[@]}"
  "$PY" -c "$PY_CHECK"
fi
"$PY" -c 'import onnx, onnxruntime, numpy, sys; print(f"{sys.executable}: onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}, numpy {numpy.__version__}")'
"$TORCH_PY" -c 'import torch, torchvision; print(f"'"$TORCH_PY"': torch {torch.__version__}, torchvision {torchvision.__version__}")'

# ---- 3. build ---------------------------------------------------------------------------
if [ "$do_build" = 1 ]; then
  step "Build (Release) into $BUILD/"
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKILN_PYTHON="$("$PY" -c 'import sys; print(sys.executable)')"
  cmake --build "$BUILD" -j"$JOBS"
  [ -x "$BUILD/kiln" ] || { echo "setup.sh: error: $BUILD/kiln was not built" >&2; exit 1; }
fi

# ---- 4. models ---------------------------------------------------------------------------
if [ "$do_models" = 1 ]; then
  step "Export the model set (models/export.py)"
  "$TORCH_PY" -W ignore models/export.py --out models
fi

# ---- 5. the example: compile and run resnet18 --------------------------------------------
if [ "$do_example" = 1 ]; then
  M="${KILN_EXAMPLE_MODEL:-resnet18}"
  step "Example: compile models/$M.onnx"
  mkdir -p "out/$M"
  t0=$(date +%s.%N)
  "$BUILD/kiln" compile "models/$M.onnx" -o "out/$M.so"
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" -v m="$M" 'BEGIN { printf "compiled in %.2f s: out/%s.so, out/%s.h\n", b - a, m, m }'
  # One random input per model input (float: normal; token ids: within the vocabulary).
  mapfile -t input_args < <("$PY" - "$M" <<'EOF'
import sys
sys.path.insert(0, "tests/models")
import numpy as np
from common import make_inputs, model_inputs
m = sys.argv[1]
for i, (name, arr) in enumerate(make_inputs(model_inputs(f"models/{m}.onnx"), 1, 0).items()):
    np.save(f"out/{m}_input{i}.npy", arr)
    print("--input")
    print(f"{name}=out/{m}_input{i}.npy")
EOF
)

  step "Example: run out/$M.so (20 timed runs)"
  "$BUILD/kiln" run "out/$M.so" "${input_args[@]}" --output-dir "out/$M" --bench 20
  "$PY" - "$M" <<'EOF'
import os, sys
import numpy as np
m = sys.argv[1]
for f in sorted(os.listdir(f"out/{m}")):
    out = np.load(f"out/{m}/{f}")
    print(f"{f}: shape {list(out.shape)} {out.dtype}, mean {out.mean():.4f}, std {out.std():.4f}, "
          f"first values {np.array2string(out.ravel()[:5], precision=4)}")
    if out.ndim == 2:
        top = np.argsort(-out[0])[:5]
        print("  top-5 classes (random weights): " + ", ".join(f"{i} ({out[0, i]:.3f})" for i in top))
EOF
fi
step "Set-up done"
