/* shape_infer_index.c — shape and dtype rules of the [indexing, scans,
 * bitwise, einsum] family (index_family.h), the family's membership and
 * arity, and the Einsum equation parser.
 *
 * Inputs that decide an output shape (TopK's K, OneHot's depth, a window's
 * size) must be known at compile time; everything else (CumSum's axis,
 * indices, write positions) is read at run time by the kernels. Batch dims
 * pass through where an output dim is an input dim. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "ir/graph/index_family.h"
#include "ir/shape/shape_infer_impl.h"

#define SHAPE_STR(s) kn_shape_str((s), (char[160]){0}, 160)

bool kn_index_family_arity(kn_op op, int *max_in, int *max_out) {
  *max_out = 1;
  switch (op) {
  case KN_OP_CUM_SUM: case KN_OP_CUM_PROD: case KN_OP_GATHER_ND: case KN_OP_REVERSE_SEQUENCE:
  case KN_OP_BIT_SHIFT: case KN_OP_BITWISE_AND: case KN_OP_BITWISE_OR: case KN_OP_BITWISE_XOR:
    *max_in = 2; return true;
  case KN_OP_TOP_K: *max_in = 3, *max_out = 2; return true;
  case KN_OP_TOP_K_RANK: *max_in = 1; return true;
  case KN_OP_SCATTER_ELEMENTS: case KN_OP_SCATTER: case KN_OP_SCATTER_ND:
  case KN_OP_TENSOR_SCATTER: case KN_OP_ONE_HOT: *max_in = 3; return true;
  case KN_OP_EINSUM: *max_in = KN_EINSUM_MAX_IN; return true;
  case KN_OP_EYE_LIKE: case KN_OP_BITWISE_NOT: case KN_OP_DET: case KN_OP_HANN_WINDOW:
  case KN_OP_HAMMING_WINDOW: case KN_OP_BLACKMAN_WINDOW: *max_in = 1; return true;
  default: return false;
  }
}

bool kn_index_family_has(kn_op op) {
  int a, b;
  return kn_index_family_arity(op, &a, &b);
}

/* ---- Einsum equations ---- */

static int label_of(char ch) {
  if (ch >= 'a' && ch <= 'z') return ch - 'a';
  if (ch >= 'A' && ch <= 'Z') return 26 + ch - 'A';
  return -1;
}

/* One term ("ab...c"): its labels, the ellipsis expanded to `ell` dims
 * (labels 52 + (max_ell - ell) ...), or the count of explicit labels. */
static int parse_term(const char *s, size_t len, int rank, int max_ell, int *labels, int *n_out,
                      bool *has_ell, char *err, size_t es) {
  int explicit_n = 0;
  *has_ell = false;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == ' ') continue;
    if (s[i] == '.') {
      if (*has_ell || i + 2 >= len + 0 || s[i + 1] != '.' || s[i + 2] != '.')
        return snprintf(err, es, "malformed ellipsis"), -1;
      *has_ell = true;
      i += 2;
      continue;
    }
    if (label_of(s[i]) < 0) return snprintf(err, es, "bad label '%c'", s[i]), -1;
    explicit_n++;
  }
  int ell = rank < 0 ? max_ell : rank - explicit_n;
  if (rank >= 0 && (ell < 0 || (!*has_ell && ell != 0)))
    return snprintf(err, es, "term '%.*s' does not fit rank %d", (int)len, s, rank), -1;
  if (ell > max_ell) return snprintf(err, es, "ellipsis wider than the output"), -1;
  int k = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == ' ') continue;
    if (s[i] == '.') {
      for (int j = 0; j < ell; j++) labels[k++] = 52 + (max_ell - ell) + j;
      i += 2;
      continue;
    }
    if (k >= KN_MAX_RANK) return snprintf(err, es, "term of rank > %d", KN_MAX_RANK), -1;
    labels[k++] = label_of(s[i]);
  }
  *n_out = k;
  return 0;
}

int kn_einsum_parse(const char *eq, int n_in, const int *ranks, kn_einsum *e, char *err,
                    size_t err_size) {
  memset(e, 0, sizeof *e);
  if (n_in < 1 || n_in > KN_EINSUM_MAX_IN) return snprintf(err, err_size, "%d operands", n_in), -1;
  e->n_in = n_in;
  const char *arrow = strstr(eq, "->");
  size_t lhs_len = arrow ? (size_t)(arrow - eq) : strlen(eq);
  /* the widest ellipsis */
  int max_ell = 0;
  const char *p = eq;
  for (int i = 0; i < n_in; i++) {
    const char *end = memchr(p, ',', lhs_len - (size_t)(p - eq));
    size_t len = end ? (size_t)(end - p) : lhs_len - (size_t)(p - eq);
    if (i < n_in - 1 && !end) return snprintf(err, err_size, "fewer terms than operands"), -1;
    if (i == n_in - 1 && end) return snprintf(err, err_size, "more terms than operands"), -1;
    int explicit_n = 0;
    for (size_t k = 0; k < len; k++) explicit_n += label_of(p[k]) >= 0;
    if (memchr(p, '.', len) && ranks[i] - explicit_n > max_ell) max_ell = ranks[i] - explicit_n;
    p = end ? end + 1 : p + len;
  }
  int count[KN_EINSUM_LABELS] = {0};
  p = eq;
  for (int i = 0; i < n_in; i++) {
    const char *end = memchr(p, ',', lhs_len - (size_t)(p - eq));
    size_t len = end ? (size_t)(end - p) : lhs_len - (size_t)(p - eq);
    bool ell;
    if (parse_term(p, len, ranks[i], max_ell, e->label[i], &e->rank[i], &ell, err, err_size) < 0)
      return -1;
    for (int k = 0; k < e->rank[i]; k++) count[e->label[i][k]]++;
    p = end ? end + 1 : p + len;
  }
  bool in_out[KN_EINSUM_LABELS] = {0};
  if (arrow) {
    bool ell;
    const char *o = arrow + 2;
    if (parse_term(o, strlen(o), -1, max_ell, e->out_label, &e->out_rank, &ell, err, err_size) < 0)
      return -1;
    if (!ell && max_ell > 0) {
      /* an output without "..." keeps no ellipsis dims: they are summed */
      int k = 0;
      for (int j = 0; j < e->out_rank; j++)
        if (e->out_label[j] < 52) e->out_label[k++] = e->out_label[j];
      e->out_rank = k;
    }
    for (int j = 0; j < e->out_rank; j++) {
      int l = e->out_label[j];
      if (!count[l]) return snprintf(err, err_size, "output label not in any input"), -1;
      if (in_out[l]) return snprintf(err, err_size, "output label repeated"), -1;
      in_out[l] = true;
    }
  } else {
    for (int l = 52; l < 52 + max_ell; l++) e->out_label[e->out_rank++] = l, in_out[l] = true;
    for (int l = 0; l < 52; l++)
      if (count[l] == 1) {
        if (e->out_rank >= KN_MAX_RANK) return snprintf(err, err_size, "output rank > %d", KN_MAX_RANK), -1;
        e->out_label[e->out_rank++] = l, in_out[l] = true;
      }
  }
  for (int l = 0; l < KN_EINSUM_LABELS; l++)
    if (count[l] && !in_out[l]) e->sum_label[e->n_sum++] = l;
  return 0;
}

/* ---- the rules ---- */

static const kn_value *need_in(kn_infer *c, int k) {
  const kn_value *v = kn_infer_in(c, k);
  if (!v) kn_infer_fail(c, "input %d is missing", k);
  return v;
}

static bool is_index_dtype(kn_dtype t) { return t == KN_DT_I64 || t == KN_DT_I32; }

/* dim i of s equals dim j of t, batch bit included */
static bool same_dim(const kn_shape *s, int i, const kn_shape *t, int j) {
  return s->dim[i] == t->dim[j] && ((s->batch_mask >> i) & 1u) == ((t->batch_mask >> j) & 1u);
}

/* A single integer known at compile time (a scalar or one-element tensor,
 * integer or float). */
static int scalar_int(kn_infer *c, int k, const char *what, int64_t *v) {
  const kn_ref_tensor *t = kn_infer_known(c, k);
  if (!t) return kn_infer_fail_unknown(c, k, what, "");
  if (kn_ref_numel(&t->shape) != 1 || t->coef)
    return kn_infer_fail(c, "input %d (%s) must hold one value", k, what);
  if (!kn_dtype_is_float(t->dtype)) {
    *v = kn_ref_load_int(t->dtype, t->data, 0);
    return 0;
  }
  /* a float beyond int64 (or NaN) has no integer value: converting it is UB */
  double f = kn_ref_load(t->dtype, t->data, 0);
  if (!(f > -9.2e18 && f < 9.2e18)) return kn_infer_fail(c, "input %d (%s) = %g is not an integer", k, what, f);
  *v = (int64_t)f;
  return 0;
}

static int cum(kn_infer *c) {
  const kn_value *x = need_in(c, 0), *a = need_in(c, 1);
  if (!x || !a) return -1;
  if (!is_index_dtype(a->dtype) || kn_shape_numel_max(&a->shape, 1) != 1 || a->shape.batch_mask)
    return kn_infer_fail(c, "axis must be one int32/int64 value");
  if (x->shape.rank < 1) return kn_infer_fail(c, "input must have rank >= 1");
  if (x->dtype == KN_DT_BOOL) return kn_infer_fail(c, "input dtype bool is not supported");
  const kn_ref_tensor *ka = kn_infer_known(c, 1);
  if (ka && kn_axis_norm(kn_ref_load_int(ka->dtype, ka->data, 0), x->shape.rank) < 0)
    return kn_infer_fail(c, "axis is out of range for rank %d", x->shape.rank);
  return kn_infer_set(c, 0, x->dtype, &x->shape);
}

static int bitwise(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  const kn_value *a = need_in(c, 0);
  if (!a) return -1;
  bool shift = n->op == KN_OP_BIT_SHIFT;
  if (!kn_dtype_is_int(a->dtype) || (shift && kn_dtype_is_signed(a->dtype)))
    return kn_infer_fail(c, "dtype %s is not supported (%sintegers only)", kn_dtype_name(a->dtype),
                         shift ? "unsigned " : "");
  if (shift) {
    const char *dir = kn_node_attr_string(n, "direction", NULL);
    if (!dir || (strcmp(dir, "LEFT") && strcmp(dir, "RIGHT")))
      return kn_infer_fail(c, "attribute direction must be LEFT or RIGHT");
  }
  if (n->op == KN_OP_BITWISE_NOT) return kn_infer_set(c, 0, a->dtype, &a->shape);
  const kn_value *b = need_in(c, 1);
  if (!b) return -1;
  if (b->dtype != a->dtype)
    return kn_infer_fail(c, "inputs of dtypes %s and %s", kn_dtype_name(a->dtype), kn_dtype_name(b->dtype));
  kn_shape s;
  int bad;
  if (!kn_shape_broadcast(&a->shape, &b->shape, &s, &bad))
    return kn_infer_fail(c, "shapes %s and %s do not broadcast", SHAPE_STR(&a->shape), SHAPE_STR(&b->shape));
  return kn_infer_set(c, 0, a->dtype, &s);
}

static int reduction_attr(kn_infer *c) {
  const char *r = kn_node_attr_string(kn_infer_node(c), "reduction", "none");
  if (strcmp(r, "none") && strcmp(r, "add") && strcmp(r, "mul") && strcmp(r, "max") && strcmp(r, "min"))
    return kn_infer_fail(c, "attribute reduction '%s' is not supported", r);
  return 0;
}

static int scatter_elements(kn_infer *c) {
  const kn_value *x = need_in(c, 0), *ind = need_in(c, 1), *upd = need_in(c, 2);
  if (!x || !ind || !upd) return -1;
  int r = x->shape.rank;
  if (!is_index_dtype(ind->dtype)) return kn_infer_fail(c, "indices must be int32 or int64");
  if (upd->dtype != x->dtype) return kn_infer_fail(c, "updates must have the dtype of the data");
  if (r < 1 || ind->shape.rank != r || !kn_shape_equal(&ind->shape, &upd->shape))
    return kn_infer_fail(c, "indices %s and updates %s must have one shape, of the data's rank %d",
                         SHAPE_STR(&ind->shape), SHAPE_STR(&upd->shape), r);
  int axis = kn_axis_norm(kn_node_attr_int(kn_infer_node(c), "axis", 0), r);
  if (axis < 0) return kn_infer_fail(c, "axis is out of range for rank %d", r);
  for (int i = 0; i < r; i++)
    if (i != axis && ind->shape.dim[i] > x->shape.dim[i] && !((ind->shape.batch_mask >> i) & 1u))
      return kn_infer_fail(c, "indices dim %d exceeds the data's", i);
  if (reduction_attr(c) < 0) return -1;
  return kn_infer_set(c, 0, x->dtype, &x->shape);
}

static int scatter_nd(kn_infer *c) {
  const kn_value *x = need_in(c, 0), *ind = need_in(c, 1), *upd = need_in(c, 2);
  if (!x || !ind || !upd) return -1;
  int r = x->shape.rank, q = ind->shape.rank;
  if (ind->dtype != KN_DT_I64) return kn_infer_fail(c, "indices must be int64");
  if (upd->dtype != x->dtype) return kn_infer_fail(c, "updates must have the dtype of the data");
  if (q < 1 || ind->shape.batch_mask >> (q - 1)) return kn_infer_fail(c, "indices must have rank >= 1");
  int64_t k = ind->shape.dim[q - 1];
  if (k < 1 || k > r) return kn_infer_fail(c, "indices' last dim %lld must be in [1, %d]", (long long)k, r);
  bool ok = upd->shape.rank == q - 1 + r - (int)k;
  for (int i = 0; ok && i < q - 1; i++) ok = same_dim(&upd->shape, i, &ind->shape, i);
  for (int i = (int)k; ok && i < r; i++) ok = same_dim(&upd->shape, q - 1 + i - (int)k, &x->shape, i);
  if (!ok)
    return kn_infer_fail(c, "updates %s do not match indices %s and data %s", SHAPE_STR(&upd->shape),
                         SHAPE_STR(&ind->shape), SHAPE_STR(&x->shape));
  if (reduction_attr(c) < 0) return -1;
  return kn_infer_set(c, 0, x->dtype, &x->shape);
}

static int tensor_scatter(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  const kn_value *x = need_in(c, 0), *upd = need_in(c, 1), *wi = kn_infer_in(c, 2);
  if (!x || !upd) return -1;
  int r = x->shape.rank;
  int axis = kn_axis_norm(kn_node_attr_int(n, "axis", -2), r);
  if (r < 2 || axis < 1) return kn_infer_fail(c, "axis must be a non-batch axis of the data");
  if (upd->dtype != x->dtype || upd->shape.rank != r)
    return kn_infer_fail(c, "update must have the rank and dtype of the cache");
  for (int i = 0; i < r; i++)
    if (i != axis && !same_dim(&upd->shape, i, &x->shape, i))
      return kn_infer_fail(c, "update %s does not match the cache %s", SHAPE_STR(&upd->shape), SHAPE_STR(&x->shape));
  if (upd->shape.dim[axis] > x->shape.dim[axis] || ((upd->shape.batch_mask | x->shape.batch_mask) >> axis) & 1u)
    return kn_infer_fail(c, "update is longer than the cache along axis %d", axis);
  const char *mode = kn_node_attr_string(n, "mode", "linear");
  if (strcmp(mode, "linear") && strcmp(mode, "circular"))
    return kn_infer_fail(c, "attribute mode '%s' is not supported", mode);
  if (wi && (!is_index_dtype(wi->dtype) || wi->shape.rank != 1 || !same_dim(&wi->shape, 0, &x->shape, 0)))
    return kn_infer_fail(c, "write_indices must be int64 of shape [batch]");
  return kn_infer_set(c, 0, x->dtype, &x->shape);
}

static int top_k(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  const kn_value *x = need_in(c, 0);
  if (!x) return -1;
  int r = x->shape.rank;
  int axis = kn_axis_norm(kn_node_attr_int(n, "axis", -1), r);
  if (axis < 0) return kn_infer_fail(c, "axis is out of range for rank %d", r);
  if (x->dtype == KN_DT_BOOL) return kn_infer_fail(c, "input dtype bool is not supported");
  int64_t k;
  if (scalar_int(c, 1, "K", &k) < 0) return -1;
  if ((x->shape.batch_mask >> axis) & 1u) return kn_infer_fail(c, "TopK along the batch axis");
  if (k < 0 || k > x->shape.dim[axis])
    return kn_infer_fail(c, "K = %lld is out of range for axis %d of %s", (long long)k, axis, SHAPE_STR(&x->shape));
  const kn_value *rank = kn_infer_in(c, 2);
  if (rank && (rank->dtype != KN_DT_I64 || !kn_shape_equal(&rank->shape, &x->shape)))
    return kn_infer_fail(c, "input 2 (rank) must be int64 of the input's shape");
  kn_shape s = x->shape;
  s.dim[axis] = k;
  if (kn_infer_set(c, 0, x->dtype, &s) < 0) return -1;
  return kn_infer_set(c, 1, KN_DT_I64, &s);
}

/* kiln.TopKRank: per element, its position in TopK's order along the axis */
static int top_k_rank(kn_infer *c) {
  const kn_value *x = need_in(c, 0);
  if (!x) return -1;
  if (kn_axis_norm(kn_node_attr_int(kn_infer_node(c), "axis", -1), x->shape.rank) < 0)
    return kn_infer_fail(c, "axis is out of range for rank %d", x->shape.rank);
  return kn_infer_set(c, 0, KN_DT_I64, &x->shape);
}

static int one_hot(kn_infer *c) {
  const kn_value *ind = need_in(c, 0), *val = need_in(c, 2);
  if (!ind || !val) return -1;
  int r = ind->shape.rank;
  int axis = kn_axis_norm(kn_node_attr_int(kn_infer_node(c), "axis", -1), r + 1);
  if (axis < 0) return kn_infer_fail(c, "axis is out of range for rank %d", r + 1);
  if (ind->dtype == KN_DT_BOOL || ind->dtype == KN_DT_F16 || ind->dtype == KN_DT_BF16)
    return kn_infer_fail(c, "indices of dtype %s", kn_dtype_name(ind->dtype));
  if (kn_shape_numel_max(&val->shape, 1) != 2 || val->shape.batch_mask)
    return kn_infer_fail(c, "values must hold two elements [off, on]");
  int64_t depth;
  if (scalar_int(c, 1, "depth", &depth) < 0) return -1;
  if (depth < 1) return kn_infer_fail(c, "depth %lld must be positive", (long long)depth);
  if (r + 1 > KN_MAX_RANK) return kn_infer_fail(c, "output rank exceeds %d", KN_MAX_RANK);
  kn_shape s = {.rank = r + 1};
  for (int i = 0, k = 0; i <= r; i++) {
    if (i == axis) {
      s.dim[i] = depth;
      continue;
    }
    s.dim[i] = ind->shape.dim[k];
    if ((ind->shape.batch_mask >> k) & 1u) s.batch_mask |= 1u << i;
    k++;
  }
  return kn_infer_set(c, 0, val->dtype, &s);
}

static int gather_nd(kn_infer *c) {
  const kn_value *x = need_in(c, 0), *ind = need_in(c, 1);
  if (!x || !ind) return -1;
  int r = x->shape.rank, q = ind->shape.rank;
  int64_t b = kn_node_attr_int(kn_infer_node(c), "batch_dims", 0);
  if (ind->dtype != KN_DT_I64) return kn_infer_fail(c, "indices must be int64");
  if (q < 1 || r < 1 || (ind->shape.batch_mask >> (q - 1)) & 1u)
    return kn_infer_fail(c, "data and indices must have rank >= 1");
  if (b < 0 || b >= q || b >= r) return kn_infer_fail(c, "batch_dims %lld is out of range", (long long)b);
  for (int i = 0; i < b; i++)
    if (!same_dim(&x->shape, i, &ind->shape, i))
      return kn_infer_fail(c, "batch dim %d of data %s and indices %s differ", i, SHAPE_STR(&x->shape),
                           SHAPE_STR(&ind->shape));
  int64_t k = ind->shape.dim[q - 1];
  if (k < 1 || k > r - b) return kn_infer_fail(c, "indices' last dim %lld must be in [1, %lld]", (long long)k, (long long)(r - b));
  kn_shape s = {.rank = q - 1 + r - (int)b - (int)k};
  if (s.rank > KN_MAX_RANK) return kn_infer_fail(c, "output rank exceeds %d", KN_MAX_RANK);
  int j = 0;
  for (int i = 0; i < q - 1; i++, j++) {
    s.dim[j] = ind->shape.dim[i];
    if ((ind->shape.batch_mask >> i) & 1u) s.batch_mask |= 1u << j;
  }
  for (int i = (int)(b + k); i < r; i++, j++) {
    s.dim[j] = x->shape.dim[i];
    if ((x->shape.batch_mask >> i) & 1u) s.batch_mask |= 1u << j;
  }
  return kn_infer_set(c, 0, x->dtype, &s);
}

static int eye_like(kn_infer *c) {
  const kn_value *x = need_in(c, 0);
  if (!x) return -1;
  if (x->shape.rank != 2) return kn_infer_fail(c, "input must be 2-D, got %s", SHAPE_STR(&x->shape));
  const kn_attr *a = kn_node_attr(kn_infer_node(c), "dtype");
  kn_dtype t = a ? kn_dtype_from_onnx((int)a->i) : x->dtype;
  if (t == KN_DT_INVALID) return kn_infer_fail(c, "attribute dtype %lld is not supported", (long long)a->i);
  return kn_infer_set(c, 0, t, &x->shape);
}

static int reverse_sequence(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  const kn_value *x = need_in(c, 0), *len = need_in(c, 1);
  if (!x || !len) return -1;
  int r = x->shape.rank;
  int ba = kn_axis_norm(kn_node_attr_int(n, "batch_axis", 1), r);
  int ta = kn_axis_norm(kn_node_attr_int(n, "time_axis", 0), r);
  if (r < 2 || ba < 0 || ta < 0 || ba > 1 || ta > 1 || ba == ta)
    return kn_infer_fail(c, "batch_axis and time_axis must be 0 and 1 (either order)");
  if (!is_index_dtype(len->dtype) || len->shape.rank != 1 || !same_dim(&len->shape, 0, &x->shape, ba))
    return kn_infer_fail(c, "sequence_lens must be int64 of shape [batch]");
  if ((x->shape.batch_mask >> ta) & 1u) return kn_infer_fail(c, "time axis is the batch axis N");
  return kn_infer_set(c, 0, x->dtype, &x->shape);
}

static int einsum(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  const char *eq = kn_node_attr_string(n, "equation", NULL);
  if (!eq) return kn_infer_fail(c, "attribute equation is missing");
  int ranks[KN_EINSUM_MAX_IN];
  const kn_value *in[KN_EINSUM_MAX_IN] = {0};
  if (n->n_in < 1) return kn_infer_fail(c, "needs at least one operand");
  for (int i = 0; i < n->n_in; i++) {
    if (!(in[i] = need_in(c, i))) return -1;
    ranks[i] = in[i]->shape.rank;
    if (in[i]->dtype != in[0]->dtype) return kn_infer_fail(c, "operands of different dtypes");
  }
  if (in[0]->dtype == KN_DT_BOOL) return kn_infer_fail(c, "dtype bool is not supported");
  kn_einsum e;
  char err[128];
  if (kn_einsum_parse(eq, n->n_in, ranks, &e, err, sizeof err) < 0)
    return kn_infer_fail(c, "equation '%s': %s", eq, err);
  int64_t ext[KN_EINSUM_LABELS];
  bool batch[KN_EINSUM_LABELS] = {0};
  for (int l = 0; l < KN_EINSUM_LABELS; l++) ext[l] = -1;
  for (int i = 0; i < n->n_in; i++)
    for (int a = 0; a < e.rank[i]; a++) {
      int l = e.label[i][a];
      int64_t d = in[i]->shape.dim[a];
      bool b = (in[i]->shape.batch_mask >> a) & 1u;
      if (ext[l] < 0 || (ext[l] == 1 && !batch[l] && l >= 52)) {
        ext[l] = d, batch[l] = b;
      } else if (!(d == 1 && !b && l >= 52) && (d != ext[l] || b != batch[l])) {
        return kn_infer_fail(c, "equation '%s': label '%c' has sizes %lld and %lld", eq,
                             l < 26 ? 'a' + l : l < 52 ? 'A' + l - 26 : '.', (long long)ext[l], (long long)d);
      }
    }
  kn_shape s = {.rank = e.out_rank};
  for (int j = 0; j < e.out_rank; j++) {
    s.dim[j] = ext[e.out_label[j]];
    if (batch[e.out_label[j]]) s.batch_mask |= 1u << j;
  }
  for (int j = 0; j < e.n_sum; j++)
    if (batch[e.sum_label[j]]) return kn_infer_fail(c, "summing over the batch axis N");
  return kn_infer_set(c, 0, in[0]->dtype, &s);
}

static int det(kn_infer *c) {
  const kn_value *x = need_in(c, 0);
  if (!x) return -1;
  int r = x->shape.rank;
  if (!kn_dtype_is_float(x->dtype)) return kn_infer_fail(c, "dtype %s is not supported", kn_dtype_name(x->dtype));
  if (r < 2 || x->shape.dim[r - 1] != x->shape.dim[r - 2] || (x->shape.batch_mask >> (r - 2)))
    return kn_infer_fail(c, "input %s must be [..., M, M]", SHAPE_STR(&x->shape));
  if (x->shape.dim[r - 1] > 4)
    return kn_infer_fail(c, "matrices of size %lld are not supported (at most 4)", (long long)x->shape.dim[r - 1]);
  kn_shape s = x->shape;
  s.rank = r - 2;
  return kn_infer_set(c, 0, x->dtype, &s);
}

static int window(kn_infer *c) {
  int64_t size;
  if (scalar_int(c, 0, "size", &size) < 0) return -1;
  if (size < 0) return kn_infer_fail(c, "size %lld is negative", (long long)size);
  int64_t code = kn_node_attr_int(kn_infer_node(c), "output_datatype", 1);
  kn_dtype t = kn_dtype_from_onnx((int)code);
  if (t == KN_DT_INVALID || t == KN_DT_BOOL)
    return kn_infer_fail(c, "attribute output_datatype %lld is not supported", (long long)code);
  kn_shape s = {.rank = 1, .dim = {size}};
  return kn_infer_set(c, 0, t, &s);
}

int kn_infer_index(kn_infer *c) {
  switch (kn_infer_node(c)->op) {
  case KN_OP_CUM_SUM:
  case KN_OP_CUM_PROD: return cum(c);
  case KN_OP_BIT_SHIFT:
  case KN_OP_BITWISE_AND:
  case KN_OP_BITWISE_OR:
  case KN_OP_BITWISE_XOR:
  case KN_OP_BITWISE_NOT: return bitwise(c);
  case KN_OP_SCATTER_ELEMENTS:
  case KN_OP_SCATTER: return scatter_elements(c);
  case KN_OP_SCATTER_ND: return scatter_nd(c);
  case KN_OP_TENSOR_SCATTER: return tensor_scatter(c);
  case KN_OP_TOP_K: return top_k(c);
  case KN_OP_TOP_K_RANK: return top_k_rank(c);
  case KN_OP_ONE_HOT: return one_hot(c);
  case KN_OP_GATHER_ND: return gather_nd(c);
  case KN_OP_EYE_LIKE: return eye_like(c);
  case KN_OP_REVERSE_SEQUENCE: return reverse_sequence(c);
  case KN_OP_EINSUM: return einsum(c);
  case KN_OP_DET: return det(c);
  case KN_OP_HANN_WINDOW:
  case KN_OP_HAMMING_WINDOW:
  case KN_OP_BLACKMAN_WINDOW: return window(c);
  default: return kn_infer_fail(c, "no shape rule");
  }
}
