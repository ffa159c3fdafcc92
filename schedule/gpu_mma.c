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
 *     shared As[STAGES][BM][BK + 8], Bs[STAGES][BK][BN + 8] (or [BN][BK +
 *     8] when y is contiguous along k, a Gemm with transB); 8 halves of
 *     padding per row keep rows 16-byte aligned (ldmatrix needs that) and
 *     move each row's banks (the 8 rows an ldmatrix matrix reads hit
 *     different banks)
 *     thread.x over 4 warps (2 x 2), each owning a (BM/2) x (BN/2) tile of
 *     m16n8 accumulators:
 *       k tiles 0 .. STAGES-2 requested, then per k tile kt: wait for tile
 *       kt, barrier, request tile kt + STAGES - 1 into the stage tile kt - 1
 *       used (every warp is past it: the barrier), then the MMAs of tile kt
 *       on fragments loaded from shared memory by ldmatrix.x4: one per
 *       16 x 16 A tile, one per two n8 B tiles (.trans where Bs is [k][n]),
 *       its matrices placed by ir/loop/mma.h's layouts
 *       epilogue: each accumulator element, inside M and N, becomes O's
 *       value: O's body with R replaced by the accumulator.
 * A tile is requested with cp.async, 16 bytes per copy, where its operand is
 * a plain load contiguous along the tile's rows in runs of 8 (the last index
 * of the load is the innermost k axis, or n, with extents multiples of 8;
 * buffers are 16-byte aligned: plan offsets are multiples of 64); else each
 * thread loads and stores its elements (0 outside M, N, K). Everything per
 * fragment is unrolled at generation time (straight-line code with
 * constant register indices), so fragments stay in registers. */
#include <string.h>

#include "ir/loop/mma.h"
#include "schedule/gpu.h"

#define MAX_AXES (2 * KN_MAX_RANK)
#define WARPS_M 2
#define WARPS_N 2
#define THREADS (32 * WARPS_M * WARPS_N)
#define BK 32
#define PAD 8
#define STAGES 3
#define CHUNK 8 /* halves per cp.async: 16 bytes */

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
  bool a_async;   /* x contiguous along k in runs of CHUNK: cp.async */
  bool b_nk;      /* Bs holds [n][k] (y contiguous along k), else [k][n] */
  bool b_async;   /* y contiguous along Bs's rows in runs of CHUNK: cp.async */
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

/* Is e a load of an input whose last index is `v` alone (no other index
 * reads v), with that dim and v's extent multiples of CHUNK? Then CHUNK
 * consecutive values of v from a multiple of CHUNK are CHUNK consecutive,
 * 16-byte aligned elements. */
static bool contiguous(const kn_expr *e, const kn_var *v, int64_t extent) {
  if (e->kind != KN_E_LOAD || !e->u.load.tensor || e->u.load.tensor->kind != KN_TE_PLACEHOLDER) return false;
  int n = e->u.load.n;
  int64_t last;
  const kn_expr *li = e->u.load.indices[n - 1];
  if (n < 1 || li->kind != KN_E_VAR || li->u.var != v || !kn_e_is_const_int(e->u.load.tensor->shape[n - 1], &last))
    return false;
  for (int i = 0; i < n - 1; i++)
    if (kn_e_uses_var(e->u.load.indices[i], v)) return false;
  return last % CHUNK == 0 && extent % CHUNK == 0;
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
  kn_var *k_inner = G->r_vars[G->n_r - 1], *n_var = out->axes[rank - 1];
  G->a_async = contiguous(G->x, k_inner, G->r_ext[G->n_r - 1]);
  G->b_nk = contiguous(G->y, k_inner, G->r_ext[G->n_r - 1]);
  G->b_async = G->b_nk || contiguous(G->y, n_var, G->N);
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
  kn_var *bx, *by, *bz, *tx;
  kn_expr *lane_row, *lane_col; /* lane / 4 and 2 * (lane % 4) */
  kn_expr *ld_row, *ld_lo, *ld_hi; /* ldmatrix: lane % 8, then the bits of lane / 8 */
  kn_expr *wm, *wn;             /* the warp's tile row and column */
  kn_buffer *as, *bs, *acc, *af, *bf;
  int64_t lda, ldb, a_tile, b_tile; /* row strides and stage sizes of As and Bs */
  const kn_lower_params *params;
} vars;

/* x at (m, k) (is_a) or y at (k, n), over buffers. */
static kn_expr *operand(gemm *G, const vars *v, bool is_a, kn_expr *mn, kn_expr *k) {
  kn_expr *e = is_a ? unflatten(G, unflatten_k(G, G->x, k), G->m_axes, G->n_m, mn)
                    : kn_e_substitute(G->ec, unflatten_k(G, G->y, k), G->out->axes[G->out->rank - 1], mn);
  return kn_sched_to_buffers(G->ec, unflatten(G, e, G->b_axes, G->n_b, V(G, v->bz)), v->params);
}

/* Requests k tile `kt` of one operand into stage `stage` of its shared
 * buffer: each thread its share of the tile's elements, or of its runs of
 * CHUNK elements with cp.async. */
static kn_stmt *copy_tile(gemm *G, const vars *v, bool is_a, kn_expr *kt, kn_expr *stage) {
  bool k_cols = is_a || G->b_nk; /* the tile's rows run along k */
  bool async = is_a ? G->a_async : G->b_async;
  int64_t rows = is_a ? G->bm : G->b_nk ? G->bn : BK, cols = k_cols ? BK : G->bn, per = async ? CHUNK : 1;
  int64_t count = rows * cols / per;
  KN_ASSERT(count % THREADS == 0, "a tile copy that does not split evenly over the threads");
  kn_var *e = kn_var_new(G->ec, "e");
  kn_expr *idx = add(G, mul(G, V(G, e), I(G, THREADS)), V(G, v->tx));
  kn_expr *r = kn_e_div(G->ec, idx, I(G, cols / per)), *c = mul(G, kn_e_mod(G->ec, idx, I(G, cols / per)), I(G, per));
  kn_expr *k = add(G, mul(G, kt, I(G, BK)), k_cols ? c : r);
  kn_expr *mn = add(G, mul(G, V(G, is_a ? v->by : v->bx), I(G, is_a ? G->bm : G->bn)), k_cols ? r : c);
  kn_expr *inside = and_(G, lt(G, mn, is_a ? G->M : I(G, G->N)), lt(G, k, I(G, G->K)));
  kn_expr *value = operand(G, v, is_a, mn, k);
  kn_buffer *dst = is_a ? v->as : v->bs;
  kn_expr *at = add(G, add(G, mul(G, stage, I(G, is_a ? v->a_tile : v->b_tile)), mul(G, r, I(G, is_a ? v->lda : v->ldb))), c);
  kn_stmt *st;
  if (async) {
    KN_ASSERT(value->kind == KN_E_LOAD && value->u.load.buffer, "cp.async of something other than a load");
    kn_expr *src = kn_e_select(G->ec, inside, value->u.load.index, I(G, 0)); /* no address outside the buffer */
    st = kn_s_cp_async(G->ec, dst, at, value->u.load.buffer, src, CHUNK, inside);
  } else {
    st = kn_s_if(G->ec, inside, kn_s_store(G->ec, dst, at, value),
                 kn_s_store(G->ec, dst, at, kn_e_float(G->ec, G->ab, 0)));
  }
  return kn_s_for(G->ec, e, I(G, 0), I(G, count / THREADS), KN_FOR_SERIAL, st);
}

/* The epilogue builds each accumulator coordinate of mma.h as a lane part
 * (lane / 4 or 2 * (lane % 4)) plus a part of the element index alone,
 * taken from mma.h at lane 0. This checks that split for every lane. */
static void check_lane_split(void) {
  for (int lane = 0; lane < 32; lane++)
    for (int i = 0; i < KN_MMA_C_REGS; i++) {
      int m, n, m0, n0;
      kn_mma_c_coord(lane, i, &m, &n);
      kn_mma_c_coord(0, i, &m0, &n0);
      KN_ASSERT(m == m0 + lane / 4 && n == n0 + 2 * (lane % 4), "mma.h's C layout is not lane part + element part");
    }
}

/* An ldmatrix.x4 that fills fragment registers: where its matrices start in
 * the shared tile (row, column as stored), and whether it transposes. */
typedef struct ld_plan {
  int row[4], col[4];
  bool trans;
} ld_plan;

/* Stored (row, column) of fragment element j (0..7) of the x4 load: A's
 * a[j] of a 16 x 16 [m][k] tile, or B's element j % 4 of n8 tile j / 4 of
 * a [k][n] tile (or [n][k], n_major). */
static void frag_at(bool is_a, bool n_major, int lane, int j, int *row, int *col) {
  if (is_a) {
    kn_mma_a_coord(lane, j, row, col);
    return;
  }
  int k, n;
  kn_mma_b_coord(lane, j % KN_MMA_B_REGS, &k, &n);
  n += KN_MMA_N * (j / KN_MMA_B_REGS);
  *row = n_major ? n : k;
  *col = n_major ? k : n;
}

/* The x4 load of an A fragment (is_a) or of two B fragments, from mma.h:
 * matrix i holds fragment register i, so it starts where lane 0's element
 * 2i lies; B transposes when its tile is [k][n] (ldmatrix hands each lane a
 * row's neighbours, B's fragment wants a column's). Checked against
 * kn_ldmatrix_coord for every lane and element, and that the origins are
 * affine in the matrix index's two bits (so one address expression serves
 * every lane) and 16-byte aligned. */
static ld_plan ld_plan_of(bool is_a, bool n_major) {
  ld_plan p = {.trans = !is_a && !n_major};
  for (int i = 0; i < 4; i++) frag_at(is_a, n_major, 0, 2 * i, &p.row[i], &p.col[i]);
  for (int lane = 0; lane < 32; lane++)
    for (int j = 0; j < 8; j++) {
      int mat, r, c, row, col;
      kn_ldmatrix_coord(lane, j, p.trans, &mat, &r, &c);
      frag_at(is_a, n_major, lane, j, &row, &col);
      KN_ASSERT(p.row[mat] + r == row && p.col[mat] + c == col, "ldmatrix does not give mma.h's fragment");
    }
  KN_ASSERT(p.row[0] == 0 && p.col[0] == 0 && p.row[3] == p.row[1] + p.row[2] && p.col[3] == p.col[1] + p.col[2],
            "ldmatrix origins not affine in the matrix index");
  for (int i = 0; i < 4; i++) KN_ASSERT(p.col[i] % KN_LDMATRIX_DIM == 0, "ldmatrix row not 16-byte aligned");
  return p;
}

/* This lane's row address in the tile under plan p, as (row, column):
 * lane 8i + r supplies row r of matrix i. */
static void ld_lane_at(gemm *G, const vars *v, const ld_plan *p, kn_expr **row, kn_expr **col) {
  *row = add(G, v->ld_row, add(G, mul(G, v->ld_lo, I(G, p->row[1])), mul(G, v->ld_hi, I(G, p->row[2]))));
  *col = add(G, mul(G, v->ld_lo, I(G, p->col[1])), mul(G, v->ld_hi, I(G, p->col[2])));
}

/* The MMAs of the k tile in stage `stage`: per 16-wide slice, each warp's
 * fragments from shared memory by ldmatrix.x4 (one per A tile, one per two
 * B tiles), then its tm x tn MMAs. */
static kn_stmt *mma_tile(gemm *G, const vars *v, kn_expr *stage, int64_t tm, int64_t tn) {
  int64_t wtm = G->bm / WARPS_M, wtn = G->bn / WARPS_N;
  KN_ASSERT(tn % 2 == 0, "B fragments are loaded two n8 tiles at a time");
  KN_ASSERT(v->lda % KN_LDMATRIX_DIM == 0 && v->ldb % KN_LDMATRIX_DIM == 0 && v->a_tile % KN_LDMATRIX_DIM == 0 &&
                v->b_tile % KN_LDMATRIX_DIM == 0,
            "shared tile rows must stay 16-byte aligned for ldmatrix");
  int n = 0;
  kn_stmt **s = KN_NEW_ARRAY(G->ec->arena, kn_stmt *, (size_t)(BK / KN_MMA_K * (tm + tn / 2 + tm * tn)));
  kn_expr *a_base = mul(G, stage, I(G, v->a_tile)), *b_base = mul(G, stage, I(G, v->b_tile));
  ld_plan pa = ld_plan_of(true, false), pb = ld_plan_of(false, G->b_nk);
  kn_expr *a_row, *a_col, *b_row, *b_col;
  ld_lane_at(G, v, &pa, &a_row, &a_col);
  ld_lane_at(G, v, &pb, &b_row, &b_col);
  for (int64_t ks = 0; ks < BK / KN_MMA_K; ks++) {
    for (int64_t i = 0; i < tm; i++) {
      kn_expr *row = add(G, mul(G, v->wm, I(G, wtm)), add(G, I(G, i * KN_MMA_M), a_row));
      kn_expr *col = add(G, I(G, ks * KN_MMA_K), a_col);
      kn_expr *at = add(G, a_base, add(G, mul(G, row, I(G, v->lda)), col));
      s[n++] = kn_s_ldmatrix(G->ec, v->af, I(G, i * KN_MMA_A_REGS), v->as, at, 4, pa.trans);
    }
    for (int64_t jn = 0; jn < tn; jn += 2) {
      kn_expr *k0 = I(G, ks * KN_MMA_K), *n0 = add(G, mul(G, v->wn, I(G, wtn)), I(G, jn * KN_MMA_N));
      kn_expr *row = add(G, G->b_nk ? n0 : k0, b_row), *col = add(G, G->b_nk ? k0 : n0, b_col);
      kn_expr *at = add(G, b_base, add(G, mul(G, row, I(G, v->ldb)), col));
      s[n++] = kn_s_ldmatrix(G->ec, v->bf, I(G, jn * KN_MMA_B_REGS), v->bs, at, 4, pb.trans);
    }
    for (int64_t i = 0; i < tm; i++)
      for (int64_t jn = 0; jn < tn; jn++)
        s[n++] = kn_s_mma(G->ec, G->ab, v->acc, I(G, (i * tn + jn) * KN_MMA_C_REGS), v->af,
                          I(G, i * KN_MMA_A_REGS), v->bf, I(G, jn * KN_MMA_B_REGS));
  }
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

/* e with O's axes at accumulator element (m, n) of batch bz. */
static kn_expr *at_element(gemm *G, const vars *v, kn_expr *e, kn_expr *m, kn_expr *n) {
  e = kn_e_substitute(G->ec, e, G->out->axes[G->out->rank - 1], n);
  return unflatten(G, unflatten(G, e, G->m_axes, G->n_m, m), G->b_axes, G->n_b, V(G, v->bz));
}

static kn_stmt *epilogue(gemm *G, const vars *v, kn_buffer *out_buf, int64_t tm, int64_t tn) {
  int64_t wtm = G->bm / WARPS_M, wtn = G->bn / WARPS_N;
  int n = 0;
  kn_stmt **s = KN_NEW_ARRAY(G->ec->arena, kn_stmt *, (size_t)(tm * tn * KN_MMA_C_REGS));
  kn_expr *flat = out_flat(G);
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
        kn_expr *value = at_element(G, v, kn_e_map_loads(G->ec, G->epi, stage_to_acc, ctx), m, nn);
        kn_stmt *store = kn_s_store(G->ec, out_buf, at_element(G, v, flat, m, nn),
                                    kn_sched_to_buffers(G->ec, value, v->params));
        s[n++] = kn_s_if(G->ec, and_(G, lt(G, m, G->M), lt(G, nn, I(G, G->N))), store, NULL);
      }
  return kn_s_seq(G->ec, s, n);
}

/* The k loop: STAGES - 1 tiles requested ahead, then per tile: wait,
 * barrier, request the tile STAGES - 1 ahead, MMAs. */
static kn_stmt *k_loop(gemm *G, const vars *v, int64_t tm, int64_t tn) {
  kn_expr_ctx *c = G->ec;
  bool async = G->a_async || G->b_async;
  int64_t kt_n = (G->K + BK - 1) / BK;
  kn_stmt *parts[2 * STAGES + 1];
  int n = 0;
  for (int64_t s = 0; s < STAGES - 1; s++) {
    if (s < kt_n)
      parts[n++] = kn_s_seq2(c, copy_tile(G, v, true, I(G, s), I(G, s)), copy_tile(G, v, false, I(G, s), I(G, s)));
    if (async) parts[n++] = kn_s_cp_commit(c);
  }
  kn_var *kt = kn_var_new(c, "kt");
  kn_expr *next = add(G, V(G, kt), I(G, STAGES - 1)), *next_stage = kn_e_mod(c, next, I(G, STAGES));
  kn_stmt *request = kn_s_if(c, lt(G, next, I(G, kt_n)),
                             kn_s_seq2(c, copy_tile(G, v, true, next, next_stage),
                                       copy_tile(G, v, false, next, next_stage)),
                             NULL);
  kn_stmt *step[] = {async ? kn_s_cp_wait(c, STAGES - 2) : NULL, kn_s_barrier(c), request,
                     async ? kn_s_cp_commit(c) : NULL, mma_tile(G, v, kn_e_mod(c, V(G, kt), I(G, STAGES)), tm, tn)};
  parts[n++] = kn_s_for(c, kt, I(G, 0), I(G, kt_n), KN_FOR_SERIAL, kn_s_seq(c, step, 5));
  return kn_s_seq(c, parts, n);
}

kn_stmt *kn_gpu_mma_lower(kn_expr_ctx *ec, kn_te_tensor *out, kn_buffer *out_buf, const kn_lower_params *params,
                          const char **schedule) {
  gemm G = {.ec = ec, .out = out};
  if (out->kind != KN_TE_COMPUTE || !match(&G)) return NULL;
  check_lane_split();
  int64_t tm = G.bm / WARPS_M / KN_MMA_M, tn = G.bn / WARPS_N / KN_MMA_N;
  vars v = {.params = params, .lda = BK + PAD, .ldb = (G.b_nk ? BK : G.bn) + PAD};
  v.a_tile = G.bm * v.lda;
  v.b_tile = (G.b_nk ? G.bn : BK) * v.ldb;
  v.bx = kn_var_new(ec, "bx");
  v.by = kn_var_new(ec, "by");
  v.bz = kn_var_new(ec, "bz");
  v.tx = kn_var_new(ec, "tx");
  kn_var *lane = kn_var_new(ec, "lane"), *warp = kn_var_new(ec, "warp");
  v.lane_row = kn_e_div(ec, V(&G, lane), I(&G, 4));
  v.lane_col = mul(&G, I(&G, 2), kn_e_mod(ec, V(&G, lane), I(&G, 4)));
  v.ld_row = kn_e_mod(ec, V(&G, lane), I(&G, KN_LDMATRIX_DIM));
  v.ld_lo = kn_e_mod(ec, kn_e_div(ec, V(&G, lane), I(&G, KN_LDMATRIX_DIM)), I(&G, 2));
  v.ld_hi = kn_e_div(ec, V(&G, lane), I(&G, 2 * KN_LDMATRIX_DIM));
  v.wm = kn_e_div(ec, V(&G, warp), I(&G, WARPS_N));
  v.wn = kn_e_mod(ec, V(&G, warp), I(&G, WARPS_N));
  v.as = kn_buffer_new(ec, "As", G.ab, KN_BUF_SHARED, STAGES * v.a_tile);
  v.bs = kn_buffer_new(ec, "Bs", G.ab, KN_BUF_SHARED, STAGES * v.b_tile);
  v.acc = kn_buffer_new(ec, "acc", KN_DT_F32, KN_BUF_LOCAL, tm * tn * KN_MMA_C_REGS);
  v.af = kn_buffer_new(ec, "afrag", G.ab, KN_BUF_LOCAL, tm * KN_MMA_A_REGS);
  v.bf = kn_buffer_new(ec, "bfrag", G.ab, KN_BUF_LOCAL, tn * KN_MMA_B_REGS);

  int n_acc = (int)(tm * tn * KN_MMA_C_REGS);
  kn_stmt **zero = KN_NEW_ARRAY(ec->arena, kn_stmt *, (size_t)n_acc);
  for (int i = 0; i < n_acc; i++) zero[i] = kn_s_store(ec, v.acc, I(&G, i), kn_e_float(ec, KN_DT_F32, 0));
  kn_stmt *thread_body[] = {kn_s_seq(ec, zero, n_acc), k_loop(&G, &v, tm, tn), epilogue(&G, &v, out_buf, tm, tn)};
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
  *schedule = kn_arena_printf(ec->arena,
                              "tensorize(mma_m16n8k16.%s, block=%lldx%lldx%d, warps=%dx%d, stages=%d, a=%s, b=%s%s, "
                              "m_axes=%d, batch_axes=%d, k=%lld)",
                              kn_dtype_name(G.ab), (long long)G.bm, (long long)G.bn, BK, WARPS_M, WARPS_N, STAGES,
                              G.a_async ? "cp.async" : "copy", G.b_async ? "cp.async" : "copy", G.b_nk ? " n-major" : "",
                              G.n_m, G.n_b, (long long)G.K);
  return kn_simplify_stmt(ec, body);
}
