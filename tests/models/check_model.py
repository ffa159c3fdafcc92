#!/usr/bin/env python3
"""check_model.py — compile an ONNX model with Kiln, run it, and compare with
ONNX Runtime on the same random inputs.

    check_model.py MODEL.onnx [--max-batch B] [--batch b[,b...]] [--threads T[,T...]]
                   [--kiln PATH] [--seed S] [--target T] [--keep DIR] [--shared-kernels]

Steps: random inputs (fixed seed; token ids within the model's vocabulary) ->
reference outputs from onnxruntime (CPUExecutionProvider, all graph
optimizations disabled, so ORT evaluates the graph as written) ->
`kiln compile MODEL -o TMP/model.so [--max-batch B]` -> `kiln run TMP/model.so
--input NAME=FILE.npy ... --output-dir DIR --threads T` for every batch and
thread count -> compare each output:  max|kiln - ort| <= 1e-4 * max(1, max|ort|).
One artifact serves every batch (that is the dynamic-batch test when a batch
> 1 is asked for). Prints one line per run; exits 0 only if every run passes.
--shared-kernels: the model repeats a layer, so `kiln compile -v` must report
fewer distinct kernels than kernels, and the artifact must define exactly
that many kernel functions (steps of equal kernels share one); the numeric
comparison then checks the shared code under each step's own arguments.
"""
import argparse
import os
import re
import sys
import time

import numpy as np

from common import (TempDir, compare, default_kiln, describe_failure, make_inputs,
                    model_inputs, ort_reference, run, sanitizer_report)


def int_list(text):
    return [int(x) for x in text.split(",") if x]


def check_shared_kernels(log, artifact):
    """None when -v's `K kernels (D distinct` has D < K and the artifact
    defines D kernel functions; else what is wrong."""
    m = re.search(r"(\d+) kernels \((\d+) distinct", log)
    if not m:
        return f"no 'K kernels (D distinct' in kiln compile -v's output: {log.strip()[-200:]!r}"
    kernels, distinct = int(m.group(1)), int(m.group(2))
    if distinct >= kernels:
        return f"{distinct} distinct of {kernels} kernels: nothing shared"
    nm = run(["nm", artifact])
    if nm.returncode != 0:
        return f"nm {artifact}: {describe_failure(nm)}"
    defined = {line.split()[-1] for line in nm.stdout.splitlines()
               if re.fullmatch(r"[0-9a-f]+ [tT] model_k\d+", line.strip())}
    if len(defined) != distinct:
        return f"-v says {distinct} distinct kernels, the artifact defines {len(defined)} kernel functions"
    print(f"{kernels} kernels, {distinct} functions")
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description="Compare Kiln with ONNX Runtime on one model.")
    ap.add_argument("model")
    ap.add_argument("--kiln", default=default_kiln(), help="kiln binary (default: $KILN or build/kiln)")
    ap.add_argument("--max-batch", type=int, default=None,
                    help="passed to kiln compile (default: not passed, kiln's default)")
    ap.add_argument("--batch", type=int_list, default=[1], help="batch sizes to run (default 1)")
    ap.add_argument("--threads", type=int_list, default=[1], help="thread counts (default 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target", default=None, help="passed to kiln compile --target")
    ap.add_argument("--keep", default=None, help="work in this folder and keep it")
    ap.add_argument("--shared-kernels", action="store_true",
                    help="require kernels equal up to renaming to share one function")
    args = ap.parse_args(argv)

    name = os.path.basename(args.model)
    if not os.path.exists(args.model):
        print(f"check_model: {args.model}: no such model (run models/export.py)", file=sys.stderr)
        return 1
    if not os.access(args.kiln, os.X_OK):
        print(f"check_model: {args.kiln}: no kiln binary (build first)", file=sys.stderr)
        return 1
    specs = model_inputs(args.model)
    if max(args.batch) > 1 and not any(s.has_batch() for s in specs):
        print(f"check_model: {name}: batch {max(args.batch)} asked for, but no input has a "
              "symbolic batch dim", file=sys.stderr)
        return 1

    ok = True
    with TempDir(args.keep) as tmp:
        artifact = os.path.join(tmp, "model.so")
        cmd = [args.kiln, "compile", args.model, "-o", artifact]
        if args.max_batch is not None:
            cmd += ["--max-batch", str(args.max_batch)]
        if args.target:
            cmd += ["--target", args.target]
        if args.shared_kernels:
            cmd += ["-v"]
        t0 = time.perf_counter()
        proc = run(cmd)
        compile_s = time.perf_counter() - t0
        if proc.returncode != 0 or sanitizer_report(proc.stderr):
            print(f"FAIL {name}: kiln compile: {describe_failure(proc)}")
            return 1
        for f in (artifact, os.path.join(tmp, "model.h")):
            if not os.path.isfile(f):
                print(f"FAIL {name}: kiln compile succeeded but wrote no {os.path.basename(f)}")
                return 1
        print(f"{name}: compiled in {compile_s:.2f} s "
              f"({os.path.getsize(artifact) / 1e6:.1f} MB artifact)")
        if args.shared_kernels:
            why = check_shared_kernels(proc.stderr, artifact)
            print(f"{'FAIL' if why else 'PASS'} {name}: shared kernels: {why or 'as reported'}")
            ok = not why

        for batch in args.batch:
            feeds = make_inputs(specs, batch, args.seed)
            want = ort_reference(args.model, feeds)
            inputs = []
            for iname, arr in feeds.items():
                path = os.path.join(tmp, f"in{len(inputs)}_b{batch}.npy")
                np.save(path, arr)
                inputs += ["--input", f"{iname}={path}"]
            for threads in args.threads:
                outdir = os.path.join(tmp, f"out_b{batch}_t{threads}")
                os.makedirs(outdir, exist_ok=True)
                proc = run([args.kiln, "run", artifact, *inputs, "--output-dir", outdir,
                            "--threads", str(threads)])
                label = f"{name} batch {batch} threads {threads}"
                if proc.returncode != 0 or sanitizer_report(proc.stderr):
                    print(f"FAIL {label}: kiln run: {describe_failure(proc)}")
                    ok = False
                    continue
                for oname, ref in want.items():
                    # kiln run names files after outputs, [^A-Za-z0-9._-] -> '_'
                    path = os.path.join(outdir, re.sub(r"[^A-Za-z0-9._-]", "_", oname) + ".npy")
                    if not os.path.isfile(path):
                        print(f"FAIL {label}: no output file {oname}.npy")
                        ok = False
                        continue
                    passed, err, tol, why = compare(np.load(path), ref)
                    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
                    verdict = "PASS" if passed else "FAIL"
                    print(f"{verdict} {label} output '{oname}' {list(ref.shape)}: "
                          f"max|kiln-ort| = {err:.3g}, tol = {tol:.3g} (max|ort| = {scale:.3g})"
                          + (f": {why}" if why else ""))
                    ok = ok and passed
    print(f"{name}: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
