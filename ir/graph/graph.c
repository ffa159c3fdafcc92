/* graph.c — the graph IR core: the op table, building a graph (values,
 * nodes, constants, attributes) and shape arithmetic.
 *
 * Memory: names, attributes, node in/out arrays and constant data live in the
 * graph's arena. The value and node tables never move: each is one address
 * range reserved up front (KN_GRAPH_MAX_ELEMS entries, no memory behind it)
 * whose pages are made usable as the table grows, so a kn_value * or kn_node *
 * stays valid across kn_graph_add_value / kn_graph_add_node /
 * kn_graph_add_const. (They were realloc'ed arrays: a pointer held across an
 * addition that crossed the capacity read freed memory, a bug passes kept
 * reintroducing.) Toposort reorders g->nodes in place, which does change what
 * a kn_node * points to.
 * Toposort, verification and printing live in graph_verify.c / graph_print.c. */
#include "ir/graph/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- the op table, generated from ops.def ---- */

static const struct {
  const char *name;
  kn_op_class cls;
} op_table[KN_OP_COUNT] = {
    /* Unknown ops are never scheduled; INJECTIVE is the most conservative
     * class for a printer or census that asks anyway. */
    [KN_OP_UNKNOWN] = {"Unknown", KN_CLASS_INJECTIVE},
#define KN_OP(e, name, cls) [KN_OP_##e] = {name, KN_CLASS_##cls},
#include "ir/graph/ops.def"
#undef KN_OP
};

/* (The explicit returns keep an out-of-range index unreachable for the
 * optimiser too: kn_internal_error is not declared noreturn.) */
const char *kn_op_name(kn_op op) {
  if ((unsigned)op >= KN_OP_COUNT) {
    KN_UNREACHABLE("op out of range");
    return "invalid";
  }
  return op_table[op].name;
}

kn_op_class kn_op_class_of(kn_op op) {
  if ((unsigned)op >= KN_OP_COUNT) {
    KN_UNREACHABLE("op out of range");
    return KN_CLASS_INJECTIVE;
  }
  return op_table[op].cls;
}

/* Internal ops ("kiln." prefix) are made by passes and never imported. */
kn_op kn_op_from_onnx(const char *op_type) {
  if (!op_type || strncmp(op_type, "kiln.", 5) == 0) return KN_OP_UNKNOWN;
  for (int op = 1; op < KN_OP_COUNT; op++)
    if (strcmp(op_table[op].name, op_type) == 0) return (kn_op)op;
  return KN_OP_UNKNOWN;
}

int kn_node_verror(kn_diag *d, const kn_node *n, const char *fmt, va_list ap) {
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  return kn_diag_error(d, "node '%s' (%s): %s", n->name, n->op_type, msg);
}

/* ---- graph lifetime ---- */

void kn_graph_init(kn_graph *g) {
  memset(g, 0, sizeof *g);
  kn_arena_init(&g->arena);
  g->max_batch = 1;
}

static void table_free(void *table, size_t elem) {
  if (table) munmap(table, elem * (size_t)KN_GRAPH_MAX_ELEMS);
}

void kn_graph_free(kn_graph *g) {
  table_free(g->values, sizeof(kn_value));
  table_free(g->nodes, sizeof(kn_node));
  kn_arena_free(&g->arena);
  memset(g, 0, sizeof *g);
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* Grows a table of `elem`-byte entries so that index `need - 1` fits; the
 * table stays where it is. The first call reserves the address range of
 * KN_GRAPH_MAX_ELEMS entries (PROT_NONE, MAP_NORESERVE: it costs address
 * space, not memory); each growth at least doubles the usable, zeroed part.
 * *cap counts the entries that fit in the usable pages. */
static void *grow(void *table, int *cap, int need, size_t elem) {
  if (need <= *cap) return table;
  KN_ASSERT(need <= KN_GRAPH_MAX_ELEMS, "graph too large");
  size_t page = (size_t)sysconf(_SC_PAGESIZE), range = elem * (size_t)KN_GRAPH_MAX_ELEMS;
  KN_ASSERT(elem <= page, "graph table entry larger than a page");
  if (!table) {
    table = mmap(NULL, range, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    KN_ASSERT(table != MAP_FAILED, "out of address space for the graph");
  }
  size_t used = round_up(elem * (size_t)*cap, page); /* entries never straddle into unusable pages */
  size_t want = elem * (size_t)need;
  if (want < 2 * used) want = 2 * used;
  if (want < 16 * elem) want = 16 * elem;
  want = round_up(want, page);
  if (want > range) want = range;
  int rc = mprotect((char *)table + used, want - used, PROT_READ | PROT_WRITE);
  KN_ASSERT(rc == 0, "out of memory");
  *cap = (int)(want / elem);
  return table;
}

int kn_graph_add_value(kn_graph *g, const char *name) {
  g->values = grow(g->values, &g->cap_values, g->n_values + 1, sizeof(kn_value));
  int idx = g->n_values++;
  kn_value *v = &g->values[idx];
  memset(v, 0, sizeof *v);
  v->name = (name && name[0]) ? kn_arena_strdup(&g->arena, name)
                              : kn_arena_printf(&g->arena, "_v%d", idx);
  v->dtype = KN_DT_INVALID;
  v->producer = -1;
  return idx;
}

int kn_graph_find_value(const kn_graph *g, const char *name) {
  if (!name) return -1;
  for (int i = 0; i < g->n_values; i++)
    if (strcmp(g->values[i].name, name) == 0) return i;
  return -1;
}

/* A NULL or empty name gets "<OpName>_<index>". op_type defaults to the op's
 * ONNX name and domain to "" (the importer overwrites both for its nodes). */
int kn_graph_add_node(kn_graph *g, kn_op op, const char *name, const int *in, int n_in,
                      const int *out, int n_out) {
  KN_ASSERT(n_in >= 0 && n_out >= 0, "negative arity");
  KN_ASSERT(n_in == 0 || in, "inputs missing");
  KN_ASSERT(n_out == 0 || out, "outputs missing");
  for (int i = 0; i < n_in; i++)
    KN_ASSERT(in[i] >= -1 && in[i] < g->n_values, "node input is not a value");
  for (int i = 0; i < n_out; i++)
    KN_ASSERT(out[i] >= 0 && out[i] < g->n_values, "node output is not a value");

  g->nodes = grow(g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof(kn_node));
  int idx = g->n_nodes++;
  kn_node *n = &g->nodes[idx];
  memset(n, 0, sizeof *n);
  n->op = op;
  n->op_type = kn_op_name(op);
  n->domain = "";
  n->name = (name && name[0]) ? kn_arena_strdup(&g->arena, name)
                              : kn_arena_printf(&g->arena, "%s_%d", kn_op_name(op), idx);
  n->n_in = n_in;
  n->n_out = n_out;
  n->in = KN_NEW_ARRAY(&g->arena, int, n_in);
  n->out = KN_NEW_ARRAY(&g->arena, int, n_out);
  if (n_in) memcpy(n->in, in, sizeof(int) * (size_t)n_in);
  if (n_out) memcpy(n->out, out, sizeof(int) * (size_t)n_out);
  for (int i = 0; i < n_out; i++) g->values[out[i]].producer = idx;
  return idx;
}

/* `data` may be NULL: the contents are then zeroed, for the caller to fill in
 * place (the importer does this to avoid copying large weights twice).
 * Constants have concrete shapes: no batch dims. */
int kn_graph_add_const(kn_graph *g, const char *name, kn_dtype dtype, const kn_shape *shape,
                       const void *data) {
  KN_ASSERT(dtype > KN_DT_INVALID && dtype < KN_DT_COUNT, "constant dtype");
  KN_ASSERT(shape && shape->rank >= 0 && shape->rank <= KN_MAX_RANK, "constant rank");
  KN_ASSERT(shape->batch_mask == 0, "constant with a batch dim");
  int64_t numel = kn_shape_numel_max(shape, 1);
  KN_ASSERT(numel >= 0, "constant size overflows");
  size_t elem = kn_dtype_size(dtype);
  KN_ASSERT((uint64_t)numel <= SIZE_MAX / elem, "constant size overflows");
  size_t bytes = (size_t)numel * elem;

  int idx = kn_graph_add_value(g, name);
  kn_value *v = &g->values[idx];
  v->dtype = dtype;
  v->shape = *shape;
  v->shape_known = true;
  v->data = kn_arena_alloc(&g->arena, bytes);
  if (data && bytes) memcpy(v->data, data, bytes);
  return idx;
}

/* ---- attributes ---- */

const kn_attr *kn_node_attr(const kn_node *n, const char *name) {
  for (int i = 0; i < n->n_attr; i++)
    if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
  return NULL;
}

/* The typed lookups return the default when the attribute is absent or has
 * another kind; importers that must reject a wrong kind use kn_node_attr. */
int64_t kn_node_attr_int(const kn_node *n, const char *name, int64_t dflt) {
  const kn_attr *a = kn_node_attr(n, name);
  return (a && a->kind == KN_ATTR_INT) ? a->i : dflt;
}

float kn_node_attr_float(const kn_node *n, const char *name, float dflt) {
  const kn_attr *a = kn_node_attr(n, name);
  return (a && a->kind == KN_ATTR_FLOAT) ? a->f : dflt;
}

const char *kn_node_attr_string(const kn_node *n, const char *name, const char *dflt) {
  const kn_attr *a = kn_node_attr(n, name);
  return (a && a->kind == KN_ATTR_STRING) ? a->s : dflt;
}

const int64_t *kn_node_attr_ints(const kn_node *n, const char *name, int *count) {
  const kn_attr *a = kn_node_attr(n, name);
  if (!a || a->kind != KN_ATTR_INTS) {
    if (count) *count = 0;
    return NULL;
  }
  if (count) *count = a->n;
  return a->ints;
}

/* The attrs array is copied into a one-larger arena array each time: nodes
 * carry a handful of attributes, and any pass may have replaced the array. */
void kn_node_add_attr(kn_graph *g, kn_node *n, kn_attr attr) {
  KN_ASSERT(attr.name, "attribute without a name");
  kn_attr *attrs = KN_NEW_ARRAY(&g->arena, kn_attr, n->n_attr + 1);
  if (n->n_attr) memcpy(attrs, n->attrs, sizeof(kn_attr) * (size_t)n->n_attr);
  attrs[n->n_attr] = attr;
  n->attrs = attrs;
  n->n_attr++;
}

/* ---- origins ---- */

void kn_graph_mark_origin(kn_graph *g, int first, int from) {
  KN_ASSERT(from >= 0 && from < g->n_nodes && first >= 0, "origin out of range");
  const kn_node *f = &g->nodes[from];
  kn_origin *o = KN_NEW(&g->arena, kn_origin);
  *o = (kn_origin){f->name, f->op_type, f->origin};
  for (int i = first; i < g->n_nodes; i++)
    if (i != from && !g->nodes[i].origin) g->nodes[i].origin = o;
}

void kn_node_diag_origin(const kn_node *n, kn_diag *d, int first) {
  if (!d || !n->origin || first >= d->count) return;
  size_t size = 1;
  for (const kn_origin *o = n->origin; o; o = o->up) size += strlen(o->name) + strlen(o->op_type) + 48;
  char *prefix = malloc(size);
  KN_ASSERT(prefix, "out of memory");
  prefix[0] = 0;
  for (const kn_origin *o = n->origin; o; o = o->up) { /* innermost first: each goes in front */
    bool control = !strcmp(o->op_type, "If") || !strcmp(o->op_type, "Loop") || !strcmp(o->op_type, "Scan");
    size_t len = strlen(prefix);
    char *part = malloc(size);
    KN_ASSERT(part, "out of memory");
    snprintf(part, size, "node '%s' (%s): its %s fails: ", o->name, o->op_type,
             control ? "inlined body" : "decomposition");
    size_t np = strlen(part);
    memmove(prefix + np, prefix, len + 1);
    memcpy(prefix, part, np);
    free(part);
  }
  kn_diag_prefix(d, first, prefix);
  free(prefix);
}

/* ---- shapes ---- */

/* Element count with the batch symbol N = max_batch; -1 if a dim is negative
 * or the product overflows int64. */
int64_t kn_shape_numel_max(const kn_shape *s, int64_t max_batch) {
  KN_ASSERT(s->rank >= 0 && s->rank <= KN_MAX_RANK, "rank out of range");
  int64_t numel = 1;
  for (int i = 0; i < s->rank; i++) {
    int64_t d = s->dim[i];
    if (d < 0) return -1;
    if (s->batch_mask & (1u << i)) {
      if (max_batch < 0 || __builtin_mul_overflow(d, max_batch, &d)) return -1;
    }
    if (__builtin_mul_overflow(numel, d, &numel)) return -1;
  }
  return numel;
}

bool kn_shape_equal(const kn_shape *a, const kn_shape *b) {
  if (a->rank != b->rank || a->batch_mask != b->batch_mask) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dim[i] != b->dim[i]) return false;
  return true;
}

/* -1 while the shape is unknown (or overflows). */
int64_t kn_value_numel(const kn_graph *g, int v) {
  KN_ASSERT(v >= 0 && v < g->n_values, "value index out of range");
  const kn_value *val = &g->values[v];
  if (!val->shape_known) return -1;
  return kn_shape_numel_max(&val->shape, g->max_batch);
}
