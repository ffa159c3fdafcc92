/* loop.c — loop IR constructors and the printer. */
#include "ir/loop/loop.h"

#include <string.h>

kn_buffer *kn_buffer_new(kn_expr_ctx *c, const char *name, kn_dtype t, kn_buffer_kind kind,
                         int64_t size) {
  kn_buffer *b = KN_NEW(c->arena, kn_buffer);
  b->name = kn_arena_strdup(c->arena, name);
  b->dtype = t;
  b->kind = kind;
  b->size = size;
  b->id = c->next_var_id++;
  return b;
}

static kn_stmt *stmt(kn_expr_ctx *c, kn_stmt_kind k) {
  kn_stmt *s = KN_NEW(c->arena, kn_stmt);
  s->kind = k;
  return s;
}

kn_stmt *kn_s_for(kn_expr_ctx *c, kn_var *v, kn_expr *min, kn_expr *extent, kn_for_kind kind,
                  kn_stmt *body) {
  KN_ASSERT(min->dtype == KN_DT_I64 && extent->dtype == KN_DT_I64, "loop bounds must be int64");
  kn_stmt *s = stmt(c, KN_S_FOR);
  s->u.loop.var = v;
  s->u.loop.min = min;
  s->u.loop.extent = extent;
  s->u.loop.kind = kind;
  s->u.loop.body = body;
  return s;
}

kn_stmt *kn_s_store(kn_expr_ctx *c, kn_buffer *b, kn_expr *index, kn_expr *value) {
  KN_ASSERT(index->dtype == KN_DT_I64, "store index must be int64");
  KN_ASSERT(value->dtype == b->dtype, "store of the wrong dtype");
  if (value->lanes != index->lanes) {
    KN_ASSERT(value->lanes == 1, "store lanes mismatch");
    value = kn_e_broadcast(c, value, index->lanes);
  }
  kn_stmt *s = stmt(c, KN_S_STORE);
  s->u.store.buffer = b;
  s->u.store.index = index;
  s->u.store.value = value;
  return s;
}

kn_stmt *kn_s_alloc(kn_expr_ctx *c, kn_buffer *b, kn_stmt *body) {
  KN_ASSERT(b->kind == KN_BUF_LOCAL, "alloc of a non-local buffer");
  kn_stmt *s = stmt(c, KN_S_ALLOC);
  s->u.alloc.buffer = b;
  s->u.alloc.body = body;
  return s;
}

kn_stmt *kn_s_seq(kn_expr_ctx *c, kn_stmt **stmts, int n) {
  int kept = 0;
  for (int i = 0; i < n; i++) kept += stmts[i] != NULL;
  if (kept == 1)
    for (int i = 0; i < n; i++)
      if (stmts[i]) return stmts[i];
  kn_stmt *s = stmt(c, KN_S_SEQ);
  s->u.seq.stmts = KN_NEW_ARRAY(c->arena, kn_stmt *, kept > 0 ? kept : 1);
  for (int i = 0; i < n; i++)
    if (stmts[i]) s->u.seq.stmts[s->u.seq.n++] = stmts[i];
  return s;
}

kn_stmt *kn_s_seq2(kn_expr_ctx *c, kn_stmt *a, kn_stmt *b) {
  kn_stmt *both[2] = {a, b};
  return kn_s_seq(c, both, 2);
}

kn_stmt *kn_s_if(kn_expr_ctx *c, kn_expr *cond, kn_stmt *then_s, kn_stmt *else_s) {
  KN_ASSERT(cond->dtype == KN_DT_BOOL && cond->lanes == 1, "if condition must be a scalar bool");
  kn_stmt *s = stmt(c, KN_S_IF);
  s->u.ifs.cond = cond;
  s->u.ifs.then_s = then_s;
  s->u.ifs.else_s = else_s;
  return s;
}

kn_stmt *kn_s_let(kn_expr_ctx *c, kn_var *v, kn_expr *value, kn_stmt *body) {
  kn_stmt *s = stmt(c, KN_S_LET);
  s->u.let.var = v;
  s->u.let.value = value;
  s->u.let.body = body;
  return s;
}

kn_stmt *kn_s_prefetch(kn_expr_ctx *c, kn_buffer *b, kn_expr *index, int level) {
  KN_ASSERT(b && index->lanes == 1 && index->dtype == KN_DT_I64, "prefetch index must be a scalar int64 into a buffer");
  KN_ASSERT(level == 1 || level == 2, "prefetch level must be 1 (L1) or 2 (L2)");
  kn_stmt *s = stmt(c, KN_S_PREFETCH);
  s->u.prefetch.buffer = b;
  s->u.prefetch.index = index;
  s->u.prefetch.level = level;
  return s;
}

bool kn_stmt_stores_to(const kn_stmt *s, const kn_buffer *b) {
  if (!s) return false;
  switch (s->kind) {
  case KN_S_FOR: return kn_stmt_stores_to(s->u.loop.body, b);
  case KN_S_STORE: return s->u.store.buffer == b;
  case KN_S_ALLOC: return kn_stmt_stores_to(s->u.alloc.body, b);
  case KN_S_SEQ:
    for (int i = 0; i < s->u.seq.n; i++)
      if (kn_stmt_stores_to(s->u.seq.stmts[i], b)) return true;
    return false;
  case KN_S_IF: return kn_stmt_stores_to(s->u.ifs.then_s, b) || kn_stmt_stores_to(s->u.ifs.else_s, b);
  case KN_S_LET: return kn_stmt_stores_to(s->u.let.body, b);
  case KN_S_PREFETCH: return false;
  }
  return false;
}

static void pad(FILE *out, int indent) {
  for (int i = 0; i < indent; i++) fputs("  ", out);
}

void kn_stmt_print(const kn_stmt *s, FILE *out, int indent) {
  static const char *kinds[] = {"for", "parallel", "vectorized", "unrolled"};
  if (!s) return;
  switch (s->kind) {
  case KN_S_FOR:
    pad(out, indent);
    fprintf(out, "%s %s in [", kinds[s->u.loop.kind], s->u.loop.var->name);
    kn_expr_print(s->u.loop.min, out);
    fputs(", +", out);
    kn_expr_print(s->u.loop.extent, out);
    fputs("):\n", out);
    kn_stmt_print(s->u.loop.body, out, indent + 1);
    return;
  case KN_S_STORE:
    pad(out, indent);
    fprintf(out, "%s[", s->u.store.buffer->name);
    kn_expr_print(s->u.store.index, out);
    fputs("] = ", out);
    kn_expr_print(s->u.store.value, out);
    fputc('\n', out);
    return;
  case KN_S_ALLOC:
    pad(out, indent);
    fprintf(out, "alloc %s: %s[%lld]\n", s->u.alloc.buffer->name,
            kn_dtype_name(s->u.alloc.buffer->dtype), (long long)s->u.alloc.buffer->size);
    kn_stmt_print(s->u.alloc.body, out, indent);
    return;
  case KN_S_SEQ:
    for (int i = 0; i < s->u.seq.n; i++) kn_stmt_print(s->u.seq.stmts[i], out, indent);
    return;
  case KN_S_IF:
    pad(out, indent);
    fputs("if ", out);
    kn_expr_print(s->u.ifs.cond, out);
    fputs(":\n", out);
    kn_stmt_print(s->u.ifs.then_s, out, indent + 1);
    if (s->u.ifs.else_s) {
      pad(out, indent);
      fputs("else:\n", out);
      kn_stmt_print(s->u.ifs.else_s, out, indent + 1);
    }
    return;
  case KN_S_LET:
    pad(out, indent);
    fprintf(out, "let %s = ", s->u.let.var->name);
    kn_expr_print(s->u.let.value, out);
    fputc('\n', out);
    kn_stmt_print(s->u.let.body, out, indent);
    return;
  case KN_S_PREFETCH:
    pad(out, indent);
    fprintf(out, "prefetch %s[", s->u.prefetch.buffer->name);
    kn_expr_print(s->u.prefetch.index, out);
    fprintf(out, "] to L%d\n", s->u.prefetch.level);
    return;
  }
}

void kn_kernel_print(const kn_kernel *k, FILE *out) {
  fprintf(out, "kernel %s(", k->name);
  for (int i = 0; i < k->n_params; i++)
    fprintf(out, "%s%s: %s*", i ? ", " : "", k->params[i]->name, kn_dtype_name(k->params[i]->dtype));
  fprintf(out, ")%s  # %s\n", k->parallel ? " parallel" : "", k->nodes ? k->nodes : "");
  kn_stmt_print(k->body, out, 1);
}
