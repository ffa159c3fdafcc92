/* test_cse.c — common subexpression elimination (ir/passes/pass_cse.c) as
 * golden text tests (the printed graph after the pass, then dce) plus a
 * numeric check: the reference interpreter computes the same outputs before
 * and after at batch 1 and at max_batch, on seeded random inputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/graph/graph_util.h"

static void cse_and_dce(kn_graph *g) {
  tg_pass_ok(g, kn_pass_cse, "cse");
  tg_pass_ok(g, kn_pass_dce, "dce");
}

/* Outputs before, cse + dce, outputs after: equal at batch 1 and max_batch. */
static void check_same_numbers(kn_graph *g) {
  tg_infer_ok(g);
  int64_t batches[2] = {1, g->max_batch};
  void **before[2];
  for (int b = 0; b < 2; b++) before[b] = tg_run(g, batches[b], 99u + (unsigned)b);
  cse_and_dce(g);
  for (int b = 0; b < 2; b++) {
    void **after = tg_run(g, batches[b], 99u + (unsigned)b);
    for (int i = 0; i < g->n_outputs; i++) {
      double diff = tg_max_rel_diff(g, i, batches[b], after, before[b]);
      if (!(diff == 0)) fail_msg("output %d differs by %g at batch %lld", i, diff, (long long)batches[b]);
    }
    tg_free_outputs(g, after);
    tg_free_outputs(g, before[b]);
  }
}

static int live_nodes(const kn_graph *g) {
  int n = 0;
  for (int i = 0; i < g->n_nodes; i++) n += !g->nodes[i].dead;
  return n;
}

/* x.view(x.size(0), -1) written twice, as PyTorch exports it: two
 * Shape -> Gather -> Unsqueeze -> Concat chains, each with constants of its
 * own (equal ones), merge into one chain four nodes deep in one pass. */
static void cse_merges_shape_chains(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.max_batch = 3;
  tg_input(&g, "x", KN_DT_F32, "N,3,2");
  for (int k = 0; k < 2; k++) {
    char name[8][16];
    const char *tags[8] = {"zero", "axes", "minus1", "s", "n", "n1", "target", "flat"};
    for (int t = 0; t < 8; t++) snprintf(name[t], sizeof name[t], "%s%d", tags[t], k);
    tg_const_i64(&g, name[0], "", (int64_t[]){0});
    tg_const_i64(&g, name[1], "1", (int64_t[]){0});
    tg_const_i64(&g, name[2], "1", (int64_t[]){-1});
    char ins[64];
    tg_node(&g, KN_OP_SHAPE, k ? "shape1" : "shape0", "x", name[3]);
    snprintf(ins, sizeof ins, "%s,%s", name[3], name[0]);
    tg_node(&g, KN_OP_GATHER, k ? "gather1" : "gather0", ins, name[4]);
    snprintf(ins, sizeof ins, "%s,%s", name[4], name[1]);
    tg_node(&g, KN_OP_UNSQUEEZE, k ? "unsq1" : "unsq0", ins, name[5]);
    snprintf(ins, sizeof ins, "%s,%s", name[5], name[2]);
    int c = tg_node(&g, KN_OP_CONCAT, k ? "concat1" : "concat0", ins, name[6]);
    tg_attr_i(&g, c, "axis", 0);
    snprintf(ins, sizeof ins, "x,%s", name[6]);
    tg_node(&g, KN_OP_RESHAPE, k ? "reshape1" : "reshape0", ins, name[7]);
  }
  tg_node(&g, KN_OP_RELU, "relu", "flat0", "y0");
  tg_node(&g, KN_OP_SIGMOID, "sigmoid", "flat1", "y1");
  tg_output(&g, "y0");
  tg_output(&g, "y1");
  check_same_numbers(&g);
  assert_int_equal(tg_count(&g, KN_OP_SHAPE), 1);
  assert_int_equal(tg_count(&g, KN_OP_CONCAT), 1);
  assert_int_equal(tg_count(&g, KN_OP_RESHAPE), 1);
  tg_expect_print(&g, "graph(%x:float32[N*1,3,2]) {\n"
                      "  %zero0:int64[] = constant [0]\n"
                      "  %axes0:int64[1] = constant [0]\n"
                      "  %minus10:int64[1] = constant [-1]\n"
                      "  %s0:int64[3] = Shape(%x)  # shape0\n"
                      "  %n0:int64[] = Gather(%s0, %zero0)  # gather0\n"
                      "  %n10:int64[1] = Unsqueeze(%n0, %axes0)  # unsq0\n"
                      "  %target0:int64[2] = Concat(%n10, %minus10) {axis=0}  # concat0\n"
                      "  %flat0:float32[N*1,6] = Reshape(%x, %target0)  # reshape0\n"
                      "  %y0:float32[N*1,6] = Relu(%flat0)  # relu\n"
                      "  %y1:float32[N*1,6] = Sigmoid(%flat0)  # sigmoid\n"
                      "  return %y0, %y1\n"
                      "}\n");
  kn_graph_free(&g);
}

/* Merging the first pair makes the next pair equal, and so on: three pairs
 * deep, and a node reading both members of the last pair. */
static void cse_reaches_fixpoint(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.max_batch = 2;
  tg_input(&g, "x", KN_DT_F32, "N,4");
  tg_node(&g, KN_OP_MUL, "mul_a", "x,x", "a1");
  tg_node(&g, KN_OP_MUL, "mul_b", "x,x", "a2");
  tg_node(&g, KN_OP_ADD, "add_a", "a1,x", "b1");
  tg_node(&g, KN_OP_ADD, "add_b", "a2,x", "b2");
  tg_node(&g, KN_OP_TANH, "tanh_a", "b1", "c1");
  tg_node(&g, KN_OP_TANH, "tanh_b", "b2", "c2");
  tg_node(&g, KN_OP_SUB, "sub", "c1,c2", "y");
  tg_output(&g, "y");
  check_same_numbers(&g);
  assert_int_equal(live_nodes(&g), 4);
  tg_expect_print(&g, "graph(%x:float32[N*1,4]) {\n"
                      "  %a1:float32[N*1,4] = Mul(%x, %x)  # mul_a\n"
                      "  %b1:float32[N*1,4] = Add(%a1, %x)  # add_a\n"
                      "  %c1:float32[N*1,4] = Tanh(%b1)  # tanh_a\n"
                      "  %y:float32[N*1,4] = Sub(%c1, %c1)  # sub\n"
                      "  return %y\n"
                      "}\n");
  kn_graph_free(&g);
}

/* Nodes that differ in one attribute stay apart (Softmax axis 1 and -1 are
 * the same axis here, but not the same attribute); attributes in another
 * order are still the same; inputs in another order are not. */
static void cse_compares_attributes(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.max_batch = 2;
  tg_input(&g, "x", KN_DT_F32, "N,5");
  tg_input(&g, "w", KN_DT_F32, "N,5");
  int s = tg_node(&g, KN_OP_SOFTMAX, "sm_pos", "x", "s1");
  tg_attr_i(&g, s, "axis", 1);
  s = tg_node(&g, KN_OP_SOFTMAX, "sm_neg", "x", "s2");
  tg_attr_i(&g, s, "axis", -1);
  s = tg_node(&g, KN_OP_LEAKY_RELU, "leaky_a", "x", "l1");
  tg_attr_f(&g, s, "alpha", 0.1f);
  s = tg_node(&g, KN_OP_LEAKY_RELU, "leaky_b", "x", "l2");
  tg_attr_f(&g, s, "alpha", 0.2f);
  s = tg_node(&g, KN_OP_HARD_SIGMOID, "hsig_a", "x", "k1");
  tg_attr_f(&g, s, "alpha", 0.25f);
  tg_attr_f(&g, s, "beta", 0.125f);
  s = tg_node(&g, KN_OP_HARD_SIGMOID, "hsig_b", "x", "k2");
  tg_attr_f(&g, s, "beta", 0.125f);
  tg_attr_f(&g, s, "alpha", 0.25f);
  tg_node(&g, KN_OP_SUB, "sub_a", "x,w", "d1");
  tg_node(&g, KN_OP_SUB, "sub_b", "w,x", "d2");
  const char *sums[][3] = {
      {"s1,s2", "sum_s", "ys"}, {"l1,l2", "sum_l", "yl"}, {"k1,k2", "sum_k", "yk"}, {"d1,d2", "sum_d", "yd"}};
  for (int i = 0; i < 4; i++) {
    tg_node(&g, KN_OP_ADD, sums[i][1], sums[i][0], sums[i][2]);
    tg_output(&g, sums[i][2]);
  }
  check_same_numbers(&g);
  assert_int_equal(tg_count(&g, KN_OP_SOFTMAX), 2);
  assert_int_equal(tg_count(&g, KN_OP_LEAKY_RELU), 2);
  assert_int_equal(tg_count(&g, KN_OP_HARD_SIGMOID), 1);
  assert_int_equal(tg_count(&g, KN_OP_SUB), 2);
  kn_graph_free(&g);
}

/* Equal constants merge; the same bytes as another dtype or shape do not. */
static void cse_merges_equal_constants(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.max_batch = 2;
  tg_input(&g, "x", KN_DT_I32, "N,2");
  tg_const(&g, "c1", KN_DT_I32, "2", (int32_t[]){3, 4});
  tg_const(&g, "c2", KN_DT_I32, "2", (int32_t[]){3, 4});
  tg_const(&g, "c3", KN_DT_I32, "1,2", (int32_t[]){3, 4});
  tg_const(&g, "c4", KN_DT_I32, "2", (int32_t[]){3, 5});
  tg_node(&g, KN_OP_ADD, "add1", "x,c1", "y1");
  tg_node(&g, KN_OP_ADD, "add2", "x,c2", "y2");
  tg_node(&g, KN_OP_ADD, "add3", "x,c3", "y3");
  tg_node(&g, KN_OP_ADD, "add4", "x,c4", "y4");
  tg_node(&g, KN_OP_MUL, "m12", "y1,y2", "p");
  tg_node(&g, KN_OP_MUL, "m34", "y3,y4", "q");
  tg_output(&g, "p");
  tg_output(&g, "q");
  check_same_numbers(&g);
  assert_int_equal(tg_count(&g, KN_OP_ADD), 3);
  tg_expect_print(&g, "graph(%x:int32[N*1,2]) {\n"
                      "  %c1:int32[2] = constant [3, 4]\n"
                      "  %c3:int32[1,2] = constant [3, 4]\n"
                      "  %c4:int32[2] = constant [3, 5]\n"
                      "  %y1:int32[N*1,2] = Add(%x, %c1)  # add1\n"
                      "  %y3:int32[N*1,2] = Add(%x, %c3)  # add3\n"
                      "  %y4:int32[N*1,2] = Add(%x, %c4)  # add4\n"
                      "  %p:int32[N*1,2] = Mul(%y1, %y1)  # m12\n"
                      "  %q:int32[N*1,2] = Mul(%y3, %y4)  # m34\n"
                      "  return %p, %q\n"
                      "}\n");
  kn_graph_free(&g);
}

/* Ops that draw random numbers never merge (Dropout in training mode; an op
 * Kiln does not know, as RandomUniformLike is, neither), where a Relu pair
 * beside them does. */
static void cse_leaves_random_ops(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.max_batch = 2;
  tg_input(&g, "x", KN_DT_F32, "N,4");
  tg_const(&g, "train", KN_DT_BOOL, "", (uint8_t[]){1});
  tg_const_f(&g, "ratio", "", (float[]){0.5f});
  tg_node(&g, KN_OP_DROPOUT, "drop_a", "x,ratio,train", "d1");
  tg_node(&g, KN_OP_DROPOUT, "drop_b", "x,ratio,train", "d2");
  for (int k = 0; k < 2; k++) {
    int r = tg_node(&g, KN_OP_UNKNOWN, k ? "rand_b" : "rand_a", "x", k ? "r2" : "r1");
    g.nodes[r].op_type = "RandomUniformLike";
  }
  tg_node(&g, KN_OP_RELU, "relu_a", "x", "q1"); /* these merge */
  tg_node(&g, KN_OP_RELU, "relu_b", "x", "q2");
  tg_node(&g, KN_OP_ADD, "sum_q", "q1,q2", "yq");
  tg_output(&g, "yq");
  tg_node(&g, KN_OP_ADD, "sum_d", "d1,d2", "yd");
  tg_node(&g, KN_OP_ADD, "sum_r", "r1,r2", "yr");
  tg_output(&g, "yd");
  tg_output(&g, "yr");
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_pass_cse(&g, &d), 0);
  kn_diag_free(&d);
  assert_int_equal(live_nodes(&g), 8);
  assert_int_equal(tg_count(&g, KN_OP_RELU), 1);
  assert_int_equal(tg_count(&g, KN_OP_DROPOUT), 2);
  assert_int_equal(tg_count(&g, KN_OP_UNKNOWN), 2);
  kn_graph_free(&g);
}

/* A node with a subgraph never merges, and a value it reads (its body may
 * name the value directly) keeps its producer: of three equal Relu nodes,
 * the captured one stays. */
static void cse_leaves_subgraph_captures(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  tg_input(&g, "x", KN_DT_F32, "4");
  tg_const(&g, "cond", KN_DT_BOOL, "", (uint8_t[]){1});
  tg_node(&g, KN_OP_RELU, "relu_a", "x", "a1");
  tg_node(&g, KN_OP_RELU, "relu_b", "x", "a2");
  tg_node(&g, KN_OP_RELU, "relu_c", "x", "a3");
  for (int k = 0; k < 2; k++) {
    int n = tg_node(&g, KN_OP_IF, k ? "if_b" : "if_a", "cond,a2", k ? "i2" : "i1");
    kn_node_add_attr(&g, &g.nodes[n],
                     (kn_attr){.name = "then_branch", .kind = KN_ATTR_GRAPH, .s = "graph", .value = -1});
  }
  tg_node(&g, KN_OP_ADD, "sum_a", "a1,a3", "ya");
  tg_node(&g, KN_OP_ADD, "sum_i", "i1,i2", "yi");
  tg_output(&g, "ya");
  tg_output(&g, "yi");
  kn_diag d;
  kn_diag_init(&d);
  assert_int_equal(kn_pass_cse(&g, &d), 0);
  kn_diag_free(&d);
  assert_int_equal(tg_count(&g, KN_OP_RELU), 2); /* relu_c merged into relu_a; relu_b, captured, stays */
  assert_int_equal(tg_count(&g, KN_OP_IF), 2);
  const kn_node *sum = &g.nodes[g.values[tg_value(&g, "ya")].producer];
  assert_int_equal(sum->in[0], tg_value(&g, "a1"));
  assert_int_equal(sum->in[1], tg_value(&g, "a1"));
  assert_int_equal(g.values[tg_value(&g, "a2")].producer >= 0, 1);
  kn_graph_free(&g);
}

/* Graph outputs keep their names and storage: the duplicate of a node whose
 * output is not a graph output makes the kept node write the duplicate's
 * graph output; two graph outputs with the same contents become a node and
 * an Identity copy of it. */
static void cse_keeps_graph_outputs(void **state) {
  (void)state;
  kn_graph g;
  kn_graph_init(&g);
  g.max_batch = 2;
  tg_input(&g, "x", KN_DT_F32, "N,4");
  tg_node(&g, KN_OP_RELU, "relu_a", "x", "y1");
  tg_node(&g, KN_OP_RELU, "relu_b", "x", "y2");
  tg_node(&g, KN_OP_SIGMOID, "sig_a", "x", "s");
  tg_node(&g, KN_OP_NEG, "neg", "s", "w");
  tg_node(&g, KN_OP_SIGMOID, "sig_b", "x", "z");
  tg_node(&g, KN_OP_EXP, "exp", "z", "e");
  tg_output(&g, "y1");
  tg_output(&g, "y2");
  tg_output(&g, "w");
  tg_output(&g, "z");
  tg_output(&g, "e");
  check_same_numbers(&g);
  assert_int_equal(tg_count(&g, KN_OP_SIGMOID), 1);
  assert_int_equal(tg_count(&g, KN_OP_RELU), 1);
  tg_expect_print(&g, "graph(%x:float32[N*1,4]) {\n"
                      "  %y1:float32[N*1,4] = Relu(%x)  # relu_a\n"
                      "  %y2:float32[N*1,4] = Identity(%y1)  # relu_b\n"
                      "  %z:float32[N*1,4] = Sigmoid(%x)  # sig_a\n"
                      "  %w:float32[N*1,4] = Neg(%z)  # neg\n"
                      "  %e:float32[N*1,4] = Exp(%z)  # exp\n"
                      "  return %y1, %y2, %w, %z, %e\n"
                      "}\n");
  kn_graph_free(&g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(cse_merges_shape_chains), cmocka_unit_test(cse_reaches_fixpoint),
      cmocka_unit_test(cse_compares_attributes), cmocka_unit_test(cse_merges_equal_constants),
      cmocka_unit_test(cse_leaves_random_ops),   cmocka_unit_test(cse_leaves_subgraph_captures),
      cmocka_unit_test(cse_keeps_graph_outputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
