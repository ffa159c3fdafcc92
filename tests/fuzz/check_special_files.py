#!/usr/bin/env python3
"""check_special_files.py — files that are not regular files must be rejected
at once, not block: the model path is a FIFO; an initializer's external data
is a FIFO in the model's directory; a `kiln run` input .npy is a FIFO.
`kiln compile`, `kiln inspect` and `kiln run` must exit 1 within 10 s with a
diagnostic naming the file.

    check_special_files.py KILN
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def expect_error(cmd, culprit):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired:
        return [f"{' '.join(cmd)}: blocked for 10 s"]
    if p.returncode != 1 or not p.stderr.startswith("kiln: error:") or culprit not in p.stderr:
        return [f"{' '.join(cmd)}: exit {p.returncode}, stderr {p.stderr!r}; expected exit 1 naming '{culprit}'"]
    return []


def main():
    kiln = sys.argv[1]
    fails = []
    with tempfile.TemporaryDirectory(prefix="kiln-special-") as tmp:
        fifo = os.path.join(tmp, "model_fifo.onnx")
        os.mkfifo(fifo)
        fails += expect_error([kiln, "compile", fifo, "-o", os.path.join(tmp, "x.so")], "model_fifo.onnx")
        fails += expect_error([kiln, "inspect", fifo], "model_fifo.onnx")

        os.mkfifo(os.path.join(tmp, "weights.bin"))
        w = numpy_helper.from_array(np.ones((2, 2), np.float32), "w")
        w.ClearField("raw_data")
        w.data_location = TensorProto.EXTERNAL
        w.external_data.add(key="location", value="weights.bin")
        g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
        model = os.path.join(tmp, "ext.onnx")
        with open(model, "wb") as f:
            f.write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
        fails += expect_error([kiln, "compile", model, "-o", os.path.join(tmp, "y.so")], "weights.bin")
        fails += expect_error([kiln, "inspect", model], "weights.bin")
        if any(n.endswith((".so", ".h")) for n in os.listdir(tmp)):
            fails.append(f"files left behind: {os.listdir(tmp)}")

        g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        good = os.path.join(tmp, "good.onnx")
        with open(good, "wb") as f:
            f.write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
        art = os.path.join(tmp, "good.so")
        p = subprocess.run([kiln, "compile", good, "-o", art], capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            fails.append(f"setup: compile failed: {p.stderr}")
        else:
            npy_fifo = os.path.join(tmp, "input_fifo.npy")
            os.mkfifo(npy_fifo)
            out_dir = os.path.join(tmp, "outs")
            fails += expect_error([kiln, "run", art, "--input", f"x={npy_fifo}", "--output-dir", out_dir],
                                  "input_fifo.npy")
    for f in fails:
        print("FAIL " + f)
    if not fails:
        print("PASS FIFOs as model, external data and run input are rejected without blocking")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
