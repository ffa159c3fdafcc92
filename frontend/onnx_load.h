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
 *    g->max_batch is left as it is (1 by default; the CLI overrides);
 *  - g->outputs: the graph outputs (dtype/shape left to shape inference);
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

/* Loads the model at `path`; external data is read relative to its directory. */
int kn_fe_load_onnx(const char *path, kn_graph *g, kn_diag *d);

/* Loads a serialized ModelProto from memory (not retained after the call).
 * `base_dir` is the directory for external data, or NULL to reject it. */
int kn_fe_load_onnx_buffer(const uint8_t *data, size_t size, const char *base_dir, kn_graph *g,
                           kn_diag *d);

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
