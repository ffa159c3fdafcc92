/* loader.c — dlopen-based artifact loader (see loader.h).
 *
 * The ELF header is read before dlopen so that the common mistakes (an
 * aarch64 artifact on x86, a .o, a random file) get a clear message instead
 * of dlerror()'s, and the program headers are checked against the file's
 * size so that a truncated copy is refused instead of killing the process
 * (check_extent). */
#include "rt/loader.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__x86_64__)
#define HOST_MACHINE 62 /* EM_X86_64 */
#define HOST_ARCH "x86_64"
#elif defined(__aarch64__)
#define HOST_MACHINE 183 /* EM_AARCH64 */
#define HOST_ARCH "aarch64"
#else
#define HOST_MACHINE -1
#define HOST_ARCH "this architecture"
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_DATA ELFDATA2LSB
#else
#define HOST_DATA ELFDATA2MSB
#endif

static const char *machine_name(int m) {
  switch (m) {
  case 62: return "x86_64";
  case 183: return "aarch64";
  case 40: return "arm (32-bit)";
  case 3: return "i386";
  default: return "an unknown architecture";
  }
}

/* The diagnostic of a file whose ELF structure does not fit in it. */
#define TRUNCATED(fmt, ...) \
  kn_diag_error(d, "'%s' is truncated or not an ELF shared object: " fmt, path, __VA_ARGS__)

/* end = off + count * size, false on overflow or where end > file_size. */
static bool fits(uint64_t off, uint64_t count, uint64_t size, uint64_t file_size, uint64_t *end) {
  uint64_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes) || __builtin_add_overflow(off, bytes, end)) return false;
  return *end <= file_size;
}

/* Every byte the program headers and the section header table name lies
 * inside the file. dlopen maps each PT_LOAD segment by its file offset and
 * does not compare it with the file's size: a segment cut short by a
 * truncated copy is mapped anyway, and the first touch of a page past the
 * end of the file kills the process with SIGBUS instead of an error. */
static int check_extent(FILE *fp, const char *path, const Elf64_Ehdr *eh, uint64_t file_size,
                        kn_diag *d) {
  uint64_t end;
  if (eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phnum == 0 || eh->e_phnum == PN_XNUM)
    return TRUNCATED("%u program headers of %u bytes", (unsigned)eh->e_phnum, (unsigned)eh->e_phentsize);
  if (!fits(eh->e_phoff, eh->e_phnum, sizeof(Elf64_Phdr), file_size, &end))
    return TRUNCATED("its program headers end at byte %llu, the file has %llu", (unsigned long long)end,
                     (unsigned long long)file_size);
  for (unsigned i = 0; i < eh->e_phnum; i++) {
    Elf64_Phdr ph;
    if (fseek(fp, (long)(eh->e_phoff + i * sizeof ph), SEEK_SET) || fread(&ph, sizeof ph, 1, fp) != 1)
      return TRUNCATED("cannot read program header %u", i);
    if (ph.p_type == PT_LOAD && ph.p_filesz > ph.p_memsz)
      return TRUNCATED("segment %u holds %llu file bytes in %llu bytes of memory", i,
                       (unsigned long long)ph.p_filesz, (unsigned long long)ph.p_memsz);
    if (!fits(ph.p_offset, 1, ph.p_filesz, file_size, &end))
      return TRUNCATED("segment %u ends at byte %llu, the file has %llu", i, (unsigned long long)end,
                       (unsigned long long)file_size);
  }
  /* not needed to load, but a copy that lost them lost its end */
  if (eh->e_shoff && !fits(eh->e_shoff, eh->e_shnum, eh->e_shentsize, file_size, &end))
    return TRUNCATED("its section headers end at byte %llu, the file has %llu", (unsigned long long)end,
                     (unsigned long long)file_size);
  return 0;
}

static int check_elf(const char *path, kn_diag *d) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return kn_diag_error(d, "cannot open artifact '%s': %s", path, strerror(errno));
  struct stat st;
  unsigned char h[sizeof(Elf64_Ehdr)];
  int status = -1;
  if (fstat(fileno(fp), &st) != 0) {
    kn_diag_error(d, "cannot open artifact '%s': %s", path, strerror(errno));
    goto done;
  }
  size_t n = fread(h, 1, sizeof h, fp);
  /* a prefix of the magic is a cut copy; anything else is another file */
  if (memcmp(h, "\x7f" "ELF", n < 4 ? n : 4) != 0) {
    kn_diag_error(d, "'%s' is not a Kiln artifact (not an ELF shared library)", path);
    goto done;
  }
  if (n < 20) {
    TRUNCATED("%zu bytes, shorter than an ELF header", n);
    goto done;
  }
  int machine = h[5] == 1 ? (h[18] | h[19] << 8) : (h[18] << 8 | h[19]);
  int type = h[5] == 1 ? (h[16] | h[17] << 8) : (h[16] << 8 | h[17]);
  if (h[4] != 2 || machine != HOST_MACHINE) {
    kn_diag_error(d, "'%s' is built for %s%s, but this machine is %s: run it on the target", path,
                  machine_name(machine), h[4] == 2 ? "" : " (32-bit)", HOST_ARCH);
    goto done;
  }
  if (type == 1) {
    kn_diag_error(d,
                  "'%s' is a relocatable object (.o artifact): link it into your program; "
                  "only .so artifacts can be loaded",
                  path);
    goto done;
  }
  if (type != 3) {
    kn_diag_error(d, "'%s' is not a shared library", path);
    goto done;
  }
  if (n < sizeof h) {
    TRUNCATED("%zu bytes, shorter than an ELF header", n);
    goto done;
  }
  Elf64_Ehdr eh;
  memcpy(&eh, h, sizeof eh);
  if (h[EI_DATA] != HOST_DATA || eh.e_ehsize != sizeof eh) {
    TRUNCATED("%s", "its ELF header does not describe a 64-bit object of this machine");
    goto done;
  }
  status = check_extent(fp, path, &eh, (uint64_t)st.st_size, d);
done:
  fclose(fp);
  return status;
}

int kn_loader_open(const char *path, kn_loader *l, kn_diag *d) {
  memset(l, 0, sizeof *l);
  if (check_elf(path, d)) return -1;
  /* dlopen searches the library path for names without a slash. */
  char *full = NULL;
  if (!strchr(path, '/')) {
    full = malloc(strlen(path) + 3);
    KN_ASSERT(full, "out of memory");
    sprintf(full, "./%s", path);
  }
  void *dl = dlopen(full ? full : path, RTLD_NOW | RTLD_LOCAL);
  free(full);
  if (!dl) {
    const char *err = dlerror();
    return kn_diag_error(d, "cannot load artifact '%s': %s", path, err ? err : "dlopen failed");
  }
  const kiln_artifact *art = dlsym(dl, "kiln_artifact_v1");
  if (!art) {
    dlclose(dl);
    return kn_diag_error(d, "'%s' is not a Kiln artifact (no kiln_artifact_v1 symbol)", path);
  }
  if (art->abi_version != KILN_ABI_VERSION) {
    unsigned v = art->abi_version;
    dlclose(dl);
    return kn_diag_error(d, "'%s' has artifact ABI version %u; this kiln reads version %d", path,
                         v, KILN_ABI_VERSION);
  }
  l->dl = dl;
  l->art = art;
  return 0;
}

void kn_loader_close(kn_loader *l) {
  if (l->dl) dlclose(l->dl);
  memset(l, 0, sizeof *l);
}

kn_dtype kn_loader_dtype(const kiln_tensor_desc *t) { return kn_dtype_from_onnx(t->dtype); }

int64_t kn_loader_numel(const kiln_tensor_desc *t, int64_t batch) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) {
    int64_t dim = t->dims[i];
    if (dim < 0) return -1;
    if ((t->batch_mask >> i) & 1u)
      if (__builtin_mul_overflow(dim, batch, &dim)) return -1;
    if (__builtin_mul_overflow(n, dim, &n)) return -1;
  }
  return n;
}

int64_t kn_loader_bytes(const kiln_tensor_desc *t, int64_t batch) {
  int64_t n = kn_loader_numel(t, batch), bytes;
  size_t size = kn_dtype_size(kn_loader_dtype(t));
  if (n < 0 || size == 0 || __builtin_mul_overflow(n, (int64_t)size, &bytes)) return -1;
  return bytes;
}

void kn_loader_shape_str(const kiln_tensor_desc *t, int64_t batch, char *buf, size_t cap) {
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < t->rank && len < cap; i++) {
    const char *sep = i ? ", " : "";
    int w;
    if ((t->batch_mask >> i) & 1u) {
      if (batch > 0)
        w = snprintf(buf + len, cap - len, "%s%lld", sep, (long long)(t->dims[i] * batch));
      else if (t->dims[i] == 1)
        w = snprintf(buf + len, cap - len, "%sN", sep);
      else
        w = snprintf(buf + len, cap - len, "%s%lld*N", sep, (long long)t->dims[i]);
    } else {
      w = snprintf(buf + len, cap - len, "%s%lld", sep, (long long)t->dims[i]);
    }
    if (w < 0) break;
    len += (size_t)w;
  }
}

void *kn_loader_workspace_new(const kiln_artifact *a, kn_diag *d) {
  size_t align = a->workspace_align >= (int64_t)sizeof(void *) ? (size_t)a->workspace_align : 64;
  if (align & (align - 1)) {
    kn_diag_error(d, "artifact workspace alignment %lld is not a power of two",
                  (long long)a->workspace_align);
    return NULL;
  }
  size_t size = a->workspace_size > 0 ? (size_t)a->workspace_size : 1;
  size = (size + align - 1) & ~(align - 1);
  void *ws = aligned_alloc(align, size);
  if (!ws) kn_diag_error(d, "cannot allocate a workspace of %zu bytes", size);
  return ws;
}

void kn_loader_workspace_free(void *ws) { free(ws); }

const char *kn_loader_status_name(int status) {
  switch (status) {
  case KILN_OK: return "ok";
  case KILN_ERR_BATCH: return "batch size outside [1, max_batch]";
  case KILN_ERR_ARG: return "a NULL pointer or a misaligned workspace";
  case KILN_ERR_THREADS: return "thread count outside [1, 256] or threads failed to start";
  case KILN_ERR_CAPACITY: return "the profile event buffer is too small";
  case KILN_ERR_VALUE: return "an input value contradicts the shapes the model declares (see docs/abi.md)";
  case KILN_ERR_DEVICE: return "no usable GPU";
  case KILN_ERR_INDEX: return "a gather or scatter index is out of range (see docs/ops.md)";
  default: return "unknown error";
  }
}

/* The artifact's own one-line reason (ABI 1.4), else the status's name. */
static const char *reason(const kiln_artifact *a, int status) {
  const char *msg = a->abi_minor >= 4 && a->last_error ? a->last_error() : NULL;
  return msg && *msg ? msg : kn_loader_status_name(status);
}

int kn_loader_run(const kn_loader *l, const void *const *inputs, void *const *outputs,
                  void *workspace, int64_t batch, kn_diag *d) {
  int st = l->art->run(inputs, outputs, workspace, batch);
  if (st != KILN_OK)
    return kn_diag_error(d, "%s_run failed: %s (status %d)", l->art->prefix, reason(l->art, st), st);
  return 0;
}

int kn_loader_set_threads(const kn_loader *l, int n, kn_diag *d) {
  int st = l->art->set_threads(n);
  if (st != KILN_OK)
    return kn_diag_error(d, "%s_set_threads(%d) failed: %s", l->art->prefix, n,
                         kn_loader_status_name(st));
  return 0;
}

int kn_loader_run_profiled(const kn_loader *l, const void *const *inputs, void *const *outputs,
                           void *workspace, int64_t batch, kiln_prof_event *events,
                           int64_t capacity, int64_t *n_events, kn_diag *d) {
  const kiln_artifact *a = l->art;
  if (a->abi_minor < 1 || !a->run_profiled)
    return kn_diag_error(d,
                         "artifact '%s' (ABI %u.%u, kiln %s) has no %s_run_profiled entry: "
                         "recompile it with this kiln to profile it",
                         a->prefix, a->abi_version, a->abi_minor, a->kiln_version, a->prefix);
  int st = a->run_profiled(inputs, outputs, workspace, batch, events, capacity, n_events);
  if (st == KILN_ERR_CAPACITY)
    return kn_diag_error(d, "%s_run_profiled: %lld events needed, the buffer holds %lld", a->prefix,
                         (long long)*n_events, (long long)capacity);
  if (st != KILN_OK)
    return kn_diag_error(d, "%s_run_profiled failed: %s (status %d)", a->prefix, reason(a, st), st);
  return 0;
}
