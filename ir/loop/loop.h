/* loop.h — the loop IR: what a schedule lowers to and what codegen consumes.
 *
 * A kernel is a statement tree over buffers. Parameters are pointers handed in
 * by the runtime; LOCAL buffers are small fixed-size scratch (accumulators)
 * that codegen keeps in registers when every index is constant.
 *
 * Before codegen, kn_loop_finalize (schedule/) has removed every VECTORIZED
 * and UNROLLED loop: codegen sees SERIAL and PARALLEL loops only, with vector
 * expressions (RAMP, BROADCAST, vector LOAD/STORE) where vectorization
 * happened.
 *
 * Kernel calling convention (codegen emits it, rt calls it):
 *   void kernel(void *const *args, int64_t batch, int64_t task, int64_t ntasks);
 * args[i] is the base pointer of params[i]; batch is the value of the batch
 * symbol N; the outermost PARALLEL loop runs iterations
 *   [task * extent / ntasks, (task + 1) * extent / ntasks)
 * so the runtime calls the kernel once per task on its thread pool. A kernel
 * without a PARALLEL loop is called once with task 0, ntasks 1. */
#ifndef KN_LOOP_H
#define KN_LOOP_H

#include "ir/loop/expr.h"

typedef enum kn_buffer_kind {
  KN_BUF_PARAM, /* pointer argument of the kernel */
  KN_BUF_LOCAL, /* scratch of `size` elements, lives inside its ALLOC */
} kn_buffer_kind;

struct kn_buffer {
  const char *name;
  kn_dtype dtype;
  kn_buffer_kind kind;
  int64_t size; /* elements: LOCAL, its size; PARAM, when static (else 0), for checks */
  int id;
};

typedef enum kn_for_kind {
  KN_FOR_SERIAL,
  KN_FOR_PARALLEL,
  KN_FOR_VECTORIZED, /* removed by kn_loop_finalize */
  KN_FOR_UNROLLED,   /* removed by kn_loop_finalize */
} kn_for_kind;

typedef struct kn_stmt kn_stmt;
typedef enum kn_stmt_kind {
  KN_S_FOR,   /* loop: var, min, extent, kind, body */
  KN_S_STORE, /* store: buffer, index (ramp => vector store), value */
  KN_S_ALLOC, /* alloc: buffer (LOCAL), body */
  KN_S_SEQ,   /* seq: n, stmts */
  KN_S_IF,    /* ifs: cond, then_s, else_s (may be NULL) */
  KN_S_LET,   /* let: var, value, body */
  KN_S_PREFETCH, /* prefetch: buffer, index (scalar), level: a hint to bring
                    the element's cache line into cache level `level` (1:
                    L1, 2: L2); no effect on values */
} kn_stmt_kind;

struct kn_stmt {
  kn_stmt_kind kind;
  union {
    struct {
      kn_var *var;
      kn_expr *min, *extent;
      kn_for_kind kind;
      kn_stmt *body;
    } loop;
    struct {
      kn_buffer *buffer;
      kn_expr *index, *value;
    } store;
    struct {
      kn_buffer *buffer;
      kn_stmt *body;
    } alloc;
    struct {
      int n;
      kn_stmt **stmts;
    } seq;
    struct {
      kn_expr *cond;
      kn_stmt *then_s, *else_s;
    } ifs;
    struct {
      kn_var *var;
      kn_expr *value;
      kn_stmt *body;
    } let;
    struct {
      kn_buffer *buffer;
      kn_expr *index;
      int level;
    } prefetch;
  } u;
};

typedef struct kn_kernel {
  const char *name; /* symbol name, unique in the artifact */
  int n_params;
  kn_buffer **params; /* KN_BUF_PARAM, in argument order */
  kn_var *batch;      /* the batch symbol N, or NULL if unused */
  kn_stmt *body;
  bool parallel;      /* has a PARALLEL loop: call with ntasks = threads */
  /* >0: with ntasks = samples x rows, task t runs exactly row t % rows of
   * output axis 1 of sample t / rows (samples: N when rows_batched, else 1),
   * and stores only final values: the parallel loop's outer pieces are axes
   * 0 and 1 unsplit, no reduction blocking (schedule/kernel.c). 0: no such
   * mapping */
  int64_t rows;
  bool rows_batched;
  double flops;       /* at N = 1, for reports */
  const char *nodes;  /* ONNX node names fused into it, comma separated */
} kn_kernel;

kn_buffer *kn_buffer_new(kn_expr_ctx *c, const char *name, kn_dtype t, kn_buffer_kind kind,
                         int64_t size);
kn_stmt *kn_s_for(kn_expr_ctx *c, kn_var *v, kn_expr *min, kn_expr *extent, kn_for_kind kind,
                  kn_stmt *body);
kn_stmt *kn_s_store(kn_expr_ctx *c, kn_buffer *b, kn_expr *index, kn_expr *value);
kn_stmt *kn_s_alloc(kn_expr_ctx *c, kn_buffer *b, kn_stmt *body);
kn_stmt *kn_s_seq(kn_expr_ctx *c, kn_stmt **stmts, int n); /* copies the array */
kn_stmt *kn_s_seq2(kn_expr_ctx *c, kn_stmt *a, kn_stmt *b);
kn_stmt *kn_s_if(kn_expr_ctx *c, kn_expr *cond, kn_stmt *then_s, kn_stmt *else_s);
kn_stmt *kn_s_let(kn_expr_ctx *c, kn_var *v, kn_expr *value, kn_stmt *body);
kn_stmt *kn_s_prefetch(kn_expr_ctx *c, kn_buffer *b, kn_expr *index, int level);

/* Does any STORE in s write buffer b? */
bool kn_stmt_stores_to(const kn_stmt *s, const kn_buffer *b);

void kn_stmt_print(const kn_stmt *s, FILE *out, int indent);
void kn_kernel_print(const kn_kernel *k, FILE *out);

#endif
