/* plan_write: build/<config>/plan.txt, every plan of a build as one section each (see plan.h). */
#include "gen/plan.h"
#include "common/files.h"
#include <stdio.h>

static double gib(size_t b) { return b / (1024.0 * 1024.0 * 1024.0); }

static const char *smem_note(unsigned smem, char *out, size_t n) {
    if (smem) snprintf(out, n, " smem %u", smem);
    else out[0] = 0;
    return out;
}

static void write_families(FILE *f, const Plan *p) {
    fprintf(f, "# kernel families: one template each, compiled to one CUBIN; kernels and tunables as gen/kernels.c declares them\n");
    for (int i = 0; i < p->n_families; i++) {
        const PlanFamily *m = &p->families[i];
        fprintf(f, "family %-12s %s -> %s\n", m->decl->family, m->decl->template_path, m->cubin_path);
        for (int t = 0; t < m->n_tunables; t++) {
            const PlanTunable *tu = &m->tunables[t];
            char rule[128];
            tunable_describe(&m->decl->tunables[t], rule, sizeof rule);
            fprintf(f, "  tunable %-18s = %-5d (%s; %s; candidates", m->decl->tunables[t].name, tu->value, tu->origin, rule);
            for (int j = 0; j < tu->n_candidates; j++) fprintf(f, " %d", tu->candidates[j]);
            fprintf(f, ")\n");
        }
        for (int d = 0; d < FAMILY_MAX_DERIVED && m->decl->derived_names[d]; d++)
            fprintf(f, "  derived %-18s = %lld\n", m->decl->derived_names[d], m->env.derived[d]);
        for (int k = 0; k < p->n_kernels; k++) {
            const PlanKernel *kk = &p->kernels[k];
            char note[48];
            if (kk->family != i) continue;
            if (kk->decl->size_param >= 0)
                fprintf(f, "  kernel  %-32s per call: grid %s\n", kk->decl->name, kk->decl->geometry_doc);
            else
                fprintf(f, "  kernel  %-32s grid (%u,%u,%u) block %u%s   [%s]\n", kk->decl->name, kk->dims.grid[0],
                        kk->dims.grid[1], kk->dims.grid[2], kk->dims.block, smem_note(kk->dims.smem, note, sizeof note),
                        kk->decl->geometry_doc);
        }
    }
}

static void write_matmuls(FILE *f, const Plan *p) {
    static const char *const epi[] = {"", " +gelu(aux)", " *gelu'(aux)"};
    double total = 0;
    fprintf(f, "\n# cuBLASLt matmuls (column-major D(m,n) = op(A) op(B)), per micro-step\n");
    for (int i = 0; i < MM_COUNT; i++) {
        const PlanMatmul *m = &p->matmuls[i];
        if (!m->per_step) continue;   /* not called by this plan's step */
        double fl = matmul_flops(m) * m->per_step;
        total += fl;
        fprintf(f, "matmul %-18s m=%-6d n=%-6d k=%-6d op=%c%c batch=%-4d%s%s%s  x%d  %8.2f GFLOP\n", m->name, m->m, m->n,
                m->k, m->transA ? 'T' : 'N', m->transB ? 'T' : 'N', m->batch, m->bias ? " +bias" : "",
                epi[m->epilogue], m->accumulate ? " +=" : "", m->per_step, fl / 1e9);
    }
    fprintf(f, "matmuls total %.2f GFLOP per micro-step\n", total / 1e9);
}

static void write_memory(FILE *f, const Plan *p) {
    const PlanMemory *mem = &p->memory;
    fprintf(f, "\n# GPU memory of one training step: one arena, what the CUDA backend allocates\n");
    for (int c = 0; c < MEM_CATEGORIES; c++) {
        fprintf(f, "%-12s %10.3f GiB\n", memory_category_name(c), gib(mem->category_bytes[c]));
        for (int i = 0; i < BUF_COUNT; i++) {
            const PlanBuffer *b = &mem->buffers[i];
            if (b->category != (MemCategory)c || !b->bytes) continue;
            fprintf(f, "  %-20s %14zu bytes at %14zu", b->name, b->bytes, b->offset);
            if (b->shares >= 0) fprintf(f, "  (inside %s)", mem->buffers[b->shares].name);
            fprintf(f, "\n");
        }
    }
    fprintf(f, "total        %10.3f GiB (%zu bytes)\n", gib(mem->arena_bytes), mem->arena_bytes);
    const StepShape *st = &p->step;
    if (st->shared_weights)
        fprintf(f, "weights      runs with the parameters of the training plan's backend: none of its own\n");
    size_t xs = st->precision == PREC_FP32 ? 4 : 2;
    size_t layers = st->kind == STEP_TRAIN ? (size_t)p->model.n_layer : 1;
    size_t scores = layers * st->B * p->model.n_head * st->T * st->T * xs;
    fprintf(f, "saved        %10.3f GiB: the (B,NH,T,T) attention scores of %s, which flash attention does not store "
            "(att_stats holds their rows' log-sum-exp instead)\n", gib(scores), layers > 1 ? "every layer" : "a layer");
    int n = st->ranks;
    if (n > 1 && st->zero_stage == 1) {
        size_t whole = mem->category_bytes[MEM_OPTIMIZER] * (size_t)n;
        fprintf(f, "per GPU of %d: ZeRO-1 keeps 1/%d of the AdamW state and master weights on each (%.3f GiB saved against "
                "ZeRO-0); parameters and gradients are padded to %d equal shards\n", n, n,
                gib(whole - mem->category_bytes[MEM_OPTIMIZER]), n);
    } else if (n > 1)
        fprintf(f, "per GPU of %d: ZeRO-0 keeps the whole AdamW state on each; parameters and gradients are padded to %d "
                "equal shards\n", n, n);
}

/* grouped-query attention: on cuDNN through one k and v head per query head (Plan.kv_expand), else in place */
static void write_gqa(FILE *f, const Plan *p) {
    int nh = p->model.n_head, nkv = gpt2_kv_heads(&p->model);
    if (nkv == nh) return;
    if (p->kv_expand)
        fprintf(f, "gqa        %d query heads, %d key/value heads: kv_expand gives each query head its k and v (qkv_x) "
                "for cuDNN's attention, kv_reduce sums their gradients back%s\n", nh, nkv,
                p->step.fills_cache ? "; kv_append writes the cache's key/value heads from qkv as it is" : "");
    else if (p->step.kind == STEP_DECODE || p->step.fills_cache)
        fprintf(f, "gqa        %d query heads, %d key/value heads: the cache holds the %d key/value heads, query head h "
                "reads head h / %d of it and of qkv (no kv_expand)\n", nh, nkv, nkv, nh / nkv);
    else
        fprintf(f, "gqa        %d query heads, %d key/value heads: the attention template's query head h reads head "
                "h / %d of qkv, its dK/dV kernel a block per key/value head (no kv_expand)\n", nh, nkv, nh / nkv);
}

/* a training step's GELU path (Plan.gelu), or a ReLU^2 relative's */
static void write_gelu(FILE *f, const Plan *p) {
    if (p->model.mlp == MLP_RELU2)   /* a relative's ReLU^2 (gen/plan.c, gelu_for_model) */
        fprintf(f, "gelu       %s (%s): %s\n", gelu_path_name(p->gelu), p->gelu_origin,
                p->gelu == GELU_FUSED ? "ReLU^2 in fc_gemm's matmuls: fc_gelu_forward (the fc matmul and ReLU^2), "
                                        "fcproj_dgelu_backward (the fcproj dinp times 2 relu) after transpose_fcproj"
                                      : "cuBLASLt's matmuls, then relu2_forward and relu2_backward");
    else
        fprintf(f, "gelu       %s (%s): %s\n", gelu_path_name(p->gelu), p->gelu_origin,
                p->gelu == GELU_KERNEL ? "the fc matmul's bias epilogue, then gelu_forward; the fcproj dinp, then "
                                         "gelu_backward_bias_partial with the fc bias gradient"
                : p->gelu == GELU_SPLIT ? "the fc matmul's bias epilogue, then gelu_forward; cuBLASLt's DGELU epilogue "
                                          "in the fcproj dinp"
                : p->gelu == GELU_FUSED ? "fc_gelu_forward (the fc matmul with its bias and the GELU); "
                                          "fcproj_dgelu_backward (the fcproj dinp with the GELU backward and the fc bias "
                                          "gradient's partials) after transpose_fcproj, then fc_bias_reduce"
                                        : "cuBLASLt's GELU_AUX_BIAS and DGELU epilogues");
}

static void write_section(FILE *f, const Plan *p) {
    const GPT2Shape *m = &p->model;
    const StepShape *st = &p->step;
    size_t sizes[NUM_PARAM_TENSORS], np = gpt2_param_sizes(m, sizes, NULL);
    fprintf(f, "# ==== plan %s: %s\n\n", p->name, st->kind == STEP_TRAIN ? "the training step"
                   : st->kind == STEP_DECODE ? "one token per row against the key/value cache, and the draw"
                   : st->fills_cache ? "the prefill: the prompt's keys and values into the decode plan's cache"
                                     : "a forward only (logits, and the loss with targets)");
    fprintf(f, "model      L=%d NH=%d C=%d HS=%d maxT=%d V=%d Vp=%d   %zu parameters (%.1fM)\n", m->n_layer, m->n_head,
            m->n_embd, m->n_embd / m->n_head, m->max_seq_len, m->vocab_size, m->padded_vocab_size, np, np / 1e6);
    if (st->kind == STEP_TRAIN)
        fprintf(f, "step       train: B=%d T=%d grad_accum=%d num_gpus=%d -> %ld tokens per step\n", st->B, st->T,
                st->grad_accum, st->ranks, (long)st->B * st->T * st->grad_accum * st->ranks);
    else
        fprintf(f, "step       %s: B=%d T=%d\n", step_kind_name(st->kind), st->B, st->T);
    fprintf(f, "precision  %s%s, recompute=%d, arch %s\n", precision_name(st->precision),
            st->master_weights ? " with fp32 master weights" : "", st->recompute, p->arch);
    fprintf(f, "attention  %s (%s): %s%s\n", attention_name(p->attention), p->attention_origin, p->attention_why,
            st->kind != STEP_TRAIN ? ""
            : p->deterministic || p->attention == ATTN_FLASH
                ? "; backward deterministic"
                : "; backward not deterministic (train.deterministic = false: cuDNN's dQ by atomics)");
    write_gqa(f, p);
    if (st->kind == STEP_TRAIN) write_gelu(f, p);
    if (st->kind == STEP_TRAIN)
        fprintf(f, "streams    %d%s\n", p->streams,
                p->streams == 2 ? ": the backward's weight-gradient matmuls, bias gradients and GELU recompute on a side "
                                  "stream beside the input-gradient chain"
                                : ": the whole step in order on one stream");
    if (st->kind == STEP_TRAIN)
        fprintf(f, "graph      %s\n", p->graph ? "on: the micro-step's forward and backward recorded once as a CUDA graph, "
                                                 "replayed each micro-step (op by op while profiling, and where several "
                                                 "ranks average the gradients during the backward)"
                                               : "off: each micro-step's ops launched one by one");
    if (st->kind == STEP_DECODE) {
        fprintf(f, "linears    %s\n", p->decode_linear ? "templates/decode.cu's, each weight read once for the rows, with the "
                                                         "LayerNorm before and the residual add after in the same kernel"
                                                       : "the cuBLASLt matmuls below");
        fprintf(f, "overlap    %s\n", p->overlap ? "on: the decode family's kernels start while the one before ends "
                                                   "(programmatic dependent launch), their weights loaded before they wait"
                                                 : "off: before sm_90, each kernel starts when the one before has ended");
        fprintf(f, "draw       %s\n", p->decode_greedy_fused ? "greedy: inside the classifier (each row's best logit folded in "
                                                                 "as it is stored, the token written by decode_advance); "
                                                                 "else sample_tokens over the logits"
                                                               : "sample_tokens over the logits");
    }
    else if (p->memory.buffers[BUF_LOGITS].bytes)
        fprintf(f, "classifier logits of %d rows at a time, %d chunks per micro-step%s\n", p->classifier_rows,
                st->B * st->T / p->classifier_rows, st->kind == STEP_TRAIN ? " (loss, dlogits, dlnf and dwte per chunk)" : "");
    fprintf(f, "\n");
    write_families(f, p);
    write_matmuls(f, p);
    write_memory(f, p);
    schedule_write(f, p);
}

int plan_write(const Plan *const *plans, int n, Err *err) {
    char path[1200];
    snprintf(path, sizeof path, "%s/plan.txt", plans[0]->build_dir);
    AtomicFile af;
    if (atomic_open(&af, path, err)) return -1;
    FILE *f = af.f;
    fprintf(f, "# plans for %s (from %s), written by gpt2gen: %d plan%s, one section each:", plans[0]->config_name,
            plans[0]->config_path, n, n == 1 ? "" : "s");
    for (int i = 0; i < n; i++) fprintf(f, " %s", plans[i]->name);
    fprintf(f, "\n\n");
    for (int i = 0; i < n; i++) {
        if (i) fprintf(f, "\n");
        write_section(f, plans[i]);
    }
    return atomic_commit(&af, err);
}
