/* cuda_emit.c — GPU loop-IR kernels -> one headerless CUDA C translation
 * unit (kn_cuda_emit).
 *
 * Requires: GPU kernels (loop.h's shape, checked by kn_cuda_launch_info).
 * Guarantees, per kernel:
 *   extern "C" __global__ void __launch_bounds__(THREADS)
 *   NAME(T0 *__restrict__ p0, ..., long long batch)
 * with read-only parameters `const`; BLOCK / THREAD loop variables are
 * blockIdx / threadIdx (a THREAD loop narrower than the launch is guarded);
 * LOCAL buffers are thread-private arrays (registers where every index is
 * constant), SHARED ones static __shared__ arrays, or slices of one dynamic
 * array past 48 KiB; GPU statements are __syncthreads() and inline PTX
 * (mma.sync m16n8k16, ldmatrix, cp.async with zero fill). Expressions follow
 * codegen/cuda_expr.c. Anything it cannot emit is a diagnostic naming the
 * kernel, never a crash: the kernel is then left out and the call fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cuda_emit.h"

static void emit_stmt(kn_cu *c, const kn_stmt *s);

/* A comment-safe copy of s: no '*' (so no end of comment), printable only. */
static const char *comment_text(kn_cu *c, const char *s) {
  char *r = kn_cu_fmt(c, "%.200s", s ? s : "");
  for (char *p = r; *p; p++)
    if (*p == '*' || *p < 0x20 || *p > 0x7e) *p = '_';
  return r;
}

/* Ends a statement: its temporaries (in `pre`, one level deeper) and then
 * its last line, in braces when there are temporaries. */
static void stmt_end(kn_cu *c, kn_cg_sbuf *pre, const char *last) {
  bool scoped = pre->n > 0;
  if (scoped) {
    kn_cu_line(c, c->out, "{");
    kn_cg_sbuf_append(c->out, pre->s, pre->n);
  }
  c->indent += scoped;
  kn_cu_line(c, c->out, "%s", last);
  c->indent -= scoped;
  if (scoped) kn_cu_line(c, c->out, "}");
  kn_cg_sbuf_free(pre);
}

static const char *buffer(kn_cu *c, const kn_buffer *b) {
  const kn_cu_name *n = kn_cu_lookup(c, b);
  if (n) return n->name;
  kn_cu_fail(c, "buffer '%s' is used outside its kernel parameters / ALLOC", b->name ? b->name : "");
  return "kn_missing";
}

/* Is storing `value` into b a copy of 16-bit float bits? Then the bits are
 * copied, not converted to f32 and back (two cvt per element, where MMA
 * fragments are filled): the same value, NaN payloads aside, on which the
 * back ends already differ (LLVM folds the f16 pair away, the interpreter
 * and bf16 rounding quiet a signalling NaN). */
static bool is_bit_copy(const kn_buffer *b, const kn_expr *value) {
  return (b->dtype == KN_DT_F16 || b->dtype == KN_DT_BF16) && value->kind == KN_E_LOAD && value->lanes == 1 &&
         value->u.load.buffer && value->u.load.buffer->dtype == b->dtype;
}

static void emit_store(kn_cu *c, const kn_stmt *s) {
  const kn_buffer *b = s->u.store.buffer;
  kn_cg_sbuf pre = {0};
  const kn_expr *es[2] = {s->u.store.index, s->u.store.value};
  c->indent++;
  kn_cu_stmt_begin(c, &pre, es, 2);
  if (s->u.store.index->lanes != 1 || s->u.store.value->lanes != 1) kn_cu_fail(c, "a vector store (GPU schedules emit scalars)");
  if (!kn_cu_mem_type(b->dtype)) kn_cu_fail(c, "buffer '%s' has no valid dtype", b->name ? b->name : "");
  const kn_expr *value = s->u.store.value;
  const char *v, *i = kn_cu_expr(c, s->u.store.index);
  if (is_bit_copy(b, value))
    v = kn_cu_fmt(c, "%s[%s]", buffer(c, value->u.load.buffer), kn_cu_expr(c, value->u.load.index));
  else
    v = c->failed ? "0" : kn_cu_to_mem(c, b->dtype, kn_cu_expr(c, value));
  const char *name = buffer(c, b);
  c->indent--;
  stmt_end(c, &pre, kn_cu_fmt(c, "%s[%s] = %s;", name, i, v));
}

/* Opens a statement whose header (loop, if, let) reads es[0..n): temporaries
 * and the header go into braces the caller closes with close_scope. */
static void open_scope(kn_cu *c, kn_cg_sbuf *pre, const kn_expr *const *es, int n) {
  kn_cu_line(c, c->out, "{");
  c->indent++;
  kn_cu_stmt_begin(c, pre, es, n);
}

static void close_scope(kn_cu *c) {
  c->indent--;
  kn_cu_line(c, c->out, "}");
}

static bool fits_int(kn_range r) { return kn_range_bounded(r) && r.lo >= INT32_MIN && r.hi < INT32_MAX; }

static void emit_serial(kn_cu *c, const kn_stmt *s) {
  kn_cg_sbuf pre = {0};
  const kn_expr *es[2] = {s->u.loop.min, s->u.loop.extent};
  open_scope(c, &pre, es, 2);
  kn_range range = kn_range_loop_var(kn_cu_range(c, s->u.loop.min), kn_cu_range(c, s->u.loop.extent));
  const char *T = fits_int(range) && fits_int(kn_cu_range(c, s->u.loop.extent)) ? "int" : "long long";
  const char *v = kn_cu_var_name(c, s->u.loop.var);
  const char *min = kn_cu_expr(c, s->u.loop.min), *ext = kn_cu_expr(c, s->u.loop.extent);
  int end = c->next_temp++;
  kn_cu_line(c, &pre, "for (%s %s = (%s)%s, t%d = %s + (%s)%s; %s < t%d; %s++) {", T, v, T, min, end, v, T, ext, v, end, v);
  kn_cg_sbuf_append(c->out, pre.s, pre.n);
  kn_cg_sbuf_free(&pre);
  kn_cu_push_name(c, s->u.loop.var, v, range);
  c->indent++;
  emit_stmt(c, s->u.loop.body);
  c->indent--;
  c->n_names--;
  kn_cu_line(c, c->out, "}");
  close_scope(c);
}

/* BLOCK / THREAD loops: the variable is the block / thread index (plus a
 * minimum, when one is given); a THREAD loop narrower than the launch runs
 * on the first `extent` threads of its dimension only. */
static void emit_bound(kn_cu *c, const kn_stmt *s) {
  bool thread = s->u.loop.kind == KN_FOR_THREAD;
  int dim = s->u.loop.dim;
  kn_cg_sbuf pre = {0};
  const kn_expr *es[2] = {s->u.loop.min, s->u.loop.extent};
  open_scope(c, &pre, es, 2);
  const char *v = kn_cu_var_name(c, s->u.loop.var);
  kn_range ext = kn_cu_range(c, s->u.loop.extent);
  if (!thread) ext.hi = ext.has_hi && ext.hi < INT32_MAX ? ext.hi : INT32_MAX, ext.has_hi = true;
  kn_range range = kn_range_loop_var(kn_cu_range(c, s->u.loop.min), ext);
  const char *min = kn_cu_expr(c, s->u.loop.min);
  const char *idx = kn_cu_fmt(c, "(int)%s.%c", thread ? "threadIdx" : "blockIdx", "xyz"[dim]);
  int64_t m, e;
  bool zero = kn_e_is_const_int(s->u.loop.min, &m) && m == 0;
  const char *T = fits_int(range) ? "int" : "long long";
  kn_cu_line(c, &pre, "[[maybe_unused]] const %s %s = %s%s%s;", T, v, zero ? "" : min, zero ? "" : " + ", idx);
  bool guard = thread && kn_e_is_const_int(s->u.loop.extent, &e) && e < c->launch.block[dim];
  const char *cond = guard ? kn_cu_fmt(c, "threadIdx.%c < %lldu", "xyz"[dim], (long long)e) : NULL;
  if (thread && c->thread_depth == 0) { /* a nest's top: launched dims it leaves unbound run on thread 0 */
    int dims = kn_cu_nest_dims(s);
    for (int d = 0; d < 3; d++)
      if (!(dims & 1 << d) && c->launch.block[d] > 1)
        cond = kn_cu_fmt(c, "%s%sthreadIdx.%c == 0u", cond ? cond : "", cond ? " && " : "", "xyz"[d]);
  }
  guard = cond != NULL;
  if (guard) kn_cu_line(c, &pre, "if (%s) {", cond);
  kn_cg_sbuf_append(c->out, pre.s, pre.n);
  kn_cg_sbuf_free(&pre);
  kn_cu_push_name(c, s->u.loop.var, v, range);
  c->indent += guard;
  c->thread_depth += thread;
  emit_stmt(c, s->u.loop.body);
  c->thread_depth -= thread;
  c->indent -= guard;
  c->n_names--;
  if (guard) kn_cu_line(c, c->out, "}");
  close_scope(c);
}

static void emit_for(kn_cu *c, const kn_stmt *s) {
  switch (s->u.loop.kind) {
  case KN_FOR_SERIAL: emit_serial(c, s); return;
  case KN_FOR_BLOCK:
  case KN_FOR_THREAD: emit_bound(c, s); return;
  default: kn_cu_fail(c, "a PARALLEL / VECTORIZED / UNROLLED loop in a GPU kernel");
  }
}

static void emit_let(kn_cu *c, const kn_stmt *s) {
  kn_cg_sbuf pre = {0};
  const kn_expr *es[1] = {s->u.let.value};
  open_scope(c, &pre, es, 1);
  const kn_expr *value = s->u.let.value;
  const char *v = kn_cu_var_name(c, s->u.let.var);
  const char *text = kn_cu_expr(c, value);
  kn_range range = value->dtype == KN_DT_I64 ? kn_cu_range(c, value) : kn_range_unknown();
  const char *T = value->dtype == KN_DT_I64 && fits_int(range) ? "int" : kn_cu_reg_type(value->dtype);
  kn_cu_line(c, &pre, "[[maybe_unused]] const %s %s = %s;", T ? T : "int", v, text);
  kn_cg_sbuf_append(c->out, pre.s, pre.n);
  kn_cg_sbuf_free(&pre);
  kn_cu_push_name(c, s->u.let.var, v, range);
  emit_stmt(c, s->u.let.body);
  c->n_names--;
  close_scope(c);
}

static void emit_if(kn_cu *c, const kn_stmt *s) {
  kn_cg_sbuf pre = {0};
  const kn_expr *es[1] = {s->u.ifs.cond};
  open_scope(c, &pre, es, 1);
  kn_cu_line(c, &pre, "if (%s) {", kn_cu_expr(c, s->u.ifs.cond));
  kn_cg_sbuf_append(c->out, pre.s, pre.n);
  kn_cg_sbuf_free(&pre);
  c->indent++;
  emit_stmt(c, s->u.ifs.then_s);
  c->indent--;
  if (s->u.ifs.else_s) {
    kn_cu_line(c, c->out, "} else {");
    c->indent++;
    emit_stmt(c, s->u.ifs.else_s);
    c->indent--;
  }
  kn_cu_line(c, c->out, "}");
  close_scope(c);
}

static void emit_alloc(kn_cu *c, const kn_stmt *s) {
  const kn_buffer *b = s->u.alloc.buffer;
  const char *T = kn_cu_mem_type(b->dtype);
  if (!T || b->size <= 0) {
    kn_cu_fail(c, "buffer '%s' has no size or no valid dtype", b->name ? b->name : "");
    return;
  }
  const char *note = comment_text(c, b->name);
  const char *name;
  kn_cu_line(c, c->out, "{");
  c->indent++;
  if (b->kind == KN_BUF_LOCAL) {
    name = kn_cu_fmt(c, "l%d", c->next_local++);
    kn_cu_line(c, c->out, "%s %s[%lld]; /* %s */", T, name, (long long)b->size, note);
  } else if (c->launch.shared_bytes == 0) {
    name = kn_cu_fmt(c, "s%d", c->next_shared++);
    kn_cu_line(c, c->out, "__shared__ __align__(%d) %s %s[%lld]; /* %s */", KN_CU_SHARED_ALIGN, T, name,
               (long long)b->size, note);
  } else { /* a slice of the dynamic array, at the offset kn_cuda_launch_info counted */
    name = kn_cu_fmt(c, "s%d", c->next_shared++);
    kn_cu_line(c, c->out, "%s *const %s = (%s *)(kn_smem + %lld); /* %s: %lld elements */", T, name, T,
               (long long)c->smem_offset, note, (long long)b->size);
    int64_t bytes = b->size * (int64_t)kn_dtype_size(b->dtype);
    c->smem_offset += (bytes + KN_CU_SHARED_ALIGN - 1) / KN_CU_SHARED_ALIGN * KN_CU_SHARED_ALIGN;
  }
  kn_cu_push_name(c, b, name, kn_range_unknown());
  emit_stmt(c, s->u.alloc.body);
  c->n_names--;
  close_scope(c);
}

/* mma.sync m16n8k16: fragment elements 2j and 2j+1 share 32-bit register j,
 * the even one in the low half (ir/loop/mma.h). */
static void emit_mma(kn_cu *c, const kn_stmt *s, kn_cg_sbuf *pre) {
  const char *ab = s->u.gpu.ab == KN_DT_BF16 ? "bf16" : "f16";
  const char *acc = buffer(c, s->u.gpu.dst), *a = buffer(c, s->u.gpu.a), *b = buffer(c, s->u.gpu.b);
  const char *ci = kn_cu_expr(c, s->u.gpu.dst_index), *ai = kn_cu_expr(c, s->u.gpu.a_index);
  const char *bi = kn_cu_expr(c, s->u.gpu.b_index);
  kn_cu_line(c, pre, "asm(\"mma.sync.aligned.m16n8k16.row.col.f32.%s.%s.f32 {%%0, %%1, %%2, %%3}, "
                     "{%%4, %%5, %%6, %%7}, {%%8, %%9}, {%%0, %%1, %%2, %%3};\"", ab, ab);
  kn_cu_line(c, pre, "    : \"+f\"(%s[%s + 0]), \"+f\"(%s[%s + 1]), \"+f\"(%s[%s + 2]), \"+f\"(%s[%s + 3])", acc, ci, acc,
             ci, acc, ci, acc, ci);
  kn_cg_sbuf regs = {0};
  for (int j = 0; j < 4; j++)
    kn_cg_sbuf_printf(&regs, "%s\"r\"(kn_cu_pack2(%s[%s + %d], %s[%s + %d]))", j ? ", " : "", a, ai, 2 * j, a, ai,
                      2 * j + 1);
  for (int j = 0; j < 2; j++)
    kn_cg_sbuf_printf(&regs, ", \"r\"(kn_cu_pack2(%s[%s + %d], %s[%s + %d]))", b, bi, 2 * j, b, bi, 2 * j + 1);
  kn_cu_line(c, pre, "    : %s);", regs.s);
  kn_cg_sbuf_free(&regs);
}

/* cp.async: 16 bytes bypass L1 (.cg), 4 / 8 go through it (.ca, the only
 * form for them). A false predicate copies 0 source bytes, so the
 * destination is zero-filled, and reads from the buffer's base instead of
 * an address that may be out of bounds. */
static void emit_cp_async(kn_cu *c, const kn_stmt *s, kn_cg_sbuf *pre) {
  int bytes = (int)kn_dtype_size(s->u.gpu.dst->dtype) * s->u.gpu.n;
  const char *dst = buffer(c, s->u.gpu.dst), *src = buffer(c, s->u.gpu.a);
  const char *di = kn_cu_expr(c, s->u.gpu.dst_index), *si = kn_cu_expr(c, s->u.gpu.a_index);
  const char *op = bytes == 16 ? "cg" : "ca";
  kn_cu_line(c, pre, "const unsigned int kd = (unsigned int)__cvta_generic_to_shared(&%s[%s]);", dst, di);
  if (!s->u.gpu.pred) {
    kn_cu_line(c, pre, "asm volatile(\"cp.async.%s.shared.global [%%0], [%%1], %d;\" :: \"r\"(kd), \"l\"(&%s[%s]) : \"memory\");",
               op, bytes, src, si);
    return;
  }
  kn_cu_line(c, pre, "const bool kp = %s;", kn_cu_expr(c, s->u.gpu.pred));
  kn_cu_line(c, pre, "const void *ks = kp ? (const void *)&%s[%s] : (const void *)%s;", src, si, src);
  kn_cu_line(c, pre, "asm volatile(\"cp.async.%s.shared.global [%%0], [%%1], %d, %%2;\" :: \"r\"(kd), \"l\"(ks), \"r\"(kp ? %d : 0) : \"memory\");",
             op, bytes, bytes);
}

/* ldmatrix: the row address as a shared-window address (as cp.async's),
 * each 32-bit result register unpacked into two 16-bit elements, the even
 * one from the low half (ir/loop/mma.h); the compiler folds the unpacking
 * into the MMA's packing. "memory": it reads shared memory other threads wrote, so
 * it stays after the barrier that orders those writes. */
static void emit_ldmatrix(kn_cu *c, const kn_stmt *s, kn_cg_sbuf *pre) {
  int count = s->u.gpu.n;
  const char *dst = buffer(c, s->u.gpu.dst), *src = buffer(c, s->u.gpu.a);
  const char *di = kn_cu_expr(c, s->u.gpu.dst_index), *si = kn_cu_expr(c, s->u.gpu.a_index);
  kn_cu_line(c, pre, "const unsigned int ka = (unsigned int)__cvta_generic_to_shared(&%s[%s]);", src, si);
  kn_cg_sbuf regs = {0}, outs = {0};
  for (int j = 0; j < count; j++) {
    kn_cg_sbuf_printf(&regs, "%s%%%d", j ? ", " : "", j);
    kn_cg_sbuf_printf(&outs, "%s\"=r\"(kr[%d])", j ? ", " : "", j);
  }
  kn_cu_line(c, pre, "unsigned int kr[%d];", count);
  kn_cu_line(c, pre, "asm volatile(\"ldmatrix.sync.aligned.m8n8.x%d%s.shared.b16 {%s}, [%%%d];\"", count,
             s->u.gpu.trans ? ".trans" : "", regs.s, count);
  kn_cu_line(c, pre, "    : %s : \"r\"(ka) : \"memory\");", outs.s);
  for (int j = 0; j < count; j++) {
    kn_cu_line(c, pre, "%s[%s + %d] = (unsigned short)kr[%d];", dst, di, 2 * j, j);
    kn_cu_line(c, pre, "%s[%s + %d] = (unsigned short)(kr[%d] >> 16);", dst, di, 2 * j + 1, j);
  }
  kn_cg_sbuf_free(&regs);
  kn_cg_sbuf_free(&outs);
}

static void emit_gpu(kn_cu *c, const kn_stmt *s) {
  switch (s->u.gpu.op) {
  case KN_GPU_BARRIER: kn_cu_line(c, c->out, "__syncthreads();"); return;
  case KN_GPU_CP_COMMIT: kn_cu_line(c, c->out, "asm volatile(\"cp.async.commit_group;\" ::: \"memory\");"); return;
  case KN_GPU_CP_WAIT:
    kn_cu_line(c, c->out, "asm volatile(\"cp.async.wait_group %d;\" ::: \"memory\");", s->u.gpu.n);
    return;
  case KN_GPU_MMA:
  case KN_GPU_CP_ASYNC:
  case KN_GPU_LDMATRIX: break;
  default: kn_cu_fail(c, "unknown GPU statement %d", (int)s->u.gpu.op); return;
  }
  kn_cg_sbuf pre = {0};
  const kn_expr *es[4] = {s->u.gpu.dst_index, s->u.gpu.a_index, s->u.gpu.b_index, s->u.gpu.pred};
  open_scope(c, &pre, es, 4);
  if (s->u.gpu.op == KN_GPU_MMA) emit_mma(c, s, &pre);
  else if (s->u.gpu.op == KN_GPU_LDMATRIX) emit_ldmatrix(c, s, &pre);
  else emit_cp_async(c, s, &pre);
  kn_cg_sbuf_append(c->out, pre.s, pre.n);
  kn_cg_sbuf_free(&pre);
  close_scope(c);
}

static void emit_stmt(kn_cu *c, const kn_stmt *s) {
  if (!s || c->failed) return;
  switch (s->kind) {
  case KN_S_FOR: emit_for(c, s); return;
  case KN_S_STORE: emit_store(c, s); return;
  case KN_S_ALLOC: emit_alloc(c, s); return;
  case KN_S_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) emit_stmt(c, s->u.seq.stmts[i]);
    return;
  case KN_S_IF: emit_if(c, s); return;
  case KN_S_LET: emit_let(c, s); return;
  case KN_S_PREFETCH: return; /* a CPU cache hint: nothing to do on the GPU */
  case KN_S_GPU: emit_gpu(c, s); return;
  }
  kn_cu_fail(c, "unknown statement kind %d", (int)s->kind);
}

static void emit_signature(kn_cu *c) {
  const kn_kernel *k = c->k;
  int threads = c->launch.block[0] * c->launch.block[1] * c->launch.block[2];
  kn_cg_sbuf_printf(c->out, "/* kernel %s: %s */\n", k->name, comment_text(c, k->nodes));
  kn_cg_sbuf_printf(c->out, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", threads, k->name);
  for (int i = 0; i < k->n_params; i++) {
    const kn_buffer *p = k->params[i];
    const char *T = kn_cu_mem_type(p->dtype);
    if (p->kind != KN_BUF_PARAM || !T) {
      kn_cu_fail(c, "parameter %d is not a PARAM buffer of a supported type", i);
      T = "void";
    }
    bool ro = !kn_stmt_stores_to(k->body, p);
    const char *name = kn_cu_fmt(c, "p%d", i);
    kn_cg_sbuf_printf(c->out, "%s%s *__restrict__ %s, ", ro ? "const " : "", T, name);
    kn_cu_push_name(c, p, name, kn_range_unknown());
  }
  kn_cg_sbuf_printf(c->out, "long long batch) {\n");
  if (c->launch.shared_bytes > 0)
    kn_cg_sbuf_printf(c->out, "  extern __shared__ __align__(%d) unsigned char kn_smem[]; /* %lld bytes */\n",
                      KN_CU_SHARED_ALIGN, (long long)c->launch.shared_bytes);
}

/* Appends kernel k to `out`; 0, or -1 with a diagnostic (nothing appended).
 * Sets *uses_f8 when it calls a float8 / float4e2m1 conversion. */
static int emit_kernel(kn_cg_sbuf *out, const kn_kernel *k, bool *uses_f8, kn_diag *d) {
  kn_cg_sbuf text = {0};
  kn_cu c = {.out = &text, .k = k, .d = d};
  kn_arena_init(&c.strings);
  int rc = kn_cuda_launch_info(k, &c.launch, d);
  if (rc == 0) {
    emit_signature(&c);
    c.indent = 1;
    emit_stmt(&c, k->body);
    kn_cg_sbuf_printf(&text, "}\n\n");
    rc = c.failed ? -1 : 0;
  }
  if (rc == 0) kn_cg_sbuf_append(out, text.s, text.n);
  *uses_f8 = *uses_f8 || c.uses_f8;
  kn_cg_sbuf_free(&text);
  kn_cg_dag_free(&c.dag);
  free(c.names);
  kn_arena_free(&c.strings);
  return rc;
}

int kn_cuda_emit(const kn_kernel *const *ks, int n, kn_arena *A, const char **source, kn_diag *d) {
  kn_cg_sbuf out = {0}, kernels = {0};
  int rc = 0;
  bool uses_f8 = false;
  *source = NULL;
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < i; j++)
      if (ks[j]->name && ks[i]->name && !strcmp(ks[i]->name, ks[j]->name)) {
        rc = kn_diag_error(d, "cuda: two kernels are named '%s'", ks[i]->name);
        break;
      }
    if (emit_kernel(&kernels, ks[i], &uses_f8, d) < 0) rc = -1; /* go on: report every kernel that fails */
  }
  kn_cg_sbuf_printf(&out, "/* Generated by kiln: CUDA C for NVRTC, needing no header. */\n");
  kn_cg_sbuf_append(&out, kn_cu_prelude, strlen(kn_cu_prelude));
  if (uses_f8) { /* per need: most models have no float8, and NVRTC parses every line */
    kn_cg_sbuf_append(&out, kn_cu_f8_head, strlen(kn_cu_f8_head));
    kn_cg_sbuf_append(&out, (const char *)kn_cu_f8_text, kn_cu_f8_text_size - 1);
    kn_cg_sbuf_append(&out, kn_cu_f8_tail, strlen(kn_cu_f8_tail));
  }
  if (kernels.n) kn_cg_sbuf_append(&out, kernels.s, kernels.n);
  if (rc == 0) *source = kn_arena_strdup(A, out.s);
  kn_cg_sbuf_free(&kernels);
  kn_cg_sbuf_free(&out);
  return rc;
}
