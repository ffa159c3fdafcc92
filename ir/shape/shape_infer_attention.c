/* shape_infer_attention.c — geometry and shape rules of the attention family
 * (Attention, FlexAttention, RMSNormalization, RotaryEmbedding,
 * CausalConvWithState, LinearAttention; see attention.h). The
 * resolvers check everything the decomposition relies on, so a node that
 * passes shape inference can be decomposed unless it needs something the
 * decomposition refuses by name (pass_decompose_attention.c). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/passes/attention.h"
#include "ir/shape/shape_infer_impl.h"

#define SHAPE_STR(s) kn_shape_str((s), (char[160]){0}, 160)

static int fail(kn_diag *d, const kn_node *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(kn_diag *d, const kn_node *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = kn_node_verror(d, n, fmt, ap);
  va_end(ap);
  return rc;
}

static const kn_value *input(const kn_graph *g, const kn_node *n, int k) {
  return k < n->n_in && n->in[k] >= 0 ? &g->values[n->in[k]] : NULL;
}

static bool is_batch(const kn_shape *s, int i) { return (s->batch_mask >> i) & 1; }

/* Only dim 0 of an input may carry the batch symbol. */
static int batch_only_dim0(kn_diag *d, const kn_node *n, const char *what, const kn_value *v) {
  if (v->shape.batch_mask & ~1u)
    return fail(d, n, "%s %s: only its first dim may depend on the batch size", what, SHAPE_STR(&v->shape));
  return 0;
}

/* Dim i of v must be `want` (with the batch bit `sym` when i == 0). */
static int need_dim(kn_diag *d, const kn_node *n, const char *what, const kn_value *v, int i, int64_t want,
                    bool sym, const char *meaning) {
  if (v->shape.dim[i] != want || is_batch(&v->shape, i) != sym)
    return fail(d, n, "%s %s: dim %d (%s) must be %s%lld", what, SHAPE_STR(&v->shape), i, meaning,
                sym ? "N*" : "", (long long)want);
  return 0;
}

/* ---- Attention ---- */

static int attn_heads(const kn_graph *g, const kn_node *n, kn_attn_geom *a, kn_diag *d) {
  const kn_value *q = input(g, n, KN_ATTN_Q), *k = input(g, n, KN_ATTN_K), *v = input(g, n, KN_ATTN_V);
  int64_t qh_attr = kn_node_attr_int(n, "q_num_heads", 0), kvh_attr = kn_node_attr_int(n, "kv_num_heads", 0);
  int64_t k_len, v_len;
  if (a->rank == 3) {
    if (qh_attr <= 0 || kvh_attr <= 0)
      return fail(d, n, "attributes q_num_heads and kv_num_heads must be positive for 3-D Q, K, V (got %lld, %lld)",
                  (long long)qh_attr, (long long)kvh_attr);
    a->q_heads = qh_attr, a->kv_heads = kvh_attr;
    if (q->shape.dim[2] % a->q_heads)
      return fail(d, n, "Q hidden size %lld is not a multiple of q_num_heads %lld", (long long)q->shape.dim[2],
                  (long long)a->q_heads);
    if (k->shape.dim[2] % a->kv_heads || v->shape.dim[2] % a->kv_heads)
      return fail(d, n, "K and V hidden sizes %lld, %lld are not multiples of kv_num_heads %lld",
                  (long long)k->shape.dim[2], (long long)v->shape.dim[2], (long long)a->kv_heads);
    a->head_size = q->shape.dim[2] / a->q_heads;
    if (k->shape.dim[2] / a->kv_heads != a->head_size)
      return fail(d, n, "K head size %lld (hidden %lld / kv_num_heads) differs from Q head size %lld",
                  (long long)(k->shape.dim[2] / a->kv_heads), (long long)k->shape.dim[2], (long long)a->head_size);
    a->v_head_size = v->shape.dim[2] / a->kv_heads;
    a->q_len = q->shape.dim[1], k_len = k->shape.dim[1], v_len = v->shape.dim[1];
  } else {
    a->q_heads = q->shape.dim[1], a->kv_heads = k->shape.dim[1];
    if (v->shape.dim[1] != a->kv_heads)
      return fail(d, n, "V has %lld heads but K has %lld", (long long)v->shape.dim[1], (long long)a->kv_heads);
    if ((qh_attr && qh_attr != a->q_heads) || (kvh_attr && kvh_attr != a->kv_heads))
      return fail(d, n, "attributes q_num_heads %lld / kv_num_heads %lld disagree with 4-D Q, K (%lld, %lld heads)",
                  (long long)qh_attr, (long long)kvh_attr, (long long)a->q_heads, (long long)a->kv_heads);
    a->head_size = q->shape.dim[3], a->v_head_size = v->shape.dim[3];
    if (k->shape.dim[3] != a->head_size)
      return fail(d, n, "K head size %lld differs from Q head size %lld", (long long)k->shape.dim[3],
                  (long long)a->head_size);
    a->q_len = q->shape.dim[2], k_len = k->shape.dim[2], v_len = v->shape.dim[2];
  }
  if (a->q_heads < 1 || a->kv_heads < 1 || a->q_heads % a->kv_heads)
    return fail(d, n, "q_num_heads %lld is not a multiple of kv_num_heads %lld", (long long)a->q_heads,
                (long long)a->kv_heads);
  if (v_len != k_len)
    return fail(d, n, "V has sequence length %lld but K has %lld", (long long)v_len, (long long)k_len);
  a->kv_len = k_len;
  if (a->head_size < 1 || a->v_head_size < 1 || a->q_len < 1 || a->kv_len < 0)
    return fail(d, n, "empty Q, K or V (%s, %s, %s)", SHAPE_STR(&q->shape), SHAPE_STR(&k->shape),
                SHAPE_STR(&v->shape));
  return 0;
}

static int attn_past(const kn_graph *g, const kn_node *n, kn_attn_geom *a, kn_diag *d) {
  const kn_value *pk = input(g, n, KN_ATTN_PAST_KEY), *pv = input(g, n, KN_ATTN_PAST_VALUE);
  if (!pk != !pv) return fail(d, n, "inputs past_key and past_value must be given together");
  a->has_past = pk != NULL;
  a->past_len = 0;
  if (a->has_past) {
    if (pk->dtype != a->dtype || pv->dtype != a->dtype)
      return fail(d, n, "past_key / past_value are %s / %s, expected %s like Q", kn_dtype_name(pk->dtype),
                  kn_dtype_name(pv->dtype), kn_dtype_name(a->dtype));
    if (pk->shape.rank != 4 || pv->shape.rank != 4)
      return fail(d, n, "past_key %s and past_value %s must be 4-D", SHAPE_STR(&pk->shape), SHAPE_STR(&pv->shape));
    if (batch_only_dim0(d, n, "past_key", pk) < 0 || batch_only_dim0(d, n, "past_value", pv) < 0) return -1;
    a->past_len = pk->shape.dim[2];
    if (need_dim(d, n, "past_key", pk, 0, a->batch, a->batch_sym, "batch") < 0 ||
        need_dim(d, n, "past_key", pk, 1, a->kv_heads, false, "kv heads") < 0 ||
        need_dim(d, n, "past_key", pk, 3, a->head_size, false, "head size") < 0 ||
        need_dim(d, n, "past_value", pv, 0, a->batch, a->batch_sym, "batch") < 0 ||
        need_dim(d, n, "past_value", pv, 1, a->kv_heads, false, "kv heads") < 0 ||
        need_dim(d, n, "past_value", pv, 2, a->past_len, false, "past length") < 0 ||
        need_dim(d, n, "past_value", pv, 3, a->v_head_size, false, "v head size") < 0)
      return -1;
  }
  a->total_len = a->past_len + a->kv_len;
  if (a->total_len < 1) return fail(d, n, "K and past_key are both empty");
  return 0;
}

/* The mask broadcasts to [batch, q_heads, q_len, total_len], except that its
 * last dim may be shorter (padded with -inf). */
static int attn_mask(const kn_graph *g, const kn_node *n, kn_attn_geom *a, kn_diag *d) {
  const kn_value *m = input(g, n, KN_ATTN_MASK);
  a->has_mask = m != NULL;
  if (!m) return 0;
  a->mask_bool = m->dtype == KN_DT_BOOL;
  if (!a->mask_bool && m->dtype != a->dtype)
    return fail(d, n, "attn_mask is %s; expected bool or %s like Q", kn_dtype_name(m->dtype),
                kn_dtype_name(a->dtype));
  int r = m->shape.rank;
  if (r < 1 || r > 4) return fail(d, n, "attn_mask %s must have rank 1..4", SHAPE_STR(&m->shape));
  const int64_t full[4] = {a->batch, a->q_heads, a->q_len, a->total_len};
  for (int i = 0; i < r; i++) {
    int t = 4 - r + i;
    int64_t dim = m->shape.dim[i];
    bool sym = is_batch(&m->shape, i);
    if (t == 3) {
      if (sym || dim < 1 || dim > a->total_len)
        return fail(d, n, "attn_mask %s: last dim must be 1..%lld (past + kv sequence length)",
                    SHAPE_STR(&m->shape), (long long)a->total_len);
      a->mask_len = dim;
    } else if (!(dim == 1 && !sym) && !(dim == full[t] && sym == (t == 0 && a->batch_sym))) {
      return fail(d, n, "attn_mask %s does not broadcast to [%s%lld,%lld,%lld,%lld]", SHAPE_STR(&m->shape),
                  a->batch_sym ? "N*" : "", (long long)a->batch, (long long)a->q_heads, (long long)a->q_len,
                  (long long)a->total_len);
    }
  }
  return 0;
}

static int attn_attrs(const kn_node *n, kn_attn_geom *a, kn_diag *d) {
  const kn_attr *scale = kn_node_attr(n, "scale");
  a->scale = scale ? (double)scale->f : 1.0 / sqrt((double)a->head_size);
  /* NaN or infinite scores would make every output NaN */
  if (!isfinite(a->scale)) return fail(d, n, "attribute scale %g must be a finite number", a->scale);
  a->softcap = kn_node_attr_float(n, "softcap", 0.0f);
  if (!(a->softcap >= 0) || isinf(a->softcap))
    return fail(d, n, "attribute softcap %g must be finite and >= 0", a->softcap);
  int64_t causal = kn_node_attr_int(n, "is_causal", 0);
  if (causal != 0 && causal != 1) return fail(d, n, "attribute is_causal must be 0 or 1, got %lld", (long long)causal);
  a->is_causal = causal == 1;
  int64_t mode = kn_node_attr_int(n, "qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3)
    return fail(d, n, "attribute qk_matmul_output_mode must be 0..3, got %lld", (long long)mode);
  a->qk_mode = (int)mode;
  a->softmax_dtype = a->dtype;
  if (n->op == KN_OP_FLEX_ATTENTION && kn_dtype_size(a->dtype) < 4) a->softmax_dtype = KN_DT_F32;
  if (kn_node_attr(n, "softmax_precision")) {
    int64_t code = kn_node_attr_int(n, "softmax_precision", 0);
    kn_dtype t = code > 0 && code < 1000 ? kn_dtype_from_onnx((int)code) : KN_DT_INVALID;
    if (!kn_dtype_is_float(t))
      return fail(d, n, "attribute softmax_precision %lld is not a floating-point type", (long long)code);
    a->softmax_dtype = t;
  }
  return 0;
}

int kn_attn_resolve(const kn_graph *g, const kn_node *n, kn_attn_geom *a, kn_diag *d) {
  memset(a, 0, sizeof *a);
  const kn_value *q = input(g, n, KN_ATTN_Q), *k = input(g, n, KN_ATTN_K), *v = input(g, n, KN_ATTN_V);
  if (!q || !k || !v) return fail(d, n, "inputs Q, K and V are required");
  if (n->op == KN_OP_ATTENTION && g->opset > 0 && g->opset < 23)
    return fail(d, n, "Attention needs opset 23 or later; the model imports opset %lld", (long long)g->opset);
  if (n->op == KN_OP_FLEX_ATTENTION) {
    if (!n->domain || strcmp(n->domain, "ai.onnx.preview"))
      return fail(d, n, "FlexAttention is an op of domain 'ai.onnx.preview', not '%s'", n->domain ? n->domain : "");
    for (int i = 0; i < n->n_attr; i++)
      if (n->attrs[i].kind == KN_ATTR_GRAPH)
        return fail(d, n, "attribute '%s' (a subgraph) is not supported", n->attrs[i].name);
    if (q->shape.rank != 4) return fail(d, n, "Q %s must be 4-D", SHAPE_STR(&q->shape));
  }
  a->dtype = q->dtype;
  if (!kn_dtype_is_float(a->dtype)) return fail(d, n, "Q must be a float tensor, got %s", kn_dtype_name(a->dtype));
  if (k->dtype != a->dtype || v->dtype != a->dtype)
    return fail(d, n, "K and V are %s and %s; expected %s like Q", kn_dtype_name(k->dtype), kn_dtype_name(v->dtype),
                kn_dtype_name(a->dtype));
  a->rank = q->shape.rank;
  if ((a->rank != 3 && a->rank != 4) || k->shape.rank != a->rank || v->shape.rank != a->rank)
    return fail(d, n, "Q %s, K %s, V %s must all be 3-D or all 4-D", SHAPE_STR(&q->shape), SHAPE_STR(&k->shape),
                SHAPE_STR(&v->shape));
  if (batch_only_dim0(d, n, "Q", q) < 0 || batch_only_dim0(d, n, "K", k) < 0 || batch_only_dim0(d, n, "V", v) < 0)
    return -1;
  a->batch = q->shape.dim[0], a->batch_sym = is_batch(&q->shape, 0);
  if (need_dim(d, n, "K", k, 0, a->batch, a->batch_sym, "batch") < 0 ||
      need_dim(d, n, "V", v, 0, a->batch, a->batch_sym, "batch") < 0)
    return -1;
  if (attn_heads(g, n, a, d) < 0 || attn_past(g, n, a, d) < 0 || attn_mask(g, n, a, d) < 0) return -1;
  const kn_value *nonpad = input(g, n, KN_ATTN_NONPAD_KV_SEQLEN);
  a->has_nonpad = nonpad != NULL;
  if (nonpad) {
    if (a->has_past) return fail(d, n, "input nonpad_kv_seqlen cannot be used with past_key / past_value");
    if (nonpad->dtype != KN_DT_I64 || nonpad->shape.rank != 1)
      return fail(d, n, "nonpad_kv_seqlen must be a 1-D int64 tensor, got %s %s", kn_dtype_name(nonpad->dtype),
                  SHAPE_STR(&nonpad->shape));
    if (need_dim(d, n, "nonpad_kv_seqlen", nonpad, 0, a->batch, a->batch_sym, "batch") < 0) return -1;
  }
  return attn_attrs(n, a, d);
}

static int infer_attention(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  kn_attn_geom a;
  if (kn_attn_resolve(c->g, n, &a, c->d) < 0) return -1;
  uint32_t bm = a.batch_sym ? 1u : 0u;
  kn_shape y = a.rank == 3 ? (kn_shape){.rank = 3, .dim = {a.batch, a.q_len, a.q_heads * a.v_head_size}, .batch_mask = bm}
                           : (kn_shape){.rank = 4, .dim = {a.batch, a.q_heads, a.q_len, a.v_head_size}, .batch_mask = bm};
  kn_shape pk = {.rank = 4, .dim = {a.batch, a.kv_heads, a.total_len, a.head_size}, .batch_mask = bm};
  kn_shape pv = {.rank = 4, .dim = {a.batch, a.kv_heads, a.total_len, a.v_head_size}, .batch_mask = bm};
  kn_shape qk = {.rank = 4, .dim = {a.batch, a.q_heads, a.q_len, a.total_len}, .batch_mask = bm};
  if (kn_infer_set(c, KN_ATTN_Y, a.dtype, &y) < 0 || kn_infer_set(c, KN_ATTN_PRESENT_KEY, a.dtype, &pk) < 0 ||
      kn_infer_set(c, KN_ATTN_PRESENT_VALUE, a.dtype, &pv) < 0 || kn_infer_set(c, KN_ATTN_QK_OUTPUT, a.dtype, &qk) < 0)
    return -1;
  return 0;
}

/* ---- RotaryEmbedding ---- */

int kn_rope_resolve(const kn_graph *g, const kn_node *n, kn_rope_geom *r, kn_diag *d) {
  memset(r, 0, sizeof *r);
  const kn_value *x = input(g, n, 0), *cos_c = input(g, n, 1), *sin_c = input(g, n, 2), *pos = input(g, n, 3);
  if (!x || !cos_c || !sin_c) return fail(d, n, "inputs X, cos_cache and sin_cache are required");
  if (g->opset > 0 && g->opset < 23)
    return fail(d, n, "RotaryEmbedding needs opset 23 or later; the model imports opset %lld", (long long)g->opset);
  if (!kn_dtype_is_float(x->dtype)) return fail(d, n, "X must be a float tensor, got %s", kn_dtype_name(x->dtype));
  if (cos_c->dtype != x->dtype || sin_c->dtype != x->dtype)
    return fail(d, n, "cos_cache / sin_cache are %s / %s, expected %s like X", kn_dtype_name(cos_c->dtype),
                kn_dtype_name(sin_c->dtype), kn_dtype_name(x->dtype));
  r->rank = x->shape.rank;
  if (r->rank != 3 && r->rank != 4) return fail(d, n, "X %s must be 3-D or 4-D", SHAPE_STR(&x->shape));
  if (batch_only_dim0(d, n, "X", x) < 0) return -1;
  int64_t heads_attr = kn_node_attr_int(n, "num_heads", 0);
  if (r->rank == 3) {
    if (heads_attr <= 0) return fail(d, n, "attribute num_heads must be positive for a 3-D X");
    if (x->shape.dim[2] % heads_attr)
      return fail(d, n, "X hidden size %lld is not a multiple of num_heads %lld", (long long)x->shape.dim[2],
                  (long long)heads_attr);
    r->heads = heads_attr, r->seq_len = x->shape.dim[1], r->head_size = x->shape.dim[2] / heads_attr;
  } else {
    r->heads = x->shape.dim[1], r->seq_len = x->shape.dim[2], r->head_size = x->shape.dim[3];
    if (heads_attr && heads_attr != r->heads)
      return fail(d, n, "attribute num_heads %lld disagrees with X %s", (long long)heads_attr, SHAPE_STR(&x->shape));
  }
  r->rot_dim = kn_node_attr_int(n, "rotary_embedding_dim", 0);
  if (r->rot_dim == 0) r->rot_dim = r->head_size;
  if (r->rot_dim < 2 || r->rot_dim % 2 || r->rot_dim > r->head_size)
    return fail(d, n, "rotary dimension %lld (attribute rotary_embedding_dim) must be even and in 2..%lld",
                (long long)r->rot_dim, (long long)r->head_size);
  r->interleaved = kn_node_attr_int(n, "interleaved", 0) != 0;
  r->has_pos = pos != NULL;
  const kn_shape *cs = &cos_c->shape;
  if (!kn_shape_equal(cs, &sin_c->shape))
    return fail(d, n, "cos_cache %s and sin_cache %s differ in shape", SHAPE_STR(cs), SHAPE_STR(&sin_c->shape));
  int64_t half = r->rot_dim / 2;
  bool bsym = is_batch(&x->shape, 0);
  if (pos) {
    if (pos->dtype != KN_DT_I64 || pos->shape.rank != 2)
      return fail(d, n, "position_ids must be a 2-D int64 tensor, got %s %s", kn_dtype_name(pos->dtype),
                  SHAPE_STR(&pos->shape));
    if (batch_only_dim0(d, n, "position_ids", pos) < 0 ||
        need_dim(d, n, "position_ids", pos, 0, x->shape.dim[0], bsym, "batch") < 0 ||
        need_dim(d, n, "position_ids", pos, 1, r->seq_len, false, "sequence length") < 0)
      return -1;
    if (cs->rank != 2 || cs->batch_mask || cs->dim[1] != half || cs->dim[0] < 1)
      return fail(d, n, "cos_cache %s must be [max_position, %lld] with position_ids", SHAPE_STR(cs),
                  (long long)half);
  } else {
    if (cs->rank != 3) return fail(d, n, "cos_cache %s must be 3-D without position_ids", SHAPE_STR(cs));
    if (batch_only_dim0(d, n, "cos_cache", cos_c) < 0 ||
        need_dim(d, n, "cos_cache", cos_c, 0, x->shape.dim[0], bsym, "batch") < 0 ||
        need_dim(d, n, "cos_cache", cos_c, 1, r->seq_len, false, "sequence length") < 0 ||
        need_dim(d, n, "cos_cache", cos_c, 2, half, false, "rotary dim / 2") < 0)
      return -1;
  }
  return 0;
}

/* ---- RMSNormalization ---- */

int kn_rms_resolve(const kn_graph *g, const kn_node *n, kn_rms_geom *r, kn_diag *d) {
  memset(r, 0, sizeof *r);
  const kn_value *x = input(g, n, 0), *scale = input(g, n, 1);
  if (!x || !scale) return fail(d, n, "inputs X and scale are required");
  if (!kn_dtype_is_float(x->dtype) || !kn_dtype_is_float(scale->dtype))
    return fail(d, n, "X and scale must be float tensors, got %s and %s", kn_dtype_name(x->dtype),
                kn_dtype_name(scale->dtype));
  int rank = x->shape.rank;
  int64_t axis = kn_node_attr_int(n, "axis", -1);
  r->axis = kn_axis_norm(axis, rank);
  if (rank < 1 || r->axis < 0)
    return fail(d, n, "attribute axis %lld is out of range for X %s", (long long)axis, SHAPE_STR(&x->shape));
  int64_t code = kn_node_attr_int(n, "stash_type", 1);
  r->stash = code > 0 && code < 1000 ? kn_dtype_from_onnx((int)code) : KN_DT_INVALID;
  if (!kn_dtype_is_float(r->stash))
    return fail(d, n, "attribute stash_type %lld is not a floating-point type", (long long)code);
  float eps = kn_node_attr_float(n, "epsilon", 1e-5f);
  if (!isfinite(eps)) return fail(d, n, "attribute epsilon %g must be a finite number", eps);
  r->out_type = scale->dtype;
  /* scale broadcasts unidirectionally to X */
  const kn_shape *s = &scale->shape;
  bool ok = s->rank <= rank;
  for (int i = 0; ok && i < s->rank; i++) {
    int xi = rank - s->rank + i;
    ok = (s->dim[i] == 1 && !is_batch(s, i)) ||
         (s->dim[i] == x->shape.dim[xi] && is_batch(s, i) == is_batch(&x->shape, xi));
  }
  if (!ok)
    return fail(d, n, "scale %s does not broadcast to X %s", SHAPE_STR(s), SHAPE_STR(&x->shape));
  return 0;
}

/* ---- CausalConvWithState ---- */

int kn_ccs_resolve(const kn_graph *g, const kn_node *n, kn_ccs_geom *r, kn_diag *d) {
  memset(r, 0, sizeof *r);
  const kn_value *x = input(g, n, 0), *w = input(g, n, 1), *bias = input(g, n, 2), *past = input(g, n, 3);
  if (!x || !w) return fail(d, n, "inputs input and weight are required");
  if (!kn_dtype_is_float(x->dtype)) return fail(d, n, "input must be a float tensor, got %s", kn_dtype_name(x->dtype));
  if (x->shape.rank != 3) return fail(d, n, "input %s must be 3-D [batch, channels, length]", SHAPE_STR(&x->shape));
  if (batch_only_dim0(d, n, "input", x) < 0) return -1;
  r->batch = x->shape.dim[0], r->batch_sym = is_batch(&x->shape, 0);
  r->channels = x->shape.dim[1], r->len = x->shape.dim[2];
  if (w->dtype != x->dtype || w->shape.rank != 3 || w->shape.batch_mask || w->shape.dim[0] != r->channels ||
      w->shape.dim[1] != 1 || w->shape.dim[2] < 1)
    return fail(d, n, "weight is %s %s; expected %s [%lld, 1, k]", kn_dtype_name(w->dtype), SHAPE_STR(&w->shape),
                kn_dtype_name(x->dtype), (long long)r->channels);
  r->kernel = w->shape.dim[2];
  r->has_bias = bias != NULL;
  if (bias && (bias->dtype != x->dtype || bias->shape.rank != 1 || bias->shape.batch_mask ||
               bias->shape.dim[0] != r->channels))
    return fail(d, n, "bias is %s %s; expected %s [%lld]", kn_dtype_name(bias->dtype), SHAPE_STR(&bias->shape),
                kn_dtype_name(x->dtype), (long long)r->channels);
  r->has_past = past != NULL;
  if (past) {
    if (past->dtype != x->dtype || past->shape.rank != 3)
      return fail(d, n, "past_state is %s %s; expected %s [batch, %lld, %lld]", kn_dtype_name(past->dtype),
                  SHAPE_STR(&past->shape), kn_dtype_name(x->dtype), (long long)r->channels, (long long)(r->kernel - 1));
    if (batch_only_dim0(d, n, "past_state", past) < 0 ||
        need_dim(d, n, "past_state", past, 0, r->batch, r->batch_sym, "batch") < 0 ||
        need_dim(d, n, "past_state", past, 1, r->channels, false, "channels") < 0 ||
        need_dim(d, n, "past_state", past, 2, r->kernel - 1, false, "kernel size - 1") < 0)
      return -1;
  }
  const char *act = kn_node_attr_string(n, "activation", "none");
  if (strcmp(act, "none") && strcmp(act, "silu") && strcmp(act, "swish"))
    return fail(d, n, "attribute activation '%s' must be 'none', 'silu' or 'swish'", act);
  r->silu = strcmp(act, "none") != 0;
  return 0;
}

/* ---- LinearAttention ---- */

/* Input k must be a 3-D [batch, steps, last] tensor of dtype; stores last. */
static int packed_3d(const kn_graph *g, const kn_node *n, int k, const char *what, const kn_linattn_geom *r,
                     int64_t *last, kn_diag *d) {
  const kn_value *v = input(g, n, k);
  if (v->dtype != r->dtype || v->shape.rank != 3)
    return fail(d, n, "%s is %s %s; expected %s [batch, steps, size]", what, kn_dtype_name(v->dtype),
                SHAPE_STR(&v->shape), kn_dtype_name(r->dtype));
  if (batch_only_dim0(d, n, what, v) < 0 || need_dim(d, n, what, v, 0, r->batch, r->batch_sym, "batch") < 0 ||
      need_dim(d, n, what, v, 1, r->steps, false, "steps") < 0)
    return -1;
  *last = v->shape.dim[2];
  return 0;
}

int kn_linattn_resolve(const kn_graph *g, const kn_node *n, kn_linattn_geom *r, kn_diag *d) {
  memset(r, 0, sizeof *r);
  const kn_value *q = input(g, n, 0), *past = input(g, n, 3), *decay = input(g, n, 4), *beta = input(g, n, 5);
  if (!q || !input(g, n, 1) || !input(g, n, 2)) return fail(d, n, "inputs query, key and value are required");
  r->dtype = q->dtype;
  if (!kn_dtype_is_float(r->dtype) || q->shape.rank != 3)
    return fail(d, n, "query must be a 3-D float tensor, got %s %s", kn_dtype_name(q->dtype), SHAPE_STR(&q->shape));
  r->batch = q->shape.dim[0], r->batch_sym = is_batch(&q->shape, 0), r->steps = q->shape.dim[1];
  if (r->steps < 1 || r->steps > KN_LINATTN_MAX_STEPS)
    return fail(d, n, "query %s: sequence length must be 1..%d (the recurrence is unrolled)", SHAPE_STR(&q->shape),
                KN_LINATTN_MAX_STEPS);
  const char *rule = kn_node_attr_string(n, "update_rule", "gated_delta");
  if (!strcmp(rule, "linear")) {
  } else if (!strcmp(rule, "gated")) {
    r->gated = true;
  } else if (!strcmp(rule, "delta")) {
    r->delta = true;
  } else if (!strcmp(rule, "gated_delta")) {
    r->gated = r->delta = true;
  } else {
    return fail(d, n, "attribute update_rule '%s' must be 'linear', 'gated', 'delta' or 'gated_delta'", rule);
  }
  r->q_heads = kn_node_attr_int(n, "q_num_heads", 0), r->kv_heads = kn_node_attr_int(n, "kv_num_heads", 0);
  if (r->q_heads <= 0 || r->kv_heads <= 0 || r->q_heads % r->kv_heads)
    return fail(d, n, "attributes q_num_heads %lld and kv_num_heads %lld must be positive, q a multiple of kv",
                (long long)r->q_heads, (long long)r->kv_heads);
  int64_t q_last, k_last, v_last;
  if (packed_3d(g, n, 0, "query", r, &q_last, d) < 0 || packed_3d(g, n, 1, "key", r, &k_last, d) < 0 ||
      packed_3d(g, n, 2, "value", r, &v_last, d) < 0)
    return -1;
  if (q_last % r->q_heads || k_last != q_last / r->q_heads * r->kv_heads || v_last % r->kv_heads || v_last == 0)
    return fail(d, n, "query / key / value sizes %lld / %lld / %lld do not split into %lld / %lld / %lld heads",
                (long long)q_last, (long long)k_last, (long long)v_last, (long long)r->q_heads,
                (long long)r->kv_heads, (long long)r->kv_heads);
  r->key_size = q_last / r->q_heads, r->value_size = v_last / r->kv_heads;
  if (r->key_size < 1) return fail(d, n, "query %s is empty", SHAPE_STR(&q->shape));
  if (r->gated != (decay != NULL))
    return fail(d, n, "update_rule '%s' %s input decay", rule, r->gated ? "requires" : "forbids");
  if (r->delta != (beta != NULL))
    return fail(d, n, "update_rule '%s' %s input beta", rule, r->delta ? "requires" : "forbids");
  if (decay) {
    int64_t last;
    if (packed_3d(g, n, 4, "decay", r, &last, d) < 0) return -1;
    if (last != r->kv_heads && last != r->kv_heads * r->key_size)
      return fail(d, n, "decay last dim %lld must be kv_num_heads (%lld) or kv_num_heads * key size (%lld)",
                  (long long)last, (long long)r->kv_heads, (long long)(r->kv_heads * r->key_size));
    r->decay_size = last / r->kv_heads;
  }
  if (beta) {
    if (packed_3d(g, n, 5, "beta", r, &r->beta_heads, d) < 0) return -1;
    if (r->beta_heads != r->kv_heads && r->beta_heads != 1)
      return fail(d, n, "beta last dim %lld must be kv_num_heads (%lld) or 1", (long long)r->beta_heads,
                  (long long)r->kv_heads);
  }
  r->has_past = past != NULL;
  r->state_type = past ? past->dtype : r->dtype;
  if (past) {
    if (!kn_dtype_is_float(past->dtype) || past->shape.rank != 4)
      return fail(d, n, "past_state is %s %s; expected a 4-D float tensor", kn_dtype_name(past->dtype),
                  SHAPE_STR(&past->shape));
    if (batch_only_dim0(d, n, "past_state", past) < 0 ||
        need_dim(d, n, "past_state", past, 0, r->batch, r->batch_sym, "batch") < 0 ||
        need_dim(d, n, "past_state", past, 1, r->kv_heads, false, "kv heads") < 0 ||
        need_dim(d, n, "past_state", past, 2, r->key_size, false, "key size") < 0 ||
        need_dim(d, n, "past_state", past, 3, r->value_size, false, "value size") < 0)
      return -1;
  }
  r->scale = kn_node_attr_float(n, "scale", 0.0f);
  if (!isfinite(r->scale)) return fail(d, n, "attribute scale %g must be a finite number", r->scale);
  if (r->scale == 0) r->scale = 1.0 / sqrt((double)r->key_size);
  return 0;
}

int kn_infer_attention(kn_infer *c) {
  const kn_node *n = kn_infer_node(c);
  switch (n->op) {
  case KN_OP_ATTENTION: return infer_attention(c);
  case KN_OP_ROTARY_EMBEDDING: {
    kn_rope_geom r;
    if (kn_rope_resolve(c->g, n, &r, c->d) < 0) return -1;
    const kn_value *x = kn_infer_in(c, 0);
    return kn_infer_set(c, 0, x->dtype, &x->shape);
  }
  case KN_OP_RMS_NORM: {
    kn_rms_geom r;
    if (kn_rms_resolve(c->g, n, &r, c->d) < 0) return -1;
    return kn_infer_set(c, 0, r.out_type, &kn_infer_in(c, 0)->shape);
  }
  case KN_OP_FLEX_ATTENTION: return infer_attention(c);
  case KN_OP_CAUSAL_CONV_WITH_STATE: {
    kn_ccs_geom r;
    if (kn_ccs_resolve(c->g, n, &r, c->d) < 0) return -1;
    const kn_value *x = kn_infer_in(c, 0);
    kn_shape st = x->shape;
    st.dim[2] = r.kernel - 1;
    return kn_infer_set(c, 0, x->dtype, &x->shape) < 0 ? -1 : kn_infer_set(c, 1, x->dtype, &st);
  }
  case KN_OP_LINEAR_ATTENTION: {
    kn_linattn_geom r;
    if (kn_linattn_resolve(c->g, n, &r, c->d) < 0) return -1;
    uint32_t bm = r.batch_sym ? 1u : 0u;
    kn_shape y = {.rank = 3, .dim = {r.batch, r.steps, r.q_heads * r.value_size}, .batch_mask = bm};
    kn_shape st = {.rank = 4, .dim = {r.batch, r.kv_heads, r.key_size, r.value_size}, .batch_mask = bm};
    return kn_infer_set(c, 0, r.dtype, &y) < 0 ? -1 : kn_infer_set(c, 1, r.state_type, &st);
  }
  default: KN_UNREACHABLE("not an attention-family op");
  }
}
