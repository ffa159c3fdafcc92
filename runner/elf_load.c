/* elf_load.c — a minimal loader for Kiln artifacts, used by the static
 * kiln-runner instead of dlopen.
 *
 * Why: a static glibc program can dlopen an artifact, but the artifact then
 * binds to a second libc.so.6 whose threads crash, and that libc must be the
 * very glibc version the runner was linked with. Kiln artifacts import a
 * handful of libc/libm functions (pthreads, sysconf, getenv, math), so the
 * runner maps the library itself and binds those imports to its own
 * statically linked copies: threads work, and nothing of the board's libc
 * is needed.
 *
 * What it handles: ELF64 little-endian ET_DYN for this machine; PT_LOAD
 * segments mapped into one anonymous region; RELA relocations RELATIVE,
 * ABS64 / GLOB_DAT / JUMP_SLOT against defined symbols or the import table
 * below (weak imports missing -> 0); DT_INIT and DT_INIT_ARRAY run once.
 * No TLS, no other relocation types, no lazy binding: anything else is
 * refused with a message (the caller falls back to dlopen). Every offset
 * read from the file is bounds-checked: a malformed upload gets an error,
 * never a wild read. */
#include "runner/elf_load.h"

#include <elf.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__aarch64__)
#define R_RELATIVE R_AARCH64_RELATIVE
#define R_ABS64 R_AARCH64_ABS64
#define R_GLOB_DAT R_AARCH64_GLOB_DAT
#define R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define MACHINE EM_AARCH64
#elif defined(__x86_64__)
#define R_RELATIVE R_X86_64_RELATIVE
#define R_ABS64 R_X86_64_64
#define R_GLOB_DAT R_X86_64_GLOB_DAT
#define R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define MACHINE EM_X86_64
#else
#define MACHINE (-1)
#define R_RELATIVE (-1)
#define R_ABS64 (-1)
#define R_GLOB_DAT (-1)
#define R_JUMP_SLOT (-1)
#endif

extern int __sched_cpucount(size_t setsize, const cpu_set_t *set);

typedef struct import {
  const char *name;
  void *addr;
} import;

#define FN(f) {#f, (void *)(uintptr_t)f}
/* What artifacts may import: the runtime's libc calls and the libm functions
 * kernels call for ops without an inline expansion. */
static const import imports[] = {
    FN(pthread_create), FN(pthread_join), FN(pthread_attr_init), FN(pthread_attr_destroy),
    FN(pthread_attr_setstacksize), FN(pthread_mutex_lock), FN(pthread_mutex_unlock), FN(pthread_mutex_trylock),
    FN(pthread_mutex_init), FN(pthread_mutex_destroy), FN(pthread_cond_wait), FN(pthread_cond_broadcast),
    FN(pthread_cond_signal), FN(pthread_cond_init), FN(pthread_cond_destroy), FN(pthread_self),
    FN(__sched_cpucount), FN(sched_getaffinity), FN(sched_yield), FN(sysconf), FN(getenv), FN(getpid), FN(strtol),
    FN(memcpy), FN(memmove), FN(memset), FN(memcmp), FN(strlen), FN(strcmp), FN(malloc), FN(calloc), FN(free),
    FN(aligned_alloc), FN(posix_memalign), FN(abort), FN(usleep), FN(clock_gettime),
    FN(expf), FN(exp), FN(logf), FN(log), FN(log1pf), FN(expm1f), FN(powf), FN(pow), FN(sqrtf), FN(sqrt),
    FN(tanhf), FN(tanh), FN(erff), FN(erf), FN(sinf), FN(sin), FN(cosf), FN(cos), FN(tanf), FN(tan), FN(asinf),
    FN(acosf), FN(atanf), FN(atan2f), FN(sinhf), FN(coshf), FN(asinhf), FN(acoshf), FN(atanhf), FN(fmodf),
    FN(fmod), FN(floorf), FN(floor), FN(ceilf), FN(ceil), FN(roundf), FN(round), FN(rintf), FN(rint),
    FN(nearbyintf), FN(truncf), FN(fabsf), FN(fminf), FN(fmaxf), FN(fmaf), FN(fma), FN(log2f), FN(exp2f),
    FN(log10f), FN(cbrtf), FN(lgammaf), FN(tgammaf), FN(log1p), FN(expm1), FN(asin), FN(acos), FN(atan),
    FN(atan2), FN(sinh), FN(cosh), FN(asinh), FN(acosh), FN(atanh), FN(trunc), FN(nearbyint), FN(fabs), FN(fmin),
    FN(fmax), FN(log2), FN(exp2), FN(log10), FN(cbrt),
};

static int fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
  return -1;
}

static bool in_file(size_t n, uint64_t off, uint64_t len) { return off <= n && len <= n - off; }

int kn_runner_elf_load(const unsigned char *file, size_t n, kn_elf_image *img, char *err, size_t cap) {
  memset(img, 0, sizeof *img);
  if (n < sizeof(Elf64_Ehdr) || memcmp(file, ELFMAG, SELFMAG)) return fail(err, cap, "not an ELF file");
  Elf64_Ehdr eh;
  memcpy(&eh, file, sizeof eh);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_machine != MACHINE ||
      eh.e_type != ET_DYN)
    return fail(err, cap, "not a 64-bit shared library for this machine");
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || !in_file(n, eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr)) ||
      eh.e_shentsize != sizeof(Elf64_Shdr) || !in_file(n, eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr)) ||
      ((eh.e_phoff | eh.e_shoff) & 7))
    return fail(err, cap, "bad program or section header table");
  long page = sysconf(_SC_PAGESIZE);
  uint64_t lo = UINT64_MAX, hi = 0;
  const Elf64_Phdr *dyn_ph = NULL;
  for (int i = 0; i < eh.e_phnum; i++) {
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(file + eh.e_phoff) + i;
    if (ph->p_type == PT_TLS) return fail(err, cap, "the library uses thread-local storage");
    if (ph->p_type == PT_DYNAMIC) dyn_ph = ph;
    if (ph->p_type != PT_LOAD) continue;
    if (ph->p_filesz > ph->p_memsz || !in_file(n, ph->p_offset, ph->p_filesz) || ph->p_vaddr > (1ull << 40) ||
        ph->p_memsz > (1ull << 34))
      return fail(err, cap, "bad PT_LOAD segment %d", i);
    if (ph->p_vaddr < lo) lo = ph->p_vaddr;
    if (ph->p_vaddr + ph->p_memsz > hi) hi = ph->p_vaddr + ph->p_memsz;
  }
  if (hi <= lo || !dyn_ph) return fail(err, cap, "no loadable segments or no dynamic section");
  lo &= ~(uint64_t)(page - 1);
  size_t span = (size_t)((hi - lo + (uint64_t)page - 1) & ~(uint64_t)(page - 1));
  unsigned char *map = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return fail(err, cap, "cannot map %zu bytes", span);
  unsigned char *base = map - lo; /* vaddr v lives at base + v */
  img->map = map;
  img->span = span;
  for (int i = 0; i < eh.e_phnum; i++) {
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(file + eh.e_phoff) + i;
    if (ph->p_type == PT_LOAD) memcpy(base + ph->p_vaddr, file + ph->p_offset, ph->p_filesz);
  }
#define IN_IMAGE(v, len) ((v) >= lo && (v) - lo <= span && (uint64_t)(len) <= span - ((v) - lo))
  /* the dynamic section */
  uint64_t rela = 0, relasz = 0, jmprel = 0, pltrelsz = 0, symtab = 0, strtab = 0, strsz = 0, init = 0,
           init_array = 0, init_arraysz = 0;
  if (!IN_IMAGE(dyn_ph->p_vaddr, dyn_ph->p_memsz) || (dyn_ph->p_vaddr & 7)) goto bad_dynamic;
  for (const Elf64_Dyn *dy = (const Elf64_Dyn *)(base + dyn_ph->p_vaddr);
       (const unsigned char *)(dy + 1) <= base + dyn_ph->p_vaddr + dyn_ph->p_memsz && dy->d_tag != DT_NULL; dy++) {
    uint64_t v = dy->d_un.d_val;
    switch (dy->d_tag) {
    case DT_RELA: rela = v; break;
    case DT_RELASZ: relasz = v; break;
    case DT_JMPREL: jmprel = v; break;
    case DT_PLTRELSZ: pltrelsz = v; break;
    case DT_SYMTAB: symtab = v; break;
    case DT_STRTAB: strtab = v; break;
    case DT_STRSZ: strsz = v; break;
    case DT_INIT: init = v; break;
    case DT_INIT_ARRAY: init_array = v; break;
    case DT_INIT_ARRAYSZ: init_arraysz = v; break;
    case DT_PLTREL:
      if (v != DT_RELA) return kn_runner_elf_unload(img), fail(err, cap, "PLT relocations are not RELA");
      break;
    case DT_REL:
    case DT_TEXTREL: return kn_runner_elf_unload(img), fail(err, cap, "REL or text relocations are not supported");
    default: break;
    }
  }
  /* the symbol count: the .dynsym section's size */
  uint64_t nsyms = 0;
  for (int i = 0; i < eh.e_shnum; i++) {
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(file + eh.e_shoff) + i;
    if (sh->sh_type == SHT_DYNSYM && sh->sh_entsize == sizeof(Elf64_Sym)) nsyms = sh->sh_size / sizeof(Elf64_Sym);
  }
  if (((dyn_ph->p_vaddr | symtab | rela | jmprel | init_array) & 7) != 0) goto bad_dynamic; /* aligned tables */
  if (!nsyms || !IN_IMAGE(symtab, nsyms * sizeof(Elf64_Sym)) || !IN_IMAGE(strtab, strsz) || !strsz ||
      !IN_IMAGE(rela, relasz) || !IN_IMAGE(jmprel, pltrelsz) || !IN_IMAGE(init_array, init_arraysz) ||
      (init && !IN_IMAGE(init, 4)))
    goto bad_dynamic;
  const Elf64_Sym *syms = (const Elf64_Sym *)(base + symtab);
  const char *strs = (const char *)(base + strtab);
  if (strs[strsz - 1] != 0) goto bad_dynamic;
  /* relocations */
  for (int part = 0; part < 2; part++) {
    const Elf64_Rela *r = (const Elf64_Rela *)(base + (part ? jmprel : rela));
    uint64_t count = (part ? pltrelsz : relasz) / sizeof(Elf64_Rela);
    for (uint64_t k = 0; k < count; k++, r++) {
      uint32_t type = (uint32_t)ELF64_R_TYPE(r->r_info), si = (uint32_t)ELF64_R_SYM(r->r_info);
      if (!IN_IMAGE(r->r_offset, 8)) goto bad_dynamic;
      uint64_t value;
      if (type == R_RELATIVE) {
        value = (uint64_t)(uintptr_t)base + (uint64_t)r->r_addend;
      } else if (type == R_ABS64 || type == R_GLOB_DAT || type == R_JUMP_SLOT) {
        if (si >= nsyms || syms[si].st_name >= strsz) goto bad_dynamic;
        const Elf64_Sym *s = &syms[si];
        const char *name = strs + s->st_name;
        if (s->st_shndx != SHN_UNDEF) {
          if (s->st_value < lo || s->st_value - lo >= span) goto bad_dynamic;
          value = (uint64_t)(uintptr_t)(base + s->st_value);
        } else {
          value = 0;
          for (size_t m = 0; m < sizeof imports / sizeof imports[0]; m++)
            if (!strcmp(imports[m].name, name)) value = (uint64_t)(uintptr_t)imports[m].addr;
          if (!value && ELF64_ST_BIND(s->st_info) != STB_WEAK) {
            fail(err, cap, "the library imports '%.60s', which this runner does not provide", name);
            kn_runner_elf_unload(img); /* after the message: name lives in the image */
            return -1;
          }
        }
        value += (uint64_t)r->r_addend;
      } else {
        kn_runner_elf_unload(img);
        return fail(err, cap, "unsupported relocation type %u", type);
      }
      memcpy(base + r->r_offset, &value, 8);
    }
  }
  /* the descriptor */
  for (uint64_t k = 0; k < nsyms && !img->art; k++)
    if (syms[k].st_shndx != SHN_UNDEF && syms[k].st_name < strsz && !strcmp(strs + syms[k].st_name, "kiln_artifact_v1") &&
        IN_IMAGE(syms[k].st_value, sizeof(kiln_artifact)))
      img->art = (const kiln_artifact *)(base + syms[k].st_value);
  if (!img->art) {
    kn_runner_elf_unload(img);
    return fail(err, cap, "not a Kiln artifact (no kiln_artifact_v1 symbol)");
  }
  /* protections: each page gets the union of the segments on it */
  for (int i = 0; i < eh.e_phnum; i++) {
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(file + eh.e_phoff) + i;
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    uint64_t a = ph->p_vaddr & ~(uint64_t)(page - 1), b = ph->p_vaddr + ph->p_memsz;
    int prot = PROT_READ | PROT_EXEC;
    for (int j = 0; j < eh.e_phnum; j++) { /* a page shared with data stays writable */
      const Elf64_Phdr *q = (const Elf64_Phdr *)(file + eh.e_phoff) + j;
      uint64_t qa = q->p_vaddr & ~(uint64_t)(page - 1), qb = q->p_vaddr + q->p_memsz;
      if (q->p_type == PT_LOAD && (q->p_flags & PF_W) && qa < b && a < qb) prot |= PROT_WRITE;
    }
    if (mprotect(base + a, (size_t)(b - a), prot) != 0) {
      kn_runner_elf_unload(img);
      return fail(err, cap, "cannot make the code executable");
    }
  }
  __builtin___clear_cache((char *)map, (char *)map + span);
  if (init) ((void (*)(void))(uintptr_t)(base + init))();
  for (uint64_t k = 0; k < init_arraysz / 8; k++) {
    uint64_t fn;
    memcpy(&fn, base + init_array + 8 * k, 8);
    if (!fn || fn == (uint64_t)-1) continue;
    if (fn < (uint64_t)(uintptr_t)map || fn - (uint64_t)(uintptr_t)map >= span) {
      kn_runner_elf_unload(img);
      return fail(err, cap, "an initializer points outside the library");
    }
    ((void (*)(void))(uintptr_t)fn)();
  }
  return 0;
bad_dynamic:
  kn_runner_elf_unload(img);
  return fail(err, cap, "malformed dynamic section, symbols or relocations");
#undef IN_IMAGE
}

void kn_runner_elf_unload(kn_elf_image *img) {
  if (img->map) munmap(img->map, img->span);
  memset(img, 0, sizeof *img);
}
