/* config: evaluate a Lua 5.4 config in a sandbox, read it into a Config, validate it once.
 *
 * The sandbox: only the base, string, table, math and utf8 libraries, without load/loadfile/dofile/
 * require/collectgarbage; no io, os, package or debug. A memory cap (allocator) and a time cap (count
 * hook) stop a config that allocates without bound or never returns.
 *
 * A config assigns globals (name = ..., model = {...}). Assignments go through a proxy that deep-merges
 * tables, so after `base "gpt2-124M.lua"` a line like `train = { steps = 100 }` changes one field and keeps
 * the rest. Lists (tables with [1]) are replaced whole. */
#include "gen/config.h"
#include "common/files.h"
#include "common/clock.h"
#include <stdio.h>
#include <ctype.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <time.h>

#define CONFIG_MEM_LIMIT  (64u << 20)   /* bytes a config may allocate */
#define CONFIG_TIME_LIMIT 2.0           /* seconds a config may run */

/* ---------------------------------------------------------------- the sandbox */

typedef struct { size_t used, limit; double deadline; } Sandbox;

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

typedef struct {
    lua_State *L;
    Sandbox sb;
    int store_ref, env_ref;
    char dirs[16][CONFIG_PATH_MAX];   /* directory of each config on the base chain */
    char files[16][CONFIG_PATH_MAX];
    int depth;
} Eval;

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

/* ---------------------------------------------------------------- the schema */

typedef enum { K_INT, K_NUM, K_STR, K_BOOL, K_ENUM } Kind;
typedef struct {
    const char *key;
    Kind kind;
    size_t off;          /* offset in Config */
    size_t size;         /* for strings: buffer size; for K_INT: sizeof the field */
    const char *dflt;    /* default as text; NULL: required */
    const char *const *choices;   /* for K_ENUM: names, index = value */
    double min;          /* numbers and ints: smallest allowed */
} Field;

static const char *const PRECISIONS[] = {"fp32", "bf16", "fp16", NULL};
static const char *const SCHEDULES[] = {"cosine", "linear", "constant", "wsd", NULL};

#define F_INT(sec, k, d, mn)  {#k, K_INT, offsetof(Config, sec.k), sizeof(((Config *)0)->sec.k), d, NULL, mn}
#define F_NUM(sec, k, d, mn)  {#k, K_NUM, offsetof(Config, sec.k), 0, d, NULL, mn}
#define F_STR(sec, k, d)      {#k, K_STR, offsetof(Config, sec.k), sizeof(((Config *)0)->sec.k), d, NULL, 0}
#define F_BOOL(sec, k, d)     {#k, K_BOOL, offsetof(Config, sec.k), sizeof(((Config *)0)->sec.k), d, NULL, 0}

static const Field MODEL_FIELDS[] = {
    F_INT(model, n_layer, NULL, 1), F_INT(model, n_head, NULL, 1), F_INT(model, n_embd, NULL, 1),
    F_INT(model, max_seq_len, "1024", 1), F_INT(model, vocab_size, "50257", 2), {0}};
static const Field TRAIN_FIELDS[] = {
    F_INT(train, batch_size, "4", 1), F_INT(train, seq_len, "0", 0), F_INT(train, total_batch_size, "0", 0)   /* 0: derived */,
    F_INT(train, steps, "1000", 1), F_NUM(train, lr, "6e-4", 0),
    {"schedule", K_ENUM, offsetof(Config, train.schedule), 0, "cosine", SCHEDULES, 0},
    F_INT(train, warmup, "0", 0), F_NUM(train, final_lr_frac, "0", 0), F_NUM(train, weight_decay, "0.1", 0),
    F_NUM(train, grad_clip, "1.0", 0), F_NUM(train, beta1, "0.9", 0), F_NUM(train, beta2, "0.95", 0),
    F_NUM(train, eps, "1e-8", 0), F_INT(train, seed, "1337", 0), F_INT(train, recompute, "1", 0),
    F_BOOL(train, master_weights, "true"), F_BOOL(train, overfit_batch, "false"), F_INT(train, num_gpus, "1", 1), {0}};
static const Field DATA_FIELDS[] = {
    F_STR(data, train, "data/fortunes/train_*.bin"), F_STR(data, val, "data/fortunes/val_*.bin"),
    F_STR(data, tokenizer, "data/fortunes/tokenizer.bin"), {0}};
static const Field EVAL_FIELDS[] = {
    F_INT(eval, val_every, "250", 0), F_INT(eval, val_batches, "20", 0), F_INT(eval, sample_every, "500", 0),
    F_INT(eval, sample_tokens, "64", 0), F_NUM(eval, temperature, "1.0", 0), {0}};
static const Field CHECKPOINT_FIELDS[] = {
    F_STR(checkpoint, dir, ""), F_INT(checkpoint, every, "0", 0), F_STR(checkpoint, init, ""),
    F_BOOL(checkpoint, resume, "false"), {0}};

typedef struct { const char *name; const Field *fields; } Section;
static const Section SECTIONS[] = {
    {"model", MODEL_FIELDS}, {"train", TRAIN_FIELDS}, {"data", DATA_FIELDS},
    {"eval", EVAL_FIELDS}, {"checkpoint", CHECKPOINT_FIELDS}, {NULL, NULL}};
static const char *const TOP_KEYS[] = {"name", "model", "precision", "train", "data", "eval", "checkpoint", "tune", "arch", NULL};

/* ---------------------------------------------------------------- did you mean */

static int edit_distance(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 63 || lb > 63) return 99;
    int d[64][64];
    for (int i = 0; i <= la; i++) d[i][0] = i;
    for (int j = 0; j <= lb; j++) d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int sub = d[i-1][j-1] + (tolower((unsigned char)a[i-1]) != tolower((unsigned char)b[j-1]));
            int del = d[i-1][j] + 1, ins = d[i][j-1] + 1;
            d[i][j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
    return d[la][lb];
}

/* " (did you mean 'x'?)" for the closest name within distance 3, else "" */
static void suggest(const char *key, const char *const *names, char *out, size_t n) {
    int best = 4;
    const char *pick = NULL;
    for (int i = 0; names[i]; i++) {
        int dist = edit_distance(key, names[i]);
        if (dist < best) { best = dist; pick = names[i]; }
    }
    if (pick) snprintf(out, n, " (did you mean '%s'?)", pick);
    else out[0] = 0;
}

static void list_names(const char *const *names, char *out, size_t n) {
    out[0] = 0;
    for (int i = 0; names[i]; i++) {
        size_t len = strlen(out);
        snprintf(out + len, n - len, "%s%s", i ? ", " : "", names[i]);
    }
}

/* ---------------------------------------------------------------- reading values */

static void describe_value(lua_State *L, int idx, char *out, size_t n) {
    int t = lua_type(L, idx);
    if (t == LUA_TNUMBER) {   /* luaL_tolstring works on a copy: lua_tostring would turn the number into a string */
        snprintf(out, n, "%s", luaL_tolstring(L, idx, NULL));
        lua_pop(L, 1);
    }
    else if (t == LUA_TSTRING) snprintf(out, n, "\"%s\"", lua_tostring(L, idx));
    else if (t == LUA_TBOOLEAN) snprintf(out, n, "%s", lua_toboolean(L, idx) ? "true" : "false");
    else snprintf(out, n, "a %s", lua_typename(L, t));
}

/* Stores the value at stack top (or the default text when absent) into the field. */
static int read_field(lua_State *L, Config *cfg, const char *section, const Field *f, Err *err) {
    char *base = (char *)cfg + f->off, got[256];
    const char *file = cfg->path;
    int present = !lua_isnil(L, -1);
    if (!present) {
        if (!f->dflt) return err_set(err, "%s: %s.%s: missing; expected a positive integer", file, section, f->key);
        lua_pop(L, 1);
        if (f->kind == K_STR || f->kind == K_ENUM) lua_pushstring(L, f->dflt);
        else if (f->kind == K_BOOL) lua_pushboolean(L, !strcmp(f->dflt, "true"));
        else if (f->kind == K_INT) lua_pushinteger(L, strtoll(f->dflt, NULL, 10));
        else lua_pushnumber(L, strtod(f->dflt, NULL));
    }
    describe_value(L, -1, got, sizeof got);
    switch (f->kind) {
    case K_INT: {
        int isnum = lua_type(L, -1) == LUA_TNUMBER;
        double d = isnum ? lua_tonumber(L, -1) : 0;
        if (!isnum || d != floor(d) || fabs(d) > 9.0e15)
            return err_set(err, "%s: %s.%s: expected an integer, got %s", file, section, f->key, got);
        if (d < f->min)
            return err_set(err, "%s: %s.%s: expected %s integer, got %s", file, section, f->key,
                           f->min >= 1 ? "a positive" : "a non-negative", got);
        if (f->size == sizeof(int)) {
            if (d > 2147483647.0) return err_set(err, "%s: %s.%s: %s is too large", file, section, f->key, got);
            *(int *)base = (int)d;
        } else *(long *)base = (long)d;
        break;
    }
    case K_NUM: {
        if (lua_type(L, -1) != LUA_TNUMBER)
            return err_set(err, "%s: %s.%s: expected a number, got %s", file, section, f->key, got);
        double d = lua_tonumber(L, -1);
        if (!(d >= f->min) || !isfinite(d))
            return err_set(err, "%s: %s.%s: expected a finite number >= %g, got %s", file, section, f->key, f->min, got);
        *(double *)base = d;
        break;
    }
    case K_STR: {
        if (lua_type(L, -1) != LUA_TSTRING)
            return err_set(err, "%s: %s.%s: expected a string, got %s", file, section, f->key, got);
        size_t len;
        const char *s = lua_tolstring(L, -1, &len);
        if (len >= f->size) return err_set(err, "%s: %s.%s: longer than %zu characters", file, section, f->key, f->size - 1);
        memcpy(base, s, len + 1);
        break;
    }
    case K_BOOL:
        if (lua_type(L, -1) != LUA_TBOOLEAN)
            return err_set(err, "%s: %s.%s: expected true or false, got %s", file, section, f->key, got);
        *(int *)base = lua_toboolean(L, -1);
        break;
    case K_ENUM: {
        char names[256];
        list_names(f->choices, names, sizeof names);
        if (lua_type(L, -1) != LUA_TSTRING)
            return err_set(err, "%s: %s.%s: expected one of %s, got %s", file, section, f->key, names, got);
        const char *s = lua_tostring(L, -1);
        int i;
        for (i = 0; f->choices[i] && strcmp(f->choices[i], s); i++) {}
        if (!f->choices[i]) return err_set(err, "%s: %s.%s: expected one of %s, got %s", file, section, f->key, names, got);
        *(int *)base = i;
        break;
    }
    }
    lua_pop(L, 1);
    return 0;
}

/* Checks that every key of the table at stack top is one of names. */
static int check_keys(lua_State *L, const char *file, const char *where, const char *const *names, Err *err) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) {
            lua_pop(L, 1);
            return err_set(err, "%s: %s: unexpected non-string key", file, where[0] ? where : "top level");
        }
        const char *k = lua_tostring(L, -1);
        int i;
        for (i = 0; names[i] && strcmp(names[i], k); i++) {}
        if (!names[i]) {
            char hint[128], known[512];
            suggest(k, names, hint, sizeof hint);
            list_names(names, known, sizeof known);
            err_set(err, "%s: %s%s%s: unknown key%s; known keys: %s", file, where, where[0] ? "." : "", k, hint, known);
            lua_pop(L, 1);
            return -1;
        }
    }
    return 0;
}

static int read_section(lua_State *L, Config *cfg, const Section *sec, Err *err) {
    lua_getfield(L, -1, sec->name);
    if (lua_isnil(L, -1)) { lua_pop(L, 1); lua_newtable(L); }
    if (!lua_istable(L, -1)) {
        char got[256];
        describe_value(L, -1, got, sizeof got);
        lua_pop(L, 1);
        return err_set(err, "%s: %s: expected a table, got %s", cfg->path, sec->name, got);
    }
    const char *names[64];
    int n = 0;
    for (const Field *f = sec->fields; f->key; f++) names[n++] = f->key;
    names[n] = NULL;
    if (check_keys(L, cfg->path, sec->name, names, err)) { lua_pop(L, 1); return -1; }
    for (const Field *f = sec->fields; f->key; f++) {
        lua_getfield(L, -1, f->key);
        if (read_field(L, cfg, sec->name, f, err)) { lua_settop(L, 0); return -1; }
    }
    lua_pop(L, 1);
    return 0;
}

static int read_tune(lua_State *L, Config *cfg, Err *err) {
    lua_getfield(L, -1, "tune");
    if (lua_isnil(L, -1)) { lua_pop(L, 1); return 0; }
    if (!lua_istable(L, -1)) { lua_pop(L, 1); return err_set(err, "%s: tune: expected a table like { layernorm = { BLOCK_SIZE = 256 } }", cfg->path); }
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        if (lua_type(L, -2) != LUA_TSTRING || !lua_istable(L, -1)) {
            lua_settop(L, 0);
            return err_set(err, "%s: tune: expected family = { NAME = value or {candidates} } entries", cfg->path);
        }
        const char *family = lua_tostring(L, -2);
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            if (cfg->n_tunables == CONFIG_MAX_TUNABLES) { lua_settop(L, 0); return err_set(err, "%s: tune: more than %d tunables", cfg->path, CONFIG_MAX_TUNABLES); }
            ConfigTunable *t = &cfg->tunables[cfg->n_tunables];
            if (lua_type(L, -2) != LUA_TSTRING) {
                lua_settop(L, 0);
                return err_set(err, "%s: tune.%s: expected NAME = value entries with string names, like BLOCK_SIZE = 256", cfg->path, family);
            }
            const char *name = lua_tostring(L, -2);
            snprintf(t->family, sizeof t->family, "%s", family);
            snprintf(t->name, sizeof t->name, "%s", name);
            int ok = 1;
            if (lua_isinteger(L, -1)) {
                lua_Integer v = lua_tointeger(L, -1);
                t->n_values = 1;
                t->values[0] = (int)v;
                ok = v > 0 && v <= INT_MAX;
            }
            else if (lua_istable(L, -1)) {
                int n = (int)lua_rawlen(L, -1);
                ok = n >= 1 && n <= 16;
                for (int i = 1; ok && i <= n; i++) {
                    lua_rawgeti(L, -1, i);
                    ok = lua_isinteger(L, -1) && lua_tointeger(L, -1) > 0 && lua_tointeger(L, -1) <= INT_MAX;
                    t->values[i - 1] = (int)lua_tointeger(L, -1);
                    lua_pop(L, 1);
                }
                t->n_values = n;
            } else ok = 0;
            if (!ok) {
                lua_settop(L, 0);
                return err_set(err, "%s: tune.%s.%s: expected a positive integer or a list of 1 to 16 of them", cfg->path, family, name);
            }
            cfg->n_tunables++;
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return 0;
}

static int read_top_string(lua_State *L, Config *cfg, const char *key, char *out, size_t n, Err *err) {
    lua_getfield(L, -1, key);
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TSTRING) {
            char got[256];
            describe_value(L, -1, got, sizeof got);
            lua_pop(L, 1);
            return err_set(err, "%s: %s: expected a string, got %s", cfg->path, key, got);
        }
        size_t len;
        const char *s = lua_tolstring(L, -1, &len);
        if (len >= n) { lua_pop(L, 1); return err_set(err, "%s: %s: longer than %zu characters", cfg->path, key, n - 1); }
        memcpy(out, s, len + 1);
    }
    lua_pop(L, 1);
    return 0;
}

/* ---------------------------------------------------------------- cross-field checks */

static int validate(Config *c, Err *err) {
    const char *f = c->path;
    for (const char *p = c->name; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
            return err_set(err, "%s: name: \"%s\" may hold only letters, digits, '-', '_' and '.' (it names build/<name>/)", f, c->name);
    if (!c->name[0]) return err_set(err, "%s: name: expected a non-empty string", f);
    if (c->model.n_embd % c->model.n_head)
        return err_set(err, "%s: model.n_embd: %d is not divisible by model.n_head %d", f, c->model.n_embd, c->model.n_head);
    int hs = c->model.n_embd / c->model.n_head;
    if (hs % 8 || hs > 256)
        return err_set(err, "%s: model: head size n_embd/n_head = %d is not supported; the templates need a multiple of 8, at most 256", f, hs);
    if (c->model.n_embd % 32)
        return err_set(err, "%s: model.n_embd: %d is not supported; the templates need a multiple of 32", f, c->model.n_embd);
    c->model.padded_vocab_size = (c->model.vocab_size + 127) / 128 * 128;
    if (c->model.vocab_size > 65536)
        return err_set(err, "%s: model.vocab_size: %d does not fit the uint16 token shards (at most 65536)", f, c->model.vocab_size);
    if (c->train.seq_len == 0) c->train.seq_len = c->model.max_seq_len;
    if (c->train.seq_len > c->model.max_seq_len)
        return err_set(err, "%s: train.seq_len: %d is larger than model.max_seq_len %d", f, c->train.seq_len, c->model.max_seq_len);
    long tokens = (long)c->train.batch_size * c->train.seq_len * c->train.num_gpus;
    if (c->train.total_batch_size == 0) c->train.total_batch_size = tokens;
    if (c->train.total_batch_size % tokens)
        return err_set(err, "%s: train.total_batch_size: %ld is not a multiple of batch_size*seq_len*num_gpus = %d*%d*%d = %ld",
                       f, c->train.total_batch_size, c->train.batch_size, c->train.seq_len, c->train.num_gpus, tokens);
    c->train.grad_accum = (int)(c->train.total_batch_size / tokens);
    if (c->train.final_lr_frac > 1) return err_set(err, "%s: train.final_lr_frac: expected a number in [0, 1], got %g", f, c->train.final_lr_frac);
    if (c->train.beta1 >= 1 || c->train.beta2 >= 1) return err_set(err, "%s: train.beta1/beta2: expected numbers in [0, 1)", f);
    if (c->train.recompute > 2) return err_set(err, "%s: train.recompute: expected 0 (none), 1 (GELU) or 2 (GELU and LayerNorm), got %d", f, c->train.recompute);
    if (c->eval.sample_tokens > c->train.seq_len)
        return err_set(err, "%s: eval.sample_tokens: %d is larger than train.seq_len %d", f, c->eval.sample_tokens, c->train.seq_len);
    if (c->arch[0]) {
        int v = 0;
        if (sscanf(c->arch, "sm_%d", &v) != 1 || v < 70)
            return err_set(err, "%s: arch: expected \"sm_XX\" with XX >= 70 (e.g. \"sm_90\"), got \"%s\"", f, c->arch);
    }
    if (!c->checkpoint.dir[0]) snprintf(c->checkpoint.dir, sizeof c->checkpoint.dir, "runs/%s", c->name);
    return 0;
}

/* ---------------------------------------------------------------- entry point */

static void default_name(const char *path, char *out, size_t n) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    const char *dot = strrchr(b, '.');
    int len = dot && !strcmp(dot, ".lua") ? (int)(dot - b) : (int)strlen(b);
    snprintf(out, n, "%.*s", len, b);
}

static int read_config(lua_State *L, Config *cfg, Err *err) {
    if (check_keys(L, cfg->path, "", TOP_KEYS, err)) return -1;
    if (read_top_string(L, cfg, "name", cfg->name, sizeof cfg->name, err)) return -1;
    if (read_top_string(L, cfg, "arch", cfg->arch, sizeof cfg->arch, err)) return -1;
    lua_getfield(L, -1, "model");
    int has_model = lua_istable(L, -1);
    lua_pop(L, 1);
    if (!has_model) return err_set(err, "%s: model: missing; expected model = { n_layer = ..., n_head = ..., n_embd = ... }", cfg->path);
    Field prec = {"precision", K_ENUM, offsetof(Config, precision), 0, "bf16", PRECISIONS, 0};
    lua_getfield(L, -1, "precision");
    if (read_field(L, cfg, "config", &prec, err)) {
        /* the message says "config.precision"; make it the plain key */
        char *p = strstr(err->msg, "config.precision");
        if (p) memmove(p, p + 7, strlen(p + 7) + 1);
        return -1;
    }
    for (const Section *s = SECTIONS; s->name; s++)
        if (read_section(L, cfg, s, err)) return -1;
    return read_tune(L, cfg, err);
}

int config_load(Config *cfg, const char *path, const char *const *overrides, int n_overrides, Err *err) {
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->path, sizeof cfg->path, "%s", path);
    default_name(path, cfg->name, sizeof cfg->name);
    if (!file_exists(path)) return err_set(err, "%s: no such config file", path);
    Eval ev;
    if (sandbox_open(&ev)) { if (ev.L) lua_close(ev.L); return err_set(err, "%s: cannot start the Lua sandbox", path); }
    int rc = 0;
    if (run_file(&ev, path)) {
        const char *msg = lua_tostring(ev.L, -1);
        if (msg && strstr(msg, "not enough memory"))
            rc = err_set(err, "%s: the config allocated more than %u MiB (an endless table?)", path, CONFIG_MEM_LIMIT >> 20);
        else rc = err_set(err, "%s", msg ? msg : "error in config");
        /* a Lua runtime error already says file:line; make sure the file is named */
        if (msg && !strstr(err->msg, path) && !strstr(msg, ".lua:")) {
            char tmp[sizeof err->msg];
            snprintf(tmp, sizeof tmp, "%s: %s", path, msg);
            snprintf(err->msg, sizeof err->msg, "%s", tmp);
        }
    }
    for (int i = 0; rc == 0 && i < n_overrides; i++) rc = apply_override(&ev, overrides[i], path, err);
    if (rc == 0) {
        lua_sethook(ev.L, NULL, 0, 0);
        lua_rawgeti(ev.L, LUA_REGISTRYINDEX, ev.store_ref);
        rc = read_config(ev.L, cfg, err);
    }
    lua_close(ev.L);
    if (rc == 0) rc = validate(cfg, err);
    return rc;
}

const char *precision_name(Precision p) { return PRECISIONS[p]; }
const char *schedule_name(Schedule s) { return SCHEDULES[s]; }

int config_tunable(const Config *cfg, const char *family, const char *name, int dflt) {
    for (int i = 0; i < cfg->n_tunables; i++)
        if (!strcmp(cfg->tunables[i].family, family) && !strcmp(cfg->tunables[i].name, name))
            return cfg->tunables[i].values[0];
    return dflt;
}

/* ---------------------------------------------------------------- writing the resolved config */

/* A Lua string literal of s that reads back as the same bytes: quote and backslash escaped, control bytes as
   decimal escapes (three digits, so a digit after one cannot extend it); bytes >= 0x80 (UTF-8) stay as they are. */
static void write_lua_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') { fputc('\\', f); fputc(*p, f); }
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\%03u", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* A table key: the bare name where Lua allows one (an identifier that is not a keyword), else ["..."]. */
static void write_lua_key(FILE *f, const char *k) {
    static const char *const KEYWORDS[] = {"and", "break", "do", "else", "elseif", "end", "false", "for", "function",
        "goto", "if", "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while", NULL};
    int bare = (k[0] >= 'a' && k[0] <= 'z') || (k[0] >= 'A' && k[0] <= 'Z') || k[0] == '_';
    for (const char *p = k; bare && *p; p++)
        bare = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_';
    for (int i = 0; bare && KEYWORDS[i]; i++) bare = strcmp(k, KEYWORDS[i]) != 0;
    if (bare) fputs(k, f);
    else { fputc('[', f); write_lua_string(f, k); fputc(']', f); }
}

/* %.17g reads back as the same double; "-0" would read back as the integer 0, so it is written as a float. */
static void write_lua_number(FILE *f, double d) {
    if (d == 0 && signbit(d)) fputs("-0.0", f);
    else fprintf(f, "%.17g", d);
}

static void write_section(FILE *f, const Config *c, const Section *sec) {
    fprintf(f, "%s = {\n", sec->name);
    for (const Field *fl = sec->fields; fl->key; fl++) {
        const char *base = (const char *)c + fl->off;
        fprintf(f, "  %s = ", fl->key);
        switch (fl->kind) {
        case K_INT: fprintf(f, "%ld", fl->size == sizeof(int) ? (long)*(const int *)base : *(const long *)base); break;
        case K_NUM: write_lua_number(f, *(const double *)base); break;
        case K_STR: write_lua_string(f, base); break;
        case K_BOOL: fputs(*(const int *)base ? "true" : "false", f); break;
        case K_ENUM: write_lua_string(f, fl->choices[*(const int *)base]); break;
        }
        fprintf(f, ",\n");
    }
    fprintf(f, "}\n");
}

static int tunable_order(const void *a, const void *b) {
    const ConfigTunable *x = *(const ConfigTunable *const *)a, *y = *(const ConfigTunable *const *)b;
    int d = strcmp(x->family, y->family);
    return d ? d : strcmp(x->name, y->name);
}

/* One entry per family, holding all of its tunables: `family = { A = 1, B = {2, 3} }`. Lua keeps only the last
   of two entries with one key, so two tunables of a family must share one table. Families and tunables are
   sorted by name: the order the config's tables gave them in does not survive Lua (hash order), and the same
   config must give the same text. */
static void write_tune(FILE *f, const Config *c) {
    const ConfigTunable *order[CONFIG_MAX_TUNABLES];
    int n = c->n_tunables < CONFIG_MAX_TUNABLES ? c->n_tunables : CONFIG_MAX_TUNABLES;
    for (int i = 0; i < n; i++) order[i] = &c->tunables[i];
    qsort(order, (size_t)n, sizeof order[0], tunable_order);
    fprintf(f, "tune = {\n");
    for (int i = 0; i < n; i++) {
        const ConfigTunable *t = order[i];
        int first = i == 0 || strcmp(order[i - 1]->family, t->family) != 0;
        int last = i == n - 1 || strcmp(order[i + 1]->family, t->family) != 0;
        if (first) { fputs("  ", f); write_lua_key(f, t->family); fputs(" = { ", f); }
        write_lua_key(f, t->name);
        fputs(" = ", f);
        if (t->n_values == 1) fprintf(f, "%d", t->values[0]);
        else { fprintf(f, "{"); for (int j = 0; j < t->n_values; j++) fprintf(f, "%s%d", j ? ", " : "", t->values[j]); fprintf(f, "}"); }
        fputs(last ? " },\n" : ", ", f);
    }
    fprintf(f, "}\n");
}

/* The header names no source file: writing the config read back from this file gives this file again. */
void config_write_lua(const Config *c, FILE *f) {
    fprintf(f, "-- %s, resolved with every default (written by gpt2gen)\n", c->name);
    fputs("name = ", f); write_lua_string(f, c->name);
    fputs("\nprecision = ", f); write_lua_string(f, precision_name(c->precision));
    fputs("\n", f);
    if (c->arch[0]) { fputs("arch = ", f); write_lua_string(f, c->arch); fputs("\n", f); }
    for (const Section *s = SECTIONS; s->name; s++) write_section(f, c, s);
    write_tune(f, c);
}

GPT2Shape config_shape(const Config *cfg) {
    GPT2Shape s = {cfg->model.max_seq_len, cfg->model.vocab_size, cfg->model.padded_vocab_size,
                   cfg->model.n_layer, cfg->model.n_head, cfg->model.n_embd};
    return s;
}
