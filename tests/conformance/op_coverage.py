#!/usr/bin/env python3
"""op_coverage.py — how many ONNX op types Kiln registers (ir/graph/ops.def, internal kiln.* ops left
out) and how many of them occur in node tests that pass (expected_pass.txt; `_expanded` tests left
out, since their models hold the expansion, not the op).

    python3 tests/conformance/op_coverage.py
"""
import os
import re

import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODE = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")


def registered():
    text = open(os.path.join(ROOT, "ir", "graph", "ops.def")).read()
    names = {m.group(1) for m in re.finditer(r'^KN_OP\([A-Z0-9_]+, "([^"]+)"', text, re.M)}
    return {n for n in names if not n.startswith("kiln.")}


def expected():
    plain, bound = set(), set()
    for line in open(os.path.join(ROOT, "tests", "conformance", "expected_pass.txt")):
        parts = line.split()
        if parts and not parts[0].startswith("#"):
            (bound if len(parts) > 1 else plain).add(parts[0])
    return plain, bound


def ops_in(tests):
    ops = set()
    for t in tests:
        if "_expanded" in t:
            continue
        for n in onnx.load(os.path.join(NODE, t, "model.onnx")).graph.node:
            ops.add(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}")
    return ops


def main():
    reg = registered()
    plain, bound = expected()
    p, b = ops_in(plain) & reg, ops_in(bound) & reg
    print(f"ONNX op types registered in ir/graph/ops.def: {len(reg)}")
    print(f"  in node tests that pass: {len(p)}; counting tests that pass with bound inputs: {len(p | b)}")
    print(f"  in no passing test: {', '.join(sorted(reg - p - b)) or '-'}")


if __name__ == "__main__":
    main()
