/* te_ops_shape.c — compute definitions of the data-movement ops (INJECTIVE:
 * Transpose, Concat, Slice, Split, Gather, GatherElements, Trilu, Expand,
 * Pad, Tile) and the views
 * (Reshape, Flatten, Squeeze, Unsqueeze).
 *
 * Each is one compute `out[i...] = in[f(i...)]` (Concat: a select chain over
 * its inputs; Pad: a select with the pad value). The output extents come from
 * the graph; the index maps are built from the attributes/constant inputs
 * and every load stays in bounds: padded indices are clamped, and gather
 * indices follow kn_te_index_read's rule (te_ops.h); and
 * where the dims are constants the map is checked against the output shape.
 * Views re-index through the flat index (after peeling equal leading and
 * trailing dims) so the lowering may alias them or compute them. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/shape/shape_infer.h"
#include "ir/te/te_ops.h"

typedef struct sh {
  kn_te_ctx *c;
  const kn_node *n;
  kn_diag *d;
  kn_te_tensor *x; /* input 0 */
  kn_te_tensor *o; /* the output compute */
  kn_expr *idx[KN_TE_MAX_RANK];
} sh;

/* kn_te_unsupported for expression builders: appends the diagnostic and
 * returns NULL. */
static kn_expr *fail(sh *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static kn_expr *fail(sh *s, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  kn_te_unsupported(s->d, s->n, "%s", what);
  return NULL;
}

static kn_expr *load(sh *s, kn_te_tensor *t, kn_expr **xi) { return kn_te_at(s->c, t, xi); }

/* The constant int64 list of input i (opset >= 10 style) or attribute
 * `attr` (older opsets); false with a diagnostic when neither is constant. */
static bool ints_of(sh *s, int input, const char *attr, int64_t *out, int *count, bool required) {
  int v = kn_te_in_value(s->n, input);
  if (v >= 0) {
    if (kn_te_const_ints(s->c, v, out, 2 * KN_MAX_RANK, count)) return true;
    fail(s, "non-constant input %d", input);
    return false;
  }
  int na;
  const int64_t *a = attr ? kn_node_attr_ints(s->n, attr, &na) : NULL;
  if (a && na <= 2 * KN_MAX_RANK) {
    memcpy(out, a, sizeof(int64_t) * (size_t)na);
    *count = na;
    return true;
  }
  *count = 0;
  if (required) fail(s, "missing %s", attr ? attr : "constant input");
  return !required;
}

static kn_expr *transpose_def(sh *s) {
  int r = s->x->rank, np;
  const int64_t *perm = kn_node_attr_ints(s->n, "perm", &np);
  if (s->o->rank != r || (perm && np != r)) return fail(s, "perm of this length");
  kn_expr *xi[KN_TE_MAX_RANK] = {0};
  for (int k = 0; k < r; k++) {
    int64_t p = perm ? perm[k] : r - 1 - k;
    if (p < 0 || p >= r || xi[p]) return fail(s, "perm that is not a permutation");
    xi[p] = s->idx[k];
  }
  return load(s, s->x, xi);
}

static kn_expr *concat_def(sh *s, kn_te_tensor **in) {
  kn_te_ctx *c = s->c;
  int r = s->o->rank;
  int axis = kn_te_norm_axis(kn_node_attr_int(s->n, "axis", 0), r);
  if (axis < 0 || !kn_node_attr(s->n, "axis")) return fail(s, "missing or bad axis");
  /* Non-empty inputs and their offsets along the axis. */
  kn_te_tensor *parts[64];
  kn_expr *off[65];
  int np = 0;
  kn_expr *at = kn_te_ix(c, 0);
  for (int k = 0; k < s->n->n_in; k++) {
    kn_te_tensor *t = in[k];
    if (!t || t->rank != r) return fail(s, "input %d of another rank", k);
    for (int i = 0; i < r; i++)
      if (i != axis && !kn_e_equal(t->shape[i], s->o->shape[i]))
        return fail(s, "input %d whose dim %d differs from the output", k, i);
    int64_t ext;
    if (kn_te_ix_const(t->shape[axis], &ext) && ext == 0) continue;
    if (np == 64) return fail(s, "more than 64 inputs");
    parts[np] = t;
    off[np++] = at;
    at = kn_te_ix_add(c, at, t->shape[axis]);
  }
  if (np == 0) return fail(s, "all-empty inputs");
  off[np] = at;
  kn_expr *i = s->idx[axis];
  kn_expr *body = NULL;
  for (int k = np - 1; k >= 0; k--) {
    kn_expr *xi[KN_TE_MAX_RANK];
    memcpy(xi, s->idx, sizeof xi);
    kn_expr *rel = kn_te_ix_sub(c, i, off[k]);
    if (k > 0) rel = kn_te_ix_max(c, rel, kn_te_ix(c, 0)); /* i >= off[k] only when chosen */
    if (k < np - 1)
      rel = kn_te_ix_min(c, rel, kn_te_ix_sub(c, parts[k]->shape[axis], kn_te_ix(c, 1)));
    xi[axis] = rel;
    kn_expr *v = load(s, parts[k], xi);
    body = body ? kn_e_select(c->ec, kn_e_bin(c->ec, KN_E_LT, i, off[k + 1]), v, body) : v;
  }
  return body;
}

/* ONNX Slice start over a batch-sized dim, as an index expression (dims
 * known at compile time go through kn_slice_resolve instead). */
static kn_expr *slice_start(kn_te_ctx *c, int64_t start, int64_t step, kn_expr *dim) {
  kn_expr *s = start < 0 ? kn_te_ix_add(c, dim, kn_te_ix(c, start)) : kn_te_ix(c, start);
  kn_expr *hi = step > 0 ? dim : kn_te_ix_sub(c, dim, kn_te_ix(c, 1));
  return kn_te_ix_min(c, kn_te_ix_max(c, s, kn_te_ix(c, 0)), hi);
}

static kn_expr *slice_def(sh *s) {
  kn_te_ctx *c = s->c;
  int r = s->x->rank;
  if (s->o->rank != r) return fail(s, "output rank");
  int64_t starts[16], ends[16], axes[16], steps[16];
  int ns, ne, na, nst;
  if (!ints_of(s, 1, "starts", starts, &ns, true) || !ints_of(s, 2, "ends", ends, &ne, true))
    return NULL;
  if (!ints_of(s, 3, "axes", axes, &na, false) || !ints_of(s, 4, NULL, steps, &nst, false))
    return NULL;
  if (ne != ns || (na && na != ns) || (nst && nst != ns) || ns > r)
    return fail(s, "starts/ends/axes/steps of different lengths");
  kn_expr *xi[KN_TE_MAX_RANK];
  memcpy(xi, s->idx, sizeof xi);
  /* axes over compile-time dims: resolved by the shared kn_slice_resolve */
  int64_t dims[KN_TE_MAX_RANK] = {0}, s2[16], e2[16], a2[16], st2[16];
  int m = 0;
  for (int k = 0; k < ns; k++) {
    int a = kn_te_norm_axis(na ? axes[k] : k, r);
    int64_t step = nst ? steps[k] : 1;
    if (a < 0) return fail(s, "axis out of range");
    if (step == 0) return fail(s, "step 0");
    if (kn_te_ix_const(s->x->shape[a], &dims[a])) {
      s2[m] = starts[k], e2[m] = ends[k], a2[m] = a, st2[m++] = step;
      continue;
    }
    kn_expr *start = slice_start(c, starts[k], step, s->x->shape[a]);
    xi[a] = kn_te_ix_add(c, start, kn_te_ix_mul(c, s->idx[a], kn_te_ix(c, step)));
  }
  kn_slice sl;
  if (kn_slice_resolve(s->n, r, dims, s2, e2, a2, st2, m, &sl, s->d) < 0) return NULL;
  for (int k = 0; k < m; k++) {
    int a = (int)a2[k];
    int64_t outc;
    if (!kn_te_ix_const(s->o->shape[a], &outc) || outc != sl.count[a])
      return fail(s, "output dim %d that does not match the slice", a);
    xi[a] = kn_te_ix_add(c, kn_te_ix(c, sl.start[a]),
                         kn_te_ix_mul(c, s->idx[a], kn_te_ix(c, sl.step[a])));
  }
  return load(s, s->x, xi);
}

static kn_expr *split_def(sh *s, int out) {
  kn_te_ctx *c = s->c;
  int r = s->x->rank;
  int axis = kn_te_norm_axis(kn_node_attr_int(s->n, "axis", 0), r);
  if (axis < 0 || s->o->rank != r) return fail(s, "axis");
  /* Offsets from the inferred output shapes: output k starts where the
   * outputs before it end. */
  kn_expr *off = kn_te_ix(c, 0);
  for (int k = 0; k < out; k++) off = kn_te_ix_add(c, off, kn_te_dim(c, s->n->out[k], axis));
  kn_expr *xi[KN_TE_MAX_RANK];
  memcpy(xi, s->idx, sizeof xi);
  xi[axis] = kn_te_ix_add(c, s->idx[axis], off);
  int64_t offc, extc, dimc;
  if (kn_te_ix_const(off, &offc) && kn_te_ix_const(s->o->shape[axis], &extc) &&
      kn_te_ix_const(s->x->shape[axis], &dimc) && offc + extc > dimc)
    return fail(s, "outputs longer than the input");
  return load(s, s->x, xi);
}

/* Gather: out[.., j.., ..] = x[.., indices[j..], ..]; an index read at run
 * time follows kn_te_index_read's rule (out of range: 0), a constant one
 * out of range for a constant dim is an error here. */
static kn_expr *gather_def(sh *s, kn_te_tensor *indices) {
  kn_te_ctx *c = s->c;
  int r = s->x->rank, q = indices->rank;
  int axis = kn_te_norm_axis(kn_node_attr_int(s->n, "axis", 0), r);
  if (axis < 0) return fail(s, "axis");
  if (s->o->rank != r + q - 1) return fail(s, "output rank");
  if (indices->dtype != KN_DT_I64 && indices->dtype != KN_DT_I32)
    return fail(s, "indices of dtype %s", kn_dtype_name(indices->dtype));
  kn_expr *dim = s->x->shape[axis];
  kn_expr *g, *valid = NULL;
  int64_t k, dimc;
  int count;
  if (q == 0 && kn_te_const_ints(c, s->n->in[1], &k, 1, &count) && count == 1) {
    if (kn_te_ix_const(dim, &dimc)) {
      if (k < -dimc || k >= dimc) return fail(s, "index %lld out of range", (long long)k);
      g = kn_te_ix(c, k < 0 ? k + dimc : k);
    } else {
      g = kn_te_index_read(c, kn_te_ix(c, k), dim, &valid);
    }
  } else {
    kn_expr *ii[KN_TE_MAX_RANK];
    for (int j = 0; j < q; j++) ii[j] = s->idx[axis + j];
    g = kn_te_index_read(c, load(s, indices, ii), dim, &valid);
  }
  kn_expr *xi[KN_TE_MAX_RANK];
  for (int a = 0; a < r; a++) xi[a] = a < axis ? s->idx[a] : a == axis ? g : s->idx[a + q - 1];
  return kn_te_index_or_zero(c, valid, load(s, s->x, xi));
}

/* GatherElements: out[i] = x[i with i[axis] replaced by indices[i]] (the
 * run-time rule of kn_te_index_read). */
static kn_expr *gather_elements_def(sh *s, kn_te_tensor *indices) {
  int r = s->x->rank;
  int axis = kn_te_norm_axis(kn_node_attr_int(s->n, "axis", 0), r);
  if (axis < 0) return fail(s, "axis");
  if (indices->rank != r || s->o->rank != r) return fail(s, "indices rank");
  if (indices->dtype != KN_DT_I64 && indices->dtype != KN_DT_I32)
    return fail(s, "indices of dtype %s", kn_dtype_name(indices->dtype));
  kn_expr *xi[KN_TE_MAX_RANK], *valid = NULL;
  for (int a = 0; a < r; a++) xi[a] = s->idx[a];
  xi[axis] = kn_te_index_read(s->c, load(s, indices, s->idx), s->x->shape[axis], &valid);
  return kn_te_index_or_zero(s->c, valid, load(s, s->x, xi));
}

/* Trilu: x where col - row >= k (upper) or <= k (lower), else 0; k is input
 * 1 (0 when omitted), read at run time. */
static kn_expr *trilu_def(sh *s, kn_te_tensor **in) {
  kn_te_ctx *c = s->c;
  int r = s->x->rank;
  if (r < 2) return fail(s, "rank < 2");
  kn_expr *k = kn_te_ix(c, 0);
  if (s->n->n_in > 1 && in[1]) {
    if (in[1]->dtype != KN_DT_I64) return fail(s, "k of dtype %s", kn_dtype_name(in[1]->dtype));
    kn_expr *zeros[KN_TE_MAX_RANK];
    for (int i = 0; i < in[1]->rank; i++) zeros[i] = kn_te_ix(c, 0);
    k = load(s, in[1], zeros);
  }
  kn_expr *diff = kn_te_ix_sub(c, s->idx[r - 1], s->idx[r - 2]);
  bool upper = kn_node_attr_int(s->n, "upper", 1) != 0;
  kn_expr *keep = kn_e_bin(c->ec, upper ? KN_E_GE : KN_E_LE, diff, k);
  kn_expr *v = load(s, s->x, s->idx);
  kn_expr *zero = v->dtype == KN_DT_BOOL ? kn_e_const_int(c->ec, KN_DT_BOOL, 0) : kn_te_num(c, v->dtype, 0);
  return kn_e_select(c->ec, keep, v, zero);
}

static kn_expr *expand_def(sh *s) {
  int r = s->o->rank, xr = s->x->rank;
  if (xr > r) return fail(s, "input of higher rank than the output");
  for (int i = 0; i < xr; i++) {
    int64_t e;
    bool one = kn_te_ix_const(s->x->shape[i], &e) && e == 1;
    if (!one && !kn_e_equal(s->x->shape[i], s->o->shape[r - xr + i]))
      return fail(s, "input dim %d that does not broadcast", i);
  }
  return kn_te_bcast_at(s->c, s->x, s->idx, r);
}

/* |v| on index expressions. */
static kn_expr *ix_abs(kn_te_ctx *c, kn_expr *v) {
  return kn_te_ix_max(c, v, kn_te_ix_sub(c, kn_te_ix(c, 0), v));
}

static kn_expr *pad_def(sh *s, kn_te_tensor **in) {
  kn_te_ctx *c = s->c;
  int r = s->x->rank;
  if (s->o->rank != r) return fail(s, "output rank");
  const char *mode = kn_node_attr_string(s->n, "mode", "constant");
  int64_t pads[16], axes[KN_TE_MAX_RANK];
  int np, na = 0;
  if (!ints_of(s, 1, "pads", pads, &np, true)) return NULL;
  int av = kn_te_in_value(s->n, 3);
  if (av >= 0 && !kn_te_const_ints(c, av, axes, KN_TE_MAX_RANK, &na))
    return fail(s, "non-constant axes");
  if (av < 0) {
    na = r;
    for (int a = 0; a < r; a++) axes[a] = a;
  }
  if (np != 2 * na) return fail(s, "pads of length %d", np);
  int64_t pb[KN_TE_MAX_RANK] = {0}, pe[KN_TE_MAX_RANK] = {0};
  for (int k = 0; k < na; k++) {
    int a = kn_te_norm_axis(axes[k], r);
    if (a < 0) return fail(s, "axis %lld", (long long)axes[k]);
    pb[a] = pads[k];
    pe[a] = pads[na + k];
  }
  bool constant = strcmp(mode, "constant") == 0, edge = strcmp(mode, "edge") == 0;
  bool reflect = strcmp(mode, "reflect") == 0, wrap = strcmp(mode, "wrap") == 0;
  if (!constant && !edge && !reflect && !wrap) return fail(s, "mode '%s'", mode);
  kn_expr *xi[KN_TE_MAX_RANK];
  kn_expr *inb = NULL;
  for (int a = 0; a < r; a++) {
    kn_expr *dim = s->x->shape[a];
    int64_t dimc, outc;
    if (kn_te_ix_const(dim, &dimc) && kn_te_ix_const(s->o->shape[a], &outc) &&
        dimc + pb[a] + pe[a] != outc)
      return fail(s, "output dim %d that does not match the pads", a);
    kn_expr *j = kn_te_ix_sub(c, s->idx[a], kn_te_ix(c, pb[a]));
    kn_expr *last = kn_te_ix_sub(c, dim, kn_te_ix(c, 1));
    if (pb[a] <= 0 && pe[a] <= 0) {
      xi[a] = j;
      continue;
    }
    if (constant) {
      if (pb[a] > 0) inb = kn_te_and(c, inb, kn_e_bin(c->ec, KN_E_LE, kn_te_ix(c, 0), j));
      if (pe[a] > 0) inb = kn_te_and(c, inb, kn_e_bin(c->ec, KN_E_LT, j, dim));
    } else if (reflect) {
      if (pb[a] > 0) j = ix_abs(c, j);
      if (pe[a] > 0) j = kn_te_ix_sub(c, last, ix_abs(c, kn_te_ix_sub(c, last, j)));
    } else if (wrap) {
      j = kn_te_ix_mod(c, j, dim);
    }
    /* edge, and the guard of the other modes: clamp the padded sides */
    if (pb[a] > 0) j = kn_te_ix_max(c, j, kn_te_ix(c, 0));
    if (pe[a] > 0) j = kn_te_ix_min(c, j, last);
    xi[a] = j;
  }
  kn_expr *v = load(s, s->x, xi);
  if (!inb) return v;
  kn_expr *pv;
  int cv = kn_te_in_value(s->n, 2);
  double value = kn_node_attr_float(s->n, "value", 0.0f);
  if (cv < 0 || kn_te_const_scalar(c, cv, &value)) {
    pv = kn_te_num(c, s->x->dtype, value);
  } else {
    kn_te_tensor *t = in[2];
    kn_expr *zeros[KN_TE_MAX_RANK];
    for (int i = 0; i < t->rank; i++) zeros[i] = kn_te_ix(c, 0);
    if (t->dtype != s->x->dtype) return fail(s, "constant_value of another dtype");
    pv = load(s, t, zeros);
  }
  return kn_e_select(c->ec, inb, v, pv);
}

static kn_expr *tile_def(sh *s) {
  int r = s->x->rank;
  int64_t reps[16];
  int nr;
  if (!ints_of(s, 1, NULL, reps, &nr, true)) return NULL;
  if (nr != r || s->o->rank != r) return fail(s, "repeats of length %d", nr);
  kn_expr *xi[KN_TE_MAX_RANK];
  for (int a = 0; a < r; a++)
    xi[a] = reps[a] == 1 ? s->idx[a] : kn_te_ix_mod(s->c, s->idx[a], s->x->shape[a]);
  return load(s, s->x, xi);
}

/* Views: out[i...] = in[unflatten(flatten(i...))]. Constant size-1 dims are
 * skipped (read at 0); equal leading and trailing dims map one to one; the
 * rest goes through the flat index of the middle dims. */
static kn_expr *view_def(sh *s) {
  kn_te_ctx *c = s->c;
  kn_te_tensor *x = s->x, *o = s->o;
  int xs[KN_TE_MAX_RANK], os[KN_TE_MAX_RANK], nx = 0, no = 0;
  kn_expr *xi[KN_TE_MAX_RANK];
  int64_t e, xnum = 1, onum = 1;
  bool all_const = true;
  for (int i = 0; i < x->rank; i++) {
    xi[i] = kn_te_ix(c, 0);
    if (kn_te_ix_const(x->shape[i], &e))
      xnum *= e;
    else
      all_const = false;
    if (!(kn_te_ix_const(x->shape[i], &e) && e == 1)) xs[nx++] = i;
  }
  for (int i = 0; i < o->rank; i++) {
    if (kn_te_ix_const(o->shape[i], &e))
      onum *= e;
    else
      all_const = false;
    if (!(kn_te_ix_const(o->shape[i], &e) && e == 1)) os[no++] = i;
  }
  if (all_const && xnum != onum)
    return fail(s, "reshape from %lld to %lld elements", (long long)xnum, (long long)onum);
  int xa = 0, xb = nx, oa = 0, ob = no;
  while (xa < xb && oa < ob && kn_e_equal(x->shape[xs[xa]], o->shape[os[oa]])) {
    xi[xs[xa]] = s->idx[os[oa]];
    xa++, oa++;
  }
  while (xa < xb && oa < ob && kn_e_equal(x->shape[xs[xb - 1]], o->shape[os[ob - 1]])) {
    xi[xs[xb - 1]] = s->idx[os[ob - 1]];
    xb--, ob--;
  }
  if (xa < xb) {
    kn_expr *flat = kn_te_ix(c, 0), *stride = kn_te_ix(c, 1);
    for (int k = ob - 1; k >= oa; k--) {
      flat = kn_te_ix_add(c, flat, kn_te_ix_mul(c, s->idx[os[k]], stride));
      stride = kn_te_ix_mul(c, stride, o->shape[os[k]]);
    }
    stride = kn_te_ix(c, 1);
    for (int k = xb - 1; k >= xa; k--) {
      kn_expr *q = kn_te_ix_div(c, flat, stride);
      xi[xs[k]] = k == xa ? q : kn_te_ix_mod(c, q, x->shape[xs[k]]);
      stride = kn_te_ix_mul(c, stride, x->shape[xs[k]]);
    }
  }
  return load(s, x, xi);
}

kn_te_tensor *kn_te_shape_op(kn_te_ctx *c, const kn_node *n, int out, kn_te_tensor **in,
                             kn_diag *d) {
  if (out != 0 && n->op != KN_OP_SPLIT) return kn_te_unsupported(d, n, "output %d", out);
  if (n->n_in < 1 || !in[0]) return kn_te_unsupported(d, n, "missing input 0");
  const char *suffix = out ? kn_arena_printf(c->ec->arena, "out%d", out) : NULL;
  sh s = {.c = c, .n = n, .d = d, .x = in[0], .o = kn_te_out_compute(c, n, out, suffix)};
  kn_te_axis_exprs(c, s.o, s.idx);
  kn_expr *body = NULL;
  switch (n->op) {
  case KN_OP_TRANSPOSE: body = transpose_def(&s); break;
  case KN_OP_CONCAT: body = concat_def(&s, in); break;
  case KN_OP_SLICE: body = slice_def(&s); break;
  case KN_OP_SPLIT: body = split_def(&s, out); break;
  case KN_OP_GATHER:
    if (n->n_in < 2 || !in[1]) return kn_te_unsupported(d, n, "missing indices");
    body = gather_def(&s, in[1]);
    break;
  case KN_OP_GATHER_ELEMENTS:
    if (n->n_in < 2 || !in[1]) return kn_te_unsupported(d, n, "missing indices");
    body = gather_elements_def(&s, in[1]);
    break;
  case KN_OP_TRILU: body = trilu_def(&s, in); break;
  case KN_OP_EXPAND: body = expand_def(&s); break;
  case KN_OP_PAD: body = pad_def(&s, in); break;
  case KN_OP_TILE: body = tile_def(&s); break;
  case KN_OP_RESHAPE:
  case KN_OP_FLATTEN:
  case KN_OP_SQUEEZE:
  case KN_OP_UNSQUEEZE: body = view_def(&s); break;
  default: return kn_te_unsupported(d, n, "operator in the data-movement library");
  }
  if (!body) return NULL;
  if (body->dtype != s.o->dtype)
    return kn_te_unsupported(d, n, "result dtype %s (inferred %s)", kn_dtype_name(body->dtype),
                             kn_dtype_name(s.o->dtype));
  s.o->body = body;
  return s.o;
}
