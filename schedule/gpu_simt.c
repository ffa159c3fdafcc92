/* gpu_simt.c — the GPU's default schedule for the kernels the templates
 * (gpu_mma.c, gpu_rows.c) do not take: one GPU thread per output element
 * (or per row for a reduction over the last axis), blocks of threads over
 * the fused parallel loop.
 *
 *   kn_sched_default_gpu  the schedule: every output axis in one fused
 *                         parallel loop, reduction stages at the element;
 *                         a kernel whose stages reduce over the last axis
 *                         (softmax, layer norm) parallel over rows with the
 *                         stages at the row, so a row's statistics are
 *                         computed once, not once per element
 *   kn_gpu_bind           the lowered, finalized nest -> loop.h's GPU shape:
 *                         the parallel loop p over [0, E) becomes
 *                           block.x b in [0, ceil(E / T)):
 *                             thread.x t in [0, T):
 *                               if b * T + t < E: body[p := b * T + t]
 *                         Lets and allocations above the loop move inside
 *                         it (they do not depend on p: each thread gets its
 *                         own). A nest without a parallel loop (a rank-0
 *                         output) runs on one thread.
 *
 * The schedule is the CPU's primitives without vectors: a GPU thread
 * computes scalars (kn_target_lanes is 1 for KN_ARCH_CUDA). */
#include "schedule/gpu.h"

#include <string.h>

void kn_sched_default_gpu(const kn_te_tensor *out, const kn_sched_hints *h, kn_schedule *s) {
  memset(s, 0, sizeof *s);
  int rank = out->rank;
  s->n_axes = rank;
  for (int a = 0; a < rank; a++) s->loops[s->n_loops++] = (kn_sched_loop){a, 0, KN_FOR_SERIAL};
  bool stages_keep_last = rank > 0 && ((h->stage_axes >> (rank - 1)) & 1u);
  int depth = h->has_stages && !stages_keep_last && rank >= 2 ? rank - 1 : rank;
  s->n_parallel = depth;
  s->attach = depth;
}

/* Threads per block for a parallel loop of extent e (0: symbolic): 256, or
 * fewer (a multiple of 32) when the whole loop is smaller. */
static int64_t block_threads(int64_t e) {
  if (e <= 0 || e >= 256) return 256;
  return (e + 31) / 32 * 32;
}

typedef struct wrapper {
  const kn_stmt *s; /* a LET or ALLOC above the parallel loop */
} wrapper;

static kn_stmt *rewrap(kn_expr_ctx *c, const wrapper *w, int n, kn_stmt *body) {
  for (int i = n - 1; i >= 0; i--)
    body = w[i].s->kind == KN_S_LET ? kn_s_let(c, w[i].s->u.let.var, w[i].s->u.let.value, body)
                                    : kn_s_alloc(c, w[i].s->u.alloc.buffer, body);
  return body;
}

kn_stmt *kn_gpu_bind(kn_expr_ctx *c, kn_stmt *body) {
  wrapper w[64];
  int n = 0;
  kn_stmt *s = body;
  while (s && (s->kind == KN_S_LET || s->kind == KN_S_ALLOC) && n < 64) {
    w[n++].s = s;
    s = s->kind == KN_S_LET ? s->u.let.body : s->u.alloc.body;
  }
  kn_var *bx = kn_var_new(c, "bx"), *tx = kn_var_new(c, "tx");
  if (!s || s->kind != KN_S_FOR || s->u.loop.kind != KN_FOR_PARALLEL) {
    kn_stmt *one = kn_s_bind(c, tx, kn_e_int(c, 1), KN_FOR_THREAD, 0, body);
    return kn_s_bind(c, bx, kn_e_int(c, 1), KN_FOR_BLOCK, 0, one);
  }
  kn_expr *extent = s->u.loop.extent;
  int64_t e = 0;
  if (!kn_e_is_const_int(extent, &e)) e = 0;
  int64_t t = block_threads(e);
  kn_expr *T = kn_e_int(c, t);
  kn_expr *p = kn_e_add(c, kn_e_add(c, kn_e_mul(c, kn_e_var(c, bx), T), kn_e_var(c, tx)), s->u.loop.min);
  kn_stmt *inner = kn_stmt_substitute(c, rewrap(c, w, n, s->u.loop.body), s->u.loop.var, p);
  if (e <= 0 || e % t != 0)
    inner = kn_s_if(c, kn_e_bin(c, KN_E_LT, kn_e_sub(c, p, s->u.loop.min), extent), inner, NULL);
  kn_expr *blocks = kn_e_div(c, kn_e_add(c, extent, kn_e_int(c, t - 1)), T);
  kn_stmt *threads = kn_s_bind(c, tx, T, KN_FOR_THREAD, 0, inner);
  return kn_simplify_stmt(c, kn_s_bind(c, bx, kn_simplify(c, blocks), KN_FOR_BLOCK, 0, threads));
}
