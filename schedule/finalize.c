/* finalize.c — removes VECTORIZED and UNROLLED loops from a lowered nest.
 *
 * Requires: a VECTORIZED loop has a constant extent and a body of stores,
 * sequences and lets only (no inner loops); an UNROLLED loop has a constant
 * extent. Guarantees: codegen sees only SERIAL and PARALLEL loops; a
 * vectorized store writes lanes in loop order (stores of one iteration never
 * read what a later lane writes: the lowering only vectorizes loops whose
 * iterations are independent). A loop that cannot be vectorized is kept as a
 * SERIAL loop — correct, just slower. */
#include "ir/loop/simplify.h"
#include "schedule/schedule.h"

typedef struct vec {
  kn_expr_ctx *c;
  const kn_var *var;
  int lanes;
} vec;

static kn_expr *widen(vec *v, kn_expr *e) { return e->lanes == 1 ? kn_e_broadcast(v->c, e, v->lanes) : e; }

/* Rewrites e as a function of all lanes of the loop variable. Results that
 * do not depend on it stay scalar. */
static kn_expr *vec_expr(vec *v, kn_expr *e) {
  kn_expr_ctx *c = v->c;
  switch (e->kind) {
  case KN_E_INT:
  case KN_E_FLOAT: return e;
  case KN_E_VAR:
    return e->u.var == v->var ? kn_e_ramp(c, kn_e_int(c, 0), kn_e_int(c, 1), v->lanes) : e;
  case KN_E_LOAD: {
    KN_ASSERT(e->u.load.buffer, "TE load in loop IR");
    kn_expr *i = vec_expr(v, e->u.load.index);
    return i == e->u.load.index ? e : kn_e_load(c, e->u.load.buffer, i);
  }
  case KN_E_NOT: {
    kn_expr *a = vec_expr(v, e->u.un.a);
    return a == e->u.un.a ? e : kn_e_not(c, a);
  }
  case KN_E_CAST: {
    kn_expr *a = vec_expr(v, e->u.un.a);
    return a == e->u.un.a ? e : kn_e_cast(c, e->dtype, a);
  }
  case KN_E_SELECT: {
    kn_expr *k = vec_expr(v, e->u.sel.cond), *t = vec_expr(v, e->u.sel.t), *f = vec_expr(v, e->u.sel.f);
    if (k == e->u.sel.cond && t == e->u.sel.t && f == e->u.sel.f) return e;
    if (k->lanes > 1 || t->lanes > 1 || f->lanes > 1) {
      t = widen(v, t);
      f = widen(v, f);
    }
    return kn_e_select(c, k, t, f);
  }
  case KN_E_CALL: {
    kn_expr *args[4];
    bool changed = false;
    for (int i = 0; i < e->u.call.n; i++) {
      args[i] = vec_expr(v, e->u.call.args[i]);
      changed |= args[i] != e->u.call.args[i];
    }
    return changed ? kn_e_call(c, e->u.call.fn, args, e->u.call.n) : e;
  }
  case KN_E_RAMP:
  case KN_E_BROADCAST:
  case KN_E_REDUCE: KN_UNREACHABLE("nested vectorization"); return e;
  default: {
    kn_expr *a = vec_expr(v, e->u.bin.a), *b = vec_expr(v, e->u.bin.b);
    if (a == e->u.bin.a && b == e->u.bin.b) return e;
    if (e->dtype == KN_DT_I64 || (a->dtype == KN_DT_I64 && e->kind != KN_E_DIV && e->kind != KN_E_MOD)) {
      /* affine forms stay ramps: ramp +- scalar, ramp * scalar */
      bool ra = a->kind == KN_E_RAMP, rb = b->kind == KN_E_RAMP;
      if (e->kind == KN_E_ADD && ra && b->lanes == 1)
        return kn_e_ramp(c, kn_e_add(c, a->u.ramp.base, b), a->u.ramp.stride, a->lanes);
      if (e->kind == KN_E_ADD && rb && a->lanes == 1)
        return kn_e_ramp(c, kn_e_add(c, a, b->u.ramp.base), b->u.ramp.stride, b->lanes);
      if (e->kind == KN_E_ADD && ra && rb)
        return kn_e_ramp(c, kn_e_add(c, a->u.ramp.base, b->u.ramp.base),
                         kn_e_add(c, a->u.ramp.stride, b->u.ramp.stride), a->lanes);
      if (e->kind == KN_E_SUB && ra && b->lanes == 1)
        return kn_e_ramp(c, kn_e_sub(c, a->u.ramp.base, b), a->u.ramp.stride, a->lanes);
      if (e->kind == KN_E_MUL && ra && b->lanes == 1)
        return kn_e_ramp(c, kn_e_mul(c, a->u.ramp.base, b), kn_e_mul(c, a->u.ramp.stride, b), a->lanes);
      if (e->kind == KN_E_MUL && rb && a->lanes == 1)
        return kn_e_ramp(c, kn_e_mul(c, a, b->u.ramp.base), kn_e_mul(c, a, b->u.ramp.stride), b->lanes);
    }
    return kn_e_bin(c, e->kind, a, b);
  }
  }
}

static bool vectorizable(const kn_stmt *s) {
  switch (s->kind) {
  case KN_S_STORE: return true;
  case KN_S_SEQ:
    for (int i = 0; i < s->u.seq.n; i++)
      if (!vectorizable(s->u.seq.stmts[i])) return false;
    return true;
  default: return false;
  }
}

static kn_stmt *vec_stmt(vec *v, kn_stmt *s) {
  if (s->kind == KN_S_STORE) {
    kn_expr *i = vec_expr(v, s->u.store.index), *val = vec_expr(v, s->u.store.value);
    if (i->lanes == 1) return NULL; /* every lane would hit one element: keep it serial */
    return kn_s_store(v->c, s->u.store.buffer, i, widen(v, val));
  }
  kn_stmt **parts = KN_NEW_ARRAY(v->c->arena, kn_stmt *, s->u.seq.n > 0 ? s->u.seq.n : 1);
  for (int i = 0; i < s->u.seq.n; i++)
    if (!(parts[i] = vec_stmt(v, s->u.seq.stmts[i]))) return NULL;
  return kn_s_seq(v->c, parts, s->u.seq.n);
}

/* The loop as vectors of power-of-two widths, widest first, one after the
 * other in lane order: 24 lanes as 16 + 8. LLVM 14 legalizes a wider vector
 * of another width through the stack, element by element, many times
 * slower than the pieces. Up to MAX_WHOLE lanes (one AVX-512 register of
 * fp32) a vector stays whole, which LLVM widens to one register, a little
 * faster than the pieces (efficientnet_b0's 10-channel SE convs as one
 * vector, not 8 + 2). NULL when a piece cannot be vectorized. */
#define MAX_WHOLE 16
static kn_stmt *vec_pieces(kn_expr_ctx *c, kn_stmt *body, kn_var *var, int64_t ext) {
  kn_stmt *parts[64];
  int n = 0;
  int64_t at = 0, w = 1;
  while (w * 2 <= ext) w *= 2;
  if (ext <= MAX_WHOLE) w = ext;
  for (; at < ext; w /= 2) {
    if (ext - at < w) continue;
    kn_stmt *piece = at ? kn_stmt_substitute(c, body, var, kn_e_add(c, kn_e_var(c, var), kn_e_int(c, at))) : body;
    if (w == 1) {
      parts[n++] = kn_stmt_substitute(c, piece, var, kn_e_int(c, 0));
    } else {
      vec v = {c, var, (int)w};
      if (!(parts[n++] = vec_stmt(&v, piece))) return NULL;
    }
    at += w;
  }
  return kn_s_seq(c, parts, n);
}

int64_t kn_sched_vector_regs(int64_t cf, int lanes) {
  if (lanes < 1 || cf <= lanes) return 1;
  return cf / lanes + __builtin_popcountll((unsigned long long)(cf % lanes));
}

static kn_stmt *finalize(kn_expr_ctx *c, kn_stmt *s) {
  if (!s) return s;
  switch (s->kind) {
  case KN_S_FOR: {
    kn_stmt *body = finalize(c, s->u.loop.body);
    int64_t ext;
    bool const_ext = kn_e_is_const_int(kn_simplify(c, s->u.loop.extent), &ext);
    if (s->u.loop.kind == KN_FOR_VECTORIZED && const_ext && ext > 1 && vectorizable(body)) {
      kn_stmt *vectorized = vec_pieces(c, body, s->u.loop.var, ext);
      if (vectorized) return vectorized;
    }
    if (s->u.loop.kind == KN_FOR_UNROLLED && const_ext && ext <= 64) {
      kn_stmt **parts = KN_NEW_ARRAY(c->arena, kn_stmt *, ext > 0 ? ext : 1);
      for (int64_t i = 0; i < ext; i++) parts[i] = kn_stmt_substitute(c, body, s->u.loop.var, kn_e_int(c, i));
      return kn_s_seq(c, parts, (int)ext);
    }
    if (s->u.loop.kind == KN_FOR_BLOCK || s->u.loop.kind == KN_FOR_THREAD)
      return kn_s_for_like(c, s, s->u.loop.min, s->u.loop.extent, body);
    kn_for_kind kind = s->u.loop.kind == KN_FOR_PARALLEL ? KN_FOR_PARALLEL : KN_FOR_SERIAL;
    return kn_s_for(c, s->u.loop.var, s->u.loop.min, s->u.loop.extent, kind, body);
  }
  case KN_S_ALLOC: return kn_s_alloc(c, s->u.alloc.buffer, finalize(c, s->u.alloc.body));
  case KN_S_SEQ: {
    kn_stmt **parts = KN_NEW_ARRAY(c->arena, kn_stmt *, s->u.seq.n > 0 ? s->u.seq.n : 1);
    for (int i = 0; i < s->u.seq.n; i++) parts[i] = finalize(c, s->u.seq.stmts[i]);
    return kn_s_seq(c, parts, s->u.seq.n);
  }
  case KN_S_IF: return kn_s_if(c, s->u.ifs.cond, finalize(c, s->u.ifs.then_s), finalize(c, s->u.ifs.else_s));
  case KN_S_LET: return kn_s_let(c, s->u.let.var, s->u.let.value, finalize(c, s->u.let.body));
  case KN_S_STORE:
  case KN_S_PREFETCH:
  case KN_S_GPU: return s;
  }
  return s;
}

kn_stmt *kn_loop_finalize(kn_expr_ctx *ec, kn_stmt *s) { return kn_simplify_stmt(ec, finalize(ec, s)); }
