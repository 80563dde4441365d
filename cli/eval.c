/* gpt2gen eval: multiple-choice accuracy of a model checkpoint on an evaluation set in llm.c's format (HellaSwag
   style; runtime/eval/evalset.h, runtime/eval/evaluate.h). The result goes to standard output, progress and
   messages to standard error. */
#include "cli/commands.h"
#include "common/clock.h"
#include "runtime/checkpoint.h"
#include "runtime/gpu.h"
#include "runtime/eval/evaluate.h"
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *EVAL_USAGE =
    "usage: gpt2gen eval --checkpoint FILE --data EVAL.bin [options]\n"
    "\n"
    "Multiple-choice evaluation of a model checkpoint (gpt2gen's or llm.c's, fp32 or bf16, of any shape) on an\n"
    "evaluation set in llm.c's format, such as HellaSwag's (llm.c's dev/data/hellaswag.py writes\n"
    "hellaswag_val.bin). Each completion is scored by the model's mean loss over the completion's own tokens after\n"
    "the context; the completion of the lowest loss is the example's choice. Prints the accuracy and the number of\n"
    "examples; progress goes to standard error.\n"
    "\n"
    "options:\n"
    "  --checkpoint FILE   the model (required)\n"
    "  --data FILE         the evaluation set (required)\n"
    "  --json              print one JSON object instead: examples, correct, accuracy, and choices (for each\n"
    "                      example, in file order, the index of the chosen completion)\n"
    "  --rows N            completions scored per forward (default 32)\n"
    "  --backend B         auto (default: CUDA where there is a GPU, else the CPU backend), cpu or cuda\n"
    "  --precision P       fp32, bf16 or fp16 on the GPU (default: the checkpoint's); the CPU backend is fp32\n"
    "  --arch sm_XX        the GPU arch to compile for (default: the GPU's)\n"
    "\n"
    "example:\n"
    "  gpt2gen eval --checkpoint runs/gpt2-124M/model_00019560.bin --data data/hellaswag/hellaswag_val.bin\n";

typedef struct {
    const char *checkpoint, *data, *backend, *precision, *arch;
    long rows;
    int json, help;
    const Env *env;   /* main's */
} EvalArgs;

static int usage_error(const char *fmt, const char *a) {
    fprintf(stderr, "gpt2gen eval: ");
    fprintf(stderr, fmt, a);
    fprintf(stderr, " (see gpt2gen eval --help)\n");
    return EXIT_USAGE;
}

static int parse(int argc, char **argv, EvalArgs *a) {
    memset(a, 0, sizeof *a);
    a->backend = "auto";
    a->rows = 32;
    static const char *const with_value[] = {"--checkpoint", "--data", "--rows", "--backend", "--precision", "--arch", NULL};
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v = NULL;
        for (int k = 0; with_value[k]; k++)
            if (!strcmp(s, with_value[k])) {
                if (i + 1 == argc) return usage_error("option '%s' needs a value", s);
                v = argv[++i];
            }
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) a->help = 1;
        else if (!strcmp(s, "--json")) a->json = 1;
        else if (!v) return usage_error(s[0] == '-' ? "unknown option '%s'" : "unexpected argument '%s'", err_show(s));
        else if (!strcmp(s, "--checkpoint")) a->checkpoint = v;
        else if (!strcmp(s, "--data")) a->data = v;
        else if (!strcmp(s, "--precision")) {
            if (strcmp(v, "fp32") && strcmp(v, "bf16") && strcmp(v, "fp16"))
                return usage_error("--precision: expected fp32, bf16 or fp16, got '%s'", err_show(v));
            a->precision = v;
        } else if (!strcmp(s, "--arch")) {
            if (!config_arch_valid(v)) return usage_error("--arch: expected sm_XX with XX >= 70, got '%s'", err_show(v));
            a->arch = v;
        } else if (!strcmp(s, "--backend")) {
            if (strcmp(v, "auto") && strcmp(v, "cpu") && strcmp(v, "cuda"))
                return usage_error("--backend: expected auto, cpu or cuda, got '%s'", err_show(v));
            a->backend = v;
        } else if (!strcmp(s, "--rows")) {
            char *end;
            errno = 0;
            a->rows = strtol(v, &end, 10);
            if (errno || end == v || *end || a->rows < 1 || a->rows > 4096)
                return usage_error("--rows: expected an integer from 1 to 4096, got '%s'", err_show(v));
        }
    }
    if (a->help) return 0;
    if (!a->checkpoint) return usage_error("missing --checkpoint FILE%s", "");
    if (!a->data) return usage_error("missing --data FILE (an evaluation set in llm.c's format)%s", "");
    return 0;
}

/* A progress line on standard error: rewritten in place on a terminal, else a line every 10 s. */
typedef struct {
    double t0, last;
    int tty, shown;
} Progress;

static int on_progress(void *ctx, int done, int rows) {
    Progress *p = ctx;
    double t = now_seconds();
    if (done < rows && t - p->last < (p->tty ? 0.25 : 10)) return 0;
    p->last = t;
    char el[32], eta[32];
    format_duration(t - p->t0, el, sizeof el);
    format_duration(done ? (t - p->t0) * (rows - done) / done : 0, eta, sizeof eta);
    fprintf(stderr, "%seval: %d/%d completions (%.0f%%), %.0f rows/s, %s, ETA %s%s", p->tty ? "\r" : "", done, rows,
            100.0 * done / rows, done / (t - p->t0 > 0 ? t - p->t0 : 1), el, eta, p->tty ? "\033[K" : "\n");
    p->shown = 1;
    return 0;
}

static void print_json(const EvalResult *r) {
    json_t *o = json_object(), *ch = json_array();
    for (int k = 0; k < r->examples; k++) json_array_append_new(ch, json_integer(r->choices[k]));
    json_object_set_new(o, "examples", json_integer(r->examples));
    json_object_set_new(o, "correct", json_integer(r->correct));
    json_object_set_new(o, "accuracy", json_real(r->accuracy));
    json_object_set_new(o, "choices", ch);
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
    printf("%s\n", s);
    free(s);
    json_decref(o);
}

static int run(const EvalArgs *a, Err *err) {
    GPT2Shape shape;
    int is_bf16;
    if (checkpoint_read_header(a->checkpoint, &shape, &is_bf16, err)) return EXIT_FAIL;
    EvalSet set;
    if (evalset_load(&set, a->data, err)) return EXIT_FAIL;
    char model[300];   /* the set against the checkpoint first, so that a message names both files */
    snprintf(model, sizeof model, "the model of %s", err_show(a->checkpoint));
    if (evalset_check_model(&set, shape.vocab_size, shape.max_seq_len, model, err)) { evalset_free(&set); return EXIT_FAIL; }
    Config *cfg = xcalloc(1, sizeof *cfg);
    Evaluator e = {0};
    PlanSet ps = {0};
    EvalResult r = {0};
    int rc = EXIT_FAIL;
    const char *prec = a->precision ? a->precision : is_bf16 ? "bf16" : "fp32";
    if (cli_checkpoint_config(cfg, &shape, prec, a->checkpoint, err)) goto done;
    char arch[16];
    cli_pick_arch(a->backend, a->arch, arch);
    PlanRequest req = {0, 0, (int)(a->rows < set.rows ? a->rows : set.rows), 0, 0};
    CudaFacts facts;   /* what GPU 0 serves (cuDNN's attention), for the backend a->backend names */
    CliTuning tuning = {a->env, !strcmp(a->backend, "cpu"), NULL, stderr, 1, NULL, NULL,
                        backend_plan_facts(&facts, a->backend, a->env, 0)};
    if (cli_plans(cfg, &req, arch, &tuning, &ps, err)) goto done;
    const Plan *live = ps.eval[planset_bucket(&ps, set.longest_row)];   /* the one plan the evaluator runs */
    if (cli_check_memory(&live, 1, "--rows", req.eval_rows, a->backend, err) ||
        evaluator_open(&e, &ps, &set, NULL, a->backend, 0, a->env, err))
        goto done;
    Backend *be = evaluator_backend(&e);
    if (cli_load_weights(be, a->checkpoint, err)) goto done;
    Progress p = {now_seconds(), now_seconds(), isatty(2), 0};
    if (evaluator_run(&e, &set, &r, on_progress, &p, err)) goto done;
    if (p.shown && p.tty) fputc('\n', stderr);
    char el[32];
    format_duration(now_seconds() - p.t0, el, sizeof el);
    fprintf(stderr, "gpt2gen eval: %d examples, %d completions of at most %d tokens in %s (%s backend, %s)\n", set.n,
            set.rows, set.longest_row, el, be->name, !strcmp(be->name, "cpu") ? "fp32" : prec);
    if (a->json) print_json(&r);
    else printf("accuracy %.4f: %d of %d examples correct\n", r.accuracy, r.correct, r.examples);
    rc = fflush(stdout) ? EXIT_FAIL : 0;
    if (rc) err_set(err, "cannot write the result to standard output");
done:
    evalresult_free(&r);
    evaluator_close(&e);
    planset_free(&ps);
    evalset_free(&set);
    free(cfg);
    return rc;
}

int cmd_eval(int argc, char **argv, const Env *env) {
    EvalArgs a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    a.env = env;
    if (a.help) { fputs(EVAL_USAGE, stdout); return 0; }
    Err err = {{0}};
    rc = run(&a, &err);
    if (rc) fprintf(stderr, "gpt2gen eval: %s\n", err.msg);
    return rc;
}
