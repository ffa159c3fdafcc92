/* test_autotune.c — the autotuner's pieces, without processes or LLVM:
 * traces round-trip (schedule -> JSON -> schedule -> the same loop IR),
 * every candidate of a small conv, a matmul and a softmax lowered and run
 * through the loop-IR interpreter against the reference interpreter,
 * workload keys, and tuning logs (bad lines, other targets, best record). */
#include <math.h>
#include <sys/stat.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "autotune/autotune.h"
#include "ir/loop/loop_eval.h"
#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"
#include "tools/pipeline.h"
#include "tools/plan_build.h"
#include "tests/autotune/fixture.h"

const kn_target avx512 = {.arch = KN_ARCH_X86_64, .vector_bits = 512, .vector_regs = 32, .has_fma = true, .sw_prefetch = true};
const kn_target avx2 = {.arch = KN_ARCH_X86_64, .vector_bits = 256, .vector_regs = 16, .has_fma = true};

/* ---- graphs ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
float frand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static int input(kn_graph *g, const char *name, int rank, const int64_t *dims) {
  int v = kn_graph_add_value(g, name);
  g->values[v].dtype = KN_DT_F32;
  g->values[v].shape_known = true;
  g->values[v].shape.rank = rank;
  memcpy(g->values[v].shape.dim, dims, sizeof(int64_t) * (size_t)rank);
  g->values[v].shape.batch_mask = 1;
  g->inputs = kn_arena_alloc(&g->arena, sizeof(int));
  g->inputs[0] = v;
  g->n_inputs = 1;
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
  g->outputs = kn_arena_alloc(&g->arena, sizeof(int));
  g->outputs[0] = v;
  g->n_outputs = 1;
}

/* conv 3x3 pad 1 + relu on [N, cin, h, w] */
void make_conv(kn_graph *g, const char *prefix, int64_t cin, int64_t cout, int64_t hw) {
  char n1[32], n2[32];
  snprintf(n1, sizeof n1, "%sconv", prefix);
  snprintf(n2, sizeof n2, "%srelu", prefix);
  int x = input(g, "x", 4, (int64_t[]){1, cin, hw, hw});
  int w = weight(g, "w", 4, (int64_t[]){cout, cin, 3, 3}), b = weight(g, "b", 1, (int64_t[]){cout});
  int c = node(g, KN_OP_CONV, n1, (int[]){x, w, b}, 3);
  attr_ints(g, "pads", 4, (int64_t[]){1, 1, 1, 1});
  output(g, node(g, KN_OP_RELU, n2, (int[]){c}, 1));
}

void make_matmul(kn_graph *g) {
  int x = input(g, "x", 3, (int64_t[]){1, 9, 24});
  int w = weight(g, "w", 2, (int64_t[]){24, 40}), b = weight(g, "b", 1, (int64_t[]){40});
  int mm = node(g, KN_OP_MATMUL, "mm", (int[]){x, w}, 2);
  output(g, node(g, KN_OP_ADD, "bias", (int[]){mm, b}, 2));
}

/* a squeeze-and-excitation block: y = Relu(1x1 expand(x)), then a 1x1
 * projection of y * Sigmoid(GlobalAveragePool(y)). The scale moves into
 * per-sample weights (pass_scale_weights.c), and their Mul inlines into
 * the projection's kernel */
static void make_se_proj(kn_graph *g) {
  int x = input(g, "x", 4, (int64_t[]){1, 8, 8, 8});
  int we = weight(g, "we", 4, (int64_t[]){32, 8, 1, 1});
  int y = node(g, KN_OP_RELU, "relu", (int[]){node(g, KN_OP_CONV, "expand", (int[]){x, we}, 2)}, 1);
  int s = node(g, KN_OP_SIGMOID, "sig", (int[]){node(g, KN_OP_GLOBAL_AVERAGE_POOL, "gap", (int[]){y}, 1)}, 1);
  int w = weight(g, "w", 4, (int64_t[]){16, 32, 1, 1}), b = weight(g, "b", 1, (int64_t[]){16});
  output(g, node(g, KN_OP_CONV, "proj", (int[]){node(g, KN_OP_MUL, "scale", (int[]){y, s}, 2), w, b}, 3));
}

void make_softmax(kn_graph *g) {
  int x = input(g, "x", 3, (int64_t[]){1, 5, 37});
  output(g, node(g, KN_OP_SOFTMAX, "softmax", (int[]){x}, 1));
  attr_int(g, "axis", -1);
}

/* ---- compiling with a chosen schedule ---- */

void force_choose(void *ctx, const kn_sched_task *task, kn_schedule *s) {
  force *f = ctx;
  if (task->grp != f->grp) return;
  kn_at_task_shape_of(task, s, &f->shape);
  f->captured = true;
  if (!f->use) return;
  kn_diag d;
  kn_diag_init(&d);
  if (kn_at_sched_validate(f->use, &f->shape, &d) < 0)
    f->rejected = true;
  else
    *s = *f->use;
  kn_diag_free(&d);
}

void setup(fixture *fx, void (*make)(kn_graph *)) {
  kn_graph_init(&fx->g);
  kn_arena_init(&fx->arena);
  make(&fx->g);
  fx->g.max_batch = 1;
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_infer_shapes(&fx->g, &d), 0);
  assert_int_equal(kn_graph_toposort(&fx->g, &d), 0);
  fx->in_n = kn_value_numel(&fx->g, fx->g.inputs[0]);
  fx->out_n = kn_value_numel(&fx->g, fx->g.outputs[0]);
  fx->in = malloc(sizeof(float) * (size_t)fx->in_n);
  fx->ref = malloc(sizeof(float) * (size_t)fx->out_n);
  for (int64_t i = 0; i < fx->in_n; i++) fx->in[i] = frand();
  void *ins[1] = {fx->in}, *outs[1] = {fx->ref};
  assert_int_equal(kn_ref_run_graph(&fx->g, (const void *const *)ins, outs, 1, &d), 0);
  kn_compile_opts o = {0};
  assert_int_equal(kn_pipeline_optimize(&o, &fx->g, &d), 0);
  assert_int_equal(kn_sched_fuse(&fx->g, &fx->arena, &fx->groups, &d), 0);
  assert_true(fx->groups.n >= 1);
  fx->target = &fx->groups.groups[fx->groups.n - 1];
  for (int i = fx->groups.n - 1; i >= 0; i--)
    if (kn_op_class_of(fx->g.nodes[fx->groups.groups[i].anchor].op) == KN_CLASS_CONTRACTION)
      fx->target = &fx->groups.groups[i];
  kn_diag_free(&d);
}

void teardown(fixture *fx) {
  free(fx->in);
  free(fx->ref);
  kn_arena_free(&fx->arena);
  kn_graph_free(&fx->g);
}

/* Builds every kernel (f decides the target's schedule), runs the plan with
 * the loop-IR interpreter on 2 tasks; returns the max error relative to
 * max(1, max|ref|), or -1 when the forced schedule was rejected. Prints the
 * target kernel's loop IR into *loops (malloc'd) when loops is set. */
double compile_run(fixture *fx, const kn_target *t, force *f, char **loops) {
  kn_arena A;
  kn_arena_init(&A);
  kn_expr_ctx ec = {.arena = &A};
  kn_diag d;
  kn_diag_init(&d);
  kn_sched_provider p = {.choose = force_choose, .ctx = f};
  kn_kernel_build *kb = KN_NEW_ARRAY(&A, kn_kernel_build, fx->groups.n);
  for (int i = 0; i < fx->groups.n; i++) {
    int rc = kn_sched_build_kernel_with(&fx->g, &fx->groups.groups[i], t, &ec, kn_arena_printf(&A, "k%d", i), &p,
                                        &kb[i], NULL, NULL, &d);
    if (rc != 0) kn_diag_print(&d, "test");
    assert_int_equal(rc, 0);
    if (loops && &fx->groups.groups[i] == fx->target) {
      size_t n;
      FILE *m = open_memstream(loops, &n);
      kn_kernel_print(kb[i].kernel, m);
      fclose(m);
    }
  }
  if (f->rejected) {
    kn_arena_free(&A);
    kn_diag_free(&d);
    return -1;
  }
  kn_plan plan;
  assert_int_equal(kn_plan_build(&fx->g, kb, fx->groups.n, "t", &A, &plan, &d), 0);
  float *got = calloc((size_t)fx->out_n, sizeof(float));
  void *ws = aligned_alloc(64, (size_t)((plan.workspace_bytes + 64) & ~63));
  for (int s = 0; s < plan.n_steps; s++) {
    const kn_plan_step *st = &plan.steps[s];
    void *args[32];
    for (int a = 0; a < st->n_args; a++) {
      const kn_plan_arg *pa = &st->args[a];
      char *base = pa->kind == KILN_ARG_WORKSPACE ? ws
                   : pa->kind == KILN_ARG_INPUT   ? (char *)fx->in
                   : pa->kind == KILN_ARG_OUTPUT  ? (char *)got
                                                  : (char *)plan.consts[pa->index].data;
      args[a] = base + pa->offset;
    }
    kn_loop_eval(st->kernel, args, 1, 2);
  }
  double max_ref = 1, max_err = 0;
  for (int64_t i = 0; i < fx->out_n; i++) {
    max_ref = fmax(max_ref, fabs(fx->ref[i]));
    max_err = fmax(max_err, fabs((double)fx->ref[i] - got[i]));
    if (isnan(got[i])) max_err = INFINITY;
  }
  free(got);
  free(ws);
  kn_arena_free(&A);
  kn_diag_free(&d);
  return max_err / max_ref;
}

/* ---- tests ---- */

void make_conv_small(kn_graph *g) { make_conv(g, "", 8, 16, 6); }

static void (*const workloads[])(kn_graph *) = {make_conv_small, make_matmul, make_softmax};

kn_schedule trace_roundtrip(const kn_schedule *s, char *text, size_t cap) {
  char again[4096];
  kn_at_trace_write(s, text, cap);
  kn_schedule back;
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_at_trace_parse(text, &back, &d), 0);
  kn_diag_free(&d);
  kn_at_trace_write(&back, again, sizeof again);
  assert_string_equal(text, again);
  return back;
}

/* schedule -> JSON -> schedule: the same struct and the same loop IR */
static void test_trace_roundtrip(void **state) {
  (void)state;
  for (size_t w = 0; w < sizeof workloads / sizeof workloads[0]; w++) {
    fixture fx;
    setup(&fx, workloads[w]);
    force f = {.grp = fx.target};
    char *dflt_loops = NULL, *replay_loops = NULL;
    assert_true(compile_run(&fx, &avx512, &f, &dflt_loops) <= 1e-5);
    assert_true(f.captured);
    /* every candidate of the space round-trips */
    kn_arena A;
    kn_arena_init(&A);
    kn_schedule *space;
    int n = kn_at_space_generate(&f.shape, &avx512, &A, &space);
    assert_true(n > 4);
    int n_blocked = 0;
    for (int i = 0; i < n; i++) {
      char text[4096];
      kn_schedule back = trace_roundtrip(&space[i], text, sizeof text);
      assert_int_equal(back.n_axes, space[i].n_axes);
      assert_int_equal(back.n_loops, space[i].n_loops);
      assert_int_equal(back.n_parallel, space[i].n_parallel);
      assert_int_equal(back.attach, space[i].attach);
      assert_int_equal(back.rsplit_factor, space[i].rsplit_factor);
      assert_int_equal(back.rsplit_axis, space[i].rsplit_axis);
      assert_int_equal(back.rsplit_depth, space[i].rsplit_depth);
      assert_int_equal(back.rsplit_pack, space[i].rsplit_pack);
      assert_int_equal(back.fuse_spatial, space[i].fuse_spatial);
      n_blocked += space[i].rsplit_factor > 0;
      assert_memory_equal(back.loops, space[i].loops, sizeof(kn_sched_loop) * (size_t)back.n_loops);
    }
    /* contractions get reduction-blocked candidates */
    assert_true((n_blocked > 0) == f.shape.hints.is_contraction);
    /* the default, replayed from its trace, lowers to the same loops */
    char text[4096];
    kn_at_trace_write(&f.shape.dflt, text, sizeof text);
    kn_schedule back;
    kn_diag d;
    kn_diag_init(&d);
    assert_int_equal(kn_at_trace_parse(text, &back, &d), 0);
    kn_diag_free(&d);
    force g = {.grp = fx.target, .use = &back};
    assert_true(compile_run(&fx, &avx512, &g, &replay_loops) <= 1e-5);
    assert_string_equal(dflt_loops, replay_loops);
    free(dflt_loops);
    free(replay_loops);
    kn_arena_free(&A);
    teardown(&fx);
  }
}

/* every candidate of fx's target workload (with fused_only, those with
 * fuse_spatial) computes the reference's values */
static void check_space_fx(fixture *fx, const kn_target *t, int min_candidates, bool fused_only) {
  force probe = {.grp = fx->target};
  assert_true(compile_run(fx, t, &probe, NULL) <= 1e-5);
  kn_arena A;
  kn_arena_init(&A);
  kn_schedule *space;
  int n = kn_at_space_generate(&probe.shape, t, &A, &space);
  assert_true(n >= min_candidates);
  for (int i = 0; i < n; i++) {
    if (fused_only && !space[i].fuse_spatial) continue;
    force f = {.grp = fx->target, .use = &space[i]};
    double err = compile_run(fx, t, &f, NULL);
    if (!(err >= 0 && err <= 1e-5)) {
      char text[4096];
      kn_at_trace_write(&space[i], text, sizeof text);
      fprintf(stderr, "candidate %d: error %g: %s\n", i, err, text);
    }
    assert_true(err >= 0 && err <= 1e-5);
  }
  kn_arena_free(&A);
}

static void check_space_of(void (*make)(kn_graph *), const kn_target *t, int min_candidates, bool fused_only) {
  fixture fx;
  setup(&fx, make);
  check_space_fx(&fx, t, min_candidates, fused_only);
  teardown(&fx);
}

static void check_space(void (*make)(kn_graph *), const kn_target *t, int min_candidates) {
  check_space_of(make, t, min_candidates, false);
}

static void test_space_conv(void **state) {
  (void)state;
  check_space(make_conv_small, &avx512, 20);
}
void make_depthwise(kn_graph *g, int64_t channels, int64_t hw, int64_t k, int64_t stride) {
  int x = input(g, "x", 4, (int64_t[]){1, channels, hw, hw});
  int w = weight(g, "w", 4, (int64_t[]){channels, 1, k, k}), b = weight(g, "b", 1, (int64_t[]){channels});
  int c = node(g, KN_OP_CONV, "dw", (int[]){x, w, b}, 3);
  attr_ints(g, "pads", 4, (int64_t[]){k / 2, k / 2, k / 2, k / 2});
  attr_ints(g, "strides", 2, (int64_t[]){stride, stride});
  attr_int(g, "group", channels);
  output(g, node(g, KN_OP_RELU, "relu", (int[]){c}, 1));
}

/* depthwise 3x3 pad 1 + relu on [1, 16, 7, 7] (group 16) */
static void make_depthwise_7x7(kn_graph *g) { make_depthwise(g, 16, 7, 3, 1); }

/* a 7x7 conv on AVX2: the default tiles the 49 pixels as one axis
 * (fuse_spatial); the space has fused and unfused tiles, and every one
 * computes the reference's values */
static void make_conv_7x7(kn_graph *g) { make_conv(g, "", 16, 16, 7); }
static void test_space_conv_spatial(void **state) {
  (void)state;
  check_space_of(make_conv_7x7, &avx2, 40, true);
  /* a depthwise conv keeps its default but has fused candidates, whose
   * padded taps are masked per pixel */
  check_space_of(make_depthwise_7x7, &avx2, 10, true);
  fixture dw;
  setup(&dw, make_depthwise_7x7);
  force dprobe = {.grp = dw.target};
  assert_true(compile_run(&dw, &avx2, &dprobe, NULL) <= 1e-5);
  assert_true(dprobe.shape.hints.spatial && dprobe.shape.hints.grouped);
  assert_false(dprobe.shape.dflt.fuse_spatial);
  teardown(&dw);
  fixture fx;
  setup(&fx, make_conv_7x7);
  for (int wide = 0; wide < 2; wide++) {
    force probe = {.grp = fx.target};
    assert_true(compile_run(&fx, wide ? &avx512 : &avx2, &probe, NULL) <= 1e-5);
    assert_true(probe.shape.hints.spatial);
    /* the 32-register rule keeps its measured tiles */
    assert_int_equal(probe.shape.dflt.fuse_spatial, !wide);
    kn_arena A;
    kn_arena_init(&A);
    kn_schedule *space;
    int n = kn_at_space_generate(&probe.shape, wide ? &avx512 : &avx2, &A, &space), fused = 0;
    for (int i = 0; i < n; i++) fused += space[i].fuse_spatial;
    assert_true(fused > 0 && fused < n);
    kn_arena_free(&A);
  }
  teardown(&fx);
}
static void test_space_matmul(void **state) {
  (void)state;
  check_space(make_matmul, &avx512, 20);
  check_space(make_matmul, &avx2, 20);
  /* 40 columns are not a multiple of AVX-512's 16 lanes: the rule-based
   * default and the space tile the whole row (32 + 8 lanes, finalize.c;
   * compile_run and check_space ran them against the reference); AVX2's
   * 8 lanes divide 40, and its default keeps one vector per tile */
  fixture fx;
  setup(&fx, make_matmul);
  for (int wide = 0; wide < 2; wide++) {
    force probe = {.grp = fx.target};
    assert_true(compile_run(&fx, wide ? &avx512 : &avx2, &probe, NULL) <= 1e-5);
    const kn_schedule *d = &probe.shape.dflt;
    int dc = d->n_axes - 1;
    assert_int_equal(d->n_factors[dc] > 0 ? d->factors[dc][0] : 1, wide ? 40 : 8);
    kn_arena A;
    kn_arena_init(&A);
    kn_schedule *space;
    int n = kn_at_space_generate(&probe.shape, wide ? &avx512 : &avx2, &A, &space), whole = 0;
    for (int i = 0; i < n; i++) {
      const kn_schedule *s = &space[i];
      int c = s->n_axes - 1;
      whole += s->n_factors[c] > 0 && s->factors[c][0] == 40;
    }
    assert_int_equal(whole > 0, wide);
    kn_arena_free(&A);
  }
  teardown(&fx);
}
/* every candidate of the projection with its weights scaled in the kernel
 * (schedule/fuse.c can_inline_weights) computes the reference's values */
static void test_space_se(void **state) {
  (void)state;
  fixture fx;
  setup(&fx, make_se_proj);
  fx.target = NULL;
  for (int i = 0; i < fx.groups.n; i++)
    for (int m = 0; m < fx.groups.groups[i].n_nodes; m++)
      if (fx.g.nodes[fx.groups.groups[i].nodes[m]].op == KN_OP_MUL) fx.target = &fx.groups.groups[i];
  assert_non_null(fx.target);
  assert_int_equal(fx.g.nodes[fx.target->anchor].op, KN_OP_CONV_NHWC);
  check_space_fx(&fx, &avx512, 20, false);
  check_space_fx(&fx, &avx2, 20, false);
  teardown(&fx);
}
static void test_space_softmax(void **state) {
  (void)state;
  check_space(make_softmax, &avx512, 8);
}

/* invalid schedules are rejected before lowering, with a reason */
static void test_validate(void **state) {
  (void)state;
  fixture fx;
  setup(&fx, make_matmul);
  force probe = {.grp = fx.target};
  compile_run(&fx, &avx512, &probe, NULL);
  kn_schedule s = probe.shape.dflt;
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_at_sched_validate(&s, &probe.shape, &d), 0);
  s.factors[s.n_axes - 1][0] = 1000; /* larger than the axis */
  assert_int_equal(kn_at_sched_validate(&s, &probe.shape, &d), -1);
  s = probe.shape.dflt;
  s.loops[1] = s.loops[0]; /* a loop twice */
  assert_int_equal(kn_at_sched_validate(&s, &probe.shape, &d), -1);
  s = probe.shape.dflt;
  s.n_axes = 2;
  assert_int_equal(kn_at_sched_validate(&s, &probe.shape, &d), -1);
  /* split_reduction: a valid block, then what validation must refuse */
  s = probe.shape.dflt;
  s.rsplit_factor = 8;
  s.rsplit_depth = s.n_parallel;
  int r = s.n_axes - 2;
  bool divides = probe.shape.extent[r] % s.factors[r][0] == 0;
  assert_int_equal(kn_at_sched_validate(&s, &probe.shape, &d), divides ? 0 : -1);
  s.factors[r][0] = 1;
  assert_int_equal(kn_at_sched_validate(&s, &probe.shape, &d), 0);
  s.rsplit_axis = probe.shape.hints.n_reduce; /* no such axis */
  assert_int_equal(kn_at_sched_validate(&s, &probe.shape, &d), -1);
  s.rsplit_axis = 0;
  s.rsplit_depth = s.attach + 1; /* below compute_at */
  assert_int_equal(kn_at_sched_validate(&s, &probe.shape, &d), -1);
  s.rsplit_depth = s.n_parallel;
  s.factors[r][0] = probe.shape.extent[r] - 1; /* overlapping row tiles */
  if (probe.shape.extent[r] > 2) assert_int_equal(kn_at_sched_validate(&s, &probe.shape, &d), -1);
  kn_diag_free(&d);
  kn_diag_init(&d);
  s = probe.shape.dflt;
  s.factors[s.n_axes - 1][0] = 1000;
  assert_int_equal(kn_at_sched_validate(&s, &probe.shape, &d), -1);
  s = probe.shape.dflt;
  s.loops[1] = s.loops[0];
  assert_int_equal(kn_at_sched_validate(&s, &probe.shape, &d), -1);
  s = probe.shape.dflt;
  s.n_axes = 2;
  assert_int_equal(kn_at_sched_validate(&s, &probe.shape, &d), -1);
  assert_int_equal(d.count, 3);
  /* a rejected schedule leaves the kernel on its default */
  force f = {.grp = fx.target, .use = &s};
  assert_true(compile_run(&fx, &avx512, &f, NULL) < 0);
  kn_diag_free(&d);
  assert_int_equal(kn_at_trace_parse("[{\"p\":\"split\",\"axis\":0,\"factor\":0}]", &s, &d), -1);
  assert_int_equal(kn_at_trace_parse("[{\"p\":\"warp\"}]", &s, &d), -1);
  assert_int_equal(kn_at_trace_parse("[{\"p\":\"reorder\",\"loops\":[[0,0]]},{\"p\":\"split_reduction\",\"axis\":0,\"factor\":0,\"depth\":0}]", &s, &d), -1);
  assert_int_equal(kn_at_trace_parse("{\"p\":1}", &s, &d), -1);
  assert_int_equal(kn_at_trace_parse("[{\"p\":\"reorder\",\"loops\":[[0,0]]},{\"p\":\"unroll\",\"loop\":[3,1]}]", &s, &d), -1);
  kn_diag_free(&d);
  teardown(&fx);
}

static void make_conv_a(kn_graph *g) { make_conv(g, "a_", 8, 16, 6); }
static void make_conv_b(kn_graph *g) { make_conv(g, "other_names_", 8, 16, 6); }
static void make_conv_c(kn_graph *g) { make_conv(g, "a_", 8, 16, 7); }

/* keys ignore names and weight values, and see shapes */
static void test_workload_key(void **state) {
  (void)state;
  fixture a, b, c;
  setup(&a, make_conv_a);
  setup(&b, make_conv_b);
  setup(&c, make_conv_c);
  kn_arena A;
  kn_arena_init(&A);
  const char *ka = kn_at_workload_key(&a.g, a.target, &A), *kb = kn_at_workload_key(&b.g, b.target, &A),
             *kc = kn_at_workload_key(&c.g, c.target, &A);
  assert_string_equal(ka, kb);
  assert_string_not_equal(ka, kc);
  assert_non_null(strstr(ka, "ConvNHWC"));
  kn_arena_free(&A);
  teardown(&a);
  teardown(&b);
  teardown(&c);
}

/* a batch dim keys as its extent at batch 1: the same conv with a symbolic
 * batch and with the batch fixed to 1 key alike; version 1 told them apart */
static void test_workload_key_batch(void **state) {
  (void)state;
  fixture a;
  setup(&a, make_conv_a); /* its input has a symbolic batch */
  kn_arena A;
  kn_arena_init(&A);
  const char *symbolic = kn_at_workload_key(&a.g, a.target, &A), *symbolic_v1 = kn_at_workload_key_v1(&a.g, a.target, &A);
  assert_non_null(strstr(symbolic_v1, "[N*1,"));
  assert_null(strstr(symbolic, "N*"));
  int fixed_dims = 0;
  for (int v = 0; v < a.g.n_values; v++) {
    fixed_dims += a.g.values[v].shape.batch_mask != 0;
    a.g.values[v].shape.batch_mask = 0;
  }
  assert_true(fixed_dims > 0);
  const char *fixed = kn_at_workload_key(&a.g, a.target, &A), *fixed_v1 = kn_at_workload_key_v1(&a.g, a.target, &A);
  assert_string_equal(fixed, symbolic);
  assert_string_equal(fixed_v1, fixed);
  kn_arena_free(&A);
  teardown(&a);
}

/* A new file from the mkstemp template path, open for writing. */
static FILE *temp_file(char *path) {
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "w");
  assert_non_null(f);
  return f;
}

static const char *record_line(const char *target, const char *key, const char *status, double seconds) {
  static char buf[1024];
  snprintf(buf, sizeof buf,
           "{\"v\":1,\"kiln\":\"0\",\"target\":\"%s\",\"key\":\"%s\",\"trace\":[{\"p\":\"reorder\",\"loops\":[[0,0]]},"
           "{\"p\":\"fuse_parallel\",\"loops\":%d}],\"seconds\":%g,\"status\":\"%s\",\"time\":\"t\"}\n",
           target, key, seconds < 1e-3 ? 1 : 0, seconds, status);
  return buf;
}

/* bad lines skipped with their line number, other targets counted, best kept */
static void test_log(void **state) {
  (void)state;
  char path[] = "/tmp/kn_test_log_XXXXXX";
  FILE *f = temp_file(path);
  fputs(record_line("T", "k1", "ok", 2e-3), f);           /* 1 */
  fputs("{\"v\":1,\"target\":\"T\",\"key\":\"k1\"\n", f); /* 2: cut short */
  fputs(record_line("U", "k1", "ok", 1e-6), f);           /* 3: other target */
  fputs(record_line("T", "k1", "ok", 5e-4), f);           /* 4: the best */
  fputs(record_line("T", "k1", "crash", 0), f);           /* 5 */
  fputs(record_line("T", "k1", "melted", 1e-3), f);       /* 6: bad status */
  fputs("\n", f);                                         /* 7: blank */
  fputs("[1,2]\n", f);                                    /* 8 */
  fclose(f);
  char *warn = NULL;
  size_t wn;
  FILE *w = open_memstream(&warn, &wn);
  kn_at_log log;
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_at_log_load(path, "T", false, w, &log, &d), 0);
  fclose(w);
  assert_int_equal(log.n, 3);
  assert_int_equal(log.other_target, 1);
  assert_int_equal(log.bad_lines, 3);
  assert_non_null(strstr(warn, ":2: "));
  assert_non_null(strstr(warn, ":6: "));
  assert_non_null(strstr(warn, ":8: "));
  assert_null(strstr(warn, ":7: "));
  const kn_at_record *best = kn_at_log_best(&log, "k1");
  assert_non_null(best);
  assert_true(fabs(best->seconds - 5e-4) < 1e-12);
  assert_null(kn_at_log_best(&log, "k2"));
  assert_true(kn_at_log_has(&log, "k1", best->trace));
  /* appended records read back */
  kn_at_record r = *best;
  r.key = "k2";
  r.seconds = 1e-4;
  FILE *af = fopen(path, "a");
  assert_int_equal(kn_at_log_append(af, &r, &d), 0);
  fclose(af);
  kn_at_log again;
  assert_int_equal(kn_at_log_load(path, "T", false, NULL, &again, &d), 0);
  assert_int_equal(again.n, 4);
  assert_non_null(kn_at_log_best(&again, "k2"));
  kn_at_log_free(&again);
  kn_at_log_free(&log);
  free(warn);
  unlink(path);
  /* a missing log: an error for compile, empty for tune */
  assert_int_equal(kn_at_log_load(path, "T", false, NULL, &log, &d), -1);
  assert_non_null(strstr(d.lines[0], path));
  kn_at_log_free(&log);
  assert_int_equal(kn_at_log_load(path, "T", true, NULL, &log, &d), 0);
  assert_int_equal(log.n, 0);
  kn_at_log_free(&log);
  kn_diag_free(&d);
}

/* format version 1: short keys read with their batch dims' "N*" dropped;
 * a hashed key is found once kn_at_log_adopt renames it; an unknown
 * version is a bad line */
static void test_log_v1(void **state) {
  (void)state;
  char path[] = "/tmp/kn_test_log_XXXXXX";
  FILE *f = temp_file(path);
  fputs(record_line("T", "Gemm(x0:float32[N*1,128],x1:float32[10,128]c)->float32[N*1,10]", "ok", 2e-3), f);
  fputs(record_line("T", "Conv+Relu#00000000000000aa", "ok", 3e-3), f);
  fputs(record_line("T", "Add#00000000000000dd", "ok", 3e-3), f); /* no batch dim: the same in both versions */
  char *v3 = strdup(record_line("T", "k3", "ok", 1e-3));
  v3[5] = '3'; /* {"v":3 */
  fputs(v3, f);
  free(v3);
  fclose(f);
  kn_at_log log;
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_at_log_load(path, "T", false, NULL, &log, &d), 0);
  assert_int_equal(log.n, 3);
  assert_int_equal(log.bad_lines, 1);
  assert_int_equal(log.old_keys, 2);
  assert_int_equal(kn_at_log_adopt(&log, "Add#00000000000000dd", "Add#00000000000000dd"), 1);
  assert_int_equal(log.old_keys, 1);
  assert_non_null(kn_at_log_best(&log, "Add#00000000000000dd"));
  assert_non_null(kn_at_log_best(&log, "Gemm(x0:float32[1,128],x1:float32[10,128]c)->float32[1,10]"));
  assert_null(kn_at_log_best(&log, "Conv+Relu#00000000000000bb"));
  assert_int_equal(kn_at_log_adopt(&log, "Conv+Relu#00000000000000aa", "Conv+Relu#00000000000000bb"), 1);
  assert_int_equal(log.old_keys, 0);
  const kn_at_record *r = kn_at_log_best(&log, "Conv+Relu#00000000000000bb");
  assert_non_null(r);
  assert_false(r->old_key);
  assert_null(kn_at_log_best(&log, "Conv+Relu#00000000000000aa"));
  kn_at_log_free(&log);
  kn_diag_free(&d);
  unlink(path);
}

/* kn_at_log_upgrade: version-1 records rewritten in version 2 (a short key
 * without "N*", a hashed key the kernels name), the rest of each line and
 * every other line kept byte for byte; nothing to do leaves the file alone */
static void test_log_upgrade(void **state) {
  (void)state;
  char path[] = "/tmp/kn_test_upgrade_XXXXXX";
  FILE *f = temp_file(path);
  char line[1024];
  snprintf(line, sizeof line, "%s", record_line("T", "Relu(x0:float32[N*1,8])->float32[N*1,8]", "ok", 2e-3));
  fputs(line, f);                                                  /* short: N* dropped */
  fputs(record_line("T", "Conv+Relu#00000000000000aa", "ok", 3e-3), f); /* hashed, named by a kernel */
  fputs(record_line("T", "Conv+Relu#00000000000000cc", "ok", 3e-3), f); /* hashed, no kernel: left */
  char *v2 = strdup(record_line("T", "k2", "ok", 1e-3));
  v2[5] = '2';
  fputs(v2, f);     /* already version 2 */
  fputs("not json\n", f); /* kept */
  fclose(f);
  const char *v1_keys[] = {"Conv+Relu#00000000000000aa"}, *keys[] = {"Conv+Relu#00000000000000bb"};
  kn_at_upgrade_counts c;
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_at_log_upgrade(path, v1_keys, keys, 1, &c, &d), 0);
  assert_int_equal(c.upgraded, 2);
  assert_int_equal(c.renamed, 1);
  assert_int_equal(c.left, 1);
  assert_int_equal(c.current, 1);
  assert_int_equal(c.other, 1);
  FILE *r = fopen(path, "r");
  assert_non_null(r);
  char got[5][1024];
  for (int i = 0; i < 5; i++) assert_non_null(fgets(got[i], sizeof got[i], r));
  assert_null(fgets(line + 512, 512, r));
  fclose(r);
  char want[1024];
  snprintf(want, sizeof want, "%s", record_line("T", "Relu(x0:float32[1,8])->float32[1,8]", "ok", 2e-3));
  want[5] = '2';
  assert_string_equal(got[0], want);
  snprintf(want, sizeof want, "%s", record_line("T", "Conv+Relu#00000000000000bb", "ok", 3e-3));
  want[5] = '2';
  assert_string_equal(got[1], want);
  assert_string_equal(got[2], record_line("T", "Conv+Relu#00000000000000cc", "ok", 3e-3));
  assert_string_equal(got[3], v2);
  assert_string_equal(got[4], "not json\n");
  /* again: nothing to rewrite, the same file (inode) stays */
  struct stat st0, st1;
  assert_int_equal(stat(path, &st0), 0);
  assert_int_equal(kn_at_log_upgrade(path, v1_keys, keys, 1, &c, &d), 0);
  assert_int_equal(c.upgraded, 0);
  assert_int_equal(stat(path, &st1), 0);
  assert_true(st0.st_ino == st1.st_ino);
  free(v2);
  unlink(path);
  assert_int_equal(kn_at_log_upgrade(path, v1_keys, keys, 1, &c, &d), -1);
  assert_non_null(strstr(d.lines[0], path));
  kn_diag_free(&d);
}

/* A key's confirm records decide its best, even against a lower single
 * timing of the search, once they cover two schedules; "confirm" survives
 * the round trip through the file. */
static void test_log_confirm(void **state) {
  (void)state;
  char path[] = "/tmp/kn_test_logc_XXXXXX";
  FILE *f = temp_file(path);
  fputs(record_line("T", "k1", "ok", 2e-3), f); /* the default, timed once */
  fputs(record_line("T", "k1", "ok", 5e-4), f); /* the search's lucky best */
  fputs(record_line("T", "k2", "ok", 7e-4), f); /* a key never confirmed */
  fputs(record_line("T", "k3", "ok", 2e-3), f); /* a confirm round cut short: */
  fputs(record_line("T", "k3", "ok", 5e-4), f); /* only the default got timed again */
  fclose(f);
  kn_at_log log;
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_at_log_load(path, "T", false, NULL, &log, &d), 0);
  kn_at_record c = log.records[0];
  c.confirm = true;
  c.is_default = true;
  c.seconds = 9e-4; /* the default, timed again */
  FILE *af = fopen(path, "a");
  assert_int_equal(kn_at_log_append(af, &c, &d), 0);
  c = log.records[1];
  c.confirm = true;
  c.seconds = 1.1e-3; /* the search's best, timed again */
  assert_int_equal(kn_at_log_append(af, &c, &d), 0);
  c = log.records[3];
  c.confirm = true;
  c.is_default = true;
  c.seconds = 1e-3;
  assert_int_equal(kn_at_log_append(af, &c, &d), 0);
  fclose(af);
  kn_at_log again;
  assert_int_equal(kn_at_log_load(path, "T", false, NULL, &again, &d), 0);
  assert_int_equal(again.n, 8);
  assert_true(again.records[5].confirm && again.records[6].confirm && !again.records[1].confirm);
  const kn_at_record *best = kn_at_log_best(&again, "k1");
  assert_non_null(best);
  assert_true(best->confirm && best->is_default && fabs(best->seconds - 9e-4) < 1e-12);
  best = kn_at_log_best(&again, "k2");
  assert_true(best && !best->confirm && fabs(best->seconds - 7e-4) < 1e-12);
  best = kn_at_log_best(&again, "k3"); /* one schedule confirmed: the search's best stands */
  assert_true(best && !best->confirm && fabs(best->seconds - 5e-4) < 1e-12);
  kn_at_log_free(&again);
  kn_at_log_free(&log);
  kn_diag_free(&d);
  unlink(path);
}

/* A noisy timing never counts: status "noisy" is no best and no reason
 * to skip measuring the schedule again; an ok record marked "noisy"
 * (--keep-noisy) counts, and both survive the round trip through the file. */
static void test_log_noisy(void **state) {
  (void)state;
  char path[] = "/tmp/kn_test_logn_XXXXXX";
  FILE *f = temp_file(path);
  fputs(record_line("T", "k1", "ok", 2e-3), f);    /* the default */
  fputs(record_line("T", "k1", "noisy", 5e-4), f); /* another schedule, timed under load */
  fclose(f);
  kn_at_log log;
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_at_log_load(path, "T", false, NULL, &log, &d), 0);
  assert_int_equal(log.n, 2);
  assert_int_equal(log.records[1].status, KN_AT_NOISY);
  const kn_at_record *best = kn_at_log_best(&log, "k1");
  assert_true(best == &log.records[0]);
  assert_false(kn_at_log_has(&log, "k1", log.records[1].trace));
  kn_at_record kept = log.records[1];
  kept.status = KN_AT_OK;
  kept.noisy = true;
  FILE *af = fopen(path, "a");
  assert_int_equal(kn_at_log_append(af, &kept, &d), 0);
  kept = log.records[1]; /* written back as noisy: its time kept, for the record */
  assert_int_equal(kn_at_log_append(af, &kept, &d), 0);
  fclose(af);
  kn_at_log again;
  assert_int_equal(kn_at_log_load(path, "T", false, NULL, &again, &d), 0);
  assert_int_equal(again.n, 4);
  assert_true(again.records[2].noisy && again.records[2].status == KN_AT_OK && !again.records[0].noisy);
  assert_true(again.records[3].status == KN_AT_NOISY && fabs(again.records[3].seconds - 5e-4) < 1e-12);
  best = kn_at_log_best(&again, "k1");
  assert_true(best == &again.records[2]);
  assert_true(kn_at_log_has(&again, "k1", again.records[2].trace));
  kn_at_log_free(&again);
  kn_at_log_free(&log);
  kn_diag_free(&d);
  unlink(path);
}

int main(int argc, char **argv) {
  if (argc == 5 && !strcmp(argv[1], "--rank-log") && !strcmp(argv[3], "--model"))
    return kn_test_search_rank_log(argv[4], argv[2]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_trace_roundtrip), cmocka_unit_test(test_validate),    cmocka_unit_test(test_workload_key),
      cmocka_unit_test(test_workload_key_batch), cmocka_unit_test(test_log_v1), cmocka_unit_test(test_log_upgrade),
      cmocka_unit_test(test_log),             cmocka_unit_test(test_log_confirm), cmocka_unit_test(test_log_noisy),
      cmocka_unit_test(test_space_conv),
      cmocka_unit_test(test_space_conv_spatial),  cmocka_unit_test(test_space_matmul), cmocka_unit_test(test_space_se),
      cmocka_unit_test(test_space_softmax),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  return failed + kn_test_search_run() + kn_test_unroll_reduce_run();
}
