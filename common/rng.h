/* rng: the deterministic RNG (xorshift64*) of init, data shuffling and sampling. State is one uint64. */
#ifndef GPT2GEN_RNG_H
#define GPT2GEN_RNG_H
#include <stdint.h>

uint64_t rng_next(uint64_t *state);
float    rng_uniform(uint64_t *state);            /* [0, 1) */
float    rng_normal(uint64_t *state);             /* Box-Muller, N(0,1) */
#endif
