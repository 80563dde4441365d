/* corpus: the inputs of `gpt2gen prepare` as they come, read as bytes of text or of JSON lines.
 *
 *   CorpusList list;
 *   if (corpus_list(inputs, n_inputs, &list, &err)) ...;     // folders expanded into their files
 *   for (int i = 0; i < list.n; i++) {
 *       CorpusReader *r = corpus_open(list.files[i].path, &err);   // gzip and zstd undone
 *       char buf[65536]; long got;
 *       while ((got = corpus_read(r, buf, sizeof buf, &err)) > 0) ...;
 *       corpus_close(r);
 *   }
 *   corpus_list_free(&list);
 *
 * An input is a file, "-" (standard input), a pipe or FIFO, or a folder. A folder stands for every regular file
 * under it, at any depth (symbolic links followed, a link back to a folder being read skipped), except names
 * that start with "." (.git, .DS_Store), in the order of their paths' bytes (strcmp), so the same folder
 * always gives the same data set. A folder with no such file is an error.
 *
 * Compression is known by the first bytes: gzip (1f 8b) is inflated by zlib, concatenated members included;
 * zstd (28 b5 2f fd) by ZSTD's streaming decompression, concatenated frames included. A name ending in
 * .gz or .zst/.zstd must hold such data (else an error names the file), and names of archives and
 * compressions that are not read (.tar, .tgz, .zip, .xz, .bz2, .lz4, .7z) are refused with what to do instead
 * (in a folder: left out, and counted).
 * What a file holds is known by its name less the compression suffix: .jsonl, .ndjson and .json are JSON
 * lines, anything else is text. */
#ifndef GPT2GEN_CORPUS_H
#define GPT2GEN_CORPUS_H
#include <stddef.h>
#include "common/err.h"

typedef enum { CORPUS_TEXT, CORPUS_JSONL } CorpusKind;

typedef struct {
    char      *path;    /* as given, or the folder as given + "/" + the path below it */
    int        input;   /* which of the inputs it comes from (an index into corpus_list's inputs) */
    long long  size;    /* its bytes on disk (compressed ones when compressed); -1 for standard input, a pipe */
} CorpusFile;

typedef struct {
    CorpusFile *files;
    int         n, cap;
    long long   total;  /* the sum of the sizes, or -1 when one of them is not known */
    int         skipped;            /* files in folders left out: archives, compressions that are not read */
    char        first_skipped[512]; /* the first of them, for a note */
} CorpusList;

/* Expands the inputs into files. Errors name the input: missing, unreadable, a folder without files, a
   device or socket, an archive named as an input. An archive or a file of another compression found in a
   folder is left out and counted (skipped), for the caller to say so. Nothing is opened for reading yet (a
   FIFO is read once, when its turn comes). A folder `exclude` (the data set being written, when it lies
   inside an input folder) is left out; NULL or a folder that does not exist excludes nothing. */
int  corpus_list(char *const *inputs, int n_inputs, const char *exclude, CorpusList *list, Err *err);
void corpus_list_free(CorpusList *list);

/* What the file holds, by its name: CORPUS_JSONL for *.jsonl, *.ndjson, *.json (also .gz/.zst of them). */
CorpusKind corpus_kind(const char *path);

typedef struct CorpusReader CorpusReader;

/* Opens a file ("-": standard input) and finds its compression. NULL + err when it cannot be opened, or its
   name and its bytes disagree. */
CorpusReader *corpus_open(const char *path, Err *err);
/* Up to n bytes of its content, decompressed; 0 at its end; -1 + err (naming the file) on a read error or
   damaged or truncated compressed data. */
long corpus_read(CorpusReader *r, char *buf, size_t n, Err *err);
/* The bytes read from the file so far (compressed bytes for compressed files), for progress. */
long long corpus_raw_bytes(const CorpusReader *r);
/* "gzip", "zstd" or NULL. */
const char *corpus_compression(const CorpusReader *r);
void corpus_close(CorpusReader *r);
#endif
