/* device: one GPU as the backend uses it: the device, its primary context, and two streams. Every kernel
   launch, matmul and copy of the training step goes on the compute stream, and so do NCCL's collectives
   (runtime/cuda/nccl.h), except the gradients' averaging that overlaps the backward: that goes on the
   communication stream, each part after an event of the compute stream. No global state: one
   process per GPU opens its own ordinal, and one process may hold several devices. The streams are blocking
   streams, so that a synchronous copy (on the legacy stream) still waits for the work before it. */
#ifndef GPT2GEN_DEVICE_H
#define GPT2GEN_DEVICE_H
#include "runtime/cuda/cuda_api.h"

typedef struct {
    int ordinal;
    CUdevice dev;
    CUcontext ctx;          /* the device's primary context, retained */
    CUstream compute;
    CUstream comm;
    char name[256];
    int cc_major, cc_minor, sm_count;
    size_t total_mem;
    int driver_version;
} CudaDevice;

/* Loads the driver if needed, retains ordinal's primary context, makes it current, creates the streams. */
int  cuda_device_open(CudaDevice *d, int ordinal, Err *err);
void cuda_device_close(CudaDevice *d);
/* Makes d's context current on the calling thread (before work on d from a thread that has another). */
int  cuda_device_use(const CudaDevice *d, Err *err);
/* Waits for the compute stream. */
int  cuda_device_sync(const CudaDevice *d, const char *what, Err *err);
#endif
