#!/usr/bin/env python3
"""test_kiln.py — the kiln Python package (python/kiln, docs/python.md).

    test_kiln.py [CLASS ...]     (unittest's arguments; KILN = the kiln binary)

The package is imported as Python finds it: ctest's python_* tests put the
source tree's python/ on PYTHONPATH; python_install (check_install.sh) runs
this file with a venv's interpreter that pip installed the package into, and
sets KILN_TEST_INSTALLED=1, under which the package must not come from the
source tree. Models are made here with onnx's helper, plus models/tiny_*.onnx.

  Conversions  every dtype `kiln run` converts (bfloat16, the float8 formats,
               float4e2m1 as float32; int4 / uint4 / int2 / uint2 as int8 /
               uint8), through an Identity model: kiln.load's outputs are bit
               for bit those of `kiln run` on the same .npy inputs (every code's
               value, the midpoints between codes and their neighbours, NaN
               payloads, infinities, subnormals, random bit patterns), and a
               sub-byte value out of range is refused by both, naming the input.
  Calls        tiny_cnn at batch 3 and tiny_bert (two int64 inputs) equal
               `kiln run`'s outputs exactly; by keyword, position and dict;
               lists for arrays; metadata (names, types, shapes, max_batch);
               threads; prepare/run on raw buffers (bench/kiln_artifact.py).
  Errors       one InputError (a ValueError), naming the culprit, for: a wrong
               shape, dtype, a missing, unknown or doubled input, too many
               positional inputs, a batch above max_batch, inputs of different
               batches, a bad thread count, a file that is not ELF, a missing
               file, an ELF .so without a descriptor, a .o artifact, truncated
               copies (in a child process: a crash would be a SIGBUS there),
               an aarch64 artifact (where kiln can cross-compile); RunError
               (a RuntimeError) with the artifact's P_last_error for a GPU
               artifact without a driver.
  Compile      kiln.compile's options reach kiln (prefix, max_batch), load=True,
               and a failed compile or a missing kiln is one RunError.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper

import kiln

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
MODELS = os.path.join(REPO, "models")
KILN = os.environ.get("KILN") or os.path.join(REPO, "build", "kiln")

CONVERTED = {"bfloat16": T.BFLOAT16, "float8e4m3fn": T.FLOAT8E4M3FN, "float8e4m3fnuz": T.FLOAT8E4M3FNUZ,
             "float8e5m2": T.FLOAT8E5M2, "float8e5m2fnuz": T.FLOAT8E5M2FNUZ, "float8e8m0": T.FLOAT8E8M0,
             "float4e2m1": T.FLOAT4E2M1}
SUBBYTE = {"int4": (T.INT4, np.int8, -8, 7), "uint4": (T.UINT4, np.uint8, 0, 15),
           "int2": (T.INT2, np.int8, -2, 1), "uint2": (T.UINT2, np.uint8, 0, 3)}


def sh(*cmd, check=True):
    proc = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))}: exit {proc.returncode}\n{proc.stderr}")
    return proc


def save_model(path, nodes, inputs, outputs):
    g = helper.make_graph(nodes, os.path.basename(path), inputs, outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 25)])
    m.ir_version = 11
    onnx.save(m, path)
    return path


def identity_model(path, elem, k):
    return save_model(path, [helper.make_node("Identity", ["x"], ["y"])],
                      [helper.make_tensor_value_info("x", elem, ["N", k])],
                      [helper.make_tensor_value_info("y", elem, ["N", k])])


def bits(a):
    return np.ascontiguousarray(a).view(np.uint32 if a.dtype == np.float32 else a.dtype)


def probes(name):
    """float32 values that reach every rounding case of the type `name`."""
    with np.errstate(all="ignore"):  # the grid overflows to infinity on purpose
        return _probes(name)


def _probes(name):
    rng = np.random.default_rng(7)
    f32 = np.float32
    special = np.array([0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000,
                        0x7f800001, 0xffa00001, 0x00000001, 0x80000001, 0x007fffff, 0x00400000,
                        0x00800000, 0x7f7fffff, 0xff7fffff, 0x3f800000, 0xbf800000], np.uint32).view(f32)
    randbits = rng.integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32).view(f32)
    scaled = (rng.standard_normal(2048) * np.exp2(rng.integers(-140, 140, 2048))).astype(f32)
    if name == "bfloat16":
        codes = (np.arange(65536, dtype=np.uint32) << 16).view(f32)
        ties = ((rng.integers(0, 65536, 4096).astype(np.uint32) << 16) | 0x8000).view(f32)
        grid = np.concatenate([codes, ties, np.nextafter(ties, f32(np.inf)), np.nextafter(ties, f32(-np.inf))])
    else:
        vals = np.unique(kiln.dtypes.decode(name, np.arange(256, dtype=np.uint8)).astype(np.float64))
        vals = vals[np.isfinite(vals)]
        mids = ((vals[1:] + vals[:-1]) / 2).astype(f32)
        big = vals[-1] * np.array([1.0625, 1.125, 1.5, 2, 1024], np.float64)
        grid = np.concatenate([vals.astype(f32), mids, np.nextafter(mids, f32(np.inf)),
                               np.nextafter(mids, f32(-np.inf)), big.astype(f32), -big.astype(f32)])
    x = np.concatenate([special, randbits, scaled, grid]).astype(f32)
    return x if x.size % 2 == 0 else np.append(x, f32(1))


class Case(unittest.TestCase):
    """A temporary folder per test class."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kiln-py-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def compile(self, model, out, *args):
        sh(KILN, "compile", model, "-o", out, *args)
        return out

    def cli_run(self, so, inputs, check=True):
        """`kiln run` on {name: array}: ({output name: array}, the process)."""
        out_dir = tempfile.mkdtemp(dir=self.tmp)
        cmd = [KILN, "run", so, "--threads", "1", "--output-dir", out_dir]
        for name, a in inputs.items():
            p = os.path.join(out_dir, f"in_{name}.npy")
            np.save(p, a)
            cmd += ["--input", f"{name}={p}"]
        proc = sh(*cmd, check=check)
        outs = {f[:-4]: np.load(os.path.join(out_dir, f)) for f in os.listdir(out_dir)
                if f.endswith(".npy") and not f.startswith("in_")}
        return outs, proc

    def assert_error(self, kind, fn, *needles):
        with self.assertRaises(kind) as cm:
            fn()
        msg = str(cm.exception)
        self.assertIsInstance(cm.exception, kiln.KilnError)
        self.assertNotIn("\n", msg)
        for n in needles:
            self.assertIn(n, msg)
        return msg


class Conversions(Case):
    def test_installed_package(self):
        """Under check_install.sh, the package is the venv's, not the source tree's."""
        where = os.path.abspath(kiln.__file__)
        print(f"kiln package: {where}", file=sys.stderr)
        if os.environ.get("KILN_TEST_INSTALLED") == "1":
            self.assertFalse(where.startswith(os.path.join(REPO, "python") + os.sep), where)
            self.assertTrue(where.startswith(sys.prefix), (where, sys.prefix))

    def test_floats_match_cli(self):
        for name, elem in CONVERTED.items():
            with self.subTest(dtype=name):
                x = probes(name).reshape(2, -1)
                so = self.compile(identity_model(self.path(f"id_{name}.onnx"), elem, x.shape[1]),
                                  self.path(f"id_{name}.so"), "--max-batch", "2")
                model = kiln.load(so, threads=1)
                self.assertEqual((model.inputs[0].type, model.inputs[0].dtype), (name, np.float32))
                got = model(x=x)["y"]
                want = self.cli_run(so, {"x": x})[0]["y"]
                self.assertEqual((got.dtype, got.shape), (want.dtype, want.shape))
                diff = np.flatnonzero(bits(got) != bits(want))
                self.assertEqual(diff.size, 0, f"{name}: {diff.size} of {x.size} differ, first at x = "
                                 f"{x.reshape(-1)[diff[:1]]}: kiln run {want.reshape(-1)[diff[:1]]}, "
                                 f"kiln.load {got.reshape(-1)[diff[:1]]}")

    def test_subbyte_ints_match_cli(self):
        for name, (elem, np_type, lo, hi) in SUBBYTE.items():
            with self.subTest(dtype=name):
                x = np.tile(np.arange(lo, hi + 1, dtype=np_type), 3).reshape(1, -1)
                so = self.compile(identity_model(self.path(f"id_{name}.onnx"), elem, x.shape[1]),
                                  self.path(f"id_{name}.so"))
                model = kiln.load(so)
                got = model(x)["y"]
                want = self.cli_run(so, {"x": x})[0]["y"]
                self.assertEqual(got.dtype, np_type)
                np.testing.assert_array_equal(got, want)
                np.testing.assert_array_equal(got, x)
                bad = x.copy()
                bad[0, 5] = hi + 1
                self.assert_error(kiln.InputError, lambda: model(x=bad), "input 'x'", str(hi + 1),
                                  "index 5", name)
                proc = self.cli_run(so, {"x": bad}, check=False)[1]
                self.assertNotEqual(proc.returncode, 0)
                self.assertIn("index 5", proc.stderr)


class Calls(Case):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.cnn = os.path.join(cls.tmp, "cnn.so")
        sh(KILN, "compile", os.path.join(MODELS, "tiny_cnn.onnx"), "-o", cls.cnn, "--max-batch", "4")

    def test_matches_cli(self):
        x = np.random.default_rng(0).standard_normal((3, 3, 32, 32)).astype(np.float32)
        got = kiln.load(self.cnn, threads=1)(input=x)
        want = self.cli_run(self.cnn, {"input": x})[0]
        self.assertEqual(sorted(got), sorted(want))
        for k in want:
            np.testing.assert_array_equal(bits(got[k]), bits(want[k]))

    def test_two_int64_inputs_match_cli(self):
        so = self.compile(os.path.join(MODELS, "tiny_bert.onnx"), self.path("bert.so"), "--max-batch", "2")
        model = kiln.load(so, threads=1)
        self.assertEqual([t.dtype for t in model.inputs], [np.dtype(np.int64)] * len(model.inputs))
        rng = np.random.default_rng(1)
        feeds = {t.name: rng.integers(0, 2, t.shape(2)).astype(np.int64) for t in model.inputs}
        got, want = model(feeds), self.cli_run(so, feeds)[0]
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])

    def test_ways_to_call(self):
        model = kiln.load(self.cnn)
        x = np.random.default_rng(2).standard_normal((2, 3, 32, 32)).astype(np.float32)
        ref = model(input=x)["output"]
        for out in (model(x), model({"input": x}), model(input=x.tolist()),
                    model(input=np.asfortranarray(x))):
            np.testing.assert_array_equal(out["output"], ref)
        self.assertEqual(ref.shape, (2, 10))
        (raw,) = kiln.Model(self.cnn).run(x)  # the raw ABI buffers, as bench/ uses them
        np.testing.assert_array_equal(raw, ref)

    def test_metadata(self):
        model = kiln.load(self.cnn)
        self.assertEqual(model.input_names, ["input"])
        self.assertEqual(model.output_names, ["output"])
        t = model.inputs[0]
        self.assertEqual((t.type, t.dtype, t.storage, t.dims, t.batch_mask), ("float32", np.float32, np.float32,
                                                                              (1, 3, 32, 32), 1))
        self.assertEqual(t.shape(3), (3, 3, 32, 32))
        self.assertEqual(repr(t), "input: float32[N, 3, 32, 32]")
        self.assertEqual(model.max_batch, 4)
        self.assertEqual(model.prefix, "model")
        self.assertTrue(model.abi.startswith("1."))
        self.assertIn("input: float32[N, 3, 32, 32] -> output: float32[N, 10], max_batch 4", repr(model))

    def test_threads(self):
        model = kiln.load(self.cnn, threads=2)
        self.assertEqual(model.threads, 2)
        x = np.zeros((1, 3, 32, 32), np.float32)
        a = model(input=x)["output"]
        model.set_threads(1)
        np.testing.assert_array_equal(model(input=x)["output"], a)
        for bad in (0, 257, 1.5, "2"):
            self.assert_error(kiln.InputError, lambda: model.set_threads(bad), "threads", "[1, 256]")
        self.assert_error(kiln.InputError, lambda: kiln.load(self.cnn, threads=0), "threads")


class Errors(Case):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        add = save_model(os.path.join(cls.tmp, "add.onnx"), [helper.make_node("Add", ["a", "b"], ["c"])],
                         [helper.make_tensor_value_info("a", T.FLOAT, ["N", 4]),
                          helper.make_tensor_value_info("b", T.FLOAT, ["N", 4])],
                         [helper.make_tensor_value_info("c", T.FLOAT, ["N", 4])])
        cls.so = os.path.join(cls.tmp, "add.so")
        sh(KILN, "compile", add, "-o", cls.so, "--max-batch", "3")
        cls.model = kiln.load(cls.so)

    def call(self, *args, **kwargs):
        return lambda: self.model(*args, **kwargs)

    def test_inputs(self):
        f = np.zeros((2, 4), np.float32)
        E = kiln.InputError
        self.assert_error(E, self.call(a=f, b=np.zeros((2, 5), np.float32)), "input 'b'", "shape [2, 5]",
                          "[N, 4] with N in 1..3")
        self.assert_error(E, self.call(a=f, b=np.zeros((2, 4, 1), np.float32)), "input 'b'", "[2, 4, 1]")
        self.assert_error(E, self.call(a=f, b=np.zeros((2, 4), np.float64)), "input 'b'", "dtype float64",
                          "expects float32")
        self.assert_error(E, self.call(a=f, b=f.astype(">f4")), "input 'b'", "byte-swapped")
        self.assert_error(E, self.call(a=f), "missing input 'b'", "the model's inputs: a, b")
        self.assert_error(E, self.call(), "missing inputs 'a', 'b'")
        self.assert_error(E, self.call(a=f, b=f, c=f), "unknown input 'c'", "a, b")
        self.assert_error(E, self.call(f, a=f), "input 'a' is given twice")
        self.assert_error(E, self.call(f, f, f), "3 inputs given, the model takes 2")
        self.assert_error(E, self.call(a=np.zeros((4, 4), np.float32), b=np.zeros((4, 4), np.float32)),
                          "input 'a'", "batch 4", "max_batch 3")
        self.assert_error(E, self.call(a=f, b=np.zeros((3, 4), np.float32)), "input 'b'", "batch 3",
                          "batch 2", "share N")
        self.assert_error(E, self.call(a=np.zeros((0, 4), np.float32), b=np.zeros((0, 4), np.float32)),
                          "input 'a'", "shape [0, 4]")
        self.assert_error(E, self.call(a=f, b=[["x"] * 4] * 2), "input 'b'", "float32")
        self.assertIsInstance(E("x"), ValueError)
        np.testing.assert_array_equal(self.model(a=f + 1, b=f + 2)["c"], f + 3)  # still usable

    def test_not_an_artifact(self):
        text = self.path("text.so")
        with open(text, "w") as f:
            f.write("not an artifact\n")
        self.assert_error(kiln.InputError, lambda: kiln.load(text), "text.so", "not a Kiln artifact")
        self.assert_error(kiln.InputError, lambda: kiln.load(self.path("none.so")), "none.so",
                          "No such file")
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc:  # an ELF shared library that is not an artifact
            src = self.path("plain.c")
            with open(src, "w") as f:
                f.write("int plain(void) { return 1; }\n")
            sh(cc, "-shared", "-fPIC", "-o", self.path("plain.so"), src)
            self.assert_error(kiln.InputError, lambda: kiln.load(self.path("plain.so")), "plain.so",
                              "no kiln_artifact_v1 symbol")

    def test_object_file(self):
        obj = self.compile(os.path.join(MODELS, "tiny_mlp.onnx"), self.path("mlp.o"))
        self.assert_error(kiln.InputError, lambda: kiln.load(obj), "mlp.o", "relocatable object")

    def test_truncated(self):
        size = os.path.getsize(self.so)
        with open(self.so, "rb") as f:
            data = f.read()
        cuts = []
        for n in (0, 2, 10, 40, 63, 64, 200, size // 3, size // 2, size - 1):
            p = self.path(f"cut{n}.so")
            with open(p, "wb") as f:
                f.write(data[:n])
            cuts.append(p)
        # without the section headers' offset only the segments tell the cut
        p = self.path("cut_noshdr.so")
        with open(p, "wb") as f:
            f.write(data[:40] + bytes(8) + data[48:size // 2])
        cuts.append(p)
        # in a child: without the checks the load would die of SIGBUS
        script = ("import sys, kiln\n"
                  "for p in sys.argv[1:]:\n"
                  "    try:\n"
                  "        kiln.load(p)\n"
                  "    except kiln.InputError as e:\n"
                  "        if 'is truncated or not an ELF shared object' not in str(e) or p not in str(e):\n"
                  "            sys.exit(f'{p}: {e}')\n"
                  "    else:\n"
                  "        sys.exit(f'{p}: loaded')\n")
        proc = sh(sys.executable, "-c", script, *cuts, check=False)
        self.assertEqual(proc.returncode, 0, proc.stderr)

    def test_aarch64(self):
        so = self.path("arm.so")
        proc = sh(KILN, "compile", os.path.join(MODELS, "tiny_mlp.onnx"), "-o", so,
                  "--target", "aarch64-linux-gnu -mcpu=cortex-a76", check=False)
        if proc.returncode != 0:
            self.skipTest(f"kiln cannot cross-compile here: {proc.stderr.strip()}")
        self.assert_error(kiln.InputError, lambda: kiln.load(so), "arm.so", "built for aarch64",
                          "this machine is x86_64")

    def test_gpu_without_driver(self):
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            self.skipTest("no C compiler")
        so = self.path("fake_gpu.so")
        sh(cc, "-shared", "-fPIC", "-I", os.path.join(REPO, "include"), "-o", so, os.path.join(HERE, "fake_gpu.c"))
        model = kiln.load(so)
        self.assertEqual((model.abi, model.target), ("1.4", "cuda -arch=sm_80"))
        msg = self.assert_error(kiln.RunError, lambda: model(x=np.zeros(4, np.float32)), "fake_run failed",
                                "no NVIDIA driver on this machine", "(KILN_ERR_DEVICE)")
        self.assertIsInstance(kiln.RunError(msg), RuntimeError)


class Compile(Case):
    def test_options_and_load(self):
        out = kiln.compile(os.path.join(MODELS, "tiny_mlp.onnx"), self.path("m.so"), prefix="mlp", max_batch=3)
        self.assertEqual(out, self.path("m.so"))
        self.assertTrue(os.path.exists(self.path("m.h")))
        model = kiln.compile(os.path.join(MODELS, "tiny_mlp.onnx"), self.path("m2.so"), prefix="mlp2",
                             extra_args=["--conv-algo", "direct"], load=True)
        self.assertEqual((model.prefix, model.max_batch), ("mlp2", 1))
        self.assertEqual(kiln.load(out).prefix, "mlp")

    def test_failures(self):
        bad = self.path("bad.onnx")
        with open(bad, "wb") as f:
            f.write(b"garbage")
        self.assert_error(kiln.RunError, lambda: kiln.compile(bad, self.path("bad.so")), "bad.onnx",
                          "cannot decode the ONNX model")
        self.assertFalse(os.path.exists(self.path("bad.so")))
        self.assert_error(kiln.RunError, lambda: kiln.compile(os.path.join(MODELS, "tiny_mlp.onnx"),
                                                              self.path("x.so"), max_batch=0), "--max-batch")
        old = os.environ.pop("KILN", None)
        path = os.environ.get("PATH", "")
        os.environ["PATH"] = self.tmp
        try:
            self.assert_error(kiln.RunError, lambda: kiln.compile(bad, self.path("b.so")), "KILN", "PATH")
        finally:
            os.environ["PATH"] = path
            if old is not None:
                os.environ["KILN"] = old


if __name__ == "__main__":
    os.environ["KILN"] = KILN  # kiln.compile finds it there
    unittest.main()
