/* tune_env: the machine part of the tuning database's keys (see tune_env.h). */
#include "runtime/cuda/tune_env.h"
#include "runtime/cuda/cuda_api.h"
#include "gen/nvrtc.h"
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

/* cuDNN's version as cudnnGetVersion says it (91400 for 9.14.0), from the library the attention would load */
static void cudnn_version(char *out, size_t n) {
    const char *name = getenv("GPT2GEN_CUDNN_LIBRARY");
    snprintf(out, n, "none");
    if (name && !strcmp(name, "none")) return;
    void *h = dlopen(name && *name ? name : "libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    size_t (*get)(void) = (size_t (*)(void))dlsym(h, "cudnnGetVersion");
    if (get) snprintf(out, n, "%zu", get());
    dlclose(h);
}

int tune_env_probe(TuneEnv *env, char *cublaslt, size_t n, Err *err) {
    memset(env, 0, sizeof *env);
    snprintf(cublaslt, n, "none");
    const char *hook = getenv("GPT2GEN_TUNE_ENV");
    Err why;
    int have_gpu = cuda_driver_load(&why) == 0;
    CUdevice dev;
    int count = 0;
    if (have_gpu && (cu.cuDeviceGetCount(&count) != CUDA_SUCCESS || count < 1 || cu.cuDeviceGet(&dev, 0) != CUDA_SUCCESS)) {
        have_gpu = 0;
        snprintf(why.msg, sizeof why.msg, "no GPU: the CUDA driver sees no device");
    }
    if (!have_gpu && !(hook && *hook)) return err_set(err, "%s", why.msg);
    snprintf(env->gpu, sizeof env->gpu, "none");
    snprintf(env->arch, sizeof env->arch, "none");
    snprintf(env->driver, sizeof env->driver, "none");
    if (have_gpu) {
        char name[sizeof env->gpu] = "";
        int major = 0, minor = 0, drv = 0;
        cu.cuDeviceGetName(name, sizeof name, dev);
        cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
        cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
        cu.cuDriverGetVersion(&drv);
        snprintf(env->gpu, sizeof env->gpu, "%s", name);
        snprintf(env->arch, sizeof env->arch, "sm_%d%d", major, minor);
        snprintf(env->driver, sizeof env->driver, "%d", drv);
    }
    snprintf(env->cuda, sizeof env->cuda, "%d", CUDA_VERSION);
    nvrtc_version_string(env->nvrtc, sizeof env->nvrtc);
    cudnn_version(env->cudnn, sizeof env->cudnn);
    if (cublaslt_open(&why) == 0) {
        size_t v = lt.cublasLtGetVersion();
        snprintf(cublaslt, n, "%zu", v);
    }
    char bad[256];
    if (hook && *hook && tune_env_parse(env, hook, bad, sizeof bad))
        return err_set(err, "GPT2GEN_TUNE_ENV: %s", bad);
    return 0;
}
