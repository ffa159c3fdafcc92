/* ref_run.c — runs an ONNX model with the reference interpreter, for the ONNX
 * Runtime cross-check (ref_vs_ort.py):
 *
 *   ref_run [--passes] MODEL.onnx BATCH DIR
 *
 * reads DIR/in<i>.bin (raw, row-major, the input's dtype, shape at N = BATCH)
 * for each graph input in order and writes DIR/out<i>.bin for each output.
 * With --passes, the graph pass pipeline runs first (as the compiler runs
 * it), so its result is checked against ONNX Runtime too. Diagnostics go to
 * stderr; exit status 0 on success. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/onnx_load.h"
#include "ir/passes/passes.h"
#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"

static void *read_file(const char *path, size_t want) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  void *p = malloc(want + 1);
  size_t got = fread(p, 1, want + 1, f);
  fclose(f);
  if (got != want) {
    fprintf(stderr, "ref_run: %s has %zu bytes, expected %zu\n", path, got, want);
    free(p);
    return NULL;
  }
  return p;
}

int main(int argc, char **argv) {
  bool passes = argc > 1 && !strcmp(argv[1], "--passes");
  if (argc != 4 + passes) {
    fprintf(stderr, "usage: ref_run [--passes] MODEL.onnx BATCH DIR\n");
    return 2;
  }
  const char *model = argv[1 + passes], *dir = argv[3 + passes];
  int64_t batch = atoll(argv[2 + passes]);
  kn_graph g;
  kn_graph_init(&g);
  kn_diag d;
  kn_diag_init(&d);
  int rc = kn_fe_load_onnx(model, &g, &d);
  g.max_batch = batch;
  /* the expansion steps of tools/pipeline.c */
  if (rc == 0) rc = kn_pass_decompose(&g, &d);
  if (rc == 0) rc = kn_pass_inline_control(&g, &d);
  if (rc == 0) rc = kn_pass_decompose(&g, &d);
  if (rc == 0) rc = kn_infer_shapes(&g, &d);
  int (*pipeline[])(kn_graph *, kn_diag *) = {kn_pass_fold_constants, kn_pass_dce, kn_pass_fold_conv_bn,
                                              kn_pass_layout, kn_pass_fold_constants, kn_pass_dce};
  for (size_t i = 0; passes && rc == 0 && i < sizeof pipeline / sizeof pipeline[0]; i++) {
    rc = pipeline[i](&g, &d);
    if (rc == 0) rc = kn_infer_shapes(&g, &d);
    if (rc == 0) rc = kn_graph_verify(&g, &d);
  }
  void **in = calloc((size_t)g.n_inputs + 1, sizeof(void *)), **out = calloc((size_t)g.n_outputs + 1, sizeof(void *));
  char path[4096];
  for (int i = 0; rc == 0 && i < g.n_inputs; i++) {
    const kn_value *v = &g.values[g.inputs[i]];
    snprintf(path, sizeof path, "%s/in%d.bin", dir, i);
    in[i] = read_file(path, kn_dtype_size(v->dtype) * (size_t)kn_shape_numel_max(&v->shape, batch));
    if (!in[i]) rc = kn_diag_error(&d, "cannot read %s", path);
  }
  for (int i = 0; rc == 0 && i < g.n_outputs; i++) {
    const kn_value *v = &g.values[g.outputs[i]];
    out[i] = calloc((size_t)kn_shape_numel_max(&v->shape, batch) + 1, kn_dtype_size(v->dtype));
  }
  if (rc == 0) rc = kn_ref_run_graph(&g, (const void *const *)in, out, batch, &d);
  for (int i = 0; rc == 0 && i < g.n_outputs; i++) {
    const kn_value *v = &g.values[g.outputs[i]];
    snprintf(path, sizeof path, "%s/out%d.bin", dir, i);
    FILE *f = fopen(path, "wb");
    size_t bytes = kn_dtype_size(v->dtype) * (size_t)kn_shape_numel_max(&v->shape, batch);
    if (!f || fwrite(out[i], 1, bytes, f) != bytes) rc = kn_diag_error(&d, "cannot write %s", path);
    if (f) fclose(f);
  }
  kn_diag_print(&d, "ref_run");
  for (int i = 0; i < g.n_inputs; i++) free(in[i]);
  for (int i = 0; i < g.n_outputs; i++) free(out[i]);
  free(in);
  free(out);
  kn_diag_free(&d);
  kn_graph_free(&g);
  return rc == 0 ? 0 : 1;
}
