/* measure_util.h — what both halves of a measurement share: the local one
 * (autotune/measure.c) and the one on a board (runner/measure_child.c, which
 * is built without kiln's libraries, hence header-only): deterministic random
 * inputs, the output check against the default schedule, the settle runs
 * before timing, and the ordering and median of timing samples. */
#ifndef KN_RT_MEASURE_UTIL_H
#define KN_RT_MEASURE_UTIL_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "rt/loader.h"

static inline uint64_t kn_rt_next_rand(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

/* Fills n elements with values in [-1, 1) from `seed` (floats; other dtypes 0). */
static inline void kn_rt_fill_input(void *p, kn_dtype dt, int64_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (int64_t i = 0; i < n; i++) {
    float v = (float)((kn_rt_next_rand(&x) >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
    switch (dt) {
    case KN_DT_F32: ((float *)p)[i] = v; break;
    case KN_DT_F64: ((double *)p)[i] = v; break;
    case KN_DT_F16: ((uint16_t *)p)[i] = kn_f32_to_f16(v); break;
    case KN_DT_BF16: ((uint16_t *)p)[i] = kn_f32_to_bf16(v); break;
    case KN_DT_F8E4M3FN:
    case KN_DT_F8E4M3FNUZ:
    case KN_DT_F8E5M2:
    case KN_DT_F8E8M0:
    case KN_DT_F4E2M1:
    case KN_DT_F8E5M2FNUZ: ((uint8_t *)p)[i] = kn_f32_to_f8(dt, v); break;
    default: memset(p, 0, (size_t)n * kn_dtype_size(dt)); return;
    }
  }
}

/* max|got - ref| / max(1, max|ref|) for f32/f64 (NaN and inf must match
 * exactly); other dtypes: 0 if the bytes match, else infinity. */
static inline double kn_rt_compare(const void *got, const void *ref, kn_dtype dt, int64_t n, size_t bytes) {
  if (dt != KN_DT_F32 && dt != KN_DT_F64) return memcmp(got, ref, bytes) ? INFINITY : 0;
  double max_ref = 1, max_err = 0;
  for (int64_t i = 0; i < n; i++) {
    double r = dt == KN_DT_F32 ? ((const float *)ref)[i] : ((const double *)ref)[i];
    double x = dt == KN_DT_F32 ? ((const float *)got)[i] : ((const double *)got)[i];
    if (isnan(r) || isnan(x)) {
      if (isnan(r) != isnan(x)) return INFINITY;
      continue;
    }
    if (isinf(r) || isinf(x)) {
      if (r != x) return INFINITY;
      continue;
    }
    max_ref = fmax(max_ref, fabs(r));
    max_err = fmax(max_err, fabs(r - x));
  }
  return max_err / max_ref;
}

/* Both run children time a candidate the same way around its samples:
 *  - the pool's workers spin without sleeping ($KILN_SPIN=always, set before
 *    the artifact's pool starts): a kernel inside a model starts right after
 *    the last one, while a worker that had gone to sleep between cold runs,
 *    or yielded its CPU, would charge its wake-up to the kernel;
 *  - KN_AT_SETTLE_S of untimed runs first. In a fresh process the scheduler
 *    may start the pool's threads on one CPU; until it moves one, each step
 *    waits for the other thread's turn, which costs a small kernel more
 *    than its own work; the untimed runs give the scheduler time to spread
 *    them (docs/autotune.md, "Measurement"). */
#define KN_AT_SETTLE_S 0.02

/* Runs the candidate untimed for KN_AT_SETTLE_S (at least once); returns
 * the mean seconds per run, which calibrates the repeats of a sample. */
static inline double kn_rt_settle(const kn_loader *l, const void *const *ins, void *const *outs, void *ws,
                                  int64_t batch, kn_diag *d, double (*now)(void)) {
  double start = now(), t = start;
  long runs = 0;
  do {
    kn_loader_run(l, ins, outs, ws, batch, d);
    runs++;
    t = now();
  } while (t < start + KN_AT_SETTLE_S);
  return (t - start) / (double)runs;
}

/* qsort order of timing samples. */
static inline int kn_rt_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of v[0..n) (n >= 1), sorting v in place. */
static inline double kn_rt_median(double *v, int64_t n) {
  qsort(v, (size_t)n, sizeof *v, kn_rt_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
