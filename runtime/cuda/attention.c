/* attention: causal self-attention on the GPU without the (B,NH,T,T) scores, through cuDNN's fused flash
   attention (runtime/cuda/cudnn_attention.c) or our template (templates/attention.cu). Either forward writes the
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

int attention_open(Cuda *c, Err *err) {
    char why[1024] = "";
    const Plan *p = c->plan;
    AttentionPath want = p->attention;
    int asked = !strcmp(p->attention_origin, "config");   /* the config's explicit choice must be had */
    FILE *say = p->step.kind == STEP_TRAIN ? stdout : stderr;   /* sampling's standard output is its text */
    if (want == ATTN_FLASH) {
        if (!strcmp(p->attention_origin, "auto"))
            fprintf(say, "attention: flash template (templates/attention.cu), attention = \"auto\": both directions on "
                         "Hopper's wgmma, faster than cuDNN's\n");
        else
            fprintf(say, "attention: flash template (templates/attention.cu), as the %s asks\n", asked ? "config" : p->attention_origin);
        return 0;
    }
    c->cudnn = cudnn_attention_open(p->step.B, p->step.T, c->NH, c->HS, p->step.precision, p->deterministic, c->env,
                                   why, sizeof why);
    if (!c->cudnn) {
        if (want == ATTN_CUDNN && asked) return err_set(err, "%s: attention = \"cudnn\", but %s", p->config_path, why);
        fprintf(say, "attention: flash template (templates/attention.cu)%s: %s\n",
               want == ATTN_CUDNN ? ", not the tuning database's cuDNN" : "", why);
        return 0;
    }
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
    fprintf(say, "attention: %s%s, workspace %.2f GiB (%s)\n", cudnn_attention_describe(c->cudnn),
           want == ATTN_AUTO ? " (attention = \"auto\")" : asked ? "" : " (the tuning database's choice)",
           ws / 1073741824.0, where);
    return 0;
}

void attention_close(Cuda *c) {
    if (c->cudnn_workspace_own) cu.cuMemFree(c->cudnn_workspace_own);
    cudnn_attention_close(c->cudnn);
    c->cudnn = NULL;
    c->cudnn_workspace = c->cudnn_workspace_own = 0;
}

int attention_forward(Kernels *ks, CudnnAttention *cudnn, dptr workspace, CUstream s, dptr out, dptr stats, dptr qkv,
                      Err *err) {
    if (cudnn) return cudnn_attention_forward(cudnn, s, out, stats, qkv, workspace, err);
    return launch_flash_forward(ks, s, out, stats, qkv, err);
}

int attention_backward(Kernels *ks, CudnnAttention *cudnn, dptr workspace, CUstream s, dptr dqkv, dptr qkv, dptr out,
                       dptr dout, dptr stats, dptr ddot, Err *err) {
    if (cudnn) return cudnn_attention_backward(cudnn, s, dqkv, qkv, out, dout, stats, ddot, workspace, err);
    /* dQ first: it also writes the row sums ddot that dK/dV reads */
    return launch_flash_backward_dq(ks, s, dqkv, ddot, qkv, dout, out, stats, err) ||
           launch_flash_backward_dkdv(ks, s, dqkv, qkv, dout, stats, ddot, err) ? -1 : 0;
}

int op_attention(Cuda *c, int l, Err *err) {
    OP("attention forward", attention_forward(&c->ks, c->cudnn, c->cudnn_workspace, c->s, buf(c, BUF_ATTY, l),
                                              buf(c, BUF_ATT_STATS, l), buf(c, BUF_QKV, l), err));
    return 0;
}

int op_attention_backward(Cuda *c, int l, Err *err) {
    OP("attention backward", attention_backward(&c->ks, c->cudnn, c->cudnn_workspace, c->s, buf(c, BUF_DQKV, 0),
                                                buf(c, BUF_QKV, l), buf(c, BUF_ATTY, l), buf(c, BUF_DATTY, 0),
                                                buf(c, BUF_ATT_STATS, l), buf(c, BUF_ATT_DDOT, 0), err));
    return 0;
}
