/* bind.c — `kiln compile --bind NAME=FILE` (see bind.h).
 *
 * Invariant on success: every bound value has data (a constant, producer -1)
 * with exactly its declared dtype and shape, and is no longer among
 * g->inputs; nothing else in the graph changes. On failure the graph may have
 * some inputs bound and others not; the caller drops it. */
#include "tools/bind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/onnx_load.h"
#include "ir/shape/shape_infer.h"
#include "tools/npy.h"

int kn_binding_parse(const char *arg, kn_arena *arena, kn_binding *b, kn_diag *d) {
  const char *eq = strchr(arg, '=');
  if (!eq || eq == arg || !eq[1])
    return kn_diag_error(d, "--bind '%s': expected NAME=FILE (FILE a .npy or an ONNX TensorProto .pb)", arg);
  b->name = kn_arena_printf(arena, "%.*s", (int)(eq - arg), arg);
  b->file = eq + 1;
  return 0;
}

static bool has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n > k && !strcmp(s + n - k, suffix);
}

/* The tensor in b->file: dtype, shape and data (copied into g's arena).
 * Returns 0 or -1 with a diagnostic naming the file. */
static int load_value(kn_graph *g, const kn_binding *b, kn_dtype *dtype, kn_shape *shape, void **data,
                      kn_diag *d) {
  if (has_suffix(b->file, ".npy")) {
    kn_npy npy;
    if (kn_npy_read(b->file, &npy, d) < 0) return -1;
    int rc = 0;
    if (npy.rank > KN_MAX_RANK) {
      rc = kn_diag_error(d, "--bind %s: '%s' has rank %d; Kiln's maximum rank is %d", b->name, b->file,
                         npy.rank, KN_MAX_RANK);
    } else {
      *dtype = npy.dtype;
      *shape = (kn_shape){.rank = npy.rank};
      for (int i = 0; i < npy.rank; i++) shape->dim[i] = npy.dims[i];
      size_t bytes = (size_t)npy.numel * kn_dtype_size(npy.dtype);
      *data = kn_arena_alloc(&g->arena, bytes ? bytes : 1);
      memcpy(*data, npy.data, bytes);
    }
    kn_npy_free(&npy);
    return rc;
  }
  if (has_suffix(b->file, ".pb")) {
    kn_graph tmp;
    kn_graph_init(&tmp);
    int v = kn_fe_load_tensor_pb(b->file, &tmp, d);
    if (v >= 0) {
      const kn_value *val = &tmp.values[v];
      *dtype = val->dtype;
      *shape = val->shape;
      size_t bytes = (size_t)kn_shape_numel_max(&val->shape, 1) * kn_dtype_size(val->dtype);
      *data = kn_arena_alloc(&g->arena, bytes ? bytes : 1);
      if (bytes) memcpy(*data, val->data, bytes);
    }
    kn_graph_free(&tmp);
    return v < 0 ? -1 : 0;
  }
  return kn_diag_error(d, "--bind %s: '%s' must be a .npy file or an ONNX TensorProto .pb file", b->name,
                       b->file);
}

/* Position of graph input `name` in g->inputs, or -1. */
static int find_input(const kn_graph *g, const char *name) {
  for (int i = 0; i < g->n_inputs; i++)
    if (!strcmp(g->values[g->inputs[i]].name, name)) return i;
  return -1;
}

/* Binds one input; 0 or -1 with a diagnostic. */
static int bind_one(kn_graph *g, const kn_binding *b, kn_diag *d) {
  int pos = find_input(g, b->name);
  if (pos < 0) {
    char list[512] = "";
    size_t len = 0;
    for (int i = 0; i < g->n_inputs && len < sizeof list; i++)
      len += (size_t)snprintf(list + len, sizeof list - len, "%s'%s'", i ? ", " : "",
                              g->values[g->inputs[i]].name);
    return kn_diag_error(d, "--bind %s: the model has no graph input '%s' (its inputs: %s)", b->name, b->name,
                         g->n_inputs ? list : "none");
  }
  kn_value *v = &g->values[g->inputs[pos]];
  char want[160], have[160];
  kn_shape_str(&v->shape, want, sizeof want);
  if (v->shape.batch_mask)
    return kn_diag_error(d,
                         "--bind %s: input '%s' has the batch dim N (%s); only inputs of fixed shape can "
                         "be bound",
                         b->name, b->name, want);
  kn_dtype dtype = KN_DT_INVALID;
  kn_shape shape = {0};
  void *data = NULL;
  kn_diag load_diag; /* the loaders name the file; say which --bind read it */
  kn_diag_init(&load_diag);
  int loaded = load_value(g, b, &dtype, &shape, &data, &load_diag);
  for (int i = 0; i < load_diag.count; i++) {
    const char *line = load_diag.lines[i];
    if (!strncmp(line, "--bind ", 7)) kn_diag_error(d, "%s", line);
    else kn_diag_error(d, "--bind %s: %s", b->name, line);
  }
  kn_diag_free(&load_diag);
  if (loaded < 0) return -1;
  if (dtype != v->dtype || !kn_shape_equal(&shape, &v->shape)) {
    kn_shape_str(&shape, have, sizeof have);
    return kn_diag_error(d, "--bind %s: '%s' holds %s %s, but input '%s' is declared %s %s", b->name, b->file,
                         kn_dtype_name(dtype), have, b->name, kn_dtype_name(v->dtype), want);
  }
  v->data = data;
  v->producer = -1;
  memmove(&g->inputs[pos], &g->inputs[pos + 1], sizeof *g->inputs * (size_t)(g->n_inputs - pos - 1));
  g->n_inputs--;
  return 0;
}

int kn_bind_inputs(kn_graph *g, const kn_binding *binds, int n_binds, kn_diag *d) {
  int rc = 0;
  for (int i = 0; i < n_binds; i++) {
    bool twice = false;
    for (int j = 0; j < i && !twice; j++) twice = !strcmp(binds[j].name, binds[i].name);
    if (twice) {
      rc = kn_diag_error(d, "--bind %s: input '%s' is bound more than once", binds[i].name, binds[i].name);
      continue;
    }
    if (bind_one(g, &binds[i], d) < 0) rc = -1;
  }
  return rc;
}
