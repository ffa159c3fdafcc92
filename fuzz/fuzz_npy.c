/* fuzz_npy.c — libFuzzer target: bytes -> the .npy reader (tools/npy.c,
 * kn_npy_parse). Every input is either parsed (data sized exactly from the
 * header) or rejected with a diagnostic. */
#include <stdint.h>
#include <stdlib.h>

#include "tools/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kn_diag d;
  kn_diag_init(&d);
  kn_npy n;
  if (kn_npy_parse(data, size, "<fuzz>", &n, &d) == 0) {
    /* touch every byte the header promised */
    volatile uint8_t sum = 0;
    size_t bytes = (size_t)n.numel * kn_dtype_size(n.dtype);
    for (size_t i = 0; i < bytes; i++) sum += ((const uint8_t *)n.data)[i];
    (void)sum;
    kn_npy_free(&n);
  } else if (d.count == 0) {
    abort();
  }
  kn_diag_free(&d);
  return 0;
}
