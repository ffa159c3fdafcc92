/* pass_runtime_resize.c — Resize and Upsample whose shape-deciding inputs
 * (scales, sizes, roi) are run-time values, compiled for the static shape
 * the ONNX graph declares for their output.
 *
 * Shape inference needs those values to know the output shape. When they
 * come from graph inputs (not --bind constants) and the node's output is a
 * model output declaring a static shape, this pass turns the node into
 * kiln.ResizeDeclared (ir/graph/ops.def): inputs (X, roi, scales, sizes), Resize's
 * attributes, plus output_shape (the declared dims) and legacy = 1 for
 * Upsample / Resize-10 (asymmetric coordinates, no cubic). Its shape is
 * output_shape; its compute definition (te_ops_spatial.c) computes each
 * resized axis's scale at run time — a scales entry, or for sizes with
 * keep_aspect_ratio_policy not_larger / not_smaller the min / max of
 * sizes[i] / in over the listed axes — and reads a run-time roi
 * (tf_crop_and_resize); sizes with the stretch policy give the constant
 * scale out / in. Nearest, linear and cubic without antialias have a fixed
 * number of taps, so only the source coordinate depends on run-time values;
 * the reference reads the concrete values. Every axis the scales list is
 * resized with its run-time scale (an axis whose declared dim equals its
 * input dim may still have a scale != 1), except axes of one element kept
 * at one (element 0 whatever the scale).
 *
 * The pass appends a run-time check (kn_pass_add_check: P_run returns
 * KILN_ERR_VALUE, writing no output, when it fails) over the listed axes:
 *   scales  s read as float32 then float64 (as the reference reads it):
 *           0 < s <= 1e6 and floor(s * in) == the declared dim (ONNX's rule);
 *   sizes   stretch: sizes == the declared dims; otherwise 1 <= sizes <= 2^40
 *           and (int64)(keep * in + 0.5) == the declared dims;
 *   roi     |roi| <= 1e6 (finite: the coordinates stay finite and small).
 * Never a wrong answer: values that give another shape fail the check
 * before any kernel writes an output.
 *
 * Left alone (shape inference reports them as before): nodes whose values
 * are all known at compile time, antialias with linear / cubic and a
 * run-time scale (the filter width depends on it), untyped inputs, outputs
 * declaring no static shape (or an empty one), inputs of the wrong count or
 * dtype, an unknown keep_aspect_ratio_policy.
 *
 * Requires: a verified import after the composite expansions (runs before
 * the first full shape inference; infers shapes quietly itself). Guarantees:
 * the rewritten nodes keep their output value; new check values are untyped
 * until the next kn_infer_shapes; nodes toposorted. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/passes/rewrite.h"
#include "ir/passes/passes.h"
#include "ir/shape/shape_infer.h"
#include "ir/shape/spatial.h"

#define SIZE_MAX_DIM ((int64_t)1 << 40) /* sizes accepted (spatial_geom.c's limit) */
#define ROI_LIMIT 1e6                   /* |roi| accepted: keeps coordinates finite and small */

/* Input k of n, or -1 when absent or an empty constant (ONNX's "unset"). */
static int optional_in(const kn_graph *g, const kn_node *n, int k) {
  if (k < 0 || k >= n->n_in || n->in[k] < 0) return -1;
  const kn_value *v = &g->values[n->in[k]];
  if (v->data && v->shape_known && kn_shape_numel_max(&v->shape, 1) == 0) return -1;
  return n->in[k];
}

/* The number of entries scales / sizes must have: the axes attribute's
 * (Resize-18), else the rank. */
static int listed_axes(const kn_node *n, bool legacy, int rank) {
  int na;
  const int64_t *ax = kn_node_attr_ints(n, "axes", &na);
  return ax && !legacy ? na : rank;
}

/* v (-1: absent) is a typed rank-1 tensor of `count` entries, integer or
 * float. */
static bool vector_ok(const kn_graph *g, int v, bool integer, int64_t count) {
  if (v < 0) return true;
  const kn_value *val = &g->values[v];
  return val->shape_known && !val->shape.batch_mask && val->shape.rank == 1 && val->shape.dim[0] == count &&
         (integer ? kn_dtype_is_int(val->dtype) : kn_dtype_is_float(val->dtype));
}

/* The node's optional inputs, normalised (-1: absent or empty). */
typedef struct resize_inputs {
  int roi, scales, sizes;
  int policy; /* keep_aspect_ratio_policy: 0 stretch, 1 not_larger, 2 not_smaller */
} resize_inputs;

/* Whether node i is one this pass rewrites; its declared output shape and
 * its optional inputs. */
static bool applies(const kn_graph *g, int i, kn_shape *out, resize_inputs *ri) {
  const kn_node *n = &g->nodes[i];
  if (n->dead || (n->op != KN_OP_RESIZE && n->op != KN_OP_UPSAMPLE) || n->n_out != 1 || n->out[0] < 0) return false;
  int y = n->out[0];
  if (g->values[y].shape_known || !kn_pass_declared_shape(g, y, out) || out->batch_mask) return false;
  int roi_k, scales_k, sizes_k;
  kn_resize_inputs(n, g->opset, &roi_k, &scales_k, &sizes_k);
  ri->roi = optional_in(g, n, roi_k);
  ri->scales = optional_in(g, n, scales_k);
  ri->sizes = optional_in(g, n, sizes_k);
  if (n->n_in < 1 || n->in[0] < 0 || (ri->scales < 0) == (ri->sizes < 0)) return false;
  bool runtime = false;
  int opt[3] = {ri->roi, ri->scales, ri->sizes};
  for (int k = 0; k < 3; k++) {
    if (opt[k] < 0 || g->values[opt[k]].data) continue;
    if (!kn_pass_is_runtime_value(g, opt[k])) return false; /* neither constant nor a run-time value yet */
    runtime = true;
  }
  if (!runtime) return false;
  const kn_value *x = &g->values[n->in[0]];
  if (!x->shape_known || x->dtype == KN_DT_INVALID || x->shape.batch_mask || x->shape.rank < 1) return false;
  if (out->rank != x->shape.rank) return false;
  for (int a = 0; a < out->rank; a++)
    if (out->dim[a] < 1 || x->shape.dim[a] < 1) return false;
  int k = listed_axes(n, n->op == KN_OP_UPSAMPLE || g->opset < 11, x->shape.rank);
  if (!vector_ok(g, ri->scales, false, k) || !vector_ok(g, ri->sizes, true, k) || !vector_ok(g, ri->roi, false, 2 * k))
    return false;
  const char *policy = kn_node_attr_string(n, "keep_aspect_ratio_policy", "stretch");
  ri->policy = !strcmp(policy, "stretch")       ? 0
               : !strcmp(policy, "not_larger")  ? 1
               : !strcmp(policy, "not_smaller") ? 2
                                                : -1;
  if (ri->sizes >= 0 && ri->policy < 0) return false;
  /* antialias: the filter width depends on the scale, which must be known */
  bool runtime_scale = (ri->scales >= 0 && !g->values[ri->scales].data) ||
                       (ri->sizes >= 0 && !g->values[ri->sizes].data && ri->policy != 0);
  const char *mode = kn_node_attr_string(n, "mode", "nearest");
  return !(runtime_scale && strcmp(mode, "nearest") && kn_node_attr_int(n, "antialias", 0) != 0);
}

/* Builds the check of one node: bool tensors that must all hold. */
typedef struct checks {
  kn_rw *b;
  int all; /* int32 scalar: min over the checks so far; -1 none */
} checks;

static void require(checks *c, int bool_tensor) {
  kn_rw *b = c->b;
  int min = kn_rw_reduce(b, KN_OP_REDUCE_MIN, kn_rw_cast(b, bool_tensor, KN_DT_I32), NULL, 0, false);
  c->all = c->all < 0 ? min : kn_rw_bin(b, KN_OP_MIN, c->all, min);
}

/* The run-time conditions (see the opening comment) over the listed axes,
 * appended to the graph's checks as one bool scalar. */
static void add_checks(kn_rw *b, const resize_inputs *ri, const int *axes, int n_axes, const kn_shape *in,
                       const kn_shape *out) {
  kn_graph *g = b->g;
  double in_dims[KN_MAX_RANK], out_dims[KN_MAX_RANK];
  int64_t out_ints[KN_MAX_RANK];
  for (int i = 0; i < n_axes; i++) {
    in_dims[i] = (double)in->dim[axes[i]], out_dims[i] = (double)out->dim[axes[i]];
    out_ints[i] = out->dim[axes[i]];
  }
  kn_shape vec = {.rank = 1, .dim = {n_axes}};
  int in_f = kn_rw_const(b, KN_DT_F64, &vec, in_dims), out_f = kn_rw_const(b, KN_DT_F64, &vec, out_dims);
  checks c = {b, -1};
  if (ri->scales >= 0 && !g->values[ri->scales].data) {
    int s = kn_rw_cast(b, kn_rw_cast(b, ri->scales, KN_DT_F32), KN_DT_F64);
    require(&c, kn_rw_bin(b, KN_OP_GREATER, s, kn_rw_scalar(b, KN_DT_F64, 0)));
    require(&c, kn_rw_bin(b, KN_OP_LESS_OR_EQUAL, s, kn_rw_scalar(b, KN_DT_F64, 1e6)));
    int size = kn_rw_un(b, KN_OP_FLOOR, kn_rw_bin(b, KN_OP_MUL, s, in_f));
    require(&c, kn_rw_bin(b, KN_OP_EQUAL, size, out_f));
  }
  if (ri->sizes >= 0 && !g->values[ri->sizes].data) {
    int s = kn_rw_cast(b, ri->sizes, KN_DT_I64);
    if (ri->policy == 0) {
      require(&c, kn_rw_bin(b, KN_OP_EQUAL, s, kn_rw_const(b, KN_DT_I64, &vec, out_ints)));
    } else { /* one ratio for every listed axis: (int64)(keep * in + 0.5) */
      require(&c, kn_rw_bin(b, KN_OP_GREATER_OR_EQUAL, s, kn_rw_scalar(b, KN_DT_I64, 1)));
      require(&c, kn_rw_bin(b, KN_OP_LESS_OR_EQUAL, s, kn_rw_scalar(b, KN_DT_I64, (double)SIZE_MAX_DIM)));
      int ratio = kn_rw_bin(b, KN_OP_DIV, kn_rw_cast(b, s, KN_DT_F64), in_f);
      int64_t zero = 0;
      int keep = kn_rw_reduce(b, ri->policy == 1 ? KN_OP_REDUCE_MIN : KN_OP_REDUCE_MAX, ratio, &zero, 1, false);
      int size = kn_rw_bin(b, KN_OP_ADD, kn_rw_bin(b, KN_OP_MUL, keep, in_f), kn_rw_scalar(b, KN_DT_F64, 0.5));
      require(&c, kn_rw_bin(b, KN_OP_EQUAL, kn_rw_un(b, KN_OP_FLOOR, size), out_f));
    }
  }
  if (ri->roi >= 0 && !g->values[ri->roi].data) {
    int r = kn_rw_un(b, KN_OP_ABS, kn_rw_cast(b, ri->roi, KN_DT_F64));
    require(&c, kn_rw_bin(b, KN_OP_LESS_OR_EQUAL, r, kn_rw_scalar(b, KN_DT_F64, ROI_LIMIT)));
  }
  KN_ASSERT(c.all >= 0, "a rewrite without a check");
  kn_pass_add_check(g, kn_rw_cast(b, c.all, KN_DT_BOOL));
}

static void rewrite(kn_graph *g, int i, const kn_shape *out, const resize_inputs *ri, kn_diag *d) {
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
  const char *what = kn_arena_printf(&g->arena, "check: node '%s' (%s) %s give the declared shape", n->name,
                                     n->op_type, ri->scales >= 0 ? "scales" : "sizes / roi");
  kn_rw b = {.g = g, .d = d, .node = i, .name = what, .last = -1};
  add_checks(&b, ri, axes, n_axes, &in, out);
  int *ins = KN_NEW_ARRAY(&g->arena, int, 4);
  ins[0] = n->in[0], ins[1] = ri->roi, ins[2] = ri->scales, ins[3] = ri->sizes;
  n->in = ins;
  n->n_in = 4;
  kn_rw_retype(g, i, KN_OP_RESIZE_DECLARED, true);
  kn_node_add_attr(g, n, kn_pass_attr_ints(g, "output_shape", out->dim, r));
  if (legacy) kn_node_add_attr(g, n, kn_pass_attr_int("legacy", 1));
}

int kn_pass_runtime_resize(kn_graph *g, kn_diag *d) {
  if (!g->out_declared) return 0;
  bool any = false;
  for (int i = 0; i < g->n_nodes && !any; i++)
    any = !g->nodes[i].dead && (g->nodes[i].op == KN_OP_RESIZE || g->nodes[i].op == KN_OP_UPSAMPLE);
  if (!any) return 0;
  int rc = kn_infer_shapes_quiet(g);
  if (rc == 0) return 0; /* every shape is known: nothing to do */
  int n_nodes = g->n_nodes, rewritten = 0;
  for (int i = 0; i < n_nodes; i++) {
    kn_shape out;
    resize_inputs ri;
    if (!applies(g, i, &out, &ri)) continue;
    rewrite(g, i, &out, &ri, d);
    rewritten++;
  }
  if (rewritten == 0) return 0;
  return kn_graph_toposort(g, d);
}
