/* test_te_shape_more.c — data-movement ops added for the ONNX node tests
 * (te_ops_shape.c): GatherElements on every axis with negative indices, and
 * Trilu upper/lower with k omitted, constant, or a run-time input.
 * Oracle: kn_ref_run_graph, plus a hand-checked Trilu. */
#include <string.h>

#include "tests/te/te_harness.h"

static void test_gather_elements(void **state) {
  (void)state;
  for (int axis = -1; axis < 3; axis++) {
    int a = axis < 0 ? 2 : axis;
    static const int64_t dims[3] = {2, 3, 4};
    th t;
    th_init(&t, 13);
    int x = th_input(&t, "x", KN_DT_F32, 3, TH_DIMS(2, 3, 4), 1u, -5, 5);
    int64_t idims[3] = {2, 2, 3};
    int ind = th_input(&t, "i", KN_DT_I64, 3, idims, 1u, (double)-dims[a], (double)dims[a] - 1);
    th_node(&t, KN_OP_GATHER_ELEMENTS, "ge", TH_INS(x, ind), 2, 1);
    th_attr_int(&t, "axis", axis);
    th_check(&t, 2);
    th_free(&t);
  }
}

static void trilu_case(int upper, int k_kind, int64_t k) {
  th t;
  th_init(&t, 14);
  int x = th_input(&t, "x", KN_DT_F32, 3, TH_DIMS(2, 4, 5), 1u, -5, 5);
  int ins[2] = {x, -1};
  if (k_kind == 1) ins[1] = th_const_scalar(&t, "k", KN_DT_I64, (double)k);
  if (k_kind == 2) ins[1] = th_input(&t, "k", KN_DT_I64, 0, NULL, 0, (double)k, (double)k);
  th_node(&t, KN_OP_TRILU, "tri", ins, k_kind ? 2 : 1, 1);
  th_attr_int(&t, "upper", upper);
  th_check(&t, 2);
  th_free(&t);
}

static void test_trilu(void **state) {
  (void)state;
  for (int upper = 0; upper < 2; upper++) {
    trilu_case(upper, 0, 0);
    for (int64_t k = -5; k <= 6; k += 2) {
      trilu_case(upper, 1, k);
      trilu_case(upper, 2, k);
    }
  }
  /* by hand: upper, k = 1 on a 3x3 of ones */
  static const int32_t ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  static const int32_t want[9] = {0, 1, 1, 0, 0, 1, 0, 0, 0};
  th t;
  th_init(&t, 14);
  int x = th_input_data(&t, "x", KN_DT_I32, 2, TH_DIMS(3, 3), 0, ones);
  int k = th_const_scalar(&t, "k", KN_DT_I64, 1);
  th_node(&t, KN_OP_TRILU, "tri", TH_INS(x, k), 2, 1);
  th_check(&t, 1);
  int32_t out[9];
  void *data[1] = {(void *)ones};
  th_eval(&t, 0, 1, data, out);
  assert_memory_equal(out, want, sizeof out);
  th_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gather_elements),
      cmocka_unit_test(test_trilu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
