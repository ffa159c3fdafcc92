/* pass_decompose_misc.c — small composite ops as primitive ops (the rewrites
 * of ir/passes/pass_decompose.c; builder in rewrite.h):
 *
 *   Momentum, Adam, Adagrad   the ai.onnx.preview.training updates: plain
 *                             elementwise math per optimized tensor (inputs R,
 *                             T, then the Xs, Gs, Vs, Hs); the T > 0 tests are
 *                             Where on the run-time step count
 *   BatchNormalization        training mode only (training_mode = 1): batch
 *                             mean and population variance by ReduceMean
 *                             over all axes but 1; running mean/var outputs
 *   Dropout                   training mode with ratio 0 (both constant):
 *                             Identity and an all-true mask (Expand)
 *   MaxPool with Indices      2-D only: Y is a MaxPool without the second
 *                             output; Indices picks, over the window's taps in
 *                             scan order (the first maximum wins, as the
 *                             reference), the flat input index of the tap whose
 *                             strided Slice of the padded input equals Y:
 *                             Where chains over constant index planes
 *                             (storage_order 1 = column-major H/W)
 *   Binarizer (ai.onnx.ml)    Cast(x > threshold)
 *   ArrayFeatureExtractor     Gather of the flattened indices on the last axis
 *
 * TfIdfVectorizer, TreeEnsemble and MelWeightMatrix are in
 * pass_decompose_ml.c; this file also says which nodes of the family are
 * composites (kn_decompose_misc_arity).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/passes/decompose.h"
#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"

/* A constant value's element 0, or `dflt` when v is omitted; false when v is
 * present but not constant. */
static bool const_scalar(const kn_graph *g, int v, double dflt, double *out) {
  *out = dflt;
  if (v < 0) return true;
  if (!g->values[v].data || g->values[v].dtype == KN_DT_INVALID) return false;
  *out = kn_ref_load(g->values[v].dtype, g->values[v].data, 0);
  return true;
}

/* Dropout with a constant training_mode that is true and a constant ratio 0
 * (inference-mode Dropout is left to fold_constants, a random one to the
 * shape rule's diagnostic). */
static bool dropout_deterministic(const kn_graph *g, const kn_node *n) {
  double training, ratio;
  if (n->n_in < 3 || !const_scalar(g, n->in[2], 0, &training) || training == 0) return false;
  return const_scalar(g, n->in[1], 0.5, &ratio) && ratio == 0;
}

bool kn_decompose_misc_arity(const kn_graph *g, const kn_node *n, int *min_in, int *max_in, int *max_out) {
  *max_out = 1;
  switch (n->op) {
  case KN_OP_MOMENTUM: case KN_OP_ADAGRAD: *min_in = 5, *max_in = 2 + 3 * 64, *max_out = 2 * 64; return true;
  case KN_OP_ADAM: *min_in = 6, *max_in = 2 + 4 * 64, *max_out = 3 * 64; return true;
  case KN_OP_BATCH_NORM:
    *min_in = *max_in = 5, *max_out = 3;
    return kn_node_attr_int(n, "training_mode", 0) != 0;
  case KN_OP_ML_BINARIZER: *min_in = *max_in = 1; return true;
  case KN_OP_ML_ARRAY_FEATURE_EXTRACTOR: *min_in = *max_in = 2; return true;
  case KN_OP_TFIDF_VECTORIZER: *min_in = *max_in = 1; return true;
  case KN_OP_ML_TREE_ENSEMBLE: *min_in = *max_in = 1; return true;
  case KN_OP_MEL_WEIGHT_MATRIX: *min_in = *max_in = 5; return kn_decompose_mel_ready(g, n);
  case KN_OP_DROPOUT: *min_in = 1, *max_in = 3, *max_out = 2; return dropout_deterministic(g, n);
  case KN_OP_MAX_POOL: { /* 2-D with Indices only; other ranks keep the plain op (the reference has them) */
    int nk = 0;
    kn_node_attr_ints(n, "kernel_shape", &nk);
    *min_in = *max_in = 1, *max_out = 2;
    return n->n_out > 1 && n->out[1] >= 0 && nk == 2;
  }
  default: return false;
  }
}

/* Scalar float constant of dtype t. */
static int fscalar(kn_rw *c, kn_dtype t, double v) { return kn_rw_scalar(c, t, v); }

static int mul_s(kn_rw *c, kn_dtype t, double k, int a) { return kn_rw_bin(c, KN_OP_MUL, fscalar(c, t, k), a); }

/* ---- training updates ---- */

/* norm * x + g */
static int regularized(kn_rw *c, kn_dtype t, float norm, int x, int g) {
  if (norm == 0) return g;
  return kn_rw_bin(c, KN_OP_ADD, mul_s(c, t, norm, x), g);
}

/* Checks R, T and the per-tensor groups; sets *count (tensors optimized). */
static int training_inputs(kn_rw *c, int groups, kn_dtype *t, int *count) {
  const kn_node *n = &c->g->nodes[c->node];
  if ((n->n_in - 2) % groups != 0)
    return kn_rw_fail(c, "expects R, T and %d inputs per optimized tensor, got %d inputs", groups, n->n_in);
  *count = (n->n_in - 2) / groups;
  if (n->n_out > (groups == 4 ? 3 : 2) * *count)
    return kn_rw_fail(c, "has %d outputs for %d optimized tensors", n->n_out, *count);
  for (int k = 0; k < n->n_in; k++)
    if (kn_rw_in(c, k) < 0) return kn_rw_fail(c, "input %d is missing", k);
  if (kn_shape_numel_max(&kn_rw_val(c, kn_rw_in(c, 0))->shape, 1) != 1 ||
      kn_shape_numel_max(&kn_rw_val(c, kn_rw_in(c, 1))->shape, 1) != 1)
    return kn_rw_fail(c, "inputs R and T must be scalars");
  if (!kn_dtype_is_int(kn_rw_val(c, kn_rw_in(c, 1))->dtype))
    return kn_rw_fail(c, "input T must be an integer");
  *t = kn_rw_val(c, kn_rw_in(c, 2))->dtype;
  if (!kn_dtype_is_float(*t)) return kn_rw_fail(c, "optimized tensors must be floating point");
  return 0;
}

/* Where(T > 0, a, b) for scalars a, b. */
static int if_started(kn_rw *c, int a, int b) {
  int tv = kn_rw_in(c, 1);
  int pos = kn_rw_bin(c, KN_OP_GREATER, tv, kn_rw_scalar(c, kn_rw_val(c, tv)->dtype, 0));
  int in[3] = {pos, a, b};
  return kn_rw_op(c, KN_OP_WHERE, in, 3);
}

static int momentum(kn_rw *c) {
  const kn_node *n = &c->g->nodes[c->node];
  kn_dtype t;
  int count;
  if (training_inputs(c, 3, &t, &count) < 0) return -1;
  static const char *const required[] = {"alpha", "beta", "mode", "norm_coefficient"};
  for (size_t k = 0; k < sizeof required / sizeof *required; k++)
    if (!kn_node_attr(n, required[k])) return kn_rw_fail(c, "required attribute '%s' is missing", required[k]);
  const char *mode = kn_node_attr_string(n, "mode", "standard");
  bool nesterov = strcmp(mode, "nesterov") == 0;
  if (!nesterov && strcmp(mode, "standard") != 0) return kn_rw_fail(c, "attribute 'mode' = '%s' is unknown", mode);
  float alpha = kn_node_attr_float(n, "alpha", 0), beta = kn_node_attr_float(n, "beta", 0);
  float norm = kn_node_attr_float(n, "norm_coefficient", 0);
  int r = kn_rw_cast(c, kn_rw_in(c, 0), t);
  int beta_adj = if_started(c, fscalar(c, t, beta), fscalar(c, t, 1)); /* 1 at the first step */
  for (int i = 0; i < count; i++) {
    int x = kn_rw_in(c, 2 + i), g = kn_rw_in(c, 2 + count + i), v = kn_rw_in(c, 2 + 2 * count + i);
    int gr = regularized(c, t, norm, x, g);
    int v_new = kn_rw_bin(c, KN_OP_ADD, mul_s(c, t, alpha, v), kn_rw_bin(c, KN_OP_MUL, beta_adj, gr));
    int step = nesterov ? kn_rw_bin(c, KN_OP_ADD, gr, mul_s(c, t, alpha, v_new)) : v_new;
    int x_new = kn_rw_bin(c, KN_OP_SUB, x, kn_rw_bin(c, KN_OP_MUL, r, step));
    kn_rw_output(c, i, x_new);
    kn_rw_output(c, count + i, v_new);
  }
  return 0;
}

static int adagrad(kn_rw *c) {
  const kn_node *n = &c->g->nodes[c->node];
  kn_dtype t;
  int count;
  if (training_inputs(c, 3, &t, &count) < 0) return -1;
  float decay = kn_node_attr_float(n, "decay_factor", 0), eps = kn_node_attr_float(n, "epsilon", 0);
  float norm = kn_node_attr_float(n, "norm_coefficient", 0);
  /* r / (1 + T * decay_factor) */
  int steps = kn_rw_cast(c, kn_rw_in(c, 1), t);
  int denom = kn_rw_bin(c, KN_OP_ADD, fscalar(c, t, 1), mul_s(c, t, decay, steps));
  int r = kn_rw_bin(c, KN_OP_DIV, kn_rw_cast(c, kn_rw_in(c, 0), t), denom);
  for (int i = 0; i < count; i++) {
    int x = kn_rw_in(c, 2 + i), g = kn_rw_in(c, 2 + count + i), h = kn_rw_in(c, 2 + 2 * count + i);
    int gr = regularized(c, t, norm, x, g);
    int h_new = kn_rw_bin(c, KN_OP_ADD, h, kn_rw_bin(c, KN_OP_MUL, gr, gr));
    int h_sqrt = kn_rw_bin(c, KN_OP_ADD, kn_rw_un(c, KN_OP_SQRT, h_new), fscalar(c, t, eps));
    int step = kn_rw_bin(c, KN_OP_DIV, kn_rw_bin(c, KN_OP_MUL, r, gr), h_sqrt);
    kn_rw_output(c, i, kn_rw_bin(c, KN_OP_SUB, x, step));
    kn_rw_output(c, count + i, h_new);
  }
  return 0;
}

static int adam(kn_rw *c) {
  const kn_node *n = &c->g->nodes[c->node];
  kn_dtype t;
  int count;
  if (training_inputs(c, 4, &t, &count) < 0) return -1;
  float alpha = kn_node_attr_float(n, "alpha", 0.9f), beta = kn_node_attr_float(n, "beta", 0.999f);
  float eps = kn_node_attr_float(n, "epsilon", 0), norm = kn_node_attr_float(n, "norm_coefficient", 0);
  float post = kn_node_attr_float(n, "norm_coefficient_post", 0);
  /* bias correction r * sqrt(1 - beta^T) / (1 - alpha^T) once T > 0 */
  int r = kn_rw_cast(c, kn_rw_in(c, 0), t);
  int steps = kn_rw_cast(c, kn_rw_in(c, 1), t);
  int one = fscalar(c, t, 1);
  int beta_t = kn_rw_bin(c, KN_OP_SUB, one, kn_rw_bin(c, KN_OP_POW, fscalar(c, t, beta), steps));
  int alpha_t = kn_rw_bin(c, KN_OP_SUB, one, kn_rw_bin(c, KN_OP_POW, fscalar(c, t, alpha), steps));
  int corrected = kn_rw_bin(c, KN_OP_DIV, kn_rw_bin(c, KN_OP_MUL, r, kn_rw_un(c, KN_OP_SQRT, beta_t)), alpha_t);
  int r_adj = if_started(c, corrected, r);
  for (int i = 0; i < count; i++) {
    int x = kn_rw_in(c, 2 + i), g = kn_rw_in(c, 2 + count + i);
    int v = kn_rw_in(c, 2 + 2 * count + i), h = kn_rw_in(c, 2 + 3 * count + i);
    int gr = regularized(c, t, norm, x, g);
    int v_new = kn_rw_bin(c, KN_OP_ADD, mul_s(c, t, alpha, v), mul_s(c, t, 1.0 - (double)alpha, gr));
    int h_new = kn_rw_bin(c, KN_OP_ADD, mul_s(c, t, beta, h),
                          mul_s(c, t, 1.0 - (double)beta, kn_rw_bin(c, KN_OP_MUL, gr, gr)));
    int h_sqrt = kn_rw_bin(c, KN_OP_ADD, kn_rw_un(c, KN_OP_SQRT, h_new), fscalar(c, t, eps));
    int step = kn_rw_bin(c, KN_OP_MUL, r_adj, kn_rw_bin(c, KN_OP_DIV, v_new, h_sqrt));
    int x_new = kn_rw_bin(c, KN_OP_SUB, x, step);
    if (post != 0) x_new = mul_s(c, t, 1.0 - (double)post, x_new);
    kn_rw_output(c, i, x_new);
    kn_rw_output(c, count + i, v_new);
    kn_rw_output(c, 2 * count + i, h_new);
  }
  return 0;
}

/* ---- BatchNormalization, training mode ---- */

static int batch_norm_training(kn_rw *c) {
  const kn_node *n = &c->g->nodes[c->node];
  int x = kn_rw_in(c, 0);
  const kn_value *xv = kn_rw_val(c, x);
  kn_dtype t = xv->dtype;
  int rank = xv->shape.rank;
  if (rank < 2) return kn_rw_fail(c, "input X must have rank 2 or more, got %d", rank);
  if (!kn_dtype_is_float(t)) return kn_rw_fail(c, "input X must be floating point");
  int64_t channels = xv->shape.dim[1];
  if (xv->shape.batch_mask & 2u) return kn_rw_fail(c, "the channel dim is the batch dim");
  for (int k = 1; k < 5; k++) {
    const kn_value *p = kn_rw_val(c, kn_rw_in(c, k));
    if (p->shape.rank != 1 || p->shape.dim[0] != channels || p->shape.batch_mask)
      return kn_rw_fail(c, "input %d must have shape [%lld]", k, (long long)channels);
  }
  float eps = kn_node_attr_float(n, "epsilon", 1e-5f), momentum = kn_node_attr_float(n, "momentum", 0.9f);
  int64_t axes[KN_MAX_RANK], spatial[KN_MAX_RANK];
  int n_axes = 0;
  for (int i = 0; i < rank; i++)
    if (i != 1) axes[n_axes++] = i;
  for (int i = 0; i < rank - 2; i++) spatial[i] = i + 1;
  int mean = kn_rw_reduce(c, KN_OP_REDUCE_MEAN, x, axes, n_axes, true);
  int centered = kn_rw_bin(c, KN_OP_SUB, x, mean);
  int var = kn_rw_reduce(c, KN_OP_REDUCE_MEAN, kn_rw_bin(c, KN_OP_MUL, centered, centered), axes, n_axes, true);
  int std_dev = kn_rw_un(c, KN_OP_SQRT, kn_rw_bin(c, KN_OP_ADD, var, fscalar(c, t, eps)));
  int scale = kn_rw_unsqueeze(c, kn_rw_cast(c, kn_rw_in(c, 1), t), spatial, rank - 2);
  int bias = kn_rw_unsqueeze(c, kn_rw_cast(c, kn_rw_in(c, 2), t), spatial, rank - 2);
  int y = kn_rw_bin(c, KN_OP_ADD, kn_rw_bin(c, KN_OP_MUL, kn_rw_bin(c, KN_OP_DIV, centered, std_dev), scale), bias);
  kn_rw_output(c, 0, y);
  int64_t flat[1] = {channels};
  for (int k = 0; k < 2; k++) {
    if (k + 1 >= n->n_out) break;
    int batch_stat = kn_rw_reshape(c, k == 0 ? mean : var, flat, 1);
    int running = kn_rw_cast(c, kn_rw_in(c, 3 + k), t);
    int out = kn_rw_bin(c, KN_OP_ADD, mul_s(c, t, momentum, running), mul_s(c, t, 1.0 - (double)momentum, batch_stat));
    kn_rw_output(c, 1 + k, out);
  }
  return 0;
}

/* ---- MaxPool with Indices ---- */

static int max_pool_indices(kn_rw *c) {
  const kn_node *n = &c->g->nodes[c->node];
  int x = kn_rw_in(c, 0);
  const kn_value *xv = kn_rw_val(c, x);
  kn_dtype t = xv->dtype;
  if (xv->shape.rank != 4) return kn_rw_fail(c, "output Indices is supported for 2-D pooling only");
  if (xv->shape.batch_mask) return kn_rw_fail(c, "output Indices needs static dims");
  int nk = 0;
  const int64_t *ks = kn_node_attr_ints(n, "kernel_shape", &nk);
  if (!ks || nk != 2) return kn_rw_fail(c, "kernel_shape must have 2 entries");
  int64_t batch = xv->shape.dim[0], chans = xv->shape.dim[1], in_sp[2] = {xv->shape.dim[2], xv->shape.dim[3]};
  kn_window w;
  if (kn_window_resolve(n, 2, in_sp, ks, true, &w, c->d) < 0) return -1;
  if (ks[0] > 1024 || ks[1] > 1024 || w.out[0] > ((int64_t)1 << 24) || w.out[1] > ((int64_t)1 << 24))
    return kn_rw_fail(c, "window or output too large for output Indices");
  int64_t taps = ks[0] * ks[1], plane = w.out[0] * w.out[1];
  if (taps > 1024 || plane > ((int64_t)1 << 24)) return kn_rw_fail(c, "window or output too large for output Indices");
  bool col_major = kn_node_attr_int(n, "storage_order", 0) != 0;

  int y = kn_rw_un(c, KN_OP_MAX_POOL, x);
  static const char *const copied[] = {"kernel_shape", "strides", "pads", "dilations", "auto_pad", "ceil_mode"};
  for (size_t k = 0; k < sizeof copied / sizeof *copied; k++) kn_rw_attr_copy(c, copied[k]);

  /* the input padded with its dtype's lowest value, far enough for every tap */
  int64_t pads[8] = {0};
  for (int i = 0; i < 2; i++) {
    int64_t reach = (w.out[i] - 1) * w.stride[i] + (ks[i] - 1) * w.dilation[i] + 1;
    pads[2 + i] = w.pad_begin[i];
    pads[6 + i] = reach - w.pad_begin[i] - in_sp[i] > 0 ? reach - w.pad_begin[i] - in_sp[i] : 0;
  }
  double lowest = kn_dtype_is_float(t) ? -INFINITY
                  : kn_dtype_is_signed(t) ? -ldexp(1.0, 8 * (int)kn_dtype_size(t) - 1) : 0;
  int pad_in[3] = {x, kn_rw_ints(c, pads, 8), kn_rw_scalar(c, t, lowest)};
  int xp = kn_rw_op(c, KN_OP_PAD, pad_in, 3);

  int64_t *plane_idx = malloc(sizeof(int64_t) * (size_t)plane);
  KN_ASSERT(plane_idx, "out of memory");
  kn_shape ps = {.rank = 4, .dim = {1, 1, w.out[0], w.out[1]}};
  int idx = -1;
  for (int64_t tap = taps - 1; tap >= 0; tap--) { /* the first tap is applied last: it wins ties */
    int64_t kh = tap / ks[1], kw = tap % ks[1];
    for (int64_t oh = 0; oh < w.out[0]; oh++)
      for (int64_t ow = 0; ow < w.out[1]; ow++) {
        int64_t h = oh * w.stride[0] + kh * w.dilation[0] - w.pad_begin[0];
        int64_t wd = ow * w.stride[1] + kw * w.dilation[1] - w.pad_begin[1];
        plane_idx[oh * w.out[1] + ow] = col_major ? h + wd * in_sp[0] : h * in_sp[1] + wd;
      }
    int here = kn_rw_const(c, KN_DT_I64, &ps, plane_idx);
    if (idx < 0) {
      idx = here;
      continue;
    }
    int64_t starts[2] = {kh * w.dilation[0], kw * w.dilation[1]};
    int64_t ends[2] = {starts[0] + (w.out[0] - 1) * w.stride[0] + 1, starts[1] + (w.out[1] - 1) * w.stride[1] + 1};
    int64_t axes[2] = {2, 3}, steps[2] = {w.stride[0], w.stride[1]};
    int sl_in[5] = {xp, kn_rw_ints(c, starts, 2), kn_rw_ints(c, ends, 2), kn_rw_ints(c, axes, 2),
                    kn_rw_ints(c, steps, 2)};
    int hit = kn_rw_bin(c, KN_OP_EQUAL, kn_rw_op(c, KN_OP_SLICE, sl_in, 5), y);
    int wh_in[3] = {hit, here, idx};
    idx = kn_rw_op(c, KN_OP_WHERE, wh_in, 3);
  }
  free(plane_idx);
  /* + (n * C + c) * H * W */
  int64_t *chan = malloc(sizeof(int64_t) * (size_t)(batch * chans + 1));
  KN_ASSERT(chan, "out of memory");
  for (int64_t i = 0; i < batch * chans; i++) chan[i] = i * in_sp[0] * in_sp[1];
  kn_shape cs = {.rank = 4, .dim = {batch, chans, 1, 1}};
  int offset = kn_rw_const(c, KN_DT_I64, &cs, chan);
  free(chan);
  kn_rw_output(c, 1, kn_rw_bin(c, KN_OP_ADD, idx, offset));
  kn_rw_output(c, 0, y); /* last: it moves y's uses to the output value */
  return 0;
}

/* ---- ai.onnx.ml ---- */

static int binarizer(kn_rw *c) {
  int x = kn_rw_in(c, 0);
  kn_dtype t = kn_rw_val(c, x)->dtype;
  if (!kn_dtype_is_float(t) && !kn_dtype_is_int(t)) return kn_rw_fail(c, "input X must be numeric");
  float threshold = kn_node_attr_float(&c->g->nodes[c->node], "threshold", 0);
  int above = kn_rw_bin(c, KN_OP_GREATER, x, kn_rw_scalar(c, t, threshold));
  kn_rw_output(c, 0, kn_rw_cast(c, above, t));
  return 0;
}

static int array_feature_extractor(kn_rw *c) {
  int x = kn_rw_in(c, 0), idx = kn_rw_in(c, 1);
  const kn_value *xv = kn_rw_val(c, x), *iv = kn_rw_val(c, idx);
  if (xv->shape.rank < 1) return kn_rw_fail(c, "input X must have rank 1 or more");
  if (!kn_dtype_is_int(iv->dtype)) return kn_rw_fail(c, "input Y (indices) must be integers");
  if (iv->shape.batch_mask) return kn_rw_fail(c, "input Y (indices) has a batch-dependent shape");
  int64_t count = kn_shape_numel_max(&iv->shape, 1);
  int64_t flat[1] = {count};
  int in[2] = {x, kn_rw_reshape(c, idx, flat, 1)};
  int y = kn_rw_op(c, KN_OP_GATHER, in, 2);
  kn_rw_attr_int(c, "axis", xv->shape.rank - 1);
  if (xv->shape.rank == 1) { /* a vector gives one row, as onnxruntime */
    int64_t row[2] = {1, count};
    y = kn_rw_reshape(c, y, row, 2);
  }
  kn_rw_output(c, 0, y);
  return 0;
}

/* Training-mode Dropout with ratio 0: Y = X, mask all true. */
static int dropout(kn_rw *c) {
  int x = kn_rw_in(c, 0);
  kn_rw_output(c, 0, kn_rw_un(c, KN_OP_IDENTITY, x));
  int in[2] = {kn_rw_scalar(c, KN_DT_BOOL, 1), kn_rw_un(c, KN_OP_SHAPE, x)};
  kn_rw_output(c, 1, kn_rw_op(c, KN_OP_EXPAND, in, 2));
  return 0;
}

int kn_decompose_misc(kn_rw *c) {
  switch (c->g->nodes[c->node].op) {
  case KN_OP_MOMENTUM: return momentum(c);
  case KN_OP_ADAGRAD: return adagrad(c);
  case KN_OP_ADAM: return adam(c);
  case KN_OP_BATCH_NORM: return batch_norm_training(c);
  case KN_OP_DROPOUT: return dropout(c);
  case KN_OP_MAX_POOL: return max_pool_indices(c);
  case KN_OP_ML_BINARIZER: return binarizer(c);
  case KN_OP_ML_ARRAY_FEATURE_EXTRACTOR: return array_feature_extractor(c);
  default: return 1;
  }
}
