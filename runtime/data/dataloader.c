#include "runtime/data/dataloader.h"
#include "common/rng.h"
#include "common/files.h"
#include <stdio.h>
#include "runtime/data/shard.h"
#include <errno.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>

/* Fisher-Yates with a generator seeded from (seed, epoch, salt): the same inputs give the same order. */
static void shuffle_ints(int *a, long n, uint64_t rng) {
    for (long i = n - 1; i > 0; i--) {
        long j = (long)(rng_next(&rng) % (uint64_t)(i + 1));
        int t = a[i]; a[i] = a[j]; a[j] = t;
    }
}
static void shuffle_longs(long *a, long n, uint64_t rng) {
    for (long i = n - 1; i > 0; i--) {
        long j = (long)(rng_next(&rng) % (uint64_t)(i + 1));
        long t = a[i]; a[i] = a[j]; a[j] = t;
    }
}
static uint64_t order_seed(const DataLoader *dl, uint64_t salt) {
    return ((uint64_t)dl->seed + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)dl->epoch + 1) * 0xBF58476D1CE4E5B9ull ^ salt;
}

/* Every shard's header is checked here, before training starts: a bad shard is named at once, not when the
   run first reaches it. */
static int read_header_rows(const char *path, int T, size_t *rows, Err *err) {
    size_t n;
    if (shard_read_header(path, &n, err)) return -1;
    *rows = n > (size_t)T ? (n - 1) / (size_t)T : 0;
    return 0;
}

/* What makes the shards a pattern names, for the message when none match: `make data` for the default data
   set, else `gpt2gen prepare` into the pattern's folder. */
static void make_hint(const char *pattern, char *out, size_t n) {
    if (strstr(pattern, "data/fortunes/")) { snprintf(out, n, "make them with `make data`"); return; }
    const char *slash = strrchr(pattern, '/'), *base = slash ? slash + 1 : pattern;
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - pattern) : 1, slash ? pattern : ".");
    if (!strncmp(base, "train_", 6) || !strncmp(base, "val_", 4))
        snprintf(out, n, "make them with `gpt2gen prepare FILE... -o %s`; docs/data.md", err_show(dir));
    else
        snprintf(out, n, "`gpt2gen prepare FILE... -o DIR` makes DIR/train_*.bin and DIR/val_*.bin for data.train and "
                 "data.val; llm.c's dev/data scripts make FineWeb's and TinyStories'; docs/data.md");
}

int dataloader_no_shards(const char *pattern) {
    if (!pattern[0]) return 1;
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    size_t n = rc == 0 ? g.gl_pathc : 0;
    if (rc == 0) globfree(&g);
    const char *why = file_missing_why(pattern);
    return n == 0 && (!*why || !strcmp(why, "no such file"));
}

int dataloader_open(DataLoader *dl, const char *pattern, int B, int T, int rank, int num_ranks, int shuffle,
                    unsigned long seed, int vocab_size, Err *err) {
    memset(dl, 0, sizeof *dl);
    if (!pattern[0]) return err_set(err, "an empty shard pattern: name the shards, e.g. data/NAME/train_*.bin "
                                    "(`gpt2gen prepare FILE... -o data/NAME` makes them)");
    dl->B = B; dl->T = T; dl->rank = rank; dl->num_ranks = num_ranks; dl->shuffle = shuffle;
    dl->seed = seed; dl->vocab_size = vocab_size; dl->loaded = -1;
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    if (rc != 0 || g.gl_pathc == 0) {
        if (rc == 0) globfree(&g);
        const char *why = file_missing_why(pattern);   /* a name too long is not "no match" */
        if (*why && strcmp(why, "no such file")) return err_set(err, "%s: %s", pattern, why);
        char hint[600];
        make_hint(pattern, hint, sizeof hint);
        return err_set(err, "%s: no token shards match this pattern (%s)", err_show(pattern), hint);
    }
    dl->n_files = (int)g.gl_pathc;
    dl->files = xcalloc(dl->n_files, sizeof(char *));
    dl->file_rows = xcalloc(dl->n_files, sizeof(size_t));
    dl->shard_order = xcalloc(dl->n_files, sizeof(int));
    long per_rank_batches = 0;
    for (int i = 0; i < dl->n_files; i++) {
        dl->files[i] = xstrdup(g.gl_pathv[i]);   /* glob sorts: the unshuffled order is by name */
        if (read_header_rows(dl->files[i], T, &dl->file_rows[i], err)) { globfree(&g); dataloader_close(dl); return -1; }
        per_rank_batches += (long)(dl->file_rows[i] / ((size_t)num_ranks * B));
    }
    globfree(&g);
    if (per_rank_batches == 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s: the shards hold too few tokens for one batch of %d rows of %d+1 tokens per rank", pattern, B, T);
        dataloader_close(dl);
        return err_set(err, "%s", msg);
    }
    if (dataloader_seek(dl, 0, 0, 0, err)) { dataloader_close(dl); return -1; }   /* nothing held after a failed open */
    return 0;
}

long dataloader_batches_per_epoch(const DataLoader *dl) {
    long n = 0;
    for (int i = 0; i < dl->n_files; i++) n += (long)(dl->file_rows[i] / ((size_t)dl->num_ranks * dl->B));
    return n;
}

/* Loads the shard at shard_pos of the current epoch's order and computes its row order. */
static int load_shard(DataLoader *dl, Err *err) {
    int file = dl->shard_order[dl->shard_pos];
    if (dl->loaded != file) {
        free(dl->tokens);
        dl->tokens = NULL;
        dl->loaded = -1;
        if (shard_read(dl->files[file], &dl->tokens, &dl->n_tokens, dl->vocab_size, err)) return -1;
        dl->loaded = file;
    }
    long rows = (long)(dl->n_tokens > (size_t)dl->T ? (dl->n_tokens - 1) / dl->T : 0);
    free(dl->row_order);
    dl->row_order = xmalloc((rows ? rows : 1) * sizeof(long));
    for (long i = 0; i < rows; i++) dl->row_order[i] = i;
    if (dl->shuffle) shuffle_longs(dl->row_order, rows, order_seed(dl, 0x5A17ull * (file + 1)));
    dl->n_rows = rows;
    return 0;
}

static void epoch_order(DataLoader *dl) {
    for (int i = 0; i < dl->n_files; i++) dl->shard_order[i] = i;
    if (dl->shuffle) shuffle_ints(dl->shard_order, dl->n_files, order_seed(dl, 0x0DE5ull));
}

int dataloader_seek(DataLoader *dl, long epoch, int shard_pos, long row_pos, Err *err) {
    if (epoch < 0 || shard_pos < 0 || shard_pos >= dl->n_files || row_pos < 0)
        return err_set(err, "data position (epoch %ld, shard %d, row %ld) is outside the %d shards", epoch, shard_pos, row_pos, dl->n_files);
    dl->epoch = epoch;
    dl->shard_pos = shard_pos;
    dl->row_pos = 0;
    epoch_order(dl);
    if (load_shard(dl, err)) return -1;
    if (row_pos > dl->n_rows)
        return err_set(err, "data position (epoch %ld, shard %d, row %ld) is past the %ld rows of %s", epoch,
                       shard_pos, row_pos, dl->n_rows, dl->files[dl->shard_order[shard_pos]]);
    dl->row_pos = row_pos;
    return 0;
}

int dataloader_reset(DataLoader *dl, Err *err) { return dataloader_seek(dl, 0, 0, 0, err); }

int dataloader_next(DataLoader *dl, int32_t *inputs, int32_t *targets, Err *err) {
    /* skip to a shard with a whole global batch (N*B rows) left */
    long global = (long)dl->num_ranks * dl->B;
    for (int guard = 0; dl->row_pos + global > dl->n_rows; guard++) {
        if (guard > dl->n_files + 1) return err_set(err, "no shard holds a whole batch");
        dl->row_pos = 0;
        if (++dl->shard_pos == dl->n_files) { dl->shard_pos = 0; dl->epoch++; epoch_order(dl); }
        if (load_shard(dl, err)) return -1;
    }
    int T = dl->T;
    for (int b = 0; b < dl->B; b++) {
        const uint16_t *row = dl->tokens + (size_t)dl->row_order[dl->row_pos + (long)dl->rank * dl->B + b] * T;
        for (int t = 0; t < T; t++) { inputs[b * T + t] = row[t]; targets[b * T + t] = row[t + 1]; }
    }
    dl->row_pos += global;
    return 0;
}

void dataloader_close(DataLoader *dl) {
    for (int i = 0; i < dl->n_files; i++) free(dl->files[i]);
    free(dl->files);
    free(dl->file_rows);
    free(dl->shard_order);
    free(dl->tokens);
    free(dl->row_order);
    memset(dl, 0, sizeof *dl);
}
