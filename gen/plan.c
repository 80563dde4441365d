#include "gen/plan.h"
#include "common/files.h"
#include <stdio.h>
#include "gen/emit.h"
#include "gen/kernels.h"
#include "common/gpt2.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

void plan_add_kernel(PlanModule *m, const char *name, unsigned gx, unsigned gy, unsigned gz, unsigned block, unsigned smem) {
    if (m->n_kernels == PLAN_MAX_KERNELS) { fprintf(stderr, "gpt2gen: module %s has more than %d kernels\n", m->family, PLAN_MAX_KERNELS); exit(EXIT_FAIL); }
    PlanKernel *k = &m->kernels[m->n_kernels++];
    snprintf(k->name, sizeof k->name, "%s", name);
    k->grid[0] = gx; k->grid[1] = gy; k->grid[2] = gz;
    k->block[0] = block; k->block[1] = 1; k->block[2] = 1;
    k->smem = smem;
}

int plan_tunable(const PlanModule *m, const char *name) {
    for (int i = 0; i < m->n_tunables; i++)
        if (!strcmp(m->tunables[i].name, name)) return m->tunables[i].value;
    fprintf(stderr, "gpt2gen: internal error: %s declares no tunable %s\n", m->template_path, name);
    exit(EXIT_FAIL);
}

const PlanModule *plan_module(const Plan *plan, const char *family) {
    for (int i = 0; i < plan->n_modules; i++)
        if (!strcmp(plan->modules[i].family, family)) return &plan->modules[i];
    return NULL;
}

const PlanKernel *plan_kernel(const Plan *plan, const char *name, const PlanModule **module) {
    for (int i = 0; i < plan->n_modules; i++)
        for (int k = 0; k < plan->modules[i].n_kernels; k++)
            if (!strcmp(plan->modules[i].kernels[k].name, name)) {
                if (module) *module = &plan->modules[i];
                return &plan->modules[i].kernels[k];
            }
    return NULL;
}

/* The config's tune table: each entry must name a family of this plan and one of its tunables. */
static int apply_config_tunables(Plan *plan, const Config *cfg, Err *err) {
    for (int i = 0; i < cfg->n_tunables; i++) {
        const ConfigTunable *ct = &cfg->tunables[i];
        PlanModule *m = (PlanModule *)plan_module(plan, ct->family);
        if (!m) {
            char known[512] = "";
            for (int j = 0; j < plan->n_modules; j++) {
                size_t len = strlen(known);
                snprintf(known + len, sizeof known - len, "%s%s", j ? ", " : "", plan->modules[j].family);
            }
            return err_set(err, "%s: tune.%s: no such kernel family; the families are: %s", cfg->path, ct->family, known);
        }
        PlanTunable *t = NULL;
        for (int j = 0; j < m->n_tunables; j++) if (!strcmp(m->tunables[j].name, ct->name)) t = &m->tunables[j];
        if (!t) {
            char known[256] = "";
            for (int j = 0; j < m->n_tunables; j++) {
                size_t len = strlen(known);
                snprintf(known + len, sizeof known - len, "%s%s", j ? ", " : "", m->tunables[j].name);
            }
            return err_set(err, "%s: tune.%s.%s: %s has no such tunable; it has: %s", cfg->path, ct->family, ct->name,
                           m->template_path, known[0] ? known : "none");
        }
        t->value = ct->values[0];
        if (ct->n_values > 1) {
            t->n_candidates = ct->n_values;
            memcpy(t->candidates, ct->values, sizeof ct->values);
        }
        snprintf(t->origin, sizeof t->origin, "config");
    }
    return 0;
}

static void add_buffer(Plan *p, const char *name, size_t elems, size_t elem_bytes) {
    PlanBuffer *b = &p->buffers[p->n_buffers++];
    snprintf(b->name, sizeof b->name, "%s", name);
    b->elems = elems;
    b->bytes = elems * elem_bytes;
    p->act_bytes += b->bytes;
}

/* Memory of one training step: parameters, gradients, AdamW state and the activations kept for backward. */
static void plan_memory(Plan *p, const Config *c) {
    GPT2Shape s = config_shape(c);
    size_t sizes[NUM_PARAM_TENSORS];
    size_t np = gpt2_param_sizes(&s, sizes, NULL);
    size_t x = c->precision == PREC_FP32 ? 4 : 2;
    size_t B = c->train.batch_size, T = c->train.seq_len, C = c->model.n_embd, L = c->model.n_layer, NH = c->model.n_head;
    size_t BT = B * T;
    p->param_bytes = np * x;
    p->grad_bytes = np * x;
    p->opt_bytes = np * 8 + (c->precision != PREC_FP32 && c->train.master_weights ? np * 4 : 0);
    p->act_bytes = 0;
    p->n_buffers = 0;
    add_buffer(p, "encoded", BT * C, x);
    add_buffer(p, "ln1", c->train.recompute >= 2 ? BT * C : L * BT * C, x);
    add_buffer(p, "ln1_mean_rstd", L * BT * 2, 4);
    add_buffer(p, "qkv", L * BT * 3 * C, x);
    add_buffer(p, "atty", L * BT * C, x);
    add_buffer(p, "att", L * B * NH * T * T, x);
    add_buffer(p, "residual2", L * BT * C, x);
    add_buffer(p, "ln2", c->train.recompute >= 2 ? BT * C : L * BT * C, x);
    add_buffer(p, "ln2_mean_rstd", L * BT * 2, 4);
    add_buffer(p, "fch", L * BT * 4 * C, x);
    add_buffer(p, "fch_gelu", c->train.recompute >= 1 ? BT * 4 * C : L * BT * 4 * C, x);
    add_buffer(p, "residual3", L * BT * C, x);
    add_buffer(p, "lnf", BT * C, x);
    add_buffer(p, "lnf_mean_rstd", BT * 2, 4);
    add_buffer(p, "losses", BT, 4);
    add_buffer(p, "logits", BT * (size_t)c->model.padded_vocab_size, x);
    /* the layers' backward scratch ((B,NH,T,T) for the attention, and the d-buffers) shares the logits
       buffer when it fits there (runtime/cuda/cuda_backend.c, layout) */
    size_t bwd = B * NH * T * T + 12 * BT * C;
    add_buffer(p, "scratch", 7 * BT * C + (bwd <= BT * (size_t)c->model.padded_vocab_size ? 0 : bwd), x);
    p->total_bytes = p->param_bytes + p->grad_bytes + p->opt_bytes + p->act_bytes;
}

int plan_make(Plan *plan, const Config *cfg, const char *arch, Err *err) {
    memset(plan, 0, sizeof *plan);
    plan->cfg = cfg;
    snprintf(plan->arch, sizeof plan->arch, "%s", arch);
    snprintf(plan->build_dir, sizeof plan->build_dir, "build/%s", cfg->name);
    for (const KernelFamily *f = kernel_families; f->family; f++) {
        if (f->wanted && !f->wanted(cfg)) continue;
        if (plan->n_modules == PLAN_MAX_MODULES) return err_set(err, "more than %d kernel families", PLAN_MAX_MODULES);
        PlanModule *m = &plan->modules[plan->n_modules++];
        snprintf(m->family, sizeof m->family, "%s", f->family);
        snprintf(m->template_path, sizeof m->template_path, "%s", f->template_path);
        int n = template_tunables(f->template_path, m->tunables, PLAN_MAX_TUNABLES, err);
        if (n < 0) return -1;
        m->n_tunables = n;
        snprintf(m->source_path, sizeof m->source_path, "%s/kernels/%s.cu", plan->build_dir, f->family);
        snprintf(m->cubin_path, sizeof m->cubin_path, "%s/kernels/%s.%s.cubin", plan->build_dir, f->family, arch);
    }
    if (apply_config_tunables(plan, cfg, err)) return -1;
    for (int i = 0; i < plan->n_modules; i++) {
        PlanModule *m = &plan->modules[i];
        for (const KernelFamily *f = kernel_families; f->family; f++)
            if (!strcmp(f->family, m->family)) f->kernels(cfg, m);
    }
    plan_memory(plan, cfg);
    return 0;
}

static double gib(size_t b) { return b / (1024.0 * 1024.0 * 1024.0); }

int plan_write(const Plan *p, Err *err) {
    const Config *c = p->cfg;
    char path[1200];
    snprintf(path, sizeof path, "%s/plan.txt", p->build_dir);
    AtomicFile af;
    if (atomic_open(&af, path, err)) return -1;
    FILE *f = af.f;
    GPT2Shape s = config_shape(c);
    size_t sizes[NUM_PARAM_TENSORS];
    size_t np = gpt2_param_sizes(&s, sizes, NULL);
    fprintf(f, "# plan for %s (from %s), written by gpt2gen\n\n", c->name, c->path);
    fprintf(f, "model      L=%d NH=%d C=%d HS=%d maxT=%d V=%d Vp=%d   %zu parameters (%.1fM)\n", c->model.n_layer, c->model.n_head,
            c->model.n_embd, c->model.n_embd / c->model.n_head, c->model.max_seq_len, c->model.vocab_size,
            c->model.padded_vocab_size, np, np / 1e6);
    fprintf(f, "step       B=%d T=%d grad_accum=%d num_gpus=%d -> %ld tokens per step\n", c->train.batch_size,
            c->train.seq_len, c->train.grad_accum, c->train.num_gpus, c->train.total_batch_size);
    fprintf(f, "precision  %s%s, recompute=%d, arch %s\n\n", precision_name(c->precision),
            c->precision != PREC_FP32 && c->train.master_weights ? " with fp32 master weights" : "", c->train.recompute, p->arch);
    fprintf(f, "# modules: one template each, compiled to one CUBIN\n");
    for (int i = 0; i < p->n_modules; i++) {
        const PlanModule *m = &p->modules[i];
        fprintf(f, "module %-12s %s -> %s\n", m->family, m->template_path, m->cubin_path);
        for (int t = 0; t < m->n_tunables; t++) {
            const PlanTunable *tu = &m->tunables[t];
            fprintf(f, "  tunable %-16s = %-5d (%s; candidates", tu->name, tu->value, tu->origin);
            for (int j = 0; j < tu->n_candidates; j++) fprintf(f, " %d", tu->candidates[j]);
            fprintf(f, ")\n");
        }
        for (int k = 0; k < m->n_kernels; k++) {
            const PlanKernel *kk = &m->kernels[k];
            fprintf(f, "  kernel  %-32s grid (%u,%u,%u) block (%u,%u,%u) smem %u\n", kk->name, kk->grid[0], kk->grid[1],
                    kk->grid[2], kk->block[0], kk->block[1], kk->block[2], kk->smem);
        }
    }
    fprintf(f, "\n# GPU memory of one training step\n");
    fprintf(f, "parameters   %10.3f GiB\ngradients    %10.3f GiB\noptimizer    %10.3f GiB (AdamW m, v%s)\nactivations  %10.3f GiB\n",
            gib(p->param_bytes), gib(p->grad_bytes), gib(p->opt_bytes),
            c->precision != PREC_FP32 && c->train.master_weights ? ", fp32 master" : "", gib(p->act_bytes));
    for (int i = 0; i < p->n_buffers; i++)
        fprintf(f, "  %-16s %14zu elements %10.3f GiB\n", p->buffers[i].name, p->buffers[i].elems, gib(p->buffers[i].bytes));
    fprintf(f, "total        %10.3f GiB\n", gib(p->total_bytes));
    return atomic_commit(&af, err);
}
