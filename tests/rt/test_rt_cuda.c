/* test_rt_cuda.c — GPU artifacts without a GPU.
 *
 * A small GPU plan (two kernels, a weight, a workspace buffer, a batched
 * input and output) is packaged with fake module images by
 * kn_cg_package_cuda and opened with the loader.
 *   nodriver (no libcuda.so.1 on the library path): the artifact loads, its
 *     descriptor and exports are the ABI 1.4 ones, it needs no CUDA library,
 *     the grid function gives each step's grid for a batch, and a run returns
 *     KILN_ERR_DEVICE with a one-line message naming libcuda.so.1.
 *   mock (tests/rt/mock_cuda.c on LD_LIBRARY_PATH as libcuda.so.1): the host
 *     logic of rt/runtime_cuda.c: the image chosen for sm_80, sm_90, a newer
 *     device (PTX) and an older one (error); weights uploaded once over two
 *     runs; inputs and outputs copied, or used in place when they are device
 *     pointers; one launch per step with the grid for the run's batch and
 *     the step's arguments; the stream; profiling events; cuInit failing;
 *     an index check step (ABI 1.5) stopping a run with KILN_ERR_INDEX.
 *     Kernels do not execute: the mock gives "addone" kernels a meaning of
 *     its own so that the data flow can be checked. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cuda.h"
#include "tests/codegen/cg_test.h"
#include "tests/rt/mock_cuda.h"

enum { W = 256, BLOCK = 128 };

static const char *const images_text[3] = {
    "MOCK cubin sm_80: gpu_addone_a:2 gpu_addone_b:3",
    "MOCK cubin sm_90: gpu_addone_a:2 gpu_addone_b:3",
    "MOCK ptx compute_90: gpu_addone_a:2 gpu_addone_b:3",
};
static const float weight[4] = {1, 2, 3, 4};

/* x (N x W) -> step 0 addone_a(x, ws) -> step 1 addone_b(ws, y, weight):
 * y = x + 2 under the mock. Packages to t->dir/PREFIX.so. check0: step 0's
 * kiln_step.check (0: none), so that the runtime reads its first argument's
 * first byte, x's, as the check's flag. */
static void package(cg_case *t, int check0) {
  int ix = cg_input_batched(t, "x", KN_DT_F32, W), iy = cg_output_batched(t, "y", KN_DT_F32, W);
  int iw = cg_const(t, "w", weight, sizeof weight);
  t->plan.workspace_bytes = (int64_t)sizeof(float) * W * t->plan.max_batch;
  kn_var *n = kn_var_new(&t->c, "N");
  const char *names[2] = {"gpu_addone_a", "gpu_addone_b"};
  kn_cuda_launch launches[2];
  for (int s = 0; s < 2; s++) {
    kn_buffer *p[3] = {cg_param(t, "in", KN_DT_F32), cg_param(t, "out", KN_DT_F32), cg_param(t, "w", KN_DT_F32)};
    kn_kernel *k = cg_kernel(t, names[s], 2 + s, p);
    k->gpu = true;
    k->batch = n;
    if (s == 0)
      cg_step(t, k, (int[]){KILN_ARG_INPUT, KILN_ARG_WORKSPACE}, (int[]){ix, 0});
    if (s == 0) t->plan.steps[t->plan.n_steps - 1].check = check0;
    else
      cg_step(t, k, (int[]){KILN_ARG_WORKSPACE, KILN_ARG_OUTPUT, KILN_ARG_CONST}, (int[]){0, iy, iw});
    launches[s] = (kn_cuda_launch){.name = names[s], .block = {BLOCK, 1, 1}, .shared_bytes = s ? 64 * 1024 : 0};
    launches[s].grid[0] = kn_e_mul(&t->c, cg_var(t, n), cg_i(t, W / BLOCK));
    launches[s].grid[1] = cg_i(t, 1);
    launches[s].grid[2] = cg_i(t, s + 1);
  }
  kn_cuda_image images[3];
  for (int i = 0; i < 3; i++)
    images[i] = (kn_cuda_image){.sm = i == 0 ? 80 : 90, .ptx = i == 2, .data = (const uint8_t *)images_text[i],
                                .size = strlen(images_text[i])};
  kn_cuda_module mod = {.n_images = 3, .images = images};
  kn_target cuda;
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_target_parse("cuda -arch=sm_80,sm_90", &cuda, &d), 0);
  snprintf(t->path, sizeof t->path, "%s/%s.so", t->dir, t->plan.prefix);
  int r = kn_cg_package_cuda(&t->plan, &cuda, &mod, launches, t->path, NULL, &d);
  kn_diag_print(&d, "test");
  kn_diag_free(&d);
  assert_int_equal(r, 0);
}

/* Opens a fresh copy of the packaged artifact (its own runtime state). */
static const kiln_artifact *open_copy(cg_case *t, kn_loader *l, const char *tag) {
  char path[700];
  snprintf(path, sizeof path, "%s/copy_%s.so", t->dir, tag);
  assert_int_equal(cg_system("cp '%s' '%s'", t->path, path), 0);
  kn_diag d;
  kn_diag_init(&d);
  int r = kn_loader_open(path, l, &d);
  kn_diag_print(&d, "test");
  kn_diag_free(&d);
  assert_int_equal(r, 0);
  return l->art;
}

static void expect_contains(const char *text, const char *needle) {
  if (!strstr(text, needle)) {
    fprintf(stderr, "'%s' lacks '%s'\n", text, needle);
    fail();
  }
}

static void test_nodriver(void **state) {
  (void)state;
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (cuda) { /* a machine with a driver: this test is about machines without */
    dlclose(cuda);
    skip();
  }
  cg_case t;
  cg_init(&t, "g");
  package(&t, 0);
  /* no CUDA library among the artifact's dependencies */
  assert_int_equal(cg_system("readelf -d '%s' | grep NEEDED | grep -Eqv 'libc\\.so|libm\\.so|libpthread|libdl'",
                             t.path),
                   1);
  assert_int_equal(cg_system("readelf -d '%s' | grep -Eq 'cuda|nvrtc'", t.path), 1);
  assert_int_equal(cg_system("nm -D --defined-only '%s' | grep -q ' g_last_error$'", t.path), 0);
  assert_int_equal(cg_system("nm -D --defined-only '%s' | grep -q ' g_set_stream$'", t.path), 0);
  assert_int_equal(cg_system("nm -D --defined-only '%s' | grep -q kn_rt_cuda", t.path), 1);
  char header[600];
  snprintf(header, sizeof header, "%s/g.h", t.dir);
  assert_int_equal(cg_system("grep -q 'g_set_stream(void \\*stream)' '%s'", header), 0);

  kn_loader l;
  const kiln_artifact *a = open_copy(&t, &l, "nodriver");
  assert_int_equal(a->abi_minor, 4); /* KILN_ABI_MINOR (5) only with an index check */
  assert_string_equal(a->target, "cuda -arch=sm_80,sm_90");
  assert_int_equal(a->workspace_size, 0);
  assert_non_null(a->gpu);
  assert_int_equal(a->gpu->n_images, 3);
  assert_int_equal(a->gpu->images[1].sm, 90);
  assert_int_equal(a->gpu->images[2].ptx, 1);
  assert_int_equal(a->gpu->images[2].size, (int64_t)strlen(images_text[2]));
  assert_string_equal(a->gpu->images[2].data, images_text[2]); /* PTX is NUL terminated */
  assert_memory_equal(a->gpu->images[0].data, images_text[0], strlen(images_text[0]));
  assert_int_equal(a->gpu->workspace_size, (int64_t)sizeof(float) * W * 4);
  assert_int_equal(a->gpu->elem_bytes[0], 4);
  assert_int_equal(a->gpu->const_bytes[0], (int64_t)sizeof weight);
  assert_int_equal(a->gpu->launches[1].shared_bytes, 64 * 1024);
  assert_int_equal(a->gpu->launches[0].block[0], BLOCK);
  assert_null(a->steps[0].fn);
  assert_string_equal(a->steps[1].name, "gpu_addone_b");
  int64_t grid[6];
  void *args[1] = {grid};
  a->gpu->grid(args, 3, 0, 1);
  int64_t want[6] = {3 * W / BLOCK, 1, 1, 3 * W / BLOCK, 1, 2};
  assert_memory_equal(grid, want, sizeof grid);

  float x[W], y[W];
  const void *in[1] = {x};
  void *out[1] = {y};
  assert_int_equal(a->run(in, out, NULL, 1), KILN_ERR_DEVICE);
  expect_contains(a->last_error(), "libcuda.so.1");
  assert_null(strchr(a->last_error(), '\n'));
  assert_int_equal(a->run(in, out, NULL, 9), KILN_ERR_BATCH); /* arguments first */
  expect_contains(a->last_error(), "batch 9");
  assert_int_equal(a->set_threads(2), KILN_OK);
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_loader_run(&l, in, out, NULL, 1, &d), -1);
  expect_contains(d.lines[0], "no NVIDIA driver");
  kn_diag_free(&d);
  kn_loader_close(&l);
  cg_free(&t);
}

static mock_cuda_stats *mock_driver(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  assert_non_null(h); /* the mock, through LD_LIBRARY_PATH */
  mock_cuda_stats_fn get = (mock_cuda_stats_fn)dlsym(h, "mock_cuda_stats_get");
  assert_non_null(get);
  return get(); /* h stays open: the artifact's runtime holds the mock too */
}

static int run_on(const kiln_artifact *a, const void *x, void *y, int64_t batch) {
  const void *in[1] = {x};
  void *out[1] = {y};
  return a->run(in, out, NULL, batch);
}

static void test_mock(void **state) {
  (void)state;
  mock_cuda_stats *m = mock_driver();
  cg_case t;
  cg_init(&t, "g");
  package(&t, 0);
  float x[4 * W], y[4 * W];
  for (int i = 0; i < 4 * W; i++) x[i] = (float)i;

  /* sm_80: its cubin; two runs, weights uploaded once */
  setenv("MOCK_CUDA_SM", "80", 1);
  kn_loader l;
  const kiln_artifact *a = open_copy(&t, &l, "sm80");
  assert_int_equal(run_on(a, x, y, 2), KILN_OK);
  assert_string_equal(a->last_error(), "");
  assert_string_equal(m->loaded, "cubin sm_80");
  assert_int_equal(m->max_dynamic_shared, 64 * 1024);
  for (int i = 0; i < 2 * W; i++) assert_true(y[i] == x[i] + 2);
  assert_int_equal(m->n_launches, 2);
  assert_string_equal(m->launches[0].name, "gpu_addone_a");
  assert_int_equal(m->launches[0].grid[0], 2 * W / BLOCK);
  assert_int_equal(m->launches[1].grid[2], 2);
  assert_int_equal(m->launches[1].block[0], BLOCK);
  assert_int_equal(m->launches[1].shared, 64 * 1024);
  assert_int_equal(m->launches[1].batch, 2);
  assert_null(m->launches[0].stream);
  /* step 0 writes the workspace step 1 reads; step 1's third argument is the weight */
  assert_true(m->launches[0].args[1] == m->launches[1].args[0]);
  assert_memory_equal((const void *)(uintptr_t)m->launches[1].args[2], weight, sizeof weight);
  int allocs = m->allocs;
  int64_t uploaded = m->htod_bytes;
  assert_int_equal(allocs, 1);
  assert_int_equal(uploaded, (int64_t)sizeof weight + 2 * W * (int64_t)sizeof(float));
  for (int i = 0; i < W; i++) x[i] = -1.0f * (float)i;
  assert_int_equal(run_on(a, x, y, 1), KILN_OK);
  for (int i = 0; i < W; i++) assert_true(y[i] == x[i] + 2);
  assert_int_equal(m->allocs, allocs); /* nothing allocated, weights not sent again */
  assert_int_equal(m->htod_bytes, uploaded + W * (int64_t)sizeof(float));
  assert_int_equal(m->launches[3].grid[0], W / BLOCK);
  assert_int_equal(m->launches[3].batch, 1);
  assert_int_equal(m->ctx_depth, 0); /* the context is popped after each run */
  assert_int_equal(m->module_loads, 1);

  /* device pointers are used in place; the stream is the caller's */
  int (*mem_alloc)(unsigned long long *, size_t) = (int (*)(unsigned long long *, size_t))dlsym(
      dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), "cuMemAlloc_v2");
  assert_non_null(mem_alloc);
  unsigned long long dx, dy;
  assert_int_equal(mem_alloc(&dx, sizeof x), 0);
  assert_int_equal(mem_alloc(&dy, sizeof y), 0);
  float *hx = (float *)(uintptr_t)dx, *hy = (float *)(uintptr_t)dy;
  for (int i = 0; i < 3 * W; i++) hx[i] = 0.5f * (float)i;
  int htod = m->htod, dtoh = m->dtoh, launches = m->n_launches;
  assert_int_equal(a->gpu->set_stream((void *)0x1234), KILN_OK);
  assert_int_equal(run_on(a, hx, hy, 3), KILN_OK);
  assert_int_equal(m->htod, htod);
  assert_int_equal(m->dtoh, dtoh);
  assert_true(m->launches[launches].args[0] == dx);
  assert_true(m->launches[launches + 1].args[1] == dy);
  assert_ptr_equal(m->launches[launches].stream, (void *)0x1234);
  for (int i = 0; i < 3 * W; i++) assert_true(hy[i] == hx[i] + 2);
  assert_int_equal(a->gpu->set_stream(NULL), KILN_OK);

  /* profiled: one event per step, in order, inside the run */
  kiln_prof_event ev[2];
  int64_t n_ev = 0;
  const void *in[1] = {x};
  void *out[1] = {y};
  assert_int_equal(a->run_profiled(in, out, NULL, 1, ev, 1, &n_ev), KILN_ERR_CAPACITY);
  assert_int_equal(n_ev, 2);
  assert_int_equal(a->run_profiled(in, out, NULL, 1, ev, 2, &n_ev), KILN_OK);
  assert_int_equal(n_ev, 2);
  for (int s = 0; s < 2; s++) {
    assert_int_equal(ev[s].step, s);
    assert_int_equal(ev[s].task, -1);
    assert_true(ev[s].end_ns - ev[s].begin_ns == 1000000); /* the mock's clock: 1 ms per record */
  }
  assert_true(ev[1].begin_ns == ev[0].end_ns);
  kn_loader_close(&l);

  /* sm_90: its own cubin; sm_100: the PTX; sm_75: no code for it */
  setenv("MOCK_CUDA_SM", "90", 1);
  a = open_copy(&t, &l, "sm90");
  assert_int_equal(run_on(a, x, y, 1), KILN_OK);
  assert_string_equal(m->loaded, "cubin sm_90");
  kn_loader_close(&l);
  setenv("MOCK_CUDA_SM", "100", 1);
  a = open_copy(&t, &l, "sm100");
  assert_int_equal(run_on(a, x, y, 1), KILN_OK);
  assert_string_equal(m->loaded, "ptx compute_90");
  kn_loader_close(&l);
  setenv("MOCK_CUDA_SM", "75", 1);
  a = open_copy(&t, &l, "sm75");
  int loads = m->module_loads;
  assert_int_equal(run_on(a, x, y, 1), KILN_ERR_DEVICE);
  expect_contains(a->last_error(), "no code for this GPU (sm_75)");
  expect_contains(a->last_error(), "sm_80, sm_90, compute_90");
  assert_int_equal(m->module_loads, loads);
  assert_int_equal(run_on(a, x, y, 1), KILN_ERR_DEVICE); /* every run says so */
  kn_loader_close(&l);

  /* an image the driver rejects: its JIT log's first line, one line in all */
  setenv("MOCK_CUDA_SM", "100", 1);
  setenv("MOCK_CUDA_LOAD_FAIL", "1", 1);
  a = open_copy(&t, &l, "badptx");
  assert_int_equal(run_on(a, x, y, 1), KILN_ERR_DEVICE);
  expect_contains(a->last_error(), "loading the compute_90 image on sm_100 failed: CUDA_ERROR_INVALID_PTX: mock: not");
  assert_null(strchr(a->last_error(), '\n'));
  unsetenv("MOCK_CUDA_LOAD_FAIL");
  assert_int_equal(run_on(a, x, y, 1), KILN_OK); /* a failed setup is tried again */
  assert_int_equal(m->ctx_depth, 0);
  kn_loader_close(&l);

  /* cuInit failing */
  setenv("MOCK_CUDA_SM", "80", 1);
  setenv("MOCK_CUDA_INIT", "100", 1);
  a = open_copy(&t, &l, "noinit");
  assert_int_equal(run_on(a, x, y, 1), KILN_ERR_DEVICE);
  expect_contains(a->last_error(), "CUDA_ERROR_NO_DEVICE");
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_loader_run(&l, (const void *const[]){x}, (void *const[]){y}, NULL, 1, &d), -1);
  expect_contains(d.lines[0], "g_run failed: cuInit");
  kn_diag_free(&d);
  kn_loader_close(&l);
  unsetenv("MOCK_CUDA_INIT");
  cg_free(&t);
}

/* An index check step (--check-indices, ABI 1.5): a false flag stops the run
 * with KILN_ERR_INDEX and a one-line reason, a true one runs on. */
static void test_mock_index_check(void **state) {
  (void)state;
  mock_driver();
  cg_case t;
  cg_init(&t, "g");
  package(&t, KILN_CHECK_INDEX);
  float x[W] = {0}, y[W];
  setenv("MOCK_CUDA_SM", "80", 1);
  kn_loader l;
  const kiln_artifact *a = open_copy(&t, &l, "index");
  assert_int_equal(a->abi_minor, 5);
  assert_int_equal(a->steps[0].check, KILN_CHECK_INDEX);
  assert_int_equal(run_on(a, x, y, 1), KILN_ERR_INDEX); /* x's first byte 0: the flag is false */
  expect_contains(a->last_error(), "step 0 (gpu_addone_a): a gather or scatter index is out of range");
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_loader_run(&l, (const void *const[]){x}, (void *const[]){y}, NULL, 1, &d), -1);
  expect_contains(d.lines[0], "(status 7)");
  kn_diag_free(&d);
  ((unsigned char *)x)[0] = 1; /* true */
  assert_int_equal(run_on(a, x, y, 1), KILN_OK);
  assert_string_equal(a->last_error(), "");
  kn_loader_close(&l);
  cg_free(&t);
}

int main(int argc, char **argv) {
  const struct CMUnitTest nodriver[] = {cmocka_unit_test(test_nodriver)};
  const struct CMUnitTest mocked[] = {cmocka_unit_test(test_mock), cmocka_unit_test(test_mock_index_check)};
  if (argc > 1 && !strcmp(argv[1], "mock")) return cmocka_run_group_tests(mocked, NULL, NULL);
  return cmocka_run_group_tests(nodriver, NULL, NULL);
}
