/* tcp: see tcp.h. */
#include "runtime/ranks/tcp.h"
#include "common/clock.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* waits for ev on fd until the deadline: 1 ready, 0 timed out, -1 error */
static int wait_fd(int fd, short ev, double deadline) {
    for (;;) {
        double left = deadline - now_seconds();
        if (left <= 0) return 0;
        struct pollfd p = {fd, ev, 0};
        int k = poll(&p, 1, left > 1 ? 1000 : (int)(left * 1000) + 1);
        if (k > 0) return 1;
        if (k < 0 && errno != EINTR) return -1;
    }
}

static int is_loopback(const char *host) {
    return !strcmp(host, "localhost") || !strncmp(host, "127.", 4) || !strcmp(host, "::1");
}

/* a listening socket of family fam at port, on loopback or any address; -1 with errno */
static int listen_on(int fam, int loop, int port) {
    int fd = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, zero = 0;
    if (fd < 0) return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);   /* a port in TIME_WAIT after an earlier run is free */
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    if (fam == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((unsigned short)port);
        a->sin6_addr = loop ? in6addr_loopback : in6addr_any;
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);   /* IPv4 too */
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((unsigned short)port);
        a->sin_addr.s_addr = htonl(loop ? INADDR_LOOPBACK : INADDR_ANY);
        len = sizeof *a;
    }
    if (bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 256)) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int tcp_listen(const char *host, int port, const char *what, Err *err) {
    int v4 = is_loopback(host) && strcmp(host, "::1");   /* 127.x and localhost: IPv4's loopback */
    int fd = v4 ? -1 : listen_on(AF_INET6, is_loopback(host), port);
    if (fd < 0 && (v4 || errno == EAFNOSUPPORT)) fd = listen_on(AF_INET, is_loopback(host), port);
    if (fd >= 0) return fd;
    if (errno == EADDRINUSE)
        return err_set(err, "port %d (%s) is in use on this host: another run, or another program, holds it; pick a free "
                       "port", port, what);
    return err_set(err, "cannot listen at port %d (%s): %s", port, what, strerror(errno));
}

int tcp_accept(int lfd, double deadline, Err *err) {
    for (;;) {
        int k = wait_fd(lfd, POLLIN, deadline);
        if (k == 0) return -1;
        if (k < 0) { err_set(err, "poll: %s", strerror(errno)); return -2; }
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            return fd;
        }
        if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN) { err_set(err, "accept: %s", strerror(errno)); return -2; }
    }
}

/* one connect to ai by the deadline: the fd, or -1 with errno */
static int connect_once(const struct addrinfo *ai, double deadline) {
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    int e = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        e = errno;
        if (e == EINPROGRESS) {
            int k = wait_fd(fd, POLLOUT, deadline);
            socklen_t l = sizeof e;
            if (k == 0) e = ETIMEDOUT;
            else if (k < 0) e = errno;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l)) e = errno;
        }
    }
    if (e) { close(fd); errno = e; return -1; }
    int one = 1;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

int tcp_connect(const char *host, int port, double deadline, const char *what, Err *err) {
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc) return err_set(err, "%s:%d (%s): cannot resolve the host name: %s", host, port, what, gai_strerror(rc));
    int last = 0;
    for (;;) {
        for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
            errno = 0;
            int fd = connect_once(ai, deadline);
            if (fd >= 0) { freeaddrinfo(res); return fd; }
            last = errno;
        }
        int again = last == ECONNREFUSED || last == EHOSTUNREACH || last == ENETUNREACH || last == ETIMEDOUT || last == EINTR;
        if (!again || now_seconds() + 0.05 >= deadline) break;
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    freeaddrinfo(res);
    errno = last;
    return err_set(err, "%s:%d (%s): %s", host, port, what, strerror(last));
}

int tcp_send(int fd, const void *buf, size_t n, double deadline) {
    for (const char *p = buf; n > 0;) {
        int k = wait_fd(fd, POLLOUT, deadline);
        if (k <= 0) { if (k == 0) errno = ETIMEDOUT; return -1; }
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (w <= 0) return -1;
        p += w; n -= (size_t)w;
    }
    return 0;
}

int tcp_recv(int fd, void *buf, size_t n, double deadline) {
    for (char *p = buf; n > 0;) {
        int k = wait_fd(fd, POLLIN, deadline);
        if (k <= 0) { if (k == 0) errno = ETIMEDOUT; return -1; }
        ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (r == 0) errno = EPIPE;
        if (r <= 0) return -1;
        p += r; n -= (size_t)r;
    }
    return 0;
}

void tcp_peer(int fd, char *out, size_t cap) {
    struct sockaddr_storage ss;
    socklen_t l = sizeof ss;
    char h[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (getpeername(fd, (struct sockaddr *)&ss, &l) == 0) {
        if (ss.ss_family == AF_INET6) {
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, h, sizeof h);
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        } else {
            inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, h, sizeof h);
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        }
    }
    snprintf(out, cap, "%s:%d", h, port);
}
