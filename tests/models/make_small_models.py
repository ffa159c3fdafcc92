#!/usr/bin/env python3
"""make_small_models.py — write the small ONNX models the frontend tests load.

    make_small_models.py OUT_DIR

Python (onnx.helper) only builds the test inputs; the C test
(tests/frontend/test_onnx_load.c) checks what Kiln's loader makes of them, so
every number written here is repeated there. Good models pass onnx.checker;
bad ones are deliberately malformed and are written with SerializeToString
(onnx.save might "fix" or reject them).

Good:  conv.onnx (raw_data weights), typed.onnx (typed data fields, Constant
       nodes, every attribute kind, nodes out of order, omitted optional
       input/output, unnamed node), external.onnx (+ external.bin,
       sub/tail.bin), batch.onnx (symbolic batch N), dims.onnx (symbolic
       dims B, S, H, to pin with --dim), many_dims.onnx (40 symbolic dims
       D0..D39 over 5 inputs).
Bad:   unsupported.onnx (3 different unsupported ops), truncated.onnx,
       garbage.onnx, empty.onnx, undefined.onnx (missing initializer,
       undefined input), bad_size.onnx, bad_dims.onnx, bad_misc.onnx,
       bad_symbolic.onnx, ext_abs.onnx, ext_dotdot.onnx, ext_short.onnx,
       ext_missing.onnx.
"""
import os
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def write(out_dir, name, model, check=False):
    if check:
        onnx.checker.check_model(model)
    with open(os.path.join(out_dir, name), "wb") as f:
        f.write(model.SerializeToString())


def model_of(graph, opset=OPSET, extra_opsets=()):
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    return helper.make_model(graph, opset_imports=imports, ir_version=8, producer_name="kiln-tests")


def tensor(name, dtype, dims, field=None, values=(), raw=None):
    """A TensorProto built field by field (no helper conversions)."""
    t = TensorProto()
    t.name = name
    t.data_type = dtype
    t.dims.extend(dims)
    if raw is not None:
        t.raw_data = raw
    if field:
        getattr(t, field).extend(values)
    return t


def conv_weights():
    # W[i] = (i - 54) * 0.25 over the row-major [4,3,3,3] weight; B fixed.
    w = ((np.arange(108, dtype=np.float32) - 54) * 0.25).reshape(4, 3, 3, 3)
    b = np.array([0.5, -1.5, 2.0, 0.0], dtype=np.float32)
    return numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")


def conv_graph(drop_bias=False, ghost=False):
    w, b = conv_weights()
    inits = [w] if drop_bias else [w, b]
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv0", kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Relu", ["c"], ["y"], name="relu0"),
    ]
    if ghost:
        nodes.append(helper.make_node("Add", ["y", "ghost"], ["z"], name="add0"))
    out = "z" if ghost else "y"
    return helper.make_graph(
        nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 4, 8, 8])], inits)


def make_conv(out):
    model = model_of(conv_graph())
    write(out, "conv.onnx", model, check=True)
    data = model.SerializeToString()
    # Cut in the middle of W's raw_data so the length-delimited field is incomplete.
    w_raw = conv_weights()[0].raw_data
    at = data.find(w_raw)
    assert at > 0
    with open(os.path.join(out, "truncated.onnx"), "wb") as f:
        f.write(data[: at + len(w_raw) // 2])
    with open(os.path.join(out, "garbage.onnx"), "wb") as f:
        f.write(b"this is not an onnx model\n" * 3)
    with open(os.path.join(out, "empty.onnx"), "wb") as f:
        pass
    write(out, "undefined.onnx", model_of(conv_graph(drop_bias=True, ghost=True)))


def make_typed(out):
    inits = [
        tensor("shape", TensorProto.INT64, [2], "int64_data", [6, 4]),
        tensor("f32", TensorProto.FLOAT, [2, 2], "float_data", [1.5, -2.0, 3.25, 0.0]),
        tensor("i8", TensorProto.INT8, [3], "int32_data", [-128, 5, 127]),
        tensor("u8", TensorProto.UINT8, [2], "int32_data", [0, 255]),
        tensor("i16", TensorProto.INT16, [2], "int32_data", [-300, 300]),
        tensor("u16", TensorProto.UINT16, [1], "int32_data", [65535]),
        tensor("i32", TensorProto.INT32, [2], "int32_data", [-7, 2147483647]),
        tensor("b", TensorProto.BOOL, [3], "int32_data", [1, 0, 1]),
        tensor("h", TensorProto.FLOAT16, [2], "int32_data", [0x3C00, 0xC100]),  # 1.0, -2.5
        tensor("bf", TensorProto.BFLOAT16, [2], "int32_data", [0x3F80, 0xC020]),  # 1.0, -2.5
        tensor("d", TensorProto.DOUBLE, [2], "double_data", [0.1, -1e300]),
        tensor("u32", TensorProto.UINT32, [2], "uint64_data", [4000000000, 1]),
        tensor("u64", TensorProto.UINT64, [1], "uint64_data", [2**63 + 5]),
        tensor("empty", TensorProto.FLOAT, [0, 3]),
        tensor("s", TensorProto.FLOAT, [], "float_data", [7.0]),
    ]
    sub = helper.make_graph([helper.make_node("Identity", ["a"], ["b"])], "sub",
                            [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1])],
                            [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1])])
    attr_tensor = tensor("t", TensorProto.INT32, [2], raw=struct.pack("<2i", 9, 8))
    # Listed consumers first: the loader must resolve inputs after reading all nodes.
    nodes = [
        helper.make_node("Identity", ["out"], ["out2"]),  # no name: "Identity_0"
        helper.make_node("Dropout", ["w"], ["out", ""], name="drop0"),
        helper.make_node("Clip", ["z", "", "cf"], ["w"], name="clip0"),
        helper.make_node("Add", ["y", "cf"], ["z"], name="add0"),
        helper.make_node("Relu", ["r"], ["y"], name="relu1", a_int=42, a_float=0.5,
                         a_string="hello", a_ints=[1, -2, 3], a_floats=[0.25, -1.0],
                         a_strings=["ab", "cde"], a_tensor=attr_tensor, a_graph=sub),
        helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape0"),
        helper.make_node("Constant", [], ["cf"], name="c_f", value_float=2.5),
        helper.make_node("Constant", [], ["cfs"], name="c_fs", value_floats=[1.0, 2.0, 3.0]),
        helper.make_node("Constant", [], ["ci"], name="c_i", value_int=-4),
        helper.make_node("Constant", [], ["cis"], name="c_is", value_ints=[5, 6]),
        helper.make_node("Constant", [], ["ct"], name="c_t",
                         value=tensor("ct", TensorProto.FLOAT, [2, 2], "float_data", [1, 2, 3, 4])),
    ]
    graph = helper.make_graph(
        nodes, "typed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [6, 4]),
         helper.make_tensor_value_info("out2", TensorProto.FLOAT, [6, 4])], inits)
    write(out, "typed.onnx", model_of(graph, opset=13))


def external_tensor(name, dtype, dims, location, offset=None, length=None):
    t = tensor(name, dtype, dims)
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            entry = t.external_data.add()
            entry.key, entry.value = key, str(value)
    return t


def add_graph(name, inits, dims=(2, 3)):
    return helper.make_graph(
        [helper.make_node("Add", ["x", inits[0].name], ["y"], name="add0")], name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(dims))], inits)


def make_external(out):
    ew = np.arange(1, 7, dtype=np.float32) * 0.5  # [2,3] at offset 0
    eb = np.array([10, -20, 30], dtype=np.int64)  # [3] at offset 64
    blob = ew.tobytes() + bytes(64 - 24) + eb.tobytes()
    with open(os.path.join(out, "external.bin"), "wb") as f:
        f.write(blob)
    os.makedirs(os.path.join(out, "sub"), exist_ok=True)
    with open(os.path.join(out, "sub", "tail.bin"), "wb") as f:
        f.write(np.array([9, 8, 7, 6], dtype=np.float32).tobytes())
    inits = [
        external_tensor("ew", TensorProto.FLOAT, [2, 3], "external.bin", 0, 24),
        external_tensor("eb", TensorProto.INT64, [3], "external.bin", 64, 24),
        external_tensor("etail", TensorProto.FLOAT, [4], "sub/tail.bin"),  # to end of file
    ]
    model = model_of(add_graph("external", inits))
    write(out, "external.onnx", model)
    onnx.checker.check_model(os.path.join(out, "external.onnx"))  # also resolves the files
    bad = {
        "ext_abs.onnx": external_tensor("w", TensorProto.FLOAT, [2, 3], "/etc/passwd", 0, 24),
        "ext_dotdot.onnx": external_tensor("w", TensorProto.FLOAT, [2, 3], "sub/../../external.bin",
                                           0, 24),
        "ext_short.onnx": external_tensor("w", TensorProto.FLOAT, [100], "external.bin", 64, 400),
        "ext_missing.onnx": external_tensor("w", TensorProto.FLOAT, [2, 3], "nope.bin", 0, 24),
    }
    for name, t in bad.items():
        write(out, name, model_of(add_graph(name[:-5], [t])))


def make_batch(out):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu_x"),
             helper.make_node("Relu", ["m"], ["y2"], name="relu_m"),
             helper.make_node("Identity", ["k"], ["y3"], name="id_k")]
    graph = helper.make_graph(
        nodes, "batch",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4]),
         helper.make_tensor_value_info("m", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("k", TensorProto.INT64, [4, "N"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 4]),
         helper.make_tensor_value_info("y2", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("y3", TensorProto.INT64, [4, "N"])])
    write(out, "batch.onnx", model_of(graph), check=True)


def make_dims(out):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu_x"),
             helper.make_node("Relu", ["m"], ["z"], name="relu_m")]
    graph = helper.make_graph(
        nodes, "dims",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", 4]),
         helper.make_tensor_value_info("m", TensorProto.FLOAT, ["S", "H"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S", 4]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["S", "H"])])
    write(out, "dims.onnx", model_of(graph), check=True)
    inputs = [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [f"D{8 * i + k}" for k in range(8)])
              for i in range(5)]
    nodes = [helper.make_node("Relu", [f"x{i}"], [f"y{i}"]) for i in range(5)]
    outputs = [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [f"D{8 * i + k}" for k in range(8)])
               for i in range(5)]
    write(out, "many_dims.onnx", model_of(helper.make_graph(nodes, "many_dims", inputs, outputs)), check=True)

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Relu", ["u"], ["v"])],
        "bad_symbolic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "S"]),
         helper.make_tensor_value_info("u", TensorProto.FLOAT, [2, None])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, None)])
    write(out, "bad_symbolic.onnx", model_of(graph))


def make_unsupported(out):
    branch = lambda name: helper.make_graph(  # noqa: E731
        [helper.make_node("Identity", ["x"], ["o"])], name, [],
        [helper.make_tensor_value_info("o", TensorProto.FLOAT, [1, 4])])
    nodes = [
        helper.make_node("NonMaxSuppression", ["x"], ["vals", "idx"], name="unique0"),
        helper.make_node("FancyOp", ["vals"], ["f"], name="fancy0", domain="com.example", alpha=1.0),
        helper.make_node("Relu", ["f"], ["r"], name="relu0"),
        helper.make_node("If", ["cond"], ["g"], name="if0", then_branch=branch("then"),
                         else_branch=branch("else")),
    ]
    graph = helper.make_graph(
        nodes, "unsupported", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("g", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("idx", TensorProto.INT64, None)],
        [tensor("k", TensorProto.INT64, [1], "int64_data", [2]),
         tensor("cond", TensorProto.BOOL, [], raw=b"\x01")])
    write(out, "unsupported.onnx", model_of(graph, extra_opsets=[("com.example", 2)]))


def make_bad(out):
    w, b = conv_weights()
    w.raw_data = w.raw_data[:-1]  # one byte short
    graph = conv_graph()
    del graph.initializer[:]
    graph.initializer.extend([w, b])
    write(out, "bad_size.onnx", model_of(graph))

    inits = [
        tensor("neg", TensorProto.FLOAT, [2, -3]),
        tensor("huge", TensorProto.FLOAT, [2**40, 2**40]),
        tensor("cnt", TensorProto.FLOAT, [3], "float_data", [1.0, 2.0]),
        tensor("wrong", TensorProto.INT32, [0, 2], "float_data", [1.0]),
    ]
    graph = helper.make_graph(
        [helper.make_node("Concat", ["neg", "huge", "cnt", "wrong"], ["y"], name="cat0",
                          axis=0)], "bad_dims", [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    write(out, "bad_dims.onnx", model_of(graph))

    nodes = [
        helper.make_node("Constant", [], ["s"], name="cs", value_string="nope"),
        helper.make_node("Relu", ["x"], ["y"], name="relu_a"),
        helper.make_node("Relu", ["x"], ["y"], name="relu_b"),  # second definition of y
    ]
    graph = helper.make_graph(
        nodes, "bad_misc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    write(out, "bad_misc.onnx", model_of(graph))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_small_models.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    make_conv(out)
    make_typed(out)
    make_external(out)
    make_batch(out)
    make_dims(out)
    make_unsupported(out)
    make_bad(out)


if __name__ == "__main__":
    main()
