/* package.c — plan -> artifact: one LLVM module holding every kernel, the
 * constants (internal, 64-byte aligned, .rodata), the plan tables and the
 * kiln_artifact descriptor, plus the generated PREFIX_run / PREFIX_set_threads /
 * PREFIX_run_profiled wrappers; then object emission, linking with the embedded runtime, the
 * header, and the atomic rename into place.
 *
 * Requires: a plan whose steps reference finalized kernels (ir/loop/loop.h) and
 * whose argument tables are consistent; violations of the ABI bounds (too
 * many kernel arguments, bad indices) are reported as diagnostics.
 * Guarantees: the descriptor layout is exactly include/kiln/artifact.h on
 * LP64 targets (every pointer field is emitted as i8*); only PREFIX_* (and
 * kiln_artifact_v1 in a .so) are exported.
 *
 * GPU plans (kn_cg_package_cuda) take the same path on the host's target,
 * with these differences: no CPU kernel is emitted (steps' fn is NULL); the
 * module images are constants; kiln_gpu holds them with the launch shapes,
 * the grid function (package_cuda.c) and the sizes the runtime needs; the
 * descriptor has the ABI 1.4 fields; the entry points call the GPU runtime
 * (rt/runtime_cuda.c), which is linked in place of rt/runtime.c. CPU
 * artifacts keep abi_minor 3 and the 1.3 layout, byte for byte, unless a
 * step checks indices (--check-indices): then abi_minor 5 and the 1.4 layout
 * with last_error and gpu NULL (kn_plan_abi_minor). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt/runtime.h"
#include "codegen/cg_llvm.h"
#include "codegen/cuda.h"
#include "codegen/package.h"
#include "rt/runtime_cuda.h"

extern const unsigned char kn_rt_object_host[]; /* rt/kn_rt_blob.c (generated) */
extern const size_t kn_rt_object_host_size;
extern const unsigned char kn_rt_object_aarch64[]; /* rt/kn_rt_blob_aarch64.c (generated; */
extern const size_t kn_rt_object_aarch64_size;     /* size 0 without a cross compiler) */
extern const unsigned char kn_rt_object_cuda[];    /* rt/kn_rt_cuda_blob.c (generated) */
extern const size_t kn_rt_object_cuda_size;

#if defined(__x86_64__)
#define KN_BUILD_ARCH KN_ARCH_X86_64
#elif defined(__aarch64__)
#define KN_BUILD_ARCH KN_ARCH_AARCH64
#else
#define KN_BUILD_ARCH -1
#endif

/* The runtime object for the target's architecture: the host's own, or the
 * aarch64 one built with the cross compiler (NULL when kiln has none). */
static const unsigned char *runtime_object(const kn_target *t, size_t *size) {
  if ((int)t->arch == KN_BUILD_ARCH) {
    *size = kn_rt_object_host_size;
    return kn_rt_object_host;
  }
  if (t->arch == KN_ARCH_AARCH64 && kn_rt_object_aarch64_size > 0) {
    *size = kn_rt_object_aarch64_size;
    return kn_rt_object_aarch64;
  }
  *size = 0;
  return NULL;
}

int kn_cg_check_target(const kn_target *t, kn_diag *d) {
  size_t size;
  if (t->arch == KN_ARCH_C) return 0; /* the runtime goes in as source text */
  if (t->arch == KN_ARCH_CUDA) return 0; /* rt/runtime_cuda.c, built for the host */
  if (runtime_object(t, &size)) return 0;
  if (t->arch == KN_ARCH_AARCH64)
    return kn_diag_error(d,
                         "cannot compile for %s: this kiln was built without the aarch64 cross "
                         "compiler (apt-get install gcc-aarch64-linux-gnu, then rebuild kiln)",
                         t->triple);
  return kn_diag_error(d,
                       "cannot compile for %s: this kiln only carries runtimes for its own "
                       "architecture and aarch64",
                       t->triple);
}

void kn_cg_target_string(const kn_target *t, char *buf, size_t cap) {
  if (t->arch == KN_ARCH_C) {
    snprintf(buf, cap, "c");
    return;
  }
  if (t->arch == KN_ARCH_CUDA) {
    snprintf(buf, cap, "cuda -arch=%s", t->cpu);
    return;
  }
  snprintf(buf, cap, "%s -mcpu=%s%s%s", t->triple, t->cpu, t->features[0] ? " -mattr=" : "",
           t->features);
}

/* ---- plan checks (bad plans are reported, not asserted: they may come
 * from a tuning log or a future pipeline stage) ---- */

static bool is_identifier(const char *s) {
  if (!s || !(isalpha((unsigned char)*s) || *s == '_')) return false;
  for (; *s; s++)
    if (!(isalnum((unsigned char)*s) || *s == '_')) return false;
  return true;
}

static int check_tensors(const kn_plan_tensor *t, int n, const char *what, kn_diag *d) {
  for (int i = 0; i < n; i++) {
    if (!t[i].name) return kn_diag_error(d, "plan %s %d has no name", what, i);
    if (t[i].shape.rank < 0 || t[i].shape.rank > KN_MAX_RANK)
      return kn_diag_error(d, "plan %s '%s' has rank %d", what, t[i].name, t[i].shape.rank);
    if (kn_dtype_to_onnx(t[i].dtype) == 0)
      return kn_diag_error(d, "plan %s '%s' has no ONNX dtype", what, t[i].name);
  }
  return 0;
}

int kn_cg_check_plan(const kn_plan *p, kn_diag *d) {
  if (!is_identifier(p->prefix))
    return kn_diag_error(d, "artifact prefix '%s' is not a C identifier", p->prefix ? p->prefix : "");
  if (p->max_batch < 1) return kn_diag_error(d, "max batch %lld must be >= 1", (long long)p->max_batch);
  if (p->workspace_bytes < 0) return kn_diag_error(d, "negative workspace size");
  if (check_tensors(p->inputs, p->n_inputs, "input", d) ||
      check_tensors(p->outputs, p->n_outputs, "output", d))
    return -1;
  for (int c = 0; c < p->n_consts; c++) {
    if (p->consts[c].bytes < 0 || (p->consts[c].bytes > 0 && !p->consts[c].data))
      return kn_diag_error(d, "constant %d ('%s') has no data", c, p->consts[c].name);
    if (p->consts[c].bytes > (int64_t)UINT32_MAX)
      return kn_diag_error(d, "constant '%s' is larger than 4 GiB", p->consts[c].name);
  }
  for (int s = 0; s < p->n_steps; s++) {
    const kn_plan_step *st = &p->steps[s];
    const char *kname = st->kernel ? st->kernel->name : "?";
    if (!st->kernel || !st->kernel->name) return kn_diag_error(d, "plan step %d has no kernel", s);
    if (st->n_args != st->kernel->n_params)
      return kn_diag_error(d, "step %d (%s): %d arguments for %d kernel parameters", s, kname,
                           st->n_args, st->kernel->n_params);
    if (st->n_args > KN_RT_MAX_ARGS)
      return kn_diag_error(d, "step %d (%s): %d kernel arguments, the runtime allows %d", s, kname,
                           st->n_args, KN_RT_MAX_ARGS);
    for (int a = 0; a < st->n_args; a++) {
      const kn_plan_arg *arg = &st->args[a];
      int limit = arg->kind == KILN_ARG_CONST    ? p->n_consts
                  : arg->kind == KILN_ARG_INPUT  ? p->n_inputs
                  : arg->kind == KILN_ARG_OUTPUT ? p->n_outputs
                                                 : 1;
      if (arg->kind < KILN_ARG_WORKSPACE || arg->kind > KILN_ARG_OUTPUT || arg->index < 0 ||
          arg->index >= limit || arg->offset < 0 ||
          (arg->kind == KILN_ARG_WORKSPACE && arg->offset > p->workspace_bytes))
        return kn_diag_error(d, "step %d (%s): argument %d (kind %d, index %d, offset %lld) is out of range",
                             s, kname, a, arg->kind, arg->index, (long long)arg->offset);
    }
  }
  for (int i = 0; i < p->n_pipes; i++) {
    const kn_plan_pipe *q = &p->pipes[i];
    if (q->first < 0 || q->first + 1 >= p->n_steps || (i > 0 && q->first <= p->pipes[i - 1].first + 1) ||
        q->rows1 < 1 || q->rows2 < 1 || q->stride < 1 || q->pad < 0 || q->window < 1 || q->band < 1 ||
        !p->steps[q->first].kernel->parallel || !p->steps[q->first + 1].kernel->parallel ||
        p->steps[q->first].check || p->steps[q->first + 1].check)
      return kn_diag_error(d, "row pipe %d (steps %d, %d) does not fit the plan", i, q->first, q->first + 1);
  }
  return 0;
}

/* ---- module tables ---- */

typedef struct tables {
  kn_cg_module *m;
  LLVMTypeRef i8p, i32, i64, f64;
  LLVMTypeRef desc_ty, arg_ty, step_ty, pipe_ty, art_ty;
} tables;

/* What a GPU plan adds to packaging (NULL for a CPU plan). */
typedef struct gpu_parts {
  const kn_target *cuda; /* the target the images are for */
  const kn_cuda_module *module;
  const kn_cuda_launch *launches; /* per step */
  kn_kernel *grid;                /* package_cuda.c */
} gpu_parts;

static LLVMValueRef i32c(tables *t, int64_t v) { return LLVMConstInt(t->i32, (unsigned long long)v, 1); }
static LLVMValueRef i64c(tables *t, int64_t v) { return LLVMConstInt(t->i64, (unsigned long long)v, 1); }

/* A private constant global; returns it as i8*. */
static LLVMValueRef private_const(tables *t, LLVMValueRef init, const char *name, unsigned align) {
  LLVMValueRef g = LLVMAddGlobal(t->m->mod, LLVMTypeOf(init), name);
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  if (align) LLVMSetAlignment(g, align);
  return LLVMConstBitCast(g, t->i8p);
}

static LLVMValueRef cstr(tables *t, const char *s) {
  if (!s) s = "";
  LLVMValueRef init = LLVMConstStringInContext(t->m->ctx, s, (unsigned)strlen(s), 0);
  LLVMValueRef g = LLVMAddGlobal(t->m->mod, LLVMTypeOf(init), ".str");
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
  return LLVMConstBitCast(g, t->i8p);
}

static LLVMValueRef array_or_null(tables *t, LLVMTypeRef elem, LLVMValueRef *vals, int n,
                                  const char *name, unsigned align) {
  if (n == 0) return LLVMConstPointerNull(t->i8p);
  return private_const(t, LLVMConstArray(elem, vals, (unsigned)n), name, align);
}

static LLVMValueRef tensor_descs(tables *t, const kn_plan_tensor *ts, int n, const char *name) {
  LLVMValueRef *descs = calloc((size_t)(n > 0 ? n : 1), sizeof *descs);
  KN_ASSERT(descs, "out of memory");
  for (int i = 0; i < n; i++) {
    LLVMValueRef dims[KN_MAX_RANK];
    for (int r = 0; r < ts[i].shape.rank; r++) dims[r] = i64c(t, ts[i].shape.dim[r]);
    LLVMValueRef fields[5] = {
        cstr(t, ts[i].name),
        i32c(t, kn_dtype_to_onnx(ts[i].dtype)),
        i32c(t, ts[i].shape.rank),
        array_or_null(t, t->i64, dims, ts[i].shape.rank, "dims", 8),
        i32c(t, (int64_t)ts[i].shape.batch_mask),
    };
    descs[i] = LLVMConstNamedStruct(t->desc_ty, fields, 5);
  }
  LLVMValueRef arr = array_or_null(t, t->desc_ty, descs, n, name, 8);
  free(descs);
  return arr;
}

static void define_types(tables *t) {
  LLVMContextRef c = t->m->ctx;
  t->i8p = LLVMPointerType(LLVMInt8TypeInContext(c), 0);
  t->i32 = LLVMInt32TypeInContext(c);
  t->i64 = LLVMInt64TypeInContext(c);
  t->f64 = LLVMDoubleTypeInContext(c);
  t->desc_ty = LLVMStructCreateNamed(c, "kiln_tensor_desc");
  LLVMTypeRef desc[5] = {t->i8p, t->i32, t->i32, t->i8p, t->i32};
  LLVMStructSetBody(t->desc_ty, desc, 5, 0);
  t->arg_ty = LLVMStructCreateNamed(c, "kiln_arg");
  LLVMTypeRef arg[3] = {t->i32, t->i32, t->i64};
  LLVMStructSetBody(t->arg_ty, arg, 3, 0);
  t->step_ty = LLVMStructCreateNamed(c, "kiln_step");
  LLVMTypeRef step[8] = {t->i8p, t->i8p, t->i8p, t->i32, t->i32, t->i32, t->i32, t->f64};
  LLVMStructSetBody(t->step_ty, step, 8, 0);
  t->pipe_ty = LLVMStructCreateNamed(c, "kiln_pipe");
  LLVMTypeRef pipe[8] = {t->i32, t->i32, t->i32, t->i32, t->i32, t->i32, t->i32, t->i32};
  LLVMStructSetBody(t->pipe_ty, pipe, 8, 0);
  t->art_ty = LLVMStructCreateNamed(c, "kiln_artifact");
  LLVMTypeRef art[22] = {t->i32, t->i32, t->i8p, t->i8p, t->i8p, t->i32, t->i32, t->i8p,
                         t->i8p, t->i64, t->i64, t->i64, t->i32, t->i32, t->i8p, t->i8p,
                         t->i8p, t->i8p, t->i8p, t->i8p, t->i32, t->i8p};
  LLVMStructSetBody(t->art_ty, art, 22, 0);
}

/* int NAME(params) { return CALLEE(extra_first, params...); } */
static LLVMValueRef define_wrapper(tables *t, const char *name, LLVMTypeRef ret, LLVMTypeRef *params,
                                   int n, const char *callee, LLVMValueRef first) {
  kn_cg_module *m = t->m;
  LLVMTypeRef fty = LLVMFunctionType(ret, params, (unsigned)n, 0);
  LLVMValueRef fn = LLVMAddFunction(m->mod, name, fty);
  kn_cg_set_fn_attrs(m, fn);
  LLVMTypeRef cparams[8];
  int cn = 0;
  if (first) cparams[cn++] = LLVMTypeOf(first);
  for (int i = 0; i < n; i++) cparams[cn++] = params[i];
  LLVMTypeRef cty = LLVMFunctionType(ret, cparams, (unsigned)cn, 0);
  LLVMValueRef cfn = LLVMAddFunction(m->mod, callee, cty);
  LLVMSetVisibility(cfn, LLVMHiddenVisibility);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(m->ctx);
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(m->ctx, fn, "entry"));
  LLVMValueRef args[8];
  int an = 0;
  if (first) args[an++] = first;
  for (int i = 0; i < n; i++) args[an++] = LLVMGetParam(fn, (unsigned)i);
  LLVMBuildRet(b, LLVMBuildCall2(b, cty, cfn, args, (unsigned)an, ""));
  LLVMDisposeBuilder(b);
  return fn;
}

/* The kiln_gpu table of a GPU artifact (ABI 1.4), as i8*. */
static LLVMValueRef gpu_table(tables *t, const kn_plan *p, const gpu_parts *gpu, LLVMValueRef set_stream) {
  LLVMContextRef c = t->m->ctx;
  const kn_cuda_module *mod = gpu->module;
  LLVMTypeRef image_ty = LLVMStructCreateNamed(c, "kiln_gpu_image");
  LLVMTypeRef image_f[4] = {t->i32, t->i32, t->i8p, t->i64};
  LLVMStructSetBody(image_ty, image_f, 4, 0);
  LLVMTypeRef launch_ty = LLVMStructCreateNamed(c, "kiln_gpu_launch");
  LLVMTypeRef launch_f[4] = {t->i32, t->i32, t->i32, t->i32};
  LLVMStructSetBody(launch_ty, launch_f, 4, 0);
  LLVMTypeRef gpu_ty = LLVMStructCreateNamed(c, "kiln_gpu");
  LLVMTypeRef gpu_f[8] = {t->i32, t->i8p, t->i8p, t->i8p, t->i64, t->i8p, t->i8p, t->i8p};
  LLVMStructSetBody(gpu_ty, gpu_f, 8, 0);
  int n = mod->n_images > p->n_steps ? mod->n_images : p->n_steps;
  n = n > p->n_inputs + p->n_outputs ? n : p->n_inputs + p->n_outputs;
  n = n > p->n_consts ? n : p->n_consts;
  LLVMValueRef *vals = calloc((size_t)n + 1, sizeof *vals);
  KN_ASSERT(vals, "out of memory");
  for (int i = 0; i < mod->n_images; i++) {
    const kn_cuda_image *im = &mod->images[i];
    /* PTX gets its NUL: the driver reads it as a C string */
    LLVMValueRef bytes = LLVMConstStringInContext(c, (const char *)im->data, (unsigned)im->size, im->ptx ? 0 : 1);
    LLVMValueRef f[4] = {i32c(t, im->sm), i32c(t, im->ptx ? 1 : 0), private_const(t, bytes, "cuda_image", 64),
                         i64c(t, (int64_t)im->size)};
    vals[i] = LLVMConstNamedStruct(image_ty, f, 4);
  }
  LLVMValueRef images = array_or_null(t, image_ty, vals, mod->n_images, "cuda_images", 8);
  for (int s = 0; s < p->n_steps; s++) {
    const kn_cuda_launch *l = &gpu->launches[s];
    LLVMValueRef f[4] = {i32c(t, l->block[0]), i32c(t, l->block[1]), i32c(t, l->block[2]), i32c(t, l->shared_bytes)};
    vals[s] = LLVMConstNamedStruct(launch_ty, f, 4);
  }
  LLVMValueRef launches = array_or_null(t, launch_ty, vals, p->n_steps, "cuda_launches", 8);
  for (int i = 0; i < p->n_inputs + p->n_outputs; i++) {
    const kn_plan_tensor *x = i < p->n_inputs ? &p->inputs[i] : &p->outputs[i - p->n_inputs];
    vals[i] = i32c(t, (int64_t)kn_dtype_size(x->dtype));
  }
  LLVMValueRef elem_bytes = array_or_null(t, t->i32, vals, p->n_inputs + p->n_outputs, "elem_bytes", 8);
  for (int i = 0; i < p->n_consts; i++) vals[i] = i64c(t, p->consts[i].bytes);
  LLVMValueRef const_bytes = array_or_null(t, t->i64, vals, p->n_consts, "const_bytes", 8);
  free(vals);
  LLVMValueRef grid = kn_cg_emit_kernel(t->m, gpu->grid);
  LLVMValueRef f[8] = {i32c(t, mod->n_images), images,      launches,    LLVMConstBitCast(grid, t->i8p),
                       i64c(t, p->workspace_bytes), elem_bytes, const_bytes, LLVMConstBitCast(set_stream, t->i8p)};
  return private_const(t, LLVMConstNamedStruct(gpu_ty, f, 8), "cuda_gpu", 8);
}

/* Emits kernels, constants, tables, descriptor and entry points; with gpu,
 * the GPU artifact's instead (see the top). */
static void build_module(tables *t, const kn_plan *p, bool shared, const gpu_parts *gpu) {
  kn_cg_module *m = t->m;
  define_types(t);
  /* kernels: one function per group of kernels equal up to renaming (LLVM's
   * time grows with the code it optimises); GPU kernels live in the CUDA module */
  size_t n_steps = (size_t)(p->n_steps > 0 ? p->n_steps : 1);
  LLVMValueRef *fns = calloc(n_steps, sizeof *fns);
  KN_ASSERT(fns, "out of memory");
  if (!gpu) {
    const kn_kernel **ks = malloc(n_steps * sizeof *ks);
    int *same = malloc(n_steps * sizeof *same);
    KN_ASSERT(ks && same, "out of memory");
    for (int s = 0; s < p->n_steps; s++) ks[s] = p->steps[s].kernel;
    kn_kernels_group(ks, p->n_steps, same);
    for (int s = 0; s < p->n_steps; s++) fns[s] = same[s] == s ? kn_cg_emit_kernel(m, ks[s]) : fns[same[s]];
    free(ks);
    free(same);
  }
  /* constants */
  LLVMValueRef *consts = calloc((size_t)(p->n_consts > 0 ? p->n_consts : 1), sizeof *consts);
  KN_ASSERT(consts, "out of memory");
  for (int c = 0; c < p->n_consts; c++) {
    LLVMValueRef init = LLVMConstStringInContext(m->ctx, (const char *)p->consts[c].data,
                                                 (unsigned)p->consts[c].bytes, 1);
    consts[c] = private_const(t, init, "const", 64);
  }
  /* steps and args */
  int n_args = 0;
  for (int s = 0; s < p->n_steps; s++) n_args += p->steps[s].n_args;
  LLVMValueRef *args = calloc((size_t)(n_args > 0 ? n_args : 1), sizeof *args);
  LLVMValueRef *steps = calloc((size_t)(p->n_steps > 0 ? p->n_steps : 1), sizeof *steps);
  KN_ASSERT(args && steps, "out of memory");
  int first = 0;
  for (int s = 0; s < p->n_steps; s++) {
    const kn_plan_step *st = &p->steps[s];
    for (int a = 0; a < st->n_args; a++) {
      LLVMValueRef f[3] = {i32c(t, st->args[a].kind), i32c(t, st->args[a].index),
                           i64c(t, st->args[a].offset)};
      args[first + a] = LLVMConstNamedStruct(t->arg_ty, f, 3);
    }
    LLVMValueRef f[8] = {
        gpu ? LLVMConstPointerNull(t->i8p) : LLVMConstBitCast(fns[s], t->i8p),
        cstr(t, gpu ? gpu->launches[s].name : st->kernel->name), cstr(t, st->kernel->nodes),
        i32c(t, st->n_args), i32c(t, first), i32c(t, st->kernel->parallel ? 1 : 0), i32c(t, st->check),
        LLVMConstReal(t->f64, st->kernel->flops),
    };
    steps[s] = LLVMConstNamedStruct(t->step_ty, f, 8);
    first += st->n_args;
  }
  LLVMValueRef *pipes = calloc((size_t)(p->n_pipes > 0 ? p->n_pipes : 1), sizeof *pipes);
  KN_ASSERT(pipes, "out of memory");
  for (int i = 0; i < p->n_pipes; i++) {
    const kn_plan_pipe *q = &p->pipes[i];
    LLVMValueRef f[8] = {i32c(t, q->first), i32c(t, q->batched), i32c(t, q->rows1),  i32c(t, q->rows2),
                         i32c(t, q->stride), i32c(t, q->pad),    i32c(t, q->window), i32c(t, q->band)};
    pipes[i] = LLVMConstNamedStruct(t->pipe_ty, f, 8);
  }
  char target[768];
  kn_cg_target_string(gpu ? gpu->cuda : m->target, target, sizeof target);
  /* entry points */
  char name[512];
  snprintf(name, sizeof name, "%s_artifact", p->prefix);
  LLVMTypeRef art_ty = t->art_ty;
  int minor = kn_plan_abi_minor(p, gpu != NULL);
  bool fields_1_4 = minor >= 4; /* GPU artifacts, and CPU ones with an index check (NULL there) */
  if (fields_1_4) { /* the 1.3 layout, then last_error and gpu */
    art_ty = LLVMStructCreateNamed(m->ctx, "kiln_artifact_1_4");
    LLVMTypeRef f[24];
    LLVMGetStructElementTypes(t->art_ty, f);
    f[22] = f[23] = t->i8p;
    LLVMStructSetBody(art_ty, f, 24, 0);
  }
  LLVMValueRef art = LLVMAddGlobal(m->mod, art_ty, name);
  LLVMValueRef art_p = LLVMConstBitCast(art, t->i8p);
  LLVMTypeRef run_params[4] = {LLVMPointerType(t->i8p, 0), LLVMPointerType(t->i8p, 0), t->i8p, t->i64};
  snprintf(name, sizeof name, "%s_run", p->prefix);
  LLVMValueRef run =
      define_wrapper(t, name, t->i32, run_params, 4, gpu ? "kn_rt_cuda_execute" : "kn_rt_execute", art_p);
  snprintf(name, sizeof name, "%s_set_threads", p->prefix);
  LLVMValueRef set_threads =
      define_wrapper(t, name, t->i32, &t->i32, 1, gpu ? "kn_rt_cuda_set_threads" : "kn_rt_set_threads", NULL);
  /* PREFIX_run_profiled(inputs, outputs, workspace, batch, events, capacity, n_events) */
  LLVMTypeRef prof_params[7] = {run_params[0], run_params[1], run_params[2], t->i64,
                                t->i8p,        t->i64,        LLVMPointerType(t->i64, 0)};
  snprintf(name, sizeof name, "%s_run_profiled", p->prefix);
  LLVMValueRef run_profiled =
      define_wrapper(t, name, t->i32, prof_params, 7, gpu ? "kn_rt_cuda_execute_profiled" : "kn_rt_execute_profiled",
                     art_p);
  LLVMValueRef fields[24] = {
      i32c(t, KILN_ABI_VERSION),
      i32c(t, minor),
      cstr(t, p->prefix),
      cstr(t, KILN_VERSION),
      cstr(t, target),
      i32c(t, p->n_inputs),
      i32c(t, p->n_outputs),
      tensor_descs(t, p->inputs, p->n_inputs, "inputs"),
      tensor_descs(t, p->outputs, p->n_outputs, "outputs"),
      i64c(t, gpu ? 0 : p->workspace_bytes), /* a GPU artifact's workspace is on the device */
      i64c(t, 64),
      i64c(t, p->max_batch),
      i32c(t, p->n_steps),
      i32c(t, p->n_consts),
      array_or_null(t, t->step_ty, steps, p->n_steps, "steps", 8),
      array_or_null(t, t->arg_ty, args, n_args, "args", 8),
      array_or_null(t, t->i8p, consts, p->n_consts, "consts", 8),
      LLVMConstBitCast(run, t->i8p),
      LLVMConstBitCast(set_threads, t->i8p),
      LLVMConstBitCast(run_profiled, t->i8p),
      i32c(t, p->n_pipes),
      array_or_null(t, t->pipe_ty, pipes, p->n_pipes, "pipes", 4),
  };
  fields[22] = fields[23] = LLVMConstNull(t->i8p);
  if (gpu) {
    snprintf(name, sizeof name, "%s_last_error", p->prefix);
    fields[22] = LLVMConstBitCast(define_wrapper(t, name, t->i8p, NULL, 0, "kn_rt_cuda_last_error", NULL), t->i8p);
    snprintf(name, sizeof name, "%s_set_stream", p->prefix);
    LLVMValueRef set_stream = define_wrapper(t, name, t->i32, &t->i8p, 1, "kn_rt_cuda_set_stream", NULL);
    fields[23] = gpu_table(t, p, gpu, set_stream);
  }
  LLVMSetInitializer(art, LLVMConstNamedStruct(art_ty, fields, fields_1_4 ? 24 : 22));
  LLVMSetGlobalConstant(art, 1);
  LLVMSetAlignment(art, 8);
  if (shared) LLVMAddAlias2(m->mod, art_ty, 0, art, "kiln_artifact_v1");
  free(fns);
  free(consts);
  free(args);
  free(steps);
  free(pipes);
}

static const char *ext_of(const char *path) {
  const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
  return dot && (!slash || dot > slash) ? dot : "";
}

static int package_object(const kn_plan *plan, const kn_target *code, const kn_target *header,
                          const gpu_parts *gpu, const unsigned char *rt_object, size_t rt_size,
                          const char *out_path, const char *header_path, bool shared, kn_diag *d);

int kn_cg_package_cuda(const kn_plan *plan, const kn_target *t, const kn_cuda_module *module,
                       const kn_cuda_launch *launches, const char *out_path, const char *header_path,
                       kn_diag *d) {
  if (t->arch != KN_ARCH_CUDA) return kn_diag_error(d, "kn_cg_package_cuda: the target is not cuda");
  if (strcmp(ext_of(out_path), ".so"))
    return kn_diag_error(d, "output '%s': a GPU artifact is a shared library: name it .so", out_path);
  if (kn_cg_check_plan(plan, d) || kn_cg_check_cuda(plan, module, launches, d)) return -1;
  /* the host side for the build machine's architecture with no CPU
   * features: the GPU machine's CPU is not known here, and the host code is
   * only tables, entry points and the grid function */
#if defined(__x86_64__)
  const char *host_spec = "x86_64-linux-gnu";
#elif defined(__aarch64__)
  const char *host_spec = "aarch64-linux-gnu";
#else
  const char *host_spec = "host";
#endif
  kn_target host;
  if (kn_target_parse(host_spec, &host, d)) return -1;
  gpu_parts gpu = {.cuda = t, .module = module, .launches = launches, .grid = kn_cg_cuda_grid_kernel(plan, launches)};
  return package_object(plan, &host, t, &gpu, kn_rt_object_cuda, kn_rt_object_cuda_size, out_path, header_path,
                        true, d);
}

int kn_cg_package(const kn_plan *plan, const kn_target *t, const char *out_path, const char *header_path,
                  kn_diag *d) {
  const char *ext = ext_of(out_path);
  if (t->arch == KN_ARCH_C) return kn_cg_package_c(plan, t, out_path, header_path, d);
  if (!strcmp(ext, ".c"))
    return kn_diag_error(d, "output '%s': C source is written for --target c only", out_path);
  bool shared = !strcmp(ext, ".so");
  if (!shared && strcmp(ext, ".o"))
    return kn_diag_error(d, "output '%s' must end in .so (shared library) or .o (object)", out_path);
  if (t->arch == KN_ARCH_CUDA)
    return kn_diag_error(d, "output '%s': a GPU plan is packaged with its CUDA module (kn_cg_package_cuda)",
                         out_path);
  size_t rt_size;
  const unsigned char *rt_object = runtime_object(t, &rt_size);
  if (!rt_object) return kn_cg_check_target(t, d);
  if (kn_cg_check_plan(plan, d)) return -1;
  return package_object(plan, t, t, NULL, rt_object, rt_size, out_path, header_path, shared, d);
}

/* Writes the artifact (and its header) from the module built for `code`
 * (the LLVM target), linked with `rt_object`; `header` names the target in
 * the header. Atomic: both files or neither. */
static int package_object(const kn_plan *plan, const kn_target *code, const kn_target *header,
                          const gpu_parts *gpu, const unsigned char *rt_object, size_t rt_size,
                          const char *out_path, const char *header_path, bool shared, kn_diag *d) {
  const kn_target *t = code;
  int status = -1;
  kn_cg_header_out h;
  kn_cg_module m;
  kn_cg_tmpdir tmp;
  char kobj[4200], robj[4200], out_tmp[4200];
  if (kn_cg_header_begin(&h, out_path, header_path, plan->prefix, d)) return -1;
  if (kn_cg_tmpdir_create(&tmp, out_path, d)) goto fail_header;
  if (kn_cg_module_init(&m, t, plan->prefix, d)) goto fail_tmp;
  tables tb = {.m = &m};
  build_module(&tb, plan, shared, gpu);
  if (kn_cg_optimize(&m, d)) goto fail_module;
  if (kn_cg_emit_object(&m, kn_cg_tmpdir_file(&tmp, "kernels.o", kobj, sizeof kobj), d))
    goto fail_module;
  if (kn_cg_write_file(kn_cg_tmpdir_file(&tmp, "runtime.o", robj, sizeof robj), rt_object, rt_size,
                       d))
    goto fail_module;
  kn_cg_tmpdir_file(&tmp, shared ? "artifact.so" : "artifact.o", out_tmp, sizeof out_tmp);
  if (kn_cg_link(&tmp, kobj, robj, out_tmp, shared, t->arch != KN_BUILD_ARCH, d))
    goto fail_module;
  if (kn_cg_header_write(&h, plan, header, out_path, d)) goto fail_module;
  if (rename(out_tmp, out_path) != 0) {
    kn_diag_error(d, "cannot create '%s': %s", out_path, strerror(errno));
    goto fail_module;
  }
  if (kn_cg_header_commit(&h, d)) {
    unlink(out_path);
    goto fail_module;
  }
  status = 0;
fail_module:
  kn_cg_module_free(&m);
fail_tmp:
  kn_cg_tmpdir_remove(&tmp);
fail_header:
  kn_cg_header_end(&h);
  return status;
}

/* ---- single kernels as text ---- */

static int kernel_text(const kn_kernel *k, const kn_target *t, int mode, char **text, kn_diag *d) {
  kn_cg_module m;
  if (kn_cg_module_init(&m, t, k->name, d)) return -1;
  LLVMValueRef fn = kn_cg_emit_kernel(&m, k);
  /* keep the kernel alive through O3: make the wrapper external */
  LLVMSetLinkage(fn, LLVMExternalLinkage);
  int status = 0;
  if (mode != 0) status = kn_cg_optimize(&m, d);
  if (!status) {
    if (mode == 2) {
      status = kn_cg_emit_asm(&m, text, d);
    } else {
      char *s = LLVMPrintModuleToString(m.mod);
      *text = strdup(s);
      LLVMDisposeMessage(s);
      KN_ASSERT(*text, "out of memory");
    }
  }
  kn_cg_module_free(&m);
  return status;
}

int kn_cg_kernel_asm(const kn_kernel *k, const kn_target *t, char **text, kn_diag *d) {
  return kernel_text(k, t, 2, text, d);
}

int kn_cg_kernel_ir(const kn_kernel *k, const kn_target *t, bool optimized, char **text,
                    kn_diag *d) {
  return kernel_text(k, t, optimized ? 1 : 0, text, d);
}
