/* pass_expand.h — private to the expansion passes (pass_inline_control.c,
 * pass_decompose_rnn.c, pass_decompose_dft.c): a small builder that appends
 * primitive nodes to a graph on behalf of one composite node, with fresh
 * value names "<node>#<k>" and a count of the nodes added (the unroll
 * budget). New values have no dtype or shape: the driver re-infers shapes. */
#ifndef KN_PASS_EXPAND_H
#define KN_PASS_EXPAND_H

#include "ir/passes/passes.h"

/* Most nodes one composite node may expand into. */
#define KN_EXPAND_MAX_NODES 4096

typedef struct kn_expand {
  kn_graph *g;
  kn_diag *d;
  const char *base; /* the composite node's name, for value names */
  int counter;      /* next value suffix */
  int added;        /* nodes added so far */
  bool *needed;     /* per value, or NULL: see kn_expand_need */
} kn_expand;

/* Makes value v a constant by folding its producer chain when every leaf is
 * a constant (Shape / Size need only a shape); true if v is constant. */
bool kn_expand_fold(kn_graph *g, int v);
/* A refusal because value v is not a compile-time constant: marks needed[u]
 * (if needed is set) for each graph input u without data that v is, or that
 * v is computed from (as kn_infer_shapes_needs, so that kiln compile --bind
 * and the conformance runner can bind them), and returns a diagnostic suffix
 * saying they can be bound; "" when there are none. */
const char *kn_expand_need(const kn_graph *g, bool *needed, int v);

/* A fresh value without producer. */
int kn_expand_value(kn_expand *x);
/* Appends node op(in...) with one new output value, which it returns.
 * attrs (n_attrs) are copied. */
int kn_expand_node(kn_expand *x, kn_op op, const int *in, int n_in, const kn_attr *attrs,
                   int n_attrs);
/* Appends node op(in...) writing the existing value `out`. */
void kn_expand_node_into(kn_expand *x, kn_op op, const int *in, int n_in, const kn_attr *attrs,
                         int n_attrs, int out);
/* Constants. */
int kn_expand_const(kn_expand *x, kn_dtype t, const kn_shape *s, const void *data);
int kn_expand_i64(kn_expand *x, int64_t v);                     /* scalar */
int kn_expand_i64s(kn_expand *x, const int64_t *v, int n);      /* 1-D */
/* Shorthands for common primitive nodes (attribute forms). */
int kn_expand_slice(kn_expand *x, int in, int64_t axis, int64_t start, int64_t end);
int kn_expand_squeeze(kn_expand *x, int in, int64_t axis);
int kn_expand_unsqueeze(kn_expand *x, int in, int64_t axis);
int kn_expand_concat(kn_expand *x, const int *in, int n, int64_t axis);
int kn_expand_transpose(kn_expand *x, int in, const int64_t *perm, int rank);
int kn_expand_binary(kn_expand *x, kn_op op, int a, int b);
int kn_expand_unary(kn_expand *x, kn_op op, int a);

/* True for the ops these passes remove (If, Loop, Scan, RNN, LSTM, GRU,
 * DFT, STFT). */
bool kn_expand_is_composite(kn_op op);

/* Per-family expanders: replace live node `node` (killed on success) by
 * primitive nodes. Input shapes are inferred on entry. 0 or -1 with a
 * diagnostic naming the node. */
int kn_expand_rnn(kn_graph *g, int node, kn_diag *d);
int kn_expand_dft(kn_graph *g, int node, bool *needed, kn_diag *d);

#endif
