/* test_te_eval.c — the naive TE interpreter itself (ir/te/te_eval.c) on
 * hand-built TEs with hand-computed expectations: injective and reduction
 * computes, the batch variable, integer floor semantics and wrapping, casts,
 * rank 0, and the errors it must report (out-of-bounds loads, even in a
 * discarded select arm; variables used outside their scope; vector nodes). */
#include <string.h>

#include "tests/te/te_harness.h"
#include "ir/te/te_eval.h"

typedef struct fx {
  kn_arena arena;
  kn_expr_ctx ec;
  kn_te_ctx c;
  kn_graph g;
  kn_diag d;
} fx;

static void fx_init(fx *f) {
  memset(f, 0, sizeof *f);
  kn_arena_init(&f->arena);
  f->ec.arena = &f->arena;
  f->c.ec = &f->ec;
  f->c.batch = kn_var_new(&f->ec, "N");
  kn_graph_init(&f->g);
  f->c.g = &f->g;
  kn_diag_init(&f->d);
}

static void fx_free(fx *f) {
  kn_arena_free(&f->arena);
  kn_graph_free(&f->g);
  kn_diag_free(&f->d);
}

static kn_expr *I(fx *f, int64_t v) { return kn_e_int(&f->ec, v); }
static kn_expr *V(fx *f, kn_var *v) { return kn_e_var(&f->ec, v); }

static void test_injective_and_reduce(void **state) {
  (void)state;
  fx f;
  fx_init(&f);
  /* A: [N, 3] float placeholder (value 0) */
  kn_expr *shape[2] = {V(&f, f.c.batch), I(&f, 3)};
  kn_te_tensor *A = kn_te_placeholder(&f.c, "A", KN_DT_F32, 2, shape, 0);
  /* B[i, j] = A[i, 2 - j] * 2 + 1 */
  kn_te_tensor *B = kn_te_compute(&f.c, "B", KN_DT_F32, 2, shape);
  kn_expr *ai[2] = {V(&f, B->axes[0]), kn_e_sub(&f.ec, I(&f, 2), V(&f, B->axes[1]))};
  B->body = kn_e_add(&f.ec, kn_e_mul(&f.ec, kn_te_at(&f.c, A, ai), kn_e_float(&f.ec, KN_DT_F32, 2)),
                     kn_e_float(&f.ec, KN_DT_F32, 1));
  /* S[i] = sum_j B[i, j] */
  kn_te_tensor *S = kn_te_compute(&f.c, "S", KN_DT_F32, 1, shape);
  kn_var *j = kn_var_new(&f.ec, "j");
  kn_expr *bi[2] = {V(&f, S->axes[0]), V(&f, j)};
  kn_expr *ext = I(&f, 3);
  S->body = kn_e_reduce(&f.ec, KN_RED_SUM, &j, &ext, 1, kn_te_at(&f.c, B, bi));
  const float a[6] = {1, 2, 3, 4, 5, 6};
  const void *ph[1] = {a};
  float b[6], s[2];
  assert_int_equal(kn_te_eval(B, ph, 2, b, &f.d), 0);
  const float want_b[6] = {7, 5, 3, 13, 11, 9};
  for (int i = 0; i < 6; i++) assert_true(b[i] == want_b[i]);
  assert_int_equal(kn_te_eval(S, ph, 2, s, &f.d), 0);
  assert_true(s[0] == 15 && s[1] == 33);
  /* batch 1 reads only the first row */
  assert_int_equal(kn_te_eval(S, ph, 1, s, &f.d), 0);
  assert_true(s[0] == 15);
  /* max and min reductions, and an empty one (identity element) */
  S->body = kn_e_reduce(&f.ec, KN_RED_MAX, &j, &ext, 1, kn_te_at(&f.c, B, bi));
  assert_int_equal(kn_te_eval(S, ph, 2, s, &f.d), 0);
  assert_true(s[0] == 7 && s[1] == 13);
  kn_expr *zero = I(&f, 0);
  S->body = kn_e_reduce(&f.ec, KN_RED_SUM, &j, &zero, 1, kn_te_at(&f.c, B, bi));
  assert_int_equal(kn_te_eval(S, ph, 2, s, &f.d), 0);
  assert_true(s[0] == 0 && s[1] == 0);
  fx_free(&f);
}

static void test_integer_semantics(void **state) {
  (void)state;
  fx f;
  fx_init(&f);
  kn_expr *shape[1] = {I(&f, 4)};
  kn_te_tensor *X = kn_te_placeholder(&f.c, "X", KN_DT_I64, 1, shape, 0);
  kn_te_tensor *D = kn_te_compute(&f.c, "D", KN_DT_I64, 1, shape);
  kn_expr *xi = V(&f, D->axes[0]);
  kn_expr *x = kn_te_at(&f.c, X, &xi);
  const int64_t xs[4] = {7, -7, 0, -1};
  const void *ph[1] = {xs};
  int64_t out[4];
  /* floor division and modulo by 2 and by -3 */
  D->body = kn_e_div(&f.ec, x, I(&f, 2));
  assert_int_equal(kn_te_eval(D, ph, 1, out, &f.d), 0);
  assert_int_equal(out[0], 3), assert_int_equal(out[1], -4), assert_int_equal(out[3], -1);
  D->body = kn_e_mod(&f.ec, x, I(&f, -3));
  assert_int_equal(kn_te_eval(D, ph, 1, out, &f.d), 0);
  assert_int_equal(out[0], -2), assert_int_equal(out[1], -1), assert_int_equal(out[2], 0);
  /* division by zero is 0, not a crash */
  D->body = kn_e_div(&f.ec, x, I(&f, 0));
  assert_int_equal(kn_te_eval(D, ph, 1, out, &f.d), 0);
  assert_int_equal(out[0], 0);
  /* int32 wraps */
  kn_te_tensor *W = kn_te_compute(&f.c, "W", KN_DT_I32, 1, shape);
  W->body = kn_e_mul(&f.ec, kn_e_const_int(&f.ec, KN_DT_I32, 65536),
                     kn_e_const_int(&f.ec, KN_DT_I32, 65537));
  int32_t w[4];
  assert_int_equal(kn_te_eval(W, ph, 1, w, &f.d), 0);
  assert_int_equal(w[0], 65536);
  /* float -> int truncates toward zero */
  kn_te_tensor *C = kn_te_compute(&f.c, "C", KN_DT_I64, 1, shape);
  kn_expr *ci = V(&f, C->axes[0]);
  kn_expr *xf = kn_e_cast(&f.ec, KN_DT_F32, kn_te_at(&f.c, X, &ci));
  C->body = kn_e_cast(&f.ec, KN_DT_I64, kn_e_mul(&f.ec, xf, kn_e_float(&f.ec, KN_DT_F32, 0.3)));
  assert_int_equal(kn_te_eval(C, ph, 1, out, &f.d), 0);
  assert_int_equal(out[0], 2), assert_int_equal(out[1], -2), assert_int_equal(out[3], 0);
  fx_free(&f);
}

static void test_rank0(void **state) {
  (void)state;
  fx f;
  fx_init(&f);
  kn_te_tensor *Z = kn_te_compute(&f.c, "Z", KN_DT_F32, 0, NULL);
  kn_var *k = kn_var_new(&f.ec, "k");
  kn_expr *ext = I(&f, 5);
  Z->body = kn_e_reduce(&f.ec, KN_RED_SUM, &k, &ext, 1, kn_e_cast(&f.ec, KN_DT_F32, V(&f, k)));
  float z = -1;
  assert_int_equal(kn_te_eval(Z, NULL, 1, &z, &f.d), 0);
  assert_true(z == 10);
  fx_free(&f);
}

static void expect_error(fx *f, const kn_te_tensor *t, const void *const *ph, const char *what) {
  float buf[64];
  assert_int_equal(kn_te_eval(t, ph, 1, buf, &f->d), -1);
  assert_true(f->d.count > 0);
  if (!strstr(f->d.lines[f->d.count - 1], what))
    fail_msg("diagnostic '%s' lacks '%s'", f->d.lines[f->d.count - 1], what);
}

static void test_errors(void **state) {
  (void)state;
  fx f;
  fx_init(&f);
  kn_expr *shape[1] = {I(&f, 4)};
  kn_te_tensor *A = kn_te_placeholder(&f.c, "A", KN_DT_F32, 1, shape, 0);
  const float a[4] = {1, 2, 3, 4};
  const void *ph[1] = {a};
  /* A[i + 1] reads past the end */
  kn_te_tensor *B = kn_te_compute(&f.c, "B", KN_DT_F32, 1, shape);
  kn_expr *i1 = kn_e_add(&f.ec, V(&f, B->axes[0]), I(&f, 1));
  B->body = kn_te_at(&f.c, A, &i1);
  expect_error(&f, B, ph, "load of 'A' out of bounds: dim 0 index 4");
  /* ... even in the arm a select discards */
  kn_te_tensor *P = kn_te_compute(&f.c, "P", KN_DT_F32, 1, shape);
  kn_expr *i = V(&f, P->axes[0]);
  kn_expr *ip = kn_e_sub(&f.ec, i, I(&f, 1));
  P->body = kn_e_select(&f.ec, kn_e_bin(&f.ec, KN_E_GE, ip, I(&f, 0)), kn_te_at(&f.c, A, &ip),
                        kn_e_float(&f.ec, KN_DT_F32, 0));
  expect_error(&f, P, ph, "index -1");
  /* the clamped form is fine */
  kn_expr *cl = kn_e_max(&f.ec, ip, I(&f, 0));
  P->body = kn_e_select(&f.ec, kn_e_bin(&f.ec, KN_E_GE, ip, I(&f, 0)), kn_te_at(&f.c, A, &cl),
                        kn_e_float(&f.ec, KN_DT_F32, 0));
  float out[4];
  assert_int_equal(kn_te_eval(P, ph, 1, out, &f.d), 0);
  assert_true(out[0] == 0 && out[1] == 1 && out[3] == 3);
  /* a body using another tensor's axis */
  kn_te_tensor *Q = kn_te_compute(&f.c, "Q", KN_DT_F32, 1, shape);
  kn_expr *foreign = V(&f, B->axes[0]);
  Q->body = kn_te_at(&f.c, A, &foreign);
  expect_error(&f, Q, ph, "outside its scope");
  /* missing placeholder data */
  kn_te_tensor *R = kn_te_compute(&f.c, "R", KN_DT_F32, 1, shape);
  kn_expr *ri = V(&f, R->axes[0]);
  R->body = kn_te_at(&f.c, A, &ri);
  const void *none[1] = {NULL};
  expect_error(&f, R, none, "no data for placeholder 'A'");
  /* vector nodes belong to the loop IR */
  R->body = kn_e_broadcast(&f.ec, kn_e_float(&f.ec, KN_DT_F32, 1), 4);
  expect_error(&f, R, ph, "vector expression");
  fx_free(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_injective_and_reduce),
      cmocka_unit_test(test_integer_semantics),
      cmocka_unit_test(test_rank0),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
