/* kernel_tests_decode_linear: the decode family's linears of few rows (templates/decode.cu, decode_ln_linear and
   decode_linear_residual) against the host's norm, matmul, activation and residual add; see families.h. */
#include "tune/families.h"
#include "common/gpt2.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/sample/sampling.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the linears of a decode step of few rows against the CPU's norm, matmul, activation and residual add, at the
   shapes of the model's four linears and the classifier (no bias), with its norm (LayerNorm or RMSNorm), its MLP's
   activation (the GELU, ReLU^2, or SwiGLU with the gate's matmul) and its biases or none: decode_ln_linear's out =
   act(norm(inp) @ weight^T + bias), its norm rounded to floatX as the norm kernels store it, the sums rounded before
   ReLU^2 and SwiGLU as the plain step's matmuls store them; decode_linear_residual's out = res + (inp @ weight^T +
   bias), the sum rounded before the add */
typedef struct { const char *name; size_t IC, OC; int ln, bias, act; } DecLinear;

static void ref_linear(Harness *g, const DecLinear *d, float *ref, float *xn, const float *x, const float *const *t, int B) {
    const GPT2Shape *s = &g->plan->model;   /* t: weight, bias, norm weight, norm bias, residual, gate, gate bias */
    size_t IC = d->IC, OC = d->OC, n = (size_t)B * OC;
    float *stats = harness_hbuf(2 * (size_t)B);
    if (d->ln && s->norm == NORM_RMSNORM) cpu_rmsnorm_forward(xn, stats, x, t[2], B, (int)IC, gpt2_norm_eps(s));
    else if (d->ln) cpu_layernorm_forward_eps(xn, stats, stats + B, x, t[2], t[3], B, (int)IC, gpt2_norm_eps(s));
    else memcpy(xn, x, (size_t)B * IC * sizeof(float));
    if (d->ln) harness_quantize(g, xn, (size_t)B * IC);
    cpu_matmul_forward(ref, xn, t[0], d->bias ? t[1] : NULL, B, (int)IC, (int)OC);
    if (d->act == 1 && s->mlp != MLP_GELU) harness_quantize(g, ref, n);
    if (d->act == 1 && s->mlp == MLP_SWIGLU) {
        float *gt = harness_hbuf(n);
        cpu_matmul_forward(gt, xn, t[5], d->bias ? t[6] : NULL, B, (int)IC, (int)OC);
        harness_quantize(g, gt, n);
        cpu_swiglu_forward(ref, ref, gt, n);
        free(gt);
    } else if (d->act == 1 && s->mlp == MLP_RELU2) {
        cpu_relu2_forward(ref, ref, n);
    } else if (d->act == 1) {
        cpu_gelu_forward(ref, ref, n);
    } else if (d->act == 2) {   /* the logits as stored, capped */
        harness_quantize(g, ref, n);
        cpu_softcap_forward(ref, n, (float)s->logit_softcap);
    }
    harness_quantize(g, ref, n);
    if (!d->ln) {
        cpu_residual_forward(ref, t[4], ref, n);
        harness_quantize(g, ref, n);
    }
    free(stats);
}

static void test_linear_one(Harness *g, const DecLinear *d) {
    size_t B = g->B, IC = d->IC, OC = d->OC;
    float *x = harness_hrand(g, B * IC, 1.0f), *t[7] = {harness_hrand(g, OC * IC, 0.05f), harness_hrand(g, OC, 0.1f),
        harness_hrand(g, IC, 1.0f), harness_hrand(g, IC, 0.1f), harness_hrand(g, B * OC, 1.0f),
        harness_hrand(g, OC * IC, 0.05f), harness_hrand(g, OC, 0.1f)};
    size_t n[] = {OC * IC, OC, IC, IC, B * OC, OC * IC, OC};
    harness_quantize(g, x, B * IC);
    for (int k = 0; k < 7; k++) harness_quantize(g, t[k], n[k]);
    float *xn = harness_hbuf(B * IC), *ref = harness_hbuf(B * OC), *got = harness_hbuf(B * OC);
    int swiglu = d->act == 1 && g->plan->model.mlp == MLP_SWIGLU, rms = g->plan->model.norm == NORM_RMSNORM;
    Err err = {{0}};
    dptr dx = harness_dup_x(g, x, B * IC), dw = harness_dup_x(g, t[0], OC * IC), db = d->bias ? harness_dup_x(g, t[1], OC) : 0;
    dptr dout = harness_dalloc(g, B * OC * g->xs);
    int rc;
    if (d->ln)
        rc = launch_decode_ln_linear(&g->ks, g->s, dout, dx, harness_dup_x(g, t[2], IC), rms ? 0 : harness_dup_x(g, t[3], IC),
                                     dw, db, swiglu ? harness_dup_x(g, t[5], OC * IC) : 0,
                                     swiglu && d->bias ? harness_dup_x(g, t[6], OC) : 0, (int)OC, d->act, 0, &err);
    else
        rc = launch_decode_linear_residual(&g->ks, g->s, dout, dx, dw, db, harness_dup_x(g, t[4], B * OC), (int)OC,
                                           (int)IC, &err);
    ref_linear(g, d, ref, xn, x, (const float *const *)t, (int)B);
    HarnessCmp c = {0, 0, ""};
    if (!rc) { harness_down(g, got, dout, B * OC); harness_cmp(&c, "out", got, ref, B * OC, g->tol); }
    char name[96];
    snprintf(name, sizeof name, "%s %s (%zu -> %zu%s)", d->ln ? "decode_ln_linear" : "decode_linear_residual", d->name,
             IC, OC, d->ln && rms ? ", RMSNorm" : "");
    harness_finish(g, name, &c, &err, rc);
    free(x); free(xn); free(ref); free(got);
    for (int k = 0; k < 7; k++) free(t[k]);
    harness_dfree_all(g);
}

/* one greedy step's draw: the classifier with best, then decode_advance at pos 3; each row's token against
   sample_draw's argmax of the logits the kernel stored, in tokens and drawn, best cleared, pos 4 */
static int greedy_step(Harness *g, dptr *d, float *got, int act, HarnessCmp *c, Err *err) {
    size_t B = g->B, Vp = g->Vp;
    int pos = 3, ntok = (int)B * 5, *tok = calloc((size_t)ntok, sizeof(int));
    uint64_t *keys = calloc(B, 8);
    int rc = cu.cuMemcpyHtoD(d[6], &pos, 4) != CUDA_SUCCESS ||
             launch_decode_ln_linear(&g->ks, g->s, d[0], d[1], d[2], d[3], d[4], 0, 0, 0, (int)Vp, act, d[5], err) ||
             launch_decode_advance(&g->ks, g->s, d[6], d[5], d[7], d[8], err) || harness_wait(g, err) ||
             harness_down(g, got, d[0], B * Vp) || cu.cuMemcpyDtoH(tok, d[7], B * 4) != CUDA_SUCCESS ||
             cu.cuMemcpyDtoH(tok + B, d[8], B * 16) != CUDA_SUCCESS || cu.cuMemcpyDtoH(keys, d[5], B * 8) != CUDA_SUCCESS ||
             cu.cuMemcpyDtoH(&pos, d[6], 4) != CUDA_SUCCESS;
    SampleSettings greedy = {0.0f, 0, 1.0f};
    for (size_t b = 0; b < B && !rc; b++) {
        uint64_t rng = 1;
        int want = sample_draw(got + b * Vp, g->V, &greedy, &rng);
        if (tok[b] != want || tok[B + 3 * B + b] != want)
            harness_failed(c, "row %zu: token %d, drawn %d; sample_draw's argmax of the stored logits is %d", b, tok[b],
                           tok[B + 3 * B + b], want);
        if (keys[b])
            harness_failed(c, "row %zu's greedy key is %016llx after decode_advance, not 0", b, (unsigned long long)keys[b]);
    }
    if (!rc && pos != 4) harness_failed(c, "pos 3 became %d", pos);
    rc = rc ? -1 : tok[0];
    free(tok); free(keys);
    return rc;
}

/* the greedy draw inside the classifier (Plan.decode_greedy_fused; templates/decode.cu greedy_key): at the model's
   vocabulary, then again with a copy of row 0's winning weight row at a lower id (at 1 where it won at 0), so that
   two logits tie bit for bit and the lower id must win */
static void test_greedy_draw(Harness *g) {
    const GPT2Shape *s = &g->plan->model;
    size_t B = g->B, C = g->C, Vp = g->Vp;
    float *x = harness_hrand(g, B * C, 1.0f), *w = harness_hrand(g, Vp * C, 0.05f), *lnw = harness_hrand(g, C, 1.0f);
    float *lnb = harness_hrand(g, C, 0.1f), *got = harness_hbuf(B * Vp);
    uint64_t *zero = calloc(B, 8);
    int act = s->logit_softcap > 0 ? 2 : 0;
    Err err = {{0}};
    HarnessCmp c = {0, 0, ""};
    dptr d[9] = {harness_dalloc(g, B * Vp * g->xs), harness_dup_x(g, x, B * C), harness_dup_x(g, lnw, C),
                 s->norm == NORM_RMSNORM ? 0 : harness_dup_x(g, lnb, C), harness_dup_x(g, w, Vp * C),
                 harness_dup_raw(g, zero, B * 8), harness_dalloc(g, 4), harness_dalloc(g, B * 4),
                 harness_dalloc(g, B * 16)};   /* out, x, lnw, lnb, weight, best, pos, tokens, drawn (4 positions) */
    int won = greedy_step(g, d, got, act, &c, &err), rc = won < 0;
    if (!rc) {
        int a = won, lo = a > 0 ? a / 2 : 1, win = a < lo ? a : lo;
        memcpy(w + (size_t)lo * C, w + (size_t)a * C, C * sizeof(float));
        rc = harness_up(g, d[4], w, Vp * C) || (won = greedy_step(g, d, got, act, &c, &err)) < 0;
        if (!rc && got[lo] != got[a]) harness_failed(&c, "row 0's logits at %d and %d differ with equal weight rows", lo, a);
        if (!rc && won != win) harness_failed(&c, "row 0 drew %d; its largest logits tie at %d and %d", won, lo, a);
    }
    harness_finish(g, "decode_ln_linear greedy draw + decode_advance", &c, &err, rc);
    free(x); free(w); free(lnw); free(lnb); free(got); free(zero);
    harness_dfree_all(g);
}

void kernel_test_decode_linear(Harness *g) {
    const GPT2Shape *s = &g->plan->model;
    size_t C = g->C, F = (size_t)gpt2_ffn(s);
    int bias = !s->no_bias;
    static const char *const fc[] = {"fc+gelu", "fc+relu2", "fc+swiglu"};
    const DecLinear shapes[] = {{"qkv", C, (size_t)gpt2_qkv_width(s), 1, bias, 0}, {"attproj", C, C, 0, bias, 0},
                                {fc[s->mlp], C, F, 1, bias, 1}, {"fcproj", F, C, 0, bias, 0},
                                {s->logit_softcap > 0 ? "classifier+softcap" : "classifier", C, (size_t)g->Vp, 1, 0,
                                 s->logit_softcap > 0 ? 2 : 0}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) test_linear_one(g, &shapes[k]);
    test_greedy_draw(g);
}
