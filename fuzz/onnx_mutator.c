/* onnx_mutator.c — a structure-aware mutator for kn_fuzz_onnx
 * (LLVMFuzzerCustomMutator). Byte flips mostly break the protobuf framing,
 * so half of the time this decodes the ModelProto, changes one thing a
 * hostile model could change — an attribute integer, a shape-tensor element,
 * an initializer or input dim, a dtype, the op type, which value a node
 * reads (dangling names, cycles, dtype mismatches), node order — and encodes
 * it again; otherwise (or when the input does not decode) it falls back to
 * libFuzzer's byte mutations.
 *
 * Invariant: protobuf-c frees the decoded message itself, so nothing here
 * stores a pointer protobuf-c did not allocate past the pack call: replaced
 * strings are put back before onnx__model_proto__free_unpacked. Integers are
 * mutated in place. */
#include <stdint.h>
#include <string.h>

#include "onnx.pb-c.h"

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

static const char *const op_names[] = {
#define KN_OP(e, name, cls) name,
#include "ir/graph/ops.def"
#undef KN_OP
    "Det", "If", "Loop", "Scan",
};

typedef struct rng {
  uint64_t s;
} rng;

static uint64_t next(rng *r) {
  r->s ^= r->s << 13;
  r->s ^= r->s >> 7;
  r->s ^= r->s << 17;
  return r->s;
}

static size_t below(rng *r, size_t n) { return n ? (size_t)(next(r) % n) : 0; }

/* A value a hostile model would pick: boundaries, off-by-ones, huge. */
static int64_t interesting(rng *r, int64_t old) {
  static const int64_t table[] = {0,  1,  2,  3,  -1, -2, 7, 8, 9, 64, 255, 256, 65536, INT32_MAX,
                                  INT32_MIN, (int64_t)1 << 31, (int64_t)1 << 32, (int64_t)1 << 40,
                                  (int64_t)1 << 62, INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1};
  switch (below(r, 4)) {
  case 0: return (int64_t)((uint64_t)old + below(r, 5) - 2); /* wraps, deliberately */
  case 1: return (int64_t)(0 - (uint64_t)old);
  default: return table[below(r, sizeof table / sizeof table[0])];
  }
}

static void mutate_ints(rng *r, int64_t *v, size_t n) {
  if (n) v[below(r, n)] = interesting(r, v[below(r, n)]);
}

static void mutate_tensor(rng *r, Onnx__TensorProto *t) {
  switch (below(r, 4)) {
  case 0: mutate_ints(r, t->dims, t->n_dims); break;
  case 1: mutate_ints(r, t->int64_data, t->n_int64_data); break;
  case 2:
    if (t->raw_data.len >= 8) { /* an int64 element of raw data (shape tensors) */
      size_t k = below(r, t->raw_data.len / 8);
      int64_t v;
      memcpy(&v, t->raw_data.data + 8 * k, 8);
      v = interesting(r, v);
      memcpy(t->raw_data.data + 8 * k, &v, 8);
    }
    break;
  default: t->data_type = (int32_t)below(r, 18); break;
  }
}

/* One structural change; *restore_slot / *restore_ptr record a replaced
 * string pointer to put back after packing. */
static void mutate_graph(rng *r, Onnx__GraphProto *g, char ***restore_slot, char **restore_ptr) {
  Onnx__NodeProto *n = g->n_node ? g->node[below(r, g->n_node)] : NULL;
  switch (below(r, 8)) {
  case 0:
  case 1: /* an attribute's integer(s) */
    if (n && n->n_attribute) {
      Onnx__AttributeProto *a = n->attribute[below(r, n->n_attribute)];
      if (a->n_ints && below(r, 4)) mutate_ints(r, a->ints, a->n_ints);
      else if (a->t) mutate_tensor(r, a->t);
      else a->i = interesting(r, a->i);
    }
    break;
  case 2: /* an initializer */
    if (g->n_initializer) mutate_tensor(r, g->initializer[below(r, g->n_initializer)]);
    break;
  case 3: /* a graph input's dim or dtype */
    if (g->n_input) {
      Onnx__ValueInfoProto *vi = g->input[below(r, g->n_input)];
      if (vi->type && vi->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && vi->type->tensor_type) {
        Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
        if (tt->shape && tt->shape->n_dim && below(r, 4)) {
          Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[below(r, tt->shape->n_dim)];
          if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            d->dim_value = interesting(r, d->dim_value);
        } else {
          tt->elem_type = (int32_t)below(r, 18);
        }
      }
    }
    break;
  case 4: /* the op type */
    if (n) {
      *restore_slot = &n->op_type;
      *restore_ptr = n->op_type;
      n->op_type = (char *)op_names[below(r, sizeof op_names / sizeof op_names[0])];
    }
    break;
  case 5: /* which value an input reads: another node's output or a graph input */
    if (n && n->n_input) {
      size_t k = below(r, n->n_input);
      Onnx__NodeProto *src = g->node[below(r, g->n_node)];
      char *name = NULL;
      if (src->n_output && below(r, 3)) name = src->output[below(r, src->n_output)];
      else if (g->n_input) name = g->input[below(r, g->n_input)]->name;
      if (name) {
        *restore_slot = &n->input[k];
        *restore_ptr = n->input[k];
        n->input[k] = name;
      }
    }
    break;
  case 6: /* node order (the loader must sort) */
    if (g->n_node > 1) {
      size_t i = below(r, g->n_node), j = below(r, g->n_node);
      Onnx__NodeProto *t = g->node[i];
      g->node[i] = g->node[j];
      g->node[j] = t;
    }
    break;
  default: /* drop trailing inputs or outputs of a node */
    if (n && n->n_input && below(r, 2)) n->n_input--;
    else if (n && n->n_output > 1) n->n_output--;
    break;
  }
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
  rng r = {(uint64_t)seed * 0x9E3779B97F4A7C15ull + 1};
  if (below(&r, 2)) return LLVMFuzzerMutate(data, size, max_size);
  Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, size, data);
  if (!m || !m->graph) {
    if (m) onnx__model_proto__free_unpacked(m, NULL);
    return LLVMFuzzerMutate(data, size, max_size);
  }
  /* Node order and input / output counts are put back before freeing too:
   * free_unpacked walks the arrays as decoded. Graphs of more than 256
   * nodes are left to the byte mutations. */
  Onnx__GraphProto *g = m->graph;
  size_t n_node = g->n_node, keep = n_node < 256 ? n_node : 256;
  size_t in_counts[256], out_counts[256];
  Onnx__NodeProto *order[256];
  for (size_t i = 0; i < keep; i++) {
    order[i] = g->node[i];
    in_counts[i] = g->node[i]->n_input;
    out_counts[i] = g->node[i]->n_output;
  }

  char **slot = NULL, *old = NULL;
  int rounds = 1 + (int)below(&r, 3);
  size_t out_size = 0;
  if (n_node <= 256) {
    for (int k = 0; k < rounds && !slot; k++) mutate_graph(&r, g, &slot, &old);
    size_t packed = onnx__model_proto__get_packed_size(m);
    if (packed <= max_size) out_size = onnx__model_proto__pack(m, data);
  }
  if (slot) *slot = old;
  for (size_t i = 0; i < keep; i++) {
    g->node[i] = order[i];
    order[i]->n_input = in_counts[i];
    order[i]->n_output = out_counts[i];
  }
  onnx__model_proto__free_unpacked(m, NULL);
  return out_size ? out_size : LLVMFuzzerMutate(data, size, max_size);
}
