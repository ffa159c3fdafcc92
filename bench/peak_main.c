/* peak_main.c — kiln-peak: prints the machine's fp32 FMA peak (bench/peak.c)
 * on 1 thread and on N threads (default: the CPUs this process may use).
 *
 *   kiln-peak [--threads N] [--seconds S] [--json]
 *
 * bench/bench.py runs it with --json and shows the figures beside the model
 * table; `kiln run --profile` measures the same way at startup. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/peak.h"

static int cpu_count(void) {
  cpu_set_t set;
  int n = 0;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  if (n < 1) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n;
}

static int usage(const char *why, const char *arg) {
  fprintf(stderr, "kiln-peak: error: %s '%s' (usage: kiln-peak [--threads N] [--seconds S] [--json])\n",
          why, arg);
  return 2;
}

int main(int argc, char **argv) {
  int threads = cpu_count(), json = 0;
  double seconds = 0.5;
  for (int i = 1; i < argc; i++) {
    char *end;
    if (!strcmp(argv[i], "--json")) {
      json = 1;
    } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
      long v = strtol(argv[++i], &end, 10);
      if (*end || v < 1 || v > 256) return usage("--threads wants 1..256, got", argv[i]);
      threads = (int)v;
    } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = strtod(argv[++i], &end);
      if (*end || !(seconds >= 0.01 && seconds <= 60)) return usage("--seconds wants 0.01..60, got", argv[i]);
    } else {
      return usage("unknown or incomplete option", argv[i]);
    }
  }
  kn_peak_result one, all;
  if (kn_peak_measure(1, seconds, &one) || kn_peak_measure(threads, seconds, &all)) {
    fprintf(stderr, "kiln-peak: error: could not run the benchmark threads\n");
    return 1;
  }
  if (json) {
    printf("{\"isa\": \"%s\", \"lanes\": %d, \"gflops_1\": %.2f, \"threads\": %d, "
           "\"gflops_n\": %.2f}\n",
           one.isa, one.lanes, one.gflops, all.threads, all.gflops);
  } else {
    printf("fp32 FMA peak (%s, %d lanes): %.1f GFLOP/s on 1 thread, %.1f GFLOP/s on %d threads\n",
           one.isa, one.lanes, one.gflops, all.gflops, all.threads);
  }
  return 0;
}
