/* gpu_probe: is there a GPU, and which arch? Loads libcuda.so.1 with dlopen, so it answers "none" on
   machines without a driver instead of failing to start. */
#ifndef GPT2GEN_GPU_PROBE_H
#define GPT2GEN_GPU_PROBE_H
#include "gen/util.h"
/* 0 and arch = "sm_XX" of device 0; -1 and err saying why there is none. */
int gpu_probe_arch(char arch[16], Err *err);
#endif
