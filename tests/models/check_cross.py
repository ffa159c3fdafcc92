#!/usr/bin/env python3
"""check_cross.py — aarch64 cross-compilation checked under qemu-aarch64 on x86-64.

    check_cross.py --model MODEL.onnx [check_model.py options]   (default target cortex-a76)
    check_cross.py [--case NAME ...] [--list] [--kiln PATH] [--models DIR] [--keep DIR]

--model: check_model.py with `--target "aarch64-linux-gnu -mcpu=cortex-a76"`
unless another --target is given: kiln compile cross-compiles, `kiln run` sees
an aarch64 .so and runs it under qemu-aarch64 through kiln-run-aarch64, and
the outputs are compared with ONNX Runtime on x86 (same tolerance as on x86).

Cases (all by default):
  so_deps      tiny_cnn's aarch64 .so: e_machine AArch64, NEEDED only libc / libm /
               libpthread (and the loader), only PREFIX_* and kiln_artifact_v1 exported.
  c_object     tiny_cnn as an aarch64 .o, linked into artifact_harness.c by the
               cross gcc (-lm -lpthread only), run under qemu at batch 3, 2 threads:
               ABI error codes, no malloc while running, matches ORT.
  bench        `kiln run --bench 3` on an aarch64 .so prints the host's latency line.
  bad_target   an unknown aarch64 CPU / feature: one-line diagnostic listing the valid
               names, exit 1, no file written.
  missing_tools  no qemu / no runner / no cross linker: one-line diagnostics naming the
               Debian package to install, exit 1, no partial file.

Skips (exit 77, "SKIP: ..." on stdout; ctest shows the test as skipped) when
qemu-aarch64 is not installed or kiln was built without the aarch64 cross
compiler (no kiln-run-aarch64 beside the kiln binary).
"""
import argparse
import os
import re
import shutil
import sys

import numpy as np

import check_artifact
import check_model
from common import REPO, TempDir, default_kiln, describe_failure, make_inputs, model_inputs, run

DEFAULT_TARGET = "aarch64-linux-gnu -mcpu=cortex-a76"
SYSROOT = os.environ.get("KILN_AARCH64_SYSROOT") or "/usr/aarch64-linux-gnu"
SKIP = 77


def missing_tools(kiln):
    """Why the cross tests cannot run here, or None."""
    if not shutil.which(os.environ.get("KILN_QEMU_AARCH64") or "qemu-aarch64"):
        return "qemu-aarch64 not found (apt-get install qemu-user)"
    if not os.path.isfile(os.path.join(os.path.dirname(os.path.abspath(kiln)), "kiln-run-aarch64")):
        return ("kiln was built without the aarch64 cross compiler "
                "(apt-get install gcc-aarch64-linux-gnu, then rebuild)")
    if not os.path.isdir(SYSROOT):
        return f"no aarch64 sysroot at {SYSROOT} (apt-get install libc6-dev-arm64-cross)"
    return None


class CrossCtx(check_artifact.Ctx):
    """check_artifact's context with aarch64 artifacts, the cross gcc and qemu."""

    def __init__(self, kiln, models, tmp):
        super().__init__(kiln, models, tmp)
        self.cc = shutil.which("aarch64-linux-gnu-gcc")
        self.cxx = None

    def compile(self, model, out_name, *extra):
        return super().compile(model, out_name, "--target", DEFAULT_TARGET, *extra)

    def qemu(self, *cmd):
        return ["qemu-aarch64", "-L", SYSROOT, *cmd]


Failure = check_artifact.CaseFailure


def elf_machine(path):
    with open(path, "rb") as f:
        h = f.read(20)
    return int.from_bytes(h[18:20], "little") if h[:4] == b"\x7fELF" else None


def case_so_deps(c):
    so = c.compile("tiny_cnn", "model.so")
    if elf_machine(so) != 183:
        raise Failure(f"the .so has e_machine {elf_machine(so)}, not 183 (AArch64)")
    proc = run(["readelf", "-d", "-W", so])
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", proc.stdout)
    print(f"  NEEDED: {', '.join(needed) or '(none)'}")
    bad = [n for n in needed if not check_artifact.ALLOWED_NEEDED.match(n)]
    if proc.returncode != 0 or bad:
        raise Failure(f"the .so needs {', '.join(bad)}; only libc, libm, libpthread are allowed")
    if "TEXTREL" in proc.stdout:
        raise Failure("the .so has text relocations (not PIC)")
    proc = run(["readelf", "--dyn-syms", "-W", so])
    syms = [f[7] for f in (line.split() for line in proc.stdout.splitlines())
            if len(f) >= 8 and f[6] != "UND" and f[4] in ("GLOBAL", "WEAK")]
    print(f"  exported: {', '.join(sorted(syms))}")
    leaked = [s for s in syms if s != "kiln_artifact_v1" and not s.startswith("model_")
              and s not in check_artifact.LINKER_SYMBOLS]
    if leaked or "kiln_artifact_v1" not in syms or "model_run" not in syms:
        raise Failure(f"exports {sorted(syms)}: want model_* and kiln_artifact_v1 only")


def case_c_object(c):
    if not c.cc:
        raise check_artifact.Skip("no aarch64-linux-gnu-gcc")
    obj = c.compile("tiny_cnn", "cnn.o", "--prefix", "cnn", "--max-batch", "4")
    if elf_machine(obj) != 183:
        raise Failure("cnn.o is not an AArch64 object")
    exe = c.build(os.path.join(c.tmp, "harness_o"), [check_artifact.HARNESS, obj],
                  check_artifact.CFLAGS + ["-DKP=cnn", '-DKILN_HEADER="cnn.h"'],
                  ["-lm", "-lpthread"])
    ins, outs, want = c.inputs_for("tiny_cnn", 3, "cnn_b3")
    c.run_and_compare(c.qemu(exe, "3", "2", *ins, *outs), [("tiny_cnn aarch64 .o batch 3", outs, want)])


def case_bench(c):
    so = c.compile("tiny_mlp", "mlp.so")
    args = []
    for i, (name, arr) in enumerate(make_inputs(model_inputs(c.model("tiny_mlp")), 1, 0).items()):
        path = os.path.join(c.tmp, f"bench{i}.npy")
        np.save(path, arr)
        args += ["--input", f"{name}={path}"]
    proc = run([c.kiln, "run", so, *args, "--bench", "3", "--threads", "1",
                "--output-dir", os.path.join(c.tmp, "bench_out")])
    line = proc.stdout.strip()
    print(f"  {line}")
    if proc.returncode != 0 or not re.fullmatch(
            r"latency: median [0-9.]+ ms, p90 [0-9.]+ ms, throughput [0-9.]+ samples/s "
            r"\(batch 1, 3 runs, 1 threads\)", line):
        raise Failure(f"unexpected --bench output: {describe_failure(proc)} {line!r}")
    if not os.path.isfile(os.path.join(c.tmp, "bench_out", "output.npy")):
        raise Failure("kiln run --bench wrote no output .npy")


def expect_diag(c, cmd, env, words, absent=()):
    """cmd fails with exit 1 and one 'kiln: error:' line containing every word."""
    proc = run(cmd, env={**os.environ, **env})
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    print(f"  {' '.join(cmd[1:3])}: {lines[0] if lines else '(no output)'}")
    if proc.returncode != 1 or len(lines) != 1 or not lines[0].startswith("kiln: error:"):
        raise Failure(f"{' '.join(cmd)}: want exit 1 and one diagnostic line, got "
                      f"{describe_failure(proc)}")
    for w in words:
        if w not in lines[0]:
            raise Failure(f"diagnostic lacks '{w}': {lines[0]}")
    for f in absent:
        if os.path.exists(f):
            raise Failure(f"{f} was written by a failed command")


def case_bad_target(c):
    model = c.model("tiny_mlp")
    out = os.path.join(c.tmp, "bad.so")
    base = [c.kiln, "compile", model, "-o", out, "--target"]
    expect_diag(c, base + ["aarch64-linux-gnu -mcpu=cortex-a99"], {},
                ["cortex-a99", "cortex-a76", "cortex-a53", "neoverse-n1"], [out])
    expect_diag(c, base + ["aarch64-linux-gnu -mcpu=cortex-a76 -mattr=+avx2"], {},
                ["avx2", "dotprod", "neon"], [out])
    expect_diag(c, base + ["riscv64-linux-gnu"], {}, ["riscv64", "aarch64-linux-gnu"], [out])


def case_missing_tools(c):
    so = c.compile("tiny_mlp", "mlp.so")
    inp = os.path.join(c.tmp, "unused.npy")
    run_cmd = [c.kiln, "run", so, "--input", f"x={inp}"]
    expect_diag(c, run_cmd, {"KILN_QEMU_AARCH64": "/nonexistent/qemu-aarch64"}, ["qemu-user"])
    expect_diag(c, run_cmd, {"KILN_AARCH64_RUNNER": "/nonexistent/kiln-run-aarch64"},
                ["gcc-aarch64-linux-gnu"])
    out = os.path.join(c.tmp, "nolink.so")
    expect_diag(c, [c.kiln, "compile", c.model("tiny_mlp"), "-o", out, "--target", DEFAULT_TARGET],
                {"KILN_AARCH64_CC": "/nonexistent/aarch64-linux-gnu-gcc"},
                ["gcc-aarch64-linux-gnu"], [out, os.path.join(c.tmp, "nolink.h")])


CASES = {
    "so_deps": case_so_deps,
    "c_object": case_c_object,
    "bench": case_bench,
    "bad_target": case_bad_target,
    "missing_tools": case_missing_tools,
}


def main(argv=None):
    ap = argparse.ArgumentParser(description="aarch64 artifacts checked under qemu-aarch64.")
    ap.add_argument("--model", default=None, help="check this model with check_model.py")
    ap.add_argument("--case", action="append", choices=list(CASES), help="run only this case")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--kiln", default=default_kiln())
    ap.add_argument("--models", default=os.path.join(REPO, "models"))
    ap.add_argument("--keep", default=None)
    args, rest = ap.parse_known_args(argv)
    if args.list:
        print("\n".join(CASES))
        return 0
    why = missing_tools(args.kiln)
    if why:
        print(f"SKIP: {why}")
        return SKIP
    if args.model:
        if "--target" not in rest:
            rest += ["--target", DEFAULT_TARGET]
        return check_model.main([args.model, "--kiln", args.kiln, *rest])
    if rest:
        ap.error(f"unknown arguments {rest}")
    passed = failed = skipped = 0
    with TempDir(args.keep) as tmp:
        ctx = CrossCtx(args.kiln, args.models, tmp)
        for name in args.case or list(CASES):
            print(f"{name}:")
            try:
                CASES[name](ctx)
                print(f"PASS {name}")
                passed += 1
            except check_artifact.Skip as e:
                print(f"SKIP {name}: {e}")
                skipped += 1
            except Failure as e:
                print(f"FAIL {name}: {e}")
                failed += 1
    print(f"check_cross: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
