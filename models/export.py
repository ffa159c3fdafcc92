#!/usr/bin/python3
"""export.py — export Kiln's model set from PyTorch to ONNX, with random weights.

Run with the interpreter that has torch + torchvision (Debian's /usr/bin/python3:
torch 1.13, torchvision 0.14). torch.onnx.export needs no `onnx` package.

Every model is exported the same way, so the tests and the benchmark can treat
them alike:
  * random weights from a fixed seed (nothing is downloaded), eval mode;
  * opset 17 (LayerNormalization is a single ONNX op there; GELU becomes Erf);
  * one input named "input" (float32 NCHW images), or "input_ids" (int64
    token ids) for the BERT-style encoders; one output named "output";
  * the batch dimension is symbolic, named "N", on the input and the output.
Files are written atomically (temp file + rename); an existing model is kept
unless --force is given, so re-runs cost nothing.

    /usr/bin/python3 models/export.py --out models [--only resnet18,bert] [--force] [--list]
"""
import argparse
import math
import os
import sys
import tempfile
import time

import torch
import torch.nn as nn

OPSET = 17
SEED = 0


# ---- small models for fast tests ----------------------------------------------------------

class TinyCNN(nn.Module):
    """Two convs at 32x32 with BatchNorm, ReLU, a residual add, pooling and a
    linear head: the conv path of the big CNNs in a model that compiles fast."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.conv2(y) + y)
        y = self.pool(y)
        y = torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1)
        return self.fc(y)


class TinyMLP(nn.Module):
    """Gemm + ReLU + Gemm + Softmax on [N, 64]: the smallest whole model."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return torch.softmax(self.fc2(torch.relu(self.fc1(x))), dim=-1)


# ---- BERT-style encoder -------------------------------------------------------------------

class SelfAttention(nn.Module):
    """Multi-head attention with explicit MatMul / Softmax (no fused kernels)."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.proj = nn.Linear(hidden, hidden)

    def split(self, x):  # [N, S, H*D] -> [N, H, S, D]
        n, s, _ = x.shape
        return x.reshape(n, s, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x):
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        ctx = torch.softmax(scores, dim=-1) @ v  # [N, H, S, D]
        n, _, s, _ = ctx.shape
        return self.proj(ctx.transpose(1, 2).reshape(n, s, self.heads * self.head_dim))


class EncoderLayer(nn.Module):
    """Post-LN transformer layer: x = LN(x + attn(x)); x = LN(x + FFN(x)), GELU exact (erf)."""

    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.attn = SelfAttention(hidden, heads)
        self.ln1 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden)

    def forward(self, x):
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.fc2(nn.functional.gelu(self.fc1(x))))


class BertEncoder(nn.Module):
    """Token + learned position embedding, embedding LayerNorm, `layers` encoder layers."""

    def __init__(self, vocab=1000, seq=128, hidden=256, heads=4, layers=4, ffn=1024):
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq, hidden)
        self.ln = nn.LayerNorm(hidden)
        self.layers = nn.ModuleList(EncoderLayer(hidden, heads, ffn) for _ in range(layers))
        self.register_buffer("positions", torch.arange(seq).unsqueeze(0), persistent=False)

    def forward(self, input_ids):
        x = self.ln(self.tok(input_ids) + self.pos(self.positions))
        for layer in self.layers:
            x = layer(x)
        return x


# ---- the model set ------------------------------------------------------------------------

def _tv(name):
    def make():
        import torchvision
        return getattr(torchvision.models, name)(weights=None)
    return make


# name -> (constructor, example input shape (batch 1), input dtype, input name, note)
# tiny_cnn is exported in PRESERVE mode so that its BatchNormalization stays a node
# (eval-mode export folds Conv+BN itself); Kiln's own Conv+BN folding gets exercised.
MODELS = {
    "tiny_cnn": (TinyCNN, (1, 3, 32, 32), torch.float32, "input", "2-conv CNN, 32x32 (fast tests)"),
    "tiny_mlp": (TinyMLP, (1, 64), torch.float32, "input", "2-layer MLP + softmax (fast tests)"),
    "tiny_bert": (lambda: BertEncoder(vocab=100, seq=16, hidden=32, heads=2, layers=1, ffn=64),
                  (1, 16), torch.int64, "input_ids", "1-layer BERT, hidden 32, seq 16 (fast tests)"),
    "resnet18": (_tv("resnet18"), (1, 3, 224, 224), torch.float32, "input", "torchvision resnet18"),
    "resnet50": (_tv("resnet50"), (1, 3, 224, 224), torch.float32, "input", "torchvision resnet50"),
    "mobilenet_v2": (_tv("mobilenet_v2"), (1, 3, 224, 224), torch.float32, "input",
                     "torchvision mobilenet_v2"),
    "efficientnet_b0": (_tv("efficientnet_b0"), (1, 3, 224, 224), torch.float32, "input",
                        "torchvision efficientnet_b0"),
    "bert": (BertEncoder, (1, 128), torch.int64, "input_ids",
             "BERT-style encoder: 4 layers, hidden 256, 4 heads, seq 128, vocab 1000, FFN 1024"),
}
DEFAULT_SET = list(MODELS)
PRESERVE_BN = {"tiny_cnn": torch.onnx.TrainingMode.PRESERVE}


def calibrate_batchnorm(model, shape):
    """Gives every BatchNorm random affine parameters and running statistics
    measured on random inputs, as training would. With the default statistics
    (mean 0, var 1) deep random nets such as mobilenet_v2 produce outputs near
    1e-10, which would make the numeric comparison with ONNX Runtime vacuous."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for bn in bns:
        nn.init.uniform_(bn.weight, 0.5, 1.5)
        nn.init.uniform_(bn.bias, -0.2, 0.2)
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average over the calibration batch
    model.train()
    with torch.no_grad():
        model(torch.randn((8,) + tuple(shape[1:])))
    for bn in bns:
        bn.momentum = 0.1
    model.eval()


def export_one(name, out_dir, force=False):
    """Exports MODELS[name] to out_dir/name.onnx; returns (path, seconds, skipped)."""
    make, shape, dtype, input_name, _ = MODELS[name]
    path = os.path.join(out_dir, name + ".onnx")
    if os.path.exists(path) and not force:
        return path, 0.0, True
    t0 = time.time()
    torch.manual_seed(SEED)
    model = make().eval()
    calibrate_batchnorm(model, shape)
    if dtype == torch.int64:
        vocab = model.tok.num_embeddings
        example = torch.randint(0, vocab, shape, dtype=torch.int64)
    else:
        example = torch.randn(shape, dtype=dtype)
    fd, tmp = tempfile.mkstemp(prefix="." + name + ".", suffix=".onnx.tmp", dir=out_dir)
    os.close(fd)
    try:
        with torch.no_grad():
            torch.onnx.export(
                model, (example,), tmp,
                input_names=[input_name], output_names=["output"],
                dynamic_axes={input_name: {0: "N"}, "output": {0: "N"}},
                opset_version=OPSET, do_constant_folding=True,
                training=PRESERVE_BN.get(name, torch.onnx.TrainingMode.EVAL))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path, time.time() - t0, False


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)),
                    help="output folder (default: this script's folder)")
    ap.add_argument("--only", default="", help="comma-separated model names (default: all)")
    ap.add_argument("--force", action="store_true", help="re-export models that already exist")
    ap.add_argument("--list", action="store_true", help="list the models and exit")
    args = ap.parse_args(argv)

    if args.list:
        for name, (_, shape, dtype, input_name, note) in MODELS.items():
            print(f"{name:16s} {input_name}{list(shape)} {str(dtype).replace('torch.', '')}  {note}")
        return 0
    names = [n for n in args.only.split(",") if n] or DEFAULT_SET
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"export.py: error: unknown model(s): {', '.join(unknown)} "
              f"(known: {', '.join(MODELS)})", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    for name in names:
        path, secs, skipped = export_one(name, args.out, args.force)
        if skipped:
            print(f"{name}: {path} exists, kept")
        else:
            size = os.path.getsize(path) / 1e6
            print(f"{name}: wrote {path} ({size:.1f} MB) in {secs:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
