/* shape_infer_spatial.c — shape and dtype rules of the spatial family
 * (spatial.h). Geometry comes from spatial_geom.c; the inputs that decide a
 * shape (Resize scales/sizes/roi, CenterCropPad shape, Col2Im image and
 * block shapes, AffineGrid size, MaxUnpool output_shape) must be known at
 * compile time, else the node gets a diagnostic naming the input; except
 * kiln.ResizeDeclared's scales / sizes / roi (its output_shape is the shape,
 * ir/passes/pass_runtime_resize.c). */
#include <string.h>

#include "ir/shape/shape_infer_impl.h"
#include "ir/shape/spatial.h"

/* Input k known at compile time, or NULL (a diagnostic when `required`). */
static const kn_ref_tensor *known_or_fail(kn_infer *c, int k, const char *what, bool *bad) {
  if (!kn_infer_in(c, k)) return NULL;
  const kn_ref_tensor *t = kn_infer_known(c, k);
  if (!t) {
    kn_infer_fail_unknown(c, k, what, "");
    *bad = true;
  }
  return t;
}

/* kiln.ResizeDeclared's input k (roi, scales, sizes) read at run time: a
 * vector of `count` entries of a float (or, for sizes, integer) dtype. */
static bool runtime_vector_ok(kn_infer *c, int k, const kn_ref_tensor *known, bool integer, int64_t count) {
  const kn_value *v = kn_infer_in(c, k);
  if (!v || known) return true;
  return (integer ? kn_dtype_is_int(v->dtype) : kn_dtype_is_float(v->dtype)) && v->shape.rank == 1 &&
         !v->shape.batch_mask && v->shape.dim[0] == count;
}

static int infer_resize(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  const kn_value *x = kn_infer_in(c, 0);
  if (!x) return kn_infer_fail(c, "missing input X");
  int ri, si, zi;
  kn_resize_inputs(n, c->g->opset, &ri, &si, &zi);
  bool bad = false, declared = n->op == KN_OP_RESIZE_DECLARED; /* its inputs may be read at run time */
  const kn_ref_tensor *roi = ri < 0 ? NULL : declared ? kn_infer_known(c, ri) : known_or_fail(c, ri, "roi", &bad);
  const kn_ref_tensor *scales = si < 0 ? NULL : declared ? kn_infer_known(c, si) : known_or_fail(c, si, "scales", &bad);
  const kn_ref_tensor *sizes = zi < 0 ? NULL : declared ? kn_infer_known(c, zi) : known_or_fail(c, zi, "sizes", &bad);
  if (bad) return -1;
  kn_resize_geom g;
  if (kn_resize_resolve(n, c->g->opset, &x->shape, roi, scales, sizes, &g, c->d) < 0) return -1;
  if (declared && !runtime_vector_ok(c, si, scales, false, g.n_axes))
    return kn_infer_fail(c, "scales must be a float tensor of %d entries", g.n_axes);
  if (declared && !runtime_vector_ok(c, zi, sizes, true, g.n_axes))
    return kn_infer_fail(c, "sizes must be an integer tensor of %d entries", g.n_axes);
  if (declared && !runtime_vector_ok(c, ri, roi, false, 2 * (int64_t)g.n_axes))
    return kn_infer_fail(c, "roi must be a float tensor of %d entries", 2 * g.n_axes);
  kn_shape s = x->shape;
  for (int a = 0; a < s.rank; a++) s.dim[a] = g.out[a];
  return kn_infer_set(c, 0, x->dtype, &s);
}

static int infer_convt(kn_infer *c) {
  const kn_value *x = kn_infer_in(c, 0), *w = kn_infer_in(c, 1), *b = kn_infer_in(c, 2);
  if (!x || !w) return kn_infer_fail(c, "missing input X or W");
  if (!kn_dtype_is_float(x->dtype) || w->dtype != x->dtype || (b && b->dtype != x->dtype))
    return kn_infer_fail(c, "X, W and B must share one float dtype");
  kn_convt_geom g;
  if (kn_convt_resolve(kn_infer_node(c), &x->shape, &w->shape, &g, c->d) < 0) return -1;
  if (b && (b->shape.rank != 1 || b->shape.dim[0] != g.out_channels || b->shape.batch_mask))
    return kn_infer_fail(c, "bias must be [%lld]", (long long)g.out_channels);
  kn_shape s = x->shape;
  s.dim[1] = g.out_channels;
  for (int i = 0; i < g.n_spatial; i++) s.dim[2 + i] = g.out[i];
  return kn_infer_set(c, 0, x->dtype, &s);
}

static int infer_depth_space(kn_infer *c, bool to_space) {
  const kn_value *x = kn_infer_in(c, 0);
  if (!x || x->shape.rank != 4) return kn_infer_fail(c, "input must be 4-D");
  int64_t b = kn_node_attr_int(kn_infer_node(c), "blocksize", 0);
  if (b < 1 || b > 4096) return kn_infer_fail(c, "blocksize %lld out of range", (long long)b);
  if (x->shape.batch_mask & ~1u) return kn_infer_fail(c, "batch-sized channel or spatial dims");
  kn_shape s = x->shape;
  if (to_space) {
    if (s.dim[1] % (b * b)) return kn_infer_fail(c, "channels %lld not a multiple of blocksize^2", (long long)s.dim[1]);
    const char *mode = kn_node_attr_string(kn_infer_node(c), "mode", "DCR");
    if (strcmp(mode, "DCR") && strcmp(mode, "CRD")) return kn_infer_fail(c, "unknown mode '%s'", mode);
    s.dim[1] /= b * b;
    s.dim[2] *= b;
    s.dim[3] *= b;
  } else {
    if (s.dim[2] % b || s.dim[3] % b) return kn_infer_fail(c, "spatial dims not multiples of blocksize");
    s.dim[1] *= b * b;
    s.dim[2] /= b;
    s.dim[3] /= b;
  }
  return kn_infer_set(c, 0, x->dtype, &s);
}

static int infer_center_crop_pad(kn_infer *c) {
  const kn_value *x = kn_infer_in(c, 0);
  if (!x || !kn_infer_in(c, 1)) return kn_infer_fail(c, "missing input");
  int64_t shape[KN_MAX_RANK];
  int count;
  if (kn_infer_ints(c, 1, "shape", shape, NULL, KN_MAX_RANK, &count) < 0) return -1;
  int r = x->shape.rank, axes[KN_MAX_RANK], na;
  const int64_t *ax = kn_node_attr_ints(kn_infer_node(c), "axes", &na);
  if (!ax) na = r;
  if (na != count) return kn_infer_fail(c, "shape has %d entries for %d axes", count, na);
  kn_shape s = x->shape;
  for (int i = 0; i < na; i++) {
    axes[i] = ax ? kn_axis_norm(ax[i], r) : i;
    if (axes[i] < 0) return kn_infer_fail(c, "axis %lld out of range", (long long)ax[i]);
    for (int j = 0; j < i; j++)
      if (axes[j] == axes[i]) return kn_infer_fail(c, "axis %lld is repeated in attribute axes", (long long)ax[i]);
    if (shape[i] < 0 || shape[i] > ((int64_t)1 << 40)) return kn_infer_fail(c, "shape entry %lld out of range", (long long)shape[i]);
    if ((s.batch_mask >> axes[i]) & 1) return kn_infer_fail(c, "cropping the batch dim");
    s.dim[axes[i]] = shape[i];
  }
  return kn_infer_set(c, 0, x->dtype, &s);
}

static int infer_col2im(kn_infer *c) {
  const kn_value *x = kn_infer_in(c, 0);
  if (!x || !kn_infer_in(c, 1) || !kn_infer_in(c, 2)) return kn_infer_fail(c, "needs input, image_shape, block_shape");
  int64_t image[KN_MAX_RANK], block[KN_MAX_RANK];
  int ni, nb;
  if (kn_infer_ints(c, 1, "image_shape", image, NULL, KN_MAX_RANK - 2, &ni) < 0 ||
      kn_infer_ints(c, 2, "block_shape", block, NULL, KN_MAX_RANK - 2, &nb) < 0)
    return -1;
  kn_col2im_geom g;
  if (kn_col2im_resolve(kn_infer_node(c), &x->shape, image, ni, block, nb, &g, c->d) < 0) return -1;
  kn_shape s = {.rank = 2 + ni, .batch_mask = x->shape.batch_mask & 1u};
  s.dim[0] = x->shape.dim[0];
  s.dim[1] = g.channels;
  for (int i = 0; i < ni; i++) s.dim[2 + i] = image[i];
  return kn_infer_set(c, 0, x->dtype, &s);
}

static int infer_grid_sample(kn_infer *c) {
  const kn_value *x = kn_infer_in(c, 0), *grid = kn_infer_in(c, 1);
  if (!x || !grid) return kn_infer_fail(c, "missing input X or grid");
  int r = x->shape.rank, nsp = r - 2;
  if (nsp < 1 || nsp > 3 || grid->shape.rank != r || grid->shape.dim[r - 1] != nsp)
    return kn_infer_fail(c, "X must be [N,C,D...] and grid [N,D_out...,%d]", nsp);
  if (!kn_dtype_is_float(x->dtype) || !kn_dtype_is_float(grid->dtype)) return kn_infer_fail(c, "float inputs expected");
  if ((x->shape.batch_mask | grid->shape.batch_mask) & ~1u) return kn_infer_fail(c, "batch-sized non-batch dims");
  if (x->shape.dim[0] != grid->shape.dim[0] || x->shape.batch_mask != grid->shape.batch_mask)
    return kn_infer_fail(c, "X and grid batch sizes differ");
  /* what the compute definition refuses, said here too so `kiln inspect` sees it */
  const kn_node *n = kn_infer_node(c);
  const char *mode = kn_node_attr_string(n, "mode", "linear");
  const char *pad = kn_node_attr_string(n, "padding_mode", "zeros");
  if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "bilinear") && strcmp(mode, "cubic") &&
      strcmp(mode, "bicubic"))
    return kn_infer_fail(c, "attribute mode '%s' is not nearest, linear or cubic", mode);
  if (strcmp(pad, "zeros") && strcmp(pad, "border") && strcmp(pad, "reflection"))
    return kn_infer_fail(c, "attribute padding_mode '%s' is not zeros, border or reflection", pad);
  for (int i = 0; i < nsp; i++)
    if (x->shape.dim[2 + i] < 1) return kn_infer_fail(c, "X has an empty spatial dim (%d)", 2 + i);
  kn_shape s = x->shape;
  for (int i = 0; i < nsp; i++) s.dim[2 + i] = grid->shape.dim[1 + i];
  return kn_infer_set(c, 0, x->dtype, &s);
}

static int infer_affine_grid(kn_infer *c) {
  const kn_value *theta = kn_infer_in(c, 0);
  if (!theta || !kn_infer_in(c, 1)) return kn_infer_fail(c, "missing input theta or size");
  int64_t size[KN_MAX_RANK];
  int count;
  if (kn_infer_ints(c, 1, "size", size, NULL, KN_MAX_RANK, &count) < 0) return -1;
  int nsp = count - 2;
  if (nsp != 2 && nsp != 3) return kn_infer_fail(c, "size must have 4 or 5 entries");
  if (theta->shape.rank != 3 || theta->shape.batch_mask || theta->shape.dim[0] != size[0] ||
      theta->shape.dim[1] != nsp || theta->shape.dim[2] != nsp + 1)
    return kn_infer_fail(c, "theta must be [%lld,%d,%d]", (long long)size[0], nsp, nsp + 1);
  if (!kn_dtype_is_float(theta->dtype)) return kn_infer_fail(c, "theta must be float");
  kn_shape s = {.rank = nsp + 2};
  s.dim[0] = size[0];
  for (int i = 0; i < nsp; i++) {
    if (size[2 + i] < 1 || size[2 + i] > ((int64_t)1 << 30)) return kn_infer_fail(c, "size entry out of range");
    s.dim[1 + i] = size[2 + i];
  }
  s.dim[nsp + 1] = nsp;
  return kn_infer_set(c, 0, theta->dtype, &s);
}

static int infer_max_unpool(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  const kn_value *x = kn_infer_in(c, 0), *ind = kn_infer_in(c, 1);
  if (!x || !ind) return kn_infer_fail(c, "missing input X or I");
  int r = x->shape.rank, nsp = r - 2;
  if (nsp < 1 || nsp > 3 || !kn_shape_equal(&x->shape, &ind->shape) || !kn_dtype_is_int(ind->dtype))
    return kn_infer_fail(c, "X must be [N,C,D...] and I integer of the same shape");
  if (x->shape.batch_mask & ~1u) return kn_infer_fail(c, "batch-sized non-batch dims");
  int nk;
  const int64_t *ks = kn_node_attr_ints(n, "kernel_shape", &nk);
  if (!ks || nk != nsp) return kn_infer_fail(c, "kernel_shape must have %d entries", nsp);
  kn_shape s = x->shape;
  if (kn_infer_in(c, 2)) {
    int64_t os[KN_MAX_RANK];
    int count;
    if (kn_infer_ints(c, 2, "output_shape", os, NULL, KN_MAX_RANK, &count) < 0) return -1;
    if (count != r) return kn_infer_fail(c, "output_shape must have %d entries", r);
    for (int i = 2; i < r; i++) {
      if (os[i] < 1 || os[i] > ((int64_t)1 << 40)) return kn_infer_fail(c, "output_shape entry out of range");
      s.dim[i] = os[i];
    }
  } else {
    int np, ns;
    const int64_t *pads = kn_node_attr_ints(n, "pads", &np), *st = kn_node_attr_ints(n, "strides", &ns);
    if ((pads && np != 2 * nsp) || (st && ns != nsp)) return kn_infer_fail(c, "pads/strides entry counts");
    for (int i = 0; i < nsp; i++) {
      int64_t stride = st ? st[i] : 1, pb = pads ? pads[i] : 0, pe = pads ? pads[nsp + i] : 0;
      if (stride < 1 || ks[i] < 1 || pb < 0 || pe < 0) return kn_infer_fail(c, "bad kernel_shape/strides/pads");
      s.dim[2 + i] = (x->shape.dim[2 + i] - 1) * stride + ks[i] - pb - pe;
      if (s.dim[2 + i] < 1) return kn_infer_fail(c, "empty output");
    }
  }
  return kn_infer_set(c, 0, x->dtype, &s);
}

static int infer_roi_align(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  const kn_value *x = kn_infer_in(c, 0), *rois = kn_infer_in(c, 1), *bi = kn_infer_in(c, 2);
  if (!x || !rois || !bi) return kn_infer_fail(c, "needs X, rois, batch_indices");
  if (x->shape.rank != 4 || rois->shape.rank != 2 || rois->shape.dim[1] != 4 || bi->shape.rank != 1 ||
      bi->shape.dim[0] != rois->shape.dim[0] || rois->shape.batch_mask != bi->shape.batch_mask ||
      (x->shape.batch_mask & ~1u) || (rois->shape.batch_mask & ~1u))
    return kn_infer_fail(c, "X must be [N,C,H,W], rois [R,4], batch_indices [R]");
  if (!kn_dtype_is_float(x->dtype) || rois->dtype != x->dtype || !kn_dtype_is_int(bi->dtype))
    return kn_infer_fail(c, "X and rois float of one dtype, batch_indices integer");
  int64_t oh = kn_node_attr_int(n, "output_height", 1), ow = kn_node_attr_int(n, "output_width", 1);
  if (oh < 1 || ow < 1 || oh > 65536 || ow > 65536) return kn_infer_fail(c, "output_height/width out of range");
  kn_shape s = {.rank = 4, .batch_mask = rois->shape.batch_mask & 1u};
  s.dim[0] = rois->shape.dim[0];
  s.dim[1] = x->shape.dim[1];
  s.dim[2] = oh;
  s.dim[3] = ow;
  return kn_infer_set(c, 0, x->dtype, &s);
}

int kn_infer_spatial(kn_infer *c) {
  switch (kn_infer_node(c)->op) {
  case KN_OP_RESIZE:
  case KN_OP_UPSAMPLE:
  case KN_OP_RESIZE_DECLARED: return infer_resize(c);
  case KN_OP_CONV_TRANSPOSE: return infer_convt(c);
  case KN_OP_DEPTH_TO_SPACE: return infer_depth_space(c, true);
  case KN_OP_SPACE_TO_DEPTH: return infer_depth_space(c, false);
  case KN_OP_CENTER_CROP_PAD: return infer_center_crop_pad(c);
  case KN_OP_COL2IM: return infer_col2im(c);
  case KN_OP_GRID_SAMPLE: return infer_grid_sample(c);
  case KN_OP_AFFINE_GRID: return infer_affine_grid(c);
  case KN_OP_MAX_UNPOOL: return infer_max_unpool(c);
  case KN_OP_ROI_ALIGN: return infer_roi_align(c);
  default: return kn_infer_fail(c, "no shape rule in the spatial family");
  }
}
