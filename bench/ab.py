#!/usr/bin/env python3
"""Interleaved A/B timing of Kiln artifacts on one input: every call of each
artifact alternates with the others', so that a slow phase of a shared
machine falls on all of them. Identical artifacts show the noise.

    python3 bench/ab.py THREADS a.so b.so [...] INPUT.npy CALLS

prints, per artifact, the median and the minimum over CALLS calls (after 5
untimed ones). The artifacts must take one input of INPUT's shape."""
import statistics
import sys
import time

import numpy as np

from kiln_artifact import Artifact


def main(argv):
    if len(argv) < 5:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    threads, paths, x, calls = int(argv[1]), argv[2:-2], np.load(argv[-2]), int(argv[-1])
    fns = [Artifact(p).prepare(x, threads=threads)[0] for p in paths]
    for fn in fns:
        for _ in range(5):
            fn()
    times = [[] for _ in fns]
    for _ in range(calls):
        for fn, ts in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    for p, ts in zip(paths, times):
        print(f"{p}: median {statistics.median(ts) * 1e3:.3f} ms  min {min(ts) * 1e3:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
