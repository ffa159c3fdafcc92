/* gpu_eval.c — runs a GPU kernel of the loop IR on the host with CUDA's
 * semantics, and reports what real hardware would get wrong or undefined.
 *
 * Requires the kernel shape of loop.h (BLOCK loops, SHARED allocs, THREAD
 * loops); anything else is a diagnostic, never an abort. The blocks run one
 * after another. Inside a block all threads advance in lockstep, statement by
 * statement: each statement runs for every active thread in turn, an IF
 * splits the active set, a loop runs iteration i for the threads whose trip
 * count exceeds i. So a barrier or an MMA knows exactly which threads reached
 * it, and must see the whole block or the whole warp (MMA, ldmatrix).
 *
 * Every SHARED element is shadowed by its last writer and reader and the
 * barrier epoch of those accesses: a thread touching, since the last barrier,
 * an element another thread wrote (or writing one another thread read) is a
 * race, because between two barriers the threads may run in any order. A
 * cp.async destination is poisoned until its thread waits for the group;
 * the wait counts as that thread's write, so other threads need a barrier
 * after it too. Shared memory and registers (LOCAL buffers, per thread)
 * start as garbage on a GPU: reading an element nobody wrote is an error.
 * Every index must lie inside its buffer (a parameter's when its size is
 * known), and every ldmatrix row 16-byte aligned (shared buffers are, so
 * that is its index's). Values follow ir/loop/eval_value.h; the MMA
 * multiplies exact f16 / bf16 inputs and accumulates in f32, in k order.
 * Vector lets are not supported (a diagnostic); vector loads and stores
 * are, lane by lane. */
#include "ir/loop/gpu_eval.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/loop/eval_value.h"
#include "ir/loop/mma.h"

/* What CUDA allows a block: threads, and local memory per thread; shared
 * memory is capped above every GPU's per-block maximum (the verifier holds
 * kernels to the target's), so that a wrong size is a diagnostic, not a
 * huge allocation. */
enum { MAX_THREADS = 1024, WARP = 32 };
#define MAX_LOCAL_BYTES ((int64_t)512 * 1024)
#define MAX_SHARED_BYTES ((int64_t)256 * 1024)

/* The access history of one SHARED element. Threads are stored as id + 1
 * so that a zeroed shadow means "never touched". */
typedef struct shadow {
  int32_t writer, reader; /* last writer; first reader in read_epoch */
  uint32_t write_epoch, read_epoch;
  bool written;      /* holds a value (else reading it is reading garbage) */
  bool many_readers; /* several threads read it in read_epoch */
  bool async;        /* last written by a cp.async */
  bool pending;      /* a cp.async to it is in flight: poisoned until the wait */
} shadow;

/* A cp.async element copy not yet waited for. */
typedef struct pending_copy {
  shadow *elem;
  int thread;
  int64_t group;
} pending_copy;

/* One thread's cp.async groups: those below done_below are complete, the
 * ones from done_below to open_group - 1 committed and in flight, open_group
 * is still collecting copies. */
typedef struct cp_groups {
  int64_t open_group, done_below;
} cp_groups;

typedef struct scalar {
  int64_t i;
  double f;
} scalar;

typedef struct binding {
  const void *key; /* kn_var* or kn_buffer* */
  bool per_thread; /* one value (or buffer copy) per thread, else one for all */
  scalar *vals;    /* variables: [thread] or [0] */
  bool is_float;   /* a let of a float value */
  char *mem;       /* LOCAL / SHARED buffers */
  int64_t stride;  /* bytes between the threads' copies of a per-thread buffer */
  shadow *shadow;  /* SHARED */
  uint8_t *init;   /* LOCAL: which elements each thread has written */
} binding;

/* A buffer as the current thread sees it. */
typedef struct view {
  const kn_buffer *buf;
  char *mem;
  shadow *shadow; /* SHARED, else NULL */
  uint8_t *init;  /* LOCAL, else NULL */
} view;

/* The threads running a statement, in thread order. */
typedef struct tset {
  int n;
  int *ids;
} tset;

typedef struct gpu_ev {
  const kn_kernel *k;
  void *const *args;
  int64_t batch;
  kn_diag *d;
  binding *b;
  int n, cap;
  int nthreads;   /* threads of a block; 0 outside the THREAD loops */
  int thread;     /* the thread evaluating now */
  uint32_t epoch; /* barrier epoch, never reused in a run */
  cp_groups *cp;  /* [thread] */
  pending_copy *pend;
  int npend, cap_pend;
  const kn_stmt *stmt; /* the statement running, for diagnostics */
} gpu_ev;

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  KN_ASSERT(p, "out of memory");
  return p;
}

/* The first line of s as kn_stmt_print writes it, without indentation. */
static void stmt_line(const kn_stmt *s, char *out, size_t cap) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  KN_ASSERT(f, "out of memory");
  kn_stmt_print(s, f, 0);
  fclose(f);
  char *nl = strchr(text, '\n');
  if (nl) *nl = '\0';
  snprintf(out, cap, "%s", text);
  free(text);
}

/* Appends "kernel 'name': <message> at: <statement>" and returns -1. */
static int fail(gpu_ev *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(gpu_ev *e, const char *fmt, ...) {
  char msg[512], at[512] = "";
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (e->stmt) stmt_line(e->stmt, at, sizeof at);
  return kn_diag_error(e->d, "kernel '%s': %s%s%s", e->k->name, msg, e->stmt ? " at: " : "", at);
}

/* ---- bindings ---- */

static int lookup(gpu_ev *e, const void *key) {
  for (int i = e->n - 1; i >= 0; i--)
    if (e->b[i].key == key) return i;
  return -1;
}

static binding *push(gpu_ev *e, const void *key) {
  if (e->n == e->cap) {
    e->cap = e->cap ? e->cap * 2 : 32;
    e->b = realloc(e->b, sizeof(binding) * (size_t)e->cap);
    KN_ASSERT(e->b, "out of memory");
  }
  binding *b = &e->b[e->n++];
  memset(b, 0, sizeof *b);
  b->key = key;
  return b;
}

/* A variable with one value per thread (inside the THREAD loops) or one. */
static scalar *push_var(gpu_ev *e, const kn_var *v) {
  binding *b = push(e, v);
  b->per_thread = e->nthreads > 0;
  b->vals = xcalloc((size_t)(b->per_thread ? e->nthreads : 1), sizeof(scalar));
  return b->vals;
}

static void pop_to(gpu_ev *e, int mark) {
  while (e->n > mark) {
    binding *b = &e->b[--e->n];
    free(b->vals);
    free(b->mem);
    free(b->shadow);
    free(b->init);
  }
}

/* ---- memory ---- */

/* The memory of buf as the current thread sees it, with its checks. */
static int buffer_of(gpu_ev *e, const kn_buffer *buf, view *v) {
  *v = (view){.buf = buf};
  for (int p = 0; p < e->k->n_params; p++)
    if (e->k->params[p] == buf) {
      v->mem = e->args[p];
      return 0;
    }
  int i = lookup(e, buf);
  if (i < 0) return fail(e, "buffer '%s' used outside its allocation", buf->name);
  binding *b = &e->b[i];
  int64_t t = b->per_thread ? e->thread : 0;
  v->mem = b->mem + t * b->stride;
  v->shadow = b->shadow;
  v->init = b->init ? b->init + t * buf->size : NULL;
  return 0;
}

static const char *kind_name(const kn_buffer *b) {
  return b->kind == KN_BUF_PARAM ? "param" : b->kind == KN_BUF_LOCAL ? "local" : "shared";
}

/* Index i must lie inside buf (a parameter of unknown size: at least >= 0). */
static int check_index(gpu_ev *e, const kn_buffer *buf, int64_t i) {
  if (i >= 0 && (buf->size <= 0 || i < buf->size)) return 0;
  return fail(e, "index %lld outside %s '%s' of %lld elements (thread %d)", (long long)i, kind_name(buf), buf->name,
              (long long)buf->size, e->thread);
}

/* The current thread reads element i of SHARED buffer buf. */
static int shared_read(gpu_ev *e, const kn_buffer *buf, shadow *sh, int64_t i) {
  shadow *x = &sh[i];
  int self = e->thread + 1;
  if (x->pending)
    return fail(e, "read before cp.async wait: shared '%s'[%lld] read by thread %d while thread %d's copy is in flight",
                buf->name, (long long)i, e->thread, x->writer - 1);
  if (!x->written)
    return fail(e, "read of uninitialised shared '%s'[%lld] by thread %d", buf->name, (long long)i, e->thread);
  if (x->writer != self && x->write_epoch == e->epoch)
    return fail(e, "race on shared '%s'[%lld]: thread %d reads what thread %d wrote%s since the last barrier",
                buf->name, (long long)i, e->thread, x->writer - 1, x->async ? " (cp.async)" : "");
  if (x->read_epoch != e->epoch) {
    x->reader = self;
    x->read_epoch = e->epoch;
    x->many_readers = false;
  } else if (x->reader != self) {
    x->many_readers = true;
  }
  return 0;
}

/* The current thread writes element i of SHARED buffer buf (async: by a
 * cp.async, which poisons it until the thread's wait). */
static int shared_write(gpu_ev *e, const kn_buffer *buf, shadow *sh, int64_t i, bool async) {
  shadow *x = &sh[i];
  int self = e->thread + 1;
  if (x->pending)
    return fail(e, "shared '%s'[%lld] written by thread %d while thread %d's cp.async to it is in flight", buf->name,
                (long long)i, e->thread, x->writer - 1);
  if (x->written && x->writer != self && x->write_epoch == e->epoch)
    return fail(e, "race on shared '%s'[%lld]: thread %d writes what thread %d wrote since the last barrier", buf->name,
                (long long)i, e->thread, x->writer - 1);
  if (x->read_epoch == e->epoch && (x->reader != self || x->many_readers)) {
    if (x->reader != self)
      return fail(e, "race on shared '%s'[%lld]: thread %d writes what thread %d read since the last barrier",
                  buf->name, (long long)i, e->thread, x->reader - 1);
    return fail(e, "race on shared '%s'[%lld]: thread %d writes what other threads read since the last barrier",
                buf->name, (long long)i, e->thread);
  }
  x->writer = self;
  x->write_epoch = e->epoch;
  x->written = true;
  x->async = async;
  x->pending = async;
  return 0;
}

/* The current thread is about to read element i of v. Registers (LOCAL)
 * and shared memory start as garbage on a GPU, so reading an element
 * nobody wrote is an error too. */
static int elem_read(gpu_ev *e, const view *v, int64_t i) {
  if (check_index(e, v->buf, i)) return -1;
  if (v->shadow) return shared_read(e, v->buf, v->shadow, i);
  if (v->init && !v->init[i])
    return fail(e, "read of uninitialised local '%s'[%lld] by thread %d", v->buf->name, (long long)i, e->thread);
  return 0;
}

/* The current thread is about to write element i of v. */
static int elem_write(gpu_ev *e, const view *v, int64_t i, bool async) {
  if (check_index(e, v->buf, i)) return -1;
  if (v->shadow) return shared_write(e, v->buf, v->shadow, i, async);
  if (v->init) v->init[i] = 1;
  return 0;
}

/* ---- expressions ---- */

static int var_hook(void *ctx, const kn_var *v, kn_ev_val *out) {
  gpu_ev *e = ctx;
  if (e->k->batch && v == e->k->batch) {
    out->i[0] = e->batch;
    return 0;
  }
  int i = lookup(e, v);
  if (i < 0) return fail(e, "variable '%s' is not bound", v->name);
  const scalar *s = &e->b[i].vals[e->b[i].per_thread ? e->thread : 0];
  out->is_float = e->b[i].is_float;
  out->i[0] = s->i;
  out->f[0] = s->f;
  return 0;
}

static int load_hook(void *ctx, const kn_expr *x, const kn_ev_val *idx, kn_ev_val *out) {
  gpu_ev *e = ctx;
  const kn_buffer *buf = x->u.load.buffer;
  view v;
  if (buffer_of(e, buf, &v)) return -1;
  for (int l = 0; l < x->lanes; l++) {
    int64_t i = idx->i[l];
    if (elem_read(e, &v, i)) return -1;
    if (out->is_float)
      out->f[l] = kn_ev_read_f(x->dtype, v.mem, i);
    else
      out->i[l] = kn_ev_read_i(x->dtype, v.mem, i);
  }
  return 0;
}

/* x for the current thread. */
static int eval(gpu_ev *e, const kn_expr *x, kn_ev_val *out) {
  kn_ev_hooks h = {.ctx = e, .var = var_hook, .load = load_hook};
  return kn_ev_expr(&h, x, out);
}

/* A scalar integer x for the current thread. */
static int eval_int(gpu_ev *e, const kn_expr *x, int64_t *out) {
  kn_ev_val v;
  if (eval(e, x, &v)) return -1;
  *out = v.i[0];
  return 0;
}

/* ---- statements inside the THREAD loops ---- */

static int exec(gpu_ev *e, const kn_stmt *s, const tset *set);

static int exec_store(gpu_ev *e, const kn_stmt *s, const tset *set) {
  const kn_buffer *buf = s->u.store.buffer;
  for (int j = 0; j < set->n; j++) {
    e->thread = set->ids[j];
    kn_ev_val idx, v;
    view to;
    if (eval(e, s->u.store.index, &idx) || eval(e, s->u.store.value, &v) || buffer_of(e, buf, &to)) return -1;
    for (int l = 0; l < idx.lanes; l++) {
      if (elem_write(e, &to, idx.i[l], false)) return -1;
      kn_ev_write(buf->dtype, to.mem, idx.i[l], &v, v.lanes == 1 ? 0 : l);
    }
  }
  return 0;
}

static int exec_let(gpu_ev *e, const kn_stmt *s, const tset *set) {
  int mark = e->n;
  scalar *vals = push_var(e, s->u.let.var);
  int rc = 0;
  for (int j = 0; j < set->n && !rc; j++) {
    e->thread = set->ids[j];
    kn_ev_val v;
    rc = eval(e, s->u.let.value, &v);
    if (!rc && v.lanes > 1) rc = fail(e, "vector let '%s' is not supported by the GPU interpreter", s->u.let.var->name);
    if (!rc) vals[e->thread] = (scalar){v.i[0], v.f[0]};
    e->b[mark].is_float = v.is_float;
  }
  if (!rc) rc = exec(e, s->u.let.body, set);
  pop_to(e, mark);
  return rc;
}

static int exec_if(gpu_ev *e, const kn_stmt *s, const tset *set) {
  tset then_set = {0, xcalloc((size_t)set->n, sizeof(int))}, else_set = {0, xcalloc((size_t)set->n, sizeof(int))};
  int rc = 0;
  for (int j = 0; j < set->n && !rc; j++) {
    int64_t cond = 0;
    e->thread = set->ids[j];
    rc = eval_int(e, s->u.ifs.cond, &cond);
    tset *to = cond ? &then_set : &else_set;
    to->ids[to->n++] = set->ids[j];
  }
  if (!rc) rc = exec(e, s->u.ifs.then_s, &then_set);
  if (!rc) rc = exec(e, s->u.ifs.else_s, &else_set);
  free(then_set.ids);
  free(else_set.ids);
  return rc;
}

/* Each thread has its own bounds; iteration i runs for the threads whose
 * trip count exceeds i, so uniform bounds make an ordinary loop. */
static int exec_for(gpu_ev *e, const kn_stmt *s, const tset *set) {
  if (s->u.loop.kind == KN_FOR_BLOCK || s->u.loop.kind == KN_FOR_THREAD)
    return fail(e, "BLOCK or THREAD loop '%s' inside the THREAD loops", s->u.loop.var->name);
  int64_t *lo = xcalloc((size_t)e->nthreads, sizeof(int64_t)), *ext = xcalloc((size_t)e->nthreads, sizeof(int64_t));
  int64_t trips = 0;
  int rc = 0;
  for (int j = 0; j < set->n && !rc; j++) {
    int t = e->thread = set->ids[j];
    rc = eval_int(e, s->u.loop.min, &lo[t]) || eval_int(e, s->u.loop.extent, &ext[t]) ? -1 : 0;
    if (ext[t] > trips) trips = ext[t];
  }
  int mark = e->n;
  scalar *vals = push_var(e, s->u.loop.var);
  tset sub = {0, xcalloc((size_t)set->n, sizeof(int))};
  for (int64_t i = 0; i < trips && !rc; i++) {
    sub.n = 0;
    for (int j = 0; j < set->n; j++) {
      int t = set->ids[j];
      if (i >= ext[t]) continue;
      sub.ids[sub.n++] = t;
      vals[t].i = lo[t] + i;
    }
    rc = exec(e, s->u.loop.body, &sub);
  }
  pop_to(e, mark);
  free(sub.ids);
  free(lo);
  free(ext);
  return rc;
}

static int exec_alloc(gpu_ev *e, const kn_stmt *s, const tset *set) {
  const kn_buffer *buf = s->u.alloc.buffer;
  if (buf->kind != KN_BUF_LOCAL) return fail(e, "shared buffer '%s' allocated inside the THREAD loops", buf->name);
  if (buf->size <= 0) return fail(e, "local buffer '%s' has no size", buf->name);
  if (buf->size > MAX_LOCAL_BYTES / (int64_t)kn_dtype_size(buf->dtype))
    return fail(e, "local buffer '%s' of %lld elements: more than the %lld bytes a thread can have", buf->name,
                (long long)buf->size, (long long)MAX_LOCAL_BYTES);
  int mark = e->n;
  binding *b = push(e, buf);
  b->per_thread = true;
  b->stride = buf->size * (int64_t)kn_dtype_size(buf->dtype);
  b->mem = xcalloc((size_t)e->nthreads, (size_t)b->stride);
  b->init = xcalloc((size_t)e->nthreads, (size_t)buf->size);
  int rc = exec(e, s->u.alloc.body, set);
  pop_to(e, mark);
  return rc;
}

static int exec_prefetch(gpu_ev *e, const kn_stmt *s, const tset *set) {
  for (int j = 0; j < set->n; j++) {
    int64_t i;
    e->thread = set->ids[j];
    if (eval_int(e, s->u.prefetch.index, &i) || check_index(e, s->u.prefetch.buffer, i)) return -1;
  }
  return 0;
}

/* ---- GPU statements ---- */

/* Reads n consecutive float elements from [first, first + n) of buf for the
 * current thread. */
static int read_frag(gpu_ev *e, const kn_buffer *buf, const kn_expr *first, int n, float *out) {
  int64_t at;
  view v;
  if (eval_int(e, first, &at) || buffer_of(e, buf, &v)) return -1;
  for (int i = 0; i < n; i++) {
    if (elem_read(e, &v, at + i)) return -1;
    out[i] = (float)kn_ev_read_f(buf->dtype, v.mem, at + i);
  }
  return 0;
}

/* One warp's MMA: gather the 32 lanes' fragments into A, B, C by the layouts
 * of mma.h, D = A x B + C in f32, scatter D back into the accumulators. */
static int mma_warp(gpu_ev *e, const kn_stmt *s, int warp) {
  float A[KN_MMA_M][KN_MMA_K], B[KN_MMA_K][KN_MMA_N], C[KN_MMA_M][KN_MMA_N];
  for (int lane = 0; lane < WARP; lane++) {
    float a[KN_MMA_A_REGS], b[KN_MMA_B_REGS], c[KN_MMA_C_REGS];
    int r, col;
    e->thread = warp * WARP + lane;
    if (read_frag(e, s->u.gpu.a, s->u.gpu.a_index, KN_MMA_A_REGS, a) ||
        read_frag(e, s->u.gpu.b, s->u.gpu.b_index, KN_MMA_B_REGS, b) ||
        read_frag(e, s->u.gpu.dst, s->u.gpu.dst_index, KN_MMA_C_REGS, c))
      return -1;
    for (int i = 0; i < KN_MMA_A_REGS; i++) {
      kn_mma_a_coord(lane, i, &r, &col);
      A[r][col] = a[i];
    }
    for (int i = 0; i < KN_MMA_B_REGS; i++) {
      kn_mma_b_coord(lane, i, &r, &col);
      B[r][col] = b[i];
    }
    for (int i = 0; i < KN_MMA_C_REGS; i++) {
      kn_mma_c_coord(lane, i, &r, &col);
      C[r][col] = c[i];
    }
  }
  for (int m = 0; m < KN_MMA_M; m++)
    for (int n = 0; n < KN_MMA_N; n++)
      for (int k = 0; k < KN_MMA_K; k++) C[m][n] += A[m][k] * B[k][n];
  for (int lane = 0; lane < WARP; lane++) {
    int64_t at;
    view v;
    e->thread = warp * WARP + lane;
    if (eval_int(e, s->u.gpu.dst_index, &at) || buffer_of(e, s->u.gpu.dst, &v)) return -1;
    for (int i = 0; i < KN_MMA_C_REGS; i++) {
      int r, col;
      kn_mma_c_coord(lane, i, &r, &col);
      if (elem_write(e, &v, at + i, false)) return -1;
      ((float *)v.mem)[at + i] = C[r][col];
    }
  }
  return 0;
}

/* Every warp that reaches a warp-collective statement (`what`) must reach it
 * whole; warp[w] says whether warp w runs it. */
static int whole_warps(gpu_ev *e, const tset *set, const char *what, bool *warp) {
  if (e->nthreads % WARP) return fail(e, "%s in a block of %d threads, not whole warps of %d", what, e->nthreads, WARP);
  int warps = e->nthreads / WARP, rc = 0;
  int *count = xcalloc((size_t)warps, sizeof(int));
  for (int j = 0; j < set->n; j++) count[set->ids[j] / WARP]++;
  for (int w = 0; w < warps && !rc; w++) {
    if (count[w] && count[w] != WARP)
      rc = fail(e, "%s reached by %d of the %d threads of warp %d", what, count[w], WARP, w);
    warp[w] = count[w] != 0;
  }
  free(count);
  return rc;
}

static int exec_mma(gpu_ev *e, const kn_stmt *s, const tset *set) {
  bool warp[MAX_THREADS / WARP] = {false};
  if (whole_warps(e, set, "mma", warp)) return -1;
  for (int w = 0; w < e->nthreads / WARP; w++)
    if (warp[w] && mma_warp(e, s, w)) return -1;
  return 0;
}

/* One warp's ldmatrix by mma.h: each supplying lane reads its row (so the
 * row counts as that lane's read for the race and cp.async checks), then
 * every lane takes its elements. Elements are copied as bits. */
static int ldmatrix_warp(gpu_ev *e, const kn_stmt *s, int warp) {
  const kn_buffer *src = s->u.gpu.a, *dst = s->u.gpu.dst;
  int count = s->u.gpu.n;
  uint16_t M[4][KN_LDMATRIX_DIM][KN_LDMATRIX_DIM];
  for (int lane = 0; lane < KN_LDMATRIX_DIM * count; lane++) {
    int64_t at;
    view v;
    e->thread = warp * WARP + lane;
    if (eval_int(e, s->u.gpu.a_index, &at) || buffer_of(e, src, &v)) return -1;
    if (at * (int64_t)sizeof(uint16_t) % KN_LDMATRIX_ROW_BYTES)
      return fail(e, "ldmatrix row at %s '%s'[%lld] (thread %d) is not %d-byte aligned", kind_name(src), src->name,
                  (long long)at, e->thread, KN_LDMATRIX_ROW_BYTES);
    for (int c = 0; c < KN_LDMATRIX_DIM; c++) {
      if (elem_read(e, &v, at + c)) return -1;
      memcpy(&M[lane / KN_LDMATRIX_DIM][lane % KN_LDMATRIX_DIM][c], v.mem + (at + c) * 2, 2);
    }
  }
  for (int lane = 0; lane < WARP; lane++) {
    int64_t at;
    view v;
    e->thread = warp * WARP + lane;
    if (eval_int(e, s->u.gpu.dst_index, &at) || buffer_of(e, dst, &v)) return -1;
    for (int j = 0; j < 2 * count; j++) {
      int m, r, c;
      kn_ldmatrix_coord(lane, j, s->u.gpu.trans, &m, &r, &c);
      if (elem_write(e, &v, at + j, false)) return -1;
      memcpy(v.mem + (at + j) * 2, &M[m][r][c], 2);
    }
  }
  return 0;
}

static int exec_ldmatrix(gpu_ev *e, const kn_stmt *s, const tset *set) {
  bool warp[MAX_THREADS / WARP] = {false};
  if (whole_warps(e, set, "ldmatrix", warp)) return -1;
  for (int w = 0; w < e->nthreads / WARP; w++)
    if (warp[w] && ldmatrix_warp(e, s, w)) return -1;
  return 0;
}

/* Copies happen at once (the source does not change under a kernel) but the
 * destination stays poisoned until the thread's wait for the group. */
static int exec_cp_async(gpu_ev *e, const kn_stmt *s, const tset *set) {
  const kn_buffer *dst = s->u.gpu.dst, *src = s->u.gpu.a;
  for (int j = 0; j < set->n; j++) {
    int t = e->thread = set->ids[j];
    int64_t di, si, pred = 1;
    view to, from;
    if (eval_int(e, s->u.gpu.dst_index, &di) || eval_int(e, s->u.gpu.a_index, &si) ||
        (s->u.gpu.pred && eval_int(e, s->u.gpu.pred, &pred)) || buffer_of(e, dst, &to) || buffer_of(e, src, &from))
      return -1;
    for (int64_t i = 0; i < s->u.gpu.n; i++) {
      if ((pred && elem_read(e, &from, si + i)) || elem_write(e, &to, di + i, true)) return -1;
      kn_ev_val v = {.lanes = 1};
      v.f[0] = pred && kn_dtype_is_float(src->dtype) ? kn_ev_read_f(src->dtype, from.mem, si + i) : 0;
      v.i[0] = pred && !kn_dtype_is_float(src->dtype) ? kn_ev_read_i(src->dtype, from.mem, si + i) : 0;
      kn_ev_write(dst->dtype, to.mem, di + i, &v, 0);
      if (e->npend == e->cap_pend) {
        e->cap_pend = e->cap_pend ? 2 * e->cap_pend : 256;
        e->pend = realloc(e->pend, sizeof(pending_copy) * (size_t)e->cap_pend);
        KN_ASSERT(e->pend, "out of memory");
      }
      e->pend[e->npend++] = (pending_copy){&to.shadow[di + i], t, e->cp[t].open_group};
    }
  }
  return 0;
}

/* Completes the copies of every group that its thread no longer waits for:
 * they become that thread's writes of the current epoch. */
static void cp_complete(gpu_ev *e) {
  int kept = 0;
  for (int i = 0; i < e->npend; i++) {
    pending_copy p = e->pend[i];
    if (p.group >= e->cp[p.thread].done_below) {
      e->pend[kept++] = p;
      continue;
    }
    p.elem->pending = false;
    p.elem->write_epoch = e->epoch;
  }
  e->npend = kept;
}

static int exec_gpu(gpu_ev *e, const kn_stmt *s, const tset *set) {
  switch (s->u.gpu.op) {
  case KN_GPU_BARRIER:
    if (set->n != e->nthreads) return fail(e, "barrier reached by %d of %d threads", set->n, e->nthreads);
    e->epoch++;
    return 0;
  case KN_GPU_MMA: return exec_mma(e, s, set);
  case KN_GPU_LDMATRIX: return exec_ldmatrix(e, s, set);
  case KN_GPU_CP_ASYNC: return exec_cp_async(e, s, set);
  case KN_GPU_CP_COMMIT:
    for (int j = 0; j < set->n; j++) e->cp[set->ids[j]].open_group++;
    return 0;
  case KN_GPU_CP_WAIT:
    for (int j = 0; j < set->n; j++) {
      cp_groups *g = &e->cp[set->ids[j]];
      if (g->open_group - s->u.gpu.n > g->done_below) g->done_below = g->open_group - s->u.gpu.n;
    }
    cp_complete(e);
    return 0;
  }
  return fail(e, "unknown GPU statement");
}

static int exec(gpu_ev *e, const kn_stmt *s, const tset *set) {
  if (!s || set->n == 0) return 0;
  e->stmt = s;
  switch (s->kind) {
  case KN_S_SEQ:
    for (int i = 0; i < s->u.seq.n; i++)
      if (exec(e, s->u.seq.stmts[i], set)) return -1;
    return 0;
  case KN_S_STORE: return exec_store(e, s, set);
  case KN_S_LET: return exec_let(e, s, set);
  case KN_S_IF: return exec_if(e, s, set);
  case KN_S_FOR: return exec_for(e, s, set);
  case KN_S_ALLOC: return exec_alloc(e, s, set);
  case KN_S_PREFETCH: return exec_prefetch(e, s, set);
  case KN_S_GPU: return exec_gpu(e, s, set);
  }
  return fail(e, "unknown statement");
}

/* ---- the block scope ---- */

static int run_outer(gpu_ev *e, const kn_stmt *s);

/* A uniform (block-scope) scalar. */
static int eval_uniform(gpu_ev *e, const kn_expr *x, int64_t *out) {
  e->thread = 0;
  return eval_int(e, x, out);
}

/* The THREAD loops at s and the body under them, run by the whole block. */
static int run_threads(gpu_ev *e, const kn_stmt *s) {
  int64_t dims[3] = {1, 1, 1};
  const kn_var *vars[3] = {NULL, NULL, NULL};
  for (; s && s->kind == KN_S_FOR && s->u.loop.kind == KN_FOR_THREAD; s = s->u.loop.body) {
    int d = s->u.loop.dim;
    int64_t lo, ext;
    e->stmt = s;
    if (vars[d]) return fail(e, "two THREAD loops over dimension %c", "xyz"[d]);
    if (eval_uniform(e, s->u.loop.min, &lo) || eval_uniform(e, s->u.loop.extent, &ext)) return -1;
    if (lo != 0 || ext < 1 || ext > MAX_THREADS)
      return fail(e, "THREAD loop '%s' over [%lld, +%lld), not [0, +1..%d)", s->u.loop.var->name, (long long)lo,
                  (long long)ext, MAX_THREADS);
    dims[d] = ext;
    vars[d] = s->u.loop.var;
  }
  if (dims[0] * dims[1] * dims[2] > MAX_THREADS)
    return fail(e, "%lld threads in a block, more than %d", (long long)(dims[0] * dims[1] * dims[2]), MAX_THREADS);
  int mark = e->n;
  e->nthreads = (int)(dims[0] * dims[1] * dims[2]);
  tset all = {e->nthreads, xcalloc((size_t)e->nthreads, sizeof(int))};
  for (int d = 0; d < 3; d++)
    if (vars[d]) {
      scalar *vals = push_var(e, vars[d]);
      for (int t = 0; t < e->nthreads; t++)
        vals[t].i = d == 0 ? t % dims[0] : d == 1 ? t / dims[0] % dims[1] : t / (dims[0] * dims[1]);
    }
  for (int t = 0; t < e->nthreads; t++) all.ids[t] = t;
  e->cp = xcalloc((size_t)e->nthreads, sizeof(cp_groups));
  int rc = exec(e, s, &all);
  free(e->cp);
  e->cp = NULL;
  e->npend = 0;
  e->epoch++; /* the kernel's end (or the next block) orders everything */
  e->nthreads = 0;
  free(all.ids);
  pop_to(e, mark);
  return rc;
}

static int run_block_loop(gpu_ev *e, const kn_stmt *s) {
  int64_t lo, ext;
  if (eval_uniform(e, s->u.loop.min, &lo) || eval_uniform(e, s->u.loop.extent, &ext)) return -1;
  int mark = e->n, rc = 0;
  scalar *vals = push_var(e, s->u.loop.var);
  for (int64_t i = 0; i < ext && !rc; i++) {
    vals[0].i = lo + i;
    rc = run_outer(e, s->u.loop.body);
  }
  pop_to(e, mark);
  return rc;
}

/* A SHARED buffer is fresh (uninitialised) in every block. */
static int run_shared_alloc(gpu_ev *e, const kn_stmt *s) {
  const kn_buffer *buf = s->u.alloc.buffer;
  if (buf->kind != KN_BUF_SHARED) return fail(e, "local buffer '%s' allocated outside the THREAD loops", buf->name);
  if (buf->size <= 0) return fail(e, "shared buffer '%s' has no size", buf->name);
  if (buf->size > MAX_SHARED_BYTES / (int64_t)kn_dtype_size(buf->dtype))
    return fail(e, "shared buffer '%s' of %lld elements: more than the %lld bytes a block can have", buf->name,
                (long long)buf->size, (long long)MAX_SHARED_BYTES);
  int mark = e->n;
  binding *b = push(e, buf);
  b->mem = xcalloc((size_t)buf->size, kn_dtype_size(buf->dtype));
  b->shadow = xcalloc((size_t)buf->size, sizeof(shadow));
  int rc = run_outer(e, s->u.alloc.body);
  pop_to(e, mark);
  return rc;
}

static int run_outer(gpu_ev *e, const kn_stmt *s) {
  if (!s) return 0;
  e->stmt = s;
  switch (s->kind) {
  case KN_S_FOR:
    if (s->u.loop.kind == KN_FOR_THREAD) return run_threads(e, s);
    if (s->u.loop.kind == KN_FOR_BLOCK) return run_block_loop(e, s);
    return fail(e, "loop '%s' outside the THREAD loops", s->u.loop.var->name);
  case KN_S_ALLOC: return run_shared_alloc(e, s);
  case KN_S_SEQ:
    for (int i = 0; i < s->u.seq.n; i++)
      if (run_outer(e, s->u.seq.stmts[i])) return -1;
    return 0;
  case KN_S_LET: {
    kn_ev_val v;
    e->thread = 0;
    if (eval(e, s->u.let.value, &v)) return -1;
    if (v.lanes > 1) return fail(e, "vector let '%s' is not supported by the GPU interpreter", s->u.let.var->name);
    int mark = e->n;
    *push_var(e, s->u.let.var) = (scalar){v.i[0], v.f[0]};
    e->b[mark].is_float = v.is_float;
    int rc = run_outer(e, s->u.let.body);
    pop_to(e, mark);
    return rc;
  }
  default: return fail(e, "statement outside the THREAD loops");
  }
}

int kn_gpu_eval(const kn_kernel *k, void *const *args, int64_t batch, kn_diag *d) {
  if (!k->gpu) return kn_diag_error(d, "kernel '%s': not a GPU kernel", k->name);
  gpu_ev e = {.k = k, .args = args, .batch = batch, .d = d, .epoch = 1};
  int rc = run_outer(&e, k->body);
  pop_to(&e, 0);
  free(e.b);
  free(e.pend);
  free(e.cp);
  return rc;
}
