/* cmd_tune.c — `kiln tune MODEL.onnx --log tune.jsonl [--trials N] ...`:
 * loads and optimizes the model as `kiln compile` does, fuses it, and hands
 * the kernels to the autotuner (autotune/tune.c), which measures candidate
 * schedules on this machine and appends one record per measurement to the
 * log. Ctrl-C ends the session after the current candidate, log intact. */
#include <errno.h>
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
#include "tools/pipeline.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: kiln tune MODEL.onnx --log LOG.jsonl [options]\n"
          "  --log PATH             tuning log (JSONL) to append to; re-running with the same\n"
          "                         log resumes: measured candidates are skipped\n"
          "  --trials N             candidates to measure beyond the default schedules (default 100)\n"
          "  --time-budget S        stop after S seconds (default: no limit)\n"
          "  --target STRING        target to tune for; must run on this machine or on the runner\n"
          "                         (default: the host)\n"
          "  --runner HOST:PORT     measure the candidates on a kiln-runner (a board) instead of here;\n"
          "                         they are compiled here for --target and uploaded\n"
          "  --token T              the runner's shared token (default: $KILN_RUNNER_TOKEN)\n"
          "  --max-batch B          batch the kernels are built and timed for (default 1)\n"
          "  --bind NAME=FILE       tune the model with graph input NAME bound to FILE, as\n"
          "                         `kiln compile --bind` (repeatable; compile with the same)\n"
          "  --conv-algo A          direct|winograd|winograd4|auto, as `kiln compile --conv-algo` (compile\n"
          "                         with the same: it decides which kernels there are)\n"
          "  --threads N            threads of the measured kernels (default: the CPUs)\n"
          "  --workers N            concurrent candidate builds (default 2)\n"
          "  --search evolve|random evolutionary search guided by a learned cost model (default),\n"
          "                         or the rule-generated space in random order\n"
          "  --early-stop K         stop when no task's best time improved by more than 1%% over\n"
          "                         the last K trials (default max(64, 4 x tasks))\n"
          "  --no-early-stop        spend the whole budget\n"
          "  --confirm R            at the end, time each task's best and its default again,\n"
          "                         in turns, R times each; these timings decide (default 2,\n"
          "                         0 = off; runs after --time-budget)\n"
          "  --progress-interval S  seconds between progress lines when stderr is not a terminal\n"
          "                         (default 5; on a terminal one line is refreshed in place)\n"
          "  --seed S               seed of the search (default 1)\n"
          "  --run-timeout S        a candidate running longer counts as 'timeout' (default 20)\n"
          "  --cache warm|cold      warm (default): repeated runs; cold: single runs in the cache\n"
          "                         state of the model (constants as far away as one inference\n"
          "                         puts them, inputs in the cores that wrote them; a --runner\n"
          "                         always times warm)\n"
          "  --model-check R        at the end, run the model with the defaults, with the best\n"
          "                         schedules timed alone and with two runners-up, in turns, R\n"
          "                         rounds, and record each kernel's time in the model; compile\n"
          "                         takes the fastest (default 10, 0 = off; not with --runner)\n"
          "  then: kiln compile MODEL.onnx -o OUT.so --tuning-log LOG.jsonl\n");
}

static volatile sig_atomic_t stop_requested; /* set by SIGINT: the session ends cleanly */

static void on_sigint(int sig) {
  (void)sig;
  stop_requested = 1;
}

static bool parse_num(const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= lo && v <= hi)) return false;
  *out = v;
  return true;
}

/* "crash,wrong,hang": faults planted in the first candidates (tests). */
static bool parse_plant(const char *s, kn_at_options *o) {
  while (*s) {
    if (o->n_plant == 3) return false;
    size_t n = strcspn(s, ",");
    if (n == 5 && !strncmp(s, "crash", 5)) o->plant[o->n_plant++] = KN_AT_FAULT_CRASH;
    else if (n == 5 && !strncmp(s, "wrong", 5)) o->plant[o->n_plant++] = KN_AT_FAULT_WRONG;
    else if (n == 4 && !strncmp(s, "hang", 4)) o->plant[o->n_plant++] = KN_AT_FAULT_HANG;
    else return false;
    s += n;
    if (*s == ',') s++;
  }
  return true;
}

#define KN_TUNE_MAX_BINDS 64

int kn_cmd_tune(int argc, char **argv) {
  const char *model = NULL, *target_spec = NULL, *conv_algo = NULL;
  const char *bind_args[KN_TUNE_MAX_BINDS]; /* "NAME=FILE", parsed once the arena exists */
  int n_bind_args = 0;
  uint64_t seed = 1;
  int64_t max_batch = 1;
  bool evolve = true;
  int check_rounds = 10;
  kn_at_options o = {.trials = 100, .build_workers = 2, .stop = &stop_requested, .progress = stderr, .confirm_rounds = 2,
                     .measure = {.build_timeout = 120, .run_timeout = 20, .min_repeat_s = 0.01, .samples = 5,
                                 .warm = true}};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(a, "--no-early-stop")) {
      o.no_early_stop = true;
      continue;
    }
    if (a[0] == '-' && a[1]) {
      const char *eq = strchr(a, '=');
      size_t n = eq ? (size_t)(eq - a) : strlen(a);
      static const char *const flags[] = {"--log", "--trials", "--time-budget", "--target", "--max-batch",
                                          "--threads", "--workers", "--seed", "--plant-faults", "--run-timeout",
                                          "--runner", "--token", "--search", "--early-stop",
                                          "--progress-interval", "--bind", "--cache", "--conv-algo", "--confirm",
                                          "--model-check"};
      int f = -1;
      for (int k = 0; k < (int)(sizeof flags / sizeof *flags); k++)
        if (strlen(flags[k]) == n && !strncmp(a, flags[k], n)) f = k;
      if (f < 0) {
        fprintf(stderr, "kiln: error: tune: unknown option '%s' (see 'kiln tune --help')\n", a);
        return 2;
      }
      if (eq) val = eq + 1;
      else if (i + 1 < argc) val = argv[++i];
      else {
        fprintf(stderr, "kiln: error: tune: option '%s' needs a value\n", a);
        return 2;
      }
      double v = 0;
      bool ok = true;
      switch (f) {
      case 0: o.log_path = val; break;
      case 1: ok = parse_num(val, 0, 1e7, &v) && v == (int)v; o.trials = (int)v; break;
      case 2: ok = parse_num(val, 0.001, 1e9, &v); o.time_budget = v; break;
      case 3: target_spec = val; break;
      case 4: ok = parse_num(val, 1, 1 << 20, &v) && v == (int64_t)v; max_batch = (int64_t)v; break;
      case 5: ok = parse_num(val, 1, 256, &v) && v == (int)v; o.measure.threads = (int)v; break;
      case 6: ok = parse_num(val, 1, 16, &v) && v == (int)v; o.build_workers = (int)v; break;
      case 7: ok = parse_num(val, 0, 1e15, &v) && v == (double)(uint64_t)v; seed = (uint64_t)v; break;
      case 8: ok = parse_plant(val, &o); break;
      case 9: ok = parse_num(val, 0.1, 3600, &v); o.measure.run_timeout = v; break;
      case 10: o.measure.runner = val; break;
      case 11: o.measure.runner_token = val; break;
      case 12: ok = !strcmp(val, "evolve") || !strcmp(val, "random"); evolve = !strcmp(val, "evolve"); break;
      case 13: ok = parse_num(val, 1, 1e7, &v) && v == (int)v; o.early_stop = (int)v; break;
      case 14: ok = parse_num(val, 0.01, 3600, &v); o.progress_interval = v; break;
      case 15:
        ok = n_bind_args < KN_TUNE_MAX_BINDS;
        if (ok) bind_args[n_bind_args++] = val;
        break;
      case 16: ok = !strcmp(val, "cold") || !strcmp(val, "warm"); o.measure.warm = !strcmp(val, "warm"); break;
      case 17: ok = kn_pipeline_conv_algo_valid(val); conv_algo = val; break;
      case 18: ok = parse_num(val, 0, 100, &v) && v == (int)v; o.confirm_rounds = (int)v; break;
      case 19: ok = parse_num(val, 0, 1000, &v) && v == (int)v; check_rounds = (int)v; break;
      }
      if (!ok) {
        fprintf(stderr, "kiln: error: tune: bad value '%s' for %s (see 'kiln tune --help')\n", val, flags[f]);
        return 2;
      }
    } else if (!model) {
      model = a;
    } else {
      fprintf(stderr, "kiln: error: tune: unexpected argument '%s' (one model at a time)\n", a);
      return 2;
    }
  }
  if (!model) {
    fprintf(stderr, "kiln: error: tune: no model given (see 'kiln tune --help')\n");
    return 2;
  }
  if (!o.log_path) {
    fprintf(stderr, "kiln: error: tune: no log given: add --log LOG.jsonl\n");
    return 2;
  }
  kn_at_evolve_params ep = kn_at_evolve_defaults();
  ep.seed = seed ? seed : 1;
  kn_at_evolve *ev = evolve ? kn_at_evolve_new(&ep) : NULL;
  o.strategy = evolve ? kn_at_strategy_evolve(ev) : kn_at_strategy_random(&seed);

  kn_diag d;
  kn_diag_init(&d);
  kn_target target, host;
  int status = 1;
  /* the alternatives: the model as --conv-algo says; with auto (the
   * default) and Winograd-eligible convs, also all direct, all Winograd
   * F(2x2, 3x3) and all F(4x4, 3x3), so the session measures the three algorithms
   * and `kiln compile --tuning-log` picks per conv (conv_algo.c) */
  kn_graph gs[KN_AT_MAX_ALTS];
  kn_groups grs[KN_AT_MAX_ALTS];
  int n_alts = 0;
  for (int a = 0; a < KN_AT_MAX_ALTS; a++) kn_graph_init(&gs[a]);
  kn_arena arena;
  kn_arena_init(&arena);
  kn_at_summary sum;
  kn_compile_opts co = {.model = model, .max_batch = max_batch, .conv_algo = conv_algo};
  kn_binding *binds = KN_NEW_ARRAY(&arena, kn_binding, n_bind_args + 1);
  for (int i = 0; i < n_bind_args; i++)
    if (kn_binding_parse(bind_args[i], &arena, &binds[i], &d) < 0) {
      kn_diag_print(&d, "kiln");
      status = 2;
      goto done;
    }
  co.binds = binds;
  co.n_binds = n_bind_args;
  if (kn_target_parse(target_spec, &target, &d) < 0 || kn_cg_check_target(&target, &d) < 0) goto done;
  if (kn_target_parse(NULL, &host, &d) < 0) goto done;
  if (o.measure.runner) {
    if (!o.measure.runner_token) o.measure.runner_token = getenv("KILN_RUNNER_TOKEN");
    if (!o.measure.runner_token || !*o.measure.runner_token) {
      kn_diag_error(&d, "tune: --runner needs a token: --token T or KILN_RUNNER_TOKEN=T");
      goto done;
    }
    kn_runner_info info;
    if (kn_runner_ping(o.measure.runner, o.measure.runner_token, &info, &d) < 0) goto done;
    const char *want = target.arch == KN_ARCH_AARCH64 ? "aarch64" : target.arch == KN_ARCH_X86_64 ? "x86_64" : "c";
    if (strcmp(info.arch, want)) {
      kn_diag_error(&d, "tune: runner %s is %s, but the target '%s' is %s", o.measure.runner, info.arch,
                    target_spec ? target_spec : "host", want);
      goto done;
    }
    fprintf(stderr, "kiln tune: measuring on runner %s (%s, kiln %s%s)\n", o.measure.runner, info.arch,
            info.version, info.max_threads == 1 ? ", static build with --loader dlopen: one thread" : "");
  } else if (target.arch != host.arch) {
    kn_diag_error(&d, "tune: target '%s' is not this machine's architecture: tuning runs candidates here "
                  "(or on a board: --runner HOST:PORT)",
                  target_spec);
    goto done;
  }
  _Static_assert(KN_AT_MAX_ALTS == KN_CONV_ALGOS + 1, "the model's own algorithms, then every conv algorithm by name");
  bool both = !conv_algo || !strcmp(conv_algo, "auto");
  for (int a = 0; a < (both ? KN_AT_MAX_ALTS : 1); a++) {
    if (a > 0) co.conv_algo = kn_conv_algo_name[a - 1];
    if (kn_pipeline_load_bound(&co, &gs[a], &d) < 0 || kn_pipeline_optimize(&co, &gs[a], &d) < 0 ||
        kn_sched_fuse(&gs[a], &arena, &grs[a], &d) < 0)
      goto done;
    n_alts++;
    if (a == 0 && !kn_pipeline_has_winograd_convs(&gs[0])) break;
  }
  const kn_graph *alt_g[KN_AT_MAX_ALTS];
  const kn_groups *alt_grs[KN_AT_MAX_ALTS];
  for (int a = 0; a < n_alts; a++) alt_g[a] = &gs[a], alt_grs[a] = &grs[a];

  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old); /* no SA_RESTART: waits wake up at once */
  int rc = kn_at_tune_alternatives(alt_g, alt_grs, n_alts, &target, &o, &sum, &d);
  sigaction(SIGINT, &old, NULL);
  if (rc < 0) goto done;
  fprintf(stderr,
          "kiln tune: %s%d kernels in %d tasks; %d candidates measured (%d ok, %d wrong, %d crash, %d timeout, "
          "%d invalid), %d from earlier sessions; estimate %.3f ms -> %.3f ms (%.2fx) in %.0f s (search %.0f s)%s; "
          "%d tasks confirmed (%d by their default, %.0f s); log %s\n",
          sum.interrupted ? "interrupted: " : "", sum.kernels, sum.tasks, sum.measured, sum.by_status[KN_AT_OK],
          sum.by_status[KN_AT_WRONG], sum.by_status[KN_AT_CRASH], sum.by_status[KN_AT_TIMEOUT],
          sum.by_status[KN_AT_INVALID], sum.resumed, sum.default_e2e * 1e3, sum.best_e2e * 1e3,
          sum.best_e2e > 0 ? sum.default_e2e / sum.best_e2e : 1.0, sum.elapsed, sum.search_s,
          sum.early_stopped ? " (early stop: no task improved by more than 1% lately)"
          : sum.out_of_time ? " (time budget reached)" : "",
          sum.confirmed, sum.confirmed_default, sum.confirm_s, o.log_path);
  status = sum.interrupted ? 130 : 0;
  if (!sum.interrupted && check_rounds > 0 && !o.measure.runner) {
    co.target = target_spec;
    co.prefix = "model";
    co.conv_algo = conv_algo;
    char tstr[800];
    kn_at_target_string(&target, tstr, sizeof tstr);
    kn_model_check_opts mo = {.compile = &co, .log_path = o.log_path, .target_string = tstr,
                              .threads = o.measure.threads, .rounds = check_rounds, .runs = 20,
                              .workdir = o.measure.workdir};
    kn_model_check_summary ms;
    double t0 = kn_at_now();
    if (kn_model_check(&mo, &ms, &d) < 0) {
      status = 1;
      goto done;
    }
    int runners_up = 0;
    for (int k = 2; k <= KN_CHECK_RANKS; k++) runners_up += ms.won[k];
    fprintf(stderr,
            "kiln tune: model check: %d of %d steps run tuned schedules; %d tasks, fastest in the model: %d their "
            "default, %d their best alone, %d a runner-up; sum of the steps in the model %.3f ms default, %.3f ms "
            "best alone, %.3f ms fastest per task (%d rounds, %.0f s)\n",
            ms.tuned_steps, ms.steps, ms.keys, ms.won[0], ms.won[1], runners_up, ms.default_ms,
            ms.tuned_ms, ms.chosen_ms, check_rounds, kn_at_now() - t0);
  }
done:
  if (status == 1) {
    if (d.count == 0) kn_diag_error(&d, "tune of '%s' failed", model);
    kn_diag_print(&d, "kiln");
  }
  kn_diag_free(&d);
  kn_at_evolve_free(ev);
  for (int a = 0; a < KN_AT_MAX_ALTS; a++) kn_graph_free(&gs[a]);
  kn_arena_free(&arena);
  return status;
}
