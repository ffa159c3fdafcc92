/* winograd.c — the matrices of F(2x2, 3x3) and F(4x4, 3x3), and the
 * geometry, shape rules and references of kiln.WinogradInput and
 * kiln.WinogradOutput (winograd.h); their compute definitions are in
 * winograd_te.c. The reference multiplies by the matrices as written. */
#include <string.h>

#include "ir/shape/shape_infer_impl.h"
#include "ir/passes/winograd.h"

/* F(2x2, 3x3): the polynomial points 0, ±1 and infinity. */
static const double bt2[4 * 4] = {1, 0, -1, 0, 0, 1, 1, 0, 0, -1, 1, 0, 0, 1, 0, -1};
static const double g2[4 * 3] = {1, 0, 0, 0.5, 0.5, 0.5, 0.5, -0.5, 0.5, 0, 0, 1};
static const double at2[2 * 4] = {1, 1, 1, 0, 0, 1, -1, -1};
/* F(4x4, 3x3): the points 0, ±1, ±2 and infinity. */
static const double bt4[6 * 6] = {4, 0, -5, 0, 1, 0, 0, -4, -4, 1, 1, 0, 0, 4, -4, -1, 1, 0,
                                  0, -2, -1, 2, 1, 0, 0, 2,  -1, -2, 1, 0, 0, 4, 0,  -5, 0, 1};
static const double g4[6 * 3] = {1.0 / 4,  0,         0,  -1.0 / 6, -1.0 / 6, -1.0 / 6,
                                 -1.0 / 6, 1.0 / 6,   -1.0 / 6, 1.0 / 24, 1.0 / 12, 1.0 / 6,
                                 1.0 / 24, -1.0 / 12, 1.0 / 6,  0,        0,        1};
static const double at4[4 * 6] = {1, 1, 1, 1, 1, 0, 0, 1, -1, 2, -2, 0, 0, 1, 1, 4, 4, 0, 0, 1, -1, 8, -8, 1};
static const kn_winograd_mats mats[2] = {{2, 4, bt2, g2, at2}, {4, 6, bt4, g4, at4}};

const kn_winograd_mats *kn_winograd_mats_of(int64_t m) { return m == 2 ? &mats[0] : m == 4 ? &mats[1] : NULL; }

#define DIM_MAX ((int64_t)1 << 30)

bool kn_winograd_op(kn_op op) { return op == KN_OP_WINOGRAD_INPUT || op == KN_OP_WINOGRAD_OUTPUT; }

bool kn_winograd_geom_of(const kn_node *n, const kn_shape *in, kn_winograd_geom *g) {
  memset(g, 0, sizeof *g);
  if (in->rank != 4 || (in->batch_mask & ~1u)) return false;
  g->mats = kn_winograd_mats_of(kn_node_attr_int(n, "tile", 2));
  if (!g->mats) return false;
  int count;
  if (n->op == KN_OP_WINOGRAD_INPUT) {
    const int64_t *p = kn_node_attr_ints(n, "pads", &count);
    if (!p || count != 4) return false;
    for (int i = 0; i < 4; i++)
      if (p[i] < 0 || p[i] > 2) return false;
    g->h = in->dim[1], g->w = in->dim[2];
    g->pad_top = p[0], g->pad_left = p[1];
    g->oh = g->h + p[0] + p[2] - 2, g->ow = g->w + p[1] + p[3] - 2;
  } else {
    const int64_t *hw = kn_node_attr_ints(n, "output_hw", &count);
    if (!hw || count != 2) return false;
    g->oh = hw[0], g->ow = hw[1];
  }
  if (g->oh < 1 || g->ow < 1 || g->oh > DIM_MAX || g->ow > DIM_MAX) return false;
  g->th = kn_winograd_tiles(g->oh, g->mats->m), g->tw = kn_winograd_tiles(g->ow, g->mats->m);
  return n->op == KN_OP_WINOGRAD_INPUT || (in->dim[1] == g->mats->a * g->mats->a && in->dim[2] == g->th * g->tw);
}

/* ---- shape rules ---- */

int kn_infer_winograd(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  const kn_value *x = kn_infer_in(c, 0);
  if (!x) return kn_infer_fail(c, "missing input");
  if (!kn_dtype_is_float(x->dtype)) return kn_infer_fail(c, "dtype %s is not a float", kn_dtype_name(x->dtype));
  kn_winograd_geom g;
  if (!kn_winograd_geom_of(n, &x->shape, &g))
    return kn_infer_fail(c, n->op == KN_OP_WINOGRAD_INPUT
                                ? "needs a 4-D input with static spatial dims, pads of 0..2 giving a "
                                  "positive output and a tile of 2 or 4"
                                : "needs a [N, a², tiles, K] input matching output_hw and a tile of 2 or 4");
  kn_shape s = x->shape;
  if (n->op == KN_OP_WINOGRAD_INPUT) {
    s.dim[1] = g.mats->a * g.mats->a;
    s.dim[2] = g.th * g.tw;
  } else {
    s.dim[1] = g.oh;
    s.dim[2] = g.ow;
  }
  return kn_infer_set(c, 0, x->dtype, &s);
}

/* ---- reference ---- */

/* p = L q Lᵀ for an r x a matrix L and an a x a q (doubles, row-major). */
static void sandwich(const double *L, int r, int a, const double *q, double *p) {
  double lq[6 * 6];
  for (int i = 0; i < r; i++)
    for (int j = 0; j < a; j++) {
      lq[i * a + j] = 0;
      for (int k = 0; k < a; k++) lq[i * a + j] += L[i * a + k] * q[k * a + j];
    }
  for (int i = 0; i < r; i++)
    for (int j = 0; j < r; j++) {
      p[i * r + j] = 0;
      for (int k = 0; k < a; k++) p[i * r + j] += lq[i * a + k] * L[j * a + k];
    }
}

static int ref_input(kn_ref_call *c, const kn_winograd_geom *g) {
  const kn_ref_tensor *x = &c->in[0];
  kn_ref_tensor *v = &c->out[0];
  int m = g->mats->m, a = g->mats->a;
  int64_t N = x->shape.dim[0], C = x->shape.dim[3], T = g->th * g->tw;
  for (int64_t n = 0; n < N; n++)
    for (int64_t t = 0; t < T; t++)
      for (int64_t ch = 0; ch < C; ch++) {
        double d[6 * 6], bdb[6 * 6];
        for (int i = 0; i < a; i++)
          for (int j = 0; j < a; j++) {
            int64_t r = m * (t / g->tw) + i - g->pad_top, q = m * (t % g->tw) + j - g->pad_left;
            bool in = r >= 0 && r < g->h && q >= 0 && q < g->w;
            d[i * a + j] = in ? kn_ref_load(x->dtype, x->data, ((n * g->h + r) * g->w + q) * C + ch) : 0;
          }
        sandwich(g->mats->bt, a, a, d, bdb); /* Bᵀ d B */
        for (int e = 0; e < a * a; e++) kn_ref_store(v->dtype, v->data, ((n * a * a + e) * T + t) * C + ch, bdb[e]);
      }
  return 0;
}

static int ref_output(kn_ref_call *c, const kn_winograd_geom *g) {
  const kn_ref_tensor *mt = &c->in[0];
  kn_ref_tensor *y = &c->out[0];
  int m = g->mats->m, a = g->mats->a;
  int64_t N = mt->shape.dim[0], K = mt->shape.dim[3], T = g->th * g->tw;
  for (int64_t n = 0; n < N; n++)
    for (int64_t t = 0; t < T; t++)
      for (int64_t k = 0; k < K; k++) {
        double q[6 * 6], ama[4 * 4];
        for (int e = 0; e < a * a; e++) q[e] = kn_ref_load(mt->dtype, mt->data, ((n * a * a + e) * T + t) * K + k);
        sandwich(g->mats->at, m, a, q, ama); /* Aᵀ m A */
        for (int i = 0; i < m; i++)
          for (int j = 0; j < m; j++) {
            int64_t r = m * (t / g->tw) + i, col = m * (t % g->tw) + j;
            if (r < g->oh && col < g->ow)
              kn_ref_store(y->dtype, y->data, ((n * g->oh + r) * g->ow + col) * K + k, ama[i * m + j]);
          }
      }
  return 0;
}

int kn_ref_winograd(kn_ref_call *c) {
  kn_winograd_geom g;
  if (!kn_winograd_geom_of(c->node, &c->in[0].shape, &g))
    return kn_diag_error(c->d, "node '%s' (%s): bad geometry", c->node->name, c->node->op_type);
  return c->node->op == KN_OP_WINOGRAD_INPUT ? ref_input(c, &g) : ref_output(c, &g);
}
