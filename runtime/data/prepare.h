/* prepare: the `gpt2gen prepare` command. Corpora in, llm.c token shards and tokenizer file out:
 *
 *   gpt2gen prepare <files, folders, or - for standard input...> -o <dir> [--ranks FILE]
 *                   [--val-fraction 0.1] [--shard-tokens N] [--split-docs MODE] [--separator LINE]
 *                   [--field NAME] [--format auto|text|jsonl] [--threads N]
 *
 * writes <dir>/val_000000.bin..., <dir>/train_000000.bin... and <dir>/tokenizer.bin (llm.c version 2).
 * Inputs are read by corpus.h (folders, gzip, zstd) and cut into documents by documents.h (JSON lines,
 * or text at separator lines or blank lines). Each document is the end-of-text token, then its text's
 * tokens; documents of only whitespace are dropped. Documents go to validation or training as they come
 * (every tenth for the fraction 0.1). The text is encoded on N threads, in chunks written back in input
 * order, so the data set is the same byte for byte whatever N. Each input is read once, so pipes and
 * FIFOs work. <dir> is replaced as a whole, and only when the new data set is complete (dataset_dir.h).
 * The command line is cli/prepare.c. */
#ifndef GPT2GEN_PREPARE_H
#define GPT2GEN_PREPARE_H
#include <stddef.h>
#include "common/err.h"
#include "runtime/data/documents.h"

#define PREPARE_DEFAULT_RANKS "data/gpt2.tiktoken"
#define PREPARE_CHUNK_BYTES   (1u << 18)     /* text per piece of work for one thread */
#define PREPARE_UNCUT_MAX     (64u << 20)    /* the most text of a document held whole, for want of a cut */

/* What `gpt2gen prepare` was asked for (cli/prepare.c parses it). */
typedef struct {
    char      **inputs;
    int         n_inputs;
    const char *out_dir;
    const char *ranks;
    double      val_fraction;
    size_t      shard_tokens;
    DocsOptions docs;
    int         format;        /* -1: by each file's name (corpus_kind), else a CorpusKind for every input */
    int         threads;       /* encoding threads; 1 encodes on the reading thread */
} PrepareArgs;

/* Reads the inputs, writes the data set and swaps it in. -1 + err on failure, and then out_dir is as
   it was. */
int prepare_run(const PrepareArgs *a, Err *err);

/* Whether a document's text may be cut before text[at] (0 < at, at + 1 < len) and each side encoded
   alone, with the ids of encoding it whole: at is where GPT-2's pre-tokenizer starts a piece whatever
   came before, seen from text[at-2..at+1] alone (a printable ASCII character, "\n", then another; or a
   space then one). Exposed for tests. */
int prepare_cut_is_safe(const char *text, size_t len, size_t at);
#endif
