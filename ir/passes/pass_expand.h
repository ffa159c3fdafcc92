/* pass_expand.h — private to the expansion passes (pass_inline_control.c,
 * pass_decompose_rnn.c, pass_decompose_dft.c): their entry points and the
 * compile-time value helpers they share. They build with the rewriting
 * toolkit (rewrite.h) in KN_RW_NAMES_SEQ naming, and count the nodes they
 * add (kn_rw.added) against the unroll budget. New values have no dtype or
 * shape: the driver re-infers shapes. */
#ifndef KN_PASS_EXPAND_H
#define KN_PASS_EXPAND_H

#include "ir/passes/rewrite.h"

/* Most nodes one composite node may expand into. */
#define KN_EXPAND_MAX_NODES 4096

/* Makes value v a constant by folding its producer chain when every leaf is
 * a constant (Shape / Size need only a shape); true if v is constant. */
bool kn_expand_fold(kn_graph *g, int v);
/* A refusal because value v is not a compile-time constant: marks needed[u]
 * (if needed is set) for each graph input u without data that v is, or that
 * v is computed from (as kn_infer_shapes_needs, so that kiln compile --bind
 * and the conformance runner can bind them), and returns a diagnostic suffix
 * saying they can be bound; "" when there are none. */
const char *kn_expand_need(const kn_graph *g, bool *needed, int v);

/* True for the ops these passes remove (If, Loop, Scan, RNN, LSTM, GRU,
 * DFT, STFT). */
bool kn_expand_is_composite(kn_op op);

/* Per-family expanders: replace live node `node` (killed on success) by
 * primitive nodes. Input shapes are inferred on entry. 0 or -1 with a
 * diagnostic naming the node. */
int kn_expand_rnn(kn_graph *g, int node, kn_diag *d);
int kn_expand_dft(kn_graph *g, int node, bool *needed, kn_diag *d);

#endif
