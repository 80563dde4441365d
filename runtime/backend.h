/* backend: what the training loop and sampling need from a device. The loop (runtime/train/train.c) is written
   once against this; runtime/cpu/ is the reference, runtime/cuda/ runs the generated kernels.
   A backend is made from one plan (gen/plan.h) and runs that plan's step: its model, B, T and precision are the
   plan's, and a forward plan's backend has no backward. Host arrays are fp32 in checkpoint order. */
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
typedef struct DecodeRun DecodeRun;  /* runtime/sample/sampling.h: the arguments of one Backend.decode */

struct Backend {
    const char *name;                 /* "cpu" or "cuda" */
    const Plan *plan;                 /* what it runs: plan->model, plan->step (B, T, ...) */
    size_t num_params;
    /* The parameters whose AdamW state (m, v; master weights on a 16-bit model) this backend keeps and updates:
       all of them (0, num_params), or under ZeRO-1 this rank's shard (runtime/ranks/ranks.h). */
    size_t opt_offset, opt_count;
    void *impl;

    /* A forward plan's backend has forward, get_logits, get_losses, set_params, get_params and destroy, a decode
       plan's decode instead of forward and get_losses; a training plan's all of them. */
    /* Parameters from/to the host (fp32, checkpoint order). With a 16-bit model, set writes both the
       16-bit weights and the fp32 master copy; get returns the master copy when there is one. */
    int   (*set_params)(Backend *, const float *params, Err *err);
    int   (*get_params)(Backend *, float *params, Err *err);
    /* Forward over inputs (B*T token ids). With targets, returns the mean loss in *loss; without, only logits. A
       prefill plan's forward (step.fills_cache) writes every layer's keys and values of positions 0..T-1 into its
       cache backend's cache instead, and keeps no logits. */
    int   (*forward)(Backend *, const int32_t *inputs, const int32_t *targets, float *loss, Err *err);
    /* Probabilities are not needed: copies logits[b, t, 0..V) of the last forward to out (fp32); on a decode
       plan's backend, row b's logits of the last step run (t = 0). */
    int   (*get_logits)(Backend *, int b, int t, float *out, Err *err);
    /* Copies the B*T losses of the last forward with targets (row b, position t at b*T+t: -log p(target)) to out;
       the mean of them is forward's *loss. For evaluation (runtime/eval/evaluate.h). */
    int   (*get_losses)(Backend *, float *out, Err *err);
    /* A decode plan's backend (STEP_DECODE; NULL on the others): runs run->steps steps; returns the steps done (their
       tokens are in run->drawn), or -1. */
    int   (*decode)(Backend *, DecodeRun *run, Err *err);
    int   (*zero_grad)(Backend *, Err *err);
    /* Backward of the last forward (which had targets); adds grad_scale * d(mean loss)/d(params) to the
       gradients. The loop passes 1/grad_accum. */
    int   (*backward)(Backend *, float grad_scale, Err *err);
    /* A training micro-step: forward with targets (*loss its mean loss), then backward with grad_scale; the same
       results as the two calls. The CUDA backend makes each chunk of logits once here, their loss and gradient
       together, where forward then backward makes them twice (it keeps no B*T x Vp logits). The CPU backend's is
       backend_forward_backward. */
    int   (*forward_backward)(Backend *, const int32_t *inputs, const int32_t *targets, float grad_scale, float *loss,
                              Err *err);
    /* Global L2 norm of the accumulated gradients. */
    int   (*grad_norm)(Backend *, float *norm, Err *err);
    /* AdamW step number `step` (1-based, for bias correction), gradients multiplied by grad_scale first
       (clipping), on the parameters [opt_offset, opt_offset+opt_count) only. Weight decay only on the tensors
       gpt2_param_decays() names. */
    int   (*update)(Backend *, float lr, float beta1, float beta2, float eps, float weight_decay,
                    float grad_scale, int step, Err *err);
    /* Gradients (num_params) and optimizer state (opt_count each: m, v of the parameters this backend updates)
       to/from the host (fp32), for tests and resume. */
    int   (*get_grads)(Backend *, float *grads, Err *err);
    int   (*get_opt_state)(Backend *, float *m, float *v, Err *err);
    int   (*set_opt_state)(Backend *, const float *m, const float *v, Err *err);
    /* For several ranks (runtime/ranks/ranks.h). The buffers of num_params (padded to ranks_padded on the GPU) that
       the collectives average (gradients) and gather (parameters), in the number format comm_prec: fp32 host
       memory on the CPU backend, floatX device memory (a CUdeviceptr) on the GPU. grad_sumsq: the sum of squares
       of gradients [offset, offset+n) in fp64, summed in a fixed order (grad_norm is sqrt of the whole range's). */
    Precision comm_prec;
    /* Called by backward as each part of the gradients is final (gpt2_grad_part: layer L-1 down to 0, then
       GRAD_PART_REST), so that their averaging across ranks overlaps the rest of the backward; a non-zero return
       stops the backward. NULL: not called. */
    int  (*grad_ready)(void *ctx, int part, Err *err);
    void *grad_ready_ctx;
    void *(*grad_buffer)(Backend *);
    void *(*param_buffer)(Backend *);
    int   (*grad_sumsq)(Backend *, size_t offset, size_t n, double *sumsq, Err *err);
    /* Joins a world of ranks that are processes, one per backend, as rank `rank`; id is the world's (made by the
       launcher: NCCL's unique id on the GPU, runtime/ranks/comm_socket.h's on the CPU), timeout_s bounds every
       wait on the others. The collectives run on this backend's buffers (NCCL's on its GPU). NULL + err if not. */
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
       that outlives this one (set_params and get_params then reach its parameters) */
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
/* forward_backward as forward, then backward */
int backend_forward_backward(Backend *be, const int32_t *inputs, const int32_t *targets, float grad_scale, float *loss,
                             Err *err);
/* And opt->cache exactly when the plan fills a cache, a decode backend of the same kind, model and rows, with room
   for the plan's T positions. */
int backend_check_cache(const BackendOptions *opt, const char *name, Err *err);
#endif
