/* metrics: the run's log, metrics.jsonl in checkpoint.dir: one JSON object per line. Every string in it goes
 * through json_quote, so each line parses as JSON whatever a path, a name or the sampled text holds, and each
 * line is appended whole or not at all (README, "Training"): a write that fails is taken back, reported once,
 * and the records after it are dropped while training goes on. */
#ifndef GPT2GEN_METRICS_H
#define GPT2GEN_METRICS_H
#include <stddef.h>
#include <stdio.h>
#include "common/err.h"

/* All zero is a log that is not open (ranks other than 0 keep none): metrics_line does nothing. */
typedef struct {
    int open, failed;                    /* failed: a write failed, and later records are dropped */
    int fd, regular;                     /* regular: a file (not /dev/null), which a record cut short is cut from */
    char path[2200];
} Metrics;

/* Opens dir/metrics.jsonl for appending; a file that cannot be opened, or that is not a regular file or a
   character device (/dev/null), is an error (before training starts). A regular file whose last line has no end
   of line (a run that stopped while writing it) is cut back to its last whole line, and a note says so. */
int  metrics_open(Metrics *m, const char *dir, Err *err);
/* Appends one line; the format's %s arguments must come from json_quote. A write error is one message on
   stderr, naming the file and the error. */
void metrics_line(Metrics *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void metrics_close(Metrics *m);

/* A JSON string literal, quotes included, of n bytes: '"' and '\' escaped, control bytes as \n, \r, \t or
   \u00XX, and each byte that is not part of valid UTF-8 as \ufffd. malloc'd; the caller frees it. */
char *json_quote(const void *bytes, size_t n);
/* v printed with fmt (a printf format of one double) into buf, or null where v is not finite (JSON has no NaN
   or infinity); returns buf. */
const char *json_number(char buf[32], const char *fmt, double v);
#endif
