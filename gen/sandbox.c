/* sandbox: a Lua 5.4 config evaluated with no way out (see sandbox.h for the guarantees). */
#include "gen/sandbox.h"
#include "common/files.h"
#include "common/clock.h"
#include <lauxlib.h>
#include <lualib.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

typedef struct {
    size_t used, limit;     /* bytes the state holds, and may hold */
    double deadline;        /* now_seconds() after which Lua code stops */
    int expired;            /* the hook found the deadline passed: from then on no Lua code may continue */
    jmp_buf panic;          /* where a Lua panic jumps to */
    char panic_msg[512];
} Sandbox;

typedef struct {
    lua_State *L;
    Sandbox sb;
    const char *path;                          /* the config file */
    const char *const *overrides;
    int n_overrides;
    SandboxReader read;
    void *ud;
    Err *err;
    int rc;                                    /* -1 when an override or read set err */
    int store_ref, env_ref;
    char dirs[SANDBOX_MAX_BASES][CONFIG_PATH_MAX];    /* directory of each config on the base chain */
    char files[SANDBOX_MAX_BASES][CONFIG_PATH_MAX];
    int depth;
} Eval;

static Sandbox *sandbox_of(lua_State *L) {
    void *ud;
    lua_getallocf(L, &ud);
    return ud;
}

/* ---------------------------------------------------------------- memory and time */

static void *sandbox_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    Sandbox *sb = ud;
    if (!ptr) osize = 0;
    if (nsize == 0) { sb->used -= osize; free(ptr); return NULL; }
    if (nsize > osize && nsize - osize > sb->limit - sb->used) return NULL;   /* Lua raises "not enough memory" */
    void *p = realloc(ptr, nsize);
    if (p) sb->used = sb->used - osize + nsize;
    return p;
}

#define HOOK_COUNT 1000   /* VM instructions between two looks at the clock */

static void sandbox_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    Sandbox *sb = sandbox_of(L);
    if (sb->expired || now_seconds() > sb->deadline) {
        sb->expired = 1;
        luaL_error(L, "config evaluation ran for more than %d s (an endless loop?)", (int)CONFIG_TIME_LIMIT);
    }
}

/* The watchdog: the count hook runs only between Lua instructions, so it cannot stop C code that never returns
   to Lua (a pattern match that backtracks exponentially, string.rep("", 1e18), table.move over 2^62 slots,
   opening a FIFO). CONFIG_WATCHDOG_GRACE after the time limit, SIGALRM writes the time-limit message and ends
   the process with exit code 2. It is armed from the state's creation to after its close. */
static char watchdog_msg[CONFIG_PATH_MAX + 200];
static size_t watchdog_len;

static void watchdog_fire(int sig) {
    (void)sig;
    ssize_t w = write(STDERR_FILENO, watchdog_msg, watchdog_len);
    (void)w;
    _exit(EXIT_USAGE);
}

typedef struct { struct sigaction action; struct itimerval timer; } Watchdog;   /* what was there before */

static void watchdog_arm(Watchdog *old, const char *path) {
    int n = snprintf(watchdog_msg, sizeof watchdog_msg, "gpt2gen: %s: config evaluation ran for more than %d s "
                     "(stuck in a library call such as a pattern match)\n", path, (int)CONFIG_TIME_LIMIT);
    watchdog_len = n < (int)sizeof watchdog_msg ? (size_t)n : sizeof watchdog_msg - 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = watchdog_fire;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, &old->action);
    double s = CONFIG_TIME_LIMIT + CONFIG_WATCHDOG_GRACE;
    struct itimerval t = {{0, 0}, {(time_t)s, (suseconds_t)((s - (time_t)s) * 1e6)}};
    setitimer(ITIMER_REAL, &t, &old->timer);
}

static void watchdog_disarm(const Watchdog *old) {
    setitimer(ITIMER_REAL, &old->timer, NULL);
    sigaction(SIGALRM, &old->action, NULL);
}

/* The last resort: Lua calls this on an error outside protected mode (abort() otherwise). Nothing here runs
   unprotected, so this is a bug; it still becomes an error message, through a jump back into sandbox_run. */
static int sandbox_panic(lua_State *L) {
    Sandbox *sb = sandbox_of(L);
    const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "an error object that is not a string";
    snprintf(sb->panic_msg, sizeof sb->panic_msg, "%s", msg);
    longjmp(sb->panic, 1);
}

/* ---------------------------------------------------------------- the config's functions */

/* pcall and xpcall as the base library has them, except that they do not catch the time limit: once it has
   passed, an error goes on up to sandbox_run. */
static int finish_pcall(lua_State *L, int status, int extra) {
    if (status == LUA_OK) return lua_gettop(L) - extra;
    if (sandbox_of(L)->expired) return lua_error(L);
    lua_pushboolean(L, 0);
    lua_pushvalue(L, -2);
    return 2;
}

static int sandbox_pcall(lua_State *L) {
    luaL_checkany(L, 1);
    lua_pushboolean(L, 1);
    lua_insert(L, 1);
    return finish_pcall(L, lua_pcall(L, lua_gettop(L) - 2, LUA_MULTRET, 0), 0);
}

/* xpcall's message handler, guarded: Lua calls it from inside the hook when the time limit raised the error,
   where hooks are off and nothing would stop it. Past the limit, the error goes through untouched. */
static int guarded_handler(lua_State *L) {
    if (sandbox_of(L)->expired) return 1;
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

static int sandbox_xpcall(lua_State *L) {
    int n = lua_gettop(L);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_pushvalue(L, 2);
    lua_pushcclosure(L, guarded_handler, 1);
    lua_replace(L, 2);
    lua_pushboolean(L, 1);
    lua_pushvalue(L, 1);
    lua_rotate(L, 3, 2);               /* f, msgh, true, f, args... */
    return finish_pcall(L, lua_pcall(L, n - 2, LUA_MULTRET, 2), 2);
}

/* setmetatable without finalizers: Lua runs __gc with hooks off (and at close), where the time limit could not
   stop it. A __gc added to the metatable later does not count (Lua marks an object for finalization only when
   its metatable has __gc as it is set). */
static int sandbox_setmetatable(lua_State *L) {
    if (lua_type(L, 2) == LUA_TTABLE) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL)
            return luaL_error(L, "setmetatable: a metatable with __gc is not allowed in a config");
        lua_pop(L, 1);
    }
    lua_settop(L, 2);
    lua_pushvalue(L, lua_upvalueindex(1));   /* the base library's setmetatable */
    lua_insert(L, 1);
    lua_call(L, 2, 1);
    return 1;
}

/* Lua code that sets up the proxy environment: `store` holds the values, `env` is what the config sees. */
static const char *SANDBOX_LUA =
    "local lib, store = ...\n"
    "local function islist(t) return rawget(t, 1) ~= nil end\n"
    "local function merge(dst, src)\n"
    "  for k, v in pairs(src) do\n"
    "    local old = rawget(dst, k)\n"
    "    if type(v) == 'table' and type(old) == 'table' and not islist(v) then merge(old, v)\n"
    "    else rawset(dst, k, v) end\n"
    "  end\n"
    "end\n"
    "local env = setmetatable({}, {\n"
    "  __metatable = false,\n"
    "  __index = function(_, k) local v = rawget(store, k); if v ~= nil then return v end; return lib[k] end,\n"
    "  __newindex = function(_, k, v)\n"
    "    local old = rawget(store, k)\n"
    "    if type(v) == 'table' and type(old) == 'table' and not islist(v) then merge(old, v) else rawset(store, k, v) end\n"
    "  end})\n"
    "return env\n";

static void dirname_of(const char *path, char *out, size_t n) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(out, n, ".");
    else snprintf(out, n, "%.*s", (int)(slash - path), path);
}

static int run_file(Eval *ev, const char *path);

/* base "file.lua": evaluate another config first, into the same environment. Relative names are
   looked up beside the current config. */
static int lua_base(lua_State *L) {
    Eval *ev = lua_touserdata(L, lua_upvalueindex(1));
    const char *name = luaL_checkstring(L, 1);
    if (ev->depth == 0) return luaL_error(L, "base \"%s\": only while a config runs", name);
    if (ev->depth >= SANDBOX_MAX_BASES) return luaL_error(L, "base \"%s\": more than %d nested bases", name, SANDBOX_MAX_BASES);
    char path[CONFIG_PATH_MAX];
    int n = name[0] == '/' ? snprintf(path, sizeof path, "%s", name)
                           : snprintf(path, sizeof path, "%s/%s", ev->dirs[ev->depth - 1], name);
    if (n < 0 || n >= (int)sizeof path)
        return luaL_error(L, "base \"%s\": the path is longer than %d characters", err_show(name), CONFIG_PATH_MAX - 1);
    for (int i = 0; i < ev->depth; i++)
        if (!strcmp(ev->files[i], path)) return luaL_error(L, "base \"%s\": the configs include each other in a cycle", name);
    if (!file_exists(path)) return luaL_error(L, "base \"%s\": %s (looked for %s)", err_show(name), file_missing_why(path), err_show(path));
    if (run_file(ev, path) != 0) return lua_error(L);   /* message is on the stack */
    return 0;
}

/* Loads and runs one file with _ENV = the proxy. Returns 0, or -1 with the message on the stack.
   path is shorter than CONFIG_PATH_MAX and depth < SANDBOX_MAX_BASES (the callers check). */
static int run_file(Eval *ev, const char *path) {
    lua_State *L = ev->L;
    snprintf(ev->files[ev->depth], CONFIG_PATH_MAX, "%s", path);
    dirname_of(path, ev->dirs[ev->depth], CONFIG_PATH_MAX);
    ev->depth++;
    /* the file's size is checked before it is read (docs/data.md, "Limits of the files gpt2gen reads") */
    Err err;
    size_t n = 0;
    char *text = read_file_max(path, CONFIG_FILE_MAX, &n, &err), chunk[CONFIG_PATH_MAX + 1];
    if (!text) {
        ev->depth--;
        lua_pushstring(L, err.msg);
        return -1;
    }
    snprintf(chunk, sizeof chunk, "@%s", path);   /* Lua's messages name the file, as luaL_loadfile's do */
    /* a UTF-8 byte order mark and a "#!" first line, as luaL_loadfile skips them (the line's newline kept) */
    size_t skip = !strncmp(text, "\xEF\xBB\xBF", 3) ? 3 : 0;
    if (text[skip] == '#') skip += strcspn(text + skip, "\n");
    int rc = luaL_loadbufferx(L, text + skip, n - skip, chunk, "t");    /* text only: no precompiled chunks */
    free(text);
    if (rc == LUA_OK) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, ev->env_ref);
        lua_setupvalue(L, -2, 1);              /* the chunk's first upvalue is _ENV */
        rc = lua_pcall(L, 0, 0, 0);
    }
    ev->depth--;
    return rc == LUA_OK ? 0 : -1;
}

static const char *const SAFE_GLOBALS[] = {
    "assert", "error", "ipairs", "next", "pairs", "select", "tonumber", "tostring", "type",
    "rawequal", "rawget", "rawlen", "getmetatable", "print", "_VERSION", NULL};
static const char *const SAFE_LIBS[] = {"string", "table", "math", "utf8", NULL};

/* The libraries, the locked string metatable, the config's functions and the proxy environment. */
static void sandbox_setup(Eval *ev) {
    lua_State *L = ev->L;
    luaL_requiref(L, "_G", luaopen_base, 1);          lua_pop(L, 1);
    luaL_requiref(L, "string", luaopen_string, 1);    lua_pop(L, 1);
    luaL_requiref(L, "table", luaopen_table, 1);      lua_pop(L, 1);
    luaL_requiref(L, "math", luaopen_math, 1);        lua_pop(L, 1);
    luaL_requiref(L, "utf8", luaopen_utf8, 1);        lua_pop(L, 1);
    lua_pushliteral(L, "");                           /* getmetatable("") gives false: no one changes it */
    lua_getmetatable(L, -1);
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 2);
    /* lib: only the safe names, plus base() and the guarded pcall, xpcall and setmetatable */
    lua_newtable(L);
    for (int i = 0; SAFE_GLOBALS[i]; i++) { lua_getglobal(L, SAFE_GLOBALS[i]); lua_setfield(L, -2, SAFE_GLOBALS[i]); }
    for (int i = 0; SAFE_LIBS[i]; i++) { lua_getglobal(L, SAFE_LIBS[i]); lua_setfield(L, -2, SAFE_LIBS[i]); }
    lua_pushcfunction(L, sandbox_pcall);   lua_setfield(L, -2, "pcall");
    lua_pushcfunction(L, sandbox_xpcall);  lua_setfield(L, -2, "xpcall");
    lua_getglobal(L, "setmetatable");
    lua_pushcclosure(L, sandbox_setmetatable, 1);
    lua_setfield(L, -2, "setmetatable");
    lua_pushlightuserdata(L, ev);
    lua_pushcclosure(L, lua_base, 1);
    lua_setfield(L, -2, "base");
    int lib = lua_gettop(L);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    ev->store_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    int store = lua_gettop(L);
    if (luaL_loadstring(L, SANDBOX_LUA) != LUA_OK) lua_error(L);
    lua_pushvalue(L, lib);
    lua_pushvalue(L, store);
    lua_call(L, 2, 1);
    ev->env_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_settop(L, 0);
}

/* ---------------------------------------------------------------- overrides: --set a.b.c=value */

/* Pushes value as a Lua literal (number, boolean, string in quotes, table), evaluated with an empty _ENV;
   anything that does not load or evaluate to a value is the string itself. The time and memory limits are
   not the value's to catch: they go on up. */
static void push_override_value(Eval *ev, const char *value) {
    lua_State *L = ev->L;
    const char *chunk = lua_pushfstring(L, "return %s", value);
    if (luaL_loadbufferx(L, chunk, strlen(chunk), "=--set", "t") == LUA_OK) {
        lua_newtable(L);                    /* an empty _ENV: a literal needs nothing */
        lua_setupvalue(L, -2, 1);
        int status = lua_pcall(L, 0, 1, 0);
        if (status == LUA_ERRMEM || (status != LUA_OK && ev->sb.expired)) lua_error(L);
        if (status == LUA_OK && !lua_isnil(L, -1)) { lua_remove(L, -2); return; }
    }
    lua_pop(L, 2);                          /* the message or nil, and the chunk's text */
    lua_pushstring(L, value);
}

/* Sets store.a.b.c = value, making the tables on the way; raw access only. Returns 0, or -1 with err set. */
static int apply_override(Eval *ev, const char *ov) {
    lua_State *L = ev->L;
    const char *eq = strchr(ov, '=');
    if (!eq || eq == ov)
        return err_set(ev->err, "%s: --set %s: expected KEY=VALUE, e.g. --set train.steps=100", ev->path, err_show(ov));
    lua_rawgeti(L, LUA_REGISTRYINDEX, ev->store_ref);
    for (const char *part = ov;;) {
        const char *dot = memchr(part, '.', (size_t)(eq - part));
        const char *end = dot ? dot : eq;
        if (end == part) {
            lua_settop(L, 0);
            return err_set(ev->err, "%s: --set %s: the key has an empty part", ev->path, err_show(ov));
        }
        lua_pushlstring(L, part, (size_t)(end - part));
        if (!dot) {
            push_override_value(ev, eq + 1);
            lua_rawset(L, -3);
            break;
        }
        lua_pushvalue(L, -1);
        int t = lua_rawget(L, -3);
        if (t == LUA_TNIL) {
            lua_pop(L, 1);
            lua_newtable(L);
            lua_pushvalue(L, -1);
            lua_rotate(L, -3, 1);               /* parent, table, key, table */
            lua_rawset(L, -4);
        } else if (t != LUA_TTABLE) {
            lua_settop(L, 0);
            int shown = end - ov > ERR_SHOW_MAX ? ERR_SHOW_MAX : (int)(end - ov);
            return err_set(ev->err, "%s: --set %s: %.*s%s is not a table", ev->path, err_show(ov), shown, ov,
                           shown < end - ov ? "..." : "");
        } else lua_remove(L, -2);               /* the key */
        lua_remove(L, -2);                      /* the parent */
        part = dot + 1;
    }
    lua_settop(L, 0);
    return 0;
}

/* ---------------------------------------------------------------- the run */

/* Everything that touches Lua, in protected mode: the set-up, the config, the overrides, the reading. */
static int eval_protected(lua_State *L) {
    Eval *ev = lua_touserdata(L, 1);
    lua_settop(L, 0);
    sandbox_setup(ev);
    if (run_file(ev, ev->path)) return lua_error(L);
    for (int i = 0; i < ev->n_overrides; i++)
        if ((ev->rc = apply_override(ev, ev->overrides[i]))) return 0;
    ev->sb.limit += CONFIG_READ_RESERVE;
    luaL_checkstack(L, 64, "reading the config");    /* the reader's room on the stack */
    lua_rawgeti(L, LUA_REGISTRYINDEX, ev->store_ref);
    ev->rc = ev->read(L, ev->ud, ev->err);
    return 0;
}

/* The message of a Lua error (at the top of the stack), naming the file. */
static int lua_failure(Eval *ev) {
    lua_State *L = ev->L;
    const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    size_t n = strlen(ev->path);
    if (!msg)
        return err_set(ev->err, "%s: the config raised an error that is not a string (a %s)", ev->path, luaL_typename(L, -1));
    if (strstr(msg, "not enough memory"))
        return err_set(ev->err, "%s: the config allocated more than %u MiB (an endless table?)", ev->path, CONFIG_MEM_LIMIT >> 20);
    if (!strncmp(msg, ev->path, n) && msg[n] == ':') return err_set(ev->err, "%s", msg);   /* Lua's "file:line: ..." */
    return err_set(ev->err, "%s: %s", ev->path, msg);
}

int sandbox_run(const char *path, const char *const *overrides, int n_overrides, SandboxReader read, void *ud, Err *err) {
    if (strlen(path) >= CONFIG_PATH_MAX)
        return err_set(err, "%s: the config path is %zu characters long: at most %d", err_show(path), strlen(path), CONFIG_PATH_MAX - 1);
    /* on the heap: a longjmp from a panic leaves this function's own automatic variables indeterminate */
    Eval *ev = xcalloc(1, sizeof *ev);
    ev->path = path;
    ev->overrides = overrides;
    ev->n_overrides = n_overrides;
    ev->read = read;
    ev->ud = ud;
    ev->err = err;
    ev->sb.limit = CONFIG_MEM_LIMIT;
    Watchdog old;
    watchdog_arm(&old, path);
    ev->sb.deadline = now_seconds() + CONFIG_TIME_LIMIT;
    ev->L = lua_newstate(sandbox_alloc, &ev->sb);
    if (!ev->L) ev->rc = err_set(err, "%s: cannot start the Lua sandbox", path);
    else if (setjmp(ev->sb.panic)) {
        /* the state is left as the panic left it (not closed: Lua may be inconsistent there) */
        ev->rc = err_set(err, "%s: the Lua sandbox failed: %s", path, ev->sb.panic_msg);
    } else {
        lua_atpanic(ev->L, sandbox_panic);
        lua_sethook(ev->L, sandbox_hook, LUA_MASKCOUNT, HOOK_COUNT);
        lua_pushcfunction(ev->L, eval_protected);
        lua_pushlightuserdata(ev->L, ev);
        if (lua_pcall(ev->L, 1, 0, 0) != LUA_OK) ev->rc = lua_failure(ev);
        lua_close(ev->L);                   /* the hook stays on: nothing runs unlimited here either */
    }
    watchdog_disarm(&old);
    int rc = ev->rc;
    free(ev);
    return rc;
}
