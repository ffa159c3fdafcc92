/* te_ops_reduce.c — reductions and normalisations: ReduceMean/Sum/Max/Min/
 * Prod/L1/L2/SumSquare/LogSum/LogSumExp, ArgMax/ArgMin, Softmax, LogSoftmax,
 * Hardmax,
 * LayerNormalization; plus the reduction-stage helper
 * (kn_te_red_*) the pools use too.
 *
 * Shape of every definition: one or more reduction stages (a compute whose
 * body is a single KN_E_REDUCE, indexed by the kept axes in order), then an
 * injective epilogue compute that reads them. A later stage may read an
 * earlier one (softmax's sum reads the max; layernorm's variance reads the
 * sum). Reductions are never nested inside larger expressions. */
#include "ir/te/te_ops.h"

void kn_te_red_begin(kn_te_ctx *c, const kn_node *n, const char *suffix, kn_dtype t, int rank,
                     kn_expr *const *shape, const bool *reduced, kn_te_red *r) {
  static const char *names[KN_TE_MAX_RANK] = {"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"};
  kn_expr *kept_shape[KN_TE_MAX_RANK] = {0};
  int nk = 0;
  r->rank = rank;
  r->n_red = 0;
  for (int i = 0; i < rank; i++) {
    r->reduced[i] = reduced[i];
    if (!reduced[i]) kept_shape[nk++] = shape[i];
  }
  r->stage = kn_te_stage(c, n, suffix, t, nk, kept_shape);
  int k = 0;
  for (int i = 0; i < rank; i++) {
    if (reduced[i]) {
      r->vars[r->n_red] = kn_var_new(c->ec, names[r->n_red]);
      r->extents[r->n_red] = shape[i];
      r->src[i] = kn_e_var(c->ec, r->vars[r->n_red]);
      r->n_red++;
    } else {
      r->src[i] = kn_e_var(c->ec, r->stage->axes[k++]);
    }
  }
}

void kn_te_red_end(kn_te_ctx *c, kn_te_red *r, kn_reduce_op op, kn_expr *source) {
  r->stage->body = kn_e_reduce(c->ec, op, r->vars, r->extents, r->n_red, source);
}

kn_expr *kn_te_red_at(kn_te_ctx *c, const kn_te_red *r, kn_expr *const *idx) {
  kn_expr *si[KN_TE_MAX_RANK];
  int k = 0;
  for (int i = 0; i < r->rank; i++)
    if (!r->reduced[i]) si[k++] = idx[i];
  return kn_te_at(c, r->stage, si);
}

kn_expr *kn_te_red_count(kn_te_ctx *c, const kn_te_red *r) {
  kn_expr *n = kn_te_ix(c, 1);
  for (int i = 0; i < r->n_red; i++) n = kn_te_ix_mul(c, n, r->extents[i]);
  return n;
}

/* count as a float of dtype t */
static kn_expr *count_f(kn_te_ctx *c, const kn_te_red *r, kn_dtype t) {
  return kn_e_cast(c->ec, t, kn_te_red_count(c, r));
}

/* The Reduce* family: an optional max stage (LogSumExp), the reduction of
 * f(x), and an epilogue for keepdims and g(result) (Mean, L2, LogSum...). */
static kn_te_tensor *reduce_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor *x, kn_diag *d) {
  int r = x->rank;
  int64_t axes[KN_TE_MAX_RANK + 1];
  int na = 0;
  int av = kn_te_in_value(n, 1);
  if (av >= 0) {
    if (!kn_te_const_ints(c, av, axes, KN_TE_MAX_RANK + 1, &na))
      return kn_te_unsupported(d, n, "non-constant axes");
  } else {
    const int64_t *a = kn_node_attr_ints(n, "axes", &na);
    if (na > KN_TE_MAX_RANK) return kn_te_unsupported(d, n, "axes of length %d", na);
    for (int i = 0; i < na; i++) axes[i] = a[i];
  }
  bool keep = kn_node_attr_int(n, "keepdims", 1) != 0;
  bool red[KN_TE_MAX_RANK] = {0};
  for (int i = 0; i < na; i++) {
    int a = kn_te_norm_axis(axes[i], r);
    if (a < 0) return kn_te_unsupported(d, n, "axis %lld", (long long)axes[i]);
    red[a] = true;
  }
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  kn_expr *idx[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  if (na == 0 && kn_node_attr_int(n, "noop_with_empty_axes", 0)) {
    if (o->rank != r) return kn_te_unsupported(d, n, "output rank");
    o->body = kn_te_at(c, x, idx);
    return o;
  }
  if (na == 0)
    for (int i = 0; i < r; i++) red[i] = true;
  int nred = 0;
  for (int i = 0; i < r; i++) nred += red[i];
  if (o->rank != (keep ? r : r - nred) || o->dtype != x->dtype)
    return kn_te_unsupported(d, n, "output shape/dtype");
  kn_op op_kind = n->op;
  kn_reduce_op op = op_kind == KN_OP_REDUCE_MAX    ? KN_RED_MAX
                    : op_kind == KN_OP_REDUCE_MIN  ? KN_RED_MIN
                    : op_kind == KN_OP_REDUCE_PROD ? KN_RED_PROD
                                                   : KN_RED_SUM;
  bool mean = op_kind == KN_OP_REDUCE_MEAN;
  bool lse = op_kind == KN_OP_REDUCE_LOG_SUM_EXP;
  /* a function applied after the reduction */
  bool post = mean || lse || op_kind == KN_OP_REDUCE_L2 || op_kind == KN_OP_REDUCE_LOG_SUM;
  bool float_only = post;
  /* bool Min / Max are logical and / or: reduced as uint8 0/1 (the empty
   * set gives 255 / 0, i.e. true / false), cast back in the epilogue */
  bool bool_mm = x->dtype == KN_DT_BOOL && (op == KN_RED_MAX || op == KN_RED_MIN);
  if ((x->dtype == KN_DT_BOOL && !bool_mm) || (float_only && !kn_dtype_is_float(x->dtype)))
    return kn_te_unsupported(d, n, "dtype %s", kn_dtype_name(x->dtype));
  /* sums and products of 16-bit floats accumulate in f32 (kn_te_acc_dtype) */
  kn_dtype rt = bool_mm ? KN_DT_U8 : op == KN_RED_MAX || op == KN_RED_MIN ? x->dtype : kn_te_acc_dtype(x->dtype);
  kn_expr_ctx *ec = c->ec;
  kn_te_red mx = {0}, rs;
  if (lse) { /* log(sum(exp(x - max))) + max, without overflow */
    kn_te_red_begin(c, n, "max", x->dtype, r, x->shape, red, &mx);
    kn_te_red_end(c, &mx, KN_RED_MAX, kn_te_at(c, x, mx.src));
  }
  bool direct = !keep && !post && !bool_mm && rt == x->dtype;
  kn_te_red_begin(c, n, direct ? NULL : "red", rt, r, x->shape, red, &rs);
  kn_expr *v = kn_e_cast(ec, rt, kn_te_at(c, x, rs.src));
  switch (op_kind) {
  case KN_OP_REDUCE_L1:
    v = kn_dtype_is_float(v->dtype) ? kn_e_call1(ec, KN_FN_ABS, v)
        : kn_dtype_is_signed(v->dtype)
            ? kn_e_select(ec, kn_e_bin(ec, KN_E_LT, v, kn_te_num(c, v->dtype, 0)),
                          kn_e_sub(ec, kn_te_num(c, v->dtype, 0), v), v)
            : v;
    break;
  case KN_OP_REDUCE_L2:
  case KN_OP_REDUCE_SUM_SQUARE: v = kn_e_mul(ec, v, v); break;
  case KN_OP_REDUCE_LOG_SUM_EXP:
    v = kn_e_call1(ec, KN_FN_EXP, kn_e_sub(ec, v, kn_e_cast(ec, rt, kn_te_red_at(c, &mx, rs.src))));
    break;
  default: break;
  }
  kn_te_red_end(c, &rs, op, v);
  if (direct) return rs.stage;
  /* epilogue: keepdims re-indexing and/or the function after the reduction */
  kn_expr *full[KN_TE_MAX_RANK];
  for (int i = 0, k = 0; i < r; i++) full[i] = keep ? idx[i] : red[i] ? kn_te_ix(c, 0) : idx[k++];
  v = kn_te_red_at(c, &rs, full);
  switch (op_kind) {
  case KN_OP_REDUCE_MEAN: v = kn_e_div(ec, v, count_f(c, &rs, rt)); break;
  case KN_OP_REDUCE_L2: v = kn_e_call1(ec, KN_FN_SQRT, v); break;
  case KN_OP_REDUCE_LOG_SUM: v = kn_e_call1(ec, KN_FN_LOG, v); break;
  case KN_OP_REDUCE_LOG_SUM_EXP:
    v = kn_e_add(ec, kn_e_call1(ec, KN_FN_LOG, v), kn_e_cast(ec, rt, kn_te_red_at(c, &mx, full)));
    break;
  default: break;
  }
  o->body = kn_e_cast(ec, x->dtype, v); /* bool_mm: back to bool; 16-bit floats: rounded once */
  return o;
}

/* x is the reduction's best (max or min) value: equal, or NaN, since a NaN
 * makes the best NaN (ArgMax / Hardmax pick a NaN, as numpy's argmax). */
static kn_expr *is_best(kn_te_ctx *c, kn_expr *x, kn_expr *best) {
  if (!kn_dtype_is_float(x->dtype)) return kn_e_bin(c->ec, KN_E_EQ, x, best);
  return kn_e_bin(c->ec, KN_E_OR, kn_e_bin(c->ec, KN_E_EQ, x, best), kn_e_bin(c->ec, KN_E_NE, x, x));
}

/* ArgMax / ArgMin over one axis: a max (min) stage, then the smallest (or,
 * with select_last_index, the largest) index holding it; int64 result. */
static kn_te_tensor *arg_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor *x, kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  int r = x->rank;
  int axis = kn_te_norm_axis(kn_node_attr_int(n, "axis", 0), r);
  if (axis < 0) return kn_te_unsupported(d, n, "axis");
  if (x->dtype == KN_DT_BOOL) return kn_te_unsupported(d, n, "dtype bool");
  bool keep = kn_node_attr_int(n, "keepdims", 1) != 0;
  bool last = kn_node_attr_int(n, "select_last_index", 0) != 0;
  bool is_max = n->op == KN_OP_ARG_MAX;
  bool red[KN_TE_MAX_RANK] = {0};
  red[axis] = true;
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  if (o->rank != (keep ? r : r - 1) || o->dtype != KN_DT_I64)
    return kn_te_unsupported(d, n, "output shape/dtype");
  kn_te_red best, at;
  kn_te_red_begin(c, n, "best", x->dtype, r, x->shape, red, &best);
  kn_te_red_end(c, &best, is_max ? KN_RED_MAX : KN_RED_MIN, kn_te_at(c, x, best.src));
  kn_te_red_begin(c, n, keep ? "index" : NULL, KN_DT_I64, r, x->shape, red, &at);
  kn_expr *hit = is_best(c, kn_te_at(c, x, at.src), kn_te_red_at(c, &best, at.src));
  kn_expr *none = kn_e_int(ec, last ? -1 : INT64_MAX);
  kn_te_red_end(c, &at, last ? KN_RED_MAX : KN_RED_MIN, kn_e_select(ec, hit, at.src[axis], none));
  if (!keep) return at.stage;
  kn_expr *idx[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  o->body = kn_te_red_at(c, &at, idx);
  return o;
}

/* Softmax / LogSoftmax: max stage, sum-of-exp stage, epilogue. Opset >= 13
 * normalises over one axis (default -1); older opsets over all axes from
 * `axis` (default 1) on, as if flattened to 2-D. */
static kn_te_tensor *softmax_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor *x, kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  int r = x->rank;
  bool v13 = c->g->opset >= 13;
  int axis = kn_te_norm_axis(kn_node_attr_int(n, "axis", v13 ? -1 : 1), r);
  if (axis < 0) return kn_te_unsupported(d, n, "axis");
  if (!kn_dtype_is_float(x->dtype))
    return kn_te_unsupported(d, n, "dtype %s", kn_dtype_name(x->dtype));
  bool red[KN_TE_MAX_RANK] = {0};
  for (int i = axis; i < (v13 ? axis + 1 : r); i++) red[i] = true;
  /* 16-bit floats: exp, its sum and the division in f32, rounded once */
  kn_dtype t = kn_te_acc_dtype(x->dtype);
  kn_te_red mx, sm;
  kn_te_red_begin(c, n, "max", x->dtype, r, x->shape, red, &mx);
  kn_te_red_end(c, &mx, KN_RED_MAX, kn_te_at(c, x, mx.src));
  kn_te_red_begin(c, n, "sum", t, r, x->shape, red, &sm);
  kn_expr *shifted =
      kn_e_sub(ec, kn_e_cast(ec, t, kn_te_at(c, x, sm.src)), kn_e_cast(ec, t, kn_te_red_at(c, &mx, sm.src)));
  kn_te_red_end(c, &sm, KN_RED_SUM, kn_e_call1(ec, KN_FN_EXP, shifted));
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  if (o->rank != r || o->dtype != x->dtype) return kn_te_unsupported(d, n, "output shape/dtype");
  kn_expr *idx[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  kn_expr *z = kn_e_sub(ec, kn_e_cast(ec, t, kn_te_at(c, x, idx)), kn_e_cast(ec, t, kn_te_red_at(c, &mx, idx)));
  kn_expr *s = kn_te_red_at(c, &sm, idx);
  if (n->op == KN_OP_LOG_SOFTMAX)
    o->body = kn_e_sub(ec, z, kn_e_call1(ec, KN_FN_LOG, s));
  else
    o->body = kn_e_div(ec, kn_e_call1(ec, KN_FN_EXP, z), s);
  o->body = kn_e_cast(ec, x->dtype, o->body);
  return o;
}

/* Hardmax: 1 at the first index of the maximum along `axis`, else 0 (the
 * ArgMax stages of arg_def, then a compare). Opset < 13 flattens the axes
 * from `axis` on; only the case where that is one axis is supported. */
static kn_te_tensor *hardmax_def(kn_te_ctx *c, const kn_node *n, kn_te_tensor *x, kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  int r = x->rank;
  bool v13 = c->g->opset >= 13;
  int axis = kn_te_norm_axis(kn_node_attr_int(n, "axis", v13 ? -1 : 1), r);
  if (axis < 0) return kn_te_unsupported(d, n, "axis");
  if (!v13 && axis != r - 1) return kn_te_unsupported(d, n, "opset < 13 over several axes");
  if (!kn_dtype_is_float(x->dtype)) return kn_te_unsupported(d, n, "dtype %s", kn_dtype_name(x->dtype));
  bool red[KN_TE_MAX_RANK] = {0};
  red[axis] = true;
  kn_te_red best, at;
  kn_te_red_begin(c, n, "max", x->dtype, r, x->shape, red, &best);
  kn_te_red_end(c, &best, KN_RED_MAX, kn_te_at(c, x, best.src));
  kn_te_red_begin(c, n, "index", KN_DT_I64, r, x->shape, red, &at);
  kn_expr *hit = is_best(c, kn_te_at(c, x, at.src), kn_te_red_at(c, &best, at.src));
  kn_te_red_end(c, &at, KN_RED_MIN, kn_e_select(ec, hit, at.src[axis], kn_e_int(ec, INT64_MAX)));
  kn_te_tensor *o = kn_te_out_compute(c, n, 0, NULL);
  if (o->rank != r || o->dtype != x->dtype) return kn_te_unsupported(d, n, "output shape/dtype");
  kn_expr *idx[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  kn_expr *is_first = kn_e_bin(ec, KN_E_EQ, idx[axis], kn_te_red_at(c, &at, idx));
  o->body = kn_e_select(ec, is_first, kn_te_num(c, x->dtype, 1), kn_te_num(c, x->dtype, 0));
  return o;
}

/* LayerNormalization over axes [axis, rank): stage 1 sums x, stage 2 sums
 * (x - mean)^2 reading stage 1; outputs Y, Mean, InvStdDev. */
static kn_te_tensor *layer_norm_def(kn_te_ctx *c, const kn_node *n, int out, kn_te_tensor **in,
                                    kn_diag *d) {
  kn_expr_ctx *ec = c->ec;
  kn_te_tensor *x = in[0];
  int r = x->rank;
  int axis = kn_te_norm_axis(kn_node_attr_int(n, "axis", -1), r);
  if (axis < 0) return kn_te_unsupported(d, n, "axis");
  kn_dtype xt = x->dtype;
  if (!kn_dtype_is_float(xt)) return kn_te_unsupported(d, n, "dtype %s", kn_dtype_name(xt));
  kn_te_tensor *scale = n->n_in > 1 ? in[1] : NULL;
  kn_te_tensor *bias = n->n_in > 2 ? in[2] : NULL;
  if (!scale) return kn_te_unsupported(d, n, "missing scale");
  if (scale->rank > r || (bias && bias->rank > r) || scale->dtype != xt ||
      (bias && bias->dtype != xt))
    return kn_te_unsupported(d, n, "scale/bias of this shape/dtype");
  bool red[KN_TE_MAX_RANK] = {0};
  for (int i = axis; i < r; i++) red[i] = true;
  /* 16-bit floats: the statistics and the normalisation in f32, rounded once */
  kn_dtype t = kn_te_acc_dtype(xt);
  kn_te_red s1, s2;
  kn_te_red_begin(c, n, "sum", t, r, x->shape, red, &s1);
  kn_te_red_end(c, &s1, KN_RED_SUM, kn_e_cast(ec, t, kn_te_at(c, x, s1.src)));
  kn_expr *count = count_f(c, &s1, t);
  kn_te_red_begin(c, n, "sqsum", t, r, x->shape, red, &s2);
  kn_expr *dev =
      kn_e_sub(ec, kn_e_cast(ec, t, kn_te_at(c, x, s2.src)), kn_e_div(ec, kn_te_red_at(c, &s1, s2.src), count));
  kn_te_red_end(c, &s2, KN_RED_SUM, kn_e_mul(ec, dev, dev));

  kn_te_tensor *o = kn_te_out_compute(c, n, out, out == 0 ? NULL : out == 1 ? "mean" : "invstd");
  /* Mean and InvStdDev are float32 (stash_type) for 16-bit inputs */
  if (o->rank != r || (o->dtype != xt && !(out > 0 && o->dtype == t)))
    return kn_te_unsupported(d, n, "output %d shape/dtype", out);
  kn_expr *idx[KN_TE_MAX_RANK];
  kn_te_axis_exprs(c, o, idx);
  kn_expr *mean = kn_e_div(ec, kn_te_red_at(c, &s1, idx), count);
  float eps = kn_node_attr_float(n, "epsilon", 1e-5f);
  kn_expr *var = kn_e_div(ec, kn_te_red_at(c, &s2, idx), count);
  kn_expr *stddev = kn_e_call1(ec, KN_FN_SQRT, kn_e_add(ec, var, kn_te_num(c, t, eps)));
  if (out == 1) {
    o->body = mean;
  } else if (out == 2) {
    o->body = kn_e_div(ec, kn_te_num(c, t, 1), stddev);
  } else {
    kn_expr *y = kn_e_div(ec, kn_e_sub(ec, kn_e_cast(ec, t, kn_te_at(c, x, idx)), mean), stddev);
    y = kn_e_mul(ec, y, kn_e_cast(ec, t, kn_te_bcast_at(c, scale, idx, r)));
    if (bias) y = kn_e_add(ec, y, kn_e_cast(ec, t, kn_te_bcast_at(c, bias, idx, r)));
    o->body = y;
  }
  o->body = kn_e_cast(ec, o->dtype, o->body);
  return o;
}

kn_te_tensor *kn_te_reduce_op(kn_te_ctx *c, const kn_node *n, int out, kn_te_tensor **in,
                              kn_diag *d) {
  if (n->n_in < 1 || !in[0]) return kn_te_unsupported(d, n, "missing input 0");
  if (out != 0 && n->op != KN_OP_LAYER_NORM) return kn_te_unsupported(d, n, "output %d", out);
  switch (n->op) {
  case KN_OP_REDUCE_MEAN:
  case KN_OP_REDUCE_SUM:
  case KN_OP_REDUCE_MAX:
  case KN_OP_REDUCE_MIN:
  case KN_OP_REDUCE_PROD:
  case KN_OP_REDUCE_L1:
  case KN_OP_REDUCE_L2:
  case KN_OP_REDUCE_SUM_SQUARE:
  case KN_OP_REDUCE_LOG_SUM:
  case KN_OP_REDUCE_LOG_SUM_EXP: return reduce_def(c, n, in[0], d);
  case KN_OP_ARG_MAX:
  case KN_OP_ARG_MIN: return arg_def(c, n, in[0], d);
  case KN_OP_SOFTMAX:
  case KN_OP_LOG_SOFTMAX: return softmax_def(c, n, in[0], d);
  case KN_OP_HARDMAX: return hardmax_def(c, n, in[0], d);
  case KN_OP_LAYER_NORM: return layer_norm_def(c, n, out, in, d);
  default: return kn_te_unsupported(d, n, "operator in the reduction library");
  }
}
