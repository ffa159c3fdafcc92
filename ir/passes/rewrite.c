/* rewrite.c — the graph-rewriting toolkit of rewrite.h: new values, nodes and
 * constants named after the node being replaced, shorthands for the common
 * primitive nodes, and retyping a node in place. */
#include "ir/passes/rewrite.h"

#include <stdarg.h>
#include <stdio.h>

#include "ir/ref/ref_eval.h"

/* ---- nodes ---- */

int kn_rw_value(kn_rw *rw) {
  kn_graph *g = rw->g;
  if (rw->names == KN_RW_NAMES_SEQ)
    return kn_graph_add_value(g, kn_arena_printf(&g->arena, "%s#%d", rw->name, rw->counter++));
  kn_shape none = {0};
  int v = kn_pass_new_value(g, rw->name, "/t", KN_DT_INVALID, &none);
  g->values[v].shape_known = false;
  return v;
}

int kn_rw_op_into(kn_rw *rw, kn_op op, const int *in, int n_in, int out) {
  kn_graph *g = rw->g;
  const char *name = rw->names == KN_RW_NAMES_SEQ
                         ? kn_arena_printf(&g->arena, "%s#n%d", rw->name, rw->added)
                         : kn_arena_printf(&g->arena, "%s/%s_%d", rw->name, kn_op_name(op), g->n_nodes);
  rw->last = kn_graph_add_node(g, op, name, in, n_in, &out, 1);
  rw->added++;
  return rw->last;
}

int kn_rw_op(kn_rw *rw, kn_op op, const int *in, int n_in) {
  int out = kn_rw_value(rw);
  kn_rw_op_into(rw, op, in, n_in, out);
  return out;
}

int kn_rw_op_attrs(kn_rw *rw, kn_op op, const int *in, int n_in, const kn_attr *attrs, int n_attrs) {
  int out = kn_rw_op(rw, op, in, n_in);
  for (int a = 0; a < n_attrs; a++) kn_rw_attr(rw, attrs[a]);
  return out;
}

int kn_rw_un(kn_rw *rw, kn_op op, int a) { return kn_rw_op(rw, op, &a, 1); }

int kn_rw_bin(kn_rw *rw, kn_op op, int a, int b) {
  int in[2] = {a, b};
  return kn_rw_op(rw, op, in, 2);
}

int kn_rw_typed_into(kn_rw *rw, kn_op op, const int *in, int n_in, int out, const char *tag) {
  const char *name = kn_arena_printf(&rw->g->arena, "%s/%s", rw->name, tag);
  rw->last = kn_graph_add_node(rw->g, op, name, in, n_in, &out, 1);
  rw->added++;
  return rw->last;
}

int kn_rw_typed(kn_rw *rw, kn_op op, const int *in, int n_in, kn_dtype t, kn_shape s, const char *tag) {
  int v = kn_pass_new_value(rw->g, rw->name, kn_arena_printf(&rw->g->arena, "/%s", tag), t, &s);
  kn_rw_typed_into(rw, op, in, n_in, v, tag);
  return v;
}

void kn_rw_attr(kn_rw *rw, kn_attr a) {
  KN_ASSERT(rw->last >= 0, "attribute before any node");
  kn_node_add_attr(rw->g, &rw->g->nodes[rw->last], a);
}

void kn_rw_attr_int(kn_rw *rw, const char *name, int64_t v) { kn_rw_attr(rw, kn_pass_attr_int(name, v)); }

void kn_rw_attr_ints(kn_rw *rw, const char *name, const int64_t *v, int n) {
  kn_rw_attr(rw, kn_pass_attr_ints(rw->g, name, v, n));
}

void kn_rw_attr_copy(kn_rw *rw, const char *name) {
  const kn_attr *a = kn_node_attr(&rw->g->nodes[rw->node], name);
  if (a) kn_rw_attr(rw, *a);
}

/* ---- constants ---- */

int kn_rw_const(kn_rw *rw, kn_dtype t, const kn_shape *s, const void *data) {
  kn_graph *g = rw->g;
  if (rw->names == KN_RW_NAMES_SEQ)
    return kn_graph_add_const(g, kn_arena_printf(&g->arena, "%s#%d", rw->name, rw->counter++), t, s, data);
  return kn_pass_new_const(g, rw->name, "/c", t, s, data);
}

int kn_rw_const_tagged(kn_rw *rw, const char *tag, kn_dtype t, const kn_shape *s, const void *data) {
  return kn_pass_new_const(rw->g, rw->name, kn_arena_printf(&rw->g->arena, "/%s", tag), t, s, data);
}

int kn_rw_scalar(kn_rw *rw, kn_dtype t, double v) {
  kn_shape s = {.rank = 0};
  int k = kn_rw_const(rw, t, &s, NULL);
  kn_ref_store(t, rw->g->values[k].data, 0, v); /* saturating (kn_f2i64_sat) */
  return k;
}

int kn_rw_i64(kn_rw *rw, int64_t v) {
  kn_shape s = {.rank = 0};
  return kn_rw_const(rw, KN_DT_I64, &s, &v);
}

int kn_rw_ints(kn_rw *rw, const int64_t *v, int n) {
  kn_shape s = {.rank = 1, .dim = {n}};
  return kn_rw_const(rw, KN_DT_I64, &s, v);
}

/* ---- common nodes ---- */

int kn_rw_cast(kn_rw *rw, int a, kn_dtype t) {
  if (rw->g->values[a].dtype == t) return a;
  int v = kn_rw_un(rw, KN_OP_CAST, a);
  kn_rw_attr_int(rw, "to", kn_dtype_to_onnx(t));
  return v;
}

int kn_rw_reduce(kn_rw *rw, kn_op op, int a, const int64_t *axes, int n_axes, bool keepdims) {
  int v = kn_rw_un(rw, op, a);
  if (n_axes > 0) kn_rw_attr_ints(rw, "axes", axes, n_axes);
  kn_rw_attr_int(rw, "keepdims", keepdims ? 1 : 0);
  return v;
}

int kn_rw_unsqueeze(kn_rw *rw, int a, const int64_t *axes, int n) {
  if (n == 0) return a;
  return kn_rw_bin(rw, KN_OP_UNSQUEEZE, a, kn_rw_ints(rw, axes, n));
}

int kn_rw_squeeze(kn_rw *rw, int a, const int64_t *axes, int n) {
  return kn_rw_bin(rw, KN_OP_SQUEEZE, a, kn_rw_ints(rw, axes, n));
}

int kn_rw_unsqueeze_attr(kn_rw *rw, int a, int64_t axis) {
  int v = kn_rw_un(rw, KN_OP_UNSQUEEZE, a);
  kn_rw_attr_ints(rw, "axes", &axis, 1);
  return v;
}

int kn_rw_squeeze_attr(kn_rw *rw, int a, int64_t axis) {
  int v = kn_rw_un(rw, KN_OP_SQUEEZE, a);
  kn_rw_attr_ints(rw, "axes", &axis, 1);
  return v;
}

int kn_rw_reshape(kn_rw *rw, int a, const int64_t *shape, int n) {
  return kn_rw_bin(rw, KN_OP_RESHAPE, a, kn_rw_ints(rw, shape, n));
}

int kn_rw_slice(kn_rw *rw, int a, int64_t axis, int64_t start, int64_t end) {
  int in[4] = {a, kn_rw_ints(rw, &start, 1), kn_rw_ints(rw, &end, 1), kn_rw_ints(rw, &axis, 1)};
  return kn_rw_op(rw, KN_OP_SLICE, in, 4);
}

int kn_rw_transpose(kn_rw *rw, int a, const int64_t *perm, int rank) {
  int v = kn_rw_un(rw, KN_OP_TRANSPOSE, a);
  kn_rw_attr_ints(rw, "perm", perm, rank);
  return v;
}

int kn_rw_concat(kn_rw *rw, const int *in, int n, int64_t axis) {
  if (n == 1) return in[0];
  int v = kn_rw_op(rw, KN_OP_CONCAT, in, n);
  kn_rw_attr_int(rw, "axis", axis);
  return v;
}

int kn_rw_clamp(kn_rw *rw, int a, kn_dtype t, double lo, double hi) {
  int v = kn_rw_bin(rw, KN_OP_MAX, a, kn_rw_scalar(rw, t, lo));
  return kn_rw_bin(rw, KN_OP_MIN, v, kn_rw_scalar(rw, t, hi));
}

/* ---- the node being replaced ---- */

int kn_rw_in(const kn_rw *rw, int k) {
  const kn_node *n = &rw->g->nodes[rw->node];
  return k < n->n_in ? n->in[k] : -1;
}

const kn_value *kn_rw_val(const kn_rw *rw, int v) { return &rw->g->values[v]; }

void kn_rw_output(kn_rw *rw, int k, int v) {
  kn_graph *g = rw->g;
  if (k >= g->nodes[rw->node].n_out) return; /* an optional output the model leaves out */
  int out = g->nodes[rw->node].out[k];
  int p = g->values[v].producer;
  if (p < 0 || p == rw->node) {
    kn_rw_op_into(rw, KN_OP_IDENTITY, &v, 1, out);
    return;
  }
  kn_node *pn = &g->nodes[p];
  for (int j = 0; j < pn->n_out; j++)
    if (pn->out[j] == v) pn->out[j] = out;
  g->values[out].producer = p;
  g->values[v].producer = -1;
  kn_pass_replace_uses(g, v, out);
}

int kn_rw_fail(kn_rw *rw, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = kn_node_verror(rw->d, &rw->g->nodes[rw->node], fmt, ap);
  va_end(ap);
  return rc;
}

kn_node *kn_rw_retype(kn_graph *g, int node, kn_op op, bool keep_attrs) {
  kn_node *n = &g->nodes[node];
  n->op = op;
  n->op_type = kn_op_name(op);
  n->domain = "";
  if (!keep_attrs) {
    n->attrs = NULL;
    n->n_attr = 0;
  }
  return n;
}
