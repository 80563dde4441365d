/* The communicator's id over TCP, for ranks that torchrun, a PyTorchJob, srun or mpirun started on nodes that share
 * no file system (runtime/ranks/launch.h). Rank 0 listens at the rendezvous's port; every other rank connects and
 * introduces itself in one frame of JOIN_FRAME bytes (text, NUL-padded):
 *
 *     gpt2gen-join 1 / rank R / world W / job J / attempt A / host H / pid P / idlen L      (one per line)
 *
 * Rank 0 checks each against itself, as the id file's readers do: the same job, the same attempt of it (a rank of an
 * earlier attempt is a stale one), the same world size and id size, a rank that is not there yet. The first that
 * fails ends the join on every side at once: rank 0 sends "refused <why>" to every rank connected so far and fails
 * with the same words. A connection that does not introduce itself as a gpt2gen rank within HELLO_S seconds (a port
 * scanner, a health check) is ignored with a note. Once all world - 1 ranks are in, each gets "ok" and the id. */
#include "runtime/ranks/launch.h"
#include "runtime/ranks/tcp.h"
#include "common/clock.h"
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define JOIN_MAGIC "gpt2gen-join 1\n"
enum { JOIN_FRAME = 1024, HELLO_S = 5 };

typedef struct {
    int rank, world, attempt, pid;
    size_t idlen;
    char job[128], host[256];
} Hello;

static void hostname_of(char *out, size_t cap) {
    if (gethostname(out, cap) != 0) snprintf(out, cap, "unknown");
    out[cap - 1] = 0;
    for (char *p = out; *p; p++) if (*p <= ' ' || *p > '~') *p = '_';
}

static int hello_parse(const char *f, Hello *h) {
    memset(h, 0, sizeof *h);
    if (strnlen(f, JOIN_FRAME) == JOIN_FRAME) return -1;
    return sscanf(f, JOIN_MAGIC "rank %d\nworld %d\njob %127s\nattempt %d\nhost %255s\npid %d\nidlen %zu\n", &h->rank,
                  &h->world, h->job, &h->attempt, h->host, &h->pid, &h->idlen) == 7 ? 0 : -1;
}

/* the reply frame: "ok" or "refused <why>" */
static void reply_frame(char *f, const char *why) {
    memset(f, 0, JOIN_FRAME);
    snprintf(f, JOIN_FRAME, JOIN_MAGIC "%s%.900s\n", why ? "refused " : "ok", why ? why : "");
}

/* the connection's peer has closed it (a rank that joined, then stopped: a new process of that rank may take its place) */
static int peer_closed(int fd) {
    struct pollfd p = {fd, POLLIN, 0};
    char c;
    return poll(&p, 1, 0) > 0 && ((p.revents & (POLLHUP | POLLERR)) || recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0);
}

/* every rank connected so far, and fd, are told why the join ends; all are closed */
static void refuse_all(int *fds, int world, int fd, const char *why) {
    char f[JOIN_FRAME];
    reply_frame(f, why);
    double deadline = now_seconds() + 2;
    for (int r = 0; r < world; r++)
        if (fds[r] >= 0) { tcp_send(fds[r], f, sizeof f, deadline); close(fds[r]); fds[r] = -1; }
    if (fd >= 0) { tcp_send(fd, f, sizeof f, deadline); close(fd); }
}

/* why rank 0 (le, its job token) refuses h (fds: the ranks in so far), or "" */
static void hello_check(const Hello *h, const LaunchEnv *le, const char *job, size_t len, const int *fds, const Hello *in,
                        char *why, size_t cap) {
    char who[400];
    snprintf(who, sizeof who, "rank %d (pid %d on %s)", h->rank, h->pid, h->host);
    why[0] = 0;
    if (strcmp(h->job, job))
        snprintf(why, cap, "%s is of job %s, rank 0 of job %s: the ranks of one run must share the job", who, h->job, job);
    else if (h->attempt != le->attempt)
        snprintf(why, cap, "%s is of attempt %d of the job, rank 0 of attempt %d: a stale rank of another attempt", who,
                 h->attempt, le->attempt);
    else if (h->world != le->world)
        snprintf(why, cap, "rank 0 was started in a world of %d ranks, %s in one of %d: every rank must be started with "
                 "the same world size", le->world, who, h->world);
    else if (h->rank < 1 || h->rank >= le->world)
        snprintf(why, cap, "%s says it is rank %d too: every rank must have its own rank", who, h->rank);
    else if (h->idlen != len)
        snprintf(why, cap, "%s wants an id of %zu bytes, rank 0 has %zu: the same gpt2gen on every node", who, h->idlen, len);
    else if (fds[h->rank] >= 0 && !peer_closed(fds[h->rank]))
        snprintf(why, cap, "rank %d joined twice: pid %d on %s, and pid %d on %s", h->rank, in[h->rank].pid,
                 in[h->rank].host, h->pid, h->host);
}

/* one connection's hello: 0 with *h; -1 when it is not a gpt2gen rank's (noted, closed) */
static int hello_read(int fd, double deadline, Hello *h) {
    char f[JOIN_FRAME], peer[96];
    double d = now_seconds() + HELLO_S;
    if (tcp_recv(fd, f, sizeof f, d < deadline ? d : deadline) == 0 && hello_parse(f, h) == 0) return 0;
    tcp_peer(fd, peer, sizeof peer);
    fprintf(stderr, "gpt2gen: rank 0: note: ignored a connection from %s that did not introduce itself as a gpt2gen rank\n", peer);
    close(fd);
    return -1;
}

/* rank 0: every other rank in and checked, then the id to each; lfd is closed */
static int hub_join(const LaunchEnv *le, int lfd, const void *id, size_t len, double timeout_s, Err *err) {
    int world = le->world, joined = 1, rc = 0, *fds = xmalloc((size_t)world * sizeof *fds);
    Hello *in = xcalloc((size_t)world, sizeof *in);
    char job[sizeof le->job], why[1024];
    launch_job_token(le->job, job, sizeof job);
    for (int r = 0; r < world; r++) fds[r] = -1;
    double deadline = now_seconds() + timeout_s;
    while (joined < world && !rc) {
        Err e;
        Hello h;
        int fd = tcp_accept(lfd, deadline, &e);
        if (fd == -1) {
            int r = 1;
            while (fds[r] >= 0) r++;
            rc = err_set(err, "%d of the %d other ranks did not join at port %d within %g s (rank %d first): did they "
                         "start, with this host's address? GPT2GEN_JOIN_TIMEOUT sets the limit", world - joined, world - 1,
                         le->rdv_port, timeout_s, r);
            refuse_all(fds, world, -1, err->msg);
        } else if (fd < 0) rc = err_set(err, "port %d: %s", le->rdv_port, e.msg);
        if (fd < 0 || hello_read(fd, deadline, &h)) continue;
        hello_check(&h, le, job, len, fds, in, why, sizeof why);
        if (why[0]) { refuse_all(fds, world, fd, why); rc = err_set(err, "%s", why); break; }
        if (fds[h.rank] >= 0) close(fds[h.rank]);   /* a closed connection of a rank that came back */
        else joined++;
        fds[h.rank] = fd;
        in[h.rank] = h;
    }
    close(lfd);
    char f[JOIN_FRAME];
    reply_frame(f, NULL);
    for (int r = 1; r < world && !rc; r++)
        if (tcp_send(fds[r], f, sizeof f, deadline + 5) || tcp_send(fds[r], id, len, deadline + 5)) {
            rc = err_set(err, "rank %d (pid %d on %s) left before the join ended", r, in[r].pid, in[r].host);
            refuse_all(fds, world, -1, err->msg);
        }
    for (int r = 0; r < world; r++) if (fds[r] >= 0) close(fds[r]);
    free(fds); free(in);
    return rc;
}

/* a rank's side of the join: the hello, then rank 0's answer and the id */
static int rank_join(const LaunchEnv *le, void *id, size_t len, double timeout_s, Err *err) {
    double deadline = now_seconds() + timeout_s;
    char where[300], f[JOIN_FRAME], host[256], job[sizeof le->job];
    snprintf(where, sizeof where, "%s:%d", le->rdv_host, le->rdv_port);
    Err e;
    int fd = tcp_connect(le->rdv_host, le->rdv_port, deadline, le->rdv_from, &e);
    if (fd < 0 && (errno == ECONNREFUSED || errno == ETIMEDOUT || errno == EHOSTUNREACH || errno == ENETUNREACH))
        return err_set(err, "rank 0 did not answer at %s within %g s: %s: is rank 0 running, and is that its address? "
                       "(GPT2GEN_JOIN_TIMEOUT sets the limit)", where, timeout_s, e.msg);
    if (fd < 0) return err_set(err, "cannot reach rank 0: %s", e.msg);
    hostname_of(host, sizeof host);
    launch_job_token(le->job, job, sizeof job);
    memset(f, 0, sizeof f);
    snprintf(f, sizeof f, JOIN_MAGIC "rank %d\nworld %d\njob %s\nattempt %d\nhost %s\npid %d\nidlen %zu\n", le->rank,
             le->world, job, le->attempt, host, (int)getpid(), len);
    int rc = tcp_send(fd, f, sizeof f, deadline) || tcp_recv(fd, f, sizeof f, deadline) ? -1 : 0;
    int ok = !rc && !strncmp(f, JOIN_MAGIC "ok\n", strlen(JOIN_MAGIC "ok\n"));
    if (ok) rc = tcp_recv(fd, id, len, deadline);
    int e2 = errno;
    close(fd);
    if (rc && e2 == ETIMEDOUT)
        return err_set(err, "rank 0 at %s took the connection but did not answer within %g s: it is still building, or "
                       "other ranks have not joined (GPT2GEN_JOIN_TIMEOUT sets the limit)", where, timeout_s);
    if (rc) return err_set(err, "rank 0 at %s closed the connection before the join ended: it stopped (see its output)", where);
    if (ok) return 0;
    f[JOIN_FRAME - 1] = 0;
    if (strncmp(f, JOIN_MAGIC "refused ", strlen(JOIN_MAGIC "refused ")))
        return err_set(err, "%s (%s) answered, but not as gpt2gen's rank 0: is the port another program's?", where, le->rdv_from);
    char *why = f + strlen(JOIN_MAGIC "refused ");
    why[strcspn(why, "\n")] = 0;
    return err_set(err, "rank 0 at %s ended the join: %s", where, why);
}

int launch_tcp_listen(const LaunchEnv *le, Err *err) {
    return tcp_listen(le->rdv_host, le->rdv_port, le->rdv_from, err);
}

int launch_share_id_tcp(const LaunchEnv *le, int lfd, void *id, size_t len, double timeout_s, Err *err) {
    return le->rank == 0 ? hub_join(le, lfd, id, len, timeout_s, err) : rank_join(le, id, len, timeout_s, err);
}
