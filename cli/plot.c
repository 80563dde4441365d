/* gpt2gen plot: the SVG of one or more runs, overlaid, from their metrics.jsonl (runtime/train/plot.h draws it;
   training keeps its own <checkpoint.dir>/plot.svg up to date the same way). */
#include "cli/commands.h"
#include "common/files.h"
#include "runtime/train/plot.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *PLOT_USAGE =
    "usage: gpt2gen plot RUN... [-o FILE.svg] [--force]\n"
    "\n"
    "Draws the runs' train loss, validation loss, eval accuracy (where a run has some), learning rate and tokens/s\n"
    "against the step, into one SVG file that any browser shows; several runs are overlaid, a colour each, with a\n"
    "legend of their names. A RUN is a run folder (checkpoint.dir, e.g. runs/tiny) or a metrics.jsonl file; a run is\n"
    "named after its folder. A run still training can be plotted: its last line, if it is being written, is left\n"
    "out. Training writes the same plot of its own run to <checkpoint.dir>/plot.svg after each validation.\n"
    "\n"
    "options:\n"
    "  -o FILE             where the SVG goes (default: plot.svg in the current folder; '-': standard output);\n"
    "                      written under a temporary name, then renamed. An existing FILE is replaced only when it\n"
    "                      is a plot gpt2gen drew; anything else that is not a regular file is never replaced\n"
    "  --force             replace FILE also when it is a regular file gpt2gen did not write\n"
    "\n"
    "examples:\n"
    "  gpt2gen plot runs/tiny -o tiny.svg\n"
    "  gpt2gen plot runs/lr-3e-4 runs/lr-6e-4 runs/lr-1e-3 -o lr-sweep.svg\n";

static int usage_error(const char *fmt, const char *a) {
    fprintf(stderr, "gpt2gen plot: ");
    fprintf(stderr, fmt, a);
    fprintf(stderr, " (see gpt2gen plot --help)\n");
    return EXIT_USAGE;
}

/* The metrics.jsonl of the RUN argument arg into *run; *is_file says whether arg was the file itself. */
static int read_run(const char *arg, PlotRun *run, Err *err) {
    struct stat st;
    memset(run, 0, sizeof *run);
    if (stat(arg, &st) != 0) return err_set(err, "%s: %s", err_show(arg), file_missing_why(arg));
    int is_file = !S_ISDIR(st.st_mode);
    char *path = xmalloc(strlen(arg) + 16);
    if (is_file) strcpy(path, arg);
    else sprintf(path, "%s/metrics.jsonl", arg);
    int rc = 0;
    if (!is_file && !file_exists(path))
        rc = err_set(err, "%s: no metrics.jsonl in this folder: expected a run folder (checkpoint.dir) or a metrics.jsonl",
                     err_show(arg));
    char *name = plot_name_of(arg, is_file);
    if (!rc) rc = plot_read(run, path, name, err);
    if (!rc && run->torn)
        fprintf(stderr, "gpt2gen plot: note: %s: its last line is cut short (a run writing it, or one that stopped "
                        "while writing it): left out\n", err_show(path));
    if (!rc && run->step_records == 0)
        rc = err_set(err, "%s: no step records (\"event\":\"step\"): nothing to plot (not a gpt2gen metrics log, or a "
                          "run that has not trained a step yet)", err_show(path));
    free(name);
    free(path);
    return rc;
}

/* Whether out is the log of the RUN argument arg (which the plot must not replace) */
static int is_log_of(const char *out, const char *arg) {
    struct stat so, sa;
    if (stat(out, &so) != 0 || stat(arg, &sa) != 0) return 0;
    if (S_ISDIR(sa.st_mode)) {
        char *path = xmalloc(strlen(arg) + 16);
        sprintf(path, "%s/metrics.jsonl", arg);
        int there = stat(path, &sa) == 0;
        free(path);
        if (!there) return 0;
    }
    return so.st_dev == sa.st_dev && so.st_ino == sa.st_ino;
}

/* Runs of the same name are told apart by the arguments that named them. */
static void distinct_names(PlotRun *runs, char **args, int n) {
    int *dup = calloc((size_t)n, sizeof *dup);
    if (!dup) return;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (i != j && !strcmp(runs[i].name, runs[j].name)) dup[i] = 1;
    for (int i = 0; i < n; i++)
        if (dup[i]) { free(runs[i].name); runs[i].name = xstrdup(args[i]); }
    free(dup);
}

int cmd_plot(int argc, char **argv) {
    const char *out = "plot.svg";
    char **args = xcalloc((size_t)argc, sizeof *args);
    int n = 0, force = 0;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) { fputs(PLOT_USAGE, stdout); free(args); return 0; }
        if (!strcmp(s, "--force")) { force = 1; continue; }
        if (!strcmp(s, "-o") || !strcmp(s, "--output")) {
            if (i + 1 == argc) { free(args); return usage_error("option '%s' needs a value", s); }
            out = argv[++i];
            if (!*out) { free(args); return usage_error("%s: expected a file name, got ''", s); }
        } else if (s[0] == '-' && s[1]) { free(args); return usage_error("unknown option '%s'", err_show(s)); }
        else args[n++] = argv[i];
    }
    if (n == 0) { free(args); return usage_error("expected one or more run folders or metrics.jsonl files%s", ""); }
    PlotRun *runs = xcalloc((size_t)n, sizeof *runs);
    Err err;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        if (strcmp(out, "-") && is_log_of(out, args[i]))
            rc = err_set(&err, "-o %s: that is the metrics log of %s: give another file for the SVG", err_show(out),
                         err_show(args[i]));
    for (int i = 0; i < n && !rc; i++) rc = read_run(args[i], &runs[i], &err);
    if (!rc) {
        distinct_names(runs, args, n);
        if (!strcmp(out, "-")) {
            size_t len;
            char *svg = plot_svg(runs, n, &len);
            if (fwrite(svg, 1, len, stdout) != len || fflush(stdout) != 0)
                rc = err_set(&err, "standard output: %s", strerror(errno));
            free(svg);
        } else {
            rc = plot_write(out, runs, n, force, &err);
            if (!rc) printf("wrote %s (%d run%s)\n", err_show(out), n, n == 1 ? "" : "s");
        }
    }
    if (rc) fprintf(stderr, "gpt2gen plot: %s\n", err.msg);
    for (int i = 0; i < n; i++) plot_run_free(&runs[i]);
    free(runs);
    free(args);
    return rc ? EXIT_FAIL : 0;
}
