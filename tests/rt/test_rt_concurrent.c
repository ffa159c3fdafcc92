/* test_rt_concurrent.c — P_run and P_run_profiled of one real artifact
 * (tiny_cnn, compiled by the kiln binary) called from several threads at
 * once, each caller with its own workspace, inputs and outputs.
 *
 *   test_rt_concurrent KILN MODEL.onnx
 *
 * docs/abi.md ("Threads and thread safety") allows such calls: the runtime
 * serialises them on the artifact's one pool. So every output of the
 * concurrent phase must equal, bit for bit, the output of a serial run of
 * the same input at the same batch and pool size. A race on the runtime's
 * shared state (two runs publishing steps to the one pool) shows as a wrong
 * output or a hang (ctest's timeout). Inputs differ per caller and per case,
 * and the batch varies over 1..max_batch, so consecutive runs use different
 * prefixes of their workspaces and any leak of one run into another's
 * outputs differs from the reference. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "rt/loader.h"

enum {
  CALLERS = 4,   /* threads calling the artifact at once */
  CASES = 3,     /* distinct inputs per caller */
  ROUNDS = 200,  /* runs per caller and pool size */
  SYNC_EVERY = 4, /* rounds between two barriers of all callers */
  MAX_BATCH = 4, /* --max-batch of the artifact */
  MAX_POOL = 3,  /* pool sizes 1 .. MAX_POOL */
  MAX_IO = 8,
};

/* The command line (the kiln binary and the model) and the test's temporary folder. */
typedef struct paths {
  const char *kiln, *model;
  char dir[64];
} paths;

/* One input set of one caller: its batch, inputs, and the serial run's outputs. */
typedef struct io_case {
  int64_t batch;
  void *in[MAX_IO];
  void *ref[MAX_IO];
} io_case;

typedef struct caller {
  const kiln_artifact *a;
  pthread_barrier_t *start;
  int id;
  bool profiled; /* calls P_run_profiled instead of P_run */
  void *ws;
  void *out[MAX_IO];
  io_case cases[CASES];
  kiln_prof_event *events;
  int64_t capacity;
  int failures;
  char first_failure[256];
} caller;

static int run_cmd(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run_cmd(const char *fmt, ...) {
  char cmd[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  return system(cmd);
}

/* Deterministic floats in [-1, 1) from a 64-bit LCG. */
static void fill_floats(float *x, int64_t n, uint64_t seed) {
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (int64_t i = 0; i < n; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (float)((double)(s >> 40) / (double)(1ull << 23)) - 1.0f;
  }
}

/* One call, through P_run or P_run_profiled; the status. */
static int call(caller *c, const void *const *in, void *const *out, int64_t batch) {
  if (!c->profiled) return c->a->run(in, out, c->ws, batch);
  int64_t n_events = 0;
  return c->a->run_profiled(in, out, c->ws, batch, c->events, c->capacity, &n_events);
}

static void *caller_main(void *arg) {
  caller *c = arg;
  const kiln_artifact *a = c->a;
  for (int r = 0; r < ROUNDS; r++) {
    if (r % SYNC_EVERY == 0) pthread_barrier_wait(c->start); /* the callers start together again */
    const io_case *k = &c->cases[(r + c->id) % CASES];
    for (int o = 0; o < a->n_outputs; o++) /* no stale output can pass */
      memset(c->out[o], 0xa5, (size_t)kn_loader_bytes(&a->outputs[o], MAX_BATCH));
    int status = call(c, (const void *const *)k->in, c->out, k->batch);
    for (int o = 0; o < a->n_outputs; o++) {
      size_t bytes = (size_t)kn_loader_bytes(&a->outputs[o], k->batch);
      if (status == KILN_OK && !memcmp(c->out[o], k->ref[o], bytes)) continue;
      if (c->failures++ == 0)
        snprintf(c->first_failure, sizeof c->first_failure,
                 "caller %d (%s), round %d, batch %lld: status %d, output '%s' differs from the serial run",
                 c->id, c->profiled ? "P_run_profiled" : "P_run", r, (long long)k->batch, status,
                 a->outputs[o].name);
      break;
    }
  }
  return NULL;
}

/* Allocates the callers' buffers and inputs (distinct per caller and case). */
static void callers_init(caller *cs, const kiln_artifact *a, pthread_barrier_t *start) {
  kn_diag d;
  kn_diag_init(&d);
  for (int i = 0; i < CALLERS; i++) {
    caller *c = &cs[i];
    *c = (caller){.a = a, .start = start, .id = i, .profiled = i % 2 == 1};
    c->ws = kn_loader_workspace_new(a, &d);
    assert_non_null(c->ws);
    for (int o = 0; o < a->n_outputs; o++) c->out[o] = malloc((size_t)kn_loader_bytes(&a->outputs[o], MAX_BATCH));
    c->capacity = KILN_PROF_EVENTS(a->n_steps, MAX_POOL);
    c->events = calloc((size_t)c->capacity, sizeof *c->events);
    for (int k = 0; k < CASES; k++) {
      io_case *ck = &c->cases[k];
      ck->batch = 1 + (i + 2 * k) % MAX_BATCH;
      for (int n = 0; n < a->n_inputs; n++) {
        int64_t numel = kn_loader_numel(&a->inputs[n], ck->batch);
        ck->in[n] = malloc((size_t)kn_loader_bytes(&a->inputs[n], ck->batch));
        fill_floats(ck->in[n], numel, (uint64_t)(((i * CASES + k) * MAX_IO) + n));
      }
      for (int o = 0; o < a->n_outputs; o++) ck->ref[o] = malloc((size_t)kn_loader_bytes(&a->outputs[o], ck->batch));
    }
  }
  kn_diag_free(&d);
}

static void callers_free(caller *cs, const kiln_artifact *a) {
  for (int i = 0; i < CALLERS; i++) {
    kn_loader_workspace_free(cs[i].ws);
    for (int o = 0; o < a->n_outputs; o++) free(cs[i].out[o]);
    free(cs[i].events);
    for (int k = 0; k < CASES; k++) {
      for (int n = 0; n < a->n_inputs; n++) free(cs[i].cases[k].in[n]);
      for (int o = 0; o < a->n_outputs; o++) free(cs[i].cases[k].ref[o]);
    }
  }
}

static void test_concurrent_callers(void **state) {
  paths *p = *state;
  char *dir = p->dir;
  snprintf(p->dir, sizeof p->dir, "/tmp/kn_rt_concurrent.XXXXXX");
  assert_non_null(mkdtemp(p->dir));
  int rc = run_cmd("'%s' compile '%s' -o '%s/conc.so' --max-batch %d --prefix conc", p->kiln, p->model, dir,
                   MAX_BATCH);
  assert_int_equal(rc, 0);
  char so[sizeof p->dir + 16];
  snprintf(so, sizeof so, "%s/conc.so", dir);
  kn_loader l;
  kn_diag d;
  kn_diag_init(&d);
  if (kn_loader_open(so, &l, &d)) {
    kn_diag_print(&d, "test_rt_concurrent");
    fail();
  }
  kn_diag_free(&d);
  const kiln_artifact *a = l.art;
  assert_true(a->n_inputs <= MAX_IO && a->n_outputs <= MAX_IO);
  assert_int_equal(a->max_batch, MAX_BATCH);
  for (int n = 0; n < a->n_inputs; n++) assert_int_equal(kn_loader_dtype(&a->inputs[n]), KN_DT_F32);

  pthread_barrier_t start;
  assert_int_equal(pthread_barrier_init(&start, NULL, CALLERS), 0);
  caller cs[CALLERS];
  callers_init(cs, a, &start);
  /* A pool of 1 runs everything on the caller; 2 and 3 publish the parallel steps to workers. */
  for (int pool = 1; pool <= MAX_POOL; pool++) {
    assert_int_equal(a->set_threads(pool), KILN_OK);
    for (int i = 0; i < CALLERS; i++) /* the references, one run at a time */
      for (int k = 0; k < CASES; k++)
        assert_int_equal(a->run((const void *const *)cs[i].cases[k].in, cs[i].cases[k].ref, cs[i].ws,
                                cs[i].cases[k].batch),
                         KILN_OK);
    pthread_t th[CALLERS];
    for (int i = 0; i < CALLERS; i++) assert_int_equal(pthread_create(&th[i], NULL, caller_main, &cs[i]), 0);
    int failures = 0;
    for (int i = 0; i < CALLERS; i++) {
      pthread_join(th[i], NULL);
      if (cs[i].failures)
        fprintf(stderr, "pool of %d: %d bad runs; first: %s\n", pool, cs[i].failures, cs[i].first_failure);
      failures += cs[i].failures;
      cs[i].failures = 0;
    }
    assert_int_equal(failures, 0);
  }
  callers_free(cs, a);
  pthread_barrier_destroy(&start);
  kn_loader_close(&l);
}

/* Removes the temporary folder, also after a failed assertion. */
static int remove_dir(void **state) {
  paths *p = *state;
  if (p->dir[0] && !getenv("KN_TEST_KEEP")) run_cmd("rm -rf '%s'", p->dir);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_rt_concurrent KILN MODEL.onnx\n");
    return 2;
  }
  paths p = {argv[1], argv[2], ""};
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_prestate_setup_teardown(test_concurrent_callers, NULL, remove_dir, &p),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
