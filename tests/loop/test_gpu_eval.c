/* test_gpu_eval.c — the GPU interpreter (ir/loop/gpu_eval.c) on kernels built
 * by hand: a shared-memory reduction and its missing barrier, warp MMAs
 * against a naive matmul, cp.async groups and their poison, a tiled GEMM
 * with all three, an elementwise SIMT kernel against the CPU interpreter,
 * and what must fail: bounds, uninitialised reads, races. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "ir/loop/loop_eval.h"
#include "ir/loop/mma.h"
#include "tests/loop/gpu_test_util.h"

static kn_stmt *seq(gpu_fx *f, kn_stmt **s, int n) { return kn_s_seq(&f->c, s, n); }

/* ---- 1. block reduction through shared memory ---- */

enum { RED_THREADS = 128 };

/* out[b] = sum of x[b * 128 .. + 128) by a tree in shared memory, over N
 * blocks; barrier number `skip` (0: after the load, then one per level) is
 * left out, or none when skip < 0. */
static kn_kernel reduction_kernel(gpu_fx *f, int skip, kn_buffer **x_out) {
  kn_expr_ctx *c = &f->c;
  kn_buffer *x = kn_buffer_new(c, "x", KN_DT_F32, KN_BUF_PARAM, 0);
  kn_buffer *out = kn_buffer_new(c, "out", KN_DT_F32, KN_BUF_PARAM, 0);
  kn_buffer *s = kn_buffer_new(c, "s", KN_DT_F32, KN_BUF_SHARED, RED_THREADS);
  kn_var *n = kn_var_new(c, "N"), *b = kn_var_new(c, "b"), *t = kn_var_new(c, "t");
  kn_stmt *body[32];
  int nb = 0, barrier = 0;
  body[nb++] =
      kn_s_store(c, s, V(f, t), kn_e_load(c, x, kn_e_add(c, kn_e_mul(c, V(f, b), I(f, RED_THREADS)), V(f, t))));
  if (skip != barrier++) body[nb++] = kn_s_barrier(c);
  for (int stride = RED_THREADS / 2; stride >= 1; stride /= 2) {
    kn_expr *sum = kn_e_add(c, kn_e_load(c, s, V(f, t)), kn_e_load(c, s, kn_e_add(c, V(f, t), I(f, stride))));
    body[nb++] = kn_s_if(c, kn_e_bin(c, KN_E_LT, V(f, t), I(f, stride)), kn_s_store(c, s, V(f, t), sum), NULL);
    if (skip != barrier++) body[nb++] = kn_s_barrier(c);
  }
  body[nb++] =
      kn_s_if(c, kn_e_bin(c, KN_E_EQ, V(f, t), I(f, 0)), kn_s_store(c, out, V(f, b), kn_e_load(c, s, I(f, 0))), NULL);
  kn_stmt *threads = kn_s_bind(c, t, I(f, RED_THREADS), KN_FOR_THREAD, 0, seq(f, body, nb));
  kn_stmt *blocks = kn_s_bind(c, b, V(f, n), KN_FOR_BLOCK, 0, kn_s_alloc(c, s, threads));
  kn_buffer *params[] = {x, out};
  kn_kernel k = gpu_kernel(f, "reduce", params, 2, blocks);
  k.batch = n;
  if (x_out) *x_out = x;
  return k;
}

static void test_reduction(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  enum { BLOCKS = 3 };
  float x[BLOCKS * RED_THREADS], out[BLOCKS] = {0};
  for (int i = 0; i < BLOCKS * RED_THREADS; i++) x[i] = (float)((i * 7) % 13 - 6); /* sums stay exact */
  kn_kernel k = reduction_kernel(&f, -1, NULL);
  void *args[] = {x, out};
  assert_int_equal(kn_gpu_eval(&k, args, BLOCKS, &f.d), 0);
  for (int b = 0; b < BLOCKS; b++) {
    float want = 0;
    for (int i = 0; i < RED_THREADS; i++) want += x[b * RED_THREADS + i];
    assert_float_equal(out[b], want, 0);
  }
  gpu_fx_free(&f);
}

/* Leaving out any one barrier lets a thread read what another wrote. */
static void test_reduction_missing_barrier(void **state) {
  (void)state;
  float x[RED_THREADS], out[1];
  for (int i = 0; i < RED_THREADS; i++) x[i] = 1;
  for (int skip = 0; skip < 7; skip++) {
    gpu_fx f;
    gpu_fx_init(&f);
    kn_kernel k = reduction_kernel(&f, skip, NULL);
    void *args[] = {x, out};
    assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), -1);
    expect_diag(&f.d, "race", "shared 's'", "since the last barrier", "kernel 'reduce'");
    gpu_fx_free(&f);
  }
  /* the last barrier is not needed: thread 0 reads only what it wrote */
  gpu_fx f;
  gpu_fx_init(&f);
  kn_kernel k = reduction_kernel(&f, 7, NULL);
  void *args[] = {x, out};
  assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), 0);
  assert_float_equal(out[0], RED_THREADS, 0);
  gpu_fx_free(&f);
}

/* ---- 2. warp MMA ---- */

/* Each lane's fragment element i sits at (lane / 4 + dr, 2 * (lane % 4) + dc)
 * or the transposed form, with (dr, dc) the coordinates of lane 0: the
 * fragment loads below are built from mma.h's functions that way. */
static void test_mma_coords_split(void **state) {
  (void)state;
  for (int lane = 0; lane < 32; lane++) {
    for (int i = 0; i < KN_MMA_A_REGS; i++) {
      int m, k, m0, k0;
      kn_mma_a_coord(lane, i, &m, &k);
      kn_mma_a_coord(0, i, &m0, &k0);
      assert_int_equal(m, lane / 4 + m0);
      assert_int_equal(k, 2 * (lane % 4) + k0);
    }
    for (int i = 0; i < KN_MMA_B_REGS; i++) {
      int k, n, k0, n0;
      kn_mma_b_coord(lane, i, &k, &n);
      kn_mma_b_coord(0, i, &k0, &n0);
      assert_int_equal(k, 2 * (lane % 4) + k0);
      assert_int_equal(n, lane / 4 + n0);
    }
    for (int i = 0; i < KN_MMA_C_REGS; i++) {
      int m, n, m0, n0;
      kn_mma_c_coord(lane, i, &m, &n);
      kn_mma_c_coord(0, i, &m0, &n0);
      assert_int_equal(m, lane / 4 + m0);
      assert_int_equal(n, 2 * (lane % 4) + n0);
    }
  }
}

/* row * ld + col, where row = r_lane + dr and col = c_lane + dc. */
static kn_expr *at(gpu_fx *f, kn_expr *r_lane, int64_t dr, kn_expr *row0, kn_expr *c_lane, int64_t dc, kn_expr *col0,
                   int64_t ld) {
  kn_expr_ctx *c = &f->c;
  kn_expr *row = kn_e_add(c, kn_e_add(c, r_lane, I(f, dr)), row0);
  kn_expr *col = kn_e_add(c, kn_e_add(c, c_lane, I(f, dc)), col0);
  return kn_e_add(c, kn_e_mul(c, row, I(f, ld)), col);
}

typedef struct mma_shape {
  int warps, ksteps; /* C is 16 x (8 * warps), K = 16 * ksteps */
  kn_dtype ab;
  bool no_init; /* leave the accumulators as garbage */
} mma_shape;

/* C = A x B: warp w computes columns [8w, 8w + 8) of C, looping over K in
 * steps of 16; fragments go through LOCAL buffers as the schedules will. */
static kn_kernel mma_kernel(gpu_fx *f, mma_shape sh) {
  kn_expr_ctx *c = &f->c;
  int64_t N = 8 * sh.warps, K = 16 * sh.ksteps;
  kn_buffer *A = kn_buffer_new(c, "A", sh.ab, KN_BUF_PARAM, 16 * K),
            *B = kn_buffer_new(c, "B", sh.ab, KN_BUF_PARAM, K * N);
  kn_buffer *C = kn_buffer_new(c, "C", KN_DT_F32, KN_BUF_PARAM, 16 * N);
  kn_buffer *af = kn_buffer_new(c, "af", sh.ab, KN_BUF_LOCAL, 8), *bf = kn_buffer_new(c, "bf", sh.ab, KN_BUF_LOCAL, 4);
  kn_buffer *acc = kn_buffer_new(c, "acc", KN_DT_F32, KN_BUF_LOCAL, 4);
  kn_var *t = kn_var_new(c, "t"), *lane = kn_var_new(c, "lane"), *warp = kn_var_new(c, "warp"),
         *kk = kn_var_new(c, "kk");
  kn_expr *g = kn_e_div(c, V(f, lane), I(f, 4)), *q2 = kn_e_mul(c, kn_e_mod(c, V(f, lane), I(f, 4)), I(f, 2));
  kn_expr *k0 = kn_e_mul(c, V(f, kk), I(f, 16)), *n0 = kn_e_mul(c, V(f, warp), I(f, 8));
  kn_stmt *loads[12], *init[4], *stores[4];
  for (int i = 0; i < 8; i++) {
    int m, k;
    kn_mma_a_coord(0, i, &m, &k);
    loads[i] = kn_s_store(c, af, I(f, i), kn_e_load(c, A, at(f, g, m, I(f, 0), q2, k, k0, K)));
  }
  for (int i = 0; i < 4; i++) {
    int k, n, m;
    kn_mma_b_coord(0, i, &k, &n);
    loads[8 + i] = kn_s_store(c, bf, I(f, i), kn_e_load(c, B, at(f, q2, k, k0, g, n, n0, N)));
    kn_mma_c_coord(0, i, &m, &n);
    init[i] = kn_s_store(c, acc, I(f, i), kn_e_float(c, KN_DT_F32, 0));
    stores[i] = kn_s_store(c, C, at(f, g, m, I(f, 0), q2, n, n0, N), kn_e_load(c, acc, I(f, i)));
  }
  kn_stmt *step = kn_s_seq2(c, seq(f, loads, 12), kn_s_mma(c, sh.ab, acc, I(f, 0), af, I(f, 0), bf, I(f, 0)));
  kn_stmt *parts[] = {sh.no_init ? NULL : seq(f, init, 4),
                      kn_s_for(c, kk, I(f, 0), I(f, sh.ksteps), KN_FOR_SERIAL, step), seq(f, stores, 4)};
  kn_stmt *body = kn_s_alloc(c, af, kn_s_alloc(c, bf, kn_s_alloc(c, acc, seq(f, parts, 3))));
  body = kn_s_let(c, lane, kn_e_mod(c, V(f, t), I(f, 32)), kn_s_let(c, warp, kn_e_div(c, V(f, t), I(f, 32)), body));
  kn_buffer *params[] = {A, B, C};
  return gpu_kernel(f, "mma", params, 3, kn_s_bind(c, t, I(f, 32 * sh.warps), KN_FOR_THREAD, 0, body));
}

static uint16_t to_half(kn_dtype t, float v) { return t == KN_DT_F16 ? kn_f32_to_f16(v) : kn_f32_to_bf16(v); }
static float from_half(kn_dtype t, uint16_t v) { return t == KN_DT_F16 ? kn_f16_to_f32(v) : kn_bf16_to_f32(v); }

static void check_mma(mma_shape sh) {
  gpu_fx f;
  gpu_fx_init(&f);
  int N = 8 * sh.warps, K = 16 * sh.ksteps;
  uint16_t *A = calloc((size_t)(16 * K), 2), *B = calloc((size_t)(K * N), 2);
  float *C = calloc((size_t)(16 * N), 4);
  for (int i = 0; i < 16 * K; i++) A[i] = to_half(sh.ab, (float)((i * 37) % 19 - 9) / 8.0f + 0.001f * (float)(i % 7));
  for (int i = 0; i < K * N; i++) B[i] = to_half(sh.ab, (float)((i * 11) % 23 - 11) / 4.0f - 0.003f * (float)(i % 5));
  kn_kernel k = mma_kernel(&f, sh);
  void *args[] = {A, B, C};
  if (kn_gpu_eval(&k, args, 1, &f.d)) kn_diag_print(&f.d, "mma");
  assert_int_equal(f.d.count, 0);
  for (int m = 0; m < 16; m++)
    for (int n = 0; n < N; n++) {
      float want = 0;
      for (int kk = 0; kk < K; kk++) want += from_half(sh.ab, A[m * K + kk]) * from_half(sh.ab, B[kk * N + n]);
      assert_float_equal(C[m * N + n], want, 1e-5 * (1 + fabs(want)));
    }
  free(A);
  free(B);
  free(C);
  gpu_fx_free(&f);
}

static void test_mma_one_warp(void **state) {
  (void)state;
  check_mma((mma_shape){.warps = 1, .ksteps = 1, .ab = KN_DT_F16});
  check_mma((mma_shape){.warps = 1, .ksteps = 1, .ab = KN_DT_BF16});
}

static void test_mma_two_warps(void **state) {
  (void)state;
  check_mma((mma_shape){.warps = 2, .ksteps = 1, .ab = KN_DT_F16});
}

static void test_mma_k32(void **state) {
  (void)state;
  check_mma((mma_shape){.warps = 1, .ksteps = 2, .ab = KN_DT_F16});
  check_mma((mma_shape){.warps = 2, .ksteps = 2, .ab = KN_DT_BF16});
}

/* Registers start as garbage: an MMA on accumulators nobody zeroed fails. */
static void test_mma_uninitialised_acc(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  uint16_t A[16 * 16] = {0}, B[16 * 8] = {0};
  float C[16 * 8];
  kn_kernel k = mma_kernel(&f, (mma_shape){.warps = 1, .ksteps = 1, .ab = KN_DT_F16, .no_init = true});
  void *args[] = {A, B, C};
  assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), -1);
  expect_diag(&f.d, "read of uninitialised local 'acc'[0] by thread 0", "at: mma_m16n8k16");
  gpu_fx_free(&f);
}

/* ---- 3. cp.async ---- */

enum { CP_THREADS = 16, CP_ELEMS = 4 * CP_THREADS };

typedef struct cp_kernel {
  kn_kernel k;
  kn_buffer *g, *g2, *out, *sh, *sh2;
  kn_var *t;
} cp_kernel;

/* Thread t copies g[4t .. 4t + 4) to sh (16 bytes) and g2 likewise to sh2,
 * then runs `tail`, built by the caller from the fields. */
static void cp_buffers(gpu_fx *f, cp_kernel *ck) {
  kn_expr_ctx *c = &f->c;
  ck->g = kn_buffer_new(c, "g", KN_DT_F32, KN_BUF_PARAM, CP_ELEMS);
  ck->g2 = kn_buffer_new(c, "g2", KN_DT_F32, KN_BUF_PARAM, CP_ELEMS);
  ck->out = kn_buffer_new(c, "out", KN_DT_F32, KN_BUF_PARAM, CP_ELEMS);
  ck->sh = kn_buffer_new(c, "sh", KN_DT_F32, KN_BUF_SHARED, CP_ELEMS);
  ck->sh2 = kn_buffer_new(c, "sh2", KN_DT_F32, KN_BUF_SHARED, CP_ELEMS);
  ck->t = kn_var_new(c, "t");
}

/* dst[4t .. + 4) <- src[4t + src_shift .. + 4) if pred */
static kn_stmt *cp_copy_from(gpu_fx *f, cp_kernel *ck, kn_buffer *dst, kn_buffer *src, int64_t src_shift,
                             kn_expr *pred) {
  kn_expr *at = kn_e_mul(&f->c, V(f, ck->t), I(f, 4));
  return kn_s_cp_async(&f->c, dst, at, src, kn_e_add(&f->c, at, I(f, src_shift)), 4, pred);
}

static kn_stmt *cp_copy(gpu_fx *f, cp_kernel *ck, kn_buffer *dst, kn_buffer *src, kn_expr *pred) {
  return cp_copy_from(f, ck, dst, src, 0, pred);
}

/* out[4t + j] = from[(4t + j + shift) % 64] for j in [0, 4): shift 4 reads
 * the next thread's elements. */
static kn_stmt *cp_read(gpu_fx *f, cp_kernel *ck, kn_buffer *from, int shift) {
  kn_expr_ctx *c = &f->c;
  kn_var *j = kn_var_new(c, "j");
  kn_expr *i = kn_e_add(c, kn_e_mul(c, V(f, ck->t), I(f, 4)), V(f, j));
  kn_expr *src = kn_e_mod(c, kn_e_add(c, i, I(f, shift)), I(f, CP_ELEMS));
  return kn_s_for(c, j, I(f, 0), I(f, 4), KN_FOR_SERIAL, kn_s_store(c, ck->out, i, kn_e_load(c, from, src)));
}

static void cp_finish(gpu_fx *f, cp_kernel *ck, kn_stmt **body, int n) {
  kn_expr_ctx *c = &f->c;
  kn_stmt *threads = kn_s_bind(c, ck->t, I(f, CP_THREADS), KN_FOR_THREAD, 0, seq(f, body, n));
  kn_buffer *params[] = {ck->g, ck->g2, ck->out};
  ck->k = gpu_kernel(f, "cp", params, 3, kn_s_alloc(c, ck->sh, kn_s_alloc(c, ck->sh2, threads)));
}

static float cp_g[CP_ELEMS], cp_g2[CP_ELEMS], cp_out[CP_ELEMS];

static int cp_run(gpu_fx *f, cp_kernel *ck) {
  for (int i = 0; i < CP_ELEMS; i++) {
    cp_g[i] = (float)i + 0.5f;
    cp_g2[i] = -(float)i;
    cp_out[i] = -1;
  }
  void *args[] = {cp_g, cp_g2, cp_out};
  return kn_gpu_eval(&ck->k, args, 1, &f->d);
}

static void test_cp_async(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  cp_kernel ck;
  cp_buffers(&f, &ck);
  kn_stmt *body[] = {cp_copy(&f, &ck, ck.sh, ck.g, NULL), kn_s_cp_commit(&f.c), kn_s_cp_wait(&f.c, 0),
                     kn_s_barrier(&f.c), cp_read(&f, &ck, ck.sh, 4)};
  cp_finish(&f, &ck, body, 5);
  assert_int_equal(cp_run(&f, &ck), 0);
  for (int i = 0; i < CP_ELEMS; i++) assert_float_equal(cp_out[i], cp_g[(i + 4) % CP_ELEMS], 0);
  gpu_fx_free(&f);
}

/* Reading before the wait reads poison, even after a barrier. */
static void test_cp_async_no_wait(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  cp_kernel ck;
  cp_buffers(&f, &ck);
  kn_stmt *body[] = {cp_copy(&f, &ck, ck.sh, ck.g, NULL), kn_s_cp_commit(&f.c), kn_s_barrier(&f.c),
                     cp_read(&f, &ck, ck.sh, 0)};
  cp_finish(&f, &ck, body, 4);
  assert_int_equal(cp_run(&f, &ck), -1);
  expect_diag(&f.d, "read before cp.async wait", "'sh'");
  gpu_fx_free(&f);
}

/* A wait without a barrier makes the thread's own copies readable to it,
 * not the other threads'. */
static void test_cp_async_wait_no_barrier(void **state) {
  (void)state;
  for (int shift = 0; shift <= 4; shift += 4) {
    gpu_fx f;
    gpu_fx_init(&f);
    cp_kernel ck;
    cp_buffers(&f, &ck);
    kn_stmt *body[] = {cp_copy(&f, &ck, ck.sh, ck.g, NULL), kn_s_cp_commit(&f.c), kn_s_cp_wait(&f.c, 0),
                       cp_read(&f, &ck, ck.sh, shift)};
    cp_finish(&f, &ck, body, 4);
    if (shift == 0) {
      assert_int_equal(cp_run(&f, &ck), 0);
      assert_float_equal(cp_out[5], cp_g[5], 0);
    } else {
      assert_int_equal(cp_run(&f, &ck), -1);
      expect_diag(&f.d, "race", "shared 'sh'", "cp.async");
    }
    gpu_fx_free(&f);
  }
}

/* pred false writes zeros (after the wait, like any copy) and reads no
 * source: threads 8.. would read past the end of g. */
static void test_cp_async_pred(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  cp_kernel ck;
  cp_buffers(&f, &ck);
  kn_expr *pred = kn_e_bin(&f.c, KN_E_LT, V(&f, ck.t), I(&f, CP_THREADS / 2));
  kn_stmt *body[] = {cp_copy_from(&f, &ck, ck.sh, ck.g, CP_ELEMS / 2, pred), kn_s_cp_commit(&f.c),
                     kn_s_cp_wait(&f.c, 0), kn_s_barrier(&f.c), cp_read(&f, &ck, ck.sh, 0)};
  cp_finish(&f, &ck, body, 5);
  assert_int_equal(cp_run(&f, &ck), 0);
  for (int i = 0; i < CP_ELEMS; i++) assert_float_equal(cp_out[i], (i < CP_ELEMS / 2 ? cp_g[i + CP_ELEMS / 2] : 0), 0);
  gpu_fx_free(&f);

  /* with the predicate true everywhere the same copy is out of bounds */
  gpu_fx_init(&f);
  cp_buffers(&f, &ck);
  kn_stmt *all[] = {cp_copy_from(&f, &ck, ck.sh, ck.g, CP_ELEMS / 2, NULL), kn_s_cp_commit(&f.c)};
  cp_finish(&f, &ck, all, 2);
  assert_int_equal(cp_run(&f, &ck), -1);
  expect_diag(&f.d, "index 64 outside param 'g' of 64 elements (thread 8)", "at: cp_async");
  gpu_fx_free(&f);
}

/* Two groups in flight; wait 1 completes the older only. */
static void test_cp_async_two_groups(void **state) {
  (void)state;
  for (int newer = 0; newer <= 1; newer++) {
    gpu_fx f;
    gpu_fx_init(&f);
    cp_kernel ck;
    cp_buffers(&f, &ck);
    kn_stmt *body[] = {cp_copy(&f, &ck, ck.sh, ck.g, NULL),
                       kn_s_cp_commit(&f.c),
                       cp_copy(&f, &ck, ck.sh2, ck.g2, NULL),
                       kn_s_cp_commit(&f.c),
                       kn_s_cp_wait(&f.c, 1),
                       kn_s_barrier(&f.c),
                       cp_read(&f, &ck, newer ? ck.sh2 : ck.sh, 4)};
    cp_finish(&f, &ck, body, 7);
    if (!newer) {
      assert_int_equal(cp_run(&f, &ck), 0);
      for (int i = 0; i < CP_ELEMS; i++) assert_float_equal(cp_out[i], cp_g[(i + 4) % CP_ELEMS], 0);
    } else {
      assert_int_equal(cp_run(&f, &ck), -1);
      expect_diag(&f.d, "read before cp.async wait", "'sh2'");
    }
    gpu_fx_free(&f);
  }
}

/* ---- cp.async, shared tiles and MMA together ---- */

/* C (16 x 16, f32) = A (16 x 32) x B (32 x 16) in one block of two warps:
 * per K step of 16, the 64 threads cp.async a 16 x 16 tile of A and of B
 * into shared memory (4 halves each), wait, barrier, load their fragments
 * from the tiles (warp w takes B's columns [8w, 8w + 8)), MMA, and barrier
 * again before the next step overwrites the tiles, unless `last_barrier`
 * is false. */
static kn_kernel tiled_gemm(gpu_fx *f, bool last_barrier) {
  kn_expr_ctx *c = &f->c;
  kn_buffer *A = kn_buffer_new(c, "A", KN_DT_F16, KN_BUF_PARAM, 16 * 32);
  kn_buffer *B = kn_buffer_new(c, "B", KN_DT_F16, KN_BUF_PARAM, 32 * 16);
  kn_buffer *C = kn_buffer_new(c, "C", KN_DT_F32, KN_BUF_PARAM, 16 * 16);
  kn_buffer *As = kn_buffer_new(c, "As", KN_DT_F16, KN_BUF_SHARED, 256);
  kn_buffer *Bs = kn_buffer_new(c, "Bs", KN_DT_F16, KN_BUF_SHARED, 256);
  kn_buffer *af = kn_buffer_new(c, "af", KN_DT_F16, KN_BUF_LOCAL, 8),
            *bf = kn_buffer_new(c, "bf", KN_DT_F16, KN_BUF_LOCAL, 4);
  kn_buffer *acc = kn_buffer_new(c, "acc", KN_DT_F32, KN_BUF_LOCAL, 4);
  kn_var *t = kn_var_new(c, "t"), *lane = kn_var_new(c, "lane"), *warp = kn_var_new(c, "warp"),
         *kk = kn_var_new(c, "kk");
  kn_expr *g = kn_e_div(c, V(f, lane), I(f, 4)), *q2 = kn_e_mul(c, kn_e_mod(c, V(f, lane), I(f, 4)), I(f, 2));
  kn_expr *n0 = kn_e_mul(c, V(f, warp), I(f, 8)), *k0 = kn_e_mul(c, V(f, kk), I(f, 16));
  /* thread t copies row t / 4, columns [4 (t % 4), + 4) of each tile */
  kn_expr *trow = kn_e_div(c, V(f, t), I(f, 4)), *tcol = kn_e_mul(c, kn_e_mod(c, V(f, t), I(f, 4)), I(f, 4));
  kn_expr *mine = kn_e_mul(c, V(f, t), I(f, 4));
  kn_stmt *step[20], *init[4], *stores[4];
  int n = 0;
  step[n++] = kn_s_cp_async(c, As, mine, A, kn_e_add(c, kn_e_add(c, kn_e_mul(c, trow, I(f, 32)), k0), tcol), 4, NULL);
  step[n++] = kn_s_cp_async(c, Bs, mine, B, kn_e_add(c, kn_e_mul(c, kn_e_add(c, k0, trow), I(f, 16)), tcol), 4, NULL);
  step[n++] = kn_s_cp_commit(c);
  step[n++] = kn_s_cp_wait(c, 0);
  step[n++] = kn_s_barrier(c);
  for (int i = 0; i < 8; i++) {
    int m, k;
    kn_mma_a_coord(0, i, &m, &k);
    step[n++] = kn_s_store(c, af, I(f, i), kn_e_load(c, As, at(f, g, m, I(f, 0), q2, k, I(f, 0), 16)));
  }
  for (int i = 0; i < 4; i++) {
    int k, col, m;
    kn_mma_b_coord(0, i, &k, &col);
    step[n++] = kn_s_store(c, bf, I(f, i), kn_e_load(c, Bs, at(f, q2, k, I(f, 0), g, col, n0, 16)));
    kn_mma_c_coord(0, i, &m, &col);
    init[i] = kn_s_store(c, acc, I(f, i), kn_e_float(c, KN_DT_F32, 0));
    stores[i] = kn_s_store(c, C, at(f, g, m, I(f, 0), q2, col, n0, 16), kn_e_load(c, acc, I(f, i)));
  }
  step[n++] = kn_s_mma(c, KN_DT_F16, acc, I(f, 0), af, I(f, 0), bf, I(f, 0));
  if (last_barrier) step[n++] = kn_s_barrier(c);
  kn_stmt *parts[] = {seq(f, init, 4), kn_s_for(c, kk, I(f, 0), I(f, 2), KN_FOR_SERIAL, seq(f, step, n)),
                      seq(f, stores, 4)};
  kn_stmt *body = kn_s_alloc(c, af, kn_s_alloc(c, bf, kn_s_alloc(c, acc, seq(f, parts, 3))));
  body = kn_s_let(c, lane, kn_e_mod(c, V(f, t), I(f, 32)), kn_s_let(c, warp, kn_e_div(c, V(f, t), I(f, 32)), body));
  kn_stmt *threads = kn_s_bind(c, t, I(f, 64), KN_FOR_THREAD, 0, body);
  kn_buffer *params[] = {A, B, C};
  return gpu_kernel(f, "gemm", params, 3, kn_s_alloc(c, As, kn_s_alloc(c, Bs, threads)));
}

static void test_tiled_gemm(void **state) {
  (void)state;
  uint16_t A[16 * 32], B[32 * 16];
  float C[16 * 16];
  for (int i = 0; i < 16 * 32; i++) A[i] = kn_f32_to_f16((float)((i * 13) % 11 - 5) / 4.0f);
  for (int i = 0; i < 32 * 16; i++) B[i] = kn_f32_to_f16((float)((i * 7) % 9 - 4) / 2.0f + 0.125f);
  void *args[] = {A, B, C};
  for (int last_barrier = 1; last_barrier >= 0; last_barrier--) {
    gpu_fx f;
    gpu_fx_init(&f);
    kn_kernel k = tiled_gemm(&f, last_barrier);
    int rc = kn_gpu_eval(&k, args, 1, &f.d);
    if (last_barrier) {
      if (rc) kn_diag_print(&f.d, "gemm");
      assert_int_equal(rc, 0);
      for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
          float want = 0;
          for (int kk = 0; kk < 32; kk++) want += kn_f16_to_f32(A[m * 32 + kk]) * kn_f16_to_f32(B[kk * 16 + n]);
          assert_float_equal(C[m * 16 + n], want, 1e-5 * (1 + fabs(want)));
        }
    } else { /* the second step's copies overwrite tiles the others still read */
      assert_int_equal(rc, -1);
      expect_diag(&f.d, "race on shared 'As'", "writes what", "read since the last barrier", "at: cp_async");
    }
    gpu_fx_free(&f);
  }
}

/* ---- 6. SIMT without shared memory, against the CPU interpreter ---- */

static void test_elementwise_matches_cpu(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  kn_expr_ctx *c = &f.c;
  kn_buffer *x = kn_buffer_new(c, "x", KN_DT_F32, KN_BUF_PARAM, 0),
            *y = kn_buffer_new(c, "y", KN_DT_F32, KN_BUF_PARAM, 0);
  kn_var *n = kn_var_new(c, "N"), *b = kn_var_new(c, "b"), *t = kn_var_new(c, "t"), *i = kn_var_new(c, "i");
  kn_expr *len = kn_e_mul(c, V(&f, n), I(&f, 50)); /* N x 50 elements, 64 per block */
  kn_expr *xi = kn_e_load(c, x, V(&f, i));
  kn_expr *val = kn_e_add(c, kn_e_mul(c, xi, xi), kn_e_call1(c, KN_FN_SQRT, kn_e_call1(c, KN_FN_ABS, xi)));
  kn_stmt *guarded = kn_s_if(c, kn_e_bin(c, KN_E_LT, V(&f, i), len), kn_s_store(c, y, V(&f, i), val), NULL);
  kn_stmt *body = kn_s_let(c, i, kn_e_add(c, kn_e_mul(c, V(&f, b), I(&f, 64)), V(&f, t)), guarded);
  kn_expr *blocks = kn_e_div(c, kn_e_add(c, len, I(&f, 63)), I(&f, 64));
  kn_stmt *k_body = kn_s_bind(c, b, blocks, KN_FOR_BLOCK, 0, kn_s_bind(c, t, I(&f, 64), KN_FOR_THREAD, 0, body));
  kn_buffer *params[] = {x, y};
  kn_kernel k = gpu_kernel(&f, "ew", params, 2, k_body);
  k.batch = n;
  enum { BATCH = 3, LEN = 50 * BATCH };
  float xs[LEN], y_gpu[LEN + 64], y_cpu[LEN + 64];
  for (int j = 0; j < LEN; j++) xs[j] = sinf((float)j) * 3.0f;
  for (int j = 0; j < LEN + 64; j++) y_gpu[j] = y_cpu[j] = 42;
  void *gpu_args[] = {xs, y_gpu}, *cpu_args[] = {xs, y_cpu};
  assert_int_equal(kn_gpu_eval(&k, gpu_args, BATCH, &f.d), 0);
  kn_loop_eval(&k, cpu_args, BATCH, 1);
  assert_memory_equal(y_gpu, y_cpu, sizeof y_gpu);
  assert_float_equal(y_gpu[LEN], 42, 0); /* the guard held */
  gpu_fx_free(&f);
}

/* Divergent control flow: thread t loops t times (its own trip count),
 * accumulating in a register, then even threads store the sum and odd ones
 * its negation. */
static void test_divergent_loop_and_else(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  kn_expr_ctx *c = &f.c;
  kn_buffer *x = kn_buffer_new(c, "x", KN_DT_F32, KN_BUF_PARAM, 48),
            *y = kn_buffer_new(c, "y", KN_DT_F32, KN_BUF_PARAM, 48);
  kn_buffer *sum = kn_buffer_new(c, "sum", KN_DT_F32, KN_BUF_LOCAL, 1);
  kn_var *t = kn_var_new(c, "t"), *i = kn_var_new(c, "i");
  kn_expr *acc = kn_e_load(c, sum, I(&f, 0));
  kn_stmt *loop = kn_s_for(c, i, I(&f, 0), V(&f, t), KN_FOR_SERIAL,
                           kn_s_store(c, sum, I(&f, 0), kn_e_add(c, acc, kn_e_load(c, x, V(&f, i)))));
  kn_expr *even = kn_e_bin(c, KN_E_EQ, kn_e_mod(c, V(&f, t), I(&f, 2)), I(&f, 0));
  kn_stmt *out = kn_s_if(c, even, kn_s_store(c, y, V(&f, t), acc),
                         kn_s_store(c, y, V(&f, t), kn_e_sub(c, kn_e_float(c, KN_DT_F32, 0), acc)));
  kn_stmt *body[] = {kn_s_store(c, sum, I(&f, 0), kn_e_float(c, KN_DT_F32, 0)), loop, out};
  kn_buffer *params[] = {x, y};
  kn_kernel k = gpu_kernel(&f, "div", params, 2,
                           kn_s_bind(c, t, I(&f, 48), KN_FOR_THREAD, 0, kn_s_alloc(c, sum, seq(&f, body, 3))));
  float xs[48], ys[48];
  for (int j = 0; j < 48; j++) xs[j] = (float)(j % 5);
  void *args[] = {xs, ys};
  assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), 0);
  for (int j = 0; j < 48; j++) {
    float want = 0;
    for (int l = 0; l < j; l++) want += xs[l];
    assert_float_equal(ys[j], (j % 2 ? -want : want), 0);
  }
  gpu_fx_free(&f);
}

/* A vector let is beyond the interpreter: a diagnostic, not a crash. */
static void test_vector_let_unsupported(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  kn_expr_ctx *c = &f.c;
  kn_buffer *y = kn_buffer_new(c, "y", KN_DT_I64, KN_BUF_PARAM, 128);
  kn_var *t = kn_var_new(c, "t"), *v = kn_var_new(c, "v");
  kn_expr *lanes = kn_e_ramp(c, kn_e_mul(c, V(&f, t), I(&f, 4)), I(&f, 1), 4);
  kn_stmt *body = kn_s_let(c, v, lanes, kn_s_store(c, y, V(&f, t), I(&f, 1)));
  kn_buffer *params[] = {y};
  kn_kernel k = gpu_kernel(&f, "vlet", params, 1, kn_s_bind(c, t, I(&f, 32), KN_FOR_THREAD, 0, body));
  int64_t ys[128];
  void *args[] = {ys};
  assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), -1);
  expect_diag(&f.d, "vector let 'v' is not supported");
  gpu_fx_free(&f);
}

/* ---- bounds and misuse ---- */

static void test_out_of_bounds(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  kn_expr_ctx *c = &f.c;
  kn_buffer *x = kn_buffer_new(c, "x", KN_DT_F32, KN_BUF_PARAM, 32);
  kn_buffer *s = kn_buffer_new(c, "tile", KN_DT_F32, KN_BUF_SHARED, 32);
  kn_var *t = kn_var_new(c, "t");
  /* thread 31 reads x[32]: one past the end */
  kn_stmt *body = kn_s_store(c, s, V(&f, t), kn_e_load(c, x, kn_e_add(c, V(&f, t), I(&f, 1))));
  kn_buffer *params[] = {x};
  kn_kernel k = gpu_kernel(&f, "oob", params, 1, kn_s_alloc(c, s, kn_s_bind(c, t, I(&f, 32), KN_FOR_THREAD, 0, body)));
  float xs[32] = {0};
  void *args[] = {xs};
  assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), -1);
  expect_diag(&f.d, "index 32 outside param 'x' of 32 elements", "thread 31");
  gpu_fx_free(&f);

  /* a shared store past the end */
  gpu_fx_init(&f);
  c = &f.c;
  s = kn_buffer_new(c, "tile", KN_DT_F32, KN_BUF_SHARED, 32);
  t = kn_var_new(c, "t");
  body = kn_s_store(c, s, kn_e_mul(c, V(&f, t), I(&f, 2)), kn_e_float(c, KN_DT_F32, 1));
  k = gpu_kernel(&f, "oob2", NULL, 0, kn_s_alloc(c, s, kn_s_bind(c, t, I(&f, 32), KN_FOR_THREAD, 0, body)));
  assert_int_equal(kn_gpu_eval(&k, NULL, 1, &f.d), -1);
  expect_diag(&f.d, "index 32 outside shared 'tile'", "thread 16");
  gpu_fx_free(&f);
}

/* Reading shared memory nobody wrote reads garbage on a GPU. */
static void test_uninitialised_shared(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  kn_expr_ctx *c = &f.c;
  kn_buffer *y = kn_buffer_new(c, "y", KN_DT_F32, KN_BUF_PARAM, 32);
  kn_buffer *s = kn_buffer_new(c, "tile", KN_DT_F32, KN_BUF_SHARED, 32);
  kn_var *t = kn_var_new(c, "t");
  kn_stmt *body = kn_s_store(c, y, V(&f, t), kn_e_load(c, s, V(&f, t)));
  kn_buffer *params[] = {y};
  kn_kernel k =
      gpu_kernel(&f, "uninit", params, 1, kn_s_alloc(c, s, kn_s_bind(c, t, I(&f, 32), KN_FOR_THREAD, 0, body)));
  float ys[32];
  void *args[] = {ys};
  assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), -1);
  expect_diag(&f.d, "uninitialised shared 'tile'[0]");
  gpu_fx_free(&f);
}

/* Vector (ramp) stores and loads through shared memory check each lane. */
static void test_vector_lanes(void **state) {
  (void)state;
  for (int overlap = 0; overlap <= 1; overlap++) {
    gpu_fx f;
    gpu_fx_init(&f);
    kn_expr_ctx *c = &f.c;
    kn_buffer *x = kn_buffer_new(c, "x", KN_DT_F32, KN_BUF_PARAM, 64),
              *y = kn_buffer_new(c, "y", KN_DT_F32, KN_BUF_PARAM, 64);
    kn_buffer *s = kn_buffer_new(c, "tile", KN_DT_F32, KN_BUF_SHARED, 64);
    kn_var *t = kn_var_new(c, "t");
    /* thread t stores lanes [4t, 4t + 4) (overlapping: [3t, 3t + 4)), then
     * after a barrier loads the mirrored vector */
    kn_expr *mine = kn_e_ramp(c, kn_e_mul(c, V(&f, t), I(&f, overlap ? 3 : 4)), I(&f, 1), 4);
    kn_expr *mirror = kn_e_ramp(c, kn_e_sub(c, I(&f, 63), kn_e_mul(c, V(&f, t), I(&f, 4))), I(&f, -1), 4);
    kn_expr *lin = kn_e_ramp(c, kn_e_mul(c, V(&f, t), I(&f, 4)), I(&f, 1), 4);
    kn_stmt *body[] = {kn_s_store(c, s, mine, kn_e_load(c, x, lin)), kn_s_barrier(c),
                       kn_s_store(c, y, lin, kn_e_load(c, s, mirror))};
    kn_buffer *params[] = {x, y};
    kn_kernel k = gpu_kernel(&f, "vec", params, 2,
                             kn_s_alloc(c, s, kn_s_bind(c, t, I(&f, 16), KN_FOR_THREAD, 0, seq(&f, body, 3))));
    float xs[64], ys[64];
    for (int i = 0; i < 64; i++) xs[i] = (float)i;
    void *args[] = {xs, ys};
    if (!overlap) {
      assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), 0);
      for (int i = 0; i < 64; i++) assert_float_equal(ys[i], 63 - i, 0);
    } else { /* thread 1 writes tile[3], thread 0's last lane */
      assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), -1);
      expect_diag(&f.d, "race on shared 'tile'[3]: thread 1 writes what thread 0 wrote");
    }
    gpu_fx_free(&f);
  }
}

/* Writing what another thread read, or wrote, since the last barrier. */
static void test_write_races(void **state) {
  (void)state;
  for (int war = 0; war <= 1; war++) {
    gpu_fx f;
    gpu_fx_init(&f);
    kn_expr_ctx *c = &f.c;
    kn_buffer *y = kn_buffer_new(c, "y", KN_DT_F32, KN_BUF_PARAM, 32);
    kn_buffer *s = kn_buffer_new(c, "tile", KN_DT_F32, KN_BUF_SHARED, 32);
    kn_var *t = kn_var_new(c, "t");
    kn_expr *one = kn_e_float(c, KN_DT_F32, 1), *next = kn_e_mod(c, kn_e_add(c, V(&f, t), I(&f, 1)), I(&f, 32));
    /* war: read the next thread's element, then overwrite one's own;
     * else two threads write one element */
    kn_stmt *war_body[] = {kn_s_store(c, s, V(&f, t), one), kn_s_barrier(c),
                           kn_s_store(c, y, V(&f, t), kn_e_load(c, s, next)), kn_s_store(c, s, V(&f, t), one)};
    kn_stmt *body = war ? seq(&f, war_body, 4) : kn_s_store(c, s, kn_e_mod(c, V(&f, t), I(&f, 16)), one);
    kn_buffer *params[] = {y};
    kn_kernel k = gpu_kernel(&f, "w", params, 1, kn_s_alloc(c, s, kn_s_bind(c, t, I(&f, 32), KN_FOR_THREAD, 0, body)));
    float ys[32];
    void *args[] = {ys};
    assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), -1);
    if (war) /* thread 31 read tile[0] */
      expect_diag(&f.d, "race on shared 'tile'[0]: thread 0 writes what thread 31 read since the last barrier");
    else
      expect_diag(&f.d, "race on shared 'tile'[0]: thread 16 writes what thread 0 wrote since the last barrier");
    gpu_fx_free(&f);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reduction),
      cmocka_unit_test(test_reduction_missing_barrier),
      cmocka_unit_test(test_mma_coords_split),
      cmocka_unit_test(test_mma_one_warp),
      cmocka_unit_test(test_mma_two_warps),
      cmocka_unit_test(test_mma_k32),
      cmocka_unit_test(test_mma_uninitialised_acc),
      cmocka_unit_test(test_cp_async),
      cmocka_unit_test(test_cp_async_no_wait),
      cmocka_unit_test(test_cp_async_wait_no_barrier),
      cmocka_unit_test(test_cp_async_pred),
      cmocka_unit_test(test_cp_async_two_groups),
      cmocka_unit_test(test_tiled_gemm),
      cmocka_unit_test(test_elementwise_matches_cpu),
      cmocka_unit_test(test_divergent_loop_and_else),
      cmocka_unit_test(test_vector_let_unsupported),
      cmocka_unit_test(test_out_of_bounds),
      cmocka_unit_test(test_uninitialised_shared),
      cmocka_unit_test(test_write_races),
      cmocka_unit_test(test_vector_lanes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
