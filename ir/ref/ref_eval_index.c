/* ref_eval_index.c — reference kernels of the [indexing, scans, bitwise,
 * einsum] family (index_family.h): CumSum/CumProd, TopK, OneHot, GatherND,
 * EyeLike, ReverseSequence, BitShift and Bitwise*, Einsum, Det, the windows;
 * the scatters are in ref_eval_scatter.c.
 *
 * Plain loops straight from the ONNX definitions, independent of the compute
 * definitions (te_ops_index.c): scans run sequentially, TopK sorts, Det does
 * Gaussian elimination with partial pivoting. Integers are computed in int64
 * (wrapping), floats in double. Output shapes come from shape inference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph/index_family.h"
#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"

int kn_ref_scatter(kn_ref_call *c); /* ref_eval_scatter.c */

static bool is_fl(kn_dtype t) { return kn_dtype_is_float(t); }

/* Copies element xi of x into element yi of y (same dtype). */
static void copy_elem(kn_ref_tensor *y, int64_t yi, const kn_ref_tensor *x, int64_t xi) {
  size_t es = kn_dtype_size(y->dtype);
  memcpy((char *)y->data + (size_t)yi * es, (const char *)x->data + (size_t)xi * es, es);
}

/* Offset of a multi-index in a row-major shape. */
static int64_t offset_of(const kn_shape *s, const int64_t *idx) {
  int64_t off = 0;
  for (int i = 0; i < s->rank; i++) off = off * s->dim[i] + idx[i];
  return off;
}

static int cum(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0];
  kn_ref_tensor *y = &c->out[0];
  int r = x->shape.rank;
  int axis = kn_axis_norm(kn_ref_load_int(c->in[1].dtype, c->in[1].data, 0), r);
  if (axis < 0) return kn_ref_error(c, "axis out of range");
  bool excl = kn_node_attr_int(c->node, "exclusive", 0) != 0;
  bool rev = kn_node_attr_int(c->node, "reverse", 0) != 0;
  bool prod = c->node->op == KN_OP_CUM_PROD;
  int64_t n = x->shape.dim[axis], inner = 1, outer = 1;
  for (int i = axis + 1; i < r; i++) inner *= x->shape.dim[i];
  for (int i = 0; i < axis; i++) outer *= x->shape.dim[i];
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      double af = prod ? 1 : 0;
      int64_t ai = prod ? 1 : 0;
      for (int64_t s = 0; s < n; s++) {
        int64_t k = rev ? n - 1 - s : s;
        int64_t off = (o * n + k) * inner + in;
        double xf = is_fl(x->dtype) ? kn_ref_load(x->dtype, x->data, off) : 0;
        int64_t xi = is_fl(x->dtype) ? 0 : kn_ref_load_int(x->dtype, x->data, off);
        if (!excl) {
          af = prod ? af * xf : af + xf;
          ai = (int64_t)(prod ? (uint64_t)ai * (uint64_t)xi : (uint64_t)ai + (uint64_t)xi);
        }
        if (is_fl(y->dtype)) kn_ref_store(y->dtype, y->data, off, af);
        else kn_ref_store_int(y->dtype, y->data, off, ai);
        if (excl) {
          af = prod ? af * xf : af + xf;
          ai = (int64_t)(prod ? (uint64_t)ai * (uint64_t)xi : (uint64_t)ai + (uint64_t)xi);
        }
      }
    }
  return 0;
}

/* Element a of x comes strictly before element b in TopK's order by value
 * (larger first when `largest`); equal values keep index order. NaN counts
 * as larger than any number (numpy's sort order, as the ONNX reference). */
static bool better(const kn_ref_tensor *x, int64_t a, int64_t b, bool largest) {
  if (kn_dtype_is_float(x->dtype)) {
    double p = kn_ref_load(x->dtype, x->data, a), q = kn_ref_load(x->dtype, x->data, b);
    if (isnan(p) || isnan(q)) return largest ? isnan(p) && !isnan(q) : isnan(q) && !isnan(p);
    return largest ? p > q : p < q;
  }
  int64_t p = kn_ref_load_int(x->dtype, x->data, a), q = kn_ref_load_int(x->dtype, x->data, b);
  if (!kn_dtype_is_signed(x->dtype)) return largest ? (uint64_t)p > (uint64_t)q : (uint64_t)p < (uint64_t)q;
  return largest ? p > q : p < q;
}

/* kiln.TopKRank: the number of elements of the line before each one. */
static int top_k_rank(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0];
  int r = x->shape.rank;
  int axis = kn_axis_norm(kn_node_attr_int(c->node, "axis", -1), r);
  bool largest = kn_node_attr_int(c->node, "largest", 1) != 0;
  int64_t n = x->shape.dim[axis], inner = 1, outer = 1;
  for (int i = axis + 1; i < r; i++) inner *= x->shape.dim[i];
  for (int i = 0; i < axis; i++) outer *= x->shape.dim[i];
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++)
      for (int64_t e = 0; e < n; e++) {
        int64_t oe = (o * n + e) * inner + in, count = 0;
        for (int64_t m = 0; m < n; m++) {
          int64_t om = (o * n + m) * inner + in;
          count += better(x, om, oe, largest) || (m < e && !better(x, oe, om, largest));
        }
        ((int64_t *)c->out[0].data)[oe] = count;
      }
  return 0;
}

/* TopK: per line along the axis, a stable selection: larger (smaller)
 * values first, equal values by lower index. */
static int top_k(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0];
  int r = x->shape.rank;
  int axis = kn_axis_norm(kn_node_attr_int(c->node, "axis", -1), r);
  bool largest = kn_node_attr_int(c->node, "largest", 1) != 0;
  int64_t n = x->shape.dim[axis], k = c->out[0].shape.dim[axis], inner = 1, outer = 1;
  for (int i = axis + 1; i < r; i++) inner *= x->shape.dim[i];
  for (int i = 0; i < axis; i++) outer *= x->shape.dim[i];
  bool *taken = kn_arena_alloc(c->arena, (size_t)(n ? n : 1));
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      memset(taken, 0, (size_t)(n ? n : 1));
      for (int64_t p = 0; p < k; p++) {
        int64_t best = -1;
        for (int64_t e = 0; e < n; e++) {
          if (taken[e]) continue;
          if (best < 0) {
            best = e;
            continue;
          }
          if (better(x, (o * n + e) * inner + in, (o * n + best) * inner + in, largest)) best = e;
        }
        taken[best] = true;
        int64_t yo = (o * k + p) * inner + in;
        copy_elem(&c->out[0], yo, x, (o * n + best) * inner + in);
        if (c->n_out > 1 && c->out[1].data) ((int64_t *)c->out[1].data)[yo] = best;
      }
    }
  return 0;
}

static int one_hot(kn_ref_call *c) {
  const kn_ref_tensor *ind = &c->in[0], *val = &c->in[2];
  kn_ref_tensor *y = &c->out[0];
  int r = y->shape.rank;
  int axis = kn_axis_norm(kn_node_attr_int(c->node, "axis", -1), r);
  int64_t depth = y->shape.dim[axis];
  int64_t idx[KN_MAX_RANK] = {0}, n = kn_ref_numel(&y->shape);
  for (int64_t i = 0; i < n; i++, kn_ref_next_index(&y->shape, idx)) {
    int64_t ii[KN_MAX_RANK];
    for (int a = 0, k = 0; a < r; a++)
      if (a != axis) ii[k++] = idx[a];
    int64_t off = offset_of(&ind->shape, ii);
    int64_t v = is_fl(ind->dtype) ? kn_f2i64_sat(kn_ref_load(ind->dtype, ind->data, off))
                                  : kn_ref_load_int(ind->dtype, ind->data, off);
    if (v < 0) v += depth;
    copy_elem(y, i, val, v == idx[axis] ? 1 : 0);
  }
  return 0;
}

static int gather_nd(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0], *ind = &c->in[1];
  kn_ref_tensor *y = &c->out[0];
  int b = (int)kn_node_attr_int(c->node, "batch_dims", 0), q = ind->shape.rank;
  int k = (int)ind->shape.dim[q - 1];
  int64_t idx[KN_MAX_RANK] = {0}, n = kn_ref_numel(&y->shape);
  for (int64_t i = 0; i < n; i++, kn_ref_next_index(&y->shape, idx)) {
    int64_t xi[KN_MAX_RANK], ii[KN_MAX_RANK];
    for (int a = 0; a < q - 1; a++) ii[a] = idx[a];
    for (int a = 0; a < b; a++) xi[a] = idx[a];
    int valid = 1;
    for (int t = 0; t < k; t++) {
      ii[q - 1] = t;
      int64_t v = ((const int64_t *)ind->data)[offset_of(&ind->shape, ii)];
      int ok = kn_ref_index_at(c, v, x->shape.dim[b + t], &xi[b + t]);
      if (ok < 0) return -1;
      valid &= ok;
    }
    for (int a = b + k; a < x->shape.rank; a++) xi[a] = idx[q - 1 + a - b - k];
    if (valid) copy_elem(y, i, x, offset_of(&x->shape, xi)); /* else stays 0: out of range */
  }
  return 0;
}

static int eye_like(kn_ref_call *c) {
  kn_ref_tensor *y = &c->out[0];
  int64_t k = kn_node_attr_int(c->node, "k", 0);
  for (int64_t i = 0; i < y->shape.dim[0]; i++)
    for (int64_t j = 0; j < y->shape.dim[1]; j++)
      kn_ref_store_int(y->dtype, y->data, i * y->shape.dim[1] + j, j - i == k);
  return 0;
}

static int reverse_sequence(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0], *len = &c->in[1];
  kn_ref_tensor *y = &c->out[0];
  int ba = kn_axis_norm(kn_node_attr_int(c->node, "batch_axis", 1), x->shape.rank);
  int ta = 1 - ba;
  int64_t idx[KN_MAX_RANK] = {0}, n = kn_ref_numel(&y->shape);
  for (int64_t i = 0; i < n; i++, kn_ref_next_index(&y->shape, idx)) {
    int64_t l = kn_ref_load_int(len->dtype, len->data, idx[ba]), t = idx[ta];
    if (l > x->shape.dim[ta]) l = x->shape.dim[ta];
    int64_t xi[KN_MAX_RANK];
    memcpy(xi, idx, sizeof xi);
    if (t < l) xi[ta] = l - 1 - t;
    copy_elem(y, i, x, offset_of(&x->shape, xi));
  }
  return 0;
}

/* Bitwise ops on the bit patterns; shifts on unsigned values (a shift by the
 * width or more gives 0). */
static int bitwise(kn_ref_call *c) {
  kn_ref_tensor *y = &c->out[0];
  const kn_ref_tensor *a = &c->in[0], *b = c->n_in > 1 ? &c->in[1] : NULL;
  bool left = c->node->op == KN_OP_BIT_SHIFT &&
              strcmp(kn_node_attr_string(c->node, "direction", ""), "LEFT") == 0;
  int bits = (int)kn_dtype_size(y->dtype) * 8;
  int64_t idx[KN_MAX_RANK] = {0}, n = kn_ref_numel(&y->shape);
  for (int64_t i = 0; i < n; i++, kn_ref_next_index(&y->shape, idx)) {
    uint64_t p = (uint64_t)kn_ref_load_int(a->dtype, a->data, kn_ref_bcast_offset(&a->shape, &y->shape, idx));
    uint64_t q = b ? (uint64_t)kn_ref_load_int(b->dtype, b->data, kn_ref_bcast_offset(&b->shape, &y->shape, idx)) : 0;
    if (bits < 64) {
      p &= (UINT64_C(1) << bits) - 1;
      q &= (UINT64_C(1) << bits) - 1;
    }
    uint64_t v;
    switch (c->node->op) {
    case KN_OP_BITWISE_AND: v = p & q; break;
    case KN_OP_BITWISE_OR: v = p | q; break;
    case KN_OP_BITWISE_XOR: v = p ^ q; break;
    case KN_OP_BITWISE_NOT: v = ~p; break;
    default: v = q >= (uint64_t)bits ? 0 : left ? p << q : p >> q; break;
    }
    kn_ref_store_int(y->dtype, y->data, i, (int64_t)v);
  }
  return 0;
}

/* Einsum: for each output element, the sum over every value of the summed
 * labels of the product of the operands. */
static int einsum(kn_ref_call *c) {
  const char *eq = kn_node_attr_string(c->node, "equation", "");
  kn_ref_tensor *y = &c->out[0];
  int ranks[KN_EINSUM_MAX_IN];
  for (int i = 0; i < c->n_in; i++) ranks[i] = c->in[i].shape.rank;
  kn_einsum e;
  char err[128];
  if (kn_einsum_parse(eq, c->n_in, ranks, &e, err, sizeof err) < 0) return kn_ref_error(c, "%s", err);
  int64_t ext[KN_EINSUM_LABELS];
  for (int l = 0; l < KN_EINSUM_LABELS; l++) ext[l] = 1;
  for (int i = 0; i < c->n_in; i++)
    for (int a = 0; a < e.rank[i]; a++)
      if (c->in[i].shape.dim[a] != 1) ext[e.label[i][a]] = c->in[i].shape.dim[a];
  kn_shape sum_shape = {.rank = e.n_sum};
  if (e.n_sum > KN_MAX_RANK) return kn_ref_error(c, "too many summed labels");
  for (int j = 0; j < e.n_sum; j++) sum_shape.dim[j] = ext[e.sum_label[j]];
  int64_t nsum = kn_ref_numel(&sum_shape);
  int64_t idx[KN_MAX_RANK] = {0}, n = kn_ref_numel(&y->shape);
  bool fl = is_fl(y->dtype);
  for (int64_t i = 0; i < n; i++, kn_ref_next_index(&y->shape, idx)) {
    int64_t at[KN_EINSUM_LABELS] = {0};
    for (int j = 0; j < e.out_rank; j++) at[e.out_label[j]] = idx[j];
    double accf = 0;
    int64_t acci = 0, sidx[KN_MAX_RANK] = {0};
    for (int64_t s = 0; s < nsum; s++, kn_ref_next_index(&sum_shape, sidx)) {
      for (int j = 0; j < e.n_sum; j++) at[e.sum_label[j]] = sidx[j];
      double pf = 1;
      int64_t pi = 1;
      for (int k = 0; k < c->n_in; k++) {
        const kn_ref_tensor *x = &c->in[k];
        int64_t xi[KN_MAX_RANK];
        for (int a = 0; a < e.rank[k]; a++) xi[a] = x->shape.dim[a] == 1 ? 0 : at[e.label[k][a]];
        int64_t off = offset_of(&x->shape, xi);
        if (fl) pf *= kn_ref_load(x->dtype, x->data, off);
        else pi = (int64_t)((uint64_t)pi * (uint64_t)kn_ref_load_int(x->dtype, x->data, off));
      }
      accf += pf;
      acci = (int64_t)((uint64_t)acci + (uint64_t)pi);
    }
    if (fl) kn_ref_store(y->dtype, y->data, i, accf);
    else kn_ref_store_int(y->dtype, y->data, i, acci);
  }
  return 0;
}

/* Det: LU decomposition with partial pivoting, in double. */
static int det(kn_ref_call *c) {
  const kn_ref_tensor *x = &c->in[0];
  int r = x->shape.rank;
  int64_t m = x->shape.dim[r - 1], count = kn_ref_numel(&c->out[0].shape);
  double *a = kn_arena_alloc(c->arena, sizeof(double) * (size_t)(m * m + 1));
  for (int64_t b = 0; b < count; b++) {
    for (int64_t i = 0; i < m * m; i++) a[i] = kn_ref_load(x->dtype, x->data, b * m * m + i);
    double d = 1;
    for (int64_t k = 0; k < m; k++) {
      int64_t p = k;
      for (int64_t i = k + 1; i < m; i++)
        if (fabs(a[i * m + k]) > fabs(a[p * m + k])) p = i;
      if (a[p * m + k] == 0) {
        d = 0;
        break;
      }
      if (p != k) {
        for (int64_t j = 0; j < m; j++) {
          double t = a[k * m + j];
          a[k * m + j] = a[p * m + j];
          a[p * m + j] = t;
        }
        d = -d;
      }
      d *= a[k * m + k];
      for (int64_t i = k + 1; i < m; i++) {
        double f = a[i * m + k] / a[k * m + k];
        for (int64_t j = k; j < m; j++) a[i * m + j] -= f * a[k * m + j];
      }
    }
    kn_ref_store(c->out[0].dtype, c->out[0].data, b, d);
  }
  return 0;
}

/* Hann / Hamming / Blackman: a0 - a1 cos(2 pi i / N) + a2 cos(4 pi i / N),
 * N = size (periodic) or size - 1 (symmetric). */
static int window(kn_ref_call *c) {
  kn_ref_tensor *y = &c->out[0];
  int64_t size = y->shape.dim[0];
  bool periodic = kn_node_attr_int(c->node, "periodic", 1) != 0;
  double a0 = 0.5, a1 = 0.5, a2 = 0;
  if (c->node->op == KN_OP_HAMMING_WINDOW) a0 = 25.0 / 46, a1 = 21.0 / 46;
  if (c->node->op == KN_OP_BLACKMAN_WINDOW) a0 = 0.42, a1 = 0.5, a2 = 0.08;
  double nn = (double)(periodic ? size : size - 1);
  for (int64_t i = 0; i < size; i++) {
    double t = 2 * M_PI * (double)i / nn;
    double v = nn == 0 ? 1 : a0 - a1 * cos(t) + a2 * cos(2 * t);
    if (is_fl(y->dtype)) kn_ref_store(y->dtype, y->data, i, v);
    else kn_ref_store_int(y->dtype, y->data, i, (int64_t)v);
  }
  return 0;
}

int kn_ref_index(kn_ref_call *c) {
  for (int k = 0; k < c->n_in; k++)
    if (c->in[k].data && c->in[k].coef) return KN_REF_NOFOLD;
  switch (c->node->op) {
  case KN_OP_CUM_SUM:
  case KN_OP_CUM_PROD: return cum(c);
  case KN_OP_TOP_K: return top_k(c);
  case KN_OP_TOP_K_RANK: return top_k_rank(c);
  case KN_OP_ONE_HOT: return one_hot(c);
  case KN_OP_GATHER_ND: return gather_nd(c);
  case KN_OP_EYE_LIKE: return eye_like(c);
  case KN_OP_REVERSE_SEQUENCE: return reverse_sequence(c);
  case KN_OP_BIT_SHIFT:
  case KN_OP_BITWISE_AND:
  case KN_OP_BITWISE_OR:
  case KN_OP_BITWISE_XOR:
  case KN_OP_BITWISE_NOT: return bitwise(c);
  case KN_OP_EINSUM: return einsum(c);
  case KN_OP_DET: return det(c);
  case KN_OP_HANN_WINDOW:
  case KN_OP_HAMMING_WINDOW:
  case KN_OP_BLACKMAN_WINDOW: return window(c);
  default: return kn_ref_scatter(c);
  }
}
