"""check_index_rule.py — out-of-range indices read at run time (docs/ops.md).

Each case is one Gather / GatherElements / GatherND / ScatterElements / ScatterND whose indices are a
graph input, fed valid indices (negative ones included) and the out-of-range 1000000 and
-1000000000. Kiln's rule: an index in [-d, d) counts from the end when negative, as in ONNX; any
other names no element, so a gather reads 0 there and a scatter drops that update.

  rule_OP: `kiln compile` + `kiln run` and the reference interpreter (ref_run) both give what a
           numpy statement of the rule gives, exactly.
  check_OP: compiled with --check-indices, the same feed makes `kiln run` exit non-zero with one
           line naming the problem (KILN_ERR_INDEX, status 7) and write no output; a feed of valid
           indices (negative ones included) runs and matches ONNX Runtime.

    check_index_rule.py --ref-run build/tests/graph/ref_run [--kiln build/kiln] [--case NAME]
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

from common import TempDir, default_kiln, describe_failure, ort_reference, run, sanitizer_report, save_inputs

BIG, SMALL = 1000000, -1000000000
F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def model(op, inputs, out_shape, **attrs):
    """A one-node model: inputs are (name, onnx dtype, shape); output y of float32."""
    vis = [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs]
    node = helper.make_node(op, [n for n, _, _ in inputs], ["y"], **attrs)
    g = helper.make_graph([node], op.lower(), vis, [helper.make_tensor_value_info("y", F32, out_shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def rule(i, d):
    """The rule for one index: (wrapped index, valid)."""
    w = i + d if i < 0 else i
    return w, 0 <= w < d


# ---- the cases: (model, bad feed, good feed, numpy statement of the rule) ----

def gather_case():
    x = np.arange(15, dtype=np.float32).reshape(5, 3) + 1
    bad = np.array([0, -1, BIG, SMALL, 4, -5], np.int64)
    good = np.array([0, -1, 4, -5, 2, 3], np.int64)

    def numpy_rule(f):
        rows = [f["x"][rule(i, 5)[0]] if rule(i, 5)[1] else np.zeros(3, np.float32) for i in f["i"]]
        return np.stack(rows)
    m = model("Gather", [("x", F32, [5, 3]), ("i", I64, [6])], [6, 3], axis=0)
    return m, {"x": x, "i": bad}, {"x": x, "i": good}, numpy_rule


def gather_elements_case():
    x = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
    bad = np.array([[0, BIG, -1], [SMALL, 3, -4], [2, 1, BIG]], np.int64)
    good = np.array([[0, 3, -1], [-4, 3, -4], [2, 1, 0]], np.int64)

    def numpy_rule(f):
        y = np.zeros((3, 3), np.float32)
        for r in range(3):
            for c in range(3):
                w, ok = rule(f["i"][r, c], 4)
                y[r, c] = f["x"][r, w] if ok else 0
        return y
    m = model("GatherElements", [("x", F32, [3, 4]), ("i", I64, [3, 3])], [3, 3], axis=1)
    return m, {"x": x, "i": bad}, {"x": x, "i": good}, numpy_rule


def gather_nd_case():
    x = np.arange(12, dtype=np.float32).reshape(4, 3) + 1
    bad = np.array([[0, 0], [-1, 2], [BIG, 0], [1, SMALL], [3, -3]], np.int64)
    good = np.array([[0, 0], [-1, 2], [-4, 0], [1, -1], [3, -3]], np.int64)

    def numpy_rule(f):
        y = np.zeros(5, np.float32)
        for j, (a, b) in enumerate(f["i"]):
            (wa, oka), (wb, okb) = rule(a, 4), rule(b, 3)
            y[j] = f["x"][wa, wb] if oka and okb else 0
        return y
    m = model("GatherND", [("x", F32, [4, 3]), ("i", I64, [5, 2])], [5])
    return m, {"x": x, "i": bad}, {"x": x, "i": good}, numpy_rule


def scatter_numpy(f, rows, add):
    """ScatterND on axis 0 by rows of one index: each valid update applied in order."""
    y = f["x"].copy()
    for j, (i,) in enumerate(f["i"]):
        w, ok = rule(i, rows)
        if ok:
            y[w] = y[w] + f["u"][j] if add else f["u"][j]
    return y


def scatter_nd_case(reduction="none"):
    x = np.arange(15, dtype=np.float32).reshape(5, 3) + 1
    u = (np.arange(12, dtype=np.float32).reshape(4, 3) + 1) * 100
    bad = np.array([[1], [BIG], [SMALL], [-1]], np.int64)
    good = np.array([[1], [0], [-5], [-1]], np.int64)
    add = reduction == "add"
    if add:  # two updates of one row, one of them through a negative index
        bad[3, 0], good[3, 0] = -4, -4
    m = model("ScatterND", [("x", F32, [5, 3]), ("i", I64, [4, 1]), ("u", F32, [4, 3])], [5, 3],
              reduction=reduction)
    return m, {"x": x, "i": bad, "u": u}, {"x": x, "i": good, "u": u}, lambda f: scatter_numpy(f, 5, add)


def scatter_elements_case():
    x = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
    u = -(np.arange(6, dtype=np.float32).reshape(3, 2) + 1)
    bad = np.array([[0, BIG], [SMALL, -1], [2, -4]], np.int64)
    good = np.array([[0, 3], [-3, -1], [2, -4]], np.int64)

    def numpy_rule(f):
        y = f["x"].copy()
        for r in range(3):
            for c in range(2):
                w, ok = rule(f["i"][r, c], 4)
                if ok:
                    y[r, w] = f["u"][r, c]
        return y
    m = model("ScatterElements", [("x", F32, [3, 4]), ("i", I64, [3, 2]), ("u", F32, [3, 2])], [3, 4],
              axis=1)
    return m, {"x": x, "i": bad, "u": u}, {"x": x, "i": good, "u": u}, numpy_rule


OPS = {
    "gather": gather_case,
    "gather_elements": gather_elements_case,
    "gather_nd": gather_nd_case,
    "scatter_nd": scatter_nd_case,
    "scatter_nd_add": lambda: scatter_nd_case("add"),
    "scatter_elements": scatter_elements_case,
}


class CaseFailure(Exception):
    pass


def compile_model(kiln, tmp, name, m, flags):
    path = os.path.join(tmp, name + ".onnx")
    onnx.save(m, path)
    out = os.path.join(tmp, name + ".so")
    proc = run([kiln, "compile", path, "-o", out, *flags])
    if proc.returncode != 0 or sanitizer_report(proc.stderr):
        raise CaseFailure(f"kiln compile {' '.join(flags)}: {describe_failure(proc)}")
    return path, out


def kiln_run(kiln, tmp, tag, out, feeds):
    odir = os.path.join(tmp, tag + "_out")
    proc = run([kiln, "run", out, *save_inputs(tmp, tag, feeds), "--output-dir", odir])
    return proc, odir


def ref_run(ref, tmp, path, feeds):
    """The reference interpreter on feeds (in graph-input order); returns output y."""
    d = os.path.join(tmp, "ref_" + os.path.basename(path))
    os.makedirs(d, exist_ok=True)
    for i, v in enumerate(feeds.values()):
        np.ascontiguousarray(v).tofile(os.path.join(d, f"in{i}.bin"))
    proc = run([ref, path, "1", d])
    if proc.returncode != 0:
        raise CaseFailure(f"ref_run: {describe_failure(proc)}")
    return np.fromfile(os.path.join(d, "out0.bin"), dtype=np.float32)


def check_rule(kiln, ref, tmp, name, op):
    m, bad, _, numpy_rule = OPS[op]()
    path, out = compile_model(kiln, tmp, name, m, [])
    want = numpy_rule(bad)
    proc, odir = kiln_run(kiln, tmp, name, out, bad)
    if proc.returncode != 0 or sanitizer_report(proc.stderr):
        raise CaseFailure(f"kiln run: {describe_failure(proc)}")
    got = np.load(os.path.join(odir, "y.npy"))
    if not np.array_equal(got, want):
        raise CaseFailure(f"kiln run gives\n{got}\nthe rule\n{want}")
    print(f"  kiln run: {want.size} elements as the rule says")
    got = ref_run(ref, tmp, path, bad).reshape(want.shape)
    if not np.array_equal(got, want):
        raise CaseFailure(f"the reference interpreter gives\n{got}\nthe rule\n{want}")
    print("  reference interpreter: as the rule says")


def inspect(kiln, artifact):
    proc = run([kiln, "inspect", artifact])
    if proc.returncode != 0:
        raise CaseFailure(f"kiln inspect {artifact}: {describe_failure(proc)}")
    return proc.stdout


def check_checked(kiln, tmp, name, op):
    m, bad, good, _ = OPS[op]()
    _, plain = compile_model(kiln, tmp, name + "_plain", m, [])
    text = inspect(kiln, plain)
    if "abi: 1.3" not in text or "check)" in text:
        raise CaseFailure(f"without --check-indices the artifact has a check or is not ABI 1.3:\n{text}")
    path, out = compile_model(kiln, tmp, name, m, ["--check-indices"])
    text = inspect(kiln, out)
    if "abi: 1.5" not in text or text.count("(index check)") != 1:
        raise CaseFailure(f"with --check-indices: expected ABI 1.5 and one index check step:\n{text}")
    print("  without the option: no check step (ABI 1.3); with it: one index check step (ABI 1.5)")
    proc, odir = kiln_run(kiln, tmp, name + "_bad", out, bad)
    lines = proc.stderr.strip().splitlines()
    if (proc.returncode == 0 or sanitizer_report(proc.stderr) or len(lines) != 1
            or "index is out of range" not in lines[0] or "status 7" not in lines[0]):
        raise CaseFailure(f"out-of-range indices: expected one line with KILN_ERR_INDEX, got "
                          f"{describe_failure(proc)}")
    if os.path.isdir(odir) and os.listdir(odir):
        raise CaseFailure(f"the refused run wrote {os.listdir(odir)}")
    print(f"  out of range: {lines[0]}")
    proc, odir = kiln_run(kiln, tmp, name + "_good", out, good)
    if proc.returncode != 0 or sanitizer_report(proc.stderr):
        raise CaseFailure(f"valid indices: {describe_failure(proc)}")
    want = ort_reference(path, good)["y"]
    got = np.load(os.path.join(odir, "y.npy"))
    if not np.array_equal(got, want):
        raise CaseFailure(f"valid indices: kiln gives\n{got}\nONNX Runtime\n{want}")
    print("  valid indices (negative ones too): outputs match ONNX Runtime")


CASES = {f"rule_{op}": op for op in OPS}
CASES.update({f"check_{op}": op for op in OPS})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", action="append", choices=list(CASES))
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--kiln", default=default_kiln())
    ap.add_argument("--ref-run", default=None)
    ap.add_argument("--keep", default=None)
    args = ap.parse_args()
    if args.list:
        print("\n".join(CASES))
        return 0
    passed = failed = 0
    with TempDir(args.keep, prefix="kiln-index-rule-") as tmp:
        for name in args.case or list(CASES):
            print(f"{name}:")
            try:
                if name.startswith("rule_"):
                    if not args.ref_run:
                        raise CaseFailure("--ref-run is required")
                    check_rule(args.kiln, args.ref_run, tmp, name, CASES[name])
                else:
                    check_checked(args.kiln, tmp, name, CASES[name])
                print(f"PASS {name}")
                passed += 1
            except CaseFailure as e:
                print(f"FAIL {name}: {e}")
                failed += 1
    print(f"check_index_rule: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
