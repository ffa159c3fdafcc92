/* test_gpu_ldmatrix.c — the warp-collective ldmatrix (KN_GPU_LDMATRIX) in the
 * GPU interpreter (ir/loop/gpu_eval.c) and verifier (gpu_verify.c): an x4
 * load of a 16 x 16 tile gives exactly mma.h's A fragment, an x2.trans load
 * of a [k][n] tile exactly its B fragment, an x4 of a [n][k] tile two B
 * fragments; and what must fail: a misaligned or out-of-bounds row, a
 * missing barrier, a read before the cp.async wait, part of a warp. The
 * row addresses are written out here by hand (the brief's reading of PTX),
 * not derived from mma.h, so that the two must agree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>

#include "ir/loop/mma.h"
#include "tests/loop/gpu_test_util.h"

static const kn_gpu_limits limits = {.max_threads = 1024, .max_shared_bytes = 48 * 1024};

typedef enum ld_kind {
  LD_A_X4,       /* a 16 x 16 [m][k] tile, x4: an A fragment */
  LD_B_X2_TRANS, /* a 16 x 8 [k][n] tile, x2.trans: a B fragment */
  LD_B_NK_X4,    /* a 16 x 16 [n][k] tile, x4: B fragments of n 0-7 and 8-15 */
} ld_kind;

typedef enum ld_fault {
  LD_OK,
  LD_MISALIGNED,  /* rows one element off */
  LD_OUT_OF_TILE, /* the last matrix's rows past the buffer */
  LD_NO_BARRIER,  /* the shared tile read without a barrier after its stores */
  LD_NO_WAIT,     /* the tile copied by cp.async and read without a wait */
  LD_DIVERGENT,   /* under `lane < 16` */
  LD_HALF_WARP,   /* a block of 16 threads */
} ld_fault;

typedef struct ld_shape {
  int rows, cols, count;
  bool trans;
} ld_shape;

static ld_shape shape_of(ld_kind kind) {
  switch (kind) {
  case LD_A_X4: return (ld_shape){16, 16, 4, false};
  case LD_B_X2_TRANS: return (ld_shape){16, 8, 2, true};
  case LD_B_NK_X4: return (ld_shape){16, 16, 4, false};
  }
  return (ld_shape){0, 0, 0, false};
}

enum { PAD = 8 };

/* The tile's row and column where lane supplies its row: lane 8i + r gives
 * row r of matrix i.
 *   A x4: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (0-7, 8-15), (8-15, 8-15)
 *   B x2.trans over [k][n]: matrices k 0-7, k 8-15 (rows are k)
 *   B x4 over [n][k]: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) */
static void row_of(gpu_fx *f, ld_kind kind, kn_expr *lane, kn_expr **row, kn_expr **col) {
  kn_expr_ctx *c = &f->c;
  kn_expr *mat = kn_e_div(c, lane, I(f, 8)), *r = kn_e_mod(c, lane, I(f, 8));
  kn_expr *lo = kn_e_mod(c, mat, I(f, 2)), *hi = kn_e_div(c, mat, I(f, 2));
  switch (kind) {
  case LD_A_X4:
    *row = kn_e_add(c, r, kn_e_mul(c, lo, I(f, 8)));
    *col = kn_e_mul(c, hi, I(f, 8));
    return;
  case LD_B_X2_TRANS:
    *row = kn_e_add(c, r, kn_e_mul(c, lo, I(f, 8)));
    *col = I(f, 0);
    return;
  case LD_B_NK_X4:
    *row = kn_e_add(c, r, kn_e_mul(c, hi, I(f, 8)));
    *col = kn_e_mul(c, lo, I(f, 8));
    return;
  }
}

/* One block of 32 threads (16 for LD_HALF_WARP): the tile P (rows x cols,
 * f16) into shared S (rows padded by PAD), barrier, ldmatrix into frag,
 * frag to out[lane * 2 * count ..]. */
static kn_kernel ld_kernel(gpu_fx *f, ld_kind kind, ld_fault fault) {
  kn_expr_ctx *c = &f->c;
  ld_shape sh = shape_of(kind);
  int64_t ld = sh.cols + PAD, per = 2 * sh.count;
  kn_buffer *P = kn_buffer_new(c, "P", KN_DT_F16, KN_BUF_PARAM, sh.rows * sh.cols);
  kn_buffer *out = kn_buffer_new(c, "out", KN_DT_F16, KN_BUF_PARAM, 32 * per);
  kn_buffer *S = kn_buffer_new(c, "S", KN_DT_F16, KN_BUF_SHARED, sh.rows * ld);
  kn_buffer *frag = kn_buffer_new(c, "frag", KN_DT_F16, KN_BUF_LOCAL, per);
  kn_var *t = kn_var_new(c, "t"), *b = kn_var_new(c, "b"), *q = kn_var_new(c, "q"), *j = kn_var_new(c, "j");
  int64_t threads = fault == LD_HALF_WARP ? 16 : 32;
  kn_stmt *fill;
  if (fault == LD_NO_WAIT) { /* 8 elements per copy: rows * cols / 8 copies, one per thread at most */
    kn_expr *e = kn_e_mul(c, V(f, t), I(f, 8));
    kn_expr *at = kn_e_add(c, kn_e_mul(c, kn_e_div(c, e, I(f, sh.cols)), I(f, ld)), kn_e_mod(c, e, I(f, sh.cols)));
    fill = kn_s_if(c, kn_e_bin(c, KN_E_LT, e, I(f, sh.rows * sh.cols)), kn_s_cp_async(c, S, at, P, e, 8, NULL), NULL);
    fill = kn_s_seq2(c, fill, kn_s_cp_commit(c));
  } else {
    kn_expr *e = kn_e_add(c, kn_e_mul(c, V(f, q), I(f, threads)), V(f, t));
    kn_expr *at = kn_e_add(c, kn_e_mul(c, kn_e_div(c, e, I(f, sh.cols)), I(f, ld)), kn_e_mod(c, e, I(f, sh.cols)));
    fill = kn_s_for(c, q, I(f, 0), I(f, sh.rows * sh.cols / threads), KN_FOR_SERIAL,
                    kn_s_store(c, S, at, kn_e_load(c, P, e)));
  }
  kn_expr *row, *col;
  row_of(f, kind, V(f, t), &row, &col);
  if (fault == LD_OUT_OF_TILE) row = kn_e_add(c, row, I(f, sh.rows / 2 + 1));
  kn_expr *at = kn_e_add(c, kn_e_mul(c, row, I(f, ld)), col);
  if (fault == LD_MISALIGNED) at = kn_e_add(c, at, I(f, 1));
  kn_stmt *load = kn_s_ldmatrix(c, frag, I(f, 0), S, at, sh.count, sh.trans);
  if (fault == LD_DIVERGENT) load = kn_s_if(c, kn_e_bin(c, KN_E_LT, V(f, t), I(f, 16)), load, NULL);
  kn_stmt *steps[] = {
      fill,
      fault == LD_NO_BARRIER || fault == LD_NO_WAIT ? NULL : kn_s_barrier(c),
      load,
      kn_s_for(c, j, I(f, 0), I(f, per), KN_FOR_SERIAL,
               kn_s_store(c, out, kn_e_add(c, kn_e_mul(c, V(f, t), I(f, per)), V(f, j)), kn_e_load(c, frag, V(f, j)))),
  };
  kn_stmt *body = kn_s_alloc(c, frag, kn_s_seq(c, steps, 4));
  body = kn_s_bind(c, t, I(f, threads), KN_FOR_THREAD, 0, body);
  body = kn_s_bind(c, b, I(f, 1), KN_FOR_BLOCK, 0, kn_s_alloc(c, S, body));
  kn_buffer *params[] = {P, out};
  return gpu_kernel(f, "ld", params, 2, body);
}

/* Distinct f16 values (0 .. 255 are exact), so a misplaced element shows. */
static void tile_values(uint16_t *P, int n) {
  for (int i = 0; i < n; i++) P[i] = kn_f32_to_f16((float)((i * 37) % 256));
}

/* Runs the kernel; 0 with out filled, or -1 with diagnostics in f->d. */
static int ld_run(gpu_fx *f, ld_kind kind, ld_fault fault, uint16_t *P, uint16_t *out) {
  ld_shape sh = shape_of(kind);
  tile_values(P, sh.rows * sh.cols);
  kn_kernel k = ld_kernel(f, kind, fault);
  void *args[] = {P, out};
  return kn_gpu_eval(&k, args, 1, &f->d);
}

static void test_x4_gives_a_fragment(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  uint16_t P[256], out[32 * 8];
  if (ld_run(&f, LD_A_X4, LD_OK, P, out)) kn_diag_print(&f.d, "ldmatrix");
  assert_int_equal(f.d.count, 0);
  for (int lane = 0; lane < 32; lane++)
    for (int i = 0; i < KN_MMA_A_REGS; i++) {
      int m, k;
      kn_mma_a_coord(lane, i, &m, &k);
      assert_int_equal(out[lane * 8 + i], P[m * 16 + k]);
    }
  gpu_fx_free(&f);
}

static void test_x2_trans_gives_b_fragment(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  uint16_t P[128], out[32 * 4];
  if (ld_run(&f, LD_B_X2_TRANS, LD_OK, P, out)) kn_diag_print(&f.d, "ldmatrix");
  assert_int_equal(f.d.count, 0);
  for (int lane = 0; lane < 32; lane++)
    for (int i = 0; i < KN_MMA_B_REGS; i++) {
      int k, n;
      kn_mma_b_coord(lane, i, &k, &n);
      assert_int_equal(out[lane * 4 + i], P[k * 8 + n]); /* P is [k][n] */
    }
  gpu_fx_free(&f);
}

static void test_x4_of_nk_gives_two_b_fragments(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  uint16_t P[256], out[32 * 8];
  if (ld_run(&f, LD_B_NK_X4, LD_OK, P, out)) kn_diag_print(&f.d, "ldmatrix");
  assert_int_equal(f.d.count, 0);
  for (int lane = 0; lane < 32; lane++)
    for (int tile = 0; tile < 2; tile++)
      for (int i = 0; i < KN_MMA_B_REGS; i++) {
        int k, n;
        kn_mma_b_coord(lane, i, &k, &n);
        assert_int_equal(out[lane * 8 + tile * 4 + i], P[(tile * 8 + n) * 16 + k]); /* P is [n][k] */
      }
  gpu_fx_free(&f);
}

/* The layout helper against the PTX description in mma.h, lane by lane. */
static void test_coord(void **state) {
  (void)state;
  for (int lane = 0; lane < 32; lane++)
    for (int j = 0; j < 8; j++) {
      int m, r, c;
      kn_ldmatrix_coord(lane, j, false, &m, &r, &c);
      assert_int_equal(m, j / 2);
      assert_int_equal(r, lane / 4);
      assert_int_equal(c, 2 * (lane % 4) + j % 2);
      kn_ldmatrix_coord(lane, j, true, &m, &r, &c);
      assert_int_equal(r, 2 * (lane % 4) + j % 2);
      assert_int_equal(c, lane / 4);
    }
}

/* A faulty kernel fails in the interpreter with a diagnostic mentioning
 * `what`. */
static void expect_run_fails(ld_kind kind, ld_fault fault, const char *what) {
  gpu_fx f;
  gpu_fx_init(&f);
  uint16_t P[256], out[32 * 8];
  assert_int_equal(ld_run(&f, kind, fault, P, out), -1);
  expect_diag(&f.d, what);
  gpu_fx_free(&f);
}

static void test_misaligned(void **state) {
  (void)state;
  expect_run_fails(LD_A_X4, LD_MISALIGNED, "is not 16-byte aligned");
  expect_run_fails(LD_B_X2_TRANS, LD_MISALIGNED, "is not 16-byte aligned");
}

static void test_out_of_tile(void **state) {
  (void)state;
  expect_run_fails(LD_A_X4, LD_OUT_OF_TILE, "outside shared 'S'");
}

static void test_missing_barrier_and_wait(void **state) {
  (void)state;
  expect_run_fails(LD_A_X4, LD_NO_BARRIER, "race on shared 'S'");
  expect_run_fails(LD_B_X2_TRANS, LD_NO_WAIT, "read before cp.async wait");
}

static void test_divergent(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  kn_kernel k = ld_kernel(&f, LD_A_X4, LD_OK);
  assert_int_equal(kn_loop_verify_gpu(&k, &limits, &f.d), 0);
  k = ld_kernel(&f, LD_A_X4, LD_DIVERGENT);
  assert_int_equal(kn_loop_verify_gpu(&k, &limits, &f.d), -1);
  expect_diag(&f.d, "ldmatrix under a condition");
  k = ld_kernel(&f, LD_A_X4, LD_HALF_WARP);
  assert_int_equal(kn_loop_verify_gpu(&k, &limits, &f.d), -1);
  expect_diag(&f.d, "ldmatrix in a block of 16 threads");
  gpu_fx_free(&f);
  expect_run_fails(LD_A_X4, LD_DIVERGENT, "ldmatrix reached by 16 of the 32 threads of warp 0");
  expect_run_fails(LD_A_X4, LD_HALF_WARP, "ldmatrix in a block of 16 threads");
}

/* The printer names the count, .trans and both operands. */
static void test_print(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  kn_buffer *S = kn_buffer_new(&f.c, "S", KN_DT_BF16, KN_BUF_SHARED, 64);
  kn_buffer *d = kn_buffer_new(&f.c, "d", KN_DT_BF16, KN_BUF_LOCAL, 4);
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  kn_stmt_print(kn_s_ldmatrix(&f.c, d, I(&f, 0), S, I(&f, 8), 2, true), out, 0);
  fclose(out);
  assert_string_equal(text, "ldmatrix_x2.trans d[0] <- rows at S[8]\n");
  free(text);
  gpu_fx_free(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_coord),
      cmocka_unit_test(test_x4_gives_a_fragment),
      cmocka_unit_test(test_x2_trans_gives_b_fragment),
      cmocka_unit_test(test_x4_of_nk_gives_two_b_fragments),
      cmocka_unit_test(test_misaligned),
      cmocka_unit_test(test_out_of_tile),
      cmocka_unit_test(test_missing_barrier_and_wait),
      cmocka_unit_test(test_divergent),
      cmocka_unit_test(test_print),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
