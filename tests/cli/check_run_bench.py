#!/usr/bin/env python3
"""check_run_bench.py — `kiln run` as a benchmark (--bench without inputs,
--batch sweeps, --json), where its outputs go, and `kiln inspect --json`.

    check_run_bench.py [--case NAME ...] [--list] [--kiln PATH] [--models DIR] [--keep DIR]

tiny_cnn is compiled once (--max-batch 8). Every kiln run below works in a
fresh empty folder, which must stay empty unless the case asks for files.
Cases:
  no_inputs    --bench 3 with no --input: exit 0, one latency line for batch
               1 with throughput = batch / median (to the printed rounding).
  sweep        --batch 1,2,8 --bench 3: one line per batch, in order; with
               --profile --peak 10, one table per batch at its batch.
  batch_errors --batch 9 (above max batch 8), 0, '1,,2', 'x', '2,2', '1,'
               exit 2 with one line naming --batch and the value; an input
               of batch 2 with --batch 4 or --batch 1,2 exits 1 naming
               --batch; several batches with --output-dir or --trace exit 2;
               a failed --json run leaves no JSON file.
  json_file    --batch 1,4 --bench 3 --profile --peak 10 --json F under
               umask 027: F is mode 0640, nothing else is left beside it, it
               parses and its figures agree with the printed lines and the
               artifact (batch, runs, ordered times, throughput, outputs'
               shapes, one profile row per kernel), generated inputs null.
  json_stdout  --json -: stdout is exactly one JSON document, the report is
               on stderr; --json into a missing folder: exit 1 naming the
               file, before any run.
  outputs      a run with --input writes no file (only prints the summary);
               --output-dir . writes output.npy into the current folder,
               --output-dir D into D.
  inspect_json kiln inspect --json of the .so and of the .onnx: valid JSON
               holding what the text output lists (tensors, kernels, census).
  inspect_gpu_json  the same for a GPU artifact (--target cuda, compiled
               with NVRTC; skipped without it): images, device workspace,
               each kernel's grids at batch 1 and max batch, block, shared
               bytes and argument count.
  json_escape  a model whose input, output and node names hold a quote, a
               backslash, control characters and non-ASCII text: inspect
               --json (.onnx and .so) and run --json give back the exact
               names; a name with bytes that are not UTF-8 comes out with
               U+FFFD in a document that parses.
"""
import argparse
import json
import os
import re
import stat
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
from common import REPO, TempDir, default_kiln, describe_failure, run, sanitizer_report  # noqa: E402

LATENCY_RE = re.compile(r"^latency: median ([\d.]+) ms, p90 ([\d.]+) ms, throughput ([\d.]+) samples/s "
                        r"\(batch (\d+), (\d+) runs, (\d+) threads\)$")
NAME_IN = 'in "q" \\ back\x01\x1f\ttab\nnl \u00e9\u20ac\U0001F600'
NAME_OUT = 'out\\"\x7f'
NAME_NODE = 'relu "n"\\'


class CaseFailure(Exception):
    pass


class Ctx:
    def __init__(self, kiln, models, tmp):
        self.kiln, self.tmp, self.n = kiln, tmp, 0
        self.model = os.path.join(models, "tiny_cnn.onnx")
        if not os.path.isfile(self.model):
            raise CaseFailure(f"{self.model} missing (run models/export.py)")
        self.so = os.path.join(tmp, "tiny_cnn.so")
        proc = run([kiln, "compile", self.model, "-o", self.so, "--max-batch", "8"])
        if proc.returncode != 0:
            raise CaseFailure(f"kiln compile failed: {describe_failure(proc)}")

    def fresh(self, name):
        self.n += 1
        path = os.path.join(self.tmp, f"{name}{self.n}")
        os.makedirs(path)
        return path

    def kiln_cmd(self, args, cwd, code=0, umask=None):
        proc = run([self.kiln, *args], cwd=cwd, timeout=300,
                   preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)
        if sanitizer_report(proc.stderr):
            raise CaseFailure(f"sanitizer report:\n{proc.stderr[-3000:]}")
        if proc.returncode != code:
            raise CaseFailure(f"kiln {' '.join(args)}: expected exit {code}, got {describe_failure(proc)}")
        return proc

    def npy(self, name, batch):
        path = os.path.join(self.tmp, name)
        np.save(path, np.random.default_rng(batch).standard_normal((batch, 3, 32, 32)).astype(np.float32))
        return path


def expect_empty(folder, what):
    left = sorted(os.listdir(folder))
    if left:
        raise CaseFailure(f"{what} left files in its folder: {left}")


def latency_lines(text):
    lines = [l for l in text.splitlines() if l.startswith("latency:")]
    parsed = []
    for l in lines:
        m = LATENCY_RE.match(l)
        if not m:
            raise CaseFailure(f"malformed latency line: {l!r}")
        median, p90, thr = (float(g) for g in m.groups()[:3])
        batch, runs, threads = (int(g) for g in m.groups()[3:])
        # the line prints the median to 3 or 4 decimals, the throughput to 1
        lo, hi = batch * 1e3 / (median + 6e-4), batch * 1e3 / max(median - 6e-4, 1e-9)
        if not lo - 0.1 <= thr <= hi + 0.1:
            raise CaseFailure(f"throughput {thr} is not batch {batch} / median {median} ms: {l}")
        if p90 < median:
            raise CaseFailure(f"p90 below the median: {l}")
        parsed.append({"median": median, "p90": p90, "throughput": thr, "batch": batch, "runs": runs,
                       "threads": threads})
    return parsed


def case_no_inputs(c):
    cwd = c.fresh("noin")
    proc = c.kiln_cmd(["run", c.so, "--bench", "3", "--threads", "1"], cwd)
    lines = latency_lines(proc.stdout)
    print("  " + proc.stdout.strip())
    if len(lines) != 1 or lines[0]["batch"] != 1 or lines[0]["runs"] != 3 or lines[0]["threads"] != 1:
        raise CaseFailure(f"expected one latency line (batch 1, 3 runs, 1 threads):\n{proc.stdout}")
    expect_empty(cwd, "kiln run --bench")


def case_sweep(c):
    cwd = c.fresh("sweep")
    proc = c.kiln_cmd(["run", c.so, "--batch", "1,2,8", "--bench", "3", "--threads", "2"], cwd)
    print("  " + "\n  ".join(proc.stdout.splitlines()))
    lines = latency_lines(proc.stdout)
    if [l["batch"] for l in lines] != [1, 2, 8] or any(l["runs"] != 3 for l in lines):
        raise CaseFailure(f"expected batches 1, 2, 8 of 3 runs each:\n{proc.stdout}")
    if len(proc.stdout.splitlines()) != 3:
        raise CaseFailure(f"a sweep prints one line per batch and nothing else:\n{proc.stdout}")
    proc = c.kiln_cmd(["run", c.so, "--batch", "2,8", "--profile", "--peak", "10", "--bench", "2"], cwd)
    tables = re.findall(r"^profile: .*, batch (\d+), ", proc.stdout, re.M)
    if tables != ["2", "8"] or [l["batch"] for l in latency_lines(proc.stdout)] != [2, 8]:
        raise CaseFailure(f"expected a latency line and a table for batch 2, then 8:\n{proc.stdout}")
    expect_empty(cwd, "a sweep")


def expect_error(c, args, code, culprits, cwd):
    proc = c.kiln_cmd(args, cwd, code=code)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    if len(lines) != 1 or not lines[0].startswith("kiln: error:"):
        raise CaseFailure(f"kiln {' '.join(args)}: expected one 'kiln: error:' line, got:\n{proc.stderr}")
    absent = [w for w in culprits if w not in lines[0]]
    if absent:
        raise CaseFailure(f"kiln {' '.join(args)}: the diagnostic does not name {absent}: {lines[0]}")
    if proc.stdout:
        raise CaseFailure(f"kiln {' '.join(args)} failed but printed:\n{proc.stdout}")
    print(f"  {' '.join(args[2:])}: exit {code}: {lines[0]}")


def case_batch_errors(c):
    cwd = c.fresh("errors")
    for value in ["9", "1,9", "0", "1,,2", "x", "2,2", "1,", "-1"]:
        expect_error(c, ["run", c.so, "--batch", value, "--json", "r.json"], 2, ["--batch", value], cwd)
    x2 = c.npy("x2.npy", 2)
    for value in ["4", "1,2"]:
        expect_error(c, ["run", c.so, "--input", f"input={x2}", "--batch", value, "--json", "r.json"], 1,
                     ["--batch", value, "batch 2"], cwd)
    expect_error(c, ["run", c.so, "--batch", "1,2", "--output-dir", "out"], 2, ["--output-dir", "--batch"], cwd)
    expect_error(c, ["run", c.so, "--batch", "1,2", "--profile", "--trace", "t.json"], 2, ["--trace", "--batch"],
                 cwd)
    expect_empty(cwd, "a failed kiln run")


def check_json_doc(c, doc, batches, runs, printed):
    if doc["artifact"] != c.so or doc["max_batch"] != 8 or doc["prefix"] != "model" or not doc["target"]:
        raise CaseFailure(f"bad head: { {k: doc[k] for k in ('artifact', 'prefix', 'max_batch')} }")
    if doc["inputs"] != [{"name": "input", "file": None}]:
        raise CaseFailure(f"inputs: {doc['inputs']} (a generated input has file null)")
    if [b["batch"] for b in doc["batches"]] != batches:
        raise CaseFailure(f"batches {[b['batch'] for b in doc['batches']]}, expected {batches}")
    for b, line in zip(doc["batches"], printed):
        if b["runs"] != runs or not b["min_ms"] <= b["median_ms"] <= b["p90_ms"]:
            raise CaseFailure(f"batch {b['batch']}: bad runs or times: {b}")
        if not b["min_ms"] <= b["mean_ms"]:
            raise CaseFailure(f"batch {b['batch']}: mean below the fastest run: {b}")
        if abs(b["throughput_per_s"] - b["batch"] * 1e3 / b["median_ms"]) > 1e-6 * b["throughput_per_s"]:
            raise CaseFailure(f"batch {b['batch']}: throughput is not batch / median: {b}")
        if abs(b["median_ms"] - line["median"]) > 6e-4 or abs(b["p90_ms"] - line["p90"]) > 6e-4:
            raise CaseFailure(f"batch {b['batch']}: JSON {b['median_ms']}/{b['p90_ms']} ms, printed "
                              f"{line['median']}/{line['p90']}")
        if b["outputs"] != [{"name": "output", "dtype": "float32", "shape": [b["batch"], 10]}]:
            raise CaseFailure(f"batch {b['batch']}: outputs {b['outputs']}")


def case_json_file(c):
    cwd = c.fresh("json")
    proc = c.kiln_cmd(["run", c.so, "--batch", "1,4", "--bench", "3", "--profile", "--peak", "10", "--threads", "2",
                       "--json", "r.json"], cwd, umask=0o027)
    if sorted(os.listdir(cwd)) != ["r.json"]:
        raise CaseFailure(f"expected r.json alone, found {sorted(os.listdir(cwd))}")
    mode = stat.S_IMODE(os.stat(os.path.join(cwd, "r.json")).st_mode)
    if mode != 0o640:
        raise CaseFailure(f"r.json has mode {mode:o}, expected 640 (0666 less umask 027)")
    with open(os.path.join(cwd, "r.json")) as f:
        doc = json.load(f)
    check_json_doc(c, doc, [1, 4], 3, latency_lines(proc.stdout))
    if doc["threads"] != 2 or doc["warmup"] != 3:
        raise CaseFailure(f"threads {doc['threads']}, warmup {doc['warmup']}")
    n_rows = len(re.findall(r"^\s+\d+\s+model_k\d+\s", proc.stdout, re.M)) // 2
    for b in doc["batches"]:
        p = b["profile"]
        if p["peak_gflops"] != 10 or p["peak_source"] != "--peak" or p["runs"] != 3:
            raise CaseFailure(f"batch {b['batch']}: profile head {p}")
        kernels = p["kernels"]
        if len(kernels) != n_rows or sorted(k["step"] for k in kernels) != list(range(n_rows)):
            raise CaseFailure(f"batch {b['batch']}: {len(kernels)} profile rows, the table has {n_rows}")
        if abs(sum(k["share"] for k in kernels) - 1) > 1e-6:
            raise CaseFailure(f"batch {b['batch']}: shares add up to {sum(k['share'] for k in kernels)}")
        times = [k["median_ms"] for k in kernels]
        if times != sorted(times, reverse=True):
            raise CaseFailure(f"batch {b['batch']}: rows not in the table's order (by time)")
    print(f"  r.json: {len(doc['batches'])} batches, {n_rows} profile rows each, mode {mode:o}")


def case_json_stdout(c):
    cwd = c.fresh("jstdout")
    proc = c.kiln_cmd(["run", c.so, "--batch", "2", "--bench", "3", "--json", "-"], cwd)
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise CaseFailure(f"stdout is not one JSON document ({e}):\n{proc.stdout}")
    check_json_doc(c, doc, [2], 3, latency_lines(proc.stderr))
    expect_empty(cwd, "kiln run --json -")
    missing = os.path.join(cwd, "no", "r.json")
    expect_error(c, ["run", c.so, "--bench", "1", "--json", missing], 1, ["--json", missing], cwd)


def case_outputs(c):
    x = c.npy("x1.npy", 1)
    cwd = c.fresh("outputs")
    proc = c.kiln_cmd(["run", c.so, "--input", f"input={x}"], cwd)
    if not proc.stdout.startswith("output: float32 [1, 10] = ["):
        raise CaseFailure(f"expected the output summary:\n{proc.stdout}")
    expect_empty(cwd, "kiln run without --output-dir")
    c.kiln_cmd(["run", c.so, "--input", f"input={x}", "--output-dir", "."], cwd)
    c.kiln_cmd(["run", c.so, "--input", f"input={x}", "--output-dir", "d"], cwd)
    if sorted(os.listdir(cwd)) != ["d", "output.npy"] or os.listdir(os.path.join(cwd, "d")) != ["output.npy"]:
        raise CaseFailure(f"expected output.npy and d/output.npy, found {sorted(os.listdir(cwd))}")
    a, b = np.load(os.path.join(cwd, "output.npy")), np.load(os.path.join(cwd, "d", "output.npy"))
    if a.shape != (1, 10) or not np.array_equal(a, b):
        raise CaseFailure(f"bad outputs: {a.shape}, equal {np.array_equal(a, b)}")


def inspect_json(c, path, code=0):
    proc = c.kiln_cmd(["inspect", path, "--json"], c.tmp, code=code)
    try:
        return json.loads(proc.stdout), proc
    except json.JSONDecodeError as e:
        raise CaseFailure(f"kiln inspect {path} --json: not JSON ({e}):\n{proc.stdout}")


def case_inspect_json(c):
    doc, _ = inspect_json(c, c.so)
    text = c.kiln_cmd(["inspect", c.so], c.tmp).stdout
    kernels = re.findall(r"^\s+(\d+)\s+(\S+)\s+args (\d+)", text, re.M)
    if [(str(k["step"]), k["name"], str(k["args"])) for k in doc["kernels"]] != kernels:
        raise CaseFailure(f"kernels differ from the text: {doc['kernels']} vs {kernels}")
    for key, want in (("prefix", r"^prefix: (.*)$"), ("target", r"^target: (.*)$"),
                      ("max_batch", r"^max batch: (\d+)$"), ("workspace_bytes", r"^workspace: (\d+) bytes")):
        m = re.search(want, text, re.M)
        if not m or str(doc[key]) != m.group(1):
            raise CaseFailure(f"{key}: JSON {doc[key]!r}, text {m.group(1) if m else None!r}")
    if doc["inputs"] != [{"name": "input", "dtype": "float32", "shape": [1, 3, 32, 32], "batch_axes": [0]}] or \
            doc["outputs"] != [{"name": "output", "dtype": "float32", "shape": [1, 10], "batch_axes": [0]}]:
        raise CaseFailure(f"tensors: {doc['inputs']} {doc['outputs']}")
    model, _ = inspect_json(c, c.model)
    text = c.kiln_cmd(["inspect", c.model], c.tmp).stdout
    census = [(op, int(n)) for op, n in re.findall(r"^  (\S+)\s+(\d+)$", text, re.M)]
    if [(o["op"], o["count"]) for o in model["ops"]] != census or not all(o["supported"] for o in model["ops"]):
        raise CaseFailure(f"census differs from the text: {model['ops']} vs {census}")
    m = re.search(r"^parameters: (\d+)$", text, re.M)
    if model["parameters"] != int(m.group(1)) or model["unsupported"] != [] or not model["flops_batch_1"] > 0:
        raise CaseFailure(f"model facts: {model}")
    print(f"  {len(doc['kernels'])} kernels, {len(model['ops'])} op types")


def case_inspect_gpu_json(c):
    so = os.path.join(c.tmp, "gpu.so")
    proc = run([c.kiln, "compile", c.model, "-o", so, "--target", "cuda -arch=sm_80", "--max-batch", "4"])
    if proc.returncode != 0:
        if "NVRTC" in proc.stderr or "nvrtc" in proc.stderr:
            print(f"  SKIP: no NVRTC here: {proc.stderr.strip()}")
            return
        raise CaseFailure(f"kiln compile --target cuda: {describe_failure(proc)}")
    doc, _ = inspect_json(c, so)
    text = c.kiln_cmd(["inspect", so], c.tmp).stdout
    images = [(int(sm), "ptx" if kind == "compute" else "cubin", int(n))
              for kind, sm, n in re.findall(r"^image: (sm|compute)_(\d+) .*?, (\d+) bytes$", text, re.M)]
    if [(i["sm"], i["kind"], i["bytes"]) for i in doc["images"]] != images or not images:
        raise CaseFailure(f"images: JSON {doc['images']}, text {images}")
    m = re.search(r"^device workspace: (\d+) bytes", text, re.M)
    if doc["device_workspace_bytes"] != int(m.group(1)):
        raise CaseFailure(f"device workspace: JSON {doc['device_workspace_bytes']}, text {m.group(1)}")
    rows = re.findall(r"^\s+(\d+)\s+(\S+)\s+grid (\d+)x(\d+)x(\d+) / (\d+)x(\d+)x(\d+)\s+block (\d+)x(\d+)x(\d+)"
                      r"\s+shared (\d+)\s+args (\d+)", text, re.M)
    want = [[int(r[0]), r[1], [int(x) for x in r[2:5]], [int(x) for x in r[5:8]], [int(x) for x in r[8:11]],
             int(r[11]), int(r[12])] for r in rows]
    got = [[k["step"], k["name"], k["grid_batch_1"], k["grid_max_batch"], k["block"], k["shared_bytes"], k["args"]]
           for k in doc["kernels"]]
    if got != want or not want:
        raise CaseFailure(f"GPU kernels: JSON {got}, text {want}")
    print(f"  {len(images)} images, {len(want)} kernels with their launches")


def weird_model(path, name_in, name_out):
    import onnx
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info(name_in, TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info(name_out, TensorProto.FLOAT, ["N", 4])
    node = helper.make_node("Relu", [name_in], [name_out], name=NAME_NODE)
    graph = helper.make_graph([node], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def case_json_escape(c):
    onnx_path, so = os.path.join(c.tmp, "weird.onnx"), os.path.join(c.tmp, "weird.so")
    weird_model(onnx_path, NAME_IN, NAME_OUT)
    c.kiln_cmd(["compile", onnx_path, "-o", so, "--max-batch", "2"], c.tmp)
    doc, _ = inspect_json(c, so)
    if doc["inputs"][0]["name"] != NAME_IN or doc["outputs"][0]["name"] != NAME_OUT:
        raise CaseFailure(f"names changed: {doc['inputs'][0]['name']!r} {doc['outputs'][0]['name']!r}")
    doc, _ = inspect_json(c, onnx_path)
    if doc["inputs"][0]["name"] != NAME_IN:
        raise CaseFailure(f"inspect .onnx: name changed: {doc['inputs'][0]['name']!r}")
    proc = c.kiln_cmd(["run", so, "--bench", "1", "--json", "-"], c.tmp)
    doc = json.loads(proc.stdout)
    if doc["inputs"][0]["name"] != NAME_IN or doc["batches"][0]["outputs"][0]["name"] != NAME_OUT:
        raise CaseFailure(f"run --json: names changed: {doc['inputs']} {doc['batches'][0]['outputs']}")
    # bytes that are not UTF-8, put in place of a same-length ASCII name in the file
    bad_path = os.path.join(c.tmp, "bad_utf8.onnx")
    weird_model(bad_path, "inXYZ", "out")
    with open(bad_path, "rb") as f:
        data = f.read()
    with open(bad_path, "wb") as f:
        f.write(data.replace(b"inXYZ", b"in\xff\xc3Z"))
    doc, _ = inspect_json(c, bad_path)
    if doc["inputs"][0]["name"] != "in\ufffd\ufffdZ":
        raise CaseFailure(f"bytes that are not UTF-8: got {doc['inputs'][0]['name']!r}, expected 'in\\ufffd\\ufffdZ'")
    print(f"  names round-trip: {NAME_IN!r}, {NAME_OUT!r}; bad bytes became U+FFFD")


CASES = {"no_inputs": case_no_inputs, "sweep": case_sweep, "batch_errors": case_batch_errors,
         "json_file": case_json_file, "json_stdout": case_json_stdout, "outputs": case_outputs,
         "inspect_json": case_inspect_json, "inspect_gpu_json": case_inspect_gpu_json,
         "json_escape": case_json_escape}


def main(argv=None):
    ap = argparse.ArgumentParser(description="Check kiln run --bench / --batch / --json and inspect --json.")
    ap.add_argument("--case", action="append", choices=list(CASES), help="run only this case (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--kiln", default=default_kiln())
    ap.add_argument("--models", default=os.path.join(REPO, "models"))
    ap.add_argument("--keep", default=None, help="work in this folder and keep it")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(CASES))
        return 0
    passed = failed = 0
    with TempDir(args.keep) as tmp:
        try:
            ctx = Ctx(os.path.abspath(args.kiln), args.models, tmp)
        except CaseFailure as e:
            print(f"FAIL setup: {e}")
            return 1
        for name in args.case or list(CASES):
            print(f"{name}:")
            try:
                CASES[name](ctx)
                print(f"PASS {name}")
                passed += 1
            except CaseFailure as e:
                print(f"FAIL {name}: {e}")
                failed += 1
    print(f"check_run_bench: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
