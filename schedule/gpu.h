/* gpu.h — GPU schedules: the default for every kernel (gpu_simt.c) and
 * the templates that take the kernels they fit (gpu_mma.c, gpu_rows.c). The
 * kernels come out in the GPU shape of ir/loop/loop.h. */
#ifndef KN_SCHED_GPU_H
#define KN_SCHED_GPU_H

#include "ir/loop/simplify.h"
#include "schedule/schedule.h"

/* The default GPU schedule of output `out` (see gpu_simt.c). */
void kn_sched_default_gpu(const kn_te_tensor *out, const kn_sched_hints *h, kn_schedule *s);

/* The Tensor Core template (gpu_mma.c) for O when it fits (a contraction
 * of f16 or bf16 factors): the whole GPU kernel body storing into out_buf,
 * or NULL when O is not such a contraction. *schedule is set to the
 * template's parameters as a line of text. */
kn_stmt *kn_gpu_mma_lower(kn_expr_ctx *ec, kn_te_tensor *out, kn_buffer *out_buf, const kn_lower_params *params,
                          const char **schedule);

/* The cooperative row template (gpu_rows.c) for O when its reduction
 * stages all fold the trailing elements of a row (softmax, layer norm, a
 * reduction over the last axis): one thread block per row. NULL when O is
 * not of that shape; else the GPU kernel body storing into out_buf, and
 * *schedule its parameters as a line of text. */
kn_stmt *kn_gpu_rows_lower(kn_expr_ctx *ec, kn_te_tensor *out, kn_buffer *out_buf, const kn_lower_params *params,
                           const char **schedule);

/* A lowered, finalized CPU-shaped nest (one fused PARALLEL loop) as a GPU
 * kernel body: the parallel loop bound to blocks and threads. */
kn_stmt *kn_gpu_bind(kn_expr_ctx *c, kn_stmt *body);

#endif
