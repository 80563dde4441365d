#include "runtime/cuda/cuda_api.h"
#include "runtime/gpu.h"
#include <stdio.h>
#include <dlfcn.h>
#include <string.h>

CudaDriver cu;
CublasLt lt;

#define CUDA_API_STR2(x) #x
#define CUDA_API_STR(x) CUDA_API_STR2(x)

int cuda_backend_built(Err *err) { (void)err; return 0; }

int cuda_driver_present(char *why, size_t n) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { if (why) snprintf(why, n, "no GPU (%s)", dlerror()); return 0; }   /* dlerror names libcuda.so.1 */
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
    if (!h) return err_set(err, "no GPU (%s)", dlerror());   /* "libcuda.so.1: cannot open shared object file: ..." */
    CudaDriver d = {.lib = h};
#define LOAD(name) \
    d.name = (__typeof__(d.name))dlsym(h, CUDA_API_STR(name)); \
    if (!d.name) { dlclose(h); return err_set(err, "the CUDA driver lacks %s: driver too old for CUDA 13", CUDA_API_STR(name)); }
    CUDA_DRIVER_FUNCS(LOAD)
#undef LOAD
    cu = d;
    return 0;
}

int cuda_driver_load(Err *err) {
    static int initialized;
    if (load_driver(err)) return -1;
    if (initialized) return 0;
    char eb[256];
    CUresult r = cu.cuInit(0);
    if (r == CUDA_ERROR_NO_DEVICE) return err_set(err, "no GPU: the CUDA driver is installed but sees no device");
    if (r != CUDA_SUCCESS) return err_set(err, "no GPU: cuInit failed: %s", cuda_err_string(r, eb, sizeof eb));
    initialized = 1;
    return 0;
}

int cuda_check(CUresult r, const char *what, Err *err) {
    if (r == CUDA_SUCCESS) return 0;
    char eb[256];
    return err_set(err, "%s: %s", what, cuda_err_string(r, eb, sizeof eb));
}

int cuda_device_arch(int ordinal, char arch[16], Err *err) {
    if (cuda_driver_load(err)) return -1;
    int count = 0, major = 0, minor = 0;
    CUdevice dev;
    if (cu.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) return err_set(err, "no GPU: the CUDA driver sees no device");
    if (ordinal < 0 || ordinal >= count) return err_set(err, "no GPU %d: the CUDA driver sees %d", ordinal, count);
    if (cuda_check(cu.cuDeviceGet(&dev, ordinal), "cuDeviceGet", err)) return -1;
    cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    snprintf(arch, 16, "sm_%d%d", major, minor);
    return 0;
}

/* Free and total memory of GPU ordinal, through its primary context (the one the backend takes later), made current
   for the query and set back after. */
int cuda_device_memory(int ordinal, size_t *free_b, size_t *total_b, Err *err) {
    *free_b = *total_b = 0;
    if (cuda_driver_load(err)) return -1;
    int count = 0;
    CUdevice dev;
    CUcontext ctx, prev = NULL;
    if (cu.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) return err_set(err, "no GPU: the CUDA driver sees no device");
    if (ordinal < 0 || ordinal >= count) return err_set(err, "no GPU %d: the CUDA driver sees %d", ordinal, count);
    if (cuda_check(cu.cuDeviceGet(&dev, ordinal), "cuDeviceGet", err) ||
        cuda_check(cu.cuDevicePrimaryCtxRetain(&ctx, dev), "creating a context for the memory query", err)) return -1;
    cu.cuCtxGetCurrent(&prev);
    int rc = cuda_check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent", err) ||
             cuda_check(cu.cuMemGetInfo(free_b, total_b), "cuMemGetInfo", err) ? -1 : 0;
    cu.cuCtxSetCurrent(prev);
    cu.cuDevicePrimaryCtxRelease(dev);
    return rc;
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
    else if (cuda_device_arch(0, arch, &err) == 0) *note = "GPU 0";
    else { snprintf(arch, 16, "sm_90"); *note = "default: no GPU found"; }
}
