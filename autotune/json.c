/* json.c — a recursive-descent JSON parser into arena nodes (see json.h).
 * Depth is bounded (64) so a hostile log line cannot exhaust the stack. */
#include "autotune/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
  const char *p, *start;
  kn_arena *A;
  char *err;
  size_t err_cap;
  bool failed;
} parser;

static kn_json *fail(parser *P, const char *what) {
  if (!P->failed) snprintf(P->err, P->err_cap, "%s at byte %ld", what, (long)(P->p - P->start));
  P->failed = true;
  return NULL;
}

static void skip_ws(parser *P) {
  while (*P->p == ' ' || *P->p == '\t' || *P->p == '\n' || *P->p == '\r') P->p++;
}

static const char *parse_string(parser *P) {
  if (*P->p != '"') return fail(P, "expected a string"), NULL;
  P->p++;
  size_t cap = 16, n = 0;
  const char *q = P->p;
  while (*q && *q != '"') q += *q == '\\' && q[1] ? 2 : 1;
  cap = (size_t)(q - P->p) + 1;
  char *out = kn_arena_alloc(P->A, cap);
  while (*P->p != '"') {
    unsigned char c = (unsigned char)*P->p;
    if (!c) return fail(P, "unterminated string"), NULL;
    if (c < 0x20) return fail(P, "control character in a string"), NULL;
    if (c != '\\') {
      out[n++] = (char)c;
      P->p++;
      continue;
    }
    char e = P->p[1];
    P->p += 2;
    switch (e) {
    case '"': out[n++] = '"'; break;
    case '\\': out[n++] = '\\'; break;
    case '/': out[n++] = '/'; break;
    case 'b': out[n++] = '\b'; break;
    case 'f': out[n++] = '\f'; break;
    case 'n': out[n++] = '\n'; break;
    case 'r': out[n++] = '\r'; break;
    case 't': out[n++] = '\t'; break;
    case 'u': {
      unsigned v = 0;
      for (int i = 0; i < 4; i++) {
        char h = P->p[i];
        int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0) return fail(P, "bad \\u escape"), NULL;
        v = v * 16 + (unsigned)d;
      }
      P->p += 4;
      out[n++] = v > 0 && v < 0x80 ? (char)v : '?';
      break;
    }
    default: return fail(P, "bad escape"), NULL;
    }
  }
  P->p++;
  out[n] = 0;
  return out;
}

static kn_json *node(parser *P, kn_json_kind k) {
  kn_json *j = KN_NEW(P->A, kn_json);
  j->kind = k;
  return j;
}

static kn_json *parse_value(parser *P, int depth);

/* Elements of an array or members of an object, grown by doubling. */
static kn_json *parse_container(parser *P, int depth, bool is_obj) {
  kn_json *j = node(P, is_obj ? KN_JSON_OBJ : KN_JSON_ARR);
  char close = is_obj ? '}' : ']';
  int cap = 0;
  P->p++;
  skip_ws(P);
  if (*P->p == close) {
    P->p++;
    return j;
  }
  for (;;) {
    const char *key = NULL;
    skip_ws(P);
    if (is_obj) {
      if (!(key = parse_string(P))) return NULL;
      skip_ws(P);
      if (*P->p != ':') return fail(P, "expected ':'");
      P->p++;
    }
    kn_json *v = parse_value(P, depth + 1);
    if (!v) return NULL;
    if (j->n == cap) {
      int ncap = cap ? 2 * cap : 8;
      kn_json **items = KN_NEW_ARRAY(P->A, kn_json *, ncap);
      const char **keys = KN_NEW_ARRAY(P->A, const char *, ncap);
      if (cap) {
        memcpy(items, j->items, sizeof(kn_json *) * (size_t)cap);
        memcpy(keys, j->keys, sizeof(char *) * (size_t)cap);
      }
      j->items = items;
      j->keys = keys;
      cap = ncap;
    }
    j->keys[j->n] = key;
    j->items[j->n++] = v;
    skip_ws(P);
    if (*P->p == ',') {
      P->p++;
      continue;
    }
    if (*P->p == close) {
      P->p++;
      return j;
    }
    return fail(P, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

static kn_json *parse_value(parser *P, int depth) {
  if (depth > 64) return fail(P, "nesting too deep");
  skip_ws(P);
  char c = *P->p;
  if (c == '{' || c == '[') return parse_container(P, depth, c == '{');
  if (c == '"') {
    kn_json *j = node(P, KN_JSON_STR);
    return (j->str = parse_string(P)) ? j : NULL;
  }
  if (!strncmp(P->p, "true", 4) || !strncmp(P->p, "false", 5)) {
    kn_json *j = node(P, KN_JSON_BOOL);
    j->num = c == 't';
    P->p += c == 't' ? 4 : 5;
    return j;
  }
  if (!strncmp(P->p, "null", 4)) {
    P->p += 4;
    return node(P, KN_JSON_NULL);
  }
  if (c == '-' || (c >= '0' && c <= '9')) {
    char *end;
    double v = strtod(P->p, &end);
    if (end == P->p || !isfinite(v)) return fail(P, "bad number");
    kn_json *j = node(P, KN_JSON_NUM);
    j->num = v;
    P->p = end;
    return j;
  }
  return fail(P, c ? "unexpected character" : "unexpected end");
}

kn_json *kn_json_parse(const char *text, kn_arena *A, char *err, size_t err_cap) {
  parser P = {.p = text, .start = text, .A = A, .err = err, .err_cap = err_cap};
  kn_json *root = parse_value(&P, 0);
  if (!root) return NULL;
  skip_ws(&P);
  if (*P.p) return fail(&P, "trailing text");
  return root;
}

const kn_json *kn_json_get(const kn_json *obj, const char *key) {
  if (!obj || obj->kind != KN_JSON_OBJ) return NULL;
  for (int i = 0; i < obj->n; i++)
    if (!strcmp(obj->keys[i], key)) return obj->items[i];
  return NULL;
}

bool kn_json_int(const kn_json *v, int64_t *out) {
  if (!v || v->kind != KN_JSON_NUM || v->num != floor(v->num) || fabs(v->num) > 9.0e15) return false;
  *out = (int64_t)v->num;
  return true;
}

void kn_json_escape(const char *s, char *buf, size_t cap, size_t *len) {
  size_t n = *len;
#define PUT(ch)                   \
  do {                            \
    if (n + 1 < cap) buf[n] = (ch); \
    n++;                          \
  } while (0)
  PUT('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      PUT('\\');
      PUT((char)c);
    } else if (c < 0x20) {
      char hex[8];
      snprintf(hex, sizeof hex, "\\u%04x", c);
      for (char *h = hex; *h; h++) PUT(*h);
    } else {
      PUT((char)c);
    }
  }
  PUT('"');
#undef PUT
  if (cap) buf[n < cap ? n : cap - 1] = 0;
  *len = n;
}
