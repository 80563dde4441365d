/* cuda_host: the host side of the kernels' stochastic rounding to bf16 (templates/common.cuh, round_store).
   The random bits come from a hash of the element's index in its tensor and the fp32 value's bits, so the
   bf16 weights are a function of the fp32 master weights alone: setting the master weights (on resume)
   gives back the very bf16 weights the AdamW kernel wrote. Must match templates/common.cuh bit for bit. */
#ifndef GPT2GEN_CUDA_HOST_H
#define GPT2GEN_CUDA_HOST_H
#include <stdint.h>
#include <string.h>

static inline uint32_t sr_hash_u32(uint32_t x, uint32_t seed) {
    x ^= seed * 0x9E3779B9u;
    x ^= x >> 16; x *= 0x7feb352du;
    x ^= x >> 15; x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}
static inline uint16_t bf16_from_f32_stochastic(float f, uint32_t idx) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    uint32_t r = sr_hash_u32(idx, bits) & 0xffffu;
    if ((bits & 0x7f800000u) != 0x7f800000u) bits += r;   /* leave inf / nan alone */
    return (uint16_t)(bits >> 16);
}
#endif
