/* test_ref_eval.c — the reference interpreter against hand-computed values,
 * one small case (or more) per op, plus batch coefficients and the whole-
 * graph driver. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/graph/graph_util.h"

#define I(x) ((int64_t)(x))

/* Infers shapes and evaluates node 0 (the only node) of g; asserts rc. */
static void eval_rc(kn_graph *g, int want_rc) {
  tg_infer_ok(g);
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(g->n_nodes, 1);
  int rc = kn_ref_eval_node(g, 0, &d);
  if (rc != want_rc) kn_diag_print(&d, "eval");
  kn_diag_free(&d);
  assert_int_equal(rc, want_rc);
}

static void eval_ok(kn_graph *g) { eval_rc(g, 0); }

static void expect_f(const kn_graph *g, const char *name, const char *shape, const double *want, double tol) {
  const kn_value *v = &g->values[tg_value(g, name)];
  kn_shape s = tg_shape(shape);
  char buf[128];
  if (!kn_shape_equal(&v->shape, &s)) fail_msg("'%s' has shape %s", name, kn_shape_str(&v->shape, buf, sizeof buf));
  assert_non_null(v->data);
  int64_t n = kn_shape_numel_max(&s, 1);
  for (int64_t i = 0; i < n; i++) {
    double got = kn_ref_load(v->dtype, v->data, i);
    if (!(fabs(got - want[i]) <= tol * (1 + fabs(want[i]))))
      fail_msg("'%s'[%lld] = %.9g, expected %.9g", name, (long long)i, got, want[i]);
  }
}

static void expect_i(const kn_graph *g, const char *name, const char *shape, const int64_t *want) {
  const kn_value *v = &g->values[tg_value(g, name)];
  kn_shape s = tg_shape(shape);
  assert_true(kn_shape_equal(&v->shape, &s));
  assert_non_null(v->data);
  int64_t n = kn_shape_numel_max(&s, 1);
  for (int64_t i = 0; i < n; i++) {
    int64_t got = kn_ref_load_int(v->dtype, v->data, i);
    if (got != want[i]) fail_msg("'%s'[%lld] = %lld, expected %lld", name, (long long)i, (long long)got, (long long)want[i]);
  }
}

#define D(...) ((const double[]){__VA_ARGS__})
#define L(...) ((const int64_t[]){__VA_ARGS__})

/* One unary op on x = [-2, -0.5, 0, 0.5, 2]. */
static void unary_case(kn_op op, const double *want, const char *attr, float attr_val) {
  kn_graph g;
  kn_graph_init(&g);
  tg_const_f(&g, "x", "5", (float[]){-2, -0.5f, 0, 0.5f, 2});
  int n = tg_node(&g, op, "u", "x", "y");
  if (attr) tg_attr_f(&g, n, attr, attr_val);
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "5", want, 1e-6);
  kn_graph_free(&g);
}

static void unary_ops(void **state) {
  (void)state;
  unary_case(KN_OP_RELU, D(0, 0, 0, 0.5, 2), NULL, 0);
  unary_case(KN_OP_SIGMOID, D(0.11920292, 0.37754067, 0.5, 0.62245933, 0.88079708), NULL, 0);
  unary_case(KN_OP_TANH, D(-0.96402758, -0.46211716, 0, 0.46211716, 0.96402758), NULL, 0);
  unary_case(KN_OP_ERF, D(-0.99532227, -0.52049988, 0, 0.52049988, 0.99532227), NULL, 0);
  unary_case(KN_OP_EXP, D(0.13533528, 0.60653066, 1, 1.64872127, 7.3890561), NULL, 0);
  unary_case(KN_OP_NEG, D(2, 0.5, 0, -0.5, -2), NULL, 0);
  unary_case(KN_OP_ABS, D(2, 0.5, 0, 0.5, 2), NULL, 0);
  unary_case(KN_OP_FLOOR, D(-2, -1, 0, 0, 2), NULL, 0);
  unary_case(KN_OP_CEIL, D(-2, -0, 0, 1, 2), NULL, 0);
  unary_case(KN_OP_SIN, D(-0.90929743, -0.47942554, 0, 0.47942554, 0.90929743), NULL, 0);
  unary_case(KN_OP_COS, D(-0.41614684, 0.87758256, 1, 0.87758256, -0.41614684), NULL, 0);
  unary_case(KN_OP_LEAKY_RELU, D(-0.2, -0.05, 0, 0.5, 2), "alpha", 0.1f);
  unary_case(KN_OP_LEAKY_RELU, D(-0.02, -0.005, 0, 0.5, 2), NULL, 0); /* default 0.01 */
  unary_case(KN_OP_ELU, D(-0.86466472, -0.39346934, 0, 0.5, 2), NULL, 0);
  unary_case(KN_OP_HARD_SIGMOID, D(0.1, 0.4, 0.5, 0.6, 0.9), NULL, 0);
  unary_case(KN_OP_HARD_SWISH, D(-0.33333333, -0.20833333, 0, 0.29166667, 1.66666667), NULL, 0);
  unary_case(KN_OP_SOFTPLUS, D(0.12692801, 0.47407698, 0.69314718, 0.97407698, 2.12692801), NULL, 0);
  unary_case(KN_OP_GELU, D(-0.04550026, -0.15426877, 0, 0.34573123, 1.95449974), NULL, 0);
  unary_case(KN_OP_IDENTITY, D(-2, -0.5, 0, 0.5, 2), NULL, 0);

  kn_graph g;
  kn_graph_init(&g);
  tg_const_f(&g, "x", "4", (float[]){0.25f, 1, 4, 9});
  tg_node(&g, KN_OP_SQRT, "sqrt", "x", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "4", D(0.5, 1, 2, 3), 1e-7);
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_f(&g, "x", "3", (float[]){0.25f, 1, 2.7182818f});
  tg_node(&g, KN_OP_LOG, "log", "x", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "3", D(-1.38629436, 0, 1), 1e-6);
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_f(&g, "x", "3", (float[]){0.25f, -2, 8});
  tg_node(&g, KN_OP_RECIPROCAL, "rcp", "x", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "3", D(4, -0.5, 0.125), 1e-7);
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_f(&g, "x", "2", (float[]){-3, 1});
  int n = tg_node(&g, KN_OP_GELU, "gelu_tanh", "x", "y");
  tg_attr_s(&g, n, "approximate", "tanh");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "2", D(-0.00363752, 0.84119199), 1e-5);
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const(&g, "b", KN_DT_BOOL, "3", (uint8_t[]){1, 0, 1});
  tg_node(&g, KN_OP_NOT, "not", "b", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_i(&g, "y", "3", L(0, 1, 0));
  kn_graph_free(&g);
}

static void clip_cast_dropout(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_const_f(&g, "x", "5", (float[]){-2, -0.5f, 0, 0.5f, 8});
  tg_const_f(&g, "lo", "", (float[]){-1});
  tg_const_f(&g, "hi", "", (float[]){6});
  tg_node(&g, KN_OP_CLIP, "clip", "x,lo,hi", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "5", D(-1, -0.5, 0, 0.5, 6), 0);
  kn_graph_free(&g);

  kn_graph_init(&g); /* opset < 11: bounds as attributes; only max given */
  tg_const_f(&g, "x", "3", (float[]){-2, 3, 8});
  int n = tg_node(&g, KN_OP_CLIP, "clip6", "x", "y");
  tg_attr_f(&g, n, "max", 6);
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "3", D(-2, 3, 6), 0);
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_f(&g, "x", "4", (float[]){-2.7f, -0.5f, 0.5f, 3.9f});
  n = tg_node(&g, KN_OP_CAST, "to_i64", "x", "y");
  tg_attr_i(&g, n, "to", 7);
  tg_output(&g, "y");
  eval_ok(&g);
  expect_i(&g, "y", "4", L(-2, 0, 0, 3));
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_f(&g, "x", "3", (float[]){0, 0.5f, -2});
  n = tg_node(&g, KN_OP_CAST, "to_bool", "x", "y");
  tg_attr_i(&g, n, "to", 9);
  tg_output(&g, "y");
  eval_ok(&g);
  expect_i(&g, "y", "3", L(0, 1, 1));
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_i64(&g, "x", "2", L(300, -1));
  n = tg_node(&g, KN_OP_CAST, "to_u8", "x", "y");
  tg_attr_i(&g, n, "to", 2);
  tg_output(&g, "y");
  eval_ok(&g);
  expect_i(&g, "y", "2", L(44, 255));
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_f(&g, "x", "2", (float[]){1, 2});
  tg_node(&g, KN_OP_DROPOUT, "drop", "x", "y,mask");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "2", D(1, 2), 0);
  expect_i(&g, "mask", "2", L(1, 1));
  kn_graph_free(&g);
}

/* Binary op over a = [[1,2,3],[4,5,6]] and b = [2,-1,0.5] (broadcast). */
static void binary_case(kn_op op, const double *want) {
  kn_graph g;
  kn_graph_init(&g);
  tg_const_f(&g, "a", "2,3", (float[]){1, 2, 3, 4, 5, 6});
  tg_const_f(&g, "b", "3", (float[]){2, -1, 0.5f});
  tg_node(&g, op, "bin", "a,b", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "2,3", want, 1e-7);
  kn_graph_free(&g);
}

static void binary_ops(void **state) {
  (void)state;
  binary_case(KN_OP_ADD, D(3, 1, 3.5, 6, 4, 6.5));
  binary_case(KN_OP_SUB, D(-1, 3, 2.5, 2, 6, 5.5));
  binary_case(KN_OP_MUL, D(2, -2, 1.5, 8, -5, 3));
  binary_case(KN_OP_DIV, D(0.5, -2, 6, 2, -5, 12));
  binary_case(KN_OP_POW, D(1, 0.5, 1.7320508, 16, 0.2, 2.4494897));
  binary_case(KN_OP_MAX, D(2, 2, 3, 4, 5, 6));
  binary_case(KN_OP_MIN, D(1, -1, 0.5, 2, -1, 0.5));
  binary_case(KN_OP_PRELU, D(1, 2, 3, 4, 5, 6));
  binary_case(KN_OP_EQUAL, D(0, 0, 0, 0, 0, 0));
  binary_case(KN_OP_LESS, D(1, 0, 0, 0, 0, 0));
  binary_case(KN_OP_GREATER, D(0, 1, 1, 1, 1, 1));

  kn_graph g;
  kn_graph_init(&g);
  tg_const_f(&g, "x", "4", (float[]){-2, -1, 0, 3});
  tg_const_f(&g, "slope", "1", (float[]){0.25f});
  tg_node(&g, KN_OP_PRELU, "prelu", "x,slope", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "4", D(-0.5, -0.25, 0, 3), 0);
  kn_graph_free(&g);

  kn_graph_init(&g); /* variadic Max over three inputs */
  tg_const_f(&g, "a", "3", (float[]){1, 5, -3});
  tg_const_f(&g, "b", "3", (float[]){4, 2, -7});
  tg_const_f(&g, "c", "1", (float[]){3});
  tg_node(&g, KN_OP_MAX, "max3", "a,b,c", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "3", D(4, 5, 3), 0);
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const(&g, "p", KN_DT_BOOL, "2,2", (uint8_t[]){1, 1, 0, 0});
  tg_const(&g, "q", KN_DT_BOOL, "2", (uint8_t[]){1, 0});
  tg_node(&g, KN_OP_AND, "and", "p,q", "y");
  tg_node(&g, KN_OP_OR, "or", "p,q", "z");
  tg_output(&g, "y");
  tg_infer_ok(&g);
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_ref_eval_node(&g, 0, &d), 0);
  assert_int_equal(kn_ref_eval_node(&g, 1, &d), 0);
  kn_diag_free(&d);
  expect_i(&g, "y", "2,2", L(1, 0, 0, 0));
  expect_i(&g, "z", "2,2", L(1, 1, 1, 0));
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const(&g, "c", KN_DT_BOOL, "2,1", (uint8_t[]){1, 0});
  tg_const_f(&g, "a", "3", (float[]){1, 2, 3});
  tg_const_f(&g, "b", "", (float[]){-1});
  tg_node(&g, KN_OP_WHERE, "where", "c,a,b", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "2,3", D(1, 2, 3, -1, -1, -1), 0);
  kn_graph_free(&g);
}

static void integer_arithmetic(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_const_i64(&g, "a", "4", L(7, -7, 9000000000000000001, 6));
  tg_const_i64(&g, "b", "4", L(2, 2, 1, -4));
  tg_node(&g, KN_OP_DIV, "div", "a,b", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_i(&g, "y", "4", L(3, -3, 9000000000000000001, -1)); /* truncation, exact int64 */
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_i64(&g, "a", "2", L(7, 1));
  tg_const_i64(&g, "b", "2", L(0, 1));
  tg_node(&g, KN_OP_DIV, "div0", "a,b", "y");
  tg_output(&g, "y");
  tg_infer_ok(&g);
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_ref_eval_node(&g, 0, &d), -1);
  assert_string_equal(d.lines[0], "node 'div0' (Div): integer division by zero");
  kn_diag_free(&d);
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const(&g, "a", KN_DT_I32, "3", (int32_t[]){-5, 3, 0});
  tg_node(&g, KN_OP_ABS, "abs", "a", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_i(&g, "y", "3", L(5, 3, 0));
  kn_graph_free(&g);
}

static void conv_ops(void **state) {
  (void)state;
  /* x = 1..16 as [1,1,4,4]; w = [[1,0],[0,-1]]; stride 2: x[i,j] - x[i+1,j+1]. */
  kn_graph g;
  kn_graph_init(&g);
  float x[16];
  for (int i = 0; i < 16; i++) x[i] = (float)(i + 1);
  tg_const_f(&g, "x", "1,1,4,4", x);
  tg_const_f(&g, "w", "1,1,2,2", (float[]){1, 0, 0, -1});
  tg_const_f(&g, "b", "1", (float[]){10});
  int n = tg_node(&g, KN_OP_CONV, "conv", "x,w,b", "y");
  tg_attr_ints(&g, n, "strides", 2, I(2), I(2));
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "1,1,2,2", D(5, 5, 5, 5), 0);
  kn_graph_free(&g);

  /* 3x3 ones kernel with pad 1 on a 3x3 of ones: counts of in-bounds taps. */
  kn_graph_init(&g);
  tg_const_f(&g, "x", "1,1,3,3", (float[]){1, 1, 1, 1, 1, 1, 1, 1, 1});
  tg_const_f(&g, "w", "1,1,3,3", (float[]){1, 1, 1, 1, 1, 1, 1, 1, 1});
  n = tg_node(&g, KN_OP_CONV, "conv_pad", "x,w", "y");
  tg_attr_ints(&g, n, "pads", 4, I(1), I(1), I(1), I(1));
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "1,1,3,3", D(4, 6, 4, 6, 9, 6, 4, 6, 4), 0);
  kn_graph_free(&g);

  /* Depthwise (group 2) 1x1: channel c scaled by w[c]; dilation irrelevant. */
  kn_graph_init(&g);
  tg_const_f(&g, "x", "1,2,1,2", (float[]){1, 2, 3, 4});
  tg_const_f(&g, "w", "2,1,1,1", (float[]){10, -1});
  n = tg_node(&g, KN_OP_CONV, "dw", "x,w", "y");
  tg_attr_i(&g, n, "group", 2);
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "1,2,1,2", D(10, 20, -3, -4), 0);
  kn_graph_free(&g);

  /* 1-D conv with dilation 2: y[i] = x[i] + 2 x[i+2]. */
  kn_graph_init(&g);
  tg_const_f(&g, "x", "1,1,5", (float[]){1, 2, 3, 4, 5});
  tg_const_f(&g, "w", "1,1,2", (float[]){1, 2});
  n = tg_node(&g, KN_OP_CONV, "dil", "x,w", "y");
  tg_attr_ints(&g, n, "dilations", 1, I(2));
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "1,1,3", D(7, 10, 13), 0);
  kn_graph_free(&g);

  /* NHWC form: x [1,2,2,2] (H,W,C), w [1,1,2,1] sums channels with weights. */
  kn_graph_init(&g);
  tg_const_f(&g, "x", "1,2,2,2", (float[]){1, 10, 2, 20, 3, 30, 4, 40});
  tg_const_f(&g, "w", "1,1,2,1", (float[]){1, 0.5f});
  tg_const_f(&g, "b", "1", (float[]){-1});
  tg_node(&g, KN_OP_CONV_NHWC, "conv_nhwc", "x,w,b", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "1,2,2,1", D(5, 11, 17, 23), 0);
  kn_graph_free(&g);
}

static void matmul_gemm(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_const_f(&g, "a", "2,3", (float[]){1, 2, 3, 4, 5, 6});
  tg_const_f(&g, "b", "3,2", (float[]){1, 0, 0, 1, 1, 1});
  tg_node(&g, KN_OP_MATMUL, "mm", "a,b", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "2,2", D(4, 5, 10, 11), 0);
  kn_graph_free(&g);

  /* Batched with broadcasting: [2,1,2] x [2,1] -> [2,1,1]; 1-D x 2-D. */
  kn_graph_init(&g);
  tg_const_f(&g, "a", "2,1,2", (float[]){1, 2, 3, 4});
  tg_const_f(&g, "b", "2,1", (float[]){10, 1});
  tg_node(&g, KN_OP_MATMUL, "bmm", "a,b", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "2,1,1", D(12, 34), 0);
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_f(&g, "v", "2", (float[]){1, -1});
  tg_const_f(&g, "m", "2,2,3", (float[]){1, 2, 3, 4, 5, 6, 0, 1, 0, 1, 0, 1});
  tg_node(&g, KN_OP_MATMUL, "vm", "v,m", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "2,3", D(-3, -3, -3, -1, 1, -1), 0);
  kn_graph_free(&g);

  /* Gemm: alpha A^T B^T + beta C, C broadcast from [2]. */
  kn_graph_init(&g);
  tg_const_f(&g, "a", "3,2", (float[]){1, 4, 2, 5, 3, 6}); /* A^T = [[1,2,3],[4,5,6]] */
  tg_const_f(&g, "b", "2,3", (float[]){1, 0, 1, 0, 1, 0}); /* B^T = [[1,0],[0,1],[1,0]] */
  tg_const_f(&g, "c", "2", (float[]){100, 200});
  int n = tg_node(&g, KN_OP_GEMM, "gemm", "a,b,c", "y");
  tg_attr_i(&g, n, "transA", 1);
  tg_attr_i(&g, n, "transB", 1);
  tg_attr_f(&g, n, "alpha", 2);
  tg_attr_f(&g, n, "beta", 0.5f);
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "2,2", D(58, 104, 70, 110), 0);
  kn_graph_free(&g);
}

static void pools(void **state) {
  (void)state;
  float x[16];
  for (int i = 0; i < 16; i++) x[i] = (float)((i * 7) % 16);
  /* x = [[0,7,14,5],[12,3,10,1],[8,15,6,13],[4,11,2,9]] */
  kn_graph g;
  kn_graph_init(&g);
  tg_const_f(&g, "x", "1,1,4,4", x);
  int n = tg_node(&g, KN_OP_MAX_POOL, "mp", "x", "y,idx");
  tg_attr_ints(&g, n, "kernel_shape", 2, I(2), I(2));
  tg_attr_ints(&g, n, "strides", 2, I(2), I(2));
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "1,1,2,2", D(12, 14, 15, 13), 0);
  expect_i(&g, "idx", "1,1,2,2", L(4, 2, 9, 11));
  kn_graph_free(&g);

  /* AveragePool 2x2 stride 2 pad 1 on a 3x3 of ones, with and without pads
   * counted; ceil_mode keeps the partial last window. */
  for (int include = 0; include < 2; include++) {
    kn_graph_init(&g);
    tg_const_f(&g, "x", "1,1,3,3", (float[]){1, 2, 3, 4, 5, 6, 7, 8, 9});
    n = tg_node(&g, KN_OP_AVERAGE_POOL, "ap", "x", "y");
    tg_attr_ints(&g, n, "kernel_shape", 2, I(2), I(2));
    tg_attr_ints(&g, n, "strides", 2, I(2), I(2));
    tg_attr_ints(&g, n, "pads", 4, I(1), I(1), I(1), I(1));
    tg_attr_i(&g, n, "count_include_pad", include);
    tg_output(&g, "y");
    eval_ok(&g);
    if (include) expect_f(&g, "y", "1,1,2,2", D(0.25, 1.25, 2.75, 7), 1e-7);
    else expect_f(&g, "y", "1,1,2,2", D(1, 2.5, 5.5, 7), 1e-7);
    kn_graph_free(&g);
  }

  kn_graph_init(&g);
  tg_const_f(&g, "x", "1,1,3,3", (float[]){1, 2, 3, 4, 5, 6, 7, 8, 9});
  n = tg_node(&g, KN_OP_AVERAGE_POOL, "ap_ceil", "x", "y");
  tg_attr_ints(&g, n, "kernel_shape", 2, I(2), I(2));
  tg_attr_ints(&g, n, "strides", 2, I(2), I(2));
  tg_attr_i(&g, n, "ceil_mode", 1);
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "1,1,2,2", D(3, 4.5, 7.5, 9), 1e-7);
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_f(&g, "x", "1,2,2,2", (float[]){1, 2, 3, 6, -1, -2, -3, -4});
  tg_node(&g, KN_OP_GLOBAL_AVERAGE_POOL, "gap", "x", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "1,2,1,1", D(3, -2.5), 0);
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_f(&g, "x", "1,2,2,2", (float[]){1, 2, 3, 6, -1, -2, -3, -4});
  tg_node(&g, KN_OP_GLOBAL_MAX_POOL, "gmp", "x", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "1,2,1,1", D(6, -1), 0);
  kn_graph_free(&g);

  /* NHWC forms: x [1,2,2,2] (C last). */
  kn_graph_init(&g);
  tg_const_f(&g, "x", "1,2,2,2", (float[]){1, -1, 2, -2, 3, -3, 6, -4});
  n = tg_node(&g, KN_OP_MAX_POOL_NHWC, "mp_nhwc", "x", "y");
  tg_attr_ints(&g, n, "kernel_shape", 2, I(2), I(2));
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "1,1,1,2", D(6, -1), 0);
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_f(&g, "x", "1,2,2,2", (float[]){1, -1, 2, -2, 3, -3, 6, -4});
  tg_node(&g, KN_OP_GLOBAL_AVERAGE_POOL_NHWC, "gap_nhwc", "x", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "1,1,1,2", D(3, -2.5), 0);
  kn_graph_free(&g);
}

static void reductions(void **state) {
  (void)state;
  static const kn_op ops[4] = {KN_OP_REDUCE_SUM, KN_OP_REDUCE_MEAN, KN_OP_REDUCE_MAX, KN_OP_REDUCE_MIN};
  static const double want[4][2] = {{6, 15}, {2, 5}, {3, 6}, {1, 4}};
  for (int k = 0; k < 4; k++) {
    kn_graph g;
    kn_graph_init(&g);
    tg_const_f(&g, "x", "2,3", (float[]){1, 2, 3, 4, 5, 6});
    int n = tg_node(&g, ops[k], "red", "x", "y");
    tg_attr_ints(&g, n, "axes", 1, I(-1));
    tg_output(&g, "y");
    eval_ok(&g);
    expect_f(&g, "y", "2,1", want[k], 1e-7);
    kn_graph_free(&g);
  }
  /* ReduceSum, opset 13: axes input, keepdims 0; reducing axis 0. */
  kn_graph g;
  kn_graph_init(&g);
  tg_const_f(&g, "x", "2,3", (float[]){1, 2, 3, 4, 5, 6});
  tg_const_i64(&g, "ax", "1", L(0));
  int n = tg_node(&g, KN_OP_REDUCE_SUM, "sum0", "x,ax", "y");
  tg_attr_i(&g, n, "keepdims", 0);
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "3", D(5, 7, 9), 0);
  kn_graph_free(&g);
}

static void softmax_and_norms(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_const_f(&g, "x", "2,3", (float[]){1, 2, 3, 0, 0, 0});
  tg_node(&g, KN_OP_SOFTMAX, "sm", "x", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "2,3", D(0.09003057, 0.24472847, 0.66524096, 1 / 3.0, 1 / 3.0, 1 / 3.0), 1e-6);
  kn_graph_free(&g);

  kn_graph_init(&g); /* softmax over axis 0 */
  tg_const_f(&g, "x", "2,2", (float[]){0, 1, 0, 3});
  int n = tg_node(&g, KN_OP_LOG_SOFTMAX, "lsm", "x", "y");
  tg_attr_i(&g, n, "axis", 0);
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "2,2", D(-0.69314718, -2.12692801, -0.69314718, -0.12692801), 1e-6);
  kn_graph_free(&g);

  kn_graph_init(&g); /* opset 11: axis 1 flattens [1,2,2] into one row of 4 */
  g.opset = 11;
  tg_const_f(&g, "x", "1,2,2", (float[]){0, 0, 0, 0});
  tg_node(&g, KN_OP_SOFTMAX, "sm11", "x", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "1,2,2", D(0.25, 0.25, 0.25, 0.25), 1e-7);
  kn_graph_free(&g);

  /* LayerNorm over the last axis of [[1,2,3],[2,2,2]], gamma 2, beta 1. */
  kn_graph_init(&g);
  tg_const_f(&g, "x", "2,3", (float[]){1, 2, 3, 2, 2, 2});
  tg_const_f(&g, "gamma", "3", (float[]){2, 2, 2});
  tg_const_f(&g, "beta", "3", (float[]){1, 1, 1});
  tg_node(&g, KN_OP_LAYER_NORM, "ln", "x,gamma,beta", "y,mean,inv");
  tg_output(&g, "y");
  eval_ok(&g);
  double r = 1 / sqrt(2 / 3.0 + 1e-5); /* var of [1,2,3] is 2/3; default epsilon */
  expect_f(&g, "y", "2,3", D(1 - 2 * r, 1, 1 + 2 * r, 1, 1, 1), 1e-6);
  expect_f(&g, "mean", "2,1", D(2, 2), 1e-7);
  expect_f(&g, "inv", "2,1", D(r, 1 / sqrt(1e-5)), 1e-5);
  kn_graph_free(&g);

  /* BatchNorm: y = (x - mean) / sqrt(var + eps) * s + b per channel. */
  kn_graph_init(&g);
  tg_const_f(&g, "x", "1,2,2", (float[]){1, 3, 10, 20});
  tg_const_f(&g, "s", "2", (float[]){2, 1});
  tg_const_f(&g, "b", "2", (float[]){0, 5});
  tg_const_f(&g, "m", "2", (float[]){1, 10});
  tg_const_f(&g, "v", "2", (float[]){4, 100});
  n = tg_node(&g, KN_OP_BATCH_NORM, "bn", "x,s,b,m,v", "y");
  tg_attr_f(&g, n, "epsilon", 0);
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "1,2,2", D(0, 2, 5, 6), 1e-7);
  kn_graph_free(&g);
}

static void movement(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_const_f(&g, "x", "2,3", (float[]){1, 2, 3, 4, 5, 6});
  tg_node(&g, KN_OP_TRANSPOSE, "tr", "x", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "3,2", D(1, 4, 2, 5, 3, 6), 0);
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_f(&g, "a", "2,1", (float[]){1, 2});
  tg_const_f(&g, "b", "2,2", (float[]){3, 4, 5, 6});
  int n = tg_node(&g, KN_OP_CONCAT, "cat", "a,b", "y");
  tg_attr_i(&g, n, "axis", -1);
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "2,3", D(1, 3, 4, 2, 5, 6), 0);
  kn_graph_free(&g);

  /* Slice with a negative step: x[::-2] on 1..5 -> 5,3,1; and 2-D window. */
  kn_graph_init(&g);
  tg_const_f(&g, "x", "5", (float[]){1, 2, 3, 4, 5});
  tg_const_i64(&g, "st", "1", L(-1));
  tg_const_i64(&g, "en", "1", L(INT64_MIN));
  tg_const_i64(&g, "ax", "1", L(0));
  tg_const_i64(&g, "sp", "1", L(-2));
  tg_node(&g, KN_OP_SLICE, "rev", "x,st,en,ax,sp", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "3", D(5, 3, 1), 0);
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_f(&g, "x", "3,4", (float[]){0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23});
  tg_const_i64(&g, "st", "2", L(1, 1));
  tg_const_i64(&g, "en", "2", L(3, -1));
  tg_node(&g, KN_OP_SLICE, "win", "x,st,en", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "2,2", D(11, 12, 21, 22), 0);
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_f(&g, "x", "2,3", (float[]){1, 2, 3, 4, 5, 6});
  tg_const_i64(&g, "sizes", "2", L(1, 2));
  n = tg_node(&g, KN_OP_SPLIT, "split", "x,sizes", "a,b");
  tg_attr_i(&g, n, "axis", 1);
  tg_output(&g, "a");
  eval_ok(&g);
  expect_f(&g, "a", "2,1", D(1, 4), 0);
  expect_f(&g, "b", "2,2", D(2, 3, 5, 6), 0);
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_f(&g, "x", "3,2", (float[]){1, 2, 3, 4, 5, 6});
  tg_const_i64(&g, "idx", "2,2", L(-1, 0, 1, -3));
  tg_node(&g, KN_OP_GATHER, "gather", "x,idx", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "2,2,2", D(5, 6, 1, 2, 3, 4, 1, 2), 0);
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_f(&g, "x", "3,2", (float[]){1, 2, 3, 4, 5, 6});
  tg_const(&g, "idx", KN_DT_I32, "", (int32_t[]){-1});
  n = tg_node(&g, KN_OP_GATHER, "gather1", "x,idx", "y");
  tg_attr_i(&g, n, "axis", 1);
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "3", D(2, 4, 6), 0);
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_f(&g, "x", "2,1", (float[]){1, 2});
  tg_const_i64(&g, "shape", "3", L(2, 1, 3));
  tg_node(&g, KN_OP_EXPAND, "expand", "x,shape", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "2,2,3", D(1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2), 0);
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_f(&g, "x", "2,2", (float[]){1, 2, 3, 4});
  tg_const_i64(&g, "reps", "2", L(1, 2));
  tg_node(&g, KN_OP_TILE, "tile", "x,reps", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "2,4", D(1, 2, 1, 2, 3, 4, 3, 4), 0);
  kn_graph_free(&g);

  static const char *modes[3] = {"constant", "reflect", "edge"};
  static const double want[3][7] = {{9, 9, 1, 2, 3, 9, 9}, {3, 2, 1, 2, 3, 2, 1}, {1, 1, 1, 2, 3, 3, 3}};
  for (int m = 0; m < 3; m++) {
    kn_graph_init(&g);
    tg_const_f(&g, "x", "3", (float[]){1, 2, 3});
    tg_const_i64(&g, "pads", "2", L(2, 2));
    tg_const_f(&g, "val", "", (float[]){9});
    n = tg_node(&g, KN_OP_PAD, "pad", "x,pads,val", "y");
    tg_attr_s(&g, n, "mode", modes[m]);
    tg_output(&g, "y");
    eval_ok(&g);
    expect_f(&g, "y", "7", want[m], 0);
    kn_graph_free(&g);
  }

  kn_graph_init(&g); /* negative pads crop */
  tg_const_f(&g, "x", "4", (float[]){1, 2, 3, 4});
  tg_const_i64(&g, "pads", "2", L(-1, 1));
  tg_node(&g, KN_OP_PAD, "crop", "x,pads", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "4", D(2, 3, 4, 0), 0);
  kn_graph_free(&g);

  static const kn_op views[4] = {KN_OP_RESHAPE, KN_OP_FLATTEN, KN_OP_SQUEEZE, KN_OP_UNSQUEEZE};
  static const char *view_shapes[4] = {"3,2", "1,6", "2,3", "1,1,2,3"};
  for (int k = 0; k < 4; k++) {
    kn_graph_init(&g);
    tg_const_f(&g, "x", "1,2,3", (float[]){1, 2, 3, 4, 5, 6});
    tg_const_i64(&g, "shape", "2", L(3, 2));
    tg_const_i64(&g, "axes", "1", L(0));
    n = tg_node(&g, views[k], "view", k == 0 ? "x,shape" : k == 1 ? "x" : "x,axes", "y");
    if (k == 1) tg_attr_i(&g, n, "axis", 0);
    tg_output(&g, "y");
    eval_ok(&g);
    expect_f(&g, "y", view_shapes[k], D(1, 2, 3, 4, 5, 6), 0);
    kn_graph_free(&g);
  }
}

static void constant_producers(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_const_i64(&g, "dims", "2", L(2, 2));
  int v = tg_const(&g, "val", KN_DT_I32, "1", (int32_t[]){7});
  int n = tg_node(&g, KN_OP_CONSTANT_OF_SHAPE, "cos", "dims", "y");
  kn_node_add_attr(&g, &g.nodes[n], (kn_attr){.name = "value", .kind = KN_ATTR_TENSOR, .value = v});
  tg_output(&g, "y");
  eval_ok(&g);
  assert_int_equal(g.values[tg_value(&g, "y")].dtype, KN_DT_I32);
  expect_i(&g, "y", "2,2", L(7, 7, 7, 7));
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_i64(&g, "a", "", L(10));
  tg_const_i64(&g, "b", "", L(1));
  tg_const_i64(&g, "c", "", L(-3));
  tg_node(&g, KN_OP_RANGE, "range", "a,b,c", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_i(&g, "y", "3", L(10, 7, 4));
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_const_f(&g, "a", "", (float[]){0.5f});
  tg_const_f(&g, "b", "", (float[]){2});
  tg_const_f(&g, "c", "", (float[]){0.5f});
  tg_node(&g, KN_OP_RANGE, "rangef", "a,b,c", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "3", D(0.5, 1, 1.5), 0);
  kn_graph_free(&g);

  kn_graph_init(&g);
  n = tg_node(&g, KN_OP_CONSTANT, "k", "", "y");
  float fl[2] = {1.5f, -2};
  kn_node_add_attr(&g, &g.nodes[n], (kn_attr){.name = "value_floats", .kind = KN_ATTR_FLOATS, .n = 2, .floats = fl});
  tg_output(&g, "y");
  eval_ok(&g);
  expect_f(&g, "y", "2", D(1.5, -2), 0);
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N*2,3,5");
  tg_node(&g, KN_OP_SIZE, "size", "x", "y");
  tg_output(&g, "y");
  eval_ok(&g);
  expect_i(&g, "y", "", L(0));
  assert_non_null(g.values[tg_value(&g, "y")].batch_coef);
  assert_int_equal(g.values[tg_value(&g, "y")].batch_coef[0], 30);
  kn_graph_free(&g);
}

/* Shape of a batch tensor -> coefficients, carried by the ops that move
 * them; an op that would mix them non-linearly is not foldable. */
static void batch_coefficients(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N,3,4");
  tg_const_i64(&g, "i0", "1", L(0));
  tg_const_i64(&g, "two", "", L(2));
  tg_const_i64(&g, "k", "1", L(5));
  tg_node(&g, KN_OP_SHAPE, "shape", "x", "s");
  tg_node(&g, KN_OP_GATHER, "gather", "s,i0", "n");
  tg_node(&g, KN_OP_MUL, "mul", "n,two", "n2");
  tg_node(&g, KN_OP_ADD, "add", "n2,k", "n2k");
  tg_node(&g, KN_OP_CONCAT, "cat", "n2k,s", "all");
  tg_attr_i(&g, g.n_nodes - 1, "axis", 0);
  tg_node(&g, KN_OP_DIV, "div_ok", "n2,two", "back");
  tg_node(&g, KN_OP_DIV, "div_bad", "n2k,two", "half");
  tg_node(&g, KN_OP_EQUAL, "eq", "n,i0", "e");
  tg_node(&g, KN_OP_MUL, "square", "n,n", "nn");
  tg_output(&g, "all");
  tg_infer_ok(&g);
  kn_diag d;
  kn_diag_init(&d);
  int want[9] = {0, 0, 0, 0, 0, 0, KN_REF_NOFOLD, 0, KN_REF_NOFOLD}; /* N == 0: false, every N >= 1 */
  for (int i = 0; i < g.n_nodes; i++) {
    int rc = kn_ref_eval_node(&g, i, &d);
    if (rc != want[i]) fail_msg("node '%s': rc %d, expected %d", g.nodes[i].name, rc, want[i]);
  }
  kn_diag_free(&d);
  const kn_value *all = &g.values[tg_value(&g, "all")];
  expect_i(&g, "all", "4", L(5, 0, 3, 4));
  assert_non_null(all->batch_coef);
  int64_t want_coef[4] = {2, 1, 0, 0};
  for (int i = 0; i < 4; i++) assert_int_equal(all->batch_coef[i], want_coef[i]);
  expect_i(&g, "back", "1", L(0));
  assert_int_equal(g.values[tg_value(&g, "back")].batch_coef[0], 1);
  assert_null(g.values[tg_value(&g, "half")].data);
  expect_i(&g, "e", "1", L(0));
  assert_null(g.values[tg_value(&g, "e")].batch_coef);
  kn_graph_free(&g);
}

/* Comparisons, Max and Min of batch-dependent values fold when the outcome is
 * the same for every batch N >= 1, and not when it depends on N. The first
 * five nodes are torch's export of x.expand(N, -1, -1) (vit's class token):
 * Where(Equal(shape, -1), ones, shape) with shape = [N, -1, -1]. */
static void batch_comparisons(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N,3,4");
  tg_const_i64(&g, "i0", "1", L(0));
  tg_const_i64(&g, "rest", "2", L(-1, -1));
  tg_const_i64(&g, "minus1", "", L(-1));
  tg_const_i64(&g, "ones", "3", L(1, 1, 1));
  tg_const_i64(&g, "one", "1", L(1));
  tg_const_i64(&g, "two", "1", L(2));
  tg_node(&g, KN_OP_SHAPE, "shape", "x", "s");                  /* 0 */
  tg_node(&g, KN_OP_GATHER, "gather", "s,i0", "n");             /* 1 */
  tg_node(&g, KN_OP_CONCAT, "cat", "n,rest", "want");           /* 2 */
  tg_attr_i(&g, g.n_nodes - 1, "axis", 0);
  tg_node(&g, KN_OP_EQUAL, "is_minus1", "want,minus1", "m");    /* 3 */
  tg_node(&g, KN_OP_WHERE, "where", "m,ones,want", "expand");   /* 4 */
  tg_node(&g, KN_OP_LESS, "lt1", "n,one", "lt1");               /* 5: N < 1, never */
  tg_node(&g, KN_OP_GREATER_OR_EQUAL, "ge1", "n,one", "ge1");   /* 6: N >= 1, always */
  tg_node(&g, KN_OP_LESS_OR_EQUAL, "le2", "n,two", "le2");      /* 7: N <= 2: depends */
  tg_node(&g, KN_OP_EQUAL, "eq2", "n,two", "eq2");              /* 8: depends */
  tg_node(&g, KN_OP_GREATER, "gt_self", "n,n", "gt_self");      /* 9: never */
  tg_node(&g, KN_OP_MAX, "max1", "n,one", "max1");              /* 10: N */
  tg_node(&g, KN_OP_MIN, "min1", "one,n", "min1");              /* 11: 1 */
  tg_node(&g, KN_OP_MIN, "min2", "n,two", "min2");              /* 12: depends */
  tg_output(&g, "expand");
  tg_infer_ok(&g);
  kn_diag d;
  kn_diag_init(&d);
  int want[13] = {0, 0, 0, 0, 0, 0, 0, KN_REF_NOFOLD, KN_REF_NOFOLD, 0, 0, 0, KN_REF_NOFOLD};
  for (int i = 0; i < g.n_nodes; i++) {
    int rc = kn_ref_eval_node(&g, i, &d);
    if (rc != want[i]) fail_msg("node '%s': rc %d, expected %d", g.nodes[i].name, rc, want[i]);
  }
  kn_diag_free(&d);
  expect_i(&g, "m", "3", L(0, 1, 1));
  assert_null(g.values[tg_value(&g, "m")].batch_coef);
  const kn_value *e = &g.values[tg_value(&g, "expand")];
  expect_i(&g, "expand", "3", L(0, 1, 1));
  assert_non_null(e->batch_coef);
  for (int i = 0; i < 3; i++) assert_int_equal(e->batch_coef[i], i == 0);
  expect_i(&g, "lt1", "1", L(0));
  expect_i(&g, "ge1", "1", L(1));
  expect_i(&g, "gt_self", "1", L(0));
  expect_i(&g, "max1", "1", L(0));
  assert_int_equal(g.values[tg_value(&g, "max1")].batch_coef[0], 1);
  expect_i(&g, "min1", "1", L(1));
  assert_null(g.values[tg_value(&g, "min1")].batch_coef);
  kn_graph_free(&g);
}

/* kn_ref_run_graph: a small MLP at two batch sizes against a hand loop. */
static void run_graph(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.max_batch = 4;
  tg_input(&g, "x", KN_DT_F32, "N,3");
  tg_const_f(&g, "w", "3,2", (float[]){1, -1, 2, 0, 0.5f, 1});
  tg_const_f(&g, "b", "2", (float[]){0.25f, -0.5f});
  tg_const_i64(&g, "shape", "2", L(-1, 1));
  tg_node(&g, KN_OP_MATMUL, "mm", "x,w", "h");
  tg_node(&g, KN_OP_ADD, "bias", "h,b", "hb");
  tg_node(&g, KN_OP_RELU, "relu", "hb", "r");
  tg_node(&g, KN_OP_RESHAPE, "flat", "r,shape", "y");
  tg_output(&g, "y");
  tg_infer_ok(&g);
  for (int64_t batch = 1; batch <= 4; batch += 3) {
    float x[12];
    unsigned seed = 42;
    for (int i = 0; i < 12; i++) x[i] = tg_randf(&seed);
    float y[8] = {0};
    const void *in[1] = {x};
    void *out[1] = {y};
    kn_diag d;
    kn_diag_init(&d);
    assert_int_equal(kn_ref_run_graph(&g, in, out, batch, &d), 0);
    kn_diag_free(&d);
    const float w[6] = {1, -1, 2, 0, 0.5f, 1}, b[2] = {0.25f, -0.5f};
    for (int n = 0; n < batch; n++)
      for (int j = 0; j < 2; j++) {
        double acc = b[j];
        for (int k = 0; k < 3; k++) acc += (double)x[n * 3 + k] * w[k * 2 + j];
        assert_float_equal(y[n * 2 + j], acc > 0 ? acc : 0, 1e-6);
      }
  }
  kn_diag d;
  kn_diag_init(&d);
  const void *in[1] = {NULL};
  void *out[1] = {NULL};
  assert_int_equal(kn_ref_run_graph(&g, in, out, 5, &d), -1);
  assert_string_equal(d.lines[0], "ref: batch 5 outside [1, 4]");
  kn_diag_free(&d);
  kn_graph_free(&g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(unary_ops),         cmocka_unit_test(clip_cast_dropout),
      cmocka_unit_test(binary_ops),        cmocka_unit_test(integer_arithmetic),
      cmocka_unit_test(conv_ops),          cmocka_unit_test(matmul_gemm),
      cmocka_unit_test(pools),             cmocka_unit_test(reductions),
      cmocka_unit_test(softmax_and_norms), cmocka_unit_test(movement),
      cmocka_unit_test(constant_producers), cmocka_unit_test(batch_coefficients),
      cmocka_unit_test(batch_comparisons),
      cmocka_unit_test(run_graph),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
