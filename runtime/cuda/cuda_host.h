/* cuda_host: host-side bf16 <-> fp32 conversions (round to nearest even; NaN stays NaN). */
#ifndef GPT2GEN_CUDA_HOST_H
#define GPT2GEN_CUDA_HOST_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t host_f32_to_bf16_one(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float host_bf16_to_f32_one(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline void host_f32_to_bf16(uint16_t *out, const float *in, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = host_f32_to_bf16_one(in[i]);
}
static inline void host_bf16_to_f32(float *out, const uint16_t *in, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = host_bf16_to_f32_one(in[i]);
}
#endif
