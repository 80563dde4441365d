/* tokenizer_internal: private to runtime/data/tokenizer*.c (runtime/data/tokenizer.h is the interface): the
   vocabulary's bytes -> id map (runtime/data/tokenizer.c), which encoding (runtime/data/tokenizer_encode.c)
   looks pieces up in. */
#ifndef GPT2GEN_TOKENIZER_INTERNAL_H
#define GPT2GEN_TOKENIZER_INTERNAL_H
#include "runtime/data/tokenizer.h"
#include <stddef.h>
#include <stdint.h>

/* The id whose bytes are b[0..n), or -1. */
int32_t tokenizer_rank_of(const Tokenizer *t, const uint8_t *b, size_t n);
#endif
