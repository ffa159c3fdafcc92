#!/usr/bin/env python3
"""gen_seeds.py — writes small hostile ONNX models, one per kind of bad input
the loader, shape inference and graph passes must reject with a diagnostic:
overflowing shape products, negative or huge dims, cyclic graphs, dangling
value names, mismatched dtypes, huge attribute values, absurd ranks, several
unsupported ops at once.

    gen_seeds.py OUT_DIR [--only NAME]

Without --only it writes the small models (committed under tests/fuzz/cases);
the large ones (large_seeds) are written one at a time by the tests.

They serve twice: as seeds for the kn_fuzz_onnx corpus, and (committed under
tests/fuzz/cases/) as regression cases that `kiln inspect` and `kiln compile`
must fail cleanly on (tests/fuzz/check_case.py). Every model here is invalid,
so both commands must exit 1 — except the slow_ cases, valid models that
once took minutes: they must finish in time, with exit 0 or 1; and the plan_
cases, which only `kiln compile` refuses (a tensor beyond what an artifact
holds): `kiln inspect` may describe them.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BIG = 1 << 62
F = TensorProto.FLOAT
I64 = TensorProto.INT64


def vi(name, dims, dtype=F):
    return helper.make_tensor_value_info(name, dtype, dims)


def i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def nh_value(x):
    return numpy_helper.from_array(np.array([x], dtype=np.float32))


def raw_tensor(name, dims, data=b""):
    """A float TensorProto with any dims (no consistency check)."""
    t = TensorProto()
    t.name, t.data_type, t.raw_data = name, F, data
    t.dims.extend(dims)
    return t


def model(nodes, inputs, outputs, inits=(), opset=17, raw_fix=None):
    g = helper.make_graph(nodes, "seed", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    if raw_fix:
        raw_fix(m)
    return m


def unary(op, attrs=None, in_dims=(2, 3), out_dims=None, **kw):
    node = helper.make_node(op, ["x"], ["y"], name=f"bad_{op.lower()}", **(attrs or {}))
    return model([node], [vi("x", list(in_dims))], [vi("y", out_dims)], **kw)


def with_shape_input(op, shape, data_dims=(2, 3), extra_inputs=(), dtype=F, **attrs):
    node = helper.make_node(op, ["x", "s", *extra_inputs], ["y"], name=f"bad_{op.lower()}", **attrs)
    return model([node], [vi("x", list(data_dims), dtype)], [vi("y", None, dtype)], [i64("s", shape)])


def set_input_dims(dims):
    """Replaces input 0's dims after construction (helper rejects some values)."""
    def fix(m):
        shape = m.graph.input[0].type.tensor_type.shape
        del shape.dim[:]
        for d in dims:
            dim = shape.dim.add()
            if isinstance(d, str):
                dim.dim_param = d
            else:
                dim.dim_value = d
    return fix


def seeds():
    s = {}
    # -- integer overflow in shape products
    s["overflow_input_dims"] = unary("Relu", raw_fix=set_input_dims([1 << 31, 1 << 31, 1 << 31]))
    s["overflow_batch_times_dims"] = unary("Relu", raw_fix=set_input_dims(["N", 1 << 40, 1 << 22]))
    s["overflow_reshape"] = with_shape_input("Reshape", [1 << 32, 1 << 32, 1 << 32], data_dims=(6,))
    s["overflow_expand"] = with_shape_input("Expand", [1 << 21, 1 << 21, 1 << 21], data_dims=(1,))
    s["overflow_tile"] = with_shape_input("Tile", [BIG, BIG])
    cos = helper.make_node("ConstantOfShape", ["s"], ["y"], name="bad_cos")
    s["overflow_constant_of_shape"] = model([cos], [], [vi("y", None)], [i64("s", [1 << 30, 1 << 30, 1 << 30])])
    s["huge_constant_of_shape"] = model([cos], [], [vi("y", None)], [i64("s", [1 << 51])])
    big_init = raw_tensor("w", [1 << 40, 1 << 40])
    add = helper.make_node("Add", ["x", "w"], ["y"], name="bad_add")
    s["overflow_initializer_dims"] = model([add], [vi("x", [1])], [vi("y", None)], [big_init])
    # -- negative or huge dims
    s["negative_input_dim"] = unary("Relu", raw_fix=set_input_dims([2, -3]))
    neg_init = raw_tensor("w", [-1])
    s["negative_initializer_dim"] = model([add], [vi("x", [1])], [vi("y", None)], [neg_init])
    s["negative_reshape"] = with_shape_input("Reshape", [-1, -1])
    s["negative_reshape_dim"] = with_shape_input("Reshape", [-7, 6], data_dims=(6,))
    s["negative_expand"] = with_shape_input("Expand", [-2, 3])
    s["negative_constant_of_shape"] = model([cos], [], [vi("y", None)], [i64("s", [-5])])
    s["empty_input_huge_dim"] = unary("Relu", raw_fix=set_input_dims([0, (1 << 63) - 2]))
    s["empty_constant_huge_dim"] = model([add], [vi("x", [1])], [vi("y", None)], [raw_tensor("w", [0, 1 << 62])])
    s["empty_expand_huge_dim"] = with_shape_input("Expand", [0, 1 << 50], data_dims=(1, 1))
    s["huge_input_dim"] = unary("Relu", raw_fix=set_input_dims([1 << 62]))
    s["huge_range"] = model([helper.make_node("Range", ["a", "b", "c"], ["y"], name="bad_range")], [],
                            [vi("y", None, I64)],
                            [i64("a", 0), i64("b", BIG), i64("c", 1)])
    # found by the fuzzer: Range with delta INT64_MAX overflowed the count (UBSan)
    # (then an int64 + float Add, so that the model is invalid)
    s["huge_step_range"] = model([helper.make_node("Range", ["a", "b", "c"], ["r"], name="huge_step"),
                                  helper.make_node("Add", ["r", "x"], ["y"], name="mixed_add")],
                                 [vi("x", [1])], [vi("y", None)],
                                 [i64("a", 5), i64("b", 7), i64("c", (1 << 63) - 1)])
    s["zero_step_range"] = model([helper.make_node("Range", ["a", "b", "c"], ["y"], name="bad_range")], [],
                                 [vi("y", None, I64)], [i64("a", 0), i64("b", 10), i64("c", 0)])
    # -- tensors within shape inference's limit but beyond what an artifact
    # holds (16 GiB): only `kiln compile` refuses them (in the memory plan),
    # `kiln inspect` describes the model (a OneHot with depth 2^40 once
    # compiled into an artifact with a 16 TiB output)
    onehot = helper.make_node("OneHot", ["i", "d", "v"], ["y"], name="huge_onehot")
    s["plan_huge_onehot"] = model([onehot], [vi("i", [4], I64)], [vi("y", None)],
                                  [i64("d", 1 << 40), numpy_helper.from_array(np.array([0, 1], np.float32), "v")],
                                  opset=11)
    # -- a NaN attention scale (every output would be NaN)
    attn = helper.make_node("Attention", ["q", "k", "v"], ["y"], name="nan_attention", scale=float("nan"))
    s["attr_attention_scale_nan"] = model([attn], [vi(n, [1, 2, 4, 8]) for n in "qkv"], [vi("y", None)], opset=23)
    # -- cyclic graphs and dangling names
    s["cycle_two_nodes"] = model([helper.make_node("Relu", ["b"], ["a"], name="cyc_a"),
                                  helper.make_node("Relu", ["a"], ["b"], name="cyc_b")],
                                 [vi("x", [2])], [vi("a", [2])])
    s["cycle_self_loop"] = model([helper.make_node("Add", ["x", "y"], ["y"], name="self_loop")],
                                 [vi("x", [2])], [vi("y", [2])])
    s["dangling_node_input"] = model([helper.make_node("Relu", ["nowhere"], ["y"], name="dangling")],
                                     [vi("x", [2])], [vi("y", [2])])
    s["dangling_graph_output"] = model([helper.make_node("Relu", ["x"], ["y"], name="r")],
                                       [vi("x", [2])], [vi("missing", [2])])
    s["duplicate_producer"] = model([helper.make_node("Relu", ["x"], ["y"], name="p1"),
                                     helper.make_node("Neg", ["x"], ["y"], name="p2")],
                                    [vi("x", [2])], [vi("y", [2])])
    s["no_nodes_no_outputs"] = model([], [vi("x", [2])], [])
    # -- mismatched dtypes
    s["dtype_add_float_int"] = model([helper.make_node("Add", ["x", "k"], ["y"], name="mixed_add")],
                                     [vi("x", [2])], [vi("y", [2])], [i64("k", [1, 2])])
    s["dtype_matmul_float_double"] = model(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mixed_matmul")], [vi("x", [2, 2])],
        [vi("y", [2, 2])], [numpy_helper.from_array(np.ones((2, 2), np.float64), "w")])
    s["dtype_reshape_float_shape"] = model(
        [helper.make_node("Reshape", ["x", "s"], ["y"], name="float_shape")], [vi("x", [6])],
        [vi("y", None)], [numpy_helper.from_array(np.array([2, 3], np.float32), "s")])
    s["dtype_relu_int"] = unary("Relu", raw_fix=lambda m: setattr(m.graph.input[0].type.tensor_type,
                                                                  "elem_type", TensorProto.STRING))
    # -- huge attribute values
    s["attr_concat_axis"] = model([helper.make_node("Concat", ["x", "x"], ["y"], name="bad_concat",
                                                    axis=BIG)], [vi("x", [2])], [vi("y", None)])
    s["attr_transpose_perm"] = unary("Transpose", {"perm": [BIG, 0]})
    s["attr_softmax_axis"] = unary("Softmax", {"axis": -BIG})
    s["attr_flatten_axis"] = unary("Flatten", {"axis": -(1 << 63)})
    s["attr_gather_axis"] = model([helper.make_node("Gather", ["x", "i"], ["y"], name="bad_gather", axis=BIG)],
                                  [vi("x", [2, 3])], [vi("y", None)], [i64("i", [0])])
    s["attr_gather_index"] = model([helper.make_node("Gather", ["x", "i"], ["y"], name="bad_gather")],
                                   [vi("x", [2, 3])], [vi("y", None)], [i64("i", [BIG])])
    conv_w = numpy_helper.from_array(np.ones((1, 1, 3, 3), np.float32), "w")
    for tag, attrs in {"strides": {"strides": [BIG, BIG]}, "pads": {"pads": [BIG, 0, BIG, 0]},
                       "dilations": {"dilations": [BIG, BIG]}, "group": {"group": BIG},
                       "kernel_shape": {"kernel_shape": [BIG, BIG]}}.items():
        s[f"attr_conv_{tag}"] = model([helper.make_node("Conv", ["x", "w"], ["y"], name=f"bad_conv_{tag}", **attrs)],
                                      [vi("x", [1, 1, 5, 5])], [vi("y", None)], [conv_w])
    # output_padding must be less than the stride or the dilation
    convt = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="bad_convt", strides=[2, 2],
                             output_padding=[2, 0])
    s["attr_convtranspose_output_padding"] = model([convt], [vi("x", [1, 1, 4, 4])], [vi("y", None)], [conv_w])
    s["attr_maxpool_kernel"] = unary("MaxPool", {"kernel_shape": [BIG, BIG]}, in_dims=(1, 1, 4, 4))
    s["attr_split_sizes"] = model([helper.make_node("Split", ["x", "s"], ["a", "b"], name="bad_split", axis=0)],
                                  [vi("x", [4])], [vi("a", None), vi("b", None)], [i64("s", [BIG, 4 - BIG])])
    s["attr_slice_axes"] = model([helper.make_node("Slice", ["x", "st", "en", "ax"], ["y"], name="bad_slice")],
                                 [vi("x", [4])], [vi("y", None)],
                                 [i64("st", [0]), i64("en", [2]), i64("ax", [BIG])])
    s["attr_pad_huge"] = with_shape_input("Pad", [BIG, 0, 0, BIG])
    s["attr_topk_k"] = model([helper.make_node("TopK", ["x", "k"], ["v", "i"], name="bad_topk")],
                             [vi("x", [4])], [vi("v", None), vi("i", None, I64)], [i64("k", [BIG])])
    s["attr_squeeze_axes"] = with_shape_input("Squeeze", [BIG])
    s["attr_unsqueeze_axes"] = with_shape_input("Unsqueeze", [BIG])
    s["attr_cast_to"] = unary("Cast", {"to": 1 << 30})
    s["attr_opset_huge"] = unary("Relu", opset=BIG)
    # -- absurd ranks
    s["rank_input_100"] = unary("Relu", raw_fix=set_input_dims([1] * 100))
    s["rank_reshape_100"] = with_shape_input("Reshape", [1] * 100, data_dims=(1,))
    s["rank_expand_64"] = with_shape_input("Expand", [1] * 64, data_dims=(1,))
    s["rank_unsqueeze_many"] = with_shape_input("Unsqueeze", list(range(40)), data_dims=(1,))
    s["rank_constant_of_shape"] = model([cos], [], [vi("y", None)], [i64("s", [1] * 70)])
    # -- constant folding that would take minutes: an 8.6-Gflop Conv of two
    # folded ConstantOfShape results (found by hand: hung `kiln inspect` and
    # `kiln compile`). A valid model: now the Conv is compiled, not folded.
    one = nh_value(1.0)
    s["slow_fold_conv"] = model(
        [helper.make_node("ConstantOfShape", ["sx"], ["cx"], name="big_x", value=one),
         helper.make_node("ConstantOfShape", ["sw"], ["cw"], name="big_w", value=one),
         helper.make_node("Conv", ["cx", "cw"], ["c"], name="slow_conv", pads=[128, 128, 128, 128]),
         helper.make_node("Add", ["x", "c"], ["y"], name="use_conv")],
        [vi("x", [1, 1, 513, 513])], [vi("y", None)], [i64("sx", [1, 1, 512, 512]), i64("sw", [1, 1, 256, 256])])
    # -- found by the fuzzer: each Atan / Asin / Acos inlined into the next
    # multiplied the lowered expression (4 in a row: minutes); valid model
    s["slow_atan_chain"] = model([helper.make_node(op, [f"v{i}"], [f"v{i + 1}"], name=f"n{i}")
                                  for i, op in enumerate(["Atan", "Asin", "Acos", "Atan", "Atan", "Acos"])],
                                 [vi("v0", [4])], [vi("v6", None)])
    # -- several unsupported ops: all named in one run
    m = model([helper.make_node("NonMaxSuppression", ["x"], ["d"], name="unsup_det"),
               helper.make_node("Frob", ["x"], ["f"], name="unsup_frob", domain="com.example"),
               helper.make_node("NoSuchOp", ["x"], ["z"], name="unsup_nosuch")],
              [vi("x", [3, 3])], [vi("d", None), vi("f", None), vi("z", None)])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    s["unsupported_three_ops"] = m
    # -- names that would break the one-line rule: a newline, a 100 KB name
    s["name_with_newline"] = model([helper.make_node("NonMaxSuppression", ["x"], ["y"], name="line1\nline2\r\x1b[2J")],
                                   [vi("x", [3, 3])], [vi("y", None)])
    s["name_100k"] = model([helper.make_node("NonMaxSuppression", ["x"], ["y"], name="n" * 100000)],
                           [vi("x", [3, 3])], [vi("y", None)])
    return s


def chain(op, n, in_dims, outputs_every=0, head=None):
    """x -> op -> op -> ... (n nodes, short value names); every
    `outputs_every`-th value is a graph output too; `head` (a node type)
    first turns x into a workspace intermediate."""
    nodes, first = [], "x"
    if head:
        nodes.append(helper.make_node(head, ["x"], ["h"]))
        first = "h"
    names = [first] + [f"{i:x}" for i in range(1, n + 1)]
    nodes += [helper.make_node(op, [names[i]], [names[i + 1]]) for i in range(n)]
    outs = [names[-1]] + ([names[i] for i in range(1, n, outputs_every)] if outputs_every else [])
    return model(nodes, [vi("x", in_dims)], [vi(o, None) for o in dict.fromkeys(outs)])


def large_seeds():
    """Big graphs (up to ~800 KB each), generated when a test runs instead of
    committed. Tensors of 2^39 floats (2 TiB, within shape inference's limit)
    make `kiln compile` fail in the memory plan, after the stages that once
    crashed or crawled, and before LLVM; inspect succeeds on them."""
    big = [1 << 39]
    return {
        # 40,000 Relu fused into one kernel: lowering recursed once per node
        # and overflowed the stack (SIGSEGV); now chains stop at 64 nodes
        "slow_deep_relu_chain": lambda: chain("Relu", 40000, big),
        # 40,000 Identity: constant folding rewired each one's readers by
        # scanning every node (docs/fuzzing.md has the time)
        "slow_identity_chain": lambda: chain("Identity", 40000, big, head="Neg"),
        # 20,000 graph outputs: materialize_outputs and the memory plan
        # compared every output with every other (and every kernel)
        "slow_wide_outputs": lambda: model(
            [helper.make_node("Neg", ["x"], ["t"])] +
            [helper.make_node("Relu", ["t"], [f"o{i:x}"]) for i in range(20000)],
            [vi("x", big)], [vi(f"o{i:x}", None) for i in range(20000)]),
    }


def main():
    args = sys.argv[1:]
    only = None
    if len(args) == 3 and args[1] == "--only":
        only = args[2]
    elif len(args) != 1:
        sys.exit("usage: gen_seeds.py OUT_DIR [--only NAME]   (NAME: any seed, large ones included)")
    out = args[0]
    os.makedirs(out, exist_ok=True)
    small, large = seeds(), large_seeds()
    if only is not None:
        if only not in small and only not in large:
            sys.exit(f"gen_seeds.py: no seed '{only}'")
        todo = {only: small[only] if only in small else large[only]()}
    else:
        todo = small
    for name, m in todo.items():
        with open(os.path.join(out, f"gen_{name}.onnx"), "wb") as f:
            f.write(m.SerializeToString())
    print(f"gen_seeds.py: {len(todo)} models in {out}")


if __name__ == "__main__":
    main()
