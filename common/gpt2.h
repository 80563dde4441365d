/* gpt2: the model's shape and parameter layout (docs/model.md, "The model"), shared by every backend. */
#ifndef GPT2GEN_GPT2_H
#define GPT2GEN_GPT2_H
#include <stddef.h>

/* Number format of the weights and activations (the checkpoint stores fp32 or bf16). */
typedef enum { PREC_FP32 = 0, PREC_BF16 = 1, PREC_FP16 = 2 } Precision;

typedef struct {
    int max_seq_len;   /* maxT */
    int vocab_size;    /* V */
    int padded_vocab_size; /* Vp */
    int n_layer;       /* L */
    int n_head;        /* NH */
    int n_embd;        /* C */
    /* The architecture beyond GPT-2's (docs/model.md, "Architectures"); zero in every field is GPT-2, so a shape
       that names its first six fields only (a GPT-2 checkpoint's header) is GPT-2. */
    int norm;          /* NORM_*: LayerNorm (weight and bias) or RMSNorm (weight) */
    int position;      /* POS_*: learned (wpe) or rotary (no wpe) */
    int mlp;           /* MLP_*: GELU, ReLU^2, or SwiGLU (a gate weight beside fcw) */
    int n_kv_head;     /* keys' and values' heads; 0: n_head */
    int n_ffn;         /* the MLP's hidden size; 0: 4 * n_embd */
    int qk_norm;       /* RMSNorm of each head's q and k, with weights (qnormw, knormw) */
    int no_bias;       /* the linear layers have no biases */
    int untied;        /* the classifier has its own weight (lmhead), not wte */
    double norm_eps;   /* 0: 1e-5 */
    double rope_theta; /* 0: 10000 */
    double logit_softcap;  /* logits = cap * tanh(logits / cap); 0: off */
} GPT2Shape;

typedef enum { NORM_LAYERNORM = 0, NORM_RMSNORM } NormKind;
typedef enum { POS_LEARNED = 0, POS_ROPE } PositionKind;
typedef enum { MLP_GELU = 0, MLP_RELU2, MLP_SWIGLU } MlpKind;
/* GPT-2 itself of the shape (a GPT-2 checkpoint's header): an initializer, and a value */
#define GPT2_SHAPE(maxT, V, Vp, L, NH, C) \
    {.max_seq_len = (maxT), .vocab_size = (V), .padded_vocab_size = (Vp), .n_layer = (L), .n_head = (NH), .n_embd = (C)}
static inline GPT2Shape gpt2_shape(int maxT, int V, int Vp, int L, int NH, int C) {
    return (GPT2Shape)GPT2_SHAPE(maxT, V, Vp, L, NH, C);
}
/* the fields' values with their zero defaults resolved */
int    gpt2_kv_heads(const GPT2Shape *s);
int    gpt2_ffn(const GPT2Shape *s);
int    gpt2_head_size(const GPT2Shape *s);
int    gpt2_qkv_width(const GPT2Shape *s);   /* (n_head + 2 n_kv_head) * head size: qkv's features */
float  gpt2_norm_eps(const GPT2Shape *s);
double gpt2_rope_theta(const GPT2Shape *s);
/* QK-norm's op also applies RoPE (gen/schedule.c, templates/rmsnorm.cu: one pass over q and k, no rope op): qk_norm
   with RoPE at a head size that is a multiple of 64, where a lane's channels pair within its own registers */
int    gpt2_qk_norm_rotates(const GPT2Shape *s);
/* 1 if s is GPT-2 itself (every architecture field at GPT-2's value) */
int    gpt2_is_gpt2(const GPT2Shape *s);

/* Parameter tensors in checkpoint order: GPT-2's sixteen (llm.c's order), then those other architectures add. Which
   exist and their sizes follow from the shape, in gpt2_param_sizes alone: a tensor the architecture lacks (wpe with
   RoPE, the biases without bias, the norms' biases with RMSNorm, all of the last six in GPT-2) has size 0. */
enum {
    P_WTE, P_WPE, P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_ATTPROJW, P_ATTPROJB,
    P_LN2W, P_LN2B, P_FCW, P_FCB, P_FCPROJW, P_FCPROJB, P_LNFW, P_LNFB,
    P_QNORMW, P_KNORMW,        /* qk_norm: (L, HS) each */
    P_FCGW, P_FCGB,            /* SwiGLU's gate: (L, F, C), (L, F); fcw is its up projection */
    P_LMHEAD,                  /* untied: the classifier's (Vp, C) */
    NUM_PARAM_TENSORS
};
extern const char *const gpt2_param_names[NUM_PARAM_TENSORS];

/* Element counts of each tensor and their sum. offsets[i] = sum of sizes[0..i). */
size_t gpt2_param_sizes(const GPT2Shape *s, size_t sizes[NUM_PARAM_TENSORS], size_t offsets[NUM_PARAM_TENSORS]);
/* Data parallelism's ZeRO-1 shards of the n parameters among world ranks: rank r's is [*offset, *offset + *count)
   = [r*S, min(n, (r+1)*S)), S = ceil(n/world) rounded up to RANKS_SHARD_ALIGN elements (16-byte vector loads
   and NCCL's chunks start aligned); the last ones may be shorter or empty. Device buffers that collectives cut
   into shards are padded to world*S elements (ranks_padded). */
enum { RANKS_SHARD_ALIGN = 64 };
void   ranks_shard(size_t n, int world, int rank, size_t *offset, size_t *count);
/* The part of rank's shard inside [lo, hi): [*offset, *offset + *count), *count 0 when they do not meet. */
void   ranks_shard_within(size_t n, int world, int rank, size_t lo, size_t hi, size_t *offset, size_t *count);
size_t ranks_padded(size_t n, int world);
/* The parts of the gradients the backward finishes one after another, for averaging them across ranks while it goes
   on: part l (L-1 down to 0) is layer l's slice of every per-layer tensor, part GRAD_PART_REST the tensors that
   serve every layer (wte, wpe, lnfw, lnfb), final at the end. Fills ranges[k] = {first element, end} in checkpoint
   order and returns their count (at most NUM_PARAM_TENSORS); the parts cover every parameter once. */
enum { GRAD_PART_REST = -1 };
int    gpt2_grad_part(const GPT2Shape *s, int part, size_t ranges[][2]);
/* 1 if tensor i has a slice per layer (all but wte, wpe, lnfw, lnfb, lmhead, which serve every layer). */
int    gpt2_param_per_layer(int i);
/* 1 if tensor i gets weight decay (the 2-D weights: wte, wpe, qkvw, attprojw, fcw, fcprojw, fcgw, lmhead). */
int    gpt2_param_decays(int i);
/* Fresh init (docs/model.md, "Init"), seeded: two calls with one seed give identical bits. */
void   gpt2_init_params(const GPT2Shape *s, float *params, unsigned long seed);
/* FLOPs per token for MFU: 6*N + 6*L*C*T. */
double gpt2_flops_per_token(const GPT2Shape *s, int T);
#endif
