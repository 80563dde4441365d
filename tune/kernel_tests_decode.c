/* kernel_tests_decode: the decode family (templates/decode.cu) against the host: the embedding at a position, the
   cache append and the split attention over the cache of NKV key/value heads (runtime/cpu/cpu_ops.h cpu_kv_append_gqa,
   cpu_attention_cached_gqa: grouped-query attention read natively, as multi-head where NKV = NH),
   the draw of the next token (runtime/sample/sampling.h sample_draw, on the same logits and generator states) and
   the position's advance; see families.h. The kernels run at the plan's shape: in the training plan B and T are the
   training ones, so the positions tried are those with pos + T <= maxT. */
#include "tune/families.h"
#include "common/gpt2.h"
#include "runtime/cpu/cpu_ops.h"
#include "runtime/sample/sampling.h"
#include "common/rng.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* both caches on the device against the host's, exactly (got: scratch of n), or the keys within tol (the new key
   QK-normed on the GPU, whose rstd may round its last bit otherwise) */
static void cmp_caches(Harness *g, HarnessCmp *c, const char *when, int pos, float *got, dptr dk, dptr dv, const float *kc,
                       const float *vc, size_t n, double tol) {
    char what[96];
    snprintf(what, sizeof what, "kcache%s (pos %d)", when, pos);
    harness_down(g, got, dk, n);
    harness_cmp(c, what, got, kc, n, tol);
    snprintf(what, sizeof what, "vcache%s (pos %d)", when, pos);
    harness_down(g, got, dv, n);
    harness_cmp(c, what, got, vc, n, 0);
}

/* what test_attention works on: the host's and the device's buffers, the heads and the split geometry */
typedef struct {
    CpuHeads heads;                  /* the plan's NH query and NKV key/value heads; qkv's rows (NH + 2 NKV) HS wide */
    size_t ncache, npart, part;
    int splits, chunk;
    float *qkv, *kc, *vc, *got, *ref, *out, *again, *hp;
    float *prep, *qn, *kn;           /* a relative's QK-norm and RoPE (prep != NULL): qkv as the attention reads it, the
                                        norms' weights */
    dptr dqkv, dk, dv, dpos, dpart, dout, dqn, dkn;
} AttnTest;

/* the positions tried: 0, one whose length ends inside the first split, one whose length fills the first split
   exactly (one split in use) and one past it (a second split of one position: the row's last token), the middle
   and maxT - T, without the duplicates and those past maxT - T; returns how many */
#define ATT_POSITIONS 6
static int attention_positions(const Harness *g, int chunk, int tried[ATT_POSITIONS]) {
    int last = g->maxT - g->T, n = 0;
    int cand[ATT_POSITIONS] = {0, chunk - g->T - 1, chunk - g->T, chunk - g->T + 1, last / 2, last};
    if (cand[1] < 1) cand[1] = 1;
    for (int i = 0; i < ATT_POSITIONS; i++) {
        int dupl = cand[i] < 0 || cand[i] > last;
        for (int j = 0; j < n; j++) dupl |= tried[j] == cand[i];
        if (!dupl) tried[n++] = cand[i];
    }
    return n;
}

/* the splits' partials (m, l, acc...) of every row and head, spoiled with 0xff bytes before the run: with more than
   one split holding positions, those splits' finite with l >= 1 (the split's max contributes exp(0)) and the rest
   untouched; with one, all untouched (its block writes the output itself). Then the count of arrived splits of
   every row and head, after the partials: back at 0 for the next step. */
static void check_partials(const Harness *g, const AttnTest *t, HarnessCmp *cd, int pos, int len) {
    size_t B = g->B, NH = g->NH;
    int ns = (len + t->chunk - 1) / t->chunk;
    uint32_t bits;
    for (size_t bh = 0; bh < B * NH; bh++)
        for (int s = 0; s < t->splits; s++) {
            const float *p = t->hp + (bh * (size_t)t->splits + (size_t)s) * t->part;
            int written = ns > 1 && s < ns, okp = 1;
            for (size_t d = 0; d < t->part; d++) {
                memcpy(&bits, &p[d], 4);
                okp &= written ? isfinite(p[d]) != 0 : bits == 0xffffffffu;
            }
            if (written) okp &= p[1] >= 1.0f;
            if (!okp)
                harness_failed(cd, "partial of row %zu head %zu split %d (pos %d, %d split(s) in use): %s", bh / NH,
                               bh % NH, s, pos, ns, written ? "not finite, or l < 1" : "written, where no partial is needed");
        }
    for (size_t bh = 0; bh < B * NH; bh++) {
        memcpy(&bits, &t->hp[t->npart + bh], 4);
        if (bits)
            harness_failed(cd, "the arrived-splits count of row %zu head %zu is %u after the attention (pos %d), not 0",
                           bh / NH, bh % NH, bits, pos);
    }
}

static int launch_attention(Harness *g, const AttnTest *t, Err *err) {
    return launch_decode_attention(&g->ks, g->s, t->dout, t->dk, t->dv, t->dpart, t->dqkv, t->dpos, t->dqn, t->dkn, err)
           ? -1 : 0;
}

/* a relative's query and new key as the decode attention reads them: QK-normed, then rotated at pos, each rounded
   as the GPU stores it; the new key and value into the host's caches again */
static const float *prepared_qkv(Harness *g, AttnTest *t, int pos) {
    const GPT2Shape *s = &g->plan->model;
    if (!t->prep) return t->qkv;
    size_t n = (size_t)g->B * g->T * (size_t)gpt2_qkv_width(s);
    memcpy(t->prep, t->qkv, n * sizeof(float));
    if (s->qk_norm) cpu_qk_norm_forward(t->prep, NULL, t->prep, t->qn, t->kn, g->B * g->T, t->heads, gpt2_norm_eps(s));
    harness_quantize(g, t->prep, n);
    if (s->position == POS_ROPE) cpu_rope(t->prep, pos, t->heads, gpt2_rope_theta(s), 1);
    harness_quantize(g, t->prep, n);
    cpu_kv_append_gqa(t->kc, t->vc, t->prep, pos, t->heads, (int)g->maxT);
    return t->prep;
}

/* the attention at one position after its kv_append: the output against the host's, the partials, and the same bits
   again on a second run */
static int attention_run(Harness *g, AttnTest *t, HarnessCmp *ca, HarnessCmp *cd, int pos, Err *err) {
    size_t B = g->B, T = g->T, C = g->C, NKV = (size_t)t->heads.NKV, HS = g->HS, maxT = g->maxT;
    int len = pos + (int)T;
    char what[96];
    cu.cuMemsetD8(t->dpart, 0xff, t->npart * 4);   /* NaNs: the splits in use must write theirs (not the counts) */
    /* NaNs at the last position too: the attention reads the row's last token from qkv, and that token's split
       writes it into the cache (a decode step has no kv_append) */
    for (size_t bh = 0; bh < B * NKV; bh++) {
        size_t at = (bh * maxT + (size_t)len - 1) * HS * g->xs;
        cu.cuMemsetD8(t->dk + at, 0xff, HS * g->xs);
        cu.cuMemsetD8(t->dv + at, 0xff, HS * g->xs);
    }
    if (launch_attention(g, t, err)) return -1;
    const float *qkv = prepared_qkv(g, t, pos);
    cmp_caches(g, ca, " after the attention", pos, t->got, t->dk, t->dv, t->kc, t->vc, t->ncache, t->prep ? g->tol : 0);
    harness_down(g, t->out, t->dout, B * C);
    cpu_attention_cached_gqa(t->ref, qkv, t->kc, t->vc, pos, t->heads, (int)maxT);
    harness_quantize(g, t->ref, B * C);
    size_t nonfinite = 0;
    for (size_t j = 0; j < B * C; j++) nonfinite += !isfinite(t->out[j]);
    snprintf(what, sizeof what, "out (pos %d, length %d, %d of %d splits)", pos, len, (len + t->chunk - 1) / t->chunk,
             t->splits);
    harness_cmp_value(cd, what, harness_relerr(t->out, t->ref, B * C), nonfinite, g->tol);
    cu.cuMemcpyDtoH(t->hp, t->dpart, (t->npart + B * (size_t)g->NH) * 4);
    check_partials(g, t, cd, pos, len);
    /* deterministic: the same bits again */
    if (launch_attention(g, t, err)) return -1;
    harness_down(g, t->again, t->dout, B * C);
    if (memcmp(t->out, t->again, B * C * sizeof(float)))
        harness_failed(cd, "a second run (pos %d) gave other values: not deterministic", pos);
    return 0;
}

/* the two report lines: kv_append at the positions tried, and the attention */
static void attention_report(Harness *g, const AttnTest *t, HarnessCmp *ca, HarnessCmp *cd, const int *tried, int n,
                             Err *err, int rc) {
    char name[160];
    snprintf(name, sizeof name, "kv_append (positions");
    for (int i = 0; i < n; i++) snprintf(name + strlen(name), sizeof name - strlen(name), "%s%d", i ? ", " : " ", tried[i]);
    snprintf(name + strlen(name), sizeof name - strlen(name), ")");
    harness_finish(g, name, ca, err, rc);
    snprintf(name, sizeof name, "decode_attention (%d splits of %d, combined by the last; %d of %d kv heads%s; against "
             "cpu_attention_cached_gqa, deterministic)", t->splits, t->chunk, t->heads.NKV, t->heads.NH,
             !t->prep ? "" : g->plan->model.qk_norm ? ", QK-norm and RoPE inside" : ", RoPE inside");
    harness_finish(g, name, cd, err, rc);
}

/* kv_append, then decode_attention (with the last position of the cache spoiled: the attention reads it from qkv,
   and its split writes it), at the positions attention_positions gives; those with pos + T <= maxT. The cache
   holds the plan's NKV key/value heads, qkv is as the qkv matmul writes it (no kv_expand) */
static void test_attention(Harness *g) {
    size_t B = g->B, T = g->T, C = g->C, NH = g->NH, HS = g->HS, maxT = g->maxT;
    AttnTest t;
    t.heads = (CpuHeads){(int)B, (int)T, (int)NH, gpt2_kv_heads(&g->plan->model), (int)HS};
    size_t nqkv = B * T * (size_t)gpt2_qkv_width(&g->plan->model);
    t.ncache = B * (size_t)t.heads.NKV * maxT * HS;
    t.splits = (int)g->plan->kernels[K_DECODE_ATTENTION].dims.grid[0], t.chunk = decode_tunable(g, "KV_CHUNK");
    if (t.chunk <= 0) t.chunk = g->maxT;
    t.part = (size_t)HS + 2, t.npart = B * NH * (size_t)t.splits * t.part;
    t.qkv = harness_hrand(g, nqkv, 2.0f), t.kc = harness_hrand(g, t.ncache, 1.0f), t.vc = harness_hrand(g, t.ncache, 1.0f);
    t.got = harness_hbuf(t.ncache), t.ref = harness_hbuf(B * C), t.out = harness_hbuf(B * C), t.again = harness_hbuf(B * C);
    t.hp = harness_hbuf(t.npart + B * NH);   /* the partials, then the counts of arrived splits */
    Err err = {{0}};
    t.dqkv = harness_dup_x(g, t.qkv, nqkv), t.dk = harness_dup_x(g, t.kc, t.ncache), t.dv = harness_dup_x(g, t.vc, t.ncache);
    t.dpos = harness_dalloc(g, 4), t.dpart = harness_dalloc(g, (t.npart + B * NH) * 4), t.dout = harness_dalloc(g, B * C * g->xs);
    const GPT2Shape *s = &g->plan->model;
    int prep = s->qk_norm || s->position == POS_ROPE;
    t.prep = prep ? harness_hbuf(nqkv) : NULL;
    t.qn = harness_hrand(g, HS, 1.0f), t.kn = harness_hrand(g, HS, 1.0f);
    t.dqn = s->qk_norm ? harness_dup_x(g, t.qn, HS) : 0, t.dkn = s->qk_norm ? harness_dup_x(g, t.kn, HS) : 0;
    int tried[ATT_POSITIONS], n = attention_positions(g, t.chunk, tried);
    HarnessCmp ca = {0, 0, ""}, cd = {0, 0, ""};
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        int pos = tried[i];
        rc = set_pos(t.dpos, pos) || launch_kv_append(&g->ks, g->s, t.dk, t.dv, t.dqkv, t.dpos, &err) ? -1 : 0;
        if (rc) break;
        cpu_kv_append_gqa(t.kc, t.vc, t.qkv, pos, t.heads, (int)maxT);
        cmp_caches(g, &ca, "", pos, t.got, t.dk, t.dv, t.kc, t.vc, t.ncache, t.prep ? g->tol : 0);   /* earlier keys prepared */
        rc = attention_run(g, &t, &ca, &cd, pos, &err);
    }
    attention_report(g, &t, &ca, &cd, tried, n, &err, rc);
    free(t.qkv); free(t.kc); free(t.vc); free(t.got); free(t.ref); free(t.out); free(t.again); free(t.hp);
    free(t.prep); free(t.qn); free(t.kn);
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

/* what test_sample works on: the host's and the device's buffers, and a case's counts */
typedef struct {
    float *logits;
    uint64_t *st, *st_host, *st_got;
    int32_t *tok, *tok_host, *tok2, *drawn;
    dptr dlog, dtok, drng, ddrawn, dpos;
    int draws, differ;
} SampleTest;

static int launch_sample(Harness *g, const SampleTest *t, const SampleCase *sc, Err *err) {
    return launch_sample_tokens(&g->ks, g->s, t->dtok, t->ddrawn, t->drng, t->dpos, t->dlog, sc->s.temperature,
                                sc->s.top_k, sc->s.top_p, err);
}

/* deterministic: the same logits and states again give the same tokens and states */
static int sample_again(Harness *g, SampleTest *t, const SampleCase *sc, HarnessCmp *cmpr, Err *err) {
    int B = g->B;
    uint64_t *st2 = xmalloc((size_t)B * 8);
    int rc = cu.cuMemcpyHtoD(t->drng, t->st, (size_t)B * 8) != CUDA_SUCCESS || launch_sample(g, t, sc, err) ? -1 : 0;
    if (!rc) {
        cu.cuMemcpyDtoH(t->tok2, t->dtok, (size_t)B * 4);
        cu.cuMemcpyDtoH(st2, t->drng, (size_t)B * 8);
        if (memcmp(t->tok, t->tok2, (size_t)B * 4) || memcmp(t->st_got, st2, (size_t)B * 8))
            harness_failed(cmpr, "a second run on the same inputs drew other tokens: not deterministic");
    }
    free(st2);
    return rc;
}

/* the round's tokens, drawn ids and generator states against sample_draw's on the host */
static void sample_compare(Harness *g, SampleTest *t, const SampleCase *sc, HarnessCmp *cmpr, int round, int pos) {
    int B = g->B, V = g->V, Vp = g->Vp;
#pragma omp parallel for schedule(dynamic)
    for (int b = 0; b < B; b++) {
        t->st_host[b] = t->st[b];
        t->tok_host[b] = sample_draw(t->logits + (size_t)b * Vp, V, &sc->s, &t->st_host[b]);
    }
    for (int b = 0; b < B; b++) {
        t->draws++;
        if (t->tok[b] < 0 || t->tok[b] >= V) harness_failed(cmpr, "row %d drew %d, not an id below V = %d", b, t->tok[b], V);
        if (t->drawn[(size_t)pos * B + b] != t->tok[b])
            harness_failed(cmpr, "drawn[pos %d * B + %d] = %d, the token is %d", pos, b, t->drawn[(size_t)pos * B + b], t->tok[b]);
        if (t->st_got[b] != t->st_host[b])
            harness_failed(cmpr, "row %d (round %d): generator state %016llx, the host's %016llx", b, round,
                           (unsigned long long)t->st_got[b], (unsigned long long)t->st_host[b]);
        if (t->tok[b] != t->tok_host[b]) {
            t->differ++;
            if (sc->exact) harness_failed(cmpr, "row %d (round %d): token %d, the host's %d", b, round, t->tok[b], t->tok_host[b]);
        }
    }
}

/* one round: new generator states (new logits every 8 rounds), the draw at pos = round % maxT, the check */
static int sample_round(Harness *g, SampleTest *t, const SampleCase *sc, HarnessCmp *cmpr, int round, Err *err) {
    int B = g->B, Vp = g->Vp;
    if (round % 8 == 0) {
        sample_logits(g, t->logits);
        harness_up(g, t->dlog, t->logits, (size_t)B * Vp);
    }
    for (int b = 0; b < B; b++) t->st[b] = rng_next(&g->rng) | 1;
    int pos = round % g->maxT;
    int rc = set_pos(t->dpos, pos) || cu.cuMemcpyHtoD(t->drng, t->st, (size_t)B * 8) != CUDA_SUCCESS ||
             launch_sample(g, t, sc, err) ? -1 : 0;
    if (rc) return rc;
    cu.cuMemcpyDtoH(t->tok, t->dtok, (size_t)B * 4);
    cu.cuMemcpyDtoH(t->st_got, t->drng, (size_t)B * 8);
    cu.cuMemcpyDtoH(t->drawn, t->ddrawn, (size_t)g->maxT * B * 4);
    if (round == 0 && sample_again(g, t, sc, cmpr, err)) return -1;
    sample_compare(g, t, sc, cmpr, round, pos);
    return 0;
}

/* one case: its rounds, then its report line */
static void sample_case(Harness *g, SampleTest *t, const SampleCase *sc, int rounds) {
    Err err = {{0}};
    HarnessCmp cmpr = {0, 0, ""};
    int rc = 0;
    t->draws = 0, t->differ = 0;
    for (int round = 0; round < rounds && !rc; round++) rc = sample_round(g, t, sc, &cmpr, round, &err);
    int draws = t->draws, differ = t->differ;
    double frac = draws ? (double)differ / draws : 0;
    if (!sc->exact && frac > 0.02)
        harness_failed(&cmpr, "%d of %d draws differ from sample_draw's (more than 2%%)", differ, draws);
    char name[200];
    snprintf(name, sizeof name, "sample_tokens %s (%d draws against sample_draw, deterministic)", sc->name, draws);
    if (rc) harness_fail(g, name, "%s", err.msg);
    else if (cmpr.bad) harness_fail(g, name, "%s", cmpr.what);
    else harness_ok(g, name, "%d of %d draws differ from the host's", differ, draws);
}

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
    SampleTest t;
    t.logits = harness_hbuf((size_t)B * Vp);
    t.st = xmalloc((size_t)B * 8), t.st_host = xmalloc((size_t)B * 8), t.st_got = xmalloc((size_t)B * 8);
    t.tok = xmalloc((size_t)B * 4), t.tok_host = xmalloc((size_t)B * 4), t.tok2 = xmalloc((size_t)B * 4);
    t.drawn = xmalloc((size_t)g->maxT * B * 4);
    t.dlog = harness_dalloc(g, (size_t)B * Vp * g->xs), t.dtok = harness_dalloc(g, (size_t)B * 4);
    t.drng = harness_dalloc(g, (size_t)B * 8);
    t.ddrawn = harness_dalloc(g, (size_t)g->maxT * B * 4), t.dpos = harness_dalloc(g, 4);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) sample_case(g, &t, &cases[c], rounds);
    free(t.logits); free(t.st); free(t.st_host); free(t.st_got); free(t.tok); free(t.tok_host); free(t.tok2); free(t.drawn);
    harness_dfree_all(g);
}

/* decode_advance: pos 5 becomes 6 */
static void test_advance(Harness *g) {
    Err err = {{0}};
    dptr dpos = harness_dalloc(g, 4);
    int pos = 0;
    HarnessCmp c = {0, 0, ""};
    int rc = set_pos(dpos, 5) || launch_decode_advance(&g->ks, g->s, dpos, 0, 0, 0, &err) ? -1 : 0;
    if (!rc) {
        cu.cuMemcpyDtoH(&pos, dpos, 4);
        if (pos != 6) harness_failed(&c, "pos 5 became %d", pos);
    }
    harness_finish(g, "decode_advance", &c, &err, rc);
    harness_dfree_all(g);
}

void kernel_test_decode(Harness *g) {
    kernel_test_decode_linear(g);
    test_embed(g);
    test_attention(g);
    test_sample(g);
    test_advance(g);
}
