/* client.c — talks to kiln-runner (protocol: proto.h): ping, and one
 * measurement per connection (header, wait for GO, upload the library and
 * the reference, read the reply). Every socket operation has a deadline;
 * a runner that answers `busy` is retried with a short pause. */
#include "runner/client.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rt/measure_util.h"
#include "runner/proto.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "HOST:PORT" or "[V6]:PORT" -> a connected socket, or -1 with msg. */
static int dial(const char *addr, double deadline, char *msg, size_t cap) {
  char host[256];
  const char *colon = strrchr(addr, ':');
  if (!colon || colon == addr || !colon[1] || (size_t)(colon - addr) >= sizeof host) {
    snprintf(msg, cap, "runner address '%s' is not HOST:PORT", addr);
    return -1;
  }
  memcpy(host, addr, (size_t)(colon - addr));
  host[colon - addr] = 0;
  if (host[0] == '[' && host[strlen(host) - 1] == ']') {
    memmove(host, host + 1, strlen(host));
    host[strlen(host) - 1] = 0;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
  int rc = getaddrinfo(host, colon + 1, &hints, &res);
  if (rc != 0) {
    snprintf(msg, cap, "runner %s: %s", addr, gai_strerror(rc));
    return -1;
  }
  int fd = -1;
  for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    if (errno == EINPROGRESS) {
      struct pollfd p = {.fd = fd, .events = POLLOUT};
      double left = deadline - now_s();
      int err = 0;
      socklen_t el = sizeof err;
      if (left > 0 && poll(&p, 1, (int)(left * 1000) + 1) == 1 &&
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0)
        break;
      errno = err ? err : ETIMEDOUT;
    }
    close(fd);
    fd = -1;
  }
  if (fd < 0) snprintf(msg, cap, "runner %s: cannot connect: %s", addr, strerror(errno));
  freeaddrinfo(res);
  return fd;
}

static int wait_fd(int fd, short ev, double deadline) {
  for (;;) {
    double left = deadline - now_s();
    if (left <= 0) return -1;
    struct pollfd p = {.fd = fd, .events = ev};
    int r = poll(&p, 1, (int)(left * 1000) + 1);
    if (r > 0) return 0;
    if (r < 0 && errno != EINTR) return -1;
  }
}

static int send_all(int fd, const void *buf, size_t n, double deadline) {
  const char *p = buf;
  while (n) {
    if (wait_fd(fd, POLLOUT, deadline) < 0) return -1;
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int recv_all(int fd, void *buf, size_t n, double deadline) {
  char *p = buf;
  while (n) {
    if (wait_fd(fd, POLLIN, deadline) < 0) return -1;
    ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

static int recv_line(int fd, char *buf, size_t cap, double deadline) {
  size_t n = 0;
  for (;;) {
    char ch;
    if (recv_all(fd, &ch, 1, deadline) < 0) return -1;
    if (ch == '\n') break;
    if (n + 1 < cap) buf[n++] = ch;
  }
  buf[n] = 0;
  return 0;
}

/* "ERR CODE message" -> r->code, r->message. */
static void parse_err(const char *line, kn_runner_reply *r) {
  const char *p = line + 4, *sp = strchr(p, ' ');
  size_t n = sp ? (size_t)(sp - p) : strlen(p);
  if (n >= sizeof r->code) n = sizeof r->code - 1;
  memcpy(r->code, p, n);
  r->code[n] = 0;
  snprintf(r->message, sizeof r->message, "%s", sp ? sp + 1 : "");
}

static const char *field(const char *line, const char *key) {
  size_t k = strlen(key);
  for (const char *p = line; (p = strstr(p, key)); p++)
    if ((p == line || p[-1] == ' ') && p[k] == '=') return p + k + 1;
  return NULL;
}

int kn_runner_ping(const char *addr, const char *token, kn_runner_info *info, kn_diag *d) {
  memset(info, 0, sizeof *info);
  char msg[300], line[KN_RUNNER_LINE_MAX];
  double deadline = now_s() + 30;
  int fd = dial(addr, deadline, msg, sizeof msg);
  if (fd < 0) return kn_diag_error(d, "%s", msg);
  snprintf(line, sizeof line, "%s %d ping token=%s\n", KN_RUNNER_MAGIC, KN_RUNNER_PROTO_VERSION, token);
  int rc = send_all(fd, line, strlen(line), deadline) < 0 || recv_line(fd, line, sizeof line, deadline) < 0;
  close(fd);
  if (rc) return kn_diag_error(d, "runner %s: no answer to ping (is it a kiln-runner?)", addr);
  if (!strncmp(line, "ERR ", 4)) {
    kn_runner_reply r;
    parse_err(line, &r);
    return kn_diag_error(d, "runner %s refused: %s: %s", addr, r.code, r.message);
  }
  const char *arch = field(line, "arch"), *ver = field(line, "version"), *mt = field(line, "max_threads");
  if (strncmp(line, "OK ", 3) || !arch) return kn_diag_error(d, "runner %s: unexpected answer '%.80s'", addr, line);
  sscanf(arch, "%31s", info->arch);
  if (ver) sscanf(ver, "%31s", info->version);
  if (mt) info->max_threads = atoi(mt);
  return 0;
}

static bool read_file(const char *path, char **buf, long *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  bool ok = fseek(f, 0, SEEK_END) == 0 && (*n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0;
  *buf = ok ? malloc((size_t)*n + 1) : NULL;
  ok = ok && *buf && fread(*buf, 1, (size_t)*n, f) == (size_t)*n;
  fclose(f);
  return ok;
}

/* One attempt; returns 1 when the runner was busy. */
static int attempt(const char *addr, const char *token, const kn_runner_req *q, const char *so, long so_n,
                   const char *ref, long ref_n, kn_runner_reply *r) {
  char line[KN_RUNNER_LINE_MAX];
  double deadline = now_s() + 60;
  snprintf(r->code, sizeof r->code, "io");
  int fd = dial(addr, deadline, r->message, sizeof r->message);
  if (fd < 0) return 0;
  snprintf(line, sizeof line,
           "%s %d run token=%s so=%ld ref=%ld out=%d threads=%d samples=%d repeat=%.9g timeout=%.9g fault=%s\n",
           KN_RUNNER_MAGIC, KN_RUNNER_PROTO_VERSION, token, so_n, ref_n, q->write_ref ? 1 : 0, q->threads,
           q->samples, q->repeat_s, q->timeout_s, q->fault ? q->fault : "none");
  int busy = 0;
  if (send_all(fd, line, strlen(line), deadline) < 0 || recv_line(fd, line, sizeof line, deadline) < 0) {
    snprintf(r->message, sizeof r->message, "runner %s: connection lost before the upload", addr);
    goto done;
  }
  if (strcmp(line, "GO")) {
    if (!strncmp(line, "ERR ", 4)) parse_err(line, r);
    else snprintf(r->message, sizeof r->message, "runner %s: unexpected answer '%.80s'", addr, line);
    busy = !strcmp(r->code, "busy");
    goto done;
  }
  deadline = now_s() + 60 + q->timeout_s;
  if (send_all(fd, so, (size_t)so_n, deadline) < 0 || send_all(fd, ref, (size_t)ref_n, deadline) < 0 ||
      recv_line(fd, line, sizeof line, deadline) < 0) {
    snprintf(r->message, sizeof r->message, "runner %s: connection lost during the upload or the run", addr);
    goto done;
  }
  if (!strncmp(line, "ERR ", 4)) {
    parse_err(line, r);
    goto done;
  }
  const char *sec = field(line, "seconds"), *err = field(line, "max_error"), *out = field(line, "out");
  long out_n = out ? atol(out) : -1;
  if (strncmp(line, "OK ", 3) || !sec || out_n < 0 || out_n > (1l << 34)) {
    snprintf(r->message, sizeof r->message, "runner %s: unexpected answer '%.80s'", addr, line);
    goto done;
  }
  r->seconds = strtod(sec, NULL);
  r->max_error = err ? strtod(err, NULL) : 0;
  if (q->write_ref) {
    char *buf = malloc((size_t)out_n + 1);
    FILE *f = buf ? fopen(q->ref_path, "wb") : NULL;
    bool ok = f && recv_all(fd, buf, (size_t)out_n, deadline) == 0 && fwrite(buf, 1, (size_t)out_n, f) == (size_t)out_n;
    if (f) ok &= fclose(f) == 0;
    free(buf);
    if (!ok) {
      snprintf(r->message, sizeof r->message, "cannot receive the reference output into %s", q->ref_path);
      goto done;
    }
  }
  snprintf(r->code, sizeof r->code, "ok");
  r->message[0] = 0;
  const char *noisy = field(line, "noisy"), *ns = field(line, "samples"), *nd = field(line, "disturbed"),
             *spread = field(line, "spread");
  r->noisy = noisy && atoi(noisy) == 1; /* a runner of before noise checks sends none */
  if (r->noisy) {
    kn_rt_timing tm = {.samples = ns ? atoi(ns) : 0, .disturbed = nd ? atoi(nd) : 0,
                       .spread = spread ? strtod(spread, NULL) : 0};
    kn_rt_timing_why(&tm, r->message, sizeof r->message);
  }
done:
  close(fd);
  return busy;
}

void kn_runner_measure(const char *addr, const char *token, const kn_runner_req *q, kn_runner_reply *r) {
  memset(r, 0, sizeof *r);
  char *so = NULL, *ref = NULL;
  long so_n = 0, ref_n = 0;
  if (!read_file(q->so_path, &so, &so_n) || (!q->write_ref && !read_file(q->ref_path, &ref, &ref_n))) {
    snprintf(r->code, sizeof r->code, "io");
    snprintf(r->message, sizeof r->message, "cannot read %s", so ? q->ref_path : q->so_path);
  } else {
    double give_up = now_s() + q->timeout_s + 60;
    while (attempt(addr, token, q, so, so_n, ref ? ref : "", ref_n, r) && now_s() < give_up) {
      struct timespec pause = {0, 200 * 1000 * 1000};
      nanosleep(&pause, NULL);
    }
  }
  free(so);
  free(ref);
}
