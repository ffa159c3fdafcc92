/* te_ops_spatial_sample.c — compute definitions of the sampling ops of the
 * spatial family (spatial.h): GridSample and AffineGrid.
 *
 *  - GridSample: per spatial axis the source coordinate is a float64
 *    expression of a grid load (denormalised, rounded to X's dtype as the
 *    reference stores it, then border-clamped or reflected); nearest is one
 *    load, linear / cubic one reduction stage over 2 / 4 taps per axis,
 *      acc[n, c, o...] = sum_t prod_i w_i(t_i) * pixel(n, c, pos(t)...)
 *    where pixel is 0 outside (zeros), clamped (border) or reflected
 *    (reflection); every index is clamped so loads stay in bounds.
 *  - AffineGrid: out[n, o..., j] = theta[n, j, nsp] + sum_k theta[n, j, k] *
 *    base_k(o), the base coordinates computed from the output indices. */
#include <string.h>

#include "ir/shape/spatial.h"
#include "ir/te/te_ops.h"

static kn_expr *f64(kn_te_ctx *c, double v) { return kn_e_float(c->ec, KN_DT_F64, v); }
static kn_expr *to_f64(kn_te_ctx *c, kn_expr *e) { return kn_e_cast(c->ec, KN_DT_F64, e); }
static kn_expr *lt(kn_te_ctx *c, kn_expr *a, kn_expr *b) { return kn_e_bin(c->ec, KN_E_LT, a, b); }
static kn_expr *le(kn_te_ctx *c, kn_expr *a, kn_expr *b) { return kn_e_bin(c->ec, KN_E_LE, a, b); }
/* Rounds a float64 expression to dtype t (and back), as a stored value. */
static kn_expr *as_dtype(kn_te_ctx *c, kn_dtype t, kn_expr *v) {
  return t == KN_DT_F64 ? v : to_f64(c, kn_e_cast(c->ec, t, v));
}

/* Reflects v into [lo, hi] by its nearer border, repeatedly. */
static kn_expr *reflect(kn_te_ctx *c, kn_expr *v, double lo, double hi) {
  kn_expr_ctx *ec = c->ec;
  double range = hi - lo;
  if (range <= 0) return f64(c, lo);
  kn_expr *below = lt(c, v, f64(c, lo)), *above = lt(c, f64(c, hi), v);
  kn_expr *dx = kn_e_select(ec, below, kn_e_sub(ec, f64(c, lo), v), kn_e_sub(ec, v, f64(c, hi)));
  kn_expr *k = kn_e_call1(ec, KN_FN_FLOOR, kn_e_div(ec, dx, f64(c, range)));
  kn_expr *r = kn_e_sub(ec, dx, kn_e_mul(ec, k, f64(c, range)));
  kn_expr *half = kn_e_mul(ec, k, f64(c, 0.5));
  kn_expr *even = kn_e_bin(ec, KN_E_EQ, kn_e_call1(ec, KN_FN_FLOOR, half), half);
  kn_expr *from_lo = kn_e_add(ec, f64(c, lo), r), *from_hi = kn_e_sub(ec, f64(c, hi), r);
  kn_expr *low = kn_e_select(ec, even, from_lo, from_hi), *high = kn_e_select(ec, even, from_hi, from_lo);
  return kn_e_select(ec, below, low, kn_e_select(ec, above, high, v));
}

typedef enum { GS_ZEROS, GS_BORDER, GS_REFLECTION } gs_padding;

/* Index (int64, in bounds) of the integer float64 position p along an axis
 * of size dim; ANDs "reads X" into *valid for zeros padding. */
static kn_expr *gs_index(kn_te_ctx *c, kn_expr *p, int64_t dim, gs_padding pad, double lo, double hi,
                         kn_expr **valid) {
  if (pad == GS_ZEROS)
    *valid = kn_te_and(c, *valid, kn_e_bin(c->ec, KN_E_AND, le(c, f64(c, 0), p), le(c, p, f64(c, (double)(dim - 1)))));
  if (pad == GS_REFLECTION) p = reflect(c, p, lo, hi);
  /* trunc toward zero, then clamp (the clamp also makes NaN-free indices) */
  return kn_e_cast(c->ec, KN_DT_I64, kn_te_clamp_num(c, p, 0, (double)(dim - 1)));
}

static kn_te_tensor *grid_sample_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  kn_te_tensor *x = in[0], *grid = in[1];
  if (!grid) return kn_te_unsupported(d, n, "missing grid");
  const char *mode_s = kn_node_attr_string(n, "mode", "linear");
  const char *pad_s = kn_node_attr_string(n, "padding_mode", "zeros");
  int mode = !strcmp(mode_s, "nearest") ? 0 : (!strcmp(mode_s, "linear") || !strcmp(mode_s, "bilinear")) ? 1
             : (!strcmp(mode_s, "cubic") || !strcmp(mode_s, "bicubic")) ? 2 : -1;
  if (mode < 0) return kn_te_unsupported(d, n, "mode '%s'", mode_s);
  gs_padding pad = !strcmp(pad_s, "zeros") ? GS_ZEROS : !strcmp(pad_s, "border") ? GS_BORDER : GS_REFLECTION;
  if (pad == GS_REFLECTION && strcmp(pad_s, "reflection")) return kn_te_unsupported(d, n, "padding_mode '%s'", pad_s);
  bool align = kn_node_attr_int(n, "align_corners", 0) != 0;
  int nsp = x->rank - 2;
  if (nsp < 1 || nsp > 3 || grid->rank != x->rank) return kn_te_unsupported(d, n, "rank %d", x->rank);
  int64_t dims[3];
  for (int i = 0; i < nsp; i++)
    if (!kn_te_ix_const(x->shape[2 + i], &dims[i]) || dims[i] < 1)
      return kn_te_unsupported(d, n, "batch-sized or empty spatial dims");
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  kn_expr *oi[KN_TE_MAX_RANK], *xi[KN_TE_MAX_RANK], *gi[KN_TE_MAX_RANK], *valid = NULL, *weight = NULL;
  kn_te_axis_exprs(c, o, oi);
  kn_var *tv[3];
  kn_expr *text[3];
  int nt = 0;
  xi[0] = oi[0];
  xi[1] = oi[1];
  gi[0] = oi[0];
  for (int i = 0; i < nsp; i++) gi[1 + i] = oi[2 + i];
  for (int i = 0; i < nsp; i++) {
    gi[nsp + 1] = kn_te_ix(c, nsp - 1 - i); /* grid holds (x, y, z): reversed */
    kn_expr *g = to_f64(c, kn_te_at(c, grid, gi));
    double len = (double)dims[i], lo = align ? 0 : -0.5, hi = align ? len - 1 : len - 0.5;
    kn_expr *v = align ? kn_e_mul(ec, kn_e_div(ec, kn_e_add(ec, g, f64(c, 1)), f64(c, 2)), f64(c, len - 1))
                       : kn_e_div(ec, kn_e_sub(ec, kn_e_mul(ec, kn_e_add(ec, g, f64(c, 1)), f64(c, len)), f64(c, 1)),
                                  f64(c, 2));
    v = as_dtype(c, x->dtype, v);
    if (mode == 0) v = kn_e_call1(ec, KN_FN_ROUND, v);
    if (pad == GS_BORDER)
      v = kn_e_select(ec, kn_e_bin(ec, KN_E_OR, lt(c, v, f64(c, lo)), lt(c, f64(c, hi), v)),
                      kn_te_clamp_num(c, v, 0, len - 1), v);
    if (pad == GS_REFLECTION) v = as_dtype(c, x->dtype, reflect(c, v, lo, hi));
    if (mode == 0) {
      kn_expr *p = to_f64(c, kn_e_cast(ec, KN_DT_I64, kn_te_clamp_num(c, v, -1e15, 1e15))); /* trunc */
      xi[2 + i] = gs_index(c, p, dims[i], pad, lo, hi, &valid);
      continue;
    }
    tv[nt] = kn_var_new(ec, "tap");
    text[nt] = kn_te_ix(c, mode == 1 ? 2 : 4);
    kn_expr *j = kn_e_var(ec, tv[nt++]);
    kn_expr *p = kn_e_add(ec, kn_e_call1(ec, KN_FN_FLOOR, v),
                          to_f64(c, kn_te_ix_sub(c, j, kn_te_ix(c, mode == 2 ? 1 : 0))));
    kn_expr *w = kn_te_interp_weight(c, kn_e_sub(ec, p, v), mode == 2, -0.75);
    weight = weight ? kn_e_mul(ec, weight, w) : w;
    xi[2 + i] = gs_index(c, p, dims[i], pad, lo, hi, &valid);
  }
  kn_expr *val = kn_te_at(c, x, xi);
  if (valid) val = kn_e_select(ec, valid, val, kn_te_num(c, x->dtype, 0));
  if (mode == 0) {
    o->body = val;
    return o;
  }
  o->body = kn_e_reduce(ec, KN_RED_SUM, tv, text, nt, kn_e_mul(ec, kn_e_cast(ec, x->dtype, weight), val));
  return o;
}

static kn_te_tensor *affine_grid_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor *theta) {
  kn_expr_ctx *ec = c->ec;
  bool align = kn_node_attr_int(n, "align_corners", 0) != 0;
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  int nsp = o->rank - 2;
  kn_expr *oi[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, oi);
  kn_expr *ti[3] = {oi[0], oi[nsp + 1], kn_te_ix(c, nsp)};
  kn_expr *acc = to_f64(c, kn_te_at(c, theta, ti));
  for (int k = 0; k < nsp; k++) {
    int axis = nsp - 1 - k; /* component k (x, y, z) runs along spatial axis nsp-1-k */
    int64_t len;
    KN_ASSERT(kn_te_ix_const(o->shape[1 + axis], &len), "AffineGrid sizes are constants");
    kn_expr *i = to_f64(c, oi[1 + axis]);
    kn_expr *base = align ? (len == 1 ? f64(c, -1) : kn_e_add(ec, f64(c, -1), kn_e_mul(ec, i, f64(c, 2.0 / (double)(len - 1)))))
                          : kn_e_add(ec, f64(c, -1.0 + 1.0 / (double)len), kn_e_mul(ec, i, f64(c, 2.0 / (double)len)));
    ti[2] = kn_te_ix(c, k);
    acc = kn_e_add(ec, acc, kn_e_mul(ec, to_f64(c, kn_te_at(c, theta, ti)), base));
  }
  o->body = kn_e_cast(ec, o->dtype, acc);
  return o;
}

kn_te_tensor *kn_te_spatial_sample(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  switch (n->op) {
  case KN_OP_GRID_SAMPLE: return grid_sample_def(c, n, in, d);
  case KN_OP_AFFINE_GRID: return affine_grid_def(c, n, in[0]);
  default: return kn_te_unpool_roi(c, n, in, d);
  }
}
