#include "runtime/ranks/comm_socket.h"
#include "runtime/ranks/tcp.h"
#include "common/clock.h"
#include <fcntl.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int rank;
    int *fd;              /* rank 0: fd[r] is rank r's connection (r >= 1); other ranks: fd[0], to rank 0 */
    double timeout;
    float *acc, *tmp;     /* rank 0's sums and one received buffer */
    size_t cap;
} Sock;

static int sock_broken(Comm *c) {
    Sock *s = c->impl;
    for (int r = 0; r < (s->rank == 0 ? c->world : 1); r++)
        if (s->fd[r] >= 0) { close(s->fd[r]); s->fd[r] = -1; }
    c->broken = 1;
    return -1;
}

/* Waits for fd to be ready for ev (POLLIN or POLLOUT) until the deadline. */
static int wait_fd(Comm *c, int fd, short ev, int peer, double deadline, Err *err) {
    for (;;) {
        double left = deadline - now_seconds();
        if (left <= 0) {
            err_set(err, "no answer from rank %d within %.0f s (did it stop?); GPT2GEN_NCCL_TIMEOUT sets the limit", peer,
                    ((Sock *)c->impl)->timeout);
            return sock_broken(c);
        }
        struct pollfd p = {fd, ev, 0};
        int k = poll(&p, 1, left > 1 ? 1000 : (int)(left * 1000) + 1);
        if (k > 0) return 0;
        if (k < 0 && errno != EINTR) { err_set(err, "poll: %s", strerror(errno)); return sock_broken(c); }
    }
}

static int send_all(Comm *c, int peer, const void *buf, size_t n, double deadline, Err *err) {
    Sock *s = c->impl;
    int fd = s->fd[s->rank == 0 ? peer : 0];
    for (const char *p = buf; n > 0;) {
        if (wait_fd(c, fd, POLLOUT, peer, deadline, err)) return -1;
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (k <= 0) { err_set(err, "rank %d has gone (its process ended?): %s", peer, strerror(errno)); return sock_broken(c); }
        p += k; n -= (size_t)k;
    }
    return 0;
}

static int recv_all(Comm *c, int peer, void *buf, size_t n, double deadline, Err *err) {
    Sock *s = c->impl;
    int fd = s->fd[s->rank == 0 ? peer : 0];
    for (char *p = buf; n > 0;) {
        if (wait_fd(c, fd, POLLIN, peer, deadline, err)) return -1;
        ssize_t k = recv(fd, p, n, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (k <= 0) { err_set(err, "rank %d has gone (its process ended)", peer); return sock_broken(c); }
        p += k; n -= (size_t)k;
    }
    return 0;
}

static float *scratch(Sock *s, size_t n) {
    if (n > s->cap) {
        free(s->acc); free(s->tmp);
        s->acc = xmalloc(n * sizeof(float));
        s->tmp = xmalloc(n * sizeof(float));
        s->cap = n;
    }
    return s->acc;
}

/* Rank 0: acc = (buf of rank 0 + buf of rank 1 + ... in rank order) / world, comm_emulated's sum. */
static int hub_mean(Comm *c, const float *mine, size_t n, double deadline, Err *err) {
    Sock *s = c->impl;
    float *acc = scratch(s, n);
    memcpy(acc, mine, n * sizeof(float));
    for (int r = 1; r < c->world; r++) {
        if (recv_all(c, r, s->tmp, n * sizeof(float), deadline, err)) return -1;
        for (size_t i = 0; i < n; i++) acc[i] += s->tmp[i];
    }
    for (size_t i = 0; i < n; i++) acc[i] /= (float)c->world;
    return 0;
}

static int check_type(CommType t, Err *err) {
    return t == COMM_F32 ? 0 : err_set(err, "ranks: the socket collectives take fp32 buffers only");
}

/* Elements [lo, hi) of the n become the mean over ranks: on every rank (whole) or on each element's owner
   (reduce-scatter's shards). The hub gathers them, adds them up and sends each rank its part. */
static int reduce_range(Comm *c, float *b, size_t n, size_t lo, size_t hi, int whole, double deadline, Err *err) {
    Sock *s = c->impl;
    if (s->rank != 0) {
        size_t off = lo, cnt = hi - lo;
        if (!whole) ranks_shard_within(n, c->world, s->rank, lo, hi, &off, &cnt);
        return send_all(c, 0, b + lo, (hi - lo) * sizeof(float), deadline, err) ||
               recv_all(c, 0, b + off, cnt * sizeof(float), deadline, err) ? -1 : 0;
    }
    if (hub_mean(c, b + lo, hi - lo, deadline, err)) return -1;
    for (int r = 0; r < c->world; r++) {
        size_t off = lo, cnt = hi - lo;
        if (!whole) ranks_shard_within(n, c->world, r, lo, hi, &off, &cnt);
        if (r == 0) memcpy(b + off, s->acc + (off - lo), cnt * sizeof(float));
        else if (send_all(c, r, s->acc + (off - lo), cnt * sizeof(float), deadline, err)) return -1;
    }
    return 0;
}

static int sock_all_reduce(Comm *c, void *const *bufs, CommType t, size_t n, Err *err) {
    return check_type(t, err) || reduce_range(c, bufs[0], n, 0, n, 1, now_seconds() + ((Sock *)c->impl)->timeout, err) ? -1 : 0;
}
static int sock_reduce_scatter(Comm *c, void *const *bufs, CommType t, size_t n, Err *err) {
    return check_type(t, err) || reduce_range(c, bufs[0], n, 0, n, 0, now_seconds() + ((Sock *)c->impl)->timeout, err) ? -1 : 0;
}
/* done as asked: nothing is left for wait_ranges */
static int sock_reduce_ranges(Comm *c, void *const *bufs, CommType t, size_t n, const size_t (*ranges)[2], int count,
                              int zero1, Err *err) {
    double deadline = now_seconds() + ((Sock *)c->impl)->timeout;
    if (check_type(t, err)) return -1;
    for (int k = 0; k < count; k++)
        if (reduce_range(c, bufs[0], n, ranges[k][0], ranges[k][1], !zero1, deadline, err)) return -1;
    return 0;
}
static int sock_wait_ranges(Comm *c, Err *err) { (void)c; (void)err; return 0; }

static int sock_all_gather(Comm *c, void *const *bufs, CommType t, size_t n, Err *err) {
    Sock *s = c->impl;
    float *b = bufs[0];
    double deadline = now_seconds() + s->timeout;
    size_t off, cnt;
    if (check_type(t, err)) return -1;
    if (s->rank != 0) {
        ranks_shard(n, c->world, s->rank, &off, &cnt);
        return send_all(c, 0, b + off, cnt * sizeof(float), deadline, err) ||
               recv_all(c, 0, b, n * sizeof(float), deadline, err) ? -1 : 0;
    }
    for (int r = 1; r < c->world; r++) {
        ranks_shard(n, c->world, r, &off, &cnt);
        if (recv_all(c, r, b + off, cnt * sizeof(float), deadline, err)) return -1;
    }
    for (int r = 1; r < c->world; r++)
        if (send_all(c, r, b, n * sizeof(float), deadline, err)) return -1;
    return 0;
}

static int sock_sum_f64(Comm *c, double *const *vals, Err *err) {
    Sock *s = c->impl;
    double deadline = now_seconds() + s->timeout;
    if (s->rank != 0)
        return send_all(c, 0, vals[0], sizeof(double), deadline, err) || recv_all(c, 0, vals[0], sizeof(double), deadline, err) ? -1 : 0;
    double sum = 0, v;
    sum += *vals[0];
    for (int r = 1; r < c->world; r++) {
        if (recv_all(c, r, &v, sizeof v, deadline, err)) return -1;
        sum += v;
    }
    for (int r = 1; r < c->world; r++)
        if (send_all(c, r, &sum, sizeof sum, deadline, err)) return -1;
    *vals[0] = sum;
    return 0;
}

/* rank 0 hears every other rank's part, then sends each rank every part but its own, in rank order */
static int sock_share(Comm *c, void *const *bufs, size_t n, const size_t (*parts)[2], Err *err) {
    Sock *s = c->impl;
    char *b = bufs[0];
    double deadline = now_seconds() + s->timeout;
    (void)n;
    if (s->rank != 0) {
        if (send_all(c, 0, b + parts[s->rank][0] * 4, parts[s->rank][1] * 4, deadline, err)) return -1;
        for (int q = 0; q < c->world; q++)
            if (q != s->rank && recv_all(c, 0, b + parts[q][0] * 4, parts[q][1] * 4, deadline, err)) return -1;
        return 0;
    }
    for (int q = 1; q < c->world; q++)
        if (recv_all(c, q, b + parts[q][0] * 4, parts[q][1] * 4, deadline, err)) return -1;
    for (int r = 1; r < c->world; r++)
        for (int q = 0; q < c->world; q++)
            if (q != r && send_all(c, r, b + parts[q][0] * 4, parts[q][1] * 4, deadline, err)) return -1;
    return 0;
}

static void sock_destroy(Comm *c) {
    if (!c) return;
    Sock *s = c->impl;
    if (s) {
        for (int r = 0; s->fd && r < (s->rank == 0 ? c->world : 1); r++)
            if (s->fd[r] >= 0) close(s->fd[r]);
        free(s->fd); free(s->acc); free(s->tmp);
        free(s);
    }
    free(c);
}

int comm_socket_id(void *id, size_t len, const char *dir, Err *err) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int n = snprintf(id, len, "%s/gpt2gen-ranks-%ld-%ld.sock", dir, (long)getpid(), (long)ts.tv_nsec);
    if (n < 0 || (size_t)n >= len || (size_t)n >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return err_set(err, "TMPDIR=%s: too long a path for a socket", dir);
    return 0;
}

/* ---- over TCP: the id is "tcp:PORT:TOKEN:HOST"; a connection introduces itself with the token and its rank */

enum { TOKEN_HEX = 32 };
typedef struct { char token[TOKEN_HEX + 1]; int rank; } TcpHello;

int comm_socket_tcp_id(void *id, size_t len, const char *host, int port, Err *err) {
    unsigned char r[TOKEN_HEX / 2];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, r, sizeof r) != (ssize_t)sizeof r) {   /* unlikely: the clock and pid, still per run */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned long long x = (unsigned long long)ts.tv_nsec * 6364136223846793005ull ^ (unsigned long long)getpid() ^ (unsigned long long)ts.tv_sec;
        for (size_t i = 0; i < sizeof r; i++) { r[i] = (unsigned char)(x >> (8 * (i % 8))); x = x * 2862933555777941757ull + 3037000493ull; }
    }
    if (fd >= 0) close(fd);
    char token[TOKEN_HEX + 1];
    for (size_t i = 0; i < sizeof r; i++) snprintf(token + 2 * i, 3, "%02x", r[i]);
    int n = snprintf(id, len, "tcp:%d:%s:%s", port, token, host);
    if (n < 0 || (size_t)n >= len) return err_set(err, "%s: too long a host name for the CPU ranks' id (at most %zu bytes)", host, len - 60);
    return 0;
}

/* a rank connects and says who it is; rank 0 takes the ranks that know the token (others are not this run's) */
static int join_tcp(Comm *c, const char *id, Err *err) {
    Sock *s = c->impl;
    double deadline = now_seconds() + s->timeout;
    int port = 0, at = 0;
    TcpHello me = {{0}, s->rank};
    if (sscanf(id, "tcp:%d:%32[0-9a-f]:%n", &port, me.token, &at) != 2 || !at) return err_set(err, "ranks: a malformed TCP id");
    const char *host = id + at;
    if (s->rank != 0) {
        Err e;
        int fd = tcp_connect(host, port, deadline, "the CPU ranks' port", &e);
        if (fd < 0) return err_set(err, "cannot reach rank 0 within %.0f s: %s", s->timeout, e.msg);
        s->fd[0] = fd;
        return send_all(c, 0, &me, sizeof me, deadline, err);
    }
    int lfd = tcp_listen(host, port, "the CPU ranks' port, the rendezvous's", err), rc = 0;
    if (lfd < 0) return -1;
    for (int joined = 1; joined < c->world && !rc;) {
        Err e;
        int fd = tcp_accept(lfd, deadline, &e);
        if (fd == -1) rc = err_set(err, "port %d: %d of %d ranks joined within %.0f s", port, joined, c->world, s->timeout);
        else if (fd < 0) rc = err_set(err, "port %d: %s", port, e.msg);
        if (fd < 0) break;
        TcpHello h;
        double d = now_seconds() + 5;
        if (tcp_recv(fd, &h, sizeof h, d < deadline ? d : deadline) || memcmp(h.token, me.token, sizeof h.token) ||
            h.rank < 1 || h.rank >= c->world || s->fd[h.rank] >= 0) {
            close(fd);   /* not one of this run's ranks: the join goes on */
            continue;
        }
        s->fd[h.rank] = fd;
        joined++;
    }
    close(lfd);
    return rc;
}

static int join(Comm *c, const char *path, Err *err) {
    if (!strncmp(path, "tcp:", 4)) return join_tcp(c, path, err);
    Sock *s = c->impl;
    double deadline = now_seconds() + s->timeout;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path) return err_set(err, "%s: too long a path for a socket", path);
    strcpy(a.sun_path, path);
    if (s->rank != 0) {
        for (;;) {   /* rank 0 may not listen yet */
            int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd < 0) return err_set(err, "socket: %s", strerror(errno));
            if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) { s->fd[0] = fd; break; }
            int e = errno;
            close(fd);
            if ((e != ENOENT && e != ECONNREFUSED) || now_seconds() > deadline)
                return err_set(err, "%s: cannot reach rank 0 within %.0f s: %s", path, s->timeout, strerror(e));
            nanosleep(&(struct timespec){0, 10000000}, NULL);
        }
        return send_all(c, 0, &s->rank, sizeof s->rank, deadline, err);
    }
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) return err_set(err, "socket: %s", strerror(errno));
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, c->world)) {
        close(lfd);
        return err_set(err, "%s: cannot listen: %s", path, strerror(errno));
    }
    int rc = 0;
    for (int joined = 1; joined < c->world && !rc;) {
        struct pollfd p = {lfd, POLLIN, 0};
        double left = deadline - now_seconds();
        if (left <= 0) { rc = err_set(err, "%s: %d of %d ranks joined within %.0f s", path, joined, c->world, s->timeout); break; }
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) continue;
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) continue;
        int r = -1;   /* the rank it says it is */
        struct pollfd q = {fd, POLLIN, 0};
        if (poll(&q, 1, 5000) <= 0 || recv(fd, &r, sizeof r, MSG_WAITALL) != (ssize_t)sizeof r || r < 1 || r >= c->world ||
            s->fd[r] >= 0) {
            close(fd);
            rc = err_set(err, "%s: a process that is not one of the %d ranks connected (rank %d)", path, c->world, r);
            break;
        }
        s->fd[r] = fd;
        joined++;
    }
    close(lfd);
    unlink(path);
    return rc;
}

Comm *comm_socket_create(const void *id, int world, int rank, double timeout_s, Err *err) {
    if (world < 2 || rank < 0 || rank >= world) { err_set(err, "ranks: rank %d of %d", rank, world); return NULL; }
    Comm *c = xcalloc(1, sizeof *c);
    Sock *s = xcalloc(1, sizeof *s);
    *c = (Comm){.name = "socket", .world = world, .first_rank = rank, .local = 1, .impl = s,
                .all_reduce_avg = sock_all_reduce, .reduce_scatter_avg = sock_reduce_scatter,
                .all_gather = sock_all_gather, .all_reduce_sum_f64 = sock_sum_f64, .reduce_ranges_avg = sock_reduce_ranges,
                .wait_ranges = sock_wait_ranges, .share = sock_share, .destroy = sock_destroy};
    s->rank = rank;
    s->timeout = timeout_s;
    s->fd = xmalloc((size_t)world * sizeof(int));
    for (int r = 0; r < world; r++) s->fd[r] = -1;
    if (join(c, id, err)) { sock_destroy(c); return NULL; }
    return c;
}
