/* families: the table of each kernel family's workload and test (see families.h). */
#include "tune/families.h"
#include <string.h>

/* forward: the forward kernels' tunables (layernorm's forwards, the attention's forward); groups: see families.h */
const FamilyEntry tune_families[] = {
    {"encoder", wl_encoder_setup, wl_encoder_run, kernel_test_encoder, NULL, NULL, NULL},
    {"layernorm", wl_layernorm_setup, wl_layernorm_run, kernel_test_layernorm, NULL, "BLOCK_SIZE", NULL},
    {"bias", wl_bias_setup, wl_bias_run, kernel_test_linear, NULL, NULL, NULL},
    {"attention", wl_attention_setup, wl_attention_run, kernel_test_attention, NULL, "Q_TILE,KV_TILE,Q_WARP_ROWS,FWD_SM", NULL},
    {"gelu", wl_gelu_setup, wl_gelu_run, kernel_test_gelu, NULL, NULL, NULL},
    {"fc_gemm", wl_fc_gemm_setup, wl_fc_gemm_run, kernel_test_fc_gemm, wl_fc_gemm_unavailable, NULL, NULL},
    {"classifier", wl_classifier_setup, wl_classifier_run, kernel_test_classifier, NULL, NULL, NULL},
    {"adamw", wl_adamw_setup, wl_adamw_run, kernel_test_adamw, NULL, NULL, NULL},
    {"grad_norm", wl_grad_norm_setup, wl_grad_norm_run, kernel_test_grad_norm, NULL, NULL, NULL},
    /* the embedding and the cache append; the split attention and its combine; the draw; the linears */
    {"decode", wl_decode_setup, wl_decode_run, kernel_test_decode, NULL, NULL,
     "BLOCK_SIZE;KV_CHUNK,ATT_THREADS;SAMPLE_THREADS;LIN_THREADS,LIN_COLS"},
    /* the whole decode step of few rows in one kernel */
    {"decode_step", wl_decode_step_setup, wl_decode_step_run, kernel_test_decode_step, NULL, NULL, NULL},
    /* GPT-2's relatives' (in their plans only) */
    {"rmsnorm", wl_rmsnorm_setup, wl_rmsnorm_run, kernel_test_rmsnorm, NULL, "BLOCK_SIZE", NULL},
    {"rope", wl_rope_setup, wl_rope_run, kernel_test_rope, NULL, NULL, NULL},
    {"activation", wl_activation_setup, wl_activation_run, kernel_test_activation, NULL, NULL, NULL},
    {0},
};

const FamilyEntry *tune_family(const char *family) {
    for (const FamilyEntry *f = tune_families; f->family; f++)
        if (!strcmp(f->family, family)) return f;
    return NULL;
}
