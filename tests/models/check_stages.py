#!/usr/bin/env python3
"""check_stages.py — the pipeline's step names are written once, in the table
of tools/pipeline.c: `kiln compile --help` prints them from it, and the docs
must name the same stages in the same order.

    check_stages.py KILN REPO

Fails when docs/cli.md's --dump-after row or docs/architecture.md's step table
lists other stages than `kiln compile --help`, and when --dump-after of every
stage does not print its '# after STAGE' header on a tiny model."""
import os
import re
import subprocess
import sys
import tempfile


def main():
    kiln, repo = sys.argv[1], sys.argv[2]
    helptext = subprocess.run([kiln, "compile", "--help"], capture_output=True, text=True).stdout
    m = re.search(r"stages: ([a-z_ ]+)", helptext)
    if not m:
        sys.exit("FAIL: kiln compile --help lists no stages")
    stages = m.group(1).split()
    cli = open(os.path.join(repo, "docs", "cli.md")).read()
    row = next(ln for ln in cli.splitlines() if ln.startswith("| `--dump-after=STAGE` |"))
    documented = re.findall(r"`([a-z_]+)`", row.split("Stages, in pipeline order:")[1])
    failed = 0
    if documented != stages:
        print(f"FAIL: docs/cli.md lists {documented}\n  kiln compile --help lists {stages}")
        failed += 1
    arch = open(os.path.join(repo, "docs", "architecture.md")).read()
    section = arch.split("## The graph passes")[1].split("## Fusion")[0]
    numbered = re.findall(r"^\d+\. \*\*([a-z_]+)\*\*", section, re.M)
    graph_stages = stages[:stages.index("outputs") + 1]
    missing = [s for s in graph_stages if f"`{s}`" not in section and s not in numbered]
    order = [s for s in numbered if s in stages], [s for s in graph_stages if s in numbered]
    if missing or order[0] != order[1]:
        print(f"FAIL: docs/architecture.md's graph passes: missing {missing}; described in the order {order[0]}, "
              f"run in the order {order[1]}")
        failed += 1
    model = os.path.join(repo, "models", "tiny_cnn.onnx")
    with tempfile.TemporaryDirectory() as tmp:
        for s in stages:
            p = subprocess.run([kiln, "compile", model, "-o", os.path.join(tmp, "m.so"), f"--dump-after={s}"],
                               capture_output=True, text=True)
            if p.returncode != 0 or f"# after {s}\n" not in p.stdout:
                print(f"FAIL: --dump-after={s}: exit {p.returncode}, no '# after {s}' line")
                failed += 1
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
