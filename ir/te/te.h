/* te.h — the tensor-expression (TE) IR: *what* a kernel computes.
 *
 * A tensor is either a PLACEHOLDER (a kernel input: an activation or a
 * compile-time constant) or a COMPUTE: `body` gives element (axes...) as an
 * expression over loads of other tensors. A compute whose body is a
 * KN_E_REDUCE is a reduction stage; any other compute is injective and gets
 * inlined into its consumers by the lowering. The schedule (schedule/) says
 * *how* to compute; the definitions here know nothing about loops.
 *
 * Operator definitions (ir/te/te_ops_*.c) build TE from graph nodes: one
 * function per op family, dispatched from the ops.def table. */
#ifndef KN_TE_H
#define KN_TE_H

#include "ir/loop/expr.h"
#include "ir/graph/graph.h"

#define KN_TE_MAX_RANK KN_MAX_RANK

typedef enum kn_te_kind { KN_TE_PLACEHOLDER, KN_TE_COMPUTE } kn_te_kind;

struct kn_te_tensor {
  const char *name;
  kn_dtype dtype;
  int rank;
  kn_expr *shape[KN_TE_MAX_RANK]; /* int64 extents; may involve the batch var */
  kn_te_kind kind;
  /* COMPUTE */
  kn_var *axes[KN_TE_MAX_RANK];
  kn_expr *body; /* KN_E_REDUCE at the top => reduction stage */
  /* PLACEHOLDER */
  int value; /* graph value it stands for */
};

/* Everything TE construction needs: the expression arena and the batch var. */
typedef struct kn_te_ctx {
  kn_expr_ctx *ec;
  kn_var *batch;     /* the batch symbol N */
  const kn_graph *g; /* for attribute lookups and constant inputs */
} kn_te_ctx;

kn_te_tensor *kn_te_placeholder(kn_te_ctx *c, const char *name, kn_dtype t, int rank,
                                kn_expr *const *shape, int value);
/* Placeholder for graph value v, shape from the graph (batch dims use N). */
kn_te_tensor *kn_te_placeholder_for(kn_te_ctx *c, int v);
/* New compute tensor with fresh axes; fill in ->body afterwards. */
kn_te_tensor *kn_te_compute(kn_te_ctx *c, const char *name, kn_dtype t, int rank,
                            kn_expr *const *shape);
/* Loads t[idx...]. */
kn_expr *kn_te_at(kn_te_ctx *c, kn_te_tensor *t, kn_expr **idx);
/* The extent of dim i of graph value v as an expression (uses N if batched). */
kn_expr *kn_te_dim(kn_te_ctx *c, int v, int i);

/* Builds the TE of graph node `node`: `inputs[i]` are the tensors of its
 * inputs (NULL for omitted optional inputs); returns its (first) output
 * tensor, or NULL with a diagnostic when the op/config is unsupported. */
kn_te_tensor *kn_te_op(kn_te_ctx *c, int node, kn_te_tensor **inputs, kn_diag *d);
/* As kn_te_op, for output `output_index` of the node (Split, LayerNorm's
 * Mean/InvStdDev, Dropout's mask); kn_te_op(c, n, in, d) is output 0. */
kn_te_tensor *kn_te_op_output(kn_te_ctx *c, int node, int output_index, kn_te_tensor **inputs,
                              kn_diag *d);

/* Loads `t` at the index of an output of rank `out_rank` with numpy
 * broadcasting (t's dims align to the right; size-1 dims read index 0). */
kn_expr *kn_te_bcast_load(kn_te_ctx *c, kn_te_tensor *t, kn_var **out_axes, int out_rank);

#endif
