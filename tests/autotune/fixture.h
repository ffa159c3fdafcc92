/* fixture.h — what the autotuner's test files share (defined in
 * test_autotune.c): small graphs (a conv, a matmul, a softmax), a provider
 * forcing one group's schedule, and compile_run, which builds every kernel
 * and runs the plan with the loop-IR interpreter against the reference. */
#ifndef KN_TEST_AUTOTUNE_FIXTURE_H
#define KN_TEST_AUTOTUNE_FIXTURE_H

#include "autotune/autotune.h"

extern const kn_target avx512, avx2;

typedef struct force {
  const kn_group *grp;    /* the group whose schedule is captured / forced */
  const kn_schedule *use; /* NULL: keep the default */
  kn_at_task_shape shape; /* captured */
  bool captured, rejected;
} force;

typedef struct fixture {
  kn_graph g;
  kn_arena arena;
  kn_groups groups;
  float *in, *ref;
  int64_t in_n, out_n;
  const kn_group *target; /* the contraction's group, else the last one */
} fixture;

float frand(void);
void make_conv(kn_graph *g, const char *prefix, int64_t cin, int64_t cout, int64_t hw);
void make_conv_small(kn_graph *g);
void make_matmul(kn_graph *g);
void make_softmax(kn_graph *g);
/* depthwise k x k conv (pad k / 2) + relu on [1, channels, hw, hw] */
void make_depthwise(kn_graph *g, int64_t channels, int64_t hw, int64_t k, int64_t stride);
void force_choose(void *ctx, const kn_sched_task *task, kn_schedule *s);
/* s written as a trace into text, parsed back (asserted to give the same
 * text) and returned */
kn_schedule trace_roundtrip(const kn_schedule *s, char *text, size_t cap);
void setup(fixture *fx, void (*make)(kn_graph *));
void teardown(fixture *fx);
/* max error relative to max(1, max|ref|), or -1 when the forced schedule
 * was rejected; the target kernel's loop IR into *loops when set */
double compile_run(fixture *fx, const kn_target *t, force *f, char **loops);

/* test_unroll_reduce.c: unroll_reduction, in the rules, the space, traces
 * and validation */
int kn_test_unroll_reduce_run(void);

/* test_search.c: the cost model and the evolutionary search */
int kn_test_search_run(void);
/* the model trained on 3/4 of a real log ranks the rest (0: better than chance) */
int kn_test_search_rank_log(const char *model, const char *log_path);

#endif
