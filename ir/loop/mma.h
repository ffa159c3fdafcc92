/* mma.h — the fragment layouts of the warp-level MMA statement
 * (KN_GPU_MMA: PTX mma.sync.aligned.m16n8k16.row.col, f16 / bf16 inputs,
 * f32 accumulators), written down once. The GPU interpreter
 * (ir/loop/gpu_eval.c) executes the MMA by them and the schedules build the
 * fragment loads from them, so a wrong formula here shows up as a wrong
 * result in the interpreter tests, not as two disagreeing copies. (What the
 * interpreter cannot tell is whether these formulas are PTX's: one GPU run
 * of the MMA test kernels settles that.)
 *
 * A warp's 32 lanes: group g = lane / 4 (0..7), t = lane % 4 (0..3).
 *   A (16 x 16, row-major, element [m][k]): each lane holds a[0..7],
 *     a[i] = A[g + 8 * ((i / 2) % 2)][2 * t + i % 2 + 8 * (i / 4)]
 *   B (16 x 8, element [k][n]): each lane holds b[0..3],
 *     b[i] = B[2 * t + i % 2 + 8 * (i / 2)][g]
 *   C, D (16 x 8, f32, element [m][n]): each lane holds c[0..3],
 *     c[i] = C[g + 8 * (i / 2)][2 * t + i % 2]
 * and D = A x B + C with f32 accumulation. In registers, a[2j] and a[2j+1]
 * share 32-bit register j (low half first), and likewise b.
 *
 * ldmatrix (KN_GPU_LDMATRIX: PTX ldmatrix.sync.aligned.m8n8.x{1,2,4}
 * [.trans].shared.b16) loads `count` 8 x 8 matrices M_0.. of 16-bit
 * elements, each row 16 contiguous, 16-byte aligned bytes of shared memory:
 *   lane 8 * i + r supplies the address of row r of M_i (lanes past
 *   8 * count supply none);
 *   each lane receives d[0 .. 2 * count), d[2i + e] from M_i:
 *     d[2i + e] = M_i[g][2 * t + e]          without .trans,
 *     d[2i + e] = M_i[2 * t + e][g]          with .trans (row g of M_i's
 *                                             transpose),
 * with g, t as above; d[2i] and d[2i+1] share 32-bit register i, low half
 * first. So register i of an x4 load is register i of an A fragment when M_i
 * is A's 8 x 8 block at (row, col) = the coordinates of lane 0's a[2i], and
 * with .trans register i of a B fragment when M_i's rows are B's k rows from
 * lane 0's b[2i]. */
#ifndef KN_MMA_H
#define KN_MMA_H

#include <stdbool.h>

enum { KN_MMA_M = 16, KN_MMA_N = 8, KN_MMA_K = 16, KN_MMA_A_REGS = 8, KN_MMA_B_REGS = 4, KN_MMA_C_REGS = 4 };

/* ldmatrix: rows and columns of each matrix, bytes of a row. */
enum { KN_LDMATRIX_DIM = 8, KN_LDMATRIX_ROW_BYTES = 16 };

/* Row and column in A (m, k) of lane's fragment element i (0..7). */
static inline void kn_mma_a_coord(int lane, int i, int *m, int *k) {
  *m = lane / 4 + 8 * ((i / 2) % 2);
  *k = 2 * (lane % 4) + i % 2 + 8 * (i / 4);
}

/* Row and column in B (k, n) of lane's fragment element i (0..3). */
static inline void kn_mma_b_coord(int lane, int i, int *k, int *n) {
  *k = 2 * (lane % 4) + i % 2 + 8 * (i / 2);
  *n = lane / 4;
}

/* Row and column in C / D (m, n) of lane's accumulator element i (0..3). */
static inline void kn_mma_c_coord(int lane, int i, int *m, int *n) {
  *m = lane / 4 + 8 * (i / 2);
  *n = 2 * (lane % 4) + i % 2;
}

/* The matrix, and the row and column in it (as stored in shared memory),
 * of lane's ldmatrix element j (0 .. 2 * count). */
static inline void kn_ldmatrix_coord(int lane, int j, bool trans, int *matrix, int *row, int *col) {
  *matrix = j / 2;
  *row = trans ? 2 * (lane % 4) + j % 2 : lane / 4;
  *col = trans ? lane / 4 : 2 * (lane % 4) + j % 2;
}

#endif
