/* test_split_pool.c — a global average pool over a large NHWC image pools
 * per-row means (ir/passes/pass_split_pool.c): the reference interpreter computes
 * the same outputs before and after at batch 1 and 2, the pool reads a
 * [N, H, 1, C] ReduceMean over W, and small or short images are left alone. */
#include <stdio.h>

#include "tests/graph/graph_util.h"

/* out = GlobalAveragePool(Relu(x)), x [N, C, H, W] as imported (NCHW) */
static void build(kn_graph *g, int64_t c, int64_t h, int64_t w) {
  kn_graph_init(g);
  g->max_batch = 2;
  g->opset = 13;
  char shape[64];
  snprintf(shape, sizeof shape, "N,%lld,%lld,%lld", (long long)c, (long long)h, (long long)w);
  tg_input(g, "x", KN_DT_F32, shape);
  tg_node(g, KN_OP_RELU, "relu", "x", "y");
  tg_node(g, KN_OP_GLOBAL_AVERAGE_POOL, "gap", "y", "out");
  tg_output(g, "out");
}

static const kn_node *pool(const kn_graph *g) {
  for (int i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i].dead && g->nodes[i].op == KN_OP_GLOBAL_AVERAGE_POOL_NHWC) return &g->nodes[i];
  fail_msg("no kiln.GlobalAveragePoolNHWC");
  return NULL;
}

/* Outputs before and after (layout, then split_pool) at batch 1 and 2; the
 * pool reads row means iff `splits`. */
static void check(int64_t c, int64_t h, int64_t w, bool splits) {
  kn_graph g;
  build(&g, c, h, w);
  tg_infer_ok(&g);
  tg_pass_ok(&g, kn_pass_layout, "pass");
  void **before[2];
  for (int b = 0; b < 2; b++) before[b] = tg_run(&g, b + 1, 7u + (unsigned)b);
  tg_pass_ok(&g, kn_pass_split_pool, "pass");
  const kn_node *p = pool(&g);
  const kn_value *in = &g.values[p->in[0]];
  int producer = in->producer;
  bool split = producer >= 0 && g.nodes[producer].op == KN_OP_REDUCE_MEAN;
  assert_int_equal(split, splits);
  assert_int_equal(tg_count(&g, KN_OP_REDUCE_MEAN), splits ? 1 : 0);
  if (splits) {
    /* [N, H, 1, C]: the mean of every row of W pixels */
    assert_int_equal(in->shape.rank, 4);
    assert_int_equal(in->shape.dim[1], h);
    assert_int_equal(in->shape.dim[2], 1);
    assert_int_equal(in->shape.dim[3], c);
    assert_int_equal(in->shape.batch_mask, 1u);
  }
  for (int b = 0; b < 2; b++) {
    void **after = tg_run(&g, b + 1, 7u + (unsigned)b);
    double diff = tg_max_rel_diff(&g, 0, b + 1, after, before[b]);
    if (!(diff <= 1e-5)) fail_msg("output differs by %g at batch %d", diff, b + 1);
    tg_free_outputs(&g, after);
    tg_free_outputs(&g, before[b]);
  }
  kn_graph_free(&g);
}

static void large_pools_split(void **state) {
  (void)state;
  check(8, 56, 56, true);  /* 3136 pixels, the threshold */
  check(3, 64, 80, true);  /* not square, channels short of a vector */
  check(16, 112, 112, true);
}

static void small_pools_stay(void **state) {
  (void)state;
  check(8, 28, 28, false); /* 784 pixels */
  check(8, 4, 1024, false); /* 4 rows: too few to spread over threads */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(large_pools_split),
      cmocka_unit_test(small_pools_stay),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
