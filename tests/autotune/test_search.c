/* test_search.c — the learned search (autotune/search.h), without processes
 * or LLVM: the cost model learns a synthetic function and is deterministic
 * for its seed; features come out of real loop IR; the evolutionary
 * strategy proposes only valid, never repeated candidates that compute the
 * reference's values (loop-IR interpreter), and the same ones for the same
 * seed; mutation and crossover only return schedules that validate. With a
 * models folder and a tuning log (the `autotune_rank_log` test), the model trained
 * on part of a real log ranks the held-out records better than chance. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "autotune/json.h"
#include "autotune/search.h"
#include "tests/autotune/fixture.h"
#include "tools/pipeline.h"

static uint64_t rng_state = 12345;
static double unit(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

static double synthetic(const float *x) { return 2 * sin(x[0]) + x[1] * x[1] - x[2] * x[3]; }

/* the trees fit a smooth nonlinear function of 4 of 10 features */
static void test_gbt_learns(void **state) {
  (void)state;
  enum { F = 10, TRAIN = 600, TEST = 200 };
  kn_at_gbt_params p = kn_at_gbt_defaults();
  p.rounds = 150;
  kn_at_cost_model m, again, other;
  kn_at_cost_model_init(&m, F, &p);
  kn_at_cost_model_init(&again, F, &p);
  p.seed = 7;
  kn_at_cost_model_init(&other, F, &p);
  float x[F];
  for (int i = 0; i < TRAIN; i++) {
    for (int f = 0; f < F; f++) x[f] = (float)(unit() * 4 - 2);
    kn_at_cost_model_add(&m, x, synthetic(x));
    kn_at_cost_model_add(&again, x, synthetic(x));
    kn_at_cost_model_add(&other, x, synthetic(x));
  }
  kn_at_cost_model_train(&m);
  kn_at_cost_model_train(&again);
  kn_at_cost_model_train(&other);
  double se = 0, var = 0, mean = 0, ys[TEST];
  bool differs = false;
  float xs[TEST][F];
  for (int i = 0; i < TEST; i++) {
    for (int f = 0; f < F; f++) xs[i][f] = (float)(unit() * 4 - 2);
    ys[i] = synthetic(xs[i]);
    mean += ys[i] / TEST;
  }
  for (int i = 0; i < TEST; i++) {
    double pred = kn_at_cost_model_predict(&m, xs[i]);
    se += (pred - ys[i]) * (pred - ys[i]);
    var += (ys[i] - mean) * (ys[i] - mean);
    assert_true(pred == kn_at_cost_model_predict(&again, xs[i])); /* same seed, same model */
    differs |= pred != kn_at_cost_model_predict(&other, xs[i]);
  }
  double r2 = 1 - se / var;
  fprintf(stderr, "gbt: held-out R^2 %.3f\n", r2);
  assert_true(r2 > 0.8);
  assert_true(differs); /* the seed matters (row and feature samples) */
  kn_at_cost_model_free(&m);
  kn_at_cost_model_free(&again);
  kn_at_cost_model_free(&other);
}

/* ---- features of real loop IR, and the evolutionary strategy ---- */

typedef struct fake_session {
  fixture *fx;
  const kn_target *t;
  char **measured;
  int n_measured;
} fake_session;

static void kernel_features(fixture *fx, const kn_target *t, const kn_schedule *s, float *f, bool *ok) {
  kn_arena A;
  kn_arena_init(&A);
  kn_expr_ctx ec = {.arena = &A};
  kn_diag d;
  kn_diag_init(&d);
  force fc = {.grp = fx->target, .use = s};
  kn_sched_provider p = {.choose = force_choose, .ctx = &fc};
  kn_kernel_build kb;
  *ok = kn_sched_build_kernel_with(&fx->g, fx->target, t, &ec, "k", &p, &kb, NULL, NULL, &d) == 0 && !fc.rejected;
  if (*ok) kn_at_features_of_kernel(kb.kernel, 4, f);
  kn_diag_free(&d);
  kn_arena_free(&A);
}

static bool fake_measured(void *session, int task, const kn_schedule *s) {
  (void)task;
  fake_session *S = session;
  char trace[4096];
  kn_at_trace_write(s, trace, sizeof trace);
  for (int i = 0; i < S->n_measured; i++)
    if (!strcmp(S->measured[i], trace)) return true;
  return false;
}

static void fake_featurize(void *session, int task, const kn_schedule *s, int n, float *feats, bool *ok) {
  (void)task;
  fake_session *S = session;
  for (int i = 0; i < n; i++) kernel_features(S->fx, S->t, &s[i], &feats[(size_t)i * KN_AT_N_FEATURES], &ok[i]);
}

/* A made-up machine: faster with wide vectors, more accumulators and a
 * parallel loop, so the search has something to find. */
static double fake_seconds(const float *f) {
  return 1e-3 * exp(-0.8 * f[1] - 0.15 * f[20] - 0.3 * f[25] + 0.05 * f[18]);
}

/* Runs `rounds` proposals of 4 on the conv; the traces proposed, in order,
 * into *out (malloc'd, newline separated). Checks each candidate. */
static void run_evolve(uint64_t seed, int rounds, bool use_model, char **out, double *best_out) {
  fixture fx;
  setup(&fx, make_conv_small);
  force probe = {.grp = fx.target};
  assert_true(compile_run(&fx, &avx512, &probe, NULL) <= 1e-5);
  kn_arena A;
  kn_arena_init(&A);
  kn_schedule *space;
  int n_space = kn_at_space_generate(&probe.shape, &avx512, &A, &space);
  kn_at_evolve_params p = kn_at_evolve_defaults();
  p.seed = seed;
  p.use_model = use_model;
  p.pool = 32;
  kn_at_evolve *e = kn_at_evolve_new(&p);
  kn_at_strategy st = kn_at_strategy_evolve(e);
  fake_session S = {.fx = &fx, .t = &avx512};
  S.measured = calloc((size_t)rounds * 4 + 2, sizeof(char *));
  size_t len = 0;
  FILE *m = open_memstream(out, &len);
  /* the default is measured first, as in a session */
  float f[KN_AT_N_FEATURES];
  bool ok;
  kernel_features(&fx, &avx512, &probe.shape.dflt, f, &ok);
  assert_true(ok);
  double default_s = fake_seconds(f), best = default_s;
  char trace[4096];
  kn_at_trace_write(&probe.shape.dflt, trace, sizeof trace);
  S.measured[S.n_measured++] = strdup(trace);
  st.observe(st.state, 0, &probe.shape.dflt, &(kn_at_result){.status = KN_AT_OK, .seconds = default_s});
  kn_at_task_env env = {.task = 0, .shape = &probe.shape, .t = &avx512, .space = space, .n_space = n_space,
                        .default_s = default_s, .session = &S, .measured = fake_measured,
                        .featurize = fake_featurize};
  int beyond_space = 0;
  for (int r = 0; r < rounds; r++) {
    kn_schedule batch[4];
    int n = st.propose(st.state, &env, batch, 4);
    assert_true(n > 0 && n <= 4);
    for (int i = 0; i < n; i++) {
      kn_diag d;
      kn_diag_init(&d);
      assert_int_equal(kn_at_sched_validate(&batch[i], &probe.shape, &d), 0);
      kn_diag_free(&d);
      assert_false(fake_measured(&S, 0, &batch[i])); /* never twice */
      kn_at_trace_write(&batch[i], trace, sizeof trace);
      fprintf(m, "%s\n", trace);
      S.measured[S.n_measured++] = strdup(trace);
      bool in_space = false;
      for (int k = 0; k < n_space && !in_space; k++) {
        char other[4096];
        kn_at_trace_write(&space[k], other, sizeof other);
        in_space = !strcmp(other, trace);
      }
      beyond_space += !in_space;
      /* the candidate computes what the reference computes */
      force fc = {.grp = fx.target, .use = &batch[i]};
      double err = compile_run(&fx, &avx512, &fc, NULL);
      if (!(err >= 0 && err <= 1e-5)) fprintf(stderr, "wrong candidate (error %g): %s\n", err, trace);
      assert_true(err >= 0 && err <= 1e-5);
      kernel_features(&fx, &avx512, &batch[i], f, &ok);
      assert_true(ok);
      double sec = fake_seconds(f);
      if (sec < best) best = sec;
      st.observe(st.state, 0, &batch[i], &(kn_at_result){.status = KN_AT_OK, .seconds = sec});
    }
  }
  fclose(m);
  assert_true(beyond_space > 0); /* mutations leave the rule-generated space */
  *best_out = best / default_s;
  for (int i = 0; i < S.n_measured; i++) free(S.measured[i]);
  free(S.measured);
  kn_at_evolve_free(e);
  kn_arena_free(&A);
  teardown(&fx);
}

static void test_evolve(void **state) {
  (void)state;
  char *a = NULL, *b = NULL, *c = NULL;
  double best_a, best_b, best_c;
  run_evolve(3, 12, true, &a, &best_a);
  run_evolve(3, 12, true, &b, &best_b);
  assert_string_equal(a, b); /* deterministic for a seed */
  run_evolve(4, 12, true, &c, &best_c);
  assert_string_not_equal(a, c);
  fprintf(stderr, "evolve: best/default on the made-up machine %.3f (seed 3), %.3f (seed 4)\n", best_a, best_c);
  assert_true(best_a < 1.0 && best_c < 1.0);
  free(a);
  free(b);
  free(c);
}

/* mutation and crossover return only schedules that validate */
static void test_mutate_crossover(void **state) {
  (void)state;
  void (*const makes[])(kn_graph *) = {make_conv_small, make_matmul, make_softmax};
  for (int w = 0; w < 3; w++) {
    fixture fx;
    setup(&fx, makes[w]);
    force probe = {.grp = fx.target};
    assert_true(compile_run(&fx, &avx2, &probe, NULL) <= 1e-5);
    kn_arena A;
    kn_arena_init(&A);
    kn_schedule *space;
    int n = kn_at_space_generate(&probe.shape, &avx2, &A, &space);
    uint64_t rng = 99;
    int made = 0;
    for (int i = 0; i < 400; i++) {
      kn_schedule out;
      const kn_schedule *a = &space[i % n], *b = &space[(i * 7 + 3) % n];
      bool got = i % 2 ? kn_at_mutate(a, &probe.shape, &avx2, &rng, &out)
                        : kn_at_crossover(a, b, &probe.shape, &rng, &out);
      if (!got) continue;
      made++;
      kn_diag d;
      kn_diag_init(&d);
      assert_int_equal(kn_at_sched_validate(&out, &probe.shape, &d), 0);
      kn_diag_free(&d);
      if (i % 40 == 1) { /* some of them through the interpreter */
        force fc = {.grp = fx.target, .use = &out};
        double err = compile_run(&fx, &avx2, &fc, NULL);
        assert_true(err >= 0 && err <= 1e-5);
      }
    }
    assert_true(made > 100);
    kn_arena_free(&A);
    teardown(&fx);
  }
}

/* features describe the loop IR: a vectorized candidate has vector flops,
 * a parallel one a parallel loop, the flops do not depend on the schedule */
static void test_features(void **state) {
  (void)state;
  fixture fx;
  setup(&fx, make_matmul);
  force probe = {.grp = fx.target};
  assert_true(compile_run(&fx, &avx512, &probe, NULL) <= 1e-5);
  kn_arena A;
  kn_arena_init(&A);
  kn_schedule *space;
  int n = kn_at_space_generate(&probe.shape, &avx512, &A, &space);
  int vec = 0, scalar = 0, par = 0;
  float flops0 = -1;
  for (int i = 0; i < n; i++) {
    float f[KN_AT_N_FEATURES];
    bool ok;
    kernel_features(&fx, &avx512, &space[i], f, &ok);
    assert_true(ok);
    for (int k = 0; k < KN_AT_N_FEATURES; k++) assert_true(isfinite(f[k]));
    bool vectorized = false;
    for (int l = 0; l < space[i].n_loops; l++) vectorized |= space[i].loops[l].kind == KN_FOR_VECTORIZED;
    if (vectorized) vec += f[1] > 0.5f && f[13] >= 4;
    else scalar += f[13] == 1;
    par += (space[i].n_parallel > 0) == (f[25] > 0);
    /* 9 x 40 outputs x 24 FMAs x 2 (+ bias adds): the same for every schedule, within tiles recomputed */
    if (flops0 < 0) flops0 = f[0];
    if (fabsf(f[0] - flops0) >= 2.0f) {
      char trace[4096];
      kn_at_trace_write(&space[i], trace, sizeof trace);
      fprintf(stderr, "flops %g vs %g: %s\n", exp2(f[0]), exp2(flops0), trace);
    }
    assert_true(fabsf(f[0] - flops0) < 2.0f); /* overlapped tiles recompute up to ~3x */
  }
  /* the first candidate without its vectorized loops: scalar code */
  kn_schedule sc = space[0];
  for (int l = 0; l < sc.n_loops; l++)
    if (sc.loops[l].kind == KN_FOR_VECTORIZED) sc.loops[l].kind = KN_FOR_SERIAL;
  float f[KN_AT_N_FEATURES];
  bool ok;
  kernel_features(&fx, &avx512, &sc, f, &ok);
  assert_true(ok);
  scalar += f[1] == 0 && f[13] == 1;
  assert_true(vec > 0 && scalar > 0);
  assert_int_equal(par, n);
  assert_string_equal(kn_at_feature_name(0), "flops");
  kn_arena_free(&A);
  teardown(&fx);
}

int kn_test_search_run(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gbt_learns),
      cmocka_unit_test(test_features),
      cmocka_unit_test(test_mutate_crossover),
      cmocka_unit_test(test_evolve),
  };
  return cmocka_run_group_tests_name("search", tests, NULL, NULL);
}

/* ---- ranking held-out records of a real tuning log ---- */

typedef struct sample {
  int task;
  double y; /* log(default / seconds) */
  float f[KN_AT_N_FEATURES];
  bool test;
} sample;

/* Trains the model on 3/4 of the log's ok records (features from their
 * loop IR, lowered here) and counts, over pairs of held-out records of the
 * same task whose times differ by more than 10%, how often the model orders
 * them right; chance is 0.5. Returns 0 when it ranks clearly better. */
int kn_test_search_rank_log(const char *model, const char *log_path) {
  FILE *fp = fopen(log_path, "r");
  if (!fp) return fprintf(stderr, "rank-log: cannot open %s\n", log_path), 1;
  char line[8192];
  bool got = fgets(line, sizeof line, fp) != NULL;
  fclose(fp);
  if (!got) return 1;
  kn_arena A;
  kn_arena_init(&A);
  char err[128], target_s[800];
  kn_json *first = kn_json_parse(line, &A, err, sizeof err);
  const kn_json *tj = first ? kn_json_get(first, "target") : NULL;
  if (!tj || tj->kind != KN_JSON_STR) return fprintf(stderr, "rank-log: no target in the first line\n"), 1;
  snprintf(target_s, sizeof target_s, "%s", tj->str);
  kn_diag d;
  kn_diag_init(&d);
  kn_target t;
  kn_graph g;
  kn_graph_init(&g);
  kn_groups groups;
  kn_at_log tlog;
  kn_compile_opts co = {.model = model, .max_batch = 1};
  if (kn_target_parse(target_s, &t, &d) < 0 || kn_at_log_load(log_path, target_s, false, NULL, &tlog, &d) < 0 ||
      kn_pipeline_load(model, 1, &g, &d) < 0 || kn_pipeline_optimize(&co, &g, &d) < 0 ||
      kn_sched_fuse(&g, &A, &groups, &d) < 0) {
    kn_diag_print(&d, "rank-log");
    return 1;
  }
  const char **keys = KN_NEW_ARRAY(&A, const char *, groups.n);
  double *dflt = KN_NEW_ARRAY(&A, double, groups.n);
  for (int i = 0; i < groups.n; i++) keys[i] = kn_at_workload_key(&g, &groups.groups[i], &A);
  for (int r = 0; r < tlog.n; r++)
    for (int i = 0; i < groups.n; i++)
      if (tlog.records[r].is_default && tlog.records[r].status == KN_AT_OK && !strcmp(tlog.records[r].key, keys[i]))
        dflt[i] = tlog.records[r].seconds;
  sample *s = calloc((size_t)tlog.n, sizeof(sample));
  int n = 0;
  for (int r = 0; r < tlog.n; r++) {
    const kn_at_record *rec = &tlog.records[r];
    int task = -1;
    for (int i = 0; i < groups.n && task < 0; i++)
      if (!strcmp(rec->key, keys[i]) && dflt[i] > 0) task = i;
    kn_schedule sch;
    if (task < 0 || rec->status != KN_AT_OK || kn_at_trace_parse(rec->trace, &sch, &d) < 0) continue;
    fixture fx = {.target = &groups.groups[task]};
    fx.g = g; /* shares the graph: repacked weights are appended to it */
    bool ok;
    kernel_features(&fx, &t, &sch, s[n].f, &ok);
    g = fx.g;
    if (!ok) continue;
    s[n].task = task;
    s[n].y = log(dflt[task] / rec->seconds);
    s[n].test = r % 4 == 0;
    n++;
  }
  kn_at_cost_model m;
  kn_at_gbt_params gp = kn_at_gbt_defaults();
  kn_at_cost_model_init(&m, KN_AT_N_FEATURES, &gp);
  int n_train = 0;
  for (int i = 0; i < n; i++)
    if (!s[i].test) kn_at_cost_model_add(&m, s[i].f, s[i].y), n_train++;
  kn_at_cost_model_train(&m);
  double *pred = calloc((size_t)n + 1, sizeof(double));
  for (int i = 0; i < n; i++) pred[i] = kn_at_cost_model_predict(&m, s[i].f);
  int pairs = 0, right = 0;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      if (!s[i].test || !s[j].test || s[i].task != s[j].task || fabs(s[i].y - s[j].y) < 0.1) continue;
      pairs++;
      right += (pred[i] > pred[j]) == (s[i].y > s[j].y);
    }
  double acc = pairs ? (double)right / pairs : 0;
  fprintf(stderr, "rank-log: %d records (%d train), %d held-out pairs, ordered right %.3f (chance 0.5)\n", n,
          n_train, pairs, acc);
  /* the log was measured on a loaded shared machine: its times are noisy */
  int rc = pairs >= 100 && acc > 0.55 ? 0 : 1;
  free(pred);
  free(s);
  kn_at_cost_model_free(&m);
  kn_at_log_free(&tlog);
  kn_graph_free(&g);
  kn_diag_free(&d);
  kn_arena_free(&A);
  return rc;
}
