/* space.c — the candidate schedules of a task, generated from rules.
 *
 * Contractions (conv, matmul; the last two output axes are rows x columns):
 * column factor (multiples of the target's vector lanes, and half a
 * vector) x row factor (accumulators within the register file) x loop
 * order (column tiles outermost or not) x unrolled or serial row tile x
 * parallel depth (how many of the outer loops fuse into the parallel loop)
 * x, when the innermost reduction axis is short (a depthwise conv's kw),
 * that axis unrolled or not (unroll_reduction).
 * Everything else: vector width of the innermost axis x parallel depth,
 * x an unrolled split of the next axis (no reductions), or x the lanes of a
 * vectorized row reduction (softmax, layer norm).
 * Dense convolutions get the same tiles over their pixels too (fuse_spatial:
 * oh and ow as one axis; oh x ow tiles measured slower on resnet50's 7x7
 * layers, where either count of 7 leaves a ragged tile).
 * Contractions whose output can hold partial sums also get blocked variants
 * (split_reduction): the default tile, row tiles grouped into row blocks,
 * the last reduction axis cut into blocks swept by the row tiles of a block,
 * and the same in GotoBLAS order with the block's activations packed.
 * Every candidate is validated (kn_at_sched_validate) and duplicates are
 * dropped; the rule-based default comes first. */
#include <string.h>

#include "autotune/autotune.h"

typedef struct space {
  const kn_at_task_shape *ts;
  kn_arena *A;
  kn_schedule *items;
  const char **traces; /* canonical text of each item, to drop duplicates */
  int n, cap;
} space;

static void add(space *sp, const kn_schedule *s) {
  kn_diag d;
  kn_diag_init(&d);
  int rc = kn_at_sched_validate(s, sp->ts, &d);
  kn_diag_free(&d);
  if (rc < 0) return;
  char trace[4096];
  kn_at_trace_write(s, trace, sizeof trace);
  for (int i = 0; i < sp->n; i++)
    if (!strcmp(sp->traces[i], trace)) return;
  if (sp->n == sp->cap) {
    int cap = sp->cap ? 2 * sp->cap : 64;
    kn_schedule *grown = KN_NEW_ARRAY(sp->A, kn_schedule, cap);
    const char **traces = KN_NEW_ARRAY(sp->A, const char *, cap);
    if (sp->n) {
      memcpy(grown, sp->items, sizeof(kn_schedule) * (size_t)sp->n);
      memcpy(traces, sp->traces, sizeof(char *) * (size_t)sp->n);
    }
    sp->items = grown;
    sp->traces = traces;
    sp->cap = cap;
  }
  sp->traces[sp->n] = kn_arena_strdup(sp->A, trace);
  sp->items[sp->n++] = *s;
}

static void loop(kn_schedule *s, int axis, int piece, kn_for_kind kind) {
  s->loops[s->n_loops++] = (kn_sched_loop){axis, piece, kind};
}

static int64_t default_factor(const kn_schedule *s, int axis) {
  return s->n_factors[axis] ? s->factors[axis][0] : 1;
}

static bool in_list(const int64_t *v, int n, int64_t x) {
  for (int i = 0; i < n; i++)
    if (v[i] == x) return true;
  return false;
}

/* Register tiles over the last two axes; with `fuse`, over the pixels of a
 * dense conv viewed as [n, 1, oh*ow, c] (fuse_spatial, implicit GEMM). */
static void contraction(space *sp, const kn_target *t, int lanes, bool fuse) {
  const kn_at_task_shape *ts = sp->ts, *axes = ts;
  kn_schedule probe = {.fuse_spatial = fuse};
  kn_at_task_shape buf;
  if (fuse && !(axes = kn_at_task_axes(&probe, ts, &buf))) return;
  int rank = ts->rank, r = rank - 2, c = rank - 1;
  int64_t rows = axes->extent[r], cols = axes->extent[c];
  int64_t cfs[8], rfs[24];
  int n_cf = 0, n_rf = 0;
  /* the whole row when it is not a multiple of the vector: 24 columns as
   * one 16 + 8 tile (finalize.c), two FMAs per row where 8-wide tiles take
   * three */
  int64_t whole = cols > lanes && cols % lanes != 0 ? cols : 0;
  int64_t cand_cf[] = {lanes / 2, lanes, 2 * (int64_t)lanes, 3 * (int64_t)lanes, 4 * (int64_t)lanes,
                       default_factor(&ts->dflt, c), whole};
  for (int i = 0; i < 7; i++) {
    int64_t f = cand_cf[i];
    if ((f >= 4 && f <= cols && f <= 64) || f == 1)
      if (!in_list(cfs, n_cf, f)) cfs[n_cf++] = f;
  }
  if (n_cf == 0) cfs[n_cf++] = 1;
  /* a short innermost reduction (a depthwise conv's kw) is also unrolled */
  int nred = ts->hints.n_reduce;
  int64_t inner = nred >= 1 ? ts->hints.reduce_extent[nred - 1] : 0;
  bool small_taps = inner >= 2 && inner <= KN_SCHED_MAX_UNROLL_AXIS;
  int64_t cand_rf[] = {1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 28, default_factor(&ts->dflt, r)};
  for (int i = 0; i < 14; i++)
    if (cand_rf[i] <= rows && !in_list(rfs, n_rf, cand_rf[i])) rfs[n_rf++] = cand_rf[i];
  int n_outer = rank; /* piece 0 of every axis */
  int pars[4] = {n_outer, n_outer - 1, 1, 0};
  for (int ci = 0; ci < n_cf; ci++)
    for (int ri = 0; ri < n_rf; ri++) {
      int64_t cf = cfs[ci], rf = rfs[ri], vecs = kn_sched_vector_regs(cf, lanes);
      bool is_default_tile = rf == default_factor(&ts->dflt, r) && cf == default_factor(&ts->dflt, c) &&
                             fuse == ts->dflt.fuse_spatial;
      if (rf * vecs > t->vector_regs && !is_default_tile) continue; /* accumulators would spill */
      for (int cols_outer = 0; cols_outer < 2; cols_outer++)
        for (int unroll = 0; unroll < 2; unroll++) {
          if (rf == 1 && unroll) continue;
          /* pixel tiles: unrolled rows, the outer loops parallel (the rest
           * is left to mutation) */
          if (fuse && rf > 1 && !unroll) continue;
          for (int pi = 0; pi < (fuse ? 2 : 4); pi++) {
            if (pars[pi] < 0 || (pi > 0 && pars[pi] == pars[pi - 1])) continue;
            kn_schedule s;
            memset(&s, 0, sizeof s);
            s.n_axes = rank;
            s.fuse_spatial = fuse;
            if (rf > 1) s.factors[r][s.n_factors[r]++] = rf;
            if (cf > 1) s.factors[c][s.n_factors[c]++] = cf;
            if (cols_outer) loop(&s, c, 0, KN_FOR_SERIAL);
            for (int a = 0; a < r; a++) loop(&s, a, 0, KN_FOR_SERIAL);
            loop(&s, r, 0, KN_FOR_SERIAL);
            if (!cols_outer) loop(&s, c, 0, KN_FOR_SERIAL);
            s.n_parallel = pars[pi];
            s.attach = s.n_loops;
            if (rf > 1) loop(&s, r, 1, unroll ? KN_FOR_UNROLLED : KN_FOR_SERIAL);
            if (cf > 1) loop(&s, c, 1, cf >= 4 ? KN_FOR_VECTORIZED : KN_FOR_UNROLLED);
            add(sp, &s);
            if (small_taps) {
              s.unroll_reduce = 1;
              add(sp, &s);
            }
          }
        }
    }
}

static int64_t divisor_at_most(int64_t n, int64_t cap) {
  for (int64_t f = cap < n ? cap : n; f > 1; f--)
    if (n % f == 0) return f;
  return 1;
}

/* Reduction blocking around the default tile (made to divide the rows; a
 * split with overlap cannot be blocked): block factor x row block x
 * columns outermost or not. */
static void blocked(space *sp) {
  const kn_at_task_shape *ts = sp->ts;
  const kn_sched_hints *h = &ts->hints;
  int rank = ts->rank, r = rank - 2, c = rank - 1;
  int64_t rows = ts->extent[r], cols = ts->extent[c];
  if (!h->rsplit_ok || h->n_reduce < 1 || h->n_reduce > KN_MAX_RANK) return;
  int ax = h->n_reduce - 1;
  int64_t ext = h->reduce_extent[ax];
  int64_t rf = divisor_at_most(rows, default_factor(&ts->dflt, r)), cf = default_factor(&ts->dflt, c);
  if (ext < 2 || rf < 2 || cols % cf != 0) return;
  int64_t kfs[] = {ext / 3, ext / 2, 32, 64, 128, 256, 512}, rbs[] = {1, 4, 16};
  for (int ki = 0; ki < 7; ki++)
    for (int bi = 0; bi < 3; bi++)
      for (int cols_outer = 0; cols_outer < 2; cols_outer++) {
        int64_t kf = kfs[ki], rb = rbs[bi];
        if (kf < 1 || kf >= ext || (rows / rf) % rb != 0) continue;
        kn_schedule s;
        memset(&s, 0, sizeof s);
        s.n_axes = rank;
        if (rb > 1) s.factors[r][s.n_factors[r]++] = rb;
        if (rf > 1) s.factors[r][s.n_factors[r]++] = rf;
        if (cf > 1) s.factors[c][s.n_factors[c]++] = cf;
        if (cols_outer) loop(&s, c, 0, KN_FOR_SERIAL);
        for (int a = 0; a < r; a++) loop(&s, a, 0, KN_FOR_SERIAL);
        loop(&s, r, 0, KN_FOR_SERIAL);
        if (!cols_outer) loop(&s, c, 0, KN_FOR_SERIAL);
        s.n_parallel = s.n_loops;
        s.rsplit_factor = kf;
        s.rsplit_axis = ax;
        s.rsplit_depth = s.n_loops;
        if (rb > 1) loop(&s, r, 1, KN_FOR_SERIAL);
        s.attach = s.n_loops;
        if (rf > 1) loop(&s, r, s.n_factors[r], KN_FOR_UNROLLED);
        if (cf > 1) loop(&s, c, 1, cf >= 4 ? KN_FOR_VECTORIZED : KN_FOR_UNROLLED);
        add(sp, &s);
        /* GotoBLAS order: row blocks in parallel; per reduction block the
         * block's activations are packed once, then every column tile
         * sweeps the row tiles of the block */
        if (cols_outer || cf < 2) continue;
        kn_schedule g = s;
        g.n_loops = 0;
        for (int a = 0; a < r; a++) loop(&g, a, 0, KN_FOR_SERIAL);
        loop(&g, r, 0, KN_FOR_SERIAL);
        g.n_parallel = g.rsplit_depth = g.n_loops;
        g.rsplit_pack = true;
        loop(&g, c, 0, KN_FOR_SERIAL);
        if (rb > 1) loop(&g, r, 1, KN_FOR_SERIAL);
        g.attach = g.n_loops;
        loop(&g, r, g.n_factors[r], KN_FOR_UNROLLED);
        loop(&g, c, 1, cf >= 4 ? KN_FOR_VECTORIZED : KN_FOR_UNROLLED);
        add(sp, &g);
      }
}

static void generic(space *sp, int lanes) {
  const kn_at_task_shape *ts = sp->ts;
  int rank = ts->rank, last = rank - 1;
  int64_t e = ts->extent[last];
  int64_t vfs[8];
  int n_vf = 0;
  int64_t cand_vf[] = {1, 4, 8, lanes, 2 * (int64_t)lanes, 4 * (int64_t)lanes, default_factor(&ts->dflt, last)};
  for (int i = 0; i < 7; i++) {
    int64_t f = cand_vf[i];
    if (f == 1 || (e >= f && f <= 64 && f >= 4))
      if (!in_list(vfs, n_vf, f)) vfs[n_vf++] = f;
  }
  bool stages_keep_last = (ts->hints.stage_axes >> last) & 1u;
  bool row_reduce = ts->hints.has_stages && !stages_keep_last;
  int64_t lanes_opts[4] = {0, lanes / 2 >= 4 ? lanes / 2 : 0, lanes, 2 * (int64_t)lanes};
  for (int vi = 0; vi < n_vf; vi++)
    for (int unroll = 0; unroll <= 4; unroll = unroll ? unroll * 2 : 2) {
      if (unroll && (ts->hints.has_stages || rank < 2 || ts->extent[rank - 2] < unroll)) continue;
      int max_par = row_reduce ? rank - 1 : rank;
      for (int par = max_par; par >= 0; par--)
        for (int li = 0; li < (row_reduce ? 4 : 1); li++) {
          if (li > 0 && (lanes_opts[li] == 0 || lanes_opts[li] == lanes_opts[li - 1])) continue;
          kn_schedule s;
          memset(&s, 0, sizeof s);
          s.n_axes = rank;
          int64_t vf = vfs[vi];
          if (unroll) s.factors[rank - 2][s.n_factors[rank - 2]++] = unroll;
          if (vf > 1) s.factors[last][s.n_factors[last]++] = vf;
          for (int a = 0; a < rank; a++) loop(&s, a, 0, KN_FOR_SERIAL);
          s.n_parallel = par;
          s.attach = row_reduce ? rank - 1 : rank;
          s.reduce_lanes = row_reduce ? (int)lanes_opts[li] : 0;
          if (unroll) loop(&s, rank - 2, 1, KN_FOR_UNROLLED);
          if (vf > 1) loop(&s, last, 1, KN_FOR_VECTORIZED);
          add(sp, &s);
        }
    }
  /* the Winograd input transform: a tile's elements unrolled inside each
   * vector of channels (rules.c), over each vector width and parallel depth */
  int ea = ts->hints.elem_axis;
  if (ea >= 0 && ea < last && !ts->hints.has_stages && ts->extent[ea] > 0 && ts->extent[ea] <= 64)
    for (int vi = 0; vi < n_vf; vi++)
      for (int par = rank - 2; par >= 1 && vfs[vi] > 1; par--) {
        kn_schedule s;
        kn_sched_elem_inner(&s, rank, ea, vfs[vi], par);
        add(sp, &s);
      }
}

int kn_at_space_generate(const kn_at_task_shape *ts, const kn_target *t, kn_arena *A, kn_schedule **out) {
  space sp = {.ts = ts, .A = A};
  add(&sp, &ts->dflt);
  int lanes = kn_target_lanes(t, ts->dtype != KN_DT_INVALID ? ts->dtype : KN_DT_F32);
  if (lanes < 1) lanes = 4;
  if (ts->rank >= 2 && ts->hints.is_contraction && ts->extent[ts->rank - 1] > 0 && ts->extent[ts->rank - 2] > 0) {
    contraction(&sp, t, lanes, false);
    if (kn_sched_rows_fuse_ok(&ts->hints) && ts->rank >= 3 && ts->extent[ts->rank - 3] > 1) contraction(&sp, t, lanes, true);
    blocked(&sp);
  } else if (ts->rank >= 1 && ts->extent[ts->rank - 1] > 0)
    generic(&sp, lanes);
  *out = sp.items;
  return sp.n;
}
