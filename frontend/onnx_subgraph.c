/* onnx_subgraph.c — GRAPH attributes (If branches, Loop / Scan bodies) ->
 * kn_subgraph (ir/graph/graph.h).
 *
 * A subgraph is imported into the parent graph's value table with the same
 * node importer as the main graph (kn_fe_import_nodes, so nested subgraphs
 * recurse), then its nodes are moved out of the parent's node list into the
 * kn_subgraph. Names follow ONNX lexical scoping: the subgraph sees every
 * name of its enclosing scopes, and the names it defines are forgotten when
 * it ends (so sibling branches may reuse names). Every value defined inside
 * is renamed "<node>/<attr>/<name>" so that names stay unique in the graph.
 * Outer values read inside (except constants) become the subgraph's
 * captures, appended to the owning node's inputs (capture_base). */
#include <stdlib.h>
#include <string.h>

#include "frontend/fe_internal.h"

static const char *str_or_empty(const char *s) { return s ? s : ""; }

/* Copies of the name map, so a subgraph's names can be dropped at its end. */
static kn_fe_names names_copy(const kn_fe_names *m) {
  kn_fe_names c = *m;
  if (!m->cap) return c;
  c.keys = malloc(sizeof *c.keys * m->cap);
  c.vals = malloc(sizeof *c.vals * m->cap);
  KN_ASSERT(c.keys && c.vals, "out of memory");
  memcpy(c.keys, m->keys, sizeof *c.keys * m->cap);
  memcpy(c.vals, m->vals, sizeof *c.vals * m->cap);
  return c;
}

/* Declared element type and static shape of a subgraph input, if any. */
static void declared_type(const Onnx__ValueInfoProto *vi, kn_value *v) {
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) return;
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  v->dtype = kn_dtype_from_onnx(tt->elem_type);
}

static void add_capture(kn_graph *g, int v, int v_first, int *caps, int *n) {
  if (v < 0 || v >= v_first || g->values[v].data) return;
  for (int k = 0; k < *n; k++)
    if (caps[k] == v) return;
  caps[(*n)++] = v;
}

/* Imports graph attribute `attr` of node `ni`; NULL after a diagnostic. */
static kn_subgraph *import_one(kn_fe_ctx *cx, int ni, const char *attr,
                               const Onnx__GraphProto *gp) {
  kn_graph *g = cx->g;
  const char *node = g->nodes[ni].name, *op_type = g->nodes[ni].op_type;
  int errors_before = cx->n_errors;
  int v_first = g->n_values, n_first = g->n_nodes;
  kn_fe_names saved = names_copy(&cx->names);
  int saved_scope = cx->scope_first;
  cx->scope_first = v_first;

  kn_subgraph *sg = KN_NEW(&g->arena, kn_subgraph);
  sg->name = kn_arena_printf(&g->arena, "%s/%s", node, attr);
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const Onnx__TensorProto *t = gp->initializer[i];
    const char *name = str_or_empty(t->name);
    const char *what =
        kn_arena_printf(&g->arena, "node '%s' (%s): %s initializer '%s'", node, op_type, attr, name);
    int v = kn_fe_tensor_to_const(cx, t, name, what);
    if (v >= 0) kn_fe_names_put(&cx->names, g->values[v].name, v);
  }
  sg->n_inputs = (int)gp->n_input;
  sg->inputs = KN_NEW_ARRAY(&g->arena, int, sg->n_inputs);
  for (size_t i = 0; i < gp->n_input; i++) {
    const char *name = str_or_empty(gp->input[i]->name);
    int v = kn_graph_add_value(g, name);
    declared_type(gp->input[i], &g->values[v]);
    if (*name) kn_fe_names_put(&cx->names, g->values[v].name, v);
    sg->inputs[i] = v;
  }
  kn_fe_import_nodes(cx, gp);
  sg->n_outputs = (int)gp->n_output;
  sg->outputs = KN_NEW_ARRAY(&g->arena, int, sg->n_outputs);
  for (size_t i = 0; i < gp->n_output; i++) {
    const char *name = str_or_empty(gp->output[i]->name);
    int v = *name ? kn_fe_names_get(&cx->names, name) : -1;
    if (v < 0)
      kn_fe_error(cx, "node '%s' (%s): %s output '%s' is not defined", node, op_type, attr, name);
    sg->outputs[i] = v;
  }

  /* move the nodes out of the parent's list */
  sg->n_nodes = g->n_nodes - n_first;
  sg->nodes = KN_NEW_ARRAY(&g->arena, kn_node, sg->n_nodes);
  if (sg->n_nodes) memcpy(sg->nodes, &g->nodes[n_first], sizeof(kn_node) * (size_t)sg->n_nodes);
  g->n_nodes = n_first;
  for (int i = 0; i < sg->n_nodes; i++)
    for (int k = 0; k < sg->nodes[i].n_out; k++) g->values[sg->nodes[i].out[k]].producer = -1;

  /* captures: outer non-constant values read by nodes or named as outputs */
  int cap = 1 + sg->n_outputs;
  for (int i = 0; i < sg->n_nodes; i++) cap += sg->nodes[i].n_in;
  sg->captures = KN_NEW_ARRAY(&g->arena, int, cap);
  for (int i = 0; i < sg->n_nodes; i++)
    for (int k = 0; k < sg->nodes[i].n_in; k++)
      add_capture(g, sg->nodes[i].in[k], v_first, sg->captures, &sg->n_captures);
  for (int i = 0; i < sg->n_outputs; i++)
    add_capture(g, sg->outputs[i], v_first, sg->captures, &sg->n_captures);

  /* scope ends: forget inner names, make the values' names unique */
  kn_fe_names_free(&cx->names);
  cx->names = saved;
  cx->scope_first = saved_scope;
  for (int v = v_first; v < g->n_values; v++)
    g->values[v].name = kn_arena_printf(&g->arena, "%s/%s", sg->name, g->values[v].name);
  return cx->n_errors == errors_before ? sg : NULL;
}

void kn_fe_import_subgraphs(kn_fe_ctx *cx, int ni, const Onnx__NodeProto *np) {
  kn_graph *g = cx->g;
  for (size_t k = 0; k < np->n_attribute; k++) {
    const Onnx__AttributeProto *ap = np->attribute[k];
    if (ap->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH || !ap->g || !ap->name) continue;
    kn_subgraph *sg = import_one(cx, ni, ap->name, ap->g);
    if (!sg) continue;
    kn_node *n = &g->nodes[ni]; /* the node list may have moved */
    int *in = KN_NEW_ARRAY(&g->arena, int, n->n_in + sg->n_captures);
    if (n->n_in) memcpy(in, n->in, sizeof(int) * (size_t)n->n_in);
    if (sg->n_captures) memcpy(in + n->n_in, sg->captures, sizeof(int) * (size_t)sg->n_captures);
    sg->capture_base = n->n_in;
    n->in = in;
    n->n_in += sg->n_captures;
    for (int a = 0; a < n->n_attr; a++)
      if (n->attrs[a].kind == KN_ATTR_GRAPH && !strcmp(n->attrs[a].name, ap->name))
        n->attrs[a].graph = sg;
  }
}
