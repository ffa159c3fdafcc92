/* pass_value_checks.c — run-time range checks of values the kernels read at
 * run time: CumSum / CumProd's axis must lie in [-rank, rank) (the kernel
 * otherwise sums nothing). Requires an expanded graph; infers shapes quietly
 * itself (the axes' types), failures being reported by the shape inference
 * that follows. Guarantees one bool check (kn_pass_add_check) per such axis. */
#include "ir/passes/rewrite.h"
#include "ir/passes/passes.h"
#include "ir/shape/shape_infer.h"

/* Run-time checks of values Kiln's kernels read at run time but that must
 * lie in a range: CumSum / CumProd's axis in [-rank, rank) (the kernel
 * otherwise sums nothing). */
static bool runtime_cum_axis(const kn_graph *g, const kn_node *n) {
  return !n->dead && (n->op == KN_OP_CUM_SUM || n->op == KN_OP_CUM_PROD) && n->n_in >= 2 && n->in[0] >= 0 &&
         n->in[1] >= 0 && !g->values[n->in[1]].data;
}

int kn_pass_value_checks(kn_graph *g, kn_diag *d) {
  (void)d;
  bool any = false;
  for (int i = 0; i < g->n_nodes; i++) any |= runtime_cum_axis(g, &g->nodes[i]);
  if (!any) return 0;
  kn_infer_shapes_quiet(g); /* types of the axes; failures are reported later */
  int n_nodes = g->n_nodes;
  for (int i = 0; i < n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    if (!runtime_cum_axis(g, n)) continue;
    int axis = n->in[1], x = n->in[0];
    if (!g->values[x].shape_known || !g->values[axis].shape_known || kn_value_numel(g, axis) != 1) continue;
    int64_t r = g->values[x].shape.rank;
    kn_rw b = {.g = g, .node = -1,
               .name = kn_arena_printf(&g->arena, "check: axis of node '%s' in [-%lld, %lld)", n->name, (long long)r,
                                       (long long)r)};
    int a = kn_rw_reshape(&b, kn_rw_cast(&b, axis, KN_DT_I64), NULL, 0);
    int lo = kn_rw_bin(&b, KN_OP_GREATER_OR_EQUAL, a, kn_rw_scalar(&b, KN_DT_I64, (double)-r));
    int hi = kn_rw_bin(&b, KN_OP_LESS, a, kn_rw_scalar(&b, KN_DT_I64, (double)r));
    kn_pass_add_check(g, kn_rw_bin(&b, KN_OP_AND, lo, hi));
  }
  return 1;
}
