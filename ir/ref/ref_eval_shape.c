/* ref_eval_shape.c — reference kernels of the data-movement, view, shape and
 * constant-producing ops: Transpose, Concat, Slice, Split, Gather, Expand,
 * Pad, Tile, Reshape/Flatten/Squeeze/Unsqueeze, Shape, Size, Constant,
 * ConstantOfShape, Range.
 *
 * These kernels only move elements (memcpy of the element size), so they work
 * for every dtype; the output shapes come from shape inference. Shape and Size
 * turn batch dims into batch coefficients. */
#include <string.h>

#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"

static size_t esize(const kn_ref_tensor *t) { return kn_dtype_size(t->dtype); }

static void copy_elem(kn_ref_tensor *y, int64_t yi, const kn_ref_tensor *x, int64_t xi) {
  size_t es = esize(y);
  memcpy((char *)y->data + (size_t)yi * es, (const char *)x->data + (size_t)xi * es, es);
}

/* Reads an integer input (starts, pads, repeats ...) into buf; -1 if absent
 * or longer than max. */
static int read_ints(const kn_ref_call *c, int k, int64_t *buf, int max) {
  if (k >= c->n_in || !c->in[k].data) return -1;
  int64_t n = kn_ref_numel(&c->in[k].shape);
  if (n > max) return -1;
  for (int64_t i = 0; i < n; i++) buf[i] = kn_ref_load_int(c->in[k].dtype, c->in[k].data, i);
  return (int)n;
}

static int view_copy(kn_ref_call *c) {
  memcpy(c->out[0].data, c->in[0].data, (size_t)kn_ref_numel(&c->out[0].shape) * esize(&c->out[0]));
  return 0;
}

static int transpose(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0];
  kn_ref_tensor *y = &c->out[0];
  int r = x->shape.rank, np = 0;
  const int64_t *perm = kn_node_attr_ints(c->node, "perm", &np);
  int64_t p[KN_MAX_RANK], xs[KN_MAX_RANK];
  for (int i = 0; i < r; i++) p[i] = perm && np == r ? perm[i] : r - 1 - i;
  kn_ref_strides(&x->shape, xs);
  int64_t n = kn_ref_numel(&y->shape), idx[KN_MAX_RANK] = {0};
  for (int64_t i = 0; i < n; i++, kn_ref_next_index(&y->shape, idx)) {
    int64_t off = 0;
    for (int k = 0; k < r; k++) off += idx[k] * xs[p[k]];
    copy_elem(y, i, x, off);
  }
  return 0;
}

static int concat(kn_ref_call *c) {
  kn_ref_tensor *y = &c->out[0];
  int axis = kn_axis_norm(kn_node_attr_int(c->node, "axis", 0), y->shape.rank);
  if (axis < 0) return kn_ref_error(c, "axis out of range");
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; i++) outer *= y->shape.dim[i];
  for (int i = axis + 1; i < y->shape.rank; i++) inner *= y->shape.dim[i];
  size_t es = esize(y);
  int64_t y_row = y->shape.dim[axis] * inner, pos = 0;
  for (int k = 0; k < c->n_in; k++) {
    const kn_ref_tensor *x = &c->in[k];
    int64_t chunk = x->shape.dim[axis] * inner;
    for (int64_t o = 0; o < outer; o++)
      memcpy((char *)y->data + (size_t)(o * y_row + pos) * es, (const char *)x->data + (size_t)(o * chunk) * es,
             (size_t)chunk * es);
    pos += chunk;
  }
  return 0;
}

static int slice(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0];
  kn_ref_tensor *y = &c->out[0];
  int64_t starts[KN_MAX_RANK], ends[KN_MAX_RANK], axes[KN_MAX_RANK], steps[KN_MAX_RANK];
  int n = read_ints(c, 1, starts, KN_MAX_RANK), n_axes = 0, n_steps = 0;
  const int64_t *attr;
  bool have_axes, have_steps;
  if (n >= 0) {
    if (read_ints(c, 2, ends, KN_MAX_RANK) != n) return kn_ref_error(c, "starts and ends differ in length");
    n_axes = read_ints(c, 3, axes, KN_MAX_RANK);
    n_steps = read_ints(c, 4, steps, KN_MAX_RANK);
    have_axes = n_axes >= 0, have_steps = n_steps >= 0;
  } else { /* opset < 10: attributes */
    int ne = 0;
    attr = kn_node_attr_ints(c->node, "starts", &n);
    if (n > KN_MAX_RANK) return kn_ref_error(c, "too many starts");
    memcpy(starts, attr, sizeof(int64_t) * (size_t)n);
    attr = kn_node_attr_ints(c->node, "ends", &ne);
    if (ne != n) return kn_ref_error(c, "starts and ends differ in length");
    memcpy(ends, attr, sizeof(int64_t) * (size_t)n);
    attr = kn_node_attr_ints(c->node, "axes", &n_axes);
    have_axes = attr != NULL && n_axes <= KN_MAX_RANK;
    if (have_axes) memcpy(axes, attr, sizeof(int64_t) * (size_t)n_axes);
    have_steps = false;
  }
  if ((have_axes && n_axes != n) || (have_steps && n_steps != n))
    return kn_ref_error(c, "axes/steps length differs from starts");
  kn_slice s;
  if (kn_slice_resolve(c->node, x->shape.rank, x->shape.dim, starts, ends, have_axes ? axes : NULL,
                       have_steps ? steps : NULL, n, &s, c->d) < 0)
    return -1;
  int64_t xs[KN_MAX_RANK], total = kn_ref_numel(&y->shape), idx[KN_MAX_RANK] = {0};
  kn_ref_strides(&x->shape, xs);
  for (int64_t i = 0; i < total; i++, kn_ref_next_index(&y->shape, idx)) {
    int64_t off = 0;
    for (int a = 0; a < x->shape.rank; a++) off += (s.start[a] + idx[a] * s.step[a]) * xs[a];
    copy_elem(y, i, x, off);
  }
  return 0;
}

/* Split: the output shapes (from inference) give each piece's size. */
static int split(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0];
  int axis = kn_axis_norm(kn_node_attr_int(c->node, "axis", 0), x->shape.rank);
  if (axis < 0) return kn_ref_error(c, "axis out of range");
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; i++) outer *= x->shape.dim[i];
  for (int i = axis + 1; i < x->shape.rank; i++) inner *= x->shape.dim[i];
  size_t es = esize(x);
  int64_t x_row = x->shape.dim[axis] * inner, pos = 0;
  for (int k = 0; k < c->n_out; k++) {
    kn_ref_tensor *y = &c->out[k];
    int64_t chunk = y->shape.dim[axis] * inner;
    if (y->data)
      for (int64_t o = 0; o < outer; o++)
        memcpy((char *)y->data + (size_t)(o * chunk) * es, (const char *)x->data + (size_t)(o * x_row + pos) * es,
               (size_t)chunk * es);
    pos += chunk;
  }
  return 0;
}

static int gather(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0], *ind = &c->in[1];
  kn_ref_tensor *y = &c->out[0];
  int axis = kn_axis_norm(kn_node_attr_int(c->node, "axis", 0), x->shape.rank);
  if (axis < 0) return kn_ref_error(c, "axis out of range");
  int64_t outer = 1, inner = 1, dim = x->shape.dim[axis];
  for (int i = 0; i < axis; i++) outer *= x->shape.dim[i];
  for (int i = axis + 1; i < x->shape.rank; i++) inner *= x->shape.dim[i];
  int64_t n_ind = kn_ref_numel(&ind->shape);
  size_t es = esize(x);
  for (int64_t j = 0; j < n_ind; j++) {
    int64_t k;
    int ok = kn_ref_index_at(c, kn_ref_load_int(ind->dtype, ind->data, j), dim, &k);
    if (ok < 0) return -1;
    for (int64_t o = 0; o < outer; o++) {
      char *dst = (char *)y->data + (size_t)((o * n_ind + j) * inner) * es;
      if (ok)
        memcpy(dst, (const char *)x->data + (size_t)((o * dim + k) * inner) * es, (size_t)inner * es);
      else
        memset(dst, 0, (size_t)inner * es); /* out of range: 0 */
    }
  }
  return 0;
}

static int gather_elements(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0], *ind = &c->in[1];
  kn_ref_tensor *y = &c->out[0];
  int r = x->shape.rank;
  int axis = kn_axis_norm(kn_node_attr_int(c->node, "axis", 0), r);
  if (axis < 0) return kn_ref_error(c, "axis out of range");
  int64_t xs[KN_MAX_RANK], idx[KN_MAX_RANK] = {0}, n = kn_ref_numel(&y->shape);
  kn_ref_strides(&x->shape, xs);
  size_t es = esize(x);
  for (int64_t i = 0; i < n; i++, kn_ref_next_index(&y->shape, idx)) {
    int64_t k;
    int ok = kn_ref_index_at(c, kn_ref_load_int(ind->dtype, ind->data, i), x->shape.dim[axis], &k);
    if (ok < 0) return -1;
    int64_t off = 0;
    for (int a = 0; a < r; a++) off += (a == axis ? k : idx[a]) * xs[a];
    if (ok)
      memcpy((char *)y->data + (size_t)i * es, (const char *)x->data + (size_t)off * es, es);
    else
      memset((char *)y->data + (size_t)i * es, 0, es); /* out of range: 0 */
  }
  return 0;
}

static int trilu(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0];
  kn_ref_tensor *y = &c->out[0];
  int r = x->shape.rank;
  int64_t k = c->n_in > 1 && c->in[1].data ? kn_ref_load_int(c->in[1].dtype, c->in[1].data, 0) : 0;
  bool upper = kn_node_attr_int(c->node, "upper", 1) != 0;
  int64_t idx[KN_MAX_RANK] = {0}, n = kn_ref_numel(&y->shape);
  size_t es = esize(x);
  for (int64_t i = 0; i < n; i++, kn_ref_next_index(&y->shape, idx)) {
    int64_t diff = idx[r - 1] - idx[r - 2];
    bool keep = upper ? diff >= k : diff <= k;
    if (keep) memcpy((char *)y->data + (size_t)i * es, (const char *)x->data + (size_t)i * es, es);
    else memset((char *)y->data + (size_t)i * es, 0, es);
  }
  return 0;
}

/* Expand and Tile: every output element reads one input element. */
static int broadcast_copy(kn_ref_call *c, bool tile) {
  const kn_ref_tensor *x = &c->in[0];
  kn_ref_tensor *y = &c->out[0];
  int64_t xs[KN_MAX_RANK], n = kn_ref_numel(&y->shape), idx[KN_MAX_RANK] = {0};
  kn_ref_strides(&x->shape, xs);
  for (int64_t i = 0; i < n; i++, kn_ref_next_index(&y->shape, idx)) {
    int64_t off = 0;
    if (tile)
      for (int a = 0; a < x->shape.rank; a++) off += (idx[a] % x->shape.dim[a]) * xs[a];
    else
      off = kn_ref_bcast_offset(&x->shape, &y->shape, idx);
    copy_elem(y, i, x, off);
  }
  return 0;
}

static int pad(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0];
  kn_ref_tensor *y = &c->out[0];
  int r = x->shape.rank;
  int64_t pads[2 * KN_MAX_RANK], axes[KN_MAX_RANK], begin[KN_MAX_RANK] = {0};
  int np = read_ints(c, 1, pads, 2 * KN_MAX_RANK);
  if (np < 0) {
    const int64_t *attr = kn_node_attr_ints(c->node, "pads", &np);
    if (np > 2 * KN_MAX_RANK) return kn_ref_error(c, "too many pads");
    if (np) memcpy(pads, attr, sizeof(int64_t) * (size_t)np);
  }
  int na = read_ints(c, 3, axes, KN_MAX_RANK);
  if (na < 0) {
    na = r;
    for (int i = 0; i < r; i++) axes[i] = i;
  }
  if (np != 2 * na) return kn_ref_error(c, "pads has %d entries, expected %d", np, 2 * na);
  for (int i = 0; i < na; i++) {
    int a = kn_axis_norm(axes[i], r);
    if (a < 0) return kn_ref_error(c, "pad axis out of range");
    begin[a] = pads[i];
  }
  const char *mode = kn_node_attr_string(c->node, "mode", "constant");
  double value = kn_node_attr_float(c->node, "value", 0.0f);
  if (c->n_in > 2 && c->in[2].data) value = kn_ref_load(c->in[2].dtype, c->in[2].data, 0);
  int64_t xs[KN_MAX_RANK], n = kn_ref_numel(&y->shape), idx[KN_MAX_RANK] = {0};
  kn_ref_strides(&x->shape, xs);
  for (int64_t i = 0; i < n; i++, kn_ref_next_index(&y->shape, idx)) {
    int64_t off = 0;
    bool outside = false;
    for (int a = 0; a < r; a++) {
      int64_t p = idx[a] - begin[a], d = x->shape.dim[a];
      if (p < 0 || p >= d) {
        if (!strcmp(mode, "edge")) {
          p = p < 0 ? 0 : d - 1;
        } else if (!strcmp(mode, "reflect") && d > 1) {
          int64_t period = 2 * (d - 1);
          p = ((p % period) + period) % period;
          if (p >= d) p = period - p;
        } else if (!strcmp(mode, "reflect")) {
          p = 0;
        } else if (!strcmp(mode, "wrap")) { /* periodic: the axis repeats */
          p = ((p % d) + d) % d;
        } else {
          outside = true;
        }
      }
      off += p * xs[a];
    }
    if (outside) kn_ref_store(y->dtype, y->data, i, value);
    else copy_elem(y, i, x, off);
  }
  return 0;
}

static int shape_op(kn_ref_call *c) {
  const kn_shape *s = &c->in[0].shape;
  kn_ref_tensor *y = &c->out[0];
  if (c->node->op == KN_OP_SIZE) {
    int64_t numel = 1;
    int n_batch = 0;
    for (int i = 0; i < s->rank; i++) {
      numel *= s->dim[i];
      n_batch += (s->batch_mask >> i) & 1;
    }
    if (n_batch > 1) return KN_REF_NOFOLD;
    if (n_batch) {
      y->coef = KN_NEW_ARRAY(c->arena, int64_t, 1);
      y->coef[0] = numel;
      numel = 0;
    }
    kn_ref_store_int(y->dtype, y->data, 0, numel);
    return 0;
  }
  int64_t start = kn_node_attr_int(c->node, "start", 0);
  if (start < 0) start += s->rank;
  if (start < 0) start = 0;
  int64_t n = kn_ref_numel(&y->shape);
  for (int64_t i = 0; i < n; i++) {
    int a = (int)(start + i);
    bool batch = (s->batch_mask >> a) & 1;
    if (batch && !y->coef) y->coef = KN_NEW_ARRAY(c->arena, int64_t, n);
    if (batch) y->coef[i] = s->dim[a];
    kn_ref_store_int(y->dtype, y->data, i, batch ? 0 : s->dim[a]);
  }
  return 0;
}

/* Constant: the attribute forms value (tensor), value_float(s), value_int(s). */
static int constant(kn_ref_call *c) {
  kn_ref_tensor *y = &c->out[0];
  int64_t n = kn_ref_numel(&y->shape);
  const kn_attr *a = kn_node_attr(c->node, "value");
  if (a && a->kind == KN_ATTR_TENSOR && a->value >= 0 && a->value < c->g->n_values && c->g->values[a->value].data) {
    const kn_value *v = &c->g->values[a->value];
    memcpy(y->data, v->data, (size_t)n * esize(y));
    return 0;
  }
  if ((a = kn_node_attr(c->node, "value_float")) || (a = kn_node_attr(c->node, "value_int"))) {
    if (a->kind == KN_ATTR_FLOAT) kn_ref_store(y->dtype, y->data, 0, a->f);
    else kn_ref_store_int(y->dtype, y->data, 0, a->i);
    return 0;
  }
  if ((a = kn_node_attr(c->node, "value_floats")) || (a = kn_node_attr(c->node, "value_ints"))) {
    for (int64_t i = 0; i < n && i < a->n; i++) {
      if (a->kind == KN_ATTR_FLOATS) kn_ref_store(y->dtype, y->data, i, a->floats[i]);
      else kn_ref_store_int(y->dtype, y->data, i, a->ints[i]);
    }
    return 0;
  }
  return kn_ref_error(c, "unsupported constant attribute");
}

static int constant_of_shape(kn_ref_call *c) {
  kn_ref_tensor *y = &c->out[0];
  int64_t n = kn_ref_numel(&y->shape);
  const kn_attr *a = kn_node_attr(c->node, "value");
  if (!a || a->kind != KN_ATTR_TENSOR) return 0; /* float zeros */
  const kn_value *v = &c->g->values[a->value];
  for (int64_t i = 0; i < n; i++) memcpy((char *)y->data + (size_t)i * esize(y), v->data, esize(y));
  return 0;
}

static int range(kn_ref_call *c) {
  kn_ref_tensor *y = &c->out[0];
  int64_t n = kn_ref_numel(&y->shape);
  for (int64_t i = 0; i < n; i++) {
    if (kn_dtype_is_float(y->dtype)) {
      double start = kn_ref_load(c->in[0].dtype, c->in[0].data, 0);
      double delta = kn_ref_load(c->in[2].dtype, c->in[2].data, 0);
      kn_ref_store(y->dtype, y->data, i, start + (double)i * delta);
    } else {
      int64_t start = kn_ref_load_int(c->in[0].dtype, c->in[0].data, 0);
      int64_t delta = kn_ref_load_int(c->in[2].dtype, c->in[2].data, 0);
      kn_ref_store_int(y->dtype, y->data, i, start + i * delta);
    }
  }
  return 0;
}

int kn_ref_movement(kn_ref_call *c) {
  switch (c->node->op) {
  case KN_OP_RESHAPE:
  case KN_OP_FLATTEN:
  case KN_OP_SQUEEZE:
  case KN_OP_UNSQUEEZE: return view_copy(c);
  case KN_OP_TRANSPOSE: return transpose(c);
  case KN_OP_CONCAT: return concat(c);
  case KN_OP_SLICE: return slice(c);
  case KN_OP_SPLIT: return split(c);
  case KN_OP_GATHER: return gather(c);
  case KN_OP_GATHER_ELEMENTS: return gather_elements(c);
  case KN_OP_TRILU: return trilu(c);
  case KN_OP_EXPAND: return broadcast_copy(c, false);
  case KN_OP_TILE: return broadcast_copy(c, true);
  case KN_OP_PAD: return pad(c);
  case KN_OP_SHAPE:
  case KN_OP_SIZE: return shape_op(c);
  case KN_OP_CONSTANT: return constant(c);
  case KN_OP_CONSTANT_OF_SHAPE: return constant_of_shape(c);
  case KN_OP_RANGE: return range(c);
  default: return kn_ref_error(c, "not a data-movement op");
  }
}
