/* cg_test.h — helpers for codegen tests: hand-built kernels wrapped into a
 * plan, packaged into a temp directory, loaded back with the loader. */
#ifndef KN_CG_TEST_H
#define KN_CG_TEST_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "codegen/codegen.h"
#include "ir/loop/loop.h"
#include "rt/loader.h"

#define CG_MAX_IO 512
#define CG_MAX_STEPS 512

typedef struct cg_case {
  kn_arena arena;
  kn_expr_ctx c;
  kn_plan plan;
  kn_plan_tensor inputs[CG_MAX_IO], outputs[CG_MAX_IO];
  kn_plan_step steps[CG_MAX_STEPS];
  kn_plan_const consts[16];
  kn_target target;
  char dir[256];  /* temp directory of this case */
  char path[512]; /* last packaged artifact */
  kn_loader loader;
} cg_case;

void cg_init(cg_case *t, const char *prefix);
void cg_free(cg_case *t); /* closes the artifact, removes the temp dir */

/* Tensors of shape [n] (batch_mask 0) or [1 x n] with a batch dim. */
int cg_input(cg_case *t, const char *name, kn_dtype dt, int64_t n);
int cg_output(cg_case *t, const char *name, kn_dtype dt, int64_t n);
int cg_input_batched(cg_case *t, const char *name, kn_dtype dt, int64_t n_per_batch);
int cg_output_batched(cg_case *t, const char *name, kn_dtype dt, int64_t n_per_batch);
int cg_const(cg_case *t, const char *name, const void *data, int64_t bytes);

/* A kernel with n params (names/dtypes given) and a body built later. */
kn_kernel *cg_kernel(cg_case *t, const char *name, int n, kn_buffer **params);
kn_buffer *cg_param(cg_case *t, const char *name, kn_dtype dt);
/* Adds a step: argument i is (kinds[i], indices[i], offset 0). */
void cg_step(cg_case *t, kn_kernel *k, const int *kinds, const int *indices);

/* Packages to dir/PREFIX.EXT; returns kn_cg_package's status (diag printed). */
int cg_package(cg_case *t, const char *ext);
/* cg_package(".so") + kn_loader_open, asserting success. */
const kiln_artifact *cg_build_and_load(cg_case *t);

/* Runs the loaded artifact; asserts KILN_OK. */
void cg_run(cg_case *t, const void *const *inputs, void *const *outputs, int64_t batch);

/* Expression shorthands. */
kn_expr *cg_var(cg_case *t, kn_var *v);
kn_expr *cg_i(cg_case *t, int64_t v);
kn_expr *cg_ramp(cg_case *t, kn_expr *base, int64_t stride, int lanes);

/* Runs a shell command; returns its exit status. */
int cg_system(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
