/* pass_decompose_attention.c — rewrites the attention family of ONNX ops
 * (Attention, FlexAttention, RMSNormalization, RotaryEmbedding,
 * CausalConvWithState, LinearAttention) into primitive graph ops, so
 * they run on the fused, scheduled kernels of MatMul, Softmax and the
 * elementwise / data-movement ops; no kernel of their own exists.
 *
 * Requires: shapes inferred, nodes toposorted. Runs first in the pipeline.
 * Guarantees: no live node of these ops remains; every output that is read
 * (or is a graph output) is computed by the same formulas as the ONNX
 * reference (onnx/reference/ops), with these choices:
 *  - Attention: Q K^T is scaled after the MatMul (one fused epilogue) rather
 *    than Q and K by sqrt(scale) before it; GQA reshapes Q to
 *    [B, kv_heads, reps*q_len, head] so each kv head is read once, never
 *    repeated; the bias (mask padded with -inf, causal and padding masks as
 *    Where(position test, 0, -inf)) is added after the softcap, so masked scores
 *    stay -inf; a fully masked row gives NaN, as Softmax of all -inf does in
 *    the reference. 16-bit float inputs are computed in float32 and rounded
 *    once at the end (the reference computes in float64).
 *  - RMSNormalization: X/sqrt(mean(X^2) + eps) in stash_type, times scale.
 *  - FlexAttention (without score_mod / prob_mod subgraphs): Attention on
 *    4-D inputs, no mask, softmax in float32 for 16-bit inputs.
 *  - RotaryEmbedding: works in the input's own layout ([B,H,S,D] or
 *    [B,S,H,D] after a free reshape), caches broadcast over the heads.
 *  - CausalConvWithState: a depthwise Conv (group = channels) over
 *    Concat(past_state, input), or over the input with left padding k-1 when
 *    there is no past; SiLU as x * Sigmoid(x) (float32 for 16-bit types);
 *    present_state a Slice of the last k-1 positions (a zero Pad when the
 *    input is shorter than k-1).
 *  - LinearAttention: the recurrence unrolled over its T steps (at most
 *    KN_LINATTN_MAX_STEPS), in float32 like the reference. The packed
 *    [B, T, H*D] inputs are split along T once; a step [B, 1, H*D] is a
 *    free view as [B, H, 1, D] or [B, H, D, 1]. Per step: a decay Mul, the
 *    delta correction (MatMul k_t S, Sub, Mul beta), the outer product
 *    k_t v_t^T as a broadcast Mul, and the read q_t S as a MatMul with the
 *    query heads of a kv head as rows; outputs are concatenated along T.
 * New values are typed and shaped (kn_rw_typed of the rewriting toolkit,
 * rewrite.h, names "<node>/<tag>"); the composite node is dead afterwards and
 * its outputs are produced by Identity nodes (fold_constants removes them).
 * Nodes are re-sorted. Bad attribute / shape combinations were already
 * rejected by shape inference (shape_infer_attention.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/passes/attention.h"
#include "ir/passes/passes.h"
#include "ir/passes/rewrite.h"
#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"

static kn_shape shape4(int64_t a, int64_t b, int64_t c, int64_t d, bool batch_sym) {
  return (kn_shape){.rank = 4, .dim = {a, b, c, d}, .batch_mask = batch_sym ? 1u : 0u};
}

static void attr_int(kn_rw *b, int node, const char *name, int64_t v) {
  kn_node_add_attr(b->g, &b->g->nodes[node], kn_pass_attr_int(name, v));
}

static int value_node(kn_rw *b, int v) { return b->g->values[v].producer; }

static kn_shape shape_of(kn_rw *b, int v) { return b->g->values[v].shape; }
static kn_dtype dtype_of(kn_rw *b, int v) { return b->g->values[v].dtype; }

static int const_ints(kn_rw *b, const char *tag, const int64_t *v, int n) {
  kn_shape s = {.rank = 1, .dim = {n}};
  return kn_rw_const_tagged(b, tag, KN_DT_I64, &s, v);
}

/* A constant of type t and shape s holding vals (converted from double). */
static int const_tensor(kn_rw *b, const char *tag, kn_dtype t, const kn_shape *s, const double *vals) {
  int64_t n = kn_ref_numel(s);
  void *buf = calloc((size_t)(n > 0 ? n : 1), kn_dtype_size(t));
  KN_ASSERT(buf, "out of memory");
  for (int64_t i = 0; i < n; i++) kn_ref_store(t, buf, i, vals[i]);
  int v = kn_rw_const_tagged(b, tag, t, s, buf);
  free(buf);
  return v;
}

static int const_scalar(kn_rw *b, const char *tag, kn_dtype t, double v) {
  kn_shape s = {.rank = 0};
  return const_tensor(b, tag, t, &s, &v);
}

static int unary(kn_rw *b, kn_op op, int x, const char *tag) {
  return kn_rw_typed(b, op, &x, 1, dtype_of(b, x), shape_of(b, x), tag);
}

/* Elementwise binary op with numpy broadcasting; out_type INVALID = x's. */
static int binary(kn_rw *b, kn_op op, int x, int y, kn_dtype out_type, const char *tag) {
  kn_shape sx = shape_of(b, x), sy = shape_of(b, y), s;
  int bad;
  KN_ASSERT(kn_shape_broadcast(&sx, &sy, &s, &bad), "decomposition operands do not broadcast");
  return kn_rw_typed(b, op, (int[]){x, y}, 2, out_type ? out_type : dtype_of(b, x), s, tag);
}

static int cast(kn_rw *b, int x, kn_dtype t, const char *tag) {
  if (dtype_of(b, x) == t) return x;
  int v = kn_rw_typed(b, KN_OP_CAST, &x, 1, t, shape_of(b, x), tag);
  attr_int(b, value_node(b, v), "to", kn_dtype_to_onnx(t));
  return v;
}

/* Reshape to dims (ONNX codes: 0 copies the input dim, one -1 is inferred),
 * with s the resulting shape. */
static int reshape(kn_rw *b, int x, const int64_t *dims, int n, kn_shape s, const char *tag) {
  int shape = const_ints(b, kn_arena_printf(&b->g->arena, "%s_shape", tag), dims, n);
  return kn_rw_typed(b, KN_OP_RESHAPE, (int[]){x, shape}, 2, dtype_of(b, x), s, tag);
}

static int transpose(kn_rw *b, int x, const int64_t *perm, const char *tag) {
  kn_shape in = shape_of(b, x), s = {.rank = in.rank};
  for (int i = 0; i < in.rank; i++) {
    s.dim[i] = in.dim[perm[i]];
    if ((in.batch_mask >> perm[i]) & 1) s.batch_mask |= 1u << i;
  }
  int v = kn_rw_typed(b, KN_OP_TRANSPOSE, &x, 1, dtype_of(b, x), s, tag);
  kn_node_add_attr(b->g, &b->g->nodes[value_node(b, v)], kn_pass_attr_ints(b->g, "perm", perm, in.rank));
  return v;
}

static int concat(kn_rw *b, const int *xs, int n, int axis, const char *tag) {
  kn_shape s = shape_of(b, xs[0]);
  for (int i = 1; i < n; i++) s.dim[axis] += shape_of(b, xs[i]).dim[axis];
  int v = kn_rw_typed(b, KN_OP_CONCAT, xs, n, dtype_of(b, xs[0]), s, tag);
  attr_int(b, value_node(b, v), "axis", axis);
  return v;
}

static int matmul(kn_rw *b, int x, int y, const char *tag) {
  kn_shape sx = shape_of(b, x), sy = shape_of(b, y), s = sx;
  s.dim[s.rank - 1] = sy.dim[sy.rank - 1];
  return kn_rw_typed(b, KN_OP_MATMUL, (int[]){x, y}, 2, dtype_of(b, x), s, tag);
}

/* Slice of one axis: start, start+step, ... below end. */
static int slice_axis(kn_rw *b, int x, int64_t axis, int64_t start, int64_t end, int64_t step, const char *tag) {
  kn_shape s = shape_of(b, x);
  s.dim[axis] = (end - start + step - 1) / step;
  int in[5] = {x, const_ints(b, kn_arena_printf(&b->g->arena, "%s_start", tag), &start, 1),
               const_ints(b, kn_arena_printf(&b->g->arena, "%s_end", tag), &end, 1),
               const_ints(b, kn_arena_printf(&b->g->arena, "%s_axis", tag), &axis, 1),
               const_ints(b, kn_arena_printf(&b->g->arena, "%s_step", tag), &step, 1)};
  return kn_rw_typed(b, KN_OP_SLICE, in, 5, dtype_of(b, x), s, tag);
}

static int slice_last(kn_rw *b, int x, int64_t start, int64_t end, int64_t step, const char *tag) {
  return slice_axis(b, x, shape_of(b, x).rank - 1, start, end, step, tag);
}

static int unsqueeze(kn_rw *b, int x, int64_t axis, const char *tag) {
  kn_shape in = shape_of(b, x), s = {.rank = in.rank + 1};
  int a = (int)(axis < 0 ? axis + s.rank : axis);
  for (int i = 0, j = 0; i < s.rank; i++) {
    if (i == a) {
      s.dim[i] = 1;
      continue;
    }
    s.dim[i] = in.dim[j];
    if ((in.batch_mask >> j) & 1) s.batch_mask |= 1u << i;
    j++;
  }
  int axes = const_ints(b, kn_arena_printf(&b->g->arena, "%s_axes", tag), &axis, 1);
  return kn_rw_typed(b, KN_OP_UNSQUEEZE, (int[]){x, axes}, 2, dtype_of(b, x), s, tag);
}

/* Makes `out` (an output of the dead composite node) a copy of v. */
static void finish(kn_rw *b, int v, int out, const char *tag) {
  if (out >= 0) kn_rw_typed_into(b, KN_OP_IDENTITY, &v, 1, out, tag);
}

/* ---- Attention ---- */

/* [B, S, heads*size] -> [B, heads, S, size]. */
static int split_heads(kn_rw *b, const kn_attn_geom *a, int x, int64_t heads, int64_t size, const char *tag) {
  kn_shape in = shape_of(b, x);
  kn_shape s = shape4(a->batch, in.dim[1], heads, size, a->batch_sym);
  int r = reshape(b, x, (const int64_t[]){0, 0, heads, size}, 4, s, kn_arena_printf(&b->g->arena, "%s_split", tag));
  return transpose(b, r, (const int64_t[]){0, 2, 1, 3}, kn_arena_printf(&b->g->arena, "%s_heads", tag));
}

/* The additive bias [.., q_len, total_len] (mask, causal, padding), or -1. */
static int attention_bias(kn_rw *b, const kn_attn_geom *a, const int *in, kn_dtype ct) {
  kn_dtype t = ct;
  int bias = -1;
  if (a->has_mask) {
    int m = in[KN_ATTN_MASK];
    if (a->mask_bool) {
      m = kn_rw_typed(b, KN_OP_WHERE, (int[]){m, const_scalar(b, "mask_zero", t, 0), const_scalar(b, "mask_neginf", t, -INFINITY)},
               3, t, shape_of(b, m), "mask_bias");
    } else {
      m = cast(b, m, t, "mask_cast");
    }
    if (a->mask_len < a->total_len) { /* pad the last dim with -inf */
      kn_shape s = shape_of(b, m);
      int64_t pads[2 * KN_MAX_RANK] = {0};
      pads[2 * s.rank - 1] = a->total_len - a->mask_len;
      s.dim[s.rank - 1] = a->total_len;
      int in_pad[3] = {m, const_ints(b, "mask_pads", pads, 2 * s.rank), const_scalar(b, "mask_pad_value", t, -INFINITY)};
      m = kn_rw_typed(b, KN_OP_PAD, in_pad, 3, t, s, "mask_padded");
    }
    bias = m;
  }
  /* key positions 0 .. total_len-1, for the causal and padding masks */
  int key_pos = -1;
  if (a->is_causal || a->has_nonpad) {
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)(a->total_len + a->q_len));
    KN_ASSERT(pos, "out of memory");
    for (int64_t j = 0; j < a->total_len; j++) pos[j] = j;
    key_pos = const_ints(b, "key_positions", pos, (int)a->total_len);
    if (a->is_causal) { /* upper-left aligned after the past: query i sees keys j <= i + past */
      for (int64_t i = 0; i < a->q_len; i++) pos[i] = i + a->past_len;
      kn_shape s = {.rank = 2, .dim = {a->q_len, 1}};
      int last = kn_pass_new_const(b->g, b->name, "/query_last_key", KN_DT_I64, &s, pos);
      int keep = binary(b, KN_OP_LESS_OR_EQUAL, key_pos, last, KN_DT_BOOL, "causal_keep");
      int c = kn_rw_typed(b, KN_OP_WHERE, (int[]){keep, const_scalar(b, "causal_zero", t, 0), const_scalar(b, "causal_neginf", t, -INFINITY)},
                   3, t, shape_of(b, keep), "causal_bias");
      bias = bias < 0 ? c : binary(b, KN_OP_ADD, bias, c, KN_DT_INVALID, "causal_add");
    }
    free(pos);
  }
  if (a->has_nonpad) { /* key j of batch row r is masked when j >= nonpad_kv_seqlen[r] */
    int r = key_pos;
    int lens = unsqueeze(b, in[KN_ATTN_NONPAD_KV_SEQLEN], 1, "nonpad_lens");
    int keep = binary(b, KN_OP_LESS, r, lens, KN_DT_BOOL, "nonpad_keep");
    int pm = kn_rw_typed(b, KN_OP_WHERE, (int[]){keep, const_scalar(b, "pad_zero", t, 0), const_scalar(b, "pad_neginf", t, -INFINITY)},
                  3, t, shape_of(b, keep), "nonpad_bias");
    pm = reshape(b, pm, (const int64_t[]){0, 1, 1, a->total_len}, 4, shape4(a->batch, 1, 1, a->total_len, a->batch_sym),
                 "nonpad_bias4");
    bias = bias < 0 ? pm : binary(b, KN_OP_ADD, bias, pm, KN_DT_INVALID, "nonpad_add");
  }
  return bias;
}

/* Folds GQA head groups into rows: [B, q_heads, L, X] <-> [B, kv_heads, reps*L, X]. */
static int group_rows(kn_rw *b, const kn_attn_geom *a, int x, bool fold, const char *tag) {
  if (a->q_heads == a->kv_heads) return x;
  kn_shape s = shape_of(b, x);
  int64_t reps = a->q_heads / a->kv_heads;
  int64_t heads = fold ? a->kv_heads : a->q_heads, rows = fold ? s.dim[2] * reps : s.dim[2] / reps;
  s.dim[1] = heads, s.dim[2] = rows;
  return reshape(b, x, (const int64_t[]){0, heads, rows, s.dim[3]}, 4, s, tag);
}

static int decompose_attention(kn_graph *g, int ni, const int *uses, kn_diag *d) {
  kn_attn_geom a;
  if (kn_attn_resolve(g, &g->nodes[ni], &a, d) < 0) return -1;
  int in[7], out[4];
  const kn_node *n = &g->nodes[ni];
  for (int k = 0; k < 7; k++) in[k] = k < n->n_in ? n->in[k] : -1;
  for (int k = 0; k < 4; k++) out[k] = k < n->n_out && uses[n->out[k]] > 0 ? n->out[k] : -1;
  kn_rw bb = {.g = g, .d = d, .node = ni, .name = n->name, .last = -1}, *b = &bb;
  kn_pass_kill_node(g, ni);

  kn_dtype ct = kn_dtype_size(a.dtype) < 4 ? KN_DT_F32 : a.dtype; /* compute type */
  int q = in[KN_ATTN_Q], k = in[KN_ATTN_K], v = in[KN_ATTN_V];
  if (a.rank == 3) {
    q = split_heads(b, &a, q, a.q_heads, a.head_size, "q");
    k = split_heads(b, &a, k, a.kv_heads, a.head_size, "k");
    v = split_heads(b, &a, v, a.kv_heads, a.v_head_size, "v");
  }
  if (a.has_past) {
    k = concat(b, (int[]){in[KN_ATTN_PAST_KEY], k}, 2, 2, "present_key");
    v = concat(b, (int[]){in[KN_ATTN_PAST_VALUE], v}, 2, 2, "present_value");
  }
  finish(b, k, out[KN_ATTN_PRESENT_KEY], "present_key_out");
  finish(b, v, out[KN_ATTN_PRESENT_VALUE], "present_value_out");
  q = cast(b, q, ct, "q_compute");
  k = cast(b, k, ct, "k_compute");
  v = cast(b, v, ct, "v_compute");

  /* scores = (Q K^T) * scale, then the softcap, per kv head group (so the
   * scalar epilogues fuse into the MatMul), then back to [B, q_heads, ..] */
  int kt = transpose(b, k, (const int64_t[]){0, 1, 3, 2}, "k_transposed");
  int s = matmul(b, group_rows(b, &a, q, true, "q_grouped"), kt, "qk");
  s = binary(b, KN_OP_MUL, s, const_scalar(b, "scale", ct, a.scale), KN_DT_INVALID, "qk_scaled");
  int scaled = s;
  if (a.softcap > 0) {
    int cap = const_scalar(b, "softcap", ct, a.softcap);
    int t = unary(b, KN_OP_TANH, binary(b, KN_OP_DIV, s, cap, KN_DT_INVALID, "softcap_div"), "softcap_tanh");
    s = binary(b, KN_OP_MUL, t, cap, KN_DT_INVALID, "softcapped");
  }
  s = group_rows(b, &a, s, false, "qk_heads");
  int qk_out[4] = {s, s, s, s};
  if (a.softcap > 0 && out[KN_ATTN_QK_OUTPUT] >= 0 && a.qk_mode == 0) /* before the softcap */
    qk_out[0] = group_rows(b, &a, scaled, false, "qk_scaled_heads");
  int bias = attention_bias(b, &a, in, ct);
  if (bias >= 0) s = binary(b, KN_OP_ADD, s, bias, KN_DT_INVALID, "qk_biased");
  qk_out[2] = s;

  kn_dtype st = a.softmax_dtype == a.dtype ? ct : a.softmax_dtype;
  int p = kn_rw_typed(b, KN_OP_SOFTMAX, (int[]){cast(b, s, st, "softmax_in")}, 1, st, shape_of(b, s), "softmax");
  attr_int(b, value_node(b, p), "axis", -1);
  p = qk_out[3] = cast(b, p, ct, "softmax_out");
  if (out[KN_ATTN_QK_OUTPUT] >= 0)
    finish(b, cast(b, qk_out[a.qk_mode], a.dtype, "qk_output_cast"), out[KN_ATTN_QK_OUTPUT], "qk_output");

  int y = matmul(b, group_rows(b, &a, p, true, "probs_grouped"), v, "pv");
  y = group_rows(b, &a, y, false, "pv_heads");
  if (a.rank == 3) {
    y = transpose(b, y, (const int64_t[]){0, 2, 1, 3}, "y_merge");
    kn_shape s3 = {.rank = 3, .dim = {a.batch, a.q_len, a.q_heads * a.v_head_size}, .batch_mask = a.batch_sym};
    y = reshape(b, y, (const int64_t[]){0, 0, a.q_heads * a.v_head_size}, 3, s3, "y_merged");
  }
  finish(b, cast(b, y, a.dtype, "y_cast"), out[KN_ATTN_Y], "y");
  return 0;
}

/* ---- RMSNormalization ---- */

static int decompose_rms_norm(kn_graph *g, int ni, const int *uses, kn_diag *d) {
  kn_rms_geom r;
  if (kn_rms_resolve(g, &g->nodes[ni], &r, d) < 0) return -1;
  const kn_node *n = &g->nodes[ni];
  int x = n->in[0], scale = n->in[1], y = uses[n->out[0]] > 0 ? n->out[0] : -1;
  float eps = kn_node_attr_float(n, "epsilon", 1e-5f);
  kn_rw bb = {.g = g, .d = d, .node = ni, .name = n->name, .last = -1}, *b = &bb;
  kn_pass_kill_node(g, ni);

  int xs = cast(b, x, r.stash, "x_stash");
  int sq = binary(b, KN_OP_MUL, xs, xs, KN_DT_INVALID, "x_squared");
  kn_shape ms = shape_of(b, sq);
  int64_t axes[KN_MAX_RANK];
  int n_axes = 0;
  for (int i = r.axis; i < ms.rank; i++) {
    axes[n_axes++] = i;
    ms.dim[i] = 1;
    ms.batch_mask &= ~(1u << i);
  }
  int mean = kn_rw_typed(b, KN_OP_REDUCE_MEAN, (int[]){sq, const_ints(b, "axes", axes, n_axes)}, 2, r.stash, ms, "mean_square");
  attr_int(b, value_node(b, mean), "keepdims", 1);
  int rms = unary(b, KN_OP_SQRT, binary(b, KN_OP_ADD, mean, const_scalar(b, "epsilon", r.stash, eps), KN_DT_INVALID, "mean_square_eps"), "rms");
  int normalized = cast(b, binary(b, KN_OP_DIV, xs, rms, KN_DT_INVALID, "normalized"), r.out_type, "normalized_cast");
  finish(b, binary(b, KN_OP_MUL, normalized, scale, KN_DT_INVALID, "scaled"), y, "y");
  return 0;
}

/* ---- RotaryEmbedding ---- */

static int decompose_rotary(kn_graph *g, int ni, const int *uses, kn_diag *d) {
  kn_rope_geom r;
  if (kn_rope_resolve(g, &g->nodes[ni], &r, d) < 0) return -1;
  const kn_node *n = &g->nodes[ni];
  int x = n->in[0], cos_c = n->in[1], sin_c = n->in[2], pos = n->n_in > 3 ? n->in[3] : -1;
  int y = uses[n->out[0]] > 0 ? n->out[0] : -1;
  kn_rw bb = {.g = g, .d = d, .node = ni, .name = n->name, .last = -1}, *b = &bb;
  kn_pass_kill_node(g, ni);

  kn_shape xs = shape_of(b, x);
  bool bsym = xs.batch_mask & 1;
  /* x4: [B, H, S, D] for 4-D input, [B, S, H, D] for 3-D; the caches get a
   * unit head axis so they broadcast the same way. */
  int x4 = x, head_axis = 1;
  if (r.rank == 3) {
    x4 = reshape(b, x, (const int64_t[]){0, 0, r.heads, r.head_size}, 4,
                 shape4(xs.dim[0], r.seq_len, r.heads, r.head_size, bsym), "x_heads");
    head_axis = 2;
  }
  if (pos >= 0) { /* caches [max_pos, rot/2] gathered to [B, S, rot/2] */
    cos_c = kn_rw_typed(b, KN_OP_GATHER, (int[]){cos_c, pos}, 2, dtype_of(b, cos_c),
                 (kn_shape){.rank = 3, .dim = {xs.dim[0], r.seq_len, r.rot_dim / 2}, .batch_mask = bsym}, "cos");
    sin_c = kn_rw_typed(b, KN_OP_GATHER, (int[]){sin_c, pos}, 2, dtype_of(b, sin_c), shape_of(b, cos_c), "sin");
    attr_int(b, value_node(b, cos_c), "axis", 0);
    attr_int(b, value_node(b, sin_c), "axis", 0);
  }
  cos_c = unsqueeze(b, cos_c, head_axis, "cos_heads");
  sin_c = unsqueeze(b, sin_c, head_axis, "sin_heads");

  int64_t half = r.rot_dim / 2;
  int x1, x2;
  if (r.interleaved) {
    x1 = slice_last(b, x4, 0, r.rot_dim, 2, "x_even");
    x2 = slice_last(b, x4, 1, r.rot_dim, 2, "x_odd");
  } else {
    x1 = slice_last(b, x4, 0, half, 1, "x_first");
    x2 = slice_last(b, x4, half, r.rot_dim, 1, "x_second");
  }
  int real = binary(b, KN_OP_SUB, binary(b, KN_OP_MUL, cos_c, x1, KN_DT_INVALID, "cos_x1"),
                    binary(b, KN_OP_MUL, sin_c, x2, KN_DT_INVALID, "sin_x2"), KN_DT_INVALID, "real");
  int imag = binary(b, KN_OP_ADD, binary(b, KN_OP_MUL, sin_c, x1, KN_DT_INVALID, "sin_x1"),
                    binary(b, KN_OP_MUL, cos_c, x2, KN_DT_INVALID, "cos_x2"), KN_DT_INVALID, "imag");
  int rotated;
  if (r.interleaved) { /* [.., half] x 2 -> [.., half, 2] -> [.., rot] */
    int pair = concat(b, (int[]){unsqueeze(b, real, -1, "real_pair"), unsqueeze(b, imag, -1, "imag_pair")}, 2, 4,
                      "pairs");
    kn_shape s = shape_of(b, x1);
    s.dim[3] = r.rot_dim;
    rotated = reshape(b, pair, (const int64_t[]){0, 0, 0, r.rot_dim}, 4, s, "rotated");
  } else {
    rotated = concat(b, (int[]){real, imag}, 2, 3, "rotated");
  }
  if (r.rot_dim < r.head_size)
    rotated = concat(b, (int[]){rotated, slice_last(b, x4, r.rot_dim, r.head_size, 1, "x_pass")}, 2, 3, "y_heads");
  if (r.rank == 3) rotated = reshape(b, rotated, (const int64_t[]){0, 0, xs.dim[2]}, 3, xs, "y_merged");
  finish(b, rotated, y, "y");
  return 0;
}

/* ---- CausalConvWithState ---- */

static int decompose_causal_conv(kn_graph *g, int ni, const int *uses, kn_diag *d) {
  kn_ccs_geom r;
  if (kn_ccs_resolve(g, &g->nodes[ni], &r, d) < 0) return -1;
  const kn_node *n = &g->nodes[ni];
  int x = n->in[0], w = n->in[1], bias = r.has_bias ? n->in[2] : -1, past = r.has_past ? n->in[3] : -1;
  int y = uses[n->out[0]] > 0 ? n->out[0] : -1, state = n->n_out > 1 && uses[n->out[1]] > 0 ? n->out[1] : -1;
  kn_rw bb = {.g = g, .d = d, .node = ni, .name = n->name, .last = -1}, *b = &bb;
  kn_pass_kill_node(g, ni);

  kn_dtype t = dtype_of(b, x);
  int64_t k1 = r.kernel - 1, pad_left = 0;
  int padded = x; /* [B, C, k-1 + L] when a past state is given */
  if (past >= 0) {
    padded = concat(b, (int[]){past, x}, 2, 2, "padded");
  } else {
    pad_left = k1; /* zeros: the Conv's own padding */
  }
  kn_shape ys = shape_of(b, x);
  int conv_in[3] = {padded, w, bias};
  int conv = kn_rw_typed(b, KN_OP_CONV, conv_in, bias >= 0 ? 3 : 2, t, ys, "conv");
  int cn = value_node(b, conv);
  attr_int(b, cn, "group", r.channels);
  kn_node_add_attr(g, &g->nodes[cn], kn_pass_attr_ints(g, "pads", (const int64_t[]){pad_left, 0}, 2));
  kn_node_add_attr(g, &g->nodes[cn], kn_pass_attr_ints(g, "kernel_shape", &r.kernel, 1));
  int out = conv;
  if (r.silu) { /* x * sigmoid(x), in float32 for 16-bit types like the reference */
    int c = cast(b, conv, kn_dtype_size(t) < 4 ? KN_DT_F32 : t, "conv_compute");
    out = cast(b, binary(b, KN_OP_MUL, c, unary(b, KN_OP_SIGMOID, c, "sigmoid"), KN_DT_INVALID, "silu"), t, "silu_cast");
  }
  finish(b, out, y, "output");

  /* present_state: the last k-1 positions of [past or zeros, input] */
  if (state >= 0) {
    int ps;
    if (past >= 0) {
      ps = slice_last(b, padded, r.len, r.len + k1, 1, "state");
    } else if (r.len >= k1) {
      ps = slice_last(b, x, r.len - k1, r.len, 1, "state");
    } else {
      kn_shape s = ys;
      s.dim[2] = k1;
      int in_pad[3] = {x, const_ints(b, "state_pads", (const int64_t[]){0, 0, k1 - r.len, 0, 0, 0}, 6),
                       const_scalar(b, "state_zero", t, 0)};
      ps = kn_rw_typed(b, KN_OP_PAD, in_pad, 3, t, s, "state");
    }
    finish(b, ps, state, "present_state");
  }
  return 0;
}

/* ---- LinearAttention ---- */

/* The steps of x [B, T, X] in float32 (the reference's precision): one
 * Split along T, step t a [B, 1, X] tensor. */
static void split_steps(kn_rw *b, const kn_linattn_geom *r, int x, int *steps, const char *tag) {
  kn_arena *a = &b->g->arena;
  x = cast(b, x, KN_DT_F32, kn_arena_printf(a, "%s_f32", tag));
  if (r->steps == 1) {
    steps[0] = x;
    return;
  }
  kn_shape s = shape_of(b, x);
  s.dim[1] = 1;
  int64_t *ones = malloc(sizeof(int64_t) * (size_t)r->steps);
  KN_ASSERT(ones, "out of memory");
  for (int64_t t = 0; t < r->steps; t++) {
    ones[t] = 1;
    steps[t] = kn_pass_new_value(b->g, b->name, kn_arena_printf(a, "/%s_step%lld", tag, (long long)t), KN_DT_F32, &s);
  }
  int in[2] = {x, const_ints(b, kn_arena_printf(a, "%s_split_sizes", tag), ones, (int)r->steps)};
  free(ones);
  int node = kn_graph_add_node(b->g, KN_OP_SPLIT, kn_arena_printf(a, "%s/%s_steps", b->name, tag), in, 2, steps,
                               (int)r->steps);
  attr_int(b, node, "axis", 1);
}

/* Step x [B, 1, heads*rows*cols] viewed as [B, heads, rows, cols] (free: T is 1). */
static int step_view(kn_rw *b, const kn_linattn_geom *r, int x, int64_t t, int64_t heads, int64_t rows,
                     int64_t cols, const char *tag) {
  return reshape(b, x, (const int64_t[]){0, heads, rows, cols}, 4, shape4(r->batch, heads, rows, cols, r->batch_sym),
                 kn_arena_printf(&b->g->arena, "step%lld_%s", (long long)t, tag));
}

static int decompose_linear_attention(kn_graph *g, int ni, const int *uses, kn_diag *d) {
  kn_linattn_geom r;
  if (kn_linattn_resolve(g, &g->nodes[ni], &r, d) < 0) return -1;
  const kn_node *n = &g->nodes[ni];
  int in[6];
  for (int k = 0; k < 6; k++) in[k] = k < n->n_in ? n->in[k] : -1;
  int y = uses[n->out[0]] > 0 ? n->out[0] : -1, state_out = n->n_out > 1 && uses[n->out[1]] > 0 ? n->out[1] : -1;
  kn_rw bb = {.g = g, .d = d, .node = ni, .name = n->name, .last = -1}, *b = &bb;
  kn_arena *a = &g->arena;
  kn_pass_kill_node(g, ni);

  int64_t steps = r.steps, reps = r.q_heads / r.kv_heads;
  int *qs = malloc(sizeof(int) * (size_t)steps * 6);
  KN_ASSERT(qs, "out of memory");
  int *ks = qs + steps, *vs = ks + steps, *gs = vs + steps, *bs = gs + steps, *outs = bs + steps;
  split_steps(b, &r, in[0], qs, "q");
  split_steps(b, &r, in[1], ks, "k");
  split_steps(b, &r, in[2], vs, "v");
  if (r.gated) split_steps(b, &r, unary(b, KN_OP_EXP, cast(b, in[4], KN_DT_F32, "decay_f32"), "gate"), gs, "gate");
  if (r.delta) split_steps(b, &r, in[5], bs, "beta");
  int state = r.has_past ? cast(b, in[3], KN_DT_F32, "past_f32") : -1; /* -1: all zeros */
  for (int64_t t = 0; t < steps; t++) {
    int vt = step_view(b, &r, vs[t], t, r.kv_heads, 1, r.value_size, "v");
    if (r.gated && state >= 0) /* S *= exp(g_t), broadcast over the value dim */
      state = binary(b, KN_OP_MUL, state, step_view(b, &r, gs[t], t, r.kv_heads, r.decay_size, 1, "gate"),
                     KN_DT_INVALID, kn_arena_printf(a, "step%lld_decayed", (long long)t));
    if (r.delta) { /* v_t <- beta_t * (v_t - S^T k_t) */
      if (state >= 0) {
        int kt = step_view(b, &r, ks[t], t, r.kv_heads, 1, r.key_size, "k_row");
        vt = binary(b, KN_OP_SUB, vt, matmul(b, kt, state, kn_arena_printf(a, "step%lld_retrieved", (long long)t)),
                    KN_DT_INVALID, kn_arena_printf(a, "step%lld_v_delta", (long long)t));
      }
      vt = binary(b, KN_OP_MUL, step_view(b, &r, bs[t], t, r.beta_heads, 1, 1, "beta"), vt, KN_DT_INVALID,
                  kn_arena_printf(a, "step%lld_v_beta", (long long)t));
    }
    int upd = binary(b, KN_OP_MUL, step_view(b, &r, ks[t], t, r.kv_heads, r.key_size, 1, "k_col"), vt, KN_DT_INVALID,
                     kn_arena_printf(a, "step%lld_outer", (long long)t));
    state = state < 0 ? upd : binary(b, KN_OP_ADD, state, upd, KN_DT_INVALID, kn_arena_printf(a, "step%lld_state", (long long)t));
    /* o_t = q_t S: the query heads of a kv head are rows of one MatMul */
    int qt = step_view(b, &r, qs[t], t, r.kv_heads, reps, r.key_size, "q");
    int ot = matmul(b, qt, state, kn_arena_printf(a, "step%lld_out", (long long)t));
    kn_shape os = {.rank = 3, .dim = {r.batch, 1, r.q_heads * r.value_size}, .batch_mask = r.batch_sym};
    outs[t] = reshape(b, ot, (const int64_t[]){0, 1, r.q_heads * r.value_size}, 3, os,
                      kn_arena_printf(a, "step%lld_out_packed", (long long)t));
  }
  int o = steps > 1 ? concat(b, outs, (int)steps, 1, "outputs") : outs[0];
  free(qs);
  o = binary(b, KN_OP_MUL, o, const_scalar(b, "scale", KN_DT_F32, r.scale), KN_DT_INVALID, "scaled");
  finish(b, cast(b, o, r.dtype, "out_cast"), y, "output");
  finish(b, cast(b, state, r.state_type, "state_cast"), state_out, "present_state");
  return 0;
}

int kn_pass_decompose_attention(kn_graph *g, kn_diag *d) {
  int *uses = malloc(sizeof(int) * ((size_t)g->n_values + 1));
  KN_ASSERT(uses, "out of memory");
  kn_pass_count_uses(g, uses);
  int rc = 0, n_nodes = g->n_nodes; /* nodes added here are primitive */
  for (int i = 0; i < n_nodes; i++) {
    if (g->nodes[i].dead) continue;
    /* uses[] stays valid: new values are read only by new nodes */
    int first_node = g->n_nodes, first_line = d ? d->count : 0, node_rc = 0;
    switch (g->nodes[i].op) {
    case KN_OP_ATTENTION:
    case KN_OP_FLEX_ATTENTION: node_rc = decompose_attention(g, i, uses, d); break;
    case KN_OP_CAUSAL_CONV_WITH_STATE: node_rc = decompose_causal_conv(g, i, uses, d); break;
    case KN_OP_LINEAR_ATTENTION: node_rc = decompose_linear_attention(g, i, uses, d); break;
    case KN_OP_RMS_NORM: node_rc = decompose_rms_norm(g, i, uses, d); break;
    case KN_OP_ROTARY_EMBEDDING: node_rc = decompose_rotary(g, i, uses, d); break;
    default: continue;
    }
    rc |= node_rc;
    /* the new nodes remember the composite, for diagnostics */
    kn_graph_mark_origin(g, first_node, i);
    kn_node_diag_origin(&g->nodes[i], d, first_line);
  }
  free(uses);
  if (rc < 0) return -1;
  return kn_graph_toposort(g, d);
}
