/* mock_cuda.c — a stand-in CUDA driver for tests: built as libcuda.so.1 in
 * a test-only directory, which rt_cuda_mock alone puts on LD_LIBRARY_PATH.
 *
 * It implements the driver entry points rt/runtime_cuda.c uses over host
 * memory: cuMemAlloc is malloc, copies are memcpy, streams and events are
 * counters. Kernels do not run on a GPU; cuLaunchKernel records the launch
 * (name, grid, block, shared bytes, stream, arguments, batch) and gives the
 * kernels whose name has "addone" a meaning of its own so data flow can be checked:
 * arg1[i] = arg0[i] + 1 (float) for i < grid.x * block.x.
 *
 * An image is text, "MOCK <what>: name:nargs name:nargs ..."; a module is
 * the image, a function one of its names. $MOCK_CUDA_SM sets the compute
 * capability (default 80), $MOCK_CUDA_INIT the status cuInit returns
 * (default 0), $MOCK_CUDA_LOAD_FAIL=1 makes loading fail as a JIT would. The test reads mock_cuda_stats() through dlsym. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/rt/mock_cuda.h"

#define EXPORT __attribute__((visibility("default")))

static mock_cuda_stats stats;
static void *allocs[MOCK_MAX_ALLOCS];
static size_t alloc_sizes[MOCK_MAX_ALLOCS];

EXPORT mock_cuda_stats *mock_cuda_stats_get(void) { return &stats; }

static int env_int(const char *name, int fallback) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

EXPORT int cuGetErrorName(int r, const char **name) {
  switch (r) {
  case 0: *name = "CUDA_SUCCESS"; return 0;
  case 1: *name = "CUDA_ERROR_INVALID_VALUE"; return 0;
  case 100: *name = "CUDA_ERROR_NO_DEVICE"; return 0;
  case 218: *name = "CUDA_ERROR_INVALID_PTX"; return 0;
  case 500: *name = "CUDA_ERROR_NOT_FOUND"; return 0;
  default: *name = NULL; return 1;
  }
}

EXPORT int cuInit(unsigned flags) {
  stats.inits++;
  return flags ? 1 : env_int("MOCK_CUDA_INIT", 0);
}

EXPORT int cuDeviceGet(int *dev, int ordinal) {
  *dev = ordinal;
  return ordinal == 0 ? 0 : 101;
}

EXPORT int cuDeviceGetAttribute(int *value, int attribute, int dev) {
  (void)dev;
  int sm = env_int("MOCK_CUDA_SM", 80);
  if (attribute == 75) *value = sm / 10;
  else if (attribute == 76) *value = sm % 10;
  else return 1;
  return 0;
}

EXPORT int cuDevicePrimaryCtxRetain(void **ctx, int dev) {
  (void)dev;
  *ctx = &stats;
  stats.ctx_retains++;
  return 0;
}

EXPORT int cuCtxPushCurrent_v2(void *ctx) {
  if (ctx != &stats) return 1;
  stats.ctx_depth++;
  return 0;
}

EXPORT int cuCtxPopCurrent_v2(void **ctx) {
  if (stats.ctx_depth < 1) return 1;
  stats.ctx_depth--;
  if (ctx) *ctx = &stats;
  return 0;
}

EXPORT int cuModuleLoadDataEx(void **module, const void *image, unsigned n, int *options, void **values) {
  const char *text = image;
  if (strncmp(text, "MOCK ", 5) || env_int("MOCK_CUDA_LOAD_FAIL", 0)) {
    for (unsigned i = 0; i < n; i++)
      if (options[i] == 5) snprintf(values[i], 64, "mock: not a mock image\nsecond line");
    return 218;
  }
  snprintf(stats.loaded, sizeof stats.loaded, "%.*s", (int)strcspn(text + 5, ":"), text + 5);
  stats.module_loads++;
  *module = (void *)text;
  return 0;
}

EXPORT int cuModuleUnload(void *module) {
  (void)module;
  return 0;
}

/* A function handle: where " name:" starts in the image. */
EXPORT int cuModuleGetFunction(void **fn, void *module, const char *name) {
  const char *text = module;
  size_t n = strlen(name);
  for (const char *p = strchr(text, ' '); p; p = strchr(p + 1, ' '))
    if (!strncmp(p + 1, name, n) && p[1 + n] == ':') {
      *fn = (void *)(p + 1);
      return 0;
    }
  return 500;
}

EXPORT int cuFuncSetAttribute(void *fn, int attribute, int value) {
  (void)fn;
  if (attribute != 8) return 1;
  stats.max_dynamic_shared = value;
  return 0;
}

EXPORT int cuMemAlloc_v2(unsigned long long *ptr, size_t bytes) {
  for (int i = 0; i < MOCK_MAX_ALLOCS; i++)
    if (!allocs[i]) {
      allocs[i] = calloc(1, bytes);
      alloc_sizes[i] = bytes;
      *ptr = (unsigned long long)(uintptr_t)allocs[i];
      stats.allocs++;
      return 0;
    }
  return 2;
}

EXPORT int cuMemFree_v2(unsigned long long ptr) {
  for (int i = 0; i < MOCK_MAX_ALLOCS; i++)
    if (allocs[i] && (uintptr_t)allocs[i] == ptr) {
      free(allocs[i]);
      allocs[i] = NULL;
      stats.frees++;
      return 0;
    }
  return 1;
}

EXPORT int cuMemcpyHtoDAsync_v2(unsigned long long dst, const void *src, size_t bytes, void *stream) {
  (void)stream;
  memcpy((void *)(uintptr_t)dst, src, bytes);
  stats.htod++;
  stats.htod_bytes += (int64_t)bytes;
  return 0;
}

EXPORT int cuMemcpyDtoHAsync_v2(void *dst, unsigned long long src, size_t bytes, void *stream) {
  (void)stream;
  memcpy(dst, (const void *)(uintptr_t)src, bytes);
  stats.dtoh++;
  return 0;
}

EXPORT int cuPointerGetAttribute(void *value, int attribute, unsigned long long ptr) {
  if (attribute != 2) return 1;
  for (int i = 0; i < MOCK_MAX_ALLOCS; i++)
    if (allocs[i] && ptr >= (uintptr_t)allocs[i] && ptr < (uintptr_t)allocs[i] + alloc_sizes[i]) {
      *(unsigned *)value = 2; /* CU_MEMORYTYPE_DEVICE */
      return 0;
    }
  return 1; /* a host pointer the driver never saw */
}

EXPORT int cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                          unsigned shared, void *stream, void **params, void **extra) {
  if (extra || stats.n_launches == MOCK_MAX_LAUNCHES) return 1;
  mock_cuda_launch *l = &stats.launches[stats.n_launches++];
  const char *name = fn;
  size_t n = strcspn(name, ":");
  snprintf(l->name, sizeof l->name, "%.*s", (int)n, name);
  l->n_args = atoi(name + n + 1);
  l->grid[0] = gx, l->grid[1] = gy, l->grid[2] = gz;
  l->block[0] = bx, l->block[1] = by, l->block[2] = bz;
  l->shared = shared;
  l->stream = stream;
  for (int i = 0; i < l->n_args && i < MOCK_MAX_ARGS; i++) l->args[i] = *(unsigned long long *)params[i];
  l->batch = *(long long *)params[l->n_args];
  if (strstr(l->name, "addone")) {
    const float *in = (const float *)(uintptr_t)l->args[0];
    float *out = (float *)(uintptr_t)l->args[1];
    for (unsigned long i = 0; i < (unsigned long)gx * bx; i++) out[i] = in[i] + 1;
  }
  return 0;
}

EXPORT int cuStreamSynchronize(void *stream) {
  (void)stream;
  stats.syncs++;
  return 0;
}

/* Events are slots of a static pool (never freed: nothing to leak). */
static float event_pool[1024];
static int n_events;

EXPORT int cuEventCreate(void **ev, unsigned flags) {
  (void)flags;
  if (n_events == 1024) return 2;
  *ev = &event_pool[n_events++];
  return 0;
}

EXPORT int cuEventRecord(void *ev, void *stream) {
  (void)stream;
  *(float *)ev = (float)++stats.event_clock; /* 1 ms per record */
  return 0;
}

EXPORT int cuEventSynchronize(void *ev) {
  (void)ev;
  return 0;
}

EXPORT int cuEventElapsedTime(float *ms, void *start, void *end) {
  *ms = *(float *)end - *(float *)start;
  return 0;
}

EXPORT int cuEventDestroy_v2(void *ev) {
  (void)ev;
  return 0;
}
