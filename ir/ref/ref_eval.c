/* ref_eval.c — the reference interpreter's driver: element access helpers,
 * the op dispatch, batch coefficients (int64 data a + b*N from Shape of a
 * batch tensor), and the node / whole-graph entry points.
 *
 * Batch coefficients travel only through ops whose result is linear in them:
 * pure data movement (Gather, Concat, Slice, Reshape, ... run once on the data
 * and once on the coefficients), Add/Sub/Neg, Mul by a plain tensor and exact
 * Div by one, and the comparisons, Max and Min whose outcome is the same for
 * every batch N >= 1 (done inside kn_ref_elemwise). Any other op that sees them
 * returns KN_REF_NOFOLD and stays in the graph. */
#include "ir/ref/ref_eval.h"
#include "ir/shape/spatial.h"
#include "ir/passes/winograd.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph/index_family.h"

/* ---- element access ---- */

double kn_ref_load(kn_dtype t, const void *p, int64_t i) {
  switch (t) {
  case KN_DT_F32: return ((const float *)p)[i];
  case KN_DT_F64: return ((const double *)p)[i];
  case KN_DT_F16: return kn_f16_to_f32(((const uint16_t *)p)[i]);
  case KN_DT_BF16: return kn_bf16_to_f32(((const uint16_t *)p)[i]);
  case KN_DT_U64: return (double)((const uint64_t *)p)[i];
  default:
    if (kn_dtype_is_f8(t)) return kn_f8_to_f32(t, ((const uint8_t *)p)[i]);
    return (double)kn_ref_load_int(t, p, i);
  }
}

void kn_ref_store(kn_dtype t, void *p, int64_t i, double v) {
  switch (t) {
  case KN_DT_F32: ((float *)p)[i] = (float)v; return;
  case KN_DT_F64: ((double *)p)[i] = v; return;
  case KN_DT_F16: ((uint16_t *)p)[i] = kn_f32_to_f16((float)v); return;
  case KN_DT_BF16: ((uint16_t *)p)[i] = kn_f32_to_bf16((float)v); return;
  case KN_DT_BOOL: ((uint8_t *)p)[i] = v != 0; return;
  case KN_DT_U64:
    ((uint64_t *)p)[i] = kn_f2u64_sat(v);
    return;
  default:
    if (kn_dtype_is_f8(t)) ((uint8_t *)p)[i] = kn_f32_to_f8(t, (float)v);
    else kn_ref_store_int(t, p, i, kn_f2i64_sat(v));
    return;
  }
}

int64_t kn_ref_load_int(kn_dtype t, const void *p, int64_t i) {
  switch (t) {
  case KN_DT_U8:
  case KN_DT_U2:
  case KN_DT_U4: return ((const uint8_t *)p)[i];
  case KN_DT_I8:
  case KN_DT_I2:
  case KN_DT_I4: return ((const int8_t *)p)[i];
  case KN_DT_U16: return ((const uint16_t *)p)[i];
  case KN_DT_I16: return ((const int16_t *)p)[i];
  case KN_DT_I32: return ((const int32_t *)p)[i];
  case KN_DT_I64: return ((const int64_t *)p)[i];
  case KN_DT_U32: return ((const uint32_t *)p)[i];
  case KN_DT_U64: return (int64_t)((const uint64_t *)p)[i];
  case KN_DT_BOOL: return ((const uint8_t *)p)[i] != 0;
  case KN_DT_F32:
  case KN_DT_F64:
  case KN_DT_F16:
  case KN_DT_BF16: return kn_f2i64_sat(kn_ref_load(t, p, i));
  default:
    if (kn_dtype_is_f8(t)) return kn_f2i64_sat(kn_ref_load(t, p, i));
    KN_UNREACHABLE("load of an invalid dtype");
  }
  return 0;
}

void kn_ref_store_int(kn_dtype t, void *p, int64_t i, int64_t v) {
  switch (t) {
  case KN_DT_U8: ((uint8_t *)p)[i] = (uint8_t)v; return;
  case KN_DT_I8: ((int8_t *)p)[i] = (int8_t)v; return;
  case KN_DT_I2:
  case KN_DT_I4:
  case KN_DT_U2:
  case KN_DT_U4: ((int8_t *)p)[i] = (int8_t)kn_subbyte_wrap(t, v); return;
  case KN_DT_U16: ((uint16_t *)p)[i] = (uint16_t)v; return;
  case KN_DT_I16: ((int16_t *)p)[i] = (int16_t)v; return;
  case KN_DT_I32: ((int32_t *)p)[i] = (int32_t)v; return;
  case KN_DT_I64: ((int64_t *)p)[i] = v; return;
  case KN_DT_U32: ((uint32_t *)p)[i] = (uint32_t)v; return;
  case KN_DT_U64: ((uint64_t *)p)[i] = (uint64_t)v; return;
  case KN_DT_BOOL: ((uint8_t *)p)[i] = v != 0; return;
  case KN_DT_F32:
  case KN_DT_F64:
  case KN_DT_F16:
  case KN_DT_BF16: kn_ref_store(t, p, i, (double)v); return;
  default:
    if (kn_dtype_is_f8(t)) {
      kn_ref_store(t, p, i, (double)v);
      return;
    }
    KN_UNREACHABLE("store of an invalid dtype");
  }
}

int64_t kn_ref_numel(const kn_shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->dim[i];
  return n;
}

void kn_ref_strides(const kn_shape *s, int64_t *stride) {
  int64_t acc = 1;
  for (int i = s->rank - 1; i >= 0; i--) {
    stride[i] = acc;
    acc *= s->dim[i];
  }
}

int64_t kn_ref_bcast_offset(const kn_shape *in, const kn_shape *out, const int64_t *idx) {
  int64_t off = 0, stride = 1;
  int shift = out->rank - in->rank;
  for (int i = in->rank - 1; i >= 0; i--) {
    if (in->dim[i] != 1) off += idx[i + shift] * stride;
    stride *= in->dim[i];
  }
  return off;
}

bool kn_ref_next_index(const kn_shape *s, int64_t *idx) {
  for (int i = s->rank - 1; i >= 0; i--) {
    if (++idx[i] < s->dim[i]) return true;
    idx[i] = 0;
  }
  return false;
}

int kn_ref_error(kn_ref_call *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = kn_node_verror(c->d, c->node, fmt, ap);
  va_end(ap);
  return rc;
}

int kn_ref_index_at(kn_ref_call *c, int64_t v, int64_t dim, int64_t *at) {
  if (v >= -dim && v < dim) {
    *at = v < 0 ? v + dim : v;
    return 1;
  }
  if (c->run_time) return 0;
  return kn_ref_error(c, "index %lld out of range for dim %lld", (long long)v, (long long)dim);
}

/* ---- dispatch ---- */

static int dispatch(kn_ref_call *c) {
  if (kn_spatial_op(c->node->op)) return kn_ref_spatial(c);
  if (kn_winograd_op(c->node->op)) return kn_ref_winograd(c);
  if (kn_index_family_has(c->node->op)) return kn_ref_index(c);
  if (c->node->op == KN_OP_BITCAST) return kn_ref_misc(c);
  switch (kn_op_class_of(c->node->op)) {
  case KN_CLASS_CONTRACTION:
  case KN_CLASS_REDUCE: return kn_ref_nn(c);
  case KN_CLASS_ELEMWISE:
    return c->node->op == KN_OP_BATCH_NORM ? kn_ref_nn(c) : kn_ref_elemwise(c);
  case KN_CLASS_INJECTIVE:
  case KN_CLASS_VIEW:
  case KN_CLASS_CONSTANT: return kn_ref_movement(c);
  }
  return kn_ref_error(c, "op not supported by the reference interpreter");
}

/* Which inputs of a data-movement op carry elements through unchanged
 * (so their batch coefficients move the same way); -1 if the op is not one. */
static int moved_input(const kn_ref_call *c, int k) {
  switch (c->node->op) {
  case KN_OP_IDENTITY:
  case KN_OP_DROPOUT:
  case KN_OP_RESHAPE:
  case KN_OP_FLATTEN:
  case KN_OP_SQUEEZE:
  case KN_OP_UNSQUEEZE:
  case KN_OP_TRANSPOSE:
  case KN_OP_SLICE:
  case KN_OP_SPLIT:
  case KN_OP_GATHER:
  case KN_OP_EXPAND:
  case KN_OP_TILE: return k == 0;
  case KN_OP_CONCAT: return 1;
  case KN_OP_WHERE: return k == 1 || k == 2;
  case KN_OP_CAST: return k == 0 && c->in[0].dtype == KN_DT_I64 && c->out[0].dtype == KN_DT_I64;
  default: return -1;
  }
}

/* Runs a data-movement op twice: on the data, then on the coefficients. */
static int compute_moved_coef(kn_ref_call *c) {
  for (int k = 0; k < c->n_in; k++)
    if (c->in[k].data && c->in[k].coef && moved_input(c, k) != 1) return KN_REF_NOFOLD;
  kn_ref_tensor *in = KN_NEW_ARRAY(c->arena, kn_ref_tensor, c->n_in);
  kn_ref_tensor *out = KN_NEW_ARRAY(c->arena, kn_ref_tensor, c->n_out);
  for (int k = 0; k < c->n_in; k++) {
    in[k] = c->in[k];
    in[k].coef = NULL;
  }
  kn_ref_call sub = *c;
  sub.in = in;
  int rc = dispatch(&sub);
  if (rc != 0) return rc;
  for (int k = 0; k < c->n_in; k++) {
    if (!c->in[k].data || moved_input(c, k) != 1) continue;
    in[k].dtype = KN_DT_I64;
    in[k].data = c->in[k].coef ? c->in[k].coef
                               : kn_arena_alloc(c->arena, sizeof(int64_t) * kn_ref_numel(&in[k].shape));
  }
  for (int k = 0; k < c->n_out; k++) {
    out[k] = c->out[k];
    if (out[k].data) out[k].data = kn_arena_alloc(c->arena, sizeof(int64_t) * kn_ref_numel(&out[k].shape));
  }
  sub.out = out;
  rc = dispatch(&sub);
  if (rc != 0) return rc;
  /* Only int64 outputs carry coefficients (not e.g. Dropout's bool mask). */
  for (int k = 0; k < c->n_out; k++)
    if (c->out[k].dtype == KN_DT_I64) c->out[k].coef = out[k].data;
  return 0;
}

int kn_ref_compute(kn_ref_call *c) {
  bool any_coef = false;
  for (int k = 0; k < c->n_in; k++) any_coef |= c->in[k].data && c->in[k].coef;
  int rc;
  kn_op op = c->node->op;
  if (!any_coef || op == KN_OP_SHAPE || op == KN_OP_SIZE || op == KN_OP_ADD || op == KN_OP_SUB ||
      op == KN_OP_MUL || op == KN_OP_DIV || op == KN_OP_NEG || op == KN_OP_EQUAL || op == KN_OP_LESS ||
      op == KN_OP_GREATER || op == KN_OP_GREATER_OR_EQUAL || op == KN_OP_LESS_OR_EQUAL ||
      op == KN_OP_MAX || op == KN_OP_MIN)
    rc = dispatch(c);
  else if (moved_input(c, 0) >= 0)
    rc = compute_moved_coef(c);
  else
    rc = KN_REF_NOFOLD;
  if (rc != 0) return rc;
  /* Drop all-zero coefficient arrays. */
  for (int k = 0; k < c->n_out; k++) {
    if (!c->out[k].coef) continue;
    bool zero = true;
    int64_t n = kn_ref_numel(&c->out[k].shape);
    for (int64_t i = 0; i < n && zero; i++) zero = c->out[k].coef[i] == 0;
    if (zero) c->out[k].coef = NULL;
  }
  return 0;
}

/* ---- node evaluation (constant folding) ---- */

int kn_ref_eval_node(kn_graph *g, int node, kn_diag *d) {
  const kn_node *n = &g->nodes[node];
  bool shape_only = n->op == KN_OP_SHAPE || n->op == KN_OP_SIZE;
  for (int k = 0; k < n->n_in; k++) {
    int v = n->in[k];
    if (v < 0) continue;
    const kn_value *val = &g->values[v];
    if (shape_only && k == 0 ? !val->shape_known : !val->data) return KN_REF_NOFOLD;
  }
  for (int k = 0; k < n->n_out; k++) {
    const kn_value *val = &g->values[n->out[k]];
    if (!val->shape_known || val->dtype == KN_DT_INVALID)
      return kn_diag_error(d, "node '%s' (%s): output '%s' has no inferred shape", n->name,
                           n->op_type, val->name);
    if (val->shape.batch_mask) return KN_REF_NOFOLD;
  }
  kn_ref_tensor *in = calloc((size_t)n->n_in + 1, sizeof(kn_ref_tensor));
  kn_ref_tensor *out = calloc((size_t)n->n_out + 1, sizeof(kn_ref_tensor));
  KN_ASSERT(in && out, "out of memory");
  for (int k = 0; k < n->n_in; k++) {
    int v = n->in[k];
    if (v < 0) continue;
    const kn_value *val = &g->values[v];
    if (shape_only && k == 0) {
      in[k].dtype = val->dtype;
      in[k].shape = val->shape;
      in[k].data = val->data ? val->data : (void *)val; /* never read */
      continue;
    }
    in[k] = (kn_ref_tensor){val->dtype, val->shape, val->data, val->batch_coef};
  }
  for (int k = 0; k < n->n_out; k++) {
    const kn_value *val = &g->values[n->out[k]];
    out[k].dtype = val->dtype;
    out[k].shape = val->shape;
    out[k].data = kn_arena_alloc(&g->arena, kn_dtype_size(val->dtype) * (size_t)kn_ref_numel(&val->shape));
  }
  kn_ref_call c = {g, n, in, n->n_in, out, n->n_out, &g->arena, d, .run_time = false};
  int rc = kn_ref_compute(&c);
  for (int k = 0; k < n->n_out && rc == 0; k++) {
    kn_value *val = &g->values[n->out[k]];
    val->data = out[k].data;
    val->batch_coef = out[k].coef;
  }
  free(in);
  free(out);
  return rc;
}

/* ---- whole-graph interpretation ---- */

static kn_shape resolve_shape(const kn_shape *s, int64_t batch) {
  kn_shape r = *s;
  for (int i = 0; i < r.rank; i++)
    if (r.batch_mask & (1u << i)) r.dim[i] *= batch;
  r.batch_mask = 0;
  return r;
}

int kn_ref_run_graph(const kn_graph *g, const void *const *inputs, void **outputs, int64_t batch,
                     kn_diag *d) {
  if (batch < 1 || batch > g->max_batch)
    return kn_diag_error(d, "ref: batch %lld outside [1, %lld]", (long long)batch,
                         (long long)g->max_batch);
  kn_arena arena;
  kn_arena_init(&arena);
  int rc = 0;
  kn_ref_tensor *t = KN_NEW_ARRAY(&arena, kn_ref_tensor, g->n_values);
  for (int i = 0; i < g->n_inputs; i++) {
    const kn_value *v = &g->values[g->inputs[i]];
    t[g->inputs[i]] = (kn_ref_tensor){v->dtype, resolve_shape(&v->shape, batch), (void *)inputs[i], NULL};
  }
  for (int v = 0; v < g->n_values; v++) {
    const kn_value *val = &g->values[v];
    if (!val->data) continue;
    t[v] = (kn_ref_tensor){val->dtype, val->shape, val->data, NULL};
    if (val->batch_coef) {
      int64_t n = kn_ref_numel(&val->shape);
      int64_t *data = KN_NEW_ARRAY(&arena, int64_t, n);
      for (int64_t i = 0; i < n; i++)
        data[i] = ((const int64_t *)val->data)[i] + val->batch_coef[i] * batch;
      t[v].data = data;
    }
  }
  for (int i = 0; i < g->n_nodes && rc == 0; i++) {
    const kn_node *n = &g->nodes[i];
    if (n->dead) continue;
    kn_ref_tensor *in = KN_NEW_ARRAY(&arena, kn_ref_tensor, n->n_in);
    kn_ref_tensor *out = KN_NEW_ARRAY(&arena, kn_ref_tensor, n->n_out);
    for (int k = 0; k < n->n_in && rc == 0; k++) {
      int v = n->in[k];
      if (v < 0) continue;
      if (!t[v].data)
        rc = kn_diag_error(d, "ref: node '%s' (%s) reads '%s' before it is computed", n->name,
                           n->op_type, g->values[v].name);
      in[k] = t[v];
    }
    for (int k = 0; k < n->n_out && rc == 0; k++) {
      const kn_value *val = &g->values[n->out[k]];
      if (!val->shape_known || val->dtype == KN_DT_INVALID) {
        rc = kn_diag_error(d, "ref: value '%s' has no inferred shape", val->name);
        break;
      }
      out[k].dtype = val->dtype;
      out[k].shape = resolve_shape(&val->shape, batch);
      out[k].data = kn_arena_alloc(&arena, kn_dtype_size(val->dtype) * (size_t)kn_ref_numel(&out[k].shape));
    }
    if (rc) break;
    kn_ref_call c = {g, n, in, n->n_in, out, n->n_out, &arena, d, .run_time = true};
    rc = kn_ref_compute(&c);
    if (rc == KN_REF_NOFOLD)
      rc = kn_diag_error(d, "ref: node '%s' (%s) cannot be evaluated", n->name, n->op_type);
    for (int k = 0; k < n->n_out && rc == 0; k++) t[n->out[k]] = out[k];
  }
  for (int i = 0; i < g->n_outputs && rc == 0; i++) {
    const kn_ref_tensor *o = &t[g->outputs[i]];
    if (!o->data) {
      rc = kn_diag_error(d, "ref: graph output '%s' was not computed", g->values[g->outputs[i]].name);
      break;
    }
    memcpy(outputs[i], o->data, kn_dtype_size(o->dtype) * (size_t)kn_ref_numel(&o->shape));
  }
  kn_arena_free(&arena);
  return rc;
}
