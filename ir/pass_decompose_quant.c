/* pass_decompose_quant.c — quantization ops as primitive ops (the rewrites
 * of ir/pass_decompose.c; builder in decompose.h). */
#include "decompose.h"

int kn_dc_quant(kn_dc *c) {
  return kn_dc_fail(c, "not supported yet");
}
