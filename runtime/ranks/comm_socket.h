/* comm_socket: the collectives of runtime/ranks/ranks.h between processes of one machine, over Unix sockets, for the CPU
 * backend: the multi-process training loop (runtime/ranks/launch.h's launcher, a process per rank, checkpoints written by
 * every rank, a rank that dies) runs and is tested where there is no GPU and no NCCL. A test hook, not a way to
 * train: GPT2GEN_CPU_PROCESSES=1 with --backend cpu starts a process per rank instead of emulating the ranks in one.
 *
 * Rank 0 is the hub: every other rank connects to its socket (the id is the socket's path, or over TCP, for ranks
 * on several hosts that a launcher started, rank 0's address: comm_socket_tcp_id). Each collective sends
 * the other ranks' buffers to rank 0, which adds them in rank order in fp32 and divides by the world size, exactly
 * as comm_emulated does, and sends each rank its part: a run over processes gives the bits of the same run emulated
 * in one process. Buffers are fp32. Every wait has a deadline; a rank whose process ended is an error at once (its
 * socket closes), and the Comm is then broken. */
#ifndef GPT2GEN_COMM_SOCKET_H
#define GPT2GEN_COMM_SOCKET_H
#include <stddef.h>
#include "runtime/ranks/ranks.h"

/* A fresh id (a socket path under dir, TMPDIR: common/env.h's tmpdir, NUL-terminated) in id[0..len), len >= 108. */
int   comm_socket_id(void *id, size_t len, const char *dir, Err *err);
/* The id of ranks on several hosts: rank 0 listens at host:port (the TCP rendezvous's, free again once the ranks have
   joined there), the others connect; a random token in the id tells this run's ranks from anything else that
   connects. len >= 64 + strlen(host). */
int   comm_socket_tcp_id(void *id, size_t len, const char *host, int port, Err *err);
/* Joins the world as rank: rank 0 listens at the id's path and waits for the others, which connect (the path may
   not be there yet: they retry); returns once all are in, within timeout_s. */
Comm *comm_socket_create(const void *id, int world, int rank, double timeout_s, Err *err);
#endif
