/* ranks: data parallelism's vocabulary. A world of N ranks trains one model: each rank reads its own rows of
 * every global batch (runtime/data/dataloader.h), and the collectives below combine what the ranks computed.
 *
 * A process drives `local` of the world's ranks: all N in the CPU emulation (comm_emulated: N backends in one
 * process), one in a process per GPU (comm_nccl, runtime/cuda/nccl.h). Every collective takes one buffer per
 * local rank, bufs[i] being local rank i's (rank first_rank + i): with NCCL one device pointer, in the
 * emulation N host pointers. The gradients and parameters are in the backend's number format (CommType: fp32
 * on the CPU backend, floatX on the GPU), n elements each; the scalars' sum is fp64 in host memory.
 *
 * ZeRO-1 shards are ranks_shard's (common/gpt2.h). NCCL's buffers are padded to ranks_padded(n) so that
 * reduce-scatter and all-gather see equal shards; the emulation needs no padding.
 *
 * The emulation reduces in one fixed order (ranks 0, 1, ..., N-1 summed in fp32, then divided by N), so a run
 * gives the same bits every time, and an all-reduce gives, on every element, exactly the bits reduce-scatter
 * then all-gather give (so ZeRO-0 and ZeRO-1 runs agree bit for bit).
 *
 * A collective that fails (NCCL: an error, or no answer from the other ranks within the timeout) leaves the
 * Comm broken: the run prints the error and ends without waiting on the GPU (comm->broken). */
#ifndef GPT2GEN_RANKS_H
#define GPT2GEN_RANKS_H
#include <stddef.h>
#include "common/err.h"
#include "common/gpt2.h"

typedef struct {
    int rank;        /* this rank, 0..world-1 */
    int world;       /* number of ranks (train.num_gpus) */
    int device;      /* its GPU ordinal (the CUDA backend) */
} RankInfo;

typedef enum { COMM_F32, COMM_BF16, COMM_F16 } CommType;
static inline CommType comm_type_of(Precision p) { return p == PREC_BF16 ? COMM_BF16 : p == PREC_FP16 ? COMM_F16 : COMM_F32; }

typedef struct Comm Comm;
struct Comm {
    const char *name;          /* "emulated" or "nccl" */
    int world;                 /* ranks in all */
    int first_rank, local;     /* this process drives ranks first_rank .. first_rank+local-1 */
    int broken;                /* a collective failed: nothing more can be asked of the other ranks */
    void *impl;
    /* Every buffer becomes the mean over ranks of the buffers. */
    int  (*all_reduce_avg)(Comm *, void *const *bufs, CommType t, size_t n, Err *err);
    /* Rank r's shard (ranks_shard) of its buffer becomes the mean over ranks of that shard; the rest of
       every buffer is left undefined. */
    int  (*reduce_scatter_avg)(Comm *, void *const *bufs, CommType t, size_t n, Err *err);
    /* Every rank's buffer gets rank r's shard from rank r's buffer, for every r. */
    int  (*all_gather)(Comm *, void *const *bufs, CommType t, size_t n, Err *err);
    /* The averaging of part of the buffer, started while the backward goes on (runtime/backend.h, grad_ready):
       elements [ranges[k][0], ranges[k][1]) of the n become, on every rank (zero1 0) or on the rank whose shard
       holds them (zero1 1), the mean over ranks, the values all_reduce_avg or reduce_scatter_avg give them. It may
       return before the work is done (NCCL: enqueued on the communication stream after the backward's work so
       far); wait_ranges returns when every range asked for is done. NULL where the ranks cannot overlap (the
       emulation runs them one after another). */
    int  (*reduce_ranges_avg)(Comm *, void *const *bufs, CommType t, size_t n, const size_t (*ranges)[2], int count,
                              int zero1, Err *err);
    int  (*wait_ranges)(Comm *, Err *err);
    /* Every *vals[i] becomes the sum over ranks (fp64: losses, squared norms; also a barrier: it returns when
       every rank has called it). */
    int  (*all_reduce_sum_f64)(Comm *, double *const *vals, Err *err);
    /* Host memory on every comm (NCCL's goes through a buffer on its GPU), 4-byte elements moved as they are (fp32
       weights, int32 records): every rank's buffer (n elements) gets elements [parts[r][0], parts[r][0] +
       parts[r][1]) of rank r's buffer, for every rank r; the rest of each buffer stays as it was. The parts
       (world of them, the same on every rank) lie within n and do not overlap; a rank's may be empty. With
       ranks_shard's parts it is ZeRO-1's all-gather of the fp32 master weights; with all n on rank 0 and nothing
       elsewhere, a broadcast from rank 0. For checkpoints and resume (runtime/train/), not the step. */
    int  (*share)(Comm *, void *const *bufs, size_t n, const size_t (*parts)[2], Err *err);
    void (*destroy)(Comm *);
};

/* All world ranks in this process, reduced in a fixed order on the CPU (fp32 buffers only). world >= 1. */
Comm *comm_emulated_create(int world, Err *err);
#endif
