/* test_codegen_casts.c — CAST between every pair of the 13 dtypes, scalar
 * and 8-lane, compared bit for bit with C conversions (float -> int
 * truncates toward zero; lanes where C would be undefined — an out-of-range
 * float -> int — are skipped). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/codegen/cg_test.h"

static const kn_dtype all_types[] = {KN_DT_F32, KN_DT_U8,  KN_DT_I8,  KN_DT_U16, KN_DT_I16,
                                     KN_DT_I32, KN_DT_I64, KN_DT_BOOL, KN_DT_F16, KN_DT_F64,
                                     KN_DT_U32, KN_DT_U64, KN_DT_BF16};
#define NT ((int)(sizeof all_types / sizeof all_types[0]))
#define NV 16

static const int64_t int_vals[NV] = {0,   1,    -1,   2,     -5,     7,      100,    -100,
                                     127, -128, 255,  1000,  -1000,  65535,  123456, -123456};
static const double float_vals[NV] = {0,     1,     -1,     2.5,   -2.5,   3.7,    -3.7,   0.49,
                                      100.25, -100.75, 127.9, -128.5, 255.5, 1000.5, 65504, -0.0};

typedef struct value {
  bool is_float;
  double f;
  int64_t i; /* two's complement bits for unsigned 64 too */
  bool is_unsigned;
} value;

static void store(kn_dtype t, void *p, value v) {
  if (t == KN_DT_BOOL) {
    *(uint8_t *)p = v.is_float ? v.f != 0 : v.i != 0;
    return;
  }
  if (kn_dtype_is_float(t)) {
    double d = v.is_float ? v.f : v.is_unsigned ? (double)(float)(uint64_t)v.i : (double)(float)v.i;
    if (!v.is_float && t == KN_DT_F64) d = v.is_unsigned ? (double)(uint64_t)v.i : (double)v.i;
    switch (t) {
    case KN_DT_F32: *(float *)p = (float)d; break;
    case KN_DT_F64: *(double *)p = d; break;
    case KN_DT_F16: *(uint16_t *)p = kn_f32_to_f16((float)d); break;
    default: *(uint16_t *)p = kn_f32_to_bf16((float)d); break;
    }
    return;
  }
  int64_t x = v.is_float ? (int64_t)trunc(v.f) : v.i;
  switch (t) {
  case KN_DT_U8: *(uint8_t *)p = (uint8_t)x; break;
  case KN_DT_I8: *(int8_t *)p = (int8_t)x; break;
  case KN_DT_U16: *(uint16_t *)p = (uint16_t)x; break;
  case KN_DT_I16: *(int16_t *)p = (int16_t)x; break;
  case KN_DT_I32: *(int32_t *)p = (int32_t)x; break;
  case KN_DT_U32: *(uint32_t *)p = (uint32_t)x; break;
  default: *(int64_t *)p = x; break;
  }
}

static value load(kn_dtype t, const void *p) {
  value v = {0};
  switch (t) {
  case KN_DT_F32: v.is_float = true, v.f = *(const float *)p; break;
  case KN_DT_F64: v.is_float = true, v.f = *(const double *)p; break;
  case KN_DT_F16: v.is_float = true, v.f = kn_f16_to_f32(*(const uint16_t *)p); break;
  case KN_DT_BF16: v.is_float = true, v.f = kn_bf16_to_f32(*(const uint16_t *)p); break;
  case KN_DT_BOOL: v.i = *(const uint8_t *)p != 0, v.is_unsigned = true; break;
  case KN_DT_U8: v.i = *(const uint8_t *)p, v.is_unsigned = true; break;
  case KN_DT_I8: v.i = *(const int8_t *)p; break;
  case KN_DT_U16: v.i = *(const uint16_t *)p, v.is_unsigned = true; break;
  case KN_DT_I16: v.i = *(const int16_t *)p; break;
  case KN_DT_I32: v.i = *(const int32_t *)p; break;
  case KN_DT_U32: v.i = *(const uint32_t *)p, v.is_unsigned = true; break;
  case KN_DT_U64: v.i = *(const int64_t *)p, v.is_unsigned = true; break;
  default: v.i = *(const int64_t *)p; break;
  }
  return v;
}

/* Is the C conversion of v to t defined (float -> int in range)? */
static bool defined(value v, kn_dtype t) {
  if (!v.is_float || !kn_dtype_is_int(t)) return true;
  double x = trunc(v.f);
  switch (t) {
  case KN_DT_U8: return x >= 0 && x <= UINT8_MAX;
  case KN_DT_I8: return x >= INT8_MIN && x <= INT8_MAX;
  case KN_DT_U16: return x >= 0 && x <= UINT16_MAX;
  case KN_DT_I16: return x >= INT16_MIN && x <= INT16_MAX;
  case KN_DT_I32: return x >= INT32_MIN && x <= INT32_MAX;
  case KN_DT_U32: return x >= 0 && x <= UINT32_MAX;
  case KN_DT_U64: return x >= 0;
  default: return true;
  }
}

static void test_all_casts(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "casts");
  int in_idx[NT];
  int out_idx[NT][NT][2];
  for (int s = 0; s < NT; s++)
    in_idx[s] = cg_input(&t, kn_arena_printf(&t.arena, "in_%s", kn_dtype_name(all_types[s])), all_types[s], NV);
  for (int s = 0; s < NT; s++)
    for (int d = 0; d < NT; d++) {
      if (s == d) continue;
      kn_dtype from = all_types[s], to = all_types[d];
      for (int v = 0; v < 2; v++)
        out_idx[s][d][v] = cg_output(&t, kn_arena_printf(&t.arena, "%s_to_%s_%d", kn_dtype_name(from), kn_dtype_name(to), v), to, NV);
      kn_buffer *p[3] = {cg_param(&t, "x", from), cg_param(&t, "ys", to), cg_param(&t, "yv", to)};
      kn_kernel *k = cg_kernel(&t, kn_arena_printf(&t.arena, "cast_%s_%s", kn_dtype_name(from), kn_dtype_name(to)), 3, p);
      kn_var *i = kn_var_new(&t.c, "i"), *j = kn_var_new(&t.c, "j");
      kn_expr *si = cg_var(&t, i);
      kn_expr *vi = cg_ramp(&t, kn_e_mul(&t.c, cg_var(&t, j), cg_i(&t, 8)), 1, 8);
      kn_stmt *scalar = kn_s_for(&t.c, i, cg_i(&t, 0), cg_i(&t, NV), KN_FOR_SERIAL,
                                 kn_s_store(&t.c, p[1], si, kn_e_cast(&t.c, to, kn_e_load(&t.c, p[0], si))));
      kn_stmt *vector = kn_s_for(&t.c, j, cg_i(&t, 0), cg_i(&t, NV / 8), KN_FOR_SERIAL,
                                 kn_s_store(&t.c, p[2], vi, kn_e_cast(&t.c, to, kn_e_load(&t.c, p[0], vi))));
      k->body = kn_s_seq2(&t.c, scalar, vector);
      cg_step(&t, k, (int[]){KILN_ARG_INPUT, KILN_ARG_OUTPUT, KILN_ARG_OUTPUT},
              (int[]){in_idx[s], out_idx[s][d][0], out_idx[s][d][1]});
    }
  cg_build_and_load(&t);
  static unsigned char inputs[NT][NV * 8];
  static unsigned char outputs[NT * NT * 2][NV * 8];
  const void *in_ptrs[NT];
  void *out_ptrs[NT * NT * 2];
  for (int s = 0; s < NT; s++) {
    kn_dtype t0 = all_types[s];
    for (int e = 0; e < NV; e++) {
      value v = {0};
      if (kn_dtype_is_float(t0)) {
        v.is_float = true;
        v.f = float_vals[e];
      } else {
        v.i = int_vals[e];
      }
      store(t0, inputs[s] + e * kn_dtype_size(t0), v);
    }
    in_ptrs[s] = inputs[s];
  }
  for (int o = 0; o < t.plan.n_outputs; o++) out_ptrs[o] = outputs[o];
  cg_run(&t, in_ptrs, out_ptrs, 1);
  int checked = 0;
  for (int s = 0; s < NT; s++)
    for (int d = 0; d < NT; d++) {
      if (s == d) continue;
      kn_dtype from = all_types[s], to = all_types[d];
      size_t fs = kn_dtype_size(from), ts = kn_dtype_size(to);
      for (int e = 0; e < NV; e++) {
        value v = load(from, inputs[s] + e * fs);
        if (!defined(v, to)) continue;
        unsigned char want[8] = {0};
        store(to, want, v);
        for (int var = 0; var < 2; var++) {
          const unsigned char *got = outputs[out_idx[s][d][var]] + e * ts;
          if (memcmp(got, want, ts)) {
            fprintf(stderr, "cast %s -> %s (%s) of element %d: got %02x%02x.. want %02x%02x..\n",
                    kn_dtype_name(from), kn_dtype_name(to), var ? "vector" : "scalar", e, got[0],
                    ts > 1 ? got[1] : 0, want[0], ts > 1 ? want[1] : 0);
            fail();
          }
          checked++;
        }
      }
    }
  assert_true(checked > 3000);
  cg_free(&t);
}

/* float8: f32 -> f8 (stores round, nearest even, no saturation; E8M0
 * rounds up) and
 * f8 -> f32 for all 256 codes, scalar and 8-lane, bit for bit against
 * kn_f32_to_f8 / kn_f8_to_f32 (which tests/conformance checks against the
 * ONNX test data). The f32 values cover normals, ties, subnormals, overflow,
 * infinities, NaN and -0. */
#define F8_NV 64
static void test_f8_casts(void **state) {
  (void)state;
  static const kn_dtype f8[] = {KN_DT_F8E4M3FN, KN_DT_F8E4M3FNUZ, KN_DT_F8E5M2, KN_DT_F8E5M2FNUZ, KN_DT_F8E8M0};
  enum { NF8 = sizeof f8 / sizeof f8[0] };
  static float xs[F8_NV];
  const float base[] = {0.0f, -0.0f, 1.0f, -1.5f, 448.0f, 464.0f, 470.0f, 240.0f, 248.0f, 57344.0f,
                        61440.0f, 1e6f, INFINITY, -INFINITY, NAN, 0.0009765625f, 0.00146484375f,
                        1.9073486328125e-06f, 3e-7f, 1.0625f, 1.1875f, -3.3f, 0.3f, 17.0f,
                        3e38f, 1e-40f, 0x1p-127f, 0x1p127f};
  int nb = (int)(sizeof base / sizeof base[0]);
  for (int i = 0; i < F8_NV; i++) xs[i] = i < nb ? base[i] : (float)(i - nb) * 0.37f - 7.0f;
  cg_case t;
  cg_init(&t, "f8_casts");
  int in_f32 = cg_input(&t, "in_f32", KN_DT_F32, F8_NV);
  int in_code[NF8], out_enc[NF8][2], out_dec[NF8][2];
  for (int k = 0; k < NF8; k++) {
    kn_dtype ft = f8[k];
    in_code[k] = cg_input(&t, kn_arena_printf(&t.arena, "codes_%d", k), ft, 256);
    for (int v = 0; v < 2; v++) {
      out_enc[k][v] = cg_output(&t, kn_arena_printf(&t.arena, "enc_%d_%d", k, v), ft, F8_NV);
      out_dec[k][v] = cg_output(&t, kn_arena_printf(&t.arena, "dec_%d_%d", k, v), KN_DT_F32, 256);
    }
    for (int dir = 0; dir < 2; dir++) { /* 0: f32 -> f8, 1: f8 -> f32 */
      kn_dtype from = dir ? ft : KN_DT_F32, to = dir ? KN_DT_F32 : ft;
      int n = dir ? 256 : F8_NV;
      kn_buffer *p[3] = {cg_param(&t, "x", from), cg_param(&t, "ys", to), cg_param(&t, "yv", to)};
      kn_kernel *kk = cg_kernel(&t, kn_arena_printf(&t.arena, "f8_%d_%d", k, dir), 3, p);
      kn_var *i = kn_var_new(&t.c, "i"), *j = kn_var_new(&t.c, "j");
      kn_expr *si = cg_var(&t, i);
      kn_expr *vi = cg_ramp(&t, kn_e_mul(&t.c, cg_var(&t, j), cg_i(&t, 8)), 1, 8);
      kn_stmt *scalar = kn_s_for(&t.c, i, cg_i(&t, 0), cg_i(&t, n), KN_FOR_SERIAL,
                                 kn_s_store(&t.c, p[1], si, kn_e_cast(&t.c, to, kn_e_load(&t.c, p[0], si))));
      kn_stmt *vector = kn_s_for(&t.c, j, cg_i(&t, 0), cg_i(&t, n / 8), KN_FOR_SERIAL,
                                 kn_s_store(&t.c, p[2], vi, kn_e_cast(&t.c, to, kn_e_load(&t.c, p[0], vi))));
      kk->body = kn_s_seq2(&t.c, scalar, vector);
      cg_step(&t, kk, (int[]){KILN_ARG_INPUT, KILN_ARG_OUTPUT, KILN_ARG_OUTPUT},
              (int[]){dir ? in_code[k] : in_f32, dir ? out_dec[k][0] : out_enc[k][0],
                      dir ? out_dec[k][1] : out_enc[k][1]});
    }
  }
  cg_build_and_load(&t);
  static uint8_t codes[256];
  static unsigned char outputs[4 * NF8][256 * 4];
  for (int c = 0; c < 256; c++) codes[c] = (uint8_t)c;
  const void *in_ptrs[1 + NF8] = {xs, codes, codes, codes, codes, codes};
  void *out_ptrs[4 * NF8];
  for (int o = 0; o < t.plan.n_outputs; o++) out_ptrs[o] = outputs[o];
  cg_run(&t, in_ptrs, out_ptrs, 1);
  for (int k = 0; k < NF8; k++)
    for (int v = 0; v < 2; v++) {
      for (int e = 0; e < F8_NV; e++) {
        uint8_t got = outputs[out_enc[k][v]][e], want = kn_f32_to_f8(f8[k], xs[e]);
        if (got != want) {
          fprintf(stderr, "%s (%s) of %g: got 0x%02x, want 0x%02x\n", kn_dtype_name(f8[k]),
                  v ? "vector" : "scalar", (double)xs[e], got, want);
          fail();
        }
      }
      for (int c = 0; c < 256; c++) {
        float got = ((const float *)outputs[out_dec[k][v]])[c], want = kn_f8_to_f32(f8[k], (uint8_t)c);
        if (!(got == want && signbit(got) == signbit(want)) && !(isnan(got) && isnan(want))) {
          fprintf(stderr, "%s (%s) code 0x%02x: got %g, want %g\n", kn_dtype_name(f8[k]), v ? "vector" : "scalar",
                  c, (double)got, (double)want);
          fail();
        }
      }
    }
  cg_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_all_casts), cmocka_unit_test(test_f8_casts)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
