/* attention_ref: causal scaled-dot-product attention in fp64 for single heads, the reference that both GPU
   attention paths (the flash template and cuDNN) are held to. Layouts are the training step's:
   qkv (B,T,W), each token's row q's NH heads, then k's NKV, then v's NKV (W = (NH + 2 NKV) HS: 3C for multi-head
   attention, NKV = NH), query head h reading key/value head h / (NH/NKV); out and dout (B,T,C);
   stats (B,NH,T) fp32, the natural-log log-sum-exp of the scaled scores of each query row,
   stats[b,h,t] = log sum_{j<=t} exp(s_tj) with s_tj = q_t . k_j / sqrt(HS); dqkv (B,T,W) like qkv, a key/value
   head's dk and dv the sums over its query heads. */
#ifndef GPT2GEN_ATTENTION_REF_H
#define GPT2GEN_ATTENTION_REF_H

typedef struct { int B, T, C, NH, NKV; } AttShape;

/* One query head (b, h): out_h (T,HS) and lse (T); with dout, also dq, and its share of its key/value head's dk
   and dv (T,HS each). NULL outputs are skipped. */
void attention_ref_head(const AttShape *s, const float *qkv, const float *dout, int b, int h, double *out, double *lse,
                        double *dq, double *dk, double *dv);

/* Worst error over the query heads of n key/value heads' groups picked across the batch and heads (first, last and
   spread between), per tensor: max |got - ref| / max |ref| within each head. A NULL got tensor is not compared (its
   error stays 0). */
typedef struct { double out, lse, dq, dk, dv; } AttErr;
void attention_ref_compare(const AttShape *s, const float *qkv, const float *dout, int n, const float *out,
                           const float *stats, const float *dqkv, AttErr *e);
#endif
