/* pass_runtime_resize.c — Resize and Upsample whose `scales` input is a
 * run-time value, compiled for the static shape the ONNX graph declares for
 * their output.
 *
 * Shape inference needs the scales to know the output shape. When they come
 * from graph inputs (not --bind constants) and the node's output is a model
 * output declaring a static shape, this pass turns the node into
 * kiln.ResizeDeclared (ir/ops.def): inputs (X, roi, scales), Resize's
 * attributes, plus output_shape (the declared dims) and legacy = 1 for
 * Upsample / Resize-10 (asymmetric coordinates, no cubic). Its shape is
 * output_shape; its compute definition (te_ops_spatial.c) reads each
 * resized axis's scale from the scales tensor at run time (nearest, linear
 * and cubic without antialias have a fixed number of taps, so only the
 * source coordinate depends on it); the reference reads the concrete scales.
 * Every axis the scales list is resized with its run-time scale (an axis
 * whose declared dim equals its input dim may still have a scale != 1),
 * except axes of one element kept at one (element 0 whatever the scale).
 *
 * The pass appends a run-time check (kn_pass_add_check: P_run returns
 * KILN_ERR_VALUE, writing no output, when it fails) that every listed scale
 * s, read as float32 then float64 as the reference reads it, satisfies
 * 0 < s <= 1e6 and floor(s * in) == the declared dim (ONNX's output size
 * rule). Never a wrong answer: a scale that gives another shape fails the
 * check before any kernel writes an output.
 *
 * Left alone (shape inference reports them as before): scales known at
 * compile time, sizes given, antialias with linear / cubic (the filter width
 * depends on the scale), a run-time roi, untyped inputs, outputs declaring
 * no static shape (or an empty one), scales of the wrong count or dtype.
 *
 * Requires: a verified import after the composite expansions (runs before
 * the first full shape inference; infers shapes quietly itself). Guarantees:
 * the rewritten nodes keep their output value; new check values are untyped
 * until the next kn_infer_shapes; nodes toposorted. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decompose.h"
#include "passes.h"
#include "shape_infer.h"
#include "spatial.h"

/* Whether v's value is only known when the model runs: not a constant, and
 * computed from a graph input (Shape / Size read shapes, not values). */
static bool is_runtime(const kn_graph *g, int v) {
  if (v < 0 || g->values[v].data) return false;
  bool *seen = calloc((size_t)g->n_values + 1, sizeof(bool));
  int *stack = malloc(sizeof(int) * (size_t)(g->n_values + 1));
  KN_ASSERT(seen && stack, "out of memory");
  int top = 0;
  bool found = false;
  seen[v] = true;
  stack[top++] = v;
  while (top > 0 && !found) {
    int u = stack[--top];
    if (g->values[u].data) continue;
    int p = g->values[u].producer;
    if (p < 0) {
      found = kn_pass_is_graph_input(g, u);
      continue;
    }
    const kn_node *n = &g->nodes[p];
    if (n->op == KN_OP_SHAPE || n->op == KN_OP_SIZE) continue;
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0 && !seen[n->in[k]]) seen[n->in[k]] = true, stack[top++] = n->in[k];
  }
  free(stack);
  free(seen);
  return found;
}

/* Input k of n, or -1 when absent or an empty constant (ONNX's "unset"). */
static int optional_in(const kn_graph *g, const kn_node *n, int k) {
  if (k < 0 || k >= n->n_in || n->in[k] < 0) return -1;
  const kn_value *v = &g->values[n->in[k]];
  if (v->data && v->shape_known && kn_shape_numel_max(&v->shape, 1) == 0) return -1;
  return n->in[k];
}

/* The number of entries scales must have: the axes attribute's (Resize-18),
 * else the rank. */
static int listed_axes(const kn_node *n, bool legacy, int rank) {
  int na;
  const int64_t *ax = kn_node_attr_ints(n, "axes", &na);
  return ax && !legacy ? na : rank;
}

/* Whether node i is one this pass rewrites; its declared output shape and
 * its roi / scales inputs. */
static bool applies(const kn_graph *g, int i, kn_shape *out, int *roi, int *scales) {
  const kn_node *n = &g->nodes[i];
  if (n->dead || (n->op != KN_OP_RESIZE && n->op != KN_OP_UPSAMPLE) || n->n_out != 1 || n->out[0] < 0) return false;
  int y = n->out[0];
  if (g->values[y].shape_known || !kn_pass_declared_shape(g, y, out) || out->batch_mask) return false;
  int ri, si, zi;
  kn_resize_inputs(n, g->opset, &ri, &si, &zi);
  *roi = optional_in(g, n, ri);
  *scales = optional_in(g, n, si);
  if (n->n_in < 1 || n->in[0] < 0 || *scales < 0 || optional_in(g, n, zi) >= 0) return false;
  if (!is_runtime(g, *scales) || (*roi >= 0 && !g->values[*roi].data)) return false;
  const kn_value *x = &g->values[n->in[0]], *s = &g->values[*scales];
  if (!x->shape_known || x->dtype == KN_DT_INVALID || x->shape.batch_mask || x->shape.rank < 1) return false;
  if (out->rank != x->shape.rank) return false;
  for (int a = 0; a < out->rank; a++)
    if (out->dim[a] < 1 || x->shape.dim[a] < 1) return false;
  bool legacy = n->op == KN_OP_UPSAMPLE || g->opset < 11;
  if (!s->shape_known || !kn_dtype_is_float(s->dtype) || s->shape.batch_mask || s->shape.rank != 1 ||
      s->shape.dim[0] != listed_axes(n, legacy, x->shape.rank))
    return false;
  const char *mode = kn_node_attr_string(n, "mode", "nearest");
  return !(strcmp(mode, "nearest") && kn_node_attr_int(n, "antialias", 0) != 0);
}

/* The check: every listed scale s has 0 < s <= 1e6 and floor(s * in) equal
 * to the declared dim, as one bool scalar appended to the graph's checks. */
static void add_scale_check(kn_dc *b, int scales, const int *axes, int n_axes, const kn_shape *in,
                            const kn_shape *out) {
  kn_graph *g = b->g;
  double in_dims[KN_MAX_RANK], out_dims[KN_MAX_RANK];
  for (int i = 0; i < n_axes; i++) in_dims[i] = (double)in->dim[axes[i]], out_dims[i] = (double)out->dim[axes[i]];
  kn_shape vec = {.rank = 1, .dim = {n_axes}};
  int s = kn_dc_cast(b, kn_dc_cast(b, scales, KN_DT_F32), KN_DT_F64);
  int positive = kn_dc_bin(b, KN_OP_GREATER, s, kn_dc_scalar(b, KN_DT_F64, 0));
  int bounded = kn_dc_bin(b, KN_OP_LESS_OR_EQUAL, s, kn_dc_scalar(b, KN_DT_F64, 1e6));
  int size = kn_dc_un(b, KN_OP_FLOOR, kn_dc_bin(b, KN_OP_MUL, s, kn_dc_const(b, KN_DT_F64, &vec, in_dims)));
  int same = kn_dc_bin(b, KN_OP_EQUAL, size, kn_dc_const(b, KN_DT_F64, &vec, out_dims));
  int ok = kn_dc_bin(b, KN_OP_AND, kn_dc_bin(b, KN_OP_AND, positive, bounded), same);
  int min = kn_dc_reduce(b, KN_OP_REDUCE_MIN, kn_dc_cast(b, ok, KN_DT_I32), NULL, 0, false);
  kn_pass_add_check(g, kn_dc_cast(b, min, KN_DT_BOOL));
}

static void rewrite(kn_graph *g, int i, const kn_shape *out, int roi, int scales, kn_diag *d) {
  kn_node *n = &g->nodes[i];
  bool legacy = n->op == KN_OP_UPSAMPLE || g->opset < 11;
  const kn_shape in = g->values[n->in[0]].shape;
  int r = in.rank, n_axes = listed_axes(n, legacy, r), axes[KN_MAX_RANK];
  int na;
  const int64_t *ax = kn_node_attr_ints(n, "axes", &na);
  for (int k = 0; k < n_axes; k++) {
    int a = ax && !legacy ? kn_axis_norm(ax[k], r) : k;
    axes[k] = a < 0 ? 0 : a; /* a bad axes attribute fails shape inference */
  }
  const char *what = kn_arena_printf(&g->arena, "check: node '%s' (%s) scales give the declared shape", n->name,
                                     n->op_type);
  kn_dc b = {.g = g, .d = d, .node = i, .name = what, .last = -1};
  add_scale_check(&b, scales, axes, n_axes, &in, out);
  n = &g->nodes[i]; /* the node array may have grown */
  int *ins = KN_NEW_ARRAY(&g->arena, int, 3);
  ins[0] = n->in[0], ins[1] = roi, ins[2] = scales;
  n->in = ins;
  n->n_in = 3;
  n->op = KN_OP_RESIZE_DECLARED;
  n->op_type = kn_op_name(KN_OP_RESIZE_DECLARED);
  n->domain = "";
  kn_node_add_attr(g, n, kn_pass_attr_ints(g, "output_shape", out->dim, r));
  if (legacy) kn_node_add_attr(g, n, kn_pass_attr_int("legacy", 1));
}

int kn_pass_runtime_resize(kn_graph *g, kn_diag *d) {
  if (!g->out_declared) return 0;
  bool any = false;
  for (int i = 0; i < g->n_nodes && !any; i++)
    any = !g->nodes[i].dead && (g->nodes[i].op == KN_OP_RESIZE || g->nodes[i].op == KN_OP_UPSAMPLE);
  if (!any) return 0;
  kn_diag quiet;
  kn_diag_init(&quiet);
  int rc = kn_infer_shapes(g, &quiet);
  kn_diag_free(&quiet);
  if (rc == 0) return 0; /* every shape is known: nothing to do */
  int n_nodes = g->n_nodes, rewritten = 0;
  for (int i = 0; i < n_nodes; i++) {
    kn_shape out;
    int roi, scales;
    if (!applies(g, i, &out, &roi, &scales)) continue;
    rewrite(g, i, &out, roi, scales, d);
    rewritten++;
  }
  if (rewritten == 0) return 0;
  return kn_graph_toposort(g, d);
}
