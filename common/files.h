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
/* The one way gpt2gen writes a file (docs/data.md, "How gpt2gen writes files"): every writer of every command goes
 * through atomic_open / atomic_write / atomic_commit (or write_file_atomic). What it guarantees:
 *   - the new contents go to a temporary file beside path, PATH.tmp.<pid>.<16 random hex digits>, created with
 *     O_CREAT|O_EXCL|O_NOFOLLOW: a name someone planted (a symbolic link, a file) is never opened, another is drawn;
 *   - path itself, when it is there, must be a regular file: a symbolic link, a device (/dev/null), a FIFO, a
 *     folder or a socket is refused with one message, at open and again just before the rename, never replaced
 *     or written through;
 *   - every write, the flush, the fsync and the close are checked: a lost write is an error naming the file, and
 *     the previous file is untouched; the rename then puts the whole file in place, and the folder is synced;
 *   - a failure removes the temporary file only while its name still is the file this process made.
 * Whether path may be replaced at all (a file gpt2gen did not write needs --force) is file_may_replace's. */
enum { ATOMIC_RANDOM_HEX = 16, ATOMIC_SUFFIX_MAX = 40 };   /* the random part; room for ".tmp.<pid>.<hex>" */
typedef struct { FILE *f; char tmp[4200]; char path[4200]; unsigned long long dev, ino; } AtomicFile;
int   atomic_open(AtomicFile *af, const char *path, Err *err);
/* fwrite of len bytes, checked: on failure the write is aborted (atomic_abort) and err names the file */
int   atomic_write(AtomicFile *af, const void *data, size_t len, Err *err);
int   atomic_commit(AtomicFile *af, Err *err);   /* flush, fsync, close, rename, all checked */
void  atomic_abort(AtomicFile *af);              /* close and remove the temporary file */
int   write_file_atomic(const char *path, const void *data, size_t len, Err *err);
/* The length of NAME in a temporary name NAME.tmp.<pid>.<16 hex> (what is left of a killed write), else 0. */
size_t atomic_tmp_base(const char *name);
/* Whether dir/name is provably what a killed atomic write left: a temporary name (atomic_tmp_base), a regular
   file (not a link) of this user, whose process is gone. Only such files are ever removed as leftovers. */
int   atomic_leftover(const char *dir, const char *name);
/* NULL when path is nothing or a regular file; else what it is, in words ("a symbolic link", "a device", ...). */
const char *file_not_regular(const char *path);
/* Whether a command may write path: nothing there, or a regular file that is ours (ours(path) says whether gpt2gen
   wrote it: its plot, its checkpoint, ...; NULL: none is), or force (--force). Anything but a regular file is
   refused even with force. err: "PATH exists and is not WHAT that gpt2gen wrote: give --force ...". */
int   file_may_replace(const char *path, int force, int (*ours)(const char *path), const char *what, Err *err);
/* Opens path for reading if it is a regular file; a directory, a FIFO (whose open would wait for a writer) or a
   device is refused at once. Errors name the file and what it should have been (e.g. "a token shard"). */
FILE *fopen_regular(const char *path, const char *what, Err *err);
/* The first n - 1 bytes of the regular file path (fewer where it is shorter) into buf, NUL-terminated: how a
   writer recognizes a file of its own (file_may_replace's ours). The count, or -1 (not a regular file, unreadable). */
long  file_head(const char *path, char *buf, size_t n);
int   mkdir_p(const char *path, Err *err);
int   file_exists(const char *path);
/* Why path cannot be had, in words for a message: "no such file", "a name in the path is longer than the file
   system allows" (ENAMETOOLONG), ...; "" when it is there. */
const char *file_missing_why(const char *path);
#endif
