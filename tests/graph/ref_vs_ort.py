#!/usr/bin/env python3
"""ref_vs_ort.py — cross-checks Kiln's reference interpreter (ir/ref/ref_eval*.c,
the oracle of the compiled-kernel tests) against ONNX Runtime.

Builds many single-op ONNX models with random shapes and attributes (conv and
pool geometry with auto_pad / ceil_mode / dilations, reductions, slicing,
padding modes, broadcasting ...), runs each with ONNX Runtime and with
`ref_run` (plain, and after the graph pass pipeline), and compares.

    ref_vs_ort.py --ref-run build/tests/graph/ref_run [--cases 400] [--seed 1]

Exit status 0 when every case agrees. Python is only the oracle here."""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

F32 = TensorProto.FLOAT
I64 = TensorProto.INT64


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


class Case:
    """One model: nodes, runtime inputs (name -> array), initializers."""

    def __init__(self, name, opset=17):
        self.name, self.opset = name, opset
        self.nodes, self.inputs, self.inits, self.outputs = [], {}, [], []

    def inp(self, name, arr):
        self.inputs[name] = arr
        return name

    def init(self, name, arr):
        self.inits.append(const(name, arr))
        return name

    def node(self, op, ins, outs, **attrs):
        self.nodes.append(helper.make_node(op, ins, outs, name=f"{op}_{len(self.nodes)}", **attrs))

    def model(self):
        vi = lambda n, a: helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        g = helper.make_graph(self.nodes, self.name, [vi(n, a) for n, a in self.inputs.items()],
                              [helper.make_empty_tensor_value_info(o) for o in self.outputs],
                              self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)])
        m.ir_version = 8
        return m


def rnd(rng, *shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


# ---- case generators: each returns a Case (or None to skip) ----

def conv_case(rng):
    c = Case("conv")
    ns = int(rng.choice([1, 2, 2, 2, 3]))
    group = int(rng.choice([1, 1, 2]))
    cin, m = 2 * int(rng.integers(1, 3)), 2 * int(rng.integers(1, 3))
    spatial = [int(rng.integers(3, 9)) for _ in range(ns)]
    kernel = [int(rng.integers(1, 4)) for _ in range(ns)]
    x = c.inp("x", rnd(rng, 2, cin, *spatial))
    w = c.init("w", rnd(rng, m, cin // group, *kernel))
    ins = [x, w] + ([c.init("b", rnd(rng, m))] if rng.random() < 0.5 else [])
    attrs = dict(group=group, strides=[int(rng.integers(1, 4)) for _ in range(ns)],
                 dilations=[int(rng.integers(1, 3)) for _ in range(ns)])
    auto_pad = str(rng.choice(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    if auto_pad == "NOTSET":
        attrs["pads"] = [int(rng.integers(0, 3)) for _ in range(2 * ns)]
    else:
        attrs["auto_pad"] = auto_pad
    c.node("Conv", ins, ["y"], **attrs)
    c.outputs = ["y"]
    return c


def pool_case(rng):
    op = str(rng.choice(["MaxPool", "AveragePool"]))
    c = Case(op, opset=int(rng.choice([17, 19])) if op == "AveragePool" else 17)
    ns = int(rng.choice([1, 2, 2, 3]))
    spatial = [int(rng.integers(3, 10)) for _ in range(ns)]
    kernel = [int(rng.integers(1, 4)) for _ in range(ns)]
    x = c.inp("x", rnd(rng, 2, 3, *spatial))
    attrs = dict(kernel_shape=kernel, strides=[int(rng.integers(1, 4)) for _ in range(ns)],
                 ceil_mode=int(rng.integers(0, 2)))
    auto_pad = str(rng.choice(["NOTSET", "NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    if auto_pad == "NOTSET":
        attrs["pads"] = [int(rng.integers(0, k)) for k in kernel] * 2
    else:
        attrs["auto_pad"] = auto_pad
    if auto_pad.startswith("SAME"):
        # stride > kernel makes the SAME pad negative: ONNX Runtime's pools
        # reject or shift it depending on the code path; Kiln clamps it at 0
        # like TensorFlow and ONNX Runtime's Conv (checked in conv_case).
        attrs["strides"] = [min(s, k) for s, k in zip(attrs["strides"], kernel)]
    outs = ["y"]
    # ONNX Runtime sizes SAME_* pools with dilations from the undilated kernel
    # (the ONNX spec says ceil(in / stride), as Kiln does): not compared.
    if (op == "MaxPool" or c.opset >= 19) and auto_pad.startswith("SAME") is False:
        if rng.random() < 0.5:
            attrs["dilations"] = [int(rng.integers(1, 3)) for _ in range(ns)]
    if op == "AveragePool":
        attrs["count_include_pad"] = int(rng.integers(0, 2))
    elif rng.random() < 0.3 and "dilations" not in attrs:
        outs.append("idx")
    c.node(op, [x], outs, **attrs)
    c.outputs = outs
    return c


def global_pool_case(rng):
    op = str(rng.choice(["GlobalAveragePool", "GlobalMaxPool"]))
    c = Case(op)
    c.node(op, [c.inp("x", rnd(rng, 2, 3, *[int(rng.integers(1, 6)) for _ in range(int(rng.integers(1, 4)))]))], ["y"])
    c.outputs = ["y"]
    return c


def gemm_case(rng):
    c = Case("gemm")
    m, k, n = (int(rng.integers(1, 6)) for _ in range(3))
    ta, tb = int(rng.integers(0, 2)), int(rng.integers(0, 2))
    a = c.inp("a", rnd(rng, *((k, m) if ta else (m, k))))
    b = c.init("b", rnd(rng, *((n, k) if tb else (k, n))))
    ins = [a, b]
    cshape = [(n,), (m, 1), (), (m, n), None][int(rng.integers(0, 5))]
    if cshape is not None:
        ins.append(c.init("c", rnd(rng, *cshape)))
    c.node("Gemm", ins, ["y"], transA=ta, transB=tb, alpha=float(rng.choice([1.0, 0.5, 2.0])),
           beta=float(rng.choice([1.0, 0.25])))
    c.outputs = ["y"]
    return c


def matmul_case(rng):
    c = Case("matmul")
    k = int(rng.integers(1, 5))
    shapes = [((2, 3, k), (k, 4)), ((k,), (2, k, 3)), ((3, 1, 2, k), (4, k, 2)), ((2, k), (k,)), ((k,), (k,))]
    sa, sb = shapes[int(rng.integers(0, len(shapes)))]
    c.node("MatMul", [c.inp("a", rnd(rng, *sa)), c.init("b", rnd(rng, *sb))], ["y"])
    c.outputs = ["y"]
    return c


def softmax_norm_case(rng):
    kind = str(rng.choice(["Softmax", "LogSoftmax", "LayerNormalization", "BatchNormalization"]))
    c = Case(kind)
    shape = [int(rng.integers(1, 5)) for _ in range(int(rng.integers(2, 5)))]
    x = c.inp("x", rnd(rng, *shape, lo=-3, hi=3))
    if kind in ("Softmax", "LogSoftmax"):
        c.opset = int(rng.choice([11, 13, 17]))
        c.node(kind, [x], ["y"], axis=int(rng.integers(-len(shape), len(shape))))
    elif kind == "LayerNormalization":
        axis = int(rng.integers(-len(shape), len(shape)))
        norm = shape[axis % len(shape):]
        ins = [x, c.init("s", rnd(rng, *norm))] + ([c.init("b", rnd(rng, *norm))] if rng.random() < 0.5 else [])
        c.node(kind, ins, ["y"], axis=axis, epsilon=float(rng.choice([1e-5, 1e-3])))
    else:
        ch = shape[1]
        c.node(kind, [x, c.init("s", rnd(rng, ch)), c.init("b", rnd(rng, ch)), c.init("m", rnd(rng, ch)),
                      c.init("v", rnd(rng, ch, lo=0.5, hi=2))], ["y"], epsilon=1e-4)
    c.outputs = ["y"]
    return c


def reduce_case(rng):
    op = str(rng.choice(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"]))
    c = Case(op)
    shape = [int(rng.integers(1, 5)) for _ in range(int(rng.integers(1, 5)))]
    x = c.inp("x", rnd(rng, *shape))
    axes = sorted(set(int(a) for a in rng.integers(-len(shape), len(shape), size=int(rng.integers(0, 3)))))
    axes = list({a % len(shape): a for a in axes}.values())
    keep = int(rng.integers(0, 2))
    if op == "ReduceSum" or rng.random() < 0.5:
        c.opset = 18 if op != "ReduceSum" else 17
        c.node(op, [x] + ([c.init("axes", np.array(axes, np.int64))] if axes else []), ["y"], keepdims=keep)
    else:
        c.node(op, [x], ["y"], keepdims=keep, **({"axes": axes} if axes else {}))
    c.outputs = ["y"]
    return c


def movement_case(rng):
    kind = int(rng.integers(0, 12))
    c = Case("movement")
    shape = [int(rng.integers(1, 5)) for _ in range(int(rng.integers(1, 5)))]
    r = len(shape)
    x = c.inp("x", rnd(rng, *shape))
    if kind == 0:
        c.node("Transpose", [x], ["y"], **({"perm": [int(p) for p in rng.permutation(r)]} if rng.random() < 0.8 else {}))
    elif kind == 1:
        n = int(rng.integers(1, r + 1))
        axes = [int(a) for a in rng.permutation(r)[:n]]
        starts = [int(rng.integers(-6, 6)) for _ in range(n)]
        ends = [int(rng.choice([rng.integers(-6, 6), 2**63 - 1, -2**63])) for _ in range(n)]
        steps = [int(rng.choice([1, 2, -1, -2, 3])) for _ in range(n)]
        c.node("Slice", [x, c.init("st", np.array(starts, np.int64)), c.init("en", np.array(ends, np.int64)),
                         c.init("ax", np.array(axes, np.int64)), c.init("sp", np.array(steps, np.int64))], ["y"])
    elif kind == 2:
        axis = int(rng.integers(-r, r))
        d = shape[axis]
        idx = rng.integers(-d, d, size=[int(rng.integers(1, 3)) for _ in range(int(rng.integers(0, 3)))])
        c.node("Gather", [x, c.init("i", idx.astype(np.int64))], ["y"], axis=axis)
    elif kind == 3:
        mode = str(rng.choice(["constant", "reflect", "edge"]))
        pads = [int(rng.integers(0, 3)) for _ in range(2 * r)]
        if mode == "reflect":
            pads = [min(p, shape[i % r] - 1) for i, p in enumerate(pads)]
        elif mode == "constant" and rng.random() < 0.5:
            pads = [p - int(rng.integers(0, 2)) if shape[i % r] > 2 else p for i, p in enumerate(pads)]
        ins = [x, c.init("pads", np.array(pads, np.int64))]
        if mode == "constant":
            ins.append(c.init("cv", np.array(1.5, np.float32)))
        c.node("Pad", ins, ["y"], mode=mode)
    elif kind == 4:
        c.node("Tile", [x, c.init("r", np.array([int(rng.integers(1, 3)) for _ in range(r)], np.int64))], ["y"])
    elif kind == 5:
        target = [int(rng.choice([1, s])) if rng.random() < 0.5 else s for s in shape]
        target = [int(rng.integers(1, 3))] + [t if s == 1 and rng.random() < 0.5 else s for s, t in zip(shape, target)]
        target = [t if s != 1 else int(rng.integers(1, 4)) for s, t in zip([1] + shape, target)]
        c.node("Expand", [x, c.init("s", np.array(target, np.int64))], ["y"])
    elif kind == 6:
        axis = int(rng.integers(-r, r))
        other = list(shape)
        other[axis] = int(rng.integers(1, 4))
        c.node("Concat", [x, c.init("o", rnd(rng, *other)), x], ["y"], axis=axis)
    elif kind == 7:
        axis = int(rng.integers(-r, r))
        d = shape[axis]
        first = int(rng.integers(0, d + 1))
        c.node("Split", [x, c.init("sp", np.array([first, d - first], np.int64))], ["y", "z"], axis=axis)
        c.outputs = ["y", "z"]
        return c
    elif kind == 8:
        c.node("Flatten", [x], ["y"], axis=int(rng.integers(-r, r + 1)))
    elif kind == 9:
        ones = [i for i, s in enumerate(shape) if s == 1]
        c.node("Unsqueeze", [x, c.init("a", np.array([0, -1], np.int64))], ["u"])
        c.node("Squeeze", [ "u"] + ([c.init("b", np.array([0], np.int64))] if rng.random() < 0.5 or not ones else []), ["y"])
    elif kind == 10:
        total = int(np.prod(shape))
        c.node("Reshape", [x, c.init("s", np.array([0, -1] if r > 1 else [-1, 1], np.int64))], ["y"])
        del total
    else:
        c.node("Shape", [x], ["s"], start=int(rng.integers(-r, r)))
        c.node("Size", [x], ["n"])
        c.node("Cast", ["s"], ["sf"], to=F32)
        c.node("Cast", ["n"], ["nf"], to=F32)
        c.node("Unsqueeze", ["nf", c.init("a0", np.array([0], np.int64))], ["nf1"])
        c.node("Concat", ["sf", "nf1"], ["y"], axis=0)
    c.outputs = ["y"]
    return c


UNARY = ["Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Log", "Sqrt", "Reciprocal", "Neg", "Abs", "Floor", "Ceil",
         "Sin", "Cos", "LeakyRelu", "Elu", "HardSigmoid", "HardSwish", "Softplus", "Gelu", "Clip", "Identity"]
BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Equal", "Less", "Greater", "PRelu", "Where", "And",
          "Or", "Not"]


def elementwise_case(rng, only=None):
    c = Case("elementwise")
    shape = [int(rng.integers(1, 4)) for _ in range(int(rng.integers(1, 4)))]
    unary = only in UNARY if only else rng.random() < 0.5
    if unary:
        op = only or str(rng.choice(UNARY))
        lo, hi = (0.1, 4.0) if op in ("Log", "Sqrt", "Reciprocal") else (-3.0, 3.0)
        x = c.inp("x", rnd(rng, *shape, lo=lo, hi=hi))
        attrs, ins = {}, [x]
        if op == "Gelu":
            c.opset = 20
            attrs["approximate"] = str(rng.choice(["none", "tanh"]))
        if op in ("LeakyRelu", "Elu") and rng.random() < 0.5:
            attrs["alpha"] = 0.3
        if op == "Clip":
            ins += [c.init("lo", np.array(-0.5, np.float32)) if rng.random() < 0.7 else "",
                    c.init("hi", np.array(1.0, np.float32))]
        c.node(op, ins, ["y"], **attrs)
    else:
        op = only or str(rng.choice(BINARY))
        bshape = list(shape[int(rng.integers(0, len(shape))):])
        bshape = [1 if rng.random() < 0.3 else s for s in bshape]
        if op in ("And", "Or", "Not"):
            a = c.inp("a", rng.random(shape) < 0.5)
            c.node(op, [a] if op == "Not" else [a, c.init("b", rng.random(bshape) < 0.5)], ["y"])
        elif op == "Where":
            c.node(op, [c.init("cond", rng.random(bshape) < 0.5), c.inp("a", rnd(rng, *shape)),
                        c.init("b", rnd(rng, *bshape))], ["y"])
        elif op in ("Div", "Add", "Mul", "Sub", "Max", "Min") and rng.random() < 0.3:
            a = c.inp("a", rng.integers(-9, 10, size=shape).astype(np.int64))
            b = rng.integers(1, 5, size=bshape).astype(np.int64) * rng.choice([-1, 1], size=bshape)
            c.node(op, [a, c.init("b", b)], ["y"])
        elif op == "Pow":
            c.node(op, [c.inp("a", rnd(rng, *shape, lo=0.1, hi=3)), c.init("b", rnd(rng, *bshape, lo=-2, hi=2))], ["y"])
        else:
            c.node(op, [c.inp("a", rnd(rng, *shape)), c.init("b", rnd(rng, *bshape))], ["y"])
    c.outputs = ["y"]
    return c


def cast_range_case(rng):
    c = Case("cast")
    kind = int(rng.integers(0, 3))
    if kind == 0:
        to = int(rng.choice([I64, TensorProto.INT32, TensorProto.BOOL, TensorProto.UINT8]))
        x = c.inp("x", rnd(rng, 5, lo=-3, hi=9) if to != TensorProto.UINT8 else rnd(rng, 5, lo=0, hi=200))
        c.node("Cast", [x], ["y"], to=to)
    elif kind == 1:
        start, limit, delta = int(rng.integers(-5, 5)), int(rng.integers(-10, 10)), int(rng.choice([-3, -1, 1, 2]))
        x = c.inp("x", rnd(rng, 2))
        c.node("Range", [c.init("a", np.array(start, np.int64)), c.init("l", np.array(limit, np.int64)),
                         c.init("d", np.array(delta, np.int64))], ["r"])
        c.node("Cast", ["r"], ["rf"], to=F32)
        c.node("Concat", [x, "rf"], ["y"], axis=0)
    else:
        x = c.inp("x", rnd(rng, 2, 3))
        c.node("Shape", [x], ["s"])
        c.node("ConstantOfShape", ["s"], ["k"], value=helper.make_tensor("v", F32, [1], [2.5]))
        c.node("Add", [x, "k"], ["y"])
    c.outputs = ["y"]
    return c


GENERATORS = [conv_case, conv_case, pool_case, pool_case, pool_case, global_pool_case, gemm_case, matmul_case,
              softmax_norm_case, reduce_case, movement_case, movement_case, movement_case, elementwise_case,
              elementwise_case, cast_range_case]


def compare(name, got, want):
    if got.size != want.size:
        return f"{name}: {got.size} elements, ONNX Runtime has {want.size}"
    if want.dtype.kind == "f":
        bad = ~np.isclose(got, want.reshape(got.shape), rtol=1e-4, atol=1e-5, equal_nan=True)
    else:
        bad = got != want.reshape(got.shape)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        return f"{name}: element {i} is {got.flat[i]}, ONNX Runtime has {want.flat[i]}"
    return None


def run_case(case, ref_run, tmp):
    model = case.model()
    path = os.path.join(tmp, "m.onnx")
    onnx.save(model, path)
    try:
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        want = sess.run(case.outputs, case.inputs)
    except Exception as e:  # ORT rejects some random models: not our business
        return "skip", str(e).splitlines()[0][:100]
    for i, arr in enumerate(case.inputs.values()):
        np.ascontiguousarray(arr).tofile(os.path.join(tmp, f"in{i}.bin"))
    for passes in (False, True):
        for f in os.listdir(tmp):
            if f.startswith("out"):
                os.remove(os.path.join(tmp, f))
        cmd = [ref_run] + (["--passes"] if passes else []) + [path, "1", tmp]
        p = subprocess.run(cmd, capture_output=True, text=True)
        tag = "ref+passes" if passes else "ref"
        if p.returncode != 0 and "larger than the padded input" in p.stderr:
            return "skip", "Kiln rejects windows larger than the padded input"
        if p.returncode != 0:
            return "fail", f"{tag} failed: {p.stderr.strip()}"
        for i, w in enumerate(want):
            w = np.asarray(w)
            got = np.fromfile(os.path.join(tmp, f"out{i}.bin"), dtype=w.dtype)
            err = compare(f"{tag} output {i}", got, w)
            if err:
                return "fail", err
    return "ok", ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref-run", required=True)
    ap.add_argument("--cases", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    ort.set_default_logger_severity(3)
    counts = {"ok": 0, "skip": 0, "fail": 0}
    # Every elementwise op a few times, then random cases of every family.
    sweep = [op for op in UNARY + BINARY for _ in range(3)]
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(len(sweep) + args.cases):
            rng = np.random.default_rng(args.seed * 100003 + k)
            if k < len(sweep):
                case = elementwise_case(rng, sweep[k])
            else:
                case = GENERATORS[k % len(GENERATORS)](rng)
            status, msg = run_case(case, args.ref_run, tmp)
            counts[status] += 1
            if status == "fail":
                print(f"case {k} ({case.name}): {msg}")
                print(onnx.printer.to_text(case.model().graph))
    print(f"ref_vs_ort: {counts['ok']} agree, {counts['fail']} differ, {counts['skip']} skipped (rejected by "
          "ONNX Runtime, or a window larger than the padded input, which Kiln rejects)")
    return 1 if counts["fail"] or counts["ok"] < (len(sweep) + args.cases) // 2 else 0


if __name__ == "__main__":
    sys.exit(main())
