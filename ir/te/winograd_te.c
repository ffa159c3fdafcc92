/* winograd_te.c — the compute definitions of kiln.WinogradInput and
 * kiln.WinogradOutput (winograd.h): each reads only the elements that a
 * row of its matrix does not zero.
 *
 * F(2x2, 3x3) uses the structure of its ±1 matrices, so that a kernel does
 * adds only:
 *   row ξ of Bᵀ is  e_a(ξ) + s(ξ) e_b(ξ)  with a = (0,1,2,1), b = (2,2,1,3),
 *                   s = (-1,1,-1,-1), so (Bᵀ d B)[ξ,ν] reads 4 elements of d;
 *   row r of Aᵀ is  e_r + σ(r) (e_{r+1} + e_{r+2}) with σ(r) = 1 - 2r,
 *                   so (Aᵀ m A)[r,q] reads 9 elements of m.
 * Other tile sizes go through the rows' taps (taps_of): row i of a matrix
 * as its nonzero columns and their coefficients, select chains on i, so
 * (Bᵀ d B)[ξ,ν] of F(4x4, 3x3) reads 4 x 4 elements of d and (Aᵀ m A)[r,q]
 * 5 x 5 of m. Either way the indices and coefficients are scalar
 * expressions of the loop variables (ξ = e / a ...), constant inside the
 * vectorized channel loop. */
#include "ir/te/te_ops.h"
#include "ir/passes/winograd.h"


/* f(i) as a float of dtype t, for the ±1 coefficients. */
static kn_expr *ix_float(kn_te_ctx *c, kn_dtype t, kn_expr *i) { return kn_e_cast(c->ec, t, i); }

/* x[n, r, q, ch] with zeros outside the input (pads, ragged tiles). */
static kn_expr *input_at(kn_te_ctx *c, kn_te_tensor *x, const kn_winograd_geom *g, kn_expr *n, kn_expr *r,
                         kn_expr *q, kn_expr *ch) {
  kn_expr *valid = NULL;
  kn_expr *idx[4] = {n, r, q, ch};
  for (int a = 1; a <= 2; a++) {
    int64_t first = a == 1 ? -g->pad_top : -g->pad_left;
    int64_t last = g->mats->m * ((a == 1 ? g->th : g->tw) - 1) + g->mats->a - 1 + first;
    int64_t extent = a == 1 ? g->h : g->w;
    if (first >= 0 && last < extent) continue; /* every tile reads inside */
    valid = kn_te_and(c, valid, kn_te_ix_in_range(c, idx[a], x->shape[a]));
    idx[a] = kn_te_ix_clamp(c, idx[a], x->shape[a]);
  }
  kn_expr *v = kn_te_at(c, x, idx);
  return valid ? kn_e_select(c->ec, valid, v, kn_te_num(c, x->dtype, 0)) : v;
}

static kn_te_tensor *input_def2(kn_te_ctx *c, const kn_node *n, kn_te_tensor *x, const kn_winograd_geom *g) {
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

static kn_te_tensor *output_def2(kn_te_ctx *c, const kn_node *n, kn_te_tensor *m, const kn_winograd_geom *g) {
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

/* ---- any tile size: the rows' taps ---- */

#define TAPS_MAX 6

/* Row i (an expression) of a rows x cols matrix L as n taps: column col[l]
 * with coefficient coef[l], each a select chain on i over the rows (a
 * constant where all rows agree). A row with fewer nonzeros than n repeats
 * its last one with coefficient 0. */
typedef struct taps {
  int n;
  kn_expr *col[TAPS_MAX], *coef[TAPS_MAX];
} taps;

static kn_expr *chain(kn_te_ctx *c, kn_expr *i, const double *v, int rows, kn_dtype t, bool index) {
  kn_expr *e = index ? kn_te_ix(c, (int64_t)v[rows - 1]) : kn_te_num(c, t, v[rows - 1]);
  for (int r = rows - 2; r >= 0; r--)
    if (v[r] != v[rows - 1])
      e = kn_e_select(c->ec, kn_e_bin(c->ec, KN_E_EQ, i, kn_te_ix(c, r)),
                      index ? kn_te_ix(c, (int64_t)v[r]) : kn_te_num(c, t, v[r]), e);
  return e;
}

static void taps_of(kn_te_ctx *c, kn_dtype t, const double *L, int rows, int cols, kn_expr *i, taps *out) {
  double col[TAPS_MAX][6], coef[TAPS_MAX][6];
  int nnz[6];
  out->n = 0;
  for (int r = 0; r < rows; r++) {
    int n = 0;
    for (int j = 0; j < cols; j++)
      if (L[r * cols + j] != 0) col[n][r] = j, coef[n][r] = L[r * cols + j], n++;
    nnz[r] = n;
    if (n > out->n) out->n = n;
  }
  for (int r = 0; r < rows; r++)
    for (int l = nnz[r]; l < out->n; l++) col[l][r] = col[nnz[r] - 1][r], coef[l][r] = 0;
  for (int l = 0; l < out->n; l++) {
    out->col[l] = chain(c, i, col[l], rows, t, true);
    out->coef[l] = chain(c, i, coef[l], rows, t, false);
  }
}

/* sum + coef * v, where sum may be NULL and a coefficient of 1 is left out. */
static kn_expr *add_term(kn_te_ctx *c, kn_expr *sum, kn_expr *coef, kn_expr *v) {
  kn_expr *term = coef->kind == KN_E_FLOAT && coef->u.fval == 1 ? v : kn_e_mul(c->ec, coef, v);
  return sum ? kn_e_add(c->ec, sum, term) : term;
}

/* V[n, e, t, ch] = sum_l,l' Bᵀ[ξ, i_l] Bᵀ[ν, j_l'] d[i_l, j_l'] over the taps of rows ξ and ν. */
static kn_te_tensor *input_def_taps(kn_te_ctx *c, const kn_node *n, kn_te_tensor *x, const kn_winograd_geom *g) {
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  kn_expr *oi[4];
  kn_te_axis_exprs(c, o, oi);
  int a = g->mats->a;
  kn_expr *e = oi[1], *t = oi[2], *m = kn_te_ix(c, g->mats->m), *tw = kn_te_ix(c, g->tw);
  kn_expr *base_r = kn_te_ix_sub(c, kn_te_ix_mul(c, m, kn_te_ix_div(c, t, tw)), kn_te_ix(c, g->pad_top));
  kn_expr *base_q = kn_te_ix_sub(c, kn_te_ix_mul(c, m, kn_te_ix_mod(c, t, tw)), kn_te_ix(c, g->pad_left));
  taps tr, tq;
  taps_of(c, x->dtype, g->mats->bt, a, a, kn_te_ix_div(c, e, kn_te_ix(c, a)), &tr);
  taps_of(c, x->dtype, g->mats->bt, a, a, kn_te_ix_mod(c, e, kn_te_ix(c, a)), &tq);
  kn_expr *sum = NULL;
  for (int l = 0; l < tr.n; l++) {
    kn_expr *row = NULL, *r = kn_te_ix_add(c, base_r, tr.col[l]);
    for (int j = 0; j < tq.n; j++)
      row = add_term(c, row, tq.coef[j], input_at(c, x, g, oi[0], r, kn_te_ix_add(c, base_q, tq.col[j]), oi[3]));
    sum = add_term(c, sum, tr.coef[l], row);
  }
  o->body = sum;
  return o;
}

/* Y[n, y, x, k] = sum_l,l' Aᵀ[r, i_l] Aᵀ[q, j_l'] M[n, a i_l + j_l', t, k], r = y % m, q = x % m. */
static kn_te_tensor *output_def_taps(kn_te_ctx *c, const kn_node *n, kn_te_tensor *mt, const kn_winograd_geom *g) {
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  kn_expr *oi[4];
  kn_te_axis_exprs(c, o, oi);
  int a = g->mats->a;
  kn_expr *m = kn_te_ix(c, g->mats->m);
  kn_expr *t = kn_te_ix_add(c, kn_te_ix_mul(c, kn_te_ix_div(c, oi[1], m), kn_te_ix(c, g->tw)), kn_te_ix_div(c, oi[2], m));
  taps tr, tq;
  taps_of(c, mt->dtype, g->mats->at, g->mats->m, a, kn_te_ix_mod(c, oi[1], m), &tr);
  taps_of(c, mt->dtype, g->mats->at, g->mats->m, a, kn_te_ix_mod(c, oi[2], m), &tq);
  kn_expr *sum = NULL;
  for (int l = 0; l < tr.n; l++) {
    kn_expr *row = NULL, *ea = kn_te_ix_mul(c, tr.col[l], kn_te_ix(c, a));
    for (int j = 0; j < tq.n; j++) {
      kn_expr *mi[4] = {oi[0], kn_te_ix_add(c, ea, tq.col[j]), t, oi[3]};
      row = add_term(c, row, tq.coef[j], kn_te_at(c, mt, mi));
    }
    sum = add_term(c, sum, tr.coef[l], row);
  }
  o->body = sum;
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
  bool in_op = n->op == KN_OP_WINOGRAD_INPUT;
  if (g.mats->m == 2) return in_op ? input_def2(c, n, x, &g) : output_def2(c, n, x, &g);
  return in_op ? input_def_taps(c, n, x, &g) : output_def_taps(c, n, x, &g);
}
