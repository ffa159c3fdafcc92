/* kiln/artifact.h — the artifact ABI: what every Kiln-compiled .so / .o
 * exports, and what a generic loader reads. Stable across models; bump
 * KILN_ABI_VERSION on any change of layout or meaning.
 *
 * An artifact exports, for its prefix P (default "model"):
 *   const kiln_artifact P_artifact;          the descriptor below
 *   int P_run(const void *const *inputs, void *const *outputs,
 *             void *workspace, int64_t batch);
 *   int P_set_threads(int n);
 *   int P_run_profiled(const void *const *inputs, void *const *outputs,
 *                      void *workspace, int64_t batch, kiln_prof_event *events,
 *                      int64_t capacity, int64_t *n_events);   (ABI 1.1)
 * and, in a .so only, the well-known alias `kiln_artifact_v1` (the same
 * descriptor) so that a loader can dlopen any artifact without knowing P.
 *
 * Workspace contract: the caller passes `workspace_size` bytes aligned to
 * `workspace_align`; the artifact never allocates while running. Inputs and
 * outputs are dense row-major buffers of the declared dtype; a dim whose bit is
 * set in batch_mask is `dims[i] * batch`, with 1 <= batch <= max_batch.
 *
 * Thread safety: P_run may be called concurrently only with distinct
 * workspaces; calls share one thread pool and are serialised on it.
 *
 * Versions: KILN_ABI_VERSION changes when a layout or meaning changes (a
 * loader refuses other versions); KILN_ABI_MINOR counts additions that old
 * readers may ignore (fields appended to kiln_artifact, new entry points).
 * kiln_artifact.abi_minor says which additions an artifact has:
 *   0  the original layout, up to set_threads;
 *   1  run_profiled / P_run_profiled and kiln_prof_event (per-kernel timing);
 *   2  kiln_step.check and KILN_ERR_VALUE (run-time checks of input values);
 *   3  kiln_artifact.n_pipes / pipes (row-pipelined pairs of steps);
 *   4  KILN_ERR_DEVICE, kiln_artifact.last_error / P_last_error, and GPU
 *      artifacts: kiln_artifact.gpu, kiln_gpu, P_set_stream (docs/abi.md).
 *      CPU artifacts still say 3: they carry none of these fields;
 *   5  kiln_step.check = KILN_CHECK_INDEX and KILN_ERR_INDEX (`kiln compile
 *      --check-indices`). Only artifacts with such a step say 5; CPU ones
 *      then carry the 1.4 fields too, last_error and gpu NULL. */
#ifndef KILN_ARTIFACT_H
#define KILN_ARTIFACT_H

#include <stdint.h>

#define KILN_ABI_VERSION 1
#define KILN_ABI_MINOR 5

/* Status codes returned by P_run and P_set_threads. */
enum {
  KILN_OK = 0,
  KILN_ERR_BATCH = 1,   /* batch outside [1, max_batch] */
  KILN_ERR_ARG = 2,     /* a NULL pointer or misaligned workspace */
  KILN_ERR_THREADS = 3, /* thread count outside [1, 256] or threads failed to start */
  KILN_ERR_CAPACITY = 4, /* P_run_profiled: the event buffer is too small (nothing ran) */
  KILN_ERR_VALUE = 5,    /* an input's value contradicts the shapes the artifact was compiled for
                            (ABI 1.2; no output written) */
  KILN_ERR_DEVICE = 6,   /* ABI 1.4, GPU artifacts: no driver, no GPU, no image for it, or a
                            CUDA error; P_last_error() says which in one line */
  KILN_ERR_INDEX = 7,    /* ABI 1.5, artifacts compiled with --check-indices: a gather or scatter
                            index read at run time is out of range (no output written) */
};

/* kiln_step.check: what a check step checks, so which status stops the run. */
enum {
  KILN_CHECK_VALUE = 1, /* ABI 1.2: input values vs the compiled shapes: KILN_ERR_VALUE */
  KILN_CHECK_INDEX = 2, /* ABI 1.5: gather / scatter indices in range: KILN_ERR_INDEX */
};

/* Element types use ONNX TensorProto.DataType codes (1 = float32, 7 = int64...). */
typedef struct kiln_tensor_desc {
  const char *name;
  int32_t dtype;
  int32_t rank;
  const int64_t *dims; /* per-batch-unit dims: multiply masked dims by batch */
  uint32_t batch_mask;
} kiln_tensor_desc;

typedef void (*kiln_kernel_fn)(void *const *args, int64_t batch, int64_t task, int64_t ntasks);

/* Where a kernel argument lives. */
enum {
  KILN_ARG_WORKSPACE = 0, /* workspace + offset */
  KILN_ARG_CONST = 1,     /* consts[index] (+ offset) */
  KILN_ARG_INPUT = 2,     /* inputs[index] (+ offset) */
  KILN_ARG_OUTPUT = 3,    /* outputs[index] (+ offset) */
};

typedef struct kiln_arg {
  int32_t kind;
  int32_t index;
  int64_t offset; /* bytes */
} kiln_arg;

typedef struct kiln_step {
  kiln_kernel_fn fn;
  const char *name;  /* kernel symbol */
  const char *nodes; /* ONNX nodes fused into this kernel, comma separated */
  int32_t n_args;
  int32_t first_arg; /* index into kiln_artifact.args */
  int32_t parallel;  /* 1: call once per task on the pool; 0: once */
  int32_t check;    /* ABI 1.2: non-zero = the step computes a bool scalar into its first argument,
                       and P_run stops when it is false, with KILN_ERR_VALUE (KILN_CHECK_VALUE)
                       or KILN_ERR_INDEX (KILN_CHECK_INDEX, ABI 1.5); 0 before 1.2 */
  double flops; /* per batch unit */
} kiln_step;

/* One timed interval of P_run_profiled (ABI 1.1). Per step, one event with
 * task == -1: the whole step as the calling thread saw it (for a parallel step:
 * publishing it to the pool, running task 0, waiting for the others); then,
 * for a step that ran on the pool, one event per task on the thread that ran
 * it (task i runs on pool thread i; thread 0 is the calling thread). Times are
 * CLOCK_MONOTONIC nanoseconds. */
typedef struct kiln_prof_event {
  int32_t step;   /* index into kiln_artifact.steps */
  int32_t task;   /* -1: the whole step; else the task index, 0 <= task < ntasks */
  int32_t thread; /* pool thread: 0 = the caller of P_run_profiled, 1.. = workers */
  int32_t ntasks; /* tasks the step was split into (1: ran on the caller alone) */
  int64_t begin_ns, end_ns;
} kiln_prof_event;

/* Events P_run_profiled may write for n_steps steps on a pool of `threads`
 * threads: a sufficient `capacity`. */
#define KILN_PROF_EVENTS(n_steps, threads) ((int64_t)(n_steps) * (1 + (int64_t)(threads)))

typedef int (*kiln_run_profiled_fn)(const void *const *inputs, void *const *outputs,
                                    void *workspace, int64_t batch, kiln_prof_event *events,
                                    int64_t capacity, int64_t *n_events);

/* ABI 1.3: steps `first` and `first + 1` run as one row-pipelined pair. Both
 * kernels' parallel loops run one output row per task when called with
 * ntasks = samples x rows (task t: row t % rows of sample t / rows; samples =
 * batch when `batched`, else 1), and row r of the second's output reads rows
 * [r * stride - pad, r * stride - pad + window) of the first's (clamped to
 * the image), which nothing else reads. Each pool thread takes a contiguous
 * share of the second's rows and runs them `band` at a time, each band after
 * the first's rows it needs (rows shared by two threads' shares are computed
 * by both, with the same values), so that the intermediate is read back
 * while still in that core's cache. Both steps' inputs stay live across the
 * pair in the memory plan. Running the two steps one after the other, in the
 * usual way, gives the same result. */
typedef struct kiln_pipe {
  int32_t first;
  int32_t batched;
  int32_t rows1, rows2; /* output rows (axis 1) of the two steps, per sample */
  int32_t stride, pad, window;
  int32_t band;
} kiln_pipe;

/* ABI 1.4: one code image of a GPU artifact: a cubin for exactly one
 * compute capability (sm 80 = 8.0), or PTX text that the driver compiles
 * for compute capability sm and newer. */
typedef struct kiln_gpu_image {
  int32_t sm;
  int32_t ptx;      /* 1: PTX (NUL terminated; size without the NUL); 0: cubin */
  const void *data;
  int64_t size;     /* bytes */
} kiln_gpu_image;

/* ABI 1.4: how a GPU artifact launches step s (kiln_gpu.launches[s]): the
 * kernel steps[s].name from the image, `block` threads, `shared_bytes` of
 * dynamic shared memory, on a grid that grid(args, batch, 0, 1) writes into
 * the int64_t array args[0] (3 per step: x, y, z). Kernel parameters: one
 * device pointer per kiln_arg of the step, in order, then the batch as a
 * long long. */
typedef struct kiln_gpu_launch {
  int32_t block[3];
  int32_t shared_bytes;
} kiln_gpu_launch;

/* ABI 1.4: the device side of a GPU artifact (kiln_artifact.gpu). Its steps
 * have fn == NULL; the descriptor's workspace_size is 0 (the workspace lives
 * on the device, `workspace_size` bytes allocated on the first run). */
typedef struct kiln_gpu {
  int32_t n_images;
  const kiln_gpu_image *images; /* cubins by ascending sm, then the PTX */
  const kiln_gpu_launch *launches; /* n_steps */
  kiln_kernel_fn grid;             /* writes 3 * n_steps grid sizes for a batch */
  int64_t workspace_size;          /* device bytes, for max_batch */
  const int32_t *elem_bytes;       /* bytes per element of inputs then outputs */
  const int64_t *const_bytes;      /* bytes of each of the n_consts weights */
  int (*set_stream)(void *stream); /* == P_set_stream: a CUstream, NULL: the default */
} kiln_gpu;

typedef struct kiln_artifact {
  uint32_t abi_version;
  uint32_t abi_minor; /* additions present: read fields past set_threads only if >= 1 */
  const char *prefix;
  const char *kiln_version;
  const char *target;
  int32_t n_inputs, n_outputs;
  const kiln_tensor_desc *inputs;
  const kiln_tensor_desc *outputs;
  int64_t workspace_size; /* bytes, for max_batch */
  int64_t workspace_align;
  int64_t max_batch;
  int32_t n_steps, n_consts;
  const kiln_step *steps;
  const kiln_arg *args;
  const void *const *consts;
  int (*run)(const void *const *inputs, void *const *outputs, void *workspace, int64_t batch);
  int (*set_threads)(int n);
  /* abi_minor >= 1 */
  kiln_run_profiled_fn run_profiled; /* == P_run_profiled */
  /* abi_minor >= 3 */
  int32_t n_pipes;
  const kiln_pipe *pipes; /* by ascending `first`; no step is in two */
  /* abi_minor >= 4 */
  const char *(*last_error)(void); /* == P_last_error */
  const struct kiln_gpu *gpu;      /* NULL: a CPU artifact */
} kiln_artifact;

#endif
