/* autotune.h — the autotuner: tasks (unique workloads), the schedule space of
 * a task, replayable schedule traces, tuning records (JSONL logs), the
 * measurement of candidates in child processes, and the tuning session.
 *
 * Pieces, each in its own file:
 *   workload.c  kn_at_workload_key: canonical text of a fused group (op
 *               pattern, attributes, shapes, dtypes, layout); identical
 *               workloads of different models share a key
 *   trace.c     kn_schedule <-> JSON trace of primitives; kn_at_sched_validate
 *   space.c     the candidates of a task, generated from rules
 *   json.c      the small JSON reader/writer the records need
 *   log.c       tuning records: append, load (bad lines skipped with a
 *               warning), best record per workload for a target
 *   log_upgrade.c  a log of format version 1 rewritten in the current one
 *   provider.c  a kn_sched_provider replaying the best records (compile)
 *   measure.c   build a candidate into a one-kernel artifact in a child,
 *               run it in another child (timeout, check, median time)
 *   tune.c      the session: tasks, budget split, search strategy, progress
 *
 * A schedule that reaches the lowering is always validated first; a record
 * whose trace does not fit its kernel is ignored, never trusted. Correctness
 * never depends on the workload key: any valid schedule computes the same
 * values, so a key collision could only cost speed. */
#ifndef KN_AUTOTUNE_H
#define KN_AUTOTUNE_H

#include <signal.h>
#include <stdio.h>

#include "schedule/schedule.h"

/* The format records are written in; version 1 (batch dims spelled "N*d"
 * in keys) is still read (workload.c, log.c). */
#define KN_AT_FORMAT_VERSION 2

/* ---- workloads ---- */
/* Canonical key of a fused group of g (arena-allocated in A). Long keys keep
 * their op pattern and end in a 64-bit hash of the full text. */
const char *kn_at_workload_key(const kn_graph *g, const kn_group *grp, kn_arena *A);
/* The key as format version 1 spelled it. */
const char *kn_at_workload_key_v1(const kn_graph *g, const kn_group *grp, kn_arena *A);

/* "TRIPLE -mcpu=CPU -mattr=FEATURES": the target as records name it. */
void kn_at_target_string(const kn_target *t, char *buf, size_t cap);

/* ---- the shape of a task, as the space generator sees it ---- */
typedef struct kn_at_task_shape {
  int rank;
  kn_dtype dtype;              /* of the output */
  int64_t extent[KN_MAX_RANK]; /* -1: symbolic (batch) */
  kn_sched_hints hints;
  int n_stages;
  kn_schedule dflt; /* the rule-based default */
} kn_at_task_shape;

void kn_at_task_shape_of(const kn_sched_task *task, const kn_schedule *dflt, kn_at_task_shape *out);

/* The task as s's loops see it: task itself, or under fuse_spatial a copy
 * in buf with the conv's pixels as one axis ([.., 1, oh*ow, c]; idempotent
 * on such a copy). NULL when fuse_spatial does not fit the task. */
const kn_at_task_shape *kn_at_task_axes(const kn_schedule *s, const kn_at_task_shape *task, kn_at_task_shape *buf);

/* 0 if s can be lowered for a task of this shape, else -1 with a
 * diagnostic naming what does not fit. */
int kn_at_sched_validate(const kn_schedule *s, const kn_at_task_shape *ts, kn_diag *d);

/* ---- traces ---- */
/* Appends s as a JSON array of primitives, e.g.
 * [{"p":"split","axis":2,"factor":7},{"p":"reorder","loops":[[0,0],[1,0]]},
 *  {"p":"fuse_parallel","loops":1},{"p":"compute_at","depth":1},...]. */
void kn_at_trace_write(const kn_schedule *s, char *buf, size_t cap);
/* Parses a trace written by kn_at_trace_write. Returns 0, or -1 with a diagnostic. */
int kn_at_trace_parse(const char *text, kn_schedule *s, kn_diag *d);
struct kn_json;
int kn_at_trace_from_json(const struct kn_json *trace, kn_schedule *s, kn_diag *d);

/* ---- the search space ---- */
/* Every candidate schedule of a task (valid ones only; the default first).
 * Returns the count; *out is arena-allocated. */
int kn_at_space_generate(const kn_at_task_shape *ts, const kn_target *t, kn_arena *A,
                         kn_schedule **out);

/* ---- records ---- */
typedef enum kn_at_status {
  KN_AT_OK,
  KN_AT_WRONG,   /* output differs from the default schedule's */
  KN_AT_CRASH,   /* the build or the run died (signal, assert) */
  KN_AT_TIMEOUT, /* the build or the run took too long */
  KN_AT_INVALID, /* the schedule does not fit / lowering or codegen failed */
  KN_AT_NOISY,   /* timed twice, both times disturbed by other processes (rt/measure_util.h) */
  KN_AT_STATUS_COUNT
} kn_at_status;
const char *kn_at_status_name(kn_at_status s);

typedef struct kn_at_record {
  const char *target, *key, *trace; /* trace: canonical JSON text */
  double seconds;                   /* median; meaningful when status is OK */
  kn_at_status status;
  bool is_default;
  bool warm; /* "cache":"warm" (or no "cache": logs before cold timing), else "cold" */
  bool confirm; /* "confirm":true: timed again at the end of a session, in turns with
                 * the task's default (tune.c, phase 7) */
  bool in_model; /* "cache":"model" (warm false): the kernel's median time inside the whole
                  * model (`kiln tune`'s model check, tools/model_check.c) */
  bool noisy;    /* "noisy":true: status ok although the timing stayed disturbed
                  * (kept by `kiln tune --keep-noisy`) */
  bool old_key;  /* a hashed key of format version 1, which kn_at_log_adopt may
                  * still rename to its version-2 key */
} kn_at_record;

typedef struct kn_at_log {
  kn_arena arena;
  int n, cap;
  kn_at_record *records; /* for the target asked for, file order */
  int other_target;      /* records for other targets, ignored */
  int bad_lines;         /* lines skipped */
  int old_keys;          /* records with old_key set */
  int other_kiln;        /* records written by another version of kiln */
  char other_kiln_version[32]; /* the first of those versions */
} kn_at_log;

/* Reads a JSONL log, keeping the records for `target`. A missing file is an
 * empty log when `missing_ok`, else an error. Each corrupt line is skipped
 * with one "kiln: warning: PATH:LINE: ..." line on `warn` (may be NULL). */
int kn_at_log_load(const char *path, const char *target, bool missing_ok, FILE *warn, kn_at_log *log,
                   kn_diag *d);
void kn_at_log_free(kn_at_log *log);
/* The version-2 spelling of a version-1 key (in A when it differs): a short
 * key without its batch dims' "N*" (a dim prints as digits, so "N*" occurs
 * nowhere else); a hashed key as it is, *hashed set, since its hash may be
 * of a text with "N*". */
const char *kn_at_key_from_v1(const char *key, kn_arena *A, bool *hashed);
/* `kiln tune --upgrade-log` (log_upgrade.c): rewrites the log at path in
 * place with its version-1 records in the current version; a hashed key
 * found in keys_v1[0..n) becomes keys[i] (the version-2 keys of the same
 * kernels), one found nowhere stays a version-1 record. */
typedef struct kn_at_upgrade_counts {
  int upgraded; /* records rewritten */
  int renamed;  /* of them, hashed keys renamed by the model's kernels */
  int left;     /* version-1 records left as they were */
  int current;  /* records already in the current version */
  int other;    /* lines that are no record kiln reads (kept as they are) */
} kn_at_upgrade_counts;
int kn_at_log_upgrade(const char *path, const char *const *keys_v1, const char *const *keys, int n,
                      kn_at_upgrade_counts *c, kn_diag *d);
/* Renames the version-1 hashed keys key_v1 of log to key, the version-2 key
 * of the same kernel; returns how many. */
int kn_at_log_adopt(kn_at_log *log, const char *key_v1, const char *key);
/* The key of a fused group of g, after renaming log's version-1 records of
 * it (log may be NULL): what compile and tune look records up by. */
const char *kn_at_log_key(kn_at_log *log, const kn_graph *g, const kn_group *grp, kn_arena *A);

/* Best OK record for a key, or NULL: where the key has in-model records of
 * two schedules (a model check compared them), the fastest of those;
 * else as kn_at_log_best_alone. */
const kn_at_record *kn_at_log_best(const kn_at_log *log, const char *key);
/* Best OK record for a key among the kernels timed alone, or NULL: the fastest cold-timed one, else
 * (a key with only warm-timed records) the fastest warm one; the two are
 * never compared, warm times being the faster for the same schedule. Among
 * records timed the same way, a key's confirm records decide where they
 * cover two schedules: they timed the default and the search's best in
 * turns, while the search's best is the luckiest of many single timings.
 * (A later session's find counts once a session confirms it: the confirm
 * phase always compares the search's best over all records.) */
const kn_at_record *kn_at_log_best_alone(const kn_at_log *log, const char *key);
/* rank 0: kn_at_log_best_alone; rank k: the key's k-th fastest other
 * schedule timed alone the same way (by its fastest single timing), or NULL
 * when it has fewer. The model check's runners-up. */
const kn_at_record *kn_at_log_ranked_alone(const kn_at_log *log, const char *key, int rank);
/* Whether (key, trace) has a record (any status). */
bool kn_at_log_has(const kn_at_log *log, const char *key, const char *trace);
void kn_at_log_add(kn_at_log *log, const kn_at_record *r); /* copies the strings */
/* One record as a JSON line (with '\n'), appended and flushed. */
int kn_at_log_append(FILE *f, const kn_at_record *r, kn_diag *d);

/* ---- compile with a log ---- */
/* What the log gave one kernel. */
typedef enum kn_at_replay_outcome {
  KN_AT_NO_RECORD,    /* no ok record of its workload key */
  KN_AT_BEST_DEFAULT, /* the best record is its default schedule */
  KN_AT_UNFIT,        /* the best record does not fit the kernel (a stale or foreign log) */
  KN_AT_TUNED,        /* it runs the best record's schedule */
} kn_at_replay_outcome;

typedef struct kn_at_replay {
  kn_at_log *log;
  kn_arena *arena;
  int n_kernels, n_tuned; /* counts, for a summary line */
  bool defaults_only;     /* look the records up, keep every default (a model check's baseline) */
  int rank;               /* > 0: the rank-th runner-up timed alone (kn_at_log_ranked_alone), */
  bool alone;             /* or with `alone`, the best timed alone: model records ignored */
  /* optional (cap > 0), per kernel built, in build order: its workload key,
   * its default's trace, the tuned trace it got (NULL: the default), what
   * the log had for it and the record it took, if any */
  int cap;
  const char **keys, **default_traces, **tuned_traces;
  kn_at_replay_outcome *outcomes;
  const kn_at_record **records;
} kn_at_replay;
/* A provider that replaces the default schedule with the best valid record
 * of the kernel's workload. */
kn_sched_provider kn_at_replay_provider(kn_at_replay *r);

/* ---- measurement ---- */
typedef struct kn_at_measure_opts {
  int threads;          /* thread pool of the measured artifact (0: the CPUs) */
  double build_timeout; /* seconds */
  double run_timeout;   /* seconds */
  double min_repeat_s;  /* each timing sample lasts at least this long */
  int samples;          /* samples whose median is the result */
  bool warm;            /* true (kiln tune's default): repeated runs, the caches as the last run
                           left them; false: cold, each timed run after the constants were
                           evicted (measure.c) */
  const unsigned char *sweep; /* cold: a buffer of twice the last-level cache, read through
                                 to empty the caches; made by the session before the children
                                 fork, so they share its pages and fault none in */
  size_t sweep_bytes;
  const char *workdir;  /* temporary files */
  bool accept_noisy;    /* take the samples asked for, disturbed or not, rather than up to
                           three times as many to find undisturbed ones (--keep-noisy) */
  const char *runner;       /* "HOST:PORT": run candidates on a kiln-runner (runner/), or NULL: here */
  const char *runner_token; /* its shared token */
} kn_at_measure_opts;

typedef struct kn_at_result {
  kn_at_status status;
  double seconds;
  double max_error; /* vs the reference, when compared */
  bool noisy;       /* status OK, but the timing cannot be trusted (detail says why) */
  char detail[160]; /* why it failed, or why it is noisy */
} kn_at_result;

/* ---- the tuning session ---- */
/* What the session tells a strategy about a task when it asks for
 * candidates: its shape, the rule-generated space, its default time, which
 * schedules were measured already, and how to get the features of
 * candidates (lowered in child processes, search.h). */
typedef struct kn_at_task_env {
  int task;
  const kn_at_task_shape *shape;
  const kn_target *t;
  const kn_schedule *space;
  int n_space;
  double default_s;
  void *session;
  bool (*measured)(void *session, int task, const kn_schedule *s);
  /* features of s[0..n) into feats (n x KN_AT_N_FEATURES); ok[i] false when
   * s[i] does not lower */
  void (*featurize)(void *session, int task, const kn_schedule *s, int n, float *feats, bool *ok);
} kn_at_task_env;

/* A search strategy picks the next candidates of a task. The random one
 * shuffles the space (`rank`); the evolutionary one (search.h) proposes
 * new schedules (`propose`), ranked by a cost model fed by `observe` with
 * every measured result (and, at the start, the task's records from an
 * earlier session). */
typedef struct kn_at_strategy {
  void *state;
  /* Fills order[0..n) with a permutation of the space's indices, most
   * promising first; called once per task. Used when propose is NULL. */
  void (*rank)(void *state, int task, const kn_schedule *space, int n, int *order);
  void (*observe)(void *state, int task, const kn_schedule *s, const kn_at_result *r);
  /* Optional: up to `max` schedules of the task never measured, each one
   * valid for its shape, none twice; returns how many (0: nothing left). */
  int (*propose)(void *state, const kn_at_task_env *env, kn_schedule *out, int max);
} kn_at_strategy;
kn_at_strategy kn_at_strategy_random(uint64_t *seed);

typedef enum kn_at_fault { KN_AT_FAULT_NONE, KN_AT_FAULT_CRASH, KN_AT_FAULT_WRONG, KN_AT_FAULT_HANG, KN_AT_FAULT_BUSY } kn_at_fault;

typedef struct kn_at_options {
  int trials;              /* candidates beyond the defaults, over all tasks */
  double time_budget;      /* seconds, 0 = none */
  const char *log_path;    /* JSONL, appended */
  int build_workers;       /* concurrent builds (2) */
  kn_at_measure_opts measure;
  kn_at_strategy strategy;
  volatile sig_atomic_t *stop; /* set (by SIGINT) to end the session cleanly */
  FILE *progress;              /* progress and summary lines, or NULL */
  double progress_interval;    /* seconds between progress lines when not a TTY (0: 5) */
  int early_stop;              /* stop when no task improved > 1% in this many trials (0: default) */
  int confirm_rounds;          /* end: time each task's best and default again, in turns (0: no) */
  bool no_early_stop;
  bool keep_noisy;             /* record timings that stay noisy as ok, marked "noisy" */
  /* tests: the first candidates measured crash / are wrong / hang / are
   * timed under planted load (planted) */
  kn_at_fault plant[4];
  int n_plant;
} kn_at_options;

typedef struct kn_at_summary {
  int tasks, kernels, measured, resumed;
  int by_status[KN_AT_STATUS_COUNT];
  int timings, noisy_timings, remeasured; /* every timing (defaults, candidates, confirms); of them noisy
                                           * at the end; re-timed because noisy */
  double default_e2e, best_e2e; /* seconds: sum over kernels */
  bool interrupted;
  bool early_stopped, out_of_time;
  double elapsed;
  double search_s; /* spent proposing candidates (features, model, evolution) */
  int confirmed, confirmed_default; /* tasks timed again at the end; of them, won by the default */
  double confirm_s;                 /* spent on that */
} kn_at_summary;

/* Tunes the kernels of g (optimized, fused into `groups`) for target t.
 * g is never modified: every build happens in a child process. */
int kn_at_tune(const kn_graph *g, const kn_groups *groups, const kn_target *t, const kn_at_options *o,
               kn_at_summary *sum, kn_diag *d);
/* The same over alternatives: the model compiled different ways (by the
 * rule, with direct, Winograd F(2x2, 3x3) and F(4x4, 3x3) convolutions), one task per workload
 * key over all of them (its weight: the most kernels it has in one), so the
 * scheduler spends the budget wherever it lowers the estimate most; the
 * estimate is that of the fastest alternative by best times, and the first
 * one's by default times. `kiln compile --tuning-log` then picks per
 * convolution. */
#define KN_AT_MAX_ALTS 4
int kn_at_tune_alternatives(const kn_graph *const *gs, const kn_groups *const *grs, int n_alts, const kn_target *t,
                            const kn_at_options *o, kn_at_summary *sum, kn_diag *d);

#endif
