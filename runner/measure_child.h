/* measure_child.h — the measuring child of kiln-runner (measure_child.c). */
#ifndef KN_RUNNER_MEASURE_CHILD_H
#define KN_RUNNER_MEASURE_CHILD_H

#include <stdbool.h>
#include <stdint.h>

/* A parsed `run` request (proto.h). */
typedef struct kn_runner_run_req {
  int64_t so_bytes, ref_bytes;
  bool want_out; /* out=1: return the output (the reference run) */
  int threads;   /* 0: the artifact's default */
  int samples;
  double repeat_s, timeout_s;
  uint64_t seed;
  char fault[8]; /* none, crash, hang, wrong, busy: planted faults for tests */
  bool self_load; /* runner option, not a request field: load with elf_load.c */
} kn_runner_run_req;

/* What the child reports: code "ok", or an error code of proto.h. */
typedef struct kn_runner_outcome {
  char code[16];
  char message[200];
  double seconds, max_error;
  int64_t out_bytes;
  bool noisy; /* the timing's trust (rt/measure_util.h, kn_rt_timing) */
  int samples, disturbed;
  double spread;
} kn_runner_outcome;

/* Runs in the child: measures so_path (whose bytes are `so`) and writes one kn_runner_outcome to
 * fd, the output to out_path when rq->want_out; never returns. */
_Noreturn void kn_runner_measure_child(int fd, const char *so_path, const unsigned char *so,
                                       const kn_runner_run_req *rq, const void *ref, const char *out_path);

#endif
