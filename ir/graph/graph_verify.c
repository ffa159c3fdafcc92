/* graph_verify.c — topological ordering and the structural verifier of the
 * graph IR (the invariants listed in graph.h).
 *
 * kn_graph_toposort is Kahn's algorithm run twice: once to find cycles, once
 * with a priority key so the result reads naturally — a graph already in
 * order keeps its order, and a node appended by a pass lands just before its
 * first consumer. Dead nodes are dropped and value->producer is rebuilt. */
#include <stdlib.h>
#include <string.h>

#include "ir/graph/graph.h"

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  KN_ASSERT(p, "out of memory");
  return p;
}

/* ---- a binary min-heap of node indices ordered by (key, index) ---- */
typedef struct node_heap {
  int *item;
  int n;
  const int *key;
} node_heap;

static bool heap_less(const node_heap *h, int a, int b) {
  return h->key[a] != h->key[b] ? h->key[a] < h->key[b] : a < b;
}

static void heap_push(node_heap *h, int x) {
  int i = h->n++;
  h->item[i] = x;
  while (i > 0 && heap_less(h, h->item[i], h->item[(i - 1) / 2])) {
    int p = (i - 1) / 2, t = h->item[p];
    h->item[p] = h->item[i];
    h->item[i] = t;
    i = p;
  }
}

static int heap_pop(node_heap *h) {
  int top = h->item[0];
  h->item[0] = h->item[--h->n];
  for (int i = 0;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < h->n && heap_less(h, h->item[l], h->item[m])) m = l;
    if (r < h->n && heap_less(h, h->item[r], h->item[m])) m = r;
    if (m == i) break;
    int t = h->item[m];
    h->item[m] = h->item[i];
    h->item[i] = t;
    i = m;
  }
  return top;
}

/* Consumer lists in CSR form: edges producer -> consumer (with multiplicity). */
typedef struct edges {
  int *start, *to; /* start[n_nodes + 1] */
  int *indeg;
} edges;

static void edges_build(const kn_graph *g, const int *prod, edges *e) {
  int n = g->n_nodes;
  e->start = xcalloc((size_t)n + 1, sizeof(int));
  e->indeg = xcalloc((size_t)n, sizeof(int));
  int total = 0;
  for (int i = 0; i < n; i++) {
    const kn_node *nd = &g->nodes[i];
    if (nd->dead) continue;
    for (int k = 0; k < nd->n_in; k++) {
      int v = nd->in[k];
      if (v < 0 || prod[v] < 0) continue;
      e->start[prod[v] + 1]++;
      e->indeg[i]++;
      total++;
    }
  }
  for (int i = 0; i < n; i++) e->start[i + 1] += e->start[i];
  e->to = xcalloc((size_t)total, sizeof(int));
  int *fill = xcalloc((size_t)n, sizeof(int));
  for (int i = 0; i < n; i++) {
    const kn_node *nd = &g->nodes[i];
    if (nd->dead) continue;
    for (int k = 0; k < nd->n_in; k++) {
      int v = nd->in[k];
      if (v < 0 || prod[v] < 0) continue;
      e->to[e->start[prod[v]] + fill[prod[v]]++] = i;
    }
  }
  free(fill);
}

static void edges_free(edges *e) {
  free(e->start);
  free(e->to);
  free(e->indeg);
}

/* Runs Kahn's algorithm with the given priority key; returns how many nodes
 * were ordered (fewer than the live count means a cycle). */
static int kahn(const kn_graph *g, const edges *e, const int *key, int *order) {
  int n = g->n_nodes, count = 0;
  int *indeg = xcalloc((size_t)n, sizeof(int));
  memcpy(indeg, e->indeg, sizeof(int) * (size_t)n);
  node_heap h = {xcalloc((size_t)n, sizeof(int)), 0, key};
  for (int i = 0; i < n; i++)
    if (!g->nodes[i].dead && indeg[i] == 0) heap_push(&h, i);
  while (h.n > 0) {
    int i = heap_pop(&h);
    order[count++] = i;
    for (int k = e->start[i]; k < e->start[i + 1]; k++)
      if (--indeg[e->to[k]] == 0) heap_push(&h, e->to[k]);
  }
  free(h.item);
  free(indeg);
  return count;
}

/* Names a node that lies on a cycle: walks from an unordered node through
 * unordered producers until one repeats. */
static int find_cycle_node(const kn_graph *g, const int *prod, const bool *ordered) {
  int n = g->n_nodes;
  int start = -1;
  for (int i = 0; i < n && start < 0; i++)
    if (!g->nodes[i].dead && !ordered[i]) start = i;
  KN_ASSERT(start >= 0, "no unordered node");
  int *seen = xcalloc((size_t)n, sizeof(int));
  int cur = start, step = 1;
  while (!seen[cur]) {
    seen[cur] = step++;
    int next = -1;
    const kn_node *nd = &g->nodes[cur];
    for (int k = 0; k < nd->n_in && next < 0; k++) {
      int v = nd->in[k];
      if (v >= 0 && prod[v] >= 0 && !ordered[prod[v]]) next = prod[v];
    }
    KN_ASSERT(next >= 0, "unordered node without unordered producer");
    cur = next;
  }
  free(seen);
  return cur;
}

/* Fills prod[v] from the live nodes and checks single definitions. */
static int collect_producers(const kn_graph *g, int *prod, const bool *is_input, kn_diag *d) {
  int rc = 0;
  for (int v = 0; v < g->n_values; v++) prod[v] = -1;
  for (int i = 0; i < g->n_nodes; i++) {
    const kn_node *nd = &g->nodes[i];
    if (nd->dead) continue;
    for (int k = 0; k < nd->n_out; k++) {
      int v = nd->out[k];
      if (v < 0 || v >= g->n_values) {
        rc = kn_diag_error(d, "node '%s' (%s): output %d is not a value", nd->name, nd->op_type, k);
        continue;
      }
      if (prod[v] >= 0) {
        rc = kn_diag_error(d, "value '%s' is produced by both node '%s' and node '%s'",
                           g->values[v].name, g->nodes[prod[v]].name, nd->name);
      } else if (is_input[v] || g->values[v].data) {
        rc = kn_diag_error(d, "value '%s' is a graph %s but node '%s' (%s) produces it",
                           g->values[v].name, is_input[v] ? "input" : "constant", nd->name,
                           nd->op_type);
      }
      prod[v] = i;
    }
    for (int k = 0; k < nd->n_in; k++) {
      int v = nd->in[k];
      if (v < -1 || v >= g->n_values)
        rc = kn_diag_error(d, "node '%s' (%s): input %d is not a value", nd->name, nd->op_type, k);
    }
  }
  return rc;
}

int kn_graph_toposort(kn_graph *g, kn_diag *d) {
  int n = g->n_nodes, rc = 0;
  int *prod = xcalloc((size_t)g->n_values, sizeof(int));
  bool *is_input = xcalloc((size_t)g->n_values, sizeof(bool));
  for (int i = 0; i < g->n_inputs; i++) is_input[g->inputs[i]] = true;
  if (collect_producers(g, prod, is_input, d) < 0) {
    free(prod);
    free(is_input);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    const kn_node *nd = &g->nodes[i];
    if (nd->dead) continue;
    for (int k = 0; k < nd->n_in; k++) {
      int v = nd->in[k];
      if (v >= 0 && prod[v] < 0 && !is_input[v] && !g->values[v].data)
        rc = kn_diag_error(d, "node '%s' (%s) uses value '%s', which nothing defines", nd->name,
                           nd->op_type, g->values[v].name);
    }
  }
  for (int i = 0; i < g->n_outputs; i++) {
    int v = g->outputs[i];
    if (v < 0 || v >= g->n_values)
      rc = kn_diag_error(d, "graph output %d is not a value", i);
    else if (prod[v] < 0 && !is_input[v] && !g->values[v].data)
      rc = kn_diag_error(d, "graph output '%s' is not defined", g->values[v].name);
  }
  if (rc < 0) goto done;

  edges e;
  edges_build(g, prod, &e);
  int *order = xcalloc((size_t)n, sizeof(int));
  int *key = xcalloc((size_t)n, sizeof(int));
  int live = 0;
  for (int i = 0; i < n; i++) {
    key[i] = i;
    live += !g->nodes[i].dead;
  }
  int count = kahn(g, &e, key, order);
  if (count < live) {
    bool *ordered = xcalloc((size_t)n, sizeof(bool));
    for (int k = 0; k < count; k++) ordered[order[k]] = true;
    int c = find_cycle_node(g, prod, ordered);
    rc = kn_diag_error(d, "graph has a cycle through node '%s' (%s)", g->nodes[c].name,
                       g->nodes[c].op_type);
    free(ordered);
  } else {
    /* key = the smallest index among a node and everything it feeds. */
    for (int k = count - 1; k >= 0; k--) {
      int i = order[k];
      for (int j = e.start[i]; j < e.start[i + 1]; j++)
        if (key[e.to[j]] < key[i]) key[i] = key[e.to[j]];
    }
    count = kahn(g, &e, key, order);
    KN_ASSERT(count == live, "second Kahn pass lost nodes");
    kn_node *sorted = xcalloc((size_t)live, sizeof(kn_node));
    for (int k = 0; k < live; k++) sorted[k] = g->nodes[order[k]];
    if (live) memcpy(g->nodes, sorted, sizeof(kn_node) * (size_t)live);
    g->n_nodes = live;
    free(sorted);
    for (int v = 0; v < g->n_values; v++) g->values[v].producer = -1;
    for (int i = 0; i < live; i++)
      for (int k = 0; k < g->nodes[i].n_out; k++) g->values[g->nodes[i].out[k]].producer = i;
  }
  free(order);
  free(key);
  edges_free(&e);
done:
  free(prod);
  free(is_input);
  return rc;
}

/* ---- the verifier ---- */

static int check_type(const kn_graph *g, int v, const char *what, kn_diag *d) {
  const kn_value *val = &g->values[v];
  if (val->dtype <= KN_DT_INVALID || val->dtype >= KN_DT_COUNT)
    return kn_diag_error(d, "%s '%s' has no dtype", what, val->name);
  if (!val->shape_known) return kn_diag_error(d, "%s '%s' has no shape", what, val->name);
  const kn_shape *s = &val->shape;
  if (s->rank < 0 || s->rank > KN_MAX_RANK)
    return kn_diag_error(d, "%s '%s' has rank %d", what, val->name, s->rank);
  if (s->rank < 32 && (s->batch_mask >> s->rank) != 0)
    return kn_diag_error(d, "%s '%s' has batch bits beyond its rank", what, val->name);
  for (int i = 0; i < s->rank; i++)
    if (s->dim[i] < 0)
      return kn_diag_error(d, "%s '%s' has negative dim %d", what, val->name, i);
  if (val->data && s->batch_mask)
    return kn_diag_error(d, "constant '%s' has a batch dim", val->name);
  if (val->batch_coef && (!val->data || val->dtype != KN_DT_I64))
    return kn_diag_error(d, "value '%s' has batch coefficients but is no int64 constant",
                         val->name);
  return 0;
}

int kn_graph_verify(const kn_graph *g, kn_diag *d) {
  int rc = 0;
  int *defined_at = xcalloc((size_t)g->n_values, sizeof(int)); /* node index + 1 */
  bool *is_input = xcalloc((size_t)g->n_values, sizeof(bool));
  bool *checked = xcalloc((size_t)g->n_values, sizeof(bool));
  for (int i = 0; i < g->n_inputs; i++) {
    int v = g->inputs[i];
    if (v < 0 || v >= g->n_values) {
      rc = kn_diag_error(d, "graph input %d is not a value", i);
      continue;
    }
    is_input[v] = true;
    if (g->values[v].producer != -1)
      rc = kn_diag_error(d, "graph input '%s' has a producer", g->values[v].name);
    if (g->values[v].data) rc = kn_diag_error(d, "graph input '%s' is a constant", g->values[v].name);
    if (check_type(g, v, "graph input", d) < 0) rc = -1;
    checked[v] = true;
  }
  if (rc < 0) goto done;
  if (g->max_batch < 1) rc = kn_diag_error(d, "max_batch is %lld", (long long)g->max_batch);

  for (int i = 0; i < g->n_nodes; i++) {
    const kn_node *nd = &g->nodes[i];
    if (nd->dead) continue;
    if ((unsigned)nd->op >= KN_OP_COUNT || !nd->name || !nd->op_type) {
      rc = kn_diag_error(d, "node %d is malformed", i);
      continue;
    }
    for (int k = 0; k < nd->n_in; k++) {
      int v = nd->in[k];
      if (v == -1) continue;
      if (v < -1 || v >= g->n_values) {
        rc = kn_diag_error(d, "node '%s' (%s): input %d is not a value", nd->name, nd->op_type, k);
        continue;
      }
      const kn_value *val = &g->values[v];
      if (!is_input[v] && !val->data && !defined_at[v]) {
        rc = kn_diag_error(d, "node '%s' (%s): input '%s' is not defined before it", nd->name,
                           nd->op_type, val->name);
        continue;
      }
      if (!checked[v] && check_type(g, v, "value", d) < 0) rc = -1;
      checked[v] = true;
    }
    for (int k = 0; k < nd->n_out; k++) {
      int v = nd->out[k];
      if (v < 0 || v >= g->n_values) {
        rc = kn_diag_error(d, "node '%s' (%s): output %d is not a value", nd->name, nd->op_type, k);
        continue;
      }
      const kn_value *val = &g->values[v];
      if (defined_at[v] || is_input[v] || val->data) {
        rc = kn_diag_error(d, "value '%s' is defined twice (again by node '%s')", val->name,
                           nd->name);
        continue;
      }
      if (val->producer != i)
        rc = kn_diag_error(d, "value '%s': producer is %d, but node %d ('%s') produces it",
                           val->name, val->producer, i, nd->name);
      defined_at[v] = i + 1;
      if (!checked[v] && check_type(g, v, "value", d) < 0) rc = -1;
      checked[v] = true;
    }
  }
  for (int v = 0; v < g->n_values; v++) {
    const kn_value *val = &g->values[v];
    if (val->producer >= 0 && !defined_at[v])
      rc = kn_diag_error(d, "value '%s' names producer %d, which does not produce it", val->name,
                         val->producer);
    if (val->data && val->producer != -1)
      rc = kn_diag_error(d, "constant '%s' has a producer", val->name);
  }
  for (int i = 0; i < g->n_outputs; i++) {
    int v = g->outputs[i];
    if (v < 0 || v >= g->n_values) {
      rc = kn_diag_error(d, "graph output %d is not a value", i);
      continue;
    }
    if (!defined_at[v] && !is_input[v] && !g->values[v].data)
      rc = kn_diag_error(d, "graph output '%s' is not defined", g->values[v].name);
    else if (!checked[v] && check_type(g, v, "graph output", d) < 0)
      rc = -1;
    checked[v] = true;
  }
done:
  free(defined_at);
  free(is_input);
  free(checked);
  return rc;
}
