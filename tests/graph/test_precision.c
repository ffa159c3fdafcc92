/* test_precision.c — `kiln compile --precision` (ir/passes/pass_precision.c):
 * the dtypes after the pass (constants, intermediates and Cast targets in the
 * 16-bit type; graph inputs and outputs float32; integers untouched), float32
 * leaving the graph as it was, the reference interpreter's outputs close to
 * float32's, and the overflow diagnostics: every constant named, folded ones
 * too, nothing changed when one fails. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/graph/graph_util.h"

/* y = Softmax(Relu(MatMul(x, w) + b)), k = ArgMax(y) (int64), z = Cast(k, to=float32) + 1:
 * float32 outputs y and z, int64 output k. */
static void build(kn_graph *g) {
  kn_graph_init(g);
  g->max_batch = 2;
  g->opset = 17;
  tg_input(g, "x", KN_DT_F32, "N,8");
  tg_const_rand(g, "w", "8,4", 3u, -1, 1);
  tg_const_rand(g, "b", "4", 4u, -1, 1);
  tg_const_f(g, "one", "", (const float[]){1});
  tg_node(g, KN_OP_MATMUL, "mm", "x,w", "h");
  tg_node(g, KN_OP_ADD, "add", "h,b", "hb");
  tg_node(g, KN_OP_RELU, "relu", "hb", "r");
  tg_node(g, KN_OP_SOFTMAX, "sm", "r", "y");
  int am = tg_node(g, KN_OP_ARG_MAX, "am", "y", "k");
  tg_attr_i(g, am, "axis", 1);
  int cast = tg_node(g, KN_OP_CAST, "cast", "k", "kf");
  tg_attr_i(g, cast, "to", 1);
  tg_node(g, KN_OP_ADD, "add1", "kf,one", "z");
  tg_output(g, "y");
  tg_output(g, "k");
  tg_output(g, "z");
  tg_infer_ok(g);
}

static kn_dtype dtype_of(const kn_graph *g, const char *name) { return g->values[tg_value(g, name)].dtype; }

static int precision_f16(kn_graph *g, kn_diag *d) { return kn_pass_precision(g, KN_DT_F16, d); }
static int precision_bf16(kn_graph *g, kn_diag *d) { return kn_pass_precision(g, KN_DT_BF16, d); }

static void check_types(kn_dtype low) {
  kn_graph g;
  build(&g);
  void **before = tg_run(&g, 2, 11u);
  tg_pass_ok(&g, low == KN_DT_F16 ? precision_f16 : precision_bf16, "precision");
  const char *sfx = low == KN_DT_F16 ? ".fp16" : ".bf16";
  char name[64];
  /* weights and every float intermediate in 16 bits */
  assert_int_equal(dtype_of(&g, "w"), low);
  assert_int_equal(dtype_of(&g, "b"), low);
  assert_int_equal(dtype_of(&g, "h"), low);
  assert_int_equal(dtype_of(&g, "r"), low);
  assert_int_equal(dtype_of(&g, "kf"), low); /* Cast(to=float32) now casts to low */
  /* the edges stay float32, the integers as they were */
  assert_int_equal(dtype_of(&g, "x"), KN_DT_F32);
  snprintf(name, sizeof name, "x%s", sfx);
  assert_int_equal(dtype_of(&g, name), low);
  assert_int_equal(dtype_of(&g, "y"), KN_DT_F32);
  assert_int_equal(dtype_of(&g, "z"), KN_DT_F32);
  assert_int_equal(dtype_of(&g, "k"), KN_DT_I64);
  snprintf(name, sizeof name, "y%s", sfx);
  assert_int_equal(dtype_of(&g, name), low);
  /* x is read through one Cast; y and z are written by Casts from low */
  const kn_node *yp = &g.nodes[g.values[tg_value(&g, "y")].producer];
  assert_int_equal(yp->op, KN_OP_CAST);
  assert_int_equal(g.values[yp->in[0]].dtype, low);
  assert_int_equal(tg_count(&g, KN_OP_CAST), 4); /* x, kf, y, z */
  /* w's data converted: its first element as the 16-bit type rounds it */
  const uint16_t *w = g.values[tg_value(&g, "w")].data;
  float w0 = low == KN_DT_F16 ? kn_f16_to_f32(w[0]) : kn_bf16_to_f32(w[0]);
  kn_graph ref;
  build(&ref);
  float r0 = ((const float *)ref.values[tg_value(&ref, "w")].data)[0];
  float rounded = low == KN_DT_F16 ? kn_f16_to_f32(kn_f32_to_f16(r0)) : kn_bf16_to_f32(kn_f32_to_bf16(r0));
  assert_true(w0 != 0 && w0 == rounded);
  kn_graph_free(&ref);
  /* and the graph computes about what it did */
  void **after = tg_run(&g, 2, 11u);
  for (int i = 0; i < g.n_outputs; i++) {
    double diff = tg_max_rel_diff(&g, i, 2, after, before);
    if (!(diff <= (i == 1 ? 0 : 2e-2))) fail_msg("output %d differs by %g", i, diff);
  }
  tg_free_outputs(&g, after);
  tg_free_outputs(&g, before);
  kn_graph_free(&g);
}

static void types_after_fp16(void **state) {
  (void)state;
  check_types(KN_DT_F16);
}

static void types_after_bf16(void **state) {
  (void)state;
  check_types(KN_DT_BF16);
}

static void fp32_changes_nothing(void **state) {
  (void)state;
  kn_graph g;
  build(&g);
  char *before = tg_print(&g);
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_pass_precision(&g, KN_DT_F32, &d), 1);
  assert_int_equal(d.count, 0);
  char *after = tg_print(&g);
  assert_string_equal(before, after);
  free(before);
  free(after);
  kn_diag_free(&d);
  kn_graph_free(&g);
}

/* Runs the pass, expects failure, and returns the diagnostics joined by '\n' (malloc'd). */
static char *fails(kn_graph *g, kn_dtype low, int lines) {
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_pass_precision(g, low, &d), -1);
  assert_int_equal(d.count, lines);
  size_t n = 1;
  for (int i = 0; i < d.count; i++) n += strlen(d.lines[i]) + 1;
  char *all = calloc(n, 1);
  for (int i = 0; i < d.count; i++) strcat(strcat(all, d.lines[i]), "\n");
  kn_diag_free(&d);
  return all;
}

static void expect_in(const char *text, const char *needle) {
  if (!strstr(text, needle)) fail_msg("'%s' not in:\n%s", needle, text);
}

/* Two constants beyond float16, both named in one run; the graph untouched. */
static void overflow_names_every_constant(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.opset = 17;
  g.max_batch = 1;
  tg_input(&g, "x", KN_DT_F32, "1,2");
  tg_const_f(&g, "big", "2", (const float[]){1e5f, 1.0f});
  tg_const_f(&g, "neg", "2", (const float[]){-7e4f, -8e4f});
  tg_const_f(&g, "fine", "2", (const float[]){65504.0f, INFINITY}); /* the largest, and an infinity: fine */
  tg_node(&g, KN_OP_MUL, "scale", "x,big", "a");
  tg_node(&g, KN_OP_ADD, "shift", "a,neg", "b");
  tg_node(&g, KN_OP_SUB, "keep", "b,fine", "y");
  tg_output(&g, "y");
  tg_infer_ok(&g);
  char *before = tg_print(&g);
  char *err = fails(&g, KN_DT_F16, 2);
  expect_in(err, "--precision fp16: constant 'big' (read by node 'scale' (Mul)): 1 value overflows float16 "
                 "(100000 at index 0; its largest finite value is 65504)");
  expect_in(err, "constant 'neg' (read by node 'shift' (Add)): 2 values overflow float16 (-80000 at index 1");
  assert_null(strstr(err, "fine"));
  char *after = tg_print(&g);
  assert_string_equal(before, after);
  /* bfloat16 holds them all */
  tg_pass_ok(&g, precision_bf16, "precision");
  free(err);
  free(before);
  free(after);
  kn_graph_free(&g);
}

/* A value constant folding computed (300 * 300) overflows float16 and is
 * named as the folded constant; bfloat16 overflows only near FLT_MAX. */
static void overflow_after_folding(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.opset = 17;
  g.max_batch = 1;
  tg_input(&g, "x", KN_DT_F32, "1,2");
  tg_const_f(&g, "c", "", (const float[]){300.0f});
  tg_const_f(&g, "lowest", "", (const float[]){-FLT_MAX});
  tg_node(&g, KN_OP_MUL, "square", "c,c", "sq");
  tg_node(&g, KN_OP_MUL, "mul", "x,sq", "y");
  tg_node(&g, KN_OP_MAX, "floor", "y,lowest", "z");
  tg_output(&g, "z");
  tg_infer_ok(&g);
  tg_pass_ok(&g, kn_pass_fold_constants, "fold");
  assert_non_null(g.values[tg_value(&g, "sq")].data);
  char *err = fails(&g, KN_DT_F16, 2);
  expect_in(err, "constant 'sq' (read by node 'mul' (Mul)): 1 value overflows float16 (90000 at index 0;");
  expect_in(err, "constant 'lowest' (read by node 'floor' (Max))");
  free(err);
  err = fails(&g, KN_DT_BF16, 1);
  expect_in(err, "--precision bf16: constant 'lowest' (read by node 'floor' (Max)): 1 value overflows bfloat16 "
                 "(-3.40282e+38 at index 0; its largest finite value is 3.38953e+38)");
  free(err);
  kn_graph_free(&g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(types_after_fp16),
      cmocka_unit_test(types_after_bf16),
      cmocka_unit_test(fp32_changes_nothing),
      cmocka_unit_test(overflow_names_every_constant),
      cmocka_unit_test(overflow_after_folding),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
