/* gpt2gen prepare: text, JSON lines, folders of them, compressed or not -> token shards + tokenizer file
 * (runtime/data/prepare.c does the work). */
#include "cli/commands.h"
#include "runtime/data/dataset_dir.h"
#include "runtime/data/prepare.h"
#include "runtime/data/shard.h"
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_RANKS PREPARE_DEFAULT_RANKS

static const char USAGE[] =
    "Usage: gpt2gen prepare [OPTION]... INPUT... -o DIR\n"
    "Tokenize text with GPT-2's tokenizer into llm.c token shards.\n"
    "\n"
    "An INPUT is a file, a folder (every file under it, at any depth, in the order\n"
    "of their paths; names starting with \".\" and archives skipped), or \"-\" for\n"
    "standard input.\n"
    "Files may be gzip- or zstd-compressed (.gz, .zst; known by their first bytes).\n"
    "Files named *.jsonl, *.ndjson or *.json (compressed or not) are JSON lines:\n"
    "each line an object whose \"text\" string (--field) is one document; any other\n"
    "line is an error naming the file and line. Other files are text, cut into\n"
    "documents by --split-docs. Each input is read once, from start to end, so it\n"
    "may be a pipe or a FIFO. Documents of only whitespace are dropped. Each\n"
    "document is preceded by the end-of-text token. Documents go to validation at\n"
    "the fraction F, spread evenly as they come: document n (counting from 1 over\n"
    "all inputs) when floor(n*F) > floor((n-1)*F), so every tenth for 0.1 (the\n"
    "10th, 20th, ...); the rest to training. The text is encoded on --threads\n"
    "threads; the shards are the same byte for byte whatever their number. On a\n"
    "terminal, a progress line on stderr (bytes, tokens, tokens/s, ETA); otherwise\n"
    "one every 10 seconds.\n"
    "\n"
    "DIR is replaced as a whole, and only once the new data set is complete: a\n"
    "failed or interrupted run leaves DIR as it was. DIR must hold nothing but a\n"
    "data set (train_*.bin, val_*.bin, tokenizer.bin); anything else is refused.\n"
    "\n"
    "  -o, --out DIR           write DIR/train_000000.bin..., DIR/val_000000.bin...\n"
    "                          and DIR/tokenizer.bin (llm.c version 2)\n"
    "      --ranks FILE        tiktoken ranks file (gpt2.tiktoken) or an llm.c\n"
    "                          tokenizer.bin (default: " DEFAULT_RANKS ")\n"
    "      --val-fraction F    fraction of documents for validation: 0, or from\n"
    "                          0.000001 to 0.999999 (default: 0.1)\n"
    "      --shard-tokens N    at most N tokens per shard; suffixes K and M allowed\n"
    "                          (default: 100M)\n"
    "      --split-docs MODE   how text files are cut into documents:\n"
    "                            auto       separator, when a separator line comes\n"
    "                                       in the first MiB, else blank (default)\n"
    "                            separator  at lines holding only the separator\n"
    "                            blank      at runs of blank lines (paragraphs)\n"
    "                            lines      every line is a document\n"
    "                            none       every file is one document\n"
    "      --separator LINE    the separator line (default: \"%\", as in fortune\n"
    "                          files; a trailing \\r allowed); implies\n"
    "                          --split-docs separator unless one is given\n"
    "      --field NAME        the JSON lines' field that holds the text (default:\n"
    "                          text)\n"
    "      --format FORMAT     auto (by each file's name, the default), text or\n"
    "                          jsonl (every input, standard input included)\n"
    "      --threads N         encoding threads (default: the number of cores)\n"
    "  -h, --help              display this help and exit\n"
    "\n"
    "Exit status: 0 on success; 1 if an input cannot be read (missing, a folder\n"
    "with no files, damaged compressed data, a bad JSON line), the inputs hold no\n"
    "documents, or DIR cannot be written or replaced (DIR is then unchanged);\n"
    "2 on usage errors.\n"
    "\n"
    "Examples:\n"
    "  gpt2gen prepare /usr/share/games/fortunes/fortunes -o data/fortunes\n"
    "  gpt2gen prepare my_texts/ more.jsonl.zst -o data/mine\n"
    "  curl -L URL/TinyStoriesV2-GPT4-train.txt |\n"
    "      gpt2gen prepare - --separator '<|endoftext|>' -o data/tinystories\n";

static void usage(FILE *f) { fputs(USAGE, f); }

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

/* A validation fraction: 0, or one that is at least one millionth and leaves training at least one (the
   split counts in millionths). 0 on success. */
static int parse_fraction(const char *s, double *f) {
    char *end;
    *f = strtod(s, &end);
    double millionths = round(*f * 1e6);
    return end == s || *end || !(*f == 0 || (millionths >= 1 && millionths < 1e6));
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

/* What the options cannot say one by one: inputs and DIR given, DIR a folder of its own, standard input
   named at most once. -1 when so, else the usage error's exit code. */
static int check_args(const PrepareArgs *a) {
    if (a->n_inputs == 0) return usage_error("no inputs: give one or more files or folders of text");
    if (!a->out_dir) return usage_error("no output directory: give -o DIR");
    const char *problem = dataset_dir_problem(a->out_dir);
    if (problem) return usage_error("-o %s: %s", a->out_dir, problem);
    int from_stdin = 0;
    for (int i = 0; i < a->n_inputs; i++) from_stdin += !strcmp(a->inputs[i], "-");
    if (from_stdin > 1) return usage_error("'-' (standard input) is given %d times; it can be read once", from_stdin);
    return -1;
}

/* "--threads": 1 to 1024. 0 when malformed. */
static int parse_threads(const char *s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return end == s || *end || errno || v < 1 || v > 1024 ? 0 : (int)v;
}

static int default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

/* One option's value into a; -1 to go on, else the usage error's exit code. */
static int set_option(PrepareArgs *a, const char *name, const char *v, int *mode_given) {
    if (!strcmp(name, "--out")) a->out_dir = v;
    else if (!strcmp(name, "--ranks")) a->ranks = v;
    else if (!strcmp(name, "--val-fraction")) {
        if (parse_fraction(v, &a->val_fraction))
            return usage_error("--val-fraction '%s': expected 0, or a number from 0.000001 to 0.999999", err_show(v));
    } else if (!strcmp(name, "--shard-tokens")) {
        if (!(a->shard_tokens = parse_count(v)))
            return usage_error("--shard-tokens '%s': expected a count from 1 to 2147483647 (suffixes K, M)", err_show(v));
    } else if (!strcmp(name, "--split-docs")) {
        int m = docs_mode_of(v);
        if (m < 0) return usage_error("--split-docs '%s': expected auto, separator, blank, lines or none", err_show(v));
        a->docs.mode = (DocsMode)m;
        *mode_given = 1;
    } else if (!strcmp(name, "--separator")) {
        if (strlen(v) > DOCS_MAX_SEPARATOR || strchr(v, '\n'))
            return usage_error("--separator: expected one line of at most %d bytes", DOCS_MAX_SEPARATOR);
        a->docs.separator = v;
    } else if (!strcmp(name, "--field")) a->docs.field = v;
    else if (!strcmp(name, "--format")) {
        if (!strcmp(v, "auto")) a->format = -1;
        else if (!strcmp(v, "text")) a->format = CORPUS_TEXT;
        else if (!strcmp(v, "jsonl")) a->format = CORPUS_JSONL;
        else return usage_error("--format '%s': expected auto, text or jsonl", err_show(v));
    } else if (!(a->threads = parse_threads(v)))
        return usage_error("--threads '%s': expected a number from 1 to 1024", err_show(v));
    return -1;
}

/* Returns -1 to go on, else the exit code (help printed, or a usage error reported). */
static int parse_args(int argc, char **argv, PrepareArgs *a) {
    *a = (PrepareArgs){.inputs = xcalloc((size_t)argc, sizeof(char *)), .ranks = DEFAULT_RANKS,
                       .val_fraction = 0.1, .shard_tokens = 100000000, .format = -1, .threads = default_threads()};
    static const char *valued[] = {"--ranks", "--val-fraction", "--shard-tokens", "--split-docs", "--separator",
                                   "--field", "--format", "--threads"};
    int only_files = 0, mode_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *v;
        if (only_files || arg[0] != '-' || arg[1] == 0) { a->inputs[a->n_inputs++] = argv[i]; continue; }
        if (!strcmp(arg, "--")) { only_files = 1; continue; }
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) { usage(stdout); return EXIT_OK; }
        int out = is_option(arg, "-o") || is_option(arg, "--out");
        const char *name = out ? (arg[1] == '-' ? "--out" : "-o") : NULL;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0] && !name; k++) if (is_option(arg, valued[k])) name = valued[k];
        if (!name) return usage_error("unknown option '%s'", err_show(arg));
        if (!(v = option_value(argc, argv, &i, name)) || !*v) return usage_error("%s needs a value", name);
        int code = set_option(a, out ? "--out" : name, v, &mode_given);
        if (code >= 0) return code;
    }
    if (a->docs.separator && !mode_given) a->docs.mode = DOCS_SEPARATOR;
    return check_args(a);
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
