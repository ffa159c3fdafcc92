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
 * without a PARALLEL loop is called once with task 0, ntasks 1.
 *
 * GPU kernels (kn_kernel.gpu) have another shape, CUDA's: the body is
 *   for b.. in BLOCK loops (dims z, y, x, outermost first):
 *     [alloc SHARED ...]
 *       for t.. in THREAD loops (dims z, y, x):
 *         body run by every thread of the block
 * Loop extents are the grid and block sizes: THREAD extents constant, at
 * most 1,024 threads in all; BLOCK extents may use the batch symbol. Inside
 * the THREAD loops, LOCAL buffers are thread-private (registers, including
 * MMA fragments) and KN_S_GPU statements synchronise the block or the warp.
 * The semantics are "every thread runs to its next barrier": between two
 * barriers the threads may run in any order, so a SHARED element one thread
 * writes may be touched by another only after a barrier (ir/loop/gpu_eval.c
 * checks exactly that). kn_loop_verify_gpu says what else must hold. */
#ifndef KN_LOOP_H
#define KN_LOOP_H

#include "ir/loop/expr.h"

typedef enum kn_buffer_kind {
  KN_BUF_PARAM, /* pointer argument of the kernel */
  KN_BUF_LOCAL, /* scratch of `size` elements, lives inside its ALLOC; on a GPU,
                   private to the thread that allocates it */
  KN_BUF_SHARED, /* GPU: `size` elements shared by the threads of a block,
                    allocated between the BLOCK and the THREAD loops */
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
  KN_FOR_BLOCK,      /* GPU: blockIdx.{x,y,z} (loop.dim 0, 1, 2), min 0 */
  KN_FOR_THREAD,     /* GPU: threadIdx.{x,y,z} (loop.dim 0, 1, 2), min 0 */
} kn_for_kind;

/* GPU statements (KN_S_GPU). The MMA is PTX's
 * mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32, run by
 * the 32 threads of a warp together: each thread passes its fragments as
 * LOCAL buffers at an offset, laid out as ir/loop/mma.h writes down:
 *   acc[acc_index + 0..3] (f32) += a[a_index + 0..7] x b[b_index + 0..3]
 * CP_ASYNC copies `n` consecutive elements (4, 8 or 16 bytes) from a global
 * (PARAM) buffer to a SHARED one without waiting; when `pred` is false it
 * writes zeros instead (a padded tile's border). The destination may not be
 * read before a CP_WAIT that leaves fewer groups in flight than the
 * copy's (and then a barrier, for other threads' copies).
 * LDMATRIX is PTX's ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16,
 * run by the 32 threads of a warp together: `n` (1, 2 or 4) 8 x 8 matrices
 * of 16-bit elements, each row 16 contiguous bytes of the SHARED buffer `a`;
 * lane 8i + r supplies a_index, the first element of row r of matrix i (the
 * other lanes' a_index is ignored); each thread receives 2n elements into
 * dst[dst_index..+2n) (LOCAL, the same dtype), laid out as ir/loop/mma.h
 * writes down (transposed when `trans`). */
typedef enum kn_gpu_op {
  KN_GPU_BARRIER,   /* __syncthreads(): every thread of the block */
  KN_GPU_MMA,       /* dst = acc, a, b as above */
  KN_GPU_CP_ASYNC,  /* dst[dst_index..+n) = a[a_index..+n) (or 0 where !pred) */
  KN_GPU_CP_COMMIT, /* closes this thread's group of cp.async copies */
  KN_GPU_CP_WAIT,   /* waits until at most n of this thread's groups are in flight */
  KN_GPU_LDMATRIX,  /* dst[dst_index..+2n) = this thread's share of n matrices, rows at a[a_index] */
} kn_gpu_op;

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
  KN_S_GPU,      /* gpu: a kn_gpu_op; GPU kernels only */
} kn_stmt_kind;

struct kn_stmt {
  kn_stmt_kind kind;
  union {
    struct {
      kn_var *var;
      kn_expr *min, *extent;
      kn_for_kind kind;
      kn_stmt *body;
      int dim; /* BLOCK / THREAD: 0 = x, 1 = y, 2 = z */
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
    struct {
      kn_gpu_op op;
      kn_buffer *dst, *a, *b;  /* unused ones NULL */
      kn_expr *dst_index, *a_index, *b_index;
      kn_expr *pred; /* CP_ASYNC: NULL = always true */
      int n;         /* CP_ASYNC: elements; CP_WAIT: groups left in flight; LDMATRIX: matrices */
      kn_dtype ab;   /* MMA: KN_DT_F16 or KN_DT_BF16 */
      bool trans;    /* LDMATRIX: .trans */
    } gpu;
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
  bool gpu;           /* a GPU kernel: the shape described at the top */
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
/* `loop` rebuilt with other bounds and body (kind, var and dim kept). */
kn_stmt *kn_s_for_like(kn_expr_ctx *c, const kn_stmt *loop, kn_expr *min, kn_expr *extent, kn_stmt *body);
/* A BLOCK or THREAD loop over [0, extent). */
kn_stmt *kn_s_bind(kn_expr_ctx *c, kn_var *v, kn_expr *extent, kn_for_kind kind, int dim, kn_stmt *body);
kn_stmt *kn_s_barrier(kn_expr_ctx *c);
kn_stmt *kn_s_mma(kn_expr_ctx *c, kn_dtype ab, kn_buffer *acc, kn_expr *acc_index, kn_buffer *a, kn_expr *a_index,
                  kn_buffer *b, kn_expr *b_index);
kn_stmt *kn_s_cp_async(kn_expr_ctx *c, kn_buffer *dst, kn_expr *dst_index, kn_buffer *src, kn_expr *src_index, int n,
                       kn_expr *pred);
kn_stmt *kn_s_cp_commit(kn_expr_ctx *c);
/* ldmatrix of `count` (1, 2, 4) matrices from SHARED src (this thread's row
 * at src_index) into LOCAL dst at dst_index; both of one 16-bit dtype. */
kn_stmt *kn_s_ldmatrix(kn_expr_ctx *c, kn_buffer *dst, kn_expr *dst_index, kn_buffer *src, kn_expr *src_index,
                       int count, bool trans);
kn_stmt *kn_s_cp_wait(kn_expr_ctx *c, int n);
/* kn_stmt with each expression of a KN_S_GPU statement replaced by fn(expr)
 * (NULL ones stay NULL); s itself when nothing changes. */
kn_stmt *kn_s_gpu_map(kn_expr_ctx *c, kn_stmt *s, kn_expr *(*fn)(kn_expr *e, void *ctx), void *ctx);

/* Does any STORE in s write buffer b? */
bool kn_stmt_stores_to(const kn_stmt *s, const kn_buffer *b);

/* Are a and b the same kernel up to the names of their variables, buffers
 * and symbol: the same parameter dtypes, and bodies equal with each
 * variable and buffer paired with the one bound at the same place? (GPU
 * kernels that are equal compile to one function.) */
bool kn_kernel_alpha_equal(const kn_kernel *a, const kn_kernel *b);

/* Groups n kernels by kn_kernel_alpha_equal: first[i] is the index of the
 * first kernel equal to ks[i] (i itself when none before is); returns the
 * number of groups. A model's repeated layers give equal kernels, and
 * codegen compiles each group once. */
int kn_kernels_group(const kn_kernel *const *ks, int n, int *first);

void kn_stmt_print(const kn_stmt *s, FILE *out, int indent);
void kn_kernel_print(const kn_kernel *k, FILE *out);

#endif
