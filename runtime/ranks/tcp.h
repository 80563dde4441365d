/* tcp: the TCP sockets the ranks meet and talk through (runtime/ranks/rendezvous.c, comm_socket.c): a listener
 * that says plainly when its port is taken, a connect that retries until rank 0 listens and never blocks past its
 * deadline, and sends and receives bounded by one. Every fd is close-on-exec; nothing here prints. */
#ifndef GPT2GEN_TCP_H
#define GPT2GEN_TCP_H
#include <stddef.h>
#include "common/err.h"

/* Listens at port: on the loopback address where host is a loopback one (localhost, 127.x, ::1), else on every
   address (IPv6 and IPv4; a cluster's MASTER_ADDR may be a service address, not one of this host's). what names
   the port's origin in messages ("MASTER_ADDR and MASTER_PORT"). The fd, or -1 and err (a port in use says so). */
int tcp_listen(const char *host, int port, const char *what, Err *err);
/* Accepts one connection by the deadline (now_seconds()); -1 when none came (no err: the caller knows what was
   missing), -2 with err on a failure of the listener. */
int tcp_accept(int lfd, double deadline, Err *err);
/* Connects to host:port, trying again every 50 ms while nothing listens there (connection refused, or no route
   yet), until the deadline; a name that does not resolve is an error at once. The fd, or -1 and err naming
   host:port and the last reason. */
int tcp_connect(const char *host, int port, double deadline, const char *what, Err *err);
/* All n bytes, by the deadline: 0; -1 on a timeout (errno ETIMEDOUT), the peer's close (errno EPIPE: a recv's
   end of stream, ECONNRESET) or another error (errno says). */
int tcp_send(int fd, const void *buf, size_t n, double deadline);
int tcp_recv(int fd, void *buf, size_t n, double deadline);
/* "host:port" of the peer, for messages */
void tcp_peer(int fd, char *out, size_t cap);
#endif
