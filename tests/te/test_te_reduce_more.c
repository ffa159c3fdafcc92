/* test_te_reduce_more.c — the reductions added for the ONNX node tests
 * (te_ops_reduce.c): Reduce{Prod,L1,L2,SumSquare,LogSum,LogSumExp} over
 * attribute / input axes with and without keepdims, and ArgMax/ArgMin on
 * every axis, with ties (small integers) and select_last_index; Hardmax.
 * Oracle: kn_ref_run_graph, plus hand-checked ArgMax indices. */
#include <string.h>

#include "tests/te/te_harness.h"

static void reduce_case(kn_op op, kn_dtype dt, double lo, double hi, int n_axes, const int64_t *axes,
                        bool as_input, int keepdims) {
  th t;
  th_init(&t, as_input ? 18 : 13);
  int x = th_input(&t, "x", dt, 4, TH_DIMS(2, 3, 4, 5), 1u, lo, hi);
  int ins[2] = {x, -1};
  if (as_input && n_axes >= 0) ins[1] = th_const_ints(&t, "axes", n_axes, axes);
  th_node(&t, op, kn_op_name(op), ins, ins[1] >= 0 ? 2 : 1, 1);
  if (!as_input && n_axes >= 0) th_attr_ints(&t, "axes", n_axes, axes);
  th_attr_int(&t, "keepdims", keepdims);
  th_check(&t, 2);
  th_free(&t);
}

static void test_reduce_family(void **state) {
  (void)state;
  static const kn_op ops[] = {KN_OP_REDUCE_PROD,       KN_OP_REDUCE_L1,      KN_OP_REDUCE_L2,
                              KN_OP_REDUCE_SUM_SQUARE, KN_OP_REDUCE_LOG_SUM, KN_OP_REDUCE_LOG_SUM_EXP};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    double lo = ops[i] == KN_OP_REDUCE_LOG_SUM ? 0.1 : ops[i] == KN_OP_REDUCE_PROD ? 0.5 : -3;
    double hi = ops[i] == KN_OP_REDUCE_PROD ? 1.5 : 3;
    for (int keep = 0; keep < 2; keep++) {
      reduce_case(ops[i], KN_DT_F32, lo, hi, 1, TH_DIMS(-1), false, keep);
      reduce_case(ops[i], KN_DT_F32, lo, hi, 2, TH_DIMS(1, 3), false, keep);
      reduce_case(ops[i], KN_DT_F32, lo, hi, -1, NULL, false, keep); /* all axes */
      reduce_case(ops[i], KN_DT_F32, lo, hi, 2, TH_DIMS(0, 2), true, keep);
    }
  }
  /* LogSumExp stays finite where a plain exp would overflow float32 */
  reduce_case(KN_OP_REDUCE_LOG_SUM_EXP, KN_DT_F32, 80, 100, 1, TH_DIMS(2), false, 1);
  /* the integer forms */
  reduce_case(KN_OP_REDUCE_L1, KN_DT_I32, -9, 9, 1, TH_DIMS(1), false, 1);
  reduce_case(KN_OP_REDUCE_SUM_SQUARE, KN_DT_I64, -9, 9, 1, TH_DIMS(3), false, 0);
  reduce_case(KN_OP_REDUCE_PROD, KN_DT_I64, -2, 2, 1, TH_DIMS(2), false, 1);
}

static void arg_case(kn_op op, kn_dtype dt, int64_t axis, int keepdims, int last) {
  th t;
  th_init(&t, 13);
  int x = th_input(&t, "x", dt, 3, TH_DIMS(2, 3, 4), 1u, -2, 2); /* integers: many ties */
  th_node(&t, op, kn_op_name(op), &x, 1, 1);
  th_attr_int(&t, "axis", axis);
  th_attr_int(&t, "keepdims", keepdims);
  if (last) th_attr_int(&t, "select_last_index", 1);
  th_check(&t, 2);
  th_free(&t);
}

static void test_arg_extreme(void **state) {
  (void)state;
  for (int op = 0; op < 2; op++)
    for (int axis = -1; axis < 3; axis++)
      for (int keep = 0; keep < 2; keep++)
        for (int last = 0; last < 2; last++) {
          arg_case(op ? KN_OP_ARG_MIN : KN_OP_ARG_MAX, KN_DT_I32, axis, keep, last);
          arg_case(op ? KN_OP_ARG_MIN : KN_OP_ARG_MAX, KN_DT_F32, axis, keep, last);
        }
  /* by hand: rows with ties */
  static const float x[8] = {1, 3, 3, 0, /* */ -1, -1, -5, -5};
  static const int64_t want[4][2] = {{1, 0}, {2, 1}, {3, 2}, {3, 3}}; /* max, max last, min, min last */
  for (int k = 0; k < 4; k++) {
    th t;
    th_init(&t, 13);
    int in = th_input_data(&t, "x", KN_DT_F32, 2, TH_DIMS(2, 4), 0, x);
    th_node(&t, k < 2 ? KN_OP_ARG_MAX : KN_OP_ARG_MIN, "a", &in, 1, 1);
    th_attr_int(&t, "axis", 1);
    th_attr_int(&t, "keepdims", 0);
    if (k % 2) th_attr_int(&t, "select_last_index", 1);
    th_check(&t, 1);
    int64_t out[2];
    void *data[1] = {(void *)x};
    th_eval(&t, 0, 1, data, out);
    assert_memory_equal(out, want[k], sizeof out);
    th_free(&t);
  }
}

static void test_hardmax(void **state) {
  (void)state;
  for (int axis = -1; axis < 3; axis++) {
    th t;
    th_init(&t, 13);
    int x = th_input(&t, "x", KN_DT_F32, 3, TH_DIMS(2, 3, 4), 1u, -2, 2);
    th_node(&t, KN_OP_HARDMAX, "h", &x, 1, 1);
    th_attr_int(&t, "axis", axis);
    th_check(&t, 2);
    th_free(&t);
  }
  /* ties: the first maximum wins */
  static const float x[8] = {1, 3, 3, 0, /* */ -1, -1, -5, -5};
  static const float want[8] = {0, 1, 0, 0, 1, 0, 0, 0};
  th t;
  th_init(&t, 13);
  int in = th_input_data(&t, "x", KN_DT_F32, 2, TH_DIMS(2, 4), 0, x);
  th_node(&t, KN_OP_HARDMAX, "h", &in, 1, 1);
  th_check(&t, 1);
  float out[8];
  void *data[1] = {(void *)x};
  th_eval(&t, 0, 1, data, out);
  assert_memory_equal(out, want, sizeof out);
  th_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reduce_family),
      cmocka_unit_test(test_arg_extreme),
      cmocka_unit_test(test_hardmax),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
