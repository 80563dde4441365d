/* util: errors as values, files, hashing, timing. Shared by gen/ and runtime/. */
#ifndef GPT2GEN_UTIL_H
#define GPT2GEN_UTIL_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* An error is a message; functions return 0 on success and fill *err otherwise.
   The command line turns it into one line on stderr and an exit code. */
typedef struct { char msg[4096]; } Err;
int  err_set(Err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));   /* returns -1 */

/* exit codes */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

void *xmalloc(size_t n);            /* aborts on out of host memory, with a message */
void *xcalloc(size_t n, size_t size);
char *xstrdup(const char *s);

/* Reads a whole file; *len gets its size. NUL-terminated. NULL + err on failure. */
char *read_file(const char *path, size_t *len, Err *err);
/* Writes atomically: to path.tmp.<pid>, fsync, rename. A crash never leaves a half-written file under path. */
int   write_file_atomic(const char *path, const void *data, size_t len, Err *err);
/* Same, for writers that stream: open gives a FILE* on the temporary name; commit renames it into place. */
typedef struct { FILE *f; char tmp[4096]; char path[4096]; } AtomicFile;
int   atomic_open(AtomicFile *af, const char *path, Err *err);
int   atomic_commit(AtomicFile *af, Err *err);   /* flush, fsync, close, rename */
void  atomic_abort(AtomicFile *af);              /* close and remove the temporary file */
int   mkdir_p(const char *path, Err *err);
int   file_exists(const char *path);

/* SHA-256, for cache keys. hex must hold 65 bytes. */
typedef struct { uint32_t h[8]; uint64_t len; uint8_t buf[64]; size_t nbuf; } Sha256;
void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t n);
void sha256_hex(Sha256 *s, char hex[65]);

double now_seconds(void);           /* monotonic clock */
/* Formats seconds as "1h02m", "3m05s" or "12.3s". */
void  format_duration(double seconds, char *out, size_t n);

/* Deterministic RNG (xorshift64*), used for init, data shuffling and sampling. State is one uint64. */
uint64_t rng_next(uint64_t *state);
float    rng_uniform(uint64_t *state);            /* [0, 1) */
float    rng_normal(uint64_t *state);             /* Box-Muller, N(0,1) */
#endif
