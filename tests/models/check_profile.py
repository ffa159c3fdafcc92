#!/usr/bin/env python3
"""check_profile.py — `kiln run --profile [--trace FILE] [--peak GFLOPS]` (issue 4).

    check_profile.py [--case NAME ...] [--list] [--kiln PATH] [--models DIR] [--keep DIR]

tiny_cnn is compiled once (--max-batch 2); its plan (kernel names, fused ONNX
nodes, FLOPs per batch unit) is read from the artifact's descriptor through
ctypes (bench/kiln_artifact.py), never from kiln's own output. Cases:
  table      --profile --peak 100 at batch 2 on 2 threads: one row per plan step
             naming its kernel and nodes, rows sorted by time, shares adding up to
             100% (±0.5), GFLOP/s = FLOPs x batch / time and %peak = GFLOP/s / 100
             within the printed rounding, idle a percentage for each parallel
             step and '-' for the others, a total line; outputs still match ONNX
             Runtime.
  trace      --trace: the file parses as JSON; per run one "run" event and one
             "kernel" event per step ("X", ts/dur in µs, pid, tid), in plan order
             and inside their run; "task" events on the pool threads; thread
             names; no temporary file left beside it; each step's idle in the
             table of the same call is the median over the runs of
             1 - (its task events' durations) / (tasks x its kernel event's).
  no_inputs  --profile without --input (filled in) and without --peak (measured),
             1 thread: a table with a measured peak line, idle '-' (no pool).
  bad_flags  --trace or --peak without --profile, a bad --peak, --trace into a
             missing folder: exit 2 (usage) or 1, one 'kiln: error:' line naming
             the flag or file, no crash, no file left behind.
"""
import argparse
import json
import os
import re
import sys

import numpy as np

from common import (REPO, TempDir, compare, default_kiln, describe_failure, make_inputs,
                    model_inputs, ort_reference, run, sanitizer_report)

sys.path.insert(0, os.path.join(REPO, "bench"))
from kiln_artifact import Artifact  # noqa: E402

ROW_RE = re.compile(r"^\s*(\d+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)%\s+([\d.]+)\s+([\d.]+)%\s+([\d.]+%|-)\s+(.*)$")
TOTAL_RE = re.compile(r"^\s+total\s+([\d.]+)\s+([\d.]+)%\s+([\d.]+)\s+([\d.]+)%")


class CaseFailure(Exception):
    pass


class Ctx:
    def __init__(self, kiln, models, tmp):
        self.kiln, self.models, self.tmp = kiln, models, tmp
        self.so = os.path.join(tmp, "tiny_cnn.so")
        self.model = os.path.join(models, "tiny_cnn.onnx")
        if not os.path.isfile(self.model):
            raise CaseFailure(f"{self.model} missing (run models/export.py)")
        proc = run([kiln, "compile", self.model, "-o", self.so, "--max-batch", "2"])
        if proc.returncode != 0:
            raise CaseFailure(f"kiln compile failed: {describe_failure(proc)}")
        art = Artifact(self.so)
        d = art.desc
        self.steps = [(d.steps[i].name.decode(), (d.steps[i].nodes or b"").decode(), d.steps[i].flops)
                      for i in range(d.n_steps)]
        self.parallel = [bool(d.steps[i].parallel) for i in range(d.n_steps)]
        del art

    def kiln_run(self, *args, inputs=True, batch=2, expect_ok=True):
        cmd = [self.kiln, "run", self.so, "--output-dir", os.path.join(self.tmp, "out")]
        feeds = None
        if inputs:
            feeds = make_inputs(model_inputs(self.model), batch=batch, seed=3)
            for i, (name, arr) in enumerate(feeds.items()):
                p = os.path.join(self.tmp, f"in{i}.npy")
                np.save(p, arr)
                cmd += ["--input", f"{name}={p}"]
        proc = run(cmd + list(args), timeout=300)
        if sanitizer_report(proc.stderr):
            raise CaseFailure(f"sanitizer report:\n{proc.stderr[-3000:]}")
        if expect_ok and proc.returncode != 0:
            raise CaseFailure(f"kiln run {' '.join(args)}: {describe_failure(proc)}")
        return proc, feeds


def parse_table(stdout):
    rows, total = [], None
    for line in stdout.splitlines():
        m = ROW_RE.match(line)
        if m:
            rows.append({"step": int(m.group(1)), "kernel": m.group(2), "ms": float(m.group(3)),
                         "share": float(m.group(4)), "gflops": float(m.group(5)),
                         "peak": float(m.group(6)),
                         "idle": None if m.group(7) == "-" else float(m.group(7)[:-1]),
                         "nodes": m.group(8).strip()})
        m = TOTAL_RE.match(line)
        if m:
            total = [float(g) for g in m.groups()]
    return rows, total


def case_table(c):
    proc, feeds = c.kiln_run("--profile", "--peak", "100", "--threads", "2", "--bench", "5")
    print("  " + "\n  ".join(proc.stdout.splitlines()))
    rows, total = parse_table(proc.stdout)
    if len(rows) != len(c.steps):
        raise CaseFailure(f"{len(rows)} table rows for {len(c.steps)} plan steps")
    if sorted(r["step"] for r in rows) != list(range(len(c.steps))):
        raise CaseFailure("the rows do not list every step once")
    for r in rows:
        name, nodes, flops = c.steps[r["step"]]
        if r["kernel"] != name:
            raise CaseFailure(f"step {r['step']}: kernel {r['kernel']}, the descriptor says {name}")
        if r["nodes"] != (nodes or "-"):
            raise CaseFailure(f"step {r['step']}: nodes '{r['nodes']}', the descriptor says '{nodes}'")
        if r["ms"] > 0:
            # the table prints ms to 4 decimals: a 1.6 us kernel's time is known to 3%
            want = flops * 2 / (r["ms"] * 1e6)
            lo, hi = flops * 2 / ((r["ms"] + 5e-5) * 1e6), flops * 2 / (max(r["ms"] - 5e-5, 1e-9) * 1e6)
            if not lo - 0.01 - 0.01 * lo <= r["gflops"] <= hi + 0.01 + 0.01 * hi:
                raise CaseFailure(f"step {r['step']}: {r['gflops']} GFLOP/s, expected {want:.3f} "
                                  f"({flops} flops x batch 2 in {r['ms']} ms)")
        if abs(r["peak"] - r["gflops"]) > 0.1 + 0.01 * r["gflops"]:  # peak 100 GFLOP/s
            raise CaseFailure(f"step {r['step']}: {r['peak']}% of a 100 GFLOP/s peak for {r['gflops']} GFLOP/s")
        par = c.parallel[r["step"]]
        if (r["idle"] is None) == par or (par and not 0 <= r["idle"] <= 100):
            raise CaseFailure(f"step {r['step']} ({'parallel' if par else 'serial'}): idle {r['idle']}")
    if not any(c.parallel):
        raise CaseFailure("no parallel step in the plan: the idle column goes unchecked")
    times = [r["ms"] for r in rows]
    if times != sorted(times, reverse=True):
        raise CaseFailure(f"rows not sorted by time: {times}")
    shares = sum(r["share"] for r in rows)
    if abs(shares - 100) > 0.5:
        raise CaseFailure(f"shares add up to {shares:.2f}%")
    if total is None or abs(total[0] - sum(times)) > 0.001 * len(rows) + 1e-3:
        raise CaseFailure(f"total line {total} does not add the rows' times ({sum(times):.4f})")
    if "time = median over the runs" not in proc.stdout or "5 runs" not in proc.stdout:
        raise CaseFailure("the header does not say what the time is and over how many runs")
    out_dir = os.path.join(c.tmp, "out")
    for name, want in ort_reference(c.model, feeds).items():
        got = np.load(os.path.join(out_dir, re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy"))
        ok, err, tol, why = compare(got, want)
        if not ok:
            raise CaseFailure(f"output '{name}' after profiling: max err {err:.3g} > {tol:.3g} {why}")


def case_trace(c):
    runs, threads = 3, 2
    trace = os.path.join(c.tmp, "trace", "t.json")
    os.makedirs(os.path.dirname(trace), exist_ok=True)
    proc, _ = c.kiln_run("--profile", "--peak", "50", "--threads", str(threads), "--bench", str(runs),
                         "--trace", trace)
    left = sorted(os.listdir(os.path.dirname(trace)))
    if left != ["t.json"]:
        raise CaseFailure(f"files beside the trace: {left}")
    with open(trace) as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    for e in events:
        if e["ph"] == "X":
            for k in ("name", "cat", "ts", "dur", "pid", "tid"):
                if k not in e:
                    raise CaseFailure(f"event without '{k}': {e}")
            if e["dur"] < 0 or e["ts"] < 0:
                raise CaseFailure(f"negative time: {e}")
    run_ev = [e for e in events if e.get("cat") == "run"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    tasks = [e for e in events if e.get("cat") == "task"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    print(f"  {len(run_ev)} runs, {len(kernels)} kernel events, {len(tasks)} task events, threads {names}")
    if len(run_ev) != runs or len(kernels) != runs * len(c.steps):
        raise CaseFailure(f"{len(run_ev)} run and {len(kernels)} kernel events for {runs} runs of "
                          f"{len(c.steps)} steps")
    if sorted(names) != list(range(threads)):
        raise CaseFailure(f"thread names for tids {sorted(names)}")
    for r, rev in enumerate(run_ev):
        mine = [e for e in kernels if e["args"]["run"] == r]
        if [e["args"]["step"] for e in mine] != list(range(len(c.steps))):
            raise CaseFailure(f"run {r}: kernel events not one per step in plan order")
        for e in mine:
            if e["name"] != c.steps[e["args"]["step"]][0] or e["tid"] != 0:
                raise CaseFailure(f"run {r}: event {e} does not match its step")
            if e["ts"] < rev["ts"] - 0.002 or e["ts"] + e["dur"] > rev["ts"] + rev["dur"] + 0.002:
                raise CaseFailure(f"run {r}: kernel event {e} outside its run {rev}")
        ends = [e["ts"] + e["dur"] for e in mine]
        starts = [e["ts"] for e in mine]
        if any(s < prev - 0.002 for s, prev in zip(starts[1:], ends)):
            raise CaseFailure(f"run {r}: kernel events overlap")
    if not tasks or any(not 0 <= e["tid"] < threads for e in tasks):
        raise CaseFailure("no task events, or task events off the pool threads")
    rows, _ = parse_table(proc.stdout)
    checked = 0
    for row in rows:
        s = row["step"]
        idles = []
        for r in range(runs):
            wall = [e["dur"] for e in kernels if e["args"]["run"] == r and e["args"]["step"] == s][0]
            busy = [e["dur"] for e in tasks if e["args"]["run"] == r and e["args"]["step"] == s]
            if busy and wall > 0:
                idles.append(max(0.0, 1 - sum(busy) / (len(busy) * wall)))
        if not idles:
            if row["idle"] is not None:
                raise CaseFailure(f"step {s}: idle {row['idle']}% but no task events")
            continue
        want = 100 * sorted(idles)[len(idles) // 2]  # odd number of runs: the middle one
        if row["idle"] is None or abs(row["idle"] - want) > 0.2:
            raise CaseFailure(f"step {s}: idle {row['idle']}%, the trace says {want:.2f}%")
        checked += 1
    if not checked:
        raise CaseFailure("no step with task events to check idle against")
    print(f"  idle of {checked} steps matches the trace")


def case_no_inputs(c):
    proc, _ = c.kiln_run("--profile", "--bench", "2", "--threads", "1", inputs=False)
    rows, total = parse_table(proc.stdout)
    if len(rows) != len(c.steps) or total is None:
        raise CaseFailure(f"no full table without inputs:\n{proc.stdout}")
    if any(r["idle"] is not None for r in rows):
        raise CaseFailure(f"idle given on 1 thread (no pool):\n{proc.stdout}")
    m = re.search(r"peak: ([\d.]+) GFLOP/s fp32 on 1 threads \(measured", proc.stdout)
    if not m or float(m.group(1)) <= 0:
        raise CaseFailure(f"no measured peak line:\n{proc.stdout}")
    print(f"  measured peak {m.group(1)} GFLOP/s on 1 thread")


def case_bad_flags(c):
    missing = os.path.join(c.tmp, "no_such_dir", "t.json")
    cases = [
        (["--trace", "x.json"], 2, ["--trace", "--profile"], True),
        (["--peak", "10"], 2, ["--peak", "--profile"], True),
        (["--profile", "--peak", "abc"], 2, ["--peak", "abc"], True),
        (["--profile", "--peak", "0"], 2, ["--peak", "'0'"], True),
        (["--profile", "--peak", "-5"], 2, ["--peak"], True),
        (["--profile", "--bench", "2", "--trace", missing], 1, [missing], True),
        (["--profil"], 2, ["--profil"], True),
    ]
    for args, code, culprits, with_inputs in cases:
        proc, _ = c.kiln_run(*args, inputs=with_inputs, expect_ok=False)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        shown = " ".join(args)
        if proc.returncode != code:
            raise CaseFailure(f"{shown}: exit {proc.returncode}, expected {code}\n{proc.stderr}")
        if not lines or not lines[0].startswith("kiln: error:") or len(lines) > 2:
            raise CaseFailure(f"{shown}: expected one 'kiln: error:' line, got:\n{proc.stderr}")
        absent = [x for x in culprits if x not in proc.stderr]
        if absent:
            raise CaseFailure(f"{shown}: the diagnostic does not name {absent}: {lines[0]}")
        print(f"  {shown}: exit {code}: {lines[0]}")
    if os.path.exists(os.path.dirname(missing)) or os.path.exists("x.json"):
        raise CaseFailure("a failed --trace left a file behind")


CASES = {"table": case_table, "trace": case_trace, "no_inputs": case_no_inputs,
         "bad_flags": case_bad_flags}


def main(argv=None):
    ap = argparse.ArgumentParser(description="Check kiln run --profile.")
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
            ctx = Ctx(args.kiln, args.models, tmp)
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
    print(f"check_profile: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
