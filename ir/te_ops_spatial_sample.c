/* te_ops_spatial_sample.c — compute definitions of the sampling ops of the
 * spatial family (spatial.h): GridSample, AffineGrid, RoiAlign, MaxUnpool. */
#include <string.h>

#include "spatial.h"
#include "te_ops.h"

kn_te_tensor *kn_te_spatial_sample(kn_te_ctx *c, const kn_node *n, kn_te_tensor **in, kn_diag *d) {
  (void)c;
  (void)in;
  return kn_te_unsupported(d, n, "operator");
}
