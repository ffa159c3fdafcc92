/* flops.c — arithmetic cost of a node, for reports (inspect, profiles). */
#include "graph.h"

double kn_node_flops(const kn_graph *g, int node) {
  const kn_node *n = &g->nodes[node];
  if (n->n_out < 1 || n->out[0] < 0) return 0;
  const kn_value *o = &g->values[n->out[0]];
  double out_elems = 1;
  for (int i = 0; i < o->shape.rank; i++) out_elems *= (double)o->shape.dim[i];
  switch (n->op) {
  case KN_OP_CONV_NHWC:
  case KN_OP_CONV: {
    const kn_value *w = &g->values[n->in[1]];
    double k = 1; /* reduction size = weights / output channels */
    for (int i = 0; i < w->shape.rank; i++) k *= (double)w->shape.dim[i];
    int64_t m = n->op == KN_OP_CONV ? w->shape.dim[0] : w->shape.dim[w->shape.rank - 1];
    return 2.0 * out_elems * k / (double)(m > 0 ? m : 1);
  }
  case KN_OP_MATMUL:
  case KN_OP_GEMM: {
    const kn_value *a = &g->values[n->in[0]];
    int64_t k = a->shape.dim[a->shape.rank - 1];
    if (n->op == KN_OP_GEMM && kn_node_attr_int(n, "transA", 0)) k = a->shape.dim[0];
    return 2.0 * out_elems * (double)k;
  }
  default: return out_elems;
  }
}

