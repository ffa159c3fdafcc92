/* eval_value.h — the value model the two loop-IR interpreters share
 * (ir/loop/loop_eval.c on the CPU, ir/loop/gpu_eval.c with GPU semantics),
 * so that both compute every expression the same way.
 *
 * Values are held per lane as double (floats) or int64 (integers, bool);
 * float32 results are rounded to float after each operation, f16 / bf16 /
 * float8 values are converted exactly on loads and rounded on stores and
 * casts. Variables and loads are the interpreter's business: it passes them
 * in as hooks, and a hook that fails stops the evaluation (the GPU
 * interpreter's bounds and race checks). */
#ifndef KN_EVAL_VALUE_H
#define KN_EVAL_VALUE_H

#include "ir/loop/loop.h"

enum { KN_EV_MAX_LANES = 64 };

typedef struct kn_ev_val {
  int lanes;
  bool is_float;
  double f[KN_EV_MAX_LANES];
  int64_t i[KN_EV_MAX_LANES];
} kn_ev_val;

/* x rounded to what dtype t can hold (f32 and the float8 formats). */
double kn_ev_round(kn_dtype t, double x);
/* Element i of an array of float (int) dtype t at p, as a value. */
double kn_ev_read_f(kn_dtype t, const void *p, int64_t i);
int64_t kn_ev_read_i(kn_dtype t, const void *p, int64_t i);
/* Stores lane `lane` of v as element i of an array of dtype t at p. */
void kn_ev_write(kn_dtype t, void *p, int64_t i, const kn_ev_val *v, int lane);

/* How an interpreter binds variables and reads buffers. Each hook returns 0,
 * or -1 to stop the evaluation (having said why, if it wants to). The load
 * hook gets the load node and its evaluated index (one lane per element) and
 * fills out->f or out->i for every lane. */
typedef struct kn_ev_hooks {
  void *ctx;
  int (*var)(void *ctx, const kn_var *v, kn_ev_val *out);
  int (*load)(void *ctx, const kn_expr *load, const kn_ev_val *index, kn_ev_val *out);
} kn_ev_hooks;

/* Evaluates x into *out. Returns 0, or -1 when a hook failed. */
int kn_ev_expr(const kn_ev_hooks *h, const kn_expr *x, kn_ev_val *out);

#endif
