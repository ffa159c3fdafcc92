/* pass_decompose_rnn.c — RNN, LSTM and GRU unrolled into primitive graph ops
 * (called by the driver in pass_inline_control.c).
 *
 * Per direction d: the input projection of every time step at once,
 * XW = X · W[d]ᵀ + Wb[d] ([seq, batch, gates·hidden]); then per step t
 * (forward: 0..seq-1, reverse: seq-1..0) Gather(XW, t), H · R[d]ᵀ + Rb[d], the
 * gate slices and the elementwise gate equations of the ONNX spec. Y stacks
 * the per-step hidden states ([seq, dirs, batch, hidden]), Y_h / Y_c are the
 * last ones ([dirs, batch, hidden]); layout=1 transposes at both ends. A
 * missing initial state is zero, which the builder folds away (value -1
 * means "zero" below) rather than materialising a [batch, hidden] constant,
 * so a symbolic batch dim works too.
 *
 * Supported: directions forward / reverse / bidirectional, activations
 * Sigmoid, Tanh, Relu, Softsign, Softplus, HardSigmoid, LeakyRelu, Elu,
 * ThresholdedRelu (alpha/beta from activation_alpha/beta), clip, LSTM
 * peepholes and input_forget, GRU linear_before_reset. sequence_lens: a
 * constant equal to the sequence length everywhere is ignored; run-time
 * lengths are supported for forward layers by masking (Where) each step:
 * rows past their end keep their state and get zeros in Y. */
#include <stdio.h>
#include <string.h>

#include "ir/passes/pass_expand.h"
#include "ir/ref/ref_eval.h"

typedef struct rnn {
  kn_rw x;
  const kn_node *n;
  kn_dtype dt;
  int64_t hidden, seq;
  int gates;    /* per direction: RNN 1, GRU 3, LSTM 4 */
  float clip;   /* <= 0: none */
  int n_acts;   /* activations per direction */
  const char *acts[6];
  float alpha[6], beta[6];
  bool has_alpha[6], has_beta[6];
  bool forward_only;
  int lens; /* run-time sequence_lens (forward only), or -1 */
} rnn;

/* ---- builder shorthands; -1 stands for an all-zero tensor ---- */

static int scalar(rnn *r, double v) {
  kn_shape s = {.rank = 0};
  char buf[8] = {0};
  kn_ref_store(r->dt, buf, 0, v);
  return kn_rw_const(&r->x, r->dt, &s, buf);
}

static int add(rnn *r, int a, int b) {
  if (a < 0) return b;
  if (b < 0) return a;
  return kn_rw_bin(&r->x, KN_OP_ADD, a, b);
}

static int mul(rnn *r, int a, int b) {
  if (a < 0 || b < 0) return -1;
  return kn_rw_bin(&r->x, KN_OP_MUL, a, b);
}

static int matmul(rnn *r, int a, int b) {
  if (a < 0 || b < 0) return -1;
  return kn_rw_bin(&r->x, KN_OP_MATMUL, a, b);
}

/* Row d of a [dirs, ...] tensor, without the leading axis. */
static int dir_row(rnn *r, int v, int64_t d) {
  return kn_rw_squeeze_attr(&r->x, kn_rw_slice(&r->x, v, 0, d, d + 1), 0);
}

/* Gate k of a [batch, gates*hidden] (or [gates*hidden]) tensor. */
static int gate(rnn *r, int v, int k, int axis) {
  if (v < 0) return -1;
  return kn_rw_slice(&r->x, v, axis, k * r->hidden, (k + 1) * r->hidden);
}

/* Activation number k of direction d applied to v (v must not be zero). */
static int activate(rnn *r, int v, int d, int k, kn_diag *diag) {
  int i = d * r->n_acts + k;
  const char *a = r->acts[i];
  kn_op op;
  kn_attr attrs[2];
  int n_attrs = 0;
  float alpha = r->alpha[i], beta = r->beta[i];
  if (r->clip > 0) {
    int ins[3] = {v, scalar(r, -r->clip), scalar(r, r->clip)};
    v = kn_rw_op(&r->x, KN_OP_CLIP, ins, 3);
  }
  if (!strcmp(a, "Sigmoid")) op = KN_OP_SIGMOID;
  else if (!strcmp(a, "Tanh")) op = KN_OP_TANH;
  else if (!strcmp(a, "Relu")) op = KN_OP_RELU;
  else if (!strcmp(a, "Softsign")) op = KN_OP_SOFTSIGN;
  else if (!strcmp(a, "Softplus")) op = KN_OP_SOFTPLUS;
  else if (!strcmp(a, "HardSigmoid")) op = KN_OP_HARD_SIGMOID;
  else if (!strcmp(a, "LeakyRelu")) op = KN_OP_LEAKY_RELU;
  else if (!strcmp(a, "Elu")) op = KN_OP_ELU;
  else if (!strcmp(a, "ThresholdedRelu")) op = KN_OP_THRESHOLDED_RELU;
  else
    return kn_diag_error(diag, "node '%s' (%s): activation '%s' is not supported", r->n->name,
                         r->n->op_type, a);
  if (r->has_alpha[i]) attrs[n_attrs++] = (kn_attr){.name = "alpha", .kind = KN_ATTR_FLOAT, .f = alpha, .value = -1};
  if (r->has_beta[i]) attrs[n_attrs++] = (kn_attr){.name = "beta", .kind = KN_ATTR_FLOAT, .f = beta, .value = -1};
  return kn_rw_op_attrs(&r->x, op, &v, 1, attrs, n_attrs);
}

/* ---- attributes ---- */

static int read_activations(rnn *r, int dirs, kn_diag *d) {
  static const char *const dflt_rnn[] = {"Tanh"}, *const dflt_gru[] = {"Sigmoid", "Tanh"},
                           *const dflt_lstm[] = {"Sigmoid", "Tanh", "Tanh"};
  const char *const *dflt = r->gates == 1 ? dflt_rnn : r->gates == 3 ? dflt_gru : dflt_lstm;
  r->n_acts = r->gates == 1 ? 1 : r->gates == 3 ? 2 : 3;
  const kn_attr *acts = kn_node_attr(r->n, "activations");
  const kn_attr *alpha = kn_node_attr(r->n, "activation_alpha");
  const kn_attr *beta = kn_node_attr(r->n, "activation_beta");
  if (acts && (acts->kind != KN_ATTR_STRINGS || (acts->n != r->n_acts && acts->n != r->n_acts * dirs)))
    return kn_diag_error(d, "node '%s' (%s): attribute 'activations' must list %d or %d names", r->n->name,
                         r->n->op_type, r->n_acts, r->n_acts * dirs);
  /* alpha / beta are consumed in order by the activations that take them */
  int ia = 0, ib = 0;
  for (int i = 0; i < r->n_acts * dirs; i++) {
    const char *a = acts ? acts->strings[i % acts->n] : dflt[i % r->n_acts];
    r->acts[i] = a;
    bool takes_alpha = !strcmp(a, "HardSigmoid") || !strcmp(a, "LeakyRelu") || !strcmp(a, "Elu") ||
                       !strcmp(a, "ThresholdedRelu");
    bool takes_beta = !strcmp(a, "HardSigmoid");
    if (takes_alpha && alpha && alpha->kind == KN_ATTR_FLOATS && ia < alpha->n) {
      r->alpha[i] = alpha->floats[ia++];
      r->has_alpha[i] = true;
    }
    if (takes_beta && beta && beta->kind == KN_ATTR_FLOATS && ib < beta->n) {
      r->beta[i] = beta->floats[ib++];
      r->has_beta[i] = true;
    }
  }
  return 0;
}

static int input(const kn_node *n, int k) { return k < n->n_in ? n->in[k] : -1; }

/* sequence_lens must be absent or a constant equal to seq everywhere. */
static int check_seq_lens(rnn *r, int v, kn_diag *d) {
  if (v < 0) return 0;
  const kn_value *val = &r->x.g->values[v];
  if (!val->data) {
    if (!r->forward_only)
      return kn_diag_error(d,
                           "node '%s' (%s): sequence_lens '%s' must be a compile-time constant for a "
                           "reverse or bidirectional layer",
                           r->n->name, r->n->op_type, val->name);
    if (!kn_dtype_is_int(val->dtype))
      return kn_diag_error(d, "node '%s' (%s): sequence_lens must be an integer tensor", r->n->name,
                           r->n->op_type);
    r->lens = v; /* run-time lengths: steps past a sequence's end are masked */
    return 0;
  }
  int64_t cnt = kn_shape_numel_max(&val->shape, 1);
  for (int64_t i = 0; i < cnt; i++)
    if (kn_ref_load_int(val->dtype, val->data, i) != r->seq)
      return kn_diag_error(d,
                           "node '%s' (%s): sequence_lens[%lld] is %lld; Kiln supports only full-length "
                           "sequences (%lld)",
                           r->n->name, r->n->op_type, (long long)i,
                           (long long)kn_ref_load_int(val->dtype, val->data, i), (long long)r->seq);
  return 0;
}

/* ---- one direction ---- */

typedef struct dir_out {
  int *h_steps; /* hidden state after step t (in time order) */
  int h_last, c_last;
} dir_out;

static int run_direction(rnn *r, int d, bool reverse, int x, int w, int rr, int b, int p, int h0, int c0,
                         dir_out *o, kn_diag *diag) {
  kn_rw *e = &r->x;
  int64_t perm2[2] = {1, 0};
  int wt = kn_rw_transpose(e, dir_row(r, w, d), perm2, 2);  /* [I, G*H] */
  int rt = kn_rw_transpose(e, dir_row(r, rr, d), perm2, 2); /* [H, G*H] */
  int wb = -1, rb = -1;
  if (b >= 0) {
    int bd = dir_row(r, b, d);
    wb = kn_rw_slice(e, bd, 0, 0, r->gates * r->hidden);
    rb = kn_rw_slice(e, bd, 0, r->gates * r->hidden, 2 * r->gates * r->hidden);
  }
  int xw = add(r, matmul(r, x, wt), wb); /* [S, B, G*H] */
  int pi = -1, po = -1, pf = -1;
  if (p >= 0) {
    int pd = dir_row(r, p, d);
    pi = gate(r, pd, 0, 0), po = gate(r, pd, 1, 0), pf = gate(r, pd, 2, 0);
  }
  bool lbr = kn_node_attr_int(r->n, "linear_before_reset", 0) != 0;
  bool input_forget = kn_node_attr_int(r->n, "input_forget", 0) != 0;
  int rt_zr = -1, rt_h = -1, rb_h = -1;
  if (r->gates == 3) {
    rt_zr = kn_rw_slice(e, rt, 1, 0, 2 * r->hidden);
    rt_h = gate(r, rt, 2, 1);
    rb_h = rb >= 0 ? gate(r, rb, 2, 0) : -1;
  }
  int h = h0, c = c0;
  for (int64_t s = 0; s < r->seq; s++) {
    int64_t t = reverse ? r->seq - 1 - s : s;
    int h_prev = h, c_prev = c;
    int ins[2] = {xw, kn_rw_i64(e, t)};
    kn_attr ax = kn_pass_attr_int("axis", 0);
    int xt = kn_rw_op_attrs(e, KN_OP_GATHER, ins, 2, &ax, 1); /* [B, G*H] */
    if (r->gates == 1) {
      int pre = add(r, xt, add(r, matmul(r, h, rt), rb));
      h = activate(r, pre, d, 0, diag);
    } else if (r->gates == 4) { /* gate order i, o, f, c */
      int pre = add(r, xt, add(r, matmul(r, h, rt), rb));
      int ig = activate(r, add(r, gate(r, pre, 0, 1), mul(r, pi, c)), d, 0, diag);
      int fg = input_forget ? kn_rw_bin(e, KN_OP_SUB, scalar(r, 1), ig)
                            : activate(r, add(r, gate(r, pre, 2, 1), mul(r, pf, c)), d, 0, diag);
      int cg = activate(r, gate(r, pre, 3, 1), d, 1, diag);
      if (ig < 0 || fg < 0 || cg < 0) return -1;
      c = add(r, mul(r, fg, c), mul(r, ig, cg));
      int og = activate(r, add(r, gate(r, pre, 1, 1), mul(r, po, c)), d, 0, diag);
      int hc = activate(r, c, d, 2, diag);
      if (og < 0 || hc < 0) return -1;
      h = mul(r, og, hc);
    } else { /* GRU, gate order z, r, h */
      int rb_zr = rb >= 0 ? kn_rw_slice(e, rb, 0, 0, 2 * r->hidden) : -1;
      int zr = add(r, kn_rw_slice(e, xt, 1, 0, 2 * r->hidden), add(r, matmul(r, h, rt_zr), rb_zr));
      int zg = activate(r, gate(r, zr, 0, 1), d, 0, diag);
      int rg = activate(r, gate(r, zr, 1, 1), d, 0, diag);
      if (zg < 0 || rg < 0) return -1;
      int hh;
      if (lbr) hh = mul(r, rg, add(r, matmul(r, h, rt_h), rb_h));
      else hh = add(r, matmul(r, mul(r, rg, h), rt_h), rb_h);
      int ht = activate(r, add(r, gate(r, xt, 2, 1), hh), d, 1, diag);
      if (ht < 0) return -1;
      int one_minus_z = kn_rw_bin(e, KN_OP_SUB, scalar(r, 1), zg);
      h = add(r, mul(r, one_minus_z, ht), mul(r, zg, h));
    }
    if (h < 0) return -1;
    if (r->lens >= 0) {
      /* batch rows whose sequence ended keep their state and output zeros */
      char tb[8] = {0};
      kn_shape s0 = {.rank = 0};
      const kn_value *lv = &e->g->values[r->lens];
      kn_ref_store_int(lv->dtype, tb, 0, t);
      int live = kn_rw_unsqueeze_attr(e, kn_rw_bin(e, KN_OP_LESS, kn_rw_const(e, lv->dtype, &s0, tb),
                                                         r->lens), 1); /* [B, 1] */
      int zero = scalar(r, 0);
      int out[3] = {live, h, zero};
      o->h_steps[t] = kn_rw_op(e, KN_OP_WHERE, out, 3);
      int keep_h[3] = {live, h, h_prev >= 0 ? h_prev : zero};
      h = kn_rw_op(e, KN_OP_WHERE, keep_h, 3);
      if (r->gates == 4) {
        int keep_c[3] = {live, c, c_prev >= 0 ? c_prev : zero};
        c = kn_rw_op(e, KN_OP_WHERE, keep_c, 3);
      }
    } else {
      o->h_steps[t] = h;
    }
    if (e->added > KN_EXPAND_MAX_NODES)
      return kn_diag_error(diag, "node '%s' (%s): unrolling %lld steps needs more than %d nodes", r->n->name,
                           r->n->op_type, (long long)r->seq, KN_EXPAND_MAX_NODES);
  }
  o->h_last = h;
  o->c_last = c;
  return 0;
}

int kn_expand_rnn(kn_graph *g, int node, kn_diag *diag) {
  const kn_node nd = g->nodes[node];
  const kn_node *n = &nd;
  rnn r = {.x = {.g = g, .d = diag, .node = node, .name = n->name, .names = KN_RW_NAMES_SEQ, .last = -1}, .n = n};
  r.gates = n->op == KN_OP_RNN ? 1 : n->op == KN_OP_GRU ? 3 : 4;
  int x = input(n, 0), w = input(n, 1), rr = input(n, 2), b = input(n, 3), lens = input(n, 4),
      h0 = input(n, 5), c0 = r.gates == 4 ? input(n, 6) : -1, p = r.gates == 4 ? input(n, 7) : -1;
  if (x < 0 || w < 0 || rr < 0)
    return kn_diag_error(diag, "node '%s' (%s): inputs X, W and R are required", n->name, n->op_type);
  const kn_value *xv = &g->values[x];
  r.dt = xv->dtype;
  if (!kn_dtype_is_float(r.dt))
    return kn_diag_error(diag, "node '%s' (%s): X must be a float tensor", n->name, n->op_type);
  int64_t layout = kn_node_attr_int(n, "layout", 0);
  if (xv->shape.rank != 3)
    return kn_diag_error(diag, "node '%s' (%s): X must have rank 3", n->name, n->op_type);
  int seq_axis = layout ? 1 : 0;
  if ((xv->shape.batch_mask >> seq_axis) & 1u)
    return kn_diag_error(diag, "node '%s' (%s): the sequence length must be static", n->name, n->op_type);
  r.seq = xv->shape.dim[seq_axis];
  r.hidden = kn_node_attr_int(n, "hidden_size", -1);
  if (r.hidden <= 0 && g->values[rr].shape.rank == 3) r.hidden = g->values[rr].shape.dim[2];
  if (r.hidden <= 0) return kn_diag_error(diag, "node '%s' (%s): hidden_size is required", n->name, n->op_type);
  if (r.hidden > ((int64_t)1 << 24)) /* gates * hidden * 2 below must not overflow */
    return kn_diag_error(diag, "node '%s' (%s): hidden_size %lld is larger than 2^24", n->name, n->op_type,
                         (long long)r.hidden);
  r.clip = kn_node_attr_float(n, "clip", 0);
  const char *direction = kn_node_attr_string(n, "direction", "forward");
  int dirs = !strcmp(direction, "bidirectional") ? 2 : 1;
  if (dirs == 1 && strcmp(direction, "forward") && strcmp(direction, "reverse"))
    return kn_diag_error(diag, "node '%s' (%s): direction '%s' is not forward, reverse or bidirectional",
                         n->name, n->op_type, direction);
  if (r.seq < 1)
    return kn_diag_error(diag, "node '%s' (%s): the sequence is empty", n->name, n->op_type);
  r.forward_only = dirs == 1 && strcmp(direction, "reverse") != 0;
  r.lens = -1;
  if (read_activations(&r, dirs, diag) < 0 || check_seq_lens(&r, lens, diag) < 0) return -1;

  kn_rw *e = &r.x;
  int64_t perm3[3] = {1, 0, 2};
  if (layout) { /* to [seq, batch, ...] and [dirs, batch, hidden] */
    x = kn_rw_transpose(e, x, perm3, 3);
    if (h0 >= 0) h0 = kn_rw_transpose(e, h0, perm3, 3);
    if (c0 >= 0) c0 = kn_rw_transpose(e, c0, perm3, 3);
  }
  int y_dirs[2], h_dirs[2], c_dirs[2];
  int64_t steps_cap = r.seq;
  int steps_buf[2][512];
  if (steps_cap > 512)
    return kn_diag_error(diag, "node '%s' (%s): %lld time steps; Kiln unrolls at most 512", n->name,
                         n->op_type, (long long)r.seq);
  for (int d = 0; d < dirs; d++) {
    bool reverse = dirs == 2 ? d == 1 : !strcmp(direction, "reverse");
    dir_out o = {.h_steps = steps_buf[d]};
    int hd = h0 >= 0 ? dir_row(&r, h0, d) : -1, cd = c0 >= 0 ? dir_row(&r, c0, d) : -1;
    if (run_direction(&r, d, reverse, x, w, rr, b, p, hd, cd, &o, diag) < 0) return -1;
    int *parts = steps_buf[d];
    for (int64_t t = 0; t < r.seq; t++) parts[t] = kn_rw_unsqueeze_attr(e, parts[t], 0);
    y_dirs[d] = kn_rw_unsqueeze_attr(e, kn_rw_concat(e, parts, (int)r.seq, 0), 1); /* [S,1,B,H] */
    h_dirs[d] = kn_rw_unsqueeze_attr(e, o.h_last, 0);
    c_dirs[d] = o.c_last >= 0 ? kn_rw_unsqueeze_attr(e, o.c_last, 0) : -1;
  }
  int y = kn_rw_concat(e, y_dirs, dirs, 1), yh = kn_rw_concat(e, h_dirs, dirs, 0);
  int yc = r.gates == 4 && c_dirs[0] >= 0 ? kn_rw_concat(e, c_dirs, dirs, 0) : -1;
  if (layout) {
    int64_t perm4[4] = {2, 0, 1, 3};
    y = kn_rw_transpose(e, y, perm4, 4);
    yh = kn_rw_transpose(e, yh, perm3, 3);
    if (yc >= 0) yc = kn_rw_transpose(e, yc, perm3, 3);
  }
  if (r.gates == 4 && n->n_out > 2 && yc < 0)
    return kn_diag_error(diag, "node '%s' (LSTM): Y_c of a zero cell state is not supported", n->name);
  int results[3] = {y, yh, yc};
  int p_node = g->values[n->out[0]].producer;
  kn_pass_kill_node(g, p_node);
  for (int k = 0; k < n->n_out && k < 3; k++)
    kn_rw_op_into(e, KN_OP_IDENTITY, &results[k], 1, n->out[k]);
  return 0;
}
