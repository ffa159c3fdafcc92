/* pass_fold_conv_bn.c — BatchNormalization (inference) folding.
 *
 * Requires: shapes inferred, nodes toposorted.
 * Guarantees:
 *  - Conv -> BN, where the Conv output feeds only the BN, the Conv weight and
 *    bias (if any) and the BN parameters are float32 constants: the BN is
 *    removed and the Conv computes its output with weight W[m]*s[m] and bias
 *    (b[m] - mean[m])*s[m] + beta[m], s = gamma / sqrt(var + eps). Weights
 *    used only by this Conv are scaled in place (no copy of big tensors).
 *  - any other BN with float32 constant parameters becomes
 *    Add(Mul(X, s), beta - mean*s) with constants shaped [C,1,...,1], which
 *    broadcast along the channel axis of NCHW data.
 *  - BNs with non-constant parameters stay. Shapes stay valid (new values are
 *    typed); nodes are re-sorted. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/passes/passes.h"
#include "ir/passes/rewrite.h"
#include "ir/ref/ref_eval.h"

/* Per-channel scale s and shift t (y = x*s + t) of BN node bn, or false when
 * its parameters are not float32 constants of C entries. */
static bool bn_affine(const kn_graph *g, const kn_node *bn, int64_t chans, double *s, double *t) {
  for (int k = 1; k < 5; k++) {
    if (k >= bn->n_in || bn->in[k] < 0) return false;
    const kn_value *p = &g->values[bn->in[k]];
    if (!p->data || p->dtype != KN_DT_F32 || kn_shape_numel_max(&p->shape, 1) != chans) return false;
  }
  const float *gamma = g->values[bn->in[1]].data, *beta = g->values[bn->in[2]].data;
  const float *mean = g->values[bn->in[3]].data, *var = g->values[bn->in[4]].data;
  double eps = kn_node_attr_float(bn, "epsilon", 1e-5f);
  for (int64_t c = 0; c < chans; c++) {
    s[c] = (double)gamma[c] / sqrt((double)var[c] + eps);
    t[c] = (double)beta[c] - (double)mean[c] * s[c];
  }
  return true;
}

/* Folds BN node b into Conv node p when the pattern applies. */
static bool fold_into_conv(kn_graph *g, int b, int p, const int *uses, const double *s, const double *t) {
  const kn_node *conv = &g->nodes[p];
  int x = g->nodes[b].in[0];
  if (conv->dead || conv->op != KN_OP_CONV || conv->n_out != 1 || uses[x] != 1 ||
      kn_pass_is_graph_output(g, x))
    return false;
  int w = conv->in[1], bias = conv->n_in > 2 ? conv->in[2] : -1;
  const kn_value *wv = &g->values[w];
  if (!wv->data || wv->dtype != KN_DT_F32 || wv->shape.rank < 1) return false;
  int64_t m_out = wv->shape.dim[0], per = kn_shape_numel_max(&wv->shape, 1) / (m_out ? m_out : 1);
  if (m_out != g->values[x].shape.dim[1]) return false;
  if (bias >= 0 && (!g->values[bias].data || g->values[bias].dtype != KN_DT_F32)) return false;

  /* Weight: scale in place when this Conv is its only reader. */
  int new_w = w;
  if (uses[w] != 1 || kn_pass_is_graph_output(g, w))
    new_w = kn_pass_new_const(g, g->values[w].name, "_folded", KN_DT_F32, &g->values[w].shape,
                              g->values[w].data);
  float *wd = g->values[new_w].data;
  for (int64_t m = 0; m < m_out; m++)
    for (int64_t i = 0; i < per; i++) wd[m * per + i] = (float)(wd[m * per + i] * s[m]);
  float *bd = malloc(sizeof(float) * (size_t)(m_out ? m_out : 1));
  KN_ASSERT(bd, "out of memory");
  for (int64_t m = 0; m < m_out; m++) {
    double b0 = bias >= 0 ? ((const float *)g->values[bias].data)[m] : 0.0;
    bd[m] = (float)(b0 * s[m] + t[m]);
  }
  kn_shape bs = {.rank = 1, .dim = {m_out}};
  int new_b = kn_pass_new_const(g, g->nodes[p].name, "_bias_folded", KN_DT_F32, &bs, bd);
  free(bd);

  kn_node *cv = &g->nodes[p];
  if (cv->n_in < 3) {
    int *in = KN_NEW_ARRAY(&g->arena, int, 3);
    in[0] = cv->in[0];
    cv->in = in;
    cv->n_in = 3;
  }
  cv->in[1] = new_w;
  cv->in[2] = new_b;
  int y = g->nodes[b].out[0];
  kn_pass_kill_node(g, b);
  cv->out[0] = y;
  g->values[y].producer = p;
  g->values[x].producer = -1;
  return true;
}

/* Rewrites BN node b as Add(Mul(X, s), t) with [C,1,...,1] constants. */
static void bn_to_mul_add(kn_graph *g, int b, int64_t chans, const double *s, const double *t) {
  int x = g->nodes[b].in[0], y = g->nodes[b].out[0];
  int rank = g->values[x].shape.rank;
  kn_shape cs = {.rank = rank - 1};
  cs.dim[0] = chans;
  for (int i = 1; i < cs.rank; i++) cs.dim[i] = 1;
  float *buf = malloc(sizeof(float) * (size_t)(2 * chans + 1));
  KN_ASSERT(buf, "out of memory");
  for (int64_t c = 0; c < chans; c++) buf[c] = (float)s[c], buf[chans + c] = (float)t[c];
  const char *name = g->nodes[b].name;
  int scale = kn_pass_new_const(g, name, "_scale", KN_DT_F32, &cs, buf);
  int shift = kn_pass_new_const(g, name, "_shift", KN_DT_F32, &cs, buf + chans);
  free(buf);
  int scaled = kn_pass_new_value(g, g->values[y].name, "_scaled", g->values[x].dtype, &g->values[x].shape);
  int mul_in[2] = {x, scale};
  kn_graph_add_node(g, KN_OP_MUL, kn_arena_printf(&g->arena, "%s_mul", g->nodes[b].name), mul_in, 2,
                    &scaled, 1);
  kn_node *add = kn_rw_retype(g, b, KN_OP_ADD, false);
  add->n_in = 2;
  add->in[0] = scaled;
  add->in[1] = shift;
}

int kn_pass_fold_conv_bn(kn_graph *g, kn_diag *d) {
  int *uses = malloc(sizeof(int) * ((size_t)g->n_values + 1));
  KN_ASSERT(uses, "out of memory");
  kn_pass_count_uses(g, uses);
  int n_nodes = g->n_nodes;
  for (int b = 0; b < n_nodes; b++) {
    const kn_node *bn = &g->nodes[b];
    if (bn->dead || bn->op != KN_OP_BATCH_NORM || bn->n_out != 1 || bn->n_in < 5) continue;
    int x = bn->in[0];
    const kn_value *xv = &g->values[x];
    if (xv->dtype != KN_DT_F32 || !xv->shape_known || xv->shape.rank < 2) continue;
    int64_t chans = xv->shape.dim[1];
    double *s = malloc(sizeof(double) * (size_t)(2 * chans + 1));
    KN_ASSERT(s, "out of memory");
    double *t = s + chans;
    if (bn_affine(g, bn, chans, s, t)) {
      int p = xv->producer;
      if (p < 0 || !fold_into_conv(g, b, p, uses, s, t)) bn_to_mul_add(g, b, chans, s, t);
      /* New values were added: refresh the use counts' size. */
      int *grown = realloc(uses, sizeof(int) * ((size_t)g->n_values + 1));
      KN_ASSERT(grown, "out of memory");
      uses = grown;
      kn_pass_count_uses(g, uses);
    }
    free(s);
  }
  free(uses);
  return kn_graph_toposort(g, d);
}
