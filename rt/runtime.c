/* runtime.c — the plan executor and thread pool linked into every artifact.
 *
 * Compiled at kiln build time with -fPIC -fvisibility=hidden and embedded in
 * kiln (see rt/CMakeLists.txt); only libc / libm / pthreads are used.
 *
 * Executor: validates the arguments, then runs the steps in order. Each step's
 * argument pointers are built on the stack (at most KN_RT_MAX_ARGS); a
 * parallel step is called once per task on the pool (the caller runs task 0),
 * a sequential step once with task 0 of 1. Nothing is allocated while running.
 *
 * Pool: one per artifact (the state below is hidden), created on first use or
 * by set_threads. Default size: $KILN_NUM_THREADS, else the CPUs this process
 * may run on, at most 64. A step is published by bumping `generation`;
 * workers spin for up to KN_RT_SPIN_US (1 ms; pausing, then yielding: see
 * keep_spinning), then sleep on a condition
 * variable; the caller waits for `pending` to reach zero the same way. A
 * shorter bound (64 us) let a VM's workers fall asleep inside a run after any
 * idle gap, and each wake-up of a halted virtual CPU cost more than the kernel
 * it started (docs/abi.md). $KILN_SPIN (read when the pool starts) sets the
 * bound in microseconds, or "always" keeps them spinning: no wake-up latency
 * after an idle gap, at the price of busy cores (kiln tune's cold timing sets it: a worker woken
 * after each cache sweep cost a small kernel more than the kernel did).
 * `run_lock` serialises runs and resizes, so concurrent P_run calls (with
 * distinct workspaces) are safe.
 *
 * Row pipelines (kiln_pipe, ABI 1.3): a pair of steps runs as one parallel
 * step whose task t takes a contiguous share of the second kernel's rows and
 * runs them a band at a time, each band after the first kernel's rows it
 * needs (pipe_task). Both kernels are called for a row (task = row, ntasks =
 * samples x rows) or an aligned block of rows at a time (run_rows). Profiled, the pair's two steps get the time their
 * row calls took: per task the sums, and the pair's wall time split between
 * the two whole-step events in proportion to the calling thread's sums.
 *
 * Profiling (P_run_profiled): the same executor with an event buffer from the
 * caller. The normal path pays one predictable branch per step (and per task
 * in the workers); the profiled path reads CLOCK_MONOTONIC around each step
 * and each task and writes kiln_prof_event records at indices reserved
 * before the step is published, so workers never contend for a slot. */
#include "runtime.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef KN_RT_SPIN_US
#define KN_RT_SPIN_US 1000
#endif

typedef struct pool {
  pthread_mutex_t run_lock; /* one run / resize at a time */
  pthread_mutex_t lock;     /* guards the condition variables */
  pthread_cond_t wake, done;
  int nthreads; /* including the calling thread; 0 = not started */
  int nworkers;
  pid_t pid; /* process that started the workers (a fork child has none) */
  int64_t spin_ns; /* spin this long before sleeping; -1: never sleep ($KILN_SPIN) */
  pthread_t workers[KN_RT_MAX_THREADS];
  unsigned start_generation;
  atomic_uint generation;
  atomic_int pending;
  atomic_int sleepers;
  atomic_int stop;
  /* the published step */
  kiln_kernel_fn fn;
  void *const *args;
  int64_t batch, ntasks;
  kiln_prof_event *prof; /* NULL, or where task i of the step records itself: prof[i] */
  int32_t prof_step;
} pool;

static pool the_pool = {
    .run_lock = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static inline int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spinning before sleeping, bounded in time rather than in pause
 * instructions (a pause takes ~16 ns on one x86 and ~140 cycles on another):
 * pauses for the first KN_RT_PAUSE_US, then sched_yield until the bound, so
 * that on a machine with more runnable threads than CPUs the thread being
 * waited for gets the CPU, while an idle CPU stays awake (a yield with
 * nothing else to run returns at once). The clock is read every 32 pauses. */
#define KN_RT_PAUSE_US 50
typedef struct spin_clock {
  int64_t start, until; /* until == 0: not started */
  unsigned n;
  bool yielding;
} spin_clock;

static inline bool keep_spinning(const pool *p, spin_clock *sc) {
  if (p->spin_ns < 0) {
    cpu_relax();
    return true;
  }
  if (sc->until == 0) {
    sc->start = now_ns();
    sc->until = sc->start + p->spin_ns;
  }
  if (sc->yielding) {
    if (now_ns() >= sc->until) return false;
    sched_yield();
    return true;
  }
  if ((++sc->n & 31) == 0) {
    int64_t t = now_ns();
    if (t >= sc->until) return false;
    sc->yielding = t - sc->start >= (int64_t)KN_RT_PAUSE_US * 1000;
  }
  cpu_relax();
  return true;
}

/* $KILN_SPIN: "always" (never sleep), a number of microseconds, else the
 * default KN_RT_SPIN_US. */
static int64_t spin_ns_from_env(void) {
  const char *s = getenv("KILN_SPIN");
  if (!s || !*s) return (int64_t)KN_RT_SPIN_US * 1000;
  if (!strcmp(s, "always")) return -1;
  char *end;
  long v = strtol(s, &end, 10);
  if (*end || v < 0 || v > 10000000) return (int64_t)KN_RT_SPIN_US * 1000;
  return (int64_t)v * 1000;
}

/* Runs task `task` of the published step, timing it when profiling. */
static inline void run_task(pool *p, int64_t task) {
  kiln_prof_event *ev = p->prof;
  if (!ev) {
    p->fn(p->args, p->batch, task, p->ntasks);
    return;
  }
  int64_t begin = now_ns();
  p->fn(p->args, p->batch, task, p->ntasks);
  ev[task] = (kiln_prof_event){.step = p->prof_step, .task = (int32_t)task,
                               .thread = (int32_t)task, .ntasks = (int32_t)p->ntasks,
                               .begin_ns = begin, .end_ns = now_ns()};
}

static void *worker_main(void *arg) {
  pool *p = &the_pool;
  int64_t id = (int64_t)(intptr_t)arg;
  unsigned seen = p->start_generation;
  for (;;) {
    unsigned g;
    spin_clock sc = {0};
    while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->stop)) {
      if (keep_spinning(p, &sc)) continue;
      pthread_mutex_lock(&p->lock);
      atomic_fetch_add(&p->sleepers, 1);
      while (atomic_load(&p->generation) == seen && !atomic_load(&p->stop))
        pthread_cond_wait(&p->wake, &p->lock);
      atomic_fetch_sub(&p->sleepers, 1);
      pthread_mutex_unlock(&p->lock);
    }
    if (atomic_load(&p->stop)) return NULL;
    seen = g;
    if (id < p->ntasks) run_task(p, id);
    if (atomic_fetch_sub(&p->pending, 1) == 1) {
      pthread_mutex_lock(&p->lock);
      pthread_cond_broadcast(&p->done);
      pthread_mutex_unlock(&p->lock);
    }
  }
}

/* Joins every worker. Caller holds run_lock. */
static void pool_stop(pool *p) {
  if (p->nworkers > 0 && p->pid == getpid()) {
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->nworkers; i++) pthread_join(p->workers[i], NULL);
  }
  atomic_store(&p->stop, 0);
  p->nworkers = 0;
  p->nthreads = 0;
}

/* Starts n-1 workers; returns the number of threads actually available. */
static int pool_start(pool *p, int n) {
  pthread_attr_t attr;
  bool have_attr = pthread_attr_init(&attr) == 0;
  if (have_attr) pthread_attr_setstacksize(&attr, (size_t)8 << 20);
  p->start_generation = atomic_load(&p->generation);
  p->pid = getpid();
  p->spin_ns = spin_ns_from_env();
  p->nworkers = 0;
  for (int i = 1; i < n; i++) {
    if (pthread_create(&p->workers[p->nworkers], have_attr ? &attr : NULL, worker_main,
                       (void *)(intptr_t)i) != 0)
      break;
    p->nworkers++;
  }
  if (have_attr) pthread_attr_destroy(&attr);
  p->nthreads = p->nworkers + 1;
  return p->nthreads;
}

static int default_threads(void) {
  const char *env = getenv("KILN_NUM_THREADS");
  if (env && *env) {
    char *end;
    long v = strtol(env, &end, 10);
    if (*end == 0 && v >= 1 && v <= KN_RT_MAX_THREADS) return (int)v;
  }
  int n = 0;
#ifdef CPU_COUNT
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
#endif
  if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (n <= 0) n = 1;
  return n > KN_RT_DEFAULT_THREAD_CAP ? KN_RT_DEFAULT_THREAD_CAP : n;
}

/* Runs one step on every pool thread; `prof` (NULL when not profiling) gets
 * one event per task, prof[i] for task i. */
static void run_parallel(pool *p, kiln_kernel_fn fn, void *const *args, int64_t batch,
                         kiln_prof_event *prof, int32_t step) {
  p->fn = fn;
  p->args = args;
  p->batch = batch;
  p->ntasks = p->nthreads;
  p->prof = prof;
  p->prof_step = step;
  atomic_store(&p->pending, p->nworkers);
  atomic_fetch_add(&p->generation, 1);
  if (atomic_load(&p->sleepers) > 0) {
    pthread_mutex_lock(&p->lock);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
  }
  run_task(p, 0);
  spin_clock sc = {0};
  while (atomic_load(&p->pending) != 0) {
    if (keep_spinning(p, &sc)) continue;
    pthread_mutex_lock(&p->lock);
    while (atomic_load(&p->pending) != 0) pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
  }
}

KN_RT_HIDDEN int kn_rt_set_threads(int n) {
  if (n < 1 || n > KN_RT_MAX_THREADS) return KILN_ERR_THREADS;
  pool *p = &the_pool;
  pthread_mutex_lock(&p->run_lock);
  pool_stop(p);
  int got = pool_start(p, n);
  pthread_mutex_unlock(&p->run_lock);
  return got == n ? KILN_OK : KILN_ERR_THREADS;
}

static char *arg_base(const kiln_artifact *a, const kiln_arg *arg, const void *const *inputs,
                      void *const *outputs, void *workspace) {
  switch (arg->kind) {
  case KILN_ARG_WORKSPACE: return (char *)workspace + arg->offset;
  case KILN_ARG_CONST: return (char *)a->consts[arg->index] + arg->offset;
  case KILN_ARG_INPUT: return (char *)inputs[arg->index] + arg->offset;
  case KILN_ARG_OUTPUT: return (char *)outputs[arg->index] + arg->offset;
  default: return NULL;
  }
}

/* A step's argument pointers for this call. */
static void bind_args(const kiln_artifact *a, const kiln_step *step, const void *const *inputs,
                      void *const *outputs, void *workspace, void **args) {
  for (int i = 0; i < step->n_args; i++)
    args[i] = arg_base(a, &a->args[step->first_arg + i], inputs, outputs, workspace);
}

/* Checks P_run's arguments. */
static int check_args(const kiln_artifact *a, const void *const *inputs, void *const *outputs,
                      void *workspace, int64_t batch) {
  if (!a) return KILN_ERR_ARG;
  if (batch < 1 || batch > a->max_batch) return KILN_ERR_BATCH;
  if ((a->n_inputs > 0 && !inputs) || (a->n_outputs > 0 && !outputs)) return KILN_ERR_ARG;
  for (int i = 0; i < a->n_inputs; i++)
    if (!inputs[i]) return KILN_ERR_ARG;
  for (int i = 0; i < a->n_outputs; i++)
    if (!outputs[i]) return KILN_ERR_ARG;
  if (a->workspace_size > 0) {
    if (!workspace) return KILN_ERR_ARG;
    if (a->workspace_align > 1 && (uintptr_t)workspace % (uintptr_t)a->workspace_align)
      return KILN_ERR_ARG;
  }
  for (int s = 0; s < a->n_steps; s++)
    if (a->steps[s].n_args < 0 || a->steps[s].n_args > KN_RT_MAX_ARGS) return KILN_ERR_ARG;
  if (a->abi_minor >= 3 && a->n_pipes > 0 && !a->pipes) return KILN_ERR_ARG;
  for (int i = 0; a->abi_minor >= 3 && i < a->n_pipes; i++) {
    const kiln_pipe *q = &a->pipes[i];
    if (q->first < 0 || q->first + 1 >= a->n_steps || (i > 0 && q->first <= a->pipes[i - 1].first + 1) ||
        q->rows1 < 1 || q->rows2 < 1 || q->stride < 1 || q->window < 1 || q->band < 1 ||
        !a->steps[q->first].parallel || !a->steps[q->first + 1].parallel ||
        a->steps[q->first].check || a->steps[q->first + 1].check)
      return KILN_ERR_ARG; /* a malformed descriptor */
  }
  return KILN_OK;
}

/* Takes the run lock and makes sure the pool is started (in this process). */
static pool *pool_acquire(void) {
  pool *p = &the_pool;
  pthread_mutex_lock(&p->run_lock);
  if (p->nthreads > 0 && p->pid != getpid()) pool_stop(p); /* forked child: no workers */
  if (p->nthreads == 0) pool_start(p, default_threads());
  return p;
}

/* ---- row-pipelined pairs ---- */
typedef struct pipe_run {
  const kiln_pipe *q;
  kiln_kernel_fn f1, f2;
  void *const *a1;
  void *const *a2;
  int64_t samples;
  kiln_prof_event *ev1, *ev2; /* per-task events of the two steps, or NULL */
} pipe_run;

/* Runs fn's rows [lo, hi) of `total`: a row is task r of ntasks = total, and
 * a block of 2^k rows starting at a multiple of 2^k (2^k dividing total) is
 * task r / 2^k of total / 2^k, one call. */
static void run_rows(kiln_kernel_fn fn, void *const *args, int64_t batch, int64_t lo, int64_t hi, int64_t total) {
  while (lo < hi) {
    int64_t k = 1;
    while (lo % (2 * k) == 0 && total % (2 * k) == 0 && lo + 2 * k <= hi) k *= 2;
    fn(args, batch, lo / k, total / k);
    lo += k;
  }
}

/* Task `task` of a pipe: its share of the second kernel's rows, band by
 * band, each after the first kernel's rows it needs that this task has not
 * computed yet. Rows on the border of two shares are computed by both
 * threads, storing the same values (formally a data race in C11: the
 * kernels store whole vectors of equal bits, and no reader depends on
 * which store lands last). */
static void pipe_task(void *const *args, int64_t batch, int64_t task, int64_t ntasks) {
  const pipe_run *r = (const pipe_run *)(const void *)args;
  const kiln_pipe *q = r->q;
  int64_t rows1 = q->rows1, rows2 = q->rows2, total1 = r->samples * rows1, total2 = r->samples * rows2;
  int64_t lo = task * total2 / ntasks, hi = (task + 1) * total2 / ntasks;
  int64_t sample = -1, done = 0; /* first-kernel rows [.., done) of `sample` are computed */
  int64_t begin = r->ev1 ? now_ns() : 0, spent1 = 0, spent2 = 0;
  for (int64_t a = lo; a < hi;) {
    int64_t n = a / rows2, b = a + q->band;
    if (b > hi) b = hi;
    if (b > (n + 1) * rows2) b = (n + 1) * rows2; /* a band stays in one sample */
    int64_t need_lo = (a - n * rows2) * q->stride - q->pad;
    int64_t need_hi = (b - 1 - n * rows2) * q->stride - q->pad + q->window;
    if (need_lo < 0) need_lo = 0;
    if (need_hi > rows1) need_hi = rows1;
    if (n != sample) {
      sample = n;
      done = 0;
    }
    int64_t t0 = r->ev1 ? now_ns() : 0;
    run_rows(r->f1, r->a1, batch, n * rows1 + (done > need_lo ? done : need_lo), n * rows1 + need_hi, total1);
    if (need_hi > done) done = need_hi;
    int64_t t1 = r->ev1 ? now_ns() : 0;
    run_rows(r->f2, r->a2, batch, a, b, total2);
    if (r->ev1) {
      spent1 += t1 - t0;
      spent2 += now_ns() - t1;
    }
    a = b;
  }
  if (!r->ev1) return;
  kiln_prof_event e = {.step = q->first, .task = (int32_t)task, .thread = (int32_t)task,
                       .ntasks = (int32_t)ntasks, .begin_ns = begin, .end_ns = begin + spent1};
  r->ev1[task] = e;
  e.step = q->first + 1;
  e.begin_ns = e.end_ns;
  e.end_ns += spent2;
  r->ev2[task] = e;
}

/* A pipe recomputes up to window - stride first-kernel rows at the start of
 * each thread's share: with fewer than KN_RT_PIPE_MIN_BANDS bands per
 * thread (many threads on few rows) its two steps run one after the other. */
#define KN_RT_PIPE_MIN_BANDS 4
static bool pipe_worth(const kiln_pipe *q, const pool *p, int64_t batch) {
  int64_t rows = (q->batched ? batch : 1) * (int64_t)q->rows2;
  return rows >= (int64_t)KN_RT_PIPE_MIN_BANDS * q->band * (p->nthreads > 1 ? p->nthreads : 1);
}

/* Runs pipe q (steps q->first and q->first + 1); with `events`, writes the
 * two steps' events there, as two steps would (a whole-step event each, then
 * per task when on the pool), and returns how many. */
static int64_t run_pipe(pool *p, const kiln_artifact *a, const kiln_pipe *q, void *const *args1,
                        void *const *args2, int64_t batch, kiln_prof_event *events) {
  const kiln_step *s1 = &a->steps[q->first], *s2 = &a->steps[q->first + 1];
  bool parallel = p->nthreads > 1;
  int64_t tasks = parallel ? p->nthreads : 0; /* per-task events per step */
  kiln_prof_event alone[2];
  pipe_run r = {q, s1->fn, s2->fn, args1, args2, q->batched ? batch : 1, NULL, NULL};
  if (events) {
    r.ev1 = parallel ? &events[1] : &alone[0];
    r.ev2 = parallel ? &events[2 + tasks] : &alone[1];
  }
  int64_t begin = events ? now_ns() : 0;
  if (parallel)
    run_parallel(p, pipe_task, (void *const *)(void *)&r, batch, NULL, q->first);
  else
    pipe_task((void *const *)(void *)&r, batch, 0, 1);
  if (!events) return 0;
  int64_t end = now_ns(), d1 = r.ev1[0].end_ns - r.ev1[0].begin_ns, d2 = r.ev2[0].end_ns - r.ev2[0].begin_ns;
  int64_t split = begin + (d1 + d2 > 0 ? (int64_t)((double)(end - begin) * (double)d1 / (double)(d1 + d2)) : 0);
  int32_t nt = parallel ? (int32_t)tasks : 1;
  events[0] = (kiln_prof_event){.step = q->first, .task = -1, .thread = 0, .ntasks = nt,
                                .begin_ns = begin, .end_ns = split};
  events[1 + tasks] = (kiln_prof_event){.step = q->first + 1, .task = -1, .thread = 0, .ntasks = nt,
                                        .begin_ns = split, .end_ns = end};
  return 2 * (1 + tasks);
}

/* The status a failed check step stops the run with (kiln_step.check). */
static int check_status(const kiln_step *step) {
  return step->check == KILN_CHECK_INDEX ? KILN_ERR_INDEX : KILN_ERR_VALUE;
}

/* Runs every step; with `events`, records them (the caller checked that the
 * buffer holds profile_capacity() events) and sets *n_events to the number
 * written. Returns KILN_OK, or KILN_ERR_VALUE / KILN_ERR_INDEX at the first
 * check step that computed false (the plan puts them before any step writing an output). */
static int run_steps(pool *p, const kiln_artifact *a, const void *const *inputs, void *const *outputs,
                     void *workspace, int64_t batch, kiln_prof_event *events, int64_t *n_events) {
  int64_t n = 0;
  int status = KILN_OK;
  int n_pipes = a->abi_minor >= 3 ? a->n_pipes : 0, next_pipe = 0;
  for (int s = 0; s < a->n_steps; s++) {
    const kiln_step *step = &a->steps[s];
    void *args[KN_RT_MAX_ARGS];
    bind_args(a, step, inputs, outputs, workspace, args);
    const kiln_pipe *q = next_pipe < n_pipes && a->pipes[next_pipe].first == s ? &a->pipes[next_pipe++] : NULL;
    if (q && pipe_worth(q, p, batch)) { /* else the two steps run one after the other, as below */
      void *args2[KN_RT_MAX_ARGS];
      bind_args(a, &a->steps[s + 1], inputs, outputs, workspace, args2);
      n += run_pipe(p, a, q, args, args2, batch, events ? &events[n] : NULL);
      s++;
      continue;
    }
    bool parallel = step->parallel && p->nthreads > 1;
    if (!events) {
      if (parallel)
        run_parallel(p, step->fn, args, batch, NULL, s);
      else
        step->fn(args, batch, 0, 1);
      if (a->abi_minor >= 2 && step->check && !*(const uint8_t *)args[0]) {
        status = check_status(step);
        break;
      }
      continue;
    }
    kiln_prof_event *whole = &events[n++];
    int64_t begin = now_ns();
    if (parallel) {
      run_parallel(p, step->fn, args, batch, &events[n], s);
      n += p->nthreads;
    } else {
      step->fn(args, batch, 0, 1);
    }
    *whole = (kiln_prof_event){.step = s, .task = -1, .thread = 0,
                               .ntasks = parallel ? p->nthreads : 1, .begin_ns = begin,
                               .end_ns = now_ns()};
    if (a->abi_minor >= 2 && step->check && !*(const uint8_t *)args[0]) {
      status = check_status(step);
      break;
    }
  }
  if (n_events) *n_events = n;
  return status;
}

KN_RT_HIDDEN int kn_rt_execute(const kiln_artifact *a, const void *const *inputs,
                               void *const *outputs, void *workspace, int64_t batch) {
  int status = check_args(a, inputs, outputs, workspace, batch);
  if (status != KILN_OK) return status;
  pool *p = pool_acquire();
  status = run_steps(p, a, inputs, outputs, workspace, batch, NULL, NULL);
  pthread_mutex_unlock(&p->run_lock);
  return status;
}

KN_RT_HIDDEN KN_RT_MAYBE_UNUSED int kn_rt_execute_profiled(const kiln_artifact *a,
                                                          const void *const *inputs,
                                                          void *const *outputs, void *workspace,
                                                          int64_t batch, kiln_prof_event *events,
                                                          int64_t capacity, int64_t *n_events) {
  if (!n_events) return KILN_ERR_ARG;
  *n_events = 0;
  if (!events && capacity > 0) return KILN_ERR_ARG;
  int status = check_args(a, inputs, outputs, workspace, batch);
  if (status != KILN_OK) return status;
  pool *p = pool_acquire();
  int64_t need = 0;
  for (int s = 0; s < a->n_steps; s++)
    need += 1 + (a->steps[s].parallel && p->nthreads > 1 ? p->nthreads : 0);
  if (capacity < need) { /* also the size query: events NULL, capacity 0 */
    pthread_mutex_unlock(&p->run_lock);
    *n_events = need;
    return KILN_ERR_CAPACITY;
  }
  status = run_steps(p, a, inputs, outputs, workspace, batch, events, n_events);
  p->prof = NULL;
  pthread_mutex_unlock(&p->run_lock);
  return status;
}

/* Joins the workers before the code they run is unmapped (dlclose) or the
 * process exits. Skipped if a run is in progress on another thread. */
__attribute__((destructor)) static void kn_rt_fini(void) {
  pool *p = &the_pool;
  if (pthread_mutex_trylock(&p->run_lock) != 0) return;
  pool_stop(p);
  pthread_mutex_unlock(&p->run_lock);
}
