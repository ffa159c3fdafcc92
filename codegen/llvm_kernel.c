/* llvm_kernel.c — loop-IR statements and kernels -> LLVM functions.
 *
 * A kernel becomes two internal functions:
 *   NAME.body(T0* noalias p0, ..., i64 batch, i64 task, i64 ntasks)
 *     the loops; each parameter is noalias + nocapture (the pipeline
 *     guarantees distinct parameters never overlap) and readonly when the
 *     kernel never stores to it;
 *   NAME(i8** args, i64 batch, i64 task, i64 ntasks)
 *     the calling convention of ir/loop/loop.h: loads args[i] and calls the body
 *     (O3 inlines it, keeping the no-alias facts as scoped metadata).
 *
 * Loops are emitted guarded and rotated (test once, then a do-while with the
 * test at the latch) with an nsw induction variable. The outermost PARALLEL
 * loop runs [task * extent / ntasks, (task + 1) * extent / ntasks); it must
 * not be nested in another loop and there may be only one (tasks have no
 * barrier between them). PARALLEL loops inside it are serial. LOCAL buffers
 * are allocas in the entry block so SROA / mem2reg keep small accumulators
 * in registers. */
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_llvm.h"

static void push_var(kn_cg_fn *f, const kn_var *v, LLVMValueRef value, kn_range range) {
  if (f->n_vars == f->cap_vars) {
    f->cap_vars = f->cap_vars ? f->cap_vars * 2 : 32;
    f->vars = realloc(f->vars, sizeof *f->vars * (size_t)f->cap_vars);
    KN_ASSERT(f->vars, "out of memory");
  }
  f->vars[f->n_vars++] = (kn_cg_binding){v, value, range};
}

static void push_buf(kn_cg_fn *f, const kn_buffer *buf, LLVMValueRef ptr) {
  if (f->n_bufs == f->cap_bufs) {
    f->cap_bufs = f->cap_bufs ? f->cap_bufs * 2 : 32;
    f->bufs = realloc(f->bufs, sizeof *f->bufs * (size_t)f->cap_bufs);
    KN_ASSERT(f->bufs, "out of memory");
  }
  f->bufs[f->n_bufs++] = (kn_cg_bufmap){buf, ptr};
}

static LLVMValueRef i64c(kn_cg_fn *f, int64_t v) {
  return LLVMConstInt(LLVMInt64TypeInContext(f->m->ctx), (unsigned long long)v, 1);
}

static void emit_stmt(kn_cg_fn *f, const kn_stmt *s);

static void emit_for(kn_cg_fn *f, const kn_stmt *s) {
  kn_cg_dag_clear(&f->memo);
  LLVMValueRef min = kn_cg_expr(f, s->u.loop.min), extent = kn_cg_expr(f, s->u.loop.extent);
  KN_ASSERT(s->u.loop.kind == KN_FOR_SERIAL || s->u.loop.kind == KN_FOR_PARALLEL,
            "VECTORIZED / UNROLLED loop reached codegen (run kn_loop_finalize)");
  kn_range range = kn_range_loop_var(kn_cg_range(f, s->u.loop.min), kn_cg_range(f, s->u.loop.extent));
  bool split = s->u.loop.kind == KN_FOR_PARALLEL && f->parallel_depth == 0;
  LLVMValueRef start = min, end;
  if (split) {
    KN_ASSERT(f->n_split == 0, "a kernel may split only one PARALLEL loop across tasks");
    KN_ASSERT(f->loop_depth == 0, "the PARALLEL loop split across tasks is inside another loop");
    f->n_split++;
    LLVMValueRef lo = LLVMBuildSDiv(f->b, LLVMBuildNSWMul(f->b, f->task, extent, ""), f->ntasks, "");
    LLVMValueRef t1 = LLVMBuildNSWAdd(f->b, f->task, i64c(f, 1), "");
    LLVMValueRef up = LLVMBuildSDiv(f->b, LLVMBuildNSWMul(f->b, t1, extent, ""), f->ntasks, "");
    start = LLVMBuildNSWAdd(f->b, min, lo, "");
    end = LLVMBuildNSWAdd(f->b, min, up, "");
  } else {
    end = LLVMBuildNSWAdd(f->b, min, extent, "");
  }
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(f->b);
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(f->m->ctx, f->fn, s->u.loop.var->name);
  LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(f->m->ctx, f->fn, "");
  int64_t cext;
  if (!split && kn_e_is_const_int(s->u.loop.extent, &cext) && cext > 0)
    LLVMBuildBr(f->b, body);
  else
    LLVMBuildCondBr(f->b, LLVMBuildICmp(f->b, LLVMIntSLT, start, end, ""), body, exit);
  LLVMPositionBuilderAtEnd(f->b, body);
  LLVMValueRef iv = LLVMBuildPhi(f->b, LLVMInt64TypeInContext(f->m->ctx), s->u.loop.var->name);
  push_var(f, s->u.loop.var, iv, range);
  bool par = s->u.loop.kind == KN_FOR_PARALLEL;
  f->parallel_depth += par;
  f->loop_depth++;
  emit_stmt(f, s->u.loop.body);
  f->loop_depth--;
  f->parallel_depth -= par;
  f->n_vars--;
  LLVMValueRef next = LLVMBuildNSWAdd(f->b, iv, i64c(f, 1), "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(f->b);
  LLVMBuildCondBr(f->b, LLVMBuildICmp(f->b, LLVMIntSLT, next, end, ""), body, exit);
  LLVMValueRef in_vals[2] = {start, next};
  LLVMBasicBlockRef in_bbs[2] = {pre, latch};
  LLVMAddIncoming(iv, in_vals, in_bbs, 2);
  LLVMPositionBuilderAtEnd(f->b, exit);
  kn_cg_dag_clear(&f->memo);
}

static void emit_alloc(kn_cg_fn *f, const kn_stmt *s) {
  const kn_buffer *buf = s->u.alloc.buffer;
  KN_ASSERT(buf->kind == KN_BUF_LOCAL && buf->size > 0, "ALLOC of a bad buffer");
  LLVMBuilderRef eb = LLVMCreateBuilderInContext(f->m->ctx);
  LLVMValueRef first = LLVMGetFirstInstruction(f->entry);
  if (first)
    LLVMPositionBuilderBefore(eb, first);
  else
    LLVMPositionBuilderAtEnd(eb, f->entry);
  LLVMTypeRef elem = kn_cg_mem_type(f->m, buf->dtype, 1);
  LLVMTypeRef arr = LLVMArrayType(elem, (unsigned)buf->size);
  KN_ASSERT(buf->size <= (int64_t)UINT32_MAX, "LOCAL buffer too large");
  LLVMValueRef a = LLVMBuildAlloca(eb, arr, buf->name);
  LLVMSetAlignment(a, 64);
  LLVMValueRef ptr = LLVMBuildBitCast(eb, a, LLVMPointerType(elem, 0), "");
  LLVMDisposeBuilder(eb);
  push_buf(f, buf, ptr);
  emit_stmt(f, s->u.alloc.body);
  f->n_bufs--;
}

static void emit_stmt(kn_cg_fn *f, const kn_stmt *s) {
  if (!s) return;
  switch (s->kind) {
  case KN_S_FOR: emit_for(f, s); return;
  case KN_S_STORE: {
    kn_cg_dag_clear(&f->memo);
    LLVMValueRef v = kn_cg_expr(f, s->u.store.value);
    kn_cg_store(f, s->u.store.buffer, s->u.store.index, v);
    kn_cg_dag_clear(&f->memo);
    return;
  }
  case KN_S_ALLOC: emit_alloc(f, s); return;
  case KN_S_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) emit_stmt(f, s->u.seq.stmts[i]);
    return;
  case KN_S_IF: {
    kn_cg_dag_clear(&f->memo);
    LLVMValueRef c = kn_cg_expr(f, s->u.ifs.cond);
    kn_cg_dag_clear(&f->memo);
    LLVMBasicBlockRef then_bb = LLVMAppendBasicBlockInContext(f->m->ctx, f->fn, "then");
    LLVMBasicBlockRef else_bb = s->u.ifs.else_s ? LLVMAppendBasicBlockInContext(f->m->ctx, f->fn, "else") : NULL;
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(f->m->ctx, f->fn, "");
    LLVMBuildCondBr(f->b, c, then_bb, else_bb ? else_bb : join);
    LLVMPositionBuilderAtEnd(f->b, then_bb);
    emit_stmt(f, s->u.ifs.then_s);
    LLVMBuildBr(f->b, join);
    if (else_bb) {
      LLVMPositionBuilderAtEnd(f->b, else_bb);
      emit_stmt(f, s->u.ifs.else_s);
      LLVMBuildBr(f->b, join);
    }
    LLVMPositionBuilderAtEnd(f->b, join);
    kn_cg_dag_clear(&f->memo);
    return;
  }
  case KN_S_LET: {
    kn_cg_dag_clear(&f->memo);
    kn_range range = kn_cg_range(f, s->u.let.value);
    LLVMValueRef v = kn_cg_expr(f, s->u.let.value);
    push_var(f, s->u.let.var, v, range);
    emit_stmt(f, s->u.let.body);
    f->n_vars--;
    kn_cg_dag_clear(&f->memo);
    return;
  }
  case KN_S_PREFETCH:
    kn_cg_dag_clear(&f->memo);
    kn_cg_prefetch(f, s->u.prefetch.buffer, s->u.prefetch.index, s->u.prefetch.level);
    kn_cg_dag_clear(&f->memo);
    return;
  case KN_S_GPU: KN_UNREACHABLE("GPU statement in a CPU kernel");
  }
  KN_UNREACHABLE("unknown statement kind");
}

static void add_param_attr(kn_cg_module *m, LLVMValueRef fn, unsigned idx, const char *name) {
  unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
  KN_ASSERT(kind != 0, name);
  LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(m->ctx, kind, 0));
}

LLVMValueRef kn_cg_emit_kernel(kn_cg_module *m, const kn_kernel *k) {
  LLVMContextRef ctx = m->ctx;
  LLVMTypeRef i64 = LLVMInt64TypeInContext(ctx), i8p = LLVMPointerType(LLVMInt8TypeInContext(ctx), 0);
  int n = k->n_params;
  LLVMTypeRef *ptys = malloc(sizeof *ptys * (size_t)(n + 3));
  KN_ASSERT(ptys, "out of memory");
  for (int i = 0; i < n; i++) {
    KN_ASSERT(k->params[i]->kind == KN_BUF_PARAM, "kernel parameter is not a PARAM buffer");
    ptys[i] = LLVMPointerType(kn_cg_mem_type(m, k->params[i]->dtype, 1), 0);
  }
  ptys[n] = ptys[n + 1] = ptys[n + 2] = i64;
  LLVMTypeRef body_ty = LLVMFunctionType(LLVMVoidTypeInContext(ctx), ptys, (unsigned)n + 3, 0);
  char *body_name = malloc(strlen(k->name) + 8);
  KN_ASSERT(body_name, "out of memory");
  sprintf(body_name, "%s.body", k->name);
  LLVMValueRef body_fn = LLVMAddFunction(m->mod, body_name, body_ty);
  free(body_name);
  LLVMSetLinkage(body_fn, LLVMInternalLinkage);
  kn_cg_set_fn_attrs(m, body_fn);
  for (int i = 0; i < n; i++) {
    add_param_attr(m, body_fn, (unsigned)i + 1, "noalias");
    add_param_attr(m, body_fn, (unsigned)i + 1, "nocapture");
    if (!kn_stmt_stores_to(k->body, k->params[i])) add_param_attr(m, body_fn, (unsigned)i + 1, "readonly");
    LLVMSetValueName2(LLVMGetParam(body_fn, (unsigned)i), k->params[i]->name, strlen(k->params[i]->name));
  }

  kn_cg_fn f = {0};
  f.m = m;
  f.kernel = k;
  f.fn = body_fn;
  f.b = LLVMCreateBuilderInContext(ctx);
  f.entry = LLVMAppendBasicBlockInContext(ctx, body_fn, "entry");
  LLVMPositionBuilderAtEnd(f.b, f.entry);
  for (int i = 0; i < n; i++) push_buf(&f, k->params[i], LLVMGetParam(body_fn, (unsigned)i));
  f.batch = LLVMGetParam(body_fn, (unsigned)n);
  f.task = LLVMGetParam(body_fn, (unsigned)n + 1);
  f.ntasks = LLVMGetParam(body_fn, (unsigned)n + 2);
  emit_stmt(&f, k->body);
  LLVMBuildRetVoid(f.b);
  LLVMDisposeBuilder(f.b);
  free(f.vars);
  free(f.bufs);
  kn_cg_dag_free(&f.memo);

  /* the ABI wrapper */
  LLVMTypeRef wparams[4] = {LLVMPointerType(i8p, 0), i64, i64, i64};
  LLVMTypeRef wty = LLVMFunctionType(LLVMVoidTypeInContext(ctx), wparams, 4, 0);
  LLVMValueRef w = LLVMAddFunction(m->mod, k->name, wty);
  LLVMSetLinkage(w, LLVMInternalLinkage);
  kn_cg_set_fn_attrs(m, w);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, w, "entry"));
  LLVMValueRef *cargs = malloc(sizeof *cargs * (size_t)(n + 3));
  KN_ASSERT(cargs, "out of memory");
  LLVMValueRef args = LLVMGetParam(w, 0);
  for (int i = 0; i < n; i++) {
    LLVMValueRef idx = LLVMConstInt(i64, (unsigned long long)i, 0);
    LLVMValueRef slot = LLVMBuildInBoundsGEP2(b, i8p, args, &idx, 1, "");
    LLVMValueRef raw = LLVMBuildLoad2(b, i8p, slot, "");
    LLVMSetAlignment(raw, 8);
    cargs[i] = LLVMBuildBitCast(b, raw, ptys[i], k->params[i]->name);
  }
  for (int i = 0; i < 3; i++) cargs[n + i] = LLVMGetParam(w, (unsigned)i + 1);
  LLVMBuildCall2(b, body_ty, body_fn, cargs, (unsigned)n + 3, "");
  LLVMBuildRetVoid(b);
  LLVMDisposeBuilder(b);
  free(cargs);
  free(ptys);
  return w;
}
