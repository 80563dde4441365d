#include "common/rng.h"
#include <math.h>

uint64_t rng_next(uint64_t *state) {
    uint64_t x = *state ? *state : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

float rng_uniform(uint64_t *state) {
    return (float)(rng_next(state) >> 40) / 16777216.0f;
}

float rng_normal(uint64_t *state) {
    double u1 = ((rng_next(state) >> 11) + 1.0) / 9007199254740993.0;   /* (0, 1] */
    double u2 = (rng_next(state) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
