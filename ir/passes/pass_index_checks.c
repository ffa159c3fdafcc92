/* pass_index_checks.c — `kiln compile --check-indices`: a run-time check that
 * every index a gather or scatter reads at run time is valid, so that P_run
 * returns KILN_ERR_INDEX (writing no output) instead of applying Kiln's rule
 * for out-of-range indices (docs/ops.md: a gather reads 0, a scatter drops
 * the update).
 *
 * Per Gather, GatherElements, GatherND, ScatterElements (Scatter) and
 * ScatterND whose indices are not constants, one bool check
 * (kn_pass_add_check_kind, KN_CHECK_INDEX) built of ordinary ops, so that
 * it is compiled like the rest of the model:
 *   all(-dim <= i && i < dim)   (ReduceMin of the int32 casts)
 * with dim the extent of the axis each index addresses (GatherND /
 * ScatterND: a vector along the indices' last axis). Runs on the imported
 * graph, before the expansions, so only the model's own ops are checked,
 * not the gathers Kiln's decompositions build (whose indices may leave the
 * range by design). Infers shapes quietly itself; an op whose data shape or
 * addressed extents are unknown at compile time (an axis of extent N) is
 * left unchecked. */
#include "ir/passes/rewrite.h"
#include "ir/passes/passes.h"
#include "ir/shape/shape_infer.h"

/* The indices input of a run-time gather / scatter, or -1. */
static int runtime_indices(const kn_graph *g, const kn_node *n) {
  if (n->dead || n->n_in < 2 || n->in[0] < 0 || n->in[1] < 0 || g->values[n->in[1]].data) return -1;
  switch (n->op) {
  case KN_OP_GATHER:
  case KN_OP_GATHER_ELEMENTS:
  case KN_OP_GATHER_ND:
  case KN_OP_SCATTER:
  case KN_OP_SCATTER_ELEMENTS:
  case KN_OP_SCATTER_ND: return n->in[1];
  default: return -1;
  }
}

/* The extents the indices of n address, into dims[0..*n_dims): one (an
 * axis) or k (GatherND / ScatterND). False when one is not a compile-time
 * constant. */
static bool addressed_dims(const kn_graph *g, const kn_node *n, int64_t *dims, int *n_dims) {
  const kn_value *x = &g->values[n->in[0]], *ind = &g->values[n->in[1]];
  if (!x->shape_known || !ind->shape_known) return false;
  int r = x->shape.rank, q = ind->shape.rank, first, k;
  if (n->op == KN_OP_GATHER_ND || n->op == KN_OP_SCATTER_ND) {
    if (q < 1 || (ind->shape.batch_mask >> (q - 1) & 1)) return false;
    first = n->op == KN_OP_GATHER_ND ? (int)kn_node_attr_int(n, "batch_dims", 0) : 0;
    k = (int)ind->shape.dim[q - 1];
  } else {
    int64_t axis = kn_node_attr_int(n, "axis", 0);
    first = (int)(axis < 0 ? axis + r : axis);
    k = 1;
  }
  if (first < 0 || k < 1 || first + k > r) return false;
  for (int t = 0; t < k; t++) {
    if (x->shape.batch_mask >> (first + t) & 1) return false;
    dims[t] = x->shape.dim[first + t];
  }
  *n_dims = k;
  return true;
}

int kn_pass_index_checks(kn_graph *g, kn_diag *d) {
  (void)d;
  bool any = false;
  for (int i = 0; i < g->n_nodes; i++) any |= runtime_indices(g, &g->nodes[i]) >= 0;
  if (!any) return 0;
  kn_infer_shapes_quiet(g); /* the data shapes; failures are reported later */
  int n_nodes = g->n_nodes, added = 0;
  for (int i = 0; i < n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    int ind = runtime_indices(g, n);
    int64_t dims[KN_MAX_RANK], neg[KN_MAX_RANK];
    int k;
    if (ind < 0 || !addressed_dims(g, n, dims, &k)) continue;
    for (int t = 0; t < k; t++) neg[t] = -dims[t];
    kn_rw b = {.g = g, .node = -1,
               .name = kn_arena_printf(&g->arena, "check: indices of node '%s' (%s) in range", n->name, n->op_type)};
    bool nd = n->op == KN_OP_GATHER_ND || n->op == KN_OP_SCATTER_ND;
    int hi = nd ? kn_rw_ints(&b, dims, k) : kn_rw_i64(&b, dims[0]);
    int lo = nd ? kn_rw_ints(&b, neg, k) : kn_rw_i64(&b, neg[0]);
    int v = kn_rw_cast(&b, ind, KN_DT_I64);
    int ok = kn_rw_bin(&b, KN_OP_AND, kn_rw_bin(&b, KN_OP_GREATER_OR_EQUAL, v, lo), kn_rw_bin(&b, KN_OP_LESS, v, hi));
    int all = kn_rw_reduce(&b, KN_OP_REDUCE_MIN, kn_rw_cast(&b, ok, KN_DT_I32), NULL, 0, false);
    kn_pass_add_check_kind(g, kn_rw_cast(&b, all, KN_DT_BOOL), KN_CHECK_INDEX);
    added++;
  }
  return added;
}
