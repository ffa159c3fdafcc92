#!/usr/bin/env python3
"""check_cse.py — common subexpression elimination (ir/passes/pass_cse.c) end to end.

    check_cse.py [--case NAME ...] [--list] [--kiln PATH] [--keep DIR]

layers: a 3-layer attention stack over token ids with dynamic axes batch and seq,
written as an exporter without a CSE pass of its own writes it: every layer
rebuilds the padding mask from the ids (Equal -> Unsqueeze -> Cast -> Mul, values
only known at run time) and reshapes the shared memory with its own
Shape -> Gather -> Unsqueeze -> Concat chain. Compiled with --dim seq=8
--max-batch 2:
  * the graph after the `cse` step (--dump-after) has fewer nodes than after
    `fold_constants`: one Equal and one Cast are left of three, and one
    Reshape of the memory (beside each layer's two of its own);
  * the artifact's output at batch 1 and 2 matches ONNX Runtime.
outputs: two graph outputs computing the same Relu, a third the same Sigmoid as
an intermediate: all three outputs keep their names and match ONNX Runtime, and
the graph after `cse` holds one Relu, one Sigmoid and an Identity copy.
"""
import os
import re
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from common import compare, describe_failure, ort_reference, run, sanitizer_report, save_inputs
from value_checks import CaseFailure, cases_main

HIDDEN, HEADS, LAYERS, VOCAB = 32, 4, 3, 50


def save(tmp, name, nodes, inputs, outputs, inits):
    g = h.make_graph(nodes, name, inputs, outputs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    path = os.path.join(tmp, name + ".onnx")
    onnx.save(m, path)
    return path


def layers_model(tmp):
    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op, ins, out, **attrs):
        nodes.append(h.make_node(op, ins, [out], name=out, **attrs))
        return out

    const("emb", rng.standard_normal((VOCAB, HIDDEN)).astype(np.float32))
    mem = node("Gather", ["emb", "ids"], "memory")
    hid = mem
    dh = HIDDEN // HEADS
    for k in range(LAYERS):
        p = f"l{k}/"
        # the padding mask, from the ids, every layer again
        eq = node("Equal", ["ids", const(p + "zero", np.array(0, np.int64))], p + "eq")
        un = node("Unsqueeze", [eq, const(p + "axes12", np.array([1, 2], np.int64))], p + "mask_u")
        cast = node("Cast", [un], p + "mask_f", to=T.FLOAT)
        mask = node("Mul", [cast, const(p + "neg", np.array(-1e4, np.float32))], p + "mask")
        # the heads' shape [b, s, HEADS, dh], from the memory's shape
        shp = node("Shape", [mem], p + "shape")
        dims = []
        for i in range(2):
            gi = node("Gather", [shp, const(p + f"i{i}", np.array(i, np.int64))], p + f"dim{i}")
            dims.append(node("Unsqueeze", [gi, const(p + f"ax{i}", np.array([0], np.int64))], p + f"dim{i}_u"))
        heads = const(p + "heads", np.array([HEADS, dh], np.int64))
        tgt = node("Concat", dims + [heads], p + "target", axis=0)
        back = node("Concat", dims + [const(p + "hidden", np.array([HIDDEN], np.int64))], p + "back", axis=0)
        # keys / values: the shared memory split into heads (the same in every layer)
        kv = node("Transpose", [node("Reshape", [mem, tgt], p + "mem_r")], p + "mem_h", perm=[0, 2, 1, 3])
        kt = node("Transpose", [kv], p + "mem_t", perm=[0, 1, 3, 2])
        wq = const(p + "wq", (rng.standard_normal((HIDDEN, HIDDEN)) / HIDDEN ** 0.5).astype(np.float32))
        q = node("Transpose", [node("Reshape", [node("MatMul", [hid, wq], p + "q"), tgt], p + "q_r")], p + "q_h",
                 perm=[0, 2, 1, 3])
        s = node("Div", [node("MatMul", [q, kt], p + "qk"), const(p + "scale", np.array(dh ** 0.5, np.float32))],
                 p + "scaled")
        att = node("Softmax", [node("Add", [s, mask], p + "masked")], p + "att", axis=-1)
        o = node("Transpose", [node("MatMul", [att, kv], p + "av")], p + "o_t", perm=[0, 2, 1, 3])
        o = node("Reshape", [o, back], p + "o")
        wo = const(p + "wo", (rng.standard_normal((HIDDEN, HIDDEN)) / HIDDEN ** 0.5).astype(np.float32))
        hid = node("Add", [hid, node("MatMul", [o, wo], p + "proj")], p + "out" if k < LAYERS - 1 else "out")
    return save(tmp, "layers", nodes, [h.make_tensor_value_info("ids", T.INT64, ["batch", "seq"])],
                [h.make_tensor_value_info("out", T.FLOAT, ["batch", "seq", HIDDEN])], inits)


def graph_after(kiln, model, stage, tmp, extra):
    """The printed graph after `stage`: {op: count} of its nodes."""
    proc = run([kiln, "compile", model, "-o", os.path.join(tmp, f"dump_{stage}.so"), f"--dump-after={stage}", *extra])
    if proc.returncode != 0 or sanitizer_report(proc.stderr):
        raise CaseFailure(f"compile --dump-after={stage}: {describe_failure(proc)}")
    ops = {}
    for op in re.findall(r"^  %\S+ = ([A-Za-z.]+)\(", proc.stdout, re.M):
        ops[op] = ops.get(op, 0) + 1
    return ops


def compile_and_compare(kiln, tmp, model, extra, feeds_for, batches):
    art = os.path.join(tmp, os.path.basename(model)[:-5] + ".so")
    proc = run([kiln, "compile", model, "-o", art, *extra])
    if proc.returncode != 0 or sanitizer_report(proc.stderr):
        raise CaseFailure(f"compile {' '.join(extra)}: {describe_failure(proc)}")
    for batch in batches:
        feeds = feeds_for(batch)
        tag = f"b{batch}"
        odir = os.path.join(tmp, f"out_{os.path.basename(art)}_{tag}")
        proc = run([kiln, "run", art, *save_inputs(tmp, tag, feeds), "--output-dir", odir])
        if proc.returncode != 0 or sanitizer_report(proc.stderr):
            raise CaseFailure(f"kiln run batch {batch}: {describe_failure(proc)}")
        for name, want in ort_reference(model, feeds).items():
            got = np.load(os.path.join(odir, name + ".npy"))
            ok, err, tol, why = compare(got, want)
            if not ok:
                raise CaseFailure(f"batch {batch}, output {name}: {why or f'max error {err:.3g} > {tol:.3g}'}")
            print(f"  batch {batch}: {name} {list(got.shape)} max error {err:.3g} (tol {tol:.3g})")


def case_layers(kiln, tmp):
    model = layers_model(tmp)
    extra = ["--dim", "seq=8", "--max-batch", "2"]
    folded = graph_after(kiln, model, "fold_constants", tmp, extra)
    merged = graph_after(kiln, model, "cse", tmp, extra)
    n_folded, n_merged = sum(folded.values()), sum(merged.values())
    print(f"  nodes after fold_constants {n_folded}, after cse {n_merged}")
    want = {"Equal": 1, "Cast": 1, "Softmax": LAYERS, "Reshape": 1 + 2 * LAYERS}
    wrong = {op: (merged.get(op, 0), n) for op, n in want.items() if merged.get(op, 0) != n}
    if folded.get("Equal", 0) != LAYERS or not n_merged < n_folded or wrong:
        raise CaseFailure(f"after fold_constants {folded}\nafter cse {merged}\n(op: (count, expected)) {wrong}")

    def feeds(batch):
        ids = np.random.default_rng(batch).integers(0, VOCAB, (batch, 8)).astype(np.int64)
        ids[:, -2:] = 0  # padding, so the mask matters
        return {"ids": ids}
    compile_and_compare(kiln, tmp, model, extra, feeds, (1, 2))


def case_outputs(kiln, tmp):
    x = h.make_tensor_value_info("x", T.FLOAT, ["batch", 6])
    nodes = [h.make_node("Relu", ["x"], ["y1"], name="relu_a"), h.make_node("Relu", ["x"], ["y2"], name="relu_b"),
             h.make_node("Sigmoid", ["x"], ["s"], name="sig_a"), h.make_node("Neg", ["s"], ["w"], name="neg"),
             h.make_node("Sigmoid", ["x"], ["z"], name="sig_b")]
    outs = [h.make_tensor_value_info(n, T.FLOAT, ["batch", 6]) for n in ("y1", "y2", "w", "z")]
    model = save(tmp, "outputs", nodes, [x], outs, [])
    extra = ["--max-batch", "2"]
    merged = graph_after(kiln, model, "cse", tmp, extra)
    print(f"  after cse {merged}")
    if merged != {"Relu": 1, "Identity": 1, "Sigmoid": 1, "Neg": 1}:
        raise CaseFailure(f"after cse {merged}, expected one Relu, its Identity copy, one Sigmoid and the Neg")
    compile_and_compare(kiln, tmp, model, extra,
                        lambda b: {"x": np.random.default_rng(b).standard_normal((b, 6)).astype(np.float32)}, (1, 2))


CASES = {name[5:]: fn for name, fn in list(globals().items()) if name.startswith("case_")}


def main(argv=None):
    return cases_main("check_cse", "common subexpression elimination vs ONNX Runtime.", CASES,
                      lambda kiln, tmp, name: CASES[name](kiln, tmp), argv)


if __name__ == "__main__":
    sys.exit(main())
