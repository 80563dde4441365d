/* harness: what the GPU tests share (tune/kernel_tests.c per kernel, tune/step_test.c for a whole
   step): the device, the plan's kernels and matmuls, device and host buffers, comparisons against the CPU
   reference, and one report line per test ("<config>/<test>", through tune/report.h). */
#ifndef GPT2GEN_HARNESS_H
#define GPT2GEN_HARNESS_H
#include "tune/report.h"
#include "runtime/cuda/tune_api.h"
#include <stdint.h>

typedef struct {
    CudaDevice dev;
    CUstream s;
    Kernels ks;
    Matmuls mm;
    dptr workspace;
    const Config *cfg;
    const Env *env;        /* the GPT2GEN_* settings (NULL: the defaults): the kernel cache, cuDNN */
    const Plan *plan;
    Precision prec;
    size_t xs;
    int B, T, C, NH, HS, L, V, Vp, maxT, BT;
    uint64_t rng;
    double tol;            /* per-kernel tolerance for this precision */
    int nalloc;
    dptr allocs[64];
    int skipped[PLAN_MAX_KERNELS];   /* kernels whose test was skipped at this size (the small configs run it) */
} G;

/* g for cfg and plan on GPU 0 (the plan's shape and precision, tolerance, RNG; env: the GPT2GEN_* settings, NULL
   the defaults): -1 and a skip line when there is none. */
int    harness_open(G *g, const Config *cfg, const struct Plan *plan, const Env *env);
void report_as(G *g, ReportKind kind, const char *name, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
#define ok(g, name, ...) report_as(g, REPORT_OK, name, __VA_ARGS__)
#define fail(g, name, ...) report_as(g, REPORT_FAIL, name, __VA_ARGS__)
#define skip(g, name, ...) report_as(g, REPORT_SKIP, name, __VA_ARGS__)

/* device memory, zeroed, freed together by dfree_all (exits with a message when the GPU has none left) */
dptr   dalloc(G *g, size_t bytes);
void   dfree_all(G *g);
float *hbuf(size_t n);                                 /* zeroed host floats */
void   quantize(G *g, float *x, size_t n);             /* rounds to what floatX holds: GPU and CPU see the same inputs */
float *hrand(G *g, size_t n, float scale);             /* uniform in [-scale, scale), quantized */
int    up(G *g, dptr d, const float *h, size_t n);     /* host fp32 -> device floatX */
int    down(G *g, float *h, dptr d, size_t n);         /* device floatX -> host fp32 */
dptr   dup_x(G *g, const float *h, size_t n);          /* a new floatX device copy */
dptr   dup_raw(G *g, const void *h, size_t bytes);
double relerr(const float *got, const float *ref, size_t n);   /* max |got - ref| / max |ref| */
int    gpu_wait(G *g, Err *err);                           /* waits for the stream (after matmuls) */
/* fills n elements at d with values uniform in [-scale, scale) (floatX, or fp32 when f32) from seed, on the GPU:
   a block of at most 2^22 values made on the host, then repeated (the big buffers of `gpt2gen tune`) */
int    dfill(G *g, dptr d, size_t n, int f32, float scale, uint64_t seed);

/* One comparison inside a test: records the worst error; a failure names the tensor. */
typedef struct { double worst; int bad; char what[256]; } Cmp;
void cmp(Cmp *c, const char *tensor, const float *got, const float *ref, size_t n, double tol);
/* the same for an error computed elsewhere; nonfinite > 0 fails too */
void cmp_value(Cmp *c, const char *tensor, double err, size_t nonfinite, double tol);
void finish(G *g, const char *name, Cmp *c, Err *err, int launch_rc);   /* the test's one report line */

void test_train_step(G *g);                            /* tune/step_test.c */
void test_two_streams(G *g);                           /* tune/step_test.c */
void test_graph(G *g);                                 /* tune/step_test.c */
#endif
