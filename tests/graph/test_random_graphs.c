/* test_random_graphs.c — robustness: thousands of small random graphs
 * (random ops, operands, attributes) go through shape inference; those that
 * infer run through the pass pipeline and the reference interpreter before
 * and after it. Bad graphs must produce diagnostics, never a crash or a
 * sanitizer report; good ones must compute the same outputs before and after
 * the passes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/graph/graph_util.h"

static unsigned next(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (*s >> 8) & 0xffffff;
}

static int64_t pick_int(unsigned *s) {
  static const int64_t pool[] = {-3, -2, -1, 0, 0, 1, 1, 1, 2, 2, 3, 4, 7};
  return pool[next(s) % (sizeof pool / sizeof pool[0])];
}

/* Adds 0..3 random attributes from the names ops commonly read. */
static void random_attrs(kn_graph *g, int node, unsigned *s) {
  static const char *int_names[] = {"axis", "group", "keepdims", "to", "transA", "transB", "ceil_mode",
                                    "count_include_pad", "allowzero", "start", "end", "noop_with_empty_axes"};
  static const char *ints_names[] = {"perm", "axes", "kernel_shape", "strides", "pads", "dilations", "split"};
  static const char *str_vals[] = {"SAME_UPPER", "SAME_LOWER", "VALID", "NOTSET", "reflect", "edge", "tanh"};
  int n = next(s) % 2 ? 0 : (int)(next(s) % 4);
  for (int k = 0; k < n; k++) {
    switch (next(s) % 4) {
    case 0: {
      const char *name = int_names[next(s) % (sizeof int_names / sizeof int_names[0])];
      int64_t v = pick_int(s);
      if (!strcmp(name, "to")) v = (int64_t)(next(s) % 17);
      tg_attr_i(g, node, name, v);
      break;
    }
    case 1: {
      int len = (int)(next(s) % 5);
      int64_t *v = KN_NEW_ARRAY(&g->arena, int64_t, len);
      for (int i = 0; i < len; i++) v[i] = pick_int(s);
      const char *name = ints_names[next(s) % (sizeof ints_names / sizeof ints_names[0])];
      kn_node_add_attr(g, &g->nodes[node], (kn_attr){.name = name, .kind = KN_ATTR_INTS, .n = len, .ints = v, .value = -1});
      break;
    }
    case 2:
      tg_attr_s(g, node, next(s) % 2 ? "auto_pad" : "mode", str_vals[next(s) % (sizeof str_vals / sizeof str_vals[0])]);
      break;
    default: tg_attr_f(g, node, next(s) % 2 ? "alpha" : "epsilon", (float)pick_int(s) * 0.25f); break;
    }
  }
}

static void build_random(kn_graph *g, unsigned seed) {
  unsigned s = seed;
  kn_graph_init(g);
  g->max_batch = 2;
  g->opset = next(&s) % 4 ? 17 : 11;
  tg_input(g, "x0", KN_DT_F32, "N,3,4,4");
  tg_input(g, "x1", KN_DT_F32, "4");
  tg_const_rand(g, "c0", "3,1,1", seed, -1, 1);
  tg_const_rand(g, "c1", "4,3,3,3", seed + 1, -1, 1);
  tg_const_rand(g, "c2", "3", seed + 2, 0.5f, 1.5f);
  int64_t ints[4];
  for (int i = 0; i < 4; i++) ints[i] = pick_int(&s);
  tg_const_i64(g, "i0", "2", ints);
  tg_const_i64(g, "i1", "", ints + 2);
  tg_const_i64(g, "i2", "4", (int64_t[]){0, -1, 1, 1});
  tg_const(g, "b0", KN_DT_BOOL, "4", (uint8_t[]){1, 0, 0, 1});
  int n_nodes = 1 + (int)(next(&s) % 6), last = 0;
  char name[32], out[32];
  for (int i = 0; i < n_nodes; i++) {
    kn_op op = (kn_op)(1 + next(&s) % (KN_OP_COUNT - 1));
    static const int arity[8] = {1, 1, 1, 2, 2, 2, 3, 0};
    int n_in = arity[next(&s) % 8], in[4];
    for (int k = 0; k < n_in; k++) {
      /* Mostly chain on the previous result; sometimes any value. */
      in[k] = k == 0 && next(&s) % 3 ? last : (int)(next(&s) % (unsigned)g->n_values);
      if (next(&s) % 16 == 0) in[k] = -1;
    }
    if (n_in && in[0] < 0) in[0] = 0;
    int n_out = next(&s) % 5 == 0 ? 2 : 1, outs[2];
    for (int k = 0; k < n_out; k++) {
      snprintf(out, sizeof out, "v%d_%d", i, k);
      outs[k] = kn_graph_add_value(g, out);
    }
    snprintf(name, sizeof name, "n%d", i);
    int node = kn_graph_add_node(g, op, name, in, n_in, outs, n_out);
    random_attrs(g, node, &s);
    last = outs[0];
  }
  tg_output(g, out);
}

/* Runs the graph at both batch sizes; returns outputs or NULL (diagnosed). */
static void **try_run(const kn_graph *g, int64_t batch, unsigned seed) {
  for (int i = 0; i < g->n_outputs; i++)
    if (kn_shape_numel_max(&g->values[g->outputs[i]].shape, batch) > 100000) return NULL;
  const void **in = calloc((size_t)g->n_inputs, sizeof(void *));
  void **out = calloc((size_t)g->n_outputs, sizeof(void *));
  for (int i = 0; i < g->n_inputs; i++) {
    const kn_value *v = &g->values[g->inputs[i]];
    int64_t n = kn_shape_numel_max(&v->shape, batch);
    float *p = malloc(sizeof(float) * (size_t)n);
    for (int64_t k = 0; k < n; k++) p[k] = tg_randf(&seed);
    in[i] = p;
  }
  for (int i = 0; i < g->n_outputs; i++) {
    const kn_value *v = &g->values[g->outputs[i]];
    out[i] = calloc((size_t)kn_shape_numel_max(&v->shape, batch) + 1, kn_dtype_size(v->dtype));
  }
  kn_diag d;
  kn_diag_init(&d);
  int rc = kn_ref_run_graph(g, in, out, batch, &d);
  kn_diag_free(&d);
  for (int i = 0; i < g->n_inputs; i++) free((void *)in[i]);
  free(in);
  if (rc == 0) return out;
  tg_free_outputs(g, out);
  return NULL;
}

static void random_graphs(void **state) {
  (void)state;
  int inferred = 0, compared = 0;
  /* KN_SEED=s reruns one case and prints its graph (for debugging). */
  const char *only = getenv("KN_SEED"), *count = getenv("KN_SEEDS"); /* KN_SEEDS=n: more cases */
  unsigned first = only ? (unsigned)atoi(only) : 1u;
  unsigned last = only ? first : count ? (unsigned)atoi(count) : 20000u;
  for (unsigned seed = first; seed <= last; seed++) {
    kn_graph g;
    build_random(&g, seed);
    if (only) kn_graph_print(&g, stderr);
    kn_diag d;
    kn_diag_init(&d);
    int rc = kn_infer_shapes(&g, &d);
    if (rc != 0) assert_true(d.count > 0); /* every failure says why */
    if (rc == 0) {
      inferred++;
      assert_int_equal(kn_graph_verify(&g, &d), 0);
      void **before = try_run(&g, 2, seed);
      int (*passes[])(kn_graph *, kn_diag *) = {kn_pass_fold_constants, kn_pass_cse,    kn_pass_dce,
                                                kn_pass_fold_conv_bn,   kn_pass_layout, kn_pass_fold_constants,
                                                kn_pass_cse,            kn_pass_dce};
      for (size_t p = 0; p < sizeof passes / sizeof passes[0] && rc == 0; p++) {
        rc = passes[p](&g, &d);
        if (rc == 0) rc = kn_infer_shapes(&g, &d);
        if (rc == 0) rc = kn_graph_verify(&g, &d);
      }
      /* Folding may legitimately fail (e.g. an out-of-range constant index);
       * then the interpreter fails on the original graph too. */
      if (rc != 0) {
        if (before) kn_diag_print(&d, "random");
        assert_null(before);
        assert_true(d.count > 0);
      }
      if (rc == 0 && before) {
        void **after = try_run(&g, 2, seed);
        assert_non_null(after);
        for (int i = 0; i < g.n_outputs; i++) {
          double diff = tg_max_rel_diff(&g, i, 2, after, before);
          if (!(diff <= 1e-5)) fail_msg("seed %u: output %d differs by %g", seed, i, diff);
        }
        compared++;
        tg_free_outputs(&g, after);
      }
      if (before) tg_free_outputs(&g, before);
    }
    kn_diag_free(&d);
    kn_graph_free(&g);
  }
  printf("random graphs: %d of %u inferred, %d compared before/after the passes\n", inferred,
         last - first + 1, compared);
  if (!only) assert_true(inferred > 200);
}


/* Conv -> pool chains with random geometry (strides, pads, dilations,
 * auto_pad, ceil_mode, groups, count_include_pad): the pipeline (NHWC
 * rewrite with explicit pads) must compute what the NCHW graph computed. */
static void random_window_geometry(void **state) {
  (void)state;
  static const char *auto_pads[] = {"NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
  int checked = 0;
  const char *only = getenv("KN_GEOMETRY_SEED"); /* rerun one case, printing it */
  for (unsigned seed = only ? (unsigned)atoi(only) : 1u; seed <= (only ? (unsigned)atoi(only) : 600u); seed++) {
    unsigned s = seed * 7919u;
    kn_graph g;
    kn_graph_init(&g);
    g.max_batch = 2;
    int64_t chans = next(&s) % 2 ? 2 : 4, h = 3 + next(&s) % 7, w = 3 + next(&s) % 7;
    int64_t group = next(&s) % 3 == 0 ? 2 : 1, m = 2 * (1 + next(&s) % 2);
    int64_t kh = 1 + next(&s) % 3, kw = 1 + next(&s) % 3;
    char shape[64];
    snprintf(shape, sizeof shape, "N,%lld,%lld,%lld", (long long)chans, (long long)h, (long long)w);
    tg_input(&g, "x", KN_DT_F32, shape);
    snprintf(shape, sizeof shape, "%lld,%lld,%lld,%lld", (long long)m, (long long)(chans / group), (long long)kh,
             (long long)kw);
    tg_const_rand(&g, "w", shape, seed, -1, 1);
    snprintf(shape, sizeof shape, "%lld", (long long)m);
    tg_const_rand(&g, "b", shape, seed + 1, -1, 1);
    int n = tg_node(&g, KN_OP_CONV, "conv", "x,w,b", "c");
    tg_attr_i(&g, n, "group", group);
    tg_attr_ints(&g, n, "strides", 2, (int64_t)(1 + next(&s) % 3), (int64_t)(1 + next(&s) % 2));
    tg_attr_ints(&g, n, "dilations", 2, (int64_t)(1 + next(&s) % 2), (int64_t)(1 + next(&s) % 2));
    const char *ap = auto_pads[next(&s) % 5];
    if (strcmp(ap, "NOTSET")) tg_attr_s(&g, n, "auto_pad", ap);
    else tg_attr_ints(&g, n, "pads", 4, (int64_t)(next(&s) % 3), (int64_t)(next(&s) % 3), (int64_t)(next(&s) % 3), (int64_t)(next(&s) % 3));
    tg_node(&g, KN_OP_RELU, "relu", "c", "r");
    bool is_max = next(&s) % 2;
    int64_t pk = 1 + next(&s) % 3;
    n = tg_node(&g, is_max ? KN_OP_MAX_POOL : KN_OP_AVERAGE_POOL, "pool", "r", "p");
    tg_attr_ints(&g, n, "kernel_shape", 2, pk, (int64_t)(1 + next(&s) % 3));
    tg_attr_ints(&g, n, "strides", 2, (int64_t)(1 + next(&s) % 3), (int64_t)(1 + next(&s) % 3));
    ap = auto_pads[next(&s) % 5];
    if (strcmp(ap, "NOTSET")) tg_attr_s(&g, n, "auto_pad", ap);
    else tg_attr_ints(&g, n, "pads", 4, (int64_t)(next(&s) % pk), (int64_t)0, (int64_t)(next(&s) % pk), (int64_t)0);
    tg_attr_i(&g, n, "ceil_mode", next(&s) % 2);
    if (is_max) tg_attr_ints(&g, n, "dilations", 2, (int64_t)(1 + next(&s) % 2), (int64_t)1);
    else tg_attr_i(&g, n, "count_include_pad", next(&s) % 2);
    tg_const_rand(&g, "bias", "2,1,1", seed + 2, -1, 1);
    tg_node(&g, KN_OP_GLOBAL_AVERAGE_POOL, "gap", "p", "q");
    tg_output(&g, "p");
    tg_output(&g, "q");
    kn_diag d;
    kn_diag_init(&d);
    int rc = kn_infer_shapes(&g, &d); /* some geometries are invalid: fine */
    if (only) kn_graph_print(&g, stderr);
    if (rc == 0) {
      void **before = try_run(&g, 2, seed);
      assert_non_null(before);
      int (*passes[])(kn_graph *, kn_diag *) = {kn_pass_fold_constants, kn_pass_cse,    kn_pass_dce,
                                                kn_pass_fold_conv_bn,   kn_pass_layout, kn_pass_fold_constants,
                                                kn_pass_cse,            kn_pass_dce};
      for (size_t p = 0; p < sizeof passes / sizeof passes[0]; p++) {
        assert_int_equal(passes[p](&g, &d), 0);
        assert_int_equal(kn_infer_shapes(&g, &d), 0);
        assert_int_equal(kn_graph_verify(&g, &d), 0);
      }
      assert_int_equal(tg_count(&g, KN_OP_CONV), 0);
      if (only) kn_graph_print(&g, stderr);
      void **after = try_run(&g, 2, seed);
      assert_non_null(after);
      for (int i = 0; i < g.n_outputs; i++) {
        double diff = tg_max_rel_diff(&g, i, 2, after, before);
        if (!(diff <= 1e-5)) fail_msg("seed %u: output %d differs by %g", seed, i, diff);
      }
      tg_free_outputs(&g, after);
      tg_free_outputs(&g, before);
      checked++;
    }
    kn_diag_free(&d);
    kn_graph_free(&g);
  }
  printf("random window geometry: %d of 600 checked\n", checked);
  if (!only) assert_true(checked > 300);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(random_graphs), cmocka_unit_test(random_window_geometry)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
