/* plot: the SVG of one or more runs, drawn from their metrics.jsonl (docs/training.md, "Plots"). Training rewrites
 * <checkpoint.dir>/plot.svg after each validation (and evaluation) and at the end; `gpt2gen plot` overlays runs.
 *
 * Reading (plot_read). Each line of metrics.jsonl is a JSON object (read with Jansson). "step" records give the
 * series train_loss ("loss"), lr and tok_s, "val" records val_loss, "eval" records accuracy; x is the record's
 * "step". A "start" record gives the run's planned steps ("steps"), which the x axis reaches. Other events, lines
 * without an "event" and other keys are ignored; a value that is null (not finite when it was written) or missing
 * is no point. When a record's step is not past the last point of its series (a run resumed from an earlier
 * checkpoint logs those steps again), the series' points from that step on are dropped first: the later record
 * wins. A last line without its end of line that does not parse (a run that stopped while writing it) is left
 * out; any other line that is not a JSON object, a "step" that is not a whole number, a value that is not a number
 * or null, or a line over PLOT_MAX_LINE bytes is an error naming the file and the line.
 *
 * The picture (plot_svg): plain SVG 1.1, no script, no external font (font-family sans-serif), with width,
 * height and viewBox. A grid of panels, x = step in each: "loss" (train and validation) across the top; below
 * it "eval accuracy" (only where a run has eval records), "learning rate" and "tokens/s". Axes have ticks at
 * round numbers (1, 2 or 5 times a power of ten). One run: a colour per series. Several: a colour per run and
 * a legend of their names; validation loss is the dashed line. A series of few points (validation, accuracy,
 * or a single point) also gets a dot at each point.
 *
 * For tests and tools, each series that has points is one element, in its panel's <g class="panel"
 * data-panel="loss|accuracy|lr|tok_s">:
 *   <polyline class="series" data-run="NAME" data-series="train_loss|val_loss|accuracy|lr|tok_s"
 *             data-points="N" data-source-points="M" data-x="x1 x2 ..." data-y="y1 y2 ..." points="px,py ..."/>
 * data-x and data-y are the N points drawn, in step order, each printed so that it reads back as exactly the
 * value in metrics.jsonl (the shortest of %.15g, %.16g, %.17g that does); points are their pixels, each an affine
 * map of its value (y grows downwards), to 0.1 pixel. M is the series' length before decimation: a series of more
 * than PLOT_MAX_POINTS points is cut into PLOT_MAX_POINTS / 2 buckets of consecutive points, and each bucket keeps
 * its lowest and its highest point (in step order; one where they are the same point), so spikes stay visible;
 * otherwise N = M and the points are the series as read. */
#ifndef GPT2GEN_PLOT_H
#define GPT2GEN_PLOT_H
#include <stddef.h>
#include "common/err.h"

enum { PLOT_MAX_POINTS = 2000 };
#define PLOT_MAX_LINE (64u << 20)   /* bytes in one line of metrics.jsonl */

enum { PLOT_TRAIN_LOSS, PLOT_VAL_LOSS, PLOT_ACCURACY, PLOT_LR, PLOT_TOK_S, PLOT_SERIES };

typedef struct {
    double *x, *y;
    size_t n, cap;
} PlotSeries;

typedef struct {
    char *name;                  /* the legend's and data-run's name (malloc'd) */
    PlotSeries s[PLOT_SERIES];
    long long steps;             /* the last start record's planned steps; 0 where there is none */
    size_t step_records;         /* "step" records read */
    int torn;                    /* the last line was cut short, and left out */
} PlotRun;

/* Reads the metrics.jsonl at path into *run, named name. A missing or unreadable file, a directory or a FIFO is
   an error naming it. A file without step records is not an error here (a run plots from its first validation);
   run->step_records says. On an error *run holds nothing to free. */
int  plot_read(PlotRun *run, const char *path, const char *name, Err *err);
void plot_run_free(PlotRun *run);
/* The SVG of n runs (n >= 1): malloc'd, *len its length. */
char *plot_svg(const PlotRun *runs, int n, size_t *len);
/* Whether path is a plot gpt2gen drew (an SVG with plot_svg's description), which a plot may replace. */
int  plot_is_ours(const char *path);
/* plot_svg written to path (common/files.h's write: a temporary name, then rename). A file there that is not
   one of our plots is kept, an error, unless force (--force); what is not a regular file is refused always. */
int  plot_write(const char *path, const PlotRun *runs, int n, int force, Err *err);
/* Training's plot: dir/metrics.jsonl drawn into dir/plot.svg, named after dir (a plot.svg that is not ours is
   kept). A failure is a warning line on stderr, the first time only (*warned then is 1), and -1; the run goes on. */
int  plot_refresh(const char *dir, int *warned);
/* The name a run at path (a run folder or a metrics.jsonl) is shown by: the folder's name (without trailing
   slashes), or a file's folder's name when the file is metrics.jsonl, else the file's name without ".jsonl".
   malloc'd. */
char *plot_name_of(const char *path, int is_file);
#endif
