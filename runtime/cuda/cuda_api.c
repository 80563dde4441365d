#include "runtime/cuda/cuda_api.h"
#include <stdio.h>
#include <dlfcn.h>
#include <string.h>

CudaDriver cu;
CublasLt lt;

#define CUDA_API_STR2(x) #x
#define CUDA_API_STR(x) CUDA_API_STR2(x)

int cuda_driver_present(char *why, size_t n) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { if (why) snprintf(why, n, "no GPU: libcuda.so.1 not found (%s)", dlerror()); return 0; }
    dlclose(h);
    return 1;
}

const char *cuda_err_string(CUresult r, char *buf, size_t n) {
    const char *name = NULL, *desc = NULL;
    if (cu.cuGetErrorName) cu.cuGetErrorName(r, &name);
    if (cu.cuGetErrorString) cu.cuGetErrorString(r, &desc);
    snprintf(buf, n, "%s (%s)", name ? name : "CUDA error", desc ? desc : "no description");
    return buf;
}

static int load_driver(Err *err) {
    if (cu.lib) return 0;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return err_set(err, "no GPU: libcuda.so.1 not found (%s)", dlerror());
    CudaDriver d = {.lib = h};
#define LOAD(name) \
    d.name = (__typeof__(d.name))dlsym(h, CUDA_API_STR(name)); \
    if (!d.name) { dlclose(h); return err_set(err, "the CUDA driver lacks %s: driver too old for CUDA 13", CUDA_API_STR(name)); }
    CUDA_DRIVER_FUNCS(LOAD)
#undef LOAD
    cu = d;
    return 0;
}

int cuda_open(CudaDevice *d, Err *err) {
    static CudaDevice opened;
    static int is_open;
    if (is_open) { *d = opened; return 0; }
    if (load_driver(err)) return -1;
    char eb[256];
    CUresult r = cu.cuInit(0);
    if (r == CUDA_ERROR_NO_DEVICE) return err_set(err, "no GPU: the CUDA driver is installed but sees no device");
    if (r != CUDA_SUCCESS) return err_set(err, "no GPU: cuInit failed: %s", cuda_err_string(r, eb, sizeof eb));
    int count = 0;
    if (cu.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) return err_set(err, "no GPU: the CUDA driver sees no device");
    CudaDevice o;
    memset(&o, 0, sizeof o);
    if ((r = cu.cuDeviceGet(&o.dev, 0)) != CUDA_SUCCESS) return err_set(err, "cuDeviceGet(0): %s", cuda_err_string(r, eb, sizeof eb));
    cu.cuDeviceGetName(o.name, sizeof o.name, o.dev);
    cu.cuDeviceGetAttribute(&o.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, o.dev);
    cu.cuDeviceGetAttribute(&o.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, o.dev);
    cu.cuDeviceGetAttribute(&o.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, o.dev);
    cu.cuDeviceTotalMem(&o.total_mem, o.dev);
    cu.cuDriverGetVersion(&o.driver_version);
    if ((r = cu.cuDevicePrimaryCtxRetain(&o.ctx, o.dev)) != CUDA_SUCCESS)
        return err_set(err, "cannot create a context on GPU 0 (%s): %s", o.name, cuda_err_string(r, eb, sizeof eb));
    if ((r = cu.cuCtxSetCurrent(o.ctx)) != CUDA_SUCCESS) return err_set(err, "cuCtxSetCurrent: %s", cuda_err_string(r, eb, sizeof eb));
    opened = o;
    is_open = 1;
    *d = o;
    return 0;
}

int cuda_device_arch(char arch[16], Err *err) {
    CudaDevice d;
    if (cuda_open(&d, err)) return -1;
    snprintf(arch, 16, "sm_%d%d", d.cc_major, d.cc_minor);
    return 0;
}

int cublaslt_open(Err *err) {
    if (lt.lib) return 0;
    const char *names[] = {"libcublasLt.so.13", GPT2GEN_CUDA_HOME "/lib64/libcublasLt.so.13",
                           "/usr/local/cuda/lib64/libcublasLt.so.13", NULL};
    void *h = NULL;
    char first[512] = "";
    for (int i = 0; names[i] && !h; i++) {
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!h && !first[0]) snprintf(first, sizeof first, "%s", dlerror());
    }
    if (!h) return err_set(err, "cuBLASLt not found: %s (install CUDA 13's libcublasLt or add it to LD_LIBRARY_PATH)", first);
    CublasLt l = {.lib = h};
#define LOAD(name) \
    l.name = (__typeof__(l.name))dlsym(h, CUDA_API_STR(name)); \
    if (!l.name) { dlclose(h); return err_set(err, "libcublasLt.so.13 lacks %s", CUDA_API_STR(name)); }
    CUBLASLT_FUNCS(LOAD)
#undef LOAD
    lt = l;
    return 0;
}

void cuda_pick_arch(const char *explicit_arch, const char *config_arch, char arch[16], const char **note) {
    Err err;
    if (explicit_arch && *explicit_arch) { snprintf(arch, 16, "%s", explicit_arch); *note = "--arch"; }
    else if (config_arch && *config_arch) { snprintf(arch, 16, "%s", config_arch); *note = "config"; }
    else if (cuda_device_arch(arch, &err) == 0) *note = "GPU 0";
    else { snprintf(arch, 16, "sm_90"); *note = "default: no GPU found"; }
}
