/* test_decompose_misc.c — the misc family (ir/passes/pass_decompose_misc.c,
 * ir/passes/pass_decompose_ml.c, BitCast): each composite is rewritten into
 * primitive ops that the reference interpreter runs, checked against values
 * worked out here by hand or by a naive loop (the conformance runner checks
 * the compiled kernels against ONNX's own test data). Must-fail cases check
 * the diagnostic. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/graph/graph_util.h"

/* Momentum, standard and Nesterov, at the first step (T = 0: the gradient's
 * coefficient is 1) and a later one (beta). */
static void momentum_steps(void **state) {
  (void)state;
  for (int nesterov = 0; nesterov < 2; nesterov++)
    for (int64_t step = 0; step < 2; step++) {
      kn_graph g;
      kn_graph_init(&g);
      tg_input(&g, "r", KN_DT_F32, "");
      tg_input(&g, "t", KN_DT_I64, "");
      tg_input(&g, "x", KN_DT_F32, "3");
      tg_input(&g, "g", KN_DT_F32, "3");
      tg_input(&g, "v", KN_DT_F32, "3");
      int n = tg_node(&g, KN_OP_MOMENTUM, "m", "r,t,x,g,v", "x2,v2");
      tg_attr_f(&g, n, "alpha", 0.9f);
      tg_attr_f(&g, n, "beta", 0.5f);
      tg_attr_f(&g, n, "norm_coefficient", 0.01f);
      tg_attr_s(&g, n, "mode", nesterov ? "nesterov" : "standard");
      tg_output(&g, "x2");
      tg_output(&g, "v2");
      tg_decompose_ok(&g, KN_OP_MOMENTUM);
      float r = 0.1f, x[3] = {1, -2, 3}, gr[3] = {0.5f, 0.25f, -1}, v[3] = {0.1f, 0.2f, 0.3f};
      float x2[3], v2[3];
      const void *in[5] = {&r, &step, x, gr, v};
      void *out[2] = {x2, v2};
      tg_ref_run(&g, in, out);
      for (int i = 0; i < 3; i++) {
        float greg = 0.01f * x[i] + gr[i];
        float vn = 0.9f * v[i] + (step > 0 ? 0.5f : 1.0f) * greg;
        float xn = nesterov ? x[i] - r * (greg + 0.9f * vn) : x[i] - r * vn;
        assert_float_equal(v2[i], vn, 1e-6);
        assert_float_equal(x2[i], xn, 1e-6);
      }
      kn_graph_free(&g);
    }
}

/* Adam with bias correction (T = 3) against the update written out. */
static void adam_bias_correction(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "r", KN_DT_F32, "");
  tg_input(&g, "t", KN_DT_I64, "");
  tg_input(&g, "x", KN_DT_F32, "2");
  tg_input(&g, "g", KN_DT_F32, "2");
  tg_input(&g, "v", KN_DT_F32, "2");
  tg_input(&g, "h", KN_DT_F32, "2");
  int n = tg_node(&g, KN_OP_ADAM, "adam", "r,t,x,g,v,h", "x2,v2,h2");
  tg_attr_f(&g, n, "epsilon", 0.01f);
  tg_attr_f(&g, n, "norm_coefficient_post", 0.1f);
  tg_output(&g, "x2");
  tg_output(&g, "v2");
  tg_output(&g, "h2");
  tg_decompose_ok(&g, KN_OP_ADAM);
  float r = 0.1f, x[2] = {1, -1}, gr[2] = {0.3f, 0.6f}, v[2] = {0.2f, 0.1f}, h[2] = {0.5f, 0.25f};
  int64_t t = 3;
  float x2[2], v2[2], h2[2];
  const void *in[6] = {&r, &t, x, gr, v, h};
  void *out[3] = {x2, v2, h2};
  tg_ref_run(&g, in, out);
  double ra = 0.1 * sqrt(1 - pow(0.999, 3)) / (1 - pow(0.9, 3));
  for (int i = 0; i < 2; i++) {
    double vn = 0.9 * v[i] + 0.1 * gr[i], hn = 0.999 * h[i] + 0.001 * gr[i] * gr[i];
    double xn = 0.9 * (x[i] - ra * vn / (sqrt(hn) + 0.01));
    assert_float_equal(v2[i], vn, 1e-6);
    assert_float_equal(h2[i], hn, 1e-6);
    assert_float_equal(x2[i], xn, 1e-5);
  }
  kn_graph_free(&g);
}

/* TfIdfVectorizer, TF of a unigram and a bigram with skips, batched. */
static void tfidf_skip_bigrams(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_I32, "2,5");
  int n = tg_node(&g, KN_OP_TFIDF_VECTORIZER, "tf", "x", "y");
  tg_attr_i(&g, n, "min_gram_length", 1);
  tg_attr_i(&g, n, "max_gram_length", 2);
  tg_attr_i(&g, n, "max_skip_count", 1);
  tg_attr_s(&g, n, "mode", "TF");
  tg_attr_ints(&g, n, "ngram_counts", 2, (int64_t)0, (int64_t)1);
  tg_attr_ints(&g, n, "ngram_indexes", 2, (int64_t)2, (int64_t)0); /* unigram -> column 2, bigram -> 0 */
  tg_attr_ints(&g, n, "pool_int64s", 3, (int64_t)7, (int64_t)7, (int64_t)8);
  tg_output(&g, "y");
  tg_decompose_ok(&g, KN_OP_TFIDF_VECTORIZER);
  /* row 0: 7 8 7 1 8 -> unigram 7: 2; bigram (7,8) at distance 1: 1 (0,1), distance 2: 1 (2,4) */
  /* row 1: 8 7 1 1 7 -> unigram 7: 2; bigram (7,8): none */
  int32_t x[10] = {7, 8, 7, 1, 8, 8, 7, 1, 1, 7};
  float y[6];
  const void *in[1] = {x};
  void *out[1] = {y};
  tg_ref_run(&g, in, out);
  const float expect[6] = {2, 0, 2, 0, 0, 2};
  for (int i = 0; i < 6; i++) assert_float_equal(y[i], expect[i], 0);
  kn_graph_free(&g);
}

/* MaxPool's Indices (row- and column-major) against a naive loop. */
static void max_pool_indices(void **state) {
  (void)state;
  for (int order = 0; order < 2; order++) {
    kn_graph g;
    kn_graph_init(&g);
    tg_input(&g, "x", KN_DT_F32, "1,2,5,4");
    int n = tg_node(&g, KN_OP_MAX_POOL, "mp", "x", "y,i");
    tg_attr_ints(&g, n, "kernel_shape", 2, (int64_t)3, (int64_t)2);
    tg_attr_ints(&g, n, "strides", 2, (int64_t)2, (int64_t)1);
    tg_attr_ints(&g, n, "pads", 4, (int64_t)1, (int64_t)0, (int64_t)1, (int64_t)1);
    tg_attr_i(&g, n, "storage_order", order);
    tg_output(&g, "y");
    tg_output(&g, "i");
    tg_decompose_ok(&g, KN_OP_UNKNOWN);
    float x[40], y[2 * 3 * 4];
    int64_t idx[2 * 3 * 4];
    unsigned seed = 7;
    for (int k = 0; k < 40; k++) x[k] = tg_randf(&seed);
    const void *in[1] = {x};
    void *out[2] = {y, idx};
    tg_ref_run(&g, in, out);
    /* output 3 x 4: oh*2 - 1 + kh, ow - 0 + kw */
    for (int c = 0; c < 2; c++)
      for (int oh = 0; oh < 3; oh++)
        for (int ow = 0; ow < 4; ow++) {
          float best = -INFINITY;
          int64_t at = -1;
          for (int kh = 0; kh < 3; kh++)
            for (int kw = 0; kw < 2; kw++) {
              int h = oh * 2 - 1 + kh, w = ow + kw;
              if (h < 0 || h >= 5 || w >= 4) continue;
              float v = x[c * 20 + h * 4 + w];
              if (v > best) best = v, at = c * 20 + (order ? h + w * 5 : h * 4 + w);
            }
          int o = (c * 3 + oh) * 4 + ow;
          assert_float_equal(y[o], best, 0);
          assert_int_equal(idx[o], at);
        }
    kn_graph_free(&g);
  }
}

/* BitCast reinterprets the bytes; the shape rule refuses different sizes. */
static void bitcast_bytes(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "3");
  int n = tg_node(&g, KN_OP_BITCAST, "bc", "x", "y");
  tg_attr_i(&g, n, "to", kn_dtype_to_onnx(KN_DT_I32));
  tg_output(&g, "y");
  tg_infer_ok(&g);
  float x[3] = {1.0f, -2.5f, 0.0f};
  int32_t y[3];
  const void *in[1] = {x};
  void *out[1] = {y};
  tg_ref_run(&g, in, out);
  for (int i = 0; i < 3; i++) {
    int32_t bits;
    memcpy(&bits, &x[i], 4);
    assert_int_equal(y[i], bits);
  }
  kn_graph_free(&g);
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "3");
  n = tg_node(&g, KN_OP_BITCAST, "bad", "x", "y");
  tg_attr_i(&g, n, "to", kn_dtype_to_onnx(KN_DT_I64));
  tg_output(&g, "y");
  tg_infer_fails(&g, "node 'bad' (BitCast): attribute 'to' (int64) differs in size from input dtype float32");
  kn_graph_free(&g);
}

/* ArrayFeatureExtractor behind a chain of Relus: the decomposition adds
 * values and nodes while it still reads X's shape. With 11 Relus on X
 * float[3,4] (the fuzzer's model) an addition crossed the value table's
 * capacity and the rewrite read X's shape through a freed pointer; the
 * chain lengths around it cross every small capacity. */
static void array_feature_extractor_chain(void **state) {
  (void)state;
  for (int relus = 0; relus <= 40; relus++) {
    kn_graph g;
    kn_graph_init(&g);
    tg_input(&g, "x0", KN_DT_F32, "3,4");
    tg_input(&g, "i", KN_DT_I64, "2");
    char in[16], out[16];
    for (int k = 0; k < relus; k++) {
      snprintf(in, sizeof in, "x%d", k);
      snprintf(out, sizeof out, "x%d", k + 1);
      tg_node(&g, KN_OP_RELU, NULL, in, out);
    }
    snprintf(in, sizeof in, "x%d,i", relus);
    tg_node(&g, KN_OP_ML_ARRAY_FEATURE_EXTRACTOR, "afe", in, "y");
    tg_output(&g, "y");
    tg_decompose_ok(&g, KN_OP_ML_ARRAY_FEATURE_EXTRACTOR);
    float x[12], y[6];
    for (int k = 0; k < 12; k++) x[k] = (float)(k % 2 ? k : -k);
    int64_t idx[2] = {3, 1};
    const void *ins[2] = {x, idx};
    void *outs[1] = {y};
    tg_ref_run(&g, ins, outs);
    for (int r = 0; r < 3; r++)
      for (int j = 0; j < 2; j++) {
        float v = x[r * 4 + idx[j]];
        assert_float_equal(y[r * 2 + j], relus > 0 && v < 0 ? 0 : v, 0);
      }
    kn_graph_free(&g);
  }
}

static void must_fail(void **state) {
  (void)state;
  /* a random Dropout mask cannot match the ONNX reference */
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "2,3");
  tg_const_f(&g, "ratio", "", (float[]){0.5f});
  bool on = true;
  tg_const(&g, "training", KN_DT_BOOL, "", &on);
  tg_node(&g, KN_OP_DROPOUT, "drop", "x,ratio,training", "y");
  tg_output(&g, "y");
  tg_infer_fails(&g, "node 'drop' (Dropout): training mode with ratio 0.5 draws a random mask");
  kn_graph_free(&g);
  /* TreeEnsemble post transforms are not supported */
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "2,3");
  int n = tg_node(&g, KN_OP_ML_TREE_ENSEMBLE, "tree", "x", "y");
  tg_attr_i(&g, n, "post_transform", 1);
  tg_attr_i(&g, n, "n_targets", 1);
  tg_output(&g, "y");
  tg_decompose_fails(&g, "node 'tree' (ai.onnx.ml.TreeEnsemble): attribute 'post_transform' is not supported");
  kn_graph_free(&g);
  /* Momentum with a group of inputs missing */
  kn_graph_init(&g);
  tg_input(&g, "r", KN_DT_F32, "");
  tg_input(&g, "t", KN_DT_I64, "");
  tg_input(&g, "x", KN_DT_F32, "3");
  tg_input(&g, "g", KN_DT_F32, "3");
  tg_input(&g, "v", KN_DT_F32, "3");
  tg_input(&g, "x1", KN_DT_F32, "3");
  tg_node(&g, KN_OP_MOMENTUM, "mom", "r,t,x,g,v,x1", "y");
  tg_output(&g, "y");
  tg_decompose_fails(&g, "node 'mom' (ai.onnx.preview.training.Momentum): expects R, T and 3 inputs per optimized tensor");
  kn_graph_free(&g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(momentum_steps),   cmocka_unit_test(adam_bias_correction),
      cmocka_unit_test(tfidf_skip_bigrams), cmocka_unit_test(max_pool_indices),
      cmocka_unit_test(bitcast_bytes),    cmocka_unit_test(array_feature_extractor_chain),
      cmocka_unit_test(must_fail),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
