/* test_alpha_equal.c — kn_kernel_alpha_equal: kernels equal up to the
 * names of their variables and buffers are equal; any other difference
 * (a constant, a dtype, which buffer or which variable an expression reads,
 * a loop's kind or dimension) makes them differ. kn_kernels_group groups
 * by it. Both back ends emit equal kernels once, so a false "equal" would
 * run the wrong code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/loop/gpu_test_util.h"

typedef struct variant {
  double scale;    /* the constant multiplied in */
  kn_dtype dtype;  /* of the output */
  bool swap_in;    /* read in1 where the reference reads in0 */
  bool swap_vars;  /* index with the thread var where the reference uses the block var */
  int dim;         /* the thread loop's dimension */
} variant;

/* out[b * 64 + t] = in0[b * 64 + t] * scale + in1[t], over block.x b and thread.dim t */
static kn_kernel build(gpu_fx *f, const char *name, variant v) {
  kn_buffer *out = kn_buffer_new(&f->c, "out", v.dtype, KN_BUF_PARAM, 256);
  kn_buffer *in0 = kn_buffer_new(&f->c, "in0", KN_DT_F32, KN_BUF_PARAM, 256);
  kn_buffer *in1 = kn_buffer_new(&f->c, "in1", KN_DT_F32, KN_BUF_PARAM, 256);
  kn_var *b = kn_var_new(&f->c, "b"), *t = kn_var_new(&f->c, "t");
  kn_expr *i = kn_e_add(&f->c, kn_e_mul(&f->c, V(f, v.swap_vars ? t : b), I(f, 64)), V(f, v.swap_vars ? b : t));
  kn_expr *x = kn_e_mul(&f->c, kn_e_load(&f->c, v.swap_in ? in1 : in0, i), kn_e_float(&f->c, KN_DT_F32, v.scale));
  x = kn_e_add(&f->c, x, kn_e_load(&f->c, v.swap_in ? in0 : in1, V(f, t)));
  if (v.dtype != KN_DT_F32) x = kn_e_cast(&f->c, v.dtype, x);
  kn_stmt *body = kn_s_bind(&f->c, t, I(f, 64), KN_FOR_THREAD, v.dim, kn_s_store(&f->c, out, i, x));
  body = kn_s_bind(&f->c, b, I(f, 4), KN_FOR_BLOCK, 0, body);
  kn_buffer *params[] = {out, in0, in1};
  return gpu_kernel(f, name, params, 3, body);
}

static void test_alpha_equal(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  variant base = {.scale = 0.5, .dtype = KN_DT_F32};
  kn_kernel a = build(&f, "a", base), same = build(&f, "b", base);
  assert_true(kn_kernel_alpha_equal(&a, &same));
  assert_true(kn_kernel_alpha_equal(&same, &a));
  variant v = base;
  v.scale = 0.25;
  kn_kernel k = build(&f, "c", v);
  assert_false(kn_kernel_alpha_equal(&a, &k));
  v = base;
  v.scale = -0.0;
  variant z = base;
  z.scale = 0.0;
  kn_kernel neg = build(&f, "d", v), pos = build(&f, "e", z);
  assert_false(kn_kernel_alpha_equal(&neg, &pos)); /* -0 and 0 are different constants */
  v = base;
  v.dtype = KN_DT_F16;
  k = build(&f, "f", v);
  assert_false(kn_kernel_alpha_equal(&a, &k));
  v = base;
  v.swap_in = true;
  k = build(&f, "g", v);
  assert_false(kn_kernel_alpha_equal(&a, &k));
  v = base;
  v.swap_vars = true;
  k = build(&f, "h", v);
  assert_false(kn_kernel_alpha_equal(&a, &k));
  v = base;
  v.dim = 1;
  k = build(&f, "i", v);
  assert_false(kn_kernel_alpha_equal(&a, &k));
  gpu_fx_free(&f);
}

/* Each kernel joins the group of the first kernel equal to it; the same
 * pointer twice is one group; kernels that differ in one constant or the
 * output dtype stay apart. */
static void test_kernels_group(void **state) {
  (void)state;
  gpu_fx f;
  gpu_fx_init(&f);
  variant base = {.scale = 0.5, .dtype = KN_DT_F32}, other = base, half = base;
  other.scale = 0.25;
  half.dtype = KN_DT_F16;
  kn_kernel k[6] = {build(&f, "a", base), build(&f, "b", other), build(&f, "c", base),
                    build(&f, "d", half), build(&f, "e", other), build(&f, "f", base)};
  const kn_kernel *ks[7] = {&k[0], &k[1], &k[2], &k[3], &k[4], &k[5], &k[1]};
  int first[7];
  assert_int_equal(kn_kernels_group(ks, 7, first), 3);
  int want[7] = {0, 1, 0, 3, 1, 0, 1};
  for (int i = 0; i < 7; i++) assert_int_equal(first[i], want[i]);
  assert_int_equal(kn_kernels_group(ks, 0, first), 0);
  gpu_fx_free(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_alpha_equal), cmocka_unit_test(test_kernels_group)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
