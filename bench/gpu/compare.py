"""compare.py — checks one Kiln artifact against ONNX Runtime, and times it.

    python3 bench/gpu/compare.py ART.so MODEL.onnx --precision fp32|fp16|bf16
                                 [--batch 1] [--seed 0] [--bench N --warmup W] [--no-ref]

The artifact (a GPU one or any other: the ABI is the same, host pointers in
and out) is loaded through the kiln package (bench/kiln_artifact.py) and run on the seeded random
inputs of the model tests (tests/models/common.py); ONNX Runtime on the CPU,
fp32, optimizations off, computes the reference from the same values. Where
the artifact takes a narrower float type than the model, the input is rounded
to it first and the reference sees the rounded values, so only Kiln's own
arithmetic is measured.

Pass criteria, over every output:
  fp32       max|kiln - ort| <= 1e-3 * max(1, max|ort|)
  fp16/bf16  cosine(kiln, ort) >= 0.999; also reported: the worst relative
             error max|kiln - ort| / max(|ort|, 1e-3 * max(1, max|ort|)) (the
             floor keeps elements near zero from dominating it)
A non-finite value where ORT has a finite one fails either way.

--bench N: after the check, N calls timed one by one (wall clock, after W
untimed ones); kiln_ms is their median. For a GPU artifact that includes the
host<->device copies the ABI implies. --no-ref skips ORT (timing only).

Output: one JSON line. Exit status 0 on a pass, 1 on a failure or an error.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "bench"))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
import kiln_artifact  # noqa: E402
from kiln import dtypes  # noqa: E402  (kiln_artifact put python/ on sys.path)
from common import make_inputs, model_inputs, ort_reference  # noqa: E402

FP32_RTOL = 1e-3
MIN_COSINE = 0.999


def to_artifact(a, t):
    """An input buffer for the artifact's tensor `t` (a kiln.Tensor) and the
    value the reference must see (the same numbers, in the model's dtype).
    bfloat16 and the other narrow floats round as the kiln package does."""
    if dtypes.is_converted(t.type):
        buf = dtypes.encode(t.type, np.ascontiguousarray(a, dtype=np.float32))
        return buf, dtypes.decode(t.type, buf).astype(a.dtype)
    if a.dtype == t.storage:
        return a, a
    if np.issubdtype(a.dtype, np.floating) and np.issubdtype(t.storage, np.floating):
        narrow = a.astype(t.storage)
        return narrow, narrow.astype(a.dtype)
    raise ValueError(f"artifact wants {t.type}, the model's input is {a.dtype}")


def from_artifact(a, t):
    return dtypes.decode(t.type, a)


def check(got, want, precision):
    """Metrics of one output, and whether it passes."""
    g = got.astype(np.float64).ravel()
    w = want.astype(np.float64).ravel()
    m = {"shape": list(want.shape)}
    if got.shape != want.shape:
        return dict(m, ok=False, why=f"shape {list(got.shape)}, expected {list(want.shape)}")
    if not np.all(np.isfinite(g) | ~np.isfinite(w)):
        return dict(m, ok=False, why="non-finite values where ONNX Runtime has finite ones")
    fin = np.isfinite(w)
    g, w = g[fin], w[fin]
    scale = max(1.0, float(np.max(np.abs(w)))) if w.size else 1.0
    diff = np.abs(g - w)
    err = float(diff.max()) if w.size else 0.0
    norm = float(np.linalg.norm(g) * np.linalg.norm(w))
    cosine = float(g @ w / norm) if norm > 0 else (1.0 if err == 0 else 0.0)
    rel = float(np.max(diff / np.maximum(np.abs(w), 1e-3 * scale))) if w.size else 0.0
    tol = FP32_RTOL * scale
    ok = err <= tol if precision == "fp32" else cosine >= MIN_COSINE
    return dict(m, ok=bool(ok), max_abs_err=err, tol=tol, max_ref=scale, cosine=cosine, max_rel_err=rel)


def run(args):
    row = {"artifact": args.artifact, "model": os.path.basename(args.model).removesuffix(".onnx"),
           "precision": args.precision, "batch": args.batch}
    art = kiln_artifact.Artifact(args.artifact)
    row["target"] = art.target
    feeds = make_inputs(model_inputs(args.model), args.batch, args.seed)
    by_name = {t.name: (t, i) for i, t in enumerate(art.inputs)}
    missing = [n for n in feeds if n not in by_name]
    if missing or len(feeds) != len(art.inputs):
        raise ValueError(f"inputs differ: model {list(feeds)}, artifact {[t.name for t in art.inputs]}")
    arrays, ref_feeds = [None] * len(art.inputs), {}
    for name, a in feeds.items():
        t, i = by_name[name]
        arrays[i], ref_feeds[name] = to_artifact(a, t)

    call, outs = art.prepare(*arrays)
    call()
    if not args.no_ref:
        ref = ort_reference(args.model, ref_feeds)
        results = []
        for i, t in enumerate(art.outputs):
            if t.name not in ref:
                raise ValueError(f"artifact output '{t.name}' is not an output of the model")
            r = check(from_artifact(outs[i], t), ref[t.name], args.precision)
            results.append(dict(r, output=t.name))
        row["pass"] = all(r["ok"] for r in results)
        for key, worst in (("max_abs_err", max), ("tol", max), ("max_ref", max), ("cosine", min),
                           ("max_rel_err", max)):
            vals = [r[key] for r in results if key in r]
            if vals:
                row[key] = worst(vals)
        bad = [f"{r['output']}: {r.get('why') or 'over the threshold'}" for r in results if not r["ok"]]
        if bad:
            row["why"] = "; ".join(bad)
    if args.bench:
        for _ in range(args.warmup):
            call()
        times = []
        for _ in range(args.bench):
            t0 = time.perf_counter()
            call()
            times.append((time.perf_counter() - t0) * 1e3)
        times.sort()
        row.update(kiln_ms=times[len(times) // 2], kiln_min_ms=times[0], bench_runs=args.bench)
    return row


def main_row(argv=None):
    """Parses the arguments, checks and times; returns the result row."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("artifact")
    ap.add_argument("model")
    ap.add_argument("--precision", choices=["fp32", "fp16", "bf16"], required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bench", type=int, default=0, metavar="N", help="time N runs after the check")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--no-ref", action="store_true", help="skip ONNX Runtime (timing only)")
    args = ap.parse_args(argv)
    try:
        return run(args)
    except Exception as e:  # a load failure, a run status, a mismatch of signatures
        return {"artifact": args.artifact, "model": os.path.basename(args.model).removesuffix(".onnx"),
                "precision": args.precision, "batch": args.batch, "pass": False,
                "error": f"{type(e).__name__}: {e}"}


def main(argv=None):
    row = main_row(argv)
    print(json.dumps(row), flush=True)
    if "error" in row:
        return 1
    return 0 if row.get("pass", True) else 1


if __name__ == "__main__":
    sys.exit(main())
