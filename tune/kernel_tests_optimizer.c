/* kernel_tests_optimizer: the adamw family's update (master weights, the 16-bit roundings the host reproduces) and
   the grad_norm family's squared norm, against the CPU reference (see families.h). */
#include "tune/families.h"
#include "runtime/cpu/cpu_ops.h"
#include "common/fp16.h"
#include "common/rng.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_N = 1000003 };   /* values per test: not a multiple of the vector width */

/* random gradients as the loss scaler leaves them: in fp16 scaled by 1024 (exact) */
static float *gradients(Harness *g, size_t n) {
    float *gr = harness_hrand(g, n, 0.01f);
    if (g->prec == PREC_FP16)
        for (size_t i = 0; i < n; i++) gr[i] *= 1024.0f;
    return gr;
}

/* the bf16 weights gp against the master values got: each one of the two bf16 neighbours of its master value, and
   exactly the host's stochastic rounding */
static void check_bf16_rounding(HarnessCmp *c, const float *got, const float *gp, long long n) {
    /* stochastic rounding: each bf16 weight is one of the two bf16 neighbours of the master value */
    long long off = 0, up_count = 0;
    for (long long i = 0; i < n; i++) {
        uint32_t u; memcpy(&u, &got[i], 4);
        uint32_t down_b = u & 0xffff0000u, up_b = down_b + 0x10000u;
        float fd, fu; memcpy(&fd, &down_b, 4); memcpy(&fu, &up_b, 4);
        if (gp[i] != fd && gp[i] != fu) off++;
        if (gp[i] == fu && fu != fd) up_count++;
    }
    /* and exactly the rounding the host reproduces (common/bf16.h), which resume relies on */
    long long host_diff = 0;
    for (long long i = 0; i < n; i++) host_diff += bf16_to_f32(bf16_from_f32_stochastic(got[i], (uint32_t)i)) != gp[i];
    if (host_diff && !c->bad) { c->bad = 1; snprintf(c->what, sizeof c->what, "%lld bf16 weights differ from the host's stochastic rounding", host_diff); }
    if (off && !c->bad) { c->bad = 1; snprintf(c->what, sizeof c->what, "%lld bf16 weights are not a neighbour of their master value", off); }
    if ((up_count == 0 || up_count == n) && !c->bad) { c->bad = 1; snprintf(c->what, sizeof c->what, "stochastic rounding never / always rounds up"); }
}

void kernel_test_adamw(Harness *g) {
    long long n = OPT_N;
    float *p = harness_hrand(g, (size_t)n, 1.0f), *gr = gradients(g, (size_t)n), *m = harness_hrand(g, (size_t)n, 0.01f), *v = harness_hbuf((size_t)n);
    for (long long i = 0; i < n; i++) v[i] = 1e-4f * rng_uniform(&g->rng);
    float *rp = xmalloc((size_t)n * 4), *rm = xmalloc((size_t)n * 4), *rv = xmalloc((size_t)n * 4);
    memcpy(rp, p, (size_t)n * 4); memcpy(rm, m, (size_t)n * 4); memcpy(rv, v, (size_t)n * 4);
    float lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.5f;
    int step = 3, fp16 = g->prec == PREC_FP16;
    if (fp16) gs /= 1024.0f;   /* grad_scale unscaling the scaled gradients */
    cpu_adamw(rp, gr, rm, rv, (size_t)n, lr, b1, b2, eps, wd, gs, step);
    float bc1 = (float)(1.0 - pow(b1, step)), bc2 = (float)(1.0 - pow(b2, step));
    Err err = {{0}};
    dptr dp = harness_dup_x(g, p, (size_t)n), dg = harness_dup_x(g, gr, (size_t)n), dm = harness_dup_raw(g, m, (size_t)n * 4), dv = harness_dup_raw(g, v, (size_t)n * 4);
    dptr master = g->xs == 2 ? harness_dup_raw(g, p, (size_t)n * 4) : 0;
    /* in two launches cut at an odd index, as a ZeRO-1 shard may cut a tensor: idx0 keeps the rounding's index the
       element's index in the tensor, which the host check below uses */
    long long h = 333331;
    size_t xs = g->xs;
    int rc = launch_adamw_update(&g->ks, g->s, dp, master, dg, dm, dv, h, 0, lr, b1, b2, bc1, bc2, eps, wd, gs, &err) ||
             launch_adamw_update(&g->ks, g->s, dp + h * xs, master ? master + h * 4 : 0, dg + h * xs, dm + h * 4, dv + h * 4,
                                 n - h, h, lr, b1, b2, bc1, bc2, eps, wd, gs, &err);
    HarnessCmp c = {0, 0, ""};
    float *got = harness_hbuf((size_t)n), *gp = harness_hbuf((size_t)n);
    if (!rc) {
        cu.cuMemcpyDtoH(got, dm, (size_t)n * 4); harness_cmp(&c, "m", got, rm, (size_t)n, 1e-5);
        cu.cuMemcpyDtoH(got, dv, (size_t)n * 4); harness_cmp(&c, "v", got, rv, (size_t)n, 1e-5);
        harness_down(g, gp, dp, (size_t)n);
        if (master && fp16) {
            cu.cuMemcpyDtoH(got, master, (size_t)n * 4);
            harness_cmp(&c, "master weights", got, rp, (size_t)n, 1e-5);
            /* fp16 weights: the master value rounded to nearest, exactly as the host rounds it (common/fp16.h),
               which resume relies on */
            long long host_diff = 0;
            for (long long i = 0; i < n; i++) host_diff += fp16_to_f32(fp16_from_f32(got[i])) != gp[i];
            if (host_diff && !c.bad) { c.bad = 1; snprintf(c.what, sizeof c.what, "%lld fp16 weights differ from the host's rounding to nearest", host_diff); }
        } else if (master) {
            cu.cuMemcpyDtoH(got, master, (size_t)n * 4);
            harness_cmp(&c, "master weights", got, rp, (size_t)n, 1e-5);
            check_bf16_rounding(&c, got, gp, n);
        } else {
            harness_cmp(&c, "params", gp, rp, (size_t)n, 1e-5);
        }
    }
    harness_finish(g, fp16 ? "adamw_update (fp32 master, scaled gradients, rounding to nearest)" :
              g->xs == 2 ? "adamw_update (fp32 master, stochastic rounding)" : "adamw_update", &c, &err, rc);
    free(p); free(gr); free(m); free(v); free(rp); free(rm); free(rv); free(got); free(gp);
    harness_dfree_all(g);
}

void kernel_test_grad_norm(Harness *g) {
    long long n = OPT_N;
    float *gr = gradients(g, (size_t)n);
    Err err = {{0}};
    dptr dg = harness_dup_x(g, gr, (size_t)n);
    unsigned grid = g->plan->kernels[K_GLOBAL_NORM_SQUARED].dims.grid[0];
    dptr parts = harness_dalloc(g, (size_t)grid * 4);
    int rc = launch_global_norm_squared(&g->ks, g->s, parts, dg, n, &err);
    HarnessCmp c = {0, 0, ""};
    if (!rc) {
        float *hp = harness_hbuf(grid);
        cu.cuMemcpyDtoH(hp, parts, (size_t)grid * 4);
        double s = 0, r = 0;
        for (unsigned i = 0; i < grid; i++) s += hp[i];
        for (long long i = 0; i < n; i++) r += (double)gr[i] * gr[i];
        float fs = (float)sqrt(s), fr = (float)sqrt(r);
        harness_cmp(&c, "norm", &fs, &fr, 1, 1e-5);
        free(hp);
    }
    harness_finish(g, "global_norm_squared", &c, &err, rc);
    free(gr);
    harness_dfree_all(g);
}
