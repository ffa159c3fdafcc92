/* pass_explicit_pad.c — pads the input of windowed NHWC convolutions in a
 * separate Pad node, so the convolution itself reads without bounds checks.
 *
 * Requires: shapes inferred, toposorted, kiln.ConvNHWC with explicit pads.
 * Guarantees: every kiln.ConvNHWC with a window larger than 1x1 and at
 * least 8 input or 8 output channels per group has all pads 0 and reads a
 * zero-bordered copy of its input made by a Pad node; shapes of new values
 * are set; results are unchanged.
 *
 * Why: a padded read in the conv's inner loop is a masked scalar load that
 * cannot be folded into the FMA's broadcast operand and costs an extra
 * shuffle per multiply-add pair; copying the activation once with its border
 * costs one pass over memory, a small fraction of the convolution. */
#include <string.h>

#include "ir/passes/passes.h"

static kn_attr *find_attr(kn_node *n, const char *name) {
  for (int i = 0; i < n->n_attr; i++)
    if (!strcmp(n->attrs[i].name, name)) return &n->attrs[i];
  return NULL;
}

int kn_pass_explicit_pad(kn_graph *g, kn_diag *d) {
  (void)d;
  int n_nodes = g->n_nodes;
  for (int i = 0; i < n_nodes; i++) {
    kn_node *n = &g->nodes[i];
    if (n->dead || n->op != KN_OP_CONV_NHWC || n->in[0] < 0 || n->in[1] < 0) continue;
    kn_attr *pads = find_attr(n, "pads");
    const kn_value *w = &g->values[n->in[1]];
    if (!pads || pads->kind != KN_ATTR_INTS || pads->n != 4 || w->shape.rank != 4) continue;
    /* 1x1 windows read no border; depthwise windows (few input and few
     * output channels per group) do little work per element read, so copying
     * the input would cost more than it saves. A stem conv (3 input channels,
     * 64 outputs) does 64 multiply-adds per element read and per tap: its
     * in-loop border checks cost far more than the copy (resnet50's conv1;
     * docs/architecture.md, "explicit_pad"). */
    int64_t group = kn_node_attr_int(n, "group", 1);
    int64_t out_per_group = group > 0 ? w->shape.dim[3] / group : 0;
    if ((w->shape.dim[0] == 1 && w->shape.dim[1] == 1) || (w->shape.dim[2] < 8 && out_per_group < 8)) continue;
    const int64_t *p = pads->ints;
    if (!p[0] && !p[1] && !p[2] && !p[3]) continue;
    /* ONNX Pad layout: all begins, then all ends, over [N, H, W, C] */
    int64_t pad_ints[8] = {0, p[0], p[1], 0, 0, p[2], p[3], 0};
    const kn_value *x = &g->values[n->in[0]];
    kn_shape padded = x->shape;
    padded.dim[1] += p[0] + p[2];
    padded.dim[2] += p[1] + p[3];
    kn_shape eight = {.rank = 1, .dim = {8}};
    const char *base = g->nodes[i].name;
    int pads_v = kn_pass_new_const(g, base, ".pads", KN_DT_I64, &eight, pad_ints);
    int out_v = kn_pass_new_value(g, base, ".padded", g->values[g->nodes[i].in[0]].dtype, &padded);
    int in[2] = {g->nodes[i].in[0], pads_v};
    kn_graph_add_node(g, KN_OP_PAD, kn_arena_printf(&g->arena, "%s.pad", base), in, 2, &out_v, 1);
    n = &g->nodes[i]; /* nodes may have moved */
    n->in[0] = out_v;
    pads = find_attr(n, "pads");
    pads->ints = KN_NEW_ARRAY(&g->arena, int64_t, 4);
  }
  return kn_graph_toposort(g, d);
}
