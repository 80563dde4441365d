/* config_read: the values of a config (the table its Lua assigned, in the sandbox of gen/sandbox.c) read into
 * a Config against the schema (gen/config.c). Every key is checked (unknown keys get a did-you-mean), every
 * value's type and range; the checks across fields are gen/config_validate.c's. */
#include "gen/config.h"
#include "gen/config_internal.h"
#include "gen/config_schema.h"
#include <ctype.h>
#include <lauxlib.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---------------------------------------------------------------- reading values
 *
 * Reading runs inside the sandbox (sandbox_run's reader), in protected mode and under its limits. It runs no
 * Lua code: fields are read raw (lua_rawget, lua_next), and a table with a metatable is refused, so no
 * metamethod (__index, __pairs, __tostring ...) of the config's can run here. */

static void describe_value(lua_State *L, int idx, char *out, size_t n) {
    int t = lua_type(L, idx);
    if (t == LUA_TNUMBER) {   /* luaL_tolstring works on a copy: lua_tostring would turn the number into a string */
        snprintf(out, n, "%s", luaL_tolstring(L, idx, NULL));   /* numbers have no metatable: nothing runs */
        lua_pop(L, 1);
    }
    else if (t == LUA_TSTRING) snprintf(out, n, "\"%s\"", lua_tostring(L, idx));
    else if (t == LUA_TBOOLEAN) snprintf(out, n, "%s", lua_toboolean(L, idx) ? "true" : "false");
    else snprintf(out, n, "a %s", lua_typename(L, t));
}

/* Pushes t[key] for the table t at idx, raw; returns its type. */
static int raw_field(lua_State *L, int idx, const char *key) {
    idx = lua_absindex(L, idx);
    lua_pushstring(L, key);
    return lua_rawget(L, idx);
}

/* 0 when the table at idx has no metatable, else -1 with err set: the config's values are plain data. */
static int plain_table(lua_State *L, int idx, const char *file, const char *where, Err *err) {
    if (!lua_getmetatable(L, idx)) return 0;
    lua_pop(L, 1);
    return err_set(err, "%s: %s: a table with a metatable is not allowed here (a config's values are plain data)", file, where);
}

/* Copies the string at idx into out (size bytes). -1 with err set when it does not fit or holds a NUL byte
   (a C string would end there and silently drop the rest). */
static int copy_string(lua_State *L, int idx, char *out, size_t size, const char *file, const char *where, Err *err) {
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    if (strlen(s) != len) return err_set(err, "%s: %s: the string holds a NUL byte", file, where);
    if (len >= size) return err_set(err, "%s: %s: %zu characters is too long: at most %zu", file, where, len, size - 1);
    memcpy(out, s, len + 1);
    return 0;
}

/* The value at idx as a 64-bit integer: an integer, or a float with an integral value. */
typedef enum { INT_OK, INT_NOT_INTEGER, INT_BELOW, INT_ABOVE } IntRead;
static IntRead read_int64(lua_State *L, int idx, long long *v) {
    if (lua_isinteger(L, idx)) { *v = lua_tointeger(L, idx); return INT_OK; }
    if (lua_type(L, idx) != LUA_TNUMBER) return INT_NOT_INTEGER;
    double d = lua_tonumber(L, idx);
    if (!isfinite(d) || d != floor(d)) return INT_NOT_INTEGER;   /* nan, inf, 2.5 */
    if (d >= 0x1p63) return INT_ABOVE;
    if (d < -0x1p63) return INT_BELOW;
    *v = (long long)d;
    return INT_OK;
}

/* Pushes the field's default (its text, as a value of its kind). */
static void push_default(lua_State *L, const Field *f) {
    if (f->kind == VAL_STR || f->kind == VAL_ENUM) lua_pushstring(L, f->dflt);
    else if (f->kind == VAL_BOOL) lua_pushboolean(L, !strcmp(f->dflt, "true"));
    else if (f->kind == VAL_INT) lua_pushinteger(L, strtoll(f->dflt, NULL, 10));
    else lua_pushnumber(L, strtod(f->dflt, NULL));
}

/* Stores the value at stack top (or the default text when absent) into the field, and pops it. section is
   NULL for a top-level key. */
static int read_field(lua_State *L, Config *cfg, const char *section, const Field *f, Err *err) {
    char *base = (char *)cfg + f->off, got[256], where[128];
    const char *file = cfg->path;
    if (section) snprintf(where, sizeof where, "%s.%s", section, f->key);
    else snprintf(where, sizeof where, "%s", f->key);
    if (lua_isnil(L, -1)) {
        if (!f->dflt) return err_set(err, "%s: %s: missing; expected a positive integer", file, where);
        lua_pop(L, 1);
        push_default(L, f);
    }
    describe_value(L, -1, got, sizeof got);
    switch (f->kind) {
    case VAL_INT: {
        long long v = 0;
        IntRead r = read_int64(L, -1, &v);
        if (r == INT_NOT_INTEGER) return err_set(err, "%s: %s: expected an integer, got %s", file, where, got);
        if (r == INT_BELOW || (r == INT_OK && v < f->min)) {
            if (f->min == 0 || f->min == 1)
                return err_set(err, "%s: %s: expected a %s integer, got %s", file, where, f->min == 1 ? "positive" : "non-negative", got);
            return err_set(err, "%s: %s: %s is out of range: at least %.0f", file, where, got, f->min);
        }
        if (r == INT_ABOVE || (r == INT_OK && v > f->max)) return err_set(err, "%s: %s: %s is out of range: at most %lld", file, where, got, f->max);
        if (f->size == sizeof(int)) *(int *)base = (int)v;
        else *(long *)base = (long)v;
        break;
    }
    case VAL_NUM: {
        if (lua_type(L, -1) != LUA_TNUMBER) return err_set(err, "%s: %s: expected a number, got %s", file, where, got);
        double d = lua_tonumber(L, -1);
        if (!(d >= f->min) || !isfinite(d))
            return err_set(err, "%s: %s: expected a finite number >= %g, got %s", file, where, f->min, got);
        *(double *)base = d;
        break;
    }
    case VAL_STR:
        if (lua_type(L, -1) != LUA_TSTRING) return err_set(err, "%s: %s: expected a string, got %s", file, where, got);
        if (copy_string(L, -1, base, f->size, file, where, err)) return -1;
        break;
    case VAL_BOOL:
        if (lua_type(L, -1) != LUA_TBOOLEAN) return err_set(err, "%s: %s: expected true or false, got %s", file, where, got);
        *(int *)base = lua_toboolean(L, -1);
        break;
    case VAL_ENUM: {
        char names[256];
        list_names(f->choices, names, sizeof names);
        size_t len = 0;
        const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
        int i = 0;
        if (s && strlen(s) == len)
            for (; f->choices[i] && strcmp(f->choices[i], s); i++) {}
        if (!s || strlen(s) != len || !f->choices[i])
            return err_set(err, "%s: %s: expected one of %s, got %s", file, where, names, got);
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
        size_t len = 0;
        const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
        if (!k || strlen(k) != len) {
            lua_pop(L, 1);
            return err_set(err, "%s: %s: unexpected key that is not a plain string", file, where[0] ? where : "top level");
        }
        int i;
        for (i = 0; names[i] && strcmp(names[i], k); i++) {}
        if (!names[i]) {
            char hint[128], known[512];
            suggest(k, names, hint, sizeof hint);
            list_names(names, known, sizeof known);
            err_set(err, "%s: %s%s%s: unknown key%s; known keys: %s", file, where, where[0] ? "." : "", err_show(k), hint, known);
            lua_pop(L, 1);
            return -1;
        }
    }
    return 0;
}

static int read_section(lua_State *L, Config *cfg, const Section *sec, Err *err) {
    raw_field(L, -1, sec->name);
    if (lua_isnil(L, -1)) { lua_pop(L, 1); lua_newtable(L); }
    if (!lua_istable(L, -1)) {
        char got[256];
        describe_value(L, -1, got, sizeof got);
        lua_pop(L, 1);
        return err_set(err, "%s: %s: expected a table, got %s", cfg->path, sec->name, got);
    }
    const char *names[32];
    int n = 0;
    for (const Field *f = sec->fields; f->key; f++) {
        if (n == (int)(sizeof names / sizeof names[0]) - 1) return err_set(err, "config section %s: too many keys", sec->name);
        names[n++] = f->key;
    }
    names[n] = NULL;
    if (plain_table(L, -1, cfg->path, sec->name, err) || check_keys(L, cfg->path, sec->name, names, err)) return -1;
    for (const Field *f = sec->fields; f->key; f++) {
        raw_field(L, -1, f->key);
        if (read_field(L, cfg, sec->name, f, err)) return -1;
    }
    lua_pop(L, 1);
    return 0;
}

/* tune = { family = { NAME = value or {candidates} } }; family and NAME at most 31 characters. */
static int read_tune(lua_State *L, Config *cfg, Err *err) {
    const char *file = cfg->path;
    raw_field(L, -1, "tune");
    if (lua_isnil(L, -1)) { lua_pop(L, 1); return 0; }
    if (!lua_istable(L, -1)) return err_set(err, "%s: tune: expected a table like { layernorm = { BLOCK_SIZE = 256 } }", file);
    if (plain_table(L, -1, file, "tune", err)) return -1;
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        if (lua_type(L, -2) != LUA_TSTRING || !lua_istable(L, -1))
            return err_set(err, "%s: tune: expected family = { NAME = value or {candidates} } entries", file);
        char family[sizeof cfg->run.tunables[0].family], where[128];
        if (copy_string(L, -2, family, sizeof family, file, "tune: a family name", err)) return -1;
        snprintf(where, sizeof where, "tune.%s", family);
        if (plain_table(L, -1, file, where, err)) return -1;
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            if (cfg->run.n_tunables == CONFIG_MAX_TUNABLES) return err_set(err, "%s: tune: more than %d tunables", file, CONFIG_MAX_TUNABLES);
            ConfigTunable *t = &cfg->run.tunables[cfg->run.n_tunables];
            if (lua_type(L, -2) != LUA_TSTRING)
                return err_set(err, "%s: tune.%s: expected NAME = value entries with string names, like BLOCK_SIZE = 256", file, family);
            memcpy(t->family, family, sizeof family);
            snprintf(where, sizeof where, "tune.%s: a tunable's name", family);
            if (copy_string(L, -2, t->name, sizeof t->name, file, where, err)) return -1;
            snprintf(where, sizeof where, "tune.%s.%s", family, t->name);
            int ok = 1;
            if (lua_isinteger(L, -1)) {
                lua_Integer v = lua_tointeger(L, -1);
                t->n_values = 1;
                t->values[0] = (int)v;
                ok = v > 0 && v <= INT_MAX;
            }
            else if (lua_istable(L, -1)) {
                if (plain_table(L, -1, file, where, err)) return -1;
                lua_Unsigned n = lua_rawlen(L, -1);
                ok = n >= 1 && n <= 16;
                for (int i = 1; ok && i <= (int)n; i++) {
                    lua_rawgeti(L, -1, i);
                    ok = lua_isinteger(L, -1) && lua_tointeger(L, -1) > 0 && lua_tointeger(L, -1) <= INT_MAX;
                    t->values[i - 1] = (int)lua_tointeger(L, -1);
                    lua_pop(L, 1);
                }
                t->n_values = (int)n;
            } else ok = 0;
            if (!ok) return err_set(err, "%s: %s: expected a positive integer or a list of 1 to 16 of them", file, where);
            cfg->run.n_tunables++;
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return 0;
}

/* A top-level string key into out; *given says whether the config has it. */
static int read_top_string(lua_State *L, Config *cfg, const char *key, char *out, size_t n, int *given, Err *err) {
    *given = raw_field(L, -1, key) != LUA_TNIL;
    if (*given) {
        if (lua_type(L, -1) != LUA_TSTRING) {
            char got[256];
            describe_value(L, -1, got, sizeof got);
            return err_set(err, "%s: %s: expected a string, got %s", cfg->path, key, got);
        }
        if (copy_string(L, -1, out, n, cfg->path, key, err)) return -1;
    }
    lua_pop(L, 1);
    return 0;
}

/* The name: the config's, else the file's name without ".lua". It names build/<name>/ and runs/<name>/, so it
   holds only letters, digits, '-', '_' and '.', and does not start with '.' (no "..", no hidden folders). */
static int read_name(lua_State *L, Config *cfg, Err *err) {
    const char *f = cfg->path;
    int given;
    if (read_top_string(L, cfg, "name", cfg->name, sizeof cfg->name, &given, err)) return -1;
    const char *from = given ? "" : " (from the file name: set name = \"...\" in the config)";
    if (!given) {
        const char *b = strrchr(f, '/');
        b = b ? b + 1 : f;
        size_t len = strlen(b);
        if (len > 4 && !strcmp(b + len - 4, ".lua")) len -= 4;
        if (len >= sizeof cfg->name)
            return err_set(err, "%s: name: %zu characters is too long: at most %zu%s", f, len, sizeof cfg->name - 1, from);
        memcpy(cfg->name, b, len);
        cfg->name[len] = 0;
    }
    if (!cfg->name[0]) return err_set(err, "%s: name: expected a non-empty string%s", f, from);
    for (const char *p = cfg->name; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
            return err_set(err, "%s: name: \"%s\" may hold only letters, digits, '-', '_' and '.' (it names build/<name>/)%s",
                           f, cfg->name, from);
    if (cfg->name[0] == '.')
        return err_set(err, "%s: name: \"%s\" may not start with '.' (it names build/<name>/ and runs/<name>/)%s", f, cfg->name, from);
    return 0;
}

/* ---------------------------------------------------------------- the whole config */

/* The sandbox's reader: the table of everything the config assigned, into the Config. */
int config_read(lua_State *L, void *ud, Err *err) {
    Config *cfg = ud;
    int given;
    if (check_keys(L, cfg->path, "", TOP_KEYS, err)) return -1;
    if (read_name(L, cfg, err)) return -1;
    if (read_top_string(L, cfg, "arch", cfg->run.arch, sizeof cfg->run.arch, &given, err)) return -1;
    int has_model = raw_field(L, -1, "model") == LUA_TTABLE;
    lua_pop(L, 1);
    if (!has_model) return err_set(err, "%s: model: missing; expected model = { n_layer = ..., n_head = ..., n_embd = ... }", cfg->path);
    Field prec = {"precision", VAL_ENUM, offsetof(Config, model.precision), 0, "bf16", PRECISIONS, 0, 0};
    raw_field(L, -1, "precision");
    if (read_field(L, cfg, NULL, &prec, err)) return -1;
    Field attn = {"attention", VAL_ENUM, offsetof(Config, run.attention), 0, "auto", ATTENTIONS, 0, 0};
    raw_field(L, -1, "attention");
    if (read_field(L, cfg, NULL, &attn, err)) return -1;
    for (const Section *s = SECTIONS; s->name; s++)
        if (read_section(L, cfg, s, err)) return -1;
    return read_tune(L, cfg, err);
}
