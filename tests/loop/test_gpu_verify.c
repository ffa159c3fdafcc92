/* test_gpu_verify.c — the GPU kernel verifier (ir/loop/gpu_verify.c): the
 * kernel shape, the block limits, and barriers or MMAs that part of a block
 * or warp could skip, which the interpreter (ir/loop/gpu_eval.c) must catch
 * at run time as well. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/loop/gpu_test_util.h"

static const kn_gpu_limits limits = {.max_threads = 1024, .max_shared_bytes = 48 * 1024};

/* The parts of a small kernel:
 *   block.x b in [0, 4): alloc shared tile[shared]:
 *     thread.x tx in [0, tx_n): thread.y ty in [0, ty_n): body
 * where body is built by the test from the fields. */
typedef struct kparts {
  kn_buffer *x, *tile;
  kn_var *b, *tx, *ty;
} kparts;

static kparts parts(gpu_fx *f, int64_t shared) {
  kn_expr_ctx *c = &f->c;
  kparts p = {.x = kn_buffer_new(c, "x", KN_DT_F32, KN_BUF_PARAM, 0),
              .tile = kn_buffer_new(c, "tile", KN_DT_F32, KN_BUF_SHARED, shared),
              .b = kn_var_new(c, "b"),
              .tx = kn_var_new(c, "tx"),
              .ty = kn_var_new(c, "ty")};
  return p;
}

static kn_kernel build(gpu_fx *f, const kparts *p, int64_t tx_n, int64_t ty_n, kn_stmt *body) {
  kn_expr_ctx *c = &f->c;
  kn_stmt *threads =
      kn_s_bind(c, p->tx, I(f, tx_n), KN_FOR_THREAD, 0, kn_s_bind(c, p->ty, I(f, ty_n), KN_FOR_THREAD, 1, body));
  kn_stmt *blocks = kn_s_bind(c, p->b, I(f, 4), KN_FOR_BLOCK, 0, kn_s_alloc(c, p->tile, threads));
  kn_buffer *params[] = {p->x};
  return gpu_kernel(f, "k", params, 1, blocks);
}

/* tile[tx] = x[b * 32 + tx]; barrier; x[b * 32 + tx] = tile[31 - tx] */
static kn_stmt *reverse_body(gpu_fx *f, const kparts *p) {
  kn_expr_ctx *c = &f->c;
  kn_expr *g = kn_e_add(c, kn_e_mul(c, V(f, p->b), I(f, 32)), V(f, p->tx));
  kn_stmt *s[] = {kn_s_store(c, p->tile, V(f, p->tx), kn_e_load(c, p->x, g)), kn_s_barrier(c),
                  kn_s_store(c, p->x, g, kn_e_load(c, p->tile, kn_e_sub(c, I(f, 31), V(f, p->tx))))};
  return kn_s_seq(c, s, 3);
}

static kn_stmt *mma_body(gpu_fx *f) {
  kn_expr_ctx *c = &f->c;
  kn_buffer *af = kn_buffer_new(c, "af", KN_DT_F16, KN_BUF_LOCAL, 8),
            *bf = kn_buffer_new(c, "bf", KN_DT_F16, KN_BUF_LOCAL, 4);
  kn_buffer *acc = kn_buffer_new(c, "acc", KN_DT_F32, KN_BUF_LOCAL, 4);
  kn_stmt *mma = kn_s_mma(c, KN_DT_F16, acc, I(f, 0), af, I(f, 0), bf, I(f, 0));
  return kn_s_alloc(c, af, kn_s_alloc(c, bf, kn_s_alloc(c, acc, mma)));
}

static void test_well_formed(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  kparts p = parts(&f, 32);
  kn_kernel k = build(&f, &p, 32, 1, reverse_body(&f, &p));
  assert_int_equal(kn_loop_verify_gpu(&k, &limits, &f.d), 0);
  float x[128];
  for (int i = 0; i < 128; i++) x[i] = (float)i;
  void *args[] = {x};
  assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), 0);
  for (int i = 0; i < 128; i++) assert_float_equal(x[i], (float)(i / 32 * 32 + 31 - i % 32), 0);
  /* an MMA with a uniform loop around it, in 64 threads */
  kn_var *kk = kn_var_new(&f.c, "kk");
  k = build(&f, &p, 32, 2, kn_s_for(&f.c, kk, I(&f, 0), I(&f, 2), KN_FOR_SERIAL, mma_body(&f)));
  assert_int_equal(kn_loop_verify_gpu(&k, &limits, &f.d), 0);
  /* barriers under a condition on the block, and in a loop whose bounds
   * depend on a uniform let: every thread of the block gets there (each
   * round ends with a barrier: the next one overwrites what others read) */
  kn_expr_ctx *c = &f.c;
  kn_var *n = kn_var_new(c, "n");
  kn_stmt *round = kn_s_seq2(c, reverse_body(&f, &p), kn_s_barrier(c));
  kn_stmt *in_if = kn_s_if(c, kn_e_bin(c, KN_E_LT, V(&f, p.b), I(&f, 2)), round, NULL);
  kn_stmt *in_loop =
      kn_s_let(c, n, kn_e_add(c, V(&f, p.b), I(&f, 1)), kn_s_for(c, kk, I(&f, 0), V(&f, n), KN_FOR_SERIAL, round));
  k = build(&f, &p, 32, 1, kn_s_seq2(c, in_if, in_loop));
  assert_int_equal(kn_loop_verify_gpu(&k, &limits, &f.d), 0);
  if (kn_gpu_eval(&k, args, 1, &f.d)) kn_diag_print(&f.d, "well-formed");
  assert_int_equal(f.d.count, 0);
  /* without the closing barrier the second round races with the first */
  k = build(&f, &p, 32, 1, kn_s_seq2(c, reverse_body(&f, &p), reverse_body(&f, &p)));
  assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), -1);
  expect_diag(&f.d, "race on shared 'tile'[0]: thread 0 writes what thread 31 read");
  kn_diag_free(&f.d);
  kn_diag_init(&f.d);
  assert_int_equal(f.d.count, 0);
  gpu_fx_free(&f);
}

/* The interpreter's check without a barrier, for contrast with the verifier
 * that accepts the kernel: tile[31 - tx] belongs to another thread. */
static void test_missing_barrier_is_a_race(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  kparts p = parts(&f, 32);
  kn_stmt *body = reverse_body(&f, &p);
  kn_stmt *s[] = {body->u.seq.stmts[0], body->u.seq.stmts[2]};
  kn_kernel k = build(&f, &p, 32, 1, kn_s_seq(&f.c, s, 2));
  assert_int_equal(kn_loop_verify_gpu(&k, &limits, &f.d), 0);
  float x[128] = {0};
  void *args[] = {x};
  assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), -1);
  expect_diag(&f.d, "race on shared 'tile'[31]: thread 0 reads what thread 31 wrote", "at: x[");
  gpu_fx_free(&f);
}

/* ---- 4. divergence ---- */

static void test_barrier_under_thread_if(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  kparts p = parts(&f, 32);
  kn_expr *half = kn_e_bin(&f.c, KN_E_LT, V(&f, p.tx), I(&f, 16));
  kn_kernel k = build(&f, &p, 32, 1, kn_s_if(&f.c, half, kn_s_barrier(&f.c), NULL));
  assert_int_equal(kn_loop_verify_gpu(&k, &limits, &f.d), -1);
  expect_diag(&f.d, "kernel 'k'", "barrier under a condition that depends on the thread");
  float x[128] = {0};
  void *args[] = {x};
  assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), -1);
  expect_diag(&f.d, "barrier reached by 16 of 32 threads");
  gpu_fx_free(&f);
}

/* A let bound from a thread variable, and a loop whose trip count is one. */
static void test_barrier_under_derived_condition(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  kn_expr_ctx *c = &f.c;
  kparts p = parts(&f, 32);
  kn_var *h = kn_var_new(c, "h"), *i = kn_var_new(c, "i");
  kn_stmt *body = kn_s_let(c, h, kn_e_div(c, V(&f, p.ty), I(&f, 2)),
                           kn_s_if(c, kn_e_bin(c, KN_E_EQ, V(&f, h), I(&f, 0)), NULL, kn_s_barrier(c)));
  kn_kernel k = build(&f, &p, 32, 4, body);
  assert_int_equal(kn_loop_verify_gpu(&k, &limits, &f.d), -1);
  expect_diag(&f.d, "barrier under a condition");
  float x[128] = {0};
  void *args[] = {x};
  assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), -1);
  expect_diag(&f.d, "barrier reached by 64 of 128 threads");

  kn_diag_free(&f.d);
  kn_diag_init(&f.d);
  k = build(&f, &p, 32, 1, kn_s_for(c, i, I(&f, 0), V(&f, p.tx), KN_FOR_SERIAL, kn_s_barrier(c)));
  assert_int_equal(kn_loop_verify_gpu(&k, &limits, &f.d), -1);
  expect_diag(&f.d, "barrier under a loop whose bounds depend on the thread");
  assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), -1);
  expect_diag(&f.d, "barrier reached by 31 of 32 threads");
  gpu_fx_free(&f);
}

static void test_mma_under_thread_if(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  kparts p = parts(&f, 32);
  kn_expr *half = kn_e_bin(&f.c, KN_E_LT, V(&f, p.tx), I(&f, 16));
  kn_kernel k = build(&f, &p, 32, 1, kn_s_if(&f.c, half, mma_body(&f), NULL));
  assert_int_equal(kn_loop_verify_gpu(&k, &limits, &f.d), -1);
  expect_diag(&f.d, "mma under a condition");
  float x[128] = {0};
  void *args[] = {x};
  assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), -1);
  expect_diag(&f.d, "mma reached by 16 of the 32 threads of warp 0");
  /* a warp that is not whole */
  kn_diag_free(&f.d);
  kn_diag_init(&f.d);
  k = build(&f, &p, 16, 1, mma_body(&f));
  assert_int_equal(kn_loop_verify_gpu(&k, &limits, &f.d), -1);
  expect_diag(&f.d, "mma in a block of 16 threads");
  assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), -1);
  expect_diag(&f.d, "mma in a block of 16 threads");
  gpu_fx_free(&f);
}

/* ---- 5. shape and limits ---- */

static void test_too_many_threads(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  kparts p = parts(&f, 32);
  kn_kernel k = build(&f, &p, 1024, 2, kn_s_store(&f.c, p.x, V(&f, p.tx), kn_e_float(&f.c, KN_DT_F32, 0)));
  assert_int_equal(kn_loop_verify_gpu(&k, &limits, &f.d), -1);
  expect_diag(&f.d, "kernel 'k'", "more than 1024 threads");
  float x[1024];
  void *args[] = {x};
  assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), -1);
  expect_diag(&f.d, "2048 threads in a block");
  gpu_fx_free(&f);
}

static void test_shared_over_limit(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  kparts p = parts(&f, 12 * 1024 + 1); /* one float more than 48 KiB */
  kn_kernel k = build(&f, &p, 32, 1, reverse_body(&f, &p));
  assert_int_equal(kn_loop_verify_gpu(&k, &limits, &f.d), -1);
  expect_diag(&f.d, "shared buffers take 49156 bytes, more than the 49152 allowed");
  gpu_fx_free(&f);
  /* the interpreter refuses sizes no GPU has rather than allocate them */
  gpu_fx_init(&f);
  p = parts(&f, (int64_t)1 << 40);
  k = build(&f, &p, 32, 1, reverse_body(&f, &p));
  float x[128] = {0};
  void *args[] = {x};
  assert_int_equal(kn_loop_verify_gpu(&k, &limits, &f.d), -1);
  expect_diag(&f.d, "shared buffer 'tile' alone takes more than the 49152 bytes allowed");
  assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), -1);
  expect_diag(&f.d, "shared buffer 'tile' of 1099511627776 elements: more than");
  gpu_fx_free(&f);
}

static void test_misplaced(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  kn_expr_ctx *c = &f.c;
  kparts p = parts(&f, 32);
  /* a barrier after the THREAD loops, at block scope */
  kn_stmt *threads = kn_s_bind(c, p.tx, I(&f, 32), KN_FOR_THREAD, 0, reverse_body(&f, &p));
  kn_stmt *body =
      kn_s_bind(c, p.b, I(&f, 4), KN_FOR_BLOCK, 0, kn_s_alloc(c, p.tile, kn_s_seq2(c, threads, kn_s_barrier(c))));
  kn_kernel k = gpu_kernel(&f, "k", &p.x, 1, body);
  assert_int_equal(kn_loop_verify_gpu(&k, &limits, &f.d), -1);
  expect_diag(&f.d, "barrier outside the THREAD loops");
  float x[128] = {0};
  void *args[] = {x};
  assert_int_equal(kn_gpu_eval(&k, args, 1, &f.d), -1);
  expect_diag(&f.d, "statement outside the THREAD loops", "at: barrier");

  const char *const want[] = {"two BLOCK loops over dimension x",
                              "BLOCK loop 'b2' inside the THREAD loops",
                              "shared buffer 'tile' allocated inside the THREAD loops",
                              "expected THREAD loops",
                              "parallel loop 'p' inside the THREAD loops",
                              "not a GPU kernel"};
  kn_var *b2 = kn_var_new(c, "b2"), *par = kn_var_new(c, "p");
  kn_stmt *store = kn_s_store(c, p.x, V(&f, p.tx), kn_e_float(c, KN_DT_F32, 0));
  kn_stmt *tx_loop = kn_s_bind(c, p.tx, I(&f, 32), KN_FOR_THREAD, 0, store);
  kn_stmt *bodies[] = {
      kn_s_bind(c, p.b, I(&f, 4), KN_FOR_BLOCK, 0, kn_s_bind(c, b2, I(&f, 4), KN_FOR_BLOCK, 0, tx_loop)),
      kn_s_bind(c, p.tx, I(&f, 32), KN_FOR_THREAD, 0, kn_s_bind(c, b2, I(&f, 4), KN_FOR_BLOCK, 0, store)),
      kn_s_bind(c, p.tx, I(&f, 32), KN_FOR_THREAD, 0, kn_s_alloc(c, p.tile, store)),
      kn_s_bind(c, p.b, I(&f, 4), KN_FOR_BLOCK, 0, store),
      kn_s_bind(c, p.tx, I(&f, 32), KN_FOR_THREAD, 0, kn_s_for(c, par, I(&f, 0), I(&f, 2), KN_FOR_PARALLEL, store)),
      tx_loop,
  };
  for (int i = 0; i < 6; i++) {
    kn_diag_free(&f.d);
    kn_diag_init(&f.d);
    k = gpu_kernel(&f, "k", &p.x, 1, bodies[i]);
    k.gpu = i != 5;
    assert_int_equal(kn_loop_verify_gpu(&k, &limits, &f.d), -1);
    expect_diag(&f.d, "kernel 'k'", want[i]);
  }
  gpu_fx_free(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_well_formed),
      cmocka_unit_test(test_missing_barrier_is_a_race),
      cmocka_unit_test(test_barrier_under_thread_if),
      cmocka_unit_test(test_barrier_under_derived_condition),
      cmocka_unit_test(test_mma_under_thread_if),
      cmocka_unit_test(test_too_many_threads),
      cmocka_unit_test(test_shared_over_limit),
      cmocka_unit_test(test_misplaced),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
