/* onnx_load.h — the ONNX frontend: a ModelProto file (or buffer) -> graph IR.
 *
 * What the loader produces (graph already kn_graph_init'ed by the caller):
 *  - g->opset: the default-domain ("" / "ai.onnx") opset import (1 if the
 *    model imports none at all);
 *  - initializers and Constant nodes: constant values (data set, shape known);
 *    TENSOR attributes also become constants (kn_attr.value is the index);
 *  - graph inputs that are not initializers: g->inputs, with declared dtype and
 *    shape. A symbolic dim at index 0 of an input is the batch symbol N
 *    (g->batch_symbol; dim = 1 with its batch_mask bit set); the same symbol
 *    elsewhere is batch too; any other symbolic or unknown dim is an error.
 *    A symbolic dim pinned by a kn_fe_dim (`--dim NAME=VALUE`) is read as
 *    that static value before any of this: it is never the batch symbol;
 *    g->max_batch is left as it is (1 by default; the CLI overrides);
 *  - g->outputs: the graph outputs (dtype/shape left to shape inference;
 *    g->out_declared keeps the static shapes they declare, pinned dims read
 *    as their values);
 *  - one node per non-Constant NodeProto, in file order (not sorted), with
 *    op_type/domain/name kept (a missing name becomes "<op_type>_<index>").
 *    Ops Kiln does not know, and all ops outside the default domain, get
 *    KN_OP_UNKNOWN.
 *
 * Errors: every problem appends a one-line diagnostic starting with the file
 * name (or "<buffer>") and the call returns -1. Unsupported ops are all
 * reported, one line each ("unsupported op 'Foo' (domain 'x', opset N) at node
 * 'n'"), and in that case the graph is still completely built, so a census
 * (kiln inspect) can show it. After other errors the graph may be partial;
 * the caller frees it with kn_graph_free either way. */
#ifndef KN_FE_ONNX_LOAD_H
#define KN_FE_ONNX_LOAD_H

#include "ir/graph/graph.h"

/* A symbolic dim fixed by name (`kiln compile --dim NAME=VALUE`): every
 * dim_param `name` of the graph's inputs and declared outputs reads as
 * `value`, as if the model declared it static. */
typedef struct kn_fe_dim {
  const char *name;
  int64_t value;
} kn_fe_dim;

/* Parses the --dim values args[0..n_args) ("NAME=VALUE", VALUE a whole number
 * in [1, KN_MAX_DIM]) into dims (room for n_args; names copied into `arena`),
 * a name given twice with the same value kept once. Returns the number of
 * dims, or -1 with one diagnostic per bad value (malformed, out of range, a
 * name given twice with different values). */
int kn_fe_dims_parse(const char *const *args, int n_args, kn_arena *arena, kn_fe_dim *dims, kn_diag *d);

/* Loads the model at `path`; external data is read relative to its directory. */
int kn_fe_load_onnx(const char *path, kn_graph *g, kn_diag *d);
/* The same with the symbolic dims dims[0..n_dims) pinned; a pin that names
 * no symbolic dim of the graph inputs is an error. */
int kn_fe_load_onnx_dims(const char *path, const kn_fe_dim *dims, int n_dims, kn_graph *g, kn_diag *d);

/* Loads a serialized ModelProto from memory (not retained after the call).
 * `base_dir` is the directory for external data, or NULL to reject it. */
int kn_fe_load_onnx_buffer(const uint8_t *data, size_t size, const char *base_dir, kn_graph *g,
                           kn_diag *d);
int kn_fe_load_onnx_buffer_dims(const uint8_t *data, size_t size, const char *base_dir, const kn_fe_dim *dims,
                                int n_dims, kn_graph *g, kn_diag *d);

/* Reads a file holding one serialized TensorProto (the ONNX backend tests'
 * input_N.pb / output_N.pb) into a new constant value of `g` (named after the
 * tensor, or "tensor"), with the same checks as initializers. Returns the value
 * index, or -1 with a diagnostic starting with `path`. */
int kn_fe_load_tensor_pb(const char *path, kn_graph *g, kn_diag *d);

/* The same from bytes in memory; `label` starts the diagnostics, `base_dir`
 * is the directory for external data, or NULL to reject it. */
int kn_fe_load_tensor_pb_buffer(const uint8_t *data, size_t size, const char *label,
                                const char *base_dir, kn_graph *g, kn_diag *d);

/* Number of live nodes with an op Kiln does not support (KN_OP_UNKNOWN),
 * those inside subgraphs (If branches, Loop / Scan bodies) included. */
int kn_fe_unsupported_count(const kn_graph *g);
/* Calls visit for each of them; `where` is "" at the top level, else
 * " (in then_branch of node 'If_0')". Returns their number. */
typedef void (*kn_fe_unsupported_fn)(const kn_node *n, const char *where, void *ctx);
int kn_fe_unsupported_walk(const kn_graph *g, kn_fe_unsupported_fn visit, void *ctx);

#endif
