/* test_te_spatial.c — the spatial family (ir/te/te_ops_spatial*.c): Resize in
 * every mode / coordinate transformation / nearest mode, with scales, sizes,
 * axes, keep_aspect_ratio_policy, antialias, exclude_outside, roi and
 * extrapolation; Upsample; ConvTranspose (1-3-D, strides, dilations, pads,
 * groups, output_padding, output_shape, auto_pad, bias); Col2Im;
 * DepthToSpace (DCR, CRD); SpaceToDepth; CenterCropPad; GridSample (all modes
 * and paddings, 2-D and 3-D); AffineGrid. Oracle: the reference interpreter
 * (ir/ref/ref_eval_spatial*.c), on random inputs. Plus bad inputs that must be
 * diagnosed. kiln.ResizeDeclared (scales read at run time) against the
 * reference reading the same scales. */
#include <stdlib.h>
#include <string.h>

#include "ir/shape/shape_infer.h"
#include "tests/te/te_harness.h"

typedef struct resize_cfg {
  const char *mode, *ctm, *nearest;
  int64_t in[4];
  float scales[4]; /* used when sizes[0] == 0 */
  int64_t sizes[4];
  int n_axes;            /* 0: all four */
  int64_t axes[2];
  const char *policy;    /* keep_aspect_ratio_policy or NULL */
  int antialias, exclude_outside;
  float cubic_a;
  float roi[8];          /* tf_crop_and_resize */
} resize_cfg;

static void resize_case(const resize_cfg *k) {
  th t;
  th_init(&t, 19);
  int x = th_input(&t, "x", KN_DT_F32, 4, k->in, 0, -2, 2);
  int na = k->n_axes ? k->n_axes : 4;
  int roi = -1, scales = -1, sizes = -1;
  if (!strcmp(k->ctm, "tf_crop_and_resize"))
    roi = th_const(&t, "roi", KN_DT_F32, 1, TH_DIMS(2 * na), k->roi);
  if (k->sizes[0])
    sizes = th_const_ints(&t, "sizes", na, k->sizes);
  else
    scales = th_const(&t, "scales", KN_DT_F32, 1, TH_DIMS(na), k->scales);
  th_node(&t, KN_OP_RESIZE, "resize", TH_INS(x, roi, scales, sizes), sizes >= 0 ? 4 : 3, 1);
  th_attr_string(&t, "mode", k->mode);
  th_attr_string(&t, "coordinate_transformation_mode", k->ctm);
  if (k->nearest) th_attr_string(&t, "nearest_mode", k->nearest);
  if (k->n_axes) th_attr_ints(&t, "axes", k->n_axes, k->axes);
  if (k->policy) th_attr_string(&t, "keep_aspect_ratio_policy", k->policy);
  if (k->antialias) th_attr_int(&t, "antialias", 1);
  if (k->exclude_outside) th_attr_int(&t, "exclude_outside", 1);
  if (k->cubic_a != 0) th_attr_float(&t, "cubic_coeff_a", k->cubic_a);
  if (roi >= 0) th_attr_float(&t, "extrapolation_value", 7.5f);
  th_check(&t, 1);
  th_free(&t);
}

static void test_resize(void **state) {
  (void)state;
  const resize_cfg cases[] = {
      {"nearest", "half_pixel", NULL, {1, 2, 4, 5}, {1, 1, 2, 1.5f}, {0}, 0, {0}, NULL, 0, 0, 0, {0}},
      {"nearest", "asymmetric", "floor", {1, 1, 5, 6}, {1, 1, 0.6f, 2.5f}, {0}, 0, {0}, NULL, 0, 0, 0, {0}},
      {"nearest", "align_corners", "round_prefer_ceil", {2, 1, 3, 4}, {0}, {2, 1, 7, 9}, 0, {0}, NULL, 0, 0, 0, {0}},
      {"nearest", "pytorch_half_pixel", "ceil", {1, 2, 4, 4}, {0}, {3, 1}, 2, {3, 2}, NULL, 0, 0, 0, {0}},
      {"nearest", "half_pixel", NULL, {1, 1, 4, 6}, {0}, {5, 5}, 2, {2, 3}, "not_larger", 0, 0, 0, {0}},
      {"nearest", "half_pixel", NULL, {1, 1, 4, 6}, {0}, {5, 5}, 2, {2, 3}, "not_smaller", 0, 0, 0, {0}},
      {"linear", "half_pixel", NULL, {1, 2, 4, 5}, {1, 1, 1.7f, 0.6f}, {0}, 0, {0}, NULL, 0, 0, 0, {0}},
      {"linear", "align_corners", NULL, {1, 1, 5, 4}, {1, 1, 2, 2}, {0}, 0, {0}, NULL, 0, 0, 0, {0}},
      {"linear", "half_pixel_symmetric", NULL, {1, 1, 5, 4}, {1, 1, 0.7f, 1.4f}, {0}, 0, {0}, NULL, 0, 0, 0, {0}},
      {"linear", "pytorch_half_pixel", NULL, {1, 1, 8, 8}, {0}, {1, 1, 3, 1}, 0, {0}, NULL, 0, 0, 0, {0}},
      {"linear", "half_pixel", NULL, {1, 2, 9, 8}, {1, 1, 0.4f, 0.6f}, {0}, 0, {0}, NULL, 1, 0, 0, {0}},
      {"cubic", "half_pixel", NULL, {1, 1, 5, 6}, {1, 1, 1.6f, 0.8f}, {0}, 0, {0}, NULL, 0, 0, 0, {0}},
      {"cubic", "asymmetric", NULL, {1, 1, 4, 4}, {1, 1, 2, 2}, {0}, 0, {0}, NULL, 0, 1, -0.5f, {0}},
      {"cubic", "align_corners", NULL, {1, 1, 6, 6}, {0}, {1, 1, 4, 9}, 0, {0}, NULL, 0, 0, 0, {0}},
      {"cubic", "half_pixel", NULL, {1, 1, 9, 10}, {0}, {1, 1, 4, 3}, 0, {0}, NULL, 1, 0, 0, {0}},
      {"linear", "tf_crop_and_resize", NULL, {1, 1, 5, 5}, {1, 1, 0.8f, 0.8f}, {0}, 0, {0}, NULL, 0, 0, 0,
       {0, 0, 0.4f, 0.6f, 1, 1, 0.9f, 1.3f}},
      {"nearest", "tf_crop_and_resize", NULL, {1, 1, 5, 5}, {0}, {3, 3}, 2, {3, 2}, NULL, 0, 0, 0,
       {-0.2f, 0.4f, 1.2f, 0.7f}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) resize_case(&cases[i]);
}

static void test_upsample(void **state) {
  (void)state;
  const char *modes[] = {"nearest", "linear"};
  for (int m = 0; m < 2; m++) {
    th t;
    th_init(&t, 9);
    int x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(1, 2, 3, 4), 1u, -1, 1);
    int s = th_const(&t, "s", KN_DT_F32, 1, TH_DIMS(4), (const float[]){1, 1, 2, 3});
    th_node(&t, KN_OP_UPSAMPLE, "up", TH_INS(x, s), 2, 1);
    th_attr_string(&t, "mode", modes[m]);
    th_check(&t, 2);
    th_free(&t);
  }
}

/* kiln.ResizeDeclared (ir/passes/pass_runtime_resize.c): the scales are a graph
 * input read by the compute definition at run time, the output shape is the
 * output_shape attribute; the reference reads the concrete scales. */
typedef struct declared_cfg {
  const char *mode, *ctm;
  int64_t in[4], out[4];
  float scales[4];
  int n_axes; /* 0: all four */
  int64_t axes[2];
  int legacy, exclude_outside;
  float roi[8]; /* tf_crop_and_resize */
  int64_t sizes[4]; /* run-time sizes instead of scales when sizes[0] != 0 */
  const char *policy;
  int roi_runtime;
} declared_cfg;

static void declared_case(const declared_cfg *k) {
  th t;
  th_init(&t, 19);
  int x = th_input(&t, "x", KN_DT_F32, 4, k->in, 0, -2, 2);
  int na = k->n_axes ? k->n_axes : 4;
  int s = -1, z = -1, roi = -1;
  if (k->sizes[0]) z = th_input_data(&t, "sizes", KN_DT_I64, 1, TH_DIMS(na), 0, k->sizes);
  else s = th_input_data(&t, "scales", KN_DT_F32, 1, TH_DIMS(na), 0, k->scales);
  if (!strcmp(k->ctm, "tf_crop_and_resize"))
    roi = k->roi_runtime ? th_input_data(&t, "roi", KN_DT_F32, 1, TH_DIMS(2 * na), 0, k->roi)
                         : th_const(&t, "roi", KN_DT_F32, 1, TH_DIMS(2 * na), k->roi);
  th_node(&t, KN_OP_RESIZE_DECLARED, "rd", TH_INS(x, roi, s, z), 4, 1);
  if (k->policy) th_attr_string(&t, "keep_aspect_ratio_policy", k->policy);
  th_attr_string(&t, "mode", k->mode);
  if (!k->legacy) th_attr_string(&t, "coordinate_transformation_mode", k->ctm);
  else th_attr_int(&t, "legacy", 1);
  if (k->n_axes) th_attr_ints(&t, "axes", k->n_axes, k->axes);
  if (k->exclude_outside) th_attr_int(&t, "exclude_outside", 1);
  if (roi >= 0) th_attr_float(&t, "extrapolation_value", -3.5f);
  th_attr_ints(&t, "output_shape", 4, k->out);
  th_check(&t, 1);
  th_free(&t);
}

static void test_resize_declared(void **state) {
  (void)state;
  const declared_cfg cases[] = {
      {"nearest", "half_pixel", {1, 2, 4, 5}, {1, 2, 8, 7}, {1, 1.2f, 2, 1.5f}, 0, {0}, 0, 0, {0}, {0}, NULL, 0},
      /* legacy: scales below */
      {"nearest", "asymmetric", {1, 2, 4, 5}, {1, 2, 9, 3}, {0}, 0, {0}, 1, 0, {0}, {0}, NULL, 0},
      {"linear", "align_corners", {2, 1, 5, 4}, {2, 1, 9, 10}, {1, 1, 1.9f, 2.6f}, 0, {0}, 0, 0, {0}, {0}, NULL, 0},
      {"linear", "pytorch_half_pixel", {1, 1, 4, 6}, {1, 1, 1, 3}, {1, 1, 0.25f, 0.5f}, 0, {0}, 0, 0, {0}, {0}, NULL,
       0},
      {"linear", "half_pixel_symmetric", {1, 3, 5, 4}, {1, 3, 8, 2}, {1.6f, 0.7f}, 2, {2, 3}, 0, 0, {0}, {0}, NULL, 0},
      {"cubic", "half_pixel", {1, 1, 6, 5}, {1, 1, 4, 11}, {2.3f, 0.7f}, 2, {3, 2}, 0, 1, {0}, {0}, NULL, 0},
      {"linear", "tf_crop_and_resize", {1, 1, 5, 5}, {1, 1, 4, 4}, {1, 1, 0.8f, 0.95f}, 0, {0}, 0, 0,
       {0, 0, 0.4f, -0.2f, 1, 1, 0.9f, 1.3f}, {0}, NULL, 0},
      /* run-time sizes (keep_aspect_ratio_policy) and roi */
      {"nearest", "half_pixel", {1, 2, 4, 6}, {1, 2, 2, 3}, {0}, 2, {2, 3}, 0, 0, {0}, {2, 5}, "not_larger", 0},
      {"cubic", "align_corners", {1, 1, 2, 3}, {1, 1, 6, 9}, {0}, 2, {3, 2}, 0, 0, {0}, {2, 6}, "not_smaller", 0},
      {"linear", "tf_crop_and_resize", {1, 1, 5, 5}, {1, 1, 4, 3}, {0}, 2, {2, 3}, 0, 0, {0.1f, -0.2f, 0.9f, 1.3f},
       {4, 3}, NULL, 1},
      {"cubic", "tf_crop_and_resize", {1, 1, 5, 5}, {1, 1, 4, 4}, {1, 1, 0.8f, 0.95f}, 0, {0}, 0, 1,
       {0, 0, 0.4f, -0.2f, 1, 1, 0.9f, 1.3f}, {0}, NULL, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    declared_cfg k = cases[i];
    if (k.legacy) memcpy(k.scales, (const float[]){1, 1, 2.3f, 0.7f}, sizeof k.scales);
    declared_case(&k);
  }
}

typedef struct convt_cfg {
  int nsp;
  int64_t n, c, m, group, in[3], k[3], stride[3], dil[3], pads[6], opad[3], oshape[3];
  const char *auto_pad;
  bool bias;
} convt_cfg;

static void convt_case(const convt_cfg *k) {
  th t;
  th_init(&t, 17);
  int r = 2 + k->nsp;
  int64_t xd[5] = {k->n, k->c}, wd[5] = {k->c, k->m / k->group};
  for (int i = 0; i < k->nsp; i++) xd[2 + i] = k->in[i], wd[2 + i] = k->k[i];
  int x = th_input(&t, "x", KN_DT_F32, r, xd, 0, -1, 1);
  int w = th_const_rand(&t, "w", KN_DT_F32, r, wd, -1, 1);
  int b = k->bias ? th_const_rand(&t, "b", KN_DT_F32, 1, TH_DIMS(k->m), -1, 1) : -1;
  th_node(&t, KN_OP_CONV_TRANSPOSE, "ct", TH_INS(x, w, b), k->bias ? 3 : 2, 1);
  th_attr_ints(&t, "strides", k->nsp, k->stride);
  th_attr_ints(&t, "dilations", k->nsp, k->dil);
  th_attr_int(&t, "group", k->group);
  if (k->auto_pad) th_attr_string(&t, "auto_pad", k->auto_pad);
  else th_attr_ints(&t, "pads", 2 * k->nsp, k->pads);
  if (k->opad[0]) th_attr_ints(&t, "output_padding", k->nsp, k->opad);
  if (k->oshape[0]) th_attr_ints(&t, "output_shape", k->nsp, k->oshape);
  th_check(&t, 1);
  th_free(&t);
}

static void test_conv_transpose(void **state) {
  (void)state;
  const convt_cfg cases[] = {
      {2, 1, 3, 4, 1, {4, 5}, {3, 3}, {1, 1}, {1, 1}, {0}, {0}, {0}, NULL, true},
      {2, 2, 4, 6, 2, {3, 4}, {3, 2}, {2, 3}, {1, 2}, {1, 0, 0, 1}, {1, 1}, {0}, NULL, false},
      {1, 1, 2, 3, 1, {5}, {4}, {3}, {2}, {2, 1}, {0}, {0}, NULL, true},
      {3, 1, 2, 2, 2, {2, 3, 2}, {2, 2, 3}, {2, 1, 2}, {1, 1, 1}, {0}, {0}, {0}, NULL, false},
      {2, 1, 2, 2, 1, {3, 3}, {3, 3}, {2, 2}, {1, 1}, {0}, {0}, {0}, "SAME_UPPER", false},
      {2, 1, 2, 2, 1, {3, 3}, {3, 3}, {2, 2}, {1, 1}, {0}, {0}, {0}, "SAME_LOWER", true},
      {2, 1, 1, 2, 1, {3, 3}, {3, 3}, {3, 2}, {1, 1}, {0}, {0}, {10, 8}, NULL, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) convt_case(&cases[i]);
}

static void test_col2im(void **state) {
  (void)state;
  th t;
  th_init(&t, 18);
  /* image 5x6, block 2x3, strides 1x2, dilations 2x1, pads 1 0 0 1 */
  /* blocks: h: (5+1+0-2-1)/1+1 = 4, w: (6+0+1-2-1)/2+1 = 3 */
  int x = th_input(&t, "x", KN_DT_F32, 3, TH_DIMS(2, 2 * 6, 12), 0, -1, 1);
  int img = th_const_ints(&t, "img", 2, TH_DIMS(5, 6));
  int blk = th_const_ints(&t, "blk", 2, TH_DIMS(2, 3));
  th_node(&t, KN_OP_COL2IM, "c2i", TH_INS(x, img, blk), 3, 1);
  th_attr_ints(&t, "strides", 2, TH_DIMS(1, 2));
  th_attr_ints(&t, "dilations", 2, TH_DIMS(2, 1));
  th_attr_ints(&t, "pads", 4, TH_DIMS(1, 0, 0, 1));
  th_check(&t, 1);
  th_free(&t);
}

static void test_rearrange(void **state) {
  (void)state;
  for (int m = 0; m < 3; m++) {
    th t;
    th_init(&t, 13);
    int x = th_input(&t, "x", KN_DT_F32, 4, m < 2 ? TH_DIMS(2, 8, 3, 2) : TH_DIMS(1, 3, 4, 6), 0, -1, 1);
    th_node(&t, m < 2 ? KN_OP_DEPTH_TO_SPACE : KN_OP_SPACE_TO_DEPTH, "ds", TH_INS(x), 1, 1);
    th_attr_int(&t, "blocksize", 2);
    if (m == 1) th_attr_string(&t, "mode", "CRD");
    th_check(&t, 1);
    th_free(&t);
  }
  /* CenterCropPad: crop one axis, pad another (odd differences), keep one */
  th t;
  th_init(&t, 18);
  int x = th_input(&t, "x", KN_DT_F32, 3, TH_DIMS(5, 4, 3), 0, -1, 1);
  int sh = th_const_ints(&t, "shape", 2, TH_DIMS(2, 7));
  th_node(&t, KN_OP_CENTER_CROP_PAD, "ccp", TH_INS(x, sh), 2, 1);
  th_attr_ints(&t, "axes", 2, TH_DIMS(0, -2));
  th_check(&t, 1);
  th_free(&t);
}

static void test_grid_sample(void **state) {
  (void)state;
  const char *modes[] = {"nearest", "linear", "cubic"};
  const char *pads[] = {"zeros", "border", "reflection"};
  for (int nsp = 2; nsp <= 3; nsp++)
    for (int m = 0; m < 3; m++)
      for (int p = 0; p < 3; p++)
        for (int align = 0; align < 2; align++) {
          th t;
          th_init(&t, 22);
          int x = th_input(&t, "x", KN_DT_F32, 2 + nsp, nsp == 2 ? TH_DIMS(2, 2, 4, 5) : TH_DIMS(1, 2, 3, 4, 3), 0, -1, 1);
          int g = th_input(&t, "grid", KN_DT_F32, 2 + nsp, nsp == 2 ? TH_DIMS(2, 3, 6, 2) : TH_DIMS(1, 2, 3, 4, 3), 0,
                           -1.6, 1.6);
          th_node(&t, KN_OP_GRID_SAMPLE, "gs", TH_INS(x, g), 2, 1);
          th_attr_string(&t, "mode", modes[m]);
          th_attr_string(&t, "padding_mode", pads[p]);
          th_attr_int(&t, "align_corners", align);
          th_check(&t, 1);
          th_free(&t);
        }
}

static void test_affine_grid(void **state) {
  (void)state;
  for (int nsp = 2; nsp <= 3; nsp++)
    for (int align = 0; align < 2; align++) {
      th t;
      th_init(&t, 20);
      int theta = th_input(&t, "theta", KN_DT_F32, 3, TH_DIMS(2, nsp, nsp + 1), 0, -1, 1);
      int size = nsp == 2 ? th_const_ints(&t, "size", 4, TH_DIMS(2, 3, 4, 5)) : th_const_ints(&t, "size", 5, TH_DIMS(2, 1, 3, 2, 4));
      th_node(&t, KN_OP_AFFINE_GRID, "ag", TH_INS(theta, size), 2, 1);
      th_attr_int(&t, "align_corners", align);
      th_check(&t, 1);
      th_free(&t);
    }
}

/* Bad inputs get one diagnostic naming the node, never a crash. */
static void test_bad_inputs(void **state) {
  (void)state;
  th t;
  th_init(&t, 19); /* scales that are a runtime input */
  int x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(1, 1, 2, 2), 0, -1, 1);
  int s = th_input(&t, "s", KN_DT_F32, 1, TH_DIMS(4), 0, 1, 2);
  th_node(&t, KN_OP_RESIZE, "r", TH_INS(x, -1, s), 3, 1);
  th_expect_infer_error(&t, "scales) must be a constant");
  th_free(&t);

  th_init(&t, 19); /* kiln.ResizeDeclared: output_shape changes an axis scales do not list */
  x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(1, 1, 2, 2), 0, -1, 1);
  s = th_input(&t, "s", KN_DT_F32, 1, TH_DIMS(2), 0, 1, 2);
  th_node(&t, KN_OP_RESIZE_DECLARED, "rd", TH_INS(x, -1, s), 3, 1);
  th_attr_ints(&t, "axes", 2, (const int64_t[]){2, 3});
  th_attr_ints(&t, "output_shape", 4, (const int64_t[]){1, 2, 4, 4});
  th_expect_infer_error(&t, "node 'rd' (kiln.ResizeDeclared): output_shape changes an axis not resized (1)");
  th_free(&t);

  th_init(&t, 19); /* kiln.ResizeDeclared: antialias needs the scale at compile time */
  x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(1, 1, 2, 2), 0, -1, 1);
  s = th_input(&t, "s", KN_DT_F32, 1, TH_DIMS(4), 0, 1, 2);
  th_node(&t, KN_OP_RESIZE_DECLARED, "rd", TH_INS(x, -1, s), 3, 1);
  th_attr_string(&t, "mode", "linear");
  th_attr_int(&t, "antialias", 1);
  th_attr_ints(&t, "output_shape", 4, (const int64_t[]){1, 1, 4, 4});
  th_expect_infer_error(&t, "antialias needs constant scales");
  th_free(&t);

  th_init(&t, 19); /* kiln.ResizeDeclared: scales of the wrong count */
  x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(1, 1, 2, 2), 0, -1, 1);
  s = th_input(&t, "s", KN_DT_F32, 1, TH_DIMS(3), 0, 1, 2);
  th_node(&t, KN_OP_RESIZE_DECLARED, "rd", TH_INS(x, -1, s), 3, 1);
  th_attr_ints(&t, "output_shape", 4, (const int64_t[]){1, 1, 4, 4});
  th_expect_infer_error(&t, "scales must be a float tensor of 4 entries");
  th_free(&t);

  th_init(&t, 19); /* unknown mode */
  x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(1, 1, 2, 2), 0, -1, 1);
  s = th_const(&t, "s", KN_DT_F32, 1, TH_DIMS(4), (const float[]){1, 1, 2, 2});
  th_node(&t, KN_OP_RESIZE, "r", TH_INS(x, -1, s), 3, 1);
  th_attr_string(&t, "mode", "bilinearish");
  th_expect_infer_error(&t, "unknown mode 'bilinearish'");
  th_free(&t);

  th_init(&t, 19); /* scales with the wrong count */
  x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(1, 1, 2, 2), 0, -1, 1);
  s = th_const(&t, "s", KN_DT_F32, 1, TH_DIMS(2), (const float[]){2, 2});
  th_node(&t, KN_OP_RESIZE, "r", TH_INS(x, -1, s), 3, 1);
  th_expect_infer_error(&t, "scales must hold one float per resized axis");
  th_free(&t);

  th_init(&t, 17); /* ConvTranspose weight channels that do not match */
  x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(1, 3, 4, 4), 0, -1, 1);
  int w = th_const_rand(&t, "w", KN_DT_F32, 4, TH_DIMS(2, 2, 3, 3), -1, 1);
  th_node(&t, KN_OP_CONV_TRANSPOSE, "ct", TH_INS(x, w), 2, 1);
  th_expect_infer_error(&t, "node 'ct' (ConvTranspose): group 1 with 3 input channels");
  th_free(&t);

  th_init(&t, 13); /* DepthToSpace channels not a multiple of blocksize^2 */
  x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(1, 6, 2, 2), 0, -1, 1);
  th_node(&t, KN_OP_DEPTH_TO_SPACE, "d2s", TH_INS(x), 1, 1);
  th_attr_int(&t, "blocksize", 2);
  th_expect_infer_error(&t, "not a multiple of blocksize^2");
  th_free(&t);

  th_init(&t, 22); /* GridSample: an unknown padding_mode is a shape error, so `kiln inspect` reports it */
  x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(1, 1, 2, 2), 0, -1, 1);
  int g = th_input(&t, "grid", KN_DT_F32, 4, TH_DIMS(1, 2, 2, 2), 0, -1, 1);
  th_node(&t, KN_OP_GRID_SAMPLE, "gs", TH_INS(x, g), 2, 1);
  th_attr_string(&t, "padding_mode", "mirror");
  th_expect_infer_error(&t, "node 'gs' (GridSample): attribute padding_mode 'mirror'");
  th_free(&t);

  th_init(&t, 18); /* CenterCropPad: an axis named twice (-1 and 3) */
  x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(1, 1, 4, 4), 0, -1, 1);
  s = th_const_ints(&t, "shape", 2, (const int64_t[]){2, 3});
  th_node(&t, KN_OP_CENTER_CROP_PAD, "ccp", TH_INS(x, s), 2, 1);
  th_attr_ints(&t, "axes", 2, (const int64_t[]){-1, 3});
  th_expect_infer_error(&t, "node 'ccp' (CenterCropPad): axis 3 is repeated");
  th_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_resize),       cmocka_unit_test(test_upsample),
      cmocka_unit_test(test_resize_declared),
      cmocka_unit_test(test_conv_transpose), cmocka_unit_test(test_col2im),
      cmocka_unit_test(test_rearrange),    cmocka_unit_test(test_grid_sample),
      cmocka_unit_test(test_affine_grid),  cmocka_unit_test(test_bad_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
