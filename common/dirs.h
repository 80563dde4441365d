/* dirs: folders replaced as a whole, trees copied as hard links and removed, folders synced, and lock files.
   Shared by the build (gen/build.c), the data sets of `prepare` (runtime/data/dataset_dir.c), export
   (runtime/hf/hf_export.c) and the run directory (runtime/train/rundir.c). */
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

/* Whether process pid is gone (no such process), so that what it left may be removed. */
int  pid_gone(long pid);
/* Makes the folder dst (which must not exist) a copy of the tree src: folders made anew, everything else hard
   linked, or copied where it cannot be linked (regular files and symbolic links; anything else is an error).
   The names in skip (NULL-ended; NULL: none) at the top are left out. */
int  dir_link_tree(const char *src, const char *dst, const char *const *skip, Err *err);

/* A folder replaced as a whole, for outputs of several files (export):
 *   DirStage st;
 *   dir_stage_begin(&st, "hf/tiny", "export", skip, &err);   // st.stage: PARENT/.NAME.export-PID, a copy of the
 *                                                             // folder (hard links) without the names in skip
 *   ... write every new file into st.stage ...
 *   dir_stage_commit(&st, &err);                              // on an earlier failure: dir_stage_abort(&st)
 * Until commit the folder is not touched; commit swaps the stage in with one rename (dir_swap), so at every
 * moment the folder holds the whole old set or the whole new one, and a kill or a full disk leaves the old one.
 * Begin removes the stages killed runs left (their process gone, this user's). A folder given through a
 * symbolic link is the link's target. One writer of a folder at a time: begin takes PARENT/.NAME.KIND.lock
 * (lockfile_try), which commit and abort let go; while another process holds it, begin fails with a message
 * naming the folder and that process. */
typedef struct {
    char dir[4096], parent[4096], name[256], kind[32];
    char stage[4400];    /* "" once committed or aborted */
    char lock[4400];
    int lock_fd;         /* -1: not held */
    int existed;         /* the folder was there at begin */
} DirStage;
int  dir_stage_begin(DirStage *st, const char *dir, const char *kind, const char *const *skip, Err *err);
int  dir_stage_commit(DirStage *st, Err *err);
void dir_stage_abort(DirStage *st);

/* Tries to take the lock file at path (created if need be): an exclusive flock, which ends with the process
   that holds it, and the holder's pid written into the file.
   0: taken; *fd holds it (close it to let go) and *pid is the pid the file named before (a holder that died
      without cleaning up), or 0.
   1: another process holds it; *pid is its pid (0 where it has not written it yet).
   -1: err says why. */
int  lockfile_try(const char *path, int *fd, long *pid, Err *err);
/* Splits path, trailing slashes dropped, into the folder that holds it ("." or "/" where that is all) and its last
   component. */
void dir_split_path(const char *path, char *parent, size_t psize, char *name, size_t nsize);
#endif
