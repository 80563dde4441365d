/* test_planset: the plan set (gen/planset.h): which plans a request makes, their shapes and who holds the weights,
   the buckets, and the tuning database reaching every plan (decode and eval too, not only training's): what
   `gpt2gen tune` records for its decode and eval plans is what `gpt2gen sample` and `eval` take. */
#include "check.h"
#include "gen/config.h"
#include "gen/planset.h"
#include "plan_facts.h"
#include "tune/tune.h"
#include <stdlib.h>
#include <string.h>

static const TuneEnv ENV = {"NVIDIA_H200", "sm_90", "13000", "13000", "13.0", "91400", NULL};

static int load(Config *cfg, const char *seq_len) {
    Err err;
    const char *sets[] = {seq_len};
    if (config_load(cfg, "configs/tiny.lua", sets, seq_len ? 1 : 0, &err)) { CHECK(0, "%s", err.msg); return -1; }
    return 0;
}

static int make(PlanSet *ps, const Config *cfg, PlanRequest req, const PlanInputs *given) {
    PlanInputs in = {"sm_90", NULL, NULL, NULL, NULL};
    Err err;
    if (planset_make(ps, cfg, &req, given ? given : &in, NULL, &err)) { CHECK(0, "%s", err.msg); return -1; }
    return 0;
}

/* what a training run asks for: train, a one-row decode on its weights, eval plans on them too */
static void test_training_set(void) {
    static Config cfg;
    PlanSet ps;
    if (load(&cfg, NULL) || make(&ps, &cfg, (PlanRequest){1, 1, 32, 1, 0}, NULL)) return;
    int maxT = cfg.model.max_seq_len;
    CHECK(ps.train && ps.train->step.kind == STEP_TRAIN && ps.train->step.B == cfg.run.train.batch_size &&
          ps.train->step.T == cfg.run.train.seq_len, "the training plan is the config's step");
    CHECK(ps.decode && ps.decode->step.kind == STEP_DECODE && ps.decode->step.B == 1 && ps.decode->step.shared_weights,
          "the decode plan: one row on the training weights");
    CHECK(ps.n_buckets >= 1 && ps.bucket_T[ps.n_buckets - 1] == maxT, "the last bucket is maxT %d (got %d)", maxT,
          ps.bucket_T[ps.n_buckets - 1]);
    for (int i = 0; i < ps.n_buckets; i++) {
        const Plan *p = ps.prefill[i], *f = ps.forward[i], *e = ps.eval[i];
        CHECK(p && p->step.kind == STEP_FORWARD && p->step.fills_cache && p->step.T == ps.bucket_T[i] && p->step.B == 1,
              "prefill %d fills the cache for bucket %d", i, ps.bucket_T[i]);
        CHECK(f && !f->step.fills_cache && f->step.T == ps.bucket_T[i] && f->step.shared_weights, "forward %d", i);
        CHECK(e && e->step.B == 32 && e->step.T == ps.bucket_T[i] && e->step.shared_weights && !strcmp(e->name, "eval"),
              "eval %d: 32 rows of bucket %d on the training weights", i, ps.bucket_T[i]);
        if (i) CHECK(ps.bucket_T[i] == 2 * ps.bucket_T[i - 1] || ps.bucket_T[i] == maxT, "buckets double");
    }
    const Plan *ahead[2];
    CHECK(planset_ahead(&ps, ahead) == 2 && ahead[0] == ps.train && ahead[1] == ps.decode, "train and decode are built ahead");
    planset_free(&ps);
    CHECK(!ps.train && !ps.decode && !ps.eval[0], "planset_free leaves nothing");
}

/* sample and eval on their own: the decode plan, else the eval plans, hold the weights */
static void test_who_holds_the_weights(void) {
    static Config cfg;
    PlanSet ps;
    if (load(&cfg, NULL)) return;
    if (!make(&ps, &cfg, (PlanRequest){0, 4, 0, 1, 0}, NULL)) {
        CHECK(!ps.train && ps.decode && ps.decode->step.B == 4 && !ps.decode->step.shared_weights,
              "sampling alone: the decode plan of 4 rows holds the weights");
        CHECK(ps.prefill[0]->step.shared_weights && !ps.eval[0], "its prefills run on them; no eval plans");
        planset_free(&ps);
    }
    if (!make(&ps, &cfg, (PlanRequest){1, 1, 0, 0, 0}, NULL)) {   /* training's: its samples start from one token */
        CHECK(ps.train && ps.decode && !ps.prefill[0] && !ps.forward[0],
              "without prompts: the decode plan alone, no prefill or forward plans");
        planset_free(&ps);
    }
    if (!make(&ps, &cfg, (PlanRequest){0, 0, 8, 0, 0}, NULL)) {
        CHECK(!ps.train && !ps.decode && !ps.prefill[0] && ps.eval[0] && !ps.eval[0]->step.shared_weights &&
              ps.eval[0]->step.B == 8, "evaluation alone: the eval plans hold the weights");
        planset_free(&ps);
    }
}

/* a maxT that is no power of two ends in a bucket of its own; n past maxT takes the last */
static void test_buckets(void) {
    static Config cfg;
    PlanSet ps;
    if (load(&cfg, NULL)) return;
    cfg.model.max_seq_len = 200;
    if (make(&ps, &cfg, (PlanRequest){0, 0, 1, 0, 0}, NULL)) return;
    int want[] = {64, 128, 200};
    CHECK(ps.n_buckets == 3, "maxT 200: 3 buckets, got %d", ps.n_buckets);
    for (int i = 0; i < 3 && i < ps.n_buckets; i++) CHECK(ps.bucket_T[i] == want[i], "bucket %d: %d", i, ps.bucket_T[i]);
    int n[] = {1, 64, 65, 128, 129, 200, 5000}, at[] = {0, 0, 1, 1, 2, 2, 2};
    for (int i = 0; i < 7; i++) CHECK(planset_bucket(&ps, n[i]) == at[i], "%d positions: bucket %d", n[i], planset_bucket(&ps, n[i]));
    planset_free(&ps);
}

/* the key/value cache holds the bucket of the positions asked for (a prompt and its new tokens), not the whole
   context: its memory, the decode and prefill plans' cache_T, and prompts' plans only up to that bucket; nothing
   asked (training's samples), or more than the context: the context */
static void test_cache_sized_to_request(void) {
    static Config cfg;
    PlanSet ps;
    if (load(&cfg, NULL)) return;
    cfg.model.max_seq_len = 512;
    const int asked[] = {100, 64, 0, 5000}, cached[] = {128, 64, 512, 512};
    for (int k = 0; k < 4; k++) {
        if (make(&ps, &cfg, (PlanRequest){0, 2, 0, 1, asked[k]}, NULL)) return;
        const Plan *d = ps.decode;
        size_t x = d->step.precision == PREC_FP32 ? 4 : 2, layer = 2 * (size_t)cached[k] * cfg.model.n_embd * x;
        CHECK(d->step.cache_T == cached[k], "%d positions asked: a cache of %d (got %d)", asked[k], cached[k], d->step.cache_T);
        CHECK(d->memory.buffers[BUF_KCACHE].layer_bytes == layer && d->memory.buffers[BUF_VCACHE].bytes == layer * cfg.model.n_layer,
              "%d positions: the cache's memory is 2 rows x %d positions (%zu bytes a layer, got %zu)", asked[k], cached[k],
              layer, d->memory.buffers[BUF_KCACHE].layer_bytes);
        for (int i = 0; i < ps.n_buckets; i++) {
            int fits = ps.bucket_T[i] <= cached[k];
            CHECK(!ps.prefill[i] == !fits && !ps.forward[i] == !fits, "%d positions: bucket %d's plans %s", asked[k],
                  ps.bucket_T[i], fits ? "made" : "not made");
            if (ps.prefill[i]) CHECK(ps.prefill[i]->step.cache_T == cached[k], "its prefill writes the same cache");
        }
        planset_free(&ps);
    }
}

/* grouped-query attention's decode cache holds the NKV key/value heads: NKV/NH of a multi-head model's of the same
   shape, a layer and in all; neither the decode step nor the prefill (on the attention template here: no GPU)
   expands qkv (no qkv_x): test_plan_attention has cuDNN's expansion */
static void test_gqa_cache_smaller(void) {
    static Config cfg;
    size_t mha_layer = 0, mha_bytes = 0;
    const int kv[] = {0, 2, 1};   /* tiny.lua: 4 heads; 0: n_head */
    for (int k = 0; k < 3; k++) {
        Err err;
        char nkv[32];
        snprintf(nkv, sizeof nkv, "model.n_kv_head=%d", kv[k]);
        const char *sets[] = {"model.norm=rmsnorm", "model.position=rope", "model.mlp=swiglu", nkv};
        if (config_load(&cfg, "configs/tiny.lua", sets, 4, &err)) { CHECK(0, "%s", err.msg); return; }
        PlanSet ps;
        if (make(&ps, &cfg, (PlanRequest){0, 2, 0, 1, 0}, NULL)) return;
        const PlanMemory *m = &ps.decode->memory;
        size_t layer = m->buffers[BUF_KCACHE].layer_bytes, bytes = m->buffers[BUF_VCACHE].bytes;
        int NH = cfg.model.n_head, NKV = kv[k] ? kv[k] : NH;
        if (k == 0) {
            mha_layer = layer, mha_bytes = bytes;
            CHECK(layer > 0 && bytes == layer * (size_t)cfg.model.n_layer, "multi-head: a cache of L layers of %zu bytes", layer);
        } else {
            CHECK(layer * (size_t)NH == mha_layer * (size_t)NKV && bytes * (size_t)NH == mha_bytes * (size_t)NKV,
                  "%d of %d kv heads: the cache is %d/%d of multi-head's (%zu and %zu bytes, multi-head's %zu and %zu)", NKV,
                  NH, NKV, NH, layer, bytes, mha_layer, mha_bytes);
        }
        CHECK(!ps.decode->kv_expand && m->buffers[BUF_QKV_X].bytes == 0, "%d kv heads: the decode step expands nothing", NKV);
        const Plan *pre = ps.prefill[0];
        CHECK(pre && pre->attention == ATTN_FLASH && !pre->kv_expand && pre->memory.buffers[BUF_QKV_X].bytes == 0,
              "%d kv heads: the prefill's attention template reads the grouped heads in place", NKV);
        planset_free(&ps);
    }
}

/* a family's second allowed variant, as the database would name it */
static int other_variant(const Plan *p, int *fam, char *name, size_t n) {
    static TuneVariant v[TUNE_MAX_VARIANTS];
    for (int f = 0; f < p->n_families; f++) {
        int refused, k = tune_variants(p, f, v, TUNE_MAX_VARIANTS, &refused);
        if (k < 2) continue;
        *fam = f;
        tune_variant_name(&p->families[f], v[1].v, name, n);
        return 0;
    }
    return -1;
}

/* a best record for plan's family fam with variant, keyed for plan */
static TuneRecord best_kernel(const Plan *plan, int fam, const char *variant) {
    TuneRecord r;
    memset(&r, 0, sizeof r);
    snprintf(r.record, sizeof r.record, "best");
    snprintf(r.what, sizeof r.what, "kernel");
    snprintf(r.name, sizeof r.name, "%s", plan->families[fam].decl->family);
    snprintf(r.variant, sizeof r.variant, "%.*s", (int)sizeof r.variant - 1, variant);
    snprintf(r.status, sizeof r.status, "ok");
    tune_key_kernel(&r.key, &ENV, plan, fam);
    return r;
}

/* 1 when plan's family fam has variant, from the database */
static int has_variant(const Plan *plan, int fam, const char *variant) {
    const PlanFamily *m = &plan->families[fam];
    char now[256];
    int values[FAMILY_MAX_TUNABLES], from_db = 0;
    for (int k = 0; k < m->n_tunables; k++) {
        values[k] = m->tunables[k].value;
        from_db += !strcmp(m->tunables[k].origin, "tune-db");
    }
    tune_variant_name(m, values, now, sizeof now);
    return !strcmp(now, variant) && from_db > 0;
}

/* The records `gpt2gen tune` writes for the decode and eval plans it sweeps (tune/targets.c: its own plan sets, the
   decode plan there on the training weights) reach the plans that `gpt2gen sample` and `gpt2gen eval` make with
   their default options, as training's reach training's: a record is keyed by the plan's shapes alone. */
static void test_database_reaches_every_plan(void) {
    static Config cfg;
    TuneOptions o;
    tune_options_defaults(&o);
    PlanRequest req[TUNE_MAX_ROWS];
    PlanSet tuned_by;
    if (load(&cfg, NULL) || tune_plan_requests(&o, req) != 1 || make(&tuned_by, &cfg, req[0], NULL)) return;
    TuneTargets tt;
    tune_targets(&o, &tuned_by, 1, &tt);
    TuneDb db;
    memset(&db, 0, sizeof db);
    const Plan *targets[2] = {tt.n == 3 ? tt.plan[1] : NULL, tt.n == 3 ? tt.plan[2] : NULL};
    int fam[2] = {-1, -1};
    char variant[2][256];
    for (int t = 0; t < 2 && targets[t]; t++) {
        if (other_variant(targets[t], &fam[t], variant[t], sizeof variant[t])) continue;
        TuneRecord r = best_kernel(targets[t], fam[t], variant[t]);
        tune_db_put(&db, &r);
    }
    CHECK(tt.n == 3 && fam[0] >= 0 && fam[1] >= 0, "tune's decode and eval plans (%d plans) have families with several "
          "variants", tt.n);
    TuneRecord mm;   /* and a matmul of the eval plan */
    memset(&mm, 0, sizeof mm);
    snprintf(mm.record, sizeof mm.record, "best");
    snprintf(mm.what, sizeof mm.what, "matmul");
    snprintf(mm.name, sizeof mm.name, "qkv");
    snprintf(mm.variant, sizeof mm.variant, "algo=3,id=21,tile=15,stages=8,splitk=1,reduction=0,swizzle=0,custom=0,cluster=0");
    snprintf(mm.status, sizeof mm.status, "ok");
    if (targets[1]) tune_key_matmul(&mm.key, &ENV, targets[1], MM_QKV, "130100");
    tune_db_put(&db, &mm);
    PlanInputs in = {"sm_90", NULL, &db, &ENV, "130100"};
    PlanSet sample, eval;
    if (fam[0] >= 0 && fam[1] >= 0 && !make(&sample, &cfg, (PlanRequest){0, 1, 0, 1, 0}, &in)) {   /* sample --batch 1 */
        CHECK(has_variant(sample.decode, fam[0], variant[0]), "sample's decode plan, %s: not the database's %s",
              sample.decode->families[fam[0]].decl->family, variant[0]);
        CHECK(sample.applied.kernels >= 1, "the first plan's report counts what it took");
        planset_free(&sample);
    }
    if (fam[0] >= 0 && fam[1] >= 0 && !make(&eval, &cfg, (PlanRequest){0, 0, 32, 0, 0}, &in)) {   /* eval --rows 32 */
        CHECK(has_variant(eval.eval[0], fam[1], variant[1]), "eval's plan, %s: not the database's %s",
              eval.eval[0]->families[fam[1]].decl->family, variant[1]);
        const MatmulAlgoChoice *c = &eval.eval[0]->matmuls[MM_QKV].algo;
        CHECK(c->set && c->index == 3 && c->id == 21 && eval.applied.matmuls == 1, "eval's qkv matmul: set %d index %d, %d applied",
              c->set, c->index, eval.applied.matmuls);
        planset_free(&eval);
    }
    /* another count of rows is another shape: sample --batch 4 takes none of the one-row plan's records */
    if (!make(&sample, &cfg, (PlanRequest){0, 4, 0, 0, 0}, &in)) {
        CHECK(sample.applied.kernels == 0 && sample.applied.stale >= 1, "a 4-row decode plan took %d records of the 1-row one",
              sample.applied.kernels);
        planset_free(&sample);
    }
    tune_db_free(&db);
    planset_free(&tuned_by);
}

/* The GPU's facts are asked once per attention shape: a bucket's prefill and forward plans share the answer (on a GPU
   each question builds cuDNN's graph), and its reason. */
static void test_facts_asked_once_per_shape(void) {
    static Config cfg;
    PlanSet ps;
    FakeMachine m;
    if (load(&cfg, NULL)) return;
    PlanInputs in = {"sm_90", fake_machine(&m, 0, "this machine has no cuDNN"), NULL, NULL, NULL};
    if (make(&ps, &cfg, (PlanRequest){0, 1, 0, 1, 0}, &in)) return;
    CHECK(m.asked == ps.n_buckets, "%d questions for %d buckets of a prefill and a forward plan each", m.asked,
          ps.n_buckets);
    for (int i = 0; i < ps.n_buckets; i++)
        CHECK(ps.prefill[i]->attention == ATTN_FLASH && ps.forward[i]->attention == ATTN_FLASH &&
              strstr(ps.prefill[i]->attention_why, "no cuDNN") && strstr(ps.forward[i]->attention_why, "no cuDNN"),
              "bucket %d: both plans take the machine's answer and its reason (%s; %s)", i, ps.prefill[i]->attention_why,
              ps.forward[i]->attention_why);
    planset_free(&ps);
}

/* Every plan of a set (train, decode, and each bucket's prefill, forward and eval), of GPT-2 and of relatives
   (RMSNorm with SwiGLU and GQA; RMSNorm with ReLU^2 and QK-norm), at every recompute level: each buffer the step
   addresses layer by layer holds every layer's slice, so layer L-1's ends inside it. A forward keeps one layer for
   all (its layer_bytes 0); a buffer kept per layer in training and stepped through in a forward would run past its
   end into the next buffer (RMSNorm's and SwiGLU's outputs did, in the forward plans: NaN logits on the GPU). */
static void test_layer_slices_inside(void) {
    static Config cfg;
    static const char *const arch[][4] = {
        {NULL},
        {"model.norm=rmsnorm", "model.position=rope", "model.mlp=swiglu", "model.n_kv_head=1"},
        {"model.norm=rmsnorm", "model.position=rope", "model.mlp=relu2", "model.qk_norm=true"}};
    for (size_t a = 0; a < sizeof arch / sizeof arch[0]; a++)
        for (int rec = 0; rec <= 2; rec++) {
            Err err;
            char r[32];
            snprintf(r, sizeof r, "train.recompute=%d", rec);
            const char *sets[5] = {r};
            int n = 1;
            for (int k = 0; k < 4 && arch[a][k]; k++) sets[n++] = arch[a][k];
            if (config_load(&cfg, "configs/tiny.lua", sets, n, &err)) { CHECK(0, "%s", err.msg); return; }
            PlanSet ps;
            if (make(&ps, &cfg, (PlanRequest){1, 1, 4, 1, 0}, NULL)) return;
            const Plan *all[2 + 3 * PLANSET_MAX_BUCKETS] = {ps.train, ps.decode};
            int np = 2;
            for (int i = 0; i < ps.n_buckets; i++) {
                all[np++] = ps.prefill[i];
                all[np++] = ps.forward[i];
                all[np++] = ps.eval[i];
            }
            for (int i = 0; i < np; i++) {
                if (!all[i]) continue;
                const PlanMemory *m = &all[i]->memory;
                size_t L = (size_t)all[i]->model.n_layer;
                for (int b = 0; b < BUF_COUNT; b++)
                    CHECK(m->buffers[b].bytes == 0 || m->buffers[b].layer_bytes == 0 || m->buffers[b].bytes >= L * m->buffers[b].layer_bytes,
                          "%s, %s, plan %s (T=%d): %s holds %zu bytes, %zu layers of %zu do not fit", arch[a][0] ? arch[a][0] : "gpt2",
                          r, all[i]->name, all[i]->step.T, m->buffers[b].name, m->buffers[b].bytes, L, m->buffers[b].layer_bytes);
            }
            planset_free(&ps);
        }
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    RUN(test_training_set);
    RUN(test_who_holds_the_weights);
    RUN(test_buckets);
    RUN(test_cache_sized_to_request);
    RUN(test_gqa_cache_smaller);
    RUN(test_layer_slices_inside);
    RUN(test_facts_asked_once_per_shape);
    RUN(test_database_reaches_every_plan);
    return check_summary();
}
