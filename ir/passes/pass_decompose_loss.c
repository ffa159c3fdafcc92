/* pass_decompose_loss.c — losses and normalisations as primitive ops
 * (the rewrites of ir/passes/pass_decompose.c; builder in rewrite.h):
 *
 *   NegativeLogLikelihoodLoss  GatherElements of x at the target along axis 1,
 *       negated, times Gather(weight, target); ignored targets read class 0
 *       and are zeroed by Where; mean divides by the summed weights.
 *   SoftmaxCrossEntropyLoss    LogSoftmax over axis 1, then the above.
 *   LpNormalization            x / ReduceL1|L2(x, axis), 0 where the norm is 0.
 *   MeanVarianceNormalization  (x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9),
 *                              as the ONNX function body.
 *   InstanceNormalization      per (n, c) mean and variance over the spatial
 *                              axes, then scale and bias [C,1,...].
 *   GroupNormalization         the same over x viewed as [N, G, -1].
 *   LRN                        x / (bias + alpha/size * S)^beta, where S sums
 *                              `size` channel-shifted slices of a channel-
 *                              padded x^2.
 *   LpPool                     (|x|^p summed over the window)^(1/p), the sum a
 *                              depthwise Conv with a weight of ones.
 * Unsupported attribute values are diagnosed naming node and attribute. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/passes/decompose.h"
#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"

/* The loss of NegativeLogLikelihoodLoss over log-probabilities x of dtype xt
 * (x may be a new, still untyped value). */
static int nll(kn_rw *c, int x, kn_dtype xt, int target, int weight) {
  const kn_node *n = &c->g->nodes[c->node];
  const char *reduction = kn_node_attr_string(n, "reduction", "mean");
  bool has_ii = kn_node_attr(n, "ignore_index") != NULL;
  int64_t ii = kn_node_attr_int(n, "ignore_index", 0);
  if (strcmp(reduction, "none") && strcmp(reduction, "sum") && strcmp(reduction, "mean"))
    return kn_rw_fail(c, "attribute 'reduction' = '%s' is not none, sum or mean", reduction);
  kn_dtype tt = kn_rw_val(c, target)->dtype;
  if (!kn_dtype_is_float(xt)) return kn_rw_fail(c, "input of dtype %s is not a float", kn_dtype_name(xt));
  if (tt != KN_DT_I32 && tt != KN_DT_I64) return kn_rw_fail(c, "target of dtype %s is not int32/int64", kn_dtype_name(tt));
  if (weight >= 0 && kn_rw_val(c, weight)->dtype != xt) return kn_rw_fail(c, "weight dtype differs from the input's");
  /* shapes, from the node's own input (x may be a new, untyped value):
   * input [N, C, d...], target [N, d...], weight [C] */
  const kn_shape *xs = &kn_rw_val(c, kn_rw_in(c, 0))->shape, *ts = &kn_rw_val(c, target)->shape;
  char have[160], want[160];
  if (xs->rank < 2) return kn_rw_fail(c, "input %s must have rank >= 2 [N, C, ...]", kn_shape_str(xs, have, sizeof have));
  kn_shape tw = {.rank = xs->rank - 1};
  for (int i = 0, j = 0; i < xs->rank; i++) {
    if (i == 1) continue;
    tw.dim[j] = xs->dim[i];
    if ((xs->batch_mask >> i) & 1u) tw.batch_mask |= 1u << j;
    j++;
  }
  if (!kn_shape_equal(ts, &tw))
    return kn_rw_fail(c, "target %s must be %s (the input %s without its class axis)", kn_shape_str(ts, have, sizeof have),
                      kn_shape_str(&tw, want, sizeof want), kn_shape_str(xs, (char[160]){0}, 160));
  if (weight >= 0) {
    const kn_shape *ws = &kn_rw_val(c, weight)->shape;
    if (ws->rank != 1 || ws->dim[0] != xs->dim[1] || ws->batch_mask || ((xs->batch_mask >> 1) & 1u))
      return kn_rw_fail(c, "weight %s must be [%lld] (one per class)", kn_shape_str(ws, have, sizeof have),
                        (long long)xs->dim[1]);
  }

  int64_t one = 1;
  int t = kn_rw_unsqueeze(c, target, &one, 1); /* [N,1,d...] */
  int mask = -1;
  if (has_ii) {
    mask = kn_rw_bin(c, KN_OP_EQUAL, t, kn_rw_scalar(c, tt, (double)ii));
    int in[3] = {mask, kn_rw_scalar(c, tt, 0), t};
    t = kn_rw_op(c, KN_OP_WHERE, in, 3);
  }
  int in2[2] = {x, t};
  int picked = kn_rw_op(c, KN_OP_GATHER_ELEMENTS, in2, 2);
  kn_rw_attr_int(c, "axis", 1);
  int loss = kn_rw_un(c, KN_OP_NEG, picked), w = -1;
  if (weight >= 0) w = kn_rw_bin(c, KN_OP_GATHER, weight, t);
  if (has_ii) {
    int zero = kn_rw_scalar(c, xt, 0);
    if (w < 0) w = kn_rw_scalar(c, xt, 1);
    int in[3] = {mask, zero, w};
    w = kn_rw_op(c, KN_OP_WHERE, in, 3);
  }
  if (w >= 0) loss = kn_rw_bin(c, KN_OP_MUL, loss, w);
  if (!strcmp(reduction, "none")) return kn_rw_squeeze(c, loss, &one, 1);
  if (!strcmp(reduction, "sum")) return kn_rw_reduce(c, KN_OP_REDUCE_SUM, loss, NULL, 0, false);
  if (w < 0) return kn_rw_reduce(c, KN_OP_REDUCE_MEAN, loss, NULL, 0, false);
  int sum = kn_rw_reduce(c, KN_OP_REDUCE_SUM, loss, NULL, 0, false);
  return kn_rw_bin(c, KN_OP_DIV, sum, kn_rw_reduce(c, KN_OP_REDUCE_SUM, w, NULL, 0, false));
}

static int nll_loss(kn_rw *c) {
  int x = kn_rw_in(c, 0);
  int loss = nll(c, x, kn_rw_val(c, x)->dtype, kn_rw_in(c, 1), kn_rw_in(c, 2));
  if (loss < 0) return -1;
  kn_rw_output(c, 0, loss);
  return 0;
}

/* log_softmax over axis 1: the LogSoftmax op where its axis means one axis
 * (opset >= 13 or rank 2), else x - max - log(sum(exp(x - max))). */
static int log_softmax_axis1(kn_rw *c, int x) {
  if (c->g->opset >= 13 || kn_rw_val(c, x)->shape.rank == 2) {
    int v = kn_rw_un(c, KN_OP_LOG_SOFTMAX, x);
    kn_rw_attr_int(c, "axis", 1);
    return v;
  }
  int64_t one = 1;
  int shifted = kn_rw_bin(c, KN_OP_SUB, x, kn_rw_reduce(c, KN_OP_REDUCE_MAX, x, &one, 1, true));
  int sum = kn_rw_reduce(c, KN_OP_REDUCE_SUM, kn_rw_un(c, KN_OP_EXP, shifted), &one, 1, true);
  return kn_rw_bin(c, KN_OP_SUB, shifted, kn_rw_un(c, KN_OP_LOG, sum));
}

static int sce_loss(kn_rw *c) {
  int x = kn_rw_in(c, 0);
  if (kn_rw_val(c, x)->shape.rank < 2) return kn_rw_fail(c, "scores of rank < 2");
  int log_prob = log_softmax_axis1(c, x);
  int loss = nll(c, log_prob, kn_rw_val(c, x)->dtype, kn_rw_in(c, 1), kn_rw_in(c, 2));
  if (loss < 0) return -1;
  kn_rw_output(c, 0, loss);
  if (c->g->nodes[c->node].n_out > 1) kn_rw_output(c, 1, log_prob);
  return 0;
}

static int lp_normalization(kn_rw *c) {
  const kn_node *n = &c->g->nodes[c->node];
  int64_t p = kn_node_attr_int(n, "p", 2), axis = kn_node_attr_int(n, "axis", -1);
  if (p != 1 && p != 2) return kn_rw_fail(c, "attribute 'p' = %lld is not 1 or 2", (long long)p);
  int x = kn_rw_in(c, 0);
  if (kn_axis_norm(axis, kn_rw_val(c, x)->shape.rank) < 0)
    return kn_rw_fail(c, "attribute 'axis' = %lld is out of range", (long long)axis);
  int norm = kn_rw_reduce(c, p == 1 ? KN_OP_REDUCE_L1 : KN_OP_REDUCE_L2, x, &axis, 1, true);
  /* a zero norm means x is all zeros along the axis: divide by 1, giving 0 */
  kn_dtype t = kn_rw_val(c, x)->dtype;
  int is_zero = kn_rw_bin(c, KN_OP_EQUAL, norm, kn_rw_scalar(c, t, 0));
  int in[3] = {is_zero, kn_rw_scalar(c, t, 1), norm};
  kn_rw_output(c, 0, kn_rw_bin(c, KN_OP_DIV, x, kn_rw_op(c, KN_OP_WHERE, in, 3)));
  return 0;
}

static int mvn(kn_rw *c) {
  const kn_node *n = &c->g->nodes[c->node];
  int n_axes = 0;
  const int64_t *attr = kn_node_attr_ints(n, "axes", &n_axes);
  int64_t axes[KN_MAX_RANK] = {0, 2, 3};
  if (!attr) n_axes = 3;
  if (n_axes > KN_MAX_RANK) return kn_rw_fail(c, "attribute 'axes' has %d entries", n_axes);
  int x = kn_rw_in(c, 0), rank = kn_rw_val(c, x)->shape.rank;
  for (int i = 0; i < n_axes; i++) {
    if (attr) axes[i] = attr[i];
    if (kn_axis_norm(axes[i], rank) < 0)
      return kn_rw_fail(c, "attribute 'axes' names axis %lld of a rank-%d input", (long long)axes[i], rank);
  }
  kn_dtype t = kn_rw_val(c, x)->dtype;
  int mean = kn_rw_reduce(c, KN_OP_REDUCE_MEAN, x, axes, n_axes, true);
  int mean_sq = kn_rw_reduce(c, KN_OP_REDUCE_MEAN, kn_rw_bin(c, KN_OP_MUL, x, x), axes, n_axes, true);
  int var = kn_rw_bin(c, KN_OP_SUB, mean_sq, kn_rw_bin(c, KN_OP_MUL, mean, mean));
  int std = kn_rw_bin(c, KN_OP_ADD, kn_rw_un(c, KN_OP_SQRT, var), kn_rw_scalar(c, t, 1e-9));
  kn_rw_output(c, 0, kn_rw_bin(c, KN_OP_DIV, kn_rw_bin(c, KN_OP_SUB, x, mean), std));
  return 0;
}

/* (x - mean) / sqrt(var + eps) over `axes` of x, of dtype t. */
static int normalize(kn_rw *c, int x, kn_dtype t, const int64_t *axes, int n_axes, float eps) {
  int dev = kn_rw_bin(c, KN_OP_SUB, x, kn_rw_reduce(c, KN_OP_REDUCE_MEAN, x, axes, n_axes, true));
  int var = kn_rw_reduce(c, KN_OP_REDUCE_MEAN, kn_rw_bin(c, KN_OP_MUL, dev, dev), axes, n_axes, true);
  int std = kn_rw_un(c, KN_OP_SQRT, kn_rw_bin(c, KN_OP_ADD, var, kn_rw_scalar(c, t, eps)));
  return kn_rw_bin(c, KN_OP_DIV, dev, std);
}

/* y * v + b with per-channel v, b of shape [C] broadcast as [C,1,...,1]
 * against a rank-`rank` y. */
static int channel_affine(kn_rw *c, int y, int scale, int bias, int rank) {
  int64_t axes[KN_MAX_RANK];
  for (int i = 0; i < rank - 2; i++) axes[i] = i + 1;
  y = kn_rw_bin(c, KN_OP_MUL, y, kn_rw_unsqueeze(c, scale, axes, rank - 2));
  return kn_rw_bin(c, KN_OP_ADD, y, kn_rw_unsqueeze(c, bias, axes, rank - 2));
}

static int check_channel_param(kn_rw *c, int v, const char *what, int64_t chans) {
  const kn_value *p = kn_rw_val(c, v);
  if (p->shape.rank != 1 || p->shape.dim[0] != chans || p->shape.batch_mask)
    return kn_rw_fail(c, "%s must have shape [%lld]", what, (long long)chans);
  return 0;
}

static int instance_norm(kn_rw *c) {
  int x = kn_rw_in(c, 0), scale = kn_rw_in(c, 1), bias = kn_rw_in(c, 2);
  if (scale < 0 || bias < 0) return kn_rw_fail(c, "needs inputs scale and B");
  const kn_shape xs = kn_rw_val(c, x)->shape;
  if (xs.rank < 3) return kn_rw_fail(c, "input of rank %d (needs >= 3)", xs.rank);
  if (check_channel_param(c, scale, "scale", xs.dim[1]) < 0 || check_channel_param(c, bias, "B", xs.dim[1]) < 0)
    return -1;
  int64_t axes[KN_MAX_RANK];
  for (int i = 2; i < xs.rank; i++) axes[i - 2] = i;
  float eps = kn_node_attr_float(&c->g->nodes[c->node], "epsilon", 1e-5f);
  int y = normalize(c, x, kn_rw_val(c, x)->dtype, axes, xs.rank - 2, eps);
  kn_rw_output(c, 0, channel_affine(c, y, scale, bias, xs.rank));
  return 0;
}

static int group_norm(kn_rw *c) {
  const kn_node *n = &c->g->nodes[c->node];
  int x = kn_rw_in(c, 0), scale = kn_rw_in(c, 1), bias = kn_rw_in(c, 2);
  if (scale < 0 || bias < 0) return kn_rw_fail(c, "needs inputs scale and bias");
  const kn_shape xs = kn_rw_val(c, x)->shape;
  if (!kn_node_attr(n, "num_groups")) return kn_rw_fail(c, "attribute 'num_groups' is missing");
  int64_t groups = kn_node_attr_int(n, "num_groups", 1), chans = xs.dim[1];
  if (xs.rank < 2 || (xs.batch_mask & ~1u)) return kn_rw_fail(c, "input must be [N,C,...] with only N symbolic");
  if (groups < 1 || chans % groups)
    return kn_rw_fail(c, "attribute 'num_groups' = %lld does not divide %lld channels", (long long)groups,
                      (long long)chans);
  /* opset 18 took per-group scale and bias, opset 21 per-channel ones */
  int64_t per = kn_rw_val(c, scale)->shape.rank == 1 ? kn_rw_val(c, scale)->shape.dim[0] : -1;
  if (per != chans && per != groups) return kn_rw_fail(c, "scale must have shape [%lld]", (long long)chans);
  if (check_channel_param(c, bias, "bias", per) < 0) return -1;
  float eps = kn_node_attr_float(n, "epsilon", 1e-5f);
  int64_t grouped[3] = {0, groups, -1}, axis2 = 2, one = 1, back[KN_MAX_RANK] = {0, chans};
  for (int i = 2; i < xs.rank; i++) back[i] = xs.dim[i];
  kn_dtype t = kn_rw_val(c, x)->dtype;
  int y = normalize(c, kn_rw_reshape(c, x, grouped, 3), t, &axis2, 1, eps);
  if (per == chans && per != groups) {
    y = channel_affine(c, kn_rw_reshape(c, y, back, xs.rank), scale, bias, xs.rank);
  } else {
    y = kn_rw_bin(c, KN_OP_MUL, y, kn_rw_unsqueeze(c, scale, &one, 1));
    y = kn_rw_bin(c, KN_OP_ADD, y, kn_rw_unsqueeze(c, bias, &one, 1));
    y = kn_rw_reshape(c, y, back, xs.rank);
  }
  kn_rw_output(c, 0, y);
  return 0;
}

static int lrn(kn_rw *c) {
  const kn_node *n = &c->g->nodes[c->node];
  int x = kn_rw_in(c, 0);
  const kn_shape xs = kn_rw_val(c, x)->shape;
  kn_dtype t = kn_rw_val(c, x)->dtype;
  if (!kn_node_attr(n, "size")) return kn_rw_fail(c, "attribute 'size' is missing");
  int64_t size = kn_node_attr_int(n, "size", 1);
  if (size < 1 || size > 64) return kn_rw_fail(c, "attribute 'size' = %lld is not in [1, 64]", (long long)size);
  if (xs.rank < 2 || (xs.batch_mask & 2u)) return kn_rw_fail(c, "input must be [N,C,...] with a fixed C");
  float alpha = kn_node_attr_float(n, "alpha", 1e-4f), beta = kn_node_attr_float(n, "beta", 0.75f);
  float bias = kn_node_attr_float(n, "bias", 1.0f);
  int64_t lo = (size - 1) / 2, hi = size - 1 - lo, chans = xs.dim[1];
  int64_t pads[2 * KN_MAX_RANK] = {0};
  pads[1] = lo;
  pads[xs.rank + 1] = hi;
  int sq = kn_rw_bin(c, KN_OP_MUL, x, x);
  int padded = kn_rw_bin(c, KN_OP_PAD, sq, kn_rw_ints(c, pads, 2 * xs.rank));
  int sum = -1;
  for (int64_t k = 0; k < size; k++) {
    int64_t start = k, end = k + chans, axis = 1;
    int in[4] = {padded, kn_rw_ints(c, &start, 1), kn_rw_ints(c, &end, 1), kn_rw_ints(c, &axis, 1)};
    int slice = kn_rw_op(c, KN_OP_SLICE, in, 4);
    sum = sum < 0 ? slice : kn_rw_bin(c, KN_OP_ADD, sum, slice);
  }
  int base = kn_rw_bin(c, KN_OP_ADD, kn_rw_scalar(c, t, bias),
                       kn_rw_bin(c, KN_OP_MUL, sum, kn_rw_scalar(c, t, (double)alpha / (double)size)));
  int den = kn_rw_bin(c, KN_OP_POW, base, kn_rw_scalar(c, t, beta));
  kn_rw_output(c, 0, kn_rw_bin(c, KN_OP_DIV, x, den));
  return 0;
}

static int lp_pool(kn_rw *c) {
  const kn_node *n = &c->g->nodes[c->node];
  int x = kn_rw_in(c, 0);
  const kn_shape xs = kn_rw_val(c, x)->shape;
  kn_dtype t = kn_rw_val(c, x)->dtype;
  int64_t p = kn_node_attr_int(n, "p", 2);
  int n_kernel = 0;
  const int64_t *kernel = kn_node_attr_ints(n, "kernel_shape", &n_kernel);
  if (p < 1) return kn_rw_fail(c, "attribute 'p' = %lld is not >= 1", (long long)p);
  if (!kernel || n_kernel != xs.rank - 2) return kn_rw_fail(c, "attribute 'kernel_shape' must have %d entries", xs.rank - 2);
  if (kn_node_attr_int(n, "ceil_mode", 0)) return kn_rw_fail(c, "attribute 'ceil_mode' = 1 is not supported");
  if (xs.rank < 3 || (xs.batch_mask & 2u) || !kn_dtype_is_float(t))
    return kn_rw_fail(c, "input must be a float [N,C,...] with a fixed C");
  int64_t chans = xs.dim[1];
  kn_shape ws = {.rank = xs.rank};
  ws.dim[0] = chans;
  ws.dim[1] = 1;
  int64_t count = chans;
  for (int i = 0; i < n_kernel; i++) {
    if (kernel[i] < 1 || kernel[i] > 4096)
      return kn_rw_fail(c, "attribute 'kernel_shape' entry %lld is not in [1, 4096]", (long long)kernel[i]);
    if (count > (1 << 24)) break;
    ws.dim[i + 2] = kernel[i], count *= kernel[i];
  }
  if (count > (1 << 24)) return kn_rw_fail(c, "attribute 'kernel_shape' is too large for %lld channels", (long long)chans);
  int w = kn_rw_const(c, t, &ws, NULL);
  for (int64_t i = 0; i < count; i++) kn_ref_store(t, c->g->values[w].data, i, 1.0);
  int a = p == 2 ? kn_rw_bin(c, KN_OP_MUL, x, x) : kn_rw_un(c, KN_OP_ABS, x);
  if (p > 2) a = kn_rw_bin(c, KN_OP_POW, a, kn_rw_scalar(c, t, (double)p));
  int sum = kn_rw_bin(c, KN_OP_CONV, a, w);
  kn_rw_attr_int(c, "group", chans);
  kn_rw_attr_ints(c, "kernel_shape", kernel, n_kernel);
  static const char *const copied[] = {"strides", "pads", "dilations", "auto_pad"};
  for (int i = 0; i < 4; i++) kn_rw_attr_copy(c, copied[i]);
  int y = sum;
  if (p == 2) y = kn_rw_un(c, KN_OP_SQRT, sum);
  else if (p > 2) y = kn_rw_bin(c, KN_OP_POW, sum, kn_rw_scalar(c, t, 1.0 / (double)p));
  kn_rw_output(c, 0, y);
  return 0;
}

int kn_decompose_loss_norm(kn_rw *c) {
  switch (c->g->nodes[c->node].op) {
  case KN_OP_NLL_LOSS: return nll_loss(c);
  case KN_OP_SCE_LOSS: return sce_loss(c);
  case KN_OP_LP_NORMALIZATION: return lp_normalization(c);
  case KN_OP_MVN: return mvn(c);
  case KN_OP_INSTANCE_NORM: return instance_norm(c);
  case KN_OP_GROUP_NORM: return group_norm(c);
  case KN_OP_LRN: return lrn(c);
  case KN_OP_LP_POOL: return lp_pool(c);
  default: return 1;
  }
}
