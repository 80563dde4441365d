#include "gen/gpu_probe.h"
#include <dlfcn.h>

int gpu_probe_arch(char arch[16], Err *err) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return err_set(err, "no GPU: libcuda.so.1 (the NVIDIA driver) was not found");
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(lib, "cuInit");
    int (*count)(int *) = (int (*)(int *))dlsym(lib, "cuDeviceGetCount");
    int (*attr)(int *, int, int) = (int (*)(int *, int, int))dlsym(lib, "cuDeviceGetAttribute");
    int n = 0, major = 0, minor = 0, rc;
    if (!init || !count || !attr) return err_set(err, "no GPU: libcuda.so.1 lacks the driver API");
    if ((rc = init(0)) != 0) return err_set(err, "no GPU: cuInit failed with CUDA error %d", rc);
    if (count(&n) != 0 || n == 0) return err_set(err, "no GPU: the driver sees no devices");
    /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76; device ordinal 0 */
    attr(&major, 75, 0);
    attr(&minor, 76, 0);
    snprintf(arch, 16, "sm_%d%d", major, minor);
    return 0;
}
