/* run_profile.h — `kiln run --profile`: per-kernel timing of a loaded .so
 * artifact through its P_run_profiled entry (ABI 1.1), printed as a table and
 * optionally written as a Chrome trace (run_profile.c). */
#ifndef KN_TOOLS_RUN_PROFILE_H
#define KN_TOOLS_RUN_PROFILE_H

#include <stdio.h>

#include "rt/loader.h"
#include "tools/json_out.h"

typedef struct kn_profile_opts {
  long runs;              /* profiled runs (>= 1), after `warmup` plain ones */
  long warmup;
  int threads;            /* the pool size the artifact was set to */
  double peak_gflops;     /* > 0: given (--peak); 0: measured now (~0.2 s) */
  const char *trace_path; /* NULL: no trace */
  kn_jw *json;            /* non-NULL: the table also goes there, as the member "profile" of the open object */
} kn_profile_opts;

/* Runs the artifact o->warmup + o->runs times on the bound buffers, prints the
 * per-kernel table to `out` and writes the trace. Returns 0, or -1 with a
 * diagnostic (no profiling entry, allocation, trace file). */
int kn_run_profile(const kn_loader *l, const void *const *inputs, void *const *outputs,
                   void *workspace, int64_t batch, const kn_profile_opts *o, FILE *out,
                   kn_diag *d);

#endif
