/* cudnn_attention: causal scaled-dot-product attention (forward with softmax statistics, and backward) through
   cuDNN's backend graph API, from plain C. cuDNN is loaded with dlopen (libcudnn.so.9, or the file named by
   $GPT2GEN_CUDNN_LIBRARY; the value "none" hides it), so the binary runs without it.

   The graphs are cuDNN's composite attention: plain matmul, pointwise, reduction and reshape operations
   (scores = Q.K^T * scale, causal mask from generated row/column indices, softmax with its log-sum-exp,
   P.V; and the matching backward), which cuDNN's fusion engines turn into flash-attention kernels. On
   cuDNN 9.14 and 9.19 this is the only way to get a causal mask: the fused SDPA descriptors have no attribute
   for it. Each shape gets its two execution plans built once, at open; every call reuses them.

   Layouts are the training step's (see tune/attention_ref.h): qkv (B,T,3C) with each token's row
   q|k|v and head h at columns h*HS of each third; out and dout (B,T,C); stats (B,NH,T) fp32 with
   stats[b,h,t] = log sum_{j<=t} exp(q_t.k_j / sqrt(HS)) (natural log), which cuDNN's graph produces as is.
   All pointers must be 16-byte aligned. */
#ifndef GPT2GEN_CUDNN_ATTENTION_H
#define GPT2GEN_CUDNN_ATTENTION_H
#include <stddef.h>
#include "common/err.h"
#include "common/gpt2.h"
#include "runtime/cuda/cuda_api.h"
#include "common/env.h"

typedef struct CudnnAttention CudnnAttention;

/* Loads cuDNN, checks its version, builds and finalizes the forward and backward execution plans for this shape
   once (they are reused for every call); the caller owns the GPU memory they use (the workspace, and the
   backward's fp32 softmax sums). On failure returns NULL and writes one line into why: the library is missing
   (name it), the version is too old, the shape is refused (T, HS), or no engine config finalized (say which graph).
   The library is env's GPT2GEN_CUDNN_LIBRARY (default libcudnn.so.9; "none": refused), and its GPT2GEN_CUDNN_DEBUG=1
   has every engine config tried printed on stderr (env NULL: the defaults).
   deterministic: the backward writes dQ directly, keeping dP in a (B,NH,T,T) 16-bit workspace, so equal inputs
   give equal bits; 0: it accumulates dQ with atomics in a (B,NH,T,HS) fp32 buffer inside the workspace (faster,
   less memory, the last bits differ from run to run: train.deterministic, docs/config.md). */
CudnnAttention *cudnn_attention_open(int B, int T, int NH, int HS, Precision prec, int deterministic, const Env *env,
                                     char *why, size_t why_n);
/* 1 where cuDNN's attention could take this shape and precision at all (bf16 or fp16, T >= 2, head sizes that are
   multiples of 8 up to 256), without loading the library or touching the GPU; else 0 and why (one line).
   cudnn_attention_open refuses the same first. */
int cudnn_attention_takes(int B, int T, int NH, int HS, Precision prec, char *why, size_t why_n);
size_t cudnn_attention_workspace_bytes(const CudnnAttention *a); /* what the larger of the two plans needs */
const char *cudnn_attention_describe(const CudnnAttention *a);   /* e.g. "cuDNN 9.14.0 (libcudnn.so.9)" */
/* qkv (B,T,3C) bf16/fp16, each token's row q|k|v with head h at columns h*HS within each third (C = NH*HS):
   Q, K, V are strided views of it (strides {3*C*T, HS, 3*C, 1} in (b,h,t,d) order), no copies.
   out (B,T,C): head h at columns h*HS. stats (B,NH,T) fp32: the natural-log log-sum-exp of each query row's
   scaled scores, stats[b,h,t] = log sum_{j<=t} exp(q_t.k_j / sqrt(HS)).
   workspace: cudnn_attention_workspace_bytes() of GPU memory, used during the call only. */
int cudnn_attention_forward(CudnnAttention *a, CUstream s, CUdeviceptr out, CUdeviceptr stats, CUdeviceptr qkv,
                            CUdeviceptr workspace, Err *err);
/* dqkv (B,T,3C) is overwritten (dq, dk, dv in qkv's layout), deterministic where opened so. softmax_sum:
   (B,NH,T) fp32 scratch (rowsum(dout * out)). */
int cudnn_attention_backward(CudnnAttention *a, CUstream s, CUdeviceptr dqkv, CUdeviceptr qkv, CUdeviceptr out,
                             CUdeviceptr dout, CUdeviceptr stats, CUdeviceptr softmax_sum, CUdeviceptr workspace,
                             Err *err);
void cudnn_attention_close(CudnnAttention *a);
#endif
