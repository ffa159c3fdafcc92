/* loop_eval.c — a slow, obviously-correct interpreter of the loop IR.
 *
 * Used by tests to check lowering and finalization (every schedule) against
 * the naive TE interpreter without going through LLVM. Values follow the
 * model of ir/loop/eval_value.h (shared with the GPU interpreter): per lane
 * double (floats) or int64 (integers, bool), float32 results rounded to float
 * after each operation, so results match compiled code up to the order of
 * operations. */
#include "ir/loop/loop_eval.h"

#include <stdlib.h>
#include <string.h>

#include "ir/loop/eval_value.h"

typedef kn_ev_val val;

typedef struct binding {
  const void *key; /* kn_var* or kn_buffer* */
  val v;
  void *mem;
} binding;

typedef struct ev {
  const kn_kernel *k;
  void *const *args;
  int64_t batch;
  binding *b;
  int n, cap;
} ev;

static binding *lookup(ev *e, const void *key) {
  for (int i = e->n - 1; i >= 0; i--)
    if (e->b[i].key == key) return &e->b[i];
  return NULL;
}

static binding *push(ev *e, const void *key) {
  if (e->n == e->cap) {
    e->cap = e->cap ? e->cap * 2 : 64;
    e->b = realloc(e->b, sizeof(binding) * (size_t)e->cap);
    KN_ASSERT(e->b, "out of memory");
  }
  binding *b = &e->b[e->n++];
  memset(b, 0, sizeof *b);
  b->key = key;
  return b;
}

static void *buffer_mem(ev *e, const kn_buffer *buf) {
  for (int p = 0; p < e->k->n_params; p++)
    if (e->k->params[p] == buf) return e->args[p];
  binding *b = lookup(e, buf);
  KN_ASSERT(b && b->mem, "buffer used outside its allocation");
  return b->mem;
}

static int var_hook(void *ctx, const kn_var *v, val *out) {
  ev *e = ctx;
  if (e->k->batch && v == e->k->batch) {
    out->i[0] = e->batch;
    return 0;
  }
  binding *b = lookup(e, v);
  KN_ASSERT(b, "unbound variable");
  *out = b->v;
  return 0;
}

static int load_hook(void *ctx, const kn_expr *x, const val *idx, val *out) {
  void *mem = buffer_mem(ctx, x->u.load.buffer);
  for (int l = 0; l < x->lanes; l++) {
    if (out->is_float)
      out->f[l] = kn_ev_read_f(x->dtype, mem, idx->i[l]);
    else
      out->i[l] = kn_ev_read_i(x->dtype, mem, idx->i[l]);
  }
  return 0;
}

static val eval(ev *e, const kn_expr *x) {
  kn_ev_hooks h = {.ctx = e, .var = var_hook, .load = load_hook};
  val r;
  int rc = kn_ev_expr(&h, x, &r);
  KN_ASSERT(rc == 0, "the CPU interpreter's hooks never fail");
  return r;
}

static void exec(ev *e, const kn_stmt *s, int64_t task, int64_t ntasks, bool *split) {
  if (!s) return;
  switch (s->kind) {
  case KN_S_FOR: {
    int64_t lo = eval(e, s->u.loop.min).i[0], ext = eval(e, s->u.loop.extent).i[0];
    int64_t begin = 0, end = ext;
    if (s->u.loop.kind == KN_FOR_PARALLEL && !*split) {
      *split = true;
      begin = task * ext / ntasks;
      end = (task + 1) * ext / ntasks;
    }
    int mark = e->n;
    binding *b = push(e, s->u.loop.var);
    b->v.lanes = 1;
    for (int64_t i = begin; i < end; i++) {
      e->b[mark].v.i[0] = lo + i;
      exec(e, s->u.loop.body, task, ntasks, split);
    }
    e->n = mark;
    return;
  }
  case KN_S_STORE: {
    val idx = eval(e, s->u.store.index), v = eval(e, s->u.store.value);
    void *mem = buffer_mem(e, s->u.store.buffer);
    for (int l = 0; l < idx.lanes; l++) kn_ev_write(s->u.store.buffer->dtype, mem, idx.i[l], &v, v.lanes == 1 ? 0 : l);
    return;
  }
  case KN_S_ALLOC: {
    int mark = e->n;
    const kn_buffer *buf = s->u.alloc.buffer;
    void *mem = calloc((size_t)(buf->size > 0 ? buf->size : 1), 8);
    KN_ASSERT(mem, "out of memory");
    push(e, buf)->mem = mem;
    exec(e, s->u.alloc.body, task, ntasks, split);
    e->n = mark;
    free(mem);
    return;
  }
  case KN_S_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) exec(e, s->u.seq.stmts[i], task, ntasks, split);
    return;
  case KN_S_IF:
    if (eval(e, s->u.ifs.cond).i[0])
      exec(e, s->u.ifs.then_s, task, ntasks, split);
    else
      exec(e, s->u.ifs.else_s, task, ntasks, split);
    return;
  case KN_S_LET: {
    val v = eval(e, s->u.let.value);
    int mark = e->n;
    push(e, s->u.let.var)->v = v;
    exec(e, s->u.let.body, task, ntasks, split);
    e->n = mark;
    return;
  }
  case KN_S_PREFETCH: { /* a hint: no value changes, but it must stay inside its buffer */
    int64_t i = eval(e, s->u.prefetch.index).i[0], size = s->u.prefetch.buffer->size;
    KN_ASSERT(i >= 0 && (size <= 0 || i < size), "prefetch outside its buffer");
    return;
  }
  case KN_S_GPU: KN_UNREACHABLE("GPU statement: run GPU kernels with kn_gpu_eval");
  }
}

void kn_loop_eval(const kn_kernel *k, void *const *args, int64_t batch, int64_t ntasks) {
  ev e = {.k = k, .args = args, .batch = batch};
  if (!k->parallel) ntasks = 1;
  for (int64_t t = 0; t < ntasks; t++) {
    bool split = false;
    exec(&e, k->body, t, ntasks, &split);
  }
  free(e.b);
}
