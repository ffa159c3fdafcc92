/* attention.h — the attention family of ONNX ops (Attention, RMSNormalization,
 * RotaryEmbedding, opset 23+; CausalConvWithState, LinearAttention, opset 27; FlexAttention of
 * domain ai.onnx.preview): their geometry, resolved and validated once
 * from a node and its input shapes. Shape inference (shape_infer_attention.c)
 * derives the output shapes from it; the decomposition pass
 * (pass_decompose_attention.c) builds the primitive graph from it.
 *
 * Invariants of a resolved geometry: every size is concrete and >= 1 except
 * the batch (dim 0 of the inputs), which may carry the batch symbol N; only
 * dim 0 of an input may carry it. Bad input gives -1 and one diagnostic
 * "node 'NAME' (Op): ..." naming the input or attribute at fault. */
#ifndef KN_ATTENTION_H
#define KN_ATTENTION_H

#include "ir/graph/graph.h"

/* Attention inputs and outputs by position (ONNX order). */
enum {
  KN_ATTN_Q, KN_ATTN_K, KN_ATTN_V, KN_ATTN_MASK, KN_ATTN_PAST_KEY, KN_ATTN_PAST_VALUE,
  KN_ATTN_NONPAD_KV_SEQLEN
};
enum { KN_ATTN_Y, KN_ATTN_PRESENT_KEY, KN_ATTN_PRESENT_VALUE, KN_ATTN_QK_OUTPUT };

typedef struct kn_attn_geom {
  int rank;                 /* of Q, K and V: 3 (heads folded into the hidden dim) or 4 */
  kn_dtype dtype;           /* of Q, K, V, the past and the outputs */
  int64_t batch;            /* dim 0 of Q (times N when batch_sym) */
  bool batch_sym;
  int64_t q_heads, kv_heads; /* q_heads % kv_heads == 0 */
  int64_t q_len, kv_len, past_len, total_len; /* total = past + kv */
  int64_t head_size, v_head_size;
  bool has_past, has_mask, has_nonpad;
  bool mask_bool;           /* else the mask is an additive float of dtype */
  int64_t mask_len;         /* last dim of the mask (<= total_len; padded with -inf) */
  bool is_causal;
  double scale;             /* the attribute, else 1/sqrt(head_size) */
  double softcap;           /* 0 = none */
  int qk_mode;              /* qk_matmul_output_mode, 0..3 */
  kn_dtype softmax_dtype;   /* softmax_precision, else dtype */
} kn_attn_geom;

typedef struct kn_rope_geom {
  int rank;        /* of X: 3 ([B, S, heads*head]) or 4 ([B, heads, S, head]) */
  int64_t heads, seq_len, head_size;
  int64_t rot_dim; /* rotary_embedding_dim, else head_size; even, <= head_size */
  bool interleaved;
  bool has_pos;    /* position_ids given: caches are [max_pos, rot/2], else [B, S, rot/2] */
} kn_rope_geom;

typedef struct kn_rms_geom {
  int axis;          /* first normalised axis, in [0, rank) */
  kn_dtype stash;    /* stash_type: the precision of the normalisation */
  kn_dtype out_type; /* Y's type: the scale's */
} kn_rms_geom;

typedef struct kn_ccs_geom { /* CausalConvWithState: depthwise causal conv1d */
  int64_t batch;
  bool batch_sym;
  int64_t channels, len, kernel;
  bool has_bias, has_past;
  bool silu; /* activation silu / swish */
} kn_ccs_geom;

typedef struct kn_linattn_geom { /* LinearAttention: 3-D packed [B, T, heads*size] */
  kn_dtype dtype;       /* of query, key, value, decay, beta and the output */
  kn_dtype state_type;  /* present_state: past_state's type, else dtype */
  int64_t batch;
  bool batch_sym;
  int64_t steps;        /* T, the recurrence length (1 .. KN_LINATTN_MAX_STEPS) */
  int64_t q_heads, kv_heads, key_size, value_size;
  bool gated, delta;    /* update_rule: linear, gated, delta, gated_delta */
  bool has_past;
  int64_t decay_size;   /* last dim of decay / kv_heads: key_size or 1 */
  int64_t beta_heads;   /* last dim of beta: kv_heads or 1 */
  double scale;         /* the attribute, 0 = 1/sqrt(key_size) */
} kn_linattn_geom;
/* The decomposition unrolls the recurrence, one group of nodes per step. */
#define KN_LINATTN_MAX_STEPS 128

/* Attention and FlexAttention (domain ai.onnx.preview: 4-D Q, K, V only,
 * subgraph modifiers refused, softmax in float32 for 16-bit inputs). */
int kn_attn_resolve(const kn_graph *g, const kn_node *n, kn_attn_geom *a, kn_diag *d);
int kn_rope_resolve(const kn_graph *g, const kn_node *n, kn_rope_geom *r, kn_diag *d);
int kn_rms_resolve(const kn_graph *g, const kn_node *n, kn_rms_geom *r, kn_diag *d);
int kn_ccs_resolve(const kn_graph *g, const kn_node *n, kn_ccs_geom *r, kn_diag *d);
int kn_linattn_resolve(const kn_graph *g, const kn_node *n, kn_linattn_geom *r, kn_diag *d);

#endif
