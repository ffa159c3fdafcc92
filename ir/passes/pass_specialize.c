/* pass_specialize.c — graph inputs whose values decide shapes, read at run
 * time, when the model declares the shape of every output.
 *
 * Kiln compiles static shapes, so Reshape's `shape`, Reduce*'s `axes`, TopK's
 * `K` ... must be known at compile time. When such a value is a graph input
 * (and `kiln compile --bind` does not make it a constant), the output shapes
 * the ONNX graph declares often pin it down. This pass:
 *  - makes an input with zero elements a constant (there is nothing to read);
 *  - otherwise tries every assignment of the undecided inputs over a small
 *    domain (axes in [-rank, rank), else -1, 0, 1 and every dim the graph
 *    mentions) and keeps the candidates for which shape inference gives
 *    exactly the declared output shapes;
 *  - groups the candidates into classes that compute the same thing: a value
 *    that only decides a shape (Reshape's shape, TopK's K, Split's sizes ...)
 *    puts all its candidates in one class, Reduce axes are compared as
 *    normalized sets, anything else by its raw value;
 *  - gives the consumers a class representative as a constant; with several
 *    classes (ReduceSum of a [3,2,2] tensor to [3,2] over axis 1 or 2), the
 *    nodes downstream of the inputs are duplicated per class and each output is
 *    selected at run time (Where) by the class the inputs' values fall in;
 *  - adds a run-time check (kn_graph.n_checks): P_run returns KILN_ERR_VALUE
 *    unless the inputs hold one of the candidates. Elements of a shape-only
 *    value that no candidate depends on (AffineGrid's C in `size`) are not
 *    checked.
 * The inputs stay inputs of the artifact. Nothing changes when the domain is
 * too large, no candidate or too many classes remain, or an output has no
 * declared static shape: shape inference then reports the input as before. */
#include <stdlib.h>
#include <string.h>

#include "ir/passes/rewrite.h"
#include "ir/passes/passes.h"
#include "ir/ref/ref_eval.h"
#include "ir/shape/shape_infer.h"

enum {
  MAX_ELEMS = 16,     /* elements of all undecided inputs together */
  MAX_TRIES = 10000,  /* assignments tried (each one shape-infers the graph) */
  MAX_WORK = 4000000, /* assignments tried x nodes */
  MAX_CANDS = 4096,   /* matching assignments kept */
  MAX_CLASSES = 8,    /* duplicated computations */
  MAX_DOMAIN = 48,    /* values per element */
};

typedef enum { USE_SHAPE, USE_AXES, USE_VALUE } use_kind;

typedef struct undecided {
  int value; /* the graph input */
  int n;     /* elements */
  int first; /* offset of its elements in a candidate */
  use_kind use;
  int rank;      /* USE_AXES: the rank its axes index */
  int axes_rank; /* > 0: a Squeeze / Unsqueeze reads it as axes of this rank */
  bool reshape;  /* a Reshape reads it: -1 and 0 are meaningful */
  int n_dom;
  double dom[MAX_DOMAIN];
} undecided;

typedef struct spec {
  kn_graph *g;
  int n_inputs, n_elems;
  undecided in[MAX_ELEMS];
  int n_cands;
  double *cands;    /* n_cands x n_elems */
  int *cls;         /* class of each candidate */
  int n_classes;
  bool care[MAX_ELEMS]; /* the check compares this element */
} spec;

static bool is_reduce(kn_op op) {
  switch (op) {
  case KN_OP_REDUCE_MEAN: case KN_OP_REDUCE_SUM: case KN_OP_REDUCE_MAX: case KN_OP_REDUCE_MIN:
  case KN_OP_REDUCE_PROD: case KN_OP_REDUCE_L1: case KN_OP_REDUCE_L2: case KN_OP_REDUCE_SUM_SQUARE:
  case KN_OP_REDUCE_LOG_SUM: case KN_OP_REDUCE_LOG_SUM_EXP: return true;
  default: return false;
  }
}

/* How input k of node n depends on its value. USE_SHAPE: only through the
 * output shapes it yields (any two values giving the same shapes compute the
 * same thing). */
static use_kind use_of(const kn_graph *g, const kn_node *n, int k, int *rank) {
  if (is_reduce(n->op) && k == 1) {
    *rank = g->values[n->in[0]].shape.rank;
    return USE_AXES;
  }
  switch (n->op) {
  case KN_OP_RESHAPE: case KN_OP_EXPAND: case KN_OP_SQUEEZE: case KN_OP_UNSQUEEZE: case KN_OP_TILE:
  case KN_OP_TOP_K: case KN_OP_SPLIT: case KN_OP_ONE_HOT: case KN_OP_CENTER_CROP_PAD:
  case KN_OP_AFFINE_GRID: case KN_OP_COL2IM:
    return k == 1 ? USE_SHAPE : USE_VALUE;
  case KN_OP_CONSTANT_OF_SHAPE: case KN_OP_HANN_WINDOW: case KN_OP_HAMMING_WINDOW: case KN_OP_BLACKMAN_WINDOW:
    return k == 0 ? USE_SHAPE : USE_VALUE;
  case KN_OP_MAX_UNPOOL: return k == 2 ? USE_SHAPE : USE_VALUE;
  case KN_OP_RESIZE: /* sizes; other policies scale by a ratio the sizes pick */
    return k == 3 && !strcmp(kn_node_attr_string(n, "keep_aspect_ratio_policy", "stretch"), "stretch")
               ? USE_SHAPE
               : USE_VALUE;
  default: return USE_VALUE;
  }
}

/* The use of graph input v over all its readers (the weakest one). */
static use_kind use_of_input(const kn_graph *g, int v, int *rank, int *axes_rank, bool *reshape) {
  use_kind use = USE_SHAPE;
  int r = -1, readers = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const kn_node *n = &g->nodes[i];
    for (int k = 0; !n->dead && k < n->n_in; k++) {
      if (n->in[k] != v) continue;
      int rk = -1;
      use_kind u = use_of(g, n, k, &rk);
      *reshape |= n->op == KN_OP_RESHAPE;
      if ((n->op == KN_OP_SQUEEZE || n->op == KN_OP_UNSQUEEZE) && k == 1) {
        int r = g->values[n->in[0]].shape.rank + (n->op == KN_OP_UNSQUEEZE ? (int)kn_value_numel(g, v) : 0);
        if (r > *axes_rank) *axes_rank = r;
      }
      if (u == USE_AXES && (readers == 0 || (use == USE_AXES && rk == r))) {
        use = USE_AXES;
        r = rk;
      } else if (u != USE_SHAPE || use == USE_AXES) {
        use = USE_VALUE;
      }
      readers++;
    }
  }
  *rank = r;
  return use;
}

static void dom_add(undecided *u, double x) {
  for (int i = 0; i < u->n_dom; i++)
    if (u->dom[i] == x) return;
  if (u->n_dom < MAX_DOMAIN) u->dom[u->n_dom++] = x;
}

/* The values an element of u may take: axes; else 1, every dim the graph
 * mentions (0 among them when a tensor is empty) and their quotients (Tile's
 * repeats), the axes of a Squeeze / Unsqueeze reading it, and -1 and 0 for
 * a Reshape. Every shape-only use listed in use_of takes its values there. */
static void fill_domain(const kn_graph *g, undecided *u) {
  const kn_value *val = &g->values[u->value];
  if (u->use == USE_AXES) {
    for (int a = -u->rank; a < u->rank; a++) dom_add(u, a);
    return;
  }
  if (val->dtype == KN_DT_BOOL) {
    dom_add(u, 0);
    dom_add(u, 1);
    return;
  }
  for (int a = -u->axes_rank; a < u->axes_rank; a++) dom_add(u, a);
  if (u->reshape || u->use == USE_VALUE) {
    dom_add(u, -1);
    dom_add(u, 0);
  }
  dom_add(u, 1);
  for (int i = 0; i < g->n_inputs; i++)
    for (int k = 0; k < g->values[g->inputs[i]].shape.rank; k++) dom_add(u, (double)g->values[g->inputs[i]].shape.dim[k]);
  for (int o = 0; o < g->n_outputs - g->n_checks; o++)
    for (int k = 0; k < g->out_declared[o].rank; k++) {
      int64_t out = g->out_declared[o].dim[k];
      dom_add(u, (double)out);
      for (int i = 0; i < g->n_inputs; i++) /* Tile's repeats */
        for (int j = 0; j < g->values[g->inputs[i]].shape.rank; j++) {
          int64_t in = g->values[g->inputs[i]].shape.dim[j];
          if (in > 1 && out > in && out % in == 0) dom_add(u, (double)(out / in));
        }
    }
}

/* Do the public outputs have exactly their declared shapes? */
static bool outputs_match(const kn_graph *g) {
  for (int o = 0; o < g->n_outputs - g->n_checks; o++) {
    const kn_value *v = &g->values[g->outputs[o]];
    const kn_shape *want = &g->out_declared[o];
    if (!v->shape_known || v->shape.batch_mask || v->shape.rank != want->rank) return false;
    for (int k = 0; k < want->rank; k++)
      if (v->shape.dim[k] != want->dim[k]) return false;
  }
  return true;
}

/* Tries every assignment; fills s->cands, and more_needed[] with the graph
 * inputs some assignment still lacked (a reader further down). Returns 0, or
 * -1 when there are too many to try. */
static int enumerate(spec *s, bool *more_needed) {
  kn_graph *g = s->g;
  double tries = 1;
  for (int i = 0; i < s->n_inputs; i++)
    for (int e = 0; e < s->in[i].n; e++) tries *= s->in[i].n_dom;
  if (tries > MAX_TRIES || tries * (g->n_nodes + 1) > MAX_WORK) return -1;
  void *bufs[MAX_ELEMS];
  for (int i = 0; i < s->n_inputs; i++) {
    const kn_value *v = &g->values[s->in[i].value];
    bufs[i] = calloc((size_t)s->in[i].n + 1, (size_t)kn_dtype_size(v->dtype));
    KN_ASSERT(bufs[i], "out of memory");
  }
  s->cands = calloc((size_t)MAX_CANDS * (size_t)s->n_elems + 1, sizeof(double));
  KN_ASSERT(s->cands, "out of memory");
  int digit[MAX_ELEMS] = {0};
  int elem_input[MAX_ELEMS];
  for (int i = 0; i < s->n_inputs; i++)
    for (int e = 0; e < s->in[i].n; e++) elem_input[s->in[i].first + e] = i;
  kn_diag quiet;
  kn_diag_init(&quiet);
  for (bool more = true; more && s->n_cands < MAX_CANDS;) {
    double cand[MAX_ELEMS];
    for (int j = 0; j < s->n_elems; j++) {
      const undecided *u = &s->in[elem_input[j]];
      cand[j] = u->dom[digit[j]];
      kn_dtype t = g->values[u->value].dtype;
      if (kn_dtype_is_float(t)) kn_ref_store(t, bufs[elem_input[j]], j - u->first, cand[j]);
      else kn_ref_store_int(t, bufs[elem_input[j]], j - u->first, (int64_t)cand[j]);
    }
    for (int i = 0; i < s->n_inputs; i++) g->values[s->in[i].value].data = bufs[i];
    if (kn_infer_shapes_needs(g, more_needed, &quiet) == 0 && outputs_match(g))
      memcpy(&s->cands[(size_t)s->n_cands++ * (size_t)s->n_elems], cand, sizeof(double) * (size_t)s->n_elems);
    kn_diag_free(&quiet);
    kn_diag_init(&quiet);
    more = false; /* odometer */
    for (int j = s->n_elems - 1; j >= 0; j--) {
      if (++digit[j] < s->in[elem_input[j]].n_dom) {
        more = true;
        break;
      }
      digit[j] = 0;
    }
  }
  kn_diag_free(&quiet);
  for (int i = 0; i < s->n_inputs; i++) {
    g->values[s->in[i].value].data = NULL;
    free(bufs[i]);
  }
  return 0;
}

/* The class key of candidate c: nothing for shape-only inputs, the axis set
 * (a bit mask) for axes, the raw values otherwise. */
static void class_key(const spec *s, const double *c, double *key) {
  for (int i = 0; i < s->n_inputs; i++) {
    const undecided *u = &s->in[i];
    key[i * (MAX_ELEMS + 1)] = 0;
    if (u->use == USE_AXES) {
      double mask = 0;
      for (int e = 0; e < u->n; e++) {
        int a = kn_axis_norm((int64_t)c[u->first + e], u->rank);
        mask += (double)(1u << a);
      }
      key[i * (MAX_ELEMS + 1)] = mask;
    }
    for (int e = 0; e < MAX_ELEMS; e++)
      key[i * (MAX_ELEMS + 1) + 1 + e] = u->use == USE_VALUE && e < u->n ? c[u->first + e] : 0;
  }
}

static void classify(spec *s) {
  size_t key_len = (size_t)s->n_inputs * (MAX_ELEMS + 1);
  double *keys = calloc((size_t)MAX_CLASSES * key_len + 1, sizeof(double));
  double *key = calloc(key_len + 1, sizeof(double));
  s->cls = calloc((size_t)s->n_cands + 1, sizeof(int));
  KN_ASSERT(keys && key && s->cls, "out of memory");
  s->n_classes = 0;
  for (int c = 0; c < s->n_cands; c++) {
    class_key(s, &s->cands[(size_t)c * (size_t)s->n_elems], key);
    int k = 0;
    while (k < s->n_classes && memcmp(&keys[(size_t)k * key_len], key, key_len * sizeof(double))) k++;
    if (k == s->n_classes) {
      if (s->n_classes == MAX_CLASSES) { /* too many: give up */
        s->n_classes = MAX_CLASSES + 1;
        break;
      }
      memcpy(&keys[(size_t)k * key_len], key, key_len * sizeof(double));
      s->n_classes++;
    }
    s->cls[c] = k;
  }
  free(key);
  free(keys);
}

static bool is_cand(const spec *s, const double *c) {
  for (int k = 0; k < s->n_cands; k++)
    if (!memcmp(&s->cands[(size_t)k * (size_t)s->n_elems], c, sizeof(double) * (size_t)s->n_elems)) return true;
  return false;
}

/* An element of a shape-only input is checked unless every candidate stays
 * one whatever value (of its domain) the element takes. */
static void find_care(spec *s) {
  for (int i = 0; i < s->n_inputs; i++) {
    const undecided *u = &s->in[i];
    for (int e = 0; e < u->n; e++) {
      int j = u->first + e;
      bool free_elem = u->use == USE_SHAPE && u->n_dom > 3;
      for (int c = 0; free_elem && c < s->n_cands; c++) {
        double probe[MAX_ELEMS];
        memcpy(probe, &s->cands[(size_t)c * (size_t)s->n_elems], sizeof(double) * (size_t)s->n_elems);
        for (int x = 0; free_elem && x < u->n_dom; x++) {
          probe[j] = u->dom[x];
          free_elem = is_cand(s, probe);
        }
      }
      s->care[j] = !free_elem;
    }
  }
}

/* A constant holding candidate c's values of input u, shaped like it. */
static int rep_const(kn_rw *b, const spec *s, const undecided *u, const double *c) {
  const kn_value *v = &s->g->values[u->value];
  kn_shape shape = v->shape;
  kn_dtype t = v->dtype;
  int k = kn_rw_const(b, t, &shape, NULL);
  for (int e = 0; e < u->n; e++) {
    if (kn_dtype_is_float(t)) kn_ref_store(t, s->g->values[k].data, e, c[u->first + e]);
    else kn_ref_store_int(t, s->g->values[k].data, e, (int64_t)c[u->first + e]);
  }
  return k;
}

/* A bool scalar: do the inputs hold one of the candidates of class `cls`
 * (-1: of any class)? The checked elements of all inputs, as float64, are
 * compared with a [K, checked] table. Returns -1 when nothing is checked. */
static int member_of(kn_rw *b, const spec *s, int cls) {
  int idx[MAX_ELEMS], n_care = 0;
  for (int j = 0; j < s->n_elems; j++)
    if (s->care[j]) idx[n_care++] = j;
  if (n_care == 0) return -1;
  int parts[MAX_ELEMS] = {0};
  for (int i = 0; i < s->n_inputs; i++) {
    int64_t n = s->in[i].n;
    parts[i] = kn_rw_reshape(b, kn_rw_cast(b, s->in[i].value, KN_DT_F64), &n, 1);
  }
  int flat = parts[0];
  if (s->n_inputs > 1) {
    flat = kn_rw_op(b, KN_OP_CONCAT, parts, s->n_inputs);
    kn_rw_attr_int(b, "axis", 0);
  }
  if (n_care < s->n_elems) {
    int64_t pick[MAX_ELEMS];
    for (int j = 0; j < n_care; j++) pick[j] = idx[j];
    flat = kn_rw_bin(b, KN_OP_GATHER, flat, kn_rw_ints(b, pick, n_care));
  }
  int rows = 0;
  double *table = calloc((size_t)s->n_cands * (size_t)n_care + 1, sizeof(double));
  KN_ASSERT(table, "out of memory");
  for (int c = 0; c < s->n_cands; c++) {
    if (cls >= 0 && s->cls[c] != cls) continue;
    for (int j = 0; j < n_care; j++) table[(size_t)rows * (size_t)n_care + (size_t)j] = s->cands[(size_t)c * (size_t)s->n_elems + (size_t)idx[j]];
    rows++;
  }
  kn_shape ts = {.rank = 2, .dim = {rows, n_care}};
  int tab = kn_rw_const(b, KN_DT_F64, &ts, table);
  free(table);
  int64_t zero = 0, one = 1;
  int eq = kn_rw_bin(b, KN_OP_EQUAL, kn_rw_unsqueeze(b, flat, &zero, 1), tab);
  int all = kn_rw_reduce(b, KN_OP_REDUCE_MIN, kn_rw_cast(b, eq, KN_DT_I32), &one, 1, false);
  int any = kn_rw_reduce(b, KN_OP_REDUCE_MAX, all, &zero, 1, false);
  return kn_rw_cast(b, any, KN_DT_BOOL);
}

/* Nodes reading the undecided inputs, directly or through other such nodes
 * (`in_cone`, per node), among the first n_orig. */
static void mark_cone(const kn_graph *g, const spec *s, int n_orig, bool *in_cone, bool *tainted) {
  for (int i = 0; i < s->n_inputs; i++) tainted[s->in[i].value] = true;
  for (bool grew = true; grew;) {
    grew = false;
    for (int i = 0; i < n_orig; i++) {
      const kn_node *n = &g->nodes[i];
      if (n->dead || in_cone[i]) continue;
      for (int k = 0; k < n->n_in && !in_cone[i]; k++)
        if (n->in[k] >= 0 && tainted[n->in[k]]) in_cone[i] = true;
      if (!in_cone[i]) continue;
      grew = true;
      for (int k = 0; k < n->n_out; k++) tainted[n->out[k]] = true;
    }
  }
}

/* Rewrites the graph for the classified candidates and appends the check. */
static void rewrite(spec *s, kn_rw *b) {
  kn_graph *g = s->g;
  int n_orig = g->n_nodes; /* the check nodes follow */
  int reps[MAX_CLASSES][MAX_ELEMS], match[MAX_CLASSES];
  for (int k = 0; k < s->n_classes; k++) {
    int c = 0;
    while (s->cls[c] != k) c++;
    for (int i = 0; i < s->n_inputs; i++) reps[k][i] = rep_const(b, s, &s->in[i], &s->cands[(size_t)c * (size_t)s->n_elems]);
    match[k] = s->n_classes > 1 ? member_of(b, s, k) : -1;
  }
  int check = member_of(b, s, -1);
  bool *in_cone = calloc((size_t)n_orig + 1, sizeof(bool));
  bool *tainted = calloc((size_t)g->n_values + 1, sizeof(bool));
  KN_ASSERT(in_cone && tainted, "out of memory");
  mark_cone(g, s, n_orig, in_cone, tainted);
  int n_vals = g->n_values;
  int *map = malloc(sizeof(int) * (size_t)(n_vals + 1));
  int *outs = malloc(sizeof(int) * (size_t)(g->n_outputs + 1) * MAX_CLASSES);
  KN_ASSERT(map && outs, "out of memory");
  for (int k = s->n_classes - 1; k >= 0; k--) { /* class 0 keeps the original nodes */
    for (int v = 0; v < n_vals; v++) map[v] = v;
    for (int i = 0; i < s->n_inputs; i++) map[s->in[i].value] = reps[k][i];
    for (int i = 0; i < n_orig; i++) {
      if (!in_cone[i]) continue;
      kn_node n = g->nodes[i];
      int *in = KN_NEW_ARRAY(&g->arena, int, n.n_in + 1), *out = KN_NEW_ARRAY(&g->arena, int, n.n_out + 1);
      for (int j = 0; j < n.n_in; j++) in[j] = n.in[j] >= 0 ? map[n.in[j]] : -1;
      if (k == 0) {
        memcpy(g->nodes[i].in, in, sizeof(int) * (size_t)n.n_in);
        continue;
      }
      for (int j = 0; j < n.n_out; j++)
        map[n.out[j]] = out[j] = kn_pass_new_value(g, g->values[n.out[j]].name, "#spec", KN_DT_INVALID,
                                                    &(kn_shape){0});
      const char *name = kn_arena_printf(&g->arena, "%s#spec%d", n.name, k);
      int c = kn_graph_add_node(g, n.op, name, in, n.n_in, out, n.n_out);
      g->nodes[c].op_type = n.op_type;
      g->nodes[c].domain = n.domain;
      g->nodes[c].n_attr = n.n_attr;
      g->nodes[c].attrs = n.attrs;
    }
    for (int o = 0; o < g->n_outputs - g->n_checks; o++) outs[o * MAX_CLASSES + k] = map[g->outputs[o]];
  }
  /* each output computed in several classes: Where(match_k, out_k, ...) */
  for (int o = 0; s->n_classes > 1 && o < g->n_outputs - g->n_checks; o++) {
    int v = g->outputs[o], p = g->values[v].producer;
    if (p < 0 || p >= n_orig || !in_cone[p]) continue;
    int v0 = kn_pass_new_value(g, g->values[v].name, "#spec0", KN_DT_INVALID, &(kn_shape){0});
    kn_node *pn = &g->nodes[p];
    for (int j = 0; j < pn->n_out; j++)
      if (pn->out[j] == v) pn->out[j] = v0;
    g->values[v0].producer = p;
    g->values[v].producer = -1;
    int sel = v0;
    for (int k = 1; k < s->n_classes; k++) {
      int in[3] = {match[k], outs[o * MAX_CLASSES + k], sel};
      int res = k + 1 < s->n_classes ? kn_pass_new_value(g, g->values[v].name, "#sel", KN_DT_INVALID, &(kn_shape){0}) : v;
      kn_graph_add_node(g, KN_OP_WHERE, kn_arena_printf(&g->arena, "%s#select%d", g->values[v].name, k), in, 3, &res, 1);
      sel = res;
    }
  }
  free(outs);
  free(map);
  free(tainted);
  free(in_cone);
  if (check >= 0) kn_pass_add_check(g, check);
}

static bool is_undecided(const spec *s, int v) {
  for (int i = 0; i < s->n_inputs; i++)
    if (s->in[i].value == v) return true;
  return false;
}

/* Adds the inputs of needed[] to the undecided list (those not in it yet);
 * zero-element inputs become constants at once. Returns false when the pass
 * cannot apply. */
static bool collect(spec *s, const bool *needed, kn_rw *b) {
  kn_graph *g = s->g;
  free(s->cands);
  s->cands = NULL;
  s->n_cands = 0;
  for (int i = 0; i < g->n_inputs; i++) {
    int v = g->inputs[i];
    if (!needed[v] || is_undecided(s, v)) continue;
    int64_t n = kn_value_numel(g, v);
    if (n == 0) {
      kn_shape shape = g->values[v].shape;
      int c = kn_rw_const(b, g->values[v].dtype, &shape, NULL);
      kn_pass_replace_uses(g, v, c);
      continue;
    }
    if (n < 0 || s->n_inputs == MAX_ELEMS || s->n_elems + n > MAX_ELEMS) return false;
    undecided *u = &s->in[s->n_inputs++];
    *u = (undecided){.value = v, .n = (int)n, .first = s->n_elems};
    u->use = use_of_input(g, v, &u->rank, &u->axes_rank, &u->reshape);
    fill_domain(g, u);
    s->n_elems += (int)n;
  }
  return true;
}

int kn_pass_specialize(kn_graph *g, kn_diag *d) {
  if (!g->out_declared) return 0;
  for (int o = 0; o < g->n_outputs - g->n_checks; o++)
    if (g->out_declared[o].rank < 0) return 0;
  bool *needed = calloc((size_t)g->n_values + 1, sizeof(bool));
  KN_ASSERT(needed, "out of memory");
  kn_diag quiet;
  kn_diag_init(&quiet);
  int rc = kn_infer_shapes_needs(g, needed, &quiet);
  kn_diag_free(&quiet);
  bool any = false;
  for (int i = 0; i < g->n_inputs; i++) any |= needed[g->inputs[i]];
  if (rc == 0 || !any) {
    free(needed);
    return 0;
  }
  spec s = {.g = g};
  kn_rw b = {.g = g, .d = d, .node = -1, .name = "spec"};
  bool ok = collect(&s, needed, &b);
  /* a reader of one undecided input may only be reached once another is
   * known (TopK's K, then a ReduceMax of its output): add those and retry */
  for (int round = 0; ok && round < 4; round++) {
    for (int i = 0; i < s.n_inputs; i++) ok &= s.in[i].use != USE_VALUE; /* see below */
    if (!ok) break;
    free(needed); /* collect() may have added values */
    needed = calloc((size_t)g->n_values + 1, sizeof(bool));
    KN_ASSERT(needed, "out of memory");
    if (enumerate(&s, needed) < 0 || s.n_cands > 0) break;
    bool grew = false;
    for (int i = 0; i < g->n_inputs; i++) grew |= needed[g->inputs[i]] && !is_undecided(&s, g->inputs[i]);
    if (!grew) break;
    ok = collect(&s, needed, &b);
  }
  free(needed);
  /* Only values that decide shapes or axes: for those the domain tried
   * holds every value that can give the declared shapes. For arbitrary
   * numbers (Range's bounds, Slice's starts, Dropout's training_mode read
   * before its ratio) it does not, and even a single candidate is a guess
   * that would make valid inputs fail the check. */
  bool shapes_only = true;
  for (int i = 0; i < s.n_inputs; i++) shapes_only &= s.in[i].use != USE_VALUE;
  if (ok && s.n_inputs > 0 && s.n_cands > 0 && shapes_only) {
    classify(&s);
    if (s.n_classes <= MAX_CLASSES) {
      find_care(&s);
      b.name = kn_arena_printf(&g->arena, "check: input '%s' as declared", g->values[s.in[0].value].name);
      rewrite(&s, &b);
    }
  }
  free(s.cands);
  free(s.cls);
  return 0;
}
