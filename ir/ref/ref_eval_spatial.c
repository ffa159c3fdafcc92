/* ref_eval_spatial.c — the reference interpreter for the spatial family
 * (spatial.h): Resize / Upsample, ConvTranspose, Col2Im, DepthToSpace,
 * SpaceToDepth, CenterCropPad here; the sampling ops (GridSample,
 * AffineGrid, RoiAlign, MaxUnpool) in ref_eval_spatial_sample.c.
 *
 * Plain loops in double precision over the output, with the geometry from
 * spatial_geom.c; written for clarity, not speed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/shape/spatial.h"

/* ---- Resize ---- */

/* Source coordinate of output index o along axis a (spatial.h), and whether
 * tf_crop_and_resize extrapolates there. Operation order follows the ONNX
 * reference so that ties round the same way. */
static double resize_coord(const kn_resize_geom *g, int a, int64_t o, bool *extrapolated) {
  double y = (double)o, s = g->scale[a], in = (double)g->in[a];
  double ow = s * in, x;
  *extrapolated = false;
  switch (g->ctm) {
  case KN_CTM_ALIGN_CORNERS: x = ow == 1 ? 0.0 : y * (in - 1) / (ow - 1); break;
  case KN_CTM_ASYMMETRIC: x = y / s; break;
  case KN_CTM_TF_CROP_AND_RESIZE: {
    double r0 = g->roi_start[a], r1 = g->roi_end[a];
    x = ow == 1 ? (r1 - r0) * (in - 1) / 2 : y * (r1 - r0) * (in - 1) / (ow - 1);
    x = x + r0 * (in - 1);
    *extrapolated = x < 0 || x > in - 1;
    break;
  }
  case KN_CTM_PYTORCH_HALF_PIXEL: x = ow == 1 ? -0.5 : (y + 0.5) / s - 0.5; break;
  case KN_CTM_HALF_PIXEL_SYMMETRIC: {
    double adjustment = (double)g->out[a] / ow, center = in / 2, offset = center * (1 - adjustment);
    x = offset + (y + 0.5) / s - 0.5;
    break;
  }
  default: x = (y + 0.5) / s - 0.5; break;
  }
  return x;
}

static double cubic_kernel(double d, double A) {
  d = fabs(d);
  if (d <= 1) return ((A + 2) * d - (A + 3)) * d * d + 1;
  if (d < 2) return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
  return 0;
}

/* Taps of one axis: for each output index, `taps` input positions (clamped)
 * and weights. */
typedef struct axis_taps {
  int taps;
  int64_t *pos;   /* [out * taps] */
  double *weight; /* [out * taps] */
  bool *extrap;   /* [out] */
} axis_taps;

static void resize_axis(const kn_resize_geom *g, int a, kn_arena *arena, axis_taps *t) {
  int64_t out = g->out[a], in = g->in[a];
  int n = g->mode == KN_RESIZE_NEAREST || g->identity[a] ? 1 : g->taps[a];
  t->taps = n;
  t->pos = KN_NEW_ARRAY(arena, int64_t, out * n + 1);
  t->weight = KN_NEW_ARRAY(arena, double, out * n + 1);
  t->extrap = KN_NEW_ARRAY(arena, bool, out + 1);
  for (int64_t o = 0; o < out; o++) {
    int64_t *pos = t->pos + o * n;
    double *w = t->weight + o * n;
    if (g->identity[a]) {
      pos[0] = o;
      w[0] = 1;
      continue;
    }
    double x = resize_coord(g, a, o, &t->extrap[o]);
    double f = ceil(x) - 1, ratio = x - f; /* ratio in (0, 1] */
    if (g->mode == KN_RESIZE_NEAREST) {
      double p;
      switch (g->nearest) {
      case KN_NEAREST_ROUND_PREFER_FLOOR: p = ratio <= 0.5 ? f : f + 1; break;
      case KN_NEAREST_ROUND_PREFER_CEIL: p = ratio < 0.5 ? f : f + 1; break;
      case KN_NEAREST_FLOOR: p = floor(x); break;
      default: p = ceil(x); break;
      }
      int64_t i = (int64_t)fmax(fmin(p, (double)(in - 1)), 0.0);
      pos[0] = i;
      w[0] = 1;
      continue;
    }
    double sum = 0;
    for (int j = 0; j < n; j++) {
      double p = f - n / 2 + 1 + j;
      double dist = (p - x) * g->support[a];
      double k = g->mode == KN_RESIZE_LINEAR ? fmax(0.0, 1 - fabs(dist)) : cubic_kernel(dist, g->cubic_a);
      if (g->exclude_outside && (p < 0 || p > (double)(in - 1))) k = 0;
      w[j] = k;
      sum += k;
      pos[j] = (int64_t)fmax(fmin(p, (double)(in - 1)), 0.0);
    }
    if (g->normalize && sum != 0)
      for (int j = 0; j < n; j++) w[j] /= sum;
  }
}

static int ref_resize(kn_ref_call *c) {
  const kn_node *n = c->node;
  int ri, si, zi;
  kn_resize_inputs(n, c->g->opset, &ri, &si, &zi);
  const kn_ref_tensor *opt[3] = {NULL, NULL, NULL};
  int idx[3] = {ri, si, zi};
  for (int k = 0; k < 3; k++)
    if (idx[k] >= 0 && idx[k] < c->n_in && c->in[idx[k]].data) opt[k] = &c->in[idx[k]];
  kn_resize_geom g;
  const kn_ref_tensor *x = &c->in[0];
  if (kn_resize_resolve(n, c->g->opset, &x->shape, opt[0], opt[1], opt[2], &g, c->d) < 0) return -1;
  kn_ref_tensor *y = &c->out[0];
  int r = g.rank;
  for (int a = 0; a < r; a++)
    if (g.out[a] != y->shape.dim[a]) return kn_ref_error(c, "output dim %d differs from the geometry", a);
  if (kn_ref_numel(&y->shape) == 0) return 0;
  axis_taps t[KN_MAX_RANK];
  for (int a = 0; a < r; a++) resize_axis(&g, a, c->arena, &t[a]);
  int64_t xs[KN_MAX_RANK], oi[KN_MAX_RANK] = {0}, ti[KN_MAX_RANK];
  kn_ref_strides(&x->shape, xs);
  kn_shape tap_shape = {.rank = r};
  for (int a = 0; a < r; a++) tap_shape.dim[a] = t[a].taps;
  int64_t e = 0;
  do {
    bool extrap = false;
    for (int a = 0; a < r; a++) extrap |= t[a].extrap[oi[a]];
    double acc = 0;
    if (!extrap) {
      memset(ti, 0, sizeof ti);
      do {
        double w = 1;
        int64_t off = 0;
        for (int a = 0; a < r; a++) {
          int64_t k = oi[a] * t[a].taps + ti[a];
          w *= t[a].weight[k];
          off += t[a].pos[k] * xs[a];
        }
        acc += w * kn_ref_load(x->dtype, x->data, off);
      } while (kn_ref_next_index(&tap_shape, ti));
    }
    kn_ref_store(y->dtype, y->data, e++, extrap ? g.extrapolation : acc);
  } while (kn_ref_next_index(&y->shape, oi));
  return 0;
}

/* ---- ConvTranspose (scatter form: every input element adds to the
 * outputs its taps reach) ---- */

static int ref_convt(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0], *w = &c->in[1];
  const kn_ref_tensor *b = c->n_in > 2 && c->in[2].data ? &c->in[2] : NULL;
  kn_convt_geom g;
  if (kn_convt_resolve(c->node, &x->shape, &w->shape, &g, c->d) < 0) return -1;
  kn_ref_tensor *y = &c->out[0];
  int nsp = g.n_spatial;
  int64_t N = x->shape.dim[0], C = g.in_channels, M = g.out_channels, Cg = C / g.group, Mg = M / g.group;
  int64_t out_sp = 1, in_sp = 1, k_sp = 1;
  for (int i = 0; i < nsp; i++) out_sp *= g.out[i], in_sp *= g.in[i], k_sp *= g.kernel[i];
  double *acc = calloc((size_t)(N * M * out_sp) + 1, sizeof(double));
  KN_ASSERT(acc, "out of memory");
  for (int64_t nb = 0; nb < N; nb++)
    for (int64_t ci = 0; ci < C; ci++) {
      int64_t grp = ci / Cg;
      for (int64_t p = 0; p < in_sp; p++) {
        double xv = kn_ref_load(x->dtype, x->data, (nb * C + ci) * in_sp + p);
        int64_t pi[3], rem = p;
        for (int i = nsp - 1; i >= 0; i--) pi[i] = rem % g.in[i], rem /= g.in[i];
        for (int64_t k = 0; k < k_sp; k++) {
          int64_t ki[3], kr = k, o = 0;
          bool inside = true;
          for (int i = nsp - 1; i >= 0; i--) ki[i] = kr % g.kernel[i], kr /= g.kernel[i];
          for (int i = 0; i < nsp; i++) {
            int64_t oc = pi[i] * g.stride[i] + ki[i] * g.dilation[i] - g.pad_begin[i];
            inside &= oc >= 0 && oc < g.out[i];
            o = o * g.out[i] + oc;
          }
          if (!inside) continue;
          for (int64_t mm = 0; mm < Mg; mm++) {
            double wv = kn_ref_load(w->dtype, w->data, (ci * Mg + mm) * k_sp + k);
            acc[(nb * M + grp * Mg + mm) * out_sp + o] += xv * wv;
          }
        }
      }
    }
  for (int64_t i = 0; i < N * M * out_sp; i++) {
    double v = acc[i] + (b ? kn_ref_load(b->dtype, b->data, (i / out_sp) % M) : 0);
    kn_ref_store(y->dtype, y->data, i, v);
  }
  free(acc);
  return 0;
}

/* ---- Col2Im (scatter-add of the columns) ---- */

static int ref_col2im(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0];
  int64_t image[KN_MAX_RANK], block[KN_MAX_RANK];
  int ni = (int)kn_ref_numel(&c->in[1].shape), nb = (int)kn_ref_numel(&c->in[2].shape);
  if (ni > KN_MAX_RANK - 2 || nb > KN_MAX_RANK - 2) return kn_ref_error(c, "too many image dims");
  for (int i = 0; i < ni; i++) image[i] = kn_ref_load_int(c->in[1].dtype, c->in[1].data, i);
  for (int i = 0; i < nb; i++) block[i] = kn_ref_load_int(c->in[2].dtype, c->in[2].data, i);
  kn_col2im_geom g;
  if (kn_col2im_resolve(c->node, &x->shape, image, ni, block, nb, &g, c->d) < 0) return -1;
  kn_ref_tensor *y = &c->out[0];
  int nsp = g.n_spatial;
  int64_t N = x->shape.dim[0], C = g.channels, L = x->shape.dim[2], kprod = x->shape.dim[1] / C, img = 1;
  for (int i = 0; i < nsp; i++) img *= g.image[i];
  double *acc = calloc((size_t)(N * C * img) + 1, sizeof(double));
  KN_ASSERT(acc, "out of memory");
  for (int64_t nn = 0; nn < N; nn++)
    for (int64_t row = 0; row < C * kprod; row++)
      for (int64_t l = 0; l < L; l++) {
        int64_t ch = row / kprod, k = row % kprod, lr = l, o = 0;
        int64_t ki[KN_MAX_RANK], bi[KN_MAX_RANK];
        for (int i = nsp - 1; i >= 0; i--) ki[i] = k % g.block[i], k /= g.block[i];
        for (int i = nsp - 1; i >= 0; i--) bi[i] = lr % g.blocks[i], lr /= g.blocks[i];
        bool inside = true;
        for (int i = 0; i < nsp; i++) {
          int64_t p = bi[i] * g.stride[i] + ki[i] * g.dilation[i] - g.pad_begin[i];
          inside &= p >= 0 && p < g.image[i];
          o = o * g.image[i] + p;
        }
        if (inside) acc[(nn * C + ch) * img + o] += kn_ref_load(x->dtype, x->data, (nn * C * kprod + row) * L + l);
      }
  for (int64_t i = 0; i < N * C * img; i++) kn_ref_store(y->dtype, y->data, i, acc[i]);
  free(acc);
  return 0;
}

/* ---- rearrangements ---- */

/* DepthToSpace (DCR / CRD) and SpaceToDepth: out[n, c, h, w] reads one
 * input element. */
static int ref_depth_space(kn_ref_call *c, bool to_space) {
  const kn_ref_tensor *x = &c->in[0];
  kn_ref_tensor *y = &c->out[0];
  int64_t b = kn_node_attr_int(c->node, "blocksize", 1);
  bool crd = to_space && !strcmp(kn_node_attr_string(c->node, "mode", "DCR"), "CRD");
  int64_t xs[4], oi[4] = {0}, e = 0;
  kn_ref_strides(&x->shape, xs);
  if (kn_ref_numel(&y->shape) == 0) return 0;
  int64_t Cy = y->shape.dim[1], Cx = x->shape.dim[1];
  do {
    int64_t n = oi[0], ch = oi[1], h = oi[2], w = oi[3], src[4];
    if (to_space) {
      int64_t bh = h % b, bw = w % b;
      int64_t ic = crd ? ch * b * b + bh * b + bw : (bh * b + bw) * Cy + ch;
      src[0] = n, src[1] = ic, src[2] = h / b, src[3] = w / b;
    } else {
      int64_t blk = ch / Cx, ic = ch % Cx;
      src[0] = n, src[1] = ic, src[2] = h * b + blk / b, src[3] = w * b + blk % b;
    }
    int64_t off = src[0] * xs[0] + src[1] * xs[1] + src[2] * xs[2] + src[3] * xs[3];
    kn_ref_store(y->dtype, y->data, e++, kn_ref_load(x->dtype, x->data, off));
  } while (kn_ref_next_index(&y->shape, oi));
  return 0;
}

/* CenterCropPad: output index o along a changed axis reads input
 * o - (out - in) / 2 when the output is larger (pad), o + (in - out) / 2 when
 * smaller (crop); outside the input is 0. */
static int ref_center_crop_pad(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0];
  kn_ref_tensor *y = &c->out[0];
  int r = x->shape.rank;
  int64_t xs[KN_MAX_RANK], oi[KN_MAX_RANK] = {0}, e = 0, shift[KN_MAX_RANK];
  kn_ref_strides(&x->shape, xs);
  for (int a = 0; a < r; a++) {
    int64_t in = x->shape.dim[a], out = y->shape.dim[a];
    shift[a] = out >= in ? -((out - in) / 2) : (in - out) / 2;
  }
  if (kn_ref_numel(&y->shape) == 0) return 0;
  do {
    int64_t off = 0;
    bool inside = true;
    for (int a = 0; a < r; a++) {
      int64_t p = oi[a] + shift[a];
      inside &= p >= 0 && p < x->shape.dim[a];
      off += p * xs[a];
    }
    kn_ref_store(y->dtype, y->data, e++, inside ? kn_ref_load(x->dtype, x->data, off) : 0);
  } while (kn_ref_next_index(&y->shape, oi));
  return 0;
}

int kn_ref_spatial(kn_ref_call *c) {
  if (c->n_in < 1 || !c->in[0].data || c->n_out < 1 || !c->out[0].data)
    return kn_ref_error(c, "missing input or output");
  switch (c->node->op) {
  case KN_OP_RESIZE:
  case KN_OP_UPSAMPLE:
  case KN_OP_RESIZE_DECLARED: return ref_resize(c);
  case KN_OP_CONV_TRANSPOSE:
    if (c->n_in < 2 || !c->in[1].data) return kn_ref_error(c, "missing weights");
    return ref_convt(c);
  case KN_OP_COL2IM:
    if (c->n_in < 3 || !c->in[1].data || !c->in[2].data) return kn_ref_error(c, "missing image/block shape");
    return ref_col2im(c);
  case KN_OP_DEPTH_TO_SPACE: return ref_depth_space(c, true);
  case KN_OP_SPACE_TO_DEPTH: return ref_depth_space(c, false);
  case KN_OP_CENTER_CROP_PAD: return ref_center_crop_pad(c);
  default: return kn_ref_spatial_sample(c);
  }
}
