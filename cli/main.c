/* gpt2gen: the command line. Picks the command; each lives in cli/<command>.c. */
#include "cli/commands.h"
#include "common/env.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define VERSION "0.1.0"

static const char *USAGE =
    "usage: gpt2gen <command> [options]\n"
    "       gpt2gen CONFIG.lua [options]       build and train (same as `gpt2gen train CONFIG.lua`)\n"
    "\n"
    "Generates CUDA kernels specialized for one model config (GPT-2, or a relative: docs/config.md's model keys),\n"
    "compiles them with NVRTC, and trains.\n"
    "\n"
    "commands:\n"
    "  build CONFIG.lua     generate and compile the kernels into build/<name>/\n"
    "  train CONFIG.lua     build, then train (CUDA where there is a GPU, else the CPU backend)\n"
    "  test CONFIG.lua      run every generated kernel against the CPU reference on the GPU\n"
    "  tune CONFIG.lua      time every variant of every kernel and matmul; the fastest go into the tuning database\n"
    "  prepare FILES -o DIR turn text, JSON lines, folders (.gz, .zst) into token shards and a tokenizer file\n"
    "  sample --checkpoint FILE [--prompt TEXT]   generate text from a model (key/value cache, GPU or CPU)\n"
    "  eval --checkpoint FILE --data EVAL.bin    multiple-choice accuracy (HellaSwag in llm.c's format)\n"
    "  export --checkpoint FILE --to DIR         a Hugging Face folder (GPT2LMHeadModel, LlamaForCausalLM or\n"
    "                                            Qwen3ForCausalLM: safetensors, config, tokenizer)\n"
    "  import DIR -o FILE   a Hugging Face GPT-2, Llama or Qwen3 folder (safetensors) into a model checkpoint\n"
    "  plot RUN... -o FILE.svg                   the runs' loss, accuracy, lr and tokens/s in one SVG (overlaid)\n"
    "\n"
    "common options:\n"
    "  --set KEY=VALUE      override a config value, e.g. --set train.steps=100 (repeatable)\n"
    "  --arch sm_XX         the GPU arch to compile for (default: the GPU's, else sm_90)\n"
    "  -h, --help           show help (also `gpt2gen <command> --help`)\n"
    "  --version            show the version\n"
    "\n"
    "Run `make test` for the test suite. docs/config.md documents every config key.\n";

/* A standard stream the caller closed (`>&-`) is opened on /dev/null, so that the first file gpt2gen opens does
   not take its number and get what is printed (tests/cli/survive.sh: run.lock did). */
static void open_std_streams(void) {
    int fd;
    while ((fd = open("/dev/null", O_RDWR)) >= 0 && fd <= 2) {}
    if (fd > 2) close(fd);
}

/* For the commands whose standard output is their result (sample's text, eval's score, plot -o -, the lines of
   export, import and prepare): the text still buffered is written, and a write that failed (a full disk,
   /dev/full) is one message and a non-zero exit, never success. */
static int output_checked(const char *cmd, int rc) {
    errno = 0;
    int bad = fflush(stdout) != 0 || ferror(stdout), e = errno;
    if (fclose(stdout) != 0 && !bad) { bad = 1; e = errno; }
    if (!bad || rc) return rc;   /* a command that failed has said why */
    fprintf(stderr, "gpt2gen %s: standard output: %s: what was written there is incomplete\n", cmd,
            e ? strerror(e) : "a write failed (a full disk?)");
    return EXIT_FAIL;
}

int main(int argc, char **argv) {
    open_std_streams();
    if (argc < 2) { fputs(USAGE, stderr); return EXIT_USAGE; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) { fputs(USAGE, stdout); return 0; }
    if (!strcmp(cmd, "--version")) { printf("gpt2gen %s\n", VERSION); return 0; }
    /* the environment, read and checked once (docs/environment.md), then passed down */
    static Env env;
    Err err;
    if (env_read(&env, &err)) { fprintf(stderr, "gpt2gen: %s\n", err.msg); return EXIT_USAGE; }
    if (!strcmp(cmd, "build")) return cmd_build(argc - 1, argv + 1, &env);
    if (!strcmp(cmd, "train")) return cmd_train(argc - 1, argv + 1, &env);
    if (!strcmp(cmd, "test")) return cmd_test(argc - 1, argv + 1, &env);
    if (!strcmp(cmd, "prepare")) return output_checked(cmd, cmd_prepare(argc - 1, argv + 1));
    if (!strcmp(cmd, "tune")) return cmd_tune(argc - 1, argv + 1, &env);
    if (!strcmp(cmd, "sample")) return output_checked(cmd, cmd_sample(argc - 1, argv + 1, &env));
    if (!strcmp(cmd, "eval")) return output_checked(cmd, cmd_eval(argc - 1, argv + 1, &env));
    if (!strcmp(cmd, "export")) return output_checked(cmd, cmd_export(argc - 1, argv + 1));
    if (!strcmp(cmd, "import")) return output_checked(cmd, cmd_import(argc - 1, argv + 1));
    if (!strcmp(cmd, "plot")) return output_checked(cmd, cmd_plot(argc - 1, argv + 1));
    size_t n = strlen(cmd);
    if (n > 4 && !strcmp(cmd + n - 4, ".lua")) return cmd_train(argc, argv, &env);   /* gpt2gen CONFIG.lua */
    fprintf(stderr, "gpt2gen: unknown command '%s' (see gpt2gen --help)\n", err_show(cmd));
    return EXIT_USAGE;
}
