/* graph.h — the graph IR: values (typed, shaped tensors, some constant) and
 * nodes (one operator each), owned by one arena per graph.
 *
 * Invariants (checked by kn_graph_verify):
 *  - every node input/output index names a value of the graph (-1 = an
 *    omitted optional input);
 *  - each value has at most one producer; graph inputs and constants have
 *    none;
 *  - nodes are stored in topological order after kn_graph_toposort.
 *
 * Shapes: dims are concrete, except the batch symbol N. A dim whose bit is set
 * in kn_shape.batch_mask means dim[i] * N (kn_graph.max_batch bounds N). */
#ifndef KN_GRAPH_H
#define KN_GRAPH_H

#include <stdarg.h>

#include "base/base.h"

#define KN_MAX_RANK 8
/* Largest tensor (bytes, at max_batch) shape inference accepts (4 PiB):
 * anything bigger is a hostile or broken model, and byte counts (and sums of
 * a few thousand of them) stay clear of int64 overflow. */
#define KN_MAX_TENSOR_BYTES ((int64_t)1 << 52)
/* Largest single dim shape inference accepts, also in empty tensors (whose
 * byte size is 0 whatever the other dims): index arithmetic on dims (window
 * and slice sizes, loop splits) stays clear of overflow. */
#define KN_MAX_DIM ((int64_t)1 << 40)

typedef enum kn_op {
  KN_OP_UNKNOWN = 0, /* imported op Kiln does not support: see op_type */
#define KN_OP(e, name, cls) KN_OP_##e,
#include "ir/graph/ops.def"
#undef KN_OP
  KN_OP_COUNT
} kn_op;

typedef enum kn_op_class {
  KN_CLASS_ELEMWISE,    /* out[i] = f(in0[bcast(i)], in1[bcast(i)], ...) */
  KN_CLASS_INJECTIVE,   /* each output element reads a computed input element */
  KN_CLASS_REDUCE,      /* reductions, pooling, softmax, normalisation */
  KN_CLASS_CONTRACTION, /* conv / matmul: register-blocked reduction */
  KN_CLASS_VIEW,        /* same bytes, new shape: aliases its input */
  KN_CLASS_CONSTANT,    /* result known at compile time */
} kn_op_class;

const char *kn_op_name(kn_op op); /* ONNX op_type ("Conv") */
kn_op_class kn_op_class_of(kn_op op);
kn_op kn_op_from_onnx(const char *op_type); /* KN_OP_UNKNOWN if none */

typedef struct kn_shape {
  int rank;
  int64_t dim[KN_MAX_RANK];
  uint32_t batch_mask; /* bit i: dim[i] is multiplied by the batch symbol N */
} kn_shape;

typedef struct kn_value {
  const char *name;
  kn_dtype dtype;      /* KN_DT_INVALID until inferred */
  bool shape_known;    /* set by import (declared) or shape inference */
  kn_shape shape;
  void *data;          /* constant contents (row-major, dtype), else NULL */
  int64_t *batch_coef; /* optional, int64 constants only: element i is
                          data[i] + batch_coef[i] * N (shape arithmetic) */
  int producer;        /* node index, or -1 */
} kn_value;

typedef enum kn_attr_kind {
  KN_ATTR_INT,     /* i */
  KN_ATTR_FLOAT,   /* f */
  KN_ATTR_STRING,  /* s */
  KN_ATTR_INTS,    /* ints[n] */
  KN_ATTR_FLOATS,  /* floats[n] */
  KN_ATTR_STRINGS, /* strings[n] */
  KN_ATTR_TENSOR,  /* value: index of a constant value in the graph */
  KN_ATTR_GRAPH,   /* graph (s = "graph"): imported subgraph; other kinds Kiln does not
                      read (s = "graphs", "tensors" ...): a named placeholder, graph NULL */
} kn_attr_kind;

/* A subgraph (If branch, Loop / Scan body), imported into its parent graph:
 * its values live in the parent's value table, its nodes in `nodes` (never in
 * the parent's node list, so passes, fusion and the plan do not see them).
 * A node of the body may read any value of an enclosing scope; every such
 * outer value that is not a constant is listed in `captures`, and the owning
 * node reads it as an extra input: node->in[capture_base + k] == captures[k]
 * (so the toposort, DCE and inlining see the dependency; an inliner maps
 * captures[k] to the node's current input capture_base + k). */
typedef struct kn_subgraph {
  const char *name;
  int n_inputs, n_outputs, n_nodes, n_captures;
  int *inputs;  /* formal inputs: values without producer */
  int *outputs; /* may name inputs, constants or captured values */
  struct kn_node *nodes;
  int *captures;
  int capture_base;
} kn_subgraph;

typedef struct kn_attr {
  const char *name;
  kn_attr_kind kind;
  int64_t i;
  float f;
  const char *s;
  int n;
  int64_t *ints;
  float *floats;
  const char **strings;
  int value;
  const kn_subgraph *graph; /* KN_ATTR_GRAPH with s = "graph": the subgraph */
} kn_attr;

typedef struct kn_node {
  kn_op op;
  const char *op_type; /* as written in the model ("Conv", "MyCustomOp") */
  const char *domain;  /* "" for the default ONNX domain */
  const char *name;    /* node name; never NULL (importer invents one) */
  int n_in, n_out;
  int *in;  /* value indices, -1 = omitted optional input */
  int *out; /* value indices */
  int n_attr;
  kn_attr *attrs;
  bool dead; /* removed by a pass; skipped by everyone, dropped by compaction */
  /* The composite node a decomposition or expansion made this one from
   * (kn_graph_mark_origin), for diagnostics; NULL on imported nodes. */
  const struct kn_origin *origin;
} kn_node;

/* A composite node that was rewritten: its name and op, and the composite
 * it was itself made from (NULL for a node of the model). Graph arena. */
typedef struct kn_origin {
  const char *name, *op_type;
  const struct kn_origin *up;
} kn_origin;

/* Most values, and most nodes, one graph holds. */
#define KN_GRAPH_MAX_ELEMS (1 << 24)

/* What a run-time check (kn_graph.n_checks) guards. */
typedef enum kn_check_kind {
  KN_CHECK_VALUE, /* input values vs the compiled shapes: KILN_ERR_VALUE */
  KN_CHECK_INDEX, /* --check-indices, gather / scatter indices in range: KILN_ERR_INDEX */
} kn_check_kind;

typedef struct kn_graph {
  kn_arena arena;
  /* The value and node tables. Neither moves when the graph grows, so a
   * kn_value * or kn_node * taken from them stays valid across
   * kn_graph_add_value / _add_node / _add_const (until kn_graph_free; a
   * toposort reorders `nodes` in place). */
  kn_value *values;
  int n_values, cap_values;
  kn_node *nodes;
  int n_nodes, cap_nodes;
  int *inputs; /* graph inputs (not initializers) */
  int n_inputs;
  int *outputs;
  int n_outputs;
  /* The last n_checks entries of `outputs` are run-time checks, not model
   * outputs: scalar bool values that must be true when the artifact runs
   * (pass_specialize adds them). Passes keep them alive as outputs; the plan
   * computes them in the workspace first and P_run returns KILN_ERR_VALUE
   * when one is false. */
  int n_checks;
  /* check_kinds[j]: what check j (outputs[n_outputs - n_checks + j])
   * guards, so which status P_run returns when it is false; NULL: all
   * KN_CHECK_VALUE. Written only by kn_pass_add_check(_kind). */
  const kn_check_kind *check_kinds;
  /* The shape each model output declares in the ONNX graph (n_outputs -
   * n_checks entries), rank -1 where not fully static; NULL when not imported. */
  kn_shape *out_declared;
  /* out_pinned[o * KN_MAX_RANK + k]: the name of the symbolic dim that model
   * output o declares at index k when `--dim` pinned it (its value then
   * stands in out_declared, if that is static), else NULL; NULL when no
   * output declares a pinned dim. The pipeline checks these dims against
   * the inferred shapes. */
  const char **out_pinned;
  int64_t opset;     /* default-domain opset import */
  int64_t max_batch; /* bound of the batch symbol N (>= 1) */
  const char *batch_symbol; /* the dim_param treated as N, or NULL */
} kn_graph;

void kn_graph_init(kn_graph *g);
void kn_graph_free(kn_graph *g);

/* Adds a value named `name` (copied), dtype unknown, no shape; returns its index. */
int kn_graph_add_value(kn_graph *g, const char *name);
/* Finds a value by name, -1 if none. Linear scan: use at import time only. */
int kn_graph_find_value(const kn_graph *g, const char *name);
/* Adds a node; in/out arrays are copied. Sets producer of each output. */
int kn_graph_add_node(kn_graph *g, kn_op op, const char *name, const int *in, int n_in,
                      const int *out, int n_out);
/* Adds a constant value with a copy of `data`. */
int kn_graph_add_const(kn_graph *g, const char *name, kn_dtype dtype, const kn_shape *shape,
                       const void *data);

/* Attributes (lookups return the default when absent). */
const kn_attr *kn_node_attr(const kn_node *n, const char *name);
int64_t kn_node_attr_int(const kn_node *n, const char *name, int64_t dflt);
float kn_node_attr_float(const kn_node *n, const char *name, float dflt);
const char *kn_node_attr_string(const kn_node *n, const char *name, const char *dflt);
/* Returns the ints of an INTS attribute and stores the count, or NULL/0. */
const int64_t *kn_node_attr_ints(const kn_node *n, const char *name, int *count);
/* A diagnostic about node n: "node 'NAME' (OP): " then fmt. Returns -1, as
 * kn_diag_error does; the one spelling every pass, shape rule and reference
 * uses to name the node at fault. */
int kn_node_verror(kn_diag *d, const kn_node *n, const char *fmt, va_list ap);
/* Appends an attribute to a node (the struct is copied, arrays are not). */
void kn_node_add_attr(kn_graph *g, kn_node *n, kn_attr attr);

/* Origins: nodes [first, g->n_nodes) without one were made from node
 * `from` (a composite being rewritten). */
void kn_graph_mark_origin(kn_graph *g, int first, int from);
/* Makes diagnostics [first, d->count), about node n, lead with the chain of
 * composites n was made from, the model's node first: "node 'L' (Loop): its
 * inlined body fails: node 'L#n1/lstm' (LSTM): its decomposition fails:
 * <line>". Nothing for a node of the model. */
void kn_node_diag_origin(const kn_node *n, kn_diag *d, int first);

/* Shapes. */
int64_t kn_shape_numel_max(const kn_shape *s, int64_t max_batch); /* N = max_batch */
bool kn_shape_equal(const kn_shape *a, const kn_shape *b);
int64_t kn_value_numel(const kn_graph *g, int v); /* at N = max_batch */

/* Orders nodes topologically (dead nodes dropped). Returns -1 and a diagnostic
 * on a cycle or a value used before any definition. */
int kn_graph_toposort(kn_graph *g, kn_diag *d);

/* Checks the invariants above; returns 0 or -1 with diagnostics. */
int kn_graph_verify(const kn_graph *g, kn_diag *d);

/* Floating-point operations of one node at N = 1 (multiply-add = 2) for
 * contractions, one per output element otherwise (ir/graph/flops.c). */
double kn_node_flops(const kn_graph *g, int node);
/* Rough count of scalar operations evaluating node `node` with the reference
 * interpreter takes: flops, every element read and written, windows; shapes
 * must be inferred. *input_elems (if not NULL) gets the elements read from
 * inputs alone. Constant folding and shape inference refuse to evaluate
 * nodes whose work is far above their input size: a tiny hostile model can
 * ask for a 4096^3 MatMul of constants. */
double kn_node_work(const kn_graph *g, int node, double *input_elems);

/* Prints the graph as text (one node per line with shapes). */
#include <stdio.h>
void kn_graph_print(const kn_graph *g, FILE *out);

#endif
