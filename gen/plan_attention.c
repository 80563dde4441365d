/* plan_attention: a plan's attention path, decided where the plan is made (plan_make) and again where the tuning
   database names one (tune_db_apply): cuDNN's fused attention or our template (templates/attention.cu), from what
   the config or the database asked for, the plan's own attention kernels, and what the caller says the machine
   serves (PlanFacts, gen/plan.h). The runtime runs what the plan says (runtime/cuda/attention.c). */
#include "gen/plan.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* attention = "auto" for a training step, before a tuning database's choice: the template where both its directions
   run on Hopper's wgmma (the sm_90 default at head size 64 in 16 bits), measured faster than cuDNN's there (H200,
   gpt2-124M's shape, ms a layer: 0.356 + 1.011 against 0.327 + 1.137; docs/kernels-and-tuning.md, "Attention").
   Elsewhere, and for a forward alone (cuDNN's forward is the faster one), cuDNN where it serves. `gpt2gen tune` times
   both paths at the config's own shape (tune/attention_path.c). */
static int template_on_wgmma(const Plan *plan) {
    for (int i = 0; i < plan->n_families; i++) {
        const PlanFamily *m = &plan->families[i];
        if (strcmp(m->decl->family, "attention")) continue;
        int sm = 0;
        for (int t = 0; t < m->n_tunables; t++)
            if (!strcmp(m->decl->tunables[t].name, "FWD_SM") || !strcmp(m->decl->tunables[t].name, "BWD_SM"))
                sm += m->tunables[t].value == 90;
        return sm == 2;
    }
    return 0;
}

/* 1 where facts say cuDNN's fused attention serves plan's step, else 0 and why */
static int cudnn_serves(const Plan *plan, const PlanFacts *facts, char *why, size_t n) {
    if (!facts || !facts->cudnn_attention) {
        snprintf(why, n, "no cuDNN for this plan (it runs without a GPU: the CPU backend)");
        return 0;
    }
    why[0] = 0;
    if (facts->cudnn_attention(facts->ctx, plan, why, n) == 1) return 1;
    if (!why[0]) snprintf(why, n, "cuDNN's attention does not serve this step");
    return 0;
}

static int decided(Plan *plan, AttentionPath path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int decided(Plan *plan, AttentionPath path, const char *fmt, ...) {
    plan->attention = path;
    /* grouped-query attention: cuDNN's graph takes a k and v head per query head (Plan.kv_expand, its buffers: the
       memory is planned again where it changes, plan_decide_attention) */
    plan->kv_expand = path == ATTN_CUDNN && gpt2_kv_heads(&plan->model) != plan->model.n_head;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(plan->attention_why, sizeof plan->attention_why, fmt, ap);
    va_end(ap);
    return 0;
}

static int decide(Plan *plan, const PlanFacts *facts, Err *err);

/* plan_make decides before it lays out the memory; a later decision (the tuning database's) that changes kv_expand
   lays it out again */
int plan_decide_attention(Plan *plan, const PlanFacts *facts, Err *err) {
    int expand = plan->kv_expand, rc = decide(plan, facts, err);
    if (!rc && plan->kv_expand != expand && plan->memory.arena_bytes) memory_plan(&plan->memory, plan);
    return rc;
}

static int decide(Plan *plan, const PlanFacts *facts, Err *err) {
    if (plan->step.kind == STEP_DECODE) {   /* one query per row: no cuDNN graph, no flash tiles */
        plan->attention_origin = "decode step";
        return decided(plan, ATTN_FLASH, "templates/decode.cu's split attention against the key/value cache");
    }
    const char *origin = plan->attention_origin;
    int config = !strcmp(origin, "config"), auto_ = plan->attention_asked == ATTN_AUTO;
    const char *asks = config ? "as the config asks" : "the tuning database's choice, measured faster here";
    if (plan->attention_asked == ATTN_FLASH) return decided(plan, ATTN_FLASH, "%s", asks);
    if (auto_ && plan->step.kind == STEP_TRAIN && template_on_wgmma(plan))
        return decided(plan, ATTN_FLASH, "both directions on Hopper's wgmma, measured faster than cuDNN's");
    char why[512];   /* the whole of it for an error; the plan keeps PLAN_WHY_MAX bytes */
    if (cudnn_serves(plan, facts, why, sizeof why))
        return decided(plan, ATTN_CUDNN, "%s", auto_ ? "cuDNN's fused attention serves this step" : asks);
    if (config) return err_set(err, "%s: attention = \"cudnn\", but %s", plan->config_path, why);
    return decided(plan, ATTN_FLASH, "%s%s", auto_ ? "" : "not the tuning database's cuDNN: ", why);
}
