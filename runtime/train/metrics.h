/* metrics: the run's log, metrics.jsonl in checkpoint.dir: one JSON object per line, appended and flushed line
 * by line. Every string in it goes through json_string, so each line parses as JSON whatever a path, a name or
 * the sampled text holds. */
#ifndef GPT2GEN_METRICS_H
#define GPT2GEN_METRICS_H
#include <stddef.h>
#include <stdio.h>
#include "common/err.h"

typedef struct { FILE *f; } Metrics;

/* Opens dir/metrics.jsonl for appending; a file that cannot be opened is an error (before training starts). */
int  metrics_open(Metrics *m, const char *dir, Err *err);
/* Appends one line; the format's %s arguments must come from json_string. */
void metrics_line(Metrics *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void metrics_close(Metrics *m);

/* A JSON string literal, quotes included, of n bytes: '"' and '\' escaped, control bytes as \n, \r, \t or
   \u00XX, and each byte that is not part of valid UTF-8 as \ufffd. malloc'd; the caller frees it. */
char *json_string(const void *bytes, size_t n);
/* v printed with fmt (a printf format of one double) into buf, or null where v is not finite (JSON has no NaN
   or infinity); returns buf. */
const char *json_number(char buf[32], const char *fmt, double v);
#endif
