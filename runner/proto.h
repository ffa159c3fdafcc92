/* proto.h — the kiln-runner wire protocol, shared by the runner (runner.c)
 * and the client (client.c, used by `kiln tune --runner`). Documented for
 * users in docs/cross.md ("Remote measurement").
 *
 * One request per TCP connection:
 *   1. client: one header line, at most KN_RUNNER_LINE_MAX bytes with '\n':
 *        KILN-RUNNER 1 ping token=T
 *        KILN-RUNNER 1 run token=T so=BYTES ref=BYTES out=0|1 threads=N
 *                          samples=N repeat=SECONDS timeout=SECONDS fault=none|crash|hang|wrong
 *      (key=value fields in any order; the token is any run of non-space
 *      printable bytes up to 256 long).
 *   2. runner: `ERR CODE message\n` and close, or for ping
 *      `OK arch=ARCH version=V max_upload=BYTES timeout=S\n`, or for run
 *      `GO\n`: only then does the client send the body.
 *   3. client (run): BYTES of the candidate .so, then `ref` BYTES of the
 *      reference output (0 when out=1: this run writes the reference).
 *   4. runner: `OK seconds=S max_error=E out=BYTES noisy=0|1 samples=N
 *      disturbed=N spread=X\n` followed by BYTES of the output (out=1 only,
 *      else 0), or `ERR CODE message\n`. noisy=1: the timing cannot be
 *      trusted (rt/measure_util.h); a client ignores fields it does not know.
 *
 * CODE is one word: auth, busy, too-large, bad-request, arch, load, crash,
 * timeout, wrong, internal. crash / timeout / wrong / load are the
 * candidate's fault (recorded as such); the rest are the session's. */
#ifndef KN_RUNNER_PROTO_H
#define KN_RUNNER_PROTO_H

#define KN_RUNNER_MAGIC "KILN-RUNNER"
#define KN_RUNNER_PROTO_VERSION 1
#define KN_RUNNER_LINE_MAX 4096
#define KN_RUNNER_TOKEN_MAX 256

#if defined(__x86_64__)
#define KN_RUNNER_MACHINE 62 /* EM_X86_64 */
#define KN_RUNNER_ARCH "x86_64"
#elif defined(__aarch64__)
#define KN_RUNNER_MACHINE 183 /* EM_AARCH64 */
#define KN_RUNNER_ARCH "aarch64"
#else
#define KN_RUNNER_MACHINE -1
#define KN_RUNNER_ARCH "unknown"
#endif

#endif
