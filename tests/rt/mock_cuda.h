/* mock_cuda.h — what the mock CUDA driver (mock_cuda.c) records, read by
 * test_rt_cuda.c through dlsym(libcuda.so.1, "mock_cuda_stats_get"). */
#ifndef KN_TEST_MOCK_CUDA_H
#define KN_TEST_MOCK_CUDA_H

#include <stdint.h>

#define MOCK_MAX_ALLOCS 64
#define MOCK_MAX_LAUNCHES 256
#define MOCK_MAX_ARGS 16

typedef struct mock_cuda_launch {
  char name[64];
  int n_args;
  unsigned grid[3], block[3], shared;
  void *stream;
  unsigned long long args[MOCK_MAX_ARGS];
  long long batch;
} mock_cuda_launch;

typedef struct mock_cuda_stats {
  int inits, ctx_retains, ctx_depth, module_loads, allocs, frees, htod, dtoh, syncs;
  int64_t htod_bytes;
  int max_dynamic_shared;
  int event_clock;
  char loaded[64]; /* "<what>" of the last image loaded */
  int n_launches;
  mock_cuda_launch launches[MOCK_MAX_LAUNCHES];
} mock_cuda_stats;

typedef mock_cuda_stats *(*mock_cuda_stats_fn)(void);

#endif
