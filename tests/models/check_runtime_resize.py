#!/usr/bin/env python3
"""check_runtime_resize.py — Resize and Upsample whose scales, sizes or roi are
graph inputs read at run time (ir/passes/pass_runtime_resize.c), against ONNX Runtime.

    check_runtime_resize.py [--case NAME ...] [--list] [--kiln PATH] [--keep DIR]

Each case is a model whose Resize / Upsample output declares its static shape.
Checks:
  * `kiln compile` accepts it without --bind and the artifact keeps the
    run-time inputs;
  * `kiln run` with several scales giving the declared shape (including
    scales that differ but floor to the same dims, and a scale != 1 on an axis
    whose length is kept) matches ONNX Runtime, or for the cases in ONNX_ORACLE
    the onnx package's reference (align_corners, pytorch_half_pixel and
    tf_crop_and_resize where scale * in is not an integer: Kiln follows the ONNX reference, which
    uses scale * in there, ONNX Runtime uses the integer output length);
  * values giving another shape, or invalid ones (zero, negative, NaN scales,
    sizes below 1, a NaN or huge roi), make
    `kiln run` fail with the KILN_ERR_VALUE diagnostic (status 5) and write
    no output file.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

from value_checks import cases_main, check_case


rng = np.random.default_rng(0)


def f32(*v):
    return np.array(v, np.float32)


def vi(name, t, shape):
    return h.make_tensor_value_info(name, t, shape)


def resize_model(x_shape, y_shape, n_scales, opset=18, ttype=T.FLOAT, inputs=None, initializers=(), **attrs):
    """Resize(x, roi, scales) -> y with scales a graph input of n_scales floats."""
    ins = inputs or ["x", "", "scales"]
    node = h.make_node("Resize", ins, ["y"], **attrs)
    g = h.make_graph([node], "rtresize", [vi("x", ttype, x_shape), vi("scales", T.FLOAT, [n_scales])],
                     [vi("y", ttype, y_shape)], initializer=list(initializers))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def cases_for(x, scales_good, scales_bad):
    return ([{"x": x, "scales": f32(*s)} for s in scales_good], [{"x": x, "scales": f32(*s)} for s in scales_bad])


def case_nearest_up():
    """nearest (round_prefer_floor, half_pixel) [1,2,3,4] -> [1,2,6,6]; a scale 1.2 keeps C at 2."""
    m = resize_model([1, 2, 3, 4], [1, 2, 6, 6], 4, mode="nearest")
    x = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    good, bad = cases_for(x, [(1, 1, 2, 1.5), (1, 1, 2.2, 1.6), (1, 1.2, 2.3, 1.74)],
                          [(1, 1, 3, 1.5), (1, 1, 2, 1.4), (1, 1, -2, 1.5), (1, 0, 2, 1.5),
                           (1, 1, float("nan"), 1.5), (2, 1, 2, 1.5)])
    return m, good, bad


def case_linear_down():
    """linear half_pixel [2,1,4,6] -> [2,1,2,3]."""
    m = resize_model([2, 1, 4, 6], [2, 1, 2, 3], 4, mode="linear")
    x = rng.standard_normal((2, 1, 4, 6)).astype(np.float32)
    good, bad = cases_for(x, [(1, 1, 0.5, 0.5), (1, 1, 0.6, 0.6), (1, 1, 0.74, 0.52)],
                          [(1, 1, 0.75, 0.5), (1, 1, 0.5, 0.49), (0.4, 1, 0.5, 0.5)])
    return m, good, bad


def case_cubic_axes():
    """cubic align_corners over axes [3, 2] (opset 18) [1,3,4,5] -> [1,3,7,9] (float32 1.8 * 5 floors to 8)."""
    m = resize_model([1, 3, 4, 5], [1, 3, 7, 9], 2, mode="cubic", coordinate_transformation_mode="align_corners",
                     axes=[3, 2])
    x = rng.standard_normal((1, 3, 4, 5)).astype(np.float32)
    good, bad = cases_for(x, [(1.81, 1.75), (1.9, 1.99)], [(1.8, 1.75), (1.81, 2.0), (2.0, 1.75), (0, 1.75)])
    return m, good, bad


def case_cubic_exclude_outside():
    """cubic A=-0.5 exclude_outside, pytorch_half_pixel [3,5] -> [1,8]: an output axis of length 1."""
    m = resize_model([3, 5], [1, 8], 2, mode="cubic", coordinate_transformation_mode="pytorch_half_pixel",
                     cubic_coeff_a=-0.5, exclude_outside=1)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    good, bad = cases_for(x, [(0.34, 1.6), (0.5, 1.7), (0.6, 1.79)], [(0.3, 1.6), (0.34, 2.0)])
    return m, good, bad


def case_linear_symmetric():
    """linear half_pixel_symmetric (opset 19) [1,1,5,4] -> [1,1,8,2]."""
    m = resize_model([1, 1, 5, 4], [1, 1, 8, 2], 4, opset=19, mode="linear",
                     coordinate_transformation_mode="half_pixel_symmetric")
    x = rng.standard_normal((1, 1, 5, 4)).astype(np.float32)
    good, bad = cases_for(x, [(1, 1, 1.6, 0.5), (1, 1, 1.78, 0.7)], [(1, 1, 2.0, 0.5), (1, 1, 1.6, 0.75)])
    return m, good, bad


def case_crop_and_resize():
    """linear tf_crop_and_resize with a constant roi and extrapolation [1,1,4,4] -> [1,1,3,3]."""
    roi = h.make_tensor("roi", T.FLOAT, [8], [0, 0, -0.2, 0.3, 1, 1, 0.9, 1.4])
    m = resize_model([1, 1, 4, 4], [1, 1, 3, 3], 4, inputs=["x", "roi", "scales"], initializers=[roi],
                     mode="linear", coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=7.0)
    x = rng.standard_normal((1, 1, 4, 4)).astype(np.float32)
    good, bad = cases_for(x, [(1, 1, 0.75, 0.75), (1, 1, 0.8, 0.95), (1.5, 1, 0.9, 0.76)], [(1, 1, 1, 0.75)])
    return m, good, bad


def case_nearest_uint8():
    """nearest (floor, asymmetric) of uint8 [1,1,2,3] -> [1,1,5,7]."""
    m = resize_model([1, 1, 2, 3], [1, 1, 5, 7], 4, ttype=T.UINT8, mode="nearest",
                     coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    x = rng.integers(0, 255, (1, 1, 2, 3)).astype(np.uint8)
    good, bad = cases_for(x, [(1, 1, 2.5, 2.4), (1, 1, 2.9, 2.6)], [(1, 1, 3, 2.4)])
    return m, good, bad


def case_upsample9():
    """Upsample (opset 9) nearest with run-time scales [1,2,2,3] -> [1,2,4,9]."""
    g = h.make_graph([h.make_node("Upsample", ["x", "scales"], ["y"], mode="nearest")], "rtup",
                     [vi("x", T.FLOAT, [1, 2, 2, 3]), vi("scales", T.FLOAT, [4])], [vi("y", T.FLOAT, [1, 2, 4, 9])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 9)])
    m.ir_version = 8
    x = rng.standard_normal((1, 2, 2, 3)).astype(np.float32)
    good, bad = cases_for(x, [(1, 1, 2, 3), (1, 1, 2.4, 3.2)], [(1, 1, 2, 2)])
    return m, good, bad


def case_resize10_linear():
    """Resize-10 (X, scales) linear [1,1,2,2] -> [1,1,4,5]."""
    g = h.make_graph([h.make_node("Resize", ["x", "scales"], ["y"], mode="linear")], "rtr10",
                     [vi("x", T.FLOAT, [1, 1, 2, 2]), vi("scales", T.FLOAT, [4])], [vi("y", T.FLOAT, [1, 1, 4, 5])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 10)])
    m.ir_version = 8
    x = rng.standard_normal((1, 1, 2, 2)).astype(np.float32)
    good, bad = cases_for(x, [(1, 1, 2, 2.5), (1, 1, 2.2, 2.9)], [(1, 1, 2, 3)])
    return m, good, bad


# compared with onnx.reference (see the opening comment)
ONNX_ORACLE = {"cubic_axes", "cubic_exclude_outside", "crop_and_resize"}

def model_with(node, inputs, x_shape, y_shape, opset=19, initializers=()):
    g = h.make_graph([node], "rtresize", [vi("x", T.FLOAT, x_shape)] + inputs, [vi("y", T.FLOAT, y_shape)],
                     initializer=list(initializers))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def i64(*v):
    return np.array(v, np.int64)


def case_sizes_not_larger():
    """nearest, run-time sizes with keep_aspect_ratio_policy not_larger over axes [2, 3]: [1,2,4,6] -> [1,2,2,3]."""
    node = h.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest", axes=[2, 3],
                       keep_aspect_ratio_policy="not_larger")
    m = model_with(node, [vi("sizes", T.INT64, [2])], [1, 2, 4, 6], [1, 2, 2, 3])
    x = rng.standard_normal((1, 2, 4, 6)).astype(np.float32)
    f = lambda *v: {"x": x, "sizes": i64(*v)}  # noqa: E731
    return m, [f(2, 3), f(2, 5), f(3, 3)], [f(3, 5), f(0, 3), f(2, -1), f(2, 2**50)]


def case_sizes_not_smaller():
    """linear, run-time sizes with not_smaller: [1,1,2,3] -> [1,1,6,9]."""
    node = h.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear", axes=[2, 3],
                       keep_aspect_ratio_policy="not_smaller")
    m = model_with(node, [vi("sizes", T.INT64, [2])], [1, 1, 2, 3], [1, 1, 6, 9])
    x = rng.standard_normal((1, 1, 2, 3)).astype(np.float32)
    f = lambda *v: {"x": x, "sizes": i64(*v)}  # noqa: E731
    return m, [f(6, 9), f(6, 2), f(1, 9)], [f(7, 9), f(6, 10)]


def case_crop_roi_sizes():
    """tf_crop_and_resize with run-time roi and sizes (stretch) over axes [3, 2], extrapolation 5."""
    node = h.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], mode="linear", axes=[3, 2],
                       coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=5.0)
    m = model_with(node, [vi("roi", T.FLOAT, [4]), vi("sizes", T.INT64, [2])], [1, 1, 4, 5], [1, 1, 3, 4])
    x = rng.standard_normal((1, 1, 4, 5)).astype(np.float32)
    f = lambda r, z: {"x": x, "roi": f32(*r), "sizes": i64(*z)}  # noqa: E731
    good = [f((0.4, 0.6, 0.6, 0.8), (4, 3)), f((-0.3, 0, 1.2, 1), (4, 3)), f((1, 1, 0, 0), (4, 3))]
    bad = [f((0.4, 0.6, 0.6, 0.8), (3, 4)), f((0.4, float("nan"), 0.6, 0.8), (4, 3)), f((0.4, 0.6, 2e6, 0.8), (4, 3))]
    return m, good, bad


def case_roi_constant_scales():
    """cubic tf_crop_and_resize: run-time roi, constant scales [1,1,0.5,2]: [1,1,4,3] -> [1,1,2,6]."""
    sc = h.make_tensor("scales", T.FLOAT, [4], [1, 1, 0.5, 2])
    node = h.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="cubic",
                       coordinate_transformation_mode="tf_crop_and_resize")
    m = model_with(node, [vi("roi", T.FLOAT, [8])], [1, 1, 4, 3], [1, 1, 2, 6], initializers=[sc])
    x = rng.standard_normal((1, 1, 4, 3)).astype(np.float32)
    f = lambda *r: {"x": x, "roi": f32(*r)}  # noqa: E731
    return m, [f(0, 0, 0.1, 0.2, 1, 1, 0.9, 0.7), f(0, 0, -0.5, 0, 1, 1, 1.5, 1)], [f(0, 0, float("inf"), 0, 1, 1, 1, 1)]


CASES = {name[5:]: fn for name, fn in list(globals().items()) if name.startswith("case_")}


def feeds_text(feeds):
    return ", ".join(f"{k}={v.tolist()}" for k, v in feeds.items() if k != "x")


def onnx_reference(path, feeds):
    from onnx.reference import ReferenceEvaluator
    m = onnx.load(path)
    names = [o.name for o in m.graph.output]
    return dict(zip(names, ReferenceEvaluator(m).run(None, feeds)))


def check(kiln, tmp, name):
    m, good, bad = CASES[name]()
    if name in ONNX_ORACLE:
        check_case(kiln, tmp, name, m, good, bad, feeds_text, onnx_reference, "onnx.reference")
    else:
        check_case(kiln, tmp, name, m, good, bad, feeds_text)


def main(argv=None):
    return cases_main("check_runtime_resize", "run-time Resize / Upsample scales vs ONNX Runtime.", CASES, check, argv)


if __name__ == "__main__":
    sys.exit(main())
