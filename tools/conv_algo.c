/* conv_algo.c — the algorithm of each 3x3 stride-1 convolution, chosen by
 * measurement: `kiln compile --tuning-log` (with --conv-algo auto, the
 * default) compiles the model's graph with each conv algorithm: all direct, all Winograd
 * F(2x2, 3x3) and all F(4x4, 3x3), looks up the best record of every kernel
 * of each, and runs a conv with the algorithm whose kernels took least in sum: a
 * Winograd algorithm's three (input transform, GEMM, output transform with the
 * conv's epilogue), the direct algorithm's conv kernel and the Pad kernel in front
 * of it. Only algorithms with a record for each of their kernels compete (a log
 * from before F(4x4, 3x3) has none for it); a conv with fewer than two such
 * algorithms keeps the default rule (kn_winograd_want_default). `kiln tune` (auto)
 * tunes all three alternatives in one session, so its log has the records
 * this needs. */
#include <string.h>

#include "autotune/autotune.h"
#include "ir/passes/passes.h"
#include "schedule/schedule.h"
#include "tools/pipeline.h"

bool kn_pipeline_has_winograd_convs(const kn_graph *g) {
  for (int i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i].dead && (g->nodes[i].op == KN_OP_WINOGRAD_INPUT || kn_winograd_eligible(g, i))) return true;
  return false;
}

typedef struct conv_cost {
  const char *name;
  double s[KN_CONV_ALGOS];     /* sum of the kernels' best records */
  bool missing[KN_CONV_ALGOS]; /* a kernel without a record */
  bool seen[KN_CONV_ALGOS];
} conv_cost;

static bool strip_suffix(const char *name, const char *suffix, char *base, size_t cap) {
  size_t n = strlen(name), k = strlen(suffix);
  if (n <= k || strcmp(name + n - k, suffix) || n - k >= cap) return false;
  memcpy(base, name, n - k);
  base[n - k] = 0;
  return true;
}

static conv_cost *cost_of(conv_cost *c, int *n, int cap, const char *name, kn_arena *A) {
  for (int i = 0; i < *n; i++)
    if (!strcmp(c[i].name, name)) return &c[i];
  if (*n == cap) return NULL;
  c[*n] = (conv_cost){.name = kn_arena_strdup(A, name)};
  return &c[(*n)++];
}

/* The kernels of the model compiled with one algorithm (kn_conv_algo_name[alt]), added to the
 * costs of the convs they belong to. Returns 1 when the graph has a conv
 * Winograd could compute, 0 when not, -1 on error. */
static int add_costs(const kn_compile_opts *o, int alt, kn_at_log *log, kn_arena *A, conv_cost *c, int *n,
                     int cap, kn_diag *d) {
  kn_compile_opts co = *o;
  co.conv_algo = kn_conv_algo_name[alt];
  co.conv_algo_choice = NULL;
  co.dump_after = NULL;
  kn_graph g;
  kn_graph_init(&g);
  kn_groups groups;
  int rc = -1;
  if (kn_pipeline_load_bound(&co, &g, d) < 0 || kn_pipeline_optimize(&co, &g, d) < 0 ||
      kn_sched_fuse(&g, A, &groups, d) < 0)
    goto done;
  /* direct: the conv and the Pad in front of it; Winograd: its three kernels.
   * A name that occurs in one alternative only is not a choice (a stride-2
   * conv, another Pad) and is dropped by kn_conv_algo_choose. */
  static const char *const suffixes[2][3] = {{".pad", NULL, NULL}, {".winograd_in", ".winograd_gemm", ".winograd_out"}};
  const char *const *suffix = suffixes[alt > 0];
  for (int i = 0; i < groups.n; i++) {
    const kn_node *anchor = &g.nodes[groups.groups[i].anchor];
    char base[512];
    bool found = alt == 0 && anchor->op == KN_OP_CONV_NHWC && strlen(anchor->name) < sizeof base;
    if (found) strcpy(base, anchor->name);
    for (int k = 0; k < 3 && !found && suffix[k]; k++) found = strip_suffix(anchor->name, suffix[k], base, sizeof base);
    if (!found) continue;
    conv_cost *cc = cost_of(c, n, cap, base, A);
    if (!cc) continue;
    const kn_at_record *best = kn_at_log_best_alone(log, kn_at_log_key(log, &g, &groups.groups[i], A));
    cc->seen[alt] = true;
    if (best) cc->s[alt] += best->seconds;
    else cc->missing[alt] = true;
  }
  rc = kn_pipeline_has_winograd_convs(&g);
done:
  kn_graph_free(&g);
  return rc;
}

int kn_conv_algo_choose(const kn_compile_opts *o, kn_at_log *log, kn_arena *A, kn_conv_algo_choice *out, kn_diag *d) {
  memset(out, 0, sizeof *out);
  int cap = 4096, n = 0;
  conv_cost *c = KN_NEW_ARRAY(A, conv_cost, cap);
  /* a model without such convs (bert) is not compiled with the second algorithm */
  int rc = add_costs(o, 0, log, A, c, &n, cap, d);
  for (int alt = 1; rc > 0 && alt < KN_CONV_ALGOS; alt++) rc = add_costs(o, alt, log, A, c, &n, cap, d);
  if (rc < 0) return -1;
  out->names = KN_NEW_ARRAY(A, const char *, n + 1);
  out->tile = KN_NEW_ARRAY(A, int, n + 1);
  for (int i = 0; i < n; i++) {
    int seen = 0, complete = 0, best = -1;
    for (int w = 0; w < KN_CONV_ALGOS; w++) {
      if (!c[i].seen[w]) continue;
      seen++;
      if (c[i].missing[w]) continue;
      complete++;
      if (best < 0 || c[i].s[w] < c[i].s[best]) best = w;
    }
    if (seen < 2) continue; /* not a conv with a choice */
    if (complete < 2) {
      out->by_rule++;
      continue;
    }
    out->names[out->n] = c[i].name;
    out->tile[out->n] = kn_conv_algo_tile[best];
    out->n_winograd2 += kn_conv_algo_tile[best] == 2;
    out->n_winograd4 += kn_conv_algo_tile[best] == 4;
    out->n++;
  }
  return 0;
}

int kn_conv_algo_want(const kn_graph *g, int node, void *ctx) {
  const kn_conv_algo_choice *ch = ctx;
  for (int i = 0; i < ch->n; i++)
    if (!strcmp(ch->names[i], g->nodes[node].name)) return ch->tile[i];
  return kn_winograd_want_default(g, node, NULL);
}
