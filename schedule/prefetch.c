/* prefetch.c — software prefetch of a contraction's streamed operand.
 *
 * In a conv or matmul tile the operand read as a vector (the weights) is
 * laid out one column tile after the other, and each tile's slice is read
 * by every row tile ("pass") of the column tile. Inside a model the slice
 * comes from memory, not cache (the other layers evicted it), and the first
 * pass of each column tile reads it at the FMA rate, more than memory
 * delivers: measured on resnet50's 7x7 layers, cold weights made a kernel
 * ~1.5x slower than the same kernel timed warm.
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
#include "../ir/simplify.h"
#include "schedule.h"

#define LINE_BYTES 64
#define MIN_SLICE_BYTES 4096 /* smaller slices: the hardware prefetcher suffices */
#define MIN_OPERAND_BYTES (256 << 10) /* smaller operands stay in L2 between passes */
#define STREAM_AHEAD_BYTES 2048
#define MAX_PER_STEP 4
/* more output rows per column tile reuse its slice enough that only the
 * first pass is cold, and the hints' instructions cost more than they save
 * (measured: resnet50's 14x14 and 28x28 layers up to 10% slower with them) */
#define MAX_ROWS 128

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

/* ix with col = cv, reduction var r = rv[r] (or 0), tile vars 0 / their
 * last value; false unless that is a constant (ix reads no other var). */
static bool value_at(kn_expr_ctx *c, const kn_prefetch_nest *n, const kn_expr *ix, int64_t cv, const int64_t *rv,
                     bool tile_last, int64_t *out) {
  kn_expr *e = (kn_expr *)ix;
  e = kn_e_substitute(c, e, n->col, kn_e_int(c, cv));
  for (int i = 0; i < n->n_red; i++) e = kn_e_substitute(c, e, n->red[i], kn_e_int(c, rv ? rv[i] : 0));
  for (int i = 0; i < n->n_tile; i++) e = kn_e_substitute(c, e, n->tile[i], kn_e_int(c, tile_last ? n->tile_ext[i] - 1 : 0));
  return kn_e_is_const_int(kn_simplify(c, e), out);
}

static kn_expr *mixed_radix(kn_expr_ctx *c, kn_var *const *vars, const int64_t *ext, int n) {
  kn_expr *x = kn_e_int(c, 0);
  for (int i = 0; i < n; i++) x = kn_e_add(c, kn_e_mul(c, x, kn_e_int(c, ext[i])), kn_e_var(c, vars[i]));
  return x;
}

kn_stmt *kn_sched_prefetch(kn_expr_ctx *c, const kn_expr *src, const kn_prefetch_nest *n) {
  KN_ASSERT(n->n_red <= 2 * KN_MAX_RANK, "prefetch nest with more reduction loops than a nest has");
  if (!n->col || !n->lane || n->n_red < 1 || n->n_cols < 2) return NULL;
  const kn_expr *load = find(src, n);
  if (!load) return NULL;
  kn_buffer *buf = load->u.load.buffer;
  const kn_expr *ix = load->u.load.index;
  for (int i = 0; i < n->n_pass; i++)
    if (kn_e_uses_var(ix, n->pass[i])) return NULL; /* the operand changes with the pass */
  for (int i = 0; i < n->n_other; i++)
    if (kn_e_uses_var(ix, n->other[i])) return NULL;
  int64_t esize = kn_dtype_size(buf->dtype), v00, v10, vlast, vmax, E = 1, R = 1;
  if (esize < 1 || LINE_BYTES % esize || buf->size <= 0) return NULL;
  int64_t rmax[2 * KN_MAX_RANK];
  for (int i = 0; i < n->n_red; i++) rmax[i] = n->red_ext[i] - 1, E *= n->red_ext[i];
  for (int i = 0; i < n->n_pass; i++) R *= n->pass_ext[i];
  if (!value_at(c, n, ix, 0, NULL, false, &v00) || !value_at(c, n, ix, 1, NULL, false, &v10) ||
      !value_at(c, n, ix, n->n_cols - 1, NULL, false, &vlast) || !value_at(c, n, ix, 0, rmax, true, &vmax))
    return NULL;
  /* column tiles one after the other: tile t reads [v00 + t*S, v00 + t*S + F) */
  int64_t S = v10 - v00, F = vmax - v00 + 1;
  if (S < 1 || v00 < 0 || vlast != v00 + (n->n_cols - 1) * S || F < 1 || F > S || S * esize < MIN_SLICE_BYTES ||
      n->n_cols * S * esize < MIN_OPERAND_BYTES)
    return NULL;
  int64_t last_tile = v00 + (n->n_cols - 1) * S; /* a hint's index is last_tile + offset at most */
  kn_stmt *parts[2 * MAX_PER_STEP];
  int np = 0;
  kn_expr *col = kn_e_var(c, n->col);
  kn_expr *k = mixed_radix(c, n->red, n->red_ext, n->n_red), *j = mixed_radix(c, n->pass, n->pass_ext, n->n_pass);
  int64_t epl = LINE_BYTES / esize, lines = (F - 1) / epl + 1;
  /* next tile: q hints per step cover `lines` over R * E steps */
  int64_t q = (lines + R * E - 1) / (R * E);
  int64_t rows = R;
  for (int i = 0; i < n->n_tile; i++)
    if (!kn_e_uses_var(ix, n->tile[i])) rows *= n->tile_ext[i];
  if (rows > MAX_ROWS) return NULL;
  if (q <= MAX_PER_STEP && last_tile + (lines - 1) * epl < buf->size) {
    kn_expr *next = kn_e_min(c, kn_e_add(c, col, kn_e_int(c, 1)), kn_e_int(c, n->n_cols - 1));
    kn_expr *base = kn_e_add(c, kn_e_int(c, v00), kn_e_mul(c, next, kn_e_int(c, S)));
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
    in_order = n->red_ext[i] == 1 || (value_at(c, n, ix, 0, rv, false, &v) && v - v00 == stride);
    stride *= n->red_ext[i];
  }
  int64_t per_step = (W * esize + LINE_BYTES - 1) / LINE_BYTES;
  if (in_order && per_step <= MAX_PER_STEP && last_tile + (E - 1) * W + (per_step - 1) * epl < buf->size) {
    int64_t dist = STREAM_AHEAD_BYTES / (W * esize) + 1;
    kn_expr *ahead = kn_e_min(c, kn_e_add(c, k, kn_e_int(c, dist)), kn_e_int(c, E - 1));
    kn_expr *base = kn_e_add(c, kn_e_add(c, kn_e_int(c, v00), kn_e_mul(c, col, kn_e_int(c, S))),
                             kn_e_mul(c, ahead, kn_e_int(c, W)));
    for (int64_t i = 0; i < per_step; i++) parts[np++] = kn_s_prefetch(c, buf, kn_e_add(c, base, kn_e_int(c, i * epl)), 1);
  }
  return np ? kn_s_seq(c, parts, np) : NULL;
}
