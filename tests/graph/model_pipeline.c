/* model_pipeline.c — runs the graph pass pipeline on real ONNX exports:
 *
 *   model_pipeline [--numeric] [--batch B] MODEL.onnx...
 *
 * For each model: load (frontend), infer shapes, then fold_constants, cse, dce,
 * fold_conv_bn, layout, winograd (the default rule), explicit_pad, scale_weights, fold_constants,
 * cse, dce with inference and verification
 * after each; report the time, node counts (and the nodes cse merged) and Transposes left, and check
 * that the passes left no more Transposes off the graph inputs than the model
 * had (the NHWC rewrite's own ones all cancel) and that no 2-D Conv, BN or
 * global pool stayed NCHW. With --numeric, the reference interpreter runs the graph
 * before and after the passes on the same seeded inputs and the outputs must
 * agree (relative 1e-4). Exit status 0 when every model passes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frontend/onnx_load.h"
#include "ir/passes/passes.h"
#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"

/* kiln compile's default: Winograd for the 3x3 convs of >= 32 channels */
static int winograd_default(kn_graph *g, kn_diag *d) {
  return kn_pass_winograd(g, kn_winograd_want_default, NULL, d);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static unsigned lcg(unsigned *s) { return *s = *s * 1664525u + 1013904223u; }

/* Runs the graph on seeded inputs; returns malloc'd outputs. */
static void **run(const kn_graph *g, int64_t batch, kn_diag *d) {
  unsigned seed = 7;
  const void **in = calloc((size_t)g->n_inputs + 1, sizeof(void *));
  void **out = calloc((size_t)g->n_outputs + 1, sizeof(void *));
  for (int i = 0; i < g->n_inputs; i++) {
    const kn_value *v = &g->values[g->inputs[i]];
    int64_t n = kn_shape_numel_max(&v->shape, batch);
    void *p = malloc(kn_dtype_size(v->dtype) * (size_t)(n + 1));
    for (int64_t k = 0; k < n; k++) {
      double r = (double)(lcg(&seed) >> 8) / (double)(1u << 24);
      /* Token ids (int inputs) stay small: vocabularies are >= 100. */
      if (kn_dtype_is_float(v->dtype)) kn_ref_store(v->dtype, p, k, r * 2 - 1);
      else kn_ref_store_int(v->dtype, p, k, (int64_t)(r * 50));
    }
    in[i] = p;
  }
  for (int i = 0; i < g->n_outputs; i++) {
    const kn_value *v = &g->values[g->outputs[i]];
    out[i] = calloc((size_t)kn_shape_numel_max(&v->shape, batch) + 1, kn_dtype_size(v->dtype));
  }
  int rc = kn_ref_run_graph(g, in, out, batch, d);
  for (int i = 0; i < g->n_inputs; i++) free((void *)in[i]);
  free(in);
  if (rc == 0) return out;
  for (int i = 0; i < g->n_outputs; i++) free(out[i]);
  free(out);
  return NULL;
}

static int step(const char *what, int (*pass)(kn_graph *, kn_diag *), kn_graph *g, kn_diag *d) {
  if (pass && pass(g, d) < 0) return fprintf(stderr, "  %s failed\n", what), -1;
  if (kn_infer_shapes(g, d) < 0 || kn_graph_verify(g, d) < 0)
    return fprintf(stderr, "  after %s: inference/verification failed\n", what), -1;
  return 0;
}

static int check_model(const char *path, bool numeric, int64_t batch) {
  kn_graph g;
  kn_graph_init(&g);
  kn_diag d;
  kn_diag_init(&d);
  int rc = -1;
  void **before = NULL;
  printf("%s:\n", path);
  double t0 = now();
  if (kn_fe_load_onnx(path, &g, &d) < 0) goto done;
  g.max_batch = batch;
  int loaded_nodes = g.n_nodes, model_transposes = 0;
  for (int i = 0; i < g.n_nodes; i++) model_transposes += g.nodes[i].op == KN_OP_TRANSPOSE;
  if (step("import", NULL, &g, &d) < 0) goto done;
  double t1 = now();
  if (numeric && !(before = run(&g, batch, &d))) goto done;
  double t2 = now();
  static const struct {
    const char *name;
    int (*fn)(kn_graph *, kn_diag *);
  } passes[] = {{"fold_constants", kn_pass_fold_constants}, {"cse", kn_pass_cse},
                {"dce", kn_pass_dce},                       {"fold_conv_bn", kn_pass_fold_conv_bn},
                {"layout", kn_pass_layout},                 {"winograd", winograd_default},
                {"explicit_pad", kn_pass_explicit_pad},     {"scale_weights", kn_pass_scale_weights},
                {"split_pool", kn_pass_split_pool},         {"fold_constants", kn_pass_fold_constants},
                {"cse", kn_pass_cse},                       {"dce", kn_pass_dce}};
  int merged = 0; /* nodes the cse passes removed */
  for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++) {
    int before_pass = g.n_nodes;
    if (step(passes[i].name, passes[i].fn, &g, &d) < 0) goto done;
    if (passes[i].fn == kn_pass_cse) merged += before_pass - g.n_nodes;
  }
  double t3 = now();
  int transposes = 0, stray = 0, nchw = 0;
  for (int i = 0; i < g.n_nodes; i++) {
    const kn_node *n = &g.nodes[i];
    if (n->op == KN_OP_TRANSPOSE) {
      transposes++;
      bool on_input = false;
      for (int k = 0; k < g.n_inputs; k++) on_input |= n->in[0] == g.inputs[k];
      stray += !on_input;
    }
    if ((n->op == KN_OP_CONV && g.values[n->in[0]].shape.rank == 4) || n->op == KN_OP_BATCH_NORM ||
        n->op == KN_OP_GLOBAL_AVERAGE_POOL)
      nchw++;
  }
  printf("  nodes %d -> %d (cse merged %d), transposes %d -> %d (%d not on an input), NCHW conv/pool/bn left %d\n",
         loaded_nodes, g.n_nodes, merged, model_transposes, transposes, stray, nchw);
  printf("  load+infer %.3f s, passes %.3f s\n", t1 - t0, t3 - t2);
  if (numeric) {
    void **after = run(&g, batch, &d);
    if (!after) goto done;
    double worst = 0, scale = 0;
    for (int i = 0; i < g.n_outputs; i++) {
      const kn_value *v = &g.values[g.outputs[i]];
      int64_t n = kn_shape_numel_max(&v->shape, batch);
      for (int64_t k = 0; k < n; k++) {
        double a = kn_ref_load(v->dtype, after[i], k), b = kn_ref_load(v->dtype, before[i], k);
        double e = fabs(a - b) / (1e-3 + fabs(b));
        if (!(e <= worst)) worst = e;
        if (fabs(b) > scale) scale = fabs(b);
      }
      free(after[i]);
    }
    free(after);
    printf("  numeric: max relative difference %.3g, max |output| %.3g (ref before/after, batch %lld, %.1f s)\n",
           worst, scale, (long long)batch, now() - t3 + (t2 - t1));
    if (!(worst <= 1e-4) || !(scale > 0)) goto done; /* all-zero outputs would prove nothing */
  }
  rc = stray > model_transposes || nchw ? -1 : 0;
done:
  if (before) {
    for (int i = 0; i < g.n_outputs; i++) free(before[i]);
    free(before);
  }
  kn_diag_print(&d, path);
  printf("  %s\n", rc == 0 ? "ok" : "FAILED");
  kn_diag_free(&d);
  kn_graph_free(&g);
  return rc;
}

int main(int argc, char **argv) {
  bool numeric = false;
  int64_t batch = 1;
  int failures = 0, models = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--numeric")) numeric = true;
    else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoll(argv[++i]);
    else models++, failures += check_model(argv[i], numeric, batch) != 0;
  }
  if (!models) {
    fprintf(stderr, "usage: model_pipeline [--numeric] [--batch B] MODEL.onnx...\n");
    return 2;
  }
  return failures ? 1 : 0;
}
