/* fuse.c — fusion grouping: which graph nodes share one kernel.
 *
 * Requires: shapes inferred, nodes topologically sorted, constants folded.
 * Guarantees: every live node that needs a kernel (not a view, not a
 * constant) is in exactly one group; a group is an optional chain of
 * elementwise producers inlined into a reduction anchor (or the Transpose
 * inlined into a Pad anchor), the anchor, then a
 * chain of elementwise consumers each reading the previous output (with the
 * same shape) as its only use, or a diamond: two of them reading it once
 * each, the first starting a side chain that ends in the second
 * (x * Sigmoid(x), GELU). The last node's output is the kernel output.
 *
 * Rules: elementwise epilogues (bias, activation, residual add) fuse into
 * the conv / matmul / reduction that produces their input; elementwise chains
 * fuse into one kernel; elementwise producers with a single use are inlined
 * into non-contraction reductions (e.g. the residual Add before a
 * LayerNormalization); a Pad inlines the Transpose it pads (can_inline_transpose).
 * Contractions inline no producer of their data
 * input: recomputing an activation per multiply-add costs more than a pass
 * over memory. They do inline an elementwise producer of their weights that
 * reads a constant and small run-time values only (can_inline_weights). */
#include <stdlib.h>
#include <string.h>

#include "schedule/schedule.h"

/* Longest elementwise chain fused into one kernel: the kernel's expression
 * nests one level per node, and lowering recurses over it (a hostile chain
 * of 40,000 Relu nodes overflowed the stack). Longer chains continue in a
 * new kernel. */
#define FUSE_MAX_CHAIN 64

/* The distinct values that members[0..nm) and more[0..n_more) read but do
 * not write: the kernel's parameters besides its output. */
static int reads_outside(const kn_graph *g, const int *members, int nm, const int *more, int n_more) {
  int seen[KN_SCHED_MAX_KERNEL_ARGS + 1], n_seen = 0;
  for (int m = 0; m < nm + n_more; m++) {
    const kn_node *n = &g->nodes[m < nm ? members[m] : more[m - nm]];
    for (int k = 0; k < n->n_in; k++) {
      int v = n->in[k], p = v >= 0 ? g->values[v].producer : -1;
      bool inside = false, dup = false;
      for (int j = 0; j < nm + n_more && !inside; j++) inside = p >= 0 && p == (j < nm ? members[j] : more[j - nm]);
      for (int j = 0; j < n_seen && !dup; j++) dup = seen[j] == v;
      if (v < 0 || inside || dup) continue;
      if (n_seen == KN_SCHED_MAX_KERNEL_ARGS) return n_seen + 1;
      seen[n_seen++] = v;
    }
  }
  return n_seen;
}

/* Ops whose compute definition reads its input several times through a
 * deep expression (atan's polynomial and range reduction): inlining one into
 * another multiplies the lowered expression, so a chain of four Atan took
 * minutes (fuzzer). At most one of them per kernel. */
static bool expr_heavy(kn_op op) { return op == KN_OP_ATAN || op == KN_OP_ASIN || op == KN_OP_ACOS; }

typedef struct fuse {
  const kn_graph *g;
  int *uses;        /* per value: number of consuming (live) node inputs */
  int *consumer;    /* per value: the (last) consuming node */
  int *first_consumer; /* per value: the first consuming node */
  bool *is_output;  /* per value */
  int *group_of;    /* per node: group index, -1 */
  int *inline_into; /* per node: reduction node it is inlined into, -1 */
} fuse;

static bool needs_kernel(const kn_node *n) {
  if (n->dead) return false;
  kn_op_class k = kn_op_class_of(n->op);
  return k != KN_CLASS_VIEW;
}

/* The node making `value`, when a consumer could inline it: a live
 * single-output node, its value computed (not a constant), read once and
 * not a graph output, the node not inlined elsewhere; else NULL. */
static const kn_node *single_use_producer(fuse *F, int value) {
  const kn_graph *g = F->g;
  if (value < 0 || g->values[value].data) return NULL;
  int p = g->values[value].producer;
  if (p < 0) return NULL;
  const kn_node *n = &g->nodes[p];
  bool ok = !n->dead && n->n_out == 1 && F->uses[value] == 1 && !F->is_output[value] && F->inline_into[p] < 0;
  return ok ? n : NULL;
}

static bool can_inline_producer(fuse *F, int value) {
  const kn_node *n = single_use_producer(F, value);
  return n && kn_op_class_of(n->op) == KN_CLASS_ELEMWISE;
}

/* Can a Pad inline the Transpose that makes its data input `value` (read by
 * the Pad only)? The layout pass turns a model's NCHW image into NHWC and
 * explicit_pad pads it for the stem conv: as two kernels, two passes over
 * the image, each with 3-element inner rows; as one, the Pad reads the
 * image through the Transpose's indices (docs/architecture.md, "Fusion"). */
static bool can_inline_transpose(fuse *F, int value) {
  const kn_node *n = single_use_producer(F, value);
  return n && n->op == KN_OP_TRANSPOSE;
}

/* Can contraction n inline the producer of its weights (input 1)? The
 * producer must be elementwise, as can_inline_producer says, reading
 * constants and values of at most 1/16 of its output's elements: the
 * per-sample weights W * s of a squeeze-and-excitation projection
 * (pass_scale_weights.c). Inlined, each weight load of the register tile
 * multiplies once more, amortised over the tile's rows (a 1x1 conv with 14
 * rows per tile: 1 multiply per 14 multiply-adds). As a kernel of its own,
 * the scaling read the constant from memory and wrote the weights, with no
 * compute to hide the read behind (efficientnet_b0's 672 x 112 ones;
 * docs/architecture.md, "Fusion"). */
static bool can_inline_weights(fuse *F, const kn_node *n) {
  if (n->n_in < 2 || !can_inline_producer(F, n->in[1])) return false;
  const kn_graph *g = F->g;
  const kn_node *p = &g->nodes[g->values[n->in[1]].producer];
  int64_t size = kn_shape_numel_max(&g->values[p->out[0]].shape, 1);
  for (int k = 0; k < p->n_in; k++) {
    const kn_value *v = p->in[k] >= 0 ? &g->values[p->in[k]] : NULL;
    if (v && !v->data && kn_shape_numel_max(&v->shape, 1) * 16 > size) return false;
  }
  return true;
}

/* Is node c, reading v, a free elementwise node whose first output has
 * v's shape: one that may join the group whose output is v? */
static bool joinable(const fuse *F, int v, int c) {
  const kn_node *n = &F->g->nodes[c];
  if (F->group_of[c] >= 0 || F->inline_into[c] >= 0 || n->dead || kn_op_class_of(n->op) != KN_CLASS_ELEMWISE)
    return false;
  return n->out[0] >= 0 && kn_shape_equal(&F->g->values[n->out[0]].shape, &F->g->values[v].shape);
}

/* Can node c (the only consumer of v) join the group whose output is v? */
static bool can_absorb(fuse *F, int v, int c) {
  const kn_node *n = &F->g->nodes[c];
  if (F->uses[v] < 1 || F->is_output[v] || !joinable(F, v, c)) return false;
  for (int i = 1; i < n->n_out; i++)
    if (n->out[i] >= 0 && (F->uses[n->out[i]] > 0 || F->is_output[n->out[i]])) return false;
  /* every use of v must be by c */
  int uses_by_c = 0;
  for (int i = 0; i < n->n_in; i++) uses_by_c += n->in[i] == v;
  return uses_by_c == F->uses[v];
}

/* Longest side chain of a diamond (can_absorb_diamond). */
#define FUSE_MAX_DIAMOND 8

/* Is node c an elementwise node with one output, reading `value` exactly
 * `times` times, that may join the group whose output is v? */
static bool reads_once_joinable(const fuse *F, int v, int c, int value) {
  const kn_node *n = &F->g->nodes[c];
  if (n->n_out != 1 || !joinable(F, v, c) || expr_heavy(n->op)) return false;
  int reads = 0;
  for (int k = 0; k < n->n_in; k++) reads += n->in[k] == value;
  return reads == 1;
}

/* Can the two consumers of v join the group whose output is v, with the
 * first starting a side chain that ends in the second? As in SiLU,
 * x * Sigmoid(x) (a chain of one), and GELU, x * (1 + Erf(x / sqrt 2)) * 0.5
 * (Div, Erf, Add, then the Mul that reads x again). The chain's nodes
 * (chain[0..*n-1]) are elementwise with v's shape, each read only by the
 * next; the last of them feeds only the second consumer (chain[*n-1]), which
 * reads v and the chain once each. Without this, every SiLU after a conv
 * was a kernel of its own, a pass over the activation (a fifth of
 * efficientnet_b0's time), and so was every GELU after a BERT fc1. */
static bool can_absorb_diamond(fuse *F, int v, int *chain, int *n) {
  const kn_graph *g = F->g;
  if (F->uses[v] != 2 || F->is_output[v]) return false;
  int a = F->first_consumer[v], b = F->consumer[v];
  if (a == b || a < 0 || b < 0 || !reads_once_joinable(F, v, a, v) || !reads_once_joinable(F, v, b, v)) return false;
  int len = 0, cur = a;
  for (;;) {
    chain[len++] = cur;
    int out = g->nodes[cur].out[0];
    if (F->uses[out] != 1 || F->is_output[out]) return false;
    int next = F->consumer[out];
    if (next == b) break;
    if (len + 1 >= FUSE_MAX_DIAMOND || !reads_once_joinable(F, v, next, out)) return false;
    for (int k = 0; k < g->nodes[next].n_in; k++)
      if (g->nodes[next].in[k] == v) return false;
    cur = next;
  }
  if (!reads_once_joinable(F, v, b, g->nodes[cur].out[0])) return false;
  chain[len++] = b;
  *n = len;
  return true;
}

int kn_sched_fuse(const kn_graph *g, kn_arena *arena, kn_groups *out, kn_diag *d) {
  fuse F = {.g = g};
  F.uses = calloc((size_t)g->n_values, sizeof(int));
  F.consumer = calloc((size_t)g->n_values, sizeof(int));
  F.first_consumer = malloc(sizeof(int) * (size_t)(g->n_values > 0 ? g->n_values : 1));
  F.is_output = calloc((size_t)g->n_values, sizeof(bool));
  F.group_of = malloc(sizeof(int) * (size_t)(g->n_nodes > 0 ? g->n_nodes : 1));
  F.inline_into = malloc(sizeof(int) * (size_t)(g->n_nodes > 0 ? g->n_nodes : 1));
  KN_ASSERT(F.uses && F.consumer && F.first_consumer && F.is_output && F.group_of && F.inline_into, "out of memory");
  for (int i = 0; i < g->n_nodes; i++) F.group_of[i] = F.inline_into[i] = -1;
  for (int v = 0; v < g->n_values; v++) F.first_consumer[v] = -1;
  for (int i = 0; i < g->n_outputs; i++) F.is_output[g->outputs[i]] = true;
  for (int i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    if (n->dead) continue;
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0) {
        F.uses[n->in[k]]++;
        F.consumer[n->in[k]] = i;
        if (F.first_consumer[n->in[k]] < 0) F.first_consumer[n->in[k]] = i;
      }
  }
  /* pre-pass: elementwise producers inlined into reductions, and into
   * contractions' weights; a Transpose into the Pad of its result */
  for (int i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    if (n->dead) continue;
    if (n->op == KN_OP_PAD && can_inline_transpose(&F, n->in[0])) F.inline_into[g->values[n->in[0]].producer] = i;
    if (kn_op_class_of(n->op) == KN_CLASS_CONTRACTION && can_inline_weights(&F, n))
      F.inline_into[g->values[n->in[1]].producer] = i;
    if (kn_op_class_of(n->op) != KN_CLASS_REDUCE) continue;
    for (int k = 0; k < n->n_in; k++)
      if (can_inline_producer(&F, n->in[k])) F.inline_into[g->values[n->in[k]].producer] = i;
  }

  int cap = 16, count = 0;
  kn_group *groups = malloc(sizeof(kn_group) * (size_t)cap);
  int *members = malloc(sizeof(int) * (size_t)(g->n_nodes + 1));
  KN_ASSERT(groups && members, "out of memory");
  int status = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    if (!needs_kernel(n) || F.group_of[i] >= 0 || F.inline_into[i] >= 0) continue;
    if (kn_op_class_of(n->op) == KN_CLASS_CONSTANT) {
      int first_line = d ? d->count : 0;
      status = kn_diag_error(d, "node '%s' (%s): its result could not be computed at compile time",
                             n->name, n->op_type);
      kn_node_diag_origin(n, d, first_line);
      continue;
    }
    for (int o = 0; o < n->n_out; o++) {
      int v = n->out[o];
      if (v < 0 || (o > 0 && F.uses[v] == 0 && !F.is_output[v])) continue;
      /* the producers inlined into i (some of its inputs' producers), in
       * node order; not a scan of all earlier nodes (quadratic) */
      int nm = 0;
      for (int k = 0; k < n->n_in; k++) {
        int p = n->in[k] >= 0 ? g->values[n->in[k]].producer : -1;
        if (p < 0 || p >= i || F.inline_into[p] != i) continue;
        int at = nm;
        while (at > 0 && members[at - 1] >= p) at--;
        if (at < nm && members[at] == p) continue; /* read twice */
        memmove(members + at + 1, members + at, sizeof(int) * (size_t)(nm - at));
        members[at] = p;
        nm++;
      }
      members[nm++] = i;
      int cur = v, heavy = 0;
      for (int m = 0; m < nm; m++) heavy += expr_heavy(g->nodes[members[m]].op);
      int diamond[FUSE_MAX_DIAMOND], nd = 0;
      while (n->n_out == 1 && F.uses[cur] > 0 && nm < FUSE_MAX_CHAIN) {
        if (can_absorb(&F, cur, F.consumer[cur])) {
          int c = F.consumer[cur];
          if (expr_heavy(g->nodes[c].op) && heavy++ > 0) break;
          if (reads_outside(g, members, nm, &c, 1) > KN_SCHED_MAX_KERNEL_ARGS - 1) break;
          members[nm++] = c;
          F.group_of[c] = count;
          cur = g->nodes[c].out[0];
        } else if (nm + FUSE_MAX_DIAMOND <= FUSE_MAX_CHAIN && can_absorb_diamond(&F, cur, diamond, &nd) &&
                   reads_outside(g, members, nm, diamond, nd) <= KN_SCHED_MAX_KERNEL_ARGS - 1) {
          for (int m = 0; m < nd; m++) {
            members[nm++] = diamond[m];
            F.group_of[diamond[m]] = count;
          }
          cur = g->nodes[diamond[nd - 1]].out[0];
        } else {
          break;
        }
      }
      if (count == cap) {
        cap *= 2;
        groups = realloc(groups, sizeof(kn_group) * (size_t)cap);
        KN_ASSERT(groups, "out of memory");
      }
      kn_group *grp = &groups[count];
      grp->anchor = i;
      grp->n_nodes = nm;
      grp->nodes = KN_NEW_ARRAY(arena, int, nm);
      memcpy(grp->nodes, members, sizeof(int) * (size_t)nm);
      grp->output = cur;
      grp->output_index = o;
      for (int m = 0; m < nm; m++) F.group_of[members[m]] = count;
      count++;
    }
  }
  /* A group that absorbed a consumer may read a value produced by a group
   * formed later (the other operand of a residual Add): order groups by
   * their dependencies. Fused intermediates are used only inside their
   * group, so the group graph has no cycle. */
  out->n = count;
  out->groups = KN_NEW_ARRAY(arena, kn_group, count > 0 ? count : 1);
  bool *placed = calloc((size_t)count + 1, sizeof(bool));
  KN_ASSERT(placed, "out of memory");
  for (int emitted = 0; emitted < count;) {
    int before = emitted;
    for (int gi = 0; gi < count; gi++) {
      if (placed[gi]) continue;
      bool ready = true;
      for (int m = 0; m < groups[gi].n_nodes && ready; m++) {
        const kn_node *n = &g->nodes[groups[gi].nodes[m]];
        for (int k = 0; k < n->n_in && ready; k++) {
          int v = n->in[k];
          int p = v >= 0 ? g->values[v].producer : -1;
          /* look through views to the node that really writes the bytes */
          while (p >= 0 && !g->values[v].data && kn_op_class_of(g->nodes[p].op) == KN_CLASS_VIEW) {
            v = g->nodes[p].in[0];
            p = g->values[v].producer;
          }
          if (p < 0 || g->values[v].data) continue;
          int pg = F.group_of[p] >= 0 ? F.group_of[p] : F.inline_into[p] >= 0 ? F.group_of[F.inline_into[p]] : -1;
          ready = pg < 0 || pg == gi || placed[pg];
        }
      }
      if (ready) {
        placed[gi] = true;
        out->groups[emitted++] = groups[gi];
      }
    }
    KN_ASSERT(emitted > before, "cycle between fusion groups");
  }
  free(placed);
  free(groups);
  free(members);
  free(F.uses);
  free(F.consumer);
  free(F.first_consumer);
  free(F.is_output);
  free(F.group_of);
  free(F.inline_into);
  return status;
}
