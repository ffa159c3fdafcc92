/* test_te_shape.c — data movement and views (te_ops_shape.c): Transpose,
 * Concat, Slice (negative / clamped / stepped, input and attribute forms),
 * Split (every output), Gather (constant and tensor indices, negative
 * wrap), Expand, Pad (constant / edge / reflect / wrap, negative pads),
 * Tile, Reshape, Flatten, Squeeze, Unsqueeze. Oracle: kn_ref_run_graph. */
#include <string.h>

#include "tests/te/te_harness.h"

static void test_transpose(void **state) {
  (void)state;
  const int64_t perms[][4] = {{0, 2, 3, 1}, {0, 3, 1, 2}, {3, 2, 1, 0}, {1, 0, 2, 3}};
  for (int i = 0; i < 4; i++) {
    th t;
    th_init(&t, 17);
    int x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(2, 3, 4, 5), 1u, -2, 2);
    th_node(&t, KN_OP_TRANSPOSE, "tr", &x, 1, 1);
    th_attr_ints(&t, "perm", 4, perms[i]);
    th_check(&t, 2);
    th_free(&t);
  }
  th t; /* default perm: reverse */
  th_init(&t, 17);
  int x = th_input(&t, "x", KN_DT_I64, 3, TH_DIMS(2, 3, 4), 0, -9, 9);
  th_node(&t, KN_OP_TRANSPOSE, "tr", &x, 1, 1);
  th_check(&t, 1);
  th_free(&t);
}

static void test_concat(void **state) {
  (void)state;
  for (int axis = -3; axis < 3; axis++) {
    th t;
    th_init(&t, 17);
    int a = th_input(&t, "a", KN_DT_F32, 3, TH_DIMS(2, 3, 4), 0, -2, 2);
    int64_t db[3] = {2, 3, 4}, dc[3] = {2, 3, 4};
    int ax = axis < 0 ? axis + 3 : axis;
    db[ax] = 1, dc[ax] = 5;
    int b = th_input(&t, "b", KN_DT_F32, 3, db, 0, -2, 2);
    int c = th_const_rand(&t, "c", KN_DT_F32, 3, dc, -2, 2);
    th_node(&t, KN_OP_CONCAT, "cat", TH_INS(a, b, c), 3, 1);
    th_attr_int(&t, "axis", axis);
    th_check(&t, 1);
    th_free(&t);
  }
  th t; /* along a non-batch axis of batched inputs, and a single input */
  th_init(&t, 17);
  int a = th_input(&t, "a", KN_DT_F32, 2, TH_DIMS(1, 3), 1u, -2, 2);
  int b = th_input(&t, "b", KN_DT_F32, 2, TH_DIMS(1, 2), 1u, -2, 2);
  th_node(&t, KN_OP_CONCAT, "cat", TH_INS(a, b), 2, 1);
  th_attr_int(&t, "axis", 1);
  th_check(&t, 3);
  th_free(&t);
  th_init(&t, 17);
  a = th_input(&t, "a", KN_DT_F32, 2, TH_DIMS(1, 3), 1u, -2, 2);
  th_node(&t, KN_OP_CONCAT, "cat", &a, 1, 1);
  th_attr_int(&t, "axis", 0);
  th_check(&t, 2);
  th_free(&t);
}

static void slice_case(int n, const int64_t *starts, const int64_t *ends, const int64_t *axes,
                       const int64_t *steps) {
  th t;
  th_init(&t, 13);
  int x = th_input(&t, "x", KN_DT_F32, 3, TH_DIMS(5, 6, 7), 0, -2, 2);
  int ins[5] = {x, th_const_ints(&t, "starts", n, starts), th_const_ints(&t, "ends", n, ends), -1,
                -1};
  if (axes) ins[3] = th_const_ints(&t, "axes", n, axes);
  if (steps) ins[4] = th_const_ints(&t, "steps", n, steps);
  th_node(&t, KN_OP_SLICE, "slice", ins, steps ? 5 : axes ? 4 : 3, 1);
  th_check(&t, 1);
  th_free(&t);
}

static void test_slice(void **state) {
  (void)state;
  const int64_t big = INT64_MAX, small = INT64_MIN;
  slice_case(1, TH_DIMS(1), TH_DIMS(4), NULL, NULL);
  slice_case(2, TH_DIMS(-3, 0), TH_DIMS(big, -1), TH_DIMS(2, 1), NULL);
  slice_case(1, TH_DIMS(-1), TH_DIMS(small), TH_DIMS(1), TH_DIMS(-1)); /* reverse */
  slice_case(1, TH_DIMS(5), TH_DIMS(0), TH_DIMS(-1), TH_DIMS(-2));
  slice_case(3, TH_DIMS(0, 1, 100), TH_DIMS(5, 6, -100), TH_DIMS(0, 1, 2), TH_DIMS(2, 3, -3));
  slice_case(1, TH_DIMS(-100), TH_DIMS(100), TH_DIMS(0), TH_DIMS(4));
  slice_case(1, TH_DIMS(2), TH_DIMS(2), TH_DIMS(1), NULL); /* empty */
  {                                                        /* opset 9: attributes */
    th t;
    th_init(&t, 9);
    int x = th_input(&t, "x", KN_DT_F32, 2, TH_DIMS(5, 6), 0, -2, 2);
    th_node(&t, KN_OP_SLICE, "slice", &x, 1, 1);
    th_attr_ints(&t, "starts", 2, TH_DIMS(1, -4));
    th_attr_ints(&t, "ends", 2, TH_DIMS(-1, 1000));
    th_check(&t, 1);
    th_free(&t);
  }
  { /* a batch axis taken whole, next to a sliced one */
    th t;
    th_init(&t, 13);
    int x = th_input(&t, "x", KN_DT_F32, 2, TH_DIMS(2, 6), 1u, -2, 2);
    int s = th_const_ints(&t, "s", 2, TH_DIMS(0, 1));
    int e = th_const_ints(&t, "e", 2, TH_DIMS(big, 5));
    th_node(&t, KN_OP_SLICE, "slice", TH_INS(x, s, e), 3, 1);
    th_check(&t, 3);
    th_free(&t);
  }
}

static void test_split(void **state) {
  (void)state;
  { /* split as input (opset 13), uneven */
    th t;
    th_init(&t, 13);
    int x = th_input(&t, "x", KN_DT_F32, 3, TH_DIMS(2, 7, 3), 1u, -2, 2);
    int sp = th_const_ints(&t, "split", 3, TH_DIMS(2, 4, 1));
    th_node(&t, KN_OP_SPLIT, "split", TH_INS(x, sp), 2, 3);
    th_attr_int(&t, "axis", 1);
    th_check(&t, 2);
    th_free(&t);
  }
  { /* equal split along the last axis, attribute-free */
    th t;
    th_init(&t, 13);
    int x = th_input(&t, "x", KN_DT_I64, 2, TH_DIMS(3, 8), 0, -9, 9);
    th_node(&t, KN_OP_SPLIT, "split", &x, 1, 4);
    th_attr_int(&t, "axis", -1);
    th_check(&t, 1);
    th_free(&t);
  }
  { /* opset 11: split attribute */
    th t;
    th_init(&t, 11);
    int x = th_input(&t, "x", KN_DT_F32, 2, TH_DIMS(6, 3), 0, -2, 2);
    th_node(&t, KN_OP_SPLIT, "split", &x, 1, 2);
    th_attr_ints(&t, "split", 2, TH_DIMS(1, 5));
    th_check(&t, 1);
    th_free(&t);
  }
}

static void test_gather(void **state) {
  (void)state;
  for (int axis = 0; axis < 3; axis++) {
    th t; /* tensor indices with negatives */
    th_init(&t, 13);
    int x = th_input(&t, "x", KN_DT_F32, 3, TH_DIMS(4, 5, 6), 0, -2, 2);
    int64_t dim = axis == 0 ? 4 : axis == 1 ? 5 : 6;
    int idx = th_input(&t, "idx", KN_DT_I64, 2, TH_DIMS(2, 3), 0, (double)-dim, (double)dim - 1);
    th_node(&t, KN_OP_GATHER, "gather", TH_INS(x, idx), 2, 1);
    th_attr_int(&t, "axis", axis);
    th_check(&t, 1);
    th_free(&t);
  }
  { /* int32 indices, batch data */
    th t;
    th_init(&t, 13);
    int x = th_input(&t, "x", KN_DT_F32, 2, TH_DIMS(1, 7), 1u, -2, 2);
    int idx = th_input(&t, "idx", KN_DT_I32, 1, TH_DIMS(5), 0, -7, 6);
    th_node(&t, KN_OP_GATHER, "gather", TH_INS(x, idx), 2, 1);
    th_attr_int(&t, "axis", 1);
    th_check(&t, 2);
    th_free(&t);
  }
  for (int k = -3; k < 3; k += 2) { /* constant scalar index (CLS-token style) */
    th t;
    th_init(&t, 13);
    int x = th_input(&t, "x", KN_DT_F32, 3, TH_DIMS(1, 3, 4), 1u, -2, 2);
    int idx = th_const_scalar(&t, "idx", KN_DT_I64, k);
    th_node(&t, KN_OP_GATHER, "gather", TH_INS(x, idx), 2, 1);
    th_attr_int(&t, "axis", 1);
    th_check(&t, 2);
    kn_te_tensor *y = th_te(&t, 0);
    int64_t v;
    assert_true(kn_e_is_const_int(y->body->u.load.indices[1], &v) && v == (k < 0 ? k + 3 : k));
    th_free(&t);
  }
}

static void test_expand_tile(void **state) {
  (void)state;
  {
    th t;
    th_init(&t, 13);
    int x = th_input(&t, "x", KN_DT_F32, 2, TH_DIMS(3, 1), 0, -2, 2);
    int shp = th_const_ints(&t, "shape", 3, TH_DIMS(2, 1, 4));
    th_node(&t, KN_OP_EXPAND, "expand", TH_INS(x, shp), 2, 1);
    th_check(&t, 1);
    th_free(&t);
  }
  {
    th t;
    th_init(&t, 13);
    int x = th_input(&t, "x", KN_DT_I64, 3, TH_DIMS(2, 1, 3), 0, -9, 9);
    int shp = th_const_ints(&t, "shape", 3, TH_DIMS(1, 4, 1));
    th_node(&t, KN_OP_EXPAND, "expand", TH_INS(x, shp), 2, 1);
    th_check(&t, 1);
    th_free(&t);
  }
  {
    th t;
    th_init(&t, 13);
    int x = th_input(&t, "x", KN_DT_F32, 3, TH_DIMS(2, 3, 2), 0, -2, 2);
    int rep = th_const_ints(&t, "repeats", 3, TH_DIMS(2, 1, 3));
    th_node(&t, KN_OP_TILE, "tile", TH_INS(x, rep), 2, 1);
    th_check(&t, 1);
    th_free(&t);
  }
}

static void pad_case(const char *mode, int64_t opset, const int64_t *pads, bool value,
                     bool with_axes) {
  th t;
  th_init(&t, opset);
  int x = th_input(&t, "x", KN_DT_F32, 3, TH_DIMS(2, 4, 5), 0, -2, 2);
  if (opset < 11) {
    th_node(&t, KN_OP_PAD, "pad", &x, 1, 1);
    th_attr_ints(&t, "pads", 6, pads);
    if (value) th_attr_float(&t, "value", 1.5f);
  } else {
    int ins[4] = {x, -1, -1, -1};
    int np = with_axes ? 4 : 6;
    ins[1] = th_const_ints(&t, "pads", np, pads);
    if (value) ins[2] = th_const_scalar(&t, "cv", KN_DT_F32, -0.5);
    if (with_axes) ins[3] = th_const_ints(&t, "axes", 2, TH_DIMS(-1, 1));
    th_node(&t, KN_OP_PAD, "pad", ins, with_axes ? 4 : value ? 3 : 2, 1);
  }
  th_attr_string(&t, "mode", mode);
  th_check(&t, 1);
  th_free(&t);
}

static void test_pad(void **state) {
  (void)state;
  const int64_t p1[6] = {0, 1, 2, 1, 2, 3};
  const int64_t p2[6] = {1, -1, 2, 0, 3, -2}; /* negative = crop */
  pad_case("constant", 13, p1, false, false);
  pad_case("constant", 13, p1, true, false);
  pad_case("constant", 13, p2, true, false);
  pad_case("edge", 13, p1, false, false);
  pad_case("reflect", 13, p1, false, false);
  pad_case("reflect", 13, p2, false, false);
  pad_case("constant", 2, p1, true, false);
  pad_case("constant", 18, TH_DIMS(2, 1, 0, 3), true, true);
  pad_case("edge", 18, TH_DIMS(2, 1, 0, 3), false, true);
  { /* batched input, padding the other axes */
    th t;
    th_init(&t, 13);
    int x = th_input(&t, "x", KN_DT_F32, 2, TH_DIMS(1, 4), 1u, -2, 2);
    int pads = th_const_ints(&t, "pads", 4, TH_DIMS(0, 2, 0, 1));
    th_node(&t, KN_OP_PAD, "pad", TH_INS(x, pads), 2, 1);
    th_check(&t, 3);
    th_free(&t);
  }
}

static void view_case(kn_op op, int64_t opset, int rank, const int64_t *dims, uint32_t mask,
                      int n_shape, const int64_t *shape, int64_t axis, bool attr_axes) {
  th t;
  th_init(&t, opset);
  int x = th_input(&t, "x", KN_DT_F32, rank, dims, mask, -2, 2);
  int ins[2] = {x, -1};
  if (op == KN_OP_RESHAPE ||
      ((op == KN_OP_SQUEEZE || op == KN_OP_UNSQUEEZE) && n_shape && !attr_axes))
    ins[1] = th_const_ints(&t, "shape", n_shape, shape);
  th_node(&t, op, kn_op_name(op), ins, ins[1] >= 0 ? 2 : 1, 1);
  if (op == KN_OP_FLATTEN) th_attr_int(&t, "axis", axis);
  if (attr_axes) th_attr_ints(&t, "axes", n_shape, shape);
  th_check(&t, mask ? 2 : 1);
  th_free(&t);
}

static void test_views(void **state) {
  (void)state;
  view_case(KN_OP_RESHAPE, 13, 3, TH_DIMS(2, 3, 4), 0, 2, TH_DIMS(4, 6), 0, false);
  view_case(KN_OP_RESHAPE, 13, 3, TH_DIMS(2, 3, 4), 0, 3, TH_DIMS(3, -1, 2), 0, false);
  view_case(KN_OP_RESHAPE, 13, 3, TH_DIMS(1, 6, 4), 1u, 3, TH_DIMS(0, 4, -1), 0, false);
  view_case(KN_OP_RESHAPE, 13, 4, TH_DIMS(1, 2, 3, 4), 1u, 3, TH_DIMS(0, 6, 4), 0, false);
  view_case(KN_OP_RESHAPE, 13, 2, TH_DIMS(1, 12), 1u, 4, TH_DIMS(0, 3, 2, 2), 0, false);
  view_case(KN_OP_FLATTEN, 13, 4, TH_DIMS(1, 3, 1, 1), 1u, 0, NULL, 1, false);
  view_case(KN_OP_FLATTEN, 13, 4, TH_DIMS(2, 3, 4, 5), 0, 0, NULL, 2, false);
  view_case(KN_OP_FLATTEN, 13, 3, TH_DIMS(2, 3, 4), 0, 0, NULL, 0, false);
  view_case(KN_OP_SQUEEZE, 13, 4, TH_DIMS(1, 3, 1, 1), 1u, 2, TH_DIMS(2, 3), 0, false);
  view_case(KN_OP_SQUEEZE, 11, 4, TH_DIMS(1, 3, 1, 1), 0, 1, TH_DIMS(-1), 0, true);
  view_case(KN_OP_SQUEEZE, 13, 3, TH_DIMS(1, 3, 1), 0, 0, NULL, 0, false);
  view_case(KN_OP_UNSQUEEZE, 13, 2, TH_DIMS(2, 3), 1u, 2, TH_DIMS(0, 3), 0, false);
  view_case(KN_OP_UNSQUEEZE, 11, 2, TH_DIMS(2, 3), 0, 2, TH_DIMS(1, -1), 0, true);
}

static void test_shape_unsupported(void **state) {
  (void)state;
  th t;
  th_init(&t, 13);
  int x = th_input(&t, "x", KN_DT_F32, 1, TH_DIMS(5), 0, -2, 2);
  int pads = th_const_ints(&t, "pads", 2, TH_DIMS(1, 1));
  th_node(&t, KN_OP_PAD, "pad", TH_INS(x, pads), 2, 1);
  th_attr_string(&t, "mode", "mirror");
  kn_value *y = &t.g.values[t.g.nodes[t.node].out[0]];
  y->dtype = KN_DT_F32, y->shape.rank = 1, y->shape.dim[0] = 7, y->shape_known = true;
  kn_te_tensor *te = th_te(&t, 0);
  assert_null(te);
  assert_non_null(
      strstr(t.d.lines[t.d.count - 1], "node 'pad' (Pad): mode 'mirror' not supported"));
  th_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_transpose),
      cmocka_unit_test(test_concat),
      cmocka_unit_test(test_slice),
      cmocka_unit_test(test_split),
      cmocka_unit_test(test_gather),
      cmocka_unit_test(test_expand_tile),
      cmocka_unit_test(test_pad),
      cmocka_unit_test(test_views),
      cmocka_unit_test(test_shape_unsupported),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
