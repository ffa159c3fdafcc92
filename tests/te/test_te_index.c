/* test_te_index.c — the [indexing, scans, bitwise, einsum] family
 * (te_ops_index.c, te_ops_scatter.c): every compute definition evaluated by
 * kn_te_eval against the reference interpreter on random inputs (random
 * indices include negative ones and duplicates, so the scatters' last-wins
 * and reductions are exercised), plus hand-checked values and must-fail
 * shape rules. The node tests of ONNX check the compiled kernels
 * (tests/conformance). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/passes/passes.h"
#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"
#include "tests/te/te_harness.h"

static void cum_case(kn_op op, kn_dtype dt, int rank, const int64_t *dims, int64_t axis, bool const_axis,
                     int excl, int rev) {
  th t;
  th_init(&t, 14);
  int x = th_input(&t, "x", dt, rank, dims, 1u, op == KN_OP_CUM_PROD ? 0.5 : -3, op == KN_OP_CUM_PROD ? 1.5 : 3);
  int a = const_axis ? th_const_scalar(&t, "axis", KN_DT_I64, (double)axis)
                     : th_input_data(&t, "axis", KN_DT_I32, 0, NULL, 0, &(int32_t){(int32_t)axis});
  th_node(&t, op, kn_op_name(op), TH_INS(x, a), 2, 1);
  th_attr_int(&t, "exclusive", excl);
  th_attr_int(&t, "reverse", rev);
  th_check(&t, 2);
  th_free(&t);
}

static void test_cum(void **state) {
  (void)state;
  const kn_op ops[2] = {KN_OP_CUM_SUM, KN_OP_CUM_PROD};
  for (int o = 0; o < 2; o++)
    for (int axis = -3; axis < 3; axis++)
      for (int f = 0; f < 4; f++) {
        cum_case(ops[o], KN_DT_F32, 3, TH_DIMS(2, 3, 4), axis, true, f & 1, f >> 1);
        cum_case(ops[o], KN_DT_F32, 3, TH_DIMS(2, 3, 4), axis, false, f & 1, f >> 1); /* axis at run time */
      }
  cum_case(KN_OP_CUM_SUM, KN_DT_I32, 2, TH_DIMS(3, 5), 1, false, 1, 0);
  cum_case(KN_OP_CUM_PROD, KN_DT_I64, 2, TH_DIMS(3, 5), 0, true, 0, 1);
}

/* An input of any integer dtype with random data in [lo, hi] (the harness
 * fills only some dtypes itself); `keep` holds the buffer until th_free. */
static int int_input(th *t, const char *name, kn_dtype dt, int rank, const int64_t *dims, double lo, double hi,
                     void **keep) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= dims[i];
  *keep = calloc((size_t)n + 1, 8);
  for (int64_t i = 0; i < n; i++) kn_ref_store_int(dt, *keep, i, (int64_t)th_rand(t, lo, hi + 0.999));
  return th_input_data(t, name, dt, rank, dims, 0, *keep);
}

static void bin_case(kn_op op, kn_dtype dt, int ra, const int64_t *da, int rb, const int64_t *db, double hi_b,
                     const char *dir) {
  th t;
  th_init(&t, 18);
  void *keep[2];
  int a = int_input(&t, "a", dt, ra, da, kn_dtype_is_signed(dt) ? -100 : 0, 250, &keep[0]);
  int b = int_input(&t, "b", dt, rb, db, kn_dtype_is_signed(dt) ? -100 : 0, hi_b, &keep[1]);
  th_node(&t, op, kn_op_name(op), TH_INS(a, b), op == KN_OP_BITWISE_NOT ? 1 : 2, 1);
  if (dir) th_attr_string(&t, "direction", dir);
  /* the harness compares only some dtypes: compare the bytes here */
  th_infer(&t);
  int y = t.g.outputs[0];
  size_t bytes = (size_t)th_numel(&t, y, 1) * kn_dtype_size(dt);
  void *want = calloc(1, bytes + 8), *got = calloc(1, bytes + 8);
  assert_int_equal(kn_ref_run_graph(&t.g, (const void *const *)keep, (void *[]){want}, 1, &t.d), 0);
  th_eval(&t, 0, 1, keep, got);
  assert_memory_equal(got, want, bytes);
  free(want), free(got);
  th_free(&t);
  free(keep[0]), free(keep[1]);
}

static void test_bitwise(void **state) {
  (void)state;
  const kn_dtype all[] = {KN_DT_I8, KN_DT_U8, KN_DT_I16, KN_DT_U16, KN_DT_I32, KN_DT_U32, KN_DT_I64, KN_DT_U64};
  const kn_op ops[] = {KN_OP_BITWISE_AND, KN_OP_BITWISE_OR, KN_OP_BITWISE_XOR, KN_OP_BITWISE_NOT};
  for (int i = 0; i < 8; i++) {
    for (int o = 0; o < 4; o++) bin_case(ops[o], all[i], 2, TH_DIMS(3, 4), 1, TH_DIMS(4), 250, NULL);
    if (kn_dtype_is_signed(all[i])) continue;
    double bits = (double)kn_dtype_size(all[i]) * 8;
    bin_case(KN_OP_BIT_SHIFT, all[i], 2, TH_DIMS(3, 4), 2, TH_DIMS(3, 4), bits + 2, "LEFT");
    bin_case(KN_OP_BIT_SHIFT, all[i], 2, TH_DIMS(3, 4), 0, NULL, bits - 1, "RIGHT");
  }
  /* hand-checked: 0b1100 op 0b1010 */
  th t;
  th_init(&t, 18);
  int a = th_input_data(&t, "a", KN_DT_U8, 1, TH_DIMS(3), 0, (uint8_t[]){12, 255, 1});
  int b = th_input_data(&t, "b", KN_DT_U8, 1, TH_DIMS(3), 0, (uint8_t[]){10, 4, 9});
  th_node(&t, KN_OP_BIT_SHIFT, "shl", TH_INS(a, b), 2, 1);
  th_attr_string(&t, "direction", "LEFT");
  th_infer(&t);
  uint8_t got[3];
  th_eval(&t, 0, 1, (void *[]){(uint8_t[]){12, 255, 1}, (uint8_t[]){10, 4, 9}}, got);
  assert_int_equal(got[0], 0);   /* shift >= 8 */
  assert_int_equal(got[1], 240); /* 255 << 4, wrapped */
  assert_int_equal(got[2], 0);
  th_free(&t);
}

static void scatter_elements_case(kn_op op, int64_t axis, const char *red, kn_dtype dt) {
  th t;
  th_init(&t, 18);
  int x = th_input(&t, "x", dt, 3, TH_DIMS(3, 4, 5), 0, -5, 5);
  int64_t ud[3] = {2, 3, 4};
  int ax = axis < 0 ? (int)axis + 3 : (int)axis;
  int64_t xd[3] = {3, 4, 5};
  int ind = th_input(&t, "i", KN_DT_I64, 3, ud, 0, (double)-xd[ax], (double)(xd[ax] - 1));
  int upd = th_input(&t, "u", dt, 3, ud, 0, -5, 5);
  th_node(&t, op, kn_op_name(op), TH_INS(x, ind, upd), 3, 1);
  th_attr_int(&t, "axis", axis);
  if (red) th_attr_string(&t, "reduction", red);
  th_check(&t, 1);
  th_free(&t);
}

static void test_scatter_elements(void **state) {
  (void)state;
  const char *reds[] = {"none", "add", "mul", "max", "min"};
  for (int axis = -3; axis < 3; axis++)
    for (int r = 0; r < 5; r++) scatter_elements_case(KN_OP_SCATTER_ELEMENTS, axis, reds[r], KN_DT_F32);
  scatter_elements_case(KN_OP_SCATTER_ELEMENTS, 1, "max", KN_DT_I32);
  scatter_elements_case(KN_OP_SCATTER_ELEMENTS, 2, "min", KN_DT_U8);
  scatter_elements_case(KN_OP_SCATTER, 0, NULL, KN_DT_F32);
}

static void test_scatter_nd(void **state) {
  (void)state;
  const char *reds[] = {"none", "add", "mul", "max", "min"};
  for (int k = 1; k <= 3; k++)
    for (int r = 0; r < 5; r++) {
      th t;
      th_init(&t, 18);
      int x = th_input(&t, "x", KN_DT_F32, 3, TH_DIMS(3, 4, 5), 0, -5, 5);
      int ind = th_input(&t, "i", KN_DT_I64, 3, TH_DIMS(2, 3, k), 0, -3, 2); /* in range of every dim */
      int64_t xd[3] = {3, 4, 5}, ud[5] = {2, 3};
      for (int a = k; a < 3; a++) ud[2 + a - k] = xd[a];
      int upd = th_input(&t, "u", KN_DT_F32, 2 + 3 - k, ud, 0, -5, 5);
      th_node(&t, KN_OP_SCATTER_ND, "snd", TH_INS(x, ind, upd), 3, 1);
      th_attr_string(&t, "reduction", reds[r]);
      th_check(&t, 1);
      th_free(&t);
    }
  th t; /* one update row: indices of shape [k] */
  th_init(&t, 18);
  int x = th_input(&t, "x", KN_DT_F32, 2, TH_DIMS(4, 5), 0, -5, 5);
  int ind = th_input(&t, "i", KN_DT_I64, 1, TH_DIMS(1), 0, -4, 3);
  int upd = th_input(&t, "u", KN_DT_F32, 1, TH_DIMS(5), 0, -5, 5);
  th_node(&t, KN_OP_SCATTER_ND, "snd", TH_INS(x, ind, upd), 3, 1);
  th_attr_string(&t, "reduction", "add");
  th_check(&t, 1);
  th_free(&t);
}

static void test_tensor_scatter(void **state) {
  (void)state;
  for (int circ = 0; circ < 2; circ++)
    for (int with_idx = 0; with_idx < 2; with_idx++) {
      th t;
      th_init(&t, 24);
      int x = th_input(&t, "past", KN_DT_F32, 4, TH_DIMS(2, 3, 6, 4), 0, -5, 5);
      int u = th_input(&t, "upd", KN_DT_F32, 4, TH_DIMS(2, 3, 2, 4), 0, -5, 5);
      int w = th_input(&t, "wi", KN_DT_I64, 1, TH_DIMS(2), 0, 0, circ ? 5 : 4);
      th_node(&t, KN_OP_TENSOR_SCATTER, "ts", TH_INS(x, u, w), with_idx ? 3 : 2, 1);
      th_attr_string(&t, "mode", circ ? "circular" : "linear");
      th_check(&t, 1);
      th_free(&t);
    }
}

static void test_gather_nd_one_hot_eye(void **state) {
  (void)state;
  for (int b = 0; b < 2; b++)
    for (int k = 1; k <= 2; k++) {
      th t;
      th_init(&t, 13);
      int x = th_input(&t, "x", KN_DT_F32, 3, TH_DIMS(2, 3, 4), 0, -5, 5);
      int ind = th_input(&t, "i", KN_DT_I64, 3, (int64_t[]){2, 3, k}, 0, -2, 1);
      th_node(&t, KN_OP_GATHER_ND, "gnd", TH_INS(x, ind), 2, 1);
      th_attr_int(&t, "batch_dims", b);
      th_check(&t, 1);
      th_free(&t);
    }
  for (int axis = -3; axis < 3; axis++) {
    th t;
    th_init(&t, 11);
    int ind = th_input(&t, "i", axis & 1 ? KN_DT_F32 : KN_DT_I64, 2, TH_DIMS(2, 3), 1u, -6, 6);
    int depth = th_const_scalar(&t, "depth", KN_DT_I64, 5);
    int val = th_input(&t, "v", KN_DT_F32, 1, TH_DIMS(2), 0, -5, 5);
    th_node(&t, KN_OP_ONE_HOT, "oh", TH_INS(ind, depth, val), 3, 1);
    th_attr_int(&t, "axis", axis);
    th_check(&t, 2);
    th_free(&t);
  }
  for (int k = -3; k <= 4; k++) {
    th t;
    th_init(&t, 9);
    int x = th_input(&t, "x", KN_DT_I32, 2, TH_DIMS(3, 4), 0, -5, 5);
    th_node(&t, KN_OP_EYE_LIKE, "eye", &x, 1, 1);
    th_attr_int(&t, "k", k);
    if (k & 1) th_attr_int(&t, "dtype", 1);
    th_check(&t, 1);
    th_free(&t);
  }
}

static void test_reverse_sequence(void **state) {
  (void)state;
  for (int ba = 0; ba < 2; ba++) {
    th t;
    th_init(&t, 10);
    int x = th_input(&t, "x", KN_DT_F32, 3, ba ? TH_DIMS(5, 3, 2) : TH_DIMS(3, 5, 2), 0, -5, 5);
    int len = th_input(&t, "len", KN_DT_I64, 1, TH_DIMS(3), 0, 0, 5);
    th_node(&t, KN_OP_REVERSE_SEQUENCE, "rs", TH_INS(x, len), 2, 1);
    th_attr_int(&t, "batch_axis", ba);
    th_attr_int(&t, "time_axis", 1 - ba);
    th_check(&t, 1);
    th_free(&t);
  }
}

static void einsum_case(const char *eq, int n, const int *ranks, const int64_t (*dims)[4], uint32_t mask0) {
  th t;
  th_init(&t, 12);
  int ins[3];
  for (int i = 0; i < n; i++)
    ins[i] = th_input(&t, i ? "b" : "a", KN_DT_F32, ranks[i], dims[i], i ? 0 : mask0, -2, 2);
  th_node(&t, KN_OP_EINSUM, "es", ins, n, 1);
  th_attr_string(&t, "equation", eq);
  th_check(&t, 2);
  th_free(&t);
}

static void test_einsum(void **state) {
  (void)state;
  einsum_case("ij,jk->ik", 2, (int[]){2, 2}, (const int64_t[][4]){{3, 4}, {4, 5}}, 0);
  einsum_case("bij,bjk->bik", 2, (int[]){3, 3}, (const int64_t[][4]){{1, 3, 4}, {1, 4, 5}}, 0);
  einsum_case("ii->i", 1, (int[]){2}, (const int64_t[][4]){{4, 4}}, 0);
  einsum_case("ii", 1, (int[]){2}, (const int64_t[][4]){{4, 4}}, 0); /* trace, implicit output */
  einsum_case("...ij->...ji", 1, (int[]){3}, (const int64_t[][4]){{1, 3, 4}}, 1u); /* batched */
  einsum_case("i,i", 2, (int[]){1, 1}, (const int64_t[][4]){{5}, {5}}, 0);
  einsum_case("ij->", 1, (int[]){2}, (const int64_t[][4]){{3, 4}}, 0);
  einsum_case("ba,ca", 2, (int[]){2, 2}, (const int64_t[][4]){{3, 4}, {2, 4}}, 0); /* implicit: bc */
  einsum_case("...j,j->...", 2, (int[]){3, 1}, (const int64_t[][4]){{2, 1, 4}, {4}}, 0);
  einsum_case("i,j->ij", 2, (int[]){1, 1}, (const int64_t[][4]){{3}, {4}}, 0);
  th t;
  th_init(&t, 12);
  int a = th_input(&t, "a", KN_DT_F32, 2, TH_DIMS(3, 4), 0, -2, 2);
  th_node(&t, KN_OP_EINSUM, "es", &a, 1, 1);
  th_attr_string(&t, "equation", "ijk->i");
  assert_int_equal(kn_infer_shapes(&t.g, &t.d), -1); /* three labels for a matrix */
  assert_non_null(strstr(t.d.lines[0], "equation"));
  th_free(&t);
}

static void test_det(void **state) {
  (void)state;
  for (int m = 1; m <= 4; m++) {
    th t;
    th_init(&t, 11);
    int x = th_input(&t, "x", KN_DT_F32, 3, (int64_t[]){3, m, m}, 1u, -2, 2);
    th_node(&t, KN_OP_DET, "det", &x, 1, 1);
    th_check(&t, 2);
    th_free(&t);
  }
  th t;
  th_init(&t, 11);
  int x = th_input(&t, "x", KN_DT_F32, 2, TH_DIMS(5, 5), 0, -2, 2);
  th_node(&t, KN_OP_DET, "det", &x, 1, 1);
  assert_int_equal(kn_infer_shapes(&t.g, &t.d), -1);
  assert_non_null(strstr(t.d.lines[0], "at most 4"));
  th_free(&t);
}

/* TopK through kn_pass_split_topk: the graph's TE against the reference
 * (which sorts); small integers give many ties. */
static void topk_case(kn_dtype dt, int64_t axis, int64_t k, int largest) {
  th t;
  th_init(&t, 11);
  int x = th_input(&t, "x", dt, 3, TH_DIMS(2, 5, 6), 0, kn_dtype_is_signed(dt) || kn_dtype_is_float(dt) ? -3 : 0, 3);
  int kv = th_const_ints(&t, "k", 1, &k);
  th_node(&t, KN_OP_TOP_K, "topk", TH_INS(x, kv), 2, 2);
  th_attr_int(&t, "axis", axis);
  th_attr_int(&t, "largest", largest);
  th_infer(&t);
  void *inputs[1] = {th_make_input(&t, 0, 1)};
  void *want[2];
  for (int o = 0; o < 2; o++) {
    int v = t.g.outputs[o];
    want[o] = calloc(1, (size_t)(th_numel(&t, v, 1) + 1) * kn_dtype_size(t.g.values[v].dtype));
  }
  assert_int_equal(kn_ref_run_graph(&t.g, (const void *const *)inputs, want, 1, &t.d), 0);
  assert_int_equal(kn_pass_split_topk(&t.g, &t.d), 0);
  assert_int_equal(kn_infer_shapes(&t.g, &t.d), 0);
  th_check_graph_outputs(&t, 1, inputs, want);
  free(want[0]), free(want[1]), free(inputs[0]);
  th_free(&t);
}

static void test_top_k(void **state) {
  (void)state;
  for (int axis = -3; axis < 3; axis++)
    for (int largest = 0; largest < 2; largest++) {
      topk_case(KN_DT_F32, axis, 2, largest);
      topk_case(KN_DT_I32, axis, 1, largest);
    }
  topk_case(KN_DT_U8, 1, 5, 1);
  topk_case(KN_DT_F32, 2, 0, 1);
  /* hand-checked ties: [3, 1, 3, 2] -> values [3, 3, 2], indices [0, 2, 3] */
  th t;
  th_init(&t, 11);
  float xs[4] = {3, 1, 3, 2};
  int x = th_input_data(&t, "x", KN_DT_F32, 1, TH_DIMS(4), 0, xs);
  int kv = th_const_ints(&t, "k", 1, (int64_t[]){3});
  th_node(&t, KN_OP_TOP_K, "topk", TH_INS(x, kv), 2, 2);
  th_infer(&t);
  float vals[3];
  int64_t idx[3];
  void *outs[2] = {vals, idx};
  assert_int_equal(kn_ref_run_graph(&t.g, (const void *const *)(void *[]){xs}, outs, 1, &t.d), 0);
  assert_true(vals[0] == 3 && vals[1] == 3 && vals[2] == 2);
  assert_true(idx[0] == 0 && idx[1] == 2 && idx[2] == 3);
  th_free(&t);

  /* NaN counts as larger than any number (the ONNX reference's numpy order):
   * [NaN, 1, NaN, 3, -2, 3] -> largest indices [0, 2, 3, 5, 1], smallest
   * [4, 1, 3, 5, 0]; the TE (through kn_pass_split_topk) agrees with the
   * reference, NaN values included */
  float xn[6] = {NAN, 1, NAN, 3, -2, 3};
  const int64_t want_idx[2][5] = {{4, 1, 3, 5, 0}, {0, 2, 3, 5, 1}};
  for (int largest = 0; largest < 2; largest++) {
    th_init(&t, 11);
    x = th_input_data(&t, "x", KN_DT_F32, 1, TH_DIMS(6), 0, xn);
    kv = th_const_ints(&t, "k", 1, (int64_t[]){5});
    th_node(&t, KN_OP_TOP_K, "topk", TH_INS(x, kv), 2, 2);
    th_attr_int(&t, "largest", largest);
    th_infer(&t);
    float nv[5];
    int64_t ni[5];
    void *nouts[2] = {nv, ni};
    assert_int_equal(kn_ref_run_graph(&t.g, (const void *const *)(void *[]){xn}, nouts, 1, &t.d), 0);
    for (int i = 0; i < 5; i++) assert_int_equal(ni[i], want_idx[largest][i]);
    assert_int_equal(kn_pass_split_topk(&t.g, &t.d), 0);
    assert_int_equal(kn_infer_shapes(&t.g, &t.d), 0);
    th_check_graph_outputs(&t, 1, (void *[]){xn}, nouts);
    th_free(&t);
  }
}

static void test_windows(void **state) {
  (void)state;
  const kn_op ops[3] = {KN_OP_HANN_WINDOW, KN_OP_HAMMING_WINDOW, KN_OP_BLACKMAN_WINDOW};
  for (int i = 0; i < 3; i++) {
    th t;
    th_init(&t, 17);
    int s = th_const_scalar(&t, "size", KN_DT_I64, 8);
    th_node(&t, ops[i], kn_op_name(ops[i]), &s, 1, 1);
    th_attr_int(&t, "periodic", 0);
    th_infer(&t);
    float w[8];
    assert_int_equal(kn_ref_run_graph(&t.g, NULL, (void *[]){w}, 1, &t.d), 0);
    /* symmetric windows: w[i] == w[7 - i]; Hann ends at 0, Hamming at 0.08696 */
    for (int j = 0; j < 8; j++) assert_true(w[j] - w[7 - j] < 1e-6f && w[7 - j] - w[j] < 1e-6f);
    float end = i == 0 ? 0.0f : i == 1 ? 4.0f / 46 : 0.0f;
    assert_true(w[0] - end < 1e-6f && end - w[0] < 1e-6f);
    th_free(&t);
  }
  th t; /* the size must be known */
  th_init(&t, 17);
  int s = th_input(&t, "size", KN_DT_I64, 0, NULL, 0, 4, 4);
  th_node(&t, KN_OP_HANN_WINDOW, "hann", &s, 1, 1);
  assert_int_equal(kn_infer_shapes(&t.g, &t.d), -1);
  assert_non_null(strstr(t.d.lines[0], "size"));
  th_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cum),          cmocka_unit_test(test_bitwise),
      cmocka_unit_test(test_scatter_elements), cmocka_unit_test(test_scatter_nd),
      cmocka_unit_test(test_tensor_scatter), cmocka_unit_test(test_gather_nd_one_hot_eye),
      cmocka_unit_test(test_reverse_sequence), cmocka_unit_test(test_einsum),
      cmocka_unit_test(test_det),          cmocka_unit_test(test_top_k),
      cmocka_unit_test(test_windows),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
