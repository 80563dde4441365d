/* bf16: the host side of bfloat16. bf16 is the top half of an fp32.
   - bf16_from_f32 rounds to nearest, ties to even (checkpoints, uploads); NaN stays a quiet NaN.
   - bf16_from_f32_stochastic is the kernels' stochastic rounding (templates/common.cuh, round_store), bit
     for bit: the random bits are a hash of the element's index in its tensor and the fp32 value's own bits,
     so the bf16 weights are a function of the fp32 master weights alone, and setting the master weights on
     resume gives back the very bf16 weights the AdamW kernel wrote. */
#ifndef GPT2GEN_BF16_H
#define GPT2GEN_BF16_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t bf16_from_f32(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline void bf16_from_f32_array(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = bf16_from_f32(src[i]);
}
static inline void bf16_to_f32_array(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = bf16_to_f32(src[i]);
}

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
