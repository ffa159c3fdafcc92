/* decompose.h — private to ir/passes/pass_decompose*.c: the per-family
 * rewrites that replace one composite node (NegativeLogLikelihoodLoss,
 * QuantizeLinear ...) by primitive graph ops, written with the rewriting
 * toolkit (rewrite.h, KN_RW_NAMES_PATH names). The composite is marked dead
 * before its rewrite runs; shape inference after the pass types the new
 * values. */
#ifndef KN_DECOMPOSE_H
#define KN_DECOMPOSE_H

#include "ir/passes/rewrite.h"

/* Per-family rewrites of c->node (0, or -1 with a diagnostic); each returns
 * 1 when the op is not of its family. */
int kn_decompose_loss_norm(kn_rw *c);
int kn_decompose_quant(kn_rw *c);
int kn_decompose_misc(kn_rw *c);
int kn_decompose_ml(kn_rw *c);
int kn_decompose_deform(kn_rw *c); /* DeformConv, pass_decompose_deform.c */
/* Whether node n is a composite of pass_decompose_misc.c / _ml.c
 * (BatchNormalization only in training mode, MelWeightMatrix only once its
 * inputs are constant); if so its arity, as composite_arity. */
bool kn_decompose_misc_arity(const kn_graph *g, const kn_node *n, int *min_in, int *max_in, int *max_out);
bool kn_decompose_mel_ready(const kn_graph *g, const kn_node *n);

#endif
