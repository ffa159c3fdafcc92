#!/usr/bin/env bash
# make_corpus.sh — assembles the seed corpora of the three fuzz targets:
#   OUT/onnx       the ONNX node-test models (onnx/backend/test/data/node/*/model.onnx),
#                  the small models of MODELS_DIR (< 1 MB), fuzz/gen_seeds.py's hostile
#                  models and the regression cases of tests/fuzz/cases
#   OUT/tensor_pb  the node tests' input_*.pb / output_*.pb (< 64 KB, every 4th test)
#   OUT/npy        a few .npy files of every supported dtype and rank 0..4
#
#   fuzz/make_corpus.sh OUT [MODELS_DIR]     (needs python3 with onnx and numpy)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:?usage: make_corpus.sh OUT [MODELS_DIR]}"
MODELS="${2:-$ROOT/models}"
NODE="$(python3 -c "import onnx, os; print(os.path.dirname(onnx.__file__))")/backend/test/data/node"
mkdir -p "$OUT/onnx" "$OUT/tensor_pb" "$OUT/npy"
for d in "$NODE"/*/; do
  t="$(basename "$d")"
  [ -f "$d/model.onnx" ] && cp "$d/model.onnx" "$OUT/onnx/node_$t.onnx"
done
find "$MODELS" -maxdepth 1 -name '*.onnx' -size -1M -exec cp {} "$OUT/onnx/" \; 2>/dev/null || true
python3 "$ROOT/fuzz/gen_seeds.py" "$OUT/onnx" >/dev/null
cp "$ROOT"/tests/fuzz/cases/*.onnx "$OUT/onnx/"
i=0
for d in "$NODE"/*/; do
  i=$((i + 1))
  [ $((i % 4)) = 0 ] || continue
  for f in "$d"/test_data_set_0/*.pb; do
    [ -f "$f" ] && [ "$(stat -c %s "$f")" -lt 65536 ] && cp "$f" "$OUT/tensor_pb/$(basename "$d")_$(basename "$f")"
  done
done
python3 - "$OUT/npy" <<'PY'
import sys, numpy as np
out = sys.argv[1]
rng = np.random.default_rng(0)
for dt in ["<f4", "<f8", "<f2", "<i8", "<i4", "<i2", "|i1", "|u1", "<u2", "<u4", "<u8", "|b1"]:
    for rank in range(5):
        shape = tuple(int(x) for x in rng.integers(1, 4, size=rank))
        a = (rng.standard_normal(shape) * 10).astype(np.dtype(dt))
        np.save(f"{out}/{dt[1:]}_r{rank}.npy", a)
PY
echo "make_corpus.sh: $(ls "$OUT/onnx" | wc -l) onnx, $(ls "$OUT/tensor_pb" | wc -l) tensor_pb, $(ls "$OUT/npy" | wc -l) npy seeds in $OUT"
