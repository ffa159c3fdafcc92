/* test_unroll_reduce.c — unroll_reduction (schedule.h): a depthwise conv's
 * default unrolls its kw taps; its space offers the taps unrolled and not;
 * every candidate, and the schedule with both tap axes unrolled, computes
 * the reference's values (loop-IR interpreter); the trace round-trips; and
 * validation refuses what the lowering could not unroll. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"

static void make_dw_3x3(kn_graph *g) { make_depthwise(g, 16, 7, 3, 1); }
static void make_dw_5x5_s2(kn_graph *g) { make_depthwise(g, 32, 9, 5, 2); }

static int validate(const kn_schedule *s, const force *probe) {
  kn_diag d;
  kn_diag_init(&d);
  int rc = kn_at_sched_validate(s, &probe->shape, &d);
  kn_diag_free(&d);
  return rc;
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
    char text[4096], again[4096];
    kn_at_trace_write(&space[i], text, sizeof text);
    kn_schedule back;
    kn_diag d;
    kn_diag_init(&d);
    assert_int_equal(kn_at_trace_parse(text, &back, &d), 0);
    kn_diag_free(&d);
    kn_at_trace_write(&back, again, sizeof again);
    assert_string_equal(text, again);
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
  assert_int_equal(validate(&s, &probe), -1);
  force three = {.grp = fx.target, .use = &s};
  assert_true(compile_run(&fx, &avx512, &three, NULL) < 0);
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
    assert_true(compile_run(&fx, &avx512, &f, NULL) <= 1e-5);
    assert_false(f.rejected);
  }
  s.unroll_reduce = 3; /* 27 copies */
  assert_int_equal(validate(&s, &probe), -1);
  s.unroll_reduce = -1;
  assert_int_equal(validate(&s, &probe), -1);
  teardown(&fx);

  setup(&fx, make_conv_small);
  force cp = {.grp = fx.target};
  assert_true(compile_run(&fx, &avx512, &cp, NULL) <= 1e-5);
  s = cp.shape.dflt;
  s.unroll_reduce = 1; /* ic = 8 */
  assert_int_equal(validate(&s, &cp), -1);
  teardown(&fx);

  setup(&fx, make_matmul);
  force mp = {.grp = fx.target};
  assert_true(compile_run(&fx, &avx512, &mp, NULL) <= 1e-5);
  s = mp.shape.dflt;
  s.unroll_reduce = 1; /* k = 24 */
  assert_int_equal(validate(&s, &mp), -1);
  teardown(&fx);

  setup(&fx, make_softmax);
  force sp = {.grp = fx.target};
  assert_true(compile_run(&fx, &avx512, &sp, NULL) <= 1e-5);
  s = sp.shape.dflt;
  s.unroll_reduce = 1;
  assert_int_equal(validate(&s, &sp), -1);
  teardown(&fx);

  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_at_trace_parse("[{\"p\":\"reorder\",\"loops\":[[0,0]]},{\"p\":\"unroll_reduction\",\"axes\":-1}]", &s, &d), -1);
  assert_int_equal(kn_at_trace_parse("[{\"p\":\"reorder\",\"loops\":[[0,0]]},{\"p\":\"unroll_reduction\"}]", &s, &d), -1);
  assert_int_equal(kn_at_trace_parse("[{\"p\":\"reorder\",\"loops\":[[0,0]]},{\"p\":\"unroll_reduction\",\"axes\":2}]", &s, &d), 0);
  assert_int_equal(s.unroll_reduce, 2);
  kn_diag_free(&d);
}

int kn_test_unroll_reduce_run(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_depthwise),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests_name("unroll_reduce", tests, NULL, NULL);
}
