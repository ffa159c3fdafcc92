/* inspect_artifact.c — `kiln inspect ART.so`: what a compiled artifact
 * holds, read through its descriptor (rt/loader.h): provenance, tensors,
 * sizes and the plan; for a GPU artifact (ABI 1.4) also the code images
 * (sm, cubin or PTX, bytes) and each kernel's launch shape, its grid at
 * batch 1 and at max_batch from the artifact's own grid function.
 * Loading runs nothing and needs no GPU or driver. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/loader.h"
#include "tools/inspect_artifact.h"

/* "  (check)" for a check step of input values, "  (index check)" for one of
 * --check-indices (kiln_step.check), "" otherwise. */
static const char *check_label(const kiln_artifact *a, const kiln_step *step) {
  if (a->abi_minor < 2 || !step->check) return "";
  return step->check == KILN_CHECK_INDEX ? "  (index check)" : "  (check)";
}

static void print_tensor(const char *kind, const kiln_tensor_desc *t) {
  char shape[256];
  kn_loader_shape_str(t, 0, shape, sizeof shape);
  printf("%s: %s %s [%s]\n", kind, t->name, kn_dtype_name(kn_loader_dtype(t)), shape);
}

/* The images and launch shapes of a GPU artifact. */
static int print_gpu(const kiln_artifact *a, kn_diag *d) {
  const kiln_gpu *g = a->gpu;
  printf("device workspace: %lld bytes (allocated on the device at the first run)\n",
         (long long)g->workspace_size);
  for (int i = 0; i < g->n_images; i++)
    printf("image: %s_%d %s, %lld bytes\n", g->images[i].ptx ? "compute" : "sm", (int)g->images[i].sm,
           g->images[i].ptx ? "ptx (JIT-compiled for this and newer GPUs)" : "cubin",
           (long long)g->images[i].size);
  int64_t *grid1 = calloc((size_t)a->n_steps * 3 + 1, sizeof *grid1);
  int64_t *gridn = calloc((size_t)a->n_steps * 3 + 1, sizeof *gridn);
  if (!grid1 || !gridn) {
    free(grid1);
    free(gridn);
    return kn_diag_error(d, "out of memory");
  }
  void *args1[1] = {grid1}, *argsn[1] = {gridn};
  g->grid(args1, 1, 0, 1);
  g->grid(argsn, a->max_batch, 0, 1);
  printf("kernels (grid at N = 1 / N = %lld, block, dynamic shared bytes):\n", (long long)a->max_batch);
  for (int s = 0; s < a->n_steps; s++) {
    const kiln_gpu_launch *l = &g->launches[s];
    const int64_t *x = &grid1[3 * s], *y = &gridn[3 * s];
    printf("  %3d  %-28s grid %lldx%lldx%lld / %lldx%lldx%lld  block %dx%dx%d  shared %d  args %d%s\n", s,
           a->steps[s].name, (long long)x[0], (long long)x[1], (long long)x[2], (long long)y[0], (long long)y[1],
           (long long)y[2], l->block[0], l->block[1], l->block[2], l->shared_bytes, a->steps[s].n_args,
           check_label(a, &a->steps[s]));
  }
  free(grid1);
  free(gridn);
  return 0;
}

int kn_inspect_artifact(const char *path, kn_diag *d) {
  kn_loader l;
  if (kn_loader_open(path, &l, d)) return -1;
  const kiln_artifact *a = l.art;
  bool gpu = a->abi_minor >= 4 && a->gpu;
  printf("artifact: %s\nprefix: %s\nkiln: %s\nabi: %u.%u\ntarget: %s\n", path, a->prefix, a->kiln_version,
         a->abi_version, a->abi_minor, a->target);
  printf("max batch: %lld\n", (long long)a->max_batch);
  for (int i = 0; i < a->n_inputs; i++) print_tensor("input", &a->inputs[i]);
  for (int i = 0; i < a->n_outputs; i++) print_tensor("output", &a->outputs[i]);
  printf("workspace: %lld bytes, aligned to %lld\nweights: %d\n", (long long)a->workspace_size,
         (long long)a->workspace_align, a->n_consts);
  int status = 0;
  if (gpu) {
    status = print_gpu(a, d);
  } else {
    printf("kernels:\n");
    for (int s = 0; s < a->n_steps; s++)
      printf("  %3d  %-28s args %d%s%s\n", s, a->steps[s].name, a->steps[s].n_args,
             a->steps[s].parallel ? "  parallel" : "", check_label(a, &a->steps[s]));
  }
  kn_loader_close(&l);
  return status;
}
