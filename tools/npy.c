/* npy.c — reading and writing NumPy .npy files (see npy.h).
 *
 * The header is a Python dict literal; only the three keys NumPy writes are
 * accepted, each value parsed strictly. All lengths are checked against the
 * buffer before use, and the data size is computed with overflow checks
 * before anything is allocated. */
#include "tools/npy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
  const char *code; /* kind + size */
  kn_dtype dtype;
} descr_table[] = {
    {"f4", KN_DT_F32}, {"f8", KN_DT_F64}, {"f2", KN_DT_F16}, {"i8", KN_DT_I64},
    {"i4", KN_DT_I32}, {"i2", KN_DT_I16}, {"i1", KN_DT_I8},  {"u1", KN_DT_U8},
    {"u2", KN_DT_U16}, {"u4", KN_DT_U32}, {"u8", KN_DT_U64}, {"b1", KN_DT_BOOL},
};

typedef struct cursor {
  const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static bool eat(cursor *c, char ch) {
  skip_ws(c);
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return true;
  }
  return false;
}

/* A quoted string into buf; false if malformed or too long. */
static bool parse_string(cursor *c, char *buf, size_t cap) {
  skip_ws(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
  char q = *c->p++;
  size_t n = 0;
  while (c->p < c->end && *c->p != q) {
    if (n + 1 >= cap) return false;
    buf[n++] = *c->p++;
  }
  if (c->p >= c->end) return false;
  c->p++;
  buf[n] = 0;
  return true;
}

static bool parse_word(cursor *c, const char *word) {
  skip_ws(c);
  size_t n = strlen(word);
  if ((size_t)(c->end - c->p) < n || strncmp(c->p, word, n)) return false;
  c->p += n;
  return true;
}

static int parse_shape(cursor *c, kn_npy *out, const char *name, kn_diag *d) {
  if (!eat(c, '(')) return kn_diag_error(d, "%s: malformed .npy header (shape is not a tuple)", name);
  out->rank = 0;
  for (;;) {
    if (eat(c, ')')) return 0;
    skip_ws(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9')
      return kn_diag_error(d, "%s: malformed .npy header (bad shape)", name);
    int64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
      if (v > (INT64_MAX - 9) / 10) return kn_diag_error(d, "%s: .npy shape dimension too large", name);
      v = v * 10 + (*c->p++ - '0');
    }
    if (c->p < c->end && *c->p == 'L') c->p++; /* Python 2 long */
    if (out->rank == KN_NPY_MAX_RANK)
      return kn_diag_error(d, "%s: .npy rank above %d", name, KN_NPY_MAX_RANK);
    out->dims[out->rank++] = v;
    if (eat(c, ',')) continue;
    if (eat(c, ')')) return 0;
    return kn_diag_error(d, "%s: malformed .npy header (bad shape)", name);
  }
}

static int parse_descr(const char *s, kn_dtype *t, const char *name, kn_diag *d) {
  size_t n = strlen(s);
  if (n == 3 && (s[0] == '<' || s[0] == '=' || s[0] == '|' || s[0] == '>')) {
    for (size_t i = 0; i < sizeof descr_table / sizeof descr_table[0]; i++) {
      if (strcmp(s + 1, descr_table[i].code)) continue;
      if (s[0] == '>' && s[2] != '1')
        return kn_diag_error(d, "%s: big-endian .npy data ('%s') is not supported", name, s);
      *t = descr_table[i].dtype;
      return 0;
    }
  }
  return kn_diag_error(d,
                       "%s: unsupported .npy dtype '%s' (supported: <f4 <f8 <f2 <i8 <i4 <i2 |i1 "
                       "|u1 |b1 <u2 <u4 <u8)",
                       name, s);
}

int kn_npy_parse(const void *buf, size_t len, const char *name, kn_npy *out, kn_diag *d) {
  memset(out, 0, sizeof *out);
  const unsigned char *b = buf;
  if (len < 10 || memcmp(b, "\x93NUMPY", 6))
    return kn_diag_error(d, "%s: not a .npy file (bad magic)", name);
  int major = b[6];
  size_t hlen, start;
  if (major == 1) {
    hlen = (size_t)b[8] | (size_t)b[9] << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (len < 12) return kn_diag_error(d, "%s: truncated .npy header", name);
    hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
    start = 12;
  } else {
    return kn_diag_error(d, "%s: unsupported .npy format version %d.%d", name, major, b[7]);
  }
  if (hlen > len - start) return kn_diag_error(d, "%s: truncated .npy header", name);
  cursor c = {(const char *)b + start, (const char *)b + start + hlen};
  bool have_descr = false, have_order = false, have_shape = false, fortran = false;
  if (!eat(&c, '{')) return kn_diag_error(d, "%s: malformed .npy header (no dict)", name);
  while (!eat(&c, '}')) {
    char key[32], val[64];
    if (!parse_string(&c, key, sizeof key) || !eat(&c, ':'))
      return kn_diag_error(d, "%s: malformed .npy header", name);
    if (!strcmp(key, "descr")) {
      if (!parse_string(&c, val, sizeof val))
        return kn_diag_error(d, "%s: unsupported .npy dtype (structured or malformed)", name);
      if (parse_descr(val, &out->dtype, name, d)) return -1;
      have_descr = true;
    } else if (!strcmp(key, "fortran_order")) {
      if (parse_word(&c, "True"))
        fortran = true;
      else if (!parse_word(&c, "False"))
        return kn_diag_error(d, "%s: malformed .npy header (fortran_order)", name);
      have_order = true;
    } else if (!strcmp(key, "shape")) {
      if (parse_shape(&c, out, name, d)) return -1;
      have_shape = true;
    } else {
      return kn_diag_error(d, "%s: unexpected key '%s' in .npy header", name, key);
    }
    if (eat(&c, ',')) continue;
    if (eat(&c, '}')) break;
    return kn_diag_error(d, "%s: malformed .npy header", name);
  }
  if (!have_descr || !have_order || !have_shape)
    return kn_diag_error(d, "%s: .npy header lacks descr, fortran_order or shape", name);
  if (fortran)
    return kn_diag_error(d, "%s: Fortran-order .npy arrays are not supported (save with C order)",
                         name);
  int64_t numel = 1, bytes;
  for (int i = 0; i < out->rank; i++)
    if (__builtin_mul_overflow(numel, out->dims[i], &numel))
      return kn_diag_error(d, "%s: .npy shape is too large", name);
  size_t esize = kn_dtype_size(out->dtype);
  if (__builtin_mul_overflow(numel, (int64_t)esize, &bytes))
    return kn_diag_error(d, "%s: .npy shape is too large", name);
  size_t have = len - start - hlen;
  if ((uint64_t)bytes > have)
    return kn_diag_error(d, "%s: truncated .npy data (%lld bytes expected, %zu present)", name,
                         (long long)bytes, have);
  out->numel = numel;
  out->data = malloc(bytes > 0 ? (size_t)bytes : 1);
  if (!out->data) return kn_diag_error(d, "%s: out of memory", name);
  memcpy(out->data, b + start + hlen, (size_t)bytes);
  return 0;
}

int kn_npy_read(const char *path, kn_npy *out, kn_diag *d) {
  memset(out, 0, sizeof *out);
  /* O_NONBLOCK: opening a FIFO must not hang (non-regular files are rejected below) */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  FILE *fp = fd >= 0 ? fdopen(fd, "rb") : NULL;
  if (!fp) {
    int err = errno;
    if (fd >= 0) close(fd);
    return kn_diag_error(d, "cannot open '%s': %s", path, strerror(err));
  }
  struct stat st;
  if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
    fclose(fp);
    return kn_diag_error(d, "'%s' is not a regular file", path);
  }
  size_t len = (size_t)st.st_size;
  unsigned char *buf = malloc(len ? len : 1);
  if (!buf) {
    fclose(fp);
    return kn_diag_error(d, "'%s': out of memory", path);
  }
  size_t got = fread(buf, 1, len, fp);
  fclose(fp);
  int r = got == len ? kn_npy_parse(buf, len, path, out, d)
                     : kn_diag_error(d, "cannot read '%s'", path);
  free(buf);
  return r;
}

void kn_npy_free(kn_npy *n) {
  free(n->data);
  memset(n, 0, sizeof *n);
}

int kn_create_beside(const char *path, char *tmp, size_t size) {
  for (int i = 0; i < 1000; i++) {
    snprintf(tmp, size, "%s.tmp%ld.%d", path, (long)getpid(), i);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

int kn_npy_write(const char *path, kn_dtype dtype, int rank, const int64_t *dims,
                 const void *data, kn_diag *d) {
  const char *code = NULL;
  for (size_t i = 0; i < sizeof descr_table / sizeof descr_table[0]; i++)
    if (descr_table[i].dtype == dtype) code = descr_table[i].code;
  if (!code) return kn_diag_error(d, "%s: %s has no .npy type", path, kn_dtype_name(dtype));
  if (rank < 0 || rank > KN_NPY_MAX_RANK) return kn_diag_error(d, "%s: bad rank %d", path, rank);
  char header[1024];
  int n = snprintf(header, sizeof header, "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
                   code[1] == '1' ? '|' : '<', code);
  int64_t numel = 1;
  for (int i = 0; i < rank; i++) {
    n += snprintf(header + n, sizeof header - (size_t)n, "%lld%s", (long long)dims[i],
                  rank == 1 ? "," : i + 1 < rank ? ", " : "");
    numel *= dims[i];
  }
  n += snprintf(header + n, sizeof header - (size_t)n, "), }");
  /* pad with spaces so the data starts on a 64-byte boundary */
  int total = 10 + n + 1;
  int pad = (64 - total % 64) % 64;
  memset(header + n, ' ', (size_t)pad);
  n += pad;
  header[n++] = '\n';
  unsigned char prefix[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 0xff),
                              (unsigned char)(n >> 8)};
  size_t bytes = (size_t)numel * kn_dtype_size(dtype);

  size_t tmp_size = strlen(path) + 32;
  char *tmp = malloc(tmp_size);
  KN_ASSERT(tmp, "out of memory");
  int fd = kn_create_beside(path, tmp, tmp_size);
  if (fd < 0) {
    kn_diag_error(d, "cannot write '%s': %s", path, strerror(errno));
    free(tmp);
    return -1;
  }
  FILE *fp = fdopen(fd, "wb");
  bool ok = fp && fwrite(prefix, 1, 10, fp) == 10 && fwrite(header, 1, (size_t)n, fp) == (size_t)n &&
            fwrite(data, 1, bytes, fp) == bytes;
  if (fp)
    ok = (fclose(fp) == 0) && ok;
  else
    close(fd);
  if (!ok || rename(tmp, path) != 0) {
    kn_diag_error(d, "cannot write '%s': %s", path, strerror(errno));
    unlink(tmp);
    free(tmp);
    return -1;
  }
  free(tmp);
  return 0;
}
