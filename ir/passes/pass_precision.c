/* pass_precision.c — `kiln compile --precision fp16|bf16`: the graph
 * computes and stores its float32 tensors in a 16-bit float format (`low`,
 * float16 or bfloat16), with float32 at its edges.
 *
 * Requires: shapes inferred, nodes toposorted, and constant folding done
 * (the pipeline's `cleanup`), so that every value known at compile time is a
 * constant here and converts once, after the folds computed it in float32.
 *
 * Guarantees, for low = float16 / bfloat16 (float32: nothing changes):
 *  - every float32 constant a node reads as data holds low, rounded to
 *    nearest even, in place (a constant also read as a float32 parameter or
 *    named as a graph output keeps its float32 data there and gets a low
 *    copy named "<name>.fp16" / ".bf16" for the data reads);
 *  - a finite constant value that rounds to infinity in low is an error: one
 *    diagnostic per constant, naming it and a node reading it, every such
 *    constant reported in one run, and the graph left unchanged;
 *  - every float32 graph input is read through a Cast to low, and every
 *    float32 graph output is written by a Cast from low: the artifact's
 *    inputs and outputs (its ABI) stay float32;
 *  - Cast(to=float32) casts to low, and a node that makes float32 out of no
 *    float32 input (ConstantOfShape ...) is read through a Cast to low, so
 *    shape inference types every float32 intermediate low; a `dtype`
 *    attribute of float32 (RandomNormal ...) becomes low;
 *  - integer, bool and the other float tensors are unchanged; so are the
 *    float32 parameters ONNX types float32 whatever the data (Resize's roi and
 *    scales, Upsample's scales) when they are constants or graph inputs.
 * New values get their dtype and shape; nodes are sorted again.
 *
 * Accumulation: the compute definitions (ir/te/, kn_te_acc_dtype) sum 16-bit
 * floats in float32 and round once: contractions, sum-like reductions,
 * average pools, softmax and layer normalisation. The pass itself only
 * chooses where 16 bits are stored. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/passes/passes.h"

/* Input k of node n is a float32 parameter whatever the data's dtype. */
static bool reads_f32_param(const kn_node *n, int k) {
  switch (n->op) {
  case KN_OP_RESIZE:
  case KN_OP_RESIZE_DECLARED: return k == 1 || k == 2;
  case KN_OP_UPSAMPLE: return k == 1;
  default: return false;
  }
}

static uint16_t to_low(kn_dtype low, float x) { return low == KN_DT_F16 ? kn_f32_to_f16(x) : kn_f32_to_bf16(x); }
static float from_low(kn_dtype low, uint16_t h) { return low == KN_DT_F16 ? kn_f16_to_f32(h) : kn_bf16_to_f32(h); }

/* Largest finite value of low, for the diagnostic. */
static double low_max(kn_dtype low) { return low == KN_DT_F16 ? 65504.0 : (double)from_low(low, 0x7f7f); }

static const char *flag_of(kn_dtype low) { return low == KN_DT_F16 ? "fp16" : "bf16"; }

/* Appends a diagnostic when float32 constant v has finite values that its
 * conversion `conv` holds as infinities; returns whether it did. */
static bool check_overflow(kn_graph *g, int v, const uint16_t *conv, int reader, kn_dtype low, kn_diag *d) {
  const kn_value *val = &g->values[v];
  const float *x = val->data;
  int64_t n = kn_shape_numel_max(&val->shape, 1), count = 0, worst = -1;
  for (int64_t i = 0; i < n; i++)
    if (isinf(from_low(low, conv[i])) && isfinite(x[i])) {
      if (worst < 0 || fabsf(x[i]) > fabsf(x[worst])) worst = i;
      count++;
    }
  if (!count) return false;
  const kn_node *r = &g->nodes[reader];
  kn_diag_error(d,
                "--precision %s: constant '%s' (read by node '%s' (%s)): %lld value%s overflow%s %s (%g at index "
                "%lld; its largest finite value is %g)",
                flag_of(low), val->name, r->name, r->op_type, (long long)count, count == 1 ? "" : "s",
                count == 1 ? "s" : "", kn_dtype_name(low), (double)x[worst], (long long)worst, low_max(low));
  return true;
}

/* The data of float32 constant v converted to low, in g's arena. */
static uint16_t *converted(kn_graph *g, int v, kn_dtype low) {
  const kn_value *val = &g->values[v];
  int64_t n = kn_shape_numel_max(&val->shape, 1);
  uint16_t *out = KN_NEW_ARRAY(&g->arena, uint16_t, n > 0 ? n : 1);
  const float *x = val->data;
  for (int64_t i = 0; i < n; i++) out[i] = to_low(low, x[i]);
  return out;
}

/* Makes the live nodes among the first nn that read v as data (not as a
 * float32 parameter) read `to` instead. */
static void redirect_data_reads(kn_graph *g, int nn, int v, int to) {
  for (int i = 0; i < nn; i++) {
    kn_node *n = &g->nodes[i];
    for (int k = 0; !n->dead && k < n->n_in; k++)
      if (n->in[k] == v && !reads_f32_param(n, k)) n->in[k] = to;
  }
}

/* A value like v (shape) of dtype t named v's name + suffix, written by
 * Cast(from) named likewise. Returns the Cast's output. */
static int add_cast(kn_graph *g, int from, int v, const char *suffix, kn_dtype t) {
  int out = kn_pass_new_value(g, g->values[v].name, suffix, t, &g->values[v].shape);
  kn_graph_add_node(g, KN_OP_CAST, g->values[out].name, &from, 1, &out, 1);
  kn_node_add_attr(g, &g->nodes[g->n_nodes - 1], kn_pass_attr_int("to", kn_dtype_to_onnx(t)));
  return out;
}

/* Node i makes float32 out of no float32 input (a Cast aside). */
static bool makes_f32(const kn_graph *g, const kn_node *n, int *out_index) {
  if (n->op == KN_OP_CAST) return false;
  for (int k = 0; k < n->n_in; k++)
    if (n->in[k] >= 0 && g->values[n->in[k]].dtype == KN_DT_F32) return false;
  for (int k = 0; k < n->n_out; k++)
    if (g->values[n->out[k]].dtype == KN_DT_F32) {
      *out_index = k;
      return true;
    }
  return false;
}

int kn_pass_precision(kn_graph *g, kn_dtype low, kn_diag *d) {
  if (low == KN_DT_F32) return 1;
  KN_ASSERT(low == KN_DT_F16 || low == KN_DT_BF16, "--precision names a 16-bit float");
  int nv = g->n_values, nn = g->n_nodes, status = -1;
  int *data_reader = malloc(sizeof(int) * (size_t)nv); /* a node reading v as data, or -1 */
  bool *kept = calloc((size_t)nv, sizeof(bool));       /* v also read as float32 (parameter, graph output) */
  int *maker_out = malloc(sizeof(int) * (size_t)(nn > 0 ? nn : 1)); /* makes_f32's output, or -1 */
  uint16_t **conv = calloc((size_t)nv, sizeof(uint16_t *)); /* constants' data converted (g's arena) */
  KN_ASSERT(data_reader && kept && maker_out && conv, "out of memory");
  for (int v = 0; v < nv; v++) data_reader[v] = -1;
  for (int i = 0; i < nn; i++) {
    const kn_node *n = &g->nodes[i];
    maker_out[i] = -1;
    if (n->dead) continue;
    for (int k = 0; k < n->n_in; k++) {
      int v = n->in[k];
      if (v < 0 || g->values[v].dtype != KN_DT_F32) continue;
      if (reads_f32_param(n, k)) kept[v] = true;
      else if (data_reader[v] < 0) data_reader[v] = i;
    }
    int k;
    if (makes_f32(g, n, &k)) maker_out[i] = k;
  }
  for (int i = 0; i < g->n_outputs; i++) kept[g->outputs[i]] = true;

  /* every constant converted once, every overflow reported, before anything changes */
  int failures = 0;
  for (int v = 0; v < nv; v++)
    if (g->values[v].data && data_reader[v] >= 0) {
      conv[v] = converted(g, v, low);
      failures += check_overflow(g, v, conv[v], data_reader[v], low, d);
    }
  if (failures) goto done;

  const char *suffix = low == KN_DT_F16 ? ".fp16" : ".bf16";
  /* constants */
  for (int v = 0; v < nv; v++) {
    kn_value *val = &g->values[v];
    if (!conv[v]) continue;
    if (!kept[v]) {
      val->data = conv[v];
      val->dtype = low;
      continue;
    }
    redirect_data_reads(g, nn, v, kn_pass_new_const(g, val->name, suffix, low, &val->shape, conv[v]));
  }
  /* graph inputs: read through a Cast to low */
  for (int i = 0; i < g->n_inputs; i++) {
    int v = g->inputs[i];
    if (g->values[v].dtype == KN_DT_F32 && data_reader[v] >= 0)
      redirect_data_reads(g, nn, v, add_cast(g, v, v, suffix, low));
  }
  /* float32 made from nothing float32 becomes low */
  for (int i = 0; i < nn; i++) {
    kn_node *n = &g->nodes[i];
    if (n->dead) continue;
    kn_attr *to = (kn_attr *)kn_node_attr(n, n->op == KN_OP_CAST ? "to" : "dtype");
    if (to && to->kind == KN_ATTR_INT && to->i == kn_dtype_to_onnx(KN_DT_F32)) {
      to->i = kn_dtype_to_onnx(low); /* shape inference retypes its output */
    } else if (maker_out[i] >= 0) {
      int v = n->out[maker_out[i]];
      redirect_data_reads(g, nn, v, add_cast(g, v, v, suffix, low));
    }
  }
  /* graph outputs computed in low: written by a Cast back to float32 (a
   * maker's float32 output stays as it is) */
  for (int i = 0; i < g->n_outputs - g->n_checks; i++) {
    int v = g->outputs[i], p = g->values[v].producer;
    if (p < 0 || p >= nn || g->values[v].dtype != KN_DT_F32 || maker_out[p] >= 0) continue;
    int lowv = kn_pass_new_value(g, g->values[v].name, suffix, low, &g->values[v].shape);
    kn_pass_replace_uses(g, v, lowv);
    kn_node *n = &g->nodes[p];
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] == v) n->out[k] = lowv;
    g->values[lowv].producer = p;
    kn_graph_add_node(g, KN_OP_CAST, kn_arena_printf(&g->arena, "%s.to_float32", g->values[v].name), &lowv, 1, &v,
                      1);
    kn_node_add_attr(g, &g->nodes[g->n_nodes - 1], kn_pass_attr_int("to", kn_dtype_to_onnx(KN_DT_F32)));
  }
  status = kn_graph_toposort(g, d);
done:
  free(data_reader);
  free(kept);
  free(maker_out);
  free(conv);
  return status;
}
