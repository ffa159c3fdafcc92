#!/usr/bin/env python3
"""The tuning logs committed under tuning/ apply to their models.

For each tuning/<target>/<model>.jsonl: every record is of the current format
version and of the one target the folder names; `kiln compile --target T
--tuning-log L -v` of the model with its batch fixed to 1 (models/<model>.onnx
exported the most common way; the logs were tuned on the symbolic batch)
says that some of the log's records are of its kernels and that some kernels
take the log's schedule (tuned, or the default as the log's best): a batch
dim keys as its extent at batch 1. Compiles only (an object file), so it
runs on any x86-64 host whatever CPU the log was tuned on.

  check_tuning_logs.py --kiln build/kiln --models models --tuning tuning --bench bench
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
from common import fixed_batch  # noqa: E402

TUNED = re.compile(r"kiln: tuning log: (\d+) of (\d+) kernels use tuned schedules \((\d+) run their default")
MATCHED = re.compile(r"kiln: tuning log: (\d+) of its (\d+) records for this target are of kernels of this model")


def applied(kiln, model, target, log, tmp):
    p = subprocess.run([kiln, "compile", model, "-o", os.path.join(tmp, "m.o"), "--target", target,
                        "--tuning-log", log, "-v"], capture_output=True, text=True, timeout=600)
    tuned, matched = TUNED.search(p.stderr), MATCHED.search(p.stderr)
    assert p.returncode == 0 and tuned and matched, f"{model} with {log}: {p.stderr[-2000:]}"
    return int(tuned.group(1)), int(tuned.group(3)), int(matched.group(1)), int(matched.group(2))


def check_log(a, log, tmp):
    name = os.path.splitext(os.path.basename(log))[0]
    with open(log) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    assert recs, f"{log}: empty"
    old = [r for r in recs if r["v"] != 2]
    assert not old, f"{log}: {len(old)} records of format version {old[0]['v']} (kiln tune --upgrade-log)"
    targets = {r["target"] for r in recs}
    assert len(targets) == 1, f"{log}: records of {len(targets)} targets"
    target = targets.pop()
    cpu = re.search(r"-mcpu=(\S+)", target).group(1)
    assert os.path.basename(os.path.dirname(log)).startswith(f"x86_64-pc-linux-gnu-{cpu}"), (log, target)
    model = os.path.join(a.models, f"{name}.onnx")
    if name == "matmul1024":
        sys.path.insert(0, a.bench)
        from bench import make_matmul  # noqa: E402
        model = os.path.join(tmp, "matmul1024.onnx")
        make_matmul(model, 1024)
    b1 = os.path.join(tmp, f"{name}_b1.onnx")
    fixed_batch(model, b1)
    tuned, best_default, matched, total = applied(a.kiln, b1, target, log, tmp)
    assert matched > 0 and tuned + best_default > 0, \
        f"{log}: applies to nothing at batch 1: {matched} of {total} records"
    print(f"ok {log}: at batch 1, {tuned} kernels tuned, {best_default} default as the best; "
          f"{matched} of {total} records of the model's kernels")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--tuning", required=True)
    ap.add_argument("--bench", required=True)
    a = ap.parse_args()
    logs = sorted(glob.glob(os.path.join(a.tuning, "*", "*.jsonl")))
    assert logs, f"no logs under {a.tuning}"
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for log in logs:
            try:
                check_log(a, log, tmp)
            except AssertionError as e:
                failed += 1
                print(f"FAIL {log}: {e}")
    print(f"{len(logs) - failed} of {len(logs)} logs apply to their models")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
