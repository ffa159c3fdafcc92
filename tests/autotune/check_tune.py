#!/usr/bin/env python3
"""check_tune.py — `kiln tune` and `kiln compile --tuning-log` through the CLI.

    check_tune.py --kiln KILN --models DIR [--case NAME]

Cases (small budgets, tiny models):
  records     one JSON record per measured candidate with every field; planted
              crashing, wrong and hanging candidates are recorded as crash /
              wrong / timeout and the session goes on
  resume      the same command again measures nothing; a bigger budget measures
              only the difference; no candidate is measured twice
  interrupt   SIGINT mid-session: exit 130, every line whole; a re-run finishes
              the budget without repeating a candidate
  corrupt     a corrupt line is skipped with a warning naming its line number
  other       records for another target are ignored with one notice line
  numerics    the artifact compiled with the log computes what the default one
              computes, and both match ONNX Runtime
  budget      --time-budget ends a session with a huge trial budget in time
  earlystop   a small --early-stop window ends the session before its budget;
              --no-early-stop spends the whole budget
  progress    off a terminal: progress lines every --progress-interval, in the
              documented format, the last one at the budget; on a terminal
              (a pty): one line refreshed with \\r
  random      --search random: records, resume, no repeats
  convalgo    the session measures both algorithms of a 3x3 conv (direct and
              Winograd kernels in one log); compile picks per conv by the
              records' times (a log doctored either way flips the choice)
              and the artifact still matches ONNX Runtime
  modelcheck  model records decide compile's choice; tune's count of tuned
              kernels is compile's
  noise       a candidate and a model check timed under planted load are
              noisy: status noisy, counted, warned about, ignored by compile;
              with --keep-noisy: ok records marked "noisy"
  explain     compile -v names what the log gave each kernel; a log of another
              model is a warning without -v
  upgrade     a version-1 log (tests/autotune/data/resnet18_v1.jsonl, N*1 in its
              keys) applies to resnet18 as it is, and after --upgrade-log to
              the batch-1 export too; only versions and keys change; a second
              upgrade changes nothing

Every session but the noise case's runs with --keep-noisy: they check what the
tuner does, and the machine running the tests is rarely idle.
"""
import argparse
import json
import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
from common import TempDir, compare, fixed_batch, make_inputs, model_inputs, ort_reference, run  # noqa: E402

FIELDS = {"v", "kiln", "target", "key", "trace", "seconds", "status", "default", "cache", "time"}


def records(path, complete_only=False):
    """The log's records. complete_only (polling a log being written): a
    last line without its newline is still being appended and is skipped."""
    out = []
    with open(path) as f:
        for line in f:
            if complete_only and not line.endswith("\n"):
                break
            if line.strip():
                out.append(json.loads(line))
    return out


def check_records(recs):
    seen = set()
    for r in recs:
        assert FIELDS <= set(r), f"record lacks {FIELDS - set(r)}: {r}"
        assert r["v"] == 2 and r["status"] in ("ok", "wrong", "crash", "timeout", "invalid", "noisy"), r
        assert "-mattr=" in r["target"], r["target"]
        assert isinstance(r["trace"], list) and any(p["p"] == "reorder" for p in r["trace"]), r["trace"]
        if r["status"] == "ok":
            assert r["seconds"] > 0, r
        ident = (r["key"], json.dumps(r["trace"], sort_keys=True))
        if r.get("confirm") or r["cache"] == "model":  # timed again at the end: a candidate measured before
            assert ident in seen, f"a confirm or model record of a schedule never measured: {ident}"
            continue
        assert ident not in seen, f"candidate measured twice: {ident}"
        seen.add(ident)


def tune(kiln, model, log, trials, *extra, check=True, keep_noisy=True):
    noisy = ["--keep-noisy"] if keep_noisy else []
    proc = run([kiln, "tune", model, "--log", log, "--trials", str(trials), *noisy, *extra])
    if check and proc.returncode != 0:
        raise AssertionError(f"kiln tune failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def searched(r):
    """A record of the search (neither timed again by the confirm phase nor in the model)."""
    return not r.get("confirm") and r["cache"] != "model"


def n_tuned(recs):
    return sum(1 for r in recs if not r["default"] and searched(r))


def case_records(a, tmp):
    log = os.path.join(tmp, "t.jsonl")
    model = os.path.join(a.models, "tiny_mlp.onnx")
    # 6 s, not less: under ASan the planted crash's report (its stack
    # symbolized) can take seconds on a loaded host, and was recorded as a timeout
    proc = tune(a.kiln, model, log, 8, "--plant-faults", "crash,wrong,hang", "--run-timeout", "6")
    recs = records(log)
    check_records(recs)
    assert sum(1 for r in recs if r["default"] and searched(r)) == 3, "one default record per task (3 tasks)"
    assert n_tuned(recs) == 8, f"{n_tuned(recs)} records for 8 trials"
    statuses = [r["status"] for r in recs if not r["default"] and searched(r)]
    for s in ("crash", "wrong", "timeout"):
        assert s in statuses, f"no '{s}' record: {statuses}"
    assert "trials 8/8" in proc.stderr, proc.stderr[-2000:]
    assert "tasks 3" in proc.stderr and "ETA" in proc.stderr and "elapsed" in proc.stderr


def case_resume(a, tmp):
    log = os.path.join(tmp, "t.jsonl")
    model = os.path.join(a.models, "tiny_mlp.onnx")
    tune(a.kiln, model, log, 6)
    first = records(log)
    tune(a.kiln, model, log, 6)
    assert n_tuned(records(log)) == n_tuned(first), "a re-run with the same budget measured again"
    tune(a.kiln, model, log, 10)
    recs = records(log)
    check_records(recs)
    assert n_tuned(recs) == 10, f"{n_tuned(recs)} records after resuming to 10 trials"


def case_interrupt(a, tmp):
    log = os.path.join(tmp, "t.jsonl")
    model = os.path.join(a.models, "tiny_cnn.onnx")
    p = subprocess.Popen([a.kiln, "tune", model, "--log", log, "--trials", "30", "--keep-noisy"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and p.poll() is None:
        if os.path.exists(log) and n_tuned(records(log, complete_only=True)) >= 3:
            break
        time.sleep(0.05)
    assert p.poll() is None, "the session ended before it could be interrupted"
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, f"exit {p.returncode} after SIGINT:\n{err[-2000:]}"
    assert "interrupted" in err, err[-2000:]
    with open(log) as f:
        text = f.read()
    assert text.endswith("\n"), "a partial last line"
    part = records(log)
    check_records(part)
    assert 3 <= n_tuned(part) < 30
    tune(a.kiln, model, log, 30)
    recs = records(log)
    check_records(recs)
    assert n_tuned(recs) == 30, f"{n_tuned(recs)} records after the resumed session"


def case_confirm(a, tmp):
    """The last phase times each task's best and default again, in turns,
    twice each (--confirm 2, the default); --confirm 0 skips it."""
    model = os.path.join(a.models, "tiny_cnn.onnx")
    # the log keeps 6 digits: where two schedules are that close, either may be the search's best
    close = lambda a, b: abs(a - b) <= 2e-6 * max(a, b)  # noqa: E731
    # whether any task's search beats its default is up to the timings: a
    # session where none does has nothing to confirm, so up to three seeds
    for seed in ("3", "4", "5"):
        log = os.path.join(tmp, f"t{seed}.jsonl")
        proc = tune(a.kiln, model, log, 12, "--seed", seed, "--model-check", "0")
        recs = records(log)
        check_records(recs)
        ok = [r for r in recs if r["status"] == "ok" and not r.get("confirm")]
        defaults = {r["key"]: json.dumps(r["trace"]) for r in recs if r["default"] and not r.get("confirm")}
        conf = [r for r in recs if r.get("confirm")]
        must, may = set(), set()  # keys that must be confirmed / may be (a near tie with the default)
        for key, dflt in defaults.items():
            mine = sorted((r for r in ok if r["key"] == key), key=lambda r: r["seconds"])
            dsec = next(r["seconds"] for r in mine if json.dumps(r["trace"]) == dflt)
            if json.dumps(mine[0]["trace"]) != dflt:
                (may if close(mine[0]["seconds"], dsec) else must).add(key)
        if must:
            break
        assert {r["key"] for r in conf} <= may, f"seed {seed}: no task beat its default, yet {conf}"
    assert must, "no task beat its default in three sessions: nothing to confirm"
    got = {r["key"] for r in conf}
    assert must <= got <= must | may, f"confirmed {got}, want the tasks with a new best {must} (ties {may})"
    by_default = 0
    for key in got:
        mine = [r for r in conf if r["key"] == key]
        assert [r["default"] for r in mine] == [True, False, True, False], f"{key}: not in turns: {mine}"
        best = min((r for r in ok if r["key"] == key and not r["default"]), key=lambda r: r["seconds"])
        assert all(json.dumps(r["trace"]) == defaults[key] for r in mine if r["default"]), mine
        assert all(close(best["seconds"], next(o["seconds"] for o in ok if o["key"] == key and
                                                o["trace"] == r["trace"])) for r in mine if not r["default"]), \
            f"{key}: the confirmed schedule is not the search's best"
        by_default += min(mine, key=lambda r: r["seconds"])["default"]
    m = re.search(r"(\d+) tasks confirmed \((\d+) by their default", proc.stderr)
    assert m and int(m.group(1)) == len(got), proc.stderr[-2000:]
    if len({r["seconds"] for r in conf}) == len(conf):  # no tie among the confirm timings
        assert int(m.group(2)) == by_default, f"{m.group(0)}: {by_default} by their default in the log"
    log0 = os.path.join(tmp, "t0.jsonl")
    tune(a.kiln, model, log0, 12, "--seed", "3", "--confirm", "0", "--model-check", "0")
    assert not any(r.get("confirm") for r in records(log0)), "--confirm 0 wrote confirm records"


def case_corrupt(a, tmp):
    log = os.path.join(tmp, "t.jsonl")
    model = os.path.join(a.models, "tiny_mlp.onnx")
    tune(a.kiln, model, log, 2)
    n = len(records(log))
    with open(log, "a") as f:
        f.write('{"v":1,"target":"x", "key": \n')
    proc = tune(a.kiln, model, log, 4)
    assert f"t.jsonl:{n + 1}: " in proc.stderr and "warning" in proc.stderr, proc.stderr[-2000:]
    with open(log) as f:
        lines = [l for l in f if l.strip()]
    good = [json.loads(l) for i, l in enumerate(lines) if i != n]
    check_records(good)
    assert n_tuned(good) == 4
    out = os.path.join(tmp, "m.so")
    proc = run([a.kiln, "compile", model, "-o", out, "--tuning-log", log])
    assert proc.returncode == 0 and f":{n + 1}: " in proc.stderr, proc.stderr


def case_other(a, tmp):
    log = os.path.join(tmp, "t.jsonl")
    model = os.path.join(a.models, "tiny_mlp.onnx")
    tune(a.kiln, model, log, 3)
    recs = records(log)
    with open(log, "a") as f:
        for r in recs:
            r = dict(r, target="x86_64-unknown-linux-gnu -mcpu=imaginary -mattr=+magic", seconds=1e-9)
            f.write(json.dumps(r) + "\n")
    out = os.path.join(tmp, "m.so")
    proc = run([a.kiln, "compile", model, "-o", out, "--tuning-log", log, "-v"])
    assert proc.returncode == 0, proc.stderr
    notes = [l for l in proc.stderr.splitlines() if "note" in l]
    assert len(notes) == 1 and "other targets" in notes[0] and f"{len(recs)} records" in notes[0], proc.stderr
    # a log with only foreign records: every kernel keeps its default
    only = os.path.join(tmp, "other.jsonl")
    with open(only, "w") as f:
        for r in recs:
            f.write(json.dumps(dict(r, target="aarch64-linux-gnu -mcpu=cortex-a76 -mattr=+neon")) + "\n")
    proc = run([a.kiln, "compile", model, "-o", out, "--tuning-log", only, "-v"])
    assert proc.returncode == 0 and "0 of 3 kernels use tuned schedules" in proc.stderr, proc.stderr


def kiln_best(recs, key):
    """The record kn_at_log_best picks among records timed one way: the fastest
    confirm record where those cover two schedules, else the fastest other one."""
    ok = [r for r in recs if r["key"] == key and r["status"] == "ok"]
    conf = [r for r in ok if r.get("confirm")]
    if len({json.dumps(r["trace"]) for r in conf}) >= 2:
        return min(conf, key=lambda r: r["seconds"])
    rest = [r for r in ok if not r.get("confirm")]
    return min(rest, key=lambda r: r["seconds"]) if rest else None


def case_cache(a, tmp):
    """--cache cold writes "cache":"cold" records; a warm session (the default) on the same log
    ignores them with one note and measures its own; compile prefers the cold record of a key
    and takes a warm one only for keys without; a bad "cache" value is a skipped line."""
    log = os.path.join(tmp, "t.jsonl")
    model = os.path.join(a.models, "tiny_mlp.onnx")
    tune(a.kiln, model, log, 2, "--cache", "cold", "--model-check", "0")
    cold = records(log)
    check_records(cold)
    assert cold and all(r["cache"] == "cold" for r in cold), cold
    proc = tune(a.kiln, model, log, 2, "--model-check", "0")
    notes = [l for l in proc.stderr.splitlines() if "note" in l]
    assert len(notes) == 1 and f"{len(cold)} records timed with cold caches ignored" in notes[0], proc.stderr
    warm = records(log)[len(cold):]
    check_records(warm)
    assert warm and all(r["cache"] == "warm" for r in warm), warm
    # warm records made the fastest by far, each with a schedule other than its key's best cold
    # one: compile must still take the cold records, as every key has one
    best_cold = {key: kiln_best(cold, key) for key in {r["key"] for r in cold}}
    fake = [dict(r, seconds=1e-12) for r in warm if r["status"] == "ok" and not r.get("confirm")
            and best_cold.get(r["key"]) and r["trace"] != best_cold[r["key"]]["trace"]]
    assert fake, "no warm record with another schedule than the best cold one"
    with open(log, "a") as f:
        for r in fake:
            f.write(json.dumps(r) + "\n")
        f.write(json.dumps(dict(cold[0], cache="lukewarm")) + "\n")
    out = os.path.join(tmp, "m.so")
    proc = run([a.kiln, "compile", model, "-o", out, "--tuning-log", log, "-v"])
    assert proc.returncode == 0, proc.stderr
    assert "none of \"cold\", \"warm\", \"model\"" in proc.stderr, proc.stderr
    # the tuned artifact uses the cold records' schedules: replay them alone and compare the kernels
    only_cold = os.path.join(tmp, "cold.jsonl")
    with open(only_cold, "w") as f:
        for r in cold:
            f.write(json.dumps(r) + "\n")
    out2 = os.path.join(tmp, "c.so")
    proc2 = run([a.kiln, "compile", model, "-o", out2, "--tuning-log", only_cold, "-v", "--dump-after=te"])
    proc1 = run([a.kiln, "compile", model, "-o", out, "--tuning-log", log, "-v", "--dump-after=te"])
    assert proc1.returncode == 0 and proc2.returncode == 0, proc1.stderr + proc2.stderr
    assert proc1.stdout == proc2.stdout, "a warm record won over a cold one"
    # the comparison can tell: the fake warm records alone give other kernels
    only_fake = os.path.join(tmp, "fake.jsonl")
    with open(only_fake, "w") as f:
        for r in fake:
            f.write(json.dumps(r) + "\n")
    proc3 = run([a.kiln, "compile", model, "-o", out2, "--tuning-log", only_fake, "-v", "--dump-after=te"])
    assert proc3.returncode == 0 and proc3.stdout != proc2.stdout, proc3.stderr


def run_artifact(a, so, feeds, tmp, tag):
    outdir = os.path.join(tmp, tag)
    os.makedirs(outdir, exist_ok=True)
    cmd = [a.kiln, "run", so, "--output-dir", outdir, "--threads", "2"]
    for name, arr in feeds.items():
        path = os.path.join(tmp, f"in_{name}.npy")
        np.save(path, arr)
        cmd += ["--input", f"{name}={path}"]
    proc = run(cmd)
    assert proc.returncode == 0, proc.stderr
    return {f[:-4]: np.load(os.path.join(outdir, f)) for f in os.listdir(outdir)}


def case_numerics(a, tmp):
    for name, trials in (("tiny_cnn.onnx", 40), ("tiny_bert.onnx", 25)):
        model = os.path.join(a.models, name)
        log = os.path.join(tmp, name + ".jsonl")
        tune(a.kiln, model, log, trials)
        tuned, dflt = os.path.join(tmp, "tuned.so"), os.path.join(tmp, "default.so")
        proc = run([a.kiln, "compile", model, "-o", tuned, "--tuning-log", log, "-v"])
        assert proc.returncode == 0, proc.stderr
        assert run([a.kiln, "compile", model, "-o", dflt]).returncode == 0
        feeds = make_inputs(model_inputs(model), batch=1, seed=3)
        want = ort_reference(model, feeds)
        got_t = run_artifact(a, tuned, feeds, tmp, "t")
        got_d = run_artifact(a, dflt, feeds, tmp, "d")
        for out, ref in want.items():
            key = "".join(c if c.isalnum() or c in "._-" else "_" for c in out)
            for tag, got in (("tuned", got_t), ("default", got_d)):
                ok, err, tol, why = compare(got[key], ref)
                assert ok, f"{name} {tag} output {out}: error {err} > {tol} {why}"
            ok, err, tol, why = compare(got_t[key], got_d[key])
            assert ok, f"{name}: tuned vs default output {out}: error {err} > {tol} {why}"
        print(f"{name}: {proc.stderr.strip().splitlines()[0]}")


CHOICE = re.compile(r"kiln: tuning log: (\d+) convs by measurement \((\d+) Winograd F\(2x2,3x3\), (\d+) F\(4x4,3x3\), "
                    r"(\d+) direct\), (\d+) by the rule")


def conv_way(key):
    """Which way of computing a 3x3 conv a record's kernel belongs to: "winograd" (F(2x2, 3x3)),
    "winograd4" (F(4x4, 3x3): its transforms carry tile=4, its GEMM has 36 tile positions) or
    "direct" (any other kernel)."""
    if key.startswith(("kiln.WinogradInput", "kiln.WinogradOutput")):
        return "winograd4" if "tile=4" in key.split("}")[0] else "winograd"  # the attributes
    if key.startswith("MatMul("):
        dims = key.split("[")[1].split(",")
        return {"16": "winograd", "36": "winograd4"}.get(dims[1], "direct")
    return "direct"


def case_convalgo(a, tmp):
    model = os.path.join(a.models, "tiny_cnn.onnx")
    log = os.path.join(tmp, "t.jsonl")
    tune(a.kiln, model, log, 12)
    recs = records(log)
    keys = {r["key"].split("(")[0].split("{")[0] for r in recs}
    for op in ("kiln.ConvNHWC", "kiln.WinogradInput", "kiln.WinogradOutput", "MatMul"):
        assert op in keys, f"no {op} record: the session did not measure both algorithms ({sorted(keys)})"
    feeds = make_inputs(model_inputs(model), batch=1, seed=5)
    want = ort_reference(model, feeds)
    ways = {conv_way(r["key"]) for r in recs if r["status"] == "ok"}
    assert ways == {"direct", "winograd", "winograd4"}, f"the session did not measure the three ways: {ways}"
    # tiny_cnn's two 3x3 convs: (convs by measurement, F(2x2), F(4x4), direct)
    for favour, expect in (("winograd", (2, 2, 0, 0)), ("winograd4", (2, 0, 2, 0)), ("direct", (2, 0, 0, 2))):
        doctored = os.path.join(tmp, f"{favour}.jsonl")
        with open(doctored, "w") as f:
            for r in recs:
                if r["status"] == "ok" and conv_way(r["key"]) == favour:
                    r = dict(r, seconds=1e-9)
                f.write(json.dumps(r) + "\n")
        so = os.path.join(tmp, f"{favour}.so")
        proc = run([a.kiln, "compile", model, "-o", so, "--tuning-log", doctored, "-v"])
        assert proc.returncode == 0, proc.stderr
        m = CHOICE.search(proc.stderr)
        assert m, proc.stderr
        assert tuple(int(x) for x in m.groups()[:4]) == expect, f"favouring {favour}: {m.group(0)}"
        got = run_artifact(a, so, feeds, tmp, favour)
        for out, ref in want.items():
            key = "".join(c if c.isalnum() or c in "._-" else "_" for c in out)
            ok, err, tol, why = compare(got[key], ref)
            assert ok, f"{favour}: output {out}: error {err} > {tol} {why}"
    # --conv-algo direct: no choice by the log
    proc = run([a.kiln, "compile", model, "-o", os.path.join(tmp, "d.so"), "--tuning-log", log, "-v",
                "--conv-algo", "direct"])
    assert proc.returncode == 0 and not CHOICE.search(proc.stderr), proc.stderr


PROGRESS = re.compile(r"kiln tune: trials (\d+)/(\d+)  tasks (\d+)  best ([\d.]+) ms \(default ([\d.]+) ms, "
                      r"([\d.]+)x\)(?:  noisy timings \d+)?  elapsed (\d+) s  ETA (\d+) s")


def case_budget(a, tmp):
    log = os.path.join(tmp, "t.jsonl")
    model = os.path.join(a.models, "tiny_mlp.onnx")
    t0 = time.time()
    proc = tune(a.kiln, model, log, 100000, "--time-budget", "6", "--no-early-stop", "--confirm", "0")
    took = time.time() - t0
    # the budget is checked before every build batch and every run: at most
    # one batch of builds (and the model load) past it
    assert took < 6 + 25, f"--time-budget 6 took {took:.1f} s"
    assert "time budget reached" in proc.stderr, proc.stderr[-2000:]
    recs = records(log)
    check_records(recs)
    assert n_tuned(recs) < 100000, "the whole budget in 6 s"


def case_earlystop(a, tmp):
    log = os.path.join(tmp, "t.jsonl")
    model = os.path.join(a.models, "tiny_mlp.onnx")
    proc = tune(a.kiln, model, log, 400, "--early-stop", "3")
    assert "early stop" in proc.stderr, proc.stderr[-2000:]
    n = n_tuned(records(log))
    assert 3 <= n < 400, f"{n} trials with --early-stop 3"
    log2 = os.path.join(tmp, "t2.jsonl")
    proc = tune(a.kiln, model, log2, 12, "--early-stop", "1", "--no-early-stop")
    assert "early stop" not in proc.stderr, proc.stderr[-2000:]
    assert n_tuned(records(log2)) == 12


def case_progress(a, tmp):
    log = os.path.join(tmp, "t.jsonl")
    model = os.path.join(a.models, "tiny_cnn.onnx")
    proc = tune(a.kiln, model, log, 16, "--progress-interval", "0.3", "--no-early-stop")
    lines = [l for l in proc.stderr.splitlines() if l.startswith("kiln tune: trials")]
    assert len(lines) >= 2 and "\r" not in proc.stderr, proc.stderr[-2000:]
    for l in lines:
        m = PROGRESS.fullmatch(l)
        assert m, f"progress line not in the documented format: {l!r}"
        # tiny_cnn: 8 kernels in 8 tasks (conv1 padded), and the 6 Winograd kernels of its two 3x3
        # convs as F(2x2, 3x3) and 6 more as F(4x4, 3x3) (the alternatives of --conv-algo auto)
        assert int(m.group(2)) == 16 and int(m.group(3)) == 20, l
    assert PROGRESS.fullmatch(lines[-1]).group(1) == "16", lines[-1]
    # on a terminal: one line refreshed in place
    log2 = os.path.join(tmp, "t2.jsonl")
    master, slave = pty.openpty()
    p = subprocess.Popen([a.kiln, "tune", model, "--log", log2, "--trials", "6", "--keep-noisy"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    p.wait(timeout=120)
    os.close(master)
    text = out.decode(errors="replace")
    assert p.returncode == 0, text[-2000:]
    assert text.count("\r") >= 3, text[-2000:]
    refreshed = [s for s in text.split("\r") if s.startswith("kiln tune: trials")]
    assert refreshed and all(PROGRESS.match(s) for s in refreshed), text[-2000:]


def case_random(a, tmp):
    log = os.path.join(tmp, "t.jsonl")
    model = os.path.join(a.models, "tiny_mlp.onnx")
    tune(a.kiln, model, log, 5, "--search", "random")
    first = records(log)
    tune(a.kiln, model, log, 5, "--search", "random")
    assert n_tuned(records(log)) == n_tuned(first), "a re-run with the same budget measured again"
    tune(a.kiln, model, log, 9, "--search", "random")
    recs = records(log)
    check_records(recs)
    assert n_tuned(recs) == 9, f"{n_tuned(recs)} records after resuming to 9 trials"


def case_modelcheck(a, tmp):
    """The model check (--model-check R, on by default) runs the model with every kernel at its
    default, at its best schedule timed alone and at two runners-up, and appends per task with a
    schedule other than its default one "cache":"model" record per schedule it ran, the default's
    first; compile takes the fastest over any other record of the key. Made-up model times make
    each key's default, its best alone and its first other schedule the fastest in turn, and the
    compiled kernels follow; --model-check 0 writes none."""
    log = os.path.join(tmp, "t.jsonl")
    model = os.path.join(a.models, "tiny_cnn.onnx")
    # Winograd: its transforms' defaults lose to the search's finds alone (in 16 trials, every run
    # seen); with direct convs no tuned schedule of tiny_cnn beat its default, nothing to check
    algo = ("--conv-algo", "winograd")
    proc = tune(a.kiln, model, log, 16, *algo, "--model-check", "3")
    recs = records(log)
    check_records(recs)
    line = next((l for l in proc.stderr.splitlines() if "fastest in the model" in l), None)
    assert line, proc.stderr[-2000:]
    m = re.search(r"(\d+) tasks, fastest in the model: (\d+) their default, (\d+) their best alone, "
                  r"(\d+) a runner-up", line)
    assert m, line
    model_recs = [r for r in recs if r["cache"] == "model"]
    keys = {r["key"] for r in model_recs}
    assert len(keys) == int(m.group(1)) == sum(int(m.group(k)) for k in (2, 3, 4)), (line, keys)
    defaults = {r["key"]: r["trace"] for r in recs if r["default"] and searched(r)}
    first_tuned = {}
    for key in keys:
        mine = [r for r in model_recs if r["key"] == key]
        assert 2 <= len(mine) <= 4 and mine[0]["default"] and mine[0]["trace"] == defaults[key], mine
        assert all(r["default"] == (r["trace"] == defaults[key]) for r in mine), mine
        assert any(not r["default"] for r in mine), mine
        assert all(r["status"] == "ok" and r["seconds"] > 0 for r in mine), mine
        # the schedule compile takes without model records: the best timed alone, which the
        # check ran (perhaps the default itself, when runners-up were what differed)
        alone = kiln_best([r for r in recs if r["cache"] != "model"], key)
        assert any(r["trace"] == alone["trace"] for r in mine), (alone, mine)
        first_tuned[key] = json.dumps(alone["trace"])
    assert keys, f"no task with a tuned schedule in the model: {line}"
    # what tune says compile will make of the log is what compile says
    said = re.search(r"with this log, (\d+) of (\d+) kernels use tuned schedules", proc.stderr)
    assert said, proc.stderr[-2000:]
    p = run([a.kiln, "compile", model, "-o", os.path.join(tmp, "c.so"), "--tuning-log", log, "-v", *algo])
    got = re.search(r"tuning log: (\d+) of (\d+) kernels use tuned schedules", p.stderr)
    assert p.returncode == 0 and got and got.groups() == said.groups(), (said.group(0), p.stderr)

    def te(path):
        logarg = ["--tuning-log", path] if path else []
        p = run([a.kiln, "compile", model, "-o", os.path.join(tmp, "m.so"), *logarg, "-v",
                 "--dump-after=te", *algo])
        assert p.returncode == 0, p.stderr
        return p.stdout, p.stderr

    searched_only = os.path.join(tmp, "s.jsonl")
    with open(searched_only, "w") as f:
        for r in recs:
            if searched(r) or r.get("confirm"):
                f.write(json.dumps(r) + "\n")
    tuned_te, _ = te(searched_only)
    default_te, _ = te(None)
    # each key's first non-default schedule among its model records: the best alone or a
    # runner-up; either way not the default, so making it the fastest must change the kernels
    first_other = {key: json.dumps(next(r["trace"] for r in model_recs if r["key"] == key and not r["default"]))
                   for key in keys}
    # the model record made the fastest: each key's default, its best alone (which may be the
    # default itself, when runners-up were what differed), or its first non-default schedule
    for winner in ("default", "alone", "other"):
        planted = os.path.join(tmp, f"p_{winner}.jsonl")
        with open(planted, "w") as f:
            for r in recs:
                if r["cache"] == "model":
                    trace = json.dumps(r["trace"])
                    win = {"default": r["default"], "alone": trace == first_tuned[r["key"]],
                           "other": trace == first_other[r["key"]]}[winner]
                    r = dict(r, seconds=1e-3 if win else 2e-3)
                f.write(json.dumps(r) + "\n")
        out, err = te(planted)
        if winner == "default":
            # every key with model records runs its default, so every kernel does: the keys with a
            # tuned schedule in the model are all there are
            assert out == default_te, "model records where the default is faster left tuned kernels"
            assert re.search(r" 0 of \d+ kernels use tuned schedules", err), err
        elif winner == "alone":
            assert out == tuned_te, "model records where the best alone is faster changed the kernels"
        else:
            assert out != default_te, "model records where another schedule is faster changed nothing"
            assert re.search(r" [1-9]\d* of \d+ kernels use tuned schedules", err), err

    log0 = os.path.join(tmp, "t0.jsonl")
    tune(a.kiln, model, log0, 4, *algo, "--model-check", "0")
    assert not any(r["cache"] == "model" for r in records(log0)), "--model-check 0 wrote model records"


def case_noise(a, tmp):
    log = os.path.join(tmp, "n.jsonl")
    model = os.path.join(a.models, "tiny_mlp.onnx")
    proc = tune(a.kiln, model, log, 2, "--plant-faults", "busy,busy-check", "--model-check", "1", keep_noisy=False)
    recs = records(log)
    check_records(recs)
    timed = [r for r in recs if not r["default"] and searched(r) and r["status"] not in ("invalid", "crash")]
    assert timed, recs
    planted = timed[0]
    # on failure, what the machine says of its scheduler statistics and CPUs, and what kiln said
    machine = f"cpus {os.cpu_count()}, affinity {len(os.sched_getaffinity(0))}, schedstat " + \
        open("/proc/self/schedstat").read().strip() if os.path.exists("/proc/self/schedstat") else "none"
    assert planted["status"] == "noisy" and planted["seconds"] > 0 and "noisy" not in planted, \
        (planted, machine, proc.stderr[-1500:])
    summary = re.search(r"(\d+) noisy\), ", proc.stderr)
    assert summary and int(summary.group(1)) >= 1, proc.stderr[-2000:]
    assert re.search(r"warning: tune: [1-9]\d* of \d+ timings were noisy", proc.stderr), proc.stderr[-2000:]
    assert "model check: other processes took the CPUs" in proc.stderr, proc.stderr[-2000:]
    assert not any(r["cache"] == "model" for r in recs), "a noisy model check wrote records"

    # compile ignores a noisy record however fast; the same record as ok is taken
    def tuned_count(status):
        doctored = os.path.join(tmp, f"d_{status}.jsonl")
        with open(doctored, "w") as f:
            for r in recs:
                if r["default"] and searched(r) and r["status"] == "ok":
                    f.write(json.dumps(r) + "\n")
            f.write(json.dumps(dict(planted, status=status, seconds=1e-12)) + "\n")
        p = run([a.kiln, "compile", model, "-o", os.path.join(tmp, "d.so"), "--tuning-log", doctored, "-v"])
        m = re.search(r"tuning log: (\d+) of \d+ kernels use tuned schedules", p.stderr)
        assert p.returncode == 0 and m, p.stderr
        return int(m.group(1))
    assert tuned_count("noisy") == 0 and tuned_count("ok") == 1

    log2 = os.path.join(tmp, "k.jsonl")
    # --keep-noisy takes 5 samples without hunting for clean ones, so one planted timing can
    # come out clean (about 1 in 6 on a loaded 2-core VM); three planted, one must be noisy
    proc = tune(a.kiln, model, log2, 3, "--plant-faults", "busy,busy,busy,busy-check", "--model-check", "1")
    recs = records(log2)
    timed = [r for r in recs if not r["default"] and searched(r) and r["status"] not in ("invalid", "crash")]
    assert all(r["status"] == "ok" for r in timed[:3]), timed[:3]
    assert any(r.get("noisy") is True for r in timed[:3]), timed[:3]
    model_recs = [r for r in recs if r["cache"] == "model"]
    assert all(r["noisy"] is True for r in model_recs), model_recs
    assert "--keep-noisy" in proc.stderr, proc.stderr[-2000:]
    assert "warning: tuning log" not in proc.stderr, "the model check's own compiles warned about the log"
    # the planted load died with whoever planted it: no process still runs with these logs'
    # paths on its command line (a spinner is a fork of kiln and shows kiln's arguments)
    left = subprocess.run(["pgrep", "-f", tmp], capture_output=True, text=True).stdout.split()
    assert not left, f"processes left spinning: {left}"


def case_upgrade(a, tmp):
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "resnet18_v1.jsonl")
    model = os.path.join(a.models, "resnet18.onnx")
    b1 = os.path.join(tmp, "resnet18_b1.onnx")  # the same export with the batch fixed to 1
    fixed_batch(model, b1)
    with open(data) as f:
        old = [json.loads(line) for line in f]
    target = old[0]["target"]
    assert all(r["v"] == 1 for r in old) and any("#" in r["key"] for r in old), \
        "the fixture: a version-1 log of resnet18 with hashed keys"

    def kernels(mdl, log):
        """(tuned, default as the log's best) of compile -v, for the log's own target (compile only)."""
        p = run([a.kiln, "compile", mdl, "-o", os.path.join(tmp, "r.o"), "--target", target, "--tuning-log", log,
                 "-v"])
        m = re.search(r"tuning log: (\d+) of (\d+) kernels use tuned schedules \((\d+) run their default", p.stderr)
        assert p.returncode == 0 and m, p.stderr[-2000:]
        return int(m.group(1)) + int(m.group(3)), int(m.group(2))

    log = os.path.join(tmp, "r18.jsonl")
    shutil.copy(data, log)
    os.chmod(log, 0o644)
    before_sym, n = kernels(model, log)
    before_b1, _ = kernels(b1, log)
    # read as it is: the symbolic model adopts every key; at batch 1 the hashed ones name no kernel
    assert before_sym == n and before_b1 < n, (before_sym, before_b1, n)
    p = run([a.kiln, "tune", model, "--log", log, "--upgrade-log"])
    m = re.search(r"(\d+) records rewritten in format 2 \((\d+) hashed keys renamed by this model's kernels\), "
                  r"(\d+) already in it, (\d+) of format 1 left", p.stderr)
    assert p.returncode == 0 and m, p.stderr
    assert (int(m.group(1)), int(m.group(3)), int(m.group(4))) == (len(old), 0, 0), p.stderr
    assert int(m.group(2)) == sum("#" in r["key"] for r in old), p.stderr
    assert os.stat(log).st_mode & 0o777 == 0o644, "the upgrade changed the log's mode"
    with open(log) as f:
        new = [json.loads(line) for line in f]
    assert len(new) == len(old) and all(r["v"] == 2 and "N*" not in r["key"] for r in new), new[:2]
    strip = lambda r: {k: v for k, v in r.items() if k not in ("v", "key")}  # noqa: E731
    assert [strip(r) for r in new] == [strip(r) for r in old], "the upgrade changed more than versions and keys"
    assert all(o["key"].replace("N*", "") == r["key"] for o, r in zip(old, new) if "#" not in o["key"]), \
        "a short key is its version-1 text without N*"
    assert kernels(model, log) == (before_sym, n) and kernels(b1, log) == (n, n), "the upgraded log applies alike"
    # a second upgrade changes nothing; a missing log is one line and exit 1
    with open(log, "rb") as f:
        once = f.read()
    p = run([a.kiln, "tune", model, "--log", log, "--upgrade-log"])
    assert p.returncode == 0 and f"0 records rewritten in format 2" in p.stderr and f"{len(old)} already" in p.stderr, \
        p.stderr
    with open(log, "rb") as f:
        assert f.read() == once
    missing = os.path.join(tmp, "none.jsonl")
    p = run([a.kiln, "tune", model, "--log", missing, "--upgrade-log"])
    assert p.returncode == 1 and p.stderr.strip().count("\n") == 0 and "none.jsonl" in p.stderr, p.stderr
    assert not os.path.exists(missing) and not [f for f in os.listdir(tmp) if ".upgrade." in f], os.listdir(tmp)


def case_explain(a, tmp):
    log = os.path.join(tmp, "e.jsonl")
    cnn, mlp = os.path.join(a.models, "tiny_cnn.onnx"), os.path.join(a.models, "tiny_mlp.onnx")
    tune(a.kiln, cnn, log, 4, "--model-check", "0")
    p = run([a.kiln, "compile", cnn, "-o", os.path.join(tmp, "c.so"), "--tuning-log", log, "-v"])
    assert p.returncode == 0, p.stderr
    lines = re.findall(r"kiln: tuning log: (model_k\d+): (tuned|default)[^;]*; (.+)", p.stderr)
    total = re.search(r"tuning log: (\d+) of (\d+) kernels use tuned schedules", p.stderr)
    assert total and len(lines) == int(total.group(2)), p.stderr
    assert sum(1 for _, what, _ in lines if what == "tuned") == int(total.group(1)), p.stderr
    keys = {r["key"] for r in records(log)}
    assert all(key in keys for _, what, key in lines if what == "tuned"), p.stderr
    # a log of another model: said without -v; the model's own log: nothing said
    p = run([a.kiln, "compile", mlp, "-o", os.path.join(tmp, "m.so"), "--tuning-log", log])
    assert p.returncode == 0 and re.search(r"warning: tuning log '.*': none of its \d+ records for this target "
                                           r"is of a kernel of this model", p.stderr), p.stderr
    p = run([a.kiln, "compile", cnn, "-o", os.path.join(tmp, "c.so"), "--tuning-log", log])
    assert p.returncode == 0 and "warning" not in p.stderr, p.stderr


CASES = {"records": case_records, "resume": case_resume, "interrupt": case_interrupt, "corrupt": case_corrupt,
         "other": case_other, "numerics": case_numerics, "budget": case_budget, "earlystop": case_earlystop,
         "progress": case_progress, "random": case_random, "cache": case_cache,
         "convalgo": case_convalgo, "confirm": case_confirm, "modelcheck": case_modelcheck,
         "noise": case_noise, "explain": case_explain, "upgrade": case_upgrade}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--case", choices=sorted(CASES), action="append")
    a = ap.parse_args()
    failed = 0
    for name in a.case or CASES:
        t0 = time.time()
        with TempDir(prefix="kiln-tune-test-") as tmp:
            try:
                CASES[name](a, tmp)
                print(f"PASS {name} ({time.time() - t0:.1f} s)")
            except AssertionError as e:
                failed += 1
                print(f"FAIL {name}: {e}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
