/* cuda_api: the CUDA driver (libcuda.so.1) and cuBLASLt (libcublasLt.so.13), loaded with dlopen so that the
   binary starts, generates and compiles on machines with neither, and says plainly "no GPU" there.
   Field names are the API names (cuda.h's macros map them to their versioned symbols). */
#ifndef GPT2GEN_CUDA_API_H
#define GPT2GEN_CUDA_API_H
#include <cuda.h>
#include <cublasLt.h>
#include "common/err.h"

#define CUDA_DRIVER_FUNCS(X) \
    X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) \
    X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) \
    X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxSynchronize) X(cuMemGetInfo) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) \
    X(cuMemcpyDtoH) X(cuMemcpyDtoD) X(cuMemsetD8) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemsetD8Async) \
    X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) \
    X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuFuncSetAttribute) X(cuGetErrorString) X(cuGetErrorName) \
    X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime) X(cuEventDestroy) X(cuEventQuery) \
    X(cuMemAllocHost) X(cuMemFreeHost) X(cuStreamWaitEvent) X(cuMemHostAlloc) X(cuMemHostGetDevicePointer) \
    X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphExecDestroy) \
    X(cuGraphDestroy) X(cuTensorMapEncodeTiled)

#define CUBLASLT_FUNCS(X) \
    X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetVersion) X(cublasLtGetStatusString) \
    X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) \
    X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) X(cublasLtMatrixLayoutSetAttribute) \
    X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute) \
    X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul) X(cublasLtMatmulAlgoConfigGetAttribute)

#define CUDA_API_FIELD(name) __typeof__(&name) name;
typedef struct {
    void *lib;
    CUDA_DRIVER_FUNCS(CUDA_API_FIELD)
} CudaDriver;
typedef struct {
    void *lib;
    CUBLASLT_FUNCS(CUDA_API_FIELD)
} CublasLt;

extern CudaDriver cu;   /* valid after cuda_driver_load() succeeded: the library, not a device */
extern CublasLt lt;     /* valid after cublaslt_open() succeeded */

/* Loads the driver library (once per process) and initializes it. Without a driver: -1 and
   "no GPU (libcuda.so.1: cannot open shared object file: ...)", dlerror's words. */
int  cuda_driver_load(Err *err);
/* cuda_driver_present: runtime/gpu.h (public, for the tests) */
int  cublaslt_open(Err *err);
/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" */
const char *cuda_err_string(CUresult r, char *buf, size_t n);
/* 0 when r is CUDA_SUCCESS; else -1 and err = "what: <the error>" */
int  cuda_check(CUresult r, const char *what, Err *err);
/* cuda_device_arch and cuda_pick_arch: runtime/gpu.h (public) */
#endif
