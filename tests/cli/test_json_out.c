/* test_json_out.c — the kiln commands' JSON writer (tools/json_out.c): the
 * exact text of a document with nested containers, flat arrays and every
 * kind of value, and string escaping: quotes, backslashes, each control
 * character, valid UTF-8 kept, invalid bytes replaced by U+FFFD. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/json_out.h"

/* What kn_jw_write_string writes for s. */
static char *literal(const char *s) {
  char *buf = NULL;
  size_t size = 0;
  FILE *fp = open_memstream(&buf, &size);
  assert_non_null(fp);
  kn_jw_write_string(fp, s);
  fclose(fp);
  return buf;
}

static void check_literal(const char *s, const char *want) {
  char *got = literal(s);
  assert_string_equal(got, want);
  free(got);
}

static void test_escapes(void **state) {
  (void)state;
  check_literal("plain", "\"plain\"");
  check_literal(NULL, "\"\"");
  check_literal("a\"b\\c", "\"a\\\"b\\\\c\"");
  check_literal("\x01\t\n\x1f", "\"\\u0001\\u0009\\u000a\\u001f\"");
  check_literal("\x7f/", "\"\x7f/\""); /* DEL and '/' need no escape */
  check_literal("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\""); /* é € U+1F600 */
  /* a lone continuation byte, a cut sequence, an overlong '/', a surrogate, past U+10FFFF, 0xff */
  check_literal("a\x80z", "\"a\\ufffdz\"");
  check_literal("\xe2\x82", "\"\\ufffd\\ufffd\"");
  check_literal("\xc0\xaf", "\"\\ufffd\\ufffd\"");
  check_literal("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");
  check_literal("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
  check_literal("\xff", "\"\\ufffd\"");
}

static void test_document(void **state) {
  (void)state;
  char *buf = NULL;
  size_t size = 0;
  FILE *fp = open_memstream(&buf, &size);
  assert_non_null(fp);
  kn_jw j;
  kn_jw_init(&j, fp);
  kn_jw_object(&j, NULL);
  kn_jw_str(&j, "name", "x\"y");
  kn_jw_int(&j, "n", -3);
  kn_jw_num(&j, "ms", 0.25);
  kn_jw_num(&j, "inf", INFINITY);
  kn_jw_num(&j, "nan", NAN);
  kn_jw_bool(&j, "ok", true);
  kn_jw_str(&j, "none", NULL);
  kn_jw_array(&j, "shape", true);
  kn_jw_int(&j, NULL, 1);
  kn_jw_int(&j, NULL, 3);
  kn_jw_end(&j);
  kn_jw_array(&j, "empty", false);
  kn_jw_end(&j);
  kn_jw_array(&j, "rows", false);
  kn_jw_object(&j, NULL);
  kn_jw_array(&j, "dims", true);
  kn_jw_end(&j);
  kn_jw_end(&j);
  kn_jw_end(&j);
  kn_jw_end(&j);
  fclose(fp);
  assert_string_equal(buf, "{\n"
                           "  \"name\": \"x\\\"y\",\n"
                           "  \"n\": -3,\n"
                           "  \"ms\": 0.25,\n"
                           "  \"inf\": null,\n"
                           "  \"nan\": null,\n"
                           "  \"ok\": true,\n"
                           "  \"none\": null,\n"
                           "  \"shape\": [1, 3],\n"
                           "  \"empty\": [],\n"
                           "  \"rows\": [\n"
                           "    {\n"
                           "      \"dims\": []\n"
                           "    }\n"
                           "  ]\n"
                           "}\n");
  free(buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_escapes),
      cmocka_unit_test(test_document),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
