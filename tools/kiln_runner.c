/* kiln_runner.c — kiln-run-aarch64: `kiln run` alone, cross-built for
 * aarch64 at kiln build time (tools/CMakeLists.txt) from the same sources
 * (cmd_run.c, options.c, npy.c, rt/loader.c, base/base.c). `kiln run` on an x86-64 host
 * starts it under qemu-aarch64 for aarch64 artifacts (cross_run.c), and it
 * also runs as is on a board:  kiln-run-aarch64 m.so --input x=x.npy ...
 * It takes exactly the arguments of `kiln run`. */
#include "tools/cmds.h"

int main(int argc, char **argv) { return kn_cmd_run(argc, argv); }
