/* prepare: the `gpt2gen prepare` command. Text in, llm.c token shards and tokenizer file out:
 *
 *   gpt2gen prepare <text files, or - for standard input...> -o <dir> [--ranks FILE] [--val-fraction 0.1]
 *                   [--shard-tokens N]
 *
 * writes <dir>/val_000000.bin..., <dir>/train_000000.bin... and <dir>/tokenizer.bin (llm.c version 2).
 * Documents: a line holding only "%" (a trailing "\r" allowed) separates two; such lines belong to no
 * document, so a file without them is one document, and documents of only whitespace are dropped.
 * Each input is read once, so pipes and FIFOs work. <dir> is replaced as a whole, and only when the new
 * data set is complete (dataset_dir.h). The command line is cli/prepare.c. */
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

/* Reads the inputs, writes the data set and swaps it in. -1 + err on failure, and then out_dir is as
   it was. */
int prepare_run(const PrepareArgs *a, Err *err);
#endif
