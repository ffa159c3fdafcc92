/* rewrite.h — the one toolkit the passes use to rewrite the graph: a builder
 * (kn_rw) that adds nodes, values and constants on behalf of one node being
 * replaced (a decomposition, an expansion, the attention rewrite, a run-time
 * check), and kn_rw_retype for a node that becomes another op in place.
 *
 * The rule: handles stay valid while the graph grows. Builder calls take and
 * return value indices, and a kn_value * or kn_node * taken before a call
 * that adds values or nodes still names the same entry after it (the graph's
 * tables never move, graph.h). Only a toposort reorders g->nodes.
 *
 * New values are untyped (shape inference after the pass types them), except
 * those of kn_rw_typed, which the caller types (a pass that runs after shape
 * inference and leaves it valid). New names start with kn_rw.name, in one of
 * two schemes chosen by kn_rw.names (kept per pass, as artifacts and
 * diagnostics show them):
 *  - KN_RW_NAMES_PATH (the zero value; decompositions, run-time checks):
 *    values "<name>/t", constants "<name>/c", both made unique; nodes
 *    "<name>/<Op>_<node index>"; kn_rw_typed values and nodes "<name>/<tag>";
 *  - KN_RW_NAMES_SEQ (expansions of control flow, RNNs, DFTs): values and
 *    constants "<name>#<k>", nodes "<name>#n<k>", k counting up.
 * Shape-like parameters are constant inputs (Unsqueeze / Squeeze axes,
 * Reshape shapes, Slice bounds), except where a function says "_attr"; every
 * opset's shape rule reads both forms (ir/shape/shape_infer*.c). */
#ifndef KN_REWRITE_H
#define KN_REWRITE_H

#include "ir/passes/passes.h"

typedef enum kn_rw_names {
  KN_RW_NAMES_PATH, /* "<name>/t", "<name>/c", "<name>/<Op>_<index>" */
  KN_RW_NAMES_SEQ,  /* "<name>#<k>", "<name>#n<k>" */
} kn_rw_names;

typedef struct kn_rw {
  kn_graph *g;
  kn_diag *d;
  int node;          /* the node being replaced (kn_rw_in, _fail, _output, _attr_copy), or -1 */
  const char *name;  /* prefix of every new name */
  kn_rw_names names;
  int last;          /* the node added last, for kn_rw_attr* (-1: none yet) */
  int counter;       /* next value suffix (KN_RW_NAMES_SEQ) */
  int added;         /* nodes added so far (the expansions' unroll budget) */
  bool *needed;      /* per value, or NULL: kn_expand_need's marks (pass_expand.h) */
} kn_rw;

/* ---- nodes ---- */

/* A fresh untyped value without producer. */
int kn_rw_value(kn_rw *rw);
/* Adds node op(in...) with one new output value; returns that value. */
int kn_rw_op(kn_rw *rw, kn_op op, const int *in, int n_in);
int kn_rw_un(kn_rw *rw, kn_op op, int a);
int kn_rw_bin(kn_rw *rw, kn_op op, int a, int b);
/* kn_rw_op with attributes attrs[0..n_attrs) (the structs are copied). */
int kn_rw_op_attrs(kn_rw *rw, kn_op op, const int *in, int n_in, const kn_attr *attrs, int n_attrs);
/* Adds node op(in...) writing the existing value `out`; returns the node. */
int kn_rw_op_into(kn_rw *rw, kn_op op, const int *in, int n_in, int out);
/* The same with a typed output value of dtype t and shape s, and value and
 * node named "<name>/<tag>" (made unique). */
int kn_rw_typed(kn_rw *rw, kn_op op, const int *in, int n_in, kn_dtype t, kn_shape s, const char *tag);
int kn_rw_typed_into(kn_rw *rw, kn_op op, const int *in, int n_in, int out, const char *tag);

/* Attributes of the node added last (kn_attr arrays are not copied). */
void kn_rw_attr(kn_rw *rw, kn_attr a);
void kn_rw_attr_int(kn_rw *rw, const char *name, int64_t v);
void kn_rw_attr_ints(kn_rw *rw, const char *name, const int64_t *v, int n);
/* Copies attribute `name` of the node being replaced, if set. */
void kn_rw_attr_copy(kn_rw *rw, const char *name);

/* ---- constants ---- */

int kn_rw_const(kn_rw *rw, kn_dtype t, const kn_shape *s, const void *data); /* data NULL: zeros */
/* A constant named "<name>/<tag>" (made unique), whatever the scheme. */
int kn_rw_const_tagged(kn_rw *rw, const char *tag, kn_dtype t, const kn_shape *s, const void *data);
/* A rank-0 scalar of dtype t (saturating: an attribute may hold any double). */
int kn_rw_scalar(kn_rw *rw, kn_dtype t, double v);
int kn_rw_i64(kn_rw *rw, int64_t v);                /* rank-0 int64, exact */
int kn_rw_ints(kn_rw *rw, const int64_t *v, int n); /* 1-D int64 */

/* ---- common nodes ---- */

int kn_rw_cast(kn_rw *rw, int a, kn_dtype t); /* a itself when already t */
/* Reduction over `axes` (n_axes 0 = all axes) with keepdims. */
int kn_rw_reduce(kn_rw *rw, kn_op op, int a, const int64_t *axes, int n_axes, bool keepdims);
int kn_rw_unsqueeze(kn_rw *rw, int a, const int64_t *axes, int n); /* a itself when n = 0 */
int kn_rw_squeeze(kn_rw *rw, int a, const int64_t *axes, int n);
/* One axis as the "axes" attribute (the form the expansions write). */
int kn_rw_unsqueeze_attr(kn_rw *rw, int a, int64_t axis);
int kn_rw_squeeze_attr(kn_rw *rw, int a, int64_t axis);
int kn_rw_reshape(kn_rw *rw, int a, const int64_t *shape, int n);
/* [start, end) of one axis, step 1. */
int kn_rw_slice(kn_rw *rw, int a, int64_t axis, int64_t start, int64_t end);
int kn_rw_transpose(kn_rw *rw, int a, const int64_t *perm, int rank);
int kn_rw_concat(kn_rw *rw, const int *in, int n, int64_t axis); /* in[0] itself when n = 1 */
/* min(max(a, lo), hi) with scalar constants of a's dtype t. */
int kn_rw_clamp(kn_rw *rw, int a, kn_dtype t, double lo, double hi);

/* ---- the node being replaced ---- */

/* Input k of rw->node (-1 when omitted) and a value of the graph. */
int kn_rw_in(const kn_rw *rw, int k);
const kn_value *kn_rw_val(const kn_rw *rw, int v);
/* Makes value v stand for output k of rw->node: v's producer writes the
 * output value instead (an Identity when v has no producer). Nothing when
 * the node has no output k. */
void kn_rw_output(kn_rw *rw, int k, int v);
/* Appends "node 'name' (Op): <msg>" about rw->node and returns -1. */
int kn_rw_fail(kn_rw *rw, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Makes node `node` an op of the default domain in place (op, op_type,
 * domain), keeping its inputs, outputs and, if keep_attrs, its attributes;
 * returns it. For rewrites that change what a node computes without adding
 * one (BatchNormalization -> Add, Conv -> kiln.ConvNHWC). */
kn_node *kn_rw_retype(kn_graph *g, int node, kn_op op, bool keep_attrs);

#endif
