/* The communicator's id through a shared file (runtime/ranks/launch.h, runtime/ranks/id_file.c): a reader that
   starts first waits for rank 0's file; ranks of another world or job stop at once, naming both; a file that is
   not an id file is refused by rank 0 (never replaced) and by the others, without its bytes in the message; a
   stale file (its rank 0 gone) is waited past and replaced; only rank 0's own file is removed. */
#include "runtime/ranks/launch.h"
#include "common/clock.h"
#include "common/files.h"
#include "tests/check.h"
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/launch_env.h"

enum { ID_LEN = 128 };

static int files_in(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d)); ) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static LaunchEnv who(int rank, int world, const char *job) {
    LaunchEnv le = {.rank = rank, .world = world, .local_rank = rank, .how = "srun"};
    snprintf(le.job, sizeof le.job, "%s", job);
    return le;
}

static char dir[64], path[600];

/* Forks a reader: rank 1 of world, which exits 0 when it gets want from the file at path (1: an error, 2: other bytes). */
static pid_t start_reader(int world, const unsigned char *want) {
    fflush(NULL);
    pid_t reader = fork();
    if (reader == 0) {
        Err err;
        unsigned char mine[ID_LEN];
        LaunchEnv le = who(1, world, "7.0");
        if (launch_share_id_file(path, &le, mine, ID_LEN, 3.0, &err)) _exit(1);
        _exit(memcmp(mine, want, ID_LEN) ? 2 : 0);
    }
    return reader;
}
static void scratch(void) {
    snprintf(dir, sizeof dir, "/tmp/gpt2gen-idfile-XXXXXX");
    if (!mkdtemp(dir)) dir[0] = 0;
    snprintf(path, sizeof path, "%s/.nccl-id-7.0", dir);
}
static void scratch_end(void) { unlink(path); rmdir(dir); }

/* A reader that starts first waits for rank 0's file and takes the same bytes; so does one that comes after;
   rank 0 removes its own file. */
static void test_share_id_file(void) {
    scratch();
    unsigned char id[ID_LEN], got[ID_LEN];
    for (int i = 0; i < ID_LEN; i++) id[i] = (unsigned char)(i * 13 + 1);
    pid_t reader = start_reader(3, id);
    usleep(100 * 1000);
    Err err;
    LaunchEnv r0 = who(0, 3, "7.0"), r2 = who(2, 3, "7.0");
    CHECK_OK(launch_share_id_file(path, &r0, id, ID_LEN, 3.0, &err), &err);
    int st = 0;
    waitpid(reader, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the waiting reader: status %#x", st);
    memset(got, 0, sizeof got);
    CHECK_OK(launch_share_id_file(path, &r2, got, ID_LEN, 0.5, &err), &err);
    CHECK(!memcmp(got, id, ID_LEN), "the later reader got other bytes");
    /* both answered "ok": rank 0 hears it, and the answers go */
    CHECK_OK(launch_id_file_answers(path, 3, 1.0, &err), &err);
    CHECK(files_in(dir) == 1, "%d files in %s (a temporary or an answer left?)", files_in(dir), dir);
    launch_id_file_remove(path);
    CHECK(!file_exists(path), "not removed");
    scratch_end();
}

/* Ranks of another world size, or of another job, stop at once with one message naming both values; rank 0 hears
   of a refusal from its own job's rank and stops at once too. */
static void test_disagreeing_ranks_stop(void) {
    scratch();
    unsigned char id[ID_LEN] = {1};
    Err err;
    LaunchEnv r0 = who(0, 2, "7.0"), r1 = who(1, 3, "7.0"), other = who(1, 2, "8.0");
    CHECK_OK(launch_share_id_file(path, &r0, id, ID_LEN, 3.0, &err), &err);
    double t0 = now_seconds();
    int rc = launch_share_id_file(path, &r1, id, ID_LEN, 5.0, &err);
    CHECK(rc == -1 && now_seconds() - t0 < 1, "another world: rc %d after %.2f s", rc, now_seconds() - t0);
    CHECK(strstr(err.msg, path) && strstr(err.msg, "a world of 2 ranks") && strstr(err.msg, "one of 3"), "another world: %s", err.msg);
    /* rank 0 hears the refusal at once, with the rank's reason, not after its timeout */
    t0 = now_seconds();
    rc = launch_id_file_answers(path, 2, 5.0, &err);
    CHECK(rc == -1 && now_seconds() - t0 < 1 && strstr(err.msg, "rank 1 refused") && strstr(err.msg, "one of 3"),
          "rank 0 after the refusal: rc %d after %.2f s: %s", rc, now_seconds() - t0, err.msg);
    CHECK(files_in(dir) == 1, "the refusal's answer was left");
    t0 = now_seconds();
    rc = launch_share_id_file(path, &other, id, ID_LEN, 5.0, &err);
    CHECK(rc == -1 && now_seconds() - t0 < 1, "another job: rc %d after %.2f s", rc, now_seconds() - t0);
    CHECK(strstr(err.msg, "job 7.0") && strstr(err.msg, "job 8.0"), "another job: %s", err.msg);
    scratch_end();
}

/* A user's file at the path: rank 0 refuses to replace it (it stays as it was), the others refuse to read it;
   neither message holds its bytes. No file: a timeout naming the path. */
static void test_foreign_file_refused(void) {
    scratch();
    const char mine[] = "my notes\n\x01\x02\xff secret";
    Err err;
    CHECK_OK(write_file_atomic(path, mine, sizeof mine - 1, &err), &err);
    unsigned char id[ID_LEN] = {1};
    LaunchEnv r0 = who(0, 2, "7.0"), r1 = who(1, 2, "7.0");
    char note[256];
    CHECK(launch_id_file_claim(path, note, sizeof note, &err) == -1 && strstr(err.msg, "not an id file")
          && strstr(err.msg, "rank 0 does not replace it") && !strstr(err.msg, "secret"), "claim: %s", err.msg);
    CHECK(launch_share_id_file(path, &r0, id, ID_LEN, 1.0, &err) == -1 && strstr(err.msg, "does not replace"), "write: %s", err.msg);
    double t0 = now_seconds();
    CHECK(launch_share_id_file(path, &r1, id, ID_LEN, 5.0, &err) == -1 && now_seconds() - t0 < 1 && strstr(err.msg, path)
          && strstr(err.msg, "not an id file") && !strstr(err.msg, "secret") && !strstr(err.msg, "\x01"), "reader: %s", err.msg);
    launch_id_file_remove(path);
    size_t n = 0;
    char *kept = read_file(path, &n, &err);
    CHECK(kept && n == sizeof mine - 1 && !memcmp(kept, mine, n), "the user's file changed");
    free(kept);
    unlink(path);
    t0 = now_seconds();
    int rc = launch_share_id_file(path, &r1, id, ID_LEN, 0.3, &err);
    double dt = now_seconds() - t0;
    CHECK(rc == -1 && dt >= 0.3 && dt < 0.3 + 3, "no file: rc %d after %.2f s", rc, dt);
    CHECK(strstr(err.msg, path) && strstr(err.msg, "rank 0 did not write the id file within 0.3 s"), "no file: %s", err.msg);
    scratch_end();
}

/* An id file whose rank 0 is gone (a killed run's) is stale: a reader waits past it, rank 0 replaces it and says so. */
static void test_stale_file_replaced(void) {
    scratch();
    unsigned char old[ID_LEN], id[ID_LEN];
    memset(old, 0xee, sizeof old);
    for (int i = 0; i < ID_LEN; i++) id[i] = (unsigned char)i;
    fflush(NULL);
    pid_t dead = fork();
    if (dead == 0) {
        Err err;
        LaunchEnv le = who(0, 2, "7.0");
        _exit(launch_share_id_file(path, &le, old, ID_LEN, 1.0, &err) ? 1 : 0);
    }
    int st = 0;
    waitpid(dead, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && file_exists(path), "the stale file was not written: %#x", st);
    pid_t reader = start_reader(2, id);
    usleep(200 * 1000);
    Err err;
    char note[1024];
    LaunchEnv r0 = who(0, 2, "7.0");
    CHECK_OK(launch_id_file_claim(path, note, sizeof note, &err), &err);
    CHECK(strstr(note, "stale") && strstr(note, path), "note: %s", note);
    CHECK_OK(launch_share_id_file(path, &r0, id, ID_LEN, 3.0, &err), &err);
    waitpid(reader, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the reader took the stale id (or none): %#x", st);
    scratch_end();
}

/* An id file over its limit is refused before it is read, naming the limit. */
static void test_id_file_bounded(void) {
    scratch();
    size_t n = LAUNCH_ID_FILE_MAX + 1;
    char *big = xcalloc(n, 1);
    Err err;
    CHECK_OK(write_file_atomic(path, big, n, &err), &err);
    free(big);
    unsigned char id[ID_LEN];
    LaunchEnv r1 = who(1, 2, "7.0");
    CHECK(launch_share_id_file(path, &r1, id, ID_LEN, 1.0, &err) == -1 && strstr(err.msg, "more than the 4 KiB"), "big: %s", err.msg);
    scratch_end();
}

static void test_id_file_path(void) {
    env_clear();
    LaunchEnv le = {.rank = 1, .world = 2, .how = "srun"};
    snprintf(le.job, sizeof le.job, "12/3 x:y.0");
    char out[256];
    Err err;
    CHECK_OK(launch_id_file_path(&le, NULL, "/shared/run", out, sizeof out, &err), &err);
    CHECK(!strcmp(out, "/shared/run/.nccl-id-12_3_x_y.0"), "sanitized: %s", out);
    CHECK_OK(launch_id_file_path(&le, "/nfs/me/id", "/shared/run", out, sizeof out, &err), &err);
    CHECK(!strcmp(out, "/nfs/me/id"), "override: %s", out);
    le.job[0] = 0;
    le.how = "mpirun";
    CHECK(launch_id_file_path(&le, NULL, "/shared/run", out, sizeof out, &err) == -1 && strstr(err.msg, "set GPT2GEN_NCCL_ID_FILE")
          && strstr(err.msg, "mpirun"), "no job: %s", err.msg);
    snprintf(le.job, sizeof le.job, "42");
    CHECK(launch_id_file_path(&le, NULL, "/shared/run", out, 10, &err) == -1 && strstr(err.msg, "too long"), "small: %s", err.msg);
    env_restore();
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    RUN(test_share_id_file);
    RUN(test_disagreeing_ranks_stop);
    RUN(test_foreign_file_refused);
    RUN(test_stale_file_replaced);
    RUN(test_id_file_bounded);
    RUN(test_id_file_path);
    return check_summary();
}
