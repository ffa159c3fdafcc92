/* target.h — what the schedules and codegen know about the machine the
 * artifact will run on. Parsed from a target string by kn_target_parse
 * (codegen/target.c); KILN_TARGET, else the host, is the default. The
 * schedules read the description through this header alone (its accessors
 * are inline), so kn_schedule does not link the code generator. */
#ifndef KN_TARGET_H
#define KN_TARGET_H

#include "base/base.h"

/* KN_ARCH_C: portable C source (`--target c`), built by the user's C compiler
 * for any machine; schedules assume 128-bit vectors and 16 registers. */
/* KN_ARCH_CUDA: NVIDIA GPUs (`--target "cuda -arch=sm_80,sm_90"`): CUDA C
 * compiled by NVRTC to a cubin per architecture in `sm` plus PTX for newer
 * ones, run through the driver API by the artifact's runtime. */
typedef enum kn_arch { KN_ARCH_X86_64, KN_ARCH_AARCH64, KN_ARCH_C, KN_ARCH_CUDA } kn_arch;

#define KN_TARGET_MAX_SM 8

typedef struct kn_target {
  kn_arch arch;
  char triple[64];    /* "x86_64-unknown-linux-gnu" */
  char cpu[64];       /* "skylake-avx512", "cortex-a76" */
  char features[512]; /* LLVM feature string "+avx512f,+fma,..." */
  int vector_bits;    /* widest native float vector: 512, 256, 128 */
  int vector_regs;    /* architectural vector registers: 32 (AVX-512, NEON), 16 */
  bool has_fma;
  bool has_avx512dq; /* vreducps and friends (every AVX-512 CPU but Knights Landing / Mill) */
  /* the lowering's software prefetch hints pay here (schedule/prefetch.c):
   * x86 CPUs but AMD's, whose PREFETCHT1 does not reliably fill L2
   * (docs/architecture.md, "Prefetch hints"); off on aarch64 (not
   * measured) and the portable C target (no prefetch there) */
  bool sw_prefetch;
  /* KN_ARCH_CUDA: the compute capabilities compiled for (80 = sm_80),
   * ascending, no duplicates */
  int n_sm;
  int sm[KN_TARGET_MAX_SM];
} kn_target;

/* The compute capabilities `-arch=` accepts, as text for diagnostics. */
#define KN_TARGET_VALID_SMS "sm_80, sm_86, sm_87, sm_89, sm_90, sm_100, sm_120"


/* Parses "TRIPLE [-mcpu=CPU] [-mattr=+a,-b]", "host", "c" or
 * "cuda [-arch=sm_XX[,sm_YY...]]" (default sm_80,sm_90). NULL or blank is the
 * environment's KILN_TARGET when set (its diagnostics start with
 * "KILN_TARGET='...': "), else the host. Returns 0, or -1 with a diagnostic
 * naming the bad part. */
int kn_target_parse(const char *spec, kn_target *t, kn_diag *d);
/* Lanes of a native vector of element type `t`. */
static inline int kn_target_lanes(const kn_target *t, kn_dtype dtype) {
  size_t bytes = kn_dtype_size(dtype);
  if (dtype == KN_DT_F16 || dtype == KN_DT_BF16 || kn_dtype_is_f8(dtype)) bytes = 4; /* computed in f32 */
  if (bytes == 0) return 1;
  int lanes = t->vector_bits / (int)(bytes * 8);
  return lanes > 1 ? lanes : 1;
}

#endif
