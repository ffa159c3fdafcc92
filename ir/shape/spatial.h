/* spatial.h — the spatial op family (issue #3): Resize, Upsample,
 * ConvTranspose, DepthToSpace, SpaceToDepth, CenterCropPad, Col2Im,
 * GridSample, AffineGrid, MaxUnpool, RoiAlign.
 *
 * The family's entry points for the three per-op dispatches (shape rules in
 * shape_infer_spatial.c, the reference in ref_eval_spatial*.c, the compute
 * definitions in te_ops_spatial*.c), and the geometry each op's attributes
 * and constant inputs resolve to, computed once (spatial_geom.c) so that
 * shape inference, the reference and the TE agree on what e.g.
 * "coordinate_transformation_mode=align_corners with sizes" means.
 *
 * Semantics follow the ONNX operator spec and its reference implementation
 * (onnx/reference/ops), including its floating-point order of operations
 * where rounding decides an index (nearest Resize). */
#ifndef KN_SPATIAL_H
#define KN_SPATIAL_H

#include "ir/graph/graph.h"
#include "ir/ref/ref_eval.h"

struct kn_infer;
struct kn_te_ctx;
struct kn_te_tensor;
struct kn_expr;

/* True for the ops of this family. */
bool kn_spatial_op(kn_op op);
int kn_infer_spatial(struct kn_infer *c);
int kn_ref_spatial(kn_ref_call *c);
struct kn_te_tensor *kn_te_spatial(struct kn_te_ctx *c, const kn_node *n, int out,
                                   struct kn_te_tensor **in, kn_diag *d);
/* The sampling ops (GridSample, AffineGrid, RoiAlign, MaxUnpool), called by
 * the two above for ops they do not handle. */
int kn_ref_spatial_sample(kn_ref_call *c);
struct kn_te_tensor *kn_te_spatial_sample(struct kn_te_ctx *c, const kn_node *n,
                                          struct kn_te_tensor **in, kn_diag *d);

/* MaxUnpool and RoiAlign (ref_eval_unpool_roi.c, te_ops_unpool_roi.c), called
 * by the two above for ops they do not handle. */
int kn_ref_unpool_roi(kn_ref_call *c);
struct kn_te_tensor *kn_te_unpool_roi(struct kn_te_ctx *c, const kn_node *n, struct kn_te_tensor **in,
                                      kn_diag *d);

/* The interpolation weight of a tap at signed distance `dist` (f64): linear
 * max(0, 1 - |d|), or the cubic convolution kernel with coefficient A (Resize's
 * cubic_coeff_a; GridSample uses -0.75). Shared by Resize and GridSample. */
struct kn_expr *kn_te_interp_weight(struct kn_te_ctx *c, struct kn_expr *dist, bool cubic, double A);

/* ---- Resize / Upsample ---- */

typedef enum kn_resize_mode { KN_RESIZE_NEAREST, KN_RESIZE_LINEAR, KN_RESIZE_CUBIC } kn_resize_mode;

typedef enum kn_resize_ctm {
  KN_CTM_HALF_PIXEL,
  KN_CTM_HALF_PIXEL_SYMMETRIC,
  KN_CTM_PYTORCH_HALF_PIXEL,
  KN_CTM_ALIGN_CORNERS,
  KN_CTM_ASYMMETRIC,
  KN_CTM_TF_CROP_AND_RESIZE,
} kn_resize_ctm;

typedef enum kn_resize_nearest {
  KN_NEAREST_ROUND_PREFER_FLOOR,
  KN_NEAREST_ROUND_PREFER_CEIL,
  KN_NEAREST_FLOOR,
  KN_NEAREST_CEIL,
} kn_resize_nearest;

/* Per axis a: input x(o) of output index o is the source coordinate
 *   x = coord(o) (by ctm, with scale[a], out_float[a] = scale * in, roi);
 * nearest reads in[clamp(pick(x))]; linear/cubic read taps[a] positions
 *   pos_j = ceil(x) - 1 - taps/2 + 1 + j,  j < taps
 * (clamped: edge padding) with weight K((pos_j - x) * support[a]),
 * zeroed outside the input with exclude_outside and divided by their sum
 * when `normalize`. tf_crop_and_resize gives extrapolation_value where
 * x < 0 or x > in - 1 along any resized axis. Identity axes are copied.
 * kiln.ResizeDeclared without concrete scales / sizes (shape inference,
 * TE): out[] is the declared output_shape; each axis with `runtime` set
 * computes its scale at run time: entry scale_index of the scales input (as
 * float32, then float64: what the reference reads), or with runtime_sizes
 * the keep_aspect_ratio_policy ratio min / max over the listed axes i of
 * sizes[i] / in[axes[i]] (not_larger / not_smaller); scale[] is 0 there,
 * support 1. Run-time sizes with the stretch policy give constant scales
 * out / in. With runtime_roi, the roi of listed axis axes[i] is read at
 * run time (entries i and n_axes + i, as float64). */
typedef struct kn_resize_geom {
  int rank;
  kn_resize_mode mode;
  kn_resize_ctm ctm;
  kn_resize_nearest nearest;
  bool exclude_outside, normalize;
  double cubic_a, extrapolation;
  int64_t in[KN_MAX_RANK], out[KN_MAX_RANK];
  double scale[KN_MAX_RANK], roi_start[KN_MAX_RANK], roi_end[KN_MAX_RANK];
  double support[KN_MAX_RANK]; /* min(scale, 1) with antialias, else 1 */
  int taps[KN_MAX_RANK];       /* linear/cubic taps along the axis */
  bool identity[KN_MAX_RANK];
  bool runtime[KN_MAX_RANK]; /* scale read at run time (kiln.ResizeDeclared) */
  int scale_index[KN_MAX_RANK]; /* entry of listed axis a in scales / sizes / roi; -1 */
  int n_axes;                   /* entries of scales / sizes: axes listed, else rank */
  int axes[KN_MAX_RANK];        /* the listed axes, in order */
  bool runtime_sizes, runtime_roi;
  bool not_larger;              /* runtime_sizes: min (else max) of the ratios */
} kn_resize_geom;

/* Resolves Resize (opset 10-19+) or Upsample (7-9) node n for input dims
 * x_dims[0..rank) (per batch unit; batch_mask: dims times N, which must stay
 * unresized). The optional inputs are given as concrete tensors, NULL when
 * absent (an empty tensor counts as absent). kiln.ResizeDeclared (inputs X,
 * roi, scales, sizes; attributes of Resize plus output_shape and legacy = 1
 * for Upsample / Resize-10) resolves without concrete scales / sizes / roi
 * to the run-time geometry above; with concrete values as Resize, refusing
 * values that do not give output_shape. 0, or -1 with a diagnostic. */
int kn_resize_resolve(const kn_node *n, int64_t opset, const kn_shape *x,
                      const kn_ref_tensor *roi, const kn_ref_tensor *scales,
                      const kn_ref_tensor *sizes, kn_resize_geom *g, kn_diag *d);

/* Which inputs of node n hold roi, scales, sizes (-1: none) for this opset. */
void kn_resize_inputs(const kn_node *n, int64_t opset, int *roi, int *scales, int *sizes);

/* ---- ConvTranspose ---- */

/* Output o along spatial axis i gets input position p and tap k when
 * p * stride + k * dilation - pad_begin = o. */
typedef struct kn_convt_geom {
  int n_spatial;
  int64_t group, in_channels, out_channels;
  int64_t in[KN_MAX_RANK], kernel[KN_MAX_RANK], stride[KN_MAX_RANK], dilation[KN_MAX_RANK];
  int64_t pad_begin[KN_MAX_RANK], out[KN_MAX_RANK];
} kn_convt_geom;

/* x: [N, C, D...], w: [C, M/group, K...]. 0 or -1 with a diagnostic. */
int kn_convt_resolve(const kn_node *n, const kn_shape *x, const kn_shape *w, kn_convt_geom *g,
                     kn_diag *d);

/* ---- Col2Im ---- */

/* input [N, C * prod(block), L] -> [N, C, image...]; output position o along
 * axis i gets block offset k and block index b_i when
 * b_i * stride + k * dilation - pad_begin = o. */
typedef struct kn_col2im_geom {
  int n_spatial;
  int64_t channels;
  int64_t image[KN_MAX_RANK], block[KN_MAX_RANK], stride[KN_MAX_RANK], dilation[KN_MAX_RANK];
  int64_t pad_begin[KN_MAX_RANK], blocks[KN_MAX_RANK]; /* blocks along each axis */
} kn_col2im_geom;

int kn_col2im_resolve(const kn_node *n, const kn_shape *x, const int64_t *image, int n_image,
                      const int64_t *block, int n_block, kn_col2im_geom *g, kn_diag *d);

#endif
