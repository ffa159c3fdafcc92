/* crash_lib.c — a hand-made "artifact" for the kiln-runner tests: a valid
 * kiln_artifact_v1 descriptor (one float[4] input and output) whose run
 * writes through a null pointer, so measuring it must crash the runner's
 * child and never the runner. Built as a .so with the runner's compiler. */
#include <stddef.h>
#include <stdint.h>

#include "kiln/artifact.h"

static const int64_t dims[1] = {4};
static const kiln_tensor_desc in_desc = {"x", 1, 1, dims, 0};
static const kiln_tensor_desc out_desc = {"y", 1, 1, dims, 0};

static int crash_run(const void *const *inputs, void *const *outputs, void *workspace, int64_t batch) {
  (void)inputs, (void)outputs, (void)workspace;
  volatile float *nowhere = (volatile float *)(uintptr_t)(batch - 1); /* batch is 1: NULL */
  *nowhere = 1.0f;
  return KILN_OK;
}

static int crash_set_threads(int n) { return n >= 1 ? KILN_OK : KILN_ERR_THREADS; }

__attribute__((visibility("default"))) const kiln_artifact kiln_artifact_v1 = {
    .abi_version = KILN_ABI_VERSION, .prefix = "crash", .kiln_version = "test", .target = "any",
    .n_inputs = 1, .n_outputs = 1, .inputs = &in_desc, .outputs = &out_desc,
    .workspace_size = 64, .workspace_align = 64, .max_batch = 1,
    .run = crash_run, .set_threads = crash_set_threads};
