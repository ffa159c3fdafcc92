/* ref_eval_misc.c — reference of the misc family's real ops: BitCast copies
 * the bytes of its input unchanged (same element size, checked by the shape
 * rule), so the output reads them as its own dtype. The family's other ops
 * are composites (ir/passes/pass_decompose_misc.c) and never reach the reference. */
#include <string.h>

#include "ir/ref/ref_eval.h"

int kn_ref_misc(kn_ref_call *c) {
  switch (c->node->op) {
  case KN_OP_BITCAST: {
    if (c->n_in < 1 || !c->in[0].data) return kn_ref_error(c, "input 0 is missing");
    size_t in_bytes = (size_t)kn_ref_numel(&c->in[0].shape) * kn_dtype_size(c->in[0].dtype);
    size_t out_bytes = (size_t)kn_ref_numel(&c->out[0].shape) * kn_dtype_size(c->out[0].dtype);
    KN_ASSERT(in_bytes == out_bytes, "BitCast sizes checked by the shape rule");
    if (in_bytes) memcpy(c->out[0].data, c->in[0].data, in_bytes);
    return 0;
  }
  default: return kn_ref_error(c, "op not supported by the reference interpreter");
  }
}
