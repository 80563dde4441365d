/* step_test: a full training step of the CUDA backend against the CPU backend (loss, every gradient, the
   norm, an AdamW update, a second forward, logits, determinism), and the backend's memory against the plan's. */
#include "tune/harness.h"
#include "runtime/cuda/tune_api.h"
#include "runtime/backend.h"
#include "common/rng.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The one place the step test says what backends it creates: g's plan on g's GPU (the CPU backend keeps fp32,
   whatever the plan's precision). */
static BackendOptions backend_options(const Harness *g) {
    BackendOptions opt = {g->plan, g->dev.ordinal, 0, 0, NULL, g->env, NULL};
    return opt;
}

/* the backend's memory against the plan's: its arena is the plan's, and nothing big besides it (free0: the GPU's free
   memory before the backend was created; not read where other processes share the GPU, GPT2GEN_GPU_SHARED) */
static void check_plan_memory(Harness *g, Backend *gb, size_t free0) {
    size_t free1 = 0, total = 0;
    cu.cuMemGetInfo(&free1, &total);
    size_t arena = cuda_backend_arena_bytes(gb), planned = g->plan->memory.arena_bytes, used = free0 - free1;
    if (arena != planned) harness_fail(g, "plan memory", "the backend's arena is %zu bytes, the plan's %zu", arena, planned);
    else if (env_or_defaults(g->env)->gpu_shared)
        harness_ok(g, "plan memory", "arena %zu bytes = plan; the GPU's free memory not checked: other processes share "
                   "it (GPT2GEN_GPU_SHARED)", arena);
    else if (used < planned || used - planned > ((size_t)64 << 20))
        harness_fail(g, "plan memory", "creating the backend took %zu bytes of GPU memory, the plan says %zu (+ at most 64 MiB of "
             "modules and cuBLASLt handles)", used, planned);
    else harness_ok(g, "plan memory", "arena %zu bytes = plan; backend took %.1f MiB more", arena, (used - planned) / 1048576.0);
}

/* what the parts of step_test_train share: the two backends, the parameters' layout, the host's buffers, the inputs,
   the tolerances and the first step's losses */
typedef struct {
    const Config *cfg;
    GPT2Shape shape;
    size_t sz[NUM_PARAM_TENSORS], off[NUM_PARAM_TENSORS], np;
    Backend *gb, *cb;
    float *params, *pc, *pg, *gc, *gg, *gg2;
    int32_t *in, *tg;
    int bf;
    double tol_loss, tol_grad;
    float lc, lg;
} StepTest;

/* the first step on both backends: the loss, every gradient and the norm; returns rc */
static int step_first(Harness *g, StepTest *t, Err *err) {
    Backend *gb = t->gb, *cb = t->cb;
    float nc = 0, ng = 0;
    HarnessCmp c = {0, 0, ""};
    BackendRun zero = {.phase = BACKEND_ZERO_GRADS}, back = {.phase = BACKEND_BACKWARD, .grad_scale = 1.0f},
               micro = {.phase = BACKEND_FORWARD_BACKWARD, .inputs = t->in, .targets = t->tg, .grad_scale = 1.0f,
                        .loss = &t->lg},
               fwd = {.phase = BACKEND_FORWARD, .inputs = t->in, .targets = t->tg, .loss = &t->lc};
    int rc = gb->write(gb, BACKEND_PARAMS, t->params, err) || cb->write(cb, BACKEND_PARAMS, t->params, err) ||
             gb->run(gb, &zero, err) || cb->run(cb, &zero, err) ||
             gb->run(gb, &micro, err) || cb->run(cb, &fwd, err) || cb->run(cb, &back, err) ||
             gb->read(gb, BACKEND_GRADS, 0, t->gg, err) || cb->read(cb, BACKEND_GRADS, 0, t->gc, err) ||
             backend_grad_norm(gb, &ng, err) || backend_grad_norm(cb, &nc, err);
    double worst_grad = 0;
    const char *worst_name = "";
    if (!rc) {
        harness_cmp(&c, "loss", &t->lg, &t->lc, 1, t->tol_loss);
        for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
            size_t n = t->sz[i];
            if (!n) continue;   /* a tensor the architecture lacks */
            if (i == P_WTE) n = (size_t)t->shape.vocab_size * t->shape.n_embd;
            char nm[64];
            snprintf(nm, sizeof nm, "d%s", gpt2_param_names[i]);
            double e = harness_relerr(t->gg + t->off[i], t->gc + t->off[i], n);
            if (isnan(e) || e > worst_grad) { worst_grad = e; worst_name = gpt2_param_names[i]; }
            harness_cmp(&c, nm, t->gg + t->off[i], t->gc + t->off[i], n, t->tol_grad);
        }
        harness_cmp(&c, "grad norm", &ng, &nc, 1, t->bf ? 5e-2 : 1e-4);
    }
    if (!rc) {
        printf("     %s/train_step: loss gpu %.6f cpu %.6f; grad norm gpu %.6f cpu %.6f; worst gradient d%s %.2e\n", t->cfg->name,
               t->lg, t->lc, ng, nc, worst_name, worst_grad);
        harness_finish(g, "train_step forward+backward vs CPU backend", &c, err, 0);
    } else {
        harness_finish(g, "train_step forward+backward vs CPU backend", &c, err, rc);
    }
    return rc;
}

/* where a gradient is ~0 its sign (and so the AdamW step, about lr) may differ between the backends:
   allow 2.5 lr everywhere, but at most 1% of the weights more than lr/2 apart; a 16-bit model without
   master weights also rounds stochastically (one bf16 step) */
static void check_params_after_adamw(const StepTest *t, HarnessCmp *c) {
    const double lr_t = 1e-4;
    int sr = t->bf && !t->cfg->run.train.master_weights;
    size_t far = 0, out = 0, np = t->np;
    const float *pg = t->pg, *pc = t->pc;
    double worst = 0;
    for (size_t i = 0; i < np; i++) {
        double d = fabs((double)pg[i] - pc[i]), round = sr ? fabs(pc[i]) / 128.0 : t->bf ? 0 : 1e-6 * fabs(pc[i]);
        if (d - round > 0.5 * lr_t) far++;
        if (d - round > 2.5 * lr_t || d != d) out++;
        if (d - round > worst) worst = d - round;
    }
    if ((out || far > np / 100) && !c->bad) {
        c->bad = 1;
        snprintf(c->what, sizeof c->what, "params after AdamW: %zu weights more than 2.5 lr off, %zu more than lr/2 (of %zu)", out, far, np);
    }
    if (worst / lr_t > c->worst) c->worst = worst / lr_t;
}

/* update, then a second forward, and the logits of a forward without targets; returns rc */
static int step_update(Harness *g, StepTest *t, Err *err) {
    Backend *gb = t->gb, *cb = t->cb;
    float lc2 = 0, lg2 = 0;
    HarnessCmp c = (HarnessCmp){0, 0, ""};
    BackendRun update = {.phase = BACKEND_UPDATE, .adamw = {1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f}, .grad_scale = 1.0f, .step = 1},
               fwd_g = {.phase = BACKEND_FORWARD, .inputs = t->in, .targets = t->tg, .loss = &lg2},
               fwd_c = {.phase = BACKEND_FORWARD, .inputs = t->in, .targets = t->tg, .loss = &lc2},
               logits = {.phase = BACKEND_FORWARD, .inputs = t->in};
    int rc = gb->run(gb, &update, err) || cb->run(cb, &update, err) ||
             gb->read(gb, BACKEND_PARAMS, 0, t->pg, err) || cb->read(cb, BACKEND_PARAMS, 0, t->pc, err) ||
             gb->run(gb, &fwd_g, err) || cb->run(cb, &fwd_c, err);
    if (!rc) {
        check_params_after_adamw(t, &c);
        harness_cmp(&c, "loss after the step", &lg2, &lc2, 1, t->tol_loss);
        if (!(lg2 < t->lg) && !c.bad) { c.bad = 1; snprintf(c.what, sizeof c.what, "loss did not go down: %.6f -> %.6f", t->lg, lg2); }
        /* logits for sampling: a forward without targets */
        float *lgpu = harness_hbuf((size_t)g->V), *lcpu = harness_hbuf((size_t)g->V);
        size_t last = (size_t)g->B * g->T - 1;   /* row B-1, position T-1 */
        if (gb->run(gb, &logits, err) || cb->run(cb, &logits, err) ||
            gb->read(gb, BACKEND_LOGITS, last, lgpu, err) || cb->read(cb, BACKEND_LOGITS, last, lcpu, err)) rc = -1;
        else harness_cmp(&c, "logits", lgpu, lcpu, (size_t)g->V, t->bf ? 3e-2 : 1e-4);
        free(lgpu); free(lcpu);
        printf("     %s/train_step: after one AdamW step, loss gpu %.6f cpu %.6f\n", t->cfg->name, lg2, lc2);
    }
    if (!c.bad && !rc) harness_ok(g, "train_step AdamW update, second forward, logits vs CPU backend", "max param diff %.2f lr", c.worst);
    else harness_finish(g, "train_step AdamW update, second forward, logits vs CPU backend", &c, err, rc);
    return rc;
}

/* determinism: the same step twice gives the same bits, whether the logits are made once (BACKEND_FORWARD_BACKWARD,
   what training runs) or again in the backward (forward, then backward); with train.deterministic = false the same
   loss and gradients within the precision's tolerance (cuDNN's dQ by atomics: the sums' order varies) */
static void step_determinism(Harness *g, StepTest *t, Err *err) {
    Backend *gb = t->gb;
    HarnessCmp c = (HarnessCmp){0, 0, ""};
    const int det = t->cfg->run.train.deterministic;
    float l1 = 0, l2 = 0;
    BackendRun zero = {.phase = BACKEND_ZERO_GRADS}, back = {.phase = BACKEND_BACKWARD, .grad_scale = 1.0f},
               micro = {.phase = BACKEND_FORWARD_BACKWARD, .inputs = t->in, .targets = t->tg, .grad_scale = 1.0f, .loss = &l1},
               fwd = {.phase = BACKEND_FORWARD, .inputs = t->in, .targets = t->tg, .loss = &l2};
    int rc = gb->run(gb, &zero, err) || gb->run(gb, &micro, err) || gb->read(gb, BACKEND_GRADS, 0, t->gg, err) ||
             gb->run(gb, &zero, err) || gb->run(gb, &fwd, err) || gb->run(gb, &back, err) ||
             gb->read(gb, BACKEND_GRADS, 0, t->gg2, err);
    if (!rc && l1 != l2) { c.bad = 1; snprintf(c.what, sizeof c.what, "forward_backward and forward + backward gave different losses"); }
    if (!rc && det && memcmp(t->gg, t->gg2, t->np * 4) && !c.bad) { c.bad = 1; snprintf(c.what, sizeof c.what, "forward_backward and forward + backward gave different gradients"); }
    if (!rc && !det) harness_cmp(&c, "gradients, forward_backward against forward + backward", t->gg2, t->gg, t->np, t->bf ? 3e-2 : 1e-3);
    harness_finish(g, det ? "train_step deterministic (forward_backward = forward + backward, same bits)"
                  : "train_step, dQ by atomics (forward_backward = forward + backward within the tolerance)", &c, err, rc);
}

void step_test_train(Harness *g) {
    StepTest t = {.cfg = g->cfg};
    t.shape = config_shape(t.cfg);
    size_t np = t.np = gpt2_param_sizes(&t.shape, t.sz, t.off);
    double flops = 6.0 * (double)np * g->BT;
    if (flops > 3e12) { harness_skip(g, "train_step", "the CPU backend would take too long here (%.0f GFLOP per step); the small configs cover it", flops / 1e9); return; }
    BackendOptions opt = backend_options(g), copt = backend_options(g);
    Err err = {{0}};
    size_t free0 = 0, total = 0;
    cu.cuMemGetInfo(&free0, &total);
    Backend *gb = t.gb = cuda_backend_create(&opt, &err);
    if (!gb) { harness_fail(g, "train_step", "%s", err.msg); return; }
    /* the backend allocates what the plan says: its arena is the plan's, and nothing big besides it */
    check_plan_memory(g, gb, free0);
    Backend *cb = t.cb = cpu_backend_create(&copt, &err);
    if (!cb) { harness_fail(g, "train_step", "CPU backend: %s", err.msg); gb->destroy(gb); return; }
    t.params = harness_hbuf(np), t.pc = harness_hbuf(np), t.pg = harness_hbuf(np), t.gc = harness_hbuf(np), t.gg = harness_hbuf(np), t.gg2 = harness_hbuf(np);
    gpt2_init_params(&t.shape, t.params, 1337);
    harness_quantize(g, t.params, np);
    t.in = xmalloc((size_t)g->BT * 4), t.tg = xmalloc((size_t)g->BT * 4);
    for (int i = 0; i < g->BT; i++) { t.in[i] = (int32_t)(rng_next(&g->rng) % (uint64_t)g->V); t.tg[i] = (int32_t)(rng_next(&g->rng) % (uint64_t)g->V); }
    t.bf = g->xs == 2;
    t.tol_loss = t.bf ? 1e-2 : 1e-5, t.tol_grad = t.bf ? 1e-1 : 1e-3;
    int rc = step_first(g, &t, &err);
    if (!rc) rc = step_update(g, &t, &err);
    if (!rc) step_determinism(g, &t, &err);
    free(t.params); free(t.pc); free(t.pg); free(t.gc); free(t.gg); free(t.gg2); free(t.in); free(t.tg);
    cb->destroy(cb);
    gb->destroy(gb);
}

/* A variant of the plan against the plan itself, the same bits expected: each on a backend of its own (one at a
   time: a large model's two arenas need not fit), the same parameters, n micro-steps of gradient accumulation on
   inputs of their own with grad scales scale[k]; the losses of every micro-step and the accumulated gradients
   compared bit for bit. runs[v]: the micro-steps each backend replayed from its CUDA graph. */
static void same_bits(Harness *g, const Plan *variant, const float *scale, int n, long runs[2], HarnessCmp *c,
                      Err *err, int *rc) {
    GPT2Shape shape = config_shape(g->cfg);
    size_t sz[NUM_PARAM_TENSORS], np = gpt2_param_sizes(&shape, sz, NULL);
    BackendOptions opt[2] = {backend_options(g), backend_options(g)};
    opt[1].plan = variant;
    enum { MAX_MICRO = 4 };
    float *params = harness_hbuf(np), *grads[2] = {harness_hbuf(np), harness_hbuf(np)}, loss[2][MAX_MICRO] = {{0}};
    gpt2_init_params(&shape, params, 4321);
    harness_quantize(g, params, np);
    int32_t *in[MAX_MICRO], *tg = xmalloc((size_t)g->BT * 4);
    for (int k = 0; k < n; k++) {
        in[k] = xmalloc((size_t)g->BT * 4);
        for (int i = 0; i < g->BT; i++) in[k][i] = (int32_t)(rng_next(&g->rng) % (uint64_t)g->V);
    }
    for (int i = 0; i < g->BT; i++) tg[i] = (int32_t)(rng_next(&g->rng) % (uint64_t)g->V);
    *rc = 0;
    for (int v = 0; v < 2 && !*rc; v++) {
        Backend *be = cuda_backend_create(&opt[v], err);
        *rc = !be || be->write(be, BACKEND_PARAMS, params, err) || be->run(be, &(BackendRun){.phase = BACKEND_ZERO_GRADS}, err);
        for (int k = 0; k < n && !*rc; k++)
            *rc = be->run(be, &(BackendRun){.phase = BACKEND_FORWARD_BACKWARD, .inputs = in[k], .targets = tg,
                                            .grad_scale = scale[k], .loss = &loss[v][k]}, err);
        if (!*rc) *rc = be->read(be, BACKEND_GRADS, 0, grads[v], err);
        if (be) runs[v] = cuda_backend_graph_runs(be);
        if (be) be->destroy(be);
    }
    *c = (HarnessCmp){0, 0, ""};
    if (!*rc && memcmp(loss[0], loss[1], sizeof loss[0])) { c->bad = 1; snprintf(c->what, sizeof c->what, "the losses differ"); }
    if (!*rc && !c->bad && memcmp(grads[0], grads[1], np * 4)) {
        size_t n_diff = 0;
        for (size_t i = 0; i < np; i++) n_diff += grads[0][i] != grads[1][i];
        c->bad = 1;
        snprintf(c->what, sizeof c->what, "%zu of %zu accumulated gradients differ", n_diff, np);
    }
    free(params); free(grads[0]); free(grads[1]); free(tg);
    for (int k = 0; k < n; k++) free(in[k]);
}

/* The backward on two streams (Plan.streams 2: the weight gradients on a side stream) against the same plan on one:
   two micro-steps of gradient accumulation give the same bits, as the kernels and their sums are the same. A wait
   missing from runtime/cuda/step.c lets the side stream read a buffer the compute stream has already overwritten,
   and the bits differ (where the timing lets the race show: a test of the large configs, run by `gpt2gen test`,
   gives it the most room). Both plans replay the second micro-step from their CUDA graphs where Plan.graph is set,
   as training does. GPU against GPU: every size. */
void step_test_two_streams(Harness *g) {
    const char *name = "train_step on two streams = one stream (two micro-steps accumulated, same bits)";
    if (g->plan->streams != 2) { harness_skip(g, name, "the plan has one stream (train.streams = 1)"); return; }
    if (!g->cfg->run.train.deterministic) { harness_skip(g, name, "train.deterministic = false: cuDNN's dQ by atomics varies run to run"); return; }
    static Plan one;
    one = *g->plan;
    one.streams = 1;
    memory_plan(&one.memory, &one);
    const float scale[] = {0.5f, 0.5f};
    long runs[2] = {0, 0};
    HarnessCmp c;
    Err err = {{0}};
    int rc;
    same_bits(g, &one, scale, 2, runs, &c, &err, &rc);
    harness_finish(g, name, &c, &err, rc);
}

/* The micro-step as a CUDA graph (Plan.graph) against the same plan op by op: four micro-steps accumulated, on four
   inputs (the graph reads them from the buffers the host fills), with grad scales 0.5, 0.5, 0.5, 0.25: the first
   runs op by op, the second is recorded and run, the third replays that graph, the fourth is recorded again (its
   alpha differs). The same bits, and the graph ran three times (a graph that silently fell back to launching op by
   op would pass the comparison). */
void step_test_graph(Harness *g) {
    const char *name = "train_step as a CUDA graph = op by op (four micro-steps, recorded twice, same bits)";
    if (!g->plan->graph) { harness_skip(g, name, "the plan launches op by op (train.cuda_graph = false)"); return; }
    if (!g->cfg->run.train.deterministic) { harness_skip(g, name, "train.deterministic = false: cuDNN's dQ by atomics varies run to run"); return; }
    if (g->env && g->env->sync) { harness_skip(g, name, "GPT2GEN_SYNC checks each launch, which a graph does not"); return; }
    static Plan eager;
    eager = *g->plan;
    eager.graph = 0;
    const float scale[] = {0.5f, 0.5f, 0.5f, 0.25f};
    long runs[2] = {0, 0};
    HarnessCmp c;
    Err err = {{0}};
    int rc;
    same_bits(g, &eager, scale, 4, runs, &c, &err, &rc);
    if (!rc && !c.bad && (runs[0] != 3 || runs[1] != 0)) {
        c.bad = 1;
        snprintf(c.what, sizeof c.what, "micro-steps replayed from a graph: %ld with the graph (3 expected), %ld op by op",
                 runs[0], runs[1]);
    }
    harness_finish(g, name, &c, &err, rc);
}
