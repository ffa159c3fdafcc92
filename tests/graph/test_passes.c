/* test_passes.c — each graph pass as a golden text test (the printed graph
 * after the pass) plus a numeric check: the reference interpreter computes
 * the same outputs before and after the pass on seeded random inputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/graph/graph_util.h"

#define I(x) ((int64_t)(x))

typedef int (*pass_fn)(kn_graph *, kn_diag *);

static void run_pass(kn_graph *g, pass_fn pass) { tg_pass_ok(g, pass, "pass"); }

/* The lead's pipeline, with inference and verification between passes. */
static void run_pipeline(kn_graph *g) {
  tg_infer_ok(g);
  run_pass(g, kn_pass_fold_constants);
  run_pass(g, kn_pass_dce);
  run_pass(g, kn_pass_fold_conv_bn);
  run_pass(g, kn_pass_layout);
  run_pass(g, kn_pass_fold_constants);
  run_pass(g, kn_pass_dce);
}

/* Outputs before, applies fn, outputs after; they must agree to tol at
 * batch 1 and at max_batch. */
static void check_same_numbers(kn_graph *g, void (*fn)(kn_graph *), double tol) {
  tg_infer_ok(g);
  int64_t batches[2] = {1, g->max_batch};
  void **before[2];
  for (int b = 0; b < 2; b++) before[b] = tg_run(g, batches[b], 1234u + (unsigned)b);
  fn(g);
  for (int b = 0; b < 2; b++) {
    void **after = tg_run(g, batches[b], 1234u + (unsigned)b);
    for (int i = 0; i < g->n_outputs; i++) {
      double diff = tg_max_rel_diff(g, i, batches[b], after, before[b]);
      if (!(diff <= tol)) fail_msg("output %d differs by %g at batch %lld", i, diff, (long long)batches[b]);
    }
    tg_free_outputs(g, after);
    tg_free_outputs(g, before[b]);
  }
}

static void do_fold(kn_graph *g) {
  run_pass(g, kn_pass_fold_constants);
  run_pass(g, kn_pass_dce);
}
static void do_dce(kn_graph *g) { run_pass(g, kn_pass_dce); }
static void do_conv_bn(kn_graph *g) { run_pass(g, kn_pass_fold_conv_bn); }
static void do_layout(kn_graph *g) { run_pass(g, kn_pass_layout); }

/* ---- fold_constants ---- */

/* x.view(x.size(0), -1) with an Identity and a Dropout in the way, and a
 * graph output that is entirely constant. */
static void fold_constants_golden(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.max_batch = 3;
  tg_input(&g, "x", KN_DT_F32, "N,3,2,2");
  tg_const_i64(&g, "zero", "", (int64_t[]){0});
  tg_const_i64(&g, "axes0", "1", (int64_t[]){0});
  tg_const_i64(&g, "minus1", "1", (int64_t[]){-1});
  tg_const_f(&g, "two", "", (float[]){2});
  tg_const_f(&g, "three", "", (float[]){3});
  tg_node(&g, KN_OP_IDENTITY, "id", "x", "xi");
  tg_node(&g, KN_OP_SHAPE, "shape", "xi", "s");
  tg_node(&g, KN_OP_GATHER, "gather", "s,zero", "n");
  tg_node(&g, KN_OP_UNSQUEEZE, "unsq", "n,axes0", "n1");
  int c = tg_node(&g, KN_OP_CONCAT, "concat", "n1,minus1", "target");
  tg_attr_i(&g, c, "axis", 0);
  tg_node(&g, KN_OP_RESHAPE, "reshape", "xi,target", "flat");
  tg_node(&g, KN_OP_DROPOUT, "drop", "flat", "dropped");
  tg_node(&g, KN_OP_RELU, "relu", "dropped", "y");
  tg_node(&g, KN_OP_MUL, "konst", "two,three", "six");
  tg_node(&g, KN_OP_DROPOUT, "drop_out", "y", "y_out");
  tg_output(&g, "y_out");
  tg_output(&g, "six");
  check_same_numbers(&g, do_fold, 0);
  tg_expect_print(&g,
                  "graph(%x:float32[N*1,3,2,2]) {\n"
                  "  %target:int64[2] = constant [N*1, -1]\n"
                  "  %six_const:float32[] = constant [6]\n"
                  "  %flat:float32[N*1,12] = Reshape(%x, %target)  # reshape\n"
                  "  %y_out:float32[N*1,12] = Relu(%flat)  # relu\n"
                  "  %six:float32[] = Identity(%six_const)  # six_copy\n"
                  "  return %y_out, %six\n"
                  "}\n");
  kn_graph_free(&g);
}

/* A graph output that is a graph input keeps an Identity; huge constant
 * producers are left alone. */
static void fold_constants_keeps_copies_and_limits(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "4");
  tg_const_i64(&g, "big", "2", (int64_t[]){8192, 4096});
  tg_node(&g, KN_OP_IDENTITY, "passthru", "x", "y");
  tg_node(&g, KN_OP_CONSTANT_OF_SHAPE, "huge", "big", "zeros");
  tg_node(&g, KN_OP_REDUCE_SUM, "sum", "zeros", "total");
  tg_output(&g, "y");
  tg_output(&g, "total");
  tg_infer_ok(&g);
  run_pass(&g, kn_pass_fold_constants);
  tg_expect_print(&g,
                  "graph(%x:float32[4]) {\n"
                  "  %big:int64[2] = constant [8192, 4096]\n"
                  "  %y:float32[4] = Identity(%x)  # passthru\n"
                  "  %zeros:float32[8192,4096] = ConstantOfShape(%big)  # huge\n"
                  "  %total:float32[1,1] = ReduceSum(%zeros)  # sum\n"
                  "  return %y, %total\n"
                  "}\n");
  kn_graph_free(&g);
}

/* Folding an invalid constant computation reports it. */
static void fold_constants_reports_bad_input(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_I64, "2");
  tg_const_i64(&g, "a", "2", (int64_t[]){4, 5});
  tg_const_i64(&g, "z", "2", (int64_t[]){1, 0});
  tg_node(&g, KN_OP_DIV, "div", "a,z", "q");
  tg_node(&g, KN_OP_ADD, "add", "x,q", "y");
  tg_output(&g, "y");
  tg_infer_ok(&g);
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_pass_fold_constants(&g, &d), -1);
  assert_string_equal(d.lines[0], "node 'div' (Div): integer division by zero");
  kn_diag_free(&d);
  kn_graph_free(&g);
}

/* ---- dce ---- */

static void dce_golden(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.max_batch = 2;
  tg_input(&g, "x", KN_DT_F32, "N,4");
  tg_node(&g, KN_OP_EXP, "dead_end", "x", "e");
  tg_node(&g, KN_OP_NEG, "dead_too", "e", "ne");
  tg_node(&g, KN_OP_RELU, "live", "x", "r");
  tg_node(&g, KN_OP_SPLIT, "split", "r", "s0,s1");
  tg_attr_i(&g, g.n_nodes - 1, "axis", 1);
  tg_output(&g, "s1");
  check_same_numbers(&g, do_dce, 0);
  tg_expect_print(&g,
                  "graph(%x:float32[N*1,4]) {\n"
                  "  %r:float32[N*1,4] = Relu(%x)  # live\n"
                  "  %s0:float32[N*1,2], %s1:float32[N*1,2] = Split(%r) {axis=1}  # split\n"
                  "  return %s1\n"
                  "}\n");
  kn_graph_free(&g);
}

/* ---- fold_conv_bn ---- */

static void add_bn(kn_graph *g, const char *name, const char *x, const char *y, int chans, unsigned seed) {
  char s[64], b[64], m[64], v[64], shape[16], ins[320];
  snprintf(shape, sizeof shape, "%d", chans);
  snprintf(s, sizeof s, "%s_s", name);
  snprintf(b, sizeof b, "%s_b", name);
  snprintf(m, sizeof m, "%s_m", name);
  snprintf(v, sizeof v, "%s_v", name);
  tg_const_rand(g, s, shape, seed, 0.5f, 1.5f);
  tg_const_rand(g, b, shape, seed + 1, -0.5f, 0.5f);
  tg_const_rand(g, m, shape, seed + 2, -0.5f, 0.5f);
  tg_const_rand(g, v, shape, seed + 3, 0.25f, 2.0f);
  snprintf(ins, sizeof ins, "%s,%s,%s,%s,%s", x, s, b, m, v);
  tg_node(g, KN_OP_BATCH_NORM, name, ins, y);
}

static void fold_conv_bn_golden(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.max_batch = 2;
  tg_input(&g, "x", KN_DT_F32, "N,2,5,5");
  tg_const_rand(&g, "w", "3,2,3,3", 7, -1, 1);
  int n = tg_node(&g, KN_OP_CONV, "conv", "x,w", "c");
  tg_attr_ints(&g, n, "pads", 4, I(1), I(1), I(1), I(1));
  add_bn(&g, "bn1", "c", "y1", 3, 10);
  add_bn(&g, "bn2", "x", "y2", 2, 20); /* no conv before it: Mul + Add */
  tg_node(&g, KN_OP_RELU, "relu", "y2", "r");
  tg_output(&g, "y1");
  tg_output(&g, "r");
  check_same_numbers(&g, do_conv_bn, 2e-6);
  run_pass(&g, kn_pass_dce);
  char *text = tg_print(&g);
  /* Weight values are random; compare the lines after the constants. */
  const char *body = strstr(text, "  %y1:");
  assert_non_null(body);
  assert_string_equal(body,
                      "  %y1:float32[N*1,3,5,5] = Conv(%x, %w, %conv_bias_folded) {pads=[1,1,1,1]}  # conv\n"
                      "  %y2_scaled:float32[N*1,2,5,5] = Mul(%x, %bn2_scale)  # bn2_mul\n"
                      "  %y2:float32[N*1,2,5,5] = Add(%y2_scaled, %bn2_shift)  # bn2\n"
                      "  %r:float32[N*1,2,5,5] = Relu(%y2)  # relu\n"
                      "  return %y1, %r\n"
                      "}\n");
  assert_non_null(strstr(text, "  %bn2_scale:float32[2,1,1] = constant ["));
  assert_non_null(strstr(text, "  %conv_bias_folded:float32[3] = constant ["));
  free(text);
  assert_int_equal(tg_count(&g, KN_OP_BATCH_NORM), 0);
  kn_graph_free(&g);
}

/* A conv whose output is also read elsewhere keeps its BN (as Mul + Add);
 * a shared weight is copied, not scaled in place. */
static void fold_conv_bn_respects_other_uses(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.max_batch = 2;
  tg_input(&g, "x", KN_DT_F32, "N,2,4,4");
  tg_const_rand(&g, "w", "2,2,1,1", 3, -1, 1);
  tg_const_rand(&g, "b", "2", 4, -1, 1);
  tg_node(&g, KN_OP_CONV, "conv_a", "x,w,b", "a");
  tg_node(&g, KN_OP_CONV, "conv_b", "x,w,b", "c");
  add_bn(&g, "bn_a", "a", "ya", 2, 30);
  add_bn(&g, "bn_c", "c", "yc", 2, 40);
  tg_node(&g, KN_OP_ADD, "sum", "ya,c", "s");
  tg_node(&g, KN_OP_ADD, "sum2", "s,yc", "out");
  tg_output(&g, "out");
  check_same_numbers(&g, do_conv_bn, 2e-6);
  assert_int_equal(tg_count(&g, KN_OP_BATCH_NORM), 0);
  assert_int_equal(tg_count(&g, KN_OP_MUL), 1); /* bn_c: conv_b's output has two readers */
  kn_graph_free(&g);
}

/* ---- layout ---- */

static void layout_golden(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.max_batch = 2;
  tg_input(&g, "x", KN_DT_F32, "N,3,8,8");
  tg_const_rand(&g, "w", "4,3,3,3", 5, -1, 1);
  tg_const_rand(&g, "bias", "4,1,1", 6, -1, 1);
  int n = tg_node(&g, KN_OP_CONV, "conv", "x,w", "c");
  tg_attr_s(&g, n, "auto_pad", "SAME_UPPER");
  tg_attr_ints(&g, n, "strides", 2, I(2), I(2));
  tg_node(&g, KN_OP_ADD, "add_bias", "c,bias", "cb");
  tg_node(&g, KN_OP_RELU, "relu", "cb", "r");
  n = tg_node(&g, KN_OP_MAX_POOL, "pool", "r", "p");
  tg_attr_ints(&g, n, "kernel_shape", 2, I(2), I(2));
  tg_attr_ints(&g, n, "strides", 2, I(2), I(2));
  tg_output(&g, "p");
  check_same_numbers(&g, do_layout, 1e-6);
  char *text = tg_print(&g);
  const char *body = strstr(text, "  %x_nhwc:");
  assert_non_null(body);
  assert_string_equal(body,
                      "  %x_nhwc:float32[N*1,8,8,3] = Transpose(%x) {perm=[0,2,3,1]}  # conv_to_nhwc\n"
                      "  %c_nhwc:float32[N*1,4,4,4] = kiln.ConvNHWC(%x_nhwc, %w_hwio) "
                      "{strides=[2,2], pads=[0,0,1,1], dilations=[1,1], group=1}  # conv\n"
                      "  %cb_nhwc:float32[N*1,4,4,4] = Add(%c_nhwc, %bias_nhwc)  # add_bias\n"
                      "  %r_nhwc_2:float32[N*1,4,4,4] = Relu(%cb_nhwc)  # relu\n"
                      "  %p_nhwc:float32[N*1,2,2,4] = kiln.MaxPoolNHWC(%r_nhwc_2) {kernel_shape=[2,2], "
                      "strides=[2,2], pads=[0,0,0,0], dilations=[1,1], ceil_mode=0}  # pool\n"
                      "  %p:float32[N*1,4,2,2] = Transpose(%p_nhwc) {perm=[0,3,1,2]}  # pool_to_nchw\n"
                      "  return %p\n"
                      "}\n");
  assert_non_null(strstr(text, "  %w_hwio:float32[3,3,3,4] = constant ["));
  assert_non_null(strstr(text, "  %bias_nhwc:float32[1,1,4] = constant ["));
  free(text);
  kn_graph_free(&g);
}

/* Mixed operands keep their Transposes; a broadcast constant of lower rank
 * and a scalar are handled; an int constant works like a float one. */
static void layout_mixed_and_constants(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.max_batch = 2;
  tg_input(&g, "x", KN_DT_F32, "N,2,4,4");
  tg_input(&g, "other", KN_DT_F32, "N,3,4,4");
  tg_const_rand(&g, "w", "3,2,1,1", 5, -1, 1);
  tg_const_rand(&g, "row", "4", 6, -1, 1); /* broadcasts along W */
  tg_const_f(&g, "half", "", (float[]){0.5f});
  tg_node(&g, KN_OP_CONV, "conv", "x,w", "c");
  tg_node(&g, KN_OP_MUL, "scale", "c,half", "h");
  tg_node(&g, KN_OP_ADD, "add_row", "h,row", "hr");
  tg_node(&g, KN_OP_ADD, "mixed", "hr,other", "y");
  tg_output(&g, "y");
  check_same_numbers(&g, do_layout, 1e-6);
  assert_int_equal(tg_count(&g, KN_OP_TRANSPOSE), 2); /* input, and before the mixed Add */
  char *text = tg_print(&g);
  assert_non_null(strstr(text, "%row_nhwc:float32[4,1] = constant"));
  assert_non_null(strstr(text, "= Add(%hr, %other)  # mixed"));
  free(text);
  kn_graph_free(&g);
}

/* A Transpose that only moves size-1 dims becomes a Reshape. */
static void layout_unit_transpose_is_reshape(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.max_batch = 3;
  tg_input(&g, "x", KN_DT_F32, "N,4,3,3");
  tg_node(&g, KN_OP_GLOBAL_AVERAGE_POOL, "gap", "x", "p");
  tg_node(&g, KN_OP_FLATTEN, "flatten", "p", "f");
  tg_output(&g, "f");
  check_same_numbers(&g, do_layout, 1e-6);
  tg_expect_print(&g,
                  "graph(%x:float32[N*1,4,3,3]) {\n"
                  "  %p_shape:int64[4] = constant [0, 4, 1, 1]\n"
                  "  %x_nhwc:float32[N*1,3,3,4] = Transpose(%x) {perm=[0,2,3,1]}  # gap_to_nhwc\n"
                  "  %p_nhwc:float32[N*1,1,1,4] = kiln.GlobalAveragePoolNHWC(%x_nhwc)  # gap\n"
                  "  %p:float32[N*1,4,1,1] = Reshape(%p_nhwc, %p_shape)  # gap_to_nchw\n"
                  "  %f:float32[N*1,4] = Flatten(%p)  # flatten\n"
                  "  return %f\n"
                  "}\n");
  kn_graph_free(&g);
}

/* conv-bn-relu-conv-bn-add-relu-maxpool-gap-flatten-gemm (+ a Concat branch
 * and an AveragePool): after the pipeline the only Transpose is at the graph
 * input and nothing but a Reshape sits before Flatten. */
static void build_resnet_block(kn_graph *g, bool torch_flatten) {
  kn_graph_init(g);
  g->max_batch = 2;
  g->opset = 13;
  tg_input(g, "x", KN_DT_F32, "N,3,12,12");
  tg_const_rand(g, "w1", "8,3,3,3", 1, -0.5f, 0.5f);
  tg_const_rand(g, "w2", "8,8,3,3", 2, -0.3f, 0.3f);
  tg_const_rand(g, "w3", "4,8,1,1", 3, -0.3f, 0.3f);
  tg_const_rand(g, "fc_w", "10,12", 4, -0.5f, 0.5f);
  tg_const_rand(g, "fc_b", "10", 5, -0.5f, 0.5f);
  int n = tg_node(g, KN_OP_CONV, "conv1", "x,w1", "c1");
  tg_attr_ints(g, n, "pads", 4, I(1), I(1), I(1), I(1));
  add_bn(g, "bn1", "c1", "b1", 8, 100);
  tg_node(g, KN_OP_RELU, "relu1", "b1", "r1");
  n = tg_node(g, KN_OP_CONV, "conv2", "r1,w2", "c2");
  tg_attr_ints(g, n, "pads", 4, I(1), I(1), I(1), I(1));
  add_bn(g, "bn2", "c2", "b2", 8, 200);
  tg_node(g, KN_OP_ADD, "residual", "b2,r1", "a");
  tg_node(g, KN_OP_RELU, "relu2", "a", "r2");
  n = tg_node(g, KN_OP_MAX_POOL, "maxpool", "r2", "mp");
  tg_attr_ints(g, n, "kernel_shape", 2, I(3), I(3));
  tg_attr_ints(g, n, "strides", 2, I(2), I(2));
  tg_attr_ints(g, n, "pads", 4, I(1), I(1), I(1), I(1));
  tg_node(g, KN_OP_CONV, "conv3", "mp,w3", "c3");
  n = tg_node(g, KN_OP_AVERAGE_POOL, "avgpool", "mp", "ap");
  tg_attr_ints(g, n, "kernel_shape", 2, I(3), I(3));
  tg_attr_ints(g, n, "pads", 4, I(1), I(1), I(1), I(1));
  tg_attr_i(g, n, "count_include_pad", 1);
  n = tg_node(g, KN_OP_CONCAT, "concat", "c3,ap", "cat");
  tg_attr_i(g, n, "axis", 1);
  tg_node(g, KN_OP_SIGMOID, "gate", "cat", "sg");
  tg_node(g, KN_OP_GLOBAL_AVERAGE_POOL, "gap", "sg", "gp");
  if (torch_flatten) { /* x.view(x.size(0), -1) */
    tg_const_i64(g, "zero", "", (int64_t[]){0});
    tg_const_i64(g, "axes0", "1", (int64_t[]){0});
    tg_const_i64(g, "minus1", "1", (int64_t[]){-1});
    tg_node(g, KN_OP_SHAPE, "shape", "gp", "s");
    tg_node(g, KN_OP_GATHER, "gather", "s,zero", "bn");
    tg_node(g, KN_OP_UNSQUEEZE, "unsq", "bn,axes0", "bn1d");
    n = tg_node(g, KN_OP_CONCAT, "target", "bn1d,minus1", "tshape");
    tg_attr_i(g, n, "axis", 0);
    tg_node(g, KN_OP_RESHAPE, "flatten", "gp,tshape", "f");
  } else {
    tg_node(g, KN_OP_FLATTEN, "flatten", "gp", "f");
  }
  n = tg_node(g, KN_OP_GEMM, "fc", "f,fc_w,fc_b", "logits");
  tg_attr_i(g, n, "transB", 1);
  tg_output(g, "logits");
}

static void resnet_block_runs_nhwc(void **state) {
  (void)state;
  for (int torch = 0; torch < 2; torch++) {
    kn_graph g;
    build_resnet_block(&g, torch);
    check_same_numbers(&g, run_pipeline, 2e-5);
    int transposes = 0;
    for (int i = 0; i < g.n_nodes; i++) {
      const kn_node *n = &g.nodes[i];
      if (n->op != KN_OP_TRANSPOSE) continue;
      transposes++;
      assert_int_equal(n->in[0], g.inputs[0]); /* only at the graph input */
    }
    assert_int_equal(transposes, 1);
    assert_int_equal(tg_count(&g, KN_OP_CONV_NHWC), 3);
    assert_int_equal(tg_count(&g, KN_OP_CONV), 0);
    assert_int_equal(tg_count(&g, KN_OP_BATCH_NORM), 0);
    assert_int_equal(tg_count(&g, KN_OP_MAX_POOL_NHWC), 1);
    assert_int_equal(tg_count(&g, KN_OP_AVERAGE_POOL_NHWC), 1);
    assert_int_equal(tg_count(&g, KN_OP_GLOBAL_AVERAGE_POOL_NHWC), 1);
    assert_int_equal(tg_count(&g, KN_OP_SHAPE), 0);
    /* What feeds the flatten is a Reshape of the NHWC global pool. */
    int f = g.values[tg_value(&g, "f")].producer;
    int before = g.values[g.nodes[f].in[0]].producer;
    assert_int_equal(g.nodes[before].op, KN_OP_RESHAPE);
    assert_int_equal(g.nodes[g.values[g.nodes[before].in[0]].producer].op, KN_OP_GLOBAL_AVERAGE_POOL_NHWC);
    kn_graph_free(&g);
  }
}

/* Expansion refusals mark the graph inputs a value derives from, as
 * kn_infer_shapes_needs does (kn_pipeline_needed_bindings reads both): a
 * DFT axis computed from a graph input, an STFT frame_step that is one;
 * inputs used only as data are not marked. Once bound, the DFT expands. */
static void expansion_needed_inputs(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.opset = 20;
  int x = tg_input(&g, "x", KN_DT_F32, "1,8,1");
  int axis_in = tg_input(&g, "axis_in", KN_DT_I64, "");
  tg_const_i64(&g, "zero", "", (int64_t[]){0});
  tg_node(&g, KN_OP_ADD, "add", "axis_in,zero", "axis");
  tg_node(&g, KN_OP_DFT, "dft", "x,_,axis", "y");
  tg_output(&g, "y");
  bool *needed = calloc((size_t)g.n_values + 1, sizeof *needed);
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_pass_decompose(&g, &d), 0);
  assert_int_equal(kn_pass_inline_control_needs(&g, needed, &d), -1);
  assert_true(d.count >= 1 && strstr(d.lines[0], "node 'dft' (DFT): axis 'axis' must be a compile-time constant "
                                                 "integer scalar; it depends on graph inputs, which can be bound"));
  assert_true(needed[axis_in]);
  assert_false(needed[x]);
  kn_diag_free(&d);
  free(needed);
  /* bound (as kiln compile --bind does): the DFT expands away */
  static const int64_t one = 1;
  g.values[axis_in].data = kn_arena_alloc(&g.arena, sizeof one);
  memcpy(g.values[axis_in].data, &one, sizeof one);
  kn_diag_init(&d);
  int rc = kn_pass_inline_control(&g, &d);
  if (rc != 0) kn_diag_print(&d, "expand");
  kn_diag_free(&d);
  assert_int_equal(rc, 0);
  assert_int_equal(tg_count(&g, KN_OP_DFT), 0);
  kn_graph_free(&g);

  kn_graph_init(&g);
  g.opset = 17;
  x = tg_input(&g, "x", KN_DT_F32, "1,16,1");
  int step = tg_input(&g, "step", KN_DT_I64, "");
  tg_const_i64(&g, "len", "", (int64_t[]){4});
  tg_node(&g, KN_OP_STFT, "stft", "x,step,_,len", "y");
  tg_output(&g, "y");
  needed = calloc((size_t)g.n_values + 1, sizeof *needed);
  kn_diag_init(&d);
  assert_int_equal(kn_pass_inline_control_needs(&g, needed, &d), -1);
  assert_true(d.count >= 1 && strstr(d.lines[0], "node 'stft' (STFT): frame_step 'step' must be a compile-time "
                                                 "constant integer scalar; it is a graph input"));
  assert_true(needed[step]);
  assert_false(needed[x]);
  kn_diag_free(&d);
  free(needed);
  kn_graph_free(&g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fold_constants_golden),
      cmocka_unit_test(fold_constants_keeps_copies_and_limits),
      cmocka_unit_test(fold_constants_reports_bad_input),
      cmocka_unit_test(dce_golden),
      cmocka_unit_test(fold_conv_bn_golden),
      cmocka_unit_test(fold_conv_bn_respects_other_uses),
      cmocka_unit_test(layout_golden),
      cmocka_unit_test(layout_mixed_and_constants),
      cmocka_unit_test(layout_unit_transpose_is_reshape),
      cmocka_unit_test(resnet_block_runs_nhwc),
      cmocka_unit_test(expansion_needed_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
