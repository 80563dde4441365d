/* clock: a monotonic clock and durations for people. */
#ifndef GPT2GEN_CLOCK_H
#define GPT2GEN_CLOCK_H
#include <stddef.h>

double now_seconds(void);           /* monotonic clock */
/* Formats seconds as "1h02m", "3m05s" or "12.3s". */
void  format_duration(double seconds, char *out, size_t n);
#endif
