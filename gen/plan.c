/* plan: modules, tunables, launch geometry, matmuls and memory for one model and step shape (see plan.h). */
#include "gen/config.h"
#include "gen/plan.h"
#include "common/files.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const TunableDecl *find_tunable(const FamilyDecl *f, const char *name, int *index) {
    for (int i = 0; i < FAMILY_MAX_TUNABLES && f->tunables[i].name; i++)
        if (!strcmp(f->tunables[i].name, name)) { *index = i; return &f->tunables[i]; }
    return NULL;
}

/* "a, b, c" of the families, or of one family's tunables */
static void list_families(char *out, size_t n) {
    out[0] = 0;
    for (const FamilyDecl *f = kernel_families; f->family; f++) {
        size_t len = strlen(out);
        snprintf(out + len, n - len, "%s%s", f == kernel_families ? "" : ", ", f->family);
    }
}
static void list_tunables(const FamilyDecl *f, char *out, size_t n) {
    out[0] = 0;
    for (int i = 0; i < FAMILY_MAX_TUNABLES && f->tunables[i].name; i++) {
        size_t len = strlen(out);
        snprintf(out + len, n - len, "%s%s", i ? ", " : "", f->tunables[i].name);
    }
}

/* The config's tune table: each entry names a family and one of its tunables, with allowed values. */
static int apply_config_tunables(Plan *plan, const Config *cfg, Err *err) {
    for (int i = 0; i < cfg->run.n_tunables; i++) {
        const ConfigTunable *ct = &cfg->run.tunables[i];
        PlanFamily *m = NULL;
        for (int j = 0; j < plan->n_families; j++)
            if (!strcmp(plan->families[j].decl->family, ct->family)) m = &plan->families[j];
        char known[512];
        int declared = 0;
        for (const FamilyDecl *f = kernel_families; f->family; f++) declared |= !strcmp(f->family, ct->family);
        if (!m && declared) continue;   /* a family this plan's step does not call */
        if (!m) {
            list_families(known, sizeof known);
            return err_set(err, "%s: tune.%s: no such kernel family; the families are: %s", cfg->path, ct->family, known);
        }
        int ti;
        const TunableDecl *td = find_tunable(m->decl, ct->name, &ti);
        if (!td) {
            list_tunables(m->decl, known, sizeof known);
            return err_set(err, "%s: tune.%s.%s: %s has no such tunable; it has: %s", cfg->path, ct->family, ct->name,
                           m->decl->template_path, known[0] ? known : "none");
        }
        for (int j = 0; j < ct->n_values; j++)
            if (!tunable_allowed(td, ct->values[j])) {
                char rule[128];
                tunable_describe(td, rule, sizeof rule);
                return err_set(err, "%s: tune.%s.%s: %d is not allowed; the allowed values are %s (default %d)",
                               cfg->path, ct->family, ct->name, ct->values[j], rule, td->dflt);
            }
        PlanTunable *t = &m->tunables[ti];
        t->value = ct->values[0];
        if (ct->n_values > 1) {
            t->n_candidates = ct->n_values;
            memcpy(t->candidates, ct->values, sizeof ct->values);
        }
        t->origin = "config";
        t->fixed = ct->n_values == 1;
    }
    return 0;
}

static void add_module(Plan *plan, const FamilyDecl *f) {
    PlanFamily *m = &plan->families[plan->n_families++];
    m->decl = f;
    for (int i = 0; i < FAMILY_MAX_TUNABLES && f->tunables[i].name; i++) {
        const TunableDecl *td = &f->tunables[i];
        PlanTunable *t = &m->tunables[m->n_tunables++];
        t->value = td->dflt;
        t->origin = "default";
        while (t->n_candidates < 8 && td->candidates[t->n_candidates]) {
            t->candidates[t->n_candidates] = td->candidates[t->n_candidates];
            t->n_candidates++;
        }
    }
    /* the training plan's sources lie in kernels/, every other plan's in kernels/<plan>/ */
    char sub[40] = "";
    if (plan->step.kind != STEP_TRAIN) snprintf(sub, sizeof sub, "%s/", plan->name);
    snprintf(m->source_path, sizeof m->source_path, "%s/kernels/%s%s.cu", plan->build_dir, sub, f->family);
    snprintf(m->cubin_path, sizeof m->cubin_path, "%s/kernels/%s%s.%s.cubin", plan->build_dir, sub, f->family, plan->arch);
}

/* The family's defaults for this shape, for the tunables the config leaves alone, where the family's check
   accepts them all together; else the declared defaults stay. */
static void apply_shape_defaults(Plan *plan, PlanFamily *m) {
    const FamilyDecl *f = m->decl;
    if (!f->shape_defaults) return;
    int v[FAMILY_MAX_TUNABLES] = {0}, want[FAMILY_MAX_TUNABLES];
    for (int t = 0; t < m->n_tunables; t++) v[t] = m->tunables[t].value;
    KernelEnv e = kernel_env(&plan->model, &plan->step, f, v);
    e.sm = atoi(plan->arch + 3);   /* "sm_90": gen/config_validate.c checks the form */
    memcpy(want, v, sizeof v);
    f->shape_defaults(&e, want);
    for (int t = 0; t < m->n_tunables; t++)
        if (strcmp(m->tunables[t].origin, "default") || !tunable_allowed(&f->tunables[t], want[t])) want[t] = v[t];
    e = kernel_env(&plan->model, &plan->step, f, want);
    char why[512];
    if (f->check && f->check(&e, why, sizeof why)) return;
    for (int t = 0; t < m->n_tunables; t++)
        if (want[t] != v[t]) {
            m->tunables[t].value = want[t];
            m->tunables[t].origin = "default for this shape";
        }
}

/* train.gelu = "auto" without a tuning database's choice: where the training step's GELU runs, by shape. Measured on
   the H200 (docs/kernels-and-tuning.md; whole steps, bf16, T=1024): at C = 768 (gpt2-124M, B=64) the
   epilogues 113.7 ms a step, our kernels 116.6; at C = 1024 (gpt2-350M, B=32) the epilogues 162.2, our kernels 158.2.
   `gpt2gen tune` times both at the config's own shape (tune/gelu_path.c). A relative's ReLU^2 MLP of 4C takes
   fc_gemm's fused matmuls where they run (Hopper, 16 bits): nanochat-d12 on the H100, 552k tok/s against 543k with
   the epilogues (docs/model.md) */
static GeluPath gelu_auto(const Plan *plan) {
    const GPT2Shape *m = &plan->model;
    if (kernel_fcg_relu2(m) && fc_gemm_fits(m, &plan->step, atoi(plan->arch + 3))) return GELU_FUSED;
    return m->n_embd >= 1024 ? GELU_KERNEL : GELU_EPILOGUE;
}

LaunchDims plan_launch_dims(const Plan *plan, int id, long long size) {
    const PlanKernel *k = &plan->kernels[id];
    return k->decl->geometry(&plan->families[k->family].env, size);
}

/* Sets module i's environment (tunable values, derived constants) and its kernels' launches; checks them. */
static int family_finalize(Plan *plan, int i, Err *err) {
    PlanFamily *m = &plan->families[i];
    const char *path = plan->config_path;
    int values[FAMILY_MAX_TUNABLES] = {0};
    for (int t = 0; t < m->n_tunables; t++) values[t] = m->tunables[t].value;
    m->env = kernel_env(&plan->model, &plan->step, m->decl, values);
    char why[512];
    if (m->decl->check && m->decl->check(&m->env, why, sizeof why))
        return err_set(err, "%s: the %s kernels cannot serve this config: %s", path, m->decl->family, why);
    for (int k = 0; k < plan->n_kernels; k++) {
        PlanKernel *pk = &plan->kernels[k];
        if (pk->family != i) continue;
        pk->dims = pk->decl->geometry(&m->env, 1);
        const char *bad = kernel_dims_valid(&pk->dims);
        if (bad && pk->decl->size_param < 0)
            return err_set(err, "%s: kernel %s cannot be launched for this config: %s (grid %u,%u,%u block %u)", path,
                           pk->decl->name, bad, pk->dims.grid[0], pk->dims.grid[1], pk->dims.grid[2], pk->dims.block);
    }
    return 0;
}

/* The classifier family's CHUNK where the plan has the family, else every row (gen/kernels.c, classifier.cu) */
static int classifier_rows(const Plan *plan) {
    for (int i = 0; i < plan->n_families; i++) {
        const FamilyDecl *f = plan->families[i].decl;
        if (strcmp(f->family, "classifier")) continue;
        for (int d = 0; d < FAMILY_MAX_DERIVED && f->derived_names[d]; d++)
            if (!strcmp(f->derived_names[d], "CHUNK")) return (int)plan->families[i].env.derived[d];
    }
    return plan->step.B * plan->step.T;
}

int plan_set_tunables(Plan *plan, int fam, const int *values, const char *origin, Err *err) {
    PlanFamily *m = &plan->families[fam];
    PlanFamily saved = *m;
    for (int t = 0; t < m->n_tunables; t++)
        if (m->tunables[t].value != values[t]) {
            m->tunables[t].value = values[t];
            if (origin) m->tunables[t].origin = origin;
        }
    if (family_finalize(plan, fam, err) == 0) {
        plan->classifier_rows = classifier_rows(plan);
        matmuls_set_classifier_rows(plan->matmuls, &plan->model, &plan->step, plan->classifier_rows);
        memory_plan(&plan->memory, plan);   /* scratch sizes follow the launches, the logits the chunk */
        return 0;
    }
    *m = saved;
    Err ignore;
    family_finalize(plan, fam, &ignore);
    return -1;
}

/* the GELU path plan's model takes: gelu, or for GPT-2's relatives the epilogues (the GPU's other GELU paths are
   GPT-2's: the fc bias and the 4C width in their kernels; the CPU's is one math), but for a ReLU^2 MLP of 4C asked
   for "fused": templates/fc_gemm.cu's matmuls with ReLU^2 in their epilogues (FC_RELU2) */
static GeluPath gelu_for_model(const Plan *plan, GeluPath gelu) {
    const GPT2Shape *m = &plan->model;
    if (gpt2_is_gpt2(m)) return gelu;
    return gelu_fused(gelu) && kernel_fcg_relu2(m) ? GELU_FUSED : GELU_EPILOGUE;
}

/* 1 when plan's step calls family f, for its model (a cooperative family: where the plan runs it) */
static int family_in_plan(const Plan *plan, const FamilyDecl *f) {
    return family_in_step(f, &plan->step) && family_in_model(f, &plan->model) &&
           (f->launch != LAUNCH_COOPERATIVE || plan->decode_persistent);
}

/* every declared kernel by its id; those of a family this plan does not have belong to none (-1) */
static int index_kernels(Plan *plan, Err *err) {
    for (const FamilyDecl *f = kernel_families; f->family; f++) {
        int fam = -1;
        for (int i = 0; i < plan->n_families; i++)
            if (plan->families[i].decl == f) fam = i;
        for (const KernelDecl *k = f->kernels; k < f->kernels + FAMILY_MAX_KERNELS && k->name; k++) {
            if (plan->n_kernels == PLAN_MAX_KERNELS) return err_set(err, "more than %d kernels", PLAN_MAX_KERNELS);
            PlanKernel *pk = &plan->kernels[plan->n_kernels++];
            pk->decl = k;
            pk->family = fam;
        }
    }
    return 0;
}

int plan_make(Plan *plan, const Config *cfg, const char *name, const StepShape *step, const char *arch,
              const PlanFacts *facts, Err *err) {
    memset(plan, 0, sizeof *plan);
    plan->cfg = cfg;
    snprintf(plan->name, sizeof plan->name, "%s", name);
    plan->model = config_shape(cfg);
    plan->step = *step;
    snprintf(plan->config_name, sizeof plan->config_name, "%s", cfg->name);
    snprintf(plan->config_path, sizeof plan->config_path, "%s", cfg->path);
    plan->attention_asked = cfg->run.attention;   /* decided before the memory: plan_decide_attention */
    plan->attention_origin = cfg->run.attention == ATTN_AUTO ? "auto" : "config";
    plan->deterministic = step->kind != STEP_TRAIN || cfg->run.train.deterministic;
    /* the decode linears (templates/decode.cu): every model's norm and MLP, at hidden sizes of whole 16-byte packets;
       at few rows, or at any where the run asks (sample --decode linears) */
    plan->decode_linear = step->kind == STEP_DECODE && gpt2_ffn(&plan->model) % 8 == 0 &&
                          (step->B <= PLAN_DECODE_LINEAR_ROWS || cfg->run.decode == DECODE_LINEARS);
    plan->streams = step->kind == STEP_TRAIN ? cfg->run.train.streams : 1;
    plan->graph = step->kind == STEP_TRAIN && cfg->run.train.cuda_graph;
    plan->gelu = GELU_EPILOGUE;   /* a forward's: the gelu kernels are the training step's (gen/kernels.c) */
    plan->gelu_origin = "auto";
    if (step->kind == STEP_TRAIN && cfg->run.train.gelu != GELU_AUTO) {
        plan->gelu = cfg->run.train.gelu;
        plan->gelu_origin = "config";
    }
    snprintf(plan->arch, sizeof plan->arch, "%s", arch);
    plan->overlap = step->kind == STEP_DECODE && atoi(arch + 3) >= 90;
    plan->decode_persistent = plan->overlap && plan->decode_linear && cfg->run.decode == DECODE_PERSISTENT &&
                              gpt2_is_gpt2(&plan->model);   /* templates/decode_step.cu is GPT-2's */
    plan->decode_greedy_fused = plan->decode_linear && !plan->decode_persistent;
    plan->kv_expand = 0;   /* with the attention path: plan_attention.c */
    snprintf(plan->build_dir, sizeof plan->build_dir, "build/%s", cfg->name);
    for (const FamilyDecl *f = kernel_families; f->family; f++) {   /* the families this step calls */
        if (!family_in_plan(plan, f)) continue;
        if (plan->n_families == PLAN_MAX_FAMILIES) return err_set(err, "more than %d kernel families", PLAN_MAX_FAMILIES);
        add_module(plan, f);
    }
    if (apply_config_tunables(plan, cfg, err)) return -1;
    for (int i = 0; i < plan->n_families; i++) apply_shape_defaults(plan, &plan->families[i]);
    if (index_kernels(plan, err)) return -1;
    for (int i = 0; i < plan->n_families; i++)
        if (family_finalize(plan, i, err)) return -1;
    if (step->kind == STEP_TRAIN && cfg->run.train.gelu == GELU_AUTO) plan->gelu = gelu_auto(plan);
    plan->gelu = gelu_for_model(plan, plan->gelu);
    if (gelu_fused(plan->gelu) && !fc_gemm_fits(&plan->model, &plan->step, atoi(plan->arch + 3)))
        return err_set(err, "%s: train.gelu = \"fused\" runs on Hopper's wgmma in bf16 or fp16 "
                       "(here %s, %s); use \"auto\"", cfg->path, plan->arch, precision_name(plan->step.precision));
    plan->classifier_rows = classifier_rows(plan);
    matmuls_plan(plan->matmuls, &plan->model, &plan->step, plan->classifier_rows, plan->gelu);
    if (plan_decide_attention(plan, facts, err)) return -1;   /* before the memory: kv_expand's buffers */
    memory_plan(&plan->memory, plan);
    schedule_make(&plan->schedule, plan);
    return 0;
}

void plan_set_gelu(Plan *plan, GeluPath gelu, const char *origin) {
    plan->gelu = gelu_for_model(plan, gelu);
    plan->gelu_origin = origin;
    matmuls_set_gelu(plan->matmuls, &plan->model, &plan->step, plan->gelu);   /* the path the model takes, not the ask */
    memory_plan(&plan->memory, plan);   /* the fused path's scratch */
    schedule_make(&plan->schedule, plan);
}

int plan_make_train(Plan *plan, const Config *cfg, const char *arch, const PlanFacts *facts, Err *err) {
    StepShape s = step_train(cfg);
    return plan_make(plan, cfg, "train", &s, arch, facts, err);
}

int plan_make_sample(Plan *plan, const Config *cfg, const char *arch, Err *err) {
    return plan_make_decode(plan, cfg, 1, 1, arch, err);
}

int plan_make_decode(Plan *plan, const Config *cfg, int B, int shared_weights, const char *arch, Err *err) {
    StepShape s = step_decode(cfg, B, shared_weights);
    return plan_make(plan, cfg, "decode", &s, arch, NULL, err);   /* its attention asks no facts */
}

int plan_make_prefill(Plan *plan, const Config *cfg, int B, int T, int shared_weights, const char *arch,
                      const PlanFacts *facts, Err *err) {
    StepShape s = step_prefill(cfg, B, T, shared_weights);
    return plan_make(plan, cfg, "prefill", &s, arch, facts, err);
}

StepShape step_train(const Config *c) {
    return (StepShape){STEP_TRAIN, c->run.train.batch_size, c->run.train.seq_len, c->model.precision, c->run.train.recompute,
                       c->model.precision != PREC_FP32 && c->run.train.master_weights, c->run.train.num_gpus, c->run.train.zero_stage,
                       c->run.train.grad_accum, 0, 0, 0};
}

StepShape step_forward(const Config *c, int B, int T, int shared_weights) {
    return (StepShape){STEP_FORWARD, B, T, c->model.precision, 0, 0, 1, 0, 1, shared_weights, 0, 0};
}

StepShape step_decode(const Config *c, int B, int shared_weights) {
    return (StepShape){STEP_DECODE, B, 1, c->model.precision, 0, 0, 1, 0, 1, shared_weights, 0, c->model.max_seq_len};
}

StepShape step_prefill(const Config *c, int B, int T, int shared_weights) {
    return (StepShape){STEP_FORWARD, B, T, c->model.precision, 0, 0, 1, 0, 1, shared_weights, 1, c->model.max_seq_len};
}

const char *step_kind_name(StepKind k) { return k == STEP_TRAIN ? "train" : k == STEP_FORWARD ? "forward" : "decode"; }
