"""check_gpu_run.py — a model compiled for the GPU, run on the GPU, against
ONNX Runtime (ctest label `gpu`).

    check_gpu_run.py KILN MODEL.onnx PRECISION [BATCH]

Compiles MODEL with `--target cuda` for the GPU of this machine's driver
(both default architectures, sm_80 and sm_90, plus PTX), runs the artifact
once through bench/kiln_artifact.py and compares every output with ONNX
Runtime by bench/gpu/compare.py's rules (fp32: max abs error <= 1e-3 x
max(1, max|ref|); fp16 / bf16: cosine >= 0.999). Where the artifact cannot
run because this machine has no driver or no GPU (KILN_ERR_DEVICE), the
test is skipped with exit status 77 and the artifact's one-line reason;
likewise where kiln finds no NVRTC to compile the kernels with."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "bench"))
sys.path.insert(0, os.path.join(REPO, "bench", "gpu"))
import compare  # noqa: E402

SKIP = 77


def main():
    kiln, model, precision = sys.argv[1], sys.argv[2], sys.argv[3]
    batch = sys.argv[4] if len(sys.argv) > 4 else "1"
    with tempfile.TemporaryDirectory() as tmp:
        art = os.path.join(tmp, "gpu.so")
        cmd = [kiln, "compile", model, "--target", "cuda", "--max-batch", batch, "-o", art]
        if precision != "fp32":
            cmd += ["--precision", precision]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 and "NVRTC not found" in r.stderr:
            print(f"SKIP: {r.stderr.strip()}")
            return SKIP
        if r.returncode != 0:
            print(r.stderr, end="")
            print(f"FAIL: kiln compile exited {r.returncode}")
            return 1
        row = compare.main_row([art, model, "--precision", precision, "--batch", batch])
        if "(KILN_ERR_DEVICE)" in row.get("error", ""):
            print(f"SKIP: {row['error']}")
            return SKIP
        print(json.dumps(row))
        return 0 if row.get("pass") else 1


if __name__ == "__main__":
    sys.exit(main())
