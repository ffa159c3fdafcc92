/* c_emit.c — finalized loop-IR kernels -> portable C.
 *
 * Requires: a kernel after kn_loop_finalize (SERIAL / PARALLEL loops only,
 * vector RAMP / BROADCAST / LOAD / STORE expressions). Guarantees: the same
 * semantics as the LLVM back end (codegen/llvm_expr.c), in plain C17:
 *  - a vector statement becomes a loop over its lanes (`kl`), each vector
 *    expression evaluated per lane; scalar subexpressions are computed once,
 *    before the lane loop. A vector store whose value may read another lane's
 *    destination first collects every lane, then stores (all lanes read before
 *    any lane writes, as one vector instruction would); a stride-0 store keeps
 *    the last lane. C compilers turn these lane loops back into SIMD;
 *  - an expression DAG is emitted once per statement: nodes used more than
 *    once get a `const` temporary (tN), the others are inlined;
 *  - integer DIV / MOD are floor division / modulo, x / 0 == x % 0 == 0, no
 *    trap on INT_MIN / -1; integer arithmetic other than int64 wraps (done in
 *    unsigned types: no undefined behaviour); int64 is index arithmetic that
 *    never overflows, as the LLVM back end's nsw;
 *  - float MIN / MAX are NaN when either operand is (as the LLVM back end);
 *    f16 / bf16 live in float registers, rounded on casts and stores;
 *    bool is 0 / 1 in one byte of memory;
 *  - math calls libm (expf, logf, tanhf, erff, ...), which is at least as
 *    accurate as the LLVM back end's inline polynomials;
 *  - the outermost PARALLEL loop runs [task*extent/ntasks,
 *    (task+1)*extent/ntasks); nested PARALLEL loops are serial.
 * Parameters are `restrict` pointers, as the LLVM back end's noalias. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/c_emit.h"
#include "codegen/expr_dag.h"

/* ---- text buffers ---- */

void kn_cg_sbuf_append(kn_cg_sbuf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (b->n + n + 1 > cap) cap *= 2;
    b->s = realloc(b->s, cap);
    KN_ASSERT(b->s, "out of memory");
    b->cap = cap;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = 0;
}

void kn_cg_sbuf_printf(kn_cg_sbuf *b, const char *fmt, ...) {
  char small[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  KN_ASSERT(n >= 0, "vsnprintf failed");
  if ((size_t)n < sizeof small) {
    kn_cg_sbuf_append(b, small, (size_t)n);
    return;
  }
  char *big = malloc((size_t)n + 1);
  KN_ASSERT(big, "out of memory");
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  kn_cg_sbuf_append(b, big, (size_t)n);
  free(big);
}

void kn_cg_sbuf_free(kn_cg_sbuf *b) {
  free(b->s);
  *b = (kn_cg_sbuf){0};
}

char *kn_cg_arena_vfmt(kn_arena *a, const char *f, va_list ap) {
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(NULL, 0, f, ap);
  KN_ASSERT(n >= 0, "vsnprintf failed");
  char *s = kn_arena_alloc(a, (size_t)n + 1);
  vsnprintf(s, (size_t)n + 1, f, again);
  va_end(again);
  return s;
}

void kn_cg_sbuf_vline(kn_cg_sbuf *b, int indent, const char *f, va_list ap) {
  for (int i = 0; i < indent; i++) kn_cg_sbuf_append(b, "  ", 2);
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(NULL, 0, f, ap);
  KN_ASSERT(n >= 0, "vsnprintf failed");
  char *s = malloc((size_t)n + 1);
  KN_ASSERT(s, "out of memory");
  vsnprintf(s, (size_t)n + 1, f, again);
  va_end(again);
  kn_cg_sbuf_append(b, s, (size_t)n);
  kn_cg_sbuf_append(b, "\n", 1);
  free(s);
}

static char *arena_fmt(kn_arena *a, const char *f, ...) __attribute__((format(printf, 2, 3)));
static char *arena_fmt(kn_arena *a, const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  char *s = kn_cg_arena_vfmt(a, f, ap);
  va_end(ap);
  return s;
}

const char *kn_cg_var_name(kn_arena *a, const kn_var *v) {
  char clean[32];
  size_t n = 0;
  for (const char *p = v->name ? v->name : ""; *p && n < sizeof clean - 1; p++)
    clean[n++] = (char)((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ? *p : '_');
  clean[n] = 0;
  return arena_fmt(a, "v%d_%s", v->id, clean);
}

/* ---- the prelude: helpers the kernels call ---- */

/* kn_c_fdiv / kn_c_fmod must agree with kn_floordiv_i64 / kn_floormod_i64 (base/base.h): a copy, as the generated C stands alone. */
const char kn_cg_c_prelude[] =
    "/* ---- helpers of the generated kernels ---- */\n"
    "static inline int64_t kn_c_fdiv(int64_t a, int64_t b) { /* floor division, x/0 == 0 */\n"
    "  if (b == 0) return 0;\n"
    "  if (b == -1) return (int64_t)(0 - (uint64_t)a);\n"
    "  int64_t q = a / b, r = a % b;\n"
    "  return (r != 0 && (r ^ b) < 0) ? q - 1 : q;\n"
    "}\n"
    "static inline int64_t kn_c_fmod(int64_t a, int64_t b) { /* floor modulo, x%0 == 0 */\n"
    "  if (b == 0 || b == -1) return 0;\n"
    "  int64_t r = a % b;\n"
    "  return (r != 0 && (r ^ b) < 0) ? r + b : r;\n"
    "}\n"
    "static inline uint64_t kn_c_udiv(uint64_t a, uint64_t b) { return b ? a / b : 0; }\n"
    "static inline uint64_t kn_c_umod(uint64_t a, uint64_t b) { return b ? a % b : 0; }\n"
    "static inline int64_t kn_c_smin(int64_t a, int64_t b) { return a < b ? a : b; }\n"
    "static inline int64_t kn_c_smax(int64_t a, int64_t b) { return a > b ? a : b; }\n"
    "static inline uint64_t kn_c_umin(uint64_t a, uint64_t b) { return a < b ? a : b; }\n"
    "static inline uint64_t kn_c_umax(uint64_t a, uint64_t b) { return a > b ? a : b; }\n"
    "static inline int64_t kn_c_iabs(int64_t a) { return a < 0 ? (int64_t)(0 - (uint64_t)a) : a; }\n"
    "/* min / max, NaN when either operand is */\n"
    "static inline float kn_c_fminf(float a, float b) { return (a < b || a != a) ? a : b; }\n"
    "static inline float kn_c_fmaxf(float a, float b) { return (a > b || a != a) ? a : b; }\n"
    "static inline double kn_c_fmin(double a, double b) { return (a < b || a != a) ? a : b; }\n"
    "static inline double kn_c_fmax(double a, double b) { return (a > b || a != a) ? a : b; }\n"
    "/* float -> integer without undefined behaviour, as kn_f2i64_sat / kn_f2u64_sat */\n"
    "static inline int64_t kn_c_f2i(double v) {\n"
    "  if (v != v) return 0;\n"
    "  if (v >= 9223372036854775808.0) return INT64_MAX;\n"
    "  return v <= -9223372036854775808.0 ? INT64_MIN : (int64_t)v;\n"
    "}\n"
    "static inline uint64_t kn_c_f2u(double v) {\n"
    "  if (!(v > -1.0)) return 0;\n"
    "  if (v >= 18446744073709551616.0) return UINT64_MAX;\n"
    "  return v < 0 ? 0 : (uint64_t)v;\n"
    "}\n"
    "static inline float kn_c_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }\n"
    "static inline double kn_c_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }\n"
    "/* float16: bits <-> value, round to nearest even */\n"
    "static inline float kn_c_h2f(uint16_t h) {\n"
    "  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, bits;\n"
    "  float f;\n"
    "  if (e == 0) {\n"
    "    f = (float)m * 0x1p-24f;\n"
    "    return sign ? -f : f;\n"
    "  }\n"
    "  bits = e == 0x1f ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e + 112u) << 23) | (m << 13));\n"
    "  memcpy(&f, &bits, sizeof f);\n"
    "  return f;\n"
    "}\n"
    "static inline uint16_t kn_c_d2h(double x) {\n"
    "  uint16_t sign = signbit(x) ? 0x8000u : 0u;\n"
    "  if (x != x) return (uint16_t)(sign | 0x7e00u);\n"
    "  double a = fabs(x);\n"
    "  if (a >= 65520.0) return (uint16_t)(sign | 0x7c00u);\n"
    "  if (a < 0x1p-14) return (uint16_t)(sign | (uint16_t)nearbyint(a * 0x1p24));\n"
    "  int e;\n"
    "  double q = nearbyint(ldexp(frexp(a, &e), 11)); /* a = q/2048 * 2^e, q in [1024, 2048] */\n"
    "  if (q >= 2048.0) { q = 1024.0; e++; }\n"
    "  return (uint16_t)(sign | (uint16_t)((e + 14) << 10) | (uint16_t)((int)q - 1024));\n"
    "}\n"
    "static inline float kn_c_round_f16(float x) { return kn_c_h2f(kn_c_d2h(x)); }\n"
    "/* bfloat16: the high half of a float, round to nearest even, NaN kept quiet */\n"
    "static inline uint32_t kn_c_bf16_bits(float x) {\n"
    "  uint32_t b;\n"
    "  memcpy(&b, &x, sizeof b);\n"
    "  if (x != x) b |= 0x00400000u;\n"
    "  else b += 0x7fffu + ((b >> 16) & 1u);\n"
    "  return b & 0xffff0000u;\n"
    "}\n"
    "static inline float kn_c_round_bf16(float x) {\n"
    "  uint32_t b = kn_c_bf16_bits(x);\n"
    "  float f;\n"
    "  memcpy(&f, &b, sizeof f);\n"
    "  return f;\n"
    "}\n"
    "static inline uint16_t kn_c_f2bf(float x) { return (uint16_t)(kn_c_bf16_bits(x) >> 16); }\n"
    "static inline float kn_c_bf2f(uint16_t h) {\n"
    "  uint32_t b = (uint32_t)h << 16;\n"
    "  float f;\n"
    "  memcpy(&f, &b, sizeof f);\n"
    "  return f;\n"
    "}\n"
    "/* float8 (eb exponent bits, mb mantissa bits, bias; fnuz: 0x80 is NaN, no -0;\n"
    "   inf: E5M2's infinities; maxc: largest finite code), nearest even, no saturation */\n"
    "static inline float kn_c_f82f(uint8_t b, int eb, int mb, int bias, int fnuz, int inf) {\n"
    "  int e = (b >> mb) & ((1 << eb) - 1), m = b & ((1 << mb) - 1);\n"
    "  if (fnuz && b == 0x80) return NAN;\n"
    "  if (!fnuz && !inf && (b & 0x7f) == 0x7f) return NAN;\n"
    "  if (inf && e == (1 << eb) - 1) return m ? NAN : (b & 0x80) ? -INFINITY : INFINITY;\n"
    "  float v = e == 0 ? ldexpf((float)m, 1 - bias - mb) : ldexpf((float)(m | (1 << mb)), e - bias - mb);\n"
    "  return (b & 0x80) ? -v : v;\n"
    "}\n"
    "/* float8e8m0: 2^(b - 127), 0xff NaN; from float: the exponent of |x|, rounded up below 0xfe */\n"
    "static inline float kn_c_e8m02f(uint8_t b) { return b == 0xff ? NAN : ldexpf(1.0f, b - 127); }\n"
    "static inline uint8_t kn_c_f2e8m0(float x) {\n"
    "  uint32_t bits, e;\n"
    "  memcpy(&bits, &x, sizeof bits);\n"
    "  e = (bits >> 23) & 0xffu;\n"
    "  if ((bits & 0x7fffffffu) == 0x00400000u) return 0; /* 2^-127: code 0 */\n"
    "  return (uint8_t)(e == 0xffu ? 0xffu : e + ((bits & 0x7fffffu) != 0 && e < 0xfeu));\n"
    "}\n"
    "/* float4e2m1: code in the low nibble, sign bit 3; nearest even, saturating (kn_f32_to_f4e2m1) */\n"
    "static inline float kn_c_e2m12f(uint8_t b) {\n"
    "  static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};\n"
    "  return (b & 8) ? -mag[b & 7] : mag[b & 7];\n"
    "}\n"
    "static inline uint8_t kn_c_f2e2m1(float x) {\n"
    "  float a = fabsf(x);\n"
    "  int c = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);\n"
    "  return (uint8_t)(c | (x != x || signbit(x) ? 8 : 0));\n"
    "}\n"
    "static inline uint8_t kn_c_f2f8(float x, int mb, int bias, int fnuz, int inf, uint32_t maxc) {\n"
    "  uint8_t nan = fnuz ? 0x80 : 0x7f;\n"
    "  if (x != x) return nan;\n"
    "  uint32_t bits, code;\n"
    "  memcpy(&bits, &x, sizeof bits);\n"
    "  uint8_t sign = (uint8_t)((bits >> 24) & 0x80u);\n"
    "  bits &= 0x7fffffffu;\n"
    "  int drop = 23 - mb;\n"
    "  if (bits >= 0x7f800000u) code = 0xffu;\n"
    "  else if ((int)(bits >> 23) - 127 + bias >= 1)\n"
    "    code = ((bits + ((1u << (drop - 1)) - 1u) + ((bits >> drop) & 1u)) >> drop)\n"
    "           - ((uint32_t)(127 - bias) << mb);\n"
    "  else {\n"
    "    float a;\n"
    "    memcpy(&a, &bits, sizeof a);\n"
    "    code = (uint32_t)nearbyintf(ldexpf(a, bias - 1 + mb));\n"
    "  }\n"
    "  if (code > maxc) return inf ? (uint8_t)(sign | 0x7cu) : nan;\n"
    "  if (code == 0 && fnuz) return 0;\n"
    "  return (uint8_t)(sign | code);\n"
    "}\n";

/* ---- types ---- */

static bool is_float(kn_dtype t) { return kn_dtype_is_float(t); }
static bool is_small_float(kn_dtype t) { return t == KN_DT_F16 || t == KN_DT_BF16; }

/* Register (computation) type. */
static const char *reg_type(kn_dtype t) {
  switch (t) {
  case KN_DT_F32:
  case KN_DT_F16:
  case KN_DT_BF16:
  case KN_DT_F8E4M3FN:
  case KN_DT_F8E4M3FNUZ:
  case KN_DT_F8E5M2:
  case KN_DT_F8E8M0:
  case KN_DT_F4E2M1:
  case KN_DT_F8E5M2FNUZ: return "float";
  case KN_DT_F64: return "double";
  case KN_DT_BOOL: return "bool";
  case KN_DT_I8:
  case KN_DT_I2:
  case KN_DT_I4: return "int8_t";
  case KN_DT_U8:
  case KN_DT_U2:
  case KN_DT_U4: return "uint8_t";
  case KN_DT_I16: return "int16_t";
  case KN_DT_U16: return "uint16_t";
  case KN_DT_I32: return "int32_t";
  case KN_DT_U32: return "uint32_t";
  case KN_DT_I64: return "int64_t";
  case KN_DT_U64: return "uint64_t";
  default: KN_UNREACHABLE("invalid dtype in C codegen");
  }
}

/* Memory type: f16 / bf16 / float8 as their bits, bool as one byte. */
static const char *mem_type(kn_dtype t) {
  if (is_small_float(t)) return "uint16_t";
  if (t == KN_DT_BOOL || kn_dtype_is_f8(t)) return "uint8_t";
  return reg_type(t);
}

/* ---- emission state ---- */

typedef struct bufname {
  const kn_buffer *buf;
  char name[24];
} bufname;

typedef struct cemit {
  kn_cg_sbuf *out;
  const kn_kernel *k;
  kn_arena strings; /* rendered expression text of the kernel */
  kn_cg_dag dag;     /* the current statement's DAG */
  int next_temp, next_scope, next_local;
  /* current statement */
  kn_cg_sbuf *pre;  /* scalar code before the lane loop */
  kn_cg_sbuf *lane; /* body of the current lane loop; NULL in scalar code */
  int lane_scope;
  int indent;
  bufname *bufs;
  int n_bufs, cap_bufs;
  int loop_depth, parallel_depth, n_split;
} cemit;

/* The operands of e: a REDUCE (TE only) or an intrinsic of a wrong arity
 * reaching codegen is a compiler bug here, not a diagnostic as on the GPU. */
static int n_children(const kn_expr *e, const kn_expr *kids[3]) {
  KN_ASSERT(e->kind != KN_E_REDUCE, "REDUCE reached codegen (TE only)");
  KN_ASSERT(e->kind != KN_E_CALL || (e->u.call.n >= 1 && e->u.call.n <= 3), "intrinsic arity");
  KN_ASSERT(e->kind != KN_E_LOAD || e->u.load.index, "LOAD without an index");
  return kn_cg_expr_children(e, kids);
}

static kn_cg_dag_slot *slot_of(cemit *c, const kn_expr *e) { return kn_cg_dag_slot_of(&c->dag, e); }

static char *fmt(cemit *c, const char *f, ...) __attribute__((format(printf, 2, 3)));
static char *fmt(cemit *c, const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  char *s = kn_cg_arena_vfmt(&c->strings, f, ap);
  va_end(ap);
  return s;
}

static void line(cemit *c, kn_cg_sbuf *b, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void line(cemit *c, kn_cg_sbuf *b, const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  kn_cg_sbuf_vline(b, c->indent, f, ap);
  va_end(ap);
}

static const char *var_name(cemit *c, const kn_var *v) {
  if (c->k->batch == v) return "batch";
  return kn_cg_var_name(&c->strings, v);
}

static const char *buf_name(cemit *c, const kn_buffer *b) {
  for (int i = c->n_bufs - 1; i >= 0; i--)
    if (c->bufs[i].buf == b) return c->bufs[i].name;
  KN_UNREACHABLE("buffer used outside its kernel parameters / ALLOC");
}

static void push_buf(cemit *c, const kn_buffer *b, const char *name) {
  if (c->n_bufs == c->cap_bufs) {
    c->cap_bufs = c->cap_bufs ? c->cap_bufs * 2 : 32;
    c->bufs = realloc(c->bufs, sizeof *c->bufs * (size_t)c->cap_bufs);
    KN_ASSERT(c->bufs, "out of memory");
  }
  c->bufs[c->n_bufs].buf = b;
  snprintf(c->bufs[c->n_bufs].name, sizeof c->bufs[c->n_bufs].name, "%s", name);
  c->n_bufs++;
}

/* ---- literals ---- */

static const char *int_lit(cemit *c, kn_dtype t, int64_t v) {
  switch (t) {
  case KN_DT_I64: return v == INT64_MIN ? "INT64_MIN" : fmt(c, "INT64_C(%lld)", (long long)v);
  case KN_DT_U64: return fmt(c, "UINT64_C(%llu)", (unsigned long long)v);
  case KN_DT_BOOL: return v ? "true" : "false";
  case KN_DT_U32: return fmt(c, "((uint32_t)%lluu)", (unsigned long long)(uint32_t)v);
  case KN_DT_I32: return v == INT32_MIN ? "INT32_MIN" : fmt(c, "((int32_t)%lld)", (long long)v);
  default: return fmt(c, "((%s)%lld)", reg_type(t), (long long)v);
  }
}

static const char *float_lit(cemit *c, kn_dtype t, double v) {
  bool dbl = t == KN_DT_F64;
  if (t == KN_DT_F16) v = kn_f16_to_f32(kn_f32_to_f16((float)v));
  if (t == KN_DT_BF16) v = kn_bf16_to_f32(kn_f32_to_bf16((float)v));
  if (kn_dtype_is_f8(t)) v = kn_f8_to_f32(t, kn_f32_to_f8(t, (float)v));
  if (v != v) return dbl ? "((double)NAN)" : "NAN";
  if (isinf(v)) return v > 0 ? (dbl ? "((double)INFINITY)" : "INFINITY") : (dbl ? "(-(double)INFINITY)" : "(-INFINITY)");
  if (!dbl) v = (float)v;
  return fmt(c, "(%a%s)", v, dbl ? "" : "f");
}

/* ---- expressions ---- */

static const char *gen(cemit *c, const kn_expr *e);

/* a OP b with the wrapping integer semantics of the dtype. */
static const char *arith(cemit *c, kn_dtype t, const char *op, const char *a, const char *b) {
  if (kn_dtype_is_f8(t)) return fmt(c, "(%s %s %s)", a, op, b);
  switch (t) {
  case KN_DT_F32:
  case KN_DT_F16:
  case KN_DT_BF16:
  case KN_DT_F64:
  case KN_DT_I64:
  case KN_DT_U32:
  case KN_DT_U64: return fmt(c, "(%s %s %s)", a, op, b);
  case KN_DT_BOOL: /* i1 arithmetic: + and - are xor, * is and */
    return fmt(c, "((bool)(%s %s %s))", a, op[0] == '*' ? "&" : "^", b);
  default: return fmt(c, "((%s)((uint32_t)%s %s (uint32_t)%s))", reg_type(t), a, op, b);
  }
}

static int log2_exact(int64_t v) {
  if (v <= 0 || (v & (v - 1))) return -1;
  return __builtin_ctzll((unsigned long long)v);
}

static bool const_int(const kn_expr *e, int64_t *v) {
  if (e->kind == KN_E_BROADCAST) e = e->u.un.a;
  if (e->kind != KN_E_INT) return false;
  *v = e->u.ival;
  return true;
}

static const char *divmod(cemit *c, const kn_expr *e, const char *a, const char *b) {
  bool div = e->kind == KN_E_DIV;
  kn_dtype t = e->dtype;
  const char *T = reg_type(t);
  if (t == KN_DT_F64) return div ? fmt(c, "(%s / %s)", a, b) : fmt(c, "fmod(%s, %s)", a, b);
  if (is_float(t)) return div ? fmt(c, "(%s / %s)", a, b) : fmt(c, "fmodf(%s, %s)", a, b);
  int64_t k;
  bool kconst = const_int(e->u.bin.b, &k);
  if (kconst && k == 0) return fmt(c, "((%s)0)", T);
  if (!kn_dtype_is_signed(t))
    return fmt(c, "((%s)kn_c_u%s((uint64_t)%s, (uint64_t)%s))", T, div ? "div" : "mod", a, b);
  int shift = kconst ? log2_exact(k) : -1;
  if (shift >= 0) /* arithmetic shift / mask: floor semantics for two's complement */
    return div ? fmt(c, "((%s)(%s >> %d))", T, a, shift)
               : fmt(c, "((%s)(%s & INT64_C(%lld)))", T, a, (long long)(k - 1));
  return fmt(c, "((%s)kn_c_f%s((int64_t)%s, (int64_t)%s))", T, div ? "div" : "mod", a, b);
}

static const char *minmax(cemit *c, kn_dtype t, bool is_min, const char *a, const char *b) {
  if (t == KN_DT_F64) return fmt(c, "kn_c_f%s(%s, %s)", is_min ? "min" : "max", a, b);
  if (is_float(t)) return fmt(c, "kn_c_f%sf(%s, %s)", is_min ? "min" : "max", a, b);
  bool s = kn_dtype_is_signed(t);
  return fmt(c, "((%s)kn_c_%s%s((%s)%s, (%s)%s))", reg_type(t), s ? "s" : "u", is_min ? "min" : "max",
             s ? "int64_t" : "uint64_t", a, s ? "int64_t" : "uint64_t", b);
}

/* Calls of the float8 helpers with the format's constants. */
static const char *f8_from_bits(cemit *c, kn_dtype t, const char *v) {
  kn_f8_format f = kn_f8_format_of(t);
  if (f.e8m0) return fmt(c, "kn_c_e8m02f(%s)", v);
  if (f.e2m1) return fmt(c, "kn_c_e2m12f(%s)", v);
  return fmt(c, "kn_c_f82f(%s, %d, %d, %d, %d, %d)", v, f.exp_bits, f.man_bits, f.bias, f.fnuz, f.has_inf);
}

static const char *f8_to_bits(cemit *c, kn_dtype t, const char *v) {
  kn_f8_format f = kn_f8_format_of(t);
  if (f.e8m0) return fmt(c, "kn_c_f2e8m0(%s)", v);
  if (f.e2m1) return fmt(c, "kn_c_f2e2m1(%s)", v);
  return fmt(c, "kn_c_f2f8(%s, %d, %d, %d, %d, %du)", v, f.man_bits, f.bias, f.fnuz, f.has_inf, f.max_code);
}

/* Rounds a float register value to the precision of f16 / bf16 / float8. */
static const char *round_to(cemit *c, kn_dtype t, const char *v) {
  if (t == KN_DT_F16) return fmt(c, "kn_c_round_f16(%s)", v);
  if (t == KN_DT_BF16) return fmt(c, "kn_c_round_bf16(%s)", v);
  if (kn_dtype_is_f8(t)) return f8_from_bits(c, t, f8_to_bits(c, t, v));
  return v;
}

static const char *cast(cemit *c, kn_dtype from, kn_dtype to, const char *v) {
  if (from == to) return v;
  if (to == KN_DT_BOOL) return fmt(c, "(%s != 0)", v);
  if (kn_dtype_is_subbyte_int(to)) { /* the low 2 / 4 bits (floats truncate first), sign-extended
                                        for int2 / int4 */
    int mask = (1 << kn_subbyte_int_bits(to)) - 1, half = (mask + 1) / 2;
    v = is_float(from) ? fmt(c, "kn_c_f2i(%s)", v) : fmt(c, "((int64_t)%s)", v);
    if (!kn_dtype_is_signed(to)) return fmt(c, "((uint8_t)(%s & %d))", v, mask);
    return fmt(c, "((int8_t)(((%s & %d) ^ %d) - %d))", v, mask, half, half);
  }
  if (is_float(from)) {
    if (to == KN_DT_U64) return fmt(c, "kn_c_f2u(%s)", v);
    if (kn_dtype_is_int(to)) return fmt(c, "((%s)kn_c_f2i(%s))", reg_type(to), v);
    if (to == KN_DT_F64) return fmt(c, "((%s)%s)", reg_type(to), v);
    if (from == KN_DT_F64 && to == KN_DT_F16) return fmt(c, "kn_c_h2f(kn_c_d2h(%s))", v);
    if (from == KN_DT_F64) v = fmt(c, "((float)%s)", v);
    return round_to(c, to, v);
  }
  if (is_float(to)) return round_to(c, to, fmt(c, "((%s)%s)", reg_type(to), v));
  return fmt(c, "((%s)%s)", reg_type(to), v);
}

/* Memory -> register form of a loaded element. */
static const char *from_mem(cemit *c, kn_dtype t, const char *v) {
  if (t == KN_DT_BOOL) return fmt(c, "(%s != 0)", v);
  if (t == KN_DT_F16) return fmt(c, "kn_c_h2f(%s)", v);
  if (t == KN_DT_BF16) return fmt(c, "kn_c_bf2f(%s)", v);
  if (kn_dtype_is_f8(t)) return f8_from_bits(c, t, v);
  return v;
}

static const char *to_mem(cemit *c, kn_dtype t, const char *v) {
  if (t == KN_DT_BOOL) return fmt(c, "(uint8_t)%s", v);
  if (t == KN_DT_F16) return fmt(c, "kn_c_d2h(%s)", v);
  if (t == KN_DT_BF16) return fmt(c, "kn_c_f2bf(%s)", v);
  if (kn_dtype_is_f8(t)) return f8_to_bits(c, t, v);
  if (kn_dtype_is_subbyte_int(t)) return cast(c, KN_DT_I64, t, v); /* wrapped, as the interpreters */
  return v;
}

static const char *math_call(cemit *c, const kn_expr *e, const char **a) {
  bool dbl = e->dtype == KN_DT_F64;
  const char *sfx = dbl ? "" : "f";
  const char *r;
  switch (e->u.call.fn) {
  case KN_FN_EXP: r = fmt(c, "exp%s(%s)", sfx, a[0]); break;
  case KN_FN_LOG: r = fmt(c, "log%s(%s)", sfx, a[0]); break;
  case KN_FN_SQRT: r = fmt(c, "sqrt%s(%s)", sfx, a[0]); break;
  case KN_FN_ERF: r = fmt(c, "erf%s(%s)", sfx, a[0]); break;
  case KN_FN_TANH: r = fmt(c, "tanh%s(%s)", sfx, a[0]); break;
  case KN_FN_SIGMOID: r = fmt(c, "kn_c_sigmoid%s(%s)", sfx, a[0]); break;
  case KN_FN_FLOOR: r = fmt(c, "floor%s(%s)", sfx, a[0]); break;
  case KN_FN_CEIL: r = fmt(c, "ceil%s(%s)", sfx, a[0]); break;
  case KN_FN_ROUND: r = fmt(c, "nearbyint%s(%s)", sfx, a[0]); break; /* half to even */
  case KN_FN_ABS: r = fmt(c, "fabs%s(%s)", sfx, a[0]); break;
  case KN_FN_SIN: r = fmt(c, "sin%s(%s)", sfx, a[0]); break;
  case KN_FN_COS: r = fmt(c, "cos%s(%s)", sfx, a[0]); break;
  case KN_FN_POW: r = fmt(c, "pow%s(%s, %s)", sfx, a[0], a[1]); break;
  case KN_FN_FMA: r = fmt(c, "(%s * %s + %s)", a[0], a[1], a[2]); break;
  default: KN_UNREACHABLE("not an elementwise float intrinsic");
  }
  return round_to(c, e->dtype, r);
}

/* One step of a horizontal fold: acc OP x. */
static const char *fold_op(cemit *c, kn_fn fn, kn_dtype t, const char *a, const char *b) {
  if (fn == KN_FN_VREDUCE_ADD) return arith(c, t, "+", a, b);
  return minmax(c, t, fn == KN_FN_VREDUCE_MIN, a, b);
}

static const char *gen_lanes_into(cemit *c, const kn_expr *e, kn_cg_sbuf *body, int *scope);

/* VREDUCE_*: a block in the scalar code folding the lanes of its argument by
 * halving (the LLVM back end's order), odd widths finished serially. */
static const char *gen_vreduce(cemit *c, const kn_expr *e) {
  const kn_expr *arg = e->u.call.args[0];
  const char *T = reg_type(e->dtype);
  int t = c->next_temp++;
  if (arg->lanes == 1) return gen(c, arg);
  kn_cg_sbuf body = {0};
  int scope;
  const char *v = gen_lanes_into(c, arg, &body, &scope);
  int L = arg->lanes;
  line(c, c->pre, "%s t%d;", T, t);
  line(c, c->pre, "{");
  c->indent++;
  line(c, c->pre, "%s kv[%d];", T, L);
  line(c, c->pre, "for (int kl = 0; kl < %d; kl++) {", L);
  kn_cg_sbuf_append(c->pre, body.s ? body.s : "", body.n);
  c->indent++;
  line(c, c->pre, "kv[kl] = %s;", v);
  c->indent--;
  line(c, c->pre, "}");
  kn_fn fn = e->u.call.fn;
  line(c, c->pre, "int kh = %d;", L);
  line(c, c->pre, "while (kh > 1 && !(kh & 1)) {");
  line(c, c->pre, "  kh /= 2;");
  line(c, c->pre, "  for (int ki = 0; ki < kh; ki++) kv[ki] = %s;", fold_op(c, fn, e->dtype, "kv[ki]", "kv[ki + kh]"));
  line(c, c->pre, "}");
  line(c, c->pre, "t%d = kv[0];", t);
  line(c, c->pre, "for (int ki = 1; ki < kh; ki++) t%d = %s;", t, fold_op(c, fn, e->dtype, fmt(c, "t%d", t), "kv[ki]"));
  c->indent--;
  line(c, c->pre, "}");
  kn_cg_sbuf_free(&body);
  return fmt(c, "t%d", t);
}

static const char *render(cemit *c, const kn_expr *e) {
  const kn_expr *kids[3];
  int n = n_children(e, kids);
  if (e->kind == KN_E_CALL && (e->u.call.fn == KN_FN_VREDUCE_ADD || e->u.call.fn == KN_FN_VREDUCE_MAX ||
                               e->u.call.fn == KN_FN_VREDUCE_MIN))
    return gen_vreduce(c, e);
  const char *a[3] = {0};
  for (int i = 0; i < n; i++) a[i] = gen(c, kids[i]);
  kn_dtype t = e->dtype;
  switch (e->kind) {
  case KN_E_ADD: return arith(c, t, "+", a[0], a[1]);
  case KN_E_SUB: return arith(c, t, "-", a[0], a[1]);
  case KN_E_MUL: return arith(c, t, "*", a[0], a[1]);
  case KN_E_DIV:
  case KN_E_MOD: return divmod(c, e, a[0], a[1]);
  case KN_E_MIN:
  case KN_E_MAX: return minmax(c, t, e->kind == KN_E_MIN, a[0], a[1]);
  case KN_E_EQ: return fmt(c, "(%s == %s)", a[0], a[1]);
  case KN_E_NE: return fmt(c, "(%s != %s)", a[0], a[1]);
  case KN_E_LT: return fmt(c, "(%s < %s)", a[0], a[1]);
  case KN_E_LE: return fmt(c, "(%s <= %s)", a[0], a[1]);
  case KN_E_GT: return fmt(c, "(%s > %s)", a[0], a[1]);
  case KN_E_GE: return fmt(c, "(%s >= %s)", a[0], a[1]);
  case KN_E_AND: return fmt(c, "((%s)(%s & %s))", reg_type(t), a[0], a[1]);
  case KN_E_OR: return fmt(c, "((%s)(%s | %s))", reg_type(t), a[0], a[1]);
  case KN_E_NOT: return t == KN_DT_BOOL ? fmt(c, "(!%s)", a[0]) : fmt(c, "((%s)~%s)", reg_type(t), a[0]);
  case KN_E_SELECT: return fmt(c, "(%s ? %s : %s)", a[0], a[1], a[2]);
  case KN_E_CAST: return cast(c, e->u.un.a->dtype, t, a[0]);
  case KN_E_CALL:
    if (is_float(t)) return math_call(c, e, a);
    switch (e->u.call.fn) {
    case KN_FN_ABS:
      return kn_dtype_is_signed(t) ? fmt(c, "((%s)kn_c_iabs((int64_t)%s))", reg_type(t), a[0]) : a[0];
    case KN_FN_FLOOR:
    case KN_FN_CEIL:
    case KN_FN_ROUND: return a[0];
    case KN_FN_FMA: return arith(c, t, "+", arith(c, t, "*", a[0], a[1]), a[2]);
    default: KN_UNREACHABLE("float intrinsic applied to an integer");
    }
  case KN_E_LOAD:
    return from_mem(c, e->u.load.buffer->dtype, fmt(c, "%s[%s]", buf_name(c, e->u.load.buffer), a[0]));
  case KN_E_RAMP: {
    KN_ASSERT(c->lane, "RAMP outside a vector statement");
    return fmt(c, "(%s + (int64_t)kl * %s)", a[0], a[1]);
  }
  case KN_E_BROADCAST: return a[0];
  default: KN_UNREACHABLE("unexpected expression kind in C codegen");
  }
}

/* The C text of e's value (for the current lane when e is a vector). */
static const char *gen(cemit *c, const kn_expr *e) {
  switch (e->kind) {
  case KN_E_INT: return int_lit(c, e->dtype, e->u.ival);
  case KN_E_FLOAT: return float_lit(c, e->dtype, e->u.fval);
  case KN_E_VAR: return var_name(c, e->u.var);
  default: break;
  }
  bool vec = e->lanes > 1;
  KN_ASSERT(!vec || c->lane, "vector expression outside a vector statement");
  kn_cg_dag_slot *s = slot_of(c, e);
  if (s->temp >= 0 && (s->scope == 0 || s->scope == c->lane_scope)) return fmt(c, "t%d", s->temp);
  int uses = s->uses;
  const char *text = render(c, e);
  if (uses <= 1 && !(c->lane && !vec)) return text;
  int t = c->next_temp++;
  kn_cg_sbuf *dst = vec ? c->lane : c->pre;
  int saved = c->indent;
  if (vec) c->indent++;
  line(c, dst, "const %s t%d = %s;", reg_type(e->dtype), t, text);
  c->indent = saved;
  s = slot_of(c, e); /* the table may have grown */
  s->temp = t;
  s->scope = vec ? c->lane_scope : 0;
  return fmt(c, "t%d", t);
}

/* Renders vector e for one lane `kl`, with its per-lane temporaries appended
 * to `body` (scalar ones go to the statement's scalar code). */
static const char *gen_lanes_into(cemit *c, const kn_expr *e, kn_cg_sbuf *body, int *scope) {
  kn_cg_sbuf *saved_lane = c->lane;
  int saved_scope = c->lane_scope;
  c->lane = body;
  c->lane_scope = *scope = ++c->next_scope;
  const char *v = gen(c, e);
  c->lane = saved_lane;
  c->lane_scope = saved_scope;
  return v;
}

/* ---- statements ---- */

static void emit_stmt(cemit *c, const kn_stmt *s);

/* Starts a statement: counts uses over its expressions; `pre` collects the
 * scalar code. */
static void stmt_begin(cemit *c, kn_cg_sbuf *pre, const kn_expr *a, const kn_expr *b) {
  kn_cg_dag_clear(&c->dag);
  if (a) kn_cg_dag_count_uses(&c->dag, a);
  if (b) kn_cg_dag_count_uses(&c->dag, b);
  c->pre = pre;
  c->lane = NULL;
  c->lane_scope = 0;
}

/* Does `e` load from `buf` at an index other than `index`? (Each node of
 * the DAG is visited once.) */
static bool reads_other_lanes(cemit *c, const kn_expr *e, const kn_buffer *buf, const kn_expr *index) {
  kn_cg_dag_slot *s = slot_of(c, e);
  if (s->seen) return false;
  s->seen = true;
  if (e->kind == KN_E_LOAD && e->u.load.buffer == buf && e->u.load.index != index &&
      !kn_e_equal(e->u.load.index, index))
    return true;
  const kn_expr *kids[3];
  int n = n_children(e, kids);
  for (int i = 0; i < n; i++)
    if (reads_other_lanes(c, kids[i], buf, index)) return true;
  return false;
}

static void emit_store(cemit *c, const kn_stmt *s) {
  const kn_buffer *buf = s->u.store.buffer;
  const kn_expr *index = s->u.store.index, *value = s->u.store.value;
  const char *name = buf_name(c, buf);
  kn_cg_sbuf pre = {0};
  c->indent++;
  stmt_begin(c, &pre, index, value);
  if (index->lanes == 1) {
    const char *v = gen(c, value), *i = gen(c, index);
    line(c, &pre, "%s[%s] = %s;", name, i, to_mem(c, buf->dtype, v));
  } else {
    int L = index->lanes;
    int64_t stride;
    /* One loop when lane l writes element l only and reads no other lane's. */
    bool direct = index->kind == KN_E_RAMP && const_int(index->u.ramp.stride, &stride) && stride != 0 &&
                  !reads_other_lanes(c, value, buf, index);
    kn_cg_sbuf body = {0};
    int scope;
    const char *v = gen_lanes_into(c, value, &body, &scope);
    c->lane = &body;
    c->lane_scope = scope;
    const char *i = gen(c, index);
    c->lane = NULL;
    c->lane_scope = 0;
    if (direct) {
      line(c, &pre, "for (int kl = 0; kl < %d; kl++) {", L);
      kn_cg_sbuf_append(&pre, body.s ? body.s : "", body.n);
      line(c, &pre, "  %s[%s] = %s;", name, i, to_mem(c, buf->dtype, v));
      line(c, &pre, "}");
    } else {
      line(c, &pre, "%s kv[%d];", mem_type(buf->dtype), L);
      line(c, &pre, "int64_t kx[%d];", L);
      line(c, &pre, "for (int kl = 0; kl < %d; kl++) {", L);
      kn_cg_sbuf_append(&pre, body.s ? body.s : "", body.n);
      line(c, &pre, "  kx[kl] = %s;", i);
      line(c, &pre, "  kv[kl] = %s;", to_mem(c, buf->dtype, v));
      line(c, &pre, "}");
      line(c, &pre, "for (int kl = 0; kl < %d; kl++) %s[kx[kl]] = kv[kl];", L, name);
    }
    kn_cg_sbuf_free(&body);
  }
  c->indent--;
  line(c, c->out, "{");
  kn_cg_sbuf_append(c->out, pre.s, pre.n);
  line(c, c->out, "}");
  kn_cg_sbuf_free(&pre);
}

static void emit_for(cemit *c, const kn_stmt *s) {
  KN_ASSERT(s->u.loop.kind == KN_FOR_SERIAL || s->u.loop.kind == KN_FOR_PARALLEL,
            "VECTORIZED / UNROLLED loop reached codegen (run kn_loop_finalize)");
  kn_cg_sbuf pre = {0};
  c->indent++;
  stmt_begin(c, &pre, s->u.loop.min, s->u.loop.extent);
  const char *min = gen(c, s->u.loop.min), *extent = gen(c, s->u.loop.extent);
  const char *v = var_name(c, s->u.loop.var);
  bool split = s->u.loop.kind == KN_FOR_PARALLEL && c->parallel_depth == 0;
  if (split) {
    KN_ASSERT(c->n_split == 0, "a kernel may split only one PARALLEL loop across tasks");
    KN_ASSERT(c->loop_depth == 0, "the PARALLEL loop split across tasks is inside another loop");
    c->n_split++;
    line(c, &pre, "const int64_t kmin = %s, kext = %s;", min, extent);
    line(c, &pre, "const int64_t kbeg = kmin + task * kext / ntasks, kend = kmin + (task + 1) * kext / ntasks;");
  } else {
    line(c, &pre, "const int64_t kbeg = %s, kend = kbeg + %s;", min, extent);
  }
  line(c, &pre, "for (int64_t %s = kbeg; %s < kend; %s++) {", v, v, v);
  c->indent--;
  line(c, c->out, "{");
  kn_cg_sbuf_append(c->out, pre.s, pre.n);
  kn_cg_sbuf_free(&pre);
  c->indent += 2;
  bool par = s->u.loop.kind == KN_FOR_PARALLEL;
  c->parallel_depth += par;
  c->loop_depth++;
  emit_stmt(c, s->u.loop.body);
  c->loop_depth--;
  c->parallel_depth -= par;
  c->indent -= 2;
  line(c, c->out, "  }");
  line(c, c->out, "}");
}

static void emit_let(cemit *c, const kn_stmt *s) {
  KN_ASSERT(s->u.let.value->lanes == 1, "vector LET");
  kn_cg_sbuf pre = {0};
  c->indent++;
  stmt_begin(c, &pre, s->u.let.value, NULL);
  const char *v = gen(c, s->u.let.value);
  line(c, &pre, "const %s %s = %s;", reg_type(s->u.let.value->dtype), var_name(c, s->u.let.var), v);
  c->indent--;
  line(c, c->out, "{");
  kn_cg_sbuf_append(c->out, pre.s, pre.n);
  kn_cg_sbuf_free(&pre);
  c->indent++;
  emit_stmt(c, s->u.let.body);
  c->indent--;
  line(c, c->out, "}");
}

static void emit_if(cemit *c, const kn_stmt *s) {
  KN_ASSERT(s->u.ifs.cond->lanes == 1, "vector IF condition");
  kn_cg_sbuf pre = {0};
  c->indent++;
  stmt_begin(c, &pre, s->u.ifs.cond, NULL);
  const char *cond = gen(c, s->u.ifs.cond);
  line(c, &pre, "if (%s) {", cond);
  c->indent--;
  line(c, c->out, "{");
  kn_cg_sbuf_append(c->out, pre.s, pre.n);
  kn_cg_sbuf_free(&pre);
  c->indent += 2;
  emit_stmt(c, s->u.ifs.then_s);
  c->indent -= 2;
  if (s->u.ifs.else_s) {
    line(c, c->out, "  } else {");
    c->indent += 2;
    emit_stmt(c, s->u.ifs.else_s);
    c->indent -= 2;
  }
  line(c, c->out, "  }");
  line(c, c->out, "}");
}

static void emit_alloc(cemit *c, const kn_stmt *s) {
  const kn_buffer *buf = s->u.alloc.buffer;
  KN_ASSERT(buf->kind == KN_BUF_LOCAL && buf->size > 0, "ALLOC of a bad buffer");
  char name[24];
  snprintf(name, sizeof name, "l%d", c->next_local++);
  line(c, c->out, "{");
  line(c, c->out, "  %s %s[%lld]; /* %s */", mem_type(buf->dtype), name, (long long)buf->size,
       buf->name ? buf->name : "");
  push_buf(c, buf, name);
  c->indent++;
  emit_stmt(c, s->u.alloc.body);
  c->indent--;
  c->n_bufs--;
  line(c, c->out, "}");
}

static void emit_stmt(cemit *c, const kn_stmt *s) {
  if (!s) return;
  switch (s->kind) {
  case KN_S_FOR: emit_for(c, s); return;
  case KN_S_STORE: emit_store(c, s); return;
  case KN_S_ALLOC: emit_alloc(c, s); return;
  case KN_S_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) emit_stmt(c, s->u.seq.stmts[i]);
    return;
  case KN_S_IF: emit_if(c, s); return;
  case KN_S_LET: emit_let(c, s); return;
  case KN_S_PREFETCH: return; /* a hint without a portable C spelling: dropped */
  case KN_S_GPU: KN_UNREACHABLE("GPU statement in a CPU kernel");
  }
  KN_UNREACHABLE("unknown statement kind");
}

void kn_cg_c_kernel(kn_cg_sbuf *out, const kn_kernel *k) {
  cemit c = {.out = out, .k = k};
  kn_arena_init(&c.strings);
  kn_cg_sbuf_printf(out, "/* %s: %s */\n", k->name, k->nodes ? k->nodes : "");
  kn_cg_sbuf_printf(out, "static void %s(void *const *args, int64_t batch, int64_t task, int64_t ntasks) {\n",
                    k->name);
  for (int i = 0; i < k->n_params; i++) {
    const kn_buffer *p = k->params[i];
    KN_ASSERT(p->kind == KN_BUF_PARAM, "kernel parameter is not a PARAM buffer");
    bool ro = !kn_stmt_stores_to(k->body, p);
    char name[24];
    snprintf(name, sizeof name, "p%d", i);
    kn_cg_sbuf_printf(out, "  %s%s *restrict %s = (%s%s *)args[%d]; /* %s */\n", ro ? "const " : "",
                      mem_type(p->dtype), name, ro ? "const " : "", mem_type(p->dtype), i,
                      p->name ? p->name : "");
    kn_cg_sbuf_printf(out, "  (void)%s;\n", name);
    push_buf(&c, p, name);
  }
  kn_cg_sbuf_printf(out, "  (void)batch;\n  (void)task;\n  (void)ntasks;\n");
  c.indent = 1;
  emit_stmt(&c, k->body);
  kn_cg_sbuf_printf(out, "}\n\n");
  kn_cg_dag_free(&c.dag);
  free(c.bufs);
  kn_arena_free(&c.strings);
}
