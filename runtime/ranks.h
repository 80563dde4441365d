/* ranks: data parallelism's vocabulary. A world of N ranks trains one model: each rank reads its own rows of
 * every global batch (runtime/dataloader.h), and the collectives below combine what the ranks computed.
 *
 * A process drives `local` of the world's ranks: all N in the CPU emulation (comm_emulated: N backends in one
 * process), one in a process per GPU (an NCCL implementation, not built yet). Every collective takes one
 * buffer per local rank, bufs[i] being local rank i's (rank first_rank + i); with NCCL that is one device
 * pointer, in the emulation N host pointers. Buffers are fp32 (the scalars' sum is fp64), n elements each.
 *
 * ZeRO-1 shards: a buffer of n elements is cut into N shards of S = ceil(n/N) elements, rank r's being
 * [r*S, min(n, (r+1)*S)) (the last ones may be shorter or empty). An NCCL implementation pads its buffers to
 * N*S so reduce-scatter and all-gather see equal shards; the emulation needs no padding.
 *
 * The emulation reduces in one fixed order (ranks 0, 1, ..., N-1 summed in fp32, then divided by N), so a run
 * gives the same bits every time, and an all-reduce gives, on every element, exactly the bits reduce-scatter
 * then all-gather give (so ZeRO-0 and ZeRO-1 runs agree bit for bit). */
#ifndef GPT2GEN_RANKS_H
#define GPT2GEN_RANKS_H
#include <stddef.h>
#include "common/err.h"

typedef struct {
    int rank;        /* this rank, 0..world-1 */
    int world;       /* number of ranks (train.num_gpus) */
} RankInfo;

/* Rank r's ZeRO-1 shard of n elements among world ranks: [*offset, *offset + *count). */
void ranks_shard(size_t n, int world, int rank, size_t *offset, size_t *count);

typedef struct Comm Comm;
struct Comm {
    const char *name;          /* "emulated" (, "nccl") */
    int world;                 /* ranks in all */
    int first_rank, local;     /* this process drives ranks first_rank .. first_rank+local-1 */
    void *impl;
    /* Every buffer becomes the mean over ranks of the buffers. */
    int  (*all_reduce_avg)(Comm *, float *const *bufs, size_t n, Err *err);
    /* Rank r's shard (ranks_shard) of its buffer becomes the mean over ranks of that shard; the rest of
       every buffer is left undefined. */
    int  (*reduce_scatter_avg)(Comm *, float *const *bufs, size_t n, Err *err);
    /* Every rank's buffer gets rank r's shard from rank r's buffer, for every r. */
    int  (*all_gather)(Comm *, float *const *bufs, size_t n, Err *err);
    /* Every *vals[i] becomes the sum over ranks (fp64: losses, squared norms). */
    int  (*all_reduce_sum_f64)(Comm *, double *const *vals, Err *err);
    void (*destroy)(Comm *);
};

/* All world ranks in this process, reduced in a fixed order on the CPU. world >= 1. */
Comm *comm_emulated_create(int world, Err *err);
#endif
