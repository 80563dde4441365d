/* matmuls: the step's cuBLASLt calls (see matmuls.h), shapes from the plan's model and step. */
#include "gen/matmuls.h"

/* out (N,OC) = inp (N,IC) @ W (OC,IC)^T: D(OC,N) = op(W)(OC,IC) inp(IC,N), W stored (OC,IC) row-major */
static PlanMatmul linear(const char *name, int N, int IC, int OC, int bias, MatmulEpilogue epi, int per_step) {
    return (PlanMatmul){name, OC, N, IC, 1, 0, 1, 0, 0, 0, bias, 0, epi, per_step, {0}};
}
/* dinp (N,IC) = alpha dout (N,OC) @ W (OC,IC): D(IC,N) = W(IC,OC) dout(OC,N) */
static PlanMatmul linear_dinp(const char *name, int N, int IC, int OC, MatmulEpilogue epi, int per_step) {
    return (PlanMatmul){name, IC, N, OC, 0, 0, 1, 0, 0, 0, 0, 0, epi, per_step, {0}};
}
/* dW (OC,IC) += alpha dout^T @ inp: D(IC,OC) = inp(IC,N) dout^T(N,OC) */
static PlanMatmul linear_dw(const char *name, int N, int IC, int OC, int per_step) {
    return (PlanMatmul){name, IC, OC, N, 0, 1, 1, 0, 0, 0, 0, 1, EPI_NONE, per_step, {0}};
}

/* GPT-2's relatives (docs/model.md, "Architectures"): qkv has (NH + 2 NKV) HS features, the MLP F hidden ones (SwiGLU
   two fc matmuls of the one entry, its up and its gate, and their dinp, the second accumulating), biases or none */
void matmuls_plan(PlanMatmul mm[MM_COUNT], const GPT2Shape *model, const StepShape *step, int classifier_rows,
                  GeluPath gelu) {
    int BT = step->B * step->T, C = model->n_embd, L = model->n_layer, QKV = gpt2_qkv_width(model), F = gpt2_ffn(model);
    int bias = !model->no_bias, fc_calls = model->mlp == MLP_SWIGLU ? 2 * L : L;
    mm[MM_QKV] = linear("qkv", BT, C, QKV, bias, EPI_NONE, L);
    mm[MM_ATTPROJ] = linear("attproj", BT, C, C, bias, EPI_NONE, L);
    mm[MM_FCPROJ] = linear("fcproj", BT, F, C, bias, EPI_NONE, L);
    mm[MM_FCPROJ_DW] = linear_dw("fcproj dW", BT, F, C, L);
    mm[MM_FC_DINP] = linear_dinp("fc dinp", BT, C, F, EPI_NONE, fc_calls);
    mm[MM_FC_DW] = linear_dw("fc dW", BT, C, F, fc_calls);
    mm[MM_ATTPROJ_DINP] = linear_dinp("attproj dinp", BT, C, C, EPI_NONE, L);
    mm[MM_ATTPROJ_DW] = linear_dw("attproj dW", BT, C, C, L);
    mm[MM_QKV_DINP] = linear_dinp("qkv dinp", BT, C, QKV, EPI_NONE, L);
    mm[MM_QKV_DW] = linear_dw("qkv dW", BT, C, QKV, L);
    matmuls_set_classifier_rows(mm, model, step, classifier_rows);
    matmuls_set_gelu(mm, model, step, gelu);
    if (step->kind != STEP_TRAIN)   /* a forward calls none of the backward's */
        for (int i = MM_CLASSIFIER_DINP; i < MM_COUNT; i++) mm[i].per_step = 0;
}

void matmuls_set_classifier_rows(PlanMatmul mm[MM_COUNT], const GPT2Shape *model, const StepShape *step, int rows) {
    int C = model->n_embd, Vp = model->padded_vocab_size, chunks = step->B * step->T / rows;
    static const int ids[3] = {MM_CLASSIFIER, MM_CLASSIFIER_DINP, MM_CLASSIFIER_DW};
    MatmulAlgoChoice kept[3];   /* a tuned algorithm stays with its entry (it is used only at its own shape) */
    for (int i = 0; i < 3; i++) kept[i] = mm[ids[i]].algo;
    mm[MM_CLASSIFIER] = linear("classifier", rows, C, Vp, 0, EPI_NONE, chunks);
    mm[MM_CLASSIFIER_DINP] = linear_dinp("classifier dinp", rows, C, Vp, EPI_NONE, step->kind == STEP_TRAIN ? chunks : 0);
    mm[MM_CLASSIFIER_DW] = linear_dw("classifier dW", rows, C, Vp, step->kind == STEP_TRAIN ? chunks : 0);
    for (int i = 0; i < 3; i++) mm[ids[i]].algo = kept[i];
}

double matmul_flops(const PlanMatmul *m) { return 2.0 * m->m * m->n * m->k * m->batch; }

void matmuls_set_gelu(PlanMatmul mm[MM_COUNT], const GPT2Shape *model, const StepShape *step, GeluPath gelu) {
    int BT = step->B * step->T, C = model->n_embd, L = model->n_layer, bwd = step->kind == STEP_TRAIN ? L : 0;
    int F = gpt2_ffn(model), bias = !model->no_bias;
    if (model->mlp != MLP_GELU) {   /* ReLU^2's and SwiGLU's: our kernels beside plain matmuls */
        mm[MM_FC] = linear("fc", BT, C, F, bias, EPI_NONE, model->mlp == MLP_SWIGLU ? 2 * L : L);
        mm[MM_FCPROJ_DINP] = linear_dinp("fcproj dinp", BT, F, C, EPI_NONE, bwd);
        return;
    }
    mm[MM_FC] = gelu_forward_in_kernel(gelu) ? linear("fc", BT, C, F, bias, EPI_NONE, L)
                                             : linear("fc+gelu", BT, C, F, bias, EPI_GELU_AUX, L);
    mm[MM_FCPROJ_DINP] = gelu_backward_in_kernel(gelu) ? linear_dinp("fcproj dinp", BT, F, C, EPI_NONE, bwd)
                                                       : linear_dinp("fcproj dinp+dgelu", BT, F, C, EPI_DGELU, bwd);
    if (gelu_fused(gelu)) mm[MM_FC].per_step = mm[MM_FCPROJ_DINP].per_step = 0;   /* templates/fc_gemm.cu does both */
}
