/* loop.c — loop IR constructors and the printer. */
#include "ir/loop/loop.h"

#include <stdlib.h>
#include <string.h>

kn_buffer *kn_buffer_new(kn_expr_ctx *c, const char *name, kn_dtype t, kn_buffer_kind kind,
                         int64_t size) {
  kn_buffer *b = KN_NEW(c->arena, kn_buffer);
  b->name = kn_arena_strdup(c->arena, name);
  b->dtype = t;
  b->kind = kind;
  b->size = size;
  b->id = c->next_var_id++;
  return b;
}

static kn_stmt *stmt(kn_expr_ctx *c, kn_stmt_kind k) {
  kn_stmt *s = KN_NEW(c->arena, kn_stmt);
  s->kind = k;
  return s;
}

kn_stmt *kn_s_for(kn_expr_ctx *c, kn_var *v, kn_expr *min, kn_expr *extent, kn_for_kind kind,
                  kn_stmt *body) {
  KN_ASSERT(min->dtype == KN_DT_I64 && extent->dtype == KN_DT_I64, "loop bounds must be int64");
  kn_stmt *s = stmt(c, KN_S_FOR);
  s->u.loop.var = v;
  s->u.loop.min = min;
  s->u.loop.extent = extent;
  s->u.loop.kind = kind;
  s->u.loop.body = body;
  return s;
}

kn_stmt *kn_s_store(kn_expr_ctx *c, kn_buffer *b, kn_expr *index, kn_expr *value) {
  KN_ASSERT(index->dtype == KN_DT_I64, "store index must be int64");
  KN_ASSERT(value->dtype == b->dtype, "store of the wrong dtype");
  if (value->lanes != index->lanes) {
    KN_ASSERT(value->lanes == 1, "store lanes mismatch");
    value = kn_e_broadcast(c, value, index->lanes);
  }
  kn_stmt *s = stmt(c, KN_S_STORE);
  s->u.store.buffer = b;
  s->u.store.index = index;
  s->u.store.value = value;
  return s;
}

kn_stmt *kn_s_alloc(kn_expr_ctx *c, kn_buffer *b, kn_stmt *body) {
  KN_ASSERT(b->kind == KN_BUF_LOCAL || b->kind == KN_BUF_SHARED, "alloc of a parameter buffer");
  kn_stmt *s = stmt(c, KN_S_ALLOC);
  s->u.alloc.buffer = b;
  s->u.alloc.body = body;
  return s;
}

kn_stmt *kn_s_seq(kn_expr_ctx *c, kn_stmt **stmts, int n) {
  int kept = 0;
  for (int i = 0; i < n; i++) kept += stmts[i] != NULL;
  if (kept == 1)
    for (int i = 0; i < n; i++)
      if (stmts[i]) return stmts[i];
  kn_stmt *s = stmt(c, KN_S_SEQ);
  s->u.seq.stmts = KN_NEW_ARRAY(c->arena, kn_stmt *, kept > 0 ? kept : 1);
  for (int i = 0; i < n; i++)
    if (stmts[i]) s->u.seq.stmts[s->u.seq.n++] = stmts[i];
  return s;
}

kn_stmt *kn_s_seq2(kn_expr_ctx *c, kn_stmt *a, kn_stmt *b) {
  kn_stmt *both[2] = {a, b};
  return kn_s_seq(c, both, 2);
}

kn_stmt *kn_s_if(kn_expr_ctx *c, kn_expr *cond, kn_stmt *then_s, kn_stmt *else_s) {
  KN_ASSERT(cond->dtype == KN_DT_BOOL && cond->lanes == 1, "if condition must be a scalar bool");
  kn_stmt *s = stmt(c, KN_S_IF);
  s->u.ifs.cond = cond;
  s->u.ifs.then_s = then_s;
  s->u.ifs.else_s = else_s;
  return s;
}

kn_stmt *kn_s_let(kn_expr_ctx *c, kn_var *v, kn_expr *value, kn_stmt *body) {
  kn_stmt *s = stmt(c, KN_S_LET);
  s->u.let.var = v;
  s->u.let.value = value;
  s->u.let.body = body;
  return s;
}

kn_stmt *kn_s_prefetch(kn_expr_ctx *c, kn_buffer *b, kn_expr *index, int level) {
  KN_ASSERT(b && index->lanes == 1 && index->dtype == KN_DT_I64, "prefetch index must be a scalar int64 into a buffer");
  KN_ASSERT(level == 1 || level == 2, "prefetch level must be 1 (L1) or 2 (L2)");
  kn_stmt *s = stmt(c, KN_S_PREFETCH);
  s->u.prefetch.buffer = b;
  s->u.prefetch.index = index;
  s->u.prefetch.level = level;
  return s;
}

kn_stmt *kn_s_for_like(kn_expr_ctx *c, const kn_stmt *loop, kn_expr *min, kn_expr *extent, kn_stmt *body) {
  kn_stmt *s = kn_s_for(c, loop->u.loop.var, min, extent, loop->u.loop.kind, body);
  s->u.loop.dim = loop->u.loop.dim;
  return s;
}

kn_stmt *kn_s_bind(kn_expr_ctx *c, kn_var *v, kn_expr *extent, kn_for_kind kind, int dim, kn_stmt *body) {
  KN_ASSERT(kind == KN_FOR_BLOCK || kind == KN_FOR_THREAD, "kn_s_bind binds BLOCK or THREAD loops");
  KN_ASSERT(dim >= 0 && dim < 3, "GPU loop dimension must be x, y or z");
  kn_stmt *s = kn_s_for(c, v, kn_e_int(c, 0), extent, kind, body);
  s->u.loop.dim = dim;
  return s;
}

static kn_stmt *gpu_stmt(kn_expr_ctx *c, kn_gpu_op op) {
  kn_stmt *s = stmt(c, KN_S_GPU);
  s->u.gpu.op = op;
  return s;
}

kn_stmt *kn_s_barrier(kn_expr_ctx *c) { return gpu_stmt(c, KN_GPU_BARRIER); }
kn_stmt *kn_s_cp_commit(kn_expr_ctx *c) { return gpu_stmt(c, KN_GPU_CP_COMMIT); }

kn_stmt *kn_s_cp_wait(kn_expr_ctx *c, int n) {
  KN_ASSERT(n >= 0, "cp.async wait count must be >= 0");
  kn_stmt *s = gpu_stmt(c, KN_GPU_CP_WAIT);
  s->u.gpu.n = n;
  return s;
}

static void check_index(const kn_expr *e) {
  KN_ASSERT(e && e->dtype == KN_DT_I64 && e->lanes == 1, "GPU statement index must be a scalar int64");
}

kn_stmt *kn_s_mma(kn_expr_ctx *c, kn_dtype ab, kn_buffer *acc, kn_expr *acc_index, kn_buffer *a, kn_expr *a_index,
                  kn_buffer *b, kn_expr *b_index) {
  KN_ASSERT(ab == KN_DT_F16 || ab == KN_DT_BF16, "MMA inputs are f16 or bf16");
  KN_ASSERT(acc->kind == KN_BUF_LOCAL && acc->dtype == KN_DT_F32, "MMA accumulators are a LOCAL f32 buffer");
  KN_ASSERT(a->kind == KN_BUF_LOCAL && a->dtype == ab && b->kind == KN_BUF_LOCAL && b->dtype == ab,
            "MMA fragments are LOCAL buffers of the input dtype");
  check_index(acc_index);
  check_index(a_index);
  check_index(b_index);
  kn_stmt *s = gpu_stmt(c, KN_GPU_MMA);
  s->u.gpu.ab = ab;
  s->u.gpu.dst = acc;
  s->u.gpu.dst_index = acc_index;
  s->u.gpu.a = a;
  s->u.gpu.a_index = a_index;
  s->u.gpu.b = b;
  s->u.gpu.b_index = b_index;
  return s;
}

kn_stmt *kn_s_cp_async(kn_expr_ctx *c, kn_buffer *dst, kn_expr *dst_index, kn_buffer *src, kn_expr *src_index, int n,
                       kn_expr *pred) {
  KN_ASSERT(dst->kind == KN_BUF_SHARED && src->kind == KN_BUF_PARAM && dst->dtype == src->dtype,
            "cp.async copies a global buffer into a shared one of the same dtype");
  size_t bytes = kn_dtype_size(src->dtype) * (size_t)n;
  KN_ASSERT(bytes == 4 || bytes == 8 || bytes == 16, "cp.async copies 4, 8 or 16 bytes");
  KN_ASSERT(!pred || (pred->dtype == KN_DT_BOOL && pred->lanes == 1), "cp.async predicate is a scalar bool");
  check_index(dst_index);
  check_index(src_index);
  kn_stmt *s = gpu_stmt(c, KN_GPU_CP_ASYNC);
  s->u.gpu.dst = dst;
  s->u.gpu.dst_index = dst_index;
  s->u.gpu.a = src;
  s->u.gpu.a_index = src_index;
  s->u.gpu.n = n;
  s->u.gpu.pred = pred;
  return s;
}

kn_stmt *kn_s_ldmatrix(kn_expr_ctx *c, kn_buffer *dst, kn_expr *dst_index, kn_buffer *src, kn_expr *src_index,
                       int count, bool trans) {
  KN_ASSERT(dst->kind == KN_BUF_LOCAL && src->kind == KN_BUF_SHARED && dst->dtype == src->dtype,
            "ldmatrix loads a shared buffer into a local one of the same dtype");
  KN_ASSERT(kn_dtype_size(src->dtype) == 2, "ldmatrix loads 16-bit elements");
  KN_ASSERT(count == 1 || count == 2 || count == 4, "ldmatrix loads 1, 2 or 4 matrices");
  check_index(dst_index);
  check_index(src_index);
  kn_stmt *s = gpu_stmt(c, KN_GPU_LDMATRIX);
  s->u.gpu.dst = dst;
  s->u.gpu.dst_index = dst_index;
  s->u.gpu.a = src;
  s->u.gpu.a_index = src_index;
  s->u.gpu.n = count;
  s->u.gpu.trans = trans;
  return s;
}

kn_stmt *kn_s_gpu_map(kn_expr_ctx *c, kn_stmt *s, kn_expr *(*fn)(kn_expr *e, void *ctx), void *ctx) {
  KN_ASSERT(s->kind == KN_S_GPU, "kn_s_gpu_map maps GPU statements");
  kn_expr *e[4] = {s->u.gpu.dst_index, s->u.gpu.a_index, s->u.gpu.b_index, s->u.gpu.pred}, *m[4];
  bool same = true;
  for (int i = 0; i < 4; i++) {
    m[i] = e[i] ? fn(e[i], ctx) : NULL;
    same &= m[i] == e[i];
  }
  if (same) return s;
  kn_stmt *r = stmt(c, KN_S_GPU);
  *r = *s;
  r->u.gpu.dst_index = m[0];
  r->u.gpu.a_index = m[1];
  r->u.gpu.b_index = m[2];
  r->u.gpu.pred = m[3];
  return r;
}

bool kn_stmt_stores_to(const kn_stmt *s, const kn_buffer *b) {
  if (!s) return false;
  switch (s->kind) {
  case KN_S_FOR: return kn_stmt_stores_to(s->u.loop.body, b);
  case KN_S_STORE: return s->u.store.buffer == b;
  case KN_S_ALLOC: return kn_stmt_stores_to(s->u.alloc.body, b);
  case KN_S_SEQ:
    for (int i = 0; i < s->u.seq.n; i++)
      if (kn_stmt_stores_to(s->u.seq.stmts[i], b)) return true;
    return false;
  case KN_S_IF: return kn_stmt_stores_to(s->u.ifs.then_s, b) || kn_stmt_stores_to(s->u.ifs.else_s, b);
  case KN_S_LET: return kn_stmt_stores_to(s->u.let.body, b);
  case KN_S_PREFETCH: return false;
  case KN_S_GPU:
    return (s->u.gpu.op == KN_GPU_MMA || s->u.gpu.op == KN_GPU_CP_ASYNC || s->u.gpu.op == KN_GPU_LDMATRIX) &&
           s->u.gpu.dst == b;
  }
  return false;
}

/* ---- equality up to renaming ---- */

static void alpha_push(kn_alpha *m, const void *a, const void *b) {
  if (m->n == m->cap) {
    m->cap = m->cap ? 2 * m->cap : 64;
    m->a = realloc(m->a, sizeof *m->a * (size_t)m->cap);
    m->b = realloc(m->b, sizeof *m->b * (size_t)m->cap);
    KN_ASSERT(m->a && m->b, "out of memory");
  }
  m->a[m->n] = a;
  m->b[m->n++] = b;
}

static bool same_buffer_type(const kn_buffer *a, const kn_buffer *b) {
  return a->dtype == b->dtype && a->kind == b->kind && a->size == b->size;
}

static bool buffers_pair(const kn_alpha *m, const kn_buffer *a, const kn_buffer *b) {
  return !a == !b && (!a || kn_alpha_pairs(m, a, b));
}

static bool stmt_alpha_equal(const kn_stmt *a, const kn_stmt *b, kn_alpha *m) {
  if (!a || !b || a->kind != b->kind) return !a && !b;
  int mark = m->n;
  bool eq = false;
  switch (a->kind) {
  case KN_S_FOR:
    if (a->u.loop.kind != b->u.loop.kind || a->u.loop.dim != b->u.loop.dim ||
        !kn_e_equal_under(a->u.loop.min, b->u.loop.min, m) || !kn_e_equal_under(a->u.loop.extent, b->u.loop.extent, m))
      return false;
    alpha_push(m, a->u.loop.var, b->u.loop.var);
    eq = stmt_alpha_equal(a->u.loop.body, b->u.loop.body, m);
    break;
  case KN_S_STORE:
    return kn_alpha_pairs(m, a->u.store.buffer, b->u.store.buffer) &&
           kn_e_equal_under(a->u.store.index, b->u.store.index, m) &&
           kn_e_equal_under(a->u.store.value, b->u.store.value, m);
  case KN_S_ALLOC:
    if (!same_buffer_type(a->u.alloc.buffer, b->u.alloc.buffer)) return false;
    alpha_push(m, a->u.alloc.buffer, b->u.alloc.buffer);
    eq = stmt_alpha_equal(a->u.alloc.body, b->u.alloc.body, m);
    break;
  case KN_S_SEQ:
    if (a->u.seq.n != b->u.seq.n) return false;
    for (int i = 0; i < a->u.seq.n; i++)
      if (!stmt_alpha_equal(a->u.seq.stmts[i], b->u.seq.stmts[i], m)) return false;
    return true;
  case KN_S_IF:
    return kn_e_equal_under(a->u.ifs.cond, b->u.ifs.cond, m) && stmt_alpha_equal(a->u.ifs.then_s, b->u.ifs.then_s, m) &&
           stmt_alpha_equal(a->u.ifs.else_s, b->u.ifs.else_s, m);
  case KN_S_LET:
    if (!kn_e_equal_under(a->u.let.value, b->u.let.value, m)) return false;
    alpha_push(m, a->u.let.var, b->u.let.var);
    eq = stmt_alpha_equal(a->u.let.body, b->u.let.body, m);
    break;
  case KN_S_PREFETCH:
    return a->u.prefetch.level == b->u.prefetch.level && kn_alpha_pairs(m, a->u.prefetch.buffer, b->u.prefetch.buffer) &&
           kn_e_equal_under(a->u.prefetch.index, b->u.prefetch.index, m);
  case KN_S_GPU: {
    const kn_expr *ea[4] = {a->u.gpu.dst_index, a->u.gpu.a_index, a->u.gpu.b_index, a->u.gpu.pred};
    const kn_expr *eb[4] = {b->u.gpu.dst_index, b->u.gpu.a_index, b->u.gpu.b_index, b->u.gpu.pred};
    if (a->u.gpu.op != b->u.gpu.op || a->u.gpu.n != b->u.gpu.n || a->u.gpu.ab != b->u.gpu.ab ||
        a->u.gpu.trans != b->u.gpu.trans || !buffers_pair(m, a->u.gpu.dst, b->u.gpu.dst) ||
        !buffers_pair(m, a->u.gpu.a, b->u.gpu.a) || !buffers_pair(m, a->u.gpu.b, b->u.gpu.b))
      return false;
    for (int i = 0; i < 4; i++)
      if (!ea[i] != !eb[i] || (ea[i] && !kn_e_equal_under(ea[i], eb[i], m))) return false;
    return true;
  }
  }
  m->n = mark;
  return eq;
}

bool kn_kernel_alpha_equal(const kn_kernel *a, const kn_kernel *b) {
  if (a->n_params != b->n_params || a->gpu != b->gpu || a->parallel != b->parallel || a->rows != b->rows ||
      a->rows_batched != b->rows_batched || !a->batch != !b->batch)
    return false;
  kn_alpha m = {0};
  bool eq = true;
  for (int i = 0; i < a->n_params && eq; i++) {
    eq = same_buffer_type(a->params[i], b->params[i]);
    alpha_push(&m, a->params[i], b->params[i]);
  }
  if (a->batch) alpha_push(&m, a->batch, b->batch);
  eq = eq && stmt_alpha_equal(a->body, b->body, &m);
  free(m.a);
  free(m.b);
  return eq;
}

/* A cheap digest that equal kernels share, so that most unequal pairs are
 * told apart without walking their bodies. */
static uint64_t kernel_digest(const kn_kernel *k) {
  uint64_t h = (uint64_t)k->n_params * 0x9E3779B97F4A7C15ull;
  h ^= (uint64_t)k->gpu << 1 | (uint64_t)k->parallel << 2 | (uint64_t)k->rows_batched << 3 | (uint64_t)!k->batch << 4;
  h = h * 31 + (uint64_t)k->rows;
  for (int i = 0; i < k->n_params; i++) h = h * 31 + (uint64_t)k->params[i]->dtype;
  for (const kn_stmt *s = k->body; s; s = s->kind == KN_S_FOR ? s->u.loop.body : NULL) {
    int64_t extent;
    h = h * 31 + (uint64_t)s->kind;
    if (s->kind == KN_S_FOR && kn_e_is_const_int(s->u.loop.extent, &extent)) h = h * 31 + (uint64_t)extent;
  }
  return h;
}

int kn_kernels_group(const kn_kernel *const *ks, int n, int *first) {
  uint64_t *digest = malloc(sizeof *digest * (size_t)(n > 0 ? n : 1));
  int *leaders = malloc(sizeof *leaders * (size_t)(n > 0 ? n : 1));
  KN_ASSERT(digest && leaders, "out of memory");
  int n_groups = 0;
  for (int i = 0; i < n; i++) {
    digest[i] = kernel_digest(ks[i]);
    first[i] = i;
    for (int g = 0; g < n_groups; g++) {
      int j = leaders[g];
      if (ks[j] == ks[i] || (digest[j] == digest[i] && kn_kernel_alpha_equal(ks[j], ks[i]))) {
        first[i] = j;
        break;
      }
    }
    if (first[i] == i) leaders[n_groups++] = i;
  }
  free(digest);
  free(leaders);
  return n_groups;
}

static void pad(FILE *out, int indent) {
  for (int i = 0; i < indent; i++) fputs("  ", out);
}

static void print_at(FILE *out, const kn_buffer *b, const kn_expr *index) {
  fprintf(out, "%s[", b->name);
  kn_expr_print(index, out);
  fputc(']', out);
}

static void print_gpu(const kn_stmt *s, FILE *out, int indent) {
  pad(out, indent);
  switch (s->u.gpu.op) {
  case KN_GPU_BARRIER: fputs("barrier\n", out); return;
  case KN_GPU_CP_COMMIT: fputs("cp_async_commit\n", out); return;
  case KN_GPU_CP_WAIT: fprintf(out, "cp_async_wait %d\n", s->u.gpu.n); return;
  case KN_GPU_MMA:
    fprintf(out, "mma_m16n8k16.%s ", kn_dtype_name(s->u.gpu.ab));
    print_at(out, s->u.gpu.dst, s->u.gpu.dst_index);
    fputs(" += ", out);
    print_at(out, s->u.gpu.a, s->u.gpu.a_index);
    fputs(" x ", out);
    print_at(out, s->u.gpu.b, s->u.gpu.b_index);
    fputc('\n', out);
    return;
  case KN_GPU_CP_ASYNC:
    fputs("cp_async ", out);
    print_at(out, s->u.gpu.dst, s->u.gpu.dst_index);
    fprintf(out, " <- %d of ", s->u.gpu.n);
    print_at(out, s->u.gpu.a, s->u.gpu.a_index);
    if (s->u.gpu.pred) {
      fputs(" if ", out);
      kn_expr_print(s->u.gpu.pred, out);
    }
    fputc('\n', out);
    return;
  case KN_GPU_LDMATRIX:
    fprintf(out, "ldmatrix_x%d%s ", s->u.gpu.n, s->u.gpu.trans ? ".trans" : "");
    print_at(out, s->u.gpu.dst, s->u.gpu.dst_index);
    fputs(" <- rows at ", out);
    print_at(out, s->u.gpu.a, s->u.gpu.a_index);
    fputc('\n', out);
    return;
  }
}

void kn_stmt_print(const kn_stmt *s, FILE *out, int indent) {
  static const char *kinds[] = {"for", "parallel", "vectorized", "unrolled", "block", "thread"};
  static const char dims[] = "xyz";
  if (!s) return;
  switch (s->kind) {
  case KN_S_FOR:
    pad(out, indent);
    if (s->u.loop.kind == KN_FOR_BLOCK || s->u.loop.kind == KN_FOR_THREAD)
      fprintf(out, "%s.%c %s in [", kinds[s->u.loop.kind], dims[s->u.loop.dim], s->u.loop.var->name);
    else
      fprintf(out, "%s %s in [", kinds[s->u.loop.kind], s->u.loop.var->name);
    kn_expr_print(s->u.loop.min, out);
    fputs(", +", out);
    kn_expr_print(s->u.loop.extent, out);
    fputs("):\n", out);
    kn_stmt_print(s->u.loop.body, out, indent + 1);
    return;
  case KN_S_STORE:
    pad(out, indent);
    fprintf(out, "%s[", s->u.store.buffer->name);
    kn_expr_print(s->u.store.index, out);
    fputs("] = ", out);
    kn_expr_print(s->u.store.value, out);
    fputc('\n', out);
    return;
  case KN_S_ALLOC:
    pad(out, indent);
    fprintf(out, "alloc%s %s: %s[%lld]\n", s->u.alloc.buffer->kind == KN_BUF_SHARED ? " shared" : "",
            s->u.alloc.buffer->name,
            kn_dtype_name(s->u.alloc.buffer->dtype), (long long)s->u.alloc.buffer->size);
    kn_stmt_print(s->u.alloc.body, out, indent);
    return;
  case KN_S_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) kn_stmt_print(s->u.seq.stmts[i], out, indent);
    return;
  case KN_S_IF:
    pad(out, indent);
    fputs("if ", out);
    kn_expr_print(s->u.ifs.cond, out);
    fputs(":\n", out);
    kn_stmt_print(s->u.ifs.then_s, out, indent + 1);
    if (s->u.ifs.else_s) {
      pad(out, indent);
      fputs("else:\n", out);
      kn_stmt_print(s->u.ifs.else_s, out, indent + 1);
    }
    return;
  case KN_S_LET:
    pad(out, indent);
    fprintf(out, "let %s = ", s->u.let.var->name);
    kn_expr_print(s->u.let.value, out);
    fputc('\n', out);
    kn_stmt_print(s->u.let.body, out, indent);
    return;
  case KN_S_PREFETCH:
    pad(out, indent);
    fprintf(out, "prefetch %s[", s->u.prefetch.buffer->name);
    kn_expr_print(s->u.prefetch.index, out);
    fprintf(out, "] to L%d\n", s->u.prefetch.level);
    return;
  case KN_S_GPU: print_gpu(s, out, indent); return;
  }
}

void kn_kernel_print(const kn_kernel *k, FILE *out) {
  fprintf(out, "kernel %s(", k->name);
  for (int i = 0; i < k->n_params; i++)
    fprintf(out, "%s%s: %s*", i ? ", " : "", k->params[i]->name, kn_dtype_name(k->params[i]->dtype));
  fprintf(out, ")%s  # %s\n", k->gpu ? " gpu" : k->parallel ? " parallel" : "", k->nodes ? k->nodes : "");
  kn_stmt_print(k->body, out, 1);
}
