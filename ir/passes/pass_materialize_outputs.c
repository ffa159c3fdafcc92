/* pass_materialize_outputs.c — makes every graph output the result of a
 * kernel of its own.
 *
 * Requires: shapes inferred, toposorted; runs last, after the passes that
 * remove Identity nodes. Guarantees: the storage of each graph output (the
 * value itself, or the value a chain of views over it starts from) is
 * written by a node that is not a view, and no two outputs share it; where
 * that was not so (an output that is a graph input, a constant, a view of one
 * of those, or the same tensor as another output) an Identity node now copies
 * it into a fresh value that takes the output's place and its name (a
 * graph input and an output may then share a name, as they do in the model). */
#include <stdlib.h>

#include "ir/passes/passes.h"

static int storage_root(const kn_graph *g, int v) {
  for (int guard = 0; guard < g->n_values; guard++) {
    int p = g->values[v].producer;
    if (g->values[v].data || p < 0 || kn_op_class_of(g->nodes[p].op) != KN_CLASS_VIEW) return v;
    v = g->nodes[p].in[0];
  }
  return v;
}

int kn_pass_materialize_outputs(kn_graph *g, kn_diag *d) {
  bool changed = false;
  /* roots already owned by an earlier output (an output that gets a copy owns
   * the copy instead): one array, not a rescan per output, which made a model
   * with many outputs quadratic */
  int n_values = g->n_values;
  bool *owned = calloc((size_t)n_values + 1, sizeof(bool));
  KN_ASSERT(owned, "out of memory");
  for (int i = 0; i < g->n_outputs; i++) {
    int v = g->outputs[i], root = storage_root(g, v);
    bool shared = root < n_values && owned[root];
    if (!shared && !g->values[root].data && g->values[root].producer >= 0) {
      owned[root] = true;
      continue;
    }
    const char *name = g->values[v].name;
    int copy = kn_graph_add_value(g, name); /* the output keeps its name exactly */
    g->values[copy].dtype = g->values[v].dtype;
    g->values[copy].shape = g->values[v].shape;
    g->values[copy].shape_known = true;
    kn_graph_add_node(g, KN_OP_IDENTITY, kn_arena_printf(&g->arena, "%s.copy", name), &v, 1, &copy, 1);
    g->outputs[i] = copy;
    changed = true;
  }
  free(owned);
  return changed ? kn_graph_toposort(g, d) : 0;
}
