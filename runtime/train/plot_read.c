/* plot: metrics.jsonl read into series (plot_read), and the name a run is shown by (see plot.h). */
#include "runtime/train/plot.h"
#include "common/files.h"
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void series_push(PlotSeries *s, double x, double y) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        double *nx = realloc(s->x, s->cap * sizeof *nx);
        if (nx) s->x = nx;
        double *ny = nx ? realloc(s->y, s->cap * sizeof *ny) : NULL;
        if (!nx || !ny) { fprintf(stderr, "gpt2gen: out of host memory (plot)\n"); abort(); }
        s->y = ny;
    }
    s->x[s->n] = x;
    s->y[s->n] = y;
    s->n++;
}

/* The points of s from step x on are dropped: a later record of a step is the one that counts. */
static void series_cut(PlotSeries *s, double x) {
    while (s->n > 0 && s->x[s->n - 1] >= x) s->n--;
}

/* Reads one line (without its end of line) into *buf; *ended says whether it had one. 0 at the end of the file,
   1 for a line, -1 for a read error or a line over PLOT_MAX_LINE (errno EFBIG). */
static int read_line(FILE *f, char **buf, size_t *cap, size_t *len, int *ended) {
    size_t n = 0;
    int c = EOF;
    while ((c = getc_unlocked(f)) != EOF && c != '\n') {
        if (n + 1 >= *cap) {
            if (*cap >= PLOT_MAX_LINE) { errno = EFBIG; return -1; }
            *cap = *cap ? 2 * *cap : 4096;
            char *nb = realloc(*buf, *cap);
            if (!nb) { fprintf(stderr, "gpt2gen: out of host memory (plot)\n"); abort(); }
            *buf = nb;
        }
        (*buf)[n++] = (char)c;
    }
    if (c == EOF && ferror(f)) return -1;
    if (c == EOF && n == 0) return 0;
    *len = n;
    *ended = c == '\n';
    return 1;
}

/* The value of key in rec as a point: 1 and *v for a number, 0 for null or none, -1 (err set) for anything else. */
static int value_of(const json_t *rec, const char *key, double *v, const char *path, size_t line, Err *err) {
    const json_t *j = json_object_get(rec, key);
    if (!j || json_is_null(j)) return 0;
    if (!json_is_number(j))
        return err_set(err, "%s:%zu: \"%s\" is not a number (nor null): not a gpt2gen metrics log?", err_show(path), line,
                       key);
    *v = json_number_value(j);
    return isfinite(*v) ? 1 : 0;
}

/* One record into run; -1 (err set) where a known record is malformed. */
static int take_record(PlotRun *run, const json_t *rec, const char *path, size_t line, Err *err) {
    const char *ev = json_string_value(json_object_get(rec, "event"));
    if (!ev) return 0;
    int is_step = !strcmp(ev, "step"), is_val = !strcmp(ev, "val"), is_eval = !strcmp(ev, "eval");
    if (!strcmp(ev, "start")) {
        const json_t *st = json_object_get(rec, "steps");
        if (json_is_integer(st) && json_integer_value(st) > 0) run->steps = json_integer_value(st);
        return 0;
    }
    if (!is_step && !is_val && !is_eval) return 0;
    const json_t *sj = json_object_get(rec, "step");
    if (!json_is_integer(sj) || json_integer_value(sj) < 0)
        return err_set(err, "%s:%zu: a \"%s\" record whose \"step\" is not a whole number: not a gpt2gen metrics log?",
                       err_show(path), line, ev);
    double x = (double)json_integer_value(sj), v = 0;
    static const struct { const char *event, *key; int series; } KEYS[] = {
        {"step", "loss", PLOT_TRAIN_LOSS}, {"step", "lr", PLOT_LR}, {"step", "tok_s", PLOT_TOK_S},
        {"val", "val_loss", PLOT_VAL_LOSS}, {"eval", "accuracy", PLOT_ACCURACY},
    };
    for (size_t k = 0; k < sizeof KEYS / sizeof KEYS[0]; k++) {
        if (strcmp(KEYS[k].event, ev)) continue;
        PlotSeries *s = &run->s[KEYS[k].series];
        series_cut(s, x);
        int got = value_of(rec, KEYS[k].key, &v, path, line, err);
        if (got < 0) return -1;
        if (got) series_push(s, x, v);
    }
    if (is_step) run->step_records++;
    return 0;
}

int plot_read(PlotRun *run, const char *path, const char *name, Err *err) {
    memset(run, 0, sizeof *run);
    run->name = xstrdup(name);
    FILE *f = fopen_regular(path, "a metrics log (metrics.jsonl)", err);
    if (!f) { plot_run_free(run); return -1; }
    char *buf = NULL;
    size_t cap = 0, len = 0, line = 0;
    int ended = 0, rc = 0, got;
    while ((got = read_line(f, &buf, &cap, &len, &ended)) > 0) {
        line++;
        size_t i = 0;
        while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r')) i++;
        if (i == len) continue;   /* a blank line */
        json_error_t je;
        json_t *rec = json_loadb(buf, len, JSON_ALLOW_NUL, &je);
        if (!rec && !ended) { run->torn = 1; break; }   /* the last line, cut short */
        if (!rec || !json_is_object(rec)) {
            for (char *c = je.text; *c; c++) if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7F) *c = '?';
            rc = err_set(err, "%s:%zu: not a JSON object (%s): not a gpt2gen metrics log?", err_show(path), line,
                         rec ? "another JSON value" : je.text);
            json_decref(rec);
            break;
        }
        rc = take_record(run, rec, path, line, err);
        json_decref(rec);
        if (rc) break;
    }
    if (!rc && got < 0)
        rc = errno == EFBIG ? err_set(err, "%s:%zu: a line over %u MiB: not a gpt2gen metrics log?", err_show(path),
                                      line + 1, PLOT_MAX_LINE >> 20)
                            : err_set(err, "%s: read failed: %s", err_show(path), strerror(errno));
    free(buf);
    fclose(f);
    if (rc) plot_run_free(run);   /* on an error the caller has nothing to free */
    return rc;
}

void plot_run_free(PlotRun *run) {
    for (int k = 0; k < PLOT_SERIES; k++) { free(run->s[k].x); free(run->s[k].y); }
    free(run->name);
    memset(run, 0, sizeof *run);
}

char *plot_name_of(const char *path, int is_file) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    char *p = xmalloc(n + 3);
    memcpy(p, path, n);
    p[n] = 0;
    if (is_file) {
        char *slash = strrchr(p, '/');
        const char *base = slash ? slash + 1 : p;
        if (!strcmp(base, "metrics.jsonl")) {   /* the folder's name */
            if (!slash) { strcpy(p, "."); }
            else {
                *slash = 0;
                while (slash > p && slash[-1] == '/') *--slash = 0;
                if (!*p) strcpy(p, "/");
            }
        } else {
            size_t bn = strlen(base);
            if (bn > 6 && !strcmp(base + bn - 6, ".jsonl")) p[strlen(p) - 6] = 0;
            memmove(p, base, strlen(base) + 1);
            return p;
        }
    }
    if (!strcmp(p, ".") || !strcmp(p, "..")) {   /* the working folder's own name */
        char *real = realpath(p, NULL);
        if (real) {
            const char *b = strrchr(real, '/');
            char *out = xstrdup(b && b[1] ? b + 1 : real);
            free(real);
            free(p);
            return out;
        }
    }
    const char *b = strrchr(p, '/');
    if (b && b[1]) memmove(p, b + 1, strlen(b + 1) + 1);
    return p;
}
