#include "runtime/ranks/ranks.h"
#include <stdlib.h>
#include <string.h>

/* dst[i] = (sum over r, in rank order, of bufs[r][i]) / world, for i in [lo, hi) */
static void mean_into(float *dst, float *const *bufs, int world, size_t lo, size_t hi) {
#pragma omp parallel for schedule(static)
    for (size_t i = lo; i < hi; i++) {
        float s = bufs[0][i];
        for (int r = 1; r < world; r++) s += bufs[r][i];
        dst[i] = s / (float)world;
    }
}

/* the CPU backend's buffers are fp32 */
static int emu_type(CommType t, Err *err) {
    return t == COMM_F32 ? 0 : err_set(err, "ranks: the emulated collectives take fp32 buffers only");
}

static int emu_reduce_scatter(Comm *c, void *const *vbufs, CommType t, size_t n, Err *err) {
    if (emu_type(t, err)) return -1;
    float *const *bufs = (float *const *)vbufs;
    /* each shard's mean goes to its owner; the owners' shards are disjoint, so writing them in place is safe */
    for (int r = 0; r < c->world; r++) {
        size_t off, cnt;
        ranks_shard(n, c->world, r, &off, &cnt);
        mean_into(bufs[r], bufs, c->world, off, off + cnt);
    }
    return 0;
}

static int emu_all_gather(Comm *c, void *const *vbufs, CommType t, size_t n, Err *err) {
    if (emu_type(t, err)) return -1;
    float *const *bufs = (float *const *)vbufs;
    for (int r = 0; r < c->world; r++) {
        size_t off, cnt;
        ranks_shard(n, c->world, r, &off, &cnt);
        for (int q = 0; q < c->world; q++)
            if (q != r && cnt) memcpy(bufs[q] + off, bufs[r] + off, cnt * sizeof(float));
    }
    return 0;
}

/* reduce-scatter then all-gather: the same bits as ZeRO-1's two halves */
static int emu_all_reduce(Comm *c, void *const *bufs, CommType t, size_t n, Err *err) {
    return emu_reduce_scatter(c, bufs, t, n, err) || emu_all_gather(c, bufs, t, n, err) ? -1 : 0;
}

static int emu_sum_f64(Comm *c, double *const *vals, Err *err) {
    (void)err;
    double s = 0;
    for (int r = 0; r < c->world; r++) s += *vals[r];
    for (int r = 0; r < c->world; r++) *vals[r] = s;
    return 0;
}

static int emu_share(Comm *c, void *const *bufs, size_t n, const size_t (*parts)[2], Err *err) {
    (void)n; (void)err;
    for (int q = 0; q < c->world; q++)
        for (int r = 0; r < c->world; r++)
            if (r != q && parts[q][1])
                memcpy((char *)bufs[r] + parts[q][0] * 4, (const char *)bufs[q] + parts[q][0] * 4, parts[q][1] * 4);
    return 0;
}

static void emu_destroy(Comm *c) { free(c); }

Comm *comm_emulated_create(int world, Err *err) {
    if (world < 1) { err_set(err, "ranks: world size %d, expected 1 or more", world); return NULL; }
    Comm *c = xcalloc(1, sizeof *c);
    *c = (Comm){.name = "emulated", .world = world, .first_rank = 0, .local = world,
                .all_reduce_avg = emu_all_reduce, .reduce_scatter_avg = emu_reduce_scatter, .all_gather = emu_all_gather,
                .all_reduce_sum_f64 = emu_sum_f64, .share = emu_share, .destroy = emu_destroy};
    return c;
}
