#!/usr/bin/env bash
# gpu-check.sh — Kiln's whole GPU check in one command, for a machine with an
# NVIDIA GPU and the CUDA toolkit but no network (issue 42, item 6).
#
#   bash scripts/gpu-check.sh OUTDIR [--dry-run] [--cpu] [--no-build] [--target STRING]
#        [--models a,b] [--precisions fp32,fp16] [--gemm 4096,8192]
#        [--bench-cases resnet50:1,resnet50:64,bert:64] [--budget S] [--limit S]
#
# Steps, each with its own time limit; a failure is recorded and the run goes on:
#   1. nvidia-smi; the target is "cuda -arch=sm_XY" from its compute_cap.
#   2. Unpack $KILN_GPU_DEPS (default build-gpu-deps/deps.tar.xz, made by
#      scripts/gpu-deps.sh: LLVM 14, protobuf-c, cmocka) when it is there;
#      build Kiln (cmake Release into $KILN_BUILD_DIR, default build/), then
#      ctest -L gpu (the GPU execution tests). A kiln binary that runs is used
#      even when the build fails ($KILN names another one); --no-build skips
#      the build and the tests.
#   3. While Kiln builds: export the models missing from $KILN_MODELS_DIR
#      (bench/gpu/export_models.py), write the GEMM models matmulN.onnx
#      (bench/gpu/make_gemm.py), build bench/gpu/cublas_gemm.c with nvcc.
#   4. Compile every model at each precision (fp32 plain, others with
#      --precision P), --max-batch 64, in parallel; matmulN at fp16 only.
#      $KILN_GPU_ARTIFACTS/NAME-PREC.so, when present, is used instead.
#   5. Check each artifact against ONNX Runtime on the CPU (bench/gpu/compare.py,
#      batch 1): fp32 max abs err <= 1e-3 * max(1, max|ref|), fp16/bf16
#      cosine >= 0.999.
#   6. Benchmarks, skipped once --budget seconds (default 420) have passed:
#      cuBLAS GEMM (fp16 in, f16 and f32 out) and Kiln's matmulN; the
#      --bench-cases at fp16 then fp32 through `kiln run --bench --profile`
#      (bench/gpu/kiln_time.py); PyTorch eager, then torch.compile at fp16
#      with what time is left (bench/gpu/torch_peer.py).
#   7. OUTDIR/summary.json and OUTDIR/summary.md (bench/gpu/summary.py).
# OUTDIR gets four files (gpu-check.log, summary.json, summary.md, logs.tar.gz
# with every step's log), so it can be the device tool's $OUT; the work files
# (models, artifacts) go to $KILN_GPU_CHECK_WORK (default a fresh /tmp folder).
# --limit S (default 470) clips every step's time limit to what is left of S
# seconds, so the whole run ends in time.
# --dry-run (or KILN_GPU_CHECK_DRY=1): every step is echoed, not run; the
# summary is still written. --cpu: the same steps on a machine without a GPU
# (target host, torch on the CPU): tests this script's control flow for real.
# Environment: PYTHON (onnx, onnxruntime, numpy; default python3), TORCH_PYTHON
# (default $PYTHON), KILN, KILN_BUILD_DIR, KILN_MODELS_DIR, KILN_GPU_DEPS,
# KILN_GPU_ARTIFACTS, CUDA_HOME (default /usr/local/cuda), JOBS (default: the
# CPU count).
# Exit status: 0 when no step failed or ran out of time, else 1; 2 on usage.
set -u

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 2

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
OUTDIR="" DRY="${KILN_GPU_CHECK_DRY:-0}" CPU=0 BUILD_KILN=1 TARGET="" MODELS="" PRECISIONS="fp32,fp16"
GEMM_SIZES="4096,8192" BENCH_CASES="resnet50:1,resnet50:64,bert:64" BUDGET=420 LIMIT=470
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --cpu) CPU=1 ;;
    --no-build) BUILD_KILN=0 ;;
    --target|--models|--precisions|--gemm|--bench-cases|--budget|--limit)
      [ $# -ge 2 ] || { echo "gpu-check.sh: error: $1 needs a value" >&2; exit 2; }
      case "$1" in
        --target) TARGET="$2" ;; --models) MODELS="$2" ;; --precisions) PRECISIONS="$2" ;;
        --gemm) GEMM_SIZES="$2" ;; --bench-cases) BENCH_CASES="$2" ;;
        --budget) BUDGET="$2" ;; --limit) LIMIT="$2" ;;
      esac
      shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "gpu-check.sh: error: unknown option '$1' (try --help)" >&2; exit 2 ;;
    *) [ -z "$OUTDIR" ] || { echo "gpu-check.sh: error: one OUTDIR only" >&2; exit 2; }
       OUTDIR="$1" ;;
  esac
  shift
done
[ -n "$OUTDIR" ] || { echo "gpu-check.sh: error: OUTDIR missing (try --help)" >&2; exit 2; }
case "$BUDGET$LIMIT" in *[!0-9]*) echo "gpu-check.sh: error: --budget/--limit take seconds" >&2; exit 2 ;; esac

PY="${PYTHON:-python3}"
TORCH_PY="${TORCH_PYTHON:-$PY}"
BUILD="${KILN_BUILD_DIR:-build}"
KILN="${KILN:-$ROOT/$BUILD/kiln}"
MODELS_DIR="${KILN_MODELS_DIR:-models}"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
JOBS="${JOBS:-$(nproc)}"
MAX_BATCH=64
export PATH="$PATH:$CUDA_HOME/bin"
DEPS="${KILN_GPU_DEPS:-build-gpu-deps/deps.tar.xz}"
export LD_LIBRARY_PATH="$CUDA_HOME/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Prefix of the commands that load Kiln's libraries: the unpacked deps' lib/
# goes first on their LD_LIBRARY_PATH (not on the torch steps': theirs are newer).
KILN_ENV=()
export PYTHONUNBUFFERED=1
mkdir -p "$OUTDIR" || exit 2
OUTDIR="$(cd "$OUTDIR" && pwd)"
WORK="${KILN_GPU_CHECK_WORK:-$(mktemp -d /tmp/kiln-gpu-check.XXXXXX)}"
mkdir -p "$WORK/logs" "$WORK/art" "$WORK/bin" "$WORK/gemm" || exit 2
rm -f "$WORK"/*.jsonl
T0=$SECONDS

elapsed() { echo $((SECONDS - T0)); }

# record STEP STATUS SECONDS NOTE: one line of steps.jsonl (short, so that
# parallel steps' appends do not interleave).
record() {
  local note
  note="$(printf '%s' "$4" | tr -d '"\134' | tr '[:cntrl:]' ' ')"
  printf '{"step": "%s", "status": "%s", "seconds": %s, "note": "%s"}\n' "$1" "$2" "$3" "${note:0:200}" \
    >>"$WORK/steps.jsonl"
  echo "--- [$(elapsed)s] $1: $2${4:+ ($note)}"
}

# step NAME LIMIT CMD...: runs CMD for at most LIMIT seconds (clipped to what
# is left of --limit), its output in logs/NAME.log and, unless STEP_QUIET=1, in
# the main log. STEP_JSON=F appends the output's JSON lines to F.jsonl.
# STEP_NOTE=REGEX: the first line of the log matching it becomes the note of a
# step that passed; a failed one gets its last line naming an error. Returns
# CMD's status.
step() {
  local name="$1" limit="$2" left log="$WORK/logs/$1.log" t rc status note=""
  shift 2
  left=$((LIMIT - $(elapsed)))
  if [ "$left" -lt 5 ]; then
    record "$name" skipped 0 "time limit reached"
    return 1
  fi
  [ "$limit" -gt "$left" ] && limit="$left"
  echo "==> [$(elapsed)s] $name (limit ${limit}s): $*"
  if [ "$DRY" = 1 ]; then
    echo "DRY: $*" >"$log"
    record "$name" dry 0 ""
    return 0
  fi
  t=$SECONDS
  if [ "${STEP_QUIET:-0}" = 1 ]; then
    timeout -k 5 "$limit" "$@" >"$log" 2>&1
    rc=$?
  else
    timeout -k 5 "$limit" "$@" 2>&1 | tee "$log"
    rc="${PIPESTATUS[0]}"
  fi
  [ -n "${STEP_JSON:-}" ] && grep '^{' "$log" >>"$WORK/$STEP_JSON.jsonl"
  case "$rc" in
    0) status=ok; [ -n "${STEP_NOTE:-}" ] && note="$(grep -E -m1 "$STEP_NOTE" "$log")" ;;
    124|137) status=timeout; note="killed after ${limit}s" ;;
    *) status=fail  # the last line naming an error, else the last line
       note="$(grep -i -E 'error|fail' "$log" | tail -1)"
       note="exit $rc: ${note:-$(grep -v '^[[:space:]]*$' "$log" | tail -1)}" ;;
  esac
  if [ "$status" != ok ] && [ "${STEP_QUIET:-0}" = 1 ]; then
    tail -n 15 "$log"
  fi
  record "$name" "$status" $((SECONDS - t)) "$note"
  return "$rc"
}

# in_budget NAME: true while the benchmark budget lasts; records a skip otherwise.
in_budget() {
  [ "$(elapsed)" -lt "$BUDGET" ] && return 0
  record "$1" skipped 0 "benchmark budget of ${BUDGET}s spent"
  return 1
}

# throttle N: waits until fewer than N background steps run.
throttle() {
  while [ "$(jobs -rp | wc -l)" -ge "$1" ]; do wait -n; done
}

# has_artifact STEP NAME: is art/NAME.so there (or is this a dry run)? Records
# STEP as skipped when it is not.
has_artifact() {
  [ -f "$WORK/art/$2.so" ] || [ "$DRY" = 1 ] && return 0
  record "$1" skipped 0 "not compiled"
  return 1
}

# Writes env.json: what ran where (read by summary.py).
write_env() {
  ENV_DEVICE="$1" ENV_TARGET="$TARGET" ENV_DRY="$DRY" ENV_ELAPSED="$(elapsed)" \
  ENV_COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  ENV_TORCH="$("$TORCH_PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)" \
  "$PY" -c 'import json, os, time
e = os.environ
print(json.dumps({"device": e["ENV_DEVICE"], "target": e["ENV_TARGET"], "dry_run": e["ENV_DRY"] == "1",
                  "elapsed_s": int(e["ENV_ELAPSED"]), "commit": e["ENV_COMMIT"], "torch": e["ENV_TORCH"],
                  "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}))' >"$WORK/env.json"
}

finish() {
  write_env "$DEVICE_NAME"
  "$PY" bench/gpu/summary.py "$WORK" "$OUTDIR" || echo "gpu-check.sh: summary.py failed"
  local results=()
  mapfile -t results < <(cd "$WORK" && ls -- *.jsonl *.json 2>/dev/null)
  tar -czf "$OUTDIR/logs.tar.gz" -C "$WORK" logs "${results[@]}"
  echo
  cat "$OUTDIR/summary.md" 2>/dev/null
  echo "gpu-check: $(elapsed) s; summary in $OUTDIR/summary.md; work files in $WORK"
  if grep -q -E '"status": "(fail|timeout)"' "$WORK/steps.jsonl" 2>/dev/null; then return 1; fi
  return 0
}

# compile NAME ONNX PREC: one artifact, art/NAME-PREC.so (or a prebuilt one).
compile_one() {
  local name="$1" onnx="$2" prec="$3" out="$WORK/art/$1-$3.so"
  if [ -n "${KILN_GPU_ARTIFACTS:-}" ] && [ -f "$KILN_GPU_ARTIFACTS/$name-$prec.so" ]; then
    cp "$KILN_GPU_ARTIFACTS/$name-$prec.so" "$out" && record "compile-$name-$prec" ok 0 "prebuilt"
    return
  fi
  local args=(compile "$onnx" -o "$out" --target "$TARGET" --max-batch "$MAX_BATCH")
  [ "$prec" = fp32 ] || args+=(--precision "$prec")
  STEP_QUIET=1 step "compile-$name-$prec" 300 "${KILN_ENV[@]}" "$KILN" "${args[@]}"
}

main() {
  echo "gpu-check: $(date -u '+%F %T UTC'), $ROOT at $(git rev-parse --short HEAD 2>/dev/null), work $WORK"
  [ "$DRY" = 1 ] && echo "gpu-check: DRY RUN: steps are echoed, not run"
  DEVICE_NAME=cpu DEVICE=cpu
  # ---- 1. the GPU and the target -------------------------------------------------------
  if [ "$CPU" = 1 ]; then
    TARGET="${TARGET:-host}"
  else
    DEVICE=cuda
    STEP_NOTE='Driver Version' step nvidia-smi 30 nvidia-smi
    local cap
    cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')"
    DEVICE_NAME="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
    DEVICE_NAME="${DEVICE_NAME:-unknown GPU}"
    [ -n "$cap" ] || { cap=90; echo "gpu-check: no compute_cap from nvidia-smi: assuming sm_90"; }
    TARGET="${TARGET:-cuda -arch=sm_$cap}"
  fi
  echo "gpu-check: target '$TARGET', torch device $DEVICE"

  # ---- 2. while Kiln builds: models, GEMM models, the cuBLAS peer ----------------------
  local models=() m missing=()
  if [ -n "$MODELS" ]; then
    IFS=, read -r -a models <<<"$MODELS"
  else
    IFS=, read -r -a models <<<"$("$TORCH_PY" -c 'import sys; sys.path.insert(0, "models")
import export; print(",".join(export.DEFAULT_SET))' 2>/dev/null)"
    if [ "${#models[@]}" -eq 0 ]; then  # no torch here: the models already exported
      for m in "$MODELS_DIR"/*.onnx; do [ -f "$m" ] && models+=("$(basename "$m" .onnx)"); done
    fi
  fi
  for m in "${models[@]}"; do [ -f "$MODELS_DIR/$m.onnx" ] || missing+=("$m"); done
  if [ "${#missing[@]}" -gt 0 ]; then
    STEP_QUIET=1 step export-models 240 "$TORCH_PY" bench/gpu/export_models.py --out "$MODELS_DIR" \
      --only "$(IFS=,; echo "${missing[*]}")" &
  fi
  local sizes=()
  IFS=, read -r -a sizes <<<"$GEMM_SIZES"
  if [ "${#sizes[@]}" -gt 0 ]; then
    STEP_QUIET=1 step make-gemm 120 "$PY" bench/gpu/make_gemm.py "$WORK/gemm" "${sizes[@]}" &
  fi
  if [ "$CPU" = 1 ]; then
    record build-cublas skipped 0 "--cpu"
  else
    STEP_QUIET=1 step build-cublas 120 nvcc -O2 bench/gpu/cublas_gemm.c -lcublas -o "$WORK/bin/cublas_gemm" &
  fi

  # ---- 3. build, GPU tests -------------------------------------------------------------
  local built=0 have_kiln=0 cmake_args=(-DCMAKE_BUILD_TYPE=Release
    "-DKILN_PYTHON=$(command -v "$PY")" "-DKILN_TORCH_PYTHON=$(command -v "$TORCH_PY")")
  if [ -f "$DEPS" ]; then
    step unpack-deps 120 tar -xJf "$DEPS" -C "$WORK"
    KILN_ENV=(env "LD_LIBRARY_PATH=$WORK/kiln-deps/lib:$LD_LIBRARY_PATH")
    cmake_args+=("-DCMAKE_PREFIX_PATH=$WORK/kiln-deps" "-DLLVM_CONFIG=$WORK/kiln-deps/bin/llvm-config-14")
  fi
  if [ "$BUILD_KILN" = 1 ]; then
    # shellcheck disable=SC2016  # $1.. are the inner bash's arguments
    STEP_QUIET=1 step build 300 "${KILN_ENV[@]}" bash -c 'cmake -S . -B "$1" "${@:3}" && cmake --build "$1" -j"$2"' \
      build "$BUILD" "$JOBS" "${cmake_args[@]}" && built=1
  else
    record build skipped 0 "--no-build"
  fi
  STEP_NOTE=. step kiln-version 20 "${KILN_ENV[@]}" "$KILN" --version && have_kiln=1
  wait  # for step 2: the tests' model fixture must find the exported models
  if [ "$built" = 1 ]; then
    STEP_NOTE='tests passed|No tests were found' step ctest-gpu 180 \
      "${KILN_ENV[@]}" ctest --test-dir "$BUILD" -L gpu --output-on-failure --no-tests=ignore -j4
  else
    record ctest-gpu skipped 0 "no build"
  fi

  # ---- 4. compile everything, in parallel ------------------------------------------------
  local precs=() p n
  IFS=, read -r -a precs <<<"$PRECISIONS"
  if [ "$have_kiln" = 1 ] || [ -n "${KILN_GPU_ARTIFACTS:-}" ] || [ "$DRY" = 1 ]; then
    echo "==> [$(elapsed)s] compiling ${#models[@]} models x ${#precs[@]} precisions + ${#sizes[@]} GEMMs, $JOBS at a time"
    for n in "${sizes[@]}"; do
      compile_one "matmul$n" "$WORK/gemm/matmul$n.onnx" fp16 &
    done
    for m in "${models[@]}"; do
      for p in "${precs[@]}"; do
        throttle "$JOBS"
        compile_one "$m" "$MODELS_DIR/$m.onnx" "$p" &
      done
    done
    wait
  else
    record compile skipped 0 "no kiln binary that runs"
  fi

  # ---- 5. check against ONNX Runtime, 4 at a time ------------------------------------
  for m in "${models[@]}"; do
    for p in "${precs[@]}"; do
      if has_artifact "check-$m-$p" "$m-$p"; then
        throttle 4
        STEP_QUIET=1 STEP_JSON=checks step "check-$m-$p" 120 "$PY" bench/gpu/compare.py \
          "$WORK/art/$m-$p.so" "$MODELS_DIR/$m.onnx" --precision "$p" &
      fi
    done
  done
  for n in "${sizes[@]}"; do  # the GEMM's numbers too, where ORT's CPU product is quick
    if [ "$n" -le 4096 ] && has_artifact "check-matmul$n-fp16" "matmul$n-fp16"; then
      throttle 4
      STEP_QUIET=1 STEP_JSON=checks step "check-matmul$n-fp16" 120 "$PY" bench/gpu/compare.py \
        "$WORK/art/matmul$n-fp16.so" "$WORK/gemm/matmul$n.onnx" --precision fp16 &
    fi
  done
  wait

  # ---- 6. benchmarks ---------------------------------------------------------------------
  local out
  for n in "${sizes[@]}"; do
    for out in f16 f32; do
      if [ "$CPU" = 0 ] && in_budget "cublas-$n-$out"; then
        STEP_JSON=cublas step "cublas-$n-$out" 60 "$WORK/bin/cublas_gemm" "$n" --out "$out"
      fi
    done
    if has_artifact "kiln-gemm-$n" "matmul$n-fp16" && in_budget "kiln-gemm-$n"; then
      STEP_JSON=kiln step "kiln-gemm-$n" 120 "${KILN_ENV[@]}" "$PY" bench/gpu/kiln_time.py "$WORK/art/matmul$n-fp16.so" \
        "$WORK/gemm/matmul$n.onnx" --precision fp16 --kiln "$KILN" --bench 20
    fi
  done
  local cases=() c b eager_cases=() compile_cases=()
  IFS=, read -r -a cases <<<"$BENCH_CASES"
  for p in fp16 fp32; do
    [[ ",$PRECISIONS," == *",$p,"* ]] || continue
    for c in "${cases[@]}"; do
      m="${c%%:*}" b="${c#*:}"
      eager_cases+=("$m:$b:$p")
      [ "$p" = fp16 ] && compile_cases+=("$m:$b:$p")
      if has_artifact "kiln-$m-b$b-$p" "$m-$p" && in_budget "kiln-$m-b$b-$p"; then
        STEP_JSON=kiln step "kiln-$m-b$b-$p" 120 "${KILN_ENV[@]}" "$PY" bench/gpu/kiln_time.py "$WORK/art/$m-$p.so" \
          "$MODELS_DIR/$m.onnx" --precision "$p" --batch "$b" --kiln "$KILN" --bench 20
      fi
    done
  done
  if [ "${#eager_cases[@]}" -gt 0 ] && in_budget torch-eager; then
    STEP_JSON=torch step torch-eager 180 "$TORCH_PY" bench/gpu/torch_peer.py --mode eager \
      --device "$DEVICE" --cases "$(IFS=,; echo "${eager_cases[*]}")"
  fi
  # torch.compile takes a minute or so per case: it gets whatever time is left.
  if [ "${#compile_cases[@]}" -gt 0 ] && in_budget torch-compile; then
    STEP_JSON=torch step torch-compile "$LIMIT" "$TORCH_PY" bench/gpu/torch_peer.py --mode compile \
      --device "$DEVICE" --cases "$(IFS=,; echo "${compile_cases[*]}")"
  fi
  finish
}

main 2>&1 | tee "$OUTDIR/gpu-check.log"
exit "${PIPESTATUS[0]}"
