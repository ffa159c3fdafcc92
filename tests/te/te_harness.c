/* te_harness.c — see te_harness.h. The oracle is ir/ref/ref_eval.h's
 * kn_ref_run_graph; shapes come from ir/shape/shape_infer.h. */
#include "tests/te/te_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"
#include "ir/te/te_eval.h"

void th_init(th *t, int64_t opset) {
  memset(t, 0, sizeof *t);
  kn_graph_init(&t->g);
  t->g.opset = opset;
  t->g.max_batch = 4;
  kn_diag_init(&t->d);
  t->rng = 0x9e3779b97f4a7c15ull;
  t->node = -1;
  t->tol = 1e-5;
  kn_arena_init(&t->arena);
  t->ec.arena = &t->arena;
  t->tc.ec = &t->ec;
  t->tc.batch = kn_var_new(&t->ec, "N");
  t->tc.g = &t->g;
}

void th_free(th *t) {
  kn_arena_free(&t->arena);
  kn_graph_free(&t->g);
  kn_diag_free(&t->d);
}

double th_rand(th *t, double lo, double hi) {
  t->rng = t->rng * 6364136223846793005ull + 1442695040888963407ull;
  double u = (double)(t->rng >> 11) / 9007199254740992.0;
  return lo + (hi - lo) * u;
}

static kn_shape mkshape(int rank, const int64_t *dims, uint32_t mask) {
  kn_shape s = {.rank = rank, .batch_mask = mask};
  for (int i = 0; i < rank; i++) s.dim[i] = dims[i];
  return s;
}

static void add_graph_input(th *t, int v) {
  int *in = KN_NEW_ARRAY(&t->g.arena, int, t->g.n_inputs + 1);
  if (t->g.n_inputs) memcpy(in, t->g.inputs, sizeof(int) * (size_t)t->g.n_inputs);
  in[t->g.n_inputs++] = v;
  t->g.inputs = in;
}

int th_input(th *t, const char *name, kn_dtype dt, int rank, const int64_t *dims,
             uint32_t batch_mask, double lo, double hi) {
  assert_true(t->n_inputs < TH_MAX_IO);
  int v = kn_graph_add_value(&t->g, name);
  kn_value *val = &t->g.values[v];
  val->dtype = dt;
  val->shape = mkshape(rank, dims, batch_mask);
  val->shape_known = true;
  add_graph_input(t, v);
  t->inputs[t->n_inputs] = v;
  t->lo[t->n_inputs] = lo;
  t->hi[t->n_inputs] = hi;
  t->fixed[t->n_inputs++] = NULL;
  return v;
}

int th_input_data(th *t, const char *name, kn_dtype dt, int rank, const int64_t *dims,
                  uint32_t batch_mask, const void *data) {
  int v = th_input(t, name, dt, rank, dims, batch_mask, 0, 0);
  t->fixed[t->n_inputs - 1] = data;
  return v;
}

int th_const(th *t, const char *name, kn_dtype dt, int rank, const int64_t *dims,
             const void *data) {
  kn_shape s = mkshape(rank, dims, 0);
  return kn_graph_add_const(&t->g, name, dt, &s, data);
}

static void fill_random(th *t, kn_dtype dt, void *p, int64_t n, double lo, double hi) {
  for (int64_t i = 0; i < n; i++) {
    double x = th_rand(t, lo, hi);
    switch (dt) {
    case KN_DT_F32: ((float *)p)[i] = (float)x; break;
    case KN_DT_F64: ((double *)p)[i] = x; break;
    case KN_DT_I64: ((int64_t *)p)[i] = (int64_t)llround(x); break;
    case KN_DT_I32: ((int32_t *)p)[i] = (int32_t)llround(x); break;
    case KN_DT_BOOL: ((uint8_t *)p)[i] = th_rand(t, 0, 1) < 0.5; break;
    case KN_DT_U8: ((uint8_t *)p)[i] = (uint8_t)llround(fabs(x)); break;
    default: fail_msg("fill_random: dtype %s", kn_dtype_name(dt));
    }
  }
}

int th_const_rand(th *t, const char *name, kn_dtype dt, int rank, const int64_t *dims, double lo,
                  double hi) {
  int v = th_const(t, name, dt, rank, dims, NULL);
  fill_random(t, dt, t->g.values[v].data, kn_value_numel(&t->g, v), lo, hi);
  return v;
}

int th_const_ints(th *t, const char *name, int n, const int64_t *vals) {
  return th_const(t, name, KN_DT_I64, 1, TH_DIMS(n), vals);
}

int th_const_scalar(th *t, const char *name, kn_dtype dt, double v) {
  int id = th_const(t, name, dt, 0, NULL, NULL);
  fill_random(t, dt, t->g.values[id].data, 1, v, v);
  if (dt == KN_DT_I64) *(int64_t *)t->g.values[id].data = (int64_t)v;
  return id;
}

int th_node(th *t, kn_op op, const char *name, const int *in, int n_in, int n_out) {
  int out[TH_MAX_IO];
  assert_true(n_out <= TH_MAX_IO);
  for (int k = 0; k < n_out; k++) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s.y%d", name, k);
    out[k] = kn_graph_add_value(&t->g, buf);
  }
  t->node = kn_graph_add_node(&t->g, op, name, in, n_in, out, n_out);
  t->node_name = t->g.nodes[t->node].name;
  int *outs = KN_NEW_ARRAY(&t->g.arena, int, n_out);
  memcpy(outs, out, sizeof(int) * (size_t)n_out);
  t->g.outputs = outs;
  t->g.n_outputs = n_out;
  return t->node;
}

static kn_node *cur(th *t) {
  assert_true(t->node >= 0);
  return &t->g.nodes[t->node];
}

void th_attr_int(th *t, const char *name, int64_t v) {
  kn_node_add_attr(&t->g, cur(t), (kn_attr){.name = name, .kind = KN_ATTR_INT, .i = v});
}

void th_attr_float(th *t, const char *name, float v) {
  kn_node_add_attr(&t->g, cur(t), (kn_attr){.name = name, .kind = KN_ATTR_FLOAT, .f = v});
}

void th_attr_string(th *t, const char *name, const char *v) {
  const char *s = kn_arena_strdup(&t->g.arena, v);
  kn_node_add_attr(&t->g, cur(t), (kn_attr){.name = name, .kind = KN_ATTR_STRING, .s = s});
}

void th_attr_ints(th *t, const char *name, int n, const int64_t *v) {
  int64_t *a = KN_NEW_ARRAY(&t->g.arena, int64_t, n > 0 ? n : 1);
  if (n) memcpy(a, v, sizeof(int64_t) * (size_t)n);
  kn_node_add_attr(&t->g, cur(t), (kn_attr){.name = name, .kind = KN_ATTR_INTS, .n = n, .ints = a});
}

static void print_diag(th *t) {
  for (int i = 0; i < t->d.count; i++) print_error("  diag: %s\n", t->d.lines[i]);
}

int th_infer(th *t) {
  if (kn_infer_shapes(&t->g, &t->d) != 0) {
    print_diag(t);
    fail_msg("shape inference failed for node '%s'", t->node_name);
  }
  for (int i = 0; i < t->g.n_nodes; i++)
    if (strcmp(t->g.nodes[i].name, t->node_name) == 0) return t->node = i;
  fail_msg("node '%s' lost", t->node_name);
  return -1;
}

kn_te_tensor *th_te(th *t, int out) {
  const kn_node *n = &t->g.nodes[t->node];
  kn_te_tensor *in[TH_MAX_IO] = {0};
  for (int i = 0; i < n->n_in; i++)
    if (n->in[i] >= 0) in[i] = kn_te_placeholder_for(&t->tc, n->in[i]);
  return kn_te_op_output(&t->tc, t->node, out, in, &t->d);
}

int64_t th_numel(const th *t, int v, int64_t batch) {
  return kn_shape_numel_max(&t->g.values[v].shape, batch);
}

void th_eval(th *t, int out, int64_t batch, void *const *input_data, void *buf) {
  kn_te_tensor *te = th_te(t, out);
  if (!te) {
    print_diag(t);
    fail_msg("no TE for output %d of node '%s'", out, t->node_name);
  }
  const void **ph = calloc((size_t)t->g.n_values, sizeof(void *));
  for (int v = 0; v < t->g.n_values; v++) ph[v] = t->g.values[v].data;
  for (int i = 0; i < t->n_inputs; i++) ph[t->inputs[i]] = input_data[i];
  int rc = kn_te_eval(te, ph, batch, buf, &t->d);
  free(ph);
  if (rc != 0) {
    print_diag(t);
    fail_msg("kn_te_eval failed for output %d of node '%s'", out, t->node_name);
  }
}

static double load_d(kn_dtype dt, const void *p, int64_t i) {
  switch (dt) {
  case KN_DT_F32: return ((const float *)p)[i];
  case KN_DT_F64: return ((const double *)p)[i];
  case KN_DT_I64: return (double)((const int64_t *)p)[i];
  case KN_DT_I32: return ((const int32_t *)p)[i];
  case KN_DT_BOOL:
  case KN_DT_U8: return ((const uint8_t *)p)[i];
  default: fail_msg("compare: dtype %s", kn_dtype_name(dt));
  }
  return 0;
}

static void compare(th *t, int v, int64_t batch, const void *got, const void *want) {
  kn_dtype dt = t->g.values[v].dtype;
  int64_t n = th_numel(t, v, batch);
  bool fl = kn_dtype_is_float(dt);
  for (int64_t i = 0; i < n; i++) {
    double a = load_d(dt, got, i), b = load_d(dt, want, i);
    bool ok;
    if (!fl)
      ok = a == b;
    else if (isnan(a) || isnan(b))
      ok = isnan(a) && isnan(b);
    else if (isinf(a) || isinf(b))
      ok = a == b;
    else
      ok = fabs(a - b) <= t->tol * fmax(1.0, fabs(b));
    if (!ok)
      fail_msg("node '%s' output '%s' element %lld: te %.9g, ref %.9g", t->node_name,
               t->g.values[v].name, (long long)i, a, b);
  }
}

/* The TE conventions the lowering relies on: a KN_E_REDUCE only at the top
 * of a compute body, never inside a larger expression or an index. */
static void check_reduce_placement(const kn_expr *e, bool top);

static void check_tensor_stages(const kn_te_tensor *t) {
  if (t->kind == KN_TE_COMPUTE) check_reduce_placement(t->body, true);
}

static void check_reduce_placement(const kn_expr *e, bool top) {
  switch (e->kind) {
  case KN_E_REDUCE:
    if (!top) fail_msg("a reduction nested inside a larger expression");
    check_reduce_placement(e->u.reduce.source, false);
    return;
  case KN_E_LOAD:
    for (int i = 0; i < e->u.load.n; i++) check_reduce_placement(e->u.load.indices[i], false);
    check_tensor_stages(e->u.load.tensor);
    return;
  case KN_E_INT:
  case KN_E_FLOAT:
  case KN_E_VAR: return;
  case KN_E_NOT:
  case KN_E_CAST: check_reduce_placement(e->u.un.a, false); return;
  case KN_E_SELECT:
    check_reduce_placement(e->u.sel.cond, false);
    check_reduce_placement(e->u.sel.t, false);
    check_reduce_placement(e->u.sel.f, false);
    return;
  case KN_E_CALL:
    for (int i = 0; i < e->u.call.n; i++) check_reduce_placement(e->u.call.args[i], false);
    return;
  default:
    check_reduce_placement(e->u.bin.a, false);
    check_reduce_placement(e->u.bin.b, false);
    return;
  }
}

void *th_make_input(th *t, int i, int64_t batch) {
  int v = t->inputs[i];
  int64_t numel = th_numel(t, v, batch);
  size_t bytes = (size_t)(numel ? numel : 1) * kn_dtype_size(t->g.values[v].dtype);
  void *p = malloc(bytes);
  if (t->fixed[i])
    memcpy(p, t->fixed[i], bytes);
  else
    fill_random(t, t->g.values[v].dtype, p, numel, t->lo[i], t->hi[i]);
  return p;
}

/* Memoised per value (the cache lives in the TE arena, sized at first use). */
static kn_te_tensor *graph_te(th *t, int v, kn_te_tensor **memo) {
  if (memo[v]) return memo[v];
  const kn_value *val = &t->g.values[v];
  if (val->producer < 0) return memo[v] = kn_te_placeholder_for(&t->tc, v);
  const kn_node *n = &t->g.nodes[val->producer];
  kn_te_tensor *in[TH_MAX_IO] = {0};
  for (int i = 0; i < n->n_in; i++) {
    if (n->in[i] < 0) continue;
    in[i] = graph_te(t, n->in[i], memo);
    if (!in[i]) return NULL;
  }
  int k = 0;
  while (n->out[k] != v) k++;
  return memo[v] = kn_te_op_output(&t->tc, val->producer, k, in, &t->d);
}

kn_te_tensor *th_graph_te(th *t, int v) {
  kn_te_tensor **memo = KN_NEW_ARRAY(&t->arena, kn_te_tensor *, t->g.n_values);
  return graph_te(t, v, memo);
}

void th_check_graph_outputs(th *t, int64_t batch, void *const *inputs, void *const *want) {
  const void **ph = calloc((size_t)t->g.n_values, sizeof(void *));
  for (int v = 0; v < t->g.n_values; v++) ph[v] = t->g.values[v].data;
  for (int i = 0; i < t->g.n_inputs; i++) ph[t->g.inputs[i]] = inputs[i];
  for (int o = 0; o < t->g.n_outputs; o++) {
    int v = t->g.outputs[o];
    kn_te_tensor *te = th_graph_te(t, v);
    if (!te) {
      print_diag(t);
      fail_msg("no TE for graph output '%s'", t->g.values[v].name);
    }
    check_tensor_stages(te);
    size_t bytes = (size_t)(th_numel(t, v, batch) + 1) * kn_dtype_size(t->g.values[v].dtype);
    void *got = calloc(1, bytes);
    if (kn_te_eval(te, ph, batch, got, &t->d) != 0) {
      print_diag(t);
      fail_msg("kn_te_eval failed for graph output '%s'", t->g.values[v].name);
    }
    t->node_name = t->g.values[v].name;
    compare(t, v, batch, got, want[o]);
    free(got);
  }
  free(ph);
}

void th_check(th *t, int64_t batch) {
  th_infer(t);
  const kn_node *n = &t->g.nodes[t->node];
  void *inputs[TH_MAX_IO];
  for (int i = 0; i < t->n_inputs; i++) inputs[i] = th_make_input(t, i, batch);
  int no = n->n_out;
  void *want[TH_MAX_IO], *got[TH_MAX_IO];
  for (int k = 0; k < no; k++) {
    int v = n->out[k];
    size_t bytes = (size_t)(th_numel(t, v, batch) + 1) * kn_dtype_size(t->g.values[v].dtype);
    want[k] = calloc(1, bytes);
    got[k] = calloc(1, bytes);
  }
  if (kn_ref_run_graph(&t->g, (const void *const *)inputs, want, batch, &t->d) != 0) {
    print_diag(t);
    fail_msg("reference failed for node '%s'", t->node_name);
  }
  for (int k = 0; k < no; k++) {
    th_eval(t, k, batch, inputs, got[k]);
    compare(t, n->out[k], batch, got[k], want[k]);
    check_tensor_stages(th_te(t, k));
  }
  for (int k = 0; k < no; k++) free(want[k]), free(got[k]);
  for (int i = 0; i < t->n_inputs; i++) free(inputs[i]);
}

void th_expect_unsupported(th *t, int out, const char *what) {
  th_infer(t);
  int before = t->d.count;
  kn_te_tensor *te = th_te(t, out);
  assert_null(te);
  assert_true(t->d.count > before);
  const char *line = t->d.lines[t->d.count - 1];
  if (!strstr(line, what) || !strstr(line, "not supported"))
    fail_msg("diagnostic '%s' does not mention '%s'", line, what);
}

void th_expect_infer_error(th *t, const char *what) {
  kn_diag_free(&t->d);
  kn_diag_init(&t->d);
  assert_int_equal(kn_infer_shapes(&t->g, &t->d), -1);
  assert_true(t->d.count >= 1);
  assert_non_null(strstr(t->d.lines[0], what));
}
