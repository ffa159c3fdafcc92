/* runtime_cuda.h — the runtime linked into GPU artifacts (rt/runtime_cuda.c)
 * in place of rt/runtime.c: the plan executor over the CUDA driver API.
 *
 * Compiled once at kiln build time (-fPIC -fvisibility=hidden) and embedded
 * into kiln; packaging links it next to the host tables of a GPU artifact.
 * It uses libc, pthreads and dlopen only: the driver (libcuda.so.1) is
 * opened on the first run, so the artifact links against no CUDA library
 * and loads on machines without one (its runs then fail with
 * KILN_ERR_DEVICE and a one-line P_last_error). */
#ifndef KN_RT_RUNTIME_CUDA_H
#define KN_RT_RUNTIME_CUDA_H

#include <stdint.h>

#include "../include/kiln/artifact.h"

#ifndef KN_RT_HIDDEN
#define KN_RT_HIDDEN __attribute__((visibility("hidden")))
#endif

/* P_run of a GPU artifact (a->gpu != NULL). `workspace` is not used: the
 * workspace lives on the device. Inputs and outputs may be host or device
 * pointers (told apart with cuPointerGetAttribute; docs/abi.md). */
KN_RT_HIDDEN int kn_rt_cuda_execute(const kiln_artifact *a, const void *const *inputs,
                                    void *const *outputs, void *workspace, int64_t batch);
/* P_run_profiled: one event per step (task -1), timed with CUDA events. */
KN_RT_HIDDEN int kn_rt_cuda_execute_profiled(const kiln_artifact *a, const void *const *inputs,
                                             void *const *outputs, void *workspace, int64_t batch,
                                             kiln_prof_event *events, int64_t capacity,
                                             int64_t *n_events);
/* P_set_threads: checks the range, changes nothing (the host side does no
 * parallel work). */
KN_RT_HIDDEN int kn_rt_cuda_set_threads(int n);
/* P_set_stream: the CUstream later runs use (NULL: the default stream). */
KN_RT_HIDDEN int kn_rt_cuda_set_stream(void *stream);
/* P_last_error: the one-line message of this thread's last failed call,
 * "" when it succeeded. */
KN_RT_HIDDEN const char *kn_rt_cuda_last_error(void);

#endif
