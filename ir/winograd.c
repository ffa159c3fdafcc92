/* winograd.c — shape rules, reference and compute definitions of
 * kiln.WinogradInput and kiln.WinogradOutput (winograd.h).
 *
 * The reference multiplies by the matrices as written. The compute
 * definitions use their structure instead, so that a kernel does adds only:
 *   row ξ of Bᵀ is  e_a(ξ) + s(ξ) e_b(ξ)  with a = (0,1,2,1), b = (2,2,1,3),
 *                   s = (-1,1,-1,-1), so (Bᵀ d B)[ξ,ν] reads 4 elements of d;
 *   row r of Aᵀ is  e_r + σ(r) (e_{r+1} + e_{r+2}) with σ(r) = 1 - 2r,
 *                   so (Aᵀ m A)[r,q] reads 9 elements of m.
 * a, b, s and σ are index arithmetic on the loop variables (ξ = e / 4 ...),
 * constant inside the vectorized channel loop. */
#include <string.h>

#include "shape_infer_impl.h"
#include "te_ops.h"
#include "winograd.h"

const double kn_winograd_bt[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
const double kn_winograd_g[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
const double kn_winograd_at[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};

#define DIM_MAX ((int64_t)1 << 30)

bool kn_winograd_op(kn_op op) { return op == KN_OP_WINOGRAD_INPUT || op == KN_OP_WINOGRAD_OUTPUT; }

bool kn_winograd_geom_of(const kn_node *n, const kn_shape *in, kn_winograd_geom *g) {
  memset(g, 0, sizeof *g);
  if (in->rank != 4 || (in->batch_mask & ~1u)) return false;
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
  g->th = kn_winograd_tiles(g->oh), g->tw = kn_winograd_tiles(g->ow);
  return n->op == KN_OP_WINOGRAD_INPUT || (in->dim[1] == 16 && in->dim[2] == g->th * g->tw);
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
                                ? "needs a 4-D input with static spatial dims and pads of 0..2 giving a "
                                  "positive output"
                                : "needs a [N, 16, tiles, K] input matching output_hw");
  kn_shape s = x->shape;
  if (n->op == KN_OP_WINOGRAD_INPUT) {
    s.dim[1] = 16;
    s.dim[2] = g.th * g.tw;
  } else {
    s.dim[1] = g.oh;
    s.dim[2] = g.ow;
  }
  return kn_infer_set(c, 0, x->dtype, &s);
}

/* ---- reference ---- */

static int ref_input(kn_ref_call *c, const kn_winograd_geom *g) {
  const kn_ref_tensor *x = &c->in[0];
  kn_ref_tensor *v = &c->out[0];
  int64_t N = x->shape.dim[0], C = x->shape.dim[3], T = g->th * g->tw;
  for (int64_t n = 0; n < N; n++)
    for (int64_t t = 0; t < T; t++)
      for (int64_t ch = 0; ch < C; ch++) {
        double d[4][4], bd[4][4];
        for (int i = 0; i < 4; i++)
          for (int j = 0; j < 4; j++) {
            int64_t r = 2 * (t / g->tw) + i - g->pad_top, q = 2 * (t % g->tw) + j - g->pad_left;
            bool in = r >= 0 && r < g->h && q >= 0 && q < g->w;
            d[i][j] = in ? kn_ref_load(x->dtype, x->data, ((n * g->h + r) * g->w + q) * C + ch) : 0;
          }
        for (int i = 0; i < 4; i++) /* Bᵀ d */
          for (int j = 0; j < 4; j++) {
            bd[i][j] = 0;
            for (int k = 0; k < 4; k++) bd[i][j] += kn_winograd_bt[i][k] * d[k][j];
          }
        for (int i = 0; i < 4; i++) /* (Bᵀ d) B */
          for (int j = 0; j < 4; j++) {
            double s = 0;
            for (int k = 0; k < 4; k++) s += bd[i][k] * kn_winograd_bt[j][k];
            kn_ref_store(v->dtype, v->data, ((n * 16 + i * 4 + j) * T + t) * C + ch, s);
          }
      }
  return 0;
}

static int ref_output(kn_ref_call *c, const kn_winograd_geom *g) {
  const kn_ref_tensor *m = &c->in[0];
  kn_ref_tensor *y = &c->out[0];
  int64_t N = m->shape.dim[0], K = m->shape.dim[3], T = g->th * g->tw;
  for (int64_t n = 0; n < N; n++)
    for (int64_t t = 0; t < T; t++)
      for (int64_t k = 0; k < K; k++) {
        double a[4][4], am[2][4];
        for (int e = 0; e < 16; e++) a[e / 4][e % 4] = kn_ref_load(m->dtype, m->data, ((n * 16 + e) * T + t) * K + k);
        for (int i = 0; i < 2; i++) /* Aᵀ m */
          for (int j = 0; j < 4; j++) {
            am[i][j] = 0;
            for (int l = 0; l < 4; l++) am[i][j] += kn_winograd_at[i][l] * a[l][j];
          }
        for (int i = 0; i < 2; i++) /* (Aᵀ m) A */
          for (int j = 0; j < 2; j++) {
            int64_t r = 2 * (t / g->tw) + i, q = 2 * (t % g->tw) + j;
            if (r >= g->oh || q >= g->ow) continue;
            double s = 0;
            for (int l = 0; l < 4; l++) s += am[i][l] * kn_winograd_at[j][l];
            kn_ref_store(y->dtype, y->data, ((n * g->oh + r) * g->ow + q) * K + k, s);
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

/* ---- compute definitions ---- */

/* f(i) as a float of dtype t, for the ±1 coefficients. */
static kn_expr *ix_float(kn_te_ctx *c, kn_dtype t, kn_expr *i) { return kn_e_cast(c->ec, t, i); }

/* x[n, r, q, ch] with zeros outside the input (pads, ragged tiles). */
static kn_expr *input_at(kn_te_ctx *c, kn_te_tensor *x, const kn_winograd_geom *g, kn_expr *n, kn_expr *r,
                         kn_expr *q, kn_expr *ch) {
  kn_expr *valid = NULL;
  kn_expr *idx[4] = {n, r, q, ch};
  for (int a = 1; a <= 2; a++) {
    int64_t first = a == 1 ? -g->pad_top : -g->pad_left;
    int64_t last = 2 * ((a == 1 ? g->th : g->tw) - 1) + 3 + first, extent = a == 1 ? g->h : g->w;
    if (first >= 0 && last < extent) continue; /* every tile reads inside */
    valid = kn_te_and(c, valid, kn_te_ix_in_range(c, idx[a], x->shape[a]));
    idx[a] = kn_te_ix_clamp(c, idx[a], x->shape[a]);
  }
  kn_expr *v = kn_te_at(c, x, idx);
  return valid ? kn_e_select(c->ec, valid, v, kn_te_num(c, x->dtype, 0)) : v;
}

static kn_te_tensor *input_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor *x, const kn_winograd_geom *g) {
  kn_expr_ctx *ec = c->ec;
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  kn_expr *oi[4];
  kn_te_axis_exprs(c, o, oi);
  kn_expr *e = oi[1], *t = oi[2], *four = kn_te_ix(c, 4), *tw = kn_te_ix(c, g->tw);
  kn_expr *xi = kn_te_ix_div(c, e, four), *nu = kn_te_ix_mod(c, e, four);
  kn_expr *base[2] = {kn_te_ix_sub(c, kn_te_ix_mul(c, kn_te_ix(c, 2), kn_te_ix_div(c, t, tw)), kn_te_ix(c, g->pad_top)),
                      kn_te_ix_sub(c, kn_te_ix_mul(c, kn_te_ix(c, 2), kn_te_ix_mod(c, t, tw)), kn_te_ix(c, g->pad_left))};
  kn_expr *rows[2][2], *sign[2]; /* per dim (ξ, ν): the two taps a, b and s */
  kn_expr *f[2] = {xi, nu};
  for (int k = 0; k < 2; k++) {
    kn_expr *by3 = kn_te_ix_div(c, f[k], kn_te_ix(c, 3)), *by2 = kn_te_ix_div(c, f[k], kn_te_ix(c, 2));
    kn_expr *a = kn_te_ix_sub(c, f[k], kn_te_ix_mul(c, kn_te_ix(c, 2), by3));
    kn_expr *b = kn_te_ix_add(c, kn_te_ix_sub(c, kn_te_ix(c, 2), by2), kn_te_ix_mul(c, kn_te_ix(c, 2), by3));
    kn_expr *one = kn_te_ix_mul(c, kn_te_ix_mod(c, f[k], kn_te_ix(c, 2)), kn_te_ix_sub(c, kn_te_ix(c, 1), by2));
    rows[k][0] = kn_te_ix_add(c, base[k], a);
    rows[k][1] = kn_te_ix_add(c, base[k], b);
    sign[k] = ix_float(c, x->dtype, kn_te_ix_sub(c, kn_te_ix_mul(c, kn_te_ix(c, 2), one), kn_te_ix(c, 1)));
  }
  kn_expr *col[2]; /* (Bᵀ d)[ξ, a(ν)] and (Bᵀ d)[ξ, b(ν)] */
  for (int j = 0; j < 2; j++) {
    kn_expr *p = input_at(c, x, g, oi[0], rows[0][0], rows[1][j], oi[3]);
    kn_expr *q = input_at(c, x, g, oi[0], rows[0][1], rows[1][j], oi[3]);
    col[j] = kn_e_add(ec, p, kn_e_mul(ec, sign[0], q));
  }
  o->body = kn_e_add(ec, col[0], kn_e_mul(ec, sign[1], col[1]));
  return o;
}

static kn_te_tensor *output_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor *m, const kn_winograd_geom *g) {
  kn_expr_ctx *ec = c->ec;
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  kn_expr *oi[4];
  kn_te_axis_exprs(c, o, oi);
  kn_expr *two = kn_te_ix(c, 2);
  kn_expr *r = kn_te_ix_mod(c, oi[1], two), *q = kn_te_ix_mod(c, oi[2], two);
  kn_expr *t = kn_te_ix_add(c, kn_te_ix_mul(c, kn_te_ix_div(c, oi[1], two), kn_te_ix(c, g->tw)),
                            kn_te_ix_div(c, oi[2], two));
  kn_expr *sr = ix_float(c, m->dtype, kn_te_ix_sub(c, kn_te_ix(c, 1), kn_te_ix_mul(c, two, r)));
  kn_expr *sq = ix_float(c, m->dtype, kn_te_ix_sub(c, kn_te_ix(c, 1), kn_te_ix_mul(c, two, q)));
  kn_expr *rowsum[3]; /* (Aᵀ m)[r, q + l] */
  for (int l = 0; l < 3; l++) {
    kn_expr *v[3];
    for (int j = 0; j < 3; j++) {
      kn_expr *e = kn_te_ix_add(c, kn_te_ix_mul(c, kn_te_ix_add(c, r, kn_te_ix(c, j)), kn_te_ix(c, 4)),
                                kn_te_ix_add(c, q, kn_te_ix(c, l)));
      kn_expr *mi[4] = {oi[0], e, t, oi[3]};
      v[j] = kn_te_at(c, m, mi);
    }
    rowsum[l] = kn_e_add(ec, v[0], kn_e_mul(ec, sr, kn_e_add(ec, v[1], v[2])));
  }
  o->body = kn_e_add(ec, rowsum[0], kn_e_mul(ec, sq, kn_e_add(ec, rowsum[1], rowsum[2])));
  return o;
}

kn_te_tensor *kn_te_winograd(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  kn_te_tensor *x = in[0];
  kn_shape s = {.rank = x->rank};
  for (int a = 0; a < x->rank && a < 4; a++)
    if (a > 0 && !kn_te_ix_const(x->shape[a], &s.dim[a])) return kn_te_unsupported(d, n, "batch-sized dim %d", a);
  kn_winograd_geom g;
  if (!kn_dtype_is_float(x->dtype) || !kn_winograd_geom_of(n, &s, &g))
    return kn_te_unsupported(d, n, "input shape or attributes");
  return n->op == KN_OP_WINOGRAD_INPUT ? input_def(c, n, x, &g) : output_def(c, n, x, &g);
}
