/* expr_dag.h — the expression DAG of one statement, shared by the emitters
 * (codegen/c_emit.c, codegen/cuda_expr.c, codegen/llvm_expr.c).
 *
 * Each emits a statement's DAG once: a table keyed by node pointer holds
 * what an emitter knows of each node (the text emitters count its parents,
 * so that nodes used twice get a `const` temporary and the others are
 * inlined; the LLVM emitter keeps the value it built). The table is one open-addressing hash (linear
 * probing, at most half full); it is cleared per statement and freed with
 * the emitter. Each emitter uses the slot fields it needs. */
#ifndef KN_CG_EXPR_DAG_H
#define KN_CG_EXPR_DAG_H

#include <stdbool.h>

#include "ir/loop/range.h"

/* One node of the current statement's DAG. */
typedef struct kn_cg_dag_slot {
  const kn_expr *e;
  int uses;       /* parents within the current statement */
  int temp;       /* -1: no temporary yet */
  int scope;      /* c_emit: scope of the temporary (0: the scalar code) */
  bool seen;      /* c_emit: visited by reads_other_lanes */
  bool has_range; /* cuda, llvm: range memoised */
  kn_range range;
  void *value;    /* llvm: the LLVMValueRef emitted, NULL until then */
} kn_cg_dag_slot;

typedef struct kn_cg_dag {
  kn_cg_dag_slot *slots; /* calloc'd, cap a power of two */
  int cap, used;
} kn_cg_dag;

/* e's slot, added (uses 0, temp -1) when new. May grow the table: a slot
 * pointer is valid only until the next call. */
kn_cg_dag_slot *kn_cg_dag_slot_of(kn_cg_dag *d, const kn_expr *e);
/* e's slot, or NULL when e has none (the table is left as it is). */
kn_cg_dag_slot *kn_cg_dag_find(const kn_cg_dag *d, const kn_expr *e);
/* Empties the table for the next statement (keeps its memory). */
void kn_cg_dag_clear(kn_cg_dag *d);
void kn_cg_dag_free(kn_cg_dag *d);
/* Counts the parents of every node of the DAG under e (visited once). */
void kn_cg_dag_count_uses(kn_cg_dag *d, const kn_expr *e);

/* The operands of e into kids (at most 3), and how many. Tolerant of
 * malformed nodes, which the CUDA emitter reports as diagnostics after
 * counting: REDUCE has none, a LOAD without index none, a CALL at most its
 * first 3 arguments. */
int kn_cg_expr_children(const kn_expr *e, const kn_expr *kids[3]);

#endif
