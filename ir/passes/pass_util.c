/* pass_util.c — small graph-editing helpers shared by the pass files: use
 * counts, rewiring, unique names, new values/constants, constant transposes,
 * attribute constructors. kn_value / kn_node pointers stay valid across the
 * calls that add values or nodes (the graph's tables never move, graph.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/passes/passes.h"

bool kn_pass_is_graph_input(const kn_graph *g, int v) {
  for (int i = 0; i < g->n_inputs; i++)
    if (g->inputs[i] == v) return true;
  return false;
}

bool kn_pass_is_graph_output(const kn_graph *g, int v) {
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == v) return true;
  return false;
}

bool kn_pass_declared_shape(const kn_graph *g, int v, kn_shape *s) {
  if (!g->out_declared) return false;
  for (int i = 0; i < g->n_outputs - g->n_checks; i++)
    if (g->outputs[i] == v && g->out_declared[i].rank >= 0) {
      *s = g->out_declared[i];
      return true;
    }
  return false;
}

void kn_pass_add_check(kn_graph *g, int v) { kn_pass_add_check_kind(g, v, KN_CHECK_VALUE); }

void kn_pass_add_check_kind(kn_graph *g, int v, kn_check_kind kind) {
  int *outputs = KN_NEW_ARRAY(&g->arena, int, g->n_outputs + 2);
  memcpy(outputs, g->outputs, sizeof(int) * (size_t)g->n_outputs);
  outputs[g->n_outputs++] = v;
  g->outputs = outputs;
  kn_check_kind *kinds = KN_NEW_ARRAY(&g->arena, kn_check_kind, g->n_checks + 1);
  for (int j = 0; j < g->n_checks; j++) kinds[j] = g->check_kinds ? g->check_kinds[j] : KN_CHECK_VALUE;
  kinds[g->n_checks++] = kind;
  g->check_kinds = kinds;
}

void kn_pass_count_uses(const kn_graph *g, int *uses) {
  memset(uses, 0, sizeof(int) * (size_t)g->n_values);
  for (int i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    if (n->dead) continue;
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0) uses[n->in[k]]++;
  }
  for (int i = 0; i < g->n_outputs; i++) uses[g->outputs[i]]++;
}

void kn_pass_replace_uses(kn_graph *g, int from, int to) {
  for (int i = 0; i < g->n_nodes; i++) {
    kn_node *n = &g->nodes[i];
    if (n->dead) continue;
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] == from) n->in[k] = to;
  }
}

void kn_pass_kill_node(kn_graph *g, int i) {
  kn_node *n = &g->nodes[i];
  n->dead = true;
  for (int k = 0; k < n->n_out; k++)
    if (g->values[n->out[k]].producer == i) g->values[n->out[k]].producer = -1;
}

/* base+suffix, then base+suffix+"_2", "_3" ... until unused. */
static char *unique_name(kn_graph *g, const char *base, const char *suffix) {
  char *name = kn_arena_printf(&g->arena, "%s%s", base, suffix);
  for (int k = 2; kn_graph_find_value(g, name) >= 0; k++)
    name = kn_arena_printf(&g->arena, "%s%s_%d", base, suffix, k);
  return name;
}

int kn_pass_new_value(kn_graph *g, const char *base, const char *suffix, kn_dtype t,
                      const kn_shape *s) {
  int v = kn_graph_add_value(g, unique_name(g, base, suffix));
  g->values[v].dtype = t;
  g->values[v].shape = *s;
  g->values[v].shape_known = true;
  return v;
}

int kn_pass_new_const(kn_graph *g, const char *base, const char *suffix, kn_dtype t,
                      const kn_shape *s, const void *data) {
  return kn_graph_add_const(g, unique_name(g, base, suffix), t, s, data);
}

/* dst = src (viewed with shape `view`) transposed by perm; returns the
 * transposed shape. */
static kn_shape permute_data(const char *src, char *dst, const kn_shape *view, const int64_t *perm,
                             size_t es) {
  kn_shape out = {.rank = view->rank};
  int64_t in_stride[KN_MAX_RANK], acc = 1;
  for (int i = view->rank - 1; i >= 0; i--) {
    in_stride[i] = acc;
    acc *= view->dim[i];
  }
  for (int k = 0; k < view->rank; k++) out.dim[k] = view->dim[perm[k]];
  int64_t idx[KN_MAX_RANK] = {0};
  for (int64_t i = 0; i < acc; i++) {
    int64_t off = 0;
    for (int k = 0; k < out.rank; k++) off += idx[k] * in_stride[perm[k]];
    memcpy(dst + (size_t)i * es, src + (size_t)off * es, es);
    for (int k = out.rank - 1; k >= 0; k--) {
      if (++idx[k] < out.dim[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

static kn_shape permuted_shape(const kn_shape *view, const int64_t *perm) {
  kn_shape out = {.rank = view->rank};
  for (int k = 0; k < view->rank; k++) out.dim[k] = view->dim[perm[k]];
  return out;
}

int kn_pass_permute_const(kn_graph *g, int v, const kn_shape *view_in, const int64_t *perm,
                          const char *suffix) {
  const kn_shape view = *view_in;
  kn_shape out = permuted_shape(&view, perm);
  kn_dtype t = g->values[v].dtype;
  int nv = kn_pass_new_const(g, g->values[v].name, suffix, t, &out, NULL);
  permute_data(g->values[v].data, g->values[nv].data, &view, perm, kn_dtype_size(t));
  return nv;
}

void kn_pass_permute_const_in_place(kn_graph *g, int v, const int64_t *perm, const char *suffix) {
  kn_value *val = &g->values[v];
  size_t es = kn_dtype_size(val->dtype), bytes = es * (size_t)kn_shape_numel_max(&val->shape, 1);
  char *tmp = malloc(bytes ? bytes : 1);
  KN_ASSERT(tmp, "out of memory");
  kn_shape out = permute_data(val->data, tmp, &val->shape, perm, es);
  memcpy(val->data, tmp, bytes);
  free(tmp);
  val->shape = out;
  val->name = unique_name(g, val->name, suffix);
}

kn_attr kn_pass_attr_int(const char *name, int64_t v) {
  return (kn_attr){.name = name, .kind = KN_ATTR_INT, .i = v, .value = -1};
}

kn_attr kn_pass_attr_ints(kn_graph *g, const char *name, const int64_t *v, int n) {
  int64_t *copy = KN_NEW_ARRAY(&g->arena, int64_t, n);
  if (n) memcpy(copy, v, sizeof(int64_t) * (size_t)n);
  return (kn_attr){.name = name, .kind = KN_ATTR_INTS, .n = n, .ints = copy, .value = -1};
}

bool kn_pass_is_runtime_value(const kn_graph *g, int v) {
  if (v < 0 || g->values[v].data) return false;
  bool *seen = calloc((size_t)g->n_values + 1, sizeof(bool));
  int *stack = malloc(sizeof(int) * (size_t)(g->n_values + 1));
  KN_ASSERT(seen && stack, "out of memory");
  int top = 0;
  bool found = false;
  seen[v] = true;
  stack[top++] = v;
  while (top > 0 && !found) {
    int u = stack[--top];
    if (g->values[u].data) continue;
    int p = g->values[u].producer;
    if (p < 0) {
      found = kn_pass_is_graph_input(g, u);
      continue;
    }
    const kn_node *n = &g->nodes[p];
    if (n->op == KN_OP_SHAPE || n->op == KN_OP_SIZE) continue;
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0 && !seen[n->in[k]]) seen[n->in[k]] = true, stack[top++] = n->in[k];
  }
  free(stack);
  free(seen);
  return found;
}
