/* test_unroll_reduce.c — unroll_reduction (schedule.h): a depthwise conv's
 * default unrolls its kw taps (32-register targets); its space offers the
 * taps unrolled and not, and mutation and crossover change the count; every
 * candidate, and the schedule with both tap axes unrolled, computes the
 * reference's values (loop-IR interpreter); the trace round-trips; and
 * validation refuses, with its reason, what the lowering could not unroll,
 * which itself fails the kernel when handed such a schedule unvalidated. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "autotune/search.h"
#include "tests/autotune/fixture.h"
#include "schedule/schedule.h"

static void make_dw_3x3(kn_graph *g) { make_depthwise(g, 16, 7, 3, 1); }
static void make_dw_5x5_s2(kn_graph *g) { make_depthwise(g, 32, 9, 5, 2); }

static int validate(const kn_schedule *s, const force *probe) {
  kn_diag d;
  kn_diag_init(&d);
  int rc = kn_at_sched_validate(s, &probe->shape, &d);
  kn_diag_free(&d);
  return rc;
}

/* validation refuses s with a reason containing `why` */
static void refused(const kn_schedule *s, const force *probe, const char *why) {
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_at_sched_validate(s, &probe->shape, &d), -1);
  assert_int_equal(d.count, 1);
  if (!strstr(d.lines[0], why)) fprintf(stderr, "refused for '%s', expected '%s'\n", d.lines[0], why);
  assert_non_null(strstr(d.lines[0], why));
  kn_diag_free(&d);
}

static void check_depthwise(void (*make)(kn_graph *)) {
  fixture fx;
  setup(&fx, make);
  force probe = {.grp = fx.target};
  char *loops = NULL;
  assert_true(compile_run(&fx, &avx512, &probe, &loops) <= 1e-5);
  assert_true(probe.shape.hints.grouped && probe.shape.hints.n_reduce == 2);
  /* the rule: kw unrolled, kh a loop */
  assert_int_equal(probe.shape.dflt.unroll_reduce, 1);
  assert_non_null(strstr(loops, "for kh in"));
  assert_null(strstr(loops, "for kw in"));
  free(loops);

  kn_arena A;
  kn_arena_init(&A);
  kn_schedule *space;
  int n = kn_at_space_generate(&probe.shape, &avx512, &A, &space), with[2] = {0, 0};
  for (int i = 0; i < n; i++) {
    assert_true(space[i].unroll_reduce == 0 || space[i].unroll_reduce == 1);
    with[space[i].unroll_reduce]++;
    char text[4096];
    kn_schedule back = trace_roundtrip(&space[i], text, sizeof text);
    assert_int_equal(back.unroll_reduce, space[i].unroll_reduce);
    force f = {.grp = fx.target, .use = &space[i]};
    double err = compile_run(&fx, &avx512, &f, NULL);
    if (!(err >= 0 && err <= 1e-5)) fprintf(stderr, "candidate %d: error %g: %s\n", i, err, text);
    assert_true(err >= 0 && err <= 1e-5);
  }
  assert_true(with[0] > 0 && with[1] > 0);
  kn_arena_free(&A);

  /* both tap axes unrolled: no tap loop left, same values */
  kn_schedule s = probe.shape.dflt;
  s.unroll_reduce = 2;
  assert_int_equal(validate(&s, &probe), 0);
  force both = {.grp = fx.target, .use = &s};
  loops = NULL;
  assert_true(compile_run(&fx, &avx512, &both, &loops) <= 1e-5);
  assert_null(strstr(loops, "for kh in"));
  assert_null(strstr(loops, "for kw in"));
  free(loops);
  /* more axes than the reduction has: refused, the kernel keeps its default */
  s.unroll_reduce = 3;
  refused(&s, &probe, "the kernel has 2 it can unroll");
  force three = {.grp = fx.target, .use = &s};
  assert_true(compile_run(&fx, &avx512, &three, NULL) < 0);
  /* not the axis split_reduction blocks, not with vectorize_reduction */
  s = probe.shape.dflt;
  s.rsplit_factor = 2;
  s.rsplit_axis = 1;
  s.rsplit_depth = s.n_parallel;
  refused(&s, &probe, "not over the blocked axis 1");
  s = probe.shape.dflt;
  s.reduce_lanes = 16;
  refused(&s, &probe, "not with vectorize_reduction");
  /* the dump prints it */
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  kn_sched_print(&probe.shape.dflt, m);
  fclose(m);
  assert_non_null(strstr(text, "unroll_reduction(axes=1)"));
  free(text);

  /* mutation changes the count (to 0 or 2), crossover takes it from either parent */
  uint64_t rng = 7;
  bool mutated = false, crossed[2] = {false, false};
  kn_schedule rolled = probe.shape.dflt, child;
  rolled.unroll_reduce = 0;
  for (int i = 0; i < 400; i++) {
    if (kn_at_mutate(&probe.shape.dflt, &probe.shape, &avx512, &rng, &child)) {
      assert_int_equal(validate(&child, &probe), 0);
      mutated |= child.unroll_reduce != probe.shape.dflt.unroll_reduce;
    }
    if (kn_at_crossover(&rolled, &probe.shape.dflt, &probe.shape, &rng, &child)) {
      assert_int_equal(validate(&child, &probe), 0);
      crossed[child.unroll_reduce == 1] = true;
    }
  }
  assert_true(mutated && crossed[0] && crossed[1]);
  teardown(&fx);
}

static void test_depthwise(void **state) {
  (void)state;
  check_depthwise(make_dw_3x3);
  check_depthwise(make_dw_5x5_s2);
  /* 16 registers: the rule leaves the taps rolled (not measured there) */
  fixture fx;
  setup(&fx, make_dw_3x3);
  force probe = {.grp = fx.target};
  assert_true(compile_run(&fx, &avx2, &probe, NULL) <= 1e-5);
  assert_int_equal(probe.shape.dflt.unroll_reduce, 0);
  teardown(&fx);
}

/* the default of make's kernel with its innermost reduction axis unrolled
 * (and no vectorized reduction) is refused for `why` */
static void refused_on(void (*make)(kn_graph *), const char *why) {
  fixture fx;
  setup(&fx, make);
  force probe = {.grp = fx.target};
  assert_true(compile_run(&fx, &avx512, &probe, NULL) <= 1e-5);
  kn_schedule s = probe.shape.dflt;
  s.unroll_reduce = 1;
  s.reduce_lanes = 0;
  refused(&s, &probe, why);
  teardown(&fx);
}

static void make_conv_rgb(kn_graph *g) { make_conv(g, "", 3, 16, 6); }

/* a dense conv over 3 channels (reduction kh, kw, ic = 3 x 3 x 3) unrolls
 * what fits; too many copies, an axis too long (a conv's 8 channels, a
 * matmul's k = 24), a reduction whose stage does not cover the output
 * (softmax) and a negative count are refused */
static void test_refusals(void **state) {
  (void)state;
  fixture fx;
  setup(&fx, make_conv_rgb);
  force probe = {.grp = fx.target};
  assert_true(compile_run(&fx, &avx512, &probe, NULL) <= 1e-5);
  assert_int_equal(probe.shape.dflt.unroll_reduce, 0); /* not grouped */
  kn_schedule s = probe.shape.dflt;
  for (int axes = 1; axes <= 2; axes++) { /* ic, then kw too: 3, 9 copies */
    s.unroll_reduce = axes;
    force f = {.grp = fx.target, .use = &s};
    char *loops = NULL;
    assert_true(compile_run(&fx, &avx512, &f, &loops) <= 1e-5);
    assert_false(f.rejected);
    assert_null(strstr(loops, "for ic in"));
    assert_true((strstr(loops, "for kw in") == NULL) == (axes == 2));
    assert_non_null(strstr(loops, "for kh in"));
    free(loops);
  }
  s.unroll_reduce = 3; /* 27 copies */
  refused(&s, &probe, "over 25 copies");
  s.unroll_reduce = -1;
  refused(&s, &probe, "negative axis count");
  teardown(&fx);

  refused_on(make_conv_small, "reduction axis 2 has no constant extent of at most 7"); /* ic = 8 */
  refused_on(make_matmul, "reduction axis 0 has no constant extent of at most 7");     /* k = 24 */
  refused_on(make_softmax, "the kernel has 0 it can unroll");

  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_at_trace_parse("[{\"p\":\"reorder\",\"loops\":[[0,0]]},{\"p\":\"unroll_reduction\",\"axes\":-1}]", &s, &d), -1);
  assert_int_equal(kn_at_trace_parse("[{\"p\":\"reorder\",\"loops\":[[0,0]]},{\"p\":\"unroll_reduction\"}]", &s, &d), -1);
  assert_int_equal(kn_at_trace_parse("[{\"p\":\"reorder\",\"loops\":[[0,0]]},{\"p\":\"unroll_reduction\",\"axes\":2}]", &s, &d), 0);
  assert_int_equal(s.unroll_reduce, 2);
  kn_diag_free(&d);
}

/* a provider that hands over its schedule without validating it */
static void blind_choose(void *ctx, const kn_sched_task *task, kn_schedule *s) {
  (void)task;
  s->unroll_reduce = *(const int *)ctx;
}

/* the lowering itself refuses an axis it cannot unroll (a matmul's k = 24):
 * the kernel fails with the reason, it is not built with the loop rolled */
static void test_lowering_refuses(void **state) {
  (void)state;
  fixture fx;
  setup(&fx, make_matmul);
  for (int axes = 0; axes <= 1; axes++) {
    kn_arena A;
    kn_arena_init(&A);
    kn_expr_ctx ec = {.arena = &A};
    kn_diag d;
    kn_diag_init(&d);
    kn_sched_provider p = {.choose = blind_choose, .ctx = &axes};
    kn_kernel_build kb;
    int rc = kn_sched_build_kernel_with(&fx.g, fx.target, &avx512, &ec, "k", &p, &kb, NULL, NULL, &d);
    assert_int_equal(rc, axes ? -1 : 0);
    assert_int_equal(d.count, axes);
    if (axes) assert_non_null(strstr(d.lines[0], "unroll_reduction: reduction axis 0"));
    kn_diag_free(&d);
    kn_arena_free(&A);
  }
  teardown(&fx);
}

int kn_test_unroll_reduce_run(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_depthwise),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_lowering_refuses),
  };
  return cmocka_run_group_tests_name("unroll_reduce", tests, NULL, NULL);
}
