/* test_scale_weights.c — a per-channel scale of a conv's input moves into
 * its weights (ir/passes/pass_scale_weights.c): the reference interpreter computes
 * the same outputs before and after, at batch 1 and 2 (per-sample weights),
 * for a squeeze-and-excitation block, for a scale written Mul(s, y) and for
 * an unpadded 3x3 window; and the pass leaves alone what it must not touch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/graph/graph_util.h"

typedef struct se_case {
  int64_t C, M, H, K; /* channels in / out, image size, window */
  bool scale_first;   /* Mul(s, y) rather than Mul(y, s) */
  bool y_is_output;   /* the scaled activation is also a graph output */
  bool const_scale;   /* s is a constant [1, C, 1, 1] instead of the SE branch */
  bool spatial_scale; /* ... a constant [1, C, H, 1]: not one scale per channel */
  const char *batch;  /* "N", or a fixed batch */
} se_case;

/* y = Relu(Conv1x1(x)); s = Sigmoid(Conv1x1(GlobalAveragePool(y))) (or a constant);
 * out = Conv KxK (pads 0) of y * s, with bias. NCHW as imported. */
static void build(kn_graph *g, const se_case *c) {
  kn_graph_init(g);
  g->max_batch = 2;
  g->opset = 13;
  char shape[64];
  snprintf(shape, sizeof shape, "%s,4,%lld,%lld", c->batch, (long long)c->H, (long long)c->H);
  tg_input(g, "x", KN_DT_F32, shape);
  snprintf(shape, sizeof shape, "%lld,4,1,1", (long long)c->C);
  tg_const_rand(g, "we", shape, 5, -0.5f, 0.5f);
  tg_node(g, KN_OP_CONV, "expand", "x,we", "e");
  tg_node(g, KN_OP_RELU, "relu", "e", "y");
  if (c->const_scale || c->spatial_scale) {
    snprintf(shape, sizeof shape, "1,%lld,%lld,1", (long long)c->C, (long long)(c->spatial_scale ? c->H : 1));
    tg_const_rand(g, "s", shape, 3, 0.1f, 1.0f);
  } else {
    tg_node(g, KN_OP_GLOBAL_AVERAGE_POOL, "gap", "y", "p");
    snprintf(shape, sizeof shape, "%lld,%lld,1,1", (long long)c->C, (long long)c->C);
    tg_const_rand(g, "wf", shape, 4, -0.5f, 0.5f);
    tg_node(g, KN_OP_CONV, "fc", "p,wf", "f");
    tg_node(g, KN_OP_SIGMOID, "sig", "f", "s");
  }
  tg_node(g, KN_OP_MUL, "scale", c->scale_first ? "s,y" : "y,s", "ys");
  snprintf(shape, sizeof shape, "%lld,%lld,%lld,%lld", (long long)c->M, (long long)c->C, (long long)c->K,
           (long long)c->K);
  tg_const_rand(g, "w", shape, 7, -0.5f, 0.5f);
  snprintf(shape, sizeof shape, "%lld", (long long)c->M);
  tg_const_rand(g, "b", shape, 8, -0.5f, 0.5f);
  tg_node(g, KN_OP_CONV, "proj", "ys,w,b", "out");
  tg_output(g, "out");
  if (c->y_is_output) tg_output(g, "ys");
}

static const kn_node *proj(const kn_graph *g) {
  for (int i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i].dead && g->nodes[i].op == KN_OP_CONV_NHWC && !strcmp(g->nodes[i].name, "proj"))
      return &g->nodes[i];
  fail_msg("no conv 'proj'");
  return NULL;
}

/* Outputs before and after (layout; scale_weights, fold_constants, dce) at
 * each batch the input allows; the scale moved into the weights iff `moves`. */
static void check(const se_case *c, bool moves) {
  kn_graph g;
  build(&g, c);
  tg_infer_ok(&g);
  tg_pass_ok(&g, kn_pass_layout, "pass");
  bool symbolic = !strcmp(c->batch, "N");
  int nb = symbolic ? 2 : 1;
  int64_t batches[2] = {1, 2};
  void **before[2];
  for (int b = 0; b < nb; b++) before[b] = tg_run(&g, batches[b], 99u + (unsigned)b);
  int muls = tg_count(&g, KN_OP_MUL);
  if (getenv("KN_TEST_DUMP")) fputs(tg_print(&g), stderr);
  tg_pass_ok(&g, kn_pass_scale_weights, "pass");
  tg_pass_ok(&g, kn_pass_fold_constants, "pass");
  tg_pass_ok(&g, kn_pass_dce, "pass");
  /* moved: the conv reads Relu's output, with weights per sample where s
   * is; the activation's Mul is gone, the weights' Mul runs or folded away */
  const kn_node *n = proj(&g);
  int producer = g.values[n->in[0]].producer;
  assert_int_equal(producer >= 0 && g.nodes[producer].op == KN_OP_RELU, moves);
  bool per_sample = moves && !c->const_scale && strcmp(c->batch, "1");
  assert_int_equal(g.values[n->in[1]].shape.rank, per_sample ? 5 : 4);
  assert_int_equal(g.values[n->in[1]].data != NULL, !moves || c->const_scale);
  assert_int_equal(tg_count(&g, KN_OP_MUL), moves && c->const_scale ? muls - 1 : muls);
  for (int b = 0; b < nb; b++) {
    void **after = tg_run(&g, batches[b], 99u + (unsigned)b);
    for (int o = 0; o < g.n_outputs; o++) {
      double diff = tg_max_rel_diff(&g, o, batches[b], after, before[b]);
      if (!(diff <= 1e-5)) fail_msg("output %d differs by %g at batch %lld", o, diff, (long long)batches[b]);
    }
    tg_free_outputs(&g, after);
    tg_free_outputs(&g, before[b]);
  }
  kn_graph_free(&g);
}

static void scale_moves_into_weights(void **state) {
  (void)state;
  check(&(se_case){.C = 16, .M = 8, .H = 8, .K = 1, .batch = "N"}, true);
  check(&(se_case){.C = 16, .M = 8, .H = 8, .K = 1, .batch = "N", .scale_first = true}, true);
  /* 9 * 4 taps x outputs per channel, 36 <= 10 * 10 */
  check(&(se_case){.C = 8, .M = 4, .H = 10, .K = 3, .batch = "N"}, true);
  /* the SE scale at a fixed batch of 1 (shared weights) and 3 (per sample);
   * a constant scale, shared by all samples, folds into the weights, even
   * into weights larger than the activation */
  check(&(se_case){.C = 16, .M = 8, .H = 8, .K = 1, .batch = "1"}, true);
  check(&(se_case){.C = 16, .M = 8, .H = 8, .K = 1, .batch = "3"}, true);
  check(&(se_case){.C = 16, .M = 80, .H = 8, .K = 1, .batch = "N", .const_scale = true}, true);
  check(&(se_case){.C = 16, .M = 8, .H = 8, .K = 1, .batch = "N", .const_scale = true}, true);
}

static void scale_stays(void **state) {
  (void)state;
  /* weights larger than the activation: 80 > 8 * 8 */
  check(&(se_case){.C = 16, .M = 80, .H = 8, .K = 1, .batch = "N"}, false);
  /* a scale per channel and row */
  check(&(se_case){.C = 16, .M = 8, .H = 8, .K = 1, .batch = "N", .spatial_scale = true}, false);
  /* the scaled activation is read elsewhere too */
  check(&(se_case){.C = 16, .M = 8, .H = 8, .K = 1, .batch = "N", .y_is_output = true}, false);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(scale_moves_into_weights),
      cmocka_unit_test(scale_stays),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
