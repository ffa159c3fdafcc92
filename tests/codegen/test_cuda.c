/* test_cuda.c — the GPU back end without a GPU: hand-built GPU kernels
 * through kn_cuda_launch_info, kn_cuda_emit and kn_nvrtc_compile. What can
 * be checked here: the launch shape, the text (no #include, the helpers
 * where floor semantics need them), that NVRTC compiles it for sm_80 and
 * sm_90 with ptxas's resource report parsed, the PTX image, and the
 * diagnostics of bad kernels and bad source. Tests that need NVRTC skip
 * where it is absent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "codegen/cuda.h"

typedef struct fixture {
  kn_arena arena;
  kn_expr_ctx c;
  kn_diag d;
  kn_target t;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  kn_arena_init(&f->arena);
  f->c.arena = &f->arena;
  kn_diag_init(&f->d);
  if (kn_target_parse("cuda -arch=sm_80,sm_90", &f->t, &f->d) != 0) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  kn_diag_free(&f->d);
  kn_arena_free(&f->arena);
  free(f);
  return 0;
}

/* Does some diagnostic line contain every one of the NULL-ended strings? */
static bool diag_has(const kn_diag *d, ...) {
  for (int i = 0; i < d->count; i++) {
    va_list ap;
    va_start(ap, d);
    bool all = true;
    for (const char *s; (s = va_arg(ap, const char *));) all = all && strstr(d->lines[i], s);
    va_end(ap);
    if (all) return true;
  }
  return false;
}

static kn_kernel *kernel(fixture *f, const char *name, int n, kn_buffer **params, kn_var *batch, kn_stmt *body) {
  kn_kernel *k = KN_NEW(&f->arena, kn_kernel);
  k->name = name;
  k->n_params = n;
  k->params = KN_NEW_ARRAY(&f->arena, kn_buffer *, n);
  memcpy(k->params, params, sizeof *params * (size_t)n);
  k->batch = batch;
  k->body = body;
  k->gpu = true;
  k->nodes = "node/with.odd*/chars";
  return k;
}

#define kn_e_lt(c, a, b) kn_e_bin((c), KN_E_LT, (a), (b))

static kn_expr *I(fixture *f, int64_t v) { return kn_e_int(&f->c, v); }
static kn_expr *V(fixture *f, kn_var *v) { return kn_e_var(&f->c, v); }
static kn_expr *F(fixture *f, double v) { return kn_e_float(&f->c, KN_DT_F32, v); }

/* Emits and compiles ks for sm_80 and sm_90 (asserting success) into *m;
 * returns the source. */
static const char *build(fixture *f, kn_kernel **ks, int n, kn_cuda_module *m) {
  const char *src = NULL;
  int rc = kn_cuda_emit((const kn_kernel *const *)ks, n, &f->arena, &src, &f->d);
  if (rc) kn_diag_print(&f->d, "test_cuda");
  assert_int_equal(rc, 0);
  assert_null(strstr(src, "#include"));
  const char *names[8];
  for (int i = 0; i < n; i++) names[i] = ks[i]->name;
  rc = kn_nvrtc_compile(src, names, n, &f->t, &f->arena, m, &f->d);
  if (rc) {
    kn_diag_print(&f->d, "test_cuda");
    fputs(src, stderr);
  }
  assert_int_equal(rc, 0);
  assert_int_equal(m->n_images, 3);
  assert_int_equal(m->n_kernels, n);
  for (int i = 0; i < n * 2; i++) {
    assert_true(m->resources[i].registers > 0);
    assert_int_equal(m->resources[i].spill_stores, 0);
    assert_int_equal(m->resources[i].spill_loads, 0);
  }
  return src;
}

static void need_nvrtc(void) {
  if (!kn_nvrtc_available(NULL)) skip();
}

/* ---- (1) elementwise SIMT: every math function, f16, floor div / mod ---- */

static kn_kernel *elementwise(fixture *f) {
  kn_expr_ctx *c = &f->c;
  kn_buffer *out = kn_buffer_new(c, "out.y", KN_DT_F32, KN_BUF_PARAM, 0);
  kn_buffer *in = kn_buffer_new(c, "in/x", KN_DT_F16, KN_BUF_PARAM, 0);
  kn_buffer *out_h = kn_buffer_new(c, "out_h", KN_DT_F16, KN_BUF_PARAM, 0);
  kn_buffer *out_i = kn_buffer_new(c, "out_i", KN_DT_I32, KN_BUF_PARAM, 0);
  kn_var *N = kn_var_new(c, "N"), *b = kn_var_new(c, "blk.x"), *t = kn_var_new(c, "thr/x"), *i = kn_var_new(c, "i");
  kn_expr *n = kn_e_mul(c, V(f, N), I(f, 1000));
  kn_expr *x = kn_e_cast(c, KN_DT_F32, kn_e_load(c, in, V(f, i)));
  kn_fn unary[] = {KN_FN_EXP, KN_FN_LOG,  KN_FN_SQRT,  KN_FN_ERF, KN_FN_TANH, KN_FN_SIGMOID,
                   KN_FN_FLOOR, KN_FN_CEIL, KN_FN_ROUND, KN_FN_ABS, KN_FN_SIN,  KN_FN_COS};
  kn_expr *v = kn_e_max(c, x, F(f, 0.5));
  for (size_t j = 0; j < sizeof unary / sizeof unary[0]; j++) v = kn_e_add(c, v, kn_e_call1(c, unary[j], x));
  kn_expr *pw[2] = {x, F(f, 1.5)}, *fm[3] = {x, x, v};
  v = kn_e_add(c, kn_e_call(c, KN_FN_POW, pw, 2), kn_e_call(c, KN_FN_FMA, fm, 3));
  v = kn_e_min(c, v, F(f, 1e30));
  /* i - 500 is negative for the first threads: floor semantics needed */
  kn_expr *shifted = kn_e_sub(c, V(f, i), I(f, 500));
  kn_expr *q = kn_e_add(c, kn_e_div(c, shifted, I(f, 7)), kn_e_mod(c, shifted, I(f, 7)));
  v = kn_e_add(c, v, kn_e_cast(c, KN_DT_F32, q));
  v = kn_e_select(c, kn_e_lt(c, x, F(f, 0)), F(f, 0), v);
  kn_stmt *body = kn_s_seq2(c, kn_s_store(c, out, V(f, i), v),
                            kn_s_seq2(c, kn_s_store(c, out_h, V(f, i), kn_e_cast(c, KN_DT_F16, v)),
                                      kn_s_store(c, out_i, V(f, i), kn_e_cast(c, KN_DT_I32, v))));
  body = kn_s_if(c, kn_e_lt(c, V(f, i), n), body, NULL);
  body = kn_s_let(c, i, kn_e_add(c, kn_e_mul(c, V(f, b), I(f, 256)), V(f, t)), body);
  body = kn_s_bind(c, t, I(f, 256), KN_FOR_THREAD, 0, body);
  kn_expr *grid = kn_e_div(c, kn_e_add(c, n, I(f, 255)), I(f, 256));
  body = kn_s_bind(c, b, grid, KN_FOR_BLOCK, 0, body);
  kn_buffer *ps[] = {out, in, out_h, out_i};
  return kernel(f, "k_elementwise", 4, ps, N, body);
}

static void test_elementwise(void **state) {
  fixture *f = *state;
  kn_kernel *k = elementwise(f);
  kn_cuda_launch l;
  assert_int_equal(kn_cuda_launch_info(k, &l, &f->d), 0);
  assert_string_equal(l.name, "k_elementwise");
  assert_ptr_equal(l.grid[0], k->body->u.loop.extent); /* depends on the batch */
  assert_int_equal(l.grid[1]->u.ival, 1);
  assert_int_equal(l.block[0], 256);
  assert_int_equal(l.block[1], 1);
  assert_int_equal(l.shared_bytes, 0);
  need_nvrtc();
  kn_cuda_module m;
  const char *src = build(f, &k, 1, &m);
  assert_non_null(strstr(src, "kn_cu_fdiv("));
  assert_non_null(strstr(src, "kn_cu_fmod("));
  assert_non_null(strstr(src, "erff("));
  assert_non_null(strstr(src, "rintf("));
  assert_non_null(strstr(src, "kn_cu_f2h("));
  assert_non_null(strstr(src, "__launch_bounds__(256) k_elementwise("));
  assert_null(strstr(src, "if (threadIdx")); /* THREAD extent == launch: no guard */
  assert_null(strstr(src, "odd*/")); /* node names cannot end the comment */
  if (getenv("KN_TEST_DUMP")) fputs(src, stdout);
}

/* ---- (2) shared memory and barriers: static, then dynamic past 48 KiB ---- */

static kn_kernel *reverse(fixture *f, const char *name, int64_t elems) {
  kn_expr_ctx *c = &f->c;
  kn_buffer *out = kn_buffer_new(c, "out", KN_DT_F32, KN_BUF_PARAM, 0);
  kn_buffer *in = kn_buffer_new(c, "in", KN_DT_F32, KN_BUF_PARAM, 0);
  kn_buffer *tile = kn_buffer_new(c, "tile", KN_DT_F32, KN_BUF_SHARED, elems);
  kn_buffer *flag = kn_buffer_new(c, "flag", KN_DT_BF16, KN_BUF_SHARED, 8);
  kn_var *b = kn_var_new(c, "b"), *t = kn_var_new(c, "t"), *j = kn_var_new(c, "j"), *u = kn_var_new(c, "u");
  int64_t per = elems / 256;
  kn_expr *at = kn_e_add(c, kn_e_mul(c, V(f, t), I(f, per)), V(f, j));
  kn_expr *g = kn_e_add(c, kn_e_mul(c, V(f, b), I(f, elems)), at);
  kn_stmt *load = kn_s_for(c, j, I(f, 0), I(f, per), KN_FOR_SERIAL, kn_s_store(c, tile, at, kn_e_load(c, in, g)));
  kn_expr *back = kn_e_sub(c, I(f, elems - 1), at);
  kn_expr *mark_value = kn_e_cast(c, KN_DT_F32, kn_e_load(c, flag, kn_e_mod(c, V(f, t), I(f, 8))));
  kn_stmt *store = kn_s_for(c, j, I(f, 0), I(f, per), KN_FOR_SERIAL,
                            kn_s_store(c, out, g, kn_e_add(c, kn_e_load(c, tile, back), mark_value)));
  kn_stmt *steps[] = {load, kn_s_barrier(c), store};
  kn_stmt *body = kn_s_bind(c, t, I(f, 256), KN_FOR_THREAD, 0, kn_s_seq(c, steps, 3));
  /* a narrower THREAD nest first: guarded; the barrier orders it too */
  kn_stmt *mark = kn_s_bind(c, u, I(f, 8), KN_FOR_THREAD, 0,
                            kn_s_store(c, flag, V(f, u), kn_e_cast(c, KN_DT_BF16, F(f, 1))));
  body = kn_s_alloc(c, tile, kn_s_alloc(c, flag, kn_s_seq2(c, mark, body)));
  body = kn_s_bind(c, b, I(f, 64), KN_FOR_BLOCK, 1, body);
  kn_buffer *ps[] = {out, in};
  return kernel(f, name, 2, ps, NULL, body);
}

static void test_shared(void **state) {
  fixture *f = *state;
  kn_kernel *ks[3] = {reverse(f, "k_static", 1024), reverse(f, "k_dynamic", 16384), reverse(f, "k_dynamic2", 32768)};
  kn_cuda_launch l;
  assert_int_equal(kn_cuda_launch_info(ks[0], &l, &f->d), 0);
  assert_int_equal(l.shared_bytes, 0); /* 4 KiB + 16 bytes: static */
  assert_int_equal(l.grid[1]->u.ival, 64);
  assert_int_equal(l.grid[0]->u.ival, 1);
  assert_int_equal(l.block[0], 256);
  assert_int_equal(kn_cuda_launch_info(ks[1], &l, &f->d), 0);
  assert_int_equal(l.shared_bytes, 65536 + 16); /* past 48 KiB: dynamic, each buffer 16-byte aligned */
  need_nvrtc();
  kn_cuda_module m;
  const char *src = build(f, ks, 3, &m); /* two dynamic kernels share the TU */
  assert_non_null(strstr(src, "__syncthreads();"));
  assert_non_null(strstr(src, "__shared__ __align__(16) float s0[1024]"));
  assert_non_null(strstr(src, "extern __shared__ __align__(16) unsigned char kn_smem[]"));
  assert_non_null(strstr(src, "if (threadIdx.x < 8u)"));
  /* ptxas counts the static arrays only */
  assert_int_equal(m.resources[0 * 2 + 0].shared_bytes, 4096 + 16);
  assert_int_equal(m.resources[0 * 2 + 1].sm, 90);
  assert_int_equal(m.resources[1 * 2 + 0].shared_bytes, 0);
}

/* Two nests: (y 2, x 64) fills a tile, then (x 8) reads it: the second one
 * is narrower in x and leaves y unbound, so it runs on threads x < 8, y 0. */
static void test_nest_guards(void **state) {
  fixture *f = *state;
  kn_expr_ctx *c = &f->c;
  kn_buffer *out = kn_buffer_new(c, "out", KN_DT_F32, KN_BUF_PARAM, 0);
  kn_buffer *tile = kn_buffer_new(c, "tile", KN_DT_F32, KN_BUF_SHARED, 128);
  kn_var *b = kn_var_new(c, "b"), *x = kn_var_new(c, "x"), *y = kn_var_new(c, "y"), *x2 = kn_var_new(c, "x2");
  kn_expr *at = kn_e_add(c, kn_e_mul(c, V(f, y), I(f, 64)), V(f, x));
  kn_stmt *fill = kn_s_seq2(c, kn_s_store(c, tile, at, kn_e_cast(c, KN_DT_F32, at)), kn_s_barrier(c));
  fill = kn_s_bind(c, y, I(f, 2), KN_FOR_THREAD, 1, kn_s_bind(c, x, I(f, 64), KN_FOR_THREAD, 0, fill));
  kn_stmt *use = kn_s_bind(c, x2, I(f, 8), KN_FOR_THREAD, 0,
                           kn_s_store(c, out, kn_e_add(c, kn_e_mul(c, V(f, b), I(f, 8)), V(f, x2)),
                                      kn_e_load(c, tile, kn_e_mul(c, V(f, x2), I(f, 16)))));
  kn_stmt *body = kn_s_bind(c, b, I(f, 3), KN_FOR_BLOCK, 0, kn_s_alloc(c, tile, kn_s_seq2(c, fill, use)));
  kn_buffer *ps[] = {out};
  kn_kernel *k = kernel(f, "k_nests", 1, ps, NULL, body);
  kn_cuda_launch l;
  assert_int_equal(kn_cuda_launch_info(k, &l, &f->d), 0);
  assert_int_equal(l.block[0], 64);
  assert_int_equal(l.block[1], 2);
  need_nvrtc();
  kn_cuda_module m;
  const char *src = build(f, &k, 1, &m);
  assert_non_null(strstr(src, "if (threadIdx.x < 8u && threadIdx.y == 0u) {"));
  assert_non_null(strstr(src, "__launch_bounds__(128) k_nests("));
}

/* ---- (3) MMA and cp.async, f16 and bf16 ---- */

static kn_kernel *mma(fixture *f, const char *name, kn_dtype ab) {
  kn_expr_ctx *c = &f->c;
  kn_buffer *out = kn_buffer_new(c, "d", KN_DT_F32, KN_BUF_PARAM, 0);
  kn_buffer *A = kn_buffer_new(c, "a", ab, KN_BUF_PARAM, 0), *B = kn_buffer_new(c, "b", ab, KN_BUF_PARAM, 0);
  kn_buffer *fa = kn_buffer_new(c, "fa", ab, KN_BUF_LOCAL, 8), *fb = kn_buffer_new(c, "fb", ab, KN_BUF_LOCAL, 4);
  kn_buffer *acc = kn_buffer_new(c, "acc", KN_DT_F32, KN_BUF_LOCAL, 4);
  kn_var *lane = kn_var_new(c, "lane"), *e = kn_var_new(c, "e"), *blk = kn_var_new(c, "blk");
  kn_expr *L = V(f, lane), *E = V(f, e);
  kn_stmt *fill[] = {
      kn_s_for(c, e, I(f, 0), I(f, 8), KN_FOR_SERIAL,
               kn_s_store(c, fa, E, kn_e_load(c, A, kn_e_add(c, kn_e_mul(c, L, I(f, 8)), E)))),
      kn_s_for(c, e, I(f, 0), I(f, 4), KN_FOR_SERIAL,
               kn_s_store(c, fb, E, kn_e_load(c, B, kn_e_add(c, kn_e_mul(c, L, I(f, 4)), E)))),
      kn_s_for(c, e, I(f, 0), I(f, 4), KN_FOR_SERIAL, kn_s_store(c, acc, E, F(f, 0))),
      kn_s_mma(c, ab, acc, I(f, 0), fa, I(f, 0), fb, I(f, 0)),
      kn_s_for(c, e, I(f, 0), I(f, 4), KN_FOR_SERIAL,
               kn_s_store(c, out, kn_e_add(c, kn_e_mul(c, L, I(f, 4)), E), kn_e_load(c, acc, E))),
  };
  kn_stmt *body = kn_s_alloc(c, fa, kn_s_alloc(c, fb, kn_s_alloc(c, acc, kn_s_seq(c, fill, 5))));
  body = kn_s_bind(c, blk, I(f, 1), KN_FOR_BLOCK, 0, kn_s_bind(c, lane, I(f, 32), KN_FOR_THREAD, 0, body));
  kn_buffer *ps[] = {out, A, B};
  return kernel(f, name, 3, ps, NULL, body);
}

/* Each thread copies 16 bytes (zero-filled past `valid` threads) and 4 more,
 * waits for its group, and after a barrier reads another thread's copy. */
static kn_kernel *cp_async(fixture *f, const char *name, kn_dtype dt) {
  kn_expr_ctx *c = &f->c;
  kn_buffer *out = kn_buffer_new(c, "out", dt, KN_BUF_PARAM, 0);
  kn_buffer *in = kn_buffer_new(c, "in", dt, KN_BUF_PARAM, 0);
  kn_buffer *s = kn_buffer_new(c, "stage", dt, KN_BUF_SHARED, 128 * 16);
  kn_var *b = kn_var_new(c, "b"), *t = kn_var_new(c, "t"), *N = kn_var_new(c, "N");
  kn_expr *T = V(f, t);
  kn_expr *src = kn_e_add(c, kn_e_mul(c, V(f, b), I(f, 2048)), kn_e_mul(c, T, I(f, 16)));
  kn_expr *dst = kn_e_mul(c, T, I(f, 16)); /* 32 bytes apart: 16-byte aligned */
  kn_stmt *steps[] = {
      kn_s_cp_async(c, s, dst, in, src, 8, kn_e_lt(c, T, I(f, 100))),
      kn_s_cp_async(c, s, kn_e_add(c, dst, I(f, 8)), in, kn_e_add(c, src, I(f, 8)), 2, NULL),
      kn_s_cp_commit(c),
      kn_s_cp_wait(c, 0),
      kn_s_barrier(c),
      kn_s_store(c, out, src, kn_e_load(c, s, kn_e_mod(c, kn_e_add(c, dst, I(f, 16)), I(f, 2048)))),
  };
  kn_stmt *body = kn_s_alloc(c, s, kn_s_bind(c, t, I(f, 128), KN_FOR_THREAD, 0, kn_s_seq(c, steps, 6)));
  body = kn_s_bind(c, b, V(f, N), KN_FOR_BLOCK, 0, body);
  kn_buffer *ps[] = {out, in};
  return kernel(f, name, 2, ps, N, body);
}

static void test_mma_cp_async(void **state) {
  fixture *f = *state;
  kn_kernel *ks[4] = {mma(f, "k_mma_f16", KN_DT_F16), mma(f, "k_mma_bf16", KN_DT_BF16),
                      cp_async(f, "k_cp_f16", KN_DT_F16), cp_async(f, "k_cp_bf16", KN_DT_BF16)};
  kn_cuda_launch l;
  assert_int_equal(kn_cuda_launch_info(ks[2], &l, &f->d), 0);
  assert_int_equal(l.grid[0]->kind, KN_E_VAR);
  need_nvrtc();
  kn_cuda_module m;
  const char *src = build(f, ks, 4, &m);
  assert_non_null(strstr(src, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"));
  assert_non_null(strstr(src, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
  assert_non_null(strstr(src, "cp.async.cg.shared.global [%0], [%1], 16, %2;"));
  assert_non_null(strstr(src, "cp.async.ca.shared.global [%0], [%1], 4;"));
  assert_non_null(strstr(src, "cp.async.wait_group 0;"));
  /* fragments are filled by copying bits, not through f32 */
  assert_non_null(strstr(src, "l0[v"));
  assert_null(strstr(src, "kn_cu_f2h(kn_cu_h2f("));
}

/* One warp: a 16 x 24 tile into shared memory, barrier, A by ldmatrix.x4,
 * B by x2.trans (or x1 twice), the MMA, the accumulators out. */
static kn_kernel *ldmatrix(fixture *f, const char *name, kn_dtype ab, bool x1) {
  kn_expr_ctx *c = &f->c;
  kn_buffer *out = kn_buffer_new(c, "d", KN_DT_F32, KN_BUF_PARAM, 0);
  kn_buffer *in = kn_buffer_new(c, "in", ab, KN_BUF_PARAM, 0);
  kn_buffer *s = kn_buffer_new(c, "tile", ab, KN_BUF_SHARED, 16 * 24);
  kn_buffer *fa = kn_buffer_new(c, "fa", ab, KN_BUF_LOCAL, 8), *fb = kn_buffer_new(c, "fb", ab, KN_BUF_LOCAL, 4);
  kn_buffer *acc = kn_buffer_new(c, "acc", KN_DT_F32, KN_BUF_LOCAL, 4);
  kn_var *lane = kn_var_new(c, "lane"), *e = kn_var_new(c, "e"), *blk = kn_var_new(c, "blk");
  kn_expr *L = V(f, lane), *E = V(f, e);
  kn_expr *i = kn_e_add(c, kn_e_mul(c, E, I(f, 32)), L);
  kn_expr *row = kn_e_mod(c, L, I(f, 16)), *mat_hi = kn_e_div(c, L, I(f, 16));
  kn_expr *a_at = kn_e_add(c, kn_e_mul(c, row, I(f, 24)), kn_e_mul(c, mat_hi, I(f, 8)));
  kn_stmt *b_load = kn_s_ldmatrix(c, fb, I(f, 0), s, kn_e_mul(c, row, I(f, 24)), 2, true);
  if (x1) /* the same B fragment, one matrix at a time */
    b_load = kn_s_seq2(c, kn_s_ldmatrix(c, fb, I(f, 0), s, kn_e_mul(c, kn_e_mod(c, L, I(f, 8)), I(f, 24)), 1, true),
                       kn_s_ldmatrix(c, fb, I(f, 2), s,
                                     kn_e_mul(c, kn_e_add(c, kn_e_mod(c, L, I(f, 8)), I(f, 8)), I(f, 24)), 1, true));
  kn_stmt *steps[] = {
      kn_s_for(c, e, I(f, 0), I(f, 12), KN_FOR_SERIAL, kn_s_store(c, s, i, kn_e_load(c, in, i))),
      kn_s_barrier(c),
      kn_s_ldmatrix(c, fa, I(f, 0), s, a_at, 4, false),
      b_load,
      kn_s_for(c, e, I(f, 0), I(f, 4), KN_FOR_SERIAL, kn_s_store(c, acc, E, F(f, 0))),
      kn_s_mma(c, ab, acc, I(f, 0), fa, I(f, 0), fb, I(f, 0)),
      kn_s_for(c, e, I(f, 0), I(f, 4), KN_FOR_SERIAL,
               kn_s_store(c, out, kn_e_add(c, kn_e_mul(c, L, I(f, 4)), E), kn_e_load(c, acc, E))),
  };
  kn_stmt *body = kn_s_alloc(c, fa, kn_s_alloc(c, fb, kn_s_alloc(c, acc, kn_s_seq(c, steps, 7))));
  body = kn_s_bind(c, blk, I(f, 1), KN_FOR_BLOCK, 0,
                   kn_s_alloc(c, s, kn_s_bind(c, lane, I(f, 32), KN_FOR_THREAD, 0, body)));
  kn_buffer *ps[] = {out, in};
  return kernel(f, name, 2, ps, NULL, body);
}

static void test_ldmatrix(void **state) {
  fixture *f = *state;
  kn_kernel *ks[3] = {ldmatrix(f, "k_ld_f16", KN_DT_F16, false), ldmatrix(f, "k_ld_bf16", KN_DT_BF16, false),
                      ldmatrix(f, "k_ld_x1", KN_DT_F16, true)};
  need_nvrtc();
  kn_cuda_module m;
  const char *src = build(f, ks, 3, &m);
  assert_non_null(strstr(src, "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"));
  assert_non_null(strstr(src, "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"));
  assert_non_null(strstr(src, "ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];"));
  assert_non_null(strstr(src, "__cvta_generic_to_shared(&s0["));
  /* register 1's high half is fragment element 3 */
  if (!strstr(src, "[0ll + 3] = (unsigned short)(kr[1] >> 16);")) fputs(src, stderr);
  assert_non_null(strstr(src, "[0ll + 3] = (unsigned short)(kr[1] >> 16);"));
}

/* ---- (4) NVRTC errors name the kernel and line ---- */

static void test_nvrtc_error(void **state) {
  fixture *f = *state;
  need_nvrtc();
  kn_kernel *ks[2] = {reverse(f, "k_first", 1024), reverse(f, "k_second", 1024)};
  const char *src;
  assert_int_equal(kn_cuda_emit((const kn_kernel *const *)ks, 2, &f->arena, &src, &f->d), 0);
  /* a bad statement as the first line of k_second's body */
  const char *sig = strstr(src, " k_second(");
  assert_non_null(sig);
  const char *eol = strchr(sig, '\n');
  int line = 2;
  for (const char *p = src; p < eol; p++) line += *p == '\n';
  char *bad = kn_arena_printf(&f->arena, "%.*s  undeclared_thing = 1;\n%s", (int)(eol + 1 - src), src, eol + 1);
  const char *names[] = {"k_first", "k_second"};
  kn_cuda_module m;
  assert_int_equal(kn_nvrtc_compile(bad, names, 2, &f->t, &f->arena, &m, &f->d), -1);
  char at[32];
  snprintf(at, sizeof at, "line %d", line);
  if (getenv("KN_TEST_DUMP")) kn_diag_print(&f->d, "test_cuda");
  assert_true(diag_has(&f->d, "kernel 'k_second'", at, "undeclared_thing", (char *)NULL));
  assert_false(diag_has(&f->d, "k_first", (char *)NULL));
  /* an error ptxas finds (in inline PTX) names the kernel too */
  kn_diag_free(&f->d);
  kn_diag_init(&f->d);
  bad = kn_arena_printf(&f->arena, "%.*s  asm volatile(\"cp.async.cgx.shared.global [%%0], [%%1], 16;\" :: \"r\"(0u), "
                        "\"l\"(p0) : \"memory\");\n%s", (int)(eol + 1 - src), src, eol + 1);
  assert_int_equal(kn_nvrtc_compile(bad, names, 2, &f->t, &f->arena, &m, &f->d), -1);
  if (getenv("KN_TEST_DUMP")) kn_diag_print(&f->d, "test_cuda");
  assert_true(diag_has(&f->d, "nvrtc (sm_80)", "kernel 'k_second'", ".cgx", (char *)NULL));
  assert_false(diag_has(&f->d, "k_first", (char *)NULL));
  /* a kernel name the source does not have */
  kn_diag_free(&f->d);
  kn_diag_init(&f->d);
  const char *wrong[] = {"k_first", "k_third"};
  assert_int_equal(kn_nvrtc_compile(src, wrong, 2, &f->t, &f->arena, &m, &f->d), -1);
  assert_true(diag_has(&f->d, "k_third", "no resources", (char *)NULL));
}

/* ---- golden text of a small kernel ---- */

static void test_golden(void **state) {
  fixture *f = *state;
  kn_expr_ctx *c = &f->c;
  kn_buffer *out = kn_buffer_new(c, "y", KN_DT_BF16, KN_BUF_PARAM, 0);
  kn_buffer *in = kn_buffer_new(c, "x", KN_DT_F32, KN_BUF_PARAM, 0);
  kn_var *b = kn_var_new(c, "b"), *t = kn_var_new(c, "t");
  kn_expr *i = kn_e_add(c, kn_e_mul(c, V(f, b), I(f, 64)), V(f, t));
  kn_expr *x = kn_e_load(c, in, i);
  kn_stmt *st = kn_s_store(c, out, kn_e_div(c, i, I(f, 3)), kn_e_cast(c, KN_DT_BF16, kn_e_mul(c, x, x)));
  st = kn_s_bind(c, b, I(f, 10), KN_FOR_BLOCK, 0, kn_s_bind(c, t, I(f, 64), KN_FOR_THREAD, 0, st));
  kn_buffer *ps[] = {out, in};
  kn_kernel *k = kernel(f, "k_golden", 2, ps, NULL, st);
  k->nodes = "Mul_1";
  const char *src;
  assert_int_equal(kn_cuda_emit((const kn_kernel *const *)&k, 1, &f->arena, &src, &f->d), 0);
  const char *expected =
      "/* kernel k_golden: Mul_1 */\n"
      "extern \"C\" __global__ void __launch_bounds__(64) k_golden(unsigned short *__restrict__ p0, "
      "const float *__restrict__ p1, long long batch) {\n"
      "  {\n"
      "    [[maybe_unused]] const int v2_b = (int)blockIdx.x;\n"
      "    {\n"
      "      [[maybe_unused]] const int v3_t = (int)threadIdx.x;\n"
      "      {\n"
      "        const int t0 = ((v2_b * 64ll) + v3_t);\n"
      "        const float t1 = p1[t0];\n"
      "        p0[((long long)((unsigned int)t0 / (unsigned int)3ll))] = kn_cu_f2bf(kn_cu_round_bf16((t1 * t1)));\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n\n";
  const char *got = strstr(src, "/* kernel k_golden");
  assert_non_null(got);
  assert_string_equal(got, expected);
}

/* ---- (5) launch-shape and emitter diagnostics ---- */

static void test_bad_kernels(void **state) {
  fixture *f = *state;
  kn_expr_ctx *c = &f->c;
  kn_buffer *out = kn_buffer_new(c, "out", KN_DT_F32, KN_BUF_PARAM, 0);
  kn_var *b = kn_var_new(c, "b"), *t = kn_var_new(c, "t"), *t2 = kn_var_new(c, "t2");
  kn_buffer *ps[] = {out};
  kn_cuda_launch l;
  const char *src;
  /* a store between the BLOCK and THREAD loops would run once per thread */
  kn_stmt *st = kn_s_store(c, out, V(f, b), F(f, 1));
  kn_kernel *k = kernel(f, "k_between", 1, ps, NULL, kn_s_bind(c, b, I(f, 4), KN_FOR_BLOCK, 0, st));
  assert_int_equal(kn_cuda_launch_info(k, &l, &f->d), -1);
  assert_true(diag_has(&f->d, "k_between", "between the BLOCK and the THREAD loops", (char *)NULL));
  /* too many threads */
  st = kn_s_bind(c, t, I(f, 64), KN_FOR_THREAD, 0, kn_s_bind(c, t2, I(f, 32), KN_FOR_THREAD, 1, st));
  k = kernel(f, "k_wide", 1, ps, NULL, kn_s_bind(c, b, I(f, 4), KN_FOR_BLOCK, 0, st));
  assert_int_equal(kn_cuda_launch_info(k, &l, &f->d), -1);
  assert_true(diag_has(&f->d, "k_wide", "1024 threads", (char *)NULL));
  /* a THREAD loop below a statement of its nest */
  kn_stmt *two[] = {kn_s_store(c, out, V(f, t), F(f, 1)),
                    kn_s_bind(c, t2, I(f, 4), KN_FOR_THREAD, 1, kn_s_store(c, out, V(f, t2), F(f, 2)))};
  st = kn_s_bind(c, t, I(f, 32), KN_FOR_THREAD, 0, kn_s_seq(c, two, 2));
  k = kernel(f, "k_loose", 1, ps, NULL, st);
  assert_int_equal(kn_cuda_launch_info(k, &l, &f->d), -1);
  assert_true(diag_has(&f->d, "k_loose", "not directly nested", (char *)NULL));
  /* a name that is no C identifier */
  st = kn_s_bind(c, t, I(f, 32), KN_FOR_THREAD, 0, kn_s_store(c, out, V(f, t), F(f, 1)));
  k = kernel(f, "conv.0/relu", 1, ps, NULL, st);
  assert_int_equal(kn_cuda_emit((const kn_kernel *const *)&k, 1, &f->arena, &src, &f->d), -1);
  assert_true(diag_has(&f->d, "conv.0/relu", "not a C identifier", (char *)NULL));
  /* a vector store: a diagnostic, not a crash */
  kn_expr *ramp = kn_e_ramp(c, kn_e_mul(c, V(f, t), I(f, 4)), I(f, 1), 4);
  k = kernel(f, "k_vector", 1, ps, NULL,
             kn_s_bind(c, t, I(f, 32), KN_FOR_THREAD, 0, kn_s_store(c, out, ramp, kn_e_broadcast(c, F(f, 2), 4))));
  assert_int_equal(kn_cuda_launch_info(k, &l, &f->d), 0);
  assert_int_equal(kn_cuda_emit((const kn_kernel *const *)&k, 1, &f->arena, &src, &f->d), -1);
  assert_true(diag_has(&f->d, "k_vector", "vector", (char *)NULL));
  assert_null(src);
}

/* ---- every dtype: casts between each pair, arithmetic, math in f64 ---- */

static const kn_dtype all_types[] = {KN_DT_F32, KN_DT_U8,  KN_DT_I8,   KN_DT_U16, KN_DT_I16, KN_DT_I32, KN_DT_I64,
                                     KN_DT_BOOL, KN_DT_F16, KN_DT_F64, KN_DT_U32, KN_DT_U64, KN_DT_BF16, KN_DT_I4,
                                     KN_DT_U2};
#define N_TYPES ((int)(sizeof all_types / sizeof all_types[0]))

/* The ops of dtype t on a and b (same dtype), folded into one value. */
static kn_expr *ops_of(kn_expr_ctx *c, kn_dtype t, kn_expr *a, kn_expr *b) {
  if (t == KN_DT_BOOL)
    return kn_e_bin(c, KN_E_OR, kn_e_bin(c, KN_E_AND, a, kn_e_not(c, b)), kn_e_bin(c, KN_E_EQ, kn_e_add(c, a, b), a));
  kn_expr *v = kn_e_add(c, kn_e_mul(c, a, b), kn_e_sub(c, a, b));
  v = kn_e_add(c, kn_e_div(c, v, b), kn_e_mod(c, v, b));
  v = kn_e_select(c, kn_e_bin(c, KN_E_LE, a, b), kn_e_min(c, v, a), kn_e_max(c, v, b));
  v = kn_e_add(c, v, kn_e_call1(c, KN_FN_ABS, a));
  if (kn_dtype_is_float(t)) {
    kn_fn fns[] = {KN_FN_EXP, KN_FN_LOG, KN_FN_SQRT, KN_FN_ERF,  KN_FN_TANH, KN_FN_SIGMOID, KN_FN_FLOOR,
                   KN_FN_CEIL, KN_FN_ROUND, KN_FN_SIN, KN_FN_COS};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) v = kn_e_add(c, v, kn_e_call1(c, fns[i], v));
    kn_expr *pw[2] = {v, b}, *fm[3] = {a, b, v};
    v = kn_e_add(c, kn_e_call(c, KN_FN_POW, pw, 2), kn_e_call(c, KN_FN_FMA, fm, 3));
  } else {
    v = kn_e_bin(c, KN_E_OR, kn_e_bin(c, KN_E_AND, v, b), a);
  }
  return v;
}

static void test_all_dtypes(void **state) {
  fixture *f = *state;
  kn_expr_ctx *c = &f->c;
  kn_buffer *bufs[N_TYPES];
  for (int i = 0; i < N_TYPES; i++) bufs[i] = kn_buffer_new(c, kn_dtype_name(all_types[i]), all_types[i], KN_BUF_PARAM, 0);
  kn_var *t = kn_var_new(c, "t");
  kn_stmt *stores[N_TYPES * (N_TYPES + 1)];
  int n = 0;
  for (int i = 0; i < N_TYPES; i++) {
    kn_expr *a = kn_e_load(c, bufs[i], V(f, t)), *b = kn_e_load(c, bufs[i], kn_e_add(c, V(f, t), I(f, 32)));
    stores[n++] = kn_s_store(c, bufs[i], kn_e_add(c, V(f, t), I(f, 64)), ops_of(c, all_types[i], a, b));
    for (int j = 0; j < N_TYPES; j++) {
      kn_expr *at = kn_e_add(c, V(f, t), I(f, 96 + 32 * i));
      stores[n++] = kn_s_store(c, bufs[j], at, kn_e_cast(c, all_types[j], a));
    }
  }
  kn_stmt *body = kn_s_bind(c, t, I(f, 32), KN_FOR_THREAD, 0, kn_s_seq(c, stores, n));
  kn_kernel *k = kernel(f, "k_dtypes", N_TYPES, bufs, NULL, body);
  need_nvrtc();
  kn_cuda_module m;
  const char *src = build(f, &k, 1, &m);
  assert_non_null(strstr(src, "kn_cu_d2h("));
  assert_non_null(strstr(src, "kn_cu_f2u("));
  assert_non_null(strstr(src, "erf("));
  if (getenv("KN_TEST_DUMP")) fputs(src, stdout);
}

/* ---- float8 / float4e2m1 / float8e8m0: one byte per element ---- */

static const kn_dtype f8_types[] = {KN_DT_F8E4M3FN, KN_DT_F8E4M3FNUZ, KN_DT_F8E5M2,
                                    KN_DT_F8E5M2FNUZ, KN_DT_F8E8M0,   KN_DT_F4E2M1};
#define N_F8 ((int)(sizeof f8_types / sizeof f8_types[0]))

/* Per format: a load, arithmetic and math in f32 rounded back, a literal,
 * casts to and from f32 / f16 / bf16 / f64 / int32 / uint8 / bool and the
 * next format, through a LOCAL and a SHARED buffer of the format. */
static kn_kernel *f8_kernel(fixture *f) {
  kn_expr_ctx *c = &f->c;
  kn_buffer *bufs[N_F8 + 6];
  kn_dtype others[] = {KN_DT_F32, KN_DT_F16, KN_DT_BF16, KN_DT_F64, KN_DT_I32, KN_DT_U8};
  for (int i = 0; i < N_F8; i++) bufs[i] = kn_buffer_new(c, kn_dtype_name(f8_types[i]), f8_types[i], KN_BUF_PARAM, 0);
  for (int j = 0; j < 6; j++) bufs[N_F8 + j] = kn_buffer_new(c, kn_dtype_name(others[j]), others[j], KN_BUF_PARAM, 0);
  kn_var *t = kn_var_new(c, "t");
  kn_stmt *body = NULL;
  kn_buffer *shared[N_F8];
  for (int i = N_F8 - 1; i >= 0; i--) {
    kn_dtype dt = f8_types[i], next = f8_types[(i + 1) % N_F8];
    kn_buffer *loc = kn_buffer_new(c, "loc", dt, KN_BUF_LOCAL, 2);
    kn_buffer *sh = shared[i] = kn_buffer_new(c, "sh", dt, KN_BUF_SHARED, 32);
    kn_expr *a = kn_e_load(c, bufs[i], V(f, t)), *b = kn_e_load(c, bufs[i], kn_e_add(c, V(f, t), I(f, 32)));
    kn_expr *v = kn_e_add(c, kn_e_mul(c, a, b), kn_e_float(&f->c, dt, 1.5));
    v = kn_e_max(c, kn_e_call1(c, KN_FN_EXP, v), kn_e_div(c, a, b));
    kn_stmt *steps[24];
    int n = 0;
    steps[n++] = kn_s_store(c, loc, I(f, 0), v);
    steps[n++] = kn_s_store(c, sh, V(f, t), kn_e_load(c, loc, I(f, 0)));
    steps[n++] = kn_s_barrier(c);
    kn_expr *got = kn_e_load(c, sh, kn_e_mod(c, kn_e_add(c, V(f, t), I(f, 1)), I(f, 32)));
    steps[n++] = kn_s_store(c, bufs[i], kn_e_add(c, V(f, t), I(f, 64)), got);
    steps[n++] = kn_s_store(c, bufs[(i + 1) % N_F8], kn_e_add(c, V(f, t), I(f, 96)), kn_e_cast(c, next, a));
    for (int j = 0; j < 6; j++) {
      kn_expr *at = kn_e_add(c, V(f, t), I(f, 128 + 32 * i));
      steps[n++] = kn_s_store(c, bufs[N_F8 + j], at, kn_e_cast(c, others[j], a));
      kn_expr *from = kn_e_load(c, bufs[N_F8 + j], V(f, t));
      steps[n++] = kn_s_store(c, bufs[i], kn_e_add(c, at, I(f, 512)), kn_e_cast(c, dt, from));
    }
    steps[n++] = kn_s_store(c, bufs[N_F8 + 4], kn_e_add(c, V(f, t), I(f, 1024 + 32 * i)),
                            kn_e_cast(c, KN_DT_I32, kn_e_cast(c, KN_DT_BOOL, a)));
    kn_stmt *s = kn_s_alloc(c, loc, kn_s_seq(c, steps, n));
    body = body ? kn_s_seq2(c, s, body) : s;
  }
  body = kn_s_bind(c, t, I(f, 32), KN_FOR_THREAD, 0, body);
  for (int i = 0; i < N_F8; i++) body = kn_s_alloc(c, shared[i], body);
  return kernel(f, "k_f8", N_F8 + 6, bufs, NULL, body);
}

static void test_f8(void **state) {
  fixture *f = *state;
  kn_kernel *k = f8_kernel(f);
  const char *src;
  int rc = kn_cuda_emit((const kn_kernel *const *)&k, 1, &f->arena, &src, &f->d);
  if (rc) kn_diag_print(&f->d, "test_cuda");
  assert_int_equal(rc, 0);
  /* one byte per element; the format's constants at each call */
  assert_non_null(strstr(src, "unsigned char *__restrict__ p0"));
  assert_non_null(strstr(src, "unsigned char l0[2];"));
  assert_non_null(strstr(src, "__shared__ __align__(16) unsigned char s0[32];"));
  assert_non_null(strstr(src, "kn_cu_f2f8(")); /* E4M3FN: 3 mantissa bits, bias 7, max code 0x7e */
  assert_non_null(strstr(src, ", 3, 7, 0, 0, 126u)"));
  assert_non_null(strstr(src, ", 4, 3, 8, 1, 0)")); /* E4M3FNUZ decoded */
  assert_non_null(strstr(src, ", 5, 2, 15, 0, 1)")); /* E5M2 decoded */
  assert_non_null(strstr(src, ", 2, 16, 1, 0, 127u)")); /* E5M2FNUZ encoded */
  assert_non_null(strstr(src, "kn_cu_f2e8m0("));
  assert_non_null(strstr(src, "kn_cu_e8m02f("));
  assert_non_null(strstr(src, "kn_cu_f2e2m1("));
  assert_non_null(strstr(src, "kn_cu_e2m12f("));
  /* the conversions' text, once, after the prelude */
  const char *helpers = strstr(src, "KN_CU unsigned char kn_cu_f2f8(");
  assert_non_null(helpers);
  assert_null(strstr(helpers + 1, "KN_CU unsigned char kn_cu_f2f8("));
  assert_true(strstr(src, "kn_cu_pack2") < helpers && helpers < strstr(src, "k_f8("));
  need_nvrtc();
  kn_cuda_module m;
  if (getenv("KN_TEST_DUMP")) fputs(src, stdout);
  build(f, &k, 1, &m);
}

/* A module without float8 has none of its conversions. */
static void test_f8_per_need(void **state) {
  fixture *f = *state;
  kn_kernel *k = reverse(f, "k_no_f8", 1024);
  const char *src;
  assert_int_equal(kn_cuda_emit((const kn_kernel *const *)&k, 1, &f->arena, &src, &f->d), 0);
  assert_null(strstr(src, "kn_cu_f82f"));
  assert_null(strstr(src, "kn_cu_as_uint"));
}

/* ---- (6) the PTX image ---- */

static void test_ptx_image(void **state) {
  fixture *f = *state;
  need_nvrtc();
  kn_kernel *k = reverse(f, "k_ptx", 1024);
  kn_cuda_module m;
  build(f, &k, 1, &m);
  assert_false(m.images[0].ptx);
  assert_int_equal(m.images[0].sm, 80);
  assert_int_equal(m.images[1].sm, 90);
  assert_true(m.images[1].size > 0);
  const kn_cuda_image *ptx = &m.images[2];
  assert_true(ptx->ptx);
  assert_int_equal(ptx->sm, 90);
  assert_int_equal(strlen((const char *)ptx->data), ptx->size); /* no NUL counted */
  assert_true(ptx->data[ptx->size - 1] != 0);
  assert_non_null(strstr((const char *)ptx->data, ".target sm_90"));
  assert_non_null(strstr((const char *)ptx->data, ".entry k_ptx"));
  /* a cubin is an ELF file */
  assert_memory_equal(m.images[0].data, "\177ELF", 4);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_elementwise, setup, teardown),
      cmocka_unit_test_setup_teardown(test_shared, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mma_cp_async, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ldmatrix, setup, teardown),
      cmocka_unit_test_setup_teardown(test_nvrtc_error, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_kernels, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ptx_image, setup, teardown),
      cmocka_unit_test_setup_teardown(test_all_dtypes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_golden, setup, teardown),
      cmocka_unit_test_setup_teardown(test_nest_guards, setup, teardown),
      cmocka_unit_test_setup_teardown(test_f8, setup, teardown),
      cmocka_unit_test_setup_teardown(test_f8_per_need, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
