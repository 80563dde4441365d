/* tests/fake/nccl.c: a stand-in for libnccl.so.2 for the GPU tests on a machine with one GPU (tests/gpu/ranks.sh). Real
   NCCL refuses two ranks on one GPU, so with this library (GPT2GEN_NCCL_LIBRARY=build/tests/libfakenccl.so, built from this file) ranks
   started by hand on the same GPU exercise everything of ours on the GPU side of several ranks: the padded
   shards and ZeRO-1's optimizer slices on the CUDA backend, the in-place reduce-scatter/all-gather offsets, the
   per-layer averaging ranges and the events around them, the checkpoint shards, and a rank that dies.

   It implements the NCCL calls runtime/cuda/nccl.c uses, synchronously and simply: a call waits for its stream,
   copies its buffer to the host, and exchanges it with the other ranks through rank 0 over a Unix socket (the
   unique id is the socket's path); rank 0 adds the contributions in rank order in fp32 (fp64 for doubles) and
   sends back the result; the call returns once the result is in device memory. Groups run their calls in order,
   as they are made (every rank makes the same calls in the same order). Types: fp32, fp64, bf16 (not fp16).
   A rank whose peer is gone gets ncclSystemError, from the call and from ncclCommGetAsyncError.
   What this does not test is NCCL itself: its non-blocking initialization, its own transport and its timeouts. */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* NCCL's C API, as nccl.h declares it (the subset runtime/cuda/nccl.c loads) */
typedef enum { ncclSuccess = 0, ncclSystemError = 2, ncclInvalidArgument = 4 } ncclResult_t;
enum { ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9 };
enum { ncclSum = 0, ncclAvg = 4 };
#define ID_BYTES 128
typedef struct { char internal[ID_BYTES]; } ncclUniqueId;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;

#define MAX_RANKS 16
typedef struct ncclComm {
    int world, rank;
    int fd[MAX_RANKS];       /* rank 0: a socket to each other rank; the others: fd[0], to rank 0 */
    int error;               /* a peer is gone */
    char path[100];          /* the socket's (sun_path holds 108) */
    char last[256];
} *ncclComm_t;

/* the three driver calls it needs, from the libcuda the process already has */
static int (*stream_sync)(CUstream);
static int (*dtoh)(void *, CUdeviceptr, size_t);
static int (*htod)(CUdeviceptr, const void *, size_t);
static int cuda_loaded(void) {
    if (stream_sync) return 1;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return 0;
    *(void **)&dtoh = dlsym(h, "cuMemcpyDtoH_v2");
    *(void **)&htod = dlsym(h, "cuMemcpyHtoD_v2");
    *(void **)&stream_sync = dlsym(h, "cuStreamSynchronize");
    return stream_sync && dtoh && htod;
}

ncclResult_t ncclGetVersion(int *v) { *v = 22000; return ncclSuccess; }
const char *ncclGetErrorString(ncclResult_t r) {
    return r == ncclSuccess ? "no error" : r == ncclSystemError ? "system error (fake NCCL)" : "invalid argument (fake NCCL)";
}
const char *ncclGetLastError(ncclComm_t c) { return c ? c->last : ""; }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 0, sizeof *id);
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    snprintf(id->internal, 100, "/tmp/fakenccl-%d-%ld%09ld", (int)getpid(), (long)t.tv_sec, t.tv_nsec);
    return ncclSuccess;
}

static int full_io(int fd, void *p, size_t n, int writing) {
    char *c = p;
    while (n) {
        ssize_t k = writing ? send(fd, c, n, MSG_NOSIGNAL) : read(fd, c, n);   /* a gone peer: an error, no SIGPIPE */
        if (k < 0 && errno == EINTR) continue;
        if (k == 0) errno = 0;
        if (k <= 0) return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

static ncclResult_t fail(ncclComm_t c, const char *what) {
    c->error = 1;
    snprintf(c->last, sizeof c->last, "fake NCCL rank %d: %s: %s", c->rank, what, errno ? strerror(errno) : "a peer is gone");
    return ncclSystemError;
}

typedef struct { size_t size; unsigned magic, version; int blocking; } ConfigHead;
ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int world, ncclUniqueId id, int rank, ConfigHead *cfg) {
    (void)cfg;
    if (world < 1 || world > MAX_RANKS || rank < 0 || rank >= world || !cuda_loaded()) return ncclInvalidArgument;
    ncclComm_t c = calloc(1, sizeof *c);
    if (!c) return ncclSystemError;
    c->world = world;
    c->rank = rank;
    memcpy(c->path, id.internal, sizeof c->path - 1);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", c->path);
    *out = c;
    if (rank == 0) {
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        unlink(a.sun_path);
        if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, MAX_RANKS)) return fail(c, "listen");
        for (int k = 1; k < world; k++) {
            int f = accept(s, NULL, NULL), r = -1;
            if (f < 0 || full_io(f, &r, sizeof r, 0) || r < 1 || r >= world) { close(s); return fail(c, "accept"); }
            c->fd[r] = f;
        }
        close(s);
        unlink(a.sun_path);
        return ncclSuccess;
    }
    for (int tries = 0;; tries++) {   /* rank 0 may not listen yet: for up to a minute */
        int f = socket(AF_UNIX, SOCK_STREAM, 0);
        if (f >= 0 && connect(f, (struct sockaddr *)&a, sizeof a) == 0) {
            c->fd[0] = f;
            return full_io(f, &rank, sizeof rank, 1) ? fail(c, "connect") : ncclSuccess;
        }
        if (f >= 0) close(f);
        if (tries == 6000) return fail(c, "connect");
        usleep(10000);
    }
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *r) { *r = c->error ? ncclSystemError : ncclSuccess; return ncclSuccess; }
static void comm_close(ncclComm_t c) {
    for (int k = 0; k < MAX_RANKS; k++)
        if (c->fd[k] > 0) close(c->fd[k]);
    free(c);
}
ncclResult_t ncclCommFinalize(ncclComm_t c) { (void)c; return ncclSuccess; }
ncclResult_t ncclCommDestroy(ncclComm_t c) { comm_close(c); return ncclSuccess; }
ncclResult_t ncclCommAbort(ncclComm_t c) { comm_close(c); return ncclSuccess; }
ncclResult_t ncclGroupStart(void) { return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) { return ncclSuccess; }

static size_t type_size(int t) { return t == ncclFloat64 ? 8 : t == ncclFloat32 ? 4 : 2; }
static double get(const void *p, size_t i, int t) {
    if (t == ncclFloat64) return ((const double *)p)[i];
    if (t == ncclFloat32) return ((const float *)p)[i];
    uint32_t b = (uint32_t)((const uint16_t *)p)[i] << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}
static void put(void *p, size_t i, int t, double v) {
    if (t == ncclFloat64) { ((double *)p)[i] = v; return; }
    float f = (float)v;
    if (t == ncclFloat32) { ((float *)p)[i] = f; return; }
    uint32_t b;
    memcpy(&b, &f, 4);
    b += 0x7fff + ((b >> 16) & 1);   /* round to nearest even (no NaNs here) */
    ((uint16_t *)p)[i] = (uint16_t)(b >> 16);
}

/* The collective core: every rank's n elements of `mine` go to rank 0, which adds them in rank order (op: sum or
   avg) or, for a gather, concatenates them; the result (n elements, or world*n for a gather) comes back to each
   rank whose `want` is set. The host buffers: mine (n), res (n, or world*n). */
static ncclResult_t exchange(ncclComm_t c, const void *mine, void *res, size_t n, int t, int op, int gather, int want) {
    if (c->error) return ncclSystemError;
    size_t es = type_size(t), out_n = gather ? n * (size_t)c->world : n;
    if (c->rank) {
        if (full_io(c->fd[0], (void *)mine, n * es, 1) || full_io(c->fd[0], &want, sizeof want, 1)) return fail(c, "send");
        if (want && full_io(c->fd[0], res, out_n * es, 0)) return fail(c, "receive");
        return ncclSuccess;
    }
    char *all = malloc((size_t)c->world * n * es + 1);
    int wants[MAX_RANKS] = {want};
    if (!all) return ncclSystemError;
    memcpy(all, mine, n * es);
    for (int r = 1; r < c->world; r++)
        if (full_io(c->fd[r], all + (size_t)r * n * es, n * es, 0) || full_io(c->fd[r], &wants[r], sizeof wants[r], 0)) {
            free(all);
            return fail(c, "receive");
        }
    if (gather) memcpy(res, all, out_n * es);
    else
        for (size_t i = 0; i < n; i++) {
            double s = 0;
            for (int r = 0; r < c->world; r++) {
                double x = get(all + (size_t)r * n * es, i, t);
                s = t == ncclFloat64 ? s + x : (double)((float)s + (float)x);   /* fp32 adds, as on the GPU */
            }
            put(res, i, t, op == ncclAvg ? s / c->world : s);
        }
    free(all);
    for (int r = 1; r < c->world; r++)
        if (wants[r] && full_io(c->fd[r], res, out_n * es, 1)) return fail(c, "send");
    return ncclSuccess;
}

/* One collective on device buffers: send's n_send elements in; where `want`, n_recv elements of the result, from
   element `from` on, out to recv (which may lie inside send: the result goes through the host). */
static ncclResult_t collective(ncclComm_t c, CUstream s, const void *send, size_t n_send, void *recv, size_t n_recv,
                               size_t from, int t, int op, int gather, int want) {
    if (t == ncclFloat16 || (op != ncclSum && op != ncclAvg)) return ncclInvalidArgument;
    size_t es = type_size(t), n_res = gather ? n_send * (size_t)c->world : n_send;
    void *mine = malloc(n_send * es + 1), *res = malloc(n_res * es + 1);
    ncclResult_t r = ncclSystemError;
    if (mine && res && stream_sync(s) == 0 && dtoh(mine, (CUdeviceptr)(uintptr_t)send, n_send * es) == 0) {
        r = exchange(c, mine, res, n_send, t, op, gather, want);
        if (r == ncclSuccess && want && n_recv && htod((CUdeviceptr)(uintptr_t)recv, (char *)res + from * es, n_recv * es))
            r = ncclSystemError;
    }
    free(mine);
    free(res);
    return r;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t n, int t, int op, ncclComm_t c, CUstream s) {
    return collective(c, s, send, n, recv, n, 0, t, op, 0, 1);
}
ncclResult_t ncclReduce(const void *send, void *recv, size_t n, int t, int op, int root, ncclComm_t c, CUstream s) {
    return collective(c, s, send, n, recv, n, 0, t, op, 0, c->rank == root);
}
ncclResult_t ncclAllGather(const void *send, void *recv, size_t n, int t, ncclComm_t c, CUstream s) {
    return collective(c, s, send, n, recv, n * (size_t)c->world, 0, t, ncclSum, 1, 1);
}
/* every rank's n elements go to rank 0 as a gather's do; each rank keeps root's */
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t n, int t, int root, ncclComm_t c, CUstream s) {
    if (root < 0 || root >= c->world) return ncclInvalidArgument;
    return collective(c, s, c->rank == root ? send : recv, n, recv, n, (size_t)root * n, t, ncclSum, 1, 1);
}
/* send: world*n elements; each rank keeps its n of the whole sum */
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t n, int t, int op, ncclComm_t c, CUstream s) {
    return collective(c, s, send, n * (size_t)c->world, recv, n, (size_t)c->rank * n, t, op, 0, 1);
}
