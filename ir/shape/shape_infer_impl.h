/* shape_infer_impl.h — private to shape_infer*.c: the inference context and
 * the accessors the per-op rules use. Not for other modules. */
#ifndef KN_SHAPE_INFER_IMPL_H
#define KN_SHAPE_INFER_IMPL_H

#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"

typedef struct kn_infer {
  kn_graph *g;
  kn_diag *d;
  kn_ref_tensor *known; /* per value: data known at compile time (side table) */
  kn_arena scratch;     /* owns the side-table data */
  int node;             /* the node being inferred */
  bool *missing;        /* per value, or NULL: data a node needed but not known */
} kn_infer;

/* Appends "node 'name' (Op): <msg>" and returns -1. */
int kn_infer_fail(kn_infer *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const kn_node *kn_infer_node(const kn_infer *c);
/* Input k's value, or NULL when absent / omitted. */
const kn_value *kn_infer_in(const kn_infer *c, int k);
/* Sets output k (if present) to dtype t and shape s; fails on overflow. */
int kn_infer_set(kn_infer *c, int k, kn_dtype t, const kn_shape *s);
/* Input k's data when known at compile time (constant or side table). */
const kn_ref_tensor *kn_infer_known(const kn_infer *c, int k);
/* Records that input k must be known at compile time but is not (for
 * kn_infer_shapes_needs), then fails with "input K (what) must be a
 * constant" plus `why` (may be ""). Returns -1. */
int kn_infer_fail_unknown(kn_infer *c, int k, const char *what, const char *why);
/* Reads the integer input k (named `what` in diagnostics), which must be
 * known, into vals[0..*count). Batch coefficients go to coefs when it is not
 * NULL, and are an error otherwise. Returns 0 or -1. */
int kn_infer_ints(kn_infer *c, int k, const char *what, int64_t *vals, int64_t *coefs, int max,
                  int *count);
/* Ints from attribute `name` if present (returns 1), else from input k if
 * present (returns 1), else 0; -1 on error. */
int kn_infer_attr_or_input(kn_infer *c, const char *name, int k, int64_t *vals, int max,
                           int *count);

/* Per-family rules: 0 or -1. */
int kn_infer_elemwise(kn_infer *c);
int kn_infer_nn(kn_infer *c);
int kn_infer_movement(kn_infer *c);
int kn_infer_index(kn_infer *c); /* index_family.h */
int kn_infer_attention(kn_infer *c); /* Attention, FlexAttention, RMSNormalization, RotaryEmbedding,
                                       CausalConvWithState, LinearAttention */
int kn_infer_misc(kn_infer *c); /* BitCast, MelWeightMatrix */

#endif
