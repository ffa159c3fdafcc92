/* cmd_inspect.c — `kiln inspect`: what is in an ONNX model, and what Kiln
 * cannot compile yet (every unsupported op, in one run); given a .so, what
 * is in a compiled artifact (tools/inspect_artifact.c). With --json, the
 * same facts as one JSON object on stdout (diagnostics stay on stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/onnx_load.h"
#include "ir/passes/passes.h"
#include "ir/shape/shape_infer.h"
#include "tools/cmds.h"
#include "tools/inspect_artifact.h"
#include "tools/json_out.h"
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

/* Where the unsupported list goes: lines of text, or a JSON array. */
typedef struct unsupported_out {
  const kn_graph *g;
  kn_jw *json; /* NULL: text */
} unsupported_out;

/* One entry of the unsupported list (subgraph nodes say where they are). */
static void print_unsupported(const kn_node *n, const char *where, void *ctx) {
  const unsupported_out *u = ctx;
  const kn_graph *g = u->g;
  const char *dom = n->domain;
  bool onnx_domain = !dom || !*dom || !strcmp(dom, "ai.onnx");
  if (u->json) {
    kn_jw_object(u->json, NULL);
    kn_jw_str(u->json, "node", n->name);
    kn_jw_str(u->json, "op", n->op_type);
    kn_jw_str(u->json, "domain", onnx_domain ? "ai.onnx" : dom);
    if (onnx_domain) kn_jw_int(u->json, "opset", g->opset);
    kn_jw_str(u->json, "where", where);
    kn_jw_end(u->json);
    return;
  }
  if (onnx_domain)
    printf("  %s (op '%s', domain 'ai.onnx', opset %lld)%s\n", n->name, n->op_type, (long long)g->opset, where);
  else
    printf("  %s (op '%s', domain '%s')%s\n", n->name, n->op_type, dom, where);
}

/* What inspect found in a model, printed as text or JSON. */
typedef struct model_facts {
  const char *model;
  int64_t opset;
  int n_nodes, n_inputs;
  kn_value *inputs; /* copies, as loaded: the passes may rewrite the graph's */
  int64_t params;
  bool flops_known;
  double flops;
  const char *flops_unknown; /* why not */
  census_row *rows;
  int n_rows, unsupported;
} model_facts;

static void print_input(const kn_value *v) {
  printf("input: %s %s [", v->name, kn_dtype_name(v->dtype));
  for (int k = 0; k < v->shape.rank; k++)
    printf("%s%s%lld", k ? ", " : "", (v->shape.batch_mask >> k) & 1 ? "N*" : "", (long long)v->shape.dim[k]);
  printf("]\n");
}

static void print_text(const model_facts *f, const kn_graph *g) {
  printf("model: %s\nopset: %lld\nnodes: %d\nparameters: %lld\n", f->model, (long long)f->opset, f->n_nodes,
         (long long)f->params);
  for (int i = 0; i < f->n_inputs; i++) print_input(&f->inputs[i]);
  if (f->flops_known) printf("flops: %.3f GFLOP (batch 1)\n", f->flops / 1e9);
  else printf("flops: unknown (%s)\n", f->flops_unknown);
  printf("ops:\n");
  for (int r = 0; r < f->n_rows; r++)
    printf("  %-24s %5d%s\n", f->rows[r].op_type, f->rows[r].count, f->rows[r].supported ? "" : "  UNSUPPORTED");
  if (f->unsupported) {
    printf("unsupported: %d node(s)\n", f->unsupported);
    unsupported_out u = {g, NULL};
    kn_fe_unsupported_walk(g, print_unsupported, &u);
  }
}

static void print_json(const model_facts *f, const kn_graph *g) {
  kn_jw j;
  kn_jw_init(&j, stdout);
  kn_jw_object(&j, NULL);
  kn_jw_str(&j, "model", f->model);
  kn_jw_int(&j, "opset", f->opset);
  kn_jw_int(&j, "nodes", f->n_nodes);
  kn_jw_int(&j, "parameters", f->params);
  kn_jw_array(&j, "inputs", false);
  for (int i = 0; i < f->n_inputs; i++) {
    const kn_value *v = &f->inputs[i];
    kn_jw_object(&j, NULL);
    kn_jw_str(&j, "name", v->name);
    kn_jw_str(&j, "dtype", kn_dtype_name(v->dtype));
    kn_jw_array(&j, "shape", true);
    for (int k = 0; k < v->shape.rank; k++) kn_jw_int(&j, NULL, v->shape.dim[k]);
    kn_jw_end(&j);
    kn_jw_array(&j, "batch_axes", true);
    for (int k = 0; k < v->shape.rank; k++)
      if ((v->shape.batch_mask >> k) & 1) kn_jw_int(&j, NULL, k);
    kn_jw_end(&j);
    kn_jw_end(&j);
  }
  kn_jw_end(&j);
  if (f->flops_known) kn_jw_num(&j, "flops_batch_1", f->flops);
  else kn_jw_null(&j, "flops_batch_1");
  kn_jw_str(&j, "flops_unknown", f->flops_known ? NULL : f->flops_unknown);
  kn_jw_array(&j, "ops", false);
  for (int r = 0; r < f->n_rows; r++) {
    kn_jw_object(&j, NULL);
    kn_jw_str(&j, "op", f->rows[r].op_type);
    kn_jw_int(&j, "count", f->rows[r].count);
    kn_jw_bool(&j, "supported", f->rows[r].supported);
    kn_jw_end(&j);
  }
  kn_jw_end(&j);
  kn_jw_array(&j, "unsupported", false);
  unsupported_out u = {g, &j};
  if (f->unsupported) kn_fe_unsupported_walk(g, print_unsupported, &u);
  kn_jw_end(&j);
  kn_jw_end(&j);
}

int kn_cmd_inspect(int argc, char **argv) {
  bool json = false;
  const char **dim_args = calloc((size_t)argc, sizeof *dim_args);
  kn_fe_dim *dims = calloc((size_t)argc, sizeof *dims);
  KN_ASSERT(dim_args && dims, "out of memory");
  int n_dim_args = 0;
  const kn_opt opts[] = {
      {"--json", NULL, NULL, "print the same facts as one JSON object (docs/cli.md)", .flag = &json},
      {"--dim", NULL, "NAME=VALUE", "fix symbolic dim NAME to VALUE, as `kiln compile --dim`\n(repeatable)",
       .list = dim_args, .count = &n_dim_args, .max = argc},
  };
  const kn_cmd_spec spec = {"inspect",
                            "usage: kiln inspect MODEL.onnx | ARTIFACT.so [--json] [--dim NAME=VALUE ...]\n"
                            "  prints the op census, parameter count, FLOPs (batch 1) and every unsupported op;\n"
                            "  for an artifact: its target, tensors, sizes and kernels (GPU: images, launch shapes)",
                            "model", opts, (int)(sizeof opts / sizeof *opts), NULL};
  const char *model = NULL;
  kn_graph g;
  kn_graph_init(&g);
  kn_diag d;
  kn_diag_init(&d);
  kn_arena arena;
  kn_arena_init(&arena);
  int status = kn_opts_parse(&spec, argc, argv, &model);
  if (status != KN_OPTS_GO_ON) goto done;
  status = 2;
  int n_dims = kn_fe_dims_parse(dim_args, n_dim_args, &arena, dims, &d);
  if (n_dims < 0) {
    kn_diag_print(&d, "kiln");
    goto done;
  }
  size_t len = strlen(model);
  if (len > 3 && !strcmp(model + len - 3, ".so")) {
    status = kn_inspect_artifact(model, json, &d) ? 1 : 0;
    if (status) kn_diag_print(&d, "kiln");
    goto done;
  }
  status = 0;
  int loaded = kn_fe_load_onnx_dims(model, dims, n_dims, &g, &d);
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
  /* the census, node count and inputs are the model's own; FLOPs are those
   * of the graph kn_compile sees, composites rewritten */
  model_facts f = {.model = model, .opset = g.opset, .n_nodes = g.n_nodes, .n_inputs = g.n_inputs,
                   .params = params, .rows = rows, .n_rows = n_rows, .unsupported = unsupported};
  f.inputs = calloc((size_t)g.n_inputs + 1, sizeof *f.inputs);
  KN_ASSERT(f.inputs, "out of memory");
  for (int i = 0; i < g.n_inputs; i++) f.inputs[i] = g.values[g.inputs[i]];
  kn_diag shape_diag;
  kn_diag_init(&shape_diag);
  kn_compile_opts passes = {.model = model, .max_batch = 1, .dims = dims, .n_dims = n_dims};
  if (unsupported == 0 && kn_pipeline_prepare(&passes, &g, &shape_diag) == 0) {
    f.flops_known = true;
    for (int i = 0; i < g.n_nodes; i++) f.flops += kn_node_flops(&g, i);
    /* the graph passes can still reject a model (say, a constant too large
     * to fold): inspect says so too, after the census */
    if (kn_pipeline_optimize(&passes, &g, &shape_diag) < 0) status = 1;
  } else {
    f.flops_unknown = unsupported ? "unsupported ops" : "shape inference failed";
    status = 1;
  }
  if (json) print_json(&f, &g);
  else print_text(&f, &g);
  if (unsupported) {
    fprintf(stderr, "kiln: error: %s has %d node(s) with ops Kiln does not support (listed %s)\n", model,
            unsupported, json ? "under \"unsupported\"" : "above");
    status = 1;
  }
  if (status && unsupported == 0 && shape_diag.count) kn_diag_print(&shape_diag, "kiln");
  kn_diag_free(&shape_diag);
  free(f.inputs);
  free(rows);
done:
  kn_diag_free(&d);
  kn_graph_free(&g);
  kn_arena_free(&arena);
  free(dims);
  free(dim_args);
  return status;
}
