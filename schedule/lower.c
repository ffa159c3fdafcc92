/* lower.c — TE + schedule -> loop IR.
 *
 * Requires: O's body (after inlining every injective compute) reads each
 * reduction stage R with indices that are O axes or constant 0; R's source
 * reads earlier stages the same way through R's own axes. Every TE load is in
 * bounds (definitions clamp padded reads).
 * Guarantees: a loop nest in which O is stored exactly at every element of
 * its shape (some elements possibly twice, with the same value); loops are
 * normalised to start at 0. Under reduction blocking O is also stored once
 * per reduction block with partial sums, the last time with the final value
 * (stage_code). */
#include <math.h>
#include <string.h>

#include "schedule/schedule.h"

#define MAX_STAGES KN_SCHED_MAX_STAGES

typedef struct stage {
  kn_te_tensor *t;
  kn_expr *source;  /* inlined reduce source, over t->axes and reduce axes */
  int map[KN_MAX_RANK]; /* O axis for each axis of t, -1: constant 0 */
  kn_buffer *acc;
  int vec_lanes;    /* >1: last reduction axis reduced in vectors (acc holds the lanes) */
  kn_expr *start;   /* the sum starts from this (over O axes), not 0; NULL: the op's identity */
  int n_tile;       /* tile loops: indices into the schedule's loops */
  int tile[KN_SCHED_MAX_LOOPS];
} stage;

typedef struct lower {
  kn_expr_ctx *ec;
  kn_diag *d;
  const kn_schedule *s;
  kn_te_tensor *out;
  const kn_lower_params *params;
  kn_buffer *out_buf;
  kn_var *block_var; /* reduction block loop (s->rsplit_factor > 0), else NULL */
  kn_stmt *pack_copy; /* s->rsplit_pack: fills pack_buf, run first in each block */
  kn_buffer *pack_buf;
  kn_expr *extent[KN_MAX_RANK]; /* of the schedule's axes (kn_sched_axis_extents) */
  kn_var *piece_var[KN_SCHED_MAX_LOOPS]; /* per schedule loop */
  kn_expr *piece_extent[KN_SCHED_MAX_LOOPS];
  kn_expr *axis_value[KN_MAX_RANK]; /* O axis value over piece vars */
  int n_stages;
  stage stages[MAX_STAGES];
  bool failed;
} lower;

/* ---- inlining ---- */

static kn_expr *inline_expr(lower *L, kn_expr *e);

static kn_expr *inline_load(lower *L, kn_expr *e) {
  kn_te_tensor *t = e->u.load.tensor;
  kn_expr *idx[KN_TE_MAX_RANK];
  bool changed = false;
  for (int i = 0; i < e->u.load.n; i++) {
    idx[i] = inline_expr(L, e->u.load.indices[i]);
    changed |= idx[i] != e->u.load.indices[i];
  }
  if (t->kind == KN_TE_PLACEHOLDER || t->body->kind == KN_E_REDUCE)
    return changed ? kn_e_tload(L->ec, t, idx, e->u.load.n) : e;
  kn_expr *body = t->body;
  for (int i = 0; i < t->rank; i++) body = kn_e_substitute(L->ec, body, t->axes[i], idx[i]);
  return inline_expr(L, body);
}

/* Rebuilds e with every load of an injective compute replaced by its body. */
static kn_expr *inline_expr(lower *L, kn_expr *e) {
  switch (e->kind) {
  case KN_E_INT:
  case KN_E_FLOAT:
  case KN_E_VAR: return e;
  case KN_E_LOAD: return e->u.load.tensor ? inline_load(L, e) : e;
  case KN_E_NOT: {
    kn_expr *a = inline_expr(L, e->u.un.a);
    return a == e->u.un.a ? e : kn_e_not(L->ec, a);
  }
  case KN_E_CAST: {
    kn_expr *a = inline_expr(L, e->u.un.a);
    return a == e->u.un.a ? e : kn_e_cast(L->ec, e->dtype, a);
  }
  case KN_E_SELECT: {
    kn_expr *c = inline_expr(L, e->u.sel.cond), *t = inline_expr(L, e->u.sel.t),
            *f = inline_expr(L, e->u.sel.f);
    if (c == e->u.sel.cond && t == e->u.sel.t && f == e->u.sel.f) return e;
    return kn_e_select(L->ec, c, t, f);
  }
  case KN_E_CALL: {
    kn_expr *args[4];
    bool changed = false;
    for (int i = 0; i < e->u.call.n; i++) {
      args[i] = inline_expr(L, e->u.call.args[i]);
      changed |= args[i] != e->u.call.args[i];
    }
    return changed ? kn_e_call(L->ec, e->u.call.fn, args, e->u.call.n) : e;
  }
  case KN_E_REDUCE:
  case KN_E_RAMP:
  case KN_E_BROADCAST: KN_UNREACHABLE("unexpected node in TE body"); return e;
  default: {
    kn_expr *a = inline_expr(L, e->u.bin.a), *b = inline_expr(L, e->u.bin.b);
    if (a == e->u.bin.a && b == e->u.bin.b) return e;
    return kn_e_bin(L->ec, e->kind, a, b);
  }
  }
}

/* ---- stage discovery ---- */

static stage *find_stage(lower *L, const kn_te_tensor *t) {
  for (int i = 0; i < L->n_stages; i++)
    if (L->stages[i].t == t) return &L->stages[i];
  return NULL;
}

static int o_axis_of(lower *L, const kn_expr *e) {
  if (e->kind != KN_E_VAR) return -2;
  for (int i = 0; i < L->out->rank; i++)
    if (L->out->axes[i] == e->u.var) return i;
  return -2;
}

/* Walks e (an inlined expression over O axes when `in_out` is set) and
 * registers every reduction stage it reads; records the axis map from loads
 * found in O's body. */
static void collect_stages(lower *L, kn_expr *e, bool in_out);

static void add_stage(lower *L, kn_expr *load, bool in_out) {
  kn_te_tensor *t = load->u.load.tensor;
  stage *st = find_stage(L, t);
  if (!st) {
    if (L->n_stages == MAX_STAGES) {
      L->failed = true;
      kn_diag_error(L->d, "kernel '%s': too many reduction stages", L->out->name);
      return;
    }
    st = &L->stages[L->n_stages++];
    memset(st, 0, sizeof *st);
    st->t = t;
    for (int i = 0; i < KN_MAX_RANK; i++) st->map[i] = -3; /* unknown */
    st->source = inline_expr(L, t->body->u.reduce.source);
    collect_stages(L, st->source, false);
    /* dependencies were appended before? keep order: move t after its deps */
    stage tmp = *find_stage(L, t);
    int at = (int)(find_stage(L, t) - L->stages);
    memmove(&L->stages[at], &L->stages[at + 1], sizeof(stage) * (size_t)(L->n_stages - at - 1));
    L->stages[L->n_stages - 1] = tmp;
    st = &L->stages[L->n_stages - 1];
  }
  if (!in_out) return;
  for (int i = 0; i < t->rank; i++) {
    kn_expr *ix = load->u.load.indices[i];
    int64_t k;
    int m = o_axis_of(L, ix);
    if (m == -2 && kn_e_is_const_int(ix, &k) && k == 0) m = -1;
    if (m == -2 || (st->map[i] != -3 && st->map[i] != m)) {
      L->failed = true;
      kn_diag_error(L->d, "kernel '%s': stage '%s' is read with an index Kiln cannot fuse",
                    L->out->name, t->name);
      return;
    }
    st->map[i] = m;
  }
}

static void collect_stages(lower *L, kn_expr *e, bool in_out) {
  switch (e->kind) {
  case KN_E_INT:
  case KN_E_FLOAT:
  case KN_E_VAR: return;
  case KN_E_LOAD:
    if (e->u.load.tensor && e->u.load.tensor->kind == KN_TE_COMPUTE &&
        e->u.load.tensor->body->kind == KN_E_REDUCE)
      add_stage(L, e, in_out);
    /* an index is evaluated where the load is: a stage read there (TopK's
     * values at the selected index) is read by O when the load is */
    for (int i = 0; i < e->u.load.n; i++) collect_stages(L, e->u.load.indices[i], in_out);
    return;
  case KN_E_NOT:
  case KN_E_CAST: collect_stages(L, e->u.un.a, in_out); return;
  case KN_E_SELECT:
    collect_stages(L, e->u.sel.cond, in_out);
    collect_stages(L, e->u.sel.t, in_out);
    collect_stages(L, e->u.sel.f, in_out);
    return;
  case KN_E_CALL:
    for (int i = 0; i < e->u.call.n; i++) collect_stages(L, e->u.call.args[i], in_out);
    return;
  default:
    collect_stages(L, e->u.bin.a, in_out);
    collect_stages(L, e->u.bin.b, in_out);
    return;
  }
}

/* ---- loop pieces ---- */

static kn_expr *axis_extent(lower *L, int axis) { return L->extent[axis]; }

/* The schedule axis that runs over O axis a. */
static int sched_axis(const lower *L, int a) {
  return L->s->fuse_spatial && a == L->out->rank - 3 ? a + 1 : a;
}

bool kn_sched_axis_extents(const kn_schedule *s, int rank, const int64_t *o_extent, int64_t *out) {
  for (int a = 0; a < rank; a++) out[a] = o_extent[a];
  if (!s->fuse_spatial) return true;
  if (rank < 3 || o_extent[rank - 3] < 1 || o_extent[rank - 2] < 1) return false;
  out[rank - 3] = 1;
  out[rank - 2] = o_extent[rank - 3] * o_extent[rank - 2];
  return true;
}

/* L->extent from O's shape; false when fuse_spatial does not fit. */
static bool set_extents(lower *L) {
  int rank = L->out->rank;
  for (int a = 0; a < rank; a++) L->extent[a] = L->out->shape[a];
  if (!L->s->fuse_spatial) return true;
  int64_t e[KN_MAX_RANK], fused[KN_MAX_RANK];
  for (int a = 0; a < rank; a++)
    if (!kn_e_is_const_int(L->out->shape[a], &e[a])) e[a] = -1;
  if (!kn_sched_axis_extents(L->s, rank, e, fused)) {
    kn_diag_error(L->d, "kernel '%s': fuse_spatial needs constant rows and columns", L->out->name);
    return false;
  }
  L->extent[rank - 3] = kn_e_int(L->ec, 1);
  L->extent[rank - 2] = kn_e_int(L->ec, fused[rank - 2]);
  return true;
}

static int64_t inner_product(const kn_schedule *s, int axis, int from_piece) {
  int64_t p = 1;
  for (int k = from_piece; k <= s->n_factors[axis]; k++)
    if (k >= 1) p *= s->factors[axis][k - 1];
  return p;
}

static int loop_of(const kn_schedule *s, int axis, int piece) {
  for (int i = 0; i < s->n_loops; i++)
    if (s->loops[i].axis == axis && s->loops[i].piece == piece) return i;
  return -1;
}

static void make_pieces(lower *L) {
  const kn_schedule *s = L->s;
  kn_expr_ctx *ec = L->ec;
  for (int i = 0; i < s->n_loops; i++) {
    const kn_sched_loop *lp = &s->loops[i];
    L->piece_var[i] = kn_var_new(ec, kn_arena_printf(ec->arena, "%s_%c%d",
                                                     L->out->axes[lp->axis]->name,
                                                     lp->piece ? 'i' : 'o', lp->piece));
    if (lp->piece == 0) {
      int64_t total = inner_product(s, lp->axis, 1), e;
      kn_expr *E = axis_extent(L, lp->axis);
      if (kn_e_is_const_int(E, &e))
        L->piece_extent[i] = kn_e_int(ec, (e + total - 1) / total);
      else {
        KN_ASSERT(total == 1, "split of a symbolic axis");
        L->piece_extent[i] = E;
      }
    } else {
      L->piece_extent[i] = kn_e_int(ec, s->factors[lp->axis][lp->piece - 1]);
    }
  }
  for (int a = 0; a < L->out->rank; a++) {
    int64_t total = inner_product(s, a, 1), e = 0;
    kn_expr *inner = kn_e_int(ec, 0);
    for (int k = 1; k <= s->n_factors[a]; k++) {
      int li = loop_of(s, a, k);
      KN_ASSERT(li >= 0, "schedule misses a piece");
      int64_t stride = inner_product(s, a, k + 1);
      inner = kn_e_add(ec, inner, kn_e_mul(ec, kn_e_var(ec, L->piece_var[li]), kn_e_int(ec, stride)));
    }
    int lo = loop_of(s, a, 0);
    KN_ASSERT(lo >= 0, "schedule misses an axis");
    kn_expr *base = kn_e_mul(ec, kn_e_var(ec, L->piece_var[lo]), kn_e_int(ec, total));
    if (total > 1 && kn_e_is_const_int(axis_extent(L, a), &e) && e % total != 0) {
      KN_ASSERT(e >= total, "split factor larger than the axis");
      base = kn_e_min(ec, base, kn_e_int(ec, e - total));
    }
    L->axis_value[a] = kn_e_add(ec, base, inner);
  }
  if (s->fuse_spatial) {
    /* pixel p of the fused axis is (p / ow, p % ow); the unit axis adds 0 */
    int r = L->out->rank;
    kn_expr *p = L->axis_value[r - 2], *ow = L->out->shape[r - 2];
    L->axis_value[r - 3] = kn_e_div(ec, p, ow);
    L->axis_value[r - 2] = kn_e_mod(ec, p, ow);
  }
}

/* ---- rewriting stage loads and placeholder loads ---- */

/* Flat index of acc for stage st, over its tile loops. */
static kn_expr *acc_index(lower *L, const stage *st) {
  kn_expr *ix = kn_e_int(L->ec, 0);
  for (int k = 0; k < st->n_tile; k++) {
    int li = st->tile[k];
    ix = kn_e_add(L->ec, kn_e_mul(L->ec, ix, L->piece_extent[li]), kn_e_var(L->ec, L->piece_var[li]));
  }
  return ix;
}

static kn_expr *stage_to_acc(kn_expr_ctx *c, kn_expr *load, void *ctx) {
  (void)c;
  lower *L = ctx;
  stage *st = find_stage(L, load->u.load.tensor);
  if (!st) return load;
  return kn_e_load(L->ec, st->acc, acc_index(L, st));
}

static kn_expr *placeholder_to_buffer(kn_expr_ctx *c, kn_expr *load, void *ctx) {
  (void)c;
  lower *L = ctx;
  kn_te_tensor *t = load->u.load.tensor;
  KN_ASSERT(t->kind == KN_TE_PLACEHOLDER, "stage load survived lowering");
  for (int p = 0; p < L->params->n; p++) {
    if (L->params->tensors[p] != t) continue;
    kn_expr *flat = kn_e_int(L->ec, 0);
    for (int i = 0; i < t->rank; i++)
      flat = kn_e_add(L->ec, kn_e_mul(L->ec, flat, t->shape[i]), load->u.load.indices[i]);
    return kn_e_load(L->ec, L->params->buffers[p], flat);
  }
  KN_UNREACHABLE("placeholder without a parameter buffer");
  return load;
}

static kn_expr *subst_axes(lower *L, kn_expr *e, kn_var *const *axes, int n, kn_expr **values) {
  for (int i = 0; i < n; i++) e = kn_e_substitute(L->ec, e, axes[i], values[i]);
  return e;
}

/* Final form of an expression: stage loads -> accumulators, O axes -> piece
 * arithmetic, placeholders -> flat buffer loads. */
static kn_expr *finish(lower *L, kn_expr *e) {
  e = kn_e_map_loads(L->ec, e, stage_to_acc, L);
  e = subst_axes(L, e, L->out->axes, L->out->rank, L->axis_value);
  return kn_e_map_loads(L->ec, e, placeholder_to_buffer, L);
}

/* ---- statements ---- */

static kn_stmt *wrap_loop(lower *L, int li, kn_for_kind kind, kn_stmt *body) {
  return kn_s_for(L->ec, L->piece_var[li], kn_e_int(L->ec, 0), L->piece_extent[li], kind, body);
}

static kn_stmt *wrap_tile(lower *L, const stage *st, kn_stmt *body) {
  for (int k = st->n_tile - 1; k >= 0; k--)
    body = wrap_loop(L, st->tile[k], L->s->loops[st->tile[k]].kind, body);
  return body;
}

static kn_expr *reduce_init(lower *L, kn_reduce_op op, kn_dtype t) {
  double v = op == KN_RED_SUM ? 0.0 : op == KN_RED_PROD ? 1.0 : op == KN_RED_MAX ? -INFINITY : INFINITY;
  if (kn_dtype_is_float(t)) return kn_e_float(L->ec, t, v);
  int64_t iv = op == KN_RED_SUM ? 0 : op == KN_RED_PROD ? 1 : op == KN_RED_MAX ? INT64_MIN : INT64_MAX;
  /* narrower integers start from their own lowest / highest value */
  int64_t lo = 0, hi = 0;
  switch (t) {
  case KN_DT_I8: lo = INT8_MIN, hi = INT8_MAX; break;
  case KN_DT_I4: lo = -8, hi = 7; break;
  case KN_DT_U4: lo = 0, hi = 15; break;
  case KN_DT_I2: lo = -2, hi = 1; break;
  case KN_DT_U2: lo = 0, hi = 3; break;
  case KN_DT_U8: lo = 0, hi = UINT8_MAX; break;
  case KN_DT_I16: lo = INT16_MIN, hi = INT16_MAX; break;
  case KN_DT_U16: lo = 0, hi = UINT16_MAX; break;
  case KN_DT_I32: lo = INT32_MIN, hi = INT32_MAX; break;
  case KN_DT_U32: lo = 0, hi = UINT32_MAX; break;
  default: break;
  }
  if (lo != hi) iv = op == KN_RED_MAX ? lo : op == KN_RED_MIN ? hi : iv;
  return kn_e_const_int(L->ec, t, iv);
}

static kn_expr *combine(lower *L, kn_reduce_op op, kn_expr *acc, kn_expr *v) {
  switch (op) {
  case KN_RED_SUM: return kn_e_add(L->ec, acc, v);
  case KN_RED_PROD: return kn_e_mul(L->ec, acc, v);
  case KN_RED_MAX: return kn_e_max(L->ec, acc, v);
  case KN_RED_MIN: return kn_e_min(L->ec, acc, v);
  }
  return acc;
}

static bool can_vectorize_reduction(lower *L, const stage *st) {
  kn_expr *red = st->t->body;
  int nr = red->u.reduce.n_axes;
  int64_t e;
  return L->s->reduce_lanes > 1 && st->n_tile == 0 && nr > 0 && red->u.reduce.op != KN_RED_PROD &&
         kn_dtype_is_float(st->t->dtype) && kn_e_is_const_int(red->u.reduce.extents[nr - 1], &e) &&
         e >= L->s->reduce_lanes;
}

/* A one-element stage whose last reduction axis is long: accumulate lanes
 * side by side (acc[0..V)), add the leftover elements into lane 0, then fold
 * the lanes into acc[0]. Reassociates the sum, as every vectorized
 * reduction does. */
static kn_stmt *vector_reduction(lower *L, stage *st, kn_expr *src, kn_var **rvars) {
  kn_expr_ctx *ec = L->ec;
  kn_expr *red = st->t->body;
  kn_reduce_op op = red->u.reduce.op;
  int nr = red->u.reduce.n_axes, V = st->vec_lanes;
  int64_t E = 0;
  kn_e_is_const_int(red->u.reduce.extents[nr - 1], &E);
  int64_t nvec = E / V, tail = E - nvec * V;
  kn_var *lane = kn_var_new(ec, "lane"), *ro = kn_var_new(ec, "ro"), *rt = kn_var_new(ec, "rt");
  kn_expr *lv = kn_e_var(ec, lane);
  kn_stmt *init = kn_s_for(ec, lane, kn_e_int(ec, 0), kn_e_int(ec, V), KN_FOR_VECTORIZED,
                           kn_s_store(ec, st->acc, lv, reduce_init(L, op, st->t->dtype)));
  kn_expr *main_src = kn_e_substitute(ec, src, rvars[nr - 1],
                                      kn_e_add(ec, kn_e_mul(ec, kn_e_var(ec, ro), kn_e_int(ec, V)), lv));
  kn_stmt *body = kn_s_for(ec, ro, kn_e_int(ec, 0), kn_e_int(ec, nvec), KN_FOR_SERIAL,
                           kn_s_for(ec, lane, kn_e_int(ec, 0), kn_e_int(ec, V), KN_FOR_VECTORIZED,
                                    kn_s_store(ec, st->acc, lv, combine(L, op, kn_e_load(ec, st->acc, lv), main_src))));
  if (tail > 0) {
    kn_expr *tail_src = kn_e_substitute(ec, src, rvars[nr - 1], kn_e_add(ec, kn_e_int(ec, nvec * V), kn_e_var(ec, rt)));
    kn_expr *zero = kn_e_int(ec, 0);
    body = kn_s_seq2(ec, body,
                     kn_s_for(ec, rt, zero, kn_e_int(ec, tail), KN_FOR_SERIAL,
                              kn_s_store(ec, st->acc, zero, combine(L, op, kn_e_load(ec, st->acc, zero), tail_src))));
  }
  for (int i = nr - 2; i >= 0; i--) {
    kn_expr *ext = subst_axes(L, red->u.reduce.extents[i], L->out->axes, L->out->rank, L->axis_value);
    body = kn_s_for(ec, rvars[i], kn_e_int(ec, 0), ext, KN_FOR_SERIAL, body);
  }
  kn_fn fold = op == KN_RED_SUM ? KN_FN_VREDUCE_ADD : op == KN_RED_MAX ? KN_FN_VREDUCE_MAX : KN_FN_VREDUCE_MIN;
  kn_expr *all = kn_e_load(ec, st->acc, kn_e_ramp(ec, kn_e_int(ec, 0), kn_e_int(ec, 1), V));
  kn_stmt *fin = kn_s_store(ec, st->acc, kn_e_int(ec, 0), kn_e_call1(ec, fold, all));
  kn_stmt *parts[3] = {init, body, fin};
  return kn_s_seq(ec, parts, 3);
}

static kn_expr *out_index(lower *L) {
  kn_expr *flat = kn_e_int(L->ec, 0);
  for (int i = 0; i < L->out->rank; i++)
    flat = kn_e_add(L->ec, kn_e_mul(L->ec, flat, L->out->shape[i]), L->axis_value[i]);
  return flat;
}

/* ---- packing the broadcast operand of a blocked reduction ---- */

typedef struct pack_ctx {
  lower *L;
  int nr;
  kn_var **rvars;
  kn_expr **rext;   /* this block's extents */
  int64_t *rmax;    /* their largest values (0: symbolic) */
} pack_ctx;

#define MAX_PACK_ELEMS (1 << 18)

/* The first placeholder load of the stage source that the innermost loop
 * does not index but the reduction does becomes a load of pack_buf, laid
 * out [loops in depth..attach it varies with][reduction axes][tile loops it
 * varies with]; pack_copy fills it for the current block. Loads that do not
 * fit (symbolic extents, too large) stay as they are: packing only moves
 * data, it never changes a value. */
static kn_expr *pack_load(kn_expr_ctx *c, kn_expr *load, void *ctx) {
  pack_ctx *p = ctx;
  lower *L = p->L;
  const kn_schedule *s = L->s;
  if (L->pack_buf || load->u.load.tensor->kind != KN_TE_PLACEHOLDER || s->n_loops < 1) return load;
  kn_expr *fin = finish(L, load);
  kn_expr *ix = fin->u.load.index;
  if (kn_e_uses_var(ix, L->piece_var[s->n_loops - 1])) return load;
  kn_var *vars[KN_SCHED_MAX_LOOPS + 2 * KN_MAX_RANK];
  kn_expr *ext[KN_SCHED_MAX_LOOPS + 2 * KN_MAX_RANK];
  int64_t size[KN_SCHED_MAX_LOOPS + 2 * KN_MAX_RANK];
  int n = 0;
  bool any_r = false;
  for (int pass = 0; pass < 3; pass++) {
    int lo = pass == 0 ? s->rsplit_depth : s->attach, hi = pass == 0 ? s->attach : s->n_loops;
    for (int i = pass == 1 ? 0 : lo; i < (pass == 1 ? p->nr : hi); i++) {
      kn_var *v = pass == 1 ? p->rvars[i] : L->piece_var[i];
      if (!kn_e_uses_var(ix, v)) continue;
      int64_t e = 0;
      if (pass == 1 ? (e = p->rmax[i]) < 1 : !kn_e_is_const_int(L->piece_extent[i], &e)) return load;
      vars[n] = v;
      ext[n] = pass == 1 ? p->rext[i] : L->piece_extent[i];
      size[n++] = e;
      any_r |= pass == 1;
    }
  }
  int64_t total = 1;
  for (int i = 0; i < n; i++) total *= size[i];
  if (!any_r || total > MAX_PACK_ELEMS) return load;
  L->pack_buf = kn_buffer_new(c, "packed", fin->dtype, KN_BUF_LOCAL, total);
  /* the copy runs over fresh variables; the read over the nest's own */
  kn_expr *flat = kn_e_int(c, 0), *copy_flat = kn_e_int(c, 0), *value = fin;
  kn_var *fresh[KN_SCHED_MAX_LOOPS + 2 * KN_MAX_RANK];
  for (int i = 0; i < n; i++) {
    fresh[i] = kn_var_new(c, kn_arena_printf(c->arena, "%s_p", vars[i]->name));
    flat = kn_e_add(c, kn_e_mul(c, flat, kn_e_int(c, size[i])), kn_e_var(c, vars[i]));
    copy_flat = kn_e_add(c, kn_e_mul(c, copy_flat, kn_e_int(c, size[i])), kn_e_var(c, fresh[i]));
    value = kn_e_substitute(c, value, vars[i], kn_e_var(c, fresh[i]));
  }
  kn_stmt *copy = kn_s_store(c, L->pack_buf, copy_flat, value);
  for (int i = n - 1; i >= 0; i--) {
    kn_expr *e = ext[i];
    for (int k = 0; k < n; k++) e = kn_e_substitute(c, e, vars[k], kn_e_var(c, fresh[k]));
    copy = kn_s_for(c, fresh[i], kn_e_int(c, 0), e, KN_FOR_SERIAL, copy);
  }
  L->pack_copy = copy;
  return kn_e_load(c, L->pack_buf, flat);
}

/* The nest of a contraction's reduction step as kn_sched_prefetch sees it;
 * NULL (no hints) for blocked reductions and nests it does not cover. */
static kn_stmt *prefetch_hints(lower *L, const kn_expr *src, kn_var **rvars, kn_expr **rext, int nr) {
  const kn_schedule *s = L->s;
  int last = s->n_loops - 1, col = loop_of(s, s->n_axes - 1, 0);
  if (!L->params->prefetch || L->block_var || L->n_stages != 1 || last < 0 || s->loops[last].kind != KN_FOR_VECTORIZED || col < 0 ||
      col >= s->attach || nr > 2 * KN_MAX_RANK)
    return NULL;
  kn_prefetch_nest n = {.col = L->piece_var[col], .lane = L->piece_var[last], .n_red = nr};
  if (!kn_e_is_const_int(L->piece_extent[col], &n.n_cols)) return NULL;
  for (int i = 0; i < nr; i++) {
    n.red[i] = rvars[i];
    if (!kn_e_is_const_int(rext[i], &n.red_ext[i])) return NULL;
  }
  for (int i = 0; i < col; i++) {
    int64_t e;
    n.outer[n.n_outer] = L->piece_var[i];
    n.outer_ext[n.n_outer++] = kn_e_is_const_int(L->piece_extent[i], &e) ? e : 0;
  }
  for (int i = col + 1; i < s->n_loops; i++) {
    int64_t e;
    bool known = kn_e_is_const_int(L->piece_extent[i], &e);
    if (i >= s->attach) {
      if (!known) return NULL;
      n.tile[n.n_tile] = L->piece_var[i], n.tile_ext[n.n_tile++] = e;
    } else if (known) {
      n.pass[n.n_pass] = L->piece_var[i], n.pass_ext[n.n_pass++] = e;
    } else {
      /* the batch: the hints run their course over the first image */
      n.other[n.n_other++] = L->piece_var[i];
    }
  }
  return kn_sched_prefetch(L->ec, src, &n);
}

/* init + update loops of one stage, computed at the attach depth. */
static kn_stmt *stage_code(lower *L, stage *st) {
  kn_expr_ctx *ec = L->ec;
  kn_expr *red = st->t->body;
  kn_expr *first = st->start ? finish(L, st->start) : reduce_init(L, red->u.reduce.op, st->t->dtype);
  kn_stmt *init = wrap_tile(L, st, kn_s_store(ec, st->acc, acc_index(L, st), first));
  if (L->block_var) {
    /* blocks after the first resume from the partial sums left in O */
    kn_stmt *resume = wrap_tile(L, st, kn_s_store(ec, st->acc, acc_index(L, st), kn_e_load(ec, L->out_buf, out_index(L))));
    init = kn_s_if(ec, kn_e_bin(ec, KN_E_EQ, kn_e_var(ec, L->block_var), kn_e_int(ec, 0)), init, resume);
  }
  /* source: stage axes -> O axes (then O axes -> pieces in finish) */
  kn_expr *src = st->source;
  for (int i = 0; i < st->t->rank; i++) {
    kn_expr *v = st->map[i] >= 0 ? kn_e_var(ec, L->out->axes[st->map[i]]) : kn_e_int(ec, 0);
    src = kn_e_substitute(ec, src, st->t->axes[i], v);
  }
  kn_var *rvars[KN_MAX_RANK * 2];
  int nr = red->u.reduce.n_axes;
  kn_expr *rext[KN_MAX_RANK * 2];
  int64_t rmax[KN_MAX_RANK * 2];
  for (int i = 0; i < nr; i++) {
    rvars[i] = kn_var_new(ec, red->u.reduce.axes[i]->name);
    kn_expr *value = kn_e_var(ec, rvars[i]);
    rext[i] = subst_axes(L, red->u.reduce.extents[i], L->out->axes, L->out->rank, L->axis_value);
    if (L->block_var && i == L->s->rsplit_axis) {
      /* this block's slice of the axis: [b*F, min(b*F + F, E)) */
      int64_t F = L->s->rsplit_factor, E = 0;
      kn_expr *start = kn_e_mul(ec, kn_e_var(ec, L->block_var), kn_e_int(ec, F));
      value = kn_e_add(ec, start, value);
      KN_ASSERT(kn_e_is_const_int(rext[i], &E), "blocked reduction axis with a symbolic extent");
      rext[i] = E % F == 0 ? kn_e_int(ec, F) : kn_e_min(ec, kn_e_int(ec, F), kn_e_sub(ec, kn_e_int(ec, E), start));
      rmax[i] = F < E ? F : E;
    } else if (!kn_e_is_const_int(rext[i], &rmax[i])) {
      rmax[i] = 0;
    }
    src = kn_e_substitute(ec, src, red->u.reduce.axes[i], value);
  }
  if (L->block_var && L->s->rsplit_pack) {
    pack_ctx p = {L, nr, rvars, rext, rmax};
    src = kn_e_map_loads(ec, src, pack_load, &p);
  }
  /* loads of earlier stages inside src are over O axes: map them too */
  src = finish(L, src);
  if (st->vec_lanes > 1) return vector_reduction(L, st, src, rvars);
  kn_expr *ai = acc_index(L, st);
  kn_stmt *update = kn_s_store(ec, st->acc, ai, combine(L, red->u.reduce.op, kn_e_load(ec, st->acc, ai), src));
  update = wrap_tile(L, st, update);
  kn_stmt *hints = prefetch_hints(L, src, rvars, rext, nr);
  if (hints) update = kn_s_seq2(ec, hints, update);
  int64_t copies = 1;
  for (int i = nr - 1; i >= 0; i--) {
    bool unroll = i >= nr - L->s->unroll_reduce;
    int64_t e = 0;
    if (unroll && (!kn_e_is_const_int(rext[i], &e) || e > KN_SCHED_MAX_UNROLL_AXIS ||
                   (copies *= e) > KN_SCHED_MAX_UNROLL_REDUCE)) {
      kn_diag_error(L->d, "unroll_reduction: reduction axis %d of %s has no constant extent of at most %d, or "
                    "the unrolled copies exceed %d", i, st->t->name, KN_SCHED_MAX_UNROLL_AXIS,
                    KN_SCHED_MAX_UNROLL_REDUCE);
      L->failed = true;
    }
    update = kn_s_for(ec, rvars[i], kn_e_int(ec, 0), rext[i], unroll ? KN_FOR_UNROLLED : KN_FOR_SERIAL, update);
  }
  return kn_s_seq2(ec, init, update);
}

/* Wraps loops [from, n_loops) around body, with their scheduled kinds. */
static kn_stmt *wrap_from(lower *L, int from, kn_stmt *body) {
  for (int i = L->s->n_loops - 1; i >= from; i--) body = wrap_loop(L, i, L->s->loops[i].kind, body);
  return body;
}

/* Fills the axis maps of stages read only by other stages' sources (LayerNorm's
 * InvStdDev output reads the variance stage, which reads the mean stage):
 * an index that is axis a of the reading stage maps to that stage's O axis. */
typedef struct map_walk {
  lower *L;
  stage *reader;
  bool changed;
} map_walk;

static kn_expr *map_through(kn_expr_ctx *c, kn_expr *load, void *ctx) {
  (void)c;
  map_walk *w = ctx;
  stage *t = find_stage(w->L, load->u.load.tensor);
  if (!t || t == w->reader) return load;
  for (int j = 0; j < t->t->rank; j++) {
    if (t->map[j] != -3) continue;
    kn_expr *ix = load->u.load.indices[j];
    int64_t k;
    for (int a = 0; a < w->reader->t->rank; a++)
      if (ix->kind == KN_E_VAR && ix->u.var == w->reader->t->axes[a] && w->reader->map[a] != -3) {
        t->map[j] = w->reader->map[a];
        w->changed = true;
      }
    if (t->map[j] == -3 && kn_e_is_const_int(ix, &k) && k == 0) {
      t->map[j] = -1;
      w->changed = true;
    }
  }
  return load;
}

static void propagate_maps(lower *L) {
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = 0; i < L->n_stages; i++) {
      map_walk w = {L, &L->stages[i], false};
      kn_e_map_loads(L->ec, L->stages[i].source, map_through, &w);
      changed |= w.changed;
    }
  }
}

/* Inlines O's body and registers its stages (shared by analyze and lower). */
static kn_expr *prepare(lower *L) {
  kn_te_tensor *out = L->out;
  kn_expr *body;
  if (out->body->kind == KN_E_REDUCE) {
    /* O is itself a reduction: split it into a stage and an identity epilogue. */
    kn_te_tensor *st = KN_NEW(L->ec->arena, kn_te_tensor);
    *st = *out;
    st->name = kn_arena_printf(L->ec->arena, "%s_acc", out->name);
    kn_expr *idx[KN_TE_MAX_RANK];
    for (int i = 0; i < out->rank; i++) idx[i] = kn_e_var(L->ec, out->axes[i]);
    body = kn_e_tload(L->ec, st, idx, out->rank);
  } else {
    body = inline_expr(L, out->body);
  }
  collect_stages(L, body, true);
  propagate_maps(L);
  for (int i = 0; i < L->n_stages && !L->failed; i++)
    for (int a = 0; a < L->stages[i].t->rank; a++)
      if (L->stages[i].map[a] == -3) {
        L->failed = true;
        kn_diag_error(L->d, "kernel '%s': stage '%s' is not read by the output", out->name,
                      L->stages[i].t->name);
      }
  return L->failed ? NULL : body;
}

/* Whether O's single stage covers O one to one: the stage has O's dtype
 * and is read at O's own indices, so O can hold its partial sums. Index 0
 * on an axis of extent 1 in both is O's own index too: an elementwise
 * epilogue reads a size-1 dim at 0 (broadcasting), which a static batch of
 * 1 has (mobilenet_v2 exported with batch 1 got no unroll_reduction for its
 * depthwise convs and ran slower than with a symbolic batch). */
static bool stage_is_output(const lower *L) {
  if (L->n_stages != 1) return false;
  const stage *st = &L->stages[0];
  if (st->t->dtype != L->out->dtype || st->t->rank != L->out->rank) return false;
  for (int a = 0; a < st->t->rank; a++) {
    int64_t es, eo;
    bool unit = st->map[a] == -1 && kn_e_is_const_int(st->t->shape[a], &es) && es == 1 &&
                kn_e_is_const_int(L->out->shape[a], &eo) && eo == 1;
    if (st->map[a] != a && !unit) return false;
  }
  return true;
}

void kn_sched_reduction_hints(kn_expr_ctx *ec, kn_te_tensor *out, kn_sched_hints *h) {
  kn_diag d;
  kn_diag_init(&d);
  lower L = {.ec = ec, .d = &d, .out = out};
  h->rsplit_ok = false;
  h->n_reduce = 0;
  if (prepare(&L) && stage_is_output(&L)) {
    const kn_expr *red = L.stages[0].t->body;
    h->rsplit_ok = red->u.reduce.n_axes <= KN_MAX_RANK;
    for (int i = 0; h->rsplit_ok && i < red->u.reduce.n_axes; i++) {
      int64_t e;
      h->reduce_extent[h->n_reduce++] = kn_e_is_const_int(red->u.reduce.extents[i], &e) ? e : 0;
    }
  }
  kn_diag_free(&d);
}

/* Checks that s->rsplit_* fits O (the autotuner validates the same before
 * it hands a schedule over); makes the block loop's variable. Returns the
 * number of blocks, 0 after a diagnostic. */
static int64_t check_blocking(lower *L) {
  const kn_schedule *s = L->s;
  const char *why = NULL;
  int64_t E = 0;
  if (s->fuse_spatial)
    why = "not with fuse_spatial (partial sums are kept at the output's own axes)";
  else if (!stage_is_output(L))
    why = "needs one reduction stage read at the output's own indices";
  else if (s->rsplit_axis < 0 || s->rsplit_axis >= L->stages[0].t->body->u.reduce.n_axes ||
           !kn_e_is_const_int(L->stages[0].t->body->u.reduce.extents[s->rsplit_axis], &E) || E < 1)
    why = "no constant reduction axis of that index";
  else if (s->rsplit_depth < s->n_parallel || s->rsplit_depth > s->attach || s->attach > s->n_loops)
    why = "the block loop must run between the parallel loop and compute_at";
  for (int a = 0; !why && a < L->out->rank; a++) {
    int64_t e, total = inner_product(s, a, 1);
    if (total > 1 && (!kn_e_is_const_int(L->out->shape[a], &e) || e % total != 0))
      why = "an output axis is split with overlap (a factor that does not divide it)";
  }
  if (why) {
    kn_diag_error(L->d, "kernel '%s': split_reduction: %s", L->out->name, why);
    return 0;
  }
  L->block_var = kn_var_new(L->ec, "kblock");
  return (E + s->rsplit_factor - 1) / s->rsplit_factor;
}

int kn_sched_analyze(kn_expr_ctx *ec, kn_te_tensor *out, uint32_t *stage_axes, int *n_stages,
                     kn_diag *d) {
  lower L = {.ec = ec, .d = d, .out = out};
  if (!prepare(&L)) return -1;
  *stage_axes = 0;
  for (int i = 0; i < L.n_stages; i++)
    for (int a = 0; a < L.stages[i].t->rank; a++)
      if (L.stages[i].map[a] >= 0) *stage_axes |= 1u << L.stages[i].map[a];
  *n_stages = L.n_stages;
  return 0;
}

/* Loads of stage tensor t in e. */
static int count_loads(const kn_expr *e, const kn_te_tensor *t) {
  switch (e->kind) {
  case KN_E_INT:
  case KN_E_FLOAT:
  case KN_E_VAR:
  case KN_E_RAMP: return 0;
  case KN_E_LOAD: {
    int n = e->u.load.tensor == t;
    for (int i = 0; i < e->u.load.n; i++) n += count_loads(e->u.load.indices[i], t);
    return n;
  }
  case KN_E_NOT:
  case KN_E_CAST:
  case KN_E_BROADCAST: return count_loads(e->u.un.a, t);
  case KN_E_SELECT:
    return count_loads(e->u.sel.cond, t) + count_loads(e->u.sel.t, t) + count_loads(e->u.sel.f, t);
  case KN_E_CALL: {
    int n = 0;
    for (int i = 0; i < e->u.call.n; i++) n += count_loads(e->u.call.args[i], t);
    return n;
  }
  case KN_E_REDUCE: return 1; /* reads everything: never hoisted through */
  default: return count_loads(e->u.bin.a, t) + count_loads(e->u.bin.b, t);
  }
}

/* e with its (one) sum S[...] + b, b reading no S, replaced by S[...]; b in
 * *start. Only the operations an epilogue wraps around it are walked. */
static kn_expr *drop_start(kn_expr_ctx *ec, kn_expr *e, const kn_te_tensor *t, kn_expr **start) {
  switch (e->kind) {
  case KN_E_ADD:
    for (int side = 0; side < 2; side++) {
      kn_expr *a = side ? e->u.bin.b : e->u.bin.a, *b = side ? e->u.bin.a : e->u.bin.b;
      if (a->kind == KN_E_LOAD && a->u.load.tensor == t && a->dtype == e->dtype && count_loads(b, t) == 0) {
        *start = b;
        return a;
      }
    }
    /* fall through */
  case KN_E_SUB:
  case KN_E_MUL:
  case KN_E_DIV:
  case KN_E_MIN:
  case KN_E_MAX: {
    kn_expr *a = drop_start(ec, e->u.bin.a, t, start);
    if (*start) return kn_e_bin(ec, e->kind, a, e->u.bin.b);
    kn_expr *b = drop_start(ec, e->u.bin.b, t, start);
    return *start ? kn_e_bin(ec, e->kind, e->u.bin.a, b) : e;
  }
  case KN_E_CAST: {
    kn_expr *a = drop_start(ec, e->u.un.a, t, start);
    return *start ? kn_e_cast(ec, e->dtype, a) : e;
  }
  default: return e;
  }
}

/* A sum whose epilogue adds a term that does not depend on it (a conv's or
 * Gemm's bias) starts from that term instead of 0, and the epilogue loses
 * the add: one vector add per output vector, 1/16 of a 1x1 conv over 16
 * channels, 1/9 of a 3x3 depthwise conv. The single stage must be O's own
 * (its accumulator, or O's partial sums between reduction blocks, holds
 * exactly the sum) and accumulate in scalars (not lanes folded at the end,
 * which would each start from the term). Rounds differently: the term joins
 * first, not last. */
static kn_expr *hoist_start(lower *L, kn_expr *body) {
  if (L->n_stages != 1 || !stage_is_output(L)) return body;
  stage *st = &L->stages[0];
  if (st->vec_lanes > 1 || st->t->body->u.reduce.op != KN_RED_SUM || !kn_dtype_is_float(st->t->dtype) ||
      count_loads(body, st->t) != 1)
    return body;
  kn_expr *start = NULL, *rest = drop_start(L->ec, body, st->t, &start);
  if (!start) return body;
  st->start = start;
  return rest;
}

kn_stmt *kn_sched_lower(kn_expr_ctx *ec, kn_te_tensor *out, const kn_schedule *s,
                        kn_buffer *out_buf, const kn_lower_params *params, kn_diag *d) {
  lower L = {.ec = ec, .d = d, .s = s, .out = out, .params = params, .out_buf = out_buf};
  KN_ASSERT(out->kind == KN_TE_COMPUTE && s->n_axes == out->rank, "schedule does not fit O");
  kn_expr *body = prepare(&L);
  if (!body || !set_extents(&L)) return NULL;
  make_pieces(&L);
  int64_t n_blocks = 0;
  if (s->rsplit_factor > 0 && !(n_blocks = check_blocking(&L))) return NULL;

  int attach = s->attach > s->n_loops ? s->n_loops : s->attach;
  for (int i = 0; i < L.n_stages; i++) {
    stage *st = &L.stages[i];
    int64_t size = 1;
    for (int li = attach; li < s->n_loops; li++) {
      bool mapped = false;
      for (int a = 0; a < st->t->rank; a++) mapped |= st->map[a] >= 0 && sched_axis(&L, st->map[a]) == s->loops[li].axis;
      if (!mapped) continue;
      int64_t e;
      if (!kn_e_is_const_int(L.piece_extent[li], &e)) {
        kn_diag_error(d, "kernel '%s': symbolic extent inside a tile", out->name);
        return NULL;
      }
      st->tile[st->n_tile++] = li;
      size *= e;
    }
    if (!L.block_var && can_vectorize_reduction(&L, st)) {
      st->vec_lanes = s->reduce_lanes;
      size = s->reduce_lanes;
    }
    st->acc = kn_buffer_new(ec, kn_arena_printf(ec->arena, "acc%d", i), st->t->dtype, KN_BUF_LOCAL, size);
  }

  body = hoist_start(&L, body);
  KN_ASSERT(L.n_stages == 0 || attach >= s->n_parallel, "stages attached inside the parallel loop");
  kn_stmt *inner = kn_s_store(ec, out_buf, out_index(&L), finish(&L, body));
  int from = L.n_stages ? attach : s->n_parallel;
  kn_stmt *nest = wrap_from(&L, from, inner);
  if (L.block_var) {
    /* blocks before the last store the partial sums; the last one the epilogue */
    const stage *st = &L.stages[0];
    kn_stmt *partial = wrap_from(&L, attach, kn_s_store(ec, out_buf, out_index(&L), kn_e_load(ec, st->acc, acc_index(&L, st))));
    kn_expr *last = kn_e_bin(ec, KN_E_EQ, kn_e_var(ec, L.block_var), kn_e_int(ec, n_blocks - 1));
    nest = kn_s_if(ec, last, nest, partial);
  }
  if (L.n_stages) {
    kn_stmt *parts[MAX_STAGES + 1];
    for (int i = 0; i < L.n_stages; i++) parts[i] = stage_code(&L, &L.stages[i]);
    if (L.failed) return NULL; /* a reduction the schedule cannot unroll */
    parts[L.n_stages] = nest;
    nest = kn_s_seq(ec, parts, L.n_stages + 1);
    for (int i = L.n_stages - 1; i >= 0; i--) nest = kn_s_alloc(ec, L.stages[i].acc, nest);
  }
  /* loops between the parallel prefix and the attach depth, with the
   * reduction block loop among them */
  for (int i = from; i >= s->n_parallel; i--) {
    if (i < from) nest = wrap_loop(&L, i, s->loops[i].kind, nest);
    if (L.block_var && i == s->rsplit_depth) {
      if (L.pack_copy) nest = kn_s_seq2(ec, L.pack_copy, nest);
      nest = kn_s_for(ec, L.block_var, kn_e_int(ec, 0), kn_e_int(ec, n_blocks), KN_FOR_SERIAL, nest);
      if (L.pack_buf) nest = kn_s_alloc(ec, L.pack_buf, nest);
    }
  }
  /* the parallel prefix: one fused loop, pieces recovered by div/mod */
  if (s->n_parallel > 0) {
    kn_var *f = kn_var_new(ec, "fused");
    kn_expr *ext = kn_e_int(ec, 1);
    for (int i = 0; i < s->n_parallel; i++) ext = kn_e_mul(ec, ext, L.piece_extent[i]);
    kn_expr *rest = kn_e_var(ec, f);
    kn_stmt *body = nest;
    /* innermost piece = rest % e_last; rest /= e_last; ... emitted as lets */
    kn_var *lets[KN_SCHED_MAX_LOOPS];
    kn_expr *vals[KN_SCHED_MAX_LOOPS];
    for (int i = s->n_parallel - 1; i >= 0; i--) {
      lets[i] = L.piece_var[i];
      vals[i] = i == 0 ? rest : kn_e_mod(ec, rest, L.piece_extent[i]);
      if (i > 0) rest = kn_e_div(ec, rest, L.piece_extent[i]);
    }
    for (int i = s->n_parallel - 1; i >= 0; i--) body = kn_s_let(ec, lets[i], vals[i], body);
    nest = kn_s_for(ec, f, kn_e_int(ec, 0), ext, KN_FOR_PARALLEL, body);
  }
  return nest;
}

kn_expr *kn_sched_inline(kn_expr_ctx *ec, kn_expr *e) {
  lower L = {.ec = ec};
  return inline_expr(&L, e);
}

kn_expr *kn_sched_to_buffers(kn_expr_ctx *ec, kn_expr *e, const kn_lower_params *params) {
  lower L = {.ec = ec, .params = params};
  return kn_e_map_loads(ec, e, placeholder_to_buffer, &L);
}

kn_expr *kn_sched_reduce_identity(kn_expr_ctx *ec, kn_reduce_op op, kn_dtype t) {
  lower L = {.ec = ec};
  return reduce_init(&L, op, t);
}

kn_expr *kn_sched_reduce_combine(kn_expr_ctx *ec, kn_reduce_op op, kn_expr *acc, kn_expr *v) {
  lower L = {.ec = ec};
  return combine(&L, op, acc, v);
}

kn_expr *kn_sched_stages(kn_expr_ctx *ec, kn_te_tensor *out, kn_sched_stage *stages, int *n_stages) {
  kn_diag d;
  kn_diag_init(&d);
  lower L = {.ec = ec, .d = &d, .out = out};
  kn_expr *body = out->kind == KN_TE_COMPUTE ? prepare(&L) : NULL;
  kn_diag_free(&d);
  *n_stages = body ? L.n_stages : 0;
  for (int i = 0; i < *n_stages; i++) {
    stages[i].t = L.stages[i].t;
    stages[i].source = L.stages[i].source;
    memcpy(stages[i].map, L.stages[i].map, sizeof stages[i].map);
  }
  return body;
}
