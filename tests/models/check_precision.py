#!/usr/bin/env python3
"""check_precision.py — `kiln compile --precision fp16|bf16` against ONNX Runtime
in float32, and `--precision fp32` changing nothing.

    check_precision.py MODEL.onnx [--precision fp16,bf16] [--threads T] [--seed S]
                       [--min-cosine C] [--max-rel E] [--kiln PATH] [--keep DIR]
    check_precision.py --accumulation [options]

Per model: the artifact compiled with `--precision fp32` must be byte for byte
the one compiled without the option (fp32 is no change at all) and pass
check_model.py's criterion against ORT. Then, per 16-bit precision, the
artifact compiled with `--precision P` must keep the model's float32 inputs
and outputs (the ABI), and on the same random inputs as ORT (float32, graph
optimizations off) each float output must have
  cosine(kiln, ort) >= --min-cosine (default 0.999), over the flattened output,
unless the format itself cannot reach it: ORT running a copy of the model
whose weights, input and every float node output are rounded to the format
(a Cast there and back; "emulated") gives the cosine of 16-bit storage alone,
and where that is below --min-cosine, Kiln's may be at most 1e-3 below it
(bfloat16's 8 significant bits on resnet50 and mobilenet_v2). The line also
gives the worst relative error, max|kiln - ort| / max|ort|, and the compile
time; with --max-rel E that error must be at most E too.
Exits 0 only if every check passes.

--accumulation checks the promise of float32 accumulation on a model built
here: x [1, 8, 4096] -> ReduceSumSquare over 4096, MatMul(x * x, W = 0.25),
Softmax and LayerNormalization over 4096. Sums of 4096 positive terms reach
~1000, where float16's step (0.5) exceeds the terms; a 16-bit accumulator
loses most of them (errors of tens of percent), a float32 one does not: the
worst relative error must stay within --max-rel (default 2e-2 here).
"""
import argparse
import hashlib
import os
import re
import sys
import time

import numpy as np

from common import (TempDir, compare, default_kiln, describe_failure, make_inputs, model_inputs,
                    ort_reference, run, sanitizer_report)


def accumulation_model(path):
    import onnx
    from onnx import TensorProto, helper
    n = 4096
    f = TensorProto.FLOAT
    nodes = [helper.make_node("ReduceSumSquare", ["x"], ["sumsq"], name="sumsq", axes=[2], keepdims=1),
             helper.make_node("Mul", ["x", "x"], ["sq"], name="square"),
             helper.make_node("MatMul", ["sq", "w"], ["mm"], name="mm"),
             helper.make_node("Softmax", ["x"], ["sm"], name="softmax", axis=-1),
             helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["ln"], name="ln", axis=-1)]
    inits = [helper.make_tensor("w", f, [n, 4], [0.25] * (n * 4)),
             helper.make_tensor("gamma", f, [n], [1.0] * n), helper.make_tensor("beta", f, [n], [0.0] * n)]
    graph = helper.make_graph(nodes, "accumulation", [helper.make_tensor_value_info("x", f, [1, 8, n])],
                              [helper.make_tensor_value_info(o, f, None) for o in ("sumsq", "mm", "sm", "ln")],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def round_to(a, prec):
    """float32 array a rounded to float16 / bfloat16 (nearest even), as float32."""
    if prec == "fp16":
        return a.astype(np.float16).astype(np.float32)
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32)


def emulated_reference(model_path, feeds, prec, tmp):
    """ORT's outputs with 16-bit storage emulated: weights and float inputs
    rounded, every float node output cast to the format and back."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    low = TensorProto.FLOAT16 if prec == "fp16" else TensorProto.BFLOAT16
    m = onnx.load(model_path)
    for t in m.graph.initializer:
        a = numpy_helper.to_array(t)
        if a.dtype == np.float32:
            t.CopyFrom(numpy_helper.from_array(round_to(a, prec), t.name))
    m = onnx.shape_inference.infer_shapes(m)
    g = m.graph
    floats = {vi.name for vi in list(g.value_info) + list(g.output)
              if vi.type.tensor_type.elem_type == TensorProto.FLOAT}
    outputs = {o.name for o in g.output}
    nodes, rename = [], {}
    for n in g.node:
        n.input[:] = [rename.get(i, i) for i in n.input]
        nodes.append(n)
        for o in n.output:
            if o in floats and o not in outputs and n.op_type not in ("Constant", "Shape"):
                lo, back = f"{o}.emu_low", f"{o}.emu"
                nodes += [helper.make_node("Cast", [o], [lo], to=low),
                          helper.make_node("Cast", [lo], [back], to=TensorProto.FLOAT)]
                rename[o] = back
    del g.node[:]
    g.node.extend(nodes)
    path = os.path.join(tmp, f"emulated_{prec}.onnx")
    onnx.save(m, path)
    return ort_reference(path, {k: round_to(v, prec) if v.dtype == np.float32 else v for k, v in feeds.items()})


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def cosine(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(np.dot(a, b) / (na * nb))


class Checker:
    def __init__(self, args, tmp):
        self.args, self.tmp = args, tmp
        self.name = os.path.basename(args.model)
        self.ok = True

    def fail(self, what):
        print(f"FAIL {self.name} {what}")
        self.ok = False

    def compile(self, tag, extra):
        out = os.path.join(self.tmp, f"{tag}.so")
        t0 = time.perf_counter()
        proc = run([self.args.kiln, "compile", self.args.model, "-o", out, *extra])
        secs = time.perf_counter() - t0
        if proc.returncode != 0 or sanitizer_report(proc.stderr):
            self.fail(f"{tag}: kiln compile: {describe_failure(proc)}")
            return None, secs
        return out, secs

    def run(self, tag, artifact, inputs):
        outdir = os.path.join(self.tmp, f"out_{tag}")
        os.makedirs(outdir, exist_ok=True)
        proc = run([self.args.kiln, "run", artifact, *inputs, "--output-dir", outdir,
                    "--threads", str(self.args.threads)])
        if proc.returncode != 0 or sanitizer_report(proc.stderr):
            self.fail(f"{tag}: kiln run: {describe_failure(proc)}")
            return None
        return outdir

    def outputs(self, tag, outdir, want):
        """(name, got, ref) per output, or None after a failure."""
        got = []
        for oname, ref in want.items():
            path = os.path.join(outdir, re.sub(r"[^A-Za-z0-9._-]", "_", oname) + ".npy")
            if not os.path.isfile(path):
                self.fail(f"{tag}: no output file {oname}.npy")
                return None
            arr = np.load(path)
            if arr.dtype != ref.dtype or arr.shape != ref.shape:
                self.fail(f"{tag}: output '{oname}' is {arr.dtype}{list(arr.shape)}, ORT's "
                          f"{ref.dtype}{list(ref.shape)}: the ABI changed")
                return None
            got.append((oname, arr, ref))
        return got


def main(argv=None):
    ap = argparse.ArgumentParser(description="kiln compile --precision vs ONNX Runtime in float32.")
    ap.add_argument("model", nargs="?")
    ap.add_argument("--accumulation", action="store_true", help="the float32 accumulation model (above)")
    ap.add_argument("--kiln", default=default_kiln())
    ap.add_argument("--precision", default="fp16,bf16", help="16-bit precisions to check (comma-separated)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-cosine", type=float, default=0.999)
    ap.add_argument("--max-rel", type=float, default=None, help="bound of the worst relative error")
    ap.add_argument("--keep", default=None, help="work in this folder and keep it")
    args = ap.parse_args(argv)
    if args.accumulation and args.max_rel is None:
        args.max_rel = 2e-2
    if not args.accumulation and (not args.model or not os.path.exists(args.model)):
        print(f"check_precision: {args.model}: no such model (run models/export.py)", file=sys.stderr)
        return 1
    with TempDir(args.keep) as tmp:
        if args.accumulation:
            args.model = accumulation_model(os.path.join(tmp, "accumulation.onnx"))
        c = Checker(args, tmp)
        feeds = make_inputs(model_inputs(args.model), 1, args.seed)
        want = ort_reference(args.model, feeds)
        inputs = []
        for iname, arr in feeds.items():
            path = os.path.join(tmp, f"in{len(inputs)}.npy")
            np.save(path, arr)
            inputs += ["--input", f"{iname}={path}"]

        default, secs0 = c.compile("default", [])
        fp32, secs32 = c.compile("fp32", ["--precision", "fp32"])
        if default and fp32:
            same = sha256(default) == sha256(fp32)
            print(f"{'PASS' if same else 'FAIL'} {c.name} fp32: artifact {'identical to' if same else 'differs from'} "
                  f"the default one (compiled in {secs32:.2f} s, default {secs0:.2f} s)")
            c.ok = c.ok and same
            outdir = c.run("fp32", fp32, inputs)
            for oname, got, ref in (c.outputs("fp32", outdir, want) or []) if outdir else []:
                passed, err, tol, why = compare(got, ref)
                print(f"{'PASS' if passed else 'FAIL'} {c.name} fp32 output '{oname}': max|kiln-ort| = {err:.3g}, "
                      f"tol = {tol:.3g}" + (f": {why}" if why else ""))
                c.ok = c.ok and passed

        for prec in [p for p in args.precision.split(",") if p]:
            art, secs = c.compile(prec, ["--precision", prec])
            if not art:
                continue
            outdir = c.run(prec, art, inputs)
            emulated = emulated_reference(args.model, feeds, prec, tmp)
            for oname, got, ref in (c.outputs(prec, outdir, want) or []) if outdir else []:
                if not np.issubdtype(ref.dtype, np.floating):
                    same = np.array_equal(got, ref)
                    print(f"{'PASS' if same else 'FAIL'} {c.name} {prec} output '{oname}' ({ref.dtype}): "
                          f"{'equal' if same else 'differs'}")
                    c.ok = c.ok and same
                    continue
                finite = bool(np.all(np.isfinite(got)))
                cos, emu = cosine(got, ref), cosine(emulated[oname], ref)
                bar = args.min_cosine if emu >= args.min_cosine else emu - 1e-3
                scale = float(np.max(np.abs(ref))) if ref.size else 0.0
                rel = float(np.max(np.abs(got.astype(np.float64) - ref))) / scale if scale > 0 else 0.0
                passed = finite and cos >= bar and (args.max_rel is None or rel <= args.max_rel)
                print(f"{'PASS' if passed else 'FAIL'} {c.name} {prec} output '{oname}' {list(ref.shape)}: "
                      f"cosine {cos:.6f} (min {bar:.6f}; emulated {emu:.6f}), worst relative error {rel:.3g} "
                      f"(max|kiln-ort| / max|ort|, max|ort| = {scale:.3g}"
                      + (f", max {args.max_rel}" if args.max_rel is not None else "") + f"), compiled in {secs:.2f} s"
                      + ("" if finite else ": non-finite values"))
                c.ok = c.ok and passed
        print(f"{c.name}: {'PASS' if c.ok else 'FAIL'}")
        return 0 if c.ok else 1


if __name__ == "__main__":
    sys.exit(main())
