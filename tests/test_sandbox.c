/* test_sandbox: the limits of gen/sandbox.c hold beyond the config's own code: the reader of the result runs
   protected, under the time limit and with its memory reserve; overrides use raw access; and the watchdog is
   gone once sandbox_run returns. (tests/cli/config_hostile.sh holds hostile configs against the whole binary,
   where the watchdog may end the process.) */
#include "tests/check.h"
#include "gen/sandbox.h"
#include "common/clock.h"
#include <lauxlib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static char tmpdir[256], cfg_path[300];

static int write_config(const char *text) {
    FILE *f = fopen(cfg_path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

/* ---- readers: each gets the table of what the config assigned */

static int read_raise(lua_State *L, void *ud, Err *err) {
    (void)ud; (void)err;
    return luaL_error(L, "the reader raised this");
}

static int read_call_f(lua_State *L, void *ud, Err *err) {   /* calls the config's f() */
    (void)ud; (void)err;
    lua_getfield(L, -1, "f");
    lua_call(L, 0, 0);
    return 0;
}

static size_t alloc_bytes;
static int read_alloc(lua_State *L, void *ud, Err *err) {   /* allocates alloc_bytes */
    (void)ud; (void)err;
    memset(lua_newuserdatauv(L, alloc_bytes, 0), 1, alloc_bytes);
    return 0;
}

static int read_t_x(lua_State *L, void *ud, Err *err) {   /* *ud = rawget(t, "x") */
    lua_getfield(L, -1, "t");
    if (!lua_istable(L, -1)) return err_set(err, "t is not a table");
    lua_pushliteral(L, "x");
    lua_rawget(L, -2);
    *(lua_Integer *)ud = lua_tointeger(L, -1);
    return 0;
}

static void test_reader_errors_are_messages(void) {
    if (write_config("x = 1\n")) { CHECK(0, "cannot write %s", cfg_path); return; }
    Err err;
    int rc = sandbox_run(cfg_path, NULL, 0, read_raise, NULL, &err);
    CHECK(rc == -1, "a reader that raises an error returned %d", rc);
    if (rc) CHECK(strstr(err.msg, cfg_path) == err.msg && strstr(err.msg, "the reader raised this"), "message: %s", err.msg);
}

/* The count hook stays on while the result is read: a config function the reader calls is stopped. */
static void test_time_limit_covers_the_reader(void) {
    if (write_config("f = function() while true do end end\n")) { CHECK(0, "cannot write %s", cfg_path); return; }
    Err err;
    double t0 = now_seconds();
    int rc = sandbox_run(cfg_path, NULL, 0, read_call_f, NULL, &err);
    double dt = now_seconds() - t0;
    CHECK(rc == -1 && strstr(err.msg, "ran for more than 2 s"), "rc %d: %s", rc, rc ? err.msg : "");
    CHECK(dt < CONFIG_TIME_LIMIT + CONFIG_WATCHDOG_GRACE, "stopped after %.2f s", dt);
}

/* A config that holds all of its 64 MiB: the reader still has CONFIG_READ_RESERVE, and beyond that gets the
   memory message (not a panic). */
static const char FILL[] =
    "local pad = {}\n"
    "string.pad = pad   -- kept alive through the string library\n"
    "local n = 1\n"
    "local units = {[16] = string.rep('y', 16), [256] = string.rep('y', 256)}   -- rep of 'y' copies byte by byte\n"
    "for _, size in ipairs({1 << 20, 1 << 16, 1 << 12, 1 << 8, 16}) do\n"
    "  local unit = units[size < 256 and 16 or 256]\n"
    "  while pcall(function() pad[n] = string.rep(unit, size // #unit) end) do n = n + 1 end\n"
    "end\n";

static void test_reader_memory_reserve(void) {
    if (write_config(FILL)) { CHECK(0, "cannot write %s", cfg_path); return; }
    Err err;
    alloc_bytes = CONFIG_READ_RESERVE / 2;
    int rc = sandbox_run(cfg_path, NULL, 0, read_alloc, NULL, &err);
    CHECK(rc == 0, "the reader could not allocate %zu bytes after a full config: %s", alloc_bytes, rc ? err.msg : "");
    alloc_bytes = 2 * CONFIG_READ_RESERVE;
    rc = sandbox_run(cfg_path, NULL, 0, read_alloc, NULL, &err);
    CHECK(rc == -1 && strstr(err.msg, "allocated more than 64 MiB"), "rc %d: %s", rc, rc ? err.msg : "");
}

/* --set writes raw: a config table's __newindex does not run. */
static void test_overrides_are_raw(void) {
    if (write_config("t = setmetatable({}, {__newindex = function() error('ran') end})\n")) { CHECK(0, "cannot write"); return; }
    const char *sets[] = {"t.x=7"};
    lua_Integer x = 0;
    Err err;
    int rc = sandbox_run(cfg_path, sets, 1, read_t_x, &x, &err);
    CHECK(rc == 0 && x == 7, "rc %d, t.x = %lld: %s", rc, (long long)x, rc ? err.msg : "");
}

/* The watchdog is armed only inside sandbox_run: afterwards the timer is off and SIGALRM's action is back. */
static void test_watchdog_disarmed(void) {
    if (write_config("x = 1\n")) { CHECK(0, "cannot write %s", cfg_path); return; }
    lua_Integer x = 0;
    Err err;
    sandbox_run(cfg_path, NULL, 0, read_t_x, &x, &err);   /* fails (no t): the watchdog goes all the same */
    struct itimerval t;
    getitimer(ITIMER_REAL, &t);
    struct sigaction sa;
    sigaction(SIGALRM, NULL, &sa);
    CHECK(t.it_value.tv_sec == 0 && t.it_value.tv_usec == 0, "the timer still runs: %ld s left", (long)t.it_value.tv_sec);
    CHECK(sa.sa_handler == SIG_DFL, "SIGALRM's handler was not restored");
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_sandbox.XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    snprintf(cfg_path, sizeof cfg_path, "%s/c.lua", tmpdir);
    RUN(test_reader_errors_are_messages);
    RUN(test_time_limit_covers_the_reader);
    RUN(test_reader_memory_reserve);
    RUN(test_overrides_are_raw);
    RUN(test_watchdog_disarmed);
    remove(cfg_path);
    rmdir(tmpdir);
    return check_summary();
}
