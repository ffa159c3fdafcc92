/* cost_model.c — gradient-boosted regression trees: the learned cost model.
 *
 * Trained on (features of a candidate's loop IR, target) pairs, where the
 * tuner's target is log(default time / measured time) of the candidate's
 * task, so higher is better and tasks share one scale. Squared loss: each
 * tree fits the residuals of the trees before it, scaled by the learning
 * rate. Trees split on quantile bins of each feature (histograms: a node
 * costs O(rows x features)), each tree sees a seeded sample of the rows and
 * the features, leaves hold at least `min_leaf` rows. Training refits every
 * tree from all samples, so the model is a pure function of the samples,
 * their order and the seed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autotune/search.h"

#define MAX_BINS 64

kn_at_gbt_params kn_at_gbt_defaults(void) {
  return (kn_at_gbt_params){.rounds = 60, .max_depth = 4, .min_leaf = 3, .learning_rate = 0.2,
                            .row_sample = 0.8, .feature_sample = 0.8, .bins = 32, .seed = 1};
}

void kn_at_cost_model_init(kn_at_cost_model *m, int n_features, const kn_at_gbt_params *p) {
  memset(m, 0, sizeof *m);
  m->params = p ? *p : kn_at_gbt_defaults();
  if (m->params.bins < 2) m->params.bins = 2;
  if (m->params.bins > MAX_BINS) m->params.bins = MAX_BINS;
  if (m->params.min_leaf < 1) m->params.min_leaf = 1;
  if (!m->params.seed) m->params.seed = 1;
  m->n_features = n_features;
}

void kn_at_cost_model_free(kn_at_cost_model *m) {
  free(m->tree_root);
  free(m->nodes);
  free(m->x);
  free(m->y);
  memset(m, 0, sizeof *m);
}

static void *grow(void *p, int *cap, int need, size_t elem) {
  if (need <= *cap) return p;
  int c = *cap ? *cap : 64;
  while (c < need) c *= 2;
  void *q = realloc(p, elem * (size_t)c);
  KN_ASSERT(q, "out of memory");
  *cap = c;
  return q;
}

void kn_at_cost_model_add(kn_at_cost_model *m, const float *x, double y) {
  if (m->n == m->cap) {
    int cap = m->cap ? 2 * m->cap : 64;
    float *nx = realloc(m->x, sizeof(float) * (size_t)m->n_features * (size_t)cap);
    KN_ASSERT(nx, "out of memory");
    m->x = nx;
    double *ny = realloc(m->y, sizeof(double) * (size_t)cap);
    KN_ASSERT(ny, "out of memory");
    m->y = ny;
    m->cap = cap;
  }
  memcpy(&m->x[(size_t)m->n * m->n_features], x, sizeof(float) * (size_t)m->n_features);
  m->y[m->n++] = y;
}

static uint64_t rng_next(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

static double rng_unit(uint64_t *x) { return (double)(rng_next(x) >> 11) * (1.0 / 9007199254740992.0); }

typedef struct trainer {
  kn_at_cost_model *m;
  int n, F;
  unsigned char *bin;  /* n x F */
  float *thresholds;   /* F x MAX_BINS */
  int *n_thresholds;   /* F */
  double *residual;
  bool *use_feature;
  uint64_t rng;
} trainer;

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

/* Quantile thresholds of each feature, and each sample's bin. */
static void make_bins(trainer *T) {
  int n = T->n, F = T->F, bins = T->m->params.bins;
  float *col = malloc(sizeof(float) * (size_t)n), *uniq = malloc(sizeof(float) * (size_t)n);
  for (int f = 0; f < F; f++) {
    for (int i = 0; i < n; i++) col[i] = T->m->x[(size_t)i * F + f];
    qsort(col, (size_t)n, sizeof(float), cmp_float);
    int u = 0;
    for (int i = 0; i < n; i++)
      if (u == 0 || col[i] != uniq[u - 1]) uniq[u++] = col[i];
    float *th = &T->thresholds[f * MAX_BINS];
    int nt = 0;
    if (u <= bins) {
      for (int k = 0; k + 1 < u; k++) th[nt++] = 0.5f * (uniq[k] + uniq[k + 1]);
    } else {
      for (int q = 1; q < bins; q++) {
        int k = (int)((double)q * u / bins);
        if (k >= u - 1) k = u - 2;
        float v = 0.5f * (uniq[k] + uniq[k + 1]);
        if (nt == 0 || v > th[nt - 1]) th[nt++] = v;
      }
    }
    T->n_thresholds[f] = nt;
    for (int i = 0; i < n; i++) {
      float v = T->m->x[(size_t)i * F + f];
      int b = 0;
      while (b < nt && v > th[b]) b++;
      T->bin[(size_t)i * F + f] = (unsigned char)b;
    }
  }
  free(col);
  free(uniq);
}

static int new_node(kn_at_cost_model *m) {
  m->nodes = grow(m->nodes, &m->cap_nodes, m->n_nodes + 1, sizeof(kn_at_gbt_node));
  m->nodes[m->n_nodes] = (kn_at_gbt_node){.feature = -1};
  return m->n_nodes++;
}

/* Builds the subtree over rows[0..n) and returns its node. */
static int build(trainer *T, int *rows, int n, int depth) {
  kn_at_cost_model *m = T->m;
  const kn_at_gbt_params *p = &m->params;
  double sum = 0;
  for (int i = 0; i < n; i++) sum += T->residual[rows[i]];
  int node = new_node(m);
  m->nodes[node].value = (float)(n ? p->learning_rate * sum / n : 0);
  if (depth >= p->max_depth || n < 2 * p->min_leaf) return node;
  double best_gain = 1e-12, parent = n ? sum * sum / n : 0;
  int best_f = -1, best_b = -1;
  double hs[MAX_BINS + 1];
  int hc[MAX_BINS + 1];
  for (int f = 0; f < T->F; f++) {
    int nt = T->n_thresholds[f];
    if (!T->use_feature[f] || nt == 0) continue;
    memset(hs, 0, sizeof(double) * (size_t)(nt + 1));
    memset(hc, 0, sizeof(int) * (size_t)(nt + 1));
    for (int i = 0; i < n; i++) {
      int b = T->bin[(size_t)rows[i] * T->F + f];
      hs[b] += T->residual[rows[i]];
      hc[b]++;
    }
    double sl = 0;
    int cl = 0;
    for (int b = 0; b < nt; b++) {
      sl += hs[b];
      cl += hc[b];
      int cr = n - cl;
      if (cl < p->min_leaf || cr < p->min_leaf) continue;
      double sr = sum - sl, gain = sl * sl / cl + sr * sr / cr - parent;
      if (gain > best_gain) {
        best_gain = gain;
        best_f = f;
        best_b = b;
      }
    }
  }
  if (best_f < 0) return node;
  /* partition rows: bin <= best_b to the left */
  int l = 0;
  for (int i = 0; i < n; i++)
    if (T->bin[(size_t)rows[i] * T->F + best_f] <= best_b) {
      int tmp = rows[l];
      rows[l++] = rows[i];
      rows[i] = tmp;
    }
  int left = build(T, rows, l, depth + 1), right = build(T, rows + l, n - l, depth + 1);
  m->nodes[node].feature = best_f;
  m->nodes[node].threshold = T->thresholds[best_f * MAX_BINS + best_b];
  m->nodes[node].left = left;
  m->nodes[node].right = right;
  return node;
}

static double tree_predict(const kn_at_cost_model *m, int node, const float *x) {
  while (m->nodes[node].feature >= 0)
    node = x[m->nodes[node].feature] <= m->nodes[node].threshold ? m->nodes[node].left : m->nodes[node].right;
  return m->nodes[node].value;
}

void kn_at_cost_model_train(kn_at_cost_model *m) {
  m->n_trees = 0;
  m->n_nodes = 0;
  m->trained = true;
  int n = m->n, F = m->n_features;
  m->base = 0;
  for (int i = 0; i < n; i++) m->base += m->y[i];
  if (n) m->base /= n;
  if (n < 2 || m->params.rounds < 1) return;
  trainer T = {.m = m, .n = n, .F = F, .rng = m->params.seed};
  T.bin = malloc((size_t)n * (size_t)F);
  T.thresholds = malloc(sizeof(float) * (size_t)F * MAX_BINS);
  T.n_thresholds = malloc(sizeof(int) * (size_t)F);
  T.residual = malloc(sizeof(double) * (size_t)n);
  T.use_feature = malloc(sizeof(bool) * (size_t)F);
  double *pred = malloc(sizeof(double) * (size_t)n);
  int *rows = malloc(sizeof(int) * (size_t)n);
  KN_ASSERT(T.bin && T.thresholds && T.n_thresholds && T.residual && T.use_feature && pred && rows, "out of memory");
  make_bins(&T);
  for (int i = 0; i < n; i++) pred[i] = m->base;
  free(m->tree_root);
  m->tree_root = malloc(sizeof(int) * (size_t)m->params.rounds);
  for (int r = 0; r < m->params.rounds; r++) {
    for (int i = 0; i < n; i++) T.residual[i] = m->y[i] - pred[i];
    int nr = 0;
    for (int i = 0; i < n; i++)
      if (rng_unit(&T.rng) < m->params.row_sample) rows[nr++] = i;
    if (nr < 2) {
      nr = n;
      for (int i = 0; i < n; i++) rows[i] = i;
    }
    int nf = 0;
    for (int f = 0; f < F; f++) nf += T.use_feature[f] = rng_unit(&T.rng) < m->params.feature_sample;
    if (!nf)
      for (int f = 0; f < F; f++) T.use_feature[f] = true;
    int root = build(&T, rows, nr, 0);
    m->tree_root[m->n_trees++] = root;
    for (int i = 0; i < n; i++) pred[i] += tree_predict(m, root, &m->x[(size_t)i * F]);
  }
  free(T.bin);
  free(T.thresholds);
  free(T.n_thresholds);
  free(T.residual);
  free(T.use_feature);
  free(pred);
  free(rows);
}

double kn_at_cost_model_predict(const kn_at_cost_model *m, const float *x) {
  double v = m->base;
  for (int t = 0; t < m->n_trees; t++) v += tree_predict(m, m->tree_root[t], x);
  return v;
}
