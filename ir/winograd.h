/* winograd.h — Winograd F(2x2, 3x3) convolution: the two transform ops
 * (kiln.WinogradInput, kiln.WinogradOutput) that ir/pass_winograd.c puts
 * around a batched MatMul in place of a 3x3 stride-1 kiln.ConvNHWC.
 *
 * For a 3x3 filter g and a 4x4 input tile d (Lavin & Gray 2015), a 2x2 tile
 * of the convolution's output is
 *   Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A
 * with the constant matrices of winograd.c. Over the whole image:
 *   V[n, e, t, c] = (Bᵀ d_t,c B)[e]            kiln.WinogradInput (16 elements per tile)
 *   U[e, c, k]    = (G g_c,k Gᵀ)[e]            the weights, transformed at compile time
 *   M[n, e, t, k] = sum_c V[n, e, t, c] U[e, c, k]   MatMul (16 GEMMs, one per e)
 *   Y[n, y, x, k] = (Aᵀ M_t,k A)[y % 2, x % 2]  kiln.WinogradOutput, t = tile of (y, x)
 * e = 4 ξ + ν indexes the 4x4 transformed tile; tile t = ty · tw + tx covers
 * output rows 2ty, 2ty+1 and columns 2tx, 2tx+1, so the tiles number
 * th = ceil(oh / 2) by tw = ceil(ow / 2); a ragged last tile reads zeros past
 * the input and its extra outputs are never written. F(2x2, 3x3) does 16
 * multiplies per 2x2 outputs and input channel where the direct convolution
 * does 36 (2.25x fewer); the transforms are additions only.
 *
 * The dispatchers (shape_infer.c, ref_eval.c, te.c) send both ops here. */
#ifndef KN_WINOGRAD_H
#define KN_WINOGRAD_H

#include "graph.h"
#include "ref_eval.h"

struct kn_infer;
struct kn_te_ctx;
struct kn_te_tensor;

/* The transform matrices of F(2x2, 3x3). */
extern const double kn_winograd_bt[4][4]; /* Bᵀ */
extern const double kn_winograd_g[4][3];  /* G */
extern const double kn_winograd_at[2][4]; /* Aᵀ */

bool kn_winograd_op(kn_op op);
/* Tiles along one spatial dim of `out` outputs. */
static inline int64_t kn_winograd_tiles(int64_t out) { return (out + 1) / 2; }

/* kiln.WinogradInput(X [N, H, W, C]; pads = [top, left, bottom, right]) ->
 *   V [N, 16, th·tw, C], oh = H + top + bottom - 2 (ow likewise).
 * kiln.WinogradOutput(M [N, 16, th·tw, K]; output_hw = [oh, ow]) -> Y [N, oh, ow, K]. */
int kn_infer_winograd(struct kn_infer *c);
int kn_ref_winograd(kn_ref_call *c);
struct kn_te_tensor *kn_te_winograd(struct kn_te_ctx *c, const kn_node *n, struct kn_te_tensor **in,
                                    kn_diag *d);

/* The spatial geometry of a transform node, from its attributes and its
 * input's shape: output rows/cols (oh, ow), input rows/cols (h, w, for
 * WinogradInput; 0 otherwise) and the pads (WinogradInput). False when an
 * attribute is missing or out of range. */
typedef struct kn_winograd_geom {
  int64_t oh, ow, th, tw, h, w, pad_top, pad_left;
} kn_winograd_geom;
bool kn_winograd_geom_of(const kn_node *n, const kn_shape *in, kn_winograd_geom *geom);

#endif
