#!/usr/bin/env python3
"""check_runner.py — kiln-runner and `kiln tune --runner` end to end, on loopback.

    check_runner.py --kiln KILN --runner RUNNER --models DIR --src DIR
                    [--qemu [--no-sysroot]] [--target T] [--cc CC] [--other-cc CC] [--threads N]
                    [--runner-args "--loader self"]

Starts RUNNER (under qemu-aarch64 with --qemu) on 127.0.0.1 with a random
free port and a random token, then:
  tune      a short `kiln tune` session (tiny_mlp, a planted crashing
            candidate, then one timed under planted load) measured on the
            runner: every record is for --target, the defaults and candidates
            are `ok`, the planted ones `crash` and marked "noisy";
            the same command again measures nothing (resume); `kiln compile
            --tuning-log` uses the records
  token     a wrong token: `kiln tune` fails naming `auth`, a raw request gets
            `ERR auth`
  size      an upload over --max-upload gets `ERR too-large` before any byte
            of it is sent
  arch      a library for the other architecture gets `ERR arch`
  crash     a hand-made library whose run segfaults gets `ERR crash ... signal 11`
  busy      a client arriving while a (hanging) candidate runs gets `ERR busy`;
            the hanging one gets `ERR timeout`
  malformed garbage, an overlong line, bad numbers, an upload cut short, a
            silent client: each gets `ERR bad-request` (or is dropped)
after each case the runner must still answer a ping. The runner is always
killed at the end. Timings under emulation mean nothing and are not checked.
Exit 77 (skipped) when --qemu is given and qemu-aarch64, the runner or the
cross compiler is missing.
"""
import argparse
import json
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

MAX_UPLOAD = 4 << 20


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


class Runner:
    def __init__(self, cmd):
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        line = self.proc.stdout.readline() if ready else ""
        if "listening on 127.0.0.1:" not in line:
            self.stop()
            raise AssertionError(f"runner did not start: {line!r} {self.proc.stderr.read()[-2000:]}")
        self.port = int(line.split("127.0.0.1:")[1].split()[0])
        self.addr = f"127.0.0.1:{self.port}"

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        err = self.proc.stderr.read() if self.proc.stderr else ""
        return err, self.proc.returncode


def request(port, header, body=b"", timeout=120, send_body_anyway=False):
    """One raw exchange: header line, body after GO; returns (reply line, payload)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    f = None
    try:
        s.sendall(header if isinstance(header, bytes) else header.encode() + b"\n")
        f = s.makefile("rb")
        line = f.readline().decode().strip()
        if line == "GO" or send_body_anyway:
            try:
                s.sendall(body)
            except OSError:
                pass
            if line == "GO":
                line = f.readline().decode().strip()
        out = b""
        if line.startswith("OK ") and " out=" in line:
            out = f.read(int(line.split(" out=")[1].split()[0]))
        return line, out
    finally:
        if f:
            f.close()
        s.close()


def run_req(token, so, ref=b"", out=1, **kw):
    fields = " ".join(f"{k}={v}" for k, v in kw.items())
    return f"KILN-RUNNER 1 run token={token} so={len(so)} ref={len(ref)} out={out} {fields}".strip(), so + ref


def ping(r, token):
    line, _ = request(r.port, f"KILN-RUNNER 1 ping token={token}", timeout=30)
    assert line.startswith("OK arch="), line
    assert r.alive(), "runner died"
    return line


def expect_err(line, code, *words):
    assert line.startswith(f"ERR {code} "), f"want ERR {code}, got {line!r}"
    for w in words:
        assert w in line, f"{w!r} not in {line!r}"


def records(path):
    with open(path) as f:
        return [json.loads(x) for x in f if x.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--runner", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--src", required=True, help="repository root (include/, tests/runner/)")
    ap.add_argument("--qemu", action="store_true")
    ap.add_argument("--target", default=None)
    ap.add_argument("--cc", default="cc", help="compiler for libraries of the runner's architecture")
    ap.add_argument("--other-cc", default=None, help="compiler for another architecture")
    ap.add_argument("--threads", default="1", help="threads of the measured kernels in the tune case")
    ap.add_argument("--runner-args", default="", help="more runner options, e.g. '--loader self'")
    ap.add_argument("--no-sysroot", action="store_true", help="run qemu without -L (a static runner needs none)")
    a = ap.parse_args()

    cmd = [a.runner]
    if a.qemu:
        qemu = os.environ.get("KILN_QEMU_AARCH64") or shutil.which("qemu-aarch64")
        sysroot = os.environ.get("KILN_AARCH64_SYSROOT", "/usr/aarch64-linux-gnu")
        if not qemu:
            skip("qemu-aarch64 not found (apt-get install qemu-user)")
        if not os.path.exists(a.runner):
            skip(f"{a.runner} not built (needs the aarch64 cross compiler)")
        if not shutil.which(a.cc):
            skip(f"{a.cc} not found (apt-get install gcc-aarch64-linux-gnu)")
        cmd = [qemu, a.runner] if a.no_sysroot else [qemu, "-L", sysroot, a.runner]
    token = secrets.token_hex(16)
    cmd += ["--token", token, "--port", "0", "--max-upload", str(MAX_UPLOAD), "--timeout", "20", "--io-timeout", "5",
            *a.runner_args.split()]
    model = os.path.join(a.models, "tiny_mlp.onnx")
    target = ["--target", a.target] if a.target else []
    tmp = tempfile.mkdtemp(prefix="kiln-runner-test.")
    r = Runner(cmd)
    failed = False
    try:
        info = ping(r, token)
        print(f"runner {r.addr}: {info}")
        log = os.path.join(tmp, "tune.jsonl")
        base = [a.kiln, "tune", model, "--log", log, "--runner", r.addr, "--token", token, "--keep-noisy", *target,
                "--run-timeout", "20", "--threads", a.threads]

        # --- tune: records, planted crash, resume, compile with the log
        p = subprocess.run(base + ["--trials", "4", "--plant-faults", "crash,busy"], capture_output=True, text=True,
                           timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        assert f"measuring on runner {r.addr}" in p.stderr, p.stderr[-2000:]
        # the search's records; the confirm phase (--confirm, docs/autotune.md) re-times some of them
        searched = lambda: [x for x in records(log) if not x.get("confirm")]  # noqa: E731
        recs = searched()
        assert all(any(y["key"] == x["key"] and y["trace"] == x["trace"] for y in recs)
                   for x in records(log) if x.get("confirm")), "a confirm record of a schedule never measured"
        want_prefix = (a.target.split()[0] if a.target else None)
        status = [x["status"] for x in recs]
        assert sum(x["default"] for x in recs) == 3 and all(x["status"] == "ok" for x in recs if x["default"]), recs
        assert len(recs) == 3 + 4, status
        assert status.count("crash") == 1 and status.count("ok") == 6, status
        # the second candidate timed ran under planted load on the runner: its timing is noisy
        # (--keep-noisy: ok, marked), and the runner said so
        timed = [x for x in recs if not x["default"] and x["status"] != "invalid"]
        assert timed[0]["status"] == "crash" and timed[1].get("noisy") is True, timed
        for x in recs:
            if want_prefix:
                assert x["target"].startswith(want_prefix + " "), x["target"]
            if x["status"] == "ok":
                assert x["seconds"] > 0, x
        print(f"tune: {len(recs)} records ({status.count('ok')} ok, 1 planted crash, 1 planted noisy), "
              f"target {recs[0]['target'][:48]}")
        p = subprocess.run(base + ["--trials", "4"], capture_output=True, text=True, timeout=600)
        assert p.returncode == 0 and "0 candidates measured" in p.stderr and "4 from earlier sessions" in p.stderr, \
            p.stderr[-2000:]
        assert len(searched()) == 7, "resume measured again"
        so = os.path.join(tmp, "tuned.so")
        p = subprocess.run([a.kiln, "compile", model, "-o", so, "--tuning-log", log, *target], capture_output=True,
                           text=True, timeout=300)
        assert p.returncode == 0 and os.path.exists(so), p.stderr[-2000:]
        ping(r, token)
        print("tune: resume measured nothing; compile --tuning-log ok")

        # a real artifact of the runner's architecture (for the busy case)
        art = os.path.join(tmp, "m.so")
        p = subprocess.run([a.kiln, "compile", model, "-o", art, *target], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        art_bytes = open(art, "rb").read()

        # --- token
        n_lines = len(records(log))  # the failed sessions below must add none
        p = subprocess.run(base[:7] + ["--token", "not-" + token, *target, "--trials", "1"], capture_output=True,
                           text=True, timeout=120)
        assert p.returncode != 0 and "auth" in p.stderr and "wrong or missing token" in p.stderr, p.stderr
        line, _ = request(r.port, *run_req("x" + token, art_bytes))
        expect_err(line, "auth")
        line, _ = request(r.port, f"KILN-RUNNER 1 ping token={token[:-1]}")
        expect_err(line, "auth")
        env = {k: v for k, v in os.environ.items() if k != "KILN_RUNNER_TOKEN"}
        p = subprocess.run(base[:7] + [*target, "--trials", "1"], capture_output=True, text=True, timeout=120,
                           env=env)
        assert p.returncode != 0 and "needs a token" in p.stderr, p.stderr
        # the runner's architecture must be the target's
        other_target = ["--target", "x86_64-linux-gnu"] if a.qemu else ["--target", "aarch64-linux-gnu"]
        p = subprocess.run(base[:8] + [token, *other_target, "--trials", "1"], capture_output=True, text=True,
                           timeout=120)
        assert p.returncode != 0 and f"runner {r.addr} is" in p.stderr and "but the target" in p.stderr, p.stderr
        # nobody listening
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            free_port = probe.getsockname()[1]
        p = subprocess.run([a.kiln, "tune", model, "--log", log, "--runner", f"127.0.0.1:{free_port}", "--token",
                            token, *target, "--trials", "1"], capture_output=True, text=True, timeout=120)
        assert p.returncode != 0 and "cannot connect" in p.stderr, p.stderr
        assert len(records(log)) == n_lines, "a failed session wrote records"
        ping(r, token)
        print("token: rejected; no token, another architecture, nobody listening: diagnosed")

        # --- size
        line, _ = request(r.port, f"KILN-RUNNER 1 run token={token} so={MAX_UPLOAD + 1} ref=0 out=1")
        expect_err(line, "too-large", str(MAX_UPLOAD))
        line, _ = request(r.port, f"KILN-RUNNER 1 run token={token} so={MAX_UPLOAD} ref=1 out=0")
        expect_err(line, "too-large")
        ping(r, token)
        print("size: rejected")

        # --- arch and crash: hand-made libraries
        src = os.path.join(a.src, "tests", "runner", "crash_lib.c")
        inc = os.path.join(a.src, "include")

        def build_lib(cc, name):
            out = os.path.join(tmp, name)
            p = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-I", inc, src, "-o", out], capture_output=True,
                               text=True)
            assert p.returncode == 0, p.stderr
            return open(out, "rb").read()

        crash = build_lib(a.cc, "crash.so")
        if a.other_cc and shutil.which(a.other_cc):
            other = build_lib(a.other_cc, "other.so")
        else:  # an ELF header for aarch64 (or x86-64 when the runner is aarch64) is enough for the check
            machine = 62 if a.qemu else 183
            other = b"\x7fELF\x02\x01\x01" + bytes(9) + (3).to_bytes(2, "little") + machine.to_bytes(2, "little")
            other += bytes(64 - len(other)) + bytes(1024)
        line, _ = request(r.port, *run_req(token, other))
        expect_err(line, "arch", "built for")
        line, _ = request(r.port, *run_req(token, b"this is not a library" * 10))
        expect_err(line, "bad-request", "not an ELF")
        ping(r, token)
        print(f"arch: rejected ({line[:0]}{len(other)} bytes)")
        line, _ = request(r.port, *run_req(token, crash, threads=1))
        expect_err(line, "crash", "signal 11")
        ping(r, token)
        print("crash: reported, runner alive")

        # --- busy: a hanging candidate holds the runner; a second client is turned away
        result = {}

        def hang():
            result["line"], _ = request(r.port, *run_req(token, art_bytes, threads=1, fault="hang", timeout=8))

        t = threading.Thread(target=hang)
        t.start()
        time.sleep(3)  # the upload is in, the candidate hangs
        line, _ = request(r.port, f"KILN-RUNNER 1 ping token={token}")
        expect_err(line, "busy")
        line, _ = request(r.port, *run_req(token, art_bytes))
        expect_err(line, "busy")
        t.join(120)
        expect_err(result.get("line", ""), "timeout", "killed")
        ping(r, token)
        print("busy: second client turned away; the hanging candidate timed out")

        # --- malformed requests
        for header in [b"garbage\n", b"KILN-RUNNER 2 ping token=x\n", b"KILN-RUNNER 1 fly token=x\n",
                       f"KILN-RUNNER 1 run token={token} so=12abc ref=0\n".encode(),
                       f"KILN-RUNNER 1 run token={token} so=-5 ref=0\n".encode(),
                       f"KILN-RUNNER 1 run token={token} so=10 ref=0 fault=boom\n".encode(),
                       f"KILN-RUNNER 1 run token={token} ref=0\n".encode(),
                       b"KILN-RUNNER 1 ping " + b"a" * 6000 + b"\n", b"\x00\xff\n"]:
            line, _ = request(r.port, header)
            expect_err(line, "bad-request")
        # an upload cut short, then a silent client (io-timeout 5 s)
        s = socket.create_connection(("127.0.0.1", r.port), timeout=30)
        s.sendall(f"KILN-RUNNER 1 run token={token} so=100000 ref=0 out=1\n".encode())
        f = s.makefile("rb")
        assert f.readline().strip() == b"GO"
        s.sendall(art_bytes[:1000])
        f.close()
        s.close()
        time.sleep(1)
        s = socket.create_connection(("127.0.0.1", r.port), timeout=30)
        f = s.makefile("rb")
        reply = f.readline().decode()
        f.close()
        s.close()
        expect_err(reply.strip(), "bad-request", "no request line")
        ping(r, token)
        print("malformed: rejected, runner alive")
    except AssertionError as e:
        failed = True
        import traceback
        traceback.print_exc()
        print(f"FAIL: {e}")
    finally:
        err, rc = r.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if not failed and "own loader:" in err:
        failed = True
        print("FAIL: the runner's own loader refused a candidate: " + err[err.index("own loader:"):][:300])
    if not failed and rc != 0:
        failed = True
        print(f"FAIL: the runner exited with status {rc} after SIGTERM (want 0)")
    if failed:
        print("runner log (tail):\n" + err[-3000:])
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
