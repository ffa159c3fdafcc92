/* test_shape_infer.c — shape / dtype inference for each op family, the
 * batch symbol, and the diagnostics for inconsistent models. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/graph/graph_util.h"

#define I(x) ((int64_t)(x))

static void expect(const kn_graph *g, const char *name, kn_dtype t, const char *shape) {
  const kn_value *v = &g->values[tg_value(g, name)];
  kn_shape want = tg_shape(shape);
  char a[160], b[160];
  if (!v->shape_known || v->dtype != t || !kn_shape_equal(&v->shape, &want))
    fail_msg("'%s': expected %s%s, got %s%s", name, kn_dtype_name(t), kn_shape_str(&want, a, sizeof a),
             kn_dtype_name(v->dtype), v->shape_known ? kn_shape_str(&v->shape, b, sizeof b) : "[?]");
}

static void broadcasting(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N,3,1");
  tg_input(&g, "y", KN_DT_F32, "4");
  tg_input(&g, "c", KN_DT_BOOL, "3,1");
  tg_node(&g, KN_OP_ADD, "add", "x,y", "s");
  tg_node(&g, KN_OP_LESS, "less", "x,y", "lt");
  tg_node(&g, KN_OP_WHERE, "where", "c,x,y", "w");
  tg_node(&g, KN_OP_MAX, "max3", "x,y,s", "m");
  tg_node(&g, KN_OP_PRELU, "prelu", "s,y", "p");
  tg_node(&g, KN_OP_NOT, "not", "lt", "nl");
  tg_node(&g, KN_OP_CAST, "cast", "lt", "ci");
  tg_attr_i(&g, g.n_nodes - 1, "to", 7);
  tg_node(&g, KN_OP_DROPOUT, "drop", "s", "d0,d1");
  tg_output(&g, "w");
  tg_infer_ok(&g);
  expect(&g, "s", KN_DT_F32, "N,3,4");
  expect(&g, "lt", KN_DT_BOOL, "N,3,4");
  expect(&g, "w", KN_DT_F32, "N,3,4");
  expect(&g, "m", KN_DT_F32, "N,3,4");
  expect(&g, "p", KN_DT_F32, "N,3,4");
  expect(&g, "nl", KN_DT_BOOL, "N,3,4");
  expect(&g, "ci", KN_DT_I64, "N,3,4");
  expect(&g, "d1", KN_DT_BOOL, "N,3,4");
  kn_graph_free(&g);
}

static void broadcast_mismatch_and_dtypes(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "a", KN_DT_F32, "3,4");
  tg_input(&g, "b", KN_DT_F32, "5,4");
  tg_node(&g, KN_OP_ADD, "bad_add", "a,b", "y");
  tg_output(&g, "y");
  tg_infer_fails(&g, "node 'bad_add' (Add): shapes [3,4] and [5,4] do not broadcast");
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_input(&g, "a", KN_DT_F32, "N,4");
  tg_input(&g, "b", KN_DT_F32, "3,4");
  tg_node(&g, KN_OP_MUL, "batch_vs_3", "a,b", "y");
  tg_output(&g, "y");
  tg_infer_fails(&g, "shapes [N*1,4] and [3,4] do not broadcast");
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_input(&g, "a", KN_DT_F32, "4");
  tg_input(&g, "i", KN_DT_I64, "4");
  tg_node(&g, KN_OP_SUB, "mixed", "a,i", "y");
  tg_node(&g, KN_OP_EXP, "int_exp", "i", "e");
  tg_output(&g, "y");
  tg_output(&g, "e");
  tg_infer_fails(&g, "node 'mixed' (Sub): input 1 is int64 but input 0 is float32");
  tg_infer_fails(&g, "node 'int_exp' (Exp): expected a float tensor, got int64");
  kn_graph_free(&g);
}

static void conv_shapes(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N,3,33,33");
  tg_const_rand(&g, "w", "8,3,3,3", 1, -1, 1);
  tg_const_rand(&g, "wg", "16,2,3,3", 2, -1, 1);
  tg_const_rand(&g, "b", "8", 3, -1, 1);
  int n = tg_node(&g, KN_OP_CONV, "c_pad", "x,w,b", "y1");
  tg_attr_ints(&g, n, "pads", 4, I(1), I(1), I(1), I(1));
  tg_attr_ints(&g, n, "strides", 2, I(2), I(2));
  n = tg_node(&g, KN_OP_CONV, "c_same", "x,w", "y2");
  tg_attr_s(&g, n, "auto_pad", "SAME_UPPER");
  tg_attr_ints(&g, n, "strides", 2, I(2), I(2));
  n = tg_node(&g, KN_OP_CONV, "c_valid", "x,w", "y3");
  tg_attr_s(&g, n, "auto_pad", "VALID");
  tg_attr_ints(&g, n, "strides", 2, I(2), I(2));
  n = tg_node(&g, KN_OP_CONV, "c_dil", "x,w", "y4");
  tg_attr_ints(&g, n, "dilations", 2, I(2), I(3));
  n = tg_node(&g, KN_OP_CONV, "c_group", "y1,wg", "y5");
  tg_attr_i(&g, n, "group", 4);
  tg_attr_ints(&g, n, "pads", 4, I(0), I(1), I(2), I(1));
  tg_output(&g, "y5");
  tg_infer_ok(&g);
  expect(&g, "y1", KN_DT_F32, "N,8,17,17");
  expect(&g, "y2", KN_DT_F32, "N,8,17,17");
  expect(&g, "y3", KN_DT_F32, "N,8,16,16");
  expect(&g, "y4", KN_DT_F32, "N,8,29,27");
  expect(&g, "y5", KN_DT_F32, "N,16,17,17");
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N,3,8,8");
  tg_const_rand(&g, "w", "8,4,3,3", 1, -1, 1);
  tg_node(&g, KN_OP_CONV, "conv_bad", "x,w", "y");
  tg_output(&g, "y");
  tg_infer_fails(&g, "node 'conv_bad' (Conv): input has 3 channels but weight [8,4,3,3] expects 4 (group 1)");
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N,3,2,2");
  tg_const_rand(&g, "w", "8,3,5,5", 1, -1, 1);
  tg_node(&g, KN_OP_CONV, "too_big", "x,w", "y");
  tg_output(&g, "y");
  tg_infer_fails(&g, "window 5 (dilated) is larger than the padded input 2");
  kn_graph_free(&g);
}

/* ConvTranspose: output_padding must be below the stride or the dilation
 * (ONNX); the output size never overflows. */
static void conv_transpose_output_padding(void **state) {
  (void)state;
  struct {
    int64_t stride, dilation, opad;
    const char *in, *out, *needle;
  } cases[] = {
      {2, 1, 1, "1,2,4,4", "1,3,10,9", NULL},
      {1, 2, 1, "1,2,4,4", "1,3,9,8", NULL},
      {2, 1, 2, "1,2,4,4", NULL,
       "node 'ct' (ConvTranspose): output_padding[0] = 2 must be less than strides[0] = 2 or dilations[0] = 1"},
      {1, 2, 2, "1,2,4,4", NULL,
       "node 'ct' (ConvTranspose): output_padding[0] = 2 must be less than strides[0] = 1 or dilations[0] = 2"},
      {(int64_t)1 << 40, 1, 0, "1,2,4,1099511627776", NULL, "node 'ct' (ConvTranspose): output spatial size out of range"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    kn_graph g;
    kn_graph_init(&g);
    g.max_batch = 1;
    tg_input(&g, "x", KN_DT_F32, cases[i].in);
    tg_const_rand(&g, "w", "2,3,3,3", 1, -1, 1);
    int n = tg_node(&g, KN_OP_CONV_TRANSPOSE, "ct", "x,w", "y");
    tg_attr_ints(&g, n, "strides", 2, I(cases[i].stride), I(cases[i].stride));
    tg_attr_ints(&g, n, "dilations", 2, I(cases[i].dilation), I(cases[i].dilation));
    tg_attr_ints(&g, n, "output_padding", 2, I(cases[i].opad), I(0));
    tg_output(&g, "y");
    if (cases[i].needle) {
      tg_infer_fails(&g, cases[i].needle);
    } else {
      tg_infer_ok(&g);
      expect(&g, "y", KN_DT_F32, cases[i].out);
    }
    kn_graph_free(&g);
  }
}

static void pool_shapes(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N,4,112,112");
  tg_input(&g, "z", KN_DT_F32, "N,4,5,5");
  int n = tg_node(&g, KN_OP_MAX_POOL, "mp", "x", "p1");
  tg_attr_ints(&g, n, "kernel_shape", 2, I(3), I(3));
  tg_attr_ints(&g, n, "strides", 2, I(2), I(2));
  tg_attr_ints(&g, n, "pads", 4, I(1), I(1), I(1), I(1));
  n = tg_node(&g, KN_OP_MAX_POOL, "mp_ceil", "x", "p2,idx");
  tg_attr_ints(&g, n, "kernel_shape", 2, I(3), I(3));
  tg_attr_ints(&g, n, "strides", 2, I(2), I(2));
  tg_attr_i(&g, n, "ceil_mode", 1);
  /* ceil_mode: the last window would start in the right padding: dropped. */
  n = tg_node(&g, KN_OP_AVERAGE_POOL, "ap_ceil", "z", "p3");
  tg_attr_ints(&g, n, "kernel_shape", 2, I(2), I(2));
  tg_attr_ints(&g, n, "strides", 2, I(2), I(2));
  tg_attr_ints(&g, n, "pads", 4, I(1), I(1), I(1), I(1));
  tg_attr_i(&g, n, "ceil_mode", 1);
  tg_node(&g, KN_OP_GLOBAL_AVERAGE_POOL, "gap", "x", "p4");
  tg_node(&g, KN_OP_GLOBAL_MAX_POOL, "gmp", "z", "p5");
  tg_output(&g, "p1");
  tg_infer_ok(&g);
  expect(&g, "p1", KN_DT_F32, "N,4,56,56");
  expect(&g, "p2", KN_DT_F32, "N,4,56,56");
  expect(&g, "idx", KN_DT_I64, "N,4,56,56");
  expect(&g, "p3", KN_DT_F32, "N,4,3,3");
  expect(&g, "p4", KN_DT_F32, "N,4,1,1");
  expect(&g, "p5", KN_DT_F32, "N,4,1,1");
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N,4,7,7");
  n = tg_node(&g, KN_OP_MAX_POOL, "no_kernel", "x", "y");
  tg_output(&g, "y");
  tg_infer_fails(&g, "node 'no_kernel' (MaxPool): kernel_shape must have 2 entries, got 0");
  kn_graph_free(&g);
}

static void nhwc_shapes(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N,9,9,6");
  tg_const_rand(&g, "w", "3,3,3,8", 1, -1, 1); /* [KH,KW,C/g,M], group 2 */
  tg_const_rand(&g, "b", "8", 2, -1, 1);
  int n = tg_node(&g, KN_OP_CONV_NHWC, "conv", "x,w,b", "y");
  tg_attr_ints(&g, n, "strides", 2, I(2), I(2));
  tg_attr_ints(&g, n, "pads", 4, I(1), I(1), I(1), I(1));
  tg_attr_i(&g, n, "group", 2);
  n = tg_node(&g, KN_OP_MAX_POOL_NHWC, "mp", "y", "p");
  tg_attr_ints(&g, n, "kernel_shape", 2, I(2), I(2));
  tg_attr_ints(&g, n, "strides", 2, I(2), I(2));
  tg_attr_i(&g, n, "ceil_mode", 1);
  tg_node(&g, KN_OP_GLOBAL_AVERAGE_POOL_NHWC, "gap", "p", "q");
  tg_output(&g, "q");
  tg_infer_ok(&g);
  expect(&g, "y", KN_DT_F32, "N,5,5,8");
  expect(&g, "p", KN_DT_F32, "N,3,3,8");
  expect(&g, "q", KN_DT_F32, "N,1,1,8");
  kn_graph_free(&g);

  /* per-sample weights [N,KH,KW,C/g,M] (pass_scale_weights.c) lead with the input's batch */
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N,9,9,6");
  tg_input(&g, "w", KN_DT_F32, "N,3,3,6,8");
  tg_node(&g, KN_OP_CONV_NHWC, "conv", "x,w", "y");
  tg_output(&g, "y");
  tg_infer_ok(&g);
  expect(&g, "y", KN_DT_F32, "N,7,7,8");
  kn_graph_free(&g);
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N,9,9,6");
  tg_const_rand(&g, "w", "2,1,1,6,8", 1, -1, 1);
  tg_node(&g, KN_OP_CONV_NHWC, "conv", "x,w", "y");
  tg_output(&g, "y");
  tg_infer_fails(&g, "node 'conv' (kiln.ConvNHWC): per-sample weight [2,1,1,6,8] must lead with the input's batch, [N*1,9,9,6]");
  kn_graph_free(&g);
}

static void matmul_gemm_shapes(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "a", KN_DT_F32, "N,5,3,4");
  tg_input(&g, "b", KN_DT_F32, "4,6");
  tg_input(&g, "c", KN_DT_F32, "2,1,3,4");
  tg_input(&g, "d", KN_DT_F32, "5,4,2");
  tg_input(&g, "v", KN_DT_F32, "4");
  tg_input(&g, "f", KN_DT_F32, "N,4");
  tg_const_rand(&g, "wt", "8,4", 1, -1, 1);
  tg_const_rand(&g, "bias", "8", 1, -1, 1);
  tg_node(&g, KN_OP_MATMUL, "mm1", "a,b", "y1");
  tg_node(&g, KN_OP_MATMUL, "mm2", "c,d", "y2");
  tg_node(&g, KN_OP_MATMUL, "mm3", "v,v", "y3");
  tg_node(&g, KN_OP_MATMUL, "mm4", "v,d", "y4");
  tg_node(&g, KN_OP_MATMUL, "mm5", "a,v", "y5");
  int n = tg_node(&g, KN_OP_GEMM, "fc", "f,wt,bias", "y6");
  tg_attr_i(&g, n, "transB", 1);
  tg_output(&g, "y6");
  tg_infer_ok(&g);
  expect(&g, "y1", KN_DT_F32, "N,5,3,6");
  expect(&g, "y2", KN_DT_F32, "2,5,3,2");
  expect(&g, "y3", KN_DT_F32, "");
  expect(&g, "y4", KN_DT_F32, "5,2");
  expect(&g, "y5", KN_DT_F32, "N,5,3");
  expect(&g, "y6", KN_DT_F32, "N,8");
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_input(&g, "a", KN_DT_F32, "3,4");
  tg_input(&g, "b", KN_DT_F32, "5,6");
  tg_node(&g, KN_OP_MATMUL, "mm", "a,b", "y");
  n = tg_node(&g, KN_OP_GEMM, "gemm", "a,b", "z");
  tg_attr_i(&g, n, "transA", 1);
  tg_output(&g, "y");
  tg_output(&g, "z");
  tg_infer_fails(&g, "node 'mm' (MatMul): inner dims differ: [3,4] x [5,6]");
  tg_infer_fails(&g, "node 'gemm' (Gemm): inner dims differ: A [3,4]^T x B [5,6]");
  kn_graph_free(&g);
}

/* x.view(x.size(0), -1) as PyTorch exports it, plus Reshape's 0 and -1. */
static void reshape_chain_with_batch(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N,3,4,4");
  tg_const_i64(&g, "zero", "", (int64_t[]){0});
  tg_const_i64(&g, "axes0", "1", (int64_t[]){0});
  tg_const_i64(&g, "minus1", "1", (int64_t[]){-1});
  tg_const_i64(&g, "keep", "3", (int64_t[]){0, 12, -1});
  tg_node(&g, KN_OP_SHAPE, "shape", "x", "s");
  tg_node(&g, KN_OP_GATHER, "gather", "s,zero", "n");
  tg_node(&g, KN_OP_UNSQUEEZE, "unsq", "n,axes0", "n1");
  int c = tg_node(&g, KN_OP_CONCAT, "concat", "n1,minus1", "target");
  tg_attr_i(&g, c, "axis", 0);
  tg_node(&g, KN_OP_RESHAPE, "reshape", "x,target", "y");
  tg_node(&g, KN_OP_RESHAPE, "reshape0", "x,keep", "z");
  tg_node(&g, KN_OP_FLATTEN, "flat", "x", "f");
  int f0 = tg_node(&g, KN_OP_FLATTEN, "flat0", "x", "f0");
  tg_attr_i(&g, f0, "axis", 0);
  tg_output(&g, "y");
  tg_infer_ok(&g);
  expect(&g, "s", KN_DT_I64, "4");
  expect(&g, "target", KN_DT_I64, "2");
  expect(&g, "y", KN_DT_F32, "N,48");
  expect(&g, "z", KN_DT_F32, "N,12,4");
  expect(&g, "f", KN_DT_F32, "N,48");
  expect(&g, "f0", KN_DT_F32, "1,N*48");
  /* Inference does not fold: the Shape node is still there. */
  assert_int_equal(tg_count(&g, KN_OP_SHAPE), 1);
  assert_null(g.values[tg_value(&g, "s")].data);
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N,6");
  tg_input(&g, "dyn", KN_DT_I64, "2");
  tg_const_i64(&g, "bad", "2", (int64_t[]){4, -1});
  tg_node(&g, KN_OP_RESHAPE, "dynamic", "x,dyn", "y");
  tg_node(&g, KN_OP_RESHAPE, "indivisible", "x,bad", "z");
  tg_output(&g, "y");
  tg_output(&g, "z");
  tg_infer_fails(&g, "node 'dynamic' (Reshape): input 1 (shape) must be a constant; it is graph input "
                     "'dyn', which can be bound at compile time");
  tg_infer_fails(&g, "node 'indivisible' (Reshape): cannot reshape [N*1,6] to [4,1] with -1 at 1");
  kn_graph_free(&g);
}

/* kn_infer_shapes_needs names the graph inputs whose data decides a shape:
 * through ops computing it (Add of an input), not through Shape (x is read
 * for its shape only), and never an input used only as data. */
static void needed_inputs(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.opset = 18;
  int x = tg_input(&g, "x", KN_DT_F32, "2,6");
  int axes = tg_input(&g, "axes", KN_DT_I64, "1");
  int delta = tg_input(&g, "delta", KN_DT_I64, "1");
  int unused = tg_input(&g, "data_only", KN_DT_F32, "2,6");
  tg_const_i64(&g, "one", "1", (int64_t[]){1});
  tg_node(&g, KN_OP_SHAPE, "shape", "x", "s");
  tg_node(&g, KN_OP_RESHAPE, "reshape_ok", "x,s", "r");
  tg_node(&g, KN_OP_ADD, "shift", "axes,delta", "axes2");
  tg_node(&g, KN_OP_REDUCE_SUM, "reduce", "r,axes2", "y");
  tg_node(&g, KN_OP_ADD, "plain", "x,data_only", "z");
  tg_output(&g, "y");
  tg_output(&g, "z");
  bool *needed = calloc((size_t)g.n_values, sizeof *needed);
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_infer_shapes_needs(&g, needed, &d), -1);
  assert_true(d.count >= 1 && strstr(d.lines[0], "node 'reduce' (ReduceSum): input 1 (axes) must be a constant"));
  assert_true(needed[axes] && needed[delta]);
  assert_false(needed[x] || needed[unused]);
  kn_diag_free(&d);
  free(needed);
  kn_graph_free(&g);
}

static void squeeze_unsqueeze_split_slice(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.opset = 13;
  tg_input(&g, "x", KN_DT_F32, "N,1,6,1");
  tg_input(&g, "t", KN_DT_F32, "N,10,8");
  tg_const_i64(&g, "ax1", "1", (int64_t[]){1});
  tg_const_i64(&g, "ax_neg", "2", (int64_t[]){-1, 0});
  tg_const_i64(&g, "sizes", "2", (int64_t[]){2, 4});
  tg_const_i64(&g, "starts", "2", (int64_t[]){1, -3});
  tg_const_i64(&g, "ends", "2", (int64_t[]){INT64_MAX, -1});
  tg_const_i64(&g, "axes", "2", (int64_t[]){1, 2});
  tg_const_i64(&g, "steps", "2", (int64_t[]){2, 1});
  tg_const_i64(&g, "rstart", "1", (int64_t[]){-1});
  tg_const_i64(&g, "rend", "1", (int64_t[]){INT64_MIN});
  tg_const_i64(&g, "rstep", "1", (int64_t[]){-1});
  tg_node(&g, KN_OP_SQUEEZE, "sq", "x,ax1", "a");
  tg_node(&g, KN_OP_SQUEEZE, "sq_all", "x", "b");
  tg_node(&g, KN_OP_UNSQUEEZE, "unsq", "b,ax_neg", "c");
  int n = tg_node(&g, KN_OP_SPLIT, "split", "x,sizes", "s0,s1");
  tg_attr_i(&g, n, "axis", 2);
  n = tg_node(&g, KN_OP_SPLIT, "split3", "t", "e0,e1,e2");
  tg_attr_i(&g, n, "axis", -1);
  tg_node(&g, KN_OP_SLICE, "slice", "t,starts,ends,axes,steps", "sl");
  tg_node(&g, KN_OP_SLICE, "reverse", "t,rstart,rend,ax1,rstep", "rv");
  tg_node(&g, KN_OP_TRANSPOSE, "tr", "t", "tt");
  n = tg_node(&g, KN_OP_TRANSPOSE, "tr2", "t", "tp");
  tg_attr_ints(&g, n, "perm", 3, I(1), I(0), I(2));
  tg_output(&g, "a");
  tg_infer_ok(&g);
  expect(&g, "a", KN_DT_F32, "N,6,1");
  expect(&g, "b", KN_DT_F32, "N,6");
  expect(&g, "c", KN_DT_F32, "1,N,6,1");
  expect(&g, "s0", KN_DT_F32, "N,1,2,1");
  expect(&g, "s1", KN_DT_F32, "N,1,4,1");
  expect(&g, "e0", KN_DT_F32, "N,10,3");
  expect(&g, "e2", KN_DT_F32, "N,10,2");
  expect(&g, "sl", KN_DT_F32, "N,5,2");
  expect(&g, "rv", KN_DT_F32, "N,10,8");
  expect(&g, "tt", KN_DT_F32, "8,10,N");
  expect(&g, "tp", KN_DT_F32, "10,N,8");
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N,6");
  tg_const_i64(&g, "ax0", "1", (int64_t[]){0});
  tg_const_i64(&g, "s", "1", (int64_t[]){1});
  tg_const_i64(&g, "e", "1", (int64_t[]){2});
  tg_node(&g, KN_OP_SQUEEZE, "sq_batch", "x,ax0", "y");
  tg_node(&g, KN_OP_SLICE, "sl_batch", "x,s,e,ax0", "z");
  tg_output(&g, "y");
  tg_output(&g, "z");
  tg_infer_fails(&g, "node 'sq_batch' (Squeeze): cannot squeeze axis 0 of [N*1,6]: it is not 1");
  tg_infer_fails(&g, "node 'sl_batch' (Slice): slicing axis 0 of [N*1,6], which depends on the batch size");
  kn_graph_free(&g);
}

static void gather_expand_pad_tile_concat(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "d", KN_DT_F32, "5,4");
  tg_input(&g, "x", KN_DT_F32, "3,1");
  tg_input(&g, "b", KN_DT_F32, "N,2,4");
  tg_input(&g, "b2", KN_DT_F32, "N,3,4");
  tg_const_i64(&g, "idx", "2", (int64_t[]){-1, 0});
  tg_const_i64(&g, "to", "3", (int64_t[]){2, 1, 4});
  tg_const_i64(&g, "pads", "6", (int64_t[]){0, 1, 2, 0, 1, 2});
  tg_const_i64(&g, "reps", "2", (int64_t[]){2, 3});
  tg_node(&g, KN_OP_GATHER, "gather", "d,idx", "g0");
  int n = tg_node(&g, KN_OP_GATHER, "gather1", "d,idx", "g1");
  tg_attr_i(&g, n, "axis", 1);
  tg_node(&g, KN_OP_EXPAND, "expand", "x,to", "ex");
  tg_node(&g, KN_OP_PAD, "pad", "b,pads", "pd");
  tg_node(&g, KN_OP_TILE, "tile", "x,reps", "tl");
  n = tg_node(&g, KN_OP_CONCAT, "cat", "b,b2", "ct");
  tg_attr_i(&g, n, "axis", 1);
  tg_output(&g, "g0");
  tg_infer_ok(&g);
  expect(&g, "g0", KN_DT_F32, "2,4");
  expect(&g, "g1", KN_DT_F32, "5,2");
  expect(&g, "ex", KN_DT_F32, "2,3,4");
  expect(&g, "pd", KN_DT_F32, "N,4,8");
  expect(&g, "tl", KN_DT_F32, "6,3");
  expect(&g, "ct", KN_DT_F32, "N,5,4");
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_input(&g, "d", KN_DT_F32, "5,4");
  tg_input(&g, "b", KN_DT_F32, "N,2,4");
  tg_input(&g, "c", KN_DT_F32, "N,2,5");
  tg_const_i64(&g, "idx", "1", (int64_t[]){5});
  tg_node(&g, KN_OP_GATHER, "oob", "d,idx", "y");
  int n2 = tg_node(&g, KN_OP_CONCAT, "cat_bad", "b,c", "z");
  tg_attr_i(&g, n2, "axis", 1);
  tg_output(&g, "y");
  tg_output(&g, "z");
  tg_infer_fails(&g, "node 'oob' (Gather): index 5 is out of range [-5, 5) for axis 0 of [5,4]");
  tg_infer_fails(&g, "node 'cat_bad' (Concat): input 1 [N*1,2,5] differs from input 0 [N*1,2,4] outside axis 1");
  kn_graph_free(&g);
}

static void constants_ranges_and_shape_ops(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N,3,5");
  tg_const_i64(&g, "dims", "2", (int64_t[]){2, 3});
  int one = tg_const_i64(&g, "one", "1", (int64_t[]){7});
  tg_const_i64(&g, "r0", "", (int64_t[]){0});
  tg_const_i64(&g, "r1", "", (int64_t[]){10});
  tg_const_i64(&g, "r2", "", (int64_t[]){3});
  tg_const_f(&g, "f0", "", (float[]){0});
  tg_const_f(&g, "f1", "", (float[]){1});
  tg_const_f(&g, "f2", "", (float[]){0.25f});
  int n = tg_node(&g, KN_OP_CONSTANT_OF_SHAPE, "cos", "dims", "k");
  kn_node_add_attr(&g, &g.nodes[n], (kn_attr){.name = "value", .kind = KN_ATTR_TENSOR, .value = one});
  tg_node(&g, KN_OP_RANGE, "range", "r0,r1,r2", "ri");
  tg_node(&g, KN_OP_RANGE, "rangef", "f0,f1,f2", "rf");
  n = tg_node(&g, KN_OP_SHAPE, "shape_tail", "x", "st");
  tg_attr_i(&g, n, "start", -2);
  tg_node(&g, KN_OP_SIZE, "size", "x", "sz");
  n = tg_node(&g, KN_OP_CONSTANT, "const", "", "cv");
  tg_attr_ints(&g, n, "value_ints", 3, I(1), I(2), I(3));
  /* ConstantOfShape whose shape holds N: a batch-dependent tensor. */
  tg_node(&g, KN_OP_SHAPE, "shape", "x", "sx");
  tg_node(&g, KN_OP_CONSTANT_OF_SHAPE, "cos_n", "sx", "kn");
  tg_output(&g, "k");
  tg_infer_ok(&g);
  expect(&g, "k", KN_DT_I64, "2,3");
  expect(&g, "ri", KN_DT_I64, "4");
  expect(&g, "rf", KN_DT_F32, "4");
  expect(&g, "st", KN_DT_I64, "2");
  expect(&g, "sz", KN_DT_I64, "");
  expect(&g, "cv", KN_DT_I64, "3");
  expect(&g, "kn", KN_DT_F32, "N,3,5");
  kn_graph_free(&g);
}

static void reductions_and_normalisations(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.opset = 13;
  tg_input(&g, "x", KN_DT_F32, "N,4,6,6");
  tg_input(&g, "t", KN_DT_F32, "N,5,8");
  tg_const_rand(&g, "gamma", "8", 1, 0.5f, 1.5f);
  tg_const_rand(&g, "beta", "8", 2, -1, 1);
  tg_const_i64(&g, "ax", "1", (int64_t[]){-1});
  for (int k = 0; k < 4; k++) tg_const_rand(&g, (const char *[]){"s", "b", "m", "v"}[k], "4", (unsigned)k, 0.5f, 1);
  int n = tg_node(&g, KN_OP_REDUCE_MEAN, "mean", "x", "rm");
  tg_attr_ints(&g, n, "axes", 2, I(2), I(3));
  n = tg_node(&g, KN_OP_REDUCE_SUM, "sum", "t,ax", "rs");
  tg_attr_i(&g, n, "keepdims", 0);
  tg_node(&g, KN_OP_REDUCE_MAX, "max_all", "t", "rx");
  tg_node(&g, KN_OP_SOFTMAX, "softmax", "t", "sm");
  tg_node(&g, KN_OP_LAYER_NORM, "ln", "t,gamma,beta", "ln_y,ln_mean,ln_inv");
  tg_node(&g, KN_OP_BATCH_NORM, "bn", "x,s,b,m,v", "bn_y");
  tg_output(&g, "rm");
  tg_infer_ok(&g);
  expect(&g, "rm", KN_DT_F32, "N,4,1,1");
  expect(&g, "rs", KN_DT_F32, "N,5");
  expect(&g, "rx", KN_DT_F32, "1,1,1");
  expect(&g, "sm", KN_DT_F32, "N,5,8");
  expect(&g, "ln_y", KN_DT_F32, "N,5,8");
  expect(&g, "ln_mean", KN_DT_F32, "N,5,1");
  expect(&g, "bn_y", KN_DT_F32, "N,4,6,6");
  kn_graph_free(&g);

  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N,4,2,2");
  for (int k = 0; k < 4; k++) tg_const_rand(&g, (const char *[]){"s", "b", "m", "v"}[k], "3", (unsigned)k, 0.5f, 1);
  tg_node(&g, KN_OP_BATCH_NORM, "bn", "x,s,b,m,v", "y");
  tg_output(&g, "y");
  tg_infer_fails(&g, "node 'bn' (BatchNormalization): scale must be [4] (the channels of [N*1,4,2,2]), got [3]");
  kn_graph_free(&g);
}

static void reports_every_unsupported_op(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "4");
  int a = tg_node(&g, KN_OP_UNKNOWN, "u1", "x", "a");
  g.nodes[a].op_type = "NonMaxSuppression";
  int b = tg_node(&g, KN_OP_UNKNOWN, "u2", "x", "b");
  g.nodes[b].op_type = "Fancy";
  g.nodes[b].domain = "com.example";
  tg_node(&g, KN_OP_ADD, "add", "a,b", "y");
  tg_output(&g, "y");
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_infer_shapes(&g, &d), -1);
  assert_int_equal(d.count, 2); /* the Add downstream adds no noise */
  assert_string_equal(d.lines[0], "node 'u1' (NonMaxSuppression): unsupported op 'NonMaxSuppression'");
  assert_string_equal(d.lines[1], "node 'u2' (Fancy): unsupported op 'Fancy' of domain 'com.example'");
  kn_diag_free(&d);
  kn_graph_free(&g);
}

static void overflow_is_diagnosed(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.max_batch = 64;
  tg_input(&g, "x", KN_DT_F32, "1");
  tg_input(&g, "big", KN_DT_F32, "N,1099511627776");
  tg_const_i64(&g, "to", "2", (int64_t[]){(int64_t)1 << 40, (int64_t)1 << 40});
  tg_const_i64(&g, "reps", "2", (int64_t[]){1, (int64_t)1 << 30});
  tg_node(&g, KN_OP_EXPAND, "expand", "x,to", "y");
  tg_node(&g, KN_OP_TILE, "tile", "big,reps", "z");
  tg_node(&g, KN_OP_RELU, "fine", "big", "w");
  tg_output(&g, "y");
  tg_output(&g, "z");
  tg_output(&g, "w");
  tg_infer_fails(&g, "node 'expand' (Expand): output size overflows");
  tg_infer_fails(&g, "node 'tile' (Tile): output size overflows");
  expect(&g, "w", KN_DT_F32, "N,1099511627776");
  kn_graph_free(&g);
}


/* Malformed attributes and arities: diagnostics, never a crash. */
static void malformed_nodes(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N,3,8,8");
  tg_const_rand(&g, "w", "4,3,3,3", 1, -1, 1);
  int n = tg_node(&g, KN_OP_CONV, "bad_strides", "x,w", "a");
  tg_attr_ints(&g, n, "strides", 1, I(2));
  n = tg_node(&g, KN_OP_CONV, "bad_auto_pad", "x,w", "b");
  tg_attr_s(&g, n, "auto_pad", "SAME_MIDDLE");
  n = tg_node(&g, KN_OP_MAX_POOL, "huge_dilation", "x", "c");
  tg_attr_ints(&g, n, "kernel_shape", 2, I(1) << 39, I(1) << 39);
  tg_attr_ints(&g, n, "dilations", 2, I(1) << 30, I(1) << 30);
  n = tg_node(&g, KN_OP_TRANSPOSE, "bad_perm", "x", "d");
  tg_attr_ints(&g, n, "perm", 4, I(0), I(0), I(1), I(2));
  tg_node(&g, KN_OP_SPLIT, "no_outputs", "x", "");
  tg_node(&g, KN_OP_GEMM, "one_input", "x", "e");
  n = tg_node(&g, KN_OP_CAST, "cast_to_string", "x", "f");
  tg_attr_i(&g, n, "to", 8);
  tg_node(&g, KN_OP_CONSTANT_OF_SHAPE, "cos_no_input", "", "h");
  tg_output(&g, "a");
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_infer_shapes(&g, &d), -1);
  static const char *want[] = {
      "node 'bad_strides' (Conv): strides has 1 entries, expected 2",
      "node 'bad_auto_pad' (Conv): unknown auto_pad 'SAME_MIDDLE'",
      "node 'huge_dilation' (MaxPool): dilated kernel is too large",
      "node 'bad_perm' (Transpose): perm is not a permutation",
      "node 'no_outputs' (Split): has 0 outputs, expected 1..64",
      "node 'one_input' (Gemm): input 1 is missing",
      "node 'cast_to_string' (Cast): unsupported or missing 'to' dtype",
      "node 'cos_no_input' (ConstantOfShape): input 0 (shape) must be a constant",
  };
  assert_int_equal(d.count, (int)(sizeof want / sizeof want[0]));
  for (int i = 0; i < d.count; i++) assert_string_equal(d.lines[i], want[i]);
  kn_diag_free(&d);
  kn_graph_free(&g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(broadcasting),
      cmocka_unit_test(broadcast_mismatch_and_dtypes),
      cmocka_unit_test(conv_shapes),
      cmocka_unit_test(conv_transpose_output_padding),
      cmocka_unit_test(pool_shapes),
      cmocka_unit_test(nhwc_shapes),
      cmocka_unit_test(matmul_gemm_shapes),
      cmocka_unit_test(reshape_chain_with_batch),
      cmocka_unit_test(squeeze_unsqueeze_split_slice),
      cmocka_unit_test(gather_expand_pad_tile_concat),
      cmocka_unit_test(constants_ranges_and_shape_ops),
      cmocka_unit_test(reductions_and_normalisations),
      cmocka_unit_test(reports_every_unsupported_op),
      cmocka_unit_test(overflow_is_diagnosed),
      cmocka_unit_test(malformed_nodes),
      cmocka_unit_test(needed_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
