/* plot: the SVG drawn from runs' series (see plot.h); plot_read.c reads them. */
#include "runtime/train/plot.h"
#include "common/files.h"
#include "runtime/train/metrics.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The SVG's description, which marks a plot as gpt2gen's (plot_is_ours) */
#define PLOT_DESC "<desc>Drawn by gpt2gen from metrics.jsonl."

static const char *const SERIES_NAME[PLOT_SERIES] = {"train_loss", "val_loss", "accuracy", "lr", "tok_s"};

/* ---------------------------------------------------------------- the SVG text */

typedef struct { char *p; size_t n, cap; } Buf;

static void put(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(Buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if (b->n + (size_t)k + 1 > b->cap) {
        while (b->n + (size_t)k + 1 > b->cap) b->cap = b->cap ? 2 * b->cap : 65536;
        char *np = realloc(b->p, b->cap);
        if (!np) { fprintf(stderr, "gpt2gen: out of host memory (plot)\n"); abort(); }
        b->p = np;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

/* s as XML character data or an attribute value: valid UTF-8 (invalid bytes as U+FFFD), markup characters as
   entities, characters XML does not allow (control bytes, U+FFFE, U+FFFF) as U+FFFD. At most max characters
   (0: all), the rest as an ellipsis. */
static void put_xml(Buf *b, const char *s, size_t max) {
    char *c = utf8_clean(s, strlen(s), NULL);
    size_t chars = 0;
    for (const unsigned char *p = (const unsigned char *)c; *p;) {
        if (max && chars == max) { put(b, "\xe2\x80\xa6"); break; }
        size_t k = *p < 0x80 ? 1 : *p < 0xE0 ? 2 : *p < 0xF0 ? 3 : 4;
        chars++;
        if (*p == '&') put(b, "&amp;");
        else if (*p == '<') put(b, "&lt;");
        else if (*p == '>') put(b, "&gt;");
        else if (*p == '"') put(b, "&quot;");
        else if (*p == '\'') put(b, "&apos;");
        else if (*p < 0x20 || (k == 3 && p[0] == 0xEF && p[1] == 0xBF && p[2] >= 0xBE)) put(b, "\xef\xbf\xbd");
        else put(b, "%.*s", (int)k, (const char *)p);
        p += k;
    }
    free(c);
}

/* v printed so that it reads back as v: the shortest of %.15g, %.16g, %.17g that does */
static const char *exact(char buf[32], double v) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, 32, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    return buf;
}

/* ---------------------------------------------------------------- axes */

typedef struct { double lo, hi, step; } Axis;   /* the range drawn, which ends on ticks, and the tick spacing */

static double nice_step(double span, int ticks) {
    double raw = span / ticks, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

/* The axis over data lo..hi with about `ticks` ticks; zero: the range starts at 0 (or ends there). */
static Axis axis_of(double lo, double hi, int ticks, int zero) {
    lo = fmax(lo, -1e306); hi = fmin(hi, 1e306);   /* a span that stays finite (what is beyond is clipped) */
    if (zero) { if (lo > 0) lo = 0; if (hi < 0) hi = 0; }
    if (!(hi > lo)) {   /* one value: a range around it */
        double pad = lo != 0 ? fabs(lo) * 0.1 : 1;
        lo -= pad; hi += pad;
        if (zero && lo < 0 && hi > 0 && lo + pad >= 0) lo = 0;
    } else {   /* a little room, so that no line runs along the frame (but from 0 where it starts there) */
        double pad = (hi - lo) * 0.02;
        if (!(zero && lo == 0)) lo -= pad;
        if (!(zero && hi == 0)) hi += pad;
    }
    Axis a;
    a.step = nice_step(hi - lo, ticks);
    a.lo = floor(lo / a.step + 1e-9) * a.step;
    a.hi = ceil(hi / a.step - 1e-9) * a.step;
    if (!(a.hi > a.lo)) a.hi = a.lo + a.step;
    return a;
}

/* The x axis, of steps 0..xmax: whole steps between ticks */
static Axis axis_steps(double xmax, int ticks) {
    if (!(xmax > 0)) xmax = 1;
    Axis a = {0, 0, nice_step(xmax, ticks)};
    if (a.step < 1) a.step = 1;
    a.hi = ceil(xmax / a.step - 1e-9) * a.step;
    return a;
}

/* The fewest decimals (up to 9) that print q exactly, for a tick spacing of 1, 2 or 5 times a power of ten */
static int decimals_for(double q) {
    for (int d = 0; d < 9; d++) {
        double r = q * pow(10, d);
        if (fabs(r - nearbyint(r)) < 1e-6 * fmax(1, r)) return d;
    }
    return 9;
}

/* A tick's label: v on axis a, as short as its spacing allows: 0.25, 3.5, 12k, 2.5k, 1.5M, 6e-4, 2.5e-5 */
static void tick_label(char *buf, size_t n, double v, const Axis *a) {
    double step = a->step, amax = fmax(fabs(a->lo), fabs(a->hi));
    if (fabs(v) < step * 1e-6) { snprintf(buf, n, "0"); return; }
    if (amax >= 1e4) {
        double unit = amax >= 1e9 ? 1e9 : amax >= 1e6 ? 1e6 : 1e3;
        snprintf(buf, n, "%.*f%s", decimals_for(step / unit), v / unit, unit == 1e9 ? "G" : unit == 1e6 ? "M" : "k");
    } else if (amax < 1e-2) {   /* each tick in its own power of ten: 5e-5, 1e-4, 1.5e-4 */
        int e = (int)floor(log10(fabs(v)) + 1e-9);
        double m = nearbyint(v / pow(10, e) * 1e6) / 1e6;
        snprintf(buf, n, "%.*fe%d", decimals_for(fabs(m)), m, e);
    } else {
        snprintf(buf, n, "%.*f", decimals_for(step), v);
    }
}

/* ---------------------------------------------------------------- panels */

static const char *const RUN_COLOUR[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                         "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
#define N_COLOURS (sizeof RUN_COLOUR / sizeof RUN_COLOUR[0])
/* one run: a colour per series */
static const char *const SERIES_COLOUR[PLOT_SERIES] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#17becf"};

enum { W = 1200, TOP_H = 400, ROW_H = 300, PAD_L = 72, PAD_R = 24, PAD_T = 34, PAD_B = 46, MARK_MAX = 60 };

typedef struct {
    const char *id, *title;
    int series[2], n_series;
    int zero;              /* the y axis includes 0 */
} Panel;

static const Panel PANELS[] = {
    {"loss", "loss", {PLOT_TRAIN_LOSS, PLOT_VAL_LOSS}, 2, 0},
    {"accuracy", "eval accuracy", {PLOT_ACCURACY, 0}, 1, 0},
    {"lr", "learning rate", {PLOT_LR, 0}, 1, 1},
    {"tok_s", "tokens/s", {PLOT_TOK_S, 0}, 1, 1},
};

static const char *colour_of(int n_runs, int run, int series) {
    return n_runs == 1 ? SERIES_COLOUR[series] : RUN_COLOUR[run % N_COLOURS];
}

/* The indices of s that are drawn: all of them, or the lowest and highest of each bucket (see plot.h). */
static size_t decimate(const PlotSeries *s, size_t *keep) {
    if (s->n <= PLOT_MAX_POINTS) {
        for (size_t i = 0; i < s->n; i++) keep[i] = i;
        return s->n;
    }
    size_t buckets = PLOT_MAX_POINTS / 2, m = 0;
    for (size_t b = 0; b < buckets; b++) {
        size_t from = b * s->n / buckets, to = (b + 1) * s->n / buckets, lo = from, hi = from;
        for (size_t i = from; i < to; i++) {
            if (s->y[i] < s->y[lo]) lo = i;
            if (s->y[i] > s->y[hi]) hi = i;
        }
        size_t a = lo < hi ? lo : hi, z = lo < hi ? hi : lo;
        keep[m++] = a;
        if (z != a) keep[m++] = z;
    }
    return m;
}

typedef struct { double x0, y0, w, h; Axis ax, ay; } Frame;   /* the plotting area in pixels, and its axes */

static double px_of(const Frame *f, double x) { return f->x0 + (x - f->ax.lo) / (f->ax.hi - f->ax.lo) * f->w; }
static double py_of(const Frame *f, double y) { return f->y0 + f->h - (y - f->ay.lo) / (f->ay.hi - f->ay.lo) * f->h; }

static void draw_series(Buf *b, const Frame *f, const PlotRun *run, int r, int n_runs, int k, size_t *keep) {
    const PlotSeries *s = &run->s[k];
    if (s->n == 0) return;
    size_t m = decimate(s, keep);
    const char *col = colour_of(n_runs, r, k);
    char t[32];
    put(b, "<polyline class=\"series\" data-run=\"");
    put_xml(b, run->name, 0);
    put(b, "\" data-series=\"%s\" data-points=\"%zu\" data-source-points=\"%zu\"\n  data-x=\"", SERIES_NAME[k], m, s->n);
    for (size_t i = 0; i < m; i++) put(b, "%s%s", i ? " " : "", exact(t, s->x[keep[i]]));
    put(b, "\"\n  data-y=\"");
    for (size_t i = 0; i < m; i++) put(b, "%s%s", i ? " " : "", exact(t, s->y[keep[i]]));
    put(b, "\"\n  fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" stroke-linejoin=\"round\"%s\n  points=\"", col,
        k == PLOT_TRAIN_LOSS || k == PLOT_LR || k == PLOT_TOK_S ? "1.5" : "2",
        k == PLOT_VAL_LOSS && n_runs > 1 ? " stroke-dasharray=\"7 4\"" : "");
    for (size_t i = 0; i < m; i++)
        put(b, "%s%.1f,%.1f", i ? " " : "", px_of(f, s->x[keep[i]]), py_of(f, s->y[keep[i]]));
    put(b, "\"/>\n");
    int sparse = k == PLOT_VAL_LOSS || k == PLOT_ACCURACY;
    if (m == 1 || (sparse && m <= MARK_MAX)) {
        put(b, "<g class=\"markers\" fill=\"%s\">", col);
        for (size_t i = 0; i < m; i++)
            put(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%s\"/>", px_of(f, s->x[keep[i]]), py_of(f, s->y[keep[i]]),
                sparse ? "3.5" : "2.5");
        put(b, "</g>\n");
    }
}

/* A sample of a series' line (for the loss panel's key): at x, y, 24 pixels wide */
static void key_line(Buf *b, double x, double y, const char *col, int dashed, const char *label) {
    put(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>", x, y - 4, x + 24,
        y - 4, col, dashed ? " stroke-dasharray=\"7 4\"" : "");
    put(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#333\">%s</text>\n", x + 30, y, label);
}

/* One panel in the box at bx, by (bw x bh), with the runs' series in it over x axis ax. */
static void draw_panel(Buf *b, const Panel *p, int id, double bx, double by, double bw, double bh, const Axis *ax,
                       const PlotRun *runs, int n, size_t *keep) {
    double lo = INFINITY, hi = -INFINITY;
    for (int r = 0; r < n; r++)
        for (int j = 0; j < p->n_series; j++) {
            const PlotSeries *s = &runs[r].s[p->series[j]];
            for (size_t i = 0; i < s->n; i++) { lo = fmin(lo, s->y[i]); hi = fmax(hi, s->y[i]); }
        }
    int empty = !(lo <= hi);
    if (empty) { lo = 0; hi = 1; }
    Frame f = {bx + PAD_L, by + PAD_T, bw - PAD_L - PAD_R, bh - PAD_T - PAD_B, *ax,
               axis_of(lo, hi, bh > ROW_H ? 8 : 5, p->zero)};
    put(b, "<g class=\"panel\" data-panel=\"%s\">\n", p->id);
    put(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"15\" font-weight=\"bold\" fill=\"#222\">%s</text>\n", f.x0,
        by + 22, p->title);
    if (p->series[0] == PLOT_TRAIN_LOSS) {   /* the key of the loss panel's lines */
        double kx = f.x0 + f.w - 190;
        key_line(b, kx, by + 22, n == 1 ? SERIES_COLOUR[PLOT_TRAIN_LOSS] : "#555", 0, "train");
        key_line(b, kx + 90, by + 22, n == 1 ? SERIES_COLOUR[PLOT_VAL_LOSS] : "#555", n > 1, "validation");
    }
    put(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fcfcfc\" stroke=\"#999\"/>\n", f.x0, f.y0,
        f.w, f.h);
    char lab[48];
    /* y ticks and grid */
    for (long long i = llround(f.ay.lo / f.ay.step); i <= llround(f.ay.hi / f.ay.step); i++) {
        double v = (double)i * f.ay.step, y = py_of(&f, v);
        tick_label(lab, sizeof lab, v, &f.ay);
        put(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>", f.x0, y, f.x0 + f.w, y);
        put(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#444\" text-anchor=\"end\">%s</text>\n", f.x0 - 6,
            y + 4, lab);
    }
    /* x ticks and grid */
    for (long long i = llround(ax->lo / ax->step); i <= llround(ax->hi / ax->step); i++) {
        double v = (double)i * ax->step, x = px_of(&f, v);
        tick_label(lab, sizeof lab, v, ax);
        put(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>", x, f.y0, x, f.y0 + f.h);
        put(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#444\" text-anchor=\"middle\">%s</text>\n", x,
            f.y0 + f.h + 17, lab);
    }
    put(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#444\" text-anchor=\"middle\">step</text>\n",
        f.x0 + f.w / 2, f.y0 + f.h + 36);
    if (empty)
        put(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" fill=\"#999\" text-anchor=\"middle\">no data yet</text>\n",
            f.x0 + f.w / 2, f.y0 + f.h / 2);
    put(b, "<clipPath id=\"clip%d\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/></clipPath>\n", id,
        f.x0 - 4, f.y0 - 4, f.w + 8, f.h + 8);
    put(b, "<g clip-path=\"url(#clip%d)\">\n", id);
    for (int j = 0; j < p->n_series; j++)
        for (int r = 0; r < n; r++) draw_series(b, &f, &runs[r], r, n, p->series[j], keep);
    put(b, "</g>\n</g>\n");
}

/* ---------------------------------------------------------------- the picture */

static double last_y(const PlotSeries *s) { return s->n ? s->y[s->n - 1] : NAN; }
static double last_x(const PlotSeries *s) { return s->n ? s->x[s->n - 1] : 0; }

/* A run's progress in a few words: "step 300 of 1000, loss 3.2104, val 3.3022, accuracy 0.2850" */
static void summary(char *buf, size_t n, const PlotRun *r) {
    double step = fmax(last_x(&r->s[PLOT_TRAIN_LOSS]), last_x(&r->s[PLOT_VAL_LOSS]));
    int k = snprintf(buf, n, "step %.0f", step);
    if (r->steps > 0) k += snprintf(buf + k, n - (size_t)k, " of %lld", r->steps);
    const struct { int s; const char *what; } parts[] = {{PLOT_TRAIN_LOSS, "loss"}, {PLOT_VAL_LOSS, "val"},
                                                         {PLOT_ACCURACY, "accuracy"}};
    for (size_t i = 0; i < 3 && (size_t)k < n; i++)
        if (r->s[parts[i].s].n) k += snprintf(buf + k, n - (size_t)k, ", %s %.4f", parts[i].what, last_y(&r->s[parts[i].s]));
}

/* Estimated width in pixels of s at font size 12 (sans-serif averages about 0.58 em a character) */
static double text_w(const char *s, size_t max) {
    size_t chars = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) chars += (*p & 0xC0) != 0x80;
    return 7.0 * (double)(max && chars > max ? max + 1 : chars);
}

enum { NAME_MAX_CHARS = 48 };   /* of a run's name in the legend */

/* The width of run r's legend entry: a swatch, the name and its progress */
static double legend_w(const PlotRun *r, char *sum, size_t n) {
    summary(sum, n, r);
    return 22 + text_w(r->name, NAME_MAX_CHARS) + 7 + text_w(sum, 0) * 0.92 + 24;
}

/* The lines the legend of n runs takes: none for one run */
static int legend_lines(const PlotRun *runs, int n) {
    char sum[200];
    double lx = 20;
    int lines = n > 1 ? 1 : 0;
    for (int r = 0; n > 1 && r < n; r++) {
        double w = legend_w(&runs[r], sum, sizeof sum);
        if (lx + w > W - 20 && lx > 20) { lines++; lx = 20; }
        lx += w;
    }
    return lines;
}

/* The legend of several runs: lines of entries, each a swatch and the name with its progress */
static void draw_legend(Buf *b, const PlotRun *runs, int n) {
    char sum[200];
    double lx = 20, ly = 52;
    put(b, "<g class=\"legend\">\n");
    for (int r = 0; r < n; r++) {
        double w = legend_w(&runs[r], sum, sizeof sum);
        if (lx + w > W - 20 && lx > 20) { ly += 22; lx = 20; }
        put(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"12\" fill=\"%s\"/>", lx, ly, RUN_COLOUR[r % N_COLOURS]);
        put(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" fill=\"#222\" data-run=\"", lx + 22, ly + 11);
        put_xml(b, runs[r].name, 0);
        put(b, "\">");
        put_xml(b, runs[r].name, NAME_MAX_CHARS);
        put(b, "<tspan fill=\"#777\" font-size=\"12\"> %s</tspan></text>\n", sum);
        lx += w;
    }
    put(b, "</g>\n");
}

/* The SVG element's start, its title and description, the background and the heading (H pixels high) */
static void draw_heading(Buf *b, const PlotRun *runs, int n, double H) {
    put(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    put(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%.0f\" viewBox=\"0 0 %d %.0f\" "
        "font-family=\"sans-serif\">\n", W, H, W, H);
    put(b, "<title>gpt2gen: ");
    if (n == 1) put_xml(b, runs[0].name, 0); else put(b, "%d runs", n);
    put(b, "</title>\n<desc>Drawn by gpt2gen from metrics.jsonl. Each polyline of class \"series\" carries its run "
        "(data-run), its series (data-series), the points drawn (data-points; data-source-points before decimation) "
        "and their exact values (data-x: steps, data-y); runtime/train/plot.h documents the format.</desc>\n");
    put(b, "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n");
    put(b, "<text x=\"20\" y=\"30\" font-size=\"19\" font-weight=\"bold\" fill=\"#111\">");
    if (n == 1) put_xml(b, runs[0].name, 80); else put(b, "%d runs", n);
    put(b, "</text>\n");
    if (n == 1) {
        char sum[200];
        summary(sum, sizeof sum, &runs[0]);
        put(b, "<text x=\"20\" y=\"48\" font-size=\"13\" fill=\"#555\">%s</text>\n", sum);
    }
    if (n > 1) draw_legend(b, runs, n);
}

char *plot_svg(const PlotRun *runs, int n, size_t *len) {
    Buf b = {0};
    int has_acc = 0;
    double xmax = 0;
    size_t most = 0;
    for (int r = 0; r < n; r++) {
        has_acc |= runs[r].s[PLOT_ACCURACY].n > 0;
        xmax = fmax(xmax, (double)runs[r].steps);
        for (int k = 0; k < PLOT_SERIES; k++) {
            xmax = fmax(xmax, last_x(&runs[r].s[k]));
            if (runs[r].s[k].n > most) most = runs[r].s[k].n;
        }
    }
    size_t *keep = xmalloc((most + 1) * sizeof *keep);
    double top = 52 + (n > 1 ? 22.0 * legend_lines(runs, n) + 6 : 0);
    draw_heading(&b, runs, n, top + TOP_H + ROW_H + 8);
    Axis ax = axis_steps(xmax, 10), ax_small;
    draw_panel(&b, &PANELS[0], 0, 0, top, W, TOP_H, &ax, runs, n, keep);
    int below = has_acc ? 3 : 2;
    ax_small = axis_steps(xmax, below == 3 ? 4 : 6);
    for (int i = 0, at = 0; i < 3; i++) {
        const Panel *p = &PANELS[1 + i];
        if (p->series[0] == PLOT_ACCURACY && !has_acc) continue;
        double bw = (double)W / below;
        draw_panel(&b, p, 1 + i, bw * at, top + TOP_H, bw, ROW_H, &ax_small, runs, n, keep);
        at++;
    }
    put(&b, "</svg>\n");
    free(keep);
    *len = b.n;
    return b.p;
}

int plot_is_ours(const char *path) {
    char head[4096];   /* the description follows the title, a run's name of at most 255 bytes, escaped */
    return file_head(path, head, sizeof head) > 0 && !strncmp(head, "<?xml", 5) && strstr(head, PLOT_DESC) != NULL;
}

int plot_write(const char *path, const PlotRun *runs, int n, int force, Err *err) {
    if (file_may_replace(path, force, plot_is_ours, "an SVG plot", err)) return -1;
    size_t len;
    char *svg = plot_svg(runs, n, &len);
    int rc = write_file_atomic(path, svg, len, err);
    free(svg);
    return rc;
}

int plot_refresh(const char *dir, int *warned) {
    char metrics[4200], out[4200];
    snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", dir);
    snprintf(out, sizeof out, "%s/plot.svg", dir);
    char *name = plot_name_of(dir, 0);
    PlotRun run;
    Err err;
    int rc = plot_read(&run, metrics, name, &err);
    if (!rc) rc = plot_write(out, &run, 1, 0, &err);
    if (rc && !*warned) fprintf(stderr, "gpt2gen: warning: %s not written: %s (training goes on; said once)\n", err_show(out), err.msg);
    if (rc) *warned = 1;
    plot_run_free(&run);
    free(name);
    return rc;
}
