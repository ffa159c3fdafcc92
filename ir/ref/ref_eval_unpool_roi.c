/* ref_eval_unpool_roi.c — the reference interpreter for MaxUnpool and
 * RoiAlign (spatial family, spatial.h), plain loops in double precision
 * following the ONNX operator spec and its reference's order of steps.
 *
 *  - MaxUnpool: Y (the shape inferred from kernel/strides/pads) starts at 0
 *    and Y.flat[I[i]] = X.flat[i] for every element i in order (a later
 *    duplicate index wins); with output_shape, Y sits in the leading corner
 *    of the zero output.
 *  - RoiAlign: per roi, channel and output cell, a grid of sampling_ratio^2
 *    (or ceil(roi size / output size)) bilinear samples, averaged or maxed
 *    (max: the largest weighted corner of each sample, as the reference). */
#include <math.h>
#include <string.h>

#include "ir/shape/spatial.h"

static int ref_max_unpool(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0], *ind = &c->in[1];
  kn_ref_tensor *y = &c->out[0];
  int r = x->shape.rank, nsp = r - 2;
  int np = 0, ns = 0, nk = 0;
  const int64_t *pads = kn_node_attr_ints(c->node, "pads", &np);
  const int64_t *st = kn_node_attr_ints(c->node, "strides", &ns);
  const int64_t *ks = kn_node_attr_ints(c->node, "kernel_shape", &nk);
  if (!ks || nk != nsp) return kn_ref_error(c, "kernel_shape must have %d entries", nsp);
  kn_shape inf = x->shape; /* the unpooled shape the indices address */
  for (int i = 0; i < nsp; i++) {
    int64_t stride = st && i < ns ? st[i] : 1;
    int64_t pb = pads && np == 2 * nsp ? pads[i] : 0, pe = pads && np == 2 * nsp ? pads[nsp + i] : 0;
    inf.dim[2 + i] = (x->shape.dim[2 + i] - 1) * stride + ks[i] - pb - pe;
  }
  int64_t total = kn_ref_numel(&inf), n_x = kn_ref_numel(&x->shape);
  int64_t out_stride[KN_MAX_RANK], inf_idx[KN_MAX_RANK];
  kn_ref_strides(&y->shape, out_stride);
  for (int64_t i = 0; i < n_x; i++) {
    int64_t flat = kn_ref_load_int(ind->dtype, ind->data, i);
    if (flat < 0 || flat >= total) return kn_ref_error(c, "index %lld is out of range", (long long)flat);
    for (int a = r - 1; a >= 0; a--) {
      inf_idx[a] = flat % inf.dim[a];
      flat /= inf.dim[a];
    }
    int64_t off = 0;
    bool inside = true;
    for (int a = 0; a < r; a++) {
      if (inf_idx[a] >= y->shape.dim[a]) inside = false;
      off += inf_idx[a] * out_stride[a];
    }
    if (inside) kn_ref_store(y->dtype, y->data, off, kn_ref_load(x->dtype, x->data, i));
  }
  return 0;
}

/* Bilinear sample of plane p (h x w) at (yy, xx): the four weighted corners. */
static void roi_corners(const kn_ref_tensor *x, int64_t plane, int64_t h, int64_t w, double yy, double xx,
                        double *val) {
  for (int k = 0; k < 4; k++) val[k] = 0;
  if (!(yy >= -1.0 && yy <= (double)h && xx >= -1.0 && xx <= (double)w)) return; /* and NaN */
  if (yy < 0) yy = 0;
  if (xx < 0) xx = 0;
  int64_t yl = (int64_t)yy, xl = (int64_t)xx, yh, xh;
  if (yl >= h - 1) yh = yl = h - 1, yy = (double)yl;
  else yh = yl + 1;
  if (xl >= w - 1) xh = xl = w - 1, xx = (double)xl;
  else xh = xl + 1;
  double ly = yy - (double)yl, lx = xx - (double)xl, hy = 1 - ly, hx = 1 - lx;
  val[0] = hy * hx * kn_ref_load(x->dtype, x->data, plane + yl * w + xl);
  val[1] = hy * lx * kn_ref_load(x->dtype, x->data, plane + yl * w + xh);
  val[2] = ly * hx * kn_ref_load(x->dtype, x->data, plane + yh * w + xl);
  val[3] = ly * lx * kn_ref_load(x->dtype, x->data, plane + yh * w + xh);
}

static int ref_roi_align(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0], *rois = &c->in[1], *bi = &c->in[2];
  kn_ref_tensor *y = &c->out[0];
  const kn_node *n = c->node;
  bool is_max = !strcmp(kn_node_attr_string(n, "mode", "avg"), "max");
  bool half_pixel = strcmp(kn_node_attr_string(n, "coordinate_transformation_mode", "half_pixel"),
                           "output_half_pixel") != 0;
  double scale = kn_node_attr_float(n, "spatial_scale", 1.0f);
  int64_t ratio = kn_node_attr_int(n, "sampling_ratio", 0);
  int64_t batch = x->shape.dim[0], ch = x->shape.dim[1], h = x->shape.dim[2], w = x->shape.dim[3];
  int64_t n_rois = y->shape.dim[0], oh = y->shape.dim[2], ow = y->shape.dim[3];
  double off = half_pixel ? 0.5 : 0.0;
  for (int64_t r = 0; r < n_rois; r++) {
    int64_t b = kn_ref_load_int(bi->dtype, bi->data, r);
    if (b < 0 || b >= batch) return kn_ref_error(c, "batch index %lld is out of range", (long long)b);
    double sw = kn_ref_load(rois->dtype, rois->data, r * 4 + 0) * scale - off;
    double sh = kn_ref_load(rois->dtype, rois->data, r * 4 + 1) * scale - off;
    double ew = kn_ref_load(rois->dtype, rois->data, r * 4 + 2) * scale - off;
    double eh = kn_ref_load(rois->dtype, rois->data, r * 4 + 3) * scale - off;
    double rw = ew - sw, rh = eh - sh;
    if (!half_pixel) {
      if (rw < 1) rw = 1;
      if (rh < 1) rh = 1;
    }
    double bh = rh / (double)oh, bw = rw / (double)ow;
    int64_t gh = ratio > 0 ? ratio : kn_f2i64_sat(ceil(rh / (double)oh));
    int64_t gw = ratio > 0 ? ratio : kn_f2i64_sat(ceil(rw / (double)ow));
    if (gh > (1 << 20) || gw > (1 << 20)) /* a NaN roi gives 0 samples; a huge one would never end */
      return kn_ref_error(c, "roi %lld needs a sampling grid of over 2^20 per bin side", (long long)r);
    double count = gh * gw > 1 ? (double)(gh * gw) : 1.0;
    for (int64_t ci = 0; ci < ch; ci++) {
      int64_t plane = (b * ch + ci) * h * w;
      for (int64_t ph = 0; ph < oh; ph++)
        for (int64_t pw = 0; pw < ow; pw++) {
          double acc = 0;
          bool first = true;
          for (int64_t iy = 0; iy < gh; iy++)
            for (int64_t ix = 0; ix < gw; ix++) {
              double yy = sh + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
              double xx = sw + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
              double v[4];
              roi_corners(x, plane, h, w, yy, xx, v);
              if (!is_max) {
                acc += v[0] + v[1] + v[2] + v[3];
                continue;
              }
              double m = kn_max_nan(kn_max_nan(v[0], v[1]), kn_max_nan(v[2], v[3]));
              acc = first ? m : kn_max_nan(acc, m);
              first = false;
            }
          if (!is_max) acc /= count;
          kn_ref_store(y->dtype, y->data, ((r * ch + ci) * oh + ph) * ow + pw, acc);
        }
    }
  }
  return 0;
}

int kn_ref_unpool_roi(kn_ref_call *c) {
  switch (c->node->op) {
  case KN_OP_MAX_UNPOOL:
    if (c->n_in < 2 || !c->in[1].data) return kn_ref_error(c, "missing indices");
    return ref_max_unpool(c);
  case KN_OP_ROI_ALIGN:
    if (c->n_in < 3 || !c->in[1].data || !c->in[2].data) return kn_ref_error(c, "missing rois or batch_indices");
    return ref_roi_align(c);
  default: return kn_ref_error(c, "not supported by the reference interpreter");
  }
}
