/* npy.h — NumPy .npy files (format 1.0, 2.0, 3.0), C order, little endian.
 *
 * Supported descr: <f4 <f8 <f2 <i8 <i4 <i2 |i1 |u1 |b1 <u2 <u4 <u8 (also '='
 * and, for one-byte types, '<' / '|' interchangeably). Anything else —
 * Fortran order, big endian, malformed headers, truncated data, shapes whose
 * size overflows — is a diagnostic naming the file, never a crash. */
#ifndef KN_NPY_H
#define KN_NPY_H

#include "base/base.h"

#define KN_NPY_MAX_RANK 32

typedef struct kn_npy {
  kn_dtype dtype;
  int rank;
  int64_t dims[KN_NPY_MAX_RANK];
  int64_t numel;
  void *data; /* malloc'd, numel * kn_dtype_size(dtype) bytes (at least 1) */
} kn_npy;

/* Parses an in-memory .npy file; `name` is used in diagnostics. */
int kn_npy_parse(const void *buf, size_t len, const char *name, kn_npy *out, kn_diag *d);
int kn_npy_read(const char *path, kn_npy *out, kn_diag *d);
void kn_npy_free(kn_npy *n);

/* Writes atomically (kn_create_beside + rename), mode 0666 less the umask. */
int kn_npy_write(const char *path, kn_dtype dtype, int rank, const int64_t *dims,
                 const void *data, kn_diag *d);

/* Creates a new file beside `path` (its name into tmp, `size` bytes; at
 * least strlen(path) + 32) for writing `path` atomically by rename: mode
 * 0666 less the umask, as any output (mkstemp's 0600 would hide the file
 * from the group); O_EXCL, so an existing file or link of that name is
 * never followed. Returns the descriptor, or -1 with errno. */
int kn_create_beside(const char *path, char *tmp, size_t size);

#endif
