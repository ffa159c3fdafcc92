/* pipeline.c — the compiler's pipeline, top to bottom, as one list of calls:
 *
 *   ONNX -> graph IR -> shape inference -> graph passes -> fusion groups
 *        -> per group: TE -> schedule -> loop IR -> plan -> LLVM -> artifact
 *
 * Each stage can be printed with --dump-after=STAGE. */
#include "tools/pipeline.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "autotune/autotune.h"
#include "codegen/codegen.h"
#include "frontend/onnx_load.h"
#include "ir/passes/passes.h"
#include "ir/shape/shape_infer.h"
#include "schedule/schedule.h"
#include "tools/plan_build.h"

const char *const kn_pipeline_stages[] = {"import",        "decompose_attention", "fold_constants", "dce",
                                          "fold_conv_bn",  "layout",              "winograd",       "explicit_pad",
                                          "scale_weights", "split_pool",          "cleanup",        "fuse",
                                          "te",            "loops",               NULL};

static bool dump_is(const kn_compile_opts *o, const char *stage) {
  return o->dump_after && !strcmp(o->dump_after, stage);
}

static void dump_graph(const kn_compile_opts *o, const char *stage, const kn_graph *g) {
  if (!dump_is(o, stage)) return;
  fprintf(stdout, "# after %s\n", stage);
  kn_graph_print(g, stdout);
}

bool kn_pipeline_stage_valid(const char *name) {
  for (int i = 0; kn_pipeline_stages[i]; i++)
    if (!strcmp(kn_pipeline_stages[i], name)) return true;
  return false;
}

/* One graph pass followed by re-inference of shapes, so every pass may rely
 * on inferred shapes on entry. */
static int after_pass(const kn_compile_opts *o, const char *stage, kn_graph *g, kn_diag *d) {
  if (kn_infer_shapes(g, d) < 0) return -1;
#ifndef NDEBUG
  /* debug builds check the graph's invariants after every pass */
  if (kn_graph_verify(g, d) < 0) return -1;
#endif
  dump_graph(o, stage, g);
  return 0;
}

static int run_pass(const kn_compile_opts *o, const char *stage, int (*pass)(kn_graph *, kn_diag *),
                    kn_graph *g, kn_diag *d) {
  return pass(g, d) < 0 ? -1 : after_pass(o, stage, g, d);
}

static int finish_load(int64_t max_batch, kn_graph *g, kn_diag *d) {
  if (max_batch < 1) return kn_diag_error(d, "--max-batch must be at least 1");
  g->max_batch = max_batch;
  if (kn_pass_expand_composites(g, d) < 0) return -1;
  /* shapes that depend on input values, compiled for the declared ones with
   * run-time checks; then shape inference */
  return kn_pass_runtime_values(g, d);
}

int kn_pipeline_load_bound(const kn_compile_opts *o, kn_graph *g, kn_diag *d) {
  int rc = o->model_data ? kn_fe_load_onnx_buffer(o->model_data, o->model_size, NULL, g, d)
                         : kn_fe_load_onnx(o->model, g, d);
  if (rc < 0) return -1;
  if (kn_bind_inputs(g, o->binds, o->n_binds, d) < 0) return -1;
  /* after binding: a bound input may be what a composite's rewrite reads */
  return finish_load(o->max_batch, g, d);
}

int kn_pipeline_needed_bindings(const kn_compile_opts *o, kn_arena *arena, kn_bind_need **needs, int *count,
                                kn_diag *d) {
  *needs = NULL;
  *count = 0;
  kn_graph g;
  kn_graph_init(&g);
  int status = -1;
  if (kn_fe_load_onnx(o->model, &g, d) < 0) goto done;
  int n_declared = g.n_inputs;
  int *declared = KN_NEW_ARRAY(arena, int, n_declared + 1);
  memcpy(declared, g.inputs, sizeof *declared * (size_t)n_declared);
  if (kn_bind_inputs(&g, o->binds, o->n_binds, d) < 0) goto done;
  g.max_batch = o->max_batch < 1 ? 1 : o->max_batch;
  kn_diag quiet; /* the compile that failed reported these already */
  kn_diag_init(&quiet);
  /* as kn_pipeline_load_bound; leftovers are not typed. Expansion can
   * refuse too (a Loop trip count, DFT axis ... fed as a graph input). */
  bool *expand_needed = KN_NEW_ARRAY(arena, bool, g.n_values + 1);
  kn_pass_expand_composites_needs(&g, expand_needed, &quiet);
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

int kn_pipeline_load(const char *model, int64_t max_batch, kn_graph *g, kn_diag *d) {
  if (kn_fe_load_onnx(model, g, d) < 0) return -1;
  return finish_load(max_batch, g, d);
}

int kn_pipeline_load_buffer(const uint8_t *data, size_t size, int64_t max_batch, kn_graph *g, kn_diag *d) {
  if (kn_fe_load_onnx_buffer(data, size, NULL, g, d) < 0) return -1;
  return finish_load(max_batch, g, d);
}

const char *const kn_conv_way_name[KN_CONV_WAYS] = {"direct", "winograd", "winograd4"};
const int kn_conv_way_tile[KN_CONV_WAYS] = {0, 2, 4};

/* The way named s, or -1. */
static int conv_way(const char *s) {
  for (int w = 0; w < KN_CONV_WAYS; w++)
    if (!strcmp(s, kn_conv_way_name[w])) return w;
  return -1;
}

bool kn_pipeline_conv_algo_valid(const char *s) { return conv_way(s) >= 0 || !strcmp(s, "auto"); }

static int winograd(const kn_compile_opts *o, kn_graph *g, kn_diag *d) {
  int way = o->conv_algo ? conv_way(o->conv_algo) : -1, tile = way >= 0 ? kn_conv_way_tile[way] : -1;
  if (tile == 0) {
    dump_graph(o, "winograd", g);
    return 0;
  }
  kn_winograd_want want = tile == 2         ? kn_winograd_want_all2
                          : tile == 4       ? kn_winograd_want_all4
                          : o->conv_choice ? kn_conv_choice_want
                                           : kn_winograd_want_default;
  if (kn_pass_winograd(g, want, (void *)o->conv_choice, d) < 0) return -1;
  return after_pass(o, "winograd", g, d);
}

static bool stop_is(const kn_compile_opts *o, const char *stage) {
  return o->stop_after && !strcmp(o->stop_after, stage);
}

int kn_pipeline_optimize(const kn_compile_opts *o, kn_graph *g, kn_diag *d) {
  dump_graph(o, "import", g);
  if (run_pass(o, "decompose_attention", kn_pass_decompose_attention, g, d) < 0) return -1;
  if (run_pass(o, "fold_constants", kn_pass_fold_constants, g, d) < 0) return -1;
  if (run_pass(o, "dce", kn_pass_dce, g, d) < 0) return -1;
  if (run_pass(o, "fold_conv_bn", kn_pass_fold_conv_bn, g, d) < 0) return -1;
  if (run_pass(o, "layout", kn_pass_layout, g, d) < 0) return -1;
  if (winograd(o, g, d) < 0) return -1;
  if (run_pass(o, "explicit_pad", kn_pass_explicit_pad, g, d) < 0) return -1;
  if (run_pass(o, "scale_weights", kn_pass_scale_weights, g, d) < 0) return -1;
  if (run_pass(o, "split_pool", kn_pass_split_pool, g, d) < 0) return -1;
  if (kn_pass_fold_constants(g, d) < 0 || kn_pass_dce(g, d) < 0) return -1;
  if (kn_pass_split_topk(g, d) < 0) return -1;
  if (kn_pass_materialize_outputs(g, d) < 0) return -1;
  if (kn_infer_shapes(g, d) < 0 || kn_graph_toposort(g, d) < 0 || kn_graph_verify(g, d) < 0) return -1;
  dump_graph(o, "cleanup", g);
  return 0;
}

/* A tuning record measured a kernel alone, where a row-pipelined pair
 * (docs/abi.md) is not: a tuned schedule that does not run one row per task
 * (kn_kernel.rows) drops the pair its default would have formed. Such
 * kernels whose default does (kn_kernel_build.default_rows) are rebuilt with
 * it; the plan of that mix says which pairs form, and their members keep the
 * defaults, the others their tuned schedules. Returns how many kept their
 * defaults, or -1. */
static int keep_pairs(kn_graph *g, const kn_groups *groups, const kn_target *t, kn_expr_ctx *ec,
                      const kn_compile_opts *o, kn_arena *arena, kn_kernel_build *kernels, kn_diag *d) {
  kn_kernel_build *mix = KN_NEW_ARRAY(arena, kn_kernel_build, groups->n > 0 ? groups->n : 1);
  int n_rebuilt = 0;
  for (int i = 0; i < groups->n; i++) {
    mix[i] = kernels[i];
    if (kernels[i].kernel->rows || !kernels[i].default_rows) continue;
    kn_kernel_build dflt;
    if (kn_sched_build_kernel_with(g, &groups->groups[i], t, ec, kernels[i].kernel->name, NULL, &dflt, NULL,
                                   NULL, d) < 0)
      return -1;
    mix[i] = dflt;
    n_rebuilt++;
  }
  if (!n_rebuilt) return 0;
  kn_plan trial;
  if (kn_plan_build(g, mix, groups->n, o->prefix, arena, &trial, d) < 0) return -1;
  int kept = 0;
  for (int p = 0; p < trial.n_pipes; p++)
    for (int s = trial.pipes[p].first; s <= trial.pipes[p].first + 1; s++)
      for (int i = 0; i < groups->n; i++)
        if (mix[i].kernel == trial.steps[s].kernel && mix[i].kernel != kernels[i].kernel) {
          kernels[i] = mix[i];
          kept++;
        }
  if (o->verbose)
    fprintf(stderr, "kiln: tuning log: %d kernels keep their defaults, for row-pipelined pairs\n", kept);
  return kept;
}

/* Fills r per plan step from the kernels' build records (replay, in group
 * order); a kernel keep_pairs rebuilt runs its default. */
static int report_steps(kn_compile_report *r, const kn_plan *plan, const kn_kernel_build *kernels,
                        const kn_kernel *const *tuned, int n_groups, const kn_at_replay *replay, kn_diag *d) {
  if (!replay->keys || replay->n_kernels != n_groups)
    return kn_diag_error(d, "compile report: %d kernels built through the tuning log, %d groups", replay->n_kernels,
                         n_groups);
  r->n_steps = plan->n_steps;
  r->keys = KN_NEW_ARRAY(r->arena, const char *, plan->n_steps + 1);
  r->traces = KN_NEW_ARRAY(r->arena, const char *, plan->n_steps + 1);
  r->tuned = KN_NEW_ARRAY(r->arena, bool, plan->n_steps + 1);
  for (int s = 0; s < plan->n_steps; s++) {
    int i = 0;
    while (i < n_groups && kernels[i].kernel != plan->steps[s].kernel) i++;
    if (i == n_groups) return kn_diag_error(d, "compile report: step %d runs no kernel of the model", s);
    r->keys[s] = replay->keys[i];
    r->tuned[s] = replay->tuned_traces[i] && kernels[i].kernel == tuned[i];
    r->traces[s] = r->tuned[s] ? replay->tuned_traces[i] : replay->default_traces[i];
  }
  return 0;
}

int kn_compile(const kn_compile_opts *o, kn_diag *d) {
  clock_t start = clock();
  kn_target target;
  if (kn_target_parse(o->target, &target, d) < 0 || kn_cg_check_target(&target, d) < 0) return -1;

  int status = -1;
  kn_graph g;
  kn_graph_init(&g);
  kn_arena arena;
  kn_arena_init(&arena);
  kn_expr_ctx ec = {.arena = &arena};
  kn_at_log tuning = {0};
  char tstr[800];
  kn_at_target_string(&target, tstr, sizeof tstr);
  if (o->tuning_log) {
    if (kn_at_log_load(o->tuning_log, tstr, false, stderr, &tuning, d) < 0) goto done;
    if (tuning.other_target)
      fprintf(stderr, "kiln: note: %s: %d records for other targets ignored (this target: %s)\n", o->tuning_log,
              tuning.other_target, tstr);
  }
  /* with a tuning log, each Winograd-eligible conv takes the algorithm
   * whose kernels measured faster (conv_algo.c) */
  kn_compile_opts measured = *o;
  kn_conv_choice choice;
  bool by_log = o->tuning_log && (!o->conv_algo || !strcmp(o->conv_algo, "auto"));
  if (kn_pipeline_load_bound(o, &g, d) < 0) goto done;
  if (by_log && kn_conv_choose(o, &tuning, &arena, &choice, d) < 0) goto done;
  if (by_log) {
    measured.conv_choice = &choice;
    if (o->verbose)
      fprintf(stderr,
              "kiln: tuning log: %d convs by measurement (%d Winograd F(2x2,3x3), %d F(4x4,3x3), %d direct), %d by "
              "the rule\n",
              choice.n, choice.n_winograd2, choice.n_winograd4, choice.n - choice.n_winograd2 - choice.n_winograd4,
              choice.by_rule);
  }
  if (kn_pipeline_optimize(&measured, &g, d) < 0) goto done;
  if (stop_is(o, "cleanup")) goto stopped;

  kn_groups groups;
  if (kn_sched_fuse(&g, &arena, &groups, d) < 0) goto done;
  if (dump_is(o, "fuse")) {
    for (int i = 0; i < groups.n; i++) {
      printf("kernel k%d:", i);
      for (int k = 0; k < groups.groups[i].n_nodes; k++)
        printf(" %s(%s)", g.nodes[groups.groups[i].nodes[k]].name, g.nodes[groups.groups[i].nodes[k]].op_type);
      printf("\n");
    }
  }
  if (stop_is(o, "fuse")) goto stopped;

  /* schedules: the rule-based defaults, or the best records of a tuning log */
  kn_at_replay replay = {.log = &tuning, .arena = &arena, .defaults_only = o->replay_defaults,
                         .alone = o->replay_alone, .rank = o->replay_alone ? o->replay_rank : 0};
  if (o->report) {
    kn_arena *ra = o->report->arena;
    replay.cap = groups.n;
    replay.keys = KN_NEW_ARRAY(ra, const char *, groups.n + 1);
    replay.default_traces = KN_NEW_ARRAY(ra, const char *, groups.n + 1);
    replay.tuned_traces = KN_NEW_ARRAY(ra, const char *, groups.n + 1);
    replay.arena = ra;
  }
  kn_sched_provider provider = kn_at_replay_provider(&replay);
  kn_kernel_build *kernels = KN_NEW_ARRAY(&arena, kn_kernel_build, groups.n > 0 ? groups.n : 1);
  /* with a tuning log, --dump-after=te / loops print the schedules the
   * artifact gets: after keep_pairs, which may give kernels their defaults */
  FILE *te = dump_is(o, "te") ? stdout : NULL, *loops = dump_is(o, "loops") ? stdout : NULL;
  bool dump_later = o->tuning_log && (te || loops);
  int failures = 0;
  for (int i = 0; i < groups.n; i++) {
    const char *name = kn_arena_printf(&arena, "%s_k%d", o->prefix, i);
    if (kn_sched_build_kernel_with(&g, &groups.groups[i], &target, &ec, name, o->tuning_log ? &provider : NULL,
                                   &kernels[i], dump_later ? NULL : te, dump_later ? NULL : loops, d) < 0)
      failures++;
  }
  if (failures) goto done;
  const kn_kernel **tuned = KN_NEW_ARRAY(&arena, const kn_kernel *, groups.n > 0 ? groups.n : 1);
  for (int i = 0; i < groups.n; i++) tuned[i] = kernels[i].kernel;
  int kept = o->tuning_log ? keep_pairs(&g, &groups, &target, &ec, o, &arena, kernels, d) : 0;
  if (kept < 0) goto done;
  if (o->tuning_log && o->verbose)
    fprintf(stderr, "kiln: tuning log: %d of %d kernels use tuned schedules\n", replay.n_tuned - kept,
            replay.n_kernels);
  if (dump_later) {
    kn_at_replay again = {.log = &tuning, .arena = &arena};
    kn_sched_provider tuned_provider = kn_at_replay_provider(&again);
    for (int i = 0; i < groups.n; i++) {
      kn_kernel_build shown;
      bool as_tuned = kernels[i].kernel == tuned[i];
      if (kn_sched_build_kernel_with(&g, &groups.groups[i], &target, &ec, kernels[i].kernel->name,
                                     as_tuned ? &tuned_provider : NULL, &shown, te, loops, d) < 0)
        goto done;
    }
  }
  if (stop_is(o, "loops")) goto stopped;

  kn_plan plan;
  if (kn_plan_build(&g, kernels, groups.n, o->prefix, &arena, &plan, d) < 0) goto done;
  if (o->report && report_steps(o->report, &plan, kernels, tuned, groups.n, &replay, d) < 0) goto done;
  if (stop_is(o, "plan")) goto stopped;
  if (kn_cg_package(&plan, &target, o->output, d) < 0) goto done;
  if (o->verbose)
    fprintf(stderr, "kiln: compiled %s -> %s: %d kernels (%d row-pipelined pairs), workspace %lld bytes, %.2f s cpu\n",
            o->model, o->output, plan.n_steps, plan.n_pipes, (long long)plan.workspace_bytes,
            (double)(clock() - start) / CLOCKS_PER_SEC);
stopped:
  status = 0;
done:
  if (o->tuning_log) kn_at_log_free(&tuning);
  kn_graph_free(&g);
  kn_arena_free(&arena);
  return status;
}
