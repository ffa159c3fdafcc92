/* pass_decompose_ml.c — the larger composites of the misc family as
 * primitive ops (rewrites of ir/passes/pass_decompose.c, builder in rewrite.h):
 *
 *   TfIdfVectorizer   X [L] or [B, L] of int32/int64 tokens. For each pool
 *                     n-gram g (size n within [min_gram_length,
 *                     max_gram_length]) and skip distance d (1 for unigrams,
 *                     1..max_skip_count+1 otherwise), the matches are
 *                     AND_j Equal(X[:, j*d : j*d + L-(n-1)*d], g_j), concatenated
 *                     over d and summed by one ReduceSum; the counts are concatenated in
 *                     ngram_indexes order and weighted per `mode`
 *                     (TF / IDF / TFIDF). pool_strings are not supported.
 *   TreeEnsemble      X [B, F]: every node's comparison is one op on the
 *                     Slice of its feature (IsNaN ORed in where missing values
 *                     track true); a leaf is reached where the AND of its path
 *                     holds, and adds Where(path, weight, 0) to its target's
 *                     column (aggregate SUM or AVERAGE, post_transform NONE).
 *   MelWeightMatrix   a constant computed here once every input is constant
 *                     (the output shape depends on their values); until then
 *                     the shape rule names the input to bind.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/passes/decompose.h"
#include "ir/ref/ref_eval.h"

/* x[:, start:start+len] of a rank-2 value. */
static int slice_cols(kn_rw *c, int x, int64_t start, int64_t len) {
  int64_t s[1] = {start}, e[1] = {start + len}, ax[1] = {1};
  int in[4] = {x, kn_rw_ints(c, s, 1), kn_rw_ints(c, e, 1), kn_rw_ints(c, ax, 1)};
  return kn_rw_op(c, KN_OP_SLICE, in, 4);
}

static int add_or_first(kn_rw *c, int acc, int v) { return acc < 0 ? v : kn_rw_bin(c, KN_OP_ADD, acc, v); }

/* ---- TfIdfVectorizer ---- */

/* Count column [B, 1] (float32) of n-gram `gram` (n tokens) in x2 [B, L]. */
static int ngram_count(kn_rw *c, int x2, kn_dtype t, int64_t len, const int64_t *gram, int n, int max_skip) {
  int found[65], n_found = 0; /* matches per skip distance, summed by one ReduceSum */
  int last_d = n == 1 ? 1 : max_skip + 1;
  for (int d = 1; d <= last_d; d++) {
    int64_t width = len - (int64_t)(n - 1) * d;
    if (width < 1) break;
    int match = -1;
    for (int j = 0; j < n; j++) {
      int eq = kn_rw_bin(c, KN_OP_EQUAL, slice_cols(c, x2, (int64_t)j * d, width), kn_rw_scalar(c, t, (double)gram[j]));
      match = match < 0 ? eq : kn_rw_bin(c, KN_OP_AND, match, eq);
    }
    found[n_found++] = kn_rw_cast(c, match, KN_DT_F32);
  }
  if (n_found == 0) return -1;
  int all = found[0];
  if (n_found > 1) {
    all = kn_rw_op(c, KN_OP_CONCAT, found, n_found);
    kn_rw_attr_int(c, "axis", 1);
  }
  int64_t axis[1] = {1};
  return kn_rw_reduce(c, KN_OP_REDUCE_SUM, all, axis, 1, true);
}

static int tfidf(kn_rw *c) {
  const kn_node *n = &c->g->nodes[c->node];
  int x = kn_rw_in(c, 0);
  const kn_value *xv = kn_rw_val(c, x);
  kn_dtype t = xv->dtype;
  if (t != KN_DT_I32 && t != KN_DT_I64) return kn_rw_fail(c, "input X must be int32 or int64 (strings are not supported)");
  if (xv->shape.rank < 1 || xv->shape.rank > 2) return kn_rw_fail(c, "input X must have shape [C] or [B, C]");
  int rank = xv->shape.rank;
  int64_t len = xv->shape.dim[rank - 1];
  if (xv->shape.batch_mask & (1u << (rank - 1))) return kn_rw_fail(c, "the sequence dim is the batch dim");
  int n_counts = 0, n_pool = 0, n_index = 0, n_weights = 0;
  const int64_t *counts = kn_node_attr_ints(n, "ngram_counts", &n_counts);
  const int64_t *pool = kn_node_attr_ints(n, "pool_int64s", &n_pool);
  const int64_t *indexes = kn_node_attr_ints(n, "ngram_indexes", &n_index);
  const kn_attr *wa = kn_node_attr(n, "weights");
  if (wa && wa->kind == KN_ATTR_FLOATS) n_weights = wa->n;
  if (kn_node_attr(n, "pool_strings")) return kn_rw_fail(c, "attribute 'pool_strings' is not supported");
  if (!pool || !counts || !indexes) return kn_rw_fail(c, "attributes pool_int64s, ngram_counts, ngram_indexes are required");
  int64_t min_n = kn_node_attr_int(n, "min_gram_length", 1), max_n = kn_node_attr_int(n, "max_gram_length", 1);
  int64_t max_skip = kn_node_attr_int(n, "max_skip_count", 0);
  const char *mode = kn_node_attr_string(n, "mode", "TF");
  if (strcmp(mode, "TF") && strcmp(mode, "IDF") && strcmp(mode, "TFIDF"))
    return kn_rw_fail(c, "attribute 'mode' = '%s' is unknown", mode);
  if (min_n < 1 || max_n < min_n || max_skip < 0 || max_skip > 64)
    return kn_rw_fail(c, "attributes min_gram_length/max_gram_length/max_skip_count are out of range");
  int64_t out_size = 0;
  for (int i = 0; i < n_index; i++) {
    if (indexes[i] < 0 || indexes[i] > 65536) return kn_rw_fail(c, "attribute 'ngram_indexes' is out of range");
    if (indexes[i] + 1 > out_size) out_size = indexes[i] + 1;
  }
  if (n_weights && n_weights != out_size)
    return kn_rw_fail(c, "attribute 'weights' has %d entries, expected %lld", n_weights, (long long)out_size);
  if (len < 1) return kn_rw_fail(c, "input X has an empty sequence dim");

  int x2 = x;
  if (rank == 1) {
    int64_t row[2] = {1, len};
    x2 = kn_rw_reshape(c, x, row, 2);
  }
  int *column = calloc((size_t)out_size + 1, sizeof(int));
  KN_ASSERT(column, "out of memory");
  for (int64_t o = 0; o < out_size; o++) column[o] = -1;
  int id = 0, rc = 0;
  for (int i = 0; i < n_counts && rc == 0; i++) {
    int64_t size = i + 1, begin = counts[i], end = i + 1 < n_counts ? counts[i + 1] : n_pool;
    if (begin < 0 || end > n_pool || end < begin || (end - begin) % size != 0) {
      rc = kn_rw_fail(c, "attribute 'ngram_counts' does not match pool_int64s");
      break;
    }
    for (int64_t p = begin; p < end; p += size, id++) {
      if (size < min_n || size > max_n) continue;
      if (id >= n_index) {
        rc = kn_rw_fail(c, "attribute 'ngram_indexes' has fewer entries than the pool has n-grams");
        break;
      }
      int cnt = ngram_count(c, x2, t, len, pool + p, (int)size, (int)max_skip);
      if (cnt >= 0) column[indexes[id]] = add_or_first(c, column[indexes[id]], cnt);
    }
  }
  if (rc < 0) {
    free(column);
    return -1;
  }
  /* zero columns: 0 * (a token column), which has the right shape */
  int zero = -1, *cols = malloc(sizeof(int) * ((size_t)out_size + 1));
  KN_ASSERT(cols, "out of memory");
  for (int64_t o = 0; o < out_size; o++) {
    if (column[o] < 0 && zero < 0)
      zero = kn_rw_bin(c, KN_OP_MUL, kn_rw_cast(c, slice_cols(c, x2, 0, 1), KN_DT_F32), kn_rw_scalar(c, KN_DT_F32, 0));
    cols[o] = column[o] >= 0 ? column[o] : zero;
  }
  int y = cols[0];
  if (out_size > 1) {
    y = kn_rw_op(c, KN_OP_CONCAT, cols, (int)out_size);
    kn_rw_attr_int(c, "axis", 1);
  }
  free(column);
  free(cols);
  int weights = -1;
  if (n_weights) {
    kn_shape ws = {.rank = 1, .dim = {out_size}};
    weights = kn_rw_const(c, KN_DT_F32, &ws, wa->floats);
  }
  if (strcmp(mode, "IDF") == 0) {
    int seen = kn_rw_bin(c, KN_OP_GREATER, y, kn_rw_scalar(c, KN_DT_F32, 0));
    if (weights >= 0) {
      int in[3] = {seen, weights, kn_rw_scalar(c, KN_DT_F32, 0)};
      y = kn_rw_op(c, KN_OP_WHERE, in, 3);
    } else {
      y = kn_rw_cast(c, seen, KN_DT_F32);
    }
  } else if (strcmp(mode, "TFIDF") == 0 && weights >= 0) {
    y = kn_rw_bin(c, KN_OP_MUL, y, weights);
  }
  if (rank == 1) {
    int64_t flat[1] = {out_size};
    y = kn_rw_reshape(c, y, flat, 1);
  }
  kn_rw_output(c, 0, y);
  return 0;
}

/* ---- TreeEnsemble ---- */

typedef struct tree_attrs {
  int n_nodes, n_leaves;
  const int64_t *feature, *true_id, *false_id, *true_leaf, *false_leaf, *missing_true, *leaf_target;
  kn_ref_tensor splits, modes, weights, members;
  int64_t member_pos; /* next unread membership value */
} tree_attrs;

/* A TENSOR attribute's constant as a reference tensor (data NULL if absent). */
static kn_ref_tensor tensor_attr(kn_rw *c, const char *name) {
  const kn_attr *a = kn_node_attr(&c->g->nodes[c->node], name);
  kn_ref_tensor t = {0};
  if (a && a->kind == KN_ATTR_TENSOR && a->value >= 0) {
    const kn_value *v = kn_rw_val(c, a->value);
    t = (kn_ref_tensor){v->dtype, v->shape, v->data, NULL};
  }
  return t;
}

/* Comparison of tree node k on x2 [B, F] as a bool [B, 1]. */
static int node_cond(kn_rw *c, tree_attrs *A, int x2, kn_dtype t, int64_t n_features, int k) {
  int64_t f = A->feature[k];
  if (f < 0 || f >= n_features) return kn_rw_fail(c, "nodes_featureids[%d] = %lld is out of range", k, (long long)f);
  int xf = slice_cols(c, x2, f, 1);
  int64_t mode = kn_ref_load_int(A->modes.dtype, A->modes.data, k);
  double split = kn_ref_load(A->splits.dtype, A->splits.data, k);
  static const kn_op cmp[] = {KN_OP_LESS_OR_EQUAL, KN_OP_LESS, KN_OP_GREATER_OR_EQUAL, KN_OP_GREATER, KN_OP_EQUAL,
                              KN_OP_EQUAL};
  int cond;
  if (mode >= 0 && mode <= 5) {
    cond = kn_rw_bin(c, cmp[mode], xf, kn_rw_scalar(c, t, split));
    if (mode == 5) cond = kn_rw_un(c, KN_OP_NOT, cond);
  } else if (mode == 6) { /* member of the next NaN-terminated run of membership_values */
    int64_t total = A->members.data ? kn_ref_numel(&A->members.shape) : 0;
    cond = -1;
    for (; A->member_pos < total; A->member_pos++) {
      double m = kn_ref_load(A->members.dtype, A->members.data, A->member_pos);
      if (isnan(m)) break;
      int eq = kn_rw_bin(c, KN_OP_EQUAL, xf, kn_rw_scalar(c, t, m));
      cond = cond < 0 ? eq : kn_rw_bin(c, KN_OP_OR, cond, eq);
    }
    if (A->member_pos >= total) return kn_rw_fail(c, "attribute 'membership_values' ends before node %d's set", k);
    A->member_pos++;
    if (cond < 0) cond = kn_rw_un(c, KN_OP_NOT, kn_rw_bin(c, KN_OP_EQUAL, xf, xf)); /* empty set: NaN only */
  } else {
    return kn_rw_fail(c, "nodes_modes[%d] = %lld is unknown", k, (long long)mode);
  }
  if (A->missing_true && A->missing_true[k]) cond = kn_rw_bin(c, KN_OP_OR, cond, kn_rw_un(c, KN_OP_IS_NAN, xf));
  return cond;
}

/* Adds the leaves under (id, is_leaf), reached where `path` holds (-1:
 * always), to their targets' columns. */
static int tree_walk(kn_rw *c, tree_attrs *A, int x2, kn_dtype t, int64_t n_features, int64_t n_targets, int *cols,
                     int64_t id, bool is_leaf, int path, int depth) {
  if (depth > 64) return kn_rw_fail(c, "tree is deeper than 64 levels or has a cycle");
  if (is_leaf) {
    if (id < 0 || id >= A->n_leaves) return kn_rw_fail(c, "leaf %lld is out of range", (long long)id);
    int64_t target = A->leaf_target[id];
    if (target < 0 || target >= n_targets) return kn_rw_fail(c, "leaf_targetids[%lld] is out of range", (long long)id);
    double w = kn_ref_load(A->weights.dtype, A->weights.data, id);
    int v;
    if (path < 0) {
      v = kn_rw_scalar(c, t, w);
    } else {
      int in[3] = {path, kn_rw_scalar(c, t, w), kn_rw_scalar(c, t, 0)};
      v = kn_rw_op(c, KN_OP_WHERE, in, 3);
    }
    cols[target] = add_or_first(c, cols[target], v);
    return 0;
  }
  if (id < 0 || id >= A->n_nodes) return kn_rw_fail(c, "node %lld is out of range", (long long)id);
  int cond = node_cond(c, A, x2, t, n_features, (int)id);
  if (cond < 0) return -1;
  int not_cond = kn_rw_un(c, KN_OP_NOT, cond);
  int tp = path < 0 ? cond : kn_rw_bin(c, KN_OP_AND, path, cond);
  int fp = path < 0 ? not_cond : kn_rw_bin(c, KN_OP_AND, path, not_cond);
  if (tree_walk(c, A, x2, t, n_features, n_targets, cols, A->true_id[id], A->true_leaf[id] != 0, tp, depth + 1) < 0)
    return -1;
  return tree_walk(c, A, x2, t, n_features, n_targets, cols, A->false_id[id], A->false_leaf[id] != 0, fp, depth + 1);
}

static int tree_ensemble(kn_rw *c) {
  const kn_node *n = &c->g->nodes[c->node];
  int x = kn_rw_in(c, 0);
  const kn_value *xv = kn_rw_val(c, x);
  kn_dtype t = xv->dtype;
  if (!kn_dtype_is_float(t)) return kn_rw_fail(c, "input X must be floating point");
  if (xv->shape.rank != 2 || (xv->shape.batch_mask & 2u)) return kn_rw_fail(c, "input X must have shape [N, F]");
  int64_t aggregate = kn_node_attr_int(n, "aggregate_function", 1);
  if (aggregate != 0 && aggregate != 1)
    return kn_rw_fail(c, "attribute 'aggregate_function' = %lld is not supported (SUM and AVERAGE are)",
                      (long long)aggregate);
  if (kn_node_attr_int(n, "post_transform", 0) != 0)
    return kn_rw_fail(c, "attribute 'post_transform' is not supported (only NONE)");
  int64_t n_targets = kn_node_attr_int(n, "n_targets", 0);
  if (n_targets < 1 || n_targets > 4096) return kn_rw_fail(c, "attribute 'n_targets' is missing or out of range");
  tree_attrs A = {0};
  int counts[7], n_roots = 0;
  A.feature = kn_node_attr_ints(n, "nodes_featureids", &counts[0]);
  A.true_id = kn_node_attr_ints(n, "nodes_truenodeids", &counts[1]);
  A.false_id = kn_node_attr_ints(n, "nodes_falsenodeids", &counts[2]);
  A.true_leaf = kn_node_attr_ints(n, "nodes_trueleafs", &counts[3]);
  A.false_leaf = kn_node_attr_ints(n, "nodes_falseleafs", &counts[4]);
  A.leaf_target = kn_node_attr_ints(n, "leaf_targetids", &counts[5]);
  A.missing_true = kn_node_attr_ints(n, "nodes_missing_value_tracks_true", &counts[6]);
  const int64_t *roots = kn_node_attr_ints(n, "tree_roots", &n_roots);
  A.splits = tensor_attr(c, "nodes_splits");
  A.modes = tensor_attr(c, "nodes_modes");
  A.weights = tensor_attr(c, "leaf_weights");
  A.members = tensor_attr(c, "membership_values");
  A.n_nodes = counts[0], A.n_leaves = counts[5];
  if (!A.feature || !A.true_id || !A.false_id || !A.true_leaf || !A.false_leaf || !A.leaf_target || !roots ||
      !A.splits.data || !A.modes.data || !A.weights.data)
    return kn_rw_fail(c, "a required attribute is missing");
  for (int k = 1; k < 5; k++)
    if (counts[k] != A.n_nodes) return kn_rw_fail(c, "the nodes_* attributes differ in length");
  if (kn_ref_numel(&A.splits.shape) != A.n_nodes || kn_ref_numel(&A.modes.shape) != A.n_nodes ||
      (A.missing_true && counts[6] != A.n_nodes))
    return kn_rw_fail(c, "the nodes_* attributes differ in length");
  if (kn_ref_numel(&A.weights.shape) != A.n_leaves) return kn_rw_fail(c, "leaf_weights and leaf_targetids differ in length");

  int *cols = malloc(sizeof(int) * (size_t)n_targets);
  KN_ASSERT(cols, "out of memory");
  for (int64_t k = 0; k < n_targets; k++) cols[k] = -1;
  int rc = 0;
  for (int r = 0; r < n_roots && rc == 0; r++) {
    int64_t id = roots[r];
    if (id < 0 || id >= A.n_nodes) {
      rc = kn_rw_fail(c, "tree_roots[%d] is out of range", r);
      break;
    }
    bool leaf = A.true_leaf[id] && A.false_leaf[id] && A.true_id[id] == A.false_id[id];
    rc = tree_walk(c, &A, x, t, xv->shape.dim[1], n_targets, cols, id, leaf, -1, 0);
  }
  if (rc == 0) {
    /* every column as [N, 1]: 0 where no leaf of a target, or a scalar leaf */
    int zero_col = kn_rw_bin(c, KN_OP_MUL, kn_rw_cast(c, kn_rw_bin(c, KN_OP_EQUAL, slice_cols(c, x, 0, 1),
                                                                   slice_cols(c, x, 0, 1)), t),
                             kn_rw_scalar(c, t, 0));
    for (int64_t k = 0; k < n_targets; k++) {
      cols[k] = cols[k] < 0 ? zero_col : kn_rw_bin(c, KN_OP_ADD, cols[k], zero_col);
      if (aggregate == 0 && n_roots > 0) cols[k] = kn_rw_bin(c, KN_OP_DIV, cols[k], kn_rw_scalar(c, t, n_roots));
    }
    int y = cols[0];
    if (n_targets > 1) {
      y = kn_rw_op(c, KN_OP_CONCAT, cols, (int)n_targets);
      kn_rw_attr_int(c, "axis", 1);
    }
    kn_rw_output(c, 0, y);
  }
  free(cols);
  return rc;
}

/* ---- MelWeightMatrix ---- */

bool kn_decompose_mel_ready(const kn_graph *g, const kn_node *n) {
  for (int k = 0; k < 5; k++)
    if (k >= n->n_in || n->in[k] < 0 || !g->values[n->in[k]].data) return false;
  return n->n_in == 5;
}

static int mel_weight_matrix(kn_rw *c) {
  double in[5];
  for (int k = 0; k < 5; k++) {
    const kn_value *v = kn_rw_val(c, kn_rw_in(c, k));
    if (kn_shape_numel_max(&v->shape, 1) != 1) return kn_rw_fail(c, "input %d must be a scalar", k);
    if ((k < 3) != (kn_dtype_is_int(v->dtype) != 0)) return kn_rw_fail(c, "input %d has the wrong dtype", k);
    in[k] = kn_ref_load(v->dtype, v->data, 0);
  }
  int64_t bins = (int64_t)in[0], dft = (int64_t)in[1], rate = (int64_t)in[2];
  if (bins < 1 || bins > 4096 || dft < 1 || dft > (1 << 20) || rate < 1)
    return kn_rw_fail(c, "num_mel_bins, dft_length and sample_rate must be positive (and not huge)");
  kn_dtype out_t = kn_dtype_from_onnx((int)kn_node_attr_int(&c->g->nodes[c->node], "output_datatype", 1));
  if (!kn_dtype_is_float(out_t)) return kn_rw_fail(c, "attribute 'output_datatype' is not a supported float type");
  int64_t spec = dft / 2 + 1;
  /* the mel scale ends in the inputs' float32, as the ONNX reference */
  float lo_mel = 2595.0f * log10f(1.0f + (float)in[3] / 700.0f);
  float hi_mel = 2595.0f * log10f(1.0f + (float)in[4] / 700.0f);
  double step = (double)((hi_mel - lo_mel) / (float)(bins + 2));
  int64_t *freq = malloc(sizeof(int64_t) * (size_t)(bins + 2));
  double *w = calloc((size_t)(spec * bins), sizeof(double));
  KN_ASSERT(freq && w, "out of memory");
  for (int64_t i = 0; i < bins + 2; i++) {
    double hz = 700.0 * (pow(10.0, ((double)i * step + (double)lo_mel) / 2595.0) - 1.0);
    freq[i] = (int64_t)floor((double)(dft + 1) * hz / (double)rate);
  }
  int rc = 0;
  for (int64_t i = 0; i < bins && rc == 0; i++) {
    int64_t lo = freq[i], mid = freq[i + 1], hi = freq[i + 2];
    if (lo < 0 || hi >= spec || mid < lo || hi < mid) {
      rc = kn_rw_fail(c, "the mel band edges fall outside the %lld spectrogram bins", (long long)spec);
      break;
    }
    if (mid == lo) w[mid * bins + i] = 1;
    else
      for (int64_t j = lo; j <= mid; j++) w[j * bins + i] = (double)(j - lo) / (double)(mid - lo);
    for (int64_t j = mid; j < hi; j++) w[j * bins + i] = (double)(hi - j) / (double)(hi - mid);
  }
  if (rc == 0) {
    kn_shape s = {.rank = 2, .dim = {spec, bins}};
    int k = kn_rw_const(c, out_t, &s, NULL);
    for (int64_t i = 0; i < spec * bins; i++) kn_ref_store(out_t, c->g->values[k].data, i, w[i]);
    kn_rw_output(c, 0, k);
  }
  free(freq);
  free(w);
  return rc;
}

int kn_decompose_ml(kn_rw *c) {
  switch (c->g->nodes[c->node].op) {
  case KN_OP_TFIDF_VECTORIZER: return tfidf(c);
  case KN_OP_ML_TREE_ENSEMBLE: return tree_ensemble(c);
  case KN_OP_MEL_WEIGHT_MATRIX: return mel_weight_matrix(c);
  default: return 1;
  }
}
