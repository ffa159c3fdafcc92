#!/usr/bin/env python3
"""blas_peer.py — the vendor BLAS on the benchmark's square MatMul, for scale.

    python3 bench/blas_peer.py --n 1024 --threads 2 [--warmup 5] [--repeats 40]
                               [--rounds 8] [--json FILE]

Times C = A . B (fp32, row-major, n x n x n, A and B seeded random) through
`cblas_sgemm` of oneMKL, the `mkl` package from PyPI (`python3 -m pip install
mkl`; its libmkl_rt is found from the package's file list), with
MKL_NUM_THREADS = OMP_NUM_THREADS = threads and the GNU OpenMP threading layer,
in this process only (bench.py runs it as a subprocess, as it runs TVM). The
calls are timed by bench.py's own time_interleaved, as Kiln's and ORT's are
(`rounds` turns, each after a $BENCH_SETTLE_S pause and one untimed call). One
call's result is checked against numpy's matmul (a wrong library setup fails
loudly, not fast). Prints one line of JSON: library and version, median and
p90 in ms, GFLOP/s, max |err|.

It is not a peer in the issue's sense (not a compiler); it says what Intel's
hand-written SGEMM reaches on this machine, the yardstick for a "% of peak"
target.
"""
import argparse
import ctypes
import json
import os
import re
import sys


def find_mkl():
    """libmkl_rt from the installed `mkl` distribution, or None."""
    try:
        import importlib.metadata as md
        dist = md.distribution("mkl")
    except Exception:
        return None
    for f in dist.files or []:
        if f.name.startswith("libmkl_rt.so"):
            path = os.path.realpath(dist.locate_file(f))
            if os.path.isfile(path):
                return path
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description="Time the vendor BLAS's fp32 GEMM (oneMKL).")
    ap.add_argument("--n", type=int, default=1024, help="M = N = K (default 1024)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--json", default=None, help="write the result here too")
    args = ap.parse_args(argv)
    if args.n < 1 or args.threads < 1 or args.repeats < 1 or not 1 <= args.rounds <= args.repeats:
        ap.error("--n, --threads, --repeats must be >= 1 and --rounds in [1, --repeats]")
    lib = find_mkl()
    if lib is None:
        print("blas_peer: oneMKL not installed (python3 -m pip install mkl)", file=sys.stderr)
        return 2
    # read by MKL when it loads: set before the dlopen
    os.environ.update(MKL_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads),
                      MKL_THREADING_LAYER="GNU", MKL_DYNAMIC="FALSE")
    import numpy as np
    from bench import time_interleaved  # after MKL's settings: it imports ORT
    mkl = ctypes.CDLL(lib)
    buf = ctypes.create_string_buffer(256)
    mkl.mkl_get_version_string(buf, len(buf))
    sgemm = mkl.cblas_sgemm
    fp = ctypes.POINTER(ctypes.c_float)
    sgemm.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, fp, ctypes.c_int, fp, ctypes.c_int,
                                           ctypes.c_float, fp, ctypes.c_int]
    sgemm.restype = None
    n = args.n
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.zeros((n, n), np.float32)
    pa, pb, pc = (x.ctypes.data_as(fp) for x in (a, b, c))
    row_major, no_trans = 101, 111

    def call():
        sgemm(row_major, no_trans, no_trans, n, n, n, 1.0, pa, n, pb, n, 0.0, pc, n)

    call()
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = float(np.max(np.abs(c - ref)))
    if not err <= 1e-4 * max(1.0, float(np.max(np.abs(ref)))):
        print(f"blas_peer: cblas_sgemm differs from numpy by {err:g}", file=sys.stderr)
        return 1
    med_ms, p90_ms = time_interleaved({"blas": call}, args.warmup, args.repeats, args.rounds)["blas"]
    version = re.search(r"Version (\S+?)(-Product)?\s", buf.value.decode(errors="replace") + " ")
    out = {"library": "oneMKL " + (version.group(1) if version else "?"), "n": n,
           "threads": args.threads, "median_ms": med_ms, "p90_ms": p90_ms,
           "gflops": 2.0 * n ** 3 / med_ms * 1e-6, "max_err": err, "repeats": args.repeats}
    text = json.dumps(out)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
