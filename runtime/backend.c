/* backend: what every backend checks of its options and of each call, which phases and arrays a plan's backend has,
   the choice of backend, and the helpers built on Backend.run (see backend.h). */
#include "runtime/backend.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

int backend_check_weights(const BackendOptions *o, const char *name, Err *err) {
    const Plan *p = o->plan;
    if (!p->step.shared_weights)
        return o->weights ? err_set(err, "%s backend: plan \"%s\" keeps weights of its own: no other backend's to run with",
                                    name, p->name) : 0;
    if (!o->weights)
        return err_set(err, "%s backend: plan \"%s\" runs with another backend's weights, and none was given", name, p->name);
    if (strcmp(o->weights->name, name))
        return err_set(err, "%s backend: plan \"%s\" cannot run with the weights of a %s backend", name, p->name,
                       o->weights->name);
    if (memcmp(&o->weights->plan->model, &p->model, sizeof p->model))
        return err_set(err, "%s backend: plan \"%s\" is for another model than the weights it was given", name, p->name);
    return 0;
}

int backend_check_cache(const BackendOptions *o, const char *name, Err *err) {
    const Plan *p = o->plan;
    if (!p->step.fills_cache)
        return o->cache ? err_set(err, "%s backend: plan \"%s\" fills no key/value cache", name, p->name) : 0;
    const Backend *d = o->cache;
    if (!d || !backend_runs(d, BACKEND_DECODE))
        return err_set(err, "%s backend: plan \"%s\" is a prefill and needs a decode backend's cache to fill", name, p->name);
    if (strcmp(d->name, name) || memcmp(&d->plan->model, &p->model, sizeof p->model) || d->plan->step.B != p->step.B)
        return err_set(err, "%s backend: plan \"%s\" (%d rows) cannot fill the cache of a %s backend's plan \"%s\" (%d rows, "
                       "another model or rows)", name, p->name, p->step.B, d->name, d->plan->name, d->plan->step.B);
    if (p->step.T > p->model.max_seq_len)
        return err_set(err, "%s backend: a prefill of %d positions does not fit the cache of %d", name, p->step.T,
                       p->model.max_seq_len);
    return 0;
}

Backend *backend_create(const BackendOptions *o, const char *which, Err *err) {
    if (!strcmp(which, "cpu")) return cpu_backend_create(o, err);
    if (!strcmp(which, "cuda")) return cuda_backend_create(o, err);
    Backend *b = cuda_backend_create(o, err);
    if (b) return b;
    fprintf(stderr, "gpt2gen: %s; running on the CPU backend (fp32)\n", err->msg);
    return cpu_backend_create(o, err);
}

int backend_runs(const Backend *be, BackendPhase phase) {
    switch (be->plan->step.kind) {
    case STEP_TRAIN: return phase != BACKEND_DECODE && phase < BACKEND_PHASES;
    case STEP_FORWARD: return phase == BACKEND_FORWARD;
    case STEP_DECODE: return phase == BACKEND_DECODE;
    }
    return 0;
}

size_t backend_array_len(const Backend *be, BackendArray which) {
    const StepShape *st = &be->plan->step;
    int train = st->kind == STEP_TRAIN;
    switch (which) {
    case BACKEND_PARAMS: return be->num_params;
    case BACKEND_GRADS: return train ? be->num_params : 0;
    case BACKEND_ADAM_M: case BACKEND_ADAM_V: return train ? be->opt_count : 0;
    case BACKEND_LOGITS: return (size_t)be->plan->model.vocab_size;
    case BACKEND_LOSSES: return st->kind != STEP_DECODE ? (size_t)st->B * st->T : 0;
    case BACKEND_ARRAYS: break;
    }
    return 0;
}

static const char *phase_name(BackendPhase p) {
    static const char *const names[BACKEND_PHASES] = {"forward", "forward and backward", "backward", "decode",
                                                      "zeroing of the gradients", "gradient norm", "AdamW update"};
    return (unsigned)p < BACKEND_PHASES ? names[p] : "unknown phase";
}

static const char *array_name(BackendArray a) {
    static const char *const names[BACKEND_ARRAYS] = {"parameters", "gradients", "AdamW m", "AdamW v", "logits",
                                                      "losses"};
    return (unsigned)a < BACKEND_ARRAYS ? names[a] : "unknown array";
}

int backend_check_run(const Backend *be, const BackendRun *r, Err *err) {
    const char *what = phase_name(r->phase);
    if (!backend_runs(be, r->phase))
        return err_set(err, "%s backend: plan \"%s\" has no %s", be->name, be->plan->name, what);
    switch (r->phase) {
    case BACKEND_FORWARD_BACKWARD:
        if (!r->targets) return err_set(err, "%s backend: a %s needs targets", be->name, what);
        /* fall through */
    case BACKEND_FORWARD:
        return r->inputs ? 0 : err_set(err, "%s backend: a %s needs inputs", be->name, what);
    case BACKEND_DECODE: return r->decode ? 0 : err_set(err, "%s backend: a decode needs its DecodeRun", be->name);
    case BACKEND_GRAD_SUMSQ:
        if (!r->sumsq) return err_set(err, "%s backend: a gradient norm needs somewhere to put it", be->name);
        if (r->offset > be->num_params || r->count > be->num_params - r->offset)
            return err_set(err, "%s backend: gradient range [%zu, +%zu) is outside the %zu parameters", be->name,
                           r->offset, r->count, be->num_params);
        return 0;
    case BACKEND_UPDATE:
        return r->step >= 1 ? 0 : err_set(err, "%s backend: update step is %d, expected 1 or more (1-based)", be->name,
                                          r->step);
    default: return 0;
    }
}

int backend_check_array(const Backend *be, BackendArray which, size_t index, int write, Err *err) {
    const char *what = array_name(which);
    if (!backend_array_len(be, which))
        return err_set(err, "%s backend: plan \"%s\" keeps no %s", be->name, be->plan->name, what);
    if (write && which != BACKEND_PARAMS && which != BACKEND_ADAM_M && which != BACKEND_ADAM_V)
        return err_set(err, "%s backend: the %s are read only", be->name, what);
    size_t rows = which == BACKEND_LOGITS ? (size_t)be->plan->step.B * be->plan->step.T : 1;
    if (index >= rows)
        return err_set(err, "%s backend: row %zu of the %s, outside the %zu rows (B=%d, T=%d)", be->name, index, what,
                       rows, be->plan->step.B, be->plan->step.T);
    return 0;
}

int backend_forward_backward(Backend *be, const BackendRun *r, Err *err) {
    BackendRun f = {.phase = BACKEND_FORWARD, .inputs = r->inputs, .targets = r->targets, .loss = r->loss};
    BackendRun b = {.phase = BACKEND_BACKWARD, .grad_scale = r->grad_scale, .grad_ready = r->grad_ready,
                    .grad_ready_ctx = r->grad_ready_ctx};
    return be->run(be, &f, err) || be->run(be, &b, err) ? -1 : 0;
}

int backend_grad_norm(Backend *be, float *norm, Err *err) {
    double s;
    if (be->run(be, &(BackendRun){.phase = BACKEND_GRAD_SUMSQ, .offset = 0, .count = be->num_params, .sumsq = &s}, err))
        return -1;
    *norm = (float)sqrt(s);
    return 0;
}

const PlanFacts *backend_plan_facts(CudaFacts *f, const char *which, const Env *env, int device) {
    return strcmp(which, "cpu") ? cuda_plan_facts(f, env, device) : NULL;
}
