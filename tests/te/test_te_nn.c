/* test_te_nn.c — contractions and pools (te_ops_nn.c): Conv (NCHW 1-D/2-D,
 * strided, dilated, padded, grouped, depthwise, auto_pad), kiln.ConvNHWC
 * (against the reference and against NCHW Conv on transposed data), MatMul
 * (broadcast, 1-D operands), Gemm (trans flags, alpha/beta, C broadcast),
 * Max/AveragePool (ceil_mode, count_include_pad, dilations, NHWC forms).
 * Oracle: kn_ref_run_graph, plus structural checks of the stage layout the
 * schedule relies on. */
#include <stdlib.h>
#include <string.h>

#include "tests/te/te_harness.h"

typedef struct conv_cfg {
  int nsp;               /* 1 or 2 spatial dims */
  int64_t n, c, m, h, w; /* w unused for 1-D */
  int64_t kh, kw, group;
  int64_t sh, sw, dh, dw;
  int64_t pads[4];      /* ONNX order: begins then ends */
  const char *auto_pad; /* NULL = explicit pads */
  bool bias, batch;
} conv_cfg;

static void conv_nchw_case(const conv_cfg *k) {
  th t;
  th_init(&t, 17);
  int r = 2 + k->nsp;
  int64_t xd[4] = {k->n, k->c, k->h, k->w}, wd[4] = {k->m, k->c / k->group, k->kh, k->kw};
  if (k->nsp == 1) wd[2] = k->kw, xd[2] = k->w;
  int x = th_input(&t, "x", KN_DT_F32, r, xd, k->batch ? 1u : 0, -1, 1);
  int w = th_const_rand(&t, "w", KN_DT_F32, r, wd, -1, 1);
  int b = k->bias ? th_const_rand(&t, "b", KN_DT_F32, 1, TH_DIMS(k->m), -1, 1) : -1;
  th_node(&t, KN_OP_CONV, "conv", TH_INS(x, w, b), k->bias ? 3 : 2, 1);
  if (k->nsp == 2) {
    th_attr_ints(&t, "strides", 2, TH_DIMS(k->sh, k->sw));
    th_attr_ints(&t, "dilations", 2, TH_DIMS(k->dh, k->dw));
    if (!k->auto_pad) th_attr_ints(&t, "pads", 4, k->pads);
  } else {
    th_attr_ints(&t, "strides", 1, TH_DIMS(k->sw));
    th_attr_ints(&t, "dilations", 1, TH_DIMS(k->dw));
    if (!k->auto_pad) th_attr_ints(&t, "pads", 2, TH_DIMS(k->pads[0], k->pads[1]));
  }
  if (k->auto_pad) th_attr_string(&t, "auto_pad", k->auto_pad);
  th_attr_int(&t, "group", k->group);
  th_check(&t, k->batch ? 2 : 1);
  th_free(&t);
}

static void test_conv_nchw(void **state) {
  (void)state;
  const conv_cfg cases[] = {
      {2, 1, 3, 4, 6, 7, 3, 3, 1, 1, 1, 1, 1, {0, 0, 0, 0}, NULL, false, false}, /* plain */
      {2, 2, 3, 4, 6, 7, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, NULL, true, true},   /* padded, batch */
      {2, 1, 4, 6, 9, 8, 3, 2, 1, 2, 2, 1, 1, {1, 0, 2, 1}, NULL, true, false},  /* strided */
      {2, 1, 2, 3, 9, 9, 3, 3, 1, 1, 1, 2, 2, {2, 1, 2, 1}, NULL, false, false}, /* dilated */
      {2, 1, 4, 6, 7, 7, 3, 3, 2, 2, 1, 1, 1, {1, 1, 1, 1}, NULL, true, false},  /* group 2 */
      {2, 1, 4, 4, 7, 6, 3, 3, 4, 1, 2, 1, 1, {1, 1, 1, 1}, NULL, true, false},  /* depthwise */
      {2, 1, 3, 6, 6, 6, 3, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, NULL, false, false}, /* dw x2 */
      {2, 1, 3, 4, 7, 5, 3, 3, 1, 2, 2, 1, 1, {0}, "SAME_UPPER", true, false},
      {2, 1, 3, 4, 7, 5, 2, 2, 1, 1, 1, 1, 1, {0}, "SAME_LOWER", false, false},
      {1, 2, 3, 5, 0, 11, 1, 3, 1, 1, 2, 1, 1, {1, 2, 0, 0}, NULL, true, true},  /* 1-D */
      {1, 1, 4, 4, 0, 9, 1, 3, 4, 1, 1, 1, 2, {2, 2, 0, 0}, NULL, false, false}, /* 1-D dw */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) conv_nchw_case(&cases[i]);
}

/* NHWC conv: against the reference, and against NCHW Conv of the same
 * (transposed) data, element by element. */
static void conv_nhwc_case(const conv_cfg *k) {
  int64_t N = k->n, C = k->c, H = k->h, W = k->w, M = k->m, Cg = k->c / k->group;
  float *x_nchw = malloc(sizeof(float) * (size_t)(N * C * H * W));
  float *x_nhwc = malloc(sizeof(float) * (size_t)(N * C * H * W));
  float *w_oihw = malloc(sizeof(float) * (size_t)(M * Cg * k->kh * k->kw));
  float *w_hwio = malloc(sizeof(float) * (size_t)(M * Cg * k->kh * k->kw));
  float bias[64];
  th t0;
  th_init(&t0, 17);
  for (int64_t i = 0; i < N * C * H * W; i++) x_nchw[i] = (float)th_rand(&t0, -1, 1);
  for (int64_t i = 0; i < M * Cg * k->kh * k->kw; i++) w_oihw[i] = (float)th_rand(&t0, -1, 1);
  for (int64_t i = 0; i < M; i++) bias[i] = (float)th_rand(&t0, -1, 1);
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t w = 0; w < W; w++)
          x_nhwc[((n * H + h) * W + w) * C + c] = x_nchw[((n * C + c) * H + h) * W + w];
  for (int64_t m = 0; m < M; m++)
    for (int64_t ic = 0; ic < Cg; ic++)
      for (int64_t a = 0; a < k->kh; a++)
        for (int64_t b = 0; b < k->kw; b++)
          w_hwio[((a * k->kw + b) * Cg + ic) * M + m] =
              w_oihw[((m * Cg + ic) * k->kh + a) * k->kw + b];
  th_free(&t0);

  float *y[2] = {NULL, NULL};
  int64_t OH = 0, OW = 0;
  for (int nhwc = 0; nhwc < 2; nhwc++) {
    th t;
    th_init(&t, 17);
    int x = nhwc ? th_input_data(&t, "x", KN_DT_F32, 4, TH_DIMS(N, H, W, C), 0, x_nhwc)
                 : th_input_data(&t, "x", KN_DT_F32, 4, TH_DIMS(N, C, H, W), 0, x_nchw);
    int w = nhwc ? th_const(&t, "w", KN_DT_F32, 4, TH_DIMS(k->kh, k->kw, Cg, M), w_hwio)
                 : th_const(&t, "w", KN_DT_F32, 4, TH_DIMS(M, Cg, k->kh, k->kw), w_oihw);
    int b = k->bias ? th_const(&t, "b", KN_DT_F32, 1, TH_DIMS(M), bias) : -1;
    th_node(&t, nhwc ? KN_OP_CONV_NHWC : KN_OP_CONV, nhwc ? "conv_nhwc" : "conv", TH_INS(x, w, b),
            k->bias ? 3 : 2, 1);
    th_attr_ints(&t, "strides", 2, TH_DIMS(k->sh, k->sw));
    th_attr_ints(&t, "dilations", 2, TH_DIMS(k->dh, k->dw));
    th_attr_ints(&t, "pads", 4, k->pads);
    th_attr_int(&t, "group", k->group);
    th_check(&t, 1); /* against the reference */
    const kn_value *yv = &t.g.values[t.g.nodes[t.node].out[0]];
    OH = yv->shape.dim[nhwc ? 1 : 2];
    OW = yv->shape.dim[nhwc ? 2 : 3];
    y[nhwc] = malloc(sizeof(float) * (size_t)(N * M * OH * OW));
    void *in[1] = {nhwc ? x_nhwc : x_nchw};
    th_eval(&t, 0, 1, in, y[nhwc]);
    th_free(&t);
  }
  for (int64_t n = 0; n < N; n++)
    for (int64_t m = 0; m < M; m++)
      for (int64_t h = 0; h < OH; h++)
        for (int64_t w = 0; w < OW; w++) {
          float a = y[0][((n * M + m) * OH + h) * OW + w];
          float b = y[1][((n * OH + h) * OW + w) * M + m];
          assert_float_equal(a, b, 1e-5 * (1 + (a < 0 ? -a : a)));
        }
  free(y[0]), free(y[1]);
  free(x_nchw), free(x_nhwc), free(w_oihw), free(w_hwio);
}

static void test_conv_nhwc(void **state) {
  (void)state;
  const conv_cfg cases[] = {
      {2, 2, 3, 4, 6, 7, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, NULL, true, false},
      {2, 1, 4, 6, 9, 8, 3, 2, 1, 2, 2, 1, 1, {1, 0, 2, 1}, NULL, false, false}, /* strided */
      {2, 1, 2, 3, 9, 9, 3, 3, 1, 1, 1, 2, 2, {2, 1, 2, 1}, NULL, true, false},  /* dilated */
      {2, 1, 4, 6, 7, 7, 3, 3, 2, 2, 1, 1, 1, {1, 1, 1, 1}, NULL, true, false},  /* group 2 */
      {2, 2, 8, 8, 7, 6, 3, 3, 8, 1, 2, 1, 1, {1, 1, 1, 1}, NULL, true, false},  /* depthwise */
      {2, 1, 8, 8, 8, 8, 3, 3, 8, 2, 2, 1, 1, {0, 0, 1, 1}, NULL, false, false}, /* dw s2 */
      {2, 1, 5, 7, 5, 5, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, NULL, true, false},  /* 1x1 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) conv_nhwc_case(&cases[i]);
}

/* The stage layout the schedule relies on: acc reduces (kh, kw, ic), ic
 * omitted for depthwise; the bias is a separate injective compute; the
 * padded input is a compute of the exact window span. */
static void test_conv_structure(void **state) {
  (void)state;
  for (int dw = 0; dw < 2; dw++) {
    th t;
    th_init(&t, 17);
    int64_t C = 8, M = 8, g = dw ? 8 : 1;
    int x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(1, 5, 5, C), 1u, -1, 1);
    int w = th_const_rand(&t, "w", KN_DT_F32, 4, TH_DIMS(3, 3, C / g, M), -1, 1);
    int b = th_const_rand(&t, "b", KN_DT_F32, 1, TH_DIMS(M), -1, 1);
    th_node(&t, KN_OP_CONV_NHWC, "c", TH_INS(x, w, b), 3, 1);
    th_attr_ints(&t, "pads", 4, TH_DIMS(1, 1, 1, 1));
    th_attr_int(&t, "group", g);
    th_check(&t, 3);
    kn_te_tensor *out = th_te(&t, 0);
    assert_non_null(out);
    assert_int_not_equal(out->body->kind, KN_E_REDUCE);
    assert_int_equal(out->body->kind, KN_E_ADD);
    kn_te_tensor *acc = out->body->u.bin.a->u.load.tensor;
    assert_int_equal(acc->body->kind, KN_E_REDUCE);
    const kn_expr *red = acc->body;
    assert_int_equal(red->u.reduce.n_axes, dw ? 2 : 3);
    assert_string_equal(red->u.reduce.axes[0]->name, "kh");
    assert_string_equal(red->u.reduce.axes[1]->name, "kw");
    if (!dw) assert_string_equal(red->u.reduce.axes[2]->name, "ic");
    /* source = xpad[...] * w[...], xpad a compute of spatial extent 5 + 2 */
    const kn_expr *src = red->u.reduce.source;
    assert_int_equal(src->kind, KN_E_MUL);
    kn_te_tensor *xpad = src->u.bin.a->u.load.tensor;
    assert_int_equal(xpad->kind, KN_TE_COMPUTE);
    int64_t e;
    assert_true(kn_e_is_const_int(xpad->shape[1], &e) && e == 7);
    assert_true(kn_e_is_const_int(xpad->shape[2], &e) && e == 7);
    assert_int_equal(xpad->body->kind, KN_E_SELECT);
    th_free(&t);
  }
}

static void matmul_case(int ra, const int64_t *da, uint32_t ma, int rb, const int64_t *db) {
  th t;
  th_init(&t, 17);
  int a = th_input(&t, "a", KN_DT_F32, ra, da, ma, -1, 1);
  int b = th_input(&t, "b", KN_DT_F32, rb, db, 0, -1, 1);
  th_node(&t, KN_OP_MATMUL, "mm", TH_INS(a, b), 2, 1);
  th_check(&t, ma ? 2 : 1);
  kn_te_tensor *y = th_te(&t, 0);
  assert_int_equal(y->body->kind, KN_E_REDUCE);
  assert_int_equal(y->body->u.reduce.n_axes, 1);
  th_free(&t);
}

static void test_matmul(void **state) {
  (void)state;
  matmul_case(2, TH_DIMS(3, 4), 0, 2, TH_DIMS(4, 5));
  matmul_case(3, TH_DIMS(1, 3, 4), 1u, 2, TH_DIMS(4, 5));          /* [N,3,4] x [4,5] */
  matmul_case(4, TH_DIMS(2, 1, 3, 4), 0, 3, TH_DIMS(5, 4, 6));     /* broadcast batch */
  matmul_case(2, TH_DIMS(3, 4), 0, 4, TH_DIMS(2, 3, 4, 2));        /* A broadcast */
  matmul_case(1, TH_DIMS(4), 0, 3, TH_DIMS(2, 4, 5));              /* 1-D A */
  matmul_case(3, TH_DIMS(2, 3, 4), 0, 1, TH_DIMS(4));              /* 1-D B */
  matmul_case(1, TH_DIMS(7), 0, 1, TH_DIMS(7));                    /* dot */
  matmul_case(4, TH_DIMS(1, 2, 3, 4), 1u, 4, TH_DIMS(1, 2, 4, 3)); /* batch x shared */
}

static void gemm_case(bool ta, bool tb, float alpha, float beta, int rc, const int64_t *dc) {
  th t;
  th_init(&t, 13);
  int64_t M = 3, K = 5, Nn = 4;
  int a = th_input(&t, "a", KN_DT_F32, 2, ta ? TH_DIMS(K, M) : TH_DIMS(M, K), 0, -1, 1);
  int b = th_input(&t, "b", KN_DT_F32, 2, tb ? TH_DIMS(Nn, K) : TH_DIMS(K, Nn), 0, -1, 1);
  int c = rc >= 0 ? th_const_rand(&t, "c", KN_DT_F32, rc, dc, -1, 1) : -1;
  th_node(&t, KN_OP_GEMM, "gemm", TH_INS(a, b, c), rc >= 0 ? 3 : 2, 1);
  th_attr_int(&t, "transA", ta);
  th_attr_int(&t, "transB", tb);
  th_attr_float(&t, "alpha", alpha);
  th_attr_float(&t, "beta", beta);
  th_check(&t, 1);
  th_free(&t);
}

static void test_gemm(void **state) {
  (void)state;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      gemm_case(ta, tb, 1.0f, 1.0f, 1, TH_DIMS(4));
      gemm_case(ta, tb, 0.5f, 2.0f, 2, TH_DIMS(3, 4));
    }
  gemm_case(false, true, 1.0f, 1.0f, -1, NULL);
  gemm_case(false, false, 1.5f, 1.0f, 0, NULL);
  gemm_case(true, false, 1.0f, -0.5f, 2, TH_DIMS(3, 1));
  gemm_case(false, false, 1.0f, 0.0f, 2, TH_DIMS(1, 4));
}

typedef struct pool_cfg {
  kn_op op;
  int nsp;
  int64_t n, c, h, w;
  int64_t kh, kw, sh, sw, dh, dw;
  int64_t pads[4];
  int ceil_mode, include_pad;
  const char *auto_pad;
} pool_cfg;

static void pool_case(const pool_cfg *k) {
  th t;
  th_init(&t, 19);
  bool nhwc = k->op == KN_OP_MAX_POOL_NHWC || k->op == KN_OP_AVERAGE_POOL_NHWC;
  int x;
  if (k->nsp == 1)
    x = th_input(&t, "x", KN_DT_F32, 3, TH_DIMS(k->n, k->c, k->w), 1u, -2, 2);
  else if (nhwc)
    x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(k->n, k->h, k->w, k->c), 1u, -2, 2);
  else
    x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(k->n, k->c, k->h, k->w), 1u, -2, 2);
  th_node(&t, k->op, "pool", &x, 1, 1);
  if (k->nsp == 2) {
    th_attr_ints(&t, "kernel_shape", 2, TH_DIMS(k->kh, k->kw));
    th_attr_ints(&t, "strides", 2, TH_DIMS(k->sh, k->sw));
    th_attr_ints(&t, "dilations", 2, TH_DIMS(k->dh, k->dw));
    if (!k->auto_pad) th_attr_ints(&t, "pads", 4, k->pads);
  } else {
    th_attr_ints(&t, "kernel_shape", 1, TH_DIMS(k->kw));
    th_attr_ints(&t, "strides", 1, TH_DIMS(k->sw));
    th_attr_ints(&t, "dilations", 1, TH_DIMS(k->dw));
    if (!k->auto_pad) th_attr_ints(&t, "pads", 2, TH_DIMS(k->pads[0], k->pads[1]));
  }
  if (k->auto_pad) th_attr_string(&t, "auto_pad", k->auto_pad);
  th_attr_int(&t, "ceil_mode", k->ceil_mode);
  if (k->op == KN_OP_AVERAGE_POOL || k->op == KN_OP_AVERAGE_POOL_NHWC)
    th_attr_int(&t, "count_include_pad", k->include_pad);
  th_check(&t, 2);
  th_free(&t);
}

static void test_pools(void **state) {
  (void)state;
  const kn_op ops[4] = {KN_OP_MAX_POOL, KN_OP_AVERAGE_POOL, KN_OP_MAX_POOL_NHWC,
                        KN_OP_AVERAGE_POOL_NHWC};
  for (int o = 0; o < 4; o++) {
    kn_op op = ops[o];
    const pool_cfg cases[] = {
        {op, 2, 1, 3, 8, 8, 2, 2, 2, 2, 1, 1, {0, 0, 0, 0}, 0, 0, NULL},
        {op, 2, 1, 3, 9, 7, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 0, 0, NULL}, /* resnet stem */
        {op, 2, 1, 3, 9, 7, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 0, 1, NULL},
        {op, 2, 1, 2, 8, 7, 3, 2, 2, 2, 1, 1, {0, 0, 0, 0}, 1, 0, NULL},  /* ceil_mode */
        {op, 2, 1, 2, 8, 7, 3, 3, 2, 2, 1, 1, {1, 0, 1, 1}, 1, 1, NULL},  /* ceil + pad */
        {op, 2, 1, 2, 10, 9, 3, 2, 1, 2, 2, 2, {2, 1, 1, 0}, 0, 0, NULL}, /* dilated */
        {op, 2, 1, 2, 10, 9, 3, 3, 3, 2, 2, 1, {1, 1, 1, 1}, 1, 0, NULL}, /* dilated + ceil */
        {op, 2, 1, 2, 7, 6, 3, 3, 2, 2, 1, 1, {0}, 0, 0, "SAME_UPPER"},
        {op, 2, 1, 2, 7, 6, 2, 2, 1, 1, 1, 1, {0}, 0, 1, "SAME_LOWER"},
        {op, 2, 1, 2, 7, 6, 3, 3, 2, 2, 1, 1, {0}, 1, 0, "VALID"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) pool_case(&cases[i]);
  }
  /* 1-D pools */
  for (int o = 0; o < 2; o++) {
    pool_cfg p1 = {ops[o], 1, 1, 3, 0, 11, 0, 3, 0, 2, 0, 1, {1, 1, 0, 0}, 1, 0, NULL};
    pool_case(&p1);
    p1.include_pad = 1;
    pool_case(&p1);
  }
}

static void test_pool_structure(void **state) {
  (void)state;
  th t;
  th_init(&t, 17);
  int x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(1, 2, 6, 6), 1u, -2, 2);
  th_node(&t, KN_OP_AVERAGE_POOL, "ap", &x, 1, 1);
  th_attr_ints(&t, "kernel_shape", 2, TH_DIMS(2, 2));
  th_attr_ints(&t, "strides", 2, TH_DIMS(2, 2));
  th_infer(&t);
  kn_te_tensor *y = th_te(&t, 0);
  assert_non_null(y);
  /* no padding: no pad compute, a constant divisor */
  assert_int_equal(y->body->kind, KN_E_DIV);
  kn_te_tensor *sum = y->body->u.bin.a->u.load.tensor;
  assert_int_equal(sum->body->kind, KN_E_REDUCE);
  assert_int_equal(sum->body->u.reduce.source->u.load.tensor->kind, KN_TE_PLACEHOLDER);
  assert_int_equal(y->body->u.bin.b->kind, KN_E_FLOAT);
  assert_true(y->body->u.bin.b->u.fval == 4.0);
  th_free(&t);
}

static void test_nn_unsupported(void **state) {
  (void)state;
  th t;
  th_init(&t, 17);
  int x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(1, 2, 6, 6), 0, -2, 2);
  th_node(&t, KN_OP_MAX_POOL, "mp", &x, 1, 2);
  th_attr_ints(&t, "kernel_shape", 2, TH_DIMS(2, 2));
  th_expect_unsupported(&t, 1, "output 1");
  th_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_nchw),      cmocka_unit_test(test_conv_nhwc),
      cmocka_unit_test(test_conv_structure), cmocka_unit_test(test_matmul),
      cmocka_unit_test(test_gemm),           cmocka_unit_test(test_pools),
      cmocka_unit_test(test_pool_structure), cmocka_unit_test(test_nn_unsupported),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
