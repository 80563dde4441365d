/* attention: causal self-attention on the GPU without the (B,NH,T,T) scores, through cuDNN's fused flash
   attention (runtime/cuda/cudnn_attention.c) or our template (templates/attention.cu), whichever the plan says
   (gen/plan_attention.c decides, from the facts cuda_plan_facts gives it). Either forward writes the
   output and each query row's log-sum-exp (att_stats[l]); the backward recomputes the probabilities tile by tile
   from them. q, k, v are read in place from the qkv buffer and dq, dk, dv written in place into dqkv: no permutes. */
#include "runtime/cuda/ops.h"
#include <stdio.h>
#include <string.h>

/* The logits buffer is free during the layers' forward (the classifier writes it last) and, past the layers'
   backward scratch that lies inside it, during their backward: cuDNN's workspace goes there when it fits. */
static dptr logits_free_space(const Cuda *c, size_t need) {
    const PlanMemory *mem = &c->plan->memory;
    const PlanBuffer *logits = &mem->buffers[BUF_LOGITS];
    size_t used = 0;
    for (int i = 0; i < BUF_COUNT; i++)
        if (mem->buffers[i].shares == BUF_LOGITS) {
            size_t end = mem->buffers[i].offset + mem->buffers[i].bytes - logits->offset;
            if (end > used) used = end;
        }
    used = (used + MEM_ALIGN - 1) & ~(size_t)(MEM_ALIGN - 1);
    return used + need <= logits->bytes ? c->arena.buf[BUF_LOGITS] + used : 0;
}

/* ", <why> (<origin>)", the plan's reason for the one line (the config's own choice says so in its why) */
static void plan_reason(const Plan *p, char *out, size_t n) {
    if (!strcmp(p->attention_origin, "config")) snprintf(out, n, ", %s", p->attention_why);
    else snprintf(out, n, ", %s (%s)", p->attention_why, p->attention_origin);
}

/* Runs the plan's attention path (decided in the plan: gen/plan_attention.c): cuDNN's where it says ATTN_CUDNN (its
   failure to open here is an error), else the template; one line says which and the plan's reason. */
int attention_open(Cuda *c, Err *err) {
    const Plan *p = c->plan;
    FILE *say = p->step.kind == STEP_TRAIN ? stdout : stderr;   /* sampling's standard output is its text */
    char reason[PLAN_WHY_MAX + 64];
    plan_reason(p, reason, sizeof reason);
    if (p->attention != ATTN_CUDNN) {
        fprintf(say, "attention: flash template (templates/attention.cu)%s\n", reason);
        return 0;
    }
    char why[1024] = "";
    c->cudnn = cudnn_attention_open(p->step.B, p->step.T, c->NH, c->HS, p->step.precision, p->deterministic, c->env,
                                   why, sizeof why);
    if (!c->cudnn)
        return err_set(err, "attention: the plan's cuDNN (%s: %s) did not open here: %s", p->attention_origin,
                       p->attention_why, why);
    size_t ws = cudnn_attention_workspace_bytes(c->cudnn);
    const char *where = "none needed";
    if (ws) {
        c->cudnn_workspace = logits_free_space(c, ws);
        where = "inside the logits buffer";
        if (!c->cudnn_workspace) {
            char what[96];
            snprintf(what, sizeof what, "allocating cuDNN's attention workspace (%zu bytes)", ws);
            if (cuda_check(cu.cuMemAlloc(&c->cudnn_workspace_own, ws), what, err)) { attention_close(c); return -1; }
            c->cudnn_workspace = c->cudnn_workspace_own;
            where = "allocated beside the arena";
        }
    }
    fprintf(say, "attention: %s, workspace %.2f GiB (%s)%s\n", cudnn_attention_describe(c->cudnn), ws / 1073741824.0,
            where, reason);
    return 0;
}

void attention_close(Cuda *c) {
    if (c->cudnn_workspace_own) cu.cuMemFree(c->cudnn_workspace_own);
    cudnn_attention_close(c->cudnn);
    c->cudnn = NULL;
    c->cudnn_workspace = c->cudnn_workspace_own = 0;
}

int attention_forward(Kernels *ks, CudnnAttention *cudnn, dptr workspace, CUstream s, dptr out, dptr stats, dptr qkv,
                      const AttExpand *gqa, Err *err) {
    if (!cudnn) return launch_flash_forward(ks, s, out, stats, qkv, err);
    if (gqa && gqa->x) {
        if (launch_kv_expand(ks, s, gqa->x, qkv, err)) return -1;
        qkv = gqa->x;
    }
    return cudnn_attention_forward(cudnn, s, out, stats, qkv, workspace, err);
}

int attention_backward(Kernels *ks, CudnnAttention *cudnn, dptr workspace, CUstream s, dptr dqkv, dptr qkv, dptr out,
                       dptr dout, dptr stats, dptr ddot, const AttExpand *gqa, Err *err) {
    if (cudnn && gqa && gqa->x)   /* the expanded qkv again (the forward's was a layer's scratch), its gradient summed */
        return launch_kv_expand(ks, s, gqa->x, qkv, err) ||
               cudnn_attention_backward(cudnn, s, gqa->dx, gqa->x, out, dout, stats, ddot, workspace, err) ||
               launch_kv_reduce(ks, s, dqkv, gqa->dx, err) ? -1 : 0;
    if (cudnn) return cudnn_attention_backward(cudnn, s, dqkv, qkv, out, dout, stats, ddot, workspace, err);
    /* dQ first: it also writes the row sums ddot that dK/dV reads */
    return launch_flash_backward_dq(ks, s, dqkv, ddot, qkv, dout, out, stats, err) ||
           launch_flash_backward_dkdv(ks, s, dqkv, qkv, dout, stats, ddot, err) ? -1 : 0;
}

/* PlanFacts.cudnn_attention of cuda_plan_facts (runtime/gpu.h): whether cuDNN's attention opens for plan's step on
   GPU f->device, as attention_open will open it (its primary context current meanwhile, as a backend has it), then
   closed. */
static int cudnn_serves(void *ctx, const Plan *plan, char *why, size_t n) {
    const CudaFacts *f = ctx;
    const GPT2Shape *m = &plan->model;
    const StepShape *st = &plan->step;
    int HS = m->n_embd / m->n_head;
    if (!cudnn_attention_takes(st->B, st->T, m->n_head, HS, st->precision, why, n)) return 0;
    Err err;
    CUdevice dev;
    CUcontext gpu = NULL, before = NULL;
    char what[64];
    snprintf(what, sizeof what, "GPU %d for cuDNN's attention", f->device);
    if (cuda_driver_load(&err) || cuda_check(cu.cuDeviceGet(&dev, f->device), what, &err) ||
        cuda_check(cu.cuDevicePrimaryCtxRetain(&gpu, dev), what, &err)) {
        snprintf(why, n, "%s", err.msg);
        return 0;
    }
    cu.cuCtxGetCurrent(&before);
    CudnnAttention *a = NULL;
    if (cuda_check(cu.cuCtxSetCurrent(gpu), what, &err)) snprintf(why, n, "%s", err.msg);
    else a = cudnn_attention_open(st->B, st->T, m->n_head, HS, st->precision, plan->deterministic, f->env, why, n);
    int serves = a != NULL;
    cudnn_attention_close(a);
    cu.cuCtxSetCurrent(before);
    cu.cuDevicePrimaryCtxRelease(dev);
    return serves;
}

const PlanFacts *cuda_plan_facts(CudaFacts *f, const Env *env, int device) {
    f->env = env;
    f->device = device;
    f->facts.cudnn_attention = cudnn_serves;
    f->facts.ctx = f;
    return &f->facts;
}
