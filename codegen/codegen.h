/* codegen.h — the public entry points of the CPU back end.
 *
 *   kn_cg_package   plan + target -> model.so / model.o and model.h
 *   kn_cg_header_path / kn_cg_header_check   where the header goes, and
 *                   whether the file there belongs to another artifact
 *   kn_cg_check_target   can this kiln package for a target (runtime present)
 *   kn_cg_kernel_asm / kn_cg_kernel_ir   one kernel as assembly / LLVM IR
 *                   text (tests, --dump, tuning diagnostics)
 *   kn_cg_llvm_version   the LLVM kiln was built with (kiln --version)
 *
 * All functions are thread-safe: each call owns its LLVM context. */
#ifndef KN_CODEGEN_H
#define KN_CODEGEN_H

#include "codegen/target.h"
#include "codegen/plan.h"

/* Compiles every kernel of `plan`, embeds constants, the plan tables and the
 * runtime, and writes `out_path` (".so": shared library exporting
 * PREFIX_artifact / PREFIX_run / PREFIX_set_threads and kiln_artifact_v1;
 * ".o": relocatable object exporting the first three only; ".c" for the
 * portable C target: one C source file, see c_package.c) plus the header
 * at `header_path`, or when NULL next to it (same stem, ".h"). Both appear
 * atomically: on any failure neither file is created or replaced. A header
 * kiln wrote for another prefix is not replaced: that is a diagnostic,
 * before anything is written (kn_cg_header_check). Returns 0, or -1 with a
 * diagnostic. */
int kn_cg_package(const kn_plan *plan, const kn_target *t, const char *out_path, const char *header_path,
                  kn_diag *d);

/* A GPU artifact (t->arch == KN_ARCH_CUDA) from a plan of GPU kernels,
 * the module compiled from them (codegen/cuda.h: cubins and PTX) and each
 * step's launch shape (launches[s] for plan step s): a host .so whose
 * runtime (rt/runtime_cuda.c) opens the driver with dlopen on the first
 * run; it needs no CUDA library to load. The kernels' parameters are the
 * step's arguments as device pointers, then the batch as a long long
 * (docs/abi.md, "GPU artifacts"). Writes `out_path` (.so only) and its
 * header atomically. Returns 0, or -1 with a diagnostic. */
struct kn_cuda_module;
struct kn_cuda_launch;
int kn_cg_package_cuda(const kn_plan *plan, const kn_target *t, const struct kn_cuda_module *module,
                       const struct kn_cuda_launch *launches, const char *out_path, const char *header_path,
                       kn_diag *d);

/* Where the header of `out_path` goes: header_path when not NULL, else the
 * output's stem + ".h" (malloc'd; the caller frees). */
char *kn_cg_header_path(const char *out_path, const char *header_path);
/* -1 with a one-line diagnostic when `path` holds a header kiln wrote for a
 * prefix other than `prefix` (it belongs to another artifact), or a file
 * kiln did not write (replacing it would lose it); 0 when the file is
 * missing, empty, or kiln's for the same prefix. */
int kn_cg_header_check(const char *path, const char *prefix, kn_diag *d);

/* 0 if this kiln can package artifacts for `t` (it carries a runtime for the
 * target's architecture: the host's, and aarch64's when it was built with the
 * cross compiler); else -1 with a one-line diagnostic saying what to
 * install. kn_cg_package checks the same; callers check early to fail fast. */
int kn_cg_check_target(const kn_target *t, kn_diag *d);

/* One kernel, optimized, as target assembly / LLVM IR text (malloc'd; the
 * caller frees). `optimized` false gives the IR as emitted, before O3. */
int kn_cg_kernel_asm(const kn_kernel *k, const kn_target *t, char **text, kn_diag *d);
int kn_cg_kernel_ir(const kn_kernel *k, const kn_target *t, bool optimized, char **text,
                    kn_diag *d);

/* The version of the LLVM headers kiln was built with ("14.0.6"). */
const char *kn_cg_llvm_version(void);

#endif
