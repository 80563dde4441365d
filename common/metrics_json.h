/* metrics_json: the JSON lines gpt2gen writes (a training run's metrics.jsonl, runtime/train/metrics.h; the line of
 * `gpt2gen sample --stats`), made with Jansson: a record dumped compact as one line, strings that are JSON whatever
 * bytes they hold (metrics_text), numbers that print as their format prints them and are null where not finite
 * (metrics_real: JSON has no NaN or infinity). Nothing here writes a file. */
#ifndef GPT2GEN_METRICS_JSON_H
#define GPT2GEN_METRICS_JSON_H
#include <stddef.h>
#include <jansson.h>
#include "common/err.h"

/* The line metrics_write writes for record, without its end of line: compact, keys in the order they were set,
   numbers with up to 15 significant digits (so a metrics_real prints back as its format printed it). malloc'd;
   NULL where Jansson cannot dump it. */
char *metrics_dump(const json_t *record);
/* v as its printf format fmt (of one double, e.g. "%.6f") prints it, as a JSON number; null where v is not
   finite (JSON has no NaN or infinity). */
json_t *metrics_real(const char *fmt, double v);
/* The n bytes at bytes as a JSON string: valid UTF-8 as it is, each byte that is not part of valid UTF-8 as
   U+FFFD (NUL and control bytes are kept: the dump escapes them). */
json_t *metrics_text(const void *bytes, size_t n);
/* Those bytes with each one that is not part of valid UTF-8 replaced by U+FFFD, NUL-terminated; *len (where not
   NULL) gets the length. malloc'd. */
char *utf8_clean(const void *bytes, size_t n, size_t *len);
#endif
