/* nccl: see nccl.h. NCCL's types and constants are declared here from its documented C API (nccl.h of NCCL 2.14
   and later), so that the project builds where NCCL is not installed. */
#include "runtime/cuda/nccl.h"
#include "runtime/cuda/ops.h"
#include "common/clock.h"
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct NcclCommOpaque *ncclComm_t;
typedef struct { char internal[NCCL_ID_BYTES]; } ncclUniqueId;
typedef enum { ncclSuccess = 0, ncclInProgress = 7 } ncclResult_t;
enum { ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9 };   /* ncclDataType_t */
enum { ncclSum = 0, ncclAvg = 4 };                                            /* ncclRedOp_t */
/* The leading fields of ncclConfig_t, which NCCL reads up to `size` bytes of, taking its defaults for the rest. */
typedef struct {
    size_t size;
    unsigned int magic;      /* 0xcafebeef */
    unsigned int version;    /* the NCCL version these fields are from */
    int blocking;
} NcclConfigHead;
#define NCCL_VERSION_CODE(x, y, z) ((x) * 10000 + (y) * 100 + (z))

typedef struct {
    void *lib;
    ncclResult_t (*ncclGetVersion)(int *);
    ncclResult_t (*ncclGetUniqueId)(ncclUniqueId *);
    ncclResult_t (*ncclCommInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int, NcclConfigHead *);
    ncclResult_t (*ncclCommGetAsyncError)(ncclComm_t, ncclResult_t *);
    ncclResult_t (*ncclCommFinalize)(ncclComm_t);
    ncclResult_t (*ncclCommDestroy)(ncclComm_t);
    ncclResult_t (*ncclCommAbort)(ncclComm_t);
    const char *(*ncclGetErrorString)(ncclResult_t);
    const char *(*ncclGetLastError)(ncclComm_t);
    ncclResult_t (*ncclAllReduce)(const void *, void *, size_t, int, int, ncclComm_t, CUstream);
    ncclResult_t (*ncclReduceScatter)(const void *, void *, size_t, int, int, ncclComm_t, CUstream);
    ncclResult_t (*ncclAllGather)(const void *, void *, size_t, int, ncclComm_t, CUstream);
    ncclResult_t (*ncclReduce)(const void *, void *, size_t, int, int, int, ncclComm_t, CUstream);
    ncclResult_t (*ncclBroadcast)(const void *, void *, size_t, int, int, ncclComm_t, CUstream);
    ncclResult_t (*ncclGroupStart)(void);
    ncclResult_t (*ncclGroupEnd)(void);
} NcclLib;
#define NCCL_FUNCS(X) X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRankConfig) X(ncclCommGetAsyncError) \
    X(ncclCommFinalize) X(ncclCommDestroy) X(ncclCommAbort) X(ncclGetErrorString) X(ncclGetLastError) X(ncclAllReduce) \
    X(ncclReduceScatter) X(ncclAllGather) X(ncclReduce) X(ncclBroadcast) X(ncclGroupStart) X(ncclGroupEnd)

static NcclLib nc;
static int nc_version;

int nccl_load(const Env *env, int *version, Err *err) {
    if (!nc.lib) {
        const char *name = env_or_defaults(env)->nccl_library;
        if (!name) name = "libnccl.so.2";
        void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            return err_set(err, "NCCL not found: %s could not be loaded (%s); training on several GPUs needs NCCL 2.14 "
                           "or later (e.g. the libnccl2 package), or name its library in GPT2GEN_NCCL_LIBRARY", name, dlerror());
        NcclLib L = {.lib = h};
#define LOAD(fn) \
        *(void **)&L.fn = dlsym(h, #fn); \
        if (!L.fn) { dlclose(h); return err_set(err, "%s lacks %s: NCCL 2.14 or later is needed", name, #fn); }
        NCCL_FUNCS(LOAD)
#undef LOAD
        int v = 0;
        if (L.ncclGetVersion(&v) != ncclSuccess || v < NCCL_VERSION_CODE(2, 14, 0)) {
            dlclose(h);
            return err_set(err, "%s is NCCL %d.%d.%d: 2.14 or later is needed (non-blocking communicators)", name,
                           v / 10000, v / 100 % 100, v % 100);
        }
        nc = L;
        nc_version = v;
    }
    if (version) *version = nc_version;
    return 0;
}

static int nccl_fail(ncclResult_t r, ncclComm_t comm, const char *what, Err *err) {
    const char *last = comm && nc.ncclGetLastError ? nc.ncclGetLastError(comm) : NULL;
    return err_set(err, "NCCL %s: %s%s%s", what, nc.ncclGetErrorString(r), last && *last ? ": " : "", last ? last : "");
}

int nccl_unique_id(void *id, Err *err) {
    if (nccl_load(NULL, NULL, err)) return -1;
    ncclUniqueId u;
    ncclResult_t r = nc.ncclGetUniqueId(&u);
    if (r != ncclSuccess) return nccl_fail(r, NULL, "ncclGetUniqueId", err);
    memcpy(id, &u, NCCL_ID_BYTES);
    return 0;
}

/* ---------------------------------------------------------------- the Comm */

typedef struct {
    ncclComm_t comm;
    Cuda *c;              /* the backend's GPU and compute stream */
    CUevent done;         /* recorded after each collective */
    CUevent ready;        /* the backward's work so far, which the communication stream waits for */
    int pending;          /* ranges enqueued on the communication stream, not waited for yet */
    dptr scratch;         /* one fp64 for the scalar sums */
    double *host;         /* pinned: the scalar's copy, so that no copy blocks without a deadline */
    double timeout;
    int rank;
} Nccl;

static void nap(void) { nanosleep(&(struct timespec){0, 20000}, NULL); }

/* After an error or the timeout: the communicator is aborted (it does not wait for the other ranks). */
static int broken(Comm *cm) {
    Nccl *n = cm->impl;
    if (n->comm) nc.ncclCommAbort(n->comm);
    n->comm = NULL;
    cm->broken = 1;
    return -1;
}

/* Waits until NCCL is no longer "in progress" on the communicator (a non-blocking call returned), or fails. */
static int settle(Comm *cm, ncclResult_t r, const char *what, double deadline, Err *err) {
    Nccl *n = cm->impl;
    while (r == ncclInProgress) {
        if (now_seconds() > deadline) {
            err_set(err, "NCCL %s: no answer from the other ranks within %.0f s (did one of them stop?); "
                    "GPT2GEN_NCCL_TIMEOUT sets the limit", what, n->timeout);
            return broken(cm);
        }
        nap();
        if (nc.ncclCommGetAsyncError(n->comm, &r) != ncclSuccess) break;
    }
    if (r != ncclSuccess) {
        nccl_fail(r, n->comm, what, err);
        return broken(cm);
    }
    return 0;
}

/* Work enqueued on stream s done: polls the event recorded after it and NCCL's asynchronous error against the
   deadline. */
static int finish_on(Comm *cm, CUstream s, ncclResult_t r, const char *what, double deadline, Err *err) {
    Nccl *n = cm->impl;
    if (settle(cm, r, what, deadline, err)) return -1;
    if (cuda_check(cu.cuEventRecord(n->done, s), what, err)) return broken(cm);
    for (;;) {
        CUresult q = cu.cuEventQuery(n->done);
        if (q == CUDA_SUCCESS) return 0;
        if (q != CUDA_ERROR_NOT_READY) { cuda_check(q, what, err); return broken(cm); }
        ncclResult_t a = ncclSuccess;
        nc.ncclCommGetAsyncError(n->comm, &a);
        if (a != ncclSuccess && a != ncclInProgress) return settle(cm, a, what, deadline, err);
        if (now_seconds() > deadline) return settle(cm, ncclInProgress, what, deadline, err);
        nap();
    }
}

/* ... on the compute stream */
static int finish(Comm *cm, ncclResult_t r, const char *what, double deadline, Err *err) {
    return finish_on(cm, ((Nccl *)cm->impl)->c->s, r, what, deadline, err);
}

static int nccl_type(CommType t) { return t == COMM_BF16 ? ncclBfloat16 : t == COMM_F16 ? ncclFloat16 : ncclFloat32; }
static size_t type_bytes(CommType t) { return t == COMM_F32 ? 4 : 2; }

static int nc_all_reduce(Comm *cm, void *const *bufs, CommType t, size_t n, Err *err) {
    Nccl *x = cm->impl;
    void *b = bufs[0];
    return finish(cm, nc.ncclAllReduce(b, b, n, nccl_type(t), ncclAvg, x->comm, x->c->s), "all-reduce",
                  now_seconds() + x->timeout, err);
}

/* in place: rank r's shard of the padded buffer (ranks_padded) is its part of the result */
static int nc_reduce_scatter(Comm *cm, void *const *bufs, CommType t, size_t n, Err *err) {
    Nccl *x = cm->impl;
    size_t S = ranks_padded(n, cm->world) / (size_t)cm->world;
    char *b = bufs[0];
    return finish(cm, nc.ncclReduceScatter(b, b + (size_t)x->rank * S * type_bytes(t), S, nccl_type(t), ncclAvg, x->comm, x->c->s),
                  "reduce-scatter", now_seconds() + x->timeout, err);
}

static int nc_all_gather(Comm *cm, void *const *bufs, CommType t, size_t n, Err *err) {
    Nccl *x = cm->impl;
    size_t S = ranks_padded(n, cm->world) / (size_t)cm->world;
    char *b = bufs[0];
    return finish(cm, nc.ncclAllGather(b + (size_t)x->rank * S * type_bytes(t), b, S, nccl_type(t), x->comm, x->c->s),
                  "all-gather", now_seconds() + x->timeout, err);
}

static int nc_sum_f64(Comm *cm, double *const *vals, Err *err) {
    Nccl *x = cm->impl;
    *x->host = *vals[0];
    CUstream s = x->c->s;
    if (cuda_check(cu.cuMemcpyHtoDAsync(x->scratch, x->host, 8, s), "NCCL sum", err)) return broken(cm);
    ncclResult_t r = nc.ncclAllReduce((void *)(uintptr_t)x->scratch, (void *)(uintptr_t)x->scratch, 1, ncclFloat64, ncclSum,
                                      x->comm, s);
    double deadline = now_seconds() + x->timeout;
    if (settle(cm, r, "sum", deadline, err)) return -1;
    if (cuda_check(cu.cuMemcpyDtoHAsync(x->host, x->scratch, 8, s), "NCCL sum", err)) return broken(cm);
    if (finish(cm, ncclSuccess, "sum", deadline, err)) return -1;
    *vals[0] = *x->host;
    return 0;
}

/* Host arrays, through a GPU buffer of SHARE_CHUNK elements: each part, a chunk at a time, goes from its rank's host
   memory to the buffer, is broadcast from that rank, and comes back to every other rank's host memory. Each
   collective is waited for (with the deadline) before its result is copied back, so no copy waits on the other
   ranks. Only checkpoints and resume call it: simple before fast. */
enum { SHARE_CHUNK = 1 << 22 };
static int share_chunk(Comm *cm, char *host, size_t at, size_t len, int root, dptr d, double deadline, Err *err) {
    Nccl *x = cm->impl;
    CUstream s = x->c->s;
    if (root == x->rank && cuda_check(cu.cuMemcpyHtoDAsync(d, host + at * 4, len * 4, s), "NCCL share", err)) return broken(cm);
    void *p = (void *)(uintptr_t)d;
    if (finish(cm, nc.ncclBroadcast(p, p, len, ncclFloat32, root, x->comm, s), "broadcast", deadline, err)) return -1;
    if (root == x->rank) return 0;
    if (cuda_check(cu.cuMemcpyDtoHAsync(host + at * 4, d, len * 4, s), "NCCL share", err)) return broken(cm);
    return finish(cm, ncclSuccess, "broadcast", deadline, err);
}

static int nc_share(Comm *cm, void *const *bufs, size_t n, const size_t (*parts)[2], Err *err) {
    Nccl *x = cm->impl;
    double deadline = now_seconds() + x->timeout;
    dptr d = 0;
    (void)n;
    if (cuda_check(cu.cuMemAlloc(&d, SHARE_CHUNK * 4), "NCCL share: a GPU buffer", err)) return broken(cm);
    int rc = 0;
    for (int q = 0; q < cm->world && !rc; q++)
        for (size_t at = parts[q][0], end = at + parts[q][1]; at < end && !rc; at += SHARE_CHUNK)
            rc = share_chunk(cm, bufs[0], at, end - at < SHARE_CHUNK ? end - at : SHARE_CHUNK, q, d, deadline, err);
    if (!cm->broken) cu.cuMemFree(d);   /* as nc_destroy: nothing more is asked of an aborted GPU context */
    return rc;
}

/* On the communication stream, after the compute stream's work so far (the backward up to the part now final): one
   group of all-reduces (ZeRO-0) or of reduces to each piece's owner (ZeRO-1: the ranges cut at the shards' edges),
   in place. Every rank asks for the same ranges in the same order. */
static int nc_reduce_ranges(Comm *cm, void *const *bufs, CommType t, size_t n, const size_t (*ranges)[2], int count,
                            int zero1, Err *err) {
    Nccl *x = cm->impl;
    CUstream cs = x->c->dev.comm;
    double deadline = now_seconds() + x->timeout;
    if (cuda_check(cu.cuEventRecord(x->ready, x->c->s), "gradient averaging", err) ||
        cuda_check(cu.cuStreamWaitEvent(cs, x->ready, 0), "gradient averaging", err))
        return broken(cm);
    size_t es = type_bytes(t);
    char *b = bufs[0];
    int dt = nccl_type(t);
    ncclResult_t r = nc.ncclGroupStart();
    for (int k = 0; k < count && (r == ncclSuccess || r == ncclInProgress); k++) {
        size_t lo = ranges[k][0], hi = ranges[k][1];
        if (!zero1) { r = nc.ncclAllReduce(b + lo * es, b + lo * es, hi - lo, dt, ncclAvg, x->comm, cs); continue; }
        for (int q = 0; q < cm->world && (r == ncclSuccess || r == ncclInProgress); q++) {
            size_t a, len;
            ranks_shard_within(n, cm->world, q, lo, hi, &a, &len);
            if (len) r = nc.ncclReduce(b + a * es, b + a * es, len, dt, ncclAvg, q, x->comm, cs);
        }
    }
    ncclResult_t g = nc.ncclGroupEnd();
    if (settle(cm, r != ncclSuccess && r != ncclInProgress ? r : g, "gradient averaging", deadline, err)) return -1;
    x->pending = 1;
    return 0;
}

static int nc_wait_ranges(Comm *cm, Err *err) {
    Nccl *x = cm->impl;
    if (!x->pending) return 0;
    x->pending = 0;
    return finish_on(cm, x->c->dev.comm, ncclSuccess, "gradient averaging", now_seconds() + x->timeout, err);
}

static void nc_destroy(Comm *cm) {
    if (!cm) return;
    Nccl *n = cm->impl;
    if (n) {
        if (n->comm) {
            /* finalize (flushes what is pending with the other ranks) within the timeout, then free */
            Err e;
            if (settle(cm, nc.ncclCommFinalize(n->comm), "finalize", now_seconds() + n->timeout, &e) == 0)
                nc.ncclCommDestroy(n->comm);
        }
        if (!cm->broken) {
            if (n->done) cu.cuEventDestroy(n->done);
            if (n->ready) cu.cuEventDestroy(n->ready);
            if (n->scratch) cu.cuMemFree(n->scratch);
            if (n->host) cu.cuMemFreeHost(n->host);
        }
        free(n);
    }
    free(cm);
}

Comm *comm_nccl_create(Backend *be, const void *id, int world, int rank, double timeout_s, Err *err) {
    if (nccl_load(NULL, NULL, err)) return NULL;
    if (strcmp(be->name, "cuda")) { err_set(err, "NCCL needs the CUDA backend, not %s", be->name); return NULL; }
    Comm *cm = xcalloc(1, sizeof *cm);
    Nccl *n = xcalloc(1, sizeof *n);
    *cm = (Comm){.name = "nccl", .world = world, .first_rank = rank, .local = 1, .impl = n,
                 .all_reduce_avg = nc_all_reduce, .reduce_scatter_avg = nc_reduce_scatter, .all_gather = nc_all_gather,
                 .all_reduce_sum_f64 = nc_sum_f64, .reduce_ranges_avg = nc_reduce_ranges, .wait_ranges = nc_wait_ranges, .share = nc_share,
                 .destroy = nc_destroy};
    n->c = cuda_of(be);
    n->rank = rank;
    n->timeout = timeout_s;
    if (cuda_device_use(&n->c->dev, err) ||
        cuda_check(cu.cuEventCreate(&n->done, CU_EVENT_DISABLE_TIMING), "NCCL: creating an event", err) ||
        cuda_check(cu.cuEventCreate(&n->ready, CU_EVENT_DISABLE_TIMING), "NCCL: creating an event", err) ||
        cuda_check(cu.cuMemAlloc(&n->scratch, 8), "NCCL: scratch memory", err) ||
        cuda_check(cu.cuMemAllocHost((void **)&n->host, 8), "NCCL: pinned memory", err)) {
        nc_destroy(cm);
        return NULL;
    }
    ncclUniqueId u;
    memcpy(&u, id, NCCL_ID_BYTES);
    /* size covers the four fields exactly (not the struct's tail padding): NCCL copies `size` bytes over its
       defaults, and takes the fields after blocking from those defaults for a version-2.14 config */
    NcclConfigHead cfg = {offsetof(NcclConfigHead, blocking) + sizeof(int), 0xcafebeef, NCCL_VERSION_CODE(2, 14, 0), 0};
    ncclResult_t r = nc.ncclCommInitRankConfig(&n->comm, world, u, rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        nccl_fail(r, NULL, "joining the ranks (ncclCommInitRankConfig)", err);
        nc_destroy(cm);
        return NULL;
    }
    if (!n->comm) { err_set(err, "NCCL gave no communicator"); nc_destroy(cm); return NULL; }
    if (settle(cm, r, "joining the ranks", now_seconds() + timeout_s, err)) { nc_destroy(cm); return NULL; }
    return cm;
}
