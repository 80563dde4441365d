/* backend: what every backend checks of its options, and the choice of backend (see backend.h). */
#include "runtime/backend.h"
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

int backend_forward_backward(Backend *be, const int32_t *inputs, const int32_t *targets, float grad_scale, float *loss,
                             Err *err) {
    return be->forward(be, inputs, targets, loss, err) || be->backward(be, grad_scale, err) ? -1 : 0;
}

int backend_check_cache(const BackendOptions *o, const char *name, Err *err) {
    const Plan *p = o->plan;
    if (!p->step.fills_cache)
        return o->cache ? err_set(err, "%s backend: plan \"%s\" fills no key/value cache", name, p->name) : 0;
    const Backend *d = o->cache;
    if (!d || !d->decode)
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

const PlanFacts *backend_plan_facts(CudaFacts *f, const char *which, const Env *env, int device) {
    return strcmp(which, "cpu") ? cuda_plan_facts(f, env, device) : NULL;
}
