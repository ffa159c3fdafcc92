/* report.c — REPORT.md of a conformance run: the counts, the onnx version,
 * the tests that passed only with inputs bound at compile time (with the
 * inputs), and every test that did not pass, grouped by reason.
 *
 * A reason is the result's detail made general: "unsupported op 'X'" keeps
 * the op and drops the node; otherwise quoted names become '…' and numbers
 * become N, so "node 'a' (Conv): rank 3" and "node 'b' (Conv): rank 5" share
 * a group. Groups are sorted by size, largest first.
 *
 * In the GPU mode (kn_conformance --gpu-interp) the title says so, and with
 * the CPU's expected list the report opens with the tests that pass on the
 * CPU but not on the GPU path, grouped the same way: the GPU back end's
 * bugs and gaps. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tests/conformance/conformance.h"

typedef struct group {
  char key[300];
  kn_conf_status status;
  int count;
} group;

/* The generalised reason of a non-passing result. */
static void reason_key(const kn_conf_result *r, char *key, size_t cap) {
  const char *d = r->detail;
  const char *unsup = strstr(d, "unsupported op '");
  if (r->status == KN_CONF_SKIP && unsup) {
    const char *op = unsup + strlen("unsupported op '");
    size_t len = strcspn(op, "'");
    snprintf(key, cap, "unsupported op '%.*s'", (int)len, op);
    return;
  }
  if (!strncmp(d, "max error", 9)) {
    snprintf(key, cap, "wrong values");
    return;
  }
  size_t k = 0;
  bool quoted = false;
  for (const char *p = d; *p && k + 4 < cap; p++) {
    if (*p == '\'') {
      if (!quoted) {
        memcpy(key + k, "'…", 4);
        k += 4;
      } else {
        key[k++] = '\'';
      }
      quoted = !quoted;
      continue;
    }
    if (quoted) continue;
    if (isdigit((unsigned char)*p) && !(k > 0 && isalpha((unsigned char)key[k - 1]))) {
      while (isdigit((unsigned char)p[1]) || p[1] == '.' || p[1] == 'e' || p[1] == '-')
        p++;
      key[k++] = 'N';
      continue;
    }
    key[k++] = *p;
  }
  key[k] = 0;
}

static int group_cmp(const void *a, const void *b) {
  const group *x = a, *y = b;
  if (x->status != y->status) return (int)x->status - (int)y->status;
  if (x->count != y->count) return y->count - x->count;
  return strcmp(x->key, y->key);
}

static bool listed_in(const char *const *names, int n_names, const char *name) {
  for (int i = 0; i < n_names; i++)
    if (!strcmp(names[i], name)) return true;
  return false;
}

/* The groups of the results that did not pass, those named in names[] only
 * when names is set; sorted. Returns the count. */
static int collect_groups(const kn_conf_result *results, int n, const char *const *names, int n_names,
                          group *groups) {
  int n_groups = 0;
  char key[300];
  memset(groups, 0, sizeof *groups * (size_t)(n + 1));
  for (int i = 0; i < n; i++) {
    if (results[i].status == KN_CONF_PASS || results[i].status == KN_CONF_PASS_BOUND) continue;
    if (names && !listed_in(names, n_names, results[i].name)) continue;
    reason_key(&results[i], key, sizeof key);
    int g = 0;
    while (g < n_groups && (groups[g].status != results[i].status || strcmp(groups[g].key, key)))
      g++;
    if (g == n_groups) {
      snprintf(groups[g].key, sizeof groups[g].key, "%s", key);
      groups[g].status = results[i].status;
      n_groups++;
    }
    groups[g].count++;
  }
  qsort(groups, (size_t)n_groups, sizeof *groups, group_cmp);
  return n_groups;
}

/* The results of group g (of names[] when set), one line each. */
static void print_group(FILE *fp, const group *g, const kn_conf_result *results, int n, const char *const *names,
                        int n_names) {
  char key[300];
  fprintf(fp, "\n### %s (%d)\n\n", g->key, g->count);
  bool list_details = strncmp(g->key, "unsupported op '", 16) != 0;
  for (int i = 0; i < n; i++) {
    if (results[i].status != g->status) continue;
    if (names && !listed_in(names, n_names, results[i].name)) continue;
    reason_key(&results[i], key, sizeof key);
    if (strcmp(key, g->key)) continue;
    if (list_details)
      fprintf(fp, "- `%s`: %s\n", results[i].name, results[i].detail);
    else
      fprintf(fp, "- `%s`\n", results[i].name);
  }
}

/* The tests of the CPU's list that did not pass here, grouped by reason. */
static void print_cpu_losses(FILE *fp, const kn_conf_result *results, int n, const char *const *cpu_pass,
                             int n_cpu_pass, group *groups) {
  int n_groups = collect_groups(results, n, cpu_pass, n_cpu_pass, groups), total = 0;
  for (int g = 0; g < n_groups; g++) total += groups[g].count;
  fprintf(fp, "\n## Passing on the CPU (expected_pass.txt), not on the GPU path (%d)\n\n"
              "Bugs or gaps of the GPU schedules, the GPU interpreter or the verifier, by the first "
              "diagnostic line.\n",
          total);
  for (int g = 0; g < n_groups; g++) print_group(fp, &groups[g], results, n, cpu_pass, n_cpu_pass);
}

int kn_conf_write_report(const char *path, const char *onnx_version, double seconds, bool gpu_interp,
                         const char *const *cpu_pass, int n_cpu_pass, const kn_conf_result *results, int n) {
  FILE *fp = fopen(path, "w");
  if (!fp) {
    fprintf(stderr, "kn_conformance: cannot write '%s'\n", path);
    return -1;
  }
  int count[KN_CONF_N_STATUS] = {0};
  for (int i = 0; i < n; i++) count[results[i].status]++;
  group *groups = calloc((size_t)n + 1, sizeof *groups);
  KN_ASSERT(groups, "out of memory");

  if (gpu_interp)
    fprintf(fp, "# ONNX backend node tests on the GPU path: conformance report\n\n"
                "Each model compiled for `cuda` up to its CUDA C (`kn_conformance --gpu-interp`: plan, GPU "
                "verifier, emitter; no NVRTC), every data set run through the plan's kernels in the GPU "
                "interpreter (`ir/loop/gpu_eval.h`). A race, a read before a `cp.async` wait, a divergent "
                "barrier or an index out of bounds fails the test.\n\n");
  else
    fprintf(fp, "# ONNX backend node tests: conformance report\n\n");
  fprintf(fp, "Generated by `kn_conformance` (tests/conformance) from the node tests of the onnx "
              "Python package **%s**.\n\n",
          onnx_version);
  fprintf(fp, "| tests | passed | passed with inputs bound at compile time | failed | skipped | wall time |\n"
              "|---|---|---|---|---|---|\n");
  fprintf(fp, "| %d | %d | %d | %d | %d | %.0f s |\n\n", n, count[KN_CONF_PASS], count[KN_CONF_PASS_BOUND],
          count[KN_CONF_FAIL], count[KN_CONF_SKIP], seconds);
  fprintf(fp, "*Skipped*: Kiln refused the model at compile time (the first diagnostic). "
              "*Failed*: it compiled, but the results, shapes or dtypes differ from ONNX's "
              "(rtol 1e-3, atol 1e-7; exact for integers and booleans), or the test crashed or "
              "timed out. Every test that did not pass is listed below, grouped by reason.\n\n"
              "*Passed with inputs bound at compile time*: Kiln refused the model because some "
              "graph inputs must be constants (a Reduce's axes, a Reshape's shape...); with exactly "
              "those inputs bound to each data set's values (`kiln compile --bind`, one compile per "
              "data set) every data set passed. Not counted as passed.\n");
  if (count[KN_CONF_PASS_BOUND]) {
    fprintf(fp, "\n## Passed with inputs bound at compile time (%d)\n\n", count[KN_CONF_PASS_BOUND]);
    for (int i = 0; i < n; i++)
      if (results[i].status == KN_CONF_PASS_BOUND)
        fprintf(fp, "- `%s`: %s\n", results[i].name, results[i].detail);
  }
  if (cpu_pass) print_cpu_losses(fp, results, n, cpu_pass, n_cpu_pass, groups);
  int n_groups = collect_groups(results, n, NULL, 0, groups);
  kn_conf_status section = KN_CONF_PASS;
  for (int g = 0; g < n_groups; g++) {
    if (groups[g].status != section) {
      section = groups[g].status;
      fprintf(fp, "\n## %s (%d)\n", section == KN_CONF_FAIL ? "Failed" : "Skipped", count[section]);
    }
    print_group(fp, &groups[g], results, n, NULL, 0);
  }
  free(groups);
  return fclose(fp) == 0 ? 0 : -1;
}
