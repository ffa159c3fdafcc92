/* cuda.h — the GPU back end: loop IR -> CUDA C -> NVRTC -> cubin / PTX.
 *
 *   kn_cuda_launch_info  a GPU kernel's launch shape (grid, block, shared)
 *   kn_cuda_emit         kernels -> one headerless CUDA C translation unit
 *   kn_nvrtc_compile     that source -> a cubin per target architecture and
 *                        PTX for newer ones, plus ptxas's resource report
 *
 * NVRTC is opened with dlopen when first needed, so kiln runs (and compiles
 * CPU artifacts) where the CUDA toolkit is absent; kn_nvrtc_available says
 * whether it is here. Nothing in this header needs a GPU. */
#ifndef KN_CUDA_H
#define KN_CUDA_H

#include "codegen/target.h"
#include "ir/loop/loop.h"

typedef struct kn_cuda_launch {
  const char *name;     /* the kernel's symbol (extern "C") */
  kn_expr *grid[3];     /* blocks in x, y, z: int64 expressions of the kernel's batch var (or constants) */
  int block[3];         /* threads in x, y, z */
  int64_t shared_bytes; /* dynamic shared memory to launch with */
} kn_cuda_launch;

/* Reads k's launch shape from its BLOCK / THREAD loops (loop.h). Returns 0,
 * or -1 with a diagnostic when k is not a well-formed GPU kernel. */
int kn_cuda_launch_info(const kn_kernel *k, kn_cuda_launch *out, kn_diag *d);

/* Shared memory one block may use on every architecture of t (bytes, with
 * the opt-in above 48 KiB): the least of their limits. */
int64_t kn_cuda_max_shared(const kn_target *t);

/* ptxas's report for one kernel on one architecture. */
typedef struct kn_cuda_resources {
  int sm;
  int registers;
  int64_t spill_stores, spill_loads; /* bytes */
  int64_t shared_bytes;              /* static shared memory */
} kn_cuda_resources;

typedef struct kn_cuda_image {
  int sm;           /* 80 = sm_80 */
  bool ptx;         /* PTX text (for compute_<sm> and newer), else a cubin for exactly sm */
  const uint8_t *data;
  size_t size;      /* PTX: without a trailing NUL */
} kn_cuda_image;

typedef struct kn_cuda_module {
  int n_images;
  kn_cuda_image *images; /* a cubin per target sm, ascending, then one PTX */
  int n_kernels;
  kn_cuda_resources *resources; /* [kernel * n_sm + i]: kernel in source order, i the target's i-th sm */
} kn_cuda_module;

/* The CUDA C text of kernels ks[0..n) (GPU kernels, launch-checked), one
 * translation unit that needs no header, into arena A. Returns 0, or -1
 * with a diagnostic. */
int kn_cuda_emit(const kn_kernel *const *ks, int n, kn_arena *A, const char **source, kn_diag *d);

/* Is NVRTC here? false with a one-line diagnostic saying what to install
 * (d may be NULL). */
bool kn_nvrtc_available(kn_diag *d);

/* The version of the NVRTC found at run time (*major, *minor), or false
 * when none is usable (kiln --version). */
bool kn_nvrtc_version(int *major, int *minor);

/* Compiles `source` (from kn_cuda_emit, n_kernels kernels named in `names`)
 * for every architecture of t. An NVRTC error is reported with its log,
 * naming the kernel and line it points at. Returns 0, or -1. */
int kn_nvrtc_compile(const char *source, const char *const *names, int n_kernels, const kn_target *t, kn_arena *A,
                     kn_cuda_module *out, kn_diag *d);

#endif
