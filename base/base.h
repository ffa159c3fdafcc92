/* base.h — the few things every Kiln module uses: arenas, diagnostics, the
 * internal assert, and element types.
 *
 * Two error tiers (STYLE.md): bad *input* returns a status and appends a
 * one-line message to a kn_diag; a compiler *bug* aborts via KN_ASSERT. */
#ifndef KN_BASE_H
#define KN_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- internal assert: a bug in Kiln, never bad input ---- */
_Noreturn void kn_internal_error(const char *file, int line, const char *cond, const char *msg);
#define KN_ASSERT(cond, msg)                                                   \
  do {                                                                         \
    if (!(cond)) kn_internal_error(__FILE__, __LINE__, #cond, (msg));          \
  } while (0)
#define KN_UNREACHABLE(msg) kn_internal_error(__FILE__, __LINE__, "unreachable", (msg))

/* ---- arena: owns IR memory; freed whole ---- */
typedef struct kn_arena_block kn_arena_block;
typedef struct kn_arena {
  kn_arena_block *head;
} kn_arena;

void kn_arena_init(kn_arena *a);
void kn_arena_free(kn_arena *a);
/* Zeroed, 64-byte aligned memory living until kn_arena_free. Aborts on OOM. */
void *kn_arena_alloc(kn_arena *a, size_t size);
char *kn_arena_strdup(kn_arena *a, const char *s);
char *kn_arena_printf(kn_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define KN_NEW(arena, type) ((type *)kn_arena_alloc((arena), sizeof(type)))
#define KN_NEW_ARRAY(arena, type, n) ((type *)kn_arena_alloc((arena), sizeof(type) * (size_t)(n)))

/* ---- diagnostics: messages about bad input, one line each ---- */
typedef struct kn_diag {
  char **lines;
  int count, cap;
} kn_diag;

void kn_diag_init(kn_diag *d);
void kn_diag_free(kn_diag *d);
/* Appends one line (no trailing newline needed; control characters become
 * '?', and lines beyond 2000 bytes are cut). Always returns -1 so callers
 * can write `return kn_diag_error(d, ...)`. */
int kn_diag_error(kn_diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Puts `prefix` before those of lines [first, count) that do not start with
 * it yet (cut again at 2000 bytes), so that a caller can say what the lines
 * of a nested step are about. */
void kn_diag_prefix(kn_diag *d, int first, const char *prefix);
/* Prints every line as "kiln: error: <line>" to stderr. */
void kn_diag_print(const kn_diag *d, const char *prefix);

/* ---- element types ---- */
#define KN_DTYPES(X)                                                           \
  /* enum    name        bytes onnx_code */                                    \
  X(F32, "float32", 4, 1)                                                      \
  X(U8, "uint8", 1, 2)                                                         \
  X(I8, "int8", 1, 3)                                                          \
  X(U16, "uint16", 2, 4)                                                       \
  X(I16, "int16", 2, 5)                                                        \
  X(I32, "int32", 4, 6)                                                        \
  X(I64, "int64", 8, 7)                                                        \
  X(BOOL, "bool", 1, 9)                                                        \
  X(F16, "float16", 2, 10)                                                     \
  X(F64, "float64", 8, 11)                                                     \
  X(U32, "uint32", 4, 12)                                                      \
  X(U64, "uint64", 8, 13)                                                      \
  X(BF16, "bfloat16", 2, 16)                                                   \
  X(F8E4M3FN, "float8e4m3fn", 1, 17)                                           \
  X(F8E4M3FNUZ, "float8e4m3fnuz", 1, 18)                                       \
  X(F8E5M2, "float8e5m2", 1, 19)                                               \
  X(F8E5M2FNUZ, "float8e5m2fnuz", 1, 20)                                       \
  X(F8E8M0, "float8e8m0", 1, 24)                                               \
  X(U4, "uint4", 1, 21)                                                        \
  X(I4, "int4", 1, 22)                                                         \
  X(F4E2M1, "float4e2m1", 1, 23)                                               \
  X(U2, "uint2", 1, 25)                                                        \
  X(I2, "int2", 1, 26)

typedef enum kn_dtype {
  KN_DT_INVALID = 0,
#define X(e, name, bytes, onnx) KN_DT_##e,
  KN_DTYPES(X)
#undef X
      KN_DT_COUNT
} kn_dtype;

size_t kn_dtype_size(kn_dtype t);
const char *kn_dtype_name(kn_dtype t);
/* ONNX TensorProto.DataType code <-> kn_dtype; KN_DT_INVALID if unsupported. */
kn_dtype kn_dtype_from_onnx(int code);
int kn_dtype_to_onnx(kn_dtype t);
bool kn_dtype_is_float(kn_dtype t);
bool kn_dtype_is_int(kn_dtype t); /* signed or unsigned integers, not bool */
bool kn_dtype_is_signed(kn_dtype t);

/* float16 / bfloat16 conversion helpers (round to nearest even). */
float kn_f16_to_f32(uint16_t h);
uint16_t kn_f32_to_f16(float f);
float kn_bf16_to_f32(uint16_t h);
uint16_t kn_f32_to_bf16(float f);

/* Float max / min as the kernels compute KN_E_MAX / MIN: NaN when either
 * operand is (numpy's maximum; ONNX Max, Relu, Clip). For the interpreters. */
static inline double kn_max_nan(double a, double b) { return a > b || a != a ? a : b; }
static inline double kn_min_nan(double a, double b) { return a < b || a != a ? a : b; }

/* Float -> integer as every evaluator and the kernels convert (a C cast or
 * LLVM's fptosi would be undefined / poison for NaN and values out of
 * range): NaN gives 0, values beyond int64 saturate, the rest truncate
 * toward zero; a narrower integer then keeps the low bits (wraps, as an
 * int64 -> intN conversion does). uint64 saturates to [0, 2^64 - 1]. */
static inline int64_t kn_f2i64_sat(double v) {
  if (v != v) return 0;
  if (v >= 9223372036854775808.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}
static inline uint64_t kn_f2u64_sat(double v) {
  if (!(v > -1.0)) return 0; /* NaN, or at most -1 */
  if (v >= 18446744073709551616.0) return UINT64_MAX;
  return v < 0 ? 0 : (uint64_t)v;
}
/* The int64 bits of v converted to integer type t (uint64's as their bits),
 * before any narrowing. */
static inline int64_t kn_f2int_sat(kn_dtype t, double v) {
  return t == KN_DT_U64 ? (int64_t)kn_f2u64_sat(v) : kn_f2i64_sat(v);
}

/* Floor division and modulo of int64: the loop IR's integer DIV and MOD
 * (ir/loop/expr.h) as every evaluator, the simplifier and the kernels
 * compute them. The quotient rounds toward -infinity and the remainder takes
 * b's sign, so a == kn_floordiv_i64(a, b) * b + kn_floormod_i64(a, b) for
 * b != 0. Total, never a trap: x / 0 == 0 and x % 0 == 0; INT64_MIN / -1
 * wraps to INT64_MIN and INT64_MIN % -1 == 0. codegen/c_emit.c spells the
 * same two functions out as kn_c_fdiv / kn_c_fmod in the prelude of the
 * generated C (which stands alone): they agree case for case, keep them so. */
static inline int64_t kn_floordiv_i64(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0 - (uint64_t)a); /* a / -1 overflows for INT64_MIN */
  int64_t q = a / b, r = a % b;
  return r != 0 && (r ^ b) < 0 ? q - 1 : q;
}
static inline int64_t kn_floormod_i64(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  return r != 0 && (r ^ b) < 0 ? r + b : r;
}

/* ---- sub-byte types (ONNX UINT4, INT4, FLOAT4E2M1, UINT2, INT2) ----
 * ONNX packs them two (four) per byte, lowest bits first. Inside Kiln and in
 * the artifact ABI they take ONE BYTE PER ELEMENT instead: int4 is an int8 in
 * -8..7 (sign-extended), uint4 a uint8 in 0..15, int2 an int8 in -2..1,
 * uint2 a uint8 in 0..3, float4e2m1 its 4-bit code (sign in bit 3) in the
 * low nibble. The frontend unpacks TensorProto data (frontend/onnx_tensor.c).
 * The integers compute in int8/uint8 registers; casts to them wrap to their
 * width (floats truncate toward zero first), as ONNX's reference (ml_dtypes)
 * does. float4e2m1 is one of the minifloat formats below (kn_dtype_is_f8). */
bool kn_dtype_is_subbyte_int(kn_dtype t); /* KN_DT_I4, U4, I2 or U2 */
static inline int kn_subbyte_int_bits(kn_dtype t) { return t == KN_DT_I2 || t == KN_DT_U2 ? 2 : 4; }
/* The low 2 / 4 bits of v, sign-extended for int2 / int4. */
static inline int64_t kn_subbyte_wrap(kn_dtype t, int64_t v) {
  int bits = kn_subbyte_int_bits(t);
  int64_t low = v & ((1 << bits) - 1);
  bool neg = (t == KN_DT_I4 || t == KN_DT_I2) && low >= (1 << (bits - 1));
  return neg ? low - (1 << bits) : low;
}

/* ---- float8 storage formats (ONNX FLOAT8E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0)
 * and float4e2m1 (one byte per element, the code in the low nibble) ----
 * One byte: sign, `exp_bits` exponent bits (bias `bias`), `man_bits`
 * mantissa bits, subnormals. E5M2 is IEEE-like (infinities, several NaNs);
 * E4M3FN has no infinity and one NaN per sign (all ones); the FNUZ formats
 * have neither infinity nor -0: 0x80 is their only NaN. Values compute in
 * f32 registers and are rounded when cast or stored, like float16. */
typedef struct kn_f8_format {
  int exp_bits, man_bits, bias;
  bool fnuz;        /* 0x80 is NaN; no -0, no infinity */
  bool has_inf;     /* E5M2: exponent all ones = inf / NaN */
  uint8_t max_code; /* largest finite magnitude (sign clear) */
  float max;        /* its value */
  bool e8m0;        /* E8M0: no sign, no mantissa: code e is 2^(e - 127), 0xff NaN */
  bool e2m1;        /* FLOAT4E2M1: 4 bits, sign in bit 3; 0, 0.5, 1, 1.5, 2, 3, 4, 6;
                       no inf / NaN: encoding saturates, NaN gives -0 (code 8) */
} kn_f8_format;

bool kn_dtype_is_f8(kn_dtype t);
/* The format of a float8 dtype (KN_ASSERT on any other dtype). */
kn_f8_format kn_f8_format_of(kn_dtype t);
float kn_f8_to_f32(kn_dtype t, uint8_t bits);
/* Round to nearest even, without saturation: magnitudes past the largest
 * finite value become infinity (E5M2) or NaN (the others), as a plain ONNX
 * Cast with saturate=0; Cast with saturate=1 clamps to +-max first.
 * E8M0 instead takes the exponent of |x| rounded up (a nonzero fraction adds
 * one, but never past 0xfe), infinity and NaN give 0xff: ONNX Cast with
 * round_mode "up" and saturate, its defaults; except that +-2^-127, the
 * value of code 0, gives 0 (ONNX's rounding gives 1), so that a decoded value
 * stores back unchanged (values are rounded on casts and again on stores). */
uint8_t kn_f32_to_f8(kn_dtype t, float f);
/* float4e2m1 (kn_f32_to_f8's case for it): nearest even, saturating to +-6. */
uint8_t kn_f32_to_f4e2m1(float x);

#endif
