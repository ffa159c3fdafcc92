#!/usr/bin/env python3
"""zoo.py — the torchvision classification zoo through Kiln, against ONNX Runtime.

    python3 bench/zoo.py [--only resnet18,vit] [--repeats 20] [--threads 2] [--set full|small]
                         [--zoo-dir build/zoo] [--out FILE.md] [--json FILE] [--no-time]

One command for issue 46's zoo table. For every model of the set (bench/zoo_export.py:
the smallest torchvision 0.14 model of each classification family, random weights):
  1. export it with the torch interpreter (--torch-python, default /usr/bin/python3)
     into --zoo-dir, unless it is there already (a cache; --force-export redoes it);
  2. `kiln compile` it (the wall time of that call is "compile s");
  3. run the artifact on one random input at batch 1 (tests/models/common.py's
     generator, seed 0) and compare with ONNX Runtime with its optimizations off,
     the tests' reference: max|kiln - ort| <= 1e-4 * max(1, max|ort|);
  4. time Kiln (the .so through its descriptor, bench.py's prepare_kiln) and ORT
     (ORT_ENABLE_ALL, bench.py's prepare_ort) on that input at --threads, in
     interleaved rounds (bench.py's time_interleaved), and report the medians,
     kiln/ort, and Kiln's GFLOP/s over kiln-peak's fp32 peak at that thread
     count (bench.py's measure_peak): bench.py's "% peak".
A model that fails a step keeps its row, with the step and the message.
Writes the markdown table to --out (default bench/results/zoo-TARGET.md, TARGET
the host as Kiln names it, e.g. x86_64-pc-linux-gnu-znver3) and prints it.
Exit status 0 only when every model compiled and matched.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
sys.path.insert(0, HERE)

from bench import measure_peak, prepare_kiln, prepare_ort, time_interleaved  # noqa: E402
from common import RTOL, compare, make_inputs, model_inputs, ort_reference  # noqa: E402
from kiln_artifact import Artifact  # noqa: E402


def export(args, only):
    """{name: export record} from bench/zoo_export.py (JSON lines), plus its stderr."""
    cmd = [args.torch_python, "-W", "ignore", os.path.join(HERE, "zoo_export.py"),
           "--set", args.set, "--out", args.zoo_dir]
    if only:
        cmd += ["--only", ",".join(only)]
    if args.force_export:
        cmd.append("--force")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    recs = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            recs[r["name"]] = r
    if proc.returncode == 2:  # a usage error: unknown names
        raise SystemExit(proc.stderr.strip())
    return recs, proc.stderr


def listing(args):
    proc = subprocess.run([sys.executable, os.path.join(HERE, "zoo_export.py"),  # --list needs no torch
                           "--set", args.set, "--out", args.zoo_dir, "--list"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True)
    return [(l.split()[0], l.split()[1]) for l in proc.stdout.splitlines() if l.strip()]


def last_lines(text, n=3):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return " / ".join(lines[-n:])[-400:]


def host_target(kiln, so):
    """The artifact's target as a file-name part: 'x86_64-pc-linux-gnu-znver3'."""
    proc = subprocess.run([kiln, "inspect", so, "--json"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    try:
        target = json.loads(proc.stdout)["target"]
    except (ValueError, KeyError):
        return "host"
    words = target.split()
    cpu = [w[len("-mcpu="):] for w in words if w.startswith("-mcpu=")]
    return re.sub(r"[^A-Za-z0-9._-]+", "-", "-".join(words[:1] + cpu))


def cpu_name():
    fields = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            fields.setdefault(k.strip(), v.strip())
    return (f"{fields.get('model name', '?')} (family {fields.get('cpu family', '?')}, "
            f"model {fields.get('model', '?')}), {os.cpu_count()} logical CPUs")


def check_and_time(args, path, so, threads, peak):
    """The row's numbers for one compiled model; raises RuntimeError(step: why)."""
    feeds = make_inputs(model_inputs(path), batch=1, seed=0)
    art = Artifact(so)
    call, outs = prepare_kiln(art, feeds, threads)
    want = ort_reference(path, feeds)
    row = {"max_err": 0.0, "tol": 0.0, "ref_max": 0.0, "ok": True}
    for o, got in zip(art.outputs, outs):
        ok, err, tol, why = compare(got, want[o.name])
        row["ref_max"] = max(row["ref_max"], float(np.max(np.abs(want[o.name]))))
        row["max_err"], row["tol"] = max(row["max_err"], err), max(row["tol"], tol)
        if not ok:
            row["ok"] = False
            row["why"] = f"output {o.name}: {why}"
    row["gflop"] = art.flops * 1e-9
    if args.no_time:
        return row
    ort_call, _ = prepare_ort(path, feeds, threads)
    timed = time_interleaved({"kiln": call, "ort": ort_call}, args.warmup, args.repeats,
                             min(args.rounds, args.repeats))
    row["kiln_ms"], row["kiln_p90_ms"] = timed["kiln"]
    row["ort_ms"], row["ort_p90_ms"] = timed["ort"]
    row["ratio"] = row["kiln_ms"] / row["ort_ms"]
    gflops = art.flops / (row["kiln_ms"] * 1e6)
    row["peak_frac"] = gflops / peak if peak else None
    return row


def fmt_row(r):
    def num(key, f):
        return f.format(r[key]) if r.get(key) is not None else "-"
    pct = f"{100 * r['peak_frac']:.1f}%" if r.get("peak_frac") is not None else "-"
    params = f"{r['params'] / 1e6:.2f}" if r.get("params") else "-"
    err = (f"{r['max_err']:.1e} / {r['tol']:.1e}" if r.get("tol") else "-")
    ref = f"{r['ref_max']:.3g}" if r.get("ref_max") is not None else "-"
    status = r["status"] if r["status"] == "ok" else f"**{r['status']}**"
    return (f"| {r['model']} | {r['family']} | {params} | {num('gflop', '{:.2f}')} | "
            f"{num('compile_s', '{:.1f}')} | {num('kiln_ms', '{:.2f}')} | {num('ort_ms', '{:.2f}')} | "
            f"{num('ratio', '{:.2f}')} | {pct} | {ref} | {err} | {status} |")


def render(rows, args, threads, peaks, target, started):
    lines = [f"# Kiln model zoo: torchvision {args.set} set on {target}", "",
             f"- CPU: {cpu_name()}; load average at the end of the run "
             f"{os.getloadavg()[0]:.1f} (other work on the machine slows both engines and "
             "lowers kiln-peak's figure)",
             f"- run: {started:%Y-%m-%d %H:%M} UTC, `python3 bench/zoo.py"
             + (f" --set {args.set}" if args.set != "full" else "")
             + (f" --only {args.only}" if args.only else "")
             + f" --threads {threads} --repeats {args.repeats}`, kiln commit {git_head()}",
             f"- batch 1, {threads} threads; ms = median of {args.repeats} timed calls per engine "
             f"after {args.warmup} warm-up, Kiln and ORT interleaved in {args.rounds} rounds "
             "(bench/README.md, Method); ORT with ORT_ENABLE_ALL",
             f"- kiln/ort: below 1 Kiln is faster; % peak: Kiln's GFLOP/s (the artifact's FLOPs, "
             f"a multiply-add = 2) over kiln-peak's fp32 FMA peak on {threads} threads, measured just "
             "before each model's timing"
             + (f" ({min(peaks):.1f} to {max(peaks):.1f} GFLOP/s)" if peaks else " (not measured)"),
             f"- max|ort|: the largest output magnitude (not ~0: the check means something); "
             f"err / tol: max|kiln - ort| (ORT unoptimized, the tests' reference) over the "
             f"pass bound {RTOL:g} x max(1, max|ort|); compile s: wall time of `kiln compile`",
             "", "| model | family | params M | GFLOP | compile s | kiln ms | ort ms | kiln/ort "
             "| % peak | max\\|ort\\| | err / tol | status |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    lines += [fmt_row(r) for r in rows]
    fails = [r for r in rows if r["status"] != "ok"]
    if fails:
        lines += ["", "Failures:", ""]
        lines += [f"- {r['model']}: {r['status']}: {r.get('why', '')}" for r in fails]
    return "\n".join(lines) + "\n"


def git_head():
    proc = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return proc.stdout.strip() or "?"


def main(argv=None):
    ap = argparse.ArgumentParser(description="The torchvision zoo through Kiln and ONNX Runtime.")
    ap.add_argument("--set", choices=["full", "small"], default="full",
                    help="full: the smallest real model per family (default); small: CI's variants")
    ap.add_argument("--only", default="", help="comma list of model or family names")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=20, help="timed calls per engine (default 20)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--no-time", action="store_true", help="compile and check only")
    ap.add_argument("--kiln", default=os.environ.get("KILN") or os.path.join(REPO, "build", "kiln"))
    ap.add_argument("--kiln-peak", default=None, help="default: kiln-peak beside --kiln")
    ap.add_argument("--torch-python", default=os.environ.get("KILN_TORCH_PYTHON", "/usr/bin/python3"))
    ap.add_argument("--zoo-dir", default=None,
                    help="the exported models, a cache (default build/zoo, build/zoo-small)")
    ap.add_argument("--force-export", action="store_true")
    ap.add_argument("--compile-flags", default="", help="extra kiln compile flags")
    ap.add_argument("--out", default=None, help="the markdown table (default bench/results/"
                    "zoo-TARGET.md for the full set; not written for --only or --set small)")
    ap.add_argument("--json", default=None, help="also write the rows to this file")
    args = ap.parse_args(argv)
    args.zoo_dir = args.zoo_dir or os.path.join(REPO, "build", "zoo" if args.set == "full" else "zoo-small")
    if not os.access(args.kiln, os.X_OK):
        print(f"zoo: {args.kiln}: no kiln binary (build first)", file=sys.stderr)
        return 1
    started = datetime.datetime.utcnow()
    only = [n for n in args.only.split(",") if n]
    models = [(n, f) for n, f in listing(args) if not only or n in only or f in only]
    if not models:
        print(f"zoo: --only {args.only}: no such model or family", file=sys.stderr)
        return 2
    print(f"zoo: exporting {len(models)} models into {args.zoo_dir} (kept when there) ...",
          file=sys.stderr)
    recs, export_log = export(args, only)
    kiln_peak = args.kiln_peak or os.path.join(os.path.dirname(os.path.abspath(args.kiln)), "kiln-peak")
    rows, target = [], None
    with tempfile.TemporaryDirectory(prefix="kiln-zoo-") as tmp:
        for name, family in models:
            row = {"model": name, "family": family, "status": "ok"}
            rows.append(row)
            rec = recs.get(name)
            if rec is None:
                row["status"] = "export failed"
                row["why"] = last_lines("\n".join(l for l in export_log.splitlines() if name in l))
                print(f"zoo: {name}: {row['why']}", file=sys.stderr)
                continue
            path = rec["path"]
            row["params"] = onnx_params(path)
            so = os.path.join(tmp, name + ".so")
            t0 = time.perf_counter()
            proc = subprocess.run([args.kiln, "compile", path, "-o", so, *args.compile_flags.split()],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            row["compile_s"] = time.perf_counter() - t0
            if proc.returncode != 0:
                row["status"] = "compile failed"
                row["why"] = last_lines(proc.stderr)
                print(f"zoo: {name}: kiln compile failed ({row['compile_s']:.1f} s): {row['why']}",
                      file=sys.stderr)
                continue
            target = target or host_target(args.kiln, so)
            # the peak just before each model's timing: on a shared machine it moves
            peak = None if args.no_time else \
                measure_peak(kiln_peak, [args.threads]).get(args.threads, (None, None))[0]
            row["peak_gflops"] = peak
            try:
                row.update(check_and_time(args, path, so, args.threads, peak))
            except (OSError, ValueError, RuntimeError) as e:
                row["status"], row["why"] = "run failed", str(e)[-400:]
            if not row.get("ok", True):
                row["status"] = "mismatch"
            os.unlink(so)
            print(f"zoo: {name}: {row['status']}, compile {row['compile_s']:.1f} s"
                  + (f", kiln {row['kiln_ms']:.2f} ms, ort {row['ort_ms']:.2f} ms, "
                     f"ratio {row['ratio']:.2f}" if "kiln_ms" in row else "")
                  + (f", err {row['max_err']:.1e} (tol {row['tol']:.1e})" if "tol" in row else ""),
                  file=sys.stderr)
    peaks = [r["peak_gflops"] for r in rows if r.get("peak_gflops")]
    table = render(rows, args, args.threads, peaks, target or "host", started)
    print(table)
    out = args.out
    if out is None and args.set == "full" and not only and not args.no_time:
        out = os.path.join(HERE, "results", f"zoo-{target or 'host'}.md")
    if out:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out + ".tmp", "w") as f:
            f.write(table)
        os.replace(out + ".tmp", out)
        print(f"zoo: wrote {out}", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "threads": args.threads,
                       "target": target, "repeats": args.repeats}, f, indent=1)
    return 0 if all(r["status"] == "ok" for r in rows) else 1


def onnx_params(path):
    """The number of float32 weights in an ONNX file's initializers (after the
    exporter's folding: BatchNorm is in the convolutions)."""
    import onnx
    m = onnx.load(path)
    return sum(int(np.prod(t.dims)) for t in m.graph.initializer if t.data_type == 1)


if __name__ == "__main__":
    sys.exit(main())
