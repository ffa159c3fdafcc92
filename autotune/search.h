/* search.h — the learned part of the autotuner: features of a candidate's
 * lowered loop IR (features.c), candidates lowered in child processes to get
 * them (featurize.c), a gradient-boosted regression-tree cost model
 * (cost_model.c) and the evolutionary search strategy (evolve.c).
 *
 * Invariants: features are a pure function of the finalized loop IR (and the
 * thread count they are computed for); the cost model and the search are
 * deterministic for a seed and the same observations. */
#ifndef KN_AT_SEARCH_H
#define KN_AT_SEARCH_H

#include "autotune/autotune.h"

/* ---- features (features.c) ---- */
enum {
  KN_AT_LEVELS = 4, /* tile levels described, innermost first */
  KN_AT_N_FEATURES = 28 + 5 * KN_AT_LEVELS
};

/* Names of the features, for dumps and tests. */
const char *kn_at_feature_name(int i);

/* Fills f[KN_AT_N_FEATURES] from the finalized loop IR of a kernel: flops,
 * loads / stores, vector widths, accumulators, the parallel loop's extent
 * and balance on `threads`, code size, and for the innermost loop levels of
 * the heaviest store: extent, bytes touched vs L1 / L2, arithmetic
 * intensity. Counts at batch 1. */
void kn_at_features_of_kernel(const kn_kernel *k, int threads, float *f);

/* ---- featurize candidates (featurize.c) ---- */
/* Lowers each of scheds[0..n) for group grp of g in child processes
 * (`workers` at once; the parent's graph is never modified) and writes its
 * features to feats[i * KN_AT_N_FEATURES ...]; ok[i] tells whether the
 * candidate lowered (a schedule that fails to lower is never worth a
 * build). *stop (may be NULL) ends it early. Returns 0, or -1 when no child
 * could run (then ok[] is false). */
int kn_at_featurize(const kn_graph *g, const kn_group *grp, const kn_target *t, const kn_schedule *scheds, int n,
                    int workers, int threads, volatile sig_atomic_t *stop, float *feats, bool *ok);

/* ---- cost model (cost_model.c) ---- */
typedef struct kn_at_gbt_params {
  int rounds;          /* trees (default 60) */
  int max_depth;       /* default 4 */
  int min_leaf;        /* samples per leaf (default 3) */
  double learning_rate; /* default 0.2 */
  double row_sample;   /* fraction of rows per tree (default 0.8) */
  double feature_sample; /* fraction of features per tree (default 0.8) */
  int bins;            /* quantile bins per feature (default 32, at most 64) */
  uint64_t seed;
} kn_at_gbt_params;

typedef struct kn_at_gbt_node {
  int feature; /* -1: leaf */
  float threshold; /* go left when x[feature] <= threshold */
  int left, right;
  float value;     /* leaf */
} kn_at_gbt_node;

typedef struct kn_at_cost_model {
  kn_at_gbt_params params;
  int n_features;
  double base;           /* mean target */
  int n_trees;
  int *tree_root;        /* index into nodes per tree */
  kn_at_gbt_node *nodes;
  int n_nodes, cap_nodes;
  /* training data, appended by kn_at_cost_model_add */
  float *x;
  double *y;
  int n, cap;
  bool trained;
} kn_at_cost_model;

kn_at_gbt_params kn_at_gbt_defaults(void);
void kn_at_cost_model_init(kn_at_cost_model *m, int n_features, const kn_at_gbt_params *p);
void kn_at_cost_model_free(kn_at_cost_model *m);
/* Adds one training sample (features, target: higher is better). */
void kn_at_cost_model_add(kn_at_cost_model *m, const float *x, double y);
/* Refits every tree on all samples added so far (deterministic for the
 * seed). With fewer than 2 samples the model predicts their mean. */
void kn_at_cost_model_train(kn_at_cost_model *m);
double kn_at_cost_model_predict(const kn_at_cost_model *m, const float *x);

/* ---- evolutionary search (evolve.c) ---- */
typedef struct kn_at_evolve_params {
  uint64_t seed;
  int init_random;    /* random samples of a task's space before evolving (default 4) */
  int pool;           /* candidates generated and ranked per proposal (default 96) */
  int parents;        /* best measured traces used as parents (default 8) */
  double crossover;   /* fraction of children from crossover (default 0.3) */
  double epsilon;     /* fraction of each batch picked at random (default 0.2) */
  bool use_model;     /* false: rank children at random (ablation, tests) */
} kn_at_evolve_params;

kn_at_evolve_params kn_at_evolve_defaults(void);

typedef struct kn_at_evolve kn_at_evolve;
/* An evolutionary strategy over `n_tasks` tasks; free with kn_at_evolve_free. */
kn_at_evolve *kn_at_evolve_new(const kn_at_evolve_params *p);
void kn_at_evolve_free(kn_at_evolve *e);
kn_at_strategy kn_at_strategy_evolve(kn_at_evolve *e);

/* Mutation and crossover of one schedule (exposed for tests): each returns
 * true and a schedule that validates for ts, or false. */
bool kn_at_mutate(const kn_schedule *s, const kn_at_task_shape *ts, const kn_target *t, uint64_t *rng,
                  kn_schedule *out);
bool kn_at_crossover(const kn_schedule *a, const kn_schedule *b, const kn_at_task_shape *ts, uint64_t *rng,
                     kn_schedule *out);

#endif
