/* spatial_geom.c — the geometry of the spatial ops (spatial.h), resolved once
 * from attributes and constant inputs for shape inference, the reference and
 * the compute definitions. Every value read from a model is range-checked
 * here, so the users may index with the result without further checks. */
#include <math.h>
#include <string.h>

#include "ir/shape/shape_infer.h"
#include "ir/shape/spatial.h"

#define DIM_MAX ((int64_t)1 << 40)

bool kn_spatial_op(kn_op op) {
  switch (op) {
  case KN_OP_RESIZE:
  case KN_OP_UPSAMPLE:
  case KN_OP_RESIZE_DECLARED:
  case KN_OP_CONV_TRANSPOSE:
  case KN_OP_COL2IM:
  case KN_OP_GRID_SAMPLE:
  case KN_OP_ROI_ALIGN:
  case KN_OP_MAX_UNPOOL:
  case KN_OP_DEPTH_TO_SPACE:
  case KN_OP_SPACE_TO_DEPTH:
  case KN_OP_CENTER_CROP_PAD:
  case KN_OP_AFFINE_GRID: return true;
  default: return false;
  }
}

static int fail(kn_diag *d, const kn_node *n, const char *what, long long v) {
  return kn_diag_error(d, "node '%s' (%s): %s (%lld)", n->name, n->op_type, what, v);
}

/* ---- Resize / Upsample ---- */

void kn_resize_inputs(const kn_node *n, int64_t opset, int *roi, int *scales, int *sizes) {
  *roi = *scales = *sizes = -1;
  if (n->op == KN_OP_RESIZE_DECLARED) {
    *roi = 1;
    *scales = 2;
    *sizes = 3;
    return;
  }
  if (n->op == KN_OP_UPSAMPLE || opset < 11) {
    *scales = 1;
    return;
  }
  *roi = 1;
  *scales = 2;
  *sizes = 3;
}

static bool present(const kn_ref_tensor *t) { return t && t->data && kn_ref_numel(&t->shape) > 0; }

static int parse_enum(const kn_node *n, const char *attr, const char *dflt, const char *const *names,
                      int count, int *out, kn_diag *d) {
  const char *s = kn_node_attr_string(n, attr, dflt);
  for (int i = 0; i < count; i++)
    if (!strcmp(s, names[i])) {
      *out = i;
      return 0;
    }
  return kn_diag_error(d, "node '%s' (%s): unknown %s '%s'", n->name, n->op_type, attr, s);
}

static bool has_input(const kn_node *n, int k) { return k < n->n_in && n->in[k] >= 0; }

/* kiln.ResizeDeclared: the declared output_shape. Without concrete scales
 * or sizes, takes the dims of the listed axes from it and marks how their
 * scales are found at run time (spatial.h); with them (the reference),
 * the caller checks afterwards that they give it. A roi input that is not
 * concrete is read at run time. */
static int resolve_declared(const kn_node *n, const int *axes, int n_axes, bool antialias,
                            const kn_ref_tensor *roi, const kn_ref_tensor *sc, const kn_ref_tensor *sz,
                            kn_resize_geom *g, kn_diag *d) {
  int nd;
  const int64_t *os = kn_node_attr_ints(n, "output_shape", &nd);
  if (!os || nd != g->rank) return fail(d, n, "output_shape must have one entry per input dim", os ? nd : 0);
  g->runtime_roi = has_input(n, 1) && !roi;
  if (sc || sz) return 0;
  bool scales = has_input(n, 2), sizes = has_input(n, 3);
  if (scales == sizes)
    return kn_diag_error(d, "node '%s' (%s): needs one of scales and sizes", n->name, n->op_type);
  static const char *const policies[] = {"stretch", "not_larger", "not_smaller"};
  int policy = 0;
  if (sizes && parse_enum(n, "keep_aspect_ratio_policy", "stretch", policies, 3, &policy, d) < 0) return -1;
  bool runtime = scales || policy != 0;
  if (runtime && antialias)
    return kn_diag_error(d, "node '%s' (%s): antialias needs constant scales", n->name, n->op_type);
  g->runtime_sizes = sizes && runtime;
  g->not_larger = policy == 1;
  bool listed[KN_MAX_RANK] = {false};
  for (int i = 0; i < n_axes; i++) {
    int a = axes[i];
    if (os[a] < 1 || os[a] > DIM_MAX) return fail(d, n, "output_shape entry out of range", os[a]);
    if (g->in[a] < 1) return fail(d, n, "empty input dim", g->in[a]);
    listed[a] = true;
    g->runtime[a] = runtime;
    g->scale[a] = runtime ? 0 : (double)os[a] / (double)g->in[a];
    g->out[a] = os[a];
  }
  for (int a = 0; a < g->rank; a++)
    if (!listed[a] && os[a] != g->in[a]) return fail(d, n, "output_shape changes an axis not resized", a);
  return 0;
}

int kn_resize_resolve(const kn_node *n, int64_t opset, const kn_shape *x,
                      const kn_ref_tensor *roi, const kn_ref_tensor *scales,
                      const kn_ref_tensor *sizes, kn_resize_geom *g, kn_diag *d) {
  memset(g, 0, sizeof *g);
  int r = g->rank = x->rank;
  bool upsample = n->op == KN_OP_UPSAMPLE, declared = n->op == KN_OP_RESIZE_DECLARED;
  bool legacy = upsample || opset < 11 || (declared && kn_node_attr_int(n, "legacy", 0) != 0);
  static const char *const modes[] = {"nearest", "linear", "cubic"};
  static const char *const ctms[] = {"half_pixel",  "half_pixel_symmetric", "pytorch_half_pixel",
                                     "align_corners", "asymmetric",         "tf_crop_and_resize"};
  static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  int mode = 0, ctm = KN_CTM_ASYMMETRIC, nearest = KN_NEAREST_FLOOR;
  if (parse_enum(n, "mode", "nearest", modes, 3, &mode, d) < 0) return -1;
  /* Upsample and Resize-10 know "bilinear"-style linear only, asymmetric. */
  if (legacy && mode == KN_RESIZE_CUBIC)
    return kn_diag_error(d, "node '%s' (%s): mode cubic needs Resize opset 11", n->name, n->op_type);
  if (!legacy) {
    if (parse_enum(n, "coordinate_transformation_mode", "half_pixel", ctms, 6, &ctm, d) < 0 ||
        parse_enum(n, "nearest_mode", "round_prefer_floor", nearests, 4, &nearest, d) < 0)
      return -1;
  }
  g->mode = (kn_resize_mode)mode;
  g->ctm = (kn_resize_ctm)ctm;
  g->nearest = (kn_resize_nearest)nearest;
  g->cubic_a = kn_node_attr_float(n, "cubic_coeff_a", -0.75f);
  g->exclude_outside = kn_node_attr_int(n, "exclude_outside", 0) != 0;
  g->extrapolation = kn_node_attr_float(n, "extrapolation_value", 0.0f);
  bool antialias = kn_node_attr_int(n, "antialias", 0) != 0 && mode != KN_RESIZE_NEAREST;
  g->normalize = antialias || g->exclude_outside;
  if (r < 1) return kn_diag_error(d, "node '%s' (%s): input of rank 0", n->name, n->op_type);

  /* axes (opset 18+) */
  int axes[KN_MAX_RANK], n_axes = r;
  for (int a = 0; a < r; a++) axes[a] = a;
  int na;
  const int64_t *ax = kn_node_attr_ints(n, "axes", &na);
  if (ax && !legacy) {
    if (na < 1 || na > r) return fail(d, n, "axes has a bad number of entries", na);
    uint32_t seen = 0;
    for (int i = 0; i < na; i++) {
      int a = ax[i] < -r || ax[i] >= r ? -1 : (int)(ax[i] < 0 ? ax[i] + r : ax[i]);
      if (a < 0 || (seen >> a) & 1) return fail(d, n, "axes entry out of range or repeated", ax[i]);
      seen |= 1u << a;
      axes[i] = a;
    }
    n_axes = na;
  }
  g->n_axes = n_axes;
  for (int a = 0; a < r; a++) g->scale_index[a] = -1;
  for (int i = 0; i < n_axes; i++) g->axes[i] = axes[i], g->scale_index[axes[i]] = i;
  for (int a = 0; a < r; a++) {
    g->in[a] = g->out[a] = x->dim[a];
    g->scale[a] = 1;
    g->roi_start[a] = 0;
    g->roi_end[a] = 1;
  }
  const kn_ref_tensor *sc = present(scales) ? scales : NULL, *sz = present(sizes) ? sizes : NULL;
  double scale_attr[KN_MAX_RANK];
  int nf = 0;
  const kn_attr *sa = upsample ? kn_node_attr(n, "scales") : NULL;
  if (sa && sa->kind == KN_ATTR_FLOATS && !sc) {
    nf = sa->n;
    if (nf != r) return fail(d, n, "scales attribute must have one entry per input dim", nf);
    for (int i = 0; i < nf; i++) scale_attr[i] = sa->floats[i];
  }
  if (sc && sz) return kn_diag_error(d, "node '%s' (%s): both scales and sizes are given", n->name, n->op_type);
  if (declared && resolve_declared(n, axes, n_axes, antialias, roi, sc, sz, g, d) < 0) return -1;
  if (declared && !sc && !sz) {
    /* the scales are found at run time: out[] is the declared shape */
  } else if (sz) {
    if (!kn_dtype_is_int(sz->dtype) || kn_ref_numel(&sz->shape) != n_axes)
      return fail(d, n, "sizes must hold one integer per resized axis", kn_ref_numel(&sz->shape));
    static const char *const policies[] = {"stretch", "not_larger", "not_smaller"};
    int policy = 0;
    if (parse_enum(n, "keep_aspect_ratio_policy", "stretch", policies, 3, &policy, d) < 0) return -1;
    double keep = policy == 1 ? INFINITY : -INFINITY;
    for (int i = 0; i < n_axes; i++) {
      int a = axes[i];
      int64_t s = kn_ref_load_int(sz->dtype, sz->data, i);
      if (s < 1 || s > DIM_MAX) return fail(d, n, "sizes entry out of range", s);
      if (g->in[a] < 1) return fail(d, n, "empty input dim", g->in[a]);
      g->out[a] = s;
      g->scale[a] = (double)s / (double)g->in[a];
      keep = policy == 1 ? fmin(keep, g->scale[a]) : fmax(keep, g->scale[a]);
    }
    if (policy != 0)
      for (int i = 0; i < n_axes; i++) {
        int a = axes[i];
        g->scale[a] = keep;
        g->out[a] = (int64_t)(keep * (double)g->in[a] + 0.5);
      }
  } else if (sc || nf) {
    int count = sc ? (int)kn_ref_numel(&sc->shape) : nf;
    if ((sc && !kn_dtype_is_float(sc->dtype)) || count != n_axes)
      return fail(d, n, "scales must hold one float per resized axis", count);
    for (int i = 0; i < n_axes; i++) {
      int a = axes[i];
      double s = sc ? (double)(float)kn_ref_load(sc->dtype, sc->data, i) : scale_attr[i];
      if (!(s > 0) || s > 1e6) return kn_diag_error(d, "node '%s' (%s): scale %g is not positive", n->name, n->op_type, s);
      g->scale[a] = s;
      double o = floor(s * (double)g->in[a]);
      if (o > (double)DIM_MAX) return fail(d, n, "output dim too large", (long long)o);
      g->out[a] = (int64_t)o;
    }
  } else {
    return kn_diag_error(d, "node '%s' (%s): needs constant scales or sizes", n->name, n->op_type);
  }
  if (declared && (sc || sz)) {
    int nd;
    const int64_t *os = kn_node_attr_ints(n, "output_shape", &nd);
    for (int a = 0; a < r; a++)
      if (g->out[a] != os[a])
        return kn_diag_error(d, "node '%s' (%s): scales / sizes give dim %d = %lld, the model declares %lld",
                             n->name, n->op_type, a, (long long)g->out[a], (long long)os[a]);
  }
  if (present(roi)) {
    int count = (int)kn_ref_numel(&roi->shape);
    if (!kn_dtype_is_float(roi->dtype) || count != 2 * n_axes)
      return fail(d, n, "roi must hold 2 floats per resized axis", count);
    for (int i = 0; i < n_axes; i++) {
      g->roi_start[axes[i]] = kn_ref_load(roi->dtype, roi->data, i);
      g->roi_end[axes[i]] = kn_ref_load(roi->dtype, roi->data, n_axes + i);
    }
  }
  for (int a = 0; a < r; a++) {
    double s = g->scale[a];
    g->identity[a] = fabs(s - 1.0) <= 1e-9 && g->out[a] == g->in[a] && fabs(g->roi_start[a]) <= 1e-9 &&
                     fabs(g->roi_end[a] - 1.0) <= 1e-9;
    /* a run-time scale on an axis of 1 element kept at 1 reads element 0
     * whatever its value (the weights sum to 1), unless extrapolating */
    if (g->runtime[a] && g->in[a] == 1 && g->out[a] == 1 && g->ctm != KN_CTM_TF_CROP_AND_RESIZE)
      g->runtime[a] = false, g->identity[a] = true;
    /* a run-time roi may crop a listed axis */
    if (g->runtime_roi && g->ctm == KN_CTM_TF_CROP_AND_RESIZE && g->scale_index[a] >= 0) g->identity[a] = false;
    if (g->runtime[a]) s = 1; /* no antialias: the support stays 1 */
    if (!g->identity[a] && (x->batch_mask >> a) & 1)
      return kn_diag_error(d, "node '%s' (%s): resizing the batch dim %d", n->name, n->op_type, a);
    if (!g->identity[a] && g->in[a] < 1) return fail(d, n, "resizing an empty dim", a);
    g->support[a] = antialias && s < 1 ? s : 1.0;
    double reach = mode == KN_RESIZE_CUBIC ? 2.0 : 1.0;
    double first = floor(-reach / g->support[a]) + 1; /* first tap offset */
    if (first < -64) return kn_diag_error(d, "node '%s' (%s): antialias scale %g too small", n->name, n->op_type, s);
    g->taps[a] = mode == KN_RESIZE_NEAREST ? 1 : (int)(2 - 2 * first);
  }
  return 0;
}

/* ---- ConvTranspose ---- */


int kn_convt_resolve(const kn_node *n, const kn_shape *x, const kn_shape *w, kn_convt_geom *g,
                     kn_diag *d) {
  memset(g, 0, sizeof *g);
  int r = x->rank, nsp = r - 2;
  if (nsp < 1 || nsp > 3 || w->rank != r)
    return kn_diag_error(d, "node '%s' (%s): input/weight ranks %d/%d (expected 3-5, equal)", n->name,
                         n->op_type, r, w->rank);
  if (w->batch_mask || (x->batch_mask & ~1u))
    return kn_diag_error(d, "node '%s' (%s): batch-sized weight or spatial dims", n->name, n->op_type);
  g->n_spatial = nsp;
  g->group = kn_node_attr_int(n, "group", 1);
  g->in_channels = x->dim[1];
  if (g->group < 1 || g->in_channels % g->group || w->dim[0] != g->in_channels)
    return kn_diag_error(d, "node '%s' (%s): group %lld with %lld input channels and weight dim 0 = %lld",
                         n->name, n->op_type, (long long)g->group, (long long)g->in_channels,
                         (long long)w->dim[0]);
  g->out_channels = w->dim[1] * g->group;
  int64_t pads[2 * KN_MAX_RANK], opad[KN_MAX_RANK], oshape[KN_MAX_RANK], ks[KN_MAX_RANK];
  if (kn_window_ints_attr(n, "strides", nsp, 1, 1, g->stride, d) < 0 ||
      kn_window_ints_attr(n, "dilations", nsp, 1, 1, g->dilation, d) < 0 ||
      kn_window_ints_attr(n, "pads", 2 * nsp, 0, 0, pads, d) < 0 ||
      kn_window_ints_attr(n, "output_padding", nsp, 0, 0, opad, d) < 0 ||
      kn_window_ints_attr(n, "kernel_shape", nsp, 0, 0, ks, d) < 0)
    return -1;
  int n_os;
  const int64_t *os = kn_node_attr_ints(n, "output_shape", &n_os);
  if (os && n_os != nsp && n_os != r)
    return fail(d, n, "output_shape has a bad number of entries", n_os);
  for (int i = 0; i < nsp && os; i++) {
    oshape[i] = os[n_os == r ? i + 2 : i];
    if (oshape[i] < 1 || oshape[i] > DIM_MAX) return fail(d, n, "output_shape entry out of range", oshape[i]);
  }
  const char *auto_pad = kn_node_attr_string(n, "auto_pad", "NOTSET");
  bool same_upper = !strcmp(auto_pad, "SAME_UPPER"), same_lower = !strcmp(auto_pad, "SAME_LOWER");
  if (!same_upper && !same_lower && strcmp(auto_pad, "VALID") && strcmp(auto_pad, "NOTSET") && auto_pad[0])
    return kn_diag_error(d, "node '%s' (%s): unknown auto_pad '%s'", n->name, n->op_type, auto_pad);
  for (int i = 0; i < nsp; i++) {
    int64_t k = w->dim[2 + i];
    if (ks[i] && ks[i] != k) return fail(d, n, "kernel_shape differs from the weights", ks[i]);
    g->in[i] = x->dim[2 + i];
    g->kernel[i] = k;
    if (k < 1) return fail(d, n, "empty kernel", k);
    /* ONNX: each output_padding must be less than its stride or dilation */
    if (opad[i] >= g->stride[i] && opad[i] >= g->dilation[i])
      return kn_diag_error(d,
                           "node '%s' (%s): output_padding[%d] = %lld must be less than strides[%d] = %lld "
                           "or dilations[%d] = %lld",
                           n->name, n->op_type, i, (long long)opad[i], i, (long long)g->stride[i], i,
                           (long long)g->dilation[i]);
    int64_t span, taps; /* both below 2^41, so full and in * stride below stay in range */
    if (__builtin_mul_overflow(g->stride[i], g->in[i] - 1, &span) || span > 2 * DIM_MAX ||
        __builtin_mul_overflow(k - 1, g->dilation[i], &taps) || taps > 2 * DIM_MAX)
      return fail(d, n, "output spatial size out of range", (long long)g->in[i]);
    int64_t full = span + opad[i] + taps + 1;
    if (same_upper || same_lower) {
      int64_t out = os ? oshape[i] : g->in[i] * g->stride[i];
      int64_t total = full - out;
      g->pad_begin[i] = same_upper ? total / 2 : total - total / 2;
      g->out[i] = out;
    } else {
      g->pad_begin[i] = pads[i];
      g->out[i] = os ? oshape[i] : full - pads[i] - pads[nsp + i];
    }
    if (g->out[i] < 1 || g->out[i] > DIM_MAX) return fail(d, n, "output spatial size out of range", g->out[i]);
  }
  return 0;
}

/* ---- Col2Im ---- */

int kn_col2im_resolve(const kn_node *n, const kn_shape *x, const int64_t *image, int n_image,
                      const int64_t *block, int n_block, kn_col2im_geom *g, kn_diag *d) {
  memset(g, 0, sizeof *g);
  int nsp = n_image;
  if (x->rank != 3 || nsp < 1 || nsp > 6 || n_block != nsp)
    return kn_diag_error(d, "node '%s' (%s): input rank %d with %d image / %d block dims", n->name,
                         n->op_type, x->rank, n_image, n_block);
  if (x->batch_mask & ~1u) return kn_diag_error(d, "node '%s' (%s): batch-sized column dims", n->name, n->op_type);
  g->n_spatial = nsp;
  int64_t pads[2 * KN_MAX_RANK], prod = 1, count = 1;
  if (kn_window_ints_attr(n, "strides", nsp, 1, 1, g->stride, d) < 0 ||
      kn_window_ints_attr(n, "dilations", nsp, 1, 1, g->dilation, d) < 0 ||
      kn_window_ints_attr(n, "pads", 2 * nsp, 0, 0, pads, d) < 0)
    return -1;
  for (int i = 0; i < nsp; i++) {
    if (image[i] < 1 || image[i] > DIM_MAX) return fail(d, n, "image_shape entry out of range", image[i]);
    if (block[i] < 1 || block[i] > DIM_MAX) return fail(d, n, "block_shape entry out of range", block[i]);
    g->image[i] = image[i];
    g->block[i] = block[i];
    g->pad_begin[i] = pads[i];
    int64_t span = image[i] + pads[i] + pads[nsp + i] - (block[i] - 1) * g->dilation[i] - 1;
    if (span < 0) return fail(d, n, "block larger than the padded image", block[i]);
    g->blocks[i] = span / g->stride[i] + 1;
    prod *= block[i];
    count *= g->blocks[i];
    if (prod > DIM_MAX || count > DIM_MAX) return fail(d, n, "too many blocks", count);
  }
  if (x->dim[1] % prod) return fail(d, n, "input dim 1 is not a multiple of prod(block_shape)", x->dim[1]);
  if (x->dim[2] != count) return fail(d, n, "input dim 2 differs from the number of blocks", x->dim[2]);
  g->channels = x->dim[1] / prod;
  return 0;
}
