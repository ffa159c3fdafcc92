/* shape_infer.h — dtype and shape inference for every op of ops.def, plus the
 * small geometry helpers (axes, conv/pool windows, slices) that the reference
 * interpreter, the graph passes and the compute definitions share, so that
 * "what does auto_pad=SAME_UPPER mean" is answered in one place.
 *
 * Semantics follow ONNX for the opsets PyTorch exports (13-17), with the
 * older attribute forms (axes/split/pads/min/max as attributes) accepted too.
 * The batch symbol N is carried as kn_shape.batch_mask bits. */
#ifndef KN_SHAPE_INFER_H
#define KN_SHAPE_INFER_H

#include "ir/graph/graph.h"

/* Sets dtype, shape and shape_known of every value produced by a live node.
 * Graph inputs must have a declared dtype and shape. Small integer tensors
 * computed from constants and Shape (the Shape->Gather->Concat->Reshape
 * chains of PyTorch exports) are evaluated on the side, so ops that need
 * constant inputs see them; nothing in the graph other than value types and
 * shapes is changed (kn_pass_fold_constants materialises those constants).
 * Nodes are toposorted first. Reports every failing node; returns 0 or -1. */
int kn_infer_shapes(kn_graph *g, kn_diag *d);

/* kn_infer_shapes with the diagnostics dropped: for passes that infer on
 * the side and leave the reporting to a later inference. */
int kn_infer_shapes_quiet(kn_graph *g);

/* kn_infer_shapes, and also sets needed[v] (g->n_values entries, zeroed by
 * the caller) for each graph input v whose *data* some node needs at compile
 * time (Reshape's shape, Reduce*'s axes, Pad's pads, Range's bounds...,
 * directly or through ops computing them) and cannot know. Binding those
 * inputs to values (kiln compile --bind) makes them constants. */
int kn_infer_shapes_needs(kn_graph *g, bool *needed, kn_diag *d);

/* ---- helpers shared with ref_eval, the passes and the compute library ---- */

/* Maps axis in [-rank, rank) to [0, rank); -1 when out of range. */
int kn_axis_norm(int64_t axis, int rank);

/* Sliding-window geometry of a Conv / pool node (NCHW or the kiln.*NHWC ops),
 * with auto_pad resolved to explicit pads and ceil_mode applied. Input
 * position of output o, tap k: o * stride - pad_begin + k * dilation (taps
 * outside [0, in) read padding). Pads are >= 0: a negative SAME_* total
 * (stride > kernel) is clamped at 0, as TensorFlow and ONNX Runtime's Conv. */
typedef struct kn_window {
  int n_spatial;
  int64_t in[KN_MAX_RANK];     /* input spatial sizes */
  int64_t kernel[KN_MAX_RANK];
  int64_t stride[KN_MAX_RANK];
  int64_t dilation[KN_MAX_RANK];
  int64_t pad_begin[KN_MAX_RANK];
  int64_t pad_end[KN_MAX_RANK];
  int64_t out[KN_MAX_RANK];    /* output spatial sizes (>= 1) */
} kn_window;

/* Reads the INTS attribute `name` of exactly `want` entries, each in
 * lo..2^40, into v, or fills v with dflt when absent; -1 with a diagnostic
 * naming the node and attribute otherwise. */
int kn_window_ints_attr(const kn_node *n, const char *name, int want, int64_t dflt, int64_t lo, int64_t *v,
                        kn_diag *d);

/* Resolves the window of node n given the input spatial sizes and the kernel
 * sizes (from the weight for Conv, kernel_shape for pools). Reads strides,
 * dilations, pads, auto_pad and (when use_ceil_mode) ceil_mode. Returns 0, or
 * -1 with a diagnostic naming the node. */
int kn_window_resolve(const kn_node *n, int n_spatial, const int64_t *in_spatial,
                      const int64_t *kernel, bool use_ceil_mode, kn_window *w, kn_diag *d);

/* A resolved Slice: element j along axis a reads start[a] + j * step[a],
 * j < count[a]. Axes that are not sliced have start 0, step 1, the full count. */
typedef struct kn_slice {
  int64_t start[KN_MAX_RANK], step[KN_MAX_RANK], count[KN_MAX_RANK];
  uint32_t sliced_mask; /* bit a: axis a appears in `axes` */
} kn_slice;

/* Resolves ONNX Slice parameters (n_axes entries; axes may be NULL = 0..n-1,
 * steps NULL = all 1) against concrete dims dim[0..rank). Clamping follows
 * ONNX; an end of INT32_MAX / INT64_MAX means "to the end" in the step's
 * direction (as ONNX Runtime). Returns 0, or -1 with a diagnostic. */
int kn_slice_resolve(const kn_node *n, int rank, const int64_t *dim, const int64_t *starts,
                     const int64_t *ends, const int64_t *axes, const int64_t *steps, int n_axes,
                     kn_slice *s, kn_diag *d);

/* Multidirectional (numpy) broadcast of a and b into out; a dim with the batch
 * bit only matches an equal batch dim or a plain 1. Returns false on mismatch
 * and stores the (output-aligned) axis in *bad_axis. */
bool kn_shape_broadcast(const kn_shape *a, const kn_shape *b, kn_shape *out, int *bad_axis);

/* Formats a shape as "[N*1,3,224,224]" into buf (always NUL-terminated). */
const char *kn_shape_str(const kn_shape *s, char *buf, size_t size);

#endif
