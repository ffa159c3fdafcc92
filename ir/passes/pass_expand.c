/* pass_expand.c — the node builder of the expansion passes (pass_expand.h):
 * fresh values named "<composite node>#<k>", constants, and shorthands for
 * the primitive nodes (attribute forms, which every opset's rule reads). */
#include "ir/passes/pass_expand.h"

#include <stdlib.h>
#include <string.h>

bool kn_expand_is_composite(kn_op op) {
  switch (op) {
  case KN_OP_IF: case KN_OP_LOOP: case KN_OP_SCAN: case KN_OP_RNN: case KN_OP_LSTM:
  case KN_OP_GRU: case KN_OP_DFT: case KN_OP_STFT:
    return true;
  default:
    return false;
  }
}

/* Marks the graph inputs without data that v's value derives from (through
 * live producers; Shape / Size read only a shape); true if there are any. */
static bool need_walk(const kn_graph *g, bool *needed, bool *seen, int v) {
  if (v < 0 || seen[v] || g->values[v].data) return false;
  seen[v] = true;
  for (int i = 0; i < g->n_inputs; i++)
    if (g->inputs[i] == v) {
      if (needed) needed[v] = true;
      return true;
    }
  int p = g->values[v].producer;
  if (p < 0 || g->nodes[p].dead) return false;
  const kn_node *n = &g->nodes[p];
  bool shape_only = n->op == KN_OP_SHAPE || n->op == KN_OP_SIZE, any = false;
  for (int k = shape_only ? 1 : 0; k < n->n_in; k++) any |= need_walk(g, needed, seen, n->in[k]);
  return any;
}

const char *kn_expand_need(const kn_graph *g, bool *needed, int v) {
  if (v < 0) return "";
  bool direct = false;
  for (int i = 0; i < g->n_inputs; i++) direct |= g->inputs[i] == v;
  bool *seen = calloc((size_t)g->n_values + 1, sizeof *seen);
  KN_ASSERT(seen, "out of memory");
  bool any = need_walk(g, needed, seen, v);
  free(seen);
  if (!any) return "";
  return direct ? "; it is a graph input, which can be bound at compile time"
                : "; it depends on graph inputs, which can be bound at compile time";
}

int kn_expand_value(kn_expand *x) {
  return kn_graph_add_value(x->g, kn_arena_printf(&x->g->arena, "%s#%d", x->base, x->counter++));
}

void kn_expand_node_into(kn_expand *x, kn_op op, const int *in, int n_in, const kn_attr *attrs,
                         int n_attrs, int out) {
  int ni = kn_graph_add_node(x->g, op, kn_arena_printf(&x->g->arena, "%s#n%d", x->base, x->added),
                             in, n_in, &out, 1);
  x->added++;
  for (int a = 0; a < n_attrs; a++) kn_node_add_attr(x->g, &x->g->nodes[ni], attrs[a]);
}

int kn_expand_node(kn_expand *x, kn_op op, const int *in, int n_in, const kn_attr *attrs,
                   int n_attrs) {
  int out = kn_expand_value(x);
  kn_expand_node_into(x, op, in, n_in, attrs, n_attrs, out);
  return out;
}

int kn_expand_const(kn_expand *x, kn_dtype t, const kn_shape *s, const void *data) {
  return kn_graph_add_const(x->g, kn_arena_printf(&x->g->arena, "%s#%d", x->base, x->counter++), t,
                            s, data);
}

int kn_expand_i64(kn_expand *x, int64_t v) {
  kn_shape s = {.rank = 0};
  return kn_expand_const(x, KN_DT_I64, &s, &v);
}

int kn_expand_i64s(kn_expand *x, const int64_t *v, int n) {
  kn_shape s = {.rank = 1, .dim = {n}};
  return kn_expand_const(x, KN_DT_I64, &s, v);
}

int kn_expand_slice(kn_expand *x, int in, int64_t axis, int64_t start, int64_t end) {
  int ins[4] = {in, kn_expand_i64s(x, &start, 1), kn_expand_i64s(x, &end, 1),
                kn_expand_i64s(x, &axis, 1)};
  return kn_expand_node(x, KN_OP_SLICE, ins, 4, NULL, 0);
}

int kn_expand_squeeze(kn_expand *x, int in, int64_t axis) {
  kn_attr a = kn_pass_attr_ints(x->g, "axes", &axis, 1);
  return kn_expand_node(x, KN_OP_SQUEEZE, &in, 1, &a, 1);
}

int kn_expand_unsqueeze(kn_expand *x, int in, int64_t axis) {
  kn_attr a = kn_pass_attr_ints(x->g, "axes", &axis, 1);
  return kn_expand_node(x, KN_OP_UNSQUEEZE, &in, 1, &a, 1);
}

int kn_expand_concat(kn_expand *x, const int *in, int n, int64_t axis) {
  if (n == 1) return in[0];
  kn_attr a = kn_pass_attr_int("axis", axis);
  return kn_expand_node(x, KN_OP_CONCAT, in, n, &a, 1);
}

int kn_expand_transpose(kn_expand *x, int in, const int64_t *perm, int rank) {
  kn_attr a = kn_pass_attr_ints(x->g, "perm", perm, rank);
  return kn_expand_node(x, KN_OP_TRANSPOSE, &in, 1, &a, 1);
}

int kn_expand_binary(kn_expand *x, kn_op op, int a, int b) {
  int ins[2] = {a, b};
  return kn_expand_node(x, op, ins, 2, NULL, 0);
}

int kn_expand_unary(kn_expand *x, kn_op op, int a) { return kn_expand_node(x, op, &a, 1, NULL, 0); }
