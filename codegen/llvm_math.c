/* llvm_math.c — float intrinsics of the loop IR as LLVM IR.
 *
 * exp, log, erf, tanh and sigmoid on f32 are inline, branch-free polynomial
 * approximations so that vector code never calls libm:
 *   exp:  n = round(x / ln2), r = x - n ln2 (two-part ln2), degree-6 minimax
 *         polynomial (Cephes coefficients), scaled by 2^n in two halves so
 *         results down to the subnormals and up to the overflow to inf are
 *         right. Max relative error ~1.5e-7 for normal results.
 *   log:  x = m 2^e with m in [sqrt(1/2), sqrt(2)), degree-9 polynomial in
 *         m - 1 (Cephes), subnormal inputs renormalised. Relative ~1.2e-7.
 *   tanh: odd polynomial for |x| < 0.625, else 1 - 2 / (exp(2|x|) + 1).
 *   sigmoid: 1 / (1 + 2^u), u = -x log2(e), 2^u from a degree-5 polynomial
 *         of u's fraction (sigmoid_f32).
 *   erf:  Taylor polynomial for |x| < 0.5, else Abramowitz-Stegun 7.1.26
 *         (|error| <= 1.5e-7) with the inline exp.
 *   Absolute error of tanh / sigmoid / erf <= 1e-6 over all floats; large |x|
 *   saturates, inf and NaN follow libm, except that sigmoid below -86.6
 *   (-inf included) gives 2^-125 ~ 2.4e-38, not the subnormal or 0. These
 *   three clamp their arguments to where exp needs no range handling
 *   (exp_bounded) and divide with a Newton reciprocal: a
 *   vector division costs as much as the rest of the function (vdivps zmm
 *   issues once per ~10 cycles), and SiLU / GELU epilogues run it per output.
 * On an AVX-512 target, f32 vectors of 16 lanes (wider ones in 16-lane
 *   pieces) take two x86 instructions instead: vscalefps for the 2^n of exp
 *   (no split, no integer ops) and vrcp14ps plus one Newton step for the
 *   reciprocal (three steps from a bit guess otherwise). That is ~10 of the
 *   ~31 vector ops of a sigmoid, which SiLU epilogues run per output;
 *   sigmoid in base 2 takes 15 where it took 21.
 *   With AVX512DQ, sigmoid takes its fraction from vreduceps and lets
 *   vscalefps floor the exponent: 13 instructions (sigmoid_reduce).
 * f64 versions call libm (per lane for vectors). sqrt, floor, ceil, round
 * (half to even), abs and fma map to LLVM intrinsics; sin, cos and pow become
 * libm calls, one per lane. */
#include <math.h>

#include "codegen/cg_llvm.h"

typedef struct mb {
  kn_cg_fn *f;
  LLVMBuilderRef b;
  LLVMTypeRef fty; /* float or <n x float> */
  LLVMTypeRef ity; /* i32 or <n x i32> */
  bool avx512;      /* <16 x float> on an AVX-512 target: vrcp14ps, vscalefps */
  bool dq;          /* ... that has AVX512DQ too: vreduceps */
} mb;

static LLVMValueRef C(mb *m, double v) { return kn_cg_const_f(m->fty, v); }
static LLVMValueRef I(mb *m, int64_t v) { return kn_cg_const_i(m->ity, v); }
static LLVMValueRef add(mb *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFAdd(m->b, a, b, ""); }
static LLVMValueRef sub(mb *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFSub(m->b, a, b, ""); }
static LLVMValueRef mul(mb *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(m->b, a, b, ""); }
static LLVMValueRef m_div(mb *m, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFDiv(m->b, a, b, ""); }
static LLVMValueRef sel(mb *m, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildSelect(m->b, c, a, b, "");
}
static LLVMValueRef fcmp(mb *m, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFCmp(m->b, p, a, b, "");
}
static LLVMValueRef intr1(mb *m, const char *name, LLVMValueRef a) {
  return kn_cg_call_intrinsic(m->f, name, &m->fty, 1, &a, 1);
}
static LLVMValueRef fma3(mb *m, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
  LLVMValueRef args[3] = {a, b, c};
  return kn_cg_call_intrinsic(m->f, "llvm.fmuladd", &m->fty, 1, args, 3);
}
static LLVMValueRef m_copysign(mb *m, LLVMValueRef mag, LLVMValueRef sign) {
  LLVMValueRef args[2] = {mag, sign};
  return kn_cg_call_intrinsic(m->f, "llvm.copysign", &m->fty, 1, args, 2);
}
/* Horner: c[0] + x (c[1] + x (c[2] + ...)), coefficients from the highest. */
static LLVMValueRef horner(mb *m, LLVMValueRef x, const double *c_high_first, int n) {
  LLVMValueRef p = C(m, c_high_first[0]);
  for (int i = 1; i < n; i++) p = fma3(m, p, x, C(m, c_high_first[i]));
  return p;
}
static LLVMValueRef bits_to_float(mb *m, LLVMValueRef i) { return LLVMBuildBitCast(m->b, i, m->fty, ""); }
static LLVMValueRef float_to_bits(mb *m, LLVMValueRef x) { return LLVMBuildBitCast(m->b, x, m->ity, ""); }

static const double ln2_hi = 0.693359375, ln2_lo = -2.12194440e-4;

/* y * 2^n for float n holding an integer: vscalefps on AVX-512 (one
 * instruction, right down to the subnormals and 0), else the exponent bits of
 * one normal 2^n, n in [-126, 127]. */
static LLVMValueRef scale2n(mb *m, LLVMValueRef y, LLVMValueRef n) {
  if (m->avx512) {
    LLVMTypeRef i16 = LLVMInt16TypeInContext(m->f->m->ctx), i32 = LLVMInt32TypeInContext(m->f->m->ctx);
    LLVMValueRef args[5] = {y, n, y, LLVMConstInt(i16, 0xffff, 0), LLVMConstInt(i32, 4, 0)}; /* current rounding */
    return kn_cg_call_intrinsic(m->f, "llvm.x86.avx512.mask.scalef.ps.512", NULL, 0, args, 5);
  }
  LLVMValueRef ni = LLVMBuildFPToSI(m->b, n, m->ity, "");
  return mul(m, y, bits_to_float(m, LLVMBuildShl(m->b, LLVMBuildAdd(m->b, ni, I(m, 127), ""), I(m, 23), "")));
}

static LLVMValueRef exp_f32(mb *m, LLVMValueRef x) {
  LLVMValueRef nan = fcmp(m, LLVMRealUNO, x, x);
  /* Clamp so that n stays in [-150, 129]; NaN lanes compute on 0. */
  LLVMValueRef xc = sel(m, fcmp(m, LLVMRealOGT, x, C(m, 89.0)), C(m, 89.0), x);
  xc = sel(m, fcmp(m, LLVMRealOLT, xc, C(m, -104.0)), C(m, -104.0), xc);
  xc = sel(m, nan, C(m, 0.0), xc);
  LLVMValueRef n = intr1(m, "llvm.roundeven", mul(m, xc, C(m, 1.44269504088896341)));
  LLVMValueRef r = fma3(m, n, C(m, -ln2_hi), xc);
  r = fma3(m, n, C(m, -ln2_lo), r);
  static const double p[] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
                             4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1};
  LLVMValueRef poly = horner(m, r, p, 6);
  LLVMValueRef y = fma3(m, mul(m, poly, r), r, add(m, r, C(m, 1.0)));
  /* y * 2^n, with 2^n split in two normal factors (vscalefps needs no split) */
  if (m->avx512) return sel(m, nan, x, scale2n(m, y, n));
  LLVMValueRef ni = LLVMBuildFPToSI(m->b, n, m->ity, "");
  LLVMValueRef n1 = LLVMBuildAShr(m->b, ni, I(m, 1), "");
  LLVMValueRef n2 = LLVMBuildSub(m->b, ni, n1, "");
  LLVMValueRef s1 = bits_to_float(m, LLVMBuildShl(m->b, LLVMBuildAdd(m->b, n1, I(m, 127), ""), I(m, 23), ""));
  LLVMValueRef s2 = bits_to_float(m, LLVMBuildShl(m->b, LLVMBuildAdd(m->b, n2, I(m, 127), ""), I(m, 23), ""));
  LLVMValueRef res = mul(m, mul(m, y, s1), s2);
  return sel(m, nan, x, res);
}

static LLVMValueRef log_f32(mb *m, LLVMValueRef x) {
  /* renormalise subnormals */
  LLVMValueRef tiny = fcmp(m, LLVMRealOLT, x, C(m, 1.17549435e-38));
  LLVMValueRef xs = sel(m, tiny, mul(m, x, C(m, 8388608.0)), x);
  LLVMValueRef bits = float_to_bits(m, xs);
  LLVMValueRef ebits = LLVMBuildAnd(m->b, LLVMBuildLShr(m->b, bits, I(m, 23), ""), I(m, 0xff), "");
  LLVMValueRef e = LLVMBuildSub(m->b, ebits, I(m, 126), ""); /* x = mant * 2^e, mant in [0.5, 1) */
  e = LLVMBuildSub(m->b, e, LLVMBuildSelect(m->b, tiny, I(m, 23), I(m, 0), ""), "");
  LLVMValueRef mant = bits_to_float(
      m, LLVMBuildOr(m->b, LLVMBuildAnd(m->b, bits, I(m, 0x007fffff), ""), I(m, 0x3f000000), ""));
  LLVMValueRef low = fcmp(m, LLVMRealOLT, mant, C(m, 0.707106781186547524));
  e = LLVMBuildSub(m->b, e, LLVMBuildZExt(m->b, low, m->ity, ""), "");
  LLVMValueRef fm = sub(m, sel(m, low, add(m, mant, mant), mant), C(m, 1.0));
  LLVMValueRef ef = LLVMBuildSIToFP(m->b, e, m->fty, "");
  static const double p[] = {7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1,
                             -1.2420140846E-1, 1.4249322787E-1, -1.6668057665E-1,
                             2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1};
  LLVMValueRef z = mul(m, fm, fm);
  LLVMValueRef y = mul(m, mul(m, fm, z), horner(m, fm, p, 9));
  y = fma3(m, ef, C(m, ln2_lo), y);
  y = fma3(m, z, C(m, -0.5), y);
  LLVMValueRef res = add(m, fm, y);
  res = fma3(m, ef, C(m, ln2_hi), res);
  /* special values */
  res = sel(m, fcmp(m, LLVMRealOEQ, x, C(m, INFINITY)), x, res);
  res = sel(m, fcmp(m, LLVMRealOEQ, x, C(m, 0.0)), C(m, -INFINITY), res);
  res = sel(m, fcmp(m, LLVMRealOLT, x, C(m, 0.0)), C(m, NAN), res);
  return sel(m, fcmp(m, LLVMRealUNO, x, x), x, res);
}

/* min / max in the operand order of x86 minps / maxps, so that they lower to
 * one instruction; a NaN a gives b. */
static LLVMValueRef vmin(mb *m, LLVMValueRef a, LLVMValueRef b) { return sel(m, fcmp(m, LLVMRealOLT, a, b), a, b); }
static LLVMValueRef vmax(mb *m, LLVMValueRef a, LLVMValueRef b) { return sel(m, fcmp(m, LLVMRealOGT, a, b), a, b); }
static LLVMValueRef keep_nan(mb *m, LLVMValueRef x, LLVMValueRef res) {
  return sel(m, fcmp(m, LLVMRealUNO, x, x), x, res);
}

/* exp(t) for t in [-87, 88] (the caller clamps; with vscalefps t may go down
 * to -150, where the result is a subnormal or 0): the polynomial of exp_f32
 * scaled by 2^n, with no NaN handling: a NaN t gives NaN on AVX-512 only. */
static LLVMValueRef exp_bounded(mb *m, LLVMValueRef t) {
  LLVMValueRef n = intr1(m, "llvm.roundeven", mul(m, t, C(m, 1.44269504088896341)));
  LLVMValueRef r = fma3(m, n, C(m, -ln2_hi), t);
  r = fma3(m, n, C(m, -ln2_lo), r);
  static const double p[] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
                             4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1};
  LLVMValueRef y = fma3(m, mul(m, horner(m, r, p, 6), r), r, add(m, r, C(m, 1.0)));
  return scale2n(m, y, n);
}

/* 1 / d for a positive normal d in [2^-125, 2^125]. AVX-512: vrcp14ps
 * (relative error <= 2^-14) and one Newton step (<= 2^-28 before rounding).
 * Else an initial guess from the bits (<= 12%) and three Newton steps
 * (<= 4e-8). A NaN d gives NaN on AVX-512 only. */
static LLVMValueRef recip(mb *m, LLVMValueRef d) {
  LLVMValueRef nd = LLVMBuildFNeg(m->b, d, "");
  if (m->avx512) {
    LLVMTypeRef i16 = LLVMInt16TypeInContext(m->f->m->ctx);
    LLVMValueRef args[3] = {d, d, LLVMConstInt(i16, 0xffff, 0)};
    LLVMValueRef y = kn_cg_call_intrinsic(m->f, "llvm.x86.avx512.rcp14.ps.512", NULL, 0, args, 3);
    return fma3(m, y, fma3(m, nd, y, C(m, 1.0)), y);
  }
  LLVMValueRef y = bits_to_float(m, LLVMBuildSub(m->b, I(m, 0x7ef311c3), float_to_bits(m, d), ""));
  for (int i = 0; i < 3; i++) y = fma3(m, y, fma3(m, nd, y, C(m, 1.0)), y);
  return y;
}

static LLVMValueRef tanh_f32(mb *m, LLVMValueRef x) {
  LLVMValueRef ax = intr1(m, "llvm.fabs", x);
  LLVMValueRef z = mul(m, x, x);
  static const double p[] = {-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2,
                             1.33314422036E-1, -3.33332819422E-1};
  LLVMValueRef small = fma3(m, mul(m, x, z), horner(m, z, p, 5), x);
  /* tanh(10) rounds to 1 (tanh(9) does not: 1 - 3.05e-8) */
  LLVMValueRef a10 = vmin(m, ax, C(m, 10.0));
  LLVMValueRef e = exp_bounded(m, add(m, a10, a10));
  LLVMValueRef big = sub(m, C(m, 1.0), mul(m, C(m, 2.0), recip(m, add(m, e, C(m, 1.0)))));
  big = m_copysign(m, big, x);
  return keep_nan(m, x, sel(m, fcmp(m, LLVMRealOLT, ax, C(m, 0.625)), small, big));
}

/* max(a, lo) / min(a, hi) that keep a NaN a (maxps / minps with the bound
 * first). */
static LLVMValueRef max_keep_nan(mb *m, LLVMValueRef a, LLVMValueRef lo) {
  return sel(m, fcmp(m, LLVMRealOLT, a, lo), lo, a);
}
static LLVMValueRef min_keep_nan(mb *m, LLVMValueRef a, LLVMValueRef hi) {
  return sel(m, fcmp(m, LLVMRealOGT, a, hi), hi, a);
}

/* 1 / (1 + 2^u) on AVX-512 with DQ, in 12 instructions after u's multiply
 * (sigmoid_f32 otherwise): f = u - floor(u) in one vreduceps (round down; an
 * infinite u gives 0), 2^f by a degree-5 polynomial on [0, 1] (relative error
 * 1.5e-7 in float, fitted here by reweighted least squares), and vscalefps
 * scales by 2^floor(u) itself, so u needs no rounding of its own. f and the
 * scale agree where u is a tiny negative (f rounds to 1, floor is -1). Only
 * u > 125 is clamped, for recip's domain (2^u = inf would turn its Newton step
 * into inf * 0); -inf gives 2^u = 0 and a NaN flows through. That is two
 * instructions fewer than the form below (no lower clamp; the rounding and
 * the subtraction are one vreduceps). The gain in a SiLU epilogue
 * (docs/architecture.md, "Figures behind the default rules") is smaller
 * than the instruction count's because such
 * loops are bound by the FMA/multiply pipes, and 9 of a SiLU's instructions
 * (the multiply by log2(e), 5 FMAs, 2 Newton FMAs, x * s) need them in both
 * forms. */
static LLVMValueRef sigmoid_reduce(mb *m, LLVMValueRef u) {
  LLVMContextRef ctx = m->f->m->ctx;
  LLVMTypeRef i16 = LLVMInt16TypeInContext(ctx), i32 = LLVMInt32TypeInContext(ctx);
  u = min_keep_nan(m, u, C(m, 125.0));
  LLVMValueRef ra[5] = {u, LLVMConstInt(i32, 0x09, 0), u, LLVMConstInt(i16, 0xffff, 0),
                        LLVMConstInt(i32, 4, 0)}; /* round down, no precision exception */
  LLVMValueRef f = kn_cg_call_intrinsic(m->f, "llvm.x86.avx512.mask.reduce.ps.512", NULL, 0, ra, 5);
  static const double q[] = {1.8775759963318706e-3, 8.989342488348484e-3, 5.582631379365921e-2,
                             2.4015362560749054e-1, 6.931530833244324e-1, 9.999999403953552e-1};
  LLVMValueRef y = horner(m, f, q, 6);
  LLVMValueRef sa[5] = {y, u, y, LLVMConstInt(i16, 0xffff, 0), LLVMConstInt(i32, 4, 0)};
  y = kn_cg_call_intrinsic(m->f, "llvm.x86.avx512.mask.scalef.ps.512", NULL, 0, sa, 5);
  return recip(m, add(m, y, C(m, 1.0)));
}

/* 1 / (1 + 2^u) with u = -x log2(e) clamped to [-30, 125], in base 2:
 * n = round(u), f = u - n (exact, |f| <= 1/2), 2^f by a degree-5 polynomial
 * (relative error 2.4e-7 in float, fitted here to 2^f on [-1/2, 1/2]),
 * scaled by 2^n (scale2n) and inverted (recip). On AVX-512 that is 15 vector
 * instructions in the loop (objdump), where exp(-|x|) with the two-part ln2
 * reduction, the degree-7 Cephes polynomial and a masked e / (1 + e) for
 * x < 0 took 21; the portable form (AVX2: integer 2^n, 3 Newton steps, the
 * NaN select) 24 against 32. u's rounding (|u| <= 125 holds 7
 * significant digits) moves 2^u by a relative 1e-5 at most where it is
 * large, which moves sigmoid by < 1e-9. From x = 20.8 on the result rounds
 * to 1; below x = -86.6, where 2^u would pass 2^125 (recip's domain), it is
 * 2^-125 ~ 2.4e-38 instead of going to 0. On AVX-512 NaN flows through the
 * clamps, the rounding, vscalefps and vrcp14ps; the portable form clamps it
 * to a number (its 2^n goes through an integer) and selects it back. */
static LLVMValueRef sigmoid_f32(mb *m, LLVMValueRef x) {
  LLVMValueRef u = mul(m, x, C(m, -1.44269504088896341));
  if (m->dq) return sigmoid_reduce(m, u);
  if (m->avx512)
    u = max_keep_nan(m, min_keep_nan(m, u, C(m, 125.0)), C(m, -30.0));
  else
    u = vmax(m, vmin(m, u, C(m, 125.0)), C(m, -30.0));
  LLVMValueRef n = intr1(m, "llvm.roundeven", u);
  LLVMValueRef f = sub(m, u, n);
  static const double p[] = {1.327647129073739e-3, 9.675541892647743e-3, 5.550713092088699e-2,
                             2.4022120237350464e-1, 6.931469440460205e-1, 1.0000001192092896};
  LLVMValueRef s = recip(m, add(m, scale2n(m, horner(m, f, p, 6), n), C(m, 1.0)));
  return m->avx512 ? s : keep_nan(m, x, s);
}

static LLVMValueRef erf_f32(mb *m, LLVMValueRef x) {
  LLVMValueRef ax = intr1(m, "llvm.fabs", x);
  /* |x| < 0.5: 2/sqrt(pi) * (x - x^3/3 + x^5/10 - ...) */
  static const double taylor[] = {-8.548327023450853e-4, 5.223977625442188e-3,
                                  -2.6866170645131252e-2, 1.1283791670955126e-1,
                                  -3.7612638903183754e-1, 1.1283791670955126};
  LLVMValueRef z = mul(m, x, x);
  LLVMValueRef small = mul(m, x, horner(m, z, taylor, 6));
  /* A&S 7.1.26; erf(9) rounds to 1 */
  LLVMValueRef a9 = vmin(m, ax, C(m, 9.0));
  LLVMValueRef t = recip(m, fma3(m, a9, C(m, 0.3275911), C(m, 1.0)));
  static const double as[] = {1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592};
  LLVMValueRef poly = mul(m, t, horner(m, t, as, 5));
  LLVMValueRef e = exp_bounded(m, LLVMBuildFNeg(m->b, mul(m, a9, a9), ""));
  LLVMValueRef big = m_copysign(m, fma3(m, LLVMBuildFNeg(m->b, poly, ""), e, C(m, 1.0)), x);
  return keep_nan(m, x, sel(m, fcmp(m, LLVMRealOLT, ax, C(m, 0.5)), small, big));
}

/* fn on the two halves of wide vectors, joined: the AVX-512 forms work on
 * one zmm register (16 floats), and schedules use 32 or 64 lanes. */
static LLVMValueRef by_halves(kn_cg_fn *f, kn_fn fn, LLVMValueRef *args, int n_args, unsigned lanes) {
  LLVMValueRef lo[3], hi[3];
  for (int a = 0; a < n_args; a++) {
    lo[a] = kn_cg_lane_range(f, args[a], NULL, 0, lanes / 2);
    hi[a] = kn_cg_lane_range(f, args[a], NULL, lanes / 2, lanes / 2);
  }
  LLVMValueRef rl = kn_cg_math(f, fn, lo, n_args), rh = kn_cg_math(f, fn, hi, n_args);
  return kn_cg_lane_range(f, rl, rh, 0, lanes);
}

LLVMValueRef kn_cg_math(kn_cg_fn *f, kn_fn fn, LLVMValueRef *args, int n_args) {
  LLVMTypeRef ty = LLVMTypeOf(args[0]);
  bool vec = LLVMGetTypeKind(ty) == LLVMVectorTypeKind;
  LLVMTypeRef elem = vec ? LLVMGetElementType(ty) : ty;
  bool f32 = LLVMGetTypeKind(elem) == LLVMFloatTypeKind;
  const kn_target *tg = f->m->target;
  unsigned lanes = vec ? LLVMGetVectorSize(ty) : 1;
  bool x512 = f32 && tg->arch == KN_ARCH_X86_64 && tg->vector_bits >= 512;
  bool inline_poly = fn == KN_FN_EXP || fn == KN_FN_SIGMOID || fn == KN_FN_TANH || fn == KN_FN_ERF;
  if (x512 && inline_poly && lanes > 16 && lanes <= 64 && (lanes & (lanes - 1)) == 0)
    return by_halves(f, fn, args, n_args, lanes);
  mb m = {f, f->b, ty, NULL, x512 && lanes == 16, x512 && lanes == 16 && tg->has_avx512dq};
  LLVMTypeRef i32 = LLVMInt32TypeInContext(f->m->ctx);
  m.ity = vec ? LLVMVectorType(i32, LLVMGetVectorSize(ty)) : i32;
  switch (fn) {
  case KN_FN_EXP: return f32 ? exp_f32(&m, args[0]) : intr1(&m, "llvm.exp", args[0]);
  case KN_FN_LOG: return f32 ? log_f32(&m, args[0]) : intr1(&m, "llvm.log", args[0]);
  case KN_FN_TANH: return f32 ? tanh_f32(&m, args[0]) : kn_cg_call_libm(f, "tanh", args, 1);
  case KN_FN_ERF: return f32 ? erf_f32(&m, args[0]) : kn_cg_call_libm(f, "erf", args, 1);
  case KN_FN_SIGMOID:
    if (f32) return sigmoid_f32(&m, args[0]);
    return m_div(&m, C(&m, 1.0), add(&m, C(&m, 1.0), intr1(&m, "llvm.exp", LLVMBuildFNeg(f->b, args[0], ""))));
  case KN_FN_SQRT: return intr1(&m, "llvm.sqrt", args[0]);
  case KN_FN_FLOOR: return intr1(&m, "llvm.floor", args[0]);
  case KN_FN_CEIL: return intr1(&m, "llvm.ceil", args[0]);
  case KN_FN_ROUND: return intr1(&m, "llvm.roundeven", args[0]);
  case KN_FN_ABS: return intr1(&m, "llvm.fabs", args[0]);
  case KN_FN_SIN: return intr1(&m, "llvm.sin", args[0]);
  case KN_FN_COS: return intr1(&m, "llvm.cos", args[0]);
  case KN_FN_POW: {
    KN_ASSERT(n_args == 2, "pow arity");
    return kn_cg_call_intrinsic(f, "llvm.pow", &ty, 1, args, 2);
  }
  case KN_FN_FMA:
    KN_ASSERT(n_args == 3, "fma arity");
    return fma3(&m, args[0], args[1], args[2]);
  default: KN_UNREACHABLE("not an elementwise float intrinsic");
  }
}
