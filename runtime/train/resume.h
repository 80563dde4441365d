/* resume: picks the checkpoint a resumed run continues from. A pair qualifies when both files are there and
 * valid: the state loads (state_load: its checksum and every field), and the model file is a valid checkpoint
 * that holds exactly the state's weights as the save writes them (so it is the state's own model, from the same
 * save). The newest qualifying pair wins; each newer step passed over is printed with the reason
 * ("resume: skipped step N: ..."). A state that is valid but does not fit this run (another shape, B, T, shard
 * count, or a step past train.steps: state_check) is an error, not a reason to fall back. */
#ifndef GPT2GEN_RESUME_H
#define GPT2GEN_RESUME_H
#include "runtime/train/state.h"

typedef struct {
    const char *dir;          /* checkpoint.dir */
    TrainState run;           /* what the run has: ranks, rank, shape, B, T, shuffle, n_shards */
    int max_step;             /* train.steps */
    int model_bf16;           /* the run's model files are bf16 (else fp32) */
} ResumeWant;

/* 1: *s holds the chosen state (state_free it) and its paths are in model and state; 0: the directory holds no
   checkpoint files; -1: err says why not (no valid pair, or one that does not fit this run). */
int resume_find(const ResumeWant *w, TrainState *s, char *model, char *state, Err *err);
#endif
