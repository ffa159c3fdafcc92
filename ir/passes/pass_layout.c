/* pass_layout.c — NHWC layout for CNNs.
 *
 * Requires: shapes inferred, nodes toposorted.
 * Guarantees (the result computes exactly what the input graph computed):
 *  1. Every 2-D Conv (4-D input, constant weight) becomes
 *       Transpose[0,2,3,1] -> kiln.ConvNHWC -> Transpose[0,3,1,2]
 *     with the weight converted OIHW -> [KH,KW,C/group,M] at compile time (in
 *     place, renamed <w>_hwio, when no other node reads it) and
 *     auto_pad resolved to explicit pads [top,left,bottom,right]. 4-D
 *     MaxPool (without Indices) / AveragePool / GlobalAveragePool become
 *     kiln.MaxPoolNHWC / kiln.AveragePoolNHWC / kiln.GlobalAveragePoolNHWC the
 *     same way (explicit pads; ceil_mode kept except with SAME_* auto_pad,
 *     whose sizes ignore it).
 *  2. Transposes then sink and cancel, until nothing changes:
 *     - Transpose(Transpose(x, p1), p2) becomes Transpose(x, p1[p2[.]]), or
 *       disappears when that is the identity;
 *     - an elementwise op whose inputs are Transposes with one perm p, or
 *       constants (permuted at compile time; leading 1s that broadcasting
 *       added are dropped again, so a [C,1,1] bias becomes [1,1,C]), or
 *       all-ones tensors, runs on the untransposed data and one Transpose
 *       follows it; mixed cases keep their Transposes;
 *     - Concat of Transposes with one perm concatenates the sources.
 *  3. A Transpose that moves only size-1 dims becomes a Reshape (e.g.
 *     [N,1,1,C] -> [N,C,1,1] after a global pool, before Flatten).
 *  Shapes stay valid (every new value is typed); nodes are toposorted and
 *  unused nodes removed (kn_pass_dce). */
#include <stdlib.h>
#include <string.h>

#include "ir/passes/passes.h"
#include "ir/passes/rewrite.h"
#include "ir/shape/shape_infer.h"

static const int64_t TO_NHWC[4] = {0, 2, 3, 1};
static const int64_t TO_NCHW[4] = {0, 3, 1, 2};
static const int64_t OIHW_TO_HWIO[4] = {2, 3, 1, 0};

#define MAX_SWEEPS 256

static kn_shape permute_shape(const kn_shape *s, const int64_t *perm) {
  kn_shape o = {.rank = s->rank};
  for (int k = 0; k < s->rank; k++) {
    o.dim[k] = s->dim[perm[k]];
    if (s->batch_mask & (1u << perm[k])) o.batch_mask |= 1u << k;
  }
  return o;
}

static void invert_perm(const int64_t *perm, int r, int64_t *inv) {
  for (int k = 0; k < r; k++) inv[perm[k]] = k;
}

static bool perm_is_identity(const int64_t *perm, int r) {
  for (int k = 0; k < r; k++)
    if (perm[k] != k) return false;
  return true;
}

static bool perm_equal(const int64_t *a, const int64_t *b, int r) {
  return memcmp(a, b, sizeof(int64_t) * (size_t)r) == 0;
}

/* The perm of live Transpose node i (default: reversed), its rank. */
static int transpose_perm(const kn_graph *g, int i, int64_t *perm) {
  const kn_node *n = &g->nodes[i];
  int r = g->values[n->in[0]].shape.rank, np = 0;
  const int64_t *p = kn_node_attr_ints(n, "perm", &np);
  for (int k = 0; k < r; k++) perm[k] = p && np == r ? p[k] : r - 1 - k;
  return r;
}

/* If v is made by a live Transpose, returns that node (perm filled), else -1. */
static int transposed_by(const kn_graph *g, int v, int64_t *perm) {
  int p = v >= 0 ? g->values[v].producer : -1;
  if (p < 0 || g->nodes[p].dead || g->nodes[p].op != KN_OP_TRANSPOSE) return -1;
  transpose_perm(g, p, perm);
  return p;
}

static void set_perm(kn_graph *g, int i, const int64_t *perm, int r) {
  kn_node *n = &g->nodes[i];
  n->attrs = NULL;
  n->n_attr = 0;
  kn_node_add_attr(g, n, kn_pass_attr_ints(g, "perm", perm, r));
}

static void add_transpose(kn_graph *g, int x, int y, const int64_t *perm, int r, const char *name) {
  int t = kn_graph_add_node(g, KN_OP_TRANSPOSE, name, &x, 1, &y, 1);
  set_perm(g, t, perm, r);
}

/* ---- phase 1: NCHW conv / pools -> NHWC ops between Transposes ---- */

/* Rewires node i to read X in NHWC and write its output in NHWC, adding the
 * two Transposes. */
static void wrap_nhwc(kn_graph *g, int i) {
  int x = g->nodes[i].in[0], y = g->nodes[i].out[0];
  kn_shape xs = permute_shape(&g->values[x].shape, TO_NHWC);
  kn_shape ys = permute_shape(&g->values[y].shape, TO_NHWC);
  int xt = kn_pass_new_value(g, g->values[x].name, "_nhwc", g->values[x].dtype, &xs);
  int yt = kn_pass_new_value(g, g->values[y].name, "_nhwc", g->values[y].dtype, &ys);
  const char *name = g->nodes[i].name;
  g->nodes[i].in[0] = xt;
  g->nodes[i].out[0] = yt;
  g->values[yt].producer = i;
  g->values[y].producer = -1;
  add_transpose(g, x, xt, TO_NHWC, 4, kn_arena_printf(&g->arena, "%s_to_nhwc", name));
  add_transpose(g, yt, y, TO_NCHW, 4, kn_arena_printf(&g->arena, "%s_to_nchw", name));
}

static void add_window_attrs(kn_graph *g, int i, const kn_window *w) {
  int64_t pads[4] = {w->pad_begin[0], w->pad_begin[1], w->pad_end[0], w->pad_end[1]};
  kn_node_add_attr(g, &g->nodes[i], kn_pass_attr_ints(g, "strides", w->stride, 2));
  kn_node_add_attr(g, &g->nodes[i], kn_pass_attr_ints(g, "pads", pads, 4));
  kn_node_add_attr(g, &g->nodes[i], kn_pass_attr_ints(g, "dilations", w->dilation, 2));
}

/* The NHWC ops carry explicit pads (no auto_pad): the window they describe
 * must give the output size the original op had. */
static void check_explicit_window(const kn_window *w, const int64_t *kernel, int64_t ceil_mode) {
  int64_t pads[4] = {w->pad_begin[0], w->pad_begin[1], w->pad_end[0], w->pad_end[1]};
  kn_attr attrs[4] = {
      {.name = "strides", .kind = KN_ATTR_INTS, .n = 2, .ints = (int64_t *)w->stride},
      {.name = "dilations", .kind = KN_ATTR_INTS, .n = 2, .ints = (int64_t *)w->dilation},
      {.name = "pads", .kind = KN_ATTR_INTS, .n = 4, .ints = pads},
      {.name = "ceil_mode", .kind = KN_ATTR_INT, .i = ceil_mode},
  };
  kn_node probe = {.name = "probe", .op_type = "probe", .n_attr = 4, .attrs = attrs};
  kn_window again;
  KN_ASSERT(kn_window_resolve(&probe, 2, w->in, kernel, true, &again, NULL) == 0 &&
                again.out[0] == w->out[0] && again.out[1] == w->out[1],
            "explicit pads do not reproduce the window");
}

static bool convert_node(kn_graph *g, int i, const int *uses) {
  const kn_node *n = &g->nodes[i];
  if (n->dead || n->n_in < 1 || n->n_out != 1 || n->in[0] < 0) return false;
  const kn_value *x = &g->values[n->in[0]];
  if (!x->shape_known || x->shape.rank != 4) return false;
  int64_t in_sp[2] = {x->shape.dim[2], x->shape.dim[3]};
  kn_window w;
  switch (n->op) {
  case KN_OP_CONV: {
    const kn_value *wv = n->n_in > 1 && n->in[1] >= 0 ? &g->values[n->in[1]] : NULL;
    if (!wv || !wv->data || wv->shape.rank != 4) return false;
    int64_t kernel[2] = {wv->shape.dim[2], wv->shape.dim[3]};
    if (kn_window_resolve(n, 2, in_sp, kernel, false, &w, NULL) < 0) return false;
    check_explicit_window(&w, kernel, 0);
    int64_t group = kn_node_attr_int(n, "group", 1);
    /* A weight only this Conv reads is converted in place (no second copy of
     * big weights); a shared one is copied. */
    int hwio = n->in[1];
    if (uses[hwio] == 1 && !kn_pass_is_graph_output(g, hwio))
      kn_pass_permute_const_in_place(g, hwio, OIHW_TO_HWIO, "_hwio");
    else
      hwio = kn_pass_permute_const(g, hwio, &wv->shape, OIHW_TO_HWIO, "_hwio");
    kn_node *c = kn_rw_retype(g, i, KN_OP_CONV_NHWC, false);
    c->in[1] = hwio;
    add_window_attrs(g, i, &w);
    kn_node_add_attr(g, &g->nodes[i], kn_pass_attr_int("group", group));
    break;
  }
  case KN_OP_MAX_POOL:
  case KN_OP_AVERAGE_POOL: {
    int nk = 0;
    const int64_t *ks = kn_node_attr_ints(n, "kernel_shape", &nk);
    if (!ks || nk != 2 || kn_window_resolve(n, 2, in_sp, ks, true, &w, NULL) < 0) return false;
    int64_t kernel[2] = {ks[0], ks[1]};
    /* ceil_mode counts with explicit and VALID pads; SAME sizes ignore it
     * (and floor rounding reproduces them from the resolved pads). */
    const char *auto_pad = kn_node_attr_string(n, "auto_pad", "NOTSET");
    bool same = !strncmp(auto_pad, "SAME_", 5);
    int64_t ceil_mode = same ? 0 : kn_node_attr_int(n, "ceil_mode", 0);
    check_explicit_window(&w, kernel, ceil_mode);
    int64_t include_pad = kn_node_attr_int(n, "count_include_pad", 0);
    kn_op op = n->op == KN_OP_MAX_POOL ? KN_OP_MAX_POOL_NHWC : KN_OP_AVERAGE_POOL_NHWC;
    kn_rw_retype(g, i, op, false);
    kn_node_add_attr(g, &g->nodes[i], kn_pass_attr_ints(g, "kernel_shape", kernel, 2));
    add_window_attrs(g, i, &w);
    kn_node_add_attr(g, &g->nodes[i], kn_pass_attr_int("ceil_mode", ceil_mode));
    if (op == KN_OP_AVERAGE_POOL_NHWC)
      kn_node_add_attr(g, &g->nodes[i], kn_pass_attr_int("count_include_pad", include_pad));
    break;
  }
  case KN_OP_GLOBAL_AVERAGE_POOL: kn_rw_retype(g, i, KN_OP_GLOBAL_AVERAGE_POOL_NHWC, false); break;
  default: return false;
  }
  wrap_nhwc(g, i);
  return true;
}

/* ---- phase 2: sinking and cancelling Transposes ---- */

/* Node i (a Transpose or an Identity-like alias) is replaced by value src. */
static void alias_output(kn_graph *g, int i, int src) {
  int y = g->nodes[i].out[0];
  if (kn_pass_is_graph_output(g, y)) {
    kn_node *n = kn_rw_retype(g, i, KN_OP_IDENTITY, false);
    n->in[0] = src;
    n->n_in = 1;
    return;
  }
  kn_pass_replace_uses(g, y, src);
  kn_pass_kill_node(g, i);
}

static bool compose_transposes(kn_graph *g, int i) {
  int64_t p1[KN_MAX_RANK], p2[KN_MAX_RANK], q[KN_MAX_RANK];
  int r = transpose_perm(g, i, p2);
  int inner = transposed_by(g, g->nodes[i].in[0], p1);
  if (inner < 0) {
    if (!perm_is_identity(p2, r)) return false;
    alias_output(g, i, g->nodes[i].in[0]);
    return true;
  }
  for (int k = 0; k < r; k++) q[k] = p1[p2[k]];
  int src = g->nodes[inner].in[0];
  if (perm_is_identity(q, r)) {
    alias_output(g, i, src);
  } else {
    g->nodes[i].in[0] = src;
    set_perm(g, i, q, r);
  }
  return true;
}

static bool all_ones(const kn_shape *s) {
  for (int i = 0; i < s->rank; i++)
    if (s->dim[i] != 1 || (s->batch_mask & (1u << i))) return false;
  return true;
}

static bool sinks_through(const kn_node *n) {
  if (n->n_out != 1) return false;
  if (n->op == KN_OP_CONCAT) return true;
  return kn_op_class_of(n->op) == KN_CLASS_ELEMWISE && n->op != KN_OP_BATCH_NORM &&
         n->op != KN_OP_IDENTITY;
}

/* Constant v broadcast in an op of rank r whose data moves by perm: the
 * constant for the untransposed op, keeping v's rank when possible. */
static int permute_operand(kn_graph *g, int v, const int64_t *perm, int r, const char *suffix) {
  kn_shape full = {.rank = r};
  const kn_shape cs = g->values[v].shape; /* a copy: adding values moves g->values */
  int lead = r - cs.rank;
  for (int k = 0; k < r; k++) full.dim[k] = k < lead ? 1 : cs.dim[k - lead];
  int64_t inv[KN_MAX_RANK];
  invert_perm(perm, r, inv);
  int nv = kn_pass_permute_const(g, v, &full, inv, suffix);
  kn_shape *ns = &g->values[nv].shape;
  int strip = 0;
  while (strip < lead && ns->dim[strip] == 1) strip++;
  memmove(ns->dim, ns->dim + strip, sizeof(int64_t) * (size_t)(r - strip));
  ns->rank = r - strip;
  return nv;
}

/* Moves the Transposes feeding elementwise / Concat node i below it. */
static bool sink_transposes(kn_graph *g, int i) {
  const kn_node *n = &g->nodes[i];
  if (!sinks_through(n)) return false;
  int y = n->out[0];
  int r = g->values[y].shape.rank;
  if (r < 1) return false;
  int64_t perm[KN_MAX_RANK], pk[KN_MAX_RANK];
  bool have = false;
  enum { KEEP, UNTRANSPOSE, PERMUTE } kind[64];
  if (n->n_in > 64) return false;
  for (int k = 0; k < n->n_in; k++) {
    int v = n->in[k];
    kind[k] = KEEP;
    if (v < 0) continue;
    if (transposed_by(g, v, pk) >= 0 && g->values[v].shape.rank == r) {
      if (have && !perm_equal(perm, pk, r)) return false;
      memcpy(perm, pk, sizeof perm);
      have = true;
      kind[k] = UNTRANSPOSE;
    }
  }
  if (!have) return false;
  for (int k = 0; k < n->n_in; k++) {
    int v = n->in[k];
    if (v < 0 || kind[k] == UNTRANSPOSE) continue;
    const kn_value *val = &g->values[v];
    if (n->op == KN_OP_CONCAT || val->shape.rank > r) return false;
    if (all_ones(&val->shape)) continue;
    if (!val->data || val->batch_coef) return false;
    kind[k] = PERMUTE;
  }
  bool to_nchw = r == 4 && perm_equal(perm, TO_NCHW, 4);
  const char *suffix = to_nchw ? "_nhwc" : "_perm";
  int new_in[64];
  for (int k = 0; k < g->nodes[i].n_in; k++) {
    int v = g->nodes[i].in[k];
    new_in[k] = v;
    if (kind[k] == UNTRANSPOSE) new_in[k] = g->nodes[g->values[v].producer].in[0];
    if (kind[k] == PERMUTE) new_in[k] = permute_operand(g, v, perm, r, suffix);
  }
  int64_t inv[KN_MAX_RANK];
  invert_perm(perm, r, inv);
  kn_shape es = permute_shape(&g->values[y].shape, inv);
  int e = kn_pass_new_value(g, g->values[y].name, suffix, g->values[y].dtype, &es);
  kn_node *m = &g->nodes[i];
  memcpy(m->in, new_in, sizeof(int) * (size_t)m->n_in);
  if (m->op == KN_OP_CONCAT) {
    int axis = kn_axis_norm(kn_node_attr_int(m, "axis", 0), r);
    m->attrs = NULL;
    m->n_attr = 0;
    kn_node_add_attr(g, m, kn_pass_attr_int("axis", perm[axis]));
  }
  m->out[0] = e;
  g->values[e].producer = i;
  g->values[y].producer = -1;
  add_transpose(g, e, y, perm, r, kn_arena_printf(&g->arena, "%s_out", g->nodes[i].name));
  return true;
}

/* ---- phase 3: Transposes of size-1 dims are Reshapes ---- */

static bool transpose_to_reshape(kn_graph *g, int i) {
  int64_t perm[KN_MAX_RANK];
  int r = transpose_perm(g, i, perm);
  int x = g->nodes[i].in[0], y = g->nodes[i].out[0];
  const kn_shape *xs = &g->values[x].shape, *ys = &g->values[y].shape;
  int64_t last = -1;
  for (int k = 0; k < r; k++) {
    int64_t j = perm[k];
    if (xs->dim[j] == 1 && !(xs->batch_mask & (1u << j))) continue;
    if (j < last) return false;
    last = j;
  }
  int64_t vals[KN_MAX_RANK], coefs[KN_MAX_RANK];
  bool any_coef = false;
  for (int k = 0; k < r; k++) {
    bool batch = ys->batch_mask & (1u << k);
    bool same = k < xs->rank && (xs->batch_mask & (1u << k)) && xs->dim[k] == ys->dim[k];
    vals[k] = batch ? 0 : ys->dim[k];
    coefs[k] = batch && !same ? ys->dim[k] : 0;
    any_coef |= coefs[k] != 0;
  }
  kn_shape ss = {.rank = 1, .dim = {r}};
  int shape = kn_pass_new_const(g, g->values[y].name, "_shape", KN_DT_I64, &ss, vals);
  if (any_coef) {
    g->values[shape].batch_coef = KN_NEW_ARRAY(&g->arena, int64_t, r);
    memcpy(g->values[shape].batch_coef, coefs, sizeof(int64_t) * (size_t)r);
  }
  int *in = KN_NEW_ARRAY(&g->arena, int, 2);
  in[0] = x;
  in[1] = shape;
  kn_node *n = kn_rw_retype(g, i, KN_OP_RESHAPE, false);
  n->in = in;
  n->n_in = 2;
  return true;
}

int kn_pass_layout(kn_graph *g, kn_diag *d) {
  int n_nodes = g->n_nodes;
  bool any = false;
  int *uses = malloc(sizeof(int) * ((size_t)g->n_values + 1));
  KN_ASSERT(uses, "out of memory");
  kn_pass_count_uses(g, uses); /* weight use counts: phase 1 only adds values */
  for (int i = 0; i < n_nodes; i++) any |= convert_node(g, i, uses);
  free(uses);
  if (!any) return kn_graph_toposort(g, d);
  if (kn_pass_dce(g, d) < 0) return -1;
  for (int sweep = 0; sweep < MAX_SWEEPS; sweep++) {
    bool changed = false;
    n_nodes = g->n_nodes;
    for (int i = 0; i < n_nodes; i++) {
      if (g->nodes[i].dead) continue;
      if (g->nodes[i].op == KN_OP_TRANSPOSE) changed |= compose_transposes(g, i);
      else changed |= sink_transposes(g, i);
    }
    if (kn_pass_dce(g, d) < 0) return -1;
    if (!changed) break;
  }
  n_nodes = g->n_nodes;
  for (int i = 0; i < n_nodes; i++)
    if (!g->nodes[i].dead && g->nodes[i].op == KN_OP_TRANSPOSE) transpose_to_reshape(g, i);
  return kn_pass_dce(g, d);
}
