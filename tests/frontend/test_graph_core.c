/* test_graph_core.c — unit tests of ir/graph/graph.c: the op table generated from
 * ops.def, building graphs (values, nodes, constants, attributes) and shape
 * arithmetic with the batch symbol. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ir/graph/graph.h"

static void test_op_table(void **state) {
  (void)state;
  assert_int_equal(kn_op_from_onnx("Conv"), KN_OP_CONV);
  assert_int_equal(kn_op_from_onnx("LayerNormalization"), KN_OP_LAYER_NORM);
  assert_int_equal(kn_op_from_onnx("Range"), KN_OP_RANGE);
  assert_string_equal(kn_op_name(KN_OP_MATMUL), "MatMul");
  assert_string_equal(kn_op_name(KN_OP_CONV_NHWC), "kiln.ConvNHWC");
  assert_int_equal(kn_op_class_of(KN_OP_CONV), KN_CLASS_CONTRACTION);
  assert_int_equal(kn_op_class_of(KN_OP_RESHAPE), KN_CLASS_VIEW);
  assert_int_equal(kn_op_class_of(KN_OP_SOFTMAX), KN_CLASS_REDUCE);
  assert_int_equal(kn_op_class_of(KN_OP_BATCH_NORM), KN_CLASS_ELEMWISE);
  assert_int_equal(kn_op_class_of(KN_OP_TRANSPOSE), KN_CLASS_INJECTIVE);
  assert_int_equal(kn_op_class_of(KN_OP_SHAPE), KN_CLASS_CONSTANT);
  /* Matching is exact; internal ops are never imported. */
  assert_int_equal(kn_op_from_onnx("conv"), KN_OP_UNKNOWN);
  assert_int_equal(kn_op_from_onnx("NonMaxSuppression"), KN_OP_UNKNOWN);
  assert_int_equal(kn_op_from_onnx(""), KN_OP_UNKNOWN);
  assert_int_equal(kn_op_from_onnx(NULL), KN_OP_UNKNOWN);
  assert_int_equal(kn_op_from_onnx("kiln.ConvNHWC"), KN_OP_UNKNOWN);
  /* Every public op round-trips through its name. */
  int n_public = 0;
  for (int op = 1; op < KN_OP_COUNT; op++) {
    const char *name = kn_op_name((kn_op)op);
    if (strncmp(name, "kiln.", 5) == 0) continue;
    assert_int_equal(kn_op_from_onnx(name), op);
    n_public++;
  }
  assert_true(n_public > 60);
}

static void test_values_nodes(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  assert_int_equal(g.max_batch, 1);
  assert_int_equal(g.n_values, 0);
  /* Enough values to force several reallocations. */
  for (int i = 0; i < 1000; i++) {
    char name[32];
    snprintf(name, sizeof name, "v%d", i);
    assert_int_equal(kn_graph_add_value(&g, name), i);
  }
  assert_int_equal(kn_graph_find_value(&g, "v0"), 0);
  assert_int_equal(kn_graph_find_value(&g, "v999"), 999);
  assert_int_equal(kn_graph_find_value(&g, "v1000"), -1);
  assert_int_equal(g.values[5].dtype, KN_DT_INVALID);
  assert_false(g.values[5].shape_known);
  assert_int_equal(g.values[5].producer, -1);
  assert_null(g.values[5].data);
  int anon = kn_graph_add_value(&g, NULL);
  assert_string_equal(g.values[anon].name, "_v1000");

  int in[3] = {0, -1, 2}, out[2] = {10, 11};
  int n0 = kn_graph_add_node(&g, KN_OP_CLIP, "clip", in, 3, out, 2);
  in[0] = 7; /* arrays are copied */
  assert_int_equal(g.nodes[n0].in[0], 0);
  assert_int_equal(g.nodes[n0].in[1], -1);
  assert_int_equal(g.nodes[n0].n_out, 2);
  assert_int_equal(g.values[10].producer, n0);
  assert_int_equal(g.values[11].producer, n0);
  assert_string_equal(g.nodes[n0].op_type, "Clip");
  assert_string_equal(g.nodes[n0].domain, "");
  assert_string_equal(g.nodes[n0].name, "clip");
  for (int i = 0; i < 100; i++) {
    int o = 100 + i;
    int idx = kn_graph_add_node(&g, KN_OP_RELU, NULL, &o, 1, &o, 1);
    assert_int_equal(idx, 1 + i);
  }
  assert_string_equal(g.nodes[1].name, "Relu_1");
  assert_string_equal(g.nodes[100].name, "Relu_100");
  assert_int_equal(g.values[199].producer, 100);
  assert_false(g.nodes[0].dead);
  kn_graph_free(&g);
}

static void test_constants(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  float w[6] = {1, 2, 3, 4, 5, 6};
  kn_shape s = {.rank = 2, .dim = {2, 3}};
  int c = kn_graph_add_const(&g, "w", KN_DT_F32, &s, w);
  w[0] = 100; /* contents are copied */
  const kn_value *v = &g.values[c];
  assert_true(v->shape_known);
  assert_true(kn_shape_equal(&v->shape, &s));
  assert_int_equal(v->dtype, KN_DT_F32);
  assert_int_equal(v->producer, -1);
  assert_float_equal(((float *)v->data)[0], 1.0f, 0);
  assert_float_equal(((float *)v->data)[5], 6.0f, 0);
  assert_int_equal(kn_value_numel(&g, c), 6);

  kn_shape scalar = {.rank = 0};
  int z = kn_graph_add_const(&g, "z", KN_DT_I64, &scalar, NULL);
  assert_non_null(g.values[z].data);
  assert_int_equal(((int64_t *)g.values[z].data)[0], 0);
  assert_int_equal(kn_value_numel(&g, z), 1);

  kn_shape empty = {.rank = 2, .dim = {0, 4}};
  int e = kn_graph_add_const(&g, "e", KN_DT_U8, &empty, NULL);
  assert_int_equal(kn_value_numel(&g, e), 0);
  kn_graph_free(&g);
}

static void test_attrs(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  int x = kn_graph_add_value(&g, "x"), y = kn_graph_add_value(&g, "y");
  int ni = kn_graph_add_node(&g, KN_OP_CONV, "conv", &x, 1, &y, 1);
  int64_t pads[4] = {1, 2, 3, 4};
  kn_node_add_attr(&g, &g.nodes[ni], (kn_attr){.name = "group", .kind = KN_ATTR_INT, .i = 2});
  kn_node_add_attr(&g, &g.nodes[ni], (kn_attr){.name = "alpha", .kind = KN_ATTR_FLOAT, .f = 0.5f});
  kn_node_add_attr(&g, &g.nodes[ni],
                   (kn_attr){.name = "auto_pad", .kind = KN_ATTR_STRING, .s = "SAME_UPPER"});
  kn_node_add_attr(&g, &g.nodes[ni],
                   (kn_attr){.name = "pads", .kind = KN_ATTR_INTS, .n = 4, .ints = pads});
  const kn_node *n = &g.nodes[ni];
  assert_int_equal(n->n_attr, 4);
  assert_int_equal(kn_node_attr_int(n, "group", 1), 2);
  assert_int_equal(kn_node_attr_int(n, "missing", 7), 7);
  assert_int_equal(kn_node_attr_int(n, "alpha", -1), -1); /* wrong kind: default */
  assert_float_equal(kn_node_attr_float(n, "alpha", 0), 0.5f, 0);
  assert_float_equal(kn_node_attr_float(n, "beta", 1.25f), 1.25f, 0);
  assert_string_equal(kn_node_attr_string(n, "auto_pad", "NOTSET"), "SAME_UPPER");
  assert_string_equal(kn_node_attr_string(n, "mode", "constant"), "constant");
  int count = -1;
  const int64_t *p = kn_node_attr_ints(n, "pads", &count);
  assert_int_equal(count, 4);
  assert_int_equal(p[3], 4);
  assert_null(kn_node_attr_ints(n, "strides", &count));
  assert_int_equal(count, 0);
  assert_null(kn_node_attr_ints(n, "group", NULL));
  assert_non_null(kn_node_attr(n, "pads"));
  assert_null(kn_node_attr(n, "dilations"));
  kn_graph_free(&g);
}

static void test_shapes(void **state) {
  (void)state;
  kn_shape a = {.rank = 3, .dim = {1, 3, 4}, .batch_mask = 1};
  assert_int_equal(kn_shape_numel_max(&a, 1), 12);
  assert_int_equal(kn_shape_numel_max(&a, 16), 192);
  kn_shape b = {.rank = 2, .dim = {4, 2}, .batch_mask = 2}; /* [4, 2N] */
  assert_int_equal(kn_shape_numel_max(&b, 5), 40);
  kn_shape scalar = {.rank = 0};
  assert_int_equal(kn_shape_numel_max(&scalar, 8), 1);
  kn_shape huge = {.rank = 3, .dim = {INT64_C(1) << 31, INT64_C(1) << 31, 4}};
  assert_int_equal(kn_shape_numel_max(&huge, 1), -1);
  kn_shape neg = {.rank = 2, .dim = {2, -1}};
  assert_int_equal(kn_shape_numel_max(&neg, 1), -1);
  kn_shape big_batch = {.rank = 1, .dim = {INT64_C(1) << 40}, .batch_mask = 1};
  assert_int_equal(kn_shape_numel_max(&big_batch, INT64_C(1) << 30), -1);

  kn_shape a2 = a;
  a2.dim[5] = 99; /* beyond rank: ignored */
  assert_true(kn_shape_equal(&a, &a2));
  a2.batch_mask = 0;
  assert_false(kn_shape_equal(&a, &a2));
  a2 = a;
  a2.rank = 2;
  assert_false(kn_shape_equal(&a, &a2));
  a2 = a;
  a2.dim[2] = 5;
  assert_false(kn_shape_equal(&a, &a2));

  kn_graph g;
  kn_graph_init(&g);
  int v = kn_graph_add_value(&g, "x");
  assert_int_equal(kn_value_numel(&g, v), -1); /* shape unknown */
  g.values[v].shape = a;
  g.values[v].shape_known = true;
  assert_int_equal(kn_value_numel(&g, v), 12);
  g.max_batch = 8;
  assert_int_equal(kn_value_numel(&g, v), 96);
  kn_graph_free(&g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_op_table),  cmocka_unit_test(test_values_nodes),
      cmocka_unit_test(test_constants), cmocka_unit_test(test_attrs),
      cmocka_unit_test(test_shapes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
