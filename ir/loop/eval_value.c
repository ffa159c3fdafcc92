/* eval_value.c — expression evaluation shared by the loop-IR interpreters
 * (see eval_value.h): element reads and writes of every dtype, rounding,
 * intrinsics and operators, over up to KN_EV_MAX_LANES lanes. */
#include "ir/loop/eval_value.h"

#include <math.h>
#include <string.h>

double kn_ev_round(kn_dtype t, double x) {
  if (kn_dtype_is_f8(t)) return kn_f8_to_f32(t, kn_f32_to_f8(t, (float)x));
  return t == KN_DT_F32 ? (double)(float)x : x;
}

double kn_ev_read_f(kn_dtype t, const void *p, int64_t i) {
  switch (t) {
  case KN_DT_F32: return ((const float *)p)[i];
  case KN_DT_F64: return ((const double *)p)[i];
  case KN_DT_F16: return kn_f16_to_f32(((const uint16_t *)p)[i]);
  case KN_DT_BF16: return kn_bf16_to_f32(((const uint16_t *)p)[i]);
  default:
    if (kn_dtype_is_f8(t)) return kn_f8_to_f32(t, ((const uint8_t *)p)[i]);
    KN_UNREACHABLE("not a float dtype");
    return 0;
  }
}

int64_t kn_ev_read_i(kn_dtype t, const void *p, int64_t i) {
  switch (t) {
  case KN_DT_I8:
  case KN_DT_I2:
  case KN_DT_I4: return ((const int8_t *)p)[i];
  case KN_DT_U8:
  case KN_DT_U2:
  case KN_DT_U4: return ((const uint8_t *)p)[i];
  case KN_DT_BOOL: return ((const uint8_t *)p)[i] != 0;
  case KN_DT_I16: return ((const int16_t *)p)[i];
  case KN_DT_U16: return ((const uint16_t *)p)[i];
  case KN_DT_I32: return ((const int32_t *)p)[i];
  case KN_DT_U32: return ((const uint32_t *)p)[i];
  case KN_DT_I64: return ((const int64_t *)p)[i];
  case KN_DT_U64: return (int64_t)((const uint64_t *)p)[i];
  default: KN_UNREACHABLE("not an int dtype"); return 0;
  }
}

void kn_ev_write(kn_dtype t, void *p, int64_t i, const kn_ev_val *v, int lane) {
  switch (t) {
  case KN_DT_F32: ((float *)p)[i] = (float)v->f[lane]; return;
  case KN_DT_F64: ((double *)p)[i] = v->f[lane]; return;
  case KN_DT_F16: ((uint16_t *)p)[i] = kn_f32_to_f16((float)v->f[lane]); return;
  case KN_DT_BF16: ((uint16_t *)p)[i] = kn_f32_to_bf16((float)v->f[lane]); return;
  case KN_DT_F8E4M3FN:
  case KN_DT_F8E4M3FNUZ:
  case KN_DT_F8E5M2:
  case KN_DT_F8E8M0:
  case KN_DT_F4E2M1:
  case KN_DT_F8E5M2FNUZ: ((uint8_t *)p)[i] = kn_f32_to_f8(t, (float)v->f[lane]); return;
  case KN_DT_I2:
  case KN_DT_I4:
  case KN_DT_U2:
  case KN_DT_U4: ((int8_t *)p)[i] = (int8_t)kn_subbyte_wrap(t, v->i[lane]); return;
  case KN_DT_I8: ((int8_t *)p)[i] = (int8_t)v->i[lane]; return;
  case KN_DT_U8: ((uint8_t *)p)[i] = (uint8_t)v->i[lane]; return;
  case KN_DT_BOOL: ((uint8_t *)p)[i] = v->i[lane] != 0; return;
  case KN_DT_I16: ((int16_t *)p)[i] = (int16_t)v->i[lane]; return;
  case KN_DT_U16: ((uint16_t *)p)[i] = (uint16_t)v->i[lane]; return;
  case KN_DT_I32: ((int32_t *)p)[i] = (int32_t)v->i[lane]; return;
  case KN_DT_U32: ((uint32_t *)p)[i] = (uint32_t)v->i[lane]; return;
  case KN_DT_I64: ((int64_t *)p)[i] = v->i[lane]; return;
  case KN_DT_U64: ((uint64_t *)p)[i] = (uint64_t)v->i[lane]; return;
  default: KN_UNREACHABLE("bad dtype");
  }
}

static double call_fn(kn_fn fn, double a, double b, double c) {
  switch (fn) {
  case KN_FN_EXP: return exp(a);
  case KN_FN_LOG: return log(a);
  case KN_FN_SQRT: return sqrt(a);
  case KN_FN_ERF: return erf(a);
  case KN_FN_TANH: return tanh(a);
  case KN_FN_SIGMOID: return 1.0 / (1.0 + exp(-a));
  case KN_FN_FLOOR: return floor(a);
  case KN_FN_CEIL: return ceil(a);
  case KN_FN_ROUND: return nearbyint(a);
  case KN_FN_ABS: return fabs(a);
  case KN_FN_SIN: return sin(a);
  case KN_FN_COS: return cos(a);
  case KN_FN_POW: return pow(a, b);
  case KN_FN_FMA: return a * b + c;
  default: KN_UNREACHABLE("vector reduction handled by caller"); return 0;
  }
}

static void eval_cast(const kn_expr *x, const kn_ev_val *a, kn_ev_val *r) {
  for (int l = 0; l < x->lanes; l++) {
    if (r->is_float)
      r->f[l] = kn_ev_round(x->dtype, a->is_float ? a->f[l] : (double)a->i[l]);
    else if (x->dtype == KN_DT_BOOL)
      r->i[l] = a->is_float ? a->f[l] != 0 : a->i[l] != 0;
    else {
      kn_ev_val tmp = {.lanes = 1};
      tmp.i[0] = a->is_float ? kn_f2int_sat(x->dtype, a->f[l]) : a->i[l];
      uint64_t buf = 0; /* wrap to the target width like a C conversion */
      kn_ev_write(x->dtype, &buf, 0, &tmp, 0);
      r->i[l] = kn_ev_read_i(x->dtype, &buf, 0);
    }
  }
}

static int eval_call(const kn_ev_hooks *h, const kn_expr *x, kn_ev_val *r) {
  kn_ev_val a[3];
  KN_ASSERT(x->u.call.n >= 1 && x->u.call.n <= 3, "intrinsics take one to three arguments");
  for (int i = 0; i < x->u.call.n; i++)
    if (kn_ev_expr(h, x->u.call.args[i], &a[i])) return -1;
  kn_fn fn = x->u.call.fn;
  if (fn == KN_FN_VREDUCE_ADD || fn == KN_FN_VREDUCE_MAX || fn == KN_FN_VREDUCE_MIN) {
    double acc = a[0].f[0];
    for (int l = 1; l < a[0].lanes; l++)
      acc = fn == KN_FN_VREDUCE_ADD   ? acc + a[0].f[l]
            : fn == KN_FN_VREDUCE_MAX ? kn_max_nan(acc, a[0].f[l])
                                      : kn_min_nan(acc, a[0].f[l]);
    r->f[0] = kn_ev_round(x->dtype, acc);
    return 0;
  }
  for (int l = 0; l < x->lanes; l++) {
    if (r->is_float) {
      r->f[l] = kn_ev_round(x->dtype,
                            call_fn(fn, a[0].f[l], x->u.call.n > 1 ? a[1].f[l] : 0, x->u.call.n > 2 ? a[2].f[l] : 0));
    } else {
      KN_ASSERT(fn == KN_FN_ABS, "integer intrinsic");
      r->i[l] = a[0].i[l] < 0 ? -a[0].i[l] : a[0].i[l];
    }
  }
  return 0;
}

static void eval_binary(const kn_expr *x, const kn_ev_val *a, const kn_ev_val *b, kn_ev_val *r) {
  bool fl = a->is_float;
  for (int l = 0; l < x->lanes; l++) {
    double p = a->f[l], q = b->f[l];
    int64_t m = a->i[l], n = b->i[l];
    switch (x->kind) {
    case KN_E_ADD: fl ? (r->f[l] = p + q) : (r->i[l] = (int64_t)((uint64_t)m + (uint64_t)n)); break;
    case KN_E_SUB: fl ? (r->f[l] = p - q) : (r->i[l] = (int64_t)((uint64_t)m - (uint64_t)n)); break;
    case KN_E_MUL: fl ? (r->f[l] = p * q) : (r->i[l] = (int64_t)((uint64_t)m * (uint64_t)n)); break;
    case KN_E_DIV: fl ? (r->f[l] = p / q) : (r->i[l] = kn_floordiv_i64(m, n)); break;
    case KN_E_MOD: fl ? (r->f[l] = fmod(p, q)) : (r->i[l] = kn_floormod_i64(m, n)); break;
    case KN_E_MIN: fl ? (r->f[l] = kn_min_nan(p, q)) : (r->i[l] = m < n ? m : n); break;
    case KN_E_MAX: fl ? (r->f[l] = kn_max_nan(p, q)) : (r->i[l] = m > n ? m : n); break;
    case KN_E_EQ: r->i[l] = fl ? p == q : m == n; break;
    case KN_E_NE: r->i[l] = fl ? p != q : m != n; break;
    case KN_E_LT: r->i[l] = fl ? p < q : m < n; break;
    case KN_E_LE: r->i[l] = fl ? p <= q : m <= n; break;
    case KN_E_GT: r->i[l] = fl ? p > q : m > n; break;
    case KN_E_GE: r->i[l] = fl ? p >= q : m >= n; break;
    case KN_E_AND: r->i[l] = m & n; break; /* bool 0/1 or bitwise */
    case KN_E_OR: r->i[l] = m | n; break;
    default: KN_UNREACHABLE("bad binary op");
    }
    if (r->is_float) r->f[l] = kn_ev_round(x->dtype, r->f[l]);
  }
}

static int eval_lanes(const kn_ev_hooks *h, const kn_expr *x, kn_ev_val *r) {
  kn_ev_val a, b;
  if (x->kind == KN_E_BROADCAST) {
    if (kn_ev_expr(h, x->u.un.a, &a)) return -1;
    for (int l = 0; l < x->lanes; l++) {
      r->f[l] = a.f[0];
      r->i[l] = a.i[0];
    }
    return 0;
  }
  if (kn_ev_expr(h, x->u.ramp.base, &a) || kn_ev_expr(h, x->u.ramp.stride, &b)) return -1;
  for (int l = 0; l < x->lanes; l++) r->i[l] = a.i[0] + l * b.i[0];
  return 0;
}

static int eval_select(const kn_ev_hooks *h, const kn_expr *x, kn_ev_val *r) {
  kn_ev_val c, t, f;
  if (kn_ev_expr(h, x->u.sel.cond, &c) || kn_ev_expr(h, x->u.sel.t, &t) || kn_ev_expr(h, x->u.sel.f, &f)) return -1;
  for (int l = 0; l < x->lanes; l++) {
    bool k = c.i[c.lanes == 1 ? 0 : l] != 0;
    r->f[l] = k ? t.f[l] : f.f[l];
    r->i[l] = k ? t.i[l] : f.i[l];
  }
  return 0;
}

int kn_ev_expr(const kn_ev_hooks *h, const kn_expr *x, kn_ev_val *r) {
  KN_ASSERT(x->lanes <= KN_EV_MAX_LANES, "too many lanes for the interpreter");
  kn_ev_val a, b;
  memset(r, 0, sizeof *r);
  r->lanes = x->lanes;
  r->is_float = kn_dtype_is_float(x->dtype);
  switch (x->kind) {
  case KN_E_INT: r->i[0] = x->u.ival; return 0;
  case KN_E_FLOAT: r->f[0] = kn_ev_round(x->dtype, x->u.fval); return 0;
  case KN_E_VAR: return h->var(h->ctx, x->u.var, r);
  case KN_E_BROADCAST:
  case KN_E_RAMP: return eval_lanes(h, x, r);
  case KN_E_LOAD:
    if (kn_ev_expr(h, x->u.load.index, &a)) return -1;
    return h->load(h->ctx, x, &a, r);
  case KN_E_NOT:
    if (kn_ev_expr(h, x->u.un.a, &a)) return -1;
    for (int l = 0; l < x->lanes; l++) r->i[l] = !a.i[l];
    return 0;
  case KN_E_CAST:
    if (kn_ev_expr(h, x->u.un.a, &a)) return -1;
    eval_cast(x, &a, r);
    return 0;
  case KN_E_SELECT: return eval_select(h, x, r);
  case KN_E_CALL: return eval_call(h, x, r);
  case KN_E_REDUCE: KN_UNREACHABLE("reduce in loop IR"); return -1;
  default:
    if (kn_ev_expr(h, x->u.bin.a, &a) || kn_ev_expr(h, x->u.bin.b, &b)) return -1;
    eval_binary(x, &a, &b, r);
    return 0;
  }
}
