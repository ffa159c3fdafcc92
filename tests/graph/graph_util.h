/* graph_util.h — helpers for the graph tests: build small graphs by value
 * name, print them to a string, run them on seeded random inputs. */
#ifndef KN_TEST_GRAPH_UTIL_H
#define KN_TEST_GRAPH_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "ir/graph/graph.h"
#include "ir/passes/passes.h"
#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"

/* Parses "N*1,3,8,8" ("" = scalar) into a shape. */
kn_shape tg_shape(const char *spec);
/* A graph input with dtype and shape. */
int tg_input(kn_graph *g, const char *name, kn_dtype t, const char *shape);
/* Constants: explicit data, or seeded random floats in [-1, 1]. */
int tg_const(kn_graph *g, const char *name, kn_dtype t, const char *shape, const void *data);
int tg_const_f(kn_graph *g, const char *name, const char *shape, const float *data);
int tg_const_i64(kn_graph *g, const char *name, const char *shape, const int64_t *data);
int tg_const_rand(kn_graph *g, const char *name, const char *shape, unsigned seed, float lo, float hi);
/* A node: inputs / outputs as comma-separated value names ("_" = omitted);
 * missing output values are created. Returns the node index. */
int tg_node(kn_graph *g, kn_op op, const char *name, const char *ins, const char *outs);
void tg_attr_i(kn_graph *g, int node, const char *name, int64_t v);
void tg_attr_f(kn_graph *g, int node, const char *name, float v);
void tg_attr_s(kn_graph *g, int node, const char *name, const char *v);
void tg_attr_ints(kn_graph *g, int node, const char *name, int n, ...); /* n int64 values */
void tg_output(kn_graph *g, const char *name);
int tg_value(const kn_graph *g, const char *name); /* asserts it exists */

/* The printed graph, malloc'd. */
char *tg_print(const kn_graph *g);
/* Asserts that the printed graph equals expect (shows both on mismatch). */
void tg_expect_print(const kn_graph *g, const char *expect);
/* Runs kn_ref_run_graph on inputs drawn from seed; returns malloc'd output
 * buffers (one per graph output, caller frees with tg_free_outputs). */
void **tg_run(const kn_graph *g, int64_t batch, unsigned seed);
void tg_free_outputs(const kn_graph *g, void **outs);
/* Max |a-b| / (1 + |b|) over output i of two runs; identical values (also
 * infinities, NaN vs NaN) count as 0, any other NaN as the worst. */
double tg_max_rel_diff(const kn_graph *g, int i, int64_t batch, void **a, void **b);
/* Runs kn_infer_shapes and asserts success (printing diagnostics if not). */
void tg_infer_ok(kn_graph *g);
/* Runs kn_infer_shapes, asserts failure and that some diagnostic contains
 * `needle`. */
void tg_infer_fails(kn_graph *g, const char *needle);
/* Counts live nodes with op. */
int tg_count(const kn_graph *g, kn_op op);
float tg_randf(unsigned *state);

/* kn_pass_decompose, shapes and verification succeed on g and no node of
 * kind `op` is left (cmocka asserts). */
void tg_decompose_ok(kn_graph *g, kn_op op);
/* Runs pass, then shape inference and the verifier; asserts all succeed
 * (printing the diagnostics, prefixed `what`, when not). */
void tg_pass_ok(kn_graph *g, int (*pass)(kn_graph *, kn_diag *), const char *what);
/* kn_pass_decompose fails on g with a diagnostic containing `needle`. */
void tg_decompose_fails(kn_graph *g, const char *needle);
/* Runs g at batch 1 through the reference interpreter. */
void tg_ref_run(const kn_graph *g, const void *const *inputs, void **outs);

#endif
