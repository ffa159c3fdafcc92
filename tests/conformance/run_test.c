/* run_test.c — one ONNX backend node test, run in the calling process:
 * model.onnx goes through the real pipeline (kn_compile into a .so under the
 * work folder), the artifact is opened with the loader, and every
 * test_data_set_N folder's input_K.pb tensors are fed to it; each output is
 * compared with output_K.pb using ONNX's default tolerances
 * (|actual - expected| <= atol + rtol * |expected|, rtol 1e-3, atol 1e-7;
 * exact for integers and booleans; NaN matches NaN).
 *
 * When Kiln refuses the model because some graph inputs must be constants
 * (Reduce* axes, Reshape shape... fed as graph inputs), the pipeline names
 * them (kn_pipeline_needed_bindings) and the test is run again with exactly
 * those inputs bound to each data set's values (kiln compile --bind), one
 * compile per data set; the artifact then takes the other inputs only.
 *
 * Outcomes: SKIP when Kiln refuses the model (the first diagnostic line, with
 * the model path taken off), FAIL on wrong values, shapes or dtypes, or when
 * the test data cannot be fed, PASS otherwise; PASS_BOUND when it passed only
 * with inputs bound (the detail lists them).
 *
 * With gpu_interp the same happens with `cuda` as the target and the plan's
 * kernels run in the GPU interpreter instead of an artifact (run_gpu.c). */
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/onnx_load.h"
#include "rt/loader.h"
#include "tools/pipeline.h"
#include "tests/conformance/conformance.h"

#define KN_CONF_RTOL 1e-3
#define KN_CONF_ATOL 1e-7
#define KN_CONF_MAX_BATCH 64
#define KN_CONF_BIND_ROUNDS 4

void kn_conf_set_result(kn_conf_result *r, kn_conf_status st, const char *fmt, ...) {
  r->status = st;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->detail, sizeof r->detail, fmt, ap);
  va_end(ap);
  for (char *p = r->detail; *p; p++)
    if (*p == '\n') *p = ' ';
}

/* The first diagnostic line without a leading "<path>: " naming `path`. */
const char *kn_conf_first_diag(const kn_diag *d, const char *path) {
  if (d->count == 0) return "failed without a diagnostic";
  const char *s = d->lines[0];
  size_t n = strlen(path);
  if (strncmp(s, path, n) == 0 && s[n] == ':' && s[n + 1] == ' ') s += n + 2;
  return s;
}

static int name_cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names in `dir` starting with `prefix`; the count, -1 if unreadable. */
static int list_names(const char *dir, const char *prefix, char ***out) {
  DIR *dp = opendir(dir);
  if (!dp) return -1;
  int n = 0, cap = 16;
  char **names = malloc(sizeof *names * (size_t)cap);
  KN_ASSERT(names, "out of memory");
  for (struct dirent *e; (e = readdir(dp));) {
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
    if (n == cap) {
      cap *= 2;
      names = realloc(names, sizeof *names * (size_t)cap);
      KN_ASSERT(names, "out of memory");
    }
    names[n] = strdup(e->d_name);
    KN_ASSERT(names[n], "out of memory");
    n++;
  }
  closedir(dp);
  qsort(names, (size_t)n, sizeof *names, name_cmp);
  *out = names;
  return n;
}

static void free_names(char **names, int n) {
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
}

/* The tensors prefix_0.pb, prefix_1.pb ... of one data set, loaded into g
 * (value indices into vals). Returns the count, or -1 with a diagnostic. */
int kn_conf_load_tensors(const char *set_dir, const char *prefix, kn_graph *g, int *vals,
                        kn_diag *d) {
  int n = 0;
  for (; n < KN_CONF_MAX_TENSORS; n++) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s_%d.pb", set_dir, prefix, n) >= (int)sizeof path) break;
    FILE *fp = fopen(path, "rb");
    if (!fp) break;
    fclose(fp);
    if ((vals[n] = kn_fe_load_tensor_pb(path, g, d)) < 0) return -1;
  }
  return n;
}

void kn_conf_shape_str(const kn_shape *s, char *buf, size_t cap) {
  size_t k = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < s->rank && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "," : "", (long long)s->dim[i]);
  if (k < cap) snprintf(buf + k, cap - k, "]");
}

/* The concrete shape of descriptor t at `batch`. */
static kn_shape desc_shape(const kiln_tensor_desc *t, int64_t batch) {
  kn_shape s = {.rank = t->rank};
  for (int i = 0; i < t->rank && i < KN_MAX_RANK; i++)
    s.dim[i] = t->dims[i] * (((t->batch_mask >> i) & 1u) ? batch : 1);
  return s;
}

/* Index of the test tensor feeding descriptor `k` of `n` descriptors: the
 * one with the same name, else the one at the same position. */
int kn_conf_match_tensor(const kn_graph *g, const int *vals, int n_vals, const char *name, int k) {
  for (int i = 0; i < n_vals; i++)
    if (name && !strcmp(g->values[vals[i]].name, name)) return i;
  return k < n_vals ? k : -1;
}

static double elem_as_double(const void *data, kn_dtype dt, int64_t i) {
  switch (dt) {
  case KN_DT_F32: return ((const float *)data)[i];
  case KN_DT_F64: return ((const double *)data)[i];
  case KN_DT_F16: return kn_f16_to_f32(((const uint16_t *)data)[i]);
  case KN_DT_BF16: return kn_bf16_to_f32(((const uint16_t *)data)[i]);
  case KN_DT_U8:
  case KN_DT_U2:
  case KN_DT_U4: return ((const uint8_t *)data)[i];
  case KN_DT_I8:
  case KN_DT_I2:
  case KN_DT_I4: return ((const int8_t *)data)[i];
  case KN_DT_U16: return ((const uint16_t *)data)[i];
  case KN_DT_I16: return ((const int16_t *)data)[i];
  case KN_DT_I32: return ((const int32_t *)data)[i];
  case KN_DT_U32: return ((const uint32_t *)data)[i];
  case KN_DT_BOOL: return ((const uint8_t *)data)[i] != 0;
  default:
    if (kn_dtype_is_f8(dt)) return kn_f8_to_f32(dt, ((const uint8_t *)data)[i]);
    KN_UNREACHABLE("dtype compared elementwise as double");
  }
}

/* Compares `numel` elements; returns true if all are within tolerance and
 * stores the largest absolute error (NaN for a NaN/finite mismatch). */
bool kn_conf_values_close(const void *actual, const void *expected, kn_dtype dt, int64_t numel,
                         double *max_err) {
  bool ok = true;
  *max_err = 0;
  if (dt == KN_DT_I64 || dt == KN_DT_U64) { /* exact, without rounding through double */
    for (int64_t i = 0; i < numel; i++) {
      uint64_t a = ((const uint64_t *)actual)[i], e = ((const uint64_t *)expected)[i];
      if (a == e) continue;
      ok = false;
      double err = dt == KN_DT_I64 ? fabs((double)(int64_t)a - (double)(int64_t)e)
                                   : fabs((double)a - (double)e);
      if (err > *max_err) *max_err = err;
    }
    return ok;
  }
  bool is_float = kn_dtype_is_float(dt);
  for (int64_t i = 0; i < numel; i++) {
    double a = elem_as_double(actual, dt, i), e = elem_as_double(expected, dt, i);
    if (isnan(a) || isnan(e)) {
      if (isnan(a) && isnan(e)) continue;
      ok = false;
      *max_err = NAN;
      continue;
    }
    if (a == e) continue; /* also equal infinities */
    double err = fabs(a - e);
    if (!isnan(*max_err) && err > *max_err) *max_err = err;
    if (!is_float || isinf(a) || isinf(e) || err > KN_CONF_ATOL + KN_CONF_RTOL * fabs(e)) ok = false;
  }
  return ok;
}

/* Index into bound[] of the binding that test tensor k (of n) feeds, or -1:
 * by name, else by position among the model's inputs. */
int kn_conf_bound_tensor(const kn_graph *g, const int *vals, int n, const kn_bind_need *bound,
                        int n_bound, int k) {
  for (int b = 0; b < n_bound; b++) {
    bool named = false;
    for (int i = 0; i < n && !named; i++) named = !strcmp(g->values[vals[i]].name, bound[b].name);
    if (named ? !strcmp(g->values[vals[k]].name, bound[b].name) : bound[b].position == k) return b;
  }
  return -1;
}

/* Feeds one data set, leaving out the inputs named in bound[0..n_bound)
 * (compiled into the artifact); returns true if it passed (else r is filled). */
static bool run_data_set(const kn_loader *l, const char *set_dir, const char *set_name,
                         const kn_bind_need *bound, int n_bound, kn_conf_result *r) {
  const kiln_artifact *a = l->art;
  kn_graph g;
  kn_graph_init(&g);
  kn_diag d;
  kn_diag_init(&d);
  void *ws = NULL;
  void **outs = calloc((size_t)a->n_outputs + 1, sizeof *outs);
  const void **ins = calloc((size_t)a->n_inputs + 1, sizeof *ins);
  KN_ASSERT(outs && ins, "out of memory");
  bool ok = false;
  int in_vals[KN_CONF_MAX_TENSORS], out_vals[KN_CONF_MAX_TENSORS];
  int n_in = kn_conf_load_tensors(set_dir, "input", &g, in_vals, &d);
  int n_out = n_in < 0 ? -1 : kn_conf_load_tensors(set_dir, "output", &g, out_vals, &d);
  if (n_in < 0 || n_out < 0) {
    kn_conf_set_result(r, KN_CONF_FAIL, "%s: cannot read test data: %s", set_name, kn_conf_first_diag(&d, ""));
    goto done;
  }
  if (n_bound > 0) { /* keep the inputs the artifact still takes, in order */
    int kept = 0;
    for (int k = 0; k < n_in; k++)
      if (kn_conf_bound_tensor(&g, in_vals, n_in, bound, n_bound, k) < 0) in_vals[kept++] = in_vals[k];
    n_in = kept;
  }
  if (n_in != a->n_inputs) {
    kn_conf_set_result(r, KN_CONF_FAIL, "%s: the test data has %d inputs, the artifact %d", set_name, n_in,
               a->n_inputs);
    goto done;
  }
  int64_t batch = 0;
  for (int k = 0; k < a->n_inputs; k++) {
    const kiln_tensor_desc *t = &a->inputs[k];
    const kn_value *v = &g.values[in_vals[kn_conf_match_tensor(&g, in_vals, n_in, t->name, k)]];
    bool shape_ok = v->shape.rank == t->rank;
    for (int i = 0; shape_ok && i < t->rank; i++) {
      int64_t want = t->dims[i], have = v->shape.dim[i];
      if ((t->batch_mask >> i) & 1u) {
        int64_t n = want > 0 && have % want == 0 ? have / want : -1;
        shape_ok = n >= 1 && n <= a->max_batch && (batch == 0 || batch == n);
        batch = n;
      } else {
        shape_ok = want == have;
      }
    }
    if (v->dtype != kn_loader_dtype(t) || !shape_ok) {
      char have[128];
      kn_conf_shape_str(&v->shape, have, sizeof have);
      kn_conf_set_result(r, KN_CONF_FAIL, "%s: input '%s' is %s %s; the artifact expects %s of rank %d",
                 set_name, t->name, kn_dtype_name(v->dtype), have,
                 kn_dtype_name(kn_loader_dtype(t)), t->rank);
      goto done;
    }
    ins[k] = v->data;
  }
  if (batch == 0) batch = 1;
  if (n_out != a->n_outputs) {
    kn_conf_set_result(r, KN_CONF_FAIL, "%s: the test data has %d outputs, the artifact %d", set_name,
               n_out, a->n_outputs);
    goto done;
  }
  for (int k = 0; k < a->n_outputs; k++) {
    int64_t bytes = kn_loader_bytes(&a->outputs[k], batch);
    KN_ASSERT(bytes >= 0, "artifact output size overflows");
    outs[k] = calloc((size_t)bytes + 1, 1);
    KN_ASSERT(outs[k], "out of memory");
  }
  if (!(ws = kn_loader_workspace_new(a, &d)) ||
      kn_loader_run(l, (const void *const *)ins, outs, ws, batch, &d) < 0) {
    kn_conf_set_result(r, KN_CONF_FAIL, "%s: %s", set_name, kn_conf_first_diag(&d, ""));
    goto done;
  }
  for (int k = 0; k < a->n_outputs; k++) {
    const kiln_tensor_desc *t = &a->outputs[k];
    const kn_value *e = &g.values[out_vals[kn_conf_match_tensor(&g, out_vals, n_out, t->name, k)]];
    kn_shape have = desc_shape(t, batch);
    kn_dtype dt = kn_loader_dtype(t);
    if (dt != e->dtype || !kn_shape_equal(&have, &e->shape)) {
      char hs[128], es[128];
      kn_conf_shape_str(&have, hs, sizeof hs);
      kn_conf_shape_str(&e->shape, es, sizeof es);
      kn_conf_set_result(r, KN_CONF_FAIL, "output '%s' is %s %s, expected %s %s", t->name,
                 kn_dtype_name(dt), hs, kn_dtype_name(e->dtype), es);
      goto done;
    }
    double err;
    if (!kn_conf_values_close(outs[k], e->data, dt, kn_loader_numel(t, batch), &err)) {
      kn_conf_set_result(r, KN_CONF_FAIL, "max error %.3g at output '%s'", err, t->name);
      goto done;
    }
  }
  ok = true;
done:
  if (ws) kn_loader_workspace_free(ws);
  for (int k = 0; k < a->n_outputs; k++) free(outs[k]);
  free(outs);
  free(ins);
  kn_diag_free(&d);
  kn_graph_free(&g);
  return ok;
}

/* The data set's tensor file feeding input `need`: input_K.pb whose tensor
 * has its name, else input_<position>.pb. Writes the path into buf. */
static void bound_file(const char *set_dir, const kn_bind_need *need, char *buf, size_t cap) {
  kn_graph g;
  kn_graph_init(&g);
  kn_diag d;
  kn_diag_init(&d);
  int vals[KN_CONF_MAX_TENSORS];
  int n = kn_conf_load_tensors(set_dir, "input", &g, vals, &d);
  int k = need->position;
  for (int i = 0; i < n; i++)
    if (!strcmp(g.values[vals[i]].name, need->name)) k = i;
  if (snprintf(buf, cap, "%s/input_%d.pb", set_dir, k) >= (int)cap) buf[0] = 0;
  kn_diag_free(&d);
  kn_graph_free(&g);
}

/* Turns r into a FAIL saying which inputs were bound. */
static void prefix_bound(kn_conf_result *r, const char *names) {
  char detail[sizeof r->detail];
  snprintf(detail, sizeof detail, "%s", r->detail);
  kn_conf_set_result(r, KN_CONF_FAIL, "with %s bound at compile time: %s", names, detail);
}

/* Runs the test with inputs bound at compile time: for each data set, the
 * inputs of `needs` are bound to its values and the model is compiled again;
 * inputs the pipeline asks for next are added (a few rounds at most). Sets r
 * to PASS_BOUND, FAIL or SKIP (the refusal of the compile with inputs bound). */
static void run_bound(const char *test_dir, const char *work_dir, int threads, bool gpu_interp, char **sets,
                      int n_sets, kn_compile_opts o, kn_bind_need *needs, int n_needs, kn_conf_result *r) {
  kn_arena arena;
  kn_arena_init(&arena);
  kn_bind_need *all = KN_NEW_ARRAY(&arena, kn_bind_need, KN_CONF_MAX_TENSORS);
  kn_binding *binds = KN_NEW_ARRAY(&arena, kn_binding, KN_CONF_MAX_TENSORS);
  int n_all = 0;
  for (int i = 0; i < n_needs && n_all < KN_CONF_MAX_TENSORS; i++) all[n_all++] = needs[i];
  char names[256] = "";
  bool ok = true;
  for (int s = 0; s < n_sets && ok; s++) {
    char set_dir[4096], artifact[4096];
    snprintf(set_dir, sizeof set_dir, "%s/%s", test_dir, sets[s]);
    snprintf(artifact, sizeof artifact, "%s/model_%d.so", work_dir, s);
    o.output = artifact;
    o.binds = binds;
    kn_diag d;
    kn_diag_init(&d);
    kn_loader l = {0};
    int compiled = -1;
    for (int round = 0; round < KN_CONF_BIND_ROUNDS; round++) {
      for (int b = 0; b < n_all; b++) {
        char path[4096];
        bound_file(set_dir, &all[b], path, sizeof path);
        binds[b] = (kn_binding){all[b].name, kn_arena_strdup(&arena, path)};
      }
      o.n_binds = n_all;
      compiled = gpu_interp ? kn_conf_gpu_run(o, test_dir, &sets[s], 1, all, n_all, r, &d) : kn_compile(&o, &d);
      if (compiled == 0) break;
      kn_bind_need *more = NULL;
      int n_more = 0;
      if (kn_pipeline_needed_bindings(&o, &arena, &more, &n_more, &d) < 0 || n_more == 0) break;
      for (int i = 0; i < n_more && n_all < KN_CONF_MAX_TENSORS; i++) all[n_all++] = more[i];
      kn_diag_free(&d);
      kn_diag_init(&d);
    }
    size_t len = 0;
    for (int b = 0; b < n_all && len < sizeof names; b++)
      len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", b ? ", " : "", all[b].name);
    if (compiled < 0) {
      kn_conf_set_result(r, KN_CONF_SKIP, "with %s bound at compile time: %s", names, kn_conf_first_diag(&d, o.model));
      ok = false;
    } else if (gpu_interp) {
      ok = r->status == KN_CONF_PASS;
      if (!ok) prefix_bound(r, names);
    } else if (kn_loader_open(artifact, &l, &d) < 0 || kn_loader_set_threads(&l, threads, &d) < 0) {
      kn_conf_set_result(r, KN_CONF_FAIL, "with %s bound at compile time: %s", names, kn_conf_first_diag(&d, ""));
      ok = false;
    } else if (!run_data_set(&l, set_dir, sets[s], all, n_all, r)) {
      prefix_bound(r, names);
      ok = false;
    }
    if (l.dl) kn_loader_close(&l);
    kn_diag_free(&d);
  }
  if (ok) kn_conf_set_result(r, KN_CONF_PASS_BOUND, "inputs bound at compile time: %s", names);
  kn_arena_free(&arena);
}

void kn_conf_run_test(const char *test_dir, const char *work_dir, int threads, bool gpu_interp,
                      kn_conf_result *r) {
  kn_conf_set_result(r, KN_CONF_PASS, "%s", "");
  char model[4096], artifact[4096];
  snprintf(model, sizeof model, "%s/model.onnx", test_dir);
  snprintf(artifact, sizeof artifact, "%s/model.so", work_dir);
  kn_diag d;
  kn_diag_init(&d);
  kn_compile_opts o = {
      .model = model, .output = artifact, .prefix = "model", .max_batch = KN_CONF_MAX_BATCH};
  if (gpu_interp) o.target = "cuda", o.stop_after = "cuda";
  kn_loader l = {0};
  kn_arena arena;
  kn_arena_init(&arena);
  char **sets = NULL;
  int n_sets = list_names(test_dir, "test_data_set_", &sets);
  int compiled = gpu_interp ? kn_conf_gpu_run(o, test_dir, sets, n_sets > 0 ? n_sets : 0, NULL, 0, r, &d)
                            : kn_compile(&o, &d);
  if (compiled < 0) {
    kn_bind_need *needs = NULL;
    int n_needs = 0;
    kn_diag quiet;
    kn_diag_init(&quiet);
    if (n_sets > 0) kn_pipeline_needed_bindings(&o, &arena, &needs, &n_needs, &quiet);
    kn_diag_free(&quiet);
    if (n_needs > 0)
      run_bound(test_dir, work_dir, threads, gpu_interp, sets, n_sets, o, needs, n_needs, r);
    else
      kn_conf_set_result(r, KN_CONF_SKIP, "%s", kn_conf_first_diag(&d, model));
    goto done;
  }
  if (gpu_interp) goto done; /* the data sets ran in kn_conf_gpu_run */
  if (kn_loader_open(artifact, &l, &d) < 0 || kn_loader_set_threads(&l, threads, &d) < 0) {
    kn_conf_set_result(r, KN_CONF_FAIL, "%s", kn_conf_first_diag(&d, ""));
    goto done;
  }
  if (n_sets <= 0) {
    kn_conf_set_result(r, KN_CONF_FAIL, "no test_data_set_* folder");
    goto done;
  }
  for (int i = 0; i < n_sets; i++) {
    char set_dir[4096];
    snprintf(set_dir, sizeof set_dir, "%s/%s", test_dir, sets[i]);
    if (!run_data_set(&l, set_dir, sets[i], NULL, 0, r)) break;
  }
done:
  if (sets) free_names(sets, n_sets > 0 ? n_sets : 0);
  if (l.dl) kn_loader_close(&l);
  kn_arena_free(&arena);
  kn_diag_free(&d);
}
