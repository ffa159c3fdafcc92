/* gpu_mma.c — the Tensor Core template: a contraction whose factors are f16
 * or bf16 as a tiled GEMM on the warp-level MMA (KN_GPU_MMA, m16n8k16, f32
 * accumulators), its epilogue applied in registers.
 *
 * Which kernels: O's body reads one reduction stage R = sum over r.. of
 * x * y at O's own indices, x and y f16 / bf16 (under a cast to f32 or
 * not). The last O axis is n (read by y only); the other O axes read by y
 * too are batch axes (attention's heads), the rest are m axes (a conv's
 * n, oh, ow: implicit GEMM over NHWC); the reduction axes together are k.
 * So O is a batch of [M x N] = [M x K] x [K x N] products, whatever the
 * op: MatMul, Gemm, a conv, attention's two matmuls.
 *
 * The kernel (loop.h's GPU shape):
 *   block.x over N / BN, block.y over M / BM, block.z over the batch
 *     shared As[BM][BK + 8], Bs[BK][BN + 8] (f16; 8 halves of padding per
 *     row keep rows 16-byte aligned and move each row's banks)
 *     thread.x over 4 warps (2 x 2), each owning a (BM/2) x (BN/2) tile of
 *     m16n8 accumulators:
 *       for each k tile: every thread copies its share of x and y into
 *       As / Bs (0 outside M, N, K), barrier, each warp loads its MMA
 *       fragments from shared memory by ir/loop/mma.h's layouts and runs the
 *       MMAs, barrier
 *       epilogue: each accumulator element, inside M and N, becomes O's
 *       value: O's body with R replaced by the accumulator.
 * Everything per fragment is unrolled at generation time (straight-line
 * stores with constant register indices), so fragments stay in registers. */
#include <string.h>

#include "ir/loop/mma.h"
#include "schedule/gpu.h"

#define MAX_AXES (2 * KN_MAX_RANK)
#define WARPS_M 2
#define WARPS_N 2
#define THREADS (32 * WARPS_M * WARPS_N)
#define BK 16
#define PAD 8

typedef struct gemm {
  kn_expr_ctx *ec;
  kn_te_tensor *out, *stage;
  kn_expr *epi;  /* O's body, inlined, over O's axes; reads `stage` at O's axes */
  kn_expr *x, *y; /* the factors: x over the m, batch and r axes; y over n, batch and r */
  kn_dtype ab;
  int n_m, n_b, n_r;
  int m_axes[KN_MAX_RANK], b_axes[KN_MAX_RANK];
  kn_var *r_vars[MAX_AXES];
  int64_t r_ext[MAX_AXES];
  kn_expr *M, *B; /* products of the m and batch extents (may use the batch symbol) */
  int64_t N, K;
  int64_t bm, bn; /* the block tile */
} gemm;

/* ---- recognising the contraction ---- */

static bool is_stage(const kn_te_tensor *t) { return t && t->kind == KN_TE_COMPUTE && t->body->kind == KN_E_REDUCE; }

/* Every stage load in e is of the same tensor, at O's axes in order. */
static bool stage_loads(const kn_expr *e, const kn_te_tensor *out, kn_te_tensor **stage) {
  switch (e->kind) {
  case KN_E_INT:
  case KN_E_FLOAT:
  case KN_E_VAR: return true;
  case KN_E_LOAD: {
    if (!is_stage(e->u.load.tensor)) {
      for (int i = 0; i < e->u.load.n; i++)
        if (!stage_loads(e->u.load.indices[i], out, stage)) return false;
      return true;
    }
    if (*stage && *stage != e->u.load.tensor) return false;
    *stage = e->u.load.tensor;
    if (e->u.load.n != out->rank) return false;
    for (int i = 0; i < out->rank; i++)
      if (e->u.load.indices[i]->kind != KN_E_VAR || e->u.load.indices[i]->u.var != out->axes[i]) return false;
    return true;
  }
  case KN_E_NOT:
  case KN_E_CAST: return stage_loads(e->u.un.a, out, stage);
  case KN_E_SELECT:
    return stage_loads(e->u.sel.cond, out, stage) && stage_loads(e->u.sel.t, out, stage) &&
           stage_loads(e->u.sel.f, out, stage);
  case KN_E_CALL:
    for (int i = 0; i < e->u.call.n; i++)
      if (!stage_loads(e->u.call.args[i], out, stage)) return false;
    return true;
  case KN_E_REDUCE:
  case KN_E_RAMP:
  case KN_E_BROADCAST: return false;
  default: return stage_loads(e->u.bin.a, out, stage) && stage_loads(e->u.bin.b, out, stage);
  }
}

static kn_expr *strip_cast(kn_expr *e) {
  return e->kind == KN_E_CAST && (e->u.un.a->dtype == KN_DT_F16 || e->u.un.a->dtype == KN_DT_BF16) ? e->u.un.a : e;
}

/* The product of extents of `axes`, all constant but the first; NULL when
 * another is symbolic. */
static kn_expr *extent_product(kn_expr_ctx *c, const kn_te_tensor *out, const int *axes, int n) {
  kn_expr *p = kn_e_int(c, 1);
  int64_t e;
  for (int i = 0; i < n; i++) {
    if (i > 0 && !kn_e_is_const_int(out->shape[axes[i]], &e)) return NULL;
    p = kn_e_mul(c, p, out->shape[axes[i]]);
  }
  return p;
}

static bool match(gemm *G) {
  kn_expr_ctx *c = G->ec;
  kn_te_tensor *out = G->out;
  int rank = out->rank;
  if (rank < 2) return false;
  if (out->body->kind == KN_E_REDUCE) { /* O is the stage: the epilogue is the sum itself */
    kn_expr *idx[KN_MAX_RANK];
    for (int i = 0; i < rank; i++) idx[i] = kn_e_var(c, out->axes[i]);
    G->stage = out;
    G->epi = kn_e_tload(c, out, idx, rank);
  } else {
    G->epi = kn_sched_inline(c, out->body);
    if (!stage_loads(G->epi, out, &G->stage) || !G->stage) return false;
  }
  const kn_expr *red = G->stage->body;
  if (red->u.reduce.op != KN_RED_SUM || red->u.reduce.n_axes > MAX_AXES) return false;
  kn_expr *src = red->u.reduce.source;
  for (int i = 0; i < rank; i++) src = kn_e_substitute(c, src, G->stage->axes[i], kn_e_var(c, out->axes[i]));
  src = kn_sched_inline(c, src);
  while (src->kind == KN_E_CAST) src = src->u.un.a;
  if (src->kind != KN_E_MUL || src->lanes != 1) return false;
  G->x = strip_cast(src->u.bin.a);
  G->y = strip_cast(src->u.bin.b);
  if (kn_e_uses_var(G->x, out->axes[rank - 1])) {
    kn_expr *t = G->x;
    G->x = G->y;
    G->y = t;
  }
  G->ab = G->x->dtype;
  if ((G->ab != KN_DT_F16 && G->ab != KN_DT_BF16) || G->y->dtype != G->ab) return false;
  if (kn_e_uses_var(G->x, out->axes[rank - 1]) || !kn_e_uses_var(G->y, out->axes[rank - 1])) return false;
  G->n_m = G->n_b = 0;
  for (int a = 0; a < rank - 1; a++) {
    if (kn_e_uses_var(G->y, out->axes[a]))
      G->b_axes[G->n_b++] = a;
    else
      G->m_axes[G->n_m++] = a;
  }
  G->K = 1;
  G->n_r = red->u.reduce.n_axes;
  for (int i = 0; i < G->n_r; i++) {
    G->r_vars[i] = red->u.reduce.axes[i];
    if (!kn_e_is_const_int(red->u.reduce.extents[i], &G->r_ext[i]) || G->r_ext[i] < 1) return false;
    G->K *= G->r_ext[i];
  }
  G->M = extent_product(c, out, G->m_axes, G->n_m);
  G->B = extent_product(c, out, G->b_axes, G->n_b);
  if (!G->M || !G->B || !kn_e_is_const_int(out->shape[rank - 1], &G->N)) return false;
  /* a contraction too small for one m16n8k16 step in each dimension stays
   * on the scalar schedule */
  int64_t m = 0;
  bool m_const = kn_e_is_const_int(kn_simplify(c, G->M), &m);
  if (G->N < KN_MMA_N || G->K < KN_MMA_K || (m_const && m < KN_MMA_M)) return false;
  G->bn = G->N >= 128 ? 128 : G->N > 32 ? 64 : 32;
  G->bm = m_const && m <= 64 ? 64 : 128;
  return true;
}

/* ---- building the kernel ---- */

static kn_expr *I(gemm *G, int64_t v) { return kn_e_int(G->ec, v); }
static kn_expr *V(gemm *G, kn_var *v) { return kn_e_var(G->ec, v); }
static kn_expr *add(gemm *G, kn_expr *a, kn_expr *b) { return kn_e_add(G->ec, a, b); }
static kn_expr *mul(gemm *G, kn_expr *a, kn_expr *b) { return kn_e_mul(G->ec, a, b); }
static kn_expr *lt(gemm *G, kn_expr *a, kn_expr *b) { return kn_e_bin(G->ec, KN_E_LT, a, b); }
static kn_expr *and_(gemm *G, kn_expr *a, kn_expr *b) { return kn_e_bin(G->ec, KN_E_AND, a, b); }

/* e with the O axes in `axes` replaced by the digits of `flat` (row-major
 * over their extents). */
static kn_expr *unflatten(gemm *G, kn_expr *e, const int *axes, int n, kn_expr *flat) {
  for (int i = n - 1; i >= 0; i--) {
    kn_expr *ext = G->out->shape[axes[i]];
    kn_expr *digit = i == 0 ? flat : kn_e_mod(G->ec, flat, ext);
    e = kn_e_substitute(G->ec, e, G->out->axes[axes[i]], digit);
    if (i > 0) flat = kn_e_div(G->ec, flat, ext);
  }
  return e;
}

/* e with the reduction axes replaced by the digits of k. */
static kn_expr *unflatten_k(gemm *G, kn_expr *e, kn_expr *k) {
  for (int i = G->n_r - 1; i >= 0; i--) {
    kn_expr *digit = i == 0 ? k : kn_e_mod(G->ec, k, I(G, G->r_ext[i]));
    e = kn_e_substitute(G->ec, e, G->r_vars[i], digit);
    if (i > 0) k = kn_e_div(G->ec, k, I(G, G->r_ext[i]));
  }
  return e;
}

typedef struct vars {
  kn_var *bx, *by, *bz, *tx, *kt, *e, *ks;
  kn_expr *lane_row, *lane_col; /* lane / 4 and 2 * (lane % 4) */
  kn_expr *wm, *wn;             /* the warp's tile row and column */
  kn_buffer *as, *bs, *acc, *af, *bf;
  const kn_lower_params *params;
} vars;

/* One tile copy: each thread stores elements e * THREADS + tx of a rows x
 * cols tile into `dst` (row stride ld), value(row, col) where `inside`
 * holds, else 0. */
static kn_stmt *copy_tile(gemm *G, vars *v, kn_buffer *dst, int64_t rows, int64_t cols, int64_t ld, bool is_a) {
  kn_expr *idx = add(G, mul(G, V(G, v->e), I(G, THREADS)), V(G, v->tx));
  kn_expr *r = kn_e_div(G->ec, idx, I(G, cols)), *col = kn_e_mod(G->ec, idx, I(G, cols));
  kn_expr *k = add(G, mul(G, V(G, v->kt), I(G, BK)), is_a ? col : r);
  kn_expr *value, *inside;
  if (is_a) {
    kn_expr *m = add(G, mul(G, V(G, v->by), I(G, G->bm)), r);
    value = unflatten(G, unflatten_k(G, G->x, k), G->m_axes, G->n_m, m);
    inside = and_(G, lt(G, m, G->M), lt(G, k, I(G, G->K)));
  } else {
    kn_expr *n = add(G, mul(G, V(G, v->bx), I(G, G->bn)), col);
    value = kn_e_substitute(G->ec, unflatten_k(G, G->y, k), G->out->axes[G->out->rank - 1], n);
    inside = and_(G, lt(G, k, I(G, G->K)), lt(G, n, I(G, G->N)));
  }
  value = kn_sched_to_buffers(G->ec, unflatten(G, value, G->b_axes, G->n_b, V(G, v->bz)), v->params);
  kn_expr *at = add(G, mul(G, r, I(G, ld)), col);
  kn_stmt *st = kn_s_if(G->ec, inside, kn_s_store(G->ec, dst, at, value),
                        kn_s_store(G->ec, dst, at, kn_e_float(G->ec, G->ab, 0)));
  return kn_s_for(G->ec, v->e, I(G, 0), I(G, rows * cols / THREADS), KN_FOR_SERIAL, st);
}

/* Each coordinate of mma.h is a lane part (lane / 4 or 2 * (lane % 4))
 * plus a part of the element index alone; the template builds the lane part
 * once per thread and takes the rest from mma.h at lane 0. This checks that
 * split against mma.h for every lane. */
static void check_lane_split(void) {
  for (int lane = 0; lane < 32; lane++)
    for (int i = 0; i < KN_MMA_A_REGS; i++) {
      int m, k, m0, k0;
      kn_mma_a_coord(lane, i, &m, &k);
      kn_mma_a_coord(0, i, &m0, &k0);
      KN_ASSERT(m == m0 + lane / 4 && k == k0 + 2 * (lane % 4), "mma.h's A layout is not lane part + element part");
      if (i >= KN_MMA_B_REGS) continue;
      kn_mma_b_coord(lane, i, &k, &m);
      kn_mma_b_coord(0, i, &k0, &m0);
      KN_ASSERT(k == k0 + 2 * (lane % 4) && m == m0 + lane / 4, "mma.h's B layout is not lane part + element part");
      kn_mma_c_coord(lane, i, &m, &k);
      kn_mma_c_coord(0, i, &m0, &k0);
      KN_ASSERT(m == m0 + lane / 4 && k == k0 + 2 * (lane % 4), "mma.h's C layout is not lane part + element part");
    }
}

/* One BK slice of the block tile: fragments from shared memory, MMAs. */
static kn_stmt *mma_step(gemm *G, vars *v, int64_t tm, int64_t tn, int64_t lda, int64_t ldb) {
  int64_t wtm = G->bm / WARPS_M, wtn = G->bn / WARPS_N;
  int n = 0;
  kn_stmt **s = KN_NEW_ARRAY(G->ec->arena, kn_stmt *, (size_t)(tm * KN_MMA_A_REGS + tn * KN_MMA_B_REGS + tm * tn));
  for (int64_t i = 0; i < tm; i++)
    for (int j = 0; j < KN_MMA_A_REGS; j++) {
      int m0, k0;
      kn_mma_a_coord(0, j, &m0, &k0);
      kn_expr *row = add(G, add(G, mul(G, v->wm, I(G, wtm)), I(G, i * KN_MMA_M + m0)), v->lane_row);
      kn_expr *at = add(G, mul(G, row, I(G, lda)), add(G, v->lane_col, I(G, k0)));
      s[n++] = kn_s_store(G->ec, v->af, I(G, i * KN_MMA_A_REGS + j), kn_e_load(G->ec, v->as, at));
    }
  for (int64_t jn = 0; jn < tn; jn++)
    for (int j = 0; j < KN_MMA_B_REGS; j++) {
      int k0, n0;
      kn_mma_b_coord(0, j, &k0, &n0);
      kn_expr *col = add(G, add(G, mul(G, v->wn, I(G, wtn)), I(G, jn * KN_MMA_N + n0)), v->lane_row);
      kn_expr *at = add(G, mul(G, add(G, v->lane_col, I(G, k0)), I(G, ldb)), col);
      s[n++] = kn_s_store(G->ec, v->bf, I(G, jn * KN_MMA_B_REGS + j), kn_e_load(G->ec, v->bs, at));
    }
  for (int64_t i = 0; i < tm; i++)
    for (int64_t jn = 0; jn < tn; jn++)
      s[n++] = kn_s_mma(G->ec, G->ab, v->acc, I(G, (i * tn + jn) * KN_MMA_C_REGS), v->af, I(G, i * KN_MMA_A_REGS),
                        v->bf, I(G, jn * KN_MMA_B_REGS));
  return kn_s_seq(G->ec, s, n);
}

static kn_expr *stage_to_acc(kn_expr_ctx *c, kn_expr *load, void *ctx) {
  void **a = ctx;
  if (load->u.load.tensor != a[0]) return load;
  kn_expr *acc = a[1];
  return acc->dtype == load->dtype ? acc : kn_e_cast(c, load->dtype, acc);
}

/* O's flat index at its axes' values (row-major over its shape). */
static kn_expr *out_flat(gemm *G) {
  kn_expr *flat = I(G, 0);
  for (int i = 0; i < G->out->rank; i++) flat = add(G, mul(G, flat, G->out->shape[i]), V(G, G->out->axes[i]));
  return flat;
}

static kn_stmt *epilogue(gemm *G, vars *v, kn_buffer *out_buf, int64_t tm, int64_t tn) {
  int64_t wtm = G->bm / WARPS_M, wtn = G->bn / WARPS_N;
  int rank = G->out->rank, n = 0;
  kn_stmt **s = KN_NEW_ARRAY(G->ec->arena, kn_stmt *, (size_t)(tm * tn * KN_MMA_C_REGS));
  kn_expr *store_at = out_flat(G);
  for (int64_t i = 0; i < tm; i++)
    for (int64_t jn = 0; jn < tn; jn++)
      for (int j = 0; j < KN_MMA_C_REGS; j++) {
        int m0, n0;
        kn_mma_c_coord(0, j, &m0, &n0);
        kn_expr *m = add(G, add(G, mul(G, V(G, v->by), I(G, G->bm)), mul(G, v->wm, I(G, wtm))),
                         add(G, I(G, i * KN_MMA_M + m0), v->lane_row));
        kn_expr *nn = add(G, add(G, mul(G, V(G, v->bx), I(G, G->bn)), mul(G, v->wn, I(G, wtn))),
                          add(G, I(G, jn * KN_MMA_N + n0), v->lane_col));
        kn_expr *acc = kn_e_load(G->ec, v->acc, I(G, (i * tn + jn) * KN_MMA_C_REGS + j));
        void *ctx[2] = {G->stage, acc};
        kn_expr *value = kn_e_map_loads(G->ec, G->epi, stage_to_acc, ctx), *at = store_at;
        value = kn_e_substitute(G->ec, value, G->out->axes[rank - 1], nn);
        at = kn_e_substitute(G->ec, at, G->out->axes[rank - 1], nn);
        value = unflatten(G, unflatten(G, value, G->m_axes, G->n_m, m), G->b_axes, G->n_b, V(G, v->bz));
        at = unflatten(G, unflatten(G, at, G->m_axes, G->n_m, m), G->b_axes, G->n_b, V(G, v->bz));
        value = kn_sched_to_buffers(G->ec, value, v->params);
        s[n++] = kn_s_if(G->ec, and_(G, lt(G, m, G->M), lt(G, nn, I(G, G->N))), kn_s_store(G->ec, out_buf, at, value),
                         NULL);
      }
  return kn_s_seq(G->ec, s, n);
}

kn_stmt *kn_gpu_mma_lower(kn_expr_ctx *ec, kn_te_tensor *out, kn_buffer *out_buf, const kn_lower_params *params,
                          const char **schedule) {
  gemm G = {.ec = ec, .out = out};
  if (out->kind != KN_TE_COMPUTE || !match(&G)) return NULL;
  check_lane_split();
  int64_t tm = G.bm / WARPS_M / KN_MMA_M, tn = G.bn / WARPS_N / KN_MMA_N, lda = BK + PAD, ldb = G.bn + PAD;
  kn_arena *A = ec->arena;
  vars v = {.params = params};
  v.bx = kn_var_new(ec, "bx");
  v.by = kn_var_new(ec, "by");
  v.bz = kn_var_new(ec, "bz");
  v.tx = kn_var_new(ec, "tx");
  v.kt = kn_var_new(ec, "kt");
  v.e = kn_var_new(ec, "e");
  kn_var *lane = kn_var_new(ec, "lane"), *warp = kn_var_new(ec, "warp");
  v.lane_row = kn_e_div(ec, V(&G, lane), I(&G, 4));
  v.lane_col = mul(&G, I(&G, 2), kn_e_mod(ec, V(&G, lane), I(&G, 4)));
  v.wm = kn_e_div(ec, V(&G, warp), I(&G, WARPS_N));
  v.wn = kn_e_mod(ec, V(&G, warp), I(&G, WARPS_N));
  v.as = kn_buffer_new(ec, "As", G.ab, KN_BUF_SHARED, G.bm * lda);
  v.bs = kn_buffer_new(ec, "Bs", G.ab, KN_BUF_SHARED, BK * ldb);
  v.acc = kn_buffer_new(ec, "acc", KN_DT_F32, KN_BUF_LOCAL, tm * tn * KN_MMA_C_REGS);
  v.af = kn_buffer_new(ec, "afrag", G.ab, KN_BUF_LOCAL, tm * KN_MMA_A_REGS);
  v.bf = kn_buffer_new(ec, "bfrag", G.ab, KN_BUF_LOCAL, tn * KN_MMA_B_REGS);

  kn_stmt **zero = KN_NEW_ARRAY(A, kn_stmt *, (size_t)(tm * tn * KN_MMA_C_REGS));
  for (int64_t i = 0; i < tm * tn * KN_MMA_C_REGS; i++)
    zero[i] = kn_s_store(ec, v.acc, I(&G, i), kn_e_float(ec, KN_DT_F32, 0));
  kn_stmt *ktile[] = {copy_tile(&G, &v, v.as, G.bm, BK, lda, true), copy_tile(&G, &v, v.bs, BK, G.bn, ldb, false),
                      kn_s_barrier(ec), mma_step(&G, &v, tm, tn, lda, ldb), kn_s_barrier(ec)};
  kn_stmt *kloop = kn_s_for(ec, v.kt, I(&G, 0), I(&G, (G.K + BK - 1) / BK), KN_FOR_SERIAL, kn_s_seq(ec, ktile, 5));
  kn_stmt *thread_body[] = {kn_s_seq(ec, zero, (int)(tm * tn * KN_MMA_C_REGS)), kloop,
                            epilogue(&G, &v, out_buf, tm, tn)};
  kn_stmt *body = kn_s_seq(ec, thread_body, 3);
  body = kn_s_alloc(ec, v.acc, kn_s_alloc(ec, v.af, kn_s_alloc(ec, v.bf, body)));
  body = kn_s_let(ec, lane, kn_e_mod(ec, V(&G, v.tx), I(&G, 32)),
                  kn_s_let(ec, warp, kn_e_div(ec, V(&G, v.tx), I(&G, 32)), body));
  body = kn_s_bind(ec, v.tx, I(&G, THREADS), KN_FOR_THREAD, 0, body);
  body = kn_s_alloc(ec, v.as, kn_s_alloc(ec, v.bs, body));
  kn_expr *grid_m = kn_e_div(ec, add(&G, G.M, I(&G, G.bm - 1)), I(&G, G.bm));
  body = kn_s_bind(ec, v.bz, kn_simplify(ec, G.B), KN_FOR_BLOCK, 2, body);
  body = kn_s_bind(ec, v.by, kn_simplify(ec, grid_m), KN_FOR_BLOCK, 1, body);
  body = kn_s_bind(ec, v.bx, I(&G, (G.N + G.bn - 1) / G.bn), KN_FOR_BLOCK, 0, body);
  *schedule = kn_arena_printf(A, "tensorize(mma_m16n8k16.%s, block=%lldx%lldx%d, warps=%dx%d, m_axes=%d, "
                                 "batch_axes=%d, k=%lld)",
                              kn_dtype_name(G.ab), (long long)G.bm, (long long)G.bn, BK, WARPS_M, WARPS_N, G.n_m,
                              G.n_b, (long long)G.K);
  return kn_simplify_stmt(ec, body);
}
