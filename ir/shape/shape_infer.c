/* shape_infer.c — the inference driver and the shared geometry helpers
 * (axes, windows, slices, broadcasting). The per-op rules live in
 * shape_infer_nn.c (elementwise, contractions, pools, reductions,
 * normalisations) and shape_infer_movement.c (data movement, views, shape and
 * constant producers).
 *
 * The driver visits nodes in topological order. After a node's outputs are
 * typed, if all its inputs are known at compile time (constants, or earlier
 * side-table results; Shape/Size need only a shape) and its outputs are small
 * and free of N, the reference interpreter computes them into a side table:
 * that is how Reshape sees the shape built by Shape->Gather->Concat, with N
 * carried as batch coefficients. The graph's constants are not touched. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/graph/index_family.h"
#include "ir/shape/shape_infer_impl.h"
#include "ir/shape/spatial.h"
#include "ir/passes/winograd.h"

/* Largest side-table tensor: shape arithmetic is tiny. */
#define KNOWN_MAX_ELEMS 4096
/* ... and cheap to compute (kn_node_work): small outputs can still hide a
 * huge reduction or convolution of large constants. */
#define KNOWN_MAX_WORK ((double)(1 << 24))

/* ---- shared helpers ---- */

int kn_axis_norm(int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) return -1;
  return (int)(axis < 0 ? axis + rank : axis);
}

const char *kn_shape_str(const kn_shape *s, char *buf, size_t size) {
  size_t len = 0;
  buf[0] = 0;
  len += (size_t)snprintf(buf + len, size - len, "[");
  for (int i = 0; i < s->rank && len < size; i++) {
    const char *sep = i ? "," : "";
    if (s->batch_mask & (1u << i))
      len += (size_t)snprintf(buf + len, size - len, "%sN*%lld", sep, (long long)s->dim[i]);
    else
      len += (size_t)snprintf(buf + len, size - len, "%s%lld", sep, (long long)s->dim[i]);
  }
  if (len < size) snprintf(buf + len, size - len, "]");
  return buf;
}

bool kn_shape_broadcast(const kn_shape *a, const kn_shape *b, kn_shape *out, int *bad_axis) {
  int r = a->rank > b->rank ? a->rank : b->rank;
  kn_shape o = {.rank = r};
  for (int i = 0; i < r; i++) {
    int ia = i - (r - a->rank), ib = i - (r - b->rank);
    int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
    bool ba = ia >= 0 && (a->batch_mask >> ia) & 1, bb = ib >= 0 && (b->batch_mask >> ib) & 1;
    if (da == db && ba == bb) {
      o.dim[i] = da;
      if (ba) o.batch_mask |= 1u << i;
    } else if (da == 1 && !ba) {
      o.dim[i] = db;
      if (bb) o.batch_mask |= 1u << i;
    } else if (db == 1 && !bb) {
      o.dim[i] = da;
      if (ba) o.batch_mask |= 1u << i;
    } else {
      if (bad_axis) *bad_axis = i;
      return false;
    }
  }
  *out = o;
  return true;
}

int kn_window_ints_attr(const kn_node *n, const char *name, int want, int64_t dflt, int64_t lo,
                       int64_t *v, kn_diag *d) {
  int count = 0;
  const int64_t *a = kn_node_attr_ints(n, name, &count);
  if (!a) {
    for (int i = 0; i < want; i++) v[i] = dflt;
    return 0;
  }
  if (count != want)
    return kn_diag_error(d, "node '%s' (%s): %s has %d entries, expected %d", n->name, n->op_type,
                         name, count, want);
  for (int i = 0; i < want; i++) {
    if (a[i] < lo || a[i] > ((int64_t)1 << 40))
      return kn_diag_error(d, "node '%s' (%s): %s[%d] = %lld is out of range", n->name,
                           n->op_type, name, i, (long long)a[i]);
    v[i] = a[i];
  }
  return 0;
}

int kn_window_resolve(const kn_node *n, int n_spatial, const int64_t *in_spatial,
                      const int64_t *kernel, bool use_ceil_mode, kn_window *w, kn_diag *d) {
  memset(w, 0, sizeof *w);
  w->n_spatial = n_spatial;
  int64_t pads[2 * KN_MAX_RANK];
  if (kn_window_ints_attr(n, "strides", n_spatial, 1, 1, w->stride, d) < 0 ||
      kn_window_ints_attr(n, "dilations", n_spatial, 1, 1, w->dilation, d) < 0 ||
      kn_window_ints_attr(n, "pads", 2 * n_spatial, 0, 0, pads, d) < 0)
    return -1;
  const char *auto_pad = kn_node_attr_string(n, "auto_pad", "NOTSET");
  bool same_upper = !strcmp(auto_pad, "SAME_UPPER"), same_lower = !strcmp(auto_pad, "SAME_LOWER");
  bool valid = !strcmp(auto_pad, "VALID");
  if (!same_upper && !same_lower && !valid && strcmp(auto_pad, "NOTSET") && auto_pad[0])
    return kn_diag_error(d, "node '%s' (%s): unknown auto_pad '%s'", n->name, n->op_type, auto_pad);
  bool ceil_mode = use_ceil_mode && kn_node_attr_int(n, "ceil_mode", 0) != 0;
  for (int i = 0; i < n_spatial; i++) {
    int64_t in = in_spatial[i], k = kernel[i], s = w->stride[i];
    if (k < 1 || k > ((int64_t)1 << 40))
      return kn_diag_error(d, "node '%s' (%s): kernel size %lld is out of range", n->name,
                           n->op_type, (long long)k);
    int64_t eff;
    if (__builtin_mul_overflow(w->dilation[i], k - 1, &eff) || eff > ((int64_t)1 << 41))
      return kn_diag_error(d, "node '%s' (%s): dilated kernel is too large", n->name, n->op_type);
    eff += 1;
    w->in[i] = in;
    w->kernel[i] = k;
    if (same_upper || same_lower) {
      /* A stride larger than the kernel can make the total pad negative:
       * it is clamped at 0 (TensorFlow's SAME, and what ONNX Runtime's Conv
       * computes; its pools disagree among themselves). */
      int64_t out = (in + s - 1) / s;
      int64_t total = (out - 1) * s + eff - in;
      if (total < 0) total = 0;
      w->pad_begin[i] = same_upper ? total / 2 : (total + 1) / 2;
      w->pad_end[i] = total - w->pad_begin[i];
      w->out[i] = out;
    } else {
      if (!valid) {
        w->pad_begin[i] = pads[i];
        w->pad_end[i] = pads[n_spatial + i];
      }
      int64_t span = in + w->pad_begin[i] + w->pad_end[i] - eff;
      if (span < 0)
        return kn_diag_error(d,
                             "node '%s' (%s): window %lld (dilated) is larger than the padded "
                             "input %lld along spatial axis %d",
                             n->name, n->op_type, (long long)eff,
                             (long long)(in + w->pad_begin[i] + w->pad_end[i]), i);
      int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
      /* The last window must start inside the input or the left padding. */
      if (ceil_mode && (out - 1) * s >= in + w->pad_begin[i]) out--;
      w->out[i] = out;
    }
    if (w->out[i] < 1)
      return kn_diag_error(d, "node '%s' (%s): empty output along spatial axis %d", n->name,
                           n->op_type, i);
  }
  return 0;
}

int kn_slice_resolve(const kn_node *n, int rank, const int64_t *dim, const int64_t *starts,
                     const int64_t *ends, const int64_t *axes, const int64_t *steps, int n_axes,
                     kn_slice *s, kn_diag *d) {
  memset(s, 0, sizeof *s);
  for (int a = 0; a < rank; a++) s->step[a] = 1, s->count[a] = dim[a];
  for (int i = 0; i < n_axes; i++) {
    int a = axes ? kn_axis_norm(axes[i], rank) : (i < rank ? i : -1);
    if (a < 0)
      return kn_diag_error(d, "node '%s' (%s): slice axis %lld is out of range for rank %d",
                           n->name, n->op_type, (long long)(axes ? axes[i] : i), rank);
    if (s->sliced_mask & (1u << a))
      return kn_diag_error(d, "node '%s' (%s): axis %d is sliced twice", n->name, n->op_type, a);
    s->sliced_mask |= 1u << a;
    int64_t step = steps ? steps[i] : 1, dm = dim[a];
    if (step == 0) return kn_diag_error(d, "node '%s' (%s): slice step is 0", n->name, n->op_type);
    /* Dims are below 2^41, so larger steps take at most one element. */
    const int64_t big = (int64_t)1 << 42;
    if (step > big) step = big;
    if (step < -big) step = -big;
    int64_t start = starts[i], end = ends[i];
    if (start < 0) start += dm;
    if (end == INT32_MAX || end == INT64_MAX) /* "to the end", either way (as ONNX Runtime) */
      end = step < 0 ? -1 : dm;
    else if (end < 0)
      end += dm;
    if (step > 0) {
      start = start < 0 ? 0 : start > dm ? dm : start;
      end = end < 0 ? 0 : end > dm ? dm : end;
    } else {
      start = start < 0 ? 0 : start > dm - 1 ? dm - 1 : start;
      end = end < -1 ? -1 : end > dm - 1 ? dm - 1 : end;
    }
    int64_t count = step > 0 ? (end - start + step - 1) / step : (start - end - step - 1) / (-step);
    if (dm == 0 || count < 0) count = 0;
    s->start[a] = count ? start : 0;
    s->step[a] = step;
    s->count[a] = count;
  }
  return 0;
}

/* ---- accessors for the per-op rules ---- */

const kn_node *kn_infer_node(const kn_infer *c) { return &c->g->nodes[c->node]; }

int kn_infer_fail(kn_infer *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = kn_node_verror(c->d, kn_infer_node(c), fmt, ap);
  va_end(ap);
  return rc;
}

const kn_value *kn_infer_in(const kn_infer *c, int k) {
  const kn_node *n = kn_infer_node(c);
  if (k >= n->n_in || n->in[k] < 0) return NULL;
  return &c->g->values[n->in[k]];
}

int kn_infer_set(kn_infer *c, int k, kn_dtype t, const kn_shape *s) {
  const kn_node *n = kn_infer_node(c);
  if (k >= n->n_out || n->out[k] < 0) return 0;
  if (s->rank < 0 || s->rank > KN_MAX_RANK)
    return kn_infer_fail(c, "output rank %d exceeds the maximum %d", s->rank, KN_MAX_RANK);
  for (int i = 0; i < s->rank; i++) {
    if (s->dim[i] < 0) return kn_infer_fail(c, "negative output dim %lld", (long long)s->dim[i]);
    if (s->dim[i] > KN_MAX_DIM)
      return kn_infer_fail(c, "output dim %d = %lld exceeds %lld", i, (long long)s->dim[i], (long long)KN_MAX_DIM);
  }
  int64_t numel = kn_shape_numel_max(s, c->g->max_batch);
  if (numel < 0) return kn_infer_fail(c, "output size overflows");
  if (numel > KN_MAX_TENSOR_BYTES / (kn_dtype_size(t) ? (int64_t)kn_dtype_size(t) : 1))
    return kn_infer_fail(c, "output %d is larger than %lld bytes", k, (long long)KN_MAX_TENSOR_BYTES);
  kn_value *v = &c->g->values[n->out[k]];
  v->dtype = t;
  v->shape = *s;
  v->shape_known = true;
  return 0;
}

const kn_ref_tensor *kn_infer_known(const kn_infer *c, int k) {
  const kn_node *n = kn_infer_node(c);
  if (k >= n->n_in || n->in[k] < 0) return NULL;
  const kn_ref_tensor *t = &c->known[n->in[k]];
  return t->data ? t : NULL;
}

int kn_infer_fail_unknown(kn_infer *c, int k, const char *what, const char *why) {
  const kn_node *n = kn_infer_node(c);
  int v = k < n->n_in ? n->in[k] : -1;
  if (c->missing && v >= 0) c->missing[v] = true;
  bool is_input = false; /* then say so: the user can bind it (kiln compile --bind) */
  for (int i = 0; v >= 0 && i < c->g->n_inputs; i++) is_input |= c->g->inputs[i] == v;
  char label[64] = "";
  if (what) snprintf(label, sizeof label, " (%s)", what);
  if (is_input)
    return kn_infer_fail(c,
                         "input %d%s must be a constant%s; it is graph input '%s', which can be bound at "
                         "compile time",
                         k, label, why, c->g->values[v].name);
  return kn_infer_fail(c, "input %d%s must be a constant%s", k, label, why);
}

int kn_infer_ints(kn_infer *c, int k, const char *what, int64_t *vals, int64_t *coefs, int max,
                  int *count) {
  const kn_ref_tensor *t = kn_infer_known(c, k);
  if (!t) return kn_infer_fail_unknown(c, k, what, "");
  if (!kn_dtype_is_int(t->dtype))
    return kn_infer_fail(c, "input %d (%s) must be an integer tensor, not %s", k, what,
                         kn_dtype_name(t->dtype));
  if (t->shape.rank > 1) return kn_infer_fail(c, "input %d (%s) must be 1-D", k, what);
  int64_t n = kn_ref_numel(&t->shape);
  if (n > max) return kn_infer_fail(c, "input %d (%s) has %lld entries, at most %d allowed", k, what, (long long)n, max);
  for (int64_t i = 0; i < n; i++) {
    vals[i] = kn_ref_load_int(t->dtype, t->data, i);
    int64_t cf = t->coef ? t->coef[i] : 0;
    if (coefs) coefs[i] = cf;
    else if (cf) return kn_infer_fail(c, "input %d (%s) depends on the batch size", k, what);
  }
  *count = (int)n;
  return 0;
}

int kn_infer_attr_or_input(kn_infer *c, const char *name, int k, int64_t *vals, int max,
                           int *count) {
  int n = 0;
  const int64_t *a = kn_node_attr_ints(kn_infer_node(c), name, &n);
  if (a) {
    if (n > max) return kn_infer_fail(c, "%s has %d entries, at most %d allowed", name, n, max);
    memcpy(vals, a, sizeof(int64_t) * (size_t)n);
    *count = n;
    return 1;
  }
  if (!kn_infer_in(c, k)) {
    *count = 0;
    return 0;
  }
  return kn_infer_ints(c, k, name, vals, NULL, max, count) < 0 ? -1 : 1;
}

/* ---- the driver ---- */

/* Evaluates node c->node into the side table when its inputs are known. */
static void propagate_known(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  bool shape_only = n->op == KN_OP_SHAPE || n->op == KN_OP_SIZE;
  kn_ref_tensor in[16], out[8];
  if (n->n_in > 16 || n->n_out > 8 || n->op == KN_OP_UNKNOWN) return;
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  for (int k = 0; k < n->n_in; k++) {
    int v = n->in[k];
    if (v < 0) continue;
    const kn_value *val = &c->g->values[v];
    if (shape_only && k == 0) {
      in[k] = (kn_ref_tensor){val->dtype, val->shape, (void *)val, NULL}; /* data never read */
      continue;
    }
    if (!c->known[v].data) return;
    in[k] = c->known[v];
  }
  for (int k = 0; k < n->n_out; k++) {
    const kn_value *val = &c->g->values[n->out[k]];
    if (!val->shape_known || val->shape.batch_mask || kn_value_numel(c->g, n->out[k]) > KNOWN_MAX_ELEMS)
      return;
  }
  double in_elems, work = kn_node_work(c->g, c->node, &in_elems);
  if (work > KNOWN_MAX_WORK + 4.0 * in_elems) return;
  for (int k = 0; k < n->n_out; k++) {
    const kn_value *val = &c->g->values[n->out[k]];
    out[k].dtype = val->dtype;
    out[k].shape = val->shape;
    out[k].data = kn_arena_alloc(&c->scratch, kn_dtype_size(val->dtype) * (size_t)kn_ref_numel(&val->shape));
  }
  kn_diag quiet;
  kn_diag_init(&quiet);
  kn_ref_call call = {c->g, n, in, n->n_in, out, n->n_out, &c->scratch, &quiet, .run_time = false};
  if (kn_ref_compute(&call) == 0)
    for (int k = 0; k < n->n_out; k++) c->known[n->out[k]] = out[k];
  kn_diag_free(&quiet);
}

/* Most inputs and outputs an op may have (-1: any number); every op needs
 * at least one output. The rules and kernels rely on this. */
static void op_arity(kn_op op, int *max_in, int *max_out) {
  if (kn_index_family_arity(op, max_in, max_out)) return; /* [indexing, scans, bitwise, einsum] */
  *max_out = 1;
  switch (op) {
  case KN_OP_CONSTANT: *max_in = 0; return;
  case KN_OP_MAX: case KN_OP_MIN: case KN_OP_CONCAT: case KN_OP_SUM: case KN_OP_MEAN:
    *max_in = -1; return;
  case KN_OP_ADD: case KN_OP_SUB: case KN_OP_MUL: case KN_OP_DIV: case KN_OP_POW:
  case KN_OP_EQUAL: case KN_OP_LESS: case KN_OP_GREATER: case KN_OP_AND: case KN_OP_OR:
  case KN_OP_MOD: case KN_OP_GREATER_OR_EQUAL: case KN_OP_LESS_OR_EQUAL: case KN_OP_XOR:
  case KN_OP_CAST_LIKE: case KN_OP_GATHER_ELEMENTS: case KN_OP_TRILU:
  case KN_OP_PRELU: case KN_OP_MATMUL: case KN_OP_GATHER: case KN_OP_EXPAND: case KN_OP_TILE:
  case KN_OP_RESHAPE: case KN_OP_SQUEEZE: case KN_OP_UNSQUEEZE: case KN_OP_REDUCE_MEAN:
  case KN_OP_REDUCE_SUM: case KN_OP_REDUCE_MAX: case KN_OP_REDUCE_MIN: case KN_OP_REDUCE_PROD:
  case KN_OP_REDUCE_L1: case KN_OP_REDUCE_L2: case KN_OP_REDUCE_SUM_SQUARE:
  case KN_OP_REDUCE_LOG_SUM: case KN_OP_REDUCE_LOG_SUM_EXP: *max_in = 2; return;
  case KN_OP_CLIP: case KN_OP_WHERE: case KN_OP_CONV: case KN_OP_CONV_NHWC: case KN_OP_GEMM:
  case KN_OP_RANGE: *max_in = 3; return;
  case KN_OP_DROPOUT: *max_in = 3, *max_out = 2; return;
  case KN_OP_MAX_POOL: *max_in = 1, *max_out = 2; return;
  case KN_OP_LAYER_NORM: *max_in = 3, *max_out = 3; return;
  case KN_OP_BATCH_NORM: *max_in = 5, *max_out = 5; return;
  case KN_OP_SPLIT: *max_in = 2, *max_out = -1; return;
  case KN_OP_SLICE: *max_in = 5; return;
  case KN_OP_PAD: *max_in = 4; return;
  /* spatial family (spatial.h) */
  case KN_OP_RESIZE: case KN_OP_RESIZE_DECLARED: *max_in = 4; return;
  case KN_OP_CONV_TRANSPOSE: case KN_OP_COL2IM: case KN_OP_ROI_ALIGN: case KN_OP_MAX_UNPOOL:
    *max_in = 3; return;
  case KN_OP_UPSAMPLE: case KN_OP_CENTER_CROP_PAD: case KN_OP_GRID_SAMPLE: case KN_OP_AFFINE_GRID:
    *max_in = 2; return;
  /* [attention family] */
  case KN_OP_ATTENTION: *max_in = 7, *max_out = 4; return;
  case KN_OP_RMS_NORM: *max_in = 2; return;
  case KN_OP_ROTARY_EMBEDDING: *max_in = 4; return;
  case KN_OP_CAUSAL_CONV_WITH_STATE: *max_in = 4, *max_out = 2; return;
  case KN_OP_FLEX_ATTENTION: *max_in = 3; return;
  case KN_OP_LINEAR_ATTENTION: *max_in = 6, *max_out = 2; return;
  /* misc family (shape_infer_misc.c) */
  case KN_OP_MEL_WEIGHT_MATRIX: *max_in = 5; return;
  default: *max_in = 1; return;
  }
}

static int infer_node(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  if (n->op == KN_OP_UNKNOWN) {
    if (n->domain && n->domain[0])
      return kn_infer_fail(c, "unsupported op '%s' of domain '%s'", n->op_type, n->domain);
    return kn_infer_fail(c, "unsupported op '%s'", n->op_type);
  }
  switch (n->op) { /* composite ops: ir/passes/pass_inline_control.c expands them first */
  case KN_OP_IF: case KN_OP_LOOP: case KN_OP_SCAN: case KN_OP_RNN: case KN_OP_LSTM: case KN_OP_GRU:
  case KN_OP_DFT: case KN_OP_STFT:
    return kn_infer_fail(c, "could not be expanded into primitive ops (its inputs have no static shape)");
  /* [data-dependent]: ir/passes/pass_data_dependent.c rewrites them first */
  case KN_OP_NON_ZERO: case KN_OP_COMPRESS: case KN_OP_UNIQUE:
    return kn_infer_fail(c, "its output shape depends on input values; Kiln compiles it only when its outputs "
                            "are model outputs declaring a static shape, or its data is a constant");
  default: break;
  }
  int max_in, max_out;
  op_arity(n->op, &max_in, &max_out);
  if (max_in >= 0 && n->n_in > max_in)
    return kn_infer_fail(c, "has %d inputs, at most %d allowed", n->n_in, max_in);
  if (n->n_out < 1 || (max_out >= 0 && n->n_out > max_out))
    return kn_infer_fail(c, "has %d outputs, expected 1..%d", n->n_out, max_out < 0 ? 64 : max_out);
  if (kn_spatial_op(n->op)) return kn_infer_spatial(c);
  if (kn_winograd_op(n->op)) return kn_infer_winograd(c);
  if (kn_index_family_has(n->op)) return kn_infer_index(c);
  switch (n->op) { /* [attention family]: composite ops, ir/shape/shape_infer_attention.c */
  case KN_OP_ATTENTION: case KN_OP_RMS_NORM: case KN_OP_ROTARY_EMBEDDING: case KN_OP_CAUSAL_CONV_WITH_STATE:
  case KN_OP_FLEX_ATTENTION: case KN_OP_LINEAR_ATTENTION: return kn_infer_attention(c);
  default: break;
  }
  if (n->op == KN_OP_BITCAST || n->op == KN_OP_MEL_WEIGHT_MATRIX) return kn_infer_misc(c);
  switch (kn_op_class_of(n->op)) {
  case KN_CLASS_ELEMWISE:
    return n->op == KN_OP_BATCH_NORM ? kn_infer_nn(c) : kn_infer_elemwise(c);
  case KN_CLASS_CONTRACTION:
  case KN_CLASS_REDUCE: return kn_infer_nn(c);
  case KN_CLASS_INJECTIVE:
  case KN_CLASS_VIEW:
  case KN_CLASS_CONSTANT: return kn_infer_movement(c);
  }
  return kn_infer_fail(c, "no shape rule");
}

/* Marks in needed[] the graph inputs behind each value a node needed but did
 * not know: walking back from such a value through producers whose output is
 * not known, every graph input reached decides it. Shape and Size read only
 * their input's shape, so the walk does not pass through them. */
static void find_needed_inputs(kn_infer *c, bool *needed) {
  kn_graph *g = c->g;
  int *stack = KN_NEW_ARRAY(&c->scratch, int, g->n_values + 1);
  bool *seen = KN_NEW_ARRAY(&c->scratch, bool, g->n_values + 1);
  int top = 0;
  for (int v = 0; v < g->n_values; v++)
    if (c->missing[v] && !seen[v]) seen[v] = true, stack[top++] = v;
  while (top > 0) {
    int v = stack[--top];
    const kn_value *val = &g->values[v];
    if (c->known[v].data || val->data) continue;
    if (val->producer < 0) {
      for (int i = 0; i < g->n_inputs; i++)
        if (g->inputs[i] == v) needed[v] = true;
      continue;
    }
    const kn_node *n = &g->nodes[val->producer];
    if (n->op == KN_OP_SHAPE || n->op == KN_OP_SIZE) continue;
    for (int k = 0; k < n->n_in; k++) {
      int u = n->in[k];
      if (u >= 0 && !seen[u]) seen[u] = true, stack[top++] = u;
    }
  }
}

static int infer_all(kn_graph *g, bool *needed, kn_diag *d) {
  if (kn_graph_toposort(g, d) < 0) return -1;
  int rc = 0;
  for (int i = 0; i < g->n_inputs; i++) {
    const kn_value *v = &g->values[g->inputs[i]];
    if (v->dtype == KN_DT_INVALID) rc = kn_diag_error(d, "graph input '%s' has no dtype", v->name);
    else if (!v->shape_known) rc = kn_diag_error(d, "graph input '%s' has no shape", v->name);
    else if (kn_value_numel(g, g->inputs[i]) < 0 ||
             kn_value_numel(g, g->inputs[i]) > KN_MAX_TENSOR_BYTES / (int64_t)kn_dtype_size(v->dtype))
      rc = kn_diag_error(d, "graph input '%s' is larger than %lld bytes (at batch %lld)", v->name,
                         (long long)KN_MAX_TENSOR_BYTES, (long long)g->max_batch);
  }
  /* dims too large even when a 0 dim makes the tensor empty: graph inputs
   * (checked above to have shapes) and constants */
  for (int i = 0; i < g->n_inputs + g->n_values; i++) {
    int v = i < g->n_inputs ? g->inputs[i] : i - g->n_inputs;
    const kn_value *val = &g->values[v];
    if (!val->shape_known || (i >= g->n_inputs && !val->data)) continue;
    for (int k = 0; k < val->shape.rank; k++)
      if (val->shape.dim[k] > KN_MAX_DIM) {
        rc = kn_diag_error(d, "%s '%s' has dim %d = %lld; at most %lld is supported",
                           val->data ? "constant" : "graph input", val->name, k, (long long)val->shape.dim[k],
                           (long long)KN_MAX_DIM);
        break;
      }
  }
  if (rc < 0) return rc;
  kn_infer c = {.g = g, .d = d};
  kn_arena_init(&c.scratch);
  c.known = KN_NEW_ARRAY(&c.scratch, kn_ref_tensor, g->n_values);
  if (needed) c.missing = KN_NEW_ARRAY(&c.scratch, bool, g->n_values);
  for (int v = 0; v < g->n_values; v++) {
    kn_value *val = &g->values[v];
    if (val->data) c.known[v] = (kn_ref_tensor){val->dtype, val->shape, val->data, val->batch_coef};
  }
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_out; k++) g->values[g->nodes[i].out[k]].shape_known = false;
  for (int i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    bool ready = true;
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0 && !g->values[n->in[k]].shape_known) ready = false;
    if (!ready) continue; /* an earlier failure already reported */
    c.node = i;
    int first_line = d ? d->count : 0;
    int node_rc = infer_node(&c);
    for (int k = 0; k < n->n_out && node_rc == 0; k++)
      if (!g->values[n->out[k]].shape_known) node_rc = kn_infer_fail(&c, "output %d has no shape rule", k);
    if (node_rc < 0) {
      rc = -1;
      kn_node_diag_origin(n, d, first_line); /* name the model's node, not only a made one */
      for (int k = 0; k < n->n_out; k++) g->values[n->out[k]].shape_known = false;
      continue;
    }
    propagate_known(&c);
  }
  if (needed) find_needed_inputs(&c, needed);
  kn_arena_free(&c.scratch);
  return rc;
}

int kn_infer_shapes(kn_graph *g, kn_diag *d) { return infer_all(g, NULL, d); }

int kn_infer_shapes_quiet(kn_graph *g) {
  kn_diag quiet;
  kn_diag_init(&quiet);
  int rc = infer_all(g, NULL, &quiet);
  kn_diag_free(&quiet);
  return rc;
}

int kn_infer_shapes_needs(kn_graph *g, bool *needed, kn_diag *d) { return infer_all(g, needed, d); }
