#!/usr/bin/env python3
"""check_progress.py — `kiln compile`'s stage lines on stderr.

    check_progress.py KILN MODEL.onnx TMPDIR

  * --progress: one line per stage as it ends, `kiln: STAGE S.SS s`, the
    stages load, optimize, fuse, schedule, plan, codegen in that order, and
    nothing else on stderr or stdout;
  * without it, stderr not a terminal: nothing, even with
    KILN_PROGRESS_AFTER=0 (pipes and logs, the tests, stay quiet);
  * stderr a terminal (a pseudo-terminal here): the same six lines with
    KILN_PROGRESS_AFTER=0, and with 0.05 (passed during codegen, which
    alone takes longer: the stages done before it are printed then, at
    once), none with KILN_PROGRESS_AFTER=1000 (a compile shorter than the
    threshold prints nothing).
"""
import os
import pty
import re
import subprocess
import sys

STAGES = ["load", "optimize", "fuse", "schedule", "plan", "codegen"]
LINE = re.compile(r"^kiln: ([a-z]+) (\d+\.\d\d) s$")


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def check_lines(text, what):
    lines = [l.rstrip("\r") for l in text.splitlines() if l.strip()]
    got = []
    for l in lines:
        m = LINE.match(l)
        if not m:
            fail(f"{what}: unexpected stderr line {l!r}")
        got.append(m.group(1))
    if got != STAGES:
        fail(f"{what}: stages {got}, expected {STAGES}")
    print(f"ok: {what}: " + "; ".join(l.strip() for l in lines))


def on_terminal(cmd, env):
    """Runs cmd with stderr on a pseudo-terminal; returns what it wrote there."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    if proc.wait() != 0:
        fail(f"{' '.join(cmd)}: exit {proc.returncode}: {b''.join(chunks).decode(errors='replace')}")
    return b"".join(chunks).decode()


def main():
    kiln, model, tmp = sys.argv[1:4]
    os.makedirs(tmp, exist_ok=True)
    out = os.path.join(tmp, "p.so")
    cmd = [kiln, "compile", model, "-o", out]
    env = {k: v for k, v in os.environ.items() if k != "KILN_PROGRESS_AFTER"}
    proc = subprocess.run(cmd + ["--progress"], capture_output=True, text=True, env=env)
    if proc.returncode != 0 or proc.stdout:
        fail(f"--progress: exit {proc.returncode}, stdout {proc.stdout!r}, stderr {proc.stderr!r}")
    check_lines(proc.stderr, "--progress")
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**env, "KILN_PROGRESS_AFTER": "0"})
    if proc.returncode != 0 or proc.stderr or proc.stdout:
        fail(f"not a terminal: expected a silent compile, got exit {proc.returncode}, stderr {proc.stderr!r}")
    print("ok: not a terminal: nothing on stderr")
    check_lines(on_terminal(cmd, {**env, "KILN_PROGRESS_AFTER": "0"}), "terminal, threshold 0")
    # a threshold passed during codegen: the stages done before it come first, at once
    check_lines(on_terminal(cmd, {**env, "KILN_PROGRESS_AFTER": "0.05"}), "terminal, threshold 0.05 s")
    text = on_terminal(cmd, {**env, "KILN_PROGRESS_AFTER": "1000"})
    if text.strip():
        fail(f"terminal, threshold 1000 s: expected nothing, got {text!r}")
    print("ok: terminal, threshold 1000 s: nothing")


if __name__ == "__main__":
    main()
