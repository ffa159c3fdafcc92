/* pass_split_pool.c — a global average pool over a large NHWC image first
 * averages each row, then pools the row means.
 *
 * Requires: shapes inferred, toposorted, kiln.GlobalAveragePoolNHWC.
 * Guarantees: every float32 kiln.GlobalAveragePoolNHWC whose input has
 * constant H and W with H >= 8 and H x W >= KN_SPLIT_POOL_PIXELS reads a
 * ReduceMean(axes=[2], keepdims=1) of that input, [N, H, 1, C]; the result
 * is the same mean (every row has W pixels) up to float rounding.
 *
 * Why: the pool alone is parallel over its channel vectors only (a
 * squeeze-and-excitation pool of 32 channels is 2 tasks), so each thread
 * reads every pixel, half of them from the other core's cache, where the
 * conv before it wrote them row by row. The row means are parallel over
 * rows, as the conv is, and the second pool reads H x C values. */
#include "ir/passes/passes.h"

/* the smallest image split: 56x56 and up (efficientnet_b0's first three
 * squeeze-and-excitation pools; see the measurements in docs/architecture.md) */
#define KN_SPLIT_POOL_PIXELS 3136

int kn_pass_split_pool(kn_graph *g, kn_diag *d) {
  int n_nodes = g->n_nodes;
  for (int i = 0; i < n_nodes; i++) {
    kn_node *n = &g->nodes[i];
    if (n->dead || n->op != KN_OP_GLOBAL_AVERAGE_POOL_NHWC || n->n_in < 1 || n->in[0] < 0) continue;
    const kn_value *x = &g->values[n->in[0]];
    if (x->dtype != KN_DT_F32 || x->shape.rank != 4 || (x->shape.batch_mask & 6u)) continue;
    int64_t h = x->shape.dim[1], w = x->shape.dim[2];
    if (h < 8 || h * w < KN_SPLIT_POOL_PIXELS) continue;
    kn_shape rows = x->shape;
    rows.dim[2] = 1;
    const char *base = n->name;
    int rows_v = kn_pass_new_value(g, base, ".rows", x->dtype, &rows);
    int in = g->nodes[i].in[0];
    kn_graph_add_node(g, KN_OP_REDUCE_MEAN, kn_arena_printf(&g->arena, "%s.rows", base), &in, 1, &rows_v, 1);
    kn_node *rm = &g->nodes[g->n_nodes - 1];
    kn_node_add_attr(g, rm, kn_pass_attr_ints(g, "axes", (const int64_t[]){2}, 1));
    kn_node_add_attr(g, rm, kn_pass_attr_int("keepdims", 1));
    g->nodes[i].in[0] = rows_v;
  }
  return kn_graph_toposort(g, d);
}
