/* tuned.c — `kiln compile --tuning-log`: the log's part in the pipeline
 * (tuned.h). The steps that call these are in pipeline.c. */
#include "tools/tuned.h"

#include <stdio.h>
#include <string.h>

#include "tools/plan_build.h"

int kn_tuned_open(kn_tuned *t, const kn_compile_opts *o, const kn_target *target, kn_diag *d) {
  *t = (kn_tuned){0};
  char tstr[800];
  kn_at_target_string(target, tstr, sizeof tstr);
  if (kn_at_log_load(o->tuning_log, tstr, false, stderr, &t->log, d) < 0) return -1;
  if (t->log.other_target)
    fprintf(stderr, "kiln: note: %s: %d records for other targets ignored (this target: %s)\n", o->tuning_log,
            t->log.other_target, tstr);
  return 0;
}

void kn_tuned_close(kn_tuned *t) { kn_at_log_free(&t->log); }

const kn_conv_algo_choice *kn_tuned_choose_convs(kn_tuned *t, const kn_compile_opts *o, kn_arena *A, bool *failed,
                                            kn_diag *d) {
  *failed = false;
  if (o->conv_algo && strcmp(o->conv_algo, "auto")) return NULL;
  if (kn_conv_algo_choose(o, &t->log, A, &t->choice, d) < 0) {
    *failed = true;
    return NULL;
  }
  const kn_conv_algo_choice *c = &t->choice;
  if (o->verbose)
    fprintf(stderr,
            "kiln: tuning log: %d convs by measurement (%d Winograd F(2x2,3x3), %d F(4x4,3x3), %d direct), %d by "
            "the rule\n",
            c->n, c->n_winograd2, c->n_winograd4, c->n - c->n_winograd2 - c->n_winograd4, c->by_rule);
  return c;
}

const kn_sched_provider *kn_tuned_provider(kn_tuned *t, const kn_compile_opts *o, int n_groups, kn_arena *A) {
  t->replay = (kn_at_replay){.log = &t->log, .arena = A, .defaults_only = o->replay_defaults,
                             .alone = o->replay_alone, .rank = o->replay_alone ? o->replay_rank : 0};
  kn_arena *ra = o->report ? o->report->arena : A; /* the report's strings outlive the compile */
  t->replay.cap = n_groups;
  t->replay.keys = KN_NEW_ARRAY(ra, const char *, n_groups + 1);
  t->replay.default_traces = KN_NEW_ARRAY(ra, const char *, n_groups + 1);
  t->replay.tuned_traces = KN_NEW_ARRAY(ra, const char *, n_groups + 1);
  t->replay.outcomes = KN_NEW_ARRAY(A, kn_at_replay_outcome, n_groups + 1);
  t->replay.records = KN_NEW_ARRAY(A, const kn_at_record *, n_groups + 1);
  t->replay.arena = ra;
  t->provider = kn_at_replay_provider(&t->replay);
  return &t->provider;
}

bool kn_tuned_runs_record(const kn_tuned *t, const kn_kernel_build *kernels, int i) {
  return kernels[i].kernel == t->tuned[i];
}

/* How many records of the log, whatever their status, are of one of the n
 * kernels built. */
static int of_the_model(const kn_tuned *t, int n) {
  int matched = 0;
  for (int k = 0; k < t->log.n; k++)
    for (int i = 0; i < n && i < t->replay.n_kernels; i++)
      if (!strcmp(t->log.records[k].key, t->replay.keys[i])) {
        matched++;
        break;
      }
  return matched;
}

/* Why none of a log's records is of this model, as far as the log tells:
 * another kiln wrote them (keys change between versions), or old hashed
 * keys no kernel of this model has; else another model, or this one with
 * other input shapes. */
static void why_none(const kn_at_log *log, char *buf, size_t cap) {
  if (log->other_kiln)
    snprintf(buf, cap, "%d of them were written by kiln %s, this is kiln %s, and keys can differ between versions; "
             "tune again", log->other_kiln, log->other_kiln_version, KILN_VERSION);
  else if (log->old_keys)
    snprintf(buf, cap, "%d of them have hashed keys of format version 1 that no kernel of this model has", log->old_keys);
  else
    snprintf(buf, cap, "it is a log of another model, or of this one with other input shapes");
}

/* What the log did to each kernel: with -v a line per kernel and the
 * counts; without, a warning when it did nothing, which is most often a log
 * of another model or another target. */
static void explain(const kn_tuned *t, const kn_kernel_build *kernels, int n, const kn_compile_opts *o) {
  const kn_at_replay *r = &t->replay;
  int count[KN_AT_TUNED + 1] = {0}, kept = 0;
  for (int i = 0; i < n && i < r->n_kernels; i++) {
    count[r->outcomes[i]]++;
    bool runs = r->outcomes[i] == KN_AT_TUNED && kn_tuned_runs_record(t, kernels, i);
    if (r->outcomes[i] == KN_AT_TUNED && !runs) kept++;
    if (!o->verbose) continue;
    const kn_at_record *rec = r->records[i];
    char took[96] = "";
    if (rec)
      snprintf(took, sizeof took, ", %.4g ms %s%s", rec->seconds * 1e3, rec->in_model ? "in the model" : "timed alone",
               rec->noisy ? ", noisy" : "");
    static const char *const what[] = {"default: no record", "default: the log's best",
                                       "default: the log's best does not fit it", "tuned: the log's best"};
    fprintf(stderr, "kiln: tuning log: %s: %s%s; %s\n", kernels[i].kernel->name,
            r->outcomes[i] == KN_AT_TUNED && !runs ? "default: kept for a row pipe" : what[r->outcomes[i]], took,
            r->keys[i]);
  }
  char why[256];
  if (o->verbose) {
    fprintf(stderr,
            "kiln: tuning log: %d of %d kernels use tuned schedules (%d run their default as the log's best, %d "
            "have no record, %d a record that does not fit, %d keep their default for a row pipe)\n",
            count[KN_AT_TUNED] - kept, r->n_kernels, count[KN_AT_BEST_DEFAULT], count[KN_AT_NO_RECORD],
            count[KN_AT_UNFIT], kept);
    int matched = of_the_model(t, n);
    fprintf(stderr, "kiln: tuning log: %d of its %d records for this target are of kernels of this model", matched,
            t->log.n);
    if (!matched && t->log.n) {
      why_none(&t->log, why, sizeof why);
      fprintf(stderr, " (%s)", why);
    }
    fputc('\n', stderr);
  } else if (o->replay_defaults || o->replay_alone)
    return; /* the model check's builds: a rank a key lacks is no news */
  else if (count[KN_AT_NO_RECORD] == r->n_kernels && r->n_kernels > 0 && !of_the_model(t, n)) {
    why_none(&t->log, why, sizeof why);
    fprintf(stderr,
            "kiln: warning: tuning log '%s': none of its %d records for this target is of a kernel of this model "
            "(%s); every kernel keeps its default schedule\n",
            o->tuning_log, t->log.n, why);
  }
  else if (count[KN_AT_NO_RECORD] == r->n_kernels && r->n_kernels > 0)
    fprintf(stderr,
            "kiln: warning: tuning log '%s': its records of this model's kernels are none of them ok (noisy or "
            "failed timings); every kernel keeps its default schedule\n",
            o->tuning_log);
  else if (count[KN_AT_UNFIT] > 0)
    fprintf(stderr,
            "kiln: warning: tuning log '%s': the best records of %d kernels do not fit them (a log of another "
            "kiln?); they keep their default schedules\n",
            o->tuning_log, count[KN_AT_UNFIT]);
}

int kn_tuned_keep_pipes(kn_tuned *t, kn_graph *g, const kn_groups *groups, const kn_target *target,
                        kn_expr_ctx *ec, const kn_compile_opts *o, kn_arena *A, kn_kernel_build *kernels,
                        kn_diag *d) {
  int n = groups->n;
  t->tuned = KN_NEW_ARRAY(A, const kn_kernel *, n > 0 ? n : 1);
  for (int i = 0; i < n; i++) t->tuned[i] = kernels[i].kernel;
  kn_kernel_build *mix = KN_NEW_ARRAY(A, kn_kernel_build, n > 0 ? n : 1);
  int n_rebuilt = 0;
  for (int i = 0; i < n; i++) {
    mix[i] = kernels[i];
    if (kernels[i].kernel->rows || !kernels[i].default_rows) continue;
    kn_kernel_build dflt;
    if (kn_sched_build_kernel_with(g, &groups->groups[i], target, ec, kernels[i].kernel->name, NULL, &dflt, NULL,
                                   NULL, d) < 0)
      return -1;
    mix[i] = dflt;
    n_rebuilt++;
  }
  int kept = 0;
  if (n_rebuilt) {
    kn_plan trial;
    if (kn_plan_build(g, mix, n, o->prefix, A, &trial, d) < 0) return -1;
    for (int p = 0; p < trial.n_pipes; p++)
      for (int s = trial.pipes[p].first; s <= trial.pipes[p].first + 1; s++)
        for (int i = 0; i < n; i++)
          if (mix[i].kernel == trial.steps[s].kernel && mix[i].kernel != kernels[i].kernel) {
            kernels[i] = mix[i];
            kept++;
          }
    if (o->verbose)
      fprintf(stderr, "kiln: tuning log: %d kernels keep their defaults, for row pipes\n", kept);
  }
  explain(t, kernels, n, o);
  return kept;
}

int kn_tuned_report(const kn_tuned *t, kn_compile_report *r, const kn_plan *plan, const kn_kernel_build *kernels,
                    int n_groups, kn_diag *d) {
  const kn_at_replay *replay = &t->replay;
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
    r->tuned[s] = replay->tuned_traces[i] && kn_tuned_runs_record(t, kernels, i);
    r->traces[s] = r->tuned[s] ? replay->tuned_traces[i] : replay->default_traces[i];
  }
  return 0;
}
