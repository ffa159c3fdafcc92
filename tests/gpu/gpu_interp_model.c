/* gpu_interp_model.c — a model's GPU kernels run in the loop-IR interpreter
 * and compared with the reference interpreter, no GPU needed.
 *
 *   gpu_interp_model MODEL.onnx [BATCH]
 *
 * Compiles MODEL for `cuda` up to the plan (no NVRTC, no packaging), runs
 * every step of the plan with GPU semantics (ir/loop/gpu_eval.h) on seeded
 * random inputs at BATCH (default 2), and compares each output with
 * kn_ref_run_graph on the imported graph: float32 outputs within 1e-4 x
 * max(1, max |ref|), float16 / bfloat16 ones within 1e-2 x max(1, max
 * |ref|) (the reference rounds once, the kernels after each op), others
 * exactly. Prints one line per output; exits 1 on
 * a mismatch or an interpreter failure (a race, a read before a cp.async
 * wait, an index out of bounds), 2 on bad usage or a model that does not
 * compile. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/plan.h"
#include "ir/loop/gpu_eval.h"
#include "ir/ref/ref_eval.h"
#include "tools/pipeline.h"

#define MAX_IO 64

typedef struct run {
  int64_t batch;
  int n_in;
  void *inputs[MAX_IO];
  void *ref[MAX_IO];
  const kn_graph *imported;
  int failures;
} run;

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double urand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

static int64_t numel_at(const kn_shape *s, int64_t batch) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->dim[i] * ((s->batch_mask >> i) & 1 ? batch : 1);
  return n;
}

/* Random data of a value's dtype: floats in [-1, 1), integers in [0, 4)
 * (token ids, indices and masks of the model set stay in range). */
static void *random_tensor(kn_dtype t, int64_t n) {
  size_t es = kn_dtype_size(t);
  uint8_t *p = calloc((size_t)n + 1, es ? es : 1);
  for (int64_t i = 0; i < n; i++) {
    double u = urand();
    if (t == KN_DT_F32) ((float *)p)[i] = (float)(2 * u - 1);
    else if (t == KN_DT_F16) ((uint16_t *)p)[i] = kn_f32_to_f16((float)(2 * u - 1));
    else if (t == KN_DT_BF16) ((uint16_t *)p)[i] = kn_f32_to_bf16((float)(2 * u - 1));
    else if (t == KN_DT_F64) ((double *)p)[i] = 2 * u - 1;
    else if (t == KN_DT_I64) ((int64_t *)p)[i] = (int64_t)(u * 4);
    else if (t == KN_DT_I32) ((int32_t *)p)[i] = (int32_t)(u * 4);
    else if (t == KN_DT_BOOL) p[i] = u < 0.5;
  }
  return p;
}

static double element(kn_dtype t, const void *p, int64_t i) {
  if (t == KN_DT_F16) return kn_f16_to_f32(((const uint16_t *)p)[i]);
  if (t == KN_DT_BF16) return kn_bf16_to_f32(((const uint16_t *)p)[i]);
  return ((const float *)p)[i];
}

static int compare(const char *name, kn_dtype t, const void *ref, const void *got, int64_t n) {
  if (t != KN_DT_F32 && t != KN_DT_F16 && t != KN_DT_BF16) {
    bool same = !memcmp(ref, got, (size_t)n * kn_dtype_size(t));
    printf("%s: %s\n", name, same ? "equal" : "DIFFERENT");
    return same ? 0 : 1;
  }
  double max_ref = 1, max_err = 0;
  for (int64_t i = 0; i < n; i++) {
    double r = element(t, ref, i), x = element(t, got, i);
    max_ref = fmax(max_ref, fabs(r));
    double e = fabs(r - x);
    if (isnan(r) != isnan(x)) e = INFINITY;
    max_err = fmax(max_err, isnan(e) ? 0 : e);
  }
  bool ok = max_err <= (t == KN_DT_F32 ? 1e-4 : 1e-2) * max_ref;
  printf("%s: max abs error %.3g (max |ref| %.3g) %s\n", name, max_err, max_ref, ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}

static int on_plan(void *ctx, const kn_graph *g, const kn_plan *plan, kn_diag *d) {
  (void)g;
  run *r = ctx;
  void *outs[MAX_IO];
  for (int i = 0; i < plan->n_outputs; i++)
    outs[i] = calloc((size_t)numel_at(&plan->outputs[i].shape, r->batch) + 1, kn_dtype_size(plan->outputs[i].dtype));
  uint8_t *ws = calloc((size_t)plan->workspace_bytes + 64, 1);
  int status = 0;
  for (int s = 0; s < plan->n_steps && status == 0; s++) {
    const kn_plan_step *st = &plan->steps[s];
    void *args[64];
    KN_ASSERT(st->n_args <= 64, "too many kernel arguments");
    for (int a = 0; a < st->n_args; a++) {
      const kn_plan_arg *pa = &st->args[a];
      uint8_t *base = pa->kind == KILN_ARG_WORKSPACE ? ws
                      : pa->kind == KILN_ARG_INPUT   ? (uint8_t *)r->inputs[pa->index]
                      : pa->kind == KILN_ARG_OUTPUT  ? (uint8_t *)outs[pa->index]
                                                     : (uint8_t *)plan->consts[pa->index].data;
      args[a] = base + pa->offset;
    }
    if (kn_gpu_eval(st->kernel, args, r->batch, d) < 0) status = -1;
  }
  for (int i = 0; i < plan->n_outputs && status == 0; i++)
    r->failures += compare(plan->outputs[i].name, plan->outputs[i].dtype, r->ref[i], outs[i],
                           numel_at(&plan->outputs[i].shape, r->batch));
  for (int i = 0; i < plan->n_outputs; i++) free(outs[i]);
  free(ws);
  return status;
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: gpu_interp_model MODEL.onnx [BATCH]\n");
    return 2;
  }
  run r = {.batch = argc == 3 ? atoll(argv[2]) : 2};
  kn_diag d;
  kn_diag_init(&d);
  kn_graph g;
  kn_graph_init(&g);
  int rc = 2;
  if (r.batch < 1 || kn_pipeline_load(argv[1], r.batch, &g, &d) < 0) goto done;
  if (g.n_inputs > MAX_IO || g.n_outputs > MAX_IO) {
    kn_diag_error(&d, "%s: too many inputs or outputs", argv[1]);
    goto done;
  }
  r.n_in = g.n_inputs;
  for (int i = 0; i < g.n_inputs; i++) {
    const kn_value *v = &g.values[g.inputs[i]];
    r.inputs[i] = random_tensor(v->dtype, numel_at(&v->shape, r.batch));
  }
  for (int i = 0; i < g.n_outputs; i++) {
    const kn_value *v = &g.values[g.outputs[i]];
    r.ref[i] = calloc((size_t)numel_at(&v->shape, r.batch) + 1, kn_dtype_size(v->dtype));
  }
  if (kn_ref_run_graph(&g, (const void *const *)r.inputs, r.ref, r.batch, &d) < 0) goto done;
  kn_compile_opts o = {.model = argv[1], .output = "unused.so", .target = "cuda", .prefix = "model",
                       .stop_after = "plan", .max_batch = r.batch, .on_plan = on_plan, .on_plan_ctx = &r};
  rc = kn_compile(&o, &d) < 0 ? 1 : r.failures ? 1 : 0;
done:
  if (d.count) kn_diag_print(&d, "gpu_interp_model");
  for (int i = 0; i < r.n_in; i++) free(r.inputs[i]);
  for (int i = 0; i < g.n_outputs && i < MAX_IO; i++) free(r.ref[i]);
  kn_graph_free(&g);
  kn_diag_free(&d);
  return rc;
}
