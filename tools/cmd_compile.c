/* cmd_compile.c — `kiln compile`: argument parsing around kn_compile. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cmds.h"
#include "tools/pipeline.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: kiln compile MODEL.onnx -o OUT.so|OUT.o|OUT.c [options]\n"
          "  -o, --output PATH      artifact to write (.so shared library, .o object, or\n"
          "                         .c portable C source with --target c);\n"
          "                         the header is written beside it as OUT.h\n"
          "  --target STRING        \"TRIPLE [-mcpu=CPU] [-mattr=+f,-g]\" (default: the host),\n"
          "                         or \"c\" (portable C source, -o OUT.c)\n"
          "  --max-batch B          largest batch the artifact accepts (default 1)\n"
          "  --prefix NAME          C prefix of the artifact's symbols (default \"model\")\n"
          "  --bind NAME=FILE       make graph input NAME the constant in FILE (.npy or ONNX\n"
          "                         TensorProto .pb); the artifact no longer takes NAME\n"
          "                         (repeatable)\n"
          "  --tuning-log LOG.jsonl use the best record per workload of a `kiln tune` log\n"
          "                         (records for other targets are ignored with a notice)\n"
          "  --conv-algo A          3x3 stride-1 convs: direct, winograd (F(2x2,3x3) wherever\n"
          "                         it applies), winograd4 (F(4x4,3x3) likewise) or auto\n"
          "                         (default: F(2x2,3x3) for >= 32 channels; with --tuning-log,\n"
          "                         per conv the algorithm whose kernels measured fastest)\n"
          "  --dump-after=STAGE     print the IR after STAGE to stdout; stages:");
  for (int i = 0; kn_pipeline_stage(i); i++) fprintf(out, " %s", kn_pipeline_stage(i));
  fprintf(out, "\n  -v, --verbose          print a summary line\n");
}

/* A C identifier that cannot clash with the ABI's names (kiln_*, the
 * kiln_artifact typedef) or the runtime's hidden symbols (kn_*). */
static bool valid_prefix(const char *p) {
  if (!*p || isdigit((unsigned char)*p)) return false;
  if (!strcmp(p, "kiln") || !strncmp(p, "kiln_", 5) || !strncmp(p, "kn_", 3) || !strcmp(p, "kn"))
    return false;
  for (; *p; p++)
    if (!isalnum((unsigned char)*p) && *p != '_') return false;
  return true;
}

static bool has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n > k && !strcmp(s + n - k, suffix);
}

int kn_cmd_compile(int argc, char **argv) {
  kn_compile_opts o = {.prefix = "model", .max_batch = 1};
  kn_binding *binds = calloc((size_t)argc, sizeof *binds);
  kn_arena arena;
  kn_arena_init(&arena);
  kn_diag d;
  kn_diag_init(&d);
  int status = 2;
  if (!binds) goto out;
  o.binds = binds;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = NULL;
#define TAKE(flag)                                                                              \
  (!strcmp(a, flag) ? (i + 1 < argc ? (val = argv[++i], 1) : -1)                              \
                    : (!strncmp(a, flag "=", strlen(flag) + 1) ? (val = a + strlen(flag) + 1, 1) : 0))
    int r;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      status = 0;
      goto out;
    } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
      o.verbose = true;
    } else if ((r = TAKE("-o")) || (r = TAKE("--output"))) {
      if (r < 0) goto missing;
      o.output = val;
    } else if ((r = TAKE("--target"))) {
      if (r < 0) goto missing;
      o.target = val;
    } else if ((r = TAKE("--prefix"))) {
      if (r < 0) goto missing;
      o.prefix = val;
    } else if ((r = TAKE("--bind"))) {
      if (r < 0) goto missing;
      if (kn_binding_parse(val, &arena, &binds[o.n_binds], &d) < 0) {
        kn_diag_print(&d, "kiln");
        goto out;
      }
      o.n_binds++;
    } else if ((r = TAKE("--tuning-log"))) {
      if (r < 0) goto missing;
      o.tuning_log = val;
    } else if ((r = TAKE("--conv-algo"))) {
      if (r < 0) goto missing;
      if (!kn_pipeline_conv_algo_valid(val)) {
        fprintf(stderr, "kiln: error: --conv-algo: '%s' is not direct, winograd, winograd4 or auto\n", val);
        goto out;
      }
      o.conv_algo = val;
    } else if ((r = TAKE("--dump-after"))) {
      if (r < 0) goto missing;
      o.dump_after = val;
    } else if ((r = TAKE("--max-batch"))) {
      if (r < 0) goto missing;
      char *end;
      errno = 0;
      long long b = strtoll(val, &end, 10);
      if (errno || *end || b < 1 || b > (1 << 20)) {
        fprintf(stderr, "kiln: error: --max-batch: '%s' is not a batch size in [1, 1048576]\n", val);
        goto out;
      }
      o.max_batch = b;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "kiln: error: compile: unknown option '%s' (see 'kiln compile --help')\n", a);
      goto out;
    } else if (!o.model) {
      o.model = a;
    } else {
      fprintf(stderr, "kiln: error: compile: unexpected argument '%s' (one model at a time)\n", a);
      goto out;
    }
    continue;
  missing:
    fprintf(stderr, "kiln: error: compile: option '%s' needs a value\n", a);
    goto out;
#undef TAKE
  }
  if (!o.model) {
    fprintf(stderr, "kiln: error: compile: no model given (see 'kiln compile --help')\n");
    goto out;
  }
  if (!o.output) {
    fprintf(stderr, "kiln: error: compile: no output given: add -o OUT.so or -o OUT.o\n");
    goto out;
  }
  if (!has_suffix(o.output, ".so") && !has_suffix(o.output, ".o") && !has_suffix(o.output, ".c")) {
    fprintf(stderr, "kiln: error: compile: output '%s' must end in .so, .o or .c (with --target c)\n",
            o.output);
    goto out;
  }
  if (!valid_prefix(o.prefix)) {
    fprintf(stderr, "kiln: error: compile: --prefix '%s' is not a C identifier free for the artifact "
                    "(names starting with 'kiln' or 'kn_' are reserved)\n", o.prefix);
    goto out;
  }
  if (o.dump_after && !kn_pipeline_stage_valid(o.dump_after)) {
    fprintf(stderr, "kiln: error: compile: unknown stage '%s' for --dump-after; stages:", o.dump_after);
    for (int i = 0; kn_pipeline_stage(i); i++) fprintf(stderr, " %s", kn_pipeline_stage(i));
    fprintf(stderr, "\n");
    goto out;
  }
  status = kn_compile(&o, &d) < 0 ? 1 : 0;
  if (status) {
    if (d.count == 0) kn_diag_error(&d, "compile of '%s' failed", o.model);
    kn_diag_print(&d, "kiln");
  }
out:
  kn_diag_free(&d);
  kn_arena_free(&arena);
  free(binds);
  return status;
}
