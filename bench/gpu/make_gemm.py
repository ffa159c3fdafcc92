"""make_gemm.py — writes the GEMM models of the GPU benchmark.

    python3 bench/gpu/make_gemm.py OUT_DIR 4096 8192

OUT_DIR/matmulN.onnx is one MatMul: an fp32 input "A" [N, N] times a seeded
fp32 constant [N, N], output "Y" [N, N] — bench.py's matmulN model, made by
bench.py's own make_matmul (onnx helper API). Kiln compiles it with
`--precision fp16` for the fp16 GEMM figure. The files are large (N=8192: 256 MB
of weights), too large to travel to the GPU machine, so they are written
there; where the onnx package is missing, torch.onnx.export writes the same
graph instead. An existing file is kept.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def make_with_torch(path, n):
    """The same model through torch.onnx.export (no onnx package needed)."""
    import torch

    class MatMul(torch.nn.Module):
        def __init__(self):
            super().__init__()
            g = torch.Generator().manual_seed(0)
            self.register_buffer("W", torch.randn(n, n, generator=g) / n ** 0.5)

        def forward(self, a):
            return a @ self.W

    kwargs = {"dynamo": False} if "dynamo" in torch.onnx.export.__code__.co_varnames else {}
    torch.onnx.export(MatMul(), (torch.zeros(n, n),), path, input_names=["A"], output_names=["Y"],
                      opset_version=17, **kwargs)


def main(argv):
    if len(argv) < 2 or not all(a.isdigit() for a in argv[1:]):
        print("usage: make_gemm.py OUT_DIR N [N...]", file=sys.stderr)
        return 2
    out_dir = argv[0]
    os.makedirs(out_dir, exist_ok=True)
    try:
        sys.path.insert(0, os.path.join(HERE, ".."))
        from bench import make_matmul  # bench/bench.py: needs onnx (and onnxruntime)
    except ImportError as e:
        print(f"make_gemm: {e}: writing with torch.onnx.export", file=sys.stderr)
        make_matmul = make_with_torch
    for n in map(int, argv[1:]):
        path = os.path.join(out_dir, f"matmul{n}.onnx")
        if os.path.exists(path):
            print(f"{path}: exists, kept")
            continue
        tmp = path + ".tmp"
        make_matmul(tmp, n)
        os.replace(tmp, path)
        print(f"{path}: written ({os.path.getsize(path) / 1e6:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
