/* json.h — the small JSON reader the tuning records need: one document
 * parsed into arena-allocated nodes; strings unescaped (\uXXXX below 0x80
 * only, others become '?'), numbers as doubles. Writers escape with
 * kn_json_escape. Bad input gives -1 and a message with the byte offset. */
#ifndef KN_AT_JSON_H
#define KN_AT_JSON_H

#include <stddef.h>

#include "base/base.h"

typedef enum kn_json_kind { KN_JSON_NULL, KN_JSON_BOOL, KN_JSON_NUM, KN_JSON_STR, KN_JSON_ARR, KN_JSON_OBJ } kn_json_kind;

typedef struct kn_json {
  kn_json_kind kind;
  double num;  /* NUM, BOOL (0/1) */
  const char *str; /* STR */
  int n;       /* ARR, OBJ: elements */
  struct kn_json **items;
  const char **keys; /* OBJ */
} kn_json;

/* Parses text (one whole document, whitespace around allowed). Returns the
 * root, or NULL with `err` filled. */
kn_json *kn_json_parse(const char *text, kn_arena *A, char *err, size_t err_cap);
/* Member of an object, NULL if absent or not an object. */
const kn_json *kn_json_get(const kn_json *obj, const char *key);
/* Integer value of a NUM that holds one exactly; false otherwise. */
bool kn_json_int(const kn_json *v, int64_t *out);
/* Appends s as a JSON string literal (quotes included) to buf at *len. */
void kn_json_escape(const char *s, char *buf, size_t cap, size_t *len);

#endif
