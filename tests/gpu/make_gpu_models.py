"""Writes the small ONNX models the GPU interpreter tests run (tests/gpu).

    make_gpu_models.py OUTDIR

Each model exercises one path of the GPU schedules at sizes that do not
divide their tiles: the Tensor Core template on a MatMul (f16, m and n
tails), a Gemm with transB (bf16, a k tail, a batch of rows below one MMA
tile), attention's two matmuls (both operands activations, batch axes) with
a softmax between, a 3x3 conv (implicit GEMM over NHWC) and a depthwise
conv (the scalar schedule), a stem conv over 3 channels (operand copies
element by element: its rows are not runs of 8); and the cooperative row
template: softmax over rows of 1000 and of 37 (a row shorter than the
block's threads), layer norm over 768 in f32 and f16, a log softmax in
bf16, ReduceMean / Max / Min / Prod and ArgMax (an int64 stage reading a
float one) over the last axis, and over a static shape a sum of every
element (one row: a rank-0 output) and a log-sum-exp and an L2 norm over
the last axis. Weights are seeded random values."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)
F16, BF16, F32 = TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.FLOAT


def const(name, shape, dtype):
    data = (rng.standard_normal(shape) * 0.2).astype(np.float32)
    if dtype == F16:
        return numpy_helper.from_array(data.astype(np.float16), name)
    if dtype == F32:
        return numpy_helper.from_array(data, name)
    t = helper.make_tensor(name, BF16, shape, data.flatten().tolist())
    return t


def save(path, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def main(out):
    save(f"{out}/gpu_matmul_f16.onnx",
         [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["y", "b"], ["z"]),
          helper.make_node("Relu", ["z"], ["r"])],
         [vi("x", F16, ["N", 72, 96])], [vi("r", F16, ["N", 72, 80])],
         [const("w", [96, 80], F16), const("b", [80], F16)])
    save(f"{out}/gpu_gemm_bf16.onnx",
         [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)],
         [vi("x", BF16, ["N", 40])], [vi("y", BF16, ["N", 48])],
         [const("w", [48, 40], BF16), const("b", [48], BF16)])
    save(f"{out}/gpu_attention_f16.onnx",
         [helper.make_node("MatMul", ["q", "k"], ["s"]), helper.make_node("Softmax", ["s"], ["p"], axis=-1),
          helper.make_node("MatMul", ["p", "v"], ["o"])],
         [vi("q", F16, ["N", 4, 40, 24]), vi("k", F16, ["N", 4, 24, 40]), vi("v", F16, ["N", 4, 40, 24])],
         [vi("o", F16, ["N", 4, 40, 24])], [])
    save(f"{out}/gpu_conv_f16.onnx",
         [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["y"], ["r"]),
          helper.make_node("Conv", ["r", "dw"], ["d"], pads=[1, 1, 1, 1], group=24, strides=[2, 2])],
         [vi("x", F16, ["N", 16, 12, 12])], [vi("d", F16, ["N", 24, 6, 6])],
         [const("w", [24, 16, 3, 3], F16), const("b", [24], F16), const("dw", [24, 1, 3, 3], F16)])
    save(f"{out}/gpu_stem_f16.onnx",
         [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])],
         [vi("x", F16, ["N", 3, 18, 18])], [vi("y", F16, ["N", 16, 9, 9])], [const("w", [16, 3, 3, 3], F16)])

    rows(out)


def rows(out):
    """The cooperative row template's models (schedule/gpu_rows.c)."""
    for n in (1000, 37):
        save(f"{out}/gpu_softmax_{n}.onnx", [helper.make_node("Softmax", ["x"], ["y"], axis=-1)],
             [vi("x", F32, ["N", 3, n])], [vi("y", F32, ["N", 3, n])], [])
    for name, t in (("f32", F32), ("f16", F16)):
        save(f"{out}/gpu_layernorm_{name}.onnx",
             [helper.make_node("Add", ["x", "r"], ["s"]),
              helper.make_node("LayerNormalization", ["s", "g", "b"], ["y"], axis=-1, epsilon=1e-5)],
             [vi("x", t, ["N", 5, 768]), vi("r", t, ["N", 5, 768])], [vi("y", t, ["N", 5, 768])],
             [const("g", [768], t), const("b", [768], t)])
    save(f"{out}/gpu_logsoftmax_bf16.onnx", [helper.make_node("LogSoftmax", ["x"], ["y"], axis=-1)],
         [vi("x", BF16, ["N", 4, 300])], [vi("y", BF16, ["N", 4, 300])], [])
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    half = numpy_helper.from_array(np.array(0.05, np.float32), "half")
    save(f"{out}/gpu_reduce_rows.onnx",
         [helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1], keepdims=1),
          helper.make_node("ReduceMax", ["x"], ["max"], axes=[-1], keepdims=0),
          helper.make_node("ReduceMin", ["x"], ["min"], axes=[-1], keepdims=0),
          helper.make_node("Mul", ["x", "half"], ["xh"]), helper.make_node("Add", ["xh", "one"], ["p"]),
          helper.make_node("ReduceProd", ["p"], ["prod"], axes=[-1], keepdims=0),
          helper.make_node("ArgMax", ["x"], ["arg"], axis=-1, keepdims=0)],
         [vi("x", F32, ["N", 6, 200])],
         [vi("mean", F32, ["N", 6, 1]), vi("max", F32, ["N", 6]), vi("min", F32, ["N", 6]), vi("prod", F32, ["N", 6]),
          vi("arg", TensorProto.INT64, ["N", 6])],
         [one, half])
    save(f"{out}/gpu_reduce_static.onnx",
         [helper.make_node("ReduceSum", ["x"], ["all"], keepdims=0),
          helper.make_node("ReduceLogSumExp", ["x"], ["lse"], axes=[-1], keepdims=1),
          helper.make_node("ReduceL2", ["x"], ["l2"], axes=[-1], keepdims=0)],
         [vi("x", F32, [4, 300])], [vi("all", F32, []), vi("lse", F32, [4, 1]), vi("l2", F32, [4])], [])


if __name__ == "__main__":
    main(sys.argv[1])
