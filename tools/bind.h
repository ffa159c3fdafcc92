/* bind.h — compile-time specialisation of graph inputs (`kiln compile
 * --bind NAME=FILE`): a bound input becomes a constant of the graph before
 * shape inference, so ops that need constant data (Reshape's shape, Reduce*'s
 * axes, Pad's pads...) see it, and the artifact no longer takes that input. */
#ifndef KN_BIND_H
#define KN_BIND_H

#include "ir/graph/graph.h"

/* One --bind: graph input `name` takes the value in `file` (.npy, or a
 * serialized ONNX TensorProto .pb). */
typedef struct kn_binding {
  const char *name;
  const char *file;
} kn_binding;

/* Splits "NAME=FILE" into b (pointers into arg, NAME copied into `arena`).
 * Returns 0, or -1 with a diagnostic when NAME or FILE is empty. */
int kn_binding_parse(const char *arg, kn_arena *arena, kn_binding *b, kn_diag *d);

/* Turns each bound graph input of g (just loaded, not yet shape-inferred)
 * into a constant holding the file's value, and drops it from g->inputs.
 * Each binding is checked: the input exists, no name is bound twice, the file
 * reads, and its dtype and shape equal the input's declared ones (an input
 * with the batch dim N cannot be bound). Reports every bad binding; 0 or -1. */
int kn_bind_inputs(kn_graph *g, const kn_binding *binds, int n_binds, kn_diag *d);

#endif
