/* rundir: the run directory (checkpoint.dir) and what keeps its files safe.
 *
 * rundir_open, before any training:
 *   - creates the directory and makes sure it is a directory this process can write;
 *   - takes its lock: run.lock, held with flock(2) and holding the pid. A second run into the directory is
 *     refused with one message naming the directory and the first run's pid. The kernel drops a flock when its
 *     process dies, so the file a killed run leaves is stale: the next run takes it over (and says so);
 *   - removes the leftovers of saves a killed run never finished (model_*.bin.tmp.<pid>.<hex>, state_*.bin.tmp...,
 *     the same of state_*.r<rank>.bin and done_*.bin: the temporary names of common/files.h's atomic writes), each
 *     only when it is provably one (atomic_leftover: a regular file of this user whose process is gone);
 *   - without resume, refuses a directory that already holds checkpoints (model_*.bin or state_*.bin), saying
 *     in words what is there and how to continue (--resume) or start over (--fresh), so an earlier run's
 *     checkpoints are never overwritten;
 *   - to start over (RUNDIR_FRESH, `gpt2gen train --fresh`, asked for by name), removes, with the lock held, the
 *     earlier run's files: its checkpoints, resume states and markers, metrics.jsonl and plot.svg (nothing else),
 *     and says what it removed.
 * rundir_close removes run.lock and releases it. rundir_discard is the end of a run that failed (or stopped)
 * before it had anything to keep: the folders rundir_open created are removed again, empty, so a failed first run
 * leaves no trace; a folder that was there before, or one that holds checkpoints, is never touched.
 * Checkpoints are pairs: model_%08d.bin and state_%08d.bin (rundir_paths). With several ranks, a checkpoint is
 * the model, rank 0's state, under ZeRO-1 every other rank's state shard state_%08d.r<rank>.bin
 * (rundir_rank_state), and last the marker done_%08d.bin (rundir_done), written when every other part is. */
#ifndef GPT2GEN_RUNDIR_H
#define GPT2GEN_RUNDIR_H
#include <stddef.h>
#include "common/err.h"

enum { RUNDIR_DIR_MAX = 1024, RUNDIR_PATH_MAX = 1200 };   /* a checkpoint.dir (as CONFIG_PATH_MAX), a file in it */

typedef struct {
    char dir[RUNDIR_DIR_MAX];
    int lock_fd;                   /* -1 when not held */
    char made[RUNDIR_DIR_MAX];     /* the outermost folder rundir_open created ("" when dir was there) */
} RunDir;

/* rundir_open's mode: a new run (a folder with checkpoints is refused), a resumed one, or one that starts over */
enum { RUNDIR_NEW = 0, RUNDIR_RESUME = 1, RUNDIR_FRESH = 2 };

int  rundir_open(RunDir *rd, const char *dir, int mode, Err *err);
void rundir_close(RunDir *rd);
/* Closes rd and removes, when rundir_open created the folder, what this run left in it (metrics.jsonl, plot.svg)
   and the folders it created, while they hold no checkpoint and nothing else. */
void rundir_discard(RunDir *rd);
/* What dir holds of an earlier run, by its files' names: the number of checkpoint steps (0: none, or no dir) and
   in *newest the newest step. */
int  rundir_held(const char *dir, int *newest);
/* Those in words: "3 checkpoints, the last at step 300 of 300" (steps > 0: train.steps, else "of N" is left out). */
void rundir_held_text(int count, int newest, int steps, char *out, size_t n);
/* The refusal of a directory that holds an earlier run (count > 0 checkpoint steps, the newest of them newest):
   what is there and what to pass (--resume, --fresh), naming dir; steps as for rundir_held_text. */
int  rundir_refuse(const char *dir, int count, int newest, int steps, Err *err);
/* The steps with a model or a state file in dir (either, so that half pairs are seen too), newest first;
   *steps is malloc'd (free it), the count is returned. */
int  rundir_steps(const char *dir, int **steps);
void rundir_paths(const char *dir, int step, char model[RUNDIR_PATH_MAX], char state[RUNDIR_PATH_MAX]);
/* Rank r's state file: state_%08d.bin for rank 0, state_%08d.r<r>.bin for the others. */
void rundir_rank_state(const char *dir, int step, int rank, char path[RUNDIR_PATH_MAX]);
/* The marker that a several-rank checkpoint is complete. */
void rundir_done(const char *dir, int step, char path[RUNDIR_PATH_MAX]);
/* Flushes the directory's entries (the renames of a save) to the disk; best effort. */
void rundir_sync(const RunDir *rd);
#endif
