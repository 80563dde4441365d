/* families: the table of each kernel family's workload and test (see families.h). */
#include "tune/families.h"
#include <string.h>

const FamilyEntry tune_families[] = {
    {"encoder", wl_encoder_setup, wl_encoder_run, kernel_test_encoder, NULL},
    {"layernorm", wl_layernorm_setup, wl_layernorm_run, kernel_test_layernorm, NULL},
    {"bias", wl_bias_setup, wl_bias_run, kernel_test_linear, NULL},
    {"attention", wl_attention_setup, wl_attention_run, kernel_test_attention, NULL},
    {"gelu", wl_gelu_setup, wl_gelu_run, kernel_test_gelu, NULL},
    {"fc_gemm", wl_fc_gemm_setup, wl_fc_gemm_run, kernel_test_fc_gemm, wl_fc_gemm_unavailable},
    {"classifier", wl_classifier_setup, wl_classifier_run, kernel_test_classifier, NULL},
    {"adamw", wl_adamw_setup, wl_adamw_run, kernel_test_adamw, NULL},
    {"grad_norm", wl_grad_norm_setup, wl_grad_norm_run, kernel_test_grad_norm, NULL},
    {"decode", wl_decode_setup, wl_decode_run, kernel_test_decode, NULL},
    {0},
};

const FamilyEntry *tune_family(const char *family) {
    for (const FamilyEntry *f = tune_families; f->family; f++)
        if (!strcmp(f->family, family)) return f;
    return NULL;
}
