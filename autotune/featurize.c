/* featurize.c — candidates lowered to loop IR in child processes, for their
 * features (features.c).
 *
 * Lowering a contraction repacks its weights into new constants of the
 * graph, so it happens in forked children (the parent's graph is never
 * modified), each lowering a chunk of candidates sized so that the repacked
 * copies stay under ~256 MiB. Results come back through one shared
 * anonymous mapping: each candidate's slot is written only by the child
 * that owns it, and read by the parent after that child has exited. A
 * child that crashes or runs past its timeout, or is stopped by *stop
 * (Ctrl-C), leaves its slots not ok. */
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "autotune/measure.h"
#include "autotune/search.h"

typedef struct slot {
  int ok;
  float f[KN_AT_N_FEATURES];
} slot;

typedef struct choose_ctx {
  const kn_schedule *want;
  bool rejected;
} choose_ctx;

static void choose(void *ctx, const kn_sched_task *task, kn_schedule *s) {
  choose_ctx *c = ctx;
  kn_at_task_shape ts;
  kn_at_task_shape_of(task, s, &ts);
  kn_diag d;
  kn_diag_init(&d);
  if (kn_at_sched_validate(c->want, &ts, &d) < 0) c->rejected = true;
  else *s = *c->want;
  kn_diag_free(&d);
}

static _Noreturn void child(const kn_graph *g0, const kn_group *grp, const kn_target *t, const kn_schedule *scheds,
                            int lo, int hi, int threads, slot *out) {
  signal(SIGINT, SIG_IGN);
  kn_graph *g = (kn_graph *)g0; /* this process's copy */
  for (int i = lo; i < hi; i++) {
    kn_arena A;
    kn_arena_init(&A);
    kn_expr_ctx ec = {.arena = &A};
    kn_diag d;
    kn_diag_init(&d);
    choose_ctx c = {.want = &scheds[i]};
    kn_sched_provider p = {.choose = choose, .ctx = &c};
    kn_kernel_build kb;
    if (kn_sched_build_kernel_with(g, grp, t, &ec, "f", &p, &kb, NULL, NULL, &d) == 0 && !c.rejected) {
      kn_at_features_of_kernel(kb.kernel, threads, out[i].f);
      out[i].ok = 1;
    }
    kn_diag_free(&d);
    kn_arena_free(&A);
  }
  _exit(0);
}

/* Bytes of the largest constant input of the group (what a repack copies). */
static int64_t largest_const(const kn_graph *g, const kn_group *grp) {
  int64_t most = 0;
  for (int i = 0; i < grp->n_nodes; i++) {
    const kn_node *n = &g->nodes[grp->nodes[i]];
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] >= 0 && g->values[n->in[k]].data) {
        int64_t b = kn_value_numel(g, n->in[k]) * (int64_t)kn_dtype_size(g->values[n->in[k]].dtype);
        if (b > most) most = b;
      }
  }
  return most;
}

int kn_at_featurize(const kn_graph *g, const kn_group *grp, const kn_target *t, const kn_schedule *scheds, int n,
                    int workers, int threads, volatile sig_atomic_t *stop, float *feats, bool *ok) {
  for (int i = 0; i < n; i++) ok[i] = false;
  if (n <= 0) return 0;
  size_t bytes = sizeof(slot) * (size_t)n;
  slot *shared = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return -1;
  memset(shared, 0, bytes);
  int64_t big = largest_const(g, grp);
  int chunk = big > 0 ? (int)((256ll << 20) / big) : 64;
  if (chunk < 1) chunk = 1;
  if (chunk > 64) chunk = 64;
  if (chunk > (n + workers - 1) / workers) chunk = (n + workers - 1) / workers;
  if (workers < 1) workers = 1;
  pid_t pids[16];
  double started[16];
  int running = 0, next = 0, forked = 0;
  const double timeout = 120;
  while (next < n || running > 0) {
    if (stop && *stop) { /* Ctrl-C: the children go, their slots stay not ok */
      for (int k = 0; k < running; k++) {
        kill(pids[k], SIGKILL);
        waitpid(pids[k], NULL, 0);
      }
      running = 0;
      next = n;
      break;
    }
    while (running < workers && running < 16 && next < n) {
      int lo = next, hi = next + chunk < n ? next + chunk : n;
      fflush(NULL);
      pid_t pid = fork();
      if (pid < 0) break;
      if (pid == 0) child(g, grp, t, scheds, lo, hi, threads, shared);
      pids[running] = pid;
      started[running++] = kn_at_now();
      next = hi;
      forked++;
    }
    if (running == 0) break; /* fork failed with nothing running */
    /* reap our children that ended (only ours: builds may run elsewhere);
     * kill the ones past their time */
    bool reaped = false;
    for (int k = 0; k < running; k++) {
      int ws;
      if (waitpid(pids[k], &ws, WNOHANG) == pids[k]) {
        pids[k] = pids[running - 1];
        started[k] = started[running - 1];
        running--;
        k--;
        reaped = true;
      } else if (kn_at_now() - started[k] > timeout) {
        kill(pids[k], SIGKILL);
      }
    }
    if (!reaped) usleep(2000);
  }
  for (int i = 0; i < n; i++) {
    ok[i] = shared[i].ok == 1;
    if (ok[i]) memcpy(&feats[(size_t)i * KN_AT_N_FEATURES], shared[i].f, sizeof shared[i].f);
  }
  munmap(shared, bytes);
  return forked ? 0 : -1;
}
