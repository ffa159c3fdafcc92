/* ref_eval_spatial_sample.c — the reference interpreter for the sampling ops
 * of the spatial family (spatial.h): GridSample, AffineGrid, RoiAlign,
 * MaxUnpool. Plain loops in double precision. */
#include <math.h>
#include <string.h>

#include "spatial.h"

int kn_ref_spatial_sample(kn_ref_call *c) {
  return kn_ref_error(c, "not supported by the reference interpreter yet");
}
