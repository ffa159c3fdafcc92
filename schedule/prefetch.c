/* prefetch.c — software prefetch of a contraction's streamed operand.
 *
 * In a conv or matmul tile the operand read as a vector (the weights) is
 * laid out one column tile after the other, and each tile's slice is read
 * by every row tile ("pass") of the column tile. In a batched matmul with
 * constant matrices (Winograd's GEMM: one matrix per tile element) the
 * column tiles run through the matrices too, in the order of the loops
 * that pick them; the "next tile" is the next in that order. Inside a
 * model the slice comes from memory, not cache (the other layers evicted
 * it), and the first pass of each column tile reads it at the FMA rate,
 * more than memory delivers: on resnet50's 7x7 layers a kernel with cold
 * weights ran much slower than the same kernel timed warm
 * (docs/architecture.md, "Prefetch hints").
 *
 * Two hints, issued in the innermost reduction loop:
 * - next tile, into L2: spread over all passes of the current column tile,
 *   iteration (pass j, reduction step k) prefetches line
 *   ((j * E + k) * q + i) * lines / (R * E * q) of the next tile's slice, so
 *   the slice arrives at a rate memory sustains, before it is needed;
 * - stream, into L1: the current slice ~STREAM_AHEAD_BYTES ahead of the
 *   reduction step, on every pass (only when the slice is read in address
 *   order; the hints of consecutive steps are at most a line apart, so they
 *   touch every line of it).
 * Only where it pays: at most MAX_ROWS output rows per column tile (a
 * slice reused by more rows is cold for a small share of its passes) and
 * an operand of at least MIN_OPERAND_BYTES (a smaller one stays in L2).
 * Prefetches never change a value; each hint is kept only when its largest
 * index is inside the operand's buffer (the last tile prefetches itself;
 * the L2 hint covers a tile's footprint, not its stride; the interpreter
 * checks every index). */
#include "ir/loop/simplify.h"
#include "schedule/schedule.h"

#define LINE_BYTES 64
#define MIN_SLICE_BYTES 4096 /* smaller slices: the hardware prefetcher suffices */
#define MIN_OPERAND_BYTES (256 << 10) /* smaller operands stay in L2 between passes */
#define STREAM_AHEAD_BYTES 2048
#define MAX_PER_STEP 4
/* more output rows per column tile reuse its slice enough that only the
 * first pass is cold, and the hints' instructions cost more than they save
 * (resnet50's 14x14 and 28x28 layers ran slower with them) */
#define MAX_ROWS 128

/* Loops of a nest, outermost first, with their extents. */
typedef struct {
  int n;
  kn_var *var[KN_SCHED_MAX_LOOPS + 1];
  int64_t ext[KN_SCHED_MAX_LOOPS + 1];
} loops;

/* The first parameter load in e indexed by the vector lane and the
 * reduction, or NULL. */
static const kn_expr *find(const kn_expr *e, const kn_prefetch_nest *n) {
  switch (e->kind) {
  case KN_E_INT:
  case KN_E_FLOAT:
  case KN_E_VAR:
  case KN_E_REDUCE: return NULL;
  case KN_E_LOAD: {
    if (!e->u.load.buffer || e->u.load.buffer->kind != KN_BUF_PARAM) return NULL;
    bool red = false;
    for (int i = 0; i < n->n_red; i++) red |= kn_e_uses_var(e->u.load.index, n->red[i]);
    return red && kn_e_uses_var(e->u.load.index, n->lane) ? e : NULL;
  }
  case KN_E_NOT:
  case KN_E_CAST:
  case KN_E_BROADCAST: return find(e->u.un.a, n);
  case KN_E_RAMP: return NULL;
  case KN_E_SELECT: {
    const kn_expr *r = find(e->u.sel.cond, n);
    if (!r) r = find(e->u.sel.t, n);
    return r ? r : find(e->u.sel.f, n);
  }
  case KN_E_CALL:
    for (int i = 0; i < e->u.call.n; i++) {
      const kn_expr *r = find(e->u.call.args[i], n);
      if (r) return r;
    }
    return NULL;
  default: {
    const kn_expr *r = find(e->u.bin.a, n);
    return r ? r : find(e->u.bin.b, n);
  }
  }
}

/* ix with the column sequence's vars = sv[] (all 0 when sv is NULL),
 * reduction var r = rv[r] (or 0), tile vars 0 / their last value; false
 * unless that is a constant (ix reads no other var). */
static bool value_at(kn_expr_ctx *c, const kn_prefetch_nest *n, const loops *q, const kn_expr *ix, const int64_t *sv,
                     const int64_t *rv, bool tile_last, int64_t *out) {
  kn_expr *e = (kn_expr *)ix;
  for (int i = 0; i < q->n; i++) e = kn_e_substitute(c, e, q->var[i], kn_e_int(c, sv ? sv[i] : 0));
  for (int i = 0; i < n->n_red; i++) e = kn_e_substitute(c, e, n->red[i], kn_e_int(c, rv ? rv[i] : 0));
  for (int i = 0; i < n->n_tile; i++) e = kn_e_substitute(c, e, n->tile[i], kn_e_int(c, tile_last ? n->tile_ext[i] - 1 : 0));
  return kn_e_is_const_int(kn_simplify(c, e), out);
}

static kn_expr *mixed_radix(kn_expr_ctx *c, kn_var *const *vars, const int64_t *ext, int n) {
  kn_expr *x = kn_e_int(c, 0);
  for (int i = 0; i < n; i++) x = kn_e_add(c, kn_e_mul(c, x, kn_e_int(c, ext[i])), kn_e_var(c, vars[i]));
  return x;
}

/* The column tiles in the order the nest visits them: the loops that
 * change the operand, outermost first (the column loop; outer loops and
 * passes over a batched matmul's matrices, such as Winograd's transformed
 * weights), before the passes that reuse a tile's slice. The outer loops
 * that do not change it repeat the sequence, or the part of it inside
 * them: *revisits is how often each tile comes back that way (the hints
 * cover the first time). */
static bool column_sequence(const kn_prefetch_nest *n, const kn_expr *ix, loops *q, loops *r, int64_t *revisits) {
  q->n = r->n = 0;
  *revisits = 1;
  for (int i = 0; i < n->n_outer; i++)
    if (kn_e_uses_var(ix, n->outer[i])) {
      if (n->outer_ext[i] < 1) return false; /* a symbolic extent */
      q->var[q->n] = n->outer[i], q->ext[q->n++] = n->outer_ext[i];
    } else if (q->n) {
      *revisits *= n->outer_ext[i] > 0 ? n->outer_ext[i] : 1;
    }
  q->var[q->n] = n->col, q->ext[q->n++] = n->n_cols;
  for (int i = 0; i < n->n_pass; i++) {
    if (!kn_e_uses_var(ix, n->pass[i])) {
      r->var[r->n] = n->pass[i], r->ext[r->n++] = n->pass_ext[i];
      continue;
    }
    if (r->n) return false; /* a reused slice would come back after others */
    q->var[q->n] = n->pass[i], q->ext[q->n++] = n->pass_ext[i];
  }
  for (int i = 0; i < n->n_other; i++)
    if (kn_e_uses_var(ix, n->other[i])) return false;
  return true;
}

/* The start of column tile t (clamped to the last) of the sequence q whose
 * vars step the operand by stride[]: t's digits in q's mixed radix. */
static kn_expr *tile_start(kn_expr_ctx *c, const loops *q, const int64_t *stride, int64_t v00, kn_expr *t) {
  kn_expr *at = kn_e_int(c, v00);
  int64_t inner = 1;
  for (int i = q->n - 1; i >= 0; i--) {
    if (q->ext[i] == 1) continue;
    kn_expr *d = inner > 1 ? kn_e_div(c, t, kn_e_int(c, inner)) : t;
    if (i > 0) d = kn_e_mod(c, d, kn_e_int(c, q->ext[i]));
    at = kn_e_add(c, at, kn_e_mul(c, d, kn_e_int(c, stride[i])));
    inner *= q->ext[i];
  }
  return at;
}

kn_stmt *kn_sched_prefetch(kn_expr_ctx *c, const kn_expr *src, const kn_prefetch_nest *n) {
  KN_ASSERT(n->n_red <= 2 * KN_MAX_RANK, "prefetch nest with more reduction loops than a nest has");
  if (!n->col || !n->lane || n->n_red < 1) return NULL;
  const kn_expr *load = find(src, n);
  if (!load) return NULL;
  kn_buffer *buf = load->u.load.buffer;
  const kn_expr *ix = load->u.load.index;
  loops cols, reused;
  int64_t rows; /* output rows that read each tile's slice */
  if (!column_sequence(n, ix, &cols, &reused, &rows)) return NULL;
  int64_t esize = kn_dtype_size(buf->dtype), v00, vmax, vlast, E = 1, R = 1, n_cols = 1, S = 0;
  if (esize < 1 || LINE_BYTES % esize || buf->size <= 0) return NULL;
  int64_t rmax[2 * KN_MAX_RANK], tstride[KN_SCHED_MAX_LOOPS + 1] = {0}, slast[KN_SCHED_MAX_LOOPS + 1];
  for (int i = 0; i < n->n_red; i++) rmax[i] = n->red_ext[i] - 1, E *= n->red_ext[i];
  for (int i = 0; i < reused.n; i++) R *= reused.ext[i];
  if (!value_at(c, n, &cols, ix, NULL, NULL, false, &v00) || !value_at(c, n, &cols, ix, NULL, rmax, true, &vmax)) return NULL;
  /* tile (d_0, d_1, ...) reads [v00 + sum d_i * tstride_i, ... + F); S,
   * the smallest stride, is at least the footprint F */
  for (int i = 0; i < cols.n; i++) {
    int64_t sv[KN_SCHED_MAX_LOOPS + 1] = {0}, v;
    slast[i] = cols.ext[i] - 1;
    if (cols.ext[i] == 1) continue;
    sv[i] = 1;
    if (!value_at(c, n, &cols, ix, sv, NULL, false, &v) || v - v00 < 1) return NULL;
    tstride[i] = v - v00, n_cols *= cols.ext[i];
    S = S && S < tstride[i] ? S : tstride[i];
  }
  int64_t last_tile = v00; /* a hint's index is last_tile + offset at most */
  for (int i = 0; i < cols.n; i++) last_tile += slast[i] * tstride[i];
  if (!value_at(c, n, &cols, ix, slast, NULL, false, &vlast) || vlast != last_tile) return NULL;
  int64_t F = vmax - v00 + 1;
  if (n_cols < 2 || v00 < 0 || F < 1 || F > S || S * esize < MIN_SLICE_BYTES || n_cols * S * esize < MIN_OPERAND_BYTES)
    return NULL;
  kn_stmt *parts[2 * MAX_PER_STEP];
  int np = 0;
  kn_expr *col = mixed_radix(c, cols.var, cols.ext, cols.n);
  kn_expr *k = mixed_radix(c, n->red, n->red_ext, n->n_red), *j = mixed_radix(c, reused.var, reused.ext, reused.n);
  int64_t epl = LINE_BYTES / esize, lines = (F - 1) / epl + 1;
  /* next tile: q hints per step cover `lines` over R * E steps */
  int64_t q = (lines + R * E - 1) / (R * E);
  rows *= R;
  for (int i = 0; i < n->n_tile; i++)
    if (!kn_e_uses_var(ix, n->tile[i])) rows *= n->tile_ext[i];
  if (rows > MAX_ROWS) return NULL;
  if (q <= MAX_PER_STEP && last_tile + (lines - 1) * epl < buf->size) {
    kn_expr *next = kn_e_min(c, kn_e_add(c, col, kn_e_int(c, 1)), kn_e_int(c, n_cols - 1));
    kn_expr *base = tile_start(c, &cols, tstride, v00, next);
    kn_expr *step = kn_e_add(c, kn_e_mul(c, j, kn_e_int(c, E)), k);
    for (int64_t i = 0; i < q; i++) {
      kn_expr *slot = kn_e_add(c, kn_e_mul(c, step, kn_e_int(c, q)), kn_e_int(c, i));
      kn_expr *line = kn_e_div(c, kn_e_mul(c, slot, kn_e_int(c, lines)), kn_e_int(c, R * E * q));
      parts[np++] = kn_s_prefetch(c, buf, kn_e_add(c, base, kn_e_mul(c, line, kn_e_int(c, epl))), 2);
    }
  }
  /* stream: only when reduction step k reads [base + k*W, base + (k+1)*W) */
  int64_t W = S / E, stride = W;
  bool in_order = S % E == 0 && W >= 1;
  for (int i = n->n_red - 1; in_order && i >= 0; i--) {
    int64_t rv[2 * KN_MAX_RANK] = {0}, v;
    rv[i] = 1;
    in_order = n->red_ext[i] == 1 || (value_at(c, n, &cols, ix, NULL, rv, false, &v) && v - v00 == stride);
    stride *= n->red_ext[i];
  }
  int64_t per_step = (W * esize + LINE_BYTES - 1) / LINE_BYTES;
  if (in_order && per_step <= MAX_PER_STEP && last_tile + (E - 1) * W + (per_step - 1) * epl < buf->size) {
    int64_t dist = STREAM_AHEAD_BYTES / (W * esize) + 1;
    kn_expr *ahead = kn_e_min(c, kn_e_add(c, k, kn_e_int(c, dist)), kn_e_int(c, E - 1));
    kn_expr *at = kn_e_int(c, v00); /* the current tile's start */
    for (int i = 0; i < cols.n; i++)
      if (cols.ext[i] > 1) at = kn_e_add(c, at, kn_e_mul(c, kn_e_var(c, cols.var[i]), kn_e_int(c, tstride[i])));
    kn_expr *base = kn_e_add(c, at, kn_e_mul(c, ahead, kn_e_int(c, W)));
    for (int64_t i = 0; i < per_step; i++) parts[np++] = kn_s_prefetch(c, buf, kn_e_add(c, base, kn_e_int(c, i * epl)), 1);
  }
  return np ? kn_s_seq(c, parts, np) : NULL;
}
