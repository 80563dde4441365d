/* attention: causal self-attention on the GPU without the (B,NH,T,T) scores (templates/attention.cu): the
   forward writes the output and each query row's log-sum-exp (att_stats[l]); the backward recomputes the
   probabilities tile by tile from them. q, k, v are read in place from the qkv buffer and dq, dk, dv written
   in place into dqkv: no permutes. */
#include "runtime/cuda/ops.h"

int op_attention(Cuda *c, int l, Err *err) {
    OP("attention forward", launch_flash_forward(&c->ks, c->s, buf(c, BUF_ATTY, l), buf(c, BUF_ATT_STATS, l),
                                                 buf(c, BUF_QKV, l), err));
    return 0;
}

int op_attention_backward(Cuda *c, int l, Err *err) {
    dptr qkv = buf(c, BUF_QKV, l), out = buf(c, BUF_ATTY, l), stats = buf(c, BUF_ATT_STATS, l);
    dptr dout = buf(c, BUF_DATTY, 0), dqkv = buf(c, BUF_DQKV, 0), ddot = buf(c, BUF_ATT_DDOT, 0);
    OP("attention backward", launch_flash_backward_dot(&c->ks, c->s, ddot, dout, out, err));
    OP("attention backward", launch_flash_backward_dkdv(&c->ks, c->s, dqkv, qkv, dout, stats, ddot, err));
    OP("attention backward", launch_flash_backward_dq(&c->ks, c->s, dqkv, qkv, dout, stats, ddot, err));
    return 0;
}
