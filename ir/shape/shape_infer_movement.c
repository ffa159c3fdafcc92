/* shape_infer_movement.c — shape and dtype rules of the data-movement, view,
 * shape and constant-producing ops: Transpose, Concat, Slice, Split, Gather,
 * Expand, Pad, Tile, Reshape, Flatten, Squeeze, Unsqueeze, Shape, Size,
 * Constant, ConstantOfShape, Range.
 *
 * Shape-tensor inputs (Reshape's shape, Slice's starts, ...) must be known at
 * compile time; an entry b*N (batch coefficient, data 0) becomes a batch dim.
 * A batch dim may move, be copied (Reshape 0) or be recomputed (-1), but not
 * be sliced, padded or split: its size is only known at run time. */
#include <string.h>

#include "ir/shape/shape_infer_impl.h"

#define SHAPE_STR(s) kn_shape_str((s), (char[160]){0}, 160)
#define DIM_LIMIT ((int64_t)1 << 40)

static bool is_batch(const kn_shape *s, int i) { return (s->batch_mask >> i) & 1; }

static const kn_value *need_in(kn_infer *c, int k) {
  const kn_value *v = kn_infer_in(c, k);
  if (!v) kn_infer_fail(c, "input %d is missing", k);
  return v;
}

/* Turns shape-tensor entries a + b*N into dims; only a or b*N are allowed. */
static int dims_from_values(kn_infer *c, const char *what, const int64_t *vals, const int64_t *coefs,
                            int n, kn_shape *s) {
  if (n > KN_MAX_RANK) return kn_infer_fail(c, "%s has %d entries, more than rank %d", what, n, KN_MAX_RANK);
  memset(s, 0, sizeof *s);
  s->rank = n;
  for (int i = 0; i < n; i++) {
    if (coefs && coefs[i]) {
      if (vals[i] != 0 || coefs[i] < 0)
        return kn_infer_fail(c, "%s[%d] = %lld%+lld*N is not supported", what, i, (long long)vals[i],
                             (long long)coefs[i]);
      s->dim[i] = coefs[i];
      s->batch_mask |= 1u << i;
    } else {
      s->dim[i] = vals[i];
    }
  }
  return 0;
}

static int transpose(kn_infer *c) {
  const kn_value *x = need_in(c, 0);
  if (!x) return -1;
  int r = x->shape.rank, np = 0;
  const int64_t *perm = kn_node_attr_ints(kn_infer_node(c), "perm", &np);
  if (perm && np != r) return kn_infer_fail(c, "perm has %d entries for rank %d", np, r);
  kn_shape s = {.rank = r};
  uint32_t seen = 0;
  for (int i = 0; i < r; i++) {
    int64_t p = perm ? perm[i] : r - 1 - i;
    if (p < 0 || p >= r || (seen & (1u << p))) return kn_infer_fail(c, "perm is not a permutation");
    seen |= 1u << p;
    s.dim[i] = x->shape.dim[p];
    if (is_batch(&x->shape, (int)p)) s.batch_mask |= 1u << i;
  }
  return kn_infer_set(c, 0, x->dtype, &s);
}

static int concat(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  const kn_value *x = need_in(c, 0);
  if (!x) return -1;
  int r = x->shape.rank;
  int axis = kn_axis_norm(kn_node_attr_int(n, "axis", 0), r);
  if (axis < 0) return kn_infer_fail(c, "axis is out of range for rank %d", r);
  kn_shape s = x->shape;
  int64_t total = 0, total_batch = 0;
  for (int k = 0; k < n->n_in; k++) {
    const kn_value *v = need_in(c, k);
    if (!v) return -1;
    if (v->dtype != x->dtype)
      return kn_infer_fail(c, "input %d is %s but input 0 is %s", k, kn_dtype_name(v->dtype), kn_dtype_name(x->dtype));
    if (v->shape.rank != r) return kn_infer_fail(c, "input %d %s has another rank than input 0 %s", k,
                                                 SHAPE_STR(&v->shape), SHAPE_STR(&x->shape));
    for (int i = 0; i < r; i++)
      if (i != axis && (v->shape.dim[i] != s.dim[i] || is_batch(&v->shape, i) != is_batch(&s, i)))
        return kn_infer_fail(c, "input %d %s differs from input 0 %s outside axis %d", k,
                             SHAPE_STR(&v->shape), SHAPE_STR(&x->shape), axis);
    if (is_batch(&v->shape, axis)) total_batch += v->shape.dim[axis];
    else total += v->shape.dim[axis];
  }
  if (total_batch && total)
    return kn_infer_fail(c, "concatenating batch and fixed dims along axis %d", axis);
  s.dim[axis] = total_batch ? total_batch : total;
  return kn_infer_set(c, 0, x->dtype, &s);
}

static int slice(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  const kn_value *x = need_in(c, 0);
  if (!x) return -1;
  int r = x->shape.rank;
  int64_t starts[KN_MAX_RANK], ends[KN_MAX_RANK], axes[KN_MAX_RANK], steps[KN_MAX_RANK];
  int ns = 0, ne = 0, na = -1, nst = -1;
  if (kn_infer_in(c, 1)) {
    if (kn_infer_ints(c, 1, "starts", starts, NULL, KN_MAX_RANK, &ns) < 0 ||
        kn_infer_ints(c, 2, "ends", ends, NULL, KN_MAX_RANK, &ne) < 0)
      return -1;
    if (kn_infer_in(c, 3) && kn_infer_ints(c, 3, "axes", axes, NULL, KN_MAX_RANK, &na) < 0) return -1;
    if (kn_infer_in(c, 4) && kn_infer_ints(c, 4, "steps", steps, NULL, KN_MAX_RANK, &nst) < 0) return -1;
  } else {
    const int64_t *a = kn_node_attr_ints(n, "starts", &ns), *b = kn_node_attr_ints(n, "ends", &ne);
    if (!a || !b || ns > KN_MAX_RANK || ne > KN_MAX_RANK) return kn_infer_fail(c, "starts and ends are missing");
    memcpy(starts, a, sizeof(int64_t) * (size_t)ns);
    memcpy(ends, b, sizeof(int64_t) * (size_t)ne);
    const int64_t *ax = kn_node_attr_ints(n, "axes", &na);
    if (ax && na <= KN_MAX_RANK) memcpy(axes, ax, sizeof(int64_t) * (size_t)na);
    else na = -1;
  }
  if (ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
    return kn_infer_fail(c, "starts, ends, axes and steps differ in length");
  /* Batch axes may only be taken whole; resolve the rest on concrete dims. */
  int64_t dims[KN_MAX_RANK];
  for (int i = 0; i < r; i++) dims[i] = x->shape.dim[i];
  int64_t s2[KN_MAX_RANK], e2[KN_MAX_RANK], a2[KN_MAX_RANK], st2[KN_MAX_RANK];
  int m = 0;
  for (int i = 0; i < ns; i++) {
    int a = kn_axis_norm(na >= 0 ? axes[i] : i, r);
    if (a < 0) return kn_infer_fail(c, "slice axis %lld is out of range for rank %d", (long long)(na >= 0 ? axes[i] : i), r);
    int64_t step = nst >= 0 ? steps[i] : 1;
    if (is_batch(&x->shape, a)) {
      if (step == 1 && starts[i] == 0 && ends[i] >= ((int64_t)1 << 31)) continue;
      return kn_infer_fail(c, "slicing axis %d of %s, which depends on the batch size", a, SHAPE_STR(&x->shape));
    }
    s2[m] = starts[i], e2[m] = ends[i], a2[m] = a, st2[m] = step, m++;
  }
  kn_slice sl;
  if (kn_slice_resolve(n, r, dims, s2, e2, a2, st2, m, &sl, c->d) < 0) return -1;
  kn_shape s = x->shape;
  for (int i = 0; i < r; i++) s.dim[i] = sl.count[i];
  return kn_infer_set(c, 0, x->dtype, &s);
}

static int split(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  const kn_value *x = need_in(c, 0);
  if (!x) return -1;
  int r = x->shape.rank;
  int axis = kn_axis_norm(kn_node_attr_int(n, "axis", 0), r);
  if (axis < 0) return kn_infer_fail(c, "axis is out of range for rank %d", r);
  int64_t sizes[64], dim = x->shape.dim[axis];
  int count = 0;
  if (n->n_out < 1 || n->n_out > 64) return kn_infer_fail(c, "has %d outputs, expected 1..64", n->n_out);
  int got = kn_infer_attr_or_input(c, "split", 1, sizes, 64, &count);
  if (got < 0) return -1;
  if (is_batch(&x->shape, axis) && n->n_out > 1)
    return kn_infer_fail(c, "splitting axis %d of %s, which depends on the batch size", axis, SHAPE_STR(&x->shape));
  if (got && count > 0) {
    if (count != n->n_out) return kn_infer_fail(c, "split has %d sizes for %d outputs", count, n->n_out);
    int64_t sum = 0;
    for (int i = 0; i < count; i++) {
      if (sizes[i] < 0 || sizes[i] > DIM_LIMIT) return kn_infer_fail(c, "split size %lld is out of range", (long long)sizes[i]);
      sum += sizes[i];
    }
    if (sum != dim && !is_batch(&x->shape, axis))
      return kn_infer_fail(c, "split sizes sum to %lld, but axis %d has %lld", (long long)sum, axis, (long long)dim);
  } else { /* equal parts, the last one smaller (opset 18 num_outputs) */
    count = n->n_out;
    int64_t part = (dim + count - 1) / count;
    for (int i = 0; i < count; i++) {
      int64_t left = dim - part * i;
      sizes[i] = left < 0 ? 0 : left < part ? left : part;
    }
  }
  for (int k = 0; k < n->n_out; k++) {
    kn_shape s = x->shape;
    if (!is_batch(&x->shape, axis)) s.dim[axis] = sizes[k];
    if (kn_infer_set(c, k, x->dtype, &s) < 0) return -1;
  }
  return 0;
}

static int gather(kn_infer *c) {
  const kn_value *x = need_in(c, 0), *ind = need_in(c, 1);
  if (!x || !ind) return -1;
  if (ind->dtype != KN_DT_I64 && ind->dtype != KN_DT_I32)
    return kn_infer_fail(c, "indices must be int32 or int64, got %s", kn_dtype_name(ind->dtype));
  int r = x->shape.rank;
  int axis = kn_axis_norm(kn_node_attr_int(kn_infer_node(c), "axis", 0), r);
  if (axis < 0) return kn_infer_fail(c, "axis is out of range for rank %d", r);
  if (r + ind->shape.rank - 1 > KN_MAX_RANK) return kn_infer_fail(c, "output rank too large");
  const kn_ref_tensor *known = kn_infer_known(c, 1);
  int64_t dim = x->shape.dim[axis];
  if (known && !is_batch(&x->shape, axis)) {
    int64_t cnt = kn_ref_numel(&known->shape);
    for (int64_t i = 0; i < cnt; i++) {
      int64_t k = kn_ref_load_int(known->dtype, known->data, i);
      if (k < -dim || k >= dim)
        return kn_infer_fail(c, "index %lld is out of range [%lld, %lld) for axis %d of %s", (long long)k,
                             (long long)-dim, (long long)dim, axis, SHAPE_STR(&x->shape));
    }
  }
  kn_shape s = {0};
  for (int i = 0; i < r; i++) {
    if (i == axis) {
      for (int j = 0; j < ind->shape.rank; j++) {
        s.dim[s.rank] = ind->shape.dim[j];
        if (is_batch(&ind->shape, j)) s.batch_mask |= 1u << s.rank;
        s.rank++;
      }
      continue;
    }
    s.dim[s.rank] = x->shape.dim[i];
    if (is_batch(&x->shape, i)) s.batch_mask |= 1u << s.rank;
    s.rank++;
  }
  return kn_infer_set(c, 0, x->dtype, &s);
}

/* GatherElements: indices of x's rank; the output has the indices' shape. */
static int gather_elements(kn_infer *c) {
  const kn_value *x = need_in(c, 0), *ind = need_in(c, 1);
  if (!x || !ind) return -1;
  if (ind->dtype != KN_DT_I64 && ind->dtype != KN_DT_I32)
    return kn_infer_fail(c, "indices must be int32 or int64, got %s", kn_dtype_name(ind->dtype));
  int r = x->shape.rank;
  if (ind->shape.rank != r)
    return kn_infer_fail(c, "indices %s must have the rank of the data %s", SHAPE_STR(&ind->shape),
                         SHAPE_STR(&x->shape));
  if (kn_axis_norm(kn_node_attr_int(kn_infer_node(c), "axis", 0), r) < 0)
    return kn_infer_fail(c, "axis is out of range for rank %d", r);
  return kn_infer_set(c, 0, x->dtype, &ind->shape);
}

/* Trilu: rank >= 2, same shape; k (input 1) a scalar integer. */
static int trilu(kn_infer *c) {
  const kn_value *x = need_in(c, 0);
  if (!x) return -1;
  if (x->shape.rank < 2) return kn_infer_fail(c, "input must have rank >= 2, got %s", SHAPE_STR(&x->shape));
  const kn_value *k = kn_infer_in(c, 1);
  if (k && (k->dtype != KN_DT_I64 || kn_shape_numel_max(&k->shape, 1) != 1))
    return kn_infer_fail(c, "k must be an int64 scalar");
  return kn_infer_set(c, 0, x->dtype, &x->shape);
}

static int expand(kn_infer *c) {
  const kn_value *x = need_in(c, 0);
  if (!x) return -1;
  int64_t vals[KN_MAX_RANK], coefs[KN_MAX_RANK];
  int n = 0;
  kn_shape target, s;
  if (kn_infer_ints(c, 1, "shape", vals, coefs, KN_MAX_RANK, &n) < 0 ||
      dims_from_values(c, "shape", vals, coefs, n, &target) < 0)
    return -1;
  for (int i = 0; i < n; i++)
    if (target.dim[i] < 0) return kn_infer_fail(c, "negative dim in shape %s", SHAPE_STR(&target));
  int bad;
  if (!kn_shape_broadcast(&x->shape, &target, &s, &bad))
    return kn_infer_fail(c, "input %s does not broadcast to %s", SHAPE_STR(&x->shape), SHAPE_STR(&target));
  return kn_infer_set(c, 0, x->dtype, &s);
}

static int pad(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  const kn_value *x = need_in(c, 0);
  if (!x) return -1;
  int r = x->shape.rank, np = 0, na = r;
  int64_t pads[2 * KN_MAX_RANK], axes[KN_MAX_RANK];
  const char *mode = kn_node_attr_string(n, "mode", "constant");
  if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge") && strcmp(mode, "wrap"))
    return kn_infer_fail(c, "unsupported pad mode '%s'", mode);
  if (kn_infer_attr_or_input(c, "pads", 1, pads, 2 * KN_MAX_RANK, &np) < 0) return -1;
  if (kn_infer_in(c, 3)) {
    if (kn_infer_ints(c, 3, "axes", axes, NULL, KN_MAX_RANK, &na) < 0) return -1;
  } else {
    for (int i = 0; i < r; i++) axes[i] = i;
  }
  if (np != 2 * na) return kn_infer_fail(c, "pads has %d entries, expected %d", np, 2 * na);
  kn_shape s = x->shape;
  for (int i = 0; i < na; i++) {
    int a = kn_axis_norm(axes[i], r);
    if (a < 0) return kn_infer_fail(c, "pad axis %lld is out of range", (long long)axes[i]);
    int64_t lo = pads[i], hi = pads[na + i];
    if (lo == 0 && hi == 0) continue;
    if (is_batch(&x->shape, a)) return kn_infer_fail(c, "padding axis %d, which depends on the batch size", a);
    if (lo > DIM_LIMIT || hi > DIM_LIMIT || lo < -DIM_LIMIT || hi < -DIM_LIMIT)
      return kn_infer_fail(c, "pad is out of range");
    s.dim[a] = x->shape.dim[a] + lo + hi;
    if (s.dim[a] < 0) return kn_infer_fail(c, "padding axis %d gives negative size", a);
    if (strcmp(mode, "constant") && x->shape.dim[a] == 0) return kn_infer_fail(c, "%s padding of an empty axis", mode);
    if (!strcmp(mode, "reflect") && (lo >= x->shape.dim[a] || hi >= x->shape.dim[a]))
      return kn_infer_fail(c, "reflect padding of %lld/%lld on axis %d of size %lld: pads must be smaller than the axis",
                           (long long)lo, (long long)hi, a, (long long)x->shape.dim[a]);
  }
  return kn_infer_set(c, 0, x->dtype, &s);
}

static int tile(kn_infer *c) {
  const kn_value *x = need_in(c, 0);
  if (!x) return -1;
  int64_t reps[KN_MAX_RANK];
  int n = 0;
  if (kn_infer_ints(c, 1, "repeats", reps, NULL, KN_MAX_RANK, &n) < 0) return -1;
  if (n != x->shape.rank) return kn_infer_fail(c, "repeats has %d entries for rank %d", n, x->shape.rank);
  kn_shape s = x->shape;
  for (int i = 0; i < n; i++) {
    if (reps[i] < 0 || reps[i] > DIM_LIMIT) return kn_infer_fail(c, "repeats[%d] = %lld is out of range", i, (long long)reps[i]);
    if (__builtin_mul_overflow(s.dim[i], reps[i], &s.dim[i])) return kn_infer_fail(c, "output size overflows");
  }
  return kn_infer_set(c, 0, x->dtype, &s);
}

/* Element count as (product of fixed parts, number of batch dims). */
static int symbolic_numel(kn_infer *c, const kn_shape *s, int64_t *prod, int *n_batch) {
  *prod = 1;
  *n_batch = 0;
  for (int i = 0; i < s->rank; i++) {
    if (__builtin_mul_overflow(*prod, s->dim[i], prod)) return kn_infer_fail(c, "size overflows");
    *n_batch += is_batch(s, i);
  }
  return 0;
}

static int reshape(kn_infer *c) {
  const kn_value *x = need_in(c, 0);
  if (!x) return -1;
  int64_t vals[KN_MAX_RANK], coefs[KN_MAX_RANK];
  int n = 0;
  if (kn_infer_ints(c, 1, "shape", vals, coefs, KN_MAX_RANK, &n) < 0) return -1;
  bool allow_zero = kn_node_attr_int(kn_infer_node(c), "allowzero", 0) != 0;
  kn_shape s = {.rank = n};
  int infer_at = -1;
  for (int i = 0; i < n; i++) {
    if (coefs[i] == 0 && vals[i] == 0 && !allow_zero) {
      if (i >= x->shape.rank) return kn_infer_fail(c, "shape[%d] = 0 copies a dim %s lacks", i, SHAPE_STR(&x->shape));
      s.dim[i] = x->shape.dim[i];
      if (is_batch(&x->shape, i)) s.batch_mask |= 1u << i;
    } else if (coefs[i] == 0 && vals[i] == -1) {
      if (infer_at >= 0) return kn_infer_fail(c, "shape has more than one -1");
      infer_at = i;
      s.dim[i] = 1;
    } else {
      kn_shape one;
      if (dims_from_values(c, "shape", &vals[i], &coefs[i], 1, &one) < 0) return -1;
      if (one.dim[0] < 0) return kn_infer_fail(c, "shape[%d] = %lld is invalid", i, (long long)vals[i]);
      s.dim[i] = one.dim[0];
      if (one.batch_mask) s.batch_mask |= 1u << i;
    }
  }
  int64_t p_in, p_out;
  int b_in, b_out;
  if (symbolic_numel(c, &x->shape, &p_in, &b_in) < 0 || symbolic_numel(c, &s, &p_out, &b_out) < 0) return -1;
  if (infer_at >= 0) {
    if (p_out == 0 || p_in % p_out != 0 || b_in - b_out < 0 || b_in - b_out > 1)
      return kn_infer_fail(c, "cannot reshape %s to %s with -1 at %d", SHAPE_STR(&x->shape), SHAPE_STR(&s), infer_at);
    s.dim[infer_at] = p_in / p_out;
    if (b_in > b_out) s.batch_mask |= 1u << infer_at;
  } else if (p_in != p_out || b_in != b_out) {
    return kn_infer_fail(c, "cannot reshape %s to %s", SHAPE_STR(&x->shape), SHAPE_STR(&s));
  }
  return kn_infer_set(c, 0, x->dtype, &s);
}

static int flatten(kn_infer *c) {
  const kn_value *x = need_in(c, 0);
  if (!x) return -1;
  int r = x->shape.rank;
  int64_t axis = kn_node_attr_int(kn_infer_node(c), "axis", 1);
  if (axis < -r || axis > r) return kn_infer_fail(c, "axis %lld is out of range for rank %d", (long long)axis, r);
  if (axis < 0) axis += r;
  kn_shape s = {.rank = 2, .dim = {1, 1}};
  int batches[2] = {0, 0};
  for (int i = 0; i < r; i++) {
    int side = i >= axis;
    if (__builtin_mul_overflow(s.dim[side], x->shape.dim[i], &s.dim[side])) return kn_infer_fail(c, "size overflows");
    batches[side] += is_batch(&x->shape, i);
  }
  if (batches[0] > 1 || batches[1] > 1) return kn_infer_fail(c, "more than one batch dim on one side of axis");
  s.batch_mask = (batches[0] ? 1u : 0u) | (batches[1] ? 2u : 0u);
  return kn_infer_set(c, 0, x->dtype, &s);
}

static int squeeze(kn_infer *c, bool unsqueeze) {
  const kn_value *x = need_in(c, 0);
  if (!x) return -1;
  int64_t axes[KN_MAX_RANK];
  int n = 0, r = x->shape.rank;
  if (kn_infer_attr_or_input(c, "axes", 1, axes, KN_MAX_RANK, &n) < 0) return -1;
  kn_shape s = {0};
  if (unsqueeze) {
    int out_r = r + n;
    if (n == 0) return kn_infer_fail(c, "axes are missing");
    if (out_r > KN_MAX_RANK) return kn_infer_fail(c, "output rank %d exceeds %d", out_r, KN_MAX_RANK);
    uint32_t mask = 0;
    for (int i = 0; i < n; i++) {
      int a = kn_axis_norm(axes[i], out_r);
      if (a < 0 || (mask & (1u << a))) return kn_infer_fail(c, "axis %lld is invalid for output rank %d", (long long)axes[i], out_r);
      mask |= 1u << a;
    }
    s.rank = out_r;
    for (int i = 0, j = 0; i < out_r; i++) {
      if (mask & (1u << i)) {
        s.dim[i] = 1;
      } else {
        s.dim[i] = x->shape.dim[j];
        if (is_batch(&x->shape, j)) s.batch_mask |= 1u << i;
        j++;
      }
    }
    return kn_infer_set(c, 0, x->dtype, &s);
  }
  uint32_t mask = 0;
  for (int i = 0; i < n; i++) {
    int a = kn_axis_norm(axes[i], r);
    if (a < 0) return kn_infer_fail(c, "axis %lld is out of range for rank %d", (long long)axes[i], r);
    if (x->shape.dim[a] != 1 || is_batch(&x->shape, a))
      return kn_infer_fail(c, "cannot squeeze axis %d of %s: it is not 1", a, SHAPE_STR(&x->shape));
    mask |= 1u << a;
  }
  if (n == 0)
    for (int i = 0; i < r; i++)
      if (x->shape.dim[i] == 1 && !is_batch(&x->shape, i)) mask |= 1u << i;
  for (int i = 0; i < r; i++) {
    if (mask & (1u << i)) continue;
    s.dim[s.rank] = x->shape.dim[i];
    if (is_batch(&x->shape, i)) s.batch_mask |= 1u << s.rank;
    s.rank++;
  }
  return kn_infer_set(c, 0, x->dtype, &s);
}

static int shape_op(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  const kn_value *x = need_in(c, 0);
  if (!x) return -1;
  if (n->op == KN_OP_SIZE) return kn_infer_set(c, 0, KN_DT_I64, &(kn_shape){.rank = 0});
  int64_t r = x->shape.rank;
  int64_t start = kn_node_attr_int(n, "start", 0), end = kn_node_attr_int(n, "end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = start < 0 ? 0 : start > r ? r : start;
  end = end < 0 ? 0 : end > r ? r : end;
  kn_shape s = {.rank = 1, .dim = {end > start ? end - start : 0}};
  return kn_infer_set(c, 0, KN_DT_I64, &s);
}

static int constant(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  const kn_attr *a = kn_node_attr(n, "value");
  if (a && a->kind == KN_ATTR_TENSOR) {
    if (a->value < 0 || a->value >= c->g->n_values || !c->g->values[a->value].data)
      return kn_infer_fail(c, "value attribute names no constant");
    const kn_value *v = &c->g->values[a->value];
    return kn_infer_set(c, 0, v->dtype, &v->shape);
  }
  if ((a = kn_node_attr(n, "value_float")) && a->kind == KN_ATTR_FLOAT)
    return kn_infer_set(c, 0, KN_DT_F32, &(kn_shape){.rank = 0});
  if ((a = kn_node_attr(n, "value_int")) && a->kind == KN_ATTR_INT)
    return kn_infer_set(c, 0, KN_DT_I64, &(kn_shape){.rank = 0});
  if ((a = kn_node_attr(n, "value_floats")) && a->kind == KN_ATTR_FLOATS)
    return kn_infer_set(c, 0, KN_DT_F32, &(kn_shape){.rank = 1, .dim = {a->n}});
  if ((a = kn_node_attr(n, "value_ints")) && a->kind == KN_ATTR_INTS)
    return kn_infer_set(c, 0, KN_DT_I64, &(kn_shape){.rank = 1, .dim = {a->n}});
  return kn_infer_fail(c, "unsupported or missing value attribute");
}

static int constant_of_shape(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  int64_t vals[KN_MAX_RANK], coefs[KN_MAX_RANK];
  int cnt = 0;
  kn_shape s;
  if (kn_infer_ints(c, 0, "shape", vals, coefs, KN_MAX_RANK, &cnt) < 0 ||
      dims_from_values(c, "shape", vals, coefs, cnt, &s) < 0)
    return -1;
  for (int i = 0; i < cnt; i++)
    if (s.dim[i] < 0) return kn_infer_fail(c, "negative dim in %s", SHAPE_STR(&s));
  kn_dtype t = KN_DT_F32;
  const kn_attr *a = kn_node_attr(n, "value");
  if (a && a->kind == KN_ATTR_TENSOR) {
    if (a->value < 0 || a->value >= c->g->n_values || !c->g->values[a->value].data ||
        kn_shape_numel_max(&c->g->values[a->value].shape, 1) != 1)
      return kn_infer_fail(c, "value must be a one-element tensor");
    t = c->g->values[a->value].dtype;
  }
  return kn_infer_set(c, 0, t, &s);
}

static int range(kn_infer *c) {
  const kn_ref_tensor *t[3];
  for (int k = 0; k < 3 && c->missing; k++) /* all three at once for kn_infer_shapes_needs */
    if (kn_infer_in(c, k) && !kn_infer_known(c, k)) c->missing[kn_infer_node(c)->in[k]] = true;
  for (int k = 0; k < 3; k++) {
    if (!need_in(c, k)) return -1;
    t[k] = kn_infer_known(c, k);
    if (!t[k]) return kn_infer_fail_unknown(c, k, NULL, " (dynamic Range is not supported)");
    if (t[k]->coef) return kn_infer_fail(c, "input %d depends on the batch size", k);
    if (kn_ref_numel(&t[k]->shape) != 1) return kn_infer_fail(c, "input %d must be a scalar", k);
  }
  kn_dtype dt = t[0]->dtype;
  int64_t count;
  if (kn_dtype_is_float(dt)) {
    double start = kn_ref_load(dt, t[0]->data, 0), limit = kn_ref_load(t[1]->dtype, t[1]->data, 0);
    double delta = kn_ref_load(t[2]->dtype, t[2]->data, 0);
    if (delta == 0) return kn_infer_fail(c, "delta is 0");
    double n = __builtin_ceil((limit - start) / delta);
    if (!(n < (double)DIM_LIMIT)) return kn_infer_fail(c, "too many elements");
    count = n > 0 ? (int64_t)n : 0;
  } else {
    int64_t start = kn_ref_load_int(dt, t[0]->data, 0), limit = kn_ref_load_int(t[1]->dtype, t[1]->data, 0);
    int64_t delta = kn_ref_load_int(t[2]->dtype, t[2]->data, 0);
    if (delta == 0) return kn_infer_fail(c, "delta is 0");
    if (start < -DIM_LIMIT || start > DIM_LIMIT || limit < -DIM_LIMIT || limit > DIM_LIMIT)
      return kn_infer_fail(c, "start / limit out of range");
    int64_t span = limit - start;
    if (delta < -DIM_LIMIT || delta > DIM_LIMIT) /* a huge step (tested first: span + delta overflows) */
      count = span != 0 && (span > 0) == (delta > 0);
    else
      count = delta > 0 ? (span + delta - 1) / delta : (-span + (-delta) - 1) / (-delta);
    if (count < 0) count = 0;
  }
  return kn_infer_set(c, 0, dt, &(kn_shape){.rank = 1, .dim = {count}});
}

int kn_infer_movement(kn_infer *c) {
  switch (kn_infer_node(c)->op) {
  case KN_OP_TRANSPOSE: return transpose(c);
  case KN_OP_CONCAT: return concat(c);
  case KN_OP_SLICE: return slice(c);
  case KN_OP_SPLIT: return split(c);
  case KN_OP_GATHER: return gather(c);
  case KN_OP_GATHER_ELEMENTS: return gather_elements(c);
  case KN_OP_TRILU: return trilu(c);
  case KN_OP_EXPAND: return expand(c);
  case KN_OP_PAD: return pad(c);
  case KN_OP_TILE: return tile(c);
  case KN_OP_RESHAPE: return reshape(c);
  case KN_OP_FLATTEN: return flatten(c);
  case KN_OP_SQUEEZE: return squeeze(c, false);
  case KN_OP_UNSQUEEZE: return squeeze(c, true);
  case KN_OP_SHAPE:
  case KN_OP_SIZE: return shape_op(c);
  case KN_OP_CONSTANT: return constant(c);
  case KN_OP_CONSTANT_OF_SHAPE: return constant_of_shape(c);
  case KN_OP_RANGE: return range(c);
  default: return kn_infer_fail(c, "no shape rule");
  }
}
