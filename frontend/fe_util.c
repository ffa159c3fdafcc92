/* fe_util.c — small helpers of the ONNX importer: the value-name hash map,
 * diagnostics prefixed with the model's name, invented names, and printing
 * of dims and ONNX type codes for messages. */
#include "frontend/fe_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- name map: open addressing, linear probing, FNV-1a ---- */

static uint64_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

void kn_fe_names_init(kn_fe_names *m) { memset(m, 0, sizeof *m); }

void kn_fe_names_free(kn_fe_names *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

int kn_fe_names_get(const kn_fe_names *m, const char *key) {
  if (!m->cap) return -1;
  for (size_t i = name_hash(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    if (!m->keys[i]) return -1;
    if (strcmp(m->keys[i], key) == 0) return m->vals[i];
  }
}

/* Inserts without growing; the table always has a free slot. */
static void names_insert(kn_fe_names *m, const char *key, int val) {
  size_t i = name_hash(key) & (m->cap - 1);
  while (m->keys[i] && strcmp(m->keys[i], key) != 0) i = (i + 1) & (m->cap - 1);
  if (!m->keys[i]) m->count++;
  m->keys[i] = key;
  m->vals[i] = val;
}

void kn_fe_names_put(kn_fe_names *m, const char *key, int val) {
  if ((m->count + 1) * 2 > m->cap) { /* keep the load factor under 1/2 */
    kn_fe_names old = *m;
    m->cap = old.cap ? old.cap * 2 : 64;
    m->count = 0;
    m->keys = calloc(m->cap, sizeof *m->keys);
    m->vals = calloc(m->cap, sizeof *m->vals);
    KN_ASSERT(m->keys && m->vals, "out of memory");
    for (size_t i = 0; i < old.cap; i++)
      if (old.keys[i]) names_insert(m, old.keys[i], old.vals[i]);
    kn_fe_names_free(&old);
  }
  names_insert(m, key, val);
}

/* ---- diagnostics ---- */

int kn_fe_error(kn_fe_ctx *cx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *msg = malloc((size_t)(n > 0 ? n : 0) + 1);
  KN_ASSERT(msg, "out of memory");
  va_start(ap, fmt);
  vsnprintf(msg, (size_t)(n > 0 ? n : 0) + 1, fmt, ap);
  va_end(ap);
  kn_diag_error(cx->d, "%s: %s", cx->label, msg);
  free(msg);
  cx->n_errors++;
  return -1;
}

const char *kn_fe_unique_name(kn_fe_ctx *cx, const char *base) {
  if (kn_fe_names_get(&cx->names, base) < 0) return kn_arena_strdup(&cx->g->arena, base);
  for (int k = 2;; k++) {
    const char *name = kn_arena_printf(&cx->g->arena, "%s#%d", base, k);
    if (kn_fe_names_get(&cx->names, name) < 0) return name;
  }
}

/* ---- message helpers ---- */

void kn_fe_dims_str(char *buf, size_t size, const int64_t *dims, size_t n) {
  size_t used = 0;
  if (!size) return;
  buf[0] = '\0';
  used += (size_t)snprintf(buf, size, "[");
  for (size_t i = 0; i < n && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? "," : "", (long long)dims[i]);
  if (used < size) snprintf(buf + used, size - used, "]");
}

const char *kn_fe_onnx_type_name(int code) {
  static const char *const names[] = {
      "UNDEFINED",      "FLOAT",      "UINT8",          "INT8",       "UINT16",   "INT16",
      "INT32",          "INT64",      "STRING",         "BOOL",       "FLOAT16",  "DOUBLE",
      "UINT32",         "UINT64",     "COMPLEX64",      "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN",
      "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4",      "INT4",     "FLOAT4E2M1",
      "FLOAT8E8M0",     "UINT2",      "INT2",
  };
  if (code >= 0 && (size_t)code < sizeof names / sizeof names[0]) return names[code];
  return "unknown";
}

bool kn_fe_is_default_domain(const char *domain) {
  return !domain || !*domain || strcmp(domain, "ai.onnx") == 0;
}
