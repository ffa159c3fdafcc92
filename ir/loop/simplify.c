/* simplify.c — algebraic simplification of expressions and statements.
 *
 * Guarantees: the result computes the same values as the input (integer
 * arithmetic is exact: int64 with floor DIV/MOD; floats are only folded when
 * both operands are constants and never re-associated). Rewrites that change
 * nothing return the input pointer. Used after lowering so that accumulator
 * indices become constants (codegen then keeps them in registers) and ramps
 * collect their constant offsets. */
#include "ir/loop/simplify.h"

#include <math.h>
#include <stdlib.h>

#include "ir/loop/range.h"

/* Known ranges of loop and let variables (and of the variables an enclosing
 * IF bounds), innermost last. */
typedef struct simp {
  kn_expr_ctx *c;
  kn_var_range *r;
  int n, cap;
} simp;

static bool is_int(const kn_expr *e, int64_t v) {
  int64_t x;
  return kn_e_is_const_int(e, &x) && x == v;
}

static bool cint(const kn_expr *e, int64_t *v) { return e->lanes == 1 && kn_e_is_const_int(e, v); }

static kn_expr *fold_int(kn_expr_ctx *c, kn_expr_kind k, kn_dtype t, int64_t a, int64_t b, bool *ok) {
  *ok = true;
  switch (k) {
  case KN_E_ADD: return kn_e_const_int(c, t, (int64_t)((uint64_t)a + (uint64_t)b));
  case KN_E_SUB: return kn_e_const_int(c, t, (int64_t)((uint64_t)a - (uint64_t)b));
  case KN_E_MUL: return kn_e_const_int(c, t, (int64_t)((uint64_t)a * (uint64_t)b));
  case KN_E_DIV:
    if (b == 0 || (a == INT64_MIN && b == -1)) break;
    return kn_e_const_int(c, t, kn_floordiv_i64(a, b));
  case KN_E_MOD:
    if (b == 0 || (a == INT64_MIN && b == -1)) break;
    return kn_e_const_int(c, t, kn_floormod_i64(a, b));
  case KN_E_MIN: return kn_e_const_int(c, t, a < b ? a : b);
  case KN_E_MAX: return kn_e_const_int(c, t, a > b ? a : b);
  case KN_E_EQ: return kn_e_const_int(c, KN_DT_BOOL, a == b);
  case KN_E_NE: return kn_e_const_int(c, KN_DT_BOOL, a != b);
  case KN_E_LT: return kn_e_const_int(c, KN_DT_BOOL, a < b);
  case KN_E_LE: return kn_e_const_int(c, KN_DT_BOOL, a <= b);
  case KN_E_GT: return kn_e_const_int(c, KN_DT_BOOL, a > b);
  case KN_E_GE: return kn_e_const_int(c, KN_DT_BOOL, a >= b);
  case KN_E_AND: return kn_e_const_int(c, t, a & b); /* bool 0/1 or bitwise */
  case KN_E_OR: return kn_e_const_int(c, t, a | b);
  default: break;
  }
  *ok = false;
  return NULL;
}

/* Ranges of variables: the simplifier's own stack, or a caller's list
 * (kn_expr_range, kn_expr_truth). The innermost entry for a variable wins;
 * a variable not listed is unknown. */
typedef struct var_table {
  const kn_var_range *r;
  int n;
} var_table;

static kn_range table_var(void *ctx, const kn_var *v) {
  const var_table *t = ctx;
  for (int i = t->n - 1; i >= 0; i--)
    if (t->r[i].var == v) return t->r[i].range;
  return kn_range_unknown();
}

/* The range of e when it is an int64 scalar (the only expressions the
 * simplifier bounds; anything else is unknown). */
static kn_range range_in(const var_table *t, const kn_expr *e) {
  if (e->lanes != 1 || e->dtype != KN_DT_I64) return kn_range_unknown();
  kn_range_env env = {.var = table_var, .ctx = (void *)t};
  return kn_range_of(&env, e);
}

static kn_range range_of(const simp *S, const kn_expr *e) {
  var_table t = {.r = S->r, .n = S->n};
  return range_in(&t, e);
}

/* 1 when the comparison a k b of int64 scalars holds for all values in
 * their ranges, 0 when it holds for none, -1 when the ranges do not say.
 * Only ranges known on both sides decide: an unknown side is no bound (a
 * clamp or compare of int64 data against 2^41 stays). */
static int compare_in(const var_table *t, kn_expr_kind k, const kn_expr *a, const kn_expr *b) {
  if (a->dtype != KN_DT_I64 || a->lanes != 1 || b->lanes != 1) return -1;
  kn_range ra = range_in(t, a), rb = range_in(t, b);
  if (!kn_range_bounded(ra) || !kn_range_bounded(rb)) return -1;
  int64_t al = ra.lo, ah = ra.hi, bl = rb.lo, bh = rb.hi;
  switch (k) {
  case KN_E_LT: return ah < bl ? 1 : al >= bh ? 0 : -1;
  case KN_E_LE: return ah <= bl ? 1 : al > bh ? 0 : -1;
  case KN_E_GT: return al > bh ? 1 : ah <= bl ? 0 : -1;
  case KN_E_GE: return al >= bh ? 1 : ah < bl ? 0 : -1;
  case KN_E_EQ: return al == ah && bl == bh && al == bl ? 1 : ah < bl || bh < al ? 0 : -1;
  case KN_E_NE: return al == ah && bl == bh && al == bl ? 0 : ah < bl || bh < al ? 1 : -1;
  default: return -1;
  }
}

static bool is_compare(kn_expr_kind k) { return k >= KN_E_EQ && k <= KN_E_GE; }

static int truth_in(const var_table *t, const kn_expr *e) {
  int64_t x;
  if (e->lanes != 1 || e->dtype != KN_DT_BOOL) return -1;
  if (kn_e_is_const_int(e, &x)) return x != 0;
  if (is_compare(e->kind)) return compare_in(t, e->kind, e->u.bin.a, e->u.bin.b);
  if (e->kind == KN_E_NOT) {
    int v = truth_in(t, e->u.un.a);
    return v < 0 ? -1 : !v;
  }
  if (e->kind == KN_E_AND || e->kind == KN_E_OR) {
    int a = truth_in(t, e->u.bin.a), b = truth_in(t, e->u.bin.b);
    int absorb = e->kind == KN_E_OR; /* true absorbs an OR, false an AND */
    if (a == absorb || b == absorb) return absorb;
    return a == !absorb && b == !absorb ? !absorb : -1;
  }
  return -1;
}

int kn_expr_truth(const kn_expr *e, const kn_var_range *r, int n) {
  var_table t = {.r = r, .n = n};
  return truth_in(&t, e);
}

kn_range kn_expr_range(const kn_expr *e, const kn_var_range *r, int n) {
  var_table t = {.r = r, .n = n};
  return range_in(&t, e);
}

/* Splits e into x*k + y with y's range inside [0, k): then e/k = x and
 * e%k = y. Handles the shapes the lowering produces: (x*k + y), (y + x*k),
 * and x*k alone. */
static bool split_multiple(const simp *S, kn_expr *e, int64_t k, kn_expr **x, kn_expr **y) {
  int64_t m;
  if (e->kind == KN_E_MUL && cint(e->u.bin.b, &m) && m == k) {
    *x = e->u.bin.a;
    *y = NULL;
    return true;
  }
  if (e->kind != KN_E_ADD) return false;
  for (int side = 0; side < 2; side++) {
    kn_expr *mul = side ? e->u.bin.b : e->u.bin.a, *rest = side ? e->u.bin.a : e->u.bin.b;
    if (mul->kind != KN_E_MUL || !cint(mul->u.bin.b, &m) || m != k) continue;
    kn_range r = range_of(S, rest);
    if (r.has_lo && r.has_hi && r.lo >= 0 && r.hi < k) {
      *x = mul->u.bin.a;
      *y = rest;
      return true;
    }
  }
  return false;
}

static kn_expr *simplify_bin(simp *S, kn_expr *e, kn_expr *a, kn_expr *b);

/* (q + x/k)*k + x%k -> q*k + x, and (x/k)*k + x%k -> x (k > 0; exact for
 * floor division): the flat index of a pixel p split as (p / ow, p % ow)
 * (fuse_spatial) becomes p again. NULL when a + b is not of that form. */
static kn_expr *recombine(simp *S, kn_expr *a, kn_expr *b) {
  int64_t k, k2;
  if (b->kind != KN_E_MOD || !cint(b->u.bin.b, &k) || k <= 0 || a->kind != KN_E_MUL ||
      !cint(a->u.bin.b, &k2) || k2 != k)
    return NULL;
  kn_expr *x = b->u.bin.a, *m = a->u.bin.a, *q = NULL, *div = m;
  if (m->kind == KN_E_ADD) {
    q = m->u.bin.a;
    div = m->u.bin.b;
  }
  if (div->kind != KN_E_DIV || !cint(div->u.bin.b, &k2) || k2 != k || !kn_e_equal(div->u.bin.a, x)) return NULL;
  if (!q) return x;
  kn_expr add = {.kind = KN_E_ADD}, mul = {.kind = KN_E_MUL};
  return simplify_bin(S, &add, simplify_bin(S, &mul, q, a->u.bin.b), x);
}

static kn_expr *simplify_bin(simp *S, kn_expr *e, kn_expr *a, kn_expr *b) {
  kn_expr_ctx *c = S->c;
  kn_expr_kind k = e->kind;
  int64_t x, y;
  bool integer = a->dtype == KN_DT_I64;
  if (cint(a, &x) && cint(b, &y) && (kn_dtype_is_int(a->dtype) || a->dtype == KN_DT_BOOL)) {
    bool ok;
    kn_expr *r = fold_int(c, k, a->dtype, x, y, &ok);
    if (ok) return r;
  }
  if (integer && a->lanes == 1 && b->lanes == 1) {
    if (k == KN_E_ADD) {
      if (is_int(a, 0)) return b;
      if (is_int(b, 0)) return a;
      /* (p + c1) + c2 -> p + (c1 + c2);  c + p -> p + c */
      if (cint(a, &x) && !cint(b, NULL)) return simplify_bin(S, e, b, a);
      if (cint(b, &y) && a->kind == KN_E_ADD && cint(a->u.bin.b, &x))
        return kn_e_add(c, a->u.bin.a, kn_e_int(c, (int64_t)((uint64_t)x + (uint64_t)y)));
      if (b->kind == KN_E_ADD && cint(b->u.bin.b, &y))
        return simplify_bin(S, e, simplify_bin(S, e, a, b->u.bin.a), b->u.bin.b);
      kn_expr *whole = recombine(S, a, b);
      if (whole) return whole;
    } else if (k == KN_E_SUB) {
      if (is_int(b, 0)) return a;
      if (cint(b, &y) && y != INT64_MIN) return simplify_bin(S, &(kn_expr){.kind = KN_E_ADD}, a, kn_e_int(c, -y));
      if (kn_e_equal(a, b)) return kn_e_int(c, 0);
    } else if (k == KN_E_MUL) {
      if (is_int(a, 0) || is_int(b, 0)) return kn_e_int(c, 0);
      if (is_int(a, 1)) return b;
      if (is_int(b, 1)) return a;
      if (cint(a, &x) && !cint(b, NULL)) return simplify_bin(S, e, b, a);
      /* (p + c1) * c2 -> p*c2 + c1*c2 ; (p * c1) * c2 -> p * (c1*c2) */
      if (cint(b, &y) && a->kind == KN_E_ADD && cint(a->u.bin.b, &x)) {
        kn_expr *pm = simplify_bin(S, e, a->u.bin.a, b);
        return simplify_bin(S, &(kn_expr){.kind = KN_E_ADD}, pm, kn_e_int(c, (int64_t)((uint64_t)x * (uint64_t)y)));
      }
      if (cint(b, &y) && a->kind == KN_E_MUL && cint(a->u.bin.b, &x))
        return kn_e_mul(c, a->u.bin.a, kn_e_int(c, (int64_t)((uint64_t)x * (uint64_t)y)));
    } else if (k == KN_E_DIV || k == KN_E_MOD) {
      if (is_int(b, 1)) return k == KN_E_DIV ? a : kn_e_int(c, 0);
      kn_expr *q, *r;
      if (cint(b, &y) && y > 0) {
        kn_range ra = range_of(S, a);
        if (ra.has_lo && ra.has_hi && ra.lo >= 0 && ra.hi < y) return k == KN_E_DIV ? kn_e_int(c, 0) : a;
        if (split_multiple(S, a, y, &q, &r))
          return k == KN_E_DIV ? q : r ? r : kn_e_int(c, 0);
      }
    } else if (k == KN_E_MIN || k == KN_E_MAX) {
      if (kn_e_equal(a, b)) return a;
      /* one side bounds the other everywhere: a clamp the ranges prove
       * idle. Both operands' ranges must be known on both sides: a clamp of
       * int64 data (unknown) against any constant stays. */
      kn_range ra = range_of(S, a), rb = range_of(S, b);
      bool known = kn_range_bounded(ra) && kn_range_bounded(rb);
      if (known && (k == KN_E_MIN ? ra.hi <= rb.lo : ra.lo >= rb.hi)) return a;
      if (known && (k == KN_E_MIN ? rb.hi <= ra.lo : rb.lo >= ra.hi)) return b;
    } else if (is_compare(k)) {
      var_table vars = {.r = S->r, .n = S->n};
      int t = compare_in(&vars, k, a, b);
      if (t >= 0) return kn_e_const_int(c, KN_DT_BOOL, t);
    }
  }
  if ((k == KN_E_AND || k == KN_E_OR) && a->dtype == KN_DT_BOOL && a->lanes == 1 && b->lanes == 1) {
    /* true && b -> b, false && b -> false; false || b -> b, true || b -> true */
    bool absorb = k == KN_E_OR;
    if (cint(a, &x)) return (x != 0) == absorb ? a : b;
    if (cint(b, &y)) return (y != 0) == absorb ? b : a;
  }
  /* vector forms */
  if (integer && (k == KN_E_ADD || k == KN_E_SUB)) {
    if (a->kind == KN_E_RAMP && b->lanes == 1 && k == KN_E_ADD)
      return kn_e_ramp(c, simplify_bin(S, e, a->u.ramp.base, b), a->u.ramp.stride, a->lanes);
    if (b->kind == KN_E_RAMP && a->lanes == 1 && k == KN_E_ADD)
      return kn_e_ramp(c, simplify_bin(S, e, a, b->u.ramp.base), b->u.ramp.stride, b->lanes);
    if (a->kind == KN_E_RAMP && b->kind == KN_E_BROADCAST)
      return kn_e_ramp(c, simplify_bin(S, e, a->u.ramp.base, b->u.un.a), a->u.ramp.stride, a->lanes);
    if (b->kind == KN_E_RAMP && a->kind == KN_E_BROADCAST && k == KN_E_ADD)
      return kn_e_ramp(c, simplify_bin(S, e, a->u.un.a, b->u.ramp.base), b->u.ramp.stride, b->lanes);
  }
  if (a->kind == KN_E_BROADCAST && b->kind == KN_E_BROADCAST)
    return kn_e_broadcast(c, simplify_bin(S, e, a->u.un.a, b->u.un.a), a->lanes);
  if (a == e->u.bin.a && b == e->u.bin.b) return e;
  return kn_e_bin(c, k, a, b);
}

static kn_expr *simp_expr(simp *S, kn_expr *e) {
  kn_expr_ctx *c = S->c;
  switch (e->kind) {
  case KN_E_INT:
  case KN_E_FLOAT: return e;
  case KN_E_VAR: {
    /* a variable with one value (a loop of extent 1) is that value */
    int64_t v;
    return kn_range_is_const(range_of(S, e), &v) ? kn_e_int(c, v) : e;
  }
  case KN_E_NOT: {
    kn_expr *a = simp_expr(S, e->u.un.a);
    int64_t x;
    if (cint(a, &x)) return kn_e_const_int(c, KN_DT_BOOL, !x);
    return a == e->u.un.a ? e : kn_e_not(c, a);
  }
  case KN_E_CAST: {
    kn_expr *a = simp_expr(S, e->u.un.a);
    return a == e->u.un.a ? e : kn_e_cast(c, e->dtype, a);
  }
  case KN_E_BROADCAST: {
    kn_expr *a = simp_expr(S, e->u.un.a);
    return a == e->u.un.a ? e : kn_e_broadcast(c, a, e->lanes);
  }
  case KN_E_RAMP: {
    kn_expr *b = simp_expr(S, e->u.ramp.base), *s = simp_expr(S, e->u.ramp.stride);
    if (is_int(s, 0)) return kn_e_broadcast(c, b, e->lanes);
    return b == e->u.ramp.base && s == e->u.ramp.stride ? e : kn_e_ramp(c, b, s, e->lanes);
  }
  case KN_E_SELECT: {
    kn_expr *k = simp_expr(S, e->u.sel.cond), *t = simp_expr(S, e->u.sel.t),
            *f = simp_expr(S, e->u.sel.f);
    int64_t x;
    if (cint(k, &x)) return x ? t : f;
    if (k == e->u.sel.cond && t == e->u.sel.t && f == e->u.sel.f) return e;
    return kn_e_select(c, k, t, f);
  }
  case KN_E_CALL: {
    kn_expr *args[4];
    bool changed = false;
    for (int i = 0; i < e->u.call.n; i++) {
      args[i] = simp_expr(S, e->u.call.args[i]);
      changed |= args[i] != e->u.call.args[i];
    }
    return changed ? kn_e_call(c, e->u.call.fn, args, e->u.call.n) : e;
  }
  case KN_E_LOAD: {
    if (!e->u.load.buffer) return e;
    kn_expr *i = simp_expr(S, e->u.load.index);
    return i == e->u.load.index ? e : kn_e_load(c, e->u.load.buffer, i);
  }
  case KN_E_REDUCE: return e;
  default: return simplify_bin(S, e, simp_expr(S, e->u.bin.a), simp_expr(S, e->u.bin.b));
  }
}

static void push_range(simp *S, const kn_var *v, kn_range range) {
  if (S->n == S->cap) {
    S->cap = S->cap ? 2 * S->cap : 16;
    S->r = realloc(S->r, sizeof *S->r * (size_t)S->cap);
    KN_ASSERT(S->r, "out of memory");
  }
  S->r[S->n++] = (kn_var_range){v, range};
}

/* The comparison that holds where "a k b" does not (NE and EQ: none). */
static kn_expr_kind negated(kn_expr_kind k) {
  return k == KN_E_LT ? KN_E_GE : k == KN_E_LE ? KN_E_GT : k == KN_E_GT ? KN_E_LE : k == KN_E_GE ? KN_E_LT : KN_E_NE;
}

/* Where cond holds (or, with negate, where it does not), a conjunct "v op
 * constant" (either way round) bounds the variable v: pushes the narrowed
 * ranges (the caller pops them). Negated, only a single comparison narrows:
 * the negation of a conjunction is a disjunction. */
static void narrow(simp *S, const kn_expr *cond, bool negate) {
  if (cond->lanes != 1) return;
  if (cond->kind == KN_E_AND) {
    if (negate) return;
    narrow(S, cond->u.bin.a, false);
    narrow(S, cond->u.bin.b, false);
    return;
  }
  if (!is_compare(cond->kind) || cond->kind == KN_E_NE) return;
  const kn_expr *a = cond->u.bin.a, *b = cond->u.bin.b;
  kn_expr_kind k = negate ? negated(cond->kind) : cond->kind;
  if (k == KN_E_NE) return;
  int64_t v;
  if (a->kind != KN_E_VAR) {
    /* c op v -> v op' c */
    const kn_expr *t = a;
    a = b;
    b = t;
    k = k == KN_E_LT ? KN_E_GT : k == KN_E_LE ? KN_E_GE : k == KN_E_GT ? KN_E_LT : k == KN_E_GE ? KN_E_LE : k;
  }
  if (a->kind != KN_E_VAR || a->dtype != KN_DT_I64 || !cint(b, &v) || v <= INT64_MIN + 1 || v >= INT64_MAX - 1)
    return;
  kn_range r = range_of(S, a);
  int64_t below = v - (k == KN_E_LT), above = v + (k == KN_E_GT);
  if ((k == KN_E_LT || k == KN_E_LE || k == KN_E_EQ) && (!r.has_hi || r.hi > below)) r.hi = below, r.has_hi = true;
  if ((k == KN_E_GT || k == KN_E_GE || k == KN_E_EQ) && (!r.has_lo || r.lo < above)) r.lo = above, r.has_lo = true;
  if (kn_range_bounded(r) && r.lo > r.hi) return; /* a branch that never runs: nothing to narrow to */
  push_range(S, a->u.var, r);
}

static kn_expr *simp_one(kn_expr *e, void *ctx) { return simp_expr(ctx, e); }

static kn_stmt *simp_stmt(simp *S, kn_stmt *s) {
  kn_expr_ctx *c = S->c;
  if (!s) return s;
  switch (s->kind) {
  case KN_S_FOR: {
    kn_expr *mn = simp_expr(S, s->u.loop.min), *ext = simp_expr(S, s->u.loop.extent);
    push_range(S, s->u.loop.var, kn_range_loop_var(range_of(S, mn), range_of(S, ext)));
    kn_stmt *body = simp_stmt(S, s->u.loop.body);
    S->n--;
    if (is_int(ext, 0)) return kn_s_seq(c, NULL, 0);
    if (mn == s->u.loop.min && ext == s->u.loop.extent && body == s->u.loop.body) return s;
    return kn_s_for_like(c, s, mn, ext, body);
  }
  case KN_S_STORE: {
    kn_expr *i = simp_expr(S, s->u.store.index), *v = simp_expr(S, s->u.store.value);
    if (i == s->u.store.index && v == s->u.store.value) return s;
    return kn_s_store(c, s->u.store.buffer, i, v);
  }
  case KN_S_ALLOC: {
    kn_stmt *b = simp_stmt(S, s->u.alloc.body);
    return b == s->u.alloc.body ? s : kn_s_alloc(c, s->u.alloc.buffer, b);
  }
  case KN_S_SEQ: {
    kn_stmt **parts = KN_NEW_ARRAY(c->arena, kn_stmt *, s->u.seq.n > 0 ? s->u.seq.n : 1);
    bool changed = false;
    for (int i = 0; i < s->u.seq.n; i++) {
      parts[i] = simp_stmt(S, s->u.seq.stmts[i]);
      changed |= parts[i] != s->u.seq.stmts[i];
    }
    return changed ? kn_s_seq(c, parts, s->u.seq.n) : s;
  }
  case KN_S_IF: {
    kn_expr *k = simp_expr(S, s->u.ifs.cond);
    int64_t x;
    if (cint(k, &x)) return simp_stmt(S, x ? s->u.ifs.then_s : s->u.ifs.else_s);
    int n0 = S->n;
    narrow(S, k, false);
    kn_stmt *t = simp_stmt(S, s->u.ifs.then_s);
    S->n = n0;
    narrow(S, k, true);
    kn_stmt *f = simp_stmt(S, s->u.ifs.else_s);
    S->n = n0;
    if (k == s->u.ifs.cond && t == s->u.ifs.then_s && f == s->u.ifs.else_s) return s;
    return kn_s_if(c, k, t, f);
  }
  case KN_S_LET: {
    kn_expr *v = simp_expr(S, s->u.let.value);
    kn_range r = range_of(S, v);
    push_range(S, s->u.let.var, r);
    kn_stmt *b = simp_stmt(S, s->u.let.body);
    S->n--;
    /* one value: the body reads the constant (simp_expr), the let goes */
    int64_t one;
    if (kn_range_is_const(r, &one)) return kn_stmt_substitute(c, b, s->u.let.var, kn_e_int(c, one));
    if (v == s->u.let.value && b == s->u.let.body) return s;
    return kn_s_let(c, s->u.let.var, v, b);
  }
  case KN_S_PREFETCH: {
    kn_expr *i = simp_expr(S, s->u.prefetch.index);
    return i == s->u.prefetch.index ? s : kn_s_prefetch(c, s->u.prefetch.buffer, i, s->u.prefetch.level);
  }
  case KN_S_GPU: return kn_s_gpu_map(c, s, simp_one, S);
  }
  return s;
}

kn_expr *kn_simplify(kn_expr_ctx *c, kn_expr *e) {
  simp S = {.c = c};
  return simp_expr(&S, e);
}

kn_stmt *kn_simplify_stmt(kn_expr_ctx *c, kn_stmt *s) {
  simp S = {.c = c};
  kn_stmt *r = simp_stmt(&S, s);
  free(S.r);
  return r;
}

typedef struct subst_ctx {
  kn_expr_ctx *c;
  const kn_var *var;
  kn_expr *value;
} subst_ctx;

static kn_expr *subst_one(kn_expr *e, void *ctx) {
  subst_ctx *sc = ctx;
  return kn_e_substitute(sc->c, e, sc->var, sc->value);
}

kn_stmt *kn_stmt_substitute(kn_expr_ctx *c, kn_stmt *s, const kn_var *var, kn_expr *value) {
  if (!s) return s;
  switch (s->kind) {
  case KN_S_FOR:
    return kn_s_for_like(c, s, kn_e_substitute(c, s->u.loop.min, var, value),
                         kn_e_substitute(c, s->u.loop.extent, var, value),
                         kn_stmt_substitute(c, s->u.loop.body, var, value));
  case KN_S_STORE:
    return kn_s_store(c, s->u.store.buffer, kn_e_substitute(c, s->u.store.index, var, value),
                      kn_e_substitute(c, s->u.store.value, var, value));
  case KN_S_ALLOC: return kn_s_alloc(c, s->u.alloc.buffer, kn_stmt_substitute(c, s->u.alloc.body, var, value));
  case KN_S_SEQ: {
    kn_stmt **parts = KN_NEW_ARRAY(c->arena, kn_stmt *, s->u.seq.n > 0 ? s->u.seq.n : 1);
    for (int i = 0; i < s->u.seq.n; i++) parts[i] = kn_stmt_substitute(c, s->u.seq.stmts[i], var, value);
    return kn_s_seq(c, parts, s->u.seq.n);
  }
  case KN_S_IF:
    return kn_s_if(c, kn_e_substitute(c, s->u.ifs.cond, var, value),
                   kn_stmt_substitute(c, s->u.ifs.then_s, var, value),
                   kn_stmt_substitute(c, s->u.ifs.else_s, var, value));
  case KN_S_LET:
    return kn_s_let(c, s->u.let.var, kn_e_substitute(c, s->u.let.value, var, value),
                    kn_stmt_substitute(c, s->u.let.body, var, value));
  case KN_S_PREFETCH:
    return kn_s_prefetch(c, s->u.prefetch.buffer, kn_e_substitute(c, s->u.prefetch.index, var, value),
                         s->u.prefetch.level);
  case KN_S_GPU: {
    subst_ctx sc = {c, var, value};
    return kn_s_gpu_map(c, s, subst_one, &sc);
  }
  }
  return s;
}
