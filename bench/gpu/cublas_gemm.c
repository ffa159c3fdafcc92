/* cublas_gemm.c — the cuBLAS peer of Kiln's fp16 GEMM benchmark.
 *
 *   cublas_gemm N [--m M --k K] [--out f16|f32] [--reps R] [--warmup W]
 *
 * Times C[M,N] = A[M,K] * B[K,N] through cublasGemmEx: A and B fp16, fp32
 * accumulation (CUBLAS_COMPUTE_32F), C fp16 by default (--out f32: fp32 C, the
 * dtype of Kiln's fp16 GEMM model's output). Data: uniform random halves in
 * ±[0.5, 1) with random signs (zeros would flatter the GPU's power draw).
 * Each run is timed alone with CUDA events after W untimed ones; the median of
 * R runs gives TFLOP/s (2·M·N·K flops). One element of C is checked against a
 * host dot product, so a timing of a broken call is never reported.
 * Output: one JSON line on stdout. Any CUDA / cuBLAS error (no GPU, say): one
 * line "cublas_gemm: error: ..." on stderr and exit status 1.
 *
 * Build: nvcc -O2 bench/gpu/cublas_gemm.c -lcublas -o cublas_gemm
 * (or cc -O2 -I$CUDA/include ... -L$CUDA/lib64 -lcublas -lcudart). */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const char *detail) {
  fprintf(stderr, "cublas_gemm: error: %s: %s\n", what, detail);
  exit(1);
}

#define CUDA_CHECK(call)                                                                                               \
  do {                                                                                                                 \
    cudaError_t e_ = (call);                                                                                           \
    if (e_ != cudaSuccess) die(#call, cudaGetErrorString(e_));                                                         \
  } while (0)

#define CUBLAS_CHECK(call)                                                                                             \
  do {                                                                                                                 \
    cublasStatus_t s_ = (call);                                                                                        \
    if (s_ != CUBLAS_STATUS_SUCCESS) die(#call, cublasGetStatusString(s_));                                            \
  } while (0)

/* IEEE half bits -> float (normal numbers and zero are all this program makes). */
static float half_to_float(uint16_t h) {
  int exponent = (h >> 10) & 0x1f;
  float mantissa = (float)(h & 0x3ff) / 1024.0f;
  float v = exponent ? ldexpf(1.0f + mantissa, exponent - 15) : ldexpf(mantissa, -14);
  return (h & 0x8000) ? -v : v;
}

/* Fills n halves with ±[0.5, 1): exponent 14, random mantissa and sign. */
static void fill_random(uint16_t *p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = (uint16_t)(((x >> 20) & 0x8000) | (14u << 10) | (x & 0x3ff));
  }
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static long parse_positive(const char *flag, const char *s) {
  char *end = NULL;
  long v = s ? strtol(s, &end, 10) : 0;
  if (!s || *end || v <= 0) die(flag, "expects a positive integer");
  return v;
}

int main(int argc, char **argv) {
  long n = 0, m = 0, k = 0, reps = 20, warmup = 5;
  int out_f32 = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--m")) m = parse_positive(a, v), i++;
    else if (!strcmp(a, "--k")) k = parse_positive(a, v), i++;
    else if (!strcmp(a, "--reps")) reps = parse_positive(a, v), i++;
    else if (!strcmp(a, "--warmup")) warmup = parse_positive(a, v), i++;
    else if (!strcmp(a, "--out") && v && (!strcmp(v, "f16") || !strcmp(v, "f32"))) out_f32 = !strcmp(v, "f32"), i++;
    else if (a[0] != '-' && !n) n = parse_positive("N", a);
    else die(a, "usage: cublas_gemm N [--m M --k K] [--out f16|f32] [--reps R] [--warmup W]");
  }
  if (!n) die("N", "usage: cublas_gemm N [--m M --k K] [--out f16|f32] [--reps R] [--warmup W]");
  if (!m) m = n;
  if (!k) k = n;

  int devices = 0;
  CUDA_CHECK(cudaGetDeviceCount(&devices));
  struct cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));

  size_t c_elem = out_f32 ? sizeof(float) : sizeof(uint16_t);
  uint16_t *ha = malloc(sizeof(uint16_t) * (size_t)(m * k)), *hb = malloc(sizeof(uint16_t) * (size_t)(k * n));
  if (!ha || !hb) die("malloc", "out of host memory");
  fill_random(ha, (size_t)(m * k), 1);
  fill_random(hb, (size_t)(k * n), 2);
  void *da, *db, *dc;
  CUDA_CHECK(cudaMalloc(&da, sizeof(uint16_t) * (size_t)(m * k)));
  CUDA_CHECK(cudaMalloc(&db, sizeof(uint16_t) * (size_t)(k * n)));
  CUDA_CHECK(cudaMalloc(&dc, c_elem * (size_t)(m * n)));
  CUDA_CHECK(cudaMemcpy(da, ha, sizeof(uint16_t) * (size_t)(m * k), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(db, hb, sizeof(uint16_t) * (size_t)(k * n), cudaMemcpyHostToDevice));

  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  const float alpha = 1.0f, beta = 0.0f;
  /* Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: pass B first, no transposes. */
  cudaDataType_t c_type = out_f32 ? CUDA_R_32F : CUDA_R_16F;
#define GEMM()                                                                                                         \
  CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)k, &alpha, db, CUDA_R_16F, (int)n, da,    \
                            CUDA_R_16F, (int)k, &beta, dc, c_type, (int)n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT))
  for (long i = 0; i < warmup; i++) GEMM();
  CUDA_CHECK(cudaDeviceSynchronize());

  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  float *ms = malloc(sizeof(float) * (size_t)reps);
  if (!ms) die("malloc", "out of host memory");
  for (long i = 0; i < reps; i++) {
    CUDA_CHECK(cudaEventRecord(start, 0));
    GEMM();
    CUDA_CHECK(cudaEventRecord(stop, 0));
    CUDA_CHECK(cudaEventSynchronize(stop));
    CUDA_CHECK(cudaEventElapsedTime(&ms[i], start, stop));
  }
  qsort(ms, (size_t)reps, sizeof(float), cmp_float);
  double median = reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);

  /* C[m-1][n-1] against a host dot product: a wrong call fails loudly. */
  double want = 0, got;
  for (long i = 0; i < k; i++) want += (double)half_to_float(ha[(m - 1) * k + i]) * half_to_float(hb[i * n + n - 1]);
  size_t last = (size_t)(m * n - 1);
  if (out_f32) {
    float c;
    CUDA_CHECK(cudaMemcpy(&c, (float *)dc + last, sizeof c, cudaMemcpyDeviceToHost));
    got = c;
  } else {
    uint16_t c;
    CUDA_CHECK(cudaMemcpy(&c, (uint16_t *)dc + last, sizeof c, cudaMemcpyDeviceToHost));
    got = half_to_float(c);
  }
  /* fp16 output: ~1e-3 relative rounding of a sum of magnitude ~sqrt(K). */
  double tol = 2e-3 * sqrt((double)k) + 1e-2 * fabs(want);
  if (!(fabs(got - want) <= tol)) {
    char detail[128];
    snprintf(detail, sizeof detail, "C[%ld][%ld] = %g, host says %g", m - 1, n - 1, got, want);
    die("result check", detail);
  }

  printf("{\"peer\": \"cublas\", \"m\": %ld, \"n\": %ld, \"k\": %ld, \"in\": \"f16\", \"compute\": \"f32\", "
         "\"out\": \"%s\", \"reps\": %ld, \"warmup\": %ld, \"median_ms\": %.5f, \"min_ms\": %.5f, \"tflops\": %.2f, "
         "\"device\": \"%s\", \"cublas_check_err\": %.3g}\n",
         m, n, k, out_f32 ? "f32" : "f16", reps, warmup, median, ms[0], 2.0 * m * n * k / (median * 1e-3) / 1e12,
         prop.name, fabs(got - want));
  cublasDestroy(h);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  free(ha);
  free(hb);
  free(ms);
  return 0;
}
