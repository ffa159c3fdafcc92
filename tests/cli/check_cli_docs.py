#!/usr/bin/env python3
"""check_cli_docs.py — docs/cli.md describes every option of every kiln command.

    check_cli_docs.py KILN DOCS/cli.md [DOC.md=CMD ...]

The options are those `kiln CMD --help` lists, for every command `kiln --help`
lists. Fails when docs/cli.md lacks the command in its command table or a
`## \\`kiln CMD\\`` section, when an option is missing from the section's
synopsis (its first code block) or has no row of its own in the section's
option table (the row's first cell names it; of an option's short and long
names, one must be in the synopsis and both in the row), and when a row names
an option the command does not accept (an `unknown option` usage error). Each
DOC.md=CMD names another page whose first code block is a synopsis of
`kiln CMD`: it must name every option too (docs/autotune.md=tune).

Options without help text (test hooks such as `kiln tune --plant-faults`) are
not listed by --help, so they are not required; a row for one is allowed."""
import re
import subprocess
import sys

OPTION = re.compile(r"`(-{1,2}[a-z][a-z0-9-]*)")


def help_text(kiln, *args):
    p = subprocess.run([kiln, *args, "--help"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: kiln {' '.join(args)} --help: exit {p.returncode}")
    return p.stdout


def commands(kiln):
    text = help_text(kiln)
    body = text.split("commands:", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in body.splitlines() if line.strip()]


def help_options(kiln, cmd):
    """The options of one command's help, each as its names: `-o, --output PATH` gives [-o, --output]."""
    options = []
    for line in help_text(kiln, cmd).splitlines():
        m = re.match(r"  ((?:-[a-zA-Z], )?--[a-z0-9-]+)", line)
        if m:
            options.append([n.strip() for n in m.group(1).split(",")])
    return options


def section(doc, cmd):
    m = re.search(rf"^## `kiln {cmd}`\n(.*?)(?=^## |\Z)", doc, re.M | re.S)
    return m.group(1) if m else None


def rows(sec):
    """Option name -> the table row whose first cell names it."""
    out = {}
    for line in sec.splitlines():
        if line.startswith("| `-"):
            for name in OPTION.findall(line.split("|")[1]):
                out[name] = line
    return out


def accepts(kiln, cmd, name):
    p = subprocess.run([kiln, cmd, name], capture_output=True, text=True)
    return "unknown option" not in p.stderr


def main():
    kiln, path = sys.argv[1], sys.argv[2]
    doc = open(path).read()
    failed = []
    table = doc.split("| command | does |", 1)[1].split("\n\n", 1)[0] if "| command | does |" in doc else ""
    for cmd in commands(kiln):
        if f"| `{cmd}` |" not in table:
            failed.append(f"{path}: the command table lacks `{cmd}`")
        sec = section(doc, cmd)
        if sec is None:
            failed.append(f"{path}: no section '## `kiln {cmd}`'")
            continue
        synopsis = sec.split("```", 2)[1] if sec.count("```") >= 2 else ""
        documented = rows(sec)
        for names in help_options(kiln, cmd):
            for name in names:
                if name not in documented:
                    failed.append(f"{path}: kiln {cmd} {name}: no row in the options table of '## `kiln {cmd}`'")
            if not any(re.search(rf"(?<![a-z-]){re.escape(n)}(?![a-z-])", synopsis) for n in names):
                failed.append(f"{path}: kiln {cmd} {' / '.join(names)}: not in the synopsis of '## `kiln {cmd}`'")
        for name in documented:
            if not accepts(kiln, cmd, name):
                failed.append(f"{path}: kiln {cmd} {name}: documented, but kiln {cmd} does not accept it")
    for extra in sys.argv[3:]:
        page, cmd = extra.rsplit("=", 1)
        text = open(page).read()
        synopsis = text.split("```", 2)[1] if text.count("```") >= 2 else ""
        for names in help_options(kiln, cmd):
            if not any(re.search(rf"(?<![a-z-]){re.escape(n)}(?![a-z-])", synopsis) for n in names):
                failed.append(f"{page}: kiln {cmd} {' / '.join(names)}: not in its synopsis (first code block)")
    for f in failed:
        print(f"FAIL: {f}")
    if not failed:
        print(f"ok: {', '.join([path] + sys.argv[3:])}: every option of kiln {', '.join(commands(kiln))}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
