/* passes.h — graph passes. One pass, one file, one exported function that
 * returns 0, or -1 with diagnostics. Each file's opening comment says what the
 * pass requires and guarantees. The order they run in is the step table of
 * tools/pipeline.c, and only there. The passes of the front of the pipeline
 * (decompose, inline_control, data_dependent, runtime_slices, runtime_resize,
 * specialize, value_checks) run on the imported graph before the first full
 * shape inference; every other pass requires inferred shapes and toposorted
 * nodes on entry, and leaves both valid (new values get their dtype and
 * shape; nodes are re-sorted). */
#ifndef KN_PASSES_H
#define KN_PASSES_H

#include "ir/graph/graph.h"

/* Rewrites composite ops (losses, normalisations, LRN, LpPool, quantization)
 * into primitive ops; runs on the imported graph before shape inference. */
int kn_pass_decompose(kn_graph *g, kn_diag *d);
/* Evaluates nodes whose inputs are all constants (Shape/Size: known shapes),
 * batch symbol carried as batch_coef; removes Identity / inference Dropout. */
int kn_pass_fold_constants(kn_graph *g, kn_diag *d);
/* Expands the composite ops (If, Loop, Scan, RNN, LSTM, GRU, DFT, STFT) into
 * primitive ops: inlines and unrolls control flow whose decisions are
 * compile-time constants, decomposes recurrent layers and DFTs. Runs on the
 * imported graph, before the first shape inference. */
int kn_pass_inline_control(kn_graph *g, kn_diag *d);
/* The same, and sets needed[v] (g->n_values entries on entry, zeroed by the
 * caller; NULL: none) for each graph input v an expansion refused because
 * its value is not known at compile time (a Loop trip count or condition, an
 * If condition whose branches differ, DFT axis / dft_length, STFT
 * frame_step / frame_length), as kn_infer_shapes_needs does. */
int kn_pass_inline_control_needs(kn_graph *g, bool *needed, kn_diag *d);
/* Common subexpressions: equal constants read through one, and a node with
 * the op, inputs and attributes of an earlier one removed, its readers
 * reading the earlier one's outputs (graph outputs keep their names);
 * repeated to a fixpoint. Random ops and subgraphs are never merged. */
int kn_pass_cse(kn_graph *g, kn_diag *d);
/* Removes nodes whose outputs nothing uses, then toposorts. */
int kn_pass_dce(kn_graph *g, kn_diag *d);
/* Folds BatchNormalization into a preceding Conv; rewrites any other BN as
 * Mul + Add with constant per-channel scale and shift. */
int kn_pass_fold_conv_bn(kn_graph *g, kn_diag *d);
/* Runs 2-D convs and pools in NHWC (kiln.*NHWC ops) and sinks / cancels the
 * Transposes that this introduces. */
int kn_pass_layout(kn_graph *g, kn_diag *d);

/* Rewrites 3x3 stride-1 kiln.ConvNHWC with constant f32 weights, group 1,
 * into Winograd F(m x m, 3x3) (WinogradInput, MatMul, WinogradOutput) with
 * the tile m = want(g, node, ctx): 2 or 4, 0 to leave the conv direct. Runs
 * after kn_pass_layout, before kn_pass_explicit_pad (pass_winograd.c). */
typedef int (*kn_winograd_want)(const kn_graph *g, int node, void *ctx);
int kn_pass_winograd(kn_graph *g, kn_winograd_want want, void *ctx, kn_diag *d);
/* Whether node is a conv the pass can rewrite (3x3, stride 1, dilation 1,
 * group 1, pads <= 2, constant f32 weights). */
bool kn_winograd_eligible(const kn_graph *g, int node);
/* want: every eligible conv as F(2x2, 3x3), or as F(4x4, 3x3); the default
 * rule (F(2x2, 3x3) for at least 32 input and output channels). */
int kn_winograd_want_all2(const kn_graph *g, int node, void *ctx);
int kn_winograd_want_all4(const kn_graph *g, int node, void *ctx);
int kn_winograd_want_default(const kn_graph *g, int node, void *ctx);

/* A per-channel scale Mul(y, s) read only by a group-1 kiln.ConvNHWC with
 * constant weights scales the weights instead, where they are the smaller
 * tensor (pass_scale_weights.c). Runs after kn_pass_explicit_pad (a padded
 * conv reads a Pad, and is left alone). */
int kn_pass_scale_weights(kn_graph *g, kn_diag *d);

/* Moves the padding of windowed kiln.ConvNHWC into a Pad node in front of
 * it, so the convolution's inner loop reads without bounds checks. */
int kn_pass_explicit_pad(kn_graph *g, kn_diag *d);
/* A global average pool over a large image pools per-row means instead
 * (pass_split_pool.c). Runs after kn_pass_layout. */
int kn_pass_split_pool(kn_graph *g, kn_diag *d);

/* Rewrites the attention family (Attention, FlexAttention, RMSNormalization,
 * RotaryEmbedding, CausalConvWithState, LinearAttention) into primitive ops (MatMul, Softmax, elementwise, data
 * movement); runs first, so later passes never see them. */
int kn_pass_decompose_attention(kn_graph *g, kn_diag *d);

/* `kiln compile --precision`: float32 constants, graph inputs and
 * intermediates stored as `low` (KN_DT_F16 or KN_DT_BF16), the graph's inputs
 * and outputs still float32; a constant value that overflows `low` is an
 * error naming the constant (pass_precision.c). Returns 1 (nothing changed)
 * for KN_DT_F32. Runs after constant folding. */
int kn_pass_precision(kn_graph *g, kn_dtype low, kn_diag *d);

/* Gives every graph output storage of its own, written by a kernel: an
 * output that is an input, a constant or another output gets an Identity copy. */
int kn_pass_materialize_outputs(kn_graph *g, kn_diag *d);
/* pass_split_topk.c: adds kiln.TopKRank(X) as input 2 of every TopK. */
int kn_pass_split_topk(kn_graph *g, kn_diag *d);
/* Graph inputs whose values decide shapes (Reshape's shape, Reduce axes ...)
 * specialized to the values the declared output shapes allow, with a
 * run-time check (pass_specialize.c). Run before the first shape inference
 * that must succeed; a no-op when shapes infer without it. */
int kn_pass_specialize(kn_graph *g, kn_diag *d);
/* NonZero, Compress, Unique whose outputs declare static shapes: computed
 * for those shapes, with a run-time check that the data gives them
 * (pass_data_dependent.c). */
int kn_pass_data_dependent(kn_graph *g, kn_diag *d);
/* Slice, Pad, Range whose starts / pads / bounds are run-time values and
 * whose outputs declare static shapes: gathers with run-time indices, with a
 * run-time check of the shapes (pass_runtime_slices.c). */
int kn_pass_runtime_slices(kn_graph *g, kn_diag *d);
/* Resize / Upsample whose scales are run-time values and whose outputs
 * declare static shapes: kiln.ResizeDeclared reading the scales at run time,
 * with a run-time check of the shapes (pass_runtime_resize.c). */
int kn_pass_runtime_resize(kn_graph *g, kn_diag *d);
/* Run-time range checks of values the kernels read at run time (CumSum's
 * axis), as kn_pass_add_check entries (pass_value_checks.c). Returns how many
 * it added. */
int kn_pass_value_checks(kn_graph *g, kn_diag *d);
/* `kiln compile --check-indices`: a KN_CHECK_INDEX check per gather / scatter
 * whose indices are read at run time, that they lie in [-dim, dim)
 * (pass_index_checks.c). Returns how many it added. */
int kn_pass_index_checks(kn_graph *g, kn_diag *d);

/* ---- helpers shared by the pass files (pass_util.c) ---- */

bool kn_pass_is_graph_input(const kn_graph *g, int v);
bool kn_pass_is_graph_output(const kn_graph *g, int v);
/* The static shape the ONNX graph declares for v when v is a model output
 * that declares one (kn_graph.out_declared); false otherwise. */
bool kn_pass_declared_shape(const kn_graph *g, int v, kn_shape *s);
/* Whether v's value is only known when the model runs: not a constant, and
 * computed from a graph input (Shape / Size read shapes, not values). A walk
 * over producers with an explicit stack (models may be deep). */
bool kn_pass_is_runtime_value(const kn_graph *g, int v);
/* Appends bool scalar v as a run-time check (kn_graph.n_checks): P_run
 * returns KILN_ERR_VALUE, writing no output, when it is false. */
void kn_pass_add_check(kn_graph *g, int v);
/* The same for a check of another kind (KN_CHECK_INDEX: KILN_ERR_INDEX). */
void kn_pass_add_check_kind(kn_graph *g, int v, kn_check_kind kind);
/* uses[v] = input slots of live nodes reading v + graph output slots naming v
 * (uses has g->n_values entries). */
void kn_pass_count_uses(const kn_graph *g, int *uses);
/* Makes every live node that reads `from` read `to` instead. */
void kn_pass_replace_uses(kn_graph *g, int from, int to);
/* Marks node i dead and detaches its outputs (producer -1). */
void kn_pass_kill_node(kn_graph *g, int i);
/* Adds a value named base+suffix (made unique) with the given type. */
int kn_pass_new_value(kn_graph *g, const char *base, const char *suffix, kn_dtype t,
                      const kn_shape *s);
/* Adds a constant named base+suffix (made unique) with a copy of data. */
int kn_pass_new_const(kn_graph *g, const char *base, const char *suffix, kn_dtype t,
                      const kn_shape *s, const void *data);
/* A new constant holding the data of constant v, viewed with shape `view`
 * (same element count), transposed by perm (out.dim[k] = view.dim[perm[k]]). */
int kn_pass_permute_const(kn_graph *g, int v, const kn_shape *view, const int64_t *perm,
                          const char *suffix);
/* Transposes constant v's data in place by perm (its own shape as the view)
 * and renames it base+suffix: for constants nothing else reads. */
void kn_pass_permute_const_in_place(kn_graph *g, int v, const int64_t *perm, const char *suffix);
/* Attribute constructors (arrays copied into g's arena). */
kn_attr kn_pass_attr_int(const char *name, int64_t v);
kn_attr kn_pass_attr_ints(kn_graph *g, const char *name, const int64_t *v, int n);

#endif
