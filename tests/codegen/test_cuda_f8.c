/* test_cuda_f8.c — the float8 / float4e2m1 / float8e8m0 conversions of the
 * generated CUDA C (codegen/cuda_f8.h, the text the emitter embeds), compiled
 * here as C, against base/base.h's kn_f8_to_f32 / kn_f32_to_f8 bit for bit:
 * no GPU runs them here, and the GPU interpreter uses base.h's.
 *
 * Per format: every byte decoded; encoded, the boundaries that matter
 * (each midpoint between neighbouring codes and the floats just below and
 * above it, each code's value and its neighbours, past the largest finite
 * value), the specials (+-0, +-infinity, NaNs with payloads and signs,
 * f32 subnormals, FLT_MAX) and every float32 whose bits are a multiple of
 * a stride, both signs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <float.h>
#include <math.h>
#include <cmocka.h>

#include "base/base.h"

#define KN_CU static inline
static inline unsigned int kn_cu_as_uint(float x) {
  unsigned int b;
  memcpy(&b, &x, sizeof b);
  return b;
}
static inline float kn_cu_as_float(unsigned int b) {
  float x;
  memcpy(&x, &b, sizeof x);
  return x;
}
#include "codegen/cuda_f8.h"
#undef KN_CU

static const kn_dtype formats[] = {KN_DT_F8E4M3FN, KN_DT_F8E4M3FNUZ, KN_DT_F8E5M2,
                                   KN_DT_F8E5M2FNUZ, KN_DT_F8E8M0,   KN_DT_F4E2M1};
#define N_FORMATS ((int)(sizeof formats / sizeof formats[0]))

/* The call the emitter writes for format t (cuda_expr.c's f8_from_bits). */
static float device_decode(kn_dtype t, unsigned char b) {
  kn_f8_format f = kn_f8_format_of(t);
  if (f.e8m0) return kn_cu_e8m02f(b);
  if (f.e2m1) return kn_cu_e2m12f(b);
  return kn_cu_f82f(b, f.exp_bits, f.man_bits, f.bias, f.fnuz, f.has_inf);
}

static unsigned char device_encode(kn_dtype t, float x) {
  kn_f8_format f = kn_f8_format_of(t);
  if (f.e8m0) return kn_cu_f2e8m0(x);
  if (f.e2m1) return kn_cu_f2e2m1(x);
  return kn_cu_f2f8(x, f.man_bits, f.bias, f.fnuz, f.has_inf, f.max_code);
}

static uint32_t bits_of(float x) { return kn_cu_as_uint(x); }

typedef struct tally {
  long checked, wrong;
} tally;

static void check_encode(tally *n, kn_dtype t, float x) {
  uint8_t want = kn_f32_to_f8(t, x), got = device_encode(t, x);
  n->checked++;
  if (want != got && n->wrong++ < 8)
    fprintf(stderr, "%s: encode 0x%08x (%a): base.h 0x%02x, device 0x%02x\n", kn_dtype_name(t), bits_of(x), x,
            want, got);
}

/* x, the floats just below and above it, and their negations. */
static void check_around(tally *n, kn_dtype t, float x) {
  float xs[3] = {nextafterf(x, -INFINITY), x, nextafterf(x, INFINITY)};
  for (int i = 0; i < 3; i++) {
    check_encode(n, t, xs[i]);
    check_encode(n, t, -xs[i]);
  }
}

static void test_decode_every_byte(void **state) {
  (void)state;
  for (int k = 0; k < N_FORMATS; k++) {
    long wrong = 0;
    for (int b = 0; b < 256; b++) {
      uint32_t want = bits_of(kn_f8_to_f32(formats[k], (uint8_t)b)), got = bits_of(device_decode(formats[k], (unsigned char)b));
      if (want != got && wrong++ < 8)
        fprintf(stderr, "%s: decode 0x%02x: base.h 0x%08x, device 0x%08x\n", kn_dtype_name(formats[k]), b, want, got);
    }
    assert_int_equal(wrong, 0);
  }
}

static void test_encode_boundaries(void **state) {
  (void)state;
  tally n = {0};
  for (int k = 0; k < N_FORMATS; k++) {
    kn_dtype t = formats[k];
    kn_f8_format f = kn_f8_format_of(t);
    /* the finite non-negative values in order: codes 0..max_code (sign clear) */
    int codes = f.e2m1 ? 8 : f.max_code + 1;
    for (int c = 0; c < codes; c++) {
      float v = kn_f8_to_f32(t, (uint8_t)c);
      check_around(&n, t, v);
      /* the midpoint to the next value (past the largest: the next value the
         format would have), exact in f32: the formats have few mantissa bits */
      float next = c + 1 < codes ? kn_f8_to_f32(t, (uint8_t)(c + 1))
                                 : (f.e8m0 ? INFINITY : v + (v - kn_f8_to_f32(t, (uint8_t)(c - 1))));
      if (isfinite(next)) check_around(&n, t, v + (next - v) / 2);
    }
    float specials[] = {0.0f, INFINITY, FLT_MAX, FLT_MIN, 0x1p-149f, 0x1p-127f, 0x1p-126f, 0x1p127f, 0x1.8p127f,
                        0x1p-130f, 1e30f, 65536.0f, 0x1.fffffep-1f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) check_around(&n, t, specials[i]);
    uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu, 0xffffffffu, 0x7fa00000u};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) check_encode(&n, t, kn_cu_as_float(nans[i]));
  }
  fprintf(stderr, "boundaries: %ld encodings compared\n", n.checked);
  assert_int_equal(n.wrong, 0);
}

/* Every float32 whose bits are a multiple of the stride (odd, so that the
 * low mantissa bits take all values across the sweep), with both signs. */
static void test_encode_sweep(void **state) {
  (void)state;
  const uint32_t stride = 509;
  tally n = {0};
  for (int k = 0; k < N_FORMATS; k++)
    for (uint64_t b = 0; b <= 0xffffffffu; b += stride) check_encode(&n, formats[k], kn_cu_as_float((uint32_t)b));
  fprintf(stderr, "sweep: %ld encodings compared\n", n.checked);
  assert_int_equal(n.wrong, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decode_every_byte),
      cmocka_unit_test(test_encode_boundaries),
      cmocka_unit_test(test_encode_sweep),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
