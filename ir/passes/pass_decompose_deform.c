/* pass_decompose_deform.c — DeformConv (opset 19 / 22) as primitive ops (a
 * rewrite of ir/passes/pass_decompose.c; builder in rewrite.h). 2-D only.
 *
 * Semantics: for output position p = (i, j) and kernel tap k = (a, b), input
 * channel c of offset group o = c / (C / offset_group) samples X[n, c]
 * bilinearly at
 *     y = i * stride_h - pad_top  + a * dilation_h + offset[n, o, k, 0, i, j]
 *     x = j * stride_w - pad_left + b * dilation_w + offset[n, o, k, 1, i, j]
 * (offset viewed as [N, offset_group, kh, kw, 2, oh, ow]; neighbours outside
 * the image read 0, as GridSample with zeros padding and align_corners = 1,
 * which the ONNX reference uses), times mask[n, o, k, i, j] (mask viewed as
 * [N, offset_group, kh, kw, oh, ow]; 1 when omitted). Y is the grouped
 * contraction of these samples with W, plus B.
 *
 * The rewrite (K = kh * kw taps, P = oh * ow positions, og = offset_group):
 *   - offset reshaped [N, og, K, 2, P]; dy, dx = Gather of entry 0 / 1 on
 *     axis 3 -> [N, og, K, P]; y = base_y + dy, x = base_x + dx with constant
 *     [K, P] grids of the undeformed tap positions;
 *   - y0 = Floor(y); for neighbour row u in {0, 1}: valid = 0 <= y0 + u <= H-1,
 *     weight Where(valid, u ? y - y0 : 1 - (y - y0), 0), row index
 *     Cast<int64>(Where(valid, y0 + u, 0)) — an invalid (or NaN) coordinate
 *     reads element 0 with weight 0, so no gather leaves the image; columns
 *     alike; the mask multiplies the row weights;
 *   - the channels are split into Q = lcm(og, group) gather groups of
 *     Cq = C / Q channels (each inside one offset group and one conv group;
 *     r = Q / group of them per conv group): X is transposed to rows of Cq
 *     channels per pixel, [N, group, r*H*W, Cq];
 *   - per neighbour (u, v): the flat index row * W + col (plus the gather
 *     group's image base) and the weight wy * wx are brought from
 *     [N, og, K, P] (Expanded over the gather groups of an offset group) to
 *     the order [N, group, P*r*K, 1]; GatherND (batch_dims 2) picks rows of X,
 *     times the weights; the four summed are the columns [N, group, P, r*K*Cq];
 *   - Y = MatMul(columns, W transposed to [group, r*K*Cq, M/group]) + B,
 *     transposed back to [N, M, oh, ow] (one group: a plain [N, P, C*K] x
 *     [C*K, M] MatMul). The per-tap tensors (Cq times smaller than the
 *     columns) are the ones reordered; the columns are gathered once,
 *     already in the MatMul's layout.
 * float16 / bfloat16 compute in float32 and cast back.
 */
#include "ir/passes/decompose.h"
#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"

/* Largest K * P (elements of each constant tap grid) and C * K * P (sampled
 * columns per image) accepted. */
#define DEFORM_MAX_GRID ((int64_t)1 << 26)
#define DEFORM_MAX_COLUMNS ((int64_t)1 << 40)

/* Whether dim i of a and dim j of b are the same (value and batch symbol). */
static bool same_dim(const kn_shape *a, int i, const kn_shape *b, int j) {
  return a->dim[i] == b->dim[j] && ((a->batch_mask >> i) & 1u) == ((b->batch_mask >> j) & 1u);
}

/* The geometry of a checked DeformConv. */
typedef struct deform_geom {
  int64_t chans, height, width;  /* X: [N, C, H, W] */
  int64_t out_chans, kh, kw;     /* W: [M, C/group, kh, kw] */
  int64_t group, offset_group;
  kn_window win;                 /* strides, dilations, pads, output size */
} deform_geom;

/* Checks ranks, dtypes and the attributes against the input shapes. */
static int deform_check(kn_rw *c, deform_geom *gm) {
  const kn_node *n = &c->g->nodes[c->node];
  const kn_value *xv = kn_rw_val(c, kn_rw_in(c, 0)), *wv = kn_rw_val(c, kn_rw_in(c, 1));
  const kn_value *ov = kn_rw_val(c, kn_rw_in(c, 2));
  int b = kn_rw_in(c, 3), mask = kn_rw_in(c, 4);
  kn_dtype t = xv->dtype;
  if (t != KN_DT_F32 && t != KN_DT_F64 && t != KN_DT_F16 && t != KN_DT_BF16)
    return kn_rw_fail(c, "input X must be float16, bfloat16, float or double, got %s", kn_dtype_name(t));
  static const char *const names[] = {"X", "W", "offset", "B", "mask"};
  for (int k = 1; k < 5; k++) {
    int v = kn_rw_in(c, k);
    if (v >= 0 && kn_rw_val(c, v)->dtype != t)
      return kn_rw_fail(c, "input %s is %s, expected X's dtype %s", names[k], kn_dtype_name(kn_rw_val(c, v)->dtype),
                        kn_dtype_name(t));
  }
  const kn_shape *xs = &xv->shape, *ws = &wv->shape, *os = &ov->shape;
  if (xs->rank != 4)
    return kn_rw_fail(c, "only 2-D DeformConv is supported: X must be [N,C,H,W], got rank %d", xs->rank);
  if (xs->batch_mask & ~1u) return kn_rw_fail(c, "input X must be [N,C,H,W] with only N symbolic");
  if (ws->rank != 4 || ws->batch_mask) return kn_rw_fail(c, "input W must be a fixed [M,C/group,kH,kW]");
  if (os->rank != 4 || !same_dim(os, 0, xs, 0))
    return kn_rw_fail(c, "input offset must be [N,2*offset_group*kH*kW,oH,oW] with X's batch");
  gm->chans = xs->dim[1], gm->height = xs->dim[2], gm->width = xs->dim[3];
  gm->out_chans = ws->dim[0], gm->kh = ws->dim[2], gm->kw = ws->dim[3];
  if (gm->chans < 1 || gm->height < 1 || gm->width < 1 || gm->out_chans < 1)
    return kn_rw_fail(c, "inputs X and W must not be empty (X has %lld channels of %lldx%lld, W %lld filters)",
                      (long long)gm->chans, (long long)gm->height, (long long)gm->width, (long long)gm->out_chans);
  gm->group = kn_node_attr_int(n, "group", 1);
  gm->offset_group = kn_node_attr_int(n, "offset_group", 1);
  if (gm->group < 1 || gm->chans % gm->group || ws->dim[1] != gm->chans / gm->group)
    return kn_rw_fail(c, "attribute 'group' = %lld does not split %lld input channels into W's %lld per group",
                      (long long)gm->group, (long long)gm->chans, (long long)ws->dim[1]);
  if (gm->out_chans % gm->group)
    return kn_rw_fail(c, "attribute 'group' = %lld does not divide W's %lld output channels", (long long)gm->group,
                      (long long)gm->out_chans);
  if (gm->offset_group < 1 || gm->chans % gm->offset_group)
    return kn_rw_fail(c, "attribute 'offset_group' = %lld does not divide %lld input channels",
                      (long long)gm->offset_group, (long long)gm->chans);
  int nk = 0;
  const int64_t *ks = kn_node_attr_ints(n, "kernel_shape", &nk);
  if (ks && (nk != 2 || ks[0] != gm->kh || ks[1] != gm->kw))
    return kn_rw_fail(c, "attribute 'kernel_shape' does not match W's kernel %lldx%lld", (long long)gm->kh,
                      (long long)gm->kw);
  int64_t in_hw[2] = {gm->height, gm->width}, kernel[2] = {gm->kh, gm->kw};
  if (kn_window_resolve(n, 2, in_hw, kernel, false, &gm->win, c->d) < 0) return -1;
  /* the guards keep every product below (columns, offset channels: og <= C)
   * far from overflow */
  int64_t taps, positions;
  if (__builtin_mul_overflow(gm->kh, gm->kw, &taps) ||
      __builtin_mul_overflow(gm->win.out[0], gm->win.out[1], &positions) || taps > DEFORM_MAX_GRID / positions)
    return kn_rw_fail(c, "kernel taps x output positions (%lldx%lld x %lldx%lld) is too large", (long long)gm->kh,
                      (long long)gm->kw, (long long)gm->win.out[0], (long long)gm->win.out[1]);
  if (gm->chans > DEFORM_MAX_COLUMNS / (taps * positions))
    return kn_rw_fail(c, "the sampled columns (%lld channels x %lld taps x %lld positions) are too large",
                      (long long)gm->chans, (long long)taps, (long long)positions);
  if (os->dim[1] != 2 * gm->offset_group * taps || os->dim[2] != gm->win.out[0] || os->dim[3] != gm->win.out[1])
    return kn_rw_fail(c,
                      "input offset must be [N,%lld,%lld,%lld] (2*offset_group*kH*kW, output size), "
                      "got [%lld,%lld,%lld]",
                      (long long)(2 * gm->offset_group * taps), (long long)gm->win.out[0], (long long)gm->win.out[1],
                      (long long)os->dim[1], (long long)os->dim[2], (long long)os->dim[3]);
  if (b >= 0) {
    const kn_shape *bs = &kn_rw_val(c, b)->shape;
    if (bs->rank != 1 || bs->batch_mask || bs->dim[0] != gm->out_chans)
      return kn_rw_fail(c, "input B must be [%lld]", (long long)gm->out_chans);
  }
  if (mask >= 0) {
    const kn_shape *ms = &kn_rw_val(c, mask)->shape;
    if (ms->rank != 4 || !same_dim(ms, 0, xs, 0) || ms->dim[1] != gm->offset_group * taps ||
        ms->dim[2] != gm->win.out[0] || ms->dim[3] != gm->win.out[1])
      return kn_rw_fail(c, "input mask must be [N,%lld,%lld,%lld] (offset_group*kH*kW, output size)",
                        (long long)(gm->offset_group * taps), (long long)gm->win.out[0], (long long)gm->win.out[1]);
  }
  return 0;
}

/* The constant [K, P] grid of undeformed tap positions along spatial axis
 * `axis` (0 = rows, 1 = columns). */
static int tap_grid(kn_rw *c, kn_dtype t, const deform_geom *gm, int axis) {
  int64_t taps = gm->kh * gm->kw, ow = gm->win.out[1], positions = gm->win.out[0] * ow;
  kn_shape s = {.rank = 2, .dim = {taps, positions}};
  int v = kn_rw_const(c, t, &s, NULL);
  void *data = c->g->values[v].data;
  for (int64_t k = 0; k < taps; k++)
    for (int64_t p = 0; p < positions; p++) {
      int64_t out = axis == 0 ? p / ow : p % ow, tap = axis == 0 ? k / gm->kw : k % gm->kw;
      double pos = (double)(out * gm->win.stride[axis] - gm->win.pad_begin[axis] + tap * gm->win.dilation[axis]);
      kn_ref_store(t, data, k * positions + p, pos);
    }
  return v;
}

/* The two bilinear neighbours along one axis of sampling coordinate `coord`
 * (axis size `size`): their weights (0 outside the image) and int64 indices
 * (0 outside the image). */
static void neighbours(kn_rw *c, kn_dtype t, int coord, int64_t size, int weight[2], int index[2]) {
  int lo = kn_rw_un(c, KN_OP_FLOOR, coord);
  int frac = kn_rw_bin(c, KN_OP_SUB, coord, lo);
  int zero = kn_rw_scalar(c, t, 0), one = kn_rw_scalar(c, t, 1), last = kn_rw_scalar(c, t, (double)(size - 1));
  for (int r = 0; r < 2; r++) {
    int pos = r ? kn_rw_bin(c, KN_OP_ADD, lo, one) : lo;
    int valid = kn_rw_bin(c, KN_OP_AND, kn_rw_bin(c, KN_OP_GREATER_OR_EQUAL, pos, zero),
                          kn_rw_bin(c, KN_OP_LESS_OR_EQUAL, pos, last));
    int w = r ? frac : kn_rw_bin(c, KN_OP_SUB, one, frac);
    int in_w[3] = {valid, w, zero}, in_i[3] = {valid, pos, zero};
    weight[r] = kn_rw_op(c, KN_OP_WHERE, in_w, 3);
    index[r] = kn_rw_cast(c, kn_rw_op(c, KN_OP_WHERE, in_i, 3), KN_DT_I64);
  }
}

/* Gather groups: the channels are split into Q = lcm(offset_group, group)
 * groups of Cq = C / Q channels, each inside one offset group and one conv
 * group; conv group g holds the r = Q / group gather groups g*r .. g*r+r-1,
 * offset group o the t = Q / offset_group gather groups o*t .. o*t+t-1. */
typedef struct gather_groups {
  int64_t group, per_group;  /* G, r */
  int64_t per_offset_group;  /* t */
} gather_groups;

static int64_t gcd(int64_t a, int64_t b) { return b ? gcd(b, a % b) : a; }

static gather_groups gather_groups_of(const deform_geom *gm) {
  int64_t q = gm->offset_group / gcd(gm->offset_group, gm->group) * gm->group; /* divides C */
  return (gather_groups){.group = gm->group, .per_group = q / gm->group, .per_offset_group = q / gm->offset_group};
}

/* A per-offset-group tensor [N, og, K, P] (flat indices or weights) in the
 * order of the gathered rows: [N, G, P*r*K, 1]; indices get their gather
 * group's image_base ([r, 1, 1], -1 when r = 1). */
static int to_gather_order(kn_rw *c, const deform_geom *gm, const gather_groups *gg, int v, int image_base) {
  int64_t og = gm->offset_group, taps = gm->kh * gm->kw, positions = gm->win.out[0] * gm->win.out[1];
  if (gg->per_offset_group > 1) {
    const int64_t v5[5] = {0, og, 1, taps, positions}, spread[5] = {1, og, gg->per_offset_group, taps, positions};
    v = kn_rw_bin(c, KN_OP_EXPAND, kn_rw_reshape(c, v, v5, 5), kn_rw_ints(c, spread, 5));
  }
  const int64_t g5[5] = {0, gg->group, gg->per_group, taps, positions}, perm[5] = {0, 1, 4, 2, 3};
  const int64_t flat[4] = {0, gg->group, positions * gg->per_group * taps, 1};
  v = kn_rw_reshape(c, v, g5, 5);
  if (image_base >= 0) v = kn_rw_bin(c, KN_OP_ADD, v, image_base);
  return kn_rw_reshape(c, kn_rw_transpose(c, v, perm, 5), flat, 4);
}

static int deform_conv(kn_rw *c) {
  deform_geom gm;
  if (deform_check(c, &gm) < 0) return -1;
  kn_dtype t = kn_rw_val(c, kn_rw_in(c, 0))->dtype;
  kn_dtype ct = t == KN_DT_F64 ? KN_DT_F64 : KN_DT_F32; /* computing dtype */
  int64_t og = gm.offset_group, taps = gm.kh * gm.kw;
  int64_t oh = gm.win.out[0], ow = gm.win.out[1], positions = oh * ow;
  int x = kn_rw_cast(c, kn_rw_in(c, 0), ct), w = kn_rw_cast(c, kn_rw_in(c, 1), ct);
  int off = kn_rw_cast(c, kn_rw_in(c, 2), ct);

  /* sampling coordinates [N, og, K, P] */
  const int64_t off5[5] = {0, og, taps, 2, positions}, per_tap[4] = {0, og, taps, positions};
  off = kn_rw_reshape(c, off, off5, 5);
  int coord[2];
  for (int axis = 0; axis < 2; axis++) {
    int delta = kn_rw_bin(c, KN_OP_GATHER, off, kn_rw_scalar(c, KN_DT_I64, axis));
    kn_rw_attr_int(c, "axis", 3);
    coord[axis] = kn_rw_bin(c, KN_OP_ADD, tap_grid(c, ct, &gm, axis), delta);
  }
  int wy[2], iy[2], wx[2], ix[2];
  neighbours(c, ct, coord[0], gm.height, wy, iy);
  neighbours(c, ct, coord[1], gm.width, wx, ix);
  int mask = kn_rw_in(c, 4), row_stride = kn_rw_scalar(c, KN_DT_I64, (double)gm.width);
  if (mask >= 0) mask = kn_rw_reshape(c, kn_rw_cast(c, mask, ct), per_tap, 4);
  for (int r = 0; r < 2; r++) {
    if (mask >= 0) wy[r] = kn_rw_bin(c, KN_OP_MUL, wy[r], mask);
    iy[r] = kn_rw_bin(c, KN_OP_MUL, iy[r], row_stride);
  }

  /* X as rows of Cq channels per pixel and gather group: [N, G, r*H*W, Cq] */
  const gather_groups gg = gather_groups_of(&gm);
  int64_t hw = gm.height * gm.width, cq = gm.chans / (gg.group * gg.per_group);
  const int64_t x5[5] = {0, gg.group, gg.per_group, cq, hw}, x_perm[5] = {0, 1, 2, 4, 3};
  const int64_t x4[4] = {0, gg.group, gg.per_group * hw, cq};
  int rows = kn_rw_reshape(c, kn_rw_transpose(c, kn_rw_reshape(c, x, x5, 5), x_perm, 5), x4, 4);
  /* index offset of each gather group's image inside its conv group's rows */
  int image_base = -1;
  if (gg.per_group > 1) {
    kn_shape bs = {.rank = 3, .dim = {gg.per_group, 1, 1}};
    image_base = kn_rw_const(c, KN_DT_I64, &bs, NULL);
    for (int64_t j = 0; j < gg.per_group; j++) kn_ref_store_int(KN_DT_I64, c->g->values[image_base].data, j, j * hw);
  }

  /* per neighbour: GatherND of the rows, times the weight; summed */
  int cols = -1;
  for (int r = 0; r < 2; r++)
    for (int s = 0; s < 2; s++) {
      int index = to_gather_order(c, &gm, &gg, kn_rw_bin(c, KN_OP_ADD, iy[r], ix[s]), image_base);
      int weight = to_gather_order(c, &gm, &gg, kn_rw_bin(c, KN_OP_MUL, wy[r], wx[s]), -1);
      int pick = kn_rw_bin(c, KN_OP_GATHER_ND, rows, index);
      kn_rw_attr_int(c, "batch_dims", 2);
      int term = kn_rw_bin(c, KN_OP_MUL, pick, weight);
      cols = cols < 0 ? term : kn_rw_bin(c, KN_OP_ADD, cols, term);
    }

  /* the grouped contraction: [N, G, P, r*K*Cq] x [G, r*K*Cq, M/G] */
  int64_t depth = gg.per_group * taps * cq, m_per = gm.out_chans / gg.group;
  const int64_t w5[5] = {gg.group, m_per, gg.per_group, cq, taps}, w_perm[5] = {0, 2, 4, 3, 1};
  int wt = kn_rw_transpose(c, kn_rw_reshape(c, w, w5, 5), w_perm, 5);
  int y, b = kn_rw_in(c, 3);
  if (b >= 0) b = kn_rw_cast(c, b, ct);
  if (gg.group == 1) { /* plain [N, P, K*C] x [K*C, M] */
    const int64_t cols3[3] = {0, positions, depth}, w2[2] = {depth, gm.out_chans}, y_perm[3] = {0, 2, 1};
    y = kn_rw_bin(c, KN_OP_MATMUL, kn_rw_reshape(c, cols, cols3, 3), kn_rw_reshape(c, wt, w2, 2));
    if (b >= 0) y = kn_rw_bin(c, KN_OP_ADD, y, b);
    y = kn_rw_transpose(c, y, y_perm, 3);
  } else {
    const int64_t cols4[4] = {0, gg.group, positions, depth}, w3[3] = {gg.group, depth, m_per};
    const int64_t b3[3] = {gg.group, 1, m_per}, y_perm[4] = {0, 1, 3, 2};
    y = kn_rw_bin(c, KN_OP_MATMUL, kn_rw_reshape(c, cols, cols4, 4), kn_rw_reshape(c, wt, w3, 3));
    if (b >= 0) y = kn_rw_bin(c, KN_OP_ADD, y, kn_rw_reshape(c, b, b3, 3));
    y = kn_rw_transpose(c, y, y_perm, 4);
  }
  const int64_t y4[4] = {0, gm.out_chans, oh, ow};
  y = kn_rw_reshape(c, y, y4, 4);
  if (ct != t) {
    y = kn_rw_un(c, KN_OP_CAST, y);
    kn_rw_attr_int(c, "to", kn_dtype_to_onnx(t));
  }
  kn_rw_output(c, 0, y);
  return 0;
}

int kn_decompose_deform(kn_rw *c) {
  switch (c->g->nodes[c->node].op) {
  case KN_OP_DEFORM_CONV: return deform_conv(c);
  default: return 1;
  }
}
