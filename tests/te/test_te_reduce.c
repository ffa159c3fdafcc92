/* test_te_reduce.c — reductions and normalisations (te_ops_reduce.c and the
 * global pools of te_ops_nn.c): Reduce{Mean,Sum,Max,Min} over attribute /
 * input axes with keepdims and noop_with_empty_axes, Softmax and LogSoftmax
 * on every axis (opset 13 and the flattening opset-11 form), LayerNorm with
 * its three outputs, Global{Average,Max}Pool and the NHWC average.
 * Oracle: kn_ref_run_graph (th_check also checks that reductions sit only at
 * the top of their own computes). */
#include <math.h>
#include <string.h>

#include "ir/ref/ref_eval.h"
#include "tests/te/te_harness.h"

/* axes: n_axes < 0 = none given; as_input: opset-18 style input */
static void reduce_case(kn_op op, int64_t opset, int n_axes, const int64_t *axes, bool as_input,
                        int keepdims, int noop) {
  th t;
  th_init(&t, opset);
  int x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(2, 3, 4, 5), 1u, -2, 2);
  int ins[2] = {x, -1};
  if (as_input && n_axes >= 0) ins[1] = th_const_ints(&t, "axes", n_axes, axes);
  th_node(&t, op, kn_op_name(op), ins, ins[1] >= 0 ? 2 : 1, 1);
  if (!as_input && n_axes >= 0) th_attr_ints(&t, "axes", n_axes, axes);
  th_attr_int(&t, "keepdims", keepdims);
  if (noop) th_attr_int(&t, "noop_with_empty_axes", 1);
  th_check(&t, 2);
  th_free(&t);
}

static void test_reduce(void **state) {
  (void)state;
  const kn_op ops[] = {KN_OP_REDUCE_MEAN, KN_OP_REDUCE_SUM, KN_OP_REDUCE_MAX, KN_OP_REDUCE_MIN};
  for (int i = 0; i < 4; i++)
    for (int keep = 0; keep < 2; keep++) {
      reduce_case(ops[i], 11, 1, TH_DIMS(-1), false, keep, 0);
      reduce_case(ops[i], 11, 2, TH_DIMS(1, 3), false, keep, 0);
      reduce_case(ops[i], 11, 1, TH_DIMS(0), false, keep, 0); /* over the batch axis */
      reduce_case(ops[i], 11, -1, NULL, false, keep, 0);      /* all axes */
      reduce_case(ops[i], 18, 2, TH_DIMS(-2, 1), true, keep, 0);
      reduce_case(ops[i], 18, -1, NULL, true, keep, 1); /* noop */
    }
  reduce_case(KN_OP_REDUCE_SUM, 13, 1, TH_DIMS(2), true, 1, 0);
  reduce_case(KN_OP_REDUCE_SUM, 13, 3, TH_DIMS(0, 2, 3), true, 0, 0);
}

static void softmax_case(kn_op op, int64_t opset, int rank, int64_t axis, bool has_axis) {
  th t;
  th_init(&t, opset);
  int64_t dims[4] = {2, 3, 4, 5};
  int x = th_input(&t, "x", KN_DT_F32, rank, dims, 1u, -4, 4);
  th_node(&t, op, kn_op_name(op), &x, 1, 1);
  if (has_axis) th_attr_int(&t, "axis", axis);
  th_check(&t, 2);
  th_free(&t);
}

static void test_softmax(void **state) {
  (void)state;
  const kn_op ops[] = {KN_OP_SOFTMAX, KN_OP_LOG_SOFTMAX};
  for (int i = 0; i < 2; i++) {
    softmax_case(ops[i], 13, 2, 0, true);
    softmax_case(ops[i], 13, 2, 1, true);
    softmax_case(ops[i], 13, 2, -1, true);
    softmax_case(ops[i], 13, 3, 0, false);
    softmax_case(ops[i], 13, 4, 0, true);
    softmax_case(ops[i], 13, 4, 1, true);
    softmax_case(ops[i], 13, 4, -2, true);
    softmax_case(ops[i], 11, 3, 1, false); /* flattening form: axes 1.. */
    softmax_case(ops[i], 11, 4, 2, true);
    softmax_case(ops[i], 11, 3, 0, true);
  }
  /* the documented stage layout: max stage, sum stage reading it, epilogue */
  th t;
  th_init(&t, 13);
  int x = th_input(&t, "x", KN_DT_F32, 2, TH_DIMS(3, 6), 0, -1, 1);
  th_node(&t, KN_OP_SOFTMAX, "sm", &x, 1, 1);
  th_infer(&t);
  kn_te_tensor *y = th_te(&t, 0);
  assert_int_equal(y->body->kind, KN_E_DIV);
  kn_te_tensor *sum = y->body->u.bin.b->u.load.tensor;
  assert_int_equal(sum->rank, 1);
  assert_int_equal(sum->body->kind, KN_E_REDUCE);
  assert_int_equal(sum->body->u.reduce.op, KN_RED_SUM);
  th_free(&t);
}

static void layer_norm_case(int64_t axis, bool bias, int n_out, int scale_rank) {
  th t;
  th_init(&t, 17);
  int x = th_input(&t, "x", KN_DT_F32, 3, TH_DIMS(2, 3, 6), 1u, -2, 2);
  int64_t sd[2] = {3, 6};
  int sc = th_const_rand(&t, "scale", KN_DT_F32, scale_rank, sd + (2 - scale_rank), 0.5, 1.5);
  int b =
      bias ? th_const_rand(&t, "bias", KN_DT_F32, scale_rank, sd + (2 - scale_rank), -1, 1) : -1;
  th_node(&t, KN_OP_LAYER_NORM, "ln", TH_INS(x, sc, b), bias ? 3 : 2, n_out);
  th_attr_int(&t, "axis", axis);
  th_attr_float(&t, "epsilon", 1e-4f);
  th_check(&t, 2);
  th_free(&t);
}

static void test_layer_norm(void **state) {
  (void)state;
  layer_norm_case(-1, true, 1, 1);
  layer_norm_case(-1, false, 1, 1);
  layer_norm_case(2, true, 3, 1);
  layer_norm_case(1, true, 3, 2);
  layer_norm_case(1, false, 1, 2);
}

static void global_case(kn_op op, int rank) {
  th t;
  th_init(&t, 17);
  int64_t dims[5] = {2, 3, 4, 5, 2};
  int x = th_input(&t, "x", KN_DT_F32, rank, dims, 1u, -2, 2);
  th_node(&t, op, kn_op_name(op), &x, 1, 1);
  th_check(&t, 2);
  th_free(&t);
}

static void test_global_pools(void **state) {
  (void)state;
  for (int r = 3; r <= 5; r++) {
    global_case(KN_OP_GLOBAL_AVERAGE_POOL, r);
    global_case(KN_OP_GLOBAL_MAX_POOL, r);
  }
  global_case(KN_OP_GLOBAL_AVERAGE_POOL_NHWC, 4);
  /* NHWC stage is indexed by (n, c) */
  th t;
  th_init(&t, 17);
  int x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(1, 4, 4, 8), 1u, -2, 2);
  th_node(&t, KN_OP_GLOBAL_AVERAGE_POOL_NHWC, "gap", &x, 1, 1);
  th_infer(&t);
  kn_te_tensor *y = th_te(&t, 0);
  kn_te_tensor *s = y->body->u.bin.a->u.load.tensor;
  assert_int_equal(s->rank, 2);
  int64_t c;
  assert_true(kn_e_is_const_int(s->shape[1], &c) && c == 8);
  assert_int_equal(s->body->u.reduce.n_axes, 2);
  th_free(&t);
}

/* The node's one output on input x at batch 1, by the TE evaluation into te
 * and by the reference into ref. */
static void eval_both(th *t, const float *x, void *te, void *ref) {
  void *data[1] = {(void *)x}, *refs[1] = {ref};
  th_infer(t);
  th_eval(t, 0, 1, data, te);
  assert_int_equal(kn_ref_run_graph(&t->g, (const void *const *)data, refs, 1, &t->d), 0);
}

/* A NaN in a ReduceMax row or a MaxPool window gives NaN (numpy's max, the
 * ONNX reference; ONNX Runtime's result depends on where the NaN sits), in
 * the TE evaluation and in the reference. */
static void test_max_nan(void **state) {
  (void)state;
  const float x[8] = {1, NAN, 3, 2, 5, 4, -1, 0};
  for (int pool = 0; pool < 2; pool++) {
    th t;
    th_init(&t, 17);
    int in = th_input_data(&t, "x", KN_DT_F32, 4, TH_DIMS(1, 1, 2, 4), 0, x);
    th_node(&t, pool ? KN_OP_MAX_POOL : KN_OP_REDUCE_MAX, "m", &in, 1, 1);
    if (pool) {
      th_attr_ints(&t, "kernel_shape", 2, TH_DIMS(2, 2));
      th_attr_ints(&t, "strides", 2, TH_DIMS(2, 2));
    } else {
      th_attr_ints(&t, "axes", 1, TH_DIMS(3));
    }
    /* pool: windows {1, NaN, 5, 4} and {3, 2, -1, 0}; reduce: rows {1, NaN, 3, 2} and {5, 4, -1, 0} */
    float want[2] = {NAN, pool ? 3.0f : 5.0f}, te[2], ref[2];
    eval_both(&t, x, te, ref);
    for (int i = 0; i < 2; i++) {
      assert_true(isnan(te[i]) == isnan(want[i]) && isnan(ref[i]) == isnan(want[i]));
      if (!isnan(want[i])) assert_true(te[i] == want[i] && ref[i] == want[i]);
    }
    th_free(&t);
  }
}

/* ArgMax / ArgMin pick a NaN (the first, or with select_last_index the
 * last), Hardmax puts its 1 there: numpy's argmax (ONNX Runtime's pick
 * depends on where the NaN sits). TE evaluation and reference alike. */
static void test_arg_nan(void **state) {
  (void)state;
  const float x[8] = {1, NAN, 3, NAN, 5, 4, -1, 0};
  const kn_op ops[4] = {KN_OP_ARG_MAX, KN_OP_ARG_MIN, KN_OP_ARG_MAX, KN_OP_HARDMAX};
  const int64_t want[4][2] = {{1, 0}, {1, 2}, {3, 0}, {1, 4}}; /* Hardmax: flat index of its 1 */
  for (int k = 0; k < 4; k++) {
    th t;
    th_init(&t, 17);
    int in = th_input_data(&t, "x", KN_DT_F32, 2, TH_DIMS(2, 4), 0, x);
    th_node(&t, ops[k], "a", &in, 1, 1);
    th_attr_int(&t, "axis", 1);
    if (k < 3) th_attr_int(&t, "keepdims", 0);
    if (k == 2) th_attr_int(&t, "select_last_index", 1);
    union {
      int64_t i[8];
      float f[8];
    } te, ref;
    eval_both(&t, x, &te, &ref);
    for (int r = 0; r < 2; r++) {
      if (k < 3) {
        assert_int_equal(te.i[r], want[k][r]);
        assert_int_equal(ref.i[r], want[k][r]);
        continue;
      }
      for (int j = 0; j < 4; j++) {
        float one = r * 4 + j == want[k][r] ? 1.0f : 0.0f;
        assert_true(te.f[r * 4 + j] == one && ref.f[r * 4 + j] == one);
      }
    }
    th_free(&t);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_max_nan),
      cmocka_unit_test(test_arg_nan),
      cmocka_unit_test(test_reduce),
      cmocka_unit_test(test_softmax),
      cmocka_unit_test(test_layer_norm),
      cmocka_unit_test(test_global_pools),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
