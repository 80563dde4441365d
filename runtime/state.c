#include "runtime/state.h"
#include "common/files.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void put64(int32_t *h, int i, uint64_t v) { h[i] = (int32_t)(uint32_t)v; h[i + 1] = (int32_t)(uint32_t)(v >> 32); }
static uint64_t get64(const int32_t *h, int i) { return (uint64_t)(uint32_t)h[i] | (uint64_t)(uint32_t)h[i + 1] << 32; }

int state_save(const char *path, const TrainState *s, Err *err) {
    int32_t h[256] = {0};
    h[0] = STATE_MAGIC; h[1] = 1; h[2] = s->ranks; h[3] = s->rank; h[4] = 1; h[5] = s->shuffle; h[6] = s->step;
    h[7] = (int32_t)s->epoch; h[8] = s->shard_pos; put64(h, 9, (uint64_t)s->row_pos); put64(h, 11, s->sample_rng);
    put64(h, 13, s->num_params); h[15] = s->n_shards;
    AtomicFile af;
    if (atomic_open(&af, path, err)) return -1;
    int ok = fwrite(h, sizeof h, 1, af.f) == 1
          && fwrite(s->m, sizeof(float), s->num_params, af.f) == s->num_params
          && fwrite(s->v, sizeof(float), s->num_params, af.f) == s->num_params
          && fwrite(s->params, sizeof(float), s->num_params, af.f) == s->num_params
          && fwrite(s->shard_order, sizeof(int32_t), s->n_shards, af.f) == (size_t)s->n_shards;
    if (!ok) { atomic_abort(&af); return err_set(err, "%s: write failed: %s", path, strerror(errno)); }
    return atomic_commit(&af, err);
}

int state_load(const char *path, TrainState *s, size_t expect_params, Err *err) {
    memset(s, 0, sizeof *s);
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(err, "%s: cannot open the resume state: %s", path, strerror(errno));
    int32_t h[256];
    if (fread(h, sizeof h, 1, f) != 1) { fclose(f); return err_set(err, "%s: truncated: shorter than the 1024-byte header", path); }
    if (h[0] != STATE_MAGIC) { fclose(f); return err_set(err, "%s: not a resume state (magic %d, expected %d)", path, h[0], STATE_MAGIC); }
    if (h[1] != 1) { fclose(f); return err_set(err, "%s: resume state version %d, expected 1", path, h[1]); }
    s->ranks = h[2]; s->rank = h[3]; s->shuffle = h[5]; s->step = h[6]; s->epoch = h[7]; s->shard_pos = h[8];
    s->row_pos = (long)get64(h, 9); s->sample_rng = get64(h, 11); s->num_params = get64(h, 13); s->n_shards = h[15];
    if (s->num_params != expect_params) {
        fclose(f);
        return err_set(err, "%s: holds the state of a model with %zu parameters, the config's has %zu", path, s->num_params, expect_params);
    }
    if (s->n_shards < 0 || s->n_shards > (1 << 24)) { fclose(f); return err_set(err, "%s: corrupt header (%d shards)", path, s->n_shards); }
    struct stat st;
    size_t want = sizeof h + 3 * s->num_params * sizeof(float) + (size_t)s->n_shards * sizeof(int32_t);
    if (fstat(fileno(f), &st) == 0 && (size_t)st.st_size != want) {
        fclose(f);
        return err_set(err, "%s: truncated or padded: %lld bytes, the header promises %zu", path, (long long)st.st_size, want);
    }
    s->m = xmalloc(s->num_params * sizeof(float));
    s->v = xmalloc(s->num_params * sizeof(float));
    s->params = xmalloc(s->num_params * sizeof(float));
    s->shard_order = xmalloc((s->n_shards + 1) * sizeof(int32_t));
    int ok = fread(s->m, sizeof(float), s->num_params, f) == s->num_params
          && fread(s->v, sizeof(float), s->num_params, f) == s->num_params
          && fread(s->params, sizeof(float), s->num_params, f) == s->num_params
          && fread(s->shard_order, sizeof(int32_t), s->n_shards, f) == (size_t)s->n_shards;
    fclose(f);
    if (!ok) { state_free(s); return err_set(err, "%s: truncated", path); }
    return 0;
}

void state_free(TrainState *s) {
    free(s->m); free(s->v); free(s->params); free(s->shard_order);
    s->m = s->v = s->params = NULL;
    s->shard_order = NULL;
}
