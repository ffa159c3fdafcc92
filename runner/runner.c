/* runner.c — kiln-runner: measures uploaded candidate kernels on a board for
 * `kiln tune --runner HOST:PORT` (protocol: proto.h, docs/cross.md).
 *
 *   kiln-runner --token T [--bind 127.0.0.1] [--port 7070] [--max-upload BYTES]
 *               [--timeout S] [--io-timeout S]
 *
 * Invariants: one request at a time (a client arriving meanwhile gets
 * `ERR busy` at once); the token is checked (in constant time) before any
 * upload is read; the upload's declared size is checked before it is read;
 * the library's ELF machine is checked before anything loads it; each
 * candidate runs in a forked child (measure_child.c) under a time limit, so
 * a crashing or hanging candidate costs an error reply, never the runner.
 * Every socket wait has a deadline, so a silent client cannot stall it.
 * Built for the host and for aarch64 (static, loading candidates itself with
 * elf_load.c, and dynamic) by runner/CMakeLists.txt. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runner/measure_child.h"
#include "runner/proto.h"

/* A static glibc binary can dlopen an artifact (the board's libc.so.6 is
 * loaded beside the static one) but threads started from that second libc
 * crash, so the static build (KN_RUNNER_STATIC) loads artifacts itself
 * (elf_load.c, `--loader self`, the default there) and measures on one
 * thread when it has to dlopen. */
#ifdef KN_RUNNER_STATIC
#define KN_RUNNER_DEFAULT_SELF_LOAD true
#else
#define KN_RUNNER_DEFAULT_SELF_LOAD false
#endif

typedef struct conf {
  const char *bind_addr, *token;
  int port;
  int64_t max_upload;
  double timeout, io_timeout;
  bool self_load; /* --loader self: elf_load.c instead of dlopen */
  char dir[256];
} conf;

typedef struct conn {
  int fd, listen_fd;
  double deadline;
  char peer[64];
} conn;

static volatile sig_atomic_t stop_requested;
static void on_stop(int sig) {
  (void)sig;
  stop_requested = 1;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Answers every pending connection with `ERR busy` and closes it. */
static void reject_newcomers(int listen_fd) {
  for (;;) {
    int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    static const char msg[] = "ERR busy the runner is measuring another candidate; retry later\n";
    ssize_t w = send(fd, msg, sizeof msg - 1, MSG_NOSIGNAL);
    (void)w;
    close(fd);
    fprintf(stderr, "kiln-runner: rejected a client: busy\n");
  }
}

/* Waits until fd is ready for `events` (or, with fd < 0, for `wait_s`),
 * turning newcomers away meanwhile. 0: ready, -1: deadline or error. */
static int wait_ready(int fd, short events, int listen_fd, double deadline) {
  for (;;) {
    double left = deadline - now_s();
    if (left <= 0 || stop_requested) return -1;
    struct pollfd p[2] = {{.fd = listen_fd, .events = POLLIN}, {.fd = fd, .events = events}};
    int r = poll(p, fd >= 0 ? 2 : 1, (int)(left * 1000) + 1);
    if (r < 0 && errno != EINTR) return -1;
    if (r <= 0) continue;
    if (p[0].revents & POLLIN) reject_newcomers(listen_fd);
    if (fd >= 0 && p[1].revents) return 0;
  }
}

static int read_exact(conn *c, void *buf, size_t n) {
  char *p = buf;
  while (n) {
    if (wait_ready(c->fd, POLLIN, c->listen_fd, c->deadline) < 0) return -1;
    ssize_t r = recv(c->fd, p, n, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

static int write_all(conn *c, const void *buf, size_t n) {
  const char *p = buf;
  while (n) {
    if (wait_ready(c->fd, POLLOUT, c->listen_fd, c->deadline) < 0) return -1;
    ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* One line up to '\n' (excluded). -1 on a longer line, EOF or the deadline. */
static int read_line(conn *c, char *buf, size_t cap) {
  size_t n = 0;
  for (;;) {
    char ch;
    if (read_exact(c, &ch, 1) < 0) return -1;
    if (ch == '\n') break;
    if (n + 1 >= cap) return -1;
    buf[n++] = ch;
  }
  if (n && buf[n - 1] == '\r') n--;
  buf[n] = 0;
  return 0;
}

static void reply_err(conn *c, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reply_err(conn *c, const char *code, const char *fmt, ...) {
  char msg[512], line[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  for (char *p = msg; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
  int n = snprintf(line, sizeof line, "ERR %s %s\n", code, msg);
  if (c->deadline < now_s() + 5) c->deadline = now_s() + 5; /* the reply gets its own time */
  write_all(c, line, (size_t)n);
  fprintf(stderr, "kiln-runner: %s: error %s: %s\n", c->peer, code, msg);
}

/* Constant-time comparison (in the length of the expected token). */
static bool token_equal(const char *got, const char *want) {
  size_t gl = strlen(got), wl = strlen(want);
  unsigned diff = gl != wl;
  for (size_t i = 0; i < wl; i++) diff |= (unsigned char)want[i] ^ (unsigned char)(i < gl ? got[i] : 0);
  return diff == 0;
}

static bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

static bool parse_dbl(const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= lo && v <= hi)) return false;
  *out = v;
  return true;
}

/* Parses a header line; fills verb, token and rq. NULL, or what is wrong. */
static const char *parse_header(char *line, char *verb, char *token, kn_runner_run_req *rq) {
  memset(rq, 0, sizeof *rq);
  rq->samples = 5;
  rq->repeat_s = 0.01;
  rq->timeout_s = 1e9;
  snprintf(rq->fault, sizeof rq->fault, "none");
  verb[0] = token[0] = 0;
  char *save = NULL, *w = strtok_r(line, " ", &save);
  if (!w || strcmp(w, KN_RUNNER_MAGIC)) return "not a kiln-runner request (want 'KILN-RUNNER 1 VERB ...')";
  w = strtok_r(NULL, " ", &save);
  if (!w || strcmp(w, "1")) return "unsupported protocol version (this runner speaks 1)";
  w = strtok_r(NULL, " ", &save);
  if (!w || (strcmp(w, "ping") && strcmp(w, "run"))) return "unknown verb (want ping or run)";
  strcpy(verb, w);
  bool have_so = false;
  while ((w = strtok_r(NULL, " ", &save))) {
    char *eq = strchr(w, '=');
    if (!eq) return "a field is not key=value";
    *eq = 0;
    const char *k = w, *v = eq + 1;
    int64_t i = 0;
    bool ok = true;
    if (!strcmp(k, "token")) {
      ok = strlen(v) <= KN_RUNNER_TOKEN_MAX;
      if (ok) strcpy(token, v);
    } else if (!strcmp(k, "so")) {
      ok = have_so = parse_i64(v, 0, INT64_MAX / 4, &rq->so_bytes);
    } else if (!strcmp(k, "ref")) {
      ok = parse_i64(v, 0, INT64_MAX / 4, &rq->ref_bytes);
    } else if (!strcmp(k, "out")) {
      ok = parse_i64(v, 0, 1, &i);
      rq->want_out = i;
    } else if (!strcmp(k, "threads")) {
      ok = parse_i64(v, 0, 256, &i);
      rq->threads = (int)i;
    } else if (!strcmp(k, "samples")) {
      ok = parse_i64(v, 1, 64, &i);
      rq->samples = (int)i;
    } else if (!strcmp(k, "seed")) {
      ok = parse_i64(v, 0, INT64_MAX, &i);
      rq->seed = (uint64_t)i;
    } else if (!strcmp(k, "repeat")) {
      ok = parse_dbl(v, 0, 10, &rq->repeat_s);
    } else if (!strcmp(k, "timeout")) {
      ok = parse_dbl(v, 0.01, 1e9, &rq->timeout_s);
    } else if (!strcmp(k, "fault")) {
      ok = !strcmp(v, "none") || !strcmp(v, "crash") || !strcmp(v, "hang") || !strcmp(v, "wrong") ||
           !strcmp(v, "busy");
      if (ok) snprintf(rq->fault, sizeof rq->fault, "%s", v);
    } else {
      return "unknown field";
    }
    if (!ok) return "a field has a bad value";
  }
  if (!strcmp(verb, "run") && !have_so) return "run needs so=BYTES";
  return NULL;
}

static const char *machine_name(int m) {
  switch (m) {
  case 62: return "x86_64";
  case 183: return "aarch64";
  case 40: return "arm (32-bit)";
  case 3: return "i386";
  default: return "an unknown architecture";
  }
}

/* The ELF header of an upload, checked before anything loads it. */
static int check_library(conn *c, const unsigned char *h, int64_t n) {
  if (n < 64 || memcmp(h, "\x7f" "ELF", 4) != 0) {
    reply_err(c, "bad-request", "the upload is not an ELF shared library");
    return -1;
  }
  if (h[4] != 2 || h[5] != 1) {
    reply_err(c, "arch", "the library is not 64-bit little-endian ELF; this runner is %s", KN_RUNNER_ARCH);
    return -1;
  }
  int machine = h[18] | h[19] << 8, type = h[16] | h[17] << 8;
  if (machine != KN_RUNNER_MACHINE) {
    reply_err(c, "arch", "the library is built for %s, but this runner is %s: compile for --target %s-linux-gnu",
              machine_name(machine), KN_RUNNER_ARCH, KN_RUNNER_ARCH);
    return -1;
  }
  if (type != 3) {
    reply_err(c, "bad-request", "the upload is an ELF file but not a shared library (.so)");
    return -1;
  }
  return 0;
}

/* Runs the candidate in a child under the time limit; replies. */
static void measure(conn *c, const conf *cf, const kn_runner_run_req *rq, const unsigned char *so, const void *ref) {
  char so_path[320], out_path[320];
  snprintf(so_path, sizeof so_path, "%s/cand.so", cf->dir);
  snprintf(out_path, sizeof out_path, "%s/out.bin", cf->dir);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    reply_err(c, "internal", "pipe: %s", strerror(errno));
    return;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    reply_err(c, "internal", "fork: %s", strerror(errno));
    return;
  }
  if (pid == 0) {
    close(fds[0]);
    close(c->fd);
    close(c->listen_fd);
    kn_runner_measure_child(fds[1], so_path, so, rq, ref, out_path);
  }
  close(fds[1]);
  double limit = rq->timeout_s < cf->timeout ? rq->timeout_s : cf->timeout;
  int ready = wait_ready(fds[0], POLLIN, c->listen_fd, now_s() + limit);
  int ws = 0;
  if (ready < 0) kill(pid, SIGKILL);
  kn_runner_outcome o;
  memset(&o, 0, sizeof o);
  ssize_t got = ready < 0 ? 0 : read(fds[0], &o, sizeof o);
  close(fds[0]);
  waitpid(pid, &ws, 0);
  unlink(so_path);
  if (ready < 0) {
    reply_err(c, "timeout", "the candidate ran longer than %.3g s and was killed", limit);
  } else if (WIFSIGNALED(ws)) {
    reply_err(c, "crash", "the candidate was killed by signal %d (%s)", WTERMSIG(ws), strsignal(WTERMSIG(ws)));
  } else if (got != (ssize_t)sizeof o || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
    reply_err(c, "crash", "the candidate's process exited with status %d", WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
  } else if (strcmp(o.code, "ok")) {
    o.code[sizeof o.code - 1] = o.message[sizeof o.message - 1] = 0;
    reply_err(c, o.code, "%s", o.message);
  } else {
    char *out = NULL;
    int64_t n = rq->want_out ? o.out_bytes : 0;
    if (n > 0) {
      FILE *f = fopen(out_path, "rb");
      out = malloc((size_t)n);
      bool ok = f && out && fread(out, 1, (size_t)n, f) == (size_t)n;
      if (f) fclose(f);
      if (!ok) {
        free(out);
        unlink(out_path);
        reply_err(c, "internal", "cannot read the output back");
        return;
      }
    }
    unlink(out_path);
    char line[256];
    int len = snprintf(line, sizeof line, "OK seconds=%.9g max_error=%.9g out=%lld noisy=%d samples=%d disturbed=%d spread=%.6g\n",
                       o.seconds, o.max_error, (long long)n, o.noisy ? 1 : 0, o.samples, o.disturbed, o.spread);
    if (write_all(c, line, (size_t)len) == 0 && n > 0) write_all(c, out, (size_t)n);
    free(out);
    fprintf(stderr, "kiln-runner: %s: ok %.6g s\n", c->peer, o.seconds);
  }
  unlink(out_path); /* a failed reference run may have left one */
}

/* Closes after the reply has left: a close with unread input pending would
 * reset the connection and could drop the reply (an error sent before the
 * client finished writing), so the rest of its input is read and dropped
 * for up to a second first. */
static void linger_close(conn *c) {
  shutdown(c->fd, SHUT_WR);
  double deadline = now_s() + 1;
  char buf[4096];
  for (int64_t dropped = 0; dropped < (16 << 20);) {
    /* newcomers wait in the backlog meanwhile: the runner is not busy */
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    double left = deadline - now_s();
    if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) <= 0) break;
    ssize_t r = recv(c->fd, buf, sizeof buf, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) break;
    dropped += r;
  }
  close(c->fd);
}

/* 1 where candidates are dlopened by a static runner: one thread only. */
static int max_threads(const conf *cf) {
#ifdef KN_RUNNER_STATIC
  return cf->self_load ? 0 : 1;
#else
  (void)cf;
  return 0;
#endif
}

static void serve(conn *c, const conf *cf) {
  c->deadline = now_s() + cf->io_timeout;
  char line[KN_RUNNER_LINE_MAX], verb[8], token[KN_RUNNER_TOKEN_MAX + 1];
  kn_runner_run_req rq;
  if (read_line(c, line, sizeof line) < 0) {
    reply_err(c, "bad-request", "no request line (at most %d bytes, ending in a newline) within %.0f s",
              KN_RUNNER_LINE_MAX, cf->io_timeout);
    return;
  }
  const char *bad = parse_header(line, verb, token, &rq);
  if (bad) {
    reply_err(c, "bad-request", "%s", bad);
    return;
  }
  if (!token_equal(token, cf->token)) {
    reply_err(c, "auth", "wrong or missing token");
    return;
  }
  if (!strcmp(verb, "ping")) {
    char ok[256];
    int n = snprintf(ok, sizeof ok, "OK arch=%s version=%s max_upload=%lld timeout=%.9g max_threads=%d\n",
                     KN_RUNNER_ARCH, KILN_VERSION, (long long)cf->max_upload, cf->timeout, max_threads(cf));
    write_all(c, ok, (size_t)n);
    return;
  }
  if (rq.so_bytes > cf->max_upload || rq.ref_bytes > cf->max_upload - rq.so_bytes) {
    reply_err(c, "too-large", "upload of %lld bytes exceeds this runner's limit of %lld bytes (--max-upload)",
              (long long)(rq.so_bytes + rq.ref_bytes), (long long)cf->max_upload);
    return;
  }
  rq.self_load = cf->self_load;
  if (write_all(c, "GO\n", 3) < 0) return;
  c->deadline = now_s() + cf->io_timeout;
  unsigned char *so = malloc((size_t)rq.so_bytes + 1), *ref = malloc((size_t)rq.ref_bytes + 1);
  if (!so || !ref) {
    reply_err(c, "internal", "out of memory for the upload");
    goto done;
  }
  if (read_exact(c, so, (size_t)rq.so_bytes) < 0 || read_exact(c, ref, (size_t)rq.ref_bytes) < 0) {
    reply_err(c, "bad-request", "the upload ended early or took longer than %.0f s", cf->io_timeout);
    goto done;
  }
  if (check_library(c, so, rq.so_bytes) < 0) goto done;
  char so_path[320];
  snprintf(so_path, sizeof so_path, "%s/cand.so", cf->dir);
  int fd = open(so_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
  bool ok = fd >= 0 && write(fd, so, (size_t)rq.so_bytes) == (ssize_t)rq.so_bytes;
  if (fd >= 0) ok &= close(fd) == 0;
  if (!ok) {
    reply_err(c, "internal", "cannot store the upload in %s", cf->dir);
    goto done;
  }
  c->deadline = now_s() + cf->io_timeout + (rq.timeout_s < cf->timeout ? rq.timeout_s : cf->timeout);
  measure(c, cf, &rq, so, ref);
done:
  free(so);
  free(ref);
}

static void usage(FILE *out) {
  fprintf(out, "usage: kiln-runner --token TOKEN [options]   (or KILN_RUNNER_TOKEN=TOKEN kiln-runner ...)\n"
               "  --bind ADDR          address to listen on (default 127.0.0.1; numeric IPv4/IPv6)\n"
               "  --port N             TCP port (default 7070; 0: any free port, printed at start)\n"
               "  --max-upload BYTES   largest upload accepted (default 268435456)\n"
               "  --timeout S          longest run of one candidate (default 60)\n"
               "  --io-timeout S       longest wait for a client's request or upload (default 60)\n"
               "  --loader self|dlopen how candidates are loaded (default: self in the static build,\n"
               "                       binding their imports to the runner's own libc; else dlopen)\n"
               "Measures candidate kernels for `kiln tune --runner HOST:PORT --token TOKEN`.\n");
}

static int open_listener(const conf *cf, char *shown, size_t cap) {
  /* numeric addresses only: a static binary has no name service */
  struct sockaddr_storage addr;
  memset(&addr, 0, sizeof addr);
  struct sockaddr_in *v4 = (struct sockaddr_in *)&addr;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&addr;
  socklen_t len;
  if (inet_pton(AF_INET, cf->bind_addr, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)cf->port);
    len = sizeof *v4;
  } else if (inet_pton(AF_INET6, cf->bind_addr, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((uint16_t)cf->port);
    len = sizeof *v6;
  } else {
    fprintf(stderr, "kiln-runner: error: --bind '%s': not a numeric IPv4 or IPv6 address\n", cf->bind_addr);
    return -1;
  }
  int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || bind(fd, (struct sockaddr *)&addr, len) != 0 || listen(fd, 8) != 0) {
    fprintf(stderr, "kiln-runner: error: cannot listen on %s port %d: %s\n", cf->bind_addr, cf->port,
            strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  getsockname(fd, (struct sockaddr *)&ss, &sl);
  char host[64] = "?", serv[16] = "?";
  getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV);
  snprintf(shown, cap, "%s:%s", host, serv);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

int main(int argc, char **argv) {
  conf cf = {.bind_addr = "127.0.0.1", .port = 7070, .max_upload = 256ll << 20, .timeout = 60, .io_timeout = 60,
            .self_load = KN_RUNNER_DEFAULT_SELF_LOAD};
  cf.token = getenv("KILN_RUNNER_TOKEN");
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "kiln-runner: error: '%s' needs a value (see --help)\n", a);
      return 2;
    }
    const char *v = argv[++i];
    int64_t n = 0;
    bool ok = true;
    if (!strcmp(a, "--token")) cf.token = v;
    else if (!strcmp(a, "--bind")) cf.bind_addr = v;
    else if (!strcmp(a, "--port")) ok = parse_i64(v, 0, 65535, &n), cf.port = (int)n;
    else if (!strcmp(a, "--max-upload")) ok = parse_i64(v, 64, INT64_MAX / 4, &cf.max_upload);
    else if (!strcmp(a, "--timeout")) ok = parse_dbl(v, 0.01, 1e6, &cf.timeout);
    else if (!strcmp(a, "--io-timeout")) ok = parse_dbl(v, 0.01, 1e6, &cf.io_timeout);
    else if (!strcmp(a, "--loader")) ok = !strcmp(v, "self") || !strcmp(v, "dlopen"), cf.self_load = !strcmp(v, "self");
    else {
      fprintf(stderr, "kiln-runner: error: unknown option '%s' (see --help)\n", a);
      return 2;
    }
    if (!ok) {
      fprintf(stderr, "kiln-runner: error: bad value '%s' for %s\n", v, a);
      return 2;
    }
  }
  if (!cf.token || !*cf.token || strlen(cf.token) > KN_RUNNER_TOKEN_MAX || strpbrk(cf.token, " \t\r\n")) {
    fprintf(stderr, "kiln-runner: error: a token is required: --token T or KILN_RUNNER_TOKEN=T "
                    "(1 to %d characters, no spaces)\n", KN_RUNNER_TOKEN_MAX);
    return 2;
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(cf.dir, sizeof cf.dir, "%s/kiln-runner.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(cf.dir)) {
    fprintf(stderr, "kiln-runner: error: cannot create a folder under %s: %s\n", tmp && *tmp ? tmp : "/tmp",
            strerror(errno));
    return 1;
  }
  char shown[96];
  int lfd = open_listener(&cf, shown, sizeof shown);
  if (lfd < 0) {
    rmdir(cf.dir);
    return 1;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: poll wakes up */
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  printf("kiln-runner: listening on %s (%s, kiln %s, max upload %lld bytes, timeout %.3g s, loader %s)\n", shown,
         KN_RUNNER_ARCH, KILN_VERSION, (long long)cf.max_upload, cf.timeout, cf.self_load ? "self" : "dlopen");
  fflush(stdout);
  while (!stop_requested) {
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    if (poll(&p, 1, 1000) <= 0) continue;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) continue;
    conn c = {.fd = fd, .listen_fd = lfd};
    char host[48] = "?", serv[16] = "?";
    getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(c.peer, sizeof c.peer, "%s:%s", host, serv);
    serve(&c, &cf);
    linger_close(&c);
  }
  close(lfd);
  rmdir(cf.dir);
  fprintf(stderr, "kiln-runner: stopped\n");
  return 0;
}
