/* nocuda: the CUDA backend's public functions (runtime/gpu.h, and cuda_backend_create) in a gpt2gen built
   without the CUDA toolkit's headers (the Makefile leaves runtime/cuda/ out and builds this file instead, with
   GPT2GEN_NO_CUDA naming the header it did not find). Each says so: the CPU backend is the only one, automatic
   choices pick it, and asking for the GPU is one clear error. */
#include "runtime/gpu.h"
#include "runtime/backend.h"
#include "gen/nvrtc.h"
#include <stdio.h>
#include <string.h>

#ifndef GPT2GEN_NO_CUDA
#define GPT2GEN_NO_CUDA "the CUDA headers"
#endif

#define NO_CUDA_MSG "this gpt2gen was built without the CUDA toolkit (no " GPT2GEN_NO_CUDA " at build time): " \
                    "rebuild it with the toolkit (make CUDA_HOME=...) to use the GPU"

int cuda_backend_built(Err *err) { return err_set(err, "%s", NO_CUDA_MSG); }

int cuda_driver_present(char *why, size_t n) {
    if (why) snprintf(why, n, "%s", NO_CUDA_MSG);
    return 0;
}

int cuda_device_arch(int ordinal, char arch[16], Err *err) {
    (void)ordinal;
    arch[0] = 0;
    return err_set(err, "%s", NO_CUDA_MSG);
}

int cuda_device_memory(int ordinal, size_t *free_b, size_t *total_b, Err *err) {
    (void)ordinal;
    *free_b = *total_b = 0;
    return err_set(err, "%s", NO_CUDA_MSG);
}

void cuda_pick_arch(const char *explicit_arch, const char *config_arch, char arch[16], const char **note) {
    if (explicit_arch && *explicit_arch) { snprintf(arch, 16, "%s", explicit_arch); *note = "--arch"; }
    else if (config_arch && *config_arch) { snprintf(arch, 16, "%s", config_arch); *note = "config"; }
    else { snprintf(arch, 16, "sm_90"); *note = "default: no GPU found"; }
}

/* No GPU; the tuning key only from the test hook GPT2GEN_TUNE_ENV, as runtime/cuda/tune_env.c makes it without a GPU */
int tune_env_probe(TuneEnv *key, char *cublaslt, size_t n, const Env *e, Err *err) {
    e = env_or_defaults(e);
    memset(key, 0, sizeof *key);
    key->templates = e->templates;
    snprintf(cublaslt, n, "none");
    if (!e->tune_env) return err_set(err, "%s", NO_CUDA_MSG);
    snprintf(key->gpu, sizeof key->gpu, "none");
    snprintf(key->arch, sizeof key->arch, "none");
    snprintf(key->driver, sizeof key->driver, "none");
    snprintf(key->cuda, sizeof key->cuda, "none");
    nvrtc_version_string(e, key->nvrtc, sizeof key->nvrtc);
    snprintf(key->cudnn, sizeof key->cudnn, "none");
    char bad[256];
    if (tune_env_parse(key, e->tune_env, bad, sizeof bad)) return err_set(err, "GPT2GEN_TUNE_ENV: %s", bad);
    return 0;
}

void cuda_probe(CudaProbe *p, const Env *env) {
    memset(p, 0, sizeof *p);
    snprintf(p->why, sizeof p->why, "%s", NO_CUDA_MSG);
    Err e;
    p->key_ok = tune_env_probe(&p->key, p->cublaslt, sizeof p->cublaslt, env, &e) == 0;
}

/* no cuDNN in a gpt2gen without the CUDA backend */
static int cudnn_serves_none(void *ctx, const Plan *plan, char *why, size_t n) {
    (void)ctx;
    (void)plan;
    snprintf(why, n, "no cuDNN: %s", NO_CUDA_MSG);
    return 0;
}

const PlanFacts *cuda_plan_facts(CudaFacts *f, const Env *env, int device) {
    f->env = env;
    f->device = device;
    f->facts.cudnn_attention = cudnn_serves_none;
    f->facts.ctx = f;
    return &f->facts;
}

int nccl_load(const Env *env, int *version, Err *err) {
    (void)env;
    if (version) *version = 0;
    return err_set(err, "several GPUs: %s", NO_CUDA_MSG);
}

int nccl_unique_id(void *id, Err *err) {
    (void)id;
    return err_set(err, "several GPUs: %s", NO_CUDA_MSG);
}

Backend *cuda_backend_create(const BackendOptions *opt, Err *err) {
    (void)opt;
    err_set(err, "%s", NO_CUDA_MSG);
    return NULL;
}

size_t cuda_backend_arena_bytes(Backend *be) {
    (void)be;
    return 0;
}

long cuda_backend_graph_runs(Backend *be) {
    (void)be;
    return 0;
}
