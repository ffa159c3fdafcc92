#!/usr/bin/env python3
"""check_specialize.py — shape-deciding graph inputs read at run time
(ir/passes/pass_specialize.c) against ONNX Runtime.

    check_specialize.py [--case NAME ...] [--list] [--kiln PATH] [--keep DIR]

Each case is a model whose Reshape shape / ReduceSum axes / TopK K /
AffineGrid size / CumSum or DFT axis is a graph input, with the output shapes
declared. Checks:
  * `kiln compile` accepts it without --bind and the artifact keeps the input;
  * `kiln run` with every value the declared shapes allow (negative axes,
    -1 and 0 in a shape, AffineGrid's free C) matches ONNX Runtime; where the
    values split into classes that compute different things (ReduceSum of
    [3,2,2] to [3,2] over axis 1 or 2) each class is right;
  * a value the declared shapes do not allow makes `kiln run` fail with the
    KILN_ERR_VALUE diagnostic (status 5) and write no output file.
"""
import sys

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h

from value_checks import cases_main, check_case


def model(nodes, inputs, outputs, opset=18):
    g = h.make_graph(nodes, "spec", inputs, outputs)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    return m


rng = np.random.default_rng(0)
i64 = lambda *v: np.array(v, np.int64)  # noqa: E731


def case_reduce_axes_two_classes():
    """ReduceSum [3,2,2] -> [3,2]: axis 1 or 2 (or -2, -1), two computations selected at run time."""
    m = model([h.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
              [h.make_tensor_value_info("x", T.FLOAT, [3, 2, 2]), h.make_tensor_value_info("axes", T.INT64, [1])],
              [h.make_tensor_value_info("y", T.FLOAT, [3, 2])])
    x = rng.standard_normal((3, 2, 2)).astype(np.float32)
    good = [{"x": x, "axes": i64(a)} for a in (1, 2, -1, -2)]
    bad = [{"x": x, "axes": i64(0)}]
    return m, good, bad


def case_reshape_shape():
    """Reshape [2,3,4] -> [4,3,2] written as a plain, -1 or 0 shape."""
    m = model([h.make_node("Reshape", ["x", "shape"], ["y"])],
              [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4]), h.make_tensor_value_info("shape", T.INT64, [3])],
              [h.make_tensor_value_info("y", T.FLOAT, [4, 3, 2])])
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    good = [{"x": x, "shape": s} for s in (i64(4, 3, 2), i64(4, -1, 2), i64(-1, 0, 2))]
    bad = [{"x": x, "shape": i64(2, 3, 4)}, {"x": x, "shape": i64(-1, -1, 2)}]
    return m, good, bad


def case_topk_k_and_reduce():
    """TopK's K and a keepdims ReduceMax's axes, two inputs in one model."""
    m = model([h.make_node("TopK", ["x", "k"], ["v", "i"], axis=1),
               h.make_node("ReduceMax", ["v", "axes"], ["y"], keepdims=1)],
              [h.make_tensor_value_info("x", T.FLOAT, [3, 5]), h.make_tensor_value_info("k", T.INT64, [1]),
               h.make_tensor_value_info("axes", T.INT64, [1])],
              [h.make_tensor_value_info("i", T.INT64, [3, 2]), h.make_tensor_value_info("y", T.FLOAT, [1, 2])])
    x = rng.standard_normal((3, 5)).astype(np.float32)
    good = [{"x": x, "k": i64(2), "axes": i64(a)} for a in (0, -2)]
    bad = [{"x": x, "k": i64(3), "axes": i64(0)}, {"x": x, "k": i64(2), "axes": i64(1)}]
    return m, good, bad


def case_affine_grid_free_channel():
    """AffineGrid's size [N, C, H, W]: C does not change the grid, so any C is accepted."""
    m = model([h.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=0)],
              [h.make_tensor_value_info("theta", T.FLOAT, [2, 2, 3]), h.make_tensor_value_info("size", T.INT64, [4])],
              [h.make_tensor_value_info("grid", T.FLOAT, [2, 4, 5, 2])], opset=20)
    theta = rng.standard_normal((2, 2, 3)).astype(np.float32)
    good = [{"theta": theta, "size": i64(2, c, 4, 5)} for c in (3, 1, 1000)]
    bad = [{"theta": theta, "size": i64(2, 3, 5, 4)}]
    return m, good, bad


def case_cumsum_axis_range():
    """CumSum reads its axis at run time; an axis outside [-rank, rank) is refused, not summed to zeros."""
    m = model([h.make_node("CumSum", ["x", "axis"], ["y"])],
              [h.make_tensor_value_info("x", T.FLOAT, [3, 4]), h.make_tensor_value_info("axis", T.INT64, [])],
              [h.make_tensor_value_info("y", T.FLOAT, [3, 4])])
    x = rng.standard_normal((3, 4)).astype(np.float32)
    good = [{"x": x, "axis": np.array(a, np.int64)} for a in (0, 1, -1, -2)]
    bad = [{"x": x, "axis": np.array(a, np.int64)} for a in (2, -3)]
    return m, good, bad


def case_dft_axis():
    """DFT (opset 20) with its axis read at run time: one DFT per axis, picked at run time."""
    m = model([h.make_node("DFT", ["x", "", "axis"], ["y"])],
              [h.make_tensor_value_info("x", T.FLOAT, [3, 4, 5, 1]), h.make_tensor_value_info("axis", T.INT64, [])],
              [h.make_tensor_value_info("y", T.FLOAT, [3, 4, 5, 2])], opset=20)
    x = rng.standard_normal((3, 4, 5, 1)).astype(np.float32)
    good = [{"x": x, "axis": np.array(a, np.int64)} for a in (0, 1, 2, -2, -4)]
    bad = [{"x": x, "axis": np.array(a, np.int64)} for a in (3, -1)]
    return m, good, bad


CASES = {name[5:]: fn for name, fn in list(globals().items()) if name.startswith("case_")}


def feeds_text(feeds):
    return ", ".join(f"{k}={v.tolist()}" for k, v in feeds.items() if v.dtype == np.int64)


def check(kiln, tmp, name):
    m, good, bad = CASES[name]()
    check_case(kiln, tmp, name, m, good, bad, feeds_text)


def main(argv=None):
    return cases_main("check_specialize", "shape-deciding inputs read at run time vs ONNX Runtime.", CASES, check, argv)


if __name__ == "__main__":
    sys.exit(main())
