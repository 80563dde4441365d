/* state: the resume state (see state.h). The host is little-endian, like the file. */
#include "runtime/train/state.h"
#include "common/files.h"
#include "runtime/checkpoint.h"
#include "gen/spec.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { HEADER_INTS = STATE_HEADER_INTS, SUM_AT = 24 };

size_t state_count(const TrainState *s) { return s->shard_count ? s->shard_count : s->num_params; }

/* ---------------------------------------------------------------- the checksum (state.h) */

typedef struct { uint64_t h, len; uint32_t half; int has_half; } Sum64;

static void sum_init(Sum64 *s) { memset(s, 0, sizeof *s); s->h = 0xCBF29CE484222325ull; }
static void sum_word(Sum64 *s, uint64_t w) { s->h = ((s->h << 31 | s->h >> 33) ^ w) * 0x9E3779B97F4A7C15ull; }

/* Folds n bytes (a multiple of 4, as every part of the file is) into the sum, as one stream of words. */
static void sum_update(Sum64 *s, const void *p, size_t n) {
    const uint8_t *b = p;
    s->len += n;
    if (s->has_half && n >= 4) {
        uint32_t x;
        memcpy(&x, b, 4);
        sum_word(s, s->half | (uint64_t)x << 32);
        b += 4; n -= 4; s->has_half = 0;
    }
    for (; n >= 8; b += 8, n -= 8) { uint64_t w; memcpy(&w, b, 8); sum_word(s, w); }
    if (n >= 4) { memcpy(&s->half, b, 4); s->has_half = 1; }
}

static uint64_t sum_final(Sum64 *s) {
    if (s->has_half) sum_word(s, s->half);
    sum_word(s, s->len);
    return s->h;
}

/* ---------------------------------------------------------------- the header */

static void put64(int32_t *h, int i, uint64_t v) { h[i] = (int32_t)(uint32_t)v; h[i + 1] = (int32_t)(uint32_t)(v >> 32); }
static uint64_t get64(const int32_t *h, int i) { return (uint64_t)(uint32_t)h[i] | (uint64_t)(uint32_t)h[i + 1] << 32; }

void state_header_put(const TrainState *s, int32_t *h) {
    memset(h, 0, HEADER_INTS * sizeof *h);
    h[0] = STATE_MAGIC; h[1] = STATE_VERSION; h[2] = s->ranks; h[3] = s->rank; h[4] = 1; h[5] = s->shuffle;
    h[6] = s->step; h[7] = (int32_t)s->epoch; h[8] = s->shard_pos; put64(h, 9, (uint64_t)s->row_pos);
    put64(h, 11, s->sample_rng); put64(h, 13, s->num_params); h[15] = s->n_shards; h[16] = s->B; h[17] = s->T;
    const GPT2Shape *g = &s->shape;
    h[18] = g->max_seq_len; h[19] = g->vocab_size; h[20] = g->padded_vocab_size; h[21] = g->n_layer; h[22] = g->n_head;
    h[23] = g->n_embd; put64(h, 26, s->seed);
    if (!gpt2_is_gpt2(g)) checkpoint_arch_put(h + 40, g);   /* another architecture (runtime/checkpoint.h); GPT-2: zeros */
    memcpy(&h[28], &s->loss_scale, 4); h[29] = s->loss_scale_clean; h[30] = s->skipped;
    if (s->ranks > 1) { h[31] = s->zero_stage; put64(h, 32, s->shard_offset); put64(h, 34, state_count(s)); }
}

int state_header_get(const int32_t *h, TrainState *s, const char *path, Err *err) {
    s->ranks = h[2]; s->rank = h[3]; s->shuffle = h[5]; s->step = h[6]; s->epoch = h[7]; s->shard_pos = h[8];
    s->row_pos = (long)get64(h, 9); s->sample_rng = get64(h, 11); s->num_params = get64(h, 13); s->n_shards = h[15];
    s->B = h[16]; s->T = h[17];
    s->shape = gpt2_shape(h[18], h[19], h[20], h[21], h[22], h[23]);
    s->seed = get64(h, 26);
    if (h[1] >= 3) { memcpy(&s->loss_scale, &h[28], 4); s->loss_scale_clean = h[29]; s->skipped = h[30]; }
    s->zero_stage = h[1] >= 3 ? h[31] : 0;
    s->shard_offset = h[1] >= 3 ? get64(h, 32) : 0;
    s->shard_count = h[1] >= 3 ? get64(h, 34) : 0;
    return h[0] == STATE_MAGIC && h[1] >= 3 && h[40] ? checkpoint_arch_get(h + 40, &s->shape, path, err) : 0;   /* not GPT-2 */
}

/* The body's parts, in file order. */
typedef struct { void *p; size_t bytes; } Part;
static int body_parts(const TrainState *s, Part parts[4]) {
    size_t n = state_count(s) * sizeof(float);
    parts[0] = (Part){s->m, n}; parts[1] = (Part){s->v, n}; parts[2] = (Part){s->params, n};
    parts[3] = (Part){s->shard_order, (size_t)s->n_shards * sizeof(int32_t)};
    return 4;
}

/* The checksum of a header (its checksum field taken as zero) and the body. */
static uint64_t checksum(const int32_t *header, const TrainState *s) {
    int32_t h[HEADER_INTS];
    memcpy(h, header, sizeof h);
    put64(h, SUM_AT, 0);
    Sum64 sum;
    sum_init(&sum);
    sum_update(&sum, h, sizeof h);
    Part parts[4];
    for (int i = 0, n = body_parts(s, parts); i < n; i++) sum_update(&sum, parts[i].p, parts[i].bytes);
    return sum_final(&sum);
}

/* ---------------------------------------------------------------- save */

int state_save(const char *path, const TrainState *s, Err *err) {
    int32_t h[HEADER_INTS];
    state_header_put(s, h);
    put64(h, SUM_AT, checksum(h, s));
    AtomicFile af;
    if (atomic_open(&af, path, err)) return -1;
    int ok = fwrite(h, sizeof h, 1, af.f) == 1;
    Part parts[4];
    for (int i = 0, n = body_parts(s, parts); i < n && ok; i++) ok = fwrite(parts[i].p, 1, parts[i].bytes, af.f) == parts[i].bytes;
    if (!ok) { int e = errno; atomic_abort(&af); return err_set(err, "%s: write failed: %s", path, strerror(e)); }
    return atomic_commit(&af, err);
}

/* ---------------------------------------------------------------- load */

/* What the header alone must hold before the body is read: the kind, the version, a sane shape whose
   parameter count is the one recorded, a sane shard count, and the size those promise. */
static int check_header(const char *path, const int32_t *h, const TrainState *s, long long file_bytes, Err *err) {
    if (h[0] != STATE_MAGIC) return err_set(err, "%s: not a resume state (magic %d, expected %d)", path, h[0], STATE_MAGIC);
    if (h[1] != STATE_VERSION && h[1] != 2)
        return err_set(err, "%s: resume state version %d, expected %d (or 2)%s", path, h[1], STATE_VERSION,
                       h[1] == 1 ? " (version 1, from an older gpt2gen, records no shape or checksum; start the run over)" : "");
    if (checkpoint_check_shape(path, &s->shape, "in the resume state", err)) return -1;
    size_t sizes[NUM_PARAM_TENSORS];
    size_t want_params = gpt2_param_sizes(&s->shape, sizes, NULL);
    if (s->num_params != want_params)
        return err_set(err, "%s: corrupt header: %zu parameters, its shape has %zu", path, s->num_params, want_params);
    if (s->n_shards < 1 || s->n_shards > (1 << 24)) return err_set(err, "%s: corrupt header (%d shards)", path, s->n_shards);
    if (s->shard_offset > s->num_params || s->shard_count > s->num_params - s->shard_offset)
        return err_set(err, "%s: corrupt header: parameters [%zu, +%zu) of %zu", path, s->shard_offset, s->shard_count, s->num_params);
    unsigned long long want = HEADER_INTS * 4ull + 3ull * state_count(s) * sizeof(float) + (unsigned long long)s->n_shards * 4;
    if ((unsigned long long)file_bytes != want)
        return err_set(err, "%s: %s: %lld bytes, the header promises %llu", path,
                       (unsigned long long)file_bytes < want ? "truncated" : "has trailing data", file_bytes, want);
    return 0;
}

static int is_permutation(const int32_t *a, int n) {
    char *seen = xcalloc((size_t)n, 1);
    int ok = 1;
    for (int i = 0; i < n && ok; i++) ok = a[i] >= 0 && a[i] < n && !seen[a[i]]++;
    free(seen);
    return ok;
}

/* Every field in range (the checksum has shown they are the ones written). */
static int check_fields(const char *path, const int32_t *h, const TrainState *s, Err *err) {
    if (s->ranks < 1 || s->rank < 0 || s->rank >= s->ranks) return err_set(err, "%s: rank %d of %d ranks is out of range", path, s->rank, s->ranks);
    if (s->zero_stage != 0 && s->zero_stage != 1) return err_set(err, "%s: zero stage %d, expected 0 or 1", path, s->zero_stage);
    if (s->ranks == 1 && (s->shard_offset || s->shard_count)) return err_set(err, "%s: a 1-rank state holding a shard", path);
    if (h[4] != 0 && h[4] != 1) return err_set(err, "%s: master-weights flag %d, expected 0 or 1", path, h[4]);
    if (s->shuffle != 0 && s->shuffle != 1) return err_set(err, "%s: shuffle flag %d, expected 0 or 1", path, s->shuffle);
    if (s->step < 0) return err_set(err, "%s: step %d, expected a step >= 0", path, s->step);
    if (s->B < 1 || s->T < 1) return err_set(err, "%s: B %d and T %d, expected both >= 1", path, s->B, s->T);
    if (s->epoch < 0 || s->shard_pos < 0 || s->shard_pos >= s->n_shards || s->row_pos < 0)
        return err_set(err, "%s: data position (epoch %ld, shard %d, row %ld) is out of range for %d shards", path,
                       s->epoch, s->shard_pos, s->row_pos, s->n_shards);
    if (h[1] >= 3 && !config_loss_scale_valid(s->loss_scale))
        return err_set(err, "%s: loss scale %g, expected a power of two from 1 to 2^24", path, s->loss_scale);
    if (h[1] >= 3 && (s->loss_scale_clean < 0 || s->skipped < 0 || s->skipped > s->step))
        return err_set(err, "%s: loss scaler counts (%d clean, %d skipped) out of range for step %d", path,
                       s->loss_scale_clean, s->skipped, s->step);
    if (!is_permutation(s->shard_order, s->n_shards)) return err_set(err, "%s: the shard order is not an order of %d shards", path, s->n_shards);
    return 0;
}

static int read_body(const char *path, FILE *f, const int32_t *h, TrainState *s, Err *err) {
    size_t n = state_count(s);
    s->m = xmalloc(n * sizeof(float));
    s->v = xmalloc(n * sizeof(float));
    s->params = xmalloc(n * sizeof(float));
    s->shard_order = xmalloc((size_t)s->n_shards * sizeof(int32_t));
    Part parts[4];
    for (int i = 0, k = body_parts(s, parts); i < k; i++)
        if (fread(parts[i].p, 1, parts[i].bytes, f) != parts[i].bytes) return err_set(err, "%s: read error in the body", path);
    if (checksum(h, s) != get64(h, SUM_AT))
        return err_set(err, "%s: checksum mismatch: the file is corrupt (changed after it was written)", path);
    if (check_fields(path, h, s, err)) return -1;
    s->shard_count = n;
    return 0;
}

int state_load(const char *path, TrainState *s, Err *err) {
    memset(s, 0, sizeof *s);
    FILE *f = fopen_regular(path, "a resume state", err);
    if (!f) return -1;
    int32_t h[HEADER_INTS];
    struct stat st;
    int rc;
    if (fstat(fileno(f), &st) != 0) rc = err_set(err, "%s: cannot stat: %s", path, strerror(errno));
    else if (st.st_size < (long long)sizeof h || fread(h, sizeof h, 1, f) != 1)
        rc = err_set(err, "%s: truncated: shorter than the 1024-byte header", path);
    else {
        rc = state_header_get(h, s, path, err);
        rc = rc || check_header(path, h, s, (long long)st.st_size, err);
        if (!rc) rc = read_body(path, f, h, s, err);
    }
    fclose(f);
    if (rc) state_free(s);
    return rc;
}

int state_check(const char *path, const TrainState *s, const TrainState *want, int max_step, Err *err) {
    if (checkpoint_match_shape(path, &s->shape, &want->shape, "resume state", err)) return -1;
    if (s->ranks != want->ranks)
        return err_set(err, "%s: train.num_gpus is %d in the resume state, %d in this run: a run resumes only on as many ranks as "
                       "saved it; resume with train.num_gpus = %d, or start a new run from its model file with "
                       "checkpoint.init (AdamW's state and the data position start over)", path, s->ranks, want->ranks, s->ranks);
    const struct { const char *key; int got, want; } f[] = {
        {"train.batch_size", s->B, want->B}, {"train.seq_len", s->T, want->T}, {"train.num_gpus", s->ranks, want->ranks},
        {"the rank", s->rank, want->rank}, {"the shuffle flag", s->shuffle, want->shuffle},
        {"the number of training shards", s->n_shards, want->n_shards}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].got != f[i].want)
            return err_set(err, "%s: %s is %d in the resume state, %d in this run", path, f[i].key, f[i].got, f[i].want);
    if (s->seed != want->seed)
        return err_set(err, "%s: train.seed is %llu in the resume state, %llu in this run", path,
                       (unsigned long long)s->seed, (unsigned long long)want->seed);
    if (s->step > max_step)
        return err_set(err, "%s: saved at step %d, beyond train.steps = %d; raise train.steps to continue this run", path, s->step, max_step);
    return 0;
}

void state_free(TrainState *s) {
    free(s->m); free(s->v); free(s->params); free(s->shard_order);
    s->m = s->v = s->params = NULL;
    s->shard_order = NULL;
}
