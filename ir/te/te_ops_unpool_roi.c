/* te_ops_unpool_roi.c — compute definitions of MaxUnpool and RoiAlign
 * (spatial family, spatial.h), matching ref_eval_unpool_roi.c.
 *
 *  - MaxUnpool, in gather form: output element o of image (n, c) is the sum
 *    over the input positions i of that image of X[n, c, i] where
 *    I[n, c, i] == flat(o) (flat over the unpooled shape the indices
 *    address), 0 where none matches or o lies past that shape (a larger
 *    output_shape). Indices from MaxPool stay inside their image, which is
 *    what limits the search to it; duplicate indices add up (the reference
 *    keeps the last one), which MaxPool never produces.
 *  - RoiAlign: one reduction over the sampling grid (sampling_ratio must be
 *    a constant > 0: the grid is the reduction extent) and the 2 x 2 corner
 *    taps; coordinates are float64 expressions of the roi loads; a sample
 *    outside the image has weight 0 (and clamped, in-bounds indices). avg
 *    sums weight * pixel / count, max takes the largest weighted corner. */
#include <string.h>

#include "ir/shape/spatial.h"
#include "ir/te/te_ops.h"

static kn_expr *f64(kn_te_ctx *c, double v) { return kn_e_float(c->ec, KN_DT_F64, v); }
static kn_expr *to_f64(kn_te_ctx *c, kn_expr *e) { return kn_e_cast(c->ec, KN_DT_F64, e); }

static kn_te_tensor *max_unpool_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  kn_te_tensor *x = in[0], *ind = in[1];
  if (!ind) return kn_te_unsupported(d, n, "missing indices");
  int r = x->rank, nsp = r - 2;
  int np = 0, ns = 0, nk = 0;
  const int64_t *pads = kn_node_attr_ints(n, "pads", &np);
  const int64_t *st = kn_node_attr_ints(n, "strides", &ns);
  const int64_t *ks = kn_node_attr_ints(n, "kernel_shape", &nk);
  if (!ks || nk != nsp) return kn_te_unsupported(d, n, "kernel_shape");
  int64_t in_dims[KN_MAX_RANK], inf[KN_MAX_RANK];
  for (int i = 1; i < r; i++)
    if (!kn_te_ix_const(x->shape[i], &in_dims[i])) return kn_te_unsupported(d, n, "batch-sized non-batch dims");
  inf[1] = in_dims[1];
  for (int i = 0; i < nsp; i++) {
    int64_t stride = st && i < ns ? st[i] : 1;
    int64_t pb = pads && np == 2 * nsp ? pads[i] : 0, pe = pads && np == 2 * nsp ? pads[nsp + i] : 0;
    inf[2 + i] = (in_dims[2 + i] - 1) * stride + ks[i] - pb - pe;
  }
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  kn_expr *oi[KN_TE_MAX_RANK], *xi[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, oi);
  /* flat index of o in the unpooled shape [N, C, inf...] */
  kn_expr *flat = oi[0], *inside = NULL;
  for (int a = 1; a < r; a++) {
    flat = kn_te_ix_add(c, kn_te_ix_mul(c, flat, kn_te_ix(c, inf[a])), oi[a]);
    if (a >= 2) inside = kn_te_and(c, inside, kn_te_ix_in_range(c, oi[a], kn_te_ix(c, inf[a])));
  }
  kn_var *rv[KN_MAX_RANK];
  kn_expr *rext[KN_MAX_RANK];
  xi[0] = oi[0];
  xi[1] = oi[1];
  for (int i = 0; i < nsp; i++) {
    rv[i] = kn_var_new(ec, "p");
    rext[i] = kn_te_ix(c, in_dims[2 + i]);
    xi[2 + i] = kn_e_var(ec, rv[i]);
  }
  kn_expr *idx = kn_e_cast(ec, KN_DT_I64, kn_te_at(c, ind, xi));
  kn_expr *hit = kn_te_and(c, inside, kn_e_bin(ec, KN_E_EQ, idx, flat));
  kn_expr *val = kn_e_select(ec, hit, kn_te_at(c, x, xi), kn_te_num(c, x->dtype, 0));
  o->body = kn_e_reduce(ec, KN_RED_SUM, rv, rext, nsp, val);
  return o;
}

/* The float64 sample coordinate along one axis and its two corner indices
 * (clamped into [0, len-1]) and weights, as in the reference; ANDs "inside
 * the image" into *valid. tap selects the low (0) or high (1) corner. */
static void roi_axis(kn_te_ctx *c, kn_expr *coord, int64_t len, kn_expr *tap, kn_expr **valid, kn_expr **index,
                     kn_expr **weight) {
  kn_expr_ctx *ec = c->ec;
  kn_expr *in = kn_e_bin(ec, KN_E_AND, kn_e_bin(ec, KN_E_LE, f64(c, -1.0), coord),
                         kn_e_bin(ec, KN_E_LE, coord, f64(c, (double)len)));
  *valid = kn_te_and(c, *valid, in);
  kn_expr *v = kn_e_max_num(ec, coord, f64(c, 0));
  kn_expr *low = kn_e_call1(ec, KN_FN_FLOOR, v);
  kn_expr *at_end = kn_e_bin(ec, KN_E_LE, f64(c, (double)(len - 1)), low);
  kn_expr *last = f64(c, (double)(len - 1));
  low = kn_e_select(ec, at_end, last, low);
  kn_expr *high = kn_e_select(ec, at_end, last, kn_e_add(ec, low, f64(c, 1)));
  v = kn_e_select(ec, at_end, last, v);
  kn_expr *l = kn_e_sub(ec, v, low), *h = kn_e_sub(ec, f64(c, 1), l);
  kn_expr *is_high = kn_e_bin(ec, KN_E_EQ, tap, kn_te_ix(c, 1));
  *weight = kn_e_select(ec, is_high, l, h);
  kn_expr *pos = kn_te_clamp_num(c, kn_e_select(ec, is_high, high, low), 0, (double)(len - 1));
  *index = kn_e_cast(ec, KN_DT_I64, pos);
}

static kn_te_tensor *roi_align_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  kn_te_tensor *x = in[0], *rois = in[1], *bi = in[2];
  if (!rois || !bi) return kn_te_unsupported(d, n, "missing rois or batch_indices");
  bool is_max = !strcmp(kn_node_attr_string(n, "mode", "avg"), "max");
  bool half_pixel = strcmp(kn_node_attr_string(n, "coordinate_transformation_mode", "half_pixel"),
                           "output_half_pixel") != 0;
  double scale = kn_node_attr_float(n, "spatial_scale", 1.0f), off = half_pixel ? 0.5 : 0.0;
  int64_t ratio = kn_node_attr_int(n, "sampling_ratio", 0);
  if (ratio <= 0)
    return kn_te_unsupported(d, n, "sampling_ratio %lld (adaptive grids depend on the roi values; a constant > 0 is)",
                             (long long)ratio);
  int64_t h, w;
  if (!kn_te_ix_const(x->shape[2], &h) || !kn_te_ix_const(x->shape[3], &w) || h < 1 || w < 1)
    return kn_te_unsupported(d, n, "batch-sized or empty spatial dims");
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  kn_expr *oi[4];
  kn_te_axis_exprs(c, o, oi);
  int64_t oh, ow;
  KN_ASSERT(kn_te_ix_const(o->shape[2], &oh) && kn_te_ix_const(o->shape[3], &ow), "RoiAlign output size");
  kn_expr *roi[4];
  for (int k = 0; k < 4; k++) {
    kn_expr *ri[2] = {oi[0], kn_te_ix(c, k)};
    roi[k] = kn_e_sub(ec, kn_e_mul(ec, to_f64(c, kn_te_at(c, rois, ri)), f64(c, scale)), f64(c, off));
  }
  kn_expr *rw = kn_e_sub(ec, roi[2], roi[0]), *rh = kn_e_sub(ec, roi[3], roi[1]);
  if (!half_pixel) {
    rw = kn_e_max(ec, rw, f64(c, 1));
    rh = kn_e_max(ec, rh, f64(c, 1));
  }
  kn_expr *bh = kn_e_div(ec, rh, f64(c, (double)oh)), *bw = kn_e_div(ec, rw, f64(c, (double)ow));
  kn_var *rv[4] = {kn_var_new(ec, "iy"), kn_var_new(ec, "ix"), kn_var_new(ec, "ty"), kn_var_new(ec, "tx")};
  kn_expr *rext[4] = {kn_te_ix(c, ratio), kn_te_ix(c, ratio), kn_te_ix(c, 2), kn_te_ix(c, 2)};
  kn_expr *iy = to_f64(c, kn_e_var(ec, rv[0])), *ix = to_f64(c, kn_e_var(ec, rv[1]));
  kn_expr *yy = kn_e_add(ec, kn_e_add(ec, roi[1], kn_e_mul(ec, to_f64(c, oi[2]), bh)),
                         kn_e_div(ec, kn_e_mul(ec, kn_e_add(ec, iy, f64(c, 0.5)), bh), f64(c, (double)ratio)));
  kn_expr *xx = kn_e_add(ec, kn_e_add(ec, roi[0], kn_e_mul(ec, to_f64(c, oi[3]), bw)),
                         kn_e_div(ec, kn_e_mul(ec, kn_e_add(ec, ix, f64(c, 0.5)), bw), f64(c, (double)ratio)));
  kn_expr *valid = NULL, *yi, *xi, *wy, *wx;
  roi_axis(c, yy, h, kn_e_var(ec, rv[2]), &valid, &yi, &wy);
  roi_axis(c, xx, w, kn_e_var(ec, rv[3]), &valid, &xi, &wx);
  kn_expr *weight = kn_e_select(ec, valid, kn_e_mul(ec, wy, wx), f64(c, 0));
  if (!is_max) weight = kn_e_div(ec, weight, f64(c, (double)(ratio * ratio)));
  kn_expr *b = kn_e_cast(ec, KN_DT_I64, kn_te_at(c, bi, &oi[0]));
  b = kn_te_ix_clamp(c, b, x->shape[0]);
  kn_expr *xidx[4] = {b, oi[1], yi, xi};
  kn_expr *val = kn_e_mul(ec, kn_e_cast(ec, x->dtype, weight), kn_te_at(c, x, xidx));
  o->body = kn_e_reduce(ec, is_max ? KN_RED_MAX : KN_RED_SUM, rv, rext, 4, val);
  return o;
}

kn_te_tensor *kn_te_unpool_roi(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  switch (n->op) {
  case KN_OP_MAX_UNPOOL: return max_unpool_def(c, n, in, d);
  case KN_OP_ROI_ALIGN: return roi_align_def(c, n, in, d);
  default: return kn_te_unsupported(d, n, "operator");
  }
}
