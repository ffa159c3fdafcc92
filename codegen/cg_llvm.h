/* cg_llvm.h — internal interface of the LLVM back end (codegen/llvm_*.c).
 *
 * A kn_cg_module owns one LLVM context, module and target machine for one
 * target; nothing here is global, so several threads may compile at once
 * (each with its own module). Kernels are emitted into the module with
 * kn_cg_emit_kernel, then kn_cg_optimize verifies and runs the O3 pipeline,
 * then kn_cg_emit_object / kn_cg_emit_asm write machine code.
 *
 * Register representation of loop-IR values (kn_cg_reg_type):
 *   f32 -> float, f64 -> double, f16 / bf16 -> float (computed in f32, rounded
 *   on casts and stores), bool -> i1, integers -> iN (signedness lives in the
 *   kn_dtype, not the LLVM type). Memory representation (kn_cg_mem_type):
 *   f16 / bf16 -> i16, bool -> i8, others as in registers. */
#ifndef KN_CG_LLVM_H
#define KN_CG_LLVM_H

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "ir/loop/loop.h"
#include "ir/loop/range.h"
#include "codegen/expr_dag.h"
#include "codegen/target.h"

typedef struct kn_cg_module {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMTargetMachineRef tm;
  LLVMTargetDataRef layout;
  const kn_target *target;
  char min_vector_width[16]; /* value of "min-legal-vector-width" */
} kn_cg_module;

/* Creates the context, module and target machine (PIC, O3). */
int kn_cg_module_init(kn_cg_module *m, const kn_target *t, const char *name, kn_diag *d);
void kn_cg_module_free(kn_cg_module *m);

/* Translates a finalized loop-IR kernel into an internal function
 *   void NAME(i8** args, i64 batch, i64 task, i64 ntasks)
 * (the calling convention of ir/loop/loop.h) and returns it. Malformed loop IR is
 * a compiler bug (KN_ASSERT). */
LLVMValueRef kn_cg_emit_kernel(kn_cg_module *m, const kn_kernel *k);

/* Adds the attributes every generated function carries (target cpu and
 * features, vector width, nounwind). */
void kn_cg_set_fn_attrs(kn_cg_module *m, LLVMValueRef fn);

/* Verifies the module (a failure prints the module and aborts: compiler bug)
 * then runs the default<O3> pipeline. */
int kn_cg_optimize(kn_cg_module *m, kn_diag *d);
int kn_cg_emit_object(kn_cg_module *m, const char *path, kn_diag *d);
/* Assembly text (malloc'd, NUL terminated). */
int kn_cg_emit_asm(kn_cg_module *m, char **text, kn_diag *d);

/* ---- shared by llvm_kernel.c, llvm_expr.c and llvm_math.c ---- */
typedef struct kn_cg_binding kn_cg_binding;
typedef struct kn_cg_bufmap kn_cg_bufmap;

/* Per-kernel emission state. */
typedef struct kn_cg_fn {
  kn_cg_module *m;
  LLVMBuilderRef b;
  LLVMValueRef fn;
  LLVMBasicBlockRef entry; /* holds the allocas of LOCAL buffers */
  const kn_kernel *kernel;
  LLVMValueRef batch, task, ntasks;
  kn_cg_binding *vars; /* scope stack of loop / let variables */
  int n_vars, cap_vars;
  kn_cg_bufmap *bufs; /* buffer -> typed base pointer */
  int n_bufs, cap_bufs;
  kn_cg_dag memo; /* expr -> value / range, cleared at every statement */
  int parallel_depth; /* PARALLEL loops enclosing the current statement */
  int loop_depth;     /* FOR loops enclosing the current statement */
  int n_split;        /* PARALLEL loops split across tasks (at most 1) */
} kn_cg_fn;

struct kn_cg_binding {
  const kn_var *var;
  LLVMValueRef value;
  kn_range range; /* the values it takes (ir/loop/range.h) */
};

struct kn_cg_bufmap {
  const kn_buffer *buf;
  LLVMValueRef ptr; /* pointer to the memory element type */
};

LLVMTypeRef kn_cg_reg_type(kn_cg_module *m, kn_dtype t, int lanes);
LLVMTypeRef kn_cg_mem_type(kn_cg_module *m, kn_dtype t, int lanes);

/* Expressions (llvm_expr.c). */
LLVMValueRef kn_cg_expr(kn_cg_fn *f, const kn_expr *e);
/* Conservative value range of an int expression under the current bindings. */
kn_range kn_cg_range(kn_cg_fn *f, const kn_expr *e);
/* Stores `value` (register form) to buffer[index] (scalar or vector). */
void kn_cg_store(kn_cg_fn *f, const kn_buffer *buf, const kn_expr *index, LLVMValueRef value);
/* llvm.prefetch (a read) of element `index` (scalar) of buf into cache
 * level `level` (1: L1, 2: L2) */
void kn_cg_prefetch(kn_cg_fn *f, const kn_buffer *buf, const kn_expr *index, int level);
LLVMValueRef kn_cg_buffer_ptr(kn_cg_fn *f, const kn_buffer *buf);

/* Small IR helpers (llvm_expr.c). */
LLVMValueRef kn_cg_const_f(LLVMTypeRef ty, double v);  /* float scalar or splat */
LLVMValueRef kn_cg_const_i(LLVMTypeRef ty, int64_t v); /* int scalar or splat */
LLVMValueRef kn_cg_call_intrinsic(kn_cg_fn *f, const char *name, LLVMTypeRef *overloads,
                                  int n_overloads, LLVMValueRef *args, int n_args);
/* Lanes [lo, lo + n) of a's lanes followed by b's (b NULL: a alone), as one
 * shufflevector: a slice of a vector, or two vectors joined. */
LLVMValueRef kn_cg_lane_range(kn_cg_fn *f, LLVMValueRef a, LLVMValueRef b, unsigned lo, unsigned n);
/* Calls a C function `double name(double)` / `float namef(float)` per lane. */
LLVMValueRef kn_cg_call_libm(kn_cg_fn *f, const char *name, LLVMValueRef *args, int n_args);

/* Math intrinsics (llvm_math.c): x is float / double scalar or vector in
 * register form; the result has x's type. */
LLVMValueRef kn_cg_math(kn_cg_fn *f, kn_fn fn, LLVMValueRef *args, int n_args);

#endif
