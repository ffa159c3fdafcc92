/* te_ops_scatter.c — compute definitions of the scatters (ScatterElements,
 * Scatter, ScatterND, TensorScatter) in the family of index_family.h.
 *
 * A scatter writes a copy of the data with updates; the TE has no writes, so
 * each is expressed as a gather over the updates: for every output element,
 * a reduction stage indexed by the output axes runs over the update
 * positions that could target it (ScatterElements: the updates' axis;
 * ScatterND: every leading dim of the indices) and tests whether the
 * (wrapped) index hits the element; an out-of-range index hits nothing, so
 * its update is dropped (kn_te_index_wrap, te_ops.h: Kiln's one rule):
 *  - reduction none: stage `last` = max over hits of the update's position
 *    (-1 for none), so the last update in order wins, as in ONNX; the output
 *    reads updates at that position, or the data;
 *  - add / mul / max / min: stage `acc` folds select(hit, update, neutral)
 *    where neutral is 0 / 1 / the data element itself, and the output is
 *    data (op) acc; an element nothing hits keeps the data.
 * Cost is O(output x updates along the scattered dims). TensorScatter writes
 * one contiguous run per batch row, so it inverts directly: an injective
 * compute that reads the update when the element lies in the written run. */
#include <string.h>

#include "ir/graph/index_family.h"
#include "ir/te/te_ops.h"

static kn_expr *cmp(kn_te_ctx *c, kn_expr_kind k, kn_expr *a, kn_expr *b) { return kn_e_bin(c->ec, k, a, b); }

typedef enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN } red_kind;

static int reduction_of(const kn_node *n, red_kind *r) {
  const char *s = n->op == KN_OP_SCATTER ? "none" : kn_node_attr_string(n, "reduction", "none");
  *r = !strcmp(s, "none") ? RED_NONE : !strcmp(s, "add") ? RED_ADD : !strcmp(s, "mul") ? RED_MUL
       : !strcmp(s, "max") ? RED_MAX : !strcmp(s, "min") ? RED_MIN : (red_kind)-1;
  return (int)*r < 0 ? -1 : 0;
}

/* The reduction over the update positions (vars / extents; none => the
 * source itself), as a stage indexed by the output axes, read back at them. */
static kn_expr *fold(kn_te_ctx *c, const kn_node *n, kn_te_tensor *o, const char *suffix, kn_dtype t,
                     kn_reduce_op op, kn_var **vars, kn_expr **extents, int n_vars, kn_expr *source) {
  if (n_vars == 0) return source;
  kn_te_tensor *st = kn_te_stage(c, n, suffix, t, o->rank, o->shape);
  /* the source was built over o's axes: rename them to the stage's */
  kn_expr *body = source;
  for (int a = 0; a < o->rank; a++) body = kn_e_substitute(c->ec, body, o->axes[a], kn_e_var(c->ec, st->axes[a]));
  st->body = kn_e_reduce(c->ec, op, vars, extents, n_vars, body);
  kn_expr *idx[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  return kn_te_at(c, st, idx);
}

/* The output from the data element, the hit test's results and the kind. */
static kn_expr *combine(kn_te_ctx *c, red_kind red, kn_expr *data, kn_expr *acc) {
  kn_expr_ctx *ec = c->ec;
  switch (red) {
  case RED_ADD: return kn_e_add(ec, data, acc);
  case RED_MUL: return kn_e_mul(ec, data, acc);
  case RED_MAX: return kn_e_max(ec, data, acc);
  default: return kn_e_min(ec, data, acc);
  }
}

static kn_reduce_op red_op(red_kind r) {
  return r == RED_ADD ? KN_RED_SUM : r == RED_MUL ? KN_RED_PROD : r == RED_MAX ? KN_RED_MAX : KN_RED_MIN;
}

/* The value a non-hit contributes to the fold. */
static kn_expr *neutral(kn_te_ctx *c, red_kind red, kn_expr *data) {
  if (red == RED_ADD) return kn_te_num(c, data->dtype, 0);
  if (red == RED_MUL) return kn_te_num(c, data->dtype, 1);
  return data; /* max / min: the data element itself */
}

static kn_te_tensor *scatter_elements_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  kn_te_tensor *x = in[0], *ind = in[1], *upd = in[2], *o = kn_te_out_compute(c, n, 0, NULL);
  int r = x->rank;
  int axis = kn_te_norm_axis(kn_node_attr_int(n, "axis", 0), r);
  red_kind red;
  if (axis < 0 || ind->rank != r || upd->rank != r || o->dtype != x->dtype) return kn_te_unsupported(d, n, "shapes");
  if (reduction_of(n, &red) < 0) return kn_te_unsupported(d, n, "reduction");
  kn_expr *idx[KN_TE_MAX_RANK], *ui[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  kn_var *k = kn_var_new(ec, "u");
  kn_expr *kv = kn_e_var(ec, k), *ext = ind->shape[axis];
  /* update position (i with axis -> k): in range on the other axes? */
  kn_expr *inside = NULL;
  for (int a = 0; a < r; a++) {
    if (a == axis) {
      ui[a] = kv;
      continue;
    }
    if (!kn_e_equal(ind->shape[a], x->shape[a])) {
      inside = kn_te_and(c, inside, cmp(c, KN_E_LT, idx[a], ind->shape[a]));
      ui[a] = kn_te_ix_clamp(c, idx[a], ind->shape[a]);
    } else {
      ui[a] = idx[a];
    }
  }
  kn_expr *at = kn_te_index_wrap(c, kn_te_at(c, ind, ui), x->shape[axis]);
  kn_expr *hit = kn_te_and(c, inside, cmp(c, KN_E_EQ, at, idx[axis]));
  kn_expr *data = kn_te_at(c, x, idx);
  if (red == RED_NONE) {
    kn_expr *last = fold(c, n, o, "last", KN_DT_I64, KN_RED_MAX, &k, &ext, 1,
                         kn_e_select(ec, hit, kv, kn_te_ix(c, -1)));
    kn_expr *li[KN_TE_MAX_RANK];
    memcpy(li, ui, sizeof li);
    li[axis] = kn_te_ix_clamp(c, last, ext);
    o->body = kn_e_select(ec, cmp(c, KN_E_GE, last, kn_te_ix(c, 0)), kn_te_at(c, upd, li), data);
    return o;
  }
  kn_expr *acc = fold(c, n, o, "acc", x->dtype, red_op(red), &k, &ext, 1,
                      kn_e_select(ec, hit, kn_te_at(c, upd, ui), neutral(c, red, data)));
  o->body = combine(c, red, data, acc);
  return o;
}

static kn_te_tensor *scatter_nd_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  kn_te_tensor *x = in[0], *ind = in[1], *upd = in[2], *o = kn_te_out_compute(c, n, 0, NULL);
  int r = x->rank, q = ind->rank;
  int64_t k;
  red_kind red;
  if (q < 1 || !kn_te_ix_const(ind->shape[q - 1], &k) || k < 1 || k > r || o->dtype != x->dtype)
    return kn_te_unsupported(d, n, "indices shape");
  if (reduction_of(n, &red) < 0) return kn_te_unsupported(d, n, "reduction");
  kn_expr *idx[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  static const char *names[KN_TE_MAX_RANK] = {"j0", "j1", "j2", "j3", "j4", "j5", "j6", "j7"};
  kn_var *vars[KN_TE_MAX_RANK];
  kn_expr *ext[KN_TE_MAX_RANK], *jv[KN_TE_MAX_RANK], *ii[KN_TE_MAX_RANK], *ui[KN_TE_MAX_RANK];
  for (int a = 0; a < q - 1; a++) {
    vars[a] = kn_var_new(ec, names[a]);
    ext[a] = ind->shape[a];
    jv[a] = ii[a] = ui[a] = kn_e_var(ec, vars[a]);
  }
  kn_expr *hit = NULL;
  for (int t = 0; t < k; t++) {
    ii[q - 1] = kn_te_ix(c, t);
    hit = kn_te_and(c, hit, cmp(c, KN_E_EQ, kn_te_index_wrap(c, kn_te_at(c, ind, ii), x->shape[t]), idx[t]));
  }
  for (int a = (int)k; a < r; a++) ui[q - 1 + a - (int)k] = idx[a];
  kn_expr *data = kn_te_at(c, x, idx);
  if (red != RED_NONE) {
    kn_expr *acc = fold(c, n, o, "acc", x->dtype, red_op(red), vars, ext, q - 1,
                        kn_e_select(ec, hit, kn_te_at(c, upd, ui), neutral(c, red, data)));
    o->body = q == 1 ? kn_e_select(ec, hit, combine(c, red, data, kn_te_at(c, upd, ui)), data)
                     : combine(c, red, data, acc);
    return o;
  }
  /* the last hit, by its row-major position among the update rows */
  kn_expr *flat = kn_te_ix(c, 0);
  for (int a = 0; a < q - 1; a++) flat = kn_te_ix_add(c, kn_te_ix_mul(c, flat, ext[a]), jv[a]);
  kn_expr *last = fold(c, n, o, "last", KN_DT_I64, KN_RED_MAX, vars, ext, q - 1,
                       kn_e_select(ec, hit, flat, kn_te_ix(c, -1)));
  kn_expr *rem = kn_te_ix_max(c, last, kn_te_ix(c, 0));
  for (int a = q - 2; a >= 0; a--) {
    ui[a] = kn_te_ix_clamp(c, kn_te_ix_mod(c, rem, ext[a]), ext[a]);
    rem = kn_te_ix_div(c, rem, ext[a]);
  }
  o->body = kn_e_select(ec, cmp(c, KN_E_GE, last, kn_te_ix(c, 0)), kn_te_at(c, upd, ui), data);
  return o;
}

/* TensorScatter: the run written in row b starts at write_indices[b] (0 when
 * omitted), modulo the cache length in circular mode. */
static kn_te_tensor *tensor_scatter_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  kn_te_tensor *x = in[0], *upd = in[1], *wi = n->n_in > 2 ? in[2] : NULL;
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  int r = x->rank;
  int axis = kn_te_norm_axis(kn_node_attr_int(n, "axis", -2), r);
  if (axis < 1 || upd->rank != r || o->dtype != x->dtype) return kn_te_unsupported(d, n, "shapes");
  bool circular = strcmp(kn_node_attr_string(n, "mode", "linear"), "circular") == 0;
  kn_expr *idx[KN_TE_MAX_RANK], *ui[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  kn_expr *w = kn_te_ix(c, 0);
  if (wi) {
    kn_expr *b[1] = {idx[0]};
    w = kn_e_cast(ec, KN_DT_I64, kn_te_at(c, wi, b));
  }
  kn_expr *len = x->shape[axis], *seq = upd->shape[axis];
  kn_expr *s = kn_te_ix_sub(c, idx[axis], w);
  if (circular) s = kn_te_ix_mod(c, s, len);
  kn_expr *hit = kn_te_and(c, cmp(c, KN_E_GE, s, kn_te_ix(c, 0)), cmp(c, KN_E_LT, s, seq));
  memcpy(ui, idx, sizeof ui);
  ui[axis] = kn_te_ix_clamp(c, s, seq);
  o->body = kn_e_select(ec, hit, kn_te_at(c, upd, ui), kn_te_at(c, x, idx));
  return o;
}

kn_te_tensor *kn_te_scatter_op(kn_te_ctx *c, const kn_node *n, int out, kn_te_tensor **in, kn_diag *d) {
  for (int i = 0; i < n->n_in && i < 2; i++)
    if (!in[i]) return kn_te_unsupported(d, n, "missing input %d", i);
  switch (n->op) {
  case KN_OP_SCATTER_ELEMENTS:
  case KN_OP_SCATTER:
    if (n->n_in < 3 || !in[2]) return kn_te_unsupported(d, n, "missing updates");
    return scatter_elements_def(c, n, in, d);
  case KN_OP_SCATTER_ND:
    if (n->n_in < 3 || !in[2]) return kn_te_unsupported(d, n, "missing updates");
    return scatter_nd_def(c, n, in, d);
  case KN_OP_TENSOR_SCATTER: return tensor_scatter_def(c, n, in, d);
  default: (void)out; return kn_te_unsupported(d, n, "operator in the indexing library");
  }
}
