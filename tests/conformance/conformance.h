/* conformance.h — the ONNX backend node-test runner (tests/conformance).
 *
 * run_test.c runs one test in the calling process (compile with kn_compile,
 * load with the artifact loader, run every data set, compare); runner.c runs
 * all tests, each in a forked child with a time limit, and checks the list of
 * tests expected to pass; report.c writes REPORT.md. */
#ifndef KN_CONFORMANCE_H
#define KN_CONFORMANCE_H

#include <stdbool.h>
#include <stddef.h>

/* KN_CONF_PASS_BOUND: Kiln refused the model because some graph inputs must
 * be constants (kn_pipeline_needed_bindings); with exactly those inputs bound
 * to each data set's values (kiln compile --bind), one compile per data set,
 * every data set passed. Counted apart from KN_CONF_PASS everywhere. */
typedef enum kn_conf_status { KN_CONF_PASS, KN_CONF_FAIL, KN_CONF_SKIP, KN_CONF_PASS_BOUND } kn_conf_status;
#define KN_CONF_N_STATUS 4

/* One finished test: its status and the text after "name: " (empty on PASS;
 * "inputs bound at compile time: a, b" on PASS_BOUND). */
typedef struct kn_conf_result {
  const char *name;
  kn_conf_status status;
  char detail[512];
} kn_conf_result;

/* Runs the node test in directory `test_dir` in this process, with scratch
 * files under `work_dir` (which exists), and fills `r` (name already set). The
 * artifact runs with `threads` threads. Never exits; may crash on a compiler
 * bug (the runner forks around it). */
void kn_conf_run_test(const char *test_dir, const char *work_dir, int threads, kn_conf_result *r);

/* Writes the markdown report of `n` results: counts, the onnx version, the
 * wall time, and every non-passing test grouped by reason. 0, or -1 with a
 * message on stderr. */
int kn_conf_write_report(const char *path, const char *onnx_version, double seconds,
                         const kn_conf_result *results, int n);

#endif
