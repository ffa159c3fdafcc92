#!/usr/bin/env python3
"""compile_time.py — exports the two models issue 46 gives compile-time targets for
that are not in the model set or the zoo, and times `kiln compile` on one core.

    /usr/bin/python3 bench/compile_time.py export [--out build/compile-time]
    python3 bench/compile_time.py time [--out build/compile-time] [--kiln build/kiln] [MODEL.onnx ...]

export (torch's interpreter): bert_base, models/export.py's BertEncoder at BERT-base
size (vocab 30522, hidden 768, 12 heads, 12 layers, FFN 3072, seq 128; 434 MB), and
ghostnet, a GhostNet 1.0 written here (ghost modules: a 1x1 conv and a cheap
depthwise conv concatenated; squeeze-excite; depthwise stride-2 blocks; 21 MB).
Random weights, models/export.py's conventions (seed, opset 17, BatchNorm
statistics, symbolic batch N, atomic writes).
time: for each model (default: those two, then models/'s resnet50,
mobilenet_v2, efficientnet_b0 and bert), `taskset -c 0 kiln compile M -o TMP -v`
and the CPU seconds kiln reports ("s cpu") with the kernel counts. One core, as the
issue measures; the figure is the process's CPU time, so another job on the machine
inflates it less than the wall time.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def ghostnet_class(nn, torch):
    def ghost(inp, oup, relu):
        init = (oup + 1) // 2

        class Ghost(nn.Module):
            def __init__(self):
                super().__init__()
                act = nn.ReLU() if relu else nn.Identity()
                self.primary = nn.Sequential(nn.Conv2d(inp, init, 1, bias=False), nn.BatchNorm2d(init), act)
                act2 = nn.ReLU() if relu else nn.Identity()
                self.cheap = nn.Sequential(nn.Conv2d(init, init, 3, 1, 1, groups=init, bias=False),
                                           nn.BatchNorm2d(init), act2)

            def forward(self, x):
                a = self.primary(x)
                return torch.cat([a, self.cheap(a)], 1)[:, :oup]
        return Ghost()

    class SqueezeExcite(nn.Module):
        def __init__(self, c):
            super().__init__()
            r = max(4, c // 4)
            self.f = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, r, 1), nn.ReLU(), nn.Conv2d(r, c, 1),
                                   nn.Hardsigmoid())

        def forward(self, x):
            return x * self.f(x)

    class Bottleneck(nn.Module):
        def __init__(self, inp, mid, out, k, stride, se):
            super().__init__()
            self.expand = ghost(inp, mid, True)
            self.dw = (nn.Sequential(nn.Conv2d(mid, mid, k, stride, k // 2, groups=mid, bias=False),
                                     nn.BatchNorm2d(mid)) if stride > 1 else nn.Identity())
            self.se = SqueezeExcite(mid) if se else nn.Identity()
            self.project = ghost(mid, out, False)
            self.shortcut = nn.Identity() if inp == out and stride == 1 else nn.Sequential(
                nn.Conv2d(inp, inp, k, stride, k // 2, groups=inp, bias=False), nn.BatchNorm2d(inp),
                nn.Conv2d(inp, out, 1, bias=False), nn.BatchNorm2d(out))

        def forward(self, x):
            return self.project(self.se(self.dw(self.expand(x)))) + self.shortcut(x)

    # (kernel, expanded, out, squeeze-excite, stride) per block: GhostNet 1.0
    blocks = [(3, 16, 16, 0, 1), (3, 48, 24, 0, 2), (3, 72, 24, 0, 1), (5, 72, 40, 1, 2), (5, 120, 40, 1, 1),
              (3, 240, 80, 0, 2), (3, 200, 80, 0, 1), (3, 184, 80, 0, 1), (3, 184, 80, 0, 1), (3, 480, 112, 1, 1),
              (3, 672, 112, 1, 1), (5, 672, 160, 1, 2), (5, 960, 160, 0, 1), (5, 960, 160, 1, 1),
              (5, 960, 160, 0, 1), (5, 960, 160, 1, 1)]

    class GhostNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
            layers, c = [], 16
            for k, mid, out, se, stride in blocks:
                layers.append(Bottleneck(c, mid, out, k, stride, se))
                c = out
            self.blocks = nn.Sequential(*layers)
            self.head = nn.Sequential(nn.Conv2d(c, 960, 1, bias=False), nn.BatchNorm2d(960), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Conv2d(960, 1280, 1), nn.ReLU(), nn.Flatten(),
                                      nn.Linear(1280, 1000))

        def forward(self, x):
            return self.head(self.blocks(self.stem(x)))
    return GhostNet


def export(out):
    sys.path.insert(0, os.path.join(REPO, "models"))
    import export as E  # models/export.py: the set's conventions
    torch, nn = E.torch, E.nn
    E.MODELS["bert_base"] = (
        lambda: E.BertEncoder(vocab=30522, seq=128, hidden=768, heads=12, layers=12, ffn=3072),
        (1, 128), torch.int64, "input_ids", "BERT-base size encoder")
    E.MODELS["ghostnet"] = (ghostnet_class(nn, torch), (1, 3, 224, 224), torch.float32, "input", "GhostNet 1.0")
    os.makedirs(out, exist_ok=True)
    for name in ("bert_base", "ghostnet"):
        path, seconds, skipped = E.export_one(name, out)
        print(f"{path}: {'kept' if skipped else f'exported in {seconds:.1f} s'}")
    return 0


def time_compiles(out, kiln, models):
    if not models:
        models = [os.path.join(out, m + ".onnx") for m in ("bert_base", "ghostnet")]
        models += [os.path.join(REPO, "models", m + ".onnx")
                   for m in ("resnet50", "mobilenet_v2", "efficientnet_b0", "bert")]
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        for m in models:
            proc = subprocess.run(["taskset", "-c", "0", kiln, "compile", m, "-o", os.path.join(tmp, "m.so"), "-v"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            found = re.search(r": (\d+ kernels \(.*?\)), .*?([\d.]+) s cpu", proc.stderr)
            if proc.returncode != 0 or not found:
                print(f"{os.path.basename(m)}: kiln compile failed: {proc.stderr.strip()[-300:]}")
                status = 1
                continue
            print(f"{os.path.basename(m)}: {found.group(2)} s cpu, {found.group(1)}")
    return status


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["export", "time"])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--out", default=os.path.join(REPO, "build", "compile-time"))
    ap.add_argument("--kiln", default=os.path.join(REPO, "build", "kiln"))
    args = ap.parse_intermixed_args()
    if args.what == "export":
        return export(args.out)
    return time_compiles(args.out, args.kiln, args.models)


if __name__ == "__main__":
    sys.exit(main())
