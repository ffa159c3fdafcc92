/* cache_state.c — cold timing (--cache cold): what a kernel meets inside a
 * model whose weights outgrow the last-level cache. Its weights were last
 * read a whole inference ago: before each timed run a buffer of twice the
 * last-level cache is read through. Its activations were just written, by
 * the kernel before it, in parts, one per pool thread: each input is written
 * back (same bytes) in contiguous parts, part k from the CPU that part k of a
 * parallel producer ran on, so the lines sit Modified in that core's caches.
 *
 * Why the parts: reading the inputs back from the timing thread alone (as
 * this did before) left all of them in one core, where a schedule that runs
 * on the calling thread only finds them; inside the model that core holds
 * half, so such a schedule won alone and lost in the model
 * (docs/autotune.md, "Cache state"). */
#include "autotune/cache_state.h"

#include <pthread.h>
#include <sched.h>
#include <string.h>

void kn_at_cold_init(kn_at_cold *c, const unsigned char *sweep, size_t sweep_bytes, int parts) {
  memset(c, 0, sizeof *c);
  c->sweep = sweep;
  c->sweep_bytes = sweep ? sweep_bytes : 0;
  c->parts = parts < 1 ? 1 : parts;
  cpu_set_t set;
  int self = sched_getcpu();
  if (c->parts < 2 || self < 0 || sched_getaffinity(0, sizeof set, &set) != 0) return;
  for (int cpu = 0; cpu < CPU_SETSIZE && c->n_cpus < KN_AT_COLD_MAX_CPUS; cpu++)
    if (cpu != self && CPU_ISSET(cpu, &set)) c->cpu[c->n_cpus++] = cpu;
  if (c->n_cpus == 0) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(self, &one);
  if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0) c->n_cpus = 0;
}

void kn_at_cold_add(kn_at_cold *c, void *p, size_t bytes) {
  if (c->n < KN_AT_COLD_MAX_INPUTS) {
    c->ptr[c->n] = p;
    c->bytes[c->n++] = bytes;
  }
}

typedef struct part_job {
  const kn_at_cold *c;
  int part, cpu;
} part_job;

/* Writes back one byte per line of part `part` of every input. */
static void write_part(const kn_at_cold *c, int part) {
  for (int i = 0; i < c->n; i++) {
    size_t lines = (c->bytes[i] + 63) / 64;
    size_t lo = lines * (size_t)part / (size_t)c->parts, hi = lines * (size_t)(part + 1) / (size_t)c->parts;
    volatile unsigned char *q = c->ptr[i];
    for (size_t l = lo; l < hi; l++) q[l * 64] = q[l * 64];
  }
}

static void *part_main(void *arg) {
  part_job *j = arg;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(j->cpu, &one);
  pthread_setaffinity_np(pthread_self(), sizeof one, &one);
  write_part(j->c, j->part);
  return NULL;
}

void kn_at_cold_prepare(const kn_at_cold *c) {
  volatile unsigned char sink = 0;
  unsigned char acc = 0;
  for (size_t off = 0; off < c->sweep_bytes; off += 64) acc ^= c->sweep[off];
  sink = acc;
  (void)sink;
  if (c->n_cpus == 0) {
    for (int p = 0; p < c->parts; p++) write_part(c, p);
    return;
  }
  part_job jobs[KN_AT_COLD_MAX_CPUS];
  pthread_t th[KN_AT_COLD_MAX_CPUS];
  bool started[KN_AT_COLD_MAX_CPUS] = {false};
  int n = c->parts - 1 < KN_AT_COLD_MAX_CPUS ? c->parts - 1 : KN_AT_COLD_MAX_CPUS;
  for (int k = 0; k < n; k++) {
    jobs[k] = (part_job){c, k + 1, c->cpu[k % c->n_cpus]};
    started[k] = pthread_create(&th[k], NULL, part_main, &jobs[k]) == 0;
    if (!started[k]) write_part(c, k + 1);
  }
  write_part(c, 0);
  for (int k = 0; k < n; k++)
    if (started[k]) pthread_join(th[k], NULL);
  for (int p = n + 1; p < c->parts; p++) write_part(c, p);
}
