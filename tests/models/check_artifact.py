#!/usr/bin/env python3
"""check_artifact.py — prove that Kiln's artifacts are standalone and usable from C.

    check_artifact.py [--case NAME ...] [--list] [--kiln PATH] [--models DIR] [--keep DIR]

Cases (all by default):
  so_deps      the .so of tiny_cnn: NEEDED lists only libc/libm/libpthread (and the
               dynamic loader), no TEXTREL, the dynamic symbol table exports only
               PREFIX_* and kiln_artifact_v1 (runtime symbols hidden); out.h exists.
  c_object     tiny_cnn compiled to cnn.o (--prefix cnn --max-batch 4) + cnn.h;
               artifact_harness.c includes cnn.h, links cnn.o with -lm -lpthread only,
               checks the ABI error codes, runs at batch 3 with 2 threads without a
               heap allocation, and matches ONNX Runtime.
  c_shared     the same harness linked (not dlopen'ed) against cnn.so.
  cxx_header   a C++ file includes cnn.h and calls cnn_run: the header is C++-clean
               (extern "C"). Skipped when no C++ compiler is found.
  dlopen_two   tiny_cnn.so and tiny_mlp.so, both with the default prefix, dlopen'ed
               into one process through `kiln_artifact_v1` and run: both match ORT.
  link_two     cnn.o and mlp.o (distinct prefixes) statically linked into one
               program: the embedded runtimes must not clash; both match ORT.
The harness is always built with plain cc (no sanitizers), whatever the kiln build.
Exit status 0 if every case passes.
"""
import argparse
import os
import re
import shutil
import sys

import numpy as np

from common import (REPO, TempDir, compare, default_kiln, describe_failure, make_inputs,
                    model_inputs, ort_reference, run)

HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "artifact_harness.c")
ALLOWED_NEEDED = re.compile(r"^(libc\.so\.6|libm\.so\.6|libpthread\.so\.0|ld-linux[-\w.]*\.so\.\d)$")
LINKER_SYMBOLS = {"_init", "_fini", "_edata", "_end", "__bss_start"}
CFLAGS = ["-std=c17", "-O1", "-Wall", "-Wextra", "-Werror"]


class Ctx:
    """What the cases share: tools, folders, and artifacts compiled on demand."""

    def __init__(self, kiln, models, tmp):
        self.kiln, self.models, self.tmp = kiln, models, tmp
        self.cc = os.environ.get("CC") or shutil.which("cc") or "gcc"
        self.cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
        self.built = {}

    def compile(self, model, out_name, *extra):
        """kiln compile models/MODEL.onnx -o TMP/OUT_NAME [extra]; cached."""
        key = (model, out_name) + extra
        if key not in self.built:
            out = os.path.join(self.tmp, out_name)
            proc = run([self.kiln, "compile", self.model(model), "-o", out, *extra])
            if proc.returncode != 0:
                raise CaseFailure(f"kiln compile {model} -o {out_name}: {describe_failure(proc)}")
            header = os.path.splitext(out)[0] + ".h"
            for f in (out, header):
                if not os.path.isfile(f):
                    raise CaseFailure(f"kiln compile {model} wrote no {os.path.basename(f)}")
            self.built[key] = out
        return self.built[key]

    def model(self, name):
        path = os.path.join(self.models, name + ".onnx")
        if not os.path.isfile(path):
            raise CaseFailure(f"{path} missing (run models/export.py)")
        return path

    def build(self, exe, sources, flags, libs, cxx=False):
        cmd = [self.cxx if cxx else self.cc, *flags, "-I", os.path.join(REPO, "include"),
               "-I", self.tmp, *sources, "-o", exe, *libs]
        proc = run(cmd)
        if proc.returncode != 0:
            raise CaseFailure("building a program with the artifact failed:\n  "
                              + " ".join(cmd) + "\n" + describe_failure(proc))
        return exe

    def inputs_for(self, model, batch, tag):
        """Raw input files for MODEL at BATCH, and the ORT reference outputs."""
        path = self.model(model)
        feeds = make_inputs(model_inputs(path), batch, seed=1)
        files = []
        for i, arr in enumerate(feeds.values()):
            f = os.path.join(self.tmp, f"{tag}_in{i}.bin")
            arr.tofile(f)
            files.append(f)
        want = ort_reference(path, feeds)
        outs = [os.path.join(self.tmp, f"{tag}_out{i}.bin") for i in range(len(want))]
        return files, outs, want

    def run_and_compare(self, cmd, checks):
        """Runs a harness command, then compares each (out files, reference) pair."""
        proc = run(cmd, timeout=300)
        if proc.returncode != 0 or "harness: ok" not in proc.stdout:
            raise CaseFailure(f"{' '.join(cmd)}: {describe_failure(proc)}\n{proc.stdout[-2000:]}")
        for tag, outs, want in checks:
            for f, (oname, ref) in zip(outs, want.items()):
                got = np.fromfile(f, dtype=ref.dtype)
                if got.size != ref.size:
                    raise CaseFailure(f"{tag} output '{oname}': {got.size} elements, expected {ref.size}")
                ok, err, tol, why = compare(got.reshape(ref.shape), ref)
                print(f"  {tag} output '{oname}': max|kiln-ort| = {err:.3g} (tol {tol:.3g})")
                if not ok:
                    raise CaseFailure(f"{tag} output '{oname}' differs from ONNX Runtime: "
                                      f"{err:.3g} > {tol:.3g} {why}")


class CaseFailure(Exception):
    pass


class Skip(Exception):
    pass


def case_so_deps(c):
    so = c.compile("tiny_cnn", "model.so")
    proc = run(["readelf", "-d", "-W", so])
    if proc.returncode != 0:
        raise CaseFailure(f"readelf -d failed: {describe_failure(proc)}")
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", proc.stdout)
    print(f"  NEEDED: {', '.join(needed) or '(none)'}")
    bad = [n for n in needed if not ALLOWED_NEEDED.match(n)]
    if bad:
        raise CaseFailure(f"the .so needs {', '.join(bad)}; only libc, libm, libpthread are allowed")
    if "(TEXTREL)" in proc.stdout or re.search(r"\(FLAGS\).*TEXTREL", proc.stdout):
        raise CaseFailure("the .so has text relocations (not PIC)")
    proc = run(["nm", "-D", "--defined-only", so])
    syms = [line.split()[-1] for line in proc.stdout.splitlines() if line.strip()]
    print(f"  exported: {', '.join(sorted(syms))}")
    for want in ("kiln_artifact_v1", "model_artifact", "model_run", "model_set_threads"):
        if want not in syms:
            raise CaseFailure(f"the .so does not export {want}")
    leaked = [s for s in syms
              if s not in LINKER_SYMBOLS and s != "kiln_artifact_v1" and not s.startswith("model_")]
    if leaked:
        raise CaseFailure(f"runtime symbols are exported (must be hidden): {', '.join(leaked[:20])}")
    header = open(os.path.join(c.tmp, "model.h")).read()
    if "model_run" not in header:
        raise CaseFailure("model.h does not declare model_run")


def case_c_object(c):
    obj = c.compile("tiny_cnn", "cnn.o", "--prefix", "cnn", "--max-batch", "4")
    exe = c.build(os.path.join(c.tmp, "harness_o"), [HARNESS, obj],
                  CFLAGS + ["-DKP=cnn", '-DKILN_HEADER="cnn.h"'], ["-lm", "-lpthread"])
    ins, outs, want = c.inputs_for("tiny_cnn", 3, "cnn_b3")
    c.run_and_compare([exe, "3", "2", *ins, *outs], [("tiny_cnn batch 3", outs, want)])


def case_c_shared(c):
    so = c.compile("tiny_cnn", "cnn.so", "--prefix", "cnn", "--max-batch", "4")
    exe = c.build(os.path.join(c.tmp, "harness_so"), [HARNESS],
                  CFLAGS + ["-DKP=cnn", '-DKILN_HEADER="cnn.h"'],
                  [so, "-Wl,-rpath," + c.tmp, "-lm", "-lpthread"])
    ins, outs, want = c.inputs_for("tiny_cnn", 1, "cnn_so_b1")
    c.run_and_compare([exe, "1", "1", *ins, *outs], [("tiny_cnn .so batch 1", outs, want)])


def case_cxx_header(c):
    if not c.cxx:
        raise Skip("no C++ compiler")
    obj = c.compile("tiny_cnn", "cnn.o", "--prefix", "cnn", "--max-batch", "4")
    src = os.path.join(c.tmp, "use_header.cc")
    with open(src, "w") as f:
        f.write('#include "cnn.h"\n'
                "int main() {\n"
                "  // batch 0 / NULL buffers must be refused: proves the call links and reaches the artifact\n"
                "  return cnn_run(nullptr, nullptr, nullptr, 0) != KILN_OK ? 0 : 1;\n"
                "}\n")
    exe = c.build(os.path.join(c.tmp, "use_header"), [src, obj],
                  ["-std=c++17", "-Wall", "-Wextra", "-Werror"], ["-lm", "-lpthread"], cxx=True)
    proc = run([exe])
    if proc.returncode != 0:
        raise CaseFailure(f"C++ program: {describe_failure(proc)}")


def case_dlopen_two(c):
    so1 = c.compile("tiny_cnn", "model.so")
    # Same default prefix, different folders: both export model_run and kiln_artifact_v1.
    os.makedirs(os.path.join(c.tmp, "second"), exist_ok=True)
    so2 = c.compile("tiny_mlp", os.path.join("second", "model.so"))
    exe = c.build(os.path.join(c.tmp, "harness_dl"), [HARNESS], CFLAGS + ["-DKILN_DLOPEN"], ["-ldl"])
    ins1, outs1, want1 = c.inputs_for("tiny_cnn", 1, "dl_cnn")
    ins2, outs2, want2 = c.inputs_for("tiny_mlp", 1, "dl_mlp")
    c.run_and_compare([exe, "1", "2", so1, *ins1, *outs1, so2, *ins2, *outs2],
                      [("tiny_cnn", outs1, want1), ("tiny_mlp", outs2, want2)])


def case_link_two(c):
    obj1 = c.compile("tiny_cnn", "cnn.o", "--prefix", "cnn", "--max-batch", "4")
    obj2 = c.compile("tiny_mlp", "mlp.o", "--prefix", "mlp", "--max-batch", "4")
    exe = c.build(os.path.join(c.tmp, "harness_two"), [HARNESS, obj1, obj2],
                  CFLAGS + ["-DKP=cnn", '-DKILN_HEADER="cnn.h"', "-DKP2=mlp",
                            '-DKILN_HEADER2="mlp.h"'], ["-lm", "-lpthread"])
    ins1, outs1, want1 = c.inputs_for("tiny_cnn", 2, "two_cnn")
    ins2, outs2, want2 = c.inputs_for("tiny_mlp", 2, "two_mlp")
    c.run_and_compare([exe, "2", "2", *ins1, *outs1, *ins2, *outs2],
                      [("tiny_cnn", outs1, want1), ("tiny_mlp", outs2, want2)])


CASES = {
    "so_deps": case_so_deps,
    "c_object": case_c_object,
    "c_shared": case_c_shared,
    "cxx_header": case_cxx_header,
    "dlopen_two": case_dlopen_two,
    "link_two": case_link_two,
}


def main(argv=None):
    ap = argparse.ArgumentParser(description="Check that Kiln artifacts are standalone and usable from C.")
    ap.add_argument("--case", action="append", choices=list(CASES), help="run only this case (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--kiln", default=default_kiln())
    ap.add_argument("--models", default=os.path.join(REPO, "models"))
    ap.add_argument("--keep", default=None, help="work in this folder and keep it")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(CASES))
        return 0
    if not os.access(args.kiln, os.X_OK):
        print(f"check_artifact: {args.kiln}: no kiln binary (build first)", file=sys.stderr)
        return 1
    passed = failed = skipped = 0
    with TempDir(args.keep) as tmp:
        ctx = Ctx(args.kiln, args.models, tmp)
        for name in args.case or list(CASES):
            print(f"{name}:")
            try:
                CASES[name](ctx)
                print(f"PASS {name}")
                passed += 1
            except Skip as e:
                print(f"SKIP {name}: {e}")
                skipped += 1
            except CaseFailure as e:
                print(f"FAIL {name}: {e}")
                failed += 1
    print(f"check_artifact: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
