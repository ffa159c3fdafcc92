"""kiln_time.py — times a Kiln artifact through `kiln run`, per call and per kernel.

    python3 bench/gpu/kiln_time.py ART.so MODEL.onnx --precision fp16 [--batch 1]
                                   [--bench 20] [--warmup 3] [--kiln build/kiln]

Writes the model tests' seeded random inputs (tests/models/common.py) at the
batch as .npy files, then runs `kiln run ART --bench N --warmup W --profile`
and parses two things (formats of tools/cmd_run.c and tools/run_profile.c):
  e2e_ms      the `latency: median X ms` line: whole calls through the ABI,
              host<->device copies of a GPU artifact included;
  kernels_ms  the profile's `total` line: the sum of the kernels' medians;
  top_kernel  the profile row with the largest median (for a GEMM model: the
              matrix product itself, without the casts around it).
When `--profile` fails (an artifact without per-kernel timing), it runs again
without it and reports e2e_ms alone. Without a kiln binary it times the calls
through kiln_artifact.py (bench/gpu/compare.py's --bench) instead.

Output: one JSON line with "method" saying which way it timed. Exit status 0
when a time was measured, else 1.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
from common import make_inputs, model_inputs  # noqa: E402

LATENCY = re.compile(r"^latency: median ([\d.]+) ms, p90 ([\d.]+) ms", re.M)
TOTAL = re.compile(r"^\s+total\s+([\d.]+)\s", re.M)
ROW = re.compile(r"^\s*(\d+)\s+(\S+)\s+([\d.]+)\s+[\d.]+%", re.M)


def parse(text):
    """The figures of `kiln run --bench [--profile]` output (absent keys: not printed)."""
    out = {}
    m = LATENCY.search(text)
    if m:
        out.update(e2e_ms=float(m.group(1)), e2e_p90_ms=float(m.group(2)))
    m = TOTAL.search(text)
    if m:
        out["kernels_ms"] = float(m.group(1))
    rows = [(float(ms), name) for _, name, ms in ROW.findall(text)]
    if rows:
        ms, name = max(rows)
        out.update(top_kernel=name, top_kernel_ms=ms, n_kernels=len(rows))
    return out


def time_with_cli(args, tmp):
    """Runs kiln run (with --profile, then without); returns (row, log text)."""
    cmd = [args.kiln, "run", args.artifact, "--output-dir", os.path.join(tmp, "out"),
           "--bench", str(args.bench), "--warmup", str(args.warmup)]
    for i, (name, a) in enumerate(make_inputs(model_inputs(args.model), args.batch, args.seed).items()):
        path = os.path.join(tmp, f"input{i}.npy")
        np.save(path, a)
        cmd += ["--input", f"{name}={path}"]
    log = ""
    # --peak: skip the CPU FMA measurement, meaningless for GPU kernels.
    for extra, method in ((["--profile", "--peak", "1000"], "kiln run --profile"), ([], "kiln run")):
        proc = subprocess.run(cmd + extra, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        log += f"$ {' '.join(cmd + extra)}\n{proc.stdout}"
        row = parse(proc.stdout)
        if proc.returncode == 0 and "e2e_ms" in row:
            return dict(row, method=method), log
    return {"error": f"kiln run failed: {proc.stdout.strip()[-500:]}"}, log


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("artifact")
    ap.add_argument("model")
    ap.add_argument("--precision", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bench", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--kiln", default=os.environ.get("KILN") or os.path.join(REPO, "build", "kiln"))
    ap.add_argument("--log", help="append kiln run's output to this file")
    args = ap.parse_args(argv)
    row = {"peer": "kiln", "model": os.path.basename(args.model).removesuffix(".onnx"),
           "precision": args.precision, "batch": args.batch, "bench_runs": args.bench}
    if os.access(args.kiln, os.X_OK):
        with tempfile.TemporaryDirectory(prefix="kiln-time.") as tmp:
            got, log = time_with_cli(args, tmp)
        if args.log:
            with open(args.log, "a") as f:
                f.write(log)
    else:
        import compare  # same folder: ctypes timing through kiln_artifact.py
        got = compare.main_row([args.artifact, args.model, "--precision", args.precision, "--no-ref",
                                "--batch", str(args.batch), "--seed", str(args.seed),
                                "--bench", str(args.bench), "--warmup", str(args.warmup)])
        got = {"e2e_ms": got["kiln_ms"], "method": "ctypes"} if "kiln_ms" in got \
            else {"error": got.get("error", "no time")}
    row.update(got)
    print(json.dumps(row), flush=True)
    return 0 if "e2e_ms" in row else 1


if __name__ == "__main__":
    sys.exit(main())
