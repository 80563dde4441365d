/* err: errors as values, exit codes, and host allocation that cannot fail silently. Every folder uses it. */
#ifndef GPT2GEN_ERR_H
#define GPT2GEN_ERR_H
#include <stddef.h>

/* An error is a message; functions return 0 on success and fill *err otherwise.
   The command line turns it into one line on stderr and an exit code. */
typedef struct { char msg[4096]; } Err;
int  err_set(Err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));   /* returns -1 */

/* exit codes */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

void *xmalloc(size_t n);            /* aborts on out of host memory, with a message */
void *xcalloc(size_t n, size_t size);
char *xstrdup(const char *s);
#endif
