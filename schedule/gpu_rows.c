/* gpu_rows.c — the cooperative row template: a kernel whose reduction
 * stages all reduce over the trailing elements of a row (softmax, log
 * softmax, layer norm, a reduction over the last axis) runs one thread block
 * per row, the block's threads sharing each stage's elements.
 *
 * Which kernels: O's axes split into leading row axes, which every stage
 * is read at (stage axes map to them or to constant 0), and trailing column
 * axes of constant extent; each stage's reduction extents are constant, and
 * every input load of its source that moves with the reduction moves with
 * its innermost reduction axis in its last index (consecutive threads then
 * read consecutive addresses: a reduction over the channels of NHWC, global
 * average pooling, is not this shape). A stage read inside another stage's
 * source is read at that stage's own row. Contractions keep the Tensor Core
 * or the scalar schedule (their stages keep every O axis: one block per
 * output element would redo each row's reads per column).
 *
 * The kernel (loop.h's GPU shape), T threads (a power of two, 32 to 256):
 *   block.x bx over the rows
 *     shared red_s[T] per stage s (its dtype)
 *     thread.x tx in [0, T):
 *       per stage s, in dependency order:
 *         acc = identity; for k = tx, tx + T, .. < len_s: acc = acc op src_s(k)
 *         red_s[tx] = acc; barrier
 *         for h = T/2 .. 1: if tx < h: red_s[tx] op= red_s[tx + h]; barrier
 *         (red_s[0] is the row's value of s, for every thread: later
 *         stages and the epilogue read it there)
 *       for c = tx, tx + T, .. < cols: O[row, c] = O's body at (row, c)
 * The barrier after each tree step is what makes red_s[tx + h] (written by
 * another thread in the step before) safe to read, and the final one makes
 * red_s[0] visible to every thread. The tree reassociates the fold, as every
 * parallel reduction does. */
#include "schedule/gpu.h"

#define MAX_THREADS 256
#define MIN_LENGTH 32 /* shorter reductions stay one thread per row */

typedef struct rows {
  kn_expr_ctx *ec;
  kn_te_tensor *out;
  const kn_lower_params *params;
  kn_expr *body; /* O's body, inlined */
  int n_stages;
  kn_sched_stage st[KN_SCHED_MAX_STAGES];
  kn_expr *src[KN_SCHED_MAX_STAGES];     /* each source over O's row axes and its reduction axes */
  int64_t len[KN_SCHED_MAX_STAGES];      /* elements each stage folds per row */
  kn_buffer *red[KN_SCHED_MAX_STAGES];   /* SHARED partials; [0]: the stage's value */
  int n_row;                             /* O axes [0, n_row) select the row */
  int64_t cols;                          /* O elements per row */
  int64_t threads;
  kn_var *bx, *tx;
} rows;

static kn_expr *I(rows *R, int64_t v) { return kn_e_int(R->ec, v); }
static kn_expr *V(rows *R, kn_var *v) { return kn_e_var(R->ec, v); }

static int find_stage(const rows *R, const kn_te_tensor *t) {
  for (int i = 0; i < R->n_stages; i++)
    if (R->st[i].t == t) return i;
  return -1;
}

/* ---- recognising the shape ---- */

typedef struct check {
  rows *R;
  const kn_sched_stage *stage; /* whose source is walked */
  bool ok;
} check;

/* A stage load over O axes must be at the row: axis a at O axis map[a]
 * (0 where map[a] is -1). */
static kn_expr *check_stage_load(kn_expr_ctx *c, kn_expr *load, void *ctx) {
  (void)c;
  check *k = ctx;
  int s = find_stage(k->R, load->u.load.tensor);
  if (s < 0) return load;
  for (int a = 0; a < load->u.load.n; a++) {
    const kn_expr *ix = load->u.load.indices[a];
    int m = k->R->st[s].map[a];
    int64_t v;
    if (m >= 0)
      k->ok &= ix->kind == KN_E_VAR && ix->u.var == k->R->out->axes[m];
    else
      k->ok &= kn_e_is_const_int(ix, &v) && v == 0;
  }
  return load;
}

/* An input load that moves with the stage's reduction has its innermost
 * reduction axis in its last index. */
static kn_expr *check_coalesced(kn_expr_ctx *c, kn_expr *load, void *ctx) {
  (void)c;
  check *k = ctx;
  const kn_expr *red = k->stage->t->body;
  int nr = red->u.reduce.n_axes, n = load->u.load.n;
  if (load->u.load.tensor->kind != KN_TE_PLACEHOLDER || n < 1) return load;
  bool moves = false;
  for (int i = 0; i < n; i++)
    for (int r = 0; r < nr; r++) moves |= kn_e_uses_var(load->u.load.indices[i], red->u.reduce.axes[r]);
  if (moves && !kn_e_uses_var(load->u.load.indices[n - 1], red->u.reduce.axes[nr - 1])) k->ok = false;
  return load;
}

/* The stage's source with its axes replaced by the O axes it is read at. */
static kn_expr *source_over_o(rows *R, const kn_sched_stage *st) {
  kn_expr *src = st->source;
  for (int a = 0; a < st->t->rank; a++)
    src = kn_e_substitute(R->ec, src, st->t->axes[a], st->map[a] >= 0 ? V(R, R->out->axes[st->map[a]]) : I(R, 0));
  return src;
}

static bool match_stage(rows *R, int s) {
  const kn_sched_stage *st = &R->st[s];
  const kn_expr *red = st->t->body;
  int nr = red->u.reduce.n_axes;
  if (nr < 1) return false;
  R->len[s] = 1;
  for (int i = 0; i < nr; i++) {
    int64_t e;
    if (!kn_e_is_const_int(red->u.reduce.extents[i], &e) || e < 1) return false;
    R->len[s] *= e;
  }
  for (int a = 0; a < st->t->rank; a++)
    if (st->map[a] + 1 > R->n_row) R->n_row = st->map[a] + 1;
  R->src[s] = source_over_o(R, st);
  check k = {R, st, true};
  kn_e_map_loads(R->ec, R->src[s], check_stage_load, &k);
  kn_e_map_loads(R->ec, R->src[s], check_coalesced, &k);
  return k.ok;
}

static bool match(rows *R) {
  R->body = kn_sched_stages(R->ec, R->out, R->st, &R->n_stages);
  if (!R->body || R->n_stages < 1) return false;
  int64_t longest = 0;
  for (int s = 0; s < R->n_stages; s++) {
    if (!match_stage(R, s)) return false;
    if (R->len[s] > longest) longest = R->len[s];
  }
  if (longest < MIN_LENGTH) return false;
  R->cols = 1;
  for (int a = R->n_row; a < R->out->rank; a++) {
    int64_t e;
    if (!kn_e_is_const_int(R->out->shape[a], &e)) return false;
    R->cols *= e;
  }
  for (R->threads = 32; R->threads < MAX_THREADS && R->threads < longest; R->threads *= 2) {}
  return true;
}

/* ---- building the kernel ---- */

/* e with the axes `vars` (extents `ext`, row-major) replaced by the digits
 * of `flat`; the first digit is not reduced (it may be symbolic: N). */
static kn_expr *unflatten(rows *R, kn_expr *e, kn_var *const *vars, kn_expr *const *ext, int n, kn_expr *flat) {
  for (int i = n - 1; i >= 0; i--) {
    e = kn_e_substitute(R->ec, e, vars[i], i == 0 ? flat : kn_e_mod(R->ec, flat, ext[i]));
    if (i > 0) flat = kn_e_div(R->ec, flat, ext[i]);
  }
  return e;
}

static kn_expr *stage_to_shared(kn_expr_ctx *c, kn_expr *load, void *ctx) {
  rows *R = ctx;
  int s = find_stage(R, load->u.load.tensor);
  return s < 0 ? load : kn_e_load(c, R->red[s], I(R, 0));
}

/* e (over O axes) at this block's row, its stages read from shared memory,
 * its inputs from their buffers. */
static kn_expr *at_row(rows *R, kn_expr *e) {
  e = unflatten(R, e, R->out->axes, R->out->shape, R->n_row, V(R, R->bx));
  e = kn_e_map_loads(R->ec, e, stage_to_shared, R);
  return kn_sched_to_buffers(R->ec, e, R->params);
}

/* body (over var x) for x = tx, tx + T, .. < n:
 *   for i in [0, ceil(n / T)): if i * T + tx < n: body[x := i * T + tx] */
static kn_stmt *strided(rows *R, int64_t n, kn_var *x, kn_stmt *body) {
  kn_var *i = kn_var_new(R->ec, "i");
  int64_t steps = (n + R->threads - 1) / R->threads;
  kn_expr *at = kn_e_add(R->ec, kn_e_mul(R->ec, steps > 1 ? V(R, i) : I(R, 0), I(R, R->threads)), V(R, R->tx));
  if (n % R->threads != 0) body = kn_s_if(R->ec, kn_e_bin(R->ec, KN_E_LT, V(R, x), I(R, n)), body, NULL);
  body = kn_stmt_substitute(R->ec, body, x, at);
  return steps > 1 ? kn_s_for(R->ec, i, I(R, 0), I(R, steps), KN_FOR_SERIAL, body) : body;
}

/* Stage s for this block's row: each thread folds its elements into a
 * register, then the tree over red_s. */
static kn_stmt *stage_code(rows *R, int s) {
  kn_expr_ctx *c = R->ec;
  const kn_expr *red = R->st[s].t->body;
  kn_reduce_op op = red->u.reduce.op;
  kn_dtype t = R->st[s].t->dtype;
  kn_buffer *acc = kn_buffer_new(c, kn_arena_printf(c->arena, "acc%d", s), t, KN_BUF_LOCAL, 1);
  kn_var *k = kn_var_new(c, "k");
  kn_expr *src = unflatten(R, R->src[s], red->u.reduce.axes, red->u.reduce.extents, red->u.reduce.n_axes, V(R, k));
  kn_expr *acc0 = kn_e_load(c, acc, I(R, 0));
  kn_stmt *fold = kn_s_store(c, acc, I(R, 0), kn_sched_reduce_combine(c, op, acc0, at_row(R, src)));
  kn_stmt *own[] = {kn_s_store(c, acc, I(R, 0), kn_sched_reduce_identity(c, op, t)), strided(R, R->len[s], k, fold),
                    kn_s_store(c, R->red[s], V(R, R->tx), acc0)};
  int n = 0;
  kn_stmt *parts[2 + 2 * 8];
  parts[n++] = kn_s_alloc(c, acc, kn_s_seq(c, own, 3));
  parts[n++] = kn_s_barrier(c);
  for (int64_t h = R->threads / 2; h >= 1; h /= 2) {
    kn_expr *mine = kn_e_load(c, R->red[s], V(R, R->tx));
    kn_expr *other = kn_e_load(c, R->red[s], kn_e_add(c, V(R, R->tx), I(R, h)));
    kn_stmt *step = kn_s_store(c, R->red[s], V(R, R->tx), kn_sched_reduce_combine(c, op, mine, other));
    parts[n++] = kn_s_if(c, kn_e_bin(c, KN_E_LT, V(R, R->tx), I(R, h)), step, NULL);
    parts[n++] = kn_s_barrier(c);
  }
  return kn_s_seq(c, parts, n);
}

/* Each thread stores its columns c = tx, tx + T, .. of the row. */
static kn_stmt *epilogue(rows *R, kn_buffer *out_buf) {
  kn_var *col = kn_var_new(R->ec, "c");
  int n_col = R->out->rank - R->n_row;
  kn_expr *value = unflatten(R, R->body, R->out->axes + R->n_row, R->out->shape + R->n_row, n_col, V(R, col));
  kn_expr *at = kn_e_add(R->ec, kn_e_mul(R->ec, V(R, R->bx), I(R, R->cols)), V(R, col));
  return strided(R, R->cols, col, kn_s_store(R->ec, out_buf, at, at_row(R, value)));
}

static const char *op_name(kn_reduce_op op) {
  return op == KN_RED_SUM ? "sum" : op == KN_RED_MAX ? "max" : op == KN_RED_MIN ? "min" : "prod";
}

/* The template's parameters as one line for --dump-after=te. */
static const char *describe(rows *R) {
  kn_arena *A = R->ec->arena;
  const char *stages = "";
  for (int s = 0; s < R->n_stages; s++)
    stages = kn_arena_printf(A, "%s%s%s.%s[%lld]", stages, s ? ", " : "", op_name(R->st[s].t->body->u.reduce.op),
                             kn_dtype_name(R->st[s].t->dtype), (long long)R->len[s]);
  return kn_arena_printf(A, "row_reduce(threads=%lld, row_axes=%d, cols=%lld, stages=[%s], tree=shared)",
                         (long long)R->threads, R->n_row, (long long)R->cols, stages);
}

kn_stmt *kn_gpu_rows_lower(kn_expr_ctx *ec, kn_te_tensor *out, kn_buffer *out_buf, const kn_lower_params *params,
                           const char **schedule) {
  rows R = {.ec = ec, .out = out, .params = params};
  if (out->kind != KN_TE_COMPUTE || !match(&R)) return NULL;
  R.bx = kn_var_new(ec, "bx");
  R.tx = kn_var_new(ec, "tx");
  for (int s = 0; s < R.n_stages; s++)
    R.red[s] = kn_buffer_new(ec, kn_arena_printf(ec->arena, "red%d", s), R.st[s].t->dtype, KN_BUF_SHARED, R.threads);
  kn_stmt *parts[KN_SCHED_MAX_STAGES + 1];
  for (int s = 0; s < R.n_stages; s++) parts[s] = stage_code(&R, s);
  parts[R.n_stages] = epilogue(&R, out_buf);
  kn_stmt *body = kn_s_bind(ec, R.tx, I(&R, R.threads), KN_FOR_THREAD, 0, kn_s_seq(ec, parts, R.n_stages + 1));
  for (int s = R.n_stages - 1; s >= 0; s--) body = kn_s_alloc(ec, R.red[s], body);
  kn_expr *n_rows = I(&R, 1);
  for (int a = 0; a < R.n_row; a++) n_rows = kn_e_mul(ec, n_rows, out->shape[a]);
  body = kn_s_bind(ec, R.bx, kn_simplify(ec, n_rows), KN_FOR_BLOCK, 0, body);
  *schedule = describe(&R);
  return kn_simplify_stmt(ec, body);
}
