/* tune_env: the machine part of the tuning database's keys (runtime/gpu.h, tune_env_probe). */
#include "runtime/gpu.h"
#include "runtime/cuda/cuda_api.h"
#include "gen/nvrtc.h"
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

/* cuDNN's version as cudnnGetVersion says it (91400 for 9.14.0), from the library the attention would load */
static void cudnn_version(const char *name, char *out, size_t n) {
    snprintf(out, n, "none");
    if (name && !strcmp(name, "none")) return;
    void *h = dlopen(name ? name : "libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    size_t (*get)(void) = (size_t (*)(void))dlsym(h, "cudnnGetVersion");
    if (get) snprintf(out, n, "%zu", get());
    dlclose(h);
}

int tune_env_probe(TuneEnv *key, char *cublaslt, size_t n, const Env *e, Err *err) {
    e = env_or_defaults(e);
    memset(key, 0, sizeof *key);
    key->templates = e->templates;
    snprintf(cublaslt, n, "none");
    const char *hook = e->tune_env;
    Err why;
    int have_gpu = cuda_driver_load(&why) == 0;
    CUdevice dev;
    int count = 0;
    if (have_gpu && (cu.cuDeviceGetCount(&count) != CUDA_SUCCESS || count < 1 || cu.cuDeviceGet(&dev, 0) != CUDA_SUCCESS)) {
        have_gpu = 0;
        snprintf(why.msg, sizeof why.msg, "no GPU: the CUDA driver sees no device");
    }
    if (!have_gpu && !hook) return err_set(err, "%s", why.msg);
    snprintf(key->gpu, sizeof key->gpu, "none");
    snprintf(key->arch, sizeof key->arch, "none");
    snprintf(key->driver, sizeof key->driver, "none");
    if (have_gpu) {
        char name[sizeof key->gpu] = "";
        int major = 0, minor = 0, drv = 0;
        cu.cuDeviceGetName(name, sizeof name, dev);
        cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
        cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
        cu.cuDriverGetVersion(&drv);
        snprintf(key->gpu, sizeof key->gpu, "%s", name);
        snprintf(key->arch, sizeof key->arch, "sm_%d%d", major, minor);
        snprintf(key->driver, sizeof key->driver, "%d", drv);
    }
    snprintf(key->cuda, sizeof key->cuda, "%d", CUDA_VERSION);
    nvrtc_version_string(e, key->nvrtc, sizeof key->nvrtc);
    cudnn_version(e->cudnn_library, key->cudnn, sizeof key->cudnn);
    if (cublaslt_open(&why) == 0) {
        size_t v = lt.cublasLtGetVersion();
        snprintf(cublaslt, n, "%zu", v);
    }
    char bad[256];
    if (hook && tune_env_parse(key, hook, bad, sizeof bad))
        return err_set(err, "GPT2GEN_TUNE_ENV: %s", bad);
    return 0;
}

void cuda_probe(CudaProbe *p, const Env *env) {
    memset(p, 0, sizeof *p);
    Err e = {{0}};
    if (cuda_device_arch(0, p->arch, &e) || cu.cuDeviceGetCount(&p->count) != CUDA_SUCCESS) p->count = 0;
    snprintf(p->why, sizeof p->why, "%.255s", e.msg);
    p->key_ok = tune_env_probe(&p->key, p->cublaslt, sizeof p->cublaslt, env, &e) == 0;
}
