/* cg_test.c — see cg_test.h. */
#include "tests/codegen/cg_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

void cg_init(cg_case *t, const char *prefix) {
  memset(t, 0, sizeof *t);
  kn_arena_init(&t->arena);
  t->c.arena = &t->arena;
  t->plan.arena = &t->arena;
  t->plan.prefix = prefix;
  t->plan.inputs = t->inputs;
  t->plan.outputs = t->outputs;
  t->plan.steps = t->steps;
  t->plan.consts = t->consts;
  t->plan.max_batch = 4;
  t->plan.workspace_bytes = 0;
  kn_diag d;
  kn_diag_init(&d);
  int r = kn_target_parse(NULL, &t->target, &d);
  kn_diag_print(&d, "test");
  kn_diag_free(&d);
  assert_int_equal(r, 0);
  strcpy(t->dir, "/tmp/kiln-cg-XXXXXX");
  assert_non_null(mkdtemp(t->dir));
}

void cg_free(cg_case *t) {
  kn_loader_close(&t->loader);
  if (getenv("KN_TEST_KEEP"))
    fprintf(stderr, "kept %s\n", t->dir);
  else
    cg_system("rm -rf '%s'", t->dir);
  kn_arena_free(&t->arena);
}

static int add_tensor(kn_plan_tensor *arr, int *n, const char *name, kn_dtype dt, int64_t size,
                      bool batched) {
  assert_true(*n < CG_MAX_IO);
  kn_plan_tensor *x = &arr[*n];
  x->name = name;
  x->dtype = dt;
  if (batched) {
    x->shape.rank = 2;
    x->shape.dim[0] = 1;
    x->shape.dim[1] = size;
    x->shape.batch_mask = 1;
  } else {
    x->shape.rank = 1;
    x->shape.dim[0] = size;
  }
  return (*n)++;
}

int cg_input(cg_case *t, const char *name, kn_dtype dt, int64_t n) {
  return add_tensor(t->inputs, &t->plan.n_inputs, name, dt, n, false);
}
int cg_output(cg_case *t, const char *name, kn_dtype dt, int64_t n) {
  return add_tensor(t->outputs, &t->plan.n_outputs, name, dt, n, false);
}
int cg_input_batched(cg_case *t, const char *name, kn_dtype dt, int64_t n) {
  return add_tensor(t->inputs, &t->plan.n_inputs, name, dt, n, true);
}
int cg_output_batched(cg_case *t, const char *name, kn_dtype dt, int64_t n) {
  return add_tensor(t->outputs, &t->plan.n_outputs, name, dt, n, true);
}

int cg_const(cg_case *t, const char *name, const void *data, int64_t bytes) {
  int i = t->plan.n_consts++;
  t->consts[i].name = name;
  t->consts[i].data = data;
  t->consts[i].bytes = bytes;
  return i;
}

kn_buffer *cg_param(cg_case *t, const char *name, kn_dtype dt) {
  return kn_buffer_new(&t->c, name, dt, KN_BUF_PARAM, 0);
}

kn_kernel *cg_kernel(cg_case *t, const char *name, int n, kn_buffer **params) {
  kn_kernel *k = KN_NEW(&t->arena, kn_kernel);
  k->name = kn_arena_strdup(&t->arena, name);
  k->n_params = n;
  k->params = KN_NEW_ARRAY(&t->arena, kn_buffer *, n);
  for (int i = 0; i < n; i++) k->params[i] = params[i];
  k->nodes = "test";
  return k;
}

void cg_step(cg_case *t, kn_kernel *k, const int *kinds, const int *indices) {
  assert_true(t->plan.n_steps < CG_MAX_STEPS);
  kn_plan_step *s = &t->steps[t->plan.n_steps++];
  s->kernel = k;
  s->n_args = k->n_params;
  s->args = KN_NEW_ARRAY(&t->arena, kn_plan_arg, k->n_params > 0 ? k->n_params : 1);
  for (int i = 0; i < k->n_params; i++) {
    s->args[i].kind = kinds[i];
    s->args[i].index = indices[i];
  }
}

int cg_package(cg_case *t, const char *ext) {
  snprintf(t->path, sizeof t->path, "%s/%s%s", t->dir, t->plan.prefix, ext);
  kn_diag d;
  kn_diag_init(&d);
  int r = kn_cg_package(&t->plan, &t->target, t->path, NULL, &d);
  kn_diag_print(&d, "test");
  kn_diag_free(&d);
  return r;
}

const kiln_artifact *cg_build_and_load(cg_case *t) {
  assert_int_equal(cg_package(t, ".so"), 0);
  kn_diag d;
  kn_diag_init(&d);
  int r = kn_loader_open(t->path, &t->loader, &d);
  kn_diag_print(&d, "test");
  kn_diag_free(&d);
  assert_int_equal(r, 0);
  return t->loader.art;
}

void cg_run(cg_case *t, const void *const *inputs, void *const *outputs, int64_t batch) {
  kn_diag d;
  kn_diag_init(&d);
  void *ws = kn_loader_workspace_new(t->loader.art, &d);
  assert_non_null(ws);
  int r = kn_loader_run(&t->loader, inputs, outputs, ws, batch, &d);
  kn_diag_print(&d, "test");
  kn_diag_free(&d);
  kn_loader_workspace_free(ws);
  assert_int_equal(r, 0);
}

kn_expr *cg_var(cg_case *t, kn_var *v) { return kn_e_var(&t->c, v); }
kn_expr *cg_i(cg_case *t, int64_t v) { return kn_e_int(&t->c, v); }
kn_expr *cg_ramp(cg_case *t, kn_expr *base, int64_t stride, int lanes) {
  return kn_e_ramp(&t->c, base, kn_e_int(&t->c, stride), lanes);
}

int cg_system(const char *fmt, ...) {
  char cmd[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  int st = system(cmd);
  int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (getenv("KN_TEST_VERBOSE")) fprintf(stderr, "[%d] %s\n", rc, cmd);
  return rc;
}
