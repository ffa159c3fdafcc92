/* onnx_tensor.c — TensorProto -> constant value: initializers, Constant
 * nodes and TENSOR attributes all come through here.
 *
 * Guarantees: the element count is computed without overflow (negative or
 * huge dims are diagnosed), and the bytes found (raw_data, the typed field
 * for the dtype, or the external file slice) must be exactly numel * dtype
 * size. Nothing is allocated before the source is known to hold that many
 * bytes, so a lying header cannot make us allocate gigabytes.
 * External data paths are relative to the model's directory: absolute paths
 * and paths with a ".." component are rejected.
 * Sub-byte types (int4, uint4, float4e2m1; int2, uint2) arrive packed two
 * (four) per byte, lowest bits first (in raw_data, external data, or one
 * byte per int32_data entry); they are unpacked to one byte per element
 * (see base/base.h). */
#include "frontend/fe_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ONNX stores raw and external data little-endian; swap on big-endian hosts. */
static void to_host_order(void *data, size_t numel, size_t elem) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  unsigned char *p = data;
  for (size_t i = 0; i < numel; i++, p += elem)
    for (size_t a = 0, b = elem - 1; a < b; a++, b--) {
      unsigned char t = p[a];
      p[a] = p[b];
      p[b] = t;
    }
#else
  (void)data, (void)numel, (void)elem;
#endif
}

/* The typed repeated field that carries `dtype` per the ONNX spec. */
static const char *typed_field_name(kn_dtype dtype) {
  switch (dtype) {
  case KN_DT_F32:
    return "float_data";
  case KN_DT_F64:
    return "double_data";
  case KN_DT_I64:
    return "int64_data";
  case KN_DT_U32:
  case KN_DT_U64:
    return "uint64_data";
  default:
    return "int32_data";
  }
}

static size_t typed_field_count(const Onnx__TensorProto *t, kn_dtype dtype) {
  switch (dtype) {
  case KN_DT_F32:
    return t->n_float_data;
  case KN_DT_F64:
    return t->n_double_data;
  case KN_DT_I64:
    return t->n_int64_data;
  case KN_DT_U32:
  case KN_DT_U64:
    return t->n_uint64_data;
  default:
    return t->n_int32_data;
  }
}

/* A populated typed field other than the one `dtype` uses, or NULL. */
static const char *wrong_typed_field(const Onnx__TensorProto *t, kn_dtype dtype) {
  const struct {
    const char *name;
    size_t count;
  } fields[] = {{"float_data", t->n_float_data},   {"int32_data", t->n_int32_data},
                {"int64_data", t->n_int64_data},   {"double_data", t->n_double_data},
                {"uint64_data", t->n_uint64_data}, {"string_data", t->n_string_data}};
  const char *right = typed_field_name(dtype);
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    if (fields[i].count && strcmp(fields[i].name, right) != 0) return fields[i].name;
  return NULL;
}

/* Copies the typed field into `out` (numel elements of dtype). int32_data
 * carries the bit patterns of the narrow types (int8 ... float16/bfloat16,
 * float8). */
static void copy_typed(const Onnx__TensorProto *t, kn_dtype dtype, size_t numel, void *out) {
  if (numel == 0) return; /* the field may be empty (NULL) */
  switch (dtype) {
  case KN_DT_F32:
    memcpy(out, t->float_data, numel * 4);
    return;
  case KN_DT_F64:
    memcpy(out, t->double_data, numel * 8);
    return;
  case KN_DT_I64:
    memcpy(out, t->int64_data, numel * 8);
    return;
  case KN_DT_U64:
    memcpy(out, t->uint64_data, numel * 8);
    return;
  case KN_DT_U32:
    for (size_t i = 0; i < numel; i++) ((uint32_t *)out)[i] = (uint32_t)t->uint64_data[i];
    return;
  case KN_DT_I32:
    memcpy(out, t->int32_data, numel * 4);
    return;
  case KN_DT_BOOL:
    for (size_t i = 0; i < numel; i++) ((uint8_t *)out)[i] = t->int32_data[i] != 0;
    return;
  case KN_DT_I8:
  case KN_DT_U8:
  case KN_DT_F8E4M3FN:
  case KN_DT_F8E4M3FNUZ:
  case KN_DT_F8E5M2:
  case KN_DT_F8E5M2FNUZ:
  case KN_DT_F8E8M0:
    for (size_t i = 0; i < numel; i++) ((uint8_t *)out)[i] = (uint8_t)(uint32_t)t->int32_data[i];
    return;
  case KN_DT_I16:
  case KN_DT_U16:
  case KN_DT_F16:
  case KN_DT_BF16:
    for (size_t i = 0; i < numel; i++) ((uint16_t *)out)[i] = (uint16_t)(uint32_t)t->int32_data[i];
    return;
  default:
    KN_UNREACHABLE("dtype without a typed field");
  }
}

/* Bits per element of a packed sub-byte dtype, 0 for the others. */
static int packed_bits(kn_dtype dtype) {
  if (dtype == KN_DT_F4E2M1) return 4;
  return kn_dtype_is_subbyte_int(dtype) ? kn_subbyte_int_bits(dtype) : 0;
}

/* Unpacks numel elements of `bits` bits (8 / bits per byte of `packed`,
 * lowest first) to one byte each; int4 / int2 are sign-extended. */
static void unpack_subbyte(kn_dtype dtype, int bits, const uint8_t *packed, size_t numel, void *out) {
  size_t per = (size_t)(8 / bits);
  for (size_t i = 0; i < numel; i++) {
    int code = (packed[i / per] >> ((i % per) * (size_t)bits)) & ((1 << bits) - 1);
    ((int8_t *)out)[i] = (int8_t)(kn_dtype_is_subbyte_int(dtype) ? kn_subbyte_wrap(dtype, code) : code);
  }
}

/* Strict parse of a non-negative decimal integer string. */
static bool parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s) return false;
  uint64_t v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return false;
    if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(*s - '0'), &v))
      return false;
  }
  *out = v;
  return true;
}

/* True if `loc` is absolute or has a ".." path component. */
static bool path_escapes(const char *loc) {
  if (loc[0] == '/' || loc[0] == '\\') return true;
  if (((loc[0] | 0x20) >= 'a' && (loc[0] | 0x20) <= 'z') && loc[1] == ':') return true; /* C: */
  for (const char *p = loc; *p;) {
    size_t len = strcspn(p, "/\\");
    if (len == 2 && p[0] == '.' && p[1] == '.') return true;
    p += len;
    if (*p) p++;
  }
  return false;
}

/* An external data reference, validated against the file before any read. */
typedef struct ext_ref {
  const char *location;
  uint64_t offset;
  int fd;
} ext_ref;

/* Resolves and checks the external data of `t` (expected `bytes` long);
 * opens the file into ref->fd. Returns 0 or -1 after a diagnostic. */
static int external_open(kn_fe_ctx *cx, const Onnx__TensorProto *t, uint64_t bytes,
                         const char *what, ext_ref *ref) {
  const char *location = NULL, *offset_s = NULL, *length_s = NULL;
  for (size_t i = 0; i < t->n_external_data; i++) {
    const Onnx__StringStringEntryProto *e = t->external_data[i];
    if (!e->key) continue;
    if (strcmp(e->key, "location") == 0)
      location = e->value;
    else if (strcmp(e->key, "offset") == 0)
      offset_s = e->value;
    else if (strcmp(e->key, "length") == 0)
      length_s = e->value;
  }
  uint64_t offset = 0, length = 0;
  if (!location || !*location) return kn_fe_error(cx, "%s: external data without a location", what);
  if (path_escapes(location))
    return kn_fe_error(cx,
                       "%s: external data location '%s' must be a relative path inside the "
                       "model's directory",
                       what, location);
  if (offset_s && !parse_u64(offset_s, &offset))
    return kn_fe_error(cx, "%s: bad external data offset '%s'", what, offset_s);
  if (length_s && !parse_u64(length_s, &length))
    return kn_fe_error(cx, "%s: bad external data length '%s'", what, length_s);
  if (length_s && length != bytes)
    return kn_fe_error(cx,
                       "%s: external data length %llu does not match the %llu bytes of its "
                       "shape and type",
                       what, (unsigned long long)length, (unsigned long long)bytes);
  if (!cx->base_dir)
    return kn_fe_error(cx, "%s: external data '%s' needs the model's directory", what, location);

  char *path = kn_arena_printf(&cx->g->arena, "%s/%s", cx->base_dir, location);
  /* O_NONBLOCK: opening a FIFO must not hang (non-regular files are rejected below) */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return kn_fe_error(cx, "%s: cannot open external data file '%s': %s", what, path,
                       strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return kn_fe_error(cx, "%s: external data '%s' is not a regular file", what, path);
  }
  uint64_t size = (uint64_t)st.st_size;
  /* Without a length the data runs to the end of the file (ONNX semantics). */
  bool fits = offset <= size && (length_s ? size - offset >= bytes : size - offset == bytes);
  if (!fits) {
    close(fd);
    return kn_fe_error(cx,
                       "%s: external data file '%s' has %llu bytes; expected %llu bytes at "
                       "offset %llu%s",
                       what, path, (unsigned long long)size, (unsigned long long)bytes,
                       (unsigned long long)offset, length_s ? "" : " up to the end of the file");
  }
  ref->location = path;
  ref->offset = offset;
  ref->fd = fd;
  return 0;
}

static int external_read(kn_fe_ctx *cx, ext_ref *ref, void *out, size_t bytes, const char *what) {
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = pread(ref->fd, (char *)out + done, bytes - done, (off_t)(ref->offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(ref->fd);
      return kn_fe_error(cx, "%s: cannot read external data file '%s': %s", what, ref->location,
                         n < 0 ? strerror(errno) : "unexpected end of file");
    }
    done += (size_t)n;
  }
  close(ref->fd);
  return 0;
}

int kn_fe_tensor_to_const(kn_fe_ctx *cx, const Onnx__TensorProto *t, const char *value_name,
                          const char *what) {
  kn_dtype dtype = kn_dtype_from_onnx(t->data_type);
  if (dtype == KN_DT_INVALID)
    return kn_fe_error(cx, "%s: unsupported data type %d (%s)", what, (int)t->data_type,
                       kn_fe_onnx_type_name(t->data_type));
  if (t->segment) return kn_fe_error(cx, "%s: segmented tensors are not supported", what);
  if (t->n_dims > KN_MAX_RANK)
    return kn_fe_error(cx, "%s: rank %zu exceeds Kiln's maximum rank %d", what, t->n_dims,
                       KN_MAX_RANK);

  char dims[160];
  kn_fe_dims_str(dims, sizeof dims, t->dims, t->n_dims);
  kn_shape shape = {.rank = (int)t->n_dims};
  size_t elem = kn_dtype_size(dtype);
  int64_t numel = 1, bytes = 0;
  for (size_t i = 0; i < t->n_dims; i++) {
    if (t->dims[i] < 0)
      return kn_fe_error(cx, "%s: negative dim %lld at index %zu of shape %s", what,
                         (long long)t->dims[i], i, dims);
    shape.dim[i] = t->dims[i];
    if (__builtin_mul_overflow(numel, t->dims[i], &numel))
      return kn_fe_error(cx, "%s: shape %s has too many elements", what, dims);
  }
  if (__builtin_mul_overflow(numel, (int64_t)elem, &bytes) || (uint64_t)bytes > SIZE_MAX)
    return kn_fe_error(cx, "%s: shape %s has too many elements", what, dims);
  int bits = packed_bits(dtype);
  bool packed4 = bits != 0;
  int64_t per_byte = packed4 ? 8 / bits : 1;
  int64_t stored = packed4 ? numel / per_byte + (numel % per_byte != 0) : bytes; /* bytes in the file */

  const char *tname = kn_dtype_name(dtype);
  size_t typed = t->n_float_data + t->n_int32_data + t->n_int64_data + t->n_double_data +
                 t->n_uint64_data + t->n_string_data;
  int v;
  if (t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
    ext_ref ref = {.location = NULL, .offset = 0, .fd = -1};
    if (external_open(cx, t, (uint64_t)stored, what, &ref) != 0) return -1;
    v = kn_graph_add_const(cx->g, value_name, dtype, &shape, NULL);
    void *dst = packed4 ? kn_arena_alloc(&cx->g->arena, (size_t)stored + 1) : cx->g->values[v].data;
    if (external_read(cx, &ref, dst, (size_t)stored, what) != 0) {
      cx->g->values[v].data = NULL; /* keep the value, but not as a constant */
      cx->g->values[v].shape_known = false;
      return -1;
    }
    if (packed4) unpack_subbyte(dtype, bits, dst, (size_t)numel, cx->g->values[v].data);
    to_host_order(cx->g->values[v].data, (size_t)numel, elem);
  } else if (t->raw_data.len > 0 || (typed == 0 && bytes == 0)) {
    if (t->raw_data.len != (size_t)stored)
      return kn_fe_error(cx, "%s: raw_data has %zu bytes, expected %lld for shape %s of %s", what,
                         t->raw_data.len, (long long)stored, dims, tname);
    v = kn_graph_add_const(cx->g, value_name, dtype, &shape, packed4 ? NULL : t->raw_data.data);
    if (packed4) unpack_subbyte(dtype, bits, t->raw_data.data, (size_t)numel, cx->g->values[v].data);
    to_host_order(cx->g->values[v].data, (size_t)numel, elem);
  } else if (typed == 0) {
    return kn_fe_error(cx, "%s: no data (expected %lld bytes for shape %s of %s)", what,
                       (long long)bytes, dims, tname);
  } else {
    const char *wrong = wrong_typed_field(t, dtype);
    if (wrong)
      return kn_fe_error(cx, "%s: %s is set, but %s data belongs in %s", what, wrong, tname,
                         typed_field_name(dtype));
    size_t found = typed_field_count(t, dtype);
    if (found != (size_t)(packed4 ? stored : numel))
      return kn_fe_error(cx, "%s: %s has %zu elements, expected %lld for shape %s of %s", what,
                         typed_field_name(dtype), found, (long long)(packed4 ? stored : numel), dims, tname);
    v = kn_graph_add_const(cx->g, value_name, dtype, &shape, NULL);
    if (packed4) {
      uint8_t *bytes4 = kn_arena_alloc(&cx->g->arena, (size_t)stored + 1);
      for (int64_t i = 0; i < stored; i++) bytes4[i] = (uint8_t)(uint32_t)t->int32_data[i];
      unpack_subbyte(dtype, bits, bytes4, (size_t)numel, cx->g->values[v].data);
    } else {
      copy_typed(t, dtype, (size_t)numel, cx->g->values[v].data);
    }
  }
  return v;
}
