"""value_checks.py — shared by the drivers of models compiled for declared output shapes with
run-time checks (check_specialize.py, check_runtime_slices.py, check_runtime_resize.py,
check_data_dependent.py); check_bind.py uses its command line (cases_main) too.

A case is (model, good, bad): `good` feeds must run and match the oracle, `bad` feeds must make
`kiln run` fail with KILN_ERR_VALUE ("status 5") and write no output file.
"""
import argparse
import os

import numpy as np
import onnx

from common import (TempDir, compare, default_kiln, describe_failure, ort_reference, run, sanitizer_report,
                    save_inputs)


class CaseFailure(Exception):
    pass


def compile_model(kiln, tmp, name, m, inputs):
    """Saves and compiles model m without --bind; the header must still declare `inputs`.
    Returns (model path, artifact path)."""
    path = os.path.join(tmp, name + ".onnx")
    onnx.save(m, path)
    out = os.path.join(tmp, name + ".so")
    proc = run([kiln, "compile", path, "-o", out])
    if proc.returncode != 0 or sanitizer_report(proc.stderr):
        raise CaseFailure(f"compile without --bind: {describe_failure(proc)}")
    header = open(os.path.join(tmp, name + ".h")).read()
    for k in inputs:
        if f'"{k}"' not in header:
            raise CaseFailure(f"the header does not declare input '{k}'")
    return path, out


def run_good(kiln, tmp, tag, path, out, feeds, text, oracle=ort_reference, oracle_name="ONNX Runtime"):
    """Runs the artifact on feeds; every output must match the oracle."""
    odir = os.path.join(tmp, f"{tag}_out")
    proc = run([kiln, "run", out, *save_inputs(tmp, tag, feeds), "--output-dir", odir])
    if proc.returncode != 0 or sanitizer_report(proc.stderr):
        raise CaseFailure(f"kiln run with {text}: {describe_failure(proc)}")
    for oname, w in oracle(path, feeds).items():
        ok, err, tol, why = compare(np.load(os.path.join(odir, oname + ".npy")), w)
        if not ok:
            raise CaseFailure(f"{text}: output '{oname}': {why or f'max error {err:.3g} > {tol:.3g}'}")
    print(f"  {text}: outputs match {oracle_name}")


def run_bad(kiln, tmp, tag, out, feeds, text):
    """Runs the artifact on feeds that contradict the declared shapes: status 5, no output."""
    odir = os.path.join(tmp, f"{tag}_out")
    proc = run([kiln, "run", out, *save_inputs(tmp, tag, feeds), "--output-dir", odir])
    if proc.returncode == 0 or "status 5" not in proc.stderr or sanitizer_report(proc.stderr):
        raise CaseFailure(f"kiln run with {text}: expected KILN_ERR_VALUE, got {describe_failure(proc)}")
    if os.path.isdir(odir) and os.listdir(odir):
        raise CaseFailure(f"kiln run with {text} failed but wrote {os.listdir(odir)}")
    print(f"  {text}: refused: {proc.stderr.strip().splitlines()[-1]}")


def check_case(kiln, tmp, name, m, good, bad, text, oracle=ort_reference, oracle_name="ONNX Runtime"):
    """Compiles m, runs every good feed against the oracle and every bad one for status 5.
    text(feeds) describes a feed in messages."""
    path, out = compile_model(kiln, tmp, name, m, good[0] if good else {})
    for n, feeds in enumerate(good):
        run_good(kiln, tmp, f"{name}_good{n}", path, out, feeds, text(feeds), oracle, oracle_name)
    for n, feeds in enumerate(bad):
        run_bad(kiln, tmp, f"{name}_bad{n}", out, feeds, text(feeds))


def cases_main(prog, description, cases, check, argv=None):
    """The drivers' command line: --case NAME ... | --list, --kiln, --keep; check(kiln, tmp, name)
    raises CaseFailure. Returns the exit status."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--case", action="append", choices=list(cases))
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--kiln", default=default_kiln())
    ap.add_argument("--models", default=None, help="ignored (the models are generated)")
    ap.add_argument("--keep", default=None)
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(cases))
        return 0
    passed = failed = 0
    with TempDir(args.keep, prefix=f"kiln-{prog}-") as tmp:
        for name in args.case or list(cases):
            print(f"{name}:")
            try:
                check(args.kiln, tmp, name)
                print(f"PASS {name}")
                passed += 1
            except CaseFailure as e:
                print(f"FAIL {name}: {e}")
                failed += 1
    print(f"{prog}: {passed} passed, {failed} failed")
    return 1 if failed else 0
