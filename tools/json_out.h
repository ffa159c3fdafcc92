/* json_out.h — the one JSON writer of the kiln commands (`kiln run --json`,
 * `kiln inspect --json`, the --profile trace): a document streamed to a
 * FILE, members and elements in the order they are written.
 *
 * Strings are escaped as RFC 8259 requires: '"', '\\' and every control
 * character below 0x20; bytes that are not valid UTF-8 (a tensor name is
 * whatever the ONNX file holds) become U+FFFD, so the document always
 * parses. Numbers that are not finite are written as null. Only libc:
 * kiln-run-aarch64 is built from this file too. */
#ifndef KN_JSON_OUT_H
#define KN_JSON_OUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define KN_JW_DEPTH 16

typedef struct kn_jw {
  FILE *fp;
  int depth;                          /* open containers */
  int flat_from;                      /* containers from this depth on are written on one line */
  bool has_items[KN_JW_DEPTH];  /* whether the container at each depth has a member yet */
  char closers[KN_JW_DEPTH];    /* '}' or ']' per open container */
} kn_jw;

void kn_jw_init(kn_jw *j, FILE *fp);

/* Each call writes one value: a member named `key` inside an object, an
 * element (key NULL) inside an array or at the top. */
void kn_jw_object(kn_jw *j, const char *key);
/* An array; flat: on one line (a shape). */
void kn_jw_array(kn_jw *j, const char *key, bool flat);
/* Closes the innermost object or array; after the top one, a newline. */
void kn_jw_end(kn_jw *j);
void kn_jw_str(kn_jw *j, const char *key, const char *s); /* NULL: null */
void kn_jw_int(kn_jw *j, const char *key, int64_t v);
void kn_jw_num(kn_jw *j, const char *key, double v);
void kn_jw_bool(kn_jw *j, const char *key, bool v);
void kn_jw_null(kn_jw *j, const char *key);

/* s as a JSON string literal, quotes included (NULL: ""). */
void kn_jw_write_string(FILE *fp, const char *s);

#endif
