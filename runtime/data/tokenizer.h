/* tokenizer: GPT-2's byte-level BPE. Decodes ids to bytes, encodes text to ids exactly as tiktoken's
 * "gpt2" encoding does (encode_ordinary: "<|endoftext|>" in text is plain text), and reads/writes the
 * llm.c tokenizer file.
 *
 * Two sources:
 *   - a tiktoken ranks file (gpt2.tiktoken: lines "<base64 bytes> <rank>"); the rank is the token id and
 *     end-of-text is added after the last rank (50256 for GPT-2).
 *   - an llm.c tokenizer file (tokenizer.bin, version 1 or 2). For GPT-2 the id of a token is its merge
 *     rank, so the same file also gives the encoder.
 *
 *   Tokenizer tok;
 *   if (tokenizer_load(&tok, "data/fortunes/tokenizer.bin", &err)) ...;
 *   TokenVec ids = {0};
 *   tokenizer_encode(&tok, text, len, &ids);
 *   size_t n; const uint8_t *b = tokenizer_decode(&tok, ids.data[0], &n);
 *   tokenizer_free(&tok); tokvec_free(&ids);
 */
#ifndef GPT2GEN_TOKENIZER_H
#define GPT2GEN_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "common/err.h"

#define TOKENIZER_MAGIC    20240328
#define TOKENIZER_EOT_GPT2 50256      /* end-of-text id in version-1 files, which do not store it */

typedef struct {
    int       vocab_size;    /* ids 0..vocab_size-1, end-of-text included */
    int       eot;           /* end-of-text id */
    uint8_t  *bytes;         /* all token bytes, back to back */
    uint32_t *offset;        /* token i is bytes[offset[i] .. offset[i+1]) ; vocab_size + 1 entries */
    /* encoder: open-addressing hash map from token bytes to id (= merge rank); -1 marks an empty slot */
    int32_t  *slots;
    uint32_t  slot_mask;
    int       can_encode;    /* 1 when every single byte is a token, which byte-level BPE needs */
} Tokenizer;

/* A growable list of token ids. Zero-initialise it; tokvec_free releases it. */
typedef struct { int32_t *data; size_t n, cap; } TokenVec;
void tokvec_push(TokenVec *v, int32_t id);
void tokvec_free(TokenVec *v);

/* Reads a tiktoken ranks file (gpt2.tiktoken). Ranks must be 0..n-1, each once; end-of-text gets id n. */
int  tokenizer_load_ranks(Tokenizer *t, const char *path, Err *err);
/* Reads an llm.c tokenizer file, version 1 (end-of-text 50256) or 2. */
int  tokenizer_load(Tokenizer *t, const char *path, Err *err);
/* Either of the above, told apart by the file's first bytes. */
int  tokenizer_load_any(Tokenizer *t, const char *path, Err *err);
/* Writes an llm.c tokenizer file, version 2, atomically. */
int  tokenizer_save(const Tokenizer *t, const char *path, Err *err);
void tokenizer_free(Tokenizer *t);

/* The bytes of token id (not NUL-terminated; *len gets their count). NULL for an id out of range. */
const uint8_t *tokenizer_decode(const Tokenizer *t, int id, size_t *len);

/* Appends the ids of text (any bytes; invalid UTF-8 is kept byte for byte) to out.
   Returns -1 with err set when the tokenizer cannot encode (see can_encode). */
int  tokenizer_encode(const Tokenizer *t, const void *text, size_t len, TokenVec *out, Err *err);

/* Encodes whole pieces from the start of text until at least min_bytes are consumed (or the text ends);
   returns the bytes consumed. Encoding a text in such steps gives the same ids as encoding it at once,
   since a piece never spans two steps; it bounds memory and lets a caller report progress. The tokenizer
   must be able to encode (can_encode). */
size_t tokenizer_encode_some(const Tokenizer *t, const void *text, size_t len, size_t min_bytes, TokenVec *out);
/* The same for a text that may go on after len (a stream): encodes only the pieces that no text after len
   can change, those ending at least TOKENIZER_LOOKAHEAD bytes before len, and returns the bytes consumed
   (0 when there is no such piece yet). The caller keeps the rest, appends what follows, and encodes the
   end of the text with tokenizer_encode_some. The ids are those of encoding the whole text at once. */
#define TOKENIZER_LOOKAHEAD 8
size_t tokenizer_encode_stable(const Tokenizer *t, const void *text, size_t len, size_t min_bytes, TokenVec *out);

/* Prints token bytes as they come (sampled text), holding back a UTF-8 character split across tokens
   until it is complete. Invalid bytes, and control characters other than tab, CR and LF (which could
   drive the terminal), print as U+FFFD. Zero-initialise; call utf8_stream_flush at the end. */
typedef struct { uint8_t pend[4]; int npend; } Utf8Stream;
void utf8_stream_put(Utf8Stream *s, const void *bytes, size_t n, FILE *out);
void utf8_stream_flush(Utf8Stream *s, FILE *out);

/* Exposed for tests: splits text into GPT-2 pre-tokenizer pieces; returns the length of the piece at
   the start of text (len > 0). */
size_t gpt2_piece_length(const uint8_t *text, size_t len);
#endif
