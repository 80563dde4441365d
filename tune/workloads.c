/* workloads: every kernel family's kernels once, at the config's shapes (see workloads.h); tune/families.c
   registers each family's. */
#include "tune/families.h"
#include "runtime/cuda/tune_api.h"
#include "common/rng.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int wbuf(Workload *w, Harness *g, size_t n, int f32, float scale) {
    WlBuf *b = &w->b[w->n_bufs];
    b->n = n;
    b->f32 = f32;
    b->scale = scale;
    b->seed = 0x9e3779b97f4a7c15ull * (uint64_t)(w->n_bufs + 1);
    b->p = harness_dalloc(g, n * (f32 ? 4 : g->xs));
    return w->n_bufs++;
}
/* a buffer filled once, here, from host data (token ids, buckets): not refilled */
static int fixed(Workload *w, Harness *g, const void *h, size_t bytes) {
    WlBuf *b = &w->b[w->n_bufs];
    memset(b, 0, sizeof *b);
    b->p = harness_dup_raw(g, h, bytes);
    return w->n_bufs++;
}
static void out(Workload *w, int b, const char *name) { w->out[w->n_out++] = (WlOut){b, 0, name}; }
static dptr P(const Workload *w, int i) { return w->b[i].p; }
/* a plan without a backward (a forward, a decode step): its workloads run the forward kernels only, whose tunables
   the families' entries name (families.c, FamilyEntry.forward) */
static int forward_only(const Harness *g) { return g->plan->step.kind != STEP_TRAIN; }

/* ---- encoder: forward, backward into wpe and wte (a forward: the forward) ---- */
int wl_encoder_run(Workload *w, Harness *g, Kernels *ks, Err *err) {
    if (forward_only(g)) return launch_encoder_forward(ks, g->s, P(w, 0), P(w, 1), P(w, 2), P(w, 3), err);
    return launch_encoder_forward(ks, g->s, P(w, 0), P(w, 1), P(w, 2), P(w, 3), err) ||
           launch_encoder_backward_wpe(ks, g->s, P(w, 6), P(w, 4), err) ||
           launch_encoder_backward_wte(ks, g->s, P(w, 5), P(w, 4), P(w, 7), P(w, 8), P(w, 9), w->n_buckets, err) ? -1 : 0;
}
void wl_encoder_setup(Workload *w, Harness *g) {
    size_t BT = g->BT, C = g->C;
    int32_t *tok = xmalloc(BT * 4), *count = xmalloc(((size_t)g->Vp + 1) * 4), *bt = xmalloc(BT * 4),
            *bs = xmalloc((BT + 1) * 4), *pos = xmalloc(BT * 4);
    uint64_t seed = 42;
    for (size_t i = 0; i < BT; i++) tok[i] = (int32_t)(rng_next(&seed) % (uint64_t)g->V);
    w->n_buckets = cuda_encoder_buckets(tok, (int)BT, g->Vp, count, bt, bs, pos);
    out(w, wbuf(w, g, BT * C, 0, 0), "out");                 /* 0 */
    fixed(w, g, tok, BT * 4);                               /* 1 */
    wbuf(w, g, (size_t)g->Vp * C, 0, 1);                     /* 2 wte */
    wbuf(w, g, (size_t)g->maxT * C, 0, 1);                   /* 3 wpe */
    wbuf(w, g, BT * C, 0, 1);                                /* 4 dout */
    out(w, wbuf(w, g, (size_t)g->Vp * C, 0, 0), "dwte");     /* 5 */
    out(w, wbuf(w, g, (size_t)g->maxT * C, 0, 0), "dwpe");   /* 6 */
    fixed(w, g, bt, BT * 4);                                /* 7 */
    fixed(w, g, bs, (BT + 1) * 4);                          /* 8 */
    fixed(w, g, pos, BT * 4);                               /* 9 */
    free(tok); free(count); free(bt); free(bs); free(pos);
}

/* ---- layernorm: forward, residual + forward, backward and its reduction (a forward: the two forwards) ---- */
int wl_layernorm_run(Workload *w, Harness *g, Kernels *ks, Err *err) {
    if (launch_layernorm_forward(ks, g->s, P(w, 4), P(w, 5), P(w, 6), P(w, 0), P(w, 2), P(w, 3), err) ||
        launch_fused_residual_layernorm_forward(ks, g->s, P(w, 7), P(w, 4), P(w, 5), P(w, 6), P(w, 0), P(w, 1), P(w, 2),
                                                P(w, 3), err))
        return -1;
    if (forward_only(g)) return 0;
    return launch_layernorm_backward(ks, g->s, P(w, 9), P(w, 12), 0, P(w, 8), P(w, 7), P(w, 2), P(w, 3), P(w, 5), P(w, 6),
                                     err) ||
           launch_layernorm_backward_reduce(ks, g->s, P(w, 10), P(w, 11), P(w, 12), err) ? -1 : 0;
}
void wl_layernorm_setup(Workload *w, Harness *g) {
    size_t N = g->BT, C = g->C;
    wbuf(w, g, N * C, 0, 2); wbuf(w, g, N * C, 0, 2);         /* 0, 1: inputs */
    wbuf(w, g, C, 0, 1); wbuf(w, g, C, 0, 1);                 /* 2, 3: weight, bias */
    out(w, wbuf(w, g, N * C, 0, 0), "out");                  /* 4 */
    out(w, wbuf(w, g, N, 1, 0), "mean");                     /* 5 */
    wbuf(w, g, N, 1, 0);                                     /* 6 rstd */
    out(w, wbuf(w, g, N * C, 0, 0), "residual");             /* 7 */
    wbuf(w, g, N * C, 0, 1);                                 /* 8 dout */
    out(w, wbuf(w, g, N * C, 0, 0), "dinp");                 /* 9 */
    out(w, wbuf(w, g, C, 0, 0), "dweight");                  /* 10 */
    out(w, wbuf(w, g, C, 0, 0), "dbias");                    /* 11 */
    wbuf(w, g, 512 * 2 * C, 1, 0);                           /* 12 scratch: BWD_BLOCKS <= 512 */
}

/* ---- matmul: the bias gradients of the three widths of the model, and the GELU backward with the fc bias
   gradient (in place: repeated for timing, its values drift, which leaves the bytes and the work as they are) ---- */
int wl_bias_run(Workload *w, Harness *g, Kernels *ks, Err *err) {
    for (int i = 0; i < 3; i++) {
        int OC = (i == 0 ? 1 : i == 1 ? 3 : 4) * g->C;
        if (launch_bias_backward_partial(ks, g->s, P(w, 1), P(w, 0), OC, err) ||
            launch_bias_backward_reduce(ks, g->s, P(w, 2 + i), P(w, 1), OC, err))
            return -1;
    }
    return launch_gelu_backward_bias_partial(ks, g->s, P(w, 1), P(w, 5), P(w, 6), 4 * g->C, err) ||
           launch_bias_backward_reduce(ks, g->s, P(w, 7), P(w, 1), 4 * g->C, err) ? -1 : 0;
}
void wl_bias_setup(Workload *w, Harness *g) {
    size_t C = g->C;
    wbuf(w, g, (size_t)g->BT * 4 * C, 0, 1);                 /* 0 dout */
    wbuf(w, g, (size_t)w->max_tun[1] * 4 * C, 1, 0);         /* 1 scratch: ROW_SPLITS rows */
    out(w, wbuf(w, g, C, 0, 0), "dbias C");
    out(w, wbuf(w, g, 3 * C, 0, 0), "dbias 3C");
    out(w, wbuf(w, g, 4 * C, 0, 0), "dbias 4C");
    out(w, wbuf(w, g, (size_t)g->BT * 4 * C, 0, 1), "gelu dinout");   /* 5 */
    wbuf(w, g, (size_t)g->BT * 4 * C, 0, 1);                          /* 6 the pre-activation */
    out(w, wbuf(w, g, 4 * C, 0, 0), "fc dbias");                      /* 7 */
}

/* ---- attention: forward and backward (the template, or cuDNN; a forward: the forward); with grouped-query
   attention cuDNN's runs on qkv expanded as the step's does (AttExpand: buffers 6 and 7) ---- */
static int wl_gqa(const Harness *g) { return gpt2_kv_heads(&g->plan->model) != g->plan->model.n_head; }
int wl_attention_run(Workload *w, Harness *g, Kernels *ks, Err *err) {
    const AttExpand x = {wl_gqa(g) ? P(w, 6) : 0, wl_gqa(g) ? P(w, 7) : 0};
    if (forward_only(g)) return attention_forward(ks, w->cudnn, w->cudnn_ws, g->s, P(w, 1), P(w, 2), P(w, 0), &x, err);
    return attention_forward(ks, w->cudnn, w->cudnn_ws, g->s, P(w, 1), P(w, 2), P(w, 0), &x, err) ||
           attention_backward(ks, w->cudnn, w->cudnn_ws, g->s, P(w, 4), P(w, 0), P(w, 1), P(w, 3), P(w, 2), P(w, 5), &x, err)
               ? -1 : 0;
}
void wl_attention_setup(Workload *w, Harness *g) {
    size_t BT = g->BT, C = g->C, rows = (size_t)g->B * g->NH * g->T, W = (size_t)gpt2_qkv_width(&g->plan->model);
    wbuf(w, g, BT * W, 0, 1);                                /* 0 qkv */
    out(w, wbuf(w, g, BT * C, 0, 0), "out");                 /* 1 */
    out(w, wbuf(w, g, rows, 1, 0), "stats");                 /* 2 */
    wbuf(w, g, BT * C, 0, 1);                                /* 3 dout */
    out(w, wbuf(w, g, BT * W, 0, 0), "dqkv");                /* 4 */
    wbuf(w, g, rows, 1, 0);                                  /* 5 ddot */
    if (wl_gqa(g)) {
        wbuf(w, g, BT * 3 * C, 0, 0);                        /* 6 qkv expanded */
        wbuf(w, g, BT * 3 * C, 0, 0);                        /* 7 its gradient */
    }
}

/* ---- fc_gemm: the fused fc matmul with the GELU, then the fused fcproj dinp with the GELU backward and the fc bias
   gradient (nothing to time where the kernels do not run: Hopper, 16 bits) ---- */
const char *wl_fc_gemm_unavailable(const Harness *g) {
    return fc_gemm_fits(&g->plan->model, &g->plan->step, atoi(g->plan->arch + 3))
               ? NULL : "its kernels run on Hopper (sm_90) in bf16 or fp16";
}
int wl_fc_gemm_run(Workload *w, Harness *g, Kernels *ks, Err *err) {
    return fc_gemm_forward(ks, g->s, P(w, 3), P(w, 4), P(w, 0), P(w, 1), P(w, 2), err) ||
           launch_transpose_fcproj(ks, g->s, P(w, 7), P(w, 6), err) ||
           fc_gemm_backward(ks, g->s, P(w, 8), P(w, 9), P(w, 5), P(w, 7), P(w, 3), err) ||
           launch_fc_bias_reduce(ks, g->s, P(w, 10), P(w, 9), err) ? -1 : 0;
}
void wl_fc_gemm_setup(Workload *w, Harness *g) {
    size_t BT = g->BT, C = g->C, tiles = (BT + FC_GEMM_TILE_ROWS - 1) / FC_GEMM_TILE_ROWS;
    wbuf(w, g, BT * C, 0, 1);                                /* 0 inp */
    wbuf(w, g, 4 * C * C, 0, 1);                             /* 1 fc weight */
    wbuf(w, g, 4 * C, 0, 1);                                 /* 2 fc bias */
    out(w, wbuf(w, g, BT * 4 * C, 0, 0), "pre");            /* 3 */
    out(w, wbuf(w, g, BT * 4 * C, 0, 0), "gelu");           /* 4 */
    wbuf(w, g, BT * C, 0, 1);                                /* 5 dout */
    wbuf(w, g, C * 4 * C, 0, 1);                             /* 6 fcproj weight */
    out(w, wbuf(w, g, 4 * C * C, 0, 0), "fcproj weight transposed");   /* 7 */
    out(w, wbuf(w, g, BT * 4 * C, 0, 0), "dpre");           /* 8 */
    wbuf(w, g, tiles * 4 * C, 1, 0);                         /* 9 the fc bias gradient's partials */
    out(w, wbuf(w, g, 4 * C, 0, 0), "fc dbias");            /* 10 */
}

/* ---- gelu: forward, and backward in place ---- */
int wl_gelu_run(Workload *w, Harness *g, Kernels *ks, Err *err) {
    return launch_gelu_forward(ks, g->s, P(w, 1), P(w, 0), w->n, err) || launch_gelu_backward(ks, g->s, P(w, 2), P(w, 0), w->n, err)
               ? -1 : 0;
}
void wl_gelu_setup(Workload *w, Harness *g) {
    w->n = (long long)g->BT * 4 * g->C;
    wbuf(w, g, (size_t)w->n, 0, 4);
    out(w, wbuf(w, g, (size_t)w->n, 0, 0), "out");
    out(w, wbuf(w, g, (size_t)w->n, 0, 1), "dinp");
}

/* ---- classifier: losses and dlogits (a forward: the losses alone) over every row, a chunk of rows (the variant's
   CHUNK) per launch ---- */
int wl_classifier_run(Workload *w, Harness *g, Kernels *ks, Err *err) {
    size_t R = (size_t)ks->plan->classifier_rows;
    for (size_t r0 = 0; r0 < (size_t)g->BT; r0 += R)
        if (launch_classifier_forward(ks, g->s, P(w, 2) + r0 * 4, P(w, 0) + r0 * g->Vp * g->xs, P(w, 1) + r0 * 4,
                                      1.0f / g->BT, !forward_only(g), err))
            return -1;
    return 0;
}
void wl_classifier_setup(Workload *w, Harness *g) {
    int32_t *tg = xmalloc((size_t)g->BT * 4);
    uint64_t seed = 7;
    for (int i = 0; i < g->BT; i++) tg[i] = (int32_t)(rng_next(&seed) % (uint64_t)g->V);
    out(w, wbuf(w, g, (size_t)g->BT * g->Vp, 0, 4), "dlogits");
    fixed(w, g, tg, (size_t)g->BT * 4);
    out(w, wbuf(w, g, (size_t)g->BT, 1, 0), "losses");
    free(tg);
}

/* ---- norm: the squared norm of as many values as the model has parameters ---- */
static size_t num_params(Harness *g) {
    GPT2Shape s = config_shape(g->cfg);
    size_t sz[NUM_PARAM_TENSORS];
    return gpt2_param_sizes(&s, sz, NULL);
}
int wl_grad_norm_run(Workload *w, Harness *g, Kernels *ks, Err *err) {
    return launch_global_norm_squared(ks, g->s, P(w, 1), P(w, 0), w->n, err);
}
void wl_grad_norm_setup(Workload *w, Harness *g) {
    w->n = (long long)num_params(g);
    wbuf(w, g, (size_t)w->n, 0, 0.01f);
    w->out[w->n_out++] = (WlOut){wbuf(w, g, (size_t)w->max_tun[1], 1, 0), 1, "sum of partials"};
}

/* ---- adamw: one update of as many parameters as the model has ---- */
int wl_adamw_run(Workload *w, Harness *g, Kernels *ks, Err *err) {
    return launch_adamw_update(ks, g->s, P(w, 0), g->xs == 2 ? P(w, 1) : 0, P(w, 2), P(w, 3), P(w, 4), w->n, 0, 1e-3f, 0.9f,
                               0.95f, 0.271f, 0.143f, 1e-8f, 0.1f, 1.0f, err);
}
void wl_adamw_setup(Workload *w, Harness *g) {
    w->n = (long long)num_params(g);
    size_t n = (size_t)w->n;
    out(w, wbuf(w, g, n, 0, 1), "params");
    out(w, wbuf(w, g, n, 1, 1), "master");
    wbuf(w, g, n, 0, 0.01f);
    out(w, wbuf(w, g, n, 1, 0.01f), "m");
    out(w, wbuf(w, g, n, 1, 0), "v");   /* zero: the update makes it positive */
}

/* ---- decode: the embedding at a position, the cache append at pos = maxT - T and the split attention over the
   whole cache (every split works), a draw with every filter (temperature 0.8, top-k 40, top-p 0.95), the advance of
   a position of its own (the others stay at maxT - T however often the workload runs), the rows' qkv linear with
   ln1 and attproj linear with the residual ---- */
int wl_decode_run(Workload *w, Harness *g, Kernels *ks, Err *err) {
    return launch_decode_embed(ks, g->s, P(w, 0), P(w, 1), P(w, 2), P(w, 3), P(w, 4), err) ||
           launch_kv_append(ks, g->s, P(w, 5), P(w, 6), P(w, 7), P(w, 4), err) ||
           launch_decode_attention(ks, g->s, P(w, 9), P(w, 5), P(w, 6), P(w, 8), P(w, 7), P(w, 4), P(w, 7), P(w, 7), err) ||
           launch_sample_tokens(ks, g->s, P(w, 10), P(w, 11), P(w, 12), P(w, 4), P(w, 13), 0.8f, 40, 0.95f, err) ||
           launch_decode_advance(ks, g->s, P(w, 14), 0, 0, 0, err) ||
           launch_decode_ln_linear(ks, g->s, P(w, 17), P(w, 0), P(w, 18), P(w, 19), P(w, 15), P(w, 16), 0, 0, 3 * g->C, 0, 0, err) ||
           launch_decode_linear_residual(ks, g->s, P(w, 20), P(w, 9), P(w, 21), P(w, 16), P(w, 0), g->C, g->C, err) ? -1 : 0;
}
void wl_decode_setup(Workload *w, Harness *g) {
    const GPT2Shape *s = &g->plan->model;   /* the cache of NKV key/value heads; qkv's rows (NH + 2 NKV) HS wide */
    size_t B = g->B, C = g->C, cache = B * (size_t)gpt2_kv_heads(s) * g->maxT * g->HS;
    /* partial: as many splits as the smallest KV_CHUNK allowed (16) makes, then a count of arrived splits per row
       and head (zeros; the attention leaves them so) */
    size_t splits = ((size_t)g->maxT + 15) / 16, part = B * g->NH * (splits * (g->HS + 2) + 1);
    int32_t *tok = xmalloc(B * 4), pos = g->maxT - g->T, adv = 0;
    uint64_t seed = 11;
    for (size_t b = 0; b < B; b++) tok[b] = (int32_t)(rng_next(&seed) % (uint64_t)g->V);
    out(w, wbuf(w, g, B * C, 0, 0), "embedding");                 /* 0 */
    fixed(w, g, tok, B * 4);                                      /* 1 tokens */
    wbuf(w, g, (size_t)g->Vp * C, 0, 1);                           /* 2 wte */
    wbuf(w, g, (size_t)g->maxT * C, 0, 1);                         /* 3 wpe */
    fixed(w, g, &pos, sizeof pos);                                /* 4 pos */
    out(w, wbuf(w, g, cache, 0, 1), "kcache");                     /* 5 */
    out(w, wbuf(w, g, cache, 0, 1), "vcache");                     /* 6 */
    wbuf(w, g, (size_t)g->BT * gpt2_qkv_width(s), 0, 1);           /* 7 qkv */
    wbuf(w, g, part, 1, 0);                                       /* 8 partial: its layout is the variant's */
    out(w, wbuf(w, g, B * C, 0, 0), "attention");                 /* 9 */
    wbuf(w, g, B, 1, 0);                                          /* 10 tokens drawn */
    wbuf(w, g, (size_t)g->maxT * B, 1, 0);                         /* 11 drawn */
    wbuf(w, g, 2 * B, 1, 1);                                      /* 12 generator states: any bits, refilled */
    wbuf(w, g, B * (size_t)g->Vp, 0, 4);                           /* 13 logits */
    fixed(w, g, &adv, sizeof adv);                                /* 14 decode_advance's own position */
    wbuf(w, g, (size_t)3 * C * C, 0, 0.05f);                       /* 15 the qkv weight */
    wbuf(w, g, (size_t)3 * C, 0, 0.1f);                            /* 16 its bias */
    out(w, wbuf(w, g, B * 3 * C, 0, 0), "linear");                /* 17 the rows' qkv */
    wbuf(w, g, C, 0, 1);                                          /* 18 ln1's weight */
    wbuf(w, g, C, 0, 0.1f);                                       /* 19 its bias */
    out(w, wbuf(w, g, B * C, 0, 0), "linear residual");           /* 20 the rows' attproj + residual */
    wbuf(w, g, C * C, 0, 0.05f);                                  /* 21 the attproj weight */
    free(tok);
}

/* ---- decode_step: the whole persistent decode step at the middle of the cache, random weights and cache ---- */
int wl_decode_step_run(Workload *w, Harness *g, Kernels *ks, Err *err) {
    return launch_decode_step(ks, g->s, P(w, 0), P(w, 1), P(w, 2), P(w, 3), P(w, 4), P(w, 5), P(w, 6), P(w, 7), P(w, 8),
                              P(w, 9), P(w, 10), P(w, 11), g->dev.sm_count, err);
}
void wl_decode_step_setup(Workload *w, Harness *g) {
    size_t B = g->B, C = g->C, cached = g->plan->step.cache_T > 0 ? (size_t)g->plan->step.cache_T : (size_t)g->maxT;
    size_t cache = (size_t)g->L * B * g->NH * cached * g->HS;
    int32_t *tok = xmalloc(B * 4), pos = (int)cached / 2;
    uint64_t seed = 13;
    for (size_t b = 0; b < B; b++) tok[b] = (int32_t)(rng_next(&seed) % (uint64_t)g->V);
    wbuf(w, g, num_params(g), 0, 0.05f);                          /* 0 the weights */
    fixed(w, g, tok, B * 4);                                      /* 1 tokens */
    fixed(w, g, &pos, sizeof pos);                                /* 2 pos */
    out(w, wbuf(w, g, cache, 0, 1), "kcache");                     /* 3 */
    wbuf(w, g, cache, 0, 1);                                      /* 4 vcache */
    for (int i = 0; i < 5; i++) wbuf(w, g, B * 4 * C, 0, 0);      /* 5..9 x, res2, qkv, atty, fch (4C each: room) */
    out(w, wbuf(w, g, B * (size_t)g->Vp, 0, 0), "logits");         /* 10 */
    wbuf(w, g, 2, 1, 0);                                          /* 11 the barrier: zeroed */
    free(tok);
}

/* ---- GPT-2's relatives: RMSNorm (forward, residual, backward) and QK-norm (forward, backward in place) ---- */
int wl_rmsnorm_run(Workload *w, Harness *g, Kernels *ks, Err *err) {
    if (launch_rmsnorm_forward(ks, g->s, P(w, 3), P(w, 4), P(w, 0), P(w, 2), err) ||
        launch_fused_residual_rmsnorm_forward(ks, g->s, P(w, 5), P(w, 3), P(w, 4), P(w, 0), P(w, 1), P(w, 2), err) ||
        launch_qk_norm_forward(ks, g->s, P(w, 11), P(w, 12), P(w, 10), P(w, 13), P(w, 14), P(w, 18), err))
        return -1;
    if (forward_only(g)) return 0;
    return launch_rmsnorm_backward(ks, g->s, P(w, 7), P(w, 9), P(w, 6), P(w, 5), P(w, 2), P(w, 4), err) ||
           launch_rmsnorm_backward_reduce(ks, g->s, P(w, 8), P(w, 9), err) ||
           launch_qk_norm_backward(ks, g->s, P(w, 15), P(w, 9), P(w, 10), P(w, 13), P(w, 14), P(w, 12), P(w, 18), err) ||
           launch_qk_norm_backward_reduce(ks, g->s, P(w, 16), P(w, 17), P(w, 9), err) ? -1 : 0;
}
void wl_rmsnorm_setup(Workload *w, Harness *g) {
    const GPT2Shape *s = &g->plan->model;
    size_t N = g->BT, C = g->C, W = (size_t)gpt2_qkv_width(s), HS = (size_t)gpt2_head_size(s);
    size_t heads = (size_t)s->n_head + gpt2_kv_heads(s), parts = 512 * (C > 2 * HS ? C : 2 * HS);
    wbuf(w, g, N * C, 0, 2); wbuf(w, g, N * C, 0, 2);         /* 0, 1: inputs */
    wbuf(w, g, C, 0, 1);                                      /* 2 weight */
    out(w, wbuf(w, g, N * C, 0, 0), "out");                  /* 3 */
    wbuf(w, g, N, 1, 0);                                     /* 4 rstd */
    out(w, wbuf(w, g, N * C, 0, 0), "residual");             /* 5 */
    wbuf(w, g, N * C, 0, 1);                                 /* 6 dout */
    out(w, wbuf(w, g, N * C, 0, 0), "dinp");                 /* 7 */
    out(w, wbuf(w, g, C, 0, 0), "dweight");                  /* 8 */
    wbuf(w, g, parts, 1, 0);                                 /* 9 scratch: BWD_BLOCKS, QK_BLOCKS <= 512 */
    wbuf(w, g, N * W, 0, 2);                                 /* 10 qkv before the norm */
    out(w, wbuf(w, g, N * W, 0, 0), "qkv");                  /* 11 */
    wbuf(w, g, N * heads, 1, 0);                             /* 12 the heads' rstd */
    wbuf(w, g, HS, 0, 1); wbuf(w, g, HS, 0, 1);              /* 13, 14: qw, kw */
    out(w, wbuf(w, g, N * W, 0, 1), "dqkv");                 /* 15, in place */
    wbuf(w, g, HS, 0, 0); wbuf(w, g, HS, 0, 0);              /* 16, 17: dqw, dkw */
    int32_t pos = 0;
    fixed(w, g, &pos, 4);                                    /* 18 the cache's position (QK_ROPE's, at pos + t) */
}

/* ---- RoPE (in place: repeated for timing, its values drift, the bytes and the work stay) and GQA's expand ---- */
int wl_rope_run(Workload *w, Harness *g, Kernels *ks, Err *err) {
    if (launch_rope_forward(ks, g->s, P(w, 0), P(w, 1), err) || launch_kv_expand(ks, g->s, P(w, 3), P(w, 0), err)) return -1;
    if (forward_only(g)) return 0;
    return launch_rope_backward(ks, g->s, P(w, 2), P(w, 1), err) || launch_kv_reduce(ks, g->s, P(w, 4), P(w, 3), err) ? -1 : 0;
}
void wl_rope_setup(Workload *w, Harness *g) {
    size_t N = g->BT, W = (size_t)gpt2_qkv_width(&g->plan->model), C = g->C;
    int32_t pos = 0;
    out(w, wbuf(w, g, N * W, 0, 2), "qkv");                  /* 0 */
    fixed(w, g, &pos, 4);                                    /* 1 the cache's position */
    out(w, wbuf(w, g, N * W, 0, 1), "dqkv");                 /* 2 */
    out(w, wbuf(w, g, N * 3 * C, 0, 0), "qkv_x");            /* 3 */
    out(w, wbuf(w, g, N * W, 0, 0), "dqkv summed");          /* 4 */
}

/* ---- ReLU^2, SwiGLU and (with the cap) the soft-cap over the classifier's chunk of rows ---- */
int wl_activation_run(Workload *w, Harness *g, Kernels *ks, Err *err) {
    long long n = w->n, nl = (long long)g->plan->classifier_rows * g->Vp;
    if (launch_relu2_forward(ks, g->s, P(w, 2), P(w, 0), n, err) || launch_swiglu_forward(ks, g->s, P(w, 2), P(w, 0), P(w, 1), n, err))
        return -1;
    if (g->plan->model.logit_softcap > 0 && launch_softcap_forward(ks, g->s, P(w, 5), nl, err)) return -1;
    if (forward_only(g)) return 0;
    return launch_relu2_backward(ks, g->s, P(w, 3), P(w, 0), n, err) ||
           launch_swiglu_backward(ks, g->s, P(w, 3), P(w, 4), P(w, 0), P(w, 1), n, err) ? -1 : 0;
}
void wl_activation_setup(Workload *w, Harness *g) {
    size_t R = (size_t)g->plan->classifier_rows;
    w->n = (long long)g->BT * gpt2_ffn(&g->plan->model);
    wbuf(w, g, (size_t)w->n, 0, 3); wbuf(w, g, (size_t)w->n, 0, 3);   /* 0, 1: pre (up), gate */
    out(w, wbuf(w, g, (size_t)w->n, 0, 0), "out");                     /* 2 */
    out(w, wbuf(w, g, (size_t)w->n, 0, 1), "dinp");                    /* 3 */
    out(w, wbuf(w, g, (size_t)w->n, 0, 0), "dgate");                   /* 4 */
    out(w, wbuf(w, g, R * g->Vp, 0, 1), "logits");                     /* 5: capped in place */
}

int workload_setup(Workload *w, Harness *g, const char *family, const int *max_tun, char *why, size_t n) {
    memset(w, 0, sizeof *w);
    w->family = family;
    const FamilyEntry *f = tune_family(family);
    if (!f) { snprintf(why, n, "no workload for the %s kernels in tune/families.c", family); return -1; }
    const char *no = f->unavailable ? f->unavailable(g) : NULL;
    if (no) { snprintf(why, n, "%s", no); return -1; }
    memcpy(w->max_tun, max_tun, sizeof w->max_tun);
    w->run = f->run;
    f->setup(w, g);
    return 0;
}

int workload_fill(Workload *w, Harness *g, Err *err) {
    for (int i = 0; i < w->n_bufs; i++) {
        WlBuf *b = &w->b[i];
        if (!b->n) continue;   /* fixed data */
        int rc = b->scale == 0 ? cu.cuMemsetD8(b->p, 0, b->n * (b->f32 ? 4 : g->xs)) != CUDA_SUCCESS
                               : harness_dfill(g, b->p, b->n, b->f32, b->scale, b->seed);
        if (rc) return err_set(err, "filling the %s workload's buffer %d (%zu elements) failed", w->family, i, b->n);
    }
    return 0;
}

/* fp32 copies of n elements at element offset off of buffer b */
static int fetch(Harness *g, const WlBuf *b, size_t off, size_t n, float *h) {
    if (b->f32) return cu.cuMemcpyDtoH(h, b->p + off * 4, n * 4) == CUDA_SUCCESS ? 0 : -1;
    return harness_down(g, h, b->p + off * g->xs, n);
}

float *workload_sample(Workload *w, Harness *g, size_t *n, Err *err) {
    const size_t whole = (size_t)1 << 22, window = (size_t)1 << 18;
    size_t total = 0;
    for (int i = 0; i < w->n_out; i++) {
        size_t bn = w->b[w->out[i].buf].n;
        total += w->out[i].sum ? 1 : bn <= whole ? bn : 16 * window;
    }
    float *h = xmalloc(total * sizeof(float)), *tmp = NULL;
    size_t at = 0;
    int rc = 0;
    for (int i = 0; i < w->n_out && !rc; i++) {
        const WlBuf *b = &w->b[w->out[i].buf];
        if (w->out[i].sum) {
            free(tmp);
            tmp = xmalloc(b->n * sizeof(float));
            rc = fetch(g, b, 0, b->n, tmp);
            double s = 0;
            for (size_t j = 0; j < b->n; j++) s += tmp[j];
            h[at++] = (float)s;
        } else if (b->n <= whole) {
            rc = fetch(g, b, 0, b->n, h + at);
            at += b->n;
        } else {
            for (int k = 0; k < 16 && !rc; k++, at += window) rc = fetch(g, b, (b->n - window) / 15 * k, window, h + at);
        }
    }
    free(tmp);
    if (rc) { free(h); err_set(err, "reading the %s workload's outputs back failed", w->family); return NULL; }
    *n = total;
    return h;
}
