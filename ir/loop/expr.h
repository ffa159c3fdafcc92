/* expr.h — expressions shared by the tensor-expression (TE) IR and the loop
 * IR. Nodes live in an arena and are immutable once built; a rewrite that
 * changes nothing returns its input pointer.
 *
 * Types: every expression has a scalar element type (dtype) and a lane count
 * (1 = scalar, >1 = vector). Index arithmetic is int64. Integer DIV and MOD
 * are *floor* division and modulo (as in Halide); float MOD is C fmod.
 *
 * Which union field each kind uses is noted beside it. */
#ifndef KN_EXPR_H
#define KN_EXPR_H

#include <stdio.h>

#include "base/base.h"

typedef struct kn_expr kn_expr;
typedef struct kn_buffer kn_buffer;
typedef struct kn_te_tensor kn_te_tensor;

typedef enum kn_expr_kind {
  KN_E_INT,   /* ival */
  KN_E_FLOAT, /* fval */
  KN_E_VAR,   /* var */
  /* bin: a, b (same dtype and lanes; comparisons give bool) */
  KN_E_ADD,
  KN_E_SUB,
  KN_E_MUL,
  KN_E_DIV,
  KN_E_MOD,
  KN_E_MIN, /* on floats NaN when either operand is (ONNX Max / Min, numpy) */
  KN_E_MAX,
  KN_E_EQ,
  KN_E_NE,
  KN_E_LT,
  KN_E_LE,
  KN_E_GT,
  KN_E_GE,
  KN_E_AND,
  KN_E_OR,
  KN_E_NOT,       /* un: a */
  KN_E_SELECT,    /* sel: cond, t, f */
  KN_E_CAST,      /* un: a, converted to the node's dtype */
  KN_E_CALL,      /* call: fn, args */
  KN_E_LOAD,      /* load: buffer + flat index (loop IR); tensor + indices (TE) */
  KN_E_RAMP,      /* ramp: base, stride (scalar int64), lanes = node lanes */
  KN_E_BROADCAST, /* un: a (scalar), lanes = node lanes */
  KN_E_REDUCE,    /* reduce: TE only */
} kn_expr_kind;

/* Intrinsic functions. All are elementwise over lanes except the
 * KN_FN_VREDUCE_* which fold a vector argument into a scalar. */
#define KN_FNS(X)                                                              \
  X(EXP, "exp", 1)                                                             \
  X(LOG, "log", 1)                                                             \
  X(SQRT, "sqrt", 1)                                                           \
  X(ERF, "erf", 1)                                                             \
  X(TANH, "tanh", 1)                                                           \
  X(SIGMOID, "sigmoid", 1)                                                     \
  X(FLOOR, "floor", 1)                                                         \
  X(CEIL, "ceil", 1)                                                           \
  X(ROUND, "round", 1) /* half to even */                                      \
  X(ABS, "abs", 1)                                                             \
  X(SIN, "sin", 1)                                                             \
  X(COS, "cos", 1)                                                             \
  X(POW, "pow", 2)                                                             \
  X(FMA, "fma", 3) /* a*b+c */                                                 \
  X(VREDUCE_ADD, "vreduce_add", 1)                                             \
  X(VREDUCE_MAX, "vreduce_max", 1)                                             \
  X(VREDUCE_MIN, "vreduce_min", 1)

typedef enum kn_fn {
#define X(e, name, nargs) KN_FN_##e,
  KN_FNS(X)
#undef X
      KN_FN_COUNT
} kn_fn;
const char *kn_fn_name(kn_fn fn);
int kn_fn_nargs(kn_fn fn);

typedef enum kn_reduce_op { KN_RED_SUM, KN_RED_MAX, KN_RED_MIN, KN_RED_PROD } kn_reduce_op;

/* A variable: loop index, reduction index, or the batch symbol. Identity is
 * the pointer; names are for printing only. */
typedef struct kn_var {
  const char *name;
  int id;
} kn_var;

struct kn_expr {
  kn_expr_kind kind;
  kn_dtype dtype;
  int lanes;
  union {
    int64_t ival;
    double fval;
    kn_var *var;
    struct {
      kn_expr *a, *b;
    } bin;
    struct {
      kn_expr *a;
    } un;
    struct {
      kn_expr *cond, *t, *f;
    } sel;
    struct {
      kn_fn fn;
      int n;
      kn_expr **args;
    } call;
    struct {
      kn_buffer *buffer;    /* loop IR */
      kn_expr *index;       /* loop IR: flat element index (ramp => vector) */
      kn_te_tensor *tensor; /* TE */
      int n;                /* TE: number of indices */
      kn_expr **indices;    /* TE */
    } load;
    struct {
      kn_expr *base, *stride;
    } ramp;
    struct {
      kn_reduce_op op;
      int n_axes;
      kn_var **axes;      /* reduction variables */
      kn_expr **extents;  /* each axis ranges over [0, extent) */
      kn_expr *source;    /* value folded over the axes */
    } reduce;
  } u;
};

/* ---- construction (arena-owned, types checked with KN_ASSERT) ---- */
typedef struct kn_expr_ctx {
  kn_arena *arena;
  int next_var_id;
} kn_expr_ctx;

kn_var *kn_var_new(kn_expr_ctx *c, const char *name);
kn_expr *kn_e_int(kn_expr_ctx *c, int64_t v);                 /* int64 */
kn_expr *kn_e_const_int(kn_expr_ctx *c, kn_dtype t, int64_t v); /* any int/bool dtype */
kn_expr *kn_e_float(kn_expr_ctx *c, kn_dtype t, double v);
kn_expr *kn_e_var(kn_expr_ctx *c, kn_var *v);                 /* int64 */
kn_expr *kn_e_bin(kn_expr_ctx *c, kn_expr_kind k, kn_expr *a, kn_expr *b);
kn_expr *kn_e_add(kn_expr_ctx *c, kn_expr *a, kn_expr *b);
kn_expr *kn_e_sub(kn_expr_ctx *c, kn_expr *a, kn_expr *b);
kn_expr *kn_e_mul(kn_expr_ctx *c, kn_expr *a, kn_expr *b);
kn_expr *kn_e_div(kn_expr_ctx *c, kn_expr *a, kn_expr *b);
kn_expr *kn_e_mod(kn_expr_ctx *c, kn_expr *a, kn_expr *b);
kn_expr *kn_e_min(kn_expr_ctx *c, kn_expr *a, kn_expr *b);
kn_expr *kn_e_max(kn_expr_ctx *c, kn_expr *a, kn_expr *b);
/* a < b ? a : b and a > b ? a : b: b where a is NaN (IEEE minNum / maxNum
 * for a b that is never NaN). The clamps of float values that become
 * indices use these, so that a NaN coordinate still loads in bounds. */
kn_expr *kn_e_min_num(kn_expr_ctx *c, kn_expr *a, kn_expr *b);
kn_expr *kn_e_max_num(kn_expr_ctx *c, kn_expr *a, kn_expr *b);
kn_expr *kn_e_not(kn_expr_ctx *c, kn_expr *a);
kn_expr *kn_e_select(kn_expr_ctx *c, kn_expr *cond, kn_expr *t, kn_expr *f);
kn_expr *kn_e_cast(kn_expr_ctx *c, kn_dtype t, kn_expr *a);
kn_expr *kn_e_call(kn_expr_ctx *c, kn_fn fn, kn_expr **args, int n);
kn_expr *kn_e_call1(kn_expr_ctx *c, kn_fn fn, kn_expr *a);
kn_expr *kn_e_load(kn_expr_ctx *c, kn_buffer *b, kn_expr *index);
kn_expr *kn_e_tload(kn_expr_ctx *c, kn_te_tensor *t, kn_expr **indices, int n);
kn_expr *kn_e_ramp(kn_expr_ctx *c, kn_expr *base, kn_expr *stride, int lanes);
kn_expr *kn_e_broadcast(kn_expr_ctx *c, kn_expr *a, int lanes);
kn_expr *kn_e_reduce(kn_expr_ctx *c, kn_reduce_op op, kn_var **axes, kn_expr **extents, int n,
                     kn_expr *source);

bool kn_e_is_const_int(const kn_expr *e, int64_t *value);
/* Does e read var v (a reduction counts as reading everything)? */
bool kn_e_uses_var(const kn_expr *e, const kn_var *v);
/* Structural equality (same tree shape, constants, vars, buffers). */
bool kn_e_equal(const kn_expr *a, const kn_expr *b);

/* A correspondence between the variables and buffers of two trees, for
 * equality up to renaming (kn_kernel_alpha_equal): pairs (a[i], b[i]),
 * the innermost binding last. */
typedef struct kn_alpha {
  int n, cap;
  const void **a, **b;
} kn_alpha;
/* kn_e_equal, where a variable or buffer of a equals the one of b that m
 * pairs it with (unpaired ones: the same pointer). */
bool kn_e_equal_under(const kn_expr *a, const kn_expr *b, const kn_alpha *m);
/* Is a paired with b in m (or, unpaired, the same pointer)? */
bool kn_alpha_pairs(const kn_alpha *m, const void *a, const void *b);

/* Replaces every use of `var` by `value` (lanes may differ; the result is
 * re-typed with broadcasting where a vector meets a scalar). */
kn_expr *kn_e_substitute(kn_expr_ctx *c, kn_expr *e, const kn_var *var, kn_expr *value);

/* Rebuilds e with every TE load (tensor != NULL) replaced by fn(load), the
 * load's indices already mapped; reductions map their source. */
typedef kn_expr *(*kn_load_map_fn)(kn_expr_ctx *c, kn_expr *load, void *ctx);
kn_expr *kn_e_map_loads(kn_expr_ctx *c, kn_expr *e, kn_load_map_fn fn, void *ctx);

void kn_expr_print(const kn_expr *e, FILE *out);

#endif
