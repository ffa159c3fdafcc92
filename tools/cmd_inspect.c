/* cmd_inspect.c — `kiln inspect`: what is in an ONNX model, and what Kiln
 * cannot compile yet (every unsupported op, in one run); given a .so, what
 * is in a compiled artifact (tools/inspect_artifact.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/onnx_load.h"
#include "ir/passes/passes.h"
#include "ir/shape/shape_infer.h"
#include "tools/cmds.h"
#include "tools/inspect_artifact.h"
#include "tools/options.h"
#include "tools/pipeline.h"

typedef struct census_row {
  const char *op_type;
  int count;
  bool supported;
} census_row;

static int cmp_rows(const void *a, const void *b) {
  const census_row *x = a, *y = b;
  if (x->count != y->count) return y->count - x->count;
  return strcmp(x->op_type, y->op_type);
}

/* One line of the unsupported list (subgraph nodes say where they are). */
static void print_unsupported(const kn_node *n, const char *where, void *ctx) {
  const kn_graph *g = ctx;
  const char *dom = n->domain;
  if (!dom || !*dom || !strcmp(dom, "ai.onnx"))
    printf("  %s (op '%s', domain 'ai.onnx', opset %lld)%s\n", n->name, n->op_type, (long long)g->opset, where);
  else
    printf("  %s (op '%s', domain '%s')%s\n", n->name, n->op_type, dom, where);
}

int kn_cmd_inspect(int argc, char **argv) {
  const kn_cmd_spec spec = {"inspect",
                            "usage: kiln inspect MODEL.onnx | ARTIFACT.so\n"
                            "  prints the op census, parameter count, FLOPs (batch 1) and every unsupported op;\n"
                            "  for an artifact: its target, tensors, sizes and kernels (GPU: images, launch shapes)",
                            "model", NULL, 0, NULL};
  const char *model = NULL;
  int parsed = kn_opts_parse(&spec, argc, argv, &model);
  if (parsed != KN_OPTS_GO_ON) return parsed;
  size_t len = strlen(model);
  if (len > 3 && !strcmp(model + len - 3, ".so")) {
    kn_diag ad;
    kn_diag_init(&ad);
    int r = kn_inspect_artifact(model, &ad);
    if (r) kn_diag_print(&ad, "kiln");
    kn_diag_free(&ad);
    return r ? 1 : 0;
  }
  kn_graph g;
  kn_graph_init(&g);
  kn_diag d;
  kn_diag_init(&d);
  int status = 0;
  int loaded = kn_fe_load_onnx(model, &g, &d);
  int unsupported = kn_fe_unsupported_count(&g);
  if (loaded < 0 && unsupported == 0) {
    kn_diag_print(&d, "kiln");
    status = 1;
    goto done;
  }
  census_row *rows = calloc((size_t)g.n_nodes + 1, sizeof(census_row));
  int n_rows = 0;
  for (int i = 0; i < g.n_nodes; i++) {
    int r = 0;
    while (r < n_rows && strcmp(rows[r].op_type, g.nodes[i].op_type)) r++;
    if (r == n_rows) rows[n_rows++] = (census_row){g.nodes[i].op_type, 0, g.nodes[i].op != KN_OP_UNKNOWN};
    rows[r].count++;
  }
  qsort(rows, (size_t)n_rows, sizeof(census_row), cmp_rows);
  int64_t params = 0;
  for (int v = 0; v < g.n_values; v++)
    if (g.values[v].data && g.values[v].producer < 0) params += kn_value_numel(&g, v);
  printf("model: %s\nopset: %lld\nnodes: %d\nparameters: %lld\n", model, (long long)g.opset, g.n_nodes,
         (long long)params);
  for (int i = 0; i < g.n_inputs; i++) {
    const kn_value *v = &g.values[g.inputs[i]];
    printf("input: %s %s [", v->name, kn_dtype_name(v->dtype));
    for (int k = 0; k < v->shape.rank; k++)
      printf("%s%s%lld", k ? ", " : "", (v->shape.batch_mask >> k) & 1 ? "N*" : "", (long long)v->shape.dim[k]);
    printf("]\n");
  }
  kn_diag shape_diag;
  kn_diag_init(&shape_diag);
  /* the census above lists the model's own ops; shapes and FLOPs are
   * those of the graph kn_compile sees, composites rewritten */
  kn_compile_opts passes = {.model = model, .max_batch = 1};
  if (unsupported == 0 && kn_pipeline_prepare(&passes, &g, &shape_diag) == 0) {
    double flops = 0;
    for (int i = 0; i < g.n_nodes; i++) flops += kn_node_flops(&g, i);
    printf("flops: %.3f GFLOP (batch 1)\n", flops / 1e9);
    /* the graph passes can still reject a model (say, a constant too large
     * to fold): inspect says so too, after the census */
    if (kn_pipeline_optimize(&passes, &g, &shape_diag) < 0) status = 1;
  } else {
    printf("flops: unknown (%s)\n", unsupported ? "unsupported ops" : "shape inference failed");
    status = 1;
  }
  printf("ops:\n");
  for (int r = 0; r < n_rows; r++)
    printf("  %-24s %5d%s\n", rows[r].op_type, rows[r].count, rows[r].supported ? "" : "  UNSUPPORTED");
  if (unsupported) {
    printf("unsupported: %d node(s)\n", unsupported);
    kn_fe_unsupported_walk(&g, print_unsupported, &g);
    fprintf(stderr, "kiln: error: %s has %d node(s) with ops Kiln does not support (listed above)\n", model,
            unsupported);
    status = 1;
  }
  if (status && unsupported == 0 && shape_diag.count) kn_diag_print(&shape_diag, "kiln");
  kn_diag_free(&shape_diag);
  free(rows);
done:
  kn_diag_free(&d);
  kn_graph_free(&g);
  return status;
}
