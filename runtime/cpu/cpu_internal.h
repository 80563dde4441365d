/* cpu_internal: the CPU backend's state, shared by cpu_backend.c (creation, forward, backward, optimizer) and
   cpu_decode.c (the decode step against the key/value cache, and the prefill that fills it). */
#ifndef GPT2GEN_CPU_INTERNAL_H
#define GPT2GEN_CPU_INTERNAL_H
#include "runtime/backend.h"
#include "runtime/cpu/cpu_ops.h"

/* Activations of one forward pass; per-layer arrays are stacked over L. */
typedef struct {
    float *encoded;                          /* (BT,C) */
    float *ln1, *ln1_mean, *ln1_rstd;        /* (L,BT,C), (L,BT), (L,BT) */
    float *qkv;                              /* (L,BT,3C) */
    float *atty;                             /* (L,BT,C) attention output before the projection */
    float *preatt;                           /* (B,NH,T,T) scores: scratch, the backward needs only att */
    float *att;                              /* (L,B,NH,T,T) */
    float *attproj;                          /* (L,BT,C) */
    float *residual2;                        /* (L,BT,C) x after attention */
    float *ln2, *ln2_mean, *ln2_rstd;        /* (L,BT,C), (L,BT), (L,BT) */
    float *fch, *fch_gelu;                   /* (L,BT,4C) */
    float *fcproj;                           /* (L,BT,C) */
    float *residual3;                        /* (L,BT,C) x after the MLP: the layer's output */
    float *lnf, *lnf_mean, *lnf_rstd;        /* (BT,C), (BT), (BT) */
    float *logits;                           /* (BT,Vp) */
    float *losses;                           /* (BT) */
} Acts;

/* Gradient buffers for one layer at a time, reused from layer to layer. */
typedef struct {
    float *dres;                             /* (BT,C) gradient of the residual stream */
    float *dln, *datty;                      /* (BT,C) */
    float *dqkv;                             /* (BT,3C) */
    float *dpreatt, *datt;                   /* (B,NH,T,T) scratch */
    float *dfch, *dfch_gelu;                 /* (BT,4C) */
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
    /* a decode plan: the key/value cache (L,B,NH,maxT,HS) each; a prefill plan: the decode backend it fills */
    float *kcache, *vcache;
    int pos;                                 /* a decode step's position */
    Backend *cache_of;
} Cpu;

static inline Cpu *impl(Backend *be) { return (Cpu *)be->impl; }

/* the layers from a->encoded, then the logits (a decode step: its layers against the cache at c->pos; a prefill:
   the cache filled instead of the logits) */
void cpu_forward_rows(Backend *be);
/* a prefill's forward: every layer's keys and values of its T positions into the cache of c->cache_of */
void cpu_prefill_fill(Backend *be);
int  cpu_decode(Backend *be, DecodeRun *run, Err *err);
#endif
