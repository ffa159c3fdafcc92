#!/usr/bin/env python3
"""check_pipes.py — row pipes of kernels (kiln_pipe, ABI 1.3).

    check_pipes.py [--case NAME ...] [--list] [--kiln PATH] [--models DIR] [--keep DIR]

Each case builds a small ONNX model here, compiles it with --max-batch 3 for the
default target (KILN_TARGET, else the host), reads the artifact's pipes from its
descriptor (bench/kiln_artifact.py) and runs it through ctypes at batch 1, 2 and
3 on 1, 2 and 3 threads against ONNX Runtime.

The pipes expected depend on the target the artifact was built for (its
descriptor's target string): with 16 vector registers (AVX2, portable C) a dense
conv over 16 or more input channels runs as an implicit GEMM over its pixels
(fuse_spatial in schedule/rules.c), whose tasks are not rows, so it cannot
start a pipe; with 32 (AVX-512, aarch64) it runs rows and can.
Cases:
  expand_dw   1x1 conv + SiLU (16 -> 64 channels, 1 MiB per sample) -> 3x3
              stride-2 depthwise + SiLU -> 1x1, after a small conv whose buffer
              the depthwise output would reuse if the pipe did not keep it
              live: one pipe, the expand and the depthwise, on 32-register
              targets; none on 16-register ones.
  window5     45 rows (odd: one row per call) -> 5x5 stride-1 depthwise, pad 2,
              and a 3x3 stride-2 pad-0 one after it (rows past the last window
              never computed nor read): two pipes on 32-register targets; on
              16-register ones the first only (the second starts with a
              96-channel 1x1 conv).
  too_small   the same chain as expand_dw at 16x16 (64 KiB): no pipe.
  shared      the expand output also feeds a residual Add after the depthwise:
              no pipe (only a second kernel's window may read the first's).
  profile     `kiln run --profile` at batch 3 of expand_dw with a 12-channel
              expand (narrow: one pipe on every target): a row per step, the
              pipe's two kernels with positive times, outputs match ORT.
  trace       `kiln run --profile --trace` of the profile case's model at batch
              3 on 2 and 3 threads, and at batch 1 on 5 (too few rows: the
              pair runs as two steps), under umask 027: every slice ("X") of
              a thread's track nests in the slices it overlaps, every task
              slice lies inside the slice of its step (or pipe) on tid 0, the
              pipe shows as one slice naming both kernels where it ran as
              one (else as two kernel slices), and the file has mode 0640
              (0666 minus the umask), nothing left beside it.
  portable_c  window5 as portable C (--target c): its descriptor has a pipe,
              and check_portable_c.py passes at batch 1 and 3.
  tuned       narrow expand_dw with a tuning log (`kiln tune --trials 0`, then faster
              records: the expand with reduction blocking, which stores
              partial sums; the depthwise and the last conv with their loops
              running columns before rows): the pipe's two convs keep their
              defaults and form the pipe, the last conv (in no pipe) takes its
              record, and --dump-after=te shows those schedules; matches ORT.
  view        a 1-channel map reshaped (a view: 364 rows read as 182) before
              a 3x3 conv: no pipe across the view.
"""
import json
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from common import REPO, TempDir, compare, default_kiln, describe_failure, ort_reference, run

sys.path.insert(0, os.path.join(REPO, "bench"))
from kiln_artifact import Artifact  # noqa: E402


class CaseFailure(Exception):
    pass


class Builder:
    """A chain of NCHW convs; weights seeded."""

    def __init__(self, name, c, h):
        self.name, self.nodes, self.inits, self.rng = name, [], [], np.random.default_rng(7)
        self.x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, h, h])
        self.last, self.n = "x", 0

    def conv(self, cin, cout, k, stride=1, pad=0, group=1, silu=False, src=None):
        i = self.n = self.n + 1
        w = self.rng.standard_normal((cout, cin // group, k, k)).astype(np.float32) * (2.0 / (cin // group * k * k)) ** 0.5
        b = self.rng.standard_normal(cout).astype(np.float32) * 0.1
        self.inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        out = f"c{i}"
        self.nodes.append(helper.make_node("Conv", [src or self.last, f"w{i}", f"b{i}"], [out], name=f"conv{i}",
                                           kernel_shape=[k, k], strides=[stride, stride],
                                           pads=[pad] * 4, group=group))
        if silu:
            self.nodes += [helper.make_node("Sigmoid", [out], [f"s{i}"], name=f"sig{i}"),
                           helper.make_node("Mul", [out, f"s{i}"], [f"y{i}"], name=f"silu{i}")]
            out = f"y{i}"
        self.last = out
        return out

    def reshape(self, shape):
        self.n += 1
        out = f"r{self.n}"
        self.inits.append(numpy_helper.from_array(np.array(shape, np.int64), f"shape{self.n}"))
        self.nodes.append(helper.make_node("Reshape", [self.last, f"shape{self.n}"], [out], name=f"reshape{self.n}"))
        self.last = out
        return out

    def add(self, a, b):
        self.n += 1
        out = f"a{self.n}"
        self.nodes.append(helper.make_node("Add", [a, b], [out], name=f"add{self.n}"))
        self.last = out
        return out

    def save(self, path):
        y = helper.make_tensor_value_info(self.last, TensorProto.FLOAT, None)
        g = helper.make_graph(self.nodes, self.name, [self.x], [y], self.inits)
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
        return path


def expand_dw(h, mid=16):
    """mid: the expand's input channels; under 16 its default schedule runs
    rows on every target (the module's note), so the pipe forms everywhere."""
    b = Builder("expand_dw", 8, h)                         # the NHWC input: 128 KiB, no pipe
    b.conv(8, mid, 1)                                      # small: its buffer is reusable
    b.conv(mid, 64, 1, silu=True)                          # the expand: h*h*64 floats per sample
    b.conv(64, 64, 3, stride=2, pad=1, group=64, silu=True)
    b.conv(64, 16, 1)
    return b


# x86 CPUs with AVX-512 (codegen/target.c, x86_cpus_512)
X86_AVX512_CPUS = set("cannonlake cascadelake cooperlake icelake-client icelake-server knl knm rocketlake "
                      "sapphirerapids skx skylake-avx512 tigerlake x86-64-v4".split())


def wide_target(target):
    """Whether the schedules get 32 vector registers for an artifact's target
    string ("TRIPLE -mcpu=CPU [-mattr=...]"), as codegen/target.c derives them:
    aarch64, or x86-64 with AVX-512 (the CPU's class, then the -mattr toggles
    in order); AVX2 and portable C have 16."""
    words = target.split()
    if not words or words[0] == "c":
        return False
    if words[0].startswith(("aarch64", "arm64")):
        return True
    cpu = next((w[len("-mcpu="):] for w in words if w.startswith("-mcpu=")), "x86-64")
    avx512 = cpu in X86_AVX512_CPUS
    for w in words:
        for tok in w[len("-mattr="):].split(",") if w.startswith("-mattr=") else []:
            on, name = tok[:1] == "+", tok[1:]
            if name == "avx512f":
                avx512 = on
            elif not on and (name in ("avx", "avx2", "fma") or name.startswith("sse")):
                avx512 = False
    return avx512


def compile_and_check(tmp, kiln, name, model, want_pairs, extra=()):
    """want_pairs: the (first, second) anchor nodes expected, or a function of
    wide_target(the artifact's target) that gives them."""
    so = os.path.join(tmp, f"{name}.so")
    proc = run([kiln, "compile", model, "-o", so, "--max-batch", "3", *extra])
    if proc.returncode != 0:
        raise CaseFailure(f"kiln compile failed: {describe_failure(proc)}")
    art = Artifact(so)
    wide = wide_target(art.target)
    if callable(want_pairs):
        want_pairs = want_pairs(wide)
    nodes = {art.desc.steps[i].name.decode(): (art.desc.steps[i].nodes or b"").decode()
             for i in range(art.desc.n_steps)}
    pipes = [(nodes[a], nodes[b]) for a, b in art.pipes]
    print(f"  target {art.target.split(' -mattr')[0]} ({'32' if wide else '16'} vector registers)")
    print(f"  {len(pipes)} pipe(s): " + "; ".join(f"[{a}] + [{b}]" for a, b in pipes))
    got_anchor = [(a.split(",")[0], b.split(",")[0]) for a, b in pipes]
    if got_anchor != want_pairs:
        raise CaseFailure(f"pipes {got_anchor}, expected {want_pairs} for target '{art.target}'")
    x_shape = [d.dim_value for d in onnx.load(model).graph.input[0].type.tensor_type.shape.dim[1:]]
    rng = np.random.default_rng(3)
    for batch in (1, 2, 3):
        x = rng.standard_normal([batch] + x_shape).astype(np.float32)
        want = list(ort_reference(model, {"x": x}).values())[0]
        for threads in (1, 2, 3):
            (got,) = art.run(x, threads=threads)
            ok, err, tol, why = compare(got, want)
            if not ok:
                raise CaseFailure(f"batch {batch}, {threads} threads: max|kiln-ort| = {err:.3g} > {tol:.3g} {why}")
        print(f"  batch {batch}: threads 1, 2, 3 match ORT (max err {err:.2g})")
    return so


def case_expand_dw(c):
    compile_and_check(c.tmp, c.kiln, "expand_dw", expand_dw(64).save(os.path.join(c.tmp, "expand_dw.onnx")),
                      lambda wide: [("conv2", "conv3")] if wide else [])


def window5():
    b = Builder("window5", 8, 45)
    b.conv(8, 96, 1, silu=True)                              # 45 x 45 x 96: 760 KiB per sample
    b.conv(96, 96, 5, stride=1, pad=2, group=96, silu=True)  # 45 rows from 45
    b.conv(96, 96, 1)
    b.conv(96, 96, 3, stride=2, pad=0, group=96)             # 22 rows: row 44 is read by none
    b.conv(96, 8, 1)
    return b


def case_window5(c):
    compile_and_check(c.tmp, c.kiln, "window5", window5().save(os.path.join(c.tmp, "window5.onnx")),
                      lambda wide: [("conv1", "conv2"), ("conv3", "conv4")] if wide else [("conv1", "conv2")])


def case_portable_c(c):
    model = window5().save(os.path.join(c.tmp, "w5.onnx"))
    src = os.path.join(c.tmp, "w5.c")
    proc = run([c.kiln, "compile", model, "--target", "c", "-o", src, "--max-batch", "3"])
    if proc.returncode != 0:
        raise CaseFailure(f"kiln compile --target c failed: {describe_failure(proc)}")
    with open(src) as f:
        pipes = [ln.strip() for ln in f if ln.strip().startswith(".n_pipes = ")]
    if pipes in ([], [".n_pipes = 0,"]):
        raise CaseFailure(f"the portable C descriptor has no pipe ({pipes})")
    print(f"  {pipes[0]}")
    proc = run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_portable_c.py"),
                model, "--host-only", "--max-batch", "3", "--batch", "1,3", "--threads", "2", "--kiln", c.kiln])
    print("  " + "\n  ".join(proc.stdout.strip().splitlines()[-3:]))
    if proc.returncode != 0:
        raise CaseFailure(f"check_portable_c.py failed: {describe_failure(proc)}")


def case_too_small(c):
    compile_and_check(c.tmp, c.kiln, "too_small", expand_dw(16).save(os.path.join(c.tmp, "small.onnx")), [])


def case_shared(c):
    b = Builder("shared", 8, 64)
    e = b.conv(8, 64, 1, silu=True)
    d = b.conv(64, 64, 3, stride=1, pad=1, group=64, silu=True)
    b.add(d, e)                                              # fused into the depthwise kernel: the output
    compile_and_check(c.tmp, c.kiln, "shared", b.save(os.path.join(c.tmp, "shared.onnx")), [])


def case_profile(c):
    model = expand_dw(64, mid=12).save(os.path.join(c.tmp, "p.onnx"))
    so = compile_and_check(c.tmp, c.kiln, "p", model, [("conv2", "conv3")])
    x = np.random.default_rng(5).standard_normal([3, 8, 64, 64]).astype(np.float32)
    np.save(os.path.join(c.tmp, "x.npy"), x)
    out = os.path.join(c.tmp, "out")
    proc = run([c.kiln, "run", so, "--input", f"x={os.path.join(c.tmp, 'x.npy')}", "--output-dir", out,
                "--threads", "2", "--profile", "--bench", "5"])
    if proc.returncode != 0:
        raise CaseFailure(f"kiln run --profile failed: {describe_failure(proc)}")
    art = Artifact(so)
    names = [art.desc.steps[i].name.decode() for i in range(art.desc.n_steps)]
    times = {}
    for line in proc.stdout.splitlines():
        f = line.split()
        if len(f) > 3 and f[0].isdigit() and f[1] in names:
            times[f[1]] = float(f[2])
    if sorted(times) != sorted(names):
        raise CaseFailure(f"profile rows {sorted(times)}, expected one per step {sorted(names)}\n{proc.stdout}")
    for a, b in art.pipes:
        if not (times[a] > 0 and times[b] > 0):
            raise CaseFailure(f"pipe {a} + {b}: times {times[a]}, {times[b]} ms")
        print(f"  pipe {a} + {b}: {times[a]:.4f} + {times[b]:.4f} ms")
    want = list(ort_reference(model, {"x": x}).values())[0]
    got = np.load(os.path.join(out, os.listdir(out)[0]))
    ok, err, tol, why = compare(got, want)
    if not ok:
        raise CaseFailure(f"profiled run: max|kiln-ort| = {err:.3g} > {tol:.3g} {why}")


def check_trace_nesting(events):
    """Per track (pid, tid), every two "X" slices are disjoint or nested, and
    every task slice lies in the time of the slice on tid 0 that holds its
    step (a kernel's, or a pipe's). Returns (tasks checked, pipe slices)."""
    eps = 0.0015  # ts and dur are printed to 1 ns; their sum rounds twice
    tracks = {}
    for e in events:
        if e.get("ph") == "X":
            tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    for key, evs in tracks.items():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_ends = []  # ends of the slices enclosing the current one
        for e in evs:
            while open_ends and open_ends[-1][0] <= e["ts"] + eps:
                open_ends.pop()
            end = e["ts"] + e["dur"]
            if open_ends and end > open_ends[-1][0] + eps:
                raise CaseFailure(f"tid {key[1]}: {e} overlaps {open_ends[-1][1]} without nesting in it")
            open_ends.append((end, e))
    owners = {}  # (run, step) -> the tid-0 slice of that step
    pipes = 0
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "pipe"):
            if e["tid"] != 0:
                raise CaseFailure(f"step slice off tid 0: {e}")
            steps = e["args"]["steps"] if e["cat"] == "pipe" else [e["args"]["step"]]
            pipes += e["cat"] == "pipe"
            for s in steps:
                owners[(e["args"]["run"], s)] = e
    tasks = [e for e in events if e.get("ph") == "X" and e.get("cat") == "task"]
    for t in tasks:
        steps = t["args"]["steps"] if "steps" in t["args"] else [t["args"]["step"]]
        for s in steps:
            o = owners.get((t["args"]["run"], s))
            if o is None:
                raise CaseFailure(f"task slice of a step with no slice: {t}")
            if t["ts"] < o["ts"] - eps or t["ts"] + t["dur"] > o["ts"] + o["dur"] + eps:
                raise CaseFailure(f"task slice {t} outside its step's slice {o}")
    return len(tasks), pipes


def case_trace(c):
    model = expand_dw(64, mid=12).save(os.path.join(c.tmp, "tr.onnx"))
    so = compile_and_check(c.tmp, c.kiln, "tr", model, [("conv2", "conv3")])
    art = Artifact(so)
    rng = np.random.default_rng(5)
    for batch, threads, as_pipe in ((3, 2, True), (3, 3, True), (1, 5, False)):
        folder = os.path.join(c.tmp, f"trace{batch}x{threads}")
        os.makedirs(folder)
        x = os.path.join(c.tmp, f"x{batch}.npy")
        np.save(x, rng.standard_normal([batch, 8, 64, 64]).astype(np.float32))
        trace = os.path.join(folder, "t.json")
        proc = run([c.kiln, "run", so, "--input", f"x={x}", "--threads", str(threads),
                    "--profile", "--peak", "50", "--bench", "20", "--trace", trace],
                   preexec_fn=lambda: os.umask(0o027))
        if proc.returncode != 0:
            raise CaseFailure(f"kiln run --profile --trace failed: {describe_failure(proc)}")
        left = sorted(os.listdir(folder))
        if left != ["t.json"]:
            raise CaseFailure(f"files beside the trace: {left}")
        with open(trace) as f:
            events = json.load(f)["traceEvents"]
        n_tasks, pipes = check_trace_nesting(events)
        mode = os.stat(trace).st_mode & 0o777
        if mode != 0o640:
            raise CaseFailure(f"trace written with mode {mode:04o}, expected 0640 (0666 under umask 027)")
        want_pipes = 20 * len(art.pipes) if as_pipe else 0
        if pipes != want_pipes:
            raise CaseFailure(f"batch {batch}, {threads} threads: {pipes} pipe slices, expected {want_pipes}")
        names = {e["name"] for e in events if e.get("cat") == "pipe"}
        want = {f"{a} + {b}" for a, b in art.pipes} if as_pipe else set()
        if names != want:
            raise CaseFailure(f"pipe slices named {sorted(names)}, expected {sorted(want)}")
        kernels = sum(e.get("cat") == "kernel" for e in events)
        if kernels + 2 * pipes != 20 * art.desc.n_steps:
            raise CaseFailure(f"{kernels} kernel and {pipes} pipe slices for 20 runs of {art.desc.n_steps} steps")
        print(f"  batch {batch}, {threads} threads: {n_tasks} task slices nested, {pipes} pipe slices, "
              f"mode {mode:04o}")


def case_tuned(c):
    model = expand_dw(64, mid=12).save(os.path.join(c.tmp, "t.onnx"))
    log = os.path.join(c.tmp, "t.jsonl")
    proc = run([c.kiln, "tune", model, "--trials", "0", "--log", log, "--keep-noisy"])
    if proc.returncode != 0:
        raise CaseFailure(f"kiln tune --trials 0 failed: {describe_failure(proc)}")
    with open(log) as f:
        recs = [json.loads(ln) for ln in f if ln.strip()]
    extra = []
    for r in recs:  # every conv but the first (8 -> 16): the expand, the depthwise, the last
        if not r["key"].startswith("kiln.ConvNHWC") or "float32[1,64,64,8]" in r["key"]:
            continue
        t = dict(r, default=False, seconds=r["seconds"] / 2)
        if "float32[1,64,64,12]" in r["key"]:  # the expand: 12 input channels in 3 blocks
            # blocking needs row tiles that divide the 64 rows: 4 (the
            # default's 6 rows on 16-register targets would overlap)
            trace = [dict(p, factor=4) if p["p"] == "split" and p["axis"] == 2 else p for p in r["trace"]]
            i = [p["p"] for p in trace].index("compute_at")
            t["trace"] = trace[:i] + [{"p": "split_reduction", "axis": 2, "factor": 4, "depth": 4}] + trace[i:]
        else:
            t["trace"] = [dict(p, loops=[[0, 0], [2, 0], [1, 0]] + p["loops"][3:]) if p["p"] == "reorder" else p
                          for p in r["trace"]]
        extra.append(t)
    if len(extra) != 3:
        raise CaseFailure(f"expected 3 conv records to alter, found {len(extra)}")
    with open(log, "a") as f:
        for t in extra:
            f.write(json.dumps(t) + "\n")
    so = os.path.join(c.tmp, "t.so")
    proc = run([c.kiln, "compile", model, "-o", so, "--max-batch", "3", "--tuning-log", log, "-v"])
    if proc.returncode != 0:
        raise CaseFailure(f"kiln compile --tuning-log failed: {describe_failure(proc)}")
    notes = [ln for ln in proc.stderr.splitlines() if "tuning log:" in ln and "kernels" in ln]
    print("  " + "\n  ".join(notes))
    if not any("2 kernels keep their defaults" in ln for ln in notes) or \
       not any("1 of 6 kernels use tuned schedules" in ln for ln in notes):
        raise CaseFailure(f"expected the pipe's 2 kernels to keep their defaults and 1 tuned kernel:\n{proc.stderr}")
    # --dump-after=te prints the schedules the artifact gets: the expand's
    # default (no split_reduction), the last conv's record (columns first)
    proc = run([c.kiln, "compile", model, "-o", so, "--max-batch", "3", "--tuning-log", log, "--dump-after=te"])
    blocks = {}
    for ln in proc.stdout.splitlines():
        if ln.startswith("kernel "):
            cur = blocks.setdefault(ln.split("# ")[-1].split(",")[0], [])
        elif blocks:
            cur.append(ln)
    if proc.returncode != 0 or not {"conv2", "conv4"} <= set(blocks):
        raise CaseFailure(f"--dump-after=te with the log: {describe_failure(proc)}")
    if any("split_reduction" in ln for ln in blocks["conv2"]) or \
       not any(ln.startswith("reorder(0.0, 2.0, 1.0") for ln in blocks["conv4"]):
        raise CaseFailure("--dump-after=te does not show the schedules compiled: conv2 " +
                          "; ".join(blocks["conv2"]) + " / conv4 " + "; ".join(blocks["conv4"]))
    compile_and_check(c.tmp, c.kiln, "t", model, [("conv2", "conv3")], ["--tuning-log", log])


def case_view(c):
    b = Builder("view", 1, 364)
    b.conv(1, 1, 3, pad=1)           # 364 x 364 x 1: 518 KiB per sample
    b.reshape([0, 1, 182, 728])      # a view (rows 2r and 2r + 1 side by side)
    b.conv(1, 4, 3, pad=1)
    compile_and_check(c.tmp, c.kiln, "view", b.save(os.path.join(c.tmp, "view.onnx")), [])


CASES = {"expand_dw": case_expand_dw, "window5": case_window5, "too_small": case_too_small,
         "shared": case_shared, "profile": case_profile, "trace": case_trace, "portable_c": case_portable_c,
         "tuned": case_tuned, "view": case_view}


class Ctx:
    def __init__(self, kiln, tmp):
        self.kiln, self.tmp = kiln, tmp


def main(argv=None):
    ap = argparse.ArgumentParser(description="Check row pipes of kernels.")
    ap.add_argument("--case", action="append", choices=list(CASES), help="run only this case (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--kiln", default=default_kiln())
    ap.add_argument("--models", default=os.path.join(REPO, "models"), help="unused (the cases build their models)")
    ap.add_argument("--keep", default=None, help="work in this folder and keep it")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(CASES))
        return 0
    failed = 0
    with TempDir(args.keep) as tmp:
        ctx = Ctx(args.kiln, tmp)
        for name in args.case or list(CASES):
            print(f"{name}:")
            try:
                CASES[name](ctx)
                print(f"PASS {name}")
            except CaseFailure as e:
                print(f"FAIL {name}: {e}")
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
