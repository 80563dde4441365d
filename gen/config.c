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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- the schema */

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

const Section SECTIONS[] = {
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
    int rc = sandbox_eval(&ev, path, overrides, n_overrides, err);
    if (rc == 0) rc = read_config(ev.L, cfg, err);
    sandbox_close(&ev);
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

GPT2Shape config_shape(const Config *cfg) {
    GPT2Shape s = {cfg->model.max_seq_len, cfg->model.vocab_size, cfg->model.padded_vocab_size,
                   cfg->model.n_layer, cfg->model.n_head, cfg->model.n_embd};
    return s;
}
