/* index_family.h — the [indexing, scans, bitwise, einsum] op family of
 * ops.def (CumSum, CumProd, the scatters, TopK, OneHot, GatherND, EyeLike,
 * ReverseSequence, BitShift, Bitwise*, Einsum, Det, the windows): which ops
 * belong to it, their arity, and the Einsum equation parser that shape
 * inference, the reference interpreter and the compute definition share.
 *
 * The dispatchers (shape_infer.c, ref_eval.c, te.c) send every op of the
 * family to its own rules (shape_infer_index.c, ref_eval_index.c,
 * ref_eval_scatter.c, te_ops_index.c, te_ops_scatter.c) before dispatching by
 * class. */
#ifndef KN_INDEX_FAMILY_H
#define KN_INDEX_FAMILY_H

#include <stddef.h>

#include "ir/graph/graph.h"

/* True for the ops of this family. */
bool kn_index_family_has(kn_op op);
/* Most inputs / outputs of an op of the family (-1: any); false if the op is
 * not in the family. */
bool kn_index_family_arity(kn_op op, int *max_in, int *max_out);

/* A parsed Einsum equation. Labels: 'a'..'z' are 0..25, 'A'..'Z' 26..51,
 * the dims an ellipsis stands for 52.. (aligned to the right across
 * operands, numpy broadcasting). The output is explicit ("->"), or the
 * ellipsis dims then the labels used once, in alphabetical order. */
#define KN_EINSUM_MAX_IN 8
#define KN_EINSUM_LABELS (52 + KN_MAX_RANK)
typedef struct kn_einsum {
  int n_in;
  int rank[KN_EINSUM_MAX_IN];
  int label[KN_EINSUM_MAX_IN][KN_MAX_RANK]; /* per operand axis */
  int out_rank;
  int out_label[KN_MAX_RANK];
  /* labels that are summed over (not in the output), in label order */
  int n_sum;
  int sum_label[KN_EINSUM_LABELS];
} kn_einsum;

/* Parses `eq` for operands of the given ranks; 0, or -1 with a message in
 * err (no diagnostic appended). */
int kn_einsum_parse(const char *eq, int n_in, const int *ranks, kn_einsum *e, char *err,
                    size_t err_size);

#endif
