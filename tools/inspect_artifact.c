/* inspect_artifact.c — `kiln inspect ART.so`: what a compiled artifact
 * holds, read through its descriptor (rt/loader.h): provenance, tensors,
 * sizes and the plan; for a GPU artifact (ABI 1.4) also the code images
 * (sm, cubin or PTX, bytes) and each kernel's launch shape, its grid at
 * batch 1 and at max_batch from the artifact's own grid function.
 * Loading runs nothing and needs no GPU or driver. With --json the same
 * facts are one JSON object (docs/cli.md lists its members). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/loader.h"
#include "tools/inspect_artifact.h"
#include "tools/json_out.h"

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

/* Each step's grid (x, y, z) of a GPU artifact at batch 1 and at max_batch,
 * from its grid function; the caller frees both. */
static int grids(const kiln_artifact *a, int64_t **grid1, int64_t **gridn, kn_diag *d) {
  *grid1 = calloc((size_t)a->n_steps * 3 + 1, sizeof **grid1);
  *gridn = calloc((size_t)a->n_steps * 3 + 1, sizeof **gridn);
  if (!*grid1 || !*gridn) {
    free(*grid1);
    free(*gridn);
    return kn_diag_error(d, "out of memory");
  }
  void *args1[1] = {*grid1}, *argsn[1] = {*gridn};
  a->gpu->grid(args1, 1, 0, 1);
  a->gpu->grid(argsn, a->max_batch, 0, 1);
  return 0;
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
  int64_t *grid1, *gridn;
  if (grids(a, &grid1, &gridn, d) < 0) return -1;
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

/* A tensor as JSON: dims per batch unit, and the axes the batch multiplies. */
static void json_tensor(kn_jw *j, const kiln_tensor_desc *t) {
  kn_jw_object(j, NULL);
  kn_jw_str(j, "name", t->name);
  kn_jw_str(j, "dtype", kn_dtype_name(kn_loader_dtype(t)));
  kn_jw_array(j, "shape", true);
  for (int i = 0; i < t->rank; i++) kn_jw_int(j, NULL, t->dims[i]);
  kn_jw_end(j);
  kn_jw_array(j, "batch_axes", true);
  for (int i = 0; i < t->rank; i++)
    if ((t->batch_mask >> i) & 1u) kn_jw_int(j, NULL, i);
  kn_jw_end(j);
  kn_jw_end(j);
}

static void json_grid(kn_jw *j, const char *key, const int64_t *xyz) {
  kn_jw_array(j, key, true);
  for (int i = 0; i < 3; i++) kn_jw_int(j, NULL, xyz[i]);
  kn_jw_end(j);
}

/* The artifact as one JSON object on stdout. */
static int json_artifact(const char *path, const kiln_artifact *a, kn_diag *d) {
  const kiln_gpu *g = a->abi_minor >= 4 ? a->gpu : NULL;
  int64_t *grid1 = NULL, *gridn = NULL;
  if (g && grids(a, &grid1, &gridn, d) < 0) return -1;
  kn_jw j;
  kn_jw_init(&j, stdout);
  kn_jw_object(&j, NULL);
  kn_jw_str(&j, "artifact", path);
  kn_jw_str(&j, "prefix", a->prefix);
  kn_jw_str(&j, "kiln_version", a->kiln_version);
  kn_jw_int(&j, "abi_version", a->abi_version);
  kn_jw_int(&j, "abi_minor", a->abi_minor);
  kn_jw_str(&j, "target", a->target);
  kn_jw_int(&j, "max_batch", a->max_batch);
  kn_jw_array(&j, "inputs", false);
  for (int i = 0; i < a->n_inputs; i++) json_tensor(&j, &a->inputs[i]);
  kn_jw_end(&j);
  kn_jw_array(&j, "outputs", false);
  for (int i = 0; i < a->n_outputs; i++) json_tensor(&j, &a->outputs[i]);
  kn_jw_end(&j);
  kn_jw_int(&j, "workspace_bytes", a->workspace_size);
  kn_jw_int(&j, "workspace_align", a->workspace_align);
  kn_jw_int(&j, "weights", a->n_consts);
  if (g) {
    kn_jw_int(&j, "device_workspace_bytes", g->workspace_size);
    kn_jw_array(&j, "images", false);
    for (int i = 0; i < g->n_images; i++) {
      kn_jw_object(&j, NULL);
      kn_jw_int(&j, "sm", g->images[i].sm);
      kn_jw_str(&j, "kind", g->images[i].ptx ? "ptx" : "cubin");
      kn_jw_int(&j, "bytes", g->images[i].size);
      kn_jw_end(&j);
    }
    kn_jw_end(&j);
  }
  kn_jw_array(&j, "kernels", false);
  for (int s = 0; s < a->n_steps; s++) {
    const kiln_step *st = &a->steps[s];
    kn_jw_object(&j, NULL);
    kn_jw_int(&j, "step", s);
    kn_jw_str(&j, "name", st->name);
    kn_jw_int(&j, "args", st->n_args);
    kn_jw_bool(&j, "parallel", st->parallel);
    kn_jw_bool(&j, "check", a->abi_minor >= 2 && st->check);
    kn_jw_num(&j, "flops_per_batch", st->flops);
    kn_jw_str(&j, "nodes", st->nodes ? st->nodes : "");
    if (g) {
      const kiln_gpu_launch *l = &g->launches[s];
      json_grid(&j, "grid_batch_1", &grid1[3 * s]);
      json_grid(&j, "grid_max_batch", &gridn[3 * s]);
      kn_jw_array(&j, "block", true);
      for (int i = 0; i < 3; i++) kn_jw_int(&j, NULL, l->block[i]);
      kn_jw_end(&j);
      kn_jw_int(&j, "shared_bytes", l->shared_bytes);
    }
    kn_jw_end(&j);
  }
  kn_jw_end(&j);
  kn_jw_array(&j, "pipes", false);
  for (int i = 0; a->abi_minor >= 3 && i < a->n_pipes; i++) {
    kn_jw_array(&j, NULL, true);
    kn_jw_int(&j, NULL, a->pipes[i].first);
    kn_jw_int(&j, NULL, a->pipes[i].first + 1);
    kn_jw_end(&j);
  }
  kn_jw_end(&j);
  kn_jw_end(&j);
  free(grid1);
  free(gridn);
  if (fflush(stdout) != 0 || ferror(stdout)) return kn_diag_error(d, "cannot write to stdout");
  return 0;
}

int kn_inspect_artifact(const char *path, bool json, kn_diag *d) {
  kn_loader l;
  if (kn_loader_open(path, &l, d)) return -1;
  const kiln_artifact *a = l.art;
  if (json) {
    int rc = json_artifact(path, a, d);
    kn_loader_close(&l);
    return rc;
  }
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
