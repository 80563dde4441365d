/* cpu_backend: the Backend interface (runtime/backend.h) over the fp32 reference ops in cpu_ops.c.
 * fp32 throughout: the plan's precision is ignored, this backend is the reference the others are held to; of the
 * plan it reads the model and the step shape only.
 * The forward and the backward are the plan's schedule (gen/schedule.h), run by cpu_step.c: the forward keeps every
 * activation the backward needs; the backward walks the layers in reverse with a few one-layer gradient buffers,
 * accumulating into the parameter gradients. A forward plan's backend has no
 * gradients, no optimizer state and no backward, and with shared weights no parameters of its own. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "runtime/backend.h"
#include "runtime/cpu/cpu_internal.h"
#include "runtime/ranks/comm_socket.h"


static float *falloc(size_t n) { return xcalloc(n, sizeof(float)); }

/* the classifier's weight: wte, or the untied head */
static int cpu_head(const GPT2Shape *s) { return s->untied ? P_LMHEAD : P_WTE; }

static void acts_alloc(Acts *a, const GPT2Shape *s, int B, int T) {
    size_t L = s->n_layer, C = s->n_embd, BT = (size_t)B * T, att = (size_t)B * s->n_head * T * T;
    size_t QKV = gpt2_qkv_width(s), F = gpt2_ffn(s), qk = s->qk_norm, swiglu = s->mlp == MLP_SWIGLU;
    a->encoded = falloc(BT * C);
    a->ln1 = falloc(L * BT * C); a->ln1_mean = falloc(L * BT); a->ln1_rstd = falloc(L * BT);
    a->qkv = falloc(L * BT * QKV);
    a->qkv_pre = falloc(qk * L * BT * QKV); a->qk_rstd = falloc(qk * L * BT * (s->n_head + gpt2_kv_heads(s)));
    a->atty = falloc(L * BT * C);
    a->preatt = falloc(att); a->att = falloc(L * att);
    a->tmp = falloc(BT * C);
    a->residual2 = falloc(L * BT * C);
    a->ln2 = falloc(L * BT * C); a->ln2_mean = falloc(L * BT); a->ln2_rstd = falloc(L * BT);
    a->fch = falloc(L * BT * F); a->fch_gelu = falloc(L * BT * F); a->fcg = falloc(swiglu * L * BT * F);
    a->residual3 = falloc(L * BT * C);
    a->lnf = falloc(BT * C); a->lnf_mean = falloc(BT); a->lnf_rstd = falloc(BT);
    a->logits = falloc(BT * s->padded_vocab_size);
    a->losses = falloc(BT);
}

static void grads_alloc(Grads *d, const GPT2Shape *s, int B, int T) {
    size_t C = s->n_embd, BT = (size_t)B * T, att = (size_t)B * s->n_head * T * T, F = gpt2_ffn(s);
    d->dres = falloc(BT * C); d->dln = falloc(BT * C); d->datty = falloc(BT * C);
    d->dqkv = falloc(BT * gpt2_qkv_width(s));
    d->dpreatt = falloc(att); d->datt = falloc(att);
    d->dfch = falloc(BT * F); d->dfch_gelu = falloc(BT * F); d->dfcg = falloc((s->mlp == MLP_SWIGLU) * BT * F);
    d->dlogits = falloc(BT * s->padded_vocab_size);
}

/* Every pointer member of a struct of float pointers, freed in one loop. */
static void free_all(void *st, size_t bytes) {
    float **p = st;
    for (size_t i = 0; i < bytes / sizeof(float *); i++) free(p[i]);
}

/* ---------------------------------------------------------------------------------------------------- */
static int check_tokens(const Backend *be, const int32_t *tok, const char *what, Err *err) {
    int V = be->plan->model.vocab_size;
    for (int i = 0; i < be->plan->step.B * be->plan->step.T; i++)
        if (tok[i] < 0 || tok[i] >= V)
            return err_set(err, "cpu backend: %s[%d] is %d, expected a token id in [0, %d)", what, i, (int)tok[i], V);
    return 0;
}

static int cpu_forward(Backend *be, const int32_t *inputs, const int32_t *targets, float *loss, Err *err) {
    Cpu *c = impl(be);
    Acts *a = &c->a;
    int B = be->plan->step.B, T = be->plan->step.T, C = be->plan->model.n_embd, N = B * T;
    int V = be->plan->model.vocab_size, Vp = be->plan->model.padded_vocab_size;
    if (check_tokens(be, inputs, "inputs", err)) return -1;
    if (targets && check_tokens(be, targets, "targets", err)) return -1;
    memcpy(c->inputs, inputs, (size_t)N * sizeof(int32_t));
    c->have_targets = targets != NULL;
    if (targets) memcpy(c->targets, targets, (size_t)N * sizeof(int32_t));

    if (cpu_run_phase(be, NULL, &be->plan->schedule.forward, err)) return -1;
    if (c->cache_of) return 0;   /* a prefill: the keys and values are what it is for, no logits */
    const GPT2Shape *s = &be->plan->model;
    cpu_matmul_forward(a->logits, a->lnf, c->p[cpu_head(s)], NULL, N, C, Vp);
    if (s->logit_softcap > 0) cpu_softcap_forward(a->logits, (size_t)N * Vp, (float)s->logit_softcap);
    c->have_forward = 1;
    if (!targets) return 0;
    cpu_softmax_crossentropy(a->losses, NULL, a->logits, targets, 0.0f, N, V, Vp);
    double sum = 0.0;
    for (int i = 0; i < N; i++) sum += a->losses[i];
    if (loss) *loss = (float)(sum / N);
    return 0;
}

/* ---------------------------------------------------------------------------------------------------- */
static void zero(float *p, size_t n) { memset(p, 0, n * sizeof(float)); }

static int cpu_backward(Backend *be, const BackendRun *r, Err *err) {
    Cpu *c = impl(be);
    Acts *a = &c->a;
    Grads *d = &c->d;
    int N = be->plan->step.B * be->plan->step.T, C = be->plan->model.n_embd;
    int V = be->plan->model.vocab_size, Vp = be->plan->model.padded_vocab_size;
    if (!c->have_forward || !c->have_targets)
        return err_set(err, "cpu backend: backward needs a forward with targets first");

    /* loss = mean of N per-row losses: each row's gradient carries grad_scale / N */
    const GPT2Shape *s = &be->plan->model;
    cpu_softmax_crossentropy(a->losses, d->dlogits, a->logits, c->targets, r->grad_scale / (float)N, N, V, Vp);
    if (s->logit_softcap > 0) cpu_softcap_backward(d->dlogits, a->logits, (size_t)N * Vp, (float)s->logit_softcap);
    zero(d->dln, (size_t)N * C);
    cpu_matmul_backward(d->dln, c->g[cpu_head(s)], NULL, d->dlogits, a->lnf, c->p[cpu_head(s)], N, C, Vp);
    /* then from d(loss)/d(lnf) down through the layers, and the embeddings */
    return cpu_run_phase(be, r, &be->plan->schedule.backward, err) ||
           cpu_run_list(be, r, &be->plan->schedule.embed_backward, err) ? -1 : 0;
}

/* ---------------------------------------------------------------------------------------------------- */
/* The arrays kept whole in host memory (backend.h: BackendArray); the logits and losses are read apart. */
static float *array(Cpu *c, BackendArray which) {
    switch (which) {
    case BACKEND_PARAMS: return c->params;
    case BACKEND_GRADS: return c->grads;
    case BACKEND_ADAM_M: return c->m;
    case BACKEND_ADAM_V: return c->v;
    default: return NULL;
    }
}

static int cpu_read(Backend *be, BackendArray which, size_t index, float *out, Err *err) {
    Cpu *c = impl(be);
    if (backend_check_array(be, which, index, 0, err)) return -1;
    size_t n = backend_array_len(be, which);
    if (which == BACKEND_LOGITS) {
        if (c->cache_of) return err_set(err, "cpu backend: a prefill keeps no logits (the decode step has them)");
        if (!c->have_forward) return err_set(err, "cpu backend: logits read before any forward");
        memcpy(out, c->a.logits + index * be->plan->model.padded_vocab_size, n * sizeof(float));
    } else if (which == BACKEND_LOSSES) {
        if (!c->have_forward || !c->have_targets || c->cache_of)
            return err_set(err, "cpu backend: the losses need a forward with targets first");
        memcpy(out, c->a.losses, n * sizeof(float));
    } else
        memcpy(out, array(c, which), n * sizeof(float));
    return 0;
}

static int cpu_write(Backend *be, BackendArray which, const float *in, Err *err) {
    if (backend_check_array(be, which, 0, 1, err)) return -1;
    memcpy(array(impl(be), which), in, backend_array_len(be, which) * sizeof(float));
    return 0;
}

static int cpu_zero_grad(Backend *be, Err *err) {
    (void)err;
    zero(impl(be)->grads, be->num_params);
    return 0;
}

/* Sum of squares in fixed chunks from offset, the chunk sums added in order: the same bits on any thread count. */
static int cpu_grad_sumsq(Backend *be, size_t offset, size_t n, double *sumsq, Err *err) {
    enum { CHUNK = 1 << 16 };
    (void)err;
    const float *g = impl(be)->grads + offset;
    size_t nchunks = (n + CHUNK - 1) / CHUNK;
    double *part = xcalloc(nchunks ? nchunks : 1, sizeof(double));
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < nchunks; k++) {
        size_t end = (k + 1) * CHUNK < n ? (k + 1) * CHUNK : n;
        double s = 0.0;
        for (size_t i = k * CHUNK; i < end; i++) s += (double)g[i] * g[i];
        part[k] = s;
    }
    double total = 0.0;
    for (size_t k = 0; k < nchunks; k++) total += part[k];
    free(part);
    *sumsq = total;
    return 0;
}

static int cpu_update(Backend *be, const BackendRun *r, Err *err) {
    Cpu *c = impl(be);
    const BackendAdamW *h = &r->adamw;
    (void)err;
    size_t lo = be->opt_offset, hi = be->opt_offset + be->opt_count;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        size_t off = c->offsets[i], n = c->sizes[i];
        /* wte's (and an untied head's) rows V..Vp-1 are padding: never updated, so they stay exactly zero */
        if (i == P_WTE || i == P_LMHEAD) n = n ? (size_t)be->plan->model.vocab_size * be->plan->model.n_embd : 0;
        /* only the part of the tensor inside this backend's range; m and v start at opt_offset */
        size_t a = off > lo ? off : lo, e = off + n < hi ? off + n : hi;
        if (a >= e) continue;
        cpu_adamw(c->params + a, c->grads + a, c->m + (a - lo), c->v + (a - lo), e - a, h->lr, h->beta1, h->beta2, h->eps,
                  gpt2_param_decays(i) ? h->weight_decay : 0.0f, r->grad_scale, r->step);
    }
    return 0;
}

static int cpu_run(Backend *be, const BackendRun *r, Err *err) {
    if (backend_check_run(be, r, err)) return -1;
    switch (r->phase) {
    case BACKEND_FORWARD: return cpu_forward(be, r->inputs, r->targets, r->loss, err);
    case BACKEND_FORWARD_BACKWARD: return backend_forward_backward(be, r, err);
    case BACKEND_BACKWARD: return cpu_backward(be, r, err);
    case BACKEND_DECODE: return cpu_decode(be, r->decode, err);
    case BACKEND_ZERO_GRADS: return cpu_zero_grad(be, err);
    case BACKEND_GRAD_SUMSQ: return cpu_grad_sumsq(be, r->offset, r->count, r->sumsq, err);
    case BACKEND_UPDATE: return cpu_update(be, r, err);
    default: return err_set(err, "cpu backend: no phase %d", (int)r->phase);
    }
}

/* the collectives' buffers: the gradients and parameters themselves (fp32) */
static void *cpu_device_array(Backend *be, BackendArray which) {
    return which == BACKEND_PARAMS || which == BACKEND_GRADS ? array(impl(be), which) : NULL;
}

static void cpu_destroy(Backend *be) {
    if (!be) return;
    Cpu *c = impl(be);
    if (c->own_params) free(c->params);
    free(c->grads); free(c->m); free(c->v);
    free_all(&c->a, sizeof c->a);
    free_all(&c->d, sizeof c->d);
    free(c->inputs); free(c->targets);
    free(c->kcache); free(c->vcache);
    free(c);
    free(be);
}

/* ---------------------------------------------------------------------------------------------------- */
static int check_options(const BackendOptions *o, Err *err) {
    if (!o->plan) return err_set(err, "cpu backend: no plan");
    const GPT2Shape *s = &o->plan->model;
    const StepShape *st = &o->plan->step;
    if (st->B < 1 || st->T < 1) return err_set(err, "cpu backend: B=%d, T=%d, expected both >= 1", st->B, st->T);
    if (!o->plan->schedule.forward.block.n)
        return err_set(err, "cpu backend: plan %s has no schedule (gen/schedule.h: schedule_make)", o->plan->name);
    if (s->n_layer < 1 || s->n_head < 1 || s->n_embd < 1 || s->vocab_size < 1)
        return err_set(err, "cpu backend: n_layer=%d, n_head=%d, n_embd=%d, vocab_size=%d, expected all >= 1",
                       s->n_layer, s->n_head, s->n_embd, s->vocab_size);
    if (s->n_embd % s->n_head)
        return err_set(err, "cpu backend: n_embd=%d is not a multiple of n_head=%d", s->n_embd, s->n_head);
    if (st->T > s->max_seq_len)
        return err_set(err, "cpu backend: T=%d is longer than max_seq_len=%d", st->T, s->max_seq_len);
    if (s->padded_vocab_size < s->vocab_size)
        return err_set(err, "cpu backend: padded_vocab_size=%d is smaller than vocab_size=%d",
                       s->padded_vocab_size, s->vocab_size);
    size_t sizes[NUM_PARAM_TENSORS], np = gpt2_param_sizes(s, sizes, NULL);
    if (o->opt_count && (o->opt_offset > np || o->opt_count > np - o->opt_offset))
        return err_set(err, "cpu backend: optimizer range [%zu, +%zu) is outside the %zu parameters", o->opt_offset, o->opt_count, np);
    return backend_check_weights(o, "cpu", err) || backend_check_cache(o, "cpu", err) ? -1 : 0;
}

/* ranks as processes on the CPU: joined over a Unix socket (runtime/ranks/comm_socket.h) */
static Comm *cpu_make_comm(Backend *be, const void *id, int world, int rank, double timeout_s, Err *err) {
    (void)be;
    return comm_socket_create(id, world, rank, timeout_s, err);
}

Backend *cpu_backend_create(const BackendOptions *opt, Err *err) {
    if (check_options(opt, err)) return NULL;
    Backend *be = xcalloc(1, sizeof *be);
    Cpu *c = xcalloc(1, sizeof *c);
    const StepShape *st = &opt->plan->step;
    int train = st->kind == STEP_TRAIN;
    be->name = "cpu";
    be->comm_prec = PREC_FP32;
    be->plan = opt->plan;
    be->impl = c;
    be->num_params = gpt2_param_sizes(&be->plan->model, c->sizes, c->offsets);
    c->own_params = !st->shared_weights;
    c->params = c->own_params ? falloc(be->num_params) : impl(opt->weights)->params;
    be->opt_offset = opt->opt_count ? opt->opt_offset : 0;
    be->opt_count = !train ? 0 : opt->opt_count ? opt->opt_count : be->num_params;
    if (train) {
        c->grads = falloc(be->num_params);
        c->m = falloc(be->opt_count); c->v = falloc(be->opt_count);
        grads_alloc(&c->d, &be->plan->model, st->B, st->T);
    }
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        c->p[i] = c->params + c->offsets[i];
        c->g[i] = train ? c->grads + c->offsets[i] : NULL;
    }
    acts_alloc(&c->a, &be->plan->model, st->B, st->T);
    c->inputs = xcalloc((size_t)st->B * st->T, sizeof(int32_t));
    c->targets = xcalloc((size_t)st->B * st->T, sizeof(int32_t));
    c->cache_of = opt->cache;
    if (st->kind == STEP_DECODE) {
        const GPT2Shape *s = &be->plan->model;   /* the keys and values of n_kv_head heads */
        size_t cache = (size_t)s->n_layer * st->B * st->cache_T * gpt2_kv_heads(s) * gpt2_head_size(s);
        c->kcache = falloc(cache); c->vcache = falloc(cache);
    }

    be->run = cpu_run;
    be->read = cpu_read;
    be->write = cpu_write;
    be->device_array = cpu_device_array;
    be->destroy = cpu_destroy;
    if (train) be->make_comm = cpu_make_comm;
    return be;
}
