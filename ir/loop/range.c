/* range.c — value ranges of integer loop-IR expressions (see range.h).
 *
 * Each side of a range is computed on its own: a known lower bound survives
 * an unknown upper one (MIN(x, 5) is at most 5 whatever x is). A side that
 * would overflow int64 becomes unknown. */
#include "ir/loop/range.h"

/* a + b, or unknown (false) when either is unknown or the sum overflows */
static bool add_side(bool ka, int64_t a, bool kb, int64_t b, int64_t *r) {
  return ka && kb && !__builtin_add_overflow(a, b, r);
}

kn_range kn_range_add(kn_range a, kn_range b) {
  kn_range r = kn_range_unknown();
  r.has_lo = add_side(a.has_lo, a.lo, b.has_lo, b.lo, &r.lo);
  r.has_hi = add_side(a.has_hi, a.hi, b.has_hi, b.hi, &r.hi);
  return r;
}

kn_range kn_range_sub(kn_range a, kn_range b) {
  kn_range r = kn_range_unknown();
  r.has_lo = a.has_lo && b.has_hi && !__builtin_sub_overflow(a.lo, b.hi, &r.lo);
  r.has_hi = a.has_hi && b.has_lo && !__builtin_sub_overflow(a.hi, b.lo, &r.hi);
  return r;
}

/* The products of the corners when all four are known; otherwise, for two
 * non-negative operands, the lower bound alone (0 when even that overflows:
 * the product of non-negatives is non-negative). */
kn_range kn_range_mul(kn_range a, kn_range b) {
  if (kn_range_bounded(a) && kn_range_bounded(b)) {
    int64_t p[4];
    if (!__builtin_mul_overflow(a.lo, b.lo, &p[0]) && !__builtin_mul_overflow(a.lo, b.hi, &p[1]) &&
        !__builtin_mul_overflow(a.hi, b.lo, &p[2]) && !__builtin_mul_overflow(a.hi, b.hi, &p[3])) {
      kn_range r = kn_range_const(p[0]);
      for (int i = 1; i < 4; i++) {
        r.lo = p[i] < r.lo ? p[i] : r.lo;
        r.hi = p[i] > r.hi ? p[i] : r.hi;
      }
      return r;
    }
  }
  kn_range r = kn_range_unknown();
  if (a.has_lo && b.has_lo && a.lo >= 0 && b.lo >= 0) {
    r.has_lo = true;
    if (__builtin_mul_overflow(a.lo, b.lo, &r.lo)) r.lo = 0;
  }
  return r;
}

/* Floor division by c > 0 is monotonic: each known side divides. */
kn_range kn_range_div_const(kn_range a, int64_t c) {
  kn_range r = kn_range_unknown();
  if (c <= 0) return r;
  if (a.has_lo) r.lo = kn_floordiv_i64(a.lo, c), r.has_lo = true;
  if (a.has_hi) r.hi = kn_floordiv_i64(a.hi, c), r.has_hi = true;
  return r;
}

/* x mod c (c > 0) is x itself when x is already in [0, c), else in [0, c). */
kn_range kn_range_mod_const(kn_range a, int64_t c) {
  if (c <= 0) return kn_range_unknown();
  if (kn_range_bounded(a) && a.lo >= 0 && a.hi < c) return a;
  return kn_range_make(0, c - 1);
}

/* MIN's lower bound needs both operands' (either may be the smaller); its
 * upper bound needs one: MIN(a, b) <= b whatever a is. MAX the other way. */
kn_range kn_range_min(kn_range a, kn_range b) {
  kn_range r = kn_range_unknown();
  if (a.has_lo && b.has_lo) r.lo = a.lo < b.lo ? a.lo : b.lo, r.has_lo = true;
  if (a.has_hi || b.has_hi) {
    r.hi = !a.has_hi ? b.hi : !b.has_hi ? a.hi : a.hi < b.hi ? a.hi : b.hi;
    r.has_hi = true;
  }
  return r;
}

kn_range kn_range_max(kn_range a, kn_range b) {
  kn_range r = kn_range_unknown();
  if (a.has_lo || b.has_lo) {
    r.lo = !a.has_lo ? b.lo : !b.has_lo ? a.lo : a.lo > b.lo ? a.lo : b.lo;
    r.has_lo = true;
  }
  if (a.has_hi && b.has_hi) r.hi = a.hi > b.hi ? a.hi : b.hi, r.has_hi = true;
  return r;
}

kn_range kn_range_union(kn_range a, kn_range b) {
  kn_range r = kn_range_unknown();
  if (a.has_lo && b.has_lo) r.lo = a.lo < b.lo ? a.lo : b.lo, r.has_lo = true;
  if (a.has_hi && b.has_hi) r.hi = a.hi > b.hi ? a.hi : b.hi, r.has_hi = true;
  return r;
}

kn_range kn_range_of_dtype(kn_dtype t) {
  switch (t) {
  case KN_DT_BOOL: return kn_range_make(0, 1);
  case KN_DT_U8: return kn_range_make(0, UINT8_MAX);
  case KN_DT_U16: return kn_range_make(0, UINT16_MAX);
  case KN_DT_U32: return kn_range_make(0, UINT32_MAX);
  case KN_DT_I8: return kn_range_make(INT8_MIN, INT8_MAX);
  case KN_DT_I4: return kn_range_make(-8, 7);
  case KN_DT_U4: return kn_range_make(0, 15);
  case KN_DT_I2: return kn_range_make(-2, 1);
  case KN_DT_U2: return kn_range_make(0, 3);
  case KN_DT_I16: return kn_range_make(INT16_MIN, INT16_MAX);
  case KN_DT_I32: return kn_range_make(INT32_MIN, INT32_MAX);
  default: return kn_range_unknown();
  }
}

kn_range kn_range_loop_var(kn_range min, kn_range extent) {
  kn_range r = min;
  r.has_hi = min.has_hi && extent.has_hi && extent.hi > INT64_MIN &&
             !__builtin_add_overflow(min.hi, extent.hi - 1, &r.hi);
  return r;
}

/* The values a register of integer type t holds (sub-byte integers compute
 * in 8-bit registers): an operation whose exact range leaves it wraps, so
 * its result is anywhere in it. Unknown for 64-bit and non-integer types,
 * whose arithmetic the ranges take as exact. */
static kn_range register_range(kn_dtype t) {
  if (!kn_dtype_is_int(t)) return kn_range_unknown();
  if (kn_dtype_is_subbyte_int(t)) return kn_range_of_dtype(kn_dtype_is_signed(t) ? KN_DT_I8 : KN_DT_U8);
  return kn_range_of_dtype(t);
}

static bool inside(kn_range r, kn_range outer) {
  return r.has_lo && r.has_hi && r.lo >= outer.lo && r.hi <= outer.hi;
}

/* An integer constant, looking through a broadcast. */
static bool const_int(const kn_expr *e, int64_t *v) {
  if (e->kind == KN_E_BROADCAST) e = e->u.un.a;
  if (e->kind != KN_E_INT) return false;
  *v = e->u.ival;
  return true;
}

static kn_range sub_range(const kn_range_env *env, const kn_expr *e) {
  return env->sub ? env->sub(env->ctx, e) : kn_range_of(env, e);
}

/* A widening integer cast keeps the value; a narrowing one, a sub-byte
 * target or a change of signedness at one width does not. */
static kn_range cast_range(const kn_range_env *env, const kn_expr *e) {
  const kn_expr *a = e->u.un.a;
  if (!(kn_dtype_is_int(a->dtype) || a->dtype == KN_DT_BOOL) || !kn_dtype_is_int(e->dtype)) return kn_range_unknown();
  if (kn_dtype_size(e->dtype) < kn_dtype_size(a->dtype)) return kn_range_unknown(); /* truncation */
  if (kn_dtype_is_subbyte_int(e->dtype)) return kn_range_unknown();                  /* wraps to 2 / 4 bits */
  if (kn_dtype_is_signed(a->dtype) != kn_dtype_is_signed(e->dtype) &&
      kn_dtype_size(e->dtype) == kn_dtype_size(a->dtype))
    return kn_range_unknown(); /* reinterpretation */
  return sub_range(env, a);
}

/* e's range from its operands' ranges, taking the operation as exact. */
static kn_range exact_range(const kn_range_env *env, const kn_expr *e) {
  int64_t c;
  switch (e->kind) {
  case KN_E_INT: return kn_range_const(e->u.ival);
  case KN_E_VAR: return env->var ? env->var(env->ctx, e->u.var) : kn_range_unknown();
  case KN_E_ADD: return kn_range_add(sub_range(env, e->u.bin.a), sub_range(env, e->u.bin.b));
  case KN_E_SUB: return kn_range_sub(sub_range(env, e->u.bin.a), sub_range(env, e->u.bin.b));
  case KN_E_MUL: return kn_range_mul(sub_range(env, e->u.bin.a), sub_range(env, e->u.bin.b));
  case KN_E_DIV:
    if (!const_int(e->u.bin.b, &c) || c <= 0) return kn_range_unknown();
    return kn_range_div_const(sub_range(env, e->u.bin.a), c);
  case KN_E_MOD:
    if (!const_int(e->u.bin.b, &c) || c <= 0) return kn_range_unknown();
    return kn_range_mod_const(sub_range(env, e->u.bin.a), c);
  case KN_E_MIN: return kn_range_min(sub_range(env, e->u.bin.a), sub_range(env, e->u.bin.b));
  case KN_E_MAX: return kn_range_max(sub_range(env, e->u.bin.a), sub_range(env, e->u.bin.b));
  case KN_E_SELECT: return kn_range_union(sub_range(env, e->u.sel.t), sub_range(env, e->u.sel.f));
  case KN_E_RAMP: {
    int64_t span;
    if (!const_int(e->u.ramp.stride, &c) || __builtin_mul_overflow(c, (int64_t)e->lanes - 1, &span))
      return kn_range_unknown();
    kn_range base = sub_range(env, e->u.ramp.base);
    return kn_range_add(base, kn_range_make(span < 0 ? span : 0, span > 0 ? span : 0));
  }
  case KN_E_BROADCAST: return sub_range(env, e->u.un.a);
  case KN_E_CAST: return cast_range(env, e);
  case KN_E_LOAD: return kn_range_of_dtype(e->dtype);
  default: return kn_range_unknown();
  }
}

/* A value of a narrower integer type is in its register's range whatever
 * the operation: the exact range when that fits, else all of the register
 * (the operation may have wrapped). */
kn_range kn_range_of(const kn_range_env *env, const kn_expr *e) {
  kn_range r = exact_range(env, e), reg = register_range(e->dtype);
  return kn_range_bounded(reg) && !inside(r, reg) ? reg : r;
}
