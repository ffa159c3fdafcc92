/* evolve.c — evolutionary search guided by the cost model.
 *
 * Per task, each proposal:
 *  1. features of the task's newly measured candidates (lowered in child
 *     processes, featurize.c) join the cost model's samples with target
 *     log(default time / time); the model is refit when it got new samples;
 *  2. until `init_random` candidates of the task were measured, the
 *     proposal is random members of the rule-generated space;
 *  3. then a pool of children: mutations (one decision of the trace: a
 *     split factor, a split added or removed, two adjacent loops swapped,
 *     the parallel depth, a loop unrolled or not, the compute_at depth, the
 *     reduction lanes) and crossovers (per axis splits, loop kinds, parallel
 *     depth taken from either parent) of the best measured candidates, plus
 *     some unmeasured members of the space; the pool is lowered for its
 *     features and ranked by the model, its best are mutated once more (a
 *     second, model-guided generation) and ranked again;
 *  4. the best predicted fill the batch except an epsilon share picked at
 *     random from the rest of the pool.
 * Every proposed schedule validates for the task's shape, lowers, and was
 * never measured nor proposed before (traces compared as canonical text). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autotune/search.h"

#define TRACE_CAP 4096

typedef struct entry {
  kn_schedule s;
  double seconds;
  kn_at_status status;
} entry;

typedef struct task_state {
  entry *seen; /* observed results of this task */
  int n, cap;
  int n_featured; /* seen[0..n_featured) were handed to the model */
  char **proposed; /* traces proposed so far (never twice) */
  int n_proposed, cap_proposed;
} task_state;

struct kn_at_evolve {
  kn_at_evolve_params p;
  uint64_t rng;
  kn_at_cost_model model;
  bool dirty;
  task_state *tasks;
  int n_tasks;
};

static uint64_t rnd(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}
static int rnd_int(uint64_t *x, int n) { return n > 0 ? (int)(rnd(x) % (uint64_t)n) : 0; }
static double rnd_unit(uint64_t *x) { return (double)(rnd(x) >> 11) * (1.0 / 9007199254740992.0); }

kn_at_evolve_params kn_at_evolve_defaults(void) {
  return (kn_at_evolve_params){.seed = 1, .init_random = 4, .pool = 64, .parents = 8, .crossover = 0.3,
                               .epsilon = 0.2, .use_model = true};
}

kn_at_evolve *kn_at_evolve_new(const kn_at_evolve_params *p) {
  kn_at_evolve *e = calloc(1, sizeof *e);
  KN_ASSERT(e, "out of memory");
  e->p = p ? *p : kn_at_evolve_defaults();
  e->rng = e->p.seed ? e->p.seed * 0x9e3779b97f4a7c15ull : 0x2545f4914f6cdd1dull;
  kn_at_gbt_params gp = kn_at_gbt_defaults();
  gp.seed = e->p.seed + 1;
  kn_at_cost_model_init(&e->model, KN_AT_N_FEATURES, &gp);
  return e;
}

void kn_at_evolve_free(kn_at_evolve *e) {
  if (!e) return;
  for (int i = 0; i < e->n_tasks; i++) {
    free(e->tasks[i].seen);
    for (int k = 0; k < e->tasks[i].n_proposed; k++) free(e->tasks[i].proposed[k]);
    free(e->tasks[i].proposed);
  }
  free(e->tasks);
  kn_at_cost_model_free(&e->model);
  free(e);
}

static task_state *task_of(kn_at_evolve *e, int task) {
  if (task >= e->n_tasks) {
    task_state *t = realloc(e->tasks, sizeof(task_state) * (size_t)(task + 1));
    KN_ASSERT(t, "out of memory");
    memset(t + e->n_tasks, 0, sizeof(task_state) * (size_t)(task + 1 - e->n_tasks));
    e->tasks = t;
    e->n_tasks = task + 1;
  }
  return &e->tasks[task];
}

/* ---- mutation and crossover ---- */

static int64_t piece_extent(const kn_schedule *s, const kn_at_task_shape *ts, int axis, int piece) {
  if (piece > 0) return s->factors[axis][piece - 1];
  int64_t total = 1;
  for (int k = 0; k < s->n_factors[axis]; k++) total *= s->factors[axis][k];
  int64_t e = ts->extent[axis];
  return e < 0 ? 1 : (e + total - 1) / total;
}

static int find_loop(const kn_schedule *s, int axis, int piece) {
  for (int i = 0; i < s->n_loops; i++)
    if (s->loops[i].axis == axis && s->loops[i].piece == piece) return i;
  return -1;
}

/* Valid for the shape, and unrolling stays small enough to lower quickly. */
static bool acceptable(const kn_schedule *s, const kn_at_task_shape *task) {
  kn_diag d;
  kn_diag_init(&d);
  int rc = kn_at_sched_validate(s, task, &d);
  kn_diag_free(&d);
  if (rc < 0) return false;
  kn_at_task_shape buf;
  const kn_at_task_shape *ts = kn_at_task_axes(s, task, &buf); /* not NULL: validated */
  int64_t unrolled = 1;
  for (int i = 0; i < s->n_loops; i++)
    if (s->loops[i].kind != KN_FOR_SERIAL) unrolled *= piece_extent(s, ts, s->loops[i].axis, s->loops[i].piece);
  return unrolled <= 1024;
}

static void remove_loop(kn_schedule *s, int at) {
  for (int i = at; i + 1 < s->n_loops; i++) s->loops[i] = s->loops[i + 1];
  s->n_loops--;
  if (s->n_parallel > at) s->n_parallel--;
  if (s->attach > at) s->attach--;
}

static void insert_loop(kn_schedule *s, int at, kn_sched_loop l) {
  for (int i = s->n_loops; i > at; i--) s->loops[i] = s->loops[i - 1];
  s->loops[at] = l;
  s->n_loops++;
  if (s->n_parallel > at) s->n_parallel++;
  if (s->attach > at) s->attach++;
}

static int64_t pick_factor(const kn_target *t, const kn_at_task_shape *ts, int axis, uint64_t *rng) {
  int lanes = kn_target_lanes(t, ts->dtype != KN_DT_INVALID ? ts->dtype : KN_DT_F32);
  if (lanes < 1) lanes = 4;
  int64_t cands[] = {2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 28, 32, lanes, 2 * (int64_t)lanes, 3 * (int64_t)lanes,
                     4 * (int64_t)lanes};
  int n = (int)(sizeof cands / sizeof cands[0]);
  for (int tries = 0; tries < 8; tries++) {
    int64_t f = cands[rnd_int(rng, n)];
    if (ts->extent[axis] < 0 || f <= ts->extent[axis]) return f;
  }
  return 2;
}

/* One decision of s changed at random. */
static void mutate_once(kn_schedule *s, const kn_at_task_shape *task, const kn_target *t, uint64_t *rng) {
  kn_at_task_shape buf;
  const kn_at_task_shape *ts = kn_at_task_axes(s, task, &buf);
  if (!ts) ts = task; /* a crossover's child that validation will refuse */
  switch (rnd_int(rng, 9)) {
  case 0: { /* a split factor */
    int a = rnd_int(rng, s->n_axes);
    if (!s->n_factors[a]) return;
    int k = rnd_int(rng, s->n_factors[a]);
    s->factors[a][k] = pick_factor(t, ts, a, rng);
    return;
  }
  case 1: { /* a split added (inner piece, serial) or the innermost one removed */
    int a = rnd_int(rng, s->n_axes);
    if (ts->extent[a] < 2) return;
    if (s->n_factors[a] > 0 && rnd_int(rng, 2)) {
      int piece = s->n_factors[a], at = find_loop(s, a, piece);
      if (at < 0) return;
      s->n_factors[a]--;
      remove_loop(s, at);
    } else if (s->n_factors[a] < KN_SCHED_MAX_SPLIT) {
      s->factors[a][s->n_factors[a]++] = pick_factor(t, ts, a, rng);
      int at = s->n_loops;
      if (at > 0 && s->loops[at - 1].kind == KN_FOR_VECTORIZED) at--;
      if (at < s->attach && rnd_int(rng, 2)) at = s->attach;
      insert_loop(s, at, (kn_sched_loop){a, s->n_factors[a], KN_FOR_SERIAL});
    }
    return;
  }
  case 2: { /* two adjacent loops swapped */
    if (s->n_loops < 2) return;
    int i = rnd_int(rng, s->n_loops - 1);
    kn_sched_loop tmp = s->loops[i];
    s->loops[i] = s->loops[i + 1];
    s->loops[i + 1] = tmp;
    return;
  }
  case 3: /* parallel depth */
    s->n_parallel = rnd_int(rng, (ts->n_stages > 0 ? s->attach : s->n_loops) + 1);
    return;
  case 4: { /* a loop unrolled or not */
    int i = s->n_parallel + rnd_int(rng, s->n_loops - s->n_parallel);
    if (i >= s->n_loops || s->loops[i].kind == KN_FOR_VECTORIZED) return;
    s->loops[i].kind = s->loops[i].kind == KN_FOR_UNROLLED ? KN_FOR_SERIAL : KN_FOR_UNROLLED;
    return;
  }
  case 5: /* compute_at depth */
    if (ts->n_stages == 0) return;
    s->attach += rnd_int(rng, 2) ? 1 : -1;
    return;
  case 7: /* a conv's pixels as one axis, or not */
    if (kn_sched_rows_fuse_ok(&ts->hints)) s->fuse_spatial = !s->fuse_spatial;
    return;
  case 8: /* how many innermost reduction axes are unrolled (validation
           * refuses what does not fit) */
    if (ts->hints.n_reduce > 0) s->unroll_reduce = rnd_int(rng, ts->hints.n_reduce < 2 ? 2 : 3);
    return;
  default: { /* reduction lanes, or the vectorized loop's width */
    int lanes = kn_target_lanes(t, ts->dtype != KN_DT_INVALID ? ts->dtype : KN_DT_F32);
    if (s->reduce_lanes > 0 || (ts->n_stages > 0 && rnd_int(rng, 2))) {
      int opts[4] = {0, lanes / 2, lanes, 2 * lanes};
      s->reduce_lanes = opts[rnd_int(rng, 4)];
      if (s->reduce_lanes == 1 || s->reduce_lanes < 0) s->reduce_lanes = 0;
    } else if (s->n_loops > 0 && s->loops[s->n_loops - 1].kind == KN_FOR_VECTORIZED &&
               s->loops[s->n_loops - 1].piece > 0) {
      const kn_sched_loop *l = &s->loops[s->n_loops - 1];
      int64_t opts[4] = {lanes / 2, lanes, 2 * (int64_t)lanes, 4 * (int64_t)lanes};
      int64_t f = opts[rnd_int(rng, 4)];
      if (f >= 4) s->factors[l->axis][l->piece - 1] = f;
    }
    return;
  }
  }
}

/* Same schedule (compared as canonical traces: struct padding never counts). */
static bool same_schedule(const kn_schedule *a, const kn_schedule *b) {
  char ta[TRACE_CAP], tb[TRACE_CAP];
  kn_at_trace_write(a, ta, sizeof ta);
  kn_at_trace_write(b, tb, sizeof tb);
  return !strcmp(ta, tb);
}

bool kn_at_mutate(const kn_schedule *s, const kn_at_task_shape *ts, const kn_target *t, uint64_t *rng,
                  kn_schedule *out) {
  for (int tries = 0; tries < 32; tries++) {
    memcpy(out, s, sizeof *s);
    mutate_once(out, ts, t, rng);
    if (rnd_int(rng, 4) == 0) mutate_once(out, ts, t, rng);
    if (!same_schedule(out, s) && acceptable(out, ts)) return true;
  }
  return false;
}

static bool same_loops(const kn_schedule *a, const kn_schedule *b) {
  if (a->n_loops != b->n_loops) return false;
  for (int i = 0; i < a->n_loops; i++)
    if (find_loop(b, a->loops[i].axis, a->loops[i].piece) < 0) return false;
  return true;
}

bool kn_at_crossover(const kn_schedule *a, const kn_schedule *b, const kn_at_task_shape *ts, uint64_t *rng,
                     kn_schedule *out) {
  for (int tries = 0; tries < 16; tries++) {
    memcpy(out, a, sizeof *a);
    for (int ax = 0; ax < out->n_axes && ax < b->n_axes; ax++)
      if (a->n_factors[ax] == b->n_factors[ax] && rnd_int(rng, 2))
        memcpy(out->factors[ax], b->factors[ax], sizeof out->factors[ax]);
    if (same_loops(a, b)) {
      if (rnd_int(rng, 3) == 0) {
        memcpy(out->loops, b->loops, sizeof out->loops);
        out->attach = b->attach;
      } else {
        for (int i = 0; i < out->n_loops; i++) {
          int j = find_loop(b, out->loops[i].axis, out->loops[i].piece);
          if (j >= 0 && rnd_int(rng, 2)) out->loops[i].kind = b->loops[j].kind;
        }
      }
    }
    if (rnd_int(rng, 2)) out->n_parallel = b->n_parallel;
    if (rnd_int(rng, 2)) out->reduce_lanes = b->reduce_lanes;
    if (rnd_int(rng, 2)) out->unroll_reduce = b->unroll_reduce;
    if (acceptable(out, ts)) return true;
  }
  return false;
}

/* ---- the strategy ---- */

static void evolve_rank(void *state, int task, const kn_schedule *space, int n, int *order) {
  (void)state;
  (void)task;
  (void)space;
  for (int i = 0; i < n; i++) order[i] = i;
}

static void evolve_observe(void *state, int task, const kn_schedule *s, const kn_at_result *r) {
  kn_at_evolve *e = state;
  task_state *ts = task_of(e, task);
  if (ts->n == ts->cap) {
    ts->cap = ts->cap ? 2 * ts->cap : 32;
    entry *grown = realloc(ts->seen, sizeof(entry) * (size_t)ts->cap);
    KN_ASSERT(grown, "out of memory");
    ts->seen = grown;
  }
  ts->seen[ts->n++] = (entry){*s, r->seconds, r->status};
}

typedef struct cand {
  kn_schedule s;
  char *trace;
  double score;
  bool ok;
  float f[KN_AT_N_FEATURES];
} cand;

typedef struct pool {
  cand *c;
  int n, cap;
} pool;

static bool proposed_before(const task_state *ts, const char *trace) {
  for (int i = 0; i < ts->n_proposed; i++)
    if (!strcmp(ts->proposed[i], trace)) return true;
  return false;
}

/* Adds s to the pool unless it was measured, proposed or pooled already. */
static void pool_add(pool *p, const kn_schedule *s, const task_state *ts, const kn_at_task_env *env) {
  char trace[TRACE_CAP];
  kn_at_trace_write(s, trace, sizeof trace);
  for (int i = 0; i < p->n; i++)
    if (!strcmp(p->c[i].trace, trace)) return;
  if (proposed_before(ts, trace) || env->measured(env->session, env->task, s)) return;
  if (p->n == p->cap) {
    p->cap = p->cap ? 2 * p->cap : 64;
    cand *grown = realloc(p->c, sizeof(cand) * (size_t)p->cap);
    KN_ASSERT(grown, "out of memory");
    p->c = grown;
  }
  cand *c = &p->c[p->n++];
  memset(c, 0, sizeof *c);
  c->s = *s;
  c->trace = strdup(trace);
  KN_ASSERT(c->trace, "out of memory");
}

static void pool_free(pool *p) {
  for (int i = 0; i < p->n; i++) free(p->c[i].trace);
  free(p->c);
}

/* Features and model scores of p->c[from..n). */
static void score(kn_at_evolve *e, pool *p, int from, const kn_at_task_env *env) {
  int n = p->n - from;
  if (n <= 0) return;
  kn_schedule *s = malloc(sizeof(kn_schedule) * (size_t)n);
  float *f = malloc(sizeof(float) * KN_AT_N_FEATURES * (size_t)n);
  bool *ok = malloc(sizeof(bool) * (size_t)n);
  KN_ASSERT(s && f && ok, "out of memory");
  for (int i = 0; i < n; i++) s[i] = p->c[from + i].s;
  env->featurize(env->session, env->task, s, n, f, ok);
  bool model = e->p.use_model && e->model.n >= 2;
  for (int i = 0; i < n; i++) {
    cand *c = &p->c[from + i];
    c->ok = ok[i];
    memcpy(c->f, &f[(size_t)i * KN_AT_N_FEATURES], sizeof c->f);
    c->score = !c->ok ? -INFINITY : model ? kn_at_cost_model_predict(&e->model, c->f) : rnd_unit(&e->rng);
  }
  free(s);
  free(f);
  free(ok);
}

static int cmp_score(const void *a, const void *b) {
  const cand *x = a, *y = b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  return strcmp(x->trace, y->trace); /* deterministic ties */
}

/* New measurements of the task become model samples. */
static void learn(kn_at_evolve *e, task_state *ts, const kn_at_task_env *env) {
  int n = ts->n - ts->n_featured;
  if (n <= 0) return;
  kn_schedule *s = malloc(sizeof(kn_schedule) * (size_t)n);
  float *f = malloc(sizeof(float) * KN_AT_N_FEATURES * (size_t)n);
  bool *ok = malloc(sizeof(bool) * (size_t)n);
  KN_ASSERT(s && f && ok, "out of memory");
  int m = 0;
  for (int i = ts->n_featured; i < ts->n; i++)
    if (ts->seen[i].status == KN_AT_OK && ts->seen[i].seconds > 0) s[m++] = ts->seen[i].s;
  if (m) env->featurize(env->session, env->task, s, m, f, ok);
  int k = 0;
  for (int i = ts->n_featured; i < ts->n; i++) {
    if (!(ts->seen[i].status == KN_AT_OK && ts->seen[i].seconds > 0)) continue;
    if (ok[k] && env->default_s > 0) {
      kn_at_cost_model_add(&e->model, &f[(size_t)k * KN_AT_N_FEATURES], log(env->default_s / ts->seen[i].seconds));
      e->dirty = true;
    }
    k++;
  }
  ts->n_featured = ts->n;
  free(s);
  free(f);
  free(ok);
}

static int cmp_entry(const void *a, const void *b) {
  const entry *x = a, *y = b;
  return x->seconds < y->seconds ? -1 : x->seconds > y->seconds;
}

static int evolve_propose(void *state, const kn_at_task_env *env, kn_schedule *out, int max) {
  kn_at_evolve *e = state;
  task_state *ts = task_of(e, env->task);
  learn(e, ts, env);
  if (e->dirty && e->p.use_model) {
    kn_at_cost_model_train(&e->model);
    e->dirty = false;
  }
  int n_ok = 0;
  for (int i = 0; i < ts->n; i++) n_ok += ts->seen[i].status == KN_AT_OK;
  pool p = {0};
  int got = 0;
  /* random members of the space */
  int *order = malloc(sizeof(int) * (size_t)(env->n_space + 1));
  for (int i = 0; i < env->n_space; i++) order[i] = i;
  for (int i = env->n_space - 1; i > 0; i--) {
    int j = rnd_int(&e->rng, i + 1), tmp = order[i];
    order[i] = order[j];
    order[j] = tmp;
  }
  bool warmup = n_ok < e->p.init_random;
  int want_random = warmup ? max : e->p.pool / 4;
  for (int i = 0; i < env->n_space && p.n < want_random; i++) pool_add(&p, &env->space[order[i]], ts, env);
  free(order);
  int random_end = p.n;
  if (!warmup || p.n < max) {
    /* parents: the best measured */
    entry *best = malloc(sizeof(entry) * (size_t)(ts->n + 1));
    int nb = 0;
    for (int i = 0; i < ts->n; i++)
      if (ts->seen[i].status == KN_AT_OK) best[nb++] = ts->seen[i];
    qsort(best, (size_t)nb, sizeof(entry), cmp_entry);
    if (nb > e->p.parents) nb = e->p.parents;
    if (nb == 0) best[nb++] = (entry){.s = env->shape->dflt};
    int target = random_end + e->p.pool;
    for (int tries = 0; p.n < target && tries < 8 * e->p.pool; tries++) {
      kn_schedule child;
      bool made;
      if (nb >= 2 && rnd_unit(&e->rng) < e->p.crossover) {
        int a = rnd_int(&e->rng, nb), b = rnd_int(&e->rng, nb - 1);
        if (b >= a) b++;
        made = kn_at_crossover(&best[a].s, &best[b].s, env->shape, &e->rng, &child);
      } else {
        /* better parents more often: the rank is the min of two draws */
        int a = rnd_int(&e->rng, nb), b = rnd_int(&e->rng, nb);
        made = kn_at_mutate(&best[a < b ? a : b].s, env->shape, env->t, &e->rng, &child);
      }
      if (made) pool_add(&p, &child, ts, env);
    }
    free(best);
  }
  score(e, &p, 0, env);
  /* a second generation: the best predicted, mutated once more */
  if (!warmup && e->p.use_model && e->model.n >= 2 && p.n > 0) {
    qsort(p.c, (size_t)p.n, sizeof(cand), cmp_score);
    int from = p.n, elite = p.n < 8 ? p.n : 8;
    for (int tries = 0; p.n < from + e->p.pool / 2 && tries < 4 * e->p.pool; tries++) {
      kn_schedule child;
      const cand *par = &p.c[rnd_int(&e->rng, elite)];
      if (par->ok && kn_at_mutate(&par->s, env->shape, env->t, &e->rng, &child)) pool_add(&p, &child, ts, env);
    }
    score(e, &p, from, env);
  }
  if (warmup) {
    /* the random members first, in their random order */
    for (int i = 0; i < random_end && got < max; i++)
      if (p.c[i].ok) {
        out[got++] = p.c[i].s;
        p.c[i].ok = false;
        p.c[i].score = -INFINITY;
      }
  }
  qsort(p.c, (size_t)p.n, sizeof(cand), cmp_score);
  int n_ok_pool = 0;
  while (n_ok_pool < p.n && p.c[n_ok_pool].ok) n_ok_pool++;
  int left = max - got, eps = (int)floor(left * e->p.epsilon + rnd_unit(&e->rng));
  if (eps > left) eps = left;
  int top = left - eps, i = 0;
  for (; i < n_ok_pool && got < max && top > 0; i++, top--) out[got++] = p.c[i].s;
  /* epsilon: random picks from the rest of the pool */
  while (got < max && i < n_ok_pool) {
    int j = i + rnd_int(&e->rng, n_ok_pool - i);
    cand tmp = p.c[i];
    p.c[i] = p.c[j];
    p.c[j] = tmp;
    out[got++] = p.c[i++].s;
  }
  for (int k = 0; k < got; k++) {
    char trace[TRACE_CAP];
    kn_at_trace_write(&out[k], trace, sizeof trace);
    if (ts->n_proposed == ts->cap_proposed) {
      ts->cap_proposed = ts->cap_proposed ? 2 * ts->cap_proposed : 64;
      char **grown = realloc(ts->proposed, sizeof(char *) * (size_t)ts->cap_proposed);
      KN_ASSERT(grown, "out of memory");
      ts->proposed = grown;
    }
    ts->proposed[ts->n_proposed++] = strdup(trace);
  }
  pool_free(&p);
  return got;
}

kn_at_strategy kn_at_strategy_evolve(kn_at_evolve *e) {
  return (kn_at_strategy){.state = e, .rank = evolve_rank, .observe = evolve_observe, .propose = evolve_propose};
}
