/* plan_build.c — storage for every value, and the step list.
 *
 * A value's storage is its root: views (Reshape, Flatten, Squeeze,
 * Unsqueeze) share the bytes of their input. Roots are graph inputs,
 * constants, graph outputs (the kernel producing an output's root writes
 * straight into the caller's buffer) or intermediates, which live in the
 * workspace. Intermediates are centred on anchors (place), so that two
 * whose lifetimes [producing step, last reading step] intersect never
 * overlap; a kernel's output never shares bytes with its inputs because both
 * are live at that step. Sizes are for N = max_batch.
 *
 * Row pipelines (find_pipes): a kernel whose output per sample outgrows half
 * of a core's L2 and is read only by the next kernel, through its conv's
 * window of rows, runs with it as one pipe (kiln_pipe in
 * include/kiln/artifact.h): each thread computes the rows the next one needs
 * just before it, so the intermediate comes back from L2 instead of L3 or
 * memory. The first kernel's inputs then stay live through the second.
 * Both kernels must run one output row per task (kn_kernel.rows): on
 * 16-register targets (AVX2, portable C) a dense conv over 16 or more input
 * channels runs as an implicit GEMM over its pixels instead
 * (schedule/rules.c) and starts no pipe. Giving that up to form the pipe was
 * measured no faster on AVX2 code, so the rules keep it. */
#include "tools/plan_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/runtime.h"

_Static_assert(KN_SCHED_MAX_KERNEL_ARGS <= KN_RT_MAX_ARGS, "fusion may build kernels the runtime cannot call");

enum { ROOT_NONE, ROOT_INPUT, ROOT_OUTPUT, ROOT_CONST, ROOT_WORK };

typedef struct storage {
  int kind, index; /* ROOT_*, index of the input / output / const */
  int64_t bytes, offset;
  int first, last; /* lifetime in steps (ROOT_WORK) */
} storage;

/* A first kernel's output per sample below this (half of a 1 MiB L2) stays
 * in the core's L2 for the next kernel anyway; above it, pairing pays
 * (docs/abi.md, "Row pipes"). */
#define KN_PLAN_PIPE_MIN_BYTES (512 * 1024)
/* second-kernel rows per band (1, 2 and 4 measured alike) */
#define KN_PLAN_PIPE_BAND 2

static int root_of(const kn_graph *g, int v) {
  for (int guard = 0; guard < g->n_values; guard++) {
    int p = g->values[v].producer;
    if (g->values[v].data || p < 0 || kn_op_class_of(g->nodes[p].op) != KN_CLASS_VIEW) return v;
    v = g->nodes[p].in[0];
  }
  KN_UNREACHABLE("cycle of views");
  return v;
}

/* Bytes of value v at N = max_batch, or -1 with a diagnostic past
 * KN_PLAN_MAX_TENSOR_BYTES (which also keeps every offset sum below in
 * range). `role` says what v is to the artifact; the diagnostic names the
 * model's node that makes v. */
static int64_t value_bytes(const kn_graph *g, int v, const char *role, kn_diag *d) {
  int64_t n = kn_value_numel(g, v), bytes;
  if (n >= 0 && !__builtin_mul_overflow(n, (int64_t)kn_dtype_size(g->values[v].dtype), &bytes) &&
      bytes <= KN_PLAN_MAX_TENSOR_BYTES)
    return bytes;
  char size[64] = "an overflowing number of";
  if (n >= 0 && !__builtin_mul_overflow(n, (int64_t)kn_dtype_size(g->values[v].dtype), &bytes))
    snprintf(size, sizeof size, "%lld", (long long)bytes);
  char maker[600] = "";
  int p = g->values[v].producer;
  if (p >= 0) {
    const char *name = g->nodes[p].name, *op = g->nodes[p].op_type;
    for (const kn_origin *o = g->nodes[p].origin; o; o = o->up) name = o->name, op = o->op_type; /* the model's */
    snprintf(maker, sizeof maker, " (made by node '%.256s' (%.64s))", name, op);
  }
  kn_diag_error(d, "%s '%s'%s would take %s bytes at batch %lld; an artifact holds tensors of at most %lld bytes "
                   "(16 GiB)",
                role, g->values[v].name, maker, size, (long long)g->max_batch, (long long)KN_PLAN_MAX_TENSOR_BYTES);
  return -1;
}

static int cmp_size_desc(const void *a, const void *b, void *ctx) {
  const kn_plan_buffer *s = ctx;
  int x = *(const int *)a, y = *(const int *)b;
  return s[x].bytes < s[y].bytes ? 1 : s[x].bytes > s[y].bytes ? -1 : x - y;
}

static int64_t half_of(int64_t bytes) { return ((bytes + 1) / 2 + 63) & ~(int64_t)63; }

/* Every buffer is centred on an anchor: its lower half lies below the
 * anchor's address, its upper half above. A parallel kernel's threads take
 * contiguous shares of its outermost loop, which for most kernels (rows of
 * NHWC, tiles of a GEMM's rows) are contiguous shares of its output's bytes;
 * with two threads, the caller writes the lower half and the worker the
 * upper. Centred, the lines a kernel writes were last written, as part of
 * some earlier buffer at the same anchor, by the same core, and the next
 * kernel finds its input's halves where its own threads will read them:
 * no line moves between the cores' caches but those near an anchor. Placed
 * anywhere (first-fit), half of a buffer often fell on lines the other core
 * held, and small parallel kernels ran slower on 2 threads than on one
 * (docs/architecture.md, "Memory plan").
 *
 * Largest first, each buffer goes to the narrowest anchor none of whose
 * buffers is live at the same time as it (so the buffers of one anchor
 * never overlap while live), else to a new anchor as wide as itself. The
 * anchors' regions are laid end to end, 34 lines apart, so that buffers of
 * equal size at two anchors do not map to the same cache sets. */
int64_t kn_plan_place(kn_plan_buffer *b, int n) {
  int *order = malloc(sizeof(int) * (size_t)(n + 1));
  int *anchor = malloc(sizeof(int) * (size_t)(n + 1)), k = 0; /* anchor[i]: order[i]'s */
  int64_t *half = malloc(sizeof(int64_t) * (size_t)(n + 1));  /* per anchor */
  bool *clash = malloc(sizeof(bool) * (size_t)(n + 1));       /* per anchor */
  KN_ASSERT(order && anchor && half && clash, "out of memory");
  for (int i = 0; i < n; i++) order[i] = i;
  qsort_r(order, (size_t)n, sizeof(int), cmp_size_desc, b);
  for (int i = 0; i < n; i++) {
    const kn_plan_buffer *s = &b[order[i]];
    memset(clash, 0, sizeof(bool) * (size_t)k);
    for (int j = 0; j < i; j++) {
      const kn_plan_buffer *o = &b[order[j]];
      if (s->first <= o->last && o->first <= s->last) clash[anchor[j]] = true;
    }
    int best = -1;
    for (int a = 0; a < k; a++)
      if (!clash[a] && (best < 0 || half[a] < half[best])) best = a;
    if (best < 0) half[best = k++] = half_of(s->bytes);
    anchor[i] = best;
  }
  int64_t total = 0;
  for (int a = 0; a < k; a++) { /* half[a] becomes the anchor's address */
    int64_t width = 2 * half[a];
    half[a] += total;
    total += width + 34 * 64;
  }
  for (int i = 0; i < n; i++) b[order[i]].offset = half[anchor[i]] - half_of(b[order[i]].bytes);
  free(clash);
  free(half);
  free(anchor);
  free(order);
  return total;
}

/* Places the intermediates (kn_plan_place); returns the workspace size. */
static int64_t place(storage *st, int n_values) {
  kn_plan_buffer *b = malloc(sizeof *b * (size_t)(n_values + 1));
  int *root = malloc(sizeof(int) * (size_t)(n_values + 1)), n = 0;
  KN_ASSERT(b && root, "out of memory");
  for (int v = 0; v < n_values; v++)
    if (st[v].kind == ROOT_WORK) {
      b[n] = (kn_plan_buffer){.bytes = st[v].bytes, .first = st[v].first, .last = st[v].last};
      root[n++] = v;
    }
  int64_t total = kn_plan_place(b, n);
  for (int i = 0; i < n; i++) st[root[i]].offset = b[i].offset;
  free(root);
  free(b);
  return total;
}

/* Execution order of the kernels: those computing a run-time check
 * (is_check[root]) and every kernel they read from come first, each group in
 * its original order, so that a failed check stops P_run before any output is
 * written. Moving a closed set of producers earlier keeps every read after its
 * writes. */
static int *check_first_order(const kn_graph *g, const kn_kernel_build *kernels, int n, const bool *is_check) {
  int *order = malloc(sizeof(int) * (size_t)(n + 1));
  bool *early = calloc((size_t)n + 1, sizeof(bool));
  bool *wanted = calloc((size_t)g->n_values + 1, sizeof(bool)); /* roots an early kernel reads */
  KN_ASSERT(order && early && wanted, "out of memory");
  for (int k = n - 1; k >= 0; k--) { /* readers come after writers: one backward sweep */
    int out = root_of(g, kernels[k].output);
    if (!is_check[out] && !wanted[out]) continue;
    early[k] = true;
    for (int i = 0; i < kernels[k].n_inputs; i++) wanted[root_of(g, kernels[k].inputs[i])] = true;
  }
  int m = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int k = 0; k < n; k++)
      if (early[k] == (pass == 0)) order[m++] = k;
  free(wanted);
  free(early);
  return order;
}

/* The per-sample bytes of kernel k's output when k and k + 1 can run as a
 * row pipeline (the top of this file), else 0. */
static int64_t pipe_gain(const kn_graph *g, const kn_kernel_build *kernels, int k, const bool *is_check,
                         const storage *st) {
  const kn_kernel_build *a = &kernels[k], *b = &kernels[k + 1];
  const kn_kernel *ka = a->kernel, *kb = b->kernel;
  int out = root_of(g, a->output);
  if (!ka->rows || !kb->rows || ka->rows_batched != kb->rows_batched || !b->windowed ||
      root_of(g, b->window_input) != out || st[out].kind != ROOT_WORK || st[out].last != k + 1 ||
      is_check[out] || is_check[root_of(g, b->output)] || ka->rows > INT32_MAX || kb->rows > INT32_MAX ||
      b->win_stride < 1 || b->win_pad < 0 || b->win_extent < 1)
    return 0;
  /* the window's rows must be the first kernel's rows: not through a view
   * that reshapes them; and the window is the second kernel's only read */
  const kn_shape *sa = &g->values[a->output].shape, *sb = &g->values[b->window_input].shape;
  if (sa->rank != 4 || sb->rank != 4 || sa->batch_mask != sb->batch_mask) return 0;
  for (int i = 0; i < 4; i++)
    if (sa->dim[i] != sb->dim[i]) return 0;
  int reads = 0;
  for (int i = 0; i < b->n_inputs; i++) reads += root_of(g, b->inputs[i]) == out;
  if (reads != 1) return 0;
  int64_t bytes = st[out].bytes / (ka->rows_batched && g->max_batch > 0 ? g->max_batch : 1);
  return bytes >= KN_PLAN_PIPE_MIN_BYTES ? bytes : 0;
}

/* Chooses the pipes (a kernel is in one at most) that keep the most bytes
 * in cache: best[k] over kernels [0, k), by dynamic programming along the
 * step list; extends each first kernel's inputs' lifetimes over the second. */
static void find_pipes(const kn_graph *g, const kn_kernel_build *kernels, int n_kernels, const bool *is_check,
                       storage *st, kn_arena *arena, kn_plan *plan) {
  plan->pipes = KN_NEW_ARRAY(arena, kn_plan_pipe, n_kernels / 2 + 1);
  int64_t *best = calloc((size_t)n_kernels + 1, sizeof *best), *gain = calloc((size_t)n_kernels + 1, sizeof *gain);
  KN_ASSERT(best && gain, "out of memory");
  for (int k = 0; k + 1 < n_kernels; k++) gain[k] = pipe_gain(g, kernels, k, is_check, st);
  for (int k = 1; k <= n_kernels; k++) {
    best[k] = best[k - 1];
    if (k >= 2 && gain[k - 2] && best[k - 2] + gain[k - 2] > best[k]) best[k] = best[k - 2] + gain[k - 2];
  }
  /* walk back: pipe (k - 2, k - 1) where it made best[k]; the pipes come out last first */
  for (int k = n_kernels; k >= 2; k--)
    if (gain[k - 2] && best[k] == best[k - 2] + gain[k - 2] && best[k] != best[k - 1]) {
      const kn_kernel_build *a = &kernels[k - 2], *b = &kernels[k - 1];
      plan->pipes[plan->n_pipes++] = (kn_plan_pipe){k - 2, a->kernel->rows_batched, (int)a->kernel->rows,
                                                    (int)b->kernel->rows, b->win_stride, b->win_pad,
                                                    b->win_extent, KN_PLAN_PIPE_BAND};
      for (int j = 0; j < a->n_inputs; j++) {
        storage *in = &st[root_of(g, a->inputs[j])];
        if (in->kind == ROOT_WORK && in->last < k - 1) in->last = k - 1;
      }
      k--;
    }
  for (int i = 0, j = plan->n_pipes - 1; i < j; i++, j--) { /* ascending */
    kn_plan_pipe t = plan->pipes[i];
    plan->pipes[i] = plan->pipes[j];
    plan->pipes[j] = t;
  }
  free(best);
  free(gain);
}

int kn_plan_build(const kn_graph *g, const kn_kernel_build *kernels_in, int n_kernels,
                  const char *prefix, kn_arena *arena, kn_plan *plan, kn_diag *d) {
  memset(plan, 0, sizeof *plan);
  plan->arena = arena;
  plan->prefix = prefix;
  plan->max_batch = g->max_batch;
  storage *st = calloc((size_t)g->n_values + 1, sizeof(storage));
  bool *is_check = calloc((size_t)g->n_values + 1, sizeof(bool)); /* roots of run-time checks */
  int *check_of = calloc((size_t)g->n_values + 1, sizeof(int));    /* ... their kiln_step.check */
  KN_ASSERT(st && is_check && check_of, "out of memory");
  int status = 0, n_public = g->n_outputs - g->n_checks;

  plan->n_inputs = g->n_inputs;
  plan->inputs = KN_NEW_ARRAY(arena, kn_plan_tensor, g->n_inputs + 1);
  for (int i = 0; i < g->n_inputs; i++) {
    int v = g->inputs[i];
    plan->inputs[i] = (kn_plan_tensor){g->values[v].name, g->values[v].dtype, g->values[v].shape};
    if (value_bytes(g, v, "graph input", d) < 0) {
      status = -1; /* the first one only: a wide graph would repeat it thousands of times */
      goto done;
    }
    st[v].kind = ROOT_INPUT;
    st[v].index = i;
  }
  for (int i = n_public; i < g->n_outputs; i++) {
    int r = root_of(g, g->outputs[i]);
    const kn_value *c = &g->values[r];
    if (c->data) { /* folded: true needs no check, false can never run */
      bool ok = true;
      for (int64_t e = 0; e < kn_value_numel(g, r); e++) ok = ok && ((const uint8_t *)c->data)[e];
      if (!ok) status = kn_diag_error(d, "the run-time check '%s' can never pass", c->name);
      continue;
    }
    KN_ASSERT(c->producer >= 0 && c->dtype == KN_DT_BOOL, "a check is a computed bool");
    is_check[r] = true;
    bool index = g->check_kinds && g->check_kinds[i - n_public] == KN_CHECK_INDEX;
    check_of[r] = index ? KILN_CHECK_INDEX : KILN_CHECK_VALUE;
  }
  if (status < 0) goto done;
  int *order = check_first_order(g, kernels_in, n_kernels, is_check);
  kn_kernel_build *kernels = KN_NEW_ARRAY(arena, kn_kernel_build, n_kernels + 1);
  for (int k = 0; k < n_kernels; k++) kernels[k] = kernels_in[order[k]];
  free(order);

  plan->n_outputs = n_public;
  plan->outputs = KN_NEW_ARRAY(arena, kn_plan_tensor, n_public + 1);
  for (int i = 0; i < n_public; i++) {
    int v = g->outputs[i], r = root_of(g, v);
    plan->outputs[i] = (kn_plan_tensor){g->values[v].name, g->values[v].dtype, g->values[v].shape};
    if (st[r].kind != ROOT_NONE || g->values[r].data || g->values[r].producer < 0) {
      status = kn_diag_error(d, "graph output '%s' is a copy of an input, a constant or another output; "
                                "Kiln does not support such outputs yet", g->values[v].name);
      continue;
    }
    if (value_bytes(g, r, "graph output", d) < 0) {
      status = -1;
      goto done;
    }
    st[r].kind = ROOT_OUTPUT;
    st[r].index = i;
  }
  if (status < 0) goto done;

  plan->consts = KN_NEW_ARRAY(arena, kn_plan_const, g->n_values + 1);
  plan->steps = KN_NEW_ARRAY(arena, kn_plan_step, n_kernels + 1);
  for (int k = 0; k < n_kernels; k++) {
    const kn_kernel_build *kb = &kernels[k];
    int out = root_of(g, kb->output);
    if (st[out].kind == ROOT_NONE) {
      st[out].kind = ROOT_WORK;
      st[out].first = k;
      st[out].bytes = value_bytes(g, out, "tensor", d);
      if (st[out].bytes < 0) {
        status = -1;
        goto done;
      }
    }
    st[out].last = k;
    for (int i = 0; i < kb->n_inputs; i++) {
      int r = root_of(g, kb->inputs[i]);
      if (st[r].kind == ROOT_NONE && g->values[r].data) {
        st[r].kind = ROOT_CONST;
        st[r].index = plan->n_consts;
        int64_t bytes = value_bytes(g, r, "constant", d);
        if (bytes < 0) {
          status = -1;
          goto done;
        }
        plan->consts[plan->n_consts++] = (kn_plan_const){g->values[r].name, bytes, g->values[r].data};
      }
      KN_ASSERT(st[r].kind != ROOT_NONE, "kernel reads a value nobody wrote");
      st[r].last = k;
    }
  }
  find_pipes(g, kernels, n_kernels, is_check, st, arena, plan);
  plan->workspace_bytes = place(st, g->n_values);
  if (plan->workspace_bytes > KN_PLAN_MAX_WORKSPACE_BYTES) {
    status = kn_diag_error(d, "the workspace would take %lld bytes at batch %lld; an artifact's workspace holds at "
                              "most %lld bytes (1 TiB)",
                           (long long)plan->workspace_bytes, (long long)g->max_batch,
                           (long long)KN_PLAN_MAX_WORKSPACE_BYTES);
    goto done;
  }

  for (int k = 0; k < n_kernels; k++) {
    const kn_kernel_build *kb = &kernels[k];
    kn_plan_step *step = &plan->steps[plan->n_steps++];
    step->kernel = kb->kernel;
    step->check = check_of[root_of(g, kb->output)];
    step->n_args = kb->n_inputs + 1;
    step->args = KN_NEW_ARRAY(arena, kn_plan_arg, step->n_args);
    for (int i = 0; i < step->n_args; i++) {
      storage *s = &st[root_of(g, i == 0 ? kb->output : kb->inputs[i - 1])];
      static const int kinds[] = {[ROOT_INPUT] = KILN_ARG_INPUT, [ROOT_OUTPUT] = KILN_ARG_OUTPUT,
                                  [ROOT_CONST] = KILN_ARG_CONST, [ROOT_WORK] = KILN_ARG_WORKSPACE};
      step->args[i] = (kn_plan_arg){kinds[s->kind], s->index, s->kind == ROOT_WORK ? s->offset : 0};
    }
  }
  /* one pass over the kernels, not one per output (quadratic on wide graphs) */
  bool *written = calloc((size_t)g->n_values + 1, sizeof(bool));
  KN_ASSERT(written, "out of memory");
  for (int k = 0; k < n_kernels; k++) written[root_of(g, kernels[k].output)] = true;
  for (int i = 0; i < n_public; i++)
    if (!written[root_of(g, g->outputs[i])])
      status = kn_diag_error(d, "graph output '%s' is never computed", g->values[g->outputs[i]].name);
  free(written);
done:
  free(is_check);
  free(check_of);
  free(st);
  return status;
}
