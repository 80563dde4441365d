/* fp16: the host side of IEEE half precision (1 sign, 5 exponent, 10 mantissa bits), and 16-bit floats of either
   kind for code that holds floatX on the host.
   - fp16_from_f32 rounds to nearest, ties to even, with fp16's subnormals, and to infinity from 65520 up: the
     same bits as CUDA's __float2half_rn, which the kernels' AdamW uses to write the fp16 weights from the fp32
     master weights (templates/common.cuh, round_store), so setting the master weights on resume gives back the
     very fp16 weights the kernel wrote. NaN stays a NaN.
   - x16_*: bf16 (common/bf16.h) or fp16, picked by is_fp16. */
#ifndef GPT2GEN_FP16_H
#define GPT2GEN_FP16_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "common/bf16.h"

static inline uint16_t fp16_from_f32(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));   /* NaN: quiet, keeps high payload */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);     /* >= 65520: rounds to infinity */
    if (a <= 0x33000000u) return sign;                            /* <= 2^-25: rounds to zero (2^-25 is a tie, to even) */
    uint32_t h, rem, half;
    if (a >= 0x38800000u) {                                       /* normal: >= 2^-14 */
        h = ((a >> 23) - 112u) << 10 | ((a >> 13) & 0x3ffu);
        rem = a & 0x1fffu;
        half = 0x1000u;
    } else {                                                      /* subnormal: units of 2^-24 */
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        int s = 126 - (int)(a >> 23);                             /* 14..24 */
        h = m >> s;
        rem = m & ((1u << s) - 1);
        half = 1u << (s - 1);
    }
    if (rem > half || (rem == half && (h & 1u))) h++;             /* a carry into the exponent is right */
    return (uint16_t)(sign | h);
}

static inline float fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0x1f) u = sign | 0x7f800000u | m << 13;
    else if (e) u = sign | (e + 112u) << 23 | m << 13;
    else {
        float f = (float)m * 0x1p-24f;                            /* subnormal or zero: exact */
        return sign ? -f : f;
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline void x16_from_f32_array(int is_fp16, uint16_t *dst, const float *src, size_t n) {
    if (!is_fp16) { bf16_from_f32_array(dst, src, n); return; }
    for (size_t i = 0; i < n; i++) dst[i] = fp16_from_f32(src[i]);
}
static inline void x16_to_f32_array(int is_fp16, float *dst, const uint16_t *src, size_t n) {
    if (!is_fp16) { bf16_to_f32_array(dst, src, n); return; }
    for (size_t i = 0; i < n; i++) dst[i] = fp16_to_f32(src[i]);
}
/* x rounded to nearest in the 16-bit format */
static inline float x16_round(int is_fp16, float x) {
    return is_fp16 ? fp16_to_f32(fp16_from_f32(x)) : bf16_to_f32(bf16_from_f32(x));
}
#endif
