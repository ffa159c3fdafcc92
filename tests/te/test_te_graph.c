/* test_te_graph.c — whole small graphs: the TE of each graph output built
 * through its producers (computes feeding computes, as the lowering sees
 * them), evaluated by kn_te_eval and compared with kn_ref_run_graph on the
 * original graph. The CNN is also run through the graph passes
 * (fold_conv_bn, layout, ...) so its TE uses the kiln.*NHWC ops. */
#include <stdlib.h>
#include <string.h>

#include "tests/te/te_harness.h"
#include "ir/passes/passes.h"
#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"

static int add(th *t, kn_op op, const char *name, const int *in, int n_in) {
  th_node(t, op, name, in, n_in, 1);
  return t->g.nodes[t->node].out[0];
}

static void run_passes(th *t) {
  kn_graph *g = &t->g;
  kn_diag *d = &t->d;
  int rc = kn_infer_shapes(g, d);
  rc = rc ? rc : kn_pass_fold_constants(g, d);
  rc = rc ? rc : kn_pass_dce(g, d);
  rc = rc ? rc : kn_infer_shapes(g, d);
  rc = rc ? rc : kn_pass_fold_conv_bn(g, d);
  rc = rc ? rc : kn_infer_shapes(g, d);
  rc = rc ? rc : kn_pass_layout(g, d);
  rc = rc ? rc : kn_infer_shapes(g, d);
  rc = rc ? rc : kn_pass_fold_constants(g, d);
  rc = rc ? rc : kn_pass_dce(g, d);
  rc = rc ? rc : kn_infer_shapes(g, d);
  if (rc) {
    kn_diag_print(d, "passes");
    fail_msg("graph passes failed");
  }
}

static int count_op(const th *t, kn_op op) {
  int k = 0;
  for (int i = 0; i < t->g.n_nodes; i++) k += !t->g.nodes[i].dead && t->g.nodes[i].op == op;
  return k;
}

/* Reference outputs of the graph as it is now, at `batch`. */
static void **reference(th *t, int64_t batch, void **inputs) {
  assert_int_equal(kn_infer_shapes(&t->g, &t->d), 0);
  void **want = calloc((size_t)t->g.n_outputs, sizeof(void *));
  for (int o = 0; o < t->g.n_outputs; o++) {
    int v = t->g.outputs[o];
    want[o] = calloc(1, (size_t)(th_numel(t, v, batch) + 1) * kn_dtype_size(t->g.values[v].dtype));
  }
  if (kn_ref_run_graph(&t->g, (const void *const *)inputs, want, batch, &t->d) != 0) {
    kn_diag_print(&t->d, "ref");
    fail_msg("reference run failed");
  }
  return want;
}

static void free_all(void **p, int n) {
  for (int i = 0; i < n; i++) free(p[i]);
  free(p);
}

static void small_cnn(th *t) {
  int x = th_input(t, "x", KN_DT_F32, 4, TH_DIMS(1, 3, 10, 10), 1u, -1, 1);
  int w1 = th_const_rand(t, "w1", KN_DT_F32, 4, TH_DIMS(8, 3, 3, 3), -0.5, 0.5);
  int b1 = th_const_rand(t, "b1", KN_DT_F32, 1, TH_DIMS(8), -0.5, 0.5);
  int c1 = add(t, KN_OP_CONV, "conv1", TH_INS(x, w1, b1), 3);
  th_attr_ints(t, "pads", 4, TH_DIMS(1, 1, 1, 1));
  int sc = th_const_rand(t, "bn_s", KN_DT_F32, 1, TH_DIMS(8), 0.5, 1.5);
  int bb = th_const_rand(t, "bn_b", KN_DT_F32, 1, TH_DIMS(8), -0.5, 0.5);
  int mu = th_const_rand(t, "bn_m", KN_DT_F32, 1, TH_DIMS(8), -0.5, 0.5);
  int var = th_const_rand(t, "bn_v", KN_DT_F32, 1, TH_DIMS(8), 0.5, 1.5);
  int bn = add(t, KN_OP_BATCH_NORM, "bn", TH_INS(c1, sc, bb, mu, var), 5);
  int r1 = add(t, KN_OP_RELU, "relu1", &bn, 1);
  int mp = add(t, KN_OP_MAX_POOL, "pool", &r1, 1);
  th_attr_ints(t, "kernel_shape", 2, TH_DIMS(3, 3));
  th_attr_ints(t, "strides", 2, TH_DIMS(2, 2));
  th_attr_ints(t, "pads", 4, TH_DIMS(1, 1, 1, 1));
  int w2 = th_const_rand(t, "w2", KN_DT_F32, 4, TH_DIMS(8, 1, 3, 3), -0.5, 0.5);
  int c2 = add(t, KN_OP_CONV, "dw", TH_INS(mp, w2), 2);
  th_attr_ints(t, "pads", 4, TH_DIMS(1, 1, 1, 1));
  th_attr_int(t, "group", 8);
  int lo = th_const_scalar(t, "lo", KN_DT_F32, 0), hi = th_const_scalar(t, "hi", KN_DT_F32, 6);
  int r2 = add(t, KN_OP_CLIP, "relu6", TH_INS(c2, lo, hi), 3);
  int res = add(t, KN_OP_ADD, "res", TH_INS(r2, mp), 2);
  int ap = add(t, KN_OP_AVERAGE_POOL, "avg", &res, 1);
  th_attr_ints(t, "kernel_shape", 2, TH_DIMS(2, 2));
  th_attr_ints(t, "pads", 4, TH_DIMS(0, 0, 1, 1));
  int gap = add(t, KN_OP_GLOBAL_AVERAGE_POOL, "gap", &ap, 1);
  int fl = add(t, KN_OP_FLATTEN, "flat", &gap, 1);
  int wf = th_const_rand(t, "wf", KN_DT_F32, 2, TH_DIMS(4, 8), -0.5, 0.5);
  int bf = th_const_rand(t, "bf", KN_DT_F32, 1, TH_DIMS(4), -0.5, 0.5);
  int fc = add(t, KN_OP_GEMM, "fc", TH_INS(fl, wf, bf), 3);
  th_attr_int(t, "transB", 1);
  add(t, KN_OP_SOFTMAX, "prob", &fc, 1);
}

static void test_cnn_nchw_and_nhwc(void **state) {
  (void)state;
  th t;
  th_init(&t, 13);
  small_cnn(&t);
  int64_t batch = 2;
  void *inputs[1] = {th_make_input(&t, 0, batch)};
  void **want = reference(&t, batch, inputs);
  int n_out = t.g.n_outputs;
  th_check_graph_outputs(&t, batch, inputs, want); /* NCHW Conv, MaxPool, ... */
  run_passes(&t);
  assert_int_equal(count_op(&t, KN_OP_CONV_NHWC), 2);
  assert_int_equal(count_op(&t, KN_OP_MAX_POOL_NHWC), 1);
  assert_int_equal(count_op(&t, KN_OP_CONV), 0);
  th_check_graph_outputs(&t, batch, inputs, want); /* after layout: NHWC ops */
  free_all(want, n_out);
  free(inputs[0]);
  th_free(&t);
}

/* A transformer block in miniature: LayerNorm, projections, GELU, the
 * residual, heads via Reshape/Transpose, attention scores and Softmax. */
static void test_attention_block(void **state) {
  (void)state;
  th t;
  th_init(&t, 20);
  const int64_t S = 4, D = 8, H = 2, Dh = 4;
  int x = th_input(&t, "x", KN_DT_F32, 3, TH_DIMS(1, S, D), 1u, -1, 1);
  int g = th_const_rand(&t, "ln_g", KN_DT_F32, 1, TH_DIMS(D), 0.5, 1.5);
  int b = th_const_rand(&t, "ln_b", KN_DT_F32, 1, TH_DIMS(D), -0.5, 0.5);
  int ln = add(&t, KN_OP_LAYER_NORM, "ln", TH_INS(x, g, b), 3);
  int wq = th_const_rand(&t, "wq", KN_DT_F32, 2, TH_DIMS(D, D), -0.5, 0.5);
  int q = add(&t, KN_OP_MATMUL, "q", TH_INS(ln, wq), 2);
  int shp = th_const_ints(&t, "heads", 4, TH_DIMS(0, S, H, Dh));
  int qh = add(&t, KN_OP_RESHAPE, "qh", TH_INS(q, shp), 2);
  int qt = add(&t, KN_OP_TRANSPOSE, "qt", &qh, 1);
  th_attr_ints(&t, "perm", 4, TH_DIMS(0, 2, 1, 3));
  int kt = add(&t, KN_OP_TRANSPOSE, "kt", &qh, 1);
  th_attr_ints(&t, "perm", 4, TH_DIMS(0, 2, 3, 1));
  int sc = add(&t, KN_OP_MATMUL, "scores", TH_INS(qt, kt), 2);
  int scale = th_const_scalar(&t, "scale", KN_DT_F32, 0.5);
  int ss = add(&t, KN_OP_MUL, "scaled", TH_INS(sc, scale), 2);
  int p = add(&t, KN_OP_SOFTMAX, "attn", &ss, 1);
  th_attr_int(&t, "axis", -1);
  int ctx = add(&t, KN_OP_MATMUL, "ctx", TH_INS(p, qt), 2);
  int ct = add(&t, KN_OP_TRANSPOSE, "ctx_t", &ctx, 1);
  th_attr_ints(&t, "perm", 4, TH_DIMS(0, 2, 1, 3));
  int shp2 = th_const_ints(&t, "merge", 3, TH_DIMS(0, S, D));
  int cm = add(&t, KN_OP_RESHAPE, "merged", TH_INS(ct, shp2), 2);
  int w1 = th_const_rand(&t, "w1", KN_DT_F32, 2, TH_DIMS(D, 2 * D), -0.5, 0.5);
  int h = add(&t, KN_OP_MATMUL, "up", TH_INS(cm, w1), 2);
  int ge = add(&t, KN_OP_GELU, "gelu", &h, 1);
  int w2 = th_const_rand(&t, "w2", KN_DT_F32, 2, TH_DIMS(2 * D, D), -0.5, 0.5);
  int dn = add(&t, KN_OP_MATMUL, "down", TH_INS(ge, w2), 2);
  add(&t, KN_OP_ADD, "out", TH_INS(dn, x), 2);
  int64_t batch = 3;
  void *inputs[1] = {th_make_input(&t, 0, batch)};
  void **want = reference(&t, batch, inputs);
  th_check_graph_outputs(&t, batch, inputs, want);
  free_all(want, t.g.n_outputs);
  free(inputs[0]);
  th_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cnn_nchw_and_nhwc),
      cmocka_unit_test(test_attention_block),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
