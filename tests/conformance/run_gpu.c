/* run_gpu.c — the GPU mode of a node test: the model compiled for `cuda` up
 * to its CUDA C (kn_compile with stop_after "cuda": the plan, the GPU
 * verifier, the emitter; no NVRTC, no packaging) and, from the on_plan hook,
 * every data set run through the plan's kernels by kn_gpu_eval with
 * workspace, inputs and outputs in host memory, as tests/gpu/gpu_interp_model
 * does; the outputs are compared as in the CPU mode (run_test.c).
 *
 * An interpreter failure (a shared-memory race, a read before a cp.async
 * wait, a divergent barrier, an index out of bounds), a run-time check that
 * does not hold, or a verifier or emitter error after the hook is a FAIL
 * with its first diagnostic line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/plan.h"
#include "ir/loop/gpu_eval.h"
#include "tests/conformance/conformance.h"

typedef struct gpu_run {
  const char *test_dir;
  char **sets;
  int n_sets;
  const kn_bind_need *bound;
  int n_bound;
  kn_conf_result *r;
  bool reached; /* the plan was built and the hook ran */
} gpu_run;

/* Elements of plan tensor t at `batch`. */
static int64_t tensor_numel(const kn_plan_tensor *t, int64_t batch) {
  int64_t n = 1;
  for (int i = 0; i < t->shape.rank; i++) n *= t->shape.dim[i] * (((t->shape.batch_mask >> i) & 1u) ? batch : 1);
  return n;
}

static kn_shape tensor_shape(const kn_plan_tensor *t, int64_t batch) {
  kn_shape s = t->shape;
  for (int i = 0; i < s.rank; i++) s.dim[i] *= ((s.batch_mask >> i) & 1u) ? batch : 1;
  s.batch_mask = 0;
  return s;
}

/* The batch the test tensors of the plan's inputs imply (ins[k] set to their
 * data), or -1 with r set to FAIL. */
static int64_t match_inputs(const kn_plan *plan, const kn_graph *g, const int *vals, int n_in, const char *set_name,
                            const void **ins, kn_conf_result *r) {
  int64_t batch = 0;
  for (int k = 0; k < plan->n_inputs; k++) {
    const kn_plan_tensor *t = &plan->inputs[k];
    const kn_value *v = &g->values[vals[kn_conf_match_tensor(g, vals, n_in, t->name, k)]];
    bool shape_ok = v->shape.rank == t->shape.rank;
    for (int i = 0; shape_ok && i < t->shape.rank; i++) {
      int64_t want = t->shape.dim[i], have = v->shape.dim[i];
      if ((t->shape.batch_mask >> i) & 1u) {
        int64_t n = want > 0 && have % want == 0 ? have / want : -1;
        shape_ok = n >= 1 && n <= plan->max_batch && (batch == 0 || batch == n);
        batch = n;
      } else {
        shape_ok = want == have;
      }
    }
    if (v->dtype != t->dtype || !shape_ok) {
      char have[128];
      kn_conf_shape_str(&v->shape, have, sizeof have);
      kn_conf_set_result(r, KN_CONF_FAIL, "%s: input '%s' is %s %s; the plan expects %s of rank %d", set_name,
                         t->name, kn_dtype_name(v->dtype), have, kn_dtype_name(t->dtype), t->shape.rank);
      return -1;
    }
    ins[k] = v->data;
  }
  return batch ? batch : 1;
}

/* Runs the plan's steps in order; 0, or -1 with r set to FAIL. */
static int run_steps(const kn_plan *plan, const void **ins, void **outs, uint8_t *ws, int64_t batch,
                     const char *set_name, kn_conf_result *r) {
  kn_diag d;
  kn_diag_init(&d);
  int status = 0;
  for (int s = 0; s < plan->n_steps && status == 0; s++) {
    const kn_plan_step *st = &plan->steps[s];
    void **args = calloc((size_t)st->n_args + 1, sizeof *args);
    KN_ASSERT(args, "out of memory");
    for (int a = 0; a < st->n_args; a++) {
      const kn_plan_arg *pa = &st->args[a];
      const uint8_t *base = pa->kind == KILN_ARG_WORKSPACE ? ws
                            : pa->kind == KILN_ARG_INPUT   ? (const uint8_t *)ins[pa->index]
                            : pa->kind == KILN_ARG_OUTPUT  ? (const uint8_t *)outs[pa->index]
                                                           : (const uint8_t *)plan->consts[pa->index].data;
      args[a] = (void *)(base + pa->offset);
    }
    if (kn_gpu_eval(st->kernel, args, batch, &d) < 0) {
      kn_conf_set_result(r, KN_CONF_FAIL, "%s: %s", set_name, kn_conf_first_diag(&d, ""));
      status = -1;
    } else if (st->check && !*(const uint8_t *)args[0]) {
      kn_conf_set_result(r, KN_CONF_FAIL, "%s: the run-time check of kernel '%s' failed", set_name,
                         st->kernel->name);
      status = -1;
    }
    free(args);
  }
  kn_diag_free(&d);
  return status;
}

/* Compares the outputs with the expected tensors; true if all match. */
static bool compare_outputs(const kn_plan *plan, const kn_graph *g, const int *vals, int n_out, void **outs,
                            int64_t batch, kn_conf_result *r) {
  for (int k = 0; k < plan->n_outputs; k++) {
    const kn_plan_tensor *t = &plan->outputs[k];
    const kn_value *e = &g->values[vals[kn_conf_match_tensor(g, vals, n_out, t->name, k)]];
    kn_shape have = tensor_shape(t, batch);
    if (t->dtype != e->dtype || !kn_shape_equal(&have, &e->shape)) {
      char hs[128], es[128];
      kn_conf_shape_str(&have, hs, sizeof hs);
      kn_conf_shape_str(&e->shape, es, sizeof es);
      kn_conf_set_result(r, KN_CONF_FAIL, "output '%s' is %s %s, expected %s %s", t->name,
                         kn_dtype_name(t->dtype), hs, kn_dtype_name(e->dtype), es);
      return false;
    }
    double err;
    if (!kn_conf_values_close(outs[k], e->data, t->dtype, tensor_numel(t, batch), &err)) {
      kn_conf_set_result(r, KN_CONF_FAIL, "max error %.3g at output '%s'", err, t->name);
      return false;
    }
  }
  return true;
}

/* Runs one data set through the plan, leaving out the inputs of bound[]
 * (compiled in); true if it passed (else r is filled). */
static bool run_set(const kn_plan *plan, const gpu_run *run, const char *set_name) {
  kn_conf_result *r = run->r;
  char set_dir[4096];
  snprintf(set_dir, sizeof set_dir, "%s/%s", run->test_dir, set_name);
  kn_graph g;
  kn_graph_init(&g);
  kn_diag d;
  kn_diag_init(&d);
  const void **ins = calloc((size_t)plan->n_inputs + 1, sizeof *ins);
  void **outs = calloc((size_t)plan->n_outputs + 1, sizeof *outs);
  uint8_t *ws = NULL;
  KN_ASSERT(ins && outs, "out of memory");
  bool ok = false;
  int in_vals[KN_CONF_MAX_TENSORS], out_vals[KN_CONF_MAX_TENSORS];
  int n_in = kn_conf_load_tensors(set_dir, "input", &g, in_vals, &d);
  int n_out = n_in < 0 ? -1 : kn_conf_load_tensors(set_dir, "output", &g, out_vals, &d);
  if (n_in < 0 || n_out < 0) {
    kn_conf_set_result(r, KN_CONF_FAIL, "%s: cannot read test data: %s", set_name, kn_conf_first_diag(&d, ""));
    goto done;
  }
  if (run->n_bound > 0) { /* keep the inputs the plan still takes, in order */
    int kept = 0;
    for (int k = 0; k < n_in; k++)
      if (kn_conf_bound_tensor(&g, in_vals, n_in, run->bound, run->n_bound, k) < 0) in_vals[kept++] = in_vals[k];
    n_in = kept;
  }
  if (n_in != plan->n_inputs || n_out != plan->n_outputs) {
    kn_conf_set_result(r, KN_CONF_FAIL, "%s: the test data has %d inputs and %d outputs, the plan %d and %d",
                       set_name, n_in, n_out, plan->n_inputs, plan->n_outputs);
    goto done;
  }
  int64_t batch = match_inputs(plan, &g, in_vals, n_in, set_name, ins, r);
  if (batch < 0) goto done;
  for (int k = 0; k < plan->n_outputs; k++) {
    outs[k] = calloc((size_t)tensor_numel(&plan->outputs[k], batch) + 1, kn_dtype_size(plan->outputs[k].dtype) + 1);
    KN_ASSERT(outs[k], "out of memory");
  }
  ws = calloc((size_t)plan->workspace_bytes + 64, 1);
  KN_ASSERT(ws, "out of memory");
  ok = run_steps(plan, ins, outs, ws, batch, set_name, r) == 0 &&
       compare_outputs(plan, &g, out_vals, n_out, outs, batch, r);
done:
  for (int k = 0; k < plan->n_outputs; k++) free(outs[k]);
  free(outs);
  free(ins);
  free(ws);
  kn_diag_free(&d);
  kn_graph_free(&g);
  return ok;
}

/* kn_compile_opts.on_plan: every data set in turn, up to the first that
 * fails. Always 0, so that the verifier and the emitter still run. */
static int on_plan(void *ctx, const kn_graph *g, const kn_plan *plan, kn_diag *d) {
  (void)g, (void)d;
  gpu_run *run = ctx;
  run->reached = true;
  if (plan->n_pipes) {
    kn_conf_set_result(run->r, KN_CONF_FAIL, "the plan has row pipes, which GPU kernels do not take");
    return 0;
  }
  if (run->n_sets == 0) kn_conf_set_result(run->r, KN_CONF_FAIL, "no test_data_set_* folder");
  for (int s = 0; s < run->n_sets; s++)
    if (!run_set(plan, run, run->sets[s])) break;
  return 0;
}

int kn_conf_gpu_run(kn_compile_opts o, const char *test_dir, char **sets, int n_sets,
                    const kn_bind_need *bound, int n_bound, kn_conf_result *r, kn_diag *d) {
  gpu_run run = {.test_dir = test_dir, .sets = sets, .n_sets = n_sets, .bound = bound, .n_bound = n_bound, .r = r};
  o.target = "cuda";
  o.stop_after = "cuda";
  o.on_plan = on_plan;
  o.on_plan_ctx = &run;
  kn_conf_set_result(r, KN_CONF_PASS, "%s", "");
  int rc = kn_compile(&o, d);
  if (!run.reached) return -1;
  if (rc < 0 && r->status == KN_CONF_PASS) kn_conf_set_result(r, KN_CONF_FAIL, "%s", kn_conf_first_diag(d, o.model));
  return 0;
}
