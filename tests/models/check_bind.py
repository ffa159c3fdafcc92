#!/usr/bin/env python3
"""check_bind.py — `kiln compile --bind NAME=FILE` against ONNX Runtime.

    check_bind.py [--case NAME ...] [--list] [--kiln PATH] [--models DIR] [--keep DIR]

Each case builds a small model whose shape-deciding integer inputs (Reshape's
shape, ReduceSum's axes, Pad's pads, Range's bounds) are graph inputs, and checks:
  * without --bind, `kiln compile` refuses it and names the node and input;
  * with those inputs bound (from .npy and TensorProto .pb files), it compiles,
    the header no longer declares the bound inputs, `kiln run` takes the other
    inputs only, and every output matches ONNX Runtime fed with all inputs
    (max|kiln - ort| <= 1e-4 * max(1, max|ort|)), at every batch asked for;
  * `kiln tune` accepts the same --bind, and the compile replaying its log matches too;
  * `kiln run` given a bound input as well refuses it (the artifact has no such input).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from common import compare, describe_failure, ort_reference, run, sanitizer_report
from value_checks import CaseFailure, cases_main


def vi(name, shape, dtype=T.FLOAT):
    if shape is None:
        return h.make_value_info(name, h.make_tensor_type_proto(dtype, shape=None))
    return h.make_tensor_value_info(name, dtype, shape)


def model(nodes, inputs, outputs, opset=18):
    g = h.make_graph(nodes, "bind", inputs, outputs)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    return m


rng = np.random.default_rng(0)


def case_reshape_reduce_pad():
    """Reshape(x, shape) -> ReduceSum(axes, keepdims) -> Pad(pads): three bound inputs."""
    nodes = [h.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
             h.make_node("ReduceSum", ["r", "axes"], ["s"], name="reduce", keepdims=1),
             h.make_node("Pad", ["s", "pads"], ["y"], name="pad", mode="constant")]
    m = model(nodes, [vi("x", [2, 3, 4]), vi("shape", [2], T.INT64), vi("axes", [1], T.INT64),
                      vi("pads", [4], T.INT64)], [vi("y", None)])
    free = {"x": rng.standard_normal((2, 3, 4)).astype(np.float32)}
    bound = {"shape": np.array([6, 4], np.int64), "axes": np.array([1], np.int64),
             "pads": np.array([1, 0, 2, 3], np.int64)}
    return m, free, bound, "reshape", [1]


def case_range_batch():
    """A bound Range length and Reshape target beside an input with the batch dim N."""
    nodes = [h.make_node("Range", ["start", "limit", "delta"], ["idx"], name="range"),
             h.make_node("Cast", ["idx"], ["idxf"], to=T.FLOAT),
             h.make_node("Reshape", ["x", "shape"], ["xr"], name="reshape"),
             h.make_node("Add", ["xr", "idxf"], ["y"])]
    m = model(nodes, [vi("x", ["N", 2, 3]), vi("start", [], T.INT64), vi("limit", [], T.INT64),
                      vi("delta", [], T.INT64), vi("shape", [2], T.INT64)], [vi("y", None)])
    bound = {"start": np.array(0, np.int64), "limit": np.array(6, np.int64),
             "delta": np.array(1, np.int64), "shape": np.array([0, 6], np.int64)}
    free = {"x": None}  # generated per batch
    return m, free, bound, "range", [1, 3]


def case_composite_after_bind():
    """A composite (InstanceNormalization, rewritten by kn_pass_decompose) behind a bound Reshape
    target, its scale and bias bound too: the rewrite runs after binding."""
    nodes = [h.make_node("Reshape", ["x", "shape"], ["xr"], name="reshape"),
             h.make_node("InstanceNormalization", ["xr", "scale", "bias"], ["y"], name="inorm", epsilon=1e-3)]
    m = model(nodes, [vi("x", ["N", 2, 3]), vi("shape", [3], T.INT64), vi("scale", [3]), vi("bias", [3])],
              [vi("y", None)])
    bound = {"shape": np.array([0, 3, 2], np.int64), "scale": np.array([0.5, -1.0, 2.0], np.float32),
             "bias": np.array([0.1, 0.0, -0.3], np.float32)}
    free = {"x": None}  # generated per batch
    return m, free, bound, "reshape", [1, 3]


CASES = {name[5:]: fn for name, fn in list(globals().items()) if name.startswith("case_")}


def check(kiln, tmp, name):
    m, free, bound, refused_node, batches = CASES[name]()
    path = os.path.join(tmp, name + ".onnx")
    onnx.save(m, path)
    out = os.path.join(tmp, name + ".so")
    max_batch = max(batches)

    # 1. refused without --bind, naming the node
    proc = run([kiln, "compile", path, "-o", out, "--max-batch", str(max_batch)])
    if proc.returncode != 1 or refused_node not in proc.stderr or "must be a constant" not in proc.stderr:
        raise CaseFailure(f"compile without --bind: expected a refusal naming '{refused_node}', got "
                          f"{describe_failure(proc)}")
    print(f"  without --bind: {proc.stderr.strip().splitlines()[0]}")

    # 2. bind: alternate .npy and .pb files
    flags = []
    for i, (k, v) in enumerate(sorted(bound.items())):
        if i % 2 == 0:
            f = os.path.join(tmp, f"{name}_{k}.npy")
            np.save(f, v)
        else:
            f = os.path.join(tmp, f"{name}_{k}.pb")
            with open(f, "wb") as fp:
                fp.write(numpy_helper.from_array(v, k).SerializeToString())
        flags += ["--bind", f"{k}={f}"]
    proc = run([kiln, "compile", path, "-o", out, "--max-batch", str(max_batch), *flags])
    if proc.returncode != 0 or sanitizer_report(proc.stderr):
        raise CaseFailure(f"compile with {' '.join(flags)}: {describe_failure(proc)}")
    header = open(os.path.join(tmp, name + ".h")).read()
    declared = [ln for ln in header.splitlines() if ln.startswith("/* input ")]
    for k in bound:
        if any(f'"{k}"' in ln for ln in declared):
            raise CaseFailure(f"the header still declares bound input '{k}': {declared}")
    for k in free:
        if not any(f'"{k}"' in ln for ln in declared):
            raise CaseFailure(f"the header does not declare input '{k}': {declared}")

    # 3. run each batch; compare with ORT fed every input
    for batch in batches:
        feeds = {}
        for k, v in free.items():
            feeds[k] = v if v is not None else rng.standard_normal((batch, 2, 3)).astype(np.float32)
        args = []
        for k, v in feeds.items():
            f = os.path.join(tmp, f"{name}_in_{k}_{batch}.npy")
            np.save(f, v)
            args += ["--input", f"{k}={f}"]
        odir = os.path.join(tmp, f"{name}_out_{batch}")
        proc = run([kiln, "run", out, *args, "--output-dir", odir, "--threads", "2"])
        if proc.returncode != 0 or sanitizer_report(proc.stderr):
            raise CaseFailure(f"kiln run (batch {batch}): {describe_failure(proc)}")
        want = ort_reference(path, {**feeds, **bound})
        for oname, w in want.items():
            got = np.load(os.path.join(odir, oname + ".npy"))
            ok, err, tol, why = compare(got, w)
            if not ok:
                raise CaseFailure(f"output '{oname}' (batch {batch}): {why or f'max error {err:.3g} > {tol:.3g}'}")
            print(f"  batch {batch}: output '{oname}' {list(got.shape)} max error {err:.3g} (tol {tol:.3g})")

    # 4. kiln tune takes the same --bind; the compile replaying its log still matches
    if name == "reshape_reduce_pad":
        log = os.path.join(tmp, name + ".jsonl")
        proc = run([kiln, "tune", path, "--log", log, "--trials", "2", "--threads", "1", "--keep-noisy", *flags], timeout=300)
        if proc.returncode != 0 or sanitizer_report(proc.stderr):
            raise CaseFailure(f"kiln tune with {' '.join(flags)}: {describe_failure(proc)}")
        tuned = os.path.join(tmp, name + "_tuned.so")
        proc = run([kiln, "compile", path, "-o", tuned, "--tuning-log", log, *flags])
        odir = os.path.join(tmp, f"{name}_tuned_out")
        proc2 = run([kiln, "run", tuned, *args, "--output-dir", odir]) if proc.returncode == 0 else proc
        if proc2.returncode != 0 or sanitizer_report(proc.stderr + proc2.stderr):
            raise CaseFailure(f"compile/run with the tuning log: {describe_failure(proc2)}")
        for oname, w in want.items():
            ok, err, tol, why = compare(np.load(os.path.join(odir, oname + ".npy")), w)
            if not ok:
                raise CaseFailure(f"tuned output '{oname}': {why or f'max error {err:.3g} > {tol:.3g}'}")
        print("  kiln tune --bind + compile --tuning-log: outputs match")

    # 5. the artifact no longer takes a bound input
    k = sorted(bound)[0]
    f = os.path.join(tmp, f"{name}_extra.npy")
    np.save(f, bound[k])
    proc = run([kiln, "run", out, *args, "--input", f"{k}={f}", "--output-dir", os.path.join(tmp, "extra")])
    if proc.returncode == 0 or k not in proc.stderr:
        raise CaseFailure(f"kiln run with bound input '{k}' given: expected a diagnostic naming it, got "
                          f"{describe_failure(proc)}")


def main(argv=None):
    return cases_main("check_bind", "kiln compile --bind vs ONNX Runtime.", CASES, check, argv)


if __name__ == "__main__":
    sys.exit(main())
