#!/usr/bin/env python3
"""control_models.py — small models exercising the composite ops Kiln expands
before compiling (ir/passes/pass_inline_control.c): If, Loop and Scan inlined or
unrolled, RNN / LSTM / GRU decomposed per time step, DFT / STFT as
contractions. Each "check" case is written to DIR/NAME.onnx and compared
with ONNX Runtime by check_model.py; each "fail" case must be refused by
`kiln compile` with exit status 1 and a one-line diagnostic containing the
expected text (no crash, no output file).

  control_models.py --list            the case names
  control_models.py --case NAME       build and check one case
  control_models.py                   every case
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(7)


def vi(name, shape, dtype=T.FLOAT):
    if shape is None:
        return h.make_value_info(name, h.make_tensor_type_proto(dtype, shape=None))
    return h.make_tensor_value_info(name, dtype, shape)


def const(name, array):
    return onnx.numpy_helper.from_array(np.asarray(array), name)


def randf(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = h.make_graph(nodes, "control", inputs, outputs, list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


# ---- control flow ----

def case_loop_static():
    """Loop with a constant trip count: a carried sum, a scan output, the
    iteration number and an outer value read inside the body."""
    body = h.make_graph(
        [h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
         h.make_node("Mul", ["w", "fi"], ["wi"]),
         h.make_node("Add", ["acc_in", "wi"], ["acc_out"]),
         h.make_node("Tanh", ["acc_out"], ["scan"]),
         h.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [vi("i", [], T.INT64), vi("c_in", [], T.BOOL), vi("acc_in", [3, 4])],
        [vi("c_out", [], T.BOOL), vi("acc_out", [3, 4]), vi("scan", [3, 4])])
    nodes = [h.make_node("Relu", ["x"], ["w"]),
             h.make_node("Loop", ["trips", "", "x"], ["acc", "stacked"], body=body)]
    return model(nodes, [vi("x", [3, 4])], [vi("acc", None), vi("stacked", None)],
                 [const("trips", np.array(4, dtype=np.int64))]), []


def case_loop_early_exit():
    """The loop condition is computed in the body from the iteration number
    (a compile-time constant per unrolled iteration): 3 of 10 iterations run."""
    body = h.make_graph(
        [h.make_node("Less", ["i", "two"], ["c_out"]),
         h.make_node("Mul", ["v_in", "half"], ["v_out"]),
         h.make_node("Sigmoid", ["v_out"], ["s"])],
        "body", [vi("i", [], T.INT64), vi("c_in", [], T.BOOL), vi("v_in", [2, 5])],
        [vi("c_out", [], T.BOOL), vi("v_out", [2, 5]), vi("s", [2, 5])],
        [const("two", np.array(2, dtype=np.int64)), const("half", np.array(0.5, dtype=np.float32))])
    nodes = [h.make_node("Loop", ["trips", "go", "x"], ["v", "ss"], body=body)]
    return model(nodes, [vi("x", [2, 5])], [vi("v", None), vi("ss", None)],
                 [const("trips", np.array(10, dtype=np.int64)), const("go", np.array(True))]), []


def case_if_nested_in_loop():
    """An If in a Loop body, its condition depending on the iteration number,
    its branches reading a value of the body and one of the main graph."""
    then_g = h.make_graph([h.make_node("Add", ["v_in", "x"], ["t"])], "then", [], [vi("t", [4])])
    else_g = h.make_graph([h.make_node("Mul", ["v_in", "x"], ["e"])], "else", [], [vi("e", [4])])
    body = h.make_graph(
        [h.make_node("Mod", ["i", "two"], ["m"]),
         h.make_node("Equal", ["m", "zero"], ["even"]),
         h.make_node("If", ["even"], ["v_out"], then_branch=then_g, else_branch=else_g),
         h.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [vi("i", [], T.INT64), vi("c_in", [], T.BOOL), vi("v_in", [4])],
        [vi("c_out", [], T.BOOL), vi("v_out", [4])],
        [const("two", np.array(2, dtype=np.int64)), const("zero", np.array(0, dtype=np.int64))])
    nodes = [h.make_node("Loop", ["trips", "", "y"], ["v"], body=body)]
    return model(nodes, [vi("x", [4]), vi("y", [4])], [vi("v", None)],
                 [const("trips", np.array(5, dtype=np.int64))]), []


def case_if_runtime():
    """A run-time condition: both branches are computed and selected. The
    second If has a [1]-shaped condition and scalar outputs (which must stay
    scalars)."""
    then_g = h.make_graph([h.make_node("Softmax", ["x"], ["t"], axis=-1)], "then", [], [vi("t", [2, 6])])
    else_g = h.make_graph([h.make_node("Neg", ["x"], ["e0"]), h.make_node("Exp", ["e0"], ["e"])], "else", [],
                          [vi("e", [2, 6])])
    then2 = h.make_graph([h.make_node("ReduceMax", ["x"], ["t2"], keepdims=0)], "then2", [], [vi("t2", [])])
    else2 = h.make_graph([h.make_node("ReduceMin", ["x"], ["e2"], keepdims=0)], "else2", [], [vi("e2", [])])
    nodes = [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             h.make_node("Greater", ["s", "zero"], ["pos"]),
             h.make_node("If", ["pos"], ["y"], then_branch=then_g, else_branch=else_g),
             h.make_node("Reshape", ["pos", "one"], ["pos1"]),
             h.make_node("If", ["pos1"], ["z"], then_branch=then2, else_branch=else2)]
    return model(nodes, [vi("x", [2, 6])], [vi("y", None), vi("z", None)],
                 [const("zero", np.array(0, dtype=np.float32)), const("one", np.array([1], dtype=np.int64))]), []


def case_scan_reverse_axes():
    """Scan over axis 1, the input read backwards, the output stacked on
    axis 1 in reverse; two states."""
    body = h.make_graph(
        [h.make_node("Add", ["s_in", "e"], ["s_out"]),
         h.make_node("Mul", ["p_in", "e"], ["p_out"]),
         h.make_node("Sub", ["s_out", "p_out"], ["o"])],
        "body", [vi("s_in", [3]), vi("p_in", [3]), vi("e", [3])],
        [vi("s_out", [3]), vi("p_out", [3]), vi("o", [3])])
    nodes = [h.make_node("Scan", ["s0", "p0", "x"], ["s", "p", "ys"], body=body, num_scan_inputs=1,
                         scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1],
                         scan_output_directions=[1])]
    return model(nodes, [vi("s0", [3]), vi("p0", [3]), vi("x", [3, 5])],
                 [vi("s", None), vi("p", None), vi("ys", None)]), []


# ---- recurrent layers ----

def rnn_weights(dirs, gates, hidden, inp, bias=True):
    inits = [const("W", randf(dirs, gates * hidden, inp) * 0.5), const("R", randf(dirs, gates * hidden, hidden) * 0.5)]
    if bias:
        inits.append(const("B", randf(dirs, 2 * gates * hidden) * 0.3))
    return inits


def case_lstm_bidirectional():
    """Bidirectional LSTM with initial states, peepholes and all outputs."""
    inits = rnn_weights(2, 4, 5, 3) + [const("P", randf(2, 15) * 0.2)]
    nodes = [h.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "c0", "P"], ["y", "yh", "yc"], hidden_size=5,
                         direction="bidirectional")]
    return model(nodes, [vi("x", [4, 2, 3]), vi("h0", [2, 2, 5]), vi("c0", [2, 2, 5])],
                 [vi("y", None), vi("yh", None), vi("yc", None)], inits), []


def case_gru_reverse_lbr():
    """Reverse GRU, linear_before_reset, clip (ONNX Runtime has no layout 1)."""
    inits = rnn_weights(1, 3, 4, 6)
    nodes = [h.make_node("GRU", ["x", "W", "R", "B"], ["y", "yh"], hidden_size=4, direction="reverse",
                         linear_before_reset=1, clip=2.0)]
    return model(nodes, [vi("x", [5, 2, 6])], [vi("y", None), vi("yh", None)], inits, opset=14), []


def case_rnn_dynamic_batch():
    """RNN with Relu, the batch dim symbolic (N, moved to axis 1): zero
    initial state."""
    inits = rnn_weights(1, 1, 4, 3)
    nodes = [h.make_node("Transpose", ["xb"], ["x"], perm=[1, 0, 2]),
             h.make_node("RNN", ["x", "W", "R", "B"], ["y", "yh"], hidden_size=4, activations=["Relu"])]
    return model(nodes, [vi("xb", ["N", 3, 3])], [vi("y", None), vi("yh", None)], inits), \
        ["--max-batch", "3", "--batch", "1,3"]


def case_lstm_seq_lens():
    """Forward LSTM with run-time sequence lengths shorter than the input."""
    inits = rnn_weights(1, 4, 3, 2)
    nodes = [h.make_node("Cast", ["lens_f"], ["lens"], to=T.INT32),
             h.make_node("LSTM", ["x", "W", "R", "B", "lens"], ["y", "yh", "yc"], hidden_size=3)]
    inits.append(const("lens_f", np.array([5, 2, 3], dtype=np.float32)))
    return model(nodes, [vi("x", [5, 3, 2])], [vi("y", None), vi("yh", None), vi("yc", None)], inits), []


# ---- DFT / STFT ----

def case_dft_complex_padded():
    """Complex DFT along axis 2 with dft_length 8 > 6 (zero padding), and the
    inverse of a real signal along axis 1 truncated to 4."""
    nodes = [h.make_node("DFT", ["x", "n8"], ["y"], axis=2),
             h.make_node("DFT", ["r", "n4"], ["z"], axis=1, inverse=1)]
    inits = [const("n8", np.array(8, dtype=np.int64)), const("n4", np.array(4, dtype=np.int64))]
    return model(nodes, [vi("x", [2, 3, 6, 2]), vi("r", [1, 5, 3, 1])], [vi("y", None), vi("z", None)], inits), []


def case_stft_window():
    """STFT with a constant frame step and a Hann window (onesided)."""
    nodes = [h.make_node("STFT", ["sig", "step", "win"], ["y"])]
    win = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(8) / 8)).astype(np.float32)
    inits = [const("step", np.array(3, dtype=np.int64)), const("win", win)]
    return model(nodes, [vi("sig", [2, 20, 1])], [vi("y", None)], inits), []


# ---- must fail ----

def fail_loop_runtime_trips():
    body = h.make_graph([h.make_node("Identity", ["c_in"], ["c_out"]), h.make_node("Neg", ["v_in"], ["v_out"])],
                        "body", [vi("i", [], T.INT64), vi("c_in", [], T.BOOL), vi("v_in", [2])],
                        [vi("c_out", [], T.BOOL), vi("v_out", [2])])
    nodes = [h.make_node("Loop", ["n", "", "x"], ["v"], body=body, name="the_loop")]
    return model(nodes, [vi("n", [], T.INT64), vi("x", [2])], [vi("v", None)]), \
        "node 'the_loop' (Loop): the trip count 'n' is not a compile-time constant"


def fail_if_shapes_differ():
    then_g = h.make_graph([h.make_node("Identity", ["x"], ["t"])], "then", [], [vi("t", None)])
    else_g = h.make_graph([h.make_node("ReduceSum", ["x"], ["e"], keepdims=0)], "else", [], [vi("e", None)])
    nodes = [h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="the_if")]
    return model(nodes, [vi("c", [], T.BOOL), vi("x", [3])], [vi("y", None)]), \
        "node 'the_if' (If): output 0 is [3] in then_branch and [] in else_branch"


def fail_loop_too_long():
    body = h.make_graph([h.make_node("Identity", ["c_in"], ["c_out"]), h.make_node("Neg", ["v_in"], ["v_out"])],
                        "body", [vi("i", [], T.INT64), vi("c_in", [], T.BOOL), vi("v_in", [2])],
                        [vi("c_out", [], T.BOOL), vi("v_out", [2])])
    nodes = [h.make_node("Loop", ["n", "", "x"], ["v"], body=body, name="long_loop")]
    return model(nodes, [vi("x", [2])], [vi("v", None)], [const("n", np.array(100000, dtype=np.int64))]), \
        "node 'long_loop': inlining 'long_loop/body' needs more than 4096 nodes"


def fail_loop_unbounded():
    """No trip count and a condition that stays true: never ends."""
    body = h.make_graph([h.make_node("Identity", ["c_in"], ["c_out"])], "body",
                        [vi("i", [], T.INT64), vi("c_in", [], T.BOOL), vi("v_in", [2])],
                        [vi("c_out", [], T.BOOL), vi("v_in", [2])])
    nodes = [h.make_node("Loop", ["", "go", "x"], ["v"], body=body, name="forever")]
    return model(nodes, [vi("x", [2])], [vi("v", None)], [const("go", np.array(True))]), \
        "node 'forever' (Loop): runs more than 4096 iterations"


def fail_if_missing_branch():
    then_g = h.make_graph([h.make_node("Identity", ["x"], ["t"])], "then", [], [vi("t", None)])
    nodes = [h.make_node("If", ["c"], ["y"], then_branch=then_g, name="half_if")]
    return model(nodes, [vi("c", [], T.BOOL), vi("x", [3])], [vi("y", None)]), \
        "node 'half_if' (If): then_branch and else_branch graphs are required"


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}
CASES.update({name: fn for name, fn in globals().items() if name.startswith("fail_")})


def run_case(name, kiln, workdir):
    path = os.path.join(workdir, name + ".onnx")
    if name.startswith("fail_"):
        m, expected = CASES[name]()
        onnx.save(m, path)
        out = os.path.join(workdir, name + ".so")
        p = subprocess.run([kiln or os.environ.get("KILN", "kiln"), "compile", path, "-o", out],
                           capture_output=True, text=True)
        ok = p.returncode == 1 and expected in p.stderr and not os.path.exists(out)
        print(("PASS " if ok else "FAIL ") + name + ("" if ok else f": rc {p.returncode}, stderr: {p.stderr.strip()}"))
        return 0 if ok else 1
    m, args = CASES[name]()
    onnx.save(m, path)
    cmd = [sys.executable, os.path.join(HERE, "check_model.py"), path] + args
    if kiln:
        cmd += ["--kiln", kiln]
    return subprocess.call(cmd)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--case")
    ap.add_argument("--kiln")
    ap.add_argument("--models", help="ignored (the cases are generated), accepted for the test runner")
    a = ap.parse_args()
    if a.list:
        print("\n".join(CASES))
        return 0
    if a.case and a.case not in CASES:
        print(f"control_models.py: unknown case '{a.case}'", file=sys.stderr)
        return 2
    names = [a.case] if a.case else list(CASES)
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            failed += run_case(name, a.kiln, tmp) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
