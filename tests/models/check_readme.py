#!/usr/bin/env python3
"""check_readme.py — README.md's quick start works when followed in order.

    check_readme.py [--kiln PATH] [--readme README.md] [--models DIR] [--keep DIR]

In an empty folder, runs every command of the first ```sh block under
"## Quick start" in order (`build/kiln` is the kiln under test, `python3`
this interpreter, `models/...` the model folder); each must exit 0, and
every `out/...` file its comments say it writes must exist. Then the C
snippet that follows ("From C, ...") is compiled as written, its #include
lines first and its statements as the body of main() with `image` and
`logits` the caller's buffers, against the headers in out/ and linked
with out/resnet18.so (-std=c17 -Wall -Wextra -Werror); run on x.npy, it
must return KILN_OK and the logits `kiln run` wrote for the same input.
"""
import argparse
import os
import re
import shlex
import sys

import numpy as np

from common import REPO, TempDir, default_kiln, describe_failure, run


class Failure(Exception):
    pass


def fenced_block(text, after, lang):
    """The first ```lang block after the line starting with `after`."""
    at = text.find(after)
    if at < 0:
        raise Failure(f"README has no '{after}'")
    m = re.compile(r"^```" + lang + r"\n(.*?)^```", re.M | re.S).search(text, at)
    if not m:
        raise Failure(f"no ```{lang} block after '{after}'")
    return m.group(1)


def run_commands(block, kiln, models, tmp):
    """Runs the block's commands in tmp; returns the out/ files its comments promise."""
    promised = []
    for line in block.splitlines():
        if line.lstrip().startswith("#"):
            promised += re.findall(r"\bout/[\w./-]+\.(?:so|o|h|npy)\b", line)
            continue
        argv = shlex.split(line, comments=True)
        if not argv:
            continue
        tool = {"build/kiln": kiln, "python3": sys.executable, "mkdir": "mkdir"}.get(argv[0])
        if tool is None:
            raise Failure(f"quick start command this test does not know: {line}")
        argv = [tool] + [os.path.join(models, a[len("models/"):]) if a.startswith("models/") else a
                         for a in argv[1:]]
        proc = run(argv, cwd=tmp, timeout=600)
        if proc.returncode != 0:
            raise Failure(f"`{line}` failed: {describe_failure(proc)}")
        print(f"ok: {line}")
    missing = [p for p in promised if not os.path.exists(os.path.join(tmp, p))]
    if missing:
        raise Failure(f"the quick start says it writes {missing}, which do not exist")
    return promised


def c_program(snippet):
    """The snippet as a program: #include lines first, the rest inside main()."""
    includes = [ln for ln in snippet.splitlines() if ln.startswith("#include")]
    body = [ln for ln in snippet.splitlines() if ln.strip() and not ln.startswith("#include")]
    return ("#include <stdio.h>\n#include <stdlib.h>\n" + "\n".join(includes) + "\n"
            "static float image[1 << 20], logits[1 << 20]; /* the caller's buffers */\n"
            "int main(int argc, char **argv) {\n"
            "  FILE *fp = argc == 3 ? fopen(argv[1], \"rb\") : NULL;\n"  # the raw float32 image
            "  if (!fp || fread(image, 4, 3 * 224 * 224, fp) != 3 * 224 * 224) return 90;\n"
            "  fclose(fp);\n"
            "  {\n  " + "\n  ".join(body) + "\n"
            "  fp = fopen(argv[2], \"wb\");\n"
            "  if (!fp || fwrite(logits, 4, 1000, fp) != 1000 || fclose(fp)) return 91;\n"
            "  free(ws);\n"
            "  return status;\n  }\n}\n")


def check_snippet(text, tmp):
    snippet = fenced_block(text, "From C, an artifact is one call", "c")
    src = os.path.join(tmp, "readme_snippet.c")
    with open(src, "w") as f:
        f.write(c_program(snippet))
    out = os.path.join(tmp, "out")
    exe = os.path.join(tmp, "readme_snippet")
    cc = os.environ.get("CC", "cc")
    proc = run([cc, "-std=c17", "-Wall", "-Wextra", "-Werror", "-I", out, src, os.path.join(out, "resnet18.so"),
                f"-Wl,-rpath,{out}", "-lm", "-lpthread", "-o", exe])
    if proc.returncode != 0:
        raise Failure(f"the README's C snippet does not compile: {describe_failure(proc)}")
    x = np.load(os.path.join(tmp, "x.npy"))
    x.astype(np.float32).tofile(os.path.join(tmp, "x.raw"))
    proc = run([exe, os.path.join(tmp, "x.raw"), os.path.join(tmp, "logits.raw")], cwd=tmp, timeout=120)
    if proc.returncode != 0:
        raise Failure(f"the README's C snippet returned {describe_failure(proc)}")
    got = np.fromfile(os.path.join(tmp, "logits.raw"), np.float32)
    want = np.load(os.path.join(out, "res", "output.npy")).reshape(-1)
    err = float(np.max(np.abs(got - want)))
    if err > 1e-4 * max(1.0, float(np.max(np.abs(want)))):
        raise Failure(f"the snippet's logits differ from kiln run's by {err}")
    print(f"ok: the C snippet compiles, runs and matches kiln run (max diff {err:.3g})")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", default=default_kiln())
    ap.add_argument("--readme", default=os.path.join(REPO, "README.md"))
    ap.add_argument("--models", default=os.path.join(REPO, "models"))
    ap.add_argument("--keep", default=None, help="work in this folder and keep it")
    args = ap.parse_args(argv)
    with open(args.readme) as f:
        text = f.read()
    with TempDir(args.keep, prefix="kiln-readme-") as tmp:
        try:
            run_commands(fenced_block(text, "## Quick start", "sh"), os.path.abspath(args.kiln),
                         os.path.abspath(args.models), tmp)
            check_snippet(text, tmp)
        except Failure as e:
            print(f"FAIL: {e}")
            return 1
    print("PASS readme quick start")
    return 0


if __name__ == "__main__":
    sys.exit(main())
