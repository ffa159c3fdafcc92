/* cmd_tune.c — `kiln tune MODEL.onnx --log tune.jsonl [--trials N] ...`:
 * loads and optimizes the model as `kiln compile` does, fuses it, and hands
 * the kernels to the autotuner (autotune/tune.c), which measures candidate
 * schedules on this machine and appends one record per measurement to the
 * log. Ctrl-C ends the session after the current candidate, log intact. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autotune/autotune.h"
#include "autotune/measure.h"
#include "autotune/search.h"
#include "codegen/codegen.h"
#include "runner/client.h"
#include "tools/cmds.h"
#include "tools/model_check.h"
#include "tools/options.h"
#include "tools/pipeline.h"

static volatile sig_atomic_t stop_requested; /* set by SIGINT: the session ends cleanly */

static void on_sigint(int sig) {
  (void)sig;
  stop_requested = 1;
}

/* "crash,wrong,hang,busy": faults planted in the first candidates;
 * "busy-check": load planted during the model check (tests). */
static bool parse_plant(const char *s, kn_at_options *o, bool *busy_check) {
  while (*s) {
    size_t n = strcspn(s, ",");
    if (n == 10 && !strncmp(s, "busy-check", 10)) {
      *busy_check = true;
      s += n + (s[n] == ',');
      continue;
    }
    if (o->n_plant == 4) return false;
    if (n == 5 && !strncmp(s, "crash", 5)) o->plant[o->n_plant++] = KN_AT_FAULT_CRASH;
    else if (n == 5 && !strncmp(s, "wrong", 5)) o->plant[o->n_plant++] = KN_AT_FAULT_WRONG;
    else if (n == 4 && !strncmp(s, "hang", 4)) o->plant[o->n_plant++] = KN_AT_FAULT_HANG;
    else if (n == 4 && !strncmp(s, "busy", 4)) o->plant[o->n_plant++] = KN_AT_FAULT_BUSY;
    else return false;
    s += n;
    if (*s == ',') s++;
  }
  return true;
}

#define KN_TUNE_MAX_BINDS 64

/* What `kiln tune` was asked to do. */
typedef struct tune_args {
  const char *model, *target_spec, *conv_algo;
  const char *binds[KN_TUNE_MAX_BINDS]; /* --bind values, "NAME=FILE", parsed once the arena exists */
  int n_binds;
  const char *dims[KN_TUNE_MAX_BINDS]; /* --dim values, "NAME=VALUE", likewise */
  int n_dims;
  uint64_t seed;
  int64_t max_batch;
  bool evolve;
  int check_rounds; /* --model-check */
  bool plant_busy_check; /* --plant-faults busy-check */
  bool upgrade_log;      /* --upgrade-log */
  kn_at_options o;
} tune_args;

/* The options that take whole numbers, read as int64_t and then copied
 * into the int fields of tune_args and kn_at_options. */
typedef struct tune_wholes {
  int64_t trials, threads, workers, seed, early_stop, confirm, check;
} tune_wholes;

/* The checks and conversions after kn_opts_parse: --plant-faults, the log
 * that must be given, the whole numbers into their int fields, the choices. */
static int finish_args(tune_args *t, const tune_wholes *w, const char *search, const char *cache, const char *plant) {
  kn_at_options *o = &t->o;
  if (plant && !parse_plant(plant, o, &t->plant_busy_check))
    return kn_opts_bad_value("--plant-faults", plant,
                             "a list of crash, wrong, hang and busy (at most 4), and busy-check");
  if (!o->log_path) {
    fprintf(stderr, "kiln: error: tune: no log given: add --log LOG.jsonl\n");
    return 2;
  }
  o->trials = (int)w->trials, o->measure.threads = (int)w->threads, o->build_workers = (int)w->workers;
  o->early_stop = (int)w->early_stop, o->confirm_rounds = (int)w->confirm, t->check_rounds = (int)w->check;
  t->seed = (uint64_t)w->seed;
  t->evolve = !strcmp(search, "evolve");
  o->measure.warm = !strcmp(cache, "warm");
  return KN_OPTS_GO_ON;
}

/* Reads the command line into *t; returns KN_OPTS_GO_ON or the exit status. */
static int parse_args(int argc, char **argv, tune_args *t) {
  *t = (tune_args){.max_batch = 1,
                   .o = {.stop = &stop_requested, .progress = stderr,
                         .measure = {.build_timeout = 120, .run_timeout = 20, .min_repeat_s = 0.01, .samples = 5}}};
  tune_wholes w = {.trials = 100, .workers = 2, .seed = 1, .confirm = 2, .check = 10};
  const char *search = "evolve", *cache = "warm", *plant = NULL;
  static const char *const searches[] = {"evolve", "random", NULL}, *const caches[] = {"warm", "cold", NULL};
  const char *conv_algos[KN_CONV_ALGOS + 2] = {[KN_CONV_ALGOS] = "auto"};
  memcpy(conv_algos, kn_conv_algo_name, sizeof kn_conv_algo_name);
  kn_at_options *o = &t->o;
  const kn_opt opts[] = {
      {"--log", NULL, "PATH",
       "tuning log (JSONL) to append to; re-running with the same\nlog resumes: measured candidates are skipped",
       .str = &o->log_path},
      {"--trials", NULL, "N", "candidates to measure beyond the default schedules (default 100)",
       .whole = &w.trials, .lo = 0, .hi = 1e7},
      {"--time-budget", NULL, "S", "stop after S seconds (default: no limit)", .num = &o->time_budget,
       .lo = 0.001, .hi = 1e9},
      {"--target", NULL, "STRING",
       "target to tune for; must run on this machine or on the runner\n(default: the host)",
       .str = &t->target_spec},
      {"--runner", NULL, "HOST:PORT",
       "measure the candidates on a kiln-runner (a board) instead of here;\nthey are compiled here for --target "
       "and uploaded",
       .str = &o->measure.runner},
      {"--token", NULL, "T", "the runner's shared token (default: $KILN_RUNNER_TOKEN)",
       .str = &o->measure.runner_token},
      {"--max-batch", NULL, "B", "batch the kernels are built and timed for (default 1)", .whole = &t->max_batch,
       .lo = 1, .hi = 1 << 20},
      {"--bind", NULL, "NAME=FILE",
       "tune the model with graph input NAME bound to FILE, as\n`kiln compile --bind` (repeatable; compile with the "
       "same)",
       .list = t->binds, .count = &t->n_binds, .max = KN_TUNE_MAX_BINDS},
      {"--dim", NULL, "NAME=VALUE",
       "tune the model with symbolic dim NAME fixed to VALUE, as\n`kiln compile --dim` (repeatable; compile with the "
       "same)",
       .list = t->dims, .count = &t->n_dims, .max = KN_TUNE_MAX_BINDS},
      {"--conv-algo", NULL, "A",
       "direct|winograd|winograd4|auto, as `kiln compile --conv-algo` (compile\nwith the same: it decides which "
       "kernels there are)",
       .str = &t->conv_algo, .choices = conv_algos},
      {"--threads", NULL, "N", "threads of the measured kernels (default: the CPUs)", .whole = &w.threads, .lo = 1,
       .hi = 256},
      {"--workers", NULL, "N", "concurrent candidate builds (default 2)", .whole = &w.workers, .lo = 1, .hi = 16},
      {"--search", NULL, "evolve|random",
       "evolutionary search guided by a learned cost model (default),\nor the rule-generated space in random order",
       .str = &search, .choices = searches},
      {"--early-stop", NULL, "K",
       "stop when no task's best time improved by more than 1% over\nthe last K trials (default max(64, 4 x tasks))",
       .whole = &w.early_stop, .lo = 1, .hi = 1e7},
      {"--no-early-stop", NULL, NULL, "spend the whole budget", .flag = &o->no_early_stop},
      {"--confirm", NULL, "R",
       "at the end, time each task's best and its default again,\nin turns, R times each; these timings decide "
       "(default 2,\n0 = off; runs after --time-budget)",
       .whole = &w.confirm, .lo = 0, .hi = 100},
      {"--progress-interval", NULL, "S",
       "seconds between progress lines when stderr is not a terminal\n(default 5; on a terminal one line is "
       "refreshed in place)",
       .num = &o->progress_interval, .lo = 0.01, .hi = 3600},
      {"--seed", NULL, "S", "seed of the search (default 1)", .whole = &w.seed, .lo = 0, .hi = 1e15},
      {"--run-timeout", NULL, "S", "a candidate running longer counts as 'timeout' (default 20)",
       .num = &o->measure.run_timeout, .lo = 0.1, .hi = 3600},
      {"--cache", NULL, "warm|cold",
       "warm (default): repeated runs; cold: single runs in the cache\nstate of the model (constants as far away "
       "as one inference\nputs them, inputs in the cores that wrote them; a --runner\nalways times warm)",
       .str = &cache, .choices = caches},
      {"--model-check", NULL, "R",
       "at the end, run the model with the defaults, with the best\nschedules timed alone and with two runners-up, "
       "in turns, R\nrounds, and record each kernel's time in the model; compile\ntakes the fastest (default 10, "
       "0 = off; not with --runner)",
       .whole = &w.check, .lo = 0, .hi = 1000},
      {"--keep-noisy", NULL, NULL,
       "record timings that stay disturbed by other processes as ok,\nmarked \"noisy\" (default: status noisy, "
       "which compile\nignores); for a machine that cannot be made idle",
       .flag = &o->keep_noisy},
      {"--upgrade-log", NULL, NULL,
       "rewrite the --log's records of an older format in the current\none (the keys of this model's kernels), "
       "measure nothing, and exit",
       .flag = &t->upgrade_log},
      {"--plant-faults", NULL, "LIST", NULL, .str = &plant}, /* tests */
  };
  const kn_cmd_spec spec = {"tune", "usage: kiln tune MODEL.onnx --log LOG.jsonl [options]", "model", opts,
                            (int)(sizeof opts / sizeof *opts),
                            "  then: kiln compile MODEL.onnx -o OUT.so --tuning-log LOG.jsonl"};
  int status = kn_opts_parse(&spec, argc, argv, &t->model);
  return status != KN_OPTS_GO_ON ? status : finish_args(t, &w, search, cache, plant);
}

/* The model compiled with each conv algorithm the session measures. */
typedef struct tune_alts {
  kn_graph gs[KN_AT_MAX_ALTS];
  kn_groups grs[KN_AT_MAX_ALTS];
  int n;
} tune_alts;

/* Parses the --bind and --dim values into co; 0, or 2 (a usage error, printed). */
static int bind_inputs(const tune_args *t, kn_arena *arena, kn_compile_opts *co, kn_diag *d) {
  kn_binding *binds = KN_NEW_ARRAY(arena, kn_binding, t->n_binds + 1);
  for (int i = 0; i < t->n_binds; i++)
    if (kn_binding_parse(t->binds[i], arena, &binds[i], d) < 0) {
      kn_diag_print(d, "kiln");
      return 2;
    }
  co->binds = binds;
  co->n_binds = t->n_binds;
  kn_fe_dim *dims = KN_NEW_ARRAY(arena, kn_fe_dim, t->n_dims + 1);
  co->n_dims = kn_fe_dims_parse(t->dims, t->n_dims, arena, dims, d);
  if (co->n_dims < 0) {
    kn_diag_print(d, "kiln");
    return 2;
  }
  co->dims = dims;
  return 0;
}

/* Parses --target into *target and checks that the candidates can run:
 * here (the host's architecture), or on the --runner, which answers a ping
 * and has the target's architecture. */
static int check_target(tune_args *t, kn_target *target, kn_diag *d) {
  kn_target host;
  kn_at_measure_opts *m = &t->o.measure;
  if (kn_target_parse(t->target_spec, target, d) < 0 || kn_cg_check_target(target, d) < 0) return -1;
  if (target->arch == KN_ARCH_CUDA)
    return kn_diag_error(d, "tune: GPU targets cannot be tuned yet (cuda kernels use their default schedules)");
  if (kn_target_parse("host", &host, d) < 0) return -1;
  if (!m->runner) {
    if (target->arch == host.arch) return 0;
    char name[800];
    kn_at_target_string(target, name, sizeof name);
    return kn_diag_error(d, "tune: target '%s' is not this machine's architecture: tuning runs candidates here "
                         "(or on a board: --runner HOST:PORT)",
                         name);
  }
  if (!m->runner_token) m->runner_token = getenv("KILN_RUNNER_TOKEN");
  if (!m->runner_token || !*m->runner_token)
    return kn_diag_error(d, "tune: --runner needs a token: --token T or KILN_RUNNER_TOKEN=T");
  kn_runner_info info;
  if (kn_runner_ping(m->runner, m->runner_token, &info, d) < 0) return -1;
  const char *want = target->arch == KN_ARCH_AARCH64 ? "aarch64" : target->arch == KN_ARCH_X86_64 ? "x86_64" : "c";
  if (strcmp(info.arch, want))
    return kn_diag_error(d, "tune: runner %s is %s, but the target '%s' is %s", m->runner, info.arch,
                         t->target_spec ? t->target_spec : "host", want);
  fprintf(stderr, "kiln tune: measuring on runner %s (%s, kiln %s%s)\n", m->runner, info.arch, info.version,
          info.max_threads == 1 ? ", static build with --loader dlopen: one thread" : "");
  return 0;
}

/* The alternatives: the model as --conv-algo says; with auto (the default)
 * and Winograd-eligible convs, also all direct, all Winograd F(2x2, 3x3) and
 * all F(4x4, 3x3), so the session measures the three algorithms and `kiln compile
 * --tuning-log` picks per conv (conv_algo.c). Leaves co->conv_algo as given. */
static int build_alternatives(kn_compile_opts *co, tune_alts *alts, kn_arena *arena, kn_diag *d) {
  _Static_assert(KN_AT_MAX_ALTS == KN_CONV_ALGOS + 1, "the model's own algorithms, then every conv algorithm by name");
  const char *given = co->conv_algo;
  bool every_algo = !given || !strcmp(given, "auto");
  int status = 0;
  for (int a = 0; a < (every_algo ? KN_AT_MAX_ALTS : 1); a++) {
    if (a > 0) co->conv_algo = kn_conv_algo_name[a - 1];
    if (kn_pipeline_load_bound(co, &alts->gs[a], d) < 0 || kn_pipeline_optimize(co, &alts->gs[a], d) < 0 ||
        kn_sched_fuse(&alts->gs[a], arena, &alts->grs[a], d) < 0) {
      status = -1;
      break;
    }
    alts->n++;
    if (a == 0 && !kn_pipeline_has_winograd_convs(&alts->gs[0])) break;
  }
  co->conv_algo = given;
  return status;
}

/* The search itself, under a SIGINT handler that ends it cleanly. */
static int run_session(const tune_alts *alts, const kn_target *target, const kn_at_options *o, kn_at_summary *sum,
                       kn_diag *d) {
  const kn_graph *alt_g[KN_AT_MAX_ALTS];
  const kn_groups *alt_grs[KN_AT_MAX_ALTS];
  for (int a = 0; a < alts->n; a++) alt_g[a] = &alts->gs[a], alt_grs[a] = &alts->grs[a];
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old); /* no SA_RESTART: waits wake up at once */
  int rc = kn_at_tune_alternatives(alt_g, alt_grs, alts->n, target, o, sum, d);
  sigaction(SIGINT, &old, NULL);
  return rc;
}

static void print_summary(const kn_at_summary *sum, const kn_at_options *o) {
  fprintf(stderr,
          "kiln tune: %s%d kernels in %d tasks; %d candidates measured (%d ok, %d wrong, %d crash, %d timeout, "
          "%d invalid, %d noisy), %d from earlier sessions; estimate %.3f ms -> %.3f ms (%.2fx) in %.0f s (search %.0f s)%s; "
          "%d tasks confirmed (%d by their default, %.0f s); log %s\n",
          sum->interrupted ? "interrupted: " : "", sum->kernels, sum->tasks, sum->measured, sum->by_status[KN_AT_OK],
          sum->by_status[KN_AT_WRONG], sum->by_status[KN_AT_CRASH], sum->by_status[KN_AT_TIMEOUT],
          sum->by_status[KN_AT_INVALID], sum->by_status[KN_AT_NOISY], sum->resumed, sum->default_e2e * 1e3, sum->best_e2e * 1e3,
          sum->best_e2e > 0 ? sum->default_e2e / sum->best_e2e : 1.0, sum->elapsed, sum->search_s,
          sum->early_stopped ? " (early stop: no task improved by more than 1% lately)"
          : sum->out_of_time ? " (time budget reached)" : "",
          sum->confirmed, sum->confirmed_default, sum->confirm_s, o->log_path);
  if (sum->noisy_timings > 0)
    fprintf(stderr,
            "kiln: warning: tune: %d of %d timings were noisy after %d re-timings (other processes took the "
            "CPUs); %s; tune on an idle machine, or with fewer --threads\n",
            sum->noisy_timings, sum->timings, sum->remeasured,
            o->keep_noisy ? "they are recorded as ok, marked \"noisy\" (--keep-noisy)"
                          : "they are recorded with status \"noisy\", which compile ignores");
}

/* Kernel sums alone and in the model further apart than this are noise. */
#define KN_TUNE_MAX_DISAGREE 2.0

/* --model-check: the whole model run with the defaults, the best schedules
 * and the runners-up (model_check.c), which records each kernel's time in it. */
static int check_model(const tune_args *t, kn_compile_opts *co, const kn_target *target, const kn_at_summary *sum,
                       kn_diag *d) {
  co->target = t->target_spec;
  co->prefix = "model";
  char tstr[800];
  kn_at_target_string(target, tstr, sizeof tstr);
  kn_model_check_opts mo = {.compile = co, .log_path = t->o.log_path, .target_string = tstr,
                            .threads = t->o.measure.threads, .rounds = t->check_rounds, .runs = 20,
                            .keep_noisy = t->o.keep_noisy, .plant_busy = t->plant_busy_check,
                            .workdir = t->o.measure.workdir};
  kn_model_check_summary ms;
  double t0 = kn_at_now();
  fprintf(stderr,
          "kiln tune: model check: compiling the model %d ways (every kernel at its default, at its best schedule "
          "timed alone, at its runners-up) and timing them in turns, %d rounds\n",
          KN_CHECK_RANKS + 1, t->check_rounds);
  if (kn_model_check(&mo, &ms, d) < 0) return -1;
  int runners_up = 0;
  for (int k = 2; k <= KN_CHECK_RANKS; k++) runners_up += ms.won[k];
  fprintf(stderr,
          "kiln tune: model check: %d of %d kernels ran their best schedule timed alone; %d tasks, fastest in the "
          "model: %d their default, %d their best alone, %d a runner-up; sum of the steps in the model %.3f ms "
          "default, %.3f ms best alone, %.3f ms fastest per task (%d rounds, %.0f s)\n",
          ms.tuned_steps, ms.steps, ms.keys, ms.won[0], ms.won[1], runners_up, ms.default_ms, ms.tuned_ms,
          ms.chosen_ms, t->check_rounds, kn_at_now() - t0);
  fprintf(stderr,
          "kiln tune: with this log, %d of %d kernels use tuned schedules (kiln compile --tuning-log %s -v lists "
          "them)\n",
          ms.compile_tuned, ms.steps, t->o.log_path);
  if (ms.noisy)
    fprintf(stderr, "kiln: warning: tune: model check: other processes took the CPUs in %d of its %d runs; %s\n",
            ms.disturbed, ms.runs,
            t->o.keep_noisy ? "its records are marked \"noisy\" (--keep-noisy)"
                            : "its times are noise and were not written to the log");
  /* the kernels timed alone and the same kernels timed in the model should
   * roughly agree; far apart, one of the two was timed on a busy machine */
  double alone = sum->default_e2e * 1e3, ratio = ms.default_ms > 0 ? alone / ms.default_ms : 1;
  if (ratio > KN_TUNE_MAX_DISAGREE || ratio < 1 / KN_TUNE_MAX_DISAGREE)
    fprintf(stderr,
            "kiln: warning: tune: the default kernels timed alone add up to %.3f ms, in the model to %.3f ms "
            "(%.1fx apart): these timings do not describe this model; was the machine busy? tune again when it "
            "is idle\n",
            alone, ms.default_ms, ratio > 1 ? ratio : 1 / ratio);
  return 0;
}

/* The session after the options: 0, 1 (a diagnostic in d) or 130 (interrupted). */
/* --upgrade-log: the log rewritten with the keys of every kernel of the
 * session (each conv algorithm's), as version 1 and as now. */
static int upgrade_log(const tune_args *t, const tune_alts *alts, kn_arena *arena, kn_diag *d) {
  int total = 0, n = 0;
  for (int a = 0; a < alts->n; a++) total += alts->grs[a].n;
  const char **v1 = KN_NEW_ARRAY(arena, const char *, total + 1), **now = KN_NEW_ARRAY(arena, const char *, total + 1);
  for (int a = 0; a < alts->n; a++)
    for (int i = 0; i < alts->grs[a].n; i++, n++) {
      v1[n] = kn_at_workload_key_v1(&alts->gs[a], &alts->grs[a].groups[i], arena);
      now[n] = kn_at_workload_key(&alts->gs[a], &alts->grs[a].groups[i], arena);
    }
  kn_at_upgrade_counts c;
  if (kn_at_log_upgrade(t->o.log_path, v1, now, n, &c, d) < 0) return -1;
  fprintf(stderr,
          "kiln tune: %s: %d records rewritten in format %d (%d hashed keys renamed by this model's kernels), %d "
          "already in it, %d of format 1 left as they were (hashed keys no kernel of this model has), %d other "
          "lines kept\n",
          t->o.log_path, c.upgraded, KN_AT_FORMAT_VERSION, c.renamed, c.current, c.left, c.other);
  return 0;
}

static int tune_model(tune_args *t, kn_compile_opts *co, tune_alts *alts, kn_arena *arena, kn_diag *d) {
  kn_target target;
  kn_at_summary sum;
  if (t->upgrade_log) return build_alternatives(co, alts, arena, d) < 0 || upgrade_log(t, alts, arena, d) < 0;
  if (check_target(t, &target, d) < 0 || build_alternatives(co, alts, arena, d) < 0 ||
      run_session(alts, &target, &t->o, &sum, d) < 0)
    return 1;
  print_summary(&sum, &t->o);
  if (sum.interrupted) return 130;
  if (t->check_rounds > 0 && !t->o.measure.runner && check_model(t, co, &target, &sum, d) < 0) return 1;
  return 0;
}

int kn_cmd_tune(int argc, char **argv) {
  tune_args t;
  int status = parse_args(argc, argv, &t);
  if (status != KN_OPTS_GO_ON) return status;
  kn_at_evolve_params ep = kn_at_evolve_defaults();
  ep.seed = t.seed ? t.seed : 1;
  kn_at_evolve *ev = t.evolve ? kn_at_evolve_new(&ep) : NULL;
  t.o.strategy = t.evolve ? kn_at_strategy_evolve(ev) : kn_at_strategy_random(&t.seed);
  kn_diag d;
  kn_diag_init(&d);
  kn_arena arena;
  kn_arena_init(&arena);
  tune_alts alts = {.n = 0};
  for (int a = 0; a < KN_AT_MAX_ALTS; a++) kn_graph_init(&alts.gs[a]);
  kn_compile_opts co = {.model = t.model, .max_batch = t.max_batch, .conv_algo = t.conv_algo};
  status = bind_inputs(&t, &arena, &co, &d);
  if (status == 0) status = tune_model(&t, &co, &alts, &arena, &d);
  if (status == 1) {
    if (d.count == 0) kn_diag_error(&d, "tune of '%s' failed", t.model);
    kn_diag_print(&d, "kiln");
  }
  kn_diag_free(&d);
  kn_at_evolve_free(ev);
  for (int a = 0; a < KN_AT_MAX_ALTS; a++) kn_graph_free(&alts.gs[a]);
  kn_arena_free(&arena);
  return status;
}
