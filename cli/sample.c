/* gpt2gen sample: text from a model checkpoint (ours or llm.c's, any shape), through the key/value cache of
   runtime/sample/sampler.h. Standard output holds only the text; every message goes to standard error. */
#include "cli/commands.h"
#include "common/files.h"
#include "common/gpt2.h"
#include "runtime/checkpoint.h"
#include "runtime/gpu.h"
#include "runtime/data/tokenizer.h"
#include "runtime/sample/sampler.h"
#include "common/metrics_json.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *SAMPLE_USAGE =
    "usage: gpt2gen sample --checkpoint FILE [--prompt TEXT | --prompt-file FILE] [options]\n"
    "\n"
    "Generates text from a model checkpoint (gpt2gen's or llm.c's, fp32 or bf16, of any shape: it is read from\n"
    "the file's header). The prompt runs once through the model (the prefill), then each new token is one step\n"
    "against the key/value cache; on the GPU that step is one CUDA graph, and the draw runs there too. Only the\n"
    "text goes to standard output, as it is generated; messages go to standard error.\n"
    "\n"
    "options:\n"
    "  --checkpoint FILE   the model (required)\n"
    "  --prompt TEXT       the text to continue (default: none, the model starts after end-of-text)\n"
    "  --prompt-file FILE  the prompt from a file ('-': standard input)\n"
    "  --tokens N          new tokens per sample (default 256, or what fits the model's context); sampling also\n"
    "                      stops at end-of-text\n"
    "  --temperature T     softmax temperature (default 1); 0 is greedy: the most likely token every time\n"
    "  --top-k K           draw from the K most likely tokens only (default 0: all)\n"
    "  --top-p P           draw from the smallest set of most likely tokens holding probability P (default 1: all)\n"
    "  --seed S            the random seed (default 1337): the same seed gives the same text on the same backend\n"
    "  --batch N           N samples of the prompt at once, each with its own random stream (default 1); they are\n"
    "                      printed one after another when all are done, separated by lines of ---\n"
    "  --tokenizer FILE    the tokenizer: llm.c's tokenizer file (gpt2gen prepare writes one) or a tiktoken ranks\n"
    "                      file (default: tokenizer.bin or gpt2_tokenizer.bin beside the checkpoint, else\n"
    "                      data/fortunes/tokenizer.bin, the default data set's)\n"
    "  --backend B         auto (default: CUDA where there is a GPU, else the CPU backend), cpu or cuda\n"
    "  --precision P       fp32, bf16 or fp16 on the GPU (default: the checkpoint's); the CPU backend is fp32\n"
    "  --echo              print the prompt before the text\n"
    "  --ignore-eot        do not stop at end-of-text (benchmarks)\n"
    "  --no-cache          re-run the whole forward for every token, without the cache (for comparison)\n"
    "  --stats             print one line `sample-stats {json}` of timings on standard error at the end\n"
    "  --arch sm_XX        the GPU arch to compile for (default: the GPU's)\n"
    "  --decode D          how a decode step runs: kernels (default: a kernel per op, each starting as the one\n"
    "                      before ends; our linears at 1 or 2 rows, cuBLASLt's above), persistent (1 or 2 rows on\n"
    "                      sm_90: the whole step in one kernel) or linears (our linears at any batch)\n"
    "\n"
    "examples:\n"
    "  gpt2gen sample --checkpoint runs/tiny/model_00000300.bin --prompt \"Once upon a time\" --tokens 64\n"
    "  echo \"The meaning of life is\" | gpt2gen sample --checkpoint gpt2_124M.bin --prompt-file - --top-k 40\n";

typedef struct {
    const char *checkpoint, *prompt, *prompt_file, *tokenizer, *backend, *precision, *arch;
    long tokens;              /* -1: the default */
    double temperature, top_p;
    long top_k, batch;
    unsigned long long seed;
    int echo, ignore_eot, no_cache, stats, help;
    int decode;               /* RunSpec.decode */
    const Env *env;   /* main's */
} SampleArgs;

static int usage_error(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "gpt2gen sample: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, " (see gpt2gen sample --help)\n");
    return EXIT_USAGE;
}

static int number(const char *opt, const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
        char range[96];
        snprintf(range, sizeof range, "a number from %g to %g", lo, hi);
        fprintf(stderr, "gpt2gen sample: %s: expected %s, got '%s'\n", opt, range, err_show(s));
        return EXIT_USAGE;
    }
    *out = v;
    return 0;
}
static int integer(const char *opt, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "gpt2gen sample: %s: expected an integer from %ld to %ld, got '%s'\n", opt, lo, hi, err_show(s));
        return EXIT_USAGE;
    }
    *out = v;
    return 0;
}

static int parse(int argc, char **argv, SampleArgs *a) {
    memset(a, 0, sizeof *a);
    a->tokens = -1; a->temperature = 1; a->top_p = 1; a->batch = 1; a->seed = 1337; a->backend = "auto";
    static const char *const with_value[] = {"--checkpoint", "--prompt", "--prompt-file", "--tokens", "--temperature",
        "--top-k", "--top-p", "--seed", "--batch", "--tokenizer", "--backend", "--precision", "--arch", "--decode", NULL};
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v = NULL;
        for (int k = 0; with_value[k]; k++)
            if (!strcmp(s, with_value[k])) {
                if (i + 1 == argc) return usage_error("option '%s' needs a value%s", s, "");
                v = argv[++i];
            }
        double d;
        long n;
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) a->help = 1;
        else if (!strcmp(s, "--echo")) a->echo = 1;
        else if (!strcmp(s, "--ignore-eot")) a->ignore_eot = 1;
        else if (!strcmp(s, "--no-cache")) a->no_cache = 1;
        else if (!strcmp(s, "--stats")) a->stats = 1;
        else if (!v) return usage_error(s[0] == '-' ? "unknown option '%s'%s" : "unexpected argument '%s'%s", err_show(s), "");
        else if (!strcmp(s, "--checkpoint")) a->checkpoint = v;
        else if (!strcmp(s, "--prompt")) a->prompt = v;
        else if (!strcmp(s, "--prompt-file")) a->prompt_file = v;
        else if (!strcmp(s, "--tokenizer")) a->tokenizer = v;
        else if (!strcmp(s, "--precision")) a->precision = v;
        else if (!strcmp(s, "--decode")) {
            if (strcmp(v, "kernels") && strcmp(v, "persistent") && strcmp(v, "linears"))
                return usage_error("--decode: expected kernels, persistent or linears, got '%s'%s", err_show(v), "");
            a->decode = !strcmp(v, "persistent") ? DECODE_PERSISTENT : !strcmp(v, "linears") ? DECODE_LINEARS : DECODE_KERNELS;
        }
        else if (!strcmp(s, "--arch")) {
            if (!config_arch_valid(v)) return usage_error("--arch: expected sm_XX with XX >= 70, got '%s'%s", err_show(v), "");
            a->arch = v;
        } else if (!strcmp(s, "--backend")) {
            if (strcmp(v, "auto") && strcmp(v, "cpu") && strcmp(v, "cuda"))
                return usage_error("--backend: expected auto, cpu or cuda, got '%s'%s", err_show(v), "");
            a->backend = v;
        } else if (!strcmp(s, "--tokens")) { if (integer(s, v, 1, 1 << 20, &a->tokens)) return EXIT_USAGE; }
        else if (!strcmp(s, "--top-k")) { if (integer(s, v, 0, 1 << 30, &a->top_k)) return EXIT_USAGE; }
        else if (!strcmp(s, "--batch")) { if (integer(s, v, 1, 4096, &a->batch)) return EXIT_USAGE; }
        else if (!strcmp(s, "--seed")) { if (integer(s, v, 0, 0x7fffffffffffffffL, &n)) return EXIT_USAGE; a->seed = (unsigned long long)n; }
        else if (!strcmp(s, "--temperature")) { if (number(s, v, 0, 1e6, &a->temperature)) return EXIT_USAGE; }
        else if (!strcmp(s, "--top-p")) {   /* (0, 1]: number's "from 0 to 1" would say 0 is allowed */
            char *end;
            errno = 0;
            d = strtod(v, &end);
            if (errno || end == v || *end || !(d > 0 && d <= 1))
                return usage_error("--top-p: expected a number above 0 and at most 1, got '%s'%s", err_show(v), "");
            a->top_p = d;
        }
    }
    if (a->help) return 0;
    if (!a->checkpoint) return usage_error("missing --checkpoint FILE%s%s", "", "");
    if (a->prompt && a->prompt_file) return usage_error("--prompt and --prompt-file: give one of them%s%s", "", "");
    if (a->precision && strcmp(a->precision, "fp32") && strcmp(a->precision, "bf16") && strcmp(a->precision, "fp16"))
        return usage_error("--precision: expected fp32, bf16 or fp16, got '%s'%s", err_show(a->precision), "");
    return 0;
}

enum { PROMPT_MAX = 64u << 20 };   /* a prompt's bytes, from any source (docs/data.md, "Limits") */

/* the prompt's bytes: --prompt, --prompt-file (standard input for -), or none */
static char *read_prompt(const SampleArgs *a, size_t *len, Err *err) {
    if (a->prompt) { *len = strlen(a->prompt); return xstrdup(a->prompt); }
    *len = 0;
    if (!a->prompt_file) return xstrdup("");
    if (strcmp(a->prompt_file, "-")) return read_file_max(a->prompt_file, PROMPT_MAX, len, err);
    size_t cap = 4096;
    char *s = xmalloc(cap + 1);
    size_t got;
    while ((got = fread(s + *len, 1, cap - *len, stdin)) > 0)
        if ((*len += got) == cap) {
            if (cap >= PROMPT_MAX) {   /* the same limit as a prompt file's, before more memory is taken */
                free(s);
                err_set(err, "standard input: the prompt is more than the %u MiB a prompt may have", PROMPT_MAX >> 20);
                return NULL;
            }
            char *t = realloc(s, (cap *= 2) + 1);
            if (!t) { free(s); err_set(err, "standard input: the prompt does not fit in memory"); return NULL; }
            s = t;
        }
    if (ferror(stdin)) { free(s); err_set(err, "standard input: cannot read the prompt"); return NULL; }
    s[*len] = 0;
    return s;
}

typedef struct {
    const Tokenizer *tok;
    int rows, eot, ignore_eot, stream;   /* stream: one row, printed as it comes */
    unsigned char *ended;
    Utf8Stream us;
} Out;

static void put_text(Out *o, int id) {
    size_t len;
    const uint8_t *bytes = tokenizer_decode(o->tok, id, &len);
    if (bytes) utf8_stream_put(&o->us, bytes, len, stdout);
}

static int on_step(void *ctx, int step, const int32_t *tok) {
    Out *o = ctx;
    (void)step;
    if (ferror(stdout)) return 1;   /* the text cannot be written (a full disk): stop; main says so and fails */
    if (!o->stream) return 0;
    if (o->ended[0] || (!o->ignore_eot && tok[0] == o->eot)) { o->ended[0] = 1; return 0; }
    put_text(o, tok[0]);
    fflush(stdout);
    return 0;
}

/* The tokenizer (--tokenizer, else the one beside the checkpoint): its ids must be the model's */
static int open_tokenizer(const SampleArgs *a, const GPT2Shape *shape, Tokenizer *tok, Err *err) {
    char tbuf[CONFIG_PATH_MAX];
    const char *tpath = cli_pick_tokenizer(a->tokenizer, a->checkpoint, tbuf, sizeof tbuf);
    const char *why = file_missing_why(tpath);
    if (*why)
        return err_set(err, "no tokenizer at %s (%s): give --tokenizer FILE (llm.c's tokenizer file, or a tiktoken ranks "
                       "file such as data/gpt2.tiktoken)", err_show(tpath), why);
    if (tokenizer_load_any(tok, tpath, err)) return -1;
    if (tok->vocab_size != shape->vocab_size) {   /* fewer: the ids past its end would print nothing */
        err_set(err, "%s: %d tokens, %s the model's vocab_size %d (%s): not this model's tokenizer", err_show(tpath),
                tok->vocab_size, tok->vocab_size > shape->vocab_size ? "more than" : "fewer than", shape->vocab_size,
                err_show(a->checkpoint));
        tokenizer_free(tok);
        return -1;
    }
    return 0;
}

/* The new tokens to draw after a prompt of n tokens: --tokens, else as many as fit, at most 256; -1 + err where
   they do not fit in the model's context of maxT positions */
static long tokens_wanted(const SampleArgs *a, int n, int maxT, Err *err) {
    int room = maxT - n;
    long want = a->tokens > 0 ? a->tokens : room < 256 ? room : 256;
    if (room < 1)
        return err_set(err, "the prompt is %d tokens: it fills the model's context of %d positions (maxT of %s) and "
                       "leaves no room for a new token", n, maxT, err_show(a->checkpoint));
    if (n + want > maxT)
        return err_set(err, "the prompt is %d tokens and --tokens asks for %ld more: %ld positions, more than the "
                       "model's context of %d (maxT of %s); at most %d new tokens fit", n, want, n + want, maxT,
                       err_show(a->checkpoint), room);
    return want;
}

/* Several rows printed, each once all are done (one row was printed as it came), and the speed on stderr (with
   --stats, a JSON line too). drawn: steps tokens of each row, row-interleaved; n: the prompt's tokens. */
static void report(const SampleArgs *a, const Sampler *s, Out *o, const int32_t *drawn, int steps, int n,
                   const char *text, size_t len, const SampleStats *st, const char *prec) {
    int R = o->rows;
    if (R == 1) utf8_stream_flush(&o->us, stdout);
    for (int b = 0; R > 1 && b < R; b++) {   /* several rows: each when all are done */
        if (b) printf("\n---\n");
        if (a->echo && b) fwrite(text, 1, len, stdout);
        for (int i = 0; i < steps && (a->ignore_eot || drawn[(size_t)i * R + b] != o->eot); i++)
            put_text(o, drawn[(size_t)i * R + b]);
        utf8_stream_flush(&o->us, stdout);
    }
    printf("\n");
    fflush(stdout);
    double tps = st->decode_ms > 0 ? R * st->tokens / (st->decode_ms / 1e3) : 0;
    fprintf(stderr, "gpt2gen sample: %d row%s, prompt of %d token%s (prefill %.1f ms), %d tokens each in %.1f ms: %.0f "
            "tokens/s, %s backend, %s%s\n", R, R == 1 ? "" : "s", n, n == 1 ? "" : "s", st->prefill_ms, st->tokens,
            st->decode_ms, tps,
            s->decode->name, !strcmp(s->decode->name, "cpu") ? "fp32" : prec, a->no_cache ? ", no cache" : "");
    if (a->stats) {   /* one JSON object, through Jansson */
        json_t *js = json_pack("{s:i,s:i,s:i,s:o,s:i,s:o,s:o,s:s,s:b}", "rows", R, "prompt_tokens", n, "prefill_tokens",
                               st->prefill_tokens, "prefill_ms", metrics_real("%.3f", st->prefill_ms), "tokens", st->tokens,
                               "decode_ms", metrics_real("%.3f", st->decode_ms), "tok_per_s", metrics_real("%.1f", tps),
                               "backend", s->decode->name, "cache", !a->no_cache);
        char *line = js ? metrics_dump(js) : NULL;
        fprintf(stderr, "sample-stats %s\n", line ? line : "{}");
        free(line);
        json_decref(js);
    }
}

/* --batch rows of want tokens drawn after the prompt's ids, and reported: 0, else EXIT_FAIL (err set) */
static int generate(const SampleArgs *a, Sampler *s, const Tokenizer *tok, const TokenVec *ids, long want,
                    const char *text, size_t len, const char *prec, Err *err) {
    int R = (int)a->batch, n = (int)ids->n;
    uint64_t *rng = xmalloc((size_t)R * sizeof *rng);
    for (int b = 0; b < R; b++) rng[b] = sample_row_seed(a->seed, b);
    int32_t *drawn = xmalloc((size_t)want * R * sizeof *drawn);
    Out o = {tok, R, tok->eot, a->ignore_eot, R == 1, xcalloc((size_t)R, 1), {{0}, 0}};
    SampleSettings ss = {(float)a->temperature, (int)a->top_k, (float)a->top_p};
    SampleStats st;
    int eot = a->ignore_eot ? -1 : tok->eot;
    int steps = a->no_cache ? sampler_generate_uncached(s, ids->data, n, (int)want, &ss, rng, eot, drawn, on_step, &o, &st, err)
                            : sampler_generate(s, ids->data, n, (int)want, &ss, rng, eot, drawn, on_step, &o, &st, err);
    if (steps >= 0) report(a, s, &o, drawn, steps, n, text, len, &st, prec);
    free(rng); free(drawn); free(o.ended);
    return steps >= 0 ? 0 : EXIT_FAIL;
}

static int run(const SampleArgs *a, Err *err) {
    GPT2Shape shape;
    int is_bf16;
    if (checkpoint_read_header(a->checkpoint, &shape, &is_bf16, err)) return EXIT_FAIL;
    Tokenizer tok;
    if (open_tokenizer(a, &shape, &tok, err)) return EXIT_FAIL;
    int rc = EXIT_FAIL;
    Config *cfg = xcalloc(1, sizeof *cfg);
    char *text = NULL;
    TokenVec ids = {0};
    Sampler *s = xcalloc(1, sizeof *s);
    PlanSet ps = {0};
    /* the database's choices for the decode and prefill shapes, where `gpt2gen tune` measured them (said on stderr:
       standard output is the text) */
    CudaFacts facts;   /* what GPU 0 serves (cuDNN's attention), for the backend a->backend names */
    CliTuning tuning = {a->env, !strcmp(a->backend, "cpu"), NULL, stderr, 1, NULL, NULL,
                        backend_plan_facts(&facts, a->backend, a->env, 0)};
    size_t len;
    if (!(text = read_prompt(a, &len, err)) || tokenizer_encode(&tok, text, len, &ids, err)) goto done;
    if (ids.n == 0) tokvec_push(&ids, tok.eot);   /* no prompt: the model starts after end-of-text */
    long want = tokens_wanted(a, (int)ids.n, shape.max_seq_len, err);
    if (want < 0) goto done;
    const char *prec = a->precision ? a->precision : is_bf16 ? "bf16" : "fp32";
    if (cli_checkpoint_config(cfg, &shape, prec, a->checkpoint, err)) goto done;
    cfg->run.decode = a->decode;
    char arch[16];
    cli_pick_arch(a->backend, a->arch, arch);
    /* with the prefill and uncached forward of every bucket up to the prompt's and new tokens': the key/value cache
       holds that bucket of positions, not the model's whole context */
    PlanRequest req = {0, (int)a->batch, 0, 1, (int)(ids.n + want)};
    if (cli_plans(cfg, &req, arch, &tuning, &ps, err)) goto done;
    /* the decode plan (its cache) lives with the prompt's prefill plan, or with --no-cache the forward of the longest
       sequence: both checked against the memory they will run in before either is made */
    const Plan *live[2] = {ps.decode, a->no_cache ? ps.forward[planset_bucket(&ps, (int)(ids.n + want))]
                                                  : ps.prefill[planset_bucket(&ps, (int)ids.n)]};
    if (cli_check_memory(live, 2, "--batch", a->batch, a->backend, err) ||
        sampler_open(s, &ps, NULL, a->backend, 0, a->env, err)) goto done;
    Backend *w = sampler_backend(s);
    if (cli_load_weights(w, a->checkpoint, err)) goto done;
    if (a->echo) {
        fwrite(text, 1, len, stdout);
        fflush(stdout);
    }
    rc = generate(a, s, &tok, &ids, want, text, len, prec, err);
done:
    sampler_close(s);
    planset_free(&ps);
    free(s); free(cfg); free(text);
    tokvec_free(&ids);
    tokenizer_free(&tok);
    return rc;
}

int cmd_sample(int argc, char **argv, const Env *env) {
    SampleArgs a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    a.env = env;
    if (a.help) { fputs(SAMPLE_USAGE, stdout); return 0; }
    Err err = {{0}};
    rc = run(&a, &err);
    if (rc) fprintf(stderr, "gpt2gen sample: %s\n", err.msg);
    return rc;
}
