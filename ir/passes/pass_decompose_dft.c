/* pass_decompose_dft.c — DFT and STFT as contractions with a constant DFT
 * matrix (called by the driver in pass_inline_control.c).
 *
 * DFT along `axis` of x [..., L, ..., C] (C = 1 real, 2 complex): the signal
 * axis and the complex axis are moved last and flattened to L*C (row index
 * j*C + c), multiplied by a constant [L*C, K*Cout] matrix (column k*Cout + c,
 * computed in double), and the result reshaped to [..., K, Cout] and moved
 * back (in float64 for narrower floats: each output sums n products, and
 * the ONNX reference computes in double). A dft_length n below L truncates the signal (rows j >= n are zero),
 * above L zero-pads it (the missing rows): both live in the matrix. Forward:
 * K = n (or n/2+1 when onesided), Cout = 2. Inverse: scaled by 1/n; with
 * onesided (IRFFT) the input holds the first bins of a conjugate-symmetric
 * spectrum and the output is real (Cout = 1, K = n, default n = 2*(L-1)).
 * dft_length must be a compile-time constant (folded when computed from
 * constants); so must the axis, unless the output declares its shape: then
 * every axis giving that shape is expanded and the run-time axis picks one
 * (dft_runtime_axis).
 *
 * STFT: a constant frame_step and frame_length give a constant index tensor
 * [frames, frame_length]; Gather along the signal axis makes the frames,
 * multiplied by the window, then the DFT above along the frame axis. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/passes/pass_expand.h"
#include "ir/ref/ref_eval.h"

/* Integer scalar input k: 1 with *v set, 0 when absent, -1 (diagnostic) when
 * not a compile-time constant. */
static int const_scalar(kn_rw *e, const kn_node *n, int k, const char *what, int64_t *v, kn_diag *d) {
  if (k >= n->n_in || n->in[k] < 0) return 0;
  bool known = kn_expand_fold(e->g, n->in[k]);
  const kn_value *val = &e->g->values[n->in[k]];
  if (!known)
    return kn_diag_error(d, "node '%s' (%s): %s '%s' must be a compile-time constant integer scalar%s", n->name,
                         n->op_type, what, val->name, kn_expand_need(e->g, e->needed, n->in[k]));
  if (!kn_dtype_is_int(val->dtype) || kn_shape_numel_max(&val->shape, 1) != 1)
    return kn_diag_error(d, "node '%s' (%s): %s '%s' must be a compile-time constant integer scalar", n->name,
                         n->op_type, what, val->name);
  *v = kn_ref_load_int(val->dtype, val->data, 0);
  return 1;
}

/* DFT of x (rank r, last dim C) along axis (normalised, < r-1) with length n. */
static int dft(kn_rw *e, const kn_node *n, int x, int axis, int64_t len_n, bool onesided, bool inverse,
               kn_diag *d) {
  kn_graph *g = e->g;
  const kn_value *xv = &g->values[x];
  kn_dtype dt = xv->dtype;
  int r = xv->shape.rank;
  int64_t L = xv->shape.dim[axis], C = xv->shape.dim[r - 1];
  if (!kn_dtype_is_float(dt))
    return kn_diag_error(d, "node '%s' (%s): the input must be a float tensor, not %s", n->name, n->op_type,
                         kn_dtype_name(dt));
  if (C != 1 && C != 2)
    return kn_diag_error(d, "node '%s' (%s): the last dim must be 1 (real) or 2 (complex), not %lld", n->name,
                         n->op_type, (long long)C);
  if ((xv->shape.batch_mask >> axis) & 1u)
    return kn_diag_error(d, "node '%s' (%s): the transformed axis must be static", n->name, n->op_type);
  if (onesided && !inverse && C != 1)
    return kn_diag_error(d, "node '%s' (%s): onesided forward DFT needs a real input", n->name, n->op_type);
  if (onesided && inverse && C != 2)
    return kn_diag_error(d, "node '%s' (%s): onesided inverse DFT needs a complex input", n->name, n->op_type);
  if (len_n < 1) return kn_diag_error(d, "node '%s' (%s): dft_length must be positive", n->name, n->op_type);
  int64_t K = onesided && !inverse ? len_n / 2 + 1 : len_n, Cout = onesided && inverse ? 1 : 2;
  int64_t rows = L * C, cols = K * Cout;
  if (rows * cols > (int64_t)1 << 26)
    return kn_diag_error(d, "node '%s' (%s): a %lld x %lld DFT matrix is too large", n->name, n->op_type,
                         (long long)rows, (long long)cols);
  /* the matrix */
  kn_shape ms = {.rank = 2, .dim = {rows, cols}};
  kn_dtype out_dt = dt;
  if (dt == KN_DT_F32 || dt == KN_DT_F16 || dt == KN_DT_BF16) dt = KN_DT_F64; /* sums of n products */
  int m = kn_rw_const(e, dt, &ms, NULL);
  void *md = g->values[m].data;
  const double two_pi = 6.283185307179586476925286766559;
  int64_t half = len_n / 2 + 1;
  for (int64_t j = 0; j < L; j++)
    for (int64_t k = 0; k < K; k++) {
      bool used = onesided && inverse ? j < half : j < len_n;
      if (!used) continue;
      double th = two_pi * (double)((j * k) % len_n) / (double)len_n;
      double cs = cos(th), sn = sin(th), scale = inverse ? 1.0 / (double)len_n : 1.0;
      if (onesided && inverse) { /* x[k] = sum_j w_j (Re Y_j cos - Im Y_j sin) / n */
        double w = (j == 0 || (len_n % 2 == 0 && j == len_n / 2)) ? 1.0 : 2.0;
        kn_ref_store(dt, md, (j * 2 + 0) * cols + k, w * cs * scale);
        kn_ref_store(dt, md, (j * 2 + 1) * cols + k, -w * sn * scale);
        continue;
      }
      double sgn = inverse ? 1.0 : -1.0; /* e^{sgn i th} */
      /* (a + ib)(cs + i sgn sn) = a cs - b sgn sn + i (b cs + a sgn sn) */
      kn_ref_store(dt, md, (j * C + 0) * cols + k * 2 + 0, cs * scale);
      kn_ref_store(dt, md, (j * C + 0) * cols + k * 2 + 1, sgn * sn * scale);
      if (C == 2) {
        kn_ref_store(dt, md, (j * C + 1) * cols + k * 2 + 0, -sgn * sn * scale);
        kn_ref_store(dt, md, (j * C + 1) * cols + k * 2 + 1, cs * scale);
      }
    }
  /* move the axis next to the complex dim, flatten, multiply, unflatten, move back */
  int64_t perm[KN_MAX_RANK], shape[KN_MAX_RANK];
  int p = 0;
  for (int i = 0; i < r - 1; i++)
    if (i != axis) perm[p++] = i;
  perm[p++] = axis;
  perm[p++] = r - 1;
  bool identity = axis == r - 2;
  kn_attr to = kn_pass_attr_int("to", kn_dtype_to_onnx(dt));
  if (dt != out_dt) x = kn_rw_op_attrs(e, KN_OP_CAST, &x, 1, &to, 1);
  int t = identity ? x : kn_rw_transpose(e, x, perm, r);
  for (int i = 0; i < r - 2; i++) shape[i] = 0; /* copy */
  shape[r - 2] = rows;
  int flat = kn_rw_bin(e, KN_OP_RESHAPE, t, kn_rw_ints(e, shape, r - 1));
  int prod = kn_rw_bin(e, KN_OP_MATMUL, flat, m);
  shape[r - 2] = K;
  shape[r - 1] = Cout;
  int un = kn_rw_bin(e, KN_OP_RESHAPE, prod, kn_rw_ints(e, shape, r));
  if (dt != out_dt) {
    to = kn_pass_attr_int("to", kn_dtype_to_onnx(out_dt));
    un = kn_rw_op_attrs(e, KN_OP_CAST, &un, 1, &to, 1);
  }
  if (identity) return un;
  int64_t back[KN_MAX_RANK];
  for (int i = 0; i < r - 1; i++) back[i] = i == axis ? r - 2 : i < axis ? i : i - 1;
  back[r - 1] = r - 1;
  return kn_rw_transpose(e, un, back, r);
}

/* DFT whose axis (opset 20 input) is read at run time, for a model output
 * with a declared static shape: one DFT per axis that gives the declared
 * shape, the one the run-time axis names picked with Where, and a run-time
 * check that it names one (pass_specialize.c's idea, for an axis only the
 * expansion reads). */
static int dft_runtime_axis(kn_rw *e, const kn_node *n, const kn_shape *decl, bool onesided, bool inverse,
                            kn_diag *d) {
  kn_graph *g = e->g;
  int x = n->in[0], r = g->values[x].shape.rank;
  int64_t len_n = -1;
  int rc = const_scalar(e, n, 1, "dft_length", &len_n, d);
  if (rc < 0) return -1;
  int cand[KN_MAX_RANK], val[KN_MAX_RANK], nc = 0;
  for (int a = 0; a < r - 1 && decl->rank == r; a++) {
    const kn_shape *xs = &g->values[x].shape;
    int64_t L = xs->dim[a], len = rc ? len_n : onesided && inverse ? 2 * (L - 1) : L;
    kn_shape out = *xs;
    out.dim[a] = onesided && !inverse ? len / 2 + 1 : len;
    out.dim[r - 1] = onesided && inverse ? 1 : 2;
    if (xs->batch_mask || len < 1 || !kn_shape_equal(&out, decl)) continue;
    val[nc] = dft(e, n, x, a, len, onesided, inverse, d);
    if (val[nc] < 0) return -1;
    cand[nc++] = a;
  }
  if (nc == 0)
    return kn_diag_error(d, "node '%s' (DFT): axis '%s' is read at run time and no axis gives the declared "
                            "output shape",
                         n->name, g->values[n->in[2]].name);
  kn_attr to = kn_pass_attr_int("to", kn_dtype_to_onnx(KN_DT_I64));
  int av = kn_rw_bin(e, KN_OP_RESHAPE, kn_rw_op_attrs(e, KN_OP_CAST, &n->in[2], 1, &to, 1),
                            kn_rw_ints(e, NULL, 0));
  int neg = kn_rw_bin(e, KN_OP_LESS, av, kn_rw_i64(e, 0));
  int wrapped = kn_rw_bin(e, KN_OP_ADD, av, kn_rw_i64(e, r));
  int an = kn_rw_op(e, KN_OP_WHERE, (int[]){neg, wrapped, av}, 3);
  int sel = val[nc - 1], ok = -1;
  for (int i = nc - 1; i >= 0; i--) {
    int is = kn_rw_bin(e, KN_OP_EQUAL, an, kn_rw_i64(e, cand[i]));
    if (i < nc - 1) sel = kn_rw_op(e, KN_OP_WHERE, (int[]){is, val[i], sel}, 3);
    ok = ok < 0 ? is : kn_rw_bin(e, KN_OP_OR, ok, is);
  }
  kn_pass_add_check(g, ok);
  return sel;
}

static int expand_dft(kn_rw *e, const kn_node *n, kn_diag *d) {
  kn_graph *g = e->g;
  int x = n->in[0];
  int r = g->values[x].shape.rank;
  int64_t axis = g->opset >= 20 ? -2 : 1, len_n = -1;
  kn_shape decl;
  if (g->opset >= 20 && n->n_in > 2 && n->in[2] >= 0 && !kn_expand_fold(g, n->in[2]) &&
      kn_pass_declared_shape(g, n->out[0], &decl))
    return dft_runtime_axis(e, n, &decl, kn_node_attr_int(n, "onesided", 0) != 0,
                            kn_node_attr_int(n, "inverse", 0) != 0, d);
  if (g->opset >= 20) {
    int rc = const_scalar(e, n, 2, "axis", &axis, d);
    if (rc < 0) return -1;
  } else {
    axis = kn_node_attr_int(n, "axis", 1);
  }
  if (r < 2 || axis < -r || axis > r - 2 || axis == -1)
    return kn_diag_error(d, "node '%s' (DFT): axis %lld is out of range for rank %d", n->name, (long long)axis, r);
  if (axis < 0) axis += r;
  bool onesided = kn_node_attr_int(n, "onesided", 0) != 0, inverse = kn_node_attr_int(n, "inverse", 0) != 0;
  int rc = const_scalar(e, n, 1, "dft_length", &len_n, d);
  if (rc < 0) return -1;
  int64_t L = g->values[x].shape.dim[axis];
  if (rc == 0) len_n = onesided && inverse ? 2 * (L - 1) : L;
  return dft(e, n, x, (int)axis, len_n, onesided, inverse, d);
}

static int expand_stft(kn_rw *e, const kn_node *n, kn_diag *d) {
  kn_graph *g = e->g;
  int x = n->in[0], window = n->n_in > 2 ? n->in[2] : -1;
  const kn_value xval = g->values[x]; /* a copy: g->values moves as values are added */
  const kn_value *xv = &xval;
  if (xv->shape.rank != 3 || (xv->shape.batch_mask & 2u))
    return kn_diag_error(d, "node '%s' (STFT): the signal must be [batch, length, 1 or 2] with a static length",
                         n->name);
  int64_t step = 0, frame_len = -1;
  int rc = const_scalar(e, n, 1, "frame_step", &step, d);
  if (rc <= 0) return rc < 0 ? -1 : kn_diag_error(d, "node '%s' (STFT): frame_step is required", n->name);
  if ((rc = const_scalar(e, n, 3, "frame_length", &frame_len, d)) < 0) return -1;
  if (rc == 0 && window >= 0 && g->values[window].shape.rank == 1) frame_len = g->values[window].shape.dim[0];
  int64_t len = xv->shape.dim[1];
  if (frame_len < 1 || frame_len > len || step < 1)
    return kn_diag_error(d, "node '%s' (STFT): frame_length %lld and frame_step %lld do not fit a signal of %lld",
                         n->name, (long long)frame_len, (long long)step, (long long)len);
  int64_t frames = (len - frame_len) / step + 1;
  if (frames * frame_len > (int64_t)1 << 24)
    return kn_diag_error(d, "node '%s' (STFT): too many frames", n->name);
  kn_shape is = {.rank = 2, .dim = {frames, frame_len}};
  int idx = kn_rw_const(e, KN_DT_I64, &is, NULL);
  int64_t *id = g->values[idx].data;
  for (int64_t f = 0; f < frames; f++)
    for (int64_t k = 0; k < frame_len; k++) id[f * frame_len + k] = f * step + k;
  int ins[2] = {x, idx};
  kn_attr ax = kn_pass_attr_int("axis", 1);
  int fr = kn_rw_op_attrs(e, KN_OP_GATHER, ins, 2, &ax, 1); /* [B, frames, frame_len, C] */
  if (window >= 0) {
    int64_t wshape[2] = {frame_len, 1};
    int w = kn_rw_bin(e, KN_OP_RESHAPE, window, kn_rw_ints(e, wshape, 2));
    fr = kn_rw_bin(e, KN_OP_MUL, fr, w);
  }
  /* the DFT needs the frames' shape: infer it here, the driver re-infers after */
  g->values[fr].dtype = xv->dtype;
  g->values[fr].shape = (kn_shape){.rank = 4, .dim = {xv->shape.dim[0], frames, frame_len, xv->shape.dim[2]},
                                   .batch_mask = xv->shape.batch_mask & 1u};
  g->values[fr].shape_known = true;
  bool onesided = kn_node_attr_int(n, "onesided", 1) != 0;
  return dft(e, n, fr, 2, frame_len, onesided, false, d);
}

int kn_expand_dft(kn_graph *g, int node, bool *needed, kn_diag *d) {
  const kn_node nd = g->nodes[node];
  kn_rw e = {.g = g, .d = d, .node = node, .name = nd.name, .names = KN_RW_NAMES_SEQ, .last = -1, .needed = needed};
  if (nd.n_in < 1 || nd.in[0] < 0) return kn_diag_error(d, "node '%s' (%s): input 0 is required", nd.name, nd.op_type);
  int out = nd.op == KN_OP_DFT ? expand_dft(&e, &nd, d) : expand_stft(&e, &nd, d);
  if (out < 0) return -1;
  kn_pass_kill_node(g, node);
  kn_rw_op_into(&e, KN_OP_IDENTITY, &out, 1, nd.out[0]);
  return 0;
}
