/* device: a GPU, its context and streams (see device.h). */
#include "runtime/cuda/device.h"
#include <stdio.h>
#include <string.h>

int cuda_device_open(CudaDevice *d, int ordinal, Err *err) {
    memset(d, 0, sizeof *d);
    d->ordinal = ordinal;
    if (cuda_driver_load(err)) return -1;
    int count = 0;
    if (cu.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) return err_set(err, "no GPU: the CUDA driver sees no device");
    if (ordinal < 0 || ordinal >= count) return err_set(err, "no GPU %d: the CUDA driver sees %d GPU(s)", ordinal, count);
    char what[128];
    snprintf(what, sizeof what, "cuDeviceGet(%d)", ordinal);
    if (cuda_check(cu.cuDeviceGet(&d->dev, ordinal), what, err)) return -1;
    cu.cuDeviceGetName(d->name, sizeof d->name, d->dev);
    cu.cuDeviceGetAttribute(&d->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->dev);
    cu.cuDeviceGetAttribute(&d->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->dev);
    cu.cuDeviceGetAttribute(&d->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d->dev);
    cu.cuDeviceTotalMem(&d->total_mem, d->dev);
    cu.cuDriverGetVersion(&d->driver_version);
    snprintf(what, sizeof what, "creating a context on GPU %d (%.30s)", ordinal, d->name);
    if (cuda_check(cu.cuDevicePrimaryCtxRetain(&d->ctx, d->dev), what, err)) { d->ctx = NULL; return -1; }
    if (cuda_device_use(d, err) ||
        cuda_check(cu.cuStreamCreate(&d->compute, CU_STREAM_DEFAULT), "creating the compute stream", err) ||
        cuda_check(cu.cuStreamCreate(&d->comm, CU_STREAM_DEFAULT), "creating the communication stream", err)) {
        cuda_device_close(d);
        return -1;
    }
    return 0;
}

void cuda_device_close(CudaDevice *d) {
    if (!d->ctx) return;
    cu.cuCtxSetCurrent(d->ctx);
    if (d->compute) cu.cuStreamDestroy(d->compute);
    if (d->comm) cu.cuStreamDestroy(d->comm);
    cu.cuDevicePrimaryCtxRelease(d->dev);
    memset(d, 0, sizeof *d);
}

int cuda_device_use(const CudaDevice *d, Err *err) {
    return cuda_check(cu.cuCtxSetCurrent(d->ctx), "cuCtxSetCurrent", err);
}

int cuda_device_sync(const CudaDevice *d, const char *what, Err *err) {
    return cuda_check(cu.cuStreamSynchronize(d->compute), what, err);
}
