/* spec: the two plain structs a config is read into, and what runtime/ may know of them. ModelSpec: the model,
   everything a checkpoint's header also says. RunSpec: how it is run (training, evaluation, data, checkpoints,
   sampling, and the choices the plans start from). gen/config.h reads a Lua config into them; runtime/ takes a
   RunSpec and the plans (gen/planset.h), never the config. */
#ifndef GPT2GEN_SPEC_H
#define GPT2GEN_SPEC_H
#include "common/err.h"
#include "common/gpt2.h"

typedef enum { SCHED_COSINE = 0, SCHED_LINEAR, SCHED_CONSTANT, SCHED_WSD } Schedule;
/* the GPU attention: cuDNN's flash attention, our template (templates/attention.cu), or cuDNN where it loads and
   accepts the shape, else the template; each plan decides which when it is made (gen/plan_attention.c) */
typedef enum { ATTN_AUTO = 0, ATTN_CUDNN, ATTN_FLASH } AttentionPath;
/* the training step's GELU: in cuBLASLt's epilogues (GELU_AUX_BIAS after the fc matmul, DGELU in the fcproj
   backward), in kernels of ours beside plain bias epilogues (templates/gelu.cu forward, templates/bias.cu's
   gelu_backward_bias_partial backward, with the fc bias gradient in the same pass), split (our forward kernel beside
   the fc matmul's plain bias epilogue, cuBLASLt's DGELU epilogue backward: the DGELU epilogue reads the fc output
   that the plain matmul stores, as it reads the GELU_AUX epilogue's), fused (both fc-shaped matmuls in our own wgmma
   kernels with the GELU, its backward and the fc bias gradient inside: templates/fc_gemm.cu, Hopper in 16 bits), or
   the plan's choice by shape */
typedef enum { GELU_AUTO = 0, GELU_EPILOGUE, GELU_KERNEL, GELU_SPLIT, GELU_FUSED } GeluPath;
/* 1 where path's forward GELU runs in our kernel, else in the fc matmul's epilogue */
static inline int gelu_forward_in_kernel(GeluPath path) { return path == GELU_KERNEL || path == GELU_SPLIT; }
/* 1 where path's backward GELU runs in our kernel (with the fc bias gradient), else in the fcproj dinp's epilogue */
static inline int gelu_backward_in_kernel(GeluPath path) { return path == GELU_KERNEL; }
/* 1 where both fc-shaped matmuls are our fused kernels (templates/fc_gemm.cu), not cuBLASLt's */
static inline int gelu_fused(GeluPath path) { return path == GELU_FUSED; }

#define CONFIG_MAX_TUNABLES 64
#define CONFIG_PATH_MAX 1024   /* path buffers: the config's path, data patterns, checkpoint paths */

typedef struct {
    char family[32];     /* template family, e.g. "layernorm" */
    char name[32];       /* tunable, e.g. "BLOCK_SIZE" */
    int  n_values;       /* 1: fixed value; >1: candidates for `gpt2gen tune` */
    int  values[16];
} ConfigTunable;

/* ModelSpec: the model, everything a checkpoint's header also says (model_spec_from_header). */
typedef enum { MODEL_GPT2 = 0 } ModelArchitecture;
typedef struct {
    ModelArchitecture architecture;       /* model.architecture: "gpt2" (the only one today) */
    int n_layer, n_head, n_embd;
    int max_seq_len;                      /* default 1024 */
    int vocab_size;                       /* default 50257 */
    int padded_vocab_size;                /* derived: vocab_size rounded up to a multiple of 128 */
    Precision precision;                  /* default bf16 */
    /* GPT-2's modern relatives (docs/config.md, "model"); the defaults are GPT-2 */
    NormKind norm;                        /* model.norm: "layernorm" (default) or "rmsnorm" */
    double norm_eps;                      /* default 1e-5 */
    PositionKind position;                /* model.position: "learned" (default) or "rope" */
    double rope_theta;                    /* default 10000 */
    MlpKind mlp;                          /* model.mlp: "gelu" (default), "relu2" or "swiglu" */
    int n_ffn;                            /* the MLP's hidden size; 0 in a config: 4 * n_embd */
    int n_kv_head;                        /* grouped-query attention; 0 in a config: n_head */
    int qk_norm;                          /* default false */
    int bias;                             /* the linear layers' biases; default true */
    int tie_embeddings;                   /* the classifier is wte; default true */
    double logit_softcap;                 /* default 0: off */
} ModelSpec;

/* RunSpec: how the model is run: training, evaluation, data, checkpoints, sampling, and the choices the plans
   start from (attention and GELU paths, tunables, the GPU arch). */
typedef struct {
    AttentionPath attention;              /* default auto */
    struct {
        int batch_size, seq_len;          /* micro-batch B and T */
        long total_batch_size;            /* tokens per optimizer step; default B*T */
        int steps;
        double lr;
        Schedule schedule;
        int warmup;
        double final_lr_frac, weight_decay, grad_clip;
        double beta1, beta2, eps;
        long seed;
        int recompute;                    /* 0 none, 1 recompute GELU, 2 GELU + LayerNorm */
        GeluPath gelu;                    /* default auto */
        int deterministic;                /* default true: equal inputs give equal bits (the GPU attention
                                             backward); false lets cuDNN accumulate dQ with atomics */
        int master_weights;               /* fp32 master copy when precision is 16-bit */
        int overfit_batch;                /* debugging: train on the first batch only */
        int grad_accum;                   /* derived: total_batch_size / (B*T*num_gpus) */
        int num_gpus;                     /* default 1 */
        int zero_stage;                   /* 0: every rank keeps the whole AdamW state; 1 (default): its shard */
        int streams;                      /* the GPU backward's streams: 1, or 2 (default): the weight gradients
                                             on a second stream beside the input-gradient chain */
        int cuda_graph;                   /* the GPU training micro-step recorded once as a CUDA graph and replayed
                                             (default true; runtime/cuda/step.c) */
        double loss_scale;                /* fp16: the initial dynamic loss scale (runtime/train/loss_scale.h) */
        int loss_scale_interval;          /* fp16: clean steps before the loss scale doubles */
    } train;
    struct { char train[CONFIG_PATH_MAX], val[CONFIG_PATH_MAX], tokenizer[CONFIG_PATH_MAX]; } data;
    struct {
        int val_every, val_batches, sample_every, sample_tokens;
        double temperature;
        char hellaswag[CONFIG_PATH_MAX];  /* a multiple-choice evaluation set (runtime/eval/evalset.h), or "" */
        int hellaswag_every;              /* steps between its evaluations; 0: at each validation */
    } eval;
    struct { char dir[CONFIG_PATH_MAX]; int every; char init[CONFIG_PATH_MAX]; int resume; } checkpoint;
    int n_tunables;
    ConfigTunable tunables[CONFIG_MAX_TUNABLES];
    char arch[16];                        /* e.g. "sm_90"; empty: the GPU's, or sm_90 without one */
    /* a decode step of few rows on sm_90: DECODE_KERNELS, a kernel per op of the op list (with programmatic dependent
       launch), or DECODE_PERSISTENT, the whole step in one persistent kernel (templates/decode_step.cu);
       DECODE_LINEARS: the op list on the decode linears at any number of rows (Plan.decode_linear); not a config
       key: `gpt2gen sample --decode` sets it */
    int decode;
} RunSpec;
enum { DECODE_KERNELS = 0, DECODE_PERSISTENT = 1, DECODE_LINEARS = 2 };

const char *precision_name(Precision p);
const char *attention_name(AttentionPath a);
const char *gelu_path_name(GeluPath g);
/* 1 if arch names a GPU target we build for: "sm_" and 2 to 4 digits, at least 70, optionally an "a" suffix. */
int  config_arch_valid(const char *arch);
/* A loss scale is a power of two in [1, LOSS_SCALE_MAX], so scaling and unscaling gradients are exact
   (train.loss_scale, and the scale a resume state holds). */
#define LOSS_SCALE_MAX 16777216.0   /* 2^24 */
int  config_loss_scale_valid(double x);
/* ModelSpec's checks, one function for a config's model and a checkpoint header's: the shapes the templates
   take, the vocabulary the token shards hold, the parameter count; fills padded_vocab_size. Messages start with
   where (the config file, or what names the checkpoint) and name the key. */
int  model_spec_validate(ModelSpec *m, const char *where, Err *err);
/* The model a checkpoint's header says (its shape, in precision), through model_spec_validate. */
int  model_spec_from_header(ModelSpec *m, const GPT2Shape *header, Precision precision, const char *where, Err *err);
GPT2Shape model_spec_shape(const ModelSpec *m);
/* 0 if the GPU's kernels run s (every architecture but a few combinations), else -1 with a message that starts with
   where, names the key they do not cover and points at the CPU backend: the CUDA backend and the GPU build refuse it */
int  model_gpu_check(const GPT2Shape *s, const char *where, Err *err);
const char *model_architecture_name(ModelArchitecture a);
/* The name's precision into *p; -1 when it names none. */
int  precision_parse(const char *name, Precision *p);
/* Every RunSpec key at its default (the schema's, gen/config.c), as a config that sets none has it before
   config_from_specs derives the rest. */
void run_spec_defaults(RunSpec *run);
#endif
