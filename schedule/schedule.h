/* schedule.h — *how* a kernel computes its TE: fusion groups, the schedule
 * of one kernel, the rules that pick a default schedule, and the lowering of
 * TE + schedule to loop IR.
 *
 * A kernel has one output tensor O (materialised into the output buffer)
 * and zero or more reduction stages R (computes whose body is a reduce),
 * each read by O's body with indices that are O axes (or 0 for size-1
 * dims). Everything else is inlined.
 *
 * The schedule splits each O axis into pieces (outer piece first); the outer
 * piece of a split axis of extent E with inner product T runs over
 * ceil(E/T) tiles starting at min(tile*T, E-T), so the last tile overlaps its
 * neighbour instead of needing a tail loop (recomputing an element writes the
 * same value). The loop order is a permutation of the pieces; the first
 * `n_parallel` loops are fused into one PARALLEL loop; reduction stages are
 * computed at depth `attach` into LOCAL accumulators covering the tile formed
 * by the deeper loops; the deeper loops then run the epilogue that stores O.
 * The innermost loop may be VECTORIZED, loops below `attach` UNROLLED.
 * `unroll_reduce` unrolls the innermost reduction loops of the stages too (a
 * depthwise conv's kw: the tile's pixels then share the input vectors of
 * neighbouring taps, which LLVM loads once).
 *
 * Reduction blocking (`rsplit_factor` > 0, contractions whose single stage
 * covers O one to one): reduction axis `rsplit_axis` of the stage is split
 * into blocks of `rsplit_factor` (the last block may be shorter: no overlap,
 * which would count a term twice). The block loop runs at depth
 * `rsplit_depth` (n_parallel <= depth <= attach), so the loops between it
 * and `attach` sweep tiles that share one block of the reduction operand
 * while it is in cache. Each tile's accumulators start from 0 in the first
 * block and from O's partial sums in the others, stay in registers over the
 * block, and go back to O after it (cache-write); the epilogue runs in the
 * last block only. O axes must then be split without overlap (factors that
 * divide the extent): an overlapped tile would add its block twice.
 *
 * Spatial fusion (`fuse_spatial`, convolutions: O = [.., oh, ow, channels]):
 * the schedule's axes are those of O viewed as [.., 1, oh*ow, channels], so
 * a row tile runs over consecutive output pixels across image rows, and
 * oh = p / ow, ow = p % ow are recovered per row of the tile, outside the
 * reduction loops (implicit GEMM: a 7x7 layer tiles 49 rows, not 7). The
 * output buffer is laid out the same either way. */
#ifndef KN_SCHEDULE_H
#define KN_SCHEDULE_H

#include "ir/graph/graph.h"
#include "ir/loop/loop.h"
#include "codegen/target.h"
#include "ir/te/te.h"

#define KN_SCHED_MAX_SPLIT 3
/* Parameters of one kernel, its output included: fusion stops growing a
 * group before its kernel would read more (the runtime's KN_RT_MAX_ARGS
 * is at least this, tools/plan_build.c asserts). */
#define KN_SCHED_MAX_KERNEL_ARGS 64
#define KN_SCHED_MAX_LOOPS (KN_MAX_RANK * (KN_SCHED_MAX_SPLIT + 1))

typedef struct kn_sched_loop {
  int axis;  /* O axis */
  int piece; /* 0 = outer piece; k = the k-th split factor */
  kn_for_kind kind;
} kn_sched_loop;

typedef struct kn_schedule {
  int n_axes;
  int n_factors[KN_MAX_RANK];
  int64_t factors[KN_MAX_RANK][KN_SCHED_MAX_SPLIT]; /* inner pieces, outer to inner */
  int n_loops;
  kn_sched_loop loops[KN_SCHED_MAX_LOOPS]; /* outer to inner */
  int n_parallel; /* leading loops fused into one PARALLEL loop */
  int attach;     /* depth at which reduction stages are computed */
  int reduce_lanes; /* >1: a stage with a one-element tile reduces its last
                       axis in vectors of this many lanes, then folds them */
  int64_t rsplit_factor; /* >0: reduction blocking (see above); 0: none */
  int rsplit_axis;       /* reduction axis of the stage that is blocked */
  int rsplit_depth;      /* loop depth of the block loop */
  bool rsplit_pack;      /* copy the block's slice of the broadcast operand (the
                            input the vectorized loop does not index) into a
                            local buffer in the order the tiles read it */
  bool fuse_spatial;     /* axes rank-3 and rank-2 as one (see above); not
                            with split_reduction */
  int unroll_reduce;     /* the innermost this many reduction axes of each
                            stage are unrolled (constant extents of at most
                            KN_SCHED_MAX_UNROLL_AXIS, at most
                            KN_SCHED_MAX_UNROLL_REDUCE copies in all) */
} kn_schedule;

/* The longest reduction axis unroll_reduce unrolls, and the most copies of
 * a tile's update it makes (a 5x5 window over both axes is 25). A 1x1
 * conv's 64 input channels unrolled under a 4 x 32 tile kept LLVM busy
 * past the tuner's 120 s build timeout. */
#define KN_SCHED_MAX_UNROLL_AXIS 7
#define KN_SCHED_MAX_UNROLL_REDUCE 25

/* The extents the schedule's axes run over: O's, or with fuse_spatial
 * [.., 1, oh*ow, c]. Returns false when fuse_spatial does not fit O (rank
 * below 3, or a symbolic oh / ow). */
bool kn_sched_axis_extents(const kn_schedule *s, int rank, const int64_t *o_extent, int64_t *out);

/* Prints the schedule as a replayable trace of primitives. */
void kn_sched_print(const kn_schedule *s, FILE *out);

/* ---- fusion: which graph nodes share a kernel ---- */
typedef struct kn_group {
  int anchor;   /* node whose op gives the kernel its shape (first node) */
  int n_nodes;  /* nodes in topological order; the last one's output is O */
  int *nodes;
  int output;   /* graph value written by the kernel */
  int output_index; /* which output of the anchor the kernel computes */
} kn_group;

typedef struct kn_groups {
  int n;
  kn_group *groups;
} kn_groups;

/* Partitions the live non-view, non-constant nodes of g (shapes inferred,
 * topologically sorted) into fusion groups, arena-allocated in `arena`. */
int kn_sched_fuse(const kn_graph *g, kn_arena *arena, kn_groups *out, kn_diag *d);

/* ---- kernels ---- */
typedef struct kn_kernel_build {
  kn_kernel *kernel;
  int n_inputs;   /* graph values passed as params 1..n_inputs (param 0 is O) */
  int *inputs;
  int output;
  /* windowed: the kernel's conv reads graph value window_input through a
   * window of rows, and nothing else of the kernel reads it: output row r
   * reads its rows [r * win_stride - win_pad, + win_extent) */
  bool windowed;
  int window_input;
  int win_stride, win_pad, win_extent;
  /* the rule-based default would run one row per task (kn_kernel.rows),
   * whatever schedule the provider chose */
  bool default_rows;
} kn_kernel_build;

/* Builds the TE of a group, picks its schedule (rules.c), lowers and
 * finalizes it. May add constants to g (weights repacked for the schedule). Params: [0] = output, then each external input value. */
int kn_sched_build_kernel(kn_graph *g, const kn_group *grp, const kn_target *t,
                          kn_expr_ctx *ec, const char *name, kn_kernel_build *out,
                          FILE *dump_te, FILE *dump_loops, kn_diag *d);

/* ---- pieces used by kn_sched_build_kernel ---- */
/* Default schedule for output O of the given stages (rules.c). */
typedef struct kn_sched_hints {
  uint32_t stage_axes;  /* O axes the reduction stages keep (kn_sched_analyze) */
  bool has_stages;
  bool is_contraction;  /* conv / matmul: register-tile the last two axes */
  bool spatial;         /* conv: O is [n, oh, ow, channels] (fuse_spatial fits) */
  bool grouped;         /* a grouped (depthwise) conv */
  int64_t group_cols;   /* a grouped conv: output channels per group (1:
                           depthwise), else 0 */
  bool index_heavy;     /* an injective kernel whose element index costs many
                           integer ops (the Winograd transforms): the
                           innermost axis stays a serial loop, so its index
                           arithmetic is computed once per row */
  int elem_axis;        /* the Winograd input transform: the O axis of a
                           tile's elements (e of V[n, e, t, c]), -1 for
                           other kernels. The default unrolls its loop
                           inside a vector of channels, so that the tile's
                           elements share the input vectors they read (rules.c) */
  int gather_axis;      /* kernels without stages: the O axis, never the
                           last, that indexes the innermost dim of every
                           input O loads, while the last O axis indexes none
                           of them (a layout transpose: each vector is a
                           gather); -1: none. The default moves its loop
                           innermost of the outer loops when the loops inside
                           it would leave L1 before the gathered lines come
                           back (rules.c) */
  bool shared_rhs;      /* a MatMul whose second operand is 2-D: every row of
                           every leading axis of O multiplies the same matrix,
                           so a tile may take its rows across axes rank-3 and
                           rank-2 (fuse_spatial) */
  bool weights_heavy;   /* contraction whose constant operand outweighs its
                           activation: iterate column tiles outermost so each
                           weight tile stays in cache across rows */
  bool rsplit_ok;       /* one stage, same dtype as O, read at O's own indices:
                           partial sums can accumulate in O (kn_sched_reduction_hints) */
  int n_reduce;         /* that stage's reduction axes and their extents (0: symbolic) */
  int64_t reduce_extent[KN_MAX_RANK];
} kn_sched_hints;

/* May a schedule of this kernel take fuse_spatial (rows across axes rank-3
 * and rank-2)? A dense or grouped conv's pixels, or a MatMul's rows that
 * all multiply one matrix. */
static inline bool kn_sched_rows_fuse_ok(const kn_sched_hints *h) { return h->spatial || h->shared_rhs; }

/* ---- caller-supplied schedules (the autotuner, a tuning log) ---- */
/* What a schedule provider sees of one kernel: the group, its TE output O
 * (after fusion), the hints and the target the default was chosen with. */
typedef struct kn_sched_task {
  const kn_graph *g;
  const kn_group *grp;
  const kn_te_tensor *out;
  const kn_sched_hints *hints;
  int n_stages;
  const kn_target *t;
} kn_sched_task;

/* Called once per kernel with *s holding the rule-based default; may
 * replace it with another schedule for the same O. The provider answers for
 * the validity of what it leaves in *s (autotune/ validates before it
 * replaces). */
typedef struct kn_sched_provider {
  void (*choose)(void *ctx, const kn_sched_task *task, kn_schedule *s);
  void *ctx;
} kn_sched_provider;

/* kn_sched_build_kernel with an optional provider (NULL: the default). */
int kn_sched_build_kernel_with(kn_graph *g, const kn_group *grp, const kn_target *t,
                               kn_expr_ctx *ec, const char *name, const kn_sched_provider *provider,
                               kn_kernel_build *out, FILE *dump_te, FILE *dump_loops, kn_diag *d);

void kn_sched_default(const kn_te_tensor *out, const kn_sched_hints *h, const kn_target *t,
                      kn_schedule *s);
/* Registers a vectorized column tile of cf lanes takes once finalize.c has
 * cut it into power-of-two pieces: whole vectors of `lanes`, then one per
 * piece of the rest (24 = 16 + 8 takes two, 40 = 32 + 8 three). */
int64_t kn_sched_vector_regs(int64_t cf, int lanes);
/* The Winograd input transform's loop order (hints.elem_axis), for the
 * default and the search space alike: the axes but elem_axis and the last
 * serial, the first n_parallel of them fused parallel, then per vector of vf
 * channels (the last axis split by vf) elem_axis unrolled, the vector
 * innermost. Overwrites s. */
void kn_sched_elem_inner(kn_schedule *s, int rank, int elem_axis, int64_t vf, int n_parallel);

/* Finds O's reduction stages: their count and the O axes they keep (bit i
 * set: some stage varies with O axis i). Returns -1 with a diagnostic when O
 * reads a stage in a way the lowering cannot fuse. */
int kn_sched_analyze(kn_expr_ctx *ec, kn_te_tensor *out, uint32_t *stage_axes, int *n_stages,
                     kn_diag *d);

/* Fills h->rsplit_ok, n_reduce and reduce_extent for O (after
 * kn_sched_analyze succeeded on it). */
void kn_sched_reduction_hints(kn_expr_ctx *ec, kn_te_tensor *out, kn_sched_hints *h);

typedef struct kn_lower_params {
  int n;
  kn_te_tensor **tensors; /* placeholders */
  kn_buffer **buffers;    /* their param buffers */
  bool prefetch;          /* add prefetch hints where they apply (kn_target.sw_prefetch) */
} kn_lower_params;

/* Lowers O (+ its stages) under schedule s into a loop nest storing into
 * out_buf; placeholder loads become loads of the matching params. */
kn_stmt *kn_sched_lower(kn_expr_ctx *ec, kn_te_tensor *out, const kn_schedule *s,
                        kn_buffer *out_buf, const kn_lower_params *params, kn_diag *d);

/* e with every load of an injective compute replaced by its body (loads of
 * placeholders and reduction stages stay), for schedules that lower a TE
 * by a template of their own (gpu_mma.c). */
kn_expr *kn_sched_inline(kn_expr_ctx *ec, kn_expr *e);
/* e with every placeholder load replaced by a flat load of its buffer. */
kn_expr *kn_sched_to_buffers(kn_expr_ctx *ec, kn_expr *e, const kn_lower_params *params);

/* At most this many reduction stages in one kernel. */
#define KN_SCHED_MAX_STAGES 8

/* One reduction stage of O as the lowering sees it. */
typedef struct kn_sched_stage {
  kn_te_tensor *t;
  kn_expr *source;      /* the reduce's source, inlined: over t's axes and the reduction axes */
  int map[KN_MAX_RANK]; /* per axis of t, the O axis it is read at; -1: constant 0 */
} kn_sched_stage;

/* O's body inlined (O itself a reduction: a load of a stage standing for
 * it), and its reduction stages in dependency order (each after those its
 * source reads) into stages[0 .. *n_stages), for templates that lower a
 * kernel with stages themselves (gpu_rows.c). NULL when kn_sched_analyze
 * would fail. */
kn_expr *kn_sched_stages(kn_expr_ctx *ec, kn_te_tensor *out, kn_sched_stage *stages, int *n_stages);
/* The value a reduction starts from (SUM 0, PROD 1, MAX the lowest value of
 * t, -inf for floats, MIN the highest) and one fold step, as the lowering
 * computes them (MAX and MIN propagate NaN: ir/loop/expr.h). */
kn_expr *kn_sched_reduce_identity(kn_expr_ctx *ec, kn_reduce_op op, kn_dtype t);
kn_expr *kn_sched_reduce_combine(kn_expr_ctx *ec, kn_reduce_op op, kn_expr *acc, kn_expr *v);

/* The loops around a contraction's innermost reduction step, for
 * kn_sched_prefetch: the loops outside the column loop, the outer piece of
 * the column axis, the outer loops inside it (the passes over one column
 * tile), the reduction loops, the tile loops and, innermost, the vector
 * lane. Extents are constants but the outer loops' and the others'. */
typedef struct kn_prefetch_nest {
  kn_var *col;
  int64_t n_cols;
  int n_outer; /* the loops outside the column loop, outermost first */
  kn_var *outer[KN_SCHED_MAX_LOOPS];
  int64_t outer_ext[KN_SCHED_MAX_LOOPS]; /* 0: symbolic */
  int n_pass, n_red, n_tile, n_other;
  kn_var *pass[KN_SCHED_MAX_LOOPS], *red[2 * KN_MAX_RANK], *tile[KN_SCHED_MAX_LOOPS], *lane;
  kn_var *other[KN_SCHED_MAX_LOOPS]; /* passes of symbolic extent (left out of the spread) */
  int64_t pass_ext[KN_SCHED_MAX_LOOPS], red_ext[2 * KN_MAX_RANK], tile_ext[KN_SCHED_MAX_LOOPS];
} kn_prefetch_nest;

/* Prefetch hints for the operand of `src` (a reduction step) read as
 * vectors, one column tile after the other (prefetch.c); NULL when it has
 * none of that form. */
kn_stmt *kn_sched_prefetch(kn_expr_ctx *ec, const kn_expr *src, const kn_prefetch_nest *n);

/* Removes VECTORIZED and UNROLLED loops (vectorize, unroll, simplify). */
kn_stmt *kn_loop_finalize(kn_expr_ctx *ec, kn_stmt *s);
/* Versions each accumulator tile of a finalized nest on whether it touches
 * the border of a padded window (borders.c); returns s when none does. */
kn_stmt *kn_loop_version_borders(kn_expr_ctx *ec, kn_stmt *s);

#endif
