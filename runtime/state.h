/* state: the resume state, written beside each model checkpoint (SPEC section 3). With it, stopping after k
 * steps and resuming gives the same bits as never stopping: AdamW's m and v, the fp32 (master) weights, the
 * data position and the sampling RNG.
 *
 * Header (256 int32): [0]=20240527 [1]=1 [2]=ranks [3]=rank [4]=master-weights flag (1: the body holds the
 * fp32 weights) [5]=shuffle flag [6]=step (steps done) [7]=epoch [8]=shard position [9,10]=row position
 * (low, high 32 bits) [11,12]=sampling RNG state (low, high) [13,14]=num_params (low, high) [15]=n shards.
 * Body: m, v, weights (fp32, num_params each), then the shard order of the epoch (int32 each). */
#ifndef GPT2GEN_STATE_H
#define GPT2GEN_STATE_H
#include <stddef.h>
#include <stdint.h>
#include "common/err.h"

#define STATE_MAGIC 20240527

typedef struct {
    int ranks, rank, shuffle, step;
    long epoch, row_pos;
    int shard_pos;
    uint64_t sample_rng;
    size_t num_params;
    float *m, *v, *params;          /* num_params each */
    int n_shards;
    int32_t *shard_order;
} TrainState;

int  state_save(const char *path, const TrainState *s, Err *err);
/* Reads a state; expect_params must match. Arrays are malloc'd; state_free releases them. */
int  state_load(const char *path, TrainState *s, size_t expect_params, Err *err);
void state_free(TrainState *s);
#endif
