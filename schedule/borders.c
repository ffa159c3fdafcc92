/* borders.c — versions accumulator tiles on the borders of a padded window.
 *
 * A windowed op with implicit padding (a depthwise convolution, a pooling)
 * reads its input through select(in_bounds, load(clamped index), 0): every
 * tap of every tile pays for the bounds test, the clamps and a masked load,
 * although only the tiles that touch the border need them. This pass wraps
 * each accumulator tile (the body of an ALLOC) in
 *
 *   if (v0 < a0) tile else if (v0 <= b0) [the same for v1 ...] else tile
 *
 * where the v are the loop and let variables bound outside the tile, and the
 * intervals [a, b] are the values for which every bounds test of the tile
 * holds whatever its inner loops do (a cascade, the variable with the fewest
 * border values first; see cascade()). The simplifier then knows the
 * narrowed ranges in each branch (simplify.c, narrow) and folds the tests to
 * true and the clamps away: the interior tiles run plain loads, and a
 * border tile of an inner row tests its columns only.
 *
 * Requires: a finalized nest (kn_loop_finalize): loops SERIAL or PARALLEL.
 * Guarantees: the result computes exactly what the input computes (both
 * branches are the input tile; the guard only picks where the simplifier may
 * specialize). A test is used only when it depends on one outer variable and
 * holds on one interval of it; other tests stay as they are. */
#include <stdlib.h>

#include "ir/loop/simplify.h"
#include "schedule/schedule.h"

enum {
  MAX_SCAN = 4096, /* outer variables with more values are not scanned */
  MAX_PIN = 4,     /* a variable with no interior and at most this many values gets a copy per value */
  MAX_COPIES = 8,  /* pinned copies of one tile part, all pinned variables together */
};

typedef struct want {
  kn_var *var;
  int64_t lo, hi; /* the interval on which the tests seen so far hold */
  bool pin;       /* no value passes every test: one copy per value */
} want;

typedef struct borders {
  kn_expr_ctx *c;
  kn_var_range *r; /* enclosing loop and let variables, innermost last */
  kn_var **vars;   /* vars[i] is r[i].var */
  int n, cap;
  int n_outer; /* while collecting: r[0..n_outer) are bound outside the tile */
  want *w;
  int n_w, cap_w;
} borders;

static void *grow(void *p, int *cap, size_t elem) {
  *cap = *cap ? 2 * *cap : 16;
  p = realloc(p, elem * (size_t)*cap);
  KN_ASSERT(p, "out of memory");
  return p;
}

static void push(borders *B, kn_var *v, kn_range range) {
  if (B->n == B->cap) {
    int cap = B->cap;
    B->r = grow(B->r, &cap, sizeof *B->r);
    B->vars = grow(B->vars, &B->cap, sizeof *B->vars);
  }
  B->vars[B->n] = v;
  B->r[B->n++] = (kn_var_range){v, range};
}

static void push_loop(borders *B, const kn_stmt *s) {
  kn_range min = kn_expr_range(s->u.loop.min, B->r, B->n), extent = kn_expr_range(s->u.loop.extent, B->r, B->n);
  push(B, s->u.loop.var, kn_range_loop_var(min, extent));
}

static void push_let(borders *B, const kn_stmt *s) {
  push(B, s->u.let.var, kn_expr_range(s->u.let.value, B->r, B->n));
}

/* The number of values of v, when it is known and fits int64 (else false). */
static bool count_values(kn_range v, int64_t *count) {
  return kn_range_bounded(v) && v.lo <= v.hi && !__builtin_sub_overflow(v.hi, v.lo, count) &&
         !__builtin_add_overflow(*count, 1, count);
}

/* The one outer variable e reads (its index in r); -1 for none, -2 for more. */
static int outer_var(const borders *B, const kn_expr *e, int found) {
  if (found == -2) return -2;
  switch (e->kind) {
  case KN_E_INT:
  case KN_E_FLOAT: return found;
  case KN_E_VAR:
    for (int i = B->n - 1; i >= 0; i--)
      if (B->r[i].var == e->u.var) {
        if (i >= B->n_outer) return found;
        if (found >= 0 && B->r[found].var != e->u.var) return -2;
        return i;
      }
    return found;
  case KN_E_NOT:
  case KN_E_CAST:
  case KN_E_BROADCAST: return outer_var(B, e->u.un.a, found);
  case KN_E_RAMP: return outer_var(B, e->u.ramp.stride, outer_var(B, e->u.ramp.base, found));
  case KN_E_SELECT:
    found = outer_var(B, e->u.sel.cond, found);
    return outer_var(B, e->u.sel.f, outer_var(B, e->u.sel.t, found));
  case KN_E_CALL:
    for (int i = 0; i < e->u.call.n; i++) found = outer_var(B, e->u.call.args[i], found);
    return found;
  case KN_E_LOAD: return e->u.load.buffer ? outer_var(B, e->u.load.index, found) : -2;
  case KN_E_REDUCE: return -2;
  default: return outer_var(B, e->u.bin.b, outer_var(B, e->u.bin.a, found));
  }
}

/* A bounds test of the tile: narrows the wanted interval of its outer
 * variable to the values on which it holds for all inner values. */
static void consider(borders *B, const kn_expr *test) {
  if (kn_expr_truth(test, B->r, B->n) == 1) return;
  int vi = outer_var(B, test, -1);
  if (vi < 0) return;
  kn_range v = B->r[vi].range;
  kn_var *var = B->vars[vi];
  int64_t count;
  if (!count_values(v, &count) || count > MAX_SCAN) return;
  int64_t first = 0, last = -1;
  bool gap = false;
  push(B, var, v); /* the innermost entry wins: overrides v */
  for (int64_t x = v.lo; x <= v.hi; x++) {
    B->r[B->n - 1].range = kn_range_const(x);
    if (kn_expr_truth(test, B->r, B->n) != 1) continue;
    if (last < first) first = x;
    else if (last != x - 1) gap = true;
    last = x;
  }
  B->n--;
  if (last < first || gap) return; /* never, or on more than one interval: keep the test */
  for (int i = 0; i < B->n_w; i++)
    if (B->w[i].var == var) {
      if (first > B->w[i].lo) B->w[i].lo = first;
      if (last < B->w[i].hi) B->w[i].hi = last;
      return;
    }
  if (B->n_w == B->cap_w) B->w = grow(B->w, &B->cap_w, sizeof *B->w);
  B->w[B->n_w++] = (want){var, first, last, false};
}

static void collect_expr(borders *B, const kn_expr *e) {
  switch (e->kind) {
  case KN_E_INT:
  case KN_E_FLOAT:
  case KN_E_VAR:
  case KN_E_REDUCE: return;
  case KN_E_NOT:
  case KN_E_CAST:
  case KN_E_BROADCAST: collect_expr(B, e->u.un.a); return;
  case KN_E_RAMP: collect_expr(B, e->u.ramp.base); return;
  case KN_E_SELECT: {
    /* each conjunct of the condition is a test on its own */
    const kn_expr *stack[64];
    int n = 0;
    stack[n++] = e->u.sel.cond;
    while (n > 0) {
      const kn_expr *t = stack[--n];
      if (t->kind == KN_E_AND && t->lanes == 1 && n + 2 <= 64) {
        stack[n++] = t->u.bin.a;
        stack[n++] = t->u.bin.b;
      } else {
        consider(B, t);
      }
    }
    collect_expr(B, e->u.sel.t);
    collect_expr(B, e->u.sel.f);
    return;
  }
  case KN_E_CALL:
    for (int i = 0; i < e->u.call.n; i++) collect_expr(B, e->u.call.args[i]);
    return;
  case KN_E_LOAD:
    if (e->u.load.buffer) collect_expr(B, e->u.load.index);
    return;
  default:
    collect_expr(B, e->u.bin.a);
    collect_expr(B, e->u.bin.b);
    return;
  }
}

static void collect(borders *B, const kn_stmt *s) {
  if (!s) return;
  switch (s->kind) {
  case KN_S_FOR:
    push_loop(B, s);
    collect(B, s->u.loop.body);
    B->n--;
    return;
  case KN_S_LET:
    collect_expr(B, s->u.let.value);
    push_let(B, s);
    collect(B, s->u.let.body);
    B->n--;
    return;
  case KN_S_STORE:
    collect_expr(B, s->u.store.index);
    collect_expr(B, s->u.store.value);
    return;
  case KN_S_PREFETCH: collect_expr(B, s->u.prefetch.index); return;
  case KN_S_GPU: return; /* GPU kernels are not versioned */
  case KN_S_ALLOC: collect(B, s->u.alloc.body); return;
  case KN_S_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) collect(B, s->u.seq.stmts[i]);
    return;
  case KN_S_IF:
    collect_expr(B, s->u.ifs.cond);
    collect(B, s->u.ifs.then_s);
    collect(B, s->u.ifs.else_s);
    return;
  }
}

static bool expr_has_select(const kn_expr *e) {
  switch (e->kind) {
  case KN_E_INT:
  case KN_E_FLOAT:
  case KN_E_VAR:
  case KN_E_REDUCE: return false;
  case KN_E_SELECT: return true;
  case KN_E_NOT:
  case KN_E_CAST:
  case KN_E_BROADCAST: return expr_has_select(e->u.un.a);
  case KN_E_RAMP: return expr_has_select(e->u.ramp.base);
  case KN_E_CALL:
    for (int i = 0; i < e->u.call.n; i++)
      if (expr_has_select(e->u.call.args[i])) return true;
    return false;
  case KN_E_LOAD: return e->u.load.buffer && expr_has_select(e->u.load.index);
  default: return expr_has_select(e->u.bin.a) || expr_has_select(e->u.bin.b);
  }
}

static bool has_select(const kn_stmt *s) {
  if (!s) return false;
  switch (s->kind) {
  case KN_S_FOR: return has_select(s->u.loop.body);
  case KN_S_LET: return expr_has_select(s->u.let.value) || has_select(s->u.let.body);
  case KN_S_STORE: return expr_has_select(s->u.store.index) || expr_has_select(s->u.store.value);
  case KN_S_PREFETCH: return expr_has_select(s->u.prefetch.index);
  case KN_S_GPU: return false;
  case KN_S_ALLOC: return has_select(s->u.alloc.body);
  case KN_S_SEQ:
    for (int i = 0; i < s->u.seq.n; i++)
      if (has_select(s->u.seq.stmts[i])) return true;
    return false;
  case KN_S_IF:
    return expr_has_select(s->u.ifs.cond) || has_select(s->u.ifs.then_s) || has_select(s->u.ifs.else_s);
  }
  return false;
}

/* The range of want w's variable outside the tile: known on both sides
 * (consider() wants only variables with few values). */
static kn_range outer_range(const borders *B, const want *w) {
  for (int j = B->n - 1; j >= 0; j--)
    if (B->r[j].var == w->var) return B->r[j].range;
  return kn_range_make(w->lo, w->hi);
}

/* The share of its variable's values that are on the border (all of them
 * for a pinned one, which thus comes last). */
static double border_share(const borders *B, const want *w) {
  if (w->pin) return 1.0;
  kn_range v = outer_range(B, w);
  return 1.0 - (double)(w->hi - w->lo + 1) / (double)(v.hi - v.lo + 1);
}

/* Tile part p as a cascade over the wanted variables B->w[i..], the one
 * with the fewest border values first: x < lo, lo <= x <= hi and x > hi
 * each get a copy, and only the middle one goes on to the next variable.
 * A tile on the left or right border of a row that is inside then tests
 * only its columns: a depthwise conv's 8-pixel tiles of a 56-wide row are
 * 2 in 7 on the border, its rows 2 in 56. The simplifier narrows each copy
 * (then-branches and, for a single comparison, else-branches).
 *
 * A variable on which no value passes every test (a 14-wide row in two
 * 7-pixel tiles: the left one reads column -1, the right one column 14) is
 * pinned instead: x <= lo, x <= lo + 1, ... each get a copy, in which the
 * simplifier knows x and folds the tests of the other side. */
static kn_stmt *cascade(borders *B, int i, kn_stmt *p) {
  if (i == B->n_w) return p;
  kn_expr_ctx *c = B->c;
  const want *w = &B->w[i];
  kn_range v = outer_range(B, w);
  kn_stmt *s = cascade(B, i + 1, p);
  kn_expr *x = kn_e_var(c, w->var);
  if (w->pin) {
    kn_stmt *r = s;
    for (int64_t k = v.hi - 1; k >= v.lo; k--) r = kn_s_if(c, kn_e_bin(c, KN_E_LE, x, kn_e_int(c, k)), s, r);
    return r;
  }
  if (w->hi < v.hi) s = kn_s_if(c, kn_e_bin(c, KN_E_LE, x, kn_e_int(c, w->hi)), s, p);
  if (w->lo > v.lo) s = kn_s_if(c, kn_e_bin(c, KN_E_LE, x, kn_e_int(c, w->lo - 1)), p, s);
  return s;
}

static kn_stmt *version_tile(borders *B, const kn_stmt *s) {
  kn_expr_ctx *c = B->c;
  B->n_outer = B->n;
  B->n_w = 0;
  collect(B, s->u.alloc.body);
  int n = 0;
  int64_t copies = 1;
  for (int i = 0; i < B->n_w; i++) {
    kn_range v = outer_range(B, &B->w[i]);
    if (B->w[i].lo > B->w[i].hi) { /* no interior value: pin a small range, else keep its tests */
      int64_t values = v.hi - v.lo + 1;
      if (values > MAX_PIN || copies * values > MAX_COPIES) continue;
      copies *= values;
      B->w[i].pin = true;
    }
    if (B->w[i].lo > v.lo || B->w[i].hi < v.hi) B->w[n++] = B->w[i]; /* a test that can fail (a pinned one does) */
  }
  B->n_w = n;
  if (n == 0) return NULL;
  for (int i = 1; i < n; i++) /* insertion sort by border share, fewest first */
    for (int j = i; j > 0 && border_share(B, &B->w[j]) < border_share(B, &B->w[j - 1]); j--) {
      want t = B->w[j];
      B->w[j] = B->w[j - 1];
      B->w[j - 1] = t;
    }
  /* only the parts of the tile that test bounds (its reduction loops) are
   * versioned, not its epilogue: a SiLU epilogue twice made
   * efficientnet_b0's depthwise kernels slower than the tests it saved */
  kn_stmt *body = s->u.alloc.body;
  if (body->kind != KN_S_SEQ) return kn_s_alloc(c, s->u.alloc.buffer, cascade(B, 0, body));
  kn_stmt **parts = KN_NEW_ARRAY(c->arena, kn_stmt *, body->u.seq.n > 0 ? body->u.seq.n : 1);
  for (int i = 0; i < body->u.seq.n; i++) {
    kn_stmt *p = body->u.seq.stmts[i];
    parts[i] = has_select(p) ? cascade(B, 0, p) : p;
  }
  return kn_s_alloc(c, s->u.alloc.buffer, kn_s_seq(c, parts, body->u.seq.n));
}

static kn_stmt *version(borders *B, kn_stmt *s) {
  if (!s) return s;
  kn_expr_ctx *c = B->c;
  switch (s->kind) {
  case KN_S_FOR: {
    push_loop(B, s);
    kn_stmt *b = version(B, s->u.loop.body);
    B->n--;
    return b == s->u.loop.body ? s : kn_s_for_like(c, s, s->u.loop.min, s->u.loop.extent, b);
  }
  case KN_S_LET: {
    push_let(B, s);
    kn_stmt *b = version(B, s->u.let.body);
    B->n--;
    return b == s->u.let.body ? s : kn_s_let(c, s->u.let.var, s->u.let.value, b);
  }
  case KN_S_SEQ: {
    kn_stmt **parts = KN_NEW_ARRAY(c->arena, kn_stmt *, s->u.seq.n > 0 ? s->u.seq.n : 1);
    bool changed = false;
    for (int i = 0; i < s->u.seq.n; i++) {
      parts[i] = version(B, s->u.seq.stmts[i]);
      changed |= parts[i] != s->u.seq.stmts[i];
    }
    return changed ? kn_s_seq(c, parts, s->u.seq.n) : s;
  }
  case KN_S_IF: {
    kn_stmt *t = version(B, s->u.ifs.then_s), *f = version(B, s->u.ifs.else_s);
    return t == s->u.ifs.then_s && f == s->u.ifs.else_s ? s : kn_s_if(c, s->u.ifs.cond, t, f);
  }
  case KN_S_ALLOC: {
    kn_stmt *v = version_tile(B, s);
    return v ? v : s;
  }
  case KN_S_STORE:
  case KN_S_PREFETCH:
  case KN_S_GPU: return s;
  }
  return s;
}

kn_stmt *kn_loop_version_borders(kn_expr_ctx *c, kn_stmt *s) {
  borders B = {.c = c};
  kn_stmt *r = version(&B, s);
  free(B.r);
  free(B.vars);
  free(B.w);
  return r == s ? s : kn_simplify_stmt(c, r);
}
