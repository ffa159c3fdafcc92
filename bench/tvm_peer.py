#!/usr/bin/env python3
"""tvm_peer.py — Apache TVM (Relax + MetaSchedule) as a benchmark peer for bench.py.

    python3 bench/tvm_peer.py check
    python3 bench/tvm_peer.py build MODEL.onnx --work-dir DIR --trials N [--trials-per-task M]
                                    [--num-cores C] [--mcpu CPU]
    python3 bench/tvm_peer.py run LIB.so --inputs IN.npz --threads T [--warmup W] [--repeats R]
                                  [--outputs OUT.npz]

Every subcommand prints one JSON object on its last stdout line (and writes it to
--result FILE, given before the subcommand); bench.py runs them
as subprocesses (the same interpreter unless --tvm-python says otherwise), which keeps
TVM's import, its LLVM and its thread pool out of the Kiln and ORT measurements, and
lets each thread count start a fresh TVM runtime with TVM_NUM_THREADS=T (TVM's pool
reads it once, at its first parallel launch).

build: the ONNX model is imported with tvm.relax.frontend.onnx.from_onnx (weights
bound as constants, input shapes from the model at batch 1), then
  * trials > 0: tuned with MetaSchedule (tune_relax: xgb cost model, evolutionary
    search, gradient task scheduler, local builder/runner) for a global budget of
    N measured candidates, at most M per task, on the tasks of the legalized and
    fused module, and compiled with compile_relax from the tuning database. compile_relax
    gets the *unfused* module: it legalizes and fuses again itself, and fusing an
    already fused module fuses further, so its functions no longer match the database
    keys and every kernel ran unscheduled (a bert library far slower than MetaSchedule's
    own estimate; bench/README.md). Kernels whose task got no trials keep TVM's unscheduled (serial,
    unvectorized) TIR, so a budget below ~tasks x 64 under-tunes the model; the summary
    counts the tasks that have a record (tasks_tuned);
  * trials = 0: compiled with the default Relax pipeline and no schedules at all:
    "untuned", not a fair peer, and reported as such.
The target is llvm with mcpu = LLVM's name for the host CPU (`target.llvm_get_system_cpu`,
i.e. -mcpu=native, resolved so the key is stable) and num-cores = C (MetaSchedule sizes
its parallel loops from it; bench.py passes its largest thread count).
Cache: DIR/<model stem>-<sha256[:12]>/<mcpu>-c<C>-t<N>-p<M>/ holds MetaSchedule's
JSON database and logs, the exported library (tvm.so) and done.json (the tuning and
compile seconds, and the version of this build step). A later build with the same model
bytes and settings reuses tvm.so without tuning or compiling and reports the tuning time
of the first run, marked cached; a library from an older build step is recompiled from
the kept database, without tuning again.

run: loads the library into a Relax VM on tvm.cpu(), binds the inputs (in graph-input
order, the order of the .npz) as device tensors once, then `warmup` untimed and
`repeats` timed calls of main; reports median and p90 in ms and writes the outputs.
"""
import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np


def _emit(obj, result=None):
    sys.stdout.flush()
    print(json.dumps(obj), flush=True)
    if result:
        with open(result, "w") as f:
            json.dump(obj, f)


def host_mcpu():
    import tvm
    f = tvm.get_global_func("target.llvm_get_system_cpu", allow_missing=True)
    return str(f()) if f is not None else "native"


def make_target(mcpu, num_cores):
    from tvm.target import Target
    return Target({"kind": "llvm", "mcpu": mcpu, "num-cores": int(num_cores)})


def import_onnx(model_path):
    """The model as a Relax IRModule with static batch-1 input shapes."""
    import onnx
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx
    model = onnx.load(model_path)
    inits = {t.name for t in model.graph.initializer}
    shapes, dtypes = {}, {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        # a symbolic dim (the batch) -> 1; the benchmark runs at batch 1
        shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        dtypes[vi.name] = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type).name
    mod = from_onnx(model, shape_dict=shapes, dtype_dict=dtypes, keep_params_in_input=False)
    mod = relax.transform.DecomposeOpsForInference()(mod)
    mod = relax.transform.CanonicalizeBindings()(mod)
    return mod


def legalize_and_fuse(mod, target):
    """The fused-TIR module MetaSchedule extracts its tasks from: the same passes, in the
    same order, as compile_relax runs on the unfused module before it applies the
    database, so the task keys match. (Not idempotent: give compile_relax the unfused
    module.)"""
    import tvm
    from tvm import relax
    from tvm.relax import pipeline
    seq = tvm.transform.Sequential(pipeline.library_dispatch_passes(target) + [
        relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(), relax.transform.FuseOps(), relax.transform.FuseTIR()])
    with target, tvm.transform.PassContext(opt_level=3):
        return seq(mod)


def cache_dir(work_dir, model_path, mcpu, num_cores, trials, per_task):
    with open(model_path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:12]
    stem = os.path.splitext(os.path.basename(model_path))[0]
    key = f"{mcpu}-c{num_cores}-t{trials}-p{per_task if trials else 0}"
    return os.path.join(os.path.abspath(work_dir), f"{stem}-{digest}", key)


# bumped when a change here makes earlier libraries wrong; done.json records it
BUILD_STEP = 2


def tuned_tasks(database, tasks, target):
    """How many of the extracted tasks have a tuning record in the database."""
    return sum(database.query_tuning_record(t.dispatched[0], target, t.task_name) is not None
               for t in tasks)


def build(model_path, work_dir, trials, per_task, num_cores, mcpu=None, timeout_s=120.0):
    """Tunes (trials > 0) and compiles the model, or reuses the cache; returns the summary."""
    import tvm
    from tvm.s_tir import meta_schedule as ms
    mcpu = mcpu or host_mcpu()
    d = cache_dir(work_dir, model_path, mcpu, num_cores, trials, per_task)
    lib = os.path.join(d, "tvm.so")
    done = os.path.join(d, "done.json")
    info = None
    if os.path.isfile(done):
        with open(done) as f:
            info = json.load(f)
        if os.path.isfile(lib) and info.get("build_step") == BUILD_STEP:
            info.update(cached=True, lib=lib)
            return info
    os.makedirs(d, exist_ok=True)
    target = make_target(mcpu, num_cores)
    mod = import_onnx(model_path)
    t0 = time.perf_counter()
    fused = legalize_and_fuse(mod, target)
    tasks = ms.relax_integration.extract_tasks(fused, target)
    tasks_tuned = 0
    if trials > 0:
        if info is not None:
            # tuned by an older build step: its database is still good
            database = ms.database.JSONDatabase(work_dir=d)
            tune_s = info["tune_s"]
        else:
            # the candidates MetaSchedule measures run with num_cores threads
            os.environ["TVM_NUM_THREADS"] = str(num_cores)
            # MetaSchedule's default 30 s build timeout kills every candidate on a loaded
            # machine: builds and runs get `timeout_s`
            builder = ms.builder.LocalBuilder(timeout_sec=timeout_s)
            runner = ms.runner.LocalRunner(timeout_sec=timeout_s)
            database = ms.relax_integration.tune_relax(
                mod=fused, params={}, target=target, work_dir=d, max_trials_global=trials,
                max_trials_per_task=per_task, num_trials_per_iter=min(64, per_task), seed=0,
                builder=builder, runner=runner)
            tune_s = time.perf_counter() - t0
        tasks_tuned = tuned_tasks(database, tasks, target)
        t1 = time.perf_counter()
        ex = ms.relax_integration.compile_relax(database, mod, target, params=None)
    else:
        tune_s = 0.0
        t1 = time.perf_counter()
        ex = tvm.compile(mod, target=target)
    tmp = os.path.join(d, "tvm.part.so")
    ex.export_library(tmp)
    os.replace(tmp, lib)
    compile_s = time.perf_counter() - t1
    info = {"target": str(target), "mcpu": mcpu, "num_cores": num_cores, "trials": trials,
            "trials_per_task": per_task if trials else 0, "tasks": len(tasks),
            "tasks_tuned": tasks_tuned, "tune_s": tune_s, "compile_s": compile_s,
            "tvm_version": tvm.__version__, "build_step": BUILD_STEP}
    with open(done, "w") as f:
        json.dump(info, f, indent=1)
    info.update(cached=False, lib=lib)
    return info


def run(lib, inputs_npz, threads, warmup, repeats, outputs_npz=None, max_s=60.0, rounds=1, settle_s=0.0):
    """Times main on the inputs; TVM_NUM_THREADS must be set before this process starts.
    The timed calls come in `rounds` turns, each after a `settle_s` pause and one
    untimed call: the turn pattern bench.py's time_interleaved gives Kiln and ORT,
    so that TVM, timed in its own process, does not alone run back to back."""
    import tvm
    from tvm import relax
    if os.environ.get("TVM_NUM_THREADS") != str(threads):
        raise RuntimeError(f"TVM_NUM_THREADS is {os.environ.get('TVM_NUM_THREADS')!r}, "
                           f"expected {threads}: set it before starting this process")
    dev = tvm.cpu()
    vm = relax.VirtualMachine(tvm.runtime.load_module(lib), dev)
    with np.load(inputs_npz) as z:
        arrays = [z[k] for k in z.files]
    args = [tvm.runtime.tensor(a, dev) for a in arrays]
    main = vm["main"]

    def call():
        return main(*args)

    first = time.perf_counter()
    out = call()
    per_call = time.perf_counter() - first
    outs = [out] if isinstance(out, tvm.runtime.Tensor) else list(out)
    # an untuned TVM library can take many seconds per call (a 1024^3 MatMul):
    # cap warm-up + timed runs at ~max_s, judged by the first call
    capped = per_call * (warmup + repeats) > max_s
    if capped:  # nor turns, each with an untimed call
        warmup, rounds = 0, 1
        repeats = max(3, min(repeats, int(max_s / max(per_call, 1e-9))))
    for _ in range(warmup):
        call()
    times = []
    rounds = max(1, min(rounds, repeats))
    for r in range(rounds):
        n = repeats // rounds + (1 if r < repeats % rounds else 0)
        if settle_s > 0 and not capped:
            time.sleep(settle_s)
            call()
        for _ in range(n):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
    ms = np.asarray(times) * 1e3
    outs = [o.numpy() for o in outs]
    if outputs_npz:
        np.savez(outputs_npz, *outs)
    return {"median_ms": float(np.median(ms)), "p90_ms": float(np.percentile(ms, 90)),
            "threads": threads, "warmup": warmup, "repeats": repeats, "rounds": rounds,
            "outputs": len(outs)}


def main(argv=None):
    ap = argparse.ArgumentParser(description="Apache TVM as a benchmark peer (see the docstring).")
    ap.add_argument("--result", default=None,
                    help="also write the JSON summary to this file (stdout carries TVM's logs)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("check", help="print TVM's version and the host target")
    b = sub.add_parser("build", help="tune (cached) and compile a model")
    b.add_argument("model")
    b.add_argument("--work-dir", required=True)
    b.add_argument("--trials", type=int, default=0, help="global MetaSchedule budget; 0 = untuned")
    b.add_argument("--trials-per-task", type=int, default=64)
    b.add_argument("--num-cores", type=int, default=2)
    b.add_argument("--mcpu", default=None, help="LLVM CPU name (default: the host's)")
    b.add_argument("--timeout", type=float, default=120.0,
                   help="seconds MetaSchedule allows one candidate's build and one run")
    r = sub.add_parser("run", help="time a built library")
    r.add_argument("lib")
    r.add_argument("--inputs", required=True, help=".npz of the inputs, in graph-input order")
    r.add_argument("--threads", type=int, required=True)
    r.add_argument("--warmup", type=int, default=5)
    r.add_argument("--repeats", type=int, default=50)
    r.add_argument("--outputs", default=None, help="write the outputs to this .npz")
    r.add_argument("--rounds", type=int, default=1,
                   help="time the calls in this many turns (default 1: back to back)")
    r.add_argument("--settle", type=float, default=0.0,
                   help="seconds of pause, then one untimed call, before each turn (default 0)")
    r.add_argument("--max-seconds", type=float, default=60.0,
                   help="when warmup+repeats calls would take longer, drop the warm-up and "
                        "time fewer calls (at least 3); the JSON says how many")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "check":
            import onnx  # the Relax importer reads the model with it: a venv needs it too
            import tvm
            _emit({"tvm_version": tvm.__version__, "onnx_version": onnx.__version__, "mcpu": host_mcpu()},
                  args.result)
        elif args.cmd == "build":
            if args.trials < 0 or args.trials_per_task < 1 or args.num_cores < 1:
                ap.error("--trials must be >= 0, --trials-per-task and --num-cores >= 1")
            _emit(build(args.model, args.work_dir, args.trials, args.trials_per_task,
                        args.num_cores, args.mcpu, args.timeout), args.result)
        else:
            _emit(run(args.lib, args.inputs, args.threads, args.warmup, args.repeats,
                      args.outputs, args.max_seconds, args.rounds, args.settle), args.result)
    except ImportError as e:
        print(f"tvm_peer: TVM is not importable: {e}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
