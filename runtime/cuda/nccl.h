/* nccl: the collectives of runtime/ranks/ranks.h between processes, one per GPU, through NCCL (libnccl.so.2, loaded
 * with dlopen; GPT2GEN_NCCL_LIBRARY names another file). The ranks share a 128-byte id that one process makes
 * (nccl_unique_id): our launcher's parent, or rank 0 under mpirun/srun (runtime/ranks/launch.h).
 *
 * Nothing waits without a deadline: the communicator is created non-blocking, and every collective is enqueued
 * on the backend's compute stream (in order with the step's kernels), or for the gradients' parts that the
 * backward finishes, on its communication stream after an event of the compute stream (reduce_ranges_avg;
 * wait_ranges ends them), then polled, together with NCCL's asynchronous error, until it completes or the
 * timeout passes (GPT2GEN_NCCL_TIMEOUT seconds, common/env.h). On an error or the timeout the communicator is aborted (ncclCommAbort, which does not
 * wait for the other ranks), the Comm is marked broken, and err says what happened and on which rank. */
#ifndef GPT2GEN_NCCL_H
#define GPT2GEN_NCCL_H
#include "runtime/backend.h"
#include "runtime/gpu.h"   /* nccl_load, nccl_unique_id, NCCL_ID_BYTES: what the command line uses */
#include "runtime/ranks/ranks.h"

/* Joins the world as rank on the CUDA backend be's GPU; returns when every rank has joined (or err). */
Comm *comm_nccl_create(Backend *be, const void *id, int world, int rank, double timeout_s, Err *err);   /* be->make_comm */
#endif
