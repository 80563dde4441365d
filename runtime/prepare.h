/* prepare: the `gpt2gen prepare` command. Text files in, llm.c token shards and tokenizer file out:
 *
 *   gpt2gen prepare <text files...> -o <dir> [--ranks FILE] [--val-fraction 0.1] [--shard-tokens N]
 *
 * writes <dir>/val_000000.bin..., <dir>/train_000000.bin... and <dir>/tokenizer.bin (llm.c version 2).
 * argv[0] is "prepare". Returns the exit code: 0, 1 (a file could not be read or written), 2 (usage). */
#ifndef GPT2GEN_PREPARE_H
#define GPT2GEN_PREPARE_H
#include <stddef.h>

int prepare_main(int argc, char **argv);

/* One document of a file: text[start .. start+len). */
typedef struct { size_t start, len; } PrepareDoc;

/* Splits a file's text into documents. A file with any line holding only "%" (a fortune file; a trailing
   "\r" is allowed) is split at those lines, the separator lines belonging to no document; any other file
   is one document. Documents of only ASCII whitespace are dropped. Returns the count; *docs is malloc'd. */
size_t prepare_split_documents(const char *text, size_t len, PrepareDoc **docs);
#endif
