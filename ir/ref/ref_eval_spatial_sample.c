/* ref_eval_spatial_sample.c — the reference interpreter for the sampling ops
 * of the spatial family (spatial.h): GridSample, AffineGrid. Plain loops in
 * double precision, following the ONNX reference's steps (coordinates are
 * rounded to the input's dtype where the reference stores them). */
#include <math.h>
#include <string.h>

#include "ir/shape/spatial.h"

/* ---- GridSample ---- */

typedef enum { GS_ZEROS, GS_BORDER, GS_REFLECTION } gs_padding;

/* Reflects x into [lo, hi] by its nearer border, repeatedly. */
static double gs_reflect(double x, double lo, double hi) {
  double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    double dx = lo - x, n = floor(dx / range), r = dx - n * range;
    return fmod(n, 2) == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double dx = x - hi, n = floor(dx / range), r = dx - n * range;
    return fmod(n, 2) == 0 ? hi - r : lo + r;
  }
  return x;
}

static double gs_kernel(double dist, bool cubic) {
  double d = fabs(dist), A = -0.75;
  if (!cubic) return fmax(0.0, 1 - d);
  if (d <= 1) return ((A + 2) * d - (A + 3)) * d * d + 1;
  if (d < 2) return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
  return 0;
}

/* Round to the storage dtype of the coordinates (the reference keeps them
 * in float32 arrays for float32 inputs). */
static double as_dtype(kn_dtype t, double v) { return t == KN_DT_F64 ? v : (double)(float)v; }

/* Index of integer tap i along an axis of size dim: -1 when it reads 0. */
static int64_t gs_tap(int64_t i, int64_t dim, gs_padding pad, double lo, double hi) {
  if (pad == GS_ZEROS) return i >= 0 && i < dim ? i : -1;
  if (pad == GS_BORDER) return i < 0 ? 0 : i > dim - 1 ? dim - 1 : i;
  int64_t r = (int64_t)gs_reflect((double)i, lo, hi);
  return r < 0 ? 0 : r > dim - 1 ? dim - 1 : r;
}

static int ref_grid_sample(kn_ref_call *c) {
  const kn_node *n = c->node;
  const kn_ref_tensor *x = &c->in[0], *grid = &c->in[1];
  kn_ref_tensor *y = &c->out[0];
  const char *mode_s = kn_node_attr_string(n, "mode", "linear");
  const char *pad_s = kn_node_attr_string(n, "padding_mode", "zeros");
  int mode = !strcmp(mode_s, "nearest") ? 0 : (!strcmp(mode_s, "linear") || !strcmp(mode_s, "bilinear")) ? 1
             : (!strcmp(mode_s, "cubic") || !strcmp(mode_s, "bicubic")) ? 2 : -1;
  gs_padding pad = !strcmp(pad_s, "zeros") ? GS_ZEROS : !strcmp(pad_s, "border") ? GS_BORDER : GS_REFLECTION;
  if (mode < 0) return kn_ref_error(c, "unknown mode '%s'", mode_s);
  if (pad == GS_REFLECTION && strcmp(pad_s, "reflection")) return kn_ref_error(c, "unknown padding_mode '%s'", pad_s);
  bool align = kn_node_attr_int(n, "align_corners", 0) != 0;
  int nsp = x->shape.rank - 2;
  int64_t N = x->shape.dim[0], C = x->shape.dim[1], in_sp = 1, out_sp = 1;
  int64_t dims[3], odims[3];
  for (int i = 0; i < nsp; i++) {
    dims[i] = x->shape.dim[2 + i], odims[i] = y->shape.dim[2 + i];
    in_sp *= dims[i], out_sp *= odims[i];
  }
  int taps = mode == 0 ? 1 : mode == 1 ? 2 : 4;
  int64_t n_taps = 1;
  for (int i = 0; i < nsp; i++) n_taps *= taps;
  for (int64_t b = 0; b < N; b++)
    for (int64_t o = 0; o < out_sp; o++) {
      double xc[3], lo[3], hi[3];
      for (int i = 0; i < nsp; i++) {
        double g = kn_ref_load(grid->dtype, grid->data, (b * out_sp + o) * nsp + (nsp - 1 - i));
        double len = (double)dims[i];
        double v = as_dtype(x->dtype, align ? (g + 1) / 2.0 * (len - 1) : ((g + 1) * len - 1) / 2.0);
        lo[i] = align ? 0 : -0.5;
        hi[i] = align ? len - 1 : len - 0.5;
        if (mode == 0) v = nearbyint(v);
        if (v < lo[i] || v > hi[i]) {
          if (pad == GS_BORDER) v = fmin(fmax(v, 0), len - 1);
          else if (pad == GS_REFLECTION) v = as_dtype(x->dtype, gs_reflect(v, lo[i], hi[i]));
        }
        xc[i] = v;
      }
      for (int64_t ch = 0; ch < C; ch++) {
        double acc = 0;
        for (int64_t t = 0; t < n_taps; t++) {
          double w = 1;
          int64_t off = 0, rem = t;
          bool zero = false;
          for (int i = nsp - 1; i >= 0; i--) {
            int j = (int)(rem % taps);
            rem /= taps;
            int64_t p;
            /* as the kernels: the coordinate clamped to +-1e15 (a NaN to -1e15), then converted */
            double cl = fmin(fmax(xc[i], -1e15), 1e15);
            if (mode == 0) {
              p = (int64_t)cl;
            } else {
              p = (int64_t)floor(cl) + j - (mode == 2 ? 1 : 0);
              w *= gs_kernel((double)p - xc[i], mode == 2);
            }
            int64_t idx = gs_tap(p, dims[i], pad, lo[i], hi[i]);
            if (idx < 0) zero = true;
            int64_t stride = 1;
            for (int k = i + 1; k < nsp; k++) stride *= dims[k];
            off += idx * stride;
          }
          if (!zero) acc += w * kn_ref_load(x->dtype, x->data, (b * C + ch) * in_sp + off);
        }
        kn_ref_store(y->dtype, y->data, (b * C + ch) * out_sp + o, acc);
      }
    }
  return 0;
}

/* ---- AffineGrid ---- */

/* Normalised base coordinate of index i along an axis of size len. */
static double affine_base(int64_t i, int64_t len, bool align) {
  if (align) return len == 1 ? -1.0 : -1.0 + (double)i * (2.0 / (double)(len - 1));
  return -1.0 + 1.0 / (double)len + (double)i * (2.0 / (double)len);
}

static int ref_affine_grid(kn_ref_call *c) {
  const kn_ref_tensor *theta = &c->in[0];
  kn_ref_tensor *y = &c->out[0];
  bool align = kn_node_attr_int(c->node, "align_corners", 0) != 0;
  int nsp = y->shape.rank - 2;
  int64_t oi[KN_MAX_RANK] = {0}, e = 0;
  if (kn_ref_numel(&y->shape) == 0) return 0;
  do {
    int64_t b = oi[0], j = oi[nsp + 1];
    double acc = kn_ref_load(theta->dtype, theta->data, (b * nsp + j) * (nsp + 1) + nsp);
    for (int k = 0; k < nsp; k++) {
      int axis = nsp - 1 - k; /* component k (x, y, z) runs along spatial axis nsp-1-k */
      double base = affine_base(oi[1 + axis], y->shape.dim[1 + axis], align);
      acc += kn_ref_load(theta->dtype, theta->data, (b * nsp + j) * (nsp + 1) + k) * base;
    }
    kn_ref_store(y->dtype, y->data, e++, acc);
  } while (kn_ref_next_index(&y->shape, oi));
  return 0;
}

int kn_ref_spatial_sample(kn_ref_call *c) {
  switch (c->node->op) {
  case KN_OP_GRID_SAMPLE:
    if (c->n_in < 2 || !c->in[1].data) return kn_ref_error(c, "missing grid");
    return ref_grid_sample(c);
  case KN_OP_AFFINE_GRID: return ref_affine_grid(c);
  default: return kn_ref_unpool_roi(c);
  }
}
