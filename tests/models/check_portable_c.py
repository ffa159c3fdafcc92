#!/usr/bin/env python3
"""check_portable_c.py — the portable C target (`kiln compile --target c`),
built with the host C compiler and with the aarch64 cross gcc, run natively
and under qemu-aarch64, compared with ONNX Runtime.

    check_portable_c.py MODEL.onnx [--max-batch B] [--batch b,..] [--threads t,..]
                        [--harness] [--kiln PATH] [--keep DIR] [--seed S]
    check_portable_c.py --bad-input MODEL.onnx [--kiln PATH]

Steps: `kiln compile MODEL --target c -o TMP/model.c` (and model.h) -> build
c_driver.c + model.c + tools/npy.c + base/base.c with `cc -std=c17 -O2 -Wall
-Wextra -Werror` into a host executable and with `aarch64-linux-gnu-gcc` (same
flags) into an aarch64 one -> run each at every batch and thread count on
.npy files (the aarch64 one under `qemu-aarch64 -L SYSROOT`) -> compare every
output with ONNX Runtime: max|kiln - ort| <= 1e-4 * max(1, max|ort|).
--harness also builds tests/models/artifact_harness.c (written for .o
artifacts: ABI error codes, no malloc while running) unchanged with model.c,
for both machines, and runs it at the largest batch.

--host-only: the host part only (kiln's own emitter then runs in the
sanitizer build too). --bad-input: `--target c` with a .so output, a .c output without `--target
c`, and options after `c` each give exit 1, one "kiln: error:" line naming
the problem, and no file.

The host object of model.c must define exactly the symbols docs/cross.md
lists ("It exports `P_run`, ... only").

Prints the sizes: the .c file, the weights it embeds, and the host / aarch64
objects' code (text) and data. The host part always runs; without the cross
gcc or qemu-aarch64 the test then exits 77 (skipped) with a "SKIP:" line.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

import check_artifact
from common import (REPO, TempDir, compare, default_kiln, describe_failure, make_inputs,
                    model_inputs, ort_reference, run)

SYSROOT = os.environ.get("KILN_AARCH64_SYSROOT") or "/usr/aarch64-linux-gnu"
CFLAGS = ["-std=c17", "-O2", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE"]
DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "c_driver.c")
SKIP = 77


def int_list(text):
    return [int(x) for x in text.split(",") if x]


def cross_tools():
    """(cross gcc, qemu) or the reason they are missing."""
    cc = os.environ.get("KILN_AARCH64_CC") or shutil.which("aarch64-linux-gnu-gcc")
    qemu = shutil.which(os.environ.get("KILN_QEMU_AARCH64") or "qemu-aarch64")
    if not cc:
        return None, "aarch64-linux-gnu-gcc not found (apt-get install gcc-aarch64-linux-gnu)"
    if not qemu:
        return None, "qemu-aarch64 not found (apt-get install qemu-user)"
    if not os.path.isdir(SYSROOT):
        return None, f"no aarch64 sysroot at {SYSROOT} (apt-get install libc6-dev-arm64-cross)"
    return (cc, qemu), None


class Machine:
    def __init__(self, name, cc, prefix_cmd):
        self.name, self.cc, self.prefix_cmd = name, cc, prefix_cmd


def build(machine, tmp, exe, sources, defines):
    cmd = [machine.cc, *CFLAGS, "-I", REPO, "-I", tmp, *defines, *sources, "-o", exe, "-lm", "-lpthread"]
    t0 = time.perf_counter()
    proc = run(cmd)
    if proc.returncode != 0:
        raise SystemExit(f"FAIL {machine.name} build: {' '.join(cmd)}\n{describe_failure(proc)}")
    return time.perf_counter() - t0


def object_sizes(machine, tmp, c_file):
    """(text, data) bytes of model.c compiled alone with -O2."""
    obj = os.path.join(tmp, f"model_{machine.name}.o")
    proc = run([machine.cc, *CFLAGS, "-c", c_file, "-o", obj])
    if proc.returncode != 0:
        return None
    size = (shutil.which("aarch64-linux-gnu-size") if machine.name == "aarch64" else None) \
        or shutil.which("size")
    out = run([size, "-A", obj]).stdout if size else ""
    text = data = 0
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 2 and f[1].isdigit():
            if f[0].startswith(".text"):
                text += int(f[1])
            elif f[0].startswith((".rodata", ".data")):
                data += int(f[1])
    return text, data


def documented_exports(prefix):
    """The symbols docs/cross.md says a portable C artifact exports ("It
    exports `P_run`, ... only"), with P = prefix."""
    text = " ".join(open(os.path.join(REPO, "docs", "cross.md")).read().split())
    m = re.search(r"It exports ((?:`P_[a-z_]+`(?:, | and )?)+) only", text)
    return sorted(n.replace("P_", prefix + "_", 1) for n in re.findall(r"`(P_[a-z_]+)`", m.group(1))) if m else []


def check_exports(tmp):
    """The host object of model.c (object_sizes's) defines exactly the symbols
    docs/cross.md lists; returns a failure or None."""
    obj = os.path.join(tmp, "model_host.o")
    if not os.path.isfile(obj):
        return "model.c did not compile alone into model_host.o"
    nm = run(["nm", "-g", "--defined-only", obj])
    got = sorted(line.split()[-1] for line in nm.stdout.splitlines() if line.strip())
    want = documented_exports("model")
    return None if got and got == want else f"model.c exports {got}; docs/cross.md says {want}"


def bad_input(kiln, model):
    """Must-fail cases; returns 0 or 1."""
    ok = True
    with TempDir() as tmp:
        cases = [
            (["-o", os.path.join(tmp, "m.so"), "--target", "c"], "must end in .c"),
            (["-o", os.path.join(tmp, "m.c")], "--target c"),
            (["-o", os.path.join(tmp, "m.c"), "--target", "c -mcpu=cortex-a76"], "takes no options"),
        ]
        for extra, words in cases:
            proc = run([kiln, "compile", model, *extra])
            lines = [l for l in proc.stderr.splitlines() if l.strip()]
            good = (proc.returncode == 1 and len(lines) == 1 and lines[0].startswith("kiln: error:")
                    and words in lines[0] and not [f for f in os.listdir(tmp)])
            print(f"{'PASS' if good else 'FAIL'} kiln compile {' '.join(extra[2:])} -o "
                  f"{os.path.basename(extra[1])}: {lines[0] if lines else '(no diagnostic)'}")
            ok = ok and good
    return 0 if ok else 1


def main(argv=None):
    ap = argparse.ArgumentParser(description="Portable C artifacts vs ONNX Runtime, host and aarch64.")
    ap.add_argument("model")
    ap.add_argument("--kiln", default=default_kiln())
    ap.add_argument("--max-batch", type=int, default=None)
    ap.add_argument("--batch", type=int_list, default=[1])
    ap.add_argument("--threads", type=int_list, default=[1])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--harness", action="store_true", help="also run artifact_harness.c with model.c")
    ap.add_argument("--keep", default=None)
    ap.add_argument("--bad-input", action="store_true", help="must-fail compile cases only")
    ap.add_argument("--host-only", action="store_true", help="skip the aarch64 part (no exit 77)")
    args = ap.parse_args(argv)
    if args.bad_input:
        return bad_input(args.kiln, args.model)
    name = os.path.basename(args.model)
    if not os.path.exists(args.model):
        print(f"check_portable_c: {args.model}: no such model (run models/export.py)", file=sys.stderr)
        return 1
    tools, why_not = (None, None) if args.host_only else cross_tools()
    machines = [Machine("host", os.environ.get("CC") or shutil.which("cc") or "gcc", [])]
    if tools:
        machines.append(Machine("aarch64", tools[0], [tools[1], "-L", SYSROOT]))
    specs = model_inputs(args.model)
    ok = True
    with TempDir(args.keep) as tmp:
        c_file = os.path.join(tmp, "model.c")
        cmd = [args.kiln, "compile", args.model, "--target", "c", "-o", c_file]
        if args.max_batch is not None:
            cmd += ["--max-batch", str(args.max_batch)]
        t0 = time.perf_counter()
        proc = run(cmd)
        if proc.returncode != 0:
            print(f"FAIL {name}: kiln compile --target c: {describe_failure(proc)}")
            return 1
        for f in (c_file, os.path.join(tmp, "model.h")):
            if not os.path.isfile(f):
                print(f"FAIL {name}: kiln compile wrote no {os.path.basename(f)}")
                return 1
        print(f"{name}: compiled to C in {time.perf_counter() - t0:.2f} s "
              f"(model.c {os.path.getsize(c_file) / 1e6:.2f} MB)")

        exes = {}
        for m in machines:
            exe = os.path.join(tmp, f"driver_{m.name}")
            secs = build(m, tmp, exe, [DRIVER, c_file, os.path.join(REPO, "tools", "npy.c"),
                                       os.path.join(REPO, "base", "base.c")],
                         ["-DKP=model", '-DKILN_HEADER="model.h"'])
            exes[m.name] = exe
            sizes = object_sizes(m, tmp, c_file)
            extra = f", model.o: code {sizes[0] / 1e3:.1f} KB, data {sizes[1] / 1e6:.2f} MB" if sizes else ""
            print(f"{name}: built for {m.name} with {os.path.basename(m.cc)} -O2 in {secs:.1f} s{extra}")
        why = check_exports(tmp)
        print(f"FAIL {name}: {why}" if why else f"PASS {name}: exports {', '.join(documented_exports('model'))}")
        ok = ok and not why

        for batch in args.batch:
            feeds = make_inputs(specs, batch, args.seed)
            want = ort_reference(args.model, feeds)
            ins = []
            for i, arr in enumerate(feeds.values()):
                path = os.path.join(tmp, f"in{i}_b{batch}.npy")
                np.save(path, arr)
                ins.append(path)
            for m in machines:
                for threads in args.threads:
                    label = f"{name} {m.name} batch {batch} threads {threads}"
                    outs = [os.path.join(tmp, f"out{i}_{m.name}_b{batch}_t{threads}.npy")
                            for i in range(len(want))]
                    t0 = time.perf_counter()
                    proc = run([*m.prefix_cmd, exes[m.name], str(batch), str(threads), *ins, *outs],
                               timeout=600)
                    secs = time.perf_counter() - t0
                    if proc.returncode != 0 or "driver: ok" not in proc.stdout:
                        print(f"FAIL {label}: {describe_failure(proc)}")
                        ok = False
                        continue
                    for path, (oname, ref) in zip(outs, want.items()):
                        passed, err, tol, why = compare(np.load(path), ref)
                        print(f"{'PASS' if passed else 'FAIL'} {label} output '{oname}' "
                              f"{list(ref.shape)}: max|kiln-ort| = {err:.3g}, tol = {tol:.3g} "
                              f"({secs:.2f} s)" + (f": {why}" if why else ""))
                        ok = ok and passed

        if args.harness:
            ctx = check_artifact.Ctx(args.kiln, os.path.dirname(args.model), tmp)
            batch = max(args.batch)
            model = os.path.splitext(name)[0]
            for m in machines:
                exe = os.path.join(tmp, f"harness_{m.name}")
                build(m, tmp, exe, [check_artifact.HARNESS, c_file],
                      ["-I", os.path.join(REPO, "include"), "-DKP=model", '-DKILN_HEADER="model.h"'])
                ins, outs, want = ctx.inputs_for(model, batch, f"h_{m.name}")
                try:
                    ctx.run_and_compare([*m.prefix_cmd, exe, str(batch), str(max(args.threads)), *ins, *outs],
                                        [(f"harness {m.name} batch {batch}", outs, want)])
                    print(f"PASS {name} {m.name}: artifact_harness.c with model.c")
                except check_artifact.CaseFailure as e:
                    print(f"FAIL {name} {m.name}: artifact_harness.c with model.c: {e}")
                    ok = False
    print(f"{name}: {'PASS' if ok else 'FAIL'}")
    if not ok:
        return 1
    if why_not:
        print(f"SKIP: aarch64 part not run: {why_not}")
        return SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())
