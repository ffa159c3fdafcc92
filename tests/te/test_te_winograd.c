/* test_te_winograd.c — the compute definitions of kiln.WinogradInput and
 * kiln.WinogradOutput (ir/te/winograd_te.c, which compute the transforms by
 * index arithmetic for F(2x2, 3x3) and by the rows' taps for F(4x4, 3x3))
 * against their references (which multiply by Bᵀ and Aᵀ), on random inputs:
 * pads, ragged last tiles, a symbolic batch, both tile sizes; plus
 * attributes shape inference must refuse. */
#include <stdlib.h>
#include <string.h>

#include "ir/shape/shape_infer.h"
#include "ir/passes/winograd.h"
#include "tests/te/te_harness.h"

static void test_input_transform(void **state) {
  (void)state;
  static const struct {
    int64_t h, w, c, pads[4];
  } cases[] = {
      {6, 6, 8, {1, 1, 1, 1}},  /* 6x6 output, 3x3 tiles */
      {7, 5, 3, {1, 1, 1, 1}},  /* odd output: ragged tiles read past the input */
      {9, 6, 4, {0, 0, 0, 0}},  /* no pads, 7x4 output */
      {4, 7, 16, {2, 0, 1, 2}}, /* unequal pads */
      {1, 1, 2, {1, 1, 1, 1}},  /* one pixel, the rest pads */
      {14, 14, 3, {1, 1, 1, 1}}, /* 14x14: 4x4 tiles with a ragged last row and column */
  };
  for (int m = 2; m <= 4; m += 2)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
      for (int batched = 0; batched < 2; batched++) {
        th t;
        th_init(&t, 13);
        int x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(1, cases[i].h, cases[i].w, cases[i].c), batched ? 1u : 0u,
                         -2, 2);
        th_node(&t, KN_OP_WINOGRAD_INPUT, "wi", TH_INS(x), 1, 1);
        th_attr_ints(&t, "pads", 4, cases[i].pads);
        if (m != 2) th_attr_int(&t, "tile", m);
        th_check(&t, batched ? 2 : 1);
        th_free(&t);
      }
}

static void test_output_transform(void **state) {
  (void)state;
  static const int64_t hw[][2] = {{6, 6}, {7, 5}, {1, 1}, {2, 9}, {14, 14}};
  for (int tile = 2; tile <= 4; tile += 2)
    for (size_t i = 0; i < sizeof hw / sizeof hw[0]; i++)
      for (int batched = 0; batched < 2; batched++) {
        th t;
        th_init(&t, 13);
        int64_t tiles = kn_winograd_tiles(hw[i][0], tile) * kn_winograd_tiles(hw[i][1], tile);
        int a = tile + 2;
        int m = th_input(&t, "m", KN_DT_F32, 4, TH_DIMS(1, a * a, tiles, 5), batched ? 1u : 0u, -2, 2);
        th_node(&t, KN_OP_WINOGRAD_OUTPUT, "wo", TH_INS(m), 1, 1);
        th_attr_ints(&t, "output_hw", 2, hw[i]);
        if (tile != 2) th_attr_int(&t, "tile", tile);
        th_check(&t, batched ? 2 : 1);
        th_free(&t);
      }
}

static void test_bad_attributes(void **state) {
  (void)state;
  th t;
  th_init(&t, 13); /* a pad the tiles cannot have */
  int x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(1, 4, 4, 2), 0, -1, 1);
  th_node(&t, KN_OP_WINOGRAD_INPUT, "wi", TH_INS(x), 1, 1);
  th_attr_ints(&t, "pads", 4, TH_DIMS(3, 0, 0, 0));
  th_expect_infer_error(&t, "node 'wi' (kiln.WinogradInput): needs a 4-D input");
  th_free(&t);

  th_init(&t, 13); /* an input too small for one output */
  x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(1, 1, 4, 2), 0, -1, 1);
  th_node(&t, KN_OP_WINOGRAD_INPUT, "wi", TH_INS(x), 1, 1);
  th_attr_ints(&t, "pads", 4, TH_DIMS(0, 0, 0, 0));
  th_expect_infer_error(&t, "(kiln.WinogradInput): needs a 4-D input");
  th_free(&t);

  th_init(&t, 13); /* tiles that do not match output_hw */
  int m = th_input(&t, "m", KN_DT_F32, 4, TH_DIMS(1, 16, 4, 3), 0, -1, 1);
  th_node(&t, KN_OP_WINOGRAD_OUTPUT, "wo", TH_INS(m), 1, 1);
  th_attr_ints(&t, "output_hw", 2, TH_DIMS(5, 4));
  th_expect_infer_error(&t, "node 'wo' (kiln.WinogradOutput): needs a [N, a², tiles, K] input matching output_hw");
  th_free(&t);

  th_init(&t, 13); /* F(4x4) tiles with F(2x2)'s 16 elements */
  m = th_input(&t, "m", KN_DT_F32, 4, TH_DIMS(1, 16, 4, 3), 0, -1, 1);
  th_node(&t, KN_OP_WINOGRAD_OUTPUT, "wo", TH_INS(m), 1, 1);
  th_attr_ints(&t, "output_hw", 2, TH_DIMS(8, 8));
  th_attr_int(&t, "tile", 4);
  th_expect_infer_error(&t, "(kiln.WinogradOutput): needs a [N, a², tiles, K]");
  th_free(&t);

  th_init(&t, 13); /* a tile size without matrices */
  x = th_input(&t, "x", KN_DT_F32, 4, TH_DIMS(1, 8, 8, 2), 0, -1, 1);
  th_node(&t, KN_OP_WINOGRAD_INPUT, "wi", TH_INS(x), 1, 1);
  th_attr_ints(&t, "pads", 4, TH_DIMS(1, 1, 1, 1));
  th_attr_int(&t, "tile", 3);
  th_expect_infer_error(&t, "a tile of 2 or 4");
  th_free(&t);

  th_init(&t, 13); /* no output_hw */
  m = th_input(&t, "m", KN_DT_F32, 4, TH_DIMS(1, 16, 4, 3), 0, -1, 1);
  th_node(&t, KN_OP_WINOGRAD_OUTPUT, "wo", TH_INS(m), 1, 1);
  th_expect_infer_error(&t, "(kiln.WinogradOutput): needs a [N, a², tiles, K]");
  th_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_input_transform),
      cmocka_unit_test(test_output_transform),
      cmocka_unit_test(test_bad_attributes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
