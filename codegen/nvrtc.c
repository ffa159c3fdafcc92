/* nvrtc.c — CUDA C -> cubin / PTX through NVRTC, opened with dlopen.
 *
 * kiln links only -ldl: NVRTC is looked up at run time (libnvrtc.so.13,
 * libnvrtc.so, then $CUDA_HOME/lib64 and /usr/local/cuda/lib64), so kiln
 * runs where the toolkit is absent and says what to install when it is
 * needed. The library's entry points are resolved once (pthread_once) into
 * a table that is read-only afterwards; NVRTC itself is thread-safe for
 * distinct programs, so the autotuner may compile on several threads.
 *
 * kn_nvrtc_compile compiles the source once per target architecture
 * (-arch=sm_XX, a cubin, with ptxas -v for the resource report) and once
 * for compute_<highest> (PTX for newer GPUs). Errors name the kernel whose
 * lines the compiler points at: a kernel's lines run from its __global__
 * line to the next kernel's. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cuda.h"

/* NVRTC's C ABI, declared here so that building kiln needs no CUDA header:
 * nvrtcResult is an int enum (0 = success), nvrtcProgram a pointer. */
typedef int (*nvrtc_create_fn)(void **prog, const char *src, const char *name, int n_headers,
                               const char *const *headers, const char *const *include_names);
typedef int (*nvrtc_compile_fn)(void *prog, int n_options, const char *const *options);
typedef int (*nvrtc_size_fn)(void *prog, size_t *size);
typedef int (*nvrtc_get_fn)(void *prog, char *out);
typedef int (*nvrtc_destroy_fn)(void **prog);
typedef const char *(*nvrtc_error_string_fn)(int result);
typedef int (*nvrtc_version_fn)(int *major, int *minor);

typedef struct nvrtc_api {
  void *lib;
  nvrtc_create_fn create;
  nvrtc_compile_fn compile;
  nvrtc_size_fn log_size, cubin_size, ptx_size;
  nvrtc_get_fn log, cubin, ptx;
  nvrtc_destroy_fn destroy;
  nvrtc_error_string_fn error_string;
  nvrtc_version_fn version;
  int major, minor;
  char why[600]; /* why it is not available; empty when it is */
} nvrtc_api;

static nvrtc_api api;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void *open_nvrtc(void) {
  const char *names[] = {"libnvrtc.so.13", "libnvrtc.so"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
  }
  const char *home = getenv("CUDA_HOME");
  const char *dirs[] = {home && *home ? home : NULL, "/usr/local/cuda"};
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    if (!dirs[i]) continue;
    for (size_t j = 0; j < sizeof names / sizeof names[0]; j++) {
      char path[512];
      snprintf(path, sizeof path, "%s/lib64/%s", dirs[i], names[j]);
      void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (h) return h;
    }
  }
  return NULL;
}

static void load_api(void) {
  api.lib = open_nvrtc();
  if (!api.lib) {
    snprintf(api.why, sizeof api.why,
             "NVRTC not found (libnvrtc.so.13): install the CUDA toolkit's NVRTC (e.g. package cuda-nvrtc-13-0) "
             "or set CUDA_HOME to a toolkit with lib64/libnvrtc.so");
    return;
  }
  struct {
    void **slot;
    const char *name;
  } syms[] = {
      {(void **)&api.create, "nvrtcCreateProgram"},     {(void **)&api.compile, "nvrtcCompileProgram"},
      {(void **)&api.log_size, "nvrtcGetProgramLogSize"}, {(void **)&api.log, "nvrtcGetProgramLog"},
      {(void **)&api.cubin_size, "nvrtcGetCUBINSize"},  {(void **)&api.cubin, "nvrtcGetCUBIN"},
      {(void **)&api.ptx_size, "nvrtcGetPTXSize"},      {(void **)&api.ptx, "nvrtcGetPTX"},
      {(void **)&api.destroy, "nvrtcDestroyProgram"},   {(void **)&api.error_string, "nvrtcGetErrorString"},
      {(void **)&api.version, "nvrtcVersion"},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    *syms[i].slot = dlsym(api.lib, syms[i].name);
    if (!*syms[i].slot) {
      snprintf(api.why, sizeof api.why, "NVRTC lacks %s: install NVRTC 12 or newer (CUDA toolkit)", syms[i].name);
      return;
    }
  }
  if (api.version(&api.major, &api.minor) != 0)
    snprintf(api.why, sizeof api.why, "nvrtcVersion failed: reinstall the CUDA toolkit's NVRTC");
}

static const nvrtc_api *get_api(kn_diag *d) {
  pthread_once(&api_once, load_api);
  if (api.why[0]) {
    if (d) kn_diag_error(d, "cuda: %s", api.why);
    return NULL;
  }
  return &api;
}

bool kn_nvrtc_available(kn_diag *d) { return get_api(d) != NULL; }

bool kn_nvrtc_version(int *major, int *minor) {
  const nvrtc_api *a = get_api(NULL);
  if (!a) return false;
  *major = a->major;
  *minor = a->minor;
  return true;
}

/* ---- the program log ---- */

/* Line `n` (1-based) of text into buf (cut to its size). */
static void text_line(const char *text, int n, char *buf, size_t size) {
  const char *p = text;
  for (int i = 1; i < n && p; i++) {
    p = strchr(p, '\n');
    if (p) p++;
  }
  buf[0] = 0;
  if (!p) return;
  while (*p == ' ' || *p == '\t') p++;
  size_t len = strcspn(p, "\n");
  if (len >= size) len = size - 1;
  memcpy(buf, p, len);
  buf[len] = 0;
}

/* The kernel whose lines contain line `line` of `text`: the last line at
 * or before it holding `marker` (CUDA C: "__global__", PTX: ".entry") and
 * then " NAME(". NULL for lines before every kernel. */
static const char *kernel_at(const char *text, const char *marker, int line, const char *const *names, int n) {
  const char *found = NULL;
  int at = 1;
  for (const char *p = text; p && at <= line; at++) {
    const char *end = strchr(p, '\n');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    const char *g = memmem(p, len, marker, strlen(marker));
    if (g)
      for (int i = 0; i < n; i++) {
        char pattern[300];
        snprintf(pattern, sizeof pattern, " %s(", names[i]);
        if (memmem(g, len - (size_t)(g - p), pattern, strlen(pattern))) found = names[i];
      }
    p = end ? end + 1 : NULL;
  }
  return found;
}

/* The kernel an error line of the log is about, and the line it names:
 * a line of the source (front end), of `ptx` (ptxas, when the caller could
 * get that PTX), or an entry name ptxas quotes. */
static const char *error_kernel(const char *text, const char *source, const char *ptx, const char *const *names, int n,
                                int *line) {
  const char *at;
  *line = 0;
  if ((at = strstr(text, ".cu(")) && sscanf(at + 4, "%d", line) == 1)
    return kernel_at(source, "__global__", *line, names, n);
  int ptx_line;
  if (ptx && (at = strstr(text, "ptx input, line ")) && sscanf(at + 16, "%d", &ptx_line) == 1)
    return kernel_at(ptx, ".entry", ptx_line, names, n);
  for (int i = 0; i < n; i++) {
    char quoted[300];
    snprintf(quoted, sizeof quoted, "'%s'", names[i]);
    if (strstr(text, quoted)) return names[i];
  }
  return NULL;
}

/* One diagnostic per error line of the log (at most 3), each naming the
 * kernel it is about and, for a source line, quoting it. */
static void report_errors(const char *log, const char *source, const char *ptx, const char *const *names, int n,
                          const char *arch, kn_diag *d) {
  int reported = 0;
  for (const char *p = log; *p && reported < 3;) {
    size_t len = strcspn(p, "\n");
    char text[1024];
    snprintf(text, sizeof text, "%.*s", (int)(len < sizeof text ? len : sizeof text - 1), p);
    p += len + (p[len] == '\n');
    if (!strstr(text, "error:") && !strstr(text, "error   :")) continue;
    int line;
    const char *kernel = error_kernel(text, source, ptx, names, n, &line);
    const char *who = kernel ? kernel : line > 0 ? "(the prelude)" : "(unknown)";
    if (line > 0) {
      char code[200];
      text_line(source, line, code, sizeof code);
      kn_diag_error(d, "nvrtc (%s): kernel '%s', line %d: %s [%s]", arch, who, line, text, code);
    } else {
      kn_diag_error(d, "nvrtc (%s): kernel '%s': %s", arch, who, text);
    }
    reported++;
  }
  if (!reported) {
    char first[300];
    text_line(log, 1, first, sizeof first);
    kn_diag_error(d, "nvrtc (%s): compilation failed: %s", arch, first);
  }
}

/* Number just before `what` in line (as in "1024 bytes smem"), or -1. */
static int64_t number_before(const char *line, const char *what) {
  const char *w = strstr(line, what);
  if (!w) return -1;
  const char *q = w;
  while (q > line && q[-1] == ' ') q--;
  const char *e = q;
  while (q > line && q[-1] >= '0' && q[-1] <= '9') q--;
  return q == e ? -1 : strtoll(q, NULL, 10);
}

/* Index of the kernel named by the `len` bytes at name, or -1. */
static int kernel_index(const char *name, size_t len, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (strlen(names[i]) == len && !strncmp(name, names[i], len)) return i;
  return -1;
}

/* Fills res[kernel * n_sm + sm_i] from ptxas -v's report for one arch:
 *   Compiling entry function 'K' for 'sm_90'
 *   Function properties for F
 *       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
 *   Used 10 registers, used 1 barriers, 1024 bytes smem
 * Registers and smem belong to the entry being compiled; spills to the
 * function whose properties they follow, which may be a device function
 * the kernel calls rather than the kernel. */
static int parse_resources(const char *log, const char *const *names, int n, int n_sm, int sm_i, int sm,
                           kn_cuda_resources *res, kn_diag *d) {
  int entry = -1, props = -1;
  for (int i = 0; i < n; i++) res[i * n_sm + sm_i] = (kn_cuda_resources){.sm = sm, .registers = -1};
  for (const char *p = log; *p;) {
    size_t len = strcspn(p, "\n");
    char text[1024];
    snprintf(text, sizeof text, "%.*s", (int)(len < sizeof text ? len : sizeof text - 1), p);
    p += len + (p[len] == '\n');
    const char *at;
    if ((at = strstr(text, "Compiling entry function '"))) {
      at += strlen("Compiling entry function '");
      entry = props = kernel_index(at, strcspn(at, "'"), names, n);
      continue;
    }
    if ((at = strstr(text, "Function properties for "))) {
      at += strlen("Function properties for ");
      props = kernel_index(at, strcspn(at, " \r"), names, n);
      continue;
    }
    int64_t v;
    if (props >= 0 && (v = number_before(text, "bytes spill stores")) >= 0) res[props * n_sm + sm_i].spill_stores = v;
    if (props >= 0 && (v = number_before(text, "bytes spill loads")) >= 0) res[props * n_sm + sm_i].spill_loads = v;
    if (entry < 0) continue;
    if ((v = number_before(text, "bytes smem")) >= 0) res[entry * n_sm + sm_i].shared_bytes = v;
    if ((at = strstr(text, "Used ")) && strstr(at, "registers")) res[entry * n_sm + sm_i].registers = atoi(at + 5);
  }
  for (int i = 0; i < n; i++)
    if (res[i * n_sm + sm_i].registers < 0)
      return kn_diag_error(d, "nvrtc (sm_%d): ptxas reported no resources for kernel '%s' (not in the source?)", sm,
                           names[i]);
  return 0;
}

/* ---- compiling ---- */

typedef struct compiled {
  const nvrtc_api *api;
  const char *source;
  char arch[32];     /* "sm_80": a cubin; "compute_90": PTX */
  char *log;         /* malloc'd */
  uint8_t *data;     /* malloc'd */
  size_t size;       /* PTX: without the trailing NUL */
  int result;        /* NVRTC's, of the call named by `failed` */
  const char *failed; /* NULL, or the NVRTC call that failed */
} compiled;

static char *program_log(const nvrtc_api *a, void *prog) {
  size_t size = 0;
  if (a->log_size(prog, &size) != 0 || size == 0) size = 1;
  char *log = calloc(size + 1, 1);
  KN_ASSERT(log, "out of memory");
  if (size > 1) a->log(prog, log);
  return log;
}

/* Compiles c->source for c->arch. Touches nothing but *c (no arena, no
 * diagnostics), so that the architectures compile on threads of their own. */
static void *compile_arch(void *arg) {
  compiled *c = arg;
  const nvrtc_api *a = c->api;
  bool ptx = !strncmp(c->arch, "compute_", 8);
  char arch_opt[64];
  snprintf(arch_opt, sizeof arch_opt, "-arch=%s", c->arch);
  const char *opts[] = {arch_opt, "-std=c++17", "--ptxas-options=-v"};
  void *prog = NULL;
  c->result = a->create(&prog, c->source, "kiln.cu", 0, NULL, NULL);
  if (c->result != 0) {
    c->failed = "nvrtcCreateProgram";
    return NULL;
  }
  c->result = a->compile(prog, ptx ? 2 : 3, opts);
  c->log = program_log(a, prog);
  if (c->result != 0) {
    c->failed = "nvrtcCompileProgram"; /* the caller reports the log */
    a->destroy(&prog);
    return NULL;
  }
  size_t size = 0;
  c->result = ptx ? a->ptx_size(prog, &size) : a->cubin_size(prog, &size);
  if (c->result == 0 && size > 0) {
    c->data = calloc(size + 1, 1);
    KN_ASSERT(c->data, "out of memory");
    c->result = ptx ? a->ptx(prog, (char *)c->data) : a->cubin(prog, (char *)c->data);
    c->size = ptx && c->data[size - 1] == 0 ? size - 1 : size;
  }
  if (c->result != 0 || size == 0) c->failed = ptx ? "nvrtcGetPTX" : "nvrtcGetCUBIN";
  a->destroy(&prog);
  return NULL;
}

static void compiled_free(compiled *c) {
  free(c->log);
  free(c->data);
}

/* Reports a failed compile for `arch`. ptxas points into the PTX, not the
 * source: to name the kernel, the PTX of the same architecture is made
 * again (only on this error path) and its .entry lines looked up. */
static void report_errors_of(const compiled *c, const char *const *names, int n, int sm, kn_diag *d) {
  compiled ptx = {.api = c->api, .source = c->source};
  if (strstr(c->log, "ptx input, line ")) {
    snprintf(ptx.arch, sizeof ptx.arch, "compute_%d", sm);
    compile_arch(&ptx);
  }
  report_errors(c->log, c->source, ptx.failed ? NULL : (const char *)ptx.data, names, n, c->arch, d);
  compiled_free(&ptx);
}

int kn_nvrtc_compile(const char *source, const char *const *names, int n_kernels, const kn_target *t, kn_arena *A,
                     kn_cuda_module *out, kn_diag *d) {
  *out = (kn_cuda_module){0};
  const nvrtc_api *a = get_api(d);
  if (!a) return -1;
  if (t->arch != KN_ARCH_CUDA || t->n_sm < 1 || t->n_sm > KN_TARGET_MAX_SM)
    return kn_diag_error(d, "cuda: the target is not a CUDA target with architectures (-arch=sm_XX)");
  int n_sm = t->n_sm, n_images = n_sm + 1; /* a cubin per sm, then PTX for the highest */
  compiled c[KN_TARGET_MAX_SM + 1] = {0};
  pthread_t threads[KN_TARGET_MAX_SM + 1];
  bool started[KN_TARGET_MAX_SM + 1] = {0};
  for (int i = 0; i < n_images; i++) {
    bool ptx = i == n_sm;
    c[i].api = a;
    c[i].source = source;
    snprintf(c[i].arch, sizeof c[i].arch, "%s_%d", ptx ? "compute" : "sm", ptx ? t->sm[n_sm - 1] : t->sm[i]);
    /* NVRTC's time is one core per program: compile the images at once. */
    started[i] = i > 0 && pthread_create(&threads[i], NULL, compile_arch, &c[i]) == 0;
  }
  compile_arch(&c[0]);
  for (int i = 1; i < n_images; i++) {
    if (started[i]) pthread_join(threads[i], NULL);
    else compile_arch(&c[i]); /* no thread to be had: in turn */
  }
  kn_cuda_image *images = KN_NEW_ARRAY(A, kn_cuda_image, n_images);
  kn_cuda_resources *res = KN_NEW_ARRAY(A, kn_cuda_resources, n_kernels > 0 ? n_kernels * n_sm : 1);
  int rc = 0;
  for (int i = 0; i < n_images && rc == 0; i++) {
    bool ptx = i == n_sm;
    int sm = ptx ? t->sm[n_sm - 1] : t->sm[i];
    if (c[i].failed && !strcmp(c[i].failed, "nvrtcCompileProgram"))
      report_errors_of(&c[i], names, n_kernels, sm, d), rc = -1;
    else if (c[i].failed)
      rc = kn_diag_error(d, "nvrtc (%s): %s: %s", c[i].arch, c[i].failed,
                         c[i].result ? a->error_string(c[i].result) : "an empty image");
    else if (!ptx && c[i].log)
      rc = parse_resources(c[i].log, names, n_kernels, n_sm, i, sm, res, d);
    if (rc == 0) {
      uint8_t *data = kn_arena_alloc(A, c[i].size + 1);
      memcpy(data, c[i].data, c[i].size);
      images[i] = (kn_cuda_image){.sm = sm, .ptx = ptx, .data = data, .size = c[i].size};
    }
  }
  for (int i = 0; i < n_images; i++) compiled_free(&c[i]);
  if (rc < 0) return -1;
  *out = (kn_cuda_module){.n_images = n_images, .images = images, .n_kernels = n_kernels, .resources = res};
  return 0;
}
