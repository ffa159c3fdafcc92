#!/usr/bin/env python3
"""check_inspect.py — `kiln inspect` against facts computed from the ONNX file.

    check_inspect.py MODEL.onnx [--kiln PATH]
    check_inspect.py --unsupported [--kiln PATH]

For a model: exit 0, every op type of the graph appears in the census, and the
parameter count (elements of all initializers) appears as an exact integer
(thousands separators "," "_" or "'" allowed). With --unsupported: a model with
two unsupported ops (StringNormalizer, com.example FrobnicateOp) — inspect reports both op
types and node names, whatever its exit status, without crashing.
"""
import argparse
import os
import re
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

from common import default_kiln, describe_failure, run, sanitizer_report


def param_count(model):
    return sum(int(np.prod(t.dims)) for t in model.graph.initializer)


def check_model(kiln, path):
    model = onnx.load(path, load_external_data=False)
    proc = run([kiln, "inspect", path])
    if proc.returncode != 0 or sanitizer_report(proc.stderr):
        print(f"FAIL kiln inspect {path}: {describe_failure(proc)}")
        return 1
    text = proc.stdout
    print(text.rstrip())
    ok = True
    for op in sorted({n.op_type for n in model.graph.node}):
        if not re.search(r"\b" + re.escape(op) + r"\b", text):
            print(f"FAIL: op census does not mention {op}")
            ok = False
    params = param_count(model)
    numbers = {int(re.sub(r"[,_']", "", m)) for m in re.findall(r"\d[\d,_']*", text)}
    if params not in numbers:
        print(f"FAIL: parameter count {params} not printed")
        ok = False
    print(f"{'PASS' if ok else 'FAIL'} kiln inspect {os.path.basename(path)} "
          f"({params} parameters)")
    return 0 if ok else 1


def check_unsupported(kiln):
    with tempfile.TemporaryDirectory(prefix="kiln-inspect-") as tmp:
        path = os.path.join(tmp, "unsupported.onnx")
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])
        graph = helper.make_graph(
            [helper.make_node("StringNormalizer", ["x"], ["d"], name="my_strnorm"),
             helper.make_node("FrobnicateOp", ["x"], ["f"], name="my_frob", domain="com.example")],
            "unsupported", [x],
            [helper.make_tensor_value_info("d", TensorProto.FLOAT, []),
             helper.make_tensor_value_info("f", TensorProto.FLOAT, [3, 3])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                        helper.make_opsetid("com.example", 1)])
        model.ir_version = 8
        onnx.save(model, path)
        proc = run([kiln, "inspect", path])
    text = proc.stdout + proc.stderr
    print(text.rstrip())
    if proc.returncode < 0 or sanitizer_report(proc.stderr):
        print(f"FAIL kiln inspect crashed: {describe_failure(proc)}")
        return 1
    missing = [s for s in ("StringNormalizer", "my_strnorm", "FrobnicateOp", "my_frob") if s not in text]
    if missing:
        print(f"FAIL: kiln inspect does not report {missing} as unsupported")
        return 1
    print("PASS kiln inspect reports both unsupported ops")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description="Check kiln inspect.")
    ap.add_argument("model", nargs="?")
    ap.add_argument("--unsupported", action="store_true")
    ap.add_argument("--kiln", default=default_kiln())
    args = ap.parse_args(argv)
    if not os.access(args.kiln, os.X_OK):
        print(f"check_inspect: {args.kiln}: no kiln binary (build first)", file=sys.stderr)
        return 1
    if args.unsupported:
        return check_unsupported(args.kiln)
    if not args.model:
        ap.error("a model or --unsupported is required")
    return check_model(args.kiln, args.model)


if __name__ == "__main__":
    sys.exit(main())
