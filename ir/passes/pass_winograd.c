/* pass_winograd.c — 3x3 stride-1 convolutions as Winograd F(m x m, 3x3),
 * m = 2 or 4 (a = m + 2):
 *
 *   Y = kiln.ConvNHWC(X, W[3,3,C,K], bias)          (pads p, group 1)
 * becomes
 *   V = kiln.WinogradInput(X)             [N, a², T, C]   (pads p, tile m)
 *   M = MatMul(V, U)                      [N, a², T, K]   U[a², C, K] = G W Gᵀ, a constant
 *   Y = kiln.WinogradOutput(M) (+ bias)   [N, oh, ow, K]  (tile m)
 * (winograd.h has the algebra). The MatMul is a contraction like any other:
 * its schedule comes from the rules or a tuning log; the bias Add and the
 * conv's activation and residual Add fuse into WinogradOutput's kernel.
 *
 * Requires: shapes inferred, toposorted, the NHWC layout (kn_pass_layout);
 * runs before kn_pass_explicit_pad, since WinogradInput reads its own pads.
 * Guarantees: the convs `want` accepts are rewritten; shapes of new values
 * are set; results are unchanged up to rounding (U is computed in double). */
#include <stdlib.h>
#include <string.h>

#include "ir/passes/passes.h"
#include "ir/passes/winograd.h"

bool kn_winograd_eligible(const kn_graph *g, int node) {
  const kn_node *n = &g->nodes[node];
  if (n->dead || n->op != KN_OP_CONV_NHWC || n->n_in < 2 || n->in[0] < 0 || n->in[1] < 0 || n->n_out != 1)
    return false;
  const kn_value *x = &g->values[n->in[0]], *w = &g->values[n->in[1]], *y = &g->values[n->out[0]];
  if (x->dtype != KN_DT_F32 || w->dtype != KN_DT_F32 || !w->data || w->shape.rank != 4 || x->shape.rank != 4 ||
      y->shape.rank != 4 || (x->shape.batch_mask & ~1u))
    return false;
  if (w->shape.dim[0] != 3 || w->shape.dim[1] != 3 || kn_node_attr_int(n, "group", 1) != 1) return false;
  if (n->n_in > 2 && n->in[2] >= 0 && g->values[n->in[2]].shape.rank != 1) return false;
  int count;
  const int64_t *s = kn_node_attr_ints(n, "strides", &count);
  if (s && (count != 2 || s[0] != 1 || s[1] != 1)) return false;
  s = kn_node_attr_ints(n, "dilations", &count);
  if (s && (count != 2 || s[0] != 1 || s[1] != 1)) return false;
  s = kn_node_attr_ints(n, "pads", &count);
  if (s && count != 4) return false;
  for (int i = 0; s && i < 4; i++)
    if (s[i] < 0 || s[i] > 2) return false;
  return true;
}

/* U[e, c, k] = (G W[:, :, c, k] Gᵀ)[e / a, e % a]. */
static void transform_weights(const kn_winograd_mats *mt, const float *w, int64_t C, int64_t K, float *u) {
  int a = mt->a;
  for (int64_t c = 0; c < C; c++)
    for (int64_t k = 0; k < K; k++) {
      double gw[6][3];
      for (int i = 0; i < a; i++)
        for (int j = 0; j < 3; j++) {
          gw[i][j] = 0;
          for (int l = 0; l < 3; l++) gw[i][j] += mt->g[i * 3 + l] * w[((l * 3 + j) * C + c) * K + k];
        }
      for (int i = 0; i < a; i++)
        for (int j = 0; j < a; j++) {
          double s = 0;
          for (int l = 0; l < 3; l++) s += gw[i][l] * mt->g[j * 3 + l];
          u[((i * a + j) * C + c) * K + k] = (float)s;
        }
    }
}

/* "tile" only where it is not the default 2: the attributes are part of a
 * kernel's workload key, and tuning logs hold F(2x2, 3x3) records without it. */
static void add_tile(kn_graph *g, int node, int tile) {
  if (tile != 2) kn_node_add_attr(g, &g->nodes[node], kn_pass_attr_int("tile", tile));
}

static void rewrite(kn_graph *g, int i, int tile) {
  kn_node *n = &g->nodes[i];
  const char *base = n->name;
  int x = n->in[0], wv = n->in[1], bias = n->n_in > 2 ? n->in[2] : -1, y = n->out[0];
  int count;
  const int64_t *p = kn_node_attr_ints(n, "pads", &count);
  int64_t pads[4] = {0, 0, 0, 0};
  if (p) memcpy(pads, p, sizeof pads);
  kn_shape xs = g->values[x].shape, ys = g->values[y].shape;
  int64_t C = xs.dim[3], K = g->values[wv].shape.dim[3];
  const kn_winograd_mats *mt = kn_winograd_mats_of(tile);
  KN_ASSERT(mt, "Winograd tile");
  int64_t tiles = kn_winograd_tiles(ys.dim[1], tile) * kn_winograd_tiles(ys.dim[2], tile), a2 = mt->a * mt->a;

  kn_shape us = {.rank = 3, .dim = {a2, C, K}};
  float *u = malloc(sizeof(float) * (size_t)(a2 * C * K));
  KN_ASSERT(u, "out of memory");
  transform_weights(mt, g->values[wv].data, C, K, u);
  int uv = kn_pass_new_const(g, base, ".winograd_u", KN_DT_F32, &us, u);
  free(u);

  kn_shape vs = xs;
  vs.dim[1] = a2, vs.dim[2] = tiles, vs.dim[3] = C;
  kn_shape ms = vs;
  ms.dim[3] = K;
  int v = kn_pass_new_value(g, base, ".winograd_v", KN_DT_F32, &vs);
  int m = kn_pass_new_value(g, base, ".winograd_m", KN_DT_F32, &ms);
  int out = bias >= 0 ? kn_pass_new_value(g, base, ".winograd_y", KN_DT_F32, &ys) : y;
  kn_pass_kill_node(g, i);

  int node = kn_graph_add_node(g, KN_OP_WINOGRAD_INPUT, kn_arena_printf(&g->arena, "%s.winograd_in", base), &x,
                               1, &v, 1);
  kn_node_add_attr(g, &g->nodes[node], kn_pass_attr_ints(g, "pads", pads, 4));
  add_tile(g, node, tile);
  int mm_in[2] = {v, uv};
  kn_graph_add_node(g, KN_OP_MATMUL, kn_arena_printf(&g->arena, "%s.winograd_gemm", base), mm_in, 2, &m, 1);
  node = kn_graph_add_node(g, KN_OP_WINOGRAD_OUTPUT, kn_arena_printf(&g->arena, "%s.winograd_out", base), &m, 1,
                           &out, 1);
  int64_t hw[2] = {ys.dim[1], ys.dim[2]};
  kn_node_add_attr(g, &g->nodes[node], kn_pass_attr_ints(g, "output_hw", hw, 2));
  add_tile(g, node, tile);
  if (bias >= 0) {
    int add_in[2] = {out, bias};
    kn_graph_add_node(g, KN_OP_ADD, kn_arena_printf(&g->arena, "%s.winograd_bias", base), add_in, 2, &y, 1);
  }
}

int kn_pass_winograd(kn_graph *g, kn_winograd_want want, void *ctx, kn_diag *d) {
  int n_nodes = g->n_nodes;
  for (int i = 0; i < n_nodes; i++) {
    int tile = kn_winograd_eligible(g, i) ? want(g, i, ctx) : 0;
    if (tile) rewrite(g, i, tile);
  }
  return kn_graph_toposort(g, d);
}

int kn_winograd_want_all2(const kn_graph *g, int node, void *ctx) {
  (void)g, (void)node, (void)ctx;
  return 2;
}

int kn_winograd_want_all4(const kn_graph *g, int node, void *ctx) {
  (void)g, (void)node, (void)ctx;
  return 4;
}

/* The default: F(2x2, 3x3) for convs with at least 32 input and 32 output
 * channels, where the 16 GEMMs have a reduction and a row long enough to
 * run near the machine's peak. F(4x4, 3x3) is left to measurement (a
 * tuning log), for its rounding and its longer transforms. */
int kn_winograd_want_default(const kn_graph *g, int node, void *ctx) {
  (void)ctx;
  const kn_node *n = &g->nodes[node];
  const kn_value *w = &g->values[n->in[1]];
  return w->shape.dim[2] >= 32 && w->shape.dim[3] >= 32 ? 2 : 0;
}
