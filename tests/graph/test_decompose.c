/* test_decompose.c — kn_pass_decompose (ir/passes/pass_decompose*.c): each
 * composite is rewritten into primitive ops, which the reference interpreter
 * then runs; the results are checked against values worked out here by hand
 * or by a naive loop (the conformance runner checks the compiled kernels
 * against ONNX's own test data). Must-fail cases check the diagnostic. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/graph/graph_util.h"

/* NLL, mean reduction, class weights and an ignored target. */
static void nll_mean_weight_ignore(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.opset = 22;
  tg_input(&g, "x", KN_DT_F32, "2,3,2");
  tg_const_i64(&g, "t", "2,2", (int64_t[]){0, 2, 1, 1});
  tg_const_f(&g, "w", "3", (float[]){0.5f, 2.0f, 4.0f});
  int n = tg_node(&g, KN_OP_NLL_LOSS, "nll", "x,t,w", "loss");
  tg_attr_i(&g, n, "ignore_index", 1);
  tg_output(&g, "loss");
  tg_decompose_ok(&g, KN_OP_NLL_LOSS);
  float x[12], loss = 0;
  for (int i = 0; i < 12; i++) x[i] = (float)i * 0.25f - 1.0f;
  /* x[n][c][d] = x[n*6 + c*2 + d]; targets (n,d): (0,0)=0 (0,1)=2, (1,*) ignored */
  float expect = (-x[0] * 0.5f - x[5] * 4.0f) / (0.5f + 4.0f);
  const void *in[1] = {x};
  void *out[1] = {&loss};
  tg_ref_run(&g, in, out);
  assert_float_equal(loss, expect, 1e-6);
  kn_graph_free(&g);
}

/* SoftmaxCrossEntropyLoss, no reduction, with the log_prob output. */
static void sce_none_log_prob(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.opset = 13;
  tg_input(&g, "x", KN_DT_F32, "2,3");
  tg_const_i64(&g, "t", "2", (int64_t[]){2, 0});
  int n = tg_node(&g, KN_OP_SCE_LOSS, "sce", "x,t", "loss,logp");
  tg_attr_s(&g, n, "reduction", "none");
  tg_output(&g, "loss");
  tg_output(&g, "logp");
  tg_decompose_ok(&g, KN_OP_SCE_LOSS);
  float x[6] = {1, 2, 3, -1, 0, 1}, loss[2], logp[6];
  const void *in[1] = {x};
  void *out[2] = {loss, logp};
  tg_ref_run(&g, in, out);
  for (int r = 0; r < 2; r++) {
    double s = 0;
    for (int k = 0; k < 3; k++) s += exp(x[r * 3 + k]);
    for (int k = 0; k < 3; k++) assert_float_equal(logp[r * 3 + k], x[r * 3 + k] - log(s), 1e-5);
  }
  assert_float_equal(loss[0], -logp[2], 1e-6);
  assert_float_equal(loss[1], -logp[3], 1e-6);
  kn_graph_free(&g);
}

/* SoftmaxCrossEntropyLoss at opset 12 over [N,C,D] (LogSoftmax there would
 * flatten from axis 1, so the rewrite spells log-softmax out). */
static void sce_opset12_spatial(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.opset = 12;
  tg_input(&g, "x", KN_DT_F32, "1,3,2");
  tg_const_i64(&g, "t", "1,2", (int64_t[]){1, 2});
  int n = tg_node(&g, KN_OP_SCE_LOSS, "sce", "x,t", "loss");
  tg_attr_s(&g, n, "reduction", "sum");
  tg_output(&g, "loss");
  tg_decompose_ok(&g, KN_OP_SCE_LOSS);
  float x[6] = {0.5f, -1, 2, 0, -0.5f, 3}, loss;
  const void *in[1] = {x};
  void *out[1] = {&loss};
  tg_ref_run(&g, in, out);
  double expect = 0;
  for (int dd = 0; dd < 2; dd++) {
    double s = 0;
    for (int k = 0; k < 3; k++) s += exp(x[k * 2 + dd]);
    int cls = dd == 0 ? 1 : 2;
    expect -= x[cls * 2 + dd] - log(s);
  }
  assert_float_equal(loss, expect, 1e-5);
  kn_graph_free(&g);
}

/* GroupNormalization on a batch-symbolic input, against a naive loop. */
static void group_norm_batch(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.opset = 21;
  g.max_batch = 2;
  tg_input(&g, "x", KN_DT_F32, "N*1,4,3");
  tg_const_f(&g, "s", "4", (float[]){1, 2, 3, 4});
  tg_const_f(&g, "b", "4", (float[]){0, 1, 0, -1});
  int n = tg_node(&g, KN_OP_GROUP_NORM, "gn", "x,s,b", "y");
  tg_attr_i(&g, n, "num_groups", 2);
  tg_output(&g, "y");
  tg_decompose_ok(&g, KN_OP_GROUP_NORM);
  float x[24], y[24];
  for (int i = 0; i < 24; i++) x[i] = sinf((float)i);
  const void *in[1] = {x};
  void *out[1] = {y};
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_ref_run_graph(&g, in, out, 2, &d), 0);
  kn_diag_free(&d);
  const float s[4] = {1, 2, 3, 4}, b[4] = {0, 1, 0, -1};
  for (int nb = 0; nb < 2; nb++)
    for (int grp = 0; grp < 2; grp++) {
      const float *p = x + nb * 12 + grp * 6;
      double mean = 0, var = 0;
      for (int i = 0; i < 6; i++) mean += p[i] / 6.0;
      for (int i = 0; i < 6; i++) var += (p[i] - mean) * (p[i] - mean) / 6.0;
      for (int i = 0; i < 6; i++) {
        int ch = grp * 2 + i / 3;
        double want = (p[i] - mean) / sqrt(var + 1e-5) * s[ch] + b[ch];
        assert_float_equal(y[nb * 12 + grp * 6 + i], want, 1e-4);
      }
    }
  kn_graph_free(&g);
}

/* QuantizeLinear rounds half to even and saturates. */
static void quantize_round_saturate(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.opset = 21;
  tg_input(&g, "x", KN_DT_F32, "8");
  tg_const_f(&g, "s", "", (float[]){0.5f});
  tg_const(&g, "z", KN_DT_I8, "", (int8_t[]){-1});
  tg_node(&g, KN_OP_QUANTIZE_LINEAR, "q", "x,s,z", "y");
  tg_output(&g, "y");
  tg_decompose_ok(&g, KN_OP_QUANTIZE_LINEAR);
  float x[8] = {0.25f, 0.75f, 1.25f, -0.25f, -0.75f, 100.0f, -100.0f, 1.0f};
  int8_t y[8];
  const int8_t expect[8] = {-1, 1, 1, -1, -3, 127, -128, 1};
  const void *in[1] = {x};
  void *out[1] = {y};
  tg_ref_run(&g, in, out);
  for (int i = 0; i < 8; i++) assert_int_equal(y[i], expect[i]);
  kn_graph_free(&g);
}

/* QuantizeLinear to float8e4m3fn: x / scale cast with saturation (448 the
 * largest finite), no rounding to integers, -0 kept; DequantizeLinear back. */
static void quantize_float8(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.opset = 21;
  tg_input(&g, "x", KN_DT_F32, "4");
  tg_const_f(&g, "s", "", (float[]){2.0f});
  tg_const(&g, "z", KN_DT_F8E4M3FN, "", (uint8_t[]){0});
  tg_node(&g, KN_OP_QUANTIZE_LINEAR, "q", "x,s,z", "y");
  tg_node(&g, KN_OP_DEQUANTIZE_LINEAR, "dq", "y,s", "w");
  tg_output(&g, "y");
  tg_output(&g, "w");
  tg_decompose_ok(&g, KN_OP_QUANTIZE_LINEAR);
  assert_int_equal(tg_count(&g, KN_OP_DEQUANTIZE_LINEAR), 0);
  float x[4] = {2.0f, 1000.0f, -0.0f, 3.0f}, w[4];
  uint8_t y[4];
  const uint8_t expect[4] = {0x38, 0x7e, 0x80, 0x3c}; /* 1, 448, -0, 1.5 */
  const float expect_w[4] = {2.0f, 896.0f, -0.0f, 3.0f};
  const void *in[1] = {x};
  void *out[2] = {y, w};
  tg_ref_run(&g, in, out);
  for (int i = 0; i < 4; i++) assert_int_equal(y[i], expect[i]);
  for (int i = 0; i < 4; i++) assert_float_equal(w[i], expect_w[i], 0);
  kn_graph_free(&g);
}

/* DynamicQuantizeLinear: scale (max(0, x) - min(0, x)) / 255, and 1/255 when
 * x has no range (all zeros), as the ONNX reference and ORT. */
static void dynamic_quantize_scale(void **state) {
  (void)state;
  const float inputs[2][4] = {{-3.0f, -1.0f, 0.5f, 2.1f}, {0, 0, 0, 0}};
  const float want_scale[2] = {5.1f / 255, 1.0f / 255};
  const uint8_t want_zp[2] = {150, 0}; /* round(3 / (5.1 / 255)) */
  for (int k = 0; k < 2; k++) {
    kn_graph g;
    kn_graph_init(&g);
    g.opset = 11;
    tg_input(&g, "x", KN_DT_F32, "4");
    tg_node(&g, KN_OP_DYNAMIC_QUANTIZE_LINEAR, "dq", "x", "y,s,z");
    tg_output(&g, "y");
    tg_output(&g, "s");
    tg_output(&g, "z");
    tg_decompose_ok(&g, KN_OP_DYNAMIC_QUANTIZE_LINEAR);
    uint8_t y[4], zp;
    float scale;
    const void *in[1] = {inputs[k]};
    void *out[3] = {y, &scale, &zp};
    tg_ref_run(&g, in, out);
    assert_float_equal(scale, want_scale[k], 1e-6);
    assert_int_equal(zp, want_zp[k]);
    if (k == 1)
      for (int i = 0; i < 4; i++) assert_int_equal(y[i], 0);
    kn_graph_free(&g);
  }
}

/* MatMulInteger with per-row zero points of A, exact in int32. */
static void matmul_integer_zero_points(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.opset = 10;
  tg_input(&g, "a", KN_DT_U8, "2,3");
  tg_const(&g, "b", KN_DT_U8, "3,1", (uint8_t[]){255, 255, 255});
  tg_const(&g, "az", KN_DT_U8, "2", (uint8_t[]){0, 1});
  tg_const(&g, "bz", KN_DT_U8, "", (uint8_t[]){0});
  tg_node(&g, KN_OP_MATMUL_INTEGER, "mm", "a,b,az,bz", "y");
  tg_output(&g, "y");
  tg_decompose_ok(&g, KN_OP_MATMUL_INTEGER);
  uint8_t a[6] = {255, 255, 255, 1, 2, 3};
  int32_t y[2];
  const void *in[1] = {a};
  void *out[1] = {y};
  tg_ref_run(&g, in, out);
  assert_int_equal(y[0], 3 * 255 * 255);
  assert_int_equal(y[1], (0 + 1 + 2) * 255);
  kn_graph_free(&g);
}

/* Bad attributes and dtypes are diagnosed with the node and attribute. */
static void must_fail(void **state) {
  (void)state;
  struct {
    kn_op op;
    const char *attr;
    int64_t value;
    const char *needle;
  } cases[] = {
      {KN_OP_LP_NORMALIZATION, "p", 3, "node 'bad' (LpNormalization): attribute 'p' = 3"},
      {KN_OP_LP_POOL, "ceil_mode", 1, "attribute 'ceil_mode' = 1 is not supported"},
      {KN_OP_GROUP_NORM, "num_groups", 3, "attribute 'num_groups' = 3 does not divide 4 channels"},
      {KN_OP_QUANTIZE_LINEAR, "output_dtype", 6, "output dtype int32 is not supported"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    kn_graph g;
    kn_graph_init(&g);
    g.opset = 21;
    tg_input(&g, "x", KN_DT_F32, "1,4,3");
    tg_const_f(&g, "s", "4", (float[]){1, 1, 1, 1});
    const char *ins = cases[k].op == KN_OP_GROUP_NORM ? "x,s,s" : cases[k].op == KN_OP_QUANTIZE_LINEAR ? "x,s" : "x";
    int n = tg_node(&g, cases[k].op, "bad", ins, "y");
    tg_attr_i(&g, n, cases[k].attr, cases[k].value);
    if (cases[k].op == KN_OP_LP_POOL) tg_attr_ints(&g, n, "kernel_shape", 1, (int64_t)2);
    tg_output(&g, "y");
    tg_decompose_fails(&g, cases[k].needle);
    kn_graph_free(&g);
  }
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "2,3");
  tg_const_i64(&g, "t", "2", (int64_t[]){0, 1});
  int n = tg_node(&g, KN_OP_NLL_LOSS, "bad", "x,t", "y");
  tg_attr_s(&g, n, "reduction", "avg");
  tg_output(&g, "y");
  tg_decompose_fails(&g, "node 'bad' (NegativeLogLikelihoodLoss): attribute 'reduction' = 'avg'");
  kn_graph_free(&g);
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "1,2,3");
  tg_node(&g, KN_OP_INSTANCE_NORM, "bad", "x", "y");
  tg_output(&g, "y");
  tg_decompose_fails(&g, "node 'bad' (InstanceNormalization): required input 1 is missing");
  kn_graph_free(&g);
  /* a zero point of another dtype than its input (int8 for uint8 A) */
  kn_graph_init(&g);
  tg_input(&g, "a", KN_DT_U8, "2,3");
  tg_input(&g, "b", KN_DT_U8, "3,2");
  tg_const(&g, "az", KN_DT_I8, "", (int8_t[]){1});
  tg_node(&g, KN_OP_MATMUL_INTEGER, "bad", "a,b,az", "y");
  tg_output(&g, "y");
  tg_decompose_fails(&g, "node 'bad' (MatMulInteger): zero point of input A is int8; it must have the input's dtype uint8");
  kn_graph_free(&g);
  /* NLL shapes: target = input without its class axis, weight one per class */
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "2,3,4");
  tg_const_i64(&g, "t", "2,5", (int64_t[]){0, 1, 2, 0, 1, 2, 0, 1, 2, 0});
  tg_node(&g, KN_OP_NLL_LOSS, "bad", "x,t", "y");
  tg_output(&g, "y");
  tg_decompose_fails(&g, "node 'bad' (NegativeLogLikelihoodLoss): target [2,5] must be [2,4]");
  kn_graph_free(&g);
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "2,3");
  tg_const_i64(&g, "t", "2", (int64_t[]){0, 1});
  tg_const_f(&g, "w", "4", (float[]){1, 1, 1, 1});
  tg_node(&g, KN_OP_SCE_LOSS, "bad", "x,t,w", "y");
  tg_output(&g, "y");
  tg_decompose_fails(&g, "node 'bad' (SoftmaxCrossEntropyLoss): weight [4] must be [3]");
  kn_graph_free(&g);
}

/* A shape error in a node the decomposition made leads with the composite:
 * the model's node, not only the generated "mm/MatMul_3"; a composite made
 * by another rewrite names the whole chain, outermost first. */
static void errors_name_the_composite(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.max_batch = 1;
  tg_input(&g, "a", KN_DT_U8, "2,3");
  tg_input(&g, "b", KN_DT_U8, "4,5");
  tg_node(&g, KN_OP_MATMUL_INTEGER, "mm", "a,b", "y");
  tg_output(&g, "y");
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_pass_decompose(&g, &d), 0); /* the rewrite itself is fine */
  kn_diag_free(&d);
  tg_infer_fails(&g, "node 'mm' (MatMulInteger): its decomposition fails: node 'mm/MatMul_");
  tg_infer_fails(&g, "(MatMul): inner dims differ: [2,3] x [4,5]");
  kn_graph_free(&g);

  /* the MatMulInteger as if inlined from a Loop's body */
  kn_graph_init(&g);
  g.max_batch = 1;
  tg_input(&g, "a", KN_DT_U8, "2,3");
  tg_input(&g, "b", KN_DT_U8, "4,5");
  int loop = tg_node(&g, KN_OP_RELU, "loop", "a", "unused"); /* stands for the Loop */
  g.nodes[loop].op_type = "Loop";
  int first = g.n_nodes;
  tg_node(&g, KN_OP_MATMUL_INTEGER, "loop#n0/mm", "a,b", "y");
  kn_graph_mark_origin(&g, first, loop);
  g.nodes[loop].dead = true;
  tg_output(&g, "y");
  kn_diag_init(&d);
  assert_int_equal(kn_pass_decompose(&g, &d), 0);
  kn_diag_free(&d);
  tg_infer_fails(&g, "node 'loop' (Loop): its inlined body fails: node 'loop#n0/mm' (MatMulInteger): its "
                     "decomposition fails: node 'loop#n0/mm/MatMul_");
  kn_graph_free(&g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(nll_mean_weight_ignore), cmocka_unit_test(sce_none_log_prob),
      cmocka_unit_test(sce_opset12_spatial),
      cmocka_unit_test(group_norm_batch),       cmocka_unit_test(quantize_round_saturate),
      cmocka_unit_test(quantize_float8),
      cmocka_unit_test(matmul_integer_zero_points), cmocka_unit_test(dynamic_quantize_scale),
      cmocka_unit_test(must_fail),
      cmocka_unit_test(errors_name_the_composite),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
