/* rundir: the run directory (checkpoint.dir) and what keeps its files safe.
 *
 * rundir_open, before any training:
 *   - creates the directory and makes sure it is a directory this process can write;
 *   - takes its lock: run.lock, held with flock(2) and holding the pid. A second run into the directory is
 *     refused with one message naming the directory and the first run's pid. The kernel drops a flock when its
 *     process dies, so the file a killed run leaves is stale: the next run takes it over (and says so);
 *   - removes the leftovers of saves a killed run never finished (model_*.bin.tmp.<pid>, state_*.bin.tmp.<pid>,
 *     the same of state_*.r<rank>.bin and done_*.bin:
 *     the temporary names of common/files.h's atomic writes); with the lock held, no live run owns them;
 *   - without resume, refuses a directory that already holds checkpoints (model_*.bin or state_*.bin), saying
 *     how to continue (--resume) or start over, so an earlier run's checkpoints are never overwritten.
 * rundir_close removes run.lock and releases it.
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
} RunDir;

int  rundir_open(RunDir *rd, const char *dir, int resume, Err *err);
void rundir_close(RunDir *rd);
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
