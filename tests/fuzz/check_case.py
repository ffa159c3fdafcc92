#!/usr/bin/env python3
"""check_case.py — one fuzz regression case: a model that once crashed, hung
or misbehaved (or a hostile model from fuzz/gen_seeds.py) must now be
rejected cleanly by both `kiln inspect` and `kiln compile`.

    check_case.py KILN CASE.onnx
    check_case.py KILN --gen NAME     (a large case: fuzz/gen_seeds.py --only NAME, in a temp dir)

For each command the contract is: finishes within 10 s, exit status 1 (not a
signal), no sanitizer report, stderr made of diagnostic lines only (each
"kiln: error: ..." / "kiln: note: ...", at most 16), at least one of them an
error, and `kiln compile` leaves nothing in its output folder.
Cases whose name contains "slow_" are valid models that once took minutes
(constant folding): for them exit status 0 is fine too (then stderr may be
empty and the artifact is written), the time limit is what counts.
Cases whose name contains "plan_" hold a tensor beyond what an artifact may
hold (tools/plan_build.h) but within shape inference's limit: `kiln inspect`
may describe them (exit 0), `kiln compile` must refuse them as above.
Exit status 0 if both hold.
"""
import os
import subprocess
import sys
import tempfile

TIMEOUT_S = 10
MAX_LINES = 16


def check(cmd, out_dir=None, may_succeed=False):
    name = " ".join(os.path.basename(a) if i < 2 else a for i, a in enumerate(cmd))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return [f"{name}: did not finish in {TIMEOUT_S} s"]
    err = proc.stderr
    problems = []
    if may_succeed and proc.returncode == 0:
        return [f"{name}: sanitizer report\n{err[-3000:]}"] if "Sanitizer" in err or "runtime error:" in err else []
    if proc.returncode < 0:
        problems.append(f"killed by signal {-proc.returncode}")
    elif proc.returncode != 1:
        problems.append(f"exit status {proc.returncode}, expected 1")
    if "Sanitizer" in err or "runtime error:" in err or "LeakSanitizer" in err:
        problems.append("sanitizer report")
    lines = err.splitlines()
    if not any(line.startswith("kiln: error: ") for line in lines):
        problems.append("no 'kiln: error:' diagnostic")
    if any(not line.startswith(("kiln: error: ", "kiln: note: ")) for line in lines):
        problems.append("stderr has lines other than diagnostics")
    if len(lines) > MAX_LINES:
        problems.append(f"{len(lines)} lines of diagnostics, at most {MAX_LINES} expected")
    if out_dir is not None and os.listdir(out_dir):
        problems.append(f"left files behind: {sorted(os.listdir(out_dir))}")
    if problems:
        return [f"{name}: " + "; ".join(problems) + "\n--- stderr ---\n" + err[-3000:]]
    return []


def main():
    if len(sys.argv) == 4 and sys.argv[2] == "--gen":
        with tempfile.TemporaryDirectory(prefix="kiln-fuzz-gen-") as tmp:
            gen = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fuzz", "gen_seeds.py")
            subprocess.run([sys.executable, gen, tmp, "--only", sys.argv[3]], check=True, stdout=subprocess.DEVNULL)
            return check_file(sys.argv[1], os.path.join(tmp, f"gen_{sys.argv[3]}.onnx"))
    if len(sys.argv) != 3:
        sys.exit("usage: check_case.py KILN CASE.onnx | check_case.py KILN --gen NAME")
    return check_file(sys.argv[1], sys.argv[2])


def check_file(kiln, case):
    slow = "slow_" in os.path.basename(case)
    plan_only = "plan_" in os.path.basename(case)
    failures = check([kiln, "inspect", case], may_succeed=slow or plan_only)
    with tempfile.TemporaryDirectory(prefix="kiln-fuzz-case-") as tmp:
        out = os.path.join(tmp, "out")
        os.makedirs(out)
        failures += check([kiln, "compile", case, "-o", os.path.join(out, "x.so")], out, may_succeed=slow)
    for f in failures:
        print("FAIL " + f)
    if failures:
        return 1
    print(f"PASS {os.path.basename(case)}: inspect and compile " + ("finish in time" if slow else "fail cleanly"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
