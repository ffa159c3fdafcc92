/* target.c — parses target strings ("host", "x86_64-linux-gnu -mcpu=skylake-avx512
 * -mattr=+avx2,-avx512f", "aarch64-linux-gnu -mcpu=cortex-a76") into a
 * kn_target.
 *
 * The LLVM 14 C API cannot list a target's CPUs or features, nor say which
 * features a CPU implies, so the accepted names and the vector class of each
 * x86 CPU are kept in the tables below (taken from `llc -mcpu=help`). The
 * host is described by LLVM itself; its feature string is trimmed to the ISA
 * features that matter for code generation so it fits kn_target.features and
 * stays readable in tuning records. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include "codegen/target.h"

void kn_cg_init_llvm(void); /* llvm_module.c */

static const char x86_cpus[] =
    "alderlake amdfam10 athlon athlon-4 athlon-fx athlon-mp athlon-tbird athlon-xp athlon64 "
    "athlon64-sse3 atom barcelona bdver1 bdver2 bdver3 bdver4 bonnell broadwell btver1 btver2 "
    "c3 c3-2 cannonlake cascadelake cooperlake core-avx-i core-avx2 core2 corei7 corei7-avx "
    "generic geode goldmont goldmont-plus haswell i386 i486 i586 i686 icelake-client "
    "icelake-server ivybridge k6 k6-2 k6-3 k8 k8-sse3 knl knm lakemont nehalem nocona opteron "
    "opteron-sse3 penryn pentium pentium-m pentium-mmx pentium2 pentium3 pentium3m pentium4 "
    "pentium4m pentiumpro prescott rocketlake sandybridge sapphirerapids silvermont skx skylake "
    "skylake-avx512 slm tigerlake tremont westmere winchip-c6 winchip2 x86-64 x86-64-v2 "
    "x86-64-v3 x86-64-v4 yonah znver1 znver2 znver3";

/* Vector class of the x86 CPUs that have more than SSE. */
static const char x86_cpus_512[] =
    "cannonlake cascadelake cooperlake icelake-client icelake-server knl knm rocketlake "
    "sapphirerapids skx skylake-avx512 tigerlake x86-64-v4";
static const char x86_cpus_256_fma[] =
    "alderlake bdver2 bdver3 bdver4 broadwell core-avx2 haswell skylake x86-64-v3 znver1 "
    "znver2 znver3";
static const char x86_cpus_256[] = "bdver1 btver2 core-avx-i corei7-avx ivybridge sandybridge";

static const char aarch64_cpus[] =
    "a64fx ampere1 apple-a10 apple-a11 apple-a12 apple-a13 apple-a14 apple-a7 apple-a8 "
    "apple-a9 apple-latest apple-m1 apple-s4 apple-s5 carmel cortex-a34 cortex-a35 "
    "cortex-a510 cortex-a53 cortex-a55 cortex-a57 cortex-a65 cortex-a65ae cortex-a710 "
    "cortex-a72 cortex-a73 cortex-a75 cortex-a76 cortex-a76ae cortex-a77 cortex-a78 "
    "cortex-a78c cortex-r82 cortex-x1 cortex-x1c cortex-x2 cyclone exynos-m3 exynos-m4 "
    "exynos-m5 falkor generic kryo neoverse-512tvb neoverse-e1 neoverse-n1 neoverse-n2 "
    "neoverse-v1 saphira thunderx thunderx2t99 thunderx3t110 thunderxt81 thunderxt83 "
    "thunderxt88 tsv110";

/* ISA features accepted in -mattr (tuning flags are left out on purpose). */
static const char x86_features[] =
    "3dnow 3dnowa 64bit adx aes amx-bf16 amx-int8 amx-tile avx avx2 avx512bf16 avx512bitalg "
    "avx512bw avx512cd avx512dq avx512er avx512f avx512fp16 avx512ifma avx512pf avx512vbmi "
    "avx512vbmi2 avx512vl avx512vnni avx512vp2intersect avx512vpopcntdq avxvnni bmi bmi2 "
    "cldemote clflushopt clwb clzero cmov crc32 cx16 cx8 enqcmd f16c fma fma4 fsgsbase fxsr "
    "gfni invpcid lwp lzcnt mmx movbe movdir64b movdiri mwaitx pclmul pconfig pku popcnt "
    "prefer-128-bit prefer-256-bit prefetchwt1 prfchw ptwrite rdpid rdrnd rdseed rtm sahf "
    "serialize sgx sha shstk sse sse2 sse3 sse4.1 sse4.2 sse4a ssse3 tbm tsxldtrk uintr vaes "
    "vpclmulqdq waitpkg wbnoinvd x87 xop xsave xsavec xsaveopt xsaves";
static const char aarch64_features[] =
    "aes bf16 complxnum crc crypto dotprod f32mm f64mm fp-armv8 fp16fml fullfp16 i8mm jsconv "
    "lse lse2 mte neon pauth rand ras rcpc rcpc-immo rdm sha2 sha3 sm4 sve sve2 sve2-aes "
    "sve2-bitperm sve2-sha3 sve2-sm4 v8.1a v8.2a v8.3a v8.4a v8.5a v8.6a v8.7a v8a v9a";

/* Host features kept in the target string. */
static const char x86_host_keep[] =
    "sse3 ssse3 sse4.1 sse4.2 popcnt avx avx2 fma f16c bmi bmi2 lzcnt movbe avx512f avx512cd "
    "avx512bw avx512dq avx512vl avx512vnni avx512bf16 avx512fp16 avx512ifma avx512vbmi "
    "avx512vbmi2 avx512bitalg avx512vpopcntdq avx512vp2intersect avxvnni amx-tile amx-int8 "
    "amx-bf16";
static const char aarch64_host_keep[] =
    "neon fp-armv8 fullfp16 fp16fml dotprod i8mm bf16 sve sve2 crc aes sha2 lse rcpc rdm";

/* Is `word` (length n) one of the space-separated words of `list`? */
static bool in_list(const char *list, const char *word, size_t n) {
  const char *p = list;
  while (*p) {
    const char *end = strchr(p, ' ');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && !strncmp(p, word, n)) return true;
    if (!end) break;
    p = end + 1;
  }
  return false;
}

static const char *arch_name(kn_arch a) {
  return a == KN_ARCH_X86_64 ? "x86_64" : a == KN_ARCH_AARCH64 ? "aarch64" : a == KN_ARCH_CUDA ? "cuda" : "c";
}

static int arch_of_triple(const char *triple, kn_arch *arch) {
  size_t n = strcspn(triple, "-");
  if ((n == 6 && !strncmp(triple, "x86_64", 6)) || (n == 5 && !strncmp(triple, "amd64", 5))) {
    *arch = KN_ARCH_X86_64;
    return 0;
  }
  if ((n == 7 && !strncmp(triple, "aarch64", 7)) || (n == 5 && !strncmp(triple, "arm64", 5))) {
    *arch = KN_ARCH_AARCH64;
    return 0;
  }
  return -1;
}

/* Appends ",+feat" style tokens; false if it would overflow. */
static bool append_feature(char *buf, size_t cap, const char *tok, size_t n) {
  size_t len = strlen(buf);
  if (len + n + 2 > cap) return false;
  if (len) buf[len++] = ',';
  memcpy(buf + len, tok, n);
  buf[len + n] = 0;
  return true;
}

static int cmp_feature(const void *a, const void *b) {
  return strcmp(*(const char *const *)a + 1, *(const char *const *)b + 1);
}

/* The host's features from the keep list, sorted by name (stable text for
 * tuning-record keys). */
static void host_features(kn_arch arch, char *out, size_t cap) {
  char *all = LLVMGetHostCPUFeatures();
  const char *keep = arch == KN_ARCH_X86_64 ? x86_host_keep : aarch64_host_keep;
  char *tokens[128];
  int n_tokens = 0;
  for (char *p = all; p && *p;) {
    size_t n = strcspn(p, ",");
    bool last = p[n] == 0;
    p[n] = 0;
    if (n > 1 && (p[0] == '+' || p[0] == '-') && in_list(keep, p + 1, n - 1) && n_tokens < 128)
      tokens[n_tokens++] = p;
    p += n + !last;
  }
  qsort(tokens, (size_t)n_tokens, sizeof *tokens, cmp_feature);
  out[0] = 0;
  for (int i = 0; i < n_tokens; i++)
    KN_ASSERT(append_feature(out, cap, tokens[i], strlen(tokens[i])), "host feature string too long");
  LLVMDisposeMessage(all);
}

/* AMD's x86 CPUs, by LLVM's names. */
static bool amd_cpu(const char *cpu) {
  static const char *const prefixes[] = {"znver", "bdver", "btver", "amdfam", "barcelona", "k6", "k8", "opteron", "athlon", "geode"};
  for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
    if (!strncmp(cpu, prefixes[i], strlen(prefixes[i]))) return true;
  return false;
}

/* Derives vector width / registers / FMA / prefetch from the CPU class and features. */
static void derive_vector_info(kn_target *t) {
  t->sw_prefetch = t->arch == KN_ARCH_X86_64 && !amd_cpu(t->cpu);
  if (t->arch == KN_ARCH_AARCH64) {
    t->vector_bits = 128;
    t->vector_regs = 32;
    t->has_fma = true;
    for (const char *p = t->features; *p;) {
      size_t n = strcspn(p, ",");
      if (n == 5 && !strncmp(p, "-neon", 5)) t->vector_bits = 64;
      p += n;
      if (*p == ',') p++;
    }
    return;
  }
  size_t cn = strlen(t->cpu);
  bool avx512 = in_list(x86_cpus_512, t->cpu, cn);
  bool fma = avx512 || in_list(x86_cpus_256_fma, t->cpu, cn);
  bool avx = fma || in_list(x86_cpus_256, t->cpu, cn);
  bool dq = avx512 && strcmp(t->cpu, "knl") && strcmp(t->cpu, "knm");
  for (const char *p = t->features; *p;) {
    size_t n = strcspn(p, ",");
    bool on = p[0] == '+';
    const char *name = p + 1;
    size_t len = n - 1;
#define IS(s) (len == strlen(s) && !strncmp(name, s, len))
    if (IS("avx512f")) {
      avx512 = on;
      if (on) avx = fma = true;
    } else if (IS("avx512dq")) {
      dq = on;
    } else if (IS("avx") || IS("avx2")) {
      if (on) avx = true;
      else {
        avx512 = false;
        if (IS("avx")) avx = fma = false;
      }
    } else if (IS("fma")) {
      fma = on;
      if (on) avx = true;
      else avx512 = false;
    } else if (!on && len >= 3 && !strncmp(name, "sse", 3)) {
      avx = avx512 = fma = false;
    }
#undef IS
    p += n;
    if (*p == ',') p++;
  }
  t->vector_bits = avx512 ? 512 : avx ? 256 : 128;
  t->vector_regs = avx512 ? 32 : 16;
  t->has_fma = fma;
  t->has_avx512dq = avx512 && dq;
}

static int set_str(char *dst, size_t cap, const char *src, size_t n, const char *what,
                   kn_diag *d) {
  if (n >= cap) return kn_diag_error(d, "target %s '%.*s' is too long", what, (int)n, src);
  memcpy(dst, src, n);
  dst[n] = 0;
  return 0;
}

static int host_arch(kn_arch *arch) {
  char *triple = LLVMGetDefaultTargetTriple();
  int r = arch_of_triple(triple, arch);
  LLVMDisposeMessage(triple);
  return r;
}

static int parse_mattr(kn_target *t, const char *list, size_t n, kn_diag *d) {
  const char *valid = t->arch == KN_ARCH_X86_64 ? x86_features : aarch64_features;
  for (size_t i = 0; i < n;) {
    size_t len = 0;
    while (i + len < n && list[i + len] != ',') len++;
    const char *tok = list + i;
    if (len < 2 || (tok[0] != '+' && tok[0] != '-'))
      return kn_diag_error(d, "target feature '%.*s' must look like +name or -name", (int)len,
                           tok);
    if (!in_list(valid, tok + 1, len - 1))
      return kn_diag_error(d, "unknown %s feature '%.*s' (valid: %s)", arch_name(t->arch),
                           (int)len - 1, tok + 1, valid);
    if (!append_feature(t->features, sizeof t->features, tok, len))
      return kn_diag_error(d, "target feature list is too long");
    i += len + 1;
  }
  return 0;
}

/* "c": portable C source for any machine the user's C compiler reaches. The
 * schedules assume 128-bit vectors (SSE, NEON, RVV at its minimum...) and 16
 * vector registers, which every SIMD ISA has; no FMA is assumed. */
static int parse_portable_c(const char *rest, kn_target *t, kn_diag *d) {
  while (*rest == ' ') rest++;
  if (*rest)
    return kn_diag_error(d, "target 'c' takes no options (got '%s'); the C compiler that builds the "
                            "artifact chooses the machine", rest);
  t->arch = KN_ARCH_C;
  strcpy(t->triple, "c");
  strcpy(t->cpu, "generic");
  t->features[0] = 0;
  t->vector_bits = 128;
  t->vector_regs = 16;
  t->has_fma = false;
  t->has_avx512dq = false;
  return 0;
}

static bool valid_sm(int sm) {
  static const int valid[] = {80, 86, 87, 89, 90, 100, 120};
  for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++)
    if (valid[i] == sm) return true;
  return false;
}

/* One "sm_XX" of -arch= into t->sm (sorted, without duplicates). */
static int add_sm(kn_target *t, const char *a, size_t m, kn_diag *d) {
  int sm = 0, used = 0;
  if (m < 4 || m > 7 || strncmp(a, "sm_", 3) || sscanf(a + 3, "%d%n", &sm, &used) < 1 || (size_t)used != m - 3 ||
      !valid_sm(sm))
    return kn_diag_error(d, "unknown CUDA architecture '%.*s' (valid: %s)", (int)m, a, KN_TARGET_VALID_SMS);
  for (int i = 0; i < t->n_sm; i++)
    if (t->sm[i] == sm) return 0;
  if (t->n_sm == KN_TARGET_MAX_SM) return kn_diag_error(d, "too many CUDA architectures (at most %d)", KN_TARGET_MAX_SM);
  int i = t->n_sm++;
  for (; i > 0 && t->sm[i - 1] > sm; i--) t->sm[i] = t->sm[i - 1];
  t->sm[i] = sm;
  return 0;
}

/* "cuda [-arch=sm_80,sm_90]": GPU code for each listed architecture (a
 * cubin each, and PTX of the newest for later GPUs). The schedules see
 * one-lane "vectors": a GPU thread computes scalars. */
static int parse_cuda(const char *p, kn_target *t, kn_diag *d) {
  t->arch = KN_ARCH_CUDA;
  strcpy(t->triple, "cuda");
  t->vector_bits = 32;
  t->vector_regs = 255;
  t->has_fma = true;
  bool seen_arch = false;
  while (*p) {
    while (*p == ' ') p++;
    if (!*p) break;
    size_t n = strcspn(p, " ");
    bool is_arch = n > 6 && !strncmp(p, "-arch=", 6);
    if (!is_arch || seen_arch)
      return kn_diag_error(d, "%s cuda target option '%.*s' (valid: -arch=ARCH[,ARCH...], ARCH one of %s)",
                           is_arch ? "repeated" : "unknown", (int)n, p, KN_TARGET_VALID_SMS);
    seen_arch = true;
    for (const char *a = p + 6, *end = p + n; a < end;) {
      size_t m = strcspn(a, ", ");
      if (add_sm(t, a, m, d) < 0) return -1;
      a += m + 1;
    }
    p += n;
  }
  if (!t->n_sm) {
    t->n_sm = 2;
    t->sm[0] = 80;
    t->sm[1] = 90;
  }
  size_t len = 0;
  for (int i = 0; i < t->n_sm; i++)
    len += (size_t)snprintf(t->cpu + len, sizeof t->cpu - len, "%ssm_%d", i ? "," : "", t->sm[i]);
  return 0;
}

static int parse_spec(const char *spec, kn_target *t, kn_diag *d) {
  memset(t, 0, sizeof *t);
  const char *p = spec;
  while (*p == ' ') p++;
  /* First word: the triple, or "host" / nothing. */
  bool is_host = true;
  if (*p && *p != '-') {
    size_t n = strcspn(p, " ");
    if (n == 1 && *p == 'c') return parse_portable_c(p + 1, t, d);
    if (n == 4 && !strncmp(p, "cuda", 4)) return parse_cuda(p + 4, t, d);
    if (!(n == 4 && !strncmp(p, "host", 4))) {
      is_host = false;
      if (set_str(t->triple, sizeof t->triple, p, n, "triple", d)) return -1;
      if (arch_of_triple(t->triple, &t->arch))
        return kn_diag_error(d,
                             "unknown target architecture in '%s' (valid: host, "
                             "x86_64-linux-gnu, aarch64-linux-gnu, c, cuda)",
                             t->triple);
      if (!strstr(t->triple, "linux"))
        return kn_diag_error(d, "target '%s': only Linux targets are supported (e.g. %s-linux-gnu)",
                             t->triple, arch_name(t->arch));
      LLVMTargetRef target;
      char *err = NULL;
      if (LLVMGetTargetFromTriple(t->triple, &target, &err)) {
        kn_diag_error(d, "target '%s': %s", t->triple, err ? err : "unknown triple");
        LLVMDisposeMessage(err);
        return -1;
      }
    }
    p += n;
  }
  kn_arch host;
  bool host_known = host_arch(&host) == 0;
  if (is_host) {
    if (!host_known) return kn_diag_error(d, "the host architecture is not supported by kiln");
    char *triple = LLVMGetDefaultTargetTriple();
    int r = set_str(t->triple, sizeof t->triple, triple, strlen(triple), "triple", d);
    LLVMDisposeMessage(triple);
    if (r) return -1;
    t->arch = host;
  }
  /* Options. */
  const char *cpu = NULL, *mattr = NULL;
  size_t cpu_len = 0, mattr_len = 0;
  while (*p) {
    while (*p == ' ') p++;
    if (!*p) break;
    size_t n = strcspn(p, " ");
    if (n > 6 && !strncmp(p, "-mcpu=", 6)) {
      cpu = p + 6;
      cpu_len = n - 6;
    } else if (n > 7 && !strncmp(p, "-mattr=", 7)) {
      mattr = p + 7;
      mattr_len = n - 7;
    } else {
      return kn_diag_error(d, "unknown target option '%.*s' (valid: -mcpu=CPU, -mattr=+feat,-feat)",
                           (int)n, p);
    }
    p += n;
  }
  bool native = cpu && cpu_len == 6 && !strncmp(cpu, "native", 6);
  if (native && (!host_known || host != t->arch))
    return kn_diag_error(d, "-mcpu=native is only valid when the host is %s", arch_name(t->arch));
  if (is_host || native) {
    if (!cpu || native) {
      char *name = LLVMGetHostCPUName();
      int r = set_str(t->cpu, sizeof t->cpu, name, strlen(name), "CPU", d);
      LLVMDisposeMessage(name);
      if (r) return -1;
      host_features(t->arch, t->features, sizeof t->features);
    }
  }
  if (cpu && !native) {
    const char *valid = t->arch == KN_ARCH_X86_64 ? x86_cpus : aarch64_cpus;
    if (!in_list(valid, cpu, cpu_len))
      return kn_diag_error(d, "unknown %s CPU '%.*s' (valid: native, %s)", arch_name(t->arch),
                           (int)cpu_len, cpu, valid);
    if (set_str(t->cpu, sizeof t->cpu, cpu, cpu_len, "CPU", d)) return -1;
  }
  if (!t->cpu[0]) strcpy(t->cpu, t->arch == KN_ARCH_X86_64 ? "x86-64" : "generic");
  if (mattr && parse_mattr(t, mattr, mattr_len, d)) return -1;
  derive_vector_info(t);
  return 0;
}

/* No spec (NULL or blank) means KILN_TARGET when that is set and not blank,
 * else the host: a whole test suite or build can then aim at another CPU
 * than the one it lands on (an AVX2 target on an AVX-512 host) without
 * passing --target everywhere. "host" always means the host. */
int kn_target_parse(const char *spec, kn_target *t, kn_diag *d) {
  kn_cg_init_llvm();
  if (!spec) spec = "";
  if (spec[strspn(spec, " ")]) return parse_spec(spec, t, d);
  const char *env = getenv("KILN_TARGET");
  if (!env || !env[strspn(env, " ")]) return parse_spec("", t, d);
  int first = d ? d->count : 0;
  if (parse_spec(env, t, d) == 0) return 0;
  char prefix[160];
  snprintf(prefix, sizeof prefix, "KILN_TARGET='%.100s%s': ", env, strlen(env) > 100 ? "..." : "");
  kn_diag_prefix(d, first, prefix);
  return -1;
}
