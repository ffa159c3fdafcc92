/* cuda_launch.c — kn_cuda_launch_info: a GPU kernel's launch shape.
 *
 * Requires: a kernel with the GPU shape of ir/loop/loop.h. Guarantees:
 *  - grid[d] is the extent of the BLOCK loop of dim d (an int64 expression
 *    of the batch symbol), or a constant 1 when there is none;
 *  - block[d] is the largest extent of the THREAD loops of dim d (so a
 *    kernel with several THREAD nests launches the widest; the emitter
 *    guards the narrower ones, and runs a nest that leaves a launched
 *    dimension unbound on its thread 0 only), 1 when there is none;
 *  - shared_bytes is 0 when the SHARED buffers (each starting at a 16-byte
 *    boundary) fit CUDA's 48 KiB of static shared memory, else their whole
 *    size: the emitter then carves them out of one dynamic array.
 * It also rejects what the emitter cannot map onto CUDA's model: a
 * statement between the BLOCK and THREAD loops that would run once per
 * thread instead of once per block, loops of the wrong kind, a grid that
 * reads anything but the batch symbol. */
#include <string.h>

#include "codegen/cuda_emit.h"

/* The extent of a missing grid dimension: immutable, shared by every call. */
static const kn_expr grid_one = {.kind = KN_E_INT, .dtype = KN_DT_I64, .lanes = 1, .u.ival = 1};

typedef struct shape {
  const kn_kernel *k;
  kn_cuda_launch *out;
  kn_diag *d;
  int64_t shared; /* bytes of SHARED buffers so far, aligned */
  bool failed;
} shape;

static int fail(shape *s, const char *what) {
  if (!s->failed)
    kn_diag_error(s->d, "cuda: kernel '%s' is not a well-formed GPU kernel: %s", s->k->name ? s->k->name : "", what);
  s->failed = true;
  return -1;
}

/* Does e read nothing but constants and the batch symbol? */
static bool batch_only(const kn_expr *e, const kn_var *batch) {
  switch (e->kind) {
  case KN_E_INT: return true;
  case KN_E_VAR: return e->u.var == batch;
  case KN_E_ADD:
  case KN_E_SUB:
  case KN_E_MUL:
  case KN_E_DIV:
  case KN_E_MOD:
  case KN_E_MIN:
  case KN_E_MAX: return batch_only(e->u.bin.a, batch) && batch_only(e->u.bin.b, batch);
  default: return false;
  }
}

bool kn_cu_is_identifier(const char *s) {
  if (!s || !*s || (*s >= '0' && *s <= '9')) return false;
  for (const char *p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_')) return false;
  return true;
}

static int walk_inner(shape *s, const kn_stmt *st);
static int thread_loop(shape *s, const kn_stmt *st, bool bound[3]);

/* Inside a THREAD loop: more of the nest's THREAD loops (through LETs and
 * LOCAL allocations, which every thread may run alike), then its body. */
static int walk_chain(shape *s, const kn_stmt *st, bool bound[3]) {
  if (!st) return 0;
  if (st->kind == KN_S_FOR && st->u.loop.kind == KN_FOR_THREAD) return thread_loop(s, st, bound);
  if (st->kind == KN_S_LET) return walk_chain(s, st->u.let.body, bound);
  if (st->kind == KN_S_ALLOC && st->u.alloc.buffer->kind == KN_BUF_LOCAL)
    return walk_chain(s, st->u.alloc.body, bound);
  return walk_inner(s, st);
}

static int thread_loop(shape *s, const kn_stmt *st, bool bound[3]) {
  int dim = st->u.loop.dim;
  int64_t ext;
  if (dim < 0 || dim > 2 || bound[dim]) return fail(s, "two THREAD loops of one dimension are nested");
  if (!kn_e_is_const_int(st->u.loop.extent, &ext) || ext < 1 || ext > 1024)
    return fail(s, "a THREAD loop's extent must be a constant in [1, 1024]");
  if (ext > s->out->block[dim]) s->out->block[dim] = (int)ext;
  bound[dim] = true;
  int r = walk_chain(s, st->u.loop.body, bound);
  bound[dim] = false;
  return r;
}

int kn_cu_nest_dims(const kn_stmt *st) {
  if (!st) return 0;
  if (st->kind == KN_S_FOR && st->u.loop.kind == KN_FOR_THREAD) return 1 << st->u.loop.dim | kn_cu_nest_dims(st->u.loop.body);
  if (st->kind == KN_S_LET) return kn_cu_nest_dims(st->u.let.body);
  if (st->kind == KN_S_ALLOC && st->u.alloc.buffer->kind == KN_BUF_LOCAL) return kn_cu_nest_dims(st->u.alloc.body);
  return 0;
}

/* The body of a THREAD nest: anything but GPU loops, SHARED allocations and
 * loops a schedule should have removed. A THREAD loop here would leave the
 * statements before it to every thread of its dimension. */
static int walk_inner(shape *s, const kn_stmt *st) {
  if (!st) return 0;
  switch (st->kind) {
  case KN_S_FOR:
    if (st->u.loop.kind == KN_FOR_THREAD) return fail(s, "a THREAD nest's loops are not directly nested");
    if (st->u.loop.kind != KN_FOR_SERIAL) return fail(s, "only SERIAL loops may run inside the THREAD loops");
    return walk_inner(s, st->u.loop.body);
  case KN_S_SEQ:
    for (int i = 0; i < st->u.seq.n; i++)
      if (walk_inner(s, st->u.seq.stmts[i]) < 0) return -1;
    return 0;
  case KN_S_ALLOC:
    if (st->u.alloc.buffer->kind != KN_BUF_LOCAL) return fail(s, "a SHARED buffer is allocated inside the THREAD loops");
    return walk_inner(s, st->u.alloc.body);
  case KN_S_IF:
    if (walk_inner(s, st->u.ifs.then_s) < 0) return -1;
    return walk_inner(s, st->u.ifs.else_s);
  case KN_S_LET: return walk_inner(s, st->u.let.body);
  default: return 0;
  }
}

/* Between the BLOCK and the THREAD loops: what every thread may run alike. */
static int walk_block(shape *s, const kn_stmt *st) {
  if (!st) return 0;
  bool bound[3] = {false, false, false};
  switch (st->kind) {
  case KN_S_FOR:
    if (st->u.loop.kind == KN_FOR_THREAD) return thread_loop(s, st, bound);
    if (st->u.loop.kind != KN_FOR_SERIAL) return fail(s, "a loop other than SERIAL / THREAD inside the BLOCK loops");
    return walk_block(s, st->u.loop.body);
  case KN_S_SEQ:
    for (int i = 0; i < st->u.seq.n; i++)
      if (walk_block(s, st->u.seq.stmts[i]) < 0) return -1;
    return 0;
  case KN_S_ALLOC: {
    const kn_buffer *b = st->u.alloc.buffer;
    if (b->kind != KN_BUF_SHARED) return fail(s, "a LOCAL buffer is allocated outside the THREAD loops");
    if (b->size <= 0 || !kn_cu_mem_type(b->dtype)) return fail(s, "a SHARED buffer of no size or no valid dtype");
    int64_t bytes = b->size * (int64_t)kn_dtype_size(b->dtype);
    s->shared += (bytes + KN_CU_SHARED_ALIGN - 1) / KN_CU_SHARED_ALIGN * KN_CU_SHARED_ALIGN;
    return walk_block(s, st->u.alloc.body);
  }
  case KN_S_IF:
    if (walk_block(s, st->u.ifs.then_s) < 0) return -1;
    return walk_block(s, st->u.ifs.else_s);
  case KN_S_LET: return walk_block(s, st->u.let.body);
  default: return fail(s, "a statement between the BLOCK and the THREAD loops (it would run once per thread)");
  }
}

int64_t kn_cuda_max_shared(const kn_target *t) {
  int64_t least = 0;
  for (int i = 0; i < t->n_sm; i++) {
    int sm = t->sm[i];
    /* per block, opt-in: 163 KiB on sm_80 / sm_87, 99 KiB on the other 8.x
     * and on 12.x, 227 KiB on 9.0 and 10.0 (CUDA programming guide,
     * "Technical Specifications per Compute Capability") */
    int64_t limit = sm == 80 || sm == 87 ? 163 * 1024 : sm == 90 || sm == 100 ? 227 * 1024 : 99 * 1024;
    if (i == 0 || limit < least) least = limit;
  }
  return least;
}

int kn_cuda_launch_info(const kn_kernel *k, kn_cuda_launch *out, kn_diag *d) {
  shape s = {.k = k, .out = out, .d = d};
  *out = (kn_cuda_launch){.name = k->name, .block = {1, 1, 1}};
  for (int i = 0; i < 3; i++) out->grid[i] = (kn_expr *)&grid_one;
  if (!k->gpu) return fail(&s, "not marked as a GPU kernel");
  if (!kn_cu_is_identifier(k->name) || !strncmp(k->name, "kn_cu_", 6))
    return fail(&s, "its name is not a C identifier (or starts with the reserved kn_cu_)");
  const kn_stmt *st = k->body;
  bool seen[3] = {false, false, false};
  for (; st && st->kind == KN_S_FOR && st->u.loop.kind == KN_FOR_BLOCK; st = st->u.loop.body) {
    int dim = st->u.loop.dim;
    int64_t v;
    if (dim < 0 || dim > 2 || seen[dim]) return fail(&s, "two BLOCK loops of one dimension");
    if (!kn_e_is_const_int(st->u.loop.min, &v) || v != 0) return fail(&s, "a BLOCK loop does not start at 0");
    if (!batch_only(st->u.loop.extent, k->batch)) return fail(&s, "a BLOCK extent reads more than the batch symbol");
    if (kn_e_is_const_int(st->u.loop.extent, &v) && (v < 1 || v > (dim == 0 ? INT32_MAX : 65535)))
      return fail(&s, "a BLOCK extent is out of CUDA's grid limits");
    seen[dim] = true;
    out->grid[dim] = st->u.loop.extent;
  }
  if (walk_block(&s, st) < 0) return -1;
  if ((int64_t)out->block[0] * out->block[1] * out->block[2] > 1024) return fail(&s, "more than 1024 threads");
  out->shared_bytes = s.shared > KN_CU_STATIC_SHARED_MAX ? s.shared : 0;
  return 0;
}
