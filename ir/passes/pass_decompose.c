/* pass_decompose.c — rewrites composite ONNX ops (losses, normalisations,
 * LRN, LpPool, quantization, training updates, small ML ops, DeformConv) into primitive graph ops, so they need no shape
 * rule, reference or compute definition of their own. The rewrites live in
 * pass_decompose_loss.c, pass_decompose_quant.c, pass_decompose_misc.c,
 * pass_decompose_ml.c and pass_decompose_deform.c; this file holds the
 * driver and the node builder (decompose.h).
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
  default: return kn_dc_misc_arity(g, n, min_in, max_in, max_out);
  }
}

static bool is_composite(const kn_graph *g, const kn_node *n) {
  int a, b, c;
  return composite_arity(g, n, &a, &b, &c);
}

/* ---- builder ---- */

int kn_dc_fail(kn_dc *c, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const kn_node *n = &c->g->nodes[c->node];
  return kn_diag_error(c->d, "node '%s' (%s): %s", n->name, n->op_type, msg);
}

int kn_dc_in(const kn_dc *c, int k) {
  const kn_node *n = &c->g->nodes[c->node];
  return k < n->n_in ? n->in[k] : -1;
}

const kn_value *kn_dc_val(const kn_dc *c, int v) { return &c->g->values[v]; }

static int new_value(kn_dc *c) {
  kn_shape none = {0};
  int v = kn_pass_new_value(c->g, c->name, "/t", KN_DT_INVALID, &none);
  c->g->values[v].shape_known = false;
  return v;
}

int kn_dc_op(kn_dc *c, kn_op op, const int *in, int n_in) {
  int out = new_value(c);
  const char *name = kn_arena_printf(&c->g->arena, "%s/%s_%d", c->name, kn_op_name(op), c->g->n_nodes);
  c->last = kn_graph_add_node(c->g, op, name, in, n_in, &out, 1);
  return out;
}

int kn_dc_un(kn_dc *c, kn_op op, int a) { return kn_dc_op(c, op, &a, 1); }

int kn_dc_bin(kn_dc *c, kn_op op, int a, int b) {
  int in[2] = {a, b};
  return kn_dc_op(c, op, in, 2);
}

void kn_dc_attr_int(kn_dc *c, const char *name, int64_t v) {
  kn_node_add_attr(c->g, &c->g->nodes[c->last], kn_pass_attr_int(name, v));
}

void kn_dc_attr_ints(kn_dc *c, const char *name, const int64_t *v, int n) {
  kn_attr a = kn_pass_attr_ints(c->g, name, v, n);
  kn_node_add_attr(c->g, &c->g->nodes[c->last], a);
}

void kn_dc_attr_copy(kn_dc *c, const char *name) {
  const kn_attr *a = kn_node_attr(&c->g->nodes[c->node], name);
  if (a) {
    kn_attr copy = *a;
    kn_node_add_attr(c->g, &c->g->nodes[c->last], copy);
  }
}

int kn_dc_const(kn_dc *c, kn_dtype t, const kn_shape *s, const void *data) {
  return kn_pass_new_const(c->g, c->name, "/c", t, s, data);
}

int kn_dc_scalar(kn_dc *c, kn_dtype t, double v) {
  kn_shape s = {.rank = 0};
  int k = kn_dc_const(c, t, &s, NULL);
  kn_ref_store(t, c->g->values[k].data, 0, v); /* saturating (kn_f2i64_sat): an attribute may hold any double */
  return k;
}

int kn_dc_ints(kn_dc *c, const int64_t *v, int n) {
  kn_shape s = {.rank = 1, .dim = {n}};
  return kn_dc_const(c, KN_DT_I64, &s, v);
}

int kn_dc_cast(kn_dc *c, int a, kn_dtype t) {
  if (c->g->values[a].dtype == t) return a;
  int v = kn_dc_un(c, KN_OP_CAST, a);
  kn_dc_attr_int(c, "to", kn_dtype_to_onnx(t));
  return v;
}

int kn_dc_reduce(kn_dc *c, kn_op op, int a, const int64_t *axes, int n_axes, bool keepdims) {
  int v = kn_dc_un(c, op, a);
  if (n_axes > 0) kn_dc_attr_ints(c, "axes", axes, n_axes);
  kn_dc_attr_int(c, "keepdims", keepdims ? 1 : 0);
  return v;
}

int kn_dc_unsqueeze(kn_dc *c, int a, const int64_t *axes, int n) {
  if (n == 0) return a;
  return kn_dc_bin(c, KN_OP_UNSQUEEZE, a, kn_dc_ints(c, axes, n));
}

int kn_dc_squeeze(kn_dc *c, int a, const int64_t *axes, int n) {
  return kn_dc_bin(c, KN_OP_SQUEEZE, a, kn_dc_ints(c, axes, n));
}

int kn_dc_reshape(kn_dc *c, int a, const int64_t *shape, int n) {
  return kn_dc_bin(c, KN_OP_RESHAPE, a, kn_dc_ints(c, shape, n));
}

int kn_dc_clamp(kn_dc *c, int a, kn_dtype t, double lo, double hi) {
  int v = kn_dc_bin(c, KN_OP_MAX, a, kn_dc_scalar(c, t, lo));
  return kn_dc_bin(c, KN_OP_MIN, v, kn_dc_scalar(c, t, hi));
}

void kn_dc_output(kn_dc *c, int k, int v) {
  kn_graph *g = c->g;
  if (k >= g->nodes[c->node].n_out) return; /* an optional output the model leaves out */
  int out = g->nodes[c->node].out[k];
  int p = g->values[v].producer;
  if (p < 0 || p == c->node) {
    int in = v;
    c->last = kn_graph_add_node(g, KN_OP_IDENTITY,
                                kn_arena_printf(&g->arena, "%s/Identity_%d", c->name, g->n_nodes), &in, 1, &out, 1);
    return;
  }
  kn_node *pn = &g->nodes[p];
  for (int j = 0; j < pn->n_out; j++)
    if (pn->out[j] == v) pn->out[j] = out;
  g->values[out].producer = p;
  g->values[v].producer = -1;
  kn_pass_replace_uses(g, v, out);
}

/* ---- driver ---- */

static int rewrite_node(kn_graph *g, int node, kn_diag *d) {
  kn_dc c = {.g = g, .d = d, .node = node, .name = g->nodes[node].name, .last = -1};
  const kn_node *n = &g->nodes[node];
  int min_in = 0, max_in = 0, max_out = 0;
  composite_arity(g, n, &min_in, &max_in, &max_out);
  if (n->n_in > max_in || n->n_out > max_out)
    return kn_dc_fail(&c, "has %d inputs and %d outputs, at most %d and %d allowed", n->n_in, n->n_out, max_in,
                      max_out);
  for (int k = 0; k < min_in; k++)
    if (k >= n->n_in || n->in[k] < 0) return kn_dc_fail(&c, "required input %d is missing", k);
  kn_pass_kill_node(g, node);
  int rc = kn_dc_loss_norm(&c);
  if (rc == 1) rc = kn_dc_quant(&c);
  if (rc == 1) rc = kn_dc_misc(&c);
  if (rc == 1) rc = kn_dc_ml(&c);
  if (rc == 1) rc = kn_dc_deform(&c);
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
