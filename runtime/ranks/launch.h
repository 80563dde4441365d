/* launch: the processes of a data-parallel run, one per GPU (runtime/ranks/ranks.h has what the ranks compute).
 *
 * Every rank's process has to learn its rank, the world size and its GPU, and all of them need the same
 * opaque id (NCCL's unique id, 128 bytes) that one process makes and the others receive. Two ways:
 *
 * - `gpt2gen --gpus N` on one node: launch_local forks N children, before anything has touched CUDA (a
 *   process that has started the CUDA driver, or any thread, must not fork). Child i is rank i; the parent
 *   trains nothing. Only after the last fork does the parent make the id (ncclGetUniqueId starts a thread,
 *   and a process with threads must not fork again); it writes the id down a pipe to each child, then
 *   watches them. A run ends well when every child exits 0 (130 where Ctrl-C or SIGTERM stopped them after
 *   saving: runtime/train/stop.h).
 *   The first child to exit otherwise, or to be killed, fails the run: the parent names it in one line,
 *   sends the others SIGTERM, SIGKILLs what is left after a grace time, and exits 1. Ctrl-C reaches the
 *   whole process group, so the parent ignores it and waits for the children to save; a SIGTERM to the
 *   parent is passed on to them (they save and stop, as on Ctrl-C). A child gets SIGTERM if the parent dies.
 * - mpirun or srun on one or more nodes: the launcher started every process; env_read reads the rank from
 *   its variables (common/env.h), and the id goes through a file on a file system every node shares: rank 0 writes it,
 *   the others wait for it (launch_share_id_file), and check that it is rank 0's of the same job and world.
 *
 * - torchrun, a Kubernetes PyTorchJob, or any launcher with a TCP rendezvous (MASTER_ADDR and MASTER_PORT,
 *   GPT2GEN_RENDEZVOUS): the id goes over TCP from rank 0 (launch_share_id_tcp), no shared file system needed.
 *
 * These functions print nothing except launch_local and rank 0's notes of the TCP join, whose lines start with
 * "gpt2gen: ". */
#ifndef GPT2GEN_LAUNCH_H
#define GPT2GEN_LAUNCH_H
#include <stddef.h>
#include "common/env.h"   /* LaunchEnv: the rank, world and job from the launcher's variables (env_read) */

/* Makes the id: fills id[0..len). Called once, in the parent, after every child is forked. */
typedef int (*LaunchMakeId)(void *id, size_t len, void *ctx, Err *err);
enum { LAUNCH_CHILD = -100 };

/* Forks n (1..256) children. Call it from the main thread, before any CUDA call, OpenMP region or thread.
 * In child i it returns LAUNCH_CHILD with *rank = i, GPT2GEN_RANK=i, GPT2GEN_WORLD=n and GPT2GEN_LOCAL_RANK=i
 * in its environment (for the processes they start; the child itself is told by *rank) and id[0..len) filled from the parent; a child whose parent
 * fails before sending the id prints one line and _exits 1.
 * In the parent it returns the run's exit code once every child is reaped: 0 when all exited 0; 130 when all
 * exited 130 or 0; otherwise 1 (EXIT_FAIL): the first child to exit with another code or to be killed by a
 * signal is named in one line on stderr, the others get SIGTERM and, grace_s seconds later, SIGKILL. A
 * failing make_id is printed, its children killed, and 1 returned. While it supervises, the parent ignores
 * SIGINT and passes SIGTERM on to the children (signal dispositions and the signal mask are put back before
 * it returns). stdout and stderr are flushed before the fork.
 * -1 with err when nothing runs: n out of range, or no pipe or fork (children already forked are killed). */
int launch_local(int n, double grace_s, size_t len, LaunchMakeId make_id, void *ctx, int *rank, void *id, Err *err);

/* The id through a file (runtime/ranks/id_file.c), at most LAUNCH_ID_FILE_MAX bytes of text: rank 0 writes
 * id[0..len) to path atomically with its world size, the job (le->job), its host and pid; every other rank looks
 * for it every 20 ms, up to timeout_s, and takes it once it is there, answering rank 0 in "<path>.rank<r>" (see
 * launch_id_file_answers). A rank whose world or job is not rank 0's stops at once with an error naming both, and
 * a rank of rank 0's job tells it so. A file that is not an id file is an error that names it and its size
 * (none of its bytes). A stale file (its rank 0 gone from this host, or of another job and older than this rank)
 * is waited past, for rank 0 to replace it. A timeout is an error that names the path (which has to be on a file
 * system every node shares). Rank 0 refuses to write over anything but its own id file or a stale one. */
enum { LAUNCH_ID_FILE_MAX = 4096 };
int  launch_share_id_file(const char *path, const LaunchEnv *le, void *id, size_t len, double timeout_s, Err *err);
/* Rank 0, once it shared the id file: every other rank's answer, up to timeout_s. A rank that refused the file
 * (another world size) ends the join at once: -1 and err naming the rank and its reason; ranks that did not answer
 * in time: -1 and err naming the first. The answers are removed either way. */
int  launch_id_file_answers(const char *path, int world, double timeout_s, Err *err);
/* Rank 0, before it builds: a stale id file at path is removed (note says so; cap 0: no note), nothing there or
 * its own is fine, anything else is an error (a file not an id file: refused, never replaced; an id file whose
 * rank 0 still runs on this host). */
int  launch_id_file_claim(const char *path, char *note, size_t cap, Err *err);
/* Removes path if it is this process's own id file (rank 0's, once every rank has joined, and on every exit). */
void launch_id_file_remove(const char *path);
/* The id file's path: id_file (GPT2GEN_NCCL_ID_FILE) if not NULL, else "<dir>/.nccl-id-<job>" (characters of the job id
 * other than letters, digits, '.', '-' and '_' become '_'). No job id and no GPT2GEN_NCCL_ID_FILE: -1 and
 * err asks for GPT2GEN_NCCL_ID_FILE. */
int  launch_id_file_path(const LaunchEnv *le, const char *id_file, const char *dir, char *out, size_t cap, Err *err);
/* The job id as it goes into a file name or a join message: letters, digits, '.', '-' and '_' kept, others '_'; "-"
   for none. */
void launch_job_token(const char *job, char *out, size_t cap);

/* The id over TCP (runtime/ranks/rendezvous.c), where le has a rendezvous (le->rdv_port > 0): rank 0 listens first
 * (launch_tcp_listen: the fd, or -1 and err, a port in use named as such), before it builds, so that a taken port
 * is said at once; then launch_share_id_tcp: rank 0 waits for every other rank, up to timeout_s from then, checks
 * each (job, attempt, world size, id size, a rank there twice) and sends each the id, closing lfd; every other rank
 * connects (retrying while nothing listens, up to timeout_s), introduces itself and receives the id. A failed check
 * ends the join on rank 0 and on every rank connected so far, each with the same reason. Rank 0 prints a note for a
 * connection that is not a gpt2gen rank's, and goes on waiting. lfd is ignored on the other ranks. */
int  launch_tcp_listen(const LaunchEnv *le, Err *err);
int  launch_share_id_tcp(const LaunchEnv *le, int lfd, void *id, size_t len, double timeout_s, Err *err);
#endif
