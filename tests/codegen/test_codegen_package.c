/* test_codegen_package.c — packaging and targets:
 *  - target strings: host, CPUs, feature toggles, bad triples / CPUs /
 *    features / options with diagnostics naming the culprit; no string is
 *    KILN_TARGET when set, else the host, and a bad KILN_TARGET is named;
 *  - a vectorized FMA loop becomes zmm FMAs on an AVX-512 host (and NEON fmla
 *    for aarch64), with single unaligned vector loads;
 *  - constants and workspace arguments across steps; the descriptor read
 *    back through the C ABI struct;
 *  - a .so needs only libc / libm / libpthread; exports only PREFIX_* and
 *    kiln_artifact_v1;
 *  - two .o artifacts (each with its own runtime) link into one C program
 *    that includes both generated headers;
 *  - a failed package (missing directory, failing linker, bad plan) leaves
 *    no file behind;
 *  - a header of another prefix is never replaced; --header; per-file guards. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/codegen/cg_test.h"

static int parse(const char *spec, kn_target *t, kn_diag *d) {
  kn_diag_init(d);
  return kn_target_parse(spec, t, d);
}

static void expect_target_error(const char *spec, const char *needle) {
  kn_target t;
  kn_diag d;
  assert_int_equal(parse(spec, &t, &d), -1);
  assert_int_equal(d.count, 1);
  if (!strstr(d.lines[0], needle)) {
    fprintf(stderr, "diagnostic '%s' lacks '%s'\n", d.lines[0], needle);
    fail();
  }
  kn_diag_free(&d);
}

static void test_target_parse(void **state) {
  (void)state;
  kn_target t;
  kn_diag d;
  assert_int_equal(parse("host", &t, &d), 0);
  assert_true(t.cpu[0] && t.triple[0]);
  assert_true(t.vector_bits >= 128);

  assert_int_equal(parse("x86_64-linux-gnu -mcpu=skylake-avx512", &t, &d), 0);
  assert_int_equal(t.arch, KN_ARCH_X86_64);
  assert_string_equal(t.cpu, "skylake-avx512");
  assert_int_equal(t.vector_bits, 512);
  assert_int_equal(t.vector_regs, 32);
  assert_true(t.has_fma);
  assert_true(t.has_avx512dq);
  assert_true(t.sw_prefetch);
  assert_int_equal(kn_target_lanes(&t, KN_DT_F32), 16);
  assert_int_equal(kn_target_lanes(&t, KN_DT_F64), 8);
  assert_int_equal(kn_target_lanes(&t, KN_DT_I8), 64);
  assert_int_equal(kn_target_lanes(&t, KN_DT_F16), 16);

  assert_int_equal(parse("x86_64-linux-gnu -mcpu=skylake-avx512 -mattr=+avx2,-avx512f", &t, &d), 0);
  assert_int_equal(t.vector_bits, 256);
  assert_int_equal(t.vector_regs, 16);
  assert_string_equal(t.features, "+avx2,-avx512f");
  assert_false(t.has_avx512dq);
  /* AVX512DQ (sigmoid's vreduceps): not on Knights Landing, not when turned off */
  assert_int_equal(parse("x86_64-linux-gnu -mcpu=knl", &t, &d), 0);
  assert_int_equal(t.vector_bits, 512);
  assert_false(t.has_avx512dq);
  assert_int_equal(parse("x86_64-linux-gnu -mcpu=icelake-server -mattr=-avx512dq", &t, &d), 0);
  assert_false(t.has_avx512dq);
  assert_int_equal(parse("x86_64-linux-gnu -mcpu=znver3 -mattr=+avx512f,+avx512dq", &t, &d), 0);
  assert_true(t.has_avx512dq);
  assert_int_equal(parse("x86_64-linux-gnu -mcpu=haswell", &t, &d), 0);
  assert_int_equal(t.vector_bits, 256);
  assert_true(t.has_fma);
  /* AMD's prefetch hints go unused (kn_target.sw_prefetch) */
  assert_int_equal(parse("x86_64-linux-gnu -mcpu=znver3 -mattr=+avx512f", &t, &d), 0);
  assert_int_equal(t.vector_bits, 512);
  assert_false(t.sw_prefetch);
  assert_int_equal(parse("x86_64-linux-gnu", &t, &d), 0);
  assert_string_equal(t.cpu, "x86-64");
  assert_int_equal(t.vector_bits, 128);
  assert_false(t.has_fma);
  assert_int_equal(parse("x86_64-unknown-linux-gnu -mattr=+avx512f", &t, &d), 0);
  assert_int_equal(t.vector_bits, 512);
  assert_false(t.has_avx512dq);
  assert_int_equal(parse("aarch64-linux-gnu -mcpu=cortex-a76", &t, &d), 0);
  assert_int_equal(t.arch, KN_ARCH_AARCH64);
  assert_int_equal(t.vector_bits, 128);
  assert_int_equal(t.vector_regs, 32);
  assert_true(t.has_fma);
  assert_false(t.sw_prefetch);
  assert_int_equal(kn_target_lanes(&t, KN_DT_F32), 4);
  assert_int_equal(parse("aarch64-linux-gnu", &t, &d), 0);
  assert_string_equal(t.cpu, "generic");

  expect_target_error("riscv64-linux-gnu", "x86_64-linux-gnu");
  expect_target_error("x86_64-linux-gnu -mcpu=pentium9", "'pentium9'");
  expect_target_error("x86_64-linux-gnu -mcpu=cortex-a76", "skylake-avx512");
  expect_target_error("aarch64-linux-gnu -mcpu=skylake", "cortex-a76");
  expect_target_error("x86_64-linux-gnu -mattr=avx2", "+name or -name");
  expect_target_error("x86_64-linux-gnu -mattr=+avx9000", "'avx9000'");
  expect_target_error("x86_64-linux-gnu -march=native", "'-march=native'");
  expect_target_error("x86_64-apple-darwin", "Linux");

  /* portable C: 128-bit vectors, 16 registers, no FMA assumed, no options */
  assert_int_equal(parse("c", &t, &d), 0);
  assert_int_equal(t.arch, KN_ARCH_C);
  assert_string_equal(t.triple, "c");
  assert_int_equal(t.vector_bits, 128);
  assert_int_equal(t.vector_regs, 16);
  assert_false(t.has_fma);
  assert_false(t.sw_prefetch);
  assert_int_equal(kn_target_lanes(&t, KN_DT_F32), 4);
  assert_int_equal(kn_cg_check_target(&t, &d), 0);
  expect_target_error("c -mcpu=cortex-a76", "takes no options");
}

/* Sets KILN_TARGET to `value` (NULL: unset). */
static void set_env_target(const char *value) {
  assert_int_equal(value ? setenv("KILN_TARGET", value, 1) : unsetenv("KILN_TARGET"), 0);
}

/* No target string (NULL or blank) is KILN_TARGET when that is set and not
 * blank, else the host; "host" is the host either way. The caller's
 * KILN_TARGET (a suite run with a forced target) is put back at the end. */
static void test_target_env(void **state) {
  (void)state;
  const char *outer = getenv("KILN_TARGET");
  char *saved = outer ? strdup(outer) : NULL;
  kn_target t, host;
  kn_diag d;
  set_env_target(NULL);
  assert_int_equal(parse("host", &host, &d), 0);
  assert_int_equal(parse(NULL, &t, &d), 0);
  assert_string_equal(t.cpu, host.cpu);
  assert_string_equal(t.features, host.features);
  set_env_target("  ");
  assert_int_equal(parse("", &t, &d), 0);
  assert_string_equal(t.features, host.features);

  set_env_target("x86_64-pc-linux-gnu -mcpu=znver3");
  for (int i = 0; i < 3; i++) {
    assert_int_equal(parse((const char *[]){NULL, "", "  "}[i], &t, &d), 0);
    assert_string_equal(t.triple, "x86_64-pc-linux-gnu");
    assert_string_equal(t.cpu, "znver3");
    assert_int_equal(t.vector_bits, 256);
    assert_int_equal(t.vector_regs, 16);
  }
  assert_int_equal(parse("host", &t, &d), 0);
  assert_string_equal(t.cpu, host.cpu);
  assert_string_equal(t.features, host.features);
  assert_int_equal(parse("aarch64-linux-gnu", &t, &d), 0); /* a given string wins */
  assert_int_equal(t.arch, KN_ARCH_AARCH64);

  set_env_target("x86_64-linux-gnu -mcpu=bogus");
  expect_target_error(NULL, "KILN_TARGET='x86_64-linux-gnu -mcpu=bogus': unknown x86_64 CPU 'bogus'");
  set_env_target("c -O2");
  expect_target_error("", "KILN_TARGET='c -O2': target 'c' takes no options");
  assert_int_equal(parse("host", &t, &d), 0);
  set_env_target(saved);
  free(saved);
}

/* out[i] = a[i] * b[i] + c[i], 16 lanes; asm must use zmm FMAs on AVX-512 */
static kn_kernel *fma_kernel(cg_case *t, int lanes) {
  kn_buffer *p[4] = {cg_param(t, "a", KN_DT_F32), cg_param(t, "b", KN_DT_F32), cg_param(t, "c", KN_DT_F32),
                     cg_param(t, "out", KN_DT_F32)};
  kn_kernel *k = cg_kernel(t, "fma_loop", 4, p);
  kn_var *i = kn_var_new(&t->c, "i");
  kn_expr *idx = cg_ramp(t, kn_e_mul(&t->c, cg_var(t, i), cg_i(t, lanes)), 1, lanes);
  kn_expr *v = kn_e_add(&t->c, kn_e_mul(&t->c, kn_e_load(&t->c, p[0], idx), kn_e_load(&t->c, p[1], idx)),
                        kn_e_load(&t->c, p[2], idx));
  k->batch = kn_var_new(&t->c, "N");
  k->body = kn_s_for(&t->c, i, cg_i(t, 0), kn_e_mul(&t->c, cg_var(t, k->batch), cg_i(t, 64)), KN_FOR_SERIAL,
                     kn_s_store(&t->c, p[3], idx, v));
  return k;
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p++) n++;
  return n;
}

static void test_asm_quality(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "asm");
  kn_kernel *k = fma_kernel(&t, 16);
  kn_diag d;
  kn_diag_init(&d);
  char *text = NULL;
  if (t.target.vector_bits == 512) {
    assert_int_equal(kn_cg_kernel_asm(k, &t.target, &text, &d), 0);
    if (getenv("KN_TEST_DUMP")) puts(text);
    assert_true(count(text, "vfmadd") >= 1);
    assert_true(strstr(text, "zmm") != NULL);
    assert_null(strstr(text, "gather")); /* contiguous: plain vector loads */
    assert_null(strstr(text, "vinsert"));
    free(text);
  } else {
    printf("  host has no AVX-512: zmm check skipped\n");
  }
  /* the same kernel for an explicit AVX-512 CPU and for NEON */
  kn_target x;
  assert_int_equal(parse("x86_64-linux-gnu -mcpu=skylake-avx512", &x, &d), 0);
  assert_int_equal(kn_cg_kernel_asm(k, &x, &text, &d), 0);
  assert_true(count(text, "vfmadd") >= 1 && strstr(text, "zmm"));
  free(text);
  kn_target arm;
  kn_kernel *k4 = fma_kernel(&t, 4);
  assert_int_equal(parse("aarch64-linux-gnu -mcpu=cortex-a76", &arm, &d), 0);
  assert_int_equal(kn_cg_kernel_asm(k4, &arm, &text, &d), 0);
  assert_true(strstr(text, "fmla") != NULL);
  assert_true(strstr(text, "v0.4s") || strstr(text, ".4s"));
  free(text);
  /* IR before O3 carries the contract-only fmuladd and noalias params */
  assert_int_equal(kn_cg_kernel_ir(k, &x, false, &text, &d), 0);
  assert_true(strstr(text, "llvm.fmuladd.v16f32") != NULL);
  assert_true(strstr(text, "noalias") != NULL);
  assert_null(strstr(text, " fast "));
  free(text);
  kn_diag_free(&d);
  cg_free(&t);
}

/* Step 1: ws[i] = x[i] * w[i] (w a constant); step 2: out[i] = ws[i] + bias[0]. */
static void build_two_steps(cg_case *t, float scale) {
  static const float bias[1] = {0.5f};
  float *w = KN_NEW_ARRAY(&t->arena, float, 64); /* per case: packaged later */
  for (int i = 0; i < 64; i++) w[i] = (float)i * scale;
  int ix = cg_input(t, "x", KN_DT_F32, 64), io = cg_output(t, "y", KN_DT_F32, 64);
  int cw = cg_const(t, "w", w, 64 * sizeof *w), cb = cg_const(t, "bias", bias, sizeof bias);
  t->plan.workspace_bytes = 64 * 4 + 128;
  kn_buffer *p1[3] = {cg_param(t, "x", KN_DT_F32), cg_param(t, "w", KN_DT_F32), cg_param(t, "tmp", KN_DT_F32)};
  kn_kernel *k1 = cg_kernel(t, "scale", 3, p1);
  kn_var *i = kn_var_new(&t->c, "i");
  kn_expr *idx = cg_ramp(t, kn_e_mul(&t->c, cg_var(t, i), cg_i(t, 8)), 1, 8);
  k1->body = kn_s_for(&t->c, i, cg_i(t, 0), cg_i(t, 8), KN_FOR_PARALLEL,
                      kn_s_store(&t->c, p1[2], idx, kn_e_mul(&t->c, kn_e_load(&t->c, p1[0], idx), kn_e_load(&t->c, p1[1], idx))));
  k1->parallel = true;
  kn_buffer *p2[3] = {cg_param(t, "tmp", KN_DT_F32), cg_param(t, "bias", KN_DT_F32), cg_param(t, "y", KN_DT_F32)};
  kn_kernel *k2 = cg_kernel(t, "add_bias", 3, p2);
  kn_var *j = kn_var_new(&t->c, "j");
  k2->body = kn_s_for(&t->c, j, cg_i(t, 0), cg_i(t, 64), KN_FOR_SERIAL,
                      kn_s_store(&t->c, p2[2], cg_var(t, j),
                                 kn_e_add(&t->c, kn_e_load(&t->c, p2[0], cg_var(t, j)), kn_e_load(&t->c, p2[1], cg_i(t, 0)))));
  cg_step(t, k1, (int[]){KILN_ARG_INPUT, KILN_ARG_CONST, KILN_ARG_WORKSPACE}, (int[]){ix, cw, 0});
  t->steps[0].args[2].offset = 128; /* workspace + 128 */
  cg_step(t, k2, (int[]){KILN_ARG_WORKSPACE, KILN_ARG_CONST, KILN_ARG_OUTPUT}, (int[]){0, cb, io});
  t->steps[1].args[0].offset = 128;
}

static void test_shared_library(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "mdl");
  build_two_steps(&t, 0.25f);
  const kiln_artifact *a = cg_build_and_load(&t);
  /* descriptor through the C struct */
  assert_int_equal(a->abi_version, KILN_ABI_VERSION);
  assert_string_equal(a->prefix, "mdl");
  assert_string_equal(a->kiln_version, KILN_VERSION);
  assert_int_equal(a->n_inputs, 1);
  assert_int_equal(a->n_outputs, 1);
  assert_string_equal(a->inputs[0].name, "x");
  assert_int_equal(a->inputs[0].dtype, 1);
  assert_int_equal(a->inputs[0].rank, 1);
  assert_int_equal(a->inputs[0].dims[0], 64);
  assert_int_equal(a->workspace_size, 64 * 4 + 128);
  assert_int_equal(a->workspace_align, 64);
  assert_int_equal(a->n_steps, 2);
  assert_string_equal(a->steps[0].name, "scale");
  assert_int_equal(a->steps[0].parallel, 1);
  assert_int_equal(a->steps[1].first_arg, 3);
  assert_int_equal(a->n_consts, 2);
  assert_int_equal((uintptr_t)a->consts[0] % 64, 0);
  assert_float_equal(((const float *)a->consts[0])[3], 0.75f, 0);
  float x[64], y[64];
  for (int i = 0; i < 64; i++) x[i] = (float)i;
  for (int threads = 1; threads <= 2; threads++) {
    assert_int_equal(a->set_threads(threads), KILN_OK);
    cg_run(&t, (const void *[]){x}, (void *[]){y}, 1);
    for (int i = 0; i < 64; i++) assert_float_equal(y[i], (float)i * ((float)i * 0.25f) + 0.5f, 0);
  }
  /* dynamic dependencies and exports */
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "readelf -d '%s' | grep NEEDED | grep -v -E 'libc\\.so|libm\\.so|libpthread\\.so|ld-linux' | grep -q .",
           t.path);
  assert_int_equal(cg_system("%s", cmd), 1); /* grep found nothing else */
  assert_int_equal(cg_system("readelf -d '%s' | grep -q NEEDED", t.path), 0);
  assert_int_equal(cg_system("nm -D --defined-only '%s' | awk '{print $3}' | grep -v -E '^(mdl_run|mdl_set_threads|mdl_run_profiled|mdl_artifact|kiln_artifact_v1)$' | grep -q .", t.path), 1);
  assert_int_equal(cg_system("readelf -lW '%s' | grep GNU_STACK | grep -q RWE", t.path), 1);
  /* the header compiles standalone as C99 and C++ free of warnings */
  assert_int_equal(cg_system("cd '%s' && printf '#include \"mdl.h\"\\nint main(void){return MDL_WORKSPACE_SIZE > 0 && MDL_INPUT0_SIZE(2) == 64 && MDL_OUTPUT0_BYTES(1) == 256 ? 0 : 1;}\\n' > h.c && "
                             "cc -std=c99 -Wall -Wextra -Werror -pedantic h.c -o h && ./h", t.dir), 0);
  cg_free(&t);
}

/* P_run_profiled (ABI 1.1) on the two-step artifact: the size query, a too
 * small buffer (nothing runs), then well-formed events: per step one
 * whole-step event, then for the parallel step one per pool thread, each
 * inside its step's interval, steps in order; the outputs as with P_run. */
static void test_run_profiled(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "prof");
  build_two_steps(&t, 0.25f);
  const kiln_artifact *a = cg_build_and_load(&t);
  assert_int_equal(a->abi_minor, 3); /* CPU artifacts: the 1.3 layout (1.4 is GPU artifacts) */
  assert_non_null(a->run_profiled);
  kn_diag d;
  kn_diag_init(&d);
  void *ws = kn_loader_workspace_new(a, &d);
  assert_non_null(ws);
  float x[64], y[64];
  for (int i = 0; i < 64; i++) x[i] = (float)i;
  const void *in[1] = {x};
  void *out[1] = {y};
  for (int threads = 1; threads <= 3; threads++) {
    assert_int_equal(a->set_threads(threads), KILN_OK);
    int64_t need = threads > 1 ? 2 + threads : 2, n = -1;
    assert_int_equal(a->run_profiled(in, out, ws, 1, NULL, 0, &n), KILN_ERR_CAPACITY);
    assert_int_equal(n, need);
    kiln_prof_event ev[KILN_PROF_EVENTS(2, 3)];
    assert_true(need <= KILN_PROF_EVENTS(2, threads));
    for (int i = 0; i < 64; i++) y[i] = -1;
    assert_int_equal(a->run_profiled(in, out, ws, 1, ev, need - 1, &n), KILN_ERR_CAPACITY);
    assert_float_equal(y[5], -1, 0); /* nothing ran */
    assert_int_equal(a->run_profiled(in, out, ws, 1, ev, need, NULL), KILN_ERR_ARG);
    assert_int_equal(a->run_profiled(in, out, ws, 1, NULL, 4, &n), KILN_ERR_ARG);
    assert_int_equal(a->run_profiled(in, out, ws, 9, ev, need, &n), KILN_ERR_BATCH);
    assert_int_equal(a->run_profiled(in, out, ws, 1, ev, KILN_PROF_EVENTS(2, threads), &n), KILN_OK);
    for (int i = 0; i < 64; i++) assert_float_equal(y[i], (float)i * ((float)i * 0.25f) + 0.5f, 0);
    assert_int_equal(n, need);
    /* step 0 (parallel on the pool) */
    assert_int_equal(ev[0].step, 0);
    assert_int_equal(ev[0].task, -1);
    assert_int_equal(ev[0].thread, 0);
    assert_int_equal(ev[0].ntasks, threads);
    assert_true(ev[0].begin_ns <= ev[0].end_ns);
    int64_t e = 1;
    if (threads > 1)
      for (int task = 0; task < threads; task++, e++) {
        assert_int_equal(ev[e].step, 0);
        assert_int_equal(ev[e].task, task);
        assert_int_equal(ev[e].thread, task);
        assert_int_equal(ev[e].ntasks, threads);
        assert_true(ev[e].begin_ns >= ev[0].begin_ns && ev[e].end_ns <= ev[0].end_ns);
        assert_true(ev[e].begin_ns <= ev[e].end_ns);
      }
    /* step 1 (sequential) after step 0 */
    assert_int_equal(ev[e].step, 1);
    assert_int_equal(ev[e].task, -1);
    assert_int_equal(ev[e].ntasks, 1);
    assert_true(ev[e].begin_ns >= ev[0].end_ns && ev[e].begin_ns <= ev[e].end_ns);
    /* the loader's wrapper */
    assert_int_equal(kn_loader_run_profiled(&t.loader, in, out, ws, 1, ev, 1, &n, &d), -1);
    assert_non_null(strstr(d.lines[d.count - 1], "events needed"));
  }
  kn_loader_workspace_free(ws);
  kn_diag_free(&d);
  cg_free(&t);
}

static const char *main_c =
    "#include <stdio.h>\n#include \"alpha.h\"\n#include \"beta.h\"\n"
    "int main(void) {\n"
    "  static unsigned char wa[ALPHA_WORKSPACE_SIZE] __attribute__((aligned(64)));\n"
    "  static unsigned char wb[BETA_WORKSPACE_SIZE] __attribute__((aligned(64)));\n"
    "  float x[64], ya[64], yb[64];\n"
    "  for (int i = 0; i < 64; i++) x[i] = (float)i;\n"
    "  const void *in[1] = {x}; void *oa[1] = {ya}, *ob[1] = {yb};\n"
    "  if (alpha_set_threads(2) || beta_set_threads(2)) return 3;\n"
    "  if (alpha_run(in, oa, wa, 1) || beta_run(in, ob, wb, 1)) return 2;\n"
    "  if (alpha_run(in, oa, wa, 5) != KILN_ERR_BATCH) return 4;\n"
    "  for (int i = 0; i < 64; i++)\n"
    "    if (ya[i] != i * (i * 0.25f) + 0.5f || yb[i] != i * (i * 2.0f) + 0.5f) return 1;\n"
    "  printf(\"%s %s\\n\", alpha_artifact.prefix, beta_artifact.prefix);\n"
    "  return 0;\n"
    "}\n";

static void test_object_artifacts(void **state) {
  (void)state;
  cg_case a, b;
  cg_init(&a, "alpha");
  cg_init(&b, "beta");
  build_two_steps(&a, 0.25f);
  build_two_steps(&b, 2.0f);
  assert_int_equal(cg_package(&a, ".o"), 0);
  assert_int_equal(cg_package(&b, ".o"), 0);
  /* only the three prefixed symbols are global in each object */
  assert_int_equal(cg_system("nm -g --defined-only '%s' | awk '{print $3}' | grep -v -E '^alpha_(run|set_threads|run_profiled|artifact)$' | grep -q .", a.path), 1);
  assert_int_equal(cg_system("nm '%s' | grep -q ' T alpha_run'", a.path), 0);
  assert_int_equal(cg_system("nm '%s' | grep -q kiln_artifact_v1", a.path), 1);
  char main_path[600];
  snprintf(main_path, sizeof main_path, "%s/main.c", a.dir);
  FILE *fp = fopen(main_path, "w");
  assert_non_null(fp);
  fputs(main_c, fp);
  fclose(fp);
  assert_int_equal(cg_system("cd '%s' && cc -std=c11 -Wall -Werror -I'%s' main.c alpha.o '%s' -lm -lpthread -o prog && ./prog > out.txt && grep -q 'alpha beta' out.txt",
                             a.dir, b.dir, b.path),
                   0);
  cg_free(&a);
  cg_free(&b);
}

static int dir_entries(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static void test_failed_package_leaves_nothing(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "fail");
  build_two_steps(&t, 1.0f);
  kn_diag d;
  kn_diag_init(&d);
  char path[600];
  /* a directory that does not exist */
  snprintf(path, sizeof path, "%s/no/such/dir/model.so", t.dir);
  assert_int_equal(kn_cg_package(&t.plan, &t.target, path, NULL, &d), -1);
  assert_true(d.count >= 1 && strstr(d.lines[0], "no/such/dir"));
  kn_diag_free(&d);
  /* a failing linker */
  setenv("KILN_CC", "false", 1);
  snprintf(path, sizeof path, "%s/model.so", t.dir);
  assert_int_equal(kn_cg_package(&t.plan, &t.target, path, NULL, &d), -1);
  unsetenv("KILN_CC");
  assert_true(d.count >= 1 && strstr(d.lines[0], "false"));
  kn_diag_free(&d);
  assert_int_equal(dir_entries(t.dir), 0); /* no .so, no .h, no temp dir */
  /* bad plans and paths */
  assert_int_equal(kn_cg_package(&t.plan, &t.target, "model.dll", NULL, &d), -1);
  assert_true(strstr(d.lines[0], ".so"));
  kn_diag_free(&d);
  t.plan.prefix = "bad-prefix";
  assert_int_equal(kn_cg_package(&t.plan, &t.target, path, NULL, &d), -1);
  assert_true(strstr(d.lines[0], "bad-prefix"));
  kn_diag_free(&d);
  t.plan.prefix = "fail";
  t.steps[1].args[1].index = 7; /* no such constant */
  assert_int_equal(kn_cg_package(&t.plan, &t.target, path, NULL, &d), -1);
  assert_true(strstr(d.lines[0], "add_bias"));
  kn_diag_free(&d);
  t.steps[1].args[1].index = 1;
  kn_target arm;
  assert_int_equal(parse("aarch64-linux-gnu", &arm, &d), 0);
  if (t.target.arch != KN_ARCH_AARCH64) {
    /* a failing cross link (or a kiln without the aarch64 runtime) leaves nothing */
    setenv("KILN_AARCH64_CC", "false", 1);
    assert_int_equal(kn_cg_package(&t.plan, &arm, path, NULL, &d), -1);
    unsetenv("KILN_AARCH64_CC");
    assert_true(d.count >= 1 && (strstr(d.lines[0], "false") || strstr(d.lines[0], "gcc-aarch64")));
    kn_diag_free(&d);
  }
  assert_int_equal(dir_entries(t.dir), 0);
  /* and the same plan packages fine afterwards */
  assert_int_equal(kn_cg_package(&t.plan, &t.target, path, NULL, &d), 0);
  assert_int_equal(dir_entries(t.dir), 2); /* model.so + model.h */
  kn_diag_free(&d);
  cg_free(&t);
}

/* The whole of a (small) file, malloc'd and NUL terminated. */
static char *slurp(const char *dir, const char *name) {
  char path[600];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *fp = fopen(path, "rb");
  assert_non_null(fp);
  char *text = calloc(1, 1 << 20);
  assert_non_null(text);
  fread(text, 1, (1 << 20) - 1, fp);
  fclose(fp);
  return text;
}

/* A header kiln wrote for another prefix is not replaced, and nothing is
 * written (the .so and the .o of one stem with two prefixes used to leave
 * the .so without its header); --header puts it elsewhere; the same prefix
 * recompiles in place; each header's include guard holds its file name. */
static void test_header_of_another_prefix(void **state) {
  (void)state;
  cg_case t;
  cg_init(&t, "model");
  build_two_steps(&t, 1.0f);
  kn_diag d;
  kn_diag_init(&d);
  char so[600], obj[600], c_out[600], elsewhere[600], other[600];
  snprintf(so, sizeof so, "%s/net.so", t.dir);
  snprintf(obj, sizeof obj, "%s/net.o", t.dir);
  snprintf(c_out, sizeof c_out, "%s/net.c", t.dir);
  snprintf(elsewhere, sizeof elsewhere, "%s/net_obj.h", t.dir);
  snprintf(other, sizeof other, "%s/other.so", t.dir);
  assert_int_equal(kn_cg_package(&t.plan, &t.target, so, NULL, &d), 0);
  char *before = slurp(t.dir, "net.h");
  assert_non_null(strstr(before, "#ifndef KILN_MODEL_NET_H\n#define KILN_MODEL_NET_H\n"));
  t.plan.prefix = "net";
  assert_int_equal(kn_cg_package(&t.plan, &t.target, obj, NULL, &d), -1);
  assert_int_equal(d.count, 1);
  assert_non_null(strstr(d.lines[0], "net.h' is the header of another artifact (net.so, prefix 'model'), "
                                     "not of prefix 'net'"));
  assert_non_null(strstr(d.lines[0], "--header PATH"));
  kn_diag_free(&d);
  kn_target c_target;
  assert_int_equal(parse("c", &c_target, &d), 0);
  assert_int_equal(kn_cg_package(&t.plan, &c_target, c_out, NULL, &d), -1);
  assert_non_null(strstr(d.lines[0], "prefix 'model'"));
  kn_diag_free(&d);
  assert_int_equal(dir_entries(t.dir), 2); /* net.so, net.h: no .o, .c or temp dir */
  char *after = slurp(t.dir, "net.h");
  assert_string_equal(before, after);
  free(after);
  /* --header elsewhere */
  assert_int_equal(kn_cg_package(&t.plan, &t.target, obj, elsewhere, &d), 0);
  after = slurp(t.dir, "net_obj.h");
  assert_non_null(strstr(after, "#ifndef KILN_NET_NET_OBJ_H\n"));
  assert_non_null(strstr(after, "Artifact: net.o\n"));
  free(after);
  assert_int_equal(dir_entries(t.dir), 4);
  /* the same prefix again, in place; another file of the default prefix */
  t.plan.prefix = "model";
  assert_int_equal(kn_cg_package(&t.plan, &t.target, so, NULL, &d), 0);
  assert_int_equal(kn_cg_package(&t.plan, &t.target, other, NULL, &d), 0);
  after = slurp(t.dir, "other.h");
  assert_non_null(strstr(after, "#ifndef KILN_MODEL_OTHER_H\n"));
  free(after);
  assert_int_equal(d.count, 0);
  free(before);
  cg_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_target_parse),   cmocka_unit_test(test_target_env),
      cmocka_unit_test(test_asm_quality),
      cmocka_unit_test(test_shared_library), cmocka_unit_test(test_object_artifacts),
      cmocka_unit_test(test_run_profiled),
      cmocka_unit_test(test_failed_package_leaves_nothing),
      cmocka_unit_test(test_header_of_another_prefix),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
