/* graph_util.c — see graph_util.h. */
#include "tests/graph/graph_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kn_shape tg_shape(const char *spec) {
  kn_shape s = {0};
  const char *p = spec;
  while (*p == '[' || *p == ' ') p++;
  while (*p && *p != ']') {
    if (*p == 'N') {
      s.batch_mask |= 1u << s.rank;
      p++;
      if (*p == '*') p++;
      else {
        s.dim[s.rank++] = 1;
        if (*p == ',') p++;
        continue;
      }
    }
    char *end;
    s.dim[s.rank++] = strtoll(p, &end, 10);
    assert_true(end != p);
    p = end;
    if (*p == ',') p++;
  }
  return s;
}

int tg_input(kn_graph *g, const char *name, kn_dtype t, const char *shape) {
  int v = kn_graph_add_value(g, name);
  g->values[v].dtype = t;
  g->values[v].shape = tg_shape(shape);
  g->values[v].shape_known = true;
  /* g->inputs lives in the arena (kn_graph_free does not free it). */
  int *in = KN_NEW_ARRAY(&g->arena, int, g->n_inputs + 1);
  if (g->n_inputs) memcpy(in, g->inputs, sizeof(int) * (size_t)g->n_inputs);
  in[g->n_inputs++] = v;
  g->inputs = in;
  return v;
}

void tg_output(kn_graph *g, const char *name) {
  int v = tg_value(g, name);
  int *out = KN_NEW_ARRAY(&g->arena, int, g->n_outputs + 1);
  if (g->n_outputs) memcpy(out, g->outputs, sizeof(int) * (size_t)g->n_outputs);
  out[g->n_outputs++] = v;
  g->outputs = out;
}

int tg_const(kn_graph *g, const char *name, kn_dtype t, const char *shape, const void *data) {
  kn_shape s = tg_shape(shape);
  return kn_graph_add_const(g, name, t, &s, data);
}

int tg_const_f(kn_graph *g, const char *name, const char *shape, const float *data) {
  return tg_const(g, name, KN_DT_F32, shape, data);
}

int tg_const_i64(kn_graph *g, const char *name, const char *shape, const int64_t *data) {
  return tg_const(g, name, KN_DT_I64, shape, data);
}

float tg_randf(unsigned *state) {
  *state = *state * 1664525u + 1013904223u;
  return (float)((*state >> 8) & 0xffffff) / (float)0x1000000 * 2.0f - 1.0f;
}

int tg_const_rand(kn_graph *g, const char *name, const char *shape, unsigned seed, float lo, float hi) {
  int v = tg_const(g, name, KN_DT_F32, shape, NULL);
  float *d = g->values[v].data;
  int64_t n = kn_value_numel(g, v);
  for (int64_t i = 0; i < n; i++) d[i] = lo + (tg_randf(&seed) + 1.0f) * 0.5f * (hi - lo);
  return v;
}

int tg_value(const kn_graph *g, const char *name) {
  int v = kn_graph_find_value(g, name);
  if (v < 0) fail_msg("no value named '%s'", name);
  return v;
}

/* Splits "a,b,_" into value indices, creating missing ones when create. */
static int parse_list(kn_graph *g, const char *list, int *idx, bool create) {
  int n = 0;
  char buf[256];
  const char *p = list;
  while (p && *p) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    assert_true(len < sizeof buf);
    memcpy(buf, p, len);
    buf[len] = 0;
    char *name = buf;
    while (*name == ' ') name++;
    if (!strcmp(name, "_")) {
      idx[n++] = -1;
    } else {
      int v = kn_graph_find_value(g, name);
      if (v < 0 && create) v = kn_graph_add_value(g, name);
      if (v < 0) fail_msg("no value named '%s'", name);
      idx[n++] = v;
    }
    p = comma ? comma + 1 : NULL;
  }
  return n;
}

int tg_node(kn_graph *g, kn_op op, const char *name, const char *ins, const char *outs) {
  int in[32], out[8];
  int n_in = parse_list(g, ins, in, false);
  int n_out = parse_list(g, outs, out, true);
  return kn_graph_add_node(g, op, name, in, n_in, out, n_out);
}

void tg_attr_i(kn_graph *g, int node, const char *name, int64_t v) {
  kn_node_add_attr(g, &g->nodes[node], (kn_attr){.name = name, .kind = KN_ATTR_INT, .i = v, .value = -1});
}

void tg_attr_f(kn_graph *g, int node, const char *name, float v) {
  kn_node_add_attr(g, &g->nodes[node], (kn_attr){.name = name, .kind = KN_ATTR_FLOAT, .f = v, .value = -1});
}

void tg_attr_s(kn_graph *g, int node, const char *name, const char *v) {
  kn_node_add_attr(g, &g->nodes[node],
                   (kn_attr){.name = name, .kind = KN_ATTR_STRING, .s = kn_arena_strdup(&g->arena, v), .value = -1});
}

void tg_attr_ints(kn_graph *g, int node, const char *name, int n, ...) {
  int64_t *v = KN_NEW_ARRAY(&g->arena, int64_t, n);
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) v[i] = va_arg(ap, int64_t);
  va_end(ap);
  kn_node_add_attr(g, &g->nodes[node], (kn_attr){.name = name, .kind = KN_ATTR_INTS, .n = n, .ints = v, .value = -1});
}

char *tg_print(const kn_graph *g) {
  char *buf = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&buf, &size);
  assert_non_null(f);
  kn_graph_print(g, f);
  fclose(f);
  return buf;
}

void tg_expect_print(const kn_graph *g, const char *expect) {
  char *got = tg_print(g);
  if (strcmp(got, expect) != 0) {
    fprintf(stderr, "---- expected ----\n%s---- got ----\n%s------------\n", expect, got);
    free(got);
    fail_msg("printed graph differs from the expected text");
  }
  free(got);
}

static void fill_input(const kn_value *v, void *data, int64_t n, unsigned *seed) {
  for (int64_t i = 0; i < n; i++) {
    float r = tg_randf(seed);
    if (v->dtype == KN_DT_BOOL) kn_ref_store(v->dtype, data, i, r > 0);
    else if (kn_dtype_is_float(v->dtype)) kn_ref_store(v->dtype, data, i, r);
    else kn_ref_store_int(v->dtype, data, i, (int64_t)floorf(r * 5));
  }
}

static int64_t numel_at(const kn_shape *s, int64_t batch) { return kn_shape_numel_max(s, batch); }

void **tg_run(const kn_graph *g, int64_t batch, unsigned seed) {
  const void **in = calloc((size_t)g->n_inputs + 1, sizeof(void *));
  void **out = calloc((size_t)g->n_outputs + 1, sizeof(void *));
  assert_true(in && out);
  for (int i = 0; i < g->n_inputs; i++) {
    const kn_value *v = &g->values[g->inputs[i]];
    int64_t n = numel_at(&v->shape, batch);
    void *d = malloc(kn_dtype_size(v->dtype) * (size_t)(n + 1));
    fill_input(v, d, n, &seed);
    in[i] = d;
  }
  for (int i = 0; i < g->n_outputs; i++) {
    const kn_value *v = &g->values[g->outputs[i]];
    assert_true(v->shape_known);
    out[i] = calloc((size_t)numel_at(&v->shape, batch) + 1, kn_dtype_size(v->dtype));
  }
  kn_diag d;
  kn_diag_init(&d);
  int rc = kn_ref_run_graph(g, in, out, batch, &d);
  if (rc != 0) kn_diag_print(&d, "tg_run");
  kn_diag_free(&d);
  assert_int_equal(rc, 0);
  for (int i = 0; i < g->n_inputs; i++) free((void *)in[i]);
  free(in);
  return out;
}

void tg_free_outputs(const kn_graph *g, void **outs) {
  for (int i = 0; i < g->n_outputs; i++) free(outs[i]);
  free(outs);
}

double tg_max_rel_diff(const kn_graph *g, int i, int64_t batch, void **a, void **b) {
  const kn_value *v = &g->values[g->outputs[i]];
  int64_t n = numel_at(&v->shape, batch);
  double worst = 0;
  for (int64_t k = 0; k < n; k++) {
    double x = kn_ref_load(v->dtype, a[i], k), y = kn_ref_load(v->dtype, b[i], k);
    if (x == y || (isnan(x) && isnan(y))) continue; /* also equal infinities */
    double e = fabs(x - y) / (1.0 + fabs(y));
    if (!(e <= worst)) worst = e; /* NaN counts as the worst */
  }
  return worst;
}

void tg_infer_ok(kn_graph *g) {
  kn_diag d;
  kn_diag_init(&d);
  int rc = kn_infer_shapes(g, &d);
  if (rc != 0) kn_diag_print(&d, "infer");
  kn_diag_free(&d);
  assert_int_equal(rc, 0);
}

void tg_infer_fails(kn_graph *g, const char *needle) {
  kn_diag d;
  kn_diag_init(&d);
  int rc = kn_infer_shapes(g, &d);
  bool found = false;
  for (int i = 0; i < d.count; i++) found |= strstr(d.lines[i], needle) != NULL;
  if (!found) {
    fprintf(stderr, "expected a diagnostic containing \"%s\", got %d:\n", needle, d.count);
    kn_diag_print(&d, "infer");
  }
  kn_diag_free(&d);
  assert_int_equal(rc, -1);
  assert_true(found);
}

int tg_count(const kn_graph *g, kn_op op) {
  int c = 0;
  for (int i = 0; i < g->n_nodes; i++) c += !g->nodes[i].dead && g->nodes[i].op == op;
  return c;
}

/* ---- pass tests ---- */

void tg_pass_ok(kn_graph *g, int (*pass)(kn_graph *, kn_diag *), const char *what) {
  kn_diag d;
  kn_diag_init(&d);
  int rc = pass(g, &d);
  if (rc == 0) rc = kn_infer_shapes(g, &d);
  if (rc == 0) rc = kn_graph_verify(g, &d);
  if (rc != 0) kn_diag_print(&d, what);
  kn_diag_free(&d);
  assert_int_equal(rc, 0);
}

void tg_decompose_ok(kn_graph *g, kn_op op) {
  tg_pass_ok(g, kn_pass_decompose, "decompose");
  assert_int_equal(tg_count(g, op), 0);
}

void tg_decompose_fails(kn_graph *g, const char *needle) {
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_pass_decompose(g, &d), -1);
  bool found = false;
  for (int i = 0; i < d.count; i++) found |= strstr(d.lines[i], needle) != NULL;
  if (!found) {
    kn_diag_print(&d, "decompose");
    fail_msg("no diagnostic contains \"%s\"", needle);
  }
  kn_diag_free(&d);
}

void tg_ref_run(const kn_graph *g, const void *const *inputs, void **outs) {
  kn_diag d;
  kn_diag_init(&d);
  int rc = kn_ref_run_graph(g, inputs, outs, 1, &d);
  if (rc) kn_diag_print(&d, "ref");
  kn_diag_free(&d);
  assert_int_equal(rc, 0);
}
