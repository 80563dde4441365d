/* Several ranks (runtime/ranks/ranks.h): the ZeRO-1 shards, the emulated collectives against a plain mean, Comm.share
   (emulated, and over sockets between processes) against where each element must come from, the
   CPU backend keeping and updating only its shard (a ZeRO-1 rank's optimizer state is 1/N of ZeRO-0's), and a
   state file holding a shard. The training loop over N ranks is tests/cli/ranks.sh's. */
#include "gen/config.h"
#include "runtime/ranks/ranks.h"
#include "runtime/ranks/comm_socket.h"
#include "common/rng.h"
#include "common/files.h"
#include "runtime/train/state.h"
#include "runtime/train/train.h"
#include "tests/check.h"
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_shards_cover_once(void) {
    const size_t ns[] = {0, 1, 5, 1000, 1001, 3321};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int w = 1; w <= 7; w++) {
            size_t next = 0, S = ((ns[i] + w - 1) / w + RANKS_SHARD_ALIGN - 1) / RANKS_SHARD_ALIGN * RANKS_SHARD_ALIGN;
            for (int r = 0; r < w; r++) {
                size_t off, cnt;
                ranks_shard(ns[i], w, r, &off, &cnt);
                CHECK(off == next && cnt <= S && (off % RANKS_SHARD_ALIGN == 0 || cnt == 0), "n=%zu w=%d r=%d: [%zu,+%zu), expected to start at %zu",
                      ns[i], w, r, off, cnt, next);
                next = off + cnt;
            }
            CHECK(next == ns[i], "n=%zu w=%d: shards end at %zu", ns[i], w, next);
            /* a range [lo, hi) cut at the shards' edges: the pieces follow each other and cover it */
            size_t lo = ns[i] / 3, hi = ns[i] - ns[i] / 4, at = lo;
            for (int r = 0; r < w; r++) {
                size_t off, cnt;
                ranks_shard_within(ns[i], w, r, lo, hi, &off, &cnt);
                if (!cnt) continue;
                CHECK(off == at, "n=%zu w=%d r=%d: piece of [%zu,%zu) at %zu, expected %zu", ns[i], w, r, lo, hi, off, at);
                at = off + cnt;
            }
            CHECK(at == hi, "n=%zu w=%d: the pieces of [%zu,%zu) end at %zu", ns[i], w, lo, hi, at);
            CHECK(ranks_padded(ns[i], w) == S * (size_t)w && ranks_padded(ns[i], w) >= ns[i], "n=%zu w=%d: padded to %zu", ns[i], w,
                  ranks_padded(ns[i], w));
        }
}

/* The parts the backward finishes (gpt2_grad_part: every layer, then the shared tensors) cover every parameter once,
   and each per-layer part holds that layer's slices. */
static void test_grad_parts_cover_once(void) {
    GPT2Shape shape = gpt2_shape(64, 100, 128, 3, 2, 16);
    size_t sz[NUM_PARAM_TENSORS], off[NUM_PARAM_TENSORS], n = gpt2_param_sizes(&shape, sz, off);
    unsigned char *seen = xcalloc(n, 1);
    size_t ranges[NUM_PARAM_TENSORS][2];
    for (int part = shape.n_layer - 1; part >= GRAD_PART_REST; part--) {
        int count = gpt2_grad_part(&shape, part, ranges);
        CHECK(count == (part == GRAD_PART_REST ? 4 : P_LNFB + 1 - 4), "part %d: %d ranges", part, count);   /* GPT-2 has 16 tensors */
        for (int k = 0; k < count; k++)
            for (size_t i = ranges[k][0]; i < ranges[k][1] && i < n; i++) seen[i]++;
        if (part == 1) CHECK(ranges[0][0] == off[P_LN1W] + 16 && ranges[0][1] == off[P_LN1W] + 32, "layer 1's ln1w: [%zu, %zu)",
                             ranges[0][0], ranges[0][1]);
    }
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += seen[i] != 1;
    CHECK(bad == 0, "%zu of %zu parameters are not in exactly one part", bad, n);
    free(seen);
}

/* The emulated collectives: all-reduce is the rank-order fp32 mean on every rank, and the same bits as
   reduce-scatter then all-gather; reduce-scatter gives each owner its shard's mean; the f64 sum is the sum. */
static void test_emulated_collectives(void) {
    Err err;
    for (int w = 1; w <= 5; w++) {
        size_t n = 1001;
        Comm *c = comm_emulated_create(w, &err);
        CHECK(c && c->world == w && c->local == w && c->first_rank == 0, "create %d", w);
        if (!c) return;
        float *a[8], *b[8], *want = xmalloc(n * sizeof(float));
        uint64_t rng = 42 + w;
        for (int r = 0; r < w; r++) {
            a[r] = xmalloc(n * sizeof(float)); b[r] = xmalloc(n * sizeof(float));
            for (size_t i = 0; i < n; i++) a[r][i] = b[r][i] = rng_normal(&rng);
        }
        for (size_t i = 0; i < n; i++) {
            float s = a[0][i];
            for (int r = 1; r < w; r++) s += a[r][i];
            want[i] = s / (float)w;
        }
        CHECK_OK(c->all_reduce_avg(c, (void *const *)a, COMM_F32, n, &err), &err);
        int bad = 0;
        for (int r = 0; r < w; r++) bad += memcmp(a[r], want, n * sizeof(float)) != 0;
        CHECK(!bad, "w=%d: all-reduce is not the mean on %d ranks", w, bad);
        CHECK_OK(c->reduce_scatter_avg(c, (void *const *)b, COMM_F32, n, &err), &err);
        for (int r = 0; r < w; r++) {
            size_t off, cnt;
            ranks_shard(n, w, r, &off, &cnt);
            CHECK(!memcmp(b[r] + off, want + off, cnt * sizeof(float)), "w=%d: rank %d's shard is not the mean", w, r);
        }
        CHECK_OK(c->all_gather(c, (void *const *)b, COMM_F32, n, &err), &err);
        CHECK(c->all_gather(c, (void *const *)b, COMM_BF16, n, &err) == -1 && strstr(err.msg, "fp32"), "bf16 taken: %s", err.msg);
        for (int r = 0; r < w; r++) bad += memcmp(b[r], want, n * sizeof(float)) != 0;
        CHECK(!bad, "w=%d: reduce-scatter + all-gather differ from all-reduce on %d ranks", w, bad);
        double v[8], *vp[8];
        for (int r = 0; r < w; r++) { v[r] = r + 0.5; vp[r] = &v[r]; }
        CHECK_OK(c->all_reduce_sum_f64(c, vp, &err), &err);
        for (int r = 0; r < w; r++) CHECK(v[r] == w * w / 2.0, "w=%d: sum %g", w, v[r]);
        for (int r = 0; r < w; r++) { free(a[r]); free(b[r]); }
        free(want);
        c->destroy(c);
    }
    CHECK(comm_emulated_create(0, &err) == NULL && strstr(err.msg, "world size 0"), "world 0: %s", err.msg);
}

static int load_micro(Config *cfg, int ranks, int zero) {
    char g[64], z[64], t[64];
    snprintf(g, sizeof g, "train.num_gpus=%d", ranks);
    snprintf(z, sizeof z, "train.zero_stage=%d", zero);
    snprintf(t, sizeof t, "train.total_batch_size=%d", 128 * ranks);
    const char *sets[] = {g, z, t};
    Err err;
    if (config_load(cfg, "tests/configs/micro.lua", sets, 3, &err)) { fprintf(stderr, "%s\n", err.msg); return -1; }
    return 0;
}

/* ZeRO-1: rank r's backend keeps m and v of its shard only, 1/N of ZeRO-0's whole state, and its update moves
   only the parameters of its shard, by exactly what a whole-state backend moves them. */
static void test_zero1_state_is_a_shard(void) {
    Config c0, c1;
    if (load_micro(&c0, 4, 0) || load_micro(&c1, 4, 1)) { CHECK(0, "tests/configs/micro.lua did not load"); return; }
    Err err;
    static Plan plan0, plan1;
    if (plan_make_train(&plan0, &c0, "sm_90", NULL, &err) || plan_make_train(&plan1, &c1, "sm_90", NULL, &err)) { CHECK(0, "plan: %s", err.msg); return; }
    Backend *whole = train_make_rank_backend(&plan0, "cpu", (RankInfo){2, 4, 0}, NULL, &err);
    Backend *part = train_make_rank_backend(&plan1, "cpu", (RankInfo){2, 4, 0}, NULL, &err);
    CHECK(whole && part, "backends: %s", err.msg);
    if (!whole || !part) { if (whole) whole->destroy(whole); if (part) part->destroy(part); return; }
    size_t n = whole->num_params, S = (n + 3) / 4;
    CHECK(whole->opt_offset == 0 && whole->opt_count == n, "ZeRO-0: [%zu,+%zu) of %zu", whole->opt_offset, whole->opt_count, n);
    CHECK(part->opt_offset == 2 * S && part->opt_count == S, "ZeRO-1 rank 2: [%zu,+%zu), expected [%zu,+%zu)", part->opt_offset, part->opt_count, 2 * S, S);
    float *p = xmalloc(n * sizeof(float)), *p0 = xmalloc(n * sizeof(float)), *p1 = xmalloc(n * sizeof(float));
    GPT2Shape shape = config_shape(&c0);
    gpt2_init_params(&shape, p, 5);
    int B = c0.run.train.batch_size, T = c0.run.train.seq_len;
    int32_t *in = xmalloc((size_t)B * T * sizeof(int32_t)), *tg = xmalloc((size_t)B * T * sizeof(int32_t));
    for (int i = 0; i < B * T; i++) { in[i] = (i * 7) % 500; tg[i] = (i * 13 + 1) % 500; }
    Backend *be[2] = {whole, part};
    for (int k = 0; k < 2; k++) {
        float loss;
        CHECK_OK(be[k]->write(be[k], BACKEND_PARAMS, p, &err), &err);
        BackendRun zero = {.phase = BACKEND_ZERO_GRADS}, back = {.phase = BACKEND_BACKWARD, .grad_scale = 1.0f},
                   fwd = {.phase = BACKEND_FORWARD, .inputs = in, .targets = tg, .loss = &loss},
                   update = {.phase = BACKEND_UPDATE, .adamw = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f}, .grad_scale = 1.0f, .step = 1};
        CHECK_OK(be[k]->run(be[k], &zero, &err), &err);
        CHECK_OK(be[k]->run(be[k], &fwd, &err), &err);
        CHECK_OK(be[k]->run(be[k], &back, &err), &err);
        CHECK_OK(be[k]->run(be[k], &update, &err), &err);
    }
    CHECK_OK(whole->read(whole, BACKEND_PARAMS, 0, p0, &err), &err);
    CHECK_OK(part->read(part, BACKEND_PARAMS, 0, p1, &err), &err);
    size_t lo = part->opt_offset, hi = lo + part->opt_count, moved_outside = 0, differ = 0, moved = 0;
    for (size_t i = 0; i < n; i++) {
        if ((i < lo || i >= hi) && p1[i] != p[i]) moved_outside++;
        if (i >= lo && i < hi && p1[i] != p0[i]) differ++;
        if (i >= lo && i < hi && p1[i] != p[i]) moved++;
    }
    CHECK(moved > part->opt_count / 2, "only %zu of the shard's %zu parameters moved", moved, part->opt_count);
    CHECK(moved_outside == 0, "%zu parameters outside the shard moved", moved_outside);
    CHECK(differ == 0, "%zu parameters of the shard differ from the whole-state update", differ);
    float *m = xmalloc(S * sizeof(float)), *v = xmalloc(S * sizeof(float));
    float *mw = xmalloc(n * sizeof(float)), *vw = xmalloc(n * sizeof(float));
    CHECK_OK(part->read(part, BACKEND_ADAM_M, 0, m, &err) || part->read(part, BACKEND_ADAM_V, 0, v, &err), &err);
    CHECK_OK(whole->read(whole, BACKEND_ADAM_M, 0, mw, &err) || whole->read(whole, BACKEND_ADAM_V, 0, vw, &err), &err);
    CHECK(!memcmp(m, mw + lo, S * sizeof(float)) && !memcmp(v, vw + lo, S * sizeof(float)), "the shard's m and v differ");
    free(m); free(v); free(mw); free(vw); free(p); free(p0); free(p1); free(in); free(tg);
    whole->destroy(whole);
    part->destroy(part);
}

/* A state holding rank 1's shard saves and loads with its range; a header whose range leaves the parameters
   is refused by name. */
static void test_state_shard_file(void) {
    char dir[] = "/tmp/gpt2gen-ranks-XXXXXX", path[600];
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); return; }
    snprintf(path, sizeof path, "%s/state_00000003.r1.bin", dir);
    GPT2Shape shape = gpt2_shape(16, 60, 128, 2, 2, 16);
    size_t sizes[NUM_PARAM_TENSORS], n = gpt2_param_sizes(&shape, sizes, NULL), off, cnt;
    ranks_shard(n, 3, 1, &off, &cnt);
    int32_t order[2] = {1, 0};
    TrainState s = {.ranks = 3, .rank = 1, .shuffle = 1, .step = 3, .num_params = n, .n_shards = 2, .shard_order = order,
                    .shape = shape, .B = 2, .T = 8, .seed = 9, .loss_scale = 1, .shard_offset = off, .shard_count = cnt, .zero_stage = 1};
    s.m = xcalloc(cnt, sizeof(float)); s.v = xcalloc(cnt, sizeof(float)); s.params = xcalloc(cnt, sizeof(float));
    s.m[cnt - 1] = 3.5f;
    Err err;
    TrainState t;
    CHECK_OK(state_save(path, &s, &err), &err);
    CHECK_OK(state_load(path, &t, &err), &err);
    CHECK(t.shard_offset == off && t.shard_count == cnt && t.zero_stage == 1 && t.m && t.m[cnt - 1] == 3.5f,
          "loaded [%zu,+%zu) zero %d", t.shard_offset, t.shard_count, t.zero_stage);
    state_free(&t);
    s.shard_offset = n - 1;       /* a range past the parameters (the checksum is recomputed by the save) */
    CHECK_OK(state_save(path, &s, &err), &err);
    CHECK(state_load(path, &t, &err) != 0 && strstr(err.msg, "state_00000003.r1.bin: corrupt header: parameters"), "range: %s", err.msg);
    free(s.m); free(s.v); free(s.params);
    unlink(path);
    rmdir(dir);
}

/* Comm.share's splits: ZeRO-1's shards, all on rank 0 (a broadcast), and parts with gaps and an empty one */
enum { SHARE_N = 1001, SHARE_SPLITS = 3 };
static void share_parts(int split, int world, size_t (*parts)[2]) {
    for (int q = 0; q < world; q++) {
        if (split == 0) ranks_shard(SHARE_N, world, q, &parts[q][0], &parts[q][1]);
        else if (split == 1) { parts[q][0] = 0; parts[q][1] = q ? 0 : SHARE_N; }
        else { parts[q][0] = (size_t)q * 100 + 7; parts[q][1] = q == 1 ? 0 : 50; }
    }
}
static float share_value(int rank, size_t i) { return (float)rank * 4096 + (float)i; }
/* rank me's buffer after the share: element i is its part's owner's, or (in no part) still me's; the bad count */
static int share_wrong(const float *b, int world, int me, const size_t (*parts)[2]) {
    int bad = 0;
    for (size_t i = 0; i < SHARE_N; i++) {
        int from = me;
        for (int q = 0; q < world; q++) if (i >= parts[q][0] && i < parts[q][0] + parts[q][1]) from = q;
        bad += b[i] != share_value(from, i);
    }
    return bad;
}

static void test_emulated_share(void) {
    Err err;
    for (int w = 1; w <= 5; w++)
        for (int split = 0; split < SHARE_SPLITS; split++) {
            Comm *c = comm_emulated_create(w, &err);
            float *b[5];
            size_t parts[5][2];
            share_parts(split, w, parts);
            for (int r = 0; r < w; r++) {
                b[r] = xmalloc(SHARE_N * sizeof(float));
                for (size_t i = 0; i < SHARE_N; i++) b[r][i] = share_value(r, i);
            }
            CHECK_OK(c->share(c, (void *const *)b, SHARE_N, (const size_t (*)[2])parts, &err), &err);
            for (int r = 0; r < w; r++) {
                CHECK(!share_wrong(b[r], w, r, (const size_t (*)[2])parts), "w=%d split %d: rank %d's buffer", w, split, r);
                free(b[r]);
            }
            c->destroy(c);
        }
}

/* One rank of 3 over a Unix socket: every split shared in turn; the count of wrong buffers (or -1: no comm). */
static int share_rank(const char *id, int rank) {
    Err err;
    Comm *c = comm_socket_create(id, 3, rank, 20, &err);
    if (!c) { fprintf(stderr, "rank %d: %s\n", rank, err.msg); return -1; }
    int bad = 0;
    for (int split = 0; split < SHARE_SPLITS; split++) {
        float b[SHARE_N];
        size_t parts[3][2];
        share_parts(split, 3, parts);
        for (size_t i = 0; i < SHARE_N; i++) b[i] = share_value(rank, i);
        if (c->share(c, (void *const[]){b}, SHARE_N, (const size_t (*)[2])parts, &err)) { fprintf(stderr, "rank %d: %s\n", rank, err.msg); bad++; }
        else bad += share_wrong(b, 3, rank, (const size_t (*)[2])parts) != 0;
    }
    c->destroy(c);
    return bad;
}

static void test_socket_share(void) {
    char id[256];
    Err err;
    const char *tmp = getenv("TMPDIR");
    CHECK_OK(comm_socket_id(id, sizeof id, tmp && *tmp ? tmp : "/tmp", &err), &err);
    pid_t kids[2];
    for (int r = 1; r <= 2; r++)
        if ((kids[r - 1] = fork()) == 0) _exit(share_rank(id, r) == 0 ? 0 : 1);
    CHECK(share_rank(id, 0) == 0, "rank 0's buffers are not every rank's parts");
    for (int k = 0; k < 2; k++) {
        int st = 0;
        waitpid(kids[k], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d's buffers are not every rank's parts (status %d)", k + 1, st);
    }
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    RUN(test_shards_cover_once);
    RUN(test_grad_parts_cover_once);
    RUN(test_emulated_collectives);
    RUN(test_emulated_share);
    RUN(test_socket_share);
    RUN(test_zero1_state_is_a_shard);
    RUN(test_state_shard_file);
    return check_summary();
}
