/* state: the resume state, written beside each model checkpoint (docs/model.md, "File formats", "Resume
 * state"). With it, stopping after k steps and resuming gives the same bits as never stopping: AdamW's m and v,
 * the fp32 (master) weights, the data position and the sampling RNG.
 *
 * Header (256 int32), version 3: [0]=20240527 [1]=3 [2]=ranks [3]=rank [4]=master-weights flag (1: the body
 * holds the fp32 weights) [5]=shuffle flag [6]=step (steps done) [7]=epoch [8]=shard position [9,10]=row
 * position (low, high 32 bits) [11,12]=sampling RNG state (low, high) [13,14]=num_params (low, high)
 * [15]=n shards [16]=B [17]=T [18..23]=the model's shape: maxT, V, Vp, L, NH, C [24,25]=checksum (low, high)
 * [26,27]=train.seed (low, high) [28]=the loss scale (fp32 bits; 1 unless precision fp16) [29]=clean steps since
 * the scale last changed [30]=steps skipped so far (runtime/train/loss_scale.h); with several ranks, [31]=train.zero_stage
 * [32,33]=the first parameter this file holds (low, high) [34,35]=how many (low, high; 0: all of them); the rest
 * zero. Body: m, v, weights (fp32, that many each: all num_params, or a ZeRO-1 rank's shard, runtime/ranks/ranks.h),
 * then the shard order of the epoch (int32 each). A 1-rank state leaves [31..35] zero, byte for byte the file
 * an earlier gpt2gen wrote.
 *
 * The checksum covers the whole file: its bytes with [24,25] zeroed, as little-endian 64-bit words (the last
 * one zero-padded), then the file's length in bytes, folded by h = (rotl(h, 31) ^ word) * 0x9E3779B97F4A7C15
 * from h = 0xCBF29CE484222325. Each fold is a bijection of h, so a change to any one word (a flipped byte, a
 * crafted field) always changes the sum. Version 2 (the same without [28..30]) is read as scale 0 (not
 * recorded), 0 clean and 0 skipped steps: exact for fp32 and bf16 runs, which never scale or skip. Version 1
 * (no shape, B, T or checksum) is refused. */
#ifndef GPT2GEN_STATE_H
#define GPT2GEN_STATE_H
#include <stddef.h>
#include <stdint.h>
#include "common/err.h"
#include "common/gpt2.h"

#define STATE_MAGIC 20240527
#define STATE_VERSION 3

typedef struct {
    int ranks, rank, shuffle, step;
    long epoch, row_pos;
    int shard_pos;
    uint64_t sample_rng;
    size_t num_params;              /* the count of shape's parameters */
    float *m, *v, *params;          /* count each: the parameters [offset, offset + count) */
    size_t shard_offset, shard_count; /* the parameters m, v and params hold; count 0 (as saved): all num_params */
    int zero_stage;                 /* train.zero_stage of the run that saved it (recorded with several ranks) */
    int n_shards;
    int32_t *shard_order;
    GPT2Shape shape;
    int B, T;
    uint64_t seed;                  /* train.seed: the data order follows from it */
    float loss_scale;               /* the dynamic loss scale; 0 in a version 2 state (not recorded) */
    int loss_scale_clean, skipped;  /* clean steps since the scale changed; steps skipped so far */
} TrainState;

int  state_save(const char *path, const TrainState *s, Err *err);
/* Reads a state and checks everything the file alone can tell: magic, version, shape and parameter count,
   file size, checksum, and every field in range (ranks and rank, the part of the parameters held (after a load
   shard_count is never 0), step >= 0, epoch >= 0, B and T >= 1, the
   shard position below the shard count, row >= 0, the shard order a permutation, the loss scale a power of two
   in [1, 2^24], clean >= 0, 0 <= skipped <= step). Arrays are malloc'd;
   state_free releases them (and is a no-op after a failed load). Errors name the file. */
int  state_load(const char *path, TrainState *s, Err *err);
/* Checks a loaded state against the run that would resume from it (want: ranks, rank, shape, B, T, shuffle,
   n_shards, seed) and that its step is at most max_step. Errors name the file and the config key that differs. */
int  state_check(const char *path, const TrainState *s, const TrainState *want, int max_step, Err *err);
void state_free(TrainState *s);
/* The header's fields as a version-3 file holds them (checksum 0), and back: rank 0's state, sent at resume to
   ranks that cannot read its file (runtime/train/resume.h). */
enum { STATE_HEADER_INTS = 256 };
void state_header_put(const TrainState *s, int32_t *h);
/* the header's fields into s, the architecture record included (an error for a record that is not valid, named
   after path) */
int  state_header_get(const int32_t *h, TrainState *s, const char *path, Err *err);
/* The parameters m, v and params hold: shard_count, or all num_params when it is 0. */
size_t state_count(const TrainState *s);
#endif
