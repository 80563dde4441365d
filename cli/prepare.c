/* gpt2gen prepare: text files -> token shards + tokenizer file (runtime/prepare.c does the work). */
#include "cli/commands.h"
#include "runtime/prepare.h"
#include "runtime/shard.h"
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_RANKS PREPARE_DEFAULT_RANKS

static void usage(FILE *f) {
    fputs(
        "Usage: gpt2gen prepare [OPTION]... FILE... -o DIR\n"
        "Tokenize text files with GPT-2's tokenizer into llm.c token shards.\n"
        "\n"
        "A file with lines holding only \"%\" (a fortune file) is many documents, split at\n"
        "those lines; any other file is one document. Each document is preceded by the\n"
        "end-of-text token. A fraction of the documents, spread evenly over all of them\n"
        "(every tenth for 0.1), goes to validation; the rest to training.\n"
        "\n"
        "  -o, --out DIR           write DIR/train_000000.bin..., DIR/val_000000.bin...\n"
        "                          and DIR/tokenizer.bin (llm.c version 2)\n"
        "      --ranks FILE        tiktoken ranks file (gpt2.tiktoken) or an llm.c\n"
        "                          tokenizer.bin (default: " DEFAULT_RANKS ")\n"
        "      --val-fraction F    fraction of documents for validation, 0 <= F < 1\n"
        "                          (default: 0.1)\n"
        "      --shard-tokens N    at most N tokens per shard; suffixes K and M allowed\n"
        "                          (default: 100M)\n"
        "  -h, --help              display this help and exit\n"
        "\n"
        "Exit status: 0 on success, 1 if a file cannot be read or written, 2 on usage errors.\n"
        "\n"
        "Example:\n"
        "  gpt2gen prepare /usr/share/games/fortunes/fortunes -o data/fortunes \\\n"
        "      --ranks data/gpt2.tiktoken\n", f);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("gpt2gen prepare: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs(" (see gpt2gen prepare --help)\n", stderr);
    return EXIT_USAGE;
}

/* "100M", "64K", "5000" -> count; 0 when malformed or out of range. */
static size_t parse_count(const char *s) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno) return 0;
    if (*end == 'K' || *end == 'k') { v *= 1e3; end++; }
    else if (*end == 'M' || *end == 'm') { v *= 1e6; end++; }
    if (*end || v < 1 || v > SHARD_MAX_TOKENS || v != floor(v)) return 0;
    return (size_t)v;
}

/* The value of option name at argv[*i]: "--name=value" or "--name value". NULL when missing. */
static const char *option_value(int argc, char **argv, int *i, const char *name) {
    size_t n = strlen(name);
    if (argv[*i][n] == '=') return argv[*i] + n + 1;
    if (*i + 1 >= argc) return NULL;
    return argv[++*i];
}

static int is_option(const char *arg, const char *name) {
    size_t n = strlen(name);
    return strncmp(arg, name, n) == 0 && (arg[n] == 0 || (arg[n] == '=' && name[1] == '-'));
}

/* Returns -1 to go on, else the exit code (help printed, or a usage error reported). */
static int parse_args(int argc, char **argv, PrepareArgs *a) {
    *a = (PrepareArgs){.inputs = xcalloc((size_t)argc, sizeof(char *)), .ranks = DEFAULT_RANKS,
                       .val_fraction = 0.1, .shard_tokens = 100000000};
    int only_files = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *v;
        if (only_files || arg[0] != '-' || arg[1] == 0) { a->inputs[a->n_inputs++] = argv[i]; continue; }
        if (!strcmp(arg, "--")) { only_files = 1; continue; }
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) { usage(stdout); return EXIT_OK; }
        int out = is_option(arg, "-o") || is_option(arg, "--out");
        const char *name = out ? (arg[1] == '-' ? "--out" : "-o") : NULL;
        if (!name) {
            static const char *valued[] = {"--ranks", "--val-fraction", "--shard-tokens"};
            for (size_t k = 0; k < 3 && !name; k++) if (is_option(arg, valued[k])) name = valued[k];
        }
        if (!name) return usage_error("unknown option '%s'", arg);
        if (!(v = option_value(argc, argv, &i, name)) || !*v) return usage_error("%s needs a value", name);
        if (out) a->out_dir = v;
        else if (!strcmp(name, "--ranks")) a->ranks = v;
        else if (!strcmp(name, "--val-fraction")) {
            char *end;
            a->val_fraction = strtod(v, &end);
            if (*end || !(a->val_fraction >= 0 && a->val_fraction < 1))
                return usage_error("--val-fraction '%s': expected a number with 0 <= F < 1", v);
        } else if (!(a->shard_tokens = parse_count(v)))
            return usage_error("--shard-tokens '%s': expected a count from 1 to 2147483647 (suffixes K, M)", v);
    }
    if (a->n_inputs == 0) return usage_error("no input files: give one or more text files");
    if (!a->out_dir) return usage_error("no output directory: give -o DIR");
    return -1;
}

int cmd_prepare(int argc, char **argv) {
    PrepareArgs a;
    int code = parse_args(argc, argv, &a);
    if (code < 0) {
        Err err = {{0}};
        code = prepare_run(&a, &err) ? EXIT_FAIL : EXIT_OK;
        if (code) fprintf(stderr, "gpt2gen prepare: %s\n", err.msg);
    }
    free(a.inputs);
    return code;
}
