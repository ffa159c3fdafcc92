/* te_ops.h — private to the TE operator library (ir/te/): the op-family
 * entry points that kn_te_op_output dispatches to, and the small helpers they
 * share (index arithmetic that folds constants, constant-input readers,
 * diagnostics in one format).
 *
 * Conventions every definition follows (te.h, and the lowering relies on
 * them):
 *  - a compute's shape is its graph value's shape (kn_te_dim), dtype too;
 *  - a reduction stage is a compute whose body is exactly one KN_E_REDUCE,
 *    indexed by the kept (non-reduced) axes in order; epilogues are separate
 *    computes reading it;
 *  - every load is in bounds: padded or wrapped reads clamp their indices and
 *    select the pad value. */
#ifndef KN_TE_OPS_H
#define KN_TE_OPS_H

#include "ir/te/te.h"

/* Op families (one file each). `out` is the output index of the node. */
kn_te_tensor *kn_te_elemwise(kn_te_ctx *c, const kn_node *n, int out, kn_te_tensor **in,
                             kn_diag *d);
kn_te_tensor *kn_te_shape_op(kn_te_ctx *c, const kn_node *n, int out, kn_te_tensor **in,
                             kn_diag *d);
kn_te_tensor *kn_te_contraction(kn_te_ctx *c, const kn_node *n, int out, kn_te_tensor **in,
                                kn_diag *d);
kn_te_tensor *kn_te_pool(kn_te_ctx *c, const kn_node *n, int out, kn_te_tensor **in, kn_diag *d);
/* [indexing, scans, bitwise, einsum]: index_family.h */
kn_te_tensor *kn_te_index_op(kn_te_ctx *c, const kn_node *n, int out, kn_te_tensor **in,
                             kn_diag *d);
kn_te_tensor *kn_te_scatter_op(kn_te_ctx *c, const kn_node *n, int out, kn_te_tensor **in,
                               kn_diag *d);
kn_te_tensor *kn_te_reduce_op(kn_te_ctx *c, const kn_node *n, int out, kn_te_tensor **in,
                              kn_diag *d);

/* Appends "node 'name' (Op): <what> not supported" and returns NULL. */
kn_te_tensor *kn_te_unsupported(kn_diag *d, const kn_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A compute shaped like output `out` of node n (dtype and shape from the
 * graph), named after the node; `suffix` (may be NULL) names helper stages. */
kn_te_tensor *kn_te_out_compute(kn_te_ctx *c, const kn_node *n, int out, const char *suffix);
/* A compute named "<node>.<suffix>". */
kn_te_tensor *kn_te_stage(kn_te_ctx *c, const kn_node *n, const char *suffix, kn_dtype t, int rank,
                          kn_expr *const *shape);
/* The axis variables of compute t as expressions, into idx[0..rank). */
void kn_te_axis_exprs(kn_te_ctx *c, const kn_te_tensor *t, kn_expr **idx);

/* Index arithmetic (int64) that folds constants and drops +0 / *1. */
kn_expr *kn_te_ix(kn_te_ctx *c, int64_t v);
kn_expr *kn_te_ix_add(kn_te_ctx *c, kn_expr *a, kn_expr *b);
kn_expr *kn_te_ix_sub(kn_te_ctx *c, kn_expr *a, kn_expr *b);
kn_expr *kn_te_ix_mul(kn_te_ctx *c, kn_expr *a, kn_expr *b);
kn_expr *kn_te_ix_div(kn_te_ctx *c, kn_expr *a, kn_expr *b); /* floor */
kn_expr *kn_te_ix_mod(kn_te_ctx *c, kn_expr *a, kn_expr *b); /* floor */
kn_expr *kn_te_ix_min(kn_te_ctx *c, kn_expr *a, kn_expr *b);
kn_expr *kn_te_ix_max(kn_te_ctx *c, kn_expr *a, kn_expr *b);
/* min(max(i, 0), extent - 1): an index that is always in bounds. */
kn_expr *kn_te_ix_clamp(kn_te_ctx *c, kn_expr *i, kn_expr *extent);
/* 0 <= i < extent as a bool expression (constant-folded where possible);
 * NULL means "always true". */
kn_expr *kn_te_ix_in_range(kn_te_ctx *c, kn_expr *i, kn_expr *extent);
/* Run-time indices: Kiln's one rule for out-of-range values (docs/ops.md).
 * An index v read at run time for an axis of extent dim is valid, as in
 * ONNX, in [-dim, dim), a negative one counting from the end. An index
 * outside names no element: a gather reads 0 (false) there and a scatter
 * drops that update. Why not clamp: a scatter cannot clamp without
 * overwriting a real element, and a clamped gather returns a plausible real
 * row that hides the bad index; 0 / nothing is the same "no element" on
 * both sides and costs one compare and select per gathered element.
 * `kiln compile --check-indices` makes such a run fail instead
 * (ir/passes/pass_index_checks.c). Used by Gather, GatherElements, GatherND, ScatterElements (Scatter) and
 * ScatterND, and by the reference interpreter (kn_ref_index_at).
 *
 * kn_te_index_wrap: v (any integer dtype) as int64, + dim when negative.
 * It equals an in-bounds index exactly when v is valid, so a scatter's hit
 * test (wrapped == output index) drops invalid updates by itself. */
kn_expr *kn_te_index_wrap(kn_te_ctx *c, kn_expr *v, kn_expr *dim);
/* For gathers: the wrapped index clamped into [0, dim) (a load that is
 * always in bounds), ANDing "v is valid" into *valid (start it at NULL,
 * "true"); read through kn_te_index_or_zero. */
kn_expr *kn_te_index_read(kn_te_ctx *c, kn_expr *v, kn_expr *dim, kn_expr **valid);
/* select(valid, e, 0) (e itself when valid is NULL). */
kn_expr *kn_te_index_or_zero(kn_te_ctx *c, kn_expr *valid, kn_expr *e);
/* a && b where either may be NULL ("true"). */
kn_expr *kn_te_and(kn_te_ctx *c, kn_expr *a, kn_expr *b);
bool kn_te_ix_const(const kn_expr *e, int64_t *v);

/* The dtype sums over elements of dtype t accumulate in: float32 for the
 * 16-bit floats (float16, bfloat16), whose 8 or 11 significant bits would
 * drop the small addends of a long sum (the precision `kiln compile
 * --precision` promises: f32 accumulation, one rounding at the end); t
 * itself for every other dtype, so their definitions stay as they were.
 * Contractions, sum-like reductions, average pools, softmax's sum and
 * layer normalisation's statistics use it; max / min stay in t (exact). */
static inline kn_dtype kn_te_acc_dtype(kn_dtype t) {
  return t == KN_DT_F16 || t == KN_DT_BF16 ? KN_DT_F32 : t;
}

/* A numeric constant of dtype t (float or integer/bool). */
kn_expr *kn_te_num(kn_te_ctx *c, kn_dtype t, double v);
/* Float v clamped to [lo, hi] with kn_e_max_num / kn_e_min_num: a NaN gives lo. For
 * coordinates that become indices, so that a NaN one still loads in bounds. */
kn_expr *kn_te_clamp_num(kn_te_ctx *c, kn_expr *v, double lo, double hi);

/* Constant-input readers: the value must have data (and no batch terms).
 * Ints accept int64/int32 data; the double reader any numeric dtype. Return
 * false when the value is not a constant or has more than `max` elements. */
bool kn_te_const_ints(const kn_te_ctx *c, int v, int64_t *out, int max, int *count);
bool kn_te_const_scalar(const kn_te_ctx *c, int v, double *out);
/* an integer constant scalar exactly (uint64 as its bits) */
bool kn_te_const_scalar_int(const kn_te_ctx *c, int v, int64_t *out);

/* ONNX axis normalisation: [-rank, rank) -> [0, rank); -1 if out of range. */
int kn_te_norm_axis(int64_t axis, int rank);

/* The graph value of input/output i of node n (-1 for an omitted input). */
static inline int kn_te_in_value(const kn_node *n, int i) { return i < n->n_in ? n->in[i] : -1; }

/* Reads t at the output index `idx` with numpy broadcasting (t's dims align
 * to the right of idx; constant size-1 dims read index 0). */
kn_expr *kn_te_bcast_at(kn_te_ctx *c, kn_te_tensor *t, kn_expr **idx, int out_rank);

/* A reduction stage over some axes of a rank-`rank` domain (usually an
 * input's shape): the stage is indexed by the kept axes in order, and
 * `src` is the domain index to build the source with (kept axes -> the
 * stage's axes, reduced axes -> fresh reduction variables). */
typedef struct kn_te_red {
  kn_te_tensor *stage;
  int rank, n_red;
  bool reduced[KN_TE_MAX_RANK];
  kn_expr *src[KN_TE_MAX_RANK];
  kn_var *vars[KN_TE_MAX_RANK];
  kn_expr *extents[KN_TE_MAX_RANK];
} kn_te_red;

void kn_te_red_begin(kn_te_ctx *c, const kn_node *n, const char *suffix, kn_dtype t, int rank,
                     kn_expr *const *shape, const bool *reduced, kn_te_red *r);
/* Sets the stage's body to op-fold of `source` over the reduced axes. */
void kn_te_red_end(kn_te_ctx *c, kn_te_red *r, kn_reduce_op op, kn_expr *source);
/* The stage read at a domain index (only the kept positions are used). */
kn_expr *kn_te_red_at(kn_te_ctx *c, const kn_te_red *r, kn_expr *const *idx);
/* Number of reduced elements (product of the reduced extents), int64. */
kn_expr *kn_te_red_count(kn_te_ctx *c, const kn_te_red *r);

#endif
