/* test_decompose_deform.c — DeformConv (ir/passes/pass_decompose_deform.c): the
 * decomposed graph, run by the reference interpreter, against a naive loop
 * written here from the ONNX definition (bilinear sampling with zeros
 * outside the image, mask, grouped contraction, bias), over groups, offset
 * groups, strides, dilations, asymmetric pads, a symbolic batch and offsets
 * large enough to leave the image; float, double and float16. Must-fail cases
 * check the one-line diagnostic. The compiled kernels are checked by the
 * conformance runner (ONNX node tests) and tests/models/edge_models.py
 * (ONNX Runtime). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/graph/graph_util.h"

typedef struct deform_case {
  int64_t batch, chans, height, width, out_chans, kh, kw, group, offset_group;
  int64_t stride[2], dilation[2], pads[4];
  bool mask, bias, symbolic; /* symbolic: X, offset, mask are [N*1, ...] run at N = batch */
  double offset_scale;       /* offsets uniform in [-scale, scale] */
  kn_dtype dtype;
} deform_case;

static double uniform(unsigned *state, double lo, double hi) { return lo + (hi - lo) * (tg_randf(state) + 1) / 2; }

/* X[n, c] bilinearly at (y, x), zero outside. */
static double sample(const double *img, int64_t h, int64_t w, double y, double x) {
  double y0 = floor(y), x0 = floor(x), sum = 0;
  for (int r = 0; r < 2; r++)
    for (int s = 0; s < 2; s++) {
      double yy = y0 + r, xx = x0 + s;
      if (yy < 0 || yy > (double)(h - 1) || xx < 0 || xx > (double)(w - 1)) continue;
      double wy = r ? y - y0 : 1 - (y - y0), wx = s ? x - x0 : 1 - (x - x0);
      sum += wy * wx * img[(int64_t)yy * w + (int64_t)xx];
    }
  return sum;
}

/* The naive DeformConv of the ONNX definition, in double. */
static void naive(const deform_case *k, int64_t oh, int64_t ow, const double *x, const double *w, const double *off,
                  const double *b, const double *mask, double *y) {
  int64_t cpg = k->chans / k->group, mpg = k->out_chans / k->group, cpo = k->chans / k->offset_group;
  int64_t taps = k->kh * k->kw;
  for (int64_t n = 0; n < k->batch; n++)
    for (int64_t m = 0; m < k->out_chans; m++)
      for (int64_t i = 0; i < oh; i++)
        for (int64_t j = 0; j < ow; j++) {
          double acc = b ? b[m] : 0;
          for (int64_t ci = 0; ci < cpg; ci++) {
            int64_t ch = (m / mpg) * cpg + ci, o = ch / cpo;
            for (int64_t a = 0; a < k->kh; a++)
              for (int64_t bb = 0; bb < k->kw; bb++) {
                int64_t tap = a * k->kw + bb;
                int64_t oi = (((n * k->offset_group + o) * taps + tap) * 2) * oh * ow + i * ow + j;
                double yy = (double)(i * k->stride[0] - k->pads[0] + a * k->dilation[0]) + off[oi];
                double xx = (double)(j * k->stride[1] - k->pads[1] + bb * k->dilation[1]) + off[oi + oh * ow];
                double v = sample(x + (n * k->chans + ch) * k->height * k->width, k->height, k->width, yy, xx);
                if (mask) v *= mask[((n * k->offset_group + o) * taps + tap) * oh * ow + i * ow + j];
                acc += v * w[((m * cpg + ci) * k->kh + a) * k->kw + bb];
              }
          }
          y[((n * k->out_chans + m) * oh + i) * ow + j] = acc;
        }
}

/* Random values rounded to dtype t (so the naive loop sees what the graph
 * does), stored as t. */
static double *rand_tensor(kn_dtype t, int64_t count, double lo, double hi, unsigned *state, void **stored) {
  double *v = malloc(sizeof(double) * (size_t)count);
  *stored = malloc(kn_dtype_size(t) * (size_t)count);
  assert_true(v && *stored);
  for (int64_t i = 0; i < count; i++) {
    kn_ref_store(t, *stored, i, uniform(state, lo, hi));
    v[i] = kn_ref_load(t, *stored, i);
  }
  return v;
}

static void run_case(const deform_case *k) {
  int64_t eh = (k->kh - 1) * k->dilation[0] + 1, ew = (k->kw - 1) * k->dilation[1] + 1;
  int64_t oh = (k->height + k->pads[0] + k->pads[2] - eh) / k->stride[0] + 1;
  int64_t ow = (k->width + k->pads[1] + k->pads[3] - ew) / k->stride[1] + 1;
  int64_t taps = k->kh * k->kw;
  kn_graph g;
  kn_graph_init(&g);
  g.max_batch = k->batch;
  char spec[128];
  /* a symbolic batch: shapes [N*1, ...], run at N = batch */
  const char *bsym = k->symbolic ? "N*" : "";
  int64_t lead = k->symbolic ? 1 : k->batch;
  snprintf(spec, sizeof spec, "%s%lld,%lld,%lld,%lld", bsym, (long long)lead, (long long)k->chans,
           (long long)k->height, (long long)k->width);
  tg_input(&g, "x", k->dtype, spec);
  snprintf(spec, sizeof spec, "%lld,%lld,%lld,%lld", (long long)k->out_chans, (long long)(k->chans / k->group),
           (long long)k->kh, (long long)k->kw);
  tg_input(&g, "w", k->dtype, spec);
  snprintf(spec, sizeof spec, "%s%lld,%lld,%lld,%lld", bsym, (long long)lead,
           (long long)(2 * k->offset_group * taps), (long long)oh, (long long)ow);
  tg_input(&g, "off", k->dtype, spec);
  if (k->bias) {
    snprintf(spec, sizeof spec, "%lld", (long long)k->out_chans);
    tg_input(&g, "b", k->dtype, spec);
  }
  if (k->mask) {
    snprintf(spec, sizeof spec, "%s%lld,%lld,%lld,%lld", bsym, (long long)lead,
             (long long)(k->offset_group * taps), (long long)oh, (long long)ow);
    tg_input(&g, "mask", k->dtype, spec);
  }
  char ins[64];
  snprintf(ins, sizeof ins, "x,w,off,%s%s", k->bias ? "b" : "_", k->mask ? ",mask" : "");
  int n = tg_node(&g, KN_OP_DEFORM_CONV, "dc", ins, "y");
  tg_attr_ints(&g, n, "kernel_shape", 2, k->kh, k->kw);
  tg_attr_ints(&g, n, "strides", 2, k->stride[0], k->stride[1]);
  tg_attr_ints(&g, n, "dilations", 2, k->dilation[0], k->dilation[1]);
  tg_attr_ints(&g, n, "pads", 4, k->pads[0], k->pads[1], k->pads[2], k->pads[3]);
  if (k->group != 1) tg_attr_i(&g, n, "group", k->group);
  if (k->offset_group != 1) tg_attr_i(&g, n, "offset_group", k->offset_group);
  tg_output(&g, "y");
  tg_decompose_ok(&g, KN_OP_DEFORM_CONV);
  const kn_value *yv = &g.values[tg_value(&g, "y")];
  assert_int_equal(yv->dtype, k->dtype);
  assert_int_equal(yv->shape.dim[1], k->out_chans);
  assert_int_equal(yv->shape.dim[2], oh);
  assert_int_equal(yv->shape.dim[3], ow);
  assert_int_equal(yv->shape.batch_mask, k->symbolic ? 1u : 0u);

  unsigned seed = 7u + (unsigned)(k->chans * 31 + k->kh * 7 + k->stride[0]);
  void *sx, *sw, *soff, *sb = NULL, *smask = NULL;
  double *x = rand_tensor(k->dtype, k->batch * k->chans * k->height * k->width, -1, 1, &seed, &sx);
  double *w = rand_tensor(k->dtype, k->out_chans * (k->chans / k->group) * taps, -1, 1, &seed, &sw);
  double *off = rand_tensor(k->dtype, k->batch * 2 * k->offset_group * taps * oh * ow, -k->offset_scale,
                            k->offset_scale, &seed, &soff);
  double *b = k->bias ? rand_tensor(k->dtype, k->out_chans, -1, 1, &seed, &sb) : NULL;
  double *mask = k->mask ? rand_tensor(k->dtype, k->batch * k->offset_group * taps * oh * ow, 0, 1, &seed, &smask)
                         : NULL;
  int64_t count = k->batch * k->out_chans * oh * ow;
  double *want = malloc(sizeof(double) * (size_t)count);
  void *got = malloc(kn_dtype_size(k->dtype) * (size_t)count);
  assert_true(want && got);
  naive(k, oh, ow, x, w, off, b, mask, want);
  const void *in[5] = {sx, sw, soff};
  int n_in = 3;
  if (sb) in[n_in++] = sb;
  if (smask) in[n_in++] = smask;
  void *out[1] = {got};
  kn_diag d;
  kn_diag_init(&d);
  int rc = kn_ref_run_graph(&g, in, out, k->symbolic ? k->batch : 1, &d);
  if (rc) kn_diag_print(&d, "ref");
  kn_diag_free(&d);
  assert_int_equal(rc, 0);
  double tol = k->dtype == KN_DT_F64 ? 1e-12 : k->dtype == KN_DT_F32 ? 1e-5 : 2e-2;
  double worst = 0;
  for (int64_t i = 0; i < count; i++) {
    double diff = fabs(kn_ref_load(k->dtype, got, i) - want[i]) / (1 + fabs(want[i]));
    if (!(diff <= worst)) worst = diff;
  }
  if (!(worst <= tol)) fail_msg("DeformConv C=%lld group=%lld offset_group=%lld: max rel diff %g", (long long)k->chans,
                                (long long)k->group, (long long)k->offset_group, worst);
  free(x), free(w), free(off), free(b), free(mask), free(want), free(got);
  free(sx), free(sw), free(soff), free(sb), free(smask);
  kn_graph_free(&g);
}

static void matches_naive_loop(void **state) {
  (void)state;
  const deform_case cases[] = {
      /* the node tests' shape, no mask or bias */
      {.batch = 1, .chans = 1, .height = 3, .width = 3, .out_chans = 1, .kh = 2, .kw = 2, .group = 1,
       .offset_group = 1, .stride = {1, 1}, .dilation = {1, 1}, .offset_scale = 0.6, .dtype = KN_DT_F32},
      /* groups and offset groups, strides, dilations, asymmetric pads, mask and bias, batch 2 */
      {.batch = 2, .chans = 4, .height = 7, .width = 6, .out_chans = 6, .kh = 3, .kw = 2, .group = 2,
       .offset_group = 2, .stride = {2, 1}, .dilation = {1, 2}, .pads = {1, 0, 2, 1}, .mask = true, .bias = true,
       .offset_scale = 2.5, .dtype = KN_DT_F32},
      /* offset groups finer than groups, offsets far outside the image, symbolic batch */
      {.batch = 2, .chans = 6, .height = 5, .width = 5, .out_chans = 3, .kh = 3, .kw = 3, .group = 1,
       .offset_group = 3, .stride = {1, 1}, .dilation = {1, 1}, .pads = {1, 1, 1, 1}, .mask = true,
       .offset_scale = 6, .symbolic = true, .dtype = KN_DT_F32},
      /* depthwise, double */
      {.batch = 1, .chans = 3, .height = 6, .width = 4, .out_chans = 3, .kh = 2, .kw = 3, .group = 3,
       .offset_group = 1, .stride = {1, 2}, .dilation = {2, 1}, .pads = {2, 1, 0, 1}, .bias = true,
       .offset_scale = 1.5, .dtype = KN_DT_F64},
      /* offset groups and groups that do not divide each other (gather groups of lcm(2, 3) = 6) */
      {.batch = 1, .chans = 6, .height = 5, .width = 6, .out_chans = 6, .kh = 2, .kw = 3, .group = 3,
       .offset_group = 2, .stride = {1, 1}, .dilation = {1, 1}, .pads = {0, 1, 1, 0}, .mask = true, .bias = true,
       .offset_scale = 2, .dtype = KN_DT_F32},
      /* more groups than offset groups, several gather groups per conv group */
      {.batch = 2, .chans = 8, .height = 4, .width = 5, .out_chans = 4, .kh = 2, .kw = 2, .group = 2,
       .offset_group = 4, .stride = {1, 1}, .dilation = {1, 1}, .pads = {1, 1, 0, 0}, .offset_scale = 1.5,
       .symbolic = true, .dtype = KN_DT_F32},
      /* float16 (computed in float32) */
      {.batch = 1, .chans = 2, .height = 4, .width = 4, .out_chans = 2, .kh = 2, .kw = 2, .group = 1,
       .offset_group = 2, .stride = {1, 1}, .dilation = {1, 1}, .mask = true, .bias = true, .offset_scale = 1,
       .dtype = KN_DT_F16},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i]);
}

typedef struct fail_case {
  const char *x, *w, *off, *b, *mask; /* shapes; NULL = input omitted */
  kn_dtype xt, wt;                    /* dtype of X (offset, B, mask) and of W */
  int64_t group, offset_group, kernel_h;
  const char *needle;
} fail_case;

/* Decomposing the DeformConv of case k fails with exactly one diagnostic,
 * which names the node and contains the case's needle. */
static void expect_failure(const fail_case *k) {
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", k->xt, k->x);
  tg_input(&g, "w", k->wt, k->w);
  tg_input(&g, "off", k->xt, k->off);
  if (k->b) tg_input(&g, "b", k->xt, k->b);
  if (k->mask) tg_input(&g, "mask", k->xt, k->mask);
  char ins[64];
  snprintf(ins, sizeof ins, "x,w,off,%s%s", k->b ? "b" : "_", k->mask ? ",mask" : "");
  int n = tg_node(&g, KN_OP_DEFORM_CONV, "dc", ins, "y");
  if (k->group != 1) tg_attr_i(&g, n, "group", k->group);
  if (k->offset_group != 1) tg_attr_i(&g, n, "offset_group", k->offset_group);
  if (k->kernel_h) tg_attr_ints(&g, n, "kernel_shape", 2, k->kernel_h, (int64_t)2);
  tg_output(&g, "y");
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_pass_decompose(&g, &d), -1);
  if (d.count != 1 || !strstr(d.lines[0], "node 'dc' (DeformConv): ") || !strstr(d.lines[0], k->needle)) {
    kn_diag_print(&d, "decompose");
    fail_msg("expected one diagnostic naming node 'dc' and containing \"%s\"", k->needle);
  }
  kn_diag_free(&d);
  kn_graph_free(&g);
}

/* Bad shapes, dtypes and attributes, on the node tests' geometry (X
 * [1,C,3,3], W [M,C/group,2,2], offset [1,2*og*4,2,2]). */
static void must_fail(void **state) {
  (void)state;
  static const fail_case cases[] = {
      {"1,2,9", "1,2,2", "1,8,8", NULL, NULL, KN_DT_F32, KN_DT_F32, 1, 1, 0, "only 2-D DeformConv is supported"},
      {"1,2,3,3", "1,2,2,2", "1,6,2,2", NULL, NULL, KN_DT_F32, KN_DT_F32, 1, 1, 0, "input offset must be [N,8,2,2]"},
      {"1,2,3,3", "1,2,2,2", "1,8,3,3", NULL, NULL, KN_DT_F32, KN_DT_F32, 1, 1, 0, "input offset must be"},
      {"1,3,3,3", "2,1,2,2", "1,8,2,2", NULL, NULL, KN_DT_F32, KN_DT_F32, 2, 1, 0, "attribute 'group' = 2"},
      {"1,4,3,3", "3,2,2,2", "1,8,2,2", NULL, NULL, KN_DT_F32, KN_DT_F32, 2, 1, 0, "W's 3 output channels"},
      {"1,2,3,3", "1,2,2,2", "1,24,2,2", NULL, NULL, KN_DT_F32, KN_DT_F32, 1, 3, 0, "attribute 'offset_group' = 3"},
      {"1,2,3,3", "1,2,2,2", "1,8,2,2", NULL, NULL, KN_DT_F32, KN_DT_F32, 1, 1, 3, "attribute 'kernel_shape'"},
      {"1,2,3,3", "1,2,2,2", "1,8,2,2", "2", NULL, KN_DT_F32, KN_DT_F32, 1, 1, 0, "input B must be [1]"},
      {"1,2,3,3", "1,2,2,2", "1,8,2,2", NULL, "1,8,2,2", KN_DT_F32, KN_DT_F32, 1, 1, 0, "input mask must be"},
      {"1,2,3,3", "1,2,2,2", "2,8,2,2", NULL, NULL, KN_DT_F32, KN_DT_F32, 1, 1, 0, "with X's batch"},
      {"N*1,2,3,3", "1,2,2,2", "1,8,2,2", NULL, NULL, KN_DT_F32, KN_DT_F32, 1, 1, 0, "with X's batch"},
      {"1,2,3,3", "1,2,2,2", "1,8,2,2", NULL, NULL, KN_DT_I32, KN_DT_I32, 1, 1, 0, "input X must be float16"},
      {"1,2,3,3", "1,2,2,2", "1,8,2,2", NULL, NULL, KN_DT_F32, KN_DT_F64, 1, 1, 0, "input W is float64"},
      {"1,2,1,1", "1,2,2,2", "1,8,1,1", NULL, NULL, KN_DT_F32, KN_DT_F32, 1, 1, 0, "is larger than the padded input"},
      {"1,2,0,3", "1,2,1,1", "1,2,1,3", NULL, NULL, KN_DT_F32, KN_DT_F32, 1, 1, 0, "must not be empty"},
      {"1,2,3,3", "0,2,2,2", "1,8,2,2", NULL, NULL, KN_DT_F32, KN_DT_F32, 1, 1, 0, "must not be empty"},
      {"1,1,9000,9000", "1,1,1,1", "1,2,9000,9000", NULL, NULL, KN_DT_F32, KN_DT_F32, 1, 1, 0, "is too large"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) expect_failure(&cases[k]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(matches_naive_loop),
      cmocka_unit_test(must_fail),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
