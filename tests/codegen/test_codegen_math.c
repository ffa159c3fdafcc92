/* test_codegen_math.c — every float intrinsic, scalar, 16- and 32-lane,
 * against libm in double precision on ~320k points: a sweep over all float bit
 * patterns (both signs, every exponent, inf, NaN), dense ranges and the edge
 * cases (overflow / underflow thresholds, subnormals, +-0).
 * Bounds: exp / log relative error <= 4e-7 on normal results; erf / tanh /
 * sigmoid absolute error <= 1e-6 everywhere; NaN / inf behave as in libm;
 * sqrt / floor / ceil / round / abs / sin / cos / pow exact; fma within an
 * ulp of fmaf (contraction is allowed, not required); f64 versions match
 * libm exactly. On an AVX-512 host the test runs three times: as the host
 * (vrcp14ps and vscalefps in exp / sigmoid / tanh / erf, vreduceps in
 * sigmoid), as the host without AVX512DQ (sigmoid's other AVX-512 form) and
 * with its vectors cut to 256 bits (the portable forms). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/codegen/cg_test.h"

#define N (16 * 20000)

static const kn_fn f32_fns[] = {KN_FN_EXP,  KN_FN_LOG,  KN_FN_SQRT, KN_FN_ERF, KN_FN_TANH,
                                KN_FN_SIGMOID, KN_FN_FLOOR, KN_FN_CEIL, KN_FN_ROUND, KN_FN_ABS,
                                KN_FN_SIN,  KN_FN_COS,  KN_FN_POW,  KN_FN_FMA};
#define NF ((int)(sizeof f32_fns / sizeof f32_fns[0]))
static const int lane_counts[] = {1, 16, 32};
#define NV 3
static const kn_fn f64_fns[] = {KN_FN_EXP, KN_FN_LOG, KN_FN_ERF, KN_FN_TANH, KN_FN_SIGMOID};
#define NF64 ((int)(sizeof f64_fns / sizeof f64_fns[0]))

static float x[N], y[N], z[N];
static float out[NF][NV][N];
static double xd[1024], outd[NF64][2][1024];

static void make_points(void) {
  static const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, FLT_MIN, -FLT_MIN,
                                  FLT_MAX, -FLT_MAX, 1e-45f, -1e-45f, 1e-40f, 88.7228f,
                                  88.72284f, 88.7229f, 89.0f, 100.0f, -87.3365f, -87.34f,
                                  -103.97f, -103.98f, -104.0f, -200.0f, 1.0f, 0.99999994f,
                                  1.0000001f, 0.5f, 2.0f, 0.625f, -0.625f, 0.49999997f,
                                  9.0f, -9.0f, 4.0f, -4.0f, 1e-8f, -1e-8f, 3.9f, 2.5f, -2.5f};
  int k = 0;
  for (size_t s = 0; s < sizeof special / sizeof special[0]; s++) x[k++] = special[s];
  for (int i = 0; k < N / 2; i++, k++) { /* every exponent, both signs, inf / NaN patterns */
    uint32_t bits = (uint32_t)((uint64_t)i * 0x100000000ull / (N / 2)) + (uint32_t)i % 977;
    memcpy(&x[k], &bits, 4);
  }
  for (int i = 0; k < 3 * N / 4; i++, k++) x[k] = -110.0f + 220.0f * (float)i / (float)(N / 4);
  for (int i = 0; k < N; i++, k++) x[k] = -5.0f + 10.0f * (float)i / (float)(N / 4);
  for (int i = 0; i < N; i++) {
    y[i] = (float)(((int64_t)i * 7919) % 2001) / 250.0f - 4.0f; /* pow exponents in [-4, 4] */
    z[i] = (float)(((int64_t)i * 104729) % 1999) / 100.0f - 10.0f;
  }
  for (int i = 0; i < 1024; i++) xd[i] = -30.0 + 60.0 * i / 1024.0 + 1e-3;
  xd[0] = 0.0;
  xd[1] = INFINITY;
  xd[2] = -INFINITY;
  xd[3] = NAN;
  xd[4] = 1e-300;
}

static kn_kernel *fn_kernel(cg_case *t, kn_fn fn, kn_dtype dt, int n, int lanes) {
  int nargs = kn_fn_nargs(fn);
  kn_buffer *p[4] = {cg_param(t, "x", dt), cg_param(t, "y", dt), cg_param(t, "z", dt), cg_param(t, "out", dt)};
  kn_kernel *k = cg_kernel(t, kn_arena_printf(&t->arena, "%s_%s_%d", kn_fn_name(fn), kn_dtype_name(dt), lanes), 4, p);
  kn_var *i = kn_var_new(&t->c, "i");
  kn_expr *idx = lanes == 1 ? cg_var(t, i) : cg_ramp(t, kn_e_mul(&t->c, cg_var(t, i), cg_i(t, lanes)), 1, lanes);
  kn_expr *args[3];
  for (int a = 0; a < nargs; a++) args[a] = kn_e_load(&t->c, p[a], idx);
  k->body = kn_s_for(&t->c, i, cg_i(t, 0), cg_i(t, n / lanes), KN_FOR_SERIAL,
                     kn_s_store(&t->c, p[3], idx, kn_e_call(&t->c, fn, args, nargs)));
  return k;
}

static double ulp_of(float v) { return (double)nextafterf(fabsf(v), INFINITY) - fabsf(v); }

typedef struct variant {
  int vector_bits; /* 0: the host's */
  bool no_dq;      /* clear the host's AVX512DQ */
} variant;

static void test_math_f32(void **state) {
  const variant *var = *state;
  make_points();
  cg_case t;
  cg_init(&t, "math");
  if (var->vector_bits && t.target.vector_bits > var->vector_bits) t.target.vector_bits = var->vector_bits;
  if (var->no_dq) t.target.has_avx512dq = false;
  printf("  target vectors: %d bits%s\n", t.target.vector_bits, t.target.vector_bits >= 512 && t.target.has_avx512dq ? ", AVX512DQ" : "");
  int ix = cg_input(&t, "x", KN_DT_F32, N), iy = cg_input(&t, "y", KN_DT_F32, N), iz = cg_input(&t, "z", KN_DT_F32, N);
  int ixd = cg_input(&t, "xd", KN_DT_F64, 1024);
  for (int f = 0; f < NF; f++)
    for (int v = 0; v < NV; v++) {
      int o = cg_output(&t, kn_arena_printf(&t.arena, "%s%d", kn_fn_name(f32_fns[f]), v), KN_DT_F32, N);
      kn_kernel *k = fn_kernel(&t, f32_fns[f], KN_DT_F32, N, lane_counts[v]);
      cg_step(&t, k, (int[]){KILN_ARG_INPUT, KILN_ARG_INPUT, KILN_ARG_INPUT, KILN_ARG_OUTPUT}, (int[]){ix, iy, iz, o});
    }
  for (int f = 0; f < NF64; f++)
    for (int v = 0; v < 2; v++) {
      int o = cg_output(&t, kn_arena_printf(&t.arena, "%s_f64_%d", kn_fn_name(f64_fns[f]), v), KN_DT_F64, 1024);
      kn_kernel *k = fn_kernel(&t, f64_fns[f], KN_DT_F64, 1024, v ? 8 : 1);
      cg_step(&t, k, (int[]){KILN_ARG_INPUT, KILN_ARG_INPUT, KILN_ARG_INPUT, KILN_ARG_OUTPUT}, (int[]){ixd, ixd, ixd, o});
    }
  cg_build_and_load(&t);
  void *outs[NV * NF + 2 * NF64];
  for (int f = 0; f < NF; f++)
    for (int v = 0; v < NV; v++) outs[NV * f + v] = out[f][v];
  for (int f = 0; f < NF64; f++)
    for (int v = 0; v < 2; v++) outs[NV * NF + 2 * f + v] = outd[f][v];
  cg_run(&t, (const void *[]){x, y, z, xd}, outs, 1);

  for (int f = 0; f < NF; f++) {
    kn_fn fn = f32_fns[f];
    double max_err = 0;
    for (int v = 0; v < NV; v++)
      for (int i = 0; i < N; i++) {
        float xi = x[i], got = out[f][v][i];
        double ref;
        switch (fn) {
        case KN_FN_EXP: ref = exp((double)xi); break;
        case KN_FN_LOG: ref = log((double)xi); break;
        case KN_FN_ERF: ref = erf((double)xi); break;
        case KN_FN_TANH: ref = tanh((double)xi); break;
        case KN_FN_SIGMOID: ref = 1.0 / (1.0 + exp(-(double)xi)); break;
        case KN_FN_SQRT: ref = sqrtf(xi); break;
        case KN_FN_FLOOR: ref = floorf(xi); break;
        case KN_FN_CEIL: ref = ceilf(xi); break;
        case KN_FN_ROUND: ref = nearbyintf(xi); break;
        case KN_FN_ABS: ref = fabsf(xi); break;
        case KN_FN_SIN: ref = sinf(xi); break;
        case KN_FN_COS: ref = cosf(xi); break;
        case KN_FN_POW: ref = powf(xi, y[i]); break;
        default: ref = fmaf(xi, y[i], z[i]); break;
        }
        bool bad;
        double err = 0;
        if (isnan(ref) || isnan(got)) {
          bad = isnan(ref) != isnan(got);
        } else if (fn == KN_FN_EXP || fn == KN_FN_LOG) {
          if (fabs(ref) > FLT_MAX) {
            bad = got != (float)ref; /* overflow: +inf; log(0) = -inf */
          } else if (fabs(ref) < FLT_MIN) {
            bad = fabs(got - ref) > 3e-45; /* subnormal / zero results */
          } else {
            err = fabs(got - ref) / fabs(ref);
            bad = err > 4e-7;
          }
        } else if (fn == KN_FN_ERF || fn == KN_FN_TANH || fn == KN_FN_SIGMOID) {
          err = fabs(got - ref);
          bad = err > 1e-6;
        } else if (fn == KN_FN_FMA) {
          err = fabs(got - ref);
          bad = err > ulp_of((float)ref) + 1e-30 && got != xi * y[i] + z[i];
        } else {
          bad = memcmp(&got, &(float){(float)ref}, 4) != 0 && !(got == 0 && ref == 0);
        }
        if (err > max_err) max_err = err;
        if (bad) {
          fprintf(stderr, "%s (%d lanes) x=%.9g: got %.9g want %.9g\n", kn_fn_name(fn), lane_counts[v],
                  (double)xi, (double)got, ref);
          fail();
        }
      }
    if (fn == KN_FN_EXP || fn == KN_FN_LOG || fn == KN_FN_ERF || fn == KN_FN_TANH || fn == KN_FN_SIGMOID)
      printf("  %-8s max %s error %.3g\n", kn_fn_name(fn),
             fn == KN_FN_EXP || fn == KN_FN_LOG ? "relative" : "absolute", max_err);
  }
  for (int f = 0; f < NF64; f++)
    for (int v = 0; v < 2; v++)
      for (int i = 0; i < 1024; i++) {
        double xi = xd[i], ref;
        switch (f64_fns[f]) {
        case KN_FN_EXP: ref = exp(xi); break;
        case KN_FN_LOG: ref = log(xi); break;
        case KN_FN_ERF: ref = erf(xi); break;
        case KN_FN_TANH: ref = tanh(xi); break;
        default: ref = 1.0 / (1.0 + exp(-xi)); break;
        }
        double got = outd[f][v][i];
        if (isnan(ref))
          assert_true(isnan(got));
        else
          assert_float_equal(got, ref, fabs(ref) * 1e-15);
      }
  cg_free(&t);
}

int main(void) {
  static variant host = {0, false}, no_dq = {0, true}, avx2 = {256, false};
  const struct CMUnitTest tests[] = {cmocka_unit_test_prestate(test_math_f32, &host),
                                     cmocka_unit_test_prestate(test_math_f32, &no_dq),
                                     cmocka_unit_test_prestate(test_math_f32, &avx2)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
