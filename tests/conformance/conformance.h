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

#include "ir/graph/graph.h"
#include "tools/pipeline.h"

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
 * artifact runs with `threads` threads; with `gpu_interp`, the model is
 * compiled for `cuda` instead and its plan run in the GPU interpreter
 * (run_gpu.c), no artifact. Never exits; may crash on a compiler bug (the
 * runner forks around it). */
void kn_conf_run_test(const char *test_dir, const char *work_dir, int threads, bool gpu_interp,
                      kn_conf_result *r);

/* GPU mode (run_gpu.c): compiles o->model for `cuda` up to the CUDA C (no
 * NVRTC, no packaging) and, once the plan is built, runs the data sets
 * test_dir/sets[0 .. n_sets) through its kernels in the GPU interpreter,
 * inputs named in bound[0 .. n_bound) left out (compiled in). Returns -1 when
 * the compile stopped before the plan (the refusal in d), else 0 with r set
 * to PASS, or FAIL with the first data set's or the verifier's diagnostic. */
int kn_conf_gpu_run(kn_compile_opts o, const char *test_dir, char **sets, int n_sets,
                    const kn_bind_need *bound, int n_bound, kn_conf_result *r, kn_diag *d);

/* ---- shared by run_test.c and run_gpu.c ---- */

#define KN_CONF_MAX_TENSORS 64

void kn_conf_set_result(kn_conf_result *r, kn_conf_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The first diagnostic line without a leading "<path>: " naming `path`. */
const char *kn_conf_first_diag(const kn_diag *d, const char *path);
/* The tensors prefix_0.pb, prefix_1.pb ... of one data set, loaded into g
 * (value indices into vals, KN_CONF_MAX_TENSORS at most). Returns the count,
 * or -1 with a diagnostic. */
int kn_conf_load_tensors(const char *set_dir, const char *prefix, kn_graph *g, int *vals, kn_diag *d);
void kn_conf_shape_str(const kn_shape *s, char *buf, size_t cap);
/* Index of the test tensor feeding tensor `k` named `name` of the model:
 * the one with the same name, else the one at the same position. */
int kn_conf_match_tensor(const kn_graph *g, const int *vals, int n_vals, const char *name, int k);
/* Whether `numel` elements match by ONNX's default tolerances; *max_err is
 * the largest absolute error (NaN for a NaN / finite mismatch). */
bool kn_conf_values_close(const void *actual, const void *expected, kn_dtype dt, int64_t numel,
                          double *max_err);
/* Index into bound[] of the binding that test tensor k (of n) feeds, or -1. */
int kn_conf_bound_tensor(const kn_graph *g, const int *vals, int n, const kn_bind_need *bound,
                         int n_bound, int k);

/* Writes the markdown report of `n` results: counts, the onnx version, the
 * wall time, and every non-passing test grouped by reason. With gpu_interp,
 * titled as the GPU path's; with cpu_pass (the names the CPU passes), those
 * that did not pass here come first. 0, or -1 with a message on stderr. */
int kn_conf_write_report(const char *path, const char *onnx_version, double seconds, bool gpu_interp,
                         const char *const *cpu_pass, int n_cpu_pass, const kn_conf_result *results, int n);

#endif
