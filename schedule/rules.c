/* rules.c — the rule-based default schedule of a kernel.
 *
 * Contractions (conv NHWC, matmul): the last two O axes are the register
 * tile: rows (ow / i) unrolled, columns (output channels / j) vectorized,
 * sized so that rows x column-vectors accumulators fit the vector register
 * file; every outer piece is fused into one parallel loop; the reduction is
 * computed at the tile. MatMul / Gemm (one reduction axis) whose activation
 * operand outgrows L2 take a wider tile, 6 rows x 4 vectors: half as many
 * passes of the activations from L3 (faster on matmul1024 with AVX-512;
 * neutral on BERT's 128-row MatMuls, left at 8x32). Reduction blocking (split_reduction) is left to the
 * autotuner: without packing the activation rows too, their short strided
 * streams per block cost more than the L1 reuse of the weights gains
 * (slower on matmul1024). On 16 registers a dense conv's
 * rows are taken over its pixels, oh x ow as one axis (fuse_spatial), when
 * that tile wastes less.
 * Everything else: the innermost axis is vectorized with native vectors, the
 * outer axes are fused into one parallel loop; reductions are computed per
 * vector of the innermost axis when they keep that axis (pooling), else per
 * row (softmax, layer norm). On 32 vector registers a depthwise conv also
 * unrolls its kw taps (unroll_reduce). */
#include <string.h>

#include "schedule/schedule.h"

static bool const_extent(const kn_te_tensor *t, int axis, int64_t *e) {
  return kn_e_is_const_int(t->shape[axis], e);
}

/* Column (vector) factor: full vectors, at most `max_waste` of them
 * computed past the last column (else the least waste). A row of up to
 * four vectors (64 lanes, as space.c) that ends in half a vector is one
 * whole-row tile, cut by finalize.c into 16 + 8 lanes for 24 columns (two
 * FMAs per row where 8-lane tiles take three): faster for mobilenet_v2's
 * and efficientnet_b0's projections to 24 channels, alone and end to end
 * (docs/architecture.md, "Figures behind the default rules"). */
static int64_t pick_cols(int64_t cols, int lanes, double max_waste) {
  if (lanes >= 8 && cols > lanes && cols <= 4 * (int64_t)lanes && cols <= 64 && cols % lanes != 0 &&
      cols % (lanes / 2) == 0)
    return cols;
  int64_t cand[] = {2 * (int64_t)lanes, lanes, lanes / 2, lanes / 4};
  int64_t best = 1;
  double best_waste = 1e9;
  for (int i = 0; i < 4; i++) {
    int64_t f = cand[i];
    if (f < 4 || f > cols) continue;
    double waste = (double)(((cols + f - 1) / f) * f - cols) / (double)cols;
    if (waste <= max_waste) return f;
    if (waste < best_waste) {
      best_waste = waste;
      best = f;
    }
  }
  return best;
}

/* Columns of a grouped conv's tile that divide its channels per group:
 * the widest of two vectors, one, a half and a quarter (at least 4 lanes);
 * 0 when the conv is depthwise, has one group, or none divides. */
static int64_t group_cols(int64_t per_group, int64_t cols, int lanes) {
  if (per_group <= 1 || per_group >= cols) return 0;
  int64_t cand[] = {2 * (int64_t)lanes, lanes, lanes / 2, lanes / 4};
  for (int i = 0; i < 4; i++)
    if (cand[i] >= 4 && per_group % cand[i] == 0) return cand[i];
  return 0;
}

/* The activation operand of a MatMul beyond this does not stay in L2. */
#define KN_RULES_L2_BYTES (1024 * 1024)

/* Row (unroll) factor: the count of rows whose accumulators fit the vector
 * register file.
 * 32 registers (AVX-512, NEON): 12 are left for the weight vectors, the
 * broadcast inputs and the padding masks; the largest count that fits, or a
 * divisor of the extent not below half of it (as measured on AVX-512).
 * 16 registers (AVX2, portable C) hold only the accumulators, one weight
 * vector per column vector and one broadcast, so the tile is small and the
 * rows recomputed by an overlapping last tile cost more: the count with the
 * least issued work per useful FMA, (rows computed / rows) x (1 + 4 /
 * accumulators), where 4 stands for the FMA latency the accumulators must
 * hide. On AVX2 this picks 4 rows for 7 (resnet layer4: faster than 6,
 * which recomputes 5 of 12 rows) and 5 for 14. */
static double row_cost(int64_t rows, int64_t r, int64_t vecs) {
  double computed = (double)(((rows + r - 1) / r) * r) / (double)rows;
  return computed * (1.0 + 4.0 / (double)(r * vecs));
}

static int64_t pick_rows(int64_t rows, int64_t vecs_per_row, int regs) {
  int64_t vecs = vecs_per_row > 0 ? vecs_per_row : 1;
  int64_t reserve = regs >= 32 ? 12 : vecs + 2;
  int64_t max_rows = (regs - reserve) / vecs;
  if (max_rows > 14) max_rows = 14;
  if (max_rows < 1) max_rows = 1;
  if (rows <= max_rows) return rows;
  if (regs >= 32) {
    for (int64_t r = max_rows; r >= (max_rows + 1) / 2; r--)
      if (rows % r == 0) return r;
    return max_rows;
  }
  int64_t best = max_rows;
  double best_cost = 1e30;
  for (int64_t r = max_rows; r >= 2; r--) {
    double cost = row_cost(rows, r, vecs);
    if (cost < best_cost - 1e-9) {
      best_cost = cost;
      best = r;
    }
  }
  return best;
}

static void add_loop(kn_schedule *s, int axis, int piece, kn_for_kind kind) {
  s->loops[s->n_loops++] = (kn_sched_loop){axis, piece, kind};
}

static void split(kn_schedule *s, int axis, int64_t factor) {
  s->factors[axis][s->n_factors[axis]++] = factor;
}

void kn_sched_elem_inner(kn_schedule *s, int rank, int elem_axis, int64_t vf, int n_parallel) {
  memset(s, 0, sizeof *s);
  s->n_axes = rank;
  split(s, rank - 1, vf);
  for (int a = 0; a < rank - 1; a++)
    if (a != elem_axis) add_loop(s, a, 0, KN_FOR_SERIAL);
  add_loop(s, rank - 1, 0, KN_FOR_SERIAL);
  s->n_parallel = n_parallel;
  s->attach = rank;
  add_loop(s, elem_axis, 0, KN_FOR_UNROLLED);
  add_loop(s, rank - 1, 1, KN_FOR_VECTORIZED);
}

void kn_sched_default(const kn_te_tensor *out, const kn_sched_hints *h, const kn_target *t,
                      kn_schedule *s) {
  memset(s, 0, sizeof *s);
  int rank = out->rank;
  s->n_axes = rank;
  int lanes = kn_target_lanes(t, out->dtype);
  int64_t rows = 0, cols = 0;
  /* a MatMul of one row per leading index against one 2-D matrix ([T, 1, K] x
   * [K, N]: nn.MultiheadAttention's input projection after its [T, B, E]
   * transpose) is a GEMM of T rows: its rows run across the unit axis
   * (fuse_spatial), not as T matrix-vector products that stream the whole
   * matrix once per row */
  int64_t lead = 0;
  bool rows_across = h->is_contraction && h->shared_rhs && !h->spatial && rank >= 3 &&
                     const_extent(out, rank - 2, &rows) && rows == 1 && const_extent(out, rank - 3, &lead) &&
                     lead > 1;
  if (rows_across) s->fuse_spatial = true;
  /* a single row that is not a pixel row (a classifier's Gemm at a static
   * batch of 1) is a matrix-vector product: the symbolic-row rule below, not
   * a register tile of one row, which was much slower (mobilenet_v2
   * exported with batch 1: its 1280 x 1000 classifier) */
  if (h->is_contraction && rank >= 2 && const_extent(out, rank - 1, &cols) &&
      const_extent(out, rank - 2, &rows) && (rows > 1 || h->spatial || rows_across)) {
    if (rows_across) rows = lead;
    /* a dense conv or matmul takes the two-vector tile only when at most 5%
     * of it is past the last column: 144, 240 and 112 columns (efficientnet_b0,
     * mobilenet_v2) waste 11%, 6.7% and 14% in 32-wide tiles, and their tuning
     * records picked faster 16-wide ones. Grouped
     * convs keep the 15%: at 144 and 240 channels the depthwise ones' 32-wide
     * default tiles were the best records (grouped non-depthwise convs were
     * not measured). Both models faster end to end (docs/architecture.md,
     * "Figures behind the default rules") */
    int64_t cf = pick_cols(cols, lanes, h->grouped ? 0.15 : 0.05);
    /* a grouped conv of several channels per group (RegNet, ResNeXt) reads,
     * for each lane of a column vector, input channel ic of that lane's
     * group: a vector across two groups is a gather per tap. Columns that
     * divide the group's channels keep every vector inside one group, where
     * the input is one broadcast (regnet_y_400mf's 8-channel groups under
     * 16-column tiles were gathers, its slowest kernels) */
    int64_t in_group = group_cols(h->group_cols, cols, lanes);
    if (in_group > 0) cf = in_group;
    int64_t vecs = kn_sched_vector_regs(cf, lanes);
    int64_t rf = pick_rows(rows, vecs, t->vector_regs);
    int64_t oh = 0;
    if (h->spatial && !h->grouped && t->vector_regs < 32 && const_extent(out, rank - 3, &oh) &&
        oh > 1 && h->n_reduce >= 1 && h->reduce_extent[h->n_reduce - 1] >= 16) {
      /* implicit GEMM over the pixels (fuse_spatial) when its tile wastes
       * less by the same measure: resnet50's layer4 (7x7) tiles 5 of 49
       * pixels, not 4 of 7 columns, faster for its 1x1 conv; its layer1-3
       * convs measured faster too (a 1% margin).
       * Not for depthwise convs: their padded taps are masked per pixel,
       * and the masks of a fused row need the division (slower at
       * 14x14 in mobilenet_v2, faster at 7x7: left to the autotuner). Not
       * for the 3-channel stem either, whose 6 fused rows need 6 row
       * pointers over a 3-element reduction (slower) */
      int64_t pixels = oh * rows, rp = pick_rows(pixels, vecs, t->vector_regs);
      if (row_cost(pixels, rp, vecs) < 0.99 * row_cost(rows, rf, vecs)) {
        s->fuse_spatial = true;
        rf = rp;
      }
    }
    if (h->n_reduce == 1 && h->reduce_extent[0] >= 256 && rows >= 64 && t->vector_regs >= 32 &&
        rows * h->reduce_extent[0] * 4 > KN_RULES_L2_BYTES && cols % (4 * (int64_t)lanes) == 0 &&
        cols >= 8 * (int64_t)lanes) {
      cf = 4 * (int64_t)lanes;
      rf = 6;
    }
    if (rf > 1) split(s, rank - 2, rf);
    if (cf > 1) split(s, rank - 1, cf);
    if (h->weights_heavy) add_loop(s, rank - 1, 0, KN_FOR_SERIAL);
    for (int a = 0; a < rank - 2; a++) add_loop(s, a, 0, KN_FOR_SERIAL);
    add_loop(s, rank - 2, 0, KN_FOR_SERIAL);
    if (!h->weights_heavy) add_loop(s, rank - 1, 0, KN_FOR_SERIAL);
    s->n_parallel = s->n_loops;
    s->attach = s->n_loops;
    if (rf > 1) add_loop(s, rank - 2, 1, KN_FOR_UNROLLED);
    if (cf > 1) add_loop(s, rank - 1, 1, cf >= 4 ? KN_FOR_VECTORIZED : KN_FOR_UNROLLED);
    /* a depthwise conv unrolls its innermost taps (kw): the tile's pixels
     * then share the input vectors of neighbouring taps (8 pixels x 3 taps
     * load 10 vectors, not 24). Unrolling kh as well measured slower.
     * With 16 registers the extra live inputs may spill: not measured, left
     * to the autotuner */
    if (h->grouped && h->n_reduce == 2 && t->vector_regs >= 32 && h->reduce_extent[1] >= 2 &&
        h->reduce_extent[1] <= KN_SCHED_MAX_UNROLL_AXIS)
      s->unroll_reduce = 1; /* kh, kw: one input channel per group */
    return;
  }
  if (rank == 0) return;
  int64_t last = 0, vf = 1;
  if (const_extent(out, rank - 1, &last)) {
    if (last >= lanes)
      vf = lanes;
    else
      for (int64_t f = lanes / 2; f >= 4; f /= 2)
        if (last >= f) {
          vf = f;
          break;
        }
  }
  /* a contraction here has a symbolic row count (the batch: a classifier's
   * Gemm at [N, 1000]): a vector that divides the columns, since only then
   * are its constant weights packed tile by tile (kernel.c, pack_weights);
   * a Gemm with transB reads them K apart otherwise, a gather per vector
   * (mobilenet_v2's classifier ran faster in 8 packed columns than in 16) */
  while (h->is_contraction && vf > 4 && last % vf != 0) vf /= 2;
  /* one vector per tile is one FMA chain over the whole reduction, bound by
   * the FMA latency: a tile of u vectors, u the largest divisor of the
   * vectors per row up to 8 (1000 columns: 5 x 8), so that the packed
   * weights still cover the columns exactly (faster for mobilenet_v2's
   * 1280 x 1000 classifier with its weights in cache; read from memory, as
   * in efficientnet_b0, the same either way) */
  int64_t u = 1;
  if (h->is_contraction && vf >= 4 && last % vf == 0)
    for (int64_t k = 8; k >= 2 && u == 1; k--)
      if ((last / vf) % k == 0 && last / vf > k) u = k;
  if (u > 1) split(s, rank - 1, u);
  if (vf > 1) split(s, rank - 1, vf);
  /* the Winograd input transform: the outer loops over (n, tile), then per
   * vector of channels the tile's a² elements unrolled, so that they share
   * the a x a input vectors they read (F(4x4, 3x3): 36 loads for 36
   * elements instead of 16 each; per element, its taps are constants) */
  int64_t elems = 0;
  if (h->elem_axis >= 0 && h->elem_axis < rank - 1 && vf > 1 && !h->has_stages &&
      const_extent(out, h->elem_axis, &elems) && elems <= 64) {
    kn_sched_elem_inner(s, rank, h->elem_axis, vf, rank - 2);
    return;
  }
  bool stages_keep_last = (h->stage_axes >> (rank - 1)) & 1u;
  /* a transpose between layouts gathers each vector from vf lines a row
   * apart, and the next element of those lines comes with the next index of
   * the gather axis. When the loops inside that axis touch more lines than
   * L1 keeps (vf x their iterations > 256), the gather axis goes innermost
   * of the outer loops, so the next vectors read the rest of the lines from
   * L1 (a [1,96,112,112] NHWC -> NCHW output;
   * the [1,16,112,112] input transform, 2 vectors inside w, stays: its
   * writes are sequential as it is) */
  int gather = -1;
  if (vf > 1 && h->gather_axis >= 0) {
    int64_t inside = (last + vf - 1) / vf, e = 0;
    for (int a = h->gather_axis + 1; a < rank - 1; a++)
      inside *= const_extent(out, a, &e) ? e : 4096;
    if (inside * vf > 256) gather = h->gather_axis;
  }
  for (int a = 0; a < rank; a++)
    if (a != gather) add_loop(s, a, 0, KN_FOR_SERIAL);
  if (gather >= 0) add_loop(s, gather, 0, KN_FOR_SERIAL);
  if (h->has_stages && !stages_keep_last) {
    /* reduce per row: the row loops are parallel, stages at the row */
    s->n_parallel = rank - 1;
    s->attach = rank - 1;
    s->reduce_lanes = lanes;
  } else {
    /* an innermost axis too short for a vector (an image's 3 channels)
     * leaves every element to the fused parallel loop, whose index is
     * divided back into coordinates per element: keep the inner axes
     * serial while they hold at most 4096 elements, so the parallel loop
     * goes over rows (the [1,226,226,3] pad of a stem conv) */
    s->n_parallel = rank;
    /* the Winograd transforms: per element a dozen index divisions that
     * the fused parallel loop would recompute for every vector (resnet50's
     * layer1 input transform) */
    if (h->index_heavy && vf > 1 && rank >= 2) s->n_parallel = rank - 1;
    if (vf == 1 && rank >= 2 && !h->has_stages) {
      int64_t inner = 1, e = 0;
      while (s->n_parallel > 1 && const_extent(out, s->n_parallel - 1, &e) && inner * e <= 4096) {
        inner *= e;
        s->n_parallel--;
      }
    }
    s->attach = rank;
  }
  if (u > 1) add_loop(s, rank - 1, 1, KN_FOR_UNROLLED);
  if (vf > 1) add_loop(s, rank - 1, u > 1 ? 2 : 1, KN_FOR_VECTORIZED);
}

void kn_sched_print(const kn_schedule *s, FILE *out) {
  if (s->fuse_spatial) fputs("fuse_spatial()\n", out);
  for (int a = 0; a < s->n_axes; a++)
    for (int k = 0; k < s->n_factors[a]; k++)
      fprintf(out, "split(axis=%d, factor=%lld)\n", a, (long long)s->factors[a][k]);
  fputs("reorder(", out);
  for (int i = 0; i < s->n_loops; i++)
    fprintf(out, "%s%d.%d", i ? ", " : "", s->loops[i].axis, s->loops[i].piece);
  fputs(")\n", out);
  if (s->n_parallel) fprintf(out, "fuse_parallel(loops=%d)\n", s->n_parallel);
  fprintf(out, "compute_at(stages, depth=%d)\n", s->attach);
  if (s->reduce_lanes > 1) fprintf(out, "vectorize_reduction(lanes=%d)\n", s->reduce_lanes);
  if (s->rsplit_factor > 0)
    fprintf(out, "split_reduction(axis=%d, factor=%lld, depth=%d%s)\n", s->rsplit_axis, (long long)s->rsplit_factor,
            s->rsplit_depth, s->rsplit_pack ? ", pack" : "");
  if (s->unroll_reduce > 0) fprintf(out, "unroll_reduction(axes=%d)\n", s->unroll_reduce);
  static const char *kinds[] = {"serial", "parallel", "vectorize", "unroll"};
  for (int i = 0; i < s->n_loops; i++)
    if (s->loops[i].kind != KN_FOR_SERIAL)
      fprintf(out, "%s(%d.%d)\n", kinds[s->loops[i].kind], s->loops[i].axis, s->loops[i].piece);
}
