/* cuda_f8.h — float8 / float4e2m1 / float8e8m0 bits <-> float32 for the
 * generated CUDA C: codegen/cuda_expr.c embeds this text verbatim after the
 * prelude of a translation unit where some kernel loads, stores or rounds
 * one of these types (kn_cu_f8_text, through rt/bin2c.cmake).
 *
 * Bit for bit as base/base.h's kn_f8_to_f32 / kn_f32_to_f8 (the rules of
 * every CPU back end and of the interpreters), NaN results as their quiet
 * NaN 0x7fc00000 included. Plain integer arithmetic on the bits: no header
 * (NVRTC has none), no dependence on the rounding mode or on flushing
 * subnormals to zero.
 *
 * Valid C and CUDA alike, so that tests/codegen/test_cuda_f8.c compiles and
 * checks this very text on the host. The includer defines KN_CU (the
 * storage class: `static __device__ __forceinline__` on the GPU) and
 *   unsigned int kn_cu_as_uint(float)   float kn_cu_as_float(unsigned int)
 * (the bits of a float and back). Codes are bytes; float4e2m1 takes one byte
 * per element, its code in the low nibble (base.h), the high nibble ignored. */

/* float8 with eb exponent bits, mb mantissa bits, bias; fnuz: 0x80 is the
 * only NaN (no -0, no infinity); inf: E5M2, whose all-ones exponent is
 * infinity or NaN; otherwise (E4M3FN) 0x7f / 0xff are NaN. */
KN_CU float kn_cu_f82f(unsigned char b, int eb, int mb, int bias, int fnuz, int inf) {
  unsigned int sign = (unsigned int)(b & 0x80u) << 24, m = b & ((1u << mb) - 1u);
  int e = (b >> mb) & ((1 << eb) - 1), top = (1 << eb) - 1;
  if ((fnuz && b == 0x80u) || (!fnuz && !inf && (b & 0x7fu) == 0x7fu) || (inf && e == top && m != 0u))
    return kn_cu_as_float(0x7fc00000u);
  if (inf && e == top) return kn_cu_as_float(sign | 0x7f800000u);
  if (e == 0) { /* subnormal m * 2^(1 - bias - mb): normalised, as f32 is normal here */
    if (m == 0u) return kn_cu_as_float(sign);
    for (e = 1; !(m & (1u << mb)); e--) m <<= 1;
  }
  return kn_cu_as_float(sign | ((unsigned int)(e - bias + 127) << 23) | ((m & ((1u << mb) - 1u)) << (23 - mb)));
}

/* f32 -> float8 (mb, bias, fnuz, inf as above; maxc: the largest finite
 * code), nearest even, no saturation: past maxc infinity (inf) or NaN. */
KN_CU unsigned char kn_cu_f2f8(float x, int mb, int bias, int fnuz, int inf, unsigned int maxc) {
  unsigned int bits = kn_cu_as_uint(x), a = bits & 0x7fffffffu, sign = (bits >> 24) & 0x80u, code;
  unsigned int nan = fnuz ? 0x80u : 0x7fu;
  int drop = 23 - mb, e8 = (int)(a >> 23) - 127 + bias; /* the float8 exponent field, if normal */
  if (a > 0x7f800000u) return (unsigned char)nan;
  if (a == 0x7f800000u) {
    code = 0xffu; /* infinity: overflows below */
  } else if (e8 >= 1) { /* drop the low bits, nearest even; a carry may bump the exponent */
    code = ((a + (1u << (drop - 1)) - 1u + ((a >> drop) & 1u)) >> drop) - ((unsigned int)(127 - bias) << mb);
  } else { /* subnormal: |x| * 2^(bias - 1 + mb) = mant * 2^-shift, rounded to an integer, nearest even */
    int e32 = (int)(a >> 23);
    unsigned int mant = e32 ? (a & 0x7fffffu) | 0x800000u : a;
    int shift = 151 - bias - mb - (e32 ? e32 : 1);
    if (shift > 31) {
      code = 0u; /* mant < 2^24: below 2^-8 */
    } else {
      unsigned int rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
      code = mant >> shift;
      code += (rem > half || (rem == half && (code & 1u))) ? 1u : 0u;
    }
  }
  if (code > maxc) return (unsigned char)(inf ? (sign | 0x7cu) : nan);
  if (code == 0u && fnuz) return 0;
  return (unsigned char)(sign | code);
}

/* float8e8m0: code b is 2^(b - 127) (code 0 the f32 subnormal 2^-127),
 * 0xff NaN. */
KN_CU float kn_cu_e8m02f(unsigned char b) {
  return kn_cu_as_float(b == 0xffu ? 0x7fc00000u : b ? (unsigned int)b << 23 : 0x00400000u);
}

/* f32 -> float8e8m0: the exponent of |x|, one more for a nonzero fraction
 * below 0xfe; infinity and NaN give 0xff; 2^-127 gives code 0, whose value
 * it is (base.h). */
KN_CU unsigned char kn_cu_f2e8m0(float x) {
  unsigned int bits = kn_cu_as_uint(x), e = (bits >> 23) & 0xffu;
  if ((bits & 0x7fffffffu) == 0x00400000u) return 0;
  return (unsigned char)(e == 0xffu ? 0xffu : e + ((bits & 0x7fffffu) != 0u && e < 0xfeu));
}

/* float4e2m1: sign bit 3, exponent bits 1-2 (bias 1), mantissa bit 0:
 * 0, 0.5, 1, 1.5, 2, 3, 4, 6. */
KN_CU float kn_cu_e2m12f(unsigned char b) {
  unsigned int e = (b >> 1) & 3u, m = b & 1u, sign = (unsigned int)(b & 8u) << 28;
  return kn_cu_as_float(sign | (e ? ((e + 126u) << 23) | (m << 22) : m * 0x3f000000u));
}

/* f32 -> float4e2m1: nearest even by counting the midpoints below |x|, as
 * bits (positive floats order as their bits): '>' where the lower
 * neighbour's code is even, '>=' where the upper one's is; above 5 is 6
 * (saturation); NaN is -0 (code 8), as kn_f32_to_f4e2m1. */
KN_CU unsigned char kn_cu_f2e2m1(float x) {
  unsigned int bits = kn_cu_as_uint(x), a = bits & 0x7fffffffu, code;
  if (a > 0x7f800000u) return 8;
  code = (a > 0x3e800000u) + (a >= 0x3f400000u) + (a > 0x3fa00000u) + (a >= 0x3fe00000u) + (a > 0x40200000u) +
         (a >= 0x40600000u) + (a > 0x40a00000u);
  return (unsigned char)(code | ((bits >> 28) & 8u));
}
