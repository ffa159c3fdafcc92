/* shape_infer_nn.c — shape and dtype rules of the elementwise ops, the
 * contractions (Conv, kiln.ConvNHWC, MatMul, Gemm), pools, reductions and
 * normalisations. Each rule checks what the op's kernel will rely on
 * (matching channels, inner dims, broadcastable operands) and names the
 * expected and actual sizes when they disagree. */
#include <string.h>

#include "ir/shape/shape_infer_impl.h"

#define SHAPE_STR(s) kn_shape_str((s), (char[160]){0}, 160)

static bool is_batch(const kn_shape *s, int i) { return (s->batch_mask >> i) & 1; }

static int need_inputs(kn_infer *c, int n) {
  for (int k = 0; k < n; k++)
    if (!kn_infer_in(c, k)) return kn_infer_fail(c, "input %d is missing", k);
  return 0;
}

static int need_rank(kn_infer *c, int k, const kn_value *v, int lo, int hi) {
  if (v->shape.rank < lo || v->shape.rank > hi) {
    if (lo == hi)
      return kn_infer_fail(c, "input %d must have rank %d, got %s", k, lo, SHAPE_STR(&v->shape));
    return kn_infer_fail(c, "input %d must have rank %d..%d, got %s", k, lo, hi, SHAPE_STR(&v->shape));
  }
  return 0;
}

static int need_same_dtype(kn_infer *c, int k, const kn_value *a, const kn_value *b) {
  if (a->dtype != b->dtype)
    return kn_infer_fail(c, "input %d is %s but input 0 is %s", k, kn_dtype_name(b->dtype),
                         kn_dtype_name(a->dtype));
  return 0;
}

/* ---- elementwise ---- */

static bool float_only(kn_op op) {
  switch (op) {
  case KN_OP_SIGMOID: case KN_OP_TANH: case KN_OP_ERF: case KN_OP_EXP: case KN_OP_LOG:
  case KN_OP_SQRT: case KN_OP_RECIPROCAL: case KN_OP_FLOOR: case KN_OP_CEIL: case KN_OP_SIN:
  case KN_OP_COS: case KN_OP_LEAKY_RELU: case KN_OP_ELU: case KN_OP_HARD_SIGMOID:
  case KN_OP_HARD_SWISH: case KN_OP_SOFTPLUS: case KN_OP_GELU: case KN_OP_SELU: case KN_OP_CELU:
  case KN_OP_THRESHOLDED_RELU: case KN_OP_SOFTSIGN: case KN_OP_MISH: case KN_OP_SWISH:
  case KN_OP_ROUND: case KN_OP_IS_NAN: case KN_OP_IS_INF: case KN_OP_TAN: case KN_OP_ASIN:
  case KN_OP_ACOS: case KN_OP_ATAN: case KN_OP_SINH: case KN_OP_COSH: case KN_OP_ASINH:
  case KN_OP_ACOSH: case KN_OP_ATANH: return true;
  default: return false;
  }
}

/* Numpy broadcast of inputs [first, n_in) (omitted ones skipped). */
static int broadcast_inputs(kn_infer *c, int first, kn_shape *out) {
  const kn_node *n = kn_infer_node(c);
  bool have = false;
  for (int k = first; k < n->n_in; k++) {
    const kn_value *v = kn_infer_in(c, k);
    if (!v) continue;
    if (!have) {
      *out = v->shape;
      have = true;
      continue;
    }
    kn_shape prev = *out;
    int bad = 0;
    if (!kn_shape_broadcast(&prev, &v->shape, out, &bad))
      return kn_infer_fail(c, "shapes %s and %s do not broadcast (input %d)", SHAPE_STR(&prev),
                           SHAPE_STR(&v->shape), k);
  }
  if (!have) return kn_infer_fail(c, "no inputs");
  return 0;
}

/* Casts to float8e8m0 round up and saturate (kn_f32_to_f8); the other modes
 * of ONNX's round_mode / saturate are not implemented. */
#define E8M0_CAST_MSG "a cast to float8e8m0 supports round_mode 'up' with saturate=1 only"
static bool e8m0_cast_ok(const kn_node *n) {
  return !strcmp(kn_node_attr_string(n, "round_mode", "up"), "up") && kn_node_attr_int(n, "saturate", 1) != 0;
}

int kn_infer_elemwise(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  const kn_value *x = kn_infer_in(c, 0);
  if (!x) return kn_infer_fail(c, "input 0 is missing");
  kn_op op = n->op;
  if (float_only(op) && !kn_dtype_is_float(x->dtype))
    return kn_infer_fail(c, "expected a float tensor, got %s", kn_dtype_name(x->dtype));
  kn_shape s;
  switch (op) {
  case KN_OP_NOT:
    if (x->dtype != KN_DT_BOOL) return kn_infer_fail(c, "expected bool, got %s", kn_dtype_name(x->dtype));
    return kn_infer_set(c, 0, KN_DT_BOOL, &x->shape);
  case KN_OP_CAST: {
    const kn_attr *to = kn_node_attr(n, "to");
    kn_dtype t = to && to->kind == KN_ATTR_INT ? kn_dtype_from_onnx((int)to->i) : KN_DT_INVALID;
    if (t == KN_DT_INVALID) return kn_infer_fail(c, "unsupported or missing 'to' dtype");
    if (t == KN_DT_F8E8M0 && !e8m0_cast_ok(n)) return kn_infer_fail(c, E8M0_CAST_MSG);
    return kn_infer_set(c, 0, t, &x->shape);
  }
  case KN_OP_CAST_LIKE: {
    if (need_inputs(c, 2) < 0) return -1;
    kn_dtype t = kn_infer_in(c, 1)->dtype;
    if (t == KN_DT_F8E8M0 && !e8m0_cast_ok(n)) return kn_infer_fail(c, E8M0_CAST_MSG);
    return kn_infer_set(c, 0, t, &x->shape);
  }
  case KN_OP_IS_NAN: case KN_OP_IS_INF: return kn_infer_set(c, 0, KN_DT_BOOL, &x->shape);
  case KN_OP_DROPOUT: return kn_infer_misc(c); /* shape_infer_misc.c */
  case KN_OP_CLIP:
    for (int k = 1; k < 3; k++) {
      const kn_value *b = kn_infer_in(c, k);
      if (b && kn_shape_numel_max(&b->shape, 1) != 1)
        return kn_infer_fail(c, "input %d (%s) must be a scalar, got %s", k, k == 1 ? "min" : "max",
                             SHAPE_STR(&b->shape));
    }
    return kn_infer_set(c, 0, x->dtype, &x->shape);
  case KN_OP_ADD: case KN_OP_SUB: case KN_OP_MUL: case KN_OP_DIV: case KN_OP_MAX:
  case KN_OP_MIN: case KN_OP_EQUAL: case KN_OP_LESS: case KN_OP_GREATER: case KN_OP_AND:
  case KN_OP_OR: case KN_OP_POW: case KN_OP_MOD: case KN_OP_GREATER_OR_EQUAL:
  case KN_OP_LESS_OR_EQUAL: case KN_OP_XOR: case KN_OP_SUM: case KN_OP_MEAN: {
    bool variadic = op == KN_OP_MAX || op == KN_OP_MIN || op == KN_OP_SUM || op == KN_OP_MEAN;
    if (!variadic && need_inputs(c, 2) < 0) return -1;
    for (int k = 1; k < n->n_in && op != KN_OP_POW; k++) {
      const kn_value *b = kn_infer_in(c, k);
      if (b && need_same_dtype(c, k, x, b) < 0) return -1;
    }
    if ((op == KN_OP_AND || op == KN_OP_OR || op == KN_OP_XOR) && x->dtype != KN_DT_BOOL)
      return kn_infer_fail(c, "expected bool, got %s", kn_dtype_name(x->dtype));
    if ((op == KN_OP_SUM || op == KN_OP_MEAN || op == KN_OP_MOD) && x->dtype == KN_DT_BOOL)
      return kn_infer_fail(c, "expected a numeric tensor, got bool");
    if (broadcast_inputs(c, 0, &s) < 0) return -1;
    bool to_bool = op == KN_OP_EQUAL || op == KN_OP_LESS || op == KN_OP_GREATER || op == KN_OP_AND ||
                   op == KN_OP_OR || op == KN_OP_GREATER_OR_EQUAL || op == KN_OP_LESS_OR_EQUAL ||
                   op == KN_OP_XOR;
    return kn_infer_set(c, 0, to_bool ? KN_DT_BOOL : x->dtype, &s);
  }
  case KN_OP_WHERE: {
    if (need_inputs(c, 3) < 0) return -1;
    if (x->dtype != KN_DT_BOOL) return kn_infer_fail(c, "condition must be bool, got %s", kn_dtype_name(x->dtype));
    const kn_value *a = kn_infer_in(c, 1), *b = kn_infer_in(c, 2);
    if (need_same_dtype(c, 2, a, b) < 0) return -1;
    if (broadcast_inputs(c, 0, &s) < 0) return -1;
    return kn_infer_set(c, 0, a->dtype, &s);
  }
  case KN_OP_PRELU: {
    if (need_inputs(c, 2) < 0) return -1;
    const kn_value *slope = kn_infer_in(c, 1);
    if (need_same_dtype(c, 1, x, slope) < 0) return -1;
    int bad;
    if (!kn_shape_broadcast(&x->shape, &slope->shape, &s, &bad) || !kn_shape_equal(&s, &x->shape))
      return kn_infer_fail(c, "slope %s does not broadcast to input %s", SHAPE_STR(&slope->shape),
                           SHAPE_STR(&x->shape));
    return kn_infer_set(c, 0, x->dtype, &x->shape);
  }
  default:
    if (x->dtype == KN_DT_BOOL && op != KN_OP_IDENTITY)
      return kn_infer_fail(c, "expected a numeric tensor, got bool");
    return kn_infer_set(c, 0, x->dtype, &x->shape);
  }
}

/* ---- contractions ---- */

static int conv(kn_infer *c, bool nhwc) {
  const kn_node *n = kn_infer_node(c);
  if (need_inputs(c, 2) < 0) return -1;
  const kn_value *x = kn_infer_in(c, 0), *w = kn_infer_in(c, 1), *b = kn_infer_in(c, 2);
  if (need_rank(c, 0, x, nhwc ? 4 : 3, nhwc ? 4 : KN_MAX_RANK) < 0) return -1;
  int r = x->shape.rank, ns = r - 2;
  /* kiln.ConvNHWC may take weights per sample, [N,KH,KW,C/g,M] with the
   * input's N (pass_scale_weights.c); the checks below see [KH,KW,C/g,M] */
  kn_shape wsh = w->shape;
  if (nhwc && wsh.rank == r + 1) {
    if (wsh.dim[0] != x->shape.dim[0] || (wsh.batch_mask & 1u) != (x->shape.batch_mask & 1u))
      return kn_infer_fail(c, "per-sample weight %s must lead with the input's batch, %s", SHAPE_STR(&w->shape),
                           SHAPE_STR(&x->shape));
    wsh.rank = r;
    memmove(wsh.dim, wsh.dim + 1, sizeof(int64_t) * (size_t)r);
    wsh.batch_mask >>= 1;
  }
  if (wsh.rank != r)
    return kn_infer_fail(c, "weight %s must have rank %d like the input %s", SHAPE_STR(&w->shape), r,
                         SHAPE_STR(&x->shape));
  if (need_same_dtype(c, 1, x, w) < 0) return -1;
  if (wsh.batch_mask) return kn_infer_fail(c, "weight depends on the batch size");
  int c_axis = nhwc ? r - 1 : 1, sp0 = nhwc ? 1 : 2;
  for (int i = 0; i < r; i++)
    if (i != 0 && is_batch(&x->shape, i))
      return kn_infer_fail(c, "only dim 0 of input %s may depend on the batch size", SHAPE_STR(&x->shape));
  int64_t group = kn_node_attr_int(n, "group", 1);
  int64_t cin = x->shape.dim[c_axis];
  int64_t m = nhwc ? wsh.dim[r - 1] : wsh.dim[0];
  int64_t cg = nhwc ? wsh.dim[r - 2] : wsh.dim[1];
  if (group < 1 || m % group != 0)
    return kn_infer_fail(c, "group %lld does not divide the %lld output channels", (long long)group, (long long)m);
  if (cin != cg * group)
    return kn_infer_fail(c, "input has %lld channels but weight %s expects %lld (group %lld)",
                         (long long)cin, SHAPE_STR(&wsh), (long long)(cg * group), (long long)group);
  int64_t in_sp[KN_MAX_RANK], kernel[KN_MAX_RANK];
  for (int i = 0; i < ns; i++) {
    in_sp[i] = x->shape.dim[sp0 + i];
    kernel[i] = nhwc ? wsh.dim[i] : wsh.dim[2 + i];
  }
  int nk = 0;
  const int64_t *ks = kn_node_attr_ints(n, "kernel_shape", &nk);
  if (ks && (nk != ns || memcmp(ks, kernel, sizeof(int64_t) * (size_t)ns) != 0))
    return kn_infer_fail(c, "kernel_shape disagrees with weight %s", SHAPE_STR(&wsh));
  if (b) {
    if (b->shape.rank != 1 || b->shape.dim[0] != m || b->shape.batch_mask)
      return kn_infer_fail(c, "bias must be [%lld], got %s", (long long)m, SHAPE_STR(&b->shape));
    if (need_same_dtype(c, 2, x, b) < 0) return -1;
  }
  kn_window win;
  if (kn_window_resolve(n, ns, in_sp, kernel, false, &win, c->d) < 0) return -1;
  kn_shape s = {.rank = r, .batch_mask = x->shape.batch_mask & 1u};
  s.dim[0] = x->shape.dim[0];
  s.dim[c_axis] = m;
  for (int i = 0; i < ns; i++) s.dim[sp0 + i] = win.out[i];
  return kn_infer_set(c, 0, x->dtype, &s);
}

static int matmul(kn_infer *c) {
  if (need_inputs(c, 2) < 0) return -1;
  const kn_value *a = kn_infer_in(c, 0), *b = kn_infer_in(c, 1);
  if (need_same_dtype(c, 1, a, b) < 0) return -1;
  kn_shape sa = a->shape, sb = b->shape;
  if (sa.rank < 1 || sb.rank < 1) return kn_infer_fail(c, "operands must have rank >= 1");
  bool vec_a = sa.rank == 1, vec_b = sb.rank == 1;
  if (vec_a) sa = (kn_shape){.rank = 2, .dim = {1, sa.dim[0]}, .batch_mask = sa.batch_mask << 1};
  if (vec_b) sb = (kn_shape){.rank = 2, .dim = {sb.dim[0], 1}, .batch_mask = sb.batch_mask};
  int ra = sa.rank, rb = sb.rank;
  bool ka_b = is_batch(&sa, ra - 1), kb_b = is_batch(&sb, rb - 2);
  if (sa.dim[ra - 1] != sb.dim[rb - 2] || ka_b != kb_b)
    return kn_infer_fail(c, "inner dims differ: %s x %s", SHAPE_STR(&a->shape), SHAPE_STR(&b->shape));
  kn_shape ba = {.rank = ra - 2, .batch_mask = sa.batch_mask & ((1u << (ra - 2)) - 1)};
  kn_shape bb = {.rank = rb - 2, .batch_mask = sb.batch_mask & ((1u << (rb - 2)) - 1)};
  memcpy(ba.dim, sa.dim, sizeof(int64_t) * (size_t)ba.rank);
  memcpy(bb.dim, sb.dim, sizeof(int64_t) * (size_t)bb.rank);
  kn_shape out;
  int bad;
  if (!kn_shape_broadcast(&ba, &bb, &out, &bad))
    return kn_infer_fail(c, "batch dims of %s and %s do not broadcast", SHAPE_STR(&a->shape),
                         SHAPE_STR(&b->shape));
  if (!vec_a) {
    out.dim[out.rank] = sa.dim[ra - 2];
    if (is_batch(&sa, ra - 2)) out.batch_mask |= 1u << out.rank;
    out.rank++;
  }
  if (!vec_b) {
    if (out.rank >= KN_MAX_RANK) return kn_infer_fail(c, "output rank too large");
    out.dim[out.rank] = sb.dim[rb - 1];
    if (is_batch(&sb, rb - 1)) out.batch_mask |= 1u << out.rank;
    out.rank++;
  }
  return kn_infer_set(c, 0, a->dtype, &out);
}

static int gemm(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  if (need_inputs(c, 2) < 0) return -1;
  const kn_value *a = kn_infer_in(c, 0), *b = kn_infer_in(c, 1), *cc = kn_infer_in(c, 2);
  if (need_rank(c, 0, a, 2, 2) < 0 || need_rank(c, 1, b, 2, 2) < 0) return -1;
  if (need_same_dtype(c, 1, a, b) < 0) return -1;
  bool ta = kn_node_attr_int(n, "transA", 0), tb = kn_node_attr_int(n, "transB", 0);
  int am = ta ? 1 : 0, ak = ta ? 0 : 1, bk = tb ? 1 : 0, bn = tb ? 0 : 1;
  if (a->shape.dim[ak] != b->shape.dim[bk] || is_batch(&a->shape, ak) != is_batch(&b->shape, bk))
    return kn_infer_fail(c, "inner dims differ: A %s%s x B %s%s", SHAPE_STR(&a->shape), ta ? "^T" : "",
                         SHAPE_STR(&b->shape), tb ? "^T" : "");
  kn_shape s = {.rank = 2, .dim = {a->shape.dim[am], b->shape.dim[bn]}};
  if (is_batch(&a->shape, am)) s.batch_mask |= 1;
  if (is_batch(&b->shape, bn)) s.batch_mask |= 2;
  if (cc) {
    kn_shape t;
    int bad;
    if (!kn_shape_broadcast(&s, &cc->shape, &t, &bad) || !kn_shape_equal(&t, &s))
      return kn_infer_fail(c, "C %s does not broadcast to the output %s", SHAPE_STR(&cc->shape), SHAPE_STR(&s));
  }
  return kn_infer_set(c, 0, a->dtype, &s);
}

/* ---- pools ---- */

static int pool(kn_infer *c, bool nhwc) {
  const kn_node *n = kn_infer_node(c);
  if (need_inputs(c, 1) < 0) return -1;
  const kn_value *x = kn_infer_in(c, 0);
  if (need_rank(c, 0, x, nhwc ? 4 : 3, nhwc ? 4 : KN_MAX_RANK) < 0) return -1;
  if (!kn_dtype_is_float(x->dtype) && n->op != KN_OP_MAX_POOL && n->op != KN_OP_MAX_POOL_NHWC)
    return kn_infer_fail(c, "expected a float tensor, got %s", kn_dtype_name(x->dtype));
  int r = x->shape.rank, ns = r - 2, sp0 = nhwc ? 1 : 2;
  for (int i = 0; i < ns; i++)
    if (is_batch(&x->shape, sp0 + i)) return kn_infer_fail(c, "spatial dims may not depend on the batch size");
  int nk = 0;
  const int64_t *ks = kn_node_attr_ints(n, "kernel_shape", &nk);
  if (!ks || nk != ns)
    return kn_infer_fail(c, "kernel_shape must have %d entries, got %d", ns, nk);
  int64_t in_sp[KN_MAX_RANK];
  for (int i = 0; i < ns; i++) in_sp[i] = x->shape.dim[sp0 + i];
  kn_window win;
  if (kn_window_resolve(n, ns, in_sp, ks, true, &win, c->d) < 0) return -1;
  kn_shape s = x->shape;
  for (int i = 0; i < ns; i++) s.dim[sp0 + i] = win.out[i];
  if (n->n_out > 1 && kn_infer_set(c, 1, KN_DT_I64, &s) < 0) return -1;
  return kn_infer_set(c, 0, x->dtype, &s);
}

static int global_pool(kn_infer *c, bool nhwc) {
  if (need_inputs(c, 1) < 0) return -1;
  const kn_value *x = kn_infer_in(c, 0);
  if (need_rank(c, 0, x, nhwc ? 4 : 3, nhwc ? 4 : KN_MAX_RANK) < 0) return -1;
  kn_shape s = x->shape;
  int r = s.rank;
  for (int i = nhwc ? 1 : 2; i < (nhwc ? r - 1 : r); i++) {
    s.dim[i] = 1;
    s.batch_mask &= ~(1u << i);
  }
  return kn_infer_set(c, 0, x->dtype, &s);
}

/* ---- reductions and normalisations ---- */

static int reduce(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  if (need_inputs(c, 1) < 0) return -1;
  const kn_value *x = kn_infer_in(c, 0);
  int64_t axes[KN_MAX_RANK];
  int n_axes = 0, r = x->shape.rank;
  bool arg = n->op == KN_OP_ARG_MAX || n->op == KN_OP_ARG_MIN;
  if (arg) { /* one axis, an attribute; int64 indices */
    if (x->dtype == KN_DT_BOOL) return kn_infer_fail(c, "expected a numeric tensor, got bool");
    axes[0] = kn_node_attr_int(n, "axis", 0);
    n_axes = 1;
  } else if (kn_infer_attr_or_input(c, "axes", 1, axes, KN_MAX_RANK, &n_axes) < 0) {
    return -1;
  }
  bool float_only = n->op == KN_OP_REDUCE_L2 || n->op == KN_OP_REDUCE_LOG_SUM ||
                    n->op == KN_OP_REDUCE_LOG_SUM_EXP;
  if (float_only && !kn_dtype_is_float(x->dtype))
    return kn_infer_fail(c, "expected a float tensor, got %s", kn_dtype_name(x->dtype));
  bool keep = kn_node_attr_int(n, "keepdims", 1) != 0;
  uint32_t mask = 0;
  if (n_axes == 0) {
    if (kn_node_attr_int(n, "noop_with_empty_axes", 0)) return kn_infer_set(c, 0, x->dtype, &x->shape);
    mask = (1u << r) - 1;
  }
  for (int i = 0; i < n_axes; i++) {
    int a = kn_axis_norm(axes[i], r);
    if (a < 0) return kn_infer_fail(c, "axis %lld is out of range for rank %d", (long long)axes[i], r);
    mask |= 1u << a;
  }
  kn_shape s = {0};
  for (int i = 0; i < r; i++) {
    if (!(mask & (1u << i))) {
      s.dim[s.rank] = x->shape.dim[i];
      if (is_batch(&x->shape, i)) s.batch_mask |= 1u << s.rank;
      s.rank++;
    } else if (keep) {
      s.dim[s.rank++] = 1;
    }
  }
  return kn_infer_set(c, 0, arg ? KN_DT_I64 : x->dtype, &s);
}

static int softmax(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  if (need_inputs(c, 1) < 0) return -1;
  const kn_value *x = kn_infer_in(c, 0);
  if (!kn_dtype_is_float(x->dtype)) return kn_infer_fail(c, "expected a float tensor, got %s", kn_dtype_name(x->dtype));
  bool old = c->g->opset > 0 && c->g->opset < 13;
  int64_t axis = kn_node_attr_int(n, "axis", old ? 1 : -1);
  if (x->shape.rank > 0 && kn_axis_norm(axis, x->shape.rank) < 0)
    return kn_infer_fail(c, "axis %lld is out of range for rank %d", (long long)axis, x->shape.rank);
  return kn_infer_set(c, 0, x->dtype, &x->shape);
}

static int layer_norm(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  if (need_inputs(c, 2) < 0) return -1;
  const kn_value *x = kn_infer_in(c, 0);
  if (!kn_dtype_is_float(x->dtype)) return kn_infer_fail(c, "expected a float tensor, got %s", kn_dtype_name(x->dtype));
  int r = x->shape.rank;
  int axis = kn_axis_norm(kn_node_attr_int(n, "axis", -1), r);
  if (axis < 0) return kn_infer_fail(c, "axis is out of range for rank %d", r);
  kn_shape norm = {.rank = r - axis};
  for (int i = axis; i < r; i++) {
    if (is_batch(&x->shape, i)) return kn_infer_fail(c, "normalised dims may not depend on the batch size");
    norm.dim[i - axis] = x->shape.dim[i];
  }
  for (int k = 1; k < 3; k++) {
    const kn_value *p = kn_infer_in(c, k);
    if (!p) continue;
    kn_shape t;
    int bad;
    if (need_same_dtype(c, k, x, p) < 0) return -1;
    if (!kn_shape_broadcast(&norm, &p->shape, &t, &bad) || !kn_shape_equal(&t, &norm))
      return kn_infer_fail(c, "%s %s does not match the normalised shape %s", k == 1 ? "scale" : "bias",
                           SHAPE_STR(&p->shape), SHAPE_STR(&norm));
  }
  kn_shape stat = x->shape;
  for (int i = axis; i < r; i++) stat.dim[i] = 1;
  if (kn_infer_set(c, 1, KN_DT_F32, &stat) < 0 || kn_infer_set(c, 2, KN_DT_F32, &stat) < 0) return -1;
  return kn_infer_set(c, 0, x->dtype, &x->shape);
}

static int batch_norm(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  if (need_inputs(c, 5) < 0) return -1;
  if (kn_node_attr_int(n, "training_mode", 0) || n->n_out > 1)
    return kn_infer_fail(c, "training mode is not supported (inference only)");
  const kn_value *x = kn_infer_in(c, 0);
  if (need_rank(c, 0, x, 2, KN_MAX_RANK) < 0) return -1;
  if (!kn_dtype_is_float(x->dtype)) return kn_infer_fail(c, "expected a float tensor, got %s", kn_dtype_name(x->dtype));
  if (is_batch(&x->shape, 1)) return kn_infer_fail(c, "channels may not depend on the batch size");
  static const char *names[] = {"", "scale", "B", "mean", "var"};
  for (int k = 1; k < 5; k++) {
    const kn_value *p = kn_infer_in(c, k);
    if (p->shape.rank != 1 || p->shape.dim[0] != x->shape.dim[1] || p->shape.batch_mask)
      return kn_infer_fail(c, "%s must be [%lld] (the channels of %s), got %s", names[k],
                           (long long)x->shape.dim[1], SHAPE_STR(&x->shape), SHAPE_STR(&p->shape));
    if (!kn_dtype_is_float(p->dtype)) return kn_infer_fail(c, "%s must be float", names[k]);
  }
  return kn_infer_set(c, 0, x->dtype, &x->shape);
}

int kn_infer_nn(kn_infer *c) {
  switch (kn_infer_node(c)->op) {
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
  case KN_OP_REDUCE_LOG_SUM_EXP:
  case KN_OP_ARG_MAX:
  case KN_OP_ARG_MIN: return reduce(c);
  case KN_OP_SOFTMAX:
  case KN_OP_LOG_SOFTMAX:
  case KN_OP_HARDMAX: return softmax(c);
  case KN_OP_LAYER_NORM: return layer_norm(c);
  case KN_OP_BATCH_NORM: return batch_norm(c);
  default: return kn_infer_fail(c, "no shape rule");
  }
}
