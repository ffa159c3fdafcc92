#!/usr/bin/env python3
"""check_data_dependent.py — NonZero, Compress and Unique compiled for the
output shapes a model declares (ir/passes/pass_data_dependent.c), against ONNX Runtime.

    check_data_dependent.py [--case NAME ...] [--list] [--kiln PATH] [--keep DIR]

Each case is a model whose NonZero / Compress / Unique output is a model output
with a declared static shape (or whose deciding input is a constant). Checks:
  * `kiln compile` accepts it;
  * `kiln run` with inputs that give the declared shape matches ONNX Runtime;
  * inputs whose count differs from the declared one (or, for Unique, hold a
    NaN) make `kiln run` fail with the KILN_ERR_VALUE diagnostic (status 5)
    and write no output file.
Refusal cases: a model Kiln cannot compile this way gives one diagnostic line
naming the node and no artifact.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

from common import describe_failure, run, sanitizer_report
from value_checks import CaseFailure, cases_main, check_case


def model(nodes, inputs, outputs, inits=(), opset=13):
    g = h.make_graph(nodes, "datadep", inputs, outputs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    return m


rng = np.random.default_rng(0)
vi = h.make_tensor_value_info


def with_nonzeros(shape, k, dtype):
    """A tensor of `shape` with exactly k nonzero elements at random places."""
    x = np.zeros(int(np.prod(shape)), dtype)
    where = rng.choice(x.size, k, replace=False)
    x[where] = rng.integers(1, 9, k) * (1 if dtype == np.bool_ else rng.choice([-1, 1], k))
    return x.reshape(shape)


def mask(n, k):
    m = np.zeros(n, np.bool_)
    m[rng.choice(n, k, replace=False)] = True
    return m


def case_nonzero_float():
    """NonZero of a [3,4] float tensor declared [2,5]; a NaN counts as nonzero."""
    m = model([h.make_node("NonZero", ["x"], ["y"], name="nz")], [vi("x", T.FLOAT, [3, 4])], [vi("y", T.INT64, [2, 5])])
    good = [{"x": with_nonzeros((3, 4), 5, np.float32)} for _ in range(3)]
    nan = with_nonzeros((3, 4), 4, np.float32)
    nan[np.flatnonzero(nan == 0)[0] // 4, np.flatnonzero(nan == 0)[0] % 4] = np.nan
    good.append({"x": nan})
    bad = [{"x": with_nonzeros((3, 4), 4, np.float32)}, {"x": with_nonzeros((3, 4), 6, np.float32)}]
    return m, good, bad


def case_nonzero_int_3d():
    """NonZero of a [2,3,4] int32 tensor declared [3,7], feeding a second output."""
    m = model([h.make_node("NonZero", ["x"], ["y"], name="nz"), h.make_node("Transpose", ["y"], ["t"])],
              [vi("x", T.INT32, [2, 3, 4])], [vi("y", T.INT64, [3, 7]), vi("t", T.INT64, [7, 3])])
    good = [{"x": with_nonzeros((2, 3, 4), 7, np.int32)} for _ in range(3)]
    bad = [{"x": with_nonzeros((2, 3, 4), 8, np.int32)}, {"x": np.zeros((2, 3, 4), np.int32)}]
    return m, good, bad


def case_nonzero_bool_none():
    """NonZero of a bool [2,3] declared [2,0]: only an all-false input is accepted."""
    m = model([h.make_node("NonZero", ["x"], ["y"], name="nz")], [vi("x", T.BOOL, [2, 3])], [vi("y", T.INT64, [2, 0])])
    good = [{"x": np.zeros((2, 3), np.bool_)}]
    bad = [{"x": with_nonzeros((2, 3), 1, np.bool_)}]
    return m, good, bad


def case_compress_short_condition():
    """Compress on axis 0 of [4,3] with a 3-element condition (the last row never selected), declared [2,3]."""
    m = model([h.make_node("Compress", ["x", "c"], ["y"], axis=0, name="cp")],
              [vi("x", T.FLOAT, [4, 3]), vi("c", T.BOOL, [3])], [vi("y", T.FLOAT, [2, 3])])
    x = rng.standard_normal((4, 3)).astype(np.float32)
    good = [{"x": x, "c": mask(3, 2)} for _ in range(3)]
    bad = [{"x": x, "c": mask(3, 3)}, {"x": x, "c": mask(3, 1)}]
    return m, good, bad


def case_compress_none_selected():
    """Compress declared [0, 3]: only an all-false condition is accepted (an empty output)."""
    m = model([h.make_node("Compress", ["x", "c"], ["y"], axis=0, name="cp")],
              [vi("x", T.FLOAT, [4, 3]), vi("c", T.BOOL, [4])], [vi("y", T.FLOAT, [0, 3])])
    x = rng.standard_normal((4, 3)).astype(np.float32)
    return m, [{"x": x, "c": mask(4, 0)}], [{"x": x, "c": mask(4, 1)}]


def case_compress_flat_int():
    """Compress without an axis: the flattened [2,3] int64 input, 6-element condition, declared [4]."""
    m = model([h.make_node("Compress", ["x", "c"], ["y"], name="cp")],
              [vi("x", T.INT64, [2, 3]), vi("c", T.BOOL, [6])], [vi("y", T.INT64, [4])])
    x = rng.integers(-50, 50, (2, 3)).astype(np.int64)
    good = [{"x": x, "c": mask(6, 4)} for _ in range(3)]
    bad = [{"x": x, "c": mask(6, 5)}]
    return m, good, bad


def case_compress_const_condition():
    """Compress with a constant condition and an undeclared output: the count comes from the constant."""
    c = h.make_tensor("c", T.BOOL, [5], [True, False, True, True, False])
    m = model([h.make_node("Compress", ["x", "c"], ["y"], axis=1, name="cp"), h.make_node("Relu", ["y"], ["r"])],
              [vi("x", T.FLOAT, [2, 5])], [vi("r", T.FLOAT, None)], inits=[c])
    good = [{"x": rng.standard_normal((2, 5)).astype(np.float32)}]
    return m, good, []


def case_nonzero_transposed():
    """torch.nonzero's export: NonZero -> Transpose, the count declared on the Transpose's output [6, 2]."""
    m = model([h.make_node("NonZero", ["x"], ["nz"], name="nz"), h.make_node("Transpose", ["nz"], ["y"], perm=[1, 0])],
              [vi("x", T.FLOAT, [4, 5])], [vi("y", T.INT64, [6, 2])])
    good = [{"x": with_nonzeros((4, 5), 6, np.float32)} for _ in range(3)]
    bad = [{"x": with_nonzeros((4, 5), 5, np.float32)}]
    return m, good, bad


def case_compress_then_matmul():
    """Compress rows, then a MatMul: the count declared only on the MatMul's output [3, 2]."""
    w = h.make_tensor("w", T.FLOAT, [4, 2], rng.standard_normal(8).astype(np.float32).tolist())
    m = model([h.make_node("Compress", ["x", "c"], ["s"], axis=0, name="cp"), h.make_node("MatMul", ["s", "w"], ["y"])],
              [vi("x", T.FLOAT, [5, 4]), vi("c", T.BOOL, [5])], [vi("y", T.FLOAT, [3, 2])], inits=[w])
    x = rng.standard_normal((5, 4)).astype(np.float32)
    good = [{"x": x, "c": mask(5, 3)} for _ in range(3)]
    bad = [{"x": x, "c": mask(5, 2)}]
    return m, good, bad


def unique_model(x_type, x_shape, n_unique, out_y_shape, n_slices, **attrs):
    return model([h.make_node("Unique", ["x"], ["y", "idx", "inv", "cnt"], name="uq", **attrs)],
                 [vi("x", x_type, x_shape)],
                 [vi("y", x_type, out_y_shape), vi("idx", T.INT64, [n_unique]), vi("inv", T.INT64, [n_slices]),
                  vi("cnt", T.INT64, [n_unique])], opset=11)


def with_uniques(n, u, dtype):
    """n values with exactly u distinct ones, shuffled."""
    vals = rng.choice(np.arange(-20, 20), u, replace=False).astype(dtype)
    x = np.concatenate([vals, rng.choice(vals, n - u)])
    rng.shuffle(x)
    return x


def case_unique_sorted_flat():
    """Unique (sorted) of 10 floats declared 6 unique; a NaN or another count is refused."""
    m = unique_model(T.FLOAT, [10], 6, [6], 10)
    good = [{"x": with_uniques(10, 6, np.float32)} for _ in range(3)]
    nan = with_uniques(10, 6, np.float32)
    nan[0] = np.nan
    bad = [{"x": with_uniques(10, 5, np.float32)}, {"x": with_uniques(10, 7, np.float32)}, {"x": nan}]
    return m, good, bad


def case_unique_unsorted_int():
    """Unique (sorted=0, first-occurrence order) of a [3,4] int64 tensor declared 5 unique."""
    m = unique_model(T.INT64, [3, 4], 5, [5], 12, sorted=0)
    good = [{"x": with_uniques(12, 5, np.int64).reshape(3, 4)} for _ in range(3)]
    bad = [{"x": with_uniques(12, 4, np.int64).reshape(3, 4)}]
    return m, good, bad


def slices_with_uniques(shape, axis, u):
    """A tensor whose slices along axis take exactly u distinct values (ties in leading elements)."""
    n = shape[axis]
    rest = [d for i, d in enumerate(shape) if i != axis]
    base = rng.integers(0, 2, (u, *rest)).astype(np.float32)
    while len({b.tobytes() for b in base}) < u:
        base = rng.integers(0, 3, (u, *rest)).astype(np.float32)
    pick = np.concatenate([np.arange(u), rng.integers(0, u, n - u)])
    rng.shuffle(pick)
    return np.moveaxis(base[pick], 0, axis).copy()


def case_unique_axis_sorted():
    """Unique along axis 1 of [2,6,3] (slices compared lexicographically), declared 4 unique."""
    m = unique_model(T.FLOAT, [2, 6, 3], 4, [2, 4, 3], 6, axis=1, sorted=1)
    good = [{"x": slices_with_uniques((2, 6, 3), 1, 4)} for _ in range(4)]
    bad = [{"x": slices_with_uniques((2, 6, 3), 1, 3)}, {"x": slices_with_uniques((2, 6, 3), 1, 5)}]
    return m, good, bad


def case_unique_axis_unsorted():
    """Unique along axis -1 of [3,5], sorted=0, declared 3 unique."""
    m = unique_model(T.FLOAT, [3, 5], 3, [3, 3], 5, axis=-1, sorted=0)
    good = [{"x": slices_with_uniques((3, 5), 1, 3)} for _ in range(3)]
    bad = [{"x": slices_with_uniques((3, 5), 1, 2)}]
    return m, good, bad


def case_unique_const_input():
    """Unique of a constant (nothing declared): the count comes from the constant, the rest folds."""
    c = h.make_tensor("c", T.FLOAT, [7], [3, 1, 3, 2, 1, 5, 3])
    m = model([h.make_node("Unique", ["c"], ["y", "idx", "inv", "cnt"], name="uq"), h.make_node("Add", ["y", "x"], ["z"])],
              [vi("x", T.FLOAT, [1])], [vi("z", T.FLOAT, None), vi("inv", T.INT64, None), vi("cnt", T.INT64, None)],
              inits=[c], opset=11)
    return m, [{"x": np.array([0.5], np.float32)}], []


CASES = {name[5:]: fn for name, fn in list(globals().items()) if name.startswith("case_")}


def refuse_nonzero_undeclared():
    m = model([h.make_node("NonZero", ["x"], ["y"], name="nz_undeclared")], [vi("x", T.FLOAT, [3, 4])],
              [vi("y", T.INT64, None)])
    return m, ["nz_undeclared", "must be a model output declaring a static shape"]


def refuse_compress_wrong_declared():
    m = model([h.make_node("Compress", ["x", "c"], ["y"], axis=0, name="cp_bad")],
              [vi("x", T.FLOAT, [4, 3]), vi("c", T.BOOL, [4])], [vi("y", T.FLOAT, [2, 2])])
    return m, ["cp_bad", "declares shape [2, 2]"]


def refuse_nonzero_count_undecided():
    m = model([h.make_node("NonZero", ["x"], ["nz"], name="nz_sum"), h.make_node("ReduceSum", ["nz"], ["y"], keepdims=0)],
              [vi("x", T.FLOAT, [3, 4])], [vi("y", T.INT64, [])])
    return m, ["nz_sum", "allow several counts"]


def refuse_unique_too_large():
    m = unique_model(T.FLOAT, [5000], 10, [10], 5000)
    return m, ["'uq'", "too large"]


REFUSALS = {name[7:]: fn for name, fn in list(globals().items()) if name.startswith("refuse_")}


def feeds_text(feeds):
    return ", ".join(f"{k}={np.array2string(v.reshape(-1), max_line_width=200)}" for k, v in feeds.items())


def check(kiln, tmp, name):
    if name.startswith("refuse_"):
        return check_refusal(kiln, tmp, name[7:])
    m, good, bad = CASES[name]()
    check_case(kiln, tmp, name, m, good, bad, feeds_text)


def check_refusal(kiln, tmp, name):
    m, want = REFUSALS[name]()
    path = os.path.join(tmp, "refuse_" + name + ".onnx")
    onnx.save(m, path)
    odir = os.path.join(tmp, "refuse_" + name)
    os.makedirs(odir)
    proc = run([kiln, "compile", path, "-o", os.path.join(odir, "m.so")])
    lines = proc.stderr.strip().splitlines()
    if proc.returncode != 1 or len(lines) != 1 or not lines[0].startswith("kiln: error: ") or sanitizer_report(proc.stderr):
        raise CaseFailure(f"expected exit 1 and one error line, got {describe_failure(proc)}")
    for w in want:
        if w not in lines[0]:
            raise CaseFailure(f"the diagnostic does not say {w!r}: {lines[0]}")
    if os.listdir(odir):
        raise CaseFailure(f"compile failed but left {os.listdir(odir)}")
    print(f"  refused: {lines[0]}")


def main(argv=None):
    names = list(CASES) + ["refuse_" + r for r in REFUSALS]
    return cases_main("check_data_dependent", "NonZero / Compress / Unique with declared shapes vs ONNX Runtime.",
                      names, check, argv)


if __name__ == "__main__":
    sys.exit(main())
