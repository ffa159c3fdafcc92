/* te_eval.c — the naive TE interpreter (see te_eval.h for the semantics).
 *
 * State: a stack of variable bindings (compute axes, reduction axes) where
 * each materialised tensor opens a fresh scope, so a body can only see its
 * own axes; a cache of materialised compute tensors; the batch variable,
 * found by a first walk over shapes and reduction extents. Errors set a
 * flag and a diagnostic; evaluation then unwinds with dummy values. */
#include "ir/te/te_eval.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct val {
  double f;  /* float dtypes */
  int64_t i; /* integer and bool dtypes */
} val;

typedef struct entry {
  const kn_te_tensor *t;
  int64_t ext[KN_TE_MAX_RANK];
  int64_t numel;
  val *data; /* computes, once materialised */
  int state; /* 0 new, 1 being materialised, 2 done */
} entry;

typedef struct binding {
  const kn_var *var;
  int64_t value;
} binding;

typedef struct ev {
  const void *const *ph;
  int64_t batch;
  const kn_var *batch_var;
  kn_diag *d;
  bool failed;
  binding *bind;
  int nbind, capbind, scope; /* lookups see bind[scope..nbind) */
  entry *ents;
  int nents, capents;
  /* first walk */
  const kn_te_tensor **seen;
  int nseen, capseen;
} ev;

static void fail(ev *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(ev *s, const char *fmt, ...) {
  if (!s->failed) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    kn_diag_error(s->d, "te_eval: %s", buf);
  }
  s->failed = true;
}

static void *grow(void *p, int *cap, int need, size_t elem) {
  if (need <= *cap) return p;
  int nc = *cap ? *cap * 2 : 32;
  while (nc < need) nc *= 2;
  p = realloc(p, elem * (size_t)nc);
  KN_ASSERT(p, "out of memory");
  *cap = nc;
  return p;
}

/* ---- first walk: find the batch variable ---- */

static void walk_tensor(ev *s, const kn_te_tensor *t);

static void walk_expr(ev *s, const kn_expr *e, bool size) {
  if (!e || s->failed) return;
  switch (e->kind) {
  case KN_E_INT:
  case KN_E_FLOAT: return;
  case KN_E_VAR:
    if (!size) return;
    if (s->batch_var && s->batch_var != e->u.var)
      fail(s, "two free size variables ('%s' and another)", e->u.var->name);
    s->batch_var = e->u.var;
    return;
  case KN_E_NOT:
  case KN_E_CAST:
  case KN_E_BROADCAST: walk_expr(s, e->u.un.a, size); return;
  case KN_E_SELECT:
    walk_expr(s, e->u.sel.cond, size);
    walk_expr(s, e->u.sel.t, size);
    walk_expr(s, e->u.sel.f, size);
    return;
  case KN_E_CALL:
    for (int i = 0; i < e->u.call.n; i++) walk_expr(s, e->u.call.args[i], size);
    return;
  case KN_E_LOAD:
    if (!e->u.load.tensor) return; /* reported by the evaluation */
    for (int i = 0; i < e->u.load.n; i++) walk_expr(s, e->u.load.indices[i], size);
    walk_tensor(s, e->u.load.tensor);
    return;
  case KN_E_RAMP: return;
  case KN_E_REDUCE:
    for (int i = 0; i < e->u.reduce.n_axes; i++) walk_expr(s, e->u.reduce.extents[i], true);
    walk_expr(s, e->u.reduce.source, size);
    return;
  default:
    walk_expr(s, e->u.bin.a, size);
    walk_expr(s, e->u.bin.b, size);
    return;
  }
}

static void walk_tensor(ev *s, const kn_te_tensor *t) {
  for (int i = 0; i < s->nseen; i++)
    if (s->seen[i] == t) return;
  s->seen = grow(s->seen, &s->capseen, s->nseen + 1, sizeof *s->seen);
  s->seen[s->nseen++] = t;
  for (int i = 0; i < t->rank; i++) walk_expr(s, t->shape[i], true);
  if (t->kind == KN_TE_COMPUTE) walk_expr(s, t->body, false);
}

/* ---- values ---- */

static bool is_float(kn_dtype t) { return kn_dtype_is_float(t); }

/* Rounds a double to what dtype t can hold. */
static double round_float(kn_dtype t, double x) {
  switch (t) {
  case KN_DT_F32:
    if (isfinite(x) && fabs(x) > FLT_MAX) return x > 0 ? INFINITY : -INFINITY;
    return (float)x;
  case KN_DT_F16: return kn_f16_to_f32(kn_f32_to_f16((float)round_float(KN_DT_F32, x)));
  case KN_DT_BF16: return kn_bf16_to_f32(kn_f32_to_bf16((float)round_float(KN_DT_F32, x)));
  default:
    if (kn_dtype_is_f8(t)) return kn_f8_to_f32(t, kn_f32_to_f8(t, (float)round_float(KN_DT_F32, x)));
    return x;
  }
}

/* Wraps an integer to dtype t (two's complement); bool is 0/1. */
static int64_t wrap_int(kn_dtype t, uint64_t u) {
  switch (t) {
  case KN_DT_I8: return (int8_t)(uint8_t)u;
  case KN_DT_U8: return (uint8_t)u;
  case KN_DT_I2:
  case KN_DT_I4:
  case KN_DT_U2:
  case KN_DT_U4: return kn_subbyte_wrap(t, (int64_t)u);
  case KN_DT_I16: return (int16_t)(uint16_t)u;
  case KN_DT_U16: return (uint16_t)u;
  case KN_DT_I32: return (int32_t)(uint32_t)u;
  case KN_DT_U32: return (uint32_t)u;
  case KN_DT_BOOL: return u != 0;
  default: return (int64_t)u;
  }
}

static val mk(kn_dtype t, double f, int64_t i) {
  val v = {0, 0};
  if (is_float(t))
    v.f = round_float(t, f);
  else
    v.i = wrap_int(t, (uint64_t)i);
  return v;
}

static val convert(kn_dtype to, kn_dtype from, val a) {
  if (is_float(to)) return mk(to, is_float(from) ? a.f : (double)a.i, 0);
  if (to == KN_DT_BOOL) return mk(to, 0, is_float(from) ? a.f != 0 : a.i != 0);
  return mk(to, 0, is_float(from) ? kn_f2int_sat(to, a.f) : a.i);
}

static val load_raw(kn_dtype t, const void *p, int64_t i) {
  val v = {0, 0};
  switch (t) {
  case KN_DT_F32: v.f = ((const float *)p)[i]; break;
  case KN_DT_F64: v.f = ((const double *)p)[i]; break;
  case KN_DT_F16: v.f = kn_f16_to_f32(((const uint16_t *)p)[i]); break;
  case KN_DT_BF16: v.f = kn_bf16_to_f32(((const uint16_t *)p)[i]); break;
  case KN_DT_I8:
  case KN_DT_I2:
  case KN_DT_I4: v.i = ((const int8_t *)p)[i]; break;
  case KN_DT_U8:
  case KN_DT_U2:
  case KN_DT_U4: v.i = ((const uint8_t *)p)[i]; break;
  case KN_DT_BOOL: v.i = ((const uint8_t *)p)[i] != 0; break;
  case KN_DT_I16: v.i = ((const int16_t *)p)[i]; break;
  case KN_DT_U16: v.i = ((const uint16_t *)p)[i]; break;
  case KN_DT_I32: v.i = ((const int32_t *)p)[i]; break;
  case KN_DT_U32: v.i = ((const uint32_t *)p)[i]; break;
  case KN_DT_I64: v.i = ((const int64_t *)p)[i]; break;
  case KN_DT_U64: v.i = (int64_t)((const uint64_t *)p)[i]; break;
  default:
    if (kn_dtype_is_f8(t)) v.f = kn_f8_to_f32(t, ((const uint8_t *)p)[i]);
    break;
  }
  return v;
}

static void store_raw(kn_dtype t, void *p, int64_t i, val v) {
  switch (t) {
  case KN_DT_F32: ((float *)p)[i] = (float)v.f; break;
  case KN_DT_F64: ((double *)p)[i] = v.f; break;
  case KN_DT_F16: ((uint16_t *)p)[i] = kn_f32_to_f16((float)v.f); break;
  case KN_DT_BF16: ((uint16_t *)p)[i] = kn_f32_to_bf16((float)v.f); break;
  case KN_DT_I8: ((int8_t *)p)[i] = (int8_t)v.i; break;
  case KN_DT_U8: ((uint8_t *)p)[i] = (uint8_t)v.i; break;
  case KN_DT_I2:
  case KN_DT_I4:
  case KN_DT_U2:
  case KN_DT_U4: ((int8_t *)p)[i] = (int8_t)kn_subbyte_wrap(t, v.i); break;
  case KN_DT_BOOL: ((uint8_t *)p)[i] = v.i != 0; break;
  case KN_DT_I16: ((int16_t *)p)[i] = (int16_t)v.i; break;
  case KN_DT_U16: ((uint16_t *)p)[i] = (uint16_t)v.i; break;
  case KN_DT_I32: ((int32_t *)p)[i] = (int32_t)v.i; break;
  case KN_DT_U32: ((uint32_t *)p)[i] = (uint32_t)v.i; break;
  case KN_DT_I64: ((int64_t *)p)[i] = v.i; break;
  case KN_DT_U64: ((uint64_t *)p)[i] = (uint64_t)v.i; break;
  default:
    if (kn_dtype_is_f8(t)) ((uint8_t *)p)[i] = kn_f32_to_f8(t, (float)v.f);
    break;
  }
}

/* ---- evaluation ---- */

static val eval(ev *s, const kn_expr *e);

static void push(ev *s, const kn_var *v, int64_t x) {
  s->bind = grow(s->bind, &s->capbind, s->nbind + 1, sizeof *s->bind);
  s->bind[s->nbind++] = (binding){v, x};
}

static int64_t lookup(ev *s, const kn_var *v) {
  for (int i = s->nbind - 1; i >= s->scope; i--)
    if (s->bind[i].var == v) return s->bind[i].value;
  if (v == s->batch_var) return s->batch;
  fail(s, "variable '%s' used outside its scope", v->name);
  return 0;
}

/* A size expression (shape or extent) as a non-negative integer. */
static int64_t eval_size(ev *s, const kn_expr *e, const char *what) {
  if (e->dtype != KN_DT_I64) {
    fail(s, "%s extent is not int64", what);
    return 0;
  }
  int64_t x = eval(s, e).i;
  if (x < 0) fail(s, "%s has a negative extent %lld", what, (long long)x);
  return x < 0 ? 0 : x;
}

static void materialise(ev *s, entry *en);

/* The cache entry of t (extents evaluated in an empty scope). */
static int entry_of(ev *s, const kn_te_tensor *t) {
  for (int i = 0; i < s->nents; i++)
    if (s->ents[i].t == t) return i;
  int saved = s->scope;
  s->scope = s->nbind;
  entry en = {.t = t, .numel = 1};
  for (int i = 0; i < t->rank; i++) {
    en.ext[i] = eval_size(s, t->shape[i], t->name);
    if (en.ext[i] && en.numel > INT64_MAX / 16 / en.ext[i]) {
      fail(s, "tensor '%s' too large", t->name);
      en.numel = 0;
    }
    en.numel *= en.ext[i];
  }
  s->scope = saved;
  s->ents = grow(s->ents, &s->capents, s->nents + 1, sizeof *s->ents);
  s->ents[s->nents] = en;
  return s->nents++;
}

static val eval_load(ev *s, const kn_expr *e) {
  const kn_te_tensor *t = e->u.load.tensor;
  if (!t) {
    fail(s, "loop-IR buffer load in a TE");
    return (val){0, 0};
  }
  int64_t idx[KN_TE_MAX_RANK];
  for (int i = 0; i < e->u.load.n; i++) idx[i] = eval(s, e->u.load.indices[i]).i;
  if (s->failed) return (val){0, 0};
  int k = entry_of(s, t);
  int64_t flat = 0;
  for (int i = 0; i < t->rank; i++) {
    int64_t ext = s->ents[k].ext[i];
    if (idx[i] < 0 || idx[i] >= ext) {
      fail(s, "load of '%s' out of bounds: dim %lld index %lld not in [0, extent %lld)", t->name,
           (long long)i, (long long)idx[i], (long long)ext);
      return (val){0, 0};
    }
    flat = flat * ext + idx[i];
  }
  if (t->kind == KN_TE_PLACEHOLDER) {
    const void *p = t->value >= 0 ? s->ph[t->value] : NULL;
    if (!p) {
      fail(s, "no data for placeholder '%s' (value %lld)", t->name, (long long)t->value);
      return (val){0, 0};
    }
    return load_raw(t->dtype, p, flat);
  }
  if (s->ents[k].state != 2) materialise(s, &s->ents[k]);
  if (s->failed) return (val){0, 0};
  return s->ents[k].data[flat]; /* ents may have moved: index again */
}

static val eval_reduce(ev *s, const kn_expr *e) {
  kn_dtype t = e->dtype;
  int n = e->u.reduce.n_axes;
  bool fl = is_float(t);
  kn_reduce_op op = e->u.reduce.op;
  val acc = {0, 0};
  switch (op) {
  case KN_RED_SUM: break;
  case KN_RED_PROD: acc = mk(t, 1, 1); break;
  case KN_RED_MAX: acc = fl ? (val){-INFINITY, 0} : (val){0, INT64_MIN}; break;
  case KN_RED_MIN: acc = fl ? (val){INFINITY, 0} : (val){0, INT64_MAX}; break;
  }
  int64_t ext[KN_TE_MAX_RANK * 2];
  if (n > KN_TE_MAX_RANK * 2) {
    fail(s, "reduction over too many axes");
    return acc;
  }
  for (int i = 0; i < n; i++) {
    ext[i] = eval_size(s, e->u.reduce.extents[i], "reduction");
    if (ext[i] == 0) return acc;
  }
  int base = s->nbind;
  for (int i = 0; i < n; i++) push(s, e->u.reduce.axes[i], 0);
  for (;;) {
    val v = eval(s, e->u.reduce.source);
    if (s->failed) break;
    if (fl) {
      double r = op == KN_RED_SUM    ? acc.f + v.f
                 : op == KN_RED_PROD ? acc.f * v.f
                 : op == KN_RED_MAX  ? kn_max_nan(acc.f, v.f)
                                     : kn_min_nan(acc.f, v.f);
      acc.f = round_float(t, r);
    } else {
      uint64_t a = (uint64_t)acc.i, b = (uint64_t)v.i;
      int64_t r = op == KN_RED_SUM    ? (int64_t)(a + b)
                  : op == KN_RED_PROD ? (int64_t)(a * b)
                  : op == KN_RED_MAX  ? (v.i > acc.i ? v.i : acc.i)
                                      : (v.i < acc.i ? v.i : acc.i);
      acc.i = wrap_int(t, (uint64_t)r);
    }
    int i = n - 1;
    while (i >= 0 && ++s->bind[base + i].value == ext[i]) s->bind[base + i--].value = 0;
    if (i < 0) break;
  }
  s->nbind = base;
  return acc;
}

static val eval_call(ev *s, const kn_expr *e) {
  kn_dtype t = e->dtype;
  val a[3];
  for (int i = 0; i < e->u.call.n && i < 3; i++) a[i] = eval(s, e->u.call.args[i]);
  kn_fn fn = e->u.call.fn;
  if (fn == KN_FN_VREDUCE_ADD || fn == KN_FN_VREDUCE_MAX || fn == KN_FN_VREDUCE_MIN) return a[0];
  if (!is_float(t)) {
    if (fn == KN_FN_ABS) return mk(t, 0, a[0].i < 0 ? (int64_t)(0 - (uint64_t)a[0].i) : a[0].i);
    fail(s, "intrinsic %s on integers", kn_fn_name(fn));
    return a[0];
  }
  double x = a[0].f, r;
  switch (fn) {
  case KN_FN_EXP: r = exp(x); break;
  case KN_FN_LOG: r = log(x); break;
  case KN_FN_SQRT: r = sqrt(x); break;
  case KN_FN_ERF: r = erf(x); break;
  case KN_FN_TANH: r = tanh(x); break;
  case KN_FN_SIGMOID: r = 1.0 / (1.0 + exp(-x)); break;
  case KN_FN_FLOOR: r = floor(x); break;
  case KN_FN_CEIL: r = ceil(x); break;
  case KN_FN_ROUND: r = nearbyint(x); break;
  case KN_FN_ABS: r = fabs(x); break;
  case KN_FN_SIN: r = sin(x); break;
  case KN_FN_COS: r = cos(x); break;
  case KN_FN_POW: r = pow(x, a[1].f); break;
  case KN_FN_FMA: r = fma(x, a[1].f, a[2].f); break;
  default: r = 0; fail(s, "intrinsic %s", kn_fn_name(fn));
  }
  return mk(t, r, 0);
}

static val eval_bin(ev *s, const kn_expr *e) {
  val a = eval(s, e->u.bin.a), b = eval(s, e->u.bin.b);
  kn_dtype ot = e->u.bin.a->dtype; /* operand dtype */
  kn_dtype t = e->dtype;
  bool fl = is_float(ot);
  switch (e->kind) {
  case KN_E_EQ: return mk(t, 0, fl ? a.f == b.f : a.i == b.i);
  case KN_E_NE: return mk(t, 0, fl ? a.f != b.f : a.i != b.i);
  case KN_E_LT: return mk(t, 0, fl ? a.f < b.f : a.i < b.i);
  case KN_E_LE: return mk(t, 0, fl ? a.f <= b.f : a.i <= b.i);
  case KN_E_GT: return mk(t, 0, fl ? a.f > b.f : a.i > b.i);
  case KN_E_GE: return mk(t, 0, fl ? a.f >= b.f : a.i >= b.i);
  case KN_E_AND: return mk(t, 0, a.i & b.i); /* bool 0/1 or bitwise */
  case KN_E_OR: return mk(t, 0, a.i | b.i);
  default: break;
  }
  if (fl) {
    double x = a.f, y = b.f, r;
    switch (e->kind) {
    case KN_E_ADD: r = x + y; break;
    case KN_E_SUB: r = x - y; break;
    case KN_E_MUL: r = x * y; break;
    case KN_E_DIV: r = x / y; break;
    case KN_E_MOD: r = fmod(x, y); break;
    case KN_E_MIN: r = kn_min_nan(x, y); break;
    default: r = kn_max_nan(x, y); break; /* MAX */
    }
    return mk(t, r, 0);
  }
  uint64_t x = (uint64_t)a.i, y = (uint64_t)b.i;
  int64_t r;
  switch (e->kind) {
  case KN_E_ADD: r = (int64_t)(x + y); break;
  case KN_E_SUB: r = (int64_t)(x - y); break;
  case KN_E_MUL: r = (int64_t)(x * y); break;
  case KN_E_DIV: r = kn_floordiv_i64(a.i, b.i); break;
  case KN_E_MOD: r = kn_floormod_i64(a.i, b.i); break;
  case KN_E_MIN: r = a.i < b.i ? a.i : b.i; break;
  default: r = a.i > b.i ? a.i : b.i; break; /* MAX */
  }
  return mk(t, 0, r);
}

static val eval(ev *s, const kn_expr *e) {
  if (s->failed) return (val){0, 0};
  if (e->lanes != 1) {
    fail(s, "vector expression in a TE");
    return (val){0, 0};
  }
  switch (e->kind) {
  case KN_E_INT: return mk(e->dtype, (double)e->u.ival, e->u.ival);
  case KN_E_FLOAT: return mk(e->dtype, e->u.fval, 0);
  case KN_E_VAR: return (val){0, lookup(s, e->u.var)};
  case KN_E_NOT: return (val){0, !eval(s, e->u.un.a).i};
  case KN_E_SELECT: {
    /* both arms: each must stay in bounds on its own */
    val c = eval(s, e->u.sel.cond), t = eval(s, e->u.sel.t), f = eval(s, e->u.sel.f);
    return c.i ? t : f;
  }
  case KN_E_CAST: return convert(e->dtype, e->u.un.a->dtype, eval(s, e->u.un.a));
  case KN_E_CALL: return eval_call(s, e);
  case KN_E_LOAD: return eval_load(s, e);
  case KN_E_REDUCE: return eval_reduce(s, e);
  case KN_E_RAMP:
  case KN_E_BROADCAST: fail(s, "vector expression in a TE"); return (val){0, 0};
  default: return eval_bin(s, e);
  }
}

/* Computes every element of a compute tensor into its cache entry. */
static void materialise(ev *s, entry *en) {
  const kn_te_tensor *t = en->t;
  int k = (int)(en - s->ents);
  if (en->state == 1) {
    fail(s, "tensor '%s' depends on itself", t->name);
    return;
  }
  if (!t->body) {
    fail(s, "compute '%s' without a body", t->name);
    return;
  }
  en->state = 1;
  int64_t numel = en->numel;
  val *data = calloc((size_t)(numel ? numel : 1), sizeof(val));
  KN_ASSERT(data, "out of memory");
  int saved_scope = s->scope, base = s->nbind;
  s->scope = base;
  for (int i = 0; i < t->rank; i++) push(s, t->axes[i], 0);
  for (int64_t flat = 0; flat < numel && !s->failed; flat++) {
    data[flat] = eval(s, t->body);
    int i = t->rank - 1;
    while (i >= 0 && ++s->bind[base + i].value == s->ents[k].ext[i]) s->bind[base + i--].value = 0;
  }
  s->nbind = base;
  s->scope = saved_scope;
  s->ents[k].data = data; /* s->ents may have been reallocated meanwhile */
  s->ents[k].state = 2;
}

int kn_te_eval(const kn_te_tensor *t, const void *const *placeholder_data, int64_t batch, void *out,
               kn_diag *d) {
  ev s = {.ph = placeholder_data, .batch = batch, .d = d};
  walk_tensor(&s, t);
  if (!s.failed) {
    int k = entry_of(&s, t);
    entry *en = &s.ents[k];
    if (!s.failed && t->kind == KN_TE_PLACEHOLDER) {
      const void *p = t->value >= 0 ? placeholder_data[t->value] : NULL;
      if (!p)
        fail(&s, "no data for placeholder '%s'", t->name);
      else
        memcpy(out, p, (size_t)en->numel * kn_dtype_size(t->dtype));
    } else if (!s.failed) {
      materialise(&s, en);
      en = &s.ents[k];
      if (!s.failed)
        for (int64_t i = 0; i < en->numel; i++) store_raw(t->dtype, out, i, en->data[i]);
    }
  }
  for (int i = 0; i < s.nents; i++) free(s.ents[i].data);
  free(s.ents);
  free(s.bind);
  free(s.seen);
  return s.failed ? -1 : 0;
}
