/* pass_decompose_quant.c — quantization ops as primitive ops (the rewrites
 * of ir/passes/pass_decompose.c; builder in rewrite.h). Integer semantics are
 * exact: rounding is Round (half to even) and saturation a clamp to the
 * output type's range before the Cast.
 *
 *   QuantizeLinear         Cast(clamp(Round(x / scale) + zero_point))
 *   DequantizeLinear       (float(x) - float(zero_point)) * scale, in float32
 *   DynamicQuantizeLinear  scale = (max(x, 0) - min(x, 0)) / 255, zero point
 *                          Round(clamp(-min / scale)), then QuantizeLinear
 *   MatMulInteger          MatMul of int32(a) - a_zp and int32(b) - b_zp
 *   QLinearMatMul          the same, times a_scale * b_scale / y_scale in
 *                          float64, + y_zp, rounded and saturated
 *   ConvInteger            Conv in float64 (exact for these products) of the
 *                          zero-point-shifted operands, cast to int32
 *   QLinearConv            the same with bias, scaled as QLinearMatMul
 * Scales and zero points are per tensor, per axis (1-D along `axis`) or, for
 * (De)QuantizeLinear, blocked (`block_size` along `axis`); they are brought
 * to x's rank by Unsqueeze, or by a Gather repeating each block. The
 * quantized types are the 2-, 4-, 8- and 16-bit integers (int2 ... uint4 are one
 * byte per element, see base/base.h) and, for (De)QuantizeLinear, the float8
 * formats and float4e2m1 (not float8e8m0):
 *   QuantizeLinear to a float type  Cast(x / scale [+ zero_point]), the Cast
 *                          rounding to nearest even (saturate copied; as
 *                          ONNX's reference, float8 ignores the zero point,
 *                          float4e2m1 adds it); others get a diagnostic. */
#include <stdlib.h>

#include "ir/passes/decompose.h"
#include "ir/shape/shape_infer.h"

static bool quant_type(kn_dtype t, double *lo, double *hi) {
  switch (t) {
  case KN_DT_U8: *lo = 0, *hi = 255; return true;
  case KN_DT_I8: *lo = -128, *hi = 127; return true;
  case KN_DT_U16: *lo = 0, *hi = 65535; return true;
  case KN_DT_I16: *lo = -32768, *hi = 32767; return true;
  case KN_DT_U4: *lo = 0, *hi = 15; return true;
  case KN_DT_I4: *lo = -8, *hi = 7; return true;
  case KN_DT_U2: *lo = 0, *hi = 3; return true;
  case KN_DT_I2: *lo = -2, *hi = 1; return true;
  default: return false;
  }
}

/* Parameter p (a scale or zero point) of x, brought to broadcast against x:
 * per-tensor as is, 1-D along `axis`, or blocked along `axis`. */
static int align_param(kn_rw *c, int p, int x, const char *what) {
  const kn_node *n = &c->g->nodes[c->node];
  const kn_shape ps = kn_rw_val(c, p)->shape, xs = kn_rw_val(c, x)->shape;
  int64_t block = kn_node_attr_int(n, "block_size", 0);
  int axis = kn_axis_norm(kn_node_attr_int(n, "axis", 1), xs.rank);
  if (ps.batch_mask) return kn_rw_fail(c, "%s has a batch-dependent shape", what);
  int64_t count = kn_shape_numel_max(&ps, 1);
  if (block <= 0 && count == 1) return p;
  if (axis < 0) return kn_rw_fail(c, "attribute 'axis' is out of range for rank %d", xs.rank);
  if (xs.batch_mask & (1u << axis)) return kn_rw_fail(c, "quantization axis %d is the batch dim", axis);
  int64_t len = xs.dim[axis];
  if (block > 0) {
    if (ps.rank != xs.rank || ps.dim[axis] != (len + block - 1) / block)
      return kn_rw_fail(c, "%s does not match attribute 'block_size' = %lld", what, (long long)block);
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(len ? len : 1));
    KN_ASSERT(idx, "out of memory");
    for (int64_t i = 0; i < len; i++) idx[i] = i / block;
    int in[2] = {p, kn_rw_ints(c, idx, (int)len)};
    free(idx);
    int v = kn_rw_op(c, KN_OP_GATHER, in, 2);
    kn_rw_attr_int(c, "axis", axis);
    return v;
  }
  if (ps.rank != 1 || ps.dim[0] != len)
    return kn_rw_fail(c, "%s must be a scalar or have shape [%lld] (axis %d)", what, (long long)len, axis);
  int64_t axes[KN_MAX_RANK];
  for (int i = 0; i < xs.rank - 1 - axis; i++) axes[i] = i + 1;
  return kn_rw_unsqueeze(c, p, axes, xs.rank - 1 - axis);
}

/* Cast(clamp(Round(q) + zp)) for a float q of dtype ft (zp -1: none). */
static int saturate(kn_rw *c, int q, kn_dtype ft, int zp, kn_dtype out) {
  double lo, hi;
  KN_ASSERT(quant_type(out, &lo, &hi), "saturate to a non-quantized type");
  q = kn_rw_un(c, KN_OP_ROUND, q);
  if (zp >= 0) q = kn_rw_bin(c, KN_OP_ADD, q, kn_rw_cast(c, zp, ft));
  return kn_rw_cast(c, kn_rw_clamp(c, q, ft, lo, hi), out);
}

/* QuantizeLinear of x by already aligned scale and zero point. */
static int quantize(kn_rw *c, int x, kn_dtype xt, int scale, int zp, kn_dtype out) {
  int q = kn_rw_bin(c, KN_OP_DIV, x, kn_rw_cast(c, scale, xt));
  /* narrower floats divide in their own type (as the reference), then
   * round and add in float32, where 16-bit zero points are exact */
  kn_dtype ft = xt == KN_DT_F64 ? KN_DT_F64 : KN_DT_F32;
  return saturate(c, kn_rw_cast(c, q, ft), ft, zp, out);
}

static int quantize_linear(kn_rw *c) {
  const kn_node *n = &c->g->nodes[c->node];
  int x = kn_rw_in(c, 0), scale = kn_rw_in(c, 1), zp = kn_rw_in(c, 2);
  kn_dtype xt = kn_rw_val(c, x)->dtype, out = KN_DT_U8;
  int64_t out_code = kn_node_attr_int(n, "output_dtype", 0);
  if (out_code) out = kn_dtype_from_onnx((int)out_code);
  if (zp >= 0) {
    if (out_code && kn_rw_val(c, zp)->dtype != out)
      return kn_rw_fail(c, "attribute 'output_dtype' differs from y_zero_point's dtype");
    out = kn_rw_val(c, zp)->dtype;
  }
  double lo, hi;
  bool to_float = kn_dtype_is_f8(out) && out != KN_DT_F8E8M0;
  if (!quant_type(out, &lo, &hi) && !to_float)
    return kn_rw_fail(c, "output dtype %s is not supported (uint8, int8, uint16, int16, int4, uint4, int2, uint2, "
                         "float8, "
                         "float4e2m1)",
                      out_code ? kn_dtype_name(out) : kn_dtype_name(kn_rw_val(c, zp)->dtype));
  if (!kn_dtype_is_float(xt)) return kn_rw_fail(c, "input x of dtype %s is not a float", kn_dtype_name(xt));
  if ((scale = align_param(c, scale, x, "y_scale")) < 0) return -1;
  if (zp >= 0 && (zp = align_param(c, zp, x, "y_zero_point")) < 0) return -1;
  if (to_float) {
    int q = kn_rw_bin(c, KN_OP_DIV, x, kn_rw_cast(c, scale, xt));
    if (zp >= 0 && out == KN_DT_F4E2M1) q = kn_rw_bin(c, KN_OP_ADD, q, kn_rw_cast(c, zp, xt));
    q = kn_rw_op(c, KN_OP_CAST, &q, 1);
    kn_rw_attr_int(c, "to", kn_dtype_to_onnx(out));
    kn_rw_attr_copy(c, "saturate");
    kn_rw_output(c, 0, q);
    return 0;
  }
  kn_rw_output(c, 0, quantize(c, x, xt, scale, zp, out));
  return 0;
}

static int dequantize_linear(kn_rw *c) {
  const kn_node *n = &c->g->nodes[c->node];
  int x = kn_rw_in(c, 0), scale = kn_rw_in(c, 1), zp = kn_rw_in(c, 2);
  kn_dtype xt = kn_rw_val(c, x)->dtype, st = kn_rw_val(c, scale)->dtype, out = st;
  int64_t out_code = kn_node_attr_int(n, "output_dtype", 0);
  if (out_code) out = kn_dtype_from_onnx((int)out_code);
  double lo, hi;
  if (!quant_type(xt, &lo, &hi) && xt != KN_DT_I32 && !(kn_dtype_is_f8(xt) && xt != KN_DT_F8E8M0))
    return kn_rw_fail(c, "input x of dtype %s is not supported (uint8, int8, uint16, int16, int32, int4, uint4, "
                         "int2, uint2, "
                         "float8, float4e2m1)",
                      kn_dtype_name(xt));
  if (!kn_dtype_is_float(st)) return kn_rw_fail(c, "x_scale of dtype %s is not a float", kn_dtype_name(st));
  if (!kn_dtype_is_float(out)) return kn_rw_fail(c, "attribute 'output_dtype' is not a float type");
  if (zp >= 0 && kn_rw_val(c, zp)->dtype != xt) return kn_rw_fail(c, "x_zero_point's dtype differs from x's");
  if ((scale = align_param(c, scale, x, "x_scale")) < 0) return -1;
  if (zp >= 0 && (zp = align_param(c, zp, x, "x_zero_point")) < 0) return -1;
  kn_dtype ft = st == KN_DT_F64 ? KN_DT_F64 : KN_DT_F32;
  int v = kn_rw_cast(c, x, ft);
  if (zp >= 0) v = kn_rw_bin(c, KN_OP_SUB, v, kn_rw_cast(c, zp, ft));
  v = kn_rw_bin(c, KN_OP_MUL, v, kn_rw_cast(c, scale, ft));
  kn_rw_output(c, 0, kn_rw_cast(c, v, out));
  return 0;
}

static int dynamic_quantize_linear(kn_rw *c) {
  int x = kn_rw_in(c, 0);
  kn_dtype t = kn_rw_val(c, x)->dtype;
  if (t != KN_DT_F32) return kn_rw_fail(c, "input x of dtype %s is not float32", kn_dtype_name(t));
  int zero = kn_rw_scalar(c, t, 0);
  int lo = kn_rw_bin(c, KN_OP_MIN, kn_rw_reduce(c, KN_OP_REDUCE_MIN, x, NULL, 0, false), zero);
  int hi = kn_rw_bin(c, KN_OP_MAX, kn_rw_reduce(c, KN_OP_REDUCE_MAX, x, NULL, 0, false), zero);
  /* an all-zero x has no range: scale 1/255 (as the ONNX reference and ORT), not 0 */
  int range = kn_rw_bin(c, KN_OP_SUB, hi, lo);
  int empty[3] = {kn_rw_bin(c, KN_OP_EQUAL, range, zero), kn_rw_scalar(c, t, 1), range};
  int scale = kn_rw_bin(c, KN_OP_DIV, kn_rw_op(c, KN_OP_WHERE, empty, 3), kn_rw_scalar(c, t, 255));
  int zp = kn_rw_bin(c, KN_OP_SUB, zero, kn_rw_bin(c, KN_OP_DIV, lo, scale));
  zp = kn_rw_cast(c, kn_rw_un(c, KN_OP_ROUND, kn_rw_clamp(c, zp, t, 0, 255)), KN_DT_U8);
  kn_rw_output(c, 0, quantize(c, x, t, scale, zp, KN_DT_U8));
  kn_rw_output(c, 1, scale);
  kn_rw_output(c, 2, zp);
  return 0;
}

/* v - zp in type t (zp -1: v cast to t). A 1-D zero point of more than one
 * element gets `trailing` unit dims (per-row of a matrix, per output channel
 * of a conv weight). */
static int shift(kn_rw *c, int v, int zp, kn_dtype t, int trailing, const char *what) {
  kn_dtype vt = kn_rw_val(c, v)->dtype;
  double lo, hi;
  if (vt != KN_DT_U8 && vt != KN_DT_I8) return kn_rw_fail(c, "%s of dtype %s is not uint8/int8", what, kn_dtype_name(vt));
  int r = kn_rw_cast(c, v, t);
  if (zp < 0) return r;
  const kn_value *z = kn_rw_val(c, zp);
  if (!quant_type(z->dtype, &lo, &hi) || z->shape.rank > 1 || z->shape.batch_mask)
    return kn_rw_fail(c, "zero point of %s must be a uint8/int8 scalar or 1-D tensor", what);
  if (z->dtype != vt)
    return kn_rw_fail(c, "zero point of %s is %s; it must have the input's dtype %s", what, kn_dtype_name(z->dtype),
                      kn_dtype_name(vt));
  int zc = kn_rw_cast(c, zp, t);
  if (z->shape.rank == 1 && z->shape.dim[0] > 1) {
    int64_t axes[KN_MAX_RANK];
    for (int i = 0; i < trailing; i++) axes[i] = i + 1;
    zc = kn_rw_unsqueeze(c, zc, axes, trailing);
  }
  return kn_rw_bin(c, KN_OP_SUB, r, zc);
}

/* The int32 product of MatMulInteger / QLinearMatMul. */
static int matmul_integer_of(kn_rw *c, int a, int a_zp, int b, int b_zp) {
  if ((a = shift(c, a, a_zp, KN_DT_I32, 1, "input A")) < 0) return -1;
  if ((b = shift(c, b, b_zp, KN_DT_I32, 0, "input B")) < 0) return -1;
  return kn_rw_bin(c, KN_OP_MATMUL, a, b);
}

/* The int32-valued float64 convolution of ConvInteger / QLinearConv. */
static int conv_integer_of(kn_rw *c, int x, int x_zp, int w, int w_zp, int bias) {
  int rank = kn_rw_val(c, w)->shape.rank;
  if (rank < 3) return kn_rw_fail(c, "weight of rank %d", rank);
  if ((x = shift(c, x, x_zp, KN_DT_F64, 0, "input x")) < 0) return -1;
  if ((w = shift(c, w, w_zp, KN_DT_F64, rank - 1, "input w")) < 0) return -1;
  int in[3] = {x, w, bias >= 0 ? kn_rw_cast(c, bias, KN_DT_F64) : -1};
  int v = kn_rw_op(c, KN_OP_CONV, in, bias >= 0 ? 3 : 2);
  static const char *const copied[] = {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"};
  for (int i = 0; i < 6; i++) kn_rw_attr_copy(c, copied[i]);
  return v;
}

/* Requantizes an int32-valued product: acc * (s1 * s2 / s3) + zp in float64,
 * rounded and saturated to zp's dtype. s2 may be per output channel, moved
 * to axis `channel_axis` of a rank-`rank` acc. */
static int requantize(kn_rw *c, int acc, int s1, int s2, int s3, int zp, int channel_axis, int rank) {
  kn_dtype st = kn_rw_val(c, s1)->dtype, out = kn_rw_val(c, zp)->dtype;
  double lo, hi;
  if (!kn_dtype_is_float(st) || kn_rw_val(c, s2)->dtype != st || kn_rw_val(c, s3)->dtype != st)
    return kn_rw_fail(c, "scales must share one float dtype");
  if (!quant_type(out, &lo, &hi)) return kn_rw_fail(c, "y_zero_point of dtype %s is not supported", kn_dtype_name(out));
  for (int k = 0; k < 3; k++) {
    int s = k == 0 ? s1 : k == 1 ? s2 : s3;
    const kn_shape *ss = &kn_rw_val(c, s)->shape;
    if (ss->rank > 1 || ss->batch_mask || (k != 1 && kn_shape_numel_max(ss, 1) != 1))
      return kn_rw_fail(c, "scale input %d must be a scalar%s", k, k == 1 ? " or 1-D" : "");
  }
  if (kn_shape_numel_max(&kn_rw_val(c, zp)->shape, 1) != 1) return kn_rw_fail(c, "y_zero_point must be a scalar");
  const kn_shape *s2s = &kn_rw_val(c, s2)->shape;
  if (s2s->rank == 1 && s2s->dim[0] > 1) {
    int64_t axes[KN_MAX_RANK];
    for (int i = 0; i < rank - 1 - channel_axis; i++) axes[i] = i + 1;
    s2 = kn_rw_unsqueeze(c, s2, axes, rank - 1 - channel_axis);
  }
  int mult = kn_rw_bin(c, KN_OP_DIV, kn_rw_bin(c, KN_OP_MUL, s1, s2), s3);
  int v = kn_rw_bin(c, KN_OP_MUL, kn_rw_cast(c, acc, KN_DT_F64), kn_rw_cast(c, mult, KN_DT_F64));
  return saturate(c, v, KN_DT_F64, zp, out);
}

static int matmul_integer(kn_rw *c) {
  int y = matmul_integer_of(c, kn_rw_in(c, 0), kn_rw_in(c, 2), kn_rw_in(c, 1), kn_rw_in(c, 3));
  if (y < 0) return -1;
  kn_rw_output(c, 0, y);
  return 0;
}

static int qlinear_matmul(kn_rw *c) {
  for (int k = 0; k < 8; k++)
    if (kn_rw_in(c, k) < 0) return kn_rw_fail(c, "input %d is missing", k);
  int acc = matmul_integer_of(c, kn_rw_in(c, 0), kn_rw_in(c, 2), kn_rw_in(c, 3), kn_rw_in(c, 5));
  if (acc < 0) return -1;
  int rank = kn_rw_val(c, kn_rw_in(c, 3))->shape.rank;
  if (kn_shape_numel_max(&kn_rw_val(c, kn_rw_in(c, 1))->shape, 1) != 1)
    return kn_rw_fail(c, "a_scale must be a scalar");
  int y = requantize(c, acc, kn_rw_in(c, 1), kn_rw_in(c, 4), kn_rw_in(c, 6), kn_rw_in(c, 7), rank - 1, rank);
  if (y < 0) return -1;
  kn_rw_output(c, 0, y);
  return 0;
}

static int conv_integer(kn_rw *c) {
  int y = conv_integer_of(c, kn_rw_in(c, 0), kn_rw_in(c, 2), kn_rw_in(c, 1), kn_rw_in(c, 3), -1);
  if (y < 0) return -1;
  kn_rw_output(c, 0, kn_rw_cast(c, y, KN_DT_I32));
  return 0;
}

static int qlinear_conv(kn_rw *c) {
  for (int k = 0; k < 8; k++)
    if (kn_rw_in(c, k) < 0) return kn_rw_fail(c, "input %d is missing", k);
  int bias = kn_rw_in(c, 8);
  if (bias >= 0 && kn_rw_val(c, bias)->dtype != KN_DT_I32) return kn_rw_fail(c, "bias B is not int32");
  int acc = conv_integer_of(c, kn_rw_in(c, 0), kn_rw_in(c, 2), kn_rw_in(c, 3), kn_rw_in(c, 5), bias);
  if (acc < 0) return -1;
  int rank = kn_rw_val(c, kn_rw_in(c, 0))->shape.rank;
  int y = requantize(c, acc, kn_rw_in(c, 1), kn_rw_in(c, 4), kn_rw_in(c, 6), kn_rw_in(c, 7), 1, rank);
  if (y < 0) return -1;
  kn_rw_output(c, 0, y);
  return 0;
}

int kn_decompose_quant(kn_rw *c) {
  switch (c->g->nodes[c->node].op) {
  case KN_OP_QUANTIZE_LINEAR: return quantize_linear(c);
  case KN_OP_DEQUANTIZE_LINEAR: return dequantize_linear(c);
  case KN_OP_DYNAMIC_QUANTIZE_LINEAR: return dynamic_quantize_linear(c);
  case KN_OP_MATMUL_INTEGER: return matmul_integer(c);
  case KN_OP_QLINEAR_MATMUL: return qlinear_matmul(c);
  case KN_OP_CONV_INTEGER: return conv_integer(c);
  case KN_OP_QLINEAR_CONV: return qlinear_conv(c);
  default: return 1;
  }
}
