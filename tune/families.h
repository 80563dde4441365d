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
    /* the tunables of the kernels the workload runs in a plan without a backward (a forward, a decode step; the
       workload runs only those there), comma-separated; NULL: every tunable. Such a plan's sweep leaves the others
       at its values. */
    const char *forward;
    /* groups of tunables, ';' between groups, where no kernel of the family depends on two groups (a kernel's time
       is then the same whatever the other groups' values): swept one group at a time, the others at the plan's
       values, then every group's fastest together; NULL: every combination */
    const char *groups;
} FamilyEntry;

/* every family's entry, in the order `gpt2gen test` runs their tests */
extern const FamilyEntry tune_families[];
/* family's entry, or NULL when it has none */
const FamilyEntry *tune_family(const char *family);

/* tune/variants.c: the variants of plan's family fam that tune sweeps, the plan's own values first: every
   combination tune_variants (gen/tune_db.h) allows of the tunables that vary (in a plan without a backward, the
   entry's forward ones), or with the entry's groups, every combination of one group's (the others at the plan's
   values), each variant once. Returns how many (at most max); *refused: the combinations the constraints refused. */
int  tune_sweep_variants(const Plan *plan, int fam, TuneVariant *out, int max, int *refused);
/* For a family with groups, after its sweep: v[0..n) the variants swept (v[0] the plan's own), us their times
   (<= 0: rejected or not timed). *best gets the plan's values with, in each group, those of the group's fastest
   variant (where one is faster than v[0]). Returns 1 when that is a variant not among v (two groups or more
   improved: it is to be timed too), else 0. */
int  tune_group_best(const Plan *plan, int fam, const TuneVariant *v, const double *us, int n, TuneVariant *best);

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
void wl_decode_step_setup(Workload *w, Harness *g);
int  wl_decode_step_run(Workload *w, Harness *g, Kernels *ks, Err *err);
void wl_rmsnorm_setup(Workload *w, Harness *g);
int  wl_rmsnorm_run(Workload *w, Harness *g, Kernels *ks, Err *err);
void wl_rope_setup(Workload *w, Harness *g);
int  wl_rope_run(Workload *w, Harness *g, Kernels *ks, Err *err);
void wl_activation_setup(Workload *w, Harness *g);
int  wl_activation_run(Workload *w, Harness *g, Kernels *ks, Err *err);

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
void kernel_test_decode_linear(Harness *g);   /* tune/kernel_tests_decode_linear.c, called by kernel_test_decode */
void kernel_test_decode_step(Harness *g);   /* tune/kernel_tests_decode_step.c */
/* tune/kernel_tests_arch.c: GPT-2's relatives' families */
void kernel_test_rmsnorm(Harness *g);
void kernel_test_rope(Harness *g);
void kernel_test_activation(Harness *g);
/* both attention paths against the fp64 reference and each other; timing: also a timing line per path */
void kernel_test_attention_paths(Harness *g, int timing);
#endif
