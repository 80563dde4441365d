/* tune_env: this machine as the tuning database keys it (gen/tune_db.h): GPU 0's name and arch, the driver's
   CUDA version, the CUDA headers gpt2gen was built with, NVRTC, cuDNN (loaded as runtime/cuda/cudnn_attention.c
   loads it, "none" without it) and cuBLASLt. The test hook GPT2GEN_TUNE_ENV ("gpu=NVIDIA_H200 arch=sm_90 ...")
   replaces the fields it names, and stands in for a GPU where there is none (the CPU tests use it). */
#ifndef GPT2GEN_TUNE_ENV_H
#define GPT2GEN_TUNE_ENV_H
#include "common/env.h"
#include "gen/tune_db.h"

/* Fills key and cublaslt ("13.1.0", or "none"), with env's GPT2GEN_TUNE_ENV and GPT2GEN_CUDNN_LIBRARY (NULL: the
   defaults); -1 and err when there is no GPU and no test hook. */
int tune_env_probe(TuneEnv *key, char *cublaslt, size_t n, const Env *env, Err *err);
#endif
