/* gpu_verify.c — the structural checks a GPU kernel must pass before codegen
 * (kn_loop_verify_gpu, gpu_eval.h).
 *
 * The body must be BLOCK loops (each dimension at most once), then SHARED
 * allocs, then THREAD loops (each dimension at most once, constant extents),
 * then the code every thread runs; BLOCK and THREAD loops, SHARED allocs and
 * GPU statements appear nowhere else, and no PARALLEL loop at all (the
 * CPU runtime's task split has no meaning on a GPU). Barriers, MMAs and
 * ldmatrix must be reached by every thread of the block or warp, so none
 * may sit under a condition or inside a loop whose bounds depend on the
 * thread: on a thread
 * variable, on a variable bound from one, or on a thread-private (LOCAL)
 * value. The check is syntactic, hence conservative: a condition that
 * mentions a thread variable but holds for all threads is rejected all the
 * same. */
#include "ir/loop/gpu_eval.h"

#include <stdlib.h>

typedef struct vctx {
  const kn_kernel *k;
  kn_diag *d;
  int nthreads;
  const kn_var **deps; /* variables whose value may differ between threads */
  int ndeps, cap;
} vctx;

static const char *const loop_kinds[] = {"serial", "parallel", "vectorized", "unrolled", "BLOCK", "THREAD"};

static const char *gpu_op_name(kn_gpu_op op) {
  switch (op) {
  case KN_GPU_BARRIER: return "barrier";
  case KN_GPU_MMA: return "mma";
  case KN_GPU_CP_ASYNC: return "cp.async";
  case KN_GPU_CP_COMMIT: return "cp.async commit";
  case KN_GPU_CP_WAIT: return "cp.async wait";
  case KN_GPU_LDMATRIX: return "ldmatrix";
  }
  return "GPU statement";
}

/* The first KN_S_GPU statement in s not under a THREAD loop, or NULL. */
static const kn_stmt *gpu_outside_threads(const kn_stmt *s) {
  if (!s) return NULL;
  switch (s->kind) {
  case KN_S_FOR: return s->u.loop.kind == KN_FOR_THREAD ? NULL : gpu_outside_threads(s->u.loop.body);
  case KN_S_ALLOC: return gpu_outside_threads(s->u.alloc.body);
  case KN_S_LET: return gpu_outside_threads(s->u.let.body);
  case KN_S_IF: {
    const kn_stmt *g = gpu_outside_threads(s->u.ifs.then_s);
    return g ? g : gpu_outside_threads(s->u.ifs.else_s);
  }
  case KN_S_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) {
      const kn_stmt *g = gpu_outside_threads(s->u.seq.stmts[i]);
      if (g) return g;
    }
    return NULL;
  case KN_S_GPU: return s;
  default: return NULL;
  }
}

/* s appears where the kernel shape wants `expected`. */
static int misplaced(vctx *v, const kn_stmt *s, const char *expected) {
  const kn_stmt *g = gpu_outside_threads(s);
  if (g) return kn_diag_error(v->d, "kernel '%s': %s outside the THREAD loops", v->k->name, gpu_op_name(g->u.gpu.op));
  const char *found = "nothing";
  if (s) {
    static const char *const kinds[] = {"a loop", "a store", "an alloc",   "a sequence",
                                        "an if",  "a let",   "a prefetch", ""};
    found = s->kind == KN_S_FOR ? loop_kinds[s->u.loop.kind] : kinds[s->kind];
  }
  if (s && s->kind == KN_S_FOR)
    return kn_diag_error(v->d, "kernel '%s': expected %s, found a %s loop '%s'", v->k->name, expected, found,
                         s->u.loop.var->name);
  return kn_diag_error(v->d, "kernel '%s': expected %s, found %s", v->k->name, expected, found);
}

static void push_dep(vctx *v, const kn_var *var) {
  if (v->ndeps == v->cap) {
    v->cap = v->cap ? 2 * v->cap : 16;
    v->deps = realloc(v->deps, sizeof *v->deps * (size_t)v->cap);
    KN_ASSERT(v->deps, "out of memory");
  }
  v->deps[v->ndeps++] = var;
}

/* May e differ between the threads of a block? */
static bool thread_dependent(const vctx *v, const kn_expr *e) {
  switch (e->kind) {
  case KN_E_INT:
  case KN_E_FLOAT: return false;
  case KN_E_VAR:
    for (int i = 0; i < v->ndeps; i++)
      if (v->deps[i] == e->u.var) return true;
    return false;
  case KN_E_LOAD: return e->u.load.buffer->kind == KN_BUF_LOCAL || thread_dependent(v, e->u.load.index);
  case KN_E_NOT:
  case KN_E_CAST:
  case KN_E_BROADCAST: return thread_dependent(v, e->u.un.a);
  case KN_E_RAMP: return thread_dependent(v, e->u.ramp.base) || thread_dependent(v, e->u.ramp.stride);
  case KN_E_SELECT:
    return thread_dependent(v, e->u.sel.cond) || thread_dependent(v, e->u.sel.t) || thread_dependent(v, e->u.sel.f);
  case KN_E_CALL:
    for (int i = 0; i < e->u.call.n; i++)
      if (thread_dependent(v, e->u.call.args[i])) return true;
    return false;
  case KN_E_REDUCE: return true;
  default: return thread_dependent(v, e->u.bin.a) || thread_dependent(v, e->u.bin.b);
  }
}

static int check_gpu_stmt(vctx *v, const kn_stmt *s, const char *divergent) {
  kn_gpu_op op = s->u.gpu.op;
  bool warp = op == KN_GPU_MMA || op == KN_GPU_LDMATRIX;
  if (op != KN_GPU_BARRIER && !warp) return 0;
  if (divergent)
    return kn_diag_error(v->d, "kernel '%s': %s under %s: not every thread reaches it", v->k->name, gpu_op_name(op),
                         divergent);
  if (warp && v->nthreads % 32)
    return kn_diag_error(v->d, "kernel '%s': %s in a block of %d threads, not a multiple of 32", v->k->name,
                         gpu_op_name(op), v->nthreads);
  return 0;
}

/* The code under the THREAD loops; divergent: why not every thread may get
 * here (NULL: all do). */
static int check_thread_body(vctx *v, const kn_stmt *s, const char *divergent) {
  if (!s) return 0;
  int mark = v->ndeps, rc = 0;
  switch (s->kind) {
  case KN_S_FOR:
    if (s->u.loop.kind == KN_FOR_BLOCK || s->u.loop.kind == KN_FOR_THREAD || s->u.loop.kind == KN_FOR_PARALLEL)
      return kn_diag_error(v->d, "kernel '%s': %s loop '%s' inside the THREAD loops", v->k->name,
                           loop_kinds[s->u.loop.kind], s->u.loop.var->name);
    if (thread_dependent(v, s->u.loop.min) || thread_dependent(v, s->u.loop.extent)) {
      push_dep(v, s->u.loop.var);
      if (!divergent) divergent = "a loop whose bounds depend on the thread";
    }
    rc = check_thread_body(v, s->u.loop.body, divergent);
    break;
  case KN_S_IF:
    if (!divergent && thread_dependent(v, s->u.ifs.cond)) divergent = "a condition that depends on the thread";
    rc = check_thread_body(v, s->u.ifs.then_s, divergent) || check_thread_body(v, s->u.ifs.else_s, divergent) ? -1 : 0;
    break;
  case KN_S_LET:
    if (thread_dependent(v, s->u.let.value)) push_dep(v, s->u.let.var);
    rc = check_thread_body(v, s->u.let.body, divergent);
    break;
  case KN_S_ALLOC:
    if (s->u.alloc.buffer->kind == KN_BUF_SHARED)
      return kn_diag_error(v->d, "kernel '%s': shared buffer '%s' allocated inside the THREAD loops", v->k->name,
                           s->u.alloc.buffer->name);
    rc = check_thread_body(v, s->u.alloc.body, divergent);
    break;
  case KN_S_SEQ:
    for (int i = 0; i < s->u.seq.n && !rc; i++) rc = check_thread_body(v, s->u.seq.stmts[i], divergent);
    break;
  case KN_S_GPU: return check_gpu_stmt(v, s, divergent);
  case KN_S_STORE:
  case KN_S_PREFETCH: return 0;
  }
  v->ndeps = mark;
  return rc;
}

/* The GPU loop at s: dimension not used before, starting at 0. */
static int check_gpu_loop(vctx *v, const kn_stmt *s, bool used[3]) {
  int64_t lo;
  const char *kind = loop_kinds[s->u.loop.kind];
  if (used[s->u.loop.dim])
    return kn_diag_error(v->d, "kernel '%s': two %s loops over dimension %c", v->k->name, kind, "xyz"[s->u.loop.dim]);
  used[s->u.loop.dim] = true;
  if (!kn_e_is_const_int(s->u.loop.min, &lo) || lo != 0)
    return kn_diag_error(v->d, "kernel '%s': %s loop '%s' does not start at 0", v->k->name, kind, s->u.loop.var->name);
  return 0;
}

/* The THREAD loops at *s (advanced past them): constant extents, their
 * product within the limit. */
static int check_thread_loops(vctx *v, const kn_stmt **s, const kn_gpu_limits *limits) {
  bool used[3] = {false, false, false};
  int64_t threads = 1;
  if (!*s || (*s)->kind != KN_S_FOR || (*s)->u.loop.kind != KN_FOR_THREAD)
    return misplaced(v, *s, "THREAD loops after the BLOCK loops and SHARED allocs");
  for (; *s && (*s)->kind == KN_S_FOR && (*s)->u.loop.kind == KN_FOR_THREAD; *s = (*s)->u.loop.body) {
    int64_t ext;
    if (check_gpu_loop(v, *s, used)) return -1;
    if (!kn_e_is_const_int((*s)->u.loop.extent, &ext) || ext < 1)
      return kn_diag_error(v->d, "kernel '%s': THREAD loop '%s' needs a constant extent of at least 1", v->k->name,
                           (*s)->u.loop.var->name);
    if (ext > limits->max_threads || threads * ext > limits->max_threads) /* each factor bounded: no overflow */
      return kn_diag_error(v->d, "kernel '%s': more than %d threads in a block (THREAD loop '%s')", v->k->name,
                           limits->max_threads, (*s)->u.loop.var->name);
    threads *= ext;
    push_dep(v, (*s)->u.loop.var);
  }
  v->nthreads = (int)threads;
  return 0;
}

static int verify(vctx *v, const kn_gpu_limits *limits) {
  const kn_stmt *s = v->k->body;
  bool used[3] = {false, false, false};
  for (; s && s->kind == KN_S_FOR && s->u.loop.kind == KN_FOR_BLOCK; s = s->u.loop.body)
    if (check_gpu_loop(v, s, used)) return -1;
  int64_t shared_bytes = 0;
  for (; s && s->kind == KN_S_ALLOC; s = s->u.alloc.body) {
    const kn_buffer *b = s->u.alloc.buffer;
    if (b->kind != KN_BUF_SHARED)
      return kn_diag_error(v->d, "kernel '%s': local buffer '%s' allocated outside the THREAD loops", v->k->name,
                           b->name);
    if (b->size <= 0) return kn_diag_error(v->d, "kernel '%s': shared buffer '%s' has no size", v->k->name, b->name);
    if (b->size > limits->max_shared_bytes) /* also keeps the sum below from overflowing */
      return kn_diag_error(v->d, "kernel '%s': shared buffer '%s' alone takes more than the %lld bytes allowed",
                           v->k->name, b->name, (long long)limits->max_shared_bytes);
    shared_bytes += b->size * (int64_t)kn_dtype_size(b->dtype);
  }
  if (shared_bytes > limits->max_shared_bytes)
    return kn_diag_error(v->d, "kernel '%s': shared buffers take %lld bytes, more than the %lld allowed", v->k->name,
                         (long long)shared_bytes, (long long)limits->max_shared_bytes);
  if (check_thread_loops(v, &s, limits)) return -1;
  return check_thread_body(v, s, NULL);
}

int kn_loop_verify_gpu(const kn_kernel *k, const kn_gpu_limits *limits, kn_diag *d) {
  KN_ASSERT(limits, "kn_loop_verify_gpu needs the device limits");
  if (!k->gpu) return kn_diag_error(d, "kernel '%s': not a GPU kernel", k->name);
  vctx v = {.k = k, .d = d};
  int rc = verify(&v, limits);
  free(v.deps);
  return rc;
}
