/* gpu_test_util.h — small builders shared by the GPU interpreter and
 * verifier tests: an arena-backed context, GPU kernels assembled by hand, and
 * the check that a must-fail run said what it should. Include after
 * cmocka.h. */
#ifndef KN_GPU_TEST_UTIL_H
#define KN_GPU_TEST_UTIL_H

#include <string.h>

#include "ir/loop/gpu_eval.h"

typedef struct gpu_fx {
  kn_arena arena;
  kn_expr_ctx c;
  kn_diag d;
} gpu_fx;

static inline void gpu_fx_init(gpu_fx *f) {
  kn_arena_init(&f->arena);
  f->c = (kn_expr_ctx){.arena = &f->arena};
  kn_diag_init(&f->d);
}

static inline void gpu_fx_free(gpu_fx *f) {
  kn_diag_free(&f->d);
  kn_arena_free(&f->arena);
}

static inline kn_expr *I(gpu_fx *f, int64_t v) { return kn_e_int(&f->c, v); }
static inline kn_expr *V(gpu_fx *f, kn_var *v) { return kn_e_var(&f->c, v); }

/* A GPU kernel over `n` params (copied into the arena). */
static inline kn_kernel gpu_kernel(gpu_fx *f, const char *name, kn_buffer **params, int n, kn_stmt *body) {
  kn_buffer **p = KN_NEW_ARRAY(&f->arena, kn_buffer *, n > 0 ? n : 1);
  for (int i = 0; i < n; i++) p[i] = params[i];
  return (kn_kernel){.name = name, .n_params = n, .params = p, .body = body, .gpu = true};
}

/* Does some diagnostic line contain every one of the NULL-terminated words? */
static inline bool diag_says(const kn_diag *d, const char *const *words) {
  for (int l = 0; l < d->count; l++) {
    bool all = true;
    for (int w = 0; words[w] && all; w++) all = strstr(d->lines[l], words[w]) != NULL;
    if (all) return true;
  }
  return false;
}

/* Some diagnostic line contains every word, else the test fails showing
 * the lines (cmocka.h must come first). */
#define expect_diag(d, ...)                                                                                            \
  do {                                                                                                                 \
    const char *const words_[] = {__VA_ARGS__, NULL};                                                                  \
    if (!diag_says((d), words_)) {                                                                                     \
      kn_diag_print((d), "got");                                                                                       \
      fail_msg("no diagnostic mentions '%s'", words_[0]);                                                              \
    }                                                                                                                  \
  } while (0)

#endif
