/* options.h — the one option parser of the kiln commands.
 *
 * A command declares its options once, in a table of kn_opt: the names, the
 * value's name and the help text (what --help prints), and where the value
 * goes, which also says how it is checked. kn_opts_parse then reads argv in
 * order: `--opt value` and `--opt=value` for an option with a value (the word
 * after it is the value even if it starts with '-'), `--flag` for one
 * without, `-h` / `--help` anywhere, and at most one operand (the model or
 * the artifact; "-" alone is an operand). An option given twice keeps its
 * last value, except a repeatable one (a `list`), which keeps them all.
 *
 * Usage errors are one line on stderr, `kiln: error: ...`, naming the flag:
 * an unknown option, a missing value, a value for a flag, a value that is
 * not a number in range or not one of the choices, a second operand, no
 * operand. Only libc: kiln-run-aarch64 is built from this file too. */
#ifndef KN_OPTIONS_H
#define KN_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* One option. Exactly one of flag, str, whole, num and list is set. */
typedef struct kn_opt {
  const char *name;       /* "--max-batch" */
  const char *short_name; /* "-o", or NULL */
  const char *arg;        /* the value in the help ("B"; "=STAGE" is shown joined to the name); NULL: a flag */
  const char *help;       /* lines separated by '\n'; NULL: not listed (a test hook) */
  bool *flag;             /* a flag: set to true */
  const char **str;       /* the value as given, one of `choices` if they are set */
  int64_t *whole;         /* a whole number in [lo, hi] (decimal, or a float with no fraction) */
  double *num;            /* a number in [lo, hi] */
  const char **list;      /* repeatable: every value in order, at most max of them, in list[0..*count) */
  int *count;
  int max;
  double lo, hi;
  const char *const *choices; /* str: the values allowed, NULL-terminated */
  const char *expect;         /* what a valid value is, for the diagnostic; default from the range / choices */
} kn_opt;

/* A command: its name ("compile": diagnostics say `kiln: error: compile: ...`),
 * the first lines of its help, its one operand ("model"), the options, and
 * lines printed after them (or NULL). */
typedef struct kn_cmd_spec {
  const char *name;
  const char *usage;
  const char *operand;
  const kn_opt *opts;
  int n_opts;
  const char *footer;
} kn_cmd_spec;

/* kn_opts_parse's answer when the command goes on. */
#define KN_OPTS_GO_ON (-1)

/* Parses argv[1..argc-1] into the options' destinations and *operand (the
 * one operand, which must be given). Destinations keep their defaults for
 * options not given. Returns KN_OPTS_GO_ON, or the exit status to return now: 0 after -h /
 * --help (the help printed to stdout), 2 after a usage error (one line
 * printed to stderr). */
int kn_opts_parse(const kn_cmd_spec *spec, int argc, char **argv, const char **operand);

/* Prints the command's help: usage lines, one entry per listed option, footer. */
void kn_opts_help(const kn_cmd_spec *spec, FILE *out);

/* Prints `kiln: error: FLAG: 'VALUE' is not EXPECT` (a value the command
 * checks itself) and returns 2. */
int kn_opts_bad_value(const char *flag, const char *value, const char *expect);

/* Prints `kiln: error: NAME: <message> (see 'kiln NAME --help')` and returns 2. */
int kn_opts_usage_error(const kn_cmd_spec *spec, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
