/* fe_internal.h — shared state of one ONNX import (not installed, not used
 * outside frontend/). The decoded protobuf (onnx.pb-c.h, generated at build
 * time from an installed onnx.proto) lives only for the duration of one
 * kn_fe_load_onnx* call; everything kept is copied into the graph's arena.
 *
 * The code never reads protobuf-c's has_* presence flags, so it compiles
 * against decoders generated from either a proto2 or a proto3 onnx.proto:
 * an absent field reads as zero / NULL / empty. */
#ifndef KN_FE_INTERNAL_H
#define KN_FE_INTERNAL_H

#include "frontend/onnx_load.h"
#include "ir/graph/graph.h"
#include "onnx.pb-c.h"

/* Value name -> value index, open addressing; keys point at arena names. */
typedef struct kn_fe_names {
  const char **keys;
  int *vals;
  size_t cap, count;
} kn_fe_names;

void kn_fe_names_init(kn_fe_names *m);
void kn_fe_names_free(kn_fe_names *m);
int kn_fe_names_get(const kn_fe_names *m, const char *key); /* -1 if absent */
/* Inserts or replaces; `key` must outlive the map (an arena string). */
void kn_fe_names_put(kn_fe_names *m, const char *key, int val);

typedef struct kn_fe_ctx {
  kn_graph *g;
  kn_diag *d;
  const char *label;    /* the model file (or "<buffer>"), prefixed to every diagnostic */
  const char *base_dir; /* directory that external data paths are relative to; NULL = none */
  int n_errors;
  const kn_fe_dim *dims; /* --dim: symbolic dims read as static values */
  int n_dims;
  kn_fe_names names;
  int scope_first; /* values below this index belong to enclosing graphs: a
                      subgraph may define (shadow) their names */
} kn_fe_ctx;

/* Appends "<label>: <message>" to the diagnostics and counts it; returns -1. */
int kn_fe_error(kn_fe_ctx *cx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The --dim pin of dim_param `dim_param` (NULL: none), or NULL (onnx_dims.c). */
const kn_fe_dim *kn_fe_dim_pinned(const kn_fe_ctx *cx, const char *dim_param);
/* One diagnostic per pin that names no symbolic dim of the graph inputs
 * (initializers, imported already, excluded), listing the ones there are. */
void kn_fe_dims_check(kn_fe_ctx *cx, const Onnx__GraphProto *gp);

/* A fresh value name built from `base` that no value of the import has yet
 * ("base", else "base#2", "base#3", ...), allocated in the graph arena. */
const char *kn_fe_unique_name(kn_fe_ctx *cx, const char *base);

/* Writes "[d0,d1,...]" into buf (truncated to size). */
void kn_fe_dims_str(char *buf, size_t size, const int64_t *dims, size_t n);

/* True for the default ONNX domain: NULL, "" or "ai.onnx". */
bool kn_fe_is_default_domain(const char *domain);

/* Name of an ONNX TensorProto.DataType code, for messages. */
const char *kn_fe_onnx_type_name(int code);

/* Converts a TensorProto (raw_data, typed fields or external data) into a
 * constant value named `value_name`. `what` names the tensor in diagnostics
 * ("initializer 'w'"). Returns the value index, or -1 after a diagnostic (no
 * value is added then). The caller registers the name. */
int kn_fe_tensor_to_const(kn_fe_ctx *cx, const Onnx__TensorProto *t, const char *value_name,
                          const char *what);

/* False if the serialized ModelProto nests messages more than max_depth
 * levels deep (checked before decoding: protobuf-c recursion is unbounded). */
bool kn_fe_model_depth_ok(const uint8_t *data, size_t size, int max_depth);

/* Imports every node of the graph (Constant nodes become constant values),
 * then resolves node inputs by name, so nodes may come in any order. Inputs
 * and initializers must already be in cx->names. Errors are counted in cx. */
void kn_fe_import_nodes(kn_fe_ctx *cx, const Onnx__GraphProto *gp);

/* Imports the GRAPH attributes of node ni (made from np) as kn_subgraphs
 * (onnx_subgraph.c) and appends their captures to the node's inputs. */
void kn_fe_import_subgraphs(kn_fe_ctx *cx, int ni, const Onnx__NodeProto *np);

#endif
