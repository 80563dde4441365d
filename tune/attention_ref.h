/* attention_ref: causal scaled-dot-product attention in fp64 for single heads, the reference that both GPU
   attention paths (the flash template and cuDNN) are held to. Layouts are the training step's:
   qkv (B,T,3C), each token's row q|k|v with head h at columns h*HS of each third; out and dout (B,T,C);
   stats (B,NH,T) fp32, the natural-log log-sum-exp of the scaled scores of each query row,
   stats[b,h,t] = log sum_{j<=t} exp(s_tj) with s_tj = q_t . k_j / sqrt(HS); dqkv (B,T,3C) like qkv. */
#ifndef GPT2GEN_ATTENTION_REF_H
#define GPT2GEN_ATTENTION_REF_H

typedef struct { int B, T, C, NH; } AttShape;

/* One head (b, h): out_h (T,HS) and lse (T); with dout, also dq, dk, dv (T,HS each). NULL outputs are skipped. */
void attention_ref_head(const AttShape *s, const float *qkv, const float *dout, int b, int h, double *out, double *lse,
                        double *dq, double *dk, double *dv);

/* Worst error over n heads picked across the batch and heads (first, last and spread between), per tensor:
   max |got - ref| / max |ref| within each head. A NULL got tensor is not compared (its error stays 0). */
typedef struct { double out, lse, dq, dk, dv; } AttErr;
void attention_ref_compare(const AttShape *s, const float *qkv, const float *dout, int n, const float *out,
                           const float *stats, const float *dqkv, AttErr *e);
#endif
