/* pass_runtime_slices.c — Slice, Pad and Range whose shape-deciding inputs
 * (Slice's starts / ends / axes / steps, Pad's pads / axes, Range's start /
 * limit / delta) are run-time values, compiled for the static shape the ONNX
 * graph declares for their output.
 *
 * Kiln compiles static shapes, so shape inference needs those values. When
 * they come from graph inputs (not --bind constants) and the node's output is
 * a model output declaring a static shape, this pass replaces the node by
 * primitive graph ops that compute exactly that shape from the run-time
 * values, and appends a run-time check (kn_pass_add_check) that the values
 * really give it: P_run returns KILN_ERR_VALUE, writing no output, otherwise.
 * Never a wrong answer: every index is clamped into its axis, so invalid
 * values cannot read out of bounds either (their check fails first).
 *
 *   Range   y = start + Cast(iota_n) * delta in the output dtype (float16 and
 *           bfloat16 in their stash_type, float32 by default; integers in
 *           int64), cast to the output dtype; checks delta != 0 and
 *           n == max(ceil((limit - start) / delta), 0) in float64 (int64
 *           bounds must stay within 2^51 to be exact there).
 *   Slice   per (axes entry i, data axis a) the start, end and count
 *           normalised and clamped exactly as kn_slice_resolve (shape_infer.c)
 *           does at compile time, as [K, rank] int64 tensors; `axes` (run-time
 *           or not) selects the entry of each axis by comparison (an axis no
 *           entry names is taken whole). Each axis that may be sliced is a
 *           Gather of start_a + iota * step_a. Checks: steps != 0, every axes
 *           entry names one axis and no axis twice, the counts equal the
 *           declared dims.
 *   Pad     (modes constant, edge, reflect, wrap) begin / end pads per axis
 *           selected the same way; each axis that may be padded is a Gather of
 *           the source index iota - begin_a mapped by the mode (clamp; mirror
 *           with period 2 (d - 1); floor modulo d); constant mode masks the
 *           outside with Where and the (possibly run-time) constant_value.
 *           Checks: |pads| <= 2^40, begin_a + end_a == out_a - in_a, axes as
 *           for Slice, and for reflect pads below the axis size (the
 *           compile-time rule's limit).
 * A declared output with no elements is an empty constant (plus the check).
 *
 * Requires: a verified import after the composite expansions (runs before
 * the first full shape inference; infers shapes quietly itself). Guarantees:
 * the rewritten nodes are gone, their outputs are produced by primitive ops;
 * new values are untyped until the next kn_infer_shapes; nodes toposorted.
 * Nodes whose values are known at compile time, whose inputs are not typed,
 * whose output declares no static shape (or an axis longer than MAX_AXIS:
 * each rewritten axis is a constant iota) are left alone (shape inference
 * reports them as before). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/passes/rewrite.h"
#include "ir/passes/passes.h"
#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"

enum { MAX_CHECKS = 24 };

/* Longest output axis rewritten: each one is a constant iota of int64 (8
 * bytes an element) in the artifact. */
#define MAX_AXIS ((int64_t)1 << 22)

#define PAD_LIMIT ((int64_t)1 << 40)  /* |pads| accepted (dims are below 2^40) */
#define STEP_LIMIT ((int64_t)1 << 42) /* larger slice steps take one element */
#define RANGE_EXACT ((double)((int64_t)1 << 51)) /* |span| <= 2^52: ceil(span / delta) exact */

/* One rewrite: the builder and the bool tensors that must all be true. */
typedef struct rs {
  kn_rw b;
  int checks[MAX_CHECKS];
  int n_checks;
} rs;

/* ---- small builders ---- */

static int bin(rs *s, kn_op op, int a, int b) { return kn_rw_bin(&s->b, op, a, b); }

static int where(rs *s, int cond, int a, int b) {
  int in[3] = {cond, a, b};
  return kn_rw_op(&s->b, KN_OP_WHERE, in, 3);
}

static int i64_scalar(rs *s, int64_t v) {
  kn_shape sh = {.rank = 0};
  return kn_rw_const(&s->b, KN_DT_I64, &sh, &v);
}

/* An int64 constant of shape `sh` holding v (numel(sh) entries). */
static int i64_tensor(rs *s, const kn_shape *sh, const int64_t *v) { return kn_rw_const(&s->b, KN_DT_I64, sh, v); }

/* 0, 1 ... n-1 as int64 [n]. */
static int iota(rs *s, int64_t n) {
  int64_t *v = malloc(sizeof(int64_t) * (size_t)(n + 1));
  KN_ASSERT(v, "out of memory");
  for (int64_t i = 0; i < n; i++) v[i] = i;
  kn_shape sh = {.rank = 1, .dim = {n}};
  int c = i64_tensor(s, &sh, v);
  free(v);
  return c;
}

static int reduce_sum0(rs *s, int v) {
  int64_t zero = 0;
  return kn_rw_reduce(&s->b, KN_OP_REDUCE_SUM, v, &zero, 1, false);
}

static void add_check(rs *s, int bool_tensor) {
  KN_ASSERT(s->n_checks < MAX_CHECKS, "too many checks");
  s->checks[s->n_checks++] = bool_tensor;
}

/* Input k of the node as int64, shaped [K, 1] (K = its element count). */
static int column(rs *s, int v, int64_t k) {
  int64_t shape[2] = {k, 1};
  return kn_rw_reshape(&s->b, kn_rw_cast(&s->b, v, KN_DT_I64), shape, 2);
}

/* The checks as one bool scalar, appended to the graph's checks. */
static void finish_checks(rs *s, const char *what) {
  kn_graph *g = s->b.g;
  int flat[MAX_CHECKS] = {0};
  KN_ASSERT(s->n_checks > 0, "a rewrite without a check");
  int64_t minus1 = -1;
  for (int i = 0; i < s->n_checks; i++)
    flat[i] = kn_rw_reshape(&s->b, kn_rw_cast(&s->b, s->checks[i], KN_DT_I32), &minus1, 1);
  int all = flat[0];
  if (s->n_checks > 1) {
    all = kn_rw_op(&s->b, KN_OP_CONCAT, flat, s->n_checks);
    kn_rw_attr_int(&s->b, "axis", 0);
  }
  const kn_node *n = &g->nodes[s->b.node];
  s->b.name = kn_arena_printf(&g->arena, "check: node '%s' (%s) %s", n->name, n->op_type, what);
  int min = kn_rw_reduce(&s->b, KN_OP_REDUCE_MIN, all, NULL, 0, false);
  kn_pass_add_check(g, kn_rw_cast(&s->b, min, KN_DT_BOOL));
}

/* sel [K, rank] bool: entry i of `axes` (normalised) names axis a; axes < 0
 * means 0 .. K-1. Checks that each entry names one axis and no axis is named
 * twice. *named gets int64 [rank]: how many entries name each axis (0 or 1
 * once the check holds). */
static int select_axes(rs *s, int axes, int64_t k, int rank, int *named) {
  int ax;
  if (axes >= 0) {
    ax = column(s, axes, k);
  } else {
    int64_t *v = malloc(sizeof(int64_t) * (size_t)(k + 1));
    KN_ASSERT(v, "out of memory");
    for (int64_t i = 0; i < k; i++) v[i] = i;
    ax = i64_tensor(s, &(kn_shape){.rank = 2, .dim = {k, 1}}, v);
    free(v);
  }
  int norm = where(s, bin(s, KN_OP_LESS, ax, i64_scalar(s, 0)), bin(s, KN_OP_ADD, ax, i64_scalar(s, rank)), ax);
  int64_t ar[KN_MAX_RANK];
  for (int a = 0; a < rank; a++) ar[a] = a;
  int sel = bin(s, KN_OP_EQUAL, norm, i64_tensor(s, &(kn_shape){.rank = 2, .dim = {1, rank}}, ar));
  int sel_i = kn_rw_cast(&s->b, sel, KN_DT_I64);
  int64_t one = 1;
  int per_entry = kn_rw_reduce(&s->b, KN_OP_REDUCE_SUM, sel_i, &one, 1, false);
  add_check(s, bin(s, KN_OP_EQUAL, per_entry, i64_scalar(s, 1)));
  *named = reduce_sum0(s, sel_i);
  add_check(s, bin(s, KN_OP_LESS_OR_EQUAL, *named, i64_scalar(s, 1)));
  return sel;
}

/* [rank]: the value of the entry naming each axis (0 where none does);
 * vals is [K, 1] or [K, rank]. */
static int per_axis(rs *s, int sel, int vals) { return reduce_sum0(s, where(s, sel, vals, i64_scalar(s, 0))); }

/* Element a of the int64 vector v, as a scalar. */
static int pick(rs *s, int v, int a) { return bin(s, KN_OP_GATHER, v, i64_scalar(s, a)); }

static int gather_axis(rs *s, int x, int idx, int axis) {
  int v = bin(s, KN_OP_GATHER, x, idx);
  kn_rw_attr_int(&s->b, "axis", axis);
  return v;
}

/* Which axes a constant `axes` input (or its absence: 0 .. k-1) names: bit
 * a of *mask; every axis when axes is a run-time value. False when constant
 * axes are out of range or repeat one (no value gives any shape). */
static bool named_axes(const kn_graph *g, int axes, int64_t k, int rank, uint32_t *mask) {
  *mask = rank >= 32 ? ~0u : (1u << rank) - 1;
  if (axes >= 0 && !g->values[axes].data) return true;
  uint32_t m = 0;
  for (int64_t i = 0; i < k; i++) {
    int64_t v = axes >= 0 ? kn_ref_load_int(g->values[axes].dtype, g->values[axes].data, i) : i;
    int a = kn_axis_norm(v, rank);
    if (a < 0 || (m >> a & 1)) return false;
    m |= 1u << a;
  }
  *mask = m;
  return true;
}

/* ---- Range ---- */

static void rewrite_range(rs *s, const kn_shape *out) {
  kn_graph *g = s->b.g;
  const kn_node *n = &g->nodes[s->b.node];
  int in[3] = {n->in[0], n->in[1], n->in[2]};
  kn_dtype t = g->values[in[0]].dtype;
  kn_dtype ct = t;
  if (kn_dtype_is_int(t)) ct = KN_DT_I64;
  else if (t == KN_DT_F16 || t == KN_DT_BF16) ct = kn_node_attr_int(n, "stash_type", 1) == 11 ? KN_DT_F64 : KN_DT_F32;
  int scalar[3], f64[3];
  for (int k = 0; k < 3; k++) {
    scalar[k] = kn_rw_reshape(&s->b, in[k], NULL, 0);
    f64[k] = kn_rw_cast(&s->b, scalar[k], KN_DT_F64);
    if (t == KN_DT_I64 || t == KN_DT_U64) /* exact in float64 */
      add_check(s, bin(s, KN_OP_LESS_OR_EQUAL, kn_rw_un(&s->b, KN_OP_ABS, f64[k]),
                       kn_rw_scalar(&s->b, KN_DT_F64, RANGE_EXACT)));
  }
  int count = kn_rw_un(&s->b, KN_OP_CEIL, bin(s, KN_OP_DIV, bin(s, KN_OP_SUB, f64[1], f64[0]), f64[2]));
  count = bin(s, KN_OP_MAX, count, kn_rw_scalar(&s->b, KN_DT_F64, 0));
  add_check(s, bin(s, KN_OP_EQUAL, count, kn_rw_scalar(&s->b, KN_DT_F64, (double)out->dim[0])));
  add_check(s, kn_rw_un(&s->b, KN_OP_NOT, bin(s, KN_OP_EQUAL, f64[2], kn_rw_scalar(&s->b, KN_DT_F64, 0))));
  int y;
  if (out->dim[0] == 0) {
    y = kn_rw_const(&s->b, t, out, NULL);
  } else {
    int start = kn_rw_cast(&s->b, scalar[0], ct), delta = kn_rw_cast(&s->b, scalar[2], ct);
    int steps = bin(s, KN_OP_MUL, kn_rw_cast(&s->b, iota(s, out->dim[0]), ct), delta);
    y = kn_rw_cast(&s->b, bin(s, KN_OP_ADD, start, steps), t);
  }
  kn_rw_output(&s->b, 0, y);
  finish_checks(s, "start / limit / delta give the declared length");
}

/* ---- Slice ---- */

static void rewrite_slice(rs *s, const kn_shape *out) {
  kn_graph *g = s->b.g;
  const kn_node *n = &g->nodes[s->b.node];
  int x = n->in[0], starts = n->in[1], ends = n->in[2];
  int axes = n->n_in > 3 ? n->in[3] : -1, steps = n->n_in > 4 ? n->in[4] : -1;
  kn_shape xs = g->values[x].shape;
  int r = xs.rank;
  int64_t k = kn_value_numel(g, starts);
  uint32_t sliced;
  bool axes_ok = named_axes(g, axes, k, r, &sliced);
  KN_ASSERT(axes_ok, "axes checked by applies()");
  int64_t dims[KN_MAX_RANK], dims_m1[KN_MAX_RANK], neg_dims[KN_MAX_RANK];
  for (int a = 0; a < r; a++) dims[a] = xs.dim[a], dims_m1[a] = xs.dim[a] - 1, neg_dims[a] = -xs.dim[a];
  kn_shape row = {.rank = 2, .dim = {1, r}}, vec = {.rank = 1, .dim = {r}};
  int d_row = i64_tensor(s, &row, dims), dm1_row = i64_tensor(s, &row, dims_m1);
  int d_vec = i64_tensor(s, &vec, dims);

  int named;
  int sel = select_axes(s, axes, k, r, &named);
  int st = steps >= 0 ? column(s, steps, k) : -1;
  if (st < 0) {
    int64_t *ones = malloc(sizeof(int64_t) * (size_t)(k + 1));
    KN_ASSERT(ones, "out of memory");
    for (int64_t i = 0; i < k; i++) ones[i] = 1;
    st = i64_tensor(s, &(kn_shape){.rank = 2, .dim = {k, 1}}, ones);
    free(ones);
  }
  int zero = i64_scalar(s, 0);
  add_check(s, kn_rw_un(&s->b, KN_OP_NOT, bin(s, KN_OP_EQUAL, st, zero)));
  int step = kn_rw_clamp(&s->b, st, KN_DT_I64, (double)-STEP_LIMIT, (double)STEP_LIMIT);
  int neg = bin(s, KN_OP_LESS, step, zero);

  /* starts and ends against every axis's dim: [K, rank] */
  int sv = column(s, starts, k), ev = column(s, ends, k);
  int start = where(s, bin(s, KN_OP_LESS, sv, zero), bin(s, KN_OP_ADD, sv, d_row), sv);
  int end = where(s, bin(s, KN_OP_LESS, ev, zero), bin(s, KN_OP_ADD, ev, d_row), ev);
  int to_end = bin(s, KN_OP_OR, bin(s, KN_OP_EQUAL, ev, i64_scalar(s, INT32_MAX)),
                   bin(s, KN_OP_EQUAL, ev, i64_scalar(s, INT64_MAX)));
  end = where(s, to_end, where(s, neg, i64_scalar(s, -1), d_row), end);
  int hi = where(s, neg, dm1_row, d_row);
  start = bin(s, KN_OP_MIN, bin(s, KN_OP_MAX, start, zero), hi);
  end = bin(s, KN_OP_MIN, bin(s, KN_OP_MAX, end, where(s, neg, i64_scalar(s, -1), zero)), hi);
  int span = where(s, neg, bin(s, KN_OP_SUB, start, end), bin(s, KN_OP_SUB, end, start));
  int abs_step = bin(s, KN_OP_MAX, kn_rw_un(&s->b, KN_OP_ABS, step), i64_scalar(s, 1));
  int num = bin(s, KN_OP_MAX, bin(s, KN_OP_SUB, bin(s, KN_OP_ADD, span, abs_step), i64_scalar(s, 1)), zero);
  int count = bin(s, KN_OP_DIV, num, abs_step);

  /* per axis: the selected entry, or the whole axis */
  int unnamed = bin(s, KN_OP_SUB, i64_scalar(s, 1), named);
  int counts = bin(s, KN_OP_ADD, per_axis(s, sel, count), bin(s, KN_OP_MUL, unnamed, d_vec));
  int64_t want[KN_MAX_RANK];
  for (int a = 0; a < r; a++) want[a] = out->dim[a];
  add_check(s, bin(s, KN_OP_EQUAL, counts, i64_tensor(s, &vec, want)));

  int y;
  if (kn_shape_numel_max(out, 1) == 0) {
    y = kn_rw_const(&s->b, g->values[x].dtype, out, NULL);
  } else {
    int starts_a = per_axis(s, sel, start);
    int steps_a = bin(s, KN_OP_ADD, per_axis(s, sel, step), unnamed);
    /* a step beyond the dim takes one element: keeps iota * step small */
    steps_a = bin(s, KN_OP_MIN, bin(s, KN_OP_MAX, steps_a, i64_tensor(s, &vec, neg_dims)), d_vec);
    y = x;
    for (int a = 0; a < r; a++) {
      if (!(sliced >> a & 1)) continue;
      int idx = bin(s, KN_OP_ADD, pick(s, starts_a, a), bin(s, KN_OP_MUL, iota(s, out->dim[a]), pick(s, steps_a, a)));
      idx = kn_rw_clamp(&s->b, idx, KN_DT_I64, 0, (double)(dims[a] - 1));
      y = gather_axis(s, y, idx, a);
    }
    if (y == x) y = kn_rw_un(&s->b, KN_OP_IDENTITY, x);
  }
  kn_rw_output(&s->b, 0, y);
  finish_checks(s, "starts / ends / axes / steps give the declared shape");
}

/* ---- Pad ---- */

static void rewrite_pad(rs *s, const kn_shape *out) {
  kn_graph *g = s->b.g;
  const kn_node *n = &g->nodes[s->b.node];
  int x = n->in[0], pads = n->in[1];
  int value = n->n_in > 2 ? n->in[2] : -1, axes = n->n_in > 3 ? n->in[3] : -1;
  const char *mode = kn_node_attr_string(n, "mode", "constant");
  bool constant = !strcmp(mode, "constant"), edge = !strcmp(mode, "edge"), reflect = !strcmp(mode, "reflect");
  kn_dtype t = g->values[x].dtype;
  kn_shape xs = g->values[x].shape;
  int r = xs.rank;
  int64_t k = axes >= 0 ? kn_value_numel(g, axes) : r;
  uint32_t padded;
  bool axes_ok = named_axes(g, axes, k, r, &padded);
  KN_ASSERT(axes_ok, "axes checked by applies()");
  kn_shape vec = {.rank = 1, .dim = {r}};
  int64_t dims[KN_MAX_RANK], growth[KN_MAX_RANK];
  for (int a = 0; a < r; a++) dims[a] = xs.dim[a], growth[a] = out->dim[a] - xs.dim[a];

  int named;
  int sel = select_axes(s, axes, k, r, &named);
  int64_t shape3[3] = {2, k, 1};
  int p = kn_rw_reshape(&s->b, kn_rw_cast(&s->b, pads, KN_DT_I64), shape3, 3);
  add_check(s, bin(s, KN_OP_LESS_OR_EQUAL, kn_rw_un(&s->b, KN_OP_ABS, p), i64_scalar(s, PAD_LIMIT)));
  int begin = per_axis(s, sel, pick(s, p, 0)), end = per_axis(s, sel, pick(s, p, 1));
  add_check(s, bin(s, KN_OP_EQUAL, bin(s, KN_OP_ADD, begin, end), i64_tensor(s, &vec, growth)));
  if (reflect) { /* as the compile-time rule: pads below the axis, or none */
    int d_vec = i64_tensor(s, &vec, dims), zero = i64_scalar(s, 0);
    int small = bin(s, KN_OP_AND, bin(s, KN_OP_LESS, begin, d_vec), bin(s, KN_OP_LESS, end, d_vec));
    int none = bin(s, KN_OP_AND, bin(s, KN_OP_EQUAL, begin, zero), bin(s, KN_OP_EQUAL, end, zero));
    add_check(s, bin(s, KN_OP_OR, small, none));
  }

  int y;
  if (kn_shape_numel_max(out, 1) == 0) {
    y = kn_rw_const(&s->b, t, out, NULL);
  } else {
    begin = kn_rw_clamp(&s->b, begin, KN_DT_I64, (double)-PAD_LIMIT, (double)PAD_LIMIT);
    int mask = -1;
    y = x;
    for (int a = 0; a < r; a++) {
      if (!(padded >> a & 1)) continue;
      int64_t d = dims[a];
      int src = bin(s, KN_OP_SUB, iota(s, out->dim[a]), pick(s, begin, a)), idx;
      if (reflect && d == 1) {
        idx = bin(s, KN_OP_MUL, src, i64_scalar(s, 0));
      } else if (reflect) {
        int m = bin(s, KN_OP_MOD, src, i64_scalar(s, 2 * (d - 1)));
        idx = where(s, bin(s, KN_OP_LESS, m, i64_scalar(s, d)), m, bin(s, KN_OP_SUB, i64_scalar(s, 2 * (d - 1)), m));
      } else if (!constant && !edge) { /* wrap */
        idx = bin(s, KN_OP_MOD, src, i64_scalar(s, d));
      } else {
        idx = kn_rw_clamp(&s->b, src, KN_DT_I64, 0, (double)(d - 1));
      }
      y = gather_axis(s, y, idx, a);
      if (constant) {
        int inside = bin(s, KN_OP_AND, bin(s, KN_OP_GREATER_OR_EQUAL, src, i64_scalar(s, 0)),
                         bin(s, KN_OP_LESS, src, i64_scalar(s, d)));
        int64_t shape[KN_MAX_RANK];
        for (int j = 0; j < r; j++) shape[j] = j == a ? out->dim[a] : 1;
        inside = kn_rw_reshape(&s->b, inside, shape, r);
        mask = mask < 0 ? inside : bin(s, KN_OP_AND, mask, inside);
      }
    }
    if (mask >= 0) {
      int fill = value >= 0 ? kn_rw_reshape(&s->b, value, NULL, 0) : kn_rw_scalar(&s->b, t, 0);
      y = where(s, mask, y, fill);
    }
    if (y == x) y = kn_rw_un(&s->b, KN_OP_IDENTITY, x);
  }
  kn_rw_output(&s->b, 0, y);
  finish_checks(s, "pads / axes give the declared shape");
}

/* ---- driver ---- */


static bool typed(const kn_graph *g, int v) {
  if (v < 0) return true;
  const kn_value *val = &g->values[v];
  return val->shape_known && val->dtype != KN_DT_INVALID && !val->shape.batch_mask;
}

static bool is_int_list(const kn_graph *g, int v, int64_t n) {
  if (v < 0) return true;
  const kn_value *val = &g->values[v];
  return kn_dtype_is_int(val->dtype) && val->shape.rank == 1 && (n < 0 || val->shape.dim[0] == n);
}

/* Whether node i is one this pass rewrites; its declared output shape. */
static bool applies(const kn_graph *g, int i, kn_shape *out) {
  const kn_node *n = &g->nodes[i];
  if (n->dead || n->n_out < 1 || n->out[0] < 0) return false;
  if (n->op != KN_OP_SLICE && n->op != KN_OP_PAD && n->op != KN_OP_RANGE) return false;
  if (n->n_in < 1 || n->in[0] < 0) return false; /* omitted data / start: shape inference says so */
  int y = n->out[0];
  if (g->values[y].shape_known || !kn_pass_declared_shape(g, y, out) || out->batch_mask) return false;
  for (int a = 0; a < out->rank; a++)
    if (out->dim[a] < 0 || out->dim[a] > MAX_AXIS) return false;
  for (int k = 0; k < n->n_in; k++)
    if (!typed(g, n->in[k])) return false;
  /* the inputs that decide the shape */
  int first = n->op == KN_OP_RANGE ? 0 : 1, last = n->op == KN_OP_SLICE ? 4 : n->op == KN_OP_RANGE ? 2 : 3;
  bool runtime = false;
  for (int k = first; k <= last && k < n->n_in && !runtime; k++)
    if (!(n->op == KN_OP_PAD && k == 2)) /* constant_value decides no shape */
      runtime = kn_pass_is_runtime_value(g, n->in[k]);
  if (!runtime) return false;
  if (n->op == KN_OP_RANGE) {
    if (n->n_in != 3 || out->rank != 1) return false;
    kn_dtype t = g->values[n->in[0]].dtype;
    if (!kn_dtype_is_int(t) && t != KN_DT_F32 && t != KN_DT_F64 && t != KN_DT_F16 && t != KN_DT_BF16) return false;
    for (int k = 0; k < 3; k++)
      if (n->in[k] < 0 || g->values[n->in[k]].dtype != t || kn_value_numel(g, n->in[k]) != 1) return false;
    return true;
  }
  const kn_value *x = &g->values[n->in[0]];
  int r = x->shape.rank;
  if (r < 1 || out->rank != r) return false;
  if (n->op == KN_OP_SLICE) {
    if (n->n_in < 3 || n->n_in > 5 || n->in[1] < 0 || n->in[2] < 0) return false;
    int64_t k = kn_value_numel(g, n->in[1]);
    if (k < 1 || k > r || !is_int_list(g, n->in[1], k) || !is_int_list(g, n->in[2], k)) return false;
    if ((n->n_in > 3 && !is_int_list(g, n->in[3], k)) || (n->n_in > 4 && !is_int_list(g, n->in[4], k))) return false;
    for (int a = 0; a < r; a++)
      if (out->dim[a] > x->shape.dim[a]) return false; /* no values give it */
    uint32_t mask;
    return named_axes(g, n->n_in > 3 ? n->in[3] : -1, k, r, &mask);
  }
  /* Pad */
  const char *mode = kn_node_attr_string(n, "mode", "constant");
  if (strcmp(mode, "constant") && strcmp(mode, "edge") && strcmp(mode, "reflect") && strcmp(mode, "wrap"))
    return false;
  if (n->n_in < 2 || n->n_in > 4 || n->in[1] < 0) return false;
  int axes = n->n_in > 3 ? n->in[3] : -1;
  int64_t k = axes >= 0 ? kn_value_numel(g, axes) : r;
  if (k < 1 || k > r || !is_int_list(g, axes, k) || !is_int_list(g, n->in[1], 2 * k)) return false;
  if (n->n_in > 2 && n->in[2] >= 0 && (g->values[n->in[2]].dtype != x->dtype || kn_value_numel(g, n->in[2]) != 1))
    return false;
  if (kn_shape_numel_max(out, 1) > 0)
    for (int a = 0; a < r; a++)
      if (x->shape.dim[a] == 0) return false; /* nothing to gather from */
  uint32_t mask;
  return named_axes(g, axes, k, r, &mask);
}

int kn_pass_runtime_slices(kn_graph *g, kn_diag *d) {
  if (!g->out_declared) return 0;
  bool any = false;
  for (int i = 0; i < g->n_nodes && !any; i++) {
    kn_op op = g->nodes[i].op;
    any = !g->nodes[i].dead && (op == KN_OP_SLICE || op == KN_OP_PAD || op == KN_OP_RANGE);
  }
  if (!any) return 0;
  int rc = kn_infer_shapes_quiet(g);
  if (rc == 0) return 0; /* every shape is known: nothing to do */
  int n_nodes = g->n_nodes, rewritten = 0;
  for (int i = 0; i < n_nodes; i++) {
    kn_shape out;
    if (!applies(g, i, &out)) continue;
    rs s = {.b = {.g = g, .d = d, .node = i, .name = g->nodes[i].name, .last = -1}};
    kn_op op = g->nodes[i].op;
    kn_pass_kill_node(g, i);
    if (op == KN_OP_RANGE) rewrite_range(&s, &out);
    else if (op == KN_OP_SLICE) rewrite_slice(&s, &out);
    else rewrite_pad(&s, &out);
    rewritten++;
  }
  if (rewritten == 0) return 0;
  return kn_graph_toposort(g, d);
}
