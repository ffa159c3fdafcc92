/* peak.c — fp32 FMA peak benchmark (see peak.h).
 *
 * Each thread runs a loop of KN_PEAK_CHAINS independent FMA chains on vector
 * registers: acc[i] = acc[i] * mul + add. With 12 chains and a 4-cycle FMA
 * latency two FMA ports stay busy, so the loop runs at the core's FMA
 * throughput; the values converge to add / (1 - mul) and never overflow or
 * go denormal. The ISA is chosen at run time (AVX-512F, else AVX2+FMA on
 * x86-64; NEON on aarch64; else scalar), so one binary measures any CPU of its
 * architecture. Threads start together (they spin on a start flag); the time is the wall
 * time from the start to the last thread's end; the result is the best of
 * eight short repetitions (noise, such as another process taking the core,
 * only ever slows a repetition down). */
#include "bench/peak.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

#define KN_PEAK_CHAINS 12
#define KN_PEAK_MAX_THREADS 256

typedef double (*fma_loop_fn)(int64_t iters); /* returns a checksum (keeps the work alive) */

#if defined(__x86_64__)
#define FMA_BODY(T, FMADD, SET1, ADD, LANES)                                                      \
  T mul = SET1(0.9999f), add = SET1(1e-4f);                                                        \
  T a0 = SET1(0.f), a1 = SET1(0.1f), a2 = SET1(0.2f), a3 = SET1(0.3f), a4 = SET1(0.4f),            \
    a5 = SET1(0.5f), a6 = SET1(0.6f), a7 = SET1(0.7f), a8 = SET1(0.8f), a9 = SET1(0.9f),           \
    a10 = SET1(1.f), a11 = SET1(1.1f);                                                             \
  for (int64_t i = 0; i < iters; i++) {                                                            \
    a0 = FMADD(a0, mul, add), a1 = FMADD(a1, mul, add), a2 = FMADD(a2, mul, add);                  \
    a3 = FMADD(a3, mul, add), a4 = FMADD(a4, mul, add), a5 = FMADD(a5, mul, add);                  \
    a6 = FMADD(a6, mul, add), a7 = FMADD(a7, mul, add), a8 = FMADD(a8, mul, add);                  \
    a9 = FMADD(a9, mul, add), a10 = FMADD(a10, mul, add), a11 = FMADD(a11, mul, add);              \
    __asm__ volatile("" ::: "memory");                                                             \
  }                                                                                                \
  T s = ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7)));                         \
  s = ADD(s, ADD(ADD(a8, a9), ADD(a10, a11)));                                                     \
  float lanes[LANES];                                                                              \
  memcpy(lanes, &s, sizeof lanes);                                                                 \
  double sum = 0;                                                                                  \
  for (int l = 0; l < LANES; l++) sum += lanes[l];                                                 \
  return sum;

__attribute__((target("avx512f"))) static double fma_loop_avx512(int64_t iters) {
  FMA_BODY(__m512, _mm512_fmadd_ps, _mm512_set1_ps, _mm512_add_ps, 16)
}

__attribute__((target("avx2,fma"))) static double fma_loop_avx2(int64_t iters) {
  FMA_BODY(__m256, _mm256_fmadd_ps, _mm256_set1_ps, _mm256_add_ps, 8)
}
#elif defined(__aarch64__)
static double fma_loop_neon(int64_t iters) {
  float32x4_t mul = vdupq_n_f32(0.9999f), add = vdupq_n_f32(1e-4f);
  float32x4_t a[KN_PEAK_CHAINS];
  for (int c = 0; c < KN_PEAK_CHAINS; c++) a[c] = vdupq_n_f32(0.1f * (float)c);
  for (int64_t i = 0; i < iters; i++) {
    for (int c = 0; c < KN_PEAK_CHAINS; c++) a[c] = vfmaq_f32(add, a[c], mul);
    __asm__ volatile("" ::: "memory");
  }
  double sum = 0;
  for (int c = 0; c < KN_PEAK_CHAINS; c++) sum += (double)vaddvq_f32(a[c]);
  return sum;
}
#endif

/* Portable fallback: a multiply and an add per step (2 flops, like an FMA). */
static double fma_loop_scalar(int64_t iters) {
  float a[KN_PEAK_CHAINS];
  for (int c = 0; c < KN_PEAK_CHAINS; c++) a[c] = 0.1f * (float)c;
  for (int64_t i = 0; i < iters; i++) {
    for (int c = 0; c < KN_PEAK_CHAINS; c++) a[c] = a[c] * 0.9999f + 1e-4f;
    __asm__ volatile("" ::: "memory");
  }
  double sum = 0;
  for (int c = 0; c < KN_PEAK_CHAINS; c++) sum += a[c];
  return sum;
}

static fma_loop_fn pick_loop(const char **isa, int *lanes) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    *isa = "avx512f", *lanes = 16;
    return fma_loop_avx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    *isa = "avx2+fma", *lanes = 8;
    return fma_loop_avx2;
  }
#elif defined(__aarch64__)
  *isa = "neon", *lanes = 4;
  return fma_loop_neon;
#endif
  *isa = "scalar", *lanes = 1;
  return fma_loop_scalar;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct start_line {
  atomic_int ready; /* threads waiting for `go` */
  atomic_int go;
} start_line;

typedef struct job {
  fma_loop_fn loop;
  int64_t iters;
  start_line *line;
  double checksum;
} job;

static void *thread_main(void *arg) {
  job *j = arg;
  atomic_fetch_add(&j->line->ready, 1);
  while (!atomic_load(&j->line->go)) sched_yield();
  j->checksum = j->loop(j->iters);
  return NULL;
}

/* Runs the loop on up to `threads` threads (the caller is thread 0), started
 * together; returns the wall time and in *ran how many threads ran. */
static double timed_run(fma_loop_fn loop, int64_t iters, int threads, int *ran) {
  pthread_t tids[KN_PEAK_MAX_THREADS];
  job jobs[KN_PEAK_MAX_THREADS];
  start_line line = {0};
  int n = 1;
  for (int t = 1; t < threads; t++) {
    jobs[n] = (job){.loop = loop, .iters = iters, .line = &line};
    if (pthread_create(&tids[n], NULL, thread_main, &jobs[n]) != 0) break;
    n++;
  }
  while (atomic_load(&line.ready) < n - 1) sched_yield();
  jobs[0] = (job){.loop = loop, .iters = iters, .line = &line};
  double t0 = now_s();
  atomic_store(&line.go, 1);
  jobs[0].checksum = loop(iters);
  for (int t = 1; t < n; t++) pthread_join(tids[t], NULL);
  double dt = now_s() - t0;
  *ran = n;
  volatile double sink = 0;
  for (int t = 0; t < n; t++) sink += jobs[t].checksum;
  (void)sink;
  return dt;
}

int kn_peak_measure(int threads, double seconds, kn_peak_result *out) {
  memset(out, 0, sizeof *out);
  if (threads < 1) threads = 1;
  if (threads > KN_PEAK_MAX_THREADS) threads = KN_PEAK_MAX_THREADS;
  if (seconds < 0.01) seconds = 0.01;
  int lanes, ran;
  const char *isa;
  fma_loop_fn loop = pick_loop(&isa, &lanes);
  /* calibrate on one thread: iterations per second */
  int64_t iters = 20000;
  double dt = timed_run(loop, iters, 1, &ran);
  while (dt < 0.005) {
    iters *= 4;
    dt = timed_run(loop, iters, 1, &ran);
  }
  const int reps = 8;
  int64_t timed_iters = (int64_t)((double)iters * (seconds / reps) / dt);
  if (timed_iters < 1000) timed_iters = 1000;
  double best = -1;
  for (int r = 0; r < reps; r++) {
    double t = timed_run(loop, timed_iters, threads, &ran);
    if (best < 0 || t < best) best = t;
  }
  if (ran < 1 || best <= 0) return -1;
  double flops = (double)timed_iters * KN_PEAK_CHAINS * lanes * 2.0 * ran;
  out->gflops = flops / best * 1e-9;
  out->seconds = best;
  out->threads = ran;
  out->isa = isa;
  out->lanes = lanes;
  return 0;
}
