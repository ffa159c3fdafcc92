/* te_ops_index.c — compute definitions of the [indexing, scans, bitwise,
 * einsum] family (index_family.h); the scatters are in te_ops_scatter.c.
 *
 *  - CumSum / CumProd: one reduction stage indexed by the output axes,
 *    folding x along the axis over a prefix (or suffix) selected by a mask:
 *    out[..i..] = sum_k (k <= i ? x[..k..] : 0) (k < i exclusive, >= / >
 *    reversed). A constant axis gives one mask; an axis read at run time
 *    selects among the masks of every axis (the reduction runs over the
 *    largest dim, loads clamped).
 *  - BitwiseAnd / Or: the AND / OR expressions, bitwise on integers;
 *    BitwiseXor = (a | b) - (a & b); BitwiseNot = -1 - a (all ones - a);
 *    BitShift = a * 2^s or a / 2^s (unsigned), 2^s built from the bits of s
 *    by selects, 0 when s >= the width.
 *  - OneHot, GatherND, EyeLike, ReverseSequence: one injective compute each;
 *    GatherND's indices follow kn_te_index_read's rule (te_ops.h: out of
 *    range reads 0); OneHot's out-of-range index gives a row of off values,
 *    as ONNX says; ReverseSequence clamps its lengths to the time axis.
 *  - Einsum: one reduction stage over the summed labels of the product of
 *    the operands (a plain product when nothing is summed).
 *  - TopK: kiln.TopKRank counts, per element, the elements before it in
 *    the order (a sum-reduction, O(n^2) per line); TopK's indices are then
 *    the element of each rank (a min-reduction, O(K n)), its values x there.
 *  - Det: the Leibniz sum over the permutations (matrices up to 4 x 4). */
#include <string.h>

#include "ir/graph/index_family.h"
#include "ir/te/te_ops.h"

/* Element 0 of t (any rank) as an int64 index expression. */
static kn_expr *first_int(kn_te_ctx *c, kn_te_tensor *t) {
  kn_expr *z[KN_TE_MAX_RANK];
  for (int i = 0; i < t->rank; i++) z[i] = kn_te_ix(c, 0);
  return kn_e_cast(c->ec, KN_DT_I64, kn_te_at(c, t, z));
}

static kn_expr *cmp(kn_te_ctx *c, kn_expr_kind k, kn_expr *a, kn_expr *b) { return kn_e_bin(c->ec, k, a, b); }

/* ---- CumSum / CumProd ---- */

static kn_te_tensor *cum_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  kn_te_tensor *x = in[0];
  int r = x->rank;
  bool excl = kn_node_attr_int(n, "exclusive", 0) != 0;
  bool rev = kn_node_attr_int(n, "reverse", 0) != 0;
  bool prod = n->op == KN_OP_CUM_PROD;
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  if (o->rank != r || o->dtype != x->dtype || r < 1) return kn_te_unsupported(d, n, "output shape/dtype");
  kn_expr *idx[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  int64_t axis_c;
  int count = 0;
  int fixed = -1; /* the axis when it is a constant */
  if (kn_te_const_ints(c, n->in[1], &axis_c, 1, &count) && count == 1) {
    fixed = kn_te_norm_axis(axis_c, r);
    if (fixed < 0) return kn_te_unsupported(d, n, "axis %lld", (long long)axis_c);
  } else if (r == 1) {
    fixed = 0; /* the only axis any valid value can name */
  }
  kn_var *k = kn_var_new(ec, "k");
  kn_expr *kv = kn_e_var(ec, k);
  kn_expr *extent = fixed >= 0 ? x->shape[fixed] : x->shape[0];
  if (fixed < 0)
    for (int a = 1; a < r; a++) extent = kn_te_ix_max(c, extent, x->shape[a]);
  kn_expr *axis_rt = NULL;
  if (fixed < 0) {
    kn_expr *a = first_int(c, in[1]);
    axis_rt = kn_e_select(ec, cmp(c, KN_E_LT, a, kn_te_ix(c, 0)), kn_te_ix_add(c, a, kn_te_ix(c, r)), a);
  }
  kn_expr *ident = kn_te_num(c, x->dtype, prod ? 1 : 0);
  kn_expr *src = ident;
  for (int a = 0; a < r; a++) {
    if (fixed >= 0 && a != fixed) continue;
    kn_expr_kind mk = rev ? (excl ? KN_E_GT : KN_E_GE) : (excl ? KN_E_LT : KN_E_LE);
    kn_expr *cond = cmp(c, mk, kv, idx[a]);
    kn_expr *xi[KN_TE_MAX_RANK];
    memcpy(xi, idx, sizeof(kn_expr *) * (size_t)r);
    xi[a] = kv;
    if (fixed < 0) {
      cond = kn_te_and(c, cmp(c, KN_E_EQ, axis_rt, kn_te_ix(c, a)), kn_te_and(c, cond, kn_te_ix_in_range(c, kv, x->shape[a])));
      xi[a] = kn_te_ix_clamp(c, kv, x->shape[a]);
    }
    src = kn_e_select(ec, cond, kn_te_at(c, x, xi), src);
  }
  o->body = kn_e_reduce(ec, prod ? KN_RED_PROD : KN_RED_SUM, &k, &extent, 1, src);
  return o;
}

/* ---- bitwise ---- */

/* 2^s for 0 <= s < width(t), from the bits of s (int64). */
static kn_expr *pow2(kn_te_ctx *c, kn_dtype t, kn_expr *s) {
  int bits = (int)kn_dtype_size(t) * 8;
  kn_expr *p = kn_e_const_int(c->ec, t, 1);
  for (int b = 0; (1 << b) < bits; b++) {
    kn_expr *bit = cmp(c, KN_E_NE, kn_e_bin(c->ec, KN_E_AND, s, kn_te_ix(c, (int64_t)1 << b)), kn_te_ix(c, 0));
    kn_expr *f = kn_e_const_int(c->ec, t, (int64_t)(UINT64_C(1) << (1 << b)));
    p = kn_e_mul(c->ec, p, kn_e_select(c->ec, bit, f, kn_e_const_int(c->ec, t, 1)));
  }
  return p;
}

static kn_te_tensor *bitwise_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  kn_dtype t = o->dtype;
  if (!kn_dtype_is_int(t) || in[0]->dtype != t) return kn_te_unsupported(d, n, "dtype %s", kn_dtype_name(t));
  kn_expr *a = kn_te_bcast_load(c, in[0], o->axes, o->rank);
  if (n->op == KN_OP_BITWISE_NOT) {
    o->body = kn_e_sub(ec, kn_e_const_int(ec, t, -1), a);
    return o;
  }
  if (n->n_in < 2 || !in[1] || in[1]->dtype != t) return kn_te_unsupported(d, n, "second input");
  kn_expr *b = kn_te_bcast_load(c, in[1], o->axes, o->rank);
  switch (n->op) {
  case KN_OP_BITWISE_AND: o->body = kn_e_bin(ec, KN_E_AND, a, b); break;
  case KN_OP_BITWISE_OR: o->body = kn_e_bin(ec, KN_E_OR, a, b); break;
  case KN_OP_BITWISE_XOR: o->body = kn_e_sub(ec, kn_e_bin(ec, KN_E_OR, a, b), kn_e_bin(ec, KN_E_AND, a, b)); break;
  default: { /* BitShift, unsigned */
    bool left = strcmp(kn_node_attr_string(n, "direction", ""), "LEFT") == 0;
    int bits = (int)kn_dtype_size(t) * 8;
    kn_expr *s = kn_e_cast(ec, KN_DT_I64, b); /* < 2^63 for every shift that matters */
    kn_expr *too_far = cmp(c, KN_E_GE, kn_e_cast(ec, KN_DT_U64, b), kn_e_const_int(ec, KN_DT_U64, bits));
    kn_expr *p = pow2(c, t, kn_e_bin(ec, KN_E_AND, s, kn_te_ix(c, bits - 1)));
    kn_expr *v = left ? kn_e_mul(ec, a, p) : kn_e_div(ec, a, p);
    o->body = kn_e_select(ec, too_far, kn_e_const_int(ec, t, 0), v);
    break;
  }
  }
  return o;
}

/* ---- injective ops ---- */

static kn_te_tensor *one_hot_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL), *ind = in[0], *val = in[2];
  int r = o->rank;
  int axis = kn_te_norm_axis(kn_node_attr_int(n, "axis", -1), r);
  if (axis < 0 || ind->rank != r - 1 || !val || val->dtype != o->dtype)
    return kn_te_unsupported(d, n, "axis/shape");
  kn_expr *idx[KN_TE_MAX_RANK], *ii[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  for (int a = 0, k = 0; a < r; a++)
    if (a != axis) ii[k++] = idx[a];
  kn_expr *v = kn_e_cast(ec, KN_DT_I64, kn_te_at(c, ind, ii)); /* floats truncate */
  kn_expr *depth = o->shape[axis];
  v = kn_e_select(ec, cmp(c, KN_E_LT, v, kn_te_ix(c, 0)), kn_te_ix_add(c, v, depth), v);
  kn_expr *vi[KN_TE_MAX_RANK];
  for (int a = 0; a < val->rank; a++) vi[a] = kn_te_ix(c, 0);
  kn_expr *off = kn_te_at(c, val, vi);
  if (val->rank > 0) vi[val->rank - 1] = kn_te_ix(c, 1);
  kn_expr *on = kn_te_at(c, val, vi);
  o->body = kn_e_select(ec, cmp(c, KN_E_EQ, v, idx[axis]), on, off);
  return o;
}

static kn_te_tensor *gather_nd_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL), *x = in[0], *ind = in[1];
  int q = ind->rank, b = (int)kn_node_attr_int(n, "batch_dims", 0);
  int64_t k;
  if (!kn_te_ix_const(ind->shape[q - 1], &k) || k < 1 || b + k > x->rank || o->dtype != x->dtype)
    return kn_te_unsupported(d, n, "indices shape");
  kn_expr *idx[KN_TE_MAX_RANK], *ii[KN_TE_MAX_RANK], *xi[KN_TE_MAX_RANK], *valid = NULL;
  kn_te_axis_exprs(c, o, idx);
  for (int a = 0; a < q - 1; a++) ii[a] = idx[a];
  for (int a = 0; a < b; a++) xi[a] = idx[a];
  for (int t = 0; t < k; t++) {
    ii[q - 1] = kn_te_ix(c, t);
    xi[b + t] = kn_te_index_read(c, kn_te_at(c, ind, ii), x->shape[b + t], &valid);
  }
  for (int a = b + (int)k; a < x->rank; a++) xi[a] = idx[q - 1 + a - b - (int)k];
  o->body = kn_te_index_or_zero(c, valid, kn_te_at(c, x, xi));
  return o;
}

static kn_te_tensor *eye_like_def(kn_te_ctx *c, const kn_node *n, kn_diag *d) {
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  if (o->rank != 2) return kn_te_unsupported(d, n, "rank %d", o->rank);
  kn_expr *idx[2];
  kn_te_axis_exprs(c, o, idx);
  kn_expr *diag = cmp(c, KN_E_EQ, kn_te_ix_sub(c, idx[1], idx[0]), kn_te_ix(c, kn_node_attr_int(n, "k", 0)));
  o->body = kn_e_select(c->ec, diag, kn_te_num(c, o->dtype, 1), kn_te_num(c, o->dtype, 0));
  return o;
}

static kn_te_tensor *reverse_sequence_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL), *x = in[0];
  int ba = kn_te_norm_axis(kn_node_attr_int(n, "batch_axis", 1), x->rank), ta = 1 - ba;
  if (ba < 0 || ba > 1 || o->dtype != x->dtype) return kn_te_unsupported(d, n, "batch_axis");
  kn_expr *idx[KN_TE_MAX_RANK], *xi[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  kn_expr *li[1] = {idx[ba]};
  kn_expr *len = kn_te_ix_min(c, kn_e_cast(c->ec, KN_DT_I64, kn_te_at(c, in[1], li)), x->shape[ta]);
  memcpy(xi, idx, sizeof(kn_expr *) * (size_t)x->rank);
  kn_expr *t = idx[ta];
  kn_expr *rev = kn_te_ix_sub(c, kn_te_ix_sub(c, len, kn_te_ix(c, 1)), t);
  xi[ta] = kn_te_ix_clamp(c, kn_e_select(c->ec, cmp(c, KN_E_LT, t, len), rev, t), x->shape[ta]);
  o->body = kn_te_at(c, x, xi);
  return o;
}

/* ---- Einsum ---- */

static kn_te_tensor *einsum_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  const char *eq = kn_node_attr_string(n, "equation", "");
  int ranks[KN_EINSUM_MAX_IN];
  for (int i = 0; i < n->n_in; i++) ranks[i] = in[i]->rank;
  kn_einsum e;
  char err[128];
  if (kn_einsum_parse(eq, n->n_in, ranks, &e, err, sizeof err) < 0) return kn_te_unsupported(d, n, "%s", err);
  /* 16-bit floats: a sum in f32, rounded once by an epilogue */
  kn_dtype acc_t = e.n_sum ? kn_te_acc_dtype(in[0]->dtype) : in[0]->dtype;
  bool widen = acc_t != in[0]->dtype;
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, widen ? "acc" : NULL);
  if (o->rank != e.out_rank || o->dtype != in[0]->dtype) return kn_te_unsupported(d, n, "output shape/dtype");
  o->dtype = acc_t;
  kn_expr *at[KN_EINSUM_LABELS] = {0}, *ext[KN_EINSUM_LABELS] = {0};
  for (int i = 0; i < n->n_in; i++)
    for (int a = 0; a < e.rank[i]; a++) {
      int64_t v;
      if (!ext[e.label[i][a]] || !(kn_te_ix_const(in[i]->shape[a], &v) && v == 1)) ext[e.label[i][a]] = in[i]->shape[a];
    }
  for (int j = 0; j < e.out_rank; j++) at[e.out_label[j]] = kn_e_var(ec, o->axes[j]);
  kn_var *vars[KN_EINSUM_LABELS];
  kn_expr *extents[KN_EINSUM_LABELS];
  for (int j = 0; j < e.n_sum; j++) {
    vars[j] = kn_var_new(ec, "s");
    extents[j] = ext[e.sum_label[j]];
    at[e.sum_label[j]] = kn_e_var(ec, vars[j]);
  }
  kn_expr *prod = NULL;
  for (int i = 0; i < n->n_in; i++) {
    kn_expr *xi[KN_TE_MAX_RANK];
    for (int a = 0; a < e.rank[i]; a++) {
      int64_t v;
      xi[a] = kn_te_ix_const(in[i]->shape[a], &v) && v == 1 ? kn_te_ix(c, 0) : at[e.label[i][a]];
    }
    kn_expr *ld = kn_e_cast(ec, acc_t, kn_te_at(c, in[i], xi));
    prod = prod ? kn_e_mul(ec, prod, ld) : ld;
  }
  o->body = e.n_sum ? kn_e_reduce(ec, KN_RED_SUM, vars, extents, e.n_sum, prod) : prod;
  if (!widen) return o;
  kn_te_tensor *out = kn_te_out_compute(c, n, 0, NULL);
  kn_expr *oi[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, out, oi);
  out->body = kn_e_cast(ec, in[0]->dtype, kn_te_at(c, o, oi));
  return out;
}

/* ---- TopK ---- */

/* Element (value xa, index ia) comes before (xb, ib) in TopK's order. For
 * floats NaN counts as larger than any number and equal to NaN (numpy's sort
 * order, as the ONNX reference), so the order stays total and the ranks a
 * permutation. */
static kn_expr *before(kn_te_ctx *c, kn_expr *xa, kn_expr *xb, kn_expr *ia, kn_expr *ib, bool largest,
                       bool is_float) {
  kn_expr *strict = cmp(c, largest ? KN_E_GT : KN_E_LT, xa, xb);
  kn_expr *same = cmp(c, KN_E_EQ, xa, xb);
  if (is_float) {
    kn_expr *nan_a = cmp(c, KN_E_NE, xa, xa), *nan_b = cmp(c, KN_E_NE, xb, xb);
    kn_expr *num_a = cmp(c, KN_E_EQ, xa, xa), *num_b = cmp(c, KN_E_EQ, xb, xb);
    kn_expr *nan_first = largest ? kn_te_and(c, nan_a, num_b) : kn_te_and(c, nan_b, num_a);
    strict = kn_e_bin(c->ec, KN_E_OR, strict, nan_first);
    same = kn_e_bin(c->ec, KN_E_OR, same, kn_te_and(c, nan_a, nan_b));
  }
  kn_expr *tie = kn_te_and(c, same, cmp(c, KN_E_LT, ia, ib));
  return kn_e_bin(c->ec, KN_E_OR, strict, tie);
}

/* kiln.TopKRank: rank[..e..] = number of m along the axis before e. */
static kn_te_tensor *top_k_rank_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor *x, kn_diag *d) {
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  int axis = kn_te_norm_axis(kn_node_attr_int(n, "axis", -1), x->rank);
  if (axis < 0 || o->rank != x->rank || x->dtype == KN_DT_BOOL) return kn_te_unsupported(d, n, "axis/dtype");
  bool largest = kn_node_attr_int(n, "largest", 1) != 0;
  kn_expr *idx[KN_TE_MAX_RANK], *mi[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  kn_var *m = kn_var_new(c->ec, "m");
  memcpy(mi, idx, sizeof mi);
  mi[axis] = kn_e_var(c->ec, m);
  kn_expr *b = before(c, kn_te_at(c, x, mi), kn_te_at(c, x, idx), mi[axis], idx[axis], largest,
                      kn_dtype_is_float(x->dtype));
  kn_expr *ext = x->shape[axis];
  o->body = kn_e_reduce(c->ec, KN_RED_SUM, &m, &ext, 1, kn_e_select(c->ec, b, kn_te_ix(c, 1), kn_te_ix(c, 0)));
  return o;
}

/* TopK output 1 (indices): the e whose rank is the output position p along
 * the axis (a min-reduction over e, O(K n)); output 0 reads x there. */
static kn_te_tensor *top_k_def(kn_te_ctx *c, const kn_node *n, int out, kn_te_tensor **in, kn_diag *d) {
  kn_te_tensor *x = in[0], *rank = n->n_in > 2 ? in[2] : NULL;
  if (!rank) return kn_te_unsupported(d, n, "TopK without its rank input (kn_pass_split_topk)");
  int axis = kn_te_norm_axis(kn_node_attr_int(n, "axis", -1), x->rank);
  kn_te_tensor *o = kn_te_out_compute(c, n, out, out ? "indices" : NULL);
  if (axis < 0 || o->rank != x->rank) return kn_te_unsupported(d, n, "axis");
  kn_te_tensor *st = out == 1 ? o : kn_te_stage(c, n, "index", KN_DT_I64, o->rank, o->shape);
  kn_expr *si[KN_TE_MAX_RANK], *ri[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, st, si);
  kn_var *e = kn_var_new(c->ec, "e");
  memcpy(ri, si, sizeof ri);
  ri[axis] = kn_e_var(c->ec, e);
  kn_expr *ext = x->shape[axis];
  kn_expr *hit = cmp(c, KN_E_EQ, kn_te_at(c, rank, ri), si[axis]);
  st->body = kn_e_reduce(c->ec, KN_RED_MIN, &e, &ext, 1, kn_e_select(c->ec, hit, ri[axis], ext));
  if (out == 1) return o;
  kn_expr *idx[KN_TE_MAX_RANK], *xi[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  memcpy(xi, idx, sizeof xi);
  xi[axis] = kn_te_ix_clamp(c, kn_te_at(c, st, idx), ext);
  o->body = kn_te_at(c, x, xi);
  return o;
}

/* ---- Det ---- */

typedef struct det_ctx {
  kn_te_ctx *c;
  kn_te_tensor *x;
  kn_expr **idx; /* output index (the batch axes) */
  int m, rb;     /* matrix size, batch rank */
  int perm[4];
  bool used[4];
  kn_expr *sum;
} det_ctx;

/* Adds sign(perm) * prod_i x[.., i, perm[i]] for every completion of perm. */
static void det_terms(det_ctx *s, int row) {
  kn_te_ctx *c = s->c;
  if (row == s->m) {
    int inv = 0;
    for (int i = 0; i < s->m; i++)
      for (int j = i + 1; j < s->m; j++) inv += s->perm[i] > s->perm[j];
    kn_expr *p = NULL;
    for (int i = 0; i < s->m; i++) {
      kn_expr *xi[KN_TE_MAX_RANK];
      for (int a = 0; a < s->rb; a++) xi[a] = s->idx[a];
      xi[s->rb] = kn_te_ix(c, i);
      xi[s->rb + 1] = kn_te_ix(c, s->perm[i]);
      kn_expr *ld = kn_te_at(c, s->x, xi);
      p = p ? kn_e_mul(c->ec, p, ld) : ld;
    }
    s->sum = !s->sum ? (inv & 1 ? kn_e_sub(c->ec, kn_te_num(c, s->x->dtype, 0), p) : p)
                     : (inv & 1 ? kn_e_sub(c->ec, s->sum, p) : kn_e_add(c->ec, s->sum, p));
    return;
  }
  for (int j = 0; j < s->m; j++) {
    if (s->used[j]) continue;
    s->used[j] = true;
    s->perm[row] = j;
    det_terms(s, row + 1);
    s->used[j] = false;
  }
}

static kn_te_tensor *det_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  kn_te_tensor *x = in[0], *o = kn_te_out_compute(c, n, 0, NULL);
  int64_t m;
  if (x->rank < 2 || !kn_te_ix_const(x->shape[x->rank - 1], &m) || m > 4 || o->rank != x->rank - 2)
    return kn_te_unsupported(d, n, "matrix shape");
  kn_expr *idx[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  det_ctx s = {.c = c, .x = x, .idx = idx, .m = (int)m, .rb = o->rank};
  det_terms(&s, 0);
  o->body = s.sum ? s.sum : kn_te_num(c, o->dtype, 1);
  return o;
}

kn_te_tensor *kn_te_index_op(kn_te_ctx *c, const kn_node *n, int out, kn_te_tensor **in, kn_diag *d) {
  if (n->n_in < 1 || !in[0]) return kn_te_unsupported(d, n, "missing input 0");
  if (out != 0 && n->op != KN_OP_TOP_K) return kn_te_unsupported(d, n, "output %d", out);
  switch (n->op) {
  case KN_OP_CUM_SUM:
  case KN_OP_CUM_PROD:
    if (n->n_in < 2 || !in[1]) return kn_te_unsupported(d, n, "missing axis");
    return cum_def(c, n, in, d);
  case KN_OP_BIT_SHIFT:
  case KN_OP_BITWISE_AND:
  case KN_OP_BITWISE_OR:
  case KN_OP_BITWISE_XOR:
  case KN_OP_BITWISE_NOT: return bitwise_def(c, n, in, d);
  case KN_OP_ONE_HOT:
    if (n->n_in < 3 || !in[2]) return kn_te_unsupported(d, n, "missing values");
    return one_hot_def(c, n, in, d);
  case KN_OP_GATHER_ND:
    if (n->n_in < 2 || !in[1]) return kn_te_unsupported(d, n, "missing indices");
    return gather_nd_def(c, n, in, d);
  case KN_OP_EYE_LIKE: return eye_like_def(c, n, d);
  case KN_OP_REVERSE_SEQUENCE:
    if (n->n_in < 2 || !in[1]) return kn_te_unsupported(d, n, "missing sequence_lens");
    return reverse_sequence_def(c, n, in, d);
  case KN_OP_EINSUM:
    for (int i = 0; i < n->n_in; i++)
      if (!in[i]) return kn_te_unsupported(d, n, "missing operand %d", i);
    return einsum_def(c, n, in, d);
  case KN_OP_DET: return det_def(c, n, in, d);
  case KN_OP_TOP_K: return top_k_def(c, n, out, in, d);
  case KN_OP_TOP_K_RANK: return top_k_rank_def(c, n, in[0], d);
  default: return kn_te_scatter_op(c, n, out, in, d);
  }
}
