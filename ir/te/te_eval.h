/* te_eval.h — a naive interpreter of tensor expressions, for tests.
 *
 * Evaluates a TE tensor element by element, straight from its definition:
 * compute bodies recursively, reductions by looping their axes, placeholder
 * loads from caller-provided buffers. Slow by design (small tensors only);
 * its value is being obviously right, so schedules and lowerings can be
 * checked against it. */
#ifndef KN_TE_EVAL_H
#define KN_TE_EVAL_H

#include "ir/te/te.h"

/* Fills `out` (dense, row-major, t's dtype) with every element of t.
 *
 * placeholder_data[v] holds the contents of graph value v (dense, row-major,
 * the placeholder's dtype) for each placeholder t reads. `batch` is the value
 * of the batch symbol: the one variable of the TE that is bound by no compute
 * axis or reduction (it is found in the tensors' shapes / reduction
 * extents).
 *
 * Semantics: float math in double, rounded to the expression's dtype after
 * every operation (so float32 results match float32 code closely); integers
 * in int64 wrapped to their dtype; integer DIV/MOD floor (x / 0 gives 0);
 * float->int casts truncate (NaN -> 0, saturating at the int64 range). Both
 * arms of a select are evaluated, and every load is checked against its
 * tensor's extents: the TE conventions require in-bounds loads even in the
 * arm a select discards. Compute tensors are materialised once each.
 *
 * Returns 0, or -1 with a diagnostic (out-of-bounds load, missing
 * placeholder data, unsupported construct such as loop-IR nodes). */
int kn_te_eval(const kn_te_tensor *t, const void *const *placeholder_data, int64_t batch, void *out,
               kn_diag *d);

#endif
