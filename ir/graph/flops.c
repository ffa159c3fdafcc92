/* flops.c — arithmetic cost of a node, for reports (inspect, profiles), and
 * the work the reference interpreter would spend on it (kn_node_work). */
#include "ir/graph/graph.h"

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
    double k = 1; /* reduction size = weights / output channels (of one sample's weights) */
    int per_sample = n->op == KN_OP_CONV_NHWC && w->shape.rank == 5;
    for (int i = per_sample; i < w->shape.rank; i++) k *= (double)w->shape.dim[i];
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


static double value_elems(const kn_graph *g, int v) {
  if (v < 0 || !g->values[v].shape_known) return 0;
  double e = 1;
  for (int i = 0; i < g->values[v].shape.rank; i++) e *= (double)g->values[v].shape.dim[i];
  return e;
}

double kn_node_work(const kn_graph *g, int node, double *input_elems) {
  const kn_node *n = &g->nodes[node];
  double work = kn_node_flops(g, node), out = n->n_out > 0 ? value_elems(g, n->out[0]) : 0, in = 0;
  bool shape_only = n->op == KN_OP_SHAPE || n->op == KN_OP_SIZE; /* input 0: only its shape is read */
  for (int k = shape_only ? 1 : 0; k < n->n_in; k++) in += value_elems(g, n->in[k]);
  for (int k = 0; k < n->n_out; k++) work += value_elems(g, n->out[k]);
  /* windowed ops other than convolutions (counted by the flops) read a
   * whole window per output element */
  int count = 0;
  const int64_t *kernel = kn_node_attr_ints(n, "kernel_shape", &count);
  if (kernel && n->op != KN_OP_CONV && n->op != KN_OP_CONV_NHWC) {
    double window = 1;
    for (int i = 0; i < count; i++) window *= kernel[i] > 0 ? (double)kernel[i] : 1;
    work += out * window;
  }
  if (input_elems) *input_elems = in;
  return work + in;
}
