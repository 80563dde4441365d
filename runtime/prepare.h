/* prepare: the `gpt2gen prepare` command. Text files in, llm.c token shards and tokenizer file out:
 *
 *   gpt2gen prepare <text files...> -o <dir> [--ranks FILE] [--val-fraction 0.1] [--shard-tokens N]
 *
 * writes <dir>/val_000000.bin..., <dir>/train_000000.bin... and <dir>/tokenizer.bin (llm.c version 2).
 * The command line is cli/prepare.c. */
#ifndef GPT2GEN_PREPARE_H
#define GPT2GEN_PREPARE_H
#include <stddef.h>
#include "common/err.h"

#define PREPARE_DEFAULT_RANKS "data/gpt2.tiktoken"

/* What `gpt2gen prepare` was asked for (cli/prepare.c parses it). */
typedef struct {
    char      **inputs;
    int         n_inputs;
    const char *out_dir;
    const char *ranks;
    double      val_fraction;
    size_t      shard_tokens;
} PrepareArgs;

/* Reads the inputs, writes the shards and the tokenizer file. -1 + err on failure. */
int prepare_run(const PrepareArgs *a, Err *err);

/* One document of a file: text[start .. start+len). */
typedef struct { size_t start, len; } PrepareDoc;

/* Splits a file's text into documents. A file with any line holding only "%" (a fortune file; a trailing
   "\r" is allowed) is split at those lines, the separator lines belonging to no document; any other file
   is one document. Documents of only ASCII whitespace are dropped. Returns the count; *docs is malloc'd. */
size_t prepare_split_documents(const char *text, size_t len, PrepareDoc **docs);
#endif
