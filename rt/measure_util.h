/* measure_util.h — what both halves of a measurement share: the local one
 * (autotune/measure.c) and the one on a board (runner/measure_child.c, which
 * is built without kiln's libraries, hence header-only): deterministic random
 * inputs, the output check against the default schedule, the settle runs
 * before timing, and the ordering and median of timing samples. */
#ifndef KN_RT_MEASURE_UTIL_H
#define KN_RT_MEASURE_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

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

#define KN_AT_SETTLE_RUNS 8

/* Runs the candidate untimed for KN_AT_SETTLE_S, and until KN_AT_SETTLE_RUNS
 * runs or ten times that long; returns the fastest run's seconds, which
 * calibrates the repeats of a sample. Not the mean, and not of one or two
 * runs: on a busy machine a run can lose a whole time slice of the
 * scheduler, and a calibration that holds it makes every sample a single
 * run, whose time is then mostly time slices, or a few microseconds that
 * slip between two of them and so look undisturbed. */
static inline double kn_rt_settle(const kn_loader *l, const void *const *ins, void *const *outs, void *ws,
                                  int64_t batch, kn_diag *d, double (*now)(void)) {
  double start = now(), t = start, fastest = 0;
  int runs = 0;
  do {
    double t0 = t;
    kn_loader_run(l, ins, outs, ws, batch, d);
    t = now();
    runs++;
    if (fastest == 0 || t - t0 < fastest) fastest = t - t0;
  } while (t < start + KN_AT_SETTLE_S || (runs < KN_AT_SETTLE_RUNS && t < start + 10 * KN_AT_SETTLE_S));
  return fastest;
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

/* ---- timing samples, and whether they can be trusted ----
 * A sample is disturbed when other processes took its CPUs: its threads
 * waited, runnable, for more than KN_RT_MAX_WAIT of the sample (the
 * run_delay of /proc/self/task/N/schedstat, summed over the threads), or,
 * where the kernel does not keep that, when the scheduler preempted any of
 * them (getrusage's involuntary context switches). The result is the
 * median of the undisturbed samples; up to three times the wanted number
 * are taken to find enough. It is noisy when fewer than a majority of the
 * wanted samples stayed undisturbed, or when the samples it takes the
 * median over disagree (the upper quartile over KN_RT_MAX_SPREAD times the
 * lower): such a time says more about the machine than about the kernel,
 * and the tuner must not rank schedules by it (docs/autotune.md, "Noise"). */
#define KN_RT_MAX_SAMPLES 64
#define KN_RT_MAX_SPREAD 1.5
#define KN_RT_MAX_WAIT 0.03
#define KN_RT_MAX_STRETCH 20

typedef struct kn_rt_timing {
  double seconds;   /* median per run of the samples below */
  int samples;      /* samples taken */
  int disturbed;    /* of them, disturbed */
  double spread;    /* upper over lower quartile of the samples the median is of */
  bool noisy;
} kn_rt_timing;

/* Seconds this process's threads have waited runnable, or -1 where the
 * kernel does not say: no schedstat files, or files that read zero time
 * run (a kernel without scheduler statistics prints zeros, and this very
 * thread has run). */
static inline double kn_rt_run_delay(void) {
  DIR *dir = opendir("/proc/self/task");
  if (!dir) return -1;
  double waited = 0, ran = 0;
  struct dirent *e;
  while ((e = readdir(dir))) {
    if (e->d_name[0] == '.') continue;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%.20s/schedstat", e->d_name);
    FILE *f = fopen(path, "r");
    unsigned long long run = 0, wait = 0;
    if (f && fscanf(f, "%llu %llu", &run, &wait) == 2) waited += (double)wait * 1e-9, ran += (double)run;
    if (f) fclose(f);
  }
  closedir(dir);
  return ran > 0 ? waited : -1;
}

static inline long kn_rt_preemptions(void) {
  struct rusage ru;
  return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_nivcsw : 0;
}

/* Where a sample starts, for kn_rt_disturbed: the run delay, and the
 * preemptions where the kernel keeps no run delay. */
typedef struct kn_rt_mark {
  double waited;
  long switches;
} kn_rt_mark;

static inline kn_rt_mark kn_rt_mark_now(void) {
  return (kn_rt_mark){.waited = kn_rt_run_delay(), .switches = kn_rt_preemptions()};
}

/* Whether other processes took the CPUs of a sample that began at m and
 * lasted wall seconds: its threads waited runnable for more than
 * KN_RT_MAX_WAIT of it, or, without run delays, were preempted at all. */
static inline bool kn_rt_disturbed(const kn_rt_mark *m, double wall) {
  double now = m->waited >= 0 ? kn_rt_run_delay() : -1;
  return now >= 0 ? now - m->waited > KN_RT_MAX_WAIT * wall : kn_rt_preemptions() != m->switches;
}

/* Takes samples of `reps` runs each until `want` (1..21) undisturbed ones, or
 * 3 x want in all (`hunt`; else want in all, disturbed or not); prepare(ctx), when given, runs untimed before each sample
 * (the cold cache state). With target_s > 0 a sample should last that long:
 * one that came out undisturbed but under a quarter of it is dropped and
 * reps calibrated again from it (at most 3 times), since reps calibrated
 * on a busy machine can make samples of a few microseconds that slip
 * between two time slices and look undisturbed. */
static inline void kn_rt_time(const kn_loader *l, const void *const *ins, void *const *outs, void *ws, int64_t batch,
                              kn_diag *d, double (*now)(void), long reps, double target_s, int want, bool hunt,
                              void (*prepare)(void *), void *ctx, kn_rt_timing *t) {
  double all[KN_RT_MAX_SAMPLES], clean[KN_RT_MAX_SAMPLES];
  int n = 0, n_clean = 0, recalibrated = 0;
  if (want < 1) want = 1;
  if (3 * want > KN_RT_MAX_SAMPLES) want = KN_RT_MAX_SAMPLES / 3;
  while (n_clean < want && n < (hunt ? 3 : 1) * want) {
    if (prepare) prepare(ctx);
    kn_rt_mark mark = kn_rt_mark_now();
    double start = now();
    long done = 0;
    bool cut = false;
    while (done < reps) {
      kn_loader_run(l, ins, outs, ws, batch, d);
      /* a sample 20 times longer than it should be is cut short: under
       * heavy load each run of a parallel kernel can wait a whole time
       * slice for its threads, and the reps would take minutes */
      if ((++done & 63) == 0 && target_s > 0 && now() - start > KN_RT_MAX_STRETCH * target_s) {
        cut = true;
        break;
      }
    }
    double wall = now() - start, s = wall / (double)done;
    bool disturbed = cut || kn_rt_disturbed(&mark, wall);
    if (!disturbed && target_s > 0 && wall < 0.25 * target_s && reps < 100000 && recalibrated < 3) {
      recalibrated++;
      reps = s > 0 ? (long)(target_s / s) + 1 : 100000;
      if (reps > 100000) reps = 100000;
      continue;
    }
    all[n++] = s;
    if (!disturbed) clean[n_clean++] = s;
  }
  bool enough = n_clean >= want / 2 + 1;
  double *v = enough ? clean : all;
  int m = enough ? n_clean : n;
  qsort(v, (size_t)m, sizeof *v, kn_rt_cmp_double);
  t->seconds = v[m / 2];
  t->samples = n;
  t->disturbed = n - n_clean;
  t->spread = v[m / 4] > 0 ? v[m - 1 - m / 4] / v[m / 4] : 1;
  t->noisy = !enough || t->spread > KN_RT_MAX_SPREAD;
}

/* Why a timing is noisy, in a few words, into buf. */
static inline void kn_rt_timing_why(const kn_rt_timing *t, char *buf, size_t cap) {
  if (t->disturbed > t->samples / 2)
    snprintf(buf, cap, "noisy: other processes took the CPUs in %d of its %d timing samples", t->disturbed,
             t->samples);
  else
    snprintf(buf, cap, "noisy: its timing samples disagree (quartiles %.2fx apart)", t->spread);
}

/* Planted load for tests (--plant-faults busy): two processes pinned to
 * each CPU this process may run on (at most KN_RT_MAX_BUSY, their pids into
 * pids[KN_RT_MAX_BUSY]) that spin until kn_rt_busy_stop, so that the timing
 * is preempted as on a machine shared with other work, wherever the
 * scheduler puts its threads. Returns how many started; a fork that fails
 * for want of processes is tried again, and a load planted short is said on
 * stderr, since the test that planted it would otherwise see a quiet
 * machine and not know why. */
#define KN_RT_MAX_BUSY 256
static inline int kn_rt_busy_start(pid_t *pids) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < cpus && c < CPU_SETSIZE; c++) CPU_SET((int)c, &allowed);
  }
  int n = 2 * CPU_COUNT(&allowed);
  if (n > KN_RT_MAX_BUSY) n = KN_RT_MAX_BUSY;
  int started = 0, retries = 0, err = 0;
  pid_t parent = getpid();
  for (int cpu = 0; cpu < CPU_SETSIZE && started < n && err == 0; cpu++) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    for (int k = 0; k < 2 && started < n;) {
      pid_t p = fork();
      if (p < 0) {
        if (errno != EAGAIN || ++retries > 50) {
          err = errno;
          break;
        }
        usleep(10000);
        continue;
      }
      if (p == 0) {
        /* die with the process that planted the load, even when it is killed
         * (a run child past its timeout) before kn_rt_busy_stop */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(0);
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        sched_setaffinity(0, sizeof one, &one);
        for (volatile unsigned long x = 0;; x++) {
        }
      }
      pids[started++] = p;
      k++;
    }
  }
  if (started < n)
    fprintf(stderr, "kiln: planted load: %d of %d spinning processes started: %s\n", started, n, strerror(err));
  return started;
}
static inline void kn_rt_busy_stop(const pid_t *pids, int n) {
  for (int i = 0; i < n; i++) kill(pids[i], SIGKILL);
  for (int i = 0; i < n; i++) waitpid(pids[i], NULL, 0);
}

#endif
