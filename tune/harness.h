/* harness: what the GPU tests share (tune/kernel_tests.c per kernel, tune/step_test.c for a whole
   step): the device, the plan's kernels and matmuls, device and host buffers, comparisons against the CPU
   reference, and one report line per test ("<config>/<test>", through tune/report.h). */
#ifndef GPT2GEN_HARNESS_H
#define GPT2GEN_HARNESS_H
#include "gen/config.h"
#include "tune/report.h"
#include "gen/config.h"
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
} Harness;

/* g for cfg and plan on GPU 0 (the plan's shape and precision, tolerance, RNG; env: the GPT2GEN_* settings, NULL
   the defaults): -1 and a skip line when there is none. */
int    harness_open(Harness *g, const Config *cfg, const struct Plan *plan, const Env *env);
/* g for plan (another of cfg's plans: its shape, precision and tolerance), on the same device */
void   harness_use_plan(Harness *g, const struct Plan *plan);
void harness_report(Harness *g, ReportKind kind, const char *name, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
#define harness_ok(g, name, ...) harness_report(g, REPORT_OK, name, __VA_ARGS__)
#define harness_fail(g, name, ...) harness_report(g, REPORT_FAIL, name, __VA_ARGS__)
#define harness_skip(g, name, ...) harness_report(g, REPORT_SKIP, name, __VA_ARGS__)

/* device memory, zeroed, freed together by dfree_all (exits with a message when the GPU has none left) */
dptr   harness_dalloc(Harness *g, size_t bytes);
void   harness_dfree_all(Harness *g);
float *harness_hbuf(size_t n);                                 /* zeroed host floats */
void   harness_quantize(Harness *g, float *x, size_t n);             /* rounds to what floatX holds: GPU and CPU see the same inputs */
float *harness_hrand(Harness *g, size_t n, float scale);             /* uniform in [-scale, scale), quantized */
int    harness_up(Harness *g, dptr d, const float *h, size_t n);     /* host fp32 -> device floatX */
int    harness_down(Harness *g, float *h, dptr d, size_t n);         /* device floatX -> host fp32 */
dptr   harness_dup_x(Harness *g, const float *h, size_t n);          /* a new floatX device copy */
dptr   harness_dup_raw(Harness *g, const void *h, size_t bytes);
double harness_relerr(const float *got, const float *ref, size_t n);   /* max |got - ref| / max |ref| */
int    harness_wait(Harness *g, Err *err);                           /* waits for the stream (after matmuls) */
/* fills n elements at d with values uniform in [-scale, scale) (floatX, or fp32 when f32) from seed, on the GPU:
   a block of at most 2^22 values made on the host, then repeated (the big buffers of `gpt2gen tune`) */
int    harness_dfill(Harness *g, dptr d, size_t n, int f32, float scale, uint64_t seed);

/* One comparison inside a test: records the worst error; a failure names the tensor. */
typedef struct { double worst; int bad; char what[256]; } HarnessCmp;
void harness_cmp(HarnessCmp *c, const char *tensor, const float *got, const float *ref, size_t n, double tol);
/* the same for an error computed elsewhere; nonfinite > 0 fails too */
void harness_cmp_value(HarnessCmp *c, const char *tensor, double err, size_t nonfinite, double tol);
/* a check that is not an error bound: the first failure is the test's */
void harness_failed(HarnessCmp *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void harness_finish(Harness *g, const char *name, HarnessCmp *c, Err *err, int launch_rc);   /* the test's one report line */

void step_test_train(Harness *g);                            /* tune/step_test.c */
void step_test_two_streams(Harness *g);                           /* tune/step_test.c */
void step_test_graph(Harness *g);                                 /* tune/step_test.c */
#endif
