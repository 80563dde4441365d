/* shard: token shards in llm.c's format. A 256-int32 header ([0]=20240520, [1]=1, [2]=n_tokens), then
 * n_tokens uint16 token ids, little-endian. The data loader reads them; `gpt2gen prepare` writes them. */
#ifndef GPT2GEN_SHARD_H
#define GPT2GEN_SHARD_H
#include <stddef.h>
#include <stdint.h>
#include "common/err.h"

#define SHARD_MAGIC      20240520
#define SHARD_VERSION    1
#define SHARD_HEADER_BYTES (256 * 4)
#define SHARD_MAX_TOKENS 2147483647u     /* the header holds the count as an int32 */

/* Writes toks[0..n) to path atomically (a crash never leaves a half-written shard). */
int shard_write(const char *path, const uint16_t *toks, size_t n, Err *err);

/* Reads a whole shard into *toks (malloc'd; the caller frees it) and its count into *n. Checks the magic,
   the version, that the file holds exactly the tokens the header promises, and, when vocab_size > 0,
   that every id is below vocab_size. On failure *toks is NULL and err names the file and the problem. */
int shard_read(const char *path, uint16_t **toks, size_t *n, int vocab_size, Err *err);
/* The header checks of shard_read (a regular file, magic, version, the file size the token count promises),
   without reading the tokens; *n gets the token count. */
int shard_read_header(const char *path, size_t *n, Err *err);
#endif
