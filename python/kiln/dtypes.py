"""dtypes.py — the element types of the artifact ABI and their numpy forms.

An artifact's tensors use ONNX TensorProto codes. numpy holds most of them
as they are; the others travel as `kiln run` reads and writes them in .npy
files (docs/cli.md), bit for bit the same:
  * bfloat16 and the minifloats (float8e4m3fn, e4m3fnuz, e5m2, e5m2fnuz,
    e8m0, float4e2m1) are float32 arrays: inputs are rounded as base/base.c's
    kn_f32_to_bf16 / kn_f32_to_f8 round (nearest even, no saturation, except
    that e8m0 rounds up and float4e2m1 saturates to +-6), outputs widened
    exactly (kn_bf16_to_f32 / kn_f8_to_f32; NaN is 0x7fc00000);
  * int4 / int2 are int8 arrays and uint4 / uint2 uint8 ones, one element per
    byte (the ABI's own form), each value within the type's range.
"""
import math

import numpy as np

# ONNX code: (name, numpy dtype of the artifact's buffer, numpy dtype of the caller's arrays)
TYPES = {
    1: ("float32", np.float32, np.float32), 2: ("uint8", np.uint8, np.uint8),
    3: ("int8", np.int8, np.int8), 4: ("uint16", np.uint16, np.uint16),
    5: ("int16", np.int16, np.int16), 6: ("int32", np.int32, np.int32),
    7: ("int64", np.int64, np.int64), 9: ("bool", np.bool_, np.bool_),
    10: ("float16", np.float16, np.float16), 11: ("float64", np.float64, np.float64),
    12: ("uint32", np.uint32, np.uint32), 13: ("uint64", np.uint64, np.uint64),
    16: ("bfloat16", np.uint16, np.float32),
    17: ("float8e4m3fn", np.uint8, np.float32), 18: ("float8e4m3fnuz", np.uint8, np.float32),
    19: ("float8e5m2", np.uint8, np.float32), 20: ("float8e5m2fnuz", np.uint8, np.float32),
    24: ("float8e8m0", np.uint8, np.float32), 23: ("float4e2m1", np.uint8, np.float32),
    21: ("uint4", np.uint8, np.uint8), 22: ("int4", np.int8, np.int8),
    25: ("uint2", np.uint8, np.uint8), 26: ("int2", np.int8, np.int8),
}
CODES = {name: code for code, (name, _, _) in TYPES.items()}

# The minifloats as base.h's kn_f8_format: exponent and mantissa bits, bias,
# fnuz (0x80 is NaN, no -0, no infinity), has_inf, the largest finite code.
MINIFLOATS = {
    "float8e4m3fn": (4, 3, 7, False, False, 0x7e),
    "float8e4m3fnuz": (4, 3, 8, True, False, 0x7f),
    "float8e5m2": (5, 2, 15, False, True, 0x7b),
    "float8e5m2fnuz": (5, 2, 16, True, False, 0x7f),
}
# sub-byte integers: (lowest, highest)
SUBBYTE = {"int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1), "uint2": (0, 3)}
NAN_BITS = 0x7fc00000  # the NaN kn_f8_to_f32 returns (__builtin_nanf(""))
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def is_converted(name):
    """True where the artifact's buffer differs from the caller's array."""
    return name == "bfloat16" or name in MINIFLOATS or name in ("float8e8m0", "float4e2m1")


def _decode_one(name, code):
    """kn_f8_to_f32 for one byte, as a Python float (NaN for NaN)."""
    if name == "float8e8m0":
        return math.nan if code == 0xff else math.ldexp(1.0, code - 127)
    if name == "float4e2m1":
        return -E2M1[code & 7] if code & 8 else E2M1[code & 7]
    exp_bits, man_bits, bias, fnuz, has_inf, _ = MINIFLOATS[name]
    e, m, neg = (code >> man_bits) & ((1 << exp_bits) - 1), code & ((1 << man_bits) - 1), code & 0x80
    if (fnuz and code == 0x80) or (not fnuz and not has_inf and code & 0x7f == 0x7f):
        return math.nan
    if has_inf and e == (1 << exp_bits) - 1:
        return math.nan if m else -math.inf if neg else math.inf
    v = math.ldexp(m, 1 - bias - man_bits) if e == 0 else math.ldexp(m | 1 << man_bits, e - bias - man_bits)
    return -v if neg else v


_TABLES = {}


def _table(name):
    """float32 bits of each of the 256 codes of a minifloat."""
    if name not in _TABLES:
        vals = [_decode_one(name, c) for c in range(256)]
        bits = np.array(vals, np.float32).view(np.uint32)
        bits[np.isnan(vals)] = NAN_BITS
        _TABLES[name] = bits
    return _TABLES[name]


def decode(name, buf):
    """The caller's array for an artifact buffer of type `name`."""
    if name == "bfloat16":
        return (buf.astype(np.uint32) << 16).view(np.float32)
    if is_converted(name):
        return _table(name)[buf.reshape(-1)].view(np.float32).reshape(buf.shape)
    return buf


def _f32_to_bf16(b):
    nan = (b & 0x7fffffff) > 0x7f800000
    rounded = (b + np.uint32(0x7fff) + ((b >> 16) & 1)) >> 16  # wraps only for NaN, masked
    return np.where(nan, (b >> 16) | 0x40, rounded).astype(np.uint16)


def _f32_to_e8m0(b):
    e = (b >> 23) & 0xff
    up = ((b & 0x7fffff) != 0) & (e < 0xfe)
    code = np.where(e == 0xff, 0xff, e + up)
    return np.where((b & 0x7fffffff) == 0x00400000, 0, code).astype(np.uint8)  # 2^-127 is code 0


def _f32_to_e2m1(x):
    # nearest even by counting the midpoints below |x|; above 5 is 6
    a = np.abs(x)
    code = sum((a > 0.25, a >= 0.75, a > 1.25, a >= 1.75, a > 2.5, a >= 3.5, a > 5.0)).astype(np.uint8)
    return code | np.where(np.isnan(x) | np.signbit(x), 8, 0).astype(np.uint8)


def _f32_to_f8(name, x, b):
    exp_bits, man_bits, bias, fnuz, has_inf, max_code = MINIFLOATS[name]
    nan = 0x80 if fnuz else 0x7f
    sign = ((b >> 24) & 0x80).astype(np.int64)
    mag = (b & 0x7fffffff).astype(np.int64)
    e = (mag >> 23) - 127 + bias  # the float8 exponent field, where normal
    drop = 23 - man_bits
    normal = ((mag + (1 << (drop - 1)) - 1 + ((mag >> drop) & 1)) >> drop) - ((127 - bias) << man_bits)
    # subnormal: an integer multiple of 2^(1 - bias - man_bits), nearest even
    # (only where e < 1: elsewhere the scaling could overflow)
    small = np.where(e >= 1, 0, mag).astype(np.uint32).view(np.float32)
    scaled = np.ldexp(small, np.int32(bias - 1 + man_bits))
    code = np.where(mag >= 0x7f800000, 0xff, np.where(e >= 1, normal, np.rint(scaled).astype(np.int64)))
    out = np.where(code > max_code, (sign | 0x7c) if has_inf else nan,
                   np.where((code == 0) & fnuz, 0, sign | code))
    return np.where(np.isnan(x), nan, out).astype(np.uint8)


def encode(name, array):
    """The artifact buffer of type `name` for the caller's array, which has
    the caller's dtype already (float32 for the converted types)."""
    if not is_converted(name):
        return array
    x = array.reshape(-1)  # 1-d: numpy scalars would warn where uint32 sums wrap
    b = x.view(np.uint32)
    if name == "bfloat16":
        out = _f32_to_bf16(b)
    elif name == "float8e8m0":
        out = _f32_to_e8m0(b)
    elif name == "float4e2m1":
        out = _f32_to_e2m1(x)
    else:
        out = _f32_to_f8(name, x, b)
    return out.reshape(array.shape)


def out_of_range(name, array):
    """For a sub-byte integer type: (flat index, value) of the first element
    outside its range, else None."""
    if name not in SUBBYTE:
        return None
    lo, hi = SUBBYTE[name]
    bad = np.flatnonzero((array < lo) | (array > hi))
    return (int(bad[0]), int(array.reshape(-1)[bad[0]])) if bad.size else None
