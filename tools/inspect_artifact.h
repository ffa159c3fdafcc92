/* inspect_artifact.h — `kiln inspect` of a compiled .so artifact
 * (tools/inspect_artifact.c); cmd_inspect.c calls it for .so paths. */
#ifndef KN_INSPECT_ARTIFACT_H
#define KN_INSPECT_ARTIFACT_H

#include "base/base.h"

/* Prints the artifact's description to stdout, as text or (json) as one
 * JSON object. Returns 0, or -1 with a diagnostic (the loader's, for a file
 * that is not an artifact). */
int kn_inspect_artifact(const char *path, bool json, kn_diag *d);

#endif
