/* c_emit.h — internal interface of the portable C back end (codegen/c_*.c).
 *
 *   kn_cg_c_kernel   one finalized loop-IR kernel -> a static C function
 *                    with the kernel calling convention of ir/loop/loop.h
 *   kn_cg_c_prelude  the helper functions every generated kernel may call
 *                    (floor division, f16 / bf16 conversions, NaN-aware
 *                    min / max), as C source text
 *   kn_cg_package_c  (codegen.h) writes the whole .c artifact
 *
 * The generated C is C17 plus nothing but <math.h>, <stdint.h>,
 * <stdbool.h> and <string.h>; the runtime appended to it also uses pthreads. */
#ifndef KN_CG_C_EMIT_H
#define KN_CG_C_EMIT_H

#include <stdarg.h>
#include <stddef.h>

#include "ir/loop/loop.h"

/* A growable text buffer (malloc'd; abort on out of memory). */
typedef struct kn_cg_sbuf {
  char *s;
  size_t n, cap;
} kn_cg_sbuf;

void kn_cg_sbuf_printf(kn_cg_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kn_cg_sbuf_append(kn_cg_sbuf *b, const char *s, size_t n);
void kn_cg_sbuf_free(kn_cg_sbuf *b);

/* Text helpers of the C-like emitters (c_emit.c, cuda_*.c), one copy so
 * that both spell their output the same way:
 *   kn_cg_arena_vfmt  printf into `a` (lives until the arena is freed);
 *   kn_cg_sbuf_vline  `indent` two-space steps, the text, a newline;
 *   kn_cg_var_name    "v<id>_<name>", each character of the name outside
 *                     [A-Za-z0-9] as '_', at most 31 of them: a C
 *                     identifier unique per variable. */
char *kn_cg_arena_vfmt(kn_arena *a, const char *f, va_list ap) __attribute__((format(printf, 2, 0)));
void kn_cg_sbuf_vline(kn_cg_sbuf *b, int indent, const char *f, va_list ap) __attribute__((format(printf, 3, 0)));
const char *kn_cg_var_name(kn_arena *a, const kn_var *v);

/* Appends `static void NAME(void *const *args, int64_t batch, int64_t task,
 * int64_t ntasks) { ... }` for kernel `k` (NAME = k->name). Malformed loop IR
 * is a compiler bug (KN_ASSERT), as in the LLVM back end. */
void kn_cg_c_kernel(kn_cg_sbuf *out, const kn_kernel *k);

extern const char kn_cg_c_prelude[];

#endif
