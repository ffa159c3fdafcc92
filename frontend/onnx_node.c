/* onnx_node.c — NodeProto -> graph nodes: attributes of every kind, Constant
 * nodes folded into constant values, and input resolution by name.
 *
 * Nodes are imported in file order; their inputs are resolved only after all
 * outputs exist, so out-of-order node lists load (toposort orders them).
 * Every node is kept, supported or not (unknown ops get KN_OP_UNKNOWN and keep
 * op_type/domain), so the caller can list all unsupported ops at once.
 * Invented names (omitted outputs, TENSOR attributes) contain '#' and are
 * unique among the import's values. */
#include "frontend/fe_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const char *str_or_empty(const char *s) { return s ? s : ""; }

/* A protobuf `bytes` field as a NUL-terminated arena string. */
static const char *bytes_str(kn_graph *g, ProtobufCBinaryData b) {
  char *s = kn_arena_alloc(&g->arena, b.len + 1);
  if (b.len) memcpy(s, b.data, b.len);
  return s;
}

/* Ops of the ai.onnx.ml and ai.onnx.preview.training domains are listed in
 * ir/graph/ops.def as "domain.OpType"; any other domain is unsupported. */
static kn_op extra_domain_op(kn_graph *g, const char *domain, const char *op_type) {
  if (strcmp(domain, "ai.onnx.ml") != 0 && strcmp(domain, "ai.onnx.preview.training") != 0)
    return KN_OP_UNKNOWN;
  return kn_op_from_onnx(kn_arena_printf(&g->arena, "%s.%s", domain, op_type));
}

/* Kinds Kiln keeps only as a named placeholder (KN_ATTR_GRAPH, s = kind). */
static const char *placeholder_kind(Onnx__AttributeProto__AttributeType type) {
  switch (type) {
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
    return "graph";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
    return "graphs";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS:
    return "tensors";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR:
    return "sparse_tensor";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS:
    return "sparse_tensors";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO:
    return "type_proto";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS:
    return "type_protos";
  default:
    return NULL;
  }
}

/* Converts one attribute of node `node` (op `op_type`); 0 or -1. */
static int convert_attr(kn_fe_ctx *cx, const char *node, const char *op_type,
                        const Onnx__AttributeProto *ap, kn_attr *out) {
  kn_graph *g = cx->g;
  memset(out, 0, sizeof *out);
  out->value = -1;
  if (!ap->name || !*ap->name)
    return kn_fe_error(cx, "node '%s' (%s): attribute without a name", node, op_type);
  out->name = kn_arena_strdup(&g->arena, ap->name);
  switch (ap->type) {
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
    out->kind = KN_ATTR_FLOAT;
    out->f = ap->f;
    return 0;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
    out->kind = KN_ATTR_INT;
    out->i = ap->i;
    return 0;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
    out->kind = KN_ATTR_STRING;
    out->s = bytes_str(g, ap->s);
    return 0;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: {
    size_t n = ap->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS ? ap->n_floats
               : ap->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS ? ap->n_ints
                                                                         : ap->n_strings;
    if (n > INT_MAX)
      return kn_fe_error(cx, "node '%s' (%s): attribute '%s' has too many elements", node, op_type,
                         ap->name);
    out->n = (int)n;
    if (ap->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS) {
      out->kind = KN_ATTR_FLOATS;
      out->floats = KN_NEW_ARRAY(&g->arena, float, n);
      if (n) memcpy(out->floats, ap->floats, sizeof(float) * n);
    } else if (ap->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS) {
      out->kind = KN_ATTR_INTS;
      out->ints = KN_NEW_ARRAY(&g->arena, int64_t, n);
      if (n) memcpy(out->ints, ap->ints, sizeof(int64_t) * n);
    } else {
      out->kind = KN_ATTR_STRINGS;
      out->strings = KN_NEW_ARRAY(&g->arena, const char *, n);
      for (size_t k = 0; k < n; k++) out->strings[k] = bytes_str(g, ap->strings[k]);
    }
    return 0;
  }
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
    if (!ap->t)
      return kn_fe_error(cx, "node '%s' (%s): attribute '%s' has no tensor", node, op_type,
                         ap->name);
    const char *what =
        kn_arena_printf(&g->arena, "node '%s' (%s): attribute '%s'", node, op_type, ap->name);
    const char *name = kn_fe_unique_name(cx, kn_arena_printf(&g->arena, "%s#%s", node, ap->name));
    int v = kn_fe_tensor_to_const(cx, ap->t, name, what);
    if (v < 0) return -1;
    kn_fe_names_put(&cx->names, g->values[v].name, v);
    out->kind = KN_ATTR_TENSOR;
    out->value = v;
    return 0;
  }
  default: {
    const char *kind = placeholder_kind(ap->type);
    if (!kind)
      return kn_fe_error(cx, "node '%s' (%s): attribute '%s' has no valid type (%d)", node, op_type,
                         ap->name, (int)ap->type);
    out->kind = KN_ATTR_GRAPH;
    out->s = kind;
    return 0;
  }
  }
}

/* A Constant node becomes a constant value named after its output. */
static void import_constant(kn_fe_ctx *cx, const Onnx__NodeProto *np, const char *node) {
  kn_graph *g = cx->g;
  if (np->n_output != 1 || !*np->output[0]) {
    kn_fe_error(cx, "node '%s' (Constant): expects exactly one named output", node);
    return;
  }
  const char *out = np->output[0];
  if (kn_fe_names_get(&cx->names, out) >= cx->scope_first) {
    kn_fe_error(cx, "node '%s' (Constant): output '%s' is already defined", node, out);
    return;
  }
  int v = -1;
  if (np->n_attribute != 1) {
    kn_fe_error(cx, "node '%s' (Constant): expects exactly one value attribute, found %zu", node,
                np->n_attribute);
  } else {
    const Onnx__AttributeProto *ap = np->attribute[0];
    const char *an = str_or_empty(ap->name);
    Onnx__AttributeProto__AttributeType type = ap->type;
    kn_shape scalar = {.rank = 0}, vec = {.rank = 1};
    if (strcmp(an, "value") == 0 && type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR &&
        ap->t) {
      const char *what =
          kn_arena_printf(&g->arena, "node '%s' (Constant): attribute 'value'", node);
      v = kn_fe_tensor_to_const(cx, ap->t, out, what);
    } else if (strcmp(an, "value_float") == 0 &&
               type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) {
      v = kn_graph_add_const(g, out, KN_DT_F32, &scalar, &ap->f);
    } else if (strcmp(an, "value_int") == 0 && type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) {
      v = kn_graph_add_const(g, out, KN_DT_I64, &scalar, &ap->i);
    } else if (strcmp(an, "value_floats") == 0 &&
               type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS) {
      vec.dim[0] = (int64_t)ap->n_floats;
      v = kn_graph_add_const(g, out, KN_DT_F32, &vec, ap->floats);
    } else if (strcmp(an, "value_ints") == 0 &&
               type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS) {
      vec.dim[0] = (int64_t)ap->n_ints;
      v = kn_graph_add_const(g, out, KN_DT_I64, &vec, ap->ints);
    } else {
      kn_fe_error(cx,
                  "node '%s' (Constant): attribute '%s' is not supported (expected value, "
                  "value_float, value_floats, value_int or value_ints)",
                  node, an);
    }
  }
  if (v < 0) v = kn_graph_add_value(g, out); /* placeholder: no follow-up "not defined" */
  kn_fe_names_put(&cx->names, g->values[v].name, v);
}

/* Makes the value for output k of a node; invents a name when the output is
 * omitted ("") and reports a second definition of a name. */
static int node_output(kn_fe_ctx *cx, const char *node, const char *op_type, const char *oname,
                       size_t k) {
  kn_graph *g = cx->g;
  const char *name;
  if (!*oname) {
    name = kn_fe_unique_name(cx, kn_arena_printf(&g->arena, "%s#out%zu", node, k));
  } else if (kn_fe_names_get(&cx->names, oname) >= cx->scope_first) {
    kn_fe_error(cx, "node '%s' (%s): output '%s' is already defined", node, op_type, oname);
    name = kn_fe_unique_name(cx, oname);
  } else {
    name = oname;
  }
  int v = kn_graph_add_value(g, name);
  kn_fe_names_put(&cx->names, g->values[v].name, v);
  return v;
}

void kn_fe_import_nodes(kn_fe_ctx *cx, const Onnx__GraphProto *gp) {
  kn_graph *g = cx->g;
  int first = g->n_nodes;
  /* graph node (index - first) -> its NodeProto, for input resolution */
  const Onnx__NodeProto **src = calloc(gp->n_node ? gp->n_node : 1, sizeof *src);
  KN_ASSERT(src, "out of memory");

  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    const char *op_type = str_or_empty(np->op_type);
    bool dflt = kn_fe_is_default_domain(np->domain);
    const char *name = (np->name && *np->name)
                           ? np->name
                           : kn_arena_printf(&g->arena, "%s_%zu", *op_type ? op_type : "node", i);
    if (!*op_type) kn_fe_error(cx, "node '%s' has no op_type", name);
    if (dflt && strcmp(op_type, "Constant") == 0) {
      import_constant(cx, np, name);
      continue;
    }
    if (np->n_input > INT_MAX / 2 || np->n_output > INT_MAX / 2) {
      kn_fe_error(cx, "node '%s' (%s): too many inputs or outputs", name, op_type);
      continue;
    }
    int n_in = (int)np->n_input, n_out = (int)np->n_output;
    int *ins = malloc(sizeof(int) * (size_t)(n_in + 1));
    int *outs = malloc(sizeof(int) * (size_t)(n_out + 1));
    KN_ASSERT(ins && outs, "out of memory");
    for (int k = 0; k < n_in; k++) ins[k] = -1; /* resolved below */
    for (int k = 0; k < n_out; k++)
      outs[k] = node_output(cx, name, op_type, np->output[k], (size_t)k);

    kn_op op = dflt ? kn_op_from_onnx(op_type) : extra_domain_op(g, np->domain, op_type);
    /* [attention family] the one op imported from the preview domain */
    if (!dflt && !strcmp(np->domain, "ai.onnx.preview") && !strcmp(op_type, "FlexAttention"))
      op = KN_OP_FLEX_ATTENTION;
    int ni = kn_graph_add_node(g, op, name, ins, n_in, outs, n_out);
    free(ins);
    free(outs);
    g->nodes[ni].op_type = kn_arena_strdup(&g->arena, op_type);
    g->nodes[ni].domain = dflt ? "" : kn_arena_strdup(&g->arena, np->domain);
    src[ni - first] = np;

    for (size_t k = 0; k < np->n_attribute; k++) {
      kn_attr attr;
      if (convert_attr(cx, g->nodes[ni].name, op_type, np->attribute[k], &attr) == 0)
        kn_node_add_attr(g, &g->nodes[ni], attr);
    }
  }

  for (int ni = first; ni < g->n_nodes; ni++) {
    const Onnx__NodeProto *np = src[ni - first];
    kn_node *n = &g->nodes[ni];
    for (int k = 0; k < n->n_in; k++) {
      const char *iname = np->input[k];
      if (!*iname) continue; /* omitted optional input */
      n->in[k] = kn_fe_names_get(&cx->names, iname);
      if (n->in[k] < 0)
        kn_fe_error(cx, "node '%s' (%s): input '%s' is not defined", n->name, n->op_type, iname);
    }
  }
  /* subgraphs last: every name of this scope exists by now */
  int last = g->n_nodes;
  for (int ni = first; ni < last; ni++) kn_fe_import_subgraphs(cx, ni, src[ni - first]);
  free(src);
}
