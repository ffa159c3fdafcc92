/* workload.c — the key of a tuning task: the canonical text of a fused group.
 *
 * Text: for each node of the group in order, its op, its attributes sorted
 * by name, and its inputs: "%k.o" (output o of the group's k-th node) or an
 * external input "x<slot>:<dtype>[dims]" with 'c' appended for constants
 * (their contents never enter the key); then "->" and the kernel output's
 * dtype and shape. A batch dim prints as its extent at batch 1, so that a
 * model exported with a symbolic batch and the same model with the batch
 * fixed to 1 key alike: the tuner measures both at batch 1, and a schedule
 * that does not fit the other kernel is refused when it is validated. Layout
 * is part of the op (ConvNHWC ...). Names of nodes and values never enter
 * the key, so the same workload in two models gets the same key. Keys longer
 * than 200 characters become "<op pattern>#<64-bit FNV-1a hash of the text>".
 *
 * Logs of format version 1 spelled batch dims "N*d" (kn_at_workload_key_v1);
 * log.c reads their short keys by dropping the "N*", and a hashed one is
 * matched by the version-1 key of a kernel (kn_at_log_adopt). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autotune/autotune.h"

typedef struct text {
  char *buf;
  size_t n, cap;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int k = vsnprintf(t->buf + t->n, t->cap - t->n, fmt, ap);
    va_end(ap);
    KN_ASSERT(k >= 0, "vsnprintf failed");
    if (t->n + (size_t)k < t->cap) {
      t->n += (size_t)k;
      return;
    }
    t->cap = 2 * (t->cap + (size_t)k);
    t->buf = realloc(t->buf, t->cap);
    KN_ASSERT(t->buf, "out of memory");
  }
}

static void put_shape(text *t, kn_dtype dt, const kn_shape *s, bool v1) {
  put(t, "%s[", kn_dtype_name(dt));
  for (int i = 0; i < s->rank; i++)
    put(t, "%s%s%lld", i ? "," : "", v1 && (s->batch_mask >> i) & 1u ? "N*" : "", (long long)s->dim[i]);
  put(t, "]");
}

static int cmp_attr(const void *a, const void *b) {
  return strcmp((*(const kn_attr *const *)a)->name, (*(const kn_attr *const *)b)->name);
}

static void put_attrs(text *t, const kn_graph *g, const kn_node *n, bool v1) {
  const kn_attr *sorted[64];
  int m = n->n_attr < 64 ? n->n_attr : 64;
  for (int i = 0; i < m; i++) sorted[i] = &n->attrs[i];
  qsort(sorted, (size_t)m, sizeof sorted[0], cmp_attr);
  for (int i = 0; i < m; i++) {
    const kn_attr *a = sorted[i];
    put(t, "%s%s=", i ? ";" : "{", a->name);
    switch (a->kind) {
    case KN_ATTR_INT: put(t, "%lld", (long long)a->i); break;
    case KN_ATTR_FLOAT: put(t, "%.9g", (double)a->f); break;
    case KN_ATTR_STRING: put(t, "'%s'", a->s ? a->s : ""); break;
    case KN_ATTR_INTS:
      for (int k = 0; k < a->n; k++) put(t, "%s%lld", k ? "," : "(", (long long)a->ints[k]);
      put(t, a->n ? ")" : "()");
      break;
    case KN_ATTR_FLOATS:
      for (int k = 0; k < a->n; k++) put(t, "%s%.9g", k ? "," : "(", (double)a->floats[k]);
      put(t, a->n ? ")" : "()");
      break;
    case KN_ATTR_STRINGS:
      for (int k = 0; k < a->n; k++) put(t, "%s'%s'", k ? "," : "(", a->strings[k] ? a->strings[k] : "");
      put(t, a->n ? ")" : "()");
      break;
    case KN_ATTR_TENSOR:
      if (a->value >= 0 && a->value < g->n_values) put_shape(t, g->values[a->value].dtype, &g->values[a->value].shape, v1);
      break;
    case KN_ATTR_GRAPH: put(t, "graph"); break;
    }
  }
  if (m) put(t, "}");
}

static uint64_t fnv1a(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
  return h;
}

static const char *key_of(const kn_graph *g, const kn_group *grp, kn_arena *A, bool v1) {
  text t = {.buf = malloc(256), .cap = 256};
  KN_ASSERT(t.buf, "out of memory");
  text pattern = {.buf = malloc(64), .cap = 64};
  KN_ASSERT(pattern.buf, "out of memory");
  t.buf[0] = pattern.buf[0] = 0;
  int ext[64], n_ext = 0;
  for (int i = 0; i < grp->n_nodes; i++) {
    const kn_node *n = &g->nodes[grp->nodes[i]];
    const char *op = n->op != KN_OP_UNKNOWN ? kn_op_name(n->op) : n->op_type;
    put(&t, "%s%s", i ? " " : "", op);
    put(&pattern, "%s%s", i ? "+" : "", op);
    if (grp->nodes[i] == grp->anchor && grp->output_index) put(&t, "@%d", grp->output_index);
    put_attrs(&t, g, n, v1);
    put(&t, "(");
    for (int k = 0; k < n->n_in; k++) {
      int v = n->in[k];
      if (k) put(&t, ",");
      if (v < 0) {
        put(&t, "-");
        continue;
      }
      int p = g->values[v].producer, at = -1;
      for (int j = 0; j < i && p >= 0 && !g->values[v].data; j++)
        if (grp->nodes[j] == p) at = j;
      if (at >= 0) {
        const kn_node *pn = &g->nodes[p];
        int o = 0;
        for (int q = 0; q < pn->n_out; q++)
          if (pn->out[q] == v) o = q;
        put(&t, "%%%d.%d", at, o);
        continue;
      }
      int slot = -1;
      for (int j = 0; j < n_ext; j++)
        if (ext[j] == v) slot = j;
      if (slot < 0 && n_ext < 64) ext[slot = n_ext++] = v;
      put(&t, "x%d:", slot);
      put_shape(&t, g->values[v].dtype, &g->values[v].shape, v1);
      if (g->values[v].data) put(&t, "c");
    }
    put(&t, ")");
  }
  put(&t, "->");
  put_shape(&t, g->values[grp->output].dtype, &g->values[grp->output].shape, v1);
  const char *key;
  if (t.n <= 200)
    key = kn_arena_strdup(A, t.buf);
  else
    key = kn_arena_printf(A, "%s#%016llx", pattern.buf, (unsigned long long)fnv1a(t.buf, t.n));
  free(t.buf);
  free(pattern.buf);
  return key;
}

const char *kn_at_workload_key(const kn_graph *g, const kn_group *grp, kn_arena *A) {
  return key_of(g, grp, A, false);
}

const char *kn_at_workload_key_v1(const kn_graph *g, const kn_group *grp, kn_arena *A) {
  return key_of(g, grp, A, true);
}

void kn_at_target_string(const kn_target *t, char *buf, size_t cap) {
  snprintf(buf, cap, "%s -mcpu=%s -mattr=%s", t->triple, t->cpu[0] ? t->cpu : "generic",
           t->features[0] ? t->features : "none");
}
