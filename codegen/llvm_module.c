/* llvm_module.c — one LLVM context + module + target machine per compile,
 * the O3 pipeline, and machine-code emission.
 *
 * LLVM's target registry is process-global; it is initialised once with
 * pthread_once (x86-64 and AArch64, so any host can cross-compile). Every
 * other LLVM object belongs to a kn_cg_module, so compiles on several threads
 * never share state. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <llvm/Config/llvm-config.h>

#include "codegen/cg_llvm.h"

static pthread_once_t targets_once = PTHREAD_ONCE_INIT;

static void init_targets(void) {
  LLVMInitializeX86TargetInfo();
  LLVMInitializeX86Target();
  LLVMInitializeX86TargetMC();
  LLVMInitializeX86AsmPrinter();
  LLVMInitializeAArch64TargetInfo();
  LLVMInitializeAArch64Target();
  LLVMInitializeAArch64TargetMC();
  LLVMInitializeAArch64AsmPrinter();
}

const char *kn_cg_llvm_version(void) { return LLVM_VERSION_STRING; }

/* Shared with target.c: makes sure the registry is ready. */
void kn_cg_init_llvm(void) { pthread_once(&targets_once, init_targets); }

int kn_cg_module_init(kn_cg_module *m, const kn_target *t, const char *name, kn_diag *d) {
  memset(m, 0, sizeof *m);
  kn_cg_init_llvm();
  LLVMTargetRef target;
  char *err = NULL;
  if (LLVMGetTargetFromTriple(t->triple, &target, &err)) {
    kn_diag_error(d, "target '%s': %s", t->triple, err ? err : "unknown triple");
    LLVMDisposeMessage(err);
    return -1;
  }
  m->tm = LLVMCreateTargetMachine(target, t->triple, t->cpu, t->features,
                                  LLVMCodeGenLevelAggressive, LLVMRelocPIC, LLVMCodeModelDefault);
  if (!m->tm) return kn_diag_error(d, "target '%s': cannot create a target machine", t->triple);
  m->target = t;
  m->ctx = LLVMContextCreate();
  m->mod = LLVMModuleCreateWithNameInContext(name, m->ctx);
  LLVMSetTarget(m->mod, t->triple);
  m->layout = LLVMCreateTargetDataLayout(m->tm);
  LLVMSetModuleDataLayout(m->mod, m->layout);
  snprintf(m->min_vector_width, sizeof m->min_vector_width, "%d", t->vector_bits);
  return 0;
}

void kn_cg_module_free(kn_cg_module *m) {
  if (m->mod) LLVMDisposeModule(m->mod);
  if (m->layout) LLVMDisposeTargetData(m->layout);
  if (m->ctx) LLVMContextDispose(m->ctx);
  if (m->tm) LLVMDisposeTargetMachine(m->tm);
  memset(m, 0, sizeof *m);
}

static void add_enum_attr(kn_cg_module *m, LLVMValueRef fn, const char *name) {
  unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
  KN_ASSERT(kind != 0, name);
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                          LLVMCreateEnumAttribute(m->ctx, kind, 0));
}

void kn_cg_set_fn_attrs(kn_cg_module *m, LLVMValueRef fn) {
  LLVMAddTargetDependentFunctionAttr(fn, "target-cpu", m->target->cpu);
  if (m->target->features[0])
    LLVMAddTargetDependentFunctionAttr(fn, "target-features", m->target->features);
  /* Without these, x86 CPUs tuned for 256-bit vectors split 512-bit types. */
  LLVMAddTargetDependentFunctionAttr(fn, "min-legal-vector-width", m->min_vector_width);
  LLVMAddTargetDependentFunctionAttr(fn, "prefer-vector-width", m->min_vector_width);
  LLVMAddTargetDependentFunctionAttr(fn, "no-trapping-math", "true");
  add_enum_attr(m, fn, "nounwind");
}

int kn_cg_optimize(kn_cg_module *m, kn_diag *d) {
  char *err = NULL;
  if (LLVMVerifyModule(m->mod, LLVMReturnStatusAction, &err)) {
    char *text = LLVMPrintModuleToString(m->mod);
    fprintf(stderr, "%s\nkiln: LLVM verifier: %s\n", text, err ? err : "");
    LLVMDisposeMessage(text);
    LLVMDisposeMessage(err);
    KN_ASSERT(0, "generated LLVM IR does not verify");
  }
  LLVMDisposeMessage(err);
  LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
  LLVMPassBuilderOptionsSetLoopVectorization(opts, 1);
  LLVMPassBuilderOptionsSetSLPVectorization(opts, 1);
  LLVMPassBuilderOptionsSetLoopUnrolling(opts, 1);
  LLVMPassBuilderOptionsSetLoopInterleaving(opts, 1);
  LLVMErrorRef e = LLVMRunPasses(m->mod, "default<O3>", m->tm, opts);
  LLVMDisposePassBuilderOptions(opts);
  if (e) {
    char *msg = LLVMGetErrorMessage(e);
    kn_diag_error(d, "LLVM optimizer: %s", msg);
    LLVMDisposeErrorMessage(msg);
    return -1;
  }
  return 0;
}

int kn_cg_emit_object(kn_cg_module *m, const char *path, kn_diag *d) {
  char *err = NULL;
  /* EmitToFile takes a non-const path. */
  char *p = strdup(path);
  KN_ASSERT(p, "out of memory");
  LLVMBool bad = LLVMTargetMachineEmitToFile(m->tm, m->mod, p, LLVMObjectFile, &err);
  free(p);
  if (bad) {
    kn_diag_error(d, "cannot write object '%s': %s", path, err ? err : "LLVM error");
    LLVMDisposeMessage(err);
    return -1;
  }
  return 0;
}

int kn_cg_emit_asm(kn_cg_module *m, char **text, kn_diag *d) {
  char *err = NULL;
  LLVMMemoryBufferRef buf = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(m->tm, m->mod, LLVMAssemblyFile, &err, &buf)) {
    kn_diag_error(d, "cannot emit assembly: %s", err ? err : "LLVM error");
    LLVMDisposeMessage(err);
    return -1;
  }
  size_t n = LLVMGetBufferSize(buf);
  char *s = malloc(n + 1);
  KN_ASSERT(s, "out of memory");
  memcpy(s, LLVMGetBufferStart(buf), n);
  s[n] = 0;
  LLVMDisposeMemoryBuffer(buf);
  *text = s;
  return 0;
}
