/* decompose.h — private to ir/passes/pass_decompose*.c: a small builder that
 * replaces one composite node (NegativeLogLikelihoodLoss, QuantizeLinear ...)
 * by primitive graph ops, and the per-family rewrite functions.
 *
 * Every value a builder call creates is new and untyped; the shape inference
 * that follows the pass types it. kn_value / kn_node pointers stay valid across
 * builder calls (the graph's tables never move, graph.h). Shape-like
 * parameters (Unsqueeze/Squeeze axes, Reshape shapes, Slice bounds, Pad pads)
 * are constant inputs; reduction axes are the "axes" attribute (both forms
 * are accepted by every opset's rules, ir/shape/shape_infer*.c). */
#ifndef KN_DECOMPOSE_H
#define KN_DECOMPOSE_H

#include "ir/graph/graph.h"

typedef struct kn_dc {
  kn_graph *g;
  kn_diag *d;
  int node;         /* the composite being replaced (marked dead on entry) */
  const char *name; /* its name, the prefix of every new node and value */
  int last;         /* the node added last, for kn_dc_attr_* */
} kn_dc;

/* Adds node op(in...) with one new output value; returns that value. */
int kn_dc_op(kn_dc *c, kn_op op, const int *in, int n_in);
int kn_dc_un(kn_dc *c, kn_op op, int a);
int kn_dc_bin(kn_dc *c, kn_op op, int a, int b);
/* Attributes of the node added last. */
void kn_dc_attr_int(kn_dc *c, const char *name, int64_t v);
void kn_dc_attr_ints(kn_dc *c, const char *name, const int64_t *v, int n);
/* Copies attribute `name` of the composite to the node added last, if set. */
void kn_dc_attr_copy(kn_dc *c, const char *name);

/* Constants: a rank-0 scalar of dtype t, a 1-D int64 list, any tensor. */
int kn_dc_scalar(kn_dc *c, kn_dtype t, double v);
int kn_dc_ints(kn_dc *c, const int64_t *v, int n);
int kn_dc_const(kn_dc *c, kn_dtype t, const kn_shape *s, const void *data);

/* Common shapes of node. */
int kn_dc_cast(kn_dc *c, int a, kn_dtype t); /* a itself when already t */
/* Reduction over `axes` (n_axes 0 = all axes) with keepdims. */
int kn_dc_reduce(kn_dc *c, kn_op op, int a, const int64_t *axes, int n_axes, bool keepdims);
int kn_dc_unsqueeze(kn_dc *c, int a, const int64_t *axes, int n);
int kn_dc_squeeze(kn_dc *c, int a, const int64_t *axes, int n);
int kn_dc_reshape(kn_dc *c, int a, const int64_t *shape, int n);
/* min(max(a, lo), hi) with scalar constants of a's dtype t. */
int kn_dc_clamp(kn_dc *c, int a, kn_dtype t, double lo, double hi);

/* Makes value v stand for output k of the composite: v's producer writes the
 * output value instead (an Identity when v has no producer). Nothing when
 * the composite has no output k. */
void kn_dc_output(kn_dc *c, int k, int v);

/* Input k of the composite (-1 when omitted) and its value. */
int kn_dc_in(const kn_dc *c, int k);
const kn_value *kn_dc_val(const kn_dc *c, int v);
/* Appends "node 'name' (Op): <msg>" and returns -1. */
int kn_dc_fail(kn_dc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Per-family rewrites of c->node (0, or -1 with a diagnostic); each returns
 * 1 when the op is not of its family. */
int kn_dc_loss_norm(kn_dc *c);
int kn_dc_quant(kn_dc *c);
int kn_dc_misc(kn_dc *c);
int kn_dc_ml(kn_dc *c);
int kn_dc_deform(kn_dc *c); /* DeformConv, pass_decompose_deform.c */
/* Whether node n is a composite of pass_decompose_misc.c / _ml.c
 * (BatchNormalization only in training mode, MelWeightMatrix only once its
 * inputs are constant); if so its arity, as composite_arity. */
bool kn_dc_misc_arity(const kn_graph *g, const kn_node *n, int *min_in, int *max_in, int *max_out);
bool kn_dc_mel_ready(const kn_graph *g, const kn_node *n);

#endif
