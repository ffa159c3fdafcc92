/* fuzz_tensor_pb.c — libFuzzer target: bytes -> the serialized TensorProto
 * loader (frontend/onnx_tensor_file.c, the backend tests' input_N.pb), which
 * shares its checks with initializers. External data is rejected (no base
 * directory). A tensor it accepts must hold numel * dtype-size bytes. */
#include <stdint.h>
#include <stdlib.h>

#include "frontend/onnx_load.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kn_graph g;
  kn_graph_init(&g);
  kn_diag d;
  kn_diag_init(&d);
  int v = kn_fe_load_tensor_pb_buffer(data, size, "<fuzz>", NULL, &g, &d);
  if (v >= 0) {
    volatile uint8_t sum = 0;
    size_t bytes = (size_t)kn_value_numel(&g, v) * kn_dtype_size(g.values[v].dtype);
    const uint8_t *p = g.values[v].data;
    for (size_t i = 0; i < bytes; i++) sum += p[i];
    (void)sum;
  } else if (d.count == 0) {
    abort();
  }
  kn_diag_free(&d);
  kn_graph_free(&g);
  return 0;
}
