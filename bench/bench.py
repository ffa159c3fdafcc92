#!/usr/bin/env python3
"""bench.py — Kiln and ONNX Runtime side by side on the model set.

    python3 bench/bench.py [--models resnet18,resnet50,...] [--threads 1,2] [--repeats 50]
                           [--warmup 5] [--mode ctypes|cli] [--kiln PATH] [--json FILE]
                           [--kiln-peak PATH] [--tvm-trials N] [--tvm-work-dir DIR]

For every model: `kiln compile` it once (the compile time is reported), make one
random input at batch 1 (the same generator as the tests: tests/models/common.py),
then for every thread count time both engines on that input:
  * Kiln, --mode ctypes (default): the .so is loaded in this process through
    its `kiln_artifact_v1` descriptor (bench/kiln_artifact.py); set_threads(T),
    then each timed call is one `run` on prebound buffers, so the time
    excludes process start, file I/O and Python-side allocation.
    --mode cli: `kiln run --bench N --warmup W --threads T`, parsing its
    "latency: median X ms, p90 Y ms" line (the same loop, timed in C).
  * ONNX Runtime: CPUExecutionProvider, ORT_ENABLE_ALL, intra_op_num_threads=T,
    inter_op_num_threads=1, sequential execution; each timed call is one
    session.run on the same input.
Each engine runs `warmup` untimed calls, then `repeats` timed ones; with
--mode ctypes the timed calls of Kiln (default and tuned) and ORT alternate in
--rounds rounds, so that a slow phase of a shared machine falls on every engine;
each turn starts after a 0.2 s pause ($BENCH_SETTLE_S), without which the
previous engine's still-spinning pool threads inflated Kiln's p90 (bench/README.md)
(TVM and --mode cli run in their own processes, one after the other); the table
reports the median and p90 in milliseconds and kiln/ort (median over median;
below 1 means Kiln is faster). The max |kiln - ort| of the outputs is shown as
a sanity check. Kiln's GFLOP/s is the model's FLOPs (the sum of the kernels'
FLOPs in the artifact's descriptor, a multiply-add counted as 2) over its
median time, and "% peak" that rate over the fp32 FMA peak measured by
kiln-peak (bench/peak.c, built beside kiln) on the same thread count; the
peak figures are printed in their own table. Run on an otherwise idle machine.

Optional third peer, Apache TVM (--tvm-trials N; bench/tvm_peer.py, run as
subprocesses): the model is imported with TVM's Relax ONNX frontend, tuned with
MetaSchedule for N trials (cached under --tvm-work-dir, so a rerun does not
retune; 0 = untuned, not a fair peer) and built for the host CPU; each thread
count runs in a fresh process with TVM_NUM_THREADS=T on the same input, the same
warm-up and repeats. Adds tvm ms, kiln/tvm, tvm's max err against ORT, and TVM's
tuning and compile time. Skipped with a one-line notice when TVM is not importable.

--blas: for the synthetic matmulN models, also time oneMKL's cblas_sgemm on the
same n (bench/blas_peer.py, PyPI's `mkl`, in its own process after Kiln and ORT,
the same warm-up, repeats and rounds): not a compiler, the yardstick for the
"% of peak" target. Adds blas ms, its % of kiln-peak and kiln/blas.

Synthetic models, made by this script when the file is missing from
--models-dir: matmul1024 = one fp32 MatMul [1024, 1024] x [1024, 1024] with the
right operand a constant (a linear layer's weights), 2.15 GFLOP.
"""
import argparse
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

from common import make_inputs, model_inputs, ort_session  # noqa: E402
from kiln_artifact import Artifact  # noqa: E402

DEFAULT_MODELS = "resnet18,resnet50,mobilenet_v2,efficientnet_b0,bert,matmul1024"
LATENCY_RE = re.compile(r"latency: median ([\d.]+) ms, p90 ([\d.]+) ms")


def make_matmul(path, n=1024):
    """Y = MatMul(A, W): A an fp32 [n, n] input, W an fp32 [n, n] constant."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = (np.random.default_rng(0).standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["A", "W"], ["Y"], name="matmul")], f"matmul{n}",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, [n, n])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [n, n])],
        [numpy_helper.from_array(w, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="kiln-bench")
    model.ir_version = 8
    onnx.save(model, path)


SYNTHETIC = {"matmul1024": lambda path: make_matmul(path, 1024)}


def measure_peak(kiln_peak, threads):
    """{threads: (gflops, isa)} from kiln-peak --json, or {} when it is missing."""
    if not os.access(kiln_peak, os.X_OK):
        print(f"bench: {kiln_peak} missing: no peak figures (build the kiln-peak target)",
              file=sys.stderr)
        return {}
    peaks = {}
    for t in threads:
        proc = subprocess.run([kiln_peak, "--threads", str(t), "--seconds", "0.5", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            print(f"bench: kiln-peak failed: {proc.stderr.strip()}", file=sys.stderr)
            return {}
        r = json.loads(proc.stdout)
        peaks[t] = (r["gflops_n"], r["isa"])
        peaks.setdefault(1, (r["gflops_1"], r["isa"]))
    return peaks


def stats(times_s):
    ms = np.asarray(times_s) * 1e3
    return float(np.median(ms)), float(np.percentile(ms, 90))


def prepare_ort(model_path, feeds, threads):
    """(call, outputs of one run) of an ORT session on feeds."""
    sess = ort_session(model_path, threads=threads, optimize=True)
    names = [o.name for o in sess.get_outputs()]
    return (lambda: sess.run(names, feeds)), sess.run(names, feeds)


def bench_ort(model_path, feeds, threads, warmup, repeats):
    call, outs = prepare_ort(model_path, feeds, threads)
    med, p90 = time_interleaved({"ort": call}, warmup, repeats, 1)["ort"]
    return med, p90, outs


def prepare_kiln(artifact, feeds, threads):
    """(call, outputs of one run) of an artifact on prebound buffers."""
    call, outs = artifact.prepare(*[feeds[t.name] for t in artifact.inputs], threads=threads)
    call()
    return call, [o.copy() for o in outs]


SETTLE_S = float(os.environ.get("BENCH_SETTLE_S", "0.2"))


def time_interleaved(calls, warmup, repeats, rounds):
    """{name: (median ms, p90 ms)} of each call in `calls` ({name: fn}): after
    `warmup` untimed calls each, `rounds` rounds in which every engine makes
    its share of the `repeats` timed calls in turn, so that a slow phase of a
    shared machine falls on all of them rather than on whichever ran then.
    Each turn starts after a pause, in which the previous engine's pool
    threads stop spinning, and with one untimed call."""
    for fn in calls.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in calls}
    for r in range(rounds):
        n = repeats // rounds + (1 if r < repeats % rounds else 0)
        for name, fn in calls.items():
            time.sleep(SETTLE_S)
            fn()
            for _ in range(n):
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    return {name: stats(t) for name, t in times.items()}


def bench_kiln_cli(kiln, so_path, feeds, out_names, threads, warmup, repeats, tmp):
    args = []
    for i, (name, arr) in enumerate(feeds.items()):
        p = os.path.join(tmp, f"bench_in{i}.npy")
        np.save(p, arr)
        args += ["--input", f"{name}={p}"]
    outdir = os.path.join(tmp, f"bench_out_t{threads}")
    os.makedirs(outdir, exist_ok=True)
    proc = subprocess.run([kiln, "run", so_path, *args, "--output-dir", outdir,
                           "--threads", str(threads), "--bench", str(repeats),
                           "--warmup", str(warmup)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"kiln run failed: {proc.stderr.strip()[-2000:]}")
    m = LATENCY_RE.search(proc.stdout + proc.stderr)
    if not m:
        raise RuntimeError(f"no 'latency:' line in kiln run's output:\n{proc.stdout[-2000:]}")
    # kiln run names files after outputs, [^A-Za-z0-9._-] -> '_'
    outs = [np.load(os.path.join(outdir, re.sub(r"[^A-Za-z0-9._-]", "_", n) + ".npy"))
            for n in out_names]
    return float(m.group(1)), float(m.group(2)), outs


def tvm_check(python):
    """TVM's version string, or None (with a one-line notice) when it cannot be imported."""
    proc = subprocess.run([python, os.path.join(HERE, "tvm_peer.py"), "check"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        print(f"bench: TVM is not importable by {python}: skipping the TVM column ({last})",
              file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])["tvm_version"]


def tvm_peer_call(python, argv, log, env=None):
    """Runs bench/tvm_peer.py; returns its JSON summary. TVM's and MetaSchedule's output
    (the tuning progress tables) is appended to `log` as it comes: `tail -f` it."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as r:
        result = r.name
    try:
        with open(log, "a") as f:
            f.write(f"\n$ tvm_peer.py {' '.join(argv)}\n")
            f.flush()
            proc = subprocess.run([python, os.path.join(HERE, "tvm_peer.py"), "--result", result,
                                   *argv], stdout=f, stderr=subprocess.STDOUT, env=env)
        with open(result) as f:
            text = f.read()
        if proc.returncode != 0 or not text:
            raise RuntimeError(f"tvm_peer.py {argv[0]} exited {proc.returncode}; see {log}")
        return json.loads(text)
    finally:
        os.unlink(result)


def bench_tvm(python, lib, feeds, threads, warmup, repeats, rounds, tmp, log):
    """Times TVM's library in a fresh process with TVM_NUM_THREADS=threads, in
    `rounds` turns after a SETTLE_S pause each, as time_interleaved times the others."""
    inputs = os.path.join(tmp, "tvm_in.npz")
    np.savez(inputs, *feeds.values())  # graph-input order, as TVM's main takes them
    outputs = os.path.join(tmp, f"tvm_out_t{threads}.npz")
    env = dict(os.environ, TVM_NUM_THREADS=str(threads))
    r = tvm_peer_call(python, ["run", lib, "--inputs", inputs, "--threads", str(threads),
                               "--warmup", str(warmup), "--repeats", str(repeats),
                               "--rounds", str(rounds), "--settle", str(SETTLE_S),
                               "--outputs", outputs], log, env)
    with np.load(outputs) as z:
        outs = [z[k] for k in z.files]
    return r["median_ms"], r["p90_ms"], r["repeats"], outs


def bench_blas(n, threads, args, tmp, peak):
    """oneMKL's sgemm at n, timed by bench/blas_peer.py in its own process;
    {} with a one-line notice when it cannot run (mkl not installed)."""
    out = os.path.join(tmp, "blas.json")
    proc = subprocess.run([sys.executable, os.path.join(HERE, "blas_peer.py"), "--n", str(n),
                           "--threads", str(threads), "--warmup", str(args.warmup),
                           "--repeats", str(args.repeats), "--rounds", str(args.rounds), "--json", out],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        print(f"bench: --blas skipped: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}",
              file=sys.stderr)
        return {}
    with open(out) as f:
        r = json.load(f)
    return {"blas_ms": r["median_ms"], "blas_p90_ms": r["p90_ms"], "blas_library": r["library"],
            "blas_peak_frac": r["gflops"] / peak if peak else None}


def max_err(kiln_outs, ort_outs):
    errs = [float(np.max(np.abs(k.astype(np.float64) - o.astype(np.float64))))
            for k, o in zip(kiln_outs, ort_outs) if k.shape == o.shape]
    return max(errs) if len(errs) == len(ort_outs) else float("nan")


def main(argv=None):
    ap = argparse.ArgumentParser(description="Benchmark Kiln against ONNX Runtime.")
    ap.add_argument("--models", default=DEFAULT_MODELS, help=f"comma list (default {DEFAULT_MODELS})")
    ap.add_argument("--threads", default="1,2", help="comma list of thread counts (default 1,2)")
    ap.add_argument("--repeats", type=int, default=50, help="timed runs per engine (default 50)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed runs first (default 5)")
    ap.add_argument("--rounds", type=int, default=5,
                    help="--mode ctypes: the timed runs of Kiln (default and tuned) and ORT alternate "
                         "in this many rounds (default 5)")
    ap.add_argument("--mode", choices=["ctypes", "cli"], default="ctypes")
    ap.add_argument("--kiln", default=os.environ.get("KILN") or os.path.join(REPO, "build", "kiln"))
    ap.add_argument("--models-dir", default=os.path.join(REPO, "models"))
    ap.add_argument("--compile-flags", default="", help="extra kiln compile flags, e.g. \"--target ...\"")
    ap.add_argument("--tuning-dir", default=None,
                    help="also compile each model with --tuning-log DIR/MODEL.jsonl (when present) and "
                         "time that artifact in the same run: columns tuned ms, tuned/ort")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    ap.add_argument("--kiln-peak", default=None,
                    help="the peak benchmark (default: kiln-peak beside --kiln)")
    ap.add_argument("--tvm-trials", type=int, default=None,
                    help="add Apache TVM as a peer, tuned with MetaSchedule for N trials "
                         "(0 = untuned: not a fair peer); needs `pip install apache-tvm`")
    ap.add_argument("--tvm-trials-per-task", type=int, default=64,
                    help="MetaSchedule's per-task cap (default 64)")
    ap.add_argument("--tvm-work-dir", default=os.path.join(REPO, "build", "tvm-work"),
                    help="TVM's tuning database and built libraries, reused by later runs "
                         "(default build/tvm-work)")
    ap.add_argument("--tvm-timeout", type=float, default=120.0,
                    help="seconds MetaSchedule allows one candidate's build or run (default 120)")
    ap.add_argument("--tvm-python", default=sys.executable,
                    help="the interpreter that has TVM (default: this one)")
    ap.add_argument("--blas", action="store_true",
                    help="matmulN models: also time oneMKL's sgemm (bench/blas_peer.py; pip install mkl)")
    args = ap.parse_args(argv)
    if args.tvm_trials is not None and args.tvm_trials < 0:
        ap.error("--tvm-trials must be >= 0")

    if args.rounds < 1 or args.rounds > args.repeats:
        ap.error("--rounds must be in [1, --repeats]")
    threads = [int(t) for t in args.threads.split(",") if t]
    kiln_peak = args.kiln_peak or os.path.join(os.path.dirname(os.path.abspath(args.kiln)), "kiln-peak")
    peaks = measure_peak(kiln_peak, threads)
    tvm_version = tvm_check(args.tvm_python) if args.tvm_trials is not None else None
    if tvm_version:
        os.makedirs(args.tvm_work_dir, exist_ok=True)
        tvm_log = os.path.join(args.tvm_work_dir, "tvm.log")
        if args.tvm_trials == 0:
            print("bench: --tvm-trials 0: TVM runs untuned (unscheduled TIR), NOT a fair peer",
                  file=sys.stderr)
    rows, compiles, failures = [], [], []
    with tempfile.TemporaryDirectory(prefix="kiln-bench-") as tmp:
        for name in [m for m in args.models.split(",") if m]:
            path = os.path.join(args.models_dir, name + ".onnx")
            if not os.path.isfile(path) and name in SYNTHETIC:
                path = os.path.join(tmp, name + ".onnx")
                SYNTHETIC[name](path)
            if not os.path.isfile(path):
                print(f"bench: {path} missing (run /usr/bin/python3 models/export.py)", file=sys.stderr)
                return 1
            so = os.path.join(tmp, name + ".so")
            t0 = time.perf_counter()
            proc = subprocess.run([args.kiln, "compile", path, "-o", so, *args.compile_flags.split()],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            compile_s = time.perf_counter() - t0
            if proc.returncode != 0:
                print(f"bench: kiln compile {name} failed:\n{proc.stderr.strip()[-2000:]}", file=sys.stderr)
                compiles.append({"model": name, "compile_s": None, "size_mb": None})
                continue
            compiles.append({"model": name, "compile_s": compile_s,
                             "size_mb": os.path.getsize(so) / 1e6})
            print(f"{name}: compiled in {compile_s:.2f} s", file=sys.stderr)
            tuned_so = None
            log = os.path.join(args.tuning_dir, name + ".jsonl") if args.tuning_dir else None
            if log and os.path.isfile(log):
                tuned_so = os.path.join(tmp, name + ".tuned.so")
                proc = subprocess.run([args.kiln, "compile", path, "-o", tuned_so, "--tuning-log", log, "-v",
                                       *args.compile_flags.split()],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                if proc.returncode != 0:
                    print(f"bench: kiln compile {name} --tuning-log {log} failed:\n{proc.stderr.strip()[-2000:]}",
                          file=sys.stderr)
                    failures.append(name)
                    tuned_so = None
                else:
                    used = [l for l in proc.stderr.splitlines() if "tuned schedules" in l]
                    compiles[-1]["tuned"] = used[-1].split(": ")[-1].replace(" use tuned schedules", "") if used else "?"
            elif log:
                print(f"bench: {name}: no {log}, no tuned column", file=sys.stderr)
            feeds = make_inputs(model_inputs(path), batch=1, seed=0)
            flops = Artifact(so).flops  # per batch unit; batch 1 here
            tvm_lib = None
            if tvm_version:
                print(f"{name}: TVM build, {args.tvm_trials} trials (log: {tvm_log}) ...",
                      file=sys.stderr)
                try:
                    tb = tvm_peer_call(args.tvm_python, [
                        "build", path, "--work-dir", args.tvm_work_dir,
                        "--trials", str(args.tvm_trials),
                        "--trials-per-task", str(args.tvm_trials_per_task),
                        "--num-cores", str(max(threads)), "--timeout", str(args.tvm_timeout)],
                        tvm_log)
                    tvm_lib = tb["lib"]
                    compiles[-1].update(tvm_tune_s=tb["tune_s"], tvm_compile_s=tb["compile_s"],
                                        tvm_cached=tb["cached"], tvm_tasks=tb["tasks"],
                                        tvm_tasks_tuned=tb.get("tasks_tuned"),
                                        tvm_trials=tb["trials"], tvm_target=tb["target"])
                    print(f"{name}: TVM tuned in {tb['tune_s']:.1f} s, compiled in "
                          f"{tb['compile_s']:.1f} s{' (cached)' if tb['cached'] else ''}",
                          file=sys.stderr)
                except RuntimeError as e:
                    print(f"bench: {name}: TVM build failed: {e}", file=sys.stderr)
            def time_kiln_cli(artifact, t):
                out_names = [o.name for o in ort_session(path).get_outputs()]
                return bench_kiln_cli(args.kiln, artifact, feeds, out_names, t, args.warmup, args.repeats, tmp)

            for t in threads:
                try:
                    if args.mode == "ctypes":
                        # one interleaved timing of default, tuned and ORT
                        calls, outs = {}, {}
                        calls["kiln"], outs["kiln"] = prepare_kiln(Artifact(so), feeds, t)
                        if tuned_so:
                            calls["tuned"], outs["tuned"] = prepare_kiln(Artifact(tuned_so), feeds, t)
                        calls["ort"], outs["ort"] = prepare_ort(path, feeds, t)
                        timed = time_interleaved(calls, args.warmup, args.repeats, args.rounds)
                        (k_med, k_p90), k_outs = timed["kiln"], outs["kiln"]
                        tuned = (*timed["tuned"], outs["tuned"]) if tuned_so else None
                        (o_med, o_p90), o_outs = timed["ort"], outs["ort"]
                    else:
                        k_med, k_p90, k_outs = time_kiln_cli(so, t)
                        tuned = time_kiln_cli(tuned_so, t) if tuned_so else None
                        o_med, o_p90, o_outs = bench_ort(path, feeds, t, args.warmup, args.repeats)
                except (OSError, ValueError, RuntimeError) as e:
                    print(f"bench: {name}: running the artifact failed: {e}", file=sys.stderr)
                    failures.append(name)
                    break
                gflops = flops / (k_med * 1e6) if k_med > 0 else float("nan")
                peak = peaks.get(t, (None, None))[0]
                row = {"model": name, "threads": t, "kiln_ms": k_med, "kiln_p90_ms": k_p90,
                       "ort_ms": o_med, "ort_p90_ms": o_p90, "ratio": k_med / o_med,
                       "max_err": max_err(k_outs, o_outs), "gflop": flops * 1e-9,
                       "kiln_gflops": gflops, "ort_gflops": flops / (o_med * 1e6),
                       "peak_frac": gflops / peak if peak else None}
                if tuned:
                    row.update(tuned_ms=tuned[0], tuned_p90_ms=tuned[1], tuned_ratio=tuned[0] / o_med,
                               tuned_err=max_err(tuned[2], o_outs),
                               tuned_peak_frac=flops / (tuned[0] * 1e6) / peak if peak else None)
                if tvm_lib:
                    try:
                        # the turns of time_interleaved (ctypes), back to back as the CLI's --bench
                        t_rounds = args.rounds if args.mode == "ctypes" else 1
                        t_med, t_p90, t_n, t_outs = bench_tvm(args.tvm_python, tvm_lib, feeds, t,
                                                              args.warmup, args.repeats, t_rounds,
                                                              tmp, tvm_log)
                        row.update(tvm_ms=t_med, tvm_p90_ms=t_p90, tvm_repeats=t_n,
                                   kiln_tvm=k_med / t_med, tvm_err=max_err(t_outs, o_outs))
                    except RuntimeError as e:
                        print(f"bench: {name}: running TVM failed: {e}", file=sys.stderr)
                if args.blas and re.fullmatch(r"matmul\d+", name):
                    row.update(bench_blas(int(name[6:]), t, args, tmp, peak))
                rows.append(row)
                print(f"{name} threads {t}: kiln {k_med:.3f} ms, ort {o_med:.3f} ms, "
                      f"ratio {row['ratio']:.2f}"
                      + (f", tuned {row['tuned_ms']:.3f} ms ({row['tuned_ratio']:.2f})" if tuned else "")
                      + (f", tvm {row['tvm_ms']:.3f} ms" if "tvm_ms" in row else ""),
                      file=sys.stderr)

    interleave = f" in {args.rounds} interleaved rounds" if args.mode == "ctypes" else ""
    print(f"\nbatch 1, {args.repeats} timed runs{interleave} after {args.warmup} warm-up, kiln via {args.mode}, "
          "ORT with ORT_ENABLE_ALL\n")
    print("| model | threads | kiln ms | ort ms | kiln/ort | kiln p90 | ort p90 | max err "
          "| GFLOP | kiln GFLOP/s | % peak | ort GFLOP/s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        frac = f"{100 * r['peak_frac']:.1f}%" if r["peak_frac"] is not None else "-"
        print(f"| {r['model']} | {r['threads']} | {r['kiln_ms']:.3f} | {r['ort_ms']:.3f} | "
              f"{r['ratio']:.2f} | {r['kiln_p90_ms']:.3f} | {r['ort_p90_ms']:.3f} | {r['max_err']:.2g} "
              f"| {r['gflop']:.3g} | {r['kiln_gflops']:.1f} | {frac} | {r['ort_gflops']:.1f} |")
    if any("tuned_ms" in r for r in rows):
        print(f"\nKiln compiled with the tuning logs in {args.tuning_dir} (kernels using a tuned schedule per "
              "model in the last table), timed in the same run\n")
        print("| model | threads | default ms | tuned ms | ort ms | default/ort | tuned/ort | tuned/default "
              "| tuned % peak | tuned err |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            if "tuned_ms" in r:
                frac = f"{100 * r['tuned_peak_frac']:.1f}%" if r["tuned_peak_frac"] is not None else "-"
                print(f"| {r['model']} | {r['threads']} | {r['kiln_ms']:.3f} | {r['tuned_ms']:.3f} | "
                      f"{r['ort_ms']:.3f} | {r['ratio']:.2f} | {r['tuned_ratio']:.2f} | "
                      f"{r['tuned_ms'] / r['kiln_ms']:.2f} | {frac} | {r['tuned_err']:.2g} |")
    if tvm_version:
        untuned = " (UNTUNED: not a fair peer)" if args.tvm_trials == 0 else ""
        budget = (f"MetaSchedule {args.tvm_trials} trials (at most {args.tvm_trials_per_task} per "
                  "task)" if args.tvm_trials else "no tuning")
        print(f"\nApache TVM {tvm_version}, {budget}{untuned}, TVM_NUM_THREADS = threads; "
              "tvm err = max |tvm - ort|; tvm n = timed runs (fewer when a call is slow)\n")
        print("| model | threads | kiln ms | tvm ms | kiln/tvm | tvm p90 | tvm err | tvm n |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            if "tvm_ms" in r:
                print(f"| {r['model']} | {r['threads']} | {r['kiln_ms']:.3f} | {r['tvm_ms']:.3f} | "
                      f"{r['kiln_tvm']:.2f} | {r['tvm_p90_ms']:.3f} | {r['tvm_err']:.2g} | "
                      f"{r['tvm_repeats']} |")
            else:
                print(f"| {r['model']} | {r['threads']} | {r['kiln_ms']:.3f} | failed | - | - | - | - |")
    blas_rows = [r for r in rows if "blas_ms" in r]
    if blas_rows:
        print(f"\n{blas_rows[0]['blas_library']} cblas_sgemm on the same n x n x n (bench/blas_peer.py), "
              "timed after Kiln and ORT; kiln = the tuned artifact where there is one\n")
        print("| model | threads | kiln ms | blas ms | kiln/blas | kiln % peak | blas % peak |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for r in blas_rows:
            k_ms, k_frac = (r["tuned_ms"], r["tuned_peak_frac"]) if "tuned_ms" in r else (r["kiln_ms"], r["peak_frac"])
            pct = lambda f: f"{100 * f:.1f}%" if f is not None else "-"
            print(f"| {r['model']} | {r['threads']} | {k_ms:.3f} | {r['blas_ms']:.3f} | {k_ms / r['blas_ms']:.2f} | "
                  f"{pct(k_frac)} | {pct(r['blas_peak_frac'])} |")
    if peaks:
        print("\n| threads | fp32 FMA peak GFLOP/s (kiln-peak) |")
        print("|---:|---:|")
        for t in sorted(peaks):
            print(f"| {t} | {peaks[t][0]:.1f} ({peaks[t][1]}) |")
    any_tuned = any("tuned" in c for c in compiles)
    print("\n| model | kiln compile s | artifact MB |" + (" tuned kernels |" if any_tuned else "") + (
        " tvm tasks (tuned) | tvm tune s | tvm compile s |" if tvm_version else ""))
    print("|---|---:|---:|" + ("---|" if any_tuned else "") + ("---:|---:|---:|" if tvm_version else ""))
    for c in compiles:
        if c["compile_s"] is None:
            line = f"| {c['model']} | failed | - |"
        else:
            line = f"| {c['model']} | {c['compile_s']:.2f} | {c['size_mb']:.1f} |"
        if any_tuned:
            line += f" {c.get('tuned', '-')} |"
        if tvm_version and "tvm_tune_s" in c:
            cached = " (cached)" if c["tvm_cached"] else ""
            tuned = c.get("tvm_tasks_tuned")
            line += (f" {c['tvm_tasks']} ({tuned if tuned is not None else '?'}) | "
                     f"{c['tvm_tune_s']:.1f}{cached} | {c['tvm_compile_s']:.1f}{cached} |")
        elif tvm_version:
            line += " - | failed | - |"
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "compiles": compiles, "mode": args.mode,
                       "repeats": args.repeats, "warmup": args.warmup, "rounds": args.rounds,
                       "peak_gflops": {str(t): p[0] for t, p in peaks.items()},
                       "tvm": {"version": tvm_version, "trials": args.tvm_trials,
                               "trials_per_task": args.tvm_trials_per_task}
                       if tvm_version else None}, f, indent=1)
    return 0 if all(c["compile_s"] is not None for c in compiles) and not failures else 1


if __name__ == "__main__":
    sys.exit(main())
