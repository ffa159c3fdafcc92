/* test_options.c — the kiln commands' option parser (tools/options.c): both
 * value forms, flags, repeatable options, ranges and choices, the help it
 * prints, and each usage error with its exact one-line diagnostic. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/options.h"

/* The destinations of the test command's options. */
typedef struct dests {
  bool verbose;
  const char *out, *mode, *list[3];
  int n_list;
  int64_t count;
  double rate;
} dests;

static const char *const modes[] = {"fast", "slow", "auto", NULL};

/* Parses argv (NULL-terminated, without the program name) for a command
 * "demo" with an operand "model"; the diagnostic (stderr, or the help on
 * stdout) lands in `text`. Returns kn_opts_parse's answer. */
static int parse(dests *v, const char **operand, char *text, size_t cap, ...) {
  char *argv[32] = {"demo"};
  int argc = 1;
  va_list ap;
  va_start(ap, cap);
  for (const char *a; (a = va_arg(ap, const char *));) argv[argc++] = (char *)a;
  va_end(ap);
  *v = (dests){.count = 7, .rate = 1.5};
  const kn_opt opts[] = {
      {"--output", "-o", "PATH", "where it goes", .str = &v->out},
      {"--mode", NULL, "M", "how\nsecond line", .str = &v->mode, .choices = modes},
      {"--item", NULL, "X", "repeatable", .list = v->list, .count = &v->n_list, .max = 3},
      {"--count", NULL, "N", "a count", .whole = &v->count, .lo = 0, .hi = 100},
      {"--rate", NULL, "R", "a rate", .num = &v->rate, .lo = 0.5, .hi = 2, .expect = "a rate in [0.5, 2]"},
      {"--dump", NULL, "=STAGE", "joined", .str = &v->mode},
      {"--verbose", "-v", NULL, "talk", .flag = &v->verbose},
      {"--hidden", NULL, "H", NULL, .str = &v->out},
  };
  const kn_cmd_spec spec = {"demo", "usage: demo MODEL [options]", "model", opts, (int)(sizeof opts / sizeof *opts),
                            "  footer"};
  fflush(stdout);
  fflush(stderr);
  FILE *tmp = tmpfile();
  assert_non_null(tmp);
  int saved_out = dup(1), saved_err = dup(2);
  dup2(fileno(tmp), 1);
  dup2(fileno(tmp), 2);
  int r = kn_opts_parse(&spec, argc, argv, operand);
  fflush(stdout);
  fflush(stderr);
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(saved_out);
  close(saved_err);
  rewind(tmp);
  size_t n = fread(text, 1, cap - 1, tmp);
  text[n] = 0;
  fclose(tmp);
  return r;
}

#define PARSE(...) parse(&v, &operand, text, sizeof text, __VA_ARGS__, (const char *)NULL)

static void values_in_both_forms(void **state) {
  (void)state;
  dests v;
  const char *operand;
  char text[4096];
  assert_int_equal(PARSE("m.onnx", "-o", "a.so", "--mode=slow", "--count", "12", "--rate=0.75", "-v"),
                   KN_OPTS_GO_ON);
  assert_string_equal(operand, "m.onnx");
  assert_string_equal(v.out, "a.so");
  assert_string_equal(v.mode, "slow");
  assert_int_equal(v.count, 12);
  assert_true(v.rate == 0.75);
  assert_true(v.verbose);
  assert_string_equal(text, "");
  /* defaults stay; the word after an option is its value even with a '-';
   * the last of two values wins; "-" is an operand */
  assert_int_equal(PARSE("--output", "--help", "-o=b.so", "-"), KN_OPTS_GO_ON);
  assert_string_equal(v.out, "b.so");
  assert_string_equal(operand, "-");
  assert_null(v.mode);
  assert_int_equal(v.count, 7);
  assert_false(v.verbose);
  /* whole numbers: decimal, or float syntax without a fraction; an empty '=' value is a value */
  assert_int_equal(PARSE("m", "--count", "1e2", "--output="), KN_OPTS_GO_ON);
  assert_int_equal(v.count, 100);
  assert_string_equal(v.out, "");
}

static void repeatable_keeps_every_value(void **state) {
  (void)state;
  dests v;
  const char *operand;
  char text[4096];
  assert_int_equal(PARSE("--item", "a", "m", "--item=b", "--item", "c"), KN_OPTS_GO_ON);
  assert_int_equal(v.n_list, 3);
  assert_string_equal(v.list[0], "a");
  assert_string_equal(v.list[1], "b");
  assert_string_equal(v.list[2], "c");
  assert_int_equal(PARSE("m", "--item", "a", "--item", "b", "--item", "c", "--item", "d"), 2);
  assert_string_equal(text, "kiln: error: demo: option '--item' is given more than 3 times (see 'kiln demo --help')\n");
}

static void usage_errors(void **state) {
  (void)state;
  dests v;
  const char *operand;
  char text[4096];
  static const struct {
    const char *args[4], *message;
  } cases[] = {
      {{"m", "--bogus"}, "kiln: error: demo: unknown option '--bogus' (see 'kiln demo --help')\n"},
      {{"m", "--count"}, "kiln: error: demo: option '--count' needs a value (see 'kiln demo --help')\n"},
      {{"m", "-o"}, "kiln: error: demo: option '-o' needs a value (see 'kiln demo --help')\n"},
      {{"m", "--verbose=1"},
       "kiln: error: demo: option '--verbose' takes no value: '--verbose=1' (see 'kiln demo --help')\n"},
      {{"m", "--count", "101"}, "kiln: error: --count: '101' is not a whole number in [0, 100]\n"},
      {{"m", "--count=2.5"}, "kiln: error: --count: '2.5' is not a whole number in [0, 100]\n"},
      {{"m", "--count", "x"}, "kiln: error: --count: 'x' is not a whole number in [0, 100]\n"},
      {{"m", "--rate", "nan"}, "kiln: error: --rate: 'nan' is not a rate in [0.5, 2]\n"},
      {{"m", "--mode", "quick"}, "kiln: error: --mode: 'quick' is not fast, slow or auto\n"},
      {{"m", "n"}, "kiln: error: demo: unexpected argument 'n' (one model at a time)\n"},
      {{"-v"}, "kiln: error: demo: no model given (see 'kiln demo --help')\n"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const char *const *a = cases[i].args;
    assert_int_equal(PARSE(a[0], a[1], a[2], a[3]), 2);
    assert_string_equal(text, cases[i].message);
  }
  /* an error stops at the first culprit in argv order */
  assert_int_equal(PARSE("m", "--count", "x", "--bogus"), 2);
  assert_string_equal(text, "kiln: error: --count: 'x' is not a whole number in [0, 100]\n");
}

static void help_lists_the_options(void **state) {
  (void)state;
  dests v;
  const char *operand;
  char text[4096];
  assert_int_equal(PARSE("--bogus-later", "-h"), 2); /* argv order: the unknown option comes first */
  assert_int_equal(PARSE("m", "--help", "--bogus"), 0);
  assert_string_equal(text, "usage: demo MODEL [options]\n"
                            "  -o, --output PATH      where it goes\n"
                            "  --mode M               how\n"
                            "                         second line\n"
                            "  --item X               repeatable\n"
                            "  --count N              a count\n"
                            "  --rate R               a rate\n"
                            "  --dump=STAGE           joined\n"
                            "  -v, --verbose          talk\n"
                            "  footer\n");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(values_in_both_forms),
      cmocka_unit_test(repeatable_keeps_every_value),
      cmocka_unit_test(usage_errors),
      cmocka_unit_test(help_lists_the_options),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
