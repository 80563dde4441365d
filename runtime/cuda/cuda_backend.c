/* cuda_backend: the Backend (runtime/backend.h) on one GPU: creation from the plan, Backend.run's dispatch to the
   phases (step.c, optimizer.c, decode.c), and the arrays (parameters, gradients, optimizer state, logits, losses) to
   and from the host. The ops are in the files ops.h lists. */
#include "runtime/cuda/ops.h"
#include "runtime/cuda/nccl.h"
#include "common/fp16.h"
#include <stdlib.h>
#include <string.h>

dptr tensor_at(const Cuda *c, BufferId base, int i, int l) {
    int per_layer = gpt2_param_per_layer(i);
    return buf(c, base, 0) + (c->poff[i] + (per_layer ? (size_t)l * (c->psz[i] / c->L) : 0)) * c->xs;
}

/* Copies between the host and the GPU, in order on the compute stream, and waited for. */
static int to_host(Cuda *c, void *dst, dptr src, size_t bytes, const char *what, Err *err) {
    return cuda_check(cu.cuMemcpyDtoHAsync(dst, src, bytes, c->s), what, err) || cuda_device_sync(&c->dev, what, err) ? -1 : 0;
}
static int to_device(Cuda *c, dptr dst, const void *src, size_t bytes, const char *what, Err *err) {
    return cuda_check(cu.cuMemcpyHtoDAsync(dst, src, bytes, c->s), what, err) || cuda_device_sync(&c->dev, what, err) ? -1 : 0;
}

/* floatX device array <-> fp32 host array (16-bit: rounded to nearest) */
static int download(Cuda *c, float *out, dptr src, size_t n, const char *what, Err *err) {
    if (c->xs == 4) return to_host(c, out, src, n * 4, what, err);
    uint16_t *tmp = xmalloc(n * 2);
    int rc = to_host(c, tmp, src, n * 2, what, err);
    if (!rc) x16_to_f32_array(c->prec == PREC_FP16, out, tmp, n);
    free(tmp);
    return rc;
}
static int upload(Cuda *c, dptr dst, const float *in, size_t n, const char *what, Err *err) {
    if (c->xs == 4) return to_device(c, dst, in, n * 4, what, err);
    uint16_t *tmp = xmalloc(n * 2);
    x16_from_f32_array(c->prec == PREC_FP16, tmp, in, n);
    int rc = to_device(c, dst, tmp, n * 2, what, err);
    free(tmp);
    return rc;
}

/* With master weights the fp32 copy holds the parameters [opt_offset, +opt_count) only (all of them, or this
   rank's ZeRO-1 shard). */
static int write_params(Backend *be, const float *params, Err *err) {
    Cuda *c = cuda_of(be);
    dptr master = buf(c, BUF_MASTER, 0);
    /* padding rows of wte stay zero */
    if (!master) return upload(c, buf(c, BUF_PARAMS, 0), params, c->np, "copying weights to the GPU", err);
    const float *mine = params + be->opt_offset;
    size_t mine_bytes = be->opt_count * 4;
    /* the 16-bit weights as AdamW would write them from these master weights (bf16: stochastic rounding; fp16:
       to nearest), so that a resumed run continues with the same bits */
    if (c->prec == PREC_FP16)
        return upload(c, buf(c, BUF_PARAMS, 0), params, c->np, "copying weights to the GPU", err) ||
               to_device(c, master, mine, mine_bytes, "copying master weights", err) ? -1 : 0;
    uint16_t *tmp = xmalloc(c->np * 2);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)
        for (size_t j = 0; j < c->psz[i]; j++) tmp[c->poff[i] + j] = bf16_from_f32_stochastic(params[c->poff[i] + j], (uint32_t)j);
    int rc = to_device(c, buf(c, BUF_PARAMS, 0), tmp, c->np * 2, "copying weights to the GPU", err);
    free(tmp);
    return rc ? -1 : to_device(c, master, mine, mine_bytes, "copying master weights", err);
}
/* The master weights where this backend has them; under ZeRO-1 the other ranks' parts are the 16-bit weights (as
   the last all-gather left them). */
static int read_params(Backend *be, float *params, Err *err) {
    Cuda *c = cuda_of(be);
    dptr master = buf(c, BUF_MASTER, 0);
    if (master && be->opt_count == c->np) return to_host(c, params, master, c->np * 4, "copying master weights", err);
    if (download(c, params, buf(c, BUF_PARAMS, 0), c->np, "copying weights from the GPU", err)) return -1;
    return master ? to_host(c, params + be->opt_offset, master, be->opt_count * 4, "copying master weights", err) : 0;
}
/* The logits buffer holds a chunk of rows (runtime/cuda/classifier.c): the one holding the row is made from the
   last forward's final LayerNorm when it is not there. */
static int read_logits(Cuda *c, size_t row, float *out, Err *err) {
    size_t R = (size_t)c->plan->classifier_rows;
    if (op_classifier_logits(c, (int)(row / R), err)) return -1;
    return download(c, out, buf(c, BUF_LOGITS, 0) + (row % R) * c->Vp * c->xs, (size_t)c->V, "copying logits", err);
}

static int cu_read(Backend *be, BackendArray which, size_t index, float *out, Err *err) {
    Cuda *c = cuda_of(be);
    if (backend_check_array(be, which, index, 0, err)) return -1;
    switch (which) {
    case BACKEND_PARAMS: return read_params(be, out, err);
    case BACKEND_GRADS: return download(c, out, buf(c, BUF_GRADS, 0), c->np, "copying gradients from the GPU", err);
    case BACKEND_ADAM_M: return to_host(c, out, buf(c, BUF_ADAM_M, 0), be->opt_count * 4, "copying AdamW m", err);
    case BACKEND_ADAM_V: return to_host(c, out, buf(c, BUF_ADAM_V, 0), be->opt_count * 4, "copying AdamW v", err);
    case BACKEND_LOGITS: return read_logits(c, index, out, err);
    case BACKEND_LOSSES:
        if (!c->losses_valid) return err_set(err, "no losses to read: run a forward with targets first");
        memcpy(out, c->h_losses, (size_t)c->plan->step.B * c->plan->step.T * 4);
        return 0;
    default: return err_set(err, "cuda backend: no array %d", (int)which);
    }
}

static int cu_write(Backend *be, BackendArray which, const float *in, Err *err) {
    Cuda *c = cuda_of(be);
    if (backend_check_array(be, which, 0, 1, err)) return -1;
    switch (which) {
    case BACKEND_PARAMS: return write_params(be, in, err);
    case BACKEND_ADAM_M: return to_device(c, buf(c, BUF_ADAM_M, 0), in, be->opt_count * 4, "copying AdamW m", err);
    case BACKEND_ADAM_V: return to_device(c, buf(c, BUF_ADAM_V, 0), in, be->opt_count * 4, "copying AdamW v", err);
    default: return err_set(err, "cuda backend: array %d cannot be written", (int)which);
    }
}

static int cu_run(Backend *be, const BackendRun *r, Err *err) {
    if (backend_check_run(be, r, err)) return -1;
    switch (r->phase) {
    case BACKEND_FORWARD: return cu_forward(be, r->inputs, r->targets, r->loss, err);
    case BACKEND_FORWARD_BACKWARD: return cu_forward_backward(be, r, err);
    case BACKEND_BACKWARD: return cu_backward(be, r, err);
    case BACKEND_DECODE: return cu_decode(be, r->decode, err);
    case BACKEND_ZERO_GRADS: return cu_zero_grad(be, err);
    case BACKEND_GRAD_SUMSQ: return cu_grad_sumsq(be, r->offset, r->count, r->sumsq, err);
    case BACKEND_UPDATE: return cu_update(be, r, err);
    default: return err_set(err, "cuda backend: no phase %d", (int)r->phase);
    }
}

/* the collectives' buffers: the floatX gradients and weights in the arena, as CUdeviceptr */
static void *cu_device_array(Backend *be, BackendArray which) {
    if (which == BACKEND_GRADS && be->plan->step.kind != STEP_TRAIN) return NULL;
    if (which != BACKEND_PARAMS && which != BACKEND_GRADS) return NULL;
    return (void *)(uintptr_t)buf(cuda_of(be), which == BACKEND_PARAMS ? BUF_PARAMS : BUF_GRADS, 0);
}

static void cu_destroy(Backend *be) {
    if (!be) return;
    Cuda *c = cuda_of(be);
    if (c) {
        profile_print(&c->prof, c->plan->step.kind == STEP_DECODE ? "decode" : "training");
        if (c->dev.ctx) {
            cuda_device_use(&c->dev, &(Err){{0}});
            cu.cuStreamSynchronize(c->s);
            profile_free(&c->prof);
        }
        matmuls_destroy(&c->mm);
        step_close(c);
        attention_close(c);
        decode_close(c);
        arena_free(&c->arena);
        kernels_unload(&c->ks);
        cuda_device_close(&c->dev);
        free(c->h_inputs); free(c->h_count); free(c->h_bucket_token); free(c->h_bucket_start); free(c->h_positions);
        free(c->h_losses); free(c->h_partials);
        free(c);
    }
    free(be);
}

/* The parameters this backend updates: all, or (several ranks, ZeRO-1) the shard the plan's buffers were sized
   for (gen/memory.c); none on a forward plan. */
static int set_opt_range(Backend *be, const BackendOptions *opt, const Plan *plan, size_t np, Err *err) {
    size_t cap = plan->memory.buffers[BUF_ADAM_M].bytes / 4;
    be->opt_offset = opt->opt_count ? opt->opt_offset : 0;
    be->opt_count = plan->step.kind != STEP_TRAIN ? 0 : opt->opt_count ? opt->opt_count : np;
    if (be->opt_count > cap || be->opt_offset + be->opt_count > np)
        return err_set(err, "the plan \"%s\" keeps AdamW state for %zu parameters, not [%zu, +%zu) of %zu: rebuild it for "
                       "train.num_gpus = %d, train.zero_stage = %d", plan->name, cap, be->opt_offset, be->opt_count,
                       np, plan->step.ranks, plan->step.zero_stage);
    return 0;
}

static void set_methods(Backend *be, const Plan *plan, size_t np) {
    be->name = "cuda";
    be->plan = plan;
    be->num_params = np;
    be->comm_prec = plan->step.precision;
    be->run = cu_run;
    be->read = cu_read;
    be->write = cu_write;
    be->device_array = cu_device_array;
    be->destroy = cu_destroy;
    if (plan->step.kind == STEP_TRAIN) be->make_comm = comm_nccl_create;   /* a forward or decode: no ranks */
}

Backend *cuda_backend_create(const BackendOptions *opt, Err *err) {
    const Plan *plan = opt->plan;
    if (!plan) { err_set(err, "the CUDA backend needs a plan"); return NULL; }
    if (model_gpu_check(&plan->model, plan->config_path, err)) return NULL;   /* what the kernels do not cover */
    if (backend_check_weights(opt, "cuda", err) || backend_check_cache(opt, "cuda", err)) return NULL;
    Cuda *c = xcalloc(1, sizeof *c);
    Backend *be = xcalloc(1, sizeof *be);
    if (set_opt_range(be, opt, plan, gpt2_param_sizes(&plan->model, c->psz, c->poff), err)) { free(c); free(be); return NULL; }
    be->impl = c;
    be->destroy = cu_destroy;
    c->plan = plan;
    c->env = env_or_defaults(opt->env);
    c->prec = plan->step.precision;
    c->xs = c->prec == PREC_FP32 ? 4 : 2;
    c->C = plan->model.n_embd; c->L = plan->model.n_layer; c->NH = plan->model.n_head; c->HS = c->C / c->NH;
    c->V = plan->model.vocab_size; c->Vp = plan->model.padded_vocab_size;
    c->logits_chunk = -1;
    c->np = gpt2_param_sizes(&plan->model, c->psz, c->poff);
    const PlanBuffer *ws = &plan->memory.buffers[BUF_CUBLASLT_WORKSPACE];
    if (cuda_device_open(&c->dev, opt->device, err) || kernels_load(&c->ks, plan, &c->dev, c->env, err) ||
        arena_alloc(&c->arena, plan, &c->dev, err) ||
        matmuls_init(&c->mm, plan->matmuls, MM_COUNT, c->prec, c->arena.buf[BUF_CUBLASLT_WORKSPACE], ws->bytes, err) ||
        (plan->step.kind == STEP_DECODE ? decode_open(c, err) : attention_open(c, err))) {
        cu_destroy(be);
        return NULL;
    }
    /* a plan with shared weights runs on the other backend's parameters (the same device: its primary context) */
    if (opt->weights) c->arena.buf[BUF_PARAMS] = cuda_of(opt->weights)->arena.buf[BUF_PARAMS];
    /* the key/value cache: a decode plan's own; a prefill fills its decode backend's */
    const Cuda *owner = opt->cache ? cuda_of(opt->cache) : plan->step.kind == STEP_DECODE ? c : NULL;
    if (owner) {
        c->kcache = owner->arena.buf[BUF_KCACHE];
        c->vcache = owner->arena.buf[BUF_VCACHE];
        c->cache_layer_bytes = owner->plan->memory.buffers[BUF_KCACHE].layer_bytes;
    }
    c->s = c->dev.compute;
    c->ks.sync_each = c->env->sync;
    profile_init(&c->prof, c->s, c->env->profile, c->env->queue_profile);
    if (step_open(c, err)) {
        cu_destroy(be);
        return NULL;
    }
    size_t BT = (size_t)plan->step.B * plan->step.T;
    c->h_inputs = xmalloc(BT * 4);
    c->h_count = xmalloc(((size_t)c->Vp + 1) * 4);
    c->h_bucket_token = xmalloc(BT * 4);
    c->h_bucket_start = xmalloc((BT + 1) * 4);
    c->h_positions = xmalloc(BT * 4);
    c->h_losses = xmalloc(BT * 4);
    c->h_partials = xmalloc((size_t)plan->kernels[K_GLOBAL_NORM_SQUARED].dims.grid[0] * 4);
    set_methods(be, plan, c->np);
    return be;
}

size_t cuda_backend_arena_bytes(Backend *be) { return cuda_of(be)->arena.bytes; }
long cuda_backend_graph_runs(Backend *be) { return cuda_of(be)->graph_runs; }
