/* dataloader: batches of B rows of T+1 consecutive tokens from token shards matched by a glob.
 * Row j of a shard covers tokens [j*T, j*T + T]; inputs are its first T tokens, targets its last T.
 * With shuffle, each epoch visits the shards in a seeded random order and each shard's rows in a seeded
 * random order. Ranks: with N ranks of B rows each, a global batch is the next N*B rows of that order, the
 * batch one rank would read with B*N rows; rank r takes rows r*B .. r*B+B-1 of it. So the ranks' batches
 * together are exactly the 1-rank global batch, and rank r's batch at micro-step k is the 1-rank loader's
 * (batch B) micro-batch k*N + r, wherever a shard holds whole global batches. A shard's tail of fewer than N*B
 * rows is skipped by every rank alike. The position is three integers (epoch, shard, row; the row counts
 * global rows, the same on every rank), and the orders are recomputed from (seed, epoch), so a resumed run
 * reads the same batches. */
#ifndef GPT2GEN_DATALOADER_H
#define GPT2GEN_DATALOADER_H
#include <stddef.h>
#include <stdint.h>
#include "common/err.h"

typedef struct {
    int B, T, rank, num_ranks, shuffle, vocab_size;
    unsigned long seed;
    int n_files;
    char **files;
    size_t *file_rows;        /* rows in each shard, from its header */
    /* position */
    long epoch;
    int shard_pos;            /* index into shard_order */
    long row_pos;             /* index into row_order of the next global batch's first row (rank-independent) */
    /* current shard */
    int *shard_order;
    int loaded;               /* file index loaded, or -1 */
    uint16_t *tokens;
    size_t n_tokens;
    long *row_order;          /* the current shard's rows, in visiting order (the same on every rank) */
    long n_rows;
} DataLoader;

/* Opens every shard matching pattern and checks its header (shard_read_header: magic, version, the token count
   against the file size), so a bad shard is refused before training. Errors name the pattern or the file; when
   nothing matches, the message names the command that makes the shards. */
int  dataloader_open(DataLoader *dl, const char *pattern, int B, int T, int rank, int num_ranks, int shuffle,
                     unsigned long seed, int vocab_size, Err *err);
/* 1 when pattern is empty or matches no file (as opposed to a pattern that cannot be looked up), the case
   in which training goes on without validation. */
int  dataloader_no_shards(const char *pattern);
/* Fills inputs and targets (B*T each) with the next batch, moving to the next shard/epoch as needed. */
int  dataloader_next(DataLoader *dl, int32_t *inputs, int32_t *targets, Err *err);
/* Back to the first batch of epoch 0 (validation reads the same batches each time). */
int  dataloader_reset(DataLoader *dl, Err *err);
/* Moves to a saved position (from a resume state). A position outside the data (a negative epoch, a shard
   position beyond the shards, a row past the rows of that shard) is refused. */
int  dataloader_seek(DataLoader *dl, long epoch, int shard_pos, long row_pos, Err *err);
/* Global batches (N*B rows) of one epoch: each rank reads that many batches (for val_batches). */
long dataloader_batches_per_epoch(const DataLoader *dl);
void dataloader_close(DataLoader *dl);
#endif
