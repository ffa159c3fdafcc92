/* test_te_elemwise_more.c — the elementwise ops added for the ONNX node tests
 * (activations, inverse/hyperbolic trigonometry, Round/Sign/IsNaN/IsInf,
 * Mod, >=, <=, Xor, Sum/Mean, CastLike): their TE (te_ops_elemwise.c)
 * evaluated by kn_te_eval against the reference interpreter on random
 * inputs, plus hand-checked values for Mod's sign rules. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/te/te_harness.h"

static void unary_case(kn_op op, kn_dtype dt, double lo, double hi, void (*attrs)(th *)) {
  th t;
  th_init(&t, 22);
  int x = th_input(&t, "x", dt, 3, TH_DIMS(2, 3, 4), 1u, lo, hi);
  th_node(&t, op, kn_op_name(op), &x, 1, 1);
  if (attrs) attrs(&t);
  th_check(&t, 2);
  th_free(&t);
}

static void selu_attrs(th *t) {
  th_attr_float(t, "alpha", 2.0f);
  th_attr_float(t, "gamma", 3.0f);
}
static void alpha_attrs(th *t) { th_attr_float(t, "alpha", 0.6f); }
static void shrink_attrs(th *t) {
  th_attr_float(t, "lambd", 1.0f);
  th_attr_float(t, "bias", 0.25f);
}

static void test_activations(void **state) {
  (void)state;
  static const kn_op ops[] = {KN_OP_SELU,     KN_OP_CELU, KN_OP_THRESHOLDED_RELU, KN_OP_SHRINK,
                              KN_OP_SOFTSIGN, KN_OP_MISH, KN_OP_SWISH,            KN_OP_ROUND,
                              KN_OP_SIGN};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) unary_case(ops[i], KN_DT_F32, -3, 3, NULL);
  unary_case(KN_OP_SELU, KN_DT_F32, -3, 3, selu_attrs);
  unary_case(KN_OP_CELU, KN_DT_F32, -3, 3, alpha_attrs);
  unary_case(KN_OP_THRESHOLDED_RELU, KN_DT_F32, -3, 3, alpha_attrs);
  unary_case(KN_OP_SWISH, KN_DT_F32, -3, 3, alpha_attrs);
  unary_case(KN_OP_SHRINK, KN_DT_F32, -3, 3, shrink_attrs);
  unary_case(KN_OP_SIGN, KN_DT_I32, -3, 3, NULL);
  unary_case(KN_OP_SIGN, KN_DT_I64, -3, 3, NULL);
}

static void test_trigonometry(void **state) {
  (void)state;
  unary_case(KN_OP_TAN, KN_DT_F32, -1.2, 1.2, NULL);
  unary_case(KN_OP_ATAN, KN_DT_F32, -20, 20, NULL);
  unary_case(KN_OP_ATAN, KN_DT_F64, -1, 1, NULL);
  unary_case(KN_OP_ASIN, KN_DT_F32, -0.999, 0.999, NULL);
  unary_case(KN_OP_ACOS, KN_DT_F32, -0.999, 0.999, NULL);
  unary_case(KN_OP_SINH, KN_DT_F32, -3, 3, NULL);
  unary_case(KN_OP_COSH, KN_DT_F32, -3, 3, NULL);
  unary_case(KN_OP_ASINH, KN_DT_F32, -5, 5, NULL);
  unary_case(KN_OP_ACOSH, KN_DT_F32, 1, 5, NULL);
  unary_case(KN_OP_ATANH, KN_DT_F32, -0.9, 0.9, NULL);
}

/* IsNaN / IsInf on NaN, infinities and finite values; bool results. */
static void test_is_nan_inf(void **state) {
  (void)state;
  static const float x[6] = {1.5f, NAN, INFINITY, -INFINITY, 0.0f, -2.0f};
  static const uint8_t want_nan[6] = {0, 1, 0, 0, 0, 0};
  static const uint8_t want_inf[3][6] = {{0, 0, 1, 1, 0, 0}, {0, 0, 1, 0, 0, 0}, {0, 0, 0, 1, 0, 0}};
  for (int k = 0; k < 4; k++) {
    th t;
    th_init(&t, 20);
    int in = th_input_data(&t, "x", KN_DT_F32, 1, TH_DIMS(6), 0, x);
    th_node(&t, k == 0 ? KN_OP_IS_NAN : KN_OP_IS_INF, "n", &in, 1, 1);
    if (k == 2) th_attr_int(&t, "detect_negative", 0);
    if (k == 3) th_attr_int(&t, "detect_positive", 0);
    th_check(&t, 1);
    uint8_t out[6];
    void *data[1] = {(void *)x};
    th_eval(&t, 0, 1, data, out);
    assert_memory_equal(out, k == 0 ? want_nan : want_inf[k - 1], 6);
    th_free(&t);
  }
}

static void binary_case(kn_op op, kn_dtype dt, double lo, double hi, void (*attrs)(th *)) {
  th t;
  th_init(&t, 18);
  int a = th_input(&t, "a", dt, 3, TH_DIMS(2, 3, 4), 1u, lo, hi);
  int b = th_input(&t, "b", dt, 2, TH_DIMS(3, 1), 0, lo, hi);
  th_node(&t, op, kn_op_name(op), TH_INS(a, b), 2, 1);
  if (attrs) attrs(&t);
  th_check(&t, 2);
  th_free(&t);
}

static void fmod_attr(th *t) { th_attr_int(t, "fmod", 1); }

static void test_compare_logic(void **state) {
  (void)state;
  binary_case(KN_OP_GREATER_OR_EQUAL, KN_DT_F32, -1.4, 1.4, NULL);
  binary_case(KN_OP_LESS_OR_EQUAL, KN_DT_F32, -1.4, 1.4, NULL);
  binary_case(KN_OP_GREATER_OR_EQUAL, KN_DT_I32, -3, 3, NULL);
  binary_case(KN_OP_LESS_OR_EQUAL, KN_DT_I64, -3, 3, NULL);
  binary_case(KN_OP_XOR, KN_DT_BOOL, 0, 1, NULL);
}

/* Mod by hand: fmod=0 takes the divisor's sign, fmod=1 the dividend's. */
static void test_mod(void **state) {
  (void)state;
  static const int64_t a[8] = {7, -7, 7, -7, 6, 0, -1, 13};
  static const int64_t b[8] = {3, 3, -3, -3, 3, 5, 4, -5};
  static const int64_t want_floor[8] = {1, 2, -2, -1, 0, 0, 3, -2};
  static const int64_t want_trunc[8] = {1, -1, 1, -1, 0, 0, -1, 3};
  for (int f = 0; f < 2; f++) {
    th t;
    th_init(&t, 13);
    int ia = th_input_data(&t, "a", KN_DT_I64, 1, TH_DIMS(8), 0, a);
    int ib = th_input_data(&t, "b", KN_DT_I64, 1, TH_DIMS(8), 0, b);
    th_node(&t, KN_OP_MOD, "m", TH_INS(ia, ib), 2, 1);
    if (f) fmod_attr(&t);
    th_check(&t, 1);
    int64_t out[8];
    void *data[2] = {(void *)a, (void *)b};
    th_eval(&t, 0, 1, data, out);
    assert_memory_equal(out, f ? want_trunc : want_floor, sizeof out);
    th_free(&t);
  }
  binary_case(KN_OP_MOD, KN_DT_I32, 1, 9, NULL);
  binary_case(KN_OP_MOD, KN_DT_I32, -9, -1, fmod_attr);
  binary_case(KN_OP_MOD, KN_DT_F32, 0.5, 4, fmod_attr);
  binary_case(KN_OP_MOD, KN_DT_F64, -4, -0.5, fmod_attr);
}

static void test_sum_mean_castlike(void **state) {
  (void)state;
  for (int k = 0; k < 3; k++) {
    th t;
    th_init(&t, 13);
    kn_dtype dt = k == 2 ? KN_DT_I32 : KN_DT_F32;
    int a = th_input(&t, "a", dt, 3, TH_DIMS(2, 3, 4), 1u, -5, 5);
    int b = th_input(&t, "b", dt, 1, TH_DIMS(4), 0, -5, 5);
    int c = th_input(&t, "c", dt, 2, TH_DIMS(3, 1), 0, -5, 5);
    th_node(&t, k == 1 ? KN_OP_MEAN : KN_OP_SUM, "s", TH_INS(a, b, c), 3, 1);
    th_check(&t, 2);
    th_free(&t);
  }
  th t;
  th_init(&t, 21);
  int x = th_input(&t, "x", KN_DT_F32, 2, TH_DIMS(3, 4), 1u, -50, 50);
  int like = th_input(&t, "like", KN_DT_I32, 1, TH_DIMS(1), 0, 0, 1);
  th_node(&t, KN_OP_CAST_LIKE, "cl", TH_INS(x, like), 2, 1);
  th_check(&t, 2);
  assert_int_equal(t.g.values[t.g.nodes[t.node].out[0]].dtype, KN_DT_I32);
  th_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_activations),   cmocka_unit_test(test_trigonometry),
      cmocka_unit_test(test_is_nan_inf),    cmocka_unit_test(test_compare_logic),
      cmocka_unit_test(test_mod),           cmocka_unit_test(test_sum_mean_castlike),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
