/* pass_data_dependent.c — NonZero, Compress and Unique, whose output shapes
 * depend on input values, compiled for the shapes the model declares.
 *
 * Kiln compiles static shapes. When such a node's output is a model output
 * whose static shape the ONNX graph declares (kn_pass_declared_shape), or
 * the shapes declared for the model outputs further down decide it (exactly
 * one count, among 0 and the dims they mention, makes shape inference give
 * them: NonZero -> Transpose -> output), the count K of selected elements
 * (NonZero, Compress) or of unique values U (Unique) is known, and the node
 * is rewritten into primitive graph ops that compute exactly that shape,
 * plus a run-time check (kn_pass_add_check) that the data really gives it: P_run returns KILN_ERR_VALUE, writing no output,
 * when it does not. When the deciding input is a constant (NonZero's data,
 * Compress's condition, Unique's X), the count is taken here and no check is
 * needed (fold_constants folds what is left).
 *
 * The rewrites are sort-free (toolkit of rewrite.h, new nodes named after
 * the node they replace):
 *  - selection of the first K marked positions of a 0/1 vector m of length c:
 *    cs = CumSum(m); pos[j] = the first i with cs_i == j + 1, an ArgMax over
 *    min(cs_i, j + 1) ([K, c], one fused kernel); count check
 *    ReduceSum(m) == K;
 *  - Compress(x, cond, axis): Gather(x, pos, axis) with m = cond (x
 *    flattened when axis is absent; cond may be shorter than the axis);
 *  - NonZero(x): m = Reshape(x, [-1]) != 0, and pos unravelled into
 *    coordinates by Div / Mod with constant strides, [rank, K] int64;
 *  - Unique(x, axis, sorted): the n slices along the axis (elements when no
 *    axis) as rows of a [n, m] matrix compared pairwise ([n, n, m]): equal
 *    rows, the first occurrence of each, and the rank of each row's value
 *    among the unique ones (sorted: how many unique rows are smaller,
 *    lexicographically; unsorted: how many unique rows first occur earlier)
 *    give inverse_indices; indices, counts and Y select by rank. The check
 *    counts the first occurrences, and refuses NaN (Equal would split equal
 *    NaNs that np.unique merges). n is at most 4096 (and n * n * m at most
 *    2^24), else the node is refused.
 * A node whose output shape is neither declared nor decided by a constant is
 * refused here, naming it; shape inference refuses one the pass cannot reach
 * (untyped inputs). Runs after the expansion (decompose, inline_control), before the first
 * full shape inference (it infers shapes quietly itself). Guarantees: no
 * NonZero / Compress / Unique with typed inputs is left; new values are
 * untyped until the next kn_infer_shapes; nodes are toposorted. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/passes/rewrite.h"
#include "ir/passes/passes.h"
#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"

enum {
  MAX_UNIQUE_ROWS = 4096,            /* n of Unique */
  MAX_UNIQUE_PAIRS = 1 << 24,        /* n * n * m of Unique */
};
#define MAX_SELECT_ELEMS ((int64_t)1 << 28) /* K * c of a selection */

static bool is_data_dependent(kn_op op) {
  return op == KN_OP_NON_ZERO || op == KN_OP_COMPRESS || op == KN_OP_UNIQUE;
}

static int64_t numel(const kn_shape *s) {
  int64_t n = 1;
  for (int k = 0; k < s->rank; k++) n *= s->dim[k];
  return n;
}

/* "[2, 3]" into buf; dim `count_axis` (-1: none) written as "count". */
static const char *shape_str_count(const kn_shape *s, int count_axis, char *buf, size_t size) {
  size_t at = (size_t)snprintf(buf, size, "[");
  for (int k = 0; k < s->rank && at < size; k++) {
    if (k == count_axis) at += (size_t)snprintf(buf + at, size - at, "%scount", k ? ", " : "");
    else at += (size_t)snprintf(buf + at, size - at, "%s%lld", k ? ", " : "", (long long)s->dim[k]);
  }
  if (at < size) snprintf(buf + at, size - at, "]");
  return buf;
}

static const char *shape_str(const kn_shape *s, char *buf, size_t size) {
  return shape_str_count(s, -1, buf, size);
}

/* An int64 constant of rank `rank`, all dims 1 but `axis`, which holds
 * start, start + 1, ... (n values). */
static int iota(kn_rw *b, int64_t n, int64_t start, int rank, int axis) {
  kn_shape s = {.rank = rank};
  for (int k = 0; k < rank; k++) s.dim[k] = k == axis ? n : 1;
  int v = kn_rw_const(b, KN_DT_I64, &s, NULL);
  int64_t *data = b->g->values[v].data;
  for (int64_t i = 0; i < n; i++) data[i] = start + i;
  return v;
}

/* 1 where v (of dtype t) is nonzero (NaN included), else 0; int64. */
static int marks_of(kn_rw *b, int v, kn_dtype t) {
  if (t == KN_DT_BOOL) return kn_rw_cast(b, v, KN_DT_I64);
  int nz = kn_rw_un(b, KN_OP_NOT, kn_rw_bin(b, KN_OP_EQUAL, v, kn_rw_scalar(b, t, 0)));
  return kn_rw_cast(b, nz, KN_DT_I64);
}

/* The nonzero elements among the first `c` of constant v. */
static int64_t count_nonzero_const(const kn_graph *g, int v, int64_t c) {
  const kn_value *val = &g->values[v];
  int64_t count = 0;
  for (int64_t i = 0; i < c; i++) count += kn_ref_load(val->dtype, val->data, i) != 0;
  return count;
}

/* The positions (int64 [K]) of the first K ones of 0/1 int64 vector m of
 * length c (c >= 1): the first i where min(CumSum(m)_i, j + 1) reaches its
 * maximum (ArgMax keeps the first), j + 1 when the data holds that many
 * ones; always in [0, c). One kernel: the Min is inlined into the ArgMax. */
static int select_positions(kn_rw *b, int m, int64_t k) {
  int64_t zero = 0;
  int cs = kn_rw_bin(b, KN_OP_CUM_SUM, m, kn_rw_scalar(b, KN_DT_I64, 0));
  int capped = kn_rw_bin(b, KN_OP_MIN, kn_rw_unsqueeze(b, cs, &zero, 1), iota(b, k, 1, 2, 0)); /* [K, c] */
  int pos = kn_rw_un(b, KN_OP_ARG_MAX, capped);
  kn_rw_attr_int(b, "axis", 1);
  kn_rw_attr_int(b, "keepdims", 0);
  return pos;
}

/* bool scalar: sum of int64 vector m == k. */
static int count_is(kn_rw *b, int m, int64_t k) {
  int sum = kn_rw_reduce(b, KN_OP_REDUCE_SUM, m, NULL, 0, false);
  return kn_rw_bin(b, KN_OP_EQUAL, sum, kn_rw_scalar(b, KN_DT_I64, (double)k));
}

static bool batched(const kn_value *v) { return v->shape.batch_mask != 0; }

/* ---- counts decided by declared outputs further down ---- */

/* The shapes of a node's outputs for a candidate count: output k has dtype
 * dtype[k] and shape shape[k], whose dim count_axis[k] (-1: none) is the
 * count. */
typedef struct count_plan {
  int n_out;
  kn_dtype dtype[4];
  kn_shape shape[4];
  int count_axis[4];
} count_plan;

enum { MAX_COUNT_TRIES = 64 };

static void cand_add(int64_t *cands, int *n, int64_t v, int64_t max) {
  for (int i = 0; i < *n; i++)
    if (cands[i] == v) return;
  if (v >= 0 && v <= max && *n < MAX_COUNT_TRIES - 1) cands[(*n)++] = v; /* room for the probe */
}

/* The count in [0, max] for which shape inference gives every declared model
 * output downstream of node b->node its declared shape, when the node's own
 * outputs are not declared (NonZero -> Transpose -> output). Tries 0 and
 * every dim the declared outputs mention (and one they do not, which must
 * not fit), with the node removed and its outputs typed by plan p; then adds the node back (b->node is its new
 * index; every other node index may have changed). Returns the count, or -1
 * (*n_match: how many counts fit; 0 also when nothing declared is
 * downstream). */
static int64_t count_downstream(kn_rw *b, const count_plan *p, int64_t max, int *n_match) {
  kn_graph *g = b->g;
  kn_node saved = g->nodes[b->node];
  *n_match = 0;
  bool *tainted = calloc((size_t)g->n_values + 1, sizeof(bool));
  KN_ASSERT(tainted, "out of memory");
  for (int k = 0; k < saved.n_out; k++) tainted[saved.out[k]] = true;
  for (int i = 0; i < g->n_nodes; i++) { /* toposorted */
    const kn_node *n = &g->nodes[i];
    bool hit = false;
    for (int k = 0; k < n->n_in && !n->dead; k++) hit |= n->in[k] >= 0 && tainted[n->in[k]];
    for (int k = 0; k < n->n_out && hit; k++) tainted[n->out[k]] = true;
  }
  int64_t cands[MAX_COUNT_TRIES];
  int n_cands = 0;
  cand_add(cands, &n_cands, 0, max);
  bool any_below = false;
  for (int o = 0; g->out_declared && o < g->n_outputs - g->n_checks; o++) {
    if (g->out_declared[o].rank < 0 || !tainted[g->outputs[o]]) continue;
    any_below = true;
    for (int k = 0; k < g->out_declared[o].rank; k++) cand_add(cands, &n_cands, g->out_declared[o].dim[k], max);
  }
  /* and a count no declared dim mentions (beyond max): when that one fits
   * too, the declared shapes do not decide the count (a ReduceSum of it) */
  int64_t probe = max + 1;
  for (int c = 0; c < n_cands; c++)
    if (cands[c] >= probe) probe = cands[c] + 1;
  cands[n_cands++] = probe;
  int64_t found = -1;
  if (any_below) {
    kn_pass_kill_node(g, b->node);
    /* its outputs stand as graph inputs meanwhile (toposort wants every
     * value defined) */
    int *inputs = g->inputs, n_inputs = g->n_inputs;
    g->inputs = KN_NEW_ARRAY(&g->arena, int, n_inputs + saved.n_out);
    memcpy(g->inputs, inputs, sizeof(int) * (size_t)n_inputs);
    for (int k = 0; k < saved.n_out; k++) g->inputs[g->n_inputs++] = saved.out[k];
    for (int c = 0; c < n_cands; c++) {
      for (int k = 0; k < p->n_out && k < saved.n_out; k++) {
        kn_value *v = &g->values[saved.out[k]];
        v->dtype = p->dtype[k];
        v->shape = p->shape[k];
        if (p->count_axis[k] >= 0) v->shape.dim[p->count_axis[k]] = cands[c];
        v->shape_known = true;
      }
      kn_infer_shapes_quiet(g); /* drops the dead node: its outputs keep these shapes */
      bool match = true;
      for (int o = 0; o < g->n_outputs - g->n_checks && match; o++) {
        const kn_value *v = &g->values[g->outputs[o]];
        if (g->out_declared[o].rank < 0 || !tainted[g->outputs[o]]) continue;
        match = v->shape_known && !v->shape.batch_mask && kn_shape_equal(&v->shape, &g->out_declared[o]);
      }
      if (match) {
        found = cands[c];
        ++*n_match;
      }
    }
    g->inputs = inputs;
    g->n_inputs = n_inputs;
    b->node = kn_graph_add_node(g, saved.op, saved.name, saved.in, saved.n_in, saved.out, saved.n_out);
    kn_node *n = &g->nodes[b->node];
    n->op_type = saved.op_type;
    n->domain = saved.domain;
    n->n_attr = saved.n_attr;
    n->attrs = saved.attrs;
  }
  free(tainted);
  return *n_match == 1 ? found : -1;
}

/* The diagnostic for a count nothing decides. */
static int count_undecided(kn_rw *b, int n_match, const char *what) {
  if (n_match > 1)
    return kn_rw_fail(b, "its output shape depends on input values, and the output shapes the model declares "
                         "further down allow several counts: %s", what);
  return kn_rw_fail(b, "its output shape depends on input values: %s", what);
}

/* ---- NonZero ---- */

static int nonzero(kn_rw *b) {
  kn_graph *g = b->g;
  int x = kn_rw_in(b, 0), out = g->nodes[b->node].out[0];
  kn_shape xs = kn_rw_val(b, x)->shape, decl;
  char buf[160];
  int r = xs.rank;
  if (batched(kn_rw_val(b, x))) return kn_rw_fail(b, "input 'X' has the batch dimension; its shape must be static");
  if (r == 0) return kn_rw_fail(b, "input 'X' is a scalar; only tensors of rank >= 1 are supported");
  int64_t n = numel(&xs), k;
  bool is_const = kn_rw_val(b, x)->data != NULL, declared = kn_pass_declared_shape(g, out, &decl);
  if (declared && (decl.rank != 2 || decl.dim[0] != r))
    return kn_rw_fail(b, "output '%s' declares shape %s; NonZero of a rank-%d input gives [%d, count]",
                      g->values[out].name, shape_str(&decl, buf, sizeof buf), r, r);
  if (is_const) {
    k = count_nonzero_const(g, x, n);
    if (declared && decl.dim[1] != k)
      return kn_rw_fail(b, "output '%s' declares %lld nonzero elements; the constant input has %lld",
                        g->values[out].name, (long long)decl.dim[1], (long long)k);
  } else if (declared) {
    k = decl.dim[1];
  } else {
    count_plan p = {.n_out = 1, .dtype = {KN_DT_I64}, .shape = {{.rank = 2, .dim = {r, 0}}}, .count_axis = {1}};
    int n_match;
    k = count_downstream(b, &p, n, &n_match);
    if (k < 0)
      return count_undecided(b, n_match, kn_arena_printf(&g->arena, "output '%s' must be a model output declaring a "
                                                         "static shape [%d, count] (or 'X' a constant)",
                                                         g->values[out].name, r));
  }
  if (k > n) return kn_rw_fail(b, "output '%s' declares %lld nonzero elements; the input has only %lld",
                               g->values[out].name, (long long)k, (long long)n);
  if ((double)k * (double)n > (double)MAX_SELECT_ELEMS)
    return kn_rw_fail(b, "%lld selected of %lld elements is too large to compile", (long long)k, (long long)n);
  kn_pass_kill_node(g, b->node);
  int m = marks_of(b, kn_rw_reshape(b, x, &n, 1), kn_rw_val(b, x)->dtype);
  if (k == 0) {
    kn_shape empty = {.rank = 2, .dim = {r, 0}};
    kn_rw_output(b, 0, kn_rw_const(b, KN_DT_I64, &empty, NULL));
  } else {
    int pos = select_positions(b, m, k);
    kn_shape col = {.rank = 2, .dim = {r, 1}};
    int64_t strides[KN_MAX_RANK], dims[KN_MAX_RANK], acc = 1, zero = 0;
    for (int d = r - 1; d >= 0; d--) {
      strides[d] = acc;
      dims[d] = xs.dim[d];
      acc *= xs.dim[d];
    }
    int q = kn_rw_bin(b, KN_OP_DIV, kn_rw_unsqueeze(b, pos, &zero, 1), kn_rw_const(b, KN_DT_I64, &col, strides));
    kn_rw_output(b, 0, kn_rw_bin(b, KN_OP_MOD, q, kn_rw_const(b, KN_DT_I64, &col, dims)));
  }
  if (!is_const && n > 0) kn_pass_add_check(g, count_is(b, m, k)); /* an empty input has no nonzeros */
  return 0;
}

/* ---- Compress ---- */

static int compress(kn_rw *b) {
  kn_graph *g = b->g;
  const kn_node *node = &g->nodes[b->node];
  int x = kn_rw_in(b, 0), cond = kn_rw_in(b, 1), out = node->out[0];
  const kn_attr *axis_attr = kn_node_attr(node, "axis");
  int64_t axis_value = axis_attr ? axis_attr->i : 0;
  kn_shape xs = kn_rw_val(b, x)->shape, cs = kn_rw_val(b, cond)->shape, decl;
  char buf[160], buf2[160];
  if (batched(kn_rw_val(b, x)) || batched(kn_rw_val(b, cond)))
    return kn_rw_fail(b, "an input has the batch dimension; its shapes must be static");
  if (cs.rank != 1) return kn_rw_fail(b, "input 'condition' must be 1-D, got %s", shape_str(&cs, buf, sizeof buf));
  int axis = 0;
  kn_shape ys = xs; /* x as selected from: flattened without an axis */
  if (axis_attr) {
    axis = kn_axis_norm(axis_value, xs.rank);
    if (axis < 0)
      return kn_rw_fail(b, "attribute 'axis' = %lld is out of range for input 'input' of rank %d",
                        (long long)axis_value, xs.rank);
  } else {
    ys = (kn_shape){.rank = 1, .dim = {numel(&xs)}};
  }
  int64_t len = ys.dim[axis], c = cs.dim[0], k;
  if (c > len)
    return kn_rw_fail(b, "input 'condition' has %lld elements, more than the %lld it selects from",
                      (long long)c, (long long)len);
  bool is_const = kn_rw_val(b, cond)->data != NULL, declared = kn_pass_declared_shape(g, out, &decl);
  if (declared) {
    kn_shape want = ys;
    want.dim[axis] = decl.rank == ys.rank ? decl.dim[axis] : 0;
    if (!kn_shape_equal(&want, &decl) || decl.dim[axis] > c) {
      return kn_rw_fail(b, "output '%s' declares shape %s; Compress gives %s, count <= %lld",
                        g->values[out].name, shape_str(&decl, buf, sizeof buf),
                        shape_str_count(&ys, axis, buf2, sizeof buf2), (long long)c);
    }
  }
  if (is_const) {
    k = count_nonzero_const(g, cond, c);
    if (declared && decl.dim[axis] != k)
      return kn_rw_fail(b, "output '%s' declares %lld selected along axis %d; the constant condition selects %lld",
                        g->values[out].name, (long long)decl.dim[axis], axis, (long long)k);
  } else if (declared) {
    k = decl.dim[axis];
  } else {
    count_plan p = {.n_out = 1, .dtype = {kn_rw_val(b, x)->dtype}, .shape = {ys}, .count_axis = {axis}};
    int n_match;
    k = count_downstream(b, &p, c, &n_match);
    if (k < 0)
      return count_undecided(b, n_match, kn_arena_printf(&g->arena, "output '%s' must be a model output declaring a "
                                                         "static shape (or 'condition' a constant)",
                                                         g->values[out].name));
  }
  if ((double)k * (double)c > (double)MAX_SELECT_ELEMS)
    return kn_rw_fail(b, "%lld selected of %lld elements is too large to compile", (long long)k, (long long)c);
  kn_pass_kill_node(g, b->node);
  int src = axis_attr ? x : kn_rw_reshape(b, x, ys.dim, 1);
  int m = marks_of(b, cond, kn_rw_val(b, cond)->dtype);
  if (k == 0) {
    kn_shape empty = ys;
    empty.dim[axis] = 0;
    kn_rw_output(b, 0, kn_rw_const(b, kn_rw_val(b, x)->dtype, &empty, NULL));
  } else {
    int y = kn_rw_bin(b, KN_OP_GATHER, src, select_positions(b, m, k));
    kn_rw_attr_int(b, "axis", axis);
    kn_rw_output(b, 0, y);
  }
  if (!is_const && c > 0) kn_pass_add_check(g, count_is(b, m, k)); /* an empty condition selects nothing */
  return 0;
}

/* ---- Unique ---- */

/* The number of unique values U the declared outputs of Unique give (-1:
 * none declares one); -1 with a diagnostic (*bad) when they disagree with
 * each other or with the input. */
static int64_t unique_count(kn_rw *b, const kn_shape *xs, int axis, bool has_axis, int64_t n, bool *bad) {
  kn_graph *g = b->g;
  const kn_node *node = &g->nodes[b->node];
  int64_t u = -1;
  char buf[160];
  *bad = false;
  for (int k = 0; k < node->n_out && k < 4; k++) {
    kn_shape decl, want;
    int v = node->out[k];
    if (!kn_pass_declared_shape(g, v, &decl)) continue;
    if (k == 0 && has_axis) {
      want = *xs;
      want.dim[axis] = decl.rank == xs->rank ? decl.dim[axis] : 0;
    } else {
      want = (kn_shape){.rank = 1, .dim = {decl.rank == 1 ? decl.dim[0] : 0}};
    }
    if (k == 2) want.dim[0] = n;
    int64_t here = want.dim[k == 0 ? axis : 0];
    if (!kn_shape_equal(&want, &decl) || (k != 2 && (here < 1 || here > n)) || (k != 2 && u >= 0 && here != u)) {
      *bad = true;
      kn_rw_fail(b, "output %d '%s' declares shape %s, which does not fit an input of %lld %s%s", k,
                 g->values[v].name, shape_str(&decl, buf, sizeof buf), (long long)n, has_axis ? "slices" : "elements",
                 u >= 0 ? " and the other outputs" : "");
      return -1;
    }
    if (k != 2) u = here;
  }
  return u;
}

/* The number of distinct slices along `axis` (n of them) of constant x
 * (its elements when the node has no axis: axis 0 of the flat data); -1
 * when it holds NaN. */
static int64_t unique_count_const(const kn_graph *g, int x, int axis, int64_t n) {
  const kn_value *v = &g->values[x];
  int64_t total = numel(&v->shape), inner = 1, count = 0;
  if (n < total) /* else every other dim is 1, or no axis: inner 1 */
    for (int k = axis + 1; k < v->shape.rank; k++) inner *= v->shape.dim[k];
  int64_t outer = total / (n * inner);
  for (int64_t e = 0; e < total; e++)
    if (isnan(kn_ref_load(v->dtype, v->data, e))) return -1;
  for (int64_t i = 0; i < n; i++) {
    bool seen = false;
    for (int64_t j = 0; j < i && !seen; j++) {
      bool same = true;
      for (int64_t o = 0; o < outer && same; o++)
        for (int64_t p = 0; p < inner && same; p++)
          same = kn_ref_load(v->dtype, v->data, (o * n + i) * inner + p) ==
                 kn_ref_load(v->dtype, v->data, (o * n + j) * inner + p);
      seen = same;
    }
    count += !seen;
  }
  return count;
}

/* bool [n, n]: row j of x2 ([n, m], compared as views a [n, 1, m] and bv
 * [1, n, m], ne = a != bv, nei its int32) is lexicographically smaller than
 * row i: at their first differing element (m > 1). */
static int rows_less(kn_rw *b, int a, int bv, int ne, int nei) {
  int64_t two = 2;
  int cs = kn_rw_bin(b, KN_OP_CUM_SUM, nei, kn_rw_scalar(b, KN_DT_I64, 2));
  int first_diff = kn_rw_bin(b, KN_OP_AND, ne, kn_rw_bin(b, KN_OP_EQUAL, cs, kn_rw_scalar(b, KN_DT_I32, 1)));
  int lt = kn_rw_bin(b, KN_OP_AND, first_diff, kn_rw_bin(b, KN_OP_LESS, bv, a));
  int any = kn_rw_reduce(b, KN_OP_REDUCE_MAX, kn_rw_cast(b, lt, KN_DT_I32), &two, 1, false);
  return kn_rw_bin(b, KN_OP_EQUAL, any, kn_rw_scalar(b, KN_DT_I32, 1));
}

static int unique(kn_rw *b) {
  kn_graph *g = b->g;
  const kn_node *node = &g->nodes[b->node];
  int x = kn_rw_in(b, 0);
  const kn_attr *axis_attr = kn_node_attr(node, "axis");
  int64_t axis_value = axis_attr ? axis_attr->i : 0;
  bool sorted = kn_node_attr_int(node, "sorted", 1) != 0;
  kn_shape xs = kn_rw_val(b, x)->shape;
  kn_dtype t = kn_rw_val(b, x)->dtype;
  if (batched(kn_rw_val(b, x))) return kn_rw_fail(b, "input 'X' has the batch dimension; its shape must be static");
  int axis = 0;
  if (axis_attr && (axis = kn_axis_norm(axis_value, xs.rank)) < 0)
    return kn_rw_fail(b, "attribute 'axis' = %lld is out of range for input 'X' of rank %d", (long long)axis_value,
                      xs.rank);
  int64_t total = numel(&xs), n = axis_attr ? xs.dim[axis] : total, m = n ? total / n : 0;
  if (n == 0) return kn_rw_fail(b, "input 'X' is empty; Unique of an empty tensor is not supported");
  if (n > MAX_UNIQUE_ROWS || (double)n * (double)n * (double)m > MAX_UNIQUE_PAIRS)
    return kn_rw_fail(b, "input 'X' has %lld %s%s: too large for the pairwise comparison Kiln compiles Unique "
                         "into (at most %d, and n * n * slice size %d)", (long long)n, axis_attr ? "slices" : "elements",
                      axis_attr ? kn_arena_printf(&g->arena, " of %lld elements", (long long)m) : "", MAX_UNIQUE_ROWS,
                      MAX_UNIQUE_PAIRS);
  bool bad, is_const = kn_rw_val(b, x)->data != NULL;
  int64_t u = unique_count(b, &xs, axis, axis_attr != NULL, n, &bad);
  if (bad) return -1;
  if (is_const) {
    int64_t have = unique_count_const(g, x, axis, n);
    if (have < 0) return kn_rw_fail(b, "the constant input 'X' holds NaN, which Kiln's Unique does not merge");
    if (u >= 0 && u != have)
      return kn_rw_fail(b, "the outputs declare %lld unique %s; the constant input 'X' has %lld", (long long)u,
                        axis_attr ? "slices" : "values", (long long)have);
    u = have;
  }
  if (u < 0) {
    kn_shape ys = xs, vec = {.rank = 1, .dim = {n}};
    if (!axis_attr) ys = vec;
    count_plan p = {.n_out = 4,
                    .dtype = {t, KN_DT_I64, KN_DT_I64, KN_DT_I64},
                    .shape = {ys, vec, vec, vec},
                    .count_axis = {axis, 0, -1, 0}};
    int n_match;
    u = count_downstream(b, &p, n, &n_match);
    if (u < 0)
      return count_undecided(b, n_match, "output 'Y', 'indices' or 'counts' must be a model output declaring a static "
                                         "shape (or 'X' a constant)");
  }
  kn_pass_kill_node(g, b->node);
  /* x2: [n, m], row i = slice i (moved to the front) */
  int moved = x;
  if (axis_attr && axis != 0) {
    int64_t perm[KN_MAX_RANK];
    perm[0] = axis;
    for (int k = 0, j = 1; k < xs.rank; k++)
      if (k != axis) perm[j++] = k;
    moved = kn_rw_un(b, KN_OP_TRANSPOSE, x);
    kn_rw_attr_ints(b, "perm", perm, xs.rank);
  }
  int64_t rows[2] = {n, m}, flat = total, zero = 0, one = 1;
  int x2 = kn_rw_reshape(b, moved, rows, 2);
  if (t == KN_DT_BOOL) x2 = kn_rw_cast(b, x2, KN_DT_U8);
  int a, bv, ne = -1, nei = -1, eq; /* eq [n, n]: rows i and j are equal */
  if (m == 1) { /* elements: [n, 1] against [1, n] */
    a = x2;
    bv = kn_rw_reshape(b, x2, (int64_t[]){1, n}, 2);
    eq = kn_rw_bin(b, KN_OP_EQUAL, a, bv);
  } else {
    a = kn_rw_unsqueeze(b, x2, &one, 1);   /* [n, 1, m]: row i */
    bv = kn_rw_unsqueeze(b, x2, &zero, 1); /* [1, n, m]: row j */
    ne = kn_rw_un(b, KN_OP_NOT, kn_rw_bin(b, KN_OP_EQUAL, a, bv));
    nei = kn_rw_cast(b, ne, KN_DT_I32);
    int64_t two = 2;
    int differ = kn_rw_reduce(b, KN_OP_REDUCE_MAX, nei, &two, 1, false);
    eq = kn_rw_bin(b, KN_OP_EQUAL, differ, kn_rw_scalar(b, KN_DT_I32, 0));
  }
  kn_shape sq = {.rank = 2, .dim = {n, n}};
  int lower = kn_rw_const(b, KN_DT_BOOL, &sq, NULL);
  uint8_t *lo = g->values[lower].data;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < i; j++) lo[i * n + j] = 1;
  int dup = kn_rw_reduce(b, KN_OP_REDUCE_MAX, kn_rw_cast(b, kn_rw_bin(b, KN_OP_AND, eq, lower), KN_DT_I32), &one, 1,
                         false);
  int first = kn_rw_bin(b, KN_OP_EQUAL, dup, kn_rw_scalar(b, KN_DT_I32, 0)); /* [n] */
  int first_row = kn_rw_unsqueeze(b, first, &zero, 1);                       /* [1, n] */
  int before; /* [n, n]: the unique value of row j comes before that of row i */
  if (sorted) {
    before = m == 1 ? kn_rw_bin(b, KN_OP_LESS, bv, a) : rows_less(b, a, bv, ne, nei);
  } else {
    int first_idx = kn_rw_un(b, KN_OP_ARG_MAX, kn_rw_cast(b, eq, KN_DT_I32)); /* [n, 1] */
    kn_rw_attr_int(b, "axis", 1);
    kn_rw_attr_int(b, "keepdims", 1);
    before = kn_rw_bin(b, KN_OP_LESS, iota(b, n, 0, 2, 1), first_idx);
  }
  int rank = kn_rw_reduce(b, KN_OP_REDUCE_SUM, kn_rw_cast(b, kn_rw_bin(b, KN_OP_AND, first_row, before), KN_DT_I64),
                          &one, 1, false); /* [n]: inverse_indices */
  int is_k = kn_rw_bin(b, KN_OP_EQUAL, kn_rw_unsqueeze(b, rank, &zero, 1), iota(b, u, 0, 2, 0)); /* [U, n] */
  int pick = kn_rw_bin(b, KN_OP_MUL, kn_rw_cast(b, kn_rw_bin(b, KN_OP_AND, is_k, first_row), KN_DT_I64),
                       iota(b, n, 0, 2, 1));
  int indices = kn_rw_reduce(b, KN_OP_REDUCE_SUM, pick, &one, 1, false);
  int counts = kn_rw_reduce(b, KN_OP_REDUCE_SUM, kn_rw_cast(b, is_k, KN_DT_I64), &one, 1, false);
  int y = kn_rw_bin(b, KN_OP_GATHER, axis_attr ? x : kn_rw_reshape(b, x, &flat, 1), indices);
  kn_rw_attr_int(b, "axis", axis);
  kn_rw_output(b, 0, y);
  kn_rw_output(b, 1, indices);
  kn_rw_output(b, 2, rank);
  kn_rw_output(b, 3, counts);
  int check = count_is(b, kn_rw_cast(b, first, KN_DT_I64), u);
  if (kn_dtype_is_float(t)) {
    int nan = kn_rw_reduce(b, KN_OP_REDUCE_MAX, kn_rw_cast(b, kn_rw_un(b, KN_OP_IS_NAN, x2), KN_DT_I32), NULL, 0,
                           false);
    check = kn_rw_bin(b, KN_OP_AND, check, kn_rw_bin(b, KN_OP_EQUAL, nan, kn_rw_scalar(b, KN_DT_I32, 0)));
  }
  if (!is_const) kn_pass_add_check(g, check);
  return 0;
}

/* ---- driver ---- */

/* Whether node i's inputs are all typed and its arity is right; false with
 * a diagnostic (*rc = -1) on a bad arity. */
static bool ready(kn_graph *g, int i, kn_diag *d, int *rc) {
  const kn_node *n = &g->nodes[i];
  int want_in = n->op == KN_OP_COMPRESS ? 2 : 1, max_out = n->op == KN_OP_UNIQUE ? 4 : 1;
  if (n->n_in != want_in || n->n_out < 1 || n->n_out > max_out) {
    *rc = kn_diag_error(d, "node '%s' (%s): has %d inputs and %d outputs, expected %d and 1..%d", n->name,
                        n->op_type, n->n_in, n->n_out, want_in, max_out);
    return false;
  }
  for (int k = 0; k < n->n_in; k++) {
    if (n->in[k] < 0) {
      *rc = kn_diag_error(d, "node '%s' (%s): required input %d is missing", n->name, n->op_type, k);
      return false;
    }
    if (!g->values[n->in[k]].shape_known || g->values[n->in[k]].dtype == KN_DT_INVALID) return false;
  }
  return true;
}

int kn_pass_data_dependent(kn_graph *g, kn_diag *d) {
  bool any = false;
  for (int i = 0; i < g->n_nodes && !any; i++) any = !g->nodes[i].dead && is_data_dependent(g->nodes[i].op);
  if (!any) return 0;
  kn_infer_shapes_quiet(g); /* types the inputs; fails at these nodes */
  /* one node at a time, from the start: count_downstream renumbers nodes;
   * a node left in place (untyped inputs, refused) is passed over by its
   * first output, which never changes */
  bool *passed = calloc((size_t)g->n_values + 1, sizeof(bool));
  KN_ASSERT(passed, "out of memory");
  int rc = 0;
  for (;;) {
    int i = 0;
    while (i < g->n_nodes && (g->nodes[i].dead || !is_data_dependent(g->nodes[i].op) || g->nodes[i].n_out < 1 ||
                              passed[g->nodes[i].out[0]]))
      i++;
    if (i == g->n_nodes) break;
    int first_out = g->nodes[i].out[0];
    passed[first_out] = true;
    if (!ready(g, i, d, &rc)) continue;
    kn_rw b = {.g = g, .d = d, .node = i, .name = g->nodes[i].name, .last = -1};
    kn_op op = g->nodes[i].op;
    int r = op == KN_OP_NON_ZERO ? nonzero(&b) : op == KN_OP_COMPRESS ? compress(&b) : unique(&b);
    if (r < 0) rc = -1;
  }
  free(passed);
  if (rc < 0) return -1;
  return kn_graph_toposort(g, d);
}
