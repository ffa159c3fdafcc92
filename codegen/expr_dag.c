/* expr_dag.c — the per-statement expression DAG of the C text emitters
 * (see expr_dag.h). Requires nothing of the nodes beyond their kinds;
 * guarantees each distinct node pointer one slot per statement. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/expr_dag.h"

static size_t hash_ptr(const void *p, int cap) {
  uintptr_t x = (uintptr_t)p;
  x ^= x >> 17;
  x *= 0x9E3779B97F4A7C15ull;
  return (size_t)(x >> 20) & (size_t)(cap - 1);
}

kn_cg_dag_slot *kn_cg_dag_slot_of(kn_cg_dag *d, const kn_expr *e) {
  if ((d->used + 1) * 2 > d->cap) { /* keep at most half full: short probes */
    kn_cg_dag_slot *old = d->slots;
    int old_cap = d->cap;
    d->cap = old_cap ? old_cap * 2 : 256;
    d->slots = calloc((size_t)d->cap, sizeof *d->slots);
    KN_ASSERT(d->slots, "out of memory");
    d->used = 0;
    for (int i = 0; i < old_cap; i++)
      if (old[i].e) *kn_cg_dag_slot_of(d, old[i].e) = old[i];
    free(old);
  }
  size_t i = hash_ptr(e, d->cap);
  while (d->slots[i].e && d->slots[i].e != e) i = (i + 1) & (size_t)(d->cap - 1);
  if (!d->slots[i].e) {
    d->slots[i] = (kn_cg_dag_slot){.e = e, .temp = -1};
    d->used++;
  }
  return &d->slots[i];
}

kn_cg_dag_slot *kn_cg_dag_find(const kn_cg_dag *d, const kn_expr *e) {
  if (!d->used) return NULL;
  for (size_t i = hash_ptr(e, d->cap);; i = (i + 1) & (size_t)(d->cap - 1)) {
    if (!d->slots[i].e) return NULL;
    if (d->slots[i].e == e) return &d->slots[i];
  }
}

void kn_cg_dag_clear(kn_cg_dag *d) {
  if (d->used) memset(d->slots, 0, sizeof *d->slots * (size_t)d->cap);
  d->used = 0;
}

void kn_cg_dag_free(kn_cg_dag *d) {
  free(d->slots);
  *d = (kn_cg_dag){0};
}

int kn_cg_expr_children(const kn_expr *e, const kn_expr *kids[3]) {
  switch (e->kind) {
  case KN_E_INT:
  case KN_E_FLOAT:
  case KN_E_VAR:
  case KN_E_REDUCE: return 0;
  case KN_E_NOT:
  case KN_E_CAST:
  case KN_E_BROADCAST: kids[0] = e->u.un.a; return 1;
  case KN_E_SELECT:
    kids[0] = e->u.sel.cond, kids[1] = e->u.sel.t, kids[2] = e->u.sel.f;
    return 3;
  case KN_E_LOAD: kids[0] = e->u.load.index; return e->u.load.index ? 1 : 0;
  case KN_E_RAMP: kids[0] = e->u.ramp.base, kids[1] = e->u.ramp.stride; return 2;
  case KN_E_CALL: {
    int n = e->u.call.n < 3 ? e->u.call.n : 3;
    for (int i = 0; i < n; i++) kids[i] = e->u.call.args[i];
    return n;
  }
  default: kids[0] = e->u.bin.a, kids[1] = e->u.bin.b; return 2;
  }
}

void kn_cg_dag_count_uses(kn_cg_dag *d, const kn_expr *e) {
  kn_cg_dag_slot *s = kn_cg_dag_slot_of(d, e);
  if (s->uses++ > 0) return;
  const kn_expr *kids[3];
  int n = kn_cg_expr_children(e, kids);
  for (int i = 0; i < n; i++) kn_cg_dag_count_uses(d, kids[i]);
}
