/* test_winograd.c — the Winograd F(2x2, 3x3) and F(4x4, 3x3) rewrites (ir/passes/pass_winograd.c):
 * the reference interpreter computes the same outputs before and after it
 * (the transforms' references multiply by the matrices, the pass transforms
 * the weights), over pads, odd (ragged) sizes, bias or none and a symbolic
 * batch; and it leaves alone what it cannot compute. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/graph/graph_util.h"
#include "ir/passes/winograd.h"

#define I(x) ((int64_t)(x))

static int winograd_all2(kn_graph *g, kn_diag *d) { return kn_pass_winograd(g, kn_winograd_want_all2, NULL, d); }
static int winograd_all4(kn_graph *g, kn_diag *d) { return kn_pass_winograd(g, kn_winograd_want_all4, NULL, d); }

/* x [N, C, H, W] -> Conv 3x3 (pads p, stride s, group) -> Relu, NCHW as imported. */
static void build(kn_graph *g, int64_t C, int64_t K, int64_t H, int64_t W, int64_t pad_lo, int64_t pad_hi,
                  int64_t stride, int64_t group, bool bias) {
  kn_graph_init(g);
  g->max_batch = 2;
  g->opset = 13;
  char shape[64];
  snprintf(shape, sizeof shape, "N,%lld,%lld,%lld", (long long)C, (long long)H, (long long)W);
  tg_input(g, "x", KN_DT_F32, shape);
  snprintf(shape, sizeof shape, "%lld,%lld,3,3", (long long)K, (long long)(C / group));
  tg_const_rand(g, "w", shape, 7, -0.5f, 0.5f);
  snprintf(shape, sizeof shape, "%lld", (long long)K);
  tg_const_rand(g, "b", shape, 8, -0.5f, 0.5f);
  int n = tg_node(g, KN_OP_CONV, "conv", bias ? "x,w,b" : "x,w", "c");
  tg_attr_ints(g, n, "pads", 4, pad_lo, pad_lo, pad_hi, pad_hi);
  tg_attr_ints(g, n, "strides", 2, stride, stride);
  tg_attr_i(g, n, "group", group);
  tg_node(g, KN_OP_RELU, "relu", "c", "y");
  tg_output(g, "y");
}

/* Outputs at batch 1 and 2 after the NHWC layout, then after Winograd with
 * tile m. */
static void check_rewrite(kn_graph *g, int m, int expect_rewritten) {
  tg_infer_ok(g);
  tg_pass_ok(g, kn_pass_layout, "pass");
  int64_t batches[2] = {1, 2};
  void **before[2];
  for (int b = 0; b < 2; b++) before[b] = tg_run(g, batches[b], 99u + (unsigned)b);
  tg_pass_ok(g, m == 2 ? winograd_all2 : winograd_all4, "pass");
  tg_pass_ok(g, kn_pass_dce, "pass");
  assert_int_equal(tg_count(g, KN_OP_WINOGRAD_INPUT), expect_rewritten);
  for (int i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i].dead && kn_winograd_op(g->nodes[i].op))
      assert_int_equal(kn_node_attr_int(&g->nodes[i], "tile", 2), m);
  assert_int_equal(tg_count(g, KN_OP_WINOGRAD_OUTPUT), expect_rewritten);
  assert_int_equal(tg_count(g, KN_OP_CONV_NHWC), 1 - expect_rewritten);
  for (int b = 0; b < 2; b++) {
    void **after = tg_run(g, batches[b], 99u + (unsigned)b);
    double diff = tg_max_rel_diff(g, 0, batches[b], after, before[b]);
    if (!(diff <= 1e-5)) fail_msg("output differs by %g at batch %lld", diff, (long long)batches[b]);
    tg_free_outputs(g, after);
    tg_free_outputs(g, before[b]);
  }
}

static void winograd_matches_direct(void **state) {
  (void)state;
  static const struct {
    int64_t C, K, H, W, pad_lo, pad_hi;
    bool bias;
  } cases[] = {
      {8, 16, 8, 8, 1, 1, true},   /* even output, padded */
      {5, 3, 7, 7, 1, 1, true},    /* odd: the last tile row and column are ragged */
      {4, 6, 9, 6, 0, 0, false},   /* no pads: 7x4 output */
      {3, 4, 5, 8, 2, 1, true},    /* unequal pads: 6x9 output */
      {16, 8, 3, 3, 0, 0, false},  /* one output pixel */
      {2, 2, 1, 1, 1, 1, true},    /* a 1x1 image, all of the window in the pads */
      {6, 5, 14, 14, 1, 1, true},  /* F(4x4): 14x14 in 4x4 tiles, the last ragged */
      {4, 4, 10, 7, 2, 2, false},  /* F(4x4): 12x9 output */
  };
  for (int m = 2; m <= 4; m += 2)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      kn_graph g;
      build(&g, cases[i].C, cases[i].K, cases[i].H, cases[i].W, cases[i].pad_lo, cases[i].pad_hi, 1, 1,
            cases[i].bias);
      check_rewrite(&g, m, 1);
      kn_graph_free(&g);
    }
}

/* Stride 2 and grouped convs keep their direct form; the default rule wants
 * 32 channels in and out. */
static void winograd_leaves_the_rest(void **state) {
  (void)state;
  kn_graph g;
  build(&g, 8, 8, 8, 8, 1, 1, 2, 1, true);
  check_rewrite(&g, 2, 0);
  kn_graph_free(&g);
  build(&g, 8, 8, 8, 8, 1, 1, 1, 2, true);
  check_rewrite(&g, 4, 0);
  kn_graph_free(&g);
  static const int64_t channels[3][2] = {{32, 32}, {16, 64}, {64, 16}};
  for (int i = 0; i < 3; i++) {
    build(&g, channels[i][0], channels[i][1], 6, 6, 1, 1, 1, 1, true);
    tg_infer_ok(&g);
    tg_pass_ok(&g, kn_pass_layout, "pass");
    kn_diag d;
    kn_diag_init(&d);
    assert_int_equal(kn_pass_winograd(&g, kn_winograd_want_default, NULL, &d), 0);
    kn_diag_free(&d);
    assert_int_equal(tg_count(&g, KN_OP_WINOGRAD_INPUT), i == 0);
    kn_graph_free(&g);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(winograd_matches_direct),
      cmocka_unit_test(winograd_leaves_the_rest),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
