/* te_harness.h — builds one-node graphs for the TE operator tests and checks
 * the node's TE (evaluated by kn_te_eval) against the reference interpreter
 * (kn_ref_run_graph of ir/ref/ref_eval.h) on random inputs.
 *
 * Usage: th_init, add inputs/constants, th_node + attributes, th_check.
 * Graph inputs get fresh random data at each check (range per input); shape
 * inference (kn_infer_shapes) fills in every output shape. Floats compare
 * with |te - ref| <= 1e-5 * max(1, |ref|); integers and bools exactly. */
#ifndef KN_TE_HARNESS_H
#define KN_TE_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ir/graph/graph.h"
#include "ir/te/te.h"

#define TH_MAX_IO 16

typedef struct th {
  kn_graph g;
  kn_diag d;
  uint64_t rng;
  int inputs[TH_MAX_IO];
  double lo[TH_MAX_IO], hi[TH_MAX_IO];
  const void *fixed[TH_MAX_IO]; /* explicit data (at the checked batch), or NULL */
  int n_inputs;
  int node; /* the last node added (index before toposort) */
  const char *node_name;
  /* TE built by th_te / th_eval */
  kn_arena arena;
  kn_expr_ctx ec;
  kn_te_ctx tc;
  double tol;
} th;

void th_init(th *t, int64_t opset);
void th_free(th *t);

/* A graph input; `batch_mask` marks dims multiplied by N. Random data in
 * [lo, hi] (integers: rounded; bool: lo/hi ignored). */
int th_input(th *t, const char *name, kn_dtype dt, int rank, const int64_t *dims,
             uint32_t batch_mask, double lo, double hi);
/* A graph input whose data is given (laid out for the batch it is checked at). */
int th_input_data(th *t, const char *name, kn_dtype dt, int rank, const int64_t *dims,
                  uint32_t batch_mask, const void *data);
int th_const(th *t, const char *name, kn_dtype dt, int rank, const int64_t *dims, const void *data);
/* A constant filled with random data in [lo, hi]. */
int th_const_rand(th *t, const char *name, kn_dtype dt, int rank, const int64_t *dims, double lo,
                  double hi);
int th_const_ints(th *t, const char *name, int n, const int64_t *vals); /* rank-1 int64 */
int th_const_scalar(th *t, const char *name, kn_dtype dt, double v);    /* rank 0 */

/* Adds the node (outputs "<name>.y<k>", all graph outputs); returns it. */
int th_node(th *t, kn_op op, const char *name, const int *in, int n_in, int n_out);
void th_attr_int(th *t, const char *name, int64_t v);
void th_attr_float(th *t, const char *name, float v);
void th_attr_string(th *t, const char *name, const char *v);
void th_attr_ints(th *t, const char *name, int n, const int64_t *v);

/* Infers shapes (asserting success) and returns the node's index. */
int th_infer(th *t);
/* The TE of output `out` of the node (NULL on failure; diagnostics in t->d). */
kn_te_tensor *th_te(th *t, int out);
/* Evaluates output `out`'s TE at `batch` with the given input data;
 * `buf` sized for the output. Asserts success. */
void th_eval(th *t, int out, int64_t batch, void *const *input_data, void *buf);

/* The full check: random inputs, reference run, TE of every output,
 * evaluation, comparison, and the stage convention (reductions only at the
 * top of a compute body). Fails the cmocka test on mismatch. */
void th_check(th *t, int64_t batch);
/* Expects shape inference to fail, its first diagnostic containing `what`. */
void th_expect_infer_error(th *t, const char *what);
/* Expects kn_te_op to fail with a diagnostic containing `what`. */
void th_expect_unsupported(th *t, int out, const char *what);

/* Whole graphs: the TE of value v, built through its producers (graph
 * inputs and constants become placeholders); NULL with diagnostics. */
kn_te_tensor *th_graph_te(th *t, int v);
/* Evaluates every graph output's TE on `inputs` (g->inputs order) and
 * compares with `want` (one buffer per graph output). */
void th_check_graph_outputs(th *t, int64_t batch, void *const *inputs, void *const *want);
/* Random data for graph input i at `batch` (malloc'd; caller frees). */
void *th_make_input(th *t, int i, int64_t batch);

/* Deterministic random helpers. */
double th_rand(th *t, double lo, double hi);
/* Elements of value v's shape at batch N. */
int64_t th_numel(const th *t, int v, int64_t batch);

#define TH_DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define TH_INS(...) ((const int[]){__VA_ARGS__})

#endif
