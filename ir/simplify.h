/* simplify.h — expression/statement simplification and statement
 * substitution (see simplify.c). */
#ifndef KN_SIMPLIFY_H
#define KN_SIMPLIFY_H

#include "loop.h"

kn_expr *kn_simplify(kn_expr_ctx *c, kn_expr *e);
kn_stmt *kn_simplify_stmt(kn_expr_ctx *c, kn_stmt *s);
/* Replaces `var` by `value` in every expression of s. */
kn_stmt *kn_stmt_substitute(kn_expr_ctx *c, kn_stmt *s, const kn_var *var, kn_expr *value);

#endif
