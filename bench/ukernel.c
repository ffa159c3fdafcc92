/* ukernel.c — kiln-ukernel: what a register-tiled fp32 GEMM tile can reach
 * on this core, next to the FMA peak that bench.py's "% peak" divides by.
 *
 * A hand-written AVX-512 tile, the shape of the tile Kiln's default schedule
 * gives a 1024^3 MatMul (6 rows x 64 columns: 24 accumulators, per reduction
 * step 4 vector loads of the packed weights and 6 broadcasts of the
 * activations), timed on one thread over a few memory settings:
 *   l1      weights 64 deep (16 KB) and activations contiguous: all in L1;
 *   l2      weights 1024 deep (a 256 KB packed panel, from L2) and
 *           activation rows 4 KB apart: one tile of matmul1024;
 *   alias   12 x 32, activation rows 4 KB apart: 12 lines of one L1 set
 *           per step (the set conflicts a wider row tile risks);
 *   whole   the whole 1024^3 product with the 6 x 64 tile, in the order of
 *           Kiln's default schedule: column panels outermost, every row tile
 *           (the last one clamped to rows 1018-1023) sweeping the panel, each
 *           tile storing into the 4 MB output. What the tile keeps once the
 *           activations stream from L3 and the output is written.
 * It is a measuring stick for the benchmark, never linked into kiln or an
 * artifact (whose kernels come out of the pipeline). x86-64 with AVX-512F
 * only; elsewhere it says so and exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/peak.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define TILE(MR, NV)                                                                                     \
  __attribute__((target("avx512f"), noinline)) static void tile_##MR##x##NV(                             \
      const float *a, long lda, const float *b, long k, float *c, long ldc) {                            \
    __m512 acc[MR][NV];                                                                                  \
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) _Pragma("GCC unroll 16") for (int j = 0; j < NV; j++) \
        acc[i][j] = _mm512_setzero_ps();                                                                 \
    for (long s = 0; s < k; s++) {                                                                       \
      __m512 w[NV];                                                                                      \
      _Pragma("GCC unroll 16") for (int j = 0; j < NV; j++) w[j] = _mm512_loadu_ps(b + (s * NV + j) * 16); \
      _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                                            \
        __m512 x = _mm512_set1_ps(a[i * lda + s]);                                                       \
        _Pragma("GCC unroll 16") for (int j = 0; j < NV; j++) acc[i][j] = _mm512_fmadd_ps(x, w[j], acc[i][j]); \
      }                                                                                                  \
    }                                                                                                    \
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) _Pragma("GCC unroll 16") for (int j = 0; j < NV; j++) \
        _mm512_storeu_ps(c + i * ldc + j * 16, acc[i][j]);                                               \
  }

TILE(6, 4)
TILE(12, 2)

typedef void (*tile_fn)(const float *, long, const float *, long, float *, long);

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One thing to time: C[m x n] = A[m x k] (rows lda apart) * B, with B packed
 * per panel of nv*16 columns and swept by the mr x (nv*16) tile fn in the
 * order of Kiln's default schedule: column panels outermost, then every row
 * tile, the last one clamped to the last mr rows. One tile when m = mr and
 * n = nv*16. */
typedef struct job {
  tile_fn fn;
  int mr, nv;
  long m, k, n, lda;
  float *a, *b, *c;
} job;

static void run_job(const job *j) {
  long nc = j->nv * 16;
  for (long p = 0; p < j->n / nc; p++)
    for (long t = 0; t < (j->m + j->mr - 1) / j->mr; t++) {
      long r = t * j->mr < j->m - j->mr ? t * j->mr : j->m - j->mr;
      j->fn(j->a + r * j->lda, j->lda, j->b + p * j->k * nc, j->k, j->c + r * j->n + p * nc, j->n);
    }
}

/* GFLOP/s of a job (2mnk per call), best of 8 repetitions of about
 * seconds/8 each (after a calibration of 10-20 ms); -1 when out of memory */
static double time_job(job j, double seconds) {
  long na = j.m * j.lda + 16, nb = j.k * j.n;
  j.a = aligned_alloc(64, (size_t)na * sizeof(float));
  j.b = aligned_alloc(64, (size_t)nb * sizeof(float));
  j.c = aligned_alloc(64, (size_t)(j.m * j.n) * sizeof(float));
  if (!j.a || !j.b || !j.c) {
    free(j.a), free(j.b), free(j.c);
    return -1;
  }
  for (long i = 0; i < na; i++) j.a[i] = 1e-3f * (float)(i % 7);
  for (long i = 0; i < nb; i++) j.b[i] = 1e-3f * (float)(i % 5);
  double flops = 2.0 * (double)j.m * (double)j.n * (double)j.k, best = 0, t = 0;
  long reps = 1;
  for (;; reps *= 2) { /* calibrate: the calls that take >= 10 ms */
    double t0 = now_s();
    for (long r = 0; r < reps; r++) run_job(&j);
    if ((t = now_s() - t0) >= 0.01) break;
  }
  reps = (long)((double)reps * (seconds / 8) / t) + 1; /* a repetition: seconds / 8 */
  for (int rep = 0; rep < 8; rep++) {
    double t0 = now_s();
    for (long r = 0; r < reps; r++) run_job(&j);
    double g = flops * (double)reps / (now_s() - t0) * 1e-9;
    if (g > best) best = g;
  }
  volatile float sink = j.c[0];
  (void)sink;
  free(j.a), free(j.b), free(j.c);
  return best;
}

int main(int argc, char **argv) {
  double seconds = 1.0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
      char *end;
      seconds = strtod(argv[++i], &end);
      if (*end || !(seconds >= 0.1 && seconds <= 60)) {
        fprintf(stderr, "kiln-ukernel: --seconds: want a number in [0.1, 60], got '%s'\n", argv[i]);
        return 2;
      }
    } else {
      fprintf(stderr, "usage: kiln-ukernel [--seconds S]  (one thread; S per setting, default 1)\n");
      return 2;
    }
  }
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) {
    printf("kiln-ukernel: no AVX-512F on this CPU: nothing to measure\n");
    return 0;
  }
  kn_peak_result peak;
  if (kn_peak_measure(1, seconds, &peak) < 0) {
    fprintf(stderr, "kiln-ukernel: the peak benchmark could not start a thread\n");
    return 1;
  }
  printf("fp32 FMA peak (%s, 1 thread): %.1f GFLOP/s\n", peak.isa, peak.gflops);
  static const struct {
    const char *name, *what;
    job j;
  } settings[] = {
      {"l1", "6x64, weights 64 deep, activations contiguous (all in L1)", {.fn = tile_6x4, .mr = 6, .nv = 4, .m = 6, .k = 64, .n = 64, .lda = 64}},
      {"l2", "6x64, weights 1024 deep (256 KB, L2), rows 4 KB apart (matmul1024)", {.fn = tile_6x4, .mr = 6, .nv = 4, .m = 6, .k = 1024, .n = 64, .lda = 1024}},
      {"alias", "12x32, weights 256 deep, rows 4 KB apart (one L1 set)", {.fn = tile_12x2, .mr = 12, .nv = 2, .m = 12, .k = 256, .n = 32, .lda = 1024}},
      {"whole", "6x64 over the whole 1024^3 product (Kiln's default order)", {.fn = tile_6x4, .mr = 6, .nv = 4, .m = 1024, .k = 1024, .n = 1024, .lda = 1024}},
  };
  for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
    double g = time_job(settings[i].j, seconds);
    if (g < 0) {
      fprintf(stderr, "kiln-ukernel: out of memory\n");
      return 1;
    }
    printf("%-6s %-72s %7.1f GFLOP/s  %5.1f%% of peak\n", settings[i].name, settings[i].what, g,
           100.0 * g / peak.gflops);
  }
  return 0;
}
#else
int main(void) {
  printf("kiln-ukernel: x86-64 only: nothing to measure\n");
  return 0;
}
#endif
