/* te_ops_elemwise.c — compute definitions of the ELEMWISE ops of ops.def.
 *
 * Every op here is one compute over the node's output shape:
 *   out[i...] = f(in0[bcast(i)], in1[bcast(i)], ...)
 * with numpy broadcasting (inputs align to the right, constant size-1 dims
 * read index 0). BatchNormalization is the exception: its per-channel inputs
 * are indexed by output axis 1. No reductions: the lowering inlines all of
 * these into their consumers.
 *
 * Math follows ONNX: integer Div truncates toward zero (built from the floor
 * DIV/MOD of expr.h plus a fix-up), float->int Cast truncates (C), Cast to
 * bool is x != 0. Unsupported dtype/attribute combinations give a
 * diagnostic and NULL. */
#include <math.h>
#include <string.h>

#include "ir/te/te_ops.h"

/* Everything a definition needs about the node being built. */
typedef struct ew {
  kn_te_ctx *c;
  const kn_node *n;
  kn_diag *d;
  kn_expr *idx[KN_TE_MAX_RANK]; /* output index */
  int rank;
  kn_te_tensor **in;
} ew;

static kn_expr *num(ew *e, kn_dtype t, double v) { return kn_te_num(e->c, t, v); }

/* Input i loaded at the output index, or NULL (with a diagnostic) when it is
 * missing or cannot broadcast. */
static kn_expr *arg(ew *e, int i) {
  if (i >= e->n->n_in || !e->in[i]) {
    kn_te_unsupported(e->d, e->n, "missing input %d", i);
    return NULL;
  }
  if (e->in[i]->rank > e->rank) {
    kn_te_unsupported(e->d, e->n, "input %d of higher rank than the output", i);
    return NULL;
  }
  return kn_te_bcast_at(e->c, e->in[i], e->idx, e->rank);
}

static bool need_float(ew *e, const kn_expr *x) {
  if (kn_dtype_is_float(x->dtype)) return true;
  kn_te_unsupported(e->d, e->n, "dtype %s", kn_dtype_name(x->dtype));
  return false;
}

static bool same_dtype(ew *e, const kn_expr *a, const kn_expr *b) {
  if (a->dtype == b->dtype) return true;
  kn_te_unsupported(e->d, e->n, "mixed input dtypes %s and %s", kn_dtype_name(a->dtype),
                    kn_dtype_name(b->dtype));
  return false;
}

static kn_expr *bin(ew *e, kn_expr_kind k, kn_expr *a, kn_expr *b) {
  return kn_e_bin(e->c->ec, k, a, b);
}
static kn_expr *call1(ew *e, kn_fn fn, kn_expr *a) { return kn_e_call1(e->c->ec, fn, a); }

/* max(lo, min(hi, x)) */
static kn_expr *clamp01(ew *e, kn_expr *x) {
  return kn_e_max(e->c->ec, num(e, x->dtype, 0), kn_e_min(e->c->ec, num(e, x->dtype, 1), x));
}

/* ONNX integer division: truncation toward zero. With floor q and r:
 * trunc = q + 1 when r != 0 and the operands' signs differ. */
static kn_expr *int_div_trunc(ew *e, kn_expr *a, kn_expr *b) {
  kn_expr *q = kn_e_div(e->c->ec, a, b);
  if (!kn_dtype_is_signed(a->dtype)) return q;
  kn_expr *zero = num(e, a->dtype, 0);
  kn_expr *r = kn_e_mod(e->c->ec, a, b);
  kn_expr *signs_differ = bin(e, KN_E_NE, bin(e, KN_E_LT, a, zero), bin(e, KN_E_LT, b, zero));
  kn_expr *fix = bin(e, KN_E_AND, bin(e, KN_E_NE, r, zero), signs_differ);
  return kn_e_select(e->c->ec, fix, kn_e_add(e->c->ec, q, num(e, a->dtype, 1)), q);
}

/* Mod: fmod=1 keeps the dividend's sign (C fmod / %), fmod=0 the divisor's
 * (numpy). Expression MOD is C fmod on floats and floor modulo on integers;
 * each is corrected by one divisor when the remainder's sign is wrong. */
static kn_expr *mod_def(ew *e, kn_expr *a, kn_expr *b) {
  kn_expr_ctx *ec = e->c->ec;
  kn_dtype t = a->dtype;
  bool c_mod = kn_node_attr_int(e->n, "fmod", 0) != 0;
  kn_expr *r = kn_e_mod(ec, a, b);
  if (!kn_dtype_is_signed(t) && !kn_dtype_is_float(t)) return r;
  if (kn_dtype_is_float(t) == c_mod) return r;
  kn_expr *zero = num(e, t, 0);
  kn_expr *wrong = bin(e, KN_E_AND, bin(e, KN_E_NE, r, zero),
                       bin(e, KN_E_NE, bin(e, KN_E_LT, r, zero),
                           bin(e, KN_E_LT, c_mod ? a : b, zero)));
  return kn_e_select(ec, wrong, c_mod ? kn_e_sub(ec, r, b) : kn_e_add(ec, r, b), r);
}

/* Pow with float math; constant exponents 1, 2, 3, 0.5 become products or
 * sqrt. Integer bases compute in float64 and convert back. */
static kn_expr *pow_def(ew *e, kn_expr *x, kn_expr *y) {
  kn_expr_ctx *ec = e->c->ec;
  double p;
  int ev = kn_te_in_value(e->n, 1);
  if (kn_dtype_is_float(x->dtype) && kn_te_const_scalar(e->c, ev, &p)) {
    if (p == 1) return x;
    if (p == 2) return kn_e_mul(ec, x, x);
    if (p == 3) return kn_e_mul(ec, kn_e_mul(ec, x, x), x);
    if (p == 0.5) return call1(e, KN_FN_SQRT, x);
  }
  if (y->dtype == KN_DT_BOOL || x->dtype == KN_DT_BOOL) {
    kn_te_unsupported(e->d, e->n, "bool operands");
    return NULL;
  }
  if (kn_dtype_is_float(x->dtype)) {
    kn_expr *args[2] = {x, kn_e_cast(ec, x->dtype, y)};
    return kn_e_call(ec, KN_FN_POW, args, 2);
  }
  kn_expr *args[2] = {kn_e_cast(ec, KN_DT_F64, x), kn_e_cast(ec, KN_DT_F64, y)};
  return kn_e_cast(ec, x->dtype, kn_e_call(ec, KN_FN_POW, args, 2));
}

/* Clip: bounds from inputs 1 and 2 (opset >= 11) or the min/max attributes. */
static kn_expr *clip_def(ew *e, kn_expr *x) {
  kn_expr_ctx *ec = e->c->ec;
  const kn_node *n = e->n;
  bool from_inputs = e->c->g->opset >= 11 || n->n_in > 1;
  if (!from_inputs) {
    if (!need_float(e, x)) return NULL;
    if (kn_node_attr(n, "min"))
      x = kn_e_max(ec, x, num(e, x->dtype, kn_node_attr_float(n, "min", 0)));
    if (kn_node_attr(n, "max"))
      x = kn_e_min(ec, x, num(e, x->dtype, kn_node_attr_float(n, "max", 0)));
    return x;
  }
  for (int i = 1; i <= 2; i++) {
    if (i >= n->n_in || n->in[i] < 0) continue;
    double bound;
    int64_t ibound;
    kn_expr *b;
    if (kn_dtype_is_int(x->dtype) && kn_te_const_scalar_int(e->c, n->in[i], &ibound)) {
      b = kn_e_const_int(ec, x->dtype, ibound); /* exact: a double drops int64's low bits */
    } else if (kn_te_const_scalar(e->c, n->in[i], &bound)) {
      b = num(e, x->dtype, bound);
    } else {
      b = arg(e, i);
      if (!b || !same_dtype(e, x, b)) return NULL;
    }
    x = i == 1 ? kn_e_max(ec, x, b) : kn_e_min(ec, x, b);
  }
  return x;
}

static kn_expr *batch_norm_def(ew *e) {
  kn_expr_ctx *ec = e->c->ec;
  const kn_node *n = e->n;
  if (e->rank < 2) {
    kn_te_unsupported(e->d, n, "input of rank < 2");
    return NULL;
  }
  if (kn_node_attr_int(n, "training_mode", 0) != 0 || kn_node_attr_int(n, "spatial", 1) == 0) {
    kn_te_unsupported(e->d, n, "training mode / non-spatial");
    return NULL;
  }
  if (n->n_in < 5) {
    kn_te_unsupported(e->d, n, "fewer than 5 inputs");
    return NULL;
  }
  kn_expr *x = arg(e, 0);
  if (!x || !need_float(e, x)) return NULL;
  kn_expr *p[4]; /* scale, B, mean, var at channel idx[1] */
  for (int i = 0; i < 4; i++) {
    kn_te_tensor *t = e->in[i + 1];
    if (!t || t->rank != 1 || t->dtype != x->dtype) {
      kn_te_unsupported(e->d, n, "per-channel input %d of this shape/dtype", i + 1);
      return NULL;
    }
    p[i] = kn_te_at(e->c, t, &e->idx[1]);
  }
  float eps = kn_node_attr_float(n, "epsilon", 1e-5f);
  kn_expr *den = call1(e, KN_FN_SQRT, kn_e_add(ec, p[3], num(e, x->dtype, eps)));
  kn_expr *norm = kn_e_div(ec, kn_e_sub(ec, x, p[2]), den);
  return kn_e_add(ec, kn_e_mul(ec, norm, p[0]), p[1]);
}

/* atan(x) from the intrinsics: an odd minimax polynomial on [-1, 1]
 * (Abramowitz & Stegun 4.4.49, |error| <= 2e-8) and
 * atan(x) = sign(x) * pi/2 - atan(1/x) outside. */
static kn_expr *atan_def(ew *e, kn_expr *x) {
  kn_expr_ctx *ec = e->c->ec;
  kn_dtype t = x->dtype;
  static const double coef[] = {0.0028662257, -0.0161657367, 0.0429096138, -0.0752896400,
                                0.1065626393, -0.1420889944, 0.1999355085, -0.3333314528, 1.0};
  kn_expr *big = bin(e, KN_E_GT, call1(e, KN_FN_ABS, x), num(e, t, 1));
  kn_expr *u = kn_e_select(ec, big, kn_e_div(ec, num(e, t, 1), x), x);
  kn_expr *u2 = kn_e_mul(ec, u, u), *p = num(e, t, coef[0]);
  for (size_t i = 1; i < sizeof coef / sizeof coef[0]; i++)
    p = kn_e_add(ec, kn_e_mul(ec, p, u2), num(e, t, coef[i]));
  p = kn_e_mul(ec, p, u);
  kn_expr *half_pi = kn_e_select(ec, bin(e, KN_E_LT, x, num(e, t, 0)), num(e, t, -1.57079632679489661923),
                                 num(e, t, 1.57079632679489661923));
  return kn_e_select(ec, big, kn_e_sub(ec, half_pi, p), p);
}

/* The inverse and hyperbolic trigonometric ops from exp, log, sqrt and atan. */
static kn_expr *trig_def(ew *e, kn_expr *x) {
  kn_expr_ctx *ec = e->c->ec;
  kn_dtype t = x->dtype;
  kn_expr *one = num(e, t, 1), *half = num(e, t, 0.5);
  switch (e->n->op) {
  case KN_OP_TAN: return kn_e_div(ec, call1(e, KN_FN_SIN, x), call1(e, KN_FN_COS, x));
  case KN_OP_ATAN: return atan_def(e, x);
  case KN_OP_ASIN: /* atan(x / sqrt(1 - x^2)); x = +-1 gives +-inf -> +-pi/2 */
    return atan_def(e, kn_e_div(ec, x, call1(e, KN_FN_SQRT, kn_e_sub(ec, one, kn_e_mul(ec, x, x)))));
  case KN_OP_ACOS:
    return kn_e_sub(ec, num(e, t, 1.57079632679489661923),
                    atan_def(e, kn_e_div(ec, x, call1(e, KN_FN_SQRT,
                                                      kn_e_sub(ec, one, kn_e_mul(ec, x, x))))));
  case KN_OP_SINH:
  case KN_OP_COSH: {
    kn_expr *ep = call1(e, KN_FN_EXP, x), *en = call1(e, KN_FN_EXP, kn_e_sub(ec, num(e, t, 0), x));
    return kn_e_mul(ec, half, e->n->op == KN_OP_SINH ? kn_e_sub(ec, ep, en) : kn_e_add(ec, ep, en));
  }
  case KN_OP_ASINH: { /* sign(x) * log(|x| + sqrt(x^2 + 1)), no cancellation for x < 0 */
    kn_expr *ax = call1(e, KN_FN_ABS, x);
    kn_expr *r = call1(e, KN_FN_LOG, kn_e_add(ec, ax, call1(e, KN_FN_SQRT, kn_e_add(ec, kn_e_mul(ec, x, x), one))));
    return kn_e_select(ec, bin(e, KN_E_LT, x, num(e, t, 0)), kn_e_sub(ec, num(e, t, 0), r), r);
  }
  case KN_OP_ACOSH:
    return call1(e, KN_FN_LOG, kn_e_add(ec, x, call1(e, KN_FN_SQRT, kn_e_sub(ec, kn_e_mul(ec, x, x), one))));
  case KN_OP_ATANH:
    return kn_e_mul(ec, half, call1(e, KN_FN_LOG, kn_e_div(ec, kn_e_add(ec, one, x), kn_e_sub(ec, one, x))));
  default: return NULL;
  }
}

/* Float unary math that maps to one intrinsic. */
static bool unary_fn(kn_op op, kn_fn *fn) {
  switch (op) {
  case KN_OP_SIGMOID: *fn = KN_FN_SIGMOID; return true;
  case KN_OP_TANH: *fn = KN_FN_TANH; return true;
  case KN_OP_ERF: *fn = KN_FN_ERF; return true;
  case KN_OP_EXP: *fn = KN_FN_EXP; return true;
  case KN_OP_LOG: *fn = KN_FN_LOG; return true;
  case KN_OP_SQRT: *fn = KN_FN_SQRT; return true;
  case KN_OP_FLOOR: *fn = KN_FN_FLOOR; return true;
  case KN_OP_CEIL: *fn = KN_FN_CEIL; return true;
  case KN_OP_SIN: *fn = KN_FN_SIN; return true;
  case KN_OP_COS: *fn = KN_FN_COS; return true;
  case KN_OP_ROUND: *fn = KN_FN_ROUND; return true;
  default: return false;
  }
}

static kn_expr *unary_def(ew *e, kn_expr *x) {
  kn_expr_ctx *ec = e->c->ec;
  const kn_node *n = e->n;
  kn_dtype t = x->dtype;
  kn_fn fn;
  if (unary_fn(n->op, &fn)) {
    if ((n->op == KN_OP_FLOOR || n->op == KN_OP_CEIL) && kn_dtype_is_int(t)) return x;
    return need_float(e, x) ? call1(e, fn, x) : NULL;
  }
  switch (n->op) {
  case KN_OP_RELU:
    if (t == KN_DT_BOOL) break;
    return kn_e_max(ec, x, num(e, t, 0));
  case KN_OP_NEG:
    if (t == KN_DT_BOOL) break;
    return kn_e_sub(ec, num(e, t, 0), x);
  case KN_OP_ABS:
    if (kn_dtype_is_float(t)) return call1(e, KN_FN_ABS, x);
    if (!kn_dtype_is_int(t)) break;
    if (!kn_dtype_is_signed(t)) return x;
    return kn_e_select(ec, bin(e, KN_E_LT, x, num(e, t, 0)), kn_e_sub(ec, num(e, t, 0), x), x);
  case KN_OP_RECIPROCAL: return need_float(e, x) ? kn_e_div(ec, num(e, t, 1), x) : NULL;
  case KN_OP_SIGN:
    if (t == KN_DT_BOOL) break;
    return kn_e_select(ec, bin(e, KN_E_GT, x, num(e, t, 0)), num(e, t, 1),
                       kn_e_select(ec, bin(e, KN_E_LT, x, num(e, t, 0)), num(e, t, -1), x));
  case KN_OP_NOT:
    if (t != KN_DT_BOOL) break;
    return kn_e_not(ec, x);
  case KN_OP_IDENTITY:
  case KN_OP_DROPOUT: return x;
  default: break;
  }
  if (!need_float(e, x)) return NULL;
  kn_expr *zero = num(e, t, 0), *one = num(e, t, 1);
  kn_expr *neg = bin(e, KN_E_LT, x, zero);
  kn_expr *trig = trig_def(e, x);
  if (trig) return trig;
  switch (n->op) {
  case KN_OP_SELU: {
    kn_expr *alpha = num(e, t, kn_node_attr_float(n, "alpha", 1.67326319217681884765625f));
    kn_expr *gamma = num(e, t, kn_node_attr_float(n, "gamma", 1.05070102214813232421875f));
    kn_expr *em1 = kn_e_sub(ec, call1(e, KN_FN_EXP, x), one);
    return kn_e_mul(ec, gamma, kn_e_select(ec, bin(e, KN_E_LE, x, zero), kn_e_mul(ec, alpha, em1), x));
  }
  case KN_OP_CELU: {
    kn_expr *alpha = num(e, t, kn_node_attr_float(n, "alpha", 1.0f));
    kn_expr *em1 = kn_e_sub(ec, call1(e, KN_FN_EXP, kn_e_div(ec, x, alpha)), one);
    return kn_e_add(ec, kn_e_max(ec, x, zero), kn_e_min(ec, zero, kn_e_mul(ec, alpha, em1)));
  }
  case KN_OP_THRESHOLDED_RELU: {
    kn_expr *alpha = num(e, t, kn_node_attr_float(n, "alpha", 1.0f));
    return kn_e_select(ec, bin(e, KN_E_GT, x, alpha), x, zero);
  }
  case KN_OP_SHRINK: {
    double lambd = kn_node_attr_float(n, "lambd", 0.5f);
    kn_expr *bias = num(e, t, kn_node_attr_float(n, "bias", 0));
    return kn_e_select(ec, bin(e, KN_E_LT, x, num(e, t, -lambd)), kn_e_add(ec, x, bias),
                       kn_e_select(ec, bin(e, KN_E_GT, x, num(e, t, lambd)), kn_e_sub(ec, x, bias), zero));
  }
  case KN_OP_SOFTSIGN: return kn_e_div(ec, x, kn_e_add(ec, one, call1(e, KN_FN_ABS, x)));
  case KN_OP_MISH: {
    kn_expr *tail = call1(e, KN_FN_EXP, kn_e_sub(ec, zero, call1(e, KN_FN_ABS, x)));
    kn_expr *sp = kn_e_add(ec, kn_e_max(ec, x, zero), call1(e, KN_FN_LOG, kn_e_add(ec, one, tail)));
    return kn_e_mul(ec, x, call1(e, KN_FN_TANH, sp));
  }
  case KN_OP_SWISH: {
    kn_expr *alpha = num(e, t, kn_node_attr_float(n, "alpha", 1.0f));
    return kn_e_mul(ec, x, call1(e, KN_FN_SIGMOID, kn_e_mul(ec, alpha, x)));
  }
  case KN_OP_IS_NAN: return bin(e, KN_E_NE, x, x);
  case KN_OP_IS_INF: {
    kn_expr *r = kn_e_const_int(ec, KN_DT_BOOL, 0);
    if (kn_node_attr_int(n, "detect_positive", 1)) r = bin(e, KN_E_OR, r, bin(e, KN_E_EQ, x, num(e, t, INFINITY)));
    if (kn_node_attr_int(n, "detect_negative", 1)) r = bin(e, KN_E_OR, r, bin(e, KN_E_EQ, x, num(e, t, -INFINITY)));
    return r;
  }
  case KN_OP_LEAKY_RELU: {
    kn_expr *alpha = num(e, t, kn_node_attr_float(n, "alpha", 0.01f));
    return kn_e_select(ec, neg, kn_e_mul(ec, x, alpha), x);
  }
  case KN_OP_ELU: {
    kn_expr *alpha = num(e, t, kn_node_attr_float(n, "alpha", 1.0f));
    kn_expr *em1 = kn_e_sub(ec, call1(e, KN_FN_EXP, x), one);
    return kn_e_select(ec, neg, kn_e_mul(ec, alpha, em1), x);
  }
  case KN_OP_HARD_SIGMOID: {
    kn_expr *alpha = num(e, t, kn_node_attr_float(n, "alpha", 0.2f));
    kn_expr *beta = num(e, t, kn_node_attr_float(n, "beta", 0.5f));
    return clamp01(e, kn_e_add(ec, kn_e_mul(ec, x, alpha), beta));
  }
  case KN_OP_HARD_SWISH: {
    kn_expr *lin = kn_e_add(ec, kn_e_mul(ec, x, num(e, t, 1.0 / 6.0)), num(e, t, 0.5));
    return kn_e_mul(ec, x, clamp01(e, lin));
  }
  case KN_OP_SOFTPLUS: {
    /* log(1 + exp(x)) written so that exp never overflows */
    kn_expr *tail = call1(e, KN_FN_EXP, kn_e_sub(ec, zero, call1(e, KN_FN_ABS, x)));
    return kn_e_add(ec, kn_e_max(ec, x, zero), call1(e, KN_FN_LOG, kn_e_add(ec, one, tail)));
  }
  case KN_OP_GELU: {
    const char *approx = kn_node_attr_string(n, "approximate", "none");
    kn_expr *half_x = kn_e_mul(ec, num(e, t, 0.5), x);
    kn_expr *inner;
    if (strcmp(approx, "none") == 0) {
      inner = call1(e, KN_FN_ERF, kn_e_mul(ec, x, num(e, t, 0.70710678118654752440)));
    } else if (strcmp(approx, "tanh") == 0) {
      kn_expr *x3 = kn_e_mul(ec, kn_e_mul(ec, x, x), x);
      kn_expr *poly = kn_e_add(ec, x, kn_e_mul(ec, num(e, t, 0.044715), x3));
      inner = call1(e, KN_FN_TANH,
                    kn_e_mul(ec, num(e, t, 0.79788456080286535588) /* sqrt(2/pi) */, poly));
    } else {
      kn_te_unsupported(e->d, n, "approximate='%s'", approx);
      return NULL;
    }
    return kn_e_mul(ec, half_x, kn_e_add(ec, one, inner));
  }
  default: break;
  }
  kn_te_unsupported(e->d, n, "dtype %s", kn_dtype_name(t));
  return NULL;
}

static kn_expr *binary_def(ew *e, kn_expr *a, kn_expr *b) {
  kn_expr_ctx *ec = e->c->ec;
  const kn_node *n = e->n;
  if (n->op == KN_OP_POW) return pow_def(e, a, b);
  if (!same_dtype(e, a, b)) return NULL;
  kn_dtype t = a->dtype;
  bool is_bool = t == KN_DT_BOOL;
  switch (n->op) {
  case KN_OP_ADD:
    if (!is_bool) return kn_e_add(ec, a, b);
    break;
  case KN_OP_SUB:
    if (!is_bool) return kn_e_sub(ec, a, b);
    break;
  case KN_OP_MUL:
    if (!is_bool) return kn_e_mul(ec, a, b);
    break;
  case KN_OP_DIV:
    if (kn_dtype_is_float(t)) return kn_e_div(ec, a, b);
    if (kn_dtype_is_int(t)) return int_div_trunc(e, a, b);
    break;
  case KN_OP_EQUAL: return bin(e, KN_E_EQ, a, b);
  case KN_OP_LESS:
    if (!is_bool) return bin(e, KN_E_LT, a, b);
    break;
  case KN_OP_GREATER:
    if (!is_bool) return bin(e, KN_E_GT, a, b);
    break;
  case KN_OP_AND:
  case KN_OP_OR:
    if (is_bool) return bin(e, n->op == KN_OP_AND ? KN_E_AND : KN_E_OR, a, b);
    break;
  case KN_OP_PRELU:
    if (!need_float(e, a)) return NULL;
    return kn_e_select(ec, bin(e, KN_E_LT, a, num(e, t, 0)), kn_e_mul(ec, b, a), a);
  case KN_OP_GREATER_OR_EQUAL:
    if (!is_bool) return bin(e, KN_E_GE, a, b);
    break;
  case KN_OP_LESS_OR_EQUAL:
    if (!is_bool) return bin(e, KN_E_LE, a, b);
    break;
  case KN_OP_XOR:
    if (is_bool) return bin(e, KN_E_NE, a, b);
    break;
  case KN_OP_MOD:
    if (!is_bool) return mod_def(e, a, b);
    break;
  default: break;
  }
  kn_te_unsupported(e->d, n, "dtype %s", kn_dtype_name(t));
  return NULL;
}

/* The body of output 0; NULL after a diagnostic. */
static kn_expr *elemwise_body(ew *e) {
  kn_expr_ctx *ec = e->c->ec;
  const kn_node *n = e->n;
  switch (n->op) {
  case KN_OP_BATCH_NORM: return batch_norm_def(e);
  case KN_OP_WHERE: {
    kn_expr *cond = arg(e, 0), *a = arg(e, 1), *b = arg(e, 2);
    if (!cond || !a || !b || !same_dtype(e, a, b)) return NULL;
    if (cond->dtype != KN_DT_BOOL) {
      kn_te_unsupported(e->d, n, "non-bool condition");
      return NULL;
    }
    return kn_e_select(ec, cond, a, b);
  }
  case KN_OP_MAX:
  case KN_OP_MIN:
  case KN_OP_SUM:
  case KN_OP_MEAN: {
    kn_expr *acc = arg(e, 0);
    if (!acc) return NULL;
    if (acc->dtype == KN_DT_BOOL || (n->op == KN_OP_MEAN && !kn_dtype_is_float(acc->dtype))) {
      kn_te_unsupported(e->d, n, "%s operands", kn_dtype_name(acc->dtype));
      return NULL;
    }
    for (int i = 1; i < n->n_in; i++) {
      kn_expr *x = arg(e, i);
      if (!x || !same_dtype(e, acc, x)) return NULL;
      acc = n->op == KN_OP_MAX   ? kn_e_max(ec, acc, x)
            : n->op == KN_OP_MIN ? kn_e_min(ec, acc, x)
                                 : kn_e_add(ec, acc, x);
    }
    if (n->op == KN_OP_MEAN) acc = kn_e_div(ec, acc, num(e, acc->dtype, n->n_in));
    return acc;
  }
  case KN_OP_CAST_LIKE:
  case KN_OP_CAST: {
    kn_expr *x = arg(e, 0);
    if (!x) return NULL;
    kn_dtype to = e->c->g->values[n->out[0]].dtype;
    if (to == KN_DT_BOOL && x->dtype != KN_DT_BOOL) return bin(e, KN_E_NE, x, num(e, x->dtype, 0));
    if (kn_dtype_is_f8(to) && to != KN_DT_F8E8M0 && kn_node_attr_int(n, "saturate", 1) != 0) {
      /* saturate: clamp to the largest finite float8 (infinities too; NaN stays) */
      if (!kn_dtype_is_float(x->dtype)) x = kn_e_cast(ec, KN_DT_F32, x);
      double limit = kn_f8_format_of(to).max;
      kn_expr *max = num(e, x->dtype, limit), *min = num(e, x->dtype, -limit);
      x = kn_e_select(ec, bin(e, KN_E_GT, x, max), max, kn_e_select(ec, bin(e, KN_E_LT, x, min), min, x));
    }
    return kn_e_cast(ec, to, x);
  }
  case KN_OP_CLIP: {
    kn_expr *x = arg(e, 0);
    return x ? clip_def(e, x) : NULL;
  }
  case KN_OP_DROPOUT: {
    double training = 0;
    int tv = kn_te_in_value(n, 2);
    if (tv >= 0 && (!kn_te_const_scalar(e->c, tv, &training) || training != 0)) {
      kn_te_unsupported(e->d, n, "training mode");
      return NULL;
    }
    return arg(e, 0);
  }
  case KN_OP_ADD:
  case KN_OP_SUB:
  case KN_OP_MUL:
  case KN_OP_DIV:
  case KN_OP_POW:
  case KN_OP_EQUAL:
  case KN_OP_LESS:
  case KN_OP_GREATER:
  case KN_OP_AND:
  case KN_OP_OR:
  case KN_OP_PRELU:
  case KN_OP_MOD:
  case KN_OP_GREATER_OR_EQUAL:
  case KN_OP_LESS_OR_EQUAL:
  case KN_OP_XOR: {
    kn_expr *a = arg(e, 0), *b = a ? arg(e, 1) : NULL;
    return b ? binary_def(e, a, b) : NULL;
  }
  default: {
    kn_expr *x = arg(e, 0);
    return x ? unary_def(e, x) : NULL;
  }
  }
}

kn_te_tensor *kn_te_elemwise(kn_te_ctx *c, const kn_node *n, int out, kn_te_tensor **in,
                             kn_diag *d) {
  if (out != 0) {
    /* Dropout's mask output: all true in inference. */
    if (n->op == KN_OP_DROPOUT && out == 1) {
      kn_te_tensor *mask = kn_te_out_compute(c, n, 1, "mask");
      if (mask->dtype != KN_DT_BOOL) return kn_te_unsupported(d, n, "non-bool mask");
      mask->body = kn_e_const_int(c->ec, KN_DT_BOOL, 1);
      return mask;
    }
    return kn_te_unsupported(d, n, "output %d", out);
  }
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  ew e = {.c = c, .n = n, .d = d, .rank = o->rank, .in = in};
  kn_te_axis_exprs(c, o, e.idx);
  kn_expr *body = elemwise_body(&e);
  if (!body) return NULL;
  if (body->dtype != o->dtype)
    return kn_te_unsupported(d, n, "result dtype %s (inferred %s)", kn_dtype_name(body->dtype),
                             kn_dtype_name(o->dtype));
  o->body = body;
  return o;
}
