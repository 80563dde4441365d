/* sandbox: a Lua 5.4 config evaluated with no way out (see sandbox.h). */
#include "gen/sandbox.h"
#include "common/files.h"
#include "common/clock.h"
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---------------------------------------------------------------- the sandbox */


static void *sandbox_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    Sandbox *sb = ud;
    if (!ptr) osize = 0;
    if (nsize == 0) { sb->used -= osize; free(ptr); return NULL; }
    if (nsize > osize && sb->used + (nsize - osize) > sb->limit) return NULL;   /* Lua raises "not enough memory" */
    void *p = realloc(ptr, nsize);
    if (p) sb->used = sb->used - osize + nsize;
    return p;
}

static void sandbox_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    Sandbox *sb;
    lua_getallocf(L, (void **)&sb);
    if (now_seconds() > sb->deadline)
        luaL_error(L, "config evaluation ran for more than %d s (an endless loop?)", (int)CONFIG_TIME_LIMIT);
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
    "  __index = function(_, k) local v = store[k]; if v ~= nil then return v end; return lib[k] end,\n"
    "  __newindex = function(_, k, v)\n"
    "    local old = store[k]\n"
    "    if type(v) == 'table' and type(old) == 'table' and not islist(v) then merge(old, v) else store[k] = v end\n"
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
    char path[CONFIG_PATH_MAX];
    if (name[0] == '/') snprintf(path, sizeof path, "%s", name);
    else snprintf(path, sizeof path, "%s/%s", ev->dirs[ev->depth - 1], name);
    for (int i = 0; i < ev->depth; i++)
        if (!strcmp(ev->files[i], path)) return luaL_error(L, "base \"%s\": the configs include each other in a cycle", name);
    if (ev->depth >= 16) return luaL_error(L, "base \"%s\": more than 16 nested bases", name);
    if (!file_exists(path)) return luaL_error(L, "base \"%s\": no such file (looked for %s)", name, path);
    if (run_file(ev, path) != 0) return lua_error(L);   /* message is on the stack */
    return 0;
}

/* Loads and runs one file with _ENV = the proxy. Returns 0, or -1 with the message on the stack. */
static int run_file(Eval *ev, const char *path) {
    lua_State *L = ev->L;
    snprintf(ev->files[ev->depth], CONFIG_PATH_MAX, "%s", path);
    dirname_of(path, ev->dirs[ev->depth], CONFIG_PATH_MAX);
    ev->depth++;
    int rc = luaL_loadfilex(L, path, "t");    /* text only: no precompiled chunks */
    if (rc == LUA_OK) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, ev->env_ref);
        lua_setupvalue(L, -2, 1);              /* the chunk's first upvalue is _ENV */
        rc = lua_pcall(L, 0, 0, 0);
    }
    ev->depth--;
    return rc == LUA_OK ? 0 : -1;
}

static const char *const SAFE_GLOBALS[] = {
    "assert", "error", "ipairs", "next", "pairs", "pcall", "select", "tonumber", "tostring", "type",
    "rawequal", "rawget", "rawlen", "xpcall", "setmetatable", "getmetatable", "print", "_VERSION", NULL};
static const char *const SAFE_LIBS[] = {"string", "table", "math", "utf8", NULL};

static int sandbox_open(Eval *ev) {
    memset(ev, 0, sizeof *ev);
    ev->sb.limit = CONFIG_MEM_LIMIT;
    ev->sb.deadline = now_seconds() + CONFIG_TIME_LIMIT;
    lua_State *L = lua_newstate(sandbox_alloc, &ev->sb);
    if (!L) return -1;
    ev->L = L;
    luaL_requiref(L, "_G", luaopen_base, 1);          lua_pop(L, 1);
    luaL_requiref(L, "string", luaopen_string, 1);    lua_pop(L, 1);
    luaL_requiref(L, "table", luaopen_table, 1);      lua_pop(L, 1);
    luaL_requiref(L, "math", luaopen_math, 1);        lua_pop(L, 1);
    luaL_requiref(L, "utf8", luaopen_utf8, 1);        lua_pop(L, 1);
    lua_sethook(L, sandbox_hook, LUA_MASKCOUNT, 10000);
    /* lib: only the safe names, plus base() */
    lua_newtable(L);
    for (int i = 0; SAFE_GLOBALS[i]; i++) { lua_getglobal(L, SAFE_GLOBALS[i]); lua_setfield(L, -2, SAFE_GLOBALS[i]); }
    for (int i = 0; SAFE_LIBS[i]; i++) { lua_getglobal(L, SAFE_LIBS[i]); lua_setfield(L, -2, SAFE_LIBS[i]); }
    lua_pushlightuserdata(L, ev);
    lua_pushcclosure(L, lua_base, 1);
    lua_setfield(L, -2, "base");
    int lib = lua_gettop(L);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    ev->store_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    int store = lua_gettop(L);
    if (luaL_loadstring(L, SANDBOX_LUA) != LUA_OK) return -1;
    lua_pushvalue(L, lib);
    lua_pushvalue(L, store);
    if (lua_pcall(L, 2, 1, 0) != LUA_OK) return -1;
    ev->env_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_settop(L, 0);
    return 0;
}

/* ---------------------------------------------------------------- overrides: --set a.b.c=value */

/* Parses value as a Lua literal (number, boolean, string in quotes, table); anything else is a string. */
static void push_override_value(lua_State *L, const char *value) {
    char chunk[1200];
    snprintf(chunk, sizeof chunk, "return %s", value);
    if (luaL_loadstring(L, chunk) == LUA_OK) {
        lua_newtable(L);                    /* an empty _ENV: a literal needs nothing */
        lua_setupvalue(L, -2, 1);
        if (lua_pcall(L, 0, 1, 0) == LUA_OK && !lua_isnil(L, -1)) return;
    }
    lua_pop(L, 1);
    lua_pushstring(L, value);
}

static int apply_override(Eval *ev, const char *ov, const char *file, Err *err) {
    lua_State *L = ev->L;
    const char *eq = strchr(ov, '=');
    if (!eq || eq == ov) return err_set(err, "--set %s: expected key=value, e.g. --set train.steps=100", ov);
    char key[256];
    snprintf(key, sizeof key, "%.*s", (int)(eq - ov), ov);
    lua_rawgeti(L, LUA_REGISTRYINDEX, ev->store_ref);
    char *save = NULL, *part = strtok_r(key, ".", &save);
    while (part) {
        char *next = strtok_r(NULL, ".", &save);
        if (!next) {
            push_override_value(L, eq + 1);
            lua_setfield(L, -2, part);
        } else {
            lua_getfield(L, -1, part);
            if (lua_isnil(L, -1)) { lua_pop(L, 1); lua_newtable(L); lua_pushvalue(L, -1); lua_setfield(L, -3, part); }
            else if (!lua_istable(L, -1)) { lua_settop(L, 0); return err_set(err, "%s: --set %s: %s is not a table", file, ov, part); }
            lua_remove(L, -2);
        }
        part = next;
    }
    lua_settop(L, 0);
    return 0;
}

int sandbox_eval(Eval *ev, const char *path, const char *const *overrides, int n_overrides, Err *err) {
    if (sandbox_open(ev)) return err_set(err, "%s: cannot start the Lua sandbox", path);
    if (run_file(ev, path)) {
        const char *msg = lua_tostring(ev->L, -1);
        if (msg && strstr(msg, "not enough memory"))
            return err_set(err, "%s: the config allocated more than %u MiB (an endless table?)", path, CONFIG_MEM_LIMIT >> 20);
        /* a Lua runtime error already says file:line; make sure the file is named */
        if (msg && !strstr(msg, path) && !strstr(msg, ".lua:")) return err_set(err, "%s: %s", path, msg);
        return err_set(err, "%s", msg ? msg : "error in config");
    }
    for (int i = 0; i < n_overrides; i++)
        if (apply_override(ev, overrides[i], path, err)) return -1;
    lua_sethook(ev->L, NULL, 0, 0);
    lua_rawgeti(ev->L, LUA_REGISTRYINDEX, ev->store_ref);
    return 0;
}

void sandbox_close(Eval *ev) {
    if (ev->L) lua_close(ev->L);
    ev->L = NULL;
}
