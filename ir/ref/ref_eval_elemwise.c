/* ref_eval_elemwise.c — reference kernels of the elementwise ops: unary math
 * and activations, Clip, Cast/CastLike, Identity/Dropout, the broadcasting
 * binary ops (and variadic Max/Min/Sum/Mean), Mod, comparisons, logic, Where
 * and PRelu.
 *
 * Float math is done in double and rounded once on store. Integer tensors use
 * exact int64 arithmetic (wrapping, never undefined); the integer
 * Add/Sub/Mul/Div/Neg also carry batch coefficients (a + b*N elements). */
#include <math.h>
#include <string.h>

#include "ir/ref/ref_eval.h"

/* ---- unary ---- */

static double unary_f(const kn_node *n, double x) {
  switch (n->op) {
  case KN_OP_RELU: return x < 0 ? 0 : x; /* NaN stays NaN, as max(x, 0) in ONNX */
  case KN_OP_SIGMOID: return 1.0 / (1.0 + exp(-x));
  case KN_OP_TANH: return tanh(x);
  case KN_OP_ERF: return erf(x);
  case KN_OP_EXP: return exp(x);
  case KN_OP_LOG: return log(x);
  case KN_OP_SQRT: return sqrt(x);
  case KN_OP_RECIPROCAL: return 1.0 / x;
  case KN_OP_NEG: return -x;
  case KN_OP_ABS: return fabs(x);
  case KN_OP_FLOOR: return floor(x);
  case KN_OP_CEIL: return ceil(x);
  case KN_OP_SIN: return sin(x);
  case KN_OP_COS: return cos(x);
  case KN_OP_NOT: return x == 0;
  case KN_OP_LEAKY_RELU: return x < 0 ? kn_node_attr_float(n, "alpha", 0.01f) * x : x;
  case KN_OP_ELU: return x < 0 ? kn_node_attr_float(n, "alpha", 1.0f) * (exp(x) - 1.0) : x;
  case KN_OP_HARD_SIGMOID: {
    double y = kn_node_attr_float(n, "alpha", 0.2f) * x + kn_node_attr_float(n, "beta", 0.5f);
    return y < 0 ? 0 : y > 1 ? 1 : y;
  }
  case KN_OP_HARD_SWISH: {
    double y = x / 6.0 + 0.5;
    return x * (y < 0 ? 0 : y > 1 ? 1 : y);
  }
  case KN_OP_SOFTPLUS: return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
  case KN_OP_GELU:
    if (strcmp(kn_node_attr_string(n, "approximate", "none"), "tanh") == 0)
      return 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
  case KN_OP_SELU: {
    double alpha = kn_node_attr_float(n, "alpha", 1.67326319217681884765625f);
    double gamma = kn_node_attr_float(n, "gamma", 1.05070102214813232421875f);
    return gamma * (x > 0 ? x : alpha * (exp(x) - 1.0));
  }
  case KN_OP_CELU: {
    double alpha = kn_node_attr_float(n, "alpha", 1.0f);
    double neg = alpha * (exp(x / alpha) - 1.0);
    return (x < 0 ? 0 : x) + (neg > 0 ? 0 : neg);
  }
  case KN_OP_THRESHOLDED_RELU: return x > kn_node_attr_float(n, "alpha", 1.0f) ? x : 0;
  case KN_OP_SHRINK: {
    double lambd = kn_node_attr_float(n, "lambd", 0.5f), bias = kn_node_attr_float(n, "bias", 0);
    return x < -lambd ? x + bias : x > lambd ? x - bias : 0;
  }
  case KN_OP_SOFTSIGN: return x / (1.0 + fabs(x));
  case KN_OP_MISH: return x * tanh(x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)));
  case KN_OP_SWISH: return x / (1.0 + exp(-kn_node_attr_float(n, "alpha", 1.0f) * x));
  case KN_OP_ROUND: return nearbyint(x); /* half to even in the default rounding mode */
  case KN_OP_SIGN: return x > 0 ? 1 : x < 0 ? -1 : x;
  case KN_OP_IS_NAN: return isnan(x);
  case KN_OP_IS_INF:
    return isinf(x) && ((x > 0 && kn_node_attr_int(n, "detect_positive", 1)) ||
                        (x < 0 && kn_node_attr_int(n, "detect_negative", 1)));
  case KN_OP_TAN: return tan(x);
  case KN_OP_ASIN: return asin(x);
  case KN_OP_ACOS: return acos(x);
  case KN_OP_ATAN: return atan(x);
  case KN_OP_SINH: return sinh(x);
  case KN_OP_COSH: return cosh(x);
  case KN_OP_ASINH: return asinh(x);
  case KN_OP_ACOSH: return acosh(x);
  case KN_OP_ATANH: return atanh(x);
  default: KN_UNREACHABLE("not a unary op");
  }
  return 0;
}

static int unary(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0];
  kn_ref_tensor *y = &c->out[0];
  int64_t n = kn_ref_numel(&y->shape);
  kn_op op = c->node->op;
  bool int_path = kn_dtype_is_int(x->dtype) &&
                  (op == KN_OP_RELU || op == KN_OP_NEG || op == KN_OP_ABS || op == KN_OP_SIGN);
  if (int_path) {
    for (int64_t i = 0; i < n; i++) {
      int64_t v = kn_ref_load_int(x->dtype, x->data, i);
      if (op == KN_OP_RELU) v = v > 0 ? v : 0;
      else if (op == KN_OP_SIGN) v = v > 0 ? 1 : v < 0 ? -1 : 0;
      else if (op == KN_OP_NEG || v < 0) v = (int64_t)(0 - (uint64_t)v);
      kn_ref_store_int(y->dtype, y->data, i, v);
    }
    if (x->coef && op == KN_OP_NEG) {
      y->coef = KN_NEW_ARRAY(c->arena, int64_t, n);
      for (int64_t i = 0; i < n; i++) y->coef[i] = (int64_t)(0 - (uint64_t)x->coef[i]);
    } else if (x->coef) {
      return KN_REF_NOFOLD;
    }
    return 0;
  }
  if (x->coef) return KN_REF_NOFOLD;
  for (int64_t i = 0; i < n; i++)
    kn_ref_store(y->dtype, y->data, i, unary_f(c->node, kn_ref_load(x->dtype, x->data, i)));
  return 0;
}

/* Clip: bounds from inputs 1 and 2 (opset >= 11) or attributes min / max. */
static int clip(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0];
  kn_ref_tensor *y = &c->out[0];
  int64_t n = kn_ref_numel(&y->shape);
  bool has_lo = false, has_hi = false;
  double lo = 0, hi = 0;
  if (c->n_in > 1 && c->in[1].data) {
    has_lo = true;
    lo = kn_ref_load(c->in[1].dtype, c->in[1].data, 0);
  } else if (kn_node_attr(c->node, "min")) {
    has_lo = true;
    lo = kn_node_attr_float(c->node, "min", 0);
  }
  if (c->n_in > 2 && c->in[2].data) {
    has_hi = true;
    hi = kn_ref_load(c->in[2].dtype, c->in[2].data, 0);
  } else if (kn_node_attr(c->node, "max")) {
    has_hi = true;
    hi = kn_node_attr_float(c->node, "max", 0);
  }
  /* an integer x's bounds, exact: read as integers (a double drops int64's low bits) */
  bool int_lo = has_lo && c->n_in > 1 && c->in[1].data && kn_dtype_is_int(c->in[1].dtype);
  bool int_hi = has_hi && c->n_in > 2 && c->in[2].data && kn_dtype_is_int(c->in[2].dtype);
  bool u64 = x->dtype == KN_DT_U64;
  int64_t ilo = int_lo ? kn_ref_load_int(c->in[1].dtype, c->in[1].data, 0) : kn_f2int_sat(x->dtype, lo);
  int64_t ihi = int_hi ? kn_ref_load_int(c->in[2].dtype, c->in[2].data, 0) : kn_f2int_sat(x->dtype, hi);
  for (int64_t i = 0; i < n; i++) {
    if (kn_dtype_is_int(x->dtype)) {
      int64_t v = kn_ref_load_int(x->dtype, x->data, i);
      if (has_lo && (u64 ? (uint64_t)v < (uint64_t)ilo : v < ilo)) v = ilo; /* as the kernels compare */
      if (has_hi && (u64 ? (uint64_t)v > (uint64_t)ihi : v > ihi)) v = ihi;
      kn_ref_store_int(y->dtype, y->data, i, v);
    } else {
      double v = kn_ref_load(x->dtype, x->data, i);
      if (has_lo && v < lo) v = lo;
      if (has_hi && v > hi) v = hi;
      kn_ref_store(y->dtype, y->data, i, v);
    }
  }
  return 0;
}

/* Cast / CastLike. To float8 with saturate (the default) magnitudes past
 * the format's largest finite value, infinities included, clamp to it. */
static int cast(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0];
  kn_ref_tensor *y = &c->out[0];
  int64_t n = kn_ref_numel(&y->shape);
  bool saturate = kn_dtype_is_f8(y->dtype) && y->dtype != KN_DT_F8E8M0 &&
                  kn_node_attr_int(c->node, "saturate", 1) != 0;
  double max = saturate ? kn_f8_format_of(y->dtype).max : 0;
  for (int64_t i = 0; i < n; i++) {
    if (saturate) {
      double v = kn_ref_load(x->dtype, x->data, i);
      kn_ref_store(y->dtype, y->data, i, v > max ? max : v < -max ? -max : v);
    } else if (y->dtype == KN_DT_BOOL || kn_dtype_is_float(y->dtype) || kn_dtype_is_float(x->dtype))
      kn_ref_store(y->dtype, y->data, i, kn_ref_load(x->dtype, x->data, i)); /* kn_f2i64_sat's rule */
    else
      kn_ref_store_int(y->dtype, y->data, i, kn_ref_load_int(x->dtype, x->data, i));
  }
  return 0;
}

/* Identity and (inference) Dropout; Dropout's optional mask is all true. */
static int copy(kn_ref_call *c) {
  int64_t n = kn_ref_numel(&c->out[0].shape);
  memcpy(c->out[0].data, c->in[0].data, (size_t)n * kn_dtype_size(c->out[0].dtype));
  if (c->n_out > 1 && c->out[1].data) memset(c->out[1].data, 1, (size_t)kn_ref_numel(&c->out[1].shape));
  return 0;
}

/* ---- binary and variadic, numpy broadcasting ---- */

static double binary_f(kn_op op, double a, double b) {
  switch (op) {
  case KN_OP_ADD: return a + b;
  case KN_OP_SUB: return a - b;
  case KN_OP_MUL: return a * b;
  case KN_OP_DIV: return a / b;
  case KN_OP_POW: return pow(a, b);
  case KN_OP_MAX: return isnan(a) || a > b ? a : b;
  case KN_OP_MIN: return isnan(a) || a < b ? a : b;
  case KN_OP_EQUAL: return a == b;
  case KN_OP_LESS: return a < b;
  case KN_OP_GREATER: return a > b;
  case KN_OP_AND: return (a != 0) && (b != 0);
  case KN_OP_OR: return (a != 0) || (b != 0);
  case KN_OP_PRELU: return a < 0 ? a * b : a;
  case KN_OP_GREATER_OR_EQUAL: return a >= b;
  case KN_OP_LESS_OR_EQUAL: return a <= b;
  case KN_OP_XOR: return (a != 0) != (b != 0);
  case KN_OP_SUM:
  case KN_OP_MEAN: return a + b;
  default: KN_UNREACHABLE("not a binary op");
  }
  return 0;
}

/* The signs (-1, 0, 1) that (a + ca*N) - (b + cb*N) takes over the batches
 * N >= 1 (the runtime refuses smaller ones), as the range [*lo, *hi]; false
 * when the difference overflows. A linear function of N goes from its value
 * at N = 1 towards the sign of its slope. */
static bool batch_signs(int64_t a, int64_t ca, int64_t b, int64_t cb, int *lo, int *hi) {
  int64_t d0, dc, d1;
  if (__builtin_sub_overflow(a, b, &d0) || __builtin_sub_overflow(ca, cb, &dc) ||
      __builtin_add_overflow(d0, dc, &d1))
    return false;
  int at_one = (d1 > 0) - (d1 < 0);
  *lo = dc < 0 ? -1 : at_one;
  *hi = dc > 0 ? 1 : at_one;
  return true;
}

/* 1 when `op` holds for every sign in [lo, hi], 0 when for none, -1 otherwise. */
static int compare_signs(kn_op op, int lo, int hi) {
  int holds = 0, fails = 0;
  for (int sign = lo; sign <= hi; sign++) {
    bool r = op == KN_OP_EQUAL ? sign == 0 : op == KN_OP_LESS ? sign < 0 : op == KN_OP_GREATER ? sign > 0
           : op == KN_OP_GREATER_OR_EQUAL ? sign >= 0 : sign <= 0;
    holds += r, fails += !r;
  }
  return fails == 0 ? 1 : holds == 0 ? 0 : -1;
}

/* Exact integer a op b with coefficients (a + ca*N) op (b + cb*N); returns
 * -1 on division by zero, KN_REF_NOFOLD when the result is not linear in N.
 * A comparison, Max or Min of batch-dependent values folds when its outcome
 * is the same for every batch: torch's expand(N, -1, -1) exports its shape as
 * Where(Equal(shape, -1), ones, shape), with shape[0] = N. */
static int binary_i(kn_op op, int64_t a, int64_t ca, int64_t b, int64_t cb, int64_t *r,
                    int64_t *cr) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  *cr = 0;
  switch (op) {
  case KN_OP_ADD:
    *r = (int64_t)(ua + ub);
    *cr = (int64_t)((uint64_t)ca + (uint64_t)cb);
    return 0;
  case KN_OP_SUB:
    *r = (int64_t)(ua - ub);
    *cr = (int64_t)((uint64_t)ca - (uint64_t)cb);
    return 0;
  case KN_OP_MUL:
    if (ca && cb) return KN_REF_NOFOLD;
    *r = (int64_t)(ua * ub);
    *cr = (int64_t)((uint64_t)ca * ub + (uint64_t)cb * ua);
    return 0;
  case KN_OP_DIV:
    if (cb) return KN_REF_NOFOLD;
    if (b == 0) return -1;
    if (ca && (a % b != 0 || ca % b != 0)) return KN_REF_NOFOLD;
    *r = (a == INT64_MIN && b == -1) ? INT64_MIN : a / b;
    *cr = (ca == INT64_MIN && b == -1) ? INT64_MIN : ca / b;
    return 0;
  default: break;
  }
  if (ca || cb) {
    int lo, hi;
    if (!batch_signs(a, ca, b, cb, &lo, &hi)) return KN_REF_NOFOLD;
    switch (op) {
    case KN_OP_EQUAL: case KN_OP_LESS: case KN_OP_GREATER: case KN_OP_GREATER_OR_EQUAL:
    case KN_OP_LESS_OR_EQUAL: {
      int holds = compare_signs(op, lo, hi);
      if (holds < 0) return KN_REF_NOFOLD;
      *r = holds;
      return 0;
    }
    case KN_OP_MAX: case KN_OP_MIN: {
      bool a_wins = op == KN_OP_MAX ? lo >= 0 : hi <= 0;
      if (!a_wins && (op == KN_OP_MAX ? hi > 0 : lo < 0)) return KN_REF_NOFOLD;
      *r = a_wins ? a : b, *cr = a_wins ? ca : cb;
      return 0;
    }
    default: return KN_REF_NOFOLD;
    }
  }
  switch (op) {
  case KN_OP_POW: *r = kn_f2i64_sat(pow((double)a, (double)b)); return 0;
  case KN_OP_MAX: *r = a > b ? a : b; return 0;
  case KN_OP_MIN: *r = a < b ? a : b; return 0;
  case KN_OP_EQUAL: *r = a == b; return 0;
  case KN_OP_LESS: *r = a < b; return 0;
  case KN_OP_GREATER: *r = a > b; return 0;
  case KN_OP_AND: *r = a && b; return 0;
  case KN_OP_OR: *r = a || b; return 0;
  case KN_OP_PRELU: *r = a < 0 ? (int64_t)((uint64_t)a * ub) : a; return 0;
  case KN_OP_GREATER_OR_EQUAL: *r = a >= b; return 0;
  case KN_OP_LESS_OR_EQUAL: *r = a <= b; return 0;
  case KN_OP_XOR: *r = (a != 0) != (b != 0); return 0;
  case KN_OP_SUM:
  case KN_OP_MEAN: *r = (int64_t)(ua + ub); return 0;
  default: KN_UNREACHABLE("not a binary op");
  }
  return 0;
}

/* Binary ops and variadic Max / Min (folded left to right). */
static int binary(kn_ref_call *c) {
  kn_op op = c->node->op;
  kn_ref_tensor *y = &c->out[0];
  kn_dtype in_t = c->in[0].dtype;
  bool int_path = (in_t == KN_DT_BOOL || kn_dtype_is_int(in_t)) && op != KN_OP_POW;
  bool any_coef = false;
  for (int k = 0; k < c->n_in; k++) any_coef |= c->in[k].data && c->in[k].coef;
  if (any_coef && !int_path) return KN_REF_NOFOLD;
  int64_t n = kn_ref_numel(&y->shape);
  if (any_coef) y->coef = KN_NEW_ARRAY(c->arena, int64_t, n);
  int64_t idx[KN_MAX_RANK] = {0};
  for (int64_t i = 0; i < n; i++, kn_ref_next_index(&y->shape, idx)) {
    const kn_ref_tensor *a = &c->in[0];
    int64_t off = kn_ref_bcast_offset(&a->shape, &y->shape, idx);
    if (int_path) {
      int64_t r = kn_ref_load_int(a->dtype, a->data, off), cr = a->coef ? a->coef[off] : 0;
      for (int k = 1; k < c->n_in; k++) {
        const kn_ref_tensor *b = &c->in[k];
        if (!b->data) continue;
        int64_t boff = kn_ref_bcast_offset(&b->shape, &y->shape, idx);
        int rc = binary_i(op, r, cr, kn_ref_load_int(b->dtype, b->data, boff),
                          b->coef ? b->coef[boff] : 0, &r, &cr);
        if (rc < 0) return kn_ref_error(c, "integer division by zero");
        if (rc) return rc;
      }
      if (op == KN_OP_MEAN) return kn_ref_error(c, "integer Mean");
      kn_ref_store_int(y->dtype, y->data, i, r);
      if (y->coef) y->coef[i] = cr;
    } else {
      double r = kn_ref_load(a->dtype, a->data, off);
      for (int k = 1; k < c->n_in; k++) {
        const kn_ref_tensor *b = &c->in[k];
        if (!b->data) continue;
        int64_t boff = kn_ref_bcast_offset(&b->shape, &y->shape, idx);
        r = binary_f(op, r, kn_ref_load(b->dtype, b->data, boff));
      }
      if (op == KN_OP_MEAN) r /= c->n_in;
      kn_ref_store(y->dtype, y->data, i, r);
    }
  }
  return 0;
}

/* Mod: fmod=0 takes the divisor's sign (integers only, as numpy's mod);
 * fmod=1 the dividend's (C fmod / %). */
static int mod(kn_ref_call *c) {
  kn_ref_tensor *y = &c->out[0];
  const kn_ref_tensor *a = &c->in[0], *b = &c->in[1];
  bool c_mod = kn_node_attr_int(c->node, "fmod", 0) != 0;
  if (a->coef || b->coef) return KN_REF_NOFOLD;
  int64_t n = kn_ref_numel(&y->shape);
  int64_t idx[KN_MAX_RANK] = {0};
  for (int64_t i = 0; i < n; i++, kn_ref_next_index(&y->shape, idx)) {
    int64_t ao = kn_ref_bcast_offset(&a->shape, &y->shape, idx);
    int64_t bo = kn_ref_bcast_offset(&b->shape, &y->shape, idx);
    if (kn_dtype_is_float(y->dtype)) {
      double u = kn_ref_load(a->dtype, a->data, ao), v = kn_ref_load(b->dtype, b->data, bo);
      double r = fmod(u, v);
      if (!c_mod && r != 0 && (r < 0) != (v < 0)) r += v;
      kn_ref_store(y->dtype, y->data, i, r);
    } else if (y->dtype == KN_DT_U64) {
      uint64_t u = ((const uint64_t *)a->data)[ao], v = ((const uint64_t *)b->data)[bo];
      if (v == 0) return kn_ref_error(c, "integer modulo by zero");
      ((uint64_t *)y->data)[i] = u % v;
    } else {
      int64_t u = kn_ref_load_int(a->dtype, a->data, ao), v = kn_ref_load_int(b->dtype, b->data, bo);
      if (v == 0) return kn_ref_error(c, "integer modulo by zero");
      int64_t r = v == -1 ? 0 : u % v;
      if (!c_mod && r != 0 && (r < 0) != (v < 0)) r += v;
      kn_ref_store_int(y->dtype, y->data, i, r);
    }
  }
  return 0;
}

/* Where(cond, a, b): element copy, so any dtype (and coefficient arrays,
 * which the dispatcher passes as int64 data) works. */
static int where(kn_ref_call *c) {
  kn_ref_tensor *y = &c->out[0];
  size_t es = kn_dtype_size(y->dtype);
  int64_t n = kn_ref_numel(&y->shape);
  int64_t idx[KN_MAX_RANK] = {0};
  for (int64_t i = 0; i < n; i++, kn_ref_next_index(&y->shape, idx)) {
    const kn_ref_tensor *cond = &c->in[0];
    bool take_a = kn_ref_load_int(cond->dtype, cond->data, kn_ref_bcast_offset(&cond->shape, &y->shape, idx)) != 0;
    const kn_ref_tensor *src = &c->in[take_a ? 1 : 2];
    int64_t off = kn_ref_bcast_offset(&src->shape, &y->shape, idx);
    memcpy((char *)y->data + (size_t)i * es, (const char *)src->data + (size_t)off * es, es);
  }
  return 0;
}

int kn_ref_elemwise(kn_ref_call *c) {
  switch (c->node->op) {
  case KN_OP_RELU:
  case KN_OP_SIGMOID:
  case KN_OP_TANH:
  case KN_OP_ERF:
  case KN_OP_EXP:
  case KN_OP_LOG:
  case KN_OP_SQRT:
  case KN_OP_RECIPROCAL:
  case KN_OP_NEG:
  case KN_OP_ABS:
  case KN_OP_FLOOR:
  case KN_OP_CEIL:
  case KN_OP_SIN:
  case KN_OP_COS:
  case KN_OP_NOT:
  case KN_OP_LEAKY_RELU:
  case KN_OP_ELU:
  case KN_OP_HARD_SIGMOID:
  case KN_OP_HARD_SWISH:
  case KN_OP_SOFTPLUS:
  case KN_OP_GELU:
  case KN_OP_SELU:
  case KN_OP_CELU:
  case KN_OP_THRESHOLDED_RELU:
  case KN_OP_SHRINK:
  case KN_OP_SOFTSIGN:
  case KN_OP_MISH:
  case KN_OP_SWISH:
  case KN_OP_ROUND:
  case KN_OP_SIGN:
  case KN_OP_IS_NAN:
  case KN_OP_IS_INF:
  case KN_OP_TAN:
  case KN_OP_ASIN:
  case KN_OP_ACOS:
  case KN_OP_ATAN:
  case KN_OP_SINH:
  case KN_OP_COSH:
  case KN_OP_ASINH:
  case KN_OP_ACOSH:
  case KN_OP_ATANH: return unary(c);
  case KN_OP_CLIP: return clip(c);
  case KN_OP_CAST:
  case KN_OP_CAST_LIKE: return cast(c);
  case KN_OP_MOD: return mod(c);
  case KN_OP_IDENTITY:
  case KN_OP_DROPOUT: return copy(c);
  case KN_OP_ADD:
  case KN_OP_SUB:
  case KN_OP_MUL:
  case KN_OP_DIV:
  case KN_OP_POW:
  case KN_OP_MAX:
  case KN_OP_MIN:
  case KN_OP_EQUAL:
  case KN_OP_LESS:
  case KN_OP_GREATER:
  case KN_OP_AND:
  case KN_OP_OR:
  case KN_OP_PRELU:
  case KN_OP_GREATER_OR_EQUAL:
  case KN_OP_LESS_OR_EQUAL:
  case KN_OP_XOR:
  case KN_OP_SUM:
  case KN_OP_MEAN: return binary(c);
  case KN_OP_WHERE: return where(c);
  default: return kn_ref_error(c, "not an elementwise op");
  }
}
