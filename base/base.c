/* base.c — arenas, diagnostics, dtype tables. */
#include "base/base.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

/* Longest diagnostic line kept (longer ones end in "..."). */
#define KN_DIAG_MAX_LINE 2000

_Noreturn void kn_internal_error(const char *file, int line, const char *cond, const char *msg) {
  fprintf(stderr, "kiln: internal error at %s:%d: %s (%s)\n", file, line, msg ? msg : "", cond);
  abort();
}

struct kn_arena_block {
  kn_arena_block *next;
  size_t used, size;
  _Alignas(64) unsigned char data[];
};

void kn_arena_init(kn_arena *a) { a->head = NULL; }

void kn_arena_free(kn_arena *a) {
  kn_arena_block *b = a->head;
  while (b) {
    kn_arena_block *next = b->next;
    free(b);
    b = next;
  }
  a->head = NULL;
}

void *kn_arena_alloc(kn_arena *a, size_t size) {
  size = (size + 63) & ~(size_t)63;
  if (size == 0) size = 64;
  kn_arena_block *b = a->head;
  if (!b || b->used + size > b->size) {
    /* blocks grow from 16 KiB to 1 MiB: short-lived arenas (one shape
     * inference, one node's reference evaluation) stay small */
    size_t grow = b ? (b->size >= (1u << 20) ? (1u << 20) : b->size * 2) : (1u << 14);
    size_t cap = size > grow ? size : grow;
    b = aligned_alloc(64, (sizeof(kn_arena_block) + cap + 63) & ~(size_t)63);
    KN_ASSERT(b, "out of memory");
    b->size = cap;
    b->used = 0;
    /* Keep the partially used block at the head when a big block is made. */
    if (a->head && size > (1u << 20)) {
      b->next = a->head->next;
      a->head->next = b;
    } else {
      b->next = a->head;
      a->head = b;
    }
  }
  void *p = b->data + b->used;
  b->used += size;
  memset(p, 0, size);
  return p;
}

char *kn_arena_strdup(kn_arena *a, const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s);
  char *p = kn_arena_alloc(a, n + 1);
  memcpy(p, s, n + 1);
  return p;
}

char *kn_arena_printf(kn_arena *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *p = kn_arena_alloc(a, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return p;
}

void kn_diag_init(kn_diag *d) { memset(d, 0, sizeof *d); }

void kn_diag_free(kn_diag *d) {
  for (int i = 0; i < d->count; i++) free(d->lines[i]);
  free(d->lines);
  memset(d, 0, sizeof *d);
}

int kn_diag_error(kn_diag *d, const char *fmt, ...) {
  if (!d) return -1;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *line = malloc((size_t)n + 1);
  KN_ASSERT(line, "out of memory");
  va_start(ap, fmt);
  vsnprintf(line, (size_t)n + 1, fmt, ap);
  va_end(ap);
  /* one line, of sane length, whatever names a hostile model holds */
  for (char *c = line; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
  if (n > KN_DIAG_MAX_LINE) strcpy(line + KN_DIAG_MAX_LINE - 3, "...");
  if (d->count == d->cap) {
    d->cap = d->cap ? d->cap * 2 : 8;
    d->lines = realloc(d->lines, sizeof(char *) * (size_t)d->cap);
    KN_ASSERT(d->lines, "out of memory");
  }
  d->lines[d->count++] = line;
  return -1;
}

void kn_diag_prefix(kn_diag *d, int first, const char *prefix) {
  if (!d) return;
  size_t np = strlen(prefix);
  char *clean = malloc(np + 1); /* as kn_diag_error would have written it */
  KN_ASSERT(clean, "out of memory");
  for (size_t k = 0; k <= np; k++)
    clean[k] = k < np && ((unsigned char)prefix[k] < 0x20 || prefix[k] == 0x7f) ? '?' : prefix[k];
  for (int i = first < 0 ? 0 : first; i < d->count; i++) {
    if (!strncmp(d->lines[i], clean, np)) continue; /* said by a nested step already */
    size_t nl = strlen(d->lines[i]);
    char *line = malloc(np + nl + 1);
    KN_ASSERT(line, "out of memory");
    memcpy(line, clean, np);
    memcpy(line + np, d->lines[i], nl + 1);
    if (np + nl > KN_DIAG_MAX_LINE) strcpy(line + KN_DIAG_MAX_LINE - 3, "...");
    free(d->lines[i]);
    d->lines[i] = line;
  }
  free(clean);
}

void kn_diag_print(const kn_diag *d, const char *prefix) {
  for (int i = 0; i < d->count; i++)
    fprintf(stderr, "%s: error: %s\n", prefix ? prefix : "kiln", d->lines[i]);
}

static const struct {
  const char *name;
  size_t bytes;
  int onnx;
} dtype_table[KN_DT_COUNT] = {
    [KN_DT_INVALID] = {"invalid", 0, 0},
#define X(e, name, bytes, onnx) [KN_DT_##e] = {name, bytes, onnx},
    KN_DTYPES(X)
#undef X
};

size_t kn_dtype_size(kn_dtype t) { return t < KN_DT_COUNT ? dtype_table[t].bytes : 0; }
const char *kn_dtype_name(kn_dtype t) { return t < KN_DT_COUNT ? dtype_table[t].name : "invalid"; }

kn_dtype kn_dtype_from_onnx(int code) {
  for (int t = 1; t < KN_DT_COUNT; t++)
    if (dtype_table[t].onnx == code) return (kn_dtype)t;
  return KN_DT_INVALID;
}

int kn_dtype_to_onnx(kn_dtype t) { return t < KN_DT_COUNT ? dtype_table[t].onnx : 0; }

bool kn_dtype_is_float(kn_dtype t) {
  return t == KN_DT_F32 || t == KN_DT_F16 || t == KN_DT_BF16 || t == KN_DT_F64 || kn_dtype_is_f8(t);
}
bool kn_dtype_is_int(kn_dtype t) {
  return t == KN_DT_U8 || t == KN_DT_I8 || t == KN_DT_U16 || t == KN_DT_I16 || t == KN_DT_I32 ||
         t == KN_DT_I64 || t == KN_DT_U32 || t == KN_DT_U64 || kn_dtype_is_subbyte_int(t);
}
bool kn_dtype_is_signed(kn_dtype t) {
  return t == KN_DT_I8 || t == KN_DT_I4 || t == KN_DT_I2 || t == KN_DT_I16 || t == KN_DT_I32 || t == KN_DT_I64 ||
         kn_dtype_is_float(t);
}

float kn_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { /* subnormal: renormalise */
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        exp--;
      }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t kn_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (exp >= 31) return (uint16_t)(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10) return (uint16_t)sign;
    mant |= 0x800000;
    uint32_t shift = (uint32_t)(14 - exp);
    uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t half = sign | ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++;
  return (uint16_t)half;
}

float kn_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t kn_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

/* ---- float8 ---- */

bool kn_dtype_is_f8(kn_dtype t) {
  return t == KN_DT_F8E4M3FN || t == KN_DT_F8E4M3FNUZ || t == KN_DT_F8E5M2 || t == KN_DT_F8E5M2FNUZ ||
         t == KN_DT_F8E8M0 || t == KN_DT_F4E2M1;
}

bool kn_dtype_is_subbyte_int(kn_dtype t) {
  return t == KN_DT_I4 || t == KN_DT_U4 || t == KN_DT_I2 || t == KN_DT_U2;
}

kn_f8_format kn_f8_format_of(kn_dtype t) {
  switch (t) {
  case KN_DT_F8E4M3FN: return (kn_f8_format){4, 3, 7, false, false, 0x7e, 448.0f, false, false};
  case KN_DT_F8E4M3FNUZ: return (kn_f8_format){4, 3, 8, true, false, 0x7f, 240.0f, false, false};
  case KN_DT_F8E5M2: return (kn_f8_format){5, 2, 15, false, true, 0x7b, 57344.0f, false, false};
  case KN_DT_F8E5M2FNUZ: return (kn_f8_format){5, 2, 16, true, false, 0x7f, 57344.0f, false, false};
  case KN_DT_F8E8M0: return (kn_f8_format){8, 0, 127, false, false, 0xfe, 0x1p127f, true, false};
  case KN_DT_F4E2M1: return (kn_f8_format){2, 1, 1, false, false, 0x7, 6.0f, false, true};
  default: KN_UNREACHABLE("not a float8 dtype");
  }
}

float kn_f8_to_f32(kn_dtype t, uint8_t bits) {
  kn_f8_format f = kn_f8_format_of(t);
  if (f.e8m0) return bits == 0xff ? __builtin_nanf("") : ldexpf(1.0f, bits - 127);
  if (f.e2m1) {
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    return (bits & 8) ? -mag[bits & 7] : mag[bits & 7];
  }
  int man_mask = (1 << f.man_bits) - 1, exp_max = (1 << f.exp_bits) - 1;
  int e = (bits >> f.man_bits) & exp_max, m = bits & man_mask;
  bool neg = bits & 0x80;
  if (f.fnuz && bits == 0x80) return __builtin_nanf("");
  if (!f.fnuz && !f.has_inf && (bits & 0x7f) == 0x7f) return __builtin_nanf("");
  if (f.has_inf && e == exp_max) return m ? __builtin_nanf("") : neg ? -__builtin_inff() : __builtin_inff();
  float v = e == 0 ? ldexpf((float)m, 1 - f.bias - f.man_bits)
                   : ldexpf((float)(m | (1 << f.man_bits)), e - f.bias - f.man_bits);
  return neg ? -v : v;
}

/* Nearest even by counting the midpoints below |x| (a tie goes to the even
 * code: '>' where the lower neighbour's code is even, '>=' where the upper's
 * is); above 5 is 6 (saturation); NaN compares false everywhere and gets
 * the sign bit alone (-0, as ml_dtypes). codegen/ emits the same sum. */
uint8_t kn_f32_to_f4e2m1(float x) {
  float a = fabsf(x);
  int code = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
  return (uint8_t)(code | (x != x || signbit(x) ? 8 : 0));
}

uint8_t kn_f32_to_f8(kn_dtype t, float x) {
  kn_f8_format f = kn_f8_format_of(t);
  if (f.e8m0) {
    uint32_t b;
    memcpy(&b, &x, 4);
    uint32_t e = (b >> 23) & 0xff;
    if ((b & 0x7fffffffu) == 0x00400000u) return 0; /* 2^-127 = code 0 (see base.h) */
    return (uint8_t)(e == 0xff ? 0xff : e + ((b & 0x7fffff) != 0 && e < 0xfe));
  }
  if (f.e2m1) return kn_f32_to_f4e2m1(x);
  uint8_t nan = f.fnuz ? 0x80 : 0x7f;
  if (x != x) return nan;
  uint32_t bits;
  memcpy(&bits, &x, 4);
  uint8_t sign = (uint8_t)((bits >> 24) & 0x80);
  bits &= 0x7fffffffu;
  int e = (int)(bits >> 23) - 127 + f.bias; /* the float8 exponent field, if normal */
  uint32_t code;
  if (bits >= 0x7f800000u) {
    code = 0xff; /* infinity: overflow below */
  } else if (e >= 1) { /* normal: round the mantissa to man_bits, nearest even */
    int drop = 23 - f.man_bits;
    uint32_t r = bits + ((1u << (drop - 1)) - 1) + ((bits >> drop) & 1);
    code = (r >> drop) - ((uint32_t)(127 - f.bias) << f.man_bits);
  } else { /* subnormal: an integer multiple of 2^(1 - bias - man_bits) */
    float scaled, a;
    memcpy(&a, &bits, 4);
    scaled = ldexpf(a, f.bias - 1 + f.man_bits);
    code = (uint32_t)nearbyintf(scaled); /* the default rounding mode: nearest even */
  }
  if (code > f.max_code) return f.has_inf ? (uint8_t)(sign | 0x7c) : nan;
  if (code == 0 && f.fnuz) return 0;
  return (uint8_t)(sign | code);
}
