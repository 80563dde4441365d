/* config: a Lua 5.4 config (evaluated by gen/sandbox.c) read into a Config against the schema, and
 * validated once. Every key is checked (unknown keys get a did-you-mean), every value's type and range. */
#include "gen/config.h"
#include "gen/config_schema.h"
#include "gen/sandbox.h"
#include "common/files.h"
#include <ctype.h>
#include <lauxlib.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- the schema */

static const char *const PRECISIONS[] = {"fp32", "bf16", "fp16", NULL};
static const char *const ATTENTIONS[] = {"auto", "cudnn", "flash", NULL};
static const char *const SCHEDULES[] = {"cosine", "linear", "constant", "wsd", NULL};

#define F_INT(sec, k, d, mn, mx) {#k, K_INT, offsetof(Config, sec.k), sizeof(((Config *)0)->sec.k), d, NULL, mn, mx}
#define F_NUM(sec, k, d, mn)  {#k, K_NUM, offsetof(Config, sec.k), 0, d, NULL, mn, 0}
#define F_STR(sec, k, d)      {#k, K_STR, offsetof(Config, sec.k), sizeof(((Config *)0)->sec.k), d, NULL, 0, 0}
#define F_BOOL(sec, k, d)     {#k, K_BOOL, offsetof(Config, sec.k), sizeof(((Config *)0)->sec.k), d, NULL, 0, 0}

/* Every int's range fits its field; the products of several are checked in validate(). train.steps stops one
   short of INT_MAX: the training loop counts up to it, inclusive, in an int. */
static const Field MODEL_FIELDS[] = {
    F_INT(model, n_layer, NULL, 1, INT_MAX), F_INT(model, n_head, NULL, 1, INT_MAX), F_INT(model, n_embd, NULL, 1, INT_MAX),
    F_INT(model, max_seq_len, "1024", 1, INT_MAX), F_INT(model, vocab_size, "50257", 2, INT_MAX), {0}};
static const Field TRAIN_FIELDS[] = {
    F_INT(train, batch_size, "4", 1, INT_MAX), F_INT(train, seq_len, "0", 0, INT_MAX),
    F_INT(train, total_batch_size, "0", 0, LONG_MAX)   /* 0: derived */,
    F_INT(train, steps, "1000", 1, INT_MAX - 1), F_NUM(train, lr, "6e-4", 0),
    {"schedule", K_ENUM, offsetof(Config, train.schedule), 0, "cosine", SCHEDULES, 0, 0},
    F_INT(train, warmup, "0", 0, INT_MAX), F_NUM(train, final_lr_frac, "0", 0), F_NUM(train, weight_decay, "0.1", 0),
    F_NUM(train, grad_clip, "1.0", 0), F_NUM(train, beta1, "0.9", 0), F_NUM(train, beta2, "0.95", 0),
    F_NUM(train, eps, "1e-8", 0), F_INT(train, seed, "1337", 0, LONG_MAX), F_INT(train, recompute, "1", 0, INT_MAX),
    F_BOOL(train, master_weights, "true"), F_BOOL(train, overfit_batch, "false"), F_INT(train, num_gpus, "1", 1, INT_MAX),
    F_INT(train, zero_stage, "1", 0, 1),
    F_NUM(train, loss_scale, "65536", 1), F_INT(train, loss_scale_interval, "1000", 1, INT_MAX), {0}};
static const Field DATA_FIELDS[] = {
    F_STR(data, train, "data/fortunes/train_*.bin"), F_STR(data, val, "data/fortunes/val_*.bin"),
    F_STR(data, tokenizer, "data/fortunes/tokenizer.bin"), {0}};
static const Field EVAL_FIELDS[] = {
    F_INT(eval, val_every, "250", 0, INT_MAX), F_INT(eval, val_batches, "20", 0, INT_MAX),
    F_INT(eval, sample_every, "500", 0, INT_MAX), F_INT(eval, sample_tokens, "64", 0, INT_MAX),
    F_NUM(eval, temperature, "1.0", 0), {0}};
static const Field CHECKPOINT_FIELDS[] = {
    F_STR(checkpoint, dir, ""), F_INT(checkpoint, every, "0", 0, INT_MAX), F_STR(checkpoint, init, ""),
    F_BOOL(checkpoint, resume, "false"), {0}};

const Section SECTIONS[] = {
    {"model", MODEL_FIELDS}, {"train", TRAIN_FIELDS}, {"data", DATA_FIELDS},
    {"eval", EVAL_FIELDS}, {"checkpoint", CHECKPOINT_FIELDS}, {NULL, NULL}};
static const char *const TOP_KEYS[] = {"name", "model", "precision", "train", "data", "eval", "checkpoint", "tune", "arch", "attention", NULL};

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

/* Stores the value at stack top (or the default text when absent) into the field, and pops it. section is
   NULL for a top-level key. */
static int read_field(lua_State *L, Config *cfg, const char *section, const Field *f, Err *err) {
    char *base = (char *)cfg + f->off, got[256], where[128];
    const char *file = cfg->path;
    if (section) snprintf(where, sizeof where, "%s.%s", section, f->key);
    else snprintf(where, sizeof where, "%s", f->key);
    int present = !lua_isnil(L, -1);
    if (!present) {
        if (!f->dflt) return err_set(err, "%s: %s: missing; expected a positive integer", file, where);
        lua_pop(L, 1);
        if (f->kind == K_STR || f->kind == K_ENUM) lua_pushstring(L, f->dflt);
        else if (f->kind == K_BOOL) lua_pushboolean(L, !strcmp(f->dflt, "true"));
        else if (f->kind == K_INT) lua_pushinteger(L, strtoll(f->dflt, NULL, 10));
        else lua_pushnumber(L, strtod(f->dflt, NULL));
    }
    describe_value(L, -1, got, sizeof got);
    switch (f->kind) {
    case K_INT: {
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
    case K_NUM: {
        if (lua_type(L, -1) != LUA_TNUMBER) return err_set(err, "%s: %s: expected a number, got %s", file, where, got);
        double d = lua_tonumber(L, -1);
        if (!(d >= f->min) || !isfinite(d))
            return err_set(err, "%s: %s: expected a finite number >= %g, got %s", file, where, f->min, got);
        *(double *)base = d;
        break;
    }
    case K_STR:
        if (lua_type(L, -1) != LUA_TSTRING) return err_set(err, "%s: %s: expected a string, got %s", file, where, got);
        if (copy_string(L, -1, base, f->size, file, where, err)) return -1;
        break;
    case K_BOOL:
        if (lua_type(L, -1) != LUA_TBOOLEAN) return err_set(err, "%s: %s: expected true or false, got %s", file, where, got);
        *(int *)base = lua_toboolean(L, -1);
        break;
    case K_ENUM: {
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
            err_set(err, "%s: %s%s%s: unknown key%s; known keys: %s", file, where, where[0] ? "." : "", k, hint, known);
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
        char family[sizeof cfg->tunables[0].family], where[128];
        if (copy_string(L, -2, family, sizeof family, file, "tune: a family name", err)) return -1;
        snprintf(where, sizeof where, "tune.%s", family);
        if (plain_table(L, -1, file, where, err)) return -1;
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            if (cfg->n_tunables == CONFIG_MAX_TUNABLES) return err_set(err, "%s: tune: more than %d tunables", file, CONFIG_MAX_TUNABLES);
            ConfigTunable *t = &cfg->tunables[cfg->n_tunables];
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
            cfg->n_tunables++;
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

/* ---------------------------------------------------------------- cross-field checks */

int config_arch_valid(const char *arch) {
    if (strncmp(arch, "sm_", 3)) return 0;
    const char *p = arch + 3;
    int v = 0, digits = 0;
    for (; isdigit((unsigned char)*p) && digits < 4; p++, digits++) v = v * 10 + (*p - '0');
    if (*p == 'a') p++;
    return digits >= 2 && !*p && v >= 70;
}

/* a*b and a+b that stop at UINT64_MAX instead of wrapping */
static uint64_t mul_sat(uint64_t a, uint64_t b) { uint64_t r; return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r; }
static uint64_t add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

#define MAX_PARAMS     (1ull << 40)   /* parameters (1.1e12) */
#define MAX_STEP_BYTES (1ull << 50)   /* one micro-step's activations (1 PiB) */

/* The sizes every later stage computes in 64 bits (the parameter count, the plan's memory in gen/memory.c) and
   in int (a micro-batch's tokens, the accumulation steps) are checked here without overflow, so none of them
   wraps. */
static int validate(Config *c, Err *err) {
    const char *f = c->path;
    if (c->model.n_embd % c->model.n_head)
        return err_set(err, "%s: model.n_embd: %d is not divisible by model.n_head %d", f, c->model.n_embd, c->model.n_head);
    int hs = c->model.n_embd / c->model.n_head;
    if (hs % 8 || hs > 256)
        return err_set(err, "%s: model: head size n_embd/n_head = %d is not supported; the templates need a multiple of 8, at most 256", f, hs);
    if (c->model.n_embd % 32)
        return err_set(err, "%s: model.n_embd: %d is not supported; the templates need a multiple of 32", f, c->model.n_embd);
    if (c->model.vocab_size > 65536)
        return err_set(err, "%s: model.vocab_size: %d does not fit the uint16 token shards (at most 65536)", f, c->model.vocab_size);
    c->model.padded_vocab_size = (c->model.vocab_size + 127) / 128 * 128;
    if (c->train.seq_len == 0) c->train.seq_len = c->model.max_seq_len;
    if (c->train.seq_len > c->model.max_seq_len)
        return err_set(err, "%s: train.seq_len: %d is larger than model.max_seq_len %d", f, c->train.seq_len, c->model.max_seq_len);

    uint64_t B = (uint64_t)c->train.batch_size, T = (uint64_t)c->train.seq_len, G = (uint64_t)c->train.num_gpus;
    uint64_t tokens = mul_sat(mul_sat(B, T), G);
    if (tokens > INT_MAX)
        return err_set(err, "%s: train.batch_size: batch_size*seq_len*num_gpus = %d*%d*%d is out of range: at most %d tokens per micro-step",
                       f, c->train.batch_size, c->train.seq_len, c->train.num_gpus, INT_MAX);
    if (c->train.total_batch_size == 0) c->train.total_batch_size = (long)tokens;
    if (c->train.total_batch_size % (long)tokens)
        return err_set(err, "%s: train.total_batch_size: %ld is not a multiple of batch_size*seq_len*num_gpus = %d*%d*%d = %ld",
                       f, c->train.total_batch_size, c->train.batch_size, c->train.seq_len, c->train.num_gpus, (long)tokens);
    if (c->train.total_batch_size / (long)tokens > INT_MAX)
        return err_set(err, "%s: train.total_batch_size: %ld is out of range: at most %ld (batch_size*seq_len*num_gpus = %ld tokens, "
                       "times at most %d accumulation steps)", f, c->train.total_batch_size, (long)tokens * INT_MAX, (long)tokens, INT_MAX);
    c->train.grad_accum = (int)(c->train.total_batch_size / (long)tokens);

    /* the parameter count (common/gpt2.c) and a bound on a micro-step's activations and scratch (gen/memory.c) */
    uint64_t L = (uint64_t)c->model.n_layer, C = (uint64_t)c->model.n_embd, NH = (uint64_t)c->model.n_head;
    uint64_t Vp = (uint64_t)c->model.padded_vocab_size, maxT = (uint64_t)c->model.max_seq_len;
    uint64_t per_layer = add_sat(mul_sat(12, mul_sat(C, C)), mul_sat(13, C));
    uint64_t params = add_sat(mul_sat(Vp + maxT + 2, C), mul_sat(L, per_layer));
    if (params > MAX_PARAMS)
        return err_set(err, "%s: model: n_layer=%d, n_embd=%d, vocab_size=%d, max_seq_len=%d give %.3g parameters: out of range: "
                       "at most %.3g", f, c->model.n_layer, c->model.n_embd, c->model.vocab_size, c->model.max_seq_len,
                       (double)params, (double)MAX_PARAMS);
    uint64_t BT = mul_sat(B, T);
    uint64_t att = mul_sat(mul_sat(B, NH), mul_sat(T, T));
    uint64_t layer_bytes = add_sat(mul_sat(BT, add_sat(mul_sat(32, C), 32)), mul_sat(2, att));
    uint64_t step_bytes = mul_sat(4, add_sat(mul_sat(L + 2, layer_bytes), mul_sat(BT, Vp)));
    if (step_bytes > MAX_STEP_BYTES)
        return err_set(err, "%s: train.batch_size: batch_size=%d, seq_len=%d with n_layer=%d, n_head=%d, n_embd=%d need %.3g bytes "
                       "of activations per micro-step: out of range: at most %.3g (1 PiB)", f, c->train.batch_size, c->train.seq_len,
                       c->model.n_layer, c->model.n_head, c->model.n_embd, (double)step_bytes, (double)MAX_STEP_BYTES);

    if (c->train.final_lr_frac > 1) return err_set(err, "%s: train.final_lr_frac: expected a number in [0, 1], got %g", f, c->train.final_lr_frac);
    if (c->train.beta1 >= 1 || c->train.beta2 >= 1) return err_set(err, "%s: train.beta1/beta2: expected numbers in [0, 1)", f);
    if (!config_loss_scale_valid(c->train.loss_scale))
        return err_set(err, "%s: train.loss_scale: expected a power of two from 1 to 2^24 = %.0f, got %g", f, LOSS_SCALE_MAX, c->train.loss_scale);
    if (c->precision == PREC_FP16 && !c->train.master_weights)
        return err_set(err, "%s: train.master_weights: precision fp16 needs true: AdamW keeps the weights in fp32 and rounds them "
                       "to fp16 to nearest; without that fp32 copy, updates below half an fp16 step would be lost", f);
    if (c->train.recompute > 2) return err_set(err, "%s: train.recompute: expected 0 (none), 1 (GELU) or 2 (GELU and LayerNorm), got %d", f, c->train.recompute);
    if (c->eval.sample_tokens > c->train.seq_len)
        return err_set(err, "%s: eval.sample_tokens: %d is larger than train.seq_len %d", f, c->eval.sample_tokens, c->train.seq_len);
    if (c->arch[0] && !config_arch_valid(c->arch))
        return err_set(err, "%s: arch: expected \"sm_XX\" with XX >= 70 (e.g. \"sm_90\"), got \"%s\"", f, c->arch);
    if (!c->checkpoint.dir[0]) snprintf(c->checkpoint.dir, sizeof c->checkpoint.dir, "runs/%s", c->name);   /* name < 128 */
    return 0;
}

/* ---------------------------------------------------------------- entry point */

/* The sandbox's reader: the table of everything the config assigned, into the Config. */
static int read_config(lua_State *L, void *ud, Err *err) {
    Config *cfg = ud;
    int given;
    if (check_keys(L, cfg->path, "", TOP_KEYS, err)) return -1;
    if (read_name(L, cfg, err)) return -1;
    if (read_top_string(L, cfg, "arch", cfg->arch, sizeof cfg->arch, &given, err)) return -1;
    int has_model = raw_field(L, -1, "model") == LUA_TTABLE;
    lua_pop(L, 1);
    if (!has_model) return err_set(err, "%s: model: missing; expected model = { n_layer = ..., n_head = ..., n_embd = ... }", cfg->path);
    Field prec = {"precision", K_ENUM, offsetof(Config, precision), 0, "bf16", PRECISIONS, 0, 0};
    raw_field(L, -1, "precision");
    if (read_field(L, cfg, NULL, &prec, err)) return -1;
    Field attn = {"attention", K_ENUM, offsetof(Config, attention), 0, "auto", ATTENTIONS, 0, 0};
    raw_field(L, -1, "attention");
    if (read_field(L, cfg, NULL, &attn, err)) return -1;
    for (const Section *s = SECTIONS; s->name; s++)
        if (read_section(L, cfg, s, err)) return -1;
    return read_tune(L, cfg, err);
}

int config_load(Config *cfg, const char *path, const char *const *overrides, int n_overrides, Err *err) {
    memset(cfg, 0, sizeof *cfg);
    size_t len = strlen(path);
    if (len >= sizeof cfg->path)
        return err_set(err, "%s: the config path is %zu characters long: at most %zu", path, len, sizeof cfg->path - 1);
    memcpy(cfg->path, path, len + 1);
    if (!file_exists(path)) return err_set(err, "%s: no such config file", path);
    if (sandbox_run(path, overrides, n_overrides, read_config, cfg, err)) return -1;
    return validate(cfg, err);
}

const char *precision_name(Precision p) { return PRECISIONS[p]; }
const char *attention_name(AttentionPath a) { return ATTENTIONS[a]; }

int config_tunable(const Config *cfg, const char *family, const char *name, int dflt) {
    for (int i = 0; i < cfg->n_tunables; i++)
        if (!strcmp(cfg->tunables[i].family, family) && !strcmp(cfg->tunables[i].name, name))
            return cfg->tunables[i].values[0];
    return dflt;
}

int config_loss_scale_valid(double x) {
    int e;
    return x >= 1 && x <= LOSS_SCALE_MAX && frexp(x, &e) == 0.5;
}

GPT2Shape config_shape(const Config *cfg) {
    GPT2Shape s = {cfg->model.max_seq_len, cfg->model.vocab_size, cfg->model.padded_vocab_size,
                   cfg->model.n_layer, cfg->model.n_head, cfg->model.n_embd};
    return s;
}
