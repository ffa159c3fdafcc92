/* cmd_run.c — `kiln run ART.so --input NAME=FILE.npy ...`: runs an artifact
 * through the loader on .npy inputs, writes one .npy per output, and with
 * --bench times repeated runs; with --profile, times each kernel through the
 * artifact's P_run_profiled (run_profile.c). Under --profile, inputs not given
 * are filled with deterministic values (floats uniform in [-1, 1), integers
 * and booleans 0) at the batch of the given ones (1 if none).
 *
 * The batch size N is inferred from the inputs' batch dims (all must agree,
 * 1 <= N <= max_batch); every other dim must match exactly. Output files are
 * DIR/NAME.npy, with characters other than [A-Za-z0-9._-] in NAME replaced by
 * '_', each written atomically. bfloat16 tensors travel as float32 .npy.
 * An aarch64 artifact on another host runs under qemu-aarch64 through
 * kiln-run-aarch64, this same command cross-built (cross_run.c). */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rt/loader.h"
#include "tools/cmds.h"
#include "tools/cross_run.h"
#include "tools/npy.h"
#include "tools/run_profile.h"

#define MAX_IO 256

static void usage(FILE *out) {
  fprintf(out,
          "usage: kiln run ARTIFACT.so --input NAME=FILE.npy ... [options]\n"
          "  (an aarch64 artifact on an x86-64 host runs under qemu-aarch64)\n"
          "  --input NAME=FILE.npy  value of model input NAME (give every input)\n"
          "  --output-dir DIR       where NAME.npy is written per output (default .)\n"
          "  --threads N            thread pool size (default $KILN_NUM_THREADS or the CPU count)\n"
          "  --bench N              time N runs and print the median and p90 latency\n"
          "  --warmup N             untimed runs before --bench / --profile (default 3)\n"
          "  --profile              time each kernel over the --bench N runs (default 20): table\n"
          "                         of median time, share, GFLOP/s and %% of the fp32 peak;\n"
          "                         inputs not given are filled with deterministic values\n"
          "  --trace FILE.json      with --profile: write a Chrome trace (Perfetto, chrome://tracing)\n"
          "  --peak GFLOPS          with --profile: the fp32 peak to compare with (default: measured\n"
          "                         at startup on the same thread count, ~0.2 s)\n");
}

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "kiln: error: run: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, " (see 'kiln run --help')\n");
  return 2;
}

static bool parse_count(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

static int default_threads(void) {
  const char *env = getenv("KILN_NUM_THREADS");
  long v;
  if (env && *env && parse_count(env, 1, 256, &v)) return (int)v;
  /* same rule as the artifact runtime: the CPUs this process may use */
  long n = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  if (n < 1) n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1;
  return n > 64 ? 64 : (int)n;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void expected_shape(const kiln_tensor_desc *t, int64_t max_batch, char *buf, size_t cap) {
  char shape[256];
  kn_loader_shape_str(t, 0, shape, sizeof shape);
  snprintf(buf, cap, "[%s]", shape);
  if (t->batch_mask) {
    size_t n = strlen(buf);
    snprintf(buf + n, cap - n, " with N in 1..%lld", (long long)max_batch);
  }
}

/* Checks an input's dtype and shape, infers N from it. */
static int check_input(const kiln_artifact *a, const kiln_tensor_desc *t, const char *file,
                       const kn_npy *v, int64_t *batch, kn_diag *d) {
  kn_dtype want = kn_loader_dtype(t);
  bool narrow_from_f32 = (want == KN_DT_BF16 || kn_dtype_is_f8(want)) && v->dtype == KN_DT_F32;
  /* int4 / int2 come as int8 .npy, uint4 / uint2 as uint8 (one byte each, the ABI's form) */
  bool subbyte = kn_dtype_is_subbyte_int(want) && v->dtype == (kn_dtype_is_signed(want) ? KN_DT_I8 : KN_DT_U8);
  if (subbyte)
    for (int64_t e = 0; e < v->numel; e++) {
      int64_t x = kn_dtype_is_signed(want) ? ((const int8_t *)v->data)[e] : ((const uint8_t *)v->data)[e];
      if (kn_subbyte_wrap(want, x) != x)
        return kn_diag_error(d, "input '%s': %s holds %lld at index %lld, outside the range of %s", t->name,
                             file, (long long)x, (long long)e, kn_dtype_name(want));
    }
  if (v->dtype != want && !narrow_from_f32 && !subbyte)
    return kn_diag_error(d, "input '%s': %s has dtype %s, the model expects %s", t->name, file,
                         kn_dtype_name(v->dtype), kn_dtype_name(want));
  char want_shape[320];
  expected_shape(t, a->max_batch, want_shape, sizeof want_shape);
  bool ok = v->rank == t->rank;
  for (int i = 0; ok && i < t->rank; i++) {
    if ((t->batch_mask >> i) & 1u) {
      if (t->dims[i] <= 0 || v->dims[i] % t->dims[i] != 0) {
        ok = false;
        break;
      }
      int64_t n = v->dims[i] / t->dims[i];
      if (n < 1 || n > a->max_batch || (*batch && *batch != n)) ok = false;
      *batch = n;
    } else if (v->dims[i] != t->dims[i]) {
      ok = false;
    }
  }
  if (!ok) {
    char got[320] = "";
    size_t n = 0;
    for (int i = 0; i < v->rank && n < sizeof got; i++)
      n += (size_t)snprintf(got + n, sizeof got - n, "%s%lld", i ? ", " : "", (long long)v->dims[i]);
    return kn_diag_error(d, "input '%s': %s has shape [%s], the model expects %s (same N for all inputs)",
                         t->name, file, got, want_shape);
  }
  return 0;
}

static void print_value(const void *data, kn_dtype t, int64_t i) {
  const unsigned char *p = (const unsigned char *)data + (size_t)i * kn_dtype_size(t);
  switch (t) {
  case KN_DT_F32: printf("%.6g", (double)*(const float *)p); break;
  case KN_DT_F64: printf("%.9g", *(const double *)p); break;
  case KN_DT_F16: printf("%.4g", (double)kn_f16_to_f32(*(const uint16_t *)p)); break;
  case KN_DT_BF16: printf("%.4g", (double)kn_bf16_to_f32(*(const uint16_t *)p)); break;
  case KN_DT_I8:
  case KN_DT_I2:
  case KN_DT_I4: printf("%d", *(const int8_t *)p); break;
  case KN_DT_U8:
  case KN_DT_U2:
  case KN_DT_U4:
  case KN_DT_BOOL: printf("%u", *p); break;
  case KN_DT_I16: printf("%d", *(const int16_t *)p); break;
  case KN_DT_U16: printf("%u", *(const uint16_t *)p); break;
  case KN_DT_I32: printf("%d", *(const int32_t *)p); break;
  case KN_DT_U32: printf("%u", *(const uint32_t *)p); break;
  case KN_DT_I64: printf("%lld", (long long)*(const int64_t *)p); break;
  case KN_DT_U64: printf("%llu", (unsigned long long)*(const uint64_t *)p); break;
  default:
    if (kn_dtype_is_f8(t)) printf("%.4g", (double)kn_f8_to_f32(t, *p));
    else printf("?");
  }
}

static int write_output(const char *dir, const kiln_tensor_desc *t, int64_t batch, const void *data,
                        kn_diag *d) {
  char name[256];
  size_t n = 0;
  for (const char *c = t->name; *c && n + 1 < sizeof name; c++) {
    bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '.' || *c == '_' || *c == '-';
    name[n++] = ok ? *c : '_';
  }
  name[n] = 0;
  if (!n || !strcmp(name, ".") || !strcmp(name, "..")) strcpy(name, "output");
  char path[4096 + 300];
  snprintf(path, sizeof path, "%s/%s.npy", dir, name);
  int64_t dims[KN_NPY_MAX_RANK];
  for (int i = 0; i < t->rank; i++) dims[i] = t->dims[i] * (((t->batch_mask >> i) & 1u) ? batch : 1);
  kn_dtype dt = kn_loader_dtype(t);
  if (kn_dtype_is_subbyte_int(dt)) /* one byte each: int8 / uint8 .npy */
    return kn_npy_write(path, kn_dtype_is_signed(dt) ? KN_DT_I8 : KN_DT_U8, t->rank, dims, data, d);
  if (dt != KN_DT_BF16 && !kn_dtype_is_f8(dt)) return kn_npy_write(path, dt, t->rank, dims, data, d);
  int64_t numel = kn_loader_numel(t, batch); /* bfloat16 and float8 are written as float32 */
  float *f = malloc(sizeof(float) * (size_t)(numel > 0 ? numel : 1));
  if (!f) return kn_diag_error(d, "out of memory");
  for (int64_t i = 0; i < numel; i++)
    f[i] = dt == KN_DT_BF16 ? kn_bf16_to_f32(((const uint16_t *)data)[i])
                            : kn_f8_to_f32(dt, ((const uint8_t *)data)[i]);
  int r = kn_npy_write(path, KN_DT_F32, t->rank, dims, f, d);
  free(f);
  return r;
}

/* An input the user did not give (--profile only): deterministic values,
 * floats uniform in [-1, 1) from a fixed LCG, integers and booleans 0 (a
 * valid index for any Gather). */
static int fill_input(const kiln_tensor_desc *t, int64_t batch, kn_npy *v, kn_diag *d) {
  kn_dtype dt = kn_loader_dtype(t);
  int64_t numel = kn_loader_numel(t, batch), bytes = kn_loader_bytes(t, batch);
  if (numel < 0 || bytes < 0)
    return kn_diag_error(d, "input '%s': cannot make a value of its dtype and shape", t->name);
  memset(v, 0, sizeof *v);
  v->data = calloc(1, bytes > 0 ? (size_t)bytes : 1);
  if (!v->data) return kn_diag_error(d, "cannot allocate input '%s'", t->name);
  v->dtype = dt;
  v->numel = numel;
  uint64_t state = 0x9e3779b97f4a7c15u;
  for (int64_t e = 0; e < numel; e++) {
    state = state * 6364136223846793005u + 1442695040888963407u;
    float x = (float)((double)(state >> 40) / (double)(1u << 24) * 2.0 - 1.0);
    switch (dt) {
    case KN_DT_F32: ((float *)v->data)[e] = x; break;
    case KN_DT_F64: ((double *)v->data)[e] = x; break;
    case KN_DT_F16: ((uint16_t *)v->data)[e] = kn_f32_to_f16(x); break;
    case KN_DT_BF16: ((uint16_t *)v->data)[e] = kn_f32_to_bf16(x); break;
    default: break; /* integers, bool: 0 */
    }
  }
  return 0;
}

int kn_cmd_run(int argc, char **argv) {
  const char *artifact = NULL, *out_dir = ".";
  const char *in_names[MAX_IO], *in_files[MAX_IO]; /* NAME=FILE split at in_files[k] - 1 */
  int in_name_len[MAX_IO];
  int n_in = 0;
  long threads = 0, bench = 0, warmup = 3;
  bool profile = false;
  const char *trace = NULL;
  double peak = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(a, "--profile")) {
      profile = true;
      continue;
    }
    if (a[0] != '-') {
      if (artifact) return usage_error("unexpected argument '%s'", a);
      artifact = a;
      continue;
    }
    static const char *const flags[] = {"--input", "--output-dir", "--threads", "--bench",
                                        "--warmup", "--trace",      "--peak"};
    int which = -1;
    for (int f = 0; f < 7; f++) {
      size_t n = strlen(flags[f]);
      if (!strncmp(a, flags[f], n) && (a[n] == 0 || a[n] == '=')) {
        which = f;
        val = a[n] == '=' ? a + n + 1 : NULL;
      }
    }
    if (which < 0) return usage_error("unknown option '%s'", a);
    if (!val) {
      if (i + 1 >= argc) return usage_error("option '%s' needs a value", a);
      val = argv[++i];
    }
    switch (which) {
    case 0: {
      const char *eq = strchr(val, '=');
      if (!eq || eq == val || !eq[1]) return usage_error("--input wants NAME=FILE.npy, got '%s'", val);
      if (n_in == MAX_IO) return usage_error("too many inputs at '%s'", val);
      in_names[n_in] = val;
      in_name_len[n_in] = (int)(eq - val);
      in_files[n_in++] = eq + 1;
      break;
    }
    case 1: out_dir = val; break;
    case 2:
      if (!parse_count(val, 1, 256, &threads)) return usage_error("--threads wants 1..256, got '%s'", val);
      break;
    case 3:
      if (!parse_count(val, 1, 1000000, &bench)) return usage_error("--bench wants a count >= 1, got '%s'", val);
      break;
    case 4:
      if (!parse_count(val, 0, 1000000, &warmup)) return usage_error("--warmup wants a count >= 0, got '%s'", val);
      break;
    case 5:
      if (!*val) return usage_error("--trace wants a file name, got '%s'", val);
      trace = val;
      break;
    default: {
      char *end;
      errno = 0;
      peak = strtod(val, &end);
      if (errno || end == val || *end || !(peak > 0 && peak < 1e9))
        return usage_error("--peak wants a positive GFLOP/s figure, got '%s'", val);
    }
    }
  }
  if (!artifact) return usage_error("no artifact given%s", "");
  if (trace && !profile) return usage_error("--trace '%s' needs --profile", trace);
  if (peak > 0 && !profile) return usage_error("--peak needs --profile%s", "");
  if (profile && bench > 100000) {
    char n[32];
    snprintf(n, sizeof n, "%ld", bench);
    return usage_error("--profile takes at most 100000 runs (--bench), got %s", n);
  }
  {
    kn_diag cd;
    kn_diag_init(&cd);
    int cross_status = 0, r = kn_cross_run(artifact, argc, argv, &cross_status, &cd);
    if (r < 0) kn_diag_print(&cd, "kiln");
    kn_diag_free(&cd);
    if (r != 0) return r < 0 ? 1 : cross_status;
  }

  int status = 1;
  kn_diag d;
  kn_diag_init(&d);
  kn_loader l = {0};
  kn_npy vals[MAX_IO];
  memset(vals, 0, sizeof vals);
  const void *inputs[MAX_IO] = {0};
  void *outputs[MAX_IO] = {0};
  void *ws = NULL;
  double *times = NULL;
  if (kn_loader_open(artifact, &l, &d)) goto done;
  const kiln_artifact *a = l.art;
  if (a->n_inputs > MAX_IO || a->n_outputs > MAX_IO) {
    kn_diag_error(&d, "'%s' has more than %d inputs or outputs", artifact, MAX_IO);
    goto done;
  }
  /* match --input flags to model inputs */
  int given[MAX_IO];
  for (int i = 0; i < a->n_inputs; i++) given[i] = -1;
  for (int k = 0; k < n_in; k++) {
    int idx = -1;
    for (int i = 0; i < a->n_inputs; i++)
      if (strlen(a->inputs[i].name) == (size_t)in_name_len[k] &&
          !strncmp(a->inputs[i].name, in_names[k], (size_t)in_name_len[k]))
        idx = i;
    if (idx < 0) {
      char list[1024] = "";
      size_t n = 0;
      for (int i = 0; i < a->n_inputs && n < sizeof list; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", a->inputs[i].name);
      kn_diag_error(&d, "unknown input '%.*s' (the model's inputs: %s)", in_name_len[k],
                    in_names[k], list);
      goto done;
    }
    if (given[idx] >= 0) {
      kn_diag_error(&d, "input '%s' is given twice", a->inputs[idx].name);
      goto done;
    }
    given[idx] = k;
  }
  for (int i = 0; i < a->n_inputs; i++)
    if (given[i] < 0 && !profile) {
      kn_diag_error(&d, "missing input '%s' (give --input %s=FILE.npy)", a->inputs[i].name,
                    a->inputs[i].name);
      goto done;
    }
  int64_t batch = 0;
  for (int i = 0; i < a->n_inputs; i++) {
    if (given[i] < 0) continue; /* filled below (--profile) */
    const char *file = in_files[given[i]];
    if (kn_npy_read(file, &vals[i], &d) || check_input(a, &a->inputs[i], file, &vals[i], &batch, &d))
      goto done;
    kn_dtype want = kn_loader_dtype(&a->inputs[i]);
    if (want == KN_DT_BF16 && vals[i].dtype == KN_DT_F32) {
      uint16_t *h = (uint16_t *)vals[i].data; /* in place: 2 bytes per 4 */
      for (int64_t e = 0; e < vals[i].numel; e++) h[e] = kn_f32_to_bf16(((float *)vals[i].data)[e]);
    }
    if (kn_dtype_is_f8(want) && vals[i].dtype == KN_DT_F32) {
      uint8_t *q = (uint8_t *)vals[i].data; /* in place: 1 byte per 4 */
      for (int64_t e = 0; e < vals[i].numel; e++) q[e] = kn_f32_to_f8(want, ((float *)vals[i].data)[e]);
    }
    inputs[i] = vals[i].data;
  }
  if (batch == 0) batch = 1;
  for (int i = 0; i < a->n_inputs; i++)
    if (given[i] < 0) {
      if (fill_input(&a->inputs[i], batch, &vals[i], &d)) goto done;
      inputs[i] = vals[i].data;
    }
  for (int i = 0; i < a->n_outputs; i++) {
    int64_t bytes = kn_loader_bytes(&a->outputs[i], batch);
    if (bytes < 0 || !(outputs[i] = malloc(bytes > 0 ? (size_t)bytes : 1))) {
      kn_diag_error(&d, "cannot allocate output '%s'", a->outputs[i].name);
      goto done;
    }
  }
  if (!(ws = kn_loader_workspace_new(a, &d))) goto done;
  int nthreads = threads ? (int)threads : default_threads();
  if (kn_loader_set_threads(&l, nthreads, &d)) goto done;
  if (kn_loader_run(&l, inputs, outputs, ws, batch, &d)) goto done;
  if (bench) {
    for (long i = 0; i < warmup; i++)
      if (kn_loader_run(&l, inputs, outputs, ws, batch, &d)) goto done;
    times = malloc(sizeof(double) * (size_t)bench);
    KN_ASSERT(times, "out of memory");
    for (long i = 0; i < bench; i++) {
      double t0 = now_ms();
      if (kn_loader_run(&l, inputs, outputs, ws, batch, &d)) goto done;
      times[i] = now_ms() - t0;
    }
    qsort(times, (size_t)bench, sizeof(double), cmp_double);
    long p90 = (long)((double)bench * 0.9 + 0.999999) - 1;
    double median = bench % 2 ? times[bench / 2] : (times[bench / 2 - 1] + times[bench / 2]) / 2;
    double p90v = times[p90 < 0 ? 0 : p90];
    printf("latency: median %.*f ms, p90 %.*f ms (%ld runs, %d threads)\n", median < 1 ? 4 : 3,
           median, p90v < 1 ? 4 : 3, p90v, bench, nthreads);
  }
  if (profile) {
    kn_profile_opts po = {.runs = bench ? bench : 20, .warmup = warmup, .threads = nthreads,
                          .peak_gflops = peak, .trace_path = trace};
    if (kn_run_profile(&l, inputs, outputs, ws, batch, &po, stdout, &d)) goto done;
  }
  struct stat st;
  if (stat(out_dir, &st) != 0 && mkdir(out_dir, 0755) != 0) {
    kn_diag_error(&d, "cannot create output directory '%s': %s", out_dir, strerror(errno));
    goto done;
  }
  for (int i = 0; i < a->n_outputs; i++) {
    const kiln_tensor_desc *t = &a->outputs[i];
    if (write_output(out_dir, t, batch, outputs[i], &d)) goto done;
    if (bench || profile) continue;
    char shape[256];
    kn_loader_shape_str(t, batch, shape, sizeof shape);
    int64_t numel = kn_loader_numel(t, batch);
    printf("%s: %s [%s] = [", t->name, kn_dtype_name(kn_loader_dtype(t)), shape);
    for (int64_t e = 0; e < numel && e < 6; e++) {
      if (e) printf(", ");
      print_value(outputs[i], kn_loader_dtype(t), e);
    }
    printf("%s]\n", numel > 6 ? ", ..." : "");
  }
  status = 0;
done:
  if (status) kn_diag_print(&d, "kiln");
  kn_diag_free(&d);
  free(times);
  kn_loader_workspace_free(ws);
  for (int i = 0; i < MAX_IO; i++) {
    free(outputs[i]);
    kn_npy_free(&vals[i]);
  }
  kn_loader_close(&l);
  return status;
}
