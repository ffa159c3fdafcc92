/* package.h — internal pieces of packaging (codegen/package*.c): temp files,
 * external tools, the header writer. The public entry is kn_cg_package in
 * codegen.h. */
#ifndef KN_CG_PACKAGE_H
#define KN_CG_PACKAGE_H

#include <stddef.h>

#include "codegen/codegen.h"

/* A private directory next to the output (same file system, so the final
 * rename is atomic). Removing it deletes every file created in it. */
typedef struct kn_cg_tmpdir {
  char path[4096];
} kn_cg_tmpdir;

int kn_cg_tmpdir_create(kn_cg_tmpdir *t, const char *output_path, kn_diag *d);
void kn_cg_tmpdir_remove(kn_cg_tmpdir *t);
/* dir/name into buf (asserts it fits). */
const char *kn_cg_tmpdir_file(const kn_cg_tmpdir *t, const char *name, char *buf, size_t cap);
int kn_cg_write_file(const char *path, const void *data, size_t n, kn_diag *d);

/* Links kernels.o + the runtime object into `out` (.so when shared, else a
 * relocatable .o with the runtime's hidden symbols made local). `cross`: the
 * objects are aarch64 on another host, so a .so is linked with the aarch64
 * cross compiler against the board's libc. */
int kn_cg_link(const kn_cg_tmpdir *t, const char *kernels_obj, const char *rt_obj,
               const char *out, bool shared, bool cross, kn_diag *d);

/* The header of an artifact on its way into place (package_header.c):
 * begin checks that `path` (header_path, or OUT.h beside out_path) holds
 * no header of another prefix and makes a private folder beside it, before
 * anything else is written; write puts the header there; commit renames it
 * into place; end removes what is left. */
typedef struct kn_cg_header_out {
  char *path;
  kn_cg_tmpdir tmp;
  char tmp_file[4200];
} kn_cg_header_out;
int kn_cg_header_begin(kn_cg_header_out *h, const char *out_path, const char *header_path, const char *prefix,
                       kn_diag *d);
int kn_cg_header_write(kn_cg_header_out *h, const kn_plan *plan, const kn_target *t, const char *out_path,
                       kn_diag *d);
int kn_cg_header_commit(kn_cg_header_out *h, kn_diag *d);
void kn_cg_header_end(kn_cg_header_out *h);

/* Bad plans (indices, ABI bounds, names) as diagnostics. */
int kn_cg_check_plan(const kn_plan *plan, kn_diag *d);

/* GPU plans (package_cuda.c): the plan against its module and launch
 * shapes, as diagnostics; the host kernel that writes every step's grid
 * for a batch (kiln_gpu.grid), in the plan's arena. */
struct kn_cuda_module;
struct kn_cuda_launch;
int kn_cg_check_cuda(const kn_plan *plan, const struct kn_cuda_module *module,
                     const struct kn_cuda_launch *launches, kn_diag *d);
kn_kernel *kn_cg_cuda_grid_kernel(const kn_plan *plan, const struct kn_cuda_launch *launches);

/* The portable C artifact (c_package.c): OUT.c + OUT.h, for --target c. */
int kn_cg_package_c(const kn_plan *plan, const kn_target *t, const char *out_path, const char *header_path,
                    kn_diag *d);

/* "TRIPLE -mcpu=CPU [-mattr=FEATURES]" (or "c") into buf. */
void kn_cg_target_string(const kn_target *t, char *buf, size_t cap);

#endif
