/* fuzz_onnx.c — libFuzzer target: bytes -> ONNX loader -> graph import ->
 * shape inference -> graph passes -> fusion -> TE -> schedules -> loop IR ->
 * memory plan, via kn_compile with stop_after = "plan": everything before
 * LLVM codegen; no file is written. KILN_FUZZ_STOP_AFTER=STEP (a step of
 * tools/pipeline.c: outputs, fuse, loops ...)
 * stops earlier (faster, for the loader and the graph passes alone).
 * Any input must end in status 0 or -1 with diagnostics; the sanitizers and
 * libFuzzer's timeout / RSS limit catch everything else. */
#include <stdint.h>
#include <stdlib.h>

#include "tools/pipeline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *stop = getenv("KILN_FUZZ_STOP_AFTER");
  kn_compile_opts o = {
      .model = "<fuzz>",
      .model_data = data,
      .model_size = size,
      .output = "/nonexistent/fuzz.so",
      .prefix = "model",
      .max_batch = 2,
      .stop_after = stop && *stop ? stop : "plan",
  };
  kn_diag d;
  kn_diag_init(&d);
  int rc = kn_compile(&o, &d);
  /* a failure always says why */
  if (rc < 0 && d.count == 0) abort();
  kn_diag_free(&d);
  return 0;
}
