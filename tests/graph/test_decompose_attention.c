/* test_decompose_attention.c — kn_pass_decompose_attention: each composite op
 * of the attention family is decomposed, then the decomposed graph is run by
 * the reference interpreter and compared with a naive double-precision
 * implementation of the ONNX formula written here (independent of both the
 * pass and the interpreter); one golden print of the decomposition; and
 * must-fail checks of the diagnostics for bad attributes and shapes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/graph/graph_util.h"

static void decompose(kn_graph *g) {
  tg_infer_ok(g);
  kn_diag d;
  kn_diag_init(&d);
  int rc = kn_pass_decompose_attention(g, &d);
  if (rc == 0) rc = kn_infer_shapes(g, &d);
  if (rc == 0) rc = kn_graph_verify(g, &d);
  if (rc != 0) kn_diag_print(&d, "decompose");
  kn_diag_free(&d);
  assert_int_equal(rc, 0);
  assert_int_equal(tg_count(g, KN_OP_ATTENTION) + tg_count(g, KN_OP_FLEX_ATTENTION) + tg_count(g, KN_OP_RMS_NORM) +
                       tg_count(g, KN_OP_ROTARY_EMBEDDING) + tg_count(g, KN_OP_CAUSAL_CONV_WITH_STATE),
                   0);
}

static void fill(float *p, int64_t n, unsigned seed) {
  unsigned s = seed;
  for (int64_t i = 0; i < n; i++) p[i] = tg_randf(&s);
}

/* Runs g on inputs, compares output k with want[k] (n_want[k] floats). */
static void run_and_compare(const kn_graph *g, int64_t batch, const void *const *inputs, float **want,
                            const int64_t *n_want, int n_out, double tol) {
  void **outs = calloc((size_t)n_out, sizeof *outs);
  assert_non_null(outs);
  for (int k = 0; k < n_out; k++) assert_non_null(outs[k] = calloc((size_t)n_want[k], sizeof(float)));
  kn_diag d;
  kn_diag_init(&d);
  int rc = kn_ref_run_graph(g, inputs, outs, batch, &d);
  if (rc != 0) kn_diag_print(&d, "ref");
  kn_diag_free(&d);
  assert_int_equal(rc, 0);
  for (int k = 0; k < n_out; k++) {
    const float *got = outs[k];
    for (int64_t i = 0; i < n_want[k]; i++) {
      double a = got[i], e = want[k][i];
      if (a == e) continue; /* also equal infinities */
      if (!(fabs(a - e) <= tol * (1 + fabs(e))))
        fail_msg("output %d element %lld: got %.9g, expected %.9g", k, (long long)i, a, e);
    }
    free(outs[k]);
  }
  free(outs);
}

/* ---- Attention: 3-D, GQA, past, short bool mask, causal, softcap, each qk_matmul_output_mode ---- */

enum { AB = 2, SQ = 3, SKV = 2, PAST = 2, TOT = PAST + SKV, QH = 4, KVH = 2, HD = 4, VD = 3, MLEN = 3 };

static void naive_attention(const float *q, const float *k, const float *v, const uint8_t *mask, const float *pk,
                            const float *pv, double cap, int qk_mode, float *y, float *pres_k, float *pres_v,
                            float *qk) {
  double scale = 1.0 / sqrt(HD);
  for (int b = 0; b < AB; b++)
    for (int h = 0; h < KVH; h++)
      for (int j = 0; j < TOT; j++) {
        for (int e = 0; e < HD; e++)
          pres_k[((b * KVH + h) * TOT + j) * HD + e] =
              j < PAST ? pk[((b * KVH + h) * PAST + j) * HD + e] : k[(b * SKV + j - PAST) * KVH * HD + h * HD + e];
        for (int e = 0; e < VD; e++)
          pres_v[((b * KVH + h) * TOT + j) * VD + e] =
              j < PAST ? pv[((b * KVH + h) * PAST + j) * VD + e] : v[(b * SKV + j - PAST) * KVH * VD + h * VD + e];
      }
  for (int b = 0; b < AB; b++)
    for (int h = 0; h < QH; h++)
      for (int i = 0; i < SQ; i++) {
        int kvh = h / (QH / KVH); /* each kv head serves QH/KVH consecutive query heads */
        double sc[TOT], mx = -INFINITY, sum = 0;
        for (int j = 0; j < TOT; j++) {
          double s = 0;
          for (int e = 0; e < HD; e++)
            s += (double)q[(b * SQ + i) * QH * HD + h * HD + e] * pres_k[((b * KVH + kvh) * TOT + j) * HD + e];
          double capped = cap * tanh(s * scale / cap);
          bool keep = j < MLEN && mask[i * MLEN + j] && j <= i + PAST;
          sc[j] = keep ? capped : -INFINITY;
          float *qk_out = &qk[((b * QH + h) * SQ + i) * TOT + j];
          *qk_out = (float)(qk_mode == 0 ? s * scale : qk_mode == 1 ? capped : sc[j]);
          if (sc[j] > mx) mx = sc[j];
        }
        for (int j = 0; j < TOT; j++) sum += sc[j] = exp(sc[j] - mx);
        if (qk_mode == 3)
          for (int j = 0; j < TOT; j++) qk[((b * QH + h) * SQ + i) * TOT + j] = (float)(sc[j] / sum);
        for (int e = 0; e < VD; e++) {
          double acc = 0;
          for (int j = 0; j < TOT; j++) acc += sc[j] / sum * pres_v[((b * KVH + kvh) * TOT + j) * VD + e];
          y[(b * SQ + i) * QH * VD + h * VD + e] = (float)acc;
        }
      }
}

static void attention_case(int mode) {
  kn_graph g;
  kn_graph_init(&g);
  g.opset = 23;
  g.max_batch = AB;
  tg_input(&g, "q", KN_DT_F32, "N,3,16");
  tg_input(&g, "k", KN_DT_F32, "N,2,8");
  tg_input(&g, "v", KN_DT_F32, "N,2,6");
  tg_input(&g, "mask", KN_DT_BOOL, "3,3");
  tg_input(&g, "past_k", KN_DT_F32, "N,2,2,4");
  tg_input(&g, "past_v", KN_DT_F32, "N,2,2,3");
  int n = tg_node(&g, KN_OP_ATTENTION, "attn", "q,k,v,mask,past_k,past_v", "y,present_k,present_v,qk");
  tg_attr_i(&g, n, "q_num_heads", QH);
  tg_attr_i(&g, n, "kv_num_heads", KVH);
  tg_attr_i(&g, n, "is_causal", 1);
  tg_attr_f(&g, n, "softcap", 1.5f);
  tg_attr_i(&g, n, "qk_matmul_output_mode", mode);
  tg_output(&g, "y");
  tg_output(&g, "present_k");
  tg_output(&g, "present_v");
  tg_output(&g, "qk");
  decompose(&g);

  float q[AB * SQ * QH * HD], k[AB * SKV * KVH * HD], v[AB * SKV * KVH * VD];
  float pk[AB * KVH * PAST * HD], pv[AB * KVH * PAST * VD];
  float y[AB * SQ * QH * VD], pres_k[AB * KVH * TOT * HD], pres_v[AB * KVH * TOT * VD], qk[AB * QH * SQ * TOT];
  uint8_t mask[SQ * MLEN] = {1, 0, 1, 1, 1, 0, 1, 0, 0}; /* column 0 kept: no fully masked row */
  fill(q, sizeof q / sizeof *q, 1), fill(k, sizeof k / sizeof *k, 2), fill(v, sizeof v / sizeof *v, 3);
  fill(pk, sizeof pk / sizeof *pk, 4), fill(pv, sizeof pv / sizeof *pv, 5);
  naive_attention(q, k, v, mask, pk, pv, 1.5, mode, y, pres_k, pres_v, qk);
  const void *inputs[] = {q, k, v, mask, pk, pv};
  float *want[] = {y, pres_k, pres_v, qk};
  int64_t n_want[] = {sizeof y / sizeof *y, sizeof pres_k / sizeof *pres_k, sizeof pres_v / sizeof *pres_v,
                      sizeof qk / sizeof *qk};
  run_and_compare(&g, AB, inputs, want, n_want, 4, 1e-5);
  kn_graph_free(&g);
}

static void attention_gqa_past_mask_causal(void **state) {
  (void)state;
  for (int mode = 0; mode < 4; mode++) attention_case(mode);
}

/* ---- RMSNormalization: golden decomposition + numbers ---- */

static void rms_norm_golden(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.opset = 23;
  g.max_batch = 1;
  tg_input(&g, "x", KN_DT_F32, "2,3,4");
  tg_input(&g, "scale", KN_DT_F32, "3,4");
  int n = tg_node(&g, KN_OP_RMS_NORM, "rms", "x,scale", "y");
  tg_attr_i(&g, n, "axis", -2);
  tg_attr_f(&g, n, "epsilon", 0.25f);
  tg_output(&g, "y");
  decompose(&g);
  tg_expect_print(&g,
                  "graph(%x:float32[2,3,4], %scale:float32[3,4]) {\n"
                  "  %rms/axes:int64[2] = constant [1, 2]\n"
                  "  %rms/epsilon:float32[] = constant [0.25]\n"
                  "  %rms/x_squared:float32[2,3,4] = Mul(%x, %x)  # rms/x_squared\n"
                  "  %rms/mean_square:float32[2,1,1] = ReduceMean(%rms/x_squared, %rms/axes) {keepdims=1}  # rms/mean_square\n"
                  "  %rms/mean_square_eps:float32[2,1,1] = Add(%rms/mean_square, %rms/epsilon)  # rms/mean_square_eps\n"
                  "  %rms/rms:float32[2,1,1] = Sqrt(%rms/mean_square_eps)  # rms/rms\n"
                  "  %rms/normalized:float32[2,3,4] = Div(%x, %rms/rms)  # rms/normalized\n"
                  "  %rms/scaled:float32[2,3,4] = Mul(%rms/normalized, %scale)  # rms/scaled\n"
                  "  %y:float32[2,3,4] = Identity(%rms/scaled)  # rms/y\n"
                  "  return %y\n"
                  "}\n");

  float x[24], scale[12], want[24];
  fill(x, 24, 7), fill(scale, 12, 8);
  for (int b = 0; b < 2; b++) {
    double ms = 0;
    for (int i = 0; i < 12; i++) ms += (double)x[b * 12 + i] * x[b * 12 + i] / 12;
    for (int i = 0; i < 12; i++) want[b * 12 + i] = (float)(x[b * 12 + i] / sqrt(ms + 0.25) * scale[i]);
  }
  const void *inputs[] = {x, scale};
  run_and_compare(&g, 1, inputs, (float *[]){want}, (int64_t[]){24}, 1, 1e-6);
  kn_graph_free(&g);
}

/* ---- RotaryEmbedding: 3-D input, position ids, interleaved, partial rotation ---- */

static void rotary_interleaved_partial(void **state) {
  (void)state;
  enum { B = 2, S = 3, H = 2, D = 6, ROT = 4, MAXPOS = 5 };
  kn_graph g;
  kn_graph_init(&g);
  g.opset = 23;
  g.max_batch = B;
  tg_input(&g, "x", KN_DT_F32, "N,3,12");
  tg_input(&g, "cos", KN_DT_F32, "5,2");
  tg_input(&g, "sin", KN_DT_F32, "5,2");
  tg_input(&g, "pos", KN_DT_I64, "N,3");
  int n = tg_node(&g, KN_OP_ROTARY_EMBEDDING, "rope", "x,cos,sin,pos", "y");
  tg_attr_i(&g, n, "num_heads", H);
  tg_attr_i(&g, n, "rotary_embedding_dim", ROT);
  tg_attr_i(&g, n, "interleaved", 1);
  tg_output(&g, "y");
  decompose(&g);

  float x[B * S * H * D], cosc[MAXPOS * ROT / 2], sinc[MAXPOS * ROT / 2], want[B * S * H * D];
  int64_t pos[B * S] = {0, 4, 2, 3, 3, 1};
  fill(x, B * S * H * D, 9), fill(cosc, MAXPOS * ROT / 2, 10), fill(sinc, MAXPOS * ROT / 2, 11);
  memcpy(want, x, sizeof want);
  for (int b = 0; b < B; b++)
    for (int s = 0; s < S; s++)
      for (int h = 0; h < H; h++)
        for (int i = 0; i < ROT / 2; i++) {
          const float *xp = &x[((b * S + s) * H + h) * D];
          double c = cosc[pos[b * S + s] * ROT / 2 + i], sn = sinc[pos[b * S + s] * ROT / 2 + i];
          double x1 = xp[2 * i], x2 = xp[2 * i + 1];
          want[((b * S + s) * H + h) * D + 2 * i] = (float)(c * x1 - sn * x2);
          want[((b * S + s) * H + h) * D + 2 * i + 1] = (float)(sn * x1 + c * x2);
        }
  const void *inputs[] = {x, cosc, sinc, pos};
  run_and_compare(&g, B, inputs, (float *[]){want}, (int64_t[]){B * S * H * D}, 1, 1e-6);
  kn_graph_free(&g);
}

/* ---- CausalConvWithState: no past, input shorter than k-1, bias, silu ---- */

static void causal_conv_short_input(void **state) {
  (void)state;
  enum { B = 2, C = 2, L = 2, KS = 4 };
  kn_graph g;
  kn_graph_init(&g);
  g.opset = 27;
  g.max_batch = B;
  tg_input(&g, "x", KN_DT_F32, "N,2,2");
  tg_input(&g, "w", KN_DT_F32, "2,1,4");
  tg_input(&g, "bias", KN_DT_F32, "2");
  int n = tg_node(&g, KN_OP_CAUSAL_CONV_WITH_STATE, "ccs", "x,w,bias", "y,state");
  tg_attr_s(&g, n, "activation", "silu");
  tg_output(&g, "y");
  tg_output(&g, "state");
  decompose(&g);

  float x[B * C * L], w[C * KS], bias[C], y[B * C * L], st[B * C * (KS - 1)];
  fill(x, B * C * L, 12), fill(w, C * KS, 13), fill(bias, C, 14);
  for (int b = 0; b < B; b++)
    for (int c = 0; c < C; c++) {
      double padded[KS - 1 + L] = {0};
      for (int t = 0; t < L; t++) padded[KS - 1 + t] = x[(b * C + c) * L + t];
      for (int t = 0; t < L; t++) {
        double acc = bias[c];
        for (int j = 0; j < KS; j++) acc += padded[t + j] * w[c * KS + j];
        y[(b * C + c) * L + t] = (float)(acc / (1 + exp(-acc)));
      }
      for (int t = 0; t < KS - 1; t++) st[(b * C + c) * (KS - 1) + t] = (float)padded[L + t];
    }
  const void *inputs[] = {x, w, bias};
  run_and_compare(&g, B, inputs, (float *[]){y, st}, (int64_t[]){B * C * L, B * C * (KS - 1)}, 2, 1e-6);
  kn_graph_free(&g);
}

/* ---- LinearAttention: gated_delta, GQA, per-head decay, scalar beta, past state ---- */

static void linear_attention_gated_delta_gqa(void **state) {
  (void)state;
  enum { B = 2, T = 3, HQ = 4, HKV = 2, DK = 3, DV = 2 };
  kn_graph g;
  kn_graph_init(&g);
  g.opset = 27;
  g.max_batch = B;
  tg_input(&g, "q", KN_DT_F32, "N,3,12");
  tg_input(&g, "k", KN_DT_F32, "N,3,6");
  tg_input(&g, "v", KN_DT_F32, "N,3,4");
  tg_input(&g, "past", KN_DT_F32, "N,2,3,2");
  tg_input(&g, "decay", KN_DT_F32, "N,3,2");
  tg_input(&g, "beta", KN_DT_F32, "N,3,1");
  int n = tg_node(&g, KN_OP_LINEAR_ATTENTION, "lin", "q,k,v,past,decay,beta", "y,present");
  tg_attr_i(&g, n, "q_num_heads", HQ);
  tg_attr_i(&g, n, "kv_num_heads", HKV);
  tg_attr_s(&g, n, "update_rule", "gated_delta");
  tg_output(&g, "y");
  tg_output(&g, "present");
  decompose(&g);

  float q[B * T * HQ * DK], k[B * T * HKV * DK], v[B * T * HKV * DV], past[B * HKV * DK * DV];
  float decay[B * T * HKV], beta[B * T], y[B * T * HQ * DV], present[B * HKV * DK * DV];
  fill(q, B * T * HQ * DK, 15), fill(k, B * T * HKV * DK, 16), fill(v, B * T * HKV * DV, 17);
  fill(past, B * HKV * DK * DV, 18), fill(decay, B * T * HKV, 19), fill(beta, B * T, 20);
  double st[B][HKV][DK][DV];
  for (int b = 0; b < B; b++)
    for (int h = 0; h < HKV; h++)
      for (int i = 0; i < DK; i++)
        for (int m = 0; m < DV; m++) st[b][h][i][m] = past[((b * HKV + h) * DK + i) * DV + m];
  for (int t = 0; t < T; t++)
    for (int b = 0; b < B; b++) {
      for (int h = 0; h < HKV; h++) {
        const float *kt = &k[(b * T + t) * HKV * DK + h * DK], *vt = &v[(b * T + t) * HKV * DV + h * DV];
        double gate = exp(decay[(b * T + t) * HKV + h]), corrected[DV];
        for (int i = 0; i < DK; i++)
          for (int m = 0; m < DV; m++) st[b][h][i][m] *= gate;
        for (int m = 0; m < DV; m++) {
          double retrieved = 0;
          for (int i = 0; i < DK; i++) retrieved += st[b][h][i][m] * kt[i];
          corrected[m] = beta[b * T + t] * (vt[m] - retrieved);
        }
        for (int i = 0; i < DK; i++)
          for (int m = 0; m < DV; m++) st[b][h][i][m] += kt[i] * corrected[m];
      }
      for (int hq = 0; hq < HQ; hq++)
        for (int m = 0; m < DV; m++) {
          double acc = 0;
          for (int i = 0; i < DK; i++) acc += q[(b * T + t) * HQ * DK + hq * DK + i] * st[b][hq / (HQ / HKV)][i][m];
          y[(b * T + t) * HQ * DV + hq * DV + m] = (float)(acc / sqrt(DK));
        }
    }
  for (int b = 0; b < B; b++)
    for (int h = 0; h < HKV; h++)
      for (int i = 0; i < DK; i++)
        for (int m = 0; m < DV; m++) present[((b * HKV + h) * DK + i) * DV + m] = (float)st[b][h][i][m];
  const void *inputs[] = {q, k, v, past, decay, beta};
  run_and_compare(&g, B, inputs, (float *[]){y, present}, (int64_t[]){B * T * HQ * DV, B * HKV * DK * DV}, 2, 1e-5);
  kn_graph_free(&g);
}

/* ---- bad input: one diagnostic naming the node and the culprit ---- */

static void bad_inputs_are_diagnosed(void **state) {
  (void)state;
  struct {
    kn_op op;
    const char *ins, *shapes[4], *attr, *needle;
    int64_t attr_value;
  } cases[] = {
      {KN_OP_ATTENTION, "a,b,c", {"1,3,8", "1,3,8", "1,3,8"}, NULL,
       "node 'bad' (Attention): attributes q_num_heads and kv_num_heads must be positive", 0},
      {KN_OP_ATTENTION, "a,b,c,d", {"1,2,3,4", "1,2,5,4", "1,2,5,4", "5,5"}, NULL,
       "attn_mask [5,5] does not broadcast to [1,2,3,5]", 0},
      {KN_OP_ATTENTION, "a,b,c", {"1,3,3,4", "1,2,5,4", "1,2,5,4"}, NULL,
       "q_num_heads 3 is not a multiple of kv_num_heads 2", 0},
      {KN_OP_ATTENTION, "a,b,c", {"1,2,3,4", "1,2,5,4", "1,2,5,4"}, "qk_matmul_output_mode",
       "attribute qk_matmul_output_mode must be 0..3, got 7", 7},
      {KN_OP_ROTARY_EMBEDDING, "a,b,c", {"1,2,3,8", "1,3,3", "1,3,3"}, "rotary_embedding_dim",
       "rotary dimension 5 (attribute rotary_embedding_dim) must be even", 5},
      {KN_OP_RMS_NORM, "a,b", {"2,3", "2"}, NULL, "scale [2] does not broadcast to X [2,3]", 0},
      {KN_OP_CAUSAL_CONV_WITH_STATE, "a,b", {"1,2,5", "3,1,4"}, NULL, "weight is float32 [3,1,4]; expected", 0},
      {KN_OP_LINEAR_ATTENTION, "a,b,c", {"1,2,8", "1,2,8", "1,2,8"}, NULL,
       "attributes q_num_heads 0 and kv_num_heads 0 must be positive", 0},
      {KN_OP_LINEAR_ATTENTION, "a,b,c", {"1,129,8", "1,129,8", "1,129,8"}, NULL,
       "query [1,129,8]: sequence length must be 1..128 (the recurrence is unrolled)", 0},
      {KN_OP_ATTENTION, "a,b,c", {"1,2,3,4", "1,2,5,4", "1,2,5,4"}, "softmax_precision",
       "attribute softmax_precision 7 is not a floating-point type", 7},
      {KN_OP_FLEX_ATTENTION, "a,b,c", {"1,2,3,4", "1,2,5,4", "1,2,5,4"}, NULL,
       "FlexAttention is an op of domain 'ai.onnx.preview'", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    kn_graph g;
    kn_graph_init(&g);
    g.opset = 27;
    g.max_batch = 1;
    const char *names[4] = {"a", "b", "c", "d"};
    for (int k = 0; k < 4 && cases[i].shapes[k]; k++)
      tg_input(&g, names[k], KN_DT_F32, cases[i].shapes[k]);
    int n = tg_node(&g, cases[i].op, "bad", cases[i].ins, "y");
    if (cases[i].attr) tg_attr_i(&g, n, cases[i].attr, cases[i].attr_value);
    tg_output(&g, "y");
    tg_infer_fails(&g, cases[i].needle);
    kn_graph_free(&g);
  }
}

/* NaN or infinite scales / softcaps / epsilons would make every output
 * NaN (or inf): refused, naming the node and the attribute. */
static void non_finite_attributes_refused(void **state) {
  (void)state;
  struct {
    kn_op op;
    const char *ins, *shapes[3], *attr, *needle;
    float value;
  } cases[] = {
      {KN_OP_ATTENTION, "a,b,c", {"1,2,3,4", "1,2,5,4", "1,2,5,4"}, "scale",
       "node 'bad' (Attention): attribute scale nan must be a finite number", NAN},
      {KN_OP_ATTENTION, "a,b,c", {"1,2,3,4", "1,2,5,4", "1,2,5,4"}, "scale",
       "node 'bad' (Attention): attribute scale inf must be a finite number", INFINITY},
      {KN_OP_ATTENTION, "a,b,c", {"1,2,3,4", "1,2,5,4", "1,2,5,4"}, "scale",
       "node 'bad' (Attention): attribute scale -inf must be a finite number", -INFINITY},
      {KN_OP_ATTENTION, "a,b,c", {"1,2,3,4", "1,2,5,4", "1,2,5,4"}, "softcap",
       "node 'bad' (Attention): attribute softcap inf must be finite and >= 0", INFINITY},
      {KN_OP_LINEAR_ATTENTION, "a,b,c", {"1,2,8", "1,2,8", "1,2,8"}, "scale",
       "node 'bad' (LinearAttention): attribute scale nan must be a finite number", NAN},
      {KN_OP_RMS_NORM, "a,b", {"2,3", "3"}, "epsilon",
       "node 'bad' (RMSNormalization): attribute epsilon nan must be a finite number", NAN},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    kn_graph g;
    kn_graph_init(&g);
    g.opset = 24;
    g.max_batch = 1;
    const char *names[3] = {"a", "b", "c"};
    for (int k = 0; k < 3 && cases[i].shapes[k]; k++) tg_input(&g, names[k], KN_DT_F32, cases[i].shapes[k]);
    int n = tg_node(&g, cases[i].op, "bad", cases[i].ins, "y");
    if (cases[i].op == KN_OP_LINEAR_ATTENTION) {
      tg_attr_i(&g, n, "q_num_heads", 2);
      tg_attr_i(&g, n, "kv_num_heads", 2);
      tg_attr_s(&g, n, "update_rule", "linear");
    }
    tg_attr_f(&g, n, cases[i].attr, cases[i].value);
    tg_output(&g, "y");
    tg_infer_fails(&g, cases[i].needle);
    kn_graph_free(&g);
  }
}

/* FlexAttention's score_mod / prob_mod subgraphs are refused by name. */
static void flex_attention_subgraph_refused(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.opset = 26;
  g.max_batch = 1;
  tg_input(&g, "q", KN_DT_F32, "1,2,3,4");
  tg_input(&g, "k", KN_DT_F32, "1,2,5,4");
  tg_input(&g, "v", KN_DT_F32, "1,2,5,4");
  int n = tg_node(&g, KN_OP_FLEX_ATTENTION, "flex", "q,k,v", "y");
  g.nodes[n].domain = "ai.onnx.preview";
  kn_node_add_attr(&g, &g.nodes[n], (kn_attr){.name = "score_mod", .kind = KN_ATTR_GRAPH, .s = "graph", .value = -1});
  tg_output(&g, "y");
  tg_infer_fails(&g, "node 'flex' (FlexAttention): attribute 'score_mod' (a subgraph) is not supported");
  kn_graph_free(&g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(attention_gqa_past_mask_causal),
      cmocka_unit_test(rms_norm_golden),
      cmocka_unit_test(rotary_interleaved_partial),
      cmocka_unit_test(causal_conv_short_input),
      cmocka_unit_test(linear_attention_gated_delta_gqa),
      cmocka_unit_test(flex_attention_subgraph_refused),
      cmocka_unit_test(bad_inputs_are_diagnosed),
      cmocka_unit_test(non_finite_attributes_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
