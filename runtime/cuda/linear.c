/* linear: the linear layers on the GPU: cuBLASLt matmuls (the plan's entries) with their bias and GELU
   epilogues, the bias gradients (templates/bias.cu) and the elementwise GELU (templates/gelu.cu). A decode step of
   few rows has its own linears (templates/decode.cu, OP_LN_MATMUL and OP_MATMUL_RESIDUAL in step_ops.c). */
#include "runtime/cuda/ops.h"

int op_linear(Cuda *c, int id, dptr out, dptr inp, dptr W, dptr bias, dptr aux, Err *err) {
    return matmul_run(&c->mm, id, c->s, out, W, inp, bias, aux, 1.0f, err);
}

int op_bias_backward(Cuda *c, dptr db, dptr dout, int OC, Err *err) {
    dptr scratch = c->bias_scratch;
    return launch_bias_backward_partial(&c->ks, c->s, scratch, dout, OC, err) ||
           launch_bias_backward_reduce(&c->ks, c->s, db, scratch, OC, err) ? -1 : 0;
}

int op_linear_backward_dinp(Cuda *c, int dinp_id, dptr dinp, dptr dout, dptr W, float alpha, dptr pre, Err *err) {
    return matmul_run(&c->mm, dinp_id, c->s, dinp, W, dout, 0, pre, alpha, err);
}

int op_linear_backward_dw(Cuda *c, int dw_id, dptr dW, dptr dout, dptr inp, float alpha, Err *err) {
    return matmul_run(&c->mm, dw_id, c->s, dW, inp, dout, 0, 0, alpha, err);
}

int op_linear_backward(Cuda *c, int dinp_id, int dw_id, dptr dinp, dptr dW, dptr dout, dptr inp, dptr W, float alpha,
                       dptr pre, Err *err) {
    return op_linear_backward_dinp(c, dinp_id, dinp, dout, W, alpha, pre, err) ||
           op_linear_backward_dw(c, dw_id, dW, dout, inp, alpha, err) ? -1 : 0;
}

int op_gelu_backward_bias(Cuda *c, dptr dinout, dptr pre, dptr db, Err *err) {
    int OC = 4 * c->C;
    dptr scratch = c->bias_scratch;
    return launch_gelu_backward_bias_partial(&c->ks, c->s, scratch, dinout, pre, OC, err) ||
           launch_bias_backward_reduce(&c->ks, c->s, db, scratch, OC, err) ? -1 : 0;
}

/* The TMA map of a row-major (rows, cols) 16-bit matrix at p for templates/fc_gemm.cu (its WARPGROUPS 3 variant):
   boxes of 128 rows x 64 columns in the 128-byte swizzle of the wgmma tiles; rows and columns outside the matrix read
   as zeros and are not written. The other variants take the maps and do not read them. */
static int fc_gemm_map(CUtensorMap *m, const Plan *pl, dptr p, long long rows, long long cols, Err *err) {
    cuuint64_t dim[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, stride[1] = {(cuuint64_t)cols * 2};
    cuuint32_t box[2] = {64, FC_GEMM_TILE_ROWS}, one[2] = {1, 1};
    CUtensorMapDataType type = pl->step.precision == PREC_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    return cuda_check(cu.cuTensorMapEncodeTiled(m, type, 2, (void *)(uintptr_t)p, dim, stride, box, one,
                                                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                      "cuTensorMapEncodeTiled (an operand of templates/fc_gemm.cu)", err);
}

/* the maps of one product's operands: a (B*T, C), b (4C, C), and the epilogue's two (B*T, 4C) tensors */
static int fc_gemm_maps(CUtensorMap m[4], const Plan *pl, dptr a, dptr b, dptr e0, dptr e1, Err *err) {
    long long M = (long long)pl->step.B * pl->step.T, C = pl->model.n_embd;
    return fc_gemm_map(&m[0], pl, a, M, C, err) || fc_gemm_map(&m[1], pl, b, 4 * C, C, err) ||
           fc_gemm_map(&m[2], pl, e0, M, 4 * C, err) || fc_gemm_map(&m[3], pl, e1, M, 4 * C, err) ? -1 : 0;
}

int fc_gemm_forward(Kernels *ks, CUstream s, dptr pre, dptr out, dptr inp, dptr W, dptr bias, Err *err) {
    CUtensorMap m[4];
    return fc_gemm_maps(m, ks->plan, inp, W, pre, out, err) ||
           launch_fc_gelu_forward(ks, s, pre, out, inp, W, bias, &m[0], &m[1], &m[2], &m[3], err) ? -1 : 0;
}

int fc_gemm_backward(Kernels *ks, CUstream s, dptr dpre, dptr scratch, dptr dout, dptr wt, dptr pre, Err *err) {
    CUtensorMap m[4];
    return fc_gemm_maps(m, ks->plan, dout, wt, pre, dpre, err) ||
           launch_fcproj_dgelu_backward(ks, s, dpre, scratch, dout, wt, pre, &m[0], &m[1], &m[2], &m[3], err) ? -1 : 0;
}

int op_fcproj_dgelu_backward(Cuda *c, dptr dpre, dptr dout, dptr W, dptr pre, Err *err) {
    dptr wt = buf(c, BUF_FCPROJ_WT, 0);
    return launch_transpose_fcproj(&c->ks, c->s, wt, W, err) ||
           fc_gemm_backward(&c->ks, c->s, dpre, buf(c, BUF_FC_PARTIALS, 0), dout, wt, pre, err) ? -1 : 0;
}

int op_fc_bias_reduce(Cuda *c, dptr db, Err *err) {
    return launch_fc_bias_reduce(&c->ks, c->s, db, buf(c, BUF_FC_PARTIALS, 0), err);
}

