/* gpu: the GPUs as the command line and the tests see them, whichever way gpt2gen was built: whether it has the
   CUDA backend, the GPUs' arch, this machine's tuning database key, NCCL's id for ranks as processes. Implemented
   in runtime/cuda/ (cuda_api.c, tune_env.c, nccl.c), or by runtime/nocuda.c in a gpt2gen built without the CUDA
   toolkit's headers, where each says so. cuda_backend_create is runtime/backend.h's; everything else under
   runtime/cuda/ is the backend's own (tune/ reaches it through runtime/cuda/tune_api.h). */
#ifndef GPT2GEN_GPU_H
#define GPT2GEN_GPU_H
#include "common/env.h"
#include "common/err.h"
#include "gen/tune_db.h"
#include <stddef.h>

/* ---- the GPUs */
/* 0 where this gpt2gen has the CUDA backend; -1 and err saying so where it was built without the CUDA toolkit's
   headers (the Makefile then builds runtime/nocuda.c in place of runtime/cuda/, and every function here says that). */
int  cuda_backend_built(Err *err);
/* 1 when libcuda.so.1 can be loaded at all (no initialization), for tests that skip without a GPU; else 0 and why. */
int  cuda_driver_present(char *why, size_t n);
/* "sm_XX" of GPU ordinal, without creating a context; -1 and err saying why there is none. */
int  cuda_device_arch(int ordinal, char arch[16], Err *err);
/* Free and total memory of GPU ordinal, bytes, as a command checks what it asks for up front; -1 and err saying why
   there is none. */
int  cuda_device_memory(int ordinal, size_t *free_b, size_t *total_b, Err *err);
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

/* ---- what a GPU serves, for the plans made for it (gen/plan.h, PlanFacts; runtime/cuda/attention.c) */
typedef struct {
    PlanFacts facts;        /* what cuda_plan_facts returns; its ctx is this struct */
    const Env *env;         /* GPT2GEN_CUDNN_LIBRARY, GPT2GEN_CUDNN_DEBUG (NULL: the defaults) */
    int device;             /* the GPU the plans run on */
} CudaFacts;
/* Fills f for GPU device and returns &f->facts. Its cudnn_attention opens cuDNN's attention for a plan's B, T,
   heads, head size, precision and determinism as the CUDA backend will (then closes it): that starts the CUDA driver
   and the GPU's context, so a process that forks ranks afterwards asks a child process instead (cli/train.c). Without
   the CUDA backend (runtime/nocuda.c), cuDNN serves nothing, and it says why. */
const PlanFacts *cuda_plan_facts(CudaFacts *f, const Env *env, int device);

/* ---- this machine as the tuning database keys it (gen/tune_db.h; runtime/cuda/tune_env.c): GPU 0's name and arch,
   the driver's CUDA version, the CUDA headers gpt2gen was built with, NVRTC, cuDNN (loaded as
   runtime/cuda/cudnn_attention.c loads it, "none" without it) and cuBLASLt. The test hook GPT2GEN_TUNE_ENV
   ("gpu=NVIDIA_H200 arch=sm_90 ...") replaces the fields it names, and stands in for a GPU where there is none (the
   CPU tests use it). */
/* Fills key and cublaslt ("13.1.0", or "none"), with env's GPT2GEN_TUNE_ENV and GPT2GEN_CUDNN_LIBRARY (NULL: the
   defaults); -1 and err when there is no GPU and no test hook. */
int tune_env_probe(TuneEnv *key, char *cublaslt, size_t n, const Env *env, Err *err);

/* ---- NCCL (runtime/cuda/nccl.c), for ranks as processes: Backend.make_comm joins them (runtime/backend.h) */
enum { NCCL_ID_BYTES = 128 };
/* Loads NCCL (once per process; env's GPT2GEN_NCCL_LIBRARY, default libnccl.so.2), without touching the GPU: -1
   and err saying how to get it when it is missing or older than 2.14. *version: e.g. 22304 for 2.23.4 (may be
   NULL). Later calls, and the other NCCL functions, use the library loaded first. */
int nccl_load(const Env *env, int *version, Err *err);
/* A new id (NCCL_ID_BYTES) for a world of ranks (ncclGetUniqueId: starts NCCL's bootstrap thread in this process, which must
   live until every rank has joined; so a launcher forks its children first). */
int nccl_unique_id(void *id, Err *err);

/* ---- what the tests read of a backend that cuda_backend_create made (0 without the CUDA backend) */
struct Backend;
/* GPU memory the backend holds in its arena, bytes */
size_t cuda_backend_arena_bytes(struct Backend *be);
/* training micro-steps replayed from the CUDA graph so far (Plan.graph) */
long cuda_backend_graph_runs(struct Backend *be);
#endif
