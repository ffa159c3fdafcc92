/* loader.h — opens any Kiln .so artifact at run time (kn_loader library).
 *
 * Used by `kiln run`, the autotuner's local runner and the tests; it is not
 * part of artifacts. An artifact is found through the well-known symbol
 * kiln_artifact_v1 (include/kiln/artifact.h), so the loader needs no
 * knowledge of the model's prefix. Bad files (missing, not ELF, truncated,
 * another architecture, a .o, not an artifact, another ABI version) give a
 * one-line diagnostic, never a crash. */
#ifndef KN_RT_LOADER_H
#define KN_RT_LOADER_H

#include <stdio.h>

#include "include/kiln/artifact.h"
#include "base/base.h"

typedef struct kn_loader {
  void *dl;                 /* dlopen handle */
  const kiln_artifact *art; /* the descriptor inside it */
} kn_loader;

/* dlopen(RTLD_NOW | RTLD_LOCAL) + ABI checks. Returns 0, or -1 with a diagnostic. */
int kn_loader_open(const char *path, kn_loader *l, kn_diag *d);
void kn_loader_close(kn_loader *l);

/* Elements / bytes of a tensor at batch size `batch`; -1 on overflow or an
 * unknown dtype. */
int64_t kn_loader_numel(const kiln_tensor_desc *t, int64_t batch);
int64_t kn_loader_bytes(const kiln_tensor_desc *t, int64_t batch);
/* kn_dtype of a descriptor's ONNX dtype code (KN_DT_INVALID if unknown). */
kn_dtype kn_loader_dtype(const kiln_tensor_desc *t);
/* "N, 3, 224, 224" style shape text into buf. */
void kn_loader_shape_str(const kiln_tensor_desc *t, int64_t batch, char *buf, size_t cap);

/* A workspace of a->workspace_size bytes aligned to a->workspace_align;
 * free with kn_loader_workspace_free. NULL (and a diagnostic) on failure. */
void *kn_loader_workspace_new(const kiln_artifact *a, kn_diag *d);
void kn_loader_workspace_free(void *ws);

/* P_run / P_set_threads with the status turned into a diagnostic. */
int kn_loader_run(const kn_loader *l, const void *const *inputs, void *const *outputs,
                  void *workspace, int64_t batch, kn_diag *d);
int kn_loader_set_threads(const kn_loader *l, int n, kn_diag *d);
const char *kn_loader_status_name(int status);

/* P_run_profiled (ABI 1.1) into events[0, capacity); *n_events gets the
 * number written. An artifact without it (abi_minor 0, an older kiln) or a
 * too small buffer is a diagnostic. */
int kn_loader_run_profiled(const kn_loader *l, const void *const *inputs, void *const *outputs,
                           void *workspace, int64_t batch, kiln_prof_event *events,
                           int64_t capacity, int64_t *n_events, kn_diag *d);

#endif
