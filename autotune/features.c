/* features.c — the features of a candidate, read from its finalized loop IR.
 *
 * One walk over the statement tree with the stack of enclosing loops. At
 * each STORE it counts the float operations of the stored value (FMA = 2,
 * transcendental calls separately), the loads (vector or scalar, contiguous
 * or not, invariant in the innermost loop or not), integer index
 * arithmetic, and the store; each times the trip count of the loops around
 * it. For every enclosing loop it adds the store's flops over that loop and
 * the bytes its accesses touch inside it (footprint: lanes x the extents of
 * the loops inside whose variable the index uses; LOCAL buffers are
 * registers and touch no memory). The store doing the most work picks the
 * loop path whose innermost KN_AT_LEVELS levels are described: extent,
 * bytes touched vs L1 (32 KiB) and L2 (1 MiB), arithmetic intensity, and
 * the flops inside. Everything is at batch 1; symbolic extents count as 1.
 * Magnitudes are log2(1 + x) so the trees see comparable scales. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autotune/search.h"

#define MAX_DEPTH 48
#define MAX_LETS 256
#define MAX_LOOP_RECS 4096

typedef struct loop_rec {
  int64_t extent;
  kn_for_kind kind;
  double flops, bytes; /* over one execution of the loop */
} loop_rec;

typedef struct walk {
  const kn_var *batch;
  /* the stack */
  int depth;
  const kn_var *vars[MAX_DEPTH];
  int64_t ext[MAX_DEPTH];
  int rec[MAX_DEPTH]; /* loop_rec of each level, -1 if none was free */
  int n_lets;
  const kn_var *let_var[MAX_LETS];
  const kn_expr *let_val[MAX_LETS];
  loop_rec recs[MAX_LOOP_RECS];
  int n_recs;
  /* totals (times trip counts) */
  double flops, vec_flops, trans, int_ops, loads, vec_loads, load_elems, contiguous, strided, invariant, stores,
      store_elems, local_accesses, nodes, stores_static, local_elems, n_allocs;
  int max_lanes, max_depth;
  double par_extent;
  int n_parallel;
  /* the heaviest store */
  double heavy_work;
  int heavy_depth, heavy_rec[MAX_DEPTH];
  int64_t heavy_ext[MAX_DEPTH];
  double heavy_stores_in_loop; /* stores in the innermost loop body of the heaviest store */
  const kn_stmt *heavy_loop;
} walk;

static const char *const names[KN_AT_N_FEATURES] = {
    "flops", "vector_flops_ratio", "transcendental", "int_ops", "loads", "vector_loads_ratio", "load_elems",
    "contiguous_ratio", "strided_ratio", "invariant_ratio", "stores", "store_elems", "local_accesses",
    "max_lanes", "loop_depth", "parallel_extent", "parallel_balance", "parallel_tasks_per_thread", "ir_nodes",
    "static_stores", "local_elems", "allocs", "heavy_stores_per_iter", "flops_per_load", "innermost_extent",
    "has_parallel", "work_per_thread", "work_per_task",
    "l0_extent", "l0_bytes", "l0_intensity", "l0_over_l1", "l0_over_l2",
    "l1_extent", "l1_bytes", "l1_intensity", "l1_over_l1", "l1_over_l2",
    "l2_extent", "l2_bytes", "l2_intensity", "l2_over_l1", "l2_over_l2",
    "l3_extent", "l3_bytes", "l3_intensity", "l3_over_l1", "l3_over_l2"};

const char *kn_at_feature_name(int i) { return i >= 0 && i < KN_AT_N_FEATURES ? names[i] : "?"; }

static double lg(double x) { return log2(1.0 + (x > 0 ? x : 0)); }

static bool is_float(kn_dtype t) { return t == KN_DT_F32 || t == KN_DT_F64 || t == KN_DT_F16 || t == KN_DT_BF16; }

/* Whether e depends on loop variable v, seeing through enclosing lets. */
static bool uses(const walk *w, const kn_expr *e, const kn_var *v, int budget) {
  if (!e || budget <= 0) return false;
  switch (e->kind) {
  case KN_E_INT:
  case KN_E_FLOAT: return false;
  case KN_E_VAR:
    if (e->u.var == v) return true;
    for (int i = w->n_lets - 1; i >= 0; i--)
      if (w->let_var[i] == e->u.var) return uses(w, w->let_val[i], v, budget - 1);
    return false;
  case KN_E_NOT:
  case KN_E_CAST:
  case KN_E_BROADCAST: return uses(w, e->u.un.a, v, budget);
  case KN_E_SELECT: return uses(w, e->u.sel.cond, v, budget) || uses(w, e->u.sel.t, v, budget) || uses(w, e->u.sel.f, v, budget);
  case KN_E_CALL:
    for (int i = 0; i < e->u.call.n; i++)
      if (uses(w, e->u.call.args[i], v, budget)) return true;
    return false;
  case KN_E_LOAD: return uses(w, e->u.load.index, v, budget);
  case KN_E_RAMP: return uses(w, e->u.ramp.base, v, budget) || uses(w, e->u.ramp.stride, v, budget);
  case KN_E_REDUCE: return false;
  default: return uses(w, e->u.bin.a, v, budget) || uses(w, e->u.bin.b, v, budget);
  }
}

typedef struct counts {
  double flops, vec_flops, trans, int_ops, loads, vec_loads, load_elems, contiguous, strided, invariant, local, nodes;
} counts;

/* Bytes an access of buffer-element size `esz` with flat index `index`
 * touches over the loops at depth >= level (one execution of that loop). */
static double footprint(const walk *w, const kn_expr *index, int lanes, int esz, int level) {
  double n = lanes;
  for (int i = level; i < w->depth; i++)
    if (uses(w, index, w->vars[i], 64)) n *= (double)w->ext[i];
  return n * esz;
}

static void access_bytes(walk *w, const kn_expr *index, int lanes, int esz, double *bytes) {
  for (int lv = 0; lv < w->depth; lv++) bytes[lv] += footprint(w, index, lanes, esz, lv);
}

static void count_expr(walk *w, const kn_expr *e, counts *c, double *bytes) {
  if (!e) return;
  c->nodes++;
  switch (e->kind) {
  case KN_E_INT:
  case KN_E_FLOAT:
  case KN_E_VAR: return;
  case KN_E_NOT:
  case KN_E_CAST:
  case KN_E_BROADCAST: count_expr(w, e->u.un.a, c, bytes); return;
  case KN_E_SELECT:
    count_expr(w, e->u.sel.cond, c, bytes);
    count_expr(w, e->u.sel.t, c, bytes);
    count_expr(w, e->u.sel.f, c, bytes);
    if (is_float(e->dtype)) c->flops += e->lanes;
    return;
  case KN_E_CALL:
    for (int i = 0; i < e->u.call.n; i++) count_expr(w, e->u.call.args[i], c, bytes);
    if (e->u.call.fn == KN_FN_FMA) {
      c->flops += 2.0 * e->lanes;
      if (e->lanes > 1) c->vec_flops += 2.0 * e->lanes;
    } else if (e->u.call.fn == KN_FN_ABS || e->u.call.fn == KN_FN_FLOOR || e->u.call.fn == KN_FN_CEIL ||
               e->u.call.fn == KN_FN_ROUND) {
      c->flops += e->lanes;
    } else if (e->u.call.fn >= KN_FN_VREDUCE_ADD) {
      int lanes = e->u.call.n ? e->u.call.args[0]->lanes : 1;
      c->flops += lanes;
    } else {
      c->trans += e->lanes;
    }
    return;
  case KN_E_LOAD: {
    const kn_expr *ix = e->u.load.index;
    count_expr(w, ix, c, bytes);
    const kn_buffer *b = e->u.load.buffer;
    if (b && b->kind == KN_BUF_LOCAL) {
      c->local += 1;
      return;
    }
    c->loads += 1;
    c->load_elems += e->lanes;
    if (e->lanes > 1) c->vec_loads += 1;
    bool contiguous = ix && ix->kind == KN_E_RAMP && ix->u.ramp.stride->kind == KN_E_INT && ix->u.ramp.stride->u.ival == 1;
    bool gather = ix && ix->kind != KN_E_RAMP && ix->lanes > 1;
    if (contiguous) c->contiguous += 1;
    if (gather || (ix && ix->kind == KN_E_RAMP && !contiguous)) c->strided += 1;
    if (w->depth > 0 && !uses(w, ix, w->vars[w->depth - 1], 64)) c->invariant += 1;
    access_bytes(w, ix, e->lanes, b ? kn_dtype_size(b->dtype) : 4, bytes);
    return;
  }
  case KN_E_RAMP:
    count_expr(w, e->u.ramp.base, c, bytes);
    count_expr(w, e->u.ramp.stride, c, bytes);
    return;
  case KN_E_REDUCE: return;
  default:
    count_expr(w, e->u.bin.a, c, bytes);
    count_expr(w, e->u.bin.b, c, bytes);
    if (is_float(e->dtype)) {
      c->flops += e->lanes;
      if (e->lanes > 1) c->vec_flops += e->lanes;
    } else if (e->dtype == KN_DT_I64 || e->dtype == KN_DT_I32) {
      c->int_ops += e->lanes;
    }
    return;
  }
}

/* Integer value of e with the batch symbol at 1; false if it uses another
 * variable. */
static bool eval_at_batch1(const kn_expr *e, const kn_var *batch, int64_t *v) {
  int64_t a, b;
  switch (e->kind) {
  case KN_E_INT: *v = e->u.ival; return true;
  case KN_E_VAR: *v = 1; return e->u.var == batch;
  case KN_E_ADD: case KN_E_SUB: case KN_E_MUL: case KN_E_DIV: case KN_E_MOD: case KN_E_MIN: case KN_E_MAX:
    if (!eval_at_batch1(e->u.bin.a, batch, &a) || !eval_at_batch1(e->u.bin.b, batch, &b)) return false;
    switch (e->kind) {
    case KN_E_ADD: *v = a + b; return true;
    case KN_E_SUB: *v = a - b; return true;
    case KN_E_MUL: *v = a * b; return true;
    case KN_E_DIV: if (!b) return false; *v = a / b - ((a % b != 0) && ((a < 0) != (b < 0))); return true;
    case KN_E_MOD: if (!b) return false; *v = a % b; if (*v && ((*v < 0) != (b < 0))) *v += b; return true;
    case KN_E_MIN: *v = a < b ? a : b; return true;
    default: *v = a > b ? a : b; return true;
    }
  default: return false;
  }
}

static int64_t const_extent(const walk *w, const kn_expr *e) {
  int64_t v;
  return eval_at_batch1(e, w->batch, &v) && v > 0 ? v : 1;
}

static void on_store(walk *w, const kn_stmt *s, const kn_stmt *innermost_loop, int stores_in_body) {
  counts c;
  memset(&c, 0, sizeof c);
  double bytes[MAX_DEPTH];
  memset(bytes, 0, sizeof bytes);
  count_expr(w, s->u.store.value, &c, bytes);
  count_expr(w, s->u.store.index, &c, bytes);
  const kn_buffer *b = s->u.store.buffer;
  int lanes = s->u.store.value ? s->u.store.value->lanes : 1;
  if (b->kind == KN_BUF_LOCAL) c.local += 1;
  else access_bytes(w, s->u.store.index, lanes, kn_dtype_size(b->dtype), bytes);
  double trip = 1;
  for (int i = 0; i < w->depth; i++) trip *= (double)w->ext[i];
  w->flops += c.flops * trip;
  w->vec_flops += c.vec_flops * trip;
  w->trans += c.trans * trip;
  w->int_ops += c.int_ops * trip;
  w->loads += c.loads * trip;
  w->vec_loads += c.vec_loads * trip;
  w->load_elems += c.load_elems * trip;
  w->contiguous += c.contiguous * trip;
  w->strided += c.strided * trip;
  w->invariant += c.invariant * trip;
  w->local_accesses += c.local * trip;
  w->stores += trip;
  w->store_elems += lanes * trip;
  w->nodes += c.nodes;
  w->stores_static += 1;
  if (lanes > w->max_lanes) w->max_lanes = lanes;
  if (w->depth > w->max_depth) w->max_depth = w->depth;
  /* per loop: flops over one execution of it, bytes touched inside it */
  double inner = 1;
  for (int lv = w->depth - 1; lv >= 0; lv--) {
    inner *= (double)w->ext[lv];
    if (w->rec[lv] < 0) continue;
    loop_rec *r = &w->recs[w->rec[lv]];
    r->flops += (c.flops + c.trans) * inner;
    r->bytes += bytes[lv];
  }
  double work = (c.flops + c.trans + c.loads + 1) * trip;
  if (work > w->heavy_work) {
    w->heavy_work = work;
    w->heavy_depth = w->depth;
    memcpy(w->heavy_rec, w->rec, sizeof(int) * (size_t)w->depth);
    memcpy(w->heavy_ext, w->ext, sizeof(int64_t) * (size_t)w->depth);
    w->heavy_loop = innermost_loop;
    w->heavy_stores_in_loop = stores_in_body;
  }
}

static int count_stores(const kn_stmt *s) {
  if (!s) return 0;
  switch (s->kind) {
  case KN_S_STORE: return 1;
  case KN_S_FOR: return 0; /* another loop's body */
  case KN_S_ALLOC: return count_stores(s->u.alloc.body);
  case KN_S_LET: return count_stores(s->u.let.body);
  case KN_S_PREFETCH:
  case KN_S_GPU: return 0;
  case KN_S_IF: return count_stores(s->u.ifs.then_s) + count_stores(s->u.ifs.else_s);
  case KN_S_SEQ: {
    int n = 0;
    for (int i = 0; i < s->u.seq.n; i++) n += count_stores(s->u.seq.stmts[i]);
    return n;
  }
  }
  return 0;
}

static void visit(walk *w, const kn_stmt *s, const kn_stmt *loop, int body_stores) {
  if (!s) return;
  switch (s->kind) {
  case KN_S_STORE: on_store(w, s, loop, body_stores); return;
  case KN_S_PREFETCH: return; /* a hint; not a feature */
  case KN_S_GPU: return;      /* CPU features only */
  case KN_S_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) visit(w, s->u.seq.stmts[i], loop, body_stores);
    return;
  case KN_S_IF:
    visit(w, s->u.ifs.then_s, loop, body_stores);
    visit(w, s->u.ifs.else_s, loop, body_stores);
    return;
  case KN_S_ALLOC:
    w->n_allocs += 1;
    w->local_elems += (double)s->u.alloc.buffer->size;
    visit(w, s->u.alloc.body, loop, body_stores);
    return;
  case KN_S_LET:
    if (w->n_lets < MAX_LETS) {
      w->let_var[w->n_lets] = s->u.let.var;
      w->let_val[w->n_lets++] = s->u.let.value;
      visit(w, s->u.let.body, loop, body_stores);
      w->n_lets--;
    } else {
      visit(w, s->u.let.body, loop, body_stores);
    }
    return;
  case KN_S_FOR: {
    if (w->depth == MAX_DEPTH) return;
    int64_t e = const_extent(w, s->u.loop.extent);
    if (s->u.loop.kind == KN_FOR_PARALLEL) {
      w->n_parallel++;
      if ((double)e > w->par_extent) w->par_extent = (double)e;
    }
    int rec = -1;
    if (w->n_recs < MAX_LOOP_RECS) {
      rec = w->n_recs++;
      w->recs[rec] = (loop_rec){.extent = e, .kind = s->u.loop.kind};
    }
    w->vars[w->depth] = s->u.loop.var;
    w->ext[w->depth] = e;
    w->rec[w->depth] = rec;
    w->depth++;
    visit(w, s->u.loop.body, s, count_stores(s->u.loop.body));
    w->depth--;
    return;
  }
  }
}

void kn_at_features_of_kernel(const kn_kernel *k, int threads, float *f) {
  walk *w = calloc(1, sizeof *w);
  KN_ASSERT(w, "out of memory");
  w->batch = k->batch;
  visit(w, k->body, NULL, count_stores(k->body));
  if (threads < 1) threads = 1;
  int i = 0;
  double loads = w->loads > 0 ? w->loads : 1;
  f[i++] = (float)lg(w->flops + w->trans);
  f[i++] = (float)(w->flops > 0 ? w->vec_flops / w->flops : 0);
  f[i++] = (float)lg(w->trans);
  f[i++] = (float)lg(w->int_ops);
  f[i++] = (float)lg(w->loads);
  f[i++] = (float)(w->vec_loads / loads);
  f[i++] = (float)lg(w->load_elems);
  f[i++] = (float)(w->contiguous / loads);
  f[i++] = (float)(w->strided / loads);
  f[i++] = (float)(w->invariant / loads);
  f[i++] = (float)lg(w->stores);
  f[i++] = (float)lg(w->store_elems);
  f[i++] = (float)lg(w->local_accesses);
  f[i++] = (float)w->max_lanes;
  f[i++] = (float)w->max_depth;
  f[i++] = (float)lg(w->par_extent);
  /* share of the threads busy in the slowest round of parallel tasks */
  double pe = w->par_extent, rounds = pe > 0 ? ceil(pe / threads) : 0;
  f[i++] = (float)(rounds > 0 ? pe / (rounds * threads) : 0);
  f[i++] = (float)(pe / threads);
  f[i++] = (float)lg(w->nodes);
  f[i++] = (float)lg(w->stores_static);
  f[i++] = (float)lg(w->local_elems);
  f[i++] = (float)w->n_allocs;
  f[i++] = (float)lg(w->heavy_stores_in_loop);
  f[i++] = (float)(w->loads > 0 ? (w->flops + w->trans) / w->loads : 0);
  f[i++] = (float)lg(w->heavy_depth > 0 ? (double)w->heavy_ext[w->heavy_depth - 1] : 0);
  f[i++] = (float)(w->n_parallel > 0);
  /* work per thread and per parallel task: dispatch overhead vs work */
  double work = w->flops + w->trans + w->loads + w->stores;
  f[i++] = (float)lg(work / (pe > 1 ? (pe < threads ? pe : threads) : 1));
  f[i++] = (float)lg(work / (pe > 1 ? pe : 1));
  for (int lv = 0; lv < KN_AT_LEVELS; lv++) {
    int d = w->heavy_depth - 1 - lv;
    const loop_rec *r = d >= 0 && w->heavy_rec[d] >= 0 ? &w->recs[w->heavy_rec[d]] : NULL;
    double bytes = r ? r->bytes : 0, fl = r ? r->flops : 0;
    f[i++] = (float)lg(r ? (double)r->extent : 0);
    f[i++] = (float)lg(bytes);
    f[i++] = (float)lg(bytes > 0 ? fl / bytes : 0);
    f[i++] = (float)(bytes / 32768.0 > 64 ? 64 : bytes / 32768.0);
    f[i++] = (float)(bytes / 1048576.0 > 64 ? 64 : bytes / 1048576.0);
  }
  KN_ASSERT(i == KN_AT_N_FEATURES, "feature count");
  free(w);
}
