/* test_codegen_kernels.c — hand-built loop-IR kernels compiled to a .so,
 * loaded with the loader and compared with plain C references: scalar and
 * vector loops with tails, gathers / scatters, floor division, selects and
 * comparisons, f16 / bf16 storage, LOCAL accumulators, vector reductions,
 * PARALLEL loops on 1..7 threads and the batch symbol. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/codegen/cg_test.h"

static const int IN = KILN_ARG_INPUT, OUT = KILN_ARG_OUTPUT;

static kn_stmt *loop(cg_case *t, kn_var *v, int64_t min, int64_t ext, kn_stmt *body) {
  return kn_s_for(&t->c, v, cg_i(t, min), cg_i(t, ext), KN_FOR_SERIAL, body);
}

static kn_expr *ld(cg_case *t, kn_buffer *b, kn_expr *idx) { return kn_e_load(&t->c, b, idx); }
static kn_stmt *st(cg_case *t, kn_buffer *b, kn_expr *idx, kn_expr *v) { return kn_s_store(&t->c, b, idx, v); }
static kn_expr *f32c(cg_case *t, double v) { return kn_e_float(&t->c, KN_DT_F32, v); }

/* out[i] = a[i] * 2 + b[i]; out2[i] = let s = a[i]*a[i] in s > 4 ? s : -s (via IF) */
static void test_scalar_loop(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "scalar");
  const int n = 100;
  int ia = cg_input(&t, "a", KN_DT_F32, n), ib = cg_input(&t, "b", KN_DT_F32, n);
  int io = cg_output(&t, "out", KN_DT_F32, n), io2 = cg_output(&t, "out2", KN_DT_F32, n);
  kn_buffer *p[4] = {cg_param(&t, "a", KN_DT_F32), cg_param(&t, "b", KN_DT_F32),
                     cg_param(&t, "out", KN_DT_F32), cg_param(&t, "out2", KN_DT_F32)};
  kn_kernel *k = cg_kernel(&t, "scalar_kernel", 4, p);
  kn_var *i = kn_var_new(&t.c, "i"), *s = kn_var_new(&t.c, "s");
  kn_expr *ai = ld(&t, p[0], cg_var(&t, i));
  kn_stmt *s1 = st(&t, p[2], cg_var(&t, i), kn_e_add(&t.c, kn_e_mul(&t.c, ai, f32c(&t, 2.0)), ld(&t, p[1], cg_var(&t, i))));
  /* LET binds an int64: the index, then used for the IF */
  kn_stmt *s2 = kn_s_let(&t.c, s, kn_e_mul(&t.c, cg_var(&t, i), cg_i(&t, 1)),
                         kn_s_if(&t.c, kn_e_bin(&t.c, KN_E_GT, kn_e_mul(&t.c, ai, ai), f32c(&t, 4.0)),
                                 st(&t, p[3], cg_var(&t, s), kn_e_mul(&t.c, ai, ai)),
                                 st(&t, p[3], cg_var(&t, s), kn_e_sub(&t.c, f32c(&t, 0.0), kn_e_mul(&t.c, ai, ai)))));
  k->body = loop(&t, i, 0, n, kn_s_seq2(&t.c, s1, s2));
  cg_step(&t, k, (int[]){IN, IN, OUT, OUT}, (int[]){ia, ib, io, io2});
  cg_build_and_load(&t);
  float a[100], b[100], out[100], out2[100];
  for (int j = 0; j < n; j++) {
    a[j] = (float)(j - 50) * 0.1f;
    b[j] = (float)j * 0.25f;
  }
  cg_run(&t, (const void *[]){a, b}, (void *[]){out, out2}, 1);
  for (int j = 0; j < n; j++) {
    assert_float_equal(out[j], fmaf(a[j], 2.0f, b[j]), 1e-6);
    float sq = a[j] * a[j];
    assert_float_equal(out2[j], sq > 4.0f ? sq : -sq, 1e-6);
  }
  cg_free(&t);
}

/* vectorized add over n = 37 with a scalar tail, for 8 and 16 lanes */
static void test_vector_add_tail(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "vadd");
  const int n = 37;
  int ia = cg_input(&t, "a", KN_DT_F32, n), ib = cg_input(&t, "b", KN_DT_F32, n);
  int lanes_list[2] = {8, 16};
  int outs[2];
  for (int v = 0; v < 2; v++) {
    int lanes = lanes_list[v];
    outs[v] = cg_output(&t, v ? "o16" : "o8", KN_DT_F32, n);
    kn_buffer *p[3] = {cg_param(&t, "a", KN_DT_F32), cg_param(&t, "b", KN_DT_F32), cg_param(&t, "o", KN_DT_F32)};
    kn_kernel *k = cg_kernel(&t, v ? "vadd16" : "vadd8", 3, p);
    kn_var *i = kn_var_new(&t.c, "i"), *j = kn_var_new(&t.c, "j");
    kn_expr *idx = cg_ramp(&t, kn_e_mul(&t.c, cg_var(&t, i), cg_i(&t, lanes)), 1, lanes);
    kn_stmt *vec = loop(&t, i, 0, n / lanes, st(&t, p[2], idx, kn_e_add(&t.c, ld(&t, p[0], idx), ld(&t, p[1], idx))));
    kn_stmt *tail = loop(&t, j, n / lanes * lanes, n % lanes,
                         st(&t, p[2], cg_var(&t, j), kn_e_add(&t.c, ld(&t, p[0], cg_var(&t, j)), ld(&t, p[1], cg_var(&t, j)))));
    k->body = kn_s_seq2(&t.c, vec, tail);
    cg_step(&t, k, (int[]){IN, IN, OUT}, (int[]){ia, ib, outs[v]});
  }
  cg_build_and_load(&t);
  float a[37], b[37], o8[37], o16[37];
  for (int j = 0; j < n; j++) {
    a[j] = (float)j * 1.5f;
    b[j] = 100.0f - (float)j;
    o8[j] = o16[j] = NAN;
  }
  cg_run(&t, (const void *[]){a, b}, (void *[]){o8, o16}, 1);
  for (int j = 0; j < n; j++) {
    assert_float_equal(o8[j], a[j] + b[j], 0);
    assert_float_equal(o16[j], a[j] + b[j], 0);
  }
  cg_free(&t);
}

static void test_gather_scatter(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "gather");
  int ia = cg_input(&t, "a", KN_DT_F32, 96), iidx = cg_input(&t, "idx", KN_DT_I64, 16);
  int o1 = cg_output(&t, "o1", KN_DT_F32, 32), o2 = cg_output(&t, "o2", KN_DT_F32, 16);
  int o3 = cg_output(&t, "o3", KN_DT_F32, 32), o4 = cg_output(&t, "o4", KN_DT_F32, 32);
  int o5 = cg_output(&t, "o5", KN_DT_F32, 32);
  kn_buffer *p[7] = {cg_param(&t, "a", KN_DT_F32), cg_param(&t, "idx", KN_DT_I64),
                     cg_param(&t, "o1", KN_DT_F32), cg_param(&t, "o2", KN_DT_F32),
                     cg_param(&t, "o3", KN_DT_F32), cg_param(&t, "o4", KN_DT_F32),
                     cg_param(&t, "o5", KN_DT_F32)};
  kn_kernel *k = cg_kernel(&t, "gather_kernel", 7, p);
  kn_var *i = kn_var_new(&t.c, "i");
  kn_expr *iv = cg_var(&t, i);
  kn_expr *dense = cg_ramp(&t, kn_e_mul(&t.c, iv, cg_i(&t, 8)), 1, 8);
  kn_stmt *stmts[5];
  /* o1[j] = a[3j]  (constant stride: gather) */
  stmts[0] = st(&t, p[2], dense, ld(&t, p[0], cg_ramp(&t, kn_e_mul(&t.c, iv, cg_i(&t, 24)), 3, 8)));
  /* o2[j] = a[idx[j]]  (data-dependent gather), only i < 2 */
  stmts[1] = kn_s_if(&t.c, kn_e_bin(&t.c, KN_E_LT, iv, cg_i(&t, 2)),
                     st(&t, p[3], dense, ld(&t, p[0], ld(&t, p[1], dense))), NULL);
  /* o3[i + 4l] = a[8i + l]  (scatter) */
  stmts[2] = st(&t, p[4], cg_ramp(&t, iv, 4, 8), ld(&t, p[0], dense));
  /* o4[j] = a[j + 10] + a[5]  (ramp + broadcast is contiguous; broadcast index) */
  kn_expr *shifted = kn_e_add(&t.c, dense, kn_e_broadcast(&t.c, cg_i(&t, 10), 8));
  stmts[3] = st(&t, p[5], dense, kn_e_add(&t.c, ld(&t, p[0], shifted), ld(&t, p[0], kn_e_broadcast(&t.c, cg_i(&t, 5), 8))));
  /* o5[j] = a[95 - j]  (stride -1) */
  stmts[4] = st(&t, p[6], dense, ld(&t, p[0], cg_ramp(&t, kn_e_sub(&t.c, cg_i(&t, 95), kn_e_mul(&t.c, iv, cg_i(&t, 8))), -1, 8)));
  k->body = loop(&t, i, 0, 4, kn_s_seq(&t.c, stmts, 5));
  cg_step(&t, k, (int[]){IN, IN, OUT, OUT, OUT, OUT, OUT}, (int[]){ia, iidx, o1, o2, o3, o4, o5});
  cg_build_and_load(&t);
  float a[96], r1[32], r2[16], r3[32], r4[32], r5[32];
  int64_t idx[16];
  for (int j = 0; j < 96; j++) a[j] = (float)j * 0.5f + 1.0f;
  for (int j = 0; j < 16; j++) idx[j] = (j * 37 + 11) % 96;
  cg_run(&t, (const void *[]){a, idx}, (void *[]){r1, r2, r3, r4, r5}, 1);
  for (int j = 0; j < 32; j++) {
    assert_float_equal(r1[j], a[3 * j], 0);
    assert_float_equal(r3[(j / 8) + 4 * (j % 8)], a[j], 0);
    assert_float_equal(r4[j], a[j + 10] + a[5], 0);
    assert_float_equal(r5[j], a[95 - j], 0);
  }
  for (int j = 0; j < 16; j++) assert_float_equal(r2[j], a[idx[j]], 0);
  cg_free(&t);
}

static int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0 - (uint64_t)a); /* wraps for INT64_MIN */
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static int64_t floor_mod(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

/* Floor DIV / MOD: variable divisors (incl. 0 and -1), constants 3, 4, -3,
 * and the unsigned-friendly path (loop var / 3), scalar and 8-lane. */
static void test_floor_divmod(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "divmod");
  enum { N = 64, NOUT = 10 };
  int ia = cg_input(&t, "a", KN_DT_I64, N), ib = cg_input(&t, "b", KN_DT_I64, N);
  int ia32 = cg_input(&t, "a32", KN_DT_I32, N), ib32 = cg_input(&t, "b32", KN_DT_I32, N);
  int outs[2][NOUT];
  for (int v = 0; v < 2; v++)
    for (int o = 0; o < NOUT; o++) {
      char *name = kn_arena_printf(&t.arena, "o%d_%d", v, o);
      outs[v][o] = cg_output(&t, name, o >= 8 ? KN_DT_I32 : KN_DT_I64, N);
    }
  for (int lanes = 1; lanes <= 8; lanes *= 8) {
    kn_buffer *p[4 + NOUT];
    p[0] = cg_param(&t, "a", KN_DT_I64);
    p[1] = cg_param(&t, "b", KN_DT_I64);
    p[2] = cg_param(&t, "a32", KN_DT_I32);
    p[3] = cg_param(&t, "b32", KN_DT_I32);
    for (int o = 0; o < NOUT; o++) p[4 + o] = cg_param(&t, "o", o >= 8 ? KN_DT_I32 : KN_DT_I64);
    kn_kernel *k = cg_kernel(&t, lanes == 1 ? "divmod1" : "divmod8", 4 + NOUT, p);
    kn_var *i = kn_var_new(&t.c, "i");
    kn_expr *idx = lanes == 1 ? cg_var(&t, i) : cg_ramp(&t, kn_e_mul(&t.c, cg_var(&t, i), cg_i(&t, 8)), 1, 8);
    kn_expr *a = ld(&t, p[0], idx), *b = ld(&t, p[1], idx);
    kn_expr *a32 = ld(&t, p[2], idx), *b32 = ld(&t, p[3], idx);
    kn_expr *vals[NOUT] = {
        kn_e_div(&t.c, a, b),
        kn_e_mod(&t.c, a, b),
        kn_e_div(&t.c, a, kn_e_broadcast(&t.c, cg_i(&t, 3), lanes)),
        kn_e_mod(&t.c, a, kn_e_broadcast(&t.c, cg_i(&t, 3), lanes)),
        kn_e_div(&t.c, a, kn_e_broadcast(&t.c, cg_i(&t, 4), lanes)),
        kn_e_mod(&t.c, a, kn_e_broadcast(&t.c, cg_i(&t, 4), lanes)),
        kn_e_add(&t.c, kn_e_div(&t.c, a, kn_e_broadcast(&t.c, cg_i(&t, -3), lanes)),
                 kn_e_mul(&t.c, kn_e_mod(&t.c, a, kn_e_broadcast(&t.c, cg_i(&t, -3), lanes)), kn_e_broadcast(&t.c, cg_i(&t, 1000), lanes))),
        /* index arithmetic: (idx - 20) / 3 * 100 + idx % 5 */
        kn_e_add(&t.c, kn_e_mul(&t.c, kn_e_div(&t.c, kn_e_sub(&t.c, idx, kn_e_broadcast(&t.c, cg_i(&t, 20), lanes)), kn_e_broadcast(&t.c, cg_i(&t, 3), lanes)),
                               kn_e_broadcast(&t.c, cg_i(&t, 100), lanes)),
                 kn_e_mod(&t.c, idx, kn_e_broadcast(&t.c, cg_i(&t, 5), lanes))),
        kn_e_div(&t.c, a32, b32),
        kn_e_mod(&t.c, a32, b32),
    };
    kn_stmt *stmts[NOUT];
    for (int o = 0; o < NOUT; o++) stmts[o] = st(&t, p[4 + o], idx, vals[o]);
    k->body = loop(&t, i, 0, N / lanes, kn_s_seq(&t.c, stmts, NOUT));
    int kinds[4 + NOUT], indices[4 + NOUT] = {ia, ib, ia32, ib32};
    for (int j = 0; j < 4 + NOUT; j++) kinds[j] = j < 4 ? IN : OUT;
    for (int o = 0; o < NOUT; o++) indices[4 + o] = outs[lanes == 8][o];
    cg_step(&t, k, kinds, indices);
  }
  cg_build_and_load(&t);
  int64_t a[N], b[N];
  int32_t a32[N], b32[N];
  static const int64_t divisors[] = {7, -7, 3, -3, 1, -1, 0, 2, -2, 100, INT64_MIN, 5};
  for (int j = 0; j < N; j++) {
    a[j] = (j % 2 ? -1 : 1) * (int64_t)(j * j * 7 + j);
    if (j == 5) a[j] = INT64_MIN;
    if (j == 6) a[j] = INT64_MAX;
    b[j] = divisors[j % 12];
    a32[j] = (j % 3 ? -1 : 1) * ((j * j * 13 + 5 * j) % 100000);
    if (j == 7) a32[j] = INT32_MIN;
    b32[j] = (int32_t)(j % 12 == 10 ? 9 : b[j]);
  }
  int64_t res[2][8][N];
  int32_t res32[2][2][N];
  void *outp[2 * NOUT];
  for (int v = 0; v < 2; v++)
    for (int o = 0; o < NOUT; o++)
      outp[v * NOUT + o] = o < 8 ? (void *)res[v][o] : (void *)res32[v][o - 8];
  cg_run(&t, (const void *[]){a, b, a32, b32}, outp, 1);
  for (int v = 0; v < 2; v++)
  for (int j = 0; j < N; j++) {
    int64_t(*o)[N] = res[v];
    int32_t(*o32)[N] = res32[v];
    assert_int_equal(o[0][j], floor_div(a[j], b[j]));
    assert_int_equal(o[1][j], floor_mod(a[j], b[j]));
    assert_int_equal(o[2][j], floor_div(a[j], 3));
    assert_int_equal(o[3][j], floor_mod(a[j], 3));
    assert_int_equal(o[4][j], floor_div(a[j], 4));
    assert_int_equal(o[5][j], floor_mod(a[j], 4));
    assert_int_equal(o[6][j], floor_div(a[j], -3) + floor_mod(a[j], -3) * 1000);
    assert_int_equal(o[7][j], floor_div(j - 20, 3) * 100 + floor_mod(j, 5));
    assert_int_equal(o32[0][j], (int32_t)floor_div(a32[j], b32[j]));
    assert_int_equal(o32[1][j], (int32_t)floor_mod(a32[j], b32[j]));
  }
  cg_free(&t);
}

/* select / min / max / comparisons / logic on f32 and i32, 8 lanes */
static void test_select_compare(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "sel");
  enum { N = 24 };
  int ia = cg_input(&t, "a", KN_DT_F32, N), ib = cg_input(&t, "b", KN_DT_F32, N);
  int ix = cg_input(&t, "x", KN_DT_I32, N), iy = cg_input(&t, "y", KN_DT_U8, N);
  int o1 = cg_output(&t, "o1", KN_DT_F32, N), o2 = cg_output(&t, "o2", KN_DT_I32, N);
  int o3 = cg_output(&t, "o3", KN_DT_BOOL, N), o4 = cg_output(&t, "o4", KN_DT_U8, N);
  kn_buffer *p[8] = {cg_param(&t, "a", KN_DT_F32), cg_param(&t, "b", KN_DT_F32),
                     cg_param(&t, "x", KN_DT_I32), cg_param(&t, "y", KN_DT_U8),
                     cg_param(&t, "o1", KN_DT_F32), cg_param(&t, "o2", KN_DT_I32),
                     cg_param(&t, "o3", KN_DT_BOOL), cg_param(&t, "o4", KN_DT_U8)};
  kn_kernel *k = cg_kernel(&t, "sel_kernel", 8, p);
  kn_var *i = kn_var_new(&t.c, "i");
  kn_expr *idx = cg_ramp(&t, kn_e_mul(&t.c, cg_var(&t, i), cg_i(&t, 8)), 1, 8);
  kn_expr *ea = ld(&t, p[0], idx), *eb = ld(&t, p[1], idx), *ex = ld(&t, p[2], idx), *ey = ld(&t, p[3], idx);
  kn_expr *gt = kn_e_bin(&t.c, KN_E_GT, ea, eb);
  kn_stmt *s[4];
  s[0] = st(&t, p[4], idx, kn_e_select(&t.c, gt, kn_e_min(&t.c, ea, eb), kn_e_max(&t.c, ea, eb)));
  kn_expr *x3 = kn_e_broadcast(&t.c, kn_e_const_int(&t.c, KN_DT_I32, 3), 8);
  s[1] = st(&t, p[5], idx, kn_e_select(&t.c, kn_e_bin(&t.c, KN_E_LE, ex, x3), kn_e_max(&t.c, ex, kn_e_sub(&t.c, kn_e_broadcast(&t.c, kn_e_const_int(&t.c, KN_DT_I32, 0), 8), ex)), kn_e_min(&t.c, ex, x3)));
  kn_expr *ne = kn_e_bin(&t.c, KN_E_NE, ea, eb);
  s[2] = st(&t, p[6], idx, kn_e_bin(&t.c, KN_E_OR, kn_e_bin(&t.c, KN_E_AND, ne, kn_e_not(&t.c, gt)), kn_e_bin(&t.c, KN_E_EQ, ex, x3)));
  kn_expr *y200 = kn_e_broadcast(&t.c, kn_e_const_int(&t.c, KN_DT_U8, 200), 8);
  s[3] = st(&t, p[7], idx, kn_e_select(&t.c, kn_e_bin(&t.c, KN_E_GE, ey, y200), kn_e_min(&t.c, ey, y200), kn_e_max(&t.c, ey, kn_e_broadcast(&t.c, kn_e_const_int(&t.c, KN_DT_U8, 100), 8))));
  k->body = loop(&t, i, 0, N / 8, kn_s_seq(&t.c, s, 4));
  cg_step(&t, k, (int[]){IN, IN, IN, IN, OUT, OUT, OUT, OUT}, (int[]){ia, ib, ix, iy, o1, o2, o3, o4});
  cg_build_and_load(&t);
  float a[N], b[N], r1[N];
  int32_t x[N], r2[N];
  uint8_t y[N], r3[N], r4[N];
  for (int j = 0; j < N; j++) {
    a[j] = (float)((j * 7) % 11) - 5.0f;
    b[j] = (float)((j * 5) % 9) - 4.0f;
    x[j] = (j * 13) % 17 - 8;
    y[j] = (uint8_t)(j * 23);
  }
  cg_run(&t, (const void *[]){a, b, x, y}, (void *[]){r1, r2, r3, r4}, 1);
  for (int j = 0; j < N; j++) {
    float mn = a[j] < b[j] ? a[j] : b[j], mx = a[j] > b[j] ? a[j] : b[j];
    assert_float_equal(r1[j], a[j] > b[j] ? mn : mx, 0);
    int32_t ax = x[j] > -x[j] ? x[j] : -x[j];
    assert_int_equal(r2[j], x[j] <= 3 ? ax : (x[j] < 3 ? x[j] : 3));
    assert_int_equal(r3[j], (a[j] != b[j] && !(a[j] > b[j])) || x[j] == 3);
    assert_int_equal(r4[j], y[j] >= 200 ? 200 : (y[j] > 100 ? y[j] : 100));
  }
  cg_free(&t);
}

/* float MIN / MAX are NaN when either operand is (ONNX Relu(NaN) is NaN),
 * whichever way they are emitted: against a splat that is never NaN (first
 * or second operand, and nested as Clip is: x86 then uses one MAXPS / MINPS),
 * against a NaN splat, and between two loads that may both be NaN */
static float nan_max(float a, float b) { return isnan(a) || isnan(b) ? NAN : fmaxf(a, b); }
static float nan_min(float a, float b) { return isnan(a) || isnan(b) ? NAN : fminf(a, b); }

static void test_minmax_nan(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "minmax");
  enum { N = 16 };
  int ia = cg_input(&t, "a", KN_DT_F32, N), ib = cg_input(&t, "b", KN_DT_F32, N);
  int io[4];
  for (int o = 0; o < 4; o++) io[o] = cg_output(&t, (const char *[]){"o1", "o2", "o3", "o4"}[o], KN_DT_F32, N);
  kn_buffer *p[6] = {cg_param(&t, "a", KN_DT_F32),  cg_param(&t, "b", KN_DT_F32),  cg_param(&t, "o1", KN_DT_F32),
                     cg_param(&t, "o2", KN_DT_F32), cg_param(&t, "o3", KN_DT_F32), cg_param(&t, "o4", KN_DT_F32)};
  kn_kernel *k = cg_kernel(&t, "minmax_kernel", 6, p);
  kn_var *i = kn_var_new(&t.c, "i");
  kn_expr *idx = cg_ramp(&t, kn_e_mul(&t.c, cg_var(&t, i), cg_i(&t, 8)), 1, 8);
  kn_expr *ea = ld(&t, p[0], idx), *eb = ld(&t, p[1], idx);
#define SPLAT(v) kn_e_broadcast(&t.c, kn_e_float(&t.c, KN_DT_F32, (v)), 8)
  kn_stmt *s[4] = {
      st(&t, p[2], idx, kn_e_min(&t.c, kn_e_max(&t.c, ea, SPLAT(0)), SPLAT(6))), /* Clip(a, 0, 6) */
      st(&t, p[3], idx, kn_e_max(&t.c, SPLAT(2.5), ea)),
      st(&t, p[4], idx, kn_e_min(&t.c, ea, eb)),
      st(&t, p[5], idx, kn_e_max(&t.c, ea, SPLAT(NAN))),
  };
#undef SPLAT
  k->body = loop(&t, i, 0, N / 8, kn_s_seq(&t.c, s, 4));
  cg_step(&t, k, (int[]){IN, IN, OUT, OUT, OUT, OUT}, (int[]){ia, ib, io[0], io[1], io[2], io[3]});
  cg_build_and_load(&t);
  float a[N] = {NAN, -1, 0.5f, 7, INFINITY, -INFINITY, 3, NAN, 2.5f, -3, 6, 1e30f, -1e30f, 5.5f, NAN, 2};
  float b[N] = {1, NAN, NAN, 2, -INFINITY, 0, 4, NAN, 1, -4, NAN, 0, 1, 6, -2, 2};
  float r[4][N];
  cg_run(&t, (const void *[]){a, b}, (void *[]){r[0], r[1], r[2], r[3]}, 1);
  for (int j = 0; j < N; j++) {
    float want[4] = {nan_min(nan_max(a[j], 0), 6), nan_max(2.5f, a[j]), nan_min(a[j], b[j]), nan_max(a[j], NAN)};
    for (int o = 0; o < 4; o++) {
      if (isnan(want[o]))
        assert_true(isnan(r[o][j]));
      else /* not assert_float_equal: cmocka's passes a NaN */
        assert_true(r[o][j] == want[o]);
    }
  }
  cg_free(&t);
}

/* f16 and bf16 buffers: out = in * 2.5 + 1 computed in f32, rounded on store */
static void test_half_types(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "half");
  enum { N = 40 };
  kn_dtype types[2] = {KN_DT_F16, KN_DT_BF16};
  int ins[2], outs[2];
  for (int v = 0; v < 2; v++) {
    kn_dtype dt = types[v];
    ins[v] = cg_input(&t, v ? "xb" : "xh", dt, N);
    outs[v] = cg_output(&t, v ? "yb" : "yh", dt, N);
    kn_buffer *p[2] = {cg_param(&t, "x", dt), cg_param(&t, "y", dt)};
    kn_kernel *k = cg_kernel(&t, v ? "bf16_kernel" : "f16_kernel", 2, p);
    kn_var *i = kn_var_new(&t.c, "i"), *j = kn_var_new(&t.c, "j");
    kn_expr *idx = cg_ramp(&t, kn_e_mul(&t.c, cg_var(&t, i), cg_i(&t, 16)), 1, 16);
    kn_expr *c25 = kn_e_float(&t.c, dt, 2.5), *c1 = kn_e_float(&t.c, dt, 1.0);
    kn_stmt *vec = loop(&t, i, 0, N / 16, st(&t, p[1], idx, kn_e_add(&t.c, kn_e_mul(&t.c, ld(&t, p[0], idx), kn_e_broadcast(&t.c, c25, 16)), kn_e_broadcast(&t.c, c1, 16))));
    kn_stmt *tail = loop(&t, j, N / 16 * 16, N % 16, st(&t, p[1], cg_var(&t, j), kn_e_add(&t.c, kn_e_mul(&t.c, ld(&t, p[0], cg_var(&t, j)), c25), c1)));
    k->body = kn_s_seq2(&t.c, vec, tail);
    cg_step(&t, k, (int[]){IN, OUT}, (int[]){ins[v], outs[v]});
  }
  cg_build_and_load(&t);
  uint16_t xh[N], xb[N], yh[N], yb[N];
  for (int j = 0; j < N; j++) {
    float v = ((float)j - 20.0f) * 0.37f;
    xh[j] = kn_f32_to_f16(v);
    xb[j] = kn_f32_to_bf16(v);
  }
  cg_run(&t, (const void *[]){xh, xb}, (void *[]){yh, yb}, 1);
  for (int j = 0; j < N; j++) {
    float rh = kn_f16_to_f32(xh[j]) * 2.5f + 1.0f, rb = kn_bf16_to_f32(xb[j]) * 2.5f + 1.0f;
    assert_int_equal(yh[j], kn_f32_to_f16(rh));
    assert_int_equal(yb[j], kn_f32_to_bf16(rb));
  }
  cg_free(&t);
}

/* out[m] = sum_k a[m, k] * b[k] with an 8-lane LOCAL accumulator and
 * vreduce_add; mx[m] = max_k a[m, k] via vreduce_max; scalar LOCAL[1] sum */
static void test_local_accumulator(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "accum");
  enum { M = 13, K = 64 };
  int ia = cg_input(&t, "a", KN_DT_F32, M * K), ib = cg_input(&t, "b", KN_DT_F32, K);
  int io = cg_output(&t, "out", KN_DT_F32, M), imx = cg_output(&t, "mx", KN_DT_F32, M);
  int isum = cg_output(&t, "isum", KN_DT_I32, M);
  kn_buffer *p[5] = {cg_param(&t, "a", KN_DT_F32), cg_param(&t, "b", KN_DT_F32), cg_param(&t, "out", KN_DT_F32),
                     cg_param(&t, "mx", KN_DT_F32), cg_param(&t, "isum", KN_DT_I32)};
  kn_kernel *k = cg_kernel(&t, "gemv", 5, p);
  kn_buffer *acc = kn_buffer_new(&t.c, "acc", KN_DT_F32, KN_BUF_LOCAL, 8);
  kn_buffer *mx = kn_buffer_new(&t.c, "mxacc", KN_DT_F32, KN_BUF_LOCAL, 8);
  kn_buffer *cnt = kn_buffer_new(&t.c, "cnt", KN_DT_I32, KN_BUF_LOCAL, 1);
  kn_var *m = kn_var_new(&t.c, "m"), *kk = kn_var_new(&t.c, "k");
  kn_expr *lane = cg_ramp(&t, cg_i(&t, 0), 1, 8);
  kn_expr *arow = cg_ramp(&t, kn_e_add(&t.c, kn_e_mul(&t.c, cg_var(&t, m), cg_i(&t, K)), kn_e_mul(&t.c, cg_var(&t, kk), cg_i(&t, 8))), 1, 8);
  kn_expr *bk = cg_ramp(&t, kn_e_mul(&t.c, cg_var(&t, kk), cg_i(&t, 8)), 1, 8);
  kn_expr *av = ld(&t, p[0], arow);
  kn_stmt *init[3] = {st(&t, acc, lane, kn_e_broadcast(&t.c, f32c(&t, 0.0), 8)),
                      st(&t, mx, lane, kn_e_broadcast(&t.c, f32c(&t, -INFINITY), 8)),
                      st(&t, cnt, cg_i(&t, 0), kn_e_const_int(&t.c, KN_DT_I32, 0))};
  kn_stmt *upd[3] = {st(&t, acc, lane, kn_e_add(&t.c, ld(&t, acc, lane), kn_e_mul(&t.c, av, ld(&t, p[1], bk)))),
                     st(&t, mx, lane, kn_e_max(&t.c, ld(&t, mx, lane), av)),
                     st(&t, cnt, cg_i(&t, 0), kn_e_add(&t.c, ld(&t, cnt, cg_i(&t, 0)),
                                                       kn_e_call1(&t.c, KN_FN_VREDUCE_ADD, kn_e_cast(&t.c, KN_DT_I32, av))))};
  kn_stmt *fin[3] = {st(&t, p[2], cg_var(&t, m), kn_e_call1(&t.c, KN_FN_VREDUCE_ADD, ld(&t, acc, lane))),
                     st(&t, p[3], cg_var(&t, m), kn_e_call1(&t.c, KN_FN_VREDUCE_MAX, ld(&t, mx, lane))),
                     st(&t, p[4], cg_var(&t, m), ld(&t, cnt, cg_i(&t, 0)))};
  kn_stmt *body = kn_s_seq(&t.c, (kn_stmt *[]){kn_s_seq(&t.c, init, 3), loop(&t, kk, 0, K / 8, kn_s_seq(&t.c, upd, 3)), kn_s_seq(&t.c, fin, 3)}, 3);
  body = kn_s_alloc(&t.c, acc, kn_s_alloc(&t.c, mx, kn_s_alloc(&t.c, cnt, body)));
  k->body = loop(&t, m, 0, M, body);
  cg_step(&t, k, (int[]){IN, IN, OUT, OUT, OUT}, (int[]){ia, ib, io, imx, isum});
  cg_build_and_load(&t);
  static float a[M * K];
  float b[K], out[M], omx[M];
  int32_t osum[M];
  for (int j = 0; j < M * K; j++) a[j] = (float)((j * 31) % 97) * 0.1f - 4.0f;
  for (int j = 0; j < K; j++) b[j] = (float)((j * 7) % 13) * 0.05f - 0.3f;
  cg_run(&t, (const void *[]){a, b}, (void *[]){out, omx, osum}, 1);
  for (int r = 0; r < M; r++) {
    double ref = 0;
    float rmx = -INFINITY;
    int32_t rs = 0;
    for (int c = 0; c < K; c++) {
      ref += (double)a[r * K + c] * b[c];
      rmx = a[r * K + c] > rmx ? a[r * K + c] : rmx;
      rs += (int32_t)a[r * K + c];
    }
    assert_float_equal(out[r], ref, 1e-4);
    assert_float_equal(omx[r], rmx, 0);
    assert_int_equal(osum[r], rs);
  }
  cg_free(&t);
}

/* A PARALLEL loop over N*1003 elements (batch symbol), run on 1, 2, 3 and 7
 * threads with batch 1 and 3; a nested PARALLEL loop stays serial. */
static void test_parallel(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "par");
  enum { W = 1003 };
  int ia = cg_input_batched(&t, "a", KN_DT_F32, W), io = cg_output_batched(&t, "out", KN_DT_F32, W);
  kn_buffer *p[2] = {cg_param(&t, "a", KN_DT_F32), cg_param(&t, "out", KN_DT_F32)};
  kn_kernel *k = cg_kernel(&t, "par_kernel", 2, p);
  k->batch = kn_var_new(&t.c, "N");
  k->parallel = true;
  kn_var *i = kn_var_new(&t.c, "i"), *j = kn_var_new(&t.c, "j");
  /* for i parallel in [0, N*17): for j parallel(nested) in [0, 59): out[i*59+j] = a[i*59+j]*3 + i */
  kn_expr *flat = kn_e_add(&t.c, kn_e_mul(&t.c, cg_var(&t, i), cg_i(&t, 59)), cg_var(&t, j));
  kn_stmt *inner = kn_s_for(&t.c, j, cg_i(&t, 0), cg_i(&t, 59), KN_FOR_PARALLEL,
                            st(&t, p[1], flat, kn_e_add(&t.c, kn_e_mul(&t.c, ld(&t, p[0], flat), f32c(&t, 3.0)),
                                                        kn_e_cast(&t.c, KN_DT_F32, cg_var(&t, i)))));
  k->body = kn_s_for(&t.c, i, cg_i(&t, 0), kn_e_mul(&t.c, cg_var(&t, k->batch), cg_i(&t, 17)), KN_FOR_PARALLEL, inner);
  cg_step(&t, k, (int[]){IN, OUT}, (int[]){ia, io});
  const kiln_artifact *art = cg_build_and_load(&t);
  assert_int_equal(art->steps[0].parallel, 1);
  static float a[3 * W], out[3 * W];
  for (int e = 0; e < 3 * W; e++) a[e] = (float)e * 0.5f;
  int threads[4] = {1, 2, 3, 7};
  for (int ti = 0; ti < 4; ti++) {
    assert_int_equal(art->set_threads(threads[ti]), KILN_OK);
    for (int64_t batch = 1; batch <= 3; batch += 2) {
      for (int e = 0; e < 3 * W; e++) out[e] = NAN;
      cg_run(&t, (const void *[]){a}, (void *[]){out}, batch);
      for (int e = 0; e < 3 * W; e++) {
        if (e < batch * W)
          assert_float_equal(out[e], a[e] * 3.0f + (float)(e / 59), 0);
        else
          assert_true(isnan(out[e])); /* nothing written past N * W */
      }
    }
  }
  cg_free(&t);
}

/* e = i; 50 times e = e + e: a DAG with 2^50 paths must be emitted (and its
 * ranges analysed) once per node. out[i] = (e / 7) % 5 + (e - 1) / 3. */
static void test_shared_dag(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "dag");
  int io = cg_output(&t, "out", KN_DT_I64, 4);
  kn_buffer *p[1] = {cg_param(&t, "out", KN_DT_I64)};
  kn_kernel *k = cg_kernel(&t, "dag_kernel", 1, p);
  kn_var *i = kn_var_new(&t.c, "i");
  kn_expr *e = cg_var(&t, i);
  for (int r = 0; r < 50; r++) e = kn_e_add(&t.c, e, e);
  kn_expr *v = kn_e_add(&t.c, kn_e_mod(&t.c, kn_e_div(&t.c, e, cg_i(&t, 7)), cg_i(&t, 5)),
                        kn_e_div(&t.c, kn_e_sub(&t.c, e, cg_i(&t, 1)), cg_i(&t, 3)));
  k->body = loop(&t, i, 0, 4, st(&t, p[0], cg_var(&t, i), v));
  cg_step(&t, k, (int[]){OUT}, (int[]){io});
  cg_build_and_load(&t);
  int64_t out[4];
  cg_run(&t, (const void *[]){NULL}, (void *[]){out}, 1);
  for (int64_t j = 0; j < 4; j++) {
    int64_t ev = j << 50;
    assert_int_equal(out[j], (ev / 7) % 5 + floor_div(ev - 1, 3));
  }
  cg_free(&t);
}

/* out[i] = 3 a[i] with prefetch hints of a (ahead into L1, scattered into
 * L2) in the loop: llvm.prefetch compiles, runs, and changes no value. */
static void test_prefetch(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "prefetch");
  const int n = 64;
  int ia = cg_input(&t, "a", KN_DT_F32, n), io = cg_output(&t, "out", KN_DT_F32, n);
  kn_buffer *p[2] = {cg_param(&t, "a", KN_DT_F32), cg_param(&t, "out", KN_DT_F32)};
  kn_kernel *k = cg_kernel(&t, "prefetch_kernel", 2, p);
  kn_var *i = kn_var_new(&t.c, "i");
  kn_expr *ahead = kn_e_min(&t.c, kn_e_add(&t.c, cg_var(&t, i), cg_i(&t, 16)), cg_i(&t, n - 1));
  kn_expr *scattered = kn_e_mod(&t.c, kn_e_mul(&t.c, cg_var(&t, i), cg_i(&t, 7)), cg_i(&t, n));
  kn_stmt *hints[2] = {kn_s_prefetch(&t.c, p[0], ahead, 1), kn_s_prefetch(&t.c, p[0], scattered, 2)};
  kn_stmt *body = st(&t, p[1], cg_var(&t, i), kn_e_mul(&t.c, ld(&t, p[0], cg_var(&t, i)), f32c(&t, 3.0)));
  k->body = loop(&t, i, 0, n, kn_s_seq2(&t.c, kn_s_seq(&t.c, hints, 2), body));
  cg_step(&t, k, (int[]){IN, OUT}, (int[]){ia, io});
  cg_build_and_load(&t);
  float a[64], out[64];
  for (int j = 0; j < n; j++) a[j] = (float)j - 20.5f;
  cg_run(&t, (const void *[]){a}, (void *[]){out}, 1);
  for (int j = 0; j < n; j++) assert_float_equal(out[j], a[j] * 3.0f, 0);
  cg_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scalar_loop),      cmocka_unit_test(test_vector_add_tail),
      cmocka_unit_test(test_gather_scatter),   cmocka_unit_test(test_floor_divmod),
      cmocka_unit_test(test_select_compare),   cmocka_unit_test(test_minmax_nan),
      cmocka_unit_test(test_half_types),
      cmocka_unit_test(test_local_accumulator), cmocka_unit_test(test_parallel),
      cmocka_unit_test(test_shared_dag),       cmocka_unit_test(test_prefetch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
