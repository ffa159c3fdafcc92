/* test_onnx_load.c — the ONNX loader against the models written by
 * tests/models/make_small_models.py (the numbers checked here are the ones
 * written there). Usage: test_onnx_load MODELS_DIR
 *
 * Good models: every value, dtype, shape, attribute and constant byte.
 * Bad models: exactly the expected diagnostics (each naming the culprit), no
 * crash. Every prefix and many byte flips of the good models must load or
 * fail cleanly (a small fuzz, meaningful under ASan/UBSan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frontend/onnx_load.h"

static const char *models_dir; /* argv[1] */

typedef struct loaded {
  kn_graph g;
  kn_diag d;
  int rc;
  char path[1024];
} loaded;

/* Loads `file` with the symbolic dims dims[0..n_dims) pinned (--dim). */
static loaded *load_pinned(const char *file, const kn_fe_dim *dims, int n_dims) {
  loaded *l = calloc(1, sizeof *l);
  assert_non_null(l);
  snprintf(l->path, sizeof l->path, "%s/%s", models_dir, file);
  kn_graph_init(&l->g);
  kn_diag_init(&l->d);
  l->rc = kn_fe_load_onnx_dims(l->path, dims, n_dims, &l->g, &l->d);
  return l;
}

static loaded *load(const char *file) { return load_pinned(file, NULL, 0); }

static void unload(loaded *l) {
  kn_graph_free(&l->g);
  kn_diag_free(&l->d);
  free(l);
}

static void expect_ok(const loaded *l) {
  if (l->rc != 0) kn_diag_print(&l->d, "unexpected");
  assert_int_equal(l->rc, 0);
  assert_int_equal(l->d.count, 0);
}

/* Diagnostic i must be exactly "<model path>: <msg>". */
static void expect_diag(const loaded *l, int i, const char *msg) {
  char want[2048];
  snprintf(want, sizeof want, "%s: %s", l->path, msg);
  assert_true(i < l->d.count);
  assert_string_equal(l->d.lines[i], want);
}

/* Loading with pins fails with exactly the given diagnostics, in order. */
static void expect_errors_pinned(const char *file, const kn_fe_dim *dims, int n_dims, int n, const char *const *msgs) {
  loaded *l = load_pinned(file, dims, n_dims);
  if (l->d.count != n) kn_diag_print(&l->d, file);
  assert_int_equal(l->rc, -1);
  assert_int_equal(l->d.count, n);
  for (int i = 0; i < n; i++) expect_diag(l, i, msgs[i]);
  unload(l);
}

/* Loading fails with exactly the given diagnostics, in order. */
static void expect_errors(const char *file, int n, const char *const *msgs) {
  expect_errors_pinned(file, NULL, 0, n, msgs);
}

static int val(const kn_graph *g, const char *name) {
  int v = kn_graph_find_value(g, name);
  if (v < 0) fail_msg("no value '%s'", name);
  return v;
}

static int node(const kn_graph *g, const char *name) {
  for (int i = 0; i < g->n_nodes; i++)
    if (strcmp(g->nodes[i].name, name) == 0) return i;
  fail_msg("no node '%s'", name);
  return -1;
}

static void expect_shape(const kn_value *v, int rank, const int64_t *dims, uint32_t batch_mask) {
  assert_true(v->shape_known);
  assert_int_equal(v->shape.rank, rank);
  for (int i = 0; i < rank; i++) assert_int_equal(v->shape.dim[i], dims[i]);
  assert_int_equal(v->shape.batch_mask, batch_mask);
}

/* A constant of the given dtype/shape whose bytes equal `data`. */
static void expect_const(const kn_graph *g, const char *name, kn_dtype dtype, int rank,
                         const int64_t *dims, const void *data, size_t bytes) {
  const kn_value *v = &g->values[val(g, name)];
  assert_int_equal(v->dtype, dtype);
  expect_shape(v, rank, dims, 0);
  assert_int_equal(v->producer, -1);
  assert_non_null(v->data);
  assert_int_equal((size_t)kn_shape_numel_max(&v->shape, 1) * kn_dtype_size(dtype), bytes);
  if (bytes) assert_memory_equal(v->data, data, bytes);
}

/* ---- good models ---- */

static void test_conv(void **state) {
  (void)state;
  loaded *l = load("conv.onnx");
  expect_ok(l);
  const kn_graph *g = &l->g;
  assert_int_equal(g->opset, 17);
  assert_null(g->batch_symbol);
  assert_int_equal(g->n_inputs, 1);
  assert_int_equal(g->inputs[0], val(g, "x"));
  const kn_value *x = &g->values[g->inputs[0]];
  assert_int_equal(x->dtype, KN_DT_F32);
  assert_null(x->data);
  expect_shape(x, 4, (int64_t[]){1, 3, 8, 8}, 0);

  float w[108];
  for (int i = 0; i < 108; i++) w[i] = (float)(i - 54) * 0.25f;
  expect_const(g, "W", KN_DT_F32, 4, (int64_t[]){4, 3, 3, 3}, w, sizeof w);
  expect_const(g, "B", KN_DT_F32, 1, (int64_t[]){4}, (float[]){0.5f, -1.5f, 2.0f, 0.0f}, 16);

  assert_int_equal(g->n_nodes, 2);
  const kn_node *conv = &g->nodes[node(g, "conv0")];
  assert_int_equal(conv->op, KN_OP_CONV);
  assert_string_equal(conv->op_type, "Conv");
  assert_string_equal(conv->domain, "");
  assert_int_equal(conv->n_in, 3);
  assert_int_equal(conv->in[0], val(g, "x"));
  assert_int_equal(conv->in[1], val(g, "W"));
  assert_int_equal(conv->in[2], val(g, "B"));
  assert_int_equal(conv->n_out, 1);
  assert_int_equal(g->values[conv->out[0]].producer, node(g, "conv0"));
  int n = 0;
  const int64_t *pads = kn_node_attr_ints(conv, "pads", &n);
  assert_int_equal(n, 4);
  for (int i = 0; i < 4; i++) assert_int_equal(pads[i], 1);
  assert_non_null(kn_node_attr_ints(conv, "kernel_shape", &n));
  assert_int_equal(n, 2);
  assert_int_equal(kn_node_attr_int(conv, "group", 1), 1); /* absent: default */
  assert_string_equal(kn_node_attr_string(conv, "auto_pad", "NOTSET"), "NOTSET");
  assert_null(kn_node_attr_ints(conv, "dilations", &n));

  const kn_node *relu = &g->nodes[node(g, "relu0")];
  assert_int_equal(relu->op, KN_OP_RELU);
  assert_int_equal(relu->in[0], conv->out[0]);
  assert_int_equal(g->n_outputs, 1);
  assert_int_equal(g->outputs[0], relu->out[0]);
  assert_string_equal(g->values[g->outputs[0]].name, "y");
  assert_int_equal(kn_fe_unsupported_count(g), 0);
  unload(l);
}

static void test_typed(void **state) {
  (void)state;
  loaded *l = load("typed.onnx");
  expect_ok(l);
  const kn_graph *g = &l->g;
  assert_int_equal(g->opset, 13);
  expect_const(g, "shape", KN_DT_I64, 1, (int64_t[]){2}, (int64_t[]){6, 4}, 16);
  expect_const(g, "f32", KN_DT_F32, 2, (int64_t[]){2, 2}, (float[]){1.5f, -2.0f, 3.25f, 0.0f}, 16);
  expect_const(g, "i8", KN_DT_I8, 1, (int64_t[]){3}, (int8_t[]){-128, 5, 127}, 3);
  expect_const(g, "u8", KN_DT_U8, 1, (int64_t[]){2}, (uint8_t[]){0, 255}, 2);
  expect_const(g, "i16", KN_DT_I16, 1, (int64_t[]){2}, (int16_t[]){-300, 300}, 4);
  expect_const(g, "u16", KN_DT_U16, 1, (int64_t[]){1}, (uint16_t[]){65535}, 2);
  expect_const(g, "i32", KN_DT_I32, 1, (int64_t[]){2}, (int32_t[]){-7, 2147483647}, 8);
  expect_const(g, "b", KN_DT_BOOL, 1, (int64_t[]){3}, (uint8_t[]){1, 0, 1}, 3);
  expect_const(g, "h", KN_DT_F16, 1, (int64_t[]){2}, (uint16_t[]){0x3C00, 0xC100}, 4);
  expect_const(g, "bf", KN_DT_BF16, 1, (int64_t[]){2}, (uint16_t[]){0x3F80, 0xC020}, 4);
  const uint16_t *h = g->values[val(g, "h")].data;
  assert_float_equal(kn_f16_to_f32(h[1]), -2.5f, 0);
  const uint16_t *bf = g->values[val(g, "bf")].data;
  assert_float_equal(kn_bf16_to_f32(bf[1]), -2.5f, 0);
  expect_const(g, "d", KN_DT_F64, 1, (int64_t[]){2}, (double[]){0.1, -1e300}, 16);
  expect_const(g, "u32", KN_DT_U32, 1, (int64_t[]){2}, (uint32_t[]){4000000000u, 1}, 8);
  expect_const(g, "u64", KN_DT_U64, 1, (int64_t[]){1}, (uint64_t[]){(UINT64_C(1) << 63) + 5}, 8);
  expect_const(g, "empty", KN_DT_F32, 2, (int64_t[]){0, 3}, NULL, 0);
  expect_const(g, "s", KN_DT_F32, 0, NULL, (float[]){7.0f}, 4);

  /* Constant nodes became constants; no Constant node is left. */
  expect_const(g, "cf", KN_DT_F32, 0, NULL, (float[]){2.5f}, 4);
  expect_const(g, "cfs", KN_DT_F32, 1, (int64_t[]){3}, (float[]){1, 2, 3}, 12);
  expect_const(g, "ci", KN_DT_I64, 0, NULL, (int64_t[]){-4}, 8);
  expect_const(g, "cis", KN_DT_I64, 1, (int64_t[]){2}, (int64_t[]){5, 6}, 16);
  expect_const(g, "ct", KN_DT_F32, 2, (int64_t[]){2, 2}, (float[]){1, 2, 3, 4}, 16);
  assert_int_equal(g->n_nodes, 6);
  for (int i = 0; i < g->n_nodes; i++) assert_int_not_equal(g->nodes[i].op, KN_OP_CONSTANT);

  /* File order is kept (consumers first); inputs resolve anyway. */
  assert_int_equal(node(g, "Identity_0"), 0); /* invented name */
  assert_int_equal(node(g, "reshape0"), 5);
  const kn_node *id = &g->nodes[0];
  assert_int_equal(id->op, KN_OP_IDENTITY);
  assert_int_equal(id->in[0], val(g, "out"));
  const kn_node *drop = &g->nodes[node(g, "drop0")];
  assert_int_equal(drop->n_out, 2);
  assert_int_equal(drop->out[0], val(g, "out"));
  assert_string_equal(g->values[drop->out[1]].name, "drop0#out1"); /* omitted output */
  assert_int_equal(g->values[drop->out[1]].producer, node(g, "drop0"));
  const kn_node *clip = &g->nodes[node(g, "clip0")];
  assert_int_equal(clip->n_in, 3);
  assert_int_equal(clip->in[0], val(g, "z"));
  assert_int_equal(clip->in[1], -1); /* omitted optional input */
  assert_int_equal(clip->in[2], val(g, "cf"));
  const kn_node *reshape = &g->nodes[5];
  assert_int_equal(reshape->op, KN_OP_RESHAPE);
  assert_int_equal(reshape->in[0], val(g, "x"));
  assert_int_equal(reshape->in[1], val(g, "shape"));

  /* Every attribute kind. */
  const kn_node *relu = &g->nodes[node(g, "relu1")];
  assert_int_equal(relu->n_attr, 8);
  assert_int_equal(kn_node_attr_int(relu, "a_int", 0), 42);
  assert_float_equal(kn_node_attr_float(relu, "a_float", 0), 0.5f, 0);
  assert_string_equal(kn_node_attr_string(relu, "a_string", ""), "hello");
  int n = 0;
  const int64_t *ints = kn_node_attr_ints(relu, "a_ints", &n);
  assert_int_equal(n, 3);
  assert_int_equal(ints[0], 1);
  assert_int_equal(ints[1], -2);
  assert_int_equal(ints[2], 3);
  const kn_attr *a = kn_node_attr(relu, "a_floats");
  assert_int_equal(a->kind, KN_ATTR_FLOATS);
  assert_int_equal(a->n, 2);
  assert_float_equal(a->floats[0], 0.25f, 0);
  assert_float_equal(a->floats[1], -1.0f, 0);
  a = kn_node_attr(relu, "a_strings");
  assert_int_equal(a->kind, KN_ATTR_STRINGS);
  assert_int_equal(a->n, 2);
  assert_string_equal(a->strings[0], "ab");
  assert_string_equal(a->strings[1], "cde");
  a = kn_node_attr(relu, "a_tensor");
  assert_int_equal(a->kind, KN_ATTR_TENSOR);
  assert_string_equal(g->values[a->value].name, "relu1#a_tensor");
  expect_const(g, "relu1#a_tensor", KN_DT_I32, 1, (int64_t[]){2}, (int32_t[]){9, 8}, 8);
  a = kn_node_attr(relu, "a_graph");
  assert_int_equal(a->kind, KN_ATTR_GRAPH);
  assert_int_equal(kn_node_attr_int(relu, "a_float", -1), -1); /* wrong kind: default */

  assert_int_equal(g->n_outputs, 2);
  assert_int_equal(g->outputs[0], val(g, "out"));
  assert_int_equal(g->outputs[1], val(g, "out2"));
  unload(l);
}

static void test_external(void **state) {
  (void)state;
  loaded *l = load("external.onnx");
  expect_ok(l);
  const kn_graph *g = &l->g;
  expect_const(g, "ew", KN_DT_F32, 2, (int64_t[]){2, 3}, (float[]){0.5f, 1, 1.5f, 2, 2.5f, 3}, 24);
  expect_const(g, "eb", KN_DT_I64, 1, (int64_t[]){3}, (int64_t[]){10, -20, 30}, 24);
  expect_const(g, "etail", KN_DT_F32, 1, (int64_t[]){4}, (float[]){9, 8, 7, 6}, 16);
  assert_int_equal(g->nodes[0].in[1], val(g, "ew"));
  unload(l);
}

static void test_batch(void **state) {
  (void)state;
  loaded *l = load("batch.onnx");
  expect_ok(l);
  kn_graph *g = &l->g;
  assert_string_equal(g->batch_symbol, "N");
  assert_int_equal(g->max_batch, 1);
  assert_int_equal(g->n_inputs, 3);
  const kn_value *x = &g->values[g->inputs[0]];
  expect_shape(x, 3, (int64_t[]){1, 3, 4}, 1);
  expect_shape(&g->values[g->inputs[1]], 2, (int64_t[]){1, 4}, 1);
  const kn_value *k = &g->values[val(g, "k")];
  assert_int_equal(k->dtype, KN_DT_I64);
  expect_shape(k, 2, (int64_t[]){4, 1}, 2); /* the batch symbol at index 1 */
  assert_int_equal(kn_value_numel(g, g->inputs[0]), 12);
  g->max_batch = 8;
  assert_int_equal(kn_value_numel(g, g->inputs[0]), 96);
  assert_int_equal(kn_value_numel(g, val(g, "k")), 32);
  unload(l);
}

/* --dim: the values parsed (and refused), each pinned dim read as static. */
static void test_dims_parse(void **state) {
  (void)state;
  kn_arena arena;
  kn_arena_init(&arena);
  kn_diag d;
  kn_diag_init(&d);
  kn_fe_dim dims[8];
  assert_int_equal(kn_fe_dims_parse((const char *[]){"S=3", "H=2", "S=3"}, 3, &arena, dims, &d), 2);
  assert_int_equal(d.count, 0);
  assert_string_equal(dims[0].name, "S");
  assert_int_equal(dims[0].value, 3);
  assert_string_equal(dims[1].name, "H");
  assert_int_equal(dims[1].value, 2);
  const char *bad[] = {"S", "=3", "S=", "S=x", "S=3x", "S=+3", "S=0", "S=-2", "S=1099511627777",
                       "S=99999999999999999999", "H=5", "H=6"};
  static const char *const want[] = {
      "--dim 'S': expected NAME=VALUE with VALUE a whole number (e.g. --dim seq=128)",
      "--dim '=3': expected NAME=VALUE with VALUE a whole number (e.g. --dim seq=128)",
      "--dim 'S=': expected NAME=VALUE with VALUE a whole number (e.g. --dim seq=128)",
      "--dim 'S=x': expected NAME=VALUE with VALUE a whole number (e.g. --dim seq=128)",
      "--dim 'S=3x': expected NAME=VALUE with VALUE a whole number (e.g. --dim seq=128)",
      "--dim 'S=+3': expected NAME=VALUE with VALUE a whole number (e.g. --dim seq=128)",
      "--dim 'S=0': the value must be from 1 to 1099511627776",
      "--dim 'S=-2': the value must be from 1 to 1099511627776",
      "--dim 'S=1099511627777': the value must be from 1 to 1099511627776",
      "--dim 'S=99999999999999999999': the value must be from 1 to 1099511627776",
      "--dim 'H=6': H is given twice, as 5 and as 6",
  };
  assert_int_equal(kn_fe_dims_parse(bad, 12, &arena, dims, &d), -1);
  if (d.count != 11) kn_diag_print(&d, "dims");
  assert_int_equal(d.count, 11);
  for (int i = 0; i < 11; i++) assert_string_equal(d.lines[i], want[i]);
  kn_diag_free(&d);
  kn_arena_free(&arena);
}

static void test_dims(void **state) {
  (void)state;
  /* S and H pinned: B stays the batch symbol; y's declared shape is not
   * static (B), z's is; both note where they declare a pinned dim */
  const kn_fe_dim sh[] = {{"S", 3}, {"H", 2}};
  loaded *l = load_pinned("dims.onnx", sh, 2);
  expect_ok(l);
  kn_graph *g = &l->g;
  assert_string_equal(g->batch_symbol, "B");
  expect_shape(&g->values[g->inputs[0]], 3, (int64_t[]){1, 3, 4}, 1);
  expect_shape(&g->values[g->inputs[1]], 2, (int64_t[]){3, 2}, 0);
  assert_int_equal(g->out_declared[0].rank, -1);
  assert_int_equal(g->out_declared[1].rank, 2);
  assert_int_equal(g->out_declared[1].dim[0], 3);
  assert_int_equal(g->out_declared[1].dim[1], 2);
  assert_non_null(g->out_pinned);
  assert_null(g->out_pinned[0]);
  assert_string_equal(g->out_pinned[1], "S");
  assert_string_equal(g->out_pinned[KN_MAX_RANK + 0], "S");
  assert_string_equal(g->out_pinned[KN_MAX_RANK + 1], "H");
  unload(l);

  /* the batch symbol pinned too: no batch left, every shape static */
  const kn_fe_dim bsh[] = {{"B", 2}, {"S", 3}, {"H", 2}};
  l = load_pinned("dims.onnx", bsh, 3);
  expect_ok(l);
  g = &l->g;
  assert_null(g->batch_symbol);
  expect_shape(&g->values[g->inputs[0]], 3, (int64_t[]){2, 3, 4}, 0);
  assert_int_equal(g->out_declared[0].rank, 3);
  assert_int_equal(g->out_declared[0].dim[0], 2);
  unload(l);

  /* no pins: every symbolic dim but the batch, each with its fix; a pin
   * missing leaves its own error */
  expect_errors("dims.onnx", 3,
                (const char *[]){"input 'x' has symbolic dim 'S' at index 1; Kiln supports a symbolic batch dim "
                                 "only; fix it with --dim S=VALUE",
                                 "input 'm' has symbolic dim 'S' at index 0; Kiln supports a symbolic batch dim "
                                 "only; fix it with --dim S=VALUE",
                                 "input 'm' has symbolic dim 'H' at index 1; Kiln supports a symbolic batch dim "
                                 "only; fix it with --dim H=VALUE"});
  expect_errors_pinned("dims.onnx", sh, 1, 1,
                       (const char *[]){"input 'm' has symbolic dim 'H' at index 1; Kiln supports a symbolic batch "
                                        "dim only; fix it with --dim H=VALUE"});
  /* a name the inputs do not have: that line alone */
  expect_errors_pinned("dims.onnx", (const kn_fe_dim[]){{"S", 3}, {"Q", 1}}, 2, 1,
                       (const char *[]){"--dim 'Q': the model has no symbolic dim 'Q'; its symbolic dims: B, S, H"});
  expect_errors_pinned("conv.onnx", (const kn_fe_dim[]){{"Q", 1}}, 1, 1,
                       (const char *[]){"--dim 'Q': the model has no symbolic dim 'Q'; its inputs have none"});

  /* 40 symbolic dims: the list stops after 32, a pin of the 40th is known */
  char want[1024] = "--dim 'Q': the model has no symbolic dim 'Q'; its symbolic dims: D0";
  for (int i = 1; i < 32; i++) snprintf(want + strlen(want), sizeof want - strlen(want), ", D%d", i);
  strcat(want, ", ...");
  expect_errors_pinned("many_dims.onnx", (const kn_fe_dim[]){{"D39", 2}, {"Q", 1}}, 2, 1, (const char *[]){want});
}

static void test_buffer(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s/external.onnx", models_dir);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  uint8_t buf[4096];
  size_t size = fread(buf, 1, sizeof buf, f);
  fclose(f);
  assert_true(size > 0 && size < sizeof buf);

  kn_graph g;
  kn_diag d;
  kn_graph_init(&g);
  kn_diag_init(&d);
  assert_int_equal(kn_fe_load_onnx_buffer(buf, size, models_dir, &g, &d), 0);
  assert_int_equal(d.count, 0);
  const float *ew = g.values[kn_graph_find_value(&g, "ew")].data;
  assert_float_equal(ew[5], 3.0f, 0);
  kn_graph_free(&g);

  /* Without a base directory, external data is refused (one line each). */
  kn_graph_init(&g);
  assert_int_equal(kn_fe_load_onnx_buffer(buf, size, NULL, &g, &d), -1);
  assert_int_equal(d.count, 3);
  assert_string_equal(d.lines[0], "<buffer>: initializer 'ew': external data 'external.bin' needs "
                                  "the model's directory");
  kn_graph_free(&g);
  kn_diag_free(&d);
}

/* ---- unsupported ops ---- */

static void test_unsupported(void **state) {
  (void)state;
  loaded *l = load("unsupported.onnx");
  assert_int_equal(l->rc, -1);
  assert_int_equal(l->d.count, 2); /* If is supported: its branches are imported */
  expect_diag(l, 0, "unsupported op 'NonMaxSuppression' (domain 'ai.onnx', opset 17) at node 'unique0': its output "
                    "shape depends on input values; Kiln compiles static shapes");
  expect_diag(l, 1, "unsupported op 'FancyOp' (domain 'com.example', opset 2) at node 'fancy0'");
  /* The graph is still complete, for a census. */
  const kn_graph *g = &l->g;
  assert_int_equal(kn_fe_unsupported_count(g), 2);
  assert_int_equal(g->n_nodes, 4);
  const kn_node *unique = &g->nodes[node(g, "unique0")];
  assert_int_equal(unique->op, KN_OP_UNKNOWN);
  assert_int_equal(unique->n_out, 2);
  assert_int_equal(unique->in[0], val(g, "x"));
  const kn_node *fancy = &g->nodes[node(g, "fancy0")];
  assert_string_equal(fancy->domain, "com.example");
  assert_string_equal(fancy->op_type, "FancyOp");
  assert_float_equal(kn_node_attr_float(fancy, "alpha", 0), 1.0f, 0);
  assert_int_equal(fancy->in[0], unique->out[0]);
  const kn_node *relu = &g->nodes[node(g, "relu0")];
  assert_int_equal(relu->op, KN_OP_RELU);
  assert_int_equal(relu->in[0], fancy->out[0]);
  const kn_node *iff = &g->nodes[node(g, "if0")];
  assert_int_equal(kn_node_attr(iff, "then_branch")->kind, KN_ATTR_GRAPH);
  assert_int_equal(kn_node_attr(iff, "else_branch")->kind, KN_ATTR_GRAPH);
  /* each branch reads the outer 'x': a capture, appended to the If's inputs */
  const kn_subgraph *then_g = kn_node_attr(iff, "then_branch")->graph;
  const kn_subgraph *else_g = kn_node_attr(iff, "else_branch")->graph;
  assert_non_null(then_g);
  assert_non_null(else_g);
  assert_int_equal(then_g->n_nodes, 1);
  assert_int_equal(then_g->n_captures, 1);
  assert_int_equal(then_g->captures[0], val(g, "x"));
  assert_int_equal(then_g->capture_base + else_g->capture_base, 3); /* 1 and 2, in attribute order */
  assert_int_equal(iff->n_in, 3);
  assert_int_equal(iff->in[1], val(g, "x"));
  assert_int_equal(iff->in[2], val(g, "x"));
  assert_int_equal(then_g->nodes[0].in[0], val(g, "x"));
  assert_string_equal(g->values[then_g->outputs[0]].name, "if0/then_branch/o");
  expect_const(g, "cond", KN_DT_BOOL, 0, NULL, (uint8_t[]){1}, 1);
  assert_int_equal(g->n_outputs, 3);
  unload(l);
}

/* ---- bad files: exact diagnostics ---- */

static void test_bad_files(void **state) {
  (void)state;
  expect_errors("truncated.onnx", 1,
                (const char *[]){"cannot decode the ONNX model (truncated, or not a ModelProto)"});
  expect_errors("garbage.onnx", 1,
                (const char *[]){"cannot decode the ONNX model (truncated, or not a ModelProto)"});
  expect_errors("empty.onnx", 1, (const char *[]){"empty file; not an ONNX model"});
  expect_errors("no_such_model.onnx", 1,
                (const char *[]){"cannot open: No such file or directory"});
  expect_errors("sub", 1, (const char *[]){"not a regular file"});
}

static void test_bad_graphs(void **state) {
  (void)state;
  expect_errors("undefined.onnx", 2,
                (const char *[]){"node 'conv0' (Conv): input 'B' is not defined",
                                 "node 'add0' (Add): input 'ghost' is not defined"});
  expect_errors("bad_size.onnx", 1,
                (const char *[]){"initializer 'W': raw_data has 431 bytes, expected 432 for "
                                 "shape [4,3,3,3] of float32"});
  expect_errors(
      "bad_dims.onnx", 4,
      (const char *[]){
          "initializer 'neg': negative dim -3 at index 1 of shape [2,-3]",
          "initializer 'huge': shape [1099511627776,1099511627776] has too many elements",
          "initializer 'cnt': float_data has 2 elements, expected 3 for shape [3] of float32",
          "initializer 'wrong': float_data is set, but int32 data belongs in int32_data"});
  expect_errors(
      "bad_misc.onnx", 2,
      (const char *[]){"node 'cs' (Constant): attribute 'value_string' is not supported (expected "
                       "value, value_float, value_floats, value_int or value_ints)",
                       "node 'relu_b' (Relu): output 'y' is already defined"});
  expect_errors("bad_symbolic.onnx", 2,
                (const char *[]){"input 'x' has symbolic dim 'S' at index 1; Kiln supports a "
                                 "symbolic batch dim only; fix it with --dim S=VALUE",
                                 "input 'u' has an unknown dim at index 1; Kiln supports a "
                                 "symbolic batch dim only"});
}

static void test_bad_external(void **state) {
  (void)state;
  expect_errors("ext_abs.onnx", 1,
                (const char *[]){"initializer 'w': external data location '/etc/passwd' must be "
                                 "a relative path inside the model's directory"});
  expect_errors("ext_dotdot.onnx", 1,
                (const char *[]){"initializer 'w': external data location "
                                 "'sub/../../external.bin' must be a relative path inside the "
                                 "model's directory"});
  char msg[2048];
  snprintf(msg, sizeof msg,
           "initializer 'w': external data file '%s/external.bin' has 88 bytes; expected 400 "
           "bytes at offset 64",
           models_dir);
  expect_errors("ext_short.onnx", 1, (const char *[]){msg});
  snprintf(msg, sizeof msg,
           "initializer 'w': cannot open external data file '%s/nope.bin': No such file or "
           "directory",
           models_dir);
  expect_errors("ext_missing.onnx", 1, (const char *[]){msg});
}

/* ---- robustness: prefixes and byte flips never crash ---- */

static size_t read_model(const char *file, uint8_t *buf, size_t cap) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", models_dir, file);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  size_t size = fread(buf, 1, cap, f);
  fclose(f);
  assert_true(size > 0 && size < cap);
  return size;
}

static void load_mutant(const uint8_t *data, size_t size, int *n_ok) {
  kn_graph g;
  kn_diag d;
  kn_graph_init(&g);
  kn_diag_init(&d);
  int rc = kn_fe_load_onnx_buffer(data, size, models_dir, &g, &d);
  assert_true(rc == 0 || rc == -1);
  if (rc == 0) {
    assert_int_equal(d.count, 0);
    (*n_ok)++;
  } else {
    assert_true(d.count > 0);
  }
  kn_graph_free(&g);
  kn_diag_free(&d);
}

static void test_mutants(void **state) {
  (void)state;
  static const struct {
    const char *file;
    bool loads; /* the unmutated model loads */
  } files[] = {{"conv.onnx", true},
               {"typed.onnx", true},
               {"external.onnx", true},
               {"batch.onnx", true},
               {"unsupported.onnx", false}};
  static uint8_t buf[8192], mut[8192];
  for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
    size_t size = read_model(files[f].file, buf, sizeof buf);
    int n_ok = 0;
    for (size_t cut = 0; cut < size; cut++) load_mutant(buf, cut, &n_ok);
    for (size_t at = 0; at < size; at++)
      for (int bit = 0; bit < 8; bit += 3) {
        memcpy(mut, buf, size);
        mut[at] ^= (uint8_t)(1u << bit);
        load_mutant(mut, size, &n_ok);
      }
    if (files[f].loads) assert_true(n_ok > 0); /* e.g. mutants of names still load */
  }
}

/* Writes varint v to end just before `at`; returns its length. */
static size_t put_varint_back(uint8_t *at, uint64_t v) {
  uint8_t tmp[10];
  size_t n = 0;
  do {
    tmp[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  memcpy(at - n, tmp, n);
  return n;
}

/* ModelProto{graph: GraphProto{node: NodeProto{attribute: AttributeProto{g:
 * GraphProto{...}}}}} nested `levels` times, built back to front. */
static uint8_t *nested_model(int levels, size_t *size, uint8_t **base) {
  size_t cap = (size_t)levels * 32 + 64;
  uint8_t *buf = malloc(cap), *end = buf + cap, *p = end;
  assert_non_null(buf);
  static const uint8_t tags[3] = {0x32 /* g = 6 */, 0x2a /* attribute = 5 */, 0x0a /* node = 1 */};
  for (int l = 0; l < levels; l++)
    for (int t = 0; t < 3; t++) {
      p -= put_varint_back(p, (uint64_t)(end - p));
      *--p = tags[t];
    }
  p -= put_varint_back(p, (uint64_t)(end - p));
  *--p = 0x3a; /* graph = 7 */
  *size = (size_t)(end - p);
  *base = buf;
  return p;
}

/* protobuf-c recurses without a limit: a deep file must be refused, not
 * overflow the stack. */
static void test_deep_nesting(void **state) {
  (void)state;
  static const int levels[] = {3, 100000};
  for (int i = 0; i < 2; i++) {
    size_t size;
    uint8_t *base, *data = nested_model(levels[i], &size, &base);
    kn_graph g;
    kn_diag d;
    kn_graph_init(&g);
    kn_diag_init(&d);
    assert_int_equal(kn_fe_load_onnx_buffer(data, size, NULL, &g, &d), -1);
    if (i == 0) {
      assert_int_equal(g.n_nodes, 1); /* decoded: a node without op_type nor attribute name */
      assert_string_equal(d.lines[0], "<buffer>: node 'node_0' has no op_type");
    } else {
      assert_int_equal(d.count, 1);
      assert_string_equal(d.lines[0],
                          "<buffer>: messages nest deeper than 100 levels; not a sane ONNX model");
    }
    kn_graph_free(&g);
    kn_diag_free(&d);
    free(base);
  }
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODELS_DIR (written by tests/models/make_small_models.py)\n",
            argv[0]);
    return 2;
  }
  models_dir = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv),         cmocka_unit_test(test_typed),
      cmocka_unit_test(test_external),     cmocka_unit_test(test_batch),
      cmocka_unit_test(test_dims_parse),   cmocka_unit_test(test_dims),
      cmocka_unit_test(test_buffer),       cmocka_unit_test(test_unsupported),
      cmocka_unit_test(test_bad_files),    cmocka_unit_test(test_bad_graphs),
      cmocka_unit_test(test_bad_external), cmocka_unit_test(test_mutants),
      cmocka_unit_test(test_deep_nesting),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
