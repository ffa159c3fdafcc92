/* onnx_dims.c — symbolic dims fixed by name at import (`--dim NAME=VALUE`,
 * see onnx_load.h): the parsing of the option's values, and the check that
 * each names a symbolic dim of the model's graph inputs.
 *
 * Rule: a pinned dim_param reads as if the model declared that static value,
 * on graph inputs and on the declared shapes of graph outputs alike; so a
 * pinned batch symbol is no batch symbol at all. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/fe_internal.h"
#include "frontend/onnx_load.h"

/* One "NAME=VALUE" into *out; 0, or -1 with a diagnostic naming `arg`. */
static int parse_one(const char *arg, kn_arena *arena, kn_fe_dim *out, kn_diag *d) {
  const char *eq = strchr(arg, '=');
  const char *num = eq ? eq + 1 : "";
  /* digits only (a minus sign is read, to say the value is out of range):
   * strtoll alone would take " 5", "+5" and "5x" */
  const char *digits = *num == '-' ? num + 1 : num;
  bool numeric = *digits && strspn(digits, "0123456789") == strlen(digits);
  if (!eq || eq == arg || !numeric)
    return kn_diag_error(d, "--dim '%s': expected NAME=VALUE with VALUE a whole number (e.g. --dim seq=128)", arg);
  errno = 0;
  long long value = strtoll(num, NULL, 10);
  if (errno == ERANGE || value < 1 || value > KN_MAX_DIM)
    return kn_diag_error(d, "--dim '%s': the value must be from 1 to %lld", arg, (long long)KN_MAX_DIM);
  out->name = kn_arena_printf(arena, "%.*s", (int)(eq - arg), arg);
  out->value = value;
  return 0;
}

int kn_fe_dims_parse(const char *const *args, int n_args, kn_arena *arena, kn_fe_dim *dims, kn_diag *d) {
  int n = 0, rc = 0;
  for (int i = 0; i < n_args; i++) {
    kn_fe_dim dim = {.name = ""}; /* set by parse_one when it returns 0 */
    if (parse_one(args[i], arena, &dim, d) < 0) {
      rc = -1;
      continue;
    }
    int k = 0;
    while (k < n && strcmp(dims[k].name, dim.name)) k++;
    if (k == n) dims[n++] = dim;
    else if (dims[k].value != dim.value)
      rc = kn_diag_error(d, "--dim '%s': %s is given twice, as %lld and as %lld", args[i], dim.name,
                         (long long)dims[k].value, (long long)dim.value);
  }
  return rc < 0 ? -1 : n;
}

const kn_fe_dim *kn_fe_dim_pinned(const kn_fe_ctx *cx, const char *dim_param) {
  for (int i = 0; dim_param && i < cx->n_dims; i++)
    if (!strcmp(cx->dims[i].name, dim_param)) return &cx->dims[i];
  return NULL;
}

/* The declared shape of graph input i, or NULL for an initializer (IR < 4
 * lists them as inputs) or an input without a tensor shape. */
static const Onnx__TensorShapeProto *input_shape(const kn_fe_ctx *cx, const Onnx__GraphProto *gp, size_t i) {
  const Onnx__ValueInfoProto *vi = gp->input[i];
  if (kn_fe_names_get(&cx->names, vi->name ? vi->name : "") >= 0) return NULL;
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) return NULL;
  return tp->tensor_type->shape;
}

/* dim_param of a dim, or NULL when it has none. */
static const char *symbol(const Onnx__TensorShapeProto__Dimension *dim) {
  bool named = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dim->dim_param &&
               *dim->dim_param;
  return named ? dim->dim_param : NULL;
}

/* Whether a graph input declares the symbolic dim `name`. */
static bool input_has_symbol(const kn_fe_ctx *cx, const Onnx__GraphProto *gp, const char *name) {
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__TensorShapeProto *sp = input_shape(cx, gp, i);
    for (size_t k = 0; sp && k < sp->n_dim; k++)
      if (symbol(sp->dim[k]) && !strcmp(symbol(sp->dim[k]), name)) return true;
  }
  return false;
}

/* The graph inputs' symbolic dims, each once, in order of appearance, as
 * "a, b, c" in buf (", ..." past what fits); false when there are none. */
static bool input_symbols(const kn_fe_ctx *cx, const Onnx__GraphProto *gp, char *buf, size_t size) {
  enum { MAX_LISTED = 32 };
  const char *names[MAX_LISTED];
  int n = 0;
  bool more = false;
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__TensorShapeProto *sp = input_shape(cx, gp, i);
    for (size_t k = 0; sp && k < sp->n_dim; k++) {
      const char *p = symbol(sp->dim[k]);
      int j = 0;
      while (p && j < n && strcmp(names[j], p)) j++;
      if (!p || j < n) continue;
      if (n == MAX_LISTED) more = true;
      else names[n++] = p;
    }
  }
  size_t len = 0;
  buf[0] = 0;
  for (int k = 0; k < n && len < size; k++)
    len += (size_t)snprintf(buf + len, size - len, "%s%s", k ? ", " : "", names[k]);
  if (more && len < size) snprintf(buf + len, size - len, ", ...");
  return n > 0;
}

void kn_fe_dims_check(kn_fe_ctx *cx, const Onnx__GraphProto *gp) {
  for (int i = 0; i < cx->n_dims; i++) {
    const char *name = cx->dims[i].name;
    if (input_has_symbol(cx, gp, name)) continue;
    char list[1024];
    if (input_symbols(cx, gp, list, sizeof list))
      kn_fe_error(cx, "--dim '%s': the model has no symbolic dim '%s'; its symbolic dims: %s", name, name, list);
    else
      kn_fe_error(cx, "--dim '%s': the model has no symbolic dim '%s'; its inputs have none", name, name);
  }
}
