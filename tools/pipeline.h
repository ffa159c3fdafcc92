/* pipeline.h — `kiln compile` as a library call (used by the CLI and tests). */
#ifndef KN_PIPELINE_H
#define KN_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frontend/onnx_load.h"
#include "ir/graph/graph.h"
#include "tools/bind.h"

struct kn_plan;

typedef struct kn_compile_opts {
  const char *model;      /* input .onnx */
  const char *output;     /* out.so or out.o (out.h is written beside it) */
  const char *header;     /* --header: where the header goes instead, or NULL */
  const char *target;     /* target string, NULL = host */
  const char *prefix;     /* C identifier prefix of the artifact's symbols */
  const char *dump_after; /* stage name, or NULL */
  const char *tuning_log; /* JSONL tuning records to replay, or NULL */
  /* The model as bytes instead of a file (fuzzing, tests): when model_data is
   * set, `model` is only the name used in diagnostics and external data is
   * rejected. */
  const uint8_t *model_data;
  size_t model_size;
  /* Stop after this step of the pipeline (tools/pipeline.c, e.g. "outputs",
   * "fuse", "loops", or "plan": everything but LLVM codegen and packaging)
   * and write nothing, or NULL for the whole pipeline. Used by the fuzzers. */
  const char *stop_after;
  int64_t max_batch;
  bool verbose;
  /* Stage times on stderr (kn_compile only): KN_PROGRESS_OFF (library
   * callers: kiln tune, tests), KN_PROGRESS_AUTO (`kiln compile`: only when
   * stderr is a terminal, once the compile has run $KILN_PROGRESS_AFTER
   * seconds, default 2) or KN_PROGRESS_ALWAYS (--progress: every stage). */
  int progress;
  const kn_binding *binds; /* --bind: graph inputs made constants */
  int n_binds;
  const kn_fe_dim *dims; /* --dim: symbolic dims made static at import */
  int n_dims;
  /* --conv-algo: which 3x3 stride-1 convs run as Winograd
   * (ir/passes/pass_winograd.c): "direct" none, "winograd" all that can as
   * F(2x2, 3x3), "winograd4" all as F(4x4, 3x3), "auto" or NULL the default
   * rule. */
  const char *conv_algo;
  /* per-conv decisions measured from a tuning log (conv_algo.c), or NULL */
  const struct kn_conv_algo_choice *conv_algo_choice;
  /* --precision: "fp32" or NULL (nothing changes), "fp16" or "bf16": float32
   * tensors stored in that format, accumulation in float32, the artifact's
   * inputs and outputs still float32 (ir/passes/pass_precision.c) */
  const char *precision;
  /* --check-indices: the artifact checks every gather / scatter index it
   * reads at run time and P_run returns KILN_ERR_INDEX, writing no output,
   * when one is out of range (ir/passes/pass_index_checks.c); false: such
   * indices follow Kiln's rule (docs/ops.md), at no run-time cost */
  bool check_indices;
  /* for `kiln tune`'s model check (model_check.c): with tuning_log, every
   * kernel keeps its default schedule (the log still decides the convs'
   * algorithms, so the kernels are the tuned build's) */
  bool replay_defaults;
  bool replay_alone; /* ... the records timed alone only: model records ignored */
  int replay_rank;   /* ... with replay_alone, the rank-th runner-up (kn_at_log_ranked_alone) */
  struct kn_compile_report *report; /* filled when set */
  /* Called once the plan is built, with the optimised graph it was built
   * from (tests run the plan's kernels in an interpreter); a non-zero
   * return fails the compile. NULL: none. */
  int (*on_plan)(void *ctx, const kn_graph *g, const struct kn_plan *plan, kn_diag *d);
  void *on_plan_ctx;
} kn_compile_opts;

enum { KN_PROGRESS_OFF, KN_PROGRESS_AUTO, KN_PROGRESS_ALWAYS };

/* Which schedule each step of a compiled artifact got. */
typedef struct kn_compile_report {
  kn_arena *arena; /* holds the strings; set by the caller */
  int n_steps;
  const char **keys;   /* workload key of step s (autotune/workload.c) */
  const char **traces; /* canonical trace of the schedule step s runs */
  bool *tuned;         /* whether that schedule is a tuning record's, not the default */
} kn_compile_report;

/* Which convs run as Winograd, by the best records of a tuning log
 * (conv_algo.c): names[i] is a conv node, tile[i] the choice (0 direct,
 * 2 or 4 the Winograd tile); by_rule counts the convs left to the default
 * rule for lack of records. */
typedef struct kn_conv_algo_choice {
  int n, n_winograd2, n_winograd4, by_rule;
  const char **names;
  int *tile;
} kn_conv_algo_choice;
struct kn_at_log;
int kn_conv_algo_choose(const kn_compile_opts *o, struct kn_at_log *log, kn_arena *A, kn_conv_algo_choice *out,
                   kn_diag *d);
/* kn_winograd_want over a kn_conv_algo_choice (ctx); the default rule for the rest. */
int kn_conv_algo_want(const kn_graph *g, int node, void *ctx);
/* Whether g (optimized) has a Winograd conv or a conv that could be one. */
bool kn_pipeline_has_winograd_convs(const kn_graph *g);

/* Whether s names a --conv-algo choice. */
bool kn_pipeline_conv_algo_valid(const char *s);
/* The algorithm named s (an index of kn_conv_algo_name), or -1. */
int kn_conv_algo_of(const char *s);

/* The algorithms a 3x3 stride-1 conv can run with, the names --conv-algo takes for
 * them (besides "auto"), in the one order conv_algo.c and `kiln tune`'s
 * alternatives use; the Winograd tile of each (0: direct). */
#define KN_CONV_ALGOS 3
extern const char *const kn_conv_algo_name[KN_CONV_ALGOS];
extern const int kn_conv_algo_tile[KN_CONV_ALGOS];

/* The names --precision takes, in order, and the dtype each stores float32
 * tensors in; kn_precision_of(s): that dtype (KN_DT_F32 for NULL), or
 * KN_DT_INVALID for a name not among them. */
#define KN_PRECISIONS 3
extern const char *const kn_precision_name[KN_PRECISIONS];
kn_dtype kn_precision_of(const char *s);

/* A graph input Kiln needs the value of at compile time: its name and its
 * position among the model's graph inputs (initializers excluded). */
typedef struct kn_bind_need {
  const char *name;
  int position;
} kn_bind_need;

/* The i-th stage --dump-after accepts, in pipeline order; NULL past the last. */
const char *kn_pipeline_stage(int i);
bool kn_pipeline_stage_valid(const char *name);
/* Whether name is a step of the pipeline (what stop_after takes). */
bool kn_pipeline_step_valid(const char *name);

/* Loads and shape-infers a model (the front of the pipeline). */
int kn_pipeline_load(const char *model, int64_t max_batch, kn_graph *g, kn_diag *d);
/* The same from a serialized ModelProto in memory (no external data). */
int kn_pipeline_load_buffer(const uint8_t *data, size_t size, int64_t max_batch, kn_graph *g, kn_diag *d);
/* Loads a model, binds o->binds (--bind), sets o->max_batch and
 * shape-infers: the front of kn_compile. */
int kn_pipeline_load_bound(const kn_compile_opts *o, kn_graph *g, kn_diag *d);
/* Which graph inputs, beyond those o->binds binds, must be bound for the
 * model to compile: those whose data an op needs at compile time (see
 * kn_infer_shapes_needs). Fills *needs (in `arena`, in input order) and
 * *count (0 when none, e.g. when the model fails for another reason).
 * Returns 0, or -1 when the model cannot even be loaded or bound. */
int kn_pipeline_needed_bindings(const kn_compile_opts *o, kn_arena *arena, kn_bind_need **needs, int *count,
                                kn_diag *d);
/* The steps between import and the first full shape inference (expansion,
 * run-time values, infer) over a graph loaded already (`kiln inspect`). */
int kn_pipeline_prepare(const kn_compile_opts *o, kn_graph *g, kn_diag *d);
/* Runs the graph passes in order (shapes re-inferred after each). */
int kn_pipeline_optimize(const kn_compile_opts *o, kn_graph *g, kn_diag *d);
/* The whole pipeline; writes nothing on failure. */
int kn_compile(const kn_compile_opts *o, kn_diag *d);

#endif
