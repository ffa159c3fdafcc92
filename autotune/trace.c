/* trace.c — schedules as replayable traces, and their validation.
 *
 * A trace is a JSON array of the primitives kn_sched_print prints, in a
 * canonical order (fuse_spatial, splits by axis, reorder, fuse_parallel,
 * compute_at, vectorize_reduction, split_reduction, unroll_reduction, then
 * the loop kinds), so equal schedules give equal text and the text can key
 * a set of measured candidates. Parsing accepts the primitives in any order
 * and checks only their form; whether the schedule fits a kernel is
 * kn_at_sched_validate's job. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "autotune/autotune.h"
#include "autotune/json.h"

static void put(char *buf, size_t cap, size_t *n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t cap, size_t *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + (*n < cap ? *n : cap), *n < cap ? cap - *n : 0, fmt, ap);
  va_end(ap);
  if (k > 0) *n += (size_t)k;
}

void kn_at_trace_write(const kn_schedule *s, char *buf, size_t cap) {
  size_t n = 0;
  bool first = true;
#define SEP() (first ? (first = false, "") : ",")
  put(buf, cap, &n, "[");
  if (s->fuse_spatial) put(buf, cap, &n, "%s{\"p\":\"fuse_spatial\"}", SEP());
  for (int a = 0; a < s->n_axes; a++)
    for (int k = 0; k < s->n_factors[a]; k++)
      put(buf, cap, &n, "%s{\"p\":\"split\",\"axis\":%d,\"factor\":%lld}", SEP(), a, (long long)s->factors[a][k]);
  put(buf, cap, &n, "%s{\"p\":\"reorder\",\"loops\":[", SEP());
  for (int i = 0; i < s->n_loops; i++) put(buf, cap, &n, "%s[%d,%d]", i ? "," : "", s->loops[i].axis, s->loops[i].piece);
  put(buf, cap, &n, "]}");
  if (s->n_parallel) put(buf, cap, &n, ",{\"p\":\"fuse_parallel\",\"loops\":%d}", s->n_parallel);
  put(buf, cap, &n, ",{\"p\":\"compute_at\",\"depth\":%d}", s->attach);
  if (s->reduce_lanes > 1) put(buf, cap, &n, ",{\"p\":\"vectorize_reduction\",\"lanes\":%d}", s->reduce_lanes);
  if (s->rsplit_factor > 0)
    put(buf, cap, &n, ",{\"p\":\"split_reduction\",\"axis\":%d,\"factor\":%lld,\"depth\":%d%s}", s->rsplit_axis,
        (long long)s->rsplit_factor, s->rsplit_depth, s->rsplit_pack ? ",\"pack\":1" : "");
  if (s->unroll_reduce > 0) put(buf, cap, &n, ",{\"p\":\"unroll_reduction\",\"axes\":%d}", s->unroll_reduce);
  for (int i = 0; i < s->n_loops; i++) {
    kn_for_kind k = s->loops[i].kind;
    if (k == KN_FOR_SERIAL) continue;
    const char *name = k == KN_FOR_VECTORIZED ? "vectorize" : k == KN_FOR_UNROLLED ? "unroll" : "parallel";
    put(buf, cap, &n, ",{\"p\":\"%s\",\"loop\":[%d,%d]}", name, s->loops[i].axis, s->loops[i].piece);
  }
  put(buf, cap, &n, "]");
#undef SEP
  KN_ASSERT(n < cap, "trace buffer too small");
}

static bool get_int(const kn_json *o, const char *key, int64_t lo, int64_t hi, int64_t *v) {
  return kn_json_int(kn_json_get(o, key), v) && *v >= lo && *v <= hi;
}

static bool get_pair(const kn_json *p, int *axis, int *piece) {
  int64_t a, k;
  if (!p || p->kind != KN_JSON_ARR || p->n != 2 || !kn_json_int(p->items[0], &a) || !kn_json_int(p->items[1], &k) ||
      a < 0 || a >= KN_MAX_RANK || k < 0 || k > KN_SCHED_MAX_SPLIT)
    return false;
  *axis = (int)a;
  *piece = (int)k;
  return true;
}

int kn_at_trace_from_json(const kn_json *trace, kn_schedule *s, kn_diag *d) {
  memset(s, 0, sizeof *s);
  if (!trace || trace->kind != KN_JSON_ARR) return kn_diag_error(d, "trace: not a JSON array");
  bool have_reorder = false;
  /* kinds are applied after the reorder is known */
  struct { int axis, piece; kn_for_kind kind; } kinds[KN_SCHED_MAX_LOOPS];
  int n_kinds = 0;
  for (int i = 0; i < trace->n; i++) {
    const kn_json *p = trace->items[i], *name = kn_json_get(p, "p");
    if (!name || name->kind != KN_JSON_STR) return kn_diag_error(d, "trace: primitive %d has no \"p\" name", i);
    const char *nm = name->str;
    int64_t v, w;
    if (!strcmp(nm, "split")) {
      if (!get_int(p, "axis", 0, KN_MAX_RANK - 1, &v) || !get_int(p, "factor", 1, 1 << 20, &w))
        return kn_diag_error(d, "trace: split %d wants an axis in [0, %d) and a factor in [1, 2^20]", i, KN_MAX_RANK);
      if (s->n_factors[v] == KN_SCHED_MAX_SPLIT) return kn_diag_error(d, "trace: axis %lld split more than %d times", (long long)v, KN_SCHED_MAX_SPLIT);
      s->factors[v][s->n_factors[v]++] = w;
    } else if (!strcmp(nm, "reorder")) {
      const kn_json *loops = kn_json_get(p, "loops");
      if (have_reorder || !loops || loops->kind != KN_JSON_ARR || loops->n > KN_SCHED_MAX_LOOPS)
        return kn_diag_error(d, "trace: reorder %d wants one list of at most %d [axis, piece] pairs", i, KN_SCHED_MAX_LOOPS);
      have_reorder = true;
      for (int k = 0; k < loops->n; k++) {
        kn_sched_loop *l = &s->loops[s->n_loops++];
        if (!get_pair(loops->items[k], &l->axis, &l->piece)) return kn_diag_error(d, "trace: reorder: bad loop %d", k);
        l->kind = KN_FOR_SERIAL;
        if (l->axis + 1 > s->n_axes) s->n_axes = l->axis + 1;
      }
    } else if (!strcmp(nm, "fuse_spatial")) {
      s->fuse_spatial = true;
    } else if (!strcmp(nm, "fuse_parallel")) {
      if (!get_int(p, "loops", 0, KN_SCHED_MAX_LOOPS, &v)) return kn_diag_error(d, "trace: fuse_parallel: bad loop count");
      s->n_parallel = (int)v;
    } else if (!strcmp(nm, "compute_at")) {
      if (!get_int(p, "depth", 0, KN_SCHED_MAX_LOOPS, &v)) return kn_diag_error(d, "trace: compute_at: bad depth");
      s->attach = (int)v;
    } else if (!strcmp(nm, "vectorize_reduction")) {
      if (!get_int(p, "lanes", 0, 64, &v)) return kn_diag_error(d, "trace: vectorize_reduction: lanes not in [0, 64]");
      s->reduce_lanes = (int)v;
    } else if (!strcmp(nm, "split_reduction")) {
      int64_t depth;
      if (!get_int(p, "axis", 0, 2 * KN_MAX_RANK - 1, &v) || !get_int(p, "factor", 1, 1 << 20, &w) ||
          !get_int(p, "depth", 0, KN_SCHED_MAX_LOOPS, &depth))
        return kn_diag_error(d, "trace: split_reduction %d wants an axis, a factor in [1, 2^20] and a depth", i);
      s->rsplit_axis = (int)v;
      s->rsplit_factor = w;
      s->rsplit_depth = (int)depth;
      int64_t pack = 0;
      if (kn_json_get(p, "pack") && !get_int(p, "pack", 0, 1, &pack))
        return kn_diag_error(d, "trace: split_reduction %d: pack must be 0 or 1", i);
      s->rsplit_pack = pack == 1;
    } else if (!strcmp(nm, "unroll_reduction")) {
      if (!get_int(p, "axes", 0, 2 * KN_MAX_RANK, &v))
        return kn_diag_error(d, "trace: unroll_reduction: axes not in [0, %d]", 2 * KN_MAX_RANK);
      s->unroll_reduce = (int)v;
    } else if (!strcmp(nm, "vectorize") || !strcmp(nm, "unroll")) {
      if (n_kinds == KN_SCHED_MAX_LOOPS || !get_pair(kn_json_get(p, "loop"), &kinds[n_kinds].axis, &kinds[n_kinds].piece))
        return kn_diag_error(d, "trace: %s %d wants a loop [axis, piece]", nm, i);
      kinds[n_kinds++].kind = nm[0] == 'v' ? KN_FOR_VECTORIZED : KN_FOR_UNROLLED;
    } else {
      return kn_diag_error(d, "trace: unknown primitive '%s'", nm);
    }
  }
  if (!have_reorder) return kn_diag_error(d, "trace: no reorder");
  for (int a = s->n_axes; a < KN_MAX_RANK; a++)
    if (s->n_factors[a]) return kn_diag_error(d, "trace: split of axis %d, which no loop runs over", a);
  for (int k = 0; k < n_kinds; k++) {
    bool found = false;
    for (int i = 0; i < s->n_loops; i++)
      if (s->loops[i].axis == kinds[k].axis && s->loops[i].piece == kinds[k].piece) {
        s->loops[i].kind = kinds[k].kind;
        found = true;
      }
    if (!found) return kn_diag_error(d, "trace: loop kind for loop %d.%d, which is not in the reorder", kinds[k].axis, kinds[k].piece);
  }
  return 0;
}

int kn_at_trace_parse(const char *text, kn_schedule *s, kn_diag *d) {
  kn_arena A;
  kn_arena_init(&A);
  char err[128];
  kn_json *j = kn_json_parse(text, &A, err, sizeof err);
  int rc = j ? kn_at_trace_from_json(j, s, d) : kn_diag_error(d, "trace: %s", err);
  kn_arena_free(&A);
  return rc;
}

void kn_at_task_shape_of(const kn_sched_task *task, const kn_schedule *dflt, kn_at_task_shape *out) {
  memset(out, 0, sizeof *out);
  out->rank = task->out->rank;
  out->dtype = task->out->dtype;
  for (int i = 0; i < out->rank; i++)
    if (!kn_e_is_const_int(task->out->shape[i], &out->extent[i])) out->extent[i] = -1;
  out->hints = *task->hints;
  out->n_stages = task->n_stages;
  out->dflt = *dflt;
}

/* Extent of loop i of s for the task (-1: symbolic). */
static int64_t piece_extent(const kn_schedule *s, const kn_at_task_shape *ts, int i) {
  const kn_sched_loop *l = &s->loops[i];
  if (l->piece > 0) return s->factors[l->axis][l->piece - 1];
  int64_t total = 1;
  for (int k = 0; k < s->n_factors[l->axis]; k++) total *= s->factors[l->axis][k];
  int64_t e = ts->extent[l->axis];
  return e < 0 ? -1 : (e + total - 1) / total;
}

const kn_at_task_shape *kn_at_task_axes(const kn_schedule *s, const kn_at_task_shape *task, kn_at_task_shape *buf) {
  if (!s->fuse_spatial) return task;
  int r = task->rank;
  if (!kn_sched_rows_fuse_ok(&task->hints)) return NULL;
  *buf = *task;
  if (!kn_sched_axis_extents(s, r, task->extent, buf->extent)) return NULL;
  /* the pixel axis holds oh's stages too */
  if ((buf->hints.stage_axes >> (r - 3)) & 1u) buf->hints.stage_axes |= 1u << (r - 2);
  return buf;
}

int kn_at_sched_validate(const kn_schedule *s, const kn_at_task_shape *task, kn_diag *d) {
  if (s->n_axes != task->rank) return kn_diag_error(d, "schedule has %d axes, the kernel %d", s->n_axes, task->rank);
  kn_at_task_shape buf;
  const kn_at_task_shape *ts = kn_at_task_axes(s, task, &buf);
  if (!ts) return kn_diag_error(d, "fuse_spatial: the kernel is not a convolution or a MatMul by one matrix with constant rows and columns");
  if (s->fuse_spatial && s->rsplit_factor > 0) return kn_diag_error(d, "fuse_spatial: not with split_reduction");
  int want_loops = 0;
  for (int a = 0; a < s->n_axes; a++) {
    if (s->n_factors[a] < 0 || s->n_factors[a] > KN_SCHED_MAX_SPLIT) return kn_diag_error(d, "axis %d: bad split count", a);
    int64_t total = 1;
    for (int k = 0; k < s->n_factors[a]; k++) {
      if (s->factors[a][k] < 1 || s->factors[a][k] > (1 << 20)) return kn_diag_error(d, "axis %d: bad factor", a);
      total *= s->factors[a][k];
    }
    if (ts->extent[a] < 0 ? total != 1 : total > ts->extent[a])
      return kn_diag_error(d, "axis %d: split into %lld, extent %lld", a, (long long)total, (long long)ts->extent[a]);
    want_loops += s->n_factors[a] + 1;
  }
  if (s->n_loops != want_loops) return kn_diag_error(d, "schedule has %d loops, its splits make %d", s->n_loops, want_loops);
  for (int i = 0; i < s->n_loops; i++) {
    const kn_sched_loop *l = &s->loops[i];
    if (l->axis < 0 || l->axis >= s->n_axes || l->piece < 0 || l->piece > s->n_factors[l->axis])
      return kn_diag_error(d, "loop %d: no piece %d.%d", i, l->axis, l->piece);
    for (int j = 0; j < i; j++)
      if (s->loops[j].axis == l->axis && s->loops[j].piece == l->piece)
        return kn_diag_error(d, "loop %d.%d appears twice", l->axis, l->piece);
    if (l->kind != KN_FOR_SERIAL && l->kind != KN_FOR_VECTORIZED && l->kind != KN_FOR_UNROLLED)
      return kn_diag_error(d, "loop %d.%d: kind must be serial, vectorize or unroll", l->axis, l->piece);
    if (i < s->n_parallel && l->kind != KN_FOR_SERIAL)
      return kn_diag_error(d, "loop %d.%d: fused into the parallel loop, cannot be %s", l->axis, l->piece,
                           l->kind == KN_FOR_VECTORIZED ? "vectorized" : "unrolled");
    int64_t e = piece_extent(s, ts, i);
    if (l->kind == KN_FOR_VECTORIZED && (e < 0 || e > 64)) return kn_diag_error(d, "loop %d.%d: vectorized over %lld lanes", l->axis, l->piece, (long long)e);
  }
  if (s->n_parallel < 0 || s->n_parallel > s->n_loops) return kn_diag_error(d, "fuse_parallel over %d of %d loops", s->n_parallel, s->n_loops);
  if (s->attach < 0 || s->attach > s->n_loops) return kn_diag_error(d, "compute_at depth %d of %d loops", s->attach, s->n_loops);
  if (s->reduce_lanes < 0 || s->reduce_lanes > 64) return kn_diag_error(d, "vectorize_reduction over %d lanes", s->reduce_lanes);
  if (ts->n_stages > 0) {
    if (s->attach < s->n_parallel) return kn_diag_error(d, "reduction stages computed inside the parallel loop");
    /* accumulators are local arrays over the loops below the attach depth */
    int64_t size = 1;
    for (int i = s->attach; i < s->n_loops; i++) {
      if (!((ts->hints.stage_axes >> s->loops[i].axis) & 1u)) continue;
      int64_t e = piece_extent(s, ts, i);
      if (e < 0) return kn_diag_error(d, "loop %d.%d: symbolic extent inside the accumulator tile", s->loops[i].axis, s->loops[i].piece);
      size *= e;
      if (size > 4096) return kn_diag_error(d, "accumulator tile over 4096 elements");
    }
  }
  if (s->unroll_reduce < 0) return kn_diag_error(d, "unroll_reduction: negative axis count");
  if (s->unroll_reduce > 0) {
    /* the stage's innermost axes, constant, few copies in all; known for a
     * stage read at O's own indices (kn_sched_reduction_hints) */
    const kn_sched_hints *h = &ts->hints;
    if (s->reduce_lanes > 1) return kn_diag_error(d, "unroll_reduction: not with vectorize_reduction");
    if (s->unroll_reduce > h->n_reduce)
      return kn_diag_error(d, "unroll_reduction over %d axes, the kernel has %d it can unroll", s->unroll_reduce,
                           h->n_reduce);
    int64_t copies = 1;
    for (int i = h->n_reduce - s->unroll_reduce; i < h->n_reduce; i++) {
      if (h->reduce_extent[i] < 1 || h->reduce_extent[i] > KN_SCHED_MAX_UNROLL_AXIS)
        return kn_diag_error(d, "unroll_reduction: reduction axis %d has no constant extent of at most %d", i,
                             KN_SCHED_MAX_UNROLL_AXIS);
      if (s->rsplit_factor > 0 && s->rsplit_axis == i)
        return kn_diag_error(d, "unroll_reduction: not over the blocked axis %d", i);
      copies *= h->reduce_extent[i];
      if (copies > KN_SCHED_MAX_UNROLL_REDUCE)
        return kn_diag_error(d, "unroll_reduction: over %d copies", KN_SCHED_MAX_UNROLL_REDUCE);
    }
  }
  if (s->rsplit_factor < 0) return kn_diag_error(d, "split_reduction: negative factor");
  if (s->rsplit_factor > 0) {
    /* partial sums live in O: one stage read at O's indices, a constant
     * blocked axis, the block loop between the parallel loop and the stage,
     * and no overlapping tile (it would add its blocks twice) */
    const kn_sched_hints *h = &ts->hints;
    if (!h->rsplit_ok) return kn_diag_error(d, "split_reduction: the kernel's output cannot hold partial sums");
    if (s->rsplit_axis < 0 || s->rsplit_axis >= h->n_reduce || h->reduce_extent[s->rsplit_axis] < 1)
      return kn_diag_error(d, "split_reduction: no constant reduction axis %d", s->rsplit_axis);
    if (s->rsplit_depth < s->n_parallel || s->rsplit_depth > s->attach)
      return kn_diag_error(d, "split_reduction: depth %d outside [fuse_parallel, compute_at]", s->rsplit_depth);
    for (int a = 0; a < s->n_axes; a++) {
      int64_t total = 1;
      for (int k = 0; k < s->n_factors[a]; k++) total *= s->factors[a][k];
      if (total > 1 && (ts->extent[a] < 0 || ts->extent[a] % total != 0))
        return kn_diag_error(d, "split_reduction: axis %d split with overlap", a);
    }
  }
  return 0;
}
