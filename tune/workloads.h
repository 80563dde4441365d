/* workloads: each kernel family's kernels run once each, on random inputs at the config's real shapes, for
   `gpt2gen tune` (tune/sweep_kernels.c): every variant runs the same workload, its outputs are held against the default
   variant's, and it is timed. Buffers come from the GPU test harness (harness.h). Each family's workload
   is registered in tune/families.c; a family without one keeps its default variant (tune says so). */
#ifndef GPT2GEN_WORKLOADS_H
#define GPT2GEN_WORKLOADS_H
#include "tune/harness.h"

#define WL_MAX_BUFS 24
#define WL_MAX_OUT 6

/* a buffer of the workload: filled from its seed before each checked run (scale 0: zeroed) */
typedef struct { dptr p; size_t n; int f32; float scale; uint64_t seed; } WlBuf;
/* an output: buffer index; sum: compared as the sum of its values (partial sums whose count varies by variant) */
typedef struct { int buf; int sum; const char *name; } WlOut;

typedef struct Workload {
    const char *family;
    int n_bufs, n_out;
    WlBuf b[WL_MAX_BUFS];
    WlOut out[WL_MAX_OUT];
    int max_tun[FAMILY_MAX_TUNABLES];     /* the largest value of each tunable over the variants to run */
    long long n;                          /* the element count a kernel takes (gelu, norm, adamw) */
    int n_buckets;                        /* encoder */
    struct CudnnAttention *cudnn;         /* attention: cuDNN's path instead of the template (NULL: the template) */
    dptr cudnn_ws;
    int (*run)(struct Workload *w, Harness *g, Kernels *ks, Err *err);
} Workload;

/* The workload of family for g's config; max_tun: the largest value of each tunable over the variants to run
   (scratch buffers are sized for them). -1 when the family has none (why says so). */
int  workload_setup(Workload *w, Harness *g, const char *family, const int *max_tun, char *why, size_t n);
/* Fills every buffer from its seed (the same inputs for every variant). */
int  workload_fill(Workload *w, Harness *g, Err *err);
/* A sample of the outputs as fp32: whole buffers up to 2^22 elements, else 16 evenly spaced windows of 2^18;
   sums as one value. *n gets the count; the caller frees. */
float *workload_sample(Workload *w, Harness *g, size_t *n, Err *err);
#endif
