/* client.h — the client side of the kiln-runner protocol (proto.h), used by
 * `kiln tune --runner HOST:PORT` (autotune/measure.c runs it in the
 * measuring child, so the session's timeouts and Ctrl-C apply as locally). */
#ifndef KN_RUNNER_CLIENT_H
#define KN_RUNNER_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/base.h"

typedef struct kn_runner_info {
  char arch[32];   /* "aarch64", "x86_64" */
  char version[32];
  int max_threads; /* 0: no cap; 1: a static runner measures on one thread */
} kn_runner_info;

/* Checks that the runner answers and accepts the token. 0, or -1 with a
 * diagnostic naming the runner and what it said. */
int kn_runner_ping(const char *addr, const char *token, kn_runner_info *info, kn_diag *d);

typedef struct kn_runner_req {
  const char *so_path;
  const char *ref_path; /* write_ref: the output is saved here; else it is uploaded and compared */
  bool write_ref;
  int threads, samples;
  double repeat_s, timeout_s;
  const char *fault; /* "none", or a planted fault (tests) */
} kn_runner_req;

typedef struct kn_runner_reply {
  char code[16];     /* "ok", a runner error code (proto.h), or "io" (no answer) */
  char message[240]; /* why, for anything but ok; for a noisy ok, why it is noisy */
  double seconds, max_error;
  bool noisy; /* ok, but the timing cannot be trusted (rt/measure_util.h) */
} kn_runner_reply;

/* One measurement on the runner at addr ("HOST:PORT"); retries while the
 * runner is busy, up to timeout_s + 60 s. Always fills *r. */
void kn_runner_measure(const char *addr, const char *token, const kn_runner_req *q, kn_runner_reply *r);

#endif
