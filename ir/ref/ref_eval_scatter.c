/* ref_eval_scatter.c — reference kernels of the scatters (index_family.h):
 * ScatterElements (and the old Scatter), ScatterND, TensorScatter.
 *
 * Written the way ONNX defines them, as writes: copy the data, then apply
 * each update in order (reduction none: the last write wins; add / mul /
 * max / min combine with what is there). The compute definitions
 * (te_ops_scatter.c) use the opposite, gather form, so the two check each
 * other. An out-of-range index drops its update in a model run and is an
 * error when folding constants (kn_ref_index_at); TensorScatter's write
 * position is checked apart. */
#include <string.h>

#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"

int kn_ref_scatter(kn_ref_call *c);

typedef enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN } red_kind;

static red_kind reduction_of(const kn_node *n) {
  const char *r = kn_node_attr_string(n, "reduction", "none");
  return !strcmp(r, "add") ? RED_ADD : !strcmp(r, "mul") ? RED_MUL : !strcmp(r, "max") ? RED_MAX
         : !strcmp(r, "min") ? RED_MIN : RED_NONE;
}

/* y[yi] = y[yi] (op) u[ui] */
static void apply(kn_ref_tensor *y, int64_t yi, const kn_ref_tensor *u, int64_t ui, red_kind red) {
  kn_dtype t = y->dtype;
  if (red == RED_NONE) {
    size_t es = kn_dtype_size(t);
    memcpy((char *)y->data + (size_t)yi * es, (const char *)u->data + (size_t)ui * es, es);
    return;
  }
  if (kn_dtype_is_float(t)) {
    double a = kn_ref_load(t, y->data, yi), b = kn_ref_load(t, u->data, ui), r;
    r = red == RED_ADD ? a + b : red == RED_MUL ? a * b : red == RED_MAX ? kn_max_nan(a, b) : kn_min_nan(a, b);
    kn_ref_store(t, y->data, yi, r);
    return;
  }
  int64_t a = kn_ref_load_int(t, y->data, yi), b = kn_ref_load_int(t, u->data, ui), r;
  bool uns = !kn_dtype_is_signed(t);
  bool a_gt = uns ? (uint64_t)a > (uint64_t)b : a > b;
  r = red == RED_ADD   ? (int64_t)((uint64_t)a + (uint64_t)b)
      : red == RED_MUL ? (int64_t)((uint64_t)a * (uint64_t)b)
      : red == RED_MAX ? (a_gt ? a : b)
                       : (a_gt ? b : a);
  kn_ref_store_int(t, y->data, yi, r);
}

static int64_t offset_of(const kn_shape *s, const int64_t *idx) {
  int64_t off = 0;
  for (int i = 0; i < s->rank; i++) off = off * s->dim[i] + idx[i];
  return off;
}

static void copy_data(kn_ref_call *c) {
  memcpy(c->out[0].data, c->in[0].data,
         (size_t)kn_ref_numel(&c->out[0].shape) * kn_dtype_size(c->out[0].dtype));
}

static int scatter_elements(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0], *ind = &c->in[1], *upd = &c->in[2];
  kn_ref_tensor *y = &c->out[0];
  int r = x->shape.rank;
  int axis = kn_axis_norm(kn_node_attr_int(c->node, "axis", 0), r);
  red_kind red = c->node->op == KN_OP_SCATTER ? RED_NONE : reduction_of(c->node);
  copy_data(c);
  int64_t idx[KN_MAX_RANK] = {0}, n = kn_ref_numel(&ind->shape);
  for (int64_t i = 0; i < n; i++, kn_ref_next_index(&ind->shape, idx)) {
    int64_t yi[KN_MAX_RANK];
    memcpy(yi, idx, sizeof yi);
    int ok = kn_ref_index_at(c, kn_ref_load_int(ind->dtype, ind->data, i), x->shape.dim[axis], &yi[axis]);
    if (ok < 0) return -1;
    if (ok) apply(y, offset_of(&y->shape, yi), upd, i, red);
  }
  return 0;
}

static int scatter_nd(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0], *ind = &c->in[1], *upd = &c->in[2];
  kn_ref_tensor *y = &c->out[0];
  int q = ind->shape.rank;
  int64_t k = ind->shape.dim[q - 1], slice = 1, count = 1;
  for (int i = (int)k; i < x->shape.rank; i++) slice *= x->shape.dim[i];
  for (int i = 0; i < q - 1; i++) count *= ind->shape.dim[i];
  red_kind red = reduction_of(c->node);
  copy_data(c);
  for (int64_t j = 0; j < count; j++) {
    int64_t xi[KN_MAX_RANK] = {0};
    int valid = 1;
    for (int64_t t = 0; t < k; t++) {
      int ok = kn_ref_index_at(c, ((const int64_t *)ind->data)[j * k + t], x->shape.dim[t], &xi[t]);
      if (ok < 0) return -1;
      valid &= ok;
    }
    if (!valid) continue; /* out of range: the update is dropped */
    int64_t base = offset_of(&x->shape, xi); /* trailing indices 0 */
    for (int64_t s = 0; s < slice; s++) apply(y, base + s, upd, j * slice + s, red);
  }
  return 0;
}

static int tensor_scatter(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0], *upd = &c->in[1];
  const kn_ref_tensor *wi = c->n_in > 2 && c->in[2].data ? &c->in[2] : NULL;
  kn_ref_tensor *y = &c->out[0];
  int r = x->shape.rank;
  int axis = kn_axis_norm(kn_node_attr_int(c->node, "axis", -2), r);
  bool circular = strcmp(kn_node_attr_string(c->node, "mode", "linear"), "circular") == 0;
  int64_t max_len = x->shape.dim[axis];
  copy_data(c);
  int64_t idx[KN_MAX_RANK] = {0}, n = kn_ref_numel(&upd->shape);
  for (int64_t i = 0; i < n; i++, kn_ref_next_index(&upd->shape, idx)) {
    int64_t w = wi ? kn_ref_load_int(wi->dtype, wi->data, idx[0]) : 0;
    int64_t yi[KN_MAX_RANK];
    memcpy(yi, idx, sizeof yi);
    yi[axis] = w + idx[axis];
    if (circular) yi[axis] = ((yi[axis] % max_len) + max_len) % max_len;
    if (yi[axis] < 0 || yi[axis] >= max_len)
      return kn_ref_error(c, "write position %lld out of range", (long long)yi[axis]);
    apply(y, offset_of(&y->shape, yi), upd, i, RED_NONE);
  }
  return 0;
}

int kn_ref_scatter(kn_ref_call *c) {
  switch (c->node->op) {
  case KN_OP_SCATTER_ELEMENTS:
  case KN_OP_SCATTER: return scatter_elements(c);
  case KN_OP_SCATTER_ND: return scatter_nd(c);
  case KN_OP_TENSOR_SCATTER: return tensor_scatter(c);
  default: return kn_ref_error(c, "not an op of the indexing family");
  }
}
