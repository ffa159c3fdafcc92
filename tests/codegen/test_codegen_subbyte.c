/* test_codegen_subbyte.c — CAST to and from the sub-byte dtypes (int4,
 * uint4, int2, uint2, float4e2m1; one byte per element, see base/base.h),
 * scalar and 8-lane, through LLVM codegen and through the portable C target
 * (built with the host cc into a .so). The expected values were
 * computed with ml_dtypes, the types behind ONNX's reference (onnx.reference
 * Cast is `x.astype(ml_dtypes.int4)` ...):
 *   np.array(XS, np.float32).astype(ml_dtypes.float4_e2m1fn).view(np.uint8)
 *   np.array(XS, np.float32)[np.isfinite(...)].astype(ml_dtypes.int4)
 *   np.array(INTS, np.int32).astype(ml_dtypes.int4)   (and uint4/int2/uint2)
 * Integers wrap to their width; floats truncate toward zero first (NaN and
 * infinities to an integer type are undefined, as for int8, and skipped).
 * The scalar helpers (kn_f32_to_f8 / kn_f8_to_f32 / kn_subbyte_wrap) are
 * checked against the same tables. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/codegen/cg_test.h"
#include "codegen/target.h"

#define NX 32
#define SKIP 99 /* no expected value (undefined conversion) */

static const float xs[NX] = {0.0f,  -0.0f, 0.25f, -0.25f, 0.3f,      0.75f,      -0.75f, 1.25f,
                             1.75f, 2.5f,  -2.5f, 3.5f,   5.0f,      -5.0f,      5.5f,   6.0f,
                             7.0f,  -100,  1e6f,  INFINITY, -INFINITY, NAN,      0.01f,  -0.01f,
                             1.1f,  2.9f,  -3.2f, 4.6f,   9.0f,      -9.0f,      15.7f,  -16.5f};
static const int32_t ints[NX] = {0,   1,    -1,  2,    -2,     3,     -3,      7,      8,   -8, -9,
                                 15,  16,   17,  -16,  100,    -100,  127,     -128,   255, 1000,
                                 -1000, 65535, 123456, -123456, 5, 6, -5, -6, 9, 10, 11};

/* float4e2m1 codes of xs */
static const uint8_t f4_of_xs[NX] = {0, 8, 0, 8, 1, 2, 10, 2, 4, 4, 12, 6, 6, 14, 7, 7,
                                     7, 15, 7, 7, 15, 8, 0, 8, 2, 5, 13, 6, 7, 15, 7, 15};
/* float4e2m1 code c (0..15) as a float */
static const float f4_value[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

enum { T_I4, T_U4, T_I2, T_U2, N_INT };
static const kn_dtype int_types[N_INT] = {KN_DT_I4, KN_DT_U4, KN_DT_I2, KN_DT_U2};
/* xs (finite ones; SKIP otherwise) and ints as each integer type */
static const int8_t int_of_xs[N_INT][NX] = {
    {0, 0, 0, 0, 0, 0, 0, 1, 1, 2, -2, 3, 5, -5, 5, 6, 7, -4, 0, SKIP, SKIP, SKIP, 0, 0, 1, 2, -3, 4, -7, 7, -1, 0},
    {0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 14, 3, 5, 11, 5, 6, 7, 12, 0, SKIP, SKIP, SKIP, 0, 0, 1, 2, 13, 4, 9, 7, 15, 0},
    {0, 0, 0, 0, 0, 0, 0, 1, 1, -2, -2, -1, 1, -1, 1, -2, -1, 0, 0, SKIP, SKIP, SKIP, 0, 0, 1, -2, 1, 0, 1, -1, -1,
     0},
    {0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 2, 3, 1, 3, 1, 2, 3, 0, 0, SKIP, SKIP, SKIP, 0, 0, 1, 2, 1, 0, 1, 3, 3, 0},
};
static const int8_t int_of_ints[N_INT][NX] = {
    {0, 1, -1, 2, -2, 3, -3, 7, -8, -8, 7, -1, 0, 1, 0, 4, -4, -1, 0, -1, -8, -8, -1, 0, 0, 5, 6, -5, -6, -7, -6, -5},
    {0, 1, 15, 2, 14, 3, 13, 7, 8, 8, 7, 15, 0, 1, 0, 4, 12, 15, 0, 15, 8, 8, 15, 0, 0, 5, 6, 11, 10, 9, 10, 11},
    {0, 1, -1, -2, -2, -1, 1, -1, 0, 0, -1, -1, 0, 1, 0, 0, 0, -1, 0, -1, 0, 0, -1, 0, 0, 1, -2, -1, -2, 1, -2, -1},
    {0, 1, 3, 2, 2, 3, 1, 3, 0, 0, 3, 3, 0, 1, 0, 0, 0, 3, 0, 3, 0, 0, 3, 0, 0, 1, 2, 3, 2, 1, 2, 3},
};

/* One conversion: input `in` of dtype from -> outputs of dtype to, scalar
 * loop and 8-lane loop (NX elements each). */
typedef struct conv {
  kn_dtype from, to;
  int in, out[2];
} conv;

static void add_conv(cg_case *t, conv *c, kn_dtype from, kn_dtype to, int in, const char *name) {
  c->from = from, c->to = to, c->in = in;
  for (int v = 0; v < 2; v++) c->out[v] = cg_output(t, kn_arena_printf(&t->arena, "%s_%d", name, v), to, NX);
  kn_buffer *p[3] = {cg_param(t, "x", from), cg_param(t, "ys", to), cg_param(t, "yv", to)};
  kn_kernel *k = cg_kernel(t, name, 3, p);
  kn_var *i = kn_var_new(&t->c, "i"), *j = kn_var_new(&t->c, "j");
  kn_expr *si = cg_var(t, i), *vi = cg_ramp(t, kn_e_mul(&t->c, cg_var(t, j), cg_i(t, 8)), 1, 8);
  kn_stmt *scalar = kn_s_for(&t->c, i, cg_i(t, 0), cg_i(t, NX), KN_FOR_SERIAL,
                             kn_s_store(&t->c, p[1], si, kn_e_cast(&t->c, to, kn_e_load(&t->c, p[0], si))));
  kn_stmt *vector = kn_s_for(&t->c, j, cg_i(t, 0), cg_i(t, NX / 8), KN_FOR_SERIAL,
                             kn_s_store(&t->c, p[2], vi, kn_e_cast(&t->c, to, kn_e_load(&t->c, p[0], vi))));
  k->body = kn_s_seq2(&t->c, scalar, vector);
  cg_step(t, k, (int[]){KILN_ARG_INPUT, KILN_ARG_OUTPUT, KILN_ARG_OUTPUT}, (int[]){in, c->out[0], c->out[1]});
}

/* Packages t as portable C, builds it with the host cc into a .so and
 * loads that. */
static void build_portable_c_and_load(cg_case *t) {
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_target_parse("c", &t->target, &d), 0);
  kn_diag_free(&d);
  assert_int_equal(cg_package(t, ".c"), 0);
  assert_int_equal(cg_system("cd '%s' && cc -std=c17 -O2 -Wall -Wextra -Werror -DKILN_EXPORT_V1 -shared -fPIC "
                             "'%s' -o c_model.so -lm -lpthread",
                             t->dir, t->path),
                   0);
  snprintf(t->path, sizeof t->path, "%s/c_model.so", t->dir);
  kn_diag_init(&d);
  int r = kn_loader_open(t->path, &t->loader, &d);
  kn_diag_print(&d, "test");
  kn_diag_free(&d);
  assert_int_equal(r, 0);
}

static void check_subbyte_casts(bool portable_c) {
  /* the inputs in Kiln's one-byte form: float4e2m1 codes 0..15 (twice),
     each integer type's values of ints */
  static uint8_t f4_codes[NX];
  static int8_t int_vals[N_INT][NX];
  for (int e = 0; e < NX; e++) f4_codes[e] = (uint8_t)(e % 16);
  for (int k = 0; k < N_INT; k++) memcpy(int_vals[k], int_of_ints[k], NX);

  cg_case t;
  cg_init(&t, "subbyte_casts");
  int in_x = cg_input(&t, "xs", KN_DT_F32, NX), in_i = cg_input(&t, "ints", KN_DT_I32, NX);
  int in_f4 = cg_input(&t, "f4", KN_DT_F4E2M1, NX), in_int[N_INT];
  for (int k = 0; k < N_INT; k++) in_int[k] = cg_input(&t, kn_arena_printf(&t.arena, "int_%d", k), int_types[k], NX);
  conv f4_enc, f4_dec, from_x[N_INT], from_i[N_INT], to_i32[N_INT], to_f32[N_INT];
  add_conv(&t, &f4_enc, KN_DT_F32, KN_DT_F4E2M1, in_x, "f4_enc");
  add_conv(&t, &f4_dec, KN_DT_F4E2M1, KN_DT_F32, in_f4, "f4_dec");
  for (int k = 0; k < N_INT; k++) {
    kn_dtype it = int_types[k];
    add_conv(&t, &from_x[k], KN_DT_F32, it, in_x, kn_arena_printf(&t.arena, "from_x_%d", k));
    add_conv(&t, &from_i[k], KN_DT_I32, it, in_i, kn_arena_printf(&t.arena, "from_i_%d", k));
    add_conv(&t, &to_i32[k], it, KN_DT_I32, in_int[k], kn_arena_printf(&t.arena, "to_i32_%d", k));
    add_conv(&t, &to_f32[k], it, KN_DT_F32, in_int[k], kn_arena_printf(&t.arena, "to_f32_%d", k));
  }
  if (portable_c)
    build_portable_c_and_load(&t);
  else
    cg_build_and_load(&t);
  static unsigned char outputs[CG_MAX_IO][NX * 4];
  const void *in_ptrs[3 + N_INT] = {xs, ints, f4_codes, int_vals[0], int_vals[1], int_vals[2], int_vals[3]};
  void *out_ptrs[CG_MAX_IO];
  for (int o = 0; o < t.plan.n_outputs; o++) out_ptrs[o] = outputs[o];
  cg_run(&t, in_ptrs, out_ptrs, 1);

  for (int v = 0; v < 2; v++) {
    const char *how = portable_c ? (v ? "C vector" : "C scalar") : v ? "vector" : "scalar";
    for (int e = 0; e < NX; e++) {
      uint8_t got = outputs[f4_enc.out[v]][e];
      if (got != f4_of_xs[e] || kn_f32_to_f8(KN_DT_F4E2M1, xs[e]) != f4_of_xs[e]) {
        fprintf(stderr, "float4e2m1 (%s) of %g: got 0x%x (helper 0x%x), want 0x%x\n", how, (double)xs[e], got,
                kn_f32_to_f8(KN_DT_F4E2M1, xs[e]), f4_of_xs[e]);
        fail();
      }
      float want = f4_value[e % 16], dec = ((const float *)outputs[f4_dec.out[v]])[e];
      float helper = kn_f8_to_f32(KN_DT_F4E2M1, (uint8_t)(e % 16));
      if (dec != want || signbit(dec) != signbit(want) || helper != want || signbit(helper) != signbit(want)) {
        fprintf(stderr, "float4e2m1 (%s) code %d: got %g (helper %g), want %g\n", how, e % 16, (double)dec,
                (double)helper, (double)want);
        fail();
      }
    }
    for (int k = 0; k < N_INT; k++) {
      const char *tn = kn_dtype_name(int_types[k]);
      for (int e = 0; e < NX; e++) {
        int8_t gx = (int8_t)outputs[from_x[k].out[v]][e], gi = (int8_t)outputs[from_i[k].out[v]][e];
        if (int_of_xs[k][e] != SKIP && gx != int_of_xs[k][e]) {
          fprintf(stderr, "%s (%s) of %g: got %d, want %d\n", tn, how, (double)xs[e], gx, int_of_xs[k][e]);
          fail();
        }
        if (gi != int_of_ints[k][e] || kn_subbyte_wrap(int_types[k], ints[e]) != int_of_ints[k][e]) {
          fprintf(stderr, "%s (%s) of %d: got %d, want %d\n", tn, how, ints[e], gi, int_of_ints[k][e]);
          fail();
        }
        int32_t back = ((const int32_t *)outputs[to_i32[k].out[v]])[e];
        float backf = ((const float *)outputs[to_f32[k].out[v]])[e];
        if (back != int_vals[k][e] || backf != (float)int_vals[k][e]) {
          fprintf(stderr, "%s (%s) %d back: got %d / %g\n", tn, how, int_vals[k][e], back, (double)backf);
          fail();
        }
      }
    }
  }
  cg_free(&t);
}

static void test_subbyte_casts_llvm(void **state) {
  (void)state;
  check_subbyte_casts(false);
}

static void test_subbyte_casts_portable_c(void **state) {
  (void)state;
  check_subbyte_casts(true);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_subbyte_casts_llvm),
                                     cmocka_unit_test(test_subbyte_casts_portable_c)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
