/* kernel_tests_decode: the decode family (templates/decode.cu) against the host: the embedding at a position, the
   cache append and the split attention over the cache (runtime/cpu/cpu_ops.h cpu_kv_append, cpu_attention_cached),
   the draw of the next token (runtime/sample/sampling.h sample_draw, on the same logits and generator states) and
   the position's advance; see families.h. The kernels run at the plan's shape: in the training plan B and T are the
   training ones, so the positions tried are those with pos + T <= maxT. */
#include "tune/families.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/sample/sampling.h"
#include "common/rng.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the first failure of a test, for its report line */
static void failed(HarnessCmp *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void failed(HarnessCmp *c, const char *fmt, ...) {
    if (c->bad) return;
    c->bad = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->what, sizeof c->what, fmt, ap);
    va_end(ap);
}

static int set_pos(dptr dpos, int pos) { return cu.cuMemcpyHtoD(dpos, &pos, sizeof pos) == CUDA_SUCCESS ? 0 : -1; }

/* the plan's value of the decode family's tunable name (0 when there is none) */
static int decode_tunable(const Harness *g, const char *name) {
    for (int i = 0; i < g->plan->n_families; i++) {
        const PlanFamily *f = &g->plan->families[i];
        if (strcmp(f->decl->family, "decode")) continue;
        for (int j = 0; j < f->n_tunables; j++)
            if (!strcmp(f->decl->tunables[j].name, name)) return f->tunables[j].value;
    }
    return 0;
}

/* decode_embed at the first and the last position */
static void test_embed(Harness *g) {
    size_t B = g->B, C = g->C;
    int32_t *tok = xmalloc(B * 4);
    for (size_t b = 0; b < B; b++) tok[b] = (int32_t)(rng_next(&g->rng) % (uint64_t)g->V);
    float *wte = harness_hrand(g, (size_t)g->Vp * C, 1.0f), *wpe = harness_hrand(g, (size_t)g->maxT * C, 1.0f);
    float *ref = harness_hbuf(B * C), *got = harness_hbuf(B * C);
    Err err = {{0}};
    dptr dtok = harness_dup_raw(g, tok, B * 4), dwte = harness_dup_x(g, wte, (size_t)g->Vp * C), dwpe = harness_dup_x(g, wpe, (size_t)g->maxT * C);
    dptr dout = harness_dalloc(g, B * C * g->xs), dpos = harness_dalloc(g, 4);
    HarnessCmp c = {0, 0, ""};
    int rc = 0;
    const int positions[2] = {0, g->maxT - 1};
    for (int k = 0; k < 2 && !rc; k++) {
        int pos = positions[k];
        rc = set_pos(dpos, pos) || launch_decode_embed(&g->ks, g->s, dout, dtok, dwte, dwpe, dpos, &err) ? -1 : 0;
        if (rc) break;
        for (size_t b = 0; b < B; b++)
            for (size_t i = 0; i < C; i++) ref[b * C + i] = wte[(size_t)tok[b] * C + i] + wpe[(size_t)pos * C + i];
        harness_quantize(g, ref, B * C);
        harness_down(g, got, dout, B * C);
        harness_cmp(&c, k ? "out (last position)" : "out (position 0)", got, ref, B * C, g->tol);
    }
    harness_finish(g, "decode_embed", &c, &err, rc);
    free(tok); free(wte); free(wpe); free(ref); free(got);
    harness_dfree_all(g);
}

/* both caches on the device against the host's, exactly (got: scratch of n) */
static void cmp_caches(Harness *g, HarnessCmp *c, const char *when, int pos, float *got, dptr dk, dptr dv, const float *kc,
                       const float *vc, size_t n) {
    char what[96];
    snprintf(what, sizeof what, "kcache%s (pos %d)", when, pos);
    harness_down(g, got, dk, n);
    harness_cmp(c, what, got, kc, n, 0);
    snprintf(what, sizeof what, "vcache%s (pos %d)", when, pos);
    harness_down(g, got, dv, n);
    harness_cmp(c, what, got, vc, n, 0);
}

/* kv_append, then decode_attention + decode_attention_combine (with the last position of the cache spoiled: the
   attention reads it from qkv, the combine writes it), at a few positions: 0, one whose length ends inside the first
   split, the middle and maxT - T (every split holds positions); those with pos + T <= maxT */
static void test_attention(Harness *g) {
    size_t B = g->B, T = g->T, C = g->C, NH = g->NH, HS = g->HS, maxT = g->maxT;
    size_t ncache = B * NH * maxT * HS, nqkv = B * T * 3 * C;
    int splits = (int)g->plan->kernels[K_DECODE_ATTENTION].dims.grid[0], chunk = decode_tunable(g, "KV_CHUNK");
    if (chunk <= 0) chunk = g->maxT;
    size_t part = (size_t)HS + 2, npart = B * NH * (size_t)splits * part;
    float *qkv = harness_hrand(g, nqkv, 2.0f), *kc = harness_hrand(g, ncache, 1.0f), *vc = harness_hrand(g, ncache, 1.0f);
    float *got = harness_hbuf(ncache), *ref = harness_hbuf(B * C), *out = harness_hbuf(B * C), *again = harness_hbuf(B * C), *hp = harness_hbuf(npart);
    Err err = {{0}};
    dptr dqkv = harness_dup_x(g, qkv, nqkv), dk = harness_dup_x(g, kc, ncache), dv = harness_dup_x(g, vc, ncache);
    dptr dpos = harness_dalloc(g, 4), dpart = harness_dalloc(g, npart * 4), dout = harness_dalloc(g, B * C * g->xs);
    int last = (int)(maxT - T), cand[4] = {0, chunk - (int)T - 1, last / 2, last}, tried[4], n = 0;
    if (cand[1] < 1) cand[1] = 1;
    for (int i = 0; i < 4; i++) {
        int dupl = cand[i] < 0 || cand[i] > last;
        for (int j = 0; j < n; j++) dupl |= tried[j] == cand[i];
        if (!dupl) tried[n++] = cand[i];
    }
    HarnessCmp ca = {0, 0, ""}, cd = {0, 0, ""};
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        int pos = tried[i], len = pos + (int)T;
        char what[96];
        rc = set_pos(dpos, pos) || launch_kv_append(&g->ks, g->s, dk, dv, dqkv, dpos, &err) ? -1 : 0;
        if (rc) break;
        cpu_kv_append(kc, vc, qkv, pos, (int)B, (int)T, (int)C, (int)NH, (int)maxT);
        cmp_caches(g, &ca, "", pos, got, dk, dv, kc, vc, ncache);

        cu.cuMemsetD8(dpart, 0xff, npart * 4);   /* NaNs: every split must write its part */
        /* NaNs at the last position too: the attention reads the row's last token from qkv, and the combine writes
           it into the cache (a decode step has no kv_append) */
        for (size_t bh = 0; bh < B * NH; bh++) {
            size_t at = (bh * maxT + (size_t)len - 1) * HS * g->xs;
            cu.cuMemsetD8(dk + at, 0xff, HS * g->xs);
            cu.cuMemsetD8(dv + at, 0xff, HS * g->xs);
        }
        rc = launch_decode_attention(&g->ks, g->s, dpart, dqkv, dk, dv, dpos, &err) ||
             launch_decode_attention_combine(&g->ks, g->s, dout, dk, dv, dpart, dqkv, dpos, &err) ? -1 : 0;
        if (rc) break;
        cmp_caches(g, &ca, " after the combine", pos, got, dk, dv, kc, vc, ncache);
        harness_down(g, out, dout, B * C);
        cpu_attention_cached(ref, qkv, kc, vc, pos, (int)B, (int)T, (int)C, (int)NH, (int)maxT);
        harness_quantize(g, ref, B * C);
        size_t nonfinite = 0;
        for (size_t j = 0; j < B * C; j++) nonfinite += !isfinite(out[j]);
        snprintf(what, sizeof what, "out (pos %d, length %d, %d of %d splits)", pos, len, (len + chunk - 1) / chunk, splits);
        harness_cmp_value(&cd, what, harness_relerr(out, ref, B * C), nonfinite, g->tol);
        /* the splits past the length: m = -3e38, l = 0, acc = 0 */
        cu.cuMemcpyDtoH(hp, dpart, npart * 4);
        for (size_t bh = 0; bh < B * NH; bh++)
            for (int s = 0; s < splits; s++) {
                const float *p = hp + (bh * (size_t)splits + (size_t)s) * part;
                int empty = s * chunk >= len, okp = 1;
                if (empty) {
                    okp = p[0] == -3.0e38f;
                    for (size_t d = 1; d < part; d++) okp &= p[d] == 0.0f;
                } else {
                    for (size_t d = 0; d < part; d++) okp &= isfinite(p[d]) != 0;
                    okp &= p[1] >= 1.0f;   /* the split's max contributes exp(0) */
                }
                if (!okp) failed(&cd, "partial of row %zu head %zu split %d (pos %d): %s", bh / NH, bh % NH, s, pos,
                                 empty ? "an empty split is not (-3e38, 0, 0...)" : "not finite, or l < 1");
            }
        /* deterministic: the same bits again */
        rc = launch_decode_attention(&g->ks, g->s, dpart, dqkv, dk, dv, dpos, &err) ||
             launch_decode_attention_combine(&g->ks, g->s, dout, dk, dv, dpart, dqkv, dpos, &err) ? -1 : 0;
        if (rc) break;
        harness_down(g, again, dout, B * C);
        if (memcmp(out, again, B * C * sizeof(float))) failed(&cd, "a second run (pos %d) gave other values: not deterministic", pos);
    }
    char name[160];
    snprintf(name, sizeof name, "kv_append (positions");
    for (int i = 0; i < n; i++) snprintf(name + strlen(name), sizeof name - strlen(name), "%s%d", i ? ", " : " ", tried[i]);
    snprintf(name + strlen(name), sizeof name - strlen(name), ")");
    harness_finish(g, name, &ca, &err, rc);
    snprintf(name, sizeof name, "decode_attention + combine (%d splits of %d, against cpu_attention_cached, deterministic)",
             splits, chunk);
    harness_finish(g, name, &cd, &err, rc);
    free(qkv); free(kc); free(vc); free(got); free(ref); free(out); free(again); free(hp);
    harness_dfree_all(g);
}

/* random logits for rows [0, B): most ids uniform in [-20, 0), about 300 of them in [0, 6) (the ids that matter at
   temperature 1), the padded columns large (never drawn) */
static void sample_logits(Harness *g, float *logits) {
    size_t V = g->V, Vp = g->Vp;
    for (int b = 0; b < g->B; b++) {
        float *z = logits + (size_t)b * Vp;
        for (size_t i = 0; i < V; i++) z[i] = -20.0f * rng_uniform(&g->rng);
        for (int k = 0; k < 300; k++) z[rng_next(&g->rng) % V] = 6.0f * rng_uniform(&g->rng);
        for (size_t i = V; i < Vp; i++) z[i] = 50.0f;
    }
    harness_quantize(g, logits, (size_t)g->B * Vp);
}

typedef struct { const char *name; SampleSettings s; int exact; } SampleCase;

/* sample_tokens against sample_draw: R rounds of new generator states (new logits every 8), at pos = round % maxT */
static void test_sample(Harness *g) {
    int B = g->B, V = g->V, Vp = g->Vp;
    SampleCase cases[] = {
        {"greedy", {0.0f, 0, 1.0f}, 1},
        {"top_k 1", {1.0f, 1, 1.0f}, 1},
        {"temperature 1", {1.0f, 0, 1.0f}, 0},
        {"top_k 40", {1.0f, 40, 1.0f}, 0},
        {"top_p 0.9", {1.0f, 0, 0.9f}, 0},
        {"top_k 50 + top_p 0.95", {1.0f, 50, 0.95f}, 0},
        {"temperature 0.7", {0.7f, 0, 1.0f}, 0},
        {"temperature 0.8 + top_k 200 + top_p 0.5", {0.8f, 200, 0.5f}, 0},
        {"top_k V", {1.0f, V, 1.0f}, 0},
        {"top_p 0", {1.0f, 0, 0.0f}, 0},
    };
    int rounds = B <= 8 ? 64 : 512 / B < 8 ? 8 : 512 / B;
    float *logits = harness_hbuf((size_t)B * Vp);
    uint64_t *st = xmalloc((size_t)B * 8), *st_host = xmalloc((size_t)B * 8), *st_got = xmalloc((size_t)B * 8);
    int32_t *tok = xmalloc((size_t)B * 4), *tok_host = xmalloc((size_t)B * 4), *tok2 = xmalloc((size_t)B * 4);
    int32_t *drawn = xmalloc((size_t)g->maxT * B * 4);
    Err err = {{0}};
    dptr dlog = harness_dalloc(g, (size_t)B * Vp * g->xs), dtok = harness_dalloc(g, (size_t)B * 4), drng = harness_dalloc(g, (size_t)B * 8);
    dptr ddrawn = harness_dalloc(g, (size_t)g->maxT * B * 4), dpos = harness_dalloc(g, 4);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const SampleCase *sc = &cases[c];
        HarnessCmp cmpr = {0, 0, ""};
        int rc = 0, draws = 0, differ = 0;
        for (int round = 0; round < rounds && !rc; round++) {
            if (round % 8 == 0) {
                sample_logits(g, logits);
                harness_up(g, dlog, logits, (size_t)B * Vp);
            }
            for (int b = 0; b < B; b++) st[b] = rng_next(&g->rng) | 1;
            int pos = round % g->maxT;
            rc = set_pos(dpos, pos) || cu.cuMemcpyHtoD(drng, st, (size_t)B * 8) != CUDA_SUCCESS ||
                 launch_sample_tokens(&g->ks, g->s, dtok, ddrawn, drng, dpos, dlog, sc->s.temperature, sc->s.top_k,
                                      sc->s.top_p, &err) ? -1 : 0;
            if (rc) break;
            cu.cuMemcpyDtoH(tok, dtok, (size_t)B * 4);
            cu.cuMemcpyDtoH(st_got, drng, (size_t)B * 8);
            cu.cuMemcpyDtoH(drawn, ddrawn, (size_t)g->maxT * B * 4);
            if (round == 0) {   /* deterministic: the same logits and states again give the same tokens and states */
                uint64_t *st2 = xmalloc((size_t)B * 8);
                rc = cu.cuMemcpyHtoD(drng, st, (size_t)B * 8) != CUDA_SUCCESS ||
                     launch_sample_tokens(&g->ks, g->s, dtok, ddrawn, drng, dpos, dlog, sc->s.temperature, sc->s.top_k,
                                          sc->s.top_p, &err) ? -1 : 0;
                if (!rc) {
                    cu.cuMemcpyDtoH(tok2, dtok, (size_t)B * 4);
                    cu.cuMemcpyDtoH(st2, drng, (size_t)B * 8);
                    if (memcmp(tok, tok2, (size_t)B * 4) || memcmp(st_got, st2, (size_t)B * 8))
                        failed(&cmpr, "a second run on the same inputs drew other tokens: not deterministic");
                }
                free(st2);
                if (rc) break;
            }
#pragma omp parallel for schedule(dynamic)
            for (int b = 0; b < B; b++) {
                st_host[b] = st[b];
                tok_host[b] = sample_draw(logits + (size_t)b * Vp, V, &sc->s, &st_host[b]);
            }
            for (int b = 0; b < B; b++) {
                draws++;
                if (tok[b] < 0 || tok[b] >= V) failed(&cmpr, "row %d drew %d, not an id below V = %d", b, tok[b], V);
                if (drawn[(size_t)pos * B + b] != tok[b])
                    failed(&cmpr, "drawn[pos %d * B + %d] = %d, the token is %d", pos, b, drawn[(size_t)pos * B + b], tok[b]);
                if (st_got[b] != st_host[b])
                    failed(&cmpr, "row %d (round %d): generator state %016llx, the host's %016llx", b, round,
                           (unsigned long long)st_got[b], (unsigned long long)st_host[b]);
                if (tok[b] != tok_host[b]) {
                    differ++;
                    if (sc->exact) failed(&cmpr, "row %d (round %d): token %d, the host's %d", b, round, tok[b], tok_host[b]);
                }
            }
        }
        double frac = draws ? (double)differ / draws : 0;
        if (!sc->exact && frac > 0.02)
            failed(&cmpr, "%d of %d draws differ from sample_draw's (more than 2%%)", differ, draws);
        char name[200];
        snprintf(name, sizeof name, "sample_tokens %s (%d draws against sample_draw, deterministic)", sc->name, draws);
        if (rc) harness_fail(g, name, "%s", err.msg);
        else if (cmpr.bad) harness_fail(g, name, "%s", cmpr.what);
        else harness_ok(g, name, "%d of %d draws differ from the host's", differ, draws);
    }
    free(logits); free(st); free(st_host); free(st_got); free(tok); free(tok_host); free(tok2); free(drawn);
    harness_dfree_all(g);
}

/* decode_advance: pos 5 becomes 6 */
static void test_advance(Harness *g) {
    Err err = {{0}};
    dptr dpos = harness_dalloc(g, 4);
    int pos = 0;
    HarnessCmp c = {0, 0, ""};
    int rc = set_pos(dpos, 5) || launch_decode_advance(&g->ks, g->s, dpos, &err) ? -1 : 0;
    if (!rc) {
        cu.cuMemcpyDtoH(&pos, dpos, 4);
        if (pos != 6) failed(&c, "pos 5 became %d", pos);
    }
    harness_finish(g, "decode_advance", &c, &err, rc);
    harness_dfree_all(g);
}

/* decode_linear against cpu_matmul_forward (and cpu_gelu_forward) at the shapes of the model's four linears and
   the classifier (no bias): the rows' out = inp @ weight^T + bias */
static void test_linear(Harness *g) {
    size_t B = g->B, C = g->C;
    const struct { const char *name; size_t IC, OC; int bias, gelu; } shapes[] = {
        {"qkv", C, 3 * C, 1, 0}, {"attproj", C, C, 1, 0}, {"fc+gelu", C, 4 * C, 1, 1}, {"fcproj", 4 * C, C, 1, 0},
        {"classifier", C, (size_t)g->Vp, 0, 0}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t IC = shapes[s].IC, OC = shapes[s].OC;
        float *x = harness_hrand(g, B * IC, 1.0f), *wt = harness_hrand(g, OC * IC, 0.05f), *bias = harness_hrand(g, OC, 0.1f);
        float *ref = harness_hbuf(B * OC), *got = harness_hbuf(B * OC);
        harness_quantize(g, x, B * IC);
        harness_quantize(g, wt, OC * IC);
        harness_quantize(g, bias, OC);
        Err err = {{0}};
        dptr dx = harness_dup_x(g, x, B * IC), dw = harness_dup_x(g, wt, OC * IC), db = shapes[s].bias ? harness_dup_x(g, bias, OC) : 0;
        dptr dout = harness_dalloc(g, B * OC * g->xs);
        int rc = launch_decode_linear(&g->ks, g->s, dout, dx, dw, db, (int)OC, (int)IC, shapes[s].gelu, &err);
        cpu_matmul_forward(ref, x, wt, shapes[s].bias ? bias : NULL, (int)B, (int)IC, (int)OC);
        if (shapes[s].gelu) cpu_gelu_forward(ref, ref, B * OC);
        harness_quantize(g, ref, B * OC);
        HarnessCmp c = {0, 0, ""};
        if (!rc) { harness_down(g, got, dout, B * OC); harness_cmp(&c, "out", got, ref, B * OC, g->tol); }
        char name[64];
        snprintf(name, sizeof name, "decode_linear %s (%zu -> %zu)", shapes[s].name, IC, OC);
        harness_finish(g, name, &c, &err, rc);
        free(x); free(wt); free(bias); free(ref); free(got);
        harness_dfree_all(g);
    }
}

void kernel_test_decode(Harness *g) {
    test_linear(g);
    test_embed(g);
    test_attention(g);
    test_sample(g);
    test_advance(g);
}
