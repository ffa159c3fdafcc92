#!/usr/bin/env python3
"""Latency of a Kiln artifact after idle gaps, as an application that calls
a model now and then sees it: 25 timed calls per pattern, each after a sleep
and a number of untimed calls.

    python3 bench/idle.py M.so [THREADS [INPUT.npy]]

(default 2 threads, a random [1, 3, 224, 224] input). Compare the patterns
with KILN_SPIN=always (workers never sleep) to see the cost of waking them."""
import statistics
import sys
import time

import numpy as np

from kiln_artifact import Artifact

PATTERNS = [("back-to-back", 0, 0), ("sleep 0.2 s, 1 call, timed", 0.2, 1), ("sleep 0.2 s, 3 calls, timed", 0.2, 3),
            ("sleep 0.01 s, 1 call, timed", 0.01, 1), ("sleep 0.05 s, 1 call, timed", 0.05, 1),
            ("sleep 0.05 s, timed", 0.05, 0)]


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    threads = int(argv[2]) if len(argv) > 2 else 2
    x = np.load(argv[3]) if len(argv) > 3 else np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32)
    fn = Artifact(argv[1]).prepare(x, threads=threads)[0]
    for _ in range(10):
        fn()
    for name, pause, before in PATTERNS:
        ts = []
        for _ in range(25):
            if pause:
                time.sleep(pause)
            for _ in range(before):
                fn()
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        print(f"{name}: median {statistics.median(ts) * 1e3:.2f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
