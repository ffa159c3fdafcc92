/* test_schedule.c — every default schedule, checked without LLVM.
 *
 * Each case builds a small graph, runs the graph passes, fusion, TE
 * construction, the default schedule, lowering and finalization, then
 * executes the resulting plan with the loop-IR interpreter (2 tasks, so the
 * parallel split is exercised) and compares every output with the naive
 * reference interpreter run on the original graph. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ir/loop/loop_eval.h"
#include "ir/passes/passes.h"
#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"
#include "ir/loop/simplify.h"
#include "schedule/schedule.h"
#include "tools/pipeline.h"
#include "tools/plan_build.h"

static const kn_target avx512 = {.arch = KN_ARCH_X86_64, .vector_bits = 512, .vector_regs = 32, .has_fma = true, .sw_prefetch = true};

/* ---- graph building helpers ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static int input(kn_graph *g, const char *name, int rank, const int64_t *dims, uint32_t batch_mask) {
  int v = kn_graph_add_value(g, name);
  g->values[v].dtype = KN_DT_F32;
  g->values[v].shape_known = true;
  g->values[v].shape.rank = rank;
  memcpy(g->values[v].shape.dim, dims, sizeof(int64_t) * (size_t)rank);
  g->values[v].shape.batch_mask = batch_mask;
  int *grown = kn_arena_alloc(&g->arena, sizeof(int) * (size_t)(g->n_inputs + 1));
  if (g->n_inputs) memcpy(grown, g->inputs, sizeof(int) * (size_t)g->n_inputs);
  grown[g->n_inputs++] = v;
  g->inputs = grown;
  return v;
}

static int weight(kn_graph *g, const char *name, int rank, const int64_t *dims) {
  kn_shape s = {.rank = rank};
  memcpy(s.dim, dims, sizeof(int64_t) * (size_t)rank);
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= dims[i];
  float *data = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) data[i] = frand() * 0.5f;
  int v = kn_graph_add_const(g, name, KN_DT_F32, &s, data);
  free(data);
  return v;
}

static int ints(kn_graph *g, const char *name, int n, const int64_t *vals) {
  kn_shape s = {.rank = 1, .dim = {n}};
  return kn_graph_add_const(g, name, KN_DT_I64, &s, vals);
}

static int node(kn_graph *g, kn_op op, const char *name, const int *in, int n_in) {
  int out = kn_graph_add_value(g, name);
  kn_graph_add_node(g, op, name, in, n_in, &out, 1);
  g->nodes[g->n_nodes - 1].op_type = kn_op_name(op);
  g->nodes[g->n_nodes - 1].domain = "";
  return out;
}

static void attr_ints(kn_graph *g, const char *name, int n, const int64_t *v) {
  kn_attr a = {.name = name, .kind = KN_ATTR_INTS, .n = n};
  a.ints = kn_arena_alloc(&g->arena, sizeof(int64_t) * (size_t)n);
  memcpy(a.ints, v, sizeof(int64_t) * (size_t)n);
  kn_node_add_attr(g, &g->nodes[g->n_nodes - 1], a);
}

static void attr_int(kn_graph *g, const char *name, int64_t v) {
  kn_node_add_attr(g, &g->nodes[g->n_nodes - 1], (kn_attr){.name = name, .kind = KN_ATTR_INT, .i = v});
}

static void output(kn_graph *g, int v) {
  int *grown = kn_arena_alloc(&g->arena, sizeof(int) * (size_t)(g->n_outputs + 1));
  if (g->n_outputs) memcpy(grown, g->outputs, sizeof(int) * (size_t)g->n_outputs);
  grown[g->n_outputs++] = v;
  g->outputs = grown;
}

/* ---- the check ---- */

static int64_t numel_at(const kn_shape *s, int64_t batch) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->dim[i] * ((s->batch_mask >> i) & 1 ? batch : 1);
  return n;
}

static void run_plan(const kn_plan *plan, void **inputs, void **outputs, int64_t batch) {
  void *ws = aligned_alloc(64, (size_t)((plan->workspace_bytes + 64) & ~63));
  for (int s = 0; s < plan->n_steps; s++) {
    const kn_plan_step *st = &plan->steps[s];
    void *args[32];
    for (int a = 0; a < st->n_args; a++) {
      const kn_plan_arg *pa = &st->args[a];
      char *base = pa->kind == KILN_ARG_WORKSPACE ? ws
                   : pa->kind == KILN_ARG_INPUT   ? inputs[pa->index]
                   : pa->kind == KILN_ARG_OUTPUT  ? outputs[pa->index]
                                                  : (char *)plan->consts[pa->index].data;
      args[a] = base + pa->offset;
    }
    kn_loop_eval(st->kernel, args, batch, 2);
  }
  free(ws);
}

/* Compiles g down to loop IR (schedules from `provider`, NULL: the
 * defaults), runs it at `batch`, compares with the reference. With
 * `must_fail` set, kernel building must fail with a diagnostic containing it. */
/* where check_full prints the kernels' finalized loops (NULL: $KN_TEST_DUMP) */
static FILE *loops_out;

static void check_full(kn_graph *g, int64_t batch, double tol, const kn_sched_provider *provider,
                       const char *must_fail, const char *conv_algo) {
  kn_diag d;
  kn_diag_init(&d);
  g->max_batch = batch;
  kn_compile_opts o = {.conv_algo = conv_algo};
  int rc = kn_infer_shapes(g, &d);
  if (rc == 0) rc = kn_graph_toposort(g, &d);
  /* reference on the original graph */
  void *inputs[8], *ref[8], *got[8];
  for (int i = 0; i < g->n_inputs; i++) {
    int64_t n = numel_at(&g->values[g->inputs[i]].shape, batch);
    float *p = malloc(sizeof(float) * (size_t)n);
    for (int64_t k = 0; k < n; k++) p[k] = frand();
    inputs[i] = p;
  }
  int64_t out_n[8];
  for (int i = 0; i < g->n_outputs; i++) {
    out_n[i] = numel_at(&g->values[g->outputs[i]].shape, batch);
    ref[i] = calloc((size_t)out_n[i], sizeof(float));
    got[i] = calloc((size_t)out_n[i], sizeof(float));
  }
  if (rc == 0) rc = kn_ref_run_graph(g, (const void *const *)inputs, ref, batch, &d);
  if (rc == 0) rc = kn_pipeline_optimize(&o, g, &d);
  kn_arena arena;
  kn_arena_init(&arena);
  kn_expr_ctx ec = {.arena = &arena};
  kn_groups groups = {0};
  if (rc == 0) rc = kn_sched_fuse(g, &arena, &groups, &d);
  kn_kernel_build *kb = kn_arena_alloc(&arena, sizeof(kn_kernel_build) * (size_t)(groups.n + 1));
  for (int i = 0; rc == 0 && i < groups.n; i++)
    rc = kn_sched_build_kernel_with(g, &groups.groups[i], &avx512, &ec, kn_arena_printf(&arena, "k%d", i), provider,
                                    &kb[i], getenv("KN_TEST_DUMP") ? stderr : NULL,
                                    loops_out ? loops_out : getenv("KN_TEST_DUMP") ? stderr : NULL, &d);
  if (must_fail) {
    assert_int_not_equal(rc, 0);
    assert_non_null(strstr(d.count ? d.lines[d.count - 1] : "", must_fail));
  }
  kn_plan plan;
  if (must_fail) goto done;
  if (rc == 0) rc = kn_plan_build(g, kb, groups.n, "t", &arena, &plan, &d);
  if (rc != 0) kn_diag_print(&d, "test");
  assert_int_equal(rc, 0);
  run_plan(&plan, inputs, got, batch);
  for (int i = 0; i < g->n_outputs; i++) {
    const float *r = ref[i], *x = got[i];
    double max_ref = 1, max_err = 0;
    for (int64_t k = 0; k < out_n[i]; k++) {
      max_ref = fmax(max_ref, fabs(r[k]));
      max_err = fmax(max_err, fabs((double)r[k] - x[k]));
      if (isnan(x[k]) != isnan(r[k])) max_err = INFINITY;
    }
    if (max_err > tol * max_ref) fprintf(stderr, "output %d: max error %g (max |ref| %g)\n", i, max_err, max_ref);
    assert_true(max_err <= tol * max_ref);
  }
done:
  for (int i = 0; i < g->n_inputs; i++) free(inputs[i]);
  for (int i = 0; i < g->n_outputs; i++) {
    free(ref[i]);
    free(got[i]);
  }
  kn_arena_free(&arena);
  kn_diag_free(&d);
}

static void check_with(kn_graph *g, int64_t batch, double tol, const kn_sched_provider *provider,
                       const char *must_fail) {
  check_full(g, batch, tol, provider, must_fail, NULL);
}

static void check(kn_graph *g, int64_t batch, double tol) { check_with(g, batch, tol, NULL, NULL); }

/* check_with, returning the kernels' finalized loops as text (free it) */
static char *check_dump(kn_graph *g, int64_t batch, double tol, const kn_sched_provider *provider) {
  char *text = NULL;
  size_t len = 0;
  loops_out = open_memstream(&text, &len);
  assert_non_null(loops_out);
  check_with(g, batch, tol, provider, NULL);
  fclose(loops_out);
  loops_out = NULL;
  return text;
}

/* ---- reduction blocking (split_reduction) ---- */

typedef struct blocking {
  int axis;          /* reduction axis to block */
  int64_t factor;
  bool inner;        /* block loop inside a serial outer loop (depth < attach) */
  bool pack;         /* pack the broadcast operand per block */
  int applied;       /* kernels the provider changed */
} blocking;

/* Provider: the default schedule of each contraction whose stage can hold
 * partial sums in O, with its reduction blocked. */
static void block_choose(void *ctx, const kn_sched_task *task, kn_schedule *s) {
  blocking *b = ctx;
  if (!task->hints->is_contraction || !task->hints->rsplit_ok || b->axis >= task->hints->n_reduce) return;
  s->rsplit_factor = b->factor;
  s->rsplit_axis = b->axis;
  s->rsplit_pack = b->pack;
  if (b->inner && s->n_parallel > 0) s->n_parallel--; /* the last outer loop runs inside the block loop */
  s->rsplit_depth = s->n_parallel;
  b->applied++;
}

static void check_blocked(kn_graph *g, int64_t batch, int axis, int64_t factor, bool inner, bool pack) {
  blocking b = {.axis = axis, .factor = factor, .inner = inner, .pack = pack};
  kn_sched_provider p = {block_choose, &b};
  check_with(g, batch, 1e-5, &p, NULL);
  assert_true(b.applied > 0);
}

/* x[N, 16, K] @ w[K, 64] + b, relu: rows 16 and columns 64 split without
 * overlap; K = 100 in blocks of 32 (a short last block), 100 and 1 (one
 * block), at both block-loop depths, with and without the activations
 * packed per block; the epilogue only after the last block. */
static void build_dense(kn_graph *g, int64_t K) {
  kn_graph_init(g);
  int x = input(g, "x", 3, (int64_t[]){1, 16, K}, 1);
  int w = weight(g, "w", 2, (int64_t[]){K, 64}), b = weight(g, "b", 1, (int64_t[]){64});
  int mm = node(g, KN_OP_MATMUL, "mm", (int[]){x, w}, 2);
  int add = node(g, KN_OP_ADD, "bias", (int[]){mm, b}, 2);
  output(g, node(g, KN_OP_RELU, "relu", (int[]){add}, 1));
}

static void test_blocked_matmul(void **state) {
  (void)state;
  int64_t factors[] = {32, 100, 1, 7};
  for (int i = 0; i < 4; i++)
    for (int inner = 0; inner < 2; inner++) {
      kn_graph g;
      build_dense(&g, 100);
      check_blocked(&g, 2, 0, factors[i], inner, i % 2);
      kn_graph_free(&g);
    }
}

/* NHWC conv 3x3 (pad 1) + bias + relu, 16 output channels, 12 input:
 * blocks of the input channels (5: a short last block) and of the kernel
 * rows (2 of 3); the first two with the padded input packed per block. */
static void test_blocked_conv(void **state) {
  (void)state;
  int cases[][2] = {{2, 5}, {2, 12}, {0, 2}, {1, 1}};
  for (int i = 0; i < 4; i++) {
    kn_graph g;
    kn_graph_init(&g);
    int x = input(&g, "x", 4, (int64_t[]){1, 12, 6, 8}, 1);
    int w = weight(&g, "w", 4, (int64_t[]){16, 12, 3, 3}), b = weight(&g, "b", 1, (int64_t[]){16});
    int c = node(&g, KN_OP_CONV, "conv", (int[]){x, w, b}, 3);
    attr_ints(&g, "pads", 4, (int64_t[]){1, 1, 1, 1});
    output(&g, node(&g, KN_OP_RELU, "relu", (int[]){c}, 1));
    check_blocked(&g, 1, cases[i][0], cases[i][1], i % 2, i < 2);
    kn_graph_free(&g);
  }
}

/* Rows 13 are split with overlap (the default row tile does not divide
 * them): blocking would add the overlapped rows' blocks twice, so the
 * lowering must refuse it. */
static void test_blocked_overlap_refused(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  int x = input(&g, "x", 2, (int64_t[]){13, 40}, 0);
  int w = weight(&g, "w", 2, (int64_t[]){40, 32});
  output(&g, node(&g, KN_OP_MATMUL, "mm", (int[]){x, w}, 2));
  blocking b = {.axis = 0, .factor = 8};
  kn_sched_provider p = {block_choose, &b};
  check_with(&g, 1, 1e-5, &p, "split with overlap");
  kn_graph_free(&g);
}

/* The wide default tile of MatMuls with large activations (6 rows x 4
 * vectors, overlapping last row tile). */
static void test_wide_matmul_tile(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  int x = input(&g, "x", 2, (int64_t[]){70, 4000}, 0); /* activations over 1 MiB */
  int w = weight(&g, "w", 2, (int64_t[]){4000, 128});
  output(&g, node(&g, KN_OP_MATMUL, "mm", (int[]){x, w}, 2));
  check(&g, 1, 1e-5);
  kn_graph_free(&g);
}

/* ---- cases ---- */

/* conv3x3(pad 1) + bias + relu, conv3x3 stride 2, residual-style add, pools */
static void test_cnn_block(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  int x = input(&g, "x", 4, (int64_t[]){1, 5, 9, 11}, 1);
  int w1 = weight(&g, "w1", 4, (int64_t[]){24, 5, 3, 3}), b1 = weight(&g, "b1", 1, (int64_t[]){24});
  int c1 = node(&g, KN_OP_CONV, "conv1", (int[]){x, w1, b1}, 3);
  attr_ints(&g, "pads", 4, (int64_t[]){1, 1, 1, 1});
  int r1 = node(&g, KN_OP_RELU, "relu1", (int[]){c1}, 1);
  int w2 = weight(&g, "w2", 4, (int64_t[]){24, 24, 3, 3});
  int c2 = node(&g, KN_OP_CONV, "conv2", (int[]){r1, w2}, 2);
  attr_ints(&g, "pads", 4, (int64_t[]){1, 1, 1, 1});
  attr_ints(&g, "strides", 2, (int64_t[]){2, 2});
  int wd = weight(&g, "wd", 4, (int64_t[]){24, 1, 3, 3});
  int dw = node(&g, KN_OP_CONV, "dwconv", (int[]){r1, wd}, 2);
  attr_ints(&g, "pads", 4, (int64_t[]){0, 1, 2, 1});
  attr_ints(&g, "strides", 2, (int64_t[]){2, 2});
  attr_int(&g, "group", 24);
  int add = node(&g, KN_OP_ADD, "add", (int[]){c2, dw}, 2);
  int mp = node(&g, KN_OP_MAX_POOL, "pool", (int[]){add}, 1);
  attr_ints(&g, "kernel_shape", 2, (int64_t[]){3, 3});
  attr_ints(&g, "pads", 4, (int64_t[]){1, 1, 1, 1});
  attr_ints(&g, "strides", 2, (int64_t[]){2, 2});
  int gap = node(&g, KN_OP_GLOBAL_AVERAGE_POOL, "gap", (int[]){mp}, 1);
  output(&g, gap);
  output(&g, add);
  check(&g, 2, 1e-5);
  kn_graph_free(&g);
}

/* conv + SiLU (x * Sigmoid(x)): the Sigmoid and the Mul join the conv's
 * kernel (the conv output has two uses, both inside the group); a SiLU whose
 * input is also a graph output stays apart; both match the reference */
/* The ops in the kernel anchored at an `anchor` node, as "Op,Op,..." */
static void anchored_kernel_ops(kn_graph *g, kn_op anchor, char *buf, size_t cap) {
  kn_diag d;
  kn_diag_init(&d);
  kn_compile_opts o = {0};
  assert_int_equal(kn_infer_shapes(g, &d), 0);
  assert_int_equal(kn_pipeline_optimize(&o, g, &d), 0);
  kn_arena arena;
  kn_arena_init(&arena);
  kn_groups groups = {0};
  assert_int_equal(kn_sched_fuse(g, &arena, &groups, &d), 0);
  buf[0] = 0;
  for (int i = 0; i < groups.n; i++) {
    const kn_group *grp = &groups.groups[i];
    if (g->nodes[grp->anchor].op != anchor) continue;
    for (int m = 0; m < grp->n_nodes; m++)
      snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", m ? "," : "", g->nodes[grp->nodes[m]].op_type);
  }
  kn_arena_free(&arena);
  kn_diag_free(&d);
}

static void build_conv_silu(kn_graph *g, bool conv_is_output) {
  kn_graph_init(g);
  int x = input(g, "x", 4, (int64_t[]){1, 8, 7, 9}, 1);
  int w = weight(g, "w", 4, (int64_t[]){16, 8, 1, 1}), b = weight(g, "b", 1, (int64_t[]){16});
  int c = node(g, KN_OP_CONV, "conv", (int[]){x, w, b}, 3);
  int sg = node(g, KN_OP_SIGMOID, "sig", (int[]){c}, 1);
  int silu = node(g, KN_OP_MUL, "silu", (int[]){c, sg}, 2);
  output(g, silu);
  if (conv_is_output) output(g, c);
}

/* The kernel anchored at `anchor` holds `fused` (its ops, comma-separated)
 * when build(g, false) makes the graph, and only `apart` when build(g, true)
 * makes an inner value a graph output too; both graphs match the reference
 * within tol. */
static void check_fusion(void (*build)(kn_graph *, bool), kn_op anchor, const char *fused, const char *apart,
                         double tol) {
  char got[2][128];
  kn_graph g;
  for (int out = 0; out < 2; out++) {
    build(&g, out);
    anchored_kernel_ops(&g, anchor, got[out], sizeof got[out]);
    kn_graph_free(&g);
  }
  assert_string_equal(got[0], fused);
  assert_string_equal(got[1], apart);
  for (int out = 0; out < 2; out++) {
    build(&g, out);
    check(&g, 2, tol);
    kn_graph_free(&g);
  }
}

static void test_conv_silu_fused(void **state) {
  (void)state;
  check_fusion(build_conv_silu, KN_OP_CONV_NHWC, "kiln.ConvNHWC,Sigmoid,Mul", "kiln.ConvNHWC", 1e-5);
}

/* matmul + bias + GELU as PyTorch exports it, x * (1 + Erf(x / sqrt 2)) *
 * 0.5: the whole diamond joins the matmul's kernel; with the Erf's output
 * also a graph output it stays apart; both match the reference */
static void build_matmul_gelu(kn_graph *g, bool erf_is_output) {
  kn_graph_init(g);
  int x = input(g, "x", 3, (int64_t[]){1, 9, 24}, 1);
  int w = weight(g, "w", 2, (int64_t[]){24, 40}), b = weight(g, "b", 1, (int64_t[]){40});
  int mm = node(g, KN_OP_MATMUL, "mm", (int[]){x, w}, 2);
  int h = node(g, KN_OP_ADD, "bias", (int[]){mm, b}, 2);
  kn_shape scalar = {.rank = 0};
  float sqrt2 = 1.4142135f, one = 1.0f, half = 0.5f;
  int c_sqrt2 = kn_graph_add_const(g, "sqrt2", KN_DT_F32, &scalar, &sqrt2);
  int c_one = kn_graph_add_const(g, "one", KN_DT_F32, &scalar, &one);
  int c_half = kn_graph_add_const(g, "half", KN_DT_F32, &scalar, &half);
  int dv = node(g, KN_OP_DIV, "div", (int[]){h, c_sqrt2}, 2);
  int erf = node(g, KN_OP_ERF, "erf", (int[]){dv}, 1);
  int a1 = node(g, KN_OP_ADD, "add1", (int[]){erf, c_one}, 2);
  int m = node(g, KN_OP_MUL, "mul", (int[]){h, a1}, 2);
  output(g, node(g, KN_OP_MUL, "mul1", (int[]){m, c_half}, 2));
  if (erf_is_output) output(g, erf);
}

static void test_matmul_gelu_fused(void **state) {
  (void)state;
  check_fusion(build_matmul_gelu, KN_OP_MATMUL, "MatMul,Add,Div,Erf,Add,Mul,Mul", "MatMul,Add", 1e-5);
}

/* matmul + bias + relu; gemm with transB; softmax; layer norm */
static void test_dense_block(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  int x = input(&g, "x", 3, (int64_t[]){1, 13, 40}, 1);
  int w = weight(&g, "w", 2, (int64_t[]){40, 37}), b = weight(&g, "b", 1, (int64_t[]){37});
  int mm = node(&g, KN_OP_MATMUL, "mm", (int[]){x, w}, 2);
  int add = node(&g, KN_OP_ADD, "bias", (int[]){mm, b}, 2);
  int relu = node(&g, KN_OP_RELU, "relu", (int[]){add}, 1);
  int sm = node(&g, KN_OP_SOFTMAX, "softmax", (int[]){relu}, 1);
  attr_int(&g, "axis", -1);
  int scale = weight(&g, "scale", 1, (int64_t[]){37}), shift = weight(&g, "shift", 1, (int64_t[]){37});
  int ln = node(&g, KN_OP_LAYER_NORM, "ln", (int[]){relu, scale, shift}, 3);
  attr_int(&g, "axis", -1);
  int erf = node(&g, KN_OP_ERF, "erf", (int[]){ln}, 1);
  output(&g, sm);
  output(&g, erf);
  check(&g, 3, 1e-5);
  kn_graph_free(&g);
}

static void test_gemm_transpose_reshape(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  int x = input(&g, "x", 2, (int64_t[]){1, 50}, 1);
  int w = weight(&g, "w", 2, (int64_t[]){19, 50}), c = weight(&g, "c", 1, (int64_t[]){19});
  int gm = node(&g, KN_OP_GEMM, "gemm", (int[]){x, w, c}, 3);
  attr_int(&g, "transB", 1);
  int shape = ints(&g, "shape", 3, (int64_t[]){-1, 1, 19});
  int rs = node(&g, KN_OP_RESHAPE, "reshape", (int[]){gm, shape}, 2);
  int tr = node(&g, KN_OP_TRANSPOSE, "transpose", (int[]){rs}, 1);
  attr_ints(&g, "perm", 3, (int64_t[]){2, 1, 0});
  int sig = node(&g, KN_OP_SIGMOID, "sigmoid", (int[]){tr}, 1);
  output(&g, sig);
  check(&g, 2, 1e-5);
  kn_graph_free(&g);
}

/* the flat index of a pixel split as (p / 7, p % 7) is linear in p again,
 * and a loop of extent 1 leaves its variable's one value */
static void test_simplify_pixel_index(void **state) {
  (void)state;
  kn_arena A;
  kn_arena_init(&A);
  kn_expr_ctx c = {.arena = &A};
  kn_var *p = kn_var_new(&c, "p"), *n = kn_var_new(&c, "n"), *k = kn_var_new(&c, "k");
  kn_expr *P = kn_e_var(&c, p), *N = kn_e_var(&c, n), *seven = kn_e_int(&c, 7);
  /* ((n*7 + p/7) * 7 + p%7) * 16 */
  kn_expr *row = kn_e_add(&c, kn_e_mul(&c, N, seven), kn_e_div(&c, P, seven));
  kn_expr *flat = kn_e_mul(&c, kn_e_add(&c, kn_e_mul(&c, row, seven), kn_e_mod(&c, P, seven)), kn_e_int(&c, 16));
  kn_expr *want = kn_e_mul(&c, kn_e_add(&c, kn_e_mul(&c, N, kn_e_int(&c, 49)), P), kn_e_int(&c, 16));
  assert_true(kn_e_equal(kn_simplify(&c, flat), want));
  assert_true(kn_e_equal(kn_simplify(&c, kn_e_add(&c, kn_e_mul(&c, kn_e_div(&c, P, seven), seven), kn_e_mod(&c, P, seven))), P));
  /* different divisors stay as they are */
  kn_expr *mixed = kn_e_add(&c, kn_e_mul(&c, kn_e_div(&c, P, seven), seven), kn_e_mod(&c, P, kn_e_int(&c, 5)));
  assert_true(kn_e_equal(kn_simplify(&c, mixed), mixed));
  /* for k in [0, 1): out[p + k] = 1 -> out[p] = 1 */
  kn_buffer *out = kn_buffer_new(&c, "out", KN_DT_F32, KN_BUF_PARAM, 0);
  kn_stmt *loop = kn_s_for(&c, k, kn_e_int(&c, 0), kn_e_int(&c, 1), KN_FOR_SERIAL,
                           kn_s_store(&c, out, kn_e_add(&c, P, kn_e_var(&c, k)), kn_e_float(&c, KN_DT_F32, 1.0)));
  kn_stmt *s = kn_simplify_stmt(&c, loop);
  assert_int_equal(s->kind, KN_S_FOR);
  assert_true(kn_e_equal(s->u.loop.body->u.store.index, P));
  kn_arena_free(&A);
}

/* ---- border versioning (borders.c) ---- */

static int expr_selects(const kn_expr *e) {
  if (!e) return 0;
  switch (e->kind) {
  case KN_E_INT:
  case KN_E_FLOAT:
  case KN_E_VAR:
  case KN_E_REDUCE: return 0;
  case KN_E_NOT:
  case KN_E_CAST:
  case KN_E_BROADCAST: return expr_selects(e->u.un.a);
  case KN_E_RAMP: return expr_selects(e->u.ramp.base);
  case KN_E_SELECT: return 1 + expr_selects(e->u.sel.cond) + expr_selects(e->u.sel.t) + expr_selects(e->u.sel.f);
  case KN_E_CALL: {
    int n = 0;
    for (int i = 0; i < e->u.call.n; i++) n += expr_selects(e->u.call.args[i]);
    return n;
  }
  case KN_E_LOAD: return e->u.load.buffer ? expr_selects(e->u.load.index) : 0;
  default: return expr_selects(e->u.bin.a) + expr_selects(e->u.bin.b);
  }
}

/* selects in s; *ifs counts the IFs whose then-branch has none and whose
 * else-branch has some (a versioned tile) */
static int stmt_selects(const kn_stmt *s, int *ifs) {
  if (!s) return 0;
  switch (s->kind) {
  case KN_S_FOR: return stmt_selects(s->u.loop.body, ifs);
  case KN_S_LET: return expr_selects(s->u.let.value) + stmt_selects(s->u.let.body, ifs);
  case KN_S_STORE: return expr_selects(s->u.store.index) + expr_selects(s->u.store.value);
  case KN_S_PREFETCH: return expr_selects(s->u.prefetch.index);
  case KN_S_GPU: return 0;
  case KN_S_ALLOC: return stmt_selects(s->u.alloc.body, ifs);
  case KN_S_SEQ: {
    int n = 0;
    for (int i = 0; i < s->u.seq.n; i++) n += stmt_selects(s->u.seq.stmts[i], ifs);
    return n;
  }
  case KN_S_IF: {
    int t = stmt_selects(s->u.ifs.then_s, ifs), f = stmt_selects(s->u.ifs.else_s, ifs);
    if (t == 0 && f > 0) (*ifs)++;
    return t + f;
  }
  }
  return 0;
}

/* the branches of IFs in s that are not IFs themselves and hold no select:
 * the copies of a tile that run without bounds tests */
static int select_free_copies(const kn_stmt *s) {
  if (!s) return 0;
  switch (s->kind) {
  case KN_S_FOR: return select_free_copies(s->u.loop.body);
  case KN_S_LET: return select_free_copies(s->u.let.body);
  case KN_S_ALLOC: return select_free_copies(s->u.alloc.body);
  case KN_S_SEQ: {
    int n = 0;
    for (int i = 0; i < s->u.seq.n; i++) n += select_free_copies(s->u.seq.stmts[i]);
    return n;
  }
  case KN_S_IF: {
    int n = 0, ifs = 0;
    const kn_stmt *b[2] = {s->u.ifs.then_s, s->u.ifs.else_s};
    for (int i = 0; i < 2; i++)
      n += b[i] && b[i]->kind != KN_S_IF ? stmt_selects(b[i], &ifs) == 0 : select_free_copies(b[i]);
    return n;
  }
  default: return 0;
  }
}

/* depthwise 3x3 conv (pads 1) over [N, channels, 14, width] + relu, then
 * (pool) a 3x3 max pool (pads 1) */
static void build_padded_windows(kn_graph *g, int64_t channels, int64_t width, bool pool) {
  kn_graph_init(g);
  int x = input(g, "x", 4, (int64_t[]){1, channels, 14, width}, 1);
  int wd = weight(g, "wd", 4, (int64_t[]){channels, 1, 3, 3});
  int dw = node(g, KN_OP_CONV, "dwconv", (int[]){x, wd}, 2);
  attr_ints(g, "pads", 4, (int64_t[]){1, 1, 1, 1});
  attr_int(g, "group", channels);
  int r = node(g, KN_OP_RELU, "relu", (int[]){dw}, 1);
  if (!pool) {
    output(g, r);
    return;
  }
  int mp = node(g, KN_OP_MAX_POOL, "pool", (int[]){r}, 1);
  attr_ints(g, "kernel_shape", 2, (int64_t[]){3, 3});
  attr_ints(g, "pads", 4, (int64_t[]){1, 1, 1, 1});
  output(g, mp);
}

/* builds the kernels of build_padded_windows(channels, width, pool):
 * exactly n_windowed read through bounds tests, each has a versioned tile,
 * and the i-th has at least min_copies[i] select-free copies; then checks
 * the results against the reference */
static void check_versioned(int64_t channels, int64_t width, bool pool, int n_windowed,
                            const int *min_copies) {
  kn_graph g;
  build_padded_windows(&g, channels, width, pool);
  kn_diag d;
  kn_diag_init(&d);
  kn_compile_opts o = {0};
  assert_int_equal(kn_infer_shapes(&g, &d), 0);
  assert_int_equal(kn_pipeline_optimize(&o, &g, &d), 0);
  kn_arena arena;
  kn_arena_init(&arena);
  kn_expr_ctx ec = {.arena = &arena};
  kn_groups groups = {0};
  assert_int_equal(kn_sched_fuse(&g, &arena, &groups, &d), 0);
  int windowed = 0;
  for (int i = 0; i < groups.n; i++) {
    kn_kernel_build kb;
    assert_int_equal(kn_sched_build_kernel_with(&g, &groups.groups[i], &avx512, &ec, "k", NULL, &kb, NULL, NULL, &d), 0);
    int ifs = 0, selects = stmt_selects(kb.kernel->body, &ifs);
    if (selects == 0) continue; /* the layout transposes */
    assert_true(windowed < n_windowed);
    assert_true(ifs >= 1);
    assert_true(select_free_copies(kb.kernel->body) >= min_copies[windowed]);
    windowed++;
  }
  assert_int_equal(windowed, n_windowed);
  kn_arena_free(&arena);
  kn_diag_free(&d);
  kn_graph_free(&g);
  build_padded_windows(&g, channels, width, pool);
  check(&g, 2, 1e-5);
  kn_graph_free(&g);
}

/* every kernel of both windowed ops reads through bounds tests on the
 * border and runs a select-free copy of its tile inside; in the depthwise
 * conv (first), which unrolls kw, a tile on the left or right border of an
 * inner row is a copy of its own with its columns known (the cascade),
 * select-free as well; the pool's taps loop, and keep their tests */
static void test_border_versioning(void **state) {
  (void)state;
  check_versioned(16, 30, true, 2, (const int[]){3, 1});
}

/* a 14-wide row of 32 channels, in two 7-pixel tiles, has no interior tile
 * (the left one reads column -1, the right one column 14): the column tile
 * is pinned, and in an inner row both copies are select-free */
static void test_border_pinning(void **state) {
  (void)state;
  check_versioned(32, 14, false, 1, (const int[]){2});
}

/* ---- a squeeze-and-excitation scale in the weights (pass_scale_weights.c) ---- */

/* expand 1x1 + Relu -> y; s = Sigmoid(1x1 conv(GlobalAveragePool(y)));
 * a k x k projection (pads 0, + bias) of y * s */
static void build_se_block(kn_graph *g, int64_t k) {
  kn_graph_init(g);
  int x = input(g, "x", 4, (int64_t[]){1, 8, 12, 12}, 1);
  int we = weight(g, "we", 4, (int64_t[]){32, 8, 1, 1});
  int y = node(g, KN_OP_RELU, "relu", (int[]){node(g, KN_OP_CONV, "expand", (int[]){x, we}, 2)}, 1);
  int p = node(g, KN_OP_GLOBAL_AVERAGE_POOL, "gap", (int[]){y}, 1);
  int wf = weight(g, "wf", 4, (int64_t[]){32, 32, 1, 1});
  int s = node(g, KN_OP_SIGMOID, "sig", (int[]){node(g, KN_OP_CONV, "fc", (int[]){p, wf}, 2)}, 1);
  int ys = node(g, KN_OP_MUL, "scale", (int[]){y, s}, 2);
  int wp = weight(g, "wp", 4, (int64_t[]){16, 32, k, k}), bp = weight(g, "bp", 1, (int64_t[]){16});
  output(g, node(g, KN_OP_CONV, "proj", (int[]){ys, wp, bp}, 3));
}

/* the projection reads per-sample weights (no kernel scales the
 * activation), and its kernel matches the reference at batch 1 and 2, 1x1
 * and 3x3 (9 x 32 x 16 weights, the size of the 12x12x32 activation) */
static void check_se_block(int64_t k) {
  kn_graph g;
  build_se_block(&g, k);
  g.max_batch = 2;
  kn_diag d;
  kn_diag_init(&d);
  kn_compile_opts o = {0};
  assert_int_equal(kn_infer_shapes(&g, &d), 0);
  assert_int_equal(kn_pipeline_optimize(&o, &g, &d), 0);
  int per_sample = 0, act_muls = 0;
  for (int i = 0; i < g.n_nodes; i++) {
    const kn_node *n = &g.nodes[i];
    if (n->dead) continue;
    per_sample += n->op == KN_OP_CONV_NHWC && g.values[n->in[1]].shape.rank == 5;
    act_muls += n->op == KN_OP_MUL && g.values[n->out[0]].shape.rank == 4;
  }
  assert_int_equal(per_sample, 1);
  assert_int_equal(act_muls, 0);
  kn_diag_free(&d);
  kn_graph_free(&g);
  for (int64_t batch = 1; batch <= 2; batch++) {
    build_se_block(&g, k);
    check(&g, batch, 1e-5);
    kn_graph_free(&g);
  }
}

static void test_se_scale_weights(void **state) {
  (void)state;
  check_se_block(1);
  check_se_block(3);
}

/* ---- prefetch hints (prefetch.c) ---- */

static void count_prefetch(const kn_stmt *s, int *l1, int *l2) {
  if (!s) return;
  switch (s->kind) {
  case KN_S_FOR: count_prefetch(s->u.loop.body, l1, l2); return;
  case KN_S_ALLOC: count_prefetch(s->u.alloc.body, l1, l2); return;
  case KN_S_LET: count_prefetch(s->u.let.body, l1, l2); return;
  case KN_S_IF:
    count_prefetch(s->u.ifs.then_s, l1, l2);
    count_prefetch(s->u.ifs.else_s, l1, l2);
    return;
  case KN_S_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) count_prefetch(s->u.seq.stmts[i], l1, l2);
    return;
  case KN_S_PREFETCH: ++*(s->u.prefetch.level == 1 ? l1 : l2); return;
  case KN_S_GPU: return;
  case KN_S_STORE: return;
  }
}

/* conv(x[N, cin, hw, hw], k x k, pad k/2) + relu, cout output channels */
static void build_conv(kn_graph *g, int64_t cin, int64_t cout, int64_t hw, int64_t k) {
  kn_graph_init(g);
  int x = input(g, "x", 4, (int64_t[]){1, cin, hw, hw}, 1);
  int w = weight(g, "w", 4, (int64_t[]){cout, cin, k, k}), b = weight(g, "b", 1, (int64_t[]){cout});
  int c = node(g, KN_OP_CONV, "conv", (int[]){x, w, b}, 3);
  attr_ints(g, "pads", 4, (int64_t[]){k / 2, k / 2, k / 2, k / 2});
  output(g, node(g, KN_OP_RELU, "relu", (int[]){c}, 1));
}

/* Prefetch hints of the conv kernel of build_conv(c[0..3]) (the other
 * kernels, layout transposes and padding, read no weights). */
static void conv_prefetch(const int64_t *c, const kn_target *t, const char *algo, int *l1, int *l2) {
  kn_graph g;
  build_conv(&g, c[0], c[1], c[2], c[3]);
  kn_diag d;
  kn_diag_init(&d);
  kn_compile_opts o = {.conv_algo = algo};
  assert_int_equal(kn_infer_shapes(&g, &d), 0);
  assert_int_equal(kn_pipeline_optimize(&o, &g, &d), 0);
  kn_arena arena;
  kn_arena_init(&arena);
  kn_expr_ctx ec = {.arena = &arena};
  kn_groups groups = {0};
  assert_int_equal(kn_sched_fuse(&g, &arena, &groups, &d), 0);
  *l1 = *l2 = 0;
  for (int i = 0; i < groups.n; i++) {
    kn_kernel_build kb;
    assert_int_equal(kn_sched_build_kernel_with(&g, &groups.groups[i], t, &ec, "k", NULL, &kb, NULL, NULL, &d), 0);
    count_prefetch(kb.kernel->body, l1, l2);
  }
  kn_arena_free(&arena);
  kn_diag_free(&d);
  kn_graph_free(&g);
}

/* 7x7 layers (49 output rows per column tile, 512 KiB and 1.1 MiB of
 * weights streamed from memory) get both hints, 1x1 and 3x3 (direct, not
 * Winograd); a layer whose 16 KiB of weights stay in cache gets none. The
 * hinted kernels, compiled the same way, compute the reference's values at
 * batch 2, and the interpreter checks every hint's index against the
 * weights' size (the last column tile prefetches itself, not past the end).
 * A target whose sw_prefetch is off gets none. */
static void test_prefetch_hints(void **state) {
  (void)state;
  int64_t cases[][4] = {{512, 256, 7, 1}, {128, 256, 7, 3}};
  for (int i = 0; i < 2; i++) {
    int l1, l2;
    conv_prefetch(cases[i], &avx512, "direct", &l1, &l2);
    assert_true(l1 >= 1);
    assert_true(l2 >= 1);
    kn_graph g;
    build_conv(&g, cases[i][0], cases[i][1], cases[i][2], cases[i][3]);
    check_full(&g, 2, 1e-4, NULL, NULL, "direct");
    kn_graph_free(&g);
  }
  int l1, l2;
  conv_prefetch((int64_t[]){64, 64, 28, 1}, &avx512, "direct", &l1, &l2);
  assert_int_equal(l1 + l2, 0);
  /* a target without sw_prefetch (AMD's) gets none */
  kn_target amd = avx512;
  amd.sw_prefetch = false;
  conv_prefetch(cases[0], &amd, "direct", &l1, &l2);
  assert_int_equal(l1 + l2, 0);
}

/* Winograd's GEMM is a batched matmul: its transformed weights hold one
 * matrix per tile element, and the column tiles run through the matrices
 * as well as the columns. With few output rows (7x7 and 14x14 images: 16
 * tiles) the weights (1 MiB in F(2x2), 2.3 MiB in F(4x4)) get both hints;
 * the kernels compute the reference's values at batch 2 (the interpreter
 * checks each hint's index). 28x28's 196 tiles reuse each matrix's slice
 * enough to get none. */
static void test_prefetch_batched(void **state) {
  (void)state;
  static const struct {
    int64_t conv[4];
    const char *algo;
    bool hinted;
  } cases[] = {
      {{128, 128, 7, 3}, "winograd", true},
      {{128, 128, 14, 3}, "winograd4", true},
      {{64, 64, 28, 3}, "winograd", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int l1, l2;
    conv_prefetch(cases[i].conv, &avx512, cases[i].algo, &l1, &l2);
    assert_int_equal(l1 >= 1 && l2 >= 1, cases[i].hinted);
    if (!cases[i].hinted) assert_int_equal(l1 + l2, 0);
    kn_graph g;
    build_conv(&g, cases[i].conv[0], cases[i].conv[1], cases[i].conv[2], cases[i].conv[3]);
    check_full(&g, 2, 1e-4, NULL, NULL, cases[i].algo);
    kn_graph_free(&g);
  }
}

/* A batch-1 classifier: Gemm(x[N, 64], W[40, 64]^T) + b, 40 columns. The
 * default vector is 8 columns, which divide 40 (16 do not), so W is packed
 * tile by tile instead of read 64 apart per lane; the values match the
 * reference (batch 2; batch 1 for a static batch). */
static void test_gemv_columns(void **state) {
  (void)state;
  /* a symbolic batch, and a static batch of 1: the same rule, 40 columns
   * in one vector, 1000 in tiles of 5 x 8 */
  static const int64_t cols[2] = {40, 1000};
  static const char *packed[2] = {"w.packed8", "w.packed40"};
  for (int c = 0; c < 2; c++)
    for (uint32_t batch_mask = 0; batch_mask <= 1; batch_mask++) {
      kn_graph g;
      kn_graph_init(&g);
      int x = input(&g, "x", 2, (int64_t[]){1, 64}, batch_mask);
      int w = weight(&g, "w", 2, (int64_t[]){cols[c], 64}), b = weight(&g, "b", 1, (int64_t[]){cols[c]});
      int gemm = node(&g, KN_OP_GEMM, "fc", (int[]){x, w, b}, 3);
      attr_int(&g, "transB", 1);
      output(&g, gemm);
      check(&g, batch_mask ? 2 : 1, 1e-5);
      assert_true(kn_graph_find_value(&g, packed[c]) >= 0);
      kn_graph_free(&g);
    }
}

static void record_unroll_reduce(void *ctx, const kn_sched_task *task, kn_schedule *s) {
  int *seen = ctx;
  if (task->g->nodes[task->grp->anchor].op == KN_OP_CONV_NHWC) *seen = s->unroll_reduce;
}

/* A depthwise conv whose epilogue reads the size-1 batch dim of a static
 * batch at index 0 (broadcasting) still counts its stage as the output's
 * own, so the default unrolls kw as with a symbolic batch; both match the
 * reference. */
static void test_static_batch_stage(void **state) {
  (void)state;
  for (uint32_t batch_mask = 0; batch_mask <= 1; batch_mask++) {
    kn_graph g;
    kn_graph_init(&g);
    int x = input(&g, "x", 4, (int64_t[]){1, 32, 10, 10}, batch_mask);
    int wd = weight(&g, "wd", 4, (int64_t[]){32, 1, 3, 3});
    int dw = node(&g, KN_OP_CONV, "dwconv", (int[]){x, wd}, 2);
    attr_ints(&g, "pads", 4, (int64_t[]){1, 1, 1, 1});
    attr_int(&g, "group", 32);
    int sg = node(&g, KN_OP_SIGMOID, "sig", (int[]){dw}, 1);
    output(&g, node(&g, KN_OP_MUL, "silu", (int[]){dw, sg}, 2));
    int seen = -1;
    kn_sched_provider p = {record_unroll_reduce, &seen};
    check_with(&g, batch_mask ? 2 : 1, 1e-5, &p, NULL);
    assert_int_equal(seen, 1);
    kn_graph_free(&g);
  }
}

/* The default schedule of the MatMul kernel: fuse_spatial and the row factor. */
typedef struct rows_seen {
  int fuse;
  int64_t row_factor;
} rows_seen;

static void record_matmul_rows(void *ctx, const kn_sched_task *task, kn_schedule *s) {
  rows_seen *r = ctx;
  if (task->g->nodes[task->grp->anchor].op != KN_OP_MATMUL) return;
  int ra = s->n_axes - 2;
  r->fuse = s->fuse_spatial;
  r->row_factor = s->n_factors[ra] > 0 ? s->factors[ra][0] : 1;
}

/* [13, 1, 40] x [40, 32] + bias (a [T, B, E] input projection at batch 1):
 * every row multiplies one matrix, so the default tiles rows across the
 * unit axis (fuse_spatial, rows unrolled), not 13 matrix-vector products.
 * With a batched right operand ([13, 40, 32]) each row has its own matrix:
 * no fusion. Both match the reference. */
static void test_matmul_rows_across(void **state) {
  (void)state;
  for (int batched = 0; batched <= 1; batched++) {
    kn_graph g;
    kn_graph_init(&g);
    int x = input(&g, "x", 3, (int64_t[]){13, 1, 40}, 0);
    int w = batched ? weight(&g, "w", 3, (int64_t[]){13, 40, 32}) : weight(&g, "w", 2, (int64_t[]){40, 32});
    int b = weight(&g, "b", 1, (int64_t[]){32});
    int mm = node(&g, KN_OP_MATMUL, "mm", (int[]){x, w}, 2);
    output(&g, node(&g, KN_OP_ADD, "bias", (int[]){mm, b}, 2));
    rows_seen seen = {-1, 0};
    kn_sched_provider p = {record_matmul_rows, &seen};
    check_with(&g, 1, 1e-5, &p, NULL);
    assert_int_equal(seen.fuse, batched ? 0 : 1);
    if (!batched) assert_true(seen.row_factor > 1);
    kn_graph_free(&g);
  }
}

static void record_conv_cols(void *ctx, const kn_sched_task *task, kn_schedule *s) {
  int64_t *cf = ctx;
  int c = s->n_axes - 1;
  if (task->g->nodes[task->grp->anchor].op == KN_OP_CONV_NHWC) *cf = s->n_factors[c] > 0 ? s->factors[c][0] : 1;
}

/* A grouped 3x3 conv of 8 channels per group (RegNet-Y's width) and of 4
 * (ResNeXt's first stage): the default column tile divides the group, so
 * each vector reads one input channel of one group (a broadcast, not a
 * gather across groups). Both match the reference. */
static void test_grouped_conv_cols(void **state) {
  (void)state;
  static const int64_t per_group[2] = {8, 4};
  for (int i = 0; i < 2; i++) {
    kn_graph g;
    kn_graph_init(&g);
    int x = input(&g, "x", 4, (int64_t[]){1, 48, 12, 12}, 0);
    int w = weight(&g, "w", 4, (int64_t[]){48, per_group[i], 3, 3});
    int conv = node(&g, KN_OP_CONV, "gconv", (int[]){x, w}, 2);
    attr_ints(&g, "pads", 4, (int64_t[]){1, 1, 1, 1});
    attr_int(&g, "group", 48 / per_group[i]);
    output(&g, node(&g, KN_OP_RELU, "relu", (int[]){conv}, 1));
    int64_t cf = -1;
    kn_sched_provider p = {record_conv_cols, &cf};
    check_with(&g, 1, 1e-5, &p, NULL);
    assert_true(cf >= 4);
    assert_int_equal(per_group[i] % cf, 0);
    kn_graph_free(&g);
  }
}

/* Provider recording the default schedule of the Transpose kernels. */
typedef struct order_seen {
  int kernels;
  int before_vector[2]; /* axis of the loop just outside the vectorized one */
} order_seen;

static void record_transpose(void *ctx, const kn_sched_task *task, kn_schedule *s) {
  order_seen *o = ctx;
  if (task->g->nodes[task->grp->anchor].op != KN_OP_TRANSPOSE || o->kernels >= 2) return;
  assert_true(s->n_loops >= 2);
  assert_int_equal(s->loops[s->n_loops - 1].kind, KN_FOR_VECTORIZED);
  o->before_vector[o->kernels++] = s->loops[s->n_loops - 2].axis;
}

/* An NHWC -> NCHW transpose of a wide image gathers each vector along w
 * from lines 24 channels apart: the channel loop runs innermost of the
 * outer loops. With w short inside the channels (the NCHW -> NHWC way, 2
 * vectors), the natural order stays. Both match the reference. */
static void test_transpose_gather_order(void **state) {
  (void)state;
  for (int wide = 0; wide < 2; wide++) {
    kn_graph g;
    kn_graph_init(&g);
    int64_t w = wide ? 30 : 3;
    int x = input(&g, "x", 4, (int64_t[]){1, 40, w, wide ? 24 : 32}, 1);
    int t = node(&g, KN_OP_TRANSPOSE, "t", (int[]){x}, 1);
    attr_ints(&g, "perm", 4, wide ? (int64_t[]){0, 3, 1, 2} : (int64_t[]){0, 2, 3, 1});
    output(&g, t);
    order_seen o = {0};
    kn_sched_provider p = {record_transpose, &o};
    check_with(&g, 2, 0, &p, NULL);
    assert_int_equal(o.kernels, 1);
    /* wide: O = [n, 24, 40, 30], gather axis 1; else O = [n, 3, 32, 40]
     * read along its w (axis 3, the vector axis: no gather) */
    assert_int_equal(o.before_vector[0], wide ? 1 : 3);
    kn_graph_free(&g);
  }
}

/* NCHW image -> Transpose to NHWC -> Pad (what layout and explicit_pad make
 * of a stem conv's input): the Pad's kernel reads the image through the
 * Transpose, one kernel; with the Transpose's result also a graph output,
 * two. Both match the reference. */
static void build_transpose_pad(kn_graph *g, bool transposed_is_output) {
  kn_graph_init(g);
  int x = input(g, "x", 4, (int64_t[]){1, 3, 6, 5}, 1);
  int t = node(g, KN_OP_TRANSPOSE, "t", (int[]){x}, 1);
  attr_ints(g, "perm", 4, (int64_t[]){0, 2, 3, 1});
  static const int64_t pads[8] = {0, 1, 2, 0, 0, 2, 1, 0};
  kn_shape ps = {.rank = 1, .dim = {8}};
  int pv = kn_graph_add_const(g, "pads", KN_DT_I64, &ps, pads);
  output(g, node(g, KN_OP_PAD, "pad", (int[]){t, pv}, 2));
  if (transposed_is_output) output(g, t);
}

static void test_transpose_into_pad(void **state) {
  (void)state;
  check_fusion(build_transpose_pad, KN_OP_PAD, "Transpose,Pad", "Pad", 0);
}

/* ranges decide comparisons and clamps; an IF's condition bounds its
 * variables in the then-branch, and a single comparison's negation in the
 * else-branch */
static void test_simplify_ranges(void **state) {
  (void)state;
  kn_arena A;
  kn_arena_init(&A);
  kn_expr_ctx c = {.arena = &A};
  kn_var *i = kn_var_new(&c, "i"), *k = kn_var_new(&c, "k");
  kn_expr *I = kn_e_var(&c, i), *K = kn_e_var(&c, k);
  kn_expr *x = kn_e_add(&c, kn_e_add(&c, I, K), kn_e_int(&c, -1)); /* i + k - 1 */
  kn_expr *inb = kn_e_bin(&c, KN_E_AND, kn_e_bin(&c, KN_E_LE, kn_e_int(&c, 0), x), kn_e_bin(&c, KN_E_LT, x, kn_e_int(&c, 10)));
  kn_expr *clamped = kn_e_bin(&c, KN_E_MIN, kn_e_bin(&c, KN_E_MAX, x, kn_e_int(&c, 0)), kn_e_int(&c, 9));
  kn_buffer *in = kn_buffer_new(&c, "in", KN_DT_F32, KN_BUF_PARAM, 0), *out = kn_buffer_new(&c, "out", KN_DT_F32, KN_BUF_PARAM, 0);
  kn_expr *val = kn_e_select(&c, inb, kn_e_load(&c, in, clamped), kn_e_float(&c, KN_DT_F32, 0.0));
  kn_stmt *store = kn_s_store(&c, out, I, val);
  kn_stmt *kloop = kn_s_for(&c, k, kn_e_int(&c, 0), kn_e_int(&c, 3), KN_FOR_SERIAL, store);
  kn_expr *guard = kn_e_bin(&c, KN_E_AND, kn_e_bin(&c, KN_E_LE, kn_e_int(&c, 1), I), kn_e_bin(&c, KN_E_LE, I, kn_e_int(&c, 8)));
  kn_stmt *ifs = kn_s_if(&c, guard, kloop, kloop);
  kn_stmt *s = kn_simplify_stmt(&c, kn_s_for(&c, i, kn_e_int(&c, 0), kn_e_int(&c, 10), KN_FOR_SERIAL, ifs));
  assert_int_equal(s->kind, KN_S_FOR);
  const kn_stmt *then_s = s->u.loop.body->u.ifs.then_s, *else_s = s->u.loop.body->u.ifs.else_s;
  /* i in [1, 8], k in [0, 2]: i + k - 1 in [0, 9]: no test, no clamp */
  const kn_expr *v = then_s->u.loop.body->u.store.value;
  assert_int_equal(v->kind, KN_E_LOAD);
  assert_true(kn_e_equal(v->u.load.index, kn_simplify(&c, x)));
  /* i in [0, 9]: both stay */
  assert_int_equal(else_s->u.loop.body->u.store.value->kind, KN_E_SELECT);
  /* the ranges alone: i in [0, 9] */
  kn_var_range r[2] = {{i, kn_range_make(0, 9)}, {k, kn_range_make(0, 2)}};
  assert_int_equal(kn_expr_truth(kn_e_bin(&c, KN_E_LT, x, kn_e_int(&c, 11)), r, 2), 1);
  assert_int_equal(kn_expr_truth(kn_e_bin(&c, KN_E_LT, x, kn_e_int(&c, -1)), r, 2), 0);
  assert_int_equal(kn_expr_truth(inb, r, 2), -1);
  /* the else-branch of a single comparison: if (i <= 0) ... else i in
   * [1, 9], so the lower test and the lower clamp go, the upper ones stay */
  kn_stmt *split = kn_s_if(&c, kn_e_bin(&c, KN_E_LE, I, kn_e_int(&c, 0)), kloop, kloop);
  s = kn_simplify_stmt(&c, kn_s_for(&c, i, kn_e_int(&c, 0), kn_e_int(&c, 10), KN_FOR_SERIAL, split));
  v = s->u.loop.body->u.ifs.else_s->u.loop.body->u.store.value;
  assert_int_equal(v->kind, KN_E_SELECT);
  assert_int_equal(v->u.sel.cond->kind, KN_E_LT);
  assert_int_equal(v->u.sel.t->u.load.index->kind, KN_E_MIN);
  /* not the else-branch of a conjunction: both tests stay there */
  assert_int_equal(else_s->u.loop.body->u.store.value->u.sel.cond->kind, KN_E_AND);
  kn_arena_free(&A);
}

/* A vectorized loop wider than 16 lanes whose width is not a power of two
 * becomes vectors of power-of-two widths, widest first, in lane order (LLVM
 * 14 spills a <24 x float> element by element); each piece stores its own
 * lanes. Up to 16 lanes the vector stays whole. */
static void test_vector_pieces(void **state) {
  (void)state;
  static const int64_t widths[] = {24, 28, 48, 16, 10, 35};
  static const int pieces[][4] = {{16, 8}, {16, 8, 4}, {32, 16}, {16}, {10}, {32, 2, 1}};
  for (int t = 0; t < 6; t++) {
    kn_arena A;
    kn_arena_init(&A);
    kn_expr_ctx c = {.arena = &A};
    kn_var *v = kn_var_new(&c, "v");
    kn_buffer *in = kn_buffer_new(&c, "in", KN_DT_F32, KN_BUF_PARAM, 0), *out = kn_buffer_new(&c, "out", KN_DT_F32, KN_BUF_PARAM, 0);
    kn_expr *V = kn_e_var(&c, v);
    kn_stmt *body = kn_s_store(&c, out, V, kn_e_mul(&c, kn_e_load(&c, in, V), kn_e_float(&c, KN_DT_F32, 2.0)));
    kn_stmt *s = kn_loop_finalize(&c, kn_s_for(&c, v, kn_e_int(&c, 0), kn_e_int(&c, widths[t]), KN_FOR_VECTORIZED, body));
    int n = s->kind == KN_S_SEQ ? s->u.seq.n : 1, first = 0;
    assert_true(n <= 4);
    for (int i = 0; i < n; i++) {
      kn_stmt *st = s->kind == KN_S_SEQ ? s->u.seq.stmts[i] : s;
      assert_int_equal(st->kind, KN_S_STORE);
      assert_int_equal(st->u.store.index->lanes, pieces[t][i]);
      /* the piece's first lane: where the previous pieces stopped */
      kn_expr *at = st->u.store.index->kind == KN_E_RAMP ? st->u.store.index->u.ramp.base : st->u.store.index;
      int64_t base = -1;
      assert_true(kn_e_is_const_int(at, &base));
      assert_int_equal(base, first);
      first += pieces[t][i];
    }
    assert_int_equal(first, widths[t]);
    assert_int_equal(n < 4 ? pieces[t][n] : 0, 0);
    kn_arena_free(&A);
  }
  /* every lane stores to one element: no piece vectorizes, the loop stays
   * (serial) */
  kn_arena A;
  kn_arena_init(&A);
  kn_expr_ctx c = {.arena = &A};
  kn_var *v = kn_var_new(&c, "v");
  kn_buffer *in = kn_buffer_new(&c, "in", KN_DT_F32, KN_BUF_PARAM, 0), *out = kn_buffer_new(&c, "out", KN_DT_F32, KN_BUF_PARAM, 0);
  kn_stmt *body = kn_s_store(&c, out, kn_e_int(&c, 0), kn_e_load(&c, in, kn_e_var(&c, v)));
  kn_stmt *s = kn_loop_finalize(&c, kn_s_for(&c, v, kn_e_int(&c, 0), kn_e_int(&c, 24), KN_FOR_VECTORIZED, body));
  assert_int_equal(s->kind, KN_S_FOR);
  assert_int_equal(s->u.loop.kind, KN_FOR_SERIAL);
  kn_arena_free(&A);
}

/* Provider: the default schedule of each contraction with its column
 * pieces (vectors, or vectors x lanes) made one vectorized piece as wide as
 * the output's columns. */
static void full_width_choose(void *ctx, const kn_sched_task *task, kn_schedule *s) {
  int *applied = ctx, c = s->n_axes - 1;
  int64_t cols = 0;
  if (!task->hints->is_contraction || s->n_factors[c] < 1 || !kn_e_is_const_int(task->out->shape[c], &cols)) return;
  s->factors[c][0] = cols;
  s->n_factors[c] = 1;
  int n = 0;
  for (int i = 0; i < s->n_loops; i++) {
    kn_sched_loop l = s->loops[i];
    if (l.axis == c && l.piece >= 2) continue;
    if (l.axis == c && l.piece == 1) l.kind = KN_FOR_VECTORIZED;
    s->loops[n++] = l;
  }
  s->n_loops = n;
  (*applied)++;
}

/* Column tiles of 24 and 40 (by default vectors of 8) as one vector each:
 * 16 + 8 and 32 + 8 lanes in the finalized loops, matching the reference. */
static void test_vector_pieces_matmul(void **state) {
  (void)state;
  static const int64_t cols[] = {24, 40};
  static const char *whole[] = {", 1, 24)", ", 1, 40)"}, *wide[] = {", 1, 16)", ", 1, 32)"};
  for (int t = 0; t < 2; t++) {
    kn_graph g;
    kn_graph_init(&g);
    int x = input(&g, "x", 3, (int64_t[]){1, 10, 32}, 1);
    int w = weight(&g, "w", 2, (int64_t[]){32, cols[t]}), b = weight(&g, "b", 1, (int64_t[]){cols[t]});
    int mm = node(&g, KN_OP_MATMUL, "mm", (int[]){x, w}, 2);
    output(&g, node(&g, KN_OP_RELU, "relu", (int[]){node(&g, KN_OP_ADD, "bias", (int[]){mm, b}, 2)}, 1));
    int applied = 0;
    kn_sched_provider p = {full_width_choose, &applied};
    char *text = check_dump(&g, 2, 1e-5, &p);
    assert_int_equal(applied, 1);
    assert_null(strstr(text, whole[t]));
    assert_non_null(strstr(text, wide[t]));
    assert_non_null(strstr(text, ", 1, 8)"));
    free(text);
    kn_graph_free(&g);
  }
}

/* Provider: the sum computed innermost, one output element at a time, in
 * 16 lanes folded at the end (vectorize_reduction). */
static void lanes_choose(void *ctx, const kn_sched_task *task, kn_schedule *s) {
  (void)task;
  for (int i = 0; i < s->n_loops; i++)
    if (s->loops[i].kind == KN_FOR_VECTORIZED) s->loops[i].kind = KN_FOR_SERIAL;
  s->attach = s->n_loops;
  s->reduce_lanes = 16;
  (*(int *)ctx)++;
}

/* A sum whose epilogue adds a bias starts from the bias: a MatMul + bias +
 * Relu's accumulators are initialised from the bias's loads and its store
 * has no add; a ReduceSum over a long row + bias, whose 16 lanes are folded
 * at the end, keeps its zeros (each lane starting from the bias would add it
 * 16 times); both match the reference. */
static void test_bias_start(void **state) {
  (void)state;
  for (int t = 0; t < 2; t++) {
    kn_graph g;
    kn_graph_init(&g);
    int sum;
    if (t == 0) {
      int x = input(&g, "x", 3, (int64_t[]){1, 10, 32}, 1), w = weight(&g, "w", 2, (int64_t[]){32, 16});
      sum = node(&g, KN_OP_MATMUL, "mm", (int[]){x, w}, 2);
    } else {
      int x = input(&g, "x", 3, (int64_t[]){1, 4, 300}, 1);
      sum = node(&g, KN_OP_REDUCE_SUM, "rs", (int[]){x}, 1);
      attr_ints(&g, "axes", 1, (int64_t[]){2});
      attr_int(&g, "keepdims", 0); /* the sum is O's own stage */
    }
    int b = weight(&g, "b", 1, (int64_t[]){t == 0 ? 16 : 1});
    output(&g, node(&g, KN_OP_RELU, "relu", (int[]){node(&g, KN_OP_ADD, "bias", (int[]){sum, b}, 2)}, 1));
    int applied = 0;
    kn_sched_provider p = {lanes_choose, &applied};
    char *text = check_dump(&g, 2, 1e-5, t == 0 ? NULL : &p);
    assert_int_equal(applied, t);
    if (t == 0) {
      assert_non_null(strstr(text, "acc0[ramp(0, 1, 16)] = in2[ramp("));
      assert_null(strstr(text, "(acc0[ramp(0, 1, 16)] + in2"));
    } else {
      assert_non_null(strstr(text, "vreduce_add"));
      assert_non_null(strstr(text, "(0f)"));
    }
    free(text);
    kn_graph_free(&g);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cnn_block),
      cmocka_unit_test(test_conv_silu_fused),
      cmocka_unit_test(test_matmul_gelu_fused),
      cmocka_unit_test(test_dense_block),
      cmocka_unit_test(test_gemm_transpose_reshape),
      cmocka_unit_test(test_blocked_matmul),
      cmocka_unit_test(test_blocked_conv),
      cmocka_unit_test(test_blocked_overlap_refused),
      cmocka_unit_test(test_wide_matmul_tile),
      cmocka_unit_test(test_simplify_pixel_index),
      cmocka_unit_test(test_simplify_ranges),
      cmocka_unit_test(test_border_versioning),
      cmocka_unit_test(test_border_pinning),
      cmocka_unit_test(test_se_scale_weights),
      cmocka_unit_test(test_transpose_gather_order),
      cmocka_unit_test(test_transpose_into_pad),
      cmocka_unit_test(test_prefetch_hints),
      cmocka_unit_test(test_prefetch_batched),
      cmocka_unit_test(test_gemv_columns),
      cmocka_unit_test(test_matmul_rows_across),
      cmocka_unit_test(test_grouped_conv_cols),
      cmocka_unit_test(test_static_batch_stage),
      cmocka_unit_test(test_vector_pieces),
      cmocka_unit_test(test_vector_pieces_matmul),
      cmocka_unit_test(test_bias_start),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
