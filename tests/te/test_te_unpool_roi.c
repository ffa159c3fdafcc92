/* test_te_unpool_roi.c — MaxUnpool and RoiAlign: each compute definition
 * (ir/te/te_ops_unpool_roi.c) against the reference interpreter
 * (ir/ref/ref_eval_unpool_roi.c), plus hand-computed values for the reference
 * and the must-fail case (an adaptive RoiAlign grid). */
#include "tests/te/te_harness.h"

#include <string.h>

#include "ir/ref/ref_eval.h"

/* MaxUnpool of a 2x2/stride-2 pool: the indices as MaxPool makes them (one
 * position per window, flat over the whole [N, C, H, W] unpooled tensor). */
static void test_max_unpool(void **state) {
  (void)state;
  for (int with_shape = 0; with_shape < 2; with_shape++) {
    th t;
    th_init(&t, 22);
    int64_t idx[2 * 3 * 2 * 2];
    for (int64_t n = 0; n < 2; n++)
      for (int64_t c = 0; c < 3; c++)
        for (int64_t i = 0; i < 2; i++)
          for (int64_t j = 0; j < 2; j++) {
            int64_t dy = (n + c + i) % 2, dx = (c + j) % 2; /* the max's place in its window */
            int64_t plane = (n * 3 + c) * 4 * 4;
            idx[((n * 3 + c) * 2 + i) * 2 + j] = plane + (2 * i + dy) * 4 + 2 * j + dx;
          }
    int x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(2, 3, 2, 2), 0, -1, 1);
    int ind = th_const(&t, "i", KN_DT_I64, 4, TH_DIMS(2, 3, 2, 2), idx);
    int shape = with_shape ? th_const_ints(&t, "shape", 4, TH_DIMS(2, 3, 5, 6)) : -1;
    th_node(&t, KN_OP_MAX_UNPOOL, "unpool", TH_INS(x, ind, shape), with_shape ? 3 : 2, 1);
    th_attr_ints(&t, "kernel_shape", 2, TH_DIMS(2, 2));
    th_attr_ints(&t, "strides", 2, TH_DIMS(2, 2));
    th_check(&t, 1);
    th_free(&t);
  }
}

static void test_roi_align(void **state) {
  (void)state;
  const char *modes[] = {"avg", "max"};
  const char *ctms[] = {"half_pixel", "output_half_pixel"};
  for (int m = 0; m < 2; m++)
    for (int k = 0; k < 2; k++)
      for (int ratio = 1; ratio <= 3; ratio += 2) {
        th t;
        th_init(&t, 22);
        int x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(2, 3, 7, 9), 0, -1, 1);
        /* boxes partly outside the image, one degenerate */
        const float boxes[4][4] = {{0.5f, 1.0f, 6.0f, 5.5f}, {-2.0f, -1.0f, 4.0f, 3.0f},
                                   {3.0f, 2.0f, 3.2f, 2.1f}, {5.0f, 4.0f, 12.0f, 9.0f}};
        int rois = th_const(&t, "rois", KN_DT_F32, 2, TH_DIMS(4, 4), boxes);
        int bi = th_const(&t, "bi", KN_DT_I64, 1, TH_DIMS(4), (const int64_t[]){1, 0, 1, 0});
        th_node(&t, KN_OP_ROI_ALIGN, "roi", TH_INS(x, rois, bi), 3, 1);
        th_attr_string(&t, "mode", modes[m]);
        th_attr_string(&t, "coordinate_transformation_mode", ctms[k]);
        th_attr_int(&t, "output_height", 3);
        th_attr_int(&t, "output_width", 4);
        th_attr_int(&t, "sampling_ratio", ratio);
        th_attr_float(&t, "spatial_scale", 0.75f);
        th_check(&t, 1);
        th_free(&t);
      }
}

/* One 1x1 cell covering a 2x2 image exactly, one sample at its centre:
 * the average of the four pixels. */
static void test_roi_align_value(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  kn_diag d;
  kn_diag_init(&d);
  kn_shape xs = {.rank = 4, .dim = {1, 1, 2, 2}}, rs = {.rank = 2, .dim = {1, 4}}, bs = {.rank = 1, .dim = {1}};
  int x = kn_graph_add_const(&g, "x", KN_DT_F32, &xs, (const float[]){1, 2, 3, 4});
  int r = kn_graph_add_const(&g, "r", KN_DT_F32, &rs, (const float[]){0, 0, 2, 2});
  int b = kn_graph_add_const(&g, "b", KN_DT_I64, &bs, (const int64_t[]){0});
  int y = kn_graph_add_value(&g, "y");
  int node = kn_graph_add_node(&g, KN_OP_ROI_ALIGN, "roi", (const int[]){x, r, b}, 3, &y, 1);
  kn_node_add_attr(&g, &g.nodes[node], (kn_attr){.name = "sampling_ratio", .kind = KN_ATTR_INT, .i = 1, .value = -1});
  g.values[y].dtype = KN_DT_F32;
  g.values[y].shape = (kn_shape){.rank = 4, .dim = {1, 1, 1, 1}};
  g.values[y].shape_known = true;
  assert_int_equal(kn_ref_eval_node(&g, node, &d), 0);
  assert_float_equal(((float *)g.values[y].data)[0], 2.5f, 1e-6);
  kn_diag_free(&d);
  kn_graph_free(&g);
}

static void test_roi_align_adaptive_unsupported(void **state) {
  (void)state;
  th t;
  th_init(&t, 22);
  int x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(1, 1, 4, 4), 0, -1, 1);
  int rois = th_input(&t, "rois", KN_DT_F32, 2, TH_DIMS(2, 4), 0, 0, 3);
  int bi = th_const(&t, "bi", KN_DT_I64, 1, TH_DIMS(2), (const int64_t[]){0, 0});
  th_node(&t, KN_OP_ROI_ALIGN, "roi", TH_INS(x, rois, bi), 3, 1);
  th_infer(&t);
  th_expect_unsupported(&t, 0, "sampling_ratio 0");
  th_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_max_unpool),
      cmocka_unit_test(test_roi_align),
      cmocka_unit_test(test_roi_align_value),
      cmocka_unit_test(test_roi_align_adaptive_unsupported),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
