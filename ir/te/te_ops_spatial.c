/* te_ops_spatial.c — compute definitions of the spatial family (spatial.h):
 * Resize / Upsample, ConvTranspose, Col2Im, DepthToSpace, SpaceToDepth,
 * CenterCropPad here; the sampling ops in te_ops_spatial_sample.c.
 *
 * Shapes:
 *  - Resize: per resized axis, the source coordinate is computed in float64
 *    from the output index (same formulas and operation order as the
 *    reference, spatial_geom.c); nearest is one clamped load; linear / cubic
 *    are one reduction stage over the taps of every resized axis,
 *      acc[o...] = sum_t prod_a w_a(o_a, t_a) * X[clamp(pos_a(o_a, t_a))...]
 *    with the (normalised) weights as float64 expressions cast to X's dtype,
 *    then the tf_crop_and_resize extrapolation select as an epilogue.
 *    kiln.ResizeDeclared's run-time axes compute their scale from the scales
 *    (float32 -> float64) or sizes tensors, and read a run-time roi, in the
 *    same formulas; tests on scale * in become selects.
 *  - ConvTranspose and Col2Im gather over the output: one reduction stage
 *    over (input channels of the group,) kernel taps, reading
 *      X[.., q / s ..] where q = o + pad - k * dilation, q % s == 0, in range
 *    (select with 0, clamped index), then the bias epilogue.
 *  - the rearrangements are one injective compute each. */
#include <string.h>

#include "ir/shape/spatial.h"
#include "ir/te/te_ops.h"

/* ---- float64 expression helpers ---- */

static kn_expr *f64(kn_te_ctx *c, double v) { return kn_e_float(c->ec, KN_DT_F64, v); }
static kn_expr *to_f64(kn_te_ctx *c, kn_expr *e) { return kn_e_cast(c->ec, KN_DT_F64, e); }
static kn_expr *lt(kn_te_ctx *c, kn_expr *a, kn_expr *b) { return kn_e_bin(c->ec, KN_E_LT, a, b); }
static kn_expr *le(kn_te_ctx *c, kn_expr *a, kn_expr *b) { return kn_e_bin(c->ec, KN_E_LE, a, b); }
static kn_expr *or_(kn_te_ctx *c, kn_expr *a, kn_expr *b) {
  return a ? (b ? kn_e_bin(c->ec, KN_E_OR, a, b) : a) : b;
}

/* A graph constant as a concrete tensor (NULL when v < 0); false when v is
 * not a constant. */
static bool const_ref(kn_te_ctx *c, int v, kn_ref_tensor *t, const kn_ref_tensor **out) {
  *out = NULL;
  if (v < 0) return true;
  const kn_value *val = &c->g->values[v];
  if (!val->data || val->shape.batch_mask) return false;
  *t = (kn_ref_tensor){val->dtype, val->shape, val->data, NULL};
  *out = t;
  return true;
}

/* ---- Resize ---- */

/* The scale of axis a and the output length it implies (scale * in), as
 * float64 expressions, and its roi: constants, or what kiln.ResizeDeclared
 * reads at run time (spatial.h): entry scale_index of the scales tensor read
 * as float32 then float64 (what the reference reads), or the
 * keep_aspect_ratio_policy ratio of the sizes; roi entries as float64.
 * ow1 is the test ow == 1 (NULL when constant). */
typedef struct resize_scale {
  kn_expr *s, *ow, *ow_m1, *ow1;
  bool ow_is_1;     /* constant ow == 1 */
  kn_expr *r0, *r1; /* run-time roi start / end (NULL: g's constants) */
} resize_scale;

/* The run-time inputs of kiln.ResizeDeclared (NULL: constant or absent). */
typedef struct resize_runtime {
  kn_te_tensor *roi, *scales, *sizes;
} resize_runtime;

static kn_expr *load1(kn_te_ctx *c, kn_te_tensor *t, int64_t i) {
  kn_expr *idx[1] = {kn_te_ix(c, i)};
  return kn_te_at(c, t, idx);
}

static resize_scale resize_scale_of(kn_te_ctx *c, const kn_resize_geom *g, int a, const resize_runtime *rt) {
  kn_expr_ctx *ec = c->ec;
  double in = (double)g->in[a];
  resize_scale r = {0};
  if (g->runtime_roi && g->scale_index[a] >= 0) {
    KN_ASSERT(rt->roi, "run-time roi without a roi tensor");
    r.r0 = to_f64(c, load1(c, rt->roi, g->scale_index[a]));
    r.r1 = to_f64(c, load1(c, rt->roi, g->n_axes + g->scale_index[a]));
  }
  if (!g->runtime[a]) {
    double s = g->scale[a], ow = s * in;
    r.s = f64(c, s), r.ow = f64(c, ow), r.ow_m1 = f64(c, ow - 1), r.ow_is_1 = ow == 1;
    return r;
  }
  if (g->runtime_sizes) { /* min / max over the listed axes of sizes[i] / in */
    KN_ASSERT(rt->sizes, "run-time sizes without a sizes tensor");
    for (int i = 0; i < g->n_axes; i++) {
      kn_expr *ratio = kn_e_div(ec, to_f64(c, load1(c, rt->sizes, i)), f64(c, (double)g->in[g->axes[i]]));
      r.s = !r.s ? ratio : g->not_larger ? kn_e_min(ec, r.s, ratio) : kn_e_max(ec, r.s, ratio);
    }
  } else {
    KN_ASSERT(rt->scales, "run-time scale without a scales tensor");
    r.s = to_f64(c, kn_e_cast(ec, KN_DT_F32, load1(c, rt->scales, g->scale_index[a])));
  }
  r.ow = kn_e_mul(ec, r.s, f64(c, in));
  r.ow_m1 = kn_e_sub(ec, r.ow, f64(c, 1));
  r.ow1 = kn_e_bin(ec, KN_E_EQ, r.ow, f64(c, 1));
  return r;
}

/* `one` where ow == 1, else `other`. */
static kn_expr *if_ow1(kn_te_ctx *c, const resize_scale *r, kn_expr *one, kn_expr *other) {
  if (r->ow1) return kn_e_select(c->ec, r->ow1, one, other);
  return r->ow_is_1 ? one : other;
}

/* Source coordinate (float64) of output index o along axis a; sets *extrap
 * to the tf_crop_and_resize out-of-range test (else leaves it NULL). */
static kn_expr *resize_coord(kn_te_ctx *c, const kn_resize_geom *g, int a, const resize_scale *r, kn_expr *o,
                             kn_expr **extrap) {
  kn_expr_ctx *ec = c->ec;
  kn_expr *y = to_f64(c, o);
  double in = (double)g->in[a];
  kn_expr *half_pixel = kn_e_sub(ec, kn_e_div(ec, kn_e_add(ec, y, f64(c, 0.5)), r->s), f64(c, 0.5));
  switch (g->ctm) {
  case KN_CTM_ALIGN_CORNERS:
    return if_ow1(c, r, f64(c, 0), kn_e_div(ec, kn_e_mul(ec, y, f64(c, in - 1)), r->ow_m1));
  case KN_CTM_ASYMMETRIC: return kn_e_div(ec, y, r->s);
  case KN_CTM_TF_CROP_AND_RESIZE: {
    kn_expr *x;
    if (r->r0) { /* as below, in the reference's operation order */
      kn_expr *span = kn_e_sub(ec, r->r1, r->r0);
      x = if_ow1(c, r, kn_e_div(ec, kn_e_mul(ec, span, f64(c, in - 1)), f64(c, 2)),
                 kn_e_div(ec, kn_e_mul(ec, kn_e_mul(ec, y, span), f64(c, in - 1)), r->ow_m1));
      x = kn_e_add(ec, x, kn_e_mul(ec, r->r0, f64(c, in - 1)));
    } else {
      double r0 = g->roi_start[a], r1 = g->roi_end[a];
      x = if_ow1(c, r, f64(c, (r1 - r0) * (in - 1) / 2),
                 kn_e_div(ec, kn_e_mul(ec, kn_e_mul(ec, y, f64(c, r1 - r0)), f64(c, in - 1)), r->ow_m1));
      x = kn_e_add(ec, x, f64(c, r0 * (in - 1)));
    }
    *extrap = kn_e_bin(ec, KN_E_OR, lt(c, x, f64(c, 0)), lt(c, f64(c, in - 1), x));
    return x;
  }
  case KN_CTM_PYTORCH_HALF_PIXEL: return if_ow1(c, r, f64(c, -0.5), half_pixel);
  case KN_CTM_HALF_PIXEL_SYMMETRIC: {
    double center = in / 2;
    if (!r->ow1) {
      double ow = g->scale[a] * in, adjustment = (double)g->out[a] / ow, offset = center * (1 - adjustment);
      return kn_e_add(ec, f64(c, offset), half_pixel);
    }
    kn_expr *adjustment = kn_e_div(ec, f64(c, (double)g->out[a]), r->ow);
    kn_expr *offset = kn_e_mul(ec, f64(c, center), kn_e_sub(ec, f64(c, 1), adjustment));
    return kn_e_add(ec, offset, half_pixel);
  }
  default: return half_pixel;
  }
}

/* The interpolation kernel at float64 distance d. */
struct kn_expr *kn_te_interp_weight(struct kn_te_ctx *c, struct kn_expr *dist, bool cubic, double A) {
  kn_expr_ctx *ec = c->ec;
  kn_expr *ad = kn_e_call1(ec, KN_FN_ABS, dist);
  if (!cubic) return kn_e_max_num(ec, kn_e_sub(ec, f64(c, 1), ad), f64(c, 0)); /* 0 for a NaN d */
  /* |d| <= 1: ((A+2)|d| - (A+3)) |d|^2 + 1;  |d| < 2: ((A|d| - 5A)|d| + 8A)|d| - 4A */
  kn_expr *near = kn_e_add(ec, kn_e_mul(ec, kn_e_sub(ec, kn_e_mul(ec, f64(c, A + 2), ad), f64(c, A + 3)),
                                        kn_e_mul(ec, ad, ad)),
                           f64(c, 1));
  kn_expr *far = kn_e_sub(
      ec, kn_e_mul(ec, kn_e_add(ec, kn_e_mul(ec, kn_e_sub(ec, kn_e_mul(ec, f64(c, A), ad), f64(c, 5 * A)), ad),
                                f64(c, 8 * A)),
                   ad),
      f64(c, 4 * A));
  return kn_e_select(ec, le(c, ad, f64(c, 1)), near, kn_e_select(ec, lt(c, ad, f64(c, 2)), far, f64(c, 0)));
}

/* Weight of tap j (an int64 expression) along axis a, un-normalised. */
static kn_expr *resize_tap_weight(kn_te_ctx *c, const kn_resize_geom *g, int a, kn_expr *f, kn_expr *x,
                                  kn_expr *j) {
  kn_expr_ctx *ec = c->ec;
  kn_expr *p = kn_e_add(ec, f, to_f64(c, kn_te_ix_add(c, j, kn_te_ix(c, 1 - g->taps[a] / 2))));
  kn_expr *dist = kn_e_mul(ec, kn_e_sub(ec, p, x), f64(c, g->support[a]));
  kn_expr *w = kn_te_interp_weight(c, dist, g->mode == KN_RESIZE_CUBIC, g->cubic_a);
  if (g->exclude_outside)
    w = kn_e_select(ec, kn_e_bin(ec, KN_E_AND, le(c, f64(c, 0), p), le(c, p, f64(c, (double)(g->in[a] - 1)))), w,
                    f64(c, 0));
  return w;
}

static kn_te_tensor *resize_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  kn_te_tensor *x = in[0];
  int ri, si, zi;
  kn_resize_inputs(n, c->g->opset, &ri, &si, &zi);
  kn_ref_tensor buf[3];
  const kn_ref_tensor *opt[3];
  int idx_in[3] = {ri, si, zi};
  kn_te_tensor *runtime[3] = {NULL, NULL, NULL}; /* read at run time (kiln.ResizeDeclared) */
  for (int k = 0; k < 3; k++)
    if (!const_ref(c, idx_in[k] >= 0 ? kn_te_in_value(n, idx_in[k]) : -1, &buf[k], &opt[k])) {
      if (n->op != KN_OP_RESIZE_DECLARED) return kn_te_unsupported(d, n, "non-constant input %d", idx_in[k]);
      runtime[k] = in[idx_in[k]];
    }
  resize_runtime rt = {runtime[0], runtime[1], runtime[2]};
  kn_resize_geom g;
  if (kn_resize_resolve(n, c->g->opset, &c->g->values[n->in[0]].shape, opt[0], opt[1], opt[2], &g, d) < 0)
    return NULL;
  bool nearest = g.mode == KN_RESIZE_NEAREST;
  if (!nearest && !kn_dtype_is_float(x->dtype))
    return kn_te_unsupported(d, n, "linear/cubic resize of %s", kn_dtype_name(x->dtype));
  int r = g.rank;
  bool resized = false;
  for (int a = 0; a < r; a++) resized |= !g.identity[a];
  /* linear / cubic with extrapolation: a reduction stage, then the select */
  bool epilogue = !nearest && resized && g.ctm == KN_CTM_TF_CROP_AND_RESIZE;
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  kn_te_tensor *acc = epilogue ? kn_te_out_compute(c, n, 0, "acc") : o;
  kn_expr *oi[KN_TE_MAX_RANK], *xi[KN_TE_MAX_RANK], *extrap = NULL, *weight = NULL;
  kn_te_axis_exprs(c, acc, oi);
  kn_var *tv[KN_TE_MAX_RANK];
  kn_expr *text[KN_TE_MAX_RANK];
  int nt = 0;
  for (int a = 0; a < r; a++) {
    if (g.identity[a]) {
      xi[a] = oi[a];
      continue;
    }
    kn_expr *ex = NULL;
    resize_scale rs = resize_scale_of(c, &g, a, &rt);
    kn_expr *xc = resize_coord(c, &g, a, &rs, oi[a], &ex);
    extrap = or_(c, extrap, ex);
    kn_expr *f = kn_e_sub(ec, kn_e_call1(ec, KN_FN_CEIL, xc), f64(c, 1)); /* x - f in (0, 1] */
    kn_expr *in_dim = kn_te_ix(c, g.in[a]);
    if (nearest) {
      kn_expr *ratio = kn_e_sub(ec, xc, f), *f1 = kn_e_add(ec, f, f64(c, 1)), *p;
      switch (g.nearest) {
      case KN_NEAREST_ROUND_PREFER_FLOOR: p = kn_e_select(ec, le(c, ratio, f64(c, 0.5)), f, f1); break;
      case KN_NEAREST_ROUND_PREFER_CEIL: p = kn_e_select(ec, lt(c, ratio, f64(c, 0.5)), f, f1); break;
      case KN_NEAREST_FLOOR: p = kn_e_call1(ec, KN_FN_FLOOR, xc); break;
      default: p = kn_e_call1(ec, KN_FN_CEIL, xc); break;
      }
      p = kn_te_clamp_num(c, p, 0, (double)(g.in[a] - 1));
      xi[a] = kn_e_cast(ec, KN_DT_I64, p);
      continue;
    }
    tv[nt] = kn_var_new(ec, "tap");
    text[nt] = kn_te_ix(c, g.taps[a]);
    kn_expr *j = kn_e_var(ec, tv[nt++]);
    /* f in [-taps, in + taps] before the cast loads the same clamped taps, and keeps a NaN or
       huge coordinate (a runtime scale) from overflowing the index arithmetic */
    kn_expr *fi = kn_e_cast(ec, KN_DT_I64, kn_te_clamp_num(c, f, (double)-g.taps[a], (double)(g.in[a] + g.taps[a])));
    xi[a] = kn_te_ix_clamp(c, kn_te_ix_add(c, fi, kn_te_ix_add(c, j, kn_te_ix(c, 1 - g.taps[a] / 2))), in_dim);
    kn_expr *w = resize_tap_weight(c, &g, a, f, xc, j);
    if (g.normalize) {
      kn_expr *sum = NULL;
      for (int k = 0; k < g.taps[a]; k++) {
        kn_expr *wk = resize_tap_weight(c, &g, a, f, xc, kn_te_ix(c, k));
        sum = sum ? kn_e_add(ec, sum, wk) : wk;
      }
      sum = kn_e_select(ec, kn_e_bin(ec, KN_E_EQ, sum, f64(c, 0)), f64(c, 1), sum);
      w = kn_e_div(ec, w, sum);
    }
    weight = weight ? kn_e_mul(ec, weight, w) : w;
  }
  kn_expr *fill = kn_te_num(c, o->dtype, g.extrapolation);
  kn_expr *v = kn_te_at(c, x, xi);
  if (nt == 0) {
    KN_ASSERT(acc == o, "resize without taps has no stage");
    o->body = extrap ? kn_e_select(ec, extrap, fill, v) : v;
    return o;
  }
  kn_expr *src = kn_e_mul(ec, kn_e_cast(ec, x->dtype, weight), v);
  acc->body = kn_e_reduce(ec, KN_RED_SUM, tv, text, nt, src);
  if (acc == o) return o;
  kn_expr *idx[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  /* the extrapolation test was built over acc's axes: restate it over o's */
  for (int a = 0; a < r; a++) extrap = kn_e_substitute(ec, extrap, acc->axes[a], idx[a]);
  o->body = kn_e_select(ec, extrap, fill, kn_te_at(c, acc, idx));
  return o;
}

/* ---- ConvTranspose / Col2Im: gather over the output ---- */

/* Index along one spatial axis for output index o and tap k: q = o + pad -
 * k * dilation must be a multiple of stride with q / stride in [0, extent).
 * Returns the clamped index and ANDs the validity test into *valid. */
static kn_expr *gather_index(kn_te_ctx *c, kn_expr *o, kn_expr *k, int64_t pad, int64_t dilation,
                             int64_t stride, int64_t extent, kn_expr **valid) {
  kn_expr *q = kn_te_ix_sub(c, kn_te_ix_add(c, o, kn_te_ix(c, pad)), kn_te_ix_mul(c, k, kn_te_ix(c, dilation)));
  kn_expr *p = q;
  if (stride > 1) {
    kn_expr *rem = kn_te_ix_mod(c, q, kn_te_ix(c, stride));
    *valid = kn_te_and(c, *valid, kn_e_bin(c->ec, KN_E_EQ, rem, kn_te_ix(c, 0)));
    p = kn_te_ix_div(c, q, kn_te_ix(c, stride));
  }
  *valid = kn_te_and(c, *valid, kn_te_ix_in_range(c, p, kn_te_ix(c, extent)));
  return kn_te_ix_clamp(c, p, kn_te_ix(c, extent));
}

static kn_te_tensor *convt_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  kn_te_tensor *x = in[0], *w = n->n_in > 1 ? in[1] : NULL, *b = n->n_in > 2 ? in[2] : NULL;
  if (!w) return kn_te_unsupported(d, n, "missing weights");
  kn_convt_geom g;
  if (kn_convt_resolve(n, &c->g->values[n->in[0]].shape, &c->g->values[n->in[1]].shape, &g, d) < 0) return NULL;
  int nsp = g.n_spatial;
  int64_t Cg = g.in_channels / g.group, Mg = g.out_channels / g.group;
  kn_dtype acc_t = kn_te_acc_dtype(x->dtype); /* 16-bit floats: the sum in f32, rounded once */
  bool widen = acc_t != x->dtype;
  kn_te_tensor *acc = kn_te_out_compute(c, n, 0, b || widen ? "acc" : NULL);
  acc->dtype = acc_t;
  kn_expr *oi[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, acc, oi);
  static const char *tap_names[3] = {"kd", "kh", "kw"};
  kn_var *rv[4];
  kn_expr *rext[4], *valid = NULL, *xi[KN_TE_MAX_RANK], *wi[KN_TE_MAX_RANK];
  int nr = 0;
  kn_expr *ic = kn_te_ix(c, 0);
  if (Cg > 1) {
    rv[nr] = kn_var_new(ec, "ic");
    ic = kn_e_var(ec, rv[nr]);
    rext[nr++] = kn_te_ix(c, Cg);
  }
  kn_expr *grp = kn_te_ix_div(c, oi[1], kn_te_ix(c, Mg));
  kn_expr *ch = kn_te_ix_add(c, kn_te_ix_mul(c, grp, kn_te_ix(c, Cg)), ic);
  xi[0] = oi[0];
  xi[1] = ch;
  wi[0] = ch;
  wi[1] = kn_te_ix_mod(c, oi[1], kn_te_ix(c, Mg));
  for (int i = 0; i < nsp; i++) {
    rv[nr] = kn_var_new(ec, tap_names[3 - nsp + i]);
    rext[nr] = kn_te_ix(c, g.kernel[i]);
    kn_expr *k = kn_e_var(ec, rv[nr++]);
    xi[2 + i] = gather_index(c, oi[2 + i], k, g.pad_begin[i], g.dilation[i], g.stride[i], g.in[i], &valid);
    wi[2 + i] = k;
  }
  kn_expr *xv = kn_te_at(c, x, xi);
  if (valid) xv = kn_e_select(ec, valid, xv, kn_te_num(c, x->dtype, 0));
  acc->body = kn_e_reduce(ec, KN_RED_SUM, rv, rext, nr,
                          kn_e_mul(ec, kn_e_cast(ec, acc_t, xv), kn_e_cast(ec, acc_t, kn_te_at(c, w, wi))));
  if (!b && !widen) return acc;
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  kn_expr *idx[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  kn_expr *v = kn_te_at(c, acc, idx);
  if (b) v = kn_e_add(ec, v, kn_e_cast(ec, acc_t, kn_te_at(c, b, &idx[1])));
  o->body = kn_e_cast(ec, x->dtype, v);
  return o;
}

static kn_te_tensor *col2im_def(kn_te_ctx *c, const kn_node *n, kn_diag *d, kn_te_tensor *x) {
  kn_expr_ctx *ec = c->ec;
  int64_t image[KN_MAX_RANK], block[KN_MAX_RANK];
  int ni, nb;
  if (!kn_te_const_ints(c, kn_te_in_value(n, 1), image, KN_MAX_RANK - 2, &ni) ||
      !kn_te_const_ints(c, kn_te_in_value(n, 2), block, KN_MAX_RANK - 2, &nb))
    return kn_te_unsupported(d, n, "non-constant image_shape or block_shape");
  kn_col2im_geom g;
  if (kn_col2im_resolve(n, &c->g->values[n->in[0]].shape, image, ni, block, nb, &g, d) < 0) return NULL;
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  kn_expr *oi[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, oi);
  kn_var *rv[KN_MAX_RANK];
  kn_expr *rext[KN_MAX_RANK], *valid = NULL, *row = oi[1], *col = kn_te_ix(c, 0);
  for (int i = 0; i < ni; i++) {
    rv[i] = kn_var_new(ec, "k");
    rext[i] = kn_te_ix(c, g.block[i]);
    kn_expr *k = kn_e_var(ec, rv[i]);
    kn_expr *bi = gather_index(c, oi[2 + i], k, g.pad_begin[i], g.dilation[i], g.stride[i], g.blocks[i], &valid);
    row = kn_te_ix_add(c, kn_te_ix_mul(c, row, kn_te_ix(c, g.block[i])), k);
    col = kn_te_ix_add(c, kn_te_ix_mul(c, col, kn_te_ix(c, g.blocks[i])), bi);
  }
  kn_expr *xi[3] = {oi[0], row, col};
  kn_expr *v = kn_te_at(c, x, xi);
  if (valid) v = kn_e_select(ec, valid, v, kn_te_num(c, x->dtype, 0));
  o->body = kn_e_reduce(ec, KN_RED_SUM, rv, rext, ni, v);
  return o;
}

/* ---- rearrangements ---- */

static kn_te_tensor *depth_space_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor *x, bool to_space) {
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  kn_expr *oi[4], *xi[4];
  kn_te_axis_exprs(c, o, oi);
  int64_t b = kn_node_attr_int(n, "blocksize", 1);
  kn_expr *B = kn_te_ix(c, b);
  xi[0] = oi[0];
  if (to_space) {
    bool crd = !strcmp(kn_node_attr_string(n, "mode", "DCR"), "CRD");
    kn_expr *bh = kn_te_ix_mod(c, oi[2], B), *bw = kn_te_ix_mod(c, oi[3], B);
    kn_expr *blk = kn_te_ix_add(c, kn_te_ix_mul(c, bh, B), bw);
    xi[1] = crd ? kn_te_ix_add(c, kn_te_ix_mul(c, oi[1], kn_te_ix(c, b * b)), blk)
                : kn_te_ix_add(c, kn_te_ix_mul(c, blk, o->shape[1]), oi[1]);
    xi[2] = kn_te_ix_div(c, oi[2], B);
    xi[3] = kn_te_ix_div(c, oi[3], B);
  } else {
    kn_expr *blk = kn_te_ix_div(c, oi[1], x->shape[1]);
    xi[1] = kn_te_ix_mod(c, oi[1], x->shape[1]);
    xi[2] = kn_te_ix_add(c, kn_te_ix_mul(c, oi[2], B), kn_te_ix_div(c, blk, B));
    xi[3] = kn_te_ix_add(c, kn_te_ix_mul(c, oi[3], B), kn_te_ix_mod(c, blk, B));
  }
  o->body = kn_te_at(c, x, xi);
  return o;
}

static kn_te_tensor *center_crop_pad_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor *x, kn_diag *d) {
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  kn_expr *oi[KN_TE_MAX_RANK], *xi[KN_TE_MAX_RANK], *valid = NULL;
  kn_te_axis_exprs(c, o, oi);
  for (int a = 0; a < o->rank; a++) {
    int64_t in, out;
    if (kn_e_equal(x->shape[a], o->shape[a])) {
      xi[a] = oi[a];
      continue;
    }
    if (!kn_te_ix_const(x->shape[a], &in) || !kn_te_ix_const(o->shape[a], &out))
      return kn_te_unsupported(d, n, "batch-sized cropped dim");
    int64_t shift = out >= in ? -((out - in) / 2) : (in - out) / 2;
    kn_expr *p = kn_te_ix_add(c, oi[a], kn_te_ix(c, shift));
    if (out > in) valid = kn_te_and(c, valid, kn_te_ix_in_range(c, p, x->shape[a]));
    xi[a] = out > in ? kn_te_ix_clamp(c, p, x->shape[a]) : p;
  }
  kn_expr *v = kn_te_at(c, x, xi);
  o->body = valid ? kn_e_select(c->ec, valid, v, kn_te_num(c, x->dtype, 0)) : v;
  return o;
}

kn_te_tensor *kn_te_spatial(kn_te_ctx *c, const kn_node *n, int out, kn_te_tensor **in, kn_diag *d) {
  if (out != 0) return kn_te_unsupported(d, n, "output %d", out);
  if (!in[0]) return kn_te_unsupported(d, n, "missing input 0");
  switch (n->op) {
  case KN_OP_RESIZE:
  case KN_OP_UPSAMPLE:
  case KN_OP_RESIZE_DECLARED: return resize_def(c, n, in, d);
  case KN_OP_CONV_TRANSPOSE: return convt_def(c, n, in, d);
  case KN_OP_COL2IM: return col2im_def(c, n, d, in[0]);
  case KN_OP_DEPTH_TO_SPACE: return depth_space_def(c, n, in[0], true);
  case KN_OP_SPACE_TO_DEPTH: return depth_space_def(c, n, in[0], false);
  case KN_OP_CENTER_CROP_PAD: return center_crop_pad_def(c, n, in[0], d);
  default: return kn_te_spatial_sample(c, n, in, d);
  }
}
