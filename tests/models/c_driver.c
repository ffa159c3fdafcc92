/* c_driver.c — runs a portable C artifact (`kiln compile --target c`) on .npy
 * files; built by check_portable_c.py together with the artifact's .c, the
 * .npy reader / writer of the CLI (tools/npy.c) and base/base.c:
 *
 *   cc -std=c17 -O2 -I REPO -DKP=model -DKILN_HEADER='"model.h"' c_driver.c
 *      model.c REPO/tools/npy.c REPO/base/base.c -o drv -lm -lpthread
 *   drv BATCH THREADS IN.npy... OUT.npy...
 *
 * Inputs are checked against the descriptor (dtype, shape at BATCH); outputs
 * are written with the descriptor's shapes. Uses the artifact only through
 * the ABI its header declares. Exits 0 after "driver: ok". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/npy.h"
#include KILN_HEADER

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

static int fail(const char *what, const char *detail) {
  fprintf(stderr, "driver: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  return 1;
}

static void shape_of(const kiln_tensor_desc *t, int64_t batch, int64_t *dims, int64_t *numel) {
  *numel = 1;
  for (int i = 0; i < t->rank; i++) {
    dims[i] = (t->batch_mask >> i & 1u) ? t->dims[i] * batch : t->dims[i];
    *numel *= dims[i];
  }
}

int main(int argc, char **argv) {
  const kiln_artifact *a = &CAT(KP, _artifact);
  if (argc != 3 + a->n_inputs + a->n_outputs) return fail("usage: driver BATCH THREADS IN.npy... OUT.npy...", NULL);
  int64_t batch = atoll(argv[1]);
  int threads = atoi(argv[2]);
  int rc = 1;
  kn_diag d;
  kn_diag_init(&d);
  kn_npy *ins = calloc((size_t)a->n_inputs + 1, sizeof *ins);
  const void **in_ptrs = calloc((size_t)a->n_inputs + 1, sizeof *in_ptrs);
  void **outs = calloc((size_t)a->n_outputs + 1, sizeof *outs);
  void *ws = NULL;
  for (int i = 0; i < a->n_inputs; i++) {
    const kiln_tensor_desc *t = &a->inputs[i];
    if (kn_npy_read(argv[3 + i], &ins[i], &d) < 0) {
      kn_diag_print(&d, "driver");
      goto done;
    }
    int64_t dims[16], numel;
    shape_of(t, batch, dims, &numel);
    bool ok = kn_dtype_to_onnx(ins[i].dtype) == t->dtype && ins[i].rank == t->rank;
    for (int r = 0; ok && r < t->rank; r++) ok = ins[i].dims[r] == dims[r];
    if (!ok) {
      fail("input does not match the descriptor's dtype and shape", argv[3 + i]);
      goto done;
    }
    in_ptrs[i] = ins[i].data;
  }
  for (int i = 0; i < a->n_outputs; i++) {
    int64_t dims[16], numel;
    shape_of(&a->outputs[i], batch, dims, &numel);
    outs[i] = malloc((size_t)numel * kn_dtype_size(kn_dtype_from_onnx(a->outputs[i].dtype)) + 1);
  }
  ws = aligned_alloc(64, ((size_t)a->workspace_size + 63) / 64 * 64 + 64);
  if (!ws) {
    fail("cannot allocate the workspace", NULL);
    goto done;
  }
  if (CAT(KP, _set_threads)(threads) != KILN_OK) {
    fail("set_threads failed", argv[2]);
    goto done;
  }
  int status = CAT(KP, _run)(in_ptrs, outs, ws, batch);
  if (status != KILN_OK) {
    fprintf(stderr, "driver: run returned %d\n", status);
    goto done;
  }
  for (int i = 0; i < a->n_outputs; i++) {
    const kiln_tensor_desc *t = &a->outputs[i];
    int64_t dims[16], numel;
    shape_of(t, batch, dims, &numel);
    if (kn_npy_write(argv[3 + a->n_inputs + i], kn_dtype_from_onnx(t->dtype), t->rank, dims, outs[i], &d) < 0) {
      kn_diag_print(&d, "driver");
      goto done;
    }
  }
  printf("driver: ok (%s, target %s, %d steps, batch %lld, %d threads)\n", a->prefix, a->target,
         a->n_steps, (long long)batch, threads);
  rc = 0;
done:
  for (int i = 0; i < a->n_inputs; i++) kn_npy_free(&ins[i]);
  for (int i = 0; i < a->n_outputs; i++) free(outs[i]);
  free(ins);
  free(in_ptrs);
  free(outs);
  free(ws);
  kn_diag_free(&d);
  return rc;
}
