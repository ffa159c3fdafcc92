#!/usr/bin/env python3
"""const_inputs.py — ONNX node tests whose shape-deciding inputs become constants.

Some node tests feed an input that decides an output's shape (TopK's K, OneHot's
depth, a window's size) as a graph input; Kiln needs those at compile time, so
the plain conformance run skips them. This copies each such test with those
inputs turned into initializers (from its test_data_set_0), keeps the other
inputs and the expected outputs, and runs kn_conformance on the copies: every
copy must pass.

usage: const_inputs.py KN_CONFORMANCE [NODE_DIR]
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import onnx

# test-name substring -> indices of the inputs to bake into the model
BAKE = {"test_top_k": [1], "test_onehot": [1], "test_hannwindow": [0], "test_hammingwindow": [0],
        "test_blackmanwindow": [0]}


def bake(node_dir, out_dir):
    made = []
    for name in sorted(os.listdir(node_dir)):
        keys = [k for k in BAKE if name.startswith(k) and "expanded" not in name]
        if not keys:
            continue
        baked = BAKE[keys[0]]
        src = os.path.join(node_dir, name)
        sets = sorted(glob.glob(os.path.join(src, "test_data_set_*")))
        if len(sets) != 1:
            continue
        model = onnx.load(os.path.join(src, "model.onnx"))
        names = [i.name for i in model.graph.input]
        for k in baked:
            t = onnx.TensorProto()
            with open(os.path.join(sets[0], f"input_{k}.pb"), "rb") as f:
                t.ParseFromString(f.read())
            t.name = names[k]
            model.graph.initializer.append(t)
        kept = [i for j, i in enumerate(model.graph.input) if j not in baked]
        del model.graph.input[:]
        model.graph.input.extend(kept)
        dst = os.path.join(out_dir, name + "_const")
        os.makedirs(os.path.join(dst, "test_data_set_0"))
        onnx.save(model, os.path.join(dst, "model.onnx"))
        j = 0
        for k in range(len(names)):
            if k not in baked:
                shutil.copy(os.path.join(sets[0], f"input_{k}.pb"),
                            os.path.join(dst, "test_data_set_0", f"input_{j}.pb"))
                j += 1
        for f in glob.glob(os.path.join(sets[0], "output_*.pb")):
            shutil.copy(f, os.path.join(dst, "test_data_set_0"))
        made.append(name + "_const")
    return made


def main():
    runner = sys.argv[1]
    node_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    with tempfile.TemporaryDirectory() as tmp:
        made = bake(node_dir, tmp)
        if not made:
            print("no tests to bake")
            return 77
        r = subprocess.run([runner, "--node-dir", tmp, "-j", "2"], capture_output=True, text=True)
        print(r.stdout + r.stderr)
        bad = [l for l in r.stdout.splitlines() if l.startswith(("FAIL", "SKIP"))]
        if bad or r.returncode not in (0,):
            print(f"{len(bad)} of {len(made)} baked tests did not pass")
            return 1
        print(f"all {len(made)} baked tests pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
