/* cmd_compile.c — `kiln compile`: argument parsing around kn_compile. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "tools/cmds.h"
#include "tools/options.h"
#include "tools/pipeline.h"

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

enum { MAX_STAGES = 64 };

/* The stages of tools/pipeline.c's table into stages[] (NULL-terminated),
 * and the --help line of --dump-after that lists them. */
static void dump_after_stages(const char **stages, char *buf, size_t cap) {
  size_t n = (size_t)snprintf(buf, cap, "print the IR after STAGE to stdout; stages:");
  int i = 0;
  for (; i < MAX_STAGES && kn_pipeline_stage(i); i++) {
    stages[i] = kn_pipeline_stage(i);
    if (n < cap) n += (size_t)snprintf(buf + n, cap - n, " %s", stages[i]);
  }
  stages[i] = NULL;
}

/* The values of the repeatable options, "NAME=..." each, parsed once the
 * arena exists (room for argc each). */
typedef struct named_args {
  const char **binds, **dims;
  int n_binds, n_dims;
} named_args;

/* Reads the command line into *o and *named; returns KN_OPTS_GO_ON or the
 * exit status. */
static int parse_args(int argc, char **argv, kn_compile_opts *o, named_args *named) {
  const char *conv_algos[KN_CONV_ALGOS + 2] = {[KN_CONV_ALGOS] = "auto"};
  memcpy(conv_algos, kn_conv_algo_name, sizeof kn_conv_algo_name);
  const char *precisions[KN_PRECISIONS + 1] = {0};
  memcpy(precisions, kn_precision_name, sizeof kn_precision_name);
  const char *stages[MAX_STAGES + 1];
  char dump_help[1024];
  dump_after_stages(stages, dump_help, sizeof dump_help);
  bool progress = false;
  const kn_opt opts[] = {
      {"--output", "-o", "PATH",
       "artifact to write (.so shared library, .o object, or\n.c portable C source with --target c);\n"
       "the header is written beside it as OUT.h",
       .str = &o->output},
      {"--header", NULL, "PATH.h",
       "write the header here instead of OUT.h (kiln does not\nreplace a header it wrote for another prefix)",
       .str = &o->header},
      {"--target", NULL, "STRING",
       "\"TRIPLE [-mcpu=CPU] [-mattr=+f,-g]\" (default: the host),\nor \"c\" (portable C source, -o OUT.c)",
       .str = &o->target},
      {"--max-batch", NULL, "B", "largest batch the artifact accepts (default 1)", .whole = &o->max_batch,
       .lo = 1, .hi = 1 << 20, .expect = "a batch size in [1, 1048576]"},
      {"--prefix", NULL, "NAME", "C prefix of the artifact's symbols (default \"model\")", .str = &o->prefix},
      {"--bind", NULL, "NAME=FILE",
       "make graph input NAME the constant in FILE (.npy or ONNX\nTensorProto .pb); the artifact no longer "
       "takes NAME\n(repeatable)",
       .list = named->binds, .count = &named->n_binds, .max = argc},
      {"--dim", NULL, "NAME=VALUE",
       "fix the model's symbolic dim NAME (a dim_param of its\ninputs) to VALUE >= 1 (repeatable); pinning the batch\n"
       "symbol makes the batch static",
       .list = named->dims, .count = &named->n_dims, .max = argc},
      {"--tuning-log", NULL, "LOG.jsonl",
       "use the best record per workload of a `kiln tune` log\n(records for other targets are ignored with a notice)",
       .str = &o->tuning_log},
      {"--conv-algo", NULL, "A",
       "3x3 stride-1 convs: direct, winograd (F(2x2,3x3) wherever\nit applies), winograd4 (F(4x4,3x3) likewise) "
       "or auto\n(default: F(2x2,3x3) for >= 32 channels; with --tuning-log,\nper conv the algorithm whose kernels "
       "measured fastest)",
       .str = &o->conv_algo, .choices = conv_algos},
      {"--precision", NULL, "P",
       "fp32 (default), fp16 or bf16: float32 weights converted at\ncompile time, activations stored in 16 bits, "
       "sums in\nfloat32; the artifact's inputs and outputs stay float32",
       .str = &o->precision, .choices = precisions},
      {"--check-indices", NULL, NULL,
       "check gather / scatter indices at run time: an index out\nof range makes P_run return KILN_ERR_INDEX "
       "(7) and write\nno output (default: it reads 0 / drops the update)",
       .flag = &o->check_indices},
      {"--dump-after", NULL, "=STAGE", dump_help, .str = &o->dump_after, .choices = stages},
      {"--verbose", "-v", NULL, "print a summary line", .flag = &o->verbose},
      {"--progress", NULL, NULL,
       "print each stage's time on stderr as it ends (by default\nonly on a terminal, once the compile has run 2 s)",
       .flag = &progress},
  };
  const kn_cmd_spec spec = {"compile", "usage: kiln compile MODEL.onnx -o OUT.so|OUT.o|OUT.c [options]", "model",
                            opts, (int)(sizeof opts / sizeof *opts), NULL};
  int status = kn_opts_parse(&spec, argc, argv, &o->model);
  o->progress = progress ? KN_PROGRESS_ALWAYS : KN_PROGRESS_AUTO;
  return status;
}

/* The output's name and the prefix; KN_OPTS_GO_ON or 2. */
static int check_output(const kn_compile_opts *o) {
  if (!o->output) {
    fprintf(stderr, "kiln: error: compile: no output given: add -o OUT.so or -o OUT.o\n");
    return 2;
  }
  if (!has_suffix(o->output, ".so") && !has_suffix(o->output, ".o") && !has_suffix(o->output, ".c")) {
    fprintf(stderr, "kiln: error: compile: output '%s' must end in .so, .o or .c (with --target c)\n",
            o->output);
    return 2;
  }
  if (!valid_prefix(o->prefix)) {
    fprintf(stderr, "kiln: error: compile: --prefix '%s' is not a C identifier free for the artifact "
                    "(names starting with 'kiln' or 'kn_' are reserved)\n", o->prefix);
    return 2;
  }
  if (o->header && !has_suffix(o->header, ".h")) {
    fprintf(stderr, "kiln: error: compile: --header '%s' must end in .h\n", o->header);
    return 2;
  }
  return KN_OPTS_GO_ON;
}

/* Before the compile, so that it fails fast: the header's place holds no
 * header of another prefix (kn_cg_package checks again before writing). */
static int check_header(const kn_compile_opts *o, kn_diag *d) {
  char *path = kn_cg_header_path(o->output, o->header);
  int status = kn_cg_header_check(path, o->prefix, d);
  free(path);
  return status;
}

int kn_cmd_compile(int argc, char **argv) {
  kn_compile_opts o = {.prefix = "model", .max_batch = 1};
  named_args named = {.binds = calloc((size_t)argc, sizeof(const char *)),
                      .dims = calloc((size_t)argc, sizeof(const char *))};
  kn_binding *binds = calloc((size_t)argc, sizeof *binds);
  kn_fe_dim *dims = calloc((size_t)argc, sizeof *dims);
  kn_arena arena;
  kn_arena_init(&arena);
  kn_diag d;
  kn_diag_init(&d);
  int status = 2;
  if (!named.binds || !named.dims || !binds || !dims) goto out;
  int parsed = parse_args(argc, argv, &o, &named);
  if (parsed != KN_OPTS_GO_ON) {
    status = parsed;
    goto out;
  }
  for (int i = 0; i < named.n_binds; i++)
    if (kn_binding_parse(named.binds[i], &arena, &binds[i], &d) < 0) {
      kn_diag_print(&d, "kiln");
      goto out;
    }
  o.binds = binds;
  o.n_binds = named.n_binds;
  o.n_dims = kn_fe_dims_parse(named.dims, named.n_dims, &arena, dims, &d);
  if (o.n_dims < 0) {
    kn_diag_print(&d, "kiln");
    goto out;
  }
  o.dims = dims;
  if (check_output(&o) != KN_OPTS_GO_ON) goto out;
  status = check_header(&o, &d) || kn_compile(&o, &d) < 0 ? 1 : 0;
  if (status) {
    if (d.count == 0) kn_diag_error(&d, "compile of '%s' failed", o.model);
    kn_diag_print(&d, "kiln");
  }
out:
  kn_diag_free(&d);
  kn_arena_free(&arena);
  free(dims);
  free(binds);
  free(named.dims);
  free(named.binds);
  return status;
}
