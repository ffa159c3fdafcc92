/* onnx_tensor_file.c — a serialized TensorProto file (the ONNX backend
 * tests' input_N.pb / output_N.pb) -> one constant value of a graph.
 *
 * The bytes go through the same protobuf-c decoder and the same checks as
 * initializers (kn_fe_tensor_to_const): the element count is overflow-safe
 * and the data must be exactly numel * dtype size. External data is read
 * relative to the file's directory. */
#include "frontend/onnx_load.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend/fe_internal.h"

/* Reads the whole regular file at `path` into a malloc'ed buffer. */
static uint8_t *read_file(const char *path, size_t *size, kn_diag *d) {
  /* O_NONBLOCK: opening a FIFO must not hang (non-regular files are rejected below) */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    kn_diag_error(d, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    kn_diag_error(d, "%s: not a regular file", path);
    return NULL;
  }
  *size = (size_t)st.st_size;
  uint8_t *data = malloc(*size ? *size : 1);
  KN_ASSERT(data, "out of memory");
  for (size_t done = 0; done < *size;) {
    ssize_t n = read(fd, data + done, *size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      kn_diag_error(d, "%s: cannot read: %s", path, n < 0 ? strerror(errno) : "file shrank");
      close(fd);
      free(data);
      return NULL;
    }
    done += (size_t)n;
  }
  close(fd);
  return data;
}

int kn_fe_load_tensor_pb_buffer(const uint8_t *data, size_t size, const char *label,
                                const char *base_dir, kn_graph *g, kn_diag *d) {
  kn_fe_ctx cx = {.g = g, .d = d, .label = label, .base_dir = base_dir};
  int v = -1;
  Onnx__TensorProto *t = NULL;
  /* A TensorProto nests no recursive messages: no depth guard is needed. */
  if (!(t = onnx__tensor_proto__unpack(NULL, size, data)))
    kn_fe_error(&cx, "cannot decode a TensorProto (truncated, or another message)");
  else
    v = kn_fe_tensor_to_const(&cx, t, t->name && *t->name ? t->name : "tensor", "tensor");
  if (t) onnx__tensor_proto__free_unpacked(t, NULL);
  return v;
}

int kn_fe_load_tensor_pb(const char *path, kn_graph *g, kn_diag *d) {
  size_t size = 0;
  uint8_t *data = read_file(path, &size, d);
  if (!data) return -1;
  const char *slash = strrchr(path, '/');
  const char *base_dir = !slash ? "."
                         : slash == path
                             ? "/"
                             : kn_arena_printf(&g->arena, "%.*s", (int)(slash - path), path);
  int v = kn_fe_load_tensor_pb_buffer(data, size, path, base_dir, g, d);
  free(data);
  return v;
}
