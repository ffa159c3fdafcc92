/* te_ops_nn.c — contractions (kiln.ConvNHWC, Conv, MatMul, Gemm) and pools
 * (MaxPool, AveragePool and their NHWC forms, the global pools).
 *
 * Conv and pool share one shape: an optional padded-input compute
 *   xpad[.., p, ..] = select(in_bounds(p - pad), X[.., clamp(p - pad), ..], pad_value)
 * whose spatial extent is exactly what the windows read, (O-1)*s + (K-1)*d + 1,
 * then one reduction stage reading xpad[.., o*s + k*d, ..], then (bias,
 * alpha/beta, average divisor) an injective epilogue. Convs reduce over
 * (kh, kw, ic) in that order, ic omitted when each group has one input
 * channel (depthwise); the schedule relies on that order.
 * MatMul and Gemm are one stage `acc[.., i, j] = sum_k A[.., i, k] * B[.., k, j]`. */
#include <string.h>

#include "ir/shape/shape_infer.h"
#include "ir/te/te_ops.h"

#define MAX_SP 3 /* spatial dims of convs and pools */

typedef struct window {
  int nsp;
  int64_t k[MAX_SP], s[MAX_SP], dl[MAX_SP], pb[MAX_SP], pe[MAX_SP];
} window;

/* Strides, dilations and pads of the window (kn_window_resolve: the one
 * definition shared with shape inference and the reference), checked
 * against the inferred output dims. w->k must be set. Returns false after a
 * diagnostic. */
static bool resolve_window(const kn_node *n, kn_expr *const *in_dims, kn_expr *const *out_dims,
                           bool pool, window *w, kn_diag *d) {
  int64_t in[MAX_SP];
  for (int i = 0; i < w->nsp; i++)
    if (!kn_te_ix_const(in_dims[i], &in[i])) {
      kn_te_unsupported(d, n, "batch-sized spatial dim");
      return false;
    }
  kn_window kw;
  if (kn_window_resolve(n, w->nsp, in, w->k, pool, &kw, d) < 0) return false;
  for (int i = 0; i < w->nsp; i++) {
    int64_t out;
    if (!kn_te_ix_const(out_dims[i], &out) || out != kw.out[i]) {
      kn_te_unsupported(d, n, "output spatial dim %d that differs from the window's", i);
      return false;
    }
    w->s[i] = kw.stride[i];
    w->dl[i] = kw.dilation[i];
    w->pb[i] = kw.pad_begin[i];
    w->pe[i] = kw.pad_end[i];
    if (w->s[i] < 1 || w->dl[i] < 1 || w->pb[i] < 0 || w->pe[i] < 0) {
      kn_te_unsupported(d, n, "non-positive stride/dilation or negative pads");
      return false;
    }
  }
  return true;
}

/* Extent of the padded input the windows of spatial dim i read. */
static kn_expr *window_span(kn_te_ctx *c, const window *w, int i, kn_expr *out_dim) {
  kn_expr *last = kn_te_ix_mul(c, kn_te_ix_sub(c, out_dim, kn_te_ix(c, 1)), kn_te_ix(c, w->s[i]));
  return kn_te_ix_add(c, last, kn_te_ix(c, (w->k[i] - 1) * w->dl[i] + 1));
}

/* x itself when every window stays inside it, else the padded-input
 * compute over the spatial axes sp[0..nsp) (see the file comment). */
static kn_te_tensor *padded_input(kn_te_ctx *c, const kn_node *n, kn_te_tensor *x, const int *sp,
                                  const window *w, kn_expr *const *out_dims, kn_expr *pad_value) {
  kn_expr *shape[KN_TE_MAX_RANK];
  bool need = false;
  for (int a = 0; a < x->rank; a++) shape[a] = x->shape[a];
  for (int i = 0; i < w->nsp; i++) {
    kn_expr *span = window_span(c, w, i, out_dims[i]);
    int64_t sc, xc;
    bool inside = w->pb[i] == 0 && kn_te_ix_const(span, &sc) &&
                  kn_te_ix_const(x->shape[sp[i]], &xc) && sc <= xc;
    need |= !inside;
    shape[sp[i]] = span;
  }
  if (!need) return x;
  kn_te_tensor *xp = kn_te_stage(c, n, "pad", x->dtype, x->rank, shape);
  kn_expr *idx[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, xp, idx);
  kn_expr *inb = NULL;
  for (int i = 0; i < w->nsp; i++) {
    int a = sp[i];
    kn_expr *j = kn_te_ix_sub(c, idx[a], kn_te_ix(c, w->pb[i]));
    int64_t sc, xc;
    bool over =
        !(kn_te_ix_const(shape[a], &sc) && kn_te_ix_const(x->shape[a], &xc) && sc - w->pb[i] <= xc);
    if (w->pb[i] > 0) {
      inb = kn_te_and(c, inb, kn_e_bin(c->ec, KN_E_LE, kn_te_ix(c, 0), j));
      j = kn_te_ix_max(c, j, kn_te_ix(c, 0));
    }
    if (over) {
      inb = kn_te_and(c, inb, kn_e_bin(c->ec, KN_E_LT, j, x->shape[a]));
      j = kn_te_ix_min(c, j, kn_te_ix_sub(c, x->shape[a], kn_te_ix(c, 1)));
    }
    idx[a] = j;
  }
  kn_expr *v = kn_te_at(c, x, idx);
  xp->body = inb ? kn_e_select(c->ec, inb, v, pad_value) : v;
  return xp;
}

/* ---- convolution ---- */

/* Conv (NCHW, 1-3 spatial dims) and kiln.ConvNHWC (2-D). */
static kn_te_tensor *conv_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  bool nhwc = n->op == KN_OP_CONV_NHWC;
  kn_te_tensor *x = in[0], *wt = n->n_in > 1 ? in[1] : NULL, *bias = n->n_in > 2 ? in[2] : NULL;
  if (!wt) return kn_te_unsupported(d, n, "missing weights");
  int r = x->rank, nsp = r - 2;
  /* per-sample weights [N,KH,KW,C/g,M] (kiln.ConvNHWC only): wo = 1 shifts
   * every weight dim, and the batch index leads */
  int wo = nhwc && wt->rank == r + 1;
  if (nsp < 1 || nsp > MAX_SP || (nhwc && nsp != 2) || wt->rank != r + wo)
    return kn_te_unsupported(d, n, "input/weight rank %d/%d", r, wt->rank);
  if (!kn_dtype_is_float(x->dtype) || wt->dtype != x->dtype || (bias && bias->dtype != x->dtype))
    return kn_te_unsupported(d, n, "dtype %s", kn_dtype_name(x->dtype));
  /* 16-bit floats: the sum in f32 (kn_te_acc_dtype), rounded once by the epilogue */
  kn_dtype acc_t = kn_te_acc_dtype(x->dtype);
  bool widen = acc_t != x->dtype;
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, bias || widen ? "acc" : NULL);
  if (o->rank != r || o->dtype != x->dtype) return kn_te_unsupported(d, n, "output shape");
  o->dtype = acc_t;
  int ch_axis = nhwc ? r - 1 : 1;
  int sp[MAX_SP], wsp[MAX_SP]; /* spatial axes of x/out and of the weights */
  for (int i = 0; i < nsp; i++) {
    sp[i] = nhwc ? 1 + i : 2 + i;
    wsp[i] = nhwc ? wo + i : 2 + i;
  }
  int w_ic = nhwc ? 2 + wo : 1, w_m = nhwc ? 3 + wo : 0;
  int64_t C, M, Cg, group = kn_node_attr_int(n, "group", 1), kernel[MAX_SP];
  if (!kn_te_ix_const(x->shape[ch_axis], &C) || !kn_te_ix_const(wt->shape[w_m], &M) ||
      !kn_te_ix_const(wt->shape[w_ic], &Cg))
    return kn_te_unsupported(d, n, "batch-sized channels");
  if (group < 1 || C % group || M % group || Cg != C / group)
    return kn_te_unsupported(d, n, "group %lld with %lld input / %lld output channels",
                             (long long)group, (long long)C, (long long)M);
  int64_t oc;
  if (!kn_te_ix_const(o->shape[ch_axis], &oc) || oc != M)
    return kn_te_unsupported(d, n, "output channels");
  if (bias && (bias->rank != 1 || !kn_e_equal(bias->shape[0], wt->shape[w_m])))
    return kn_te_unsupported(d, n, "bias shape");
  int nks;
  const int64_t *ks = kn_node_attr_ints(n, "kernel_shape", &nks);
  window w = {.nsp = nsp};
  for (int i = 0; i < nsp; i++) {
    if (!kn_te_ix_const(wt->shape[wsp[i]], &kernel[i]) ||
        (ks && (nks != nsp || ks[i] != kernel[i])))
      return kn_te_unsupported(d, n, "kernel_shape that differs from the weights");
    w.k[i] = kernel[i];
  }
  kn_expr *in_dims[MAX_SP], *out_dims[MAX_SP];
  for (int i = 0; i < nsp; i++) {
    in_dims[i] = x->shape[sp[i]];
    out_dims[i] = o->shape[sp[i]];
  }
  if (!resolve_window(n, in_dims, out_dims, false, &w, d)) return NULL;
  kn_te_tensor *xp = padded_input(c, n, x, sp, &w, out_dims, kn_te_num(c, x->dtype, 0));

  /* reduction axes: the kernel taps, then the group's input channels */
  static const char *tap_names[MAX_SP] = {"kh", "kw", "kd"};
  kn_var *rv[MAX_SP + 1];
  kn_expr *rext[MAX_SP + 1];
  int nr = 0;
  for (int i = 0; i < nsp; i++) {
    rv[nr] = kn_var_new(ec, nsp == 1 ? "kw" : tap_names[i]);
    rext[nr++] = kn_te_ix(c, kernel[i]);
  }
  kn_expr *ic = kn_te_ix(c, 0);
  if (Cg > 1) {
    rv[nr] = kn_var_new(ec, "ic");
    ic = kn_e_var(ec, rv[nr]);
    rext[nr++] = kn_te_ix(c, Cg);
  }
  kn_expr *idx[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  kn_expr *m = idx[ch_axis];
  kn_expr *ch = ic; /* input channel: g * Cg + ic with g = m / (M / group) */
  if (group > 1)
    ch = kn_te_ix_add(
        c, kn_te_ix_mul(c, kn_te_ix_div(c, m, kn_te_ix(c, M / group)), kn_te_ix(c, Cg)), ic);
  kn_expr *xi[KN_TE_MAX_RANK], *wi[KN_TE_MAX_RANK];
  memcpy(xi, idx, sizeof xi);
  xi[ch_axis] = ch;
  wi[w_ic] = ic;
  wi[w_m] = m;
  if (wo) wi[0] = idx[0];
  for (int i = 0; i < nsp; i++) {
    kn_expr *tap = kn_e_var(ec, rv[i]);
    xi[sp[i]] = kn_te_ix_add(c, kn_te_ix_mul(c, idx[sp[i]], kn_te_ix(c, w.s[i])),
                             kn_te_ix_mul(c, tap, kn_te_ix(c, w.dl[i])));
    wi[wsp[i]] = tap;
  }
  kn_expr *prod = kn_e_mul(ec, kn_e_cast(ec, acc_t, kn_te_at(c, xp, xi)), kn_e_cast(ec, acc_t, kn_te_at(c, wt, wi)));
  o->body = kn_e_reduce(ec, KN_RED_SUM, rv, rext, nr, prod);
  if (!bias && !widen) return o;
  kn_te_tensor *out = kn_te_out_compute(c, n, 0, NULL);
  kn_expr *oi[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, out, oi);
  kn_expr *v = kn_te_at(c, o, oi);
  if (bias) v = kn_e_add(ec, v, kn_e_cast(ec, acc_t, kn_te_at(c, bias, &oi[ch_axis])));
  out->body = kn_e_cast(ec, x->dtype, v);
  return out;
}

/* ---- MatMul / Gemm ---- */

/* MatMul with numpy batching; 1-D operands get a 1 prepended (A) or
 * appended (B) and that dim is squeezed from the output, as in ONNX. */
static kn_te_tensor *matmul_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor *a, kn_te_tensor *b,
                                kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  int ra = a->rank, rb = b->rank;
  if (ra < 1 || rb < 1) return kn_te_unsupported(d, n, "rank-0 operands");
  if (a->dtype != b->dtype || a->dtype == KN_DT_BOOL)
    return kn_te_unsupported(d, n, "dtypes %s x %s", kn_dtype_name(a->dtype),
                             kn_dtype_name(b->dtype));
  kn_dtype acc_t = kn_te_acc_dtype(a->dtype); /* 16-bit floats: the sum in f32, rounded once */
  bool widen = acc_t != a->dtype;
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, widen ? "acc" : NULL);
  int ro = o->rank;
  int batch = ro - (ra > 1) - (rb > 1); /* leading (broadcast) dims of the output */
  if (batch < 0 || ra - 2 > batch || rb - 2 > batch || o->dtype != a->dtype)
    return kn_te_unsupported(d, n, "output shape");
  kn_expr *K = a->shape[ra - 1];
  if (!kn_e_equal(K, b->shape[rb > 1 ? rb - 2 : 0]))
    return kn_te_unsupported(d, n, "inner dims that differ");
  kn_expr *idx[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  kn_var *kv = kn_var_new(ec, "k");
  kn_expr *k = kn_e_var(ec, kv);
  kn_expr *ai[KN_TE_MAX_RANK + 1], *bi[KN_TE_MAX_RANK + 1];
  /* batch dims of each operand align to the right of the output's */
  for (int i = 0; i < ra - 2; i++) ai[i] = idx[batch - (ra - 2) + i];
  for (int i = 0; i < rb - 2; i++) bi[i] = idx[batch - (rb - 2) + i];
  for (int i = 0; i < ra - 2; i++) {
    int64_t e;
    if (kn_te_ix_const(a->shape[i], &e) && e == 1) ai[i] = kn_te_ix(c, 0);
  }
  for (int i = 0; i < rb - 2; i++) {
    int64_t e;
    if (kn_te_ix_const(b->shape[i], &e) && e == 1) bi[i] = kn_te_ix(c, 0);
  }
  if (ra > 1) ai[ra - 2] = idx[batch];
  ai[ra - 1] = k;
  if (rb > 1) {
    bi[rb - 2] = k;
    bi[rb - 1] = idx[ro - 1];
  } else {
    bi[0] = k;
  }
  kn_expr *prod = kn_e_mul(ec, kn_e_cast(ec, acc_t, kn_te_at(c, a, ai)), kn_e_cast(ec, acc_t, kn_te_at(c, b, bi)));
  o->dtype = acc_t;
  o->body = kn_e_reduce(ec, KN_RED_SUM, &kv, &K, 1, prod);
  if (!widen) return o;
  kn_te_tensor *out = kn_te_out_compute(c, n, 0, NULL);
  kn_expr *oi[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, out, oi);
  out->body = kn_e_cast(ec, a->dtype, kn_te_at(c, o, oi));
  return out;
}

static kn_te_tensor *gemm_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  kn_te_tensor *a = in[0], *b = n->n_in > 1 ? in[1] : NULL, *cc = n->n_in > 2 ? in[2] : NULL;
  if (!b || a->rank != 2 || b->rank != 2) return kn_te_unsupported(d, n, "operands of rank != 2");
  if (!kn_dtype_is_float(a->dtype) || b->dtype != a->dtype || (cc && cc->dtype != a->dtype))
    return kn_te_unsupported(d, n, "dtype %s", kn_dtype_name(a->dtype));
  bool ta = kn_node_attr_int(n, "transA", 0) != 0, tb = kn_node_attr_int(n, "transB", 0) != 0;
  float alpha = kn_node_attr_float(n, "alpha", 1.0f), beta = kn_node_attr_float(n, "beta", 1.0f);
  if (cc && beta == 0) cc = NULL;
  if (cc && cc->rank > 2) return kn_te_unsupported(d, n, "C of rank > 2");
  kn_dtype acc_t = kn_te_acc_dtype(a->dtype); /* 16-bit floats: the sum in f32, rounded once */
  bool epilogue = cc || alpha != 1.0f || acc_t != a->dtype;
  kn_te_tensor *acc = kn_te_out_compute(c, n, 0, epilogue ? "acc" : NULL);
  if (acc->rank != 2 || acc->dtype != a->dtype) return kn_te_unsupported(d, n, "output shape");
  acc->dtype = acc_t;
  kn_expr *K = a->shape[ta ? 0 : 1];
  if (!kn_e_equal(K, b->shape[tb ? 1 : 0]))
    return kn_te_unsupported(d, n, "inner dims that differ");
  kn_expr *idx[2];
  kn_te_axis_exprs(c, acc, idx);
  kn_var *kv = kn_var_new(ec, "k");
  kn_expr *k = kn_e_var(ec, kv);
  kn_expr *ai[2] = {ta ? k : idx[0], ta ? idx[0] : k};
  kn_expr *bi[2] = {tb ? idx[1] : k, tb ? k : idx[1]};
  kn_expr *prod = kn_e_mul(ec, kn_e_cast(ec, acc_t, kn_te_at(c, a, ai)), kn_e_cast(ec, acc_t, kn_te_at(c, b, bi)));
  acc->body = kn_e_reduce(ec, KN_RED_SUM, &kv, &K, 1, prod);
  if (!epilogue) return acc;
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  kn_expr *oi[2];
  kn_te_axis_exprs(c, o, oi);
  kn_expr *v = kn_te_at(c, acc, oi);
  if (alpha != 1.0f) v = kn_e_mul(ec, kn_te_num(c, acc_t, alpha), v);
  if (cc) {
    kn_expr *cv = kn_e_cast(ec, acc_t, kn_te_bcast_at(c, cc, oi, 2));
    if (beta != 1.0f) cv = kn_e_mul(ec, kn_te_num(c, acc_t, beta), cv);
    v = kn_e_add(ec, v, cv);
  }
  o->body = kn_e_cast(ec, o->dtype, v);
  return o;
}

kn_te_tensor *kn_te_contraction(kn_te_ctx *c, const kn_node *n, int out, kn_te_tensor **in,
                                kn_diag *d) {
  if (out != 0) return kn_te_unsupported(d, n, "output %d", out);
  if (n->n_in < 2 || !in[0] || !in[1]) return kn_te_unsupported(d, n, "missing inputs");
  switch (n->op) {
  case KN_OP_CONV:
  case KN_OP_CONV_NHWC: return conv_def(c, n, in, d);
  case KN_OP_MATMUL: return matmul_def(c, n, in[0], in[1], d);
  case KN_OP_GEMM: return gemm_def(c, n, in, d);
  default: return kn_te_unsupported(d, n, "operator in the contraction library");
  }
}

/* ---- pools ---- */

/* Taps t in [0, k) of spatial dim i with lo <= o*s + t*d - pb < hi, as an
 * int64 expression (the average pool's divisor along that dim). */
static kn_expr *taps_in(kn_te_ctx *c, const window *w, int i, kn_expr *o, kn_expr *lo,
                        kn_expr *hi) {
  kn_expr *base = kn_te_ix_sub(c, kn_te_ix_mul(c, o, kn_te_ix(c, w->s[i])), kn_te_ix(c, w->pb[i]));
  kn_expr *dl = kn_te_ix(c, w->dl[i]);
  /* first tap: ceil((lo - base) / d), at least 0; last: floor((hi-1-base)/d), at most k-1 */
  kn_expr *first =
      kn_te_ix_div(c, kn_te_ix_add(c, kn_te_ix_sub(c, lo, base), kn_te_ix(c, w->dl[i] - 1)), dl);
  first = kn_te_ix_max(c, first, kn_te_ix(c, 0));
  kn_expr *last = kn_te_ix_div(c, kn_te_ix_sub(c, kn_te_ix_sub(c, hi, kn_te_ix(c, 1)), base), dl);
  last = kn_te_ix_min(c, last, kn_te_ix(c, w->k[i] - 1));
  return kn_te_ix_max(c, kn_te_ix_add(c, kn_te_ix_sub(c, last, first), kn_te_ix(c, 1)),
                      kn_te_ix(c, 0));
}

/* Whether every window of dim i lies inside [lo, hi) (constants only). */
static bool windows_inside(const window *w, int i, int64_t out, int64_t lo, int64_t hi) {
  int64_t first = -w->pb[i];
  int64_t last = (out - 1) * w->s[i] - w->pb[i] + (w->k[i] - 1) * w->dl[i];
  return first >= lo && last < hi;
}

/* Lowest value of an integer dtype of at most 4 bytes (max pooling's padding). */
static int64_t int_lowest(kn_dtype t) {
  if (!kn_dtype_is_signed(t)) return 0;
  return -((int64_t)1 << (8 * kn_dtype_size(t) - 1));
}

static kn_te_tensor *pool_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor *x, kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  bool nhwc = n->op == KN_OP_MAX_POOL_NHWC || n->op == KN_OP_AVERAGE_POOL_NHWC;
  bool is_max = n->op == KN_OP_MAX_POOL || n->op == KN_OP_MAX_POOL_NHWC;
  int r = x->rank, nsp = r - 2;
  if (nsp < 1 || nsp > MAX_SP) return kn_te_unsupported(d, n, "input rank %d", r);
  bool int_max = is_max && kn_dtype_is_int(x->dtype) && kn_dtype_size(x->dtype) <= 4; /* max of integers */
  if (!kn_dtype_is_float(x->dtype) && !int_max)
    return kn_te_unsupported(d, n, "dtype %s", kn_dtype_name(x->dtype));
  if (is_max && kn_node_attr_int(n, "storage_order", 0) != 0)
    return kn_te_unsupported(d, n, "storage_order=1");
  int nk;
  const int64_t *ks = kn_node_attr_ints(n, "kernel_shape", &nk);
  if (!ks || nk != nsp) return kn_te_unsupported(d, n, "missing kernel_shape");
  bool include_pad = kn_node_attr_int(n, "count_include_pad", 0) != 0;
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, is_max ? NULL : "sum");
  if (o->rank != r || o->dtype != x->dtype) return kn_te_unsupported(d, n, "output shape");
  kn_dtype acc_t = is_max ? x->dtype : kn_te_acc_dtype(x->dtype); /* an average's sum in f32 */
  o->dtype = acc_t;
  int sp[MAX_SP];
  window w = {.nsp = nsp};
  kn_expr *in_dims[MAX_SP], *out_dims[MAX_SP];
  for (int i = 0; i < nsp; i++) {
    sp[i] = nhwc ? 1 + i : 2 + i;
    w.k[i] = ks[i];
    in_dims[i] = x->shape[sp[i]];
    out_dims[i] = o->shape[sp[i]];
  }
  if (!resolve_window(n, in_dims, out_dims, true, &w, d)) return NULL;
  kn_expr *pad_value = int_max ? kn_e_const_int(ec, x->dtype, int_lowest(x->dtype))
                               : kn_e_float(ec, x->dtype, is_max ? -__builtin_inf() : 0.0);
  kn_te_tensor *xp = padded_input(c, n, x, sp, &w, out_dims, pad_value);
  static const char *tap_names[MAX_SP] = {"kh", "kw", "kd"};
  kn_var *rv[MAX_SP];
  kn_expr *rext[MAX_SP];
  kn_expr *idx[KN_TE_MAX_RANK], *xi[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  memcpy(xi, idx, sizeof xi);
  for (int i = 0; i < nsp; i++) {
    rv[i] = kn_var_new(ec, nsp == 1 ? "kw" : tap_names[i]);
    rext[i] = kn_te_ix(c, w.k[i]);
    xi[sp[i]] = kn_te_ix_add(c, kn_te_ix_mul(c, idx[sp[i]], kn_te_ix(c, w.s[i])),
                             kn_te_ix_mul(c, kn_e_var(ec, rv[i]), kn_te_ix(c, w.dl[i])));
  }
  o->body = kn_e_reduce(ec, is_max ? KN_RED_MAX : KN_RED_SUM, rv, rext, nsp, kn_e_cast(ec, acc_t, kn_te_at(c, xp, xi)));
  if (is_max) return o;

  /* average: divide by the taps counted (in bounds, or in the padded
   * extent with count_include_pad), an integer expression per dim */
  kn_te_tensor *out = kn_te_out_compute(c, n, 0, NULL);
  kn_expr *oi[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, out, oi);
  kn_expr *count = kn_te_ix(c, 1);
  for (int i = 0; i < nsp; i++) {
    kn_expr *lo = kn_te_ix(c, include_pad ? -w.pb[i] : 0);
    kn_expr *hi = include_pad ? kn_te_ix_add(c, in_dims[i], kn_te_ix(c, w.pe[i])) : in_dims[i];
    int64_t loc, hic, outc;
    kn_te_ix_const(lo, &loc);
    kn_expr *taps;
    if (kn_te_ix_const(hi, &hic) && kn_te_ix_const(out_dims[i], &outc) &&
        windows_inside(&w, i, outc, loc, hic))
      taps = kn_te_ix(c, w.k[i]);
    else
      taps = taps_in(c, &w, i, oi[sp[i]], lo, hi);
    count = kn_te_ix_mul(c, count, taps);
  }
  out->body = kn_e_cast(ec, x->dtype, kn_e_div(ec, kn_te_at(c, o, oi), kn_e_cast(ec, acc_t, count)));
  return out;
}

/* GlobalAveragePool / GlobalMaxPool (NCHW, any spatial rank) and
 * kiln.GlobalAveragePoolNHWC: a stage over (n, c), then the epilogue with
 * the size-1 spatial dims (and the average's division). */
static kn_te_tensor *global_pool_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor *x, kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  bool nhwc = n->op == KN_OP_GLOBAL_AVERAGE_POOL_NHWC;
  bool is_max = n->op == KN_OP_GLOBAL_MAX_POOL;
  int r = x->rank;
  if (r < 3) return kn_te_unsupported(d, n, "input rank %d", r);
  if (!kn_dtype_is_float(x->dtype))
    return kn_te_unsupported(d, n, "dtype %s", kn_dtype_name(x->dtype));
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  if (o->rank != r || o->dtype != x->dtype) return kn_te_unsupported(d, n, "output shape");
  bool red[KN_TE_MAX_RANK] = {0};
  for (int i = 1; i < r; i++) red[i] = nhwc ? i < r - 1 : i > 1;
  kn_te_red rs;
  kn_dtype acc_t = is_max ? x->dtype : kn_te_acc_dtype(x->dtype); /* an average's sum in f32 */
  kn_te_red_begin(c, n, is_max ? "max" : "sum", acc_t, r, x->shape, red, &rs);
  kn_te_red_end(c, &rs, is_max ? KN_RED_MAX : KN_RED_SUM, kn_e_cast(ec, acc_t, kn_te_at(c, x, rs.src)));
  kn_expr *idx[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  kn_expr *v = kn_te_red_at(c, &rs, idx);
  o->body = is_max ? v : kn_e_cast(ec, x->dtype, kn_e_div(ec, v, kn_e_cast(ec, acc_t, kn_te_red_count(c, &rs))));
  return o;
}

kn_te_tensor *kn_te_pool(kn_te_ctx *c, const kn_node *n, int out, kn_te_tensor **in, kn_diag *d) {
  if (out != 0) return kn_te_unsupported(d, n, "output %d", out);
  if (n->n_in < 1 || !in[0]) return kn_te_unsupported(d, n, "missing input 0");
  switch (n->op) {
  case KN_OP_GLOBAL_AVERAGE_POOL:
  case KN_OP_GLOBAL_MAX_POOL:
  case KN_OP_GLOBAL_AVERAGE_POOL_NHWC: return global_pool_def(c, n, in[0], d);
  default: return pool_def(c, n, in[0], d);
  }
}
