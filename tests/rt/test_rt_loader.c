/* test_rt_loader.c — the loader's diagnostics on bad and truncated files, the runtime's
 * argument checks and status codes, the thread pool under concurrent runs,
 * and dlclose / reopen of an artifact whose pool is running. */
#include <elf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/codegen/cg_test.h"

enum { W = 4096 };

/* y[i] = x[i] * 2 + 1 over N*W elements, PARALLEL */
static const kiln_artifact *build(cg_case *t) {
  int ix = cg_input_batched(t, "x", KN_DT_F32, W), iy = cg_output_batched(t, "y", KN_DT_F32, W);
  t->plan.workspace_bytes = 256;
  kn_buffer *p[2] = {cg_param(t, "x", KN_DT_F32), cg_param(t, "y", KN_DT_F32)};
  kn_kernel *k = cg_kernel(t, "axpb", 2, p);
  k->batch = kn_var_new(&t->c, "N");
  k->parallel = true;
  kn_var *i = kn_var_new(&t->c, "i");
  kn_expr *idx = cg_ramp(t, kn_e_mul(&t->c, cg_var(t, i), cg_i(t, 16)), 1, 16);
  kn_expr *v = kn_e_add(&t->c, kn_e_mul(&t->c, kn_e_load(&t->c, p[0], idx), kn_e_broadcast(&t->c, kn_e_float(&t->c, KN_DT_F32, 2), 16)),
                        kn_e_broadcast(&t->c, kn_e_float(&t->c, KN_DT_F32, 1), 16));
  k->body = kn_s_for(&t->c, i, cg_i(t, 0), kn_e_mul(&t->c, cg_var(t, k->batch), cg_i(t, W / 16)), KN_FOR_PARALLEL,
                     kn_s_store(&t->c, p[1], idx, v));
  cg_step(t, k, (int[]){KILN_ARG_INPUT, KILN_ARG_OUTPUT}, (int[]){ix, iy});
  return cg_build_and_load(t);
}

static void expect_open_error(const char *path, const char *needle) {
  kn_loader l;
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_loader_open(path, &l, &d), -1);
  assert_int_equal(d.count, 1);
  if (!strstr(d.lines[0], needle)) {
    fprintf(stderr, "diagnostic '%s' lacks '%s'\n", d.lines[0], needle);
    fail();
  }
  assert_null(l.dl);
  kn_diag_free(&d);
}

static void test_bad_files(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "m");
  char path[600];
  snprintf(path, sizeof path, "%s/missing.so", t.dir);
  expect_open_error(path, "No such file");
  snprintf(path, sizeof path, "%s/text.so", t.dir);
  FILE *fp = fopen(path, "w");
  fputs("hello, not an ELF file\n", fp);
  fclose(fp);
  expect_open_error(path, "not a Kiln artifact");
  /* an aarch64 shared object header */
  unsigned char elf[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  elf[16] = 3;   /* ET_DYN */
  elf[18] = 183; /* EM_AARCH64 */
  snprintf(path, sizeof path, "%s/arm.so", t.dir);
  fp = fopen(path, "wb");
  fwrite(elf, 1, sizeof elf, fp);
  fclose(fp);
#if defined(__x86_64__)
  expect_open_error(path, "aarch64");
#endif
  /* a plain shared library without the descriptor */
  assert_int_equal(cg_system("cd '%s' && echo 'int f(void){return 1;}' > f.c && cc -shared -fPIC f.c -o libf.so", t.dir), 0);
  snprintf(path, sizeof path, "%s/libf.so", t.dir);
  expect_open_error(path, "kiln_artifact_v1");
  /* a .o artifact */
  int ix = cg_input(&t, "x", KN_DT_F32, 4), iy = cg_output(&t, "y", KN_DT_F32, 4);
  kn_buffer *p[2] = {cg_param(&t, "x", KN_DT_F32), cg_param(&t, "y", KN_DT_F32)};
  kn_kernel *k = cg_kernel(&t, "copy", 2, p);
  kn_var *i = kn_var_new(&t.c, "i");
  k->body = kn_s_for(&t.c, i, cg_i(&t, 0), cg_i(&t, 4), KN_FOR_SERIAL,
                     kn_s_store(&t.c, p[1], cg_var(&t, i), kn_e_load(&t.c, p[0], cg_var(&t, i))));
  cg_step(&t, k, (int[]){KILN_ARG_INPUT, KILN_ARG_OUTPUT}, (int[]){ix, iy});
  assert_int_equal(cg_package(&t, ".o"), 0);
  expect_open_error(t.path, "relocatable");
  cg_free(&t);
}

/* Writes bytes[0, n) to DIR/name into path. */
static void write_prefix(const char *dir, const char *name, const unsigned char *bytes, size_t n, char *path,
                         size_t cap) {
  snprintf(path, cap, "%s/%s", dir, name);
  FILE *fp = fopen(path, "wb");
  assert_non_null(fp);
  assert_int_equal(fwrite(bytes, 1, n, fp), n);
  assert_int_equal(fclose(fp), 0);
}

/* Every cut of an artifact (inside the ELF header, the program headers, a
 * segment, the section headers) is refused with one line, never loaded:
 * dlopen maps segments past the end of a cut file and the first touch of
 * such a page is SIGBUS. An artifact without section headers (sstrip)
 * still loads whole, and its cuts are refused by the segments alone. */
static void test_truncated(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "cut");
  build(&t);
  FILE *fp = fopen(t.path, "rb");
  assert_non_null(fp);
  static unsigned char bytes[1 << 20];
  size_t size = fread(bytes, 1, sizeof bytes, fp);
  fclose(fp);
  assert_true(size > 4096 && size < sizeof bytes);
  char path[600];
  const char *message = "is truncated or not an ELF shared object";
  size_t odd[] = {0, 1, 3, 4, 19, 20, 40, 63, 64, 65, 100, 1000, 4095, 4097, size / 2, size - 1};
  for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
    write_prefix(t.dir, "piece.so", bytes, odd[i], path, sizeof path);
    expect_open_error(path, message);
  }
  for (size_t n = 512; n < size; n += 512) {
    write_prefix(t.dir, "piece.so", bytes, n, path, sizeof path);
    expect_open_error(path, message);
  }
  /* no section headers: loads whole; cut inside its last segment, refused */
  Elf64_Ehdr eh;
  memcpy(&eh, bytes, sizeof eh);
  size_t last_end = 0;
  for (int i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    memcpy(&ph, bytes + eh.e_phoff + (size_t)i * sizeof ph, sizeof ph);
    if (ph.p_type == PT_LOAD && ph.p_offset + ph.p_filesz > last_end) last_end = ph.p_offset + ph.p_filesz;
  }
  eh.e_shoff = 0;
  eh.e_shnum = 0;
  eh.e_shstrndx = 0;
  memcpy(bytes, &eh, sizeof eh);
  write_prefix(t.dir, "sstripped.so", bytes, size, path, sizeof path);
  kn_loader l;
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_loader_open(path, &l, &d), 0);
  kn_loader_close(&l);
  kn_diag_free(&d);
  write_prefix(t.dir, "sstripped_cut.so", bytes, last_end - 1, path, sizeof path);
  expect_open_error(path, "segment");
  cg_free(&t);
}

static void test_status_codes(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "st");
  const kiln_artifact *a = build(&t);
  static float x[4 * W], y[4 * W];
  kn_diag d;
  kn_diag_init(&d);
  unsigned char *ws = kn_loader_workspace_new(a, &d);
  assert_non_null(ws);
  const void *in[1] = {x};
  void *out[1] = {y};
  assert_int_equal(a->run(in, out, ws, 0), KILN_ERR_BATCH);
  assert_int_equal(a->run(in, out, ws, 5), KILN_ERR_BATCH);
  assert_int_equal(a->run(NULL, out, ws, 1), KILN_ERR_ARG);
  assert_int_equal(a->run(in, NULL, ws, 1), KILN_ERR_ARG);
  assert_int_equal(a->run((const void *[]){NULL}, out, ws, 1), KILN_ERR_ARG);
  assert_int_equal(a->run(in, out, NULL, 1), KILN_ERR_ARG);
  assert_int_equal(a->run(in, out, ws + 4, 1), KILN_ERR_ARG); /* misaligned */
  assert_int_equal(a->set_threads(0), KILN_ERR_THREADS);
  assert_int_equal(a->set_threads(257), KILN_ERR_THREADS);
  assert_int_equal(kn_loader_run(&t.loader, in, out, ws, 9, &d), -1);
  assert_true(strstr(d.lines[0], "batch"));
  kn_diag_free(&d);
  assert_int_equal(a->run(in, out, ws, 4), KILN_OK);
  /* tensor helpers */
  assert_int_equal(kn_loader_numel(&a->inputs[0], 3), 3 * W);
  assert_int_equal(kn_loader_bytes(&a->outputs[0], 2), 2 * W * 4);
  char shape[64];
  kn_loader_shape_str(&a->inputs[0], 0, shape, sizeof shape);
  assert_string_equal(shape, "N, 4096");
  kn_loader_shape_str(&a->inputs[0], 3, shape, sizeof shape);
  assert_string_equal(shape, "3, 4096");
  kn_loader_workspace_free(ws);
  cg_free(&t);
}

typedef struct worker {
  const kiln_artifact *a;
  int id, failures;
} worker;

static void *hammer(void *arg) {
  worker *w = arg;
  float *x = malloc(sizeof(float) * 4 * W), *y = malloc(sizeof(float) * 4 * W);
  void *ws = aligned_alloc(64, 256);
  for (int it = 0; it < 40; it++) {
    int64_t batch = 1 + (w->id + it) % 4;
    for (int e = 0; e < batch * W; e++) x[e] = (float)(e + w->id * 7 + it);
    if (w->a->run((const void *[]){x}, (void *[]){y}, ws, batch) != KILN_OK) w->failures++;
    for (int e = 0; e < batch * W; e++)
      if (y[e] != x[e] * 2.0f + 1.0f) {
        w->failures++;
        break;
      }
  }
  free(x);
  free(y);
  free(ws);
  return NULL;
}

static void test_concurrent_runs(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "conc");
  const kiln_artifact *a = build(&t);
  for (int threads = 1; threads <= 3; threads += 2) {
    assert_int_equal(a->set_threads(threads), KILN_OK);
    pthread_t th[4];
    worker w[4];
    for (int i = 0; i < 4; i++) {
      w[i] = (worker){a, i, 0};
      assert_int_equal(pthread_create(&th[i], NULL, hammer, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
      pthread_join(th[i], NULL);
      assert_int_equal(w[i].failures, 0);
    }
  }
  cg_free(&t);
}

/* dlclose while the pool's workers exist, then load and run again */
static void test_reopen(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "reo");
  const kiln_artifact *a = build(&t);
  static float x[W], y[W];
  for (int e = 0; e < W; e++) x[e] = (float)e;
  for (int round = 0; round < 3; round++) {
    assert_int_equal(a->set_threads(3), KILN_OK);
    cg_run(&t, (const void *[]){x}, (void *[]){y}, 1);
    assert_float_equal(y[W - 1], (float)(W - 1) * 2 + 1, 0);
    kn_loader_close(&t.loader);
    kn_diag d;
    kn_diag_init(&d);
    assert_int_equal(kn_loader_open(t.path, &t.loader, &d), 0);
    kn_diag_free(&d);
    a = t.loader.art;
  }
  cg_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_files),
      cmocka_unit_test(test_truncated),
      cmocka_unit_test(test_status_codes),
      cmocka_unit_test(test_concurrent_runs),
      cmocka_unit_test(test_reopen),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
