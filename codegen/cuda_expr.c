/* cuda_expr.c — scalar loop-IR expressions -> CUDA C, and the prelude of
 * helper device functions they call.
 *
 * Requires: scalar expressions (GPU schedules emit no vectors); a vector
 * node or a TE node is reported as unsupported, never emitted. Guarantees the semantics of the portable C back end
 * (codegen/c_emit.c), which the interpreters share:
 *  - integer DIV / MOD are floor division / modulo, x / 0 == x % 0 == 0, no
 *    trap on INT_MIN / -1; where value ranges prove both operands
 *    non-negative (divisor positive) C's truncating / and % are the same
 *    and cheaper, in 32 bits when both fit;
 *  - integer arithmetic narrower than int64 wraps (computed unsigned);
 *  - floats compute in f32 (f64 in double); f16 / bf16 / float8 / float4e2m1
 *    are stored as their bits (float8 and float4e2m1 one byte per element)
 *    and rounded on casts, math results and stores; the float8 conversions
 *    are codegen/cuda_f8.h, emitted only where a kernel needs them;
 *  - MIN / MAX on floats are NaN when either operand is;
 *  - float -> integer saturates, NaN gives 0 (kn_f2i64_sat, base/base.h).
 * The DAG of one statement is emitted once: nodes used twice get a `const`
 * temporary before the statement, the others are inlined. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cuda_emit.h"

/* kn_cu_fdiv / kn_cu_fmod must agree with kn_floordiv_i64 / kn_floormod_i64
 * (base/base.h), as c_emit.c's copies do: the CUDA text stands alone. */
const char kn_cu_prelude[] =
    "/* ---- helpers of the generated kernels (no header: NVRTC has none built in) ---- */\n"
    "#define KN_CU static __device__ __forceinline__\n"
    "KN_CU long long kn_cu_fdiv(long long a, long long b) { /* floor division, x/0 == 0 */\n"
    "  if (b == 0) return 0;\n"
    "  if (b == -1) return (long long)(0ull - (unsigned long long)a);\n"
    "  long long q = a / b, r = a % b;\n"
    "  return (r != 0 && (r ^ b) < 0) ? q - 1 : q;\n"
    "}\n"
    "KN_CU long long kn_cu_fmod(long long a, long long b) { /* floor modulo, x%0 == 0 */\n"
    "  if (b == 0 || b == -1) return 0;\n"
    "  long long r = a % b;\n"
    "  return (r != 0 && (r ^ b) < 0) ? r + b : r;\n"
    "}\n"
    "KN_CU unsigned long long kn_cu_udiv(unsigned long long a, unsigned long long b) { return b ? a / b : 0; }\n"
    "KN_CU unsigned long long kn_cu_umod(unsigned long long a, unsigned long long b) { return b ? a % b : 0; }\n"
    "KN_CU long long kn_cu_smin(long long a, long long b) { return a < b ? a : b; }\n"
    "KN_CU long long kn_cu_smax(long long a, long long b) { return a > b ? a : b; }\n"
    "KN_CU unsigned long long kn_cu_umin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }\n"
    "KN_CU unsigned long long kn_cu_umax(unsigned long long a, unsigned long long b) { return a > b ? a : b; }\n"
    "KN_CU long long kn_cu_iabs(long long a) { return a < 0 ? (long long)(0ull - (unsigned long long)a) : a; }\n"
    "/* min / max, NaN when either operand is */\n"
    "KN_CU float kn_cu_fminf(float a, float b) { return (a < b || a != a) ? a : b; }\n"
    "KN_CU float kn_cu_fmaxf(float a, float b) { return (a > b || a != a) ? a : b; }\n"
    "KN_CU double kn_cu_fmin(double a, double b) { return (a < b || a != a) ? a : b; }\n"
    "KN_CU double kn_cu_fmax(double a, double b) { return (a > b || a != a) ? a : b; }\n"
    "/* float -> integer: NaN 0, beyond int64 saturated, else truncated (kn_f2i64_sat) */\n"
    "KN_CU long long kn_cu_f2i(double v) {\n"
    "  if (v != v) return 0;\n"
    "  if (v >= 9223372036854775808.0) return 9223372036854775807ll;\n"
    "  return v <= -9223372036854775808.0 ? (-9223372036854775807ll - 1) : (long long)v;\n"
    "}\n"
    "KN_CU long long kn_cu_f2if(float v) {\n"
    "  if (v != v) return 0;\n"
    "  if (v >= 9223372036854775808.0f) return 9223372036854775807ll;\n"
    "  return v <= -9223372036854775808.0f ? (-9223372036854775807ll - 1) : (long long)v;\n"
    "}\n"
    "KN_CU unsigned long long kn_cu_f2u(double v) {\n"
    "  if (!(v > -1.0)) return 0;\n"
    "  if (v >= 18446744073709551616.0) return 18446744073709551615ull;\n"
    "  return v < 0 ? 0 : (unsigned long long)v;\n"
    "}\n"
    "KN_CU float kn_cu_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }\n"
    "KN_CU double kn_cu_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }\n"
    "/* float16 bits <-> value, round to nearest even (PTX cvt) */\n"
    "KN_CU float kn_cu_h2f(unsigned short h) {\n"
    "  float f;\n"
    "  asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n"
    "  return f;\n"
    "}\n"
    "KN_CU unsigned short kn_cu_f2h(float f) {\n"
    "  unsigned short h;\n"
    "  asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
    "  return h;\n"
    "}\n"
    "KN_CU unsigned short kn_cu_d2h(double f) { /* one rounding, not two */\n"
    "  unsigned short h;\n"
    "  asm(\"cvt.rn.f16.f64 %0, %1;\" : \"=h\"(h) : \"d\"(f));\n"
    "  return h;\n"
    "}\n"
    "KN_CU float kn_cu_round_f16(float x) { return kn_cu_h2f(kn_cu_f2h(x)); }\n"
    "/* bfloat16: the high half of a float, round to nearest even, NaN kept quiet\n"
    "   (bit for bit as the CPU back ends) */\n"
    "KN_CU unsigned int kn_cu_bf16_bits(float x) {\n"
    "  unsigned int b = __float_as_uint(x);\n"
    "  if (x != x) b |= 0x00400000u;\n"
    "  else b += 0x7fffu + ((b >> 16) & 1u);\n"
    "  return b & 0xffff0000u;\n"
    "}\n"
    "KN_CU float kn_cu_round_bf16(float x) { return __uint_as_float(kn_cu_bf16_bits(x)); }\n"
    "KN_CU unsigned short kn_cu_f2bf(float x) { return (unsigned short)(kn_cu_bf16_bits(x) >> 16); }\n"
    "KN_CU float kn_cu_bf2f(unsigned short h) { return __uint_as_float((unsigned int)h << 16); }\n"
    "KN_CU unsigned int kn_cu_pack2(unsigned short lo, unsigned short hi) {\n"
    "  return (unsigned int)lo | ((unsigned int)hi << 16);\n"
    "}\n"
    "#undef KN_CU\n\n";

/* Around kn_cu_f8_text (codegen/cuda_f8.h), which expects KN_CU and the
 * bit casts from its includer. */
const char kn_cu_f8_head[] =
    "#define KN_CU static __device__ __forceinline__\n"
    "KN_CU unsigned int kn_cu_as_uint(float x) { return __float_as_uint(x); }\n"
    "KN_CU float kn_cu_as_float(unsigned int b) { return __uint_as_float(b); }\n";
const char kn_cu_f8_tail[] = "#undef KN_CU\n\n";

/* ---- text ---- */

char *kn_cu_fmt(kn_cu *c, const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  char *s = kn_cg_arena_vfmt(&c->strings, f, ap);
  va_end(ap);
  return s;
}

void kn_cu_line(kn_cu *c, kn_cg_sbuf *b, const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  kn_cg_sbuf_vline(b, c->indent, f, ap);
  va_end(ap);
}

void kn_cu_fail(kn_cu *c, const char *f, ...) {
  if (c->failed) return;
  c->failed = true;
  char msg[512];
  va_list ap;
  va_start(ap, f);
  vsnprintf(msg, sizeof msg, f, ap);
  va_end(ap);
  kn_diag_error(c->d, "cuda: kernel '%s': %s", c->k->name ? c->k->name : "", msg);
}

/* ---- types ---- */

const char *kn_cu_reg_type(kn_dtype t) {
  switch (t) {
  case KN_DT_F32:
  case KN_DT_F16:
  case KN_DT_BF16:
  case KN_DT_F8E4M3FN:
  case KN_DT_F8E4M3FNUZ:
  case KN_DT_F8E5M2:
  case KN_DT_F8E5M2FNUZ:
  case KN_DT_F8E8M0:
  case KN_DT_F4E2M1: return "float";
  case KN_DT_F64: return "double";
  case KN_DT_BOOL: return "bool";
  case KN_DT_I8:
  case KN_DT_I2:
  case KN_DT_I4: return "signed char";
  case KN_DT_U8:
  case KN_DT_U2:
  case KN_DT_U4: return "unsigned char";
  case KN_DT_I16: return "short";
  case KN_DT_U16: return "unsigned short";
  case KN_DT_I32: return "int";
  case KN_DT_U32: return "unsigned int";
  case KN_DT_I64: return "long long";
  case KN_DT_U64: return "unsigned long long";
  default: return NULL;
  }
}

const char *kn_cu_mem_type(kn_dtype t) {
  if (t == KN_DT_F16 || t == KN_DT_BF16) return "unsigned short";
  if (t == KN_DT_BOOL || kn_dtype_is_f8(t)) return "unsigned char";
  return kn_cu_reg_type(t);
}

/* ---- names in scope ---- */

void kn_cu_push_name(kn_cu *c, const void *key, const char *name, kn_range range) {
  if (c->n_names == c->cap_names) {
    c->cap_names = c->cap_names ? c->cap_names * 2 : 32;
    c->names = realloc(c->names, sizeof *c->names * (size_t)c->cap_names);
    KN_ASSERT(c->names, "out of memory");
  }
  c->names[c->n_names++] = (kn_cu_name){.key = key, .name = name, .range = range};
}

const kn_cu_name *kn_cu_lookup(kn_cu *c, const void *key) {
  for (int i = c->n_names - 1; i >= 0; i--)
    if (c->names[i].key == key) return &c->names[i];
  return NULL;
}

const char *kn_cu_var_name(kn_cu *c, const kn_var *v) {
  if (c->k->batch == v) return "batch";
  return kn_cg_var_name(&c->strings, v);
}

/* ---- the statement's DAG (codegen/expr_dag.c) ---- */

static kn_cg_dag_slot *slot_of(kn_cu *c, const kn_expr *e) { return kn_cg_dag_slot_of(&c->dag, e); }

void kn_cu_stmt_begin(kn_cu *c, kn_cg_sbuf *pre, const kn_expr *const *es, int n) {
  kn_cg_dag_clear(&c->dag);
  for (int i = 0; i < n; i++)
    if (es[i]) kn_cg_dag_count_uses(&c->dag, es[i]);
  c->pre = pre;
}

/* ---- value ranges ---- */

static kn_range var_range(void *ctx, const kn_var *v) {
  kn_cu *c = ctx;
  if (c->k->batch == v) return (kn_range){0, 0, true, false}; /* a batch size is never negative */
  const kn_cu_name *n = kn_cu_lookup(c, v);
  return n ? n->range : kn_range_unknown();
}

static kn_range memo_range(void *ctx, const kn_expr *e) { return kn_cu_range(ctx, e); }

kn_range kn_cu_range(kn_cu *c, const kn_expr *e) {
  kn_cg_dag_slot *s = slot_of(c, e);
  if (s->has_range) return s->range;
  kn_range_env env = {.var = var_range, .sub = memo_range, .ctx = c};
  kn_range r = kn_range_of(&env, e);
  s = slot_of(c, e); /* the table may have grown */
  s->has_range = true;
  s->range = r;
  return r;
}

/* ---- literals ---- */

static const char *int_lit(kn_cu *c, kn_dtype t, int64_t v) {
  switch (t) {
  case KN_DT_I64: return v == INT64_MIN ? "(-9223372036854775807ll - 1)" : kn_cu_fmt(c, "%lldll", (long long)v);
  case KN_DT_U64: return kn_cu_fmt(c, "%lluull", (unsigned long long)v);
  case KN_DT_BOOL: return v ? "true" : "false";
  case KN_DT_U32: return kn_cu_fmt(c, "%lluu", (unsigned long long)(uint32_t)v);
  case KN_DT_I32: return v == INT32_MIN ? "(-2147483647 - 1)" : kn_cu_fmt(c, "(%lld)", (long long)v);
  default: return kn_cu_fmt(c, "((%s)%lld)", kn_cu_reg_type(t), (long long)v);
  }
}

static const char *float_lit(kn_cu *c, kn_dtype t, double v) {
  bool dbl = t == KN_DT_F64;
  if (t == KN_DT_F16) v = kn_f16_to_f32(kn_f32_to_f16((float)v));
  if (t == KN_DT_BF16) v = kn_bf16_to_f32(kn_f32_to_bf16((float)v));
  if (kn_dtype_is_f8(t)) v = kn_f8_to_f32(t, kn_f32_to_f8(t, (float)v));
  if (v != v) return dbl ? "__longlong_as_double(0x7ff8000000000000ll)" : "__uint_as_float(0x7fc00000u)";
  if (isinf(v)) {
    if (dbl) return v > 0 ? "__longlong_as_double(0x7ff0000000000000ll)" : "__longlong_as_double(0xfff0000000000000ll)";
    return v > 0 ? "__uint_as_float(0x7f800000u)" : "__uint_as_float(0xff800000u)";
  }
  if (!dbl) v = (float)v;
  return kn_cu_fmt(c, "(%a%s)", v, dbl ? "" : "f");
}

/* ---- operations ---- */

static const char *arith(kn_cu *c, kn_dtype t, const char *op, const char *a, const char *b) {
  if (kn_dtype_is_f8(t)) return kn_cu_fmt(c, "(%s %s %s)", a, op, b);
  switch (t) {
  case KN_DT_F32:
  case KN_DT_F16:
  case KN_DT_BF16:
  case KN_DT_F64:
  case KN_DT_I64:
  case KN_DT_U32:
  case KN_DT_U64: return kn_cu_fmt(c, "(%s %s %s)", a, op, b);
  case KN_DT_BOOL: /* i1 arithmetic: + and - are xor, * is and */
    return kn_cu_fmt(c, "((bool)(%s %s %s))", a, op[0] == '*' ? "&" : "^", b);
  default: return kn_cu_fmt(c, "((%s)((unsigned int)%s %s (unsigned int)%s))", kn_cu_reg_type(t), a, op, b);
  }
}

static int log2_exact(int64_t v) {
  if (v <= 0 || (v & (v - 1))) return -1;
  return __builtin_ctzll((unsigned long long)v);
}

static const char *divmod(kn_cu *c, const kn_expr *e, const char *a, const char *b) {
  bool div = e->kind == KN_E_DIV;
  kn_dtype t = e->dtype;
  const char *T = kn_cu_reg_type(t);
  if (t == KN_DT_F64) return div ? kn_cu_fmt(c, "(%s / %s)", a, b) : kn_cu_fmt(c, "fmod(%s, %s)", a, b);
  if (kn_dtype_is_float(t)) return div ? kn_cu_fmt(c, "(%s / %s)", a, b) : kn_cu_fmt(c, "fmodf(%s, %s)", a, b);
  int64_t k;
  bool kconst = kn_e_is_const_int(e->u.bin.b, &k);
  if (kconst && k == 0) return kn_cu_fmt(c, "((%s)0)", T);
  if (!kn_dtype_is_signed(t))
    return kn_cu_fmt(c, "((%s)kn_cu_u%s((unsigned long long)%s, (unsigned long long)%s))", T, div ? "div" : "mod", a, b);
  const char *op = div ? "/" : "%";
  kn_range ra = kn_cu_range(c, e->u.bin.a), rb = kn_cu_range(c, e->u.bin.b);
  if (ra.has_lo && ra.lo >= 0 && rb.has_lo && rb.lo > 0) { /* floor == truncation */
    if (ra.has_hi && ra.hi <= INT32_MAX && rb.has_hi && rb.hi <= INT32_MAX)
      return kn_cu_fmt(c, "((%s)((unsigned int)%s %s (unsigned int)%s))", T, a, op, b);
    return kn_cu_fmt(c, "((%s)((long long)%s %s (long long)%s))", T, a, op, b);
  }
  int shift = kconst ? log2_exact(k) : -1;
  if (shift >= 0) /* arithmetic shift / mask: floor semantics for two's complement */
    return div ? kn_cu_fmt(c, "((%s)((long long)%s >> %d))", T, a, shift)
               : kn_cu_fmt(c, "((%s)((long long)%s & %lldll))", T, a, (long long)(k - 1));
  return kn_cu_fmt(c, "((%s)kn_cu_f%s((long long)%s, (long long)%s))", T, div ? "div" : "mod", a, b);
}

static const char *minmax(kn_cu *c, kn_dtype t, bool is_min, const char *a, const char *b) {
  if (t == KN_DT_F64) return kn_cu_fmt(c, "kn_cu_f%s(%s, %s)", is_min ? "min" : "max", a, b);
  if (kn_dtype_is_float(t)) return kn_cu_fmt(c, "kn_cu_f%sf(%s, %s)", is_min ? "min" : "max", a, b);
  bool s = kn_dtype_is_signed(t);
  const char *W = s ? "long long" : "unsigned long long";
  return kn_cu_fmt(c, "((%s)kn_cu_%s%s((%s)%s, (%s)%s))", kn_cu_reg_type(t), s ? "s" : "u", is_min ? "min" : "max",
                   W, a, W, b);
}

/* Calls of the float8 helpers (codegen/cuda_f8.h) with the format's
 * constants, which the inlined helper folds. */
static const char *f8_from_bits(kn_cu *c, kn_dtype t, const char *v) {
  kn_f8_format f = kn_f8_format_of(t);
  c->uses_f8 = true;
  if (f.e8m0) return kn_cu_fmt(c, "kn_cu_e8m02f(%s)", v);
  if (f.e2m1) return kn_cu_fmt(c, "kn_cu_e2m12f(%s)", v);
  return kn_cu_fmt(c, "kn_cu_f82f(%s, %d, %d, %d, %d, %d)", v, f.exp_bits, f.man_bits, f.bias, f.fnuz, f.has_inf);
}

static const char *f8_to_bits(kn_cu *c, kn_dtype t, const char *v) {
  kn_f8_format f = kn_f8_format_of(t);
  c->uses_f8 = true;
  if (f.e8m0) return kn_cu_fmt(c, "kn_cu_f2e8m0(%s)", v);
  if (f.e2m1) return kn_cu_fmt(c, "kn_cu_f2e2m1(%s)", v);
  return kn_cu_fmt(c, "kn_cu_f2f8(%s, %d, %d, %d, %d, %du)", v, f.man_bits, f.bias, f.fnuz, f.has_inf, f.max_code);
}

static const char *round_to(kn_cu *c, kn_dtype t, const char *v) {
  if (t == KN_DT_F16) return kn_cu_fmt(c, "kn_cu_round_f16(%s)", v);
  if (t == KN_DT_BF16) return kn_cu_fmt(c, "kn_cu_round_bf16(%s)", v);
  if (kn_dtype_is_f8(t)) return f8_from_bits(c, t, f8_to_bits(c, t, v));
  return v;
}

static const char *cast(kn_cu *c, kn_dtype from, kn_dtype to, const char *v) {
  if (from == to) return v;
  bool ffrom = kn_dtype_is_float(from);
  if (to == KN_DT_BOOL) return kn_cu_fmt(c, "(%s != 0)", v);
  if (kn_dtype_is_subbyte_int(to)) { /* the low 2 / 4 bits, sign-extended for int2 / int4 */
    int mask = (1 << kn_subbyte_int_bits(to)) - 1, half = (mask + 1) / 2;
    v = ffrom ? kn_cu_fmt(c, "kn_cu_f2i(%s)", v) : kn_cu_fmt(c, "((long long)%s)", v);
    if (!kn_dtype_is_signed(to)) return kn_cu_fmt(c, "((unsigned char)(%s & %d))", v, mask);
    return kn_cu_fmt(c, "((signed char)(((%s & %d) ^ %d) - %d))", v, mask, half, half);
  }
  if (ffrom) {
    if (to == KN_DT_U64) return kn_cu_fmt(c, "kn_cu_f2u(%s)", v);
    if (kn_dtype_is_int(to))
      return kn_cu_fmt(c, "((%s)kn_cu_f2i%s(%s))", kn_cu_reg_type(to), from == KN_DT_F64 ? "" : "f", v);
    if (to == KN_DT_F64) return kn_cu_fmt(c, "((double)%s)", v);
    if (from == KN_DT_F64 && to == KN_DT_F16) return kn_cu_fmt(c, "kn_cu_h2f(kn_cu_d2h(%s))", v);
    if (from == KN_DT_F64) v = kn_cu_fmt(c, "((float)%s)", v);
    return round_to(c, to, v);
  }
  if (kn_dtype_is_float(to)) return round_to(c, to, kn_cu_fmt(c, "((%s)%s)", kn_cu_reg_type(to), v));
  return kn_cu_fmt(c, "((%s)%s)", kn_cu_reg_type(to), v);
}

const char *kn_cu_from_mem(kn_cu *c, kn_dtype t, const char *v) {
  if (t == KN_DT_BOOL) return kn_cu_fmt(c, "(%s != 0)", v);
  if (t == KN_DT_F16) return kn_cu_fmt(c, "kn_cu_h2f(%s)", v);
  if (t == KN_DT_BF16) return kn_cu_fmt(c, "kn_cu_bf2f(%s)", v);
  if (kn_dtype_is_f8(t)) return f8_from_bits(c, t, v);
  return v;
}

const char *kn_cu_to_mem(kn_cu *c, kn_dtype t, const char *v) {
  if (t == KN_DT_BOOL) return kn_cu_fmt(c, "(unsigned char)%s", v);
  if (t == KN_DT_F16) return kn_cu_fmt(c, "kn_cu_f2h(%s)", v);
  if (t == KN_DT_BF16) return kn_cu_fmt(c, "kn_cu_f2bf(%s)", v);
  if (kn_dtype_is_f8(t)) return f8_to_bits(c, t, v);
  if (kn_dtype_is_subbyte_int(t)) return cast(c, KN_DT_I64, t, v); /* wrapped, as the interpreters */
  return v;
}

static const char *math_call(kn_cu *c, const kn_expr *e, const char **a) {
  const char *sfx = e->dtype == KN_DT_F64 ? "" : "f";
  const char *r;
  switch (e->u.call.fn) {
  case KN_FN_EXP: r = kn_cu_fmt(c, "exp%s(%s)", sfx, a[0]); break;
  case KN_FN_LOG: r = kn_cu_fmt(c, "log%s(%s)", sfx, a[0]); break;
  case KN_FN_SQRT: r = kn_cu_fmt(c, "sqrt%s(%s)", sfx, a[0]); break;
  case KN_FN_ERF: r = kn_cu_fmt(c, "erf%s(%s)", sfx, a[0]); break;
  case KN_FN_TANH: r = kn_cu_fmt(c, "tanh%s(%s)", sfx, a[0]); break;
  case KN_FN_SIGMOID: r = kn_cu_fmt(c, "kn_cu_sigmoid%s(%s)", sfx, a[0]); break;
  case KN_FN_FLOOR: r = kn_cu_fmt(c, "floor%s(%s)", sfx, a[0]); break;
  case KN_FN_CEIL: r = kn_cu_fmt(c, "ceil%s(%s)", sfx, a[0]); break;
  case KN_FN_ROUND: r = kn_cu_fmt(c, "rint%s(%s)", sfx, a[0]); break; /* half to even */
  case KN_FN_ABS: r = kn_cu_fmt(c, "fabs%s(%s)", sfx, a[0]); break;
  case KN_FN_SIN: r = kn_cu_fmt(c, "sin%s(%s)", sfx, a[0]); break;
  case KN_FN_COS: r = kn_cu_fmt(c, "cos%s(%s)", sfx, a[0]); break;
  case KN_FN_POW: r = kn_cu_fmt(c, "pow%s(%s, %s)", sfx, a[0], a[1]); break;
  case KN_FN_FMA: r = kn_cu_fmt(c, "fma%s(%s, %s, %s)", sfx, a[0], a[1], a[2]); break;
  default: kn_cu_fail(c, "intrinsic %s is not supported on the GPU", kn_fn_name(e->u.call.fn)); return "0";
  }
  return round_to(c, e->dtype, r);
}

static const char *int_call(kn_cu *c, const kn_expr *e, const char **a) {
  kn_dtype t = e->dtype;
  switch (e->u.call.fn) {
  case KN_FN_ABS:
    return kn_dtype_is_signed(t) ? kn_cu_fmt(c, "((%s)kn_cu_iabs((long long)%s))", kn_cu_reg_type(t), a[0]) : a[0];
  case KN_FN_FLOOR:
  case KN_FN_CEIL:
  case KN_FN_ROUND: return a[0];
  case KN_FN_FMA: return arith(c, t, "+", arith(c, t, "*", a[0], a[1]), a[2]);
  default: kn_cu_fail(c, "intrinsic %s of an integer", kn_fn_name(e->u.call.fn)); return "0";
  }
}

/* Why e cannot be emitted, or NULL. */
static const char *unsupported(const kn_expr *e) {
  if (e->lanes != 1 || e->kind == KN_E_RAMP || e->kind == KN_E_BROADCAST)
    return "vector expressions are not supported on the GPU (GPU schedules emit scalars)";
  if (e->kind == KN_E_REDUCE || (e->kind == KN_E_LOAD && !e->u.load.buffer)) return "a TE node reached codegen";
  if (!kn_cu_reg_type(e->dtype)) return "an expression of no valid dtype";
  if (e->kind == KN_E_CALL && (e->u.call.n < 1 || e->u.call.n > 3 || e->u.call.n != kn_fn_nargs(e->u.call.fn)))
    return "intrinsic with a wrong argument count";
  return NULL;
}

static const char *render_load(kn_cu *c, const kn_expr *e, const char *index) {
  const kn_buffer *b = e->u.load.buffer;
  const kn_cu_name *n = kn_cu_lookup(c, b);
  if (!n) {
    kn_cu_fail(c, "buffer '%s' is read outside its kernel parameters / ALLOC", b->name ? b->name : "");
    return "0";
  }
  if (!kn_cu_reg_type(b->dtype)) {
    kn_cu_fail(c, "buffer '%s' has no valid dtype", b->name ? b->name : "");
    return "0";
  }
  return kn_cu_from_mem(c, b->dtype, kn_cu_fmt(c, "%s[%s]", n->name, index));
}

static const char *render(kn_cu *c, const kn_expr *e) {
  const kn_expr *kids[3];
  int n = kn_cg_expr_children(e, kids);
  const char *a[3] = {0};
  for (int i = 0; i < n; i++) a[i] = kn_cu_expr(c, kids[i]);
  kn_dtype t = e->dtype;
  switch (e->kind) {
  case KN_E_ADD: return arith(c, t, "+", a[0], a[1]);
  case KN_E_SUB: return arith(c, t, "-", a[0], a[1]);
  case KN_E_MUL: return arith(c, t, "*", a[0], a[1]);
  case KN_E_DIV:
  case KN_E_MOD: return divmod(c, e, a[0], a[1]);
  case KN_E_MIN:
  case KN_E_MAX: return minmax(c, t, e->kind == KN_E_MIN, a[0], a[1]);
  case KN_E_EQ: return kn_cu_fmt(c, "(%s == %s)", a[0], a[1]);
  case KN_E_NE: return kn_cu_fmt(c, "(%s != %s)", a[0], a[1]);
  case KN_E_LT: return kn_cu_fmt(c, "(%s < %s)", a[0], a[1]);
  case KN_E_LE: return kn_cu_fmt(c, "(%s <= %s)", a[0], a[1]);
  case KN_E_GT: return kn_cu_fmt(c, "(%s > %s)", a[0], a[1]);
  case KN_E_GE: return kn_cu_fmt(c, "(%s >= %s)", a[0], a[1]);
  case KN_E_AND: return kn_cu_fmt(c, "((%s)(%s & %s))", kn_cu_reg_type(t), a[0], a[1]);
  case KN_E_OR: return kn_cu_fmt(c, "((%s)(%s | %s))", kn_cu_reg_type(t), a[0], a[1]);
  case KN_E_NOT:
    return t == KN_DT_BOOL ? kn_cu_fmt(c, "(!%s)", a[0]) : kn_cu_fmt(c, "((%s)~%s)", kn_cu_reg_type(t), a[0]);
  case KN_E_SELECT: return kn_cu_fmt(c, "(%s ? %s : %s)", a[0], a[1], a[2]);
  case KN_E_CAST:
    if (!kn_cu_reg_type(e->u.un.a->dtype)) break;
    return cast(c, e->u.un.a->dtype, t, a[0]);
  case KN_E_CALL: return kn_dtype_is_float(t) ? math_call(c, e, a) : int_call(c, e, a);
  case KN_E_LOAD: return render_load(c, e, a[0]);
  default: break;
  }
  kn_cu_fail(c, "expression kind %d is not supported on the GPU", (int)e->kind);
  return "0";
}

const char *kn_cu_expr(kn_cu *c, const kn_expr *e) {
  const char *why = unsupported(e);
  if (why) {
    kn_cu_fail(c, "%s", why);
    return "0";
  }
  switch (e->kind) {
  case KN_E_INT: return int_lit(c, e->dtype, e->u.ival);
  case KN_E_FLOAT: return float_lit(c, e->dtype, e->u.fval);
  case KN_E_VAR: {
    const kn_cu_name *n = kn_cu_lookup(c, e->u.var);
    if (n) return n->name;
    if (e->u.var == c->k->batch) return "batch";
    kn_cu_fail(c, "variable '%s' is used outside its loop / LET", e->u.var->name ? e->u.var->name : "");
    return "0";
  }
  default: break;
  }
  kn_cg_dag_slot *s = slot_of(c, e);
  if (s->temp >= 0) return kn_cu_fmt(c, "t%d", s->temp);
  int uses = s->uses;
  const char *text = render(c, e);
  if (uses <= 1) return text;
  int t = c->next_temp++;
  const char *T = kn_cu_reg_type(e->dtype);
  if (e->dtype == KN_DT_I64) { /* index math proven to fit: 32-bit registers */
    kn_range r = kn_cu_range(c, e);
    if (kn_range_bounded(r) && r.lo >= INT32_MIN && r.hi <= INT32_MAX) T = "int";
  }
  kn_cu_line(c, c->pre, "const %s t%d = %s;", T, t, text);
  slot_of(c, e)->temp = t;
  return kn_cu_fmt(c, "t%d", t);
}
