#!/usr/bin/env python3
"""check_unsupported.py — every unsupported op of a model is reported in one
run (issue #3): `kiln inspect` lists each unsupported node by name and op on
stdout and exits 1 with one summary error line; `kiln compile` prints one
"kiln: error:" line per unsupported node (naming node and op) and exits 1,
writing nothing.

    check_unsupported.py KILN

The model mixes an unknown default-domain op, an op of a custom domain, an
If (supported: its branches are inlined), unsupported ops in a chain (one feeding
the next), and supported ops before and after them.
"""
import os
import subprocess
import sys
import tempfile

from onnx import TensorProto, helper


def build(path):
    f = TensorProto.FLOAT

    def branch(name):
        return helper.make_graph([helper.make_node("NonMaxSuppression", ["x"], [name], name="inner_" + name)], name, [],
                                 [helper.make_tensor_value_info(name, f, None)])

    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="ok_relu"),
        helper.make_node("NonMaxSuppression", ["r"], ["d"], name="un_det"),
        helper.make_node("NoSuchOp", ["d"], ["n"], name="un_chained"),  # fed by an unsupported op
        helper.make_node("Neg", ["n"], ["out1"], name="ok_after"),
        helper.make_node("Frobnicate", ["x"], ["out2"], name="un_custom", domain="com.example"),
        helper.make_node("If", ["b"], ["out3"], name="un_if", then_branch=branch("t"), else_branch=branch("e")),
    ]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", f, [3, 3]),
                                       helper.make_tensor_value_info("b", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info(o, f, None) for o in ["out1", "out2", "out3"]])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    with open(path, "wb") as fp:
        fp.write(m.SerializeToString())


# If is supported (its branches are inlined); unsupported ops inside its
# branches are reported when the If is expanded, not in this census.
EXPECTED = [("un_det", "NonMaxSuppression"), ("un_chained", "NoSuchOp"), ("un_custom", "Frobnicate")]


def main():
    kiln = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("KILN", "kiln")
    fails = []
    with tempfile.TemporaryDirectory(prefix="kiln-unsupported-") as tmp:
        model = os.path.join(tmp, "m.onnx")
        build(model)
        p = subprocess.run([kiln, "inspect", model], capture_output=True, text=True, timeout=60)
        if p.returncode != 1:
            fails.append(f"inspect: exit {p.returncode}, expected 1")
        if f"unsupported: {len(EXPECTED)} node(s)" not in p.stdout:
            fails.append(f"inspect: no 'unsupported: {len(EXPECTED)} node(s)' line")
        for node, op in EXPECTED:
            if not any(node in line and f"'{op}'" in line for line in p.stdout.splitlines()):
                fails.append(f"inspect: node '{node}' (op {op}) not listed")
        if len(p.stderr.splitlines()) != 1 or not p.stderr.startswith("kiln: error: "):
            fails.append(f"inspect: expected one error line on stderr, got {p.stderr!r}")

        out = os.path.join(tmp, "out")
        os.makedirs(out)
        p = subprocess.run([kiln, "compile", model, "-o", os.path.join(out, "m.so")], capture_output=True,
                           text=True, timeout=60)
        lines = p.stderr.splitlines()
        if p.returncode != 1:
            fails.append(f"compile: exit {p.returncode}, expected 1")
        if len(lines) != len(EXPECTED) or not all(line.startswith("kiln: error: ") for line in lines):
            fails.append(f"compile: expected {len(EXPECTED)} error lines, got {p.stderr!r}")
        for node, op in EXPECTED:
            if not any(f"'{node}'" in line and f"'{op}'" in line for line in lines):
                fails.append(f"compile: no error line names node '{node}' and op '{op}'")
        if os.listdir(out):
            fails.append(f"compile: left {os.listdir(out)}")
    for f in fails:
        print("FAIL " + f)
    if not fails:
        print("PASS every unsupported op reported in one run by inspect and compile")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
