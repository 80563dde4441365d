/* test_attention: attention against the fp64 reference (tests/gpu/attention_ref.c). On the CPU (CI): the
   reference itself against the CPU backend's attention, so that the GPU paths are held to a reference that is
   checked in turn. */
#include "tests/check.h"
#include "tests/gpu/attention_ref.h"
#include "common/err.h"
#include "common/rng.h"
#include "runtime/cpu/cpu_ops.h"
#include <math.h>
#include <stdlib.h>

static float *rand_buf(uint64_t *rng, size_t n, float scale) {
    float *x = xcalloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(rng) - 1.0f);
    return x;
}

/* the reference against cpu_attention_forward/backward on every head of a small shape, HS 16 */
static void test_reference_vs_cpu_backend(void) {
    AttShape s = {2, 37, 64, 4};
    size_t BT = (size_t)s.B * s.T, natt = (size_t)s.B * s.NH * s.T * s.T;
    uint64_t rng = 42;
    float *qkv = rand_buf(&rng, BT * 3 * s.C, 2.0f), *dout = rand_buf(&rng, BT * s.C, 1.0f);
    float *out = xcalloc(BT * s.C, 4), *preatt = xcalloc(natt, 4), *att = xcalloc(natt, 4);
    float *dqkv = xcalloc(BT * 3 * s.C, 4), *dpre = xcalloc(natt, 4), *datt = xcalloc(natt, 4);
    float *stats = xcalloc((size_t)s.B * s.NH * s.T, 4);
    cpu_attention_forward(out, preatt, att, qkv, s.B, s.T, s.C, s.NH);
    cpu_attention_backward(dqkv, dpre, datt, dout, qkv, att, s.B, s.T, s.C, s.NH);
    /* the CPU backend keeps no statistics: log-sum-exp of its scaled scores, per row */
    for (int bh = 0; bh < s.B * s.NH; bh++)
        for (int t = 0; t < s.T; t++) {
            const float *row = preatt + ((size_t)bh * s.T + t) * s.T;
            double m = -INFINITY, z = 0;
            for (int j = 0; j <= t; j++) m = fmax(m, row[j]);
            for (int j = 0; j <= t; j++) z += exp(row[j] - m);
            stats[(size_t)bh * s.T + t] = (float)(m + log(z));
        }
    AttErr e;
    attention_ref_compare(&s, qkv, dout, s.B * s.NH, out, stats, dqkv, &e);
    CHECK(e.out < 1e-5 && e.lse < 1e-5, "forward: out %.2e lse %.2e", e.out, e.lse);
    CHECK(e.dq < 1e-5 && e.dk < 1e-5 && e.dv < 1e-5, "backward: dq %.2e dk %.2e dv %.2e", e.dq, e.dk, e.dv);
    /* and the comparison notices a wrong value */
    dqkv[(size_t)(s.T - 1) * 3 * s.C + s.C] += 0.5f;
    attention_ref_compare(&s, qkv, dout, s.B * s.NH, out, stats, dqkv, &e);
    CHECK(e.dk > 1e-3, "a changed dk went unnoticed (%.2e)", e.dk);
    free(qkv); free(dout); free(out); free(preatt); free(att); free(dqkv); free(dpre); free(datt); free(stats);
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    RUN(test_reference_vs_cpu_backend);
    return check_summary();
}
