/* families: what tune/ runs for each kernel family, in one table keyed by the family's name (the families are
   declared in gen/kernels.c, kernel_families): its workload for `gpt2gen tune` (its kernels once each, on random
   inputs at the config's shapes: tune/workloads.c) and its test for `gpt2gen test` (its kernels against the CPU
   reference: tune/kernel_tests_*.c). Adding a family is adding its entry here; tests/test_tune.c fails while a
   declared family has none. */
#ifndef GPT2GEN_FAMILIES_H
#define GPT2GEN_FAMILIES_H
#include "tune/workloads.h"

typedef struct {
    const char *family;                                       /* NULL ends the table */
    void (*setup)(Workload *w, Harness *g);                         /* the workload's buffers (w->max_tun set) */
    int  (*run)(Workload *w, Harness *g, Kernels *ks, Err *err);    /* the workload's kernels, once */
    void (*test)(Harness *g);                                       /* the family's GPU tests, one report line each */
    /* NULL where the family's kernels run wherever the plan has them, else why they do not run here (NULL when
       they do): the tuner then has nothing to time */
    const char *(*unavailable)(const Harness *g);
} FamilyEntry;

/* every family's entry, in the order `gpt2gen test` runs their tests */
extern const FamilyEntry tune_families[];
/* family's entry, or NULL when it has none */
const FamilyEntry *tune_family(const char *family);

/* the workloads (tune/workloads.c) */
void wl_encoder_setup(Workload *w, Harness *g);
int  wl_encoder_run(Workload *w, Harness *g, Kernels *ks, Err *err);
void wl_layernorm_setup(Workload *w, Harness *g);
int  wl_layernorm_run(Workload *w, Harness *g, Kernels *ks, Err *err);
void wl_bias_setup(Workload *w, Harness *g);
int  wl_bias_run(Workload *w, Harness *g, Kernels *ks, Err *err);
void wl_attention_setup(Workload *w, Harness *g);
int  wl_attention_run(Workload *w, Harness *g, Kernels *ks, Err *err);
void wl_gelu_setup(Workload *w, Harness *g);
int  wl_gelu_run(Workload *w, Harness *g, Kernels *ks, Err *err);
void wl_fc_gemm_setup(Workload *w, Harness *g);
const char *wl_fc_gemm_unavailable(const Harness *g);
int  wl_fc_gemm_run(Workload *w, Harness *g, Kernels *ks, Err *err);
void wl_classifier_setup(Workload *w, Harness *g);
int  wl_classifier_run(Workload *w, Harness *g, Kernels *ks, Err *err);
void wl_grad_norm_setup(Workload *w, Harness *g);
int  wl_grad_norm_run(Workload *w, Harness *g, Kernels *ks, Err *err);
void wl_adamw_setup(Workload *w, Harness *g);
int  wl_adamw_run(Workload *w, Harness *g, Kernels *ks, Err *err);
void wl_decode_setup(Workload *w, Harness *g);
int  wl_decode_run(Workload *w, Harness *g, Kernels *ks, Err *err);

/* the tests: tune/kernel_tests_rows.c (encoder, layernorm, gelu, classifier), tune/kernel_tests_linear.c (the plan's
   cuBLASLt matmuls and the bias kernels), tune/kernel_tests_attention.c, tune/kernel_tests_optimizer.c (adamw, norm),
   tune/kernel_tests_decode.c (decode: embedding, cache append, split attention, the draw) */
void kernel_test_encoder(Harness *g);
void kernel_test_layernorm(Harness *g);
void kernel_test_linear(Harness *g);
void kernel_test_attention(Harness *g);
void kernel_test_gelu(Harness *g);
void kernel_test_fc_gemm(Harness *g);   /* tune/kernel_tests_linear.c: templates/fc_gemm.cu, skipped where it does not run */
void kernel_test_classifier(Harness *g);
void kernel_test_adamw(Harness *g);
void kernel_test_grad_norm(Harness *g);
void kernel_test_decode(Harness *g);
/* both attention paths against the fp64 reference and each other; timing: also a timing line per path */
void kernel_test_attention_paths(Harness *g, int timing);
#endif
