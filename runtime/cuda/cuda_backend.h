/* cuda_backend: the CUDA backend's public interface beyond runtime/backend.h (cuda_backend_create is declared
   there): what the command line needs of the GPUs (their arch, this machine's tuning key, NCCL's id) and what the
   tests read of the backend. Everything else in runtime/cuda/ is the backend's own. */
#ifndef GPT2GEN_CUDA_BACKEND_H
#define GPT2GEN_CUDA_BACKEND_H
#include "common/env.h"
#include "runtime/backend.h"
#include "runtime/cuda/tune_env.h"   /* tune_env_probe: this machine as the tuning database keys it */

/* ---- the GPUs */
/* 0 where this gpt2gen has the CUDA backend; -1 and err saying so where it was built without the CUDA toolkit's
   headers (the Makefile then builds runtime/nocuda.c in place of runtime/cuda/, and every function here says that). */
int  cuda_backend_built(Err *err);
/* 1 when libcuda.so.1 can be loaded at all (no initialization), for tests that skip without a GPU; else 0 and why. */
int  cuda_driver_present(char *why, size_t n);
/* "sm_XX" of GPU ordinal, without creating a context; -1 and err saying why there is none. */
int  cuda_device_arch(int ordinal, char arch[16], Err *err);
/* The arch to build for: the explicit one if given, else the config's, else GPU 0's, else sm_90.
   *note says where it came from ("--arch", "config", "GPU 0", "default: no GPU found"). */
void cuda_pick_arch(const char *explicit_arch, const char *config_arch, char arch[16], const char **note);
/* This machine's GPUs as one process sees them. It starts the CUDA driver: a process that forks ranks afterwards
   asks a child process (cli/train.c). */
typedef struct {
    int count;              /* GPUs; 0: none (why says so) */
    char arch[16];          /* GPU 0's */
    int key_ok;             /* key and cublaslt hold this machine's tuning database key */
    TuneEnv key;
    char cublaslt[32];
    char why[256];
} CudaProbe;
void cuda_probe(CudaProbe *p, const Env *env);

/* ---- NCCL (runtime/cuda/nccl.c), for ranks as processes: Backend.make_comm joins them */
enum { NCCL_ID_BYTES = 128 };
/* Loads NCCL (once per process; env's GPT2GEN_NCCL_LIBRARY, default libnccl.so.2), without touching the GPU: -1
   and err saying how to get it when it is missing or older than 2.14. *version: e.g. 22304 for 2.23.4 (may be
   NULL). Later calls, and the other NCCL functions, use the library loaded first. */
int nccl_load(const Env *env, int *version, Err *err);
/* A new id (NCCL_ID_BYTES) for a world of ranks (ncclGetUniqueId: starts NCCL's bootstrap thread in this process, which must
   live until every rank has joined; so a launcher forks its children first). */
int nccl_unique_id(void *id, Err *err);

/* ---- for the tests */
/* GPU memory the backend holds in its arena, bytes */
size_t cuda_backend_arena_bytes(Backend *be);
/* training micro-steps replayed from the CUDA graph so far (Plan.graph) */
long cuda_backend_graph_runs(Backend *be);
/* Groups the n positions of inp by token for the deterministic wte backward: bucket j is token[j], its
   positions are positions[start[j] .. start[j+1]) in increasing order. count needs Vp+1 entries, token and
   positions n, start n+1. Returns the number of buckets. */
int cuda_encoder_buckets(const int32_t *inp, int n, int Vp, int32_t *count, int32_t *token, int32_t *start, int32_t *positions);
#endif
