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
#include <float.h>
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
#include "tools/options.h"
#include "tools/run_profile.h"

#define MAX_IO 256

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

/* What `kiln run` was asked to do. */
typedef struct run_args {
  const char *artifact, *out_dir;
  const char *inputs[MAX_IO]; /* --input values, "NAME=FILE" */
  int n_inputs;
  int64_t threads, bench, warmup;
  bool profile;
  const char *trace;
  double peak;
} run_args;

/* Reads the command line into *r; returns KN_OPTS_GO_ON or the exit status. */
static int parse_args(int argc, char **argv, run_args *r) {
  *r = (run_args){.out_dir = ".", .warmup = 3};
  const kn_opt opts[] = {
      {"--input", NULL, "NAME=FILE.npy", "value of model input NAME (give every input)", .list = r->inputs,
       .count = &r->n_inputs, .max = MAX_IO},
      {"--output-dir", NULL, "DIR", "where NAME.npy is written per output (default .)", .str = &r->out_dir},
      {"--threads", NULL, "N", "thread pool size (default $KILN_NUM_THREADS or the CPU count)",
       .whole = &r->threads, .lo = 1, .hi = 256},
      {"--bench", NULL, "N", "time N runs and print the median and p90 latency", .whole = &r->bench, .lo = 1,
       .hi = 1000000},
      {"--warmup", NULL, "N", "untimed runs before --bench / --profile (default 3)", .whole = &r->warmup, .lo = 0,
       .hi = 1000000},
      {"--profile", NULL, NULL,
       "time each kernel over the --bench N runs (default 20): table\nof median time, share, GFLOP/s and % of the "
       "fp32 peak;\ninputs not given are filled with deterministic values",
       .flag = &r->profile},
      {"--trace", NULL, "FILE.json", "with --profile: write a Chrome trace (Perfetto, chrome://tracing)",
       .str = &r->trace},
      {"--peak", NULL, "GFLOPS",
       "with --profile: the fp32 peak to compare with (default: measured\nat startup on the same thread count, ~0.2 s)",
       .num = &r->peak, .lo = DBL_MIN, .hi = 1e9, .expect = "a positive GFLOP/s figure"},
  };
  const kn_cmd_spec spec = {"run",
                            "usage: kiln run ARTIFACT.so --input NAME=FILE.npy ... [options]\n"
                            "  (an aarch64 artifact on an x86-64 host runs under qemu-aarch64)",
                            "artifact", opts, (int)(sizeof opts / sizeof *opts), NULL};
  int status = kn_opts_parse(&spec, argc, argv, &r->artifact);
  if (status != KN_OPTS_GO_ON) return status;
  for (int k = 0; k < r->n_inputs; k++) {
    const char *eq = strchr(r->inputs[k], '=');
    if (!eq || eq == r->inputs[k] || !eq[1]) return kn_opts_bad_value("--input", r->inputs[k], "NAME=FILE.npy");
  }
  if (r->trace && !*r->trace) return kn_opts_bad_value("--trace", r->trace, "a file name");
  if (r->trace && !r->profile) return kn_opts_usage_error(&spec, "--trace '%s' needs --profile", r->trace);
  if (r->peak > 0 && !r->profile) return kn_opts_usage_error(&spec, "--peak needs --profile");
  if (r->profile && r->bench > 100000)
    return kn_opts_usage_error(&spec, "--profile takes at most 100000 runs (--bench), got %lld", (long long)r->bench);
  return KN_OPTS_GO_ON;
}

/* The loaded artifact and the buffers of one run. */
typedef struct run_state {
  kn_loader l;
  kn_npy vals[MAX_IO]; /* the inputs as read (or filled) */
  const void *inputs[MAX_IO];
  void *outputs[MAX_IO];
  void *ws;
  int64_t batch;
  int threads;
} run_state;

static void run_state_free(run_state *st) {
  kn_loader_workspace_free(st->ws);
  for (int i = 0; i < MAX_IO; i++) {
    free(st->outputs[i]);
    kn_npy_free(&st->vals[i]);
  }
  kn_loader_close(&st->l);
}

/* given[i]: the --input for model input i, or -1. Every --input must name a
 * model input, once; every model input must be given unless --profile. */
static int match_inputs(const kiln_artifact *a, const run_args *r, int *given, kn_diag *d) {
  for (int i = 0; i < a->n_inputs; i++) given[i] = -1;
  for (int k = 0; k < r->n_inputs; k++) {
    size_t name_len = (size_t)(strchr(r->inputs[k], '=') - r->inputs[k]);
    int idx = -1;
    for (int i = 0; i < a->n_inputs; i++)
      if (strlen(a->inputs[i].name) == name_len && !strncmp(a->inputs[i].name, r->inputs[k], name_len)) idx = i;
    if (idx < 0) {
      char list[1024] = "";
      size_t n = 0;
      for (int i = 0; i < a->n_inputs && n < sizeof list; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", a->inputs[i].name);
      return kn_diag_error(d, "unknown input '%.*s' (the model's inputs: %s)", (int)name_len, r->inputs[k], list);
    }
    if (given[idx] >= 0) return kn_diag_error(d, "input '%s' is given twice", a->inputs[idx].name);
    given[idx] = k;
  }
  for (int i = 0; i < a->n_inputs; i++)
    if (given[i] < 0 && !r->profile)
      return kn_diag_error(d, "missing input '%s' (give --input %s=FILE.npy)", a->inputs[i].name,
                           a->inputs[i].name);
  return 0;
}

/* A float32 .npy given for a bfloat16 or float8 input, narrowed in place. */
static void narrow_input(kn_dtype want, kn_npy *v) {
  if (v->dtype != KN_DT_F32) return;
  if (want == KN_DT_BF16) {
    uint16_t *h = (uint16_t *)v->data; /* 2 bytes per 4 */
    for (int64_t e = 0; e < v->numel; e++) h[e] = kn_f32_to_bf16(((float *)v->data)[e]);
  }
  if (kn_dtype_is_f8(want)) {
    uint8_t *q = (uint8_t *)v->data; /* 1 byte per 4 */
    for (int64_t e = 0; e < v->numel; e++) q[e] = kn_f32_to_f8(want, ((float *)v->data)[e]);
  }
}

/* Reads and checks the given inputs, which decide the batch (1 if none),
 * then fills the others (--profile). */
static int read_inputs(const kiln_artifact *a, const run_args *r, const int *given, run_state *st, kn_diag *d) {
  st->batch = 0;
  for (int i = 0; i < a->n_inputs; i++) {
    if (given[i] < 0) continue;
    const char *file = strchr(r->inputs[given[i]], '=') + 1;
    if (kn_npy_read(file, &st->vals[i], d) || check_input(a, &a->inputs[i], file, &st->vals[i], &st->batch, d))
      return -1;
    narrow_input(kn_loader_dtype(&a->inputs[i]), &st->vals[i]);
    st->inputs[i] = st->vals[i].data;
  }
  if (st->batch == 0) st->batch = 1;
  for (int i = 0; i < a->n_inputs; i++)
    if (given[i] < 0) {
      if (fill_input(&a->inputs[i], st->batch, &st->vals[i], d)) return -1;
      st->inputs[i] = st->vals[i].data;
    }
  return 0;
}

static int alloc_outputs(const kiln_artifact *a, run_state *st, kn_diag *d) {
  for (int i = 0; i < a->n_outputs; i++) {
    int64_t bytes = kn_loader_bytes(&a->outputs[i], st->batch);
    if (bytes < 0 || !(st->outputs[i] = malloc(bytes > 0 ? (size_t)bytes : 1)))
      return kn_diag_error(d, "cannot allocate output '%s'", a->outputs[i].name);
  }
  return 0;
}

static int run_once(const run_state *st, kn_diag *d) {
  return kn_loader_run(&st->l, st->inputs, st->outputs, st->ws, st->batch, d);
}

/* --bench: --warmup untimed runs, then --bench timed ones; prints the latency line. */
static int bench(const run_args *r, const run_state *st, kn_diag *d) {
  for (int64_t i = 0; i < r->warmup; i++)
    if (run_once(st, d)) return -1;
  double *times = malloc(sizeof(double) * (size_t)r->bench);
  KN_ASSERT(times, "out of memory");
  for (int64_t i = 0; i < r->bench; i++) {
    double t0 = now_ms();
    if (run_once(st, d)) {
      free(times);
      return -1;
    }
    times[i] = now_ms() - t0;
  }
  int64_t n = r->bench;
  qsort(times, (size_t)n, sizeof(double), cmp_double);
  int64_t p90 = (int64_t)((double)n * 0.9 + 0.999999) - 1;
  double median = n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  double p90v = times[p90 < 0 ? 0 : p90];
  printf("latency: median %.*f ms, p90 %.*f ms (%lld runs, %d threads)\n", median < 1 ? 4 : 3, median,
         p90v < 1 ? 4 : 3, p90v, (long long)n, st->threads);
  free(times);
  return 0;
}

/* Writes DIR/NAME.npy per output; without --bench / --profile also prints
 * each output's dtype, shape and first values. */
static int write_outputs(const kiln_artifact *a, const run_args *r, const run_state *st, kn_diag *d) {
  struct stat sb;
  if (stat(r->out_dir, &sb) != 0 && mkdir(r->out_dir, 0755) != 0)
    return kn_diag_error(d, "cannot create output directory '%s': %s", r->out_dir, strerror(errno));
  for (int i = 0; i < a->n_outputs; i++) {
    const kiln_tensor_desc *t = &a->outputs[i];
    if (write_output(r->out_dir, t, st->batch, st->outputs[i], d)) return -1;
    if (r->bench || r->profile) continue;
    char shape[256];
    kn_loader_shape_str(t, st->batch, shape, sizeof shape);
    int64_t numel = kn_loader_numel(t, st->batch);
    printf("%s: %s [%s] = [", t->name, kn_dtype_name(kn_loader_dtype(t)), shape);
    for (int64_t e = 0; e < numel && e < 6; e++) {
      if (e) printf(", ");
      print_value(st->outputs[i], kn_loader_dtype(t), e);
    }
    printf("%s]\n", numel > 6 ? ", ..." : "");
  }
  return 0;
}

/* Loads the artifact, runs it once on the inputs, benchmarks and profiles
 * it as asked, writes the outputs. */
static int run_artifact(const run_args *r, run_state *st, kn_diag *d) {
  if (kn_loader_open(r->artifact, &st->l, d)) return -1;
  const kiln_artifact *a = st->l.art;
  if (a->n_inputs > MAX_IO || a->n_outputs > MAX_IO)
    return kn_diag_error(d, "'%s' has more than %d inputs or outputs", r->artifact, MAX_IO);
  int given[MAX_IO];
  if (match_inputs(a, r, given, d) || read_inputs(a, r, given, st, d) || alloc_outputs(a, st, d)) return -1;
  if (!(st->ws = kn_loader_workspace_new(a, d))) return -1;
  st->threads = r->threads ? (int)r->threads : default_threads();
  if (kn_loader_set_threads(&st->l, st->threads, d) || run_once(st, d)) return -1;
  if (r->bench && bench(r, st, d)) return -1;
  if (r->profile) {
    kn_profile_opts po = {.runs = r->bench ? r->bench : 20, .warmup = r->warmup, .threads = st->threads,
                          .peak_gflops = r->peak, .trace_path = r->trace};
    if (kn_run_profile(&st->l, st->inputs, st->outputs, st->ws, st->batch, &po, stdout, d)) return -1;
  }
  return write_outputs(a, r, st, d);
}

int kn_cmd_run(int argc, char **argv) {
  run_args r;
  int status = parse_args(argc, argv, &r);
  if (status != KN_OPTS_GO_ON) return status;
  kn_diag d;
  kn_diag_init(&d);
  int cross_status = 0, cross = kn_cross_run(r.artifact, argc, argv, &cross_status, &d);
  if (cross != 0) {
    if (cross < 0) kn_diag_print(&d, "kiln");
    kn_diag_free(&d);
    return cross < 0 ? 1 : cross_status;
  }
  run_state *st = calloc(1, sizeof *st);
  KN_ASSERT(st, "out of memory");
  status = run_artifact(&r, st, &d) < 0 ? 1 : 0;
  if (status) kn_diag_print(&d, "kiln");
  kn_diag_free(&d);
  run_state_free(st);
  free(st);
  return status;
}
