#!/usr/bin/env bash
# artifact_hashes.sh — compile the model set for several targets and print the
# sha256 of every artifact: the check that a change which promises no behaviour
# change (a restructuring) keeps the artifacts byte-identical.
#
#   bash scripts/artifact_hashes.sh [KILN] > before.sha     (then again after; diff the two)
#
# KILN defaults to build/kiln. Needs the exported models (scripts/setup.sh).
# Per model: the host build (max batch 2), znver3 (AVX2) and portable C; the
# four tuned models with the znver3 and znver3-avx512 logs; aarch64 objects.
# A compile that fails prints "FAIL <model> <kind>" to stderr.
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KILN="$(realpath "${1:-$ROOT/build/kiln}")"
OUT="$(mktemp -d /tmp/kiln-hashes.XXXXXX)"
trap 'rm -rf "$OUT"' EXIT
cd "$ROOT"
Z3="x86_64-pc-linux-gnu -mcpu=znver3"
one() {  # NAME KIND ARGS...
  local m="$1" kind="$2"; shift 2
  "$KILN" compile "models/$m.onnx" "$@" >/dev/null 2>&1 || echo "FAIL $m $kind" >&2
}
for m in resnet18 resnet50 mobilenet_v2 efficientnet_b0 bert tiny_cnn tiny_mlp tiny_bert; do
  one "$m" host -o "$OUT/$m.host.so" --max-batch 2
  one "$m" z3 -o "$OUT/$m.z3.so" --target "$Z3"
  one "$m" c -o "$OUT/$m.c" --target c
done
for m in resnet50 mobilenet_v2 efficientnet_b0 bert; do
  one "$m" z3t -o "$OUT/$m.z3t.so" --target "$Z3" --tuning-log "tuning/x86_64-pc-linux-gnu-znver3/$m.jsonl"
  one "$m" z4t -o "$OUT/$m.z4t.so" --tuning-log "tuning/x86_64-pc-linux-gnu-znver3-avx512/$m.jsonl"
  one "$m" a64 -o "$OUT/$m.a64.o" --target "aarch64-linux-gnu -mcpu=cortex-a76"
done
(cd "$OUT" && sha256sum -- *)
