/* test_range.c — the integer range analysis (ir/loop/range.h) that the
 * simplifier and the codegen share, the simplifier's decisions that rest on
 * it, and the one floor division (base/base.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ir/loop/loop.h"
#include "ir/loop/range.h"
#include "ir/loop/simplify.h"

#define BIG ((int64_t)1 << 40) /* once the simplifier's stand-in for "unknown": now a number like any */

static void assert_range(kn_range r, bool has_lo, int64_t lo, bool has_hi, int64_t hi) {
  assert_int_equal(r.has_lo, has_lo);
  assert_int_equal(r.has_hi, has_hi);
  if (has_lo) assert_int_equal(r.lo, lo);
  if (has_hi) assert_int_equal(r.hi, hi);
}

static void test_floor_divmod(void **state) {
  (void)state;
  static const int64_t a[] = {7, -7, 6, -6, 0, 1, -1, INT64_MAX, INT64_MIN, INT64_MIN + 1};
  static const int64_t b[] = {3, -3, 2, -2, 1, -1, INT64_MAX, INT64_MIN, 7};
  for (size_t i = 0; i < sizeof a / sizeof *a; i++)
    for (size_t j = 0; j < sizeof b / sizeof *b; j++) {
      int64_t q = kn_floordiv_i64(a[i], b[j]), r = kn_floormod_i64(a[i], b[j]);
      /* a == q*b + r (wrapping), r has b's sign and |r| < |b| */
      assert_int_equal((int64_t)((uint64_t)q * (uint64_t)b[j] + (uint64_t)r), a[i]);
      assert_true(r == 0 || (r < 0) == (b[j] < 0));
      assert_true(b[j] > 0 ? r < b[j] : r > b[j]);
    }
  assert_int_equal(kn_floordiv_i64(7, 2), 3);
  assert_int_equal(kn_floordiv_i64(-7, 2), -4);
  assert_int_equal(kn_floordiv_i64(7, -2), -4);
  assert_int_equal(kn_floordiv_i64(-7, -2), 3);
  assert_int_equal(kn_floormod_i64(-7, 2), 1);
  assert_int_equal(kn_floormod_i64(7, -2), -1);
  /* total: x / 0 == x % 0 == 0, INT64_MIN / -1 wraps */
  assert_int_equal(kn_floordiv_i64(5, 0), 0);
  assert_int_equal(kn_floormod_i64(5, 0), 0);
  assert_int_equal(kn_floordiv_i64(INT64_MIN, -1), INT64_MIN);
  assert_int_equal(kn_floormod_i64(INT64_MIN, -1), 0);
}

/* An unknown side stays unknown through every rule; known sides survive
 * where the rule allows. */
static void test_unknown_stays_unknown(void **state) {
  (void)state;
  kn_range u = kn_range_unknown(), k = kn_range_make(2, 5);
  kn_range ops[] = {kn_range_add(u, k), kn_range_add(k, u), kn_range_sub(u, k), kn_range_sub(k, u),
                    kn_range_mul(u, k), kn_range_mul(k, u), kn_range_div_const(u, 3), kn_range_union(u, k)};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) assert_range(ops[i], false, 0, false, 0);
  assert_range(kn_range_min(u, k), false, 0, true, 5);
  assert_range(kn_range_max(u, k), true, 2, false, 0);
  assert_range(kn_range_mod_const(u, 4), true, 0, true, 3);
  /* one side known: it stays, the other does not appear */
  kn_range half = {.lo = 0, .has_lo = true};
  assert_range(kn_range_add(half, k), true, 2, false, 0);
  assert_range(kn_range_sub(half, k), true, -5, false, 0);
  assert_range(kn_range_sub(k, half), false, 0, true, 5);
  assert_range(kn_range_mul(half, k), true, 0, false, 0);
  assert_range(kn_range_div_const(half, 4), true, 0, false, 0);
  /* bounds beyond 2^40 are bounds, not "unknown" */
  assert_range(kn_range_add(kn_range_const(BIG), kn_range_const(BIG)), true, 2 * BIG, true, 2 * BIG);
  assert_range(kn_range_mul(kn_range_make(-3, 2), kn_range_const(BIG)), true, -3 * BIG, true, 2 * BIG);
  /* overflow: that side becomes unknown, never a wrong bound */
  assert_range(kn_range_add(kn_range_make(0, INT64_MAX), kn_range_const(1)), true, 1, false, 0);
  assert_range(kn_range_sub(kn_range_const(0), kn_range_make(INT64_MIN, 0)), true, 0, false, 0);
  assert_range(kn_range_mul(kn_range_make(1, INT64_MAX), kn_range_make(2, 3)), true, 2, false, 0);
  /* floor division and modulo by a positive constant */
  assert_range(kn_range_div_const(kn_range_make(-7, 7), 2), true, -4, true, 3);
  assert_range(kn_range_div_const(k, 0), false, 0, false, 0);
  assert_range(kn_range_mod_const(k, 8), true, 2, true, 5);
  assert_range(kn_range_mod_const(k, 4), true, 0, true, 3);
  assert_range(kn_range_mod_const(k, -4), false, 0, false, 0);
  /* a loop variable: [min.lo, min.hi + extent.hi - 1] */
  assert_range(kn_range_loop_var(kn_range_const(0), kn_range_const(10)), true, 0, true, 9);
  assert_range(kn_range_loop_var(kn_range_const(0), u), true, 0, false, 0);
}

/* kn_range_of over expressions: int64 data is unknown, narrower loads are
 * their dtype's range, and narrow arithmetic that may wrap is the register's
 * range. */
static void test_range_of_exprs(void **state) {
  (void)state;
  kn_arena A;
  kn_arena_init(&A);
  kn_expr_ctx c = {.arena = &A};
  kn_buffer *i64 = kn_buffer_new(&c, "d64", KN_DT_I64, KN_BUF_PARAM, 0),
            *i32 = kn_buffer_new(&c, "d32", KN_DT_I32, KN_BUF_PARAM, 0),
            *u8 = kn_buffer_new(&c, "d8", KN_DT_U8, KN_BUF_PARAM, 0);
  kn_range_env env = {0};
  kn_expr *zero = kn_e_int(&c, 0);
  kn_expr *x = kn_e_load(&c, i64, zero), *y = kn_e_load(&c, i32, zero), *b = kn_e_load(&c, u8, zero);
  assert_range(kn_range_of(&env, x), false, 0, false, 0);
  assert_range(kn_range_of(&env, kn_e_add(&c, x, kn_e_int(&c, 1))), false, 0, false, 0);
  assert_range(kn_range_of(&env, kn_e_mul(&c, x, kn_e_int(&c, 3))), false, 0, false, 0);
  assert_range(kn_range_of(&env, kn_e_bin(&c, KN_E_MIN, x, kn_e_int(&c, 2 * BIG))), false, 0, true, 2 * BIG);
  assert_range(kn_range_of(&env, y), true, INT32_MIN, true, INT32_MAX);
  assert_range(kn_range_of(&env, kn_e_cast(&c, KN_DT_I64, b)), true, 0, true, 255);
  /* u8 * u8 may wrap in its 8-bit register: [0, 255], not [0, 65025] */
  assert_range(kn_range_of(&env, kn_e_mul(&c, b, b)), true, 0, true, 255);
  /* int32 * int32 widened: the int32 range, not the exact product's */
  kn_expr *sq = kn_e_cast(&c, KN_DT_I64, kn_e_mul(&c, y, y));
  assert_range(kn_range_of(&env, sq), true, INT32_MIN, true, INT32_MAX);
  /* the sum of two u8 values, widened first, is exact */
  kn_expr *sum = kn_e_add(&c, kn_e_cast(&c, KN_DT_I64, b), kn_e_cast(&c, KN_DT_I64, b));
  assert_range(kn_range_of(&env, sum), true, 0, true, 510);
  /* a ramp spans its lanes; a select either arm */
  kn_expr *ramp = kn_e_ramp(&c, kn_e_int(&c, 4), kn_e_int(&c, -2), 8);
  assert_range(kn_range_of(&env, ramp), true, -10, true, 4);
  kn_expr *sel = kn_e_select(&c, kn_e_bin(&c, KN_E_LT, x, zero), kn_e_int(&c, -1), kn_e_cast(&c, KN_DT_I64, b));
  assert_range(kn_range_of(&env, sel), true, -1, true, 255);
  assert_range(kn_range_of(&env, kn_e_bin(&c, KN_E_MOD, x, kn_e_int(&c, 16))), true, 0, true, 15);
  assert_range(kn_range_of(&env, kn_e_bin(&c, KN_E_DIV, x, kn_e_int(&c, 16))), false, 0, false, 0);
  kn_arena_free(&A);
}

/* Clip(x, lo, hi) of int64 data: the data's range is unknown, so no clamp
 * and no compare against it is decided at compile time, whatever the
 * constant (the simplifier once read its +-2^40 "unknown" as a bound and
 * dropped min(x, 2^41)). Clamps that the ranges do prove idle still go. */
static void test_clamp_of_int64_data_kept(void **state) {
  (void)state;
  kn_arena A;
  kn_arena_init(&A);
  kn_expr_ctx c = {.arena = &A};
  kn_buffer *in = kn_buffer_new(&c, "in", KN_DT_I64, KN_BUF_PARAM, 0),
            *out = kn_buffer_new(&c, "out", KN_DT_I64, KN_BUF_PARAM, 0);
  kn_var *i = kn_var_new(&c, "i");
  kn_expr *I = kn_e_var(&c, i), *x = kn_e_load(&c, in, I);
  static const int64_t limits[] = {2 * BIG, BIG, BIG + 1, ((int64_t)1 << 53) + 1, INT64_MAX - 1, 7};
  for (size_t t = 0; t < sizeof limits / sizeof *limits; t++) {
    int64_t m = limits[t];
    kn_expr *clip = kn_e_bin(&c, KN_E_MIN, kn_e_bin(&c, KN_E_MAX, x, kn_e_int(&c, -m)), kn_e_int(&c, m));
    kn_stmt *loop = kn_s_for(&c, i, kn_e_int(&c, 0), kn_e_int(&c, 4), KN_FOR_SERIAL, kn_s_store(&c, out, I, clip));
    kn_stmt *s = kn_simplify_stmt(&c, loop);
    const kn_expr *v = s->u.loop.body->u.store.value;
    assert_int_equal(v->kind, KN_E_MIN);
    assert_int_equal(v->u.bin.a->kind, KN_E_MAX);
    kn_expr *lt = kn_e_bin(&c, KN_E_LT, x, kn_e_int(&c, m));
    assert_int_equal(kn_simplify(&c, lt)->kind, KN_E_LT);
    assert_int_equal(kn_expr_truth(lt, NULL, 0), -1);
  }
  /* int32 data widened: its range is known, so a clamp at 2^41 is idle */
  kn_buffer *in32 = kn_buffer_new(&c, "in32", KN_DT_I32, KN_BUF_PARAM, 0);
  kn_expr *w = kn_e_cast(&c, KN_DT_I64, kn_e_load(&c, in32, I));
  assert_ptr_equal(kn_simplify(&c, kn_e_bin(&c, KN_E_MIN, w, kn_e_int(&c, 2 * BIG))), w);
  assert_int_equal(kn_expr_truth(kn_e_bin(&c, KN_E_LT, w, kn_e_int(&c, 2 * BIG)), NULL, 0), 1);
  /* but not when the int32 arithmetic may have wrapped below 0 */
  kn_expr *sq = kn_e_cast(&c, KN_DT_I64, kn_e_mul(&c, kn_e_load(&c, in32, I), kn_e_load(&c, in32, I)));
  assert_int_equal(kn_simplify(&c, kn_e_bin(&c, KN_E_MAX, sq, kn_e_int(&c, 0)))->kind, KN_E_MAX);
  kn_arena_free(&A);
}

/* kn_expr_range / kn_var_range speak kn_range: an unknown side is a flag,
 * so a bound at or beyond 2^40 (once the stand-in for "unknown") is an
 * ordinary bound, both in a variable's entry and in the result. */
static void test_var_range_list(void **state) {
  (void)state;
  kn_arena A;
  kn_arena_init(&A);
  kn_expr_ctx c = {.arena = &A};
  kn_var *i = kn_var_new(&c, "i"), *n = kn_var_new(&c, "n");
  kn_expr *I = kn_e_var(&c, i), *N = kn_e_var(&c, n);
  kn_range at_least_1 = kn_range_unknown();
  at_least_1.lo = 1, at_least_1.has_lo = true;
  kn_var_range r[2] = {{i, kn_range_make(0, 9)}, {n, at_least_1}};
  assert_range(kn_expr_range(kn_e_add(&c, I, kn_e_int(&c, 3)), r, 2), true, 3, true, 12);
  assert_range(kn_expr_range(N, r, 2), true, 1, false, 0);
  assert_range(kn_expr_range(kn_e_int(&c, 4 * BIG), r, 2), true, 4 * BIG, true, 4 * BIG);
  assert_range(kn_expr_range(kn_e_sub(&c, kn_e_int(&c, -BIG), N), r, 2), false, 0, true, -BIG - 1);
  /* only scalar int64 expressions are bounded */
  assert_range(kn_expr_range(kn_e_broadcast(&c, I, 4), r, 2), false, 0, false, 0);
  /* the last entry for a variable wins; one not listed is unknown */
  kn_var_range twice[2] = {{i, kn_range_make(0, 9)}, {i, kn_range_const(4)}};
  assert_range(kn_expr_range(I, twice, 2), true, 4, true, 4);
  assert_range(kn_expr_range(N, twice, 2), false, 0, false, 0);
  /* n's upper side is unknown: i < n is not decided, and neither is 0 < n
   * (both sides must be known) */
  assert_int_equal(kn_expr_truth(kn_e_bin(&c, KN_E_LT, I, N), r, 2), -1);
  assert_int_equal(kn_expr_truth(kn_e_bin(&c, KN_E_LT, kn_e_int(&c, 0), N), r, 2), -1);
  kn_var_range known[2] = {{i, kn_range_make(0, 9)}, {n, kn_range_make(10, 4 * BIG)}};
  assert_int_equal(kn_expr_truth(kn_e_bin(&c, KN_E_LT, I, N), known, 2), 1);
  assert_int_equal(kn_expr_truth(kn_e_bin(&c, KN_E_GT, I, N), known, 2), 0);
  kn_arena_free(&A);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_floor_divmod),          cmocka_unit_test(test_unknown_stays_unknown),
      cmocka_unit_test(test_range_of_exprs),        cmocka_unit_test(test_clamp_of_int64_data_kept),
      cmocka_unit_test(test_var_range_list),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
