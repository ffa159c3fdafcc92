/* pipeline.h — `kiln compile` as a library call (used by the CLI and tests). */
#ifndef KN_PIPELINE_H
#define KN_PIPELINE_H

#include <stdbool.h>

#include "../ir/graph.h"

typedef struct kn_compile_opts {
  const char *model;      /* input .onnx */
  const char *output;     /* out.so or out.o (out.h is written beside it) */
  const char *target;     /* target string, NULL = host */
  const char *prefix;     /* C identifier prefix of the artifact's symbols */
  const char *dump_after; /* stage name, or NULL */
  const char *tuning_log; /* JSONL tuning records to replay, or NULL */
  int64_t max_batch;
  bool verbose;
} kn_compile_opts;

/* Stage names accepted by --dump-after, NULL-terminated. */
extern const char *const kn_pipeline_stages[];
bool kn_pipeline_stage_valid(const char *name);

/* Loads and shape-infers a model (the front of the pipeline). */
int kn_pipeline_load(const char *model, int64_t max_batch, kn_graph *g, kn_diag *d);
/* Runs the graph passes in order (shapes re-inferred after each). */
int kn_pipeline_optimize(const kn_compile_opts *o, kn_graph *g, kn_diag *d);
/* The whole pipeline; writes nothing on failure. */
int kn_compile(const kn_compile_opts *o, kn_diag *d);

#endif
