/* llvm_expr.c — loop-IR expressions -> LLVM IR values.
 *
 * Every expression is straight-line code in the current block (no branches),
 * so results are memoised per statement by node pointer: a DAG is emitted
 * once per statement, never once per path.
 *
 * Semantics kept here (see ir/loop/expr.h):
 *  - integer DIV / MOD are floor division / modulo. Cheap forms are used when
 *    the value ranges allow: udiv/urem for a non-negative numerator and a
 *    positive divisor, shift/mask for a power-of-two constant, else sdiv/srem
 *    with the floor fix-up. A variable divisor of 0 gives 0 (no trap).
 *  - float DIV is fdiv; float MOD is fmod (frem).
 *  - float MIN / MAX are NaN when either operand is (ONNX Max / Relu / Clip,
 *    numpy's maximum): llvm.minimum / maximum on aarch64 (FMIN / FMAX); on
 *    x86, one MINPS / MAXPS with an operand that is never NaN, else that
 *    plus a NaN test and blend.
 *  - a*b+c on floats becomes llvm.fmuladd (contraction allowed, nothing else:
 *    the LLVM 14 C API has no fast-math flags, and NaN / inf stay IEEE).
 *  - int64 add / sub / mul are nsw: int64 values are indices that never wrap.
 *  - float -> int casts truncate toward zero as in C; x -> bool is x != 0.
 *  - a vector LOAD / STORE whose index is lane-linear with stride 1 is one
 *    unaligned vector access; stride 0 is a scalar access + splat; any other
 *    index uses llvm.masked.gather / scatter. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_llvm.h"
#include "ir/loop/range.h"

/* ---- types and constants ---- */

LLVMTypeRef kn_cg_reg_type(kn_cg_module *m, kn_dtype t, int lanes) {
  LLVMTypeRef s;
  switch (t) {
  case KN_DT_F32:
  case KN_DT_F16:
  case KN_DT_BF16:
  case KN_DT_F8E4M3FN:
  case KN_DT_F8E4M3FNUZ:
  case KN_DT_F8E5M2:
  case KN_DT_F8E8M0:
  case KN_DT_F4E2M1:
  case KN_DT_F8E5M2FNUZ: s = LLVMFloatTypeInContext(m->ctx); break;
  case KN_DT_F64: s = LLVMDoubleTypeInContext(m->ctx); break;
  case KN_DT_BOOL: s = LLVMInt1TypeInContext(m->ctx); break;
  case KN_DT_I8:
  case KN_DT_U8:
  case KN_DT_I2:
  case KN_DT_I4:
  case KN_DT_U2:
  case KN_DT_U4: s = LLVMInt8TypeInContext(m->ctx); break;
  case KN_DT_I16:
  case KN_DT_U16: s = LLVMInt16TypeInContext(m->ctx); break;
  case KN_DT_I32:
  case KN_DT_U32: s = LLVMInt32TypeInContext(m->ctx); break;
  case KN_DT_I64:
  case KN_DT_U64: s = LLVMInt64TypeInContext(m->ctx); break;
  default: KN_UNREACHABLE("invalid dtype in codegen");
  }
  return lanes > 1 ? LLVMVectorType(s, (unsigned)lanes) : s;
}

LLVMTypeRef kn_cg_mem_type(kn_cg_module *m, kn_dtype t, int lanes) {
  LLVMTypeRef s;
  if (t == KN_DT_F16 || t == KN_DT_BF16)
    s = LLVMInt16TypeInContext(m->ctx);
  else if (t == KN_DT_BOOL || kn_dtype_is_f8(t))
    s = LLVMInt8TypeInContext(m->ctx);
  else
    return kn_cg_reg_type(m, t, lanes);
  return lanes > 1 ? LLVMVectorType(s, (unsigned)lanes) : s;
}

static bool is_vector(LLVMTypeRef ty) { return LLVMGetTypeKind(ty) == LLVMVectorTypeKind; }

static LLVMValueRef splat_const(LLVMTypeRef ty, LLVMValueRef scalar) {
  if (!is_vector(ty)) return scalar;
  unsigned n = LLVMGetVectorSize(ty);
  LLVMValueRef *elems = malloc(sizeof *elems * n);
  KN_ASSERT(elems, "out of memory");
  for (unsigned i = 0; i < n; i++) elems[i] = scalar;
  LLVMValueRef v = LLVMConstVector(elems, n);
  free(elems);
  return v;
}

LLVMValueRef kn_cg_const_f(LLVMTypeRef ty, double v) {
  LLVMTypeRef s = is_vector(ty) ? LLVMGetElementType(ty) : ty;
  return splat_const(ty, LLVMConstReal(s, v));
}

LLVMValueRef kn_cg_const_i(LLVMTypeRef ty, int64_t v) {
  LLVMTypeRef s = is_vector(ty) ? LLVMGetElementType(ty) : ty;
  return splat_const(ty, LLVMConstInt(s, (unsigned long long)v, 1));
}

/* <0, s, 2s, ...> as i64 */
static LLVMValueRef lane_offsets(kn_cg_fn *f, int lanes, int64_t stride) {
  LLVMTypeRef i64 = LLVMInt64TypeInContext(f->m->ctx);
  LLVMValueRef *elems = malloc(sizeof *elems * (size_t)lanes);
  KN_ASSERT(elems, "out of memory");
  for (int i = 0; i < lanes; i++) elems[i] = LLVMConstInt(i64, (unsigned long long)(stride * i), 1);
  LLVMValueRef v = LLVMConstVector(elems, (unsigned)lanes);
  free(elems);
  return v;
}

/* A float splat narrower than the target's vector register is the low lanes
 * of a frozen full-register splat. A tile of 24 columns runs as a 16- and
 * an 8-lane piece that broadcast the same activation (schedule/finalize.c);
 * built as two splats of one (CSE'd) load, LLVM 14 broadcast it into the
 * narrow register from memory and then the wide one from that register, a
 * shuffle on an FMA port per row of the tile. As a slice of the wide splat
 * the narrow one is its low half, free; the freeze (a no-op on a value that
 * is not poison) keeps InstCombine from turning the slice back into a
 * narrow splat. */
static LLVMValueRef splat(kn_cg_fn *f, LLVMValueRef scalar, int lanes) {
  if (lanes == 1) return scalar;
  LLVMTypeRef st = LLVMTypeOf(scalar);
  int full = lanes;
  LLVMTypeKind k = LLVMGetTypeKind(st);
  if ((k == LLVMFloatTypeKind || k == LLVMDoubleTypeKind) && !LLVMIsConstant(scalar)) {
    int width = f->m->target->vector_bits / (k == LLVMFloatTypeKind ? 32 : 64);
    if (width > lanes && width % lanes == 0) full = width;
  }
  LLVMTypeRef vt = LLVMVectorType(st, (unsigned)full);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(f->m->ctx);
  LLVMValueRef v = LLVMBuildInsertElement(f->b, LLVMGetUndef(vt), scalar, LLVMConstInt(i32, 0, 0), "");
  LLVMValueRef mask = LLVMConstNull(LLVMVectorType(i32, (unsigned)full));
  v = LLVMBuildShuffleVector(f->b, v, LLVMGetUndef(vt), mask, "");
  return full == lanes ? v : kn_cg_lane_range(f, LLVMBuildFreeze(f->b, v, ""), NULL, 0, (unsigned)lanes);
}

LLVMValueRef kn_cg_call_intrinsic(kn_cg_fn *f, const char *name, LLVMTypeRef *overloads,
                                  int n_overloads, LLVMValueRef *args, int n_args) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  KN_ASSERT(id != 0, name);
  LLVMValueRef decl = LLVMGetIntrinsicDeclaration(f->m->mod, id, overloads, (size_t)n_overloads);
  LLVMTypeRef fty = LLVMIntrinsicGetType(f->m->ctx, id, overloads, (size_t)n_overloads);
  return LLVMBuildCall2(f->b, fty, decl, args, (unsigned)n_args, "");
}

LLVMValueRef kn_cg_lane_range(kn_cg_fn *f, LLVMValueRef a, LLVMValueRef b, unsigned lo, unsigned n) {
  LLVMTypeRef i32 = LLVMInt32TypeInContext(f->m->ctx);
  LLVMValueRef idx[256];
  KN_ASSERT(n <= 256, "vector too wide");
  for (unsigned i = 0; i < n; i++) idx[i] = LLVMConstInt(i32, lo + i, 0);
  return LLVMBuildShuffleVector(f->b, a, b ? b : LLVMGetUndef(LLVMTypeOf(a)), LLVMConstVector(idx, n), "");
}

LLVMValueRef kn_cg_call_libm(kn_cg_fn *f, const char *name, LLVMValueRef *args, int n_args) {
  KN_ASSERT(n_args >= 1 && n_args <= 3, "libm call arity");
  LLVMTypeRef ty = LLVMTypeOf(args[0]);
  LLVMTypeRef elem = is_vector(ty) ? LLVMGetElementType(ty) : ty;
  bool single = LLVMGetTypeKind(elem) == LLVMFloatTypeKind;
  char fname[32];
  snprintf(fname, sizeof fname, "%s%s", name, single ? "f" : "");
  LLVMTypeRef params[3] = {elem, elem, elem};
  LLVMTypeRef fty = LLVMFunctionType(elem, params, (unsigned)n_args, 0);
  LLVMValueRef fn = LLVMGetNamedFunction(f->m->mod, fname);
  if (!fn) fn = LLVMAddFunction(f->m->mod, fname, fty);
  if (!is_vector(ty)) return LLVMBuildCall2(f->b, fty, fn, args, (unsigned)n_args, "");
  unsigned lanes = LLVMGetVectorSize(ty);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(f->m->ctx);
  LLVMValueRef out = LLVMGetUndef(ty);
  for (unsigned i = 0; i < lanes; i++) {
    LLVMValueRef lane_args[3];
    LLVMValueRef idx = LLVMConstInt(i32, i, 0);
    for (int a = 0; a < n_args; a++) lane_args[a] = LLVMBuildExtractElement(f->b, args[a], idx, "");
    LLVMValueRef r = LLVMBuildCall2(f->b, fty, fn, lane_args, (unsigned)n_args, "");
    out = LLVMBuildInsertElement(f->b, out, r, idx, "");
  }
  return out;
}

/* ---- value ranges (ints) ---- */

static bool const_int_of(const kn_expr *e, int64_t *v) {
  if (e->kind == KN_E_BROADCAST) e = e->u.un.a;
  if (e->kind != KN_E_INT) return false;
  *v = e->u.ival;
  return true;
}

static const kn_cg_binding *find_var(kn_cg_fn *f, const kn_var *v) {
  for (int i = f->n_vars - 1; i >= 0; i--)
    if (f->vars[i].var == v) return &f->vars[i];
  return NULL;
}

static kn_range binding_range(void *ctx, const kn_var *v) {
  kn_cg_fn *f = ctx;
  const kn_cg_binding *b = find_var(f, v);
  if (b) return b->range;
  kn_range r = kn_range_unknown();
  if (f->kernel->batch == v) r.lo = 1, r.has_lo = true; /* the batch size is at least 1 */
  return r;
}

static kn_range memo_range(void *ctx, const kn_expr *e) { return kn_cg_range(ctx, e); }

/* Memoised per statement: shared subtrees are analysed once. */
kn_range kn_cg_range(kn_cg_fn *f, const kn_expr *e) {
  kn_cg_dag_slot *m = kn_cg_dag_slot_of(&f->memo, e);
  if (!m->has_range) {
    kn_range_env env = {.var = binding_range, .sub = memo_range, .ctx = f};
    kn_range r = kn_range_of(&env, e);
    m = kn_cg_dag_slot_of(&f->memo, e); /* the table may have grown */
    m->range = r;
    m->has_range = true;
  }
  return m->range;
}

/* ---- conversions between memory and register forms ---- */

static LLVMValueRef round_bf16_bits(kn_cg_fn *f, LLVMValueRef v) {
  /* float -> i32 bits of the bf16 value in the high half (round to nearest even) */
  LLVMTypeRef ty = LLVMTypeOf(v);
  int lanes = is_vector(ty) ? (int)LLVMGetVectorSize(ty) : 1;
  LLVMTypeRef i32 = kn_cg_reg_type(f->m, KN_DT_I32, lanes);
  LLVMValueRef bits = LLVMBuildBitCast(f->b, v, i32, "");
  LLVMValueRef odd = LLVMBuildAnd(f->b, LLVMBuildLShr(f->b, bits, kn_cg_const_i(i32, 16), ""),
                                  kn_cg_const_i(i32, 1), "");
  LLVMValueRef r = LLVMBuildAdd(f->b, bits, LLVMBuildAdd(f->b, odd, kn_cg_const_i(i32, 0x7fff), ""), "");
  LLVMValueRef quiet = LLVMBuildOr(f->b, bits, kn_cg_const_i(i32, 0x00400000), "");
  LLVMValueRef nan = LLVMBuildFCmp(f->b, LLVMRealUNO, v, v, "");
  r = LLVMBuildSelect(f->b, nan, quiet, r, "");
  return LLVMBuildAnd(f->b, r, kn_cg_const_i(i32, (int64_t)0xffff0000u), "");
}

/* float8 bits (i8 lanes) -> f32: magnitude from the exponent and mantissa
 * fields (subnormals as m * 2^(1 - bias - man_bits)), then NaN / infinity
 * codes, then the sign. Matches kn_f8_to_f32. */
static LLVMValueRef f8_decode(kn_cg_fn *f, LLVMValueRef byte, kn_dtype t, int lanes) {
  kn_f8_format fm = kn_f8_format_of(t);
  LLVMTypeRef i32 = kn_cg_reg_type(f->m, KN_DT_I32, lanes), f32 = kn_cg_reg_type(f->m, KN_DT_F32, lanes);
  LLVMValueRef c = LLVMBuildZExt(f->b, byte, i32, "");
  if (fm.e2m1) { /* e = bits 1-2, m = bit 0: e ? (2 + m) * 2^(e - 2) : m / 2; sign bit 3 */
    LLVMValueRef e = LLVMBuildAnd(f->b, LLVMBuildLShr(f->b, c, kn_cg_const_i(i32, 1), ""), kn_cg_const_i(i32, 3), "");
    LLVMValueRef m = LLVMBuildAnd(f->b, c, kn_cg_const_i(i32, 1), "");
    LLVMValueRef pow2 = LLVMBuildBitCast(
        f->b, LLVMBuildShl(f->b, LLVMBuildAdd(f->b, e, kn_cg_const_i(i32, 125), ""), kn_cg_const_i(i32, 23), ""),
        f32, "");
    LLVMValueRef normal = LLVMBuildFMul(
        f->b, LLVMBuildUIToFP(f->b, LLVMBuildAdd(f->b, m, kn_cg_const_i(i32, 2), ""), f32, ""), pow2, "");
    LLVMValueRef sub = LLVMBuildFMul(f->b, LLVMBuildUIToFP(f->b, m, f32, ""), kn_cg_const_f(f32, 0.5), "");
    LLVMValueRef mag = LLVMBuildSelect(f->b, LLVMBuildICmp(f->b, LLVMIntEQ, e, kn_cg_const_i(i32, 0), ""), sub,
                                       normal, "");
    LLVMValueRef sign =
        LLVMBuildShl(f->b, LLVMBuildAnd(f->b, c, kn_cg_const_i(i32, 8), ""), kn_cg_const_i(i32, 28), "");
    return LLVMBuildBitCast(f->b, LLVMBuildOr(f->b, LLVMBuildBitCast(f->b, mag, i32, ""), sign, ""), f32, "");
  }
  if (fm.e8m0) { /* 2^(c - 127): the f32 exponent field, except 2^-127 (subnormal) and NaN */
    LLVMValueRef v = LLVMBuildBitCast(f->b, LLVMBuildShl(f->b, c, kn_cg_const_i(i32, 23), ""), f32, "");
    LLVMValueRef tiny = LLVMBuildBitCast(f->b, kn_cg_const_i(i32, 0x00400000), f32, "");
    v = LLVMBuildSelect(f->b, LLVMBuildICmp(f->b, LLVMIntEQ, c, kn_cg_const_i(i32, 0), ""), tiny, v, "");
    LLVMValueRef nan = kn_cg_const_f(f32, NAN);
    return LLVMBuildSelect(f->b, LLVMBuildICmp(f->b, LLVMIntEQ, c, kn_cg_const_i(i32, 0xff), ""), nan, v, "");
  }
  LLVMValueRef mag = LLVMBuildAnd(f->b, c, kn_cg_const_i(i32, 0x7f), "");
  LLVMValueRef e = LLVMBuildLShr(f->b, mag, kn_cg_const_i(i32, fm.man_bits), "");
  LLVMValueRef m = LLVMBuildAnd(f->b, mag, kn_cg_const_i(i32, (1 << fm.man_bits) - 1), "");
  LLVMValueRef normal = LLVMBuildAdd(f->b, LLVMBuildShl(f->b, mag, kn_cg_const_i(i32, 23 - fm.man_bits), ""),
                                     kn_cg_const_i(i32, (int64_t)(127 - fm.bias) << 23), "");
  LLVMValueRef sub = LLVMBuildFMul(f->b, LLVMBuildUIToFP(f->b, m, f32, ""),
                                   kn_cg_const_f(f32, ldexp(1.0, 1 - fm.bias - fm.man_bits)), "");
  LLVMValueRef zero_e = LLVMBuildICmp(f->b, LLVMIntEQ, e, kn_cg_const_i(i32, 0), "");
  LLVMValueRef v = LLVMBuildSelect(f->b, zero_e, sub, LLVMBuildBitCast(f->b, normal, f32, ""), "");
  LLVMValueRef nan = kn_cg_const_f(f32, NAN);
  if (fm.has_inf) {
    LLVMValueRef top = LLVMBuildICmp(f->b, LLVMIntEQ, e, kn_cg_const_i(i32, (1 << fm.exp_bits) - 1), "");
    LLVMValueRef m0 = LLVMBuildICmp(f->b, LLVMIntEQ, m, kn_cg_const_i(i32, 0), "");
    v = LLVMBuildSelect(f->b, top, LLVMBuildSelect(f->b, m0, kn_cg_const_f(f32, INFINITY), nan, ""), v, "");
  } else if (!fm.fnuz) {
    v = LLVMBuildSelect(f->b, LLVMBuildICmp(f->b, LLVMIntEQ, mag, kn_cg_const_i(i32, 0x7f), ""), nan, v, "");
  }
  LLVMValueRef neg = LLVMBuildICmp(f->b, LLVMIntUGT, c, kn_cg_const_i(i32, 0x7f), "");
  v = LLVMBuildSelect(f->b, neg, LLVMBuildFNeg(f->b, v, ""), v, "");
  if (fm.fnuz) {
    LLVMValueRef is_nan = LLVMBuildICmp(f->b, LLVMIntEQ, c, kn_cg_const_i(i32, 0x80), "");
    v = LLVMBuildSelect(f->b, is_nan, nan, v, "");
  }
  return v;
}

/* f32 -> float8 bits (i8 lanes), nearest even, without saturation: normal
 * results round the f32 bits (the carry may bump the exponent), subnormal
 * ones scale to an integer and round with llvm.rint; past the largest finite
 * value infinity (E5M2) or NaN. Matches kn_f32_to_f8. */
static LLVMValueRef f8_encode(kn_cg_fn *f, LLVMValueRef v, kn_dtype t, int lanes) {
  kn_f8_format fm = kn_f8_format_of(t);
  LLVMTypeRef i32 = kn_cg_reg_type(f->m, KN_DT_I32, lanes), f32 = kn_cg_reg_type(f->m, KN_DT_F32, lanes);
  LLVMValueRef bits = LLVMBuildBitCast(f->b, v, i32, "");
  if (fm.e2m1) { /* count the rounding midpoints below |v| (see kn_f32_to_f4e2m1) */
    static const struct { float at; bool ge; } mid[7] = {{0.25f, false}, {0.75f, true}, {1.25f, false},
                                                          {1.75f, true},  {2.5f, false}, {3.5f, true},
                                                          {5.0f, false}};
    LLVMValueRef a = LLVMBuildBitCast(f->b, LLVMBuildAnd(f->b, bits, kn_cg_const_i(i32, 0x7fffffff), ""), f32, "");
    LLVMValueRef code = kn_cg_const_i(i32, 0);
    for (int k = 0; k < 7; k++) {
      LLVMValueRef above =
          LLVMBuildFCmp(f->b, mid[k].ge ? LLVMRealOGE : LLVMRealOGT, a, kn_cg_const_f(f32, mid[k].at), "");
      code = LLVMBuildAdd(f->b, code, LLVMBuildZExt(f->b, above, i32, ""), "");
    }
    LLVMValueRef neg = LLVMBuildOr(f->b, LLVMBuildICmp(f->b, LLVMIntSLT, bits, kn_cg_const_i(i32, 0), ""),
                                   LLVMBuildFCmp(f->b, LLVMRealUNO, v, v, ""), "");
    LLVMValueRef sign = LLVMBuildShl(f->b, LLVMBuildZExt(f->b, neg, i32, ""), kn_cg_const_i(i32, 3), "");
    code = LLVMBuildOr(f->b, code, sign, "");
    return LLVMBuildTrunc(f->b, code, kn_cg_mem_type(f->m, t, lanes), "");
  }
  if (fm.e8m0) { /* the exponent of |v|, plus one for a fraction unless at 0xfe; 0xff stays;
                    2^-127 is code 0 (see kn_f32_to_f8) */
    LLVMValueRef e = LLVMBuildAnd(f->b, LLVMBuildLShr(f->b, bits, kn_cg_const_i(i32, 23), ""),
                                  kn_cg_const_i(i32, 0xff), "");
    LLVMValueRef frac = LLVMBuildAnd(f->b, bits, kn_cg_const_i(i32, 0x7fffff), "");
    LLVMValueRef up = LLVMBuildAnd(f->b, LLVMBuildICmp(f->b, LLVMIntNE, frac, kn_cg_const_i(i32, 0), ""),
                                   LLVMBuildICmp(f->b, LLVMIntULT, e, kn_cg_const_i(i32, 0xfe), ""), "");
    LLVMValueRef code = LLVMBuildAdd(f->b, e, LLVMBuildZExt(f->b, up, i32, ""), "");
    LLVMValueRef abs = LLVMBuildAnd(f->b, bits, kn_cg_const_i(i32, 0x7fffffff), "");
    LLVMValueRef tiny = LLVMBuildICmp(f->b, LLVMIntEQ, abs, kn_cg_const_i(i32, 0x00400000), ""); /* 2^-127 */
    code = LLVMBuildSelect(f->b, tiny, kn_cg_const_i(i32, 0), code, "");
    return LLVMBuildTrunc(f->b, code, kn_cg_mem_type(f->m, t, lanes), "");
  }
  int drop = 23 - fm.man_bits;
  int64_t nan_code = fm.fnuz ? 0x80 : 0x7f;
  LLVMValueRef sign = LLVMBuildAnd(f->b, LLVMBuildLShr(f->b, bits, kn_cg_const_i(i32, 24), ""),
                                   kn_cg_const_i(i32, 0x80), "");
  LLVMValueRef abs = LLVMBuildAnd(f->b, bits, kn_cg_const_i(i32, 0x7fffffff), "");
  LLVMValueRef odd = LLVMBuildAnd(f->b, LLVMBuildLShr(f->b, abs, kn_cg_const_i(i32, drop), ""),
                                  kn_cg_const_i(i32, 1), "");
  LLVMValueRef half = kn_cg_const_i(i32, (1 << (drop - 1)) - 1);
  LLVMValueRef r = LLVMBuildAdd(f->b, abs, LLVMBuildAdd(f->b, odd, half, ""), "");
  LLVMValueRef normal = LLVMBuildSub(f->b, LLVMBuildLShr(f->b, r, kn_cg_const_i(i32, drop), ""),
                                     kn_cg_const_i(i32, (int64_t)(127 - fm.bias) << fm.man_bits), "");
  LLVMValueRef scaled = LLVMBuildFMul(f->b, LLVMBuildBitCast(f->b, abs, f32, ""),
                                      kn_cg_const_f(f32, ldexp(1.0, fm.bias - 1 + fm.man_bits)), "");
  LLVMValueRef args[2] = {scaled, kn_cg_const_f(f32, (double)(1 << fm.man_bits))};
  scaled = kn_cg_call_intrinsic(f, "llvm.minnum", &f32, 1, args, 2);
  args[0] = scaled;
  scaled = kn_cg_call_intrinsic(f, "llvm.rint", &f32, 1, args, 1);
  LLVMValueRef sub = LLVMBuildFPToUI(f->b, scaled, i32, "");
  LLVMValueRef min_normal = kn_cg_const_i(i32, (int64_t)(128 - fm.bias) << 23); /* f8 exponent field 1 */
  LLVMValueRef is_normal = LLVMBuildICmp(f->b, LLVMIntUGE, abs, min_normal, "");
  LLVMValueRef code = LLVMBuildSelect(f->b, is_normal, normal, sub, "");
  LLVMValueRef over = LLVMBuildICmp(f->b, LLVMIntUGT, code, kn_cg_const_i(i32, fm.max_code), "");
  code = LLVMBuildSelect(f->b, over, kn_cg_const_i(i32, fm.has_inf ? 0x7c : nan_code), code, "");
  LLVMValueRef signed_code = LLVMBuildOr(f->b, code, sign, "");
  if (fm.fnuz) /* no -0 */
    signed_code = LLVMBuildSelect(f->b, LLVMBuildICmp(f->b, LLVMIntEQ, code, kn_cg_const_i(i32, 0), ""), code,
                                  signed_code, "");
  LLVMValueRef is_nan = LLVMBuildFCmp(f->b, LLVMRealUNO, v, v, "");
  code = LLVMBuildSelect(f->b, is_nan, kn_cg_const_i(i32, nan_code), signed_code, "");
  return LLVMBuildTrunc(f->b, code, kn_cg_mem_type(f->m, t, lanes), "");
}

/* Rounds an f32 register value to the precision of f16 / bf16 / float8. */
static LLVMValueRef round_to(kn_cg_fn *f, LLVMValueRef v, kn_dtype t) {
  LLVMTypeRef ty = LLVMTypeOf(v);
  int lanes = is_vector(ty) ? (int)LLVMGetVectorSize(ty) : 1;
  if (kn_dtype_is_f8(t)) return f8_decode(f, f8_encode(f, v, t, lanes), t, lanes);
  if (t == KN_DT_F16) {
    LLVMTypeRef half = LLVMHalfTypeInContext(f->m->ctx);
    if (lanes > 1) half = LLVMVectorType(half, (unsigned)lanes);
    LLVMValueRef h = LLVMBuildFPTrunc(f->b, v, half, "");
    return LLVMBuildFPExt(f->b, h, kn_cg_reg_type(f->m, KN_DT_F32, lanes), "");
  }
  if (t == KN_DT_BF16)
    return LLVMBuildBitCast(f->b, round_bf16_bits(f, v), kn_cg_reg_type(f->m, KN_DT_F32, lanes), "");
  return v;
}

/* The low 2 / 4 bits of i8 lanes, sign-extended for int2 / int4
 * (kn_subbyte_wrap). */
static LLVMValueRef wrap_subbyte(kn_cg_fn *f, LLVMValueRef w, kn_dtype t) {
  LLVMTypeRef ty = LLVMTypeOf(w);
  int bits = kn_subbyte_int_bits(t);
  if (!kn_dtype_is_signed(t)) return LLVMBuildAnd(f->b, w, kn_cg_const_i(ty, (1 << bits) - 1), "");
  LLVMValueRef sh = kn_cg_const_i(ty, 8 - bits);
  return LLVMBuildAShr(f->b, LLVMBuildShl(f->b, w, sh, ""), sh, "");
}

static LLVMValueRef mem_to_reg(kn_cg_fn *f, LLVMValueRef v, kn_dtype t, int lanes) {
  LLVMTypeRef reg = kn_cg_reg_type(f->m, t, lanes);
  switch (t) {
  case KN_DT_BOOL: return LLVMBuildICmp(f->b, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
  case KN_DT_F16: {
    LLVMTypeRef half = LLVMHalfTypeInContext(f->m->ctx);
    if (lanes > 1) half = LLVMVectorType(half, (unsigned)lanes);
    return LLVMBuildFPExt(f->b, LLVMBuildBitCast(f->b, v, half, ""), reg, "");
  }
  case KN_DT_BF16: {
    LLVMTypeRef i32 = kn_cg_reg_type(f->m, KN_DT_I32, lanes);
    LLVMValueRef w = LLVMBuildShl(f->b, LLVMBuildZExt(f->b, v, i32, ""), kn_cg_const_i(i32, 16), "");
    return LLVMBuildBitCast(f->b, w, reg, "");
  }
  default: return kn_dtype_is_f8(t) ? f8_decode(f, v, t, lanes) : v;
  }
}

static LLVMValueRef reg_to_mem(kn_cg_fn *f, LLVMValueRef v, kn_dtype t, int lanes) {
  LLVMTypeRef mem = kn_cg_mem_type(f->m, t, lanes);
  switch (t) {
  case KN_DT_BOOL: return LLVMBuildZExt(f->b, v, mem, "");
  case KN_DT_F16: {
    LLVMTypeRef half = LLVMHalfTypeInContext(f->m->ctx);
    if (lanes > 1) half = LLVMVectorType(half, (unsigned)lanes);
    return LLVMBuildBitCast(f->b, LLVMBuildFPTrunc(f->b, v, half, ""), mem, "");
  }
  case KN_DT_BF16: {
    LLVMTypeRef i32 = kn_cg_reg_type(f->m, KN_DT_I32, lanes);
    LLVMValueRef hi = LLVMBuildLShr(f->b, round_bf16_bits(f, v), kn_cg_const_i(i32, 16), "");
    return LLVMBuildTrunc(f->b, hi, mem, "");
  }
  default:
    if (kn_dtype_is_subbyte_int(t)) return wrap_subbyte(f, v, t); /* as the interpreters' stores */
    return kn_dtype_is_f8(t) ? f8_encode(f, v, t, lanes) : v;
  }
}

/* ---- memory access ---- */

LLVMValueRef kn_cg_buffer_ptr(kn_cg_fn *f, const kn_buffer *buf) {
  for (int i = f->n_bufs - 1; i >= 0; i--)
    if (f->bufs[i].buf == buf) return f->bufs[i].ptr;
  KN_UNREACHABLE("buffer used outside its kernel parameters / ALLOC");
}

/* Decomposes a vector int64 index into lane i = base + i * stride, emitting
 * the scalar base. False if the index is not of that form. */
static bool lane_linear(kn_cg_fn *f, const kn_expr *e, LLVMValueRef *base, int64_t *stride) {
  LLVMValueRef ba, bb;
  int64_t sa, sb, c;
  switch (e->kind) {
  case KN_E_RAMP:
    if (!const_int_of(e->u.ramp.stride, stride)) return false;
    *base = kn_cg_expr(f, e->u.ramp.base);
    return true;
  case KN_E_BROADCAST:
    *base = kn_cg_expr(f, e->u.un.a);
    *stride = 0;
    return true;
  case KN_E_ADD:
  case KN_E_SUB:
    if (!lane_linear(f, e->u.bin.a, &ba, &sa) || !lane_linear(f, e->u.bin.b, &bb, &sb))
      return false;
    if (e->kind == KN_E_ADD) {
      if (__builtin_add_overflow(sa, sb, stride)) return false;
      *base = LLVMBuildNSWAdd(f->b, ba, bb, "");
    } else {
      if (__builtin_sub_overflow(sa, sb, stride)) return false;
      *base = LLVMBuildNSWSub(f->b, ba, bb, "");
    }
    return true;
  case KN_E_MUL: {
    const kn_expr *lin = e->u.bin.a, *k = e->u.bin.b;
    if (!const_int_of(k, &c)) {
      lin = e->u.bin.b;
      k = e->u.bin.a;
      if (!const_int_of(k, &c)) return false;
    }
    if (!lane_linear(f, lin, &ba, &sa) || __builtin_mul_overflow(sa, c, stride)) return false;
    *base = LLVMBuildNSWMul(f->b, ba, LLVMConstInt(LLVMTypeOf(ba), (unsigned long long)c, 1), "");
    return true;
  }
  default: return false;
  }
}

typedef struct access {
  int kind; /* 0 scalar, 1 contiguous vector, 2 splat of a scalar, 3 gather/scatter */
  LLVMValueRef ptr; /* scalar element pointer (kinds 0-2) or vector of pointers (3) */
} access;

static access address(kn_cg_fn *f, const kn_buffer *buf, const kn_expr *index) {
  LLVMTypeRef elem = kn_cg_mem_type(f->m, buf->dtype, 1);
  LLVMValueRef base_ptr = kn_cg_buffer_ptr(f, buf);
  access a;
  if (index->lanes == 1) {
    LLVMValueRef idx = kn_cg_expr(f, index);
    a.kind = 0;
    a.ptr = LLVMBuildInBoundsGEP2(f->b, elem, base_ptr, &idx, 1, "");
    return a;
  }
  LLVMValueRef base;
  int64_t stride;
  LLVMValueRef vidx;
  if (lane_linear(f, index, &base, &stride)) {
    if (stride == 1 || stride == 0) {
      a.kind = stride == 1 ? 1 : 2;
      a.ptr = LLVMBuildInBoundsGEP2(f->b, elem, base_ptr, &base, 1, "");
      return a;
    }
    vidx = LLVMBuildNSWAdd(f->b, splat(f, base, index->lanes), lane_offsets(f, index->lanes, stride), "");
  } else {
    vidx = kn_cg_expr(f, index);
  }
  a.kind = 3;
  a.ptr = LLVMBuildInBoundsGEP2(f->b, elem, base_ptr, &vidx, 1, "");
  return a;
}

static LLVMValueRef all_true(kn_cg_fn *f, int lanes) {
  return kn_cg_const_i(kn_cg_reg_type(f->m, KN_DT_BOOL, lanes), -1);
}

static LLVMValueRef emit_load(kn_cg_fn *f, const kn_expr *e) {
  const kn_buffer *buf = e->u.load.buffer;
  KN_ASSERT(buf, "TE load reached codegen");
  int lanes = e->lanes;
  unsigned align = (unsigned)kn_dtype_size(buf->dtype);
  LLVMTypeRef elem = kn_cg_mem_type(f->m, buf->dtype, 1);
  LLVMTypeRef vec = kn_cg_mem_type(f->m, buf->dtype, lanes);
  access a = address(f, buf, e->u.load.index);
  LLVMValueRef v;
  switch (a.kind) {
  case 0:
  case 2:
    v = LLVMBuildLoad2(f->b, elem, a.ptr, "");
    LLVMSetAlignment(v, align);
    v = mem_to_reg(f, v, buf->dtype, 1);
    return splat(f, v, lanes);
  case 1: {
    LLVMValueRef p = LLVMBuildBitCast(f->b, a.ptr, LLVMPointerType(vec, 0), "");
    v = LLVMBuildLoad2(f->b, vec, p, "");
    LLVMSetAlignment(v, align);
    return mem_to_reg(f, v, buf->dtype, lanes);
  }
  default: {
    LLVMTypeRef i32 = LLVMInt32TypeInContext(f->m->ctx);
    LLVMValueRef args[4] = {a.ptr, LLVMConstInt(i32, align, 0), all_true(f, lanes), LLVMGetUndef(vec)};
    LLVMTypeRef over[2] = {vec, LLVMTypeOf(a.ptr)};
    v = kn_cg_call_intrinsic(f, "llvm.masked.gather", over, 2, args, 4);
    return mem_to_reg(f, v, buf->dtype, lanes);
  }
  }
}

void kn_cg_prefetch(kn_cg_fn *f, const kn_buffer *buf, const kn_expr *index, int level) {
  access a = address(f, buf, index);
  KN_ASSERT(a.kind == 0, "prefetch of a vector index");
  LLVMTypeRef i8p = LLVMPointerType(LLVMInt8TypeInContext(f->m->ctx), 0), i32 = LLVMInt32TypeInContext(f->m->ctx);
  /* read (0), locality 3 (x86: prefetcht0, into L1) or 2 (prefetcht1, L2), data cache (1) */
  LLVMValueRef args[4] = {LLVMBuildBitCast(f->b, a.ptr, i8p, ""), LLVMConstInt(i32, 0, 0),
                          LLVMConstInt(i32, level <= 1 ? 3 : 2, 0),
                          LLVMConstInt(i32, 1, 0)};
  kn_cg_call_intrinsic(f, "llvm.prefetch", &i8p, 1, args, 4);
}

void kn_cg_store(kn_cg_fn *f, const kn_buffer *buf, const kn_expr *index, LLVMValueRef value) {
  int lanes = index->lanes;
  unsigned align = (unsigned)kn_dtype_size(buf->dtype);
  LLVMTypeRef vec = kn_cg_mem_type(f->m, buf->dtype, lanes);
  LLVMValueRef mem = reg_to_mem(f, value, buf->dtype, lanes);
  access a = address(f, buf, index);
  LLVMValueRef st;
  switch (a.kind) {
  case 0:
    st = LLVMBuildStore(f->b, mem, a.ptr);
    LLVMSetAlignment(st, align);
    return;
  case 2: { /* every lane writes the same element: the last lane wins */
    LLVMTypeRef i32 = LLVMInt32TypeInContext(f->m->ctx);
    LLVMValueRef last = LLVMBuildExtractElement(f->b, mem, LLVMConstInt(i32, (unsigned)lanes - 1, 0), "");
    st = LLVMBuildStore(f->b, last, a.ptr);
    LLVMSetAlignment(st, align);
    return;
  }
  case 1: {
    LLVMValueRef p = LLVMBuildBitCast(f->b, a.ptr, LLVMPointerType(vec, 0), "");
    st = LLVMBuildStore(f->b, mem, p);
    LLVMSetAlignment(st, align);
    return;
  }
  default: {
    LLVMTypeRef i32 = LLVMInt32TypeInContext(f->m->ctx);
    LLVMValueRef args[4] = {mem, a.ptr, LLVMConstInt(i32, align, 0), all_true(f, lanes)};
    LLVMTypeRef over[2] = {vec, LLVMTypeOf(a.ptr)};
    kn_cg_call_intrinsic(f, "llvm.masked.scatter", over, 2, args, 4);
    return;
  }
  }
}

/* ---- arithmetic ---- */

static bool is_float(kn_dtype t) { return kn_dtype_is_float(t); }
static bool is_unsigned(kn_dtype t) { return !kn_dtype_is_signed(t); } /* incl. bool */

/* a*b+c with contraction: fmuladd. `neg_mul` negates a*b; a caller negates c itself. */
static LLVMValueRef fmuladd(kn_cg_fn *f, const kn_expr *mul, LLVMValueRef c, bool neg_mul) {
  LLVMValueRef a = kn_cg_expr(f, mul->u.bin.a), b = kn_cg_expr(f, mul->u.bin.b);
  if (neg_mul) a = LLVMBuildFNeg(f->b, a, "");
  LLVMTypeRef ty = LLVMTypeOf(a);
  LLVMValueRef args[3] = {a, b, c};
  return kn_cg_call_intrinsic(f, "llvm.fmuladd", &ty, 1, args, 3);
}

static LLVMValueRef emit_float_addsub(kn_cg_fn *f, const kn_expr *e) {
  const kn_expr *a = e->u.bin.a, *b = e->u.bin.b;
  bool f16ish = e->dtype == KN_DT_F16 || e->dtype == KN_DT_BF16 || kn_dtype_is_f8(e->dtype);
  if (!f16ish) {
    if (e->kind == KN_E_ADD && a->kind == KN_E_MUL) return fmuladd(f, a, kn_cg_expr(f, b), false);
    if (e->kind == KN_E_ADD && b->kind == KN_E_MUL) return fmuladd(f, b, kn_cg_expr(f, a), false);
    if (e->kind == KN_E_SUB && b->kind == KN_E_MUL) return fmuladd(f, b, kn_cg_expr(f, a), true);
    if (e->kind == KN_E_SUB && a->kind == KN_E_MUL)
      return fmuladd(f, a, LLVMBuildFNeg(f->b, kn_cg_expr(f, b), ""), false);
  }
  LLVMValueRef va = kn_cg_expr(f, a), vb = kn_cg_expr(f, b);
  return e->kind == KN_E_ADD ? LLVMBuildFAdd(f->b, va, vb, "") : LLVMBuildFSub(f->b, va, vb, "");
}

static int log2_exact(int64_t c) {
  if (c <= 0 || (c & (c - 1))) return -1;
  return __builtin_ctzll((unsigned long long)c);
}

static LLVMValueRef emit_divmod(kn_cg_fn *f, const kn_expr *e, LLVMValueRef a, LLVMValueRef b) {
  bool div = e->kind == KN_E_DIV;
  LLVMTypeRef ty = LLVMTypeOf(a);
  if (is_float(e->dtype)) return div ? LLVMBuildFDiv(f->b, a, b, "") : LLVMBuildFRem(f->b, a, b, "");
  LLVMValueRef zero = LLVMConstNull(ty), one = kn_cg_const_i(ty, 1);
  int64_t c;
  bool bconst = const_int_of(e->u.bin.b, &c);
  if (bconst && c == 0) return zero; /* x / 0 and x % 0 are defined as 0 */
  if (is_unsigned(e->dtype)) {
    if (!bconst) {
      LLVMValueRef bz = LLVMBuildICmp(f->b, LLVMIntEQ, b, zero, "");
      LLVMValueRef safe = LLVMBuildSelect(f->b, bz, one, b, "");
      LLVMValueRef r = div ? LLVMBuildUDiv(f->b, a, safe, "") : LLVMBuildURem(f->b, a, safe, "");
      return LLVMBuildSelect(f->b, bz, zero, r, "");
    }
    return div ? LLVMBuildUDiv(f->b, a, b, "") : LLVMBuildURem(f->b, a, b, "");
  }
  kn_range ra = kn_cg_range(f, e->u.bin.a), rb = kn_cg_range(f, e->u.bin.b);
  bool b_positive = rb.has_lo && rb.lo > 0;
  if (ra.has_lo && ra.lo >= 0 && b_positive) /* both non-negative: floor == truncation */
    return div ? LLVMBuildUDiv(f->b, a, b, "") : LLVMBuildURem(f->b, a, b, "");
  int shift = bconst ? log2_exact(c) : -1;
  if (shift >= 0)
    return div ? LLVMBuildAShr(f->b, a, kn_cg_const_i(ty, shift), "")
               : LLVMBuildAnd(f->b, a, kn_cg_const_i(ty, c - 1), "");
  if (bconst && c == -1) return div ? LLVMBuildSub(f->b, zero, a, "") : zero;
  LLVMValueRef bz = NULL, bm1 = NULL, safe = b;
  if (!bconst && !b_positive) {
    /* guard the trapping cases: b == 0 and b == -1 (INT_MIN / -1) */
    bz = LLVMBuildICmp(f->b, LLVMIntEQ, b, zero, "");
    bm1 = LLVMBuildICmp(f->b, LLVMIntEQ, b, kn_cg_const_i(ty, -1), "");
    safe = LLVMBuildSelect(f->b, LLVMBuildOr(f->b, bz, bm1, ""), one, b, "");
  }
  LLVMValueRef q = LLVMBuildSDiv(f->b, a, safe, ""), r = LLVMBuildSRem(f->b, a, safe, "");
  /* floor fix-up: a non-zero remainder whose sign differs from b's */
  LLVMValueRef nz = LLVMBuildICmp(f->b, LLVMIntNE, r, zero, "");
  LLVMValueRef sign = LLVMBuildICmp(f->b, LLVMIntSLT, LLVMBuildXor(f->b, r, safe, ""), zero, "");
  LLVMValueRef adj = LLVMBuildAnd(f->b, nz, sign, "");
  LLVMValueRef res = div ? LLVMBuildSub(f->b, q, LLVMBuildZExt(f->b, adj, ty, ""), "")
                         : LLVMBuildAdd(f->b, r, LLVMBuildSelect(f->b, adj, safe, zero, ""), "");
  if (bz) {
    LLVMValueRef special = div ? LLVMBuildSub(f->b, zero, a, "") : zero;
    res = LLVMBuildSelect(f->b, bm1, special, res, "");
    res = LLVMBuildSelect(f->b, bz, zero, res, "");
  }
  return res;
}

/* True when float expression e is never NaN: a literal other than NaN, a
 * broadcast of one, or a MIN / MAX of two such operands. */
static bool never_nan(const kn_expr *e) {
  switch (e->kind) {
  case KN_E_FLOAT: /* a literal rounds to its type as emitted: an f8 one may overflow to NaN */
    return !isnan(e->u.fval) && (e->dtype == KN_DT_F32 || e->dtype == KN_DT_F64 || e->dtype == KN_DT_F16 ||
                                 e->dtype == KN_DT_BF16);
  case KN_E_BROADCAST: return never_nan(e->u.un.a);
  case KN_E_MIN:
  case KN_E_MAX: return never_nan(e->u.bin.a) && never_nan(e->u.bin.b);
  default: return false;
  }
}

/* MIN or MAX (e's kind and dtype) of a and b; sure_a / sure_b: that operand
 * is never NaN. Float MIN / MAX give NaN when either operand is NaN: aarch64
 * has that instruction (FMAX, llvm.maximum); x86 has none (nor does LLVM 14
 * lower llvm.maximum there). MAXPS(s, u) is s > u ? s : u, NaN when u is (an
 * ordered compare is false): one instruction when s is never NaN, as the
 * bounds of Relu and Clip are (LLVM's llvm.maxnum had cost a max, a NaN test
 * and a blend per vector). Otherwise a NaN test on the first operand and a
 * blend follow. */
static LLVMValueRef emit_minmax(kn_cg_fn *f, const kn_expr *e, LLVMValueRef a, LLVMValueRef b, bool sure_a,
                                bool sure_b) {
  bool is_min = e->kind == KN_E_MIN;
  if (is_float(e->dtype)) {
    if (f->m->target->arch == KN_ARCH_AARCH64) {
      LLVMTypeRef ty = LLVMTypeOf(a);
      LLVMValueRef args[2] = {a, b};
      return kn_cg_call_intrinsic(f, is_min ? "llvm.minimum" : "llvm.maximum", &ty, 1, args, 2);
    }
    if (sure_a) { /* b the sure one: b > a ? b : a yields a when a is NaN */
      LLVMValueRef t = a;
      a = b, b = t;
    }
    LLVMValueRef pick = LLVMBuildFCmp(f->b, is_min ? LLVMRealOLT : LLVMRealOGT, b, a, "");
    LLVMValueRef r = LLVMBuildSelect(f->b, pick, b, a, "");
    if (sure_a || sure_b) return r;
    LLVMValueRef b_nan = LLVMBuildFCmp(f->b, LLVMRealUNO, b, b, "");
    return LLVMBuildSelect(f->b, b_nan, b, r, "");
  }
  LLVMIntPredicate p = is_unsigned(e->dtype) ? (is_min ? LLVMIntULT : LLVMIntUGT)
                                             : (is_min ? LLVMIntSLT : LLVMIntSGT);
  return LLVMBuildSelect(f->b, LLVMBuildICmp(f->b, p, a, b, ""), a, b, "");
}

static LLVMValueRef emit_compare(kn_cg_fn *f, const kn_expr *e) {
  kn_dtype t = e->u.bin.a->dtype;
  LLVMValueRef a = kn_cg_expr(f, e->u.bin.a), b = kn_cg_expr(f, e->u.bin.b);
  if (is_float(t)) {
    static const LLVMRealPredicate fp[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT,
                                           LLVMRealOLE, LLVMRealOGT, LLVMRealOGE};
    return LLVMBuildFCmp(f->b, fp[e->kind - KN_E_EQ], a, b, "");
  }
  static const LLVMIntPredicate sp[] = {LLVMIntEQ, LLVMIntNE, LLVMIntSLT,
                                        LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
  static const LLVMIntPredicate up[] = {LLVMIntEQ, LLVMIntNE, LLVMIntULT,
                                        LLVMIntULE, LLVMIntUGT, LLVMIntUGE};
  return LLVMBuildICmp(f->b, (is_unsigned(t) ? up : sp)[e->kind - KN_E_EQ], a, b, "");
}

/* f64 -> f32 rounded to odd: truncated toward zero, with the lowest bit set
 * when the value was inexact. Rounding that once more to f16 (11 bits <= 24
 * - 2) gives the correctly rounded f64 -> f16, with no double-rounding error
 * and without LLVM's fptrunc double -> half, which is a call to
 * __truncdfhf2 on x86 without AVX512-FP16 (LLVM 14 and libgcc disagree on
 * how it returns, so the caller reads back a wrong value). */
static LLVMValueRef f64_to_f32_odd(kn_cg_fn *f, LLVMValueRef v, int lanes) {
  LLVMTypeRef f32 = kn_cg_reg_type(f->m, KN_DT_F32, lanes), i32 = kn_cg_reg_type(f->m, KN_DT_I32, lanes);
  LLVMValueRef t = LLVMBuildFPTrunc(f->b, v, f32, "");
  LLVMValueRef back = LLVMBuildFPExt(f->b, t, LLVMTypeOf(v), "");
  LLVMValueRef zero = LLVMConstNull(LLVMTypeOf(v));
  LLVMValueRef inexact = LLVMBuildFCmp(f->b, LLVMRealONE, back, v, "");
  LLVMValueRef up = LLVMBuildAnd(f->b, LLVMBuildFCmp(f->b, LLVMRealOGT, v, zero, ""),
                                 LLVMBuildFCmp(f->b, LLVMRealOGT, back, v, ""), "");
  LLVMValueRef down = LLVMBuildAnd(f->b, LLVMBuildFCmp(f->b, LLVMRealOLT, v, zero, ""),
                                   LLVMBuildFCmp(f->b, LLVMRealOLT, back, v, ""), "");
  LLVMValueRef away = LLVMBuildOr(f->b, up, down, ""); /* rounded away from zero */
  LLVMValueRef bits = LLVMBuildBitCast(f->b, t, i32, "");
  bits = LLVMBuildSub(f->b, bits, LLVMBuildZExt(f->b, away, i32, ""), ""); /* one step toward zero */
  bits = LLVMBuildOr(f->b, bits, LLVMBuildZExt(f->b, inexact, i32, ""), "");
  return LLVMBuildBitCast(f->b, bits, f32, "");
}

/* [*lo, *hi]: where e's values other than NaN lie, as far as constant MIN /
 * MAX bounds say; (-inf, inf) when nothing does. A literal counts as emitted:
 * rounded to float32 (2147483647.0 is 2^31 there); f16 / bf16 / f8 ones are
 * not trusted. */
static void float_range(const kn_expr *e, double *lo, double *hi) {
  *lo = -INFINITY;
  *hi = INFINITY;
  if (!e) return;
  double alo, ahi, blo, bhi;
  switch (e->kind) {
  case KN_E_FLOAT:
    if (e->dtype == KN_DT_F64 && !isnan(e->u.fval)) *lo = *hi = e->u.fval;
    if (e->dtype == KN_DT_F32 && !isnan(e->u.fval)) *lo = *hi = (double)(float)e->u.fval;
    return;
  case KN_E_BROADCAST: float_range(e->u.un.a, lo, hi); return;
  case KN_E_MIN:
  case KN_E_MAX:
    float_range(e->u.bin.a, &alo, &ahi);
    float_range(e->u.bin.b, &blo, &bhi);
    *lo = e->kind == KN_E_MIN ? fmin(alo, blo) : fmax(alo, blo);
    *hi = e->kind == KN_E_MIN ? fmin(ahi, bhi) : fmax(ahi, bhi);
    return;
  default: return;
  }
}

/* Float -> integer as the interpreters convert (kn_f2i64_sat, base/base.h):
 * NaN 0, beyond int64 saturated, else truncated toward zero, then the low
 * bits of a narrower type; uint64 saturates to [0, 2^64 - 1]. fptosi alone
 * is poison for NaN and values out of range, so each form converts, then
 * selects the rule's value where the operand is out of the conversion's
 * range (a select never returns its unchosen poison). LLVM 14 scalarises
 * llvm.fptosi.sat and float -> int64 vectors without AVX-512, so types of
 * up to 32 bits never convert at int64:
 * - an operand that constant MIN / MAX bounds inside int32 (QuantizeLinear's
 *   clamp): one int32 conversion and a NaN select;
 * - else int32 conversion where |t| < 2^31 (t = trunc(v)), and elsewhere
 *   t mod 2^32 computed in the float type (exact: such a t is a multiple of
 *   its ulp, and so is the remainder, below 2^32), moved into [-2^31, 2^31)
 *   and converted; then the saturated ends and NaN;
 * - int64 / uint64 convert at 64 bits. */
static LLVMValueRef narrow_float_to_int(kn_cg_fn *f, LLVMValueRef v, const kn_expr *src, kn_dtype to, int lanes) {
  LLVMTypeRef fty = LLVMTypeOf(v), i32 = kn_cg_reg_type(f->m, KN_DT_I32, lanes);
  LLVMValueRef nan = LLVMBuildFCmp(f->b, LLVMRealUNO, v, v, ""), zero = kn_cg_const_i(i32, 0), r;
  double rlo, rhi;
  float_range(src, &rlo, &rhi);
  if (rlo >= -2147483648.0 && rhi < 2147483648.0) {
    r = LLVMBuildFPToSI(f->b, v, i32, "");
  } else {
    LLVMValueRef t = kn_cg_call_intrinsic(f, "llvm.trunc", &fty, 1, &v, 1);
    LLVMValueRef k = LLVMBuildFMul(f->b, t, kn_cg_const_f(fty, 0x1p-32), "");
    k = kn_cg_call_intrinsic(f, "llvm.floor", &fty, 1, &k, 1);
    LLVMValueRef m = LLVMBuildFSub(f->b, t, LLVMBuildFMul(f->b, k, kn_cg_const_f(fty, 0x1p32), ""), "");
    LLVMValueRef high = LLVMBuildFCmp(f->b, LLVMRealOGE, m, kn_cg_const_f(fty, 0x1p31), "");
    m = LLVMBuildSelect(f->b, high, LLVMBuildFSub(f->b, m, kn_cg_const_f(fty, 0x1p32), ""), m, "");
    LLVMValueRef small = LLVMBuildAnd(f->b, LLVMBuildFCmp(f->b, LLVMRealOGE, t, kn_cg_const_f(fty, -0x1p31), ""),
                                      LLVMBuildFCmp(f->b, LLVMRealOLT, t, kn_cg_const_f(fty, 0x1p31), ""), "");
    r = LLVMBuildSelect(f->b, small, LLVMBuildFPToSI(f->b, t, i32, ""), LLVMBuildFPToSI(f->b, m, i32, ""), "");
    /* int64's ends: INT64_MAX's low bits are all ones, INT64_MIN's zero */
    r = LLVMBuildSelect(f->b, LLVMBuildFCmp(f->b, LLVMRealOGE, t, kn_cg_const_f(fty, 0x1p63), ""),
                        kn_cg_const_i(i32, -1), r, "");
    r = LLVMBuildSelect(f->b, LLVMBuildFCmp(f->b, LLVMRealOLT, t, kn_cg_const_f(fty, -0x1p63), ""), zero, r, "");
  }
  r = LLVMBuildSelect(f->b, nan, zero, r, "");
  return kn_dtype_size(to) == 4 ? r : LLVMBuildTrunc(f->b, r, kn_cg_reg_type(f->m, to, lanes), "");
}

static LLVMValueRef float_to_int(kn_cg_fn *f, LLVMValueRef v, const kn_expr *src, kn_dtype to, int lanes) {
  if (kn_dtype_size(to) <= 4) return narrow_float_to_int(f, v, src, to, lanes);
  LLVMTypeRef fty = LLVMTypeOf(v), i64 = kn_cg_reg_type(f->m, KN_DT_I64, lanes);
  bool u64 = to == KN_DT_U64;
  LLVMValueRef lo = kn_cg_const_f(fty, u64 ? -1.0 : -0x1p63), hi = kn_cg_const_f(fty, u64 ? 0x1p64 : 0x1p63);
  LLVMValueRef fits = LLVMBuildAnd(f->b, LLVMBuildFCmp(f->b, u64 ? LLVMRealOGT : LLVMRealOGE, v, lo, ""),
                                   LLVMBuildFCmp(f->b, LLVMRealOLT, v, hi, ""), "");
  LLVMValueRef conv = u64 ? LLVMBuildFPToUI(f->b, v, i64, "") : LLVMBuildFPToSI(f->b, v, i64, "");
  LLVMValueRef over = LLVMBuildFCmp(f->b, LLVMRealOGT, v, kn_cg_const_f(fty, 0.0), ""); /* else below or NaN */
  LLVMValueRef sat = LLVMBuildSelect(f->b, over, kn_cg_const_i(i64, u64 ? -1 : INT64_MAX), /* all ones */
                                     kn_cg_const_i(i64, 0), "");
  if (!u64) /* below int64: INT64_MIN; NaN: 0 */
    sat = LLVMBuildSelect(f->b, LLVMBuildFCmp(f->b, LLVMRealOLT, v, kn_cg_const_f(fty, 0.0), ""),
                          kn_cg_const_i(i64, INT64_MIN), sat, "");
  return LLVMBuildSelect(f->b, fits, conv, sat, "");
}

static LLVMValueRef emit_cast(kn_cg_fn *f, LLVMValueRef v, const kn_expr *src, kn_dtype from, kn_dtype to,
                              int lanes) {
  if (from == to) return v;
  LLVMTypeRef dst = kn_cg_reg_type(f->m, to, lanes);
  if (kn_dtype_is_subbyte_int(to) && from != KN_DT_BOOL) {
    /* via int32 (floats truncate toward zero), then the low 2 / 4 bits of
       its low byte, sign-extended for int2 / int4 (kn_subbyte_wrap) */
    return wrap_subbyte(f, LLVMBuildTrunc(f->b, emit_cast(f, v, src, from, KN_DT_I32, lanes), dst, ""), to);
  }
  if (is_float(from)) {
    if (to == KN_DT_BOOL)
      return LLVMBuildFCmp(f->b, LLVMRealUNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
    if (kn_dtype_is_int(to)) return float_to_int(f, v, src, to, lanes);
    if (to == KN_DT_F64) return from == KN_DT_F64 ? v : LLVMBuildFPExt(f->b, v, dst, "");
    if (from == KN_DT_F64 && to == KN_DT_F16) return round_to(f, f64_to_f32_odd(f, v, lanes), to);
    if (from == KN_DT_F64) v = LLVMBuildFPTrunc(f->b, v, dst, "");
    return round_to(f, v, to); /* to f32 / f16 / bf16 */
  }
  /* from an integer or bool */
  if (is_float(to)) {
    LLVMValueRef r = is_unsigned(from) ? LLVMBuildUIToFP(f->b, v, dst, "") : LLVMBuildSIToFP(f->b, v, dst, "");
    return round_to(f, r, to);
  }
  if (to == KN_DT_BOOL) return LLVMBuildICmp(f->b, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
  size_t sf = from == KN_DT_BOOL ? 0 : kn_dtype_size(from), st = kn_dtype_size(to);
  if (sf == st) return v;
  if (sf > st) return LLVMBuildTrunc(f->b, v, dst, "");
  return is_unsigned(from) ? LLVMBuildZExt(f->b, v, dst, "") : LLVMBuildSExt(f->b, v, dst, "");
}

/* Horizontal fold of a vector by halving (the tree order of reassociation). */
static LLVMValueRef vreduce(kn_cg_fn *f, kn_fn fn, kn_dtype t, LLVMValueRef v) {
  LLVMTypeRef ty = LLVMTypeOf(v);
  if (!is_vector(ty)) return v;
  LLVMTypeRef i32 = LLVMInt32TypeInContext(f->m->ctx);
  unsigned n = LLVMGetVectorSize(ty);
  kn_expr_kind op = fn == KN_FN_VREDUCE_ADD ? KN_E_ADD : fn == KN_FN_VREDUCE_MAX ? KN_E_MAX : KN_E_MIN;
  kn_expr probe = {.kind = op, .dtype = t, .lanes = 1};
  while (n > 1 && !(n & 1)) {
    unsigned h = n / 2;
    LLVMValueRef lo = kn_cg_lane_range(f, v, NULL, 0, h), hi = kn_cg_lane_range(f, v, NULL, h, h);
    if (op == KN_E_ADD)
      v = is_float(t) ? LLVMBuildFAdd(f->b, lo, hi, "") : LLVMBuildAdd(f->b, lo, hi, "");
    else
      v = emit_minmax(f, &probe, lo, hi, false, false);
    n = h;
  }
  LLVMValueRef acc = LLVMBuildExtractElement(f->b, v, LLVMConstInt(i32, 0, 0), "");
  for (unsigned i = 1; i < n; i++) { /* odd widths: finish serially */
    LLVMValueRef x = LLVMBuildExtractElement(f->b, v, LLVMConstInt(i32, i, 0), "");
    if (op == KN_E_ADD)
      acc = is_float(t) ? LLVMBuildFAdd(f->b, acc, x, "") : LLVMBuildAdd(f->b, acc, x, "");
    else
      acc = emit_minmax(f, &probe, acc, x, false, false);
  }
  return acc;
}

static LLVMValueRef emit_call(kn_cg_fn *f, const kn_expr *e) {
  kn_fn fn = e->u.call.fn;
  LLVMValueRef args[4];
  int n = e->u.call.n;
  KN_ASSERT(n >= 1 && n <= 3, "intrinsic arity");
  for (int i = 0; i < n; i++) args[i] = kn_cg_expr(f, e->u.call.args[i]);
  if (fn == KN_FN_VREDUCE_ADD || fn == KN_FN_VREDUCE_MAX || fn == KN_FN_VREDUCE_MIN)
    return vreduce(f, fn, e->dtype, args[0]);
  if (is_float(e->dtype)) {
    LLVMValueRef r = kn_cg_math(f, fn, args, n);
    return round_to(f, r, e->dtype);
  }
  /* integer intrinsics */
  switch (fn) {
  case KN_FN_ABS: {
    if (is_unsigned(e->dtype)) return args[0];
    LLVMTypeRef ty = LLVMTypeOf(args[0]);
    LLVMValueRef a[2] = {args[0], LLVMConstInt(LLVMInt1TypeInContext(f->m->ctx), 0, 0)};
    return kn_cg_call_intrinsic(f, "llvm.abs", &ty, 1, a, 2);
  }
  case KN_FN_FLOOR:
  case KN_FN_CEIL:
  case KN_FN_ROUND: return args[0];
  case KN_FN_FMA: return LLVMBuildAdd(f->b, LLVMBuildMul(f->b, args[0], args[1], ""), args[2], "");
  default: KN_UNREACHABLE("float intrinsic applied to an integer");
  }
}

static LLVMValueRef emit(kn_cg_fn *f, const kn_expr *e) {
  kn_cg_module *m = f->m;
  switch (e->kind) {
  case KN_E_INT: {
    LLVMValueRef v = LLVMConstInt(kn_cg_reg_type(m, e->dtype, 1), (unsigned long long)e->u.ival,
                                  kn_dtype_is_signed(e->dtype));
    return e->lanes > 1 ? splat_const(kn_cg_reg_type(m, e->dtype, e->lanes), v) : v;
  }
  case KN_E_FLOAT: {
    double v = e->u.fval;
    if (e->dtype == KN_DT_F16) v = kn_f16_to_f32(kn_f32_to_f16((float)v));
    if (e->dtype == KN_DT_BF16) v = kn_bf16_to_f32(kn_f32_to_bf16((float)v));
    if (kn_dtype_is_f8(e->dtype)) v = kn_f8_to_f32(e->dtype, kn_f32_to_f8(e->dtype, (float)v));
    return kn_cg_const_f(kn_cg_reg_type(m, e->dtype, e->lanes), v);
  }
  case KN_E_VAR: {
    const kn_cg_binding *b = find_var(f, e->u.var);
    if (b) return b->value;
    KN_ASSERT(f->kernel->batch == e->u.var, "variable used outside its loop / let");
    return f->batch;
  }
  case KN_E_ADD:
  case KN_E_SUB:
  case KN_E_MUL: {
    if (is_float(e->dtype) && e->kind != KN_E_MUL) return emit_float_addsub(f, e);
    LLVMValueRef a = kn_cg_expr(f, e->u.bin.a), b = kn_cg_expr(f, e->u.bin.b);
    if (is_float(e->dtype)) return LLVMBuildFMul(f->b, a, b, "");
    bool nsw = e->dtype == KN_DT_I64;
    switch (e->kind) {
    case KN_E_ADD: return nsw ? LLVMBuildNSWAdd(f->b, a, b, "") : LLVMBuildAdd(f->b, a, b, "");
    case KN_E_SUB: return nsw ? LLVMBuildNSWSub(f->b, a, b, "") : LLVMBuildSub(f->b, a, b, "");
    default: return nsw ? LLVMBuildNSWMul(f->b, a, b, "") : LLVMBuildMul(f->b, a, b, "");
    }
  }
  case KN_E_DIV:
  case KN_E_MOD: return emit_divmod(f, e, kn_cg_expr(f, e->u.bin.a), kn_cg_expr(f, e->u.bin.b));
  case KN_E_MIN:
  case KN_E_MAX:
    return emit_minmax(f, e, kn_cg_expr(f, e->u.bin.a), kn_cg_expr(f, e->u.bin.b), never_nan(e->u.bin.a),
                       never_nan(e->u.bin.b));
  case KN_E_EQ:
  case KN_E_NE:
  case KN_E_LT:
  case KN_E_LE:
  case KN_E_GT:
  case KN_E_GE: return emit_compare(f, e);
  case KN_E_AND: return LLVMBuildAnd(f->b, kn_cg_expr(f, e->u.bin.a), kn_cg_expr(f, e->u.bin.b), "");
  case KN_E_OR: return LLVMBuildOr(f->b, kn_cg_expr(f, e->u.bin.a), kn_cg_expr(f, e->u.bin.b), "");
  case KN_E_NOT: return LLVMBuildNot(f->b, kn_cg_expr(f, e->u.un.a), "");
  case KN_E_SELECT:
    return LLVMBuildSelect(f->b, kn_cg_expr(f, e->u.sel.cond), kn_cg_expr(f, e->u.sel.t),
                           kn_cg_expr(f, e->u.sel.f), "");
  case KN_E_CAST:
    return emit_cast(f, kn_cg_expr(f, e->u.un.a), e->u.un.a, e->u.un.a->dtype, e->dtype, e->lanes);
  case KN_E_CALL: return emit_call(f, e);
  case KN_E_LOAD: return emit_load(f, e);
  case KN_E_RAMP: {
    LLVMValueRef base = splat(f, kn_cg_expr(f, e->u.ramp.base), e->lanes);
    int64_t s;
    if (const_int_of(e->u.ramp.stride, &s))
      return LLVMBuildNSWAdd(f->b, base, lane_offsets(f, e->lanes, s), "");
    LLVMValueRef stride = splat(f, kn_cg_expr(f, e->u.ramp.stride), e->lanes);
    return LLVMBuildNSWAdd(f->b, base, LLVMBuildNSWMul(f->b, stride, lane_offsets(f, e->lanes, 1), ""), "");
  }
  case KN_E_BROADCAST: return splat(f, kn_cg_expr(f, e->u.un.a), e->lanes);
  case KN_E_REDUCE: KN_UNREACHABLE("REDUCE reached codegen (TE only)");
  }
  KN_UNREACHABLE("unknown expression kind");
}

LLVMValueRef kn_cg_expr(kn_cg_fn *f, const kn_expr *e) {
  const kn_cg_dag_slot *known = kn_cg_dag_find(&f->memo, e);
  if (known && known->value) return known->value;
  LLVMValueRef v = emit(f, e);
  kn_cg_dag_slot_of(&f->memo, e)->value = v;
  return v;
}
