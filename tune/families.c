/* families: the table of each kernel family's workload and test (see families.h). */
#include "tune/families.h"
#include <string.h>

const FamilyEntry tune_families[] = {
    {"encoder", wl_encoder_setup, wl_encoder_run, kernel_test_encoder},
    {"layernorm", wl_layernorm_setup, wl_layernorm_run, kernel_test_layernorm},
    {"bias", wl_bias_setup, wl_bias_run, kernel_test_linear},
    {"attention", wl_attention_setup, wl_attention_run, kernel_test_attention},
    {"gelu", wl_gelu_setup, wl_gelu_run, kernel_test_gelu},
    {"classifier", wl_classifier_setup, wl_classifier_run, kernel_test_classifier},
    {"adamw", wl_adamw_setup, wl_adamw_run, kernel_test_adamw},
    {"grad_norm", wl_grad_norm_setup, wl_grad_norm_run, kernel_test_grad_norm},
    {"decode", wl_decode_setup, wl_decode_run, kernel_test_decode},
    {0},
};

const FamilyEntry *tune_family(const char *family) {
    for (const FamilyEntry *f = tune_families; f->family; f++)
        if (!strcmp(f->family, family)) return f;
    return NULL;
}
