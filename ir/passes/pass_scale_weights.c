/* pass_scale_weights.c — a per-channel scale of a convolution's input moves
 * into its weights.
 *
 * Requires: shapes inferred, toposorted, kiln.ConvNHWC (after kn_pass_layout
 * and kn_pass_explicit_pad: a padded conv's input is a Pad, left alone).
 * Guarantees: a kiln.ConvNHWC with group 1 and constant f32 weights
 * W[KH,KW,C,M] whose input x = Mul(y, s) is read by nothing else, s holding
 * one scale per input channel, reads y and the weights Mul(W, s as [C, 1])
 * instead, when those are no larger than x (KH*KW*C*M against H*W*C per
 * sample) or s is a constant. A scale per sample and channel ([N,1,1,C], with x's
 * batch N: squeeze-and-excitation) gives weights per sample, [N,KH,KW,C,M]
 * (kiln.ConvNHWC takes them); a constant one folds into the weights
 * (kn_pass_fold_constants). Results are unchanged up to rounding (x*s*w
 * computed as x*(w*s)); shapes of new values are set.
 *
 * Why: a squeeze-and-excitation block (efficientnet) scales the activation
 * by a run-time vector before a 1x1 projection. The scale cannot fuse into
 * the conv that produced the activation (s depends on its global average)
 * nor into the projection (contractions do not inline producers of their
 * data input), so it ran as its own kernel: one read and one write of the
 * activation. Scaling the weights instead touches KH*KW*C*M elements, far
 * fewer in the early, large-image layers, and the scaling inlines into the
 * conv's kernel (schedule/fuse.c). */
#include <stdlib.h>

#include "ir/passes/passes.h"
#include "ir/shape/shape_infer.h"

/* s holds one scale per input channel of x: [.., 1, C], the same for every
 * sample (*per_sample false), or [N, 1, 1, C] with x's batch dim N (symbolic,
 * or fixed above 1). */
static bool per_channel(const kn_value *s, const kn_value *x, bool *per_sample) {
  int r = s->shape.rank;
  unsigned sb = s->shape.batch_mask;
  if (r < 1 || r > 4 || s->dtype != KN_DT_F32 || s->shape.dim[r - 1] != x->shape.dim[3] || (sb & ~1u) ||
      (sb && r != 4))
    return false;
  *per_sample = r == 4 && (sb || s->shape.dim[0] != 1);
  if (*per_sample && (s->shape.dim[0] != x->shape.dim[0] || sb != (x->shape.batch_mask & 1u))) return false;
  for (int k = *per_sample; k < r - 1; k++)
    if (s->shape.dim[k] != 1) return false;
  return true;
}

/* The weights are worth scaling instead of the activation x: scaling x is a
 * kernel that writes x * s and the conv reads it back, while W * s inlines
 * into the conv (schedule/fuse.c can_inline_weights: one multiply per weight
 * load of the register tile, the constant W packed as any conv's weights),
 * which pays off while the weights are no larger than x. As a kernel of
 * their own the weights' scaling read the constant from memory with no
 * compute to hide it behind; inlined, the pair is one kernel, faster than
 * the conv with the activation scaled. Scaling the weights of every SE
 * projection (weights up to 4x the activation) timed the same as this rule
 * (docs/architecture.md, "scale_weights"). */
static bool cheaper(const kn_value *x, const kn_value *w) {
  int64_t act = 1, wts = 1; /* per sample */
  for (int k = 1; k < 4; k++) act *= x->shape.dim[k];
  for (int k = 0; k < 4; k++) wts *= w->shape.dim[k];
  return wts <= act;
}

/* Conv n's input is Mul(y, s) as the opening comment says: the index of s in
 * the Mul's inputs (y is the other), or -1. A constant s folds into the
 * weights at compile time, whatever their size. */
static int scaled_input(const kn_graph *g, const kn_node *n, const int *uses, bool *per_sample) {
  int x = n->in[0], w = n->in[1];
  if (x < 0 || w < 0 || uses[x] != 1 || kn_node_attr_int(n, "group", 1) != 1) return -1;
  const kn_value *xv = &g->values[x], *wv = &g->values[w];
  if (!wv->data || wv->dtype != KN_DT_F32 || wv->shape.rank != 4 || xv->shape.rank != 4 ||
      xv->dtype != KN_DT_F32 || wv->shape.dim[2] != xv->shape.dim[3])
    return -1;
  int p = xv->producer;
  if (p < 0 || g->nodes[p].dead || g->nodes[p].op != KN_OP_MUL || g->nodes[p].n_in != 2) return -1;
  const kn_node *m = &g->nodes[p];
  for (int k = 0; k < 2; k++) {
    int y = m->in[1 - k], s = m->in[k];
    if (y >= 0 && s >= 0 && kn_shape_equal(&g->values[y].shape, &xv->shape) && g->values[y].dtype == KN_DT_F32 &&
        per_channel(&g->values[s], xv, per_sample) && (g->values[s].data || cheaper(xv, wv)))
      return k;
  }
  return -1;
}

int kn_pass_scale_weights(kn_graph *g, kn_diag *d) {
  int *uses = malloc(sizeof(int) * ((size_t)g->n_values + 1));
  KN_ASSERT(uses, "out of memory");
  kn_pass_count_uses(g, uses);
  int n_nodes = g->n_nodes;
  for (int i = 0; i < n_nodes; i++) {
    if (g->nodes[i].dead || g->nodes[i].op != KN_OP_CONV_NHWC || g->nodes[i].n_in < 2) continue;
    bool per_sample;
    int k = scaled_input(g, &g->nodes[i], uses, &per_sample);
    if (k < 0) continue;
    int mul = g->values[g->nodes[i].in[0]].producer;
    int y = g->nodes[mul].in[1 - k], s = g->nodes[mul].in[k], w = g->nodes[i].in[1];
    const char *base = g->nodes[i].name;
    /* s as [C, 1], or per sample [N, 1, 1, C, 1]: W [KH, KW, C, M] times it
     * broadcasts to the weights, [KH, KW, C, M] or [N, KH, KW, C, M] */
    int64_t c = g->values[w].shape.dim[2], shape_or_axis[2] = {c, 1};
    kn_shape ss = {.rank = 2, .dim = {c, 1}}, arg_shape = {.rank = 1, .dim = {2}}, ws;
    if (per_sample) {
      ss = g->values[s].shape;
      ss.dim[ss.rank++] = 1;
      shape_or_axis[0] = 4;
      arg_shape.dim[0] = 1;
    }
    bool ok = kn_shape_broadcast(&g->values[w].shape, &ss, &ws, NULL);
    KN_ASSERT(ok, "scaled weights do not broadcast");
    int arg = kn_pass_new_const(g, base, per_sample ? ".scale_axes" : ".scale_shape", KN_DT_I64, &arg_shape,
                                shape_or_axis);
    int s_col = kn_pass_new_value(g, base, ".scale", KN_DT_F32, &ss);
    int view_in[2] = {s, arg};
    kn_graph_add_node(g, per_sample ? KN_OP_UNSQUEEZE : KN_OP_RESHAPE, kn_arena_printf(&g->arena, "%s.scale", base),
                      view_in, 2, &s_col, 1);
    int w_scaled = kn_pass_new_value(g, base, ".w_scaled", KN_DT_F32, &ws);
    int mul_in[2] = {w, s_col};
    kn_graph_add_node(g, KN_OP_MUL, kn_arena_printf(&g->arena, "%s.scale_w", base), mul_in, 2, &w_scaled, 1);
    kn_node *n = &g->nodes[i]; /* nodes may have moved */
    n->in[0] = y;
    n->in[1] = w_scaled;
    kn_pass_kill_node(g, mul);
  }
  free(uses);
  return kn_graph_toposort(g, d);
}
