#!/usr/bin/env python3
"""edge_models.py — small models with the shapes of graph that trip compilers:
outputs that alias inputs, constants or each other; unusual but valid
attributes. Each case_ is written to DIR/NAME.onnx and then checked against
ONNX Runtime with check_model.py (same criterion as the real models); each
numpy_ case carries its inputs and numpy's outputs, for behaviour where ONNX
Runtime is no oracle (a NaN in ArgMax, MaxPool).

  edge_models.py --list            the case names
  edge_models.py --case NAME       build and check one case
  edge_models.py                   every case
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from common import compare, default_kiln, describe_failure, run
from onnx import TensorProto as T
from onnx import helper as h

HERE = os.path.dirname(os.path.abspath(__file__))


def vi(name, shape, dtype=T.FLOAT):
    """A typed value; shape None leaves the shape to inference (outputs)."""
    if shape is None:
        return h.make_value_info(name, h.make_tensor_type_proto(dtype, shape=None))
    return h.make_tensor_value_info(name, dtype, shape)


def const(name, array):
    return onnx.numpy_helper.from_array(np.asarray(array), name)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = h.make_graph(nodes, "edge", inputs, outputs, list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


rng = np.random.default_rng(0)


def case_output_aliases():
    """Outputs that are a view of another output, a constant, or the input itself."""
    nodes = [h.make_node("Relu", ["x"], ["y"]), h.make_node("Identity", ["y"], ["z"]),
             h.make_node("Identity", ["w"], ["c"])]
    return model(nodes, [vi("x", ["N", 4])], [vi("y", None), vi("z", None), vi("c", None), vi("x", ["N", 4])],
                 [const("w", np.arange(4, dtype=np.float32))]), ["--max-batch", "3", "--batch", "1,3"]


def case_softmax_axis0():
    nodes = [h.make_node("Softmax", ["x"], ["y"], axis=0)]
    return model(nodes, [vi("x", [5, 7])], [vi("y", None)]), []


def case_gemm_trans_a():
    nodes = [h.make_node("Gemm", ["x", "w", "b"], ["y"], transA=1, alpha=0.5, beta=2.0)]
    inits = [const("w", rng.standard_normal((6, 33)).astype(np.float32)),
             const("b", rng.standard_normal((33,)).astype(np.float32))]
    return model(nodes, [vi("x", [6, 5])], [vi("y", None)], inits), []


def case_matmul_vector():
    nodes = [h.make_node("MatMul", ["x", "w"], ["y"])]
    inits = [const("w", rng.standard_normal((20,)).astype(np.float32))]
    return model(nodes, [vi("x", ["N", 3, 20])], [vi("y", None)], inits), ["--max-batch", "2", "--batch", "2"]


def case_concat_constant():
    nodes = [h.make_node("Concat", ["x", "w"], ["c"], axis=1), h.make_node("Tanh", ["c"], ["y"])]
    inits = [const("w", rng.standard_normal((1, 3)).astype(np.float32))]
    return model(nodes, [vi("x", [1, 5])], [vi("y", None)], inits), []


def case_many_inputs_chain():
    """A chain of 80 Adds, each of another graph input: fusion must stop before a kernel takes
    more parameters than the runtime passes (64)."""
    nodes = [h.make_node("Add", ["x0" if i == 1 else f"s{i - 1}", f"x{i}"], [f"s{i}"]) for i in range(1, 81)]
    nodes.append(h.make_node("Relu", ["s80"], ["y"]))
    return model(nodes, [vi(f"x{i}", [2, 8]) for i in range(81)], [vi("y", None)]), []


def case_concat_many():
    """A Concat of 25 inputs, as densenet121's third dense block ends with (more than the
    16 inputs a kernel's op once took)."""
    nodes = [h.make_node("Mul", ["x", f"k{i}"], [f"p{i}"]) for i in range(24)]
    nodes += [h.make_node("Concat", ["x"] + [f"p{i}" for i in range(24)], ["c"], axis=1),
              h.make_node("Relu", ["c"], ["y"])]
    inits = [const(f"k{i}", np.float32(i - 11.5)) for i in range(24)]
    return model(nodes, [vi("x", ["N", 2, 3, 3])], [vi("y", None)], inits), \
        ["--max-batch", "3", "--batch", "1,3"]


def case_expand_batch():
    """torch's x.expand(N, -1, -1) (ViT's class token): the shape [N, -1, -1] goes
    through Where(Equal(shape, -1), ones, shape), whose Equal sees the batch size."""
    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             h.make_node("Unsqueeze", ["n", "zero1"], ["n1"]),
             h.make_node("Concat", ["n1", "rest"], ["want"], axis=0),
             h.make_node("Equal", ["want", "minus1"], ["m"]),
             h.make_node("Where", ["m", "ones", "want"], ["shape"]),
             h.make_node("Expand", ["token", "shape"], ["t"]),
             h.make_node("Concat", ["t", "x"], ["y"], axis=1)]
    inits = [const("zero", np.int64(0)), const("zero1", np.array([0], np.int64)),
             const("rest", np.array([-1, -1], np.int64)), const("minus1", np.int64(-1)),
             const("ones", np.ones(3, np.int64)),
             const("token", rng.standard_normal((1, 1, 8)).astype(np.float32))]
    return model(nodes, [vi("x", ["N", 4, 8])], [vi("y", None)], inits), \
        ["--max-batch", "3", "--batch", "1,3"]


def case_conv_grouped_dilated():
    """Grouped (not depthwise), dilated, asymmetric pads, SAME_UPPER in a second conv."""
    nodes = [h.make_node("Conv", ["x", "w1"], ["a"], group=2, dilations=[2, 1], pads=[1, 0, 2, 1], strides=[1, 2]),
             h.make_node("Conv", ["a", "w2"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2])]
    inits = [const("w1", rng.standard_normal((8, 3, 3, 3)).astype(np.float32)),
             const("w2", rng.standard_normal((5, 8, 2, 2)).astype(np.float32))]
    return model(nodes, [vi("x", ["N", 6, 11, 10])], [vi("y", None)], inits), ["--max-batch", "2", "--batch", "2"]


def case_deform_conv():
    """DeformConv (decomposed: bilinear gathers + a 1x1 grouped Conv): groups, offset groups, strides,
    dilations, asymmetric pads, mask and bias, dynamic batch; offsets scaled x3 so taps leave the image."""
    r = np.random.default_rng(19)
    nodes = [h.make_node("Mul", ["off", "three"], ["off3"]),
             h.make_node("DeformConv", ["x", "w", "off3", "b", "mask"], ["y"], group=2, offset_group=2,
                         kernel_shape=[3, 3], strides=[2, 1], dilations=[1, 2], pads=[1, 2, 2, 0])]
    inits = [const("w", r.standard_normal((6, 2, 3, 3)).astype(np.float32)),
             const("b", r.standard_normal((6,)).astype(np.float32)), const("three", np.array(3.0, np.float32))]
    return model(nodes, [vi("x", ["N", 4, 9, 8]), vi("off", ["N", 36, 5, 6]), vi("mask", ["N", 18, 5, 6])],
                 [vi("y", None)], inits, opset=22), ["--max-batch", "2", "--batch", "1,2", "--threads", "1,2"]


def case_deform_conv_plain():
    """DeformConv at opset 19 without mask or bias: one group, one offset group, 2x2 kernel."""
    nodes = [h.make_node("DeformConv", ["x", "w", "off"], ["y"], kernel_shape=[2, 2])]
    inits = [const("w", np.random.default_rng(22).standard_normal((3, 5, 2, 2)).astype(np.float32))]
    return model(nodes, [vi("x", [1, 5, 6, 7]), vi("off", [1, 8, 5, 6])], [vi("y", None)], inits, opset=19), []


def case_deform_conv_mixed_groups():
    """DeformConv with 2 groups and 3 offset groups (neither divides the other: 6 gather groups)."""
    nodes = [h.make_node("DeformConv", ["x", "w", "off", "", "mask"], ["y"], group=2, offset_group=3,
                         pads=[1, 1, 1, 1])]
    inits = [const("w", np.random.default_rng(23).standard_normal((4, 3, 3, 3)).astype(np.float32))]
    return model(nodes, [vi("x", [1, 6, 7, 7]), vi("off", [1, 54, 7, 7]), vi("mask", [1, 27, 7, 7])],
                 [vi("y", None)], inits, opset=22), []


def case_pool_ceil_mode():
    nodes = [h.make_node("MaxPool", ["x"], ["a"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
             h.make_node("AveragePool", ["a"], ["y"], kernel_shape=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0)]
    return model(nodes, [vi("x", [1, 4, 10, 9])], [vi("y", None)]), []


def case_size_of_batch():
    """Shape arithmetic that depends on the batch size, folded at compile time."""
    nodes = [h.make_node("Size", ["x"], ["s"]), h.make_node("Cast", ["s"], ["sf"], to=T.FLOAT),
             h.make_node("Add", ["x", "sf"], ["y"]), h.make_node("Shape", ["x"], ["shape"])]
    return model(nodes, [vi("x", ["N", 3])], [vi("y", None), vi("shape", None, T.INT64)]), \
        ["--max-batch", "3", "--batch", "1,3"]


def case_layernorm_all_outputs():
    nodes = [h.make_node("LayerNormalization", ["x", "g"], ["y", "mean", "isd"], axis=-1)]
    inits = [const("g", rng.standard_normal((19,)).astype(np.float32))]
    return model(nodes, [vi("x", [2, 5, 19])], [vi("y", None), vi("mean", None), vi("isd", None)], inits), []


def case_float8_casts():
    """float32 -> each float8 format -> float32, saturating (values past 448 / 240 / 57344
    clamp) and not (saturate=0: overflow gives NaN or inf), vectorized over 4x33 elements."""
    nodes, outs = [h.make_node("Mul", ["x", "s"], ["xs"])], []
    for k, to in enumerate([T.FLOAT8E4M3FN, T.FLOAT8E4M3FNUZ, T.FLOAT8E5M2, T.FLOAT8E5M2FNUZ]):
        for sat in (1, 0):
            src = "xs" if sat else "x"  # unscaled for saturate=0: no overflow to compare
            nodes += [h.make_node("Cast", [src], [f"q{k}_{sat}"], to=to, saturate=sat),
                      h.make_node("Cast", [f"q{k}_{sat}"], [f"y{k}_{sat}"], to=T.FLOAT)]
            outs.append(vi(f"y{k}_{sat}", None))
    return model(nodes, [vi("x", [4, 33])], outs, [const("s", np.array(300.0, np.float32))], opset=19), []


def case_nan_propagation():
    """NaN through Relu, Clip, Max / Min, HardSigmoid and a Conv's fused Clip epilogue: Sqrt makes
    NaN of the negative inputs, one conv weight is NaN; ONNX's max is numpy's maximum, NaN when
    either operand is. (MaxPool and ReduceMax are not here: ONNX Runtime's result for a NaN depends
    on where it sits in the window; tests/te/test_te_reduce.c checks those.)"""
    nodes = [h.make_node("Sqrt", ["x"], ["s"]), h.make_node("Relu", ["s"], ["relu"]),
             h.make_node("Clip", ["s", "lo", "hi"], ["clip"]), h.make_node("Max", ["s", "x"], ["max"]),
             h.make_node("Min", ["s", "lo"], ["min"]), h.make_node("HardSigmoid", ["s"], ["hsig"]),
             h.make_node("Conv", ["x", "w", "b"], ["conv"], pads=[1, 1, 1, 1]),
             h.make_node("Clip", ["conv", "lo", "hi"], ["conv_clip"])]
    w = rng.standard_normal((16, 3, 3, 3)).astype(np.float32)
    w[5, 1, 1, 1] = np.nan
    inits = [const("lo", np.array(0, np.float32)), const("hi", np.array(6, np.float32)), const("w", w),
             const("b", rng.standard_normal((16,)).astype(np.float32))]
    outs = [vi(o, None) for o in ["relu", "clip", "max", "min", "hsig", "conv_clip"]]
    return model(nodes, [vi("x", [1, 3, 12, 20])], outs, inits), []


def numpy_nan_reductions():
    """NaN through ArgMax / ArgMin (first and last index), Hardmax, ReduceMax and MaxPool against
    numpy (the ONNX reference's semantics: a NaN is the max and the min, its first index wins).
    Not against ONNX Runtime, whose pick depends on where the NaN sits (a NaN first in the row wins,
    a later one is skipped; Hardmax of such a row is all zeros)."""
    nodes = [h.make_node("ArgMax", ["x"], ["amax"], axis=1, keepdims=0),
             h.make_node("ArgMin", ["x"], ["amin"], axis=1, keepdims=0),
             h.make_node("ArgMax", ["x"], ["alast"], axis=1, keepdims=0, select_last_index=1),
             h.make_node("Hardmax", ["x"], ["hard"], axis=1),
             h.make_node("ReduceMax", ["x"], ["rmax"], axes=[1], keepdims=0),
             h.make_node("Reshape", ["x", "shape"], ["x4"]),
             h.make_node("MaxPool", ["x4"], ["pool"], kernel_shape=[2, 2], strides=[2, 2])]
    outs = [vi(o, None) for o in ["amax", "amin", "alast", "hard", "rmax", "pool"]]
    m = model(nodes, [vi("x", [3, 40])], outs, [const("shape", np.array([1, 3, 4, 10], np.int64))])
    x = np.random.default_rng(1).standard_normal((3, 40)).astype(np.float32)
    x[0, [5, 17, 30]] = np.nan
    x[2, 0] = np.nan

    def last_argmax(r):
        nan = np.flatnonzero(np.isnan(r))
        return nan[-1] if nan.size else len(r) - 1 - np.argmax(r[::-1])

    hard = np.zeros_like(x)
    hard[np.arange(3), np.argmax(x, 1)] = 1
    want = {"amax": np.argmax(x, 1), "amin": np.argmin(x, 1),
            "alast": np.array([last_argmax(r) for r in x], np.int64), "hard": hard,
            "rmax": np.max(x, 1), "pool": x.reshape(1, 3, 2, 2, 5, 2).max(axis=(3, 5))}
    return m, {"x": x}, want


def numpy_cast_saturate():
    """Cast of NaN, infinities and out-of-range floats to integers, against Kiln's rule written
    out here element by element (ONNX leaves these undefined; ONNX Runtime on x86 gives the CPU's
    INT_MIN): NaN gives 0, a value beyond int64 saturates, the rest truncate toward zero, and a
    narrower type keeps the low bits; uint64 saturates to [0, 2^64 - 1]. Before, the kernels
    converted with LLVM's fptosi, whose result is poison for such values."""
    special = [np.nan, np.inf, -np.inf, 3e9, -3e9, 1e20, -1e20, 2.7, -2.7, 300.5, -0.5, -1.0,
               255.9, 65536.0, 2.0 ** 63, -2.0 ** 63, 1.8e19, 2.0 ** 64, -np.nan, 0.0]
    x = np.resize(np.array(special, np.float32), 64)  # 64 lanes: the vectorised conversion
    x[40:] *= np.float32(-1.0)
    types = {"i8": (T.INT8, 8, True), "u8": (T.UINT8, 8, False),
             "i16": (T.INT16, 16, True), "u16": (T.UINT16, 16, False),
             "i32": (T.INT32, 32, True), "u32": (T.UINT32, 32, False),
             "i64": (T.INT64, 64, True), "u64": (T.UINT64, 64, False)}
    nodes = [h.make_node("Cast", ["x"], [n], to=t) for n, (t, _, _) in types.items()]
    nodes.append(h.make_node("Cast", ["x"], ["x64"], to=T.DOUBLE))
    nodes.append(h.make_node("Cast", ["x64"], ["d_i32"], to=T.INT32))
    # the same values as a constant: Kiln folds these Casts at compile time (the reference)
    nodes += [h.make_node("Cast", ["xc"], ["c_" + n], to=types[n][0]) for n in ("i8", "u64", "i64")]
    # clamped first (as QuantizeLinear is), one Clip each so that it fuses with its Cast: the
    # kernels convert at int32 there
    for n in ("i8", "u8", "u32"):
        nodes += [h.make_node("Clip", ["x", "lo", "hi"], ["xk_" + n]),
                  h.make_node("Cast", ["xk_" + n], ["k_" + n], to=types[n][0])]
    outs = list(types) + ["d_i32", "c_i8", "c_u64", "c_i64", "k_i8", "k_u8", "k_u32"]

    def convert(v, bits, signed):
        v = float(v)
        i = 0 if math.isnan(v) else int(v) if math.isfinite(v) else int(np.sign(v)) << 64
        if not signed and bits == 64:
            return max(0, min(i, 2 ** 64 - 1))
        i = max(-2 ** 63, min(i, 2 ** 63 - 1))
        i &= (1 << bits) - 1
        return i - (1 << bits) if signed and i >= 1 << (bits - 1) else i

    np_types = {8: (np.int8, np.uint8), 16: (np.int16, np.uint16), 32: (np.int32, np.uint32),
                64: (np.int64, np.uint64)}
    want = {n: np.array([convert(v, bits, signed) for v in x], np_types[bits][0 if signed else 1])
            for n, (_, bits, signed) in types.items()}
    m = model(nodes, [vi("x", [64])], [vi(n, None) for n in outs],
              [const("xc", x), const("lo", np.array(-200, np.float32)), const("hi", np.array(300, np.float32))])
    want["d_i32"] = want["i32"]
    for n in ("i8", "u64", "i64"):
        want["c_" + n] = want[n]
    for n in ("i8", "u8", "u32"):
        _, bits, signed = types[n]
        want["k_" + n] = np.array([convert(v, bits, signed) for v in np.clip(x, -200, 300)], want[n].dtype)
    return m, {"x": x}, want


def numpy_clip_wide_ints():
    """Clip of int64 and uint64 with constant bounds that a double cannot hold (2^53 + 1, and
    above 2^63 for uint64): the kernels read them as integers, and both the kernel and the folded
    constant compare uint64 unsigned. The simplifier had dropped the int64 Clip's max (2^53 + 1 is
    beyond its index ranges' 2^40); Less against 2^41 guards the compares it decides."""
    big = 2 ** 53
    xi = np.array([-2 ** 63, -5, 0, big - 1, big, big + 1, big + 2, 2 ** 63 - 1], np.int64)
    xu = np.array([0, 5, 2 ** 63 - 1, 2 ** 63, 2 ** 63 + 1, 2 ** 63 + 3, 2 ** 64 - 1, big + 1], np.uint64)
    lo_i, hi_i = np.array(-4, np.int64), np.array(big + 1, np.int64)
    lo_u, hi_u = np.array(3, np.uint64), np.array(2 ** 63 + 1, np.uint64)
    nodes = [h.make_node("Clip", ["xi", "lo_i", "hi_i"], ["yi"]),
             h.make_node("Clip", ["xu", "lo_u", "hi_u"], ["yu"]),
             h.make_node("Clip", ["cu", "lo_u", "hi_u"], ["folded_u"]),
             h.make_node("Less", ["xi", "c41"], ["lt"])]  # 2^41: beyond the index ranges' 2^40
    m = model(nodes, [vi("xi", [8], T.INT64), vi("xu", [8], T.UINT64)],
              [vi(n, None) for n in ("yi", "yu", "folded_u", "lt")],
              [const("lo_i", lo_i), const("hi_i", hi_i), const("lo_u", lo_u), const("hi_u", hi_u),
               const("cu", xu), const("c41", np.array(2 ** 41, np.int64))])
    want = {"yi": np.clip(xi, lo_i, hi_i), "yu": np.clip(xu, lo_u, hi_u), "folded_u": np.clip(xu, lo_u, hi_u),
            "lt": xi < 2 ** 41}
    return m, {"xi": xi, "xu": xu}, want


def run_numpy_case(name, kiln, workdir):
    """Compiles and runs the case with its own inputs; compares with its numpy outputs."""
    m, feeds, want = NUMPY_CASES[name]()
    path = os.path.join(workdir, name + ".onnx")
    onnx.save(m, path)
    kiln = kiln or default_kiln()
    so = os.path.join(workdir, name + ".so")
    proc = run([kiln, "compile", path, "-o", so])
    if proc.returncode != 0:
        print(f"FAIL {name}: kiln compile: {describe_failure(proc)}")
        return 1
    args = []
    for k, v in feeds.items():
        np.save(os.path.join(workdir, k + ".npy"), v)
        args += ["--input", f"{k}={os.path.join(workdir, k + '.npy')}"]
    out = os.path.join(workdir, name + "_out")
    os.makedirs(out, exist_ok=True)
    proc = run([kiln, "run", so, *args, "--output-dir", out])
    if proc.returncode != 0:
        print(f"FAIL {name}: kiln run: {describe_failure(proc)}")
        return 1
    failed = 0
    for oname, ref in want.items():
        got = np.load(os.path.join(out, oname + ".npy"))
        same_nan = got.shape == ref.shape and np.array_equal(np.isnan(got.astype(np.float64)),
                                                             np.isnan(ref.astype(np.float64)))
        ok, err, _, why = compare(got, ref)
        if ref.dtype.kind in "iub":  # integers exactly: compare()'s relative tolerance is huge at int64
            ok = got.dtype == ref.dtype and np.array_equal(got, ref)
            why = why or ("" if ok else f"not equal: {np.count_nonzero(got != ref)} of {ref.size} differ")
        ok = ok and same_nan
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {name} output '{oname}' {list(ref.shape)}: max|kiln-numpy| = {err:.3g}"
              + ("" if same_nan else ": NaN where numpy has none, or none where it has") + (f": {why}" if why else ""))
    print(f"{name}: {'FAIL' if failed else 'PASS'}")
    return 1 if failed else 0


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}
NUMPY_CASES = {name[6:]: fn for name, fn in globals().items() if name.startswith("numpy_") and callable(fn)}


def run_case(name, kiln, workdir):
    m, args = CASES[name]()
    path = os.path.join(workdir, name + ".onnx")
    onnx.save(m, path)
    cmd = [sys.executable, os.path.join(HERE, "check_model.py"), path] + args
    if kiln:
        cmd += ["--kiln", kiln]
    return subprocess.call(cmd)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--case")
    ap.add_argument("--kiln")
    ap.add_argument("--models", help="ignored (the cases are generated), accepted for the test runner")
    a = ap.parse_args()
    if a.list:
        print("\n".join(list(CASES) + list(NUMPY_CASES)))
        return 0
    names = [a.case] if a.case else list(CASES) + list(NUMPY_CASES)
    if a.case and a.case not in CASES and a.case not in NUMPY_CASES:
        print(f"edge_models.py: unknown case '{a.case}'", file=sys.stderr)
        return 2
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            runner = run_case if name in CASES else run_numpy_case
            failed += runner(name, a.kiln, tmp) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
