/* dirs: folders replaced as a whole, trees removed, folders synced, and lock files. Shared by the build
   (gen/build.c), the data sets of `prepare` (runtime/data/dataset_dir.c) and the run directory (runtime/train/rundir.c). */
#ifndef GPT2GEN_DIRS_H
#define GPT2GEN_DIRS_H
#include "common/err.h"

/* Puts the folder new_dir in dir's place in one rename (RENAME_EXCHANGE): afterwards new_dir holds the old
   folder. Where the file system cannot exchange, two renames: dir to aside, new_dir to dir (a crash between
   the two leaves no dir, and aside to recover it from), then aside to new_dir. Returns 0 when swapped, 1 when
   there was no dir (new_dir was moved in), -1 with errno when it failed (both folders as they were). */
int  dir_swap(const char *new_dir, const char *dir, const char *aside);
/* Removes the tree at path (links are removed, never followed). 0, or -1 (errno) when something stays. */
int  dir_remove_tree(const char *path);
/* fsync of the folder itself, so that renames and new names in it are durable. 0, or -1 (errno). */
int  dir_sync(const char *path);

/* Tries to take the lock file at path (created if need be): an exclusive flock, which ends with the process
   that holds it, and the holder's pid written into the file.
   0: taken; *fd holds it (close it to let go) and *pid is the pid the file named before (a holder that died
      without cleaning up), or 0.
   1: another process holds it; *pid is its pid (0 where it has not written it yet).
   -1: err says why. */
int  lockfile_try(const char *path, int *fd, long *pid, Err *err);
#endif
