#!/usr/bin/env python3
"""bad_input.py — must-fail tests: every kind of bad input to `kiln compile` and
`kiln run` gets a diagnostic, never a crash or a half-written file.

    bad_input.py [--case NAME ...] [--list] [--kiln PATH] [--models DIR] [--keep DIR]

For every case the contract is:
  * exit status != 0 and not death by a signal, and no sanitizer report;
  * stderr starts with "kiln: error:", is short (at most 3 lines, or one line
    more per culprit when several are named), and names the culprit(s): the
    file, the flag, the tensor, the node or op — each case lists the strings
    that must appear;
  * no output is left behind: the folder `-o` points into, and the
    --output-dir of `kiln run`, hold no new file afterwards.
The cases that feed `kiln run` use tiny_cnn compiled once with --max-batch 2.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

from common import REPO, TempDir, default_kiln, describe_failure, run, sanitizer_report


class CaseFailure(Exception):
    pass


class Ctx:
    def __init__(self, kiln, models, tmp):
        self.kiln, self.models, self.tmp = kiln, models, tmp
        self._artifact = None
        self.serial = 0

    def path(self, name):
        return os.path.join(self.tmp, name)

    def model(self, name):
        path = os.path.join(self.models, name + ".onnx")
        if not os.path.isfile(path):
            raise CaseFailure(f"{path} missing (run models/export.py)")
        return path

    def fresh_dir(self, tag):
        """An empty folder for one case's outputs."""
        self.serial += 1
        d = self.path(f"{tag}_{self.serial}")
        os.makedirs(d)
        return d

    def artifact(self):
        """tiny_cnn compiled once (--max-batch 2), for the `kiln run` cases."""
        if self._artifact is None:
            out = self.path("good/tiny_cnn.so")
            os.makedirs(os.path.dirname(out), exist_ok=True)
            proc = run([self.kiln, "compile", self.model("tiny_cnn"), "-o", out, "--max-batch", "2"])
            if proc.returncode != 0:
                raise CaseFailure(f"setup: kiln compile tiny_cnn failed: {describe_failure(proc)}")
            self._artifact = out
        return self._artifact

    def npy(self, name, array):
        p = self.path(name)
        np.save(p, array)
        return p

    def expect_error(self, args, culprits, out_dir, extra_lines=0):
        """Runs kiln ARGS; checks the must-fail contract; returns stderr."""
        before = set(os.listdir(out_dir)) if os.path.isdir(out_dir) else set()
        proc = run([self.kiln, *args], timeout=120)
        shown = "kiln " + " ".join(args)
        err = proc.stderr
        if proc.returncode < 0:
            raise CaseFailure(f"{shown}: killed by signal {-proc.returncode}\n{err[-2000:]}")
        if sanitizer_report(err):
            raise CaseFailure(f"{shown}: sanitizer report\n{err[-3000:]}")
        if proc.returncode == 0:
            raise CaseFailure(f"{shown}: exit status 0, expected failure\n{err[-1000:]}")
        lines = [ln for ln in err.splitlines() if ln.strip()]
        if not lines or not lines[0].startswith("kiln: error:"):
            raise CaseFailure(f"{shown}: stderr does not start with 'kiln: error:':\n{err[-1000:]!r}")
        if len(lines) > 3 + extra_lines:
            raise CaseFailure(f"{shown}: {len(lines)} lines of diagnostics, expected a short one:\n"
                              + "\n".join(lines[:12]))
        missing = [c for c in culprits if c not in err]
        if missing:
            raise CaseFailure(f"{shown}: the diagnostic does not name {missing}:\n{err.strip()}")
        after = set(os.listdir(out_dir)) if os.path.isdir(out_dir) else set()
        left = sorted(after - before)
        if left:
            raise CaseFailure(f"{shown}: left files behind in {out_dir}: {left}")
        print(f"  exit {proc.returncode}: {lines[0]}")
        return err


# ---- graphs built by hand ----------------------------------------------------------------

def save_model(path, nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "bad", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="kiln-bad-input")
    model.ir_version = 8
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def const(name, shape, value=0.5):
    arr = np.full(shape, value, dtype=np.float32)
    return helper.make_tensor(name, TensorProto.FLOAT, shape, arr.ravel().tolist())


# ---- compile cases ---------------------------------------------------------------------------

def compile_case(c, model_path, culprits, *flags, extra_lines=0):
    compile_case_err(c, model_path, culprits, *flags, extra_lines=extra_lines)


def compile_case_err(c, model_path, culprits, *flags, extra_lines=0):
    """compile_case, returning stderr."""
    out_dir = c.fresh_dir("out")
    return c.expect_error(["compile", model_path, "-o", os.path.join(out_dir, "m.so"), *flags],
                          culprits, out_dir, extra_lines)


def case_truncated_onnx(c):
    data = open(c.model("tiny_cnn"), "rb").read()
    p = c.path("truncated.onnx")
    with open(p, "wb") as f:
        f.write(data[: len(data) * 3 // 5])
    compile_case(c, p, ["truncated.onnx"])


def case_corrupt_onnx(c):
    p = c.path("garbage.onnx")
    with open(p, "wb") as f:
        f.write(np.random.default_rng(7).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    compile_case(c, p, ["garbage.onnx"])


def case_not_a_model(c):
    p = c.path("empty.onnx")  # an empty protobuf: a ModelProto with no graph
    open(p, "wb").close()
    compile_case(c, p, ["empty.onnx"])


def case_missing_model(c):
    compile_case(c, c.path("no_such_model.onnx"), ["no_such_model.onnx"])


def case_missing_initializer(c):
    p = save_model(c.path("missing_init.onnx"),
                   [helper.make_node("MatMul", ["x", "W_missing"], ["y"], name="mm0")],
                   [f32("x", [1, 4])], [f32("y", [1, 3])])
    compile_case(c, p, ["W_missing"])


def case_shape_mismatch_add(c):
    p = save_model(c.path("bad_add.onnx"),
                   [helper.make_node("Add", ["x", "b"], ["y"], name="bad_add")],
                   [f32("x", [1, 3])], [f32("y", [1, 3])], [const("b", [1, 4])])
    compile_case(c, p, ["bad_add"])


def case_shape_mismatch_matmul(c):
    p = save_model(c.path("bad_matmul.onnx"),
                   [helper.make_node("MatMul", ["x", "w"], ["y"], name="bad_matmul")],
                   [f32("x", [2, 3])], [f32("y", [2, 5])], [const("w", [4, 5])])
    compile_case(c, p, ["bad_matmul"])


def case_onehot_depth_not_integer(c):
    # a float depth beyond int64 has no integer value (converting it would be UB)
    depth = helper.make_tensor("depth", TensorProto.FLOAT, [], [1e30])
    values = helper.make_tensor("values", TensorProto.FLOAT, [2], [0.0, 1.0])
    p = save_model(c.path("onehot_depth.onnx"),
                   [helper.make_node("OneHot", ["idx", "depth", "values"], ["y"], name="onehot_f")],
                   [helper.make_tensor_value_info("idx", TensorProto.INT64, [3])], [f32("y", None)],
                   [depth, values], opset=11)
    compile_case(c, p, ["onehot_f", "depth", "not an integer"])


def case_onehot_output_too_large(c):
    # depth 2^40: shape inference accepts it, an artifact holds at most 16 GiB per tensor
    depth = helper.make_tensor("depth", TensorProto.INT64, [], [1 << 40])
    values = helper.make_tensor("values", TensorProto.FLOAT, [2], [0.0, 1.0])
    p = save_model(c.path("onehot_huge.onnx"),
                   [helper.make_node("OneHot", ["idx", "depth", "values"], ["y"], name="onehot_big")],
                   [helper.make_tensor_value_info("idx", TensorProto.INT64, [4])], [f32("y", None)],
                   [depth, values], opset=11)
    compile_case(c, p, ["graph output 'y'", "onehot_big", "OneHot", "16 GiB"])


def case_intermediate_too_large(c):
    # an intermediate (workspace) tensor of 2^35 floats, reduced to a scalar output
    p = save_model(c.path("big_intermediate.onnx"),
                   [helper.make_node("Expand", ["x", "shape"], ["big"], name="expand_big"),
                    helper.make_node("ReduceSum", ["big"], ["y"], name="sum_all", keepdims=0)],
                   [f32("x", [1])], [f32("y", None)],
                   [helper.make_tensor("shape", TensorProto.INT64, [2], [1 << 20, 1 << 15])])
    compile_case(c, p, ["tensor 'big'", "expand_big", "Expand", "16 GiB"])


def attention_model(c, name, **attrs):
    q = [f32(n, [1, 2, 4, 8]) for n in ("q", "k", "v")]
    return save_model(c.path(name), [helper.make_node("Attention", ["q", "k", "v"], ["y"], name="my_attn", **attrs)],
                      q, [f32("y", None)], opset=23)


def case_attention_scale_nan(c):
    compile_case(c, attention_model(c, "attn_nan.onnx", scale=float("nan")), ["my_attn", "Attention", "scale nan"])


def case_attention_scale_inf(c):
    compile_case(c, attention_model(c, "attn_inf.onnx", scale=float("-inf")), ["my_attn", "Attention", "scale -inf"])


def case_convtranspose_output_padding(c):
    # output_padding must be less than the stride or the dilation (here 2 and 1)
    p = save_model(c.path("convt_opad.onnx"),
                   [helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="my_convt", strides=[2, 2],
                                     output_padding=[0, 2])],
                   [f32("x", [1, 1, 4, 4])], [f32("y", None)], [const("w", [1, 1, 3, 3])])
    compile_case(c, p, ["my_convt", "ConvTranspose", "output_padding[1] = 2", "strides[1] = 2"])


def case_decomposition_names_model_node(c):
    # MatMulInteger becomes Cast + MatMul: the MatMul's shape error names the ONNX node first
    w = helper.make_tensor("w", TensorProto.UINT8, [4, 5], [1] * 20)
    p = save_model(c.path("mmi.onnx"), [helper.make_node("MatMulInteger", ["a", "w"], ["y"], name="my_mmi")],
                   [helper.make_tensor_value_info("a", TensorProto.UINT8, [2, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.INT32, None)], [w])
    err = compile_case_err(c, p, ["node 'my_mmi' (MatMulInteger): its decomposition fails: node 'my_mmi/"])
    if "inner dims differ" not in err:
        raise CaseFailure(f"the diagnostic does not say what is wrong:\n{err}")


def case_loop_body_names_model_nodes(c):
    # an LSTM with a bad recurrence weight inside a Loop body: the chain of nodes is named,
    # the Loop first, then the LSTM
    f = TensorProto.FLOAT
    body = helper.make_graph(
        [helper.make_node("Identity", ["cin"], ["cout"], name="b_id"),
         helper.make_node("LSTM", ["s", "w", "r"], ["y0"], name="inner_lstm", hidden_size=4),
         helper.make_node("Identity", ["s"], ["sout"], name="b_id2")], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cin", TensorProto.BOOL, []), helper.make_tensor_value_info("s", f, None)],
        [helper.make_tensor_value_info("cout", TensorProto.BOOL, []), helper.make_tensor_value_info("sout", f, None),
         helper.make_tensor_value_info("y0", f, None)])
    p = save_model(c.path("loop_lstm.onnx"),
                   [helper.make_node("Loop", ["m", "", "x"], ["y", "ys"], name="outer_loop", body=body)],
                   [f32("x", [2, 1, 3])], [f32("y", None), f32("ys", None)],
                   [helper.make_tensor("m", TensorProto.INT64, [], [1]), const("w", [1, 16, 3]),
                    const("r", [1, 16, 5])])
    compile_case(c, p, ["node 'outer_loop' (Loop): its inlined body fails: node 'outer_loop#",
                        "inner_lstm' (LSTM): its decomposition fails: node '", "(MatMul)"])


def case_deform_conv_bad_offset(c):
    # offset must have 2*offset_group*kH*kW = 8 channels, not 6 (the decomposition's check)
    p = save_model(c.path("deform_offset.onnx"),
                   [helper.make_node("DeformConv", ["x", "w", "off"], ["y"], name="my_deform", kernel_shape=[2, 2])],
                   [f32("x", [1, 2, 3, 3]), f32("off", [1, 6, 2, 2])], [f32("y", None)],
                   [const("w", [1, 2, 2, 2])], opset=19)
    compile_case(c, p, ["my_deform", "DeformConv", "offset"])


def case_unsupported_ops(c):
    # Two unsupported ops: both must be reported at once, by op type and node name.
    p = save_model(c.path("unsupported.onnx"),
                   [helper.make_node("StringNormalizer", ["x"], ["d"], name="my_strnorm"),
                    helper.make_node("FrobnicateOp", ["x"], ["f"], name="my_frob",
                                     domain="com.example")],
                   [f32("x", [3, 3])], [f32("d", []), f32("f", [3, 3])])
    m = onnx.load(p)
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    onnx.save(m, p)
    compile_case(c, p, ["StringNormalizer", "my_strnorm", "FrobnicateOp", "my_frob"], extra_lines=2)


def case_compile_unknown_flag(c):
    compile_case(c, c.model("tiny_mlp"), ["--bogus-flag"], "--bogus-flag")


def case_compile_bad_max_batch(c):
    compile_case(c, c.model("tiny_mlp"), ["--max-batch"], "--max-batch", "zero")


def case_compile_bad_conv_algo(c):
    compile_case(c, c.model("tiny_mlp"), ["--conv-algo", "fastest"], "--conv-algo", "fastest")


def case_compile_bad_precision(c):
    # one line listing the valid ones
    compile_case(c, c.model("tiny_mlp"), ["--precision", "'fp8'", "fp32", "fp16", "bf16"], "--precision", "fp8")


def case_precision_overflow(c):
    # every constant float16 cannot hold, named in one run: an initializer and
    # one that constant folding computes (300 * 300); bfloat16 holds both
    p = save_model(c.path("overflow.onnx"),
                   [helper.make_node("Mul", ["x", "big"], ["a"], name="scale"),
                    helper.make_node("Mul", ["c", "c"], ["sq"], name="square"),
                    helper.make_node("Add", ["a", "sq"], ["y"], name="shift")],
                   [f32("x", [1, 4])], [f32("y", [1, 4])],
                   [const("big", [4], 1e5), const("c", [], 300.0)])
    compile_case(c, p, ["--precision fp16", "constant 'big'", "node 'scale' (Mul)", "constant 'sq'",
                        "node 'shift' (Add)", "65504"], "--precision", "fp16", extra_lines=1)
    out = c.path("overflow_bf16.so")
    proc = run([c.kiln, "compile", p, "-o", out, "--precision", "bf16"])
    if proc.returncode != 0:
        raise CaseFailure(f"--precision bf16 of the same model failed: {describe_failure(proc)}")


def case_compile_bad_target(c):
    compile_case(c, c.model("tiny_mlp"), ["nonsense-arch"], "--target", "nonsense-arch-linux")


def case_compile_bad_dump_pass(c):
    compile_case(c, c.model("tiny_mlp"), ["no_such_pass"], "--dump-after=no_such_pass")


def case_compile_unwritable_output(c):
    out = os.path.join(c.path("no_such_dir"), "m.so")
    c.expect_error(["compile", c.model("tiny_mlp"), "-o", out], ["no_such_dir"], c.tmp)


def case_compile_header_of_another_prefix(c):
    """The .so and then the .o of one stem with another prefix: the .o's compile
    is refused in one line and writes nothing (it used to replace the .so's
    header); --header puts its header elsewhere."""
    d = c.fresh_dir("header")
    model = c.model("tiny_cnn")
    proc = run([c.kiln, "compile", model, "-o", os.path.join(d, "m.so")])
    if proc.returncode != 0:
        raise CaseFailure(f"setup: kiln compile -o m.so failed: {describe_failure(proc)}")
    with open(os.path.join(d, "m.h")) as f:
        before = f.read()
    err = c.expect_error(["compile", model, "-o", os.path.join(d, "m.o"), "--prefix", "cnn"],
                         ["m.h' is the header of another artifact (m.so, prefix 'model')",
                          "not of prefix 'cnn'", "--header PATH"], d)
    if len(err.strip().splitlines()) != 1:
        raise CaseFailure(f"expected one line:\n{err}")
    with open(os.path.join(d, "m.h")) as f:
        if f.read() != before:
            raise CaseFailure("m.h was rewritten")
    proc = run([c.kiln, "compile", model, "-o", os.path.join(d, "m.o"), "--prefix", "cnn",
                "--header", os.path.join(d, "cnn.h")])
    if proc.returncode != 0 or sorted(os.listdir(d)) != ["cnn.h", "m.h", "m.o", "m.so"]:
        raise CaseFailure(f"--header: {describe_failure(proc)}; files {sorted(os.listdir(d))}")


def case_compile_header_not_kiln(c):
    """A file kiln did not write where the header goes (a user's own m.h beside
    m.so) is refused in one line and left as it was; nothing is written; an
    empty file is replaced."""
    d = c.fresh_dir("own_header")
    mine = "/* my own declarations */\nint my_function(void);\n"
    with open(os.path.join(d, "m.h"), "w") as f:
        f.write(mine)
    err = c.expect_error(["compile", c.model("tiny_mlp"), "-o", os.path.join(d, "m.so")],
                         ["m.h' exists and is not a header kiln wrote", "--header PATH"], d)
    if len(err.strip().splitlines()) != 1:
        raise CaseFailure(f"expected one line:\n{err}")
    with open(os.path.join(d, "m.h")) as f:
        if f.read() != mine:
            raise CaseFailure("m.h was rewritten")
    if sorted(os.listdir(d)) != ["m.h"]:
        raise CaseFailure(f"files left: {sorted(os.listdir(d))}")
    open(os.path.join(d, "m.h"), "w").close()
    proc = run([c.kiln, "compile", c.model("tiny_mlp"), "-o", os.path.join(d, "m.so")])
    if proc.returncode != 0:
        raise CaseFailure(f"over an empty m.h: {describe_failure(proc)}")
    with open(os.path.join(d, "m.h")) as f:
        if not f.read().startswith("/* Generated by kiln"):
            raise CaseFailure("the empty m.h was not replaced by kiln's header")


def case_compile_header_not_dot_h(c):
    d = c.fresh_dir("header")
    c.expect_error(["compile", c.model("tiny_cnn"), "-o", os.path.join(d, "m.so"), "--header",
                    os.path.join(d, "m.so")], ["--header", "m.so", "must end in .h"], d)


def bind_model(c):
    """Reshape(x, shape) with `shape` a graph input, and x with the batch dim."""
    return save_model(c.path("bind.onnx"),
                      [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape"),
                       helper.make_node("Relu", ["b"], ["z"], name="relu")],
                      [f32("x", [2, 6]), helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
                       f32("b", ["N", 3])],
                      [f32("y", [3, 4]), f32("z", ["N", 3])])


def case_compile_bind_unknown_input(c):
    p = c.npy("shape_ok.npy", np.array([3, 4], np.int64))
    compile_case(c, bind_model(c), ["--bind", "no_such_input"], "--bind", f"no_such_input={p}")


def case_compile_bind_wrong_dtype(c):
    p = c.npy("shape_i32.npy", np.array([3, 4], np.int32))
    compile_case(c, bind_model(c), ["shape", "shape_i32.npy", "int32", "int64"], "--bind", f"shape={p}")


def case_compile_bind_wrong_shape(c):
    p = c.npy("shape_3.npy", np.array([3, 4, 1], np.int64))
    compile_case(c, bind_model(c), ["shape", "shape_3.npy", "[3]", "[2]"], "--bind", f"shape={p}")


def case_compile_bind_unreadable_file(c):
    compile_case(c, bind_model(c), ["no_such_file.npy"], "--bind", f"shape={c.path('no_such_file.npy')}")


def case_compile_bind_corrupt_pb(c):
    p = c.path("garbage.pb")
    with open(p, "wb") as f:
        f.write(b"\xff\xff\xff\xff not a tensor")
    compile_case(c, bind_model(c), ["garbage.pb"], "--bind", f"shape={p}")


def case_compile_bind_not_npy_or_pb(c):
    p = c.path("shape.txt")
    with open(p, "w") as f:
        f.write("3 4\n")
    compile_case(c, bind_model(c), ["shape", "shape.txt"], "--bind", f"shape={p}")


def case_compile_bind_twice(c):
    p = c.npy("shape_ok.npy", np.array([3, 4], np.int64))
    compile_case(c, bind_model(c), ["shape", "more than once"], "--bind", f"shape={p}", "--bind", f"shape={p}")


def case_compile_bind_batch_input(c):
    p = c.npy("b_val.npy", np.zeros((1, 3), np.float32))
    s = c.npy("shape_ok.npy", np.array([3, 4], np.int64))
    compile_case(c, bind_model(c), ["'b'", "batch"], "--bind", f"b={p}", "--bind", f"shape={s}")


def case_compile_bind_no_value(c):
    compile_case(c, bind_model(c), ["--bind", "shape"], "--bind", "shape")


def case_compile_cast_e8m0_round_down(c):
    # float8e8m0 casts round up (ONNX's default); the other round_mode values are refused
    p = save_model(c.path("e8m0_down.onnx"),
                   [helper.make_node("Cast", ["x"], ["y"], name="to_e8m0", to=TensorProto.FLOAT8E8M0,
                                     round_mode="down")],
                   [f32("x", [4])], [helper.make_tensor_value_info("y", TensorProto.FLOAT8E8M0, [4])],
                   opset=25)
    compile_case(c, p, ["to_e8m0", "round_mode"])


def int4_model(c, name, weight):
    # y = Cast(x) + Cast(w) with w an int4 initializer (packed two per byte in ONNX)
    nodes = [helper.make_node("Cast", ["w"], ["wf"], name="w_to_float", to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "wf"], ["y"], name="add")]
    return save_model(c.path(name), nodes, [f32("x", [5])], [f32("y", [5])], [weight], opset=21)


def case_compile_int4_raw_data_unpacked(c):
    # five int4 values take 3 packed bytes; 5 bytes (one per element) is refused
    w = onnx.TensorProto()
    w.name, w.data_type, w.raw_data = "w", TensorProto.INT4, b"\x01\x02\x03\x04\x05"
    w.dims.extend([5])
    compile_case(c, int4_model(c, "int4_raw.onnx", w), ["'w'", "raw_data", "5 bytes", "expected 3"])


def case_compile_uint4_int32_data_count(c):
    # int32_data of an int4 tensor holds packed bytes: 5 values -> 3 entries, not 5
    w = onnx.TensorProto()
    w.name, w.data_type = "w", TensorProto.UINT4
    w.dims.extend([5])
    w.int32_data.extend([1, 2, 3, 4, 5])
    compile_case(c, int4_model(c, "uint4_int32.onnx", w), ["'w'", "int32_data", "expected 3"])


# ---- run cases -------------------------------------------------------------------------------

def run_case(c, args, culprits):
    out_dir = c.fresh_dir("run")
    c.expect_error(["run", *args, "--output-dir", out_dir], culprits, out_dir)


def good_input(c, batch=1):
    x = np.random.default_rng(0).standard_normal((batch, 3, 32, 32)).astype(np.float32)
    return c.npy(f"good_b{batch}.npy", x)


def case_run_missing_artifact(c):
    run_case(c, [c.path("no_such.so"), "--input", f"input={good_input(c)}"], ["no_such.so"])


def case_run_not_an_artifact(c):
    p = c.path("not_an_artifact.so")
    with open(p, "w") as f:
        f.write("this is not a shared object\n")
    run_case(c, [p, "--input", f"input={good_input(c)}"], ["not_an_artifact.so"])


def artifact_cuts(c):
    """Prefixes of the tiny_cnn artifact: inside the ELF header, the program
    headers, every KB of the segments and the section headers at the end."""
    with open(c.artifact(), "rb") as f:
        data = f.read()
    sizes = sorted({1, 3, 4, 19, 20, 40, 63, 64, 65, 100, 777, 4095, 4097, len(data) - 1,
                    *range(1024, len(data), 1024)})
    for n in sizes:
        p = c.path(f"cut_{n}.so")
        with open(p, "wb") as f:
            f.write(data[:n])
        yield n, p


def truncated_case(c, command, extra):
    """kiln COMMAND on every cut: exit 1, no signal, exactly one line naming the file."""
    for n, p in artifact_cuts(c):
        out_dir = c.fresh_dir(command)
        args = [command, p, *extra]
        if command == "run":
            args += ["--output-dir", out_dir]
        err = c.expect_error(args, [os.path.basename(p), "is truncated or not an ELF shared object"], out_dir)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        if len(lines) != 1:
            raise CaseFailure(f"kiln {command} on {n} bytes: {len(lines)} lines, expected one:\n{err}")


def case_run_truncated_artifact(c):
    truncated_case(c, "run", ["--input", f"input={good_input(c)}"])


def case_profile_truncated_artifact(c):
    # --profile fills inputs not given with deterministic values
    truncated_case(c, "run", ["--profile", "--bench", "1"])


def case_inspect_truncated_artifact(c):
    truncated_case(c, "inspect", [])


def case_python_truncated_artifact(c):
    """bench/kiln_artifact.py refuses every cut with a ValueError before ctypes loads it."""
    cuts = [p for _, p in artifact_cuts(c)]
    script = ("import sys\n"
              f"sys.path.insert(0, {os.path.join(REPO, 'bench')!r})\n"
              "from kiln_artifact import Artifact\n"
              "for p in sys.argv[2:]:\n"
              "    try:\n"
              "        Artifact(p)\n"
              "    except ValueError as e:\n"
              "        if 'is truncated or not an ELF shared object' not in str(e):\n"
              "            sys.exit(f'{p}: {e}')\n"
              "    else:\n"
              "        sys.exit(f'{p}: loaded')\n"
              "Artifact(sys.argv[1])\n")
    proc = run([sys.executable, "-c", script, c.artifact(), *cuts], timeout=120)
    if proc.returncode != 0:
        raise CaseFailure(f"kiln_artifact.py on cut artifacts: {describe_failure(proc)}")
    print(f"  {len(cuts)} cuts refused, the whole artifact loads")


def case_run_unknown_flag(c):
    run_case(c, [c.artifact(), "--input", f"input={good_input(c)}", "--bogus-flag"], ["--bogus-flag"])


def case_run_missing_input_file(c):
    run_case(c, [c.artifact(), "--input", f"input={c.path('no_such_input.npy')}"],
             ["no_such_input.npy"])


def case_run_corrupt_npy(c):
    p = c.path("corrupt.npy")
    with open(p, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00garbage")
    run_case(c, [c.artifact(), "--input", f"input={p}"], ["corrupt.npy"])


def case_run_wrong_shape(c):
    p = c.npy("wrong_shape.npy", np.zeros((1, 3, 16, 16), np.float32))
    run_case(c, [c.artifact(), "--input", f"input={p}"], ["input"])


def case_run_wrong_dtype(c):
    p = c.npy("wrong_dtype.npy", np.zeros((1, 3, 32, 32), np.float64))
    run_case(c, [c.artifact(), "--input", f"input={p}"], ["input"])


def case_run_unknown_input_name(c):
    run_case(c, [c.artifact(), "--input", f"input={good_input(c)}",
                 "--input", f"no_such_tensor={good_input(c)}"], ["no_such_tensor"])


def case_run_missing_input(c):
    run_case(c, [c.artifact()], ["input"])


def case_run_batch_too_large(c):
    # batch 3 > --max-batch 2: the diagnostic names the input whose batch is out of range
    run_case(c, [c.artifact(), "--input", f"input={good_input(c, 3)}"], ["input"])


def case_run_bad_threads(c):
    run_case(c, [c.artifact(), "--input", f"input={good_input(c)}", "--threads", "0"], ["--threads"])


CASES = {name[5:]: fn for name, fn in list(globals().items()) if name.startswith("case_")}


def main(argv=None):
    ap = argparse.ArgumentParser(description="Must-fail tests for kiln compile / kiln run.")
    ap.add_argument("--case", action="append", choices=list(CASES), help="run only this case")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--kiln", default=default_kiln())
    ap.add_argument("--models", default=os.path.join(REPO, "models"))
    ap.add_argument("--keep", default=None, help="work in this folder and keep it")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(CASES))
        return 0
    if not os.access(args.kiln, os.X_OK):
        print(f"bad_input: {args.kiln}: no kiln binary (build first)", file=sys.stderr)
        return 1
    passed = failed = 0
    with TempDir(args.keep, prefix="kiln-bad-") as tmp:
        ctx = Ctx(args.kiln, args.models, tmp)
        for name in args.case or list(CASES):
            print(f"{name}:")
            try:
                CASES[name](ctx)
                print(f"PASS {name}")
                passed += 1
            except CaseFailure as e:
                print(f"FAIL {name}: {e}")
                failed += 1
    print(f"bad_input: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
