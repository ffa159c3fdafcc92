/* cmd_run.c — `kiln run ART.so [--input NAME=FILE.npy ...]`: runs an
 * artifact through the loader on .npy inputs, with --output-dir writes one
 * .npy per output, and with --bench times repeated runs; with --profile,
 * times each kernel through the artifact's P_run_profiled (run_profile.c).
 * When the run is timed (--bench, --profile) or --batch is given, inputs not
 * given are filled with deterministic values (floats uniform in [-1, 1),
 * integers and booleans 0), so a benchmark needs no input files.
 *
 * The batch size N is inferred from the given inputs' batch dims (all must
 * agree, 1 <= N <= max_batch; --batch must then name the same N); every other
 * dim must match exactly. Without such an input, --batch lists the batches
 * to run (a sweep: each is run, timed and reported), default 1. Output files
 * are written only when asked (--output-dir DIR): DIR/NAME.npy, with
 * characters other than [A-Za-z0-9._-] in NAME replaced by '_', each written
 * atomically. bfloat16 tensors travel as float32 .npy. --json writes the
 * figures as one JSON object (json_out.h), atomically, once every batch ran.
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
#include "tools/json_out.h"
#include "tools/npy.h"
#include "tools/options.h"
#include "tools/run_profile.h"

#define MAX_IO 256
#define MAX_BATCHES 64
#define DEFAULT_RUNS 20 /* timed runs per batch of a sweep or a profile without --bench */

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

static void print_value(FILE *out, const void *data, kn_dtype t, int64_t i) {
  const unsigned char *p = (const unsigned char *)data + (size_t)i * kn_dtype_size(t);
  switch (t) {
  case KN_DT_F32: fprintf(out, "%.6g", (double)*(const float *)p); break;
  case KN_DT_F64: fprintf(out, "%.9g", *(const double *)p); break;
  case KN_DT_F16: fprintf(out, "%.4g", (double)kn_f16_to_f32(*(const uint16_t *)p)); break;
  case KN_DT_BF16: fprintf(out, "%.4g", (double)kn_bf16_to_f32(*(const uint16_t *)p)); break;
  case KN_DT_I8:
  case KN_DT_I2:
  case KN_DT_I4: fprintf(out, "%d", *(const int8_t *)p); break;
  case KN_DT_U8:
  case KN_DT_U2:
  case KN_DT_U4:
  case KN_DT_BOOL: fprintf(out, "%u", *p); break;
  case KN_DT_I16: fprintf(out, "%d", *(const int16_t *)p); break;
  case KN_DT_U16: fprintf(out, "%u", *(const uint16_t *)p); break;
  case KN_DT_I32: fprintf(out, "%d", *(const int32_t *)p); break;
  case KN_DT_U32: fprintf(out, "%u", *(const uint32_t *)p); break;
  case KN_DT_I64: fprintf(out, "%lld", (long long)*(const int64_t *)p); break;
  case KN_DT_U64: fprintf(out, "%llu", (unsigned long long)*(const uint64_t *)p); break;
  default:
    if (kn_dtype_is_f8(t)) fprintf(out, "%.4g", (double)kn_f8_to_f32(t, *p));
    else fprintf(out, "?");
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

/* An input the user did not give (a timed run or --batch): deterministic values,
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
  const char *batch_list; /* --batch as given */
  int64_t batches[MAX_BATCHES];
  int n_batches; /* 0: --batch not given */
  const char *json; /* --json FILE, "-" for stdout */
} run_args;

/* --batch: a comma-separated list of whole numbers >= 1, each once. */
static bool parse_batches(const char *s, run_args *r) {
  r->n_batches = 0;
  const char *p = s;
  for (;;) {
    char *end;
    errno = 0;
    if (*p < '0' || *p > '9') return false;
    long long v = strtoll(p, &end, 10);
    if (errno || v < 1 || v > 1048576 || r->n_batches == MAX_BATCHES) return false;
    for (int i = 0; i < r->n_batches; i++)
      if (r->batches[i] == v) return false;
    r->batches[r->n_batches++] = v;
    if (!*end) return true;
    if (*end != ',') return false;
    p = end + 1;
  }
}

/* Whether the inputs not given are filled in: a timed run or an explicit batch. */
static bool fills_inputs(const run_args *r) { return r->bench || r->profile || r->n_batches; }

/* Reads the command line into *r; returns KN_OPTS_GO_ON or the exit status. */
static int parse_args(int argc, char **argv, run_args *r) {
  *r = (run_args){.warmup = 3};
  const kn_opt opts[] = {
      {"--input", NULL, "NAME=FILE.npy", "value of model input NAME; inputs not given are filled with\n"
       "deterministic values under --bench, --profile or --batch", .list = r->inputs,
       .count = &r->n_inputs, .max = MAX_IO},
      {"--batch", NULL, "B[,B...]", "the batches to run and time, each 1..max_batch (default: the\n"
       "inputs' batch, else 1); several need generated inputs", .str = &r->batch_list},
      {"--output-dir", NULL, "DIR", "write NAME.npy per output into DIR (default: no files)", .str = &r->out_dir},
      {"--threads", NULL, "N", "thread pool size (default $KILN_NUM_THREADS or the CPU count)",
       .whole = &r->threads, .lo = 1, .hi = 256},
      {"--bench", NULL, "N", "time N runs per batch: median and p90 latency, throughput\n"
       "(default 20 with several --batch values)", .whole = &r->bench, .lo = 1, .hi = 1000000},
      {"--warmup", NULL, "N", "untimed runs before --bench / --profile (default 3)", .whole = &r->warmup, .lo = 0,
       .hi = 1000000},
      {"--json", NULL, "FILE", "also write the figures as JSON to FILE ('-': stdout, the\n"
       "report then goes to stderr)", .str = &r->json},
      {"--profile", NULL, NULL,
       "time each kernel over the --bench N runs (default 20): table\nof median time, share, GFLOP/s and % of the "
       "fp32 peak",
       .flag = &r->profile},
      {"--trace", NULL, "FILE.json", "with --profile: write a Chrome trace (Perfetto, chrome://tracing)",
       .str = &r->trace},
      {"--peak", NULL, "GFLOPS",
       "with --profile: the fp32 peak to compare with (default: measured\nat startup on the same thread count, ~0.2 s)",
       .num = &r->peak, .lo = DBL_MIN, .hi = 1e9, .expect = "a positive GFLOP/s figure"},
  };
  const kn_cmd_spec spec = {"run",
                            "usage: kiln run ARTIFACT.so [--input NAME=FILE.npy ...] [options]\n"
                            "  (an aarch64 artifact on an x86-64 host runs under qemu-aarch64)",
                            "artifact", opts, (int)(sizeof opts / sizeof *opts), NULL};
  int status = kn_opts_parse(&spec, argc, argv, &r->artifact);
  if (status != KN_OPTS_GO_ON) return status;
  for (int k = 0; k < r->n_inputs; k++) {
    const char *eq = strchr(r->inputs[k], '=');
    if (!eq || eq == r->inputs[k] || !eq[1]) return kn_opts_bad_value("--input", r->inputs[k], "NAME=FILE.npy");
  }
  if (r->batch_list && !parse_batches(r->batch_list, r))
    return kn_opts_bad_value("--batch", r->batch_list,
                             "a comma-separated list of distinct batches, each a whole number >= 1");
  if (r->out_dir && !*r->out_dir) return kn_opts_bad_value("--output-dir", r->out_dir, "a folder name");
  if (r->json && !*r->json) return kn_opts_bad_value("--json", r->json, "a file name or '-'");
  if (r->trace && !*r->trace) return kn_opts_bad_value("--trace", r->trace, "a file name");
  if (r->trace && !r->profile) return kn_opts_usage_error(&spec, "--trace '%s' needs --profile", r->trace);
  if (r->peak > 0 && !r->profile) return kn_opts_usage_error(&spec, "--peak needs --profile");
  if (r->profile && r->bench > 100000)
    return kn_opts_usage_error(&spec, "--profile takes at most 100000 runs (--bench), got %lld", (long long)r->bench);
  if (r->n_batches > 1) {
    if (r->out_dir)
      return kn_opts_usage_error(&spec, "--output-dir needs a single batch, --batch %s names %d", r->batch_list,
                                 r->n_batches);
    if (r->trace)
      return kn_opts_usage_error(&spec, "--trace needs a single batch, --batch %s names %d", r->batch_list,
                                 r->n_batches);
    if (!r->bench) r->bench = DEFAULT_RUNS;
  }
  return KN_OPTS_GO_ON;
}

/* The figures of one batch's timed runs. */
typedef struct batch_result {
  int64_t batch, runs;
  double median_ms, p90_ms, mean_ms, min_ms;
} batch_result;

/* The loaded artifact and the buffers of one run. */
typedef struct run_state {
  kn_loader l;
  kn_npy vals[MAX_IO]; /* the inputs as read (or filled) */
  bool filled[MAX_IO]; /* vals[i] was made here: made again for each batch */
  const void *inputs[MAX_IO];
  void *outputs[MAX_IO];
  void *ws;
  int64_t batch;
  int threads;
  bool usage_error; /* a flag's value did not suit the artifact: exit 2 */
  FILE *report;     /* the human-readable report: stdout, or stderr when the JSON goes there */
  kn_jw *json;      /* NULL: no --json */
} run_state;

static void free_outputs(run_state *st) {
  for (int i = 0; i < MAX_IO; i++) {
    free(st->outputs[i]);
    st->outputs[i] = NULL;
  }
}

static void run_state_free(run_state *st) {
  kn_loader_workspace_free(st->ws);
  free_outputs(st);
  for (int i = 0; i < MAX_IO; i++) kn_npy_free(&st->vals[i]);
  kn_loader_close(&st->l);
}

/* given[i]: the --input for model input i, or -1. Every --input must name a
 * model input, once; every model input must be given unless they are filled. */
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
    if (given[i] < 0 && !fills_inputs(r))
      return kn_diag_error(d, "missing input '%s' (give --input %s=FILE.npy, or time the artifact with --bench N on "
                              "generated inputs)", a->inputs[i].name, a->inputs[i].name);
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

/* Reads and checks the given inputs; *batch: the batch they decide, 0 when
 * none has a batch dim. */
static int read_inputs(const kiln_artifact *a, const run_args *r, const int *given, run_state *st, int64_t *batch,
                       kn_diag *d) {
  *batch = 0;
  for (int i = 0; i < a->n_inputs; i++) {
    if (given[i] < 0) continue;
    const char *file = strchr(r->inputs[given[i]], '=') + 1;
    if (kn_npy_read(file, &st->vals[i], d) || check_input(a, &a->inputs[i], file, &st->vals[i], batch, d))
      return -1;
    narrow_input(kn_loader_dtype(&a->inputs[i]), &st->vals[i]);
    st->inputs[i] = st->vals[i].data;
  }
  return 0;
}

/* The batches to run: the given inputs' batch, which --batch must agree
 * with, else --batch, else 1. Each within the artifact's max_batch. */
static int choose_batches(const kiln_artifact *a, const run_args *r, int64_t input_batch, int64_t *batches,
                          int *n, run_state *st, kn_diag *d) {
  if (input_batch && r->n_batches && (r->n_batches > 1 || r->batches[0] != input_batch))
    return kn_diag_error(d, "--batch %s: the inputs given have batch %lld (other batches need generated inputs: "
                            "give no input that has the batch dim)", r->batch_list, (long long)input_batch);
  *n = 1;
  batches[0] = input_batch ? input_batch : 1;
  if (!input_batch && r->n_batches) {
    *n = r->n_batches;
    memcpy(batches, r->batches, sizeof *batches * (size_t)r->n_batches);
  }
  for (int i = 0; i < *n; i++)
    if (batches[i] > a->max_batch) {
      st->usage_error = true;
      return kn_diag_error(d, "--batch %s: %lld is above the max batch of '%s', %lld (compile with --max-batch)",
                           r->batch_list, (long long)batches[i], r->artifact, (long long)a->max_batch);
    }
  return 0;
}

/* Fills the inputs not given (made again at each batch) and allocates the
 * outputs, for st->batch. */
static int prepare_batch(const kiln_artifact *a, const int *given, run_state *st, kn_diag *d) {
  for (int i = 0; i < a->n_inputs; i++)
    if (given[i] < 0) {
      kn_npy_free(&st->vals[i]);
      if (fill_input(&a->inputs[i], st->batch, &st->vals[i], d)) return -1;
      st->inputs[i] = st->vals[i].data;
    }
  free_outputs(st);
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

/* --bench: --warmup untimed runs, then --bench timed ones; prints the
 * latency line, throughput = batch / median. */
static int bench(const run_args *r, const run_state *st, batch_result *res, kn_diag *d) {
  for (int64_t i = 0; i < r->warmup; i++)
    if (run_once(st, d)) return -1;
  double *times = malloc(sizeof(double) * (size_t)r->bench);
  KN_ASSERT(times, "out of memory");
  double sum = 0;
  for (int64_t i = 0; i < r->bench; i++) {
    double t0 = now_ms();
    if (run_once(st, d)) {
      free(times);
      return -1;
    }
    times[i] = now_ms() - t0;
    sum += times[i];
  }
  int64_t n = r->bench;
  qsort(times, (size_t)n, sizeof(double), cmp_double);
  int64_t p90 = (int64_t)((double)n * 0.9 + 0.999999) - 1;
  res->runs = n;
  res->median_ms = n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  res->p90_ms = times[p90 < 0 ? 0 : p90];
  res->mean_ms = sum / (double)n;
  res->min_ms = times[0];
  double throughput = res->median_ms > 0 ? (double)st->batch * 1e3 / res->median_ms : 0;
  fprintf(st->report, "latency: median %.*f ms, p90 %.*f ms, throughput %.1f samples/s (batch %lld, %lld runs, %d threads)\n",
          res->median_ms < 1 ? 4 : 3, res->median_ms, res->p90_ms < 1 ? 4 : 3, res->p90_ms, throughput,
          (long long)st->batch, (long long)n, st->threads);
  free(times);
  return 0;
}

/* With --output-dir, writes DIR/NAME.npy per output; without --bench /
 * --profile prints each output's dtype, shape and first values. Each
 * output's name, dtype, shape and file go into the JSON. */
static int write_outputs(const kiln_artifact *a, const run_args *r, const run_state *st, kn_diag *d) {
  struct stat sb;
  if (r->out_dir && stat(r->out_dir, &sb) != 0 && mkdir(r->out_dir, 0777) != 0)
    return kn_diag_error(d, "cannot create output directory '%s': %s", r->out_dir, strerror(errno));
  if (st->json) kn_jw_array(st->json, "outputs", false);
  for (int i = 0; i < a->n_outputs; i++) {
    const kiln_tensor_desc *t = &a->outputs[i];
    if (r->out_dir && write_output(r->out_dir, t, st->batch, st->outputs[i], d)) return -1;
    if (st->json) {
      kn_jw_object(st->json, NULL);
      kn_jw_str(st->json, "name", t->name);
      kn_jw_str(st->json, "dtype", kn_dtype_name(kn_loader_dtype(t)));
      kn_jw_array(st->json, "shape", true);
      for (int k = 0; k < t->rank; k++)
        kn_jw_int(st->json, NULL, t->dims[k] * (((t->batch_mask >> k) & 1u) ? st->batch : 1));
      kn_jw_end(st->json);
      kn_jw_end(st->json);
    }
    if (r->bench || r->profile) continue;
    char shape[256];
    kn_loader_shape_str(t, st->batch, shape, sizeof shape);
    int64_t numel = kn_loader_numel(t, st->batch);
    fprintf(st->report, "%s: %s [%s] = [", t->name, kn_dtype_name(kn_loader_dtype(t)), shape);
    for (int64_t e = 0; e < numel && e < 6; e++) {
      if (e) fprintf(st->report, ", ");
      print_value(st->report, st->outputs[i], kn_loader_dtype(t), e);
    }
    fprintf(st->report, "%s]\n", numel > 6 ? ", ..." : "");
  }
  if (st->json) kn_jw_end(st->json);
  return 0;
}

/* One batch: inputs and outputs for it, one run, --bench, --profile, the
 * outputs; its JSON object. */
static int run_batch(const run_args *r, run_state *st, const int *given, kn_diag *d) {
  const kiln_artifact *a = st->l.art;
  if (prepare_batch(a, given, st, d) || run_once(st, d)) return -1;
  batch_result res = {.batch = st->batch};
  if (r->bench && bench(r, st, &res, d)) return -1;
  kn_jw *j = st->json;
  if (j) {
    kn_jw_object(j, NULL);
    kn_jw_int(j, "batch", st->batch);
    kn_jw_int(j, "runs", res.runs);
    if (res.runs) {
      kn_jw_num(j, "median_ms", res.median_ms);
      kn_jw_num(j, "p90_ms", res.p90_ms);
      kn_jw_num(j, "mean_ms", res.mean_ms);
      kn_jw_num(j, "min_ms", res.min_ms);
      kn_jw_num(j, "throughput_per_s", res.median_ms > 0 ? (double)st->batch * 1e3 / res.median_ms : 0);
    } else {
      const char *keys[] = {"median_ms", "p90_ms", "mean_ms", "min_ms", "throughput_per_s"};
      for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) kn_jw_null(j, keys[k]);
    }
  }
  if (r->profile) {
    kn_profile_opts po = {.runs = r->bench ? r->bench : DEFAULT_RUNS, .warmup = r->warmup, .threads = st->threads,
                          .peak_gflops = r->peak, .trace_path = r->trace, .json = j};
    if (kn_run_profile(&st->l, st->inputs, st->outputs, st->ws, st->batch, &po, st->report, d)) return -1;
  }
  if (write_outputs(a, r, st, d)) return -1;
  if (j) kn_jw_end(j);
  return 0;
}

/* The JSON document's head: the artifact, the run's settings, the inputs. */
static void json_head(const run_args *r, const run_state *st, const int *given) {
  const kiln_artifact *a = st->l.art;
  kn_jw *j = st->json;
  kn_jw_object(j, NULL);
  kn_jw_str(j, "artifact", r->artifact);
  kn_jw_str(j, "prefix", a->prefix);
  kn_jw_str(j, "target", a->target);
  kn_jw_int(j, "max_batch", a->max_batch);
  kn_jw_int(j, "threads", st->threads);
  kn_jw_int(j, "warmup", r->warmup);
  kn_jw_array(j, "inputs", false);
  for (int i = 0; i < a->n_inputs; i++) {
    kn_jw_object(j, NULL);
    kn_jw_str(j, "name", a->inputs[i].name);
    kn_jw_str(j, "file", given[i] >= 0 ? strchr(r->inputs[given[i]], '=') + 1 : NULL); /* null: generated */
    kn_jw_end(j);
  }
  kn_jw_end(j);
  kn_jw_array(j, "batches", false);
}

/* Loads the artifact, runs each batch as asked. */
static int run_artifact(const run_args *r, run_state *st, kn_diag *d) {
  if (kn_loader_open(r->artifact, &st->l, d)) return -1;
  const kiln_artifact *a = st->l.art;
  if (a->n_inputs > MAX_IO || a->n_outputs > MAX_IO)
    return kn_diag_error(d, "'%s' has more than %d inputs or outputs", r->artifact, MAX_IO);
  int given[MAX_IO];
  int64_t input_batch = 0, batches[MAX_BATCHES];
  int n_batches = 0;
  if (match_inputs(a, r, given, d) || read_inputs(a, r, given, st, &input_batch, d) ||
      choose_batches(a, r, input_batch, batches, &n_batches, st, d))
    return -1;
  if (!(st->ws = kn_loader_workspace_new(a, d))) return -1;
  st->threads = r->threads ? (int)r->threads : default_threads();
  if (kn_loader_set_threads(&st->l, st->threads, d)) return -1;
  if (st->json) json_head(r, st, given);
  for (int b = 0; b < n_batches; b++) {
    st->batch = batches[b];
    if (run_batch(r, st, given, d)) return -1;
  }
  if (st->json) {
    kn_jw_end(st->json);
    kn_jw_end(st->json);
  }
  return 0;
}

/* Where --json goes until every batch ran: a new file beside FILE, renamed
 * into place at the end, or for '-' memory copied to stdout; a failed run
 * leaves nothing. */
typedef struct json_sink {
  FILE *fp;
  char *tmp;         /* the file beside FILE */
  char *mem;         /* '-': the document */
  size_t mem_size;
} json_sink;

static int json_sink_open(const char *path, json_sink *s, kn_diag *d) {
  *s = (json_sink){0};
  if (!strcmp(path, "-")) {
    s->fp = open_memstream(&s->mem, &s->mem_size);
    return s->fp ? 0 : kn_diag_error(d, "--json: out of memory");
  }
  size_t len = strlen(path) + 32;
  s->tmp = malloc(len);
  KN_ASSERT(s->tmp, "out of memory");
  int fd = kn_create_beside(path, s->tmp, len);
  if (fd >= 0 && !(s->fp = fdopen(fd, "w"))) close(fd);
  if (!s->fp) {
    if (fd >= 0) unlink(s->tmp);
    free(s->tmp);
    s->tmp = NULL;
    return kn_diag_error(d, "--json: cannot write '%s': %s", path, strerror(errno));
  }
  return 0;
}

/* Puts the document in place when ok, else drops it. */
static int json_sink_close(const char *path, json_sink *s, bool ok, kn_diag *d) {
  if (!s->fp) return 0;
  bool bad = ferror(s->fp) != 0;
  int closed = fclose(s->fp);
  int rc = 0;
  if (!s->tmp) {
    if (ok && (fwrite(s->mem, 1, s->mem_size, stdout) != s->mem_size || fflush(stdout) != 0))
      rc = kn_diag_error(d, "--json: cannot write to stdout");
    free(s->mem);
  } else {
    if (ok && (closed != 0 || bad || rename(s->tmp, path) != 0))
      rc = kn_diag_error(d, "--json: cannot write '%s': %s", path, strerror(errno ? errno : EIO));
    if (!ok || rc) unlink(s->tmp);
    free(s->tmp);
  }
  return rc;
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
  st->report = stdout;
  json_sink sink = {0};
  kn_jw json;
  status = 0;
  if (r.json) {
    if (json_sink_open(r.json, &sink, &d)) {
      status = 1;
    } else {
      kn_jw_init(&json, sink.fp);
      st->json = &json;
      if (!strcmp(r.json, "-")) st->report = stderr;
    }
  }
  if (!status) {
    status = run_artifact(&r, st, &d) < 0 ? (st->usage_error ? 2 : 1) : 0;
    if (r.json && json_sink_close(r.json, &sink, status == 0, &d)) status = 1;
  }
  if (status) kn_diag_print(&d, "kiln");
  kn_diag_free(&d);
  run_state_free(st);
  free(st);
  return status;
}
