#!/usr/bin/env python3
"""check_dim.py — `kiln compile --dim NAME=VALUE` (a symbolic dim fixed by name).

    check_dim.py [--case NAME ...] [--list] [--kiln PATH] [--keep DIR]

transformer: a 1-layer Transformer encoder exported from PyTorch (with
$KILN_TORCH_PYTHON, default /usr/bin/python3) with dynamic axes batch and seq
on its input and output:
  * without --dim, `kiln compile` refuses it in one line that names the fix;
  * with --dim seq=S for two values of S (batch left symbolic, --max-batch 2)
    it compiles, and `kiln run` at batch 1 and 2 matches ONNX Runtime at
    sequence length S (max|kiln - ort| <= 1e-4 * max(1, max|ort|));
  * with --dim batch=2 as well, the batch is static: the header declares
    [2, S] and no batch symbol is left (MODEL_MAX_BATCH 1), and it matches too;
  * `kiln inspect` and `kiln tune` take the same --dim (a compile replaying
    the tune's log matches too).
The other cases are bad uses, each refused with exactly one line on stderr, the
expected exit status, and no artifact or header written.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from common import compare, describe_failure, ort_reference, run, sanitizer_report, save_inputs
from value_checks import CaseFailure, cases_main

TORCH_PYTHON = os.environ.get("KILN_TORCH_PYTHON", "/usr/bin/python3")
MODELS_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models")

# The encoder layer of models/export.py; positions follow the input's length
# (tiny_bert's are a fixed buffer, so its sequence length is static).
EXPORT = r'''
import sys
sys.path.insert(0, sys.argv[2])
import torch
import torch.nn as nn
from export import EncoderLayer

class DynSeqEncoder(nn.Module):
    def __init__(self, vocab=100, max_seq=32, hidden=32, heads=2, ffn=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_seq, hidden)
        self.ln = nn.LayerNorm(hidden)
        self.layer = EncoderLayer(hidden, heads, ffn)

    def forward(self, input_ids):
        positions = torch.arange(input_ids.shape[1]).unsqueeze(0)
        return self.layer(self.ln(self.tok(input_ids) + self.pos(positions)))

torch.manual_seed(0)
model = DynSeqEncoder().eval()
with torch.no_grad():
    torch.onnx.export(model, (torch.randint(0, 100, (1, 16)),), sys.argv[1], input_names=["input_ids"],
                      output_names=["output"], opset_version=17,
                      dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "output": {0: "batch", 1: "seq"}})
'''


def export_transformer(tmp):
    path = os.path.join(tmp, "dynseq.onnx")
    if not os.path.exists(path):
        proc = subprocess.run([TORCH_PYTHON, "-W", "ignore", "-c", EXPORT, path, MODELS_PY],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            raise CaseFailure(f"export with {TORCH_PYTHON} failed:\n{proc.stdout[-3000:]}")
    return path


def small_model(tmp, name, nodes, inputs, outputs, inits=(), value_info=()):
    g = h.make_graph(nodes, name, inputs, outputs, list(inits), value_info=list(value_info))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    path = os.path.join(tmp, name + ".onnx")
    onnx.save(m, path)
    return path


def expect_refusal(kiln, args, out, status, line):
    """`kiln ARGS` exits with `status`, prints exactly `line` on stderr, writes neither out nor its header."""
    for f in (out, out[:-3] + ".h"):
        if os.path.exists(f):
            os.unlink(f)
    proc = run([kiln, *args])
    got = proc.stderr.strip().splitlines()
    if proc.returncode != status or got != [line] or sanitizer_report(proc.stderr):
        raise CaseFailure(f"kiln {' '.join(args)}: expected exit {status} and the one line\n  {line}\ngot "
                          f"{describe_failure(proc)}")
    for f in (out, out[:-3] + ".h"):
        if os.path.exists(f):
            raise CaseFailure(f"kiln {' '.join(args)} failed but wrote {f}")
    print(f"  {' '.join(args[2:])}: {line}")


def run_and_compare(kiln, tmp, model, artifact, batch, seq, tag):
    ids = np.random.default_rng(seq * 10 + batch).integers(0, 100, (batch, seq)).astype(np.int64)
    feeds = {"input_ids": ids}
    odir = os.path.join(tmp, f"out_{tag}")
    proc = run([kiln, "run", artifact, *save_inputs(tmp, tag, feeds), "--output-dir", odir, "--threads", "2"])
    if proc.returncode != 0 or sanitizer_report(proc.stderr):
        raise CaseFailure(f"kiln run {tag}: {describe_failure(proc)}")
    want = ort_reference(model, feeds)["output"]
    got = np.load(os.path.join(odir, "output.npy"))
    ok, err, tol, why = compare(got, want)
    if not ok:
        raise CaseFailure(f"{tag}: {why or f'max error {err:.3g} > {tol:.3g}'}")
    print(f"  {tag}: output {list(got.shape)} max error {err:.3g} (tol {tol:.3g})")


def case_transformer(kiln, tmp):
    model = export_transformer(tmp)
    out = os.path.join(tmp, "t.so")
    expect_refusal(kiln, ["compile", model, "-o", out], out, 1,
                   f"kiln: error: {model}: input 'input_ids' has symbolic dim 'seq' at index 1; Kiln supports "
                   "a symbolic batch dim only; fix it with --dim seq=VALUE")
    for seq in (8, 24):
        art = os.path.join(tmp, f"seq{seq}.so")
        proc = run([kiln, "compile", model, "-o", art, "--dim", f"seq={seq}", "--max-batch", "2"])
        if proc.returncode != 0 or sanitizer_report(proc.stderr):
            raise CaseFailure(f"compile --dim seq={seq}: {describe_failure(proc)}")
        for batch in (1, 2):
            run_and_compare(kiln, tmp, model, art, batch, seq, f"seq{seq}_batch{batch}")
    art = os.path.join(tmp, "static.so")
    proc = run([kiln, "compile", model, "-o", art, "--dim", "batch=2", "--dim", "seq=8"])
    if proc.returncode != 0 or sanitizer_report(proc.stderr):
        raise CaseFailure(f"compile --dim batch=2 --dim seq=8: {describe_failure(proc)}")
    header = open(art[:-3] + ".h").read()
    if "input_ids  int64 [2, 8]" not in header or "#define MODEL_MAX_BATCH 1" not in header:
        raise CaseFailure("--dim batch=2 --dim seq=8: the header does not declare a static input_ids [2, 8]")
    run_and_compare(kiln, tmp, model, art, 2, 8, "static_batch2_seq8")
    proc = run([kiln, "inspect", model, "--dim", "seq=8"])
    if proc.returncode != 0 or "input: input_ids int64 [N*1, 8]" not in proc.stdout:
        raise CaseFailure(f"inspect --dim seq=8: {describe_failure(proc)}\n{proc.stdout}")
    log = os.path.join(tmp, "t.jsonl")
    proc = run([kiln, "tune", model, "--log", log, "--dim", "seq=8", "--trials", "0", "--model-check", "0",
                "--confirm", "0", "--threads", "1", "--keep-noisy"], timeout=300)
    art = os.path.join(tmp, "tuned.so")
    if proc.returncode == 0:
        proc = run([kiln, "compile", model, "-o", art, "--dim", "seq=8", "--tuning-log", log])
    if proc.returncode != 0 or sanitizer_report(proc.stderr):
        raise CaseFailure(f"tune --dim seq=8, then compile --tuning-log: {describe_failure(proc)}")
    run_and_compare(kiln, tmp, model, art, 1, 8, "tuned_seq8_batch1")
    proc = run([kiln, "tune", model, "--log", log, "--dim", "sq=8"])
    want = f"kiln: error: {model}: --dim 'sq': the model has no symbolic dim 'sq'; its symbolic dims: batch, seq"
    if proc.returncode != 1 or proc.stderr.strip() != want:
        raise CaseFailure(f"tune --dim sq=8: expected\n  {want}\ngot {describe_failure(proc)}")
    print("  inspect --dim seq=8, tune --dim seq=8 / sq=8: as compile")


def bad_dim(value, status, message):
    """A case: compile the Transformer with --dim VALUE; refused with `message` (after "kiln: error: ")."""
    def case(kiln, tmp):
        model = export_transformer(tmp)
        out = os.path.join(tmp, "bad.so")
        args = ["compile", model, "-o", out]
        for v in value if isinstance(value, list) else [value]:
            args += ["--dim", v]
        expect_refusal(kiln, args, out, status, "kiln: error: " + message.replace("MODEL", model))
    return case


RANGE = "the value must be from 1 to 1099511627776"
case_unknown_name = bad_dim("sq=4", 1, "MODEL: --dim 'sq': the model has no symbolic dim 'sq'; its symbolic dims: "
                                       "batch, seq")
case_not_numeric = bad_dim("seq=abc", 2, "--dim 'seq=abc': expected NAME=VALUE with VALUE a whole number "
                                         "(e.g. --dim seq=128)")
case_no_value = bad_dim("seq", 2, "--dim 'seq': expected NAME=VALUE with VALUE a whole number (e.g. --dim seq=128)")
case_zero = bad_dim("seq=0", 2, "--dim 'seq=0': " + RANGE)
case_negative = bad_dim("seq=-3", 2, "--dim 'seq=-3': " + RANGE)
case_overflow = bad_dim("seq=99999999999999999999", 2, "--dim 'seq=99999999999999999999': " + RANGE)
case_twice = bad_dim(["seq=8", "batch=2", "seq=16"], 2, "--dim 'seq=16': seq is given twice, as 8 and as 16")
case_unpinned = bad_dim("batch=2", 1, "MODEL: input 'input_ids' has symbolic dim 'seq' at index 1; Kiln supports a "
                                      "symbolic batch dim only; fix it with --dim seq=VALUE")


def case_conflict(kiln, tmp):
    """x [seq, 4] + a constant [8, 4]: seq=16 conflicts in shape inference, and the line names the pin."""
    model = small_model(tmp, "conflict", [h.make_node("Add", ["x", "c"], ["y"], name="add_pos")],
                        [h.make_tensor_value_info("x", T.FLOAT, ["seq", 4])],
                        [h.make_tensor_value_info("y", T.FLOAT, ["seq", 4])],
                        [numpy_helper.from_array(np.ones((8, 4), np.float32), "c")])
    out = os.path.join(tmp, "conflict.so")
    expect_refusal(kiln, ["compile", model, "-o", out, "--dim", "seq=16"], out, 1,
                   "kiln: error: with --dim seq=16: node 'add_pos' (Add): shapes [16,4] and [8,4] do not broadcast "
                   "(input 1)")


def case_output_declared(kiln, tmp):
    """Relu(x [seq]) sliced to 8 elements, the output declared [seq]: seq=16 contradicts the output's
    declared dim; seq=8 compiles (the value_info declaring 'seq' on the Relu's output is read by nothing)."""
    model = small_model(tmp, "outdecl", [h.make_node("Relu", ["x"], ["r"], name="relu"),
                                         h.make_node("Slice", ["r", "st", "en"], ["y"], name="cut")],
                        [h.make_tensor_value_info("x", T.FLOAT, ["seq"])],
                        [h.make_tensor_value_info("y", T.FLOAT, ["seq"])],
                        [numpy_helper.from_array(np.array([0], np.int64), "st"),
                         numpy_helper.from_array(np.array([8], np.int64), "en")],
                        [h.make_tensor_value_info("r", T.FLOAT, ["seq"])])
    out = os.path.join(tmp, "outdecl.so")
    expect_refusal(kiln, ["compile", model, "-o", out, "--dim", "seq=16"], out, 1,
                   "kiln: error: with --dim seq=16: output 'y' declares dim 0 as 'seq', but its shape is [8]")
    proc = run([kiln, "compile", model, "-o", out, "--dim", "seq=8"])
    if proc.returncode != 0 or sanitizer_report(proc.stderr):
        raise CaseFailure(f"compile --dim seq=8 (consistent): {describe_failure(proc)}")
    print("  --dim seq=8: compiles")


CASES = {name[5:]: fn for name, fn in list(globals().items()) if name.startswith("case_")}


def main(argv=None):
    return cases_main("check_dim", "kiln compile --dim NAME=VALUE.", CASES,
                      lambda kiln, tmp, name: CASES[name](kiln, tmp), argv)


if __name__ == "__main__":
    sys.exit(main())
