/* kernel_tests: the per-variant GPU regression tests. Every generated kernel of the plan runs on random inputs and
   is held against the CPU reference op (runtime/cpu/cpu_ops.h); then one full training step of the CUDA
   backend is held against the CPU backend. Prints one line per test: "ok name (max err ...)",
   "FAIL name: why" or "skip name: why". Tolerances: errors are measured relative to the largest reference
   magnitude of the tensor; fp32 allows ~1e-5 (a different summation order), bf16 ~1e-2 (8 mantissa bits).
   `gpt2gen test` runs them through tune_test (tune/tune.h); these are for the test programs. */
#ifndef GPT2GEN_KERNEL_TESTS_H
#define GPT2GEN_KERNEL_TESTS_H
#include "tune/tune.h"
struct Plan;
/* The plan's CUBINs must be built. Returns the number of failed tests (0: all passed or skipped);
   -1 when there is no GPU (the reason printed as a "skip" line). */
/* plan's kernel tests (the families it has; the training step's test for a training plan); the failures, or -1
   without a GPU */
int kernel_tests_run(const Config *cfg, const struct Plan *plan, const Env *env);
/* Only the attention kernels (against the fp64 reference on sampled heads), and their timing. */
int kernel_tests_attention_run(const Config *cfg, const struct Plan *plan, const Env *env);
#endif
