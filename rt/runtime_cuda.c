/* runtime_cuda.c — the plan executor of GPU artifacts over the CUDA driver
 * API, reached through dlopen (see runtime_cuda.h).
 *
 * Driver: dlopen("libcuda.so.1") and dlsym of the versioned entry points
 * (cuMemAlloc_v2 ..., the names the public macros of cuda.h stand for),
 * then cuInit, once per artifact (pthread_once). The declarations below are
 * written from the driver API's documented signatures and values, so this
 * file needs no CUDA header. Any failure is kept as a one-line message that
 * every later run returns with KILN_ERR_DEVICE.
 *
 * Artifact state, made on the first run under `lock`: device 0's primary
 * context, the image for its compute capability (a cubin for exactly that
 * sm, else the PTX when the device is at least the PTX's sm, else an error),
 * every step's function, and one device allocation holding the workspace
 * (sized for max_batch), the weights (uploaded here, once) and one staging
 * buffer per input and output (for host pointers). A failed setup frees what
 * it made; the next run tries again.
 *
 * A run: host inputs are copied into their staging buffers, device inputs
 * are used in place (cuPointerGetAttribute says which); each step launches
 * its kernel with the grid the artifact's grid function computes for the
 * batch; a check step's flag is read back before going on; host outputs are
 * copied back; then the stream is synchronised. Runs are serialised on
 * `lock` (one workspace); the only allocations are in the setup and the
 * first profiled run (its events). The primary context is pushed around the
 * work and popped after, so the caller's current context is left as it was.
 * After fork(), a child must not run an artifact its parent ran (CUDA does
 * not survive fork). */
#include "runtime_cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime.h"

/* ---- the driver API, as far as used ---- */
typedef int cu_result;
typedef int cu_device;
typedef void *cu_context, *cu_module, *cu_function, *cu_stream, *cu_event;
typedef unsigned long long cu_ptr;

enum {
  CU_SUCCESS = 0,
  CU_ERROR_INVALID_VALUE = 1,
  CU_ERROR_STUB_LIBRARY = 34,
  CU_ERROR_NO_DEVICE = 100,
  CU_ATTR_CC_MAJOR = 75,           /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
  CU_ATTR_CC_MINOR = 76,           /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR */
  CU_POINTER_MEMORY_TYPE = 2,      /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE */
  CU_MEMORYTYPE_DEVICE = 2,
  CU_MEMORYTYPE_UNIFIED = 4,
  CU_FUNC_MAX_DYNAMIC_SHARED = 8,  /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

/* Shared memory a launch gets without opting in. */
#define STATIC_SHARED_LIMIT (48 * 1024)
/* Device allocations are carved at this alignment (the driver's own). */
#define DEVICE_ALIGN 256

typedef struct driver {
  cu_result status; /* CU_SUCCESS, or why the driver is unusable (message in `error`) */
  char error[256];
  cu_device device;
  cu_result (*Init)(unsigned flags);
  cu_result (*DeviceGet)(cu_device *dev, int ordinal);
  cu_result (*DeviceGetAttribute)(int *value, int attribute, cu_device dev);
  cu_result (*DevicePrimaryCtxRetain)(cu_context *ctx, cu_device dev);
  cu_result (*CtxPushCurrent)(cu_context ctx);
  cu_result (*CtxPopCurrent)(cu_context *ctx);
  cu_result (*ModuleLoadDataEx)(cu_module *module, const void *image, unsigned n_options,
                                int *options, void **values);
  cu_result (*ModuleUnload)(cu_module module);
  cu_result (*ModuleGetFunction)(cu_function *fn, cu_module module, const char *name);
  cu_result (*FuncSetAttribute)(cu_function fn, int attribute, int value);
  cu_result (*MemAlloc)(cu_ptr *ptr, size_t bytes);
  cu_result (*MemFree)(cu_ptr ptr);
  cu_result (*MemcpyHtoDAsync)(cu_ptr dst, const void *src, size_t bytes, cu_stream s);
  cu_result (*MemcpyDtoHAsync)(void *dst, cu_ptr src, size_t bytes, cu_stream s);
  cu_result (*PointerGetAttribute)(void *value, int attribute, cu_ptr ptr);
  cu_result (*LaunchKernel)(cu_function fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned shared, cu_stream s, void **params,
                            void **extra);
  cu_result (*StreamSynchronize)(cu_stream s);
  cu_result (*EventCreate)(cu_event *ev, unsigned flags);
  cu_result (*EventRecord)(cu_event ev, cu_stream s);
  cu_result (*EventSynchronize)(cu_event ev);
  cu_result (*EventElapsedTime)(float *ms, cu_event start, cu_event end);
  cu_result (*EventDestroy)(cu_event ev);
  cu_result (*GetErrorName)(cu_result r, const char **name);
} driver;

static driver drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

/* Each thread's last message (P_last_error), in a buffer made on its first
 * failure and held by a pthread key: a _Thread_local would make the
 * artifact need the dynamic loader's TLS entry (ld-linux) at link time. */
#define ERROR_CAP 512
static pthread_key_t error_key;
static pthread_once_t error_once = PTHREAD_ONCE_INIT;
static bool error_key_made;
static char error_no_memory[] = "out of host memory (and for the message too)";

static void error_key_make(void) { error_key_made = pthread_key_create(&error_key, free) == 0; }

static char *error_buffer(bool make) {
  pthread_once(&error_once, error_key_make);
  if (!error_key_made) return make ? error_no_memory : NULL;
  char *buf = pthread_getspecific(error_key);
  if (!buf && make) {
    buf = malloc(ERROR_CAP);
    if (!buf || pthread_setspecific(error_key, buf) != 0) {
      free(buf);
      return error_no_memory;
    }
  }
  return buf;
}

static void clear_error(void) {
  char *buf = error_buffer(false);
  if (buf && buf != error_no_memory) buf[0] = 0;
}

static void set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_error(const char *fmt, ...) {
  char *buf = error_buffer(true);
  if (buf == error_no_memory) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, ERROR_CAP, fmt, ap);
  va_end(ap);
}

static const char *error_name(cu_result r) {
  const char *name = NULL;
  if (drv.GetErrorName && drv.GetErrorName(r, &name) != CU_SUCCESS) name = NULL;
  return name ? name : "CUDA_ERROR_UNKNOWN";
}

static void driver_fail(cu_result r, const char *fmt, const char *what) {
  drv.status = r ? r : -1;
  snprintf(drv.error, sizeof drv.error, fmt, what);
}

/* Opens the driver and initialises it: pthread_once's routine. */
static void driver_load(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    driver_fail(-1, "%s", "cannot load the CUDA driver libcuda.so.1: no NVIDIA driver on this machine");
    return;
  }
#define LOAD(field, sym)                                                                          \
  if (!(drv.field = (__typeof__(drv.field))dlsym(lib, sym))) {                                    \
    driver_fail(-1, "the CUDA driver libcuda.so.1 lacks %s: update the NVIDIA driver", sym);      \
    return;                                                                                       \
  }
  LOAD(GetErrorName, "cuGetErrorName")
  LOAD(Init, "cuInit")
  LOAD(DeviceGet, "cuDeviceGet")
  LOAD(DeviceGetAttribute, "cuDeviceGetAttribute")
  LOAD(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
  LOAD(CtxPushCurrent, "cuCtxPushCurrent_v2")
  LOAD(CtxPopCurrent, "cuCtxPopCurrent_v2")
  LOAD(ModuleLoadDataEx, "cuModuleLoadDataEx")
  LOAD(ModuleUnload, "cuModuleUnload")
  LOAD(ModuleGetFunction, "cuModuleGetFunction")
  LOAD(FuncSetAttribute, "cuFuncSetAttribute")
  LOAD(MemAlloc, "cuMemAlloc_v2")
  LOAD(MemFree, "cuMemFree_v2")
  LOAD(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")
  LOAD(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")
  LOAD(PointerGetAttribute, "cuPointerGetAttribute")
  LOAD(LaunchKernel, "cuLaunchKernel")
  LOAD(StreamSynchronize, "cuStreamSynchronize")
  LOAD(EventCreate, "cuEventCreate")
  LOAD(EventRecord, "cuEventRecord")
  LOAD(EventSynchronize, "cuEventSynchronize")
  LOAD(EventElapsedTime, "cuEventElapsedTime")
  LOAD(EventDestroy, "cuEventDestroy_v2")
#undef LOAD
  cu_result r = drv.Init(0);
  if (r == CU_ERROR_STUB_LIBRARY) {
    driver_fail(r, "%s", "cuInit: CUDA_ERROR_STUB_LIBRARY: libcuda.so.1 is the toolkit's stub, "
                         "not a driver (keep lib64/stubs off the library path)");
    return;
  }
  if (r == CU_ERROR_NO_DEVICE) {
    driver_fail(r, "%s", "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA GPU on this machine");
    return;
  }
  if (r != CU_SUCCESS) {
    driver_fail(r, "cuInit failed: %s", error_name(r));
    return;
  }
  if ((r = drv.DeviceGet(&drv.device, 0)) != CU_SUCCESS) driver_fail(r, "cuDeviceGet(0) failed: %s", error_name(r));
}

/* ---- per artifact state ---- */
typedef struct gpu_state {
  pthread_mutex_t lock;
  bool ready;
  cu_stream stream; /* P_set_stream's, for later runs */
  cu_context ctx;
  cu_module module;
  int sm; /* the device's compute capability, 80 = 8.0 */
  cu_function *fns; /* per step */
  cu_ptr memory;    /* the one allocation: workspace, weights, staging */
  cu_ptr workspace, *consts, *staging; /* staging: inputs then outputs */
  cu_ptr *io;       /* this run's device pointers: inputs then outputs */
  int64_t *grid;    /* 3 per step */
  cu_event *events; /* n_steps + 1, made on the first profiled run */
} gpu_state;

static gpu_state state = {.lock = PTHREAD_MUTEX_INITIALIZER};

#define CHECK(call, what)                                                                         \
  do {                                                                                            \
    cu_result r_ = (call);                                                                        \
    if (r_ != CU_SUCCESS) {                                                                       \
      set_error("%s failed: %s (%d)", what, error_name(r_), r_);                                  \
      goto fail;                                                                                  \
    }                                                                                             \
  } while (0)

static int64_t round_up(int64_t x) { return (x + DEVICE_ALIGN - 1) / DEVICE_ALIGN * DEVICE_ALIGN; }

/* Bytes of tensor t at `batch` with elements of `elem` bytes. */
static int64_t tensor_bytes(const kiln_tensor_desc *t, int32_t elem, int64_t batch) {
  int64_t n = elem;
  for (int i = 0; i < t->rank; i++) n *= (t->batch_mask >> i) & 1u ? t->dims[i] * batch : t->dims[i];
  return n;
}

static const kiln_tensor_desc *io_desc(const kiln_artifact *a, int i) {
  return i < a->n_inputs ? &a->inputs[i] : &a->outputs[i - a->n_inputs];
}

/* The image to load for compute capability sm, or -1 with the message set. */
static int choose_image(const kiln_gpu *g, int sm) {
  for (int i = 0; i < g->n_images; i++)
    if (!g->images[i].ptx && g->images[i].sm == sm) return i;
  for (int i = 0; i < g->n_images; i++)
    if (g->images[i].ptx && g->images[i].sm <= sm) return i;
  char have[160] = "";
  size_t n = 0;
  for (int i = 0; i < g->n_images && n < sizeof have; i++)
    n += (size_t)snprintf(have + n, sizeof have - n, "%s%s_%d", i ? ", " : "",
                          g->images[i].ptx ? "compute" : "sm", (int)g->images[i].sm);
  set_error("no code for this GPU (sm_%d): the artifact has %s; recompile with --target \"cuda -arch=sm_%d\"",
            sm, have, sm);
  return -1;
}

static void state_release(gpu_state *s) {
  if (s->memory) drv.MemFree(s->memory);
  if (s->module) drv.ModuleUnload(s->module);
  free(s->fns);
  free(s->consts);
  free(s->staging);
  free(s->io);
  free(s->grid);
  s->fns = NULL, s->consts = s->staging = s->io = NULL, s->grid = NULL;
  s->memory = 0, s->module = NULL;
}

/* Loads the module and uploads the weights (see the top). With the primary
 * context current. Returns 0, or -1 with the message set. */
static int state_setup(gpu_state *s, const kiln_artifact *a) {
  const kiln_gpu *g = a->gpu;
  int major = 0, minor = 0, n_io = a->n_inputs + a->n_outputs;
  CHECK(drv.DeviceGetAttribute(&major, CU_ATTR_CC_MAJOR, drv.device), "cuDeviceGetAttribute");
  CHECK(drv.DeviceGetAttribute(&minor, CU_ATTR_CC_MINOR, drv.device), "cuDeviceGetAttribute");
  s->sm = major * 10 + minor;
  int image = choose_image(g, s->sm);
  if (image < 0) goto fail;
  char log[256] = "";
  int options[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[2] = {log, (void *)(uintptr_t)sizeof log};
  cu_result r = drv.ModuleLoadDataEx(&s->module, g->images[image].data, 2, options, values);
  if (r != CU_SUCCESS) {
    log[strcspn(log, "\n")] = 0;
    set_error("loading the %s_%d image on sm_%d failed: %s%s%s", g->images[image].ptx ? "compute" : "sm",
              (int)g->images[image].sm, s->sm, error_name(r), log[0] ? ": " : "", log);
    s->module = NULL;
    goto fail;
  }
  s->fns = calloc((size_t)a->n_steps + 1, sizeof *s->fns);
  s->consts = calloc((size_t)a->n_consts + 1, sizeof *s->consts);
  s->staging = calloc((size_t)n_io + 1, sizeof *s->staging);
  s->io = calloc((size_t)n_io + 1, sizeof *s->io);
  s->grid = calloc((size_t)a->n_steps * 3 + 1, sizeof *s->grid);
  if (!s->fns || !s->consts || !s->staging || !s->io || !s->grid) {
    set_error("out of host memory");
    goto fail;
  }
  for (int i = 0; i < a->n_steps; i++) {
    r = drv.ModuleGetFunction(&s->fns[i], s->module, a->steps[i].name);
    if (r != CU_SUCCESS) {
      set_error("kernel '%s' is not in the sm_%d image: %s", a->steps[i].name, (int)g->images[image].sm,
                error_name(r));
      goto fail;
    }
    if (g->launches[i].shared_bytes > STATIC_SHARED_LIMIT)
      CHECK(drv.FuncSetAttribute(s->fns[i], CU_FUNC_MAX_DYNAMIC_SHARED, g->launches[i].shared_bytes),
            "cuFuncSetAttribute (dynamic shared memory)");
  }
  /* one allocation: workspace, then the weights, then the staging buffers */
  int64_t total = round_up(g->workspace_size), at;
  for (int c = 0; c < a->n_consts; c++) total += round_up(g->const_bytes[c]);
  for (int i = 0; i < n_io; i++) total += round_up(tensor_bytes(io_desc(a, i), g->elem_bytes[i], a->max_batch));
  CHECK(drv.MemAlloc(&s->memory, (size_t)(total > 0 ? total : DEVICE_ALIGN)), "cuMemAlloc (workspace and weights)");
  s->workspace = s->memory;
  at = round_up(g->workspace_size);
  for (int c = 0; c < a->n_consts; c++) {
    s->consts[c] = s->memory + (cu_ptr)at;
    if (g->const_bytes[c] > 0)
      CHECK(drv.MemcpyHtoDAsync(s->consts[c], a->consts[c], (size_t)g->const_bytes[c], NULL),
            "cuMemcpyHtoDAsync (weights)");
    at += round_up(g->const_bytes[c]);
  }
  for (int i = 0; i < n_io; i++) {
    s->staging[i] = s->memory + (cu_ptr)at;
    at += round_up(tensor_bytes(io_desc(a, i), g->elem_bytes[i], a->max_batch));
  }
  CHECK(drv.StreamSynchronize(NULL), "cuStreamSynchronize (weights)");
  return 0;
fail:
  state_release(s);
  return -1;
}

/* Is p memory the device can address (device or managed)? A host pointer
 * the driver never saw answers CUDA_ERROR_INVALID_VALUE: host. */
static bool is_device_pointer(const void *p) {
  unsigned type = 0;
  if (drv.PointerGetAttribute(&type, CU_POINTER_MEMORY_TYPE, (cu_ptr)(uintptr_t)p) != CU_SUCCESS) return false;
  return type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED;
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One run with the context current and `lock` held (see the top). events:
 * NULL, or n_steps slots to fill. Returns a KILN_* status. */
static int run_steps(gpu_state *s, const kiln_artifact *a, const void *const *inputs, void *const *outputs,
                     int64_t batch, kiln_prof_event *events) {
  const kiln_gpu *g = a->gpu;
  cu_stream stream = s->stream;
  int n_io = a->n_inputs + a->n_outputs;
  int64_t t0 = 0;
  for (int i = 0; i < n_io; i++) {
    const void *p = i < a->n_inputs ? inputs[i] : outputs[i - a->n_inputs];
    if (is_device_pointer(p)) {
      s->io[i] = (cu_ptr)(uintptr_t)p;
      continue;
    }
    s->io[i] = s->staging[i];
    if (i < a->n_inputs)
      CHECK(drv.MemcpyHtoDAsync(s->io[i], p, (size_t)tensor_bytes(io_desc(a, i), g->elem_bytes[i], batch), stream),
            "cuMemcpyHtoDAsync (inputs)");
  }
  void *grid_args[1] = {s->grid};
  g->grid(grid_args, batch, 0, 1);
  if (events) {
    t0 = now_ns();
    CHECK(drv.EventRecord(s->events[0], stream), "cuEventRecord");
  }
  for (int st = 0; st < a->n_steps; st++) {
    const kiln_step *step = &a->steps[st];
    const kiln_gpu_launch *l = &g->launches[st];
    cu_ptr values[KN_RT_MAX_ARGS];
    void *params[KN_RT_MAX_ARGS + 1];
    long long batch_arg = (long long)batch;
    for (int i = 0; i < step->n_args; i++) {
      const kiln_arg *arg = &a->args[step->first_arg + i];
      cu_ptr base = arg->kind == KILN_ARG_WORKSPACE ? s->workspace
                    : arg->kind == KILN_ARG_CONST   ? s->consts[arg->index]
                    : arg->kind == KILN_ARG_INPUT   ? s->io[arg->index]
                                                    : s->io[a->n_inputs + arg->index];
      values[i] = base + (cu_ptr)arg->offset;
      params[i] = &values[i];
    }
    params[step->n_args] = &batch_arg;
    const int64_t *grid = &s->grid[3 * st];
    if (grid[0] < 0 || grid[1] < 0 || grid[2] < 0 || grid[0] > INT32_MAX || grid[1] > 65535 || grid[2] > 65535) {
      set_error("step %d (%s): grid %lld x %lld x %lld at batch %lld is outside CUDA's limits", st, step->name,
                (long long)grid[0], (long long)grid[1], (long long)grid[2], (long long)batch);
      return KILN_ERR_DEVICE;
    }
    if (grid[0] && grid[1] && grid[2]) /* an empty grid has nothing to do */
      CHECK(drv.LaunchKernel(s->fns[st], (unsigned)grid[0], (unsigned)grid[1], (unsigned)grid[2],
                             (unsigned)l->block[0], (unsigned)l->block[1], (unsigned)l->block[2],
                             (unsigned)l->shared_bytes, stream, params, NULL),
            step->name);
    if (events) CHECK(drv.EventRecord(s->events[st + 1], stream), "cuEventRecord");
    if (a->abi_minor >= 2 && step->check) {
      unsigned char ok = 0;
      CHECK(drv.MemcpyDtoHAsync(&ok, values[0], 1, stream), "cuMemcpyDtoHAsync (check)");
      CHECK(drv.StreamSynchronize(stream), step->name);
      if (!ok && step->check == KILN_CHECK_INDEX) {
        set_error("step %d (%s): a gather or scatter index is out of range", st, step->name);
        return KILN_ERR_INDEX;
      }
      if (!ok) {
        set_error("step %d (%s): an input value contradicts the shapes the model was compiled for", st, step->name);
        return KILN_ERR_VALUE;
      }
    }
  }
  for (int i = a->n_inputs; i < n_io; i++)
    if (s->io[i] == s->staging[i])
      CHECK(drv.MemcpyDtoHAsync(outputs[i - a->n_inputs], s->io[i],
                                (size_t)tensor_bytes(io_desc(a, i), g->elem_bytes[i], batch), stream),
            "cuMemcpyDtoHAsync (outputs)");
  CHECK(drv.StreamSynchronize(stream), "cuStreamSynchronize (the run)");
  for (int st = 0; events && st < a->n_steps; st++) {
    float begin = 0, end = 0;
    CHECK(drv.EventElapsedTime(&begin, s->events[0], s->events[st]), "cuEventElapsedTime");
    CHECK(drv.EventElapsedTime(&end, s->events[0], s->events[st + 1]), "cuEventElapsedTime");
    events[st] = (kiln_prof_event){.step = st, .task = -1, .thread = 0, .ntasks = 1,
                                   .begin_ns = t0 + (int64_t)((double)begin * 1e6),
                                   .end_ns = t0 + (int64_t)((double)end * 1e6)};
  }
  return KILN_OK;
fail:
  return KILN_ERR_DEVICE;
}

/* Creates the profiling events once. */
static int make_events(gpu_state *s, const kiln_artifact *a) {
  if (s->events) return 0;
  cu_event *ev = calloc((size_t)a->n_steps + 1, sizeof *ev);
  if (!ev) {
    set_error("out of host memory");
    return -1;
  }
  for (int i = 0; i <= a->n_steps; i++) {
    cu_result r = drv.EventCreate(&ev[i], 0);
    if (r != CU_SUCCESS) {
      set_error("cuEventCreate failed: %s (%d)", error_name(r), r);
      while (i-- > 0) drv.EventDestroy(ev[i]);
      free(ev);
      return -1;
    }
  }
  s->events = ev;
  return 0;
}

static int execute(const kiln_artifact *a, const void *const *inputs, void *const *outputs, int64_t batch,
                   kiln_prof_event *events) {
  clear_error();
  if (!a || !a->gpu) {
    set_error("not a GPU artifact");
    return KILN_ERR_ARG;
  }
  if (batch < 1 || batch > a->max_batch) {
    set_error("batch %lld is outside [1, %lld]", (long long)batch, (long long)a->max_batch);
    return KILN_ERR_BATCH;
  }
  if ((a->n_inputs > 0 && !inputs) || (a->n_outputs > 0 && !outputs)) {
    set_error("NULL inputs or outputs array");
    return KILN_ERR_ARG;
  }
  for (int i = 0; i < a->n_inputs + a->n_outputs; i++)
    if (!(i < a->n_inputs ? inputs[i] : outputs[i - a->n_inputs])) {
      set_error("%s %d is NULL", i < a->n_inputs ? "input" : "output", i < a->n_inputs ? i : i - a->n_inputs);
      return KILN_ERR_ARG;
    }
  for (int st = 0; st < a->n_steps; st++)
    if (a->steps[st].n_args < (a->steps[st].check ? 1 : 0) || a->steps[st].n_args > KN_RT_MAX_ARGS) {
      set_error("step %d has %d arguments", st, a->steps[st].n_args);
      return KILN_ERR_ARG;
    }
  pthread_once(&drv_once, driver_load);
  if (drv.status != CU_SUCCESS) {
    set_error("%s", drv.error);
    return KILN_ERR_DEVICE;
  }
  gpu_state *s = &state;
  pthread_mutex_lock(&s->lock);
  int status = KILN_ERR_DEVICE;
  cu_context popped;
  if (!s->ctx) CHECK(drv.DevicePrimaryCtxRetain(&s->ctx, drv.device), "cuDevicePrimaryCtxRetain");
  CHECK(drv.CtxPushCurrent(s->ctx), "cuCtxPushCurrent");
  if ((s->ready || state_setup(s, a) == 0) && (!events || make_events(s, a) == 0)) {
    s->ready = true;
    status = run_steps(s, a, inputs, outputs, batch, events);
  }
  drv.CtxPopCurrent(&popped);
fail:
  pthread_mutex_unlock(&s->lock);
  return status;
}

int kn_rt_cuda_execute(const kiln_artifact *a, const void *const *inputs, void *const *outputs, void *workspace,
                       int64_t batch) {
  (void)workspace;
  return execute(a, inputs, outputs, batch, NULL);
}

int kn_rt_cuda_execute_profiled(const kiln_artifact *a, const void *const *inputs, void *const *outputs,
                                void *workspace, int64_t batch, kiln_prof_event *events, int64_t capacity,
                                int64_t *n_events) {
  (void)workspace;
  clear_error();
  if (!a || !n_events || (!events && capacity > 0)) {
    set_error("NULL descriptor, n_events or events");
    return KILN_ERR_ARG;
  }
  *n_events = a->n_steps;
  if (capacity < a->n_steps) {
    set_error("%d events needed, the buffer holds %lld", a->n_steps, (long long)capacity);
    return KILN_ERR_CAPACITY;
  }
  int status = execute(a, inputs, outputs, batch, events);
  if (status != KILN_OK) *n_events = 0;
  return status;
}

int kn_rt_cuda_set_threads(int n) { return n < 1 || n > KN_RT_MAX_THREADS ? KILN_ERR_THREADS : KILN_OK; }

int kn_rt_cuda_set_stream(void *stream) {
  pthread_mutex_lock(&state.lock);
  state.stream = stream;
  pthread_mutex_unlock(&state.lock);
  return KILN_OK;
}

const char *kn_rt_cuda_last_error(void) {
  const char *buf = error_buffer(false);
  return buf ? buf : "";
}

/* dlclose: the host side of the state goes. The device side (memory,
 * module, events) is left to the context: at process exit the driver may
 * already be finalised, and calling it then is not safe. */
__attribute__((destructor)) static void state_drop(void) {
  free(state.fns);
  free(state.consts);
  free(state.staging);
  free(state.io);
  free(state.grid);
  free(state.events);
  if (error_key_made) { /* this thread's message; other threads' stay allocated */
    free(pthread_getspecific(error_key));
    pthread_key_delete(error_key);
  }
}
