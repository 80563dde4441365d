/* metrics: the run's log, metrics.jsonl in checkpoint.dir: one JSON object per line, {"event":"...",...}, made
 * with Jansson (json_t objects, dumped compact in the order their keys were set). Strings go through
 * metrics_text, so each line is JSON whatever a path, a name or the sampled text holds; numbers through
 * metrics_real, so a NaN or an infinity is null (JSON has neither). Each line is appended whole or not at all
 * (docs/training.md): a write that fails is taken back, reported once, and the records after it are dropped
 * while training goes on. */
#ifndef GPT2GEN_METRICS_H
#define GPT2GEN_METRICS_H
#include <stddef.h>
#include <stdio.h>
#include <jansson.h>
#include "common/err.h"
#include "common/metrics_json.h"   /* metrics_dump, metrics_real, metrics_text: the records' JSON */

/* All zero is a log that is not open (ranks other than 0 keep none): metrics_write writes nothing. */
typedef struct {
    int open, failed;                    /* failed: a write failed, and later records are dropped */
    int fd, regular;                     /* regular: a file (not /dev/null), which a record cut short is cut from */
    char path[2200];
} Metrics;

/* Opens dir/metrics.jsonl for appending; a file that cannot be opened, or that is not a regular file or a
   character device (/dev/null), is an error (before training starts), and so is a regular file gpt2gen did not
   write (metrics_is_ours), which is never appended to or cut. A regular file whose last line has no end
   of line (a run that stopped while writing it) is cut back to its last whole line, and a note says so. */
int  metrics_open(Metrics *m, const char *dir, Err *err);
/* Whether the regular file at path is a metrics log gpt2gen wrote: it starts with a record, {"event":"... */
int  metrics_is_ours(const char *path);
/* Appends record (a JSON object) as one line, and releases it (json_decref), also where the log is not open or
   record is NULL. A write error is one message on stderr, naming the file and the error. */
void metrics_write(Metrics *m, json_t *record);
/* {"event":event, key1:value1, ...}: (const char *key, json_t *value) pairs ended by NULL, keys in that order.
   The values are taken over (a NULL value is left out). */
json_t *metrics_record(const char *event, ...) __attribute__((sentinel));
/* metrics_write(m, metrics_record(event, ...)) */
void metrics_event(Metrics *m, const char *event, ...) __attribute__((sentinel));
void metrics_close(Metrics *m);
#endif
