/* kernel_tests_decode_step: the persistent decode step (templates/decode_step.cu, Plan.decode_persistent) against
   the CPU's ops in the op list's order (gen/schedule.c, decode_block), each result rounded to floatX where the op
   list stores it: random weights and a random cache for the positions before pos, the step at pos 0, in the middle
   and at the cache's last position; its logits and the keys and values it appends to every layer's cache. */
#include "tune/families.h"
#include "runtime/cpu/cpu_ops.h"
#include "common/gpt2.h"
#include "common/rng.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    float *params, *kc, *vc;        /* the weights (llm.c's order), the caches (L, B, NH, cacheT, HS) */
    int32_t *tokens;
    size_t off[NUM_PARAM_TENSORS], sz[NUM_PARAM_TENSORS], n_params, cache;
} StepInputs;

static int cache_T(const Harness *g) { return g->plan->step.cache_T > 0 ? g->plan->step.cache_T : g->maxT; }

static void inputs_make(Harness *g, StepInputs *in) {
    GPT2Shape s = g->plan->model;
    in->n_params = gpt2_param_sizes(&s, in->sz, in->off);
    in->params = harness_hrand(g, in->n_params, 0.05f);
    for (int l = 0; l < g->L; l++)   /* LayerNorm weights near 1, as trained ones are */
        for (int i = 0; i < g->C; i++) {
            in->params[in->off[P_LN1W] + (size_t)l * g->C + i] += 1.0f;
            in->params[in->off[P_LN2W] + (size_t)l * g->C + i] += 1.0f;
        }
    for (int i = 0; i < g->C; i++) in->params[in->off[P_LNFW] + i] += 1.0f;
    harness_quantize(g, in->params, in->n_params);
    in->cache = (size_t)g->L * g->B * g->NH * cache_T(g) * g->HS;
    in->kc = harness_hrand(g, in->cache, 1.0f);
    in->vc = harness_hrand(g, in->cache, 1.0f);
    in->tokens = xmalloc((size_t)g->B * sizeof(int32_t));
    for (int b = 0; b < g->B; b++) in->tokens[b] = (int32_t)(rng_next(&g->rng) % (uint64_t)g->V);
}

static void inputs_free(StepInputs *in) {
    free(in->params); free(in->kc); free(in->vc); free(in->tokens);
}

#define W(in, i, l, per) ((in)->params + (in)->off[i] + (size_t)(l) * (per))

/* one layer of the reference on x (B, C), in place; the layer's caches get the keys and values at pos */
static void reference_layer(Harness *g, const StepInputs *in, float *x, float *kc, float *vc, int pos, int l) {
    size_t B = g->B, C = g->C;
    float *ln = harness_hbuf(B * C), *qkv = harness_hbuf(B * 3 * C), *att = harness_hbuf(B * C), *y = harness_hbuf(B * C);
    float *res2 = harness_hbuf(B * C), *fch = harness_hbuf(B * 4 * C), *stats = harness_hbuf(2 * B);
    cpu_layernorm_forward(ln, stats, stats + B, x, W(in, P_LN1W, l, C), W(in, P_LN1B, l, C), (int)B, (int)C);
    harness_quantize(g, ln, B * C);
    cpu_matmul_forward(qkv, ln, W(in, P_QKVW, l, 3 * C * C), W(in, P_QKVB, l, 3 * C), (int)B, (int)C, (int)(3 * C));
    harness_quantize(g, qkv, B * 3 * C);
    cpu_kv_append(kc, vc, qkv, pos, (int)B, 1, (int)C, g->NH, cache_T(g));
    cpu_attention_cached(att, qkv, kc, vc, pos, (int)B, 1, (int)C, g->NH, cache_T(g));
    harness_quantize(g, att, B * C);
    cpu_matmul_forward(y, att, W(in, P_ATTPROJW, l, C * C), W(in, P_ATTPROJB, l, C), (int)B, (int)C, (int)C);
    harness_quantize(g, y, B * C);
    cpu_residual_forward(res2, x, y, B * C);
    harness_quantize(g, res2, B * C);
    cpu_layernorm_forward(ln, stats, stats + B, res2, W(in, P_LN2W, l, C), W(in, P_LN2B, l, C), (int)B, (int)C);
    harness_quantize(g, ln, B * C);
    cpu_matmul_forward(fch, ln, W(in, P_FCW, l, 4 * C * C), W(in, P_FCB, l, 4 * C), (int)B, (int)C, (int)(4 * C));
    cpu_gelu_forward(fch, fch, B * 4 * C);
    harness_quantize(g, fch, B * 4 * C);
    cpu_matmul_forward(y, fch, W(in, P_FCPROJW, l, 4 * C * C), W(in, P_FCPROJB, l, C), (int)B, (int)(4 * C), (int)C);
    harness_quantize(g, y, B * C);
    cpu_residual_forward(x, res2, y, B * C);
    harness_quantize(g, x, B * C);
    free(ln); free(qkv); free(att); free(y); free(res2); free(fch); free(stats);
}

/* the whole step: logits (B, Vp); kc and vc (the whole caches) get every layer's key and value at pos */
static void reference_step(Harness *g, const StepInputs *in, float *kc, float *vc, int pos, float *logits) {
    size_t B = g->B, C = g->C, layer = B * g->NH * cache_T(g) * g->HS;
    float *x = harness_hbuf(B * C), *ln = harness_hbuf(B * C), *stats = harness_hbuf(2 * B);
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < C; i++)
            x[b * C + i] = W(in, P_WTE, 0, 0)[(size_t)in->tokens[b] * C + i] + W(in, P_WPE, 0, 0)[(size_t)pos * C + i];
    harness_quantize(g, x, B * C);
    for (int l = 0; l < g->L; l++) reference_layer(g, in, x, kc + l * layer, vc + l * layer, pos, l);
    cpu_layernorm_forward(ln, stats, stats + B, x, W(in, P_LNFW, 0, 0), W(in, P_LNFB, 0, 0), (int)B, (int)C);
    harness_quantize(g, ln, B * C);
    cpu_matmul_forward(logits, ln, W(in, P_WTE, 0, 0), NULL, (int)B, (int)C, g->Vp);
    harness_quantize(g, logits, B * (size_t)g->Vp);
    free(x); free(ln); free(stats);
}

/* the step's buffers on the GPU: 0 params, 1 tokens, 2 pos, 3 kcache, 4 vcache, 5 x, 6 res2, 7 qkv, 8 atty, 9 fch,
   10 logits, 11 the barrier */
static void gpu_buffers(Harness *g, const StepInputs *in, int pos, dptr *d) {
    size_t B = g->B, C = g->C;
    d[0] = harness_dup_x(g, in->params, in->n_params);
    d[1] = harness_dup_raw(g, in->tokens, B * 4);
    d[2] = harness_dup_raw(g, &pos, 4);
    d[3] = harness_dup_x(g, in->kc, in->cache);
    d[4] = harness_dup_x(g, in->vc, in->cache);
    d[5] = harness_dalloc(g, B * C * g->xs);
    d[6] = harness_dalloc(g, B * C * g->xs);
    d[7] = harness_dalloc(g, B * 3 * C * g->xs);
    d[8] = harness_dalloc(g, B * C * g->xs);
    d[9] = harness_dalloc(g, B * 4 * C * g->xs);
    d[10] = harness_dalloc(g, B * (size_t)g->Vp * g->xs);
    d[11] = harness_dalloc(g, 8);   /* zeroed: the barrier's count starts at 0 */
}

static int launch(Harness *g, Kernels *ks, const dptr *d, Err *err) {
    return launch_decode_step(ks, g->s, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9], d[10], d[11],
                              g->dev.sm_count, err);
}

static void test_at(Harness *g, const StepInputs *in, int pos) {
    size_t B = g->B, V = (size_t)g->Vp;
    dptr d[12];
    gpu_buffers(g, in, pos, d);
    Err err = {{0}};
    int rc = launch(g, &g->ks, d, &err);
    float *kc = xmalloc(in->cache * sizeof(float)), *vc = xmalloc(in->cache * sizeof(float));
    memcpy(kc, in->kc, in->cache * sizeof(float));
    memcpy(vc, in->vc, in->cache * sizeof(float));
    float *ref = harness_hbuf(B * V), *got = harness_hbuf(B * V), *gk = harness_hbuf(in->cache), *gv = harness_hbuf(in->cache);
    reference_step(g, in, kc, vc, pos, ref);
    HarnessCmp c = {0, 0, ""};
    if (!rc && !harness_down(g, got, d[10], B * V) && !harness_down(g, gk, d[3], in->cache) &&
        !harness_down(g, gv, d[4], in->cache)) {
        /* two layers of rounding: the tolerance of a few ops */
        harness_cmp(&c, "logits", got, ref, B * V, 4 * g->tol);
        harness_cmp(&c, "kcache", gk, kc, in->cache, 4 * g->tol);
        harness_cmp(&c, "vcache", gv, vc, in->cache, 4 * g->tol);
    }
    char name[96];
    snprintf(name, sizeof name, "decode_step at position %d of %d (%d rows, %d blocks)", pos, cache_T(g), g->B,
             g->dev.sm_count);
    harness_finish(g, name, &c, &err, rc);
    free(kc); free(vc); free(ref); free(got); free(gk); free(gv);
    harness_dfree_all(g);
}

void kernel_test_decode_step(Harness *g) {
    StepInputs in;
    inputs_make(g, &in);
    int last = cache_T(g) - 1, at[3] = {0, last / 2, last};
    for (int i = 0; i < 3; i++)
        if (i == 0 || at[i] != at[i - 1]) test_at(g, &in, at[i]);
    inputs_free(&in);
}
