/* simplify.h — expression/statement simplification and statement
 * substitution (see simplify.c). */
#ifndef KN_SIMPLIFY_H
#define KN_SIMPLIFY_H

#include "ir/loop/loop.h"
#include "ir/loop/range.h"

/* A variable and its value range (ir/loop/range.h: an unknown side is a
 * flag), as kn_expr_range and kn_expr_truth take them. */
typedef struct kn_var_range {
  const kn_var *var;
  kn_range range;
} kn_var_range;

kn_expr *kn_simplify(kn_expr_ctx *c, kn_expr *e);
kn_stmt *kn_simplify_stmt(kn_expr_ctx *c, kn_stmt *s);
/* Replaces `var` by `value` in every expression of s. */
kn_stmt *kn_stmt_substitute(kn_expr_ctx *c, kn_stmt *s, const kn_var *var, kn_expr *value);

/* Conservative range of a scalar int64 expression when each variable of
 * r[0..n) lies in its range (the last entry for a variable wins; variables
 * not listed are unknown); unknown for any other expression. */
kn_range kn_expr_range(const kn_expr *e, const kn_var_range *r, int n);
/* 1 when the scalar bool e holds for every value of its variables in the
 * ranges r[0..n), 0 when it holds for none, -1 when that is not known. */
int kn_expr_truth(const kn_expr *e, const kn_var_range *r, int n);

#endif
