/* package_cuda.c — the parts of packaging a GPU plan that are loop IR, not
 * LLVM: the checks of a GPU plan against its module and launch shapes, and
 * the grid function (codegen/package.c emits the rest).
 *
 * The grid of a launch is an expression of its kernel's batch variable
 * (kn_cuda_launch.grid). Rather than restricting grids to a closed form,
 * every grid expression becomes one store of a small host kernel,
 *   PREFIX_grid(args, batch): grid[3 * step + dim] = expression(batch)
 * with each kernel's batch variable replaced by this kernel's, compiled by
 * the CPU back end like any other kernel and called by the GPU runtime
 * before each run (kiln_gpu.grid). Whatever the CUDA emitter can write as a
 * grid, the CPU back end can evaluate. */
#include <ctype.h>
#include <stdint.h>
#include <string.h>

#include "codegen/cuda.h"
#include "codegen/package.h"
#include "rt/runtime.h"

static bool is_identifier(const char *s) {
  if (!s || !(isalpha((unsigned char)*s) || *s == '_')) return false;
  for (; *s; s++)
    if (!(isalnum((unsigned char)*s) || *s == '_')) return false;
  return true;
}

int kn_cg_check_cuda(const kn_plan *p, const kn_cuda_module *m, const kn_cuda_launch *launches, kn_diag *d) {
  if (!m || m->n_images < 1 || !m->images)
    return kn_diag_error(d, "GPU plan '%s': the CUDA module has no image", p->prefix ? p->prefix : "");
  for (int i = 0; i < m->n_images; i++) {
    const kn_cuda_image *im = &m->images[i];
    if (!im->data || im->size == 0 || im->size > (size_t)UINT32_MAX || im->sm < 10 || im->sm > 999)
      return kn_diag_error(d, "CUDA image %d (sm %d, %zu bytes) is empty or malformed", i, im->sm, im->size);
  }
  if (p->n_steps < 1) return kn_diag_error(d, "GPU plan '%s' has no step", p->prefix ? p->prefix : "");
  if (!launches) return kn_diag_error(d, "GPU plan '%s' has no launch shapes", p->prefix ? p->prefix : "");
  for (int s = 0; s < p->n_steps; s++) {
    const kn_kernel *k = p->steps[s].kernel;
    const kn_cuda_launch *l = &launches[s];
    if (!k->gpu) return kn_diag_error(d, "step %d (%s) of a GPU plan is not a GPU kernel", s, k->name);
    if (!is_identifier(l->name))
      return kn_diag_error(d, "step %d (%s): launch name '%s' is not a C identifier", s, k->name,
                           l->name ? l->name : "");
    int64_t threads = 1;
    for (int dim = 0; dim < 3; dim++) {
      if (l->block[dim] < 1 || l->block[dim] > 1024)
        return kn_diag_error(d, "step %d (%s): block dimension %d is %d", s, l->name, dim, l->block[dim]);
      threads *= l->block[dim];
      const kn_expr *g = l->grid[dim];
      if (!g || g->lanes != 1 || !kn_dtype_is_int(g->dtype))
        return kn_diag_error(d, "step %d (%s): grid dimension %d is not a scalar integer expression", s, l->name,
                             dim);
    }
    if (threads > 1024)
      return kn_diag_error(d, "step %d (%s): %lld threads per block, CUDA allows 1024", s, l->name,
                           (long long)threads);
    if (l->shared_bytes < 0 || l->shared_bytes > INT32_MAX)
      return kn_diag_error(d, "step %d (%s): %lld bytes of dynamic shared memory", s, l->name,
                           (long long)l->shared_bytes);
    if (p->steps[s].n_args + 1 > KN_RT_MAX_ARGS)
      return kn_diag_error(d, "step %d (%s): %d kernel arguments and the batch, the runtime allows %d", s, l->name,
                           p->steps[s].n_args, KN_RT_MAX_ARGS);
  }
  return 0;
}

kn_kernel *kn_cg_cuda_grid_kernel(const kn_plan *p, const kn_cuda_launch *launches) {
  /* variable ids apart from the plan's (identity is the pointer; ids only
   * need to differ within one kernel) */
  kn_expr_ctx c = {.arena = p->arena, .next_var_id = 1 << 24};
  kn_kernel *k = KN_NEW(p->arena, kn_kernel);
  const char *suffix = "_grid";
  size_t n = strlen(p->prefix);
  char *name = kn_arena_alloc(p->arena, n + strlen(suffix) + 1);
  memcpy(name, p->prefix, n);
  strcpy(name + n, suffix);
  k->name = name;
  k->nodes = "";
  k->n_params = 1;
  k->params = KN_NEW_ARRAY(p->arena, kn_buffer *, 1);
  k->params[0] = kn_buffer_new(&c, "grid", KN_DT_I64, KN_BUF_PARAM, 3 * (int64_t)p->n_steps);
  k->batch = kn_var_new(&c, "N");
  kn_stmt **stores = KN_NEW_ARRAY(p->arena, kn_stmt *, 3 * p->n_steps);
  for (int s = 0; s < p->n_steps; s++)
    for (int dim = 0; dim < 3; dim++) {
      kn_expr *e = launches[s].grid[dim];
      const kn_var *batch = p->steps[s].kernel->batch;
      if (batch) e = kn_e_substitute(&c, e, batch, kn_e_var(&c, k->batch));
      if (e->dtype != KN_DT_I64) e = kn_e_cast(&c, KN_DT_I64, e);
      stores[3 * s + dim] = kn_s_store(&c, k->params[0], kn_e_int(&c, 3 * s + dim), e);
    }
  k->body = kn_s_seq(&c, stores, 3 * p->n_steps);
  return k;
}
