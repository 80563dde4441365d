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
} GPT2Shape;

/* Parameter tensors in checkpoint order. */
enum {
    P_WTE, P_WPE, P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_ATTPROJW, P_ATTPROJB,
    P_LN2W, P_LN2B, P_FCW, P_FCB, P_FCPROJW, P_FCPROJB, P_LNFW, P_LNFB, NUM_PARAM_TENSORS
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
/* 1 if tensor i has a slice per layer (all but wte, wpe, lnfw, lnfb, which serve every layer). */
int    gpt2_param_per_layer(int i);
/* 1 if tensor i gets weight decay (the 2-D weights: wte, wpe, qkvw, attprojw, fcw, fcprojw). */
int    gpt2_param_decays(int i);
/* Fresh init (docs/model.md, "Init"), seeded: two calls with one seed give identical bits. */
void   gpt2_init_params(const GPT2Shape *s, float *params, unsigned long seed);
/* FLOPs per token for MFU: 6*N + 6*L*C*T. */
double gpt2_flops_per_token(const GPT2Shape *s, int T);
#endif
