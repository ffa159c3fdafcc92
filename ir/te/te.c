/* te.c — TE constructors, the per-op dispatch and the helpers shared by the
 * operator library (te_ops_*.c).
 *
 * Dispatch is by the op's scheduling class from ops.def: ELEMWISE ops live in
 * te_ops_elemwise.c, INJECTIVE and VIEW ops in te_ops_shape.c, contractions,
 * pools and reductions in te_ops_nn.c / te_ops_reduce.c. CONSTANT ops were
 * folded by the graph passes: their output is a placeholder of its data.
 *
 * Shapes come from the graph (inferred before TE is built); definitions
 * trust them for extents and re-check only what they index with, so a
 * malformed graph gives a diagnostic, never an out-of-bounds TE. */
#include "ir/te/te.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/graph/index_family.h"
#include "ir/te/te_ops.h"
#include "ir/shape/spatial.h"
#include "ir/passes/winograd.h"

/* ---- constructors ---- */

kn_te_tensor *kn_te_placeholder(kn_te_ctx *c, const char *name, kn_dtype t, int rank,
                                kn_expr *const *shape, int value) {
  KN_ASSERT(rank >= 0 && rank <= KN_TE_MAX_RANK, "placeholder rank");
  kn_te_tensor *p = KN_NEW(c->ec->arena, kn_te_tensor);
  p->name = kn_arena_strdup(c->ec->arena, name ? name : "ph");
  p->dtype = t;
  p->rank = rank;
  for (int i = 0; i < rank; i++) p->shape[i] = shape[i];
  p->kind = KN_TE_PLACEHOLDER;
  p->value = value;
  return p;
}

kn_expr *kn_te_dim(kn_te_ctx *c, int v, int i) {
  KN_ASSERT(v >= 0 && v < c->g->n_values, "value index");
  const kn_value *val = &c->g->values[v];
  KN_ASSERT(i >= 0 && i < val->shape.rank, "dim index");
  int64_t dim = val->shape.dim[i];
  if (!(val->shape.batch_mask & (1u << i))) return kn_e_int(c->ec, dim);
  kn_expr *n = kn_e_var(c->ec, c->batch);
  return dim == 1 ? n : kn_e_mul(c->ec, kn_e_int(c->ec, dim), n);
}

kn_te_tensor *kn_te_placeholder_for(kn_te_ctx *c, int v) {
  KN_ASSERT(v >= 0 && v < c->g->n_values, "value index");
  const kn_value *val = &c->g->values[v];
  kn_expr *shape[KN_TE_MAX_RANK];
  for (int i = 0; i < val->shape.rank; i++) shape[i] = kn_te_dim(c, v, i);
  return kn_te_placeholder(c, val->name, val->dtype, val->shape.rank, shape, v);
}

kn_te_tensor *kn_te_compute(kn_te_ctx *c, const char *name, kn_dtype t, int rank,
                            kn_expr *const *shape) {
  KN_ASSERT(rank >= 0 && rank <= KN_TE_MAX_RANK, "compute rank");
  kn_te_tensor *p = KN_NEW(c->ec->arena, kn_te_tensor);
  p->name = kn_arena_strdup(c->ec->arena, name ? name : "t");
  p->dtype = t;
  p->rank = rank;
  p->kind = KN_TE_COMPUTE;
  p->value = -1;
  static const char *axis_names[KN_TE_MAX_RANK] = {"i0", "i1", "i2", "i3", "i4", "i5", "i6", "i7"};
  for (int i = 0; i < rank; i++) {
    p->shape[i] = shape[i];
    p->axes[i] = kn_var_new(c->ec, axis_names[i]);
  }
  return p;
}

kn_expr *kn_te_at(kn_te_ctx *c, kn_te_tensor *t, kn_expr **idx) {
  return kn_e_tload(c->ec, t, idx, t->rank);
}

kn_expr *kn_te_bcast_at(kn_te_ctx *c, kn_te_tensor *t, kn_expr **idx, int out_rank) {
  KN_ASSERT(t->rank <= out_rank, "broadcast load of a higher-rank tensor");
  kn_expr *ti[KN_TE_MAX_RANK];
  for (int i = 0; i < t->rank; i++) {
    int64_t ext;
    bool one = kn_te_ix_const(t->shape[i], &ext) && ext == 1;
    ti[i] = one ? kn_te_ix(c, 0) : idx[out_rank - t->rank + i];
  }
  return kn_te_at(c, t, ti);
}

kn_expr *kn_te_bcast_load(kn_te_ctx *c, kn_te_tensor *t, kn_var **out_axes, int out_rank) {
  kn_expr *idx[KN_TE_MAX_RANK];
  for (int i = 0; i < out_rank; i++) idx[i] = kn_e_var(c->ec, out_axes[i]);
  return kn_te_bcast_at(c, t, idx, out_rank);
}

/* ---- dispatch ---- */

kn_te_tensor *kn_te_op_output(kn_te_ctx *c, int node, int output_index, kn_te_tensor **inputs,
                              kn_diag *d) {
  KN_ASSERT(node >= 0 && node < c->g->n_nodes, "node index");
  const kn_node *n = &c->g->nodes[node];
  if (output_index < 0 || output_index >= n->n_out)
    return kn_te_unsupported(d, n, "output %d", output_index);
  int ov = n->out[output_index];
  if (ov < 0 || !c->g->values[ov].shape_known || c->g->values[ov].dtype == KN_DT_INVALID)
    return kn_te_unsupported(d, n, "output %d without an inferred shape/dtype", output_index);
  for (int i = 0; i < n->n_in; i++) {
    if (n->in[i] < 0) continue;
    if (!inputs[i]) return kn_te_unsupported(d, n, "input %d without a tensor", i);
  }
  if (n->op == KN_OP_UNKNOWN) return kn_te_unsupported(d, n, "operator");
  if (kn_spatial_op(n->op)) return kn_te_spatial(c, n, output_index, inputs, d);
  if (kn_winograd_op(n->op)) return kn_te_winograd(c, n, inputs, d);
  if (kn_index_family_has(n->op) && kn_op_class_of(n->op) != KN_CLASS_CONSTANT)
    return kn_te_index_op(c, n, output_index, inputs, d);
  switch (kn_op_class_of(n->op)) {
  case KN_CLASS_ELEMWISE: return kn_te_elemwise(c, n, output_index, inputs, d);
  case KN_CLASS_INJECTIVE:
  case KN_CLASS_VIEW: return kn_te_shape_op(c, n, output_index, inputs, d);
  case KN_CLASS_CONTRACTION: return kn_te_contraction(c, n, output_index, inputs, d);
  case KN_CLASS_REDUCE:
    switch (n->op) {
    case KN_OP_MAX_POOL:
    case KN_OP_AVERAGE_POOL:
    case KN_OP_GLOBAL_AVERAGE_POOL:
    case KN_OP_GLOBAL_MAX_POOL:
    case KN_OP_MAX_POOL_NHWC:
    case KN_OP_AVERAGE_POOL_NHWC:
    case KN_OP_GLOBAL_AVERAGE_POOL_NHWC: return kn_te_pool(c, n, output_index, inputs, d);
    default: return kn_te_reduce_op(c, n, output_index, inputs, d);
    }
  case KN_CLASS_CONSTANT:
    /* Folded by the graph passes; what is left is a constant value. */
    if (!c->g->values[ov].data) return kn_te_unsupported(d, n, "non-constant result");
    return kn_te_placeholder_for(c, ov);
  }
  KN_UNREACHABLE("op class");
  return NULL;
}

kn_te_tensor *kn_te_op(kn_te_ctx *c, int node, kn_te_tensor **inputs, kn_diag *d) {
  return kn_te_op_output(c, node, 0, inputs, d);
}

/* ---- helpers shared by the op families ---- */

kn_te_tensor *kn_te_unsupported(kn_diag *d, const kn_node *n, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  kn_diag_error(d, "node '%s' (%s): %s not supported", n->name, n->op_type ? n->op_type : "?",
                what);
  return NULL;
}

kn_te_tensor *kn_te_stage(kn_te_ctx *c, const kn_node *n, const char *suffix, kn_dtype t, int rank,
                          kn_expr *const *shape) {
  const char *name = suffix ? kn_arena_printf(c->ec->arena, "%s.%s", n->name, suffix) : n->name;
  return kn_te_compute(c, name, t, rank, shape);
}

kn_te_tensor *kn_te_out_compute(kn_te_ctx *c, const kn_node *n, int out, const char *suffix) {
  int v = n->out[out];
  const kn_value *val = &c->g->values[v];
  kn_expr *shape[KN_TE_MAX_RANK];
  for (int i = 0; i < val->shape.rank; i++) shape[i] = kn_te_dim(c, v, i);
  return kn_te_stage(c, n, suffix, val->dtype, val->shape.rank, shape);
}

void kn_te_axis_exprs(kn_te_ctx *c, const kn_te_tensor *t, kn_expr **idx) {
  for (int i = 0; i < t->rank; i++) idx[i] = kn_e_var(c->ec, t->axes[i]);
}

bool kn_te_ix_const(const kn_expr *e, int64_t *v) {
  return e->kind == KN_E_INT && e->dtype == KN_DT_I64 && kn_e_is_const_int(e, v);
}

kn_expr *kn_te_ix(kn_te_ctx *c, int64_t v) { return kn_e_int(c->ec, v); }

kn_expr *kn_te_ix_add(kn_te_ctx *c, kn_expr *a, kn_expr *b) {
  int64_t x, y, r;
  bool ca = kn_te_ix_const(a, &x), cb = kn_te_ix_const(b, &y);
  if (ca && cb && !__builtin_add_overflow(x, y, &r)) return kn_te_ix(c, r);
  if (ca && x == 0) return b;
  if (cb && y == 0) return a;
  if (ca) return kn_e_add(c->ec, b, a); /* constants to the right */
  return kn_e_add(c->ec, a, b);
}

kn_expr *kn_te_ix_sub(kn_te_ctx *c, kn_expr *a, kn_expr *b) {
  int64_t x, y, r;
  bool ca = kn_te_ix_const(a, &x), cb = kn_te_ix_const(b, &y);
  if (ca && cb && !__builtin_sub_overflow(x, y, &r)) return kn_te_ix(c, r);
  if (cb && y == 0) return a;
  if (kn_e_equal(a, b)) return kn_te_ix(c, 0);
  return kn_e_sub(c->ec, a, b);
}

kn_expr *kn_te_ix_mul(kn_te_ctx *c, kn_expr *a, kn_expr *b) {
  int64_t x, y, r;
  bool ca = kn_te_ix_const(a, &x), cb = kn_te_ix_const(b, &y);
  if (ca && cb && !__builtin_mul_overflow(x, y, &r)) return kn_te_ix(c, r);
  if ((ca && x == 0) || (cb && y == 0)) return kn_te_ix(c, 0);
  if (ca && x == 1) return b;
  if (cb && y == 1) return a;
  if (ca) return kn_e_mul(c->ec, b, a);
  return kn_e_mul(c->ec, a, b);
}

kn_expr *kn_te_ix_div(kn_te_ctx *c, kn_expr *a, kn_expr *b) {
  int64_t x, y;
  bool ca = kn_te_ix_const(a, &x), cb = kn_te_ix_const(b, &y);
  if (cb && y == 1) return a;
  if (ca && cb && y != 0 && !(x == INT64_MIN && y == -1)) return kn_te_ix(c, kn_floordiv_i64(x, y));
  if (ca && x == 0) return a;
  return kn_e_div(c->ec, a, b);
}

kn_expr *kn_te_ix_mod(kn_te_ctx *c, kn_expr *a, kn_expr *b) {
  int64_t x, y;
  bool ca = kn_te_ix_const(a, &x), cb = kn_te_ix_const(b, &y);
  if (cb && y == 1) return kn_te_ix(c, 0);
  if (ca && cb && y != 0 && !(x == INT64_MIN && y == -1))
    return kn_te_ix(c, kn_floormod_i64(x, y));
  if (ca && x == 0) return a;
  return kn_e_mod(c->ec, a, b);
}

kn_expr *kn_te_ix_min(kn_te_ctx *c, kn_expr *a, kn_expr *b) {
  int64_t x, y;
  if (kn_te_ix_const(a, &x) && kn_te_ix_const(b, &y)) return kn_te_ix(c, x < y ? x : y);
  if (kn_e_equal(a, b)) return a;
  return kn_e_min(c->ec, a, b);
}

kn_expr *kn_te_ix_max(kn_te_ctx *c, kn_expr *a, kn_expr *b) {
  int64_t x, y;
  if (kn_te_ix_const(a, &x) && kn_te_ix_const(b, &y)) return kn_te_ix(c, x > y ? x : y);
  if (kn_e_equal(a, b)) return a;
  return kn_e_max(c->ec, a, b);
}

kn_expr *kn_te_ix_clamp(kn_te_ctx *c, kn_expr *i, kn_expr *extent) {
  return kn_te_ix_min(c, kn_te_ix_max(c, i, kn_te_ix(c, 0)),
                      kn_te_ix_sub(c, extent, kn_te_ix(c, 1)));
}

kn_expr *kn_te_ix_in_range(kn_te_ctx *c, kn_expr *i, kn_expr *extent) {
  int64_t x, e;
  bool ci = kn_te_ix_const(i, &x), ce = kn_te_ix_const(extent, &e);
  if (ci && ce) return (x >= 0 && x < e) ? NULL : kn_e_const_int(c->ec, KN_DT_BOOL, 0);
  kn_expr *lo = (ci && x >= 0) ? NULL : kn_e_bin(c->ec, KN_E_LE, kn_te_ix(c, 0), i);
  kn_expr *hi = kn_e_bin(c->ec, KN_E_LT, i, extent);
  return kn_te_and(c, lo, hi);
}

kn_expr *kn_te_index_wrap(kn_te_ctx *c, kn_expr *v, kn_expr *dim) {
  v = kn_e_cast(c->ec, KN_DT_I64, v);
  kn_expr *neg = kn_e_bin(c->ec, KN_E_LT, v, kn_te_ix(c, 0));
  return kn_e_select(c->ec, neg, kn_te_ix_add(c, v, dim), v);
}

kn_expr *kn_te_index_read(kn_te_ctx *c, kn_expr *v, kn_expr *dim, kn_expr **valid) {
  kn_expr *w = kn_te_index_wrap(c, v, dim);
  *valid = kn_te_and(c, *valid, kn_te_ix_in_range(c, w, dim));
  return kn_te_ix_clamp(c, w, dim);
}

kn_expr *kn_te_index_or_zero(kn_te_ctx *c, kn_expr *valid, kn_expr *e) {
  return valid ? kn_e_select(c->ec, valid, e, kn_te_num(c, e->dtype, 0)) : e;
}

kn_expr *kn_te_and(kn_te_ctx *c, kn_expr *a, kn_expr *b) {
  if (!a) return b;
  if (!b) return a;
  return kn_e_bin(c->ec, KN_E_AND, a, b);
}

kn_expr *kn_te_num(kn_te_ctx *c, kn_dtype t, double v) {
  if (kn_dtype_is_float(t)) return kn_e_float(c->ec, t, v);
  if (t == KN_DT_BOOL) return kn_e_const_int(c->ec, t, v != 0);
  return kn_e_const_int(c->ec, t, kn_f2int_sat(t, v));
}

kn_expr *kn_te_clamp_num(kn_te_ctx *c, kn_expr *v, double lo, double hi) {
  kn_expr *low = kn_e_max_num(c->ec, v, kn_e_float(c->ec, v->dtype, lo));
  return kn_e_min_num(c->ec, low, kn_e_float(c->ec, v->dtype, hi));
}

static bool value_is_const(const kn_te_ctx *c, int v) {
  if (v < 0 || v >= c->g->n_values) return false;
  const kn_value *val = &c->g->values[v];
  if (!val->data || !val->shape_known || val->shape.batch_mask) return false;
  if (val->batch_coef) {
    int64_t numel = kn_shape_numel_max(&val->shape, 1);
    for (int64_t i = 0; i < numel; i++)
      if (val->batch_coef[i]) return false;
  }
  return true;
}

bool kn_te_const_ints(const kn_te_ctx *c, int v, int64_t *out, int max, int *count) {
  if (!value_is_const(c, v)) return false;
  const kn_value *val = &c->g->values[v];
  int64_t numel = kn_shape_numel_max(&val->shape, 1);
  if (numel < 0 || numel > max) return false;
  for (int64_t i = 0; i < numel; i++) {
    if (val->dtype == KN_DT_I64)
      out[i] = ((const int64_t *)val->data)[i];
    else if (val->dtype == KN_DT_I32)
      out[i] = ((const int32_t *)val->data)[i];
    else
      return false;
  }
  *count = (int)numel;
  return true;
}

bool kn_te_const_scalar(const kn_te_ctx *c, int v, double *out) {
  if (!value_is_const(c, v)) return false;
  const kn_value *val = &c->g->values[v];
  if (kn_shape_numel_max(&val->shape, 1) != 1) return false;
  const void *p = val->data;
  switch (val->dtype) {
  case KN_DT_F32: *out = *(const float *)p; return true;
  case KN_DT_F64: *out = *(const double *)p; return true;
  case KN_DT_F16: *out = kn_f16_to_f32(*(const uint16_t *)p); return true;
  case KN_DT_BF16: *out = kn_bf16_to_f32(*(const uint16_t *)p); return true;
  case KN_DT_F8E4M3FN:
  case KN_DT_F8E4M3FNUZ:
  case KN_DT_F8E5M2:
  case KN_DT_F8E8M0:
  case KN_DT_F4E2M1:
  case KN_DT_F8E5M2FNUZ: *out = kn_f8_to_f32(val->dtype, *(const uint8_t *)p); return true;
  case KN_DT_I64: *out = (double)*(const int64_t *)p; return true;
  case KN_DT_I32: *out = *(const int32_t *)p; return true;
  case KN_DT_I16: *out = *(const int16_t *)p; return true;
  case KN_DT_I8:
  case KN_DT_I2:
  case KN_DT_I4: *out = *(const int8_t *)p; return true;
  case KN_DT_U2:
  case KN_DT_U4: *out = *(const uint8_t *)p; return true;
  case KN_DT_U8: *out = *(const uint8_t *)p; return true;
  case KN_DT_U16: *out = *(const uint16_t *)p; return true;
  case KN_DT_U32: *out = *(const uint32_t *)p; return true;
  case KN_DT_U64: *out = (double)*(const uint64_t *)p; return true;
  case KN_DT_BOOL: *out = *(const uint8_t *)p != 0; return true;
  default: return false;
  }
}

bool kn_te_const_scalar_int(const kn_te_ctx *c, int v, int64_t *out) {
  if (!value_is_const(c, v)) return false;
  const kn_value *val = &c->g->values[v];
  if (!kn_dtype_is_int(val->dtype) || kn_dtype_is_subbyte_int(val->dtype) ||
      kn_shape_numel_max(&val->shape, 1) != 1)
    return false;
  uint64_t bits = 0; /* the value's bytes, sign- or zero-extended */
  size_t size = kn_dtype_size(val->dtype);
  memcpy(&bits, val->data, size);
  if (size < 8 && kn_dtype_is_signed(val->dtype) && (bits >> (8 * size - 1)) & 1) bits |= ~0ull << (8 * size);
  *out = (int64_t)bits;
  return true;
}

int kn_te_norm_axis(int64_t axis, int rank) {
  if (axis < -(int64_t)rank || axis >= rank) return -1;
  return (int)(axis < 0 ? axis + rank : axis);
}
