/* pass_split_topk.c — gives every TopK its rank input.
 *
 * TopK's selection needs, for each element, its position in the order
 * (a count over the line); the TE cannot nest that count inside the
 * selection's reduction, so it becomes a node of its own: kiln.TopKRank(X),
 * with TopK's axis and largest, read by TopK as input 2 (te_ops_index.c).
 * Requires inferred shapes; leaves nodes toposorted. TopK nodes that already
 * have the input are left alone. */
#include "ir/passes/passes.h"

int kn_pass_split_topk(kn_graph *g, kn_diag *d) {
  int n_nodes = g->n_nodes;
  for (int i = 0; i < n_nodes; i++) {
    kn_node *n = &g->nodes[i];
    if (n->dead || n->op != KN_OP_TOP_K || n->n_in != 2 || n->in[0] < 0) continue;
    const kn_value *x = &g->values[n->in[0]];
    if (!x->shape_known) continue;
    kn_shape s = x->shape;
    const char *base = n->name;
    int rank_v = kn_pass_new_value(g, base, ".rank", KN_DT_I64, &s);
    int in0 = n->in[0];
    int r = kn_graph_add_node(g, KN_OP_TOP_K_RANK, kn_arena_printf(&g->arena, "%s.rank", base), &in0, 1,
                              &rank_v, 1);
    n = &g->nodes[i]; /* nodes may have moved */
    kn_node *rn = &g->nodes[r];
    kn_node_add_attr(g, rn, kn_pass_attr_int("axis", kn_node_attr_int(n, "axis", -1)));
    kn_node_add_attr(g, rn, kn_pass_attr_int("largest", kn_node_attr_int(n, "largest", 1)));
    int *ins = KN_NEW_ARRAY(&g->arena, int, 3);
    ins[0] = n->in[0];
    ins[1] = n->in[1];
    ins[2] = rank_v;
    n->in = ins;
    n->n_in = 3;
  }
  return kn_graph_toposort(g, d);
}
