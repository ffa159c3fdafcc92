/* pass_decompose.c — rewrites composite ONNX ops (losses, normalisations,
 * LRN, LpPool, quantization, training updates, small ML ops, DeformConv) into primitive graph ops, so they need no shape
 * rule, reference or compute definition of their own. The rewrites live in
 * pass_decompose_loss.c, pass_decompose_quant.c, pass_decompose_misc.c,
 * pass_decompose_ml.c and pass_decompose_deform.c (decompose.h); this file
 * holds the driver.
 *
 * Runs on a freshly imported graph, before the first kn_infer_shapes (the
 * composites have no shape rule): it infers shapes itself, quietly, rewrites
 * every composite whose inputs are typed, and repeats while that changes
 * something (a composite fed by another one is typed once its producer is
 * rewritten). Composites left over sit behind an earlier failure, which the
 * caller's own kn_infer_shapes reports.
 * Requires: nothing beyond a verified import. Guarantees: no composite whose
 * inputs could be typed is left; new values are untyped until the next
 * kn_infer_shapes; nodes are toposorted. */
#include <stdarg.h>
#include <stdio.h>

#include "ir/passes/decompose.h"
#include "ir/passes/passes.h"
#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"

/* Whether op is a composite; if so its required and most inputs, and most
 * outputs (the rewrites rely on these). */
static bool composite_arity(const kn_graph *g, const kn_node *n, int *min_in, int *max_in, int *max_out) {
  *max_out = 1;
  switch (n->op) {
  case KN_OP_NLL_LOSS: *min_in = 2, *max_in = 3; return true;
  case KN_OP_SCE_LOSS: *min_in = 2, *max_in = 3, *max_out = 2; return true;
  case KN_OP_LP_NORMALIZATION: case KN_OP_MVN: case KN_OP_LRN: case KN_OP_LP_POOL:
    *min_in = *max_in = 1; return true;
  case KN_OP_INSTANCE_NORM: case KN_OP_GROUP_NORM: *min_in = *max_in = 3; return true;
  case KN_OP_QUANTIZE_LINEAR: case KN_OP_DEQUANTIZE_LINEAR: *min_in = 2, *max_in = 3; return true;
  case KN_OP_DYNAMIC_QUANTIZE_LINEAR: *min_in = *max_in = 1, *max_out = 3; return true;
  case KN_OP_MATMUL_INTEGER: case KN_OP_CONV_INTEGER: *min_in = 2, *max_in = 4; return true;
  case KN_OP_QLINEAR_MATMUL: *min_in = *max_in = 8; return true;
  case KN_OP_QLINEAR_CONV: *min_in = 8, *max_in = 9; return true;
  case KN_OP_DEFORM_CONV: *min_in = 3, *max_in = 5; return true;
  default: return kn_decompose_misc_arity(g, n, min_in, max_in, max_out);
  }
}

static bool is_composite(const kn_graph *g, const kn_node *n) {
  int a, b, c;
  return composite_arity(g, n, &a, &b, &c);
}

/* ---- driver ---- */

static int rewrite_node(kn_graph *g, int node, kn_diag *d) {
  kn_rw c = {.g = g, .d = d, .node = node, .name = g->nodes[node].name, .last = -1};
  const kn_node *n = &g->nodes[node];
  int min_in = 0, max_in = 0, max_out = 0;
  composite_arity(g, n, &min_in, &max_in, &max_out);
  if (n->n_in > max_in || n->n_out > max_out)
    return kn_rw_fail(&c, "has %d inputs and %d outputs, at most %d and %d allowed", n->n_in, n->n_out, max_in,
                      max_out);
  for (int k = 0; k < min_in; k++)
    if (k >= n->n_in || n->in[k] < 0) return kn_rw_fail(&c, "required input %d is missing", k);
  kn_pass_kill_node(g, node);
  int rc = kn_decompose_loss_norm(&c);
  if (rc == 1) rc = kn_decompose_quant(&c);
  if (rc == 1) rc = kn_decompose_misc(&c);
  if (rc == 1) rc = kn_decompose_ml(&c);
  if (rc == 1) rc = kn_decompose_deform(&c);
  KN_ASSERT(rc != 1, "composite op without a rewrite");
  return rc;
}

/* The new nodes remember the composite (so shape inference's diagnostics
 * about them name it), and so do this rewrite's diagnostics when the
 * composite was itself made by one (an LSTM inside a Loop body). */
static int rewrite(kn_graph *g, int node, kn_diag *d) {
  int first_node = g->n_nodes, first_line = d ? d->count : 0;
  int rc = rewrite_node(g, node, d);
  kn_graph_mark_origin(g, first_node, node);
  kn_node_diag_origin(&g->nodes[node], d, first_line);
  return rc;
}

int kn_pass_decompose(kn_graph *g, kn_diag *d) {
  bool any = false;
  for (int i = 0; i < g->n_nodes && !any; i++) any = !g->nodes[i].dead && is_composite(g, &g->nodes[i]);
  if (!any) return 0; /* most models: no inference here at all */
  for (;;) {
    kn_diag quiet;
    kn_diag_init(&quiet);
    kn_infer_shapes(g, &quiet);
    kn_diag_free(&quiet);
    int rc = 0, rewritten = 0, n_nodes = g->n_nodes;
    for (int i = 0; i < n_nodes; i++) {
      const kn_node *n = &g->nodes[i];
      if (n->dead || !is_composite(g, n)) continue;
      bool ready = true;
      for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0 && !g->values[n->in[k]].shape_known) ready = false;
      if (!ready) continue;
      if (rewrite(g, i, d) < 0) rc = -1;
      rewritten++;
    }
    if (rc < 0) return -1;
    if (kn_graph_toposort(g, d) < 0) return -1;
    if (rewritten == 0) return 0;
  }
}
