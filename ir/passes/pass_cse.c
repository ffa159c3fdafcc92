/* pass_cse.c — common subexpression elimination.
 *
 * Requires: shapes inferred, nodes toposorted.
 * Guarantees:
 *  - constants (no producer, not a graph input) with the same dtype, shape,
 *    bytes and batch_coef are read through one of them;
 *  - two live nodes with the same op (op_type and domain), the same inputs
 *    (value indices, in order, after the merges above) and the same
 *    attributes (compared by value, in any order; tensor attributes by their
 *    contents) compute the same outputs: the later one is removed and its
 *    readers read the earlier one's outputs. Merging one node makes its
 *    readers equal in turn; the pass repeats until nothing merges.
 *  - never merged: ops Kiln does not know (KN_OP_UNKNOWN), ops that draw
 *    random numbers (Random*, Multinomial, Bernoulli, Dropout), nodes with a
 *    subgraph attribute, nodes without outputs.
 *  - a graph output keeps its name and its own storage: when the removed
 *    node wrote one, the kept node writes it instead (its old output's
 *    readers read the graph output), or, when the kept node's output is
 *    itself a graph output, the removed node becomes Identity of it.
 *  - shapes stay valid; nodes are toposorted with the merged ones dropped.
 *
 *  - a value a node with a subgraph reads (a capture, which its body may
 *    name directly) keeps its producer.
 *
 * Cost: hashing, so linear in the nodes and constant bytes per round. A
 * round usually merges everything; renaming a graph output can leave a merge
 * for the next one. */
#include <stdlib.h>
#include <string.h>

#include "ir/passes/passes.h"
#include "ir/passes/rewrite.h"

/* ---- hashing ---- */

static uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, b + i, 8);
    h = mix(h, w);
  }
  uint64_t tail = 0;
  if (n > i) memcpy(&tail, b + i, n - i);
  return mix(h, tail ^ (uint64_t)n);
}

static uint64_t hash_str(uint64_t h, const char *s) { return s ? hash_bytes(h, s, strlen(s)) : mix(h, 1); }

static bool str_eq(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

/* ---- constants ---- */

/* Bytes of constant v, or -1 when it is not one this pass merges. */
static int64_t const_bytes(const kn_graph *g, int v, const bool *is_input) {
  const kn_value *val = &g->values[v];
  if (!val->data || val->producer >= 0 || is_input[v] || !val->shape_known || val->shape.batch_mask) return -1;
  int64_t numel = kn_shape_numel_max(&val->shape, 1);
  return numel < 0 ? -1 : numel * (int64_t)kn_dtype_size(val->dtype);
}

static uint64_t const_hash(const kn_graph *g, int v, int64_t bytes) {
  const kn_value *val = &g->values[v];
  uint64_t h = mix((uint64_t)val->dtype, (uint64_t)val->shape.rank);
  h = hash_bytes(h, val->shape.dim, sizeof(int64_t) * (size_t)val->shape.rank);
  h = hash_bytes(h, val->data, (size_t)bytes);
  if (val->batch_coef) h = hash_bytes(h, val->batch_coef, (size_t)bytes);
  return h;
}

/* Whether constants a and b (both with bytes >= 0) hold the same tensor. */
static bool const_equal(const kn_graph *g, int a, int b, int64_t bytes) {
  const kn_value *x = &g->values[a], *y = &g->values[b];
  if (x->dtype != y->dtype || !kn_shape_equal(&x->shape, &y->shape)) return false;
  if (memcmp(x->data, y->data, (size_t)bytes)) return false;
  if (!x->batch_coef != !y->batch_coef) return false;
  size_t coef_bytes = sizeof(int64_t) * (size_t)kn_shape_numel_max(&x->shape, 1);
  return !x->batch_coef || !memcmp(x->batch_coef, y->batch_coef, coef_bytes);
}

/* An open-addressed table of indices (values or nodes) by hash. */
typedef struct table {
  int *slot; /* -1: empty */
  uint64_t *hash;
  size_t mask;
} table;

static void table_init(table *t, int n) {
  size_t cap = 16;
  while (cap < 2 * (size_t)n + 2) cap *= 2;
  t->slot = malloc(sizeof(int) * cap);
  t->hash = malloc(sizeof(uint64_t) * cap);
  KN_ASSERT(t->slot && t->hash, "out of memory");
  memset(t->slot, 0xff, sizeof(int) * cap);
  t->mask = cap - 1;
}

static void table_free(table *t) {
  free(t->slot);
  free(t->hash);
}

/* fwd[c] = the first constant equal to c, for every constant c. */
static void merge_constants(const kn_graph *g, const bool *is_input, int *fwd) {
  table t;
  table_init(&t, g->n_values);
  for (int v = 0; v < g->n_values; v++) {
    int64_t bytes = const_bytes(g, v, is_input);
    if (bytes < 0) continue;
    uint64_t h = const_hash(g, v, bytes);
    size_t s = (size_t)h & t.mask;
    for (; t.slot[s] >= 0; s = (s + 1) & t.mask)
      if (t.hash[s] == h && const_bytes(g, t.slot[s], is_input) == bytes && const_equal(g, t.slot[s], v, bytes)) break;
    if (t.slot[s] >= 0) {
      fwd[v] = t.slot[s];
      continue;
    }
    t.slot[s] = v;
    t.hash[s] = h;
  }
  table_free(&t);
}

/* ---- nodes ---- */

static bool never_merged(const kn_node *n) {
  if (n->op == KN_OP_UNKNOWN || n->op == KN_OP_DROPOUT || n->n_out == 0) return true;
  const char *t = n->op_type ? n->op_type : "";
  if (!strncmp(t, "Random", 6) || !strcmp(t, "Multinomial") || !strcmp(t, "Bernoulli")) return true;
  for (int a = 0; a < n->n_attr; a++)
    if (n->attrs[a].kind == KN_ATTR_GRAPH) return true;
  return false;
}

/* The constant a tensor attribute names, through the constant merges. */
static int attr_tensor(const int *fwd, int v) { return v >= 0 ? fwd[v] : v; }

static uint64_t attr_hash(const kn_attr *a, const int *fwd) {
  uint64_t h = mix(hash_str(0, a->name), (uint64_t)a->kind);
  switch (a->kind) {
  case KN_ATTR_INT: return mix(h, (uint64_t)a->i);
  case KN_ATTR_FLOAT: return hash_bytes(h, &a->f, sizeof a->f);
  case KN_ATTR_STRING: return hash_str(h, a->s);
  case KN_ATTR_INTS: return a->n > 0 ? hash_bytes(h, a->ints, sizeof(int64_t) * (size_t)a->n) : mix(h, 0);
  case KN_ATTR_FLOATS: return a->n > 0 ? hash_bytes(h, a->floats, sizeof(float) * (size_t)a->n) : mix(h, 0);
  case KN_ATTR_STRINGS:
    for (int k = 0; k < a->n; k++) h = hash_str(h, a->strings[k]);
    return mix(h, (uint64_t)a->n);
  case KN_ATTR_TENSOR: return mix(h, (uint64_t)attr_tensor(fwd, a->value));
  case KN_ATTR_GRAPH: break;
  }
  return h;
}

static bool attr_equal(const kn_attr *a, const kn_attr *b, const int *fwd) {
  if (a->kind != b->kind || !str_eq(a->name, b->name)) return false;
  switch (a->kind) {
  case KN_ATTR_INT: return a->i == b->i;
  case KN_ATTR_FLOAT: return !memcmp(&a->f, &b->f, sizeof a->f);
  case KN_ATTR_STRING: return str_eq(a->s, b->s);
  case KN_ATTR_INTS: return a->n == b->n && (a->n == 0 || !memcmp(a->ints, b->ints, sizeof(int64_t) * (size_t)a->n));
  case KN_ATTR_FLOATS:
    return a->n == b->n && (a->n == 0 || !memcmp(a->floats, b->floats, sizeof(float) * (size_t)a->n));
  case KN_ATTR_STRINGS:
    if (a->n != b->n) return false;
    for (int k = 0; k < a->n; k++)
      if (!str_eq(a->strings[k], b->strings[k])) return false;
    return true;
  case KN_ATTR_TENSOR: return attr_tensor(fwd, a->value) == attr_tensor(fwd, b->value);
  case KN_ATTR_GRAPH: return false;
  }
  return false;
}

/* Attributes hash and compare as sets (their order in the model does not
 * matter). */
static uint64_t node_hash(const kn_node *n, const int *fwd) {
  uint64_t h = mix(mix((uint64_t)n->op, (uint64_t)n->n_in), (uint64_t)n->n_out);
  h = hash_str(hash_str(h, n->op_type), n->domain);
  for (int k = 0; k < n->n_in; k++) h = mix(h, (uint64_t)(int64_t)n->in[k]);
  uint64_t attrs = 0;
  for (int a = 0; a < n->n_attr; a++) attrs += attr_hash(&n->attrs[a], fwd);
  return mix(mix(h, attrs), (uint64_t)n->n_attr);
}

static bool node_equal(const kn_node *a, const kn_node *b, const int *fwd) {
  if (a->op != b->op || a->n_in != b->n_in || a->n_out != b->n_out || a->n_attr != b->n_attr) return false;
  if (!str_eq(a->op_type, b->op_type) || !str_eq(a->domain, b->domain)) return false;
  for (int k = 0; k < a->n_in; k++)
    if (a->in[k] != b->in[k]) return false;
  for (int i = 0; i < a->n_attr; i++) {
    int j = 0;
    while (j < b->n_attr && !str_eq(a->attrs[i].name, b->attrs[j].name)) j++;
    if (j == b->n_attr || !attr_equal(&a->attrs[i], &b->attrs[j], fwd)) return false;
  }
  return true;
}

static int resolve(const int *fwd, int v) {
  while (v >= 0 && fwd[v] != v) v = fwd[v];
  return v;
}

/* What a sweep needs besides the graph. */
typedef struct cse {
  kn_graph *g;
  int *fwd;              /* value -> the value that replaces it (itself: none) */
  const bool *is_output; /* graph outputs (checks included) */
  const bool *captured;  /* read by a node with a subgraph, whose body may name it directly */
} cse;

/* Node `dup` computes what node `kept` does. Returns whether dup is gone
 * (or became an Identity). */
static bool merge_node(const cse *c, int kept, int dup) {
  kn_graph *g = c->g;
  const bool *is_output = c->is_output;
  int *fwd = c->fwd;
  kn_node *k = &g->nodes[kept], *n = &g->nodes[dup];
  int n_graph_out = 0;
  for (int o = 0; o < n->n_out; o++) {
    if (c->captured[n->out[o]]) return false; /* a subgraph's body reads it by its index */
    n_graph_out += is_output[n->out[o]];
  }
  if (n_graph_out == 0) {
    for (int o = 0; o < n->n_out; o++) fwd[n->out[o]] = k->out[o];
    kn_pass_kill_node(g, dup);
    return true;
  }
  if (n->n_out != 1) return false; /* several outputs to keep apart: leave it */
  int x = k->out[0], y = n->out[0];
  if (!is_output[x] && !c->captured[x]) {
    /* kept writes the graph output y; x's readers read y. */
    kn_pass_kill_node(g, dup);
    k->out[0] = y;
    g->values[y].producer = kept;
    g->values[x].producer = -1;
    fwd[x] = y;
    return true;
  }
  /* two graph outputs with the same contents: y becomes a copy of x */
  if (n->op == KN_OP_IDENTITY || n->n_in < 1) return false; /* one already, or no input slot */
  kn_rw_retype(g, dup, KN_OP_IDENTITY, false);
  n->n_in = 1;
  n->in[0] = x;
  return true;
}

/* One sweep in topological order; returns the number of nodes merged. */
static int cse_round(const cse *c) {
  kn_graph *g = c->g;
  const int *fwd = c->fwd;
  table t;
  table_init(&t, g->n_nodes);
  int merged = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    kn_node *n = &g->nodes[i];
    if (n->dead) continue;
    for (int k = 0; k < n->n_in; k++) n->in[k] = resolve(fwd, n->in[k]);
    if (never_merged(n)) continue;
    uint64_t h = node_hash(n, fwd);
    size_t s = (size_t)h & t.mask;
    for (; t.slot[s] >= 0; s = (s + 1) & t.mask)
      if (t.hash[s] == h && !g->nodes[t.slot[s]].dead && node_equal(&g->nodes[t.slot[s]], n, fwd)) break;
    if (t.slot[s] >= 0) {
      merged += merge_node(c, t.slot[s], i);
      continue;
    }
    t.slot[s] = i;
    t.hash[s] = h;
  }
  for (int i = 0; i < g->n_nodes; i++) {
    kn_node *n = &g->nodes[i];
    if (!n->dead)
      for (int k = 0; k < n->n_in; k++) n->in[k] = resolve(fwd, n->in[k]);
  }
  table_free(&t);
  return merged;
}

int kn_pass_cse(kn_graph *g, kn_diag *d) {
  int n_values = g->n_values;
  int *fwd = malloc(sizeof(int) * ((size_t)n_values + 1));
  bool *is_input = calloc((size_t)n_values + 1, sizeof(bool));
  bool *is_output = calloc((size_t)n_values + 1, sizeof(bool));
  bool *captured = calloc((size_t)n_values + 1, sizeof(bool));
  KN_ASSERT(fwd && is_input && is_output && captured, "out of memory");
  for (int v = 0; v < n_values; v++) fwd[v] = v;
  for (int i = 0; i < g->n_inputs; i++) is_input[g->inputs[i]] = true;
  for (int i = 0; i < g->n_outputs; i++) is_output[g->outputs[i]] = true;
  for (int i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    for (int a = 0; !n->dead && a < n->n_attr; a++)
      if (n->attrs[a].kind == KN_ATTR_GRAPH)
        for (int k = 0; k < n->n_in; k++)
          if (n->in[k] >= 0) captured[n->in[k]] = true;
  }
  merge_constants(g, is_input, fwd);
  cse c = {.g = g, .fwd = fwd, .is_output = is_output, .captured = captured};
  while (cse_round(&c) > 0) {
  }
  free(fwd);
  free(is_input);
  free(is_output);
  free(captured);
  return kn_graph_toposort(g, d);
}
