/* cuda_emit.h — internal interface of the CUDA C emitter (codegen/cuda_*.c).
 *
 *   cuda_launch.c  kn_cuda_launch_info: the BLOCK / THREAD shape of a kernel
 *   cuda_expr.c    scalar loop-IR expressions -> CUDA C text, the prelude
 *   cuda_emit.c    statements, GPU statements, kernels, kn_cuda_emit
 *
 * The generated text needs no header: NVRTC 13 has none built in, so the
 * prelude spells out every helper (floor division, f16 / bf16 conversion
 * through inline PTX, NaN-aware min / max, saturating float -> int) with
 * the semantics of the portable C back end (codegen/c_emit.c); the float8 /
 * float4e2m1 conversions (codegen/cuda_f8.h) follow it where a kernel uses
 * them. */
#ifndef KN_CG_CUDA_EMIT_H
#define KN_CG_CUDA_EMIT_H

#include "codegen/c_emit.h"
#include "codegen/cuda.h"
#include "codegen/expr_dag.h"
#include "ir/loop/range.h"

/* A buffer or variable in scope, innermost last. */
typedef struct kn_cu_name {
  const void *key; /* kn_buffer * or kn_var * */
  const char *name;
  kn_range range; /* variables: their values */
} kn_cu_name;

typedef struct kn_cu {
  kn_cg_sbuf *out;
  const kn_kernel *k;
  kn_cuda_launch launch;
  kn_arena strings; /* rendered text of the kernel */
  kn_diag *d;
  bool failed; /* a diagnostic was written: the kernel is not emitted */
  kn_cg_dag dag; /* the current statement's DAG (codegen/expr_dag.h) */
  kn_cu_name *names;
  int n_names, cap_names;
  int next_temp, next_local, next_shared, indent;
  int thread_depth; /* THREAD loops around the current statement */
  kn_cg_sbuf *pre;     /* the current statement's code before it */
  bool uses_f8;        /* calls a float8 / float4e2m1 conversion */
  int64_t smem_offset; /* dynamic shared memory carved so far */
} kn_cu;

/* Shared buffers start at multiples of this many bytes: cp.async of 16
 * bytes and ldmatrix need 16-byte aligned shared addresses. */
enum { KN_CU_SHARED_ALIGN = 16 };

/* Static __shared__ arrays up to this many bytes in all (CUDA's static
 * limit); more goes into one dynamic array. */
#define KN_CU_STATIC_SHARED_MAX ((int64_t)48 * 1024)

/* Is s a C identifier ([A-Za-z_][A-Za-z0-9_]*)? Kernel names must be: they
 * are the symbols the runtime looks up, and the launch shape names them. */
bool kn_cu_is_identifier(const char *s);

/* The dims (bit d: dim d) a THREAD nest starting at st binds: its directly
 * nested THREAD loops, through LETs and LOCAL allocations. */
int kn_cu_nest_dims(const kn_stmt *st);

char *kn_cu_fmt(kn_cu *c, const char *f, ...) __attribute__((format(printf, 2, 3)));
void kn_cu_line(kn_cu *c, kn_cg_sbuf *b, const char *f, ...) __attribute__((format(printf, 3, 4)));
/* Reports an unsupported construct once per kernel; the kernel fails. */
void kn_cu_fail(kn_cu *c, const char *f, ...) __attribute__((format(printf, 2, 3)));

/* Register and memory types: f16 / bf16 / float8 / float4e2m1 (one byte
 * per element) as their bits, bool as a byte. NULL for no valid dtype. */
const char *kn_cu_reg_type(kn_dtype t);
const char *kn_cu_mem_type(kn_dtype t);

void kn_cu_push_name(kn_cu *c, const void *key, const char *name, kn_range range);
const kn_cu_name *kn_cu_lookup(kn_cu *c, const void *key);
/* "v<id>_<name with every character outside [A-Za-z0-9] as '_'>". */
const char *kn_cu_var_name(kn_cu *c, const kn_var *v);
/* Range of integer expression e with the variables in scope. */
kn_range kn_cu_range(kn_cu *c, const kn_expr *e);

/* Starts a statement over expressions es[0..n) (NULL ones skipped): the
 * temporaries of nodes used twice go to `pre`. */
void kn_cu_stmt_begin(kn_cu *c, kn_cg_sbuf *pre, const kn_expr *const *es, int n);
/* The text of scalar e's value in register form. */
const char *kn_cu_expr(kn_cu *c, const kn_expr *e);
/* Register value v of dtype t in its memory form, and back. */
const char *kn_cu_to_mem(kn_cu *c, kn_dtype t, const char *v);
const char *kn_cu_from_mem(kn_cu *c, kn_dtype t, const char *v);

extern const char kn_cu_prelude[];
/* The float8 / float4e2m1 conversions: kn_cu_f8_text (codegen/cuda_f8.h,
 * embedded by codegen/CMakeLists.txt) between kn_cu_f8_head and _tail. */
extern const char kn_cu_f8_head[], kn_cu_f8_tail[];
extern const unsigned char kn_cu_f8_text[];
extern const size_t kn_cu_f8_text_size; /* with its NUL */

#endif
