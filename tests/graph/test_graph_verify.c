/* test_graph_verify.c — toposort, verifier and printer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/graph/graph_util.h"

static const char *node_order(const kn_graph *g, char *buf, size_t size) {
  buf[0] = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    strncat(buf, g->nodes[i].name, size - strlen(buf) - 1);
    if (i + 1 < g->n_nodes) strncat(buf, " ", size - strlen(buf) - 1);
  }
  return buf;
}

static bool diag_has(const kn_diag *d, const char *needle) {
  for (int i = 0; i < d->count; i++)
    if (strstr(d->lines[i], needle)) return true;
  return false;
}

static void toposort_keeps_sorted_order(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N,4");
  tg_node(&g, KN_OP_RELU, "A", "x", "a");
  tg_node(&g, KN_OP_EXP, "B", "x", "b");
  tg_node(&g, KN_OP_ADD, "C", "a,b", "c");
  tg_output(&g, "c");
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_graph_toposort(&g, &d), 0);
  char buf[256];
  assert_string_equal(node_order(&g, buf, sizeof buf), "A B C");
  assert_int_equal(g.values[tg_value(&g, "c")].producer, 2);
  kn_diag_free(&d);
  kn_graph_free(&g);
}

/* A node appended late lands right before its first consumer; dead nodes go. */
static void toposort_places_appended_nodes(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "4");
  tg_node(&g, KN_OP_RELU, "A", "x", "a");
  int b = kn_graph_add_value(&g, "b");
  (void)b;
  tg_node(&g, KN_OP_EXP, "C", "b", "c");
  tg_node(&g, KN_OP_NEG, "D", "c", "d");
  int dead = tg_node(&g, KN_OP_ABS, "Dead", "x", "unused");
  g.nodes[dead].dead = true;
  tg_node(&g, KN_OP_SIGMOID, "B", "a", "b");
  tg_output(&g, "d");
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_graph_toposort(&g, &d), 0);
  char buf[256];
  assert_string_equal(node_order(&g, buf, sizeof buf), "A B C D");
  assert_int_equal(g.values[tg_value(&g, "unused")].producer, -1);
  for (int i = 0; i < g.n_nodes; i++)
    for (int k = 0; k < g.nodes[i].n_out; k++) assert_int_equal(g.values[g.nodes[i].out[k]].producer, i);
  kn_diag_free(&d);
  kn_graph_free(&g);
}

static void toposort_reports_cycle(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "4");
  kn_graph_add_value(&g, "c");
  tg_node(&g, KN_OP_ADD, "head", "x,c", "a");
  tg_node(&g, KN_OP_RELU, "loop1", "a", "b");
  tg_node(&g, KN_OP_RELU, "loop2", "b", "c");
  tg_node(&g, KN_OP_RELU, "after", "c", "y");
  tg_output(&g, "y");
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_graph_toposort(&g, &d), -1);
  assert_int_equal(d.count, 1);
  assert_non_null(strstr(d.lines[0], "cycle through node"));
  /* The named node is on the cycle, not merely after it. */
  assert_null(strstr(d.lines[0], "'after'"));
  kn_diag_free(&d);
  kn_graph_free(&g);
}

static void toposort_reports_undefined_and_double_definition(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "4");
  kn_graph_add_value(&g, "ghost");
  tg_node(&g, KN_OP_ADD, "uses_ghost", "x,ghost", "a");
  tg_node(&g, KN_OP_RELU, "r1", "a", "y");
  tg_node(&g, KN_OP_RELU, "r2", "a", "y");
  tg_output(&g, "y");
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_graph_toposort(&g, &d), -1);
  assert_true(diag_has(&d, "value 'y' is produced by both node 'r1' and node 'r2'"));
  kn_diag_free(&d);
  g.nodes[2].dead = true;
  kn_diag_init(&d);
  assert_int_equal(kn_graph_toposort(&g, &d), -1);
  assert_true(diag_has(&d, "node 'uses_ghost' (Add) uses value 'ghost', which nothing defines"));
  kn_diag_free(&d);
  kn_graph_free(&g);
}

static void verify_checks_types_and_structure(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N,4");
  tg_const_f(&g, "w", "4", (float[]){1, 2, 3, 4});
  tg_node(&g, KN_OP_MUL, "m", "x,w", "y");
  tg_output(&g, "y");
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_graph_toposort(&g, &d), 0);
  assert_int_equal(kn_graph_verify(&g, &d), -1); /* y has no type yet */
  assert_true(diag_has(&d, "value 'y' has no dtype"));
  kn_diag_free(&d);
  tg_infer_ok(&g);
  kn_diag_init(&d);
  assert_int_equal(kn_graph_verify(&g, &d), 0);
  assert_int_equal(d.count, 0);
  /* Break the producer link: the verifier notices. */
  g.values[tg_value(&g, "y")].producer = -1;
  assert_int_equal(kn_graph_verify(&g, &d), -1);
  assert_true(diag_has(&d, "value 'y': producer is -1"));
  kn_diag_free(&d);
  kn_graph_free(&g);
}

static void verify_rejects_constant_with_batch_coef_on_float(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "2");
  int c = tg_const_f(&g, "c", "2", (float[]){1, 2});
  g.values[c].batch_coef = KN_NEW_ARRAY(&g.arena, int64_t, 2);
  tg_node(&g, KN_OP_ADD, "a", "x,c", "y");
  tg_output(&g, "y");
  tg_infer_ok(&g);
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_graph_verify(&g, &d), -1);
  assert_true(diag_has(&d, "'c' has batch coefficients but is no int64 constant"));
  kn_diag_free(&d);
  kn_graph_free(&g);
}

static void print_golden(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N,3,8,8");
  tg_const_rand(&g, "w", "4,3,3,3", 1, -1, 1);
  tg_const_f(&g, "b", "4", (float[]){0.5f, -1, 2, 0.25f});
  int conv = tg_node(&g, KN_OP_CONV, "conv1", "x,w,b", "y");
  tg_attr_ints(&g, conv, "pads", 4, (int64_t)1, (int64_t)1, (int64_t)1, (int64_t)1);
  tg_attr_ints(&g, conv, "strides", 2, (int64_t)2, (int64_t)2);
  tg_const_f(&g, "mx", "", (float[]){6});
  tg_node(&g, KN_OP_CLIP, "clip", "y,_,mx", "z");
  int sh = tg_node(&g, KN_OP_SHAPE, "shape", "z", "s");
  tg_attr_s(&g, sh, "note", "hi");
  tg_output(&g, "z");
  tg_output(&g, "s");
  tg_infer_ok(&g);
  /* The weights are random: print only the prefix we can predict. */
  char *text = tg_print(&g);
  const char *rest = strstr(text, "\n  %b:");
  assert_non_null(rest);
  assert_true(strncmp(text, "graph(%x:float32[N*1,3,8,8]) {\n  %w:float32[4,3,3,3] = constant [", 65) == 0);
  assert_non_null(strstr(text, ", ... (108 values)]\n"));
  assert_string_equal(rest + 1,
                      "  %b:float32[4] = constant [0.5, -1, 2, 0.25]\n"
                      "  %mx:float32[] = constant [6]\n"
                      "  %y:float32[N*1,4,4,4] = Conv(%x, %w, %b) {pads=[1,1,1,1], strides=[2,2]}  # conv1\n"
                      "  %z:float32[N*1,4,4,4] = Clip(%y, _, %mx)  # clip\n"
                      "  %s:int64[4] = Shape(%z) {note=\"hi\"}  # shape\n"
                      "  return %z, %s\n"
                      "}\n");
  free(text);
  kn_graph_free(&g);
}

static void print_batch_coefficients(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "N*2,6");
  int s = tg_const_i64(&g, "shape", "3", (int64_t[]){0, 3, -1});
  g.values[s].batch_coef = KN_NEW_ARRAY(&g.arena, int64_t, 3);
  g.values[s].batch_coef[0] = 2;
  tg_node(&g, KN_OP_RESHAPE, "r", "x,shape", "y");
  tg_output(&g, "y");
  tg_infer_ok(&g);
  tg_expect_print(&g,
                  "graph(%x:float32[N*2,6]) {\n"
                  "  %shape:int64[3] = constant [N*2, 3, -1]\n"
                  "  %y:float32[N*2,3,2] = Reshape(%x, %shape)  # r\n"
                  "  return %y\n"
                  "}\n");
  kn_graph_free(&g);
}

/* The value and node tables never move: pointers taken before many
 * additions still name the same entries, which read back intact. */
static void tables_do_not_move(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  int x = tg_input(&g, "x", KN_DT_F32, "3,4");
  int n0 = tg_node(&g, KN_OP_RELU, "r0", "x", "y0");
  kn_value *xv = &g.values[x];
  kn_node *first = &g.nodes[n0];
  for (int k = 1; k < 20000; k++) {
    int in = g.nodes[k - 1].out[0];
    int out = kn_graph_add_value(&g, NULL);
    kn_graph_add_node(&g, KN_OP_RELU, NULL, &in, 1, &out, 1);
  }
  assert_ptr_equal(xv, &g.values[x]);
  assert_ptr_equal(first, &g.nodes[n0]);
  assert_int_equal(xv->shape.rank, 2);
  assert_int_equal(xv->shape.dim[1], 4);
  assert_string_equal(first->name, "r0");
  assert_int_equal(g.n_nodes, 20000);
  assert_int_equal(g.nodes[19999].in[0], g.nodes[19998].out[0]);
  kn_graph_free(&g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(toposort_keeps_sorted_order),
      cmocka_unit_test(toposort_places_appended_nodes),
      cmocka_unit_test(toposort_reports_cycle),
      cmocka_unit_test(toposort_reports_undefined_and_double_definition),
      cmocka_unit_test(verify_checks_types_and_structure),
      cmocka_unit_test(verify_rejects_constant_with_batch_coef_on_float),
      cmocka_unit_test(print_golden),
      cmocka_unit_test(print_batch_coefficients),
      cmocka_unit_test(tables_do_not_move),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
