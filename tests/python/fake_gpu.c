/* fake_gpu.c — a hand-made ABI 1.4 "artifact" standing for a GPU artifact on
 * a machine without a CUDA driver: a valid kiln_artifact_v1 descriptor (one
 * float[4] input and output) whose run fails with KILN_ERR_DEVICE and whose
 * P_last_error gives the reason a real one gives there. Built as a .so by
 * test_kiln.py (a real GPU artifact needs NVRTC to compile). */
#include <stddef.h>
#include <stdint.h>

#include "kiln/artifact.h"

static const int64_t dims[1] = {4};
static const kiln_tensor_desc in_desc = {"x", 1, 1, dims, 0};
static const kiln_tensor_desc out_desc = {"y", 1, 1, dims, 0};

static int fake_run(const void *const *inputs, void *const *outputs, void *workspace, int64_t batch) {
  (void)inputs, (void)outputs, (void)workspace, (void)batch;
  return KILN_ERR_DEVICE;
}

static int fake_set_threads(int n) { return n >= 1 && n <= 256 ? KILN_OK : KILN_ERR_THREADS; }

static const char *fake_last_error(void) {
  return "cannot load the CUDA driver libcuda.so.1: no NVIDIA driver on this machine";
}

__attribute__((visibility("default"))) const kiln_artifact kiln_artifact_v1 = {
    .abi_version = KILN_ABI_VERSION, .abi_minor = 4, .prefix = "fake", .kiln_version = "test",
    .target = "cuda -arch=sm_80", .n_inputs = 1, .n_outputs = 1, .inputs = &in_desc,
    .outputs = &out_desc, .workspace_size = 0, .workspace_align = 64, .max_batch = 1,
    .run = fake_run, .set_threads = fake_set_threads, .last_error = fake_last_error};
