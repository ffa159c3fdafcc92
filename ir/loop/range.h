/* range.h — value ranges of integer loop-IR expressions: the one analysis
 * the simplifier (ir/loop/simplify.c) and the LLVM codegen
 * (codegen/llvm_expr.c) both use.
 *
 * A kn_range is an interval of int64 values whose sides are each either a
 * real bound or not known (has_lo / has_hi false): "unknown" is a flag, never
 * a number, so a bound of 2^41 or INT64_MAX is as good a bound as 3. Every
 * rule is conservative: each value the expression can take lies inside the
 * range; a side whose bound would overflow int64 is left unknown.
 *
 * Integer values are those of the loop IR (ir/loop/expr.h): int64 index
 * arithmetic never wraps (an overflow leaves the range unknown, never a
 * wrong one); an integer narrower than 64 bits wraps to its width, so an
 * operation on it whose exact range leaves the type's range gives the
 * type's range; uint64 values are read as their int64 bits. */
#ifndef KN_RANGE_H
#define KN_RANGE_H

#include "ir/loop/expr.h"

typedef struct kn_range {
  int64_t lo, hi;      /* meaningful only where has_lo / has_hi */
  bool has_lo, has_hi; /* false: that side is not bounded */
} kn_range;

/* Nothing known. */
static inline kn_range kn_range_unknown(void) { return (kn_range){0, 0, false, false}; }
/* [lo, hi], both sides known. */
static inline kn_range kn_range_make(int64_t lo, int64_t hi) { return (kn_range){lo, hi, true, true}; }
static inline kn_range kn_range_const(int64_t v) { return kn_range_make(v, v); }
/* Both sides known. */
static inline bool kn_range_bounded(kn_range r) { return r.has_lo && r.has_hi; }
/* Exactly one value, stored in *v. */
static inline bool kn_range_is_const(kn_range r, int64_t *v) {
  if (!kn_range_bounded(r) || r.lo != r.hi) return false;
  *v = r.lo;
  return true;
}

/* The rules, one per operation (a, b: the operands' ranges). */
kn_range kn_range_add(kn_range a, kn_range b);
kn_range kn_range_sub(kn_range a, kn_range b);
kn_range kn_range_mul(kn_range a, kn_range b);
/* Floor division / modulo by the constant c; unknown unless c > 0. */
kn_range kn_range_div_const(kn_range a, int64_t c);
kn_range kn_range_mod_const(kn_range a, int64_t c);
kn_range kn_range_min(kn_range a, kn_range b);
kn_range kn_range_max(kn_range a, kn_range b);
/* Either of a and b (a SELECT's two arms). */
kn_range kn_range_union(kn_range a, kn_range b);
/* The values of integer dtype t as int64 (bool: 0 and 1); unknown for
 * int64, uint64 and non-integer types. */
kn_range kn_range_of_dtype(kn_dtype t);
/* A loop variable running from min over extent values:
 * [min.lo, min.hi + extent.hi - 1]. */
kn_range kn_range_loop_var(kn_range min, kn_range extent);

/* Where kn_range_of finds what its rules do not derive. */
typedef struct kn_range_env {
  /* the range of a variable (NULL: every variable is unknown) */
  kn_range (*var)(void *ctx, const kn_var *v);
  /* the range of an operand (NULL: kn_range_of itself); a caller that
   * memoises ranges of shared subexpressions passes its lookup here */
  kn_range (*sub)(void *ctx, const kn_expr *e);
  void *ctx;
} kn_range_env;

/* Conservative range of integer expression e, scalar or vector (over all
 * lanes): constants, variables (env->var), + - * of any operands, floor DIV
 * / MOD by a positive constant, MIN, MAX, SELECT, RAMP with a constant
 * stride, BROADCAST, widening integer CAST, and LOAD (its dtype's range).
 * A value of an integer type narrower than 64 bits is also within its
 * register's range, whatever computed it. Anything else (floats, calls,
 * comparisons, int64 data) is unknown. */
kn_range kn_range_of(const kn_range_env *env, const kn_expr *e);

#endif
