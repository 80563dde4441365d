/* backend: what the training loop, the sampler and the evaluator need from a device, as one small interface that
   speaks of a plan's step, the arrays it keeps and the ranks' collectives. The loop (runtime/train/train.c) is written
   once against this; runtime/cpu/ is the reference, runtime/cuda/ runs the generated kernels.
   A backend is made from one plan (gen/plan.h) and runs that plan's step: its model, B, T and precision are the
   plan's. Backend.run runs a part of the step (the plan's op lists, gen/schedule.h) or the optimizer's work on the
   gradients; Backend.read and Backend.write move the arrays it keeps to and from the host (fp32, parameters in
   checkpoint order); the rest is for several ranks. Which phases and arrays a plan's backend has is decided once,
   here (backend_runs, backend_array_len), from its step's kind. */
#ifndef GPT2GEN_BACKEND_H
#define GPT2GEN_BACKEND_H
#include <stdint.h>
#include "common/env.h"
#include "common/err.h"
#include "common/gpt2.h"
#include "gen/plan.h"
#include "runtime/gpu.h"

typedef struct Backend Backend;
typedef struct Comm Comm;            /* runtime/ranks/ranks.h */
typedef struct DecodeRun DecodeRun;  /* runtime/sample/sampling.h: the arguments of a BACKEND_DECODE run */

/* What one Backend.run does. A training plan's backend runs every phase but BACKEND_DECODE; a forward plan's
   BACKEND_FORWARD only; a decode plan's BACKEND_DECODE only (backend_runs). */
typedef enum {
    /* Forward over inputs (B*T token ids). With targets, the mean loss into *loss (when loss is not NULL) and the
       B*T losses into BACKEND_LOSSES; without, only logits. A prefill plan's forward (step.fills_cache) writes every
       layer's keys and values of positions 0..T-1 into its cache backend's cache instead, and keeps no logits. */
    BACKEND_FORWARD,
    /* A training micro-step: forward with targets (*loss its mean loss), then backward with grad_scale; the same
       results as the two runs. The CUDA backend makes each chunk of logits once here, their loss and gradient
       together, where forward then backward makes them twice (it keeps no B*T x Vp logits), and replays it as a CUDA
       graph (runtime/cuda/step.c). The CPU backend's is backend_forward_backward. */
    BACKEND_FORWARD_BACKWARD,
    /* Backward of the last forward (which had targets); adds grad_scale * d(mean loss)/d(params) to the gradients.
       The loop passes 1/grad_accum (times fp16's loss scale). */
    BACKEND_BACKWARD,
    /* A decode plan's steps (STEP_DECODE): run->decode->steps steps against the key/value cache; run returns the
       steps done (their tokens are in decode->drawn), or -1. */
    BACKEND_DECODE,
    /* The gradients to zero. */
    BACKEND_ZERO_GRADS,
    /* The sum of squares of gradients [offset, offset+count) in fp64 into *sumsq, summed in a fixed order (the same
       bits on every run). The global L2 norm is the sqrt of the whole range's (backend_grad_norm); several ranks add
       up their shards' (runtime/train/train.c). On the GPU, offset keeps the 16-byte alignment of the kernel's
       vector loads (ranks_shard's offsets do). */
    BACKEND_GRAD_SUMSQ,
    /* AdamW step number `step` (1-based, for bias correction), gradients multiplied by grad_scale first (clipping),
       on the parameters [opt_offset, opt_offset+opt_count) only. Weight decay only on the tensors gpt2_param_decays()
       names. */
    BACKEND_UPDATE,
    BACKEND_PHASES
} BackendPhase;

typedef struct { float lr, beta1, beta2, eps, weight_decay; } BackendAdamW;

/* The arguments of one Backend.run; each phase reads the fields its comment above names, and the rest are ignored
   (a compound literal with designated initializers leaves them zero). */
typedef struct {
    BackendPhase phase;
    const int32_t *inputs, *targets;  /* FORWARD (targets may be NULL), FORWARD_BACKWARD: B*T token ids each */
    float *loss;                      /* FORWARD with targets, FORWARD_BACKWARD: the mean loss (NULL: not wanted) */
    float grad_scale;                 /* FORWARD_BACKWARD, BACKWARD, UPDATE */
    /* FORWARD_BACKWARD, BACKWARD: called as each part of the gradients is final (gpt2_grad_part: layer L-1 down to
       0, then GRAD_PART_REST), so that their averaging across ranks overlaps the rest of the backward; a non-zero
       return stops the backward. NULL: not called (and the CUDA backend may replay its graph). */
    int  (*grad_ready)(void *ctx, int part, Err *err);
    void *grad_ready_ctx;
    DecodeRun *decode;                /* DECODE */
    size_t offset, count;             /* GRAD_SUMSQ: the range of gradients */
    double *sumsq;                    /* GRAD_SUMSQ: the result */
    BackendAdamW adamw;               /* UPDATE */
    int step;                         /* UPDATE: 1, 2, ... */
} BackendRun;

/* The arrays Backend.read and Backend.write move, fp32 on the host (a 16-bit array's values widened when read,
   rounded to nearest when written, but for BACKEND_PARAMS as it says):
   BACKEND_PARAMS   num_params, checkpoint order; every plan's backend (read and write). With a 16-bit model and
                    master weights, write sets both the 16-bit weights (bf16: rounded as AdamW rounds, so that a
                    resumed run continues with the same bits) and the fp32 master copy of [opt_offset, +opt_count);
                    read returns the master copy where there is one, and under ZeRO-1 the other ranks' parts as the
                    16-bit weights the last all-gather left. A plan with shared weights reads and writes its weights
                    backend's.
   BACKEND_GRADS    num_params, the accumulated gradients; a training plan's backend (read only).
   BACKEND_ADAM_M, BACKEND_ADAM_V
                    opt_count each: AdamW's m and v of the parameters this backend updates (their element i is
                    parameter opt_offset+i's); a training plan's backend (read and write), for checkpoints and resume.
   BACKEND_LOGITS   vocab_size: one row's logits of the last forward, row `index` = b*T+t (probabilities are not
                    needed); on a decode plan's backend, row b's of the last step run (T = 1). Read only; not on a
                    prefill (it keeps no logits).
   BACKEND_LOSSES   B*T: the last forward with targets' losses, -log p(target) of row b, position t at b*T+t; their
                    mean is the forward's *loss. For evaluation (runtime/eval/evaluate.h). Read only; not on a decode
                    plan's backend.
   `index` is 0 for every array but the logits. */
typedef enum { BACKEND_PARAMS, BACKEND_GRADS, BACKEND_ADAM_M, BACKEND_ADAM_V, BACKEND_LOGITS, BACKEND_LOSSES,
               BACKEND_ARRAYS } BackendArray;

struct Backend {
    const char *name;                 /* "cpu" or "cuda" */
    const Plan *plan;                 /* what it runs: plan->model, plan->step (B, T, ...) */
    size_t num_params;
    /* The parameters whose AdamW state (m, v; master weights on a 16-bit model) this backend keeps and updates:
       all of them (0, num_params), or under ZeRO-1 this rank's shard (runtime/ranks/ranks.h). */
    size_t opt_offset, opt_count;
    void *impl;

    /* One phase of the plan's step, or of the optimizer (BackendPhase): 0, or (BACKEND_DECODE) the steps done; -1
       and err where it failed or this plan's backend has no such phase. */
    int  (*run)(Backend *, const BackendRun *r, Err *err);
    /* An array (BackendArray) to out, or from in: backend_array_len(be, which) floats each; -1 and err where this
       plan's backend has no such array, it is read-only (write), or index is out of range. */
    int  (*read)(Backend *, BackendArray which, size_t index, float *out, Err *err);
    int  (*write)(Backend *, BackendArray which, const float *in, Err *err);

    /* For several ranks (runtime/ranks/ranks.h). device_array(BACKEND_GRADS or BACKEND_PARAMS): the backend's own
       buffer of num_params (padded to ranks_padded on the GPU) that the collectives average (gradients) and gather
       (parameters), in the number format comm_prec: fp32 host memory on the CPU backend, floatX device memory (a
       CUdeviceptr) on the GPU; NULL for any other array, and for the gradients of a plan without a backward. */
    Precision comm_prec;
    void *(*device_array)(Backend *, BackendArray which);
    /* Joins a world of ranks that are processes, one per backend, as rank `rank`; id is the world's (made by the
       launcher: NCCL's unique id on the GPU, runtime/ranks/comm_socket.h's on the CPU), timeout_s bounds every
       wait on the others. The collectives run on this backend's buffers (NCCL's on its GPU). NULL + err if not.
       A training plan's backend only (NULL on the others). */
    Comm *(*make_comm)(Backend *, const void *id, int world, int rank, double timeout_s, Err *err);
    void  (*destroy)(Backend *);
};

typedef struct {
    /* the model and the step; the CUDA backend runs the plan's kernels in its memory layout (the CPU backend keeps
       fp32 throughout, whatever the plan's precision) */
    const Plan *plan;
    int device;                       /* the CUDA backend's GPU ordinal */
    size_t opt_offset, opt_count;     /* the parameters this backend updates (Backend.opt_offset); count 0: all */
    /* a plan whose step has shared_weights runs with these: another backend of the same model, on the same device,
       that outlives this one (BACKEND_PARAMS then reaches its parameters) */
    Backend *weights;
    const Env *env;                   /* the CUDA backend's GPT2GEN_* settings (common/env.h); NULL: the defaults */
    /* a prefill plan (step.fills_cache) fills the cache of this decode plan's backend: same kind, model and B, on
       the same device, outliving this one */
    Backend *cache;
} BackendOptions;

Backend *cpu_backend_create(const BackendOptions *opt, Err *err);
Backend *cuda_backend_create(const BackendOptions *opt, Err *err);   /* NULL + err without a GPU */
/* which: "cpu", "cuda", or "auto" (CUDA where it starts, else the CPU backend, saying so on stderr). */
Backend *backend_create(const BackendOptions *opt, const char *which, Err *err);
/* The facts (gen/plan.h) to make a plan with for backend which: none for "cpu" (NULL: no cuDNN), else those of GPU
   device of this process (cuda_plan_facts, kept in f; asking may start CUDA here). */
const PlanFacts *backend_plan_facts(CudaFacts *f, const char *which, const Env *env, int device);
/* For the backends: opt->weights must be given exactly when the plan's step has shared_weights, and be a backend
   of the same kind (name) and model. */
int backend_check_weights(const BackendOptions *opt, const char *name, Err *err);
/* And opt->cache exactly when the plan fills a cache, a decode backend of the same kind, model and rows, with room
   for the plan's T positions. */
int backend_check_cache(const BackendOptions *opt, const char *name, Err *err);

/* 1 where be's plan runs phase (its step's kind decides), else 0. */
int    backend_runs(const Backend *be, BackendPhase phase);
/* Floats in one read or write of array which (BACKEND_LOGITS: one row); 0 where be's plan keeps no such array. */
size_t backend_array_len(const Backend *be, BackendArray which);
/* For the backends, first thing in run, read and write: what every backend refuses alike (a phase or array the plan
   has not, a read-only array written, an index out of range, an update step below 1, a gradient range outside the
   parameters, a missing argument). */
int backend_check_run(const Backend *be, const BackendRun *r, Err *err);
int backend_check_array(const Backend *be, BackendArray which, size_t index, int write, Err *err);
/* BACKEND_FORWARD_BACKWARD as a BACKEND_FORWARD run, then a BACKEND_BACKWARD run (the CPU backend's) */
int backend_forward_backward(Backend *be, const BackendRun *r, Err *err);
/* The global L2 norm of the gradients: sqrt of BACKEND_GRAD_SUMSQ over [0, num_params). */
int backend_grad_norm(Backend *be, float *norm, Err *err);
#endif
