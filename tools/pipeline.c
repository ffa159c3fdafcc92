/* pipeline.c — the compiler, top to bottom: the table `steps` below lists
 * every step from the ONNX file to the artifact, in the order they run,
 *
 *   load -> expand -> (run-time values) -> infer -> optimise -> fuse
 *        -> schedule (te) -> lower (loops) -> plan -> emit + package
 *
 * one line each. A step's name is the stage `--dump-after=NAME` prints after
 * and `stop_after` stops after; the docs list the same names. Steps are
 * plain functions of one kn_pipe, which carries the data from one step to the
 * next; every entry point (kn_compile, the loaders `kiln tune` and the
 * fuzzers use, kn_pipeline_optimize) runs a range of this one table.
 *
 * Steps that end a stage a user recognises (load, optimize, fuse, schedule,
 * plan, codegen) name it; kn_compile can print each stage's wall time on
 * stderr as it ends (o->progress): a long compile says where it is. */
#include "tools/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "codegen/cuda.h"
#include "frontend/onnx_load.h"
#include "ir/loop/gpu_eval.h"
#include "ir/passes/passes.h"
#include "ir/shape/shape_infer.h"
#include "schedule/schedule.h"
#include "tools/plan_build.h"
#include "tools/tuned.h"

/* What flows between the steps. */
typedef struct kn_pipe {
  const kn_compile_opts *o;
  kn_graph *g;
  kn_diag *d;
  kn_arena *arena;
  kn_target target;
  kn_expr_ctx ec;
  int typed;                  /* shapes infer without the run-time value steps: 1, 0, -1 not tried yet */
  bool checks_added;          /* value_checks added checks: shapes must be inferred again */
  bool *expand_needed;        /* kn_pipeline_needed_bindings: inputs inline_control needs the value of */
  bool tuning;                /* o->tuning_log was loaded into `tuned` */
  kn_tuned tuned;
  const kn_conv_algo_choice *conv_algo_choice; /* per conv, from the tuning log; else o->conv_algo_choice */
  kn_groups groups;
  kn_kernel_build *kernels;
  int *first_var; /* per kernel: the expression context's next_var_id when it was built */
  kn_plan plan;
  /* GPU targets: the plan's kernels as CUDA C, compiled */
  const char *cuda_source;
  kn_cuda_launch *launches;
  kn_cuda_module cuda_module;
  struct progress *progress; /* kn_compile's stage times, or NULL */
} kn_pipe;

typedef int (*step_fn)(kn_pipe *p);
typedef void (*dump_fn)(kn_pipe *p, FILE *out);

/* Step flags. RETYPE: shapes are inferred again after the step (and the
 * graph verified, in debug builds), unless it returned 1 (nothing changed).
 * UNTYPED: the step runs only when the shapes do not infer without it. */
enum { RETYPE = 1, UNTYPED = 2 };

typedef struct step {
  const char *name;
  step_fn run;
  unsigned flags;
  dump_fn dump;      /* what --dump-after prints; NULL: not a stage to print */
  const char *stage; /* the stage of the progress lines this step ends, or NULL */
} step;

/* ---- the steps ---------------------------------------------------------------------- */

static int load(kn_pipe *p) {
  const kn_compile_opts *o = p->o;
  int rc = o->model_data
               ? kn_fe_load_onnx_buffer_dims(o->model_data, o->model_size, NULL, o->dims, o->n_dims, p->g, p->d)
               : kn_fe_load_onnx_dims(o->model, o->dims, o->n_dims, p->g, p->d);
  if (rc < 0) return -1;
  /* before the expansion: a bound input may be what a composite's rewrite reads */
  if (kn_bind_inputs(p->g, o->binds, o->n_binds, p->d) < 0) return -1;
  if (o->max_batch < 1) return kn_diag_error(p->d, "--max-batch must be at least 1");
  p->g->max_batch = o->max_batch;
  return 0;
}

static int decompose(kn_pipe *p) { return kn_pass_decompose(p->g, p->d); }
static int inline_control(kn_pipe *p) { return kn_pass_inline_control_needs(p->g, p->expand_needed, p->d); }
static int data_dependent(kn_pipe *p) { return kn_pass_data_dependent(p->g, p->d); }
static int runtime_slices(kn_pipe *p) { return kn_pass_runtime_slices(p->g, p->d); }
static int runtime_resize(kn_pipe *p) { return kn_pass_runtime_resize(p->g, p->d); }
static int specialize(kn_pipe *p) { return kn_pass_specialize(p->g, p->d); }

/* --check-indices: on the imported graph, so only the model's own gathers
 * and scatters are checked (pass_index_checks.c). */
static int index_checks(kn_pipe *p) {
  if (!p->o->check_indices) return 1;
  int n = kn_pass_index_checks(p->g, p->d);
  p->checks_added |= n > 0;
  return n < 0 ? -1 : 0;
}

static int value_checks(kn_pipe *p) {
  int n = kn_pass_value_checks(p->g, p->d);
  p->checks_added |= n > 0;
  return n < 0 ? -1 : 0;
}

/* Shape inference, reporting what fails. With --dim, its diagnostics start
 * "with --dim NAME=VALUE ...: ": a shape conflict after pinning most often
 * means a pinned value the model cannot take (a size fixed at export), and
 * the line must name the dims that caused it. */
static int infer_shapes(kn_pipe *p) {
  int first = p->d ? p->d->count : 0;
  if (kn_infer_shapes(p->g, p->d) == 0) return 0;
  const kn_compile_opts *o = p->o;
  if (o->n_dims == 0) return -1;
  char prefix[1024] = "with";
  size_t len = strlen(prefix);
  for (int i = 0; i < o->n_dims && len < sizeof prefix; i++)
    len += (size_t)snprintf(prefix + len, sizeof prefix - len, " --dim %s=%lld", o->dims[i].name,
                            (long long)o->dims[i].value);
  if (len < sizeof prefix) snprintf(prefix + len, sizeof prefix - len, ": ");
  kn_diag_prefix(p->d, first, prefix);
  return -1;
}

/* A model output that declares a pinned dim must come out at the pinned
 * value: else the model does not take the value it was given (a size fixed
 * at export), and its answer would not be the one the user asked for. */
static int check_pinned_outputs(kn_pipe *p) {
  const kn_graph *g = p->g;
  const kn_compile_opts *o = p->o;
  int rc = 0;
  for (int i = 0; g->out_pinned && i < g->n_outputs - g->n_checks; i++) {
    const kn_value *v = &g->values[g->outputs[i]];
    for (int k = 0; k < KN_MAX_RANK; k++) {
      const char *name = g->out_pinned[i * KN_MAX_RANK + k];
      int pin = 0;
      while (name && pin < o->n_dims && strcmp(o->dims[pin].name, name)) pin++;
      if (!name || pin == o->n_dims) continue;
      if (k < v->shape.rank && !((v->shape.batch_mask >> k) & 1) && v->shape.dim[k] == o->dims[pin].value) continue;
      char shape[256];
      rc = kn_diag_error(p->d, "with --dim %s=%lld: output '%s' declares dim %d as '%s', but its shape is %s", name,
                         (long long)o->dims[pin].value, v->name, k, name, kn_shape_str(&v->shape, shape, sizeof shape));
    }
  }
  return rc;
}

/* The first shape inference that must succeed; it reports what does not. */
static int infer(kn_pipe *p) {
  if ((p->typed != 1 || p->checks_added) && infer_shapes(p) < 0) return -1; /* else typed when tried, unchanged since */
  return check_pinned_outputs(p);
}

/* With a tuning log, each Winograd-eligible conv takes the algorithm whose
 * kernels measured faster. */
static int tuned_convs(kn_pipe *p) {
  if (!p->tuning) return 0;
  bool failed;
  p->conv_algo_choice = kn_tuned_choose_convs(&p->tuned, p->o, p->arena, &failed, p->d);
  return failed ? -1 : 0;
}

static int decompose_attention(kn_pipe *p) { return kn_pass_decompose_attention(p->g, p->d); }
static int fold_constants(kn_pipe *p) { return kn_pass_fold_constants(p->g, p->d); }
static int cse(kn_pipe *p) { return kn_pass_cse(p->g, p->d); }
static int dce(kn_pipe *p) { return kn_pass_dce(p->g, p->d); }
static int fold_conv_bn(kn_pipe *p) { return kn_pass_fold_conv_bn(p->g, p->d); }
static int layout(kn_pipe *p) { return kn_pass_layout(p->g, p->d); }

/* --conv-algo names an algorithm for every conv, else the tuning log chooses per
 * conv, else the default rule. Returns 1 (unchanged) for "direct". */
static int winograd(kn_pipe *p) {
  const kn_compile_opts *o = p->o;
  int algo = o->conv_algo ? kn_conv_algo_of(o->conv_algo) : -1, tile = algo >= 0 ? kn_conv_algo_tile[algo] : -1;
  if (tile == 0) return 1;
  const kn_conv_algo_choice *choice = p->conv_algo_choice ? p->conv_algo_choice : o->conv_algo_choice;
  kn_winograd_want want = tile == 2 ? kn_winograd_want_all2
                          : tile == 4 ? kn_winograd_want_all4
                          : choice    ? kn_conv_algo_want
                                      : kn_winograd_want_default;
  return kn_pass_winograd(p->g, want, (void *)choice, p->d);
}

static int explicit_pad(kn_pipe *p) { return kn_pass_explicit_pad(p->g, p->d); }
static int scale_weights(kn_pipe *p) { return kn_pass_scale_weights(p->g, p->d); }
static int split_pool(kn_pipe *p) { return kn_pass_split_pool(p->g, p->d); }

/* What the passes above left foldable, repeated or dead. */
static int cleanup(kn_pipe *p) {
  return kn_pass_fold_constants(p->g, p->d) < 0 || kn_pass_cse(p->g, p->d) < 0 || kn_pass_dce(p->g, p->d) < 0
             ? -1
             : 0;
}

/* --precision: float32 stored in 16 bits from here on; constants convert
 * after every fold computed them in float32. */
static int precision(kn_pipe *p) { return kn_pass_precision(p->g, kn_precision_of(p->o->precision), p->d); }

static int split_topk(kn_pipe *p) { return kn_pass_split_topk(p->g, p->d); }

/* Every output gets storage of its own; the graph leaves typed, sorted and
 * verified, in every build. */
static int outputs(kn_pipe *p) {
  if (kn_pass_materialize_outputs(p->g, p->d) < 0) return -1;
  if (infer_shapes(p) < 0 || kn_graph_toposort(p->g, p->d) < 0) return -1;
  return kn_graph_verify(p->g, p->d);
}

static int fuse(kn_pipe *p) { return kn_sched_fuse(p->g, p->arena, &p->groups, p->d); }

/* Every group's TE, scheduled (by the rules, or the tuning log's best
 * record) and lowered to loop IR; with a tuning log, the kernels of
 * row pipes then keep their defaults. */
static int schedule(kn_pipe *p) {
  int n = p->groups.n;
  const kn_sched_provider *provider = p->tuning ? kn_tuned_provider(&p->tuned, p->o, n, p->arena) : NULL;
  p->kernels = KN_NEW_ARRAY(p->arena, kn_kernel_build, n > 0 ? n : 1);
  p->first_var = KN_NEW_ARRAY(p->arena, int, n > 0 ? n : 1);
  int failures = 0;
  for (int i = 0; i < n; i++) {
    const char *name = kn_arena_printf(p->arena, "%s_k%d", p->o->prefix, i);
    p->first_var[i] = p->ec.next_var_id;
    if (kn_sched_build_kernel_with(p->g, &p->groups.groups[i], &p->target, &p->ec, name, provider, &p->kernels[i],
                                   NULL, NULL, p->d) < 0)
      failures++;
  }
  if (failures) return -1;
  if (!p->tuning) return 0;
  return kn_tuned_keep_pipes(&p->tuned, p->g, &p->groups, &p->target, &p->ec, p->o, p->arena, p->kernels, p->d) < 0
             ? -1
             : 0;
}

static int plan(kn_pipe *p) {
  if (kn_plan_build(p->g, p->kernels, p->groups.n, p->o->prefix, p->arena, &p->plan, p->d) < 0) return -1;
  if (p->o->on_plan && p->o->on_plan(p->o->on_plan_ctx, p->g, &p->plan, p->d) != 0) return -1;
  if (p->o->report) return kn_tuned_report(&p->tuned, p->o->report, &p->plan, p->kernels, p->groups.n, p->d);
  return 0;
}

/* GPU targets: every kernel checked (kn_loop_verify_gpu), emitted as one
 * CUDA C translation unit and compiled by NVRTC for each architecture;
 * `-v` prints each kernel's launch and ptxas's registers, spills and
 * shared memory. Kernels equal up to renaming (a model's repeated layers)
 * are emitted once and launched under the first one's name: NVRTC's time
 * grows with the source. Nothing to do for CPU targets. */
static int cuda(kn_pipe *p) {
  if (p->target.arch != KN_ARCH_CUDA) return 0;
  int n = p->plan.n_steps, n_unique = 0, failures = 0;
  const kn_kernel **unique = KN_NEW_ARRAY(p->arena, const kn_kernel *, n + 1);
  const char **names = KN_NEW_ARRAY(p->arena, const char *, n + 1);
  int *emitted_as = KN_NEW_ARRAY(p->arena, int, n + 1); /* step -> index in unique */
  const kn_kernel **ks = KN_NEW_ARRAY(p->arena, const kn_kernel *, n + 1);
  int *first = KN_NEW_ARRAY(p->arena, int, n + 1);
  p->launches = KN_NEW_ARRAY(p->arena, kn_cuda_launch, n + 1);
  kn_gpu_limits limits = {.max_threads = 1024, .max_shared_bytes = kn_cuda_max_shared(&p->target)};
  for (int i = 0; i < n; i++) ks[i] = p->plan.steps[i].kernel;
  kn_kernels_group(ks, n, first);
  for (int i = 0; i < n; i++) {
    const kn_kernel *k = ks[i];
    if (kn_loop_verify_gpu(k, &limits, p->d) < 0 || kn_cuda_launch_info(k, &p->launches[i], p->d) < 0) {
      failures++;
      continue;
    }
    if (first[i] == i) {
      unique[n_unique] = k;
      names[n_unique++] = k->name;
    }
    emitted_as[i] = emitted_as[first[i]];
    p->launches[i].name = names[emitted_as[i]];
  }
  if (failures || kn_cuda_emit(unique, n_unique, p->arena, &p->cuda_source, p->d) < 0) return -1;
  if (p->o->stop_after && !strcmp(p->o->stop_after, "cuda") && !p->o->verbose) return 0; /* the text is enough */
  if (!kn_nvrtc_available(p->d) ||
      kn_nvrtc_compile(p->cuda_source, names, n_unique, &p->target, p->arena, &p->cuda_module, p->d) < 0)
    return -1;
  if (p->o->verbose)
    for (int i = 0; i < n; i++) {
      const kn_cuda_launch *l = &p->launches[i];
      fprintf(stderr, "kiln: %s: block %dx%dx%d, dynamic shared %lld bytes", p->plan.steps[i].kernel->name, l->block[0],
              l->block[1], l->block[2], (long long)l->shared_bytes);
      if (strcmp(l->name, p->plan.steps[i].kernel->name)) fprintf(stderr, " (runs %s)", l->name);
      for (int s = 0; s < p->target.n_sm; s++) {
        const kn_cuda_resources *r = &p->cuda_module.resources[emitted_as[i] * p->target.n_sm + s];
        fprintf(stderr, "; sm_%d: %d registers, %lld bytes spill stores, %lld spill loads, %lld bytes shared", r->sm,
                r->registers, (long long)r->spill_stores, (long long)r->spill_loads, (long long)r->shared_bytes);
      }
      fputc('\n', stderr);
    }
  return 0;
}

/* LLVM IR (or C), optimised and emitted, linked with the runtime, the header
 * written, renamed into place. */
static int package(kn_pipe *p) {
  if (p->target.arch == KN_ARCH_CUDA)
    return kn_cg_package_cuda(&p->plan, &p->target, &p->cuda_module, p->launches, p->o->output, p->o->header,
                              p->d);
  return kn_cg_package(&p->plan, &p->target, p->o->output, p->o->header, p->d);
}

/* ---- what --dump-after prints ---------------------------------------------------------- */

static void dump_graph(kn_pipe *p, FILE *out) { kn_graph_print(p->g, out); }

static void dump_groups(kn_pipe *p, FILE *out) {
  for (int i = 0; i < p->groups.n; i++) {
    fprintf(out, "kernel k%d:", i);
    for (int k = 0; k < p->groups.groups[i].n_nodes; k++) {
      const kn_node *n = &p->g->nodes[p->groups.groups[i].nodes[k]];
      fprintf(out, " %s(%s)", n->name, n->op_type);
    }
    fprintf(out, "\n");
  }
}

/* The TE or loop IR of each kernel as the artifact gets it: built again
 * with the schedule it runs, printing, its variables numbered as in the
 * first build. */
static void dump_kernels(kn_pipe *p, FILE *te, FILE *loops) {
  kn_at_replay again = {.log = &p->tuned.log, .arena = p->arena}; /* counts nothing the report reads */
  kn_sched_provider tuned = kn_at_replay_provider(&again);
  for (int i = 0; i < p->groups.n; i++) {
    kn_kernel_build shown;
    kn_expr_ctx ec = {.arena = p->arena, .next_var_id = p->first_var[i]};
    bool runs_record = p->tuning && kn_tuned_runs_record(&p->tuned, p->kernels, i);
    if (kn_sched_build_kernel_with(p->g, &p->groups.groups[i], &p->target, &ec, p->kernels[i].kernel->name,
                                   runs_record ? &tuned : NULL, &shown, te, loops, p->d) < 0)
      return;
  }
}
static void dump_te(kn_pipe *p, FILE *out) { dump_kernels(p, out, NULL); }
static void dump_cuda(kn_pipe *p, FILE *out) {
  if (p->cuda_source) fputs(p->cuda_source, out);
}
static void dump_loops(kn_pipe *p, FILE *out) { dump_kernels(p, NULL, out); }

/* ---- the table ------------------------------------------------------------------------- */

static const step steps[] = {
    /* load: the ONNX graph as imported, --bind applied */
    {"import", load, 0, dump_graph, NULL},
    {"index_checks", index_checks, 0, dump_graph, NULL},
    /* expand: composite ops into primitive ones, control flow inlined */
    {"decompose", decompose, 0, dump_graph, NULL},
    {"inline_control", inline_control, 0, dump_graph, NULL},
    {"decompose_nested", decompose, 0, dump_graph, NULL}, /* composites that sat inside If / Loop / Scan bodies */
    /* run-time values: shapes that depend on input values, for the declared ones, with run-time checks */
    {"data_dependent", data_dependent, UNTYPED, dump_graph, NULL},
    {"runtime_slices", runtime_slices, UNTYPED, dump_graph, NULL},
    {"runtime_resize", runtime_resize, UNTYPED, dump_graph, NULL},
    {"specialize", specialize, UNTYPED, dump_graph, NULL},
    {"value_checks", value_checks, 0, dump_graph, NULL},
    /* infer */
    {"infer", infer, 0, dump_graph, "load"},
    {"tuned_convs", tuned_convs, 0, NULL, NULL},
    /* optimise: shapes re-inferred after each pass */
    {"decompose_attention", decompose_attention, RETYPE, dump_graph, NULL},
    {"fold_constants", fold_constants, RETYPE, dump_graph, NULL},
    {"cse", cse, RETYPE, dump_graph, NULL},
    {"dce", dce, RETYPE, dump_graph, NULL},
    {"fold_conv_bn", fold_conv_bn, RETYPE, dump_graph, NULL},
    {"layout", layout, RETYPE, dump_graph, NULL},
    {"winograd", winograd, RETYPE, dump_graph, NULL},
    {"explicit_pad", explicit_pad, RETYPE, dump_graph, NULL},
    {"scale_weights", scale_weights, RETYPE, dump_graph, NULL},
    {"split_pool", split_pool, RETYPE, dump_graph, NULL},
    {"cleanup", cleanup, 0, dump_graph, NULL},
    {"precision", precision, RETYPE, dump_graph, NULL},
    {"split_topk", split_topk, 0, dump_graph, NULL},
    {"outputs", outputs, 0, dump_graph, "optimize"},
    /* fuse, schedule, lower */
    {"fuse", fuse, 0, dump_groups, "fuse"},
    {"te", schedule, 0, dump_te, NULL},
    {"loops", NULL, 0, dump_loops, "schedule"}, /* lowered by the step above, kernel by kernel: a stage to print */
    /* plan, emit, package */
    {"plan", plan, 0, NULL, "plan"},
    {"cuda", cuda, 0, dump_cuda, NULL}, /* GPU targets: CUDA C through NVRTC */
    {"package", package, 0, NULL, "codegen"},
};
enum { N_STEPS = sizeof steps / sizeof steps[0] };

static int step_index(const char *name) {
  for (int i = 0; i < N_STEPS; i++)
    if (!strcmp(steps[i].name, name)) return i;
  return -1;
}

const char *kn_pipeline_stage(int i) {
  for (int k = 0; k < N_STEPS; k++)
    if (steps[k].dump && i-- == 0) return steps[k].name;
  return NULL;
}

bool kn_pipeline_stage_valid(const char *name) {
  int i = step_index(name);
  return i >= 0 && steps[i].dump;
}

bool kn_pipeline_step_valid(const char *name) { return step_index(name) >= 0; }

/* ---- progress ------------------------------------------------------------------------ */

/* The stages kn_compile has finished, printed once the compile is long
 * enough to want them: a compile that ends before the threshold prints
 * nothing, one that passes it prints the stages done so far, then each as
 * it ends. */
#define MAX_PROGRESS_STAGES 8
typedef struct progress {
  double start, threshold; /* seconds; threshold < 0: never */
  double last;             /* when the previous stage ended */
  int n_done, n_printed;
  const char *names[MAX_PROGRESS_STAGES];
  double seconds[MAX_PROGRESS_STAGES];
} progress;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The threshold o->progress asks for: --progress none, `kiln compile` a
 * terminal's $KILN_PROGRESS_AFTER seconds (default 2), else never. */
static double progress_threshold(const kn_compile_opts *o) {
  if (o->progress == KN_PROGRESS_ALWAYS) return 0;
  if (o->progress != KN_PROGRESS_AUTO || !isatty(STDERR_FILENO)) return -1;
  const char *env = getenv("KILN_PROGRESS_AFTER");
  char *end;
  double after = env && *env ? strtod(env, &end) : 2;
  return env && *env && (*end || !(after >= 0)) ? 2 : after;
}

static void progress_stage(progress *pr, const char *name) {
  double now = now_s();
  if (pr->n_done < MAX_PROGRESS_STAGES) {
    pr->names[pr->n_done] = name;
    pr->seconds[pr->n_done++] = now - pr->last;
  }
  pr->last = now;
  if (pr->threshold < 0 || now - pr->start < pr->threshold) return;
  for (; pr->n_printed < pr->n_done; pr->n_printed++)
    fprintf(stderr, "kiln: %s %.2f s\n", pr->names[pr->n_printed], pr->seconds[pr->n_printed]);
}

/* Runs steps[first .. last]; *stopped when o->stop_after was among them. */
static int run_steps(kn_pipe *p, int first, int last, bool *stopped) {
  const kn_compile_opts *o = p->o;
  for (int i = first; i <= last; i++) {
    const step *s = &steps[i];
    if ((s->flags & UNTYPED) && p->typed < 0)
      p->typed = kn_infer_shapes_quiet(p->g) == 0; /* every real model: the UNTYPED steps are skipped */
    int rc = !s->run || ((s->flags & UNTYPED) && p->typed) ? 1 : s->run(p);
    if (rc < 0) return -1;
    if ((s->flags & RETYPE) && rc == 0) {
      if (infer_shapes(p) < 0) return -1;
#ifndef NDEBUG
      if (kn_graph_verify(p->g, p->d) < 0) return -1;
#endif
    }
    if (s->stage && p->progress) progress_stage(p->progress, s->stage);
    if (s->dump && o->dump_after && !strcmp(o->dump_after, s->name)) {
      fprintf(stdout, "# after %s\n", s->name);
      s->dump(p, stdout);
    }
    if (o->stop_after && !strcmp(o->stop_after, s->name)) {
      if (stopped) *stopped = true;
      return 0;
    }
  }
  return 0;
}

/* Runs the steps from `first` to `last` (names in the table) over g. */
static int run_range(const kn_compile_opts *o, kn_graph *g, const char *first, const char *last, bool *expand_needed,
                     kn_diag *d) {
  kn_pipe p = {.o = o, .g = g, .d = d, .typed = -1, .expand_needed = expand_needed};
  int a = step_index(first), b = step_index(last);
  KN_ASSERT(a >= 0 && b >= a, "pipeline range names no steps of the table");
  return run_steps(&p, a, b, NULL);
}

/* ---- entry points ------------------------------------------------------------------------ */

int kn_pipeline_load_bound(const kn_compile_opts *o, kn_graph *g, kn_diag *d) {
  return run_range(o, g, "import", "infer", NULL, d);
}

int kn_pipeline_load(const char *model, int64_t max_batch, kn_graph *g, kn_diag *d) {
  kn_compile_opts o = {.model = model, .max_batch = max_batch};
  return run_range(&o, g, "import", "infer", NULL, d);
}

int kn_pipeline_load_buffer(const uint8_t *data, size_t size, int64_t max_batch, kn_graph *g, kn_diag *d) {
  kn_compile_opts o = {.model = "<buffer>", .model_data = data, .model_size = size, .max_batch = max_batch};
  return run_range(&o, g, "import", "infer", NULL, d);
}

int kn_pipeline_prepare(const kn_compile_opts *o, kn_graph *g, kn_diag *d) {
  return run_range(o, g, "index_checks", "infer", NULL, d);
}

int kn_pipeline_optimize(const kn_compile_opts *o, kn_graph *g, kn_diag *d) {
  return run_range(o, g, "decompose_attention", "outputs", NULL, d);
}

int kn_pipeline_needed_bindings(const kn_compile_opts *o, kn_arena *arena, kn_bind_need **needs, int *count,
                                kn_diag *d) {
  *needs = NULL;
  *count = 0;
  kn_graph g;
  kn_graph_init(&g);
  int status = -1;
  if (kn_fe_load_onnx_dims(o->model, o->dims, o->n_dims, &g, d) < 0) goto done;
  int n_declared = g.n_inputs;
  int *declared = KN_NEW_ARRAY(arena, int, n_declared + 1);
  memcpy(declared, g.inputs, sizeof *declared * (size_t)n_declared);
  if (kn_bind_inputs(&g, o->binds, o->n_binds, d) < 0) goto done;
  g.max_batch = o->max_batch < 1 ? 1 : o->max_batch;
  kn_diag quiet; /* the compile that failed reported these already */
  kn_diag_init(&quiet);
  /* the expansion steps, then shape inference; leftovers are not typed.
   * Expansion can refuse too (a Loop trip count, DFT axis ... fed as a
   * graph input). */
  bool *expand_needed = KN_NEW_ARRAY(arena, bool, g.n_values + 1);
  run_range(o, &g, "decompose", "decompose_nested", expand_needed, &quiet);
  bool *needed = KN_NEW_ARRAY(arena, bool, g.n_values + 1);
  kn_infer_shapes_needs(&g, needed, &quiet);
  kn_diag_free(&quiet);
  *needs = KN_NEW_ARRAY(arena, kn_bind_need, n_declared + 1);
  for (int i = 0; i < n_declared; i++)
    if (needed[declared[i]] || expand_needed[declared[i]])
      (*needs)[(*count)++] = (kn_bind_need){kn_arena_strdup(arena, g.values[declared[i]].name), i};
  status = 0;
done:
  kn_graph_free(&g);
  return status;
}

const char *const kn_conv_algo_name[KN_CONV_ALGOS] = {"direct", "winograd", "winograd4"};
const int kn_conv_algo_tile[KN_CONV_ALGOS] = {0, 2, 4};

int kn_conv_algo_of(const char *s) {
  for (int w = 0; w < KN_CONV_ALGOS; w++)
    if (!strcmp(s, kn_conv_algo_name[w])) return w;
  return -1;
}

bool kn_pipeline_conv_algo_valid(const char *s) { return kn_conv_algo_of(s) >= 0 || !strcmp(s, "auto"); }

const char *const kn_precision_name[KN_PRECISIONS] = {"fp32", "fp16", "bf16"};

kn_dtype kn_precision_of(const char *s) {
  static const kn_dtype dtype[KN_PRECISIONS] = {KN_DT_F32, KN_DT_F16, KN_DT_BF16};
  if (!s) return KN_DT_F32;
  for (int i = 0; i < KN_PRECISIONS; i++)
    if (!strcmp(s, kn_precision_name[i])) return dtype[i];
  return KN_DT_INVALID;
}

int kn_compile(const kn_compile_opts *o, kn_diag *d) {
  clock_t start = clock();
  if (o->stop_after && !kn_pipeline_step_valid(o->stop_after))
    return kn_diag_error(d, "unknown pipeline step '%s' to stop after", o->stop_after);
  if (kn_precision_of(o->precision) == KN_DT_INVALID)
    return kn_diag_error(d, "--precision: '%s' is not %s, %s or %s", o->precision, kn_precision_name[0],
                         kn_precision_name[1], kn_precision_name[2]);
  kn_graph g;
  kn_graph_init(&g);
  kn_arena arena;
  kn_arena_init(&arena);
  progress pr = {.start = now_s(), .threshold = progress_threshold(o)};
  pr.last = pr.start;
  kn_pipe p = {.o = o, .g = &g, .d = d, .arena = &arena, .ec = {.arena = &arena}, .typed = -1,
               .progress = pr.threshold >= 0 ? &pr : NULL};
  int status = -1;
  bool stopped = false;
  if (kn_target_parse(o->target, &p.target, d) < 0 || kn_cg_check_target(&p.target, d) < 0) goto done;
  if (o->tuning_log && p.target.arch == KN_ARCH_CUDA) {
    kn_diag_error(d, "--tuning-log: GPU targets have no tuning records yet (cuda kernels use their default schedules)");
    goto done;
  }
  if (o->tuning_log) {
    if (kn_tuned_open(&p.tuned, o, &p.target, d) < 0) goto done;
    p.tuning = true;
  }
  if (run_steps(&p, 0, N_STEPS - 1, &stopped) < 0) goto done;
  if (o->verbose && !stopped) {
    int n = p.plan.n_steps;
    const kn_kernel **ks = KN_NEW_ARRAY(&arena, const kn_kernel *, n + 1);
    int *first = KN_NEW_ARRAY(&arena, int, n + 1);
    for (int i = 0; i < n; i++) ks[i] = p.plan.steps[i].kernel;
    fprintf(stderr,
            "kiln: compiled %s -> %s: %d kernels (%d distinct, %d row pipes), workspace %lld bytes, %.2f s cpu\n",
            o->model, o->output, n, kn_kernels_group(ks, n, first), p.plan.n_pipes,
            (long long)p.plan.workspace_bytes, (double)(clock() - start) / CLOCKS_PER_SEC);
  }
  status = 0;
done:
  if (p.tuning) kn_tuned_close(&p.tuned);
  kn_graph_free(&g);
  kn_arena_free(&arena);
  return status;
}
