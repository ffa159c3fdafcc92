/* loop_eval.c — a slow, obviously-correct interpreter of the loop IR.
 *
 * Used by tests to check lowering and finalization (every schedule) against
 * the naive TE interpreter without going through LLVM. Values are held per
 * lane as double (floats) or int64 (integers, bool); float32 results are
 * rounded to float after each operation so results match compiled code up to
 * the order of operations. */
#include "ir/loop/loop_eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAXL 64

typedef struct val {
  int lanes;
  bool is_float;
  double f[MAXL];
  int64_t i[MAXL];
} val;

typedef struct binding {
  const void *key; /* kn_var* or kn_buffer* */
  val v;
  void *mem;
} binding;

typedef struct ev {
  const kn_kernel *k;
  void *const *args;
  int64_t batch;
  binding *b;
  int n, cap;
} ev;

static binding *lookup(ev *e, const void *key) {
  for (int i = e->n - 1; i >= 0; i--)
    if (e->b[i].key == key) return &e->b[i];
  return NULL;
}

static binding *push(ev *e, const void *key) {
  if (e->n == e->cap) {
    e->cap = e->cap ? e->cap * 2 : 64;
    e->b = realloc(e->b, sizeof(binding) * (size_t)e->cap);
    KN_ASSERT(e->b, "out of memory");
  }
  binding *b = &e->b[e->n++];
  memset(b, 0, sizeof *b);
  b->key = key;
  return b;
}

static double round_to(kn_dtype t, double x) {
  if (kn_dtype_is_f8(t)) return kn_f8_to_f32(t, kn_f32_to_f8(t, (float)x));
  return t == KN_DT_F32 ? (double)(float)x : x;
}

static double read_f(kn_dtype t, const void *p, int64_t i) {
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

static int64_t read_i(kn_dtype t, const void *p, int64_t i) {
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

static void write_elem(kn_dtype t, void *p, int64_t i, const val *v, int lane) {
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

static void *buffer_mem(ev *e, const kn_buffer *buf) {
  for (int p = 0; p < e->k->n_params; p++)
    if (e->k->params[p] == buf) return e->args[p];
  binding *b = lookup(e, buf);
  KN_ASSERT(b && b->mem, "buffer used outside its allocation");
  return b->mem;
}

static val eval(ev *e, const kn_expr *x);

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

static val eval(ev *e, const kn_expr *x) {
  val r;
  memset(&r, 0, sizeof r);
  r.lanes = x->lanes;
  r.is_float = kn_dtype_is_float(x->dtype);
  KN_ASSERT(x->lanes <= MAXL, "too many lanes for the interpreter");
  switch (x->kind) {
  case KN_E_INT: r.i[0] = x->u.ival; return r;
  case KN_E_FLOAT: r.f[0] = round_to(x->dtype, x->u.fval); return r;
  case KN_E_VAR: {
    if (e->k->batch && x->u.var == e->k->batch) {
      r.i[0] = e->batch;
      return r;
    }
    binding *b = lookup(e, x->u.var);
    KN_ASSERT(b, "unbound variable");
    return b->v;
  }
  case KN_E_BROADCAST: {
    val a = eval(e, x->u.un.a);
    for (int l = 0; l < x->lanes; l++) {
      r.f[l] = a.f[0];
      r.i[l] = a.i[0];
    }
    return r;
  }
  case KN_E_RAMP: {
    val b = eval(e, x->u.ramp.base), s = eval(e, x->u.ramp.stride);
    for (int l = 0; l < x->lanes; l++) r.i[l] = b.i[0] + l * s.i[0];
    return r;
  }
  case KN_E_LOAD: {
    val idx = eval(e, x->u.load.index);
    void *mem = buffer_mem(e, x->u.load.buffer);
    for (int l = 0; l < x->lanes; l++) {
      if (r.is_float)
        r.f[l] = read_f(x->dtype, mem, idx.i[l]);
      else
        r.i[l] = read_i(x->dtype, mem, idx.i[l]);
    }
    return r;
  }
  case KN_E_NOT: {
    val a = eval(e, x->u.un.a);
    for (int l = 0; l < x->lanes; l++) r.i[l] = !a.i[l];
    return r;
  }
  case KN_E_CAST: {
    val a = eval(e, x->u.un.a);
    for (int l = 0; l < x->lanes; l++) {
      if (r.is_float)
        r.f[l] = round_to(x->dtype, a.is_float ? a.f[l] : (double)a.i[l]);
      else if (x->dtype == KN_DT_BOOL)
        r.i[l] = a.is_float ? a.f[l] != 0 : a.i[l] != 0;
      else {
        val tmp = {.lanes = 1};
        tmp.i[0] = a.is_float ? kn_f2int_sat(x->dtype, a.f[l]) : a.i[l];
        uint64_t buf = 0; /* wrap to the target width like a C conversion */
        write_elem(x->dtype, &buf, 0, &tmp, 0);
        r.i[l] = read_i(x->dtype, &buf, 0);
      }
    }
    return r;
  }
  case KN_E_SELECT: {
    val c = eval(e, x->u.sel.cond), t = eval(e, x->u.sel.t), f = eval(e, x->u.sel.f);
    for (int l = 0; l < x->lanes; l++) {
      bool k = c.i[c.lanes == 1 ? 0 : l] != 0;
      r.f[l] = k ? t.f[l] : f.f[l];
      r.i[l] = k ? t.i[l] : f.i[l];
    }
    return r;
  }
  case KN_E_CALL: {
    val a[3];
    for (int i = 0; i < x->u.call.n; i++) a[i] = eval(e, x->u.call.args[i]);
    kn_fn fn = x->u.call.fn;
    if (fn == KN_FN_VREDUCE_ADD || fn == KN_FN_VREDUCE_MAX || fn == KN_FN_VREDUCE_MIN) {
      double acc = a[0].f[0];
      for (int l = 1; l < a[0].lanes; l++)
        acc = fn == KN_FN_VREDUCE_ADD ? acc + a[0].f[l] : fn == KN_FN_VREDUCE_MAX ? kn_max_nan(acc, a[0].f[l]) : kn_min_nan(acc, a[0].f[l]);
      r.f[0] = round_to(x->dtype, acc);
      return r;
    }
    for (int l = 0; l < x->lanes; l++) {
      if (r.is_float) {
        r.f[l] = round_to(x->dtype, call_fn(fn, a[0].f[l], x->u.call.n > 1 ? a[1].f[l] : 0,
                                            x->u.call.n > 2 ? a[2].f[l] : 0));
      } else {
        KN_ASSERT(fn == KN_FN_ABS, "integer intrinsic");
        r.i[l] = a[0].i[l] < 0 ? -a[0].i[l] : a[0].i[l];
      }
    }
    return r;
  }
  case KN_E_REDUCE: KN_UNREACHABLE("reduce in loop IR"); return r;
  default: {
    val a = eval(e, x->u.bin.a), b = eval(e, x->u.bin.b);
    bool fl = a.is_float;
    for (int l = 0; l < x->lanes; l++) {
      double p = a.f[l], q = b.f[l];
      int64_t m = a.i[l], n = b.i[l];
      switch (x->kind) {
      case KN_E_ADD: fl ? (r.f[l] = p + q) : (r.i[l] = (int64_t)((uint64_t)m + (uint64_t)n)); break;
      case KN_E_SUB: fl ? (r.f[l] = p - q) : (r.i[l] = (int64_t)((uint64_t)m - (uint64_t)n)); break;
      case KN_E_MUL: fl ? (r.f[l] = p * q) : (r.i[l] = (int64_t)((uint64_t)m * (uint64_t)n)); break;
      case KN_E_DIV: fl ? (r.f[l] = p / q) : (r.i[l] = kn_floordiv_i64(m, n)); break;
      case KN_E_MOD: fl ? (r.f[l] = fmod(p, q)) : (r.i[l] = kn_floormod_i64(m, n)); break;
      case KN_E_MIN: fl ? (r.f[l] = kn_min_nan(p, q)) : (r.i[l] = m < n ? m : n); break;
      case KN_E_MAX: fl ? (r.f[l] = kn_max_nan(p, q)) : (r.i[l] = m > n ? m : n); break;
      case KN_E_EQ: r.i[l] = fl ? p == q : m == n; break;
      case KN_E_NE: r.i[l] = fl ? p != q : m != n; break;
      case KN_E_LT: r.i[l] = fl ? p < q : m < n; break;
      case KN_E_LE: r.i[l] = fl ? p <= q : m <= n; break;
      case KN_E_GT: r.i[l] = fl ? p > q : m > n; break;
      case KN_E_GE: r.i[l] = fl ? p >= q : m >= n; break;
      case KN_E_AND: r.i[l] = m & n; break; /* bool 0/1 or bitwise */
      case KN_E_OR: r.i[l] = m | n; break;
      default: KN_UNREACHABLE("bad binary op");
      }
      if (r.is_float) r.f[l] = round_to(x->dtype, r.f[l]);
    }
    return r;
  }
  }
}

static void exec(ev *e, const kn_stmt *s, int64_t task, int64_t ntasks, bool *split) {
  if (!s) return;
  switch (s->kind) {
  case KN_S_FOR: {
    int64_t lo = eval(e, s->u.loop.min).i[0], ext = eval(e, s->u.loop.extent).i[0];
    int64_t begin = 0, end = ext;
    if (s->u.loop.kind == KN_FOR_PARALLEL && !*split) {
      *split = true;
      begin = task * ext / ntasks;
      end = (task + 1) * ext / ntasks;
    }
    int mark = e->n;
    binding *b = push(e, s->u.loop.var);
    b->v.lanes = 1;
    for (int64_t i = begin; i < end; i++) {
      e->b[mark].v.i[0] = lo + i;
      exec(e, s->u.loop.body, task, ntasks, split);
    }
    e->n = mark;
    return;
  }
  case KN_S_STORE: {
    val idx = eval(e, s->u.store.index), v = eval(e, s->u.store.value);
    void *mem = buffer_mem(e, s->u.store.buffer);
    for (int l = 0; l < idx.lanes; l++) write_elem(s->u.store.buffer->dtype, mem, idx.i[l], &v, v.lanes == 1 ? 0 : l);
    return;
  }
  case KN_S_ALLOC: {
    int mark = e->n;
    const kn_buffer *buf = s->u.alloc.buffer;
    void *mem = calloc((size_t)(buf->size > 0 ? buf->size : 1), 8);
    KN_ASSERT(mem, "out of memory");
    push(e, buf)->mem = mem;
    exec(e, s->u.alloc.body, task, ntasks, split);
    e->n = mark;
    free(mem);
    return;
  }
  case KN_S_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) exec(e, s->u.seq.stmts[i], task, ntasks, split);
    return;
  case KN_S_IF:
    if (eval(e, s->u.ifs.cond).i[0])
      exec(e, s->u.ifs.then_s, task, ntasks, split);
    else
      exec(e, s->u.ifs.else_s, task, ntasks, split);
    return;
  case KN_S_LET: {
    val v = eval(e, s->u.let.value);
    int mark = e->n;
    push(e, s->u.let.var)->v = v;
    exec(e, s->u.let.body, task, ntasks, split);
    e->n = mark;
    return;
  }
  case KN_S_PREFETCH: { /* a hint: no value changes, but it must stay inside its buffer */
    int64_t i = eval(e, s->u.prefetch.index).i[0], size = s->u.prefetch.buffer->size;
    KN_ASSERT(i >= 0 && (size <= 0 || i < size), "prefetch outside its buffer");
    return;
  }
  case KN_S_GPU: KN_UNREACHABLE("GPU statement: run GPU kernels with kn_gpu_eval");
  }
}

void kn_loop_eval(const kn_kernel *k, void *const *args, int64_t batch, int64_t ntasks) {
  ev e = {.k = k, .args = args, .batch = batch};
  if (!k->parallel) ntasks = 1;
  for (int64_t t = 0; t < ntasks; t++) {
    bool split = false;
    exec(&e, k->body, t, ntasks, &split);
  }
  free(e.b);
}
