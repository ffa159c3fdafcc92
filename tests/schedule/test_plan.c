/* test_plan.c — the workspace placement (tools/plan_build.c kn_plan_place):
 * buffers live at the same time never overlap, and every buffer is centred
 * on an anchor, so that no buffer's lower half (written by the first of two
 * threads) shares more than one cache line with another's upper half. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tools/plan_build.h"

static int64_t overlap(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
  int64_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
  return hi > lo ? hi - lo : 0;
}

static void check_placement(const kn_plan_buffer *b, int n, int64_t total) {
  assert_int_equal(total % 64, 0);
  for (int i = 0; i < n; i++) {
    assert_int_equal(b[i].offset % 64, 0);
    assert_true(b[i].offset >= 0 && b[i].offset + b[i].bytes <= total);
    for (int j = 0; j < n; j++) {
      if (i == j) continue;
      bool live = b[i].first <= b[j].last && b[j].first <= b[i].last;
      if (live) assert_int_equal(overlap(b[i].offset, b[i].offset + b[i].bytes, b[j].offset, b[j].offset + b[j].bytes), 0);
      int64_t lower_end = b[i].offset + b[i].bytes / 2, upper_start = b[j].offset + b[j].bytes / 2;
      assert_true(overlap(b[i].offset, lower_end, upper_start, b[j].offset + b[j].bytes) <= 64);
    }
  }
}

/* Random sizes (not multiples of 64) and lifetimes over 60 steps. */
static void test_place_random(void **state) {
  (void)state;
  srand(7);
  enum { N = 300 };
  kn_plan_buffer b[N];
  int64_t sum = 0;
  for (int i = 0; i < N; i++) {
    int first = rand() % 60;
    b[i] = (kn_plan_buffer){.bytes = 1 + rand() % 300000, .first = first, .last = first + rand() % 8};
    sum += b[i].bytes;
  }
  int64_t total = kn_plan_place(b, N);
  check_placement(b, N, total);
  assert_true(total < sum);
}

/* A chain (each buffer read by the next step only) of shrinking buffers, as
 * in a CNN, takes two anchors, one as wide as each of the two largest. */
static void test_place_chain(void **state) {
  (void)state;
  enum { N = 12 };
  kn_plan_buffer b[N];
  for (int i = 0; i < N; i++) b[i] = (kn_plan_buffer){.bytes = 12000 - 1000 * i, .first = i, .last = i + 1};
  int64_t total = kn_plan_place(b, N);
  check_placement(b, N, total);
  assert_int_equal(total, (2 * 6016 + 34 * 64) + (2 * 5504 + 34 * 64)); /* halves rounded up to 64 */
  assert_int_equal(kn_plan_place(b, 0), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_place_random),
      cmocka_unit_test(test_place_chain),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
