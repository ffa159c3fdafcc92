/* onnx_load.c — the ONNX model loader: decodes a ModelProto with the
 * protobuf-c decoder generated at build time, then builds the graph in this
 * order: opset imports, initializers, graph inputs (with the batch symbol),
 * nodes (onnx_node.c), graph outputs, and finally the census of unsupported
 * ops. See onnx_load.h for what the caller gets. */
#include "frontend/onnx_load.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend/fe_internal.h"

/* Nesting limit of protobuf messages (the C++ protobuf default is 100). */
#define KN_FE_MAX_NESTING 100
/* Opsets beyond this are garbage, not a newer ONNX (which is at 2x today). */
#define KN_FE_MAX_OPSET 1000

static const char *str_or_empty(const char *s) { return s ? s : ""; }

/* Version imported for `domain` (default domain: any of its spellings). */
static int64_t domain_opset(const Onnx__ModelProto *m, const char *domain) {
  bool dflt = kn_fe_is_default_domain(domain);
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const char *d = m->opset_import[i]->domain;
    if (dflt ? kn_fe_is_default_domain(d) : strcmp(str_or_empty(d), domain) == 0)
      return m->opset_import[i]->version;
  }
  return 0;
}

static void import_initializers(kn_fe_ctx *cx, const Onnx__GraphProto *gp) {
  kn_graph *g = cx->g;
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const Onnx__TensorProto *t = gp->initializer[i];
    const char *name = str_or_empty(t->name);
    if (!*name) {
      kn_fe_error(cx, "initializer #%zu has no name", i);
      continue;
    }
    if (kn_fe_names_get(&cx->names, name) >= 0) {
      kn_fe_error(cx, "initializer '%s' is defined twice", name);
      continue;
    }
    const char *what = kn_arena_printf(&g->arena, "initializer '%s'", name);
    int v = kn_fe_tensor_to_const(cx, t, name, what);
    if (v < 0) v = kn_graph_add_value(g, name); /* placeholder: no follow-up "not defined" */
    kn_fe_names_put(&cx->names, g->values[v].name, v);
  }
  for (size_t i = 0; i < gp->n_sparse_initializer; i++) {
    const Onnx__SparseTensorProto *s = gp->sparse_initializer[i];
    const char *name = s->values ? str_or_empty(s->values->name) : "";
    kn_fe_error(cx, "sparse initializer '%s' is not supported", name);
  }
}

/* The tensor type of a graph input, or NULL after a diagnostic. */
static const Onnx__TypeProto__Tensor *input_tensor_type(kn_fe_ctx *cx, const char *name,
                                                        const Onnx__ValueInfoProto *vi) {
  if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
      !vi->type->tensor_type) {
    kn_fe_error(cx, "input '%s' is not a tensor; Kiln supports tensor inputs only", name);
    return NULL;
  }
  return vi->type->tensor_type;
}

/* The first symbolic dim at index 0 of any (non-initializer) input, pinned
 * ones (--dim) excepted. */
static const char *find_batch_symbol(kn_fe_ctx *cx, const Onnx__GraphProto *gp) {
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    if (kn_fe_names_get(&cx->names, str_or_empty(vi->name)) >= 0) continue;
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type ||
        !tp->tensor_type->shape || tp->tensor_type->shape->n_dim == 0)
      continue;
    const Onnx__TensorShapeProto__Dimension *d0 = tp->tensor_type->shape->dim[0];
    if (d0->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d0->dim_param &&
        *d0->dim_param && !kn_fe_dim_pinned(cx, d0->dim_param))
      return d0->dim_param;
  }
  return NULL;
}

/* Declared dtype and shape of one graph input; 0 or -1. */
static int input_shape(kn_fe_ctx *cx, const char *name, const Onnx__TypeProto__Tensor *tt,
                       const char *batch, kn_value *v) {
  kn_dtype dtype = kn_dtype_from_onnx(tt->elem_type);
  if (dtype == KN_DT_INVALID)
    return kn_fe_error(cx, "input '%s' has unsupported element type %d (%s)", name,
                       (int)tt->elem_type, kn_fe_onnx_type_name(tt->elem_type));
  if (!tt->shape)
    return kn_fe_error(cx,
                       "input '%s' has no shape; Kiln needs static shapes (a symbolic "
                       "batch dim is allowed)",
                       name);
  if (tt->shape->n_dim > KN_MAX_RANK)
    return kn_fe_error(cx, "input '%s' has rank %zu; Kiln's maximum rank is %d", name,
                       tt->shape->n_dim, KN_MAX_RANK);
  kn_shape s = {.rank = (int)tt->shape->n_dim};
  int rc = 0;
  for (int i = 0; i < s.rank; i++) {
    const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[i];
    bool is_param = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                    dim->dim_param && *dim->dim_param;
    const kn_fe_dim *pin = is_param ? kn_fe_dim_pinned(cx, dim->dim_param) : NULL;
    if (pin) {
      s.dim[i] = pin->value;
    } else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
      if (dim->dim_value < 0)
        rc = kn_fe_error(cx, "input '%s' has negative dim %lld at index %d", name,
                         (long long)dim->dim_value, i);
      s.dim[i] = dim->dim_value;
    } else if (is_param && batch && strcmp(dim->dim_param, batch) == 0) {
      s.dim[i] = 1;
      s.batch_mask |= 1u << i;
    } else if (is_param) {
      rc = kn_fe_error(cx,
                       "input '%s' has symbolic dim '%s' at index %d; Kiln supports a symbolic "
                       "batch dim only; fix it with --dim %s=VALUE",
                       name, dim->dim_param, i, dim->dim_param);
    } else {
      rc = kn_fe_error(cx,
                       "input '%s' has an unknown dim at index %d; Kiln supports a symbolic "
                       "batch dim only",
                       name, i);
    }
  }
  if (rc == 0 && kn_shape_numel_max(&s, 1) < 0)
    rc = kn_fe_error(cx, "input '%s' has too many elements", name);
  v->dtype = dtype;
  if (rc == 0) {
    v->shape = s;
    v->shape_known = true;
  }
  return rc;
}

static void import_inputs(kn_fe_ctx *cx, const Onnx__GraphProto *gp) {
  kn_graph *g = cx->g;
  const char *batch = find_batch_symbol(cx, gp);
  if (batch) g->batch_symbol = kn_arena_strdup(&g->arena, batch);
  g->inputs = KN_NEW_ARRAY(&g->arena, int, gp->n_input);
  g->n_inputs = 0;
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    const char *name = str_or_empty(vi->name);
    if (!*name) {
      kn_fe_error(cx, "graph input #%zu has no name", i);
      continue;
    }
    int existing = kn_fe_names_get(&cx->names, name);
    if (existing >= 0) {
      for (int k = 0; k < g->n_inputs; k++)
        if (g->inputs[k] == existing) {
          kn_fe_error(cx, "graph input '%s' is listed twice", name);
          break;
        }
      continue; /* else an initializer listed as input (IR < 4): a constant */
    }
    int v = kn_graph_add_value(g, name);
    kn_fe_names_put(&cx->names, g->values[v].name, v);
    g->inputs[g->n_inputs++] = v;
    const Onnx__TypeProto__Tensor *tt = input_tensor_type(cx, name, vi);
    if (tt) input_shape(cx, name, tt, batch, &g->values[v]);
  }
}

/* The static shape a graph output declares (dims all fixed or pinned by
 * --dim, no batch symbol), else rank -1. Only pass_specialize reads it. */
static kn_shape declared_shape(const kn_fe_ctx *cx, const Onnx__ValueInfoProto *vi) {
  kn_shape s = {.rank = -1};
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type ||
      !tp->tensor_type->shape || tp->tensor_type->shape->n_dim > KN_MAX_RANK)
    return s;
  const Onnx__TensorShapeProto *sp = tp->tensor_type->shape;
  for (size_t i = 0; i < sp->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *dim = sp->dim[i];
    const kn_fe_dim *pin =
        dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? kn_fe_dim_pinned(cx, dim->dim_param)
                                                                               : NULL;
    if (pin) {
      s.dim[i] = pin->value;
      continue;
    }
    if (dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE || dim->dim_value < 0) return s;
    s.dim[i] = dim->dim_value;
  }
  s.rank = (int)sp->n_dim;
  return s;
}

/* Records in g->out_pinned the dims of output #o (of the graph's outputs)
 * that declare a pinned symbol. */
static void note_pinned(kn_fe_ctx *cx, int o, const Onnx__ValueInfoProto *vi, int n_out) {
  const Onnx__TypeProto *tp = vi->type;
  if (cx->n_dims == 0 || !tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type ||
      !tp->tensor_type->shape)
    return;
  const Onnx__TensorShapeProto *sp = tp->tensor_type->shape;
  for (size_t k = 0; k < sp->n_dim && k < KN_MAX_RANK; k++) {
    const Onnx__TensorShapeProto__Dimension *dim = sp->dim[k];
    if (dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) continue;
    const kn_fe_dim *pin = kn_fe_dim_pinned(cx, dim->dim_param);
    if (!pin) continue;
    kn_graph *g = cx->g;
    if (!g->out_pinned) g->out_pinned = KN_NEW_ARRAY(&g->arena, const char *, (size_t)n_out * KN_MAX_RANK + 1);
    g->out_pinned[(size_t)o * KN_MAX_RANK + k] = kn_arena_strdup(&g->arena, pin->name);
  }
}

static void import_outputs(kn_fe_ctx *cx, const Onnx__GraphProto *gp) {
  kn_graph *g = cx->g;
  g->outputs = KN_NEW_ARRAY(&g->arena, int, gp->n_output);
  g->out_declared = KN_NEW_ARRAY(&g->arena, kn_shape, gp->n_output + 1);
  g->n_outputs = 0;
  if (gp->n_output == 0) kn_fe_error(cx, "the graph has no outputs");
  for (size_t i = 0; i < gp->n_output; i++) {
    const char *name = str_or_empty(gp->output[i]->name);
    int v = *name ? kn_fe_names_get(&cx->names, name) : -1;
    if (v < 0)
      kn_fe_error(cx, "graph output '%s' is not defined", name);
    else {
      g->out_declared[g->n_outputs] = declared_shape(cx, gp->output[i]);
      note_pinned(cx, g->n_outputs, gp->output[i], (int)gp->n_output);
      g->outputs[g->n_outputs++] = v;
    }
  }
}

/* Why a default-domain op is not supported, when there is a reason beyond
 * "not implemented yet" (appended to its diagnostic), else "". */
static const char *unsupported_reason(const char *op_type) {
  static const char *const data_dependent[] = {"NonMaxSuppression"};
  for (size_t i = 0; i < sizeof data_dependent / sizeof *data_dependent; i++)
    if (strcmp(op_type, data_dependent[i]) == 0)
      return ": its output shape depends on input values; Kiln compiles static shapes";
  return "";
}

static int walk_unsupported(const kn_node *nodes, int n_nodes, const char *where, kn_fe_unsupported_fn visit,
                            void *ctx) {
  int count = 0;
  for (int i = 0; i < n_nodes; i++) {
    const kn_node *n = &nodes[i];
    if (n->dead) continue;
    if (n->op == KN_OP_UNKNOWN) {
      count++;
      if (visit) visit(n, where, ctx);
    }
    for (int a = 0; a < n->n_attr; a++) {
      const kn_subgraph *sg = n->attrs[a].kind == KN_ATTR_GRAPH ? n->attrs[a].graph : NULL;
      if (!sg) continue;
      char inner[256];
      snprintf(inner, sizeof inner, " (in %s of node '%s')", n->attrs[a].name, n->name);
      count += walk_unsupported(sg->nodes, sg->n_nodes, inner, visit, ctx);
    }
  }
  return count;
}

int kn_fe_unsupported_walk(const kn_graph *g, kn_fe_unsupported_fn visit, void *ctx) {
  return walk_unsupported(g->nodes, g->n_nodes, "", visit, ctx);
}

typedef struct report_ctx {
  kn_fe_ctx *cx;
  const Onnx__ModelProto *m;
} report_ctx;

static void report_one(const kn_node *n, const char *where, void *ctx) {
  report_ctx *r = ctx;
  if (!n->op_type[0]) return; /* already reported */
  bool dflt = kn_fe_is_default_domain(n->domain);
  kn_fe_error(r->cx, "unsupported op '%s' (domain '%s', opset %lld) at node '%s'%s%s", n->op_type,
              dflt ? "ai.onnx" : n->domain, (long long)(dflt ? r->cx->g->opset : domain_opset(r->m, n->domain)),
              n->name, where, dflt ? unsupported_reason(n->op_type) : "");
}

/* One line per unsupported node, all at once, those in subgraphs (If
 * branches, Loop / Scan bodies) included. */
static void report_unsupported(kn_fe_ctx *cx, const Onnx__ModelProto *m) {
  report_ctx r = {cx, m};
  kn_fe_unsupported_walk(cx->g, report_one, &r);
}

/* Nodes plus the values they and the graph define, subgraphs included: an
 * upper bound of the entries the import adds to the graph's tables. */
static size_t graph_elems(const Onnx__GraphProto *gp) {
  size_t n = gp->n_initializer + gp->n_input + gp->n_output;
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *node = gp->node[i];
    n += 1 + node->n_output;
    for (size_t a = 0; a < node->n_attribute; a++) {
      const Onnx__AttributeProto *at = node->attribute[a];
      if (at->g) n += graph_elems(at->g);
      for (size_t k = 0; k < at->n_graphs; k++) n += graph_elems(at->graphs[k]);
    }
  }
  return n;
}

static int load_model(const uint8_t *data, size_t size, const char *base_dir, const char *label,
                      const kn_fe_dim *dims, int n_dims, kn_graph *g, kn_diag *d) {
  kn_fe_ctx cx = {.g = g, .d = d, .label = label, .base_dir = base_dir, .dims = dims, .n_dims = n_dims};
  if (size == 0) return kn_fe_error(&cx, "empty file; not an ONNX model");
  if (!kn_fe_model_depth_ok(data, size, KN_FE_MAX_NESTING))
    return kn_fe_error(&cx, "messages nest deeper than %d levels; not a sane ONNX model",
                       KN_FE_MAX_NESTING);
  Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, size, data);
  if (!m) return kn_fe_error(&cx, "cannot decode the ONNX model (truncated, or not a ModelProto)");
  if (!m->graph) {
    onnx__model_proto__free_unpacked(m, NULL);
    return kn_fe_error(&cx, "not an ONNX model: no graph");
  }
  /* the graph's tables hold KN_GRAPH_MAX_ELEMS entries; the rest is room for the expansions */
  size_t elems = graph_elems(m->graph);
  if (elems > KN_GRAPH_MAX_ELEMS / 4) {
    onnx__model_proto__free_unpacked(m, NULL);
    return kn_fe_error(&cx, "the graph has %zu nodes and values; Kiln takes at most %d", elems,
                       KN_GRAPH_MAX_ELEMS / 4);
  }
  kn_fe_names_init(&cx.names);
  /* A model that imports no opset at all predates opset imports: opset 1. */
  g->opset = m->n_opset_import ? domain_opset(m, "") : 1;

  const Onnx__GraphProto *gp = m->graph;
  import_initializers(&cx, gp);
  int before_dims = cx.n_errors;
  kn_fe_dims_check(&cx, gp);
  if (cx.n_errors > before_dims) { /* the inputs' errors would follow from the misnamed pin */
    kn_fe_names_free(&cx.names);
    onnx__model_proto__free_unpacked(m, NULL);
    return -1;
  }
  import_inputs(&cx, gp);
  kn_fe_import_nodes(&cx, gp);
  import_outputs(&cx, gp);

  if (g->opset < 0 || g->opset > KN_FE_MAX_OPSET)
    kn_fe_error(&cx, "default-domain opset %lld is not an ONNX opset (at most %d)", (long long)g->opset,
                KN_FE_MAX_OPSET);
  if (g->opset == 0)
    for (int i = 0; i < g->n_nodes; i++)
      if (!g->nodes[i].domain[0]) {
        kn_fe_error(&cx, "the model uses ONNX operators but does not import the default "
                         "ONNX opset");
        break;
      }
  report_unsupported(&cx, m);

  kn_fe_names_free(&cx.names);
  onnx__model_proto__free_unpacked(m, NULL);
  return cx.n_errors ? -1 : 0;
}

int kn_fe_load_onnx_buffer_dims(const uint8_t *data, size_t size, const char *base_dir, const kn_fe_dim *dims,
                                int n_dims, kn_graph *g, kn_diag *d) {
  return load_model(data, size, base_dir, "<buffer>", dims, n_dims, g, d);
}

int kn_fe_load_onnx_buffer(const uint8_t *data, size_t size, const char *base_dir, kn_graph *g,
                           kn_diag *d) {
  return load_model(data, size, base_dir, "<buffer>", NULL, 0, g, d);
}

int kn_fe_load_onnx(const char *path, kn_graph *g, kn_diag *d) { return kn_fe_load_onnx_dims(path, NULL, 0, g, d); }

int kn_fe_load_onnx_dims(const char *path, const kn_fe_dim *dims, int n_dims, kn_graph *g, kn_diag *d) {
  /* O_NONBLOCK: opening a FIFO must not hang (non-regular files are rejected below) */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return kn_diag_error(d, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return kn_diag_error(d, "%s: not a regular file", path);
  }
  size_t size = (size_t)st.st_size;
  uint8_t *data = malloc(size ? size : 1);
  KN_ASSERT(data, "out of memory");
  size_t done = 0;
  while (done < size) {
    ssize_t n = read(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      close(fd);
      free(data);
      return kn_diag_error(d, "%s: cannot read: %s", path,
                           n < 0 ? strerror(err) : "file shrank while reading");
    }
    done += (size_t)n;
  }
  close(fd);

  /* External data is relative to the model's directory. */
  const char *slash = strrchr(path, '/');
  char *base_dir;
  if (!slash) {
    base_dir = strdup(".");
  } else {
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    base_dir = strndup(path, len);
  }
  KN_ASSERT(base_dir, "out of memory");
  int rc = load_model(data, size, base_dir, path, dims, n_dims, g, d);
  free(base_dir);
  free(data);
  return rc;
}

int kn_fe_unsupported_count(const kn_graph *g) { return kn_fe_unsupported_walk(g, NULL, NULL); }
