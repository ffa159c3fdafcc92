/* onnx_dims.c — symbolic dims fixed by name at import (`--dim NAME=VALUE`,
 * see onnx_load.h): the parsing of the option's values, and the check that
 * each names a symbolic dim of the model's graph inputs.
 *
 * Rule: a pinned dim_param reads as if the model declared that static value,
 * on graph inputs and on the declared shapes of graph outputs alike; so a
 * pinned batch symbol is no batch symbol at all. */
#include <errno.h>
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
    kn_fe_dim dim;
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

/* The named symbolic dims of the graph inputs (initializers excluded), each
 * once, in order of appearance, into names[0..return). */
static int input_symbols(const kn_fe_ctx *cx, const Onnx__GraphProto *gp, const char **names, int cap) {
  int n = 0;
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    if (kn_fe_names_get(&cx->names, vi->name ? vi->name : "") >= 0) continue;
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type ||
        !tp->tensor_type->shape)
      continue;
    const Onnx__TensorShapeProto *sp = tp->tensor_type->shape;
    for (size_t k = 0; k < sp->n_dim && n < cap; k++) {
      const char *p = sp->dim[k]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
                          ? sp->dim[k]->dim_param
                          : NULL;
      if (!p || !*p) continue;
      int j = 0;
      while (j < n && strcmp(names[j], p)) j++;
      if (j == n) names[n++] = p;
    }
  }
  return n;
}

void kn_fe_dims_check(kn_fe_ctx *cx, const Onnx__GraphProto *gp) {
  if (cx->n_dims == 0) return;
  enum { MAX_LISTED = 64 };
  const char *names[MAX_LISTED];
  int n = input_symbols(cx, gp, names, MAX_LISTED);
  for (int i = 0; i < cx->n_dims; i++) {
    int j = 0;
    while (j < n && strcmp(names[j], cx->dims[i].name)) j++;
    if (j < n) continue;
    char list[1024] = "";
    size_t len = 0;
    for (int k = 0; k < n && len < sizeof list; k++)
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", k ? ", " : "", names[k]);
    if (n) kn_fe_error(cx, "--dim '%s': the model has no symbolic dim '%s'; its symbolic dims: %s", cx->dims[i].name,
                       cx->dims[i].name, list);
    else
      kn_fe_error(cx, "--dim '%s': the model has no symbolic dim '%s'; its inputs have none", cx->dims[i].name,
                  cx->dims[i].name);
  }
}
