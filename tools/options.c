/* options.c — the option parser of the kiln commands (options.h). */
#include "tools/options.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The option `word` names (`--name` or `--name=value`, or the short name),
 * or NULL; *value is the part after '=', or NULL. */
static const kn_opt *find_opt(const kn_cmd_spec *spec, const char *word, const char **value) {
  for (int i = 0; i < spec->n_opts; i++) {
    const kn_opt *o = &spec->opts[i];
    const char *names[2] = {o->name, o->short_name};
    for (int k = 0; k < 2; k++) {
      size_t n = names[k] ? strlen(names[k]) : 0;
      if (n && !strncmp(word, names[k], n) && (word[n] == 0 || word[n] == '=')) {
        *value = word[n] == '=' ? word + n + 1 : NULL;
        return o;
      }
    }
  }
  return NULL;
}

/* A bound as people write it: whole numbers in full, others with %g. */
static void format_bound(double v, char *buf, size_t cap) {
  if (v >= -1e15 && v <= 1e15 && (double)(long long)v == v) snprintf(buf, cap, "%lld", (long long)v);
  else snprintf(buf, cap, "%g", v);
}

/* What a valid value of o is, in words: its `expect`, else from its range or choices. */
static const char *expected(const kn_opt *o, char *buf, size_t cap) {
  if (o->expect) return o->expect;
  if (o->choices) {
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; o->choices[i] && n < cap; i++)
      n += (size_t)snprintf(buf + n, cap - n, "%s%s", !i ? "" : o->choices[i + 1] ? ", " : " or ",
                            o->choices[i]);
    return buf;
  }
  char lo[32], hi[32];
  format_bound(o->lo, lo, sizeof lo);
  format_bound(o->hi, hi, sizeof hi);
  snprintf(buf, cap, "%s in [%s, %s]", o->whole ? "a whole number" : "a number", lo, hi);
  return buf;
}

static bool parse_num(const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= lo && v <= hi)) return false;
  *out = v;
  return true;
}

/* A decimal integer, or a number in float syntax with no fraction ("1e3"). */
static bool parse_whole(const char *s, double lo, double hi, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (!errno && end != s && !*end) {
    if (!((double)v >= lo && (double)v <= hi)) return false;
    *out = v;
    return true;
  }
  double f;
  if (!parse_num(s, lo, hi, &f) || !(f > -9e18 && f < 9e18) || (double)(int64_t)f != f) return false;
  *out = (int64_t)f;
  return true;
}

static bool is_choice(const char *const *choices, const char *s) {
  for (int i = 0; choices[i]; i++)
    if (!strcmp(choices[i], s)) return true;
  return false;
}

/* Checks `value` and stores it where o says; returns KN_OPTS_GO_ON or 2. */
static int take_value(const kn_cmd_spec *spec, const kn_opt *o, const char *value) {
  double num;
  bool ok = true;
  if (o->str) {
    ok = !o->choices || is_choice(o->choices, value);
    if (ok) *o->str = value;
  } else if (o->whole) {
    ok = parse_whole(value, o->lo, o->hi, o->whole);
  } else if (o->num) {
    ok = parse_num(value, o->lo, o->hi, &num);
    if (ok) *o->num = num;
  } else if (o->list) {
    if (*o->count == o->max)
      return kn_opts_usage_error(spec, "option '%s' is given more than %d times", o->name, o->max);
    o->list[(*o->count)++] = value;
  }
  if (ok) return KN_OPTS_GO_ON;
  char buf[512];
  return kn_opts_bad_value(o->name, value, expected(o, buf, sizeof buf));
}

int kn_opts_parse(const kn_cmd_spec *spec, int argc, char **argv, const char **operand) {
  *operand = NULL;
  for (int i = 1; i < argc; i++) {
    const char *word = argv[i], *value = NULL;
    if (!strcmp(word, "-h") || !strcmp(word, "--help")) {
      kn_opts_help(spec, stdout);
      return 0;
    }
    if (word[0] != '-' || !word[1]) {
      if (*operand) {
        fprintf(stderr, "kiln: error: %s: unexpected argument '%s' (one %s at a time)\n", spec->name, word,
                spec->operand);
        return 2;
      }
      *operand = word;
      continue;
    }
    const kn_opt *o = find_opt(spec, word, &value);
    if (!o) return kn_opts_usage_error(spec, "unknown option '%s'", word);
    if (o->flag) {
      if (value) return kn_opts_usage_error(spec, "option '%s' takes no value: '%s'", o->name, word);
      *o->flag = true;
      continue;
    }
    if (!value) {
      if (i + 1 == argc) return kn_opts_usage_error(spec, "option '%s' needs a value", word);
      value = argv[++i];
    }
    int status = take_value(spec, o, value);
    if (status != KN_OPTS_GO_ON) return status;
  }
  if (!*operand) return kn_opts_usage_error(spec, "no %s given", spec->operand);
  return KN_OPTS_GO_ON;
}

void kn_opts_help(const kn_cmd_spec *spec, FILE *out) {
  fprintf(out, "%s\n", spec->usage);
  for (int i = 0; i < spec->n_opts; i++) {
    const kn_opt *o = &spec->opts[i];
    if (!o->help) continue;
    char left[64];
    snprintf(left, sizeof left, "%s%s%s%s%s", o->short_name ? o->short_name : "", o->short_name ? ", " : "",
             o->name, o->arg && o->arg[0] != '=' ? " " : "", o->arg ? o->arg : "");
    const char *line = o->help;
    for (int k = 0; *line; k++) {
      size_t n = strcspn(line, "\n");
      fprintf(out, k ? "%25s%.*s\n" : "  %-22s %.*s\n", k ? "" : left, (int)n, line);
      line += n + (line[n] == '\n');
    }
  }
  if (spec->footer) fprintf(out, "%s\n", spec->footer);
}

int kn_opts_bad_value(const char *flag, const char *value, const char *expect) {
  fprintf(stderr, "kiln: error: %s: '%s' is not %s\n", flag, value, expect);
  return 2;
}

int kn_opts_usage_error(const kn_cmd_spec *spec, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "kiln: error: %s: ", spec->name);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (see 'kiln %s --help')\n", spec->name);
  va_end(ap);
  return 2;
}
