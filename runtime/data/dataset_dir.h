/* dataset_dir: a data set folder (train_*.bin, val_*.bin, tokenizer.bin) replaced as a whole.
 *
 *   DatasetDir d;
 *   if (dataset_dir_begin(&d, "data/fortunes", &err)) ...;   // d.tmp: a new, empty folder beside it
 *   ... write the whole new data set into d.tmp, each file fsynced ...
 *   if (dataset_dir_commit(&d, &err)) ...;                    // on any earlier failure: dataset_dir_abort(&d)
 *
 * What it guarantees:
 *   - Until commit, the folder is not touched. Commit swaps the complete new folder in with one atomic
 *     rename (renameat2 RENAME_EXCHANGE), so at every moment the folder holds the whole old data set or the
 *     whole new one, then removes the old one. On a file system without that exchange, two renames: the
 *     old folder aside as .NAME.old-PID, the new one in its place; a kill between them leaves no folder,
 *     and the next begin puts the old set back.
 *   - A folder holding anything but data set files is refused by begin: nothing in it is ever deleted
 *     that prepare did not write. A data set file is known by its name and its first bytes (a shard's or a
 *     tokenizer's magic), so a user's train_my_notes.bin is refused too; a temporary name only when it is
 *     provably a killed write's (atomic_leftover). A folder that is a mount point is refused too (it cannot be
 *     renamed).
 *   - The temporary folder is .NAME.prepare-PID in the same parent (so the renames stay on one file
 *     system). Begin removes those left by killed earlier runs (their process is gone); commit failures
 *     and abort remove this run's.
 *   - One prepare into a folder at a time: begin takes .NAME.lock beside it (an flock, which ends with its
 *     process); a second prepare into the same folder is refused, naming the first one's pid.
 * A folder given through a symbolic link is the link's target: that folder is replaced. */
#ifndef GPT2GEN_DATASET_DIR_H
#define GPT2GEN_DATASET_DIR_H
#include "common/err.h"

typedef struct {
    const char *given;   /* the folder as the caller named it, for messages */
    char dir[4096];      /* the folder, symbolic links resolved */
    char parent[4096];   /* the folder that holds it */
    char name[256];      /* its last component */
    char tmp[4400];      /* the new data set, until commit */
    int  mode;           /* the old folder's permissions, given to the new one */
    char lock[4400];     /* .NAME.lock beside it, held from begin to commit or abort */
    int  lock_fd;        /* -1 when not held */
} DatasetDir;

/* Whether a file name belongs to a data set: tokenizer.bin, train_*.bin, val_*.bin, or one of those with
   the .tmp.<pid>.<hex> suffix a killed atomic write leaves behind. */
int  dataset_file_name(const char *name);
/* NULL when dir can name a data set folder, else why not (".", "..", "/": no folder of its own to replace). */
const char *dataset_dir_problem(const char *dir);

int  dataset_dir_begin(DatasetDir *d, const char *dir, Err *err);
int  dataset_dir_commit(DatasetDir *d, Err *err);   /* fsync, swap, remove the old; on failure as abort */
void dataset_dir_abort(DatasetDir *d);              /* removes the temporary folder; the folder is as it was */
#endif
