/* artifact_harness.c — a plain C program that uses Kiln artifacts through
 * their ABI only (include/kiln/artifact.h), built by check_artifact.py.
 *
 * Two builds of this one file:
 *   linked:  cc -DKP=cnn -DKILN_HEADER='"cnn.h"' [-DKP2=mlp -DKILN_HEADER2='"mlp.h"']
 *            artifact_harness.c cnn.o [mlp.o] -lm -lpthread
 *            calls cnn_run / cnn_set_threads declared by the generated header;
 *   dlopen:  cc -DKILN_DLOPEN artifact_harness.c -ldl
 *            opens every .so named on the command line, finds `kiln_artifact_v1`
 *            in each, and runs them in one process.
 *
 * usage (linked): harness BATCH THREADS IN... OUT... [IN2... OUT2...]
 * usage (dlopen): harness BATCH THREADS SO IN... OUT... [SO IN... OUT...]...
 * Inputs and outputs are raw little-endian dense files (numpy .tofile()); the
 * counts come from the descriptors. Before the real run it checks the ABI's
 * error codes (bad batch, NULL / misaligned workspace, bad thread count), and
 * it counts malloc/calloc/realloc calls made while a warm run executes: the
 * artifact must make none. Prints "harness: ok" and exits 0 on success. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef KILN_DLOPEN
#include <dlfcn.h>
#include "kiln/artifact.h"
#else
#include KILN_HEADER
#ifdef KP2
#include KILN_HEADER2
#endif
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#endif

/* ---- malloc accounting: this program's definitions interpose on libc's ---- */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
static atomic_int counting;
static atomic_long n_allocs;
void *malloc(size_t n) {
  if (atomic_load(&counting)) atomic_fetch_add(&n_allocs, 1);
  return __libc_malloc(n);
}
void *calloc(size_t n, size_t m) {
  if (atomic_load(&counting)) atomic_fetch_add(&n_allocs, 1);
  return __libc_calloc(n, m);
}
void *realloc(void *p, size_t n) {
  if (atomic_load(&counting)) atomic_fetch_add(&n_allocs, 1);
  return __libc_realloc(p, n);
}

typedef int (*run_fn)(const void *const *, void *const *, void *, int64_t);

static int64_t dtype_size(int32_t dtype) {
  switch (dtype) {
  case 1: case 6: case 12: return 4;  /* float32, int32, uint32 */
  case 2: case 3: case 9: return 1;   /* uint8, int8, bool */
  case 4: case 5: case 10: case 16: return 2;
  case 7: case 11: case 13: return 8; /* int64, float64, uint64 */
  default: return -1;
  }
}

static int64_t tensor_bytes(const kiln_tensor_desc *t, int64_t batch) {
  int64_t n = dtype_size(t->dtype);
  for (int i = 0; i < t->rank; i++) n *= (t->batch_mask >> i & 1) ? t->dims[i] * batch : t->dims[i];
  return n;
}

static int fail(const char *what, const char *detail) {
  fprintf(stderr, "harness: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  return 1;
}

/* Runs artifact `a` on files paths[0..n_inputs) and writes paths[n_inputs..).
 * Returns 0 or 1 (after printing why). */
static int run_artifact(const kiln_artifact *a, run_fn run, int (*set_threads)(int),
                        char **paths, int64_t batch, int threads) {
  int rc = 1;
  const void **ins = calloc((size_t)a->n_inputs + 1, sizeof *ins);
  void **outs = calloc((size_t)a->n_outputs + 1, sizeof *outs);
  void *ws = NULL;
  if (a->abi_version != KILN_ABI_VERSION) { fail("abi_version mismatch", a->prefix); goto done; }
  if (run != a->run || set_threads != a->set_threads) { fail("descriptor entry points differ from the exported ones", a->prefix); goto done; }
  if (batch < 1 || batch > a->max_batch) { fail("batch outside [1, max_batch]", a->prefix); goto done; }
  if (a->workspace_align < 1 || (a->workspace_align & (a->workspace_align - 1))) { fail("workspace_align not a power of two", a->prefix); goto done; }
  for (int i = 0; i < a->n_inputs; i++) {
    int64_t bytes = tensor_bytes(&a->inputs[i], batch);
    FILE *f = fopen(paths[i], "rb");
    void *buf = malloc((size_t)bytes + 1);
    ins[i] = buf;
    if (!f || bytes < 0 || fread(buf, 1, (size_t)bytes, f) != (size_t)bytes || fgetc(f) != EOF) {
      if (f) fclose(f);
      fail("input file size does not match the descriptor", paths[i]);
      goto done;
    }
    fclose(f);
  }
  for (int i = 0; i < a->n_outputs; i++) outs[i] = malloc((size_t)tensor_bytes(&a->outputs[i], batch) + 1);
  size_t align = (size_t)a->workspace_align;
  size_t ws_size = ((size_t)a->workspace_size + align - 1) / align * align + align;
  ws = aligned_alloc(align < sizeof(void *) ? sizeof(void *) : align, ws_size);
  if (!ws) { fail("cannot allocate the workspace", NULL); goto done; }

  /* The error codes of the ABI. */
  if (run((const void *const *)ins, (void *const *)outs, ws, 0) != KILN_ERR_BATCH) { fail("batch 0 not rejected with KILN_ERR_BATCH", a->prefix); goto done; }
  if (run((const void *const *)ins, (void *const *)outs, ws, a->max_batch + 1) != KILN_ERR_BATCH) { fail("batch max_batch+1 not rejected with KILN_ERR_BATCH", a->prefix); goto done; }
  if (a->workspace_size > 0 && run((const void *const *)ins, (void *const *)outs, NULL, batch) != KILN_ERR_ARG) { fail("NULL workspace not rejected with KILN_ERR_ARG", a->prefix); goto done; }
  if (align > 1 && run((const void *const *)ins, (void *const *)outs, (char *)ws + 1, batch) != KILN_ERR_ARG) { fail("misaligned workspace not rejected with KILN_ERR_ARG", a->prefix); goto done; }
  if (set_threads(0) != KILN_ERR_THREADS) { fail("set_threads(0) not rejected with KILN_ERR_THREADS", a->prefix); goto done; }
  if (set_threads(threads) != KILN_OK) { fail("set_threads failed", a->prefix); goto done; }

  /* A warm-up run, then a counted one: no allocation while running. */
  if (run((const void *const *)ins, (void *const *)outs, ws, batch) != KILN_OK) { fail("run failed", a->prefix); goto done; }
  atomic_store(&n_allocs, 0);
  atomic_store(&counting, 1);
  int status = run((const void *const *)ins, (void *const *)outs, ws, batch);
  atomic_store(&counting, 0);
  if (status != KILN_OK) { fail("second run failed", a->prefix); goto done; }
  if (atomic_load(&n_allocs) != 0) {
    fprintf(stderr, "harness: %s: %ld heap allocations during run (must be 0)\n", a->prefix, (long)atomic_load(&n_allocs));
    goto done;
  }
  for (int i = 0; i < a->n_outputs; i++) {
    const char *path = paths[a->n_inputs + i];
    FILE *f = fopen(path, "wb");
    size_t bytes = (size_t)tensor_bytes(&a->outputs[i], batch);
    if (!f || fwrite(outs[i], 1, bytes, f) != bytes) { if (f) fclose(f); fail("cannot write", path); goto done; }
    fclose(f);
  }
  printf("harness: %s: %d inputs, %d outputs, workspace %lld bytes (align %lld), max_batch %lld, %d steps\n",
         a->prefix, a->n_inputs, a->n_outputs, (long long)a->workspace_size, (long long)a->workspace_align,
         (long long)a->max_batch, a->n_steps);
  rc = 0;
done:
  for (int i = 0; i < a->n_inputs; i++) free((void *)ins[i]);
  for (int i = 0; i < a->n_outputs; i++) free(outs[i]);
  free(ins);
  free(outs);
  free(ws);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 3) return fail("usage: harness BATCH THREADS ...", NULL);
  int64_t batch = atoll(argv[1]);
  int threads = atoi(argv[2]);
  char **rest = argv + 3;
  int left = argc - 3;
#ifdef KILN_DLOPEN
  /* Open everything first, so the artifacts coexist, then run each. */
  const kiln_artifact *arts[16];
  void *handles[16];
  char **args[16];
  int n = 0;
  while (left > 0 && n < 16) {
    void *h = dlopen(rest[0], RTLD_NOW | RTLD_LOCAL);
    if (!h) return fail("dlopen failed", dlerror());
    handles[n] = h;
    arts[n] = dlsym(h, "kiln_artifact_v1");
    if (!arts[n]) return fail("no kiln_artifact_v1 in", rest[0]);
    int used = 1 + arts[n]->n_inputs + arts[n]->n_outputs;
    if (used > left) return fail("too few file arguments for", rest[0]);
    args[n++] = rest + 1;
    rest += used;
    left -= used;
  }
  for (int i = 0; i < n; i++) {
    /* The descriptor's entry points must be the exported PREFIX_run / PREFIX_set_threads. */
    char sym[256];
    snprintf(sym, sizeof sym, "%s_run", arts[i]->prefix);
    run_fn run = (run_fn)dlsym(handles[i], sym);
    snprintf(sym, sizeof sym, "%s_set_threads", arts[i]->prefix);
    int (*set_threads)(int) = (int (*)(int))dlsym(handles[i], sym);
    if (!run || !set_threads) return fail("PREFIX_run / PREFIX_set_threads not exported by", arts[i]->prefix);
    for (int j = 0; j < i; j++)
      if (arts[j] == arts[i]) return fail("two artifacts share one descriptor", arts[i]->prefix);
    if (run_artifact(arts[i], run, set_threads, args[i], batch, threads)) return 1;
  }
#else
  const kiln_artifact *a = &CAT(KP, _artifact);
  if (left < a->n_inputs + a->n_outputs) return fail("too few file arguments", NULL);
  if (run_artifact(a, CAT(KP, _run), CAT(KP, _set_threads), rest, batch, threads)) return 1;
  rest += a->n_inputs + a->n_outputs;
  left -= a->n_inputs + a->n_outputs;
#ifdef KP2
  const kiln_artifact *b = &CAT(KP2, _artifact);
  if (left < b->n_inputs + b->n_outputs) return fail("too few file arguments", NULL);
  if (run_artifact(b, CAT(KP2, _run), CAT(KP2, _set_threads), rest, batch, threads)) return 1;
#endif
#endif
  printf("harness: ok\n");
  return 0;
}
