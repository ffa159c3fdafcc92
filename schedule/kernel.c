/* kernel.c — one fusion group -> one finalized loop-IR kernel.
 *
 * group -> TE (one placeholder per external input value, kn_te_op per node)
 * -> default schedule (rules.c), or the one a provider supplies (a tuning
 * log, an autotuner candidate) -> loop IR (lower.c) -> finalize.
 * Params: [0] the output value, then each distinct external input. */
#include <string.h>

#include "ir/loop/simplify.h"
#include "schedule/gpu.h"
#include "schedule/schedule.h"

static int find_index(const int *arr, int n, int v);

/* A folded shape computation that depends on the batch size (Shape(x) of a
 * batched x) is a constant whose element i is data[i] + coef[i] * N. Its
 * kernels read data and coefficients as two constants and add them up at
 * run time, where N is known. Returns that compute, or NULL for an ordinary
 * input. Appends the coefficient constant to the kernel's inputs. */
static kn_te_tensor *batch_dependent_constant(kn_graph *g, kn_te_ctx *tc, int v, kn_te_tensor *data,
                                              int *inputs, kn_te_tensor **placeholders, int *n_inputs) {
  const kn_value *val = &g->values[v];
  if (!val->data || !val->batch_coef || val->dtype != KN_DT_I64) return NULL;
  int64_t n = kn_value_numel(g, v);
  bool any = false;
  for (int64_t i = 0; i < n; i++) any |= val->batch_coef[i] != 0;
  if (!any) return NULL;
  kn_shape shape = val->shape;
  int cv = kn_graph_add_const(g, kn_arena_printf(&g->arena, "%s.batch_coef", g->values[v].name), KN_DT_I64,
                              &shape, g->values[v].batch_coef);
  kn_te_tensor *coef = kn_te_placeholder_for(tc, cv);
  inputs[*n_inputs] = cv;
  placeholders[(*n_inputs)++] = coef;
  kn_te_tensor *t = kn_te_compute(tc, kn_arena_printf(tc->ec->arena, "%s.at_batch", data->name), KN_DT_I64,
                                  data->rank, data->shape);
  kn_expr *idx[KN_TE_MAX_RANK];
  for (int i = 0; i < t->rank; i++) idx[i] = kn_e_var(tc->ec, t->axes[i]);
  t->body = kn_e_add(tc->ec, kn_te_at(tc, data, idx),
                     kn_e_mul(tc->ec, kn_te_at(tc, coef, idx), kn_e_var(tc->ec, tc->batch)));
  return t;
}

typedef struct packing {
  kn_te_tensor *from, *to;
  int64_t cf;
  int col; /* the dim of the weights indexed by the output's column axis */
} packing;

/* W[i0, .., col, ..] -> P[col / cf, i0, .. (without col) .., col % cf] */
static kn_expr *repack_load(kn_expr_ctx *c, kn_expr *load, void *ctx) {
  packing *p = ctx;
  if (load->u.load.tensor != p->from) return load;
  int r = load->u.load.n, k = 1;
  kn_expr *idx[KN_TE_MAX_RANK], *col = load->u.load.indices[p->col], *cf = kn_e_int(c, p->cf);
  idx[0] = kn_e_div(c, col, cf);
  for (int i = 0; i < r; i++)
    if (i != p->col) idx[k++] = load->u.load.indices[i];
  idx[r] = kn_e_mod(c, col, cf);
  return kn_e_tload(c, p->to, idx, r + 1);
}

static void repack_tensor(kn_expr_ctx *c, kn_te_tensor *t, packing *p, kn_te_tensor **seen, int *n_seen);

static kn_expr *visit_load(kn_expr_ctx *c, kn_expr *load, void *ctx) {
  void **args = ctx;
  kn_te_tensor *t = load->u.load.tensor;
  if (t->kind == KN_TE_COMPUTE) repack_tensor(c, t, args[0], args[1], args[2]);
  return load;
}

/* Rewrites, once each, the bodies of every compute reachable from t. */
static void repack_tensor(kn_expr_ctx *c, kn_te_tensor *t, packing *p, kn_te_tensor **seen, int *n_seen) {
  for (int i = 0; i < *n_seen; i++)
    if (seen[i] == t) return;
  KN_ASSERT(*n_seen < 256, "too many tensors in one kernel");
  seen[(*n_seen)++] = t;
  void *args[3] = {p, seen, n_seen};
  kn_e_map_loads(c, t->body, visit_load, args);
  t->body = kn_e_map_loads(c, t->body, repack_load, p);
}

/* Weights repacked at compile time for the chosen schedule: the constant
 * operand W[..., M] of a contraction whose columns are tiled by cf becomes
 * P[M/cf][...][cf], so that the weights of one column tile are contiguous
 * in memory (streamed once, prefetcher-friendly) instead of cf-wide slivers
 * M elements apart. Exact for any index, so correctness never depends on it. */
static void pack_weights(kn_graph *g, kn_te_ctx *tc, const kn_node *anchor, kn_te_tensor *result,
                         const kn_schedule *s, int *inputs, kn_te_tensor **placeholders, int n_inputs) {
  int rank = result->rank;
  /* the column tile: one split (a vector), or two (vectors x lanes) */
  int nf = rank >= 1 ? s->n_factors[rank - 1] : 0;
  if (anchor->n_in < 2 || anchor->in[1] < 0 || rank < 1 || nf < 1 || nf > 2) return;
  int v = anchor->in[1];
  /* weights scaled in the kernel (W * s, inlined: not an input of it):
   * the constant W is the one to pack */
  const kn_node *scale = g->values[v].producer >= 0 ? &g->nodes[g->values[v].producer] : NULL;
  if (!g->values[v].data && scale && scale->op == KN_OP_MUL && find_index(inputs, n_inputs, v) < 0)
    for (int k = 0; k < scale->n_in; k++)
      if (scale->in[k] >= 0 && g->values[scale->in[k]].data) v = scale->in[k];
  int slot = find_index(inputs, n_inputs, v);
  const kn_value *w = &g->values[v];
  /* Gemm with transB reads B[j, k]: its column dim is the first */
  int col = anchor->op == KN_OP_GEMM && kn_node_attr_int(anchor, "transB", 0) ? 0 : w->shape.rank - 1;
  int64_t cf = s->factors[rank - 1][0] * (nf == 2 ? s->factors[rank - 1][1] : 1), m;
  if (slot < 0 || !w->data || w->dtype != KN_DT_F32 || w->shape.batch_mask || w->shape.rank < 2 ||
      w->shape.rank >= KN_MAX_RANK || cf < 4 || !kn_e_is_const_int(result->shape[rank - 1], &m) ||
      w->shape.dim[col] != m || m % cf != 0)
    return;
  kn_shape ps = {.rank = w->shape.rank + 1};
  int64_t rows = 1, inner = 1; /* elements of the dims around col */
  ps.dim[0] = m / cf;
  for (int i = 0, k = 1; i < w->shape.rank; i++)
    if (i != col) rows *= ps.dim[k++] = w->shape.dim[i];
  for (int i = col + 1; i < w->shape.rank; i++) inner *= w->shape.dim[i];
  ps.dim[ps.rank - 1] = cf;
  int pv = kn_graph_add_const(g, kn_arena_printf(&g->arena, "%s.packed%lld", w->name, (long long)cf),
                              KN_DT_F32, &ps, NULL);
  const float *src = g->values[v].data;
  float *dst = g->values[pv].data;
  /* r = outer * inner + in, over the dims before and after col */
  for (int64_t mo = 0; mo < m / cf; mo++)
    for (int64_t r = 0; r < rows; r++)
      for (int64_t mi = 0; mi < cf; mi++) {
        int64_t outer = r / inner, in = r % inner;
        dst[(mo * rows + r) * cf + mi] = src[(outer * m + mo * cf + mi) * inner + in];
      }
  packing p = {.from = placeholders[slot], .to = kn_te_placeholder_for(tc, pv), .cf = cf, .col = col};
  kn_te_tensor *seen[256];
  int n_seen = 0;
  repack_tensor(tc->ec, result, &p, seen, &n_seen);
  inputs[slot] = pv;
  placeholders[slot] = p.to;
}

/* hints.gather_axis: over the placeholders O's body loads directly, the
 * one O axis other than the last that every such load's innermost index is,
 * provided no load's innermost index is the last O axis; else -1. */
typedef struct gather_scan {
  const kn_te_tensor *out;
  int axis; /* -1 none yet, -2 disagreement or a contiguous load */
} gather_scan;

static kn_expr *scan_gather(kn_expr_ctx *c, kn_expr *load, void *ctx) {
  (void)c;
  gather_scan *g = ctx;
  const kn_te_tensor *t = load->u.load.tensor;
  int n = load->u.load.n;
  if (t->kind != KN_TE_PLACEHOLDER || n < 1 || g->axis == -2) return load;
  const kn_expr *inner = load->u.load.indices[n - 1];
  int a = -1;
  for (int i = 0; i < g->out->rank; i++)
    if (inner->kind == KN_E_VAR && inner->u.var == g->out->axes[i]) a = i;
  if (a < 0) return load; /* a broadcast or computed index: not a stream */
  if (a == g->out->rank - 1 || (g->axis >= 0 && g->axis != a))
    g->axis = -2;
  else
    g->axis = a;
  return load;
}

static int gather_axis(kn_expr_ctx *c, kn_te_tensor *out) {
  if (out->kind != KN_TE_COMPUTE || out->rank < 2 || out->body->kind == KN_E_REDUCE) return -1;
  gather_scan g = {out, -1};
  kn_e_map_loads(c, out->body, scan_gather, &g);
  return g.axis >= 0 ? g.axis : -1;
}

static int find_index(const int *arr, int n, int v) {
  for (int i = 0; i < n; i++)
    if (arr[i] == v) return i;
  return -1;
}

/* A few (value, TE tensor) pairs, searched linearly: a group touches a few
 * dozen values at most. */
typedef struct value_map {
  int *keys;
  kn_te_tensor **vals;
  int n;
} value_map;

static void value_map_set(value_map *m, int v, kn_te_tensor *t) {
  int i = find_index(m->keys, m->n, v);
  if (i < 0) {
    i = m->n++;
    m->keys[i] = v;
  }
  m->vals[i] = t;
}

static kn_te_tensor *value_map_get(const value_map *m, int v) {
  int i = find_index(m->keys, m->n, v);
  return i < 0 ? NULL : m->vals[i];
}

/* kn_kernel.rows: the rows of output axis 1 when the parallel loop's outer
 * pieces are axes 0 (the batch, or a single sample) and 1, unsplit, so that
 * at ntasks = samples x rows each task runs one row, and every store of O is
 * its final value; 0 otherwise. Not under reduction blocking, which stores
 * partial sums first: a row pipe computes its border rows on two
 * threads, and one thread's partial sums would be read by the other's
 * second kernel. */
static int64_t task_rows(const kn_schedule *s, const kn_te_tensor *out, const kn_var *batch, bool *batched) {
  int64_t h, n;
  if (out->rank != 4 || s->fuse_spatial || s->rsplit_factor > 0 || s->n_parallel < 2 || s->n_factors[0] ||
      s->n_factors[1] ||
      s->loops[0].axis != 0 || s->loops[0].piece != 0 || s->loops[1].axis != 1 || s->loops[1].piece != 0 ||
      !kn_e_is_const_int(out->shape[1], &h))
    return 0;
  *batched = !kn_e_is_const_int(out->shape[0], &n);
  if (*batched ? !batch || out->shape[0]->kind != KN_E_VAR || out->shape[0]->u.var != batch : n != 1) return 0;
  return h;
}

/* kn_kernel_build.windowed: a ConvNHWC anchor's data input when nothing
 * else in the group reads it. */
static void row_window(const kn_graph *g, const kn_group *grp, const kn_node *anchor, kn_kernel_build *out) {
  out->windowed = false;
  if (anchor->op != KN_OP_CONV_NHWC || anchor->n_in < 2 || anchor->in[0] < 0 || anchor->in[1] < 0) return;
  int v = anchor->in[0];
  for (int i = 0; i < grp->n_nodes; i++) {
    const kn_node *n = &g->nodes[grp->nodes[i]];
    for (int j = 0; j < n->n_in; j++)
      if (n->in[j] == v && !(n == anchor && j == 0)) return;
  }
  const kn_shape *w = &g->values[anchor->in[1]].shape;
  int ns = 0, np = 0, nd = 0;
  const int64_t *st = kn_node_attr_ints(anchor, "strides", &ns);
  const int64_t *pd = kn_node_attr_ints(anchor, "pads", &np);
  const int64_t *dl = kn_node_attr_ints(anchor, "dilations", &nd);
  if (w->rank < 4 || !st || !pd || !dl || ns != 2 || np != 4 || nd != 2) return;
  int64_t kh = w->dim[w->rank - 4]; /* [KH, KW, C, M], or per sample [N, KH, KW, C, M] */
  out->windowed = true;
  out->window_input = v;
  out->win_stride = (int)st[0];
  out->win_pad = (int)pd[0];
  out->win_extent = (int)((kh - 1) * dl[0] + 1);
}

int kn_sched_build_kernel(kn_graph *g, const kn_group *grp, const kn_target *t,
                          kn_expr_ctx *ec, const char *name, kn_kernel_build *out,
                          FILE *dump_te, FILE *dump_loops, kn_diag *d) {
  return kn_sched_build_kernel_with(g, grp, t, ec, name, NULL, out, dump_te, dump_loops, d);
}

int kn_sched_build_kernel_with(kn_graph *g, const kn_group *grp, const kn_target *t,
                               kn_expr_ctx *ec, const char *name, const kn_sched_provider *provider,
                               kn_kernel_build *out, FILE *dump_te, FILE *dump_loops, kn_diag *d) {
  kn_arena *A = ec->arena;
  /* values produced inside the group */
  int max_vals = 0;
  for (int i = 0; i < grp->n_nodes; i++) max_vals += g->nodes[grp->nodes[i]].n_in;
  int *inputs = KN_NEW_ARRAY(A, int, 2 * max_vals + 1); /* room for batch coefficients */
  int n_inputs = 0;
  for (int i = 0; i < grp->n_nodes; i++) {
    const kn_node *n = &g->nodes[grp->nodes[i]];
    for (int k = 0; k < n->n_in; k++) {
      int v = n->in[k];
      if (v < 0) continue;
      int p = g->values[v].producer;
      bool internal = p >= 0 && !g->values[v].data && find_index(grp->nodes, grp->n_nodes, p) >= 0;
      if (!internal && find_index(inputs, n_inputs, v) < 0) inputs[n_inputs++] = v;
    }
  }

  kn_te_ctx tc = {.ec = ec, .batch = kn_var_new(ec, "N"), .g = g};
  /* value -> TE tensor for the values this group touches: a short list, not
   * an array over the whole graph per kernel (quadratic on large graphs) */
  value_map tensor_of = {KN_NEW_ARRAY(A, int, n_inputs + grp->n_nodes + 1),
                         KN_NEW_ARRAY(A, kn_te_tensor *, n_inputs + grp->n_nodes + 1), 0};
  kn_te_tensor **placeholders = KN_NEW_ARRAY(A, kn_te_tensor *, 2 * n_inputs + 1);
  for (int i = 0, n = n_inputs; i < n; i++) {
    placeholders[i] = kn_te_placeholder_for(&tc, inputs[i]);
    kn_te_tensor *with_batch = batch_dependent_constant(g, &tc, inputs[i], placeholders[i], inputs, placeholders, &n_inputs);
    value_map_set(&tensor_of, inputs[i], with_batch ? with_batch : placeholders[i]);
  }

  kn_te_tensor *result = NULL;
  for (int i = 0; i < grp->n_nodes; i++) {
    int node = grp->nodes[i];
    const kn_node *n = &g->nodes[node];
    /* zeroed, at least 16: the op definitions read absent optional inputs as NULL;
     * Concat may have any number (densenet121 concatenates 25) */
    kn_te_tensor **ins = KN_NEW_ARRAY(A, kn_te_tensor *, n->n_in > 16 ? n->n_in : 16);
    for (int k = 0; k < n->n_in; k++) ins[k] = n->in[k] >= 0 ? value_map_get(&tensor_of, n->in[k]) : NULL;
    int oi = node == grp->anchor ? grp->output_index : 0;
    int first_line = d ? d->count : 0;
    kn_te_tensor *r = kn_te_op_output(&tc, node, oi, ins, d);
    if (!r) {
      kn_node_diag_origin(n, d, first_line); /* lead with the model's node */
      return -1;
    }
    value_map_set(&tensor_of, n->out[oi], r);
    result = r;
  }
  KN_ASSERT(result, "empty group");
  if (result->kind == KN_TE_PLACEHOLDER)
    return kn_diag_error(d, "kernel '%s': output is an unmodified input", name);

  kn_sched_hints hints = {0};
  int n_stages = 0;
  if (kn_sched_analyze(ec, result, &hints.stage_axes, &n_stages, d) < 0) return -1;
  hints.has_stages = n_stages > 0;
  kn_sched_reduction_hints(ec, result, &hints);
  const kn_node *anchor = &g->nodes[grp->anchor];
  hints.is_contraction = kn_op_class_of(anchor->op) == KN_CLASS_CONTRACTION;
  hints.spatial = anchor->op == KN_OP_CONV_NHWC && result->rank == 4;
  hints.grouped = hints.spatial && kn_node_attr_int(anchor, "group", 1) != 1;
  int64_t out_channels = 0;
  if (hints.grouped && kn_e_is_const_int(result->shape[result->rank - 1], &out_channels))
    hints.group_cols = out_channels / kn_node_attr_int(anchor, "group", 1);
  hints.gather_axis = hints.has_stages ? -1 : gather_axis(ec, result);
  hints.index_heavy = anchor->op == KN_OP_WINOGRAD_INPUT || anchor->op == KN_OP_WINOGRAD_OUTPUT;
  hints.elem_axis = anchor->op == KN_OP_WINOGRAD_INPUT && result->rank == 4 ? 1 : -1;
  hints.shared_rhs = anchor->op == KN_OP_MATMUL && anchor->n_in >= 2 && anchor->in[1] >= 0 &&
                     g->values[anchor->in[1]].shape.rank == 2;
  if (hints.is_contraction && anchor->n_in >= 2 && anchor->in[0] >= 0 && anchor->in[1] >= 0 &&
      g->values[anchor->in[1]].data)
    hints.weights_heavy = kn_value_numel(g, anchor->in[1]) >= kn_value_numel(g, anchor->in[0]);
  kn_schedule sched;
  bool gpu = t->arch == KN_ARCH_CUDA;
  if (gpu)
    kn_sched_default_gpu(result, &hints, &sched);
  else
    kn_sched_default(result, &hints, t, &sched);
  bool batched;
  bool default_rows = !gpu && task_rows(&sched, result, tc.batch, &batched) > 0;
  if (provider) {
    kn_sched_task task = {.g = g, .grp = grp, .out = result, .hints = &hints, .n_stages = n_stages, .t = t};
    provider->choose(provider->ctx, &task, &sched);
  }
  if (hints.is_contraction && !gpu) pack_weights(g, &tc, anchor, result, &sched, inputs, placeholders, n_inputs);

  kn_kernel *k = KN_NEW(A, kn_kernel);
  k->name = kn_arena_strdup(A, name);
  k->n_params = n_inputs + 1;
  k->params = KN_NEW_ARRAY(A, kn_buffer *, k->n_params);
  k->params[0] = kn_buffer_new(ec, "out", result->dtype, KN_BUF_PARAM, 0);
  for (int i = 0; i < n_inputs; i++) {
    int64_t numel = 1, e;
    for (int a = 0; a < placeholders[i]->rank && numel > 0; a++)
      numel = kn_e_is_const_int(placeholders[i]->shape[a], &e) ? numel * e : 0;
    k->params[i + 1] = kn_buffer_new(ec, kn_arena_printf(A, "in%d", i), g->values[inputs[i]].dtype,
                                     KN_BUF_PARAM, numel);
  }
  kn_lower_params lp = {.n = n_inputs, .tensors = placeholders, .buffers = k->params + 1, .prefetch = t->sw_prefetch};
  k->batch = tc.batch;
  k->gpu = gpu;
  /* a GPU contraction of 16-bit factors goes to the Tensor Core template,
   * other kernels with row reductions to the cooperative row template */
  const char *template = NULL;
  kn_stmt *tensorized = gpu && hints.is_contraction && n_stages == 1
                            ? kn_gpu_mma_lower(ec, result, k->params[0], &lp, &template)
                            : NULL;
  if (gpu && !hints.is_contraction && n_stages > 0)
    tensorized = kn_gpu_rows_lower(ec, result, k->params[0], &lp, &template);
  kn_stmt *body = tensorized ? tensorized : kn_sched_lower(ec, result, &sched, k->params[0], &lp, d);
  if (!body) return -1;
  if (tensorized) {
    k->body = body;
  } else if (gpu) {
    k->body = kn_gpu_bind(ec, kn_loop_finalize(ec, kn_simplify_stmt(ec, body)));
  } else {
    k->body = kn_loop_finalize(ec, kn_simplify_stmt(ec, body));
    k->body = kn_loop_version_borders(ec, k->body);
    k->parallel = sched.n_parallel > 0;
    k->rows = task_rows(&sched, result, tc.batch, &k->rows_batched);
  }
  char *nodes = NULL;
  for (int i = 0; i < grp->n_nodes; i++) {
    const kn_node *n = &g->nodes[grp->nodes[i]];
    nodes = nodes ? kn_arena_printf(A, "%s,%s", nodes, n->name) : kn_arena_strdup(A, n->name);
    k->flops += kn_node_flops(g, grp->nodes[i]);
  }
  k->nodes = nodes;
  if (dump_te) {
    fprintf(dump_te, "kernel %s  # %s\n  %s[", name, nodes, result->name);
    for (int i = 0; i < result->rank; i++) fprintf(dump_te, "%s%s", i ? ", " : "", result->axes[i]->name);
    fputs("] = ", dump_te);
    kn_expr_print(result->body, dump_te);
    fputs("\n", dump_te);
    if (tensorized)
      fprintf(dump_te, "%s\n", template);
    else
      kn_sched_print(&sched, dump_te);
  }
  if (dump_loops) kn_kernel_print(k, dump_loops);
  out->kernel = k;
  out->n_inputs = n_inputs;
  out->inputs = inputs;
  out->output = grp->output;
  out->default_rows = default_rows;
  row_window(g, grp, anchor, out);
  return 0;
}
