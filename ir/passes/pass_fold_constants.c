/* pass_fold_constants.c — constant folding and alias removal.
 *
 * Requires: shapes inferred, nodes toposorted.
 * Guarantees:
 *  - every node whose inputs are all constants (Shape / Size: whose input
 *    shape is known) is evaluated by the reference interpreter and replaced
 *    by constants. The batch symbol travels as batch_coef through the
 *    Shape -> Gather -> Unsqueeze -> Concat chains of PyTorch exports; a node
 *    whose result would depend on N in another way stays.
 *  - results that would blow up memory (more than 16M elements and larger
 *    than all inputs together, e.g. ConstantOfShape / Expand) are not folded.
 *  - Identity and inference Dropout are removed by rewiring consumers. A graph
 *    output keeps its name; if it would become an alias of a graph input, a
 *    constant or another graph output, an Identity node stays in front of it
 *    (so the pipeline writes a copy). A folded graph output likewise becomes
 *    Identity(constant).
 *  - shapes stay valid; nodes are toposorted with the folded ones dropped.
 *    Nodes left without readers stay (kn_pass_dce removes them). */
#include <stdlib.h>
#include <string.h>

#include "ir/passes/passes.h"
#include "ir/passes/rewrite.h"
#include "ir/ref/ref_eval.h"

#define FOLD_MAX_ELEMS ((int64_t)16 << 20)
/* Work limits (kn_node_work), so a small hostile model cannot keep the
 * compiler busy for minutes: one node may cost FOLD_NODE_WORK beyond a few
 * passes over its inputs; one run of the pass FOLD_BASE_WORK plus a few
 * passes over the model's constants. What is not folded stays a node (and is
 * compiled, or diagnosed, later). */
#define FOLD_NODE_WORK ((double)(1 << 26))
#define FOLD_BASE_WORK ((double)(1 << 28))

static bool dropout_is_identity(const kn_graph *g, const kn_node *n, const int *uses) {
  if (n->n_out > 1 && uses[n->out[1]] > 0) return false; /* the mask is used */
  if (n->n_in > 2 && n->in[2] >= 0) {                      /* training_mode */
    const kn_value *t = &g->values[n->in[2]];
    if (!t->data || ((const uint8_t *)t->data)[0]) return false;
  }
  return true;
}

/* Removes Identity / Dropout node i: consumers read its input directly.
 * They are rewired lazily through fwd (fwd[y] = x; see forward_inputs), not
 * by a scan of every node per alias, which made a chain of N Identity nodes
 * cost N^2. */
static void remove_alias(kn_graph *g, int i, int *fwd) {
  kn_node *n = &g->nodes[i];
  int x = n->in[0], y = n->out[0];
  if (!kn_pass_is_graph_output(g, y)) {
    fwd[y] = x;
    kn_pass_kill_node(g, i);
    return;
  }
  int p = g->values[x].producer;
  if (kn_pass_is_graph_input(g, x) || g->values[x].data || kn_pass_is_graph_output(g, x) || p < 0) {
    /* Keep a plain Identity so the output gets its own copy. */
    kn_rw_retype(g, i, KN_OP_IDENTITY, false);
    n->n_in = 1;
    n->n_out = 1;
    return;
  }
  /* Rename: x's producer now writes the graph output y directly. */
  kn_pass_kill_node(g, i);
  kn_node *prod = &g->nodes[p];
  for (int k = 0; k < prod->n_out; k++)
    if (prod->out[k] == x) prod->out[k] = y;
  g->values[y].producer = p;
  kn_pass_replace_uses(g, x, y);
}

static bool inputs_known(const kn_graph *g, const kn_node *n) {
  bool shape_only = n->op == KN_OP_SHAPE || n->op == KN_OP_SIZE;
  for (int k = 0; k < n->n_in; k++) {
    int v = n->in[k];
    if (v < 0) continue;
    if (shape_only && k == 0 ? !g->values[v].shape_known : !g->values[v].data) return false;
  }
  return true;
}

static bool too_big(const kn_graph *g, const kn_node *n) {
  int64_t in_total = 0;
  for (int k = 0; k < n->n_in; k++)
    if (n->in[k] >= 0 && g->values[n->in[k]].data) in_total += kn_value_numel(g, n->in[k]);
  for (int k = 0; k < n->n_out; k++) {
    int64_t numel = kn_value_numel(g, n->out[k]);
    if (numel < 0 || (numel > FOLD_MAX_ELEMS && numel > in_total)) return true;
  }
  return false;
}

/* A folded graph output y becomes Identity(constant): the data moves to a
 * new constant, which y's other readers use directly. */
static void keep_output_copy(kn_graph *g, int y) {
  int c = kn_graph_add_value(g, kn_arena_printf(&g->arena, "%s_const", g->values[y].name));
  kn_value *cv = &g->values[c], *yv = &g->values[y];
  cv->dtype = yv->dtype;
  cv->shape = yv->shape;
  cv->shape_known = true;
  cv->data = yv->data;
  cv->batch_coef = yv->batch_coef;
  yv->data = NULL;
  yv->batch_coef = NULL;
  kn_pass_replace_uses(g, y, c);
  kn_graph_add_node(g, KN_OP_IDENTITY, kn_arena_printf(&g->arena, "%s_copy", g->values[y].name), &c, 1,
                    &y, 1);
}

/* Points node n's inputs past removed aliases (values from before the pass
 * only: later ones are never forwarded). */
static void forward_inputs(kn_node *n, const int *fwd, int n_fwd) {
  for (int k = 0; k < n->n_in; k++)
    while (n->in[k] >= 0 && n->in[k] < n_fwd && fwd[n->in[k]] != n->in[k]) n->in[k] = fwd[n->in[k]];
}

int kn_pass_fold_constants(kn_graph *g, kn_diag *d) {
  int *uses = malloc(sizeof(int) * ((size_t)g->n_values + 1));
  KN_ASSERT(uses, "out of memory");
  kn_pass_count_uses(g, uses);
  int rc = 0, n_nodes = g->n_nodes, n_fwd = g->n_values;
  int *fwd = malloc(sizeof(int) * ((size_t)n_fwd + 1));
  KN_ASSERT(fwd, "out of memory");
  for (int v = 0; v < n_fwd; v++) fwd[v] = v;
  double work_left = FOLD_BASE_WORK;
  for (int v = 0; v < g->n_values; v++)
    if (g->values[v].data) work_left += 4.0 * (double)kn_value_numel(g, v);
  for (int i = 0; i < n_nodes && rc == 0; i++) {
    kn_node *n = &g->nodes[i];
    if (n->dead || n->op == KN_OP_UNKNOWN) continue;
    forward_inputs(n, fwd, n_fwd); /* topological order: producers came first */
    bool alias = n->op == KN_OP_IDENTITY || (n->op == KN_OP_DROPOUT && dropout_is_identity(g, n, uses));
    if (alias && n->n_in >= 1 && n->in[0] >= 0 && n->n_out >= 1) {
      remove_alias(g, i, fwd);
      continue;
    }
    if (!inputs_known(g, n) || too_big(g, n)) continue;
    double in_elems, work = kn_node_work(g, i, &in_elems);
    if (work > FOLD_NODE_WORK + 4.0 * in_elems || work > work_left) continue;
    work_left -= work;
    int first_line = d ? d->count : 0;
    int r = kn_ref_eval_node(g, i, d);
    if (r < 0) {
      rc = -1;
      kn_node_diag_origin(&g->nodes[i], d, first_line); /* lead with the model's node */
    }
    if (r != 0) continue;
    kn_pass_kill_node(g, i);
    int n_out = g->nodes[i].n_out;
    for (int k = 0; k < n_out; k++) {
      int y = g->nodes[i].out[k];
      if (kn_pass_is_graph_output(g, y)) keep_output_copy(g, y);
    }
  }
  for (int i = 0; i < g->n_nodes; i++)
    if (!g->nodes[i].dead) forward_inputs(&g->nodes[i], fwd, n_fwd);
  free(fwd);
  free(uses);
  if (rc < 0) return rc;
  return kn_graph_toposort(g, d);
}
