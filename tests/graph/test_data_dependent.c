/* test_data_dependent.c — NonZero, Compress and Unique rewritten for their
 * declared output shapes (ir/passes/pass_data_dependent.c): the rewritten graphs run
 * in the reference interpreter against values worked out by hand, including
 * the run-time check (the last graph output) on data that gives the declared
 * count and on data that does not. Must-fail cases check the diagnostic. */
#include <math.h>
#include <string.h>

#include "tests/graph/graph_util.h"

/* Declares the shape of graph output k (the others: none). */
static void declare(kn_graph *g, int k, const char *shape) {
  if (!g->out_declared) {
    g->out_declared = KN_NEW_ARRAY(&g->arena, kn_shape, g->n_outputs + 1);
    for (int i = 0; i < g->n_outputs; i++) g->out_declared[i].rank = -1;
  }
  g->out_declared[k] = tg_shape(shape);
}

static void pass_ok(kn_graph *g) {
  kn_diag d;
  kn_diag_init(&d);
  int rc = kn_pass_data_dependent(g, &d);
  if (rc == 0) rc = kn_infer_shapes(g, &d);
  if (rc == 0) rc = kn_graph_verify(g, &d);
  if (rc != 0) kn_diag_print(&d, "data_dependent");
  kn_diag_free(&d);
  assert_int_equal(rc, 0);
  assert_int_equal(tg_count(g, KN_OP_NON_ZERO) + tg_count(g, KN_OP_COMPRESS) + tg_count(g, KN_OP_UNIQUE), 0);
}

static void pass_fails(kn_graph *g, const char *needle) {
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_pass_data_dependent(g, &d), -1);
  bool found = false;
  for (int i = 0; i < d.count; i++) found |= strstr(d.lines[i], needle) != NULL;
  if (!found) {
    kn_diag_print(&d, "data_dependent");
    fail_msg("no diagnostic contains \"%s\"", needle);
  }
  kn_diag_free(&d);
}

/* NonZero of a [2,3] float declared [2,3]: coordinates in row-major order;
 * two nonzeros instead of three fail the check. */
static void nonzero_declared(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "2,3");
  tg_node(&g, KN_OP_NON_ZERO, "nz", "x", "y");
  tg_output(&g, "y");
  declare(&g, 0, "2,3");
  pass_ok(&g);
  assert_int_equal(g.n_checks, 1);
  float x[6] = {0, 2, 0, -1, 0, NAN};
  int64_t y[6];
  bool ok;
  const void *in[1] = {x};
  void *out[2] = {y, &ok};
  tg_ref_run(&g, in, out);
  const int64_t expect[6] = {0, 1, 1, 1, 0, 2};
  for (int i = 0; i < 6; i++) assert_int_equal(y[i], expect[i]);
  assert_true(ok);
  x[5] = 0;
  tg_ref_run(&g, in, out);
  assert_false(ok);
  kn_graph_free(&g);
}

/* Compress with a constant condition shorter than the axis and no declared
 * shape: the count comes from the constant, no check. */
static void compress_constant_condition(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "3,2");
  const uint8_t cond[2] = {0, 1};
  tg_const(&g, "c", KN_DT_BOOL, "2", cond);
  int n = tg_node(&g, KN_OP_COMPRESS, "cp", "x,c", "y");
  tg_attr_i(&g, n, "axis", 0);
  tg_output(&g, "y");
  pass_ok(&g);
  assert_int_equal(g.n_checks, 0);
  kn_shape want = tg_shape("1,2");
  assert_true(kn_shape_equal(&g.values[tg_value(&g, "y")].shape, &want));
  float x[6] = {1, 2, 3, 4, 5, 6}, y[2];
  const void *in[1] = {x};
  void *out[1] = {y};
  tg_ref_run(&g, in, out);
  assert_float_equal(y[0], 3, 0);
  assert_float_equal(y[1], 4, 0);
  kn_graph_free(&g);
}

/* Compress without an axis: the flattened input; declared [3]. */
static void compress_flat(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_I64, "2,2");
  tg_input(&g, "c", KN_DT_BOOL, "4");
  tg_node(&g, KN_OP_COMPRESS, "cp", "x,c", "y");
  tg_output(&g, "y");
  declare(&g, 0, "3");
  pass_ok(&g);
  int64_t x[4] = {10, 20, 30, 40}, y[3];
  uint8_t c[4] = {1, 0, 1, 1};
  bool ok;
  const void *in[2] = {x, c};
  void *out[2] = {y, &ok};
  tg_ref_run(&g, in, out);
  assert_int_equal(y[0], 10);
  assert_int_equal(y[1], 30);
  assert_int_equal(y[2], 40);
  assert_true(ok);
  c[1] = 1;
  tg_ref_run(&g, in, out);
  assert_false(ok);
  kn_graph_free(&g);
}

/* Unique of [2, 1, 2, 3, 1] in first-occurrence order (sorted=0) and sorted:
 * Y, indices, inverse_indices, counts; a NaN fails the check. */
static void unique_flat(void **state) {
  (void)state;
  for (int sorted = 0; sorted < 2; sorted++) {
    kn_graph g;
    kn_graph_init(&g);
    tg_input(&g, "x", KN_DT_F32, "5");
    int n = tg_node(&g, KN_OP_UNIQUE, "uq", "x", "y,idx,inv,cnt");
    tg_attr_i(&g, n, "sorted", sorted);
    tg_output(&g, "y");
    tg_output(&g, "idx");
    tg_output(&g, "inv");
    tg_output(&g, "cnt");
    declare(&g, 3, "3");
    pass_ok(&g);
    float x[5] = {2, 1, 2, 3, 1}, y[3];
    int64_t idx[3], inv[5], cnt[3];
    bool ok;
    const void *in[1] = {x};
    void *out[5] = {y, idx, inv, cnt, &ok};
    tg_ref_run(&g, in, out);
    const float ey[2][3] = {{2, 1, 3}, {1, 2, 3}};
    const int64_t eidx[2][3] = {{0, 1, 3}, {1, 0, 3}}, ecnt[2][3] = {{2, 2, 1}, {2, 2, 1}};
    const int64_t einv[2][5] = {{0, 1, 0, 2, 1}, {1, 0, 1, 2, 0}};
    for (int i = 0; i < 3; i++) {
      assert_float_equal(y[i], ey[sorted][i], 0);
      assert_int_equal(idx[i], eidx[sorted][i]);
      assert_int_equal(cnt[i], ecnt[sorted][i]);
    }
    for (int i = 0; i < 5; i++) assert_int_equal(inv[i], einv[sorted][i]);
    assert_true(ok);
    x[3] = NAN;
    tg_ref_run(&g, in, out);
    assert_false(ok);
    x[3] = 2; /* two unique values */
    tg_ref_run(&g, in, out);
    assert_false(ok);
    kn_graph_free(&g);
  }
}

/* Unique along axis 1 of a [2,4]: columns (1,0) (0,5) (1,0) (0,2) sorted
 * lexicographically: (0,2) (0,5) (1,0). */
static void unique_axis_sorted(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_I32, "2,4");
  int n = tg_node(&g, KN_OP_UNIQUE, "uq", "x", "y,idx,inv,cnt");
  tg_attr_i(&g, n, "axis", 1);
  tg_output(&g, "y");
  tg_output(&g, "inv");
  declare(&g, 0, "2,3");
  pass_ok(&g);
  int32_t x[8] = {1, 0, 1, 0, 0, 5, 0, 2}, y[6];
  int64_t inv[4];
  bool ok;
  const void *in[1] = {x};
  void *out[3] = {y, inv, &ok};
  tg_ref_run(&g, in, out);
  const int32_t ey[6] = {0, 0, 1, 2, 5, 0};
  const int64_t einv[4] = {2, 1, 2, 0};
  for (int i = 0; i < 6; i++) assert_int_equal(y[i], ey[i]);
  for (int i = 0; i < 4; i++) assert_int_equal(inv[i], einv[i]);
  assert_true(ok);
  kn_graph_free(&g);
}

/* Unique of a constant [2,3] along axis 0 with nothing declared: rows
 * (1,2,3) twice; the count comes from the constant, no check. */
static void unique_constant(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "s", KN_DT_F32, "");
  const float data[9] = {1, 2, 3, 0, 0, 1, 1, 2, 3};
  tg_const_f(&g, "x", "3,3", data);
  int n = tg_node(&g, KN_OP_UNIQUE, "uq", "x", "y,idx,inv,cnt");
  tg_attr_i(&g, n, "axis", 0);
  tg_node(&g, KN_OP_MUL, "scale", "y,s", "z");
  tg_output(&g, "z");
  tg_output(&g, "cnt");
  pass_ok(&g);
  assert_int_equal(g.n_checks, 0);
  float s = 2, z[6];
  int64_t cnt[2];
  const void *in[1] = {&s};
  void *out[2] = {z, cnt};
  tg_ref_run(&g, in, out);
  const float ez[6] = {0, 0, 2, 2, 4, 6};
  for (int i = 0; i < 6; i++) assert_float_equal(z[i], ez[i], 0);
  assert_int_equal(cnt[0], 1);
  assert_int_equal(cnt[1], 2);
  kn_graph_free(&g);
}

static void refusals(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "2,3");
  tg_node(&g, KN_OP_NON_ZERO, "nz", "x", "y");
  tg_output(&g, "y");
  pass_fails(&g, "node 'nz' (NonZero): its output shape depends on input values: output 'y' must be a model output");
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "2,3");
  tg_input(&g, "c", KN_DT_BOOL, "3");
  int n = tg_node(&g, KN_OP_COMPRESS, "cp", "x,c", "y");
  tg_attr_i(&g, n, "axis", 0);
  tg_output(&g, "y");
  declare(&g, 0, "1,3");
  pass_fails(&g, "node 'cp' (Compress): input 'condition' has 3 elements, more than the 2");
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "2,3");
  tg_node(&g, KN_OP_NON_ZERO, "nz", "x", "y");
  tg_output(&g, "y");
  declare(&g, 0, "3,2");
  pass_fails(&g, "output 'y' declares shape [3, 2]; NonZero of a rank-2 input gives [2, count]");
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "6");
  tg_node(&g, KN_OP_UNIQUE, "uq", "x", "y,idx");
  tg_output(&g, "y");
  tg_output(&g, "idx");
  declare(&g, 0, "3");
  declare(&g, 1, "4");
  pass_fails(&g, "node 'uq' (Unique): output 1 'idx' declares shape [4]");
  kn_graph_free(&g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(nonzero_declared),    cmocka_unit_test(compress_constant_condition),
      cmocka_unit_test(compress_flat),       cmocka_unit_test(unique_flat),
      cmocka_unit_test(unique_axis_sorted),  cmocka_unit_test(unique_constant),
      cmocka_unit_test(refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
