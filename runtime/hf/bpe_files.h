/* bpe_files: GPT-2's tokenizer the way Hugging Face keeps it, derived from ours (runtime/data/tokenizer.h):
 *   vocab.json   {"token": id, ...}, each token's bytes written through GPT-2's byte-to-unicode map (the bytes
 *                of printable Latin-1 stand for themselves, the other 68 for U+0100..U+0143 in byte order);
 *   merges.txt   "#version: 0.2", then one merge per line, "left right", in rank order;
 *   tokenizer_config.json  GPT2Tokenizer, <|endoftext|> as bos/eos/unk, model_max_length maxT.
 * The merges come from the ranks alone: a token of rank r is what byte-level BPE makes of its bytes with the
 * merges of rank below r, and that ends in exactly two tokens, its merge (tiktoken's ranks are GPT-2's merges
 * in order, so this gives back GPT-2's merges.txt). */
#ifndef GPT2GEN_BPE_FILES_H
#define GPT2GEN_BPE_FILES_H
#include <stddef.h>
#include <stdint.h>
#include "common/err.h"
#include "runtime/data/tokenizer.h"

/* The code point that stands for byte b (0..255) in vocab.json and merges.txt. */
int bpe_byte_char(int b);
/* The merges of tok: pairs[k] = the two ids whose concatenation is the k-th multi-byte token (rank order),
   merged[k] that token's id; returns their count, or -1 with why when tok is not a byte-level BPE vocabulary
   (a byte missing, a token its BPE does not make in one merge). pairs and merged have room for vocab_size. */
int bpe_recover_merges(const Tokenizer *tok, int32_t (*pairs)[2], int32_t *merged, char *why, size_t whylen);
/* Writes dir/vocab.json, dir/merges.txt and dir/tokenizer_config.json, each atomically. Returns 0 when written,
   1 when tok is not GPT-2's tokenizer (50257 tokens, end-of-text 50256, byte-level BPE) with why in note and
   nothing written, -1 with err when a write fails. */
int bpe_write_files(const Tokenizer *tok, const char *dir, int max_len, char *note, size_t notelen, Err *err);
#endif
