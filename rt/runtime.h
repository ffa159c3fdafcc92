/* runtime.h — the interface between generated artifact code and the tiny
 * runtime linked into every artifact (rt/runtime.c).
 *
 * The runtime is compiled once at kiln build time (-fPIC -fvisibility=hidden)
 * and embedded into the kiln binary; packaging links it next to the kernels.
 * Its symbols are hidden (and localized in .o artifacts), so any number of
 * artifacts coexist in one process, each with its own thread pool. It uses
 * libc, libm and pthreads only and never allocates while a model runs. */
#ifndef KN_RT_RUNTIME_H
#define KN_RT_RUNTIME_H

#include <stdint.h>

#include "../include/kiln/artifact.h"

/* Hidden in .so / .o artifacts; a portable C artifact (codegen/c_package.c)
 * includes this file with KN_RT_HIDDEN defined as `static`. */
#ifndef KN_RT_HIDDEN
#define KN_RT_HIDDEN __attribute__((visibility("hidden")))
#endif

/* A portable C artifact of an older layout may not call every entry. */
#define KN_RT_MAYBE_UNUSED __attribute__((unused))

/* Bounds checked by the packager, relied on by the runtime. */
#define KN_RT_MAX_ARGS 64     /* arguments of one kernel */
#define KN_RT_MAX_THREADS 256 /* P_set_threads accepts [1, 256] */
#define KN_RT_DEFAULT_THREAD_CAP 64

/* Runs every step of `a` (what P_run does). Returns KILN_OK or KILN_ERR_*. */
KN_RT_HIDDEN int kn_rt_execute(const kiln_artifact *a, const void *const *inputs,
                               void *const *outputs, void *workspace, int64_t batch);
/* P_run_profiled (ABI 1.1): kn_rt_execute recording kiln_prof_event's into
 * events[0, capacity). *n_events gets the number written, or, with
 * KILN_ERR_CAPACITY (nothing ran), the number needed. */
KN_RT_HIDDEN KN_RT_MAYBE_UNUSED int kn_rt_execute_profiled(const kiln_artifact *a,
                                                          const void *const *inputs,
                                                          void *const *outputs, void *workspace,
                                                          int64_t batch, kiln_prof_event *events,
                                                          int64_t capacity, int64_t *n_events);
/* Resizes the thread pool (what P_set_threads does). */
KN_RT_HIDDEN int kn_rt_set_threads(int n);

#endif
