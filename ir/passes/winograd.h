/* winograd.h — Winograd F(m x m, 3x3) convolution, m = 2 or 4: the two
 * transform ops (kiln.WinogradInput, kiln.WinogradOutput) that
 * ir/passes/pass_winograd.c puts around a batched MatMul in place of a 3x3 stride-1
 * kiln.ConvNHWC.
 *
 * For a 3x3 filter g and an a x a input tile d, a = m + 2 (Lavin & Gray
 * 2015), an m x m tile of the convolution's output is
 *   Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A
 * with the constant matrices of winograd.c (kn_winograd_mats). Over the
 * whole image:
 *   V[n, e, t, c] = (Bᵀ d_t,c B)[e]            kiln.WinogradInput (a² elements per tile)
 *   U[e, c, k]    = (G g_c,k Gᵀ)[e]            the weights, transformed at compile time
 *   M[n, e, t, k] = sum_c V[n, e, t, c] U[e, c, k]   MatMul (a² GEMMs, one per e)
 *   Y[n, y, x, k] = (Aᵀ M_t,k A)[y % m, x % m]  kiln.WinogradOutput, t = tile of (y, x)
 * e = a ξ + ν indexes the a x a transformed tile; tile t = ty · tw + tx covers
 * output rows m ty .. m ty + m - 1 and the same columns, so the tiles number
 * th = ceil(oh / m) by tw = ceil(ow / m); a ragged last tile reads zeros past
 * the input and its extra outputs are never written. Both ops carry the
 * tile size in the attribute "tile" (2 when absent).
 *
 * F(2x2, 3x3) does 16 multiplies in the GEMMs per 2x2 outputs and input
 * channel where the direct convolution does 36 (2.25x fewer), and its
 * transforms are additions only. F(4x4, 3x3) does 36 per 4x4 outputs (4x
 * fewer), with transforms of small integer coefficients that read 16 (input)
 * and 25 (output) elements per element written, and a larger rounding error
 * (the points 0, ±1, ±2 of its polynomials).
 *
 * The dispatchers (shape_infer.c, ref_eval.c, te.c) send both ops here. */
#ifndef KN_WINOGRAD_H
#define KN_WINOGRAD_H

#include "ir/graph/graph.h"
#include "ir/ref/ref_eval.h"

struct kn_infer;
struct kn_te_ctx;
struct kn_te_tensor;

/* The transform matrices of F(m x m, 3x3), row-major: Bᵀ is a x a, G a x 3,
 * Aᵀ m x a. */
typedef struct kn_winograd_mats {
  int m, a;
  const double *bt, *g, *at;
} kn_winograd_mats;
/* NULL unless m is 2 or 4. */
const kn_winograd_mats *kn_winograd_mats_of(int64_t m);

bool kn_winograd_op(kn_op op);
/* Tiles along one spatial dim of `out` outputs. */
static inline int64_t kn_winograd_tiles(int64_t out, int64_t m) { return (out + m - 1) / m; }

/* kiln.WinogradInput(X [N, H, W, C]; pads = [top, left, bottom, right], tile = m) ->
 *   V [N, a², th·tw, C], oh = H + top + bottom - 2 (ow likewise).
 * kiln.WinogradOutput(M [N, a², th·tw, K]; output_hw = [oh, ow], tile = m) -> Y [N, oh, ow, K]. */
int kn_infer_winograd(struct kn_infer *c);
int kn_ref_winograd(kn_ref_call *c);
struct kn_te_tensor *kn_te_winograd(struct kn_te_ctx *c, const kn_node *n, struct kn_te_tensor **in,
                                    kn_diag *d);

/* The spatial geometry of a transform node, from its attributes and its
 * input's shape: the matrices of its tile size, output rows/cols (oh, ow),
 * input rows/cols (h, w, for WinogradInput; 0 otherwise) and the pads
 * (WinogradInput). False when an attribute is missing or out of range. */
typedef struct kn_winograd_geom {
  const kn_winograd_mats *mats;
  int64_t oh, ow, th, tw, h, w, pad_top, pad_left;
} kn_winograd_geom;
bool kn_winograd_geom_of(const kn_node *n, const kn_shape *in, kn_winograd_geom *geom);

#endif
