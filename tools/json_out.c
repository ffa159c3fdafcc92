/* json_out.c — the JSON writer of the kiln commands (json_out.h). */
#include "tools/json_out.h"

#include <math.h>

#include "base/base.h"

/* The length of the valid UTF-8 sequence at s, or 0 (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF). */
static int utf8_length(const unsigned char *s) {
  unsigned char c = s[0];
  int n;
  unsigned char lo = 0x80, hi = 0xbf; /* the range of the second byte */
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) n = 3;
  else if (c >= 0xf0 && c <= 0xf4) n = 4;
  else return 0;
  if (c == 0xe0) lo = 0xa0;
  if (c == 0xed) hi = 0x9f;
  if (c == 0xf0) lo = 0x90;
  if (c == 0xf4) hi = 0x8f;
  if (s[1] < lo || s[1] > hi) return 0;
  for (int i = 2; i < n; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  return n;
}

void kn_jw_write_string(FILE *fp, const char *s) {
  fputc('"', fp);
  const unsigned char *c = (const unsigned char *)(s ? s : "");
  while (*c) {
    if (*c == '"' || *c == '\\') {
      fprintf(fp, "\\%c", *c++);
    } else if (*c < 0x20) {
      fprintf(fp, "\\u%04x", *c++);
    } else if (*c < 0x80) {
      fputc(*c++, fp);
    } else {
      int n = utf8_length(c);
      if (n) fwrite(c, 1, (size_t)n, fp);
      else fputs("\\ufffd", fp);
      c += n ? n : 1;
    }
  }
  fputc('"', fp);
}

void kn_jw_init(kn_jw *j, FILE *fp) { *j = (kn_jw){.fp = fp, .flat_from = KN_JW_DEPTH}; }

/* The separator, indentation and key before a value. */
static void begin_value(kn_jw *j, const char *key) {
  if (j->depth > 0) {
    bool flat = j->depth > j->flat_from;
    if (j->has_items[j->depth - 1]) fputs(flat ? ", " : ",", j->fp);
    j->has_items[j->depth - 1] = true;
    if (!flat) fprintf(j->fp, "\n%*s", 2 * j->depth, "");
  }
  if (key) {
    kn_jw_write_string(j->fp, key);
    fputs(": ", j->fp);
  }
}

static void open_container(kn_jw *j, const char *key, char bracket, bool flat) {
  begin_value(j, key);
  KN_ASSERT(j->depth + 1 < KN_JW_DEPTH, "JSON nested deeper than KN_JW_DEPTH");
  fputc(bracket, j->fp);
  if (flat && j->flat_from > j->depth) j->flat_from = j->depth;
  j->closers[j->depth] = bracket == '{' ? '}' : ']';
  j->has_items[j->depth++] = false;
}

void kn_jw_object(kn_jw *j, const char *key) { open_container(j, key, '{', false); }

void kn_jw_array(kn_jw *j, const char *key, bool flat) { open_container(j, key, '[', flat); }

void kn_jw_end(kn_jw *j) {
  KN_ASSERT(j->depth > 0, "kn_jw_end without an open container");
  j->depth--;
  bool flat = j->depth >= j->flat_from;
  if (j->has_items[j->depth] && !flat) fprintf(j->fp, "\n%*s", 2 * j->depth, "");
  fputc(j->closers[j->depth], j->fp);
  if (j->flat_from == j->depth) j->flat_from = KN_JW_DEPTH;
  if (j->depth == 0) fputc('\n', j->fp);
}

void kn_jw_str(kn_jw *j, const char *key, const char *s) {
  if (!s) {
    kn_jw_null(j, key);
    return;
  }
  begin_value(j, key);
  kn_jw_write_string(j->fp, s);
}

void kn_jw_int(kn_jw *j, const char *key, int64_t v) {
  begin_value(j, key);
  fprintf(j->fp, "%lld", (long long)v);
}

void kn_jw_num(kn_jw *j, const char *key, double v) {
  if (!isfinite(v)) {
    kn_jw_null(j, key);
    return;
  }
  begin_value(j, key);
  fprintf(j->fp, "%.9g", v);
}

void kn_jw_bool(kn_jw *j, const char *key, bool v) {
  begin_value(j, key);
  fputs(v ? "true" : "false", j->fp);
}

void kn_jw_null(kn_jw *j, const char *key) {
  begin_value(j, key);
  fputs("null", j->fp);
}
