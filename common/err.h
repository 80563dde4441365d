/* err: errors as values, exit codes, and host allocation that cannot fail silently. Every folder uses it. */
#ifndef GPT2GEN_ERR_H
#define GPT2GEN_ERR_H
#include <stddef.h>

/* An error is a message; functions return 0 on success and fill *err otherwise.
   The command line turns it into one line on stderr and an exit code. */
typedef struct { char msg[4096]; } Err;
int  err_set(Err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));   /* returns -1 */

/* A user's string (a path, a key, an option) as a message shows it: whole up to ERR_SHOW_MAX bytes, else its
   first and last ERR_SHOW_MAX / 2 bytes around "..." (a path keeps its file name), so that no message fills up
   with one string and loses its reason. The
   result lives in one of ERR_SHOW_SLOTS buffers of this thread, taken in turn: that many in one message. */
enum { ERR_SHOW_MAX = 200, ERR_SHOW_SLOTS = 8 };
const char *err_show(const char *s);
/* A message that starts with the path from (a temporary folder) is made to start with to (the folder the user
   named) instead; others are left as they are. */
void err_reprefix(Err *err, const char *from, const char *to);

/* exit codes */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

void *xmalloc(size_t n);            /* aborts on out of host memory, with a message */
void *xcalloc(size_t n, size_t size);
char *xstrdup(const char *s);
#endif
