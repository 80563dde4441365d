/* cpu_internal: the CPU backend's state, shared by cpu_backend.c (creation, forward, backward, optimizer),
   cpu_step.c (the plan's schedule, op by op) and cpu_decode.c (the decode steps against the key/value cache). */
#ifndef GPT2GEN_CPU_INTERNAL_H
#define GPT2GEN_CPU_INTERNAL_H
#include "runtime/backend.h"
#include "runtime/cpu/cpu_ops.h"

/* Activations of one forward pass; per-layer arrays are stacked over L. */
typedef struct {
    float *encoded;                          /* (BT,C) */
    float *ln1, *ln1_mean, *ln1_rstd;        /* (L,BT,C), (L,BT), (L,BT) */
    float *qkv;                              /* (L,BT,QKV): QKV = (NH + 2 NKV) HS, 3C in GPT-2 */
    float *qkv_pre, *qk_rstd;                /* qk_norm: (L,BT,QKV) before it, (L,BT,NH+NKV) */
    float *atty;                             /* (L,BT,C) attention output before the projection */
    float *preatt;                           /* (B,NH,T,T) scores: scratch, the backward needs only att */
    float *att;                              /* (L,B,NH,T,T) */
    float *tmp;                              /* (BT,C) the attention's and the MLP's projection, before the residual */
    float *residual2;                        /* (L,BT,C) x after attention */
    float *ln2, *ln2_mean, *ln2_rstd;        /* (L,BT,C), (L,BT), (L,BT) */
    float *fch, *fch_gelu;                   /* (L,BT,F): F the MLP's width, 4C in GPT-2 */
    float *fcg;                              /* SwiGLU's gate (L,BT,F) */
    float *residual3;                        /* (L,BT,C) x after the MLP: the layer's output */
    float *lnf, *lnf_mean, *lnf_rstd;        /* (BT,C), (BT), (BT) */
    float *logits;                           /* (BT,Vp) */
    float *losses;                           /* (BT) */
} Acts;

/* Gradient buffers for one layer at a time, reused from layer to layer. */
typedef struct {
    float *dres;                             /* (BT,C) gradient of the residual stream */
    float *dln, *datty;                      /* (BT,C) */
    float *dqkv;                             /* (BT,QKV) */
    float *dpreatt, *datt;                   /* (B,NH,T,T) scratch */
    float *dfch, *dfch_gelu;                 /* (BT,F); dfch_gelu: the GELU backward's scratch */
    float *dfcg;                             /* SwiGLU's gate (BT,F) */
    float *dlogits;                          /* (BT,Vp) */
} Grads;

typedef struct {
    size_t sizes[NUM_PARAM_TENSORS], offsets[NUM_PARAM_TENSORS];
    float *params, *grads, *m, *v;
    int own_params;                          /* 0: params are another backend's (BackendOptions.weights) */
    float *p[NUM_PARAM_TENSORS], *g[NUM_PARAM_TENSORS];   /* views into params and grads */
    Acts a;
    Grads d;
    int32_t *inputs, *targets;
    int have_forward, have_targets;
    /* a decode plan: the key/value cache (L,B,NKV,maxT,HS) each; a prefill plan: the decode backend it fills */
    float *kcache, *vcache;
    int pos;                                 /* a decode step's position */
    Backend *cache_of;
} Cpu;

static inline Cpu *impl(Backend *be) { return (Cpu *)be->impl; }
/* the attention's heads of the model for B rows of T */
static inline CpuHeads cpu_heads(const GPT2Shape *s, int B, int T) {
    return (CpuHeads){B, T, s->n_head, gpt2_kv_heads(s), gpt2_head_size(s)};
}

/* The plan's schedule (gen/schedule.h) on the CPU (cpu_step.c): one op (ctx: a CpuRun), a phase (the forward: from
   c->inputs, or a decode step's tokens at c->pos, to the final LayerNorm, a decode step's to the logits, a prefill's
   keys and values into its decode backend's cache; the backward), a head or tail list. run: the Backend.run whose
   grad_ready the backward's OP_GRAD_READY calls; NULL outside a backward. */
typedef struct { Backend *be; const BackendRun *run; } CpuRun;
int  cpu_run_op(void *ctx, const SchedOp *op, int l, Err *err);
int  cpu_run_phase(Backend *be, const BackendRun *run, const SchedPhase *ph, Err *err);
int  cpu_run_list(Backend *be, const BackendRun *run, const SchedList *list, Err *err);
int  cpu_decode(Backend *be, DecodeRun *run, Err *err);
#endif
