/* ref_eval_nn.c — reference kernels of the contractions, pools, reductions
 * and normalisations: Conv (N-d NCHW and kiln.ConvNHWC), MatMul, Gemm,
 * Max/AveragePool (and their NHWC forms), global pools, Reduce*, Softmax,
 * LogSoftmax, LayerNormalization, BatchNormalization (inference).
 *
 * Every accumulation is in double. Conv and the pools are written once over
 * explicit strides, so the NCHW and NHWC forms share one loop nest and one
 * window definition (kn_window_resolve). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"

/* ---- Conv ---- */

/* Element strides of a conv's operands in either layout. */
typedef struct conv_layout {
  int64_t x_n, x_c, x_sp[KN_MAX_RANK];
  int64_t w_n, w_m, w_c, w_sp[KN_MAX_RANK]; /* w_n: per-sample weights, else 0 */
  int64_t y_n, y_m, y_sp[KN_MAX_RANK];
} conv_layout;

static int conv(kn_ref_call *c, bool nhwc) {
  const kn_ref_tensor *x = &c->in[0], *w = &c->in[1];
  const kn_ref_tensor *b = c->n_in > 2 && c->in[2].data ? &c->in[2] : NULL;
  kn_ref_tensor *y = &c->out[0];
  int ns = x->shape.rank - 2;
  int64_t group = kn_node_attr_int(c->node, "group", 1);
  int64_t batch = x->shape.dim[0];
  int64_t in_sp[KN_MAX_RANK], kernel[KN_MAX_RANK];
  int64_t xs[KN_MAX_RANK], ws[KN_MAX_RANK], ys[KN_MAX_RANK];
  kn_ref_strides(&x->shape, xs);
  kn_ref_strides(&w->shape, ws);
  kn_ref_strides(&y->shape, ys);
  conv_layout L;
  int64_t cin, m_out, cg;
  L.w_n = 0;
  if (nhwc) { /* X [N,H,W,C], W [KH,KW,C/g,M] or per sample [N,KH,KW,C/g,M], Y [N,OH,OW,M] */
    int wo = w->shape.rank == x->shape.rank + 1;
    cin = x->shape.dim[ns + 1];
    cg = w->shape.dim[ns + wo];
    m_out = w->shape.dim[ns + 1 + wo];
    L.x_n = xs[0], L.x_c = 1, L.w_m = 1, L.w_c = ws[ns + wo], L.y_n = ys[0], L.y_m = 1;
    if (wo) L.w_n = ws[0];
    for (int i = 0; i < ns; i++) {
      in_sp[i] = x->shape.dim[1 + i];
      kernel[i] = w->shape.dim[i + wo];
      L.x_sp[i] = xs[1 + i], L.w_sp[i] = ws[i + wo], L.y_sp[i] = ys[1 + i];
    }
  } else { /* X [N,C,...], W [M,C/g,...], Y [N,M,...] */
    cin = x->shape.dim[1];
    cg = w->shape.dim[1];
    m_out = w->shape.dim[0];
    L.x_n = xs[0], L.x_c = xs[1], L.w_m = ws[0], L.w_c = ws[1], L.y_n = ys[0], L.y_m = ys[1];
    for (int i = 0; i < ns; i++) {
      in_sp[i] = x->shape.dim[2 + i];
      kernel[i] = w->shape.dim[2 + i];
      L.x_sp[i] = xs[2 + i], L.w_sp[i] = ws[2 + i], L.y_sp[i] = ys[2 + i];
    }
  }
  if (group < 1 || cin != cg * group || m_out % group)
    return kn_ref_error(c, "channels %lld, group %lld and weight do not agree", (long long)cin,
                        (long long)group);
  kn_window win;
  if (kn_window_resolve(c->node, ns, in_sp, kernel, false, &win, c->d) < 0) return -1;
  kn_shape out_sp = {.rank = ns}, k_sp = {.rank = ns};
  for (int i = 0; i < ns; i++) out_sp.dim[i] = win.out[i], k_sp.dim[i] = kernel[i];
  int64_t m_per_group = m_out / group;
  for (int64_t n = 0; n < batch; n++)
    for (int64_t m = 0; m < m_out; m++) {
      int64_t g = m / m_per_group;
      int64_t o[KN_MAX_RANK] = {0};
      do {
        double acc = b ? kn_ref_load(b->dtype, b->data, m) : 0.0;
        for (int64_t ci = 0; ci < cg; ci++) {
          int64_t k[KN_MAX_RANK] = {0};
          do {
            int64_t xoff = n * L.x_n + (g * cg + ci) * L.x_c, woff = n * L.w_n + m * L.w_m + ci * L.w_c;
            bool inside = true;
            for (int i = 0; i < ns && inside; i++) {
              int64_t pos = o[i] * win.stride[i] - win.pad_begin[i] + k[i] * win.dilation[i];
              inside = pos >= 0 && pos < in_sp[i];
              xoff += pos * L.x_sp[i];
              woff += k[i] * L.w_sp[i];
            }
            if (inside)
              acc += kn_ref_load(x->dtype, x->data, xoff) * kn_ref_load(w->dtype, w->data, woff);
          } while (kn_ref_next_index(&k_sp, k));
        }
        int64_t yoff = n * L.y_n + m * L.y_m;
        for (int i = 0; i < ns; i++) yoff += o[i] * L.y_sp[i];
        kn_ref_store(y->dtype, y->data, yoff, acc);
      } while (kn_ref_next_index(&out_sp, o));
    }
  return 0;
}

/* ---- pools ---- */

static int pool(kn_ref_call *c, bool nhwc) {
  const kn_ref_tensor *x = &c->in[0];
  kn_ref_tensor *y = &c->out[0];
  kn_ref_tensor *indices = c->n_out > 1 && c->out[1].data ? &c->out[1] : NULL;
  bool is_max = c->node->op == KN_OP_MAX_POOL || c->node->op == KN_OP_MAX_POOL_NHWC;
  bool include_pad = kn_node_attr_int(c->node, "count_include_pad", 0) != 0;
  int ns = x->shape.rank - 2;
  int nk = 0;
  const int64_t *kernel = kn_node_attr_ints(c->node, "kernel_shape", &nk);
  if (nk != ns) return kn_ref_error(c, "kernel_shape has %d entries, expected %d", nk, ns);
  int64_t xs[KN_MAX_RANK], ys[KN_MAX_RANK], in_sp[KN_MAX_RANK], x_sp[KN_MAX_RANK], y_sp[KN_MAX_RANK];
  kn_ref_strides(&x->shape, xs);
  kn_ref_strides(&y->shape, ys);
  int c_axis = nhwc ? ns + 1 : 1, sp0 = nhwc ? 1 : 2;
  for (int i = 0; i < ns; i++) in_sp[i] = x->shape.dim[sp0 + i], x_sp[i] = xs[sp0 + i], y_sp[i] = ys[sp0 + i];
  kn_window win;
  if (kn_window_resolve(c->node, ns, in_sp, kernel, true, &win, c->d) < 0) return -1;
  kn_shape out_sp = {.rank = ns}, k_sp = {.rank = ns};
  for (int i = 0; i < ns; i++) out_sp.dim[i] = win.out[i], k_sp.dim[i] = kernel[i];
  for (int64_t n = 0; n < x->shape.dim[0]; n++)
    for (int64_t ch = 0; ch < x->shape.dim[c_axis]; ch++) {
      int64_t o[KN_MAX_RANK] = {0};
      do {
        double acc = is_max ? -INFINITY : 0.0;
        int64_t count = 0, best = -1;
        int64_t k[KN_MAX_RANK] = {0};
        do {
          int64_t xoff = n * xs[0] + ch * xs[c_axis];
          bool inside = true;
          for (int i = 0; i < ns && inside; i++) {
            int64_t pos = o[i] * win.stride[i] - win.pad_begin[i] + k[i] * win.dilation[i];
            inside = pos >= 0 && pos < in_sp[i];
            xoff += pos * x_sp[i];
          }
          if (!inside) continue;
          double v = kn_ref_load(x->dtype, x->data, xoff);
          if (is_max) {
            if (best < 0 || v > acc || (isnan(v) && !isnan(acc))) acc = v, best = xoff; /* the first NaN wins */
          } else {
            acc += v;
          }
          count++;
        } while (kn_ref_next_index(&k_sp, k));
        if (!is_max && include_pad) { /* count window cells inside the padded input */
          count = 1;
          for (int i = 0; i < ns; i++) {
            int64_t lo = o[i] * win.stride[i] - win.pad_begin[i], cells = 0;
            for (int64_t kk = 0; kk < kernel[i]; kk++) {
              int64_t pos = lo + kk * win.dilation[i];
              cells += pos >= -win.pad_begin[i] && pos < in_sp[i] + win.pad_end[i];
            }
            count *= cells;
          }
        }
        int64_t yoff = n * ys[0] + ch * ys[c_axis];
        for (int i = 0; i < ns; i++) yoff += o[i] * y_sp[i];
        kn_ref_store(y->dtype, y->data, yoff, is_max ? acc : count ? acc / (double)count : 0.0);
        if (indices) kn_ref_store_int(indices->dtype, indices->data, yoff, best);
      } while (kn_ref_next_index(&out_sp, o));
    }
  return 0;
}

/* ---- reductions over a set of axes ---- */

typedef enum reduce_kind {
  RED_SUM, RED_MEAN, RED_MAX, RED_MIN, RED_PROD, RED_L1, RED_L2, RED_SUM_SQUARE, RED_LOG_SUM,
  RED_LOG_SUM_EXP
} reduce_kind;

/* Reduces x over the axes in `mask` into y (whose element order is that of
 * x's shape with the reduced dims set to 1, with or without keepdims). */
static void reduce_axes(const kn_ref_tensor *x, kn_ref_tensor *y, uint32_t mask, reduce_kind kind) {
  kn_shape kept = x->shape;
  int64_t count = 1;
  for (int i = 0; i < kept.rank; i++)
    if (mask & (1u << i)) count *= kept.dim[i], kept.dim[i] = 1;
  int64_t n_out = kn_ref_numel(&kept), n_in = kn_ref_numel(&x->shape);
  double *acc = calloc((size_t)(n_out ? n_out : 1), sizeof(double));
  KN_ASSERT(acc, "out of memory");
  for (int64_t j = 0; j < n_out; j++)
    acc[j] = kind == RED_MAX ? -INFINITY : kind == RED_MIN ? INFINITY : kind == RED_PROD ? 1.0 : 0.0;
  int64_t idx[KN_MAX_RANK] = {0};
  for (int64_t i = 0; i < n_in; i++, kn_ref_next_index(&x->shape, idx)) {
    int64_t j = kn_ref_bcast_offset(&kept, &x->shape, idx);
    double v = kn_ref_load(x->dtype, x->data, i);
    if (kind == RED_MAX) acc[j] = kn_max_nan(acc[j], v);
    else if (kind == RED_MIN) acc[j] = kn_min_nan(acc[j], v);
    else if (kind == RED_PROD) acc[j] *= v;
    else if (kind == RED_L1) acc[j] += fabs(v);
    else if (kind == RED_L2 || kind == RED_SUM_SQUARE) acc[j] += v * v;
    else if (kind == RED_LOG_SUM_EXP) acc[j] += exp(v);
    else acc[j] += v;
  }
  for (int64_t j = 0; j < n_out; j++) {
    double v = acc[j];
    if (kind == RED_MEAN) v /= (double)count;
    else if (kind == RED_L2) v = sqrt(v);
    else if (kind == RED_LOG_SUM || kind == RED_LOG_SUM_EXP) v = log(v);
    kn_ref_store(y->dtype, y->data, j, v);
  }
  free(acc);
}

static int reduce(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0];
  kn_op op = c->node->op;
  reduce_kind kind;
  switch (op) {
  case KN_OP_REDUCE_SUM: kind = RED_SUM; break;
  case KN_OP_REDUCE_MEAN: kind = RED_MEAN; break;
  case KN_OP_REDUCE_MAX: kind = RED_MAX; break;
  case KN_OP_REDUCE_PROD: kind = RED_PROD; break;
  case KN_OP_REDUCE_L1: kind = RED_L1; break;
  case KN_OP_REDUCE_L2: kind = RED_L2; break;
  case KN_OP_REDUCE_SUM_SQUARE: kind = RED_SUM_SQUARE; break;
  case KN_OP_REDUCE_LOG_SUM: kind = RED_LOG_SUM; break;
  case KN_OP_REDUCE_LOG_SUM_EXP: kind = RED_LOG_SUM_EXP; break;
  default: kind = RED_MIN; break;
  }
  int n_axes = 0;
  const int64_t *axes = kn_node_attr_ints(c->node, "axes", &n_axes);
  int64_t axes_buf[KN_MAX_RANK];
  if (!axes && c->n_in > 1 && c->in[1].data) {
    n_axes = (int)kn_ref_numel(&c->in[1].shape);
    if (n_axes > KN_MAX_RANK) return kn_ref_error(c, "too many axes");
    for (int i = 0; i < n_axes; i++) axes_buf[i] = kn_ref_load_int(c->in[1].dtype, c->in[1].data, i);
    axes = axes_buf;
  }
  uint32_t mask = 0;
  if (n_axes == 0) {
    if (kn_node_attr_int(c->node, "noop_with_empty_axes", 0)) {
      memcpy(c->out[0].data, x->data, (size_t)kn_ref_numel(&x->shape) * kn_dtype_size(x->dtype));
      return 0;
    }
    mask = (1u << x->shape.rank) - 1;
  }
  for (int i = 0; i < n_axes; i++) {
    int a = kn_axis_norm(axes[i], x->shape.rank);
    if (a < 0) return kn_ref_error(c, "axis %lld out of range", (long long)axes[i]);
    mask |= 1u << a;
  }
  reduce_axes(x, &c->out[0], mask, kind);
  return 0;
}

/* ArgMax / ArgMin over one axis: the first (or last) index of the extreme. */
static int arg_extreme(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0];
  kn_ref_tensor *y = &c->out[0];
  int r = x->shape.rank;
  int axis = kn_axis_norm(kn_node_attr_int(c->node, "axis", 0), r);
  if (axis < 0) return kn_ref_error(c, "axis out of range");
  bool is_max = c->node->op == KN_OP_ARG_MAX;
  bool last = kn_node_attr_int(c->node, "select_last_index", 0) != 0;
  int64_t outer = 1, len = x->shape.dim[axis], inner = 1;
  for (int i = 0; i < axis; i++) outer *= x->shape.dim[i];
  for (int i = axis + 1; i < r; i++) inner *= x->shape.dim[i];
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      int64_t best = 0;
      double bv = 0;
      for (int64_t k = 0; k < len; k++) {
        double v = kn_ref_load(x->dtype, x->data, (o * len + k) * inner + in);
        /* a NaN is the best (the kernels' max / min is NaN then), as numpy's argmax */
        bool better = k == 0 || (isnan(bv) ? last && isnan(v)
                                           : isnan(v) || (is_max ? v > bv : v < bv) || (last && v == bv));
        if (better) best = k, bv = v;
      }
      kn_ref_store_int(y->dtype, y->data, o * inner + in, best);
    }
  return 0;
}

/* Global pools reduce every spatial dim: 2.. for NCHW, 1..rank-2 for NHWC. */
static int global_pool(kn_ref_call *c, bool nhwc) {
  int r = c->in[0].shape.rank;
  uint32_t mask = nhwc ? ((1u << (r - 1)) - 1) & ~1u : ((1u << r) - 1) & ~3u;
  reduce_axes(&c->in[0], &c->out[0], mask, c->node->op == KN_OP_GLOBAL_MAX_POOL ? RED_MAX : RED_MEAN);
  return 0;
}

/* ---- softmax and normalisations ---- */

/* Splits shape around `axis`: outer = dims before, len = the axis (or, for
 * opset < 13 softmax and LayerNorm, all dims from axis on), inner = rest. */
static void split_axis(const kn_shape *s, int axis, bool to_end, int64_t *outer, int64_t *len,
                       int64_t *inner) {
  *outer = *len = *inner = 1;
  for (int i = 0; i < s->rank; i++) {
    if (i < axis) *outer *= s->dim[i];
    else if (i == axis || to_end) *len *= s->dim[i];
    else *inner *= s->dim[i];
  }
}

static int softmax(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0];
  kn_ref_tensor *y = &c->out[0];
  bool old = c->g->opset > 0 && c->g->opset < 13;
  int axis = kn_axis_norm(kn_node_attr_int(c->node, "axis", old ? 1 : -1), x->shape.rank);
  if (axis < 0 && x->shape.rank > 0) return kn_ref_error(c, "axis out of range");
  if (axis < 0) axis = 0;
  int64_t outer, len, inner;
  split_axis(&x->shape, axis, old, &outer, &len, &inner);
  bool log_out = c->node->op == KN_OP_LOG_SOFTMAX;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      int64_t base = o * len * inner + in, first = 0;
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < len; j++) {
        double v = kn_ref_load(x->dtype, x->data, base + j * inner);
        if (j == 0 || (!isnan(mx) && (v > mx || isnan(v)))) mx = v, first = j; /* a NaN is the maximum */
      }
      if (c->node->op == KN_OP_HARDMAX) { /* 1 at the first maximum */
        for (int64_t j = 0; j < len; j++) kn_ref_store(y->dtype, y->data, base + j * inner, j == first);
        continue;
      }
      for (int64_t j = 0; j < len; j++) sum += exp(kn_ref_load(x->dtype, x->data, base + j * inner) - mx);
      for (int64_t j = 0; j < len; j++) {
        double v = kn_ref_load(x->dtype, x->data, base + j * inner) - mx;
        kn_ref_store(y->dtype, y->data, base + j * inner, log_out ? v - log(sum) : exp(v) / sum);
      }
    }
  return 0;
}

static int layer_norm(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0], *scale = &c->in[1];
  const kn_ref_tensor *bias = c->n_in > 2 && c->in[2].data ? &c->in[2] : NULL;
  int axis = kn_axis_norm(kn_node_attr_int(c->node, "axis", -1), x->shape.rank);
  if (axis < 0) return kn_ref_error(c, "axis out of range");
  double eps = kn_node_attr_float(c->node, "epsilon", 1e-5f);
  int64_t outer, len, inner;
  split_axis(&x->shape, axis, true, &outer, &len, &inner);
  int64_t idx[KN_MAX_RANK] = {0};
  for (int64_t o = 0; o < outer; o++) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < len; j++) mean += kn_ref_load(x->dtype, x->data, o * len + j);
    mean /= (double)len;
    for (int64_t j = 0; j < len; j++) {
      double v = kn_ref_load(x->dtype, x->data, o * len + j) - mean;
      var += v * v;
    }
    var /= (double)len;
    double inv = 1.0 / sqrt(var + eps);
    for (int64_t j = 0; j < len; j++, kn_ref_next_index(&x->shape, idx)) {
      double v = (kn_ref_load(x->dtype, x->data, o * len + j) - mean) * inv;
      v *= kn_ref_load(scale->dtype, scale->data, kn_ref_bcast_offset(&scale->shape, &x->shape, idx));
      if (bias) v += kn_ref_load(bias->dtype, bias->data, kn_ref_bcast_offset(&bias->shape, &x->shape, idx));
      kn_ref_store(c->out[0].dtype, c->out[0].data, o * len + j, v);
    }
    if (c->n_out > 1 && c->out[1].data) kn_ref_store(c->out[1].dtype, c->out[1].data, o, mean);
    if (c->n_out > 2 && c->out[2].data) kn_ref_store(c->out[2].dtype, c->out[2].data, o, inv);
  }
  return 0;
}

static int batch_norm(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0];
  if (c->n_in < 5) return kn_ref_error(c, "needs 5 inputs");
  if (kn_node_attr_int(c->node, "training_mode", 0))
    return kn_ref_error(c, "training mode is not supported");
  double eps = kn_node_attr_float(c->node, "epsilon", 1e-5f);
  int64_t chans = x->shape.rank > 1 ? x->shape.dim[1] : 1, inner = 1;
  for (int i = 2; i < x->shape.rank; i++) inner *= x->shape.dim[i];
  int64_t n = kn_ref_numel(&x->shape);
  for (int64_t i = 0; i < n; i++) {
    int64_t ch = (i / inner) % chans;
    double s = kn_ref_load(c->in[1].dtype, c->in[1].data, ch);
    double b = kn_ref_load(c->in[2].dtype, c->in[2].data, ch);
    double mean = kn_ref_load(c->in[3].dtype, c->in[3].data, ch);
    double var = kn_ref_load(c->in[4].dtype, c->in[4].data, ch);
    double v = (kn_ref_load(x->dtype, x->data, i) - mean) / sqrt(var + eps) * s + b;
    kn_ref_store(c->out[0].dtype, c->out[0].data, i, v);
  }
  return 0;
}

/* ---- matrix products ---- */

static int matmul(kn_ref_call *c) {
  kn_ref_tensor a = c->in[0], b = c->in[1];
  kn_ref_tensor *y = &c->out[0];
  /* Promote 1-D operands: [K] -> [1,K] for A, [K] -> [K,1] for B; the output
   * keeps the same element order without the promoted dim. */
  if (a.shape.rank == 1) a.shape = (kn_shape){.rank = 2, .dim = {1, a.shape.dim[0]}};
  if (b.shape.rank == 1) b.shape = (kn_shape){.rank = 2, .dim = {b.shape.dim[0], 1}};
  int ra = a.shape.rank, rb = b.shape.rank;
  int64_t m = a.shape.dim[ra - 2], k = a.shape.dim[ra - 1], n = b.shape.dim[rb - 1];
  if (b.shape.dim[rb - 2] != k) return kn_ref_error(c, "inner dims differ");
  kn_shape ab = {.rank = ra - 2}, bb = {.rank = rb - 2}, ob;
  memcpy(ab.dim, a.shape.dim, sizeof(int64_t) * (size_t)ab.rank);
  memcpy(bb.dim, b.shape.dim, sizeof(int64_t) * (size_t)bb.rank);
  int bad;
  if (!kn_shape_broadcast(&ab, &bb, &ob, &bad)) return kn_ref_error(c, "batch dims do not broadcast");
  int64_t nb = kn_ref_numel(&ob), idx[KN_MAX_RANK] = {0};
  for (int64_t t = 0; t < nb; t++, kn_ref_next_index(&ob, idx)) {
    int64_t ao = kn_ref_bcast_offset(&ab, &ob, idx) * m * k, bo = kn_ref_bcast_offset(&bb, &ob, idx) * k * n;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double acc = 0;
        for (int64_t p = 0; p < k; p++)
          acc += kn_ref_load(a.dtype, a.data, ao + i * k + p) * kn_ref_load(b.dtype, b.data, bo + p * n + j);
        kn_ref_store(y->dtype, y->data, t * m * n + i * n + j, acc);
      }
  }
  return 0;
}

static int gemm(kn_ref_call *c) {
  const kn_ref_tensor *a = &c->in[0], *b = &c->in[1];
  const kn_ref_tensor *cc = c->n_in > 2 && c->in[2].data ? &c->in[2] : NULL;
  kn_ref_tensor *y = &c->out[0];
  bool ta = kn_node_attr_int(c->node, "transA", 0), tb = kn_node_attr_int(c->node, "transB", 0);
  double alpha = kn_node_attr_float(c->node, "alpha", 1.0f), beta = kn_node_attr_float(c->node, "beta", 1.0f);
  int64_t m = y->shape.dim[0], n = y->shape.dim[1];
  int64_t k = ta ? a->shape.dim[0] : a->shape.dim[1];
  int64_t idx[2] = {0, 0};
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double acc = 0;
      for (int64_t p = 0; p < k; p++) {
        double av = kn_ref_load(a->dtype, a->data, ta ? p * m + i : i * k + p);
        double bv = kn_ref_load(b->dtype, b->data, tb ? j * k + p : p * n + j);
        acc += av * bv;
      }
      acc *= alpha;
      if (cc) {
        idx[0] = i, idx[1] = j;
        acc += beta * kn_ref_load(cc->dtype, cc->data, kn_ref_bcast_offset(&cc->shape, &y->shape, idx));
      }
      kn_ref_store(y->dtype, y->data, i * n + j, acc);
    }
  return 0;
}

int kn_ref_nn(kn_ref_call *c) {
  switch (c->node->op) {
  case KN_OP_CONV: return conv(c, false);
  case KN_OP_CONV_NHWC: return conv(c, true);
  case KN_OP_MATMUL: return matmul(c);
  case KN_OP_GEMM: return gemm(c);
  case KN_OP_MAX_POOL:
  case KN_OP_AVERAGE_POOL: return pool(c, false);
  case KN_OP_MAX_POOL_NHWC:
  case KN_OP_AVERAGE_POOL_NHWC: return pool(c, true);
  case KN_OP_GLOBAL_AVERAGE_POOL:
  case KN_OP_GLOBAL_MAX_POOL: return global_pool(c, false);
  case KN_OP_GLOBAL_AVERAGE_POOL_NHWC: return global_pool(c, true);
  case KN_OP_REDUCE_MEAN:
  case KN_OP_REDUCE_SUM:
  case KN_OP_REDUCE_MAX:
  case KN_OP_REDUCE_MIN:
  case KN_OP_REDUCE_PROD:
  case KN_OP_REDUCE_L1:
  case KN_OP_REDUCE_L2:
  case KN_OP_REDUCE_SUM_SQUARE:
  case KN_OP_REDUCE_LOG_SUM:
  case KN_OP_REDUCE_LOG_SUM_EXP: return reduce(c);
  case KN_OP_ARG_MAX:
  case KN_OP_ARG_MIN: return arg_extreme(c);
  case KN_OP_SOFTMAX:
  case KN_OP_LOG_SOFTMAX:
  case KN_OP_HARDMAX: return softmax(c);
  case KN_OP_LAYER_NORM: return layer_norm(c);
  case KN_OP_BATCH_NORM: return batch_norm(c);
  default: return kn_ref_error(c, "not a contraction, pool or reduction");
  }
}
