#!/usr/bin/env python3
"""check_runtime_slices.py — Slice, Pad and Range whose starts / pads / bounds
are graph inputs read at run time (ir/passes/pass_runtime_slices.c), against ONNX
Runtime.

    check_runtime_slices.py [--case NAME ...] [--list] [--kiln PATH] [--keep DIR]

Each case is a model whose output declares its static shape. Checks:
  * `kiln compile` accepts it without --bind and the artifact keeps the inputs;
  * `kiln run` with several values giving the declared shape (negative and
    out-of-range starts, negative steps and axes, axes chosen at run time,
    negative pads, a run-time pad value) matches ONNX Runtime;
  * values giving another shape (or invalid ones: a zero step, an axis named
    twice, a zero delta) make `kiln run` fail with the KILN_ERR_VALUE
    diagnostic (status 5) and write no output file.
"""
import sys

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h

from value_checks import cases_main, check_case


def model(nodes, inputs, outputs, opset=18):
    g = h.make_graph(nodes, "rtslice", inputs, outputs)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    return m


rng = np.random.default_rng(0)
i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
i32 = lambda *v: np.array(v, np.int32)  # noqa: E731


def vi(name, t, shape):
    return h.make_tensor_value_info(name, t, shape)


def case_slice_steps():
    """Slice [6,5,4] -> [3,5,2] with run-time starts, ends, steps (constant axes [0, 2])."""
    axes = h.make_tensor("axes", T.INT64, [2], [0, 2])
    m = model([h.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])],
              [vi("x", T.FLOAT, [6, 5, 4]), vi("starts", T.INT64, [2]), vi("ends", T.INT64, [2]),
               vi("steps", T.INT64, [2])],
              [vi("y", T.FLOAT, [3, 5, 2])])
    m.graph.initializer.append(axes)
    x = rng.standard_normal((6, 5, 4)).astype(np.float32)
    f = lambda s, e, st: {"x": x, "starts": i64(*s), "ends": i64(*e), "steps": i64(*st)}  # noqa: E731
    good = [f((0, 0), (3, 2), (1, 1)), f((1, 1), (6, 4), (2, 2)), f((-1, -1), (-100, -5), (-2, -2)),
            f((-3, 2), (2**62, 9), (1, 1)), f((5, 3), (0, 0), (-2, -2))]
    bad = [f((0, 0), (4, 2), (1, 1)), f((0, 0), (3, 2), (0, 1)), f((0, 0), (3, 4), (1, 1))]
    return m, good, bad


def case_slice_runtime_axes():
    """Slice [4,6] -> [4,2]: which axis is sliced is a run-time input too (int32 starts / ends / axes)."""
    m = model([h.make_node("Slice", ["x", "starts", "ends", "axes"], ["y"])],
              [vi("x", T.FLOAT, [4, 6]), vi("starts", T.INT32, [1]), vi("ends", T.INT32, [1]),
               vi("axes", T.INT32, [1])],
              [vi("y", T.FLOAT, [4, 2])])
    x = rng.standard_normal((4, 6)).astype(np.float32)
    f = lambda s, e, a: {"x": x, "starts": i32(s), "ends": i32(e), "axes": i32(a)}  # noqa: E731
    good = [f(0, 2, 1), f(4, 6, -1), f(-2, 2**31 - 1, 1)]
    bad = [f(0, 2, 0), f(0, 2, 2), f(0, 3, 1), f(0, 2, -3)]
    return m, good, bad


def case_slice_two_runtime_axes():
    """Slice [4,5] -> [2,3] over both axes in a run-time order; an axis named twice is refused."""
    m = model([h.make_node("Slice", ["x", "starts", "ends", "axes"], ["y"])],
              [vi("x", T.FLOAT, [4, 5]), vi("starts", T.INT64, [2]), vi("ends", T.INT64, [2]),
               vi("axes", T.INT64, [2])],
              [vi("y", T.FLOAT, [2, 3])])
    x = rng.standard_normal((4, 5)).astype(np.float32)
    f = lambda s, e, a: {"x": x, "starts": i64(*s), "ends": i64(*e), "axes": i64(*a)}  # noqa: E731
    good = [f((1, 2), (3, 5), (0, 1)), f((2, 1), (5, 3), (1, 0)), f((0, -3), (2, 5), (-2, -1))]
    bad = [f((1, 1), (3, 3), (0, 0)), f((2, 1), (5, 3), (0, 1))]
    return m, good, bad


def pad_case(mode, dtype=np.float32, ttype=T.FLOAT):
    m = model([h.make_node("Pad", ["x", "pads"], ["y"], mode=mode)],
              [vi("x", ttype, [2, 3, 4]), vi("pads", T.INT64, [6])],
              [vi("y", ttype, [2, 5, 7])])
    x = (rng.standard_normal((2, 3, 4)) * 10).astype(dtype)
    f = lambda *p: {"x": x, "pads": i64(*p)}  # noqa: E731
    good = [f(0, 1, 1, 0, 1, 2), f(0, 2, 3, 0, 0, 0), f(0, 0, 2, 0, 2, 1)]
    bad = [f(0, 1, 1, 0, 1, 1), f(1, 1, 1, 0, 1, 2), f(0, 2**62, 1, 0, 2**62, 2)]
    return m, good, bad


def case_pad_edge():
    """Pad edge [2,3,4] -> [2,5,7], int32 data, run-time pads."""
    return pad_case("edge", np.int32, T.INT32)


def case_pad_reflect():
    """Pad reflect [2,3,4] -> [2,5,7]; pads as large as the axis are refused (as at compile time)."""
    m, good, bad = pad_case("reflect")
    x = good[0]["x"]
    return m, good, bad + [{"x": x, "pads": i64(0, 3, 0, 0, -1, 3)}]


def case_pad_wrap():
    """Pad wrap [2,3,4] -> [2,5,7]."""
    return pad_case("wrap")


def case_pad_constant_axes():
    """Pad constant with run-time pads, constant_value and axes; a negative pad crops."""
    m = model([h.make_node("Pad", ["x", "pads", "value", "axes"], ["y"], mode="constant")],
              [vi("x", T.FLOAT, [3, 4, 5]), vi("pads", T.INT64, [4]), vi("value", T.FLOAT, []),
               vi("axes", T.INT64, [2])],
              [vi("y", T.FLOAT, [3, 6, 5])])
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    f = lambda p, a, v=1.5: {"x": x, "pads": i64(*p), "value": np.array(v, np.float32), "axes": i64(*a)}  # noqa: E731
    good = [f((1, 0, 1, 0), (1, 2)), f((0, 2, 0, 0), (-1, -2), -3.0), f((2, -1, 0, 1), (1, 2)),
            f((0, 2, 0, 0), (0, 1))]
    bad = [f((1, 0, 1, 0), (0, 2)), f((1, 0, 1, 0), (1, 1)), f((1, 0, 1, 0), (1, 3))]
    return m, good, bad


def case_range_float():
    """Range float32 of declared length 4 from run-time start / limit / delta."""
    m = model([h.make_node("Range", ["start", "limit", "delta"], ["y"])],
              [vi("start", T.FLOAT, []), vi("limit", T.FLOAT, []), vi("delta", T.FLOAT, [])],
              [vi("y", T.FLOAT, [4])], opset=11)
    f = lambda s, l, d: {"start": np.array(s, np.float32), "limit": np.array(l, np.float32),  # noqa: E731
                         "delta": np.array(d, np.float32)}
    good = [f(0, 4, 1), f(1.5, 3.0, 0.4), f(10, -2, -3.5)]
    bad = [f(0, 5, 1), f(0, 4, 0), f(0, 4, -1)]
    return m, good, bad


def case_range_int64():
    """Range int64 of declared length 3; bounds past 2^51 are refused (the check is exact below)."""
    m = model([h.make_node("Range", ["start", "limit", "delta"], ["y"])],
              [vi("start", T.INT64, []), vi("limit", T.INT64, []), vi("delta", T.INT64, [])],
              [vi("y", T.INT64, [3])], opset=11)
    f = lambda s, l, d: {"start": np.array(s, np.int64), "limit": np.array(l, np.int64),  # noqa: E731
                         "delta": np.array(d, np.int64)}
    good = [f(0, 3, 1), f(-7, 2, 3), f(5, -1, -2), f(10**12, 10**12 + 30, 11)]
    bad = [f(0, 4, 1), f(0, 3, 0), f(2**60, 2**60 + 3, 1)]
    return m, good, bad


def case_two_nodes():
    """A Slice of a computed tensor and a Pad of the input in one model: two checks."""
    m = model([h.make_node("Relu", ["x"], ["r"]),
               h.make_node("Slice", ["r", "starts", "ends"], ["y"]),
               h.make_node("Pad", ["x", "pads"], ["z"], mode="edge")],
              [vi("x", T.FLOAT, [3, 4]), vi("starts", T.INT64, [1]), vi("ends", T.INT64, [1]),
               vi("pads", T.INT64, [4])],
              [vi("y", T.FLOAT, [2, 4]), vi("z", T.FLOAT, [3, 6])])
    x = rng.standard_normal((3, 4)).astype(np.float32)
    f = lambda s, e, p: {"x": x, "starts": i64(s), "ends": i64(e), "pads": i64(*p)}  # noqa: E731
    good = [f(0, 2, (0, 1, 0, 1)), f(1, 3, (0, 0, 0, 2)), f(-2, 100, (0, 3, 0, -1))]
    bad = [f(0, 3, (0, 1, 0, 1)), f(0, 2, (0, 1, 0, 2))]
    return m, good, bad


CASES = {name[5:]: fn for name, fn in list(globals().items()) if name.startswith("case_")}


def feeds_text(feeds):
    return ", ".join(f"{k}={v.tolist()}" for k, v in feeds.items() if k != "x")


def check(kiln, tmp, name):
    m, good, bad = CASES[name]()
    check_case(kiln, tmp, name, m, good, bad, feeds_text)


def main(argv=None):
    return cases_main("check_runtime_slices", "run-time Slice / Pad / Range bounds vs ONNX Runtime.", CASES, check, argv)


if __name__ == "__main__":
    sys.exit(main())
