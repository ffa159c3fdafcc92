/* elf_load.h — the static kiln-runner's own loader for artifacts
 * (elf_load.c): maps a .so held in memory and binds its imports to the
 * runner's statically linked libc, so that no board libc is involved. */
#ifndef KN_RUNNER_ELF_LOAD_H
#define KN_RUNNER_ELF_LOAD_H

#include <stdbool.h>
#include <stddef.h>

#include "include/kiln/artifact.h"

typedef struct kn_elf_image {
  void *map;
  size_t span;
  const kiln_artifact *art; /* kiln_artifact_v1 inside the image */
} kn_elf_image;

/* 0, or -1 with a one-line reason in err (nothing stays mapped). */
int kn_runner_elf_load(const unsigned char *file, size_t n, kn_elf_image *img, char *err, size_t cap);
void kn_runner_elf_unload(kn_elf_image *img);

#endif
