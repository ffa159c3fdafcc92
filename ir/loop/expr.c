/* expr.c — construction, comparison, substitution and printing of
 * expressions. Constructors check operand types with KN_ASSERT: a type
 * mismatch here is a compiler bug, never bad input. */
#include "ir/loop/expr.h"

#include <math.h>
#include <string.h>

#include "ir/loop/loop.h"
#include "ir/te/te.h"

static const struct {
  const char *name;
  int nargs;
} fn_table[KN_FN_COUNT] = {
#define X(e, name, nargs) [KN_FN_##e] = {name, nargs},
    KN_FNS(X)
#undef X
};

const char *kn_fn_name(kn_fn fn) { return fn < KN_FN_COUNT ? fn_table[fn].name : "?"; }
int kn_fn_nargs(kn_fn fn) { return fn < KN_FN_COUNT ? fn_table[fn].nargs : 0; }

static kn_expr *node(kn_expr_ctx *c, kn_expr_kind k, kn_dtype t, int lanes) {
  kn_expr *e = KN_NEW(c->arena, kn_expr);
  e->kind = k;
  e->dtype = t;
  e->lanes = lanes;
  return e;
}

kn_var *kn_var_new(kn_expr_ctx *c, const char *name) {
  kn_var *v = KN_NEW(c->arena, kn_var);
  v->id = c->next_var_id++;
  v->name = kn_arena_strdup(c->arena, name);
  return v;
}

kn_expr *kn_e_const_int(kn_expr_ctx *c, kn_dtype t, int64_t v) {
  KN_ASSERT(kn_dtype_is_int(t) || t == KN_DT_BOOL, "integer constant of non-integer type");
  kn_expr *e = node(c, KN_E_INT, t, 1);
  e->u.ival = v;
  return e;
}

kn_expr *kn_e_int(kn_expr_ctx *c, int64_t v) { return kn_e_const_int(c, KN_DT_I64, v); }

kn_expr *kn_e_float(kn_expr_ctx *c, kn_dtype t, double v) {
  KN_ASSERT(kn_dtype_is_float(t), "float constant of non-float type");
  kn_expr *e = node(c, KN_E_FLOAT, t, 1);
  e->u.fval = v;
  return e;
}

kn_expr *kn_e_var(kn_expr_ctx *c, kn_var *v) {
  kn_expr *e = node(c, KN_E_VAR, KN_DT_I64, 1);
  e->u.var = v;
  return e;
}

static bool is_compare(kn_expr_kind k) { return k >= KN_E_EQ && k <= KN_E_GE; }

/* Broadcasts a scalar operand to match a vector one. */
static void match_lanes(kn_expr_ctx *c, kn_expr **a, kn_expr **b) {
  if ((*a)->lanes == (*b)->lanes) return;
  if ((*a)->lanes == 1)
    *a = kn_e_broadcast(c, *a, (*b)->lanes);
  else if ((*b)->lanes == 1)
    *b = kn_e_broadcast(c, *b, (*a)->lanes);
  KN_ASSERT((*a)->lanes == (*b)->lanes, "lane mismatch");
}

kn_expr *kn_e_bin(kn_expr_ctx *c, kn_expr_kind k, kn_expr *a, kn_expr *b) {
  KN_ASSERT(k >= KN_E_ADD && k <= KN_E_OR, "not a binary op");
  KN_ASSERT(a->dtype == b->dtype, "binary op on different dtypes");
  match_lanes(c, &a, &b);
  kn_dtype t = is_compare(k) ? KN_DT_BOOL : a->dtype;
  /* on bool: logical; on integers: bitwise (BitwiseAnd/Or) */
  if (k == KN_E_AND || k == KN_E_OR)
    KN_ASSERT(a->dtype == KN_DT_BOOL || kn_dtype_is_int(a->dtype), "logic op on a float");
  kn_expr *e = node(c, k, t, a->lanes);
  e->u.bin.a = a;
  e->u.bin.b = b;
  return e;
}

kn_expr *kn_e_add(kn_expr_ctx *c, kn_expr *a, kn_expr *b) { return kn_e_bin(c, KN_E_ADD, a, b); }
kn_expr *kn_e_sub(kn_expr_ctx *c, kn_expr *a, kn_expr *b) { return kn_e_bin(c, KN_E_SUB, a, b); }
kn_expr *kn_e_mul(kn_expr_ctx *c, kn_expr *a, kn_expr *b) { return kn_e_bin(c, KN_E_MUL, a, b); }
kn_expr *kn_e_div(kn_expr_ctx *c, kn_expr *a, kn_expr *b) { return kn_e_bin(c, KN_E_DIV, a, b); }
kn_expr *kn_e_mod(kn_expr_ctx *c, kn_expr *a, kn_expr *b) { return kn_e_bin(c, KN_E_MOD, a, b); }
kn_expr *kn_e_min(kn_expr_ctx *c, kn_expr *a, kn_expr *b) { return kn_e_bin(c, KN_E_MIN, a, b); }
kn_expr *kn_e_max(kn_expr_ctx *c, kn_expr *a, kn_expr *b) { return kn_e_bin(c, KN_E_MAX, a, b); }
kn_expr *kn_e_min_num(kn_expr_ctx *c, kn_expr *a, kn_expr *b) {
  return kn_e_select(c, kn_e_bin(c, KN_E_LT, a, b), a, b);
}
kn_expr *kn_e_max_num(kn_expr_ctx *c, kn_expr *a, kn_expr *b) {
  return kn_e_select(c, kn_e_bin(c, KN_E_GT, a, b), a, b);
}

kn_expr *kn_e_not(kn_expr_ctx *c, kn_expr *a) {
  KN_ASSERT(a->dtype == KN_DT_BOOL, "not of non-bool");
  kn_expr *e = node(c, KN_E_NOT, KN_DT_BOOL, a->lanes);
  e->u.un.a = a;
  return e;
}

kn_expr *kn_e_select(kn_expr_ctx *c, kn_expr *cond, kn_expr *t, kn_expr *f) {
  KN_ASSERT(cond->dtype == KN_DT_BOOL, "select condition not bool");
  KN_ASSERT(t->dtype == f->dtype, "select arms differ in dtype");
  match_lanes(c, &t, &f);
  if (cond->lanes != t->lanes) {
    if (cond->lanes == 1) {
      /* scalar condition over vector arms is fine for codegen (select i1) */
    } else {
      match_lanes(c, &cond, &t);
      match_lanes(c, &t, &f);
    }
  }
  kn_expr *e = node(c, KN_E_SELECT, t->dtype, t->lanes);
  e->u.sel.cond = cond;
  e->u.sel.t = t;
  e->u.sel.f = f;
  return e;
}

kn_expr *kn_e_cast(kn_expr_ctx *c, kn_dtype t, kn_expr *a) {
  if (a->dtype == t) return a;
  if (a->kind == KN_E_INT && (kn_dtype_is_int(t) || t == KN_DT_BOOL))
    return kn_e_const_int(c, t, t == KN_DT_BOOL ? a->u.ival != 0 : a->u.ival);
  if (a->kind == KN_E_INT && kn_dtype_is_float(t)) return kn_e_float(c, t, (double)a->u.ival);
  if (a->kind == KN_E_FLOAT && kn_dtype_is_float(t)) return kn_e_float(c, t, a->u.fval);
  kn_expr *e = node(c, KN_E_CAST, t, a->lanes);
  e->u.un.a = a;
  return e;
}

kn_expr *kn_e_call(kn_expr_ctx *c, kn_fn fn, kn_expr **args, int n) {
  KN_ASSERT(n == kn_fn_nargs(fn), "wrong intrinsic arity");
  int lanes = 1;
  for (int i = 0; i < n; i++) lanes = args[i]->lanes > lanes ? args[i]->lanes : lanes;
  bool vreduce = fn == KN_FN_VREDUCE_ADD || fn == KN_FN_VREDUCE_MAX || fn == KN_FN_VREDUCE_MIN;
  kn_expr *e = node(c, KN_E_CALL, args[0]->dtype, vreduce ? 1 : lanes);
  e->u.call.fn = fn;
  e->u.call.n = n;
  e->u.call.args = KN_NEW_ARRAY(c->arena, kn_expr *, n);
  for (int i = 0; i < n; i++) {
    kn_expr *arg = args[i];
    KN_ASSERT(arg->dtype == args[0]->dtype, "intrinsic args differ in dtype");
    if (!vreduce && arg->lanes != lanes) arg = kn_e_broadcast(c, arg, lanes);
    e->u.call.args[i] = arg;
  }
  return e;
}

kn_expr *kn_e_call1(kn_expr_ctx *c, kn_fn fn, kn_expr *a) { return kn_e_call(c, fn, &a, 1); }

kn_expr *kn_e_load(kn_expr_ctx *c, kn_buffer *b, kn_expr *index) {
  KN_ASSERT(index->dtype == KN_DT_I64, "load index must be int64");
  kn_expr *e = node(c, KN_E_LOAD, b->dtype, index->lanes);
  e->u.load.buffer = b;
  e->u.load.index = index;
  return e;
}

kn_expr *kn_e_tload(kn_expr_ctx *c, kn_te_tensor *t, kn_expr **indices, int n) {
  KN_ASSERT(n == t->rank, "tensor load with wrong number of indices");
  kn_expr *e = node(c, KN_E_LOAD, t->dtype, 1);
  e->u.load.tensor = t;
  e->u.load.n = n;
  e->u.load.indices = KN_NEW_ARRAY(c->arena, kn_expr *, n > 0 ? n : 1);
  for (int i = 0; i < n; i++) {
    KN_ASSERT(indices[i]->dtype == KN_DT_I64 && indices[i]->lanes == 1, "bad tensor index");
    e->u.load.indices[i] = indices[i];
  }
  return e;
}

kn_expr *kn_e_ramp(kn_expr_ctx *c, kn_expr *base, kn_expr *stride, int lanes) {
  KN_ASSERT(base->lanes == 1 && stride->lanes == 1 && lanes > 1, "bad ramp");
  KN_ASSERT(base->dtype == KN_DT_I64 && stride->dtype == KN_DT_I64, "ramp must be int64");
  kn_expr *e = node(c, KN_E_RAMP, KN_DT_I64, lanes);
  e->u.ramp.base = base;
  e->u.ramp.stride = stride;
  return e;
}

kn_expr *kn_e_broadcast(kn_expr_ctx *c, kn_expr *a, int lanes) {
  if (lanes == 1) return a;
  KN_ASSERT(a->lanes == 1, "broadcast of a vector");
  kn_expr *e = node(c, KN_E_BROADCAST, a->dtype, lanes);
  e->u.un.a = a;
  return e;
}

kn_expr *kn_e_reduce(kn_expr_ctx *c, kn_reduce_op op, kn_var **axes, kn_expr **extents, int n,
                     kn_expr *source) {
  kn_expr *e = node(c, KN_E_REDUCE, source->dtype, 1);
  e->u.reduce.op = op;
  e->u.reduce.n_axes = n;
  e->u.reduce.axes = KN_NEW_ARRAY(c->arena, kn_var *, n > 0 ? n : 1);
  e->u.reduce.extents = KN_NEW_ARRAY(c->arena, kn_expr *, n > 0 ? n : 1);
  for (int i = 0; i < n; i++) {
    e->u.reduce.axes[i] = axes[i];
    e->u.reduce.extents[i] = extents[i];
  }
  e->u.reduce.source = source;
  return e;
}

bool kn_e_uses_var(const kn_expr *e, const kn_var *v) {
  switch (e->kind) {
  case KN_E_INT:
  case KN_E_FLOAT: return false;
  case KN_E_VAR: return e->u.var == v;
  case KN_E_LOAD:
    if (e->u.load.buffer) return kn_e_uses_var(e->u.load.index, v);
    for (int i = 0; i < e->u.load.n; i++)
      if (kn_e_uses_var(e->u.load.indices[i], v)) return true;
    return false;
  case KN_E_NOT:
  case KN_E_CAST:
  case KN_E_BROADCAST: return kn_e_uses_var(e->u.un.a, v);
  case KN_E_RAMP: return kn_e_uses_var(e->u.ramp.base, v) || kn_e_uses_var(e->u.ramp.stride, v);
  case KN_E_SELECT: return kn_e_uses_var(e->u.sel.cond, v) || kn_e_uses_var(e->u.sel.t, v) || kn_e_uses_var(e->u.sel.f, v);
  case KN_E_CALL:
    for (int i = 0; i < e->u.call.n; i++)
      if (kn_e_uses_var(e->u.call.args[i], v)) return true;
    return false;
  case KN_E_REDUCE: return true;
  default: return kn_e_uses_var(e->u.bin.a, v) || kn_e_uses_var(e->u.bin.b, v);
  }
}

bool kn_e_is_const_int(const kn_expr *e, int64_t *value) {
  if (e->kind != KN_E_INT) return false;
  if (value) *value = e->u.ival;
  return true;
}

bool kn_alpha_pairs(const kn_alpha *m, const void *a, const void *b) {
  for (int i = m ? m->n - 1 : -1; i >= 0; i--) {
    if (m->a[i] == a) return m->b[i] == b;
    if (m->b[i] == b) return false; /* b is paired with another of a's */
  }
  return a == b;
}

bool kn_e_equal_under(const kn_expr *a, const kn_expr *b, const kn_alpha *m) {
  if (a == b && !m) return true;
  if (!a || !b || a->kind != b->kind || a->dtype != b->dtype || a->lanes != b->lanes) return false;
  switch (a->kind) {
  case KN_E_INT: return a->u.ival == b->u.ival;
  case KN_E_FLOAT: /* up to renaming (two kernels), the same bits: -0 is not 0 */
    if (m) return !memcmp(&a->u.fval, &b->u.fval, sizeof a->u.fval);
    return a->u.fval == b->u.fval || (isnan(a->u.fval) && isnan(b->u.fval));
  case KN_E_VAR: return kn_alpha_pairs(m, a->u.var, b->u.var);
  case KN_E_NOT:
  case KN_E_CAST:
  case KN_E_BROADCAST: return kn_e_equal_under(a->u.un.a, b->u.un.a, m);
  case KN_E_SELECT:
    return kn_e_equal_under(a->u.sel.cond, b->u.sel.cond, m) && kn_e_equal_under(a->u.sel.t, b->u.sel.t, m) &&
           kn_e_equal_under(a->u.sel.f, b->u.sel.f, m);
  case KN_E_CALL:
    if (a->u.call.fn != b->u.call.fn || a->u.call.n != b->u.call.n) return false;
    for (int i = 0; i < a->u.call.n; i++)
      if (!kn_e_equal_under(a->u.call.args[i], b->u.call.args[i], m)) return false;
    return true;
  case KN_E_LOAD:
    if (!a->u.load.buffer != !b->u.load.buffer || a->u.load.tensor != b->u.load.tensor) return false;
    if (a->u.load.buffer)
      return kn_alpha_pairs(m, a->u.load.buffer, b->u.load.buffer) &&
             kn_e_equal_under(a->u.load.index, b->u.load.index, m);
    for (int i = 0; i < a->u.load.n; i++)
      if (!kn_e_equal_under(a->u.load.indices[i], b->u.load.indices[i], m)) return false;
    return true;
  case KN_E_RAMP:
    return kn_e_equal_under(a->u.ramp.base, b->u.ramp.base, m) &&
           kn_e_equal_under(a->u.ramp.stride, b->u.ramp.stride, m);
  case KN_E_REDUCE: return false; /* reductions are never merged */
  default: return kn_e_equal_under(a->u.bin.a, b->u.bin.a, m) && kn_e_equal_under(a->u.bin.b, b->u.bin.b, m);
  }
}

bool kn_e_equal(const kn_expr *a, const kn_expr *b) { return kn_e_equal_under(a, b, NULL); }

kn_expr *kn_e_substitute(kn_expr_ctx *c, kn_expr *e, const kn_var *var, kn_expr *value) {
  switch (e->kind) {
  case KN_E_INT:
  case KN_E_FLOAT: return e;
  case KN_E_VAR: return e->u.var == var ? value : e;
  case KN_E_NOT: {
    kn_expr *a = kn_e_substitute(c, e->u.un.a, var, value);
    return a == e->u.un.a ? e : kn_e_not(c, a);
  }
  case KN_E_CAST: {
    kn_expr *a = kn_e_substitute(c, e->u.un.a, var, value);
    return a == e->u.un.a ? e : kn_e_cast(c, e->dtype, a);
  }
  case KN_E_BROADCAST: {
    kn_expr *a = kn_e_substitute(c, e->u.un.a, var, value);
    if (a == e->u.un.a) return e;
    return a->lanes == 1 ? kn_e_broadcast(c, a, e->lanes) : a;
  }
  case KN_E_SELECT: {
    kn_expr *k = kn_e_substitute(c, e->u.sel.cond, var, value);
    kn_expr *t = kn_e_substitute(c, e->u.sel.t, var, value);
    kn_expr *f = kn_e_substitute(c, e->u.sel.f, var, value);
    if (k == e->u.sel.cond && t == e->u.sel.t && f == e->u.sel.f) return e;
    return kn_e_select(c, k, t, f);
  }
  case KN_E_CALL: {
    kn_expr *args[4];
    bool changed = false;
    for (int i = 0; i < e->u.call.n; i++) {
      args[i] = kn_e_substitute(c, e->u.call.args[i], var, value);
      changed |= args[i] != e->u.call.args[i];
    }
    return changed ? kn_e_call(c, e->u.call.fn, args, e->u.call.n) : e;
  }
  case KN_E_LOAD: {
    if (e->u.load.buffer) {
      kn_expr *i = kn_e_substitute(c, e->u.load.index, var, value);
      return i == e->u.load.index ? e : kn_e_load(c, e->u.load.buffer, i);
    }
    kn_expr *idx[KN_TE_MAX_RANK];
    bool changed = false;
    for (int i = 0; i < e->u.load.n; i++) {
      idx[i] = kn_e_substitute(c, e->u.load.indices[i], var, value);
      changed |= idx[i] != e->u.load.indices[i];
    }
    return changed ? kn_e_tload(c, e->u.load.tensor, idx, e->u.load.n) : e;
  }
  case KN_E_RAMP: {
    kn_expr *b = kn_e_substitute(c, e->u.ramp.base, var, value);
    kn_expr *s = kn_e_substitute(c, e->u.ramp.stride, var, value);
    if (b == e->u.ramp.base && s == e->u.ramp.stride) return e;
    return kn_e_ramp(c, b, s, e->lanes);
  }
  case KN_E_REDUCE: {
    kn_expr *s = kn_e_substitute(c, e->u.reduce.source, var, value);
    if (s == e->u.reduce.source) return e;
    return kn_e_reduce(c, e->u.reduce.op, e->u.reduce.axes, e->u.reduce.extents,
                       e->u.reduce.n_axes, s);
  }
  default: {
    kn_expr *a = kn_e_substitute(c, e->u.bin.a, var, value);
    kn_expr *b = kn_e_substitute(c, e->u.bin.b, var, value);
    if (a == e->u.bin.a && b == e->u.bin.b) return e;
    return kn_e_bin(c, e->kind, a, b);
  }
  }
}

kn_expr *kn_e_map_loads(kn_expr_ctx *c, kn_expr *e, kn_load_map_fn fn, void *ctx) {
  switch (e->kind) {
  case KN_E_INT:
  case KN_E_FLOAT:
  case KN_E_VAR: return e;
  case KN_E_LOAD: {
    if (!e->u.load.tensor) return e;
    kn_expr *idx[KN_TE_MAX_RANK];
    for (int i = 0; i < e->u.load.n; i++) idx[i] = kn_e_map_loads(c, e->u.load.indices[i], fn, ctx);
    return fn(c, kn_e_tload(c, e->u.load.tensor, idx, e->u.load.n), ctx);
  }
  case KN_E_NOT: return kn_e_not(c, kn_e_map_loads(c, e->u.un.a, fn, ctx));
  case KN_E_CAST: return kn_e_cast(c, e->dtype, kn_e_map_loads(c, e->u.un.a, fn, ctx));
  case KN_E_BROADCAST: return kn_e_broadcast(c, kn_e_map_loads(c, e->u.un.a, fn, ctx), e->lanes);
  case KN_E_RAMP:
    return kn_e_ramp(c, kn_e_map_loads(c, e->u.ramp.base, fn, ctx), kn_e_map_loads(c, e->u.ramp.stride, fn, ctx),
                     e->lanes);
  case KN_E_SELECT:
    return kn_e_select(c, kn_e_map_loads(c, e->u.sel.cond, fn, ctx), kn_e_map_loads(c, e->u.sel.t, fn, ctx),
                       kn_e_map_loads(c, e->u.sel.f, fn, ctx));
  case KN_E_CALL: {
    kn_expr *args[4];
    for (int i = 0; i < e->u.call.n; i++) args[i] = kn_e_map_loads(c, e->u.call.args[i], fn, ctx);
    return kn_e_call(c, e->u.call.fn, args, e->u.call.n);
  }
  case KN_E_REDUCE:
    return kn_e_reduce(c, e->u.reduce.op, e->u.reduce.axes, e->u.reduce.extents, e->u.reduce.n_axes,
                       kn_e_map_loads(c, e->u.reduce.source, fn, ctx));
  default:
    return kn_e_bin(c, e->kind, kn_e_map_loads(c, e->u.bin.a, fn, ctx), kn_e_map_loads(c, e->u.bin.b, fn, ctx));
  }
}

static const char *bin_symbol(kn_expr_kind k) {
  switch (k) {
  case KN_E_ADD: return "+";
  case KN_E_SUB: return "-";
  case KN_E_MUL: return "*";
  case KN_E_DIV: return "/";
  case KN_E_MOD: return "%";
  case KN_E_EQ: return "==";
  case KN_E_NE: return "!=";
  case KN_E_LT: return "<";
  case KN_E_LE: return "<=";
  case KN_E_GT: return ">";
  case KN_E_GE: return ">=";
  case KN_E_AND: return "&&";
  case KN_E_OR: return "||";
  default: return NULL;
  }
}

void kn_expr_print(const kn_expr *e, FILE *out) {
  if (!e) {
    fputs("<null>", out);
    return;
  }
  switch (e->kind) {
  case KN_E_INT:
    if (e->dtype == KN_DT_I64)
      fprintf(out, "%lld", (long long)e->u.ival);
    else
      fprintf(out, "%s(%lld)", kn_dtype_name(e->dtype), (long long)e->u.ival);
    return;
  case KN_E_FLOAT:
    fprintf(out, "%.9g%s", e->u.fval, e->dtype == KN_DT_F32 ? "f" : "");
    return;
  case KN_E_VAR: fprintf(out, "%s", e->u.var->name); return;
  case KN_E_MIN:
  case KN_E_MAX:
    fprintf(out, "%s(", e->kind == KN_E_MIN ? "min" : "max");
    kn_expr_print(e->u.bin.a, out);
    fputs(", ", out);
    kn_expr_print(e->u.bin.b, out);
    fputc(')', out);
    return;
  case KN_E_NOT:
    fputs("!", out);
    kn_expr_print(e->u.un.a, out);
    return;
  case KN_E_SELECT:
    fputs("select(", out);
    kn_expr_print(e->u.sel.cond, out);
    fputs(", ", out);
    kn_expr_print(e->u.sel.t, out);
    fputs(", ", out);
    kn_expr_print(e->u.sel.f, out);
    fputc(')', out);
    return;
  case KN_E_CAST:
    fprintf(out, "%s", kn_dtype_name(e->dtype));
    if (e->lanes > 1) fprintf(out, "x%d", e->lanes);
    fputc('(', out);
    kn_expr_print(e->u.un.a, out);
    fputc(')', out);
    return;
  case KN_E_CALL:
    fprintf(out, "%s(", kn_fn_name(e->u.call.fn));
    for (int i = 0; i < e->u.call.n; i++) {
      if (i) fputs(", ", out);
      kn_expr_print(e->u.call.args[i], out);
    }
    fputc(')', out);
    return;
  case KN_E_LOAD:
    if (e->u.load.buffer) {
      fprintf(out, "%s[", e->u.load.buffer->name);
      kn_expr_print(e->u.load.index, out);
    } else {
      fprintf(out, "%s[", e->u.load.tensor->name);
      for (int i = 0; i < e->u.load.n; i++) {
        if (i) fputs(", ", out);
        kn_expr_print(e->u.load.indices[i], out);
      }
    }
    fputc(']', out);
    return;
  case KN_E_RAMP:
    fputs("ramp(", out);
    kn_expr_print(e->u.ramp.base, out);
    fputs(", ", out);
    kn_expr_print(e->u.ramp.stride, out);
    fprintf(out, ", %d)", e->lanes);
    return;
  case KN_E_BROADCAST:
    fputs("x", out);
    fprintf(out, "%d(", e->lanes);
    kn_expr_print(e->u.un.a, out);
    fputc(')', out);
    return;
  case KN_E_REDUCE: {
    static const char *names[] = {"sum", "max", "min", "prod"};
    fprintf(out, "%s(", names[e->u.reduce.op]);
    kn_expr_print(e->u.reduce.source, out);
    fputs(", axes=[", out);
    for (int i = 0; i < e->u.reduce.n_axes; i++) {
      if (i) fputs(", ", out);
      fprintf(out, "%s:", e->u.reduce.axes[i]->name);
      kn_expr_print(e->u.reduce.extents[i], out);
    }
    fputs("])", out);
    return;
  }
  default:
    fputc('(', out);
    kn_expr_print(e->u.bin.a, out);
    fprintf(out, " %s ", bin_symbol(e->kind));
    kn_expr_print(e->u.bin.b, out);
    fputc(')', out);
    return;
  }
}
