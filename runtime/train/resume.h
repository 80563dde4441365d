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

/* resume_find for ranks in several processes (runtime/ranks/ranks.h), each with its own checkpoint.dir (w->dir: this
   process's), called by every rank: no rank reads another's folder. Rank 0 takes its newest step whose state is
   valid, fits the run and has its marker (passing over the others as resume_find does), and tells the others; each
   reads only its own part of that step (under ZeRO-1 its state shard; under ZeRO-0 there is none) and answers.
   When every rank has its part, the parts are shared over c, so that every rank's *s is the whole state (rank 0's
   header and shard order, m, v and weights of all parameters, as resume_find gives), and rank 0 checks the model
   file; otherwise (a rank lacks its part, or its part is not of this checkpoint) rank 0 prints the ranks' reasons
   as the step skipped and goes on to its next step. Every rank returns the same: 1 (model and state are rank 0's
   paths, or on the others, state names rank 0's state), 0 (rank 0's folder holds no checkpoint files), or -1 with
   the same message on every rank: rank 0's error, or when no step is whole on every rank, the reasons of the newest
   (e.g. "rank 1 has no part of step 12 in /ckpt (state_00000012.r1.bin)"). Every wait is the comm's, bounded. */
typedef struct Comm Comm;
int resume_find_ranks(const ResumeWant *w, Comm *c, TrainState *s, char *model, char *state, Err *err);

/* Pieces resume_find_ranks shares with resume_find. The model file holds s's weights as a save writes them; rank k's
   part sh agrees with rank 0's state s (same run, step, data position and scaler, rank k's ZeRO-1 shard); the
   several-rank marker of step is in dir; a part's m, v and weights put into whole arrays. Errors in why. */
int resume_model_matches(const char *model, const TrainState *s, int bf16, Err *why);
int resume_shard_fits(const char *path, const TrainState *sh, const TrainState *s, int k, Err *why);
int resume_marker(const char *dir, int step, Err *why);
void resume_put_part(const TrainState *part, float *m, float *v, float *params);
#endif
