/* peak.h — the machine's fp32 FMA peak, measured (bench/peak.c).
 *
 * Used by `kiln run --profile` (fraction of peak per kernel) and by the
 * kiln-peak benchmark (bench/peak_main.c). No globals; safe to call from any
 * thread; uses libc and pthreads only. */
#ifndef KN_BENCH_PEAK_H
#define KN_BENCH_PEAK_H

typedef struct kn_peak_result {
  double gflops;      /* fp32 GFLOP/s, an FMA counted as 2 flops, all threads together */
  double seconds;     /* wall time of the timed part */
  int threads;        /* threads that ran (may be fewer than asked if one failed to start) */
  const char *isa;    /* "avx512f", "avx2+fma", "neon" or "scalar" */
  int lanes;          /* fp32 lanes per vector of that ISA */
} kn_peak_result;

/* Runs `threads` threads (1..256), each a loop of independent vector FMAs on
 * registers (no memory traffic), for about `seconds` (>= 0.01) after a short
 * calibration, and returns the best of a few repetitions. Returns 0, or -1 if
 * no thread could be started. */
int kn_peak_measure(int threads, double seconds, kn_peak_result *out);

#endif
