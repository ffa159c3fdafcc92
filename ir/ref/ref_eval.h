/* ref_eval.h — the naive reference interpreter: every op of ops.def written
 * as plain loops (double accumulation), used to fold constants at compile time
 * and as the oracle the compiled kernels are tested against.
 *
 * Files: ref_eval.c (dispatch, batch coefficients, node and graph drivers),
 * ref_eval_elemwise.c (unary / binary / where / cast ...), ref_eval_nn.c
 * (conv, matmul, pools, reductions, normalisations), ref_eval_shape.c (data
 * movement, shape and constant producers).
 *
 * Output shapes are never recomputed here: the caller passes them (from shape
 * inference), so the interpreter only computes values. */
#ifndef KN_REF_EVAL_H
#define KN_REF_EVAL_H

#include "ir/graph/graph.h"

/* Evaluates node `node` of g when all its inputs are constants (Shape and
 * Size only need their input's shape), writing the data (and batch_coef for
 * int64 shape arithmetic) into the output values, allocated in g's arena.
 * Output shapes must have been inferred. The node itself is left in place:
 * the caller marks it dead. Returns 0, KN_REF_NOFOLD when the result cannot
 * be a constant (an output depends on N in a way a constant cannot carry, or
 * an op other than the ones that carry batch coefficients sees them), or -1
 * with a diagnostic. */
int kn_ref_eval_node(kn_graph *g, int node, kn_diag *d);
#define KN_REF_NOFOLD 1

/* Runs the whole graph on concrete inputs with the batch symbol N = batch.
 * inputs[i] holds g->inputs[i] (row-major, its dtype, shape at N = batch);
 * outputs[i] is caller memory sized for g->outputs[i] at N = batch. Shapes
 * must have been inferred and nodes toposorted. Returns 0 or -1. */
int kn_ref_run_graph(const kn_graph *g, const void *const *inputs, void **outputs, int64_t batch,
                     kn_diag *d);

/* ---- below: shared by ref_eval*.c and shape_infer.c ---- */

/* A concrete tensor. shape.batch_mask is 0, except for the input of Shape /
 * Size (whose data is never read). coef (int64 only, optional): element i
 * stands for data[i] + coef[i] * N. */
typedef struct kn_ref_tensor {
  kn_dtype dtype;
  kn_shape shape;
  void *data;
  int64_t *coef;
} kn_ref_tensor;

/* One op application: in[i].data is NULL for omitted inputs; out[i] has dtype,
 * shape and zeroed data set by the caller (data NULL for omitted outputs). */
typedef struct kn_ref_call {
  const kn_graph *g; /* for opset and Constant attribute tensors */
  const kn_node *node;
  const kn_ref_tensor *in;
  int n_in;
  kn_ref_tensor *out;
  int n_out;
  kn_arena *arena; /* for out[i].coef and scratch */
  kn_diag *d;
  /* kn_ref_run_graph (a model run): out-of-range gather / scatter indices
   * follow Kiln's run-time rule (kn_ref_index_at). false when folding
   * constants, where such an index is a compile-time error. */
  bool run_time;
} kn_ref_call;

/* Computes one node: 0, KN_REF_NOFOLD, or -1 with a diagnostic. */
int kn_ref_compute(kn_ref_call *c);

/* Op families (dispatched by kn_ref_compute; coefficients already handled,
 * except by the integer arithmetic of kn_ref_elemwise and by Shape/Size). */
int kn_ref_elemwise(kn_ref_call *c);
int kn_ref_nn(kn_ref_call *c);
int kn_ref_movement(kn_ref_call *c);
int kn_ref_index(kn_ref_call *c); /* index_family.h */
int kn_ref_misc(kn_ref_call *c); /* BitCast (ref_eval_misc.c) */

/* Element access in any dtype. */
double kn_ref_load(kn_dtype t, const void *p, int64_t i);
void kn_ref_store(kn_dtype t, void *p, int64_t i, double v);
int64_t kn_ref_load_int(kn_dtype t, const void *p, int64_t i);
void kn_ref_store_int(kn_dtype t, void *p, int64_t i, int64_t v);
/* Element count of a concrete shape (batch bits ignored). */
int64_t kn_ref_numel(const kn_shape *s);
/* Row-major strides of a concrete shape. */
void kn_ref_strides(const kn_shape *s, int64_t *stride);
/* Offset into `in` (broadcast against out's rank, numpy rules) of the output
 * element with multi-index idx. */
int64_t kn_ref_bcast_offset(const kn_shape *in, const kn_shape *out, const int64_t *idx);
/* Advances a row-major multi-index; false after the last element. */
bool kn_ref_next_index(const kn_shape *s, int64_t *idx);
/* A gather / scatter index v for an axis of extent dim, by Kiln's rule for
 * out-of-range indices (docs/ops.md; the TE side is kn_te_index_read in
 * ir/te/te_ops.h): valid in [-dim, dim), negative ones + dim. Stores the
 * wrapped index in *at and returns 1 when valid; else returns 0 when c runs a
 * model (a gather then reads 0, a scatter drops the update) or -1 with a
 * diagnostic when c folds constants. */
int kn_ref_index_at(kn_ref_call *c, int64_t v, int64_t dim, int64_t *at);
/* "node 'name' (Op)" prefix helper for diagnostics. */
int kn_ref_error(kn_ref_call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
