/* tune_api: the CUDA backend as tune/ reaches it (the tuner of `gpt2gen tune` and the kernel tests of `gpt2gen
   test`), and nothing else of the backend: the device and its streams, the plan's kernels and cuBLASLt matmuls,
   cuDNN's attention, the few ops that tune/ runs on buffers of its own (what its tests read of a backend is runtime/gpu.h's).
   The backend's state and its ops (runtime/cuda/ops.h) stay private to runtime/cuda/. */
#ifndef GPT2GEN_CUDA_TUNE_API_H
#define GPT2GEN_CUDA_TUNE_API_H
#include "runtime/gpu.h"
#include "runtime/backend.h"
#include "runtime/cuda/cudnn_attention.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/matmul.h"
#include "gen/plan.h"
#include "kernel_launch.h"
#include <stdint.h>

typedef CUdeviceptr dptr;

/* templates/fc_gemm.cu's two products (launch_fc_gelu_forward, launch_fcproj_dgelu_backward) with the TMA maps of
   their operands made from the pointers and the plan's shape; for the step, the tuner and the kernel tests */
int fc_gemm_forward(Kernels *ks, CUstream s, dptr pre, dptr out, dptr inp, dptr W, dptr bias, Err *err);
int fc_gemm_backward(Kernels *ks, CUstream s, dptr dpre, dptr scratch, dptr dout, dptr wt, dptr pre, Err *err);

/* Grouped-query attention on cuDNN, whose graph takes a k and v head per query head: qkv expanded into x (B,T,3C,
   kv_expand) before it, and the backward's gradient of x (dx, B,T,3C) summed back into dqkv (kv_reduce). NULL, or
   x = 0: qkv as it is (the template reads the key/value heads in place; multi-head attention needs nothing). */
typedef struct { dptr x, dx; } AttExpand;

/* one forward / backward of either attention path (cudnn NULL: the template) on explicit buffers; ddot: (B,NH,T)
   fp32 scratch; qkv and dqkv (B,T,QKVW) */
int attention_forward(Kernels *ks, CudnnAttention *cudnn, dptr workspace, CUstream s, dptr out, dptr stats, dptr qkv,
                      const AttExpand *gqa, Err *err);
int attention_backward(Kernels *ks, CudnnAttention *cudnn, dptr workspace, CUstream s, dptr dqkv, dptr qkv, dptr out,
                       dptr dout, dptr stats, dptr ddot, const AttExpand *gqa, Err *err);

/* Groups the n positions of inp by token for the deterministic wte backward: bucket j is token[j], its
   positions are positions[start[j] .. start[j+1]) in increasing order. count needs Vp+1 entries, token and
   positions n, start n+1. Returns the number of buckets. */
int cuda_encoder_buckets(const int32_t *inp, int n, int Vp, int32_t *count, int32_t *token, int32_t *start, int32_t *positions);
#endif
