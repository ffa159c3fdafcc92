/* shape_infer_misc.c — shape rules of the misc family (ir/graph/ops.def block
 * "misc"): BitCast (same shape, another dtype of the same size; a view that
 * aliases its input's bytes) and MelWeightMatrix, whose output shape comes
 * from its input values: it is decomposed into a constant by
 * ir/passes/pass_decompose_misc.c once every input is constant, so a survivor here
 * names the input that must be bound at compile time. Dropout's rule is here
 * too, for its training mode. */
#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer_impl.h"

static int infer_bitcast(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  const kn_value *x = kn_infer_in(c, 0);
  if (!x) return kn_infer_fail(c, "input 0 is missing");
  const kn_attr *to = kn_node_attr(n, "to");
  kn_dtype t = to && to->kind == KN_ATTR_INT ? kn_dtype_from_onnx((int)to->i) : KN_DT_INVALID;
  if (t == KN_DT_INVALID) return kn_infer_fail(c, "attribute 'to' is missing or names an unsupported dtype");
  if (kn_dtype_size(t) != kn_dtype_size(x->dtype))
    return kn_infer_fail(c, "attribute 'to' (%s) differs in size from input dtype %s", kn_dtype_name(t),
                         kn_dtype_name(x->dtype));
  return kn_infer_set(c, 0, t, &x->shape);
}

/* Dropout: inference (no training_mode, or a constant false) copies X; in
 * training mode only ratio 0 is deterministic (ir/passes/pass_decompose_misc.c
 * rewrites that into an Identity and an all-true mask). A random mask cannot
 * match the ONNX reference's numpy RNG, so it stays a diagnostic. */
static int infer_dropout(kn_infer *c) {
  const kn_value *x = kn_infer_in(c, 0);
  if (!x) return kn_infer_fail(c, "input 0 is missing");
  if (kn_infer_in(c, 2)) {
    const kn_ref_tensor *t = kn_infer_known(c, 2);
    if (!t) return kn_infer_fail_unknown(c, 2, "training_mode", "");
    if (kn_ref_load(t->dtype, t->data, 0) != 0) {
      const kn_ref_tensor *r = kn_infer_known(c, 1);
      if (kn_infer_in(c, 1) && !r) return kn_infer_fail_unknown(c, 1, "ratio", " in training mode");
      double ratio = r ? kn_ref_load(r->dtype, r->data, 0) : 0.5;
      if (ratio != 0)
        return kn_infer_fail(c, "training mode with ratio %g draws a random mask, which cannot match the ONNX "
                                "reference's random numbers (only ratio 0 is supported)", ratio);
    }
  }
  if (kn_infer_set(c, 1, KN_DT_BOOL, &x->shape) < 0) return -1;
  return kn_infer_set(c, 0, x->dtype, &x->shape);
}

int kn_infer_misc(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  switch (n->op) {
  case KN_OP_BITCAST: return infer_bitcast(c);
  case KN_OP_DROPOUT: return infer_dropout(c);
  case KN_OP_MEL_WEIGHT_MATRIX:
    for (int k = 0; k < 5; k++)
      if (!kn_infer_in(c, k)) return kn_infer_fail(c, "input %d is missing", k);
    /* name every input still unknown, so all are bound in one round */
    int rc = 0;
    for (int k = 0; k < 5; k++)
      if (!kn_infer_known(c, k)) rc = kn_infer_fail_unknown(c, k, NULL, " (the output shape depends on it)");
    return rc < 0 ? rc : kn_infer_fail(c, "inputs are not valid scalars");
  default: return kn_infer_fail(c, "no shape rule");
  }
}
