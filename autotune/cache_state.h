/* cache_state.h — the cache state a candidate is timed in under
 * `--cache cold` (cache_state.c): its constants evicted, its inputs in the
 * caches of the cores that would have written them inside a model. */
#ifndef KN_AT_CACHE_STATE_H
#define KN_AT_CACHE_STATE_H

#include <stdbool.h>
#include <stddef.h>

#define KN_AT_COLD_MAX_INPUTS 65
/* names the inputs of a candidate's artifact that are the model's inputs:
 * read once per inference, a whole inference after their last use, they are
 * not written back (a kernel timed with its image in L2 that inside a model
 * comes from L3 or memory times faster alone than it runs there) */
#define KN_AT_MODEL_INPUT_PREFIX "model_in"
#define KN_AT_COLD_MAX_CPUS 256

typedef struct kn_at_cold {
  const unsigned char *sweep; /* read through to evict the constants */
  size_t sweep_bytes;
  int n;
  void *ptr[KN_AT_COLD_MAX_INPUTS];
  size_t bytes[KN_AT_COLD_MAX_INPUTS];
  int parts;  /* the producer's threads: input i is written back in `parts` contiguous parts */
  int n_cpus; /* CPUs for parts 1.. (part 0 stays on the calling thread's CPU) */
  int cpu[KN_AT_COLD_MAX_CPUS];
} kn_at_cold;

/* Pins the calling thread (the one that will run task 0 of every kernel) to
 * the CPU it is on and lists the process's other CPUs for parts 1... Call
 * after the artifact's thread pool exists: its workers keep the affinity
 * they were created with. `parts` < 2, or no other CPU, places everything
 * from the calling thread. */
void kn_at_cold_init(kn_at_cold *c, const unsigned char *sweep, size_t sweep_bytes, int parts);
/* Registers an input buffer that a kernel before this one wrote (the
 * caller's own: it is written back as is). */
void kn_at_cold_add(kn_at_cold *c, void *p, size_t bytes);
/* Before a timed run: reads the sweep buffer through, then writes every
 * input back, part k of each from the CPU of part k. */
void kn_at_cold_prepare(const kn_at_cold *c);

#endif
