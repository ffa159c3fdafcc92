/* pass_inline_control.c — expands the composite ops Kiln compiles ahead of
 * time by rewriting them into primitive graph ops: control flow (If, Loop,
 * Scan) is inlined here, recurrent layers (RNN, LSTM, GRU) are decomposed in
 * pass_decompose_rnn.c, DFT / STFT in pass_decompose_dft.c.
 *
 * Requires: the imported graph (subgraphs as kn_subgraph attributes, outer
 * values they read as extra node inputs; ir/graph/graph.h). Runs before the first
 * full shape inference. Guarantees: on success no composite op is left among
 * the live nodes that shape inference can reach; nodes are toposorted.
 *
 * Driver: repeatedly infer shapes (quietly: composite nodes have no shape
 * rule), pick the first composite node whose inputs all have shapes, expand
 * it. Values a decision needs (If condition, Loop trip count and condition)
 * are folded to constants with the reference interpreter when their producer
 * chain is constant.
 *  - If, constant condition: the chosen branch is inlined.
 *  - If, run-time condition: both branches are inlined and each output is
 *    Where(cond, then, else). This is valid because ONNX ops have no side
 *    effects: computing the untaken branch changes nothing but time. The
 *    branches must give equal shapes.
 *  - Loop: unrolled while the trip count and the condition are compile-time
 *    constants; scan outputs are stacked along a new axis 0.
 *  - Scan: unrolled over the static sequence length, with scan_input_axes /
 *    directions and scan_output_axes / directions; opset 8's batch axis is
 *    unrolled too (sequence_lens only when constant and full-length).
 * Every expansion is bounded by KN_EXPAND_MAX_NODES new nodes. Outputs of
 * the composite node keep their value (an Identity writes them), so graph
 * output names survive. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/passes/pass_expand.h"
#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"

/* ---- compile-time values ---- */

/* Makes value v a constant by folding its producer chain when every leaf is
 * a constant (Shape / Size need only a shape). True if v is constant. */
static bool fold_value(kn_graph *g, int v, int depth) {
  if (v < 0) return false;
  if (g->values[v].data) return true;
  int p = g->values[v].producer;
  if (p < 0 || depth > 256) return false;
  const kn_node *n = &g->nodes[p];
  if (n->dead || n->op == KN_OP_UNKNOWN || kn_expand_is_composite(n->op)) return false;
  bool shape_only = n->op == KN_OP_SHAPE || n->op == KN_OP_SIZE;
  for (int k = 0; k < n->n_in; k++) {
    if (shape_only && k == 0) continue;
    if (n->in[k] >= 0 && !fold_value(g, n->in[k], depth + 1)) return false;
  }
  n = &g->nodes[p];
  for (int k = 0; k < n->n_out; k++)
    if (!g->values[n->out[k]].shape_known) return false;
  kn_diag quiet;
  kn_diag_init(&quiet);
  int rc = kn_ref_eval_node(g, p, &quiet);
  kn_diag_free(&quiet);
  if (rc != 0) return false;
  kn_pass_kill_node(g, p);
  return g->values[v].data != NULL;
}

bool kn_expand_fold(kn_graph *g, int v) { return fold_value(g, v, 0); }

/* Scalar (single-element) constant v as int64 / bool. */
static int64_t const_int(const kn_graph *g, int v) {
  return kn_ref_load_int(g->values[v].dtype, g->values[v].data, 0);
}

static bool is_scalar_like(const kn_graph *g, int v) {
  return kn_shape_numel_max(&g->values[v].shape, 1) == 1;
}

/* ---- inlining a subgraph ---- */

/* Where the values of one inlined copy of a subgraph went: map[v] for the
 * subgraph's values (indices below n), everything else maps to itself. */
typedef struct scope {
  int *map;
  int n;
} scope;

static void scope_init(scope *s, const kn_graph *g) {
  s->n = g->n_values;
  s->map = malloc(sizeof(int) * (size_t)(s->n + 1));
  KN_ASSERT(s->map, "out of memory");
  for (int v = 0; v < s->n; v++) s->map[v] = -1;
}

static int lookup(const scope *s, int v) {
  if (v < 0 || v >= s->n || s->map[v] < 0) return v;
  return s->map[v];
}

/* Binds the subgraph's captures to the composite node's current inputs. */
static void bind_captures(scope *s, const kn_node *n, const kn_subgraph *sg) {
  for (int k = 0; k < sg->n_captures; k++) s->map[sg->captures[k]] = n->in[sg->capture_base + k];
}

/* Appends one copy of the subgraph's nodes (inputs and captures already
 * bound in s); their outputs get fresh values recorded in s. */
static int copy_body(kn_rw *x, const kn_subgraph *sg, scope *s) {
  kn_graph *g = x->g;
  if (x->added + sg->n_nodes > KN_EXPAND_MAX_NODES)
    return kn_diag_error(x->d,
                         "node '%s': inlining '%s' needs more than %d nodes; Kiln unrolls "
                         "control flow only up to that size",
                         x->name, sg->name, KN_EXPAND_MAX_NODES);
  for (int i = 0; i < sg->n_nodes; i++)
    for (int k = 0; k < sg->nodes[i].n_out; k++) {
      int nv = kn_graph_add_value(g, kn_arena_printf(&g->arena, "%s#%d/%s", x->name, x->counter++,
                                                     g->values[sg->nodes[i].out[k]].name));
      s->map[sg->nodes[i].out[k]] = nv;
    }
  for (int i = 0; i < sg->n_nodes; i++) {
    const kn_node *src = &sg->nodes[i];
    int *in = malloc(sizeof(int) * (size_t)(src->n_in + 1));
    int *out = malloc(sizeof(int) * (size_t)(src->n_out + 1));
    KN_ASSERT(in && out, "out of memory");
    for (int k = 0; k < src->n_in; k++) in[k] = lookup(s, src->in[k]);
    for (int k = 0; k < src->n_out; k++) out[k] = lookup(s, src->out[k]);
    int ni = kn_graph_add_node(g, src->op, kn_arena_printf(&g->arena, "%s#n%d/%s", x->name, x->added,
                                                            src->name),
                               in, src->n_in, out, src->n_out);
    free(in);
    free(out);
    x->added++;
    kn_node *dst = &g->nodes[ni];
    dst->op_type = src->op_type;
    dst->domain = src->domain;
    dst->n_attr = src->n_attr;
    dst->attrs = KN_NEW_ARRAY(&g->arena, kn_attr, src->n_attr);
    if (src->n_attr) memcpy(dst->attrs, src->attrs, sizeof(kn_attr) * (size_t)src->n_attr);
  }
  return 0;
}

static const kn_subgraph *graph_attr(const kn_node *n, const char *name) {
  const kn_attr *a = kn_node_attr(n, name);
  return a && a->kind == KN_ATTR_GRAPH ? a->graph : NULL;
}

/* Kills the composite node (found through its first output: indices move
 * when shapes are re-inferred) before its outputs get new producers. */
static void kill_composite(kn_graph *g, const kn_node *n) {
  int p = g->values[n->out[0]].producer;
  if (p >= 0) kn_pass_kill_node(g, p);
}

/* Output k of the composite node becomes Identity(v). */
static void write_output(kn_rw *x, int out, int v) {
  kn_rw_op_into(x, KN_OP_IDENTITY, &v, 1, out);
}

static int check_outputs(kn_rw *x, const kn_node *n, const kn_subgraph *sg, int n_expected) {
  if (sg->n_outputs != n_expected)
    return kn_diag_error(x->d, "node '%s' (%s): '%s' has %d outputs, expected %d", n->name,
                         n->op_type, sg->name, sg->n_outputs, n_expected);
  return 0;
}

/* ---- If ---- */

static int expand_if(kn_rw *x, int node) {
  kn_graph *g = x->g;
  kn_node n = g->nodes[node];
  const kn_subgraph *then_g = graph_attr(&n, "then_branch"), *else_g = graph_attr(&n, "else_branch");
  if (!then_g || !else_g)
    return kn_diag_error(x->d, "node '%s' (If): then_branch and else_branch graphs are required", n.name);
  if (n.n_in < 1 || n.in[0] < 0 || !is_scalar_like(g, n.in[0]))
    return kn_diag_error(x->d, "node '%s' (If): the condition must be a one-element tensor", n.name);
  if (check_outputs(x, &n, then_g, n.n_out) < 0 || check_outputs(x, &n, else_g, n.n_out) < 0)
    return -1;
  bool known = fold_value(g, n.in[0], 0);
  if (known) {
    const kn_subgraph *sg = const_int(g, n.in[0]) ? then_g : else_g;
    scope s;
    scope_init(&s, g);
    bind_captures(&s, &n, sg);
    int rc = copy_body(x, sg, &s);
    if (rc == 0) kill_composite(g, &n);
    for (int k = 0; rc == 0 && k < n.n_out; k++) write_output(x, n.out[k], lookup(&s, sg->outputs[k]));
    free(s.map);
    return rc;
  }
  scope st, se;
  scope_init(&st, g);
  scope_init(&se, g);
  bind_captures(&st, &n, then_g);
  bind_captures(&se, &n, else_g);
  int rc = copy_body(x, then_g, &st);
  if (rc == 0) rc = copy_body(x, else_g, &se);
  if (rc == 0) {
    /* shapes of both sides must agree: Where would broadcast them silently */
    int *tv = malloc(sizeof(int) * (size_t)(n.n_out + 1)), *ev = malloc(sizeof(int) * (size_t)(n.n_out + 1));
    KN_ASSERT(tv && ev, "out of memory");
    for (int k = 0; k < n.n_out; k++) {
      tv[k] = lookup(&st, then_g->outputs[k]);
      ev[k] = lookup(&se, else_g->outputs[k]);
    }
    kn_diag quiet;
    kn_diag_init(&quiet);
    kn_infer_shapes(g, &quiet);
    kn_diag_free(&quiet);
    for (int k = 0; rc == 0 && k < n.n_out; k++) {
      const kn_value *a = &g->values[tv[k]], *b = &g->values[ev[k]];
      if (a->shape_known && b->shape_known && (!kn_shape_equal(&a->shape, &b->shape) || a->dtype != b->dtype)) {
        char sa[96], sb[96];
        rc = kn_diag_error(x->d,
                           "node '%s' (If): output %d is %s in then_branch and %s in else_branch and "
                           "the condition is not a compile-time constant; Kiln needs static shapes%s",
                           n.name, k, kn_shape_str(&a->shape, sa, sizeof sa),
                           kn_shape_str(&b->shape, sb, sizeof sb), kn_expand_need(g, x->needed, n.in[0]));
      }
    }
    if (rc == 0) kill_composite(g, &n);
    int cond = n.in[0];
    if (rc == 0 && g->values[cond].shape.rank > 0) /* a [1] condition must not broadcast the outputs */
      cond = kn_rw_bin(x, KN_OP_RESHAPE, cond, kn_rw_ints(x, NULL, 0));
    for (int k = 0; rc == 0 && k < n.n_out; k++) {
      int ins[3] = {cond, tv[k], ev[k]};
      kn_rw_op_into(x, KN_OP_WHERE, ins, 3, n.out[k]);
    }
    free(tv);
    free(ev);
  }
  free(st.map);
  free(se.map);
  return rc;
}

/* ---- Loop ---- */

/* Stacks the per-iteration values vals[0..count) along a new axis. */
static int stack(kn_rw *x, const int *vals, int count, int64_t axis) {
  int *parts = malloc(sizeof(int) * (size_t)(count + 1));
  KN_ASSERT(parts, "out of memory");
  for (int i = 0; i < count; i++) parts[i] = kn_rw_unsqueeze_attr(x, vals[i], axis);
  int r = kn_rw_concat(x, parts, count, axis);
  free(parts);
  return r;
}

static int expand_loop(kn_rw *x, int node) {
  kn_graph *g = x->g;
  kn_node n = g->nodes[node];
  const kn_subgraph *body = graph_attr(&n, "body");
  if (!body) return kn_diag_error(x->d, "node '%s' (Loop): the body graph is required", n.name);
  int n_formal = body->capture_base; /* captures of the one body follow the formal inputs */
  int n_carried = n_formal - 2;
  if (n_carried < 0 || n_carried > n.n_out || body->n_inputs != n_carried + 2)
    return kn_diag_error(x->d, "node '%s' (Loop): %d inputs do not match a body with %d inputs", n.name,
                         n_formal, body->n_inputs);
  int n_scan = n.n_out - n_carried;
  if (check_outputs(x, &n, body, 1 + n_carried + n_scan) < 0) return -1;
  int64_t trips = -1;
  if (n.in[0] >= 0) {
    if (!fold_value(g, n.in[0], 0))
      return kn_diag_error(x->d,
                           "node '%s' (Loop): the trip count '%s' is not a compile-time constant; Kiln "
                           "unrolls loops with a static trip count only%s",
                           n.name, g->values[n.in[0]].name, kn_expand_need(g, x->needed, n.in[0]));
    if (!is_scalar_like(g, n.in[0]))
      return kn_diag_error(x->d, "node '%s' (Loop): the trip count must be a one-element tensor", n.name);
    trips = const_int(g, n.in[0]);
  }
  bool cond = true;
  if (n.in[1] >= 0) {
    if (!fold_value(g, n.in[1], 0))
      return kn_diag_error(x->d, "node '%s' (Loop): the condition '%s' is not a compile-time constant%s",
                           n.name, g->values[n.in[1]].name, kn_expand_need(g, x->needed, n.in[1]));
    if (!is_scalar_like(g, n.in[1]))
      return kn_diag_error(x->d, "node '%s' (Loop): the condition must be a one-element tensor", n.name);
    cond = const_int(g, n.in[1]) != 0;
  }
  if (trips < 0 && n.in[0] >= 0) trips = 0;

  int *carried = malloc(sizeof(int) * (size_t)(n_carried + 1));
  int cap = 16, count = 0;
  int *scans = malloc(sizeof(int) * (size_t)(n_scan * cap + 1));
  KN_ASSERT(carried && scans, "out of memory");
  for (int j = 0; j < n_carried; j++) carried[j] = n.in[2 + j];
  kn_shape scalar = {.rank = 0};
  int rc = 0;
  for (int64_t it = 0; rc == 0 && cond && (trips < 0 || it < trips); it++) {
    if (it >= KN_EXPAND_MAX_NODES) {
      rc = kn_diag_error(x->d, "node '%s' (Loop): runs more than %d iterations; Kiln unrolls loops only up to "
                               "that many", n.name, KN_EXPAND_MAX_NODES);
      break;
    }
    scope s;
    scope_init(&s, g);
    bind_captures(&s, &n, body);
    uint8_t b = 1;
    s.map[body->inputs[0]] = kn_rw_i64(x, it);
    s.map[body->inputs[1]] = kn_rw_const(x, KN_DT_BOOL, &scalar, &b);
    for (int j = 0; j < n_carried; j++) s.map[body->inputs[2 + j]] = carried[j];
    rc = copy_body(x, body, &s);
    if (rc == 0) {
      for (int j = 0; j < n_carried; j++) carried[j] = lookup(&s, body->outputs[1 + j]);
      if (count == cap) {
        cap *= 2;
        scans = realloc(scans, sizeof(int) * (size_t)(n_scan * cap + 1));
        KN_ASSERT(scans, "out of memory");
      }
      for (int k = 0; k < n_scan; k++) scans[count * n_scan + k] = lookup(&s, body->outputs[1 + n_carried + k]);
      count++;
      int c = lookup(&s, body->outputs[0]);
      if (!g->values[c].data) { /* its chain may fold once shapes are known */
        kn_diag quiet;
        kn_diag_init(&quiet);
        kn_infer_shapes(g, &quiet);
        kn_diag_free(&quiet);
      }
      if (!fold_value(g, c, 0) || !is_scalar_like(g, c))
        rc = kn_diag_error(x->d,
                           "node '%s' (Loop): the loop condition after iteration %lld is not a "
                           "compile-time constant; Kiln unrolls loops with a static trip count only",
                           n.name, (long long)it);
      else
        cond = const_int(g, c) != 0;
    }
    free(s.map);
  }
  if (rc == 0 && n_scan && count == 0)
    rc = kn_diag_error(x->d, "node '%s' (Loop): runs zero times, so its scan outputs have no static shape",
                       n.name);
  if (rc == 0) kill_composite(g, &n);
  for (int j = 0; rc == 0 && j < n_carried; j++) write_output(x, n.out[j], carried[j]);
  for (int k = 0; rc == 0 && k < n_scan; k++) {
    int *vals = malloc(sizeof(int) * (size_t)(count + 1));
    KN_ASSERT(vals, "out of memory");
    for (int i = 0; i < count; i++) vals[i] = scans[i * n_scan + k];
    write_output(x, n.out[n_carried + k], stack(x, vals, count, 0));
    free(vals);
  }
  free(carried);
  free(scans);
  return rc;
}

/* ---- Scan ---- */

static int64_t attr_at(const kn_node *n, const char *name, int k, int64_t dflt) {
  int count = 0;
  const int64_t *v = kn_node_attr_ints(n, name, &count);
  return v && k < count ? v[k] : dflt;
}

#define SCAN_MAX_IO 64

/* The unrolled steps of one Scan sequence: state[] (n_state values) is
 * updated in place; seqs[j] is scan input j, its sequence along in_axis[j];
 * outs[k * len + t] receives scan output k of sequence position t. */
typedef struct scan_seq {
  int n_state, m, n_out;
  int64_t len;
  const int64_t *in_axis;
  const bool *in_rev, *out_rev;
} scan_seq;

static int scan_steps(kn_rw *x, const kn_node *n, const kn_subgraph *body, const scan_seq *q, int *state,
                      const int *seqs, int *outs) {
  kn_graph *g = x->g;
  for (int64_t t = 0; t < q->len; t++) {
    scope s;
    scope_init(&s, g);
    bind_captures(&s, n, body);
    for (int j = 0; j < q->n_state; j++) s.map[body->inputs[j]] = state[j];
    for (int j = 0; j < q->m; j++) {
      int ins[2] = {seqs[j], kn_rw_i64(x, q->in_rev[j] ? q->len - 1 - t : t)};
      kn_attr a = kn_pass_attr_int("axis", q->in_axis[j]);
      s.map[body->inputs[q->n_state + j]] = kn_rw_op_attrs(x, KN_OP_GATHER, ins, 2, &a, 1);
    }
    int rc = copy_body(x, body, &s);
    for (int j = 0; rc == 0 && j < q->n_state; j++) state[j] = lookup(&s, body->outputs[j]);
    for (int k = 0; rc == 0 && k < q->n_out; k++)
      outs[k * q->len + (q->out_rev[k] ? q->len - 1 - t : t)] = lookup(&s, body->outputs[q->n_state + k]);
    free(s.map);
    if (rc < 0) return -1;
  }
  return 0;
}

/* Scan from opset 9: states, then scan inputs along scan_input_axes. Opset 8:
 * sequence_lens, states [B, ...], scan inputs [B, T, ...]: the body runs per
 * batch row b (unrolled too) and the results are stacked along axis 0. */
static int expand_scan(kn_rw *x, int node) {
  kn_graph *g = x->g;
  kn_node n = g->nodes[node];
  const kn_subgraph *body = graph_attr(&n, "body");
  if (!body) return kn_diag_error(x->d, "node '%s' (Scan): the body graph is required", n.name);
  bool v8 = g->opset < 9;
  int first = v8 ? 1 : 0; /* opset 8: input 0 is sequence_lens */
  int n_formal = body->capture_base - first;
  int64_t m64 = kn_node_attr_int(&n, "num_scan_inputs", -1);
  if (m64 < 1 || m64 > SCAN_MAX_IO)
    return kn_diag_error(x->d, "node '%s' (Scan): num_scan_inputs %lld is outside [1, %d]", n.name, (long long)m64,
                         SCAN_MAX_IO);
  int m = (int)m64;
  scan_seq q = {.n_state = n_formal - m, .m = m, .n_out = n.n_out - (n_formal - m)};
  if (m > SCAN_MAX_IO || q.n_out > SCAN_MAX_IO)
    return kn_diag_error(x->d, "node '%s' (Scan): more than %d scan inputs or outputs", n.name, SCAN_MAX_IO);
  if (m < 1 || q.n_state < 0 || q.n_out < 0 || body->n_inputs != n_formal)
    return kn_diag_error(x->d, "node '%s' (Scan): num_scan_inputs %d does not match %d inputs and a body "
                               "with %d inputs",
                         n.name, m, n_formal, body->n_inputs);
  if (check_outputs(x, &n, body, n.n_out) < 0) return -1;
  int64_t in_axis[SCAN_MAX_IO], batch = 1;
  bool in_rev[SCAN_MAX_IO], out_rev[SCAN_MAX_IO];
  q.len = -1;
  for (int j = 0; j < m; j++) {
    int v = n.in[first + q.n_state + j];
    if (v < 0) return kn_diag_error(x->d, "node '%s' (Scan): scan input %d is missing", n.name, j);
    const kn_value *val = &g->values[v];
    int axis = v8 ? 1 : kn_axis_norm(attr_at(&n, "scan_input_axes", j, 0), val->shape.rank);
    if (axis < 0 || axis >= val->shape.rank)
      return kn_diag_error(x->d, "node '%s' (Scan): scan_input_axes[%d] is out of range", n.name, j);
    if ((val->shape.batch_mask >> axis) & 1u || (v8 && (val->shape.batch_mask & 1u)))
      return kn_diag_error(x->d, "node '%s' (Scan): scan input '%s' runs along the batch dim; Kiln needs "
                                 "static sequence and batch lengths",
                           n.name, val->name);
    int64_t l = val->shape.dim[axis];
    if (q.len >= 0 && l != q.len)
      return kn_diag_error(x->d, "node '%s' (Scan): scan inputs have lengths %lld and %lld", n.name,
                           (long long)q.len, (long long)l);
    q.len = l;
    if (v8) batch = val->shape.dim[0];
    in_axis[j] = v8 ? 0 : axis; /* opset 8 gathers the row first: the sequence is axis 0 */
    in_rev[j] = attr_at(&n, v8 ? "directions" : "scan_input_directions", j, 0) != 0;
  }
  for (int k = 0; k < q.n_out; k++) out_rev[k] = !v8 && attr_at(&n, "scan_output_directions", k, 0) != 0;
  q.in_axis = in_axis, q.in_rev = in_rev, q.out_rev = out_rev;
  if (q.len < 1 || batch < 1)
    return kn_diag_error(x->d, "node '%s' (Scan): the sequence is empty, so its outputs have no static "
                               "shape", n.name);
  if (v8 && n.in[0] >= 0) { /* sequence_lens: only the full length */
    if (!fold_value(g, n.in[0], 0))
      return kn_diag_error(x->d, "node '%s' (Scan): sequence_lens must be a compile-time constant", n.name);
    const kn_value *sl = &g->values[n.in[0]];
    for (int64_t i = 0; i < kn_shape_numel_max(&sl->shape, 1); i++)
      if (kn_ref_load_int(sl->dtype, sl->data, i) != q.len)
        return kn_diag_error(x->d, "node '%s' (Scan): sequence_lens[%lld] differs from the sequence length %lld",
                             n.name, (long long)i, (long long)q.len);
  }
  if (batch * q.len * body->n_nodes > KN_EXPAND_MAX_NODES)
    return kn_diag_error(x->d,
                         "node '%s' (Scan): unrolling %lld steps of a %d-node body exceeds %d nodes",
                         n.name, (long long)(batch * q.len), body->n_nodes, KN_EXPAND_MAX_NODES);
  int n_res = q.n_state + q.n_out;
  int *state = malloc(sizeof(int) * (size_t)(q.n_state + 1));
  int *outs = malloc(sizeof(int) * (size_t)(q.n_out * q.len + 1));
  int *rows = malloc(sizeof(int) * (size_t)(n_res * batch + 1)); /* per result, per batch row */
  int seqs[SCAN_MAX_IO];
  KN_ASSERT(state && outs && rows, "out of memory");
  int rc = 0;
  kn_attr axis0 = kn_pass_attr_int("axis", 0);
  for (int64_t b = 0; rc == 0 && b < batch; b++) {
    for (int j = 0; j < q.n_state; j++) {
      int ins[2] = {n.in[first + j], kn_rw_i64(x, b)};
      state[j] = v8 ? kn_rw_op_attrs(x, KN_OP_GATHER, ins, 2, &axis0, 1) : n.in[j];
    }
    for (int j = 0; j < m; j++) {
      int ins[2] = {n.in[first + q.n_state + j], kn_rw_i64(x, b)};
      seqs[j] = v8 ? kn_rw_op_attrs(x, KN_OP_GATHER, ins, 2, &axis0, 1) : ins[0];
    }
    rc = scan_steps(x, &n, body, &q, state, seqs, outs);
    for (int j = 0; rc == 0 && j < q.n_state; j++) rows[j * batch + b] = state[j];
    for (int k = 0; rc == 0 && k < q.n_out; k++)
      rows[(q.n_state + k) * batch + b] =
          stack(x, &outs[k * q.len], (int)q.len, v8 ? 0 : attr_at(&n, "scan_output_axes", k, 0));
  }
  if (rc == 0) kill_composite(g, &n);
  for (int r = 0; rc == 0 && r < n_res; r++)
    write_output(x, n.out[r], v8 ? stack(x, &rows[r * batch], (int)batch, 0) : rows[r * batch]);
  free(state);
  free(outs);
  free(rows);
  return rc;
}

/* ---- driver ---- */

static int expand_node(kn_graph *g, int node, bool *needed, kn_diag *d) {
  kn_rw x = {.g = g, .d = d, .node = node, .name = g->nodes[node].name, .names = KN_RW_NAMES_SEQ, .last = -1,
             .needed = needed};
  if (g->nodes[node].n_out < 1)
    return kn_diag_error(d, "node '%s' (%s): has no outputs", g->nodes[node].name, g->nodes[node].op_type);
  switch (g->nodes[node].op) {
  case KN_OP_IF: return expand_if(&x, node);
  case KN_OP_LOOP: return expand_loop(&x, node);
  case KN_OP_SCAN: return expand_scan(&x, node);
  case KN_OP_RNN: case KN_OP_LSTM: case KN_OP_GRU: return kn_expand_rnn(g, node, d);
  case KN_OP_DFT: case KN_OP_STFT: return kn_expand_dft(g, node, needed, d);
  default: KN_UNREACHABLE("not a composite op");
  }
}

/* As pass_decompose.c's rewrite: the new nodes remember the composite. */
static int expand(kn_graph *g, int node, bool *needed, kn_diag *d) {
  int first_node = g->n_nodes, first_line = d ? d->count : 0;
  int rc = expand_node(g, node, needed, d);
  kn_graph_mark_origin(g, first_node, node);
  kn_node_diag_origin(&g->nodes[node], d, first_line);
  return rc;
}

int kn_pass_inline_control(kn_graph *g, kn_diag *d) { return kn_pass_inline_control_needs(g, NULL, d); }

int kn_pass_inline_control_needs(kn_graph *g, bool *needed, kn_diag *d) {
  for (;;) {
    if (kn_graph_toposort(g, d) < 0) return -1;
    bool any = false;
    for (int i = 0; i < g->n_nodes && !any; i++) any = kn_expand_is_composite(g->nodes[i].op);
    if (!any) return 0;
    kn_diag quiet;
    kn_diag_init(&quiet);
    kn_infer_shapes(g, &quiet);
    kn_diag_free(&quiet);
    int pick = -1;
    for (int i = 0; i < g->n_nodes && pick < 0; i++) {
      const kn_node *n = &g->nodes[i];
      if (n->dead || !kn_expand_is_composite(n->op)) continue;
      bool ready = true;
      for (int k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0 && !g->values[n->in[k]].shape_known) ready = false;
      if (ready) pick = i;
    }
    if (pick < 0) return 0; /* shape inference reports what blocks the rest */
    if (expand(g, pick, needed, d) < 0) return -1;
  }
}
