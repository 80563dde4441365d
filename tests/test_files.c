/* test_files: the one way gpt2gen writes a file (common/files.h): a symbolic link, a FIFO or a device at the
   target is refused and left as it was; a link planted at the old predictable temporary name (PATH.tmp.<pid>)
   is not written through; a write that fails part way (the file size limit, a full disk's EFBIG) is an error
   naming the file, the previous file stays whole and no temporary file is left; leftovers are recognized only
   when provably a killed write's; file_may_replace keeps files gpt2gen did not write without --force. */
#include "common/files.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "tests/check.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

static char tmpdir[256];

static const char *tpath(const char *name) {
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

/* The contents of path (NULL when it cannot be read), NUL-terminated. */
static char *slurp(const char *path) {
    Err err;
    size_t len;
    return read_file(path, &len, &err);
}

/* Files in tmpdir whose name holds ".tmp." (what a write left behind). */
static int temporaries(void) {
    DIR *d = opendir(tmpdir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

static void test_plain_write_replaces(void) {
    Err err;
    const char *p = tpath("plain.txt");
    CHECK_OK(write_file_atomic(p, "old", 3, &err), &err);
    CHECK_OK(write_file_atomic(p, "new!", 4, &err), &err);
    char *s = slurp(p);
    CHECK(s && !strcmp(s, "new!"), "got '%s'", s ? s : "(none)");
    CHECK(temporaries() == 0, "a temporary file was left");
    free(s);
}

static void test_symlink_target_refused(void) {
    Err err;
    const char *victim = tpath("victim.txt"), *link_path = tpath("link.txt");
    CHECK_OK(write_file_atomic(victim, "precious", 8, &err), &err);
    CHECK(symlink(victim, link_path) == 0, "symlink");
    int rc = write_file_atomic(link_path, "overwritten", 11, &err);
    CHECK(rc != 0 && strstr(err.msg, "is a symbolic link") && strstr(err.msg, "link.txt"), "rc=%d: %s", rc, err.msg);
    struct stat st;
    char *s = slurp(victim);
    CHECK(s && !strcmp(s, "precious"), "the link's target changed: '%s'", s ? s : "(none)");
    CHECK(lstat(link_path, &st) == 0 && S_ISLNK(st.st_mode), "the link was replaced");
    free(s);
}

static void test_fifo_and_device_refused(void) {
    Err err;
    const char *fifo = tpath("fifo");
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    int rc = write_file_atomic(fifo, "x", 1, &err);
    struct stat st;
    CHECK(rc != 0 && strstr(err.msg, "is a FIFO"), "rc=%d: %s", rc, err.msg);
    CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO was replaced");
    const char *dev = tpath("null");   /* a device node of our own: /dev/null's numbers, where we may make one */
    if (mknod(dev, S_IFCHR | 0666, makedev(1, 3)) != 0) { MARK_SKIPPED("cannot make a device node here (not root)"); return; }
    rc = write_file_atomic(dev, "x", 1, &err);
    CHECK(rc != 0 && strstr(err.msg, "is a device"), "rc=%d: %s", rc, err.msg);
    CHECK(lstat(dev, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3), "the device node was replaced");
    CHECK(temporaries() == 0, "a temporary file was left");
}

/* A symbolic link at the temporary name the writer used to take (PATH.tmp.<pid>): its target is not written. */
static void test_planted_link_not_followed(void) {
    Err err;
    const char *victim = tpath("victim2.txt"), *p = tpath("out.txt");
    char planted[600];
    CHECK_OK(write_file_atomic(victim, "precious", 8, &err), &err);
    snprintf(planted, sizeof planted, "%s.tmp.%d", p, (int)getpid());
    CHECK(symlink(victim, planted) == 0, "symlink");
    CHECK_OK(write_file_atomic(p, "mine", 4, &err), &err);
    char *s = slurp(victim), *o = slurp(p);
    CHECK(s && !strcmp(s, "precious"), "written through the planted link: '%s'", s ? s : "(none)");
    CHECK(o && !strcmp(o, "mine"), "the file holds '%s'", o ? o : "(none)");
    unlink(planted);
    free(s); free(o);
}

/* A write that stops part way (RLIMIT_FSIZE, SIGXFSZ ignored: write fails with EFBIG, as on a full disk) */
static void test_lost_write_is_an_error(void) {
    Err err;
    const char *p = tpath("big.bin");
    CHECK_OK(write_file_atomic(p, "old contents", 12, &err), &err);
    size_t n = 1 << 20;
    char *data = xcalloc(n, 1);
    struct rlimit old, small;
    getrlimit(RLIMIT_FSIZE, &old);
    small = old;
    small.rlim_cur = 64 * 1024;
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0, "setrlimit");
    int rc = write_file_atomic(p, data, n, &err);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, was);
    CHECK(rc != 0 && strstr(err.msg, "big.bin") && strstr(err.msg, "write failed"), "rc=%d: %s", rc, err.msg);
    char *s = slurp(p);
    CHECK(s && !strcmp(s, "old contents"), "the previous file changed");
    CHECK(temporaries() == 0, "a temporary file was left");
    free(s); free(data);
}

static void test_leftovers_provably_ours(void) {
    Err err;
    const char *dead = "model.bin.tmp.99999999.0123456789abcdef";
    CHECK(atomic_tmp_base(dead) == strlen("model.bin"), "base of %s: %zu", dead, atomic_tmp_base(dead));
    CHECK(atomic_tmp_base("model.bin.tmp.123") == 0, "an old-style name is not a temporary name");
    CHECK(atomic_tmp_base("model.bin.tmp..0123456789abcdef") == 0, "no pid");
    CHECK(atomic_tmp_base("model.bin.tmp.12.0123456789abcdeg") == 0, "not hex");
    CHECK(atomic_tmp_base("x.tmp.12.0123456789ABCDEF") == 0, "upper case is not what the writer makes");
    CHECK_OK(write_file_atomic(tpath(dead), "x", 1, &err), &err);
    CHECK(atomic_leftover(tmpdir, dead), "a dead process's temporary file is a leftover");
    char live[128];
    snprintf(live, sizeof live, "model.bin.tmp.%d.0123456789abcdef", (int)getpid());
    CHECK_OK(write_file_atomic(tpath(live), "x", 1, &err), &err);
    CHECK(!atomic_leftover(tmpdir, live), "a running process's temporary file is not a leftover");
    const char *linked = "state.bin.tmp.99999999.0123456789abcdef";
    CHECK(symlink(tpath("plain.txt"), tpath(linked)) == 0, "symlink");
    CHECK(!atomic_leftover(tmpdir, linked), "a symbolic link is never a leftover");
    unlink(tpath(dead)); unlink(tpath(live)); unlink(tpath(linked));
}

static int says_ours(const char *path) { char *s = slurp(path); int r = s && !strncmp(s, "OURS", 4); free(s); return r; }

static void test_may_replace(void) {
    Err err;
    const char *user = tpath("user.txt"), *ours = tpath("ours.txt");
    CHECK_OK(write_file_atomic(user, "notes", 5, &err), &err);
    CHECK_OK(write_file_atomic(ours, "OURS", 4, &err), &err);
    CHECK(file_may_replace(tpath("none"), 0, says_ours, "a test file", &err) == 0, "nothing there: %s", err.msg);
    CHECK(file_may_replace(ours, 0, says_ours, "a test file", &err) == 0, "ours: %s", err.msg);
    int rc = file_may_replace(user, 0, says_ours, "a test file", &err);
    CHECK(rc != 0 && strstr(err.msg, "user.txt exists and is not a test file that gpt2gen wrote") && strstr(err.msg, "--force"),
          "rc=%d: %s", rc, err.msg);
    CHECK(file_may_replace(user, 1, says_ours, "a test file", &err) == 0, "with force: %s", err.msg);
    rc = file_may_replace(tpath("fifo"), 1, says_ours, "a test file", &err);
    CHECK(rc != 0 && strstr(err.msg, "is a FIFO"), "a FIFO with force: rc=%d: %s", rc, err.msg);
}

/* A message shows a long path cut to its first and last 100 bytes. */
static void test_long_path_message(void) {
    char p[3000];
    snprintf(p, sizeof p, "%s/", tmpdir);
    size_t n = strlen(p);
    memset(p + n, 'a', 2500 - n);
    p[2500] = 0;
    Err err;
    CHECK(write_file_atomic(p, "x", 1, &err) != 0, "a 2500-byte name was written");
    CHECK(strlen(err.msg) < 600 && strstr(err.msg, "..."), "the message is %zu bytes: %.300s", strlen(err.msg), err.msg);
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/gpt2gen_test_files_XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    RUN(test_plain_write_replaces);
    RUN(test_symlink_target_refused);
    RUN(test_fifo_and_device_refused);
    RUN(test_planted_link_not_followed);
    RUN(test_lost_write_is_an_error);
    RUN(test_leftovers_provably_ours);
    RUN(test_may_replace);
    RUN(test_long_path_message);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) {}
    return check_summary();
}
