/* graph_print.c — the textual form of a graph, used by --dump-after and by
 * the golden tests (so it must stay deterministic):
 *
 *   graph(%x:float32[N*1,3,8,8]) {
 *     %w:float32[4,3,3,3] = constant [0.1, -0.2, 0.3, 0.4, ... (108 values)]
 *     %y:float32[N*1,4,8,8] = Conv(%x, %w) {pads=[1,1,1,1]}  # conv1
 *     return %y
 *   }
 *
 * Constants are listed once, before the nodes, in order of first use; an
 * omitted optional input prints as `_`; dead nodes are skipped. */
#include <stdlib.h>
#include <string.h>

#include "ir/graph/graph.h"
#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"

static void print_type(const kn_value *v, FILE *out) {
  fputs(v->dtype ? kn_dtype_name(v->dtype) : "?", out);
  if (!v->shape_known) {
    fputs("[?]", out);
    return;
  }
  char buf[256];
  fputs(kn_shape_str(&v->shape, buf, sizeof buf), out);
}

static void print_elem(const kn_value *v, int64_t i, FILE *out) {
  if (v->dtype == KN_DT_BOOL) {
    fputs(((const uint8_t *)v->data)[i] ? "true" : "false", out);
  } else if (kn_dtype_is_float(v->dtype)) {
    fprintf(out, "%g", kn_ref_load(v->dtype, v->data, i));
  } else {
    long long x = (long long)kn_ref_load_int(v->dtype, v->data, i);
    long long c = v->batch_coef ? (long long)v->batch_coef[i] : 0;
    if (c == 0)
      fprintf(out, "%lld", x);
    else if (x == 0)
      fprintf(out, "N*%lld", c);
    else
      fprintf(out, "%lld+N*%lld", x, c);
  }
}

static void print_constant(const kn_graph *g, int v, FILE *out) {
  const kn_value *val = &g->values[v];
  fprintf(out, "  %%%s:", val->name);
  print_type(val, out);
  fputs(" = constant [", out);
  int64_t numel = kn_shape_numel_max(&val->shape, 1);
  int64_t shown = numel <= 8 ? numel : 4;
  for (int64_t i = 0; i < shown; i++) {
    if (i) fputs(", ", out);
    print_elem(val, i, out);
  }
  if (shown < numel) fprintf(out, ", ... (%lld values)", (long long)numel);
  fputs("]\n", out);
}

static void print_attr(const kn_graph *g, const kn_attr *a, FILE *out) {
  fprintf(out, "%s=", a->name);
  switch (a->kind) {
  case KN_ATTR_INT: fprintf(out, "%lld", (long long)a->i); break;
  case KN_ATTR_FLOAT: fprintf(out, "%g", (double)a->f); break;
  case KN_ATTR_STRING: fprintf(out, "\"%s\"", a->s ? a->s : ""); break;
  case KN_ATTR_INTS:
  case KN_ATTR_FLOATS:
  case KN_ATTR_STRINGS:
    fputc('[', out);
    for (int i = 0; i < a->n; i++) {
      if (i) fputc(',', out);
      if (a->kind == KN_ATTR_INTS) fprintf(out, "%lld", (long long)a->ints[i]);
      else if (a->kind == KN_ATTR_FLOATS) fprintf(out, "%g", (double)a->floats[i]);
      else fprintf(out, "\"%s\"", a->strings[i] ? a->strings[i] : "");
    }
    fputc(']', out);
    break;
  case KN_ATTR_TENSOR:
    if (a->value >= 0 && a->value < g->n_values) fprintf(out, "%%%s", g->values[a->value].name);
    else fputs("<tensor>", out);
    break;
  case KN_ATTR_GRAPH: fputs("<graph>", out); break;
  }
}

void kn_graph_print(const kn_graph *g, FILE *out) {
  bool *shown = calloc((size_t)g->n_values + 1, sizeof(bool));
  KN_ASSERT(shown, "out of memory");
  fputs("graph(", out);
  for (int i = 0; i < g->n_inputs; i++) {
    const kn_value *v = &g->values[g->inputs[i]];
    fprintf(out, "%s%%%s:", i ? ", " : "", v->name);
    print_type(v, out);
  }
  fputs(") {\n", out);
  /* Constants, in order of first use. */
  for (int i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    if (n->dead) continue;
    for (int k = 0; k < n->n_in; k++) {
      int v = n->in[k];
      if (v >= 0 && g->values[v].data && !shown[v]) {
        shown[v] = true;
        print_constant(g, v, out);
      }
    }
  }
  for (int i = 0; i < g->n_outputs; i++) {
    int v = g->outputs[i];
    if (g->values[v].data && !shown[v]) {
      shown[v] = true;
      print_constant(g, v, out);
    }
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    if (n->dead) continue;
    fputs("  ", out);
    for (int k = 0; k < n->n_out; k++) {
      const kn_value *v = &g->values[n->out[k]];
      fprintf(out, "%s%%%s:", k ? ", " : "", v->name);
      print_type(v, out);
    }
    if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") != 0 && n->op != KN_OP_UNKNOWN)
      fprintf(out, " = %s(", n->op_type);
    else if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") != 0)
      fprintf(out, " = %s::%s(", n->domain, n->op_type);
    else
      fprintf(out, " = %s(", n->op_type);
    for (int k = 0; k < n->n_in; k++) {
      if (k) fputs(", ", out);
      if (n->in[k] < 0) fputc('_', out);
      else fprintf(out, "%%%s", g->values[n->in[k]].name);
    }
    fputc(')', out);
    if (n->n_attr) {
      fputs(" {", out);
      for (int k = 0; k < n->n_attr; k++) {
        if (k) fputs(", ", out);
        print_attr(g, &n->attrs[k], out);
      }
      fputc('}', out);
    }
    fprintf(out, "  # %s\n", n->name);
  }
  fputs("  return ", out);
  for (int i = 0; i < g->n_outputs; i++)
    fprintf(out, "%s%%%s", i ? ", " : "", g->values[g->outputs[i]].name);
  fputs("\n}\n", out);
  free(shown);
}
