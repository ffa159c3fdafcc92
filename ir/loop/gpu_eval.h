/* gpu_eval.h — the GPU-semantics interpreter of the loop IR and the GPU
 * kernel verifier (ir/loop/gpu_eval.c, gpu_verify.c), for tests and for
 * kiln compile's checks. */
#ifndef KN_GPU_EVAL_H
#define KN_GPU_EVAL_H

#include "ir/loop/loop.h"

/* Limits of the devices a kernel is compiled for (the tightest of them). */
typedef struct kn_gpu_limits {
  int max_threads;          /* per block: 1024 */
  int64_t max_shared_bytes; /* per block, static + dynamic */
} kn_gpu_limits;

/* Checks that GPU kernel k can run: the BLOCK / THREAD structure of loop.h,
 * at most limits->max_threads threads, its SHARED buffers within
 * limits->max_shared_bytes, no barrier or MMA under a condition or a loop
 * bound that depends on a thread variable (nor an MMA whose warp is not
 * whole: the thread count a multiple of 32), GPU statements only inside the
 * THREAD loops. Returns 0, or -1 with a diagnostic naming the kernel and the
 * statement. */
int kn_loop_verify_gpu(const kn_kernel *k, const kn_gpu_limits *limits, kn_diag *d);

/* Runs GPU kernel k on host memory (args: one pointer per param, as
 * kn_loop_eval) for batch `batch`, every block, with GPU semantics: the
 * threads of a block run each statement in turn between barriers; a
 * warp's MMA takes the fragments of its 32 threads (ir/loop/mma.h).
 * Returns 0, or -1 with a diagnostic on what real hardware would get wrong
 * or undefined: a SHARED element touched by two threads since the last
 * barrier where one of them wrote it (a missing barrier), a cp.async
 * destination read before its wait (and barrier), a barrier or MMA reached
 * by part of a block or warp, an index outside its buffer. */
int kn_gpu_eval(const kn_kernel *k, void *const *args, int64_t batch, kn_diag *d);

#endif
