/* attention: causal self-attention on the GPU with the (B,NH,T,T) scores materialized: permutes and softmax
   (templates/attention.cu) around cuBLASLt strided-batched matmuls (the plan's MM_ATT_* entries).
   The scores go straight into att[l] and the softmax runs in place, so the forward needs no (B,NH,T,T)
   scratch; the backward's datt lies in BUF_DATT. */
#include "runtime/cuda/ops.h"

/* q, k, v of (B,NH,T,HS) in a (3, B*T*C) buffer */
static void split3(const Cuda *c, dptr base, dptr *q, dptr *k, dptr *v) {
    size_t third = (size_t)c->B * c->T * c->C * c->xs;
    *q = base;
    *k = base + third;
    *v = base + 2 * third;
}

int op_attention(Cuda *c, int l, Err *err) {
    dptr att = buf(c, BUF_ATT, l), vaccum = buf(c, BUF_VACCUM, 0), q, k, v;
    split3(c, buf(c, BUF_QKVR, 0), &q, &k, &v);
    OP("attn fwd: permutes", launch_attention_permute(&c->ks, c->s, q, k, v, buf(c, BUF_QKV, l), err));
    OP("attn fwd: batched matmuls", matmul_run(&c->mm, MM_ATT_SCORES, c->s, att, k, q, 0, 0, 1.0f, err));
    OP("attn fwd: softmax", launch_attention_softmax_forward(&c->ks, c->s, att, att, err));
    OP("attn fwd: batched matmuls", matmul_run(&c->mm, MM_ATT_VALUES, c->s, vaccum, v, att, 0, 0, 1.0f, err));
    OP("attn fwd: permutes", launch_attention_unpermute(&c->ks, c->s, buf(c, BUF_ATTY, l), vaccum, err));
    return 0;
}

int op_attention_backward(Cuda *c, int l, Err *err) {
    dptr att = buf(c, BUF_ATT, l), datt = buf(c, BUF_DATT, 0), dvaccum = buf(c, BUF_DVACCUM, 0), q, k, v, dq, dk, dv;
    split3(c, buf(c, BUF_QKVR, 0), &q, &k, &v);
    split3(c, buf(c, BUF_DQKVR, 0), &dq, &dk, &dv);
    OP("attn bwd: permutes", launch_attention_permute(&c->ks, c->s, q, k, v, buf(c, BUF_QKV, l), err));
    OP("attn bwd: permutes", launch_attention_unpermute_backward(&c->ks, c->s, dvaccum, buf(c, BUF_DATTY, 0), err));
    /* datt = dvaccum v^T ; dv = att^T dvaccum */
    OP("attn bwd: batched matmuls", matmul_run(&c->mm, MM_ATT_DATT, c->s, datt, v, dvaccum, 0, 0, 1.0f, err));
    OP("attn bwd: batched matmuls", matmul_run(&c->mm, MM_ATT_DV, c->s, dv, dvaccum, att, 0, 0, 1.0f, err));
    OP("attn bwd: softmax", launch_attention_softmax_backward(&c->ks, c->s, datt, datt, att, err));
    /* dq = dpreatt k ; dk = dpreatt^T q */
    OP("attn bwd: batched matmuls", matmul_run(&c->mm, MM_ATT_DQ, c->s, dq, k, datt, 0, 0, 1.0f, err));
    OP("attn bwd: batched matmuls", matmul_run(&c->mm, MM_ATT_DK, c->s, dk, q, datt, 0, 0, 1.0f, err));
    OP("attn bwd: permutes", launch_attention_permute_backward(&c->ks, c->s, buf(c, BUF_DQKV, 0), dq, dk, dv, err));
    return 0;
}
