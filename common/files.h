/* files: whole-file reads, and writes that never leave a half-written file under the target name. */
#ifndef GPT2GEN_FILES_H
#define GPT2GEN_FILES_H
#include <stdio.h>
#include "common/err.h"

/* Reads a whole regular file; *len gets its size. NUL-terminated. A directory, a FIFO or a device is refused,
   not waited on. NULL + err on failure (errno ENOENT when there is no such file). */
char *read_file(const char *path, size_t *len, Err *err);
/* The same, refusing a file over max bytes before reading any of it: err names the file, its size and the limit
   (errno EFBIG). Every file gpt2gen reads has such a limit (docs/data.md, "Limits of the files gpt2gen reads"). */
char *read_file_max(const char *path, size_t max, size_t *len, Err *err);
/* The same for path relative to the folder dirfd (AT_FDCWD: the working folder), refusing files over max
   bytes (0: no limit). */
char *read_file_at(int dirfd, const char *path, size_t max, size_t *len, Err *err);
/* Writes atomically: to path.tmp.<pid>, fsync, rename. A crash never leaves a half-written file under path. */
int   write_file_atomic(const char *path, const void *data, size_t len, Err *err);
/* Same, for writers that stream: open gives a FILE* on the temporary name; commit renames it into place. */
typedef struct { FILE *f; char tmp[4096]; char path[4096]; } AtomicFile;
int   atomic_open(AtomicFile *af, const char *path, Err *err);
int   atomic_commit(AtomicFile *af, Err *err);   /* flush, fsync, close, rename */
void  atomic_abort(AtomicFile *af);              /* close and remove the temporary file */
/* Opens path for reading if it is a regular file; a directory, a FIFO (whose open would wait for a writer) or a
   device is refused at once. Errors name the file and what it should have been (e.g. "a token shard"). */
FILE *fopen_regular(const char *path, const char *what, Err *err);
int   mkdir_p(const char *path, Err *err);
int   file_exists(const char *path);
/* Why path cannot be had, in words for a message: "no such file", "a name in the path is longer than the file
   system allows" (ENAMETOOLONG), ...; "" when it is there. */
const char *file_missing_why(const char *path);
#endif
