"""compiler.py — kiln.compile: the `kiln compile` command, run as a process.

The command is $KILN where set, else `kiln` on PATH. A failed compile raises
RunError with kiln's diagnostic (the `kiln: error:` lines, prefix removed);
kiln writes its output atomically, so nothing is left behind then.
"""
import os
import shutil
import subprocess

from .errors import InputError, RunError


def kiln_command():
    """The kiln executable: $KILN, else `kiln` on PATH."""
    exe = os.environ.get("KILN") or shutil.which("kiln")
    if not exe:
        raise RunError("cannot find the kiln command: set KILN to its path or put kiln on PATH")
    return exe


def compile(model, output, target=None, tuning_log=None, prefix=None, max_batch=None,
            precision=None, extra_args=(), load=False):
    """Compiles the ONNX file `model` into the artifact `output` (.so, .o or,
    with target "c", .c; see docs/cli.md) and returns its path, or, with
    load=True, the loaded Model. extra_args: more `kiln compile` options."""
    if isinstance(extra_args, str):
        raise InputError(f"extra_args: want a list of options, got the string {extra_args!r}")
    cmd = [kiln_command(), "compile", os.fspath(model), "-o", os.fspath(output)]
    for flag, value in (("--target", target), ("--tuning-log", tuning_log), ("--prefix", prefix),
                        ("--max-batch", max_batch), ("--precision", precision)):
        if value is not None:
            cmd += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    cmd += [str(a) for a in extra_args]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        raise RunError(f"cannot run {cmd[0]}: {e.strerror}") from None
    if proc.returncode != 0:
        lines = [ln.removeprefix("kiln: error: ") for ln in proc.stderr.splitlines()
                 if ln.startswith("kiln: error: ")]
        why = "; ".join(lines) or proc.stderr.strip() or f"exit status {proc.returncode}"
        raise RunError(f"kiln compile {os.fspath(model)}: {why}")
    if load:
        from .model import Model
        return Model(output)
    return os.fspath(output)
